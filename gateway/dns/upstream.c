/*
 * upstream: a query's life once the policy allowed it and the cache had
 * no answer, and its end. The question leaves with a fresh random id on a
 * shared UDP socket of random port (or on a TCP connection of its own
 * after a truncated answer), the reply is checked against the question,
 * a timeout, an error, SERVFAIL or REFUSED moves it to the next upstream,
 * and every query, however it went, ends here: recorded, answered, freed.
 * It is apart from the read loop because all of it is about what a
 * sandbox must not be able to steer: the ports and ids an off-path forger
 * needs, and the descriptors an upstream that truncates every answer
 * would otherwise use up.
 */
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <netinet/in.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns_int.h"

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

	/* A probe answers no one and is no query of a sandbox's. */
	if (pq->probe) {
		dns_probe_fail(pq);
		return;
	}
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
dns_pq_fail(struct dns_pq *pq, enum pol_reason why)
{
	pq->ev.decision = DNS_DEC_ERROR;
	pq->ev.reason = why;
	dns_pq_finish(pq, NULL, RCODE_SERVFAIL);
}

static void
pq_next_upstream(struct dns_pq *pq)
{
	pq_close_fd(pq);
	pq->up = (pq->up + 1) % pq->p->cfg.nupstreams;
	pq->tries++;
	if (pq->tries >= pq->p->cfg.nupstreams) {
		dns_pq_fail(pq, POL_REASON_UPSTREAM_FAILED);
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
	if (pq->probe) {
		pq_close_fd(pq);
		dns_probe_reply(pq, pkt);
		ldns_pkt_free(pkt);
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
		dns_pq_fail(pq, POL_REASON_NO_MEMORY);
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
			dns_pq_fail(pq, POL_REASON_OVERLOAD);
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
