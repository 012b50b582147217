/*
 * tcp: the proxy's TCP clients (RFC 7766). A connection is state a
 * datagram is not: a message arriving in pieces, answers queued for a
 * client that may not read them, several queries in flight, a half-close
 * that must still be answered, and slots shared by every sandbox. Each
 * whole message takes the datagram's path (dns_handle_query); this file
 * adds what keeps one client, or a few sandboxes together, from holding
 * the connections or the daemon's memory.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/dns/dns_int.h"

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
