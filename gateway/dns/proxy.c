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
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
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
	ev->reason = POL_REASON_NO_MEMORY;
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
	enum pol_reason why = POL_REASON_NONE;
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
		ev.reason = POL_REASON_DROPPED;
		/* Garbage costs a token too; over the rate it is not even
		 * answered, so it cannot be used to make us send packets. */
		if (known && limited) {
			pr = DNS_PARSE_DROP;
			ev.reason = POL_REASON_RATE_LIMITED;
			ev.finding = true;
		}
		if (pr != DNS_PARSE_DROP) {
			ev.rcode = !known ? RCODE_REFUSED :
			    pr == DNS_PARSE_NOTIMP ? RCODE_NOTIMP : RCODE_FORMERR;
			ev.reason = pr == DNS_PARSE_NOTIMP ?
			    POL_REASON_NOTIMP : POL_REASON_FORMERR;
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
		ev.reason = POL_REASON_UNKNOWN_SOURCE;
		dns_record(p, &ev, t0);
		dns_reply_simple(p, cn, src, srclen, &q, true, RCODE_REFUSED);
		return;
	}
	if (lim.max_ttl_s < lim.min_ttl_s)
		lim.max_ttl_s = lim.min_ttl_s;

	/* The rate was checked first (above). */
	if (limited)
		why = POL_REASON_RATE_LIMITED;
	else if (q.bad_name || q.qclass != LDNS_RR_CLASS_IN ||
	    q.qname[0] == '\0')
		why = POL_REASON_BAD_NAME;
	else if (pol_dns_name_suspect(&lim, q.qname, &why)) {
		if (why == POL_REASON_NONE)
			why = POL_REASON_SUSPECT_NAME;
	}
	if (why != POL_REASON_NONE) {
		ev.decision = DNS_DEC_DENY;
		ev.finding = true;
		ev.rcode = dns_deny_rcode(&lim);
		ev.reason = why;
		dns_record(p, &ev, t0);
		dns_reply_simple(p, cn, src, srclen, &q, true, ev.rcode);
		return;
	}

	dns_decide_name(&c, &q, &d);
	ev.reason = d.reason;
	dns_copystr(ev.rule, sizeof(ev.rule), d.rule);
	if (d.verdict == POL_SYNTHETIC) {
		ev.decision = DNS_DEC_SYNTHETIC;
		synth_answer(p, cn, src, srclen, &q, &ev, t0);
		return;
	}
	if (d.verdict == POL_ALLOW && d.reason == POL_REASON_NODATA) {
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
		ev.reason = POL_REASON_OVERLOAD;
		dns_record(p, &ev, t0);
		dns_reply_simple(p, cn, src, srclen, &q, true, RCODE_SERVFAIL);
		return;
	}
	if ((pq = dns_pq_alloc(p)) == NULL) {
		ev.decision = DNS_DEC_ERROR;
		ev.rcode = RCODE_SERVFAIL;
		ev.reason = POL_REASON_NO_MEMORY;
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

int
dns_fd_port(int fd, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == -1)
		return -1;
	*port = ntohs(ss.ss_family == AF_INET ?
	    ((struct sockaddr_in *)&ss)->sin_port :
	    ((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

int
dns_listen(const struct dns_config *cfg, int *udp, int *tcp, char *err,
    size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int attempt, one = 1, serr, ufd = -1, tfd = -1;
	const char *what = "";

	/*
	 * TCP on the same port as UDP, also when UDP's was ephemeral. An
	 * ephemeral UDP port may already be taken for TCP by someone else:
	 * then try another one (only when the caller asked for port 0).
	 */
	for (attempt = 0;; attempt++) {
		what = "udp socket";
		ufd = socket(cfg->listen.ss_family, SOCK_DGRAM |
		    SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (ufd == -1 || bind(ufd, (const struct sockaddr *)&cfg->listen,
		    cfg->listen_len) == -1)
			goto fail;
		what = "getsockname";
		sl = sizeof(ss);
		if (getsockname(ufd, (struct sockaddr *)&ss, &sl) == -1)
			goto fail;
		what = "tcp socket";
		tfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
		if (tfd == -1 || setsockopt(tfd, SOL_SOCKET, SO_REUSEADDR,
		    &one, sizeof(one)) == -1)
			goto fail;
		if (bind(tfd, (struct sockaddr *)&ss, sl) == 0)
			break;
		if (errno != EADDRINUSE || !listen_port_is_zero(cfg) ||
		    attempt >= 16)
			goto fail;
		close(tfd);
		close(ufd);
		tfd = ufd = -1;
	}
	what = "listen";
	if (listen(tfd, 64) == -1)
		goto fail;
	*udp = ufd;
	*tcp = tfd;
	return 0;
fail:
	serr = errno;
	snprintf(err, errlen, "dns: %s: %s", what, strerror(serr));
	if (ufd != -1)
		close(ufd);
	if (tfd != -1)
		close(tfd);
	errno = serr;
	return -1;
}

struct dns_proxy *
dns_new(struct ev_loop *loop, const struct dns_config *cfg,
    const struct dns_hooks *hooks, char *err, size_t errlen)
{
	struct dns_proxy *p;
	int serr;
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

	if (cfg->prebound) {
		p->ufd = cfg->listen_udp;
		p->tfd = cfg->listen_tcp;
	} else if (dns_listen(cfg, &p->ufd, &p->tfd, err, errlen) == -1) {
		what = NULL;	/* err says it already */
		goto fail;
	}
	what = "getsockname";
	if (dns_fd_port(p->ufd, &p->port) == -1)
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
	if (what != NULL)
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
	log_debug("dns: %llu learn batches for %llu answers, %llu learn calls "
	    "acknowledged later, %llu cache hits, "
	    "%llu tcp clients refused, %llu evicted for another source, "
	    "%llu queries dropped over their sandbox's rate, %llu refused "
	    "an upstream socket",
	    (unsigned long long)p->stat_batches,
	    (unsigned long long)p->stat_batched,
	    (unsigned long long)p->stat_learn_pending,
	    (unsigned long long)p->stat_cache_hits,
	    (unsigned long long)p->stat_tcp_refused,
	    (unsigned long long)p->stat_tcp_evicted,
	    (unsigned long long)p->stat_rl_dropped,
	    (unsigned long long)p->stat_up_refused);
	/* Answers waiting for their elements (ready, or held for a pending
	 * learn call) are dropped like every other pending query:
	 * unanswered, never answered without the learn. */
	ev_timer_cancel(p->loop, p->flush);
	p->flush = NULL;
	dns_learn_forget(p);
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
