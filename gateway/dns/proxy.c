/*
 * proxy: the DNS proxy of sluiced (DESIGN §5). One pass per query:
 * parse strictly, identify the sandbox by source address, rate-limit and
 * screen the name for tunnelling, ask the policy, and then either answer
 * locally (uniform deny, NODATA, synthetic) or forward upstream with a fresh
 * random id on a short-lived socket of random port. The upstream answer is checked against the
 * question, cut down to the CNAME chain of the queried name, every address
 * is classified, and the answer waits with its elements until the end of
 * the loop iteration: then the elements of every answer that became ready
 * in that iteration go to the learn hook in one call (one netlink batch,
 * one kernel round trip), and only after the kernel has them are the
 * answers released, with TTLs no longer than the kernel elements, UDP ones
 * in one sendmmsg. Upstream answers are cached, but a cached answer is
 * filtered, decided and learned like a fresh one (DESIGN §5: elements are
 * refreshed on every answer); the cache saves only the upstream round
 * trip. Every query ends in exactly one record.
 *
 * This file is the pass's first half and the proxy's frame: the listening
 * sockets and the UDP read loop, the rate limit, every decision taken
 * before a query goes upstream, the way answers leave, and dns_new /
 * dns_free. The rest of the pass has a file each in gateway/dns/: wire.c
 * (the messages), tcp.c (TCP clients), upstream.c (queries in flight),
 * cache.c, answer.c (learn, then release) and filter.c (what an answer
 * may teach the kernel); dns_int.h holds what they share.
 */
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns_int.h"
#include "gateway/log.h"

#define DNS_TCP_MAX_INFLIGHT	16	/* per connection */
#define DNS_TCP_PER_SRC		8	/* default cfg.tcp_per_sandbox */
#define DNS_RL_RECORD_MS	1000	/* one rate_limited record per this */
#define DNS_SYNTH_TTL		60
#define DNS_RL_SLOTS		4096
#define DNS_OUT_SLOTS		64	/* UDP answers per sendmmsg */
#define DNS_OUT_SLOT_SIZE	1500

/* A UDP answer waiting for the next sendmmsg. */
struct dns_out {
	struct sockaddr_storage	 to;
	socklen_t		 tolen;
	size_t			 len;
	uint8_t			 m[DNS_OUT_SLOT_SIZE];
};

struct dns_bucket {
	char		id[33];
	uint64_t	milli;		/* tokens x 1000 */
	uint64_t	last_ms;
	/* Over the rate, one query per DNS_RL_RECORD_MS is recorded (and
	 * answered with the uniform deny); the others are dropped before
	 * any work, and counted here until the sandbox's next record. */
	uint64_t	rec_ms;		/* the last rate_limited record */
	bool		rec_valid;
	uint32_t	suppressed;
};

/* --------------------------------------------------------------- sending */

void
dns_sa_format(const struct sockaddr *sa, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)sa;

		pol_ipv4_format((const uint8_t *)&s->sin_addr, a);
		port = ntohs(s->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof(a));
		port = ntohs(s->sin6_port);
	}
	/* By hand: this runs for every query, and printf's machinery was a
	 * visible part of the per-query cost. */
	{
		char d[8], *e = d + sizeof(d);
		size_t al = strlen(a), dl;

		*--e = '\0';
		do {
			*--e = (char)('0' + port % 10);
			port /= 10;
		} while (port != 0 && e > d + 1);
		*--e = '#';
		dl = (size_t)(d + sizeof(d) - 1 - e);
		if (len == 0)
			return;
		if (al >= len)
			al = len - 1;
		memcpy(buf, a, al);
		if (dl > len - 1 - al)
			dl = len - 1 - al;
		memcpy(buf + al, e, dl);
		buf[al + dl] = '\0';
	}
}

static uint16_t
udp_limit(const struct dns_proxy *p, const struct dns_query *q)
{
	uint16_t lim = q->edns ? q->edns_size : 512;

	if (lim < 512)
		lim = 512;
	if (lim > p->cfg.max_udp_size)
		lim = p->cfg.max_udp_size;
	return lim;
}

/* Sends every queued UDP answer: one sendmmsg for up to DNS_OUT_SLOTS. A
 * datagram the kernel refuses is skipped (a UDP answer is best effort, as
 * a lost packet would be); the rest still go. */
void
dns_out_send(struct dns_proxy *p)
{
	struct mmsghdr mm[DNS_OUT_SLOTS];
	struct iovec iov[DNS_OUT_SLOTS];
	size_t i, off = 0;
	int n;

	for (i = 0; i < p->nout; i++) {
		memset(&mm[i], 0, sizeof(mm[i]));
		iov[i].iov_base = p->out[i].m;
		iov[i].iov_len = p->out[i].len;
		mm[i].msg_hdr.msg_name = &p->out[i].to;
		mm[i].msg_hdr.msg_namelen = p->out[i].tolen;
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	while (off < p->nout) {
		n = sendmmsg(p->ufd, mm + off, (unsigned)(p->nout - off), 0);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			log_debug("%s: sendmmsg: %s", __func__, strerror(errno));
			off++;
			continue;
		}
		off += (size_t)n;
	}
	p->nout = 0;
}

/* Queues one UDP answer for the end of the loop iteration, so that all the
 * answers an iteration produced leave in one system call. */
static void
out_queue(struct dns_proxy *p, const struct sockaddr *to, socklen_t tolen,
    const uint8_t *m, size_t len)
{
	struct dns_out *o;

	if (len > DNS_OUT_SLOT_SIZE || tolen > sizeof(o->to)) {
		if (sendto(p->ufd, m, len, 0, to, tolen) == -1)
			log_debug("%s: sendto: %s", __func__, strerror(errno));
		return;
	}
	if (p->nout == DNS_OUT_SLOTS)
		dns_out_send(p);
	o = &p->out[p->nout++];
	memcpy(&o->to, to, tolen);
	o->tolen = tolen;
	memcpy(o->m, m, len);
	o->len = len;
	dns_flush_schedule(p);
}

/* Send msg to the client of (conn | src). UDP answers over the client's size
 * are replaced by header + question with TC set. */
void
dns_reply(struct dns_proxy *p, struct dns_conn *cn, const struct sockaddr *src,
    socklen_t srclen, const struct dns_query *q, bool has_q, ldns_buffer *b)
{
	const uint8_t *m = ldns_buffer_begin(b);
	size_t len = ldns_buffer_position(b);
	ldns_buffer *tb = NULL;

	if (cn != NULL) {
		dns_conn_send(cn, m, len);
		return;
	}
	if (has_q && len > udp_limit(p, q)) {
		uint8_t rcode = m[3] & 0xf;

		if ((tb = ldns_buffer_new(DNS_HDR + 300)) == NULL)
			return;
		dns_put_head(tb, q, true, rcode, true, 0);
		if (q->edns)
			dns_put_opt(tb, p->cfg.max_udp_size);
		if (!ldns_buffer_status_ok(tb)) {
			/* No memory even for the header: nothing to send. */
			ldns_buffer_free(tb);
			return;
		}
		m = ldns_buffer_begin(tb);
		len = ldns_buffer_position(tb);
	}
	out_queue(p, src, srclen, m, len);
	ldns_buffer_free(tb);
}

/* A local answer with no records: deny, NODATA, errors. */
void
dns_reply_simple(struct dns_proxy *p, struct dns_conn *cn,
    const struct sockaddr *src, socklen_t srclen, const struct dns_query *q,
    bool has_q, uint8_t rcode)
{
	ldns_buffer *b = ldns_buffer_new(DNS_HDR + 300);

	if (b == NULL)
		return;
	dns_put_head(b, q, has_q, rcode, false, 0);
	if (has_q && q->edns)
		dns_put_opt(b, p->cfg.max_udp_size);
	if (ldns_buffer_status_ok(b))
		dns_reply(p, cn, src, srclen, q, has_q, b);
	ldns_buffer_free(b);
}

void
dns_record(struct dns_proxy *p, struct dns_event *ev, uint64_t t0)
{
	ev->latency_us = dns_now_us() - t0;
	if (p->h.record != NULL)
		p->h.record(p->h.ctx, ev);
}

/* ------------------------------------------------------------ rate limit */

/* Token bucket per sandbox id. The table is fixed-size and keeps the
 * buckets of sandboxes long gone; when none of the slots an id may take is
 * its own or free, the one used least recently is taken over. Taking the
 * home slot instead let two live sandboxes of one home evict each other on
 * every query, each time with a full burst: never limited at all. Now an
 * eviction only resets a bucket idle longer than all its neighbours. */
static bool
rl_take(struct dns_proxy *p, const char *id, const struct pol_dns_limits *l,
    struct dns_bucket **bp)
{
	uint64_t h = 1469598103934665603ull, now = ev_now_ms(), cap, add;
	struct dns_bucket *b = NULL, *lru = NULL;
	size_t i, k;
	const char *s;

	*bp = NULL;
	if (l->qps == 0)
		return true;
	for (s = id; *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	cap = (uint64_t)(l->burst ? l->burst : l->qps) * 1000;
	for (k = 0; k < 8; k++) {
		i = (size_t)((h + k) % DNS_RL_SLOTS);
		if (strcmp(p->rl[i].id, id) == 0 || p->rl[i].id[0] == '\0') {
			b = &p->rl[i];
			break;
		}
		if (lru == NULL || p->rl[i].last_ms < lru->last_ms)
			lru = &p->rl[i];
	}
	if (b == NULL)
		b = lru;
	if (strcmp(b->id, id) != 0) {
		memset(b, 0, sizeof(*b));
		dns_copystr(b->id, sizeof(b->id), id);
		b->milli = cap;
		b->last_ms = now;
	}
	*bp = b;
	add = (now - b->last_ms) * l->qps;
	b->last_ms = now;
	b->milli = b->milli + add > cap ? cap : b->milli + add;
	if (b->milli < 1000)
		return false;
	b->milli -= 1000;
	return true;
}

/* -------------------------------------------------------- query handling */

uint8_t
dns_deny_rcode(const struct pol_dns_limits *l)
{
	return l->deny_refused ? RCODE_REFUSED : RCODE_NXDOMAIN;
}

static void
synth_answer(struct dns_proxy *p, struct dns_conn *cn,
    const struct sockaddr *src, socklen_t srclen, const struct dns_query *q,
    struct dns_event *ev, uint64_t t0)
{
	const struct pol_addr *a = &p->cfg.service_addr;
	ldns_buffer *b;
	bool match = (q->qtype == LDNS_RR_TYPE_A && a->family == AF_INET) ||
	    (q->qtype == LDNS_RR_TYPE_AAAA && a->family == AF_INET6);
	size_t alen = a->family == AF_INET ? 4 : 16;

	if ((b = ldns_buffer_new(DNS_HDR + 300)) == NULL)
		goto fail;
	dns_put_head(b, q, true, RCODE_NOERROR, false, match ? 1 : 0);
	if (match && dns_buf_room(b, 12 + alen)) {
		ldns_buffer_write_u16(b, 0xc00c);	/* the question's name */
		ldns_buffer_write_u16(b, q->qtype);
		ldns_buffer_write_u16(b, LDNS_RR_CLASS_IN);
		ldns_buffer_write_u32(b, DNS_SYNTH_TTL);
		ldns_buffer_write_u16(b, (uint16_t)alen);
		ldns_buffer_write(b, a->a, alen);
	}
	if (q->edns)
		dns_put_opt(b, p->cfg.max_udp_size);
	if (!ldns_buffer_status_ok(b))
		goto fail;
	if (match) {
		ev->addrs[0].family = a->family;
		memcpy(ev->addrs[0].addr, a->a, alen);
		ev->addrs[0].ttl = DNS_SYNTH_TTL;
		ev->addrs[0].kept = true;
		dns_copystr(ev->addrs[0].cls, sizeof(ev->addrs[0].cls),
		    "service");
		ev->naddrs = ev->nkept = 1;
	}
	ev->rcode = RCODE_NOERROR;
	dns_record(p, ev, t0);
	dns_reply(p, cn, src, srclen, q, true, b);
	ldns_buffer_free(b);
	return;
fail:
	/* The answer could not be built (no memory): SERVFAIL, recorded as
	 * such, never a half-written answer. */
	ev->decision = DNS_DEC_ERROR;
	ev->rcode = RCODE_SERVFAIL;
	dns_copystr(ev->reason, sizeof(ev->reason), "no_memory");
	dns_record(p, ev, t0);
	dns_reply_simple(p, cn, src, srclen, q, true, RCODE_SERVFAIL);
	ldns_buffer_free(b);
}

/* The policy's decision on q's name and type for client c (when a query
 * arrives, and again when its answer does after a change). */
void
dns_decide_name(const struct dns_client *c, const struct dns_query *q,
    struct pol_decision *d)
{
	struct pol_dns_q dq;

	memset(&dq, 0, sizeof(dq));
	dq.name = q->qname;
	dq.qtype = q->qtype;
	dq.tainted = c->tainted;
	memset(d, 0, sizeof(*d));
	d->verdict = POL_DENY;
	pol_dns_decide(c->policy, &dq, d);
}

/* Everything that happens before a query goes upstream. The caller's buffer
 * holds one message from (cn | src). */
void
dns_handle_query(struct dns_proxy *p, struct dns_conn *cn,
    const struct sockaddr *src, socklen_t srclen, const uint8_t *m, size_t len)
{
	struct dns_event ev;
	struct dns_query q;
	struct dns_client c;
	struct pol_dns_limits lim;
	struct pol_decision d;
	enum dns_parse_result pr;
	const char *why = NULL;
	struct dns_pq *pq;
	struct dns_bucket *bk = NULL;
	ldns_pkt *pkt;
	uint64_t t0 = dns_now_us();
	uint32_t suppressed = 0;
	bool known, limited = false;

	memset(&c, 0, sizeof(c));
	known = p->h.lookup != NULL &&
	    p->h.lookup(p->h.ctx, src, srclen, &c) == 0 && c.policy != NULL;
	/*
	 * Rate first, before any work that a flood could make expensive
	 * (parsing, records, answers): every query of a sandbox costs a
	 * token, denied and malformed ones too, so a tunnel cannot probe for
	 * free. Over the rate, one query a second is recorded (rate_limited,
	 * a finding) and answered; the others are dropped here, unanswered
	 * and unrecorded, and only counted (the next record of the sandbox
	 * carries the count). A flooding sandbox then costs the loop a
	 * lookup per datagram: its flood neither fills the audit log nor
	 * delays the queries of other sandboxes behind its own.
	 */
	if (known) {
		pol_dns_limits(c.policy, &lim);
		if (!rl_take(p, c.id, &lim, &bk)) {
			uint64_t now = ev_now_ms();

			if (bk->rec_valid && now - bk->rec_ms <
			    DNS_RL_RECORD_MS) {
				if (bk->suppressed < UINT32_MAX)
					bk->suppressed++;
				p->stat_rl_dropped++;
				return;
			}
			bk->rec_ms = now;
			bk->rec_valid = true;
			limited = true;
		}
		if (bk != NULL) {
			suppressed = bk->suppressed;
			bk->suppressed = 0;
		}
	}
	memset(&ev, 0, sizeof(ev));
	ev.tcp = cn != NULL;
	ev.rcode = RCODE_NONE;
	ev.suppressed = suppressed;
	dns_sa_format(src, ev.client, sizeof(ev.client));
	pr = dns_parse_query(m, len, &q);
	if (known)
		dns_copystr(ev.sandbox, sizeof(ev.sandbox), c.id);
	if (pr != DNS_PARSE_OK) {
		ev.decision = DNS_DEC_MALFORMED;
		dns_copystr(ev.reason, sizeof(ev.reason), "dropped");
		/* Garbage costs a token too; over the rate it is not even
		 * answered, so it cannot be used to make us send packets. */
		if (known && limited) {
			pr = DNS_PARSE_DROP;
			dns_copystr(ev.reason, sizeof(ev.reason),
			    "rate_limited");
			ev.finding = true;
		}
		if (pr != DNS_PARSE_DROP) {
			ev.rcode = !known ? RCODE_REFUSED :
			    pr == DNS_PARSE_NOTIMP ? RCODE_NOTIMP : RCODE_FORMERR;
			dns_copystr(ev.reason, sizeof(ev.reason),
			    pr == DNS_PARSE_NOTIMP ? "notimp" : "formerr");
		}
		/* Recorded before the answer leaves, as every path here: the
		 * record exists by the time anyone can observe the answer. */
		dns_record(p, &ev, t0);
		if (pr != DNS_PARSE_DROP)
			dns_reply_simple(p, cn, src, srclen, &q, false,
			    ev.rcode);
		return;
	}
	dns_copystr(ev.qname, sizeof(ev.qname), q.qname);
	ev.qtype = q.qtype;
	if (!known) {
		ev.decision = DNS_DEC_REFUSED;
		ev.rcode = RCODE_REFUSED;
		dns_copystr(ev.reason, sizeof(ev.reason), "unknown_source");
		dns_record(p, &ev, t0);
		dns_reply_simple(p, cn, src, srclen, &q, true, RCODE_REFUSED);
		return;
	}
	if (lim.max_ttl_s < lim.min_ttl_s)
		lim.max_ttl_s = lim.min_ttl_s;

	/* The rate was checked first (above). */
	if (limited)
		why = "rate_limited";
	else if (q.bad_name || q.qclass != LDNS_RR_CLASS_IN ||
	    q.qname[0] == '\0')
		why = "bad_name";
	else if (pol_dns_name_suspect(&lim, q.qname, &why)) {
		if (why == NULL)
			why = "suspect_name";
	}
	if (why != NULL) {
		ev.decision = DNS_DEC_DENY;
		ev.finding = true;
		ev.rcode = dns_deny_rcode(&lim);
		dns_copystr(ev.reason, sizeof(ev.reason), why);
		dns_record(p, &ev, t0);
		dns_reply_simple(p, cn, src, srclen, &q, true, ev.rcode);
		return;
	}

	dns_decide_name(&c, &q, &d);
	dns_copystr(ev.reason, sizeof(ev.reason), d.reason);
	dns_copystr(ev.rule, sizeof(ev.rule), d.rule);
	if (d.verdict == POL_SYNTHETIC) {
		ev.decision = DNS_DEC_SYNTHETIC;
		synth_answer(p, cn, src, srclen, &q, &ev, t0);
		return;
	}
	if (d.verdict == POL_ALLOW && d.reason != NULL &&
	    strcmp(d.reason, "nodata") == 0) {
		ev.decision = DNS_DEC_NODATA;
		ev.rcode = RCODE_NOERROR;
		dns_record(p, &ev, t0);
		dns_reply_simple(p, cn, src, srclen, &q, true, RCODE_NOERROR);
		return;
	}
	if (d.verdict != POL_ALLOW) {
		/* POL_ASK has no meaning for DNS: anything not a plain allow
		 * is the uniform deny, and nothing goes upstream. */
		ev.decision = DNS_DEC_DENY;
		ev.rcode = dns_deny_rcode(&lim);
		dns_record(p, &ev, t0);
		dns_reply_simple(p, cn, src, srclen, &q, true, ev.rcode);
		return;
	}
	if (p->npending >= p->cfg.max_pending || (cn != NULL &&
	    cn->inflight >= DNS_TCP_MAX_INFLIGHT)) {
		ev.decision = DNS_DEC_ERROR;
		ev.rcode = RCODE_SERVFAIL;
		dns_copystr(ev.reason, sizeof(ev.reason), "overload");
		dns_record(p, &ev, t0);
		dns_reply_simple(p, cn, src, srclen, &q, true, RCODE_SERVFAIL);
		return;
	}
	if ((pq = dns_pq_alloc(p)) == NULL) {
		ev.decision = DNS_DEC_ERROR;
		ev.rcode = RCODE_SERVFAIL;
		dns_copystr(ev.reason, sizeof(ev.reason), "no_memory");
		dns_record(p, &ev, t0);
		dns_reply_simple(p, cn, src, srclen, &q, true, RCODE_SERVFAIL);
		return;
	}
	pq->p = p;
	pq->fd = -1;
	pq->q = q;
	pq->c = c;
	memcpy(pq->pdigest, pol_policy_digest(c.policy), sizeof(pq->pdigest));
	pq->lim = lim;
	pq->ev = ev;
	pq->ev.decision = DNS_DEC_ALLOW;
	pq->t0_us = t0;
	memcpy(&pq->src, src, srclen);
	pq->srclen = srclen;
	if (cn != NULL) {
		pq->conn = cn;
		pq->cnext = cn->pqs;
		cn->pqs = pq;
		cn->inflight++;
	}
	pq->next = p->pqs;
	if (p->pqs != NULL)
		p->pqs->prev = pq;
	p->pqs = pq;
	p->npending++;
	if ((pkt = dns_cache_get(p, &q)) != NULL) {
		dns_pq_answer(pq, pkt, false);
		ldns_pkt_free(pkt);
		return;
	}
	dns_pq_start(pq);
}

/* ------------------------------------------------------------- listeners */

/* Points DNS_RECV_BATCH message headers at the proxy's receive slots
 * (DNS_MAX_QUERY + 1 bytes each: one more than anything we accept, so
 * that MSG_TRUNC marks what is too long) and at from[] for the sender. */
void
dns_rbufs_prep(struct dns_proxy *p, struct mmsghdr *mh, struct iovec *iov,
    struct sockaddr_storage *from)
{
	int i;

	for (i = 0; i < DNS_RECV_BATCH; i++) {
		iov[i].iov_base = p->rbufs + (size_t)i * (DNS_MAX_QUERY + 1);
		iov[i].iov_len = DNS_MAX_QUERY + 1;
		memset(&mh[i], 0, sizeof(mh[i]));
		mh[i].msg_hdr.msg_iov = &iov[i];
		mh[i].msg_hdr.msg_iovlen = 1;
		mh[i].msg_hdr.msg_name = &from[i];
		mh[i].msg_hdr.msg_namelen = sizeof(from[i]);
	}
}

/* Up to DNS_UDP_BURST queries per wakeup, DNS_RECV_BATCH per system call.
 * A buffer holds DNS_MAX_QUERY + 1 bytes: anything longer is hostile
 * whatever its content, and MSG_TRUNC marks it as such. */
static void
udp_cb(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct dns_proxy *p = arg;
	struct sockaddr_storage src[DNS_RECV_BATCH];
	struct mmsghdr mm[DNS_RECV_BATCH];
	struct iovec iov[DNS_RECV_BATCH];
	int i, n, got = 0;

	(void)loop;
	(void)events;
	p->deferring = true;
	while (got < DNS_UDP_BURST) {
		dns_rbufs_prep(p, mm, iov, src);
		n = recvmmsg(fd, mm, DNS_RECV_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			break;
		for (i = 0; i < n; i++) {
			size_t len = mm[i].msg_len;

			if (mm[i].msg_hdr.msg_flags & MSG_TRUNC)
				len = DNS_MAX_QUERY + 1;
			dns_handle_query(p, NULL, (struct sockaddr *)&src[i],
			    mm[i].msg_hdr.msg_namelen, iov[i].iov_base, len);
		}
		got += n;
		if (n < DNS_RECV_BATCH)
			break;
	}
	dns_usend_flush(p);
}

/* ------------------------------------------------------------- lifecycle */

/* The listen address asks for an ephemeral port. */
static int
listen_port_is_zero(const struct dns_config *cfg)
{
	if (cfg->listen.ss_family == AF_INET)
		return ((const struct sockaddr_in *)&cfg->listen)->sin_port == 0;
	return ((const struct sockaddr_in6 *)&cfg->listen)->sin6_port == 0;
}

struct dns_proxy *
dns_new(struct ev_loop *loop, const struct dns_config *cfg,
    const struct dns_hooks *hooks, char *err, size_t errlen)
{
	int attempt;
	struct dns_proxy *p;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int one = 1, serr;
	const char *what = "";

	if (loop == NULL || cfg == NULL || hooks == NULL ||
	    cfg->nupstreams == 0 || cfg->nupstreams > DNS_MAX_UPSTREAMS ||
	    hooks->lookup == NULL || hooks->learn == NULL) {
		snprintf(err, errlen, "dns: bad arguments");
		errno = EINVAL;
		return NULL;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->rl = calloc(DNS_RL_SLOTS, sizeof(*p->rl))) == NULL ||
	    (p->bel = calloc(DNS_BATCH_ELEMS, sizeof(*p->bel))) == NULL ||
	    (p->out = calloc(DNS_OUT_SLOTS, sizeof(*p->out))) == NULL ||
	    (p->rbufs = malloc((size_t)DNS_RECV_BATCH *
	    (DNS_MAX_QUERY + 1))) == NULL ||
	    (p->cslots = dns_cslots_new(cfg, &p->cmask, &p->cache_cap)) ==
	    NULL) {
		if (p != NULL) {
			free(p->rl);
			free(p->bel);
			free(p->out);
			free(p->rbufs);
			free(p);
		}
		snprintf(err, errlen, "dns: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	p->loop = loop;
	p->cfg = *cfg;
	p->h = *hooks;
	p->ufd = p->tfd = -1;
	p->ready_tail = &p->ready;
	p->rndpos = sizeof(p->rnd);	/* empty: fill on first use */
	if (p->cfg.timeout_ms == 0)
		p->cfg.timeout_ms = 2000;
	if (p->cfg.tcp_idle_ms == 0)
		p->cfg.tcp_idle_ms = 10000;
	if (p->cfg.max_tcp_conns == 0)
		p->cfg.max_tcp_conns = 256;
	/* One sandbox must not be able to take every slot: when asked for
	 * as many as there are, it gets half of them. */
	if (p->cfg.tcp_per_sandbox == 0)
		p->cfg.tcp_per_sandbox = DNS_TCP_PER_SRC;
	else if (p->cfg.max_tcp_conns > 1 &&
	    p->cfg.tcp_per_sandbox >= p->cfg.max_tcp_conns)
		p->cfg.tcp_per_sandbox = p->cfg.max_tcp_conns / 2;
	if (p->cfg.max_answer_addrs == 0)
		p->cfg.max_answer_addrs = DNS_MAX_ANSWER_ADDRS;
	if (p->cfg.max_answer_addrs > DNS_MAX_ELEMS)
		p->cfg.max_answer_addrs = DNS_MAX_ELEMS;
	if (p->cfg.max_pending == 0)
		p->cfg.max_pending = 4096;
	if (p->cfg.max_udp_size < 512)
		p->cfg.max_udp_size = 1232;
	/* What we advertise upstream must fit a receive slot (usock_cb). */
	if (p->cfg.max_udp_size > DNS_MAX_QUERY)
		p->cfg.max_udp_size = DNS_MAX_QUERY;

	/*
	 * TCP on the same port as UDP, also when UDP's was ephemeral. An
	 * ephemeral UDP port may already be taken for TCP by someone else:
	 * then try another one (only when the caller asked for port 0).
	 */
	for (attempt = 0;; attempt++) {
		what = "udp socket";
		p->ufd = socket(cfg->listen.ss_family, SOCK_DGRAM |
		    SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (p->ufd == -1 || bind(p->ufd,
		    (struct sockaddr *)&cfg->listen, cfg->listen_len) == -1)
			goto fail;
		what = "getsockname";
		sl = sizeof(ss);
		if (getsockname(p->ufd, (struct sockaddr *)&ss, &sl) == -1)
			goto fail;
		p->port = ntohs(ss.ss_family == AF_INET ?
		    ((struct sockaddr_in *)&ss)->sin_port :
		    ((struct sockaddr_in6 *)&ss)->sin6_port);
		what = "tcp socket";
		p->tfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
		if (p->tfd == -1 || setsockopt(p->tfd, SOL_SOCKET,
		    SO_REUSEADDR, &one, sizeof(one)) == -1)
			goto fail;
		if (bind(p->tfd, (struct sockaddr *)&ss, sl) == 0)
			break;
		if (errno != EADDRINUSE || !listen_port_is_zero(cfg) ||
		    attempt >= 16)
			goto fail;
		close(p->tfd);
		close(p->ufd);
		p->tfd = p->ufd = -1;
	}
	if (listen(p->tfd, 64) == -1)
		goto fail;
	what = "ev_add";
	if (ev_add(loop, p->ufd, EV_READ, udp_cb, p) == -1)
		goto fail;
	if (ev_add(loop, p->tfd, EV_READ, dns_tcp_accept_cb, p) == -1) {
		ev_del(loop, p->ufd);
		goto fail;
	}
	return p;
fail:
	serr = errno;
	snprintf(err, errlen, "dns: %s: %s", what, strerror(serr));
	if (p->ufd != -1)
		close(p->ufd);
	if (p->tfd != -1)
		close(p->tfd);
	free(p->rl);
	free(p->bel);
	free(p->out);
	free(p->rbufs);
	free(p->cslots);
	free(p);
	errno = serr;
	return NULL;
}

void
dns_free(struct dns_proxy *p)
{
	if (p == NULL)
		return;
	log_debug("dns: %llu learn batches for %llu answers, %llu cache hits, "
	    "%llu tcp clients refused, %llu evicted for another source, "
	    "%llu queries dropped over their sandbox's rate, %llu refused "
	    "an upstream socket",
	    (unsigned long long)p->stat_batches,
	    (unsigned long long)p->stat_batched,
	    (unsigned long long)p->stat_cache_hits,
	    (unsigned long long)p->stat_tcp_refused,
	    (unsigned long long)p->stat_tcp_evicted,
	    (unsigned long long)p->stat_rl_dropped,
	    (unsigned long long)p->stat_up_refused);
	/* Answers waiting for their elements are dropped like every other
	 * pending query: unanswered, never answered without the learn. */
	ev_timer_cancel(p->loop, p->flush);
	p->flush = NULL;
	p->ready = NULL;
	p->ready_tail = &p->ready;
	p->nout = 0;
	while (p->conns != NULL)
		dns_conn_close(p->conns);
	while (p->pqs != NULL)
		dns_pq_free(p->pqs);
	while (p->usocks != NULL)
		dns_usock_close(p->usocks);
	while (p->spare != NULL) {
		struct dns_pq *pq = p->spare;

		p->spare = pq->next;
		free(pq);
	}
	ev_del(p->loop, p->ufd);
	ev_del(p->loop, p->tfd);
	close(p->ufd);
	close(p->tfd);
	dns_cache_clear(p);
	free(p->cslots);
	free(p->rl);
	free(p->bel);
	free(p->out);
	free(p->rbufs);
	free(p);
}

uint16_t
dns_local_port(const struct dns_proxy *p)
{
	return p != NULL ? p->port : 0;
}


/* ---------------------------------------- upstream */

#define DNS_TCP_UP_PER_SBX	8	/* TCP upstream fds of one sandbox */
/* Upstream UDP sockets (see "upstream sockets" below). */
#define DNS_USOCK_POOL		8	/* live sockets per upstream */
#define DNS_USOCK_USES		64	/* queries one socket carries, at most */
#define DNS_USOCK_AGE_MS	1000	/* a socket takes new queries this long */
#define DNS_USOCK_INFLIGHT	64	/* outstanding queries per socket */
#define DNS_PQ_SPARE		64	/* freed queries kept for reuse */

/* An upstream UDP socket: connected to one upstream, on a port the kernel
 * picked at random, shared by the queries in flight on it (each with an
 * id unique on the socket) and retired after a few queries or a second. */
struct dns_usock {
	struct dns_proxy	*p;
	struct dns_usock	*next, *prev;		/* proxy's list */
	int			 fd;
	size_t			 up;			/* upstream index */
	bool			 retired;		/* takes no new query */
	bool			 in_cb;			/* inside usock_cb */
	uint32_t		 uses;
	uint64_t		 born_ms;
	struct dns_pq		*pqs;			/* in flight on it */
	size_t			 inflight;
};

/* A zeroed query: a spare one if there is one. NULL without memory. */
struct dns_pq *
dns_pq_alloc(struct dns_proxy *p)
{
	struct dns_pq *pq;

	if ((pq = p->spare) == NULL)
		return calloc(1, sizeof(*pq));
	p->spare = pq->next;
	p->nspare--;
	memset(pq, 0, sizeof(*pq));
	return pq;
}

/*
 * Upstream sockets. A fresh socket per query (socket, connect, two epoll
 * changes, close, and a new conntrack entry in the host's table) was half
 * the proxy's work per query. Queries now share a few connected UDP
 * sockets per upstream, as dnsmasq's random-port pool does, without
 * giving up what fresh sockets were for (off-path forgery needs the
 * source port and the id): every socket gets its port at random from the
 * kernel; a socket carries at most DNS_USOCK_USES queries and takes new
 * ones for at most DNS_USOCK_AGE_MS, so no port stays guessable for long;
 * the queries of one listener wakeup share a socket (they leave in one
 * sendmmsg: dns_usend_flush), the first of them picks one of up to
 * DNS_USOCK_POOL live sockets at random; ids are random and unique among
 * the queries in flight on a socket; and a reply must still match its
 * query's id and question.
 */
static void	usock_cb(struct ev_loop *, int, unsigned, void *);

void
dns_usock_close(struct dns_usock *us)
{
	struct dns_proxy *p = us->p;

	/* Not reached with queries queued on it (they count as in flight);
	 * cleared anyway so that no pointer to it outlives it. */
	if (p->burst_us == us)
		p->burst_us = NULL;
	ev_del(p->loop, us->fd);
	close(us->fd);
	p->nusocks--;
	if (us->prev != NULL)
		us->prev->next = us->next;
	else
		p->usocks = us->next;
	if (us->next != NULL)
		us->next->prev = us->prev;
	free(us);
}

/* Stops us taking new queries, and closes it once none is in flight (not
 * from inside its own callback, which closes it on the way out). */
static void
usock_retire(struct dns_usock *us)
{
	us->retired = true;
	if (us->inflight == 0 && !us->in_cb)
		dns_usock_close(us);
}

static struct dns_usock *
usock_open(struct dns_proxy *p, size_t up)
{
	const struct sockaddr *ua = (struct sockaddr *)&p->cfg.upstreams[up];
	struct dns_usock *us;

	if ((us = calloc(1, sizeof(*us))) == NULL)
		return NULL;
	us->p = p;
	us->up = up;
	us->born_ms = ev_now_ms();
	us->fd = socket(ua->sa_family, SOCK_DGRAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (us->fd == -1 || connect(us->fd, ua, p->cfg.upstream_lens[up]) ==
	    -1 || ev_add(p->loop, us->fd, EV_READ, usock_cb, us) == -1) {
		if (us->fd != -1)
			close(us->fd);
		free(us);
		return NULL;
	}
	us->next = p->usocks;
	if (p->usocks != NULL)
		p->usocks->prev = us;
	p->usocks = us;
	p->nusocks++;
	return us;
}

/* n bytes of kernel randomness into out, from the proxy's pool (refilled
 * with getrandom when it runs out). Used once, then wiped: no byte is
 * handed out twice. -1 when the kernel gave none (the caller falls back). */
static int
rnd_take(struct dns_proxy *p, void *out, size_t n)
{
	if (p->rndpos + n > sizeof(p->rnd) &&
	    getrandom(p->rnd, sizeof(p->rnd), 0) == sizeof(p->rnd))
		p->rndpos = 0;
	if (p->rndpos + n > sizeof(p->rnd))
		return -1;
	memcpy(out, p->rnd + p->rndpos, n);
	memset(p->rnd + p->rndpos, 0, n);
	p->rndpos += n;
	return 0;
}

static uint8_t
rnd_byte(struct dns_proxy *p)
{
	uint8_t b;

	if (rnd_take(p, &b, 1) == -1)
		return (uint8_t)(dns_now_us() >> 3);
	return b;
}

/* A socket to upstream up with room for one more query: one of the live
 * ones at random, or a new one while the pool is not full (or every live
 * one is full) and fewer than DNS_USOCK_MAX are open (retired ones count
 * until their last query ends). Retires what is too old or used up on the
 * way. NULL when no socket can be had. */
static struct dns_usock *
usock_get(struct dns_proxy *p, size_t up)
{
	struct dns_usock *us, *next, *live[DNS_USOCK_POOL];
	size_t nlive = 0, nroom = 0, pick;
	uint64_t now = ev_now_ms();

	for (us = p->usocks; us != NULL; us = next) {
		next = us->next;
		if (us->up != up || us->retired)
			continue;
		if (us->uses >= DNS_USOCK_USES ||
		    now - us->born_ms >= DNS_USOCK_AGE_MS) {
			usock_retire(us);
			continue;
		}
		if (nlive < DNS_USOCK_POOL)
			live[nlive++] = us;
	}
	for (pick = 0; pick < nlive; pick++)
		nroom += live[pick]->inflight < DNS_USOCK_INFLIGHT;
	if ((nlive < DNS_USOCK_POOL || nroom == 0) &&
	    p->nusocks < DNS_USOCK_MAX)
		return usock_open(p, up);
	if (nroom == 0) {
		p->stat_up_refused++;
		return NULL;
	}
	pick = rnd_byte(p) % nroom;
	for (size_t i = 0; i < nlive; i++) {
		if (live[i]->inflight >= DNS_USOCK_INFLIGHT)
			continue;
		if (pick-- == 0)
			return live[i];
	}
	return NULL;	/* not reached: nroom counted one */
}

static bool
usock_id_taken(const struct dns_usock *us, uint16_t id)
{
	const struct dns_pq *q;

	for (q = us->pqs; q != NULL; q = q->unext)
		if (q->upid == id)
			return true;
	return false;
}

static void
usock_attach(struct dns_usock *us, struct dns_pq *pq)
{
	pq->us = us;
	pq->uprev = NULL;
	pq->unext = us->pqs;
	if (us->pqs != NULL)
		us->pqs->uprev = pq;
	us->pqs = pq;
	us->inflight++;
	if (++us->uses >= DNS_USOCK_USES)
		us->retired = true;
}

static void
usock_detach(struct dns_pq *pq)
{
	struct dns_usock *us = pq->us;

	if (us == NULL)
		return;
	if (pq->uprev != NULL)
		pq->uprev->unext = pq->unext;
	else
		us->pqs = pq->unext;
	if (pq->unext != NULL)
		pq->unext->uprev = pq->uprev;
	pq->us = NULL;
	pq->unext = pq->uprev = NULL;
	us->inflight--;
	/* An idle socket past its age goes now, not at the next query. */
	if (us->inflight == 0 && (us->retired ||
	    ev_now_ms() - us->born_ms >= DNS_USOCK_AGE_MS))
		usock_retire(us);
}

static void
pq_close_fd(struct dns_pq *pq)
{
	usock_detach(pq);
	if (pq->fd != -1) {
		ev_del(pq->p->loop, pq->fd);
		close(pq->fd);
		pq->fd = -1;
		pq->p->ntcpup--;
	}
	ev_timer_cancel(pq->p->loop, pq->timer);
	pq->timer = NULL;
	free(pq->rbuf);
	pq->rbuf = NULL;
	pq->rlen = 0;
}

void
dns_pq_free(struct dns_pq *pq)
{
	struct dns_proxy *p = pq->p;
	struct dns_pq **pp;

	pq_close_fd(pq);
	if (pq->conn != NULL) {
		for (pp = &pq->conn->pqs; *pp != NULL; pp = &(*pp)->cnext)
			if (*pp == pq) {
				*pp = pq->cnext;
				break;
			}
		pq->conn->inflight--;
		if (dns_conn_done(pq->conn))
			dns_conn_close(pq->conn);
	}
	if (pq->prev != NULL)
		pq->prev->next = pq->next;
	else
		p->pqs = pq->next;
	if (pq->next != NULL)
		pq->next->prev = pq->prev;
	p->npending--;
	ldns_buffer_free(pq->ans);
	free(pq->el);
	/* Kept for the next query: a query is ~5 KiB, and allocating and
	 * freeing that much per query made malloc consolidate each time. */
	if (p->nspare < DNS_PQ_SPARE) {
		pq->next = p->spare;
		p->spare = pq;
		p->nspare++;
	} else
		free(pq);
}

/* Answer the client (if it is still there), record, and free. */
void
dns_pq_finish(struct dns_pq *pq, ldns_buffer *b, uint8_t rcode)
{
	struct dns_proxy *p = pq->p;

	pq->ev.rcode = rcode;
	if (pq->orphan)
		pq->ev.rcode = RCODE_NONE;	/* its TCP client left */
	dns_record(p, &pq->ev, pq->t0_us);
	if (pq->ev.rcode != RCODE_NONE && b != NULL)
		dns_reply(p, pq->conn, (struct sockaddr *)&pq->src, pq->srclen,
		    &pq->q, true, b);
	else if (pq->ev.rcode != RCODE_NONE)
		dns_reply_simple(p, pq->conn, (struct sockaddr *)&pq->src,
		    pq->srclen, &pq->q, true, rcode);
	dns_pq_free(pq);
}

void
dns_pq_fail(struct dns_pq *pq, const char *why)
{
	pq->ev.decision = DNS_DEC_ERROR;
	dns_copystr(pq->ev.reason, sizeof(pq->ev.reason), why);
	dns_pq_finish(pq, NULL, RCODE_SERVFAIL);
}

static void
pq_next_upstream(struct dns_pq *pq)
{
	pq_close_fd(pq);
	pq->up = (pq->up + 1) % pq->p->cfg.nupstreams;
	pq->tries++;
	if (pq->tries >= pq->p->cfg.nupstreams) {
		dns_pq_fail(pq, "upstream_failed");
		return;
	}
	dns_pq_start(pq);
}

static void
pq_timeout(struct ev_loop *loop, void *arg)
{
	struct dns_pq *pq = arg;

	(void)loop;
	pq->timer = NULL;
	pq_next_upstream(pq);
}

/* Check an upstream message against what we asked; 1 use it, 0 ignore it
 * (and keep waiting), -1 this upstream failed. */
static int
pq_check(struct dns_pq *pq, const uint8_t *m, size_t len, ldns_pkt **out)
{
	ldns_pkt *pkt = NULL;
	ldns_rr_list *ql;
	ldns_rr *rr;
	ldns_rdf *qn;
	int ok;

	*out = NULL;
	if (len < DNS_HDR || (m[0] << 8 | m[1]) != pq->upid ||
	    (m[2] & 0x80) == 0 || ((m[2] >> 3) & 0xf) != 0)
		return 0;
	if (ldns_wire2pkt(&pkt, m, len) != LDNS_STATUS_OK || pkt == NULL)
		return 0;
	ql = ldns_pkt_question(pkt);
	if (ql == NULL || ldns_rr_list_rr_count(ql) != 1) {
		ldns_pkt_free(pkt);
		return 0;
	}
	rr = ldns_rr_list_rr(ql, 0);
	qn = ldns_rdf_new_frm_data(LDNS_RDF_TYPE_DNAME, pq->q.qwire_len,
	    pq->q.qwire);
	ok = qn != NULL && ldns_dname_compare(qn, ldns_rr_owner(rr)) == 0 &&
	    (uint16_t)ldns_rr_get_type(rr) == pq->q.qtype &&
	    (uint16_t)ldns_rr_get_class(rr) == pq->q.qclass;
	ldns_rdf_deep_free(qn);
	if (!ok) {
		ldns_pkt_free(pkt);
		return 0;
	}
	*out = pkt;
	return 1;
}

/* A checked reply: retry over TCP if truncated, fail over on SERVFAIL or
 * REFUSED, otherwise process. */
static void
pq_reply(struct dns_pq *pq, ldns_pkt *pkt, const uint8_t *m, size_t len)
{
	ldns_pkt_rcode rc = ldns_pkt_get_rcode(pkt);

	if (ldns_pkt_tc(pkt) && !pq->tcp) {
		ldns_pkt_free(pkt);
		pq_close_fd(pq);
		pq->tcp = true;
		dns_pq_start(pq);
		return;
	}
	if (rc != LDNS_RCODE_NOERROR && rc != LDNS_RCODE_NXDOMAIN) {
		ldns_pkt_free(pkt);
		pq_next_upstream(pq);
		return;
	}
	/* Before pq_close_fd: (m, len) may be the TCP buffer it frees. */
	dns_cache_put(pq->p, &pq->q, pkt, m, len);
	pq_close_fd(pq);
	dns_pq_answer(pq, pkt, true);
	ldns_pkt_free(pkt);
}

/* Replies on a shared upstream socket, up to DNS_RECV_BATCH per system
 * call: each goes to the query in flight with its id, and is used only if
 * it answers that query's question. */
static void
usock_cb(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct dns_usock *us = arg;
	struct dns_proxy *p = us->p;
	struct mmsghdr mh[DNS_RECV_BATCH];
	struct iovec iov[DNS_RECV_BATCH];
	struct sockaddr_storage from[DNS_RECV_BATCH];
	struct dns_pq *pq;
	ldns_pkt *pkt;
	int n, i;

	(void)loop;
	(void)events;
	dns_rbufs_prep(p, mh, iov, from);
	us->in_cb = true;
	n = recvmmsg(fd, mh, DNS_RECV_BATCH, MSG_DONTWAIT, NULL);
	if (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK &&
	    errno != EINTR) {
		/* ICMP port unreachable and friends: the error is the
		 * socket's, so every query on it moves on. */
		us->retired = true;
		while ((pq = us->pqs) != NULL)
			pq_next_upstream(pq);
	}
	for (i = 0; i < n && us->pqs != NULL; i++) {
		const uint8_t *m = iov[i].iov_base;
		size_t len = mh[i].msg_len;
		uint16_t id;

		/* The socket is connected, so the kernel already filters by
		 * source; this is a second look at the same fact. */
		if (mh[i].msg_hdr.msg_namelen != p->cfg.upstream_lens[us->up] ||
		    memcmp(&from[i], &p->cfg.upstreams[us->up],
		    mh[i].msg_hdr.msg_namelen) != 0 || len < DNS_HDR)
			continue;
		id = (uint16_t)(m[0] << 8 | m[1]);
		for (pq = us->pqs; pq != NULL && pq->upid != id;
		    pq = pq->unext)
			;
		if (pq == NULL)
			continue;
		if (mh[i].msg_hdr.msg_flags & MSG_TRUNC) {
			/* Longer than we advertised: we cannot read it, so
			 * ask over TCP, as for a truncated answer. */
			pq_close_fd(pq);
			pq->tcp = true;
			dns_pq_start(pq);
			continue;
		}
		if (pq_check(pq, m, len, &pkt) == 1)
			pq_reply(pq, pkt, m, len);
	}
	us->in_cb = false;
	if (us->inflight == 0 && us->retired)
		dns_usock_close(us);
}

static void
pq_tcp_cb(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct dns_pq *pq = arg;
	ldns_pkt *pkt;
	ssize_t n;
	size_t want;
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	(void)events;
	if (!pq->sent) {
		uint8_t m[2 + sizeof(pq->upq)];

		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == -1 ||
		    soerr != 0) {
			pq_next_upstream(pq);
			return;
		}
		m[0] = (uint8_t)(pq->upqlen >> 8);
		m[1] = (uint8_t)pq->upqlen;
		memcpy(m + 2, pq->upq, pq->upqlen);
		/* A fresh connection's send buffer takes a few hundred bytes;
		 * a short write here means something is wrong. */
		if (send(fd, m, pq->upqlen + 2, MSG_NOSIGNAL) !=
		    (ssize_t)(pq->upqlen + 2)) {
			pq_next_upstream(pq);
			return;
		}
		pq->sent = true;
		ev_mod(loop, fd, EV_READ);
		return;
	}
	if (pq->rbuf == NULL && (pq->rbuf = malloc(2 + DNS_MAX_MSG)) == NULL) {
		dns_pq_fail(pq, "no_memory");
		return;
	}
	want = pq->rlen < 2 ? 2 : 2 + (size_t)(pq->rbuf[0] << 8 | pq->rbuf[1]);
	n = recv(fd, pq->rbuf + pq->rlen, want - pq->rlen, 0);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		pq_next_upstream(pq);
		return;
	}
	pq->rlen += (size_t)n;
	if (pq->rlen < 2 || pq->rlen < 2 + (size_t)(pq->rbuf[0] << 8 |
	    pq->rbuf[1]))
		return;
	if (pq_check(pq, pq->rbuf + 2, pq->rlen - 2, &pkt) != 1) {
		/* One question per connection: a wrong answer ends it. */
		pq_next_upstream(pq);
		return;
	}
	pq_reply(pq, pkt, pq->rbuf + 2, pq->rlen - 2);
}

static void
pq_build(struct dns_pq *pq)
{
	struct dns_proxy *p = pq->p;
	uint8_t *m = pq->upq;
	size_t o = 0;

	if (rnd_take(p, &pq->upid, sizeof(pq->upid)) == -1)
		pq->upid = (uint16_t)(dns_now_us() ^ (uintptr_t)pq);
	m[o++] = (uint8_t)(pq->upid >> 8);
	m[o++] = (uint8_t)pq->upid;
	m[o++] = 0x01;			/* RD */
	m[o++] = 0x00;
	m[o++] = 0; m[o++] = 1;		/* QD */
	m[o++] = 0; m[o++] = 0;
	m[o++] = 0; m[o++] = 0;
	m[o++] = 0; m[o++] = 1;		/* AR: our own OPT, never the client's */
	memcpy(m + o, pq->q.qwire, pq->q.qwire_len);
	o += pq->q.qwire_len;
	m[o++] = (uint8_t)(pq->q.qtype >> 8);
	m[o++] = (uint8_t)pq->q.qtype;
	m[o++] = (uint8_t)(pq->q.qclass >> 8);
	m[o++] = (uint8_t)pq->q.qclass;
	m[o++] = 0;
	m[o++] = 0; m[o++] = LDNS_RR_TYPE_OPT;
	m[o++] = (uint8_t)(pq->p->cfg.max_udp_size >> 8);
	m[o++] = (uint8_t)pq->p->cfg.max_udp_size;
	m[o++] = 0; m[o++] = 0; m[o++] = 0; m[o++] = 0;
	m[o++] = 0; m[o++] = 0;
	pq->upqlen = o;
}

/* How many TCP upstream connections the queries of sandbox id hold. Only
 * asked when a query is about to open one (after a truncated answer). */
static size_t
tcp_up_of(const struct dns_proxy *p, const char *id)
{
	const struct dns_pq *q;
	size_t n = 0;

	for (q = p->pqs; q != NULL; q = q->next)
		if (q->fd != -1 && strcmp(q->c.id, id) == 0)
			n++;
	return n;
}

/* (Re)send the question to upstream pq->up: over UDP on a shared socket
 * (usock_get) with a new random id unique on it, over TCP on a fresh
 * connection; a new id every attempt. */
void
dns_pq_start(struct dns_pq *pq)
{
	struct dns_proxy *p = pq->p;
	const struct sockaddr *ua = (struct sockaddr *)&p->cfg.upstreams[pq->up];
	socklen_t ul = p->cfg.upstream_lens[pq->up];
	struct dns_usock *us;
	int fd, i;

	pq->sent = false;
	dns_sa_format(ua, pq->ev.upstream, sizeof(pq->ev.upstream));
	if (!pq->tcp) {
		us = p->burst_us;
		if (!p->deferring || us == NULL || us->up != pq->up ||
		    us->retired || us->inflight >= DNS_USOCK_INFLIGHT)
			us = usock_get(p, pq->up);
		if (us == NULL)
			goto fail;
		/* 64 in flight at most among 65,536 ids: a few draws. */
		for (i = 0; i < 16; i++) {
			pq_build(pq);
			if (!usock_id_taken(us, pq->upid))
				break;
		}
		if (i == 16)
			goto fail;
		/* The timer first: once pq is queued for dns_usend_flush no
		 * failure path may run (it would leave pq in the queue). */
		if ((pq->timer = ev_timer_add(p->loop, p->cfg.timeout_ms,
		    pq_timeout, pq)) == NULL)
			goto fail;
		usock_attach(us, pq);
		pq->sent = true;
		if (p->deferring && p->nusend < DNS_UDP_BURST) {
			p->usend[p->nusend++] = pq;
			p->burst_us = us;
		} else if (send(us->fd, pq->upq, pq->upqlen, 0) !=
		    (ssize_t)pq->upqlen)
			goto fail;
	} else {
		/* A descriptor each, for up to timeout_ms: bounded in all and
		 * per sandbox, or an upstream that truncates every answer
		 * would have a flood of queries use up the daemon's fds.
		 * Over the bound the query fails at once (SERVFAIL): trying
		 * the next upstream would only ask for another one. */
		if (p->ntcpup >= DNS_TCP_UP_MAX ||
		    tcp_up_of(p, pq->c.id) >= DNS_TCP_UP_PER_SBX) {
			p->stat_up_refused++;
			dns_pq_fail(pq, "overload");
			return;
		}
		pq_build(pq);
		fd = socket(ua->sa_family, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
		if (fd == -1)
			goto fail;
		if (connect(fd, ua, ul) == -1 && errno != EINPROGRESS) {
			close(fd);
			goto fail;
		}
		pq->fd = fd;
		p->ntcpup++;
		if (ev_add(p->loop, fd, EV_WRITE, pq_tcp_cb, pq) == -1)
			goto fail;
		if ((pq->timer = ev_timer_add(p->loop, p->cfg.timeout_ms,
		    pq_timeout, pq)) == NULL)
			goto fail;
	}
	return;
fail:
	/* pq_close_fd (via the failover) detaches pq from its socket or
	 * closes pq->fd; ev_del of an fd never registered is a no-op. */
	pq_next_upstream(pq);
}

/*
 * Sends the upstream queries queued during a listener wakeup: one sendmmsg
 * per run of queries on the same socket. Each send wakes the upstream side,
 * and on a busy machine the woken task preempted the loop after nearly
 * every single send; one call per run pays that once. A query whose send
 * failed moves to the next upstream.
 */
void
dns_usend_flush(struct dns_proxy *p)
{
	struct mmsghdr mh[DNS_UDP_BURST];
	struct iovec iov[DNS_UDP_BURST];
	struct dns_pq *fail[DNS_UDP_BURST];
	size_t n = p->nusend, i = 0, j, k, nfail = 0;
	int r;

	p->nusend = 0;
	p->deferring = false;
	p->burst_us = NULL;
	while (i < n) {
		struct dns_usock *us = p->usend[i]->us;

		for (j = i; j < n && p->usend[j]->us == us; j++) {
			k = j - i;
			iov[k].iov_base = p->usend[j]->upq;
			iov[k].iov_len = p->usend[j]->upqlen;
			memset(&mh[k], 0, sizeof(mh[k]));
			mh[k].msg_hdr.msg_iov = &iov[k];
			mh[k].msg_hdr.msg_iovlen = 1;
		}
		r = us != NULL ? sendmmsg(us->fd, mh, (unsigned)(j - i), 0) :
		    -1;
		/* A socket that failed a send takes no more queries. */
		if (us != NULL && r < (int)(j - i))
			us->retired = true;
		for (k = i + (r > 0 ? (size_t)r : 0); k < j; k++)
			fail[nfail++] = p->usend[k];
		i = j;
	}
	for (i = 0; i < nfail; i++)
		pq_next_upstream(fail[i]);
}


/* ---------------------------------------- tcp */

#define DNS_TCP_MAX_OUT		(256 * 1024)

static void	conn_touch(struct dns_conn *);

/* dns_conn_done: a half-closed connection with nothing left to answer or to
 * write is closed; until then its answers still go out (RFC 7766 6.2.4). */
bool
dns_conn_done(struct dns_conn *cn)
{
	return cn->eof && cn->inflight == 0 && cn->outlen == 0;
}

static int
conn_flush(struct dns_conn *cn)
{
	ssize_t n;

	while (cn->outlen > 0) {
		n = send(cn->fd, cn->out, cn->outlen, MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			return -1;
		}
		memmove(cn->out, cn->out + n, cn->outlen - (size_t)n);
		cn->outlen -= (size_t)n;
		if (n > 0)
			cn->moved = true;
	}
	if (dns_conn_done(cn))
		return -1;
	ev_mod(cn->p->loop, cn->fd, (cn->eof ? 0 : EV_READ) |
	    (cn->outlen ? EV_WRITE : 0));
	return 0;
}

void
dns_conn_send(struct dns_conn *cn, const uint8_t *m, size_t len)
{
	size_t need = cn->outlen + 2 + len;

	if (len > DNS_MAX_MSG || need > DNS_TCP_MAX_OUT) {
		/* A client that does not read its answers loses them. */
		dns_conn_close(cn);
		return;
	}
	if (need > cn->outcap) {
		size_t cap = cn->outcap ? cn->outcap : 1024;
		uint8_t *o;

		while (cap < need)
			cap *= 2;
		if ((o = realloc(cn->out, cap)) == NULL) {
			dns_conn_close(cn);
			return;
		}
		cn->out = o;
		cn->outcap = cap;
	}
	cn->out[cn->outlen] = (uint8_t)(len >> 8);
	cn->out[cn->outlen + 1] = (uint8_t)len;
	memcpy(cn->out + cn->outlen + 2, m, len);
	cn->outlen = need;
	if (conn_flush(cn) == -1)
		dns_conn_close(cn);
}

/*
 * conn_idle: the idle timer of cn fired (no whole message was read for
 * tcp_idle_ms; a part of one does not count). Idle means the client sent
 * no query and we owe it nothing: then cn is closed. A query still
 * upstream, or queued output that is moving, keeps it for another period.
 * Queued output of which not one byte went out in a whole period means a
 * client that does not read: it is closed too, or it would keep its slot
 * of max_tcp_conns (shared by every sandbox) for ever.
 */
static void
conn_idle(struct ev_loop *loop, void *arg)
{
	struct dns_conn *cn = arg;

	(void)loop;
	cn->idle = NULL;
	if (cn->outlen > 0 && !cn->moved) {
		dns_conn_close(cn);
		return;
	}
	if (cn->inflight > 0 || cn->outlen > 0) {
		conn_touch(cn);
		return;
	}
	dns_conn_close(cn);
}

/* conn_touch: (re)arm cn's idle timer for tcp_idle_ms, and start counting
 * the output's progress afresh for that period (conn_idle). */
static void
conn_touch(struct dns_conn *cn)
{
	cn->moved = false;
	ev_timer_cancel(cn->p->loop, cn->idle);
	cn->idle = ev_timer_add(cn->p->loop, cn->p->cfg.tcp_idle_ms,
	    conn_idle, cn);
}

void
dns_conn_close(struct dns_conn *cn)
{
	struct dns_proxy *p = cn->p;
	struct dns_pq *pq;

	/* Queries still upstream finish and are recorded; only their answer
	 * has nowhere to go. */
	for (pq = cn->pqs; pq != NULL; pq = pq->cnext) {
		pq->conn = NULL;
		pq->orphan = true;
	}
	ev_del(p->loop, cn->fd);
	close(cn->fd);
	ev_timer_cancel(p->loop, cn->idle);
	if (cn->prev != NULL)
		cn->prev->next = cn->next;
	else
		p->conns = cn->next;
	if (cn->next != NULL)
		cn->next->prev = cn->prev;
	p->nconns--;
	free(cn->out);
	free(cn);
}

static void
conn_cb(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct dns_conn *cn = arg;
	ssize_t n;
	size_t need;

	if (events & EV_WRITE) {
		if (conn_flush(cn) == -1) {
			dns_conn_close(cn);
			return;
		}
	}
	if (cn->eof && (events & EV_ERROR)) {
		/* Reset while answers were pending: nobody to answer. */
		dns_conn_close(cn);
		return;
	}
	if (!(events & (EV_READ | EV_ERROR)) || cn->eof)
		return;
	n = recv(fd, cn->in + cn->inlen, sizeof(cn->in) - cn->inlen, 0);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n == 0 && (cn->inflight > 0 || cn->outlen > 0)) {
		/* Half-close after the last query: answer, then close. */
		cn->eof = true;
		ev_mod(loop, fd, cn->outlen ? EV_WRITE : 0);
		return;
	}
	if (n <= 0) {
		dns_conn_close(cn);
		return;
	}
	cn->inlen += (size_t)n;
	/* Only a whole message re-arms the idle timer: a client dripping
	 * one byte per period would otherwise hold its slot (shared by every
	 * sandbox) for ever. A message must arrive within one period. */
	for (;;) {
		if (cn->inlen < 2)
			return;
		need = 2 + (size_t)(cn->in[0] << 8 | cn->in[1]);
		if (cn->inlen < need)
			return;
		/* dns_handle_query may close cn (a client that does not read);
		 * count the connection's identity before that. */
		{
			struct dns_proxy *p = cn->p;
			struct dns_conn *c2;
			uint8_t *msg = malloc(need - 2 + 1);

			if (msg == NULL) {
				dns_conn_close(cn);
				return;
			}
			memcpy(msg, cn->in + 2, need - 2);
			memmove(cn->in, cn->in + need, cn->inlen - need);
			cn->inlen -= need;
			cn->last = ++p->conn_tick;
			conn_touch(cn);
			dns_handle_query(p, cn, (struct sockaddr *)&cn->src,
			    cn->srclen, msg, need - 2);
			free(msg);
			for (c2 = p->conns; c2 != NULL && c2 != cn;
			    c2 = c2->next)
				;
			if (c2 == NULL)
				return;
		}
	}
}

/* Orders source addresses by host (not port): a sandbox is its source
 * address. */
static int
src_cmp(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return a->ss_family < b->ss_family ? -1 : 1;
	if (a->ss_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
		    &((const struct sockaddr_in *)b)->sin_addr, 4);
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
	    &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

static int
conn_src_cmp(const void *a, const void *b)
{
	const struct dns_conn *x = *(const struct dns_conn *const *)a;
	const struct dns_conn *y = *(const struct dns_conn *const *)b;

	return src_cmp(&x->src, &y->src);
}

/* Connections from the host (not port) of src. */
static size_t
conns_from(const struct dns_proxy *p, const struct sockaddr_storage *src)
{
	const struct dns_conn *cn;
	size_t n = 0;

	for (cn = p->conns; cn != NULL; cn = cn->next)
		if (src_cmp(&cn->src, src) == 0)
			n++;
	return n;
}

/*
 * conn_victim: every slot is taken and a client whose source already
 * holds `mine' connections asks for one. Returns the connection to close
 * for it: of the source holding the most, the one idle the longest (its
 * last whole message, or its accept, the earliest), provided `mine' is
 * fewer than that source holds. NULL (refuse) when mine is the most or ties, or without
 * memory. Sorting by source keeps this O(n log n) whatever max_tcp_conns.
 */
static struct dns_conn *
conn_victim(struct dns_proxy *p, size_t mine)
{
	struct dns_conn **v, *cn, *best = NULL, *gbest;
	size_t n = 0, i, j, most = 0;

	if (p->nconns == 0 || (v = calloc(p->nconns, sizeof(*v))) == NULL)
		return NULL;
	for (cn = p->conns; cn != NULL && n < p->nconns; cn = cn->next)
		v[n++] = cn;
	qsort(v, n, sizeof(*v), conn_src_cmp);
	for (i = 0; i < n; i = j) {
		gbest = v[i];
		for (j = i + 1; j < n && src_cmp(&v[j]->src, &v[i]->src) == 0;
		    j++)
			if (v[j]->last < gbest->last)
				gbest = v[j];
		/* Sources tied for the most give up their longest idle. */
		if (j - i > most || (j - i == most &&
		    gbest->last < best->last)) {
			most = j - i;
			best = gbest;
		}
	}
	free(v);
	return mine < most ? best : NULL;
}

/*
 * A new TCP client. The max_tcp_conns slots are shared by every sandbox,
 * so one source address may hold at most tcp_per_sandbox of them (whole
 * queries keep a connection alive, and a sandbox could otherwise keep all
 * of them busy within its query rate); past that bound the connection is
 * closed at once. When every slot is taken, a few sandboxes together
 * could still hold them all: then a client whose source holds fewer than
 * the source holding the most takes the slot of that source's connection
 * idle the longest (conn_victim), whose queries still upstream finish
 * unanswered, as if its client had left; a client whose source holds the
 * most (or ties) is closed at once. So every sandbox can get its share
 * of the slots, at least one. Neither is a query, so neither is recorded;
 * both are counted.
 */
void
dns_tcp_accept_cb(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct dns_proxy *p = arg;
	struct dns_conn *cn, *victim = NULL;
	struct sockaddr_storage src;
	socklen_t sl = sizeof(src);
	size_t mine;
	int cfd;

	(void)events;
	cfd = accept4(fd, (struct sockaddr *)&src, &sl,
	    SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (cfd == -1)
		return;
	mine = conns_from(p, &src);
	if (mine >= p->cfg.tcp_per_sandbox ||
	    (p->nconns >= p->cfg.max_tcp_conns &&
	    (victim = conn_victim(p, mine)) == NULL) ||
	    (cn = calloc(1, sizeof(*cn))) == NULL) {
		p->stat_tcp_refused++;
		close(cfd);
		return;
	}
	cn->p = p;
	cn->fd = cfd;
	memcpy(&cn->src, &src, sl);
	cn->srclen = sl;
	if (ev_add(loop, cfd, EV_READ, conn_cb, cn) == -1) {
		p->stat_tcp_refused++;
		close(cfd);
		free(cn);
		return;
	}
	if (victim != NULL) {
		p->stat_tcp_evicted++;
		dns_conn_close(victim);
	}
	cn->next = p->conns;
	if (p->conns != NULL)
		p->conns->prev = cn;
	p->conns = cn;
	p->nconns++;
	cn->last = ++p->conn_tick;
	conn_touch(cn);
}
