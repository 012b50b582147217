/*
 * dns_int: the DNS proxy's private types, shared by the files of
 * gateway/dns/ and nobody else. dns.h is the room's public face; this
 * header exists so that the read loop, the TCP clients, the upstream side,
 * the cache, the answer path and the filter can be separate files without
 * exposing struct dns_proxy or a query in flight to the rest of the
 * daemon. When the proxy runs as a process of its own, all of this stays
 * inside it. Loop thread only, like everything in the room.
 */
#ifndef SLUICE_GATEWAY_DNS_DNS_INT_H
#define SLUICE_GATEWAY_DNS_DNS_INT_H

#include <sys/socket.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns.h"
#include "gateway/ev.h"
#include "netns/fw.h"
#include "policy/policy.h"

#define DNS_HDR			12
#define DNS_MAX_QUERY		4096	/* larger "queries" are hostile */
#define DNS_MAX_MSG		65535
#define DNS_UDP_BURST		64	/* datagrams per wakeup, for fairness */
#define DNS_MAX_ELEMS		512	/* elements per answer */
#define DNS_MAX_ANSWER_ADDRS	32	/* default cfg.max_answer_addrs */
#define DNS_BATCH_ELEMS		1024	/* elements per learn batch */
#define DNS_RECV_BATCH		16	/* datagrams per recvmmsg */
#define DNS_CAPNOTE_SLOTS	256	/* sandboxes whose learn cap finding is timed */

#define RCODE_NOERROR	0
#define RCODE_FORMERR	1
#define RCODE_SERVFAIL	2
#define RCODE_NXDOMAIN	3
#define RCODE_NOTIMP	4
#define RCODE_REFUSED	5
#define RCODE_NONE	255

struct dns_proxy;
struct dns_conn;
struct dns_pq;
struct dns_usock;	/* upstream.c */
struct dns_centry;	/* cache.c */
struct dns_cslot;	/* cache.c */
struct dns_bucket;	/* proxy.c */
struct dns_out;		/* proxy.c */

/* A query in flight upstream. */
struct dns_pq {
	struct dns_proxy	*p;
	struct dns_pq		*next, *prev;		/* proxy's list */
	struct dns_pq		*cnext;			/* conn's list */
	struct dns_conn		*conn;			/* TCP client, or NULL */
	bool			 orphan;		/* its TCP client left */
	struct sockaddr_storage	 src;			/* the client */
	socklen_t		 srclen;
	struct dns_query	 q;
	struct dns_client	 c;
	char			 pdigest[65];	/* c.policy's, when asked */
	struct pol_dns_limits	 lim;
	struct dns_event	 ev;
	uint64_t		 t0_us;
	size_t			 up;			/* upstream index */
	size_t			 tries;
	int			 fd;			/* TCP upstream */
	struct dns_usock	*us;			/* UDP upstream */
	struct dns_pq		*unext, *uprev;		/* us's list */
	bool			 tcp;			/* upstream over TCP */
	bool			 sent;
	uint16_t		 upid;
	uint8_t			 upq[DNS_HDR + 256 + 4 + 11];
	size_t			 upqlen;
	uint8_t			*rbuf;			/* TCP upstream reply */
	size_t			 rlen;
	struct ev_timer		*timer;
	/* Answer built, waiting for its elements: on the proxy's ready list,
	 * then in a learn call (struct dns_lbatch) until it is released.
	 * From then on only answer.c finishes or frees it (and dns_free):
	 * its timer is cancelled and its upstream socket closed before it
	 * becomes ready (pq_close_fd), and a TCP client that leaves only
	 * orphans it (dns_conn_close), so nothing else reaches it. */
	struct dns_pq		*rnext;
	ldns_buffer		*ans;
	uint8_t			 ans_rcode;
	struct fw_elem		*el;
	size_t			 nel;
	bool			 alone;		/* its batch failed: learn it alone */
	bool			 probe;		/* dns_probe_https's: no client */
};

/* A learn call the hook sent elsewhere (DNS_LEARN_PENDING): its answers,
 * held until dns_learn_done says how it went. A free slot has no pqs. */
struct dns_lbatch {
	uint64_t		 ticket;
	struct dns_pq		*pqs;		/* by rnext, in arrival order */
	size_t			 npq;
	size_t			 nb;		/* elements sent */
};

/* A TCP client (tcp.c). */
struct dns_conn {
	struct dns_proxy	*p;
	struct dns_conn		*next, *prev;
	int			 fd;
	struct sockaddr_storage	 src;
	socklen_t		 srclen;
	uint8_t			 in[2 + DNS_MAX_MSG];
	size_t			 inlen;
	uint8_t			*out;
	size_t			 outlen, outcap;
	struct dns_pq		*pqs;
	size_t			 inflight;
	bool			 eof;		/* client half-closed */
	struct ev_timer		*idle;
	bool			 moved;		/* output written since idle armed */
	uint64_t		 last;		/* conn_tick, last message */
};

/* When a sandbox's answer was last refused at its learn cap with a
 * finding: the finding is raised once per DNS_CAPNOTE_MS, not per answer. */
struct dns_capnote {
	char		id[33];
	uint64_t	ms;
};

/* The proxy: its sockets, queries in flight, TCP clients, rate buckets,
 * cache, the answers waiting for the end of the loop iteration and those
 * waiting for a pending learn call. */
struct dns_proxy {
	struct ev_loop		*loop;
	struct dns_config	 cfg;
	struct dns_hooks	 h;
	int			 ufd, tfd;
	uint16_t		 port;
	struct dns_pq		*pqs;
	size_t			 npending;
	struct dns_usock	*usocks;
	size_t			 nusocks;
	size_t			 ntcpup;		/* TCP upstream fds */
	/* Upstream queries of one listener wakeup, sent when it ends with
	 * one sendmmsg per socket (dns_usend_flush), all on one socket while it
	 * has room (burst_us). */
	bool			 deferring;
	struct dns_usock	*burst_us;
	struct dns_pq		*usend[DNS_UDP_BURST];
	size_t			 nusend;
	struct dns_pq		*spare;			/* freed, for reuse */
	size_t			 nspare;
	struct dns_conn		*conns;
	size_t			 nconns;
	uint64_t		 conn_tick;	/* orders TCP client activity */
	struct dns_bucket	*rl;
	uint8_t			 buf[DNS_MAX_MSG + 1];
	/* Answers whose elements are learned together at the end of the
	 * loop iteration (dns_flush), in arrival order. */
	struct dns_pq		*ready, **ready_tail;
	struct ev_timer		*flush;
	bool			 flushing;		/* inside dns_flush */
	struct fw_elem		*bel;			/* DNS_BATCH_ELEMS */
	/* Learn calls pending (DNS_LEARN_PENDING), and the last ticket. */
	struct dns_lbatch	 lb[DNS_LEARN_INFLIGHT];
	size_t			 nlb;
	uint64_t		 ticket;
	bool			 in_learn;		/* inside the learn hook */
	struct dns_out		*out;			/* DNS_OUT_SLOTS */
	size_t			 nout;
	uint8_t			*rbufs;			/* recvmmsg buffers */
	struct dns_cslot	*cslots;		/* the cache's index */
	size_t			 cmask;			/* slots - 1 */
	size_t			 cache_cap;		/* at most slots / 2 */
	struct dns_centry	*cold, *cnew;		/* oldest, newest */
	size_t			 ncache, cache_bytes;
	/* Kernel randomness for upstream ids, fetched 512 bytes at a time:
	 * one getrandom per 256 queries instead of one per query. */
	uint8_t			 rnd[512];
	size_t			 rndpos;
	uint64_t		 stat_batches, stat_batched, stat_learn_pending;
	uint64_t		 stat_cache_hits;
	uint64_t		 stat_tcp_refused, stat_tcp_evicted;
	struct dns_capnote	 capnote[DNS_CAPNOTE_SLOTS];
	uint64_t		 stat_rl_dropped, stat_up_refused;
};

/* dns_now_us: the monotonic clock in microseconds (latencies, and a last
 * resort for ids when the kernel gives no randomness). */
static inline uint64_t
dns_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* dns_copystr: truncating string copy (strlcpy; src NULL copies ""):
 * snprintf("%s") costs far more, and this runs several times per query. */
static inline void
dns_copystr(char *dst, size_t len, const char *src)
{
	size_t n;

	if (len == 0)
		return;
	if (src == NULL)
		src = "";
	n = strnlen(src, len - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* ---- wire.c ---- */

/* dns_buf_room: room for n more bytes at b's position; false (and b's
 * status an error) when an earlier write failed or there is no memory. */
bool	dns_buf_room(ldns_buffer *b, size_t n);
/* dns_put_head: the header of an answer to q with rcode, TC and ancount
 * and, when has_q, q's question as the client sent it (arcount 1 when it
 * used EDNS: the caller adds dns_put_opt). Nothing on failure. */
void	dns_put_head(ldns_buffer *b, const struct dns_query *q, bool has_q,
	    uint8_t rcode, bool tc, uint16_t ancount);
/* dns_put_opt: our OPT record advertising size; nothing on failure. */
void	dns_put_opt(ldns_buffer *b, uint16_t size);

/* ---- proxy.c ---- */

/* dns_sa_format: sa as "address#port" into buf (len bytes, always
 * terminated when len > 0). */
void	dns_sa_format(const struct sockaddr *sa, char *buf, size_t len);
/* dns_record: ev's latency from t0 (dns_now_us), then the record hook. */
void	dns_record(struct dns_proxy *p, struct dns_event *ev, uint64_t t0);
/* dns_reply: send the answer in b to the client of (cn | src): over TCP
 * as it is, over UDP cut to header and question with TC when it is over
 * the client's size, queued for the end of the loop iteration. */
void	dns_reply(struct dns_proxy *p, struct dns_conn *cn,
	    const struct sockaddr *src, socklen_t srclen,
	    const struct dns_query *q, bool has_q, ldns_buffer *b);
/* dns_reply_simple: a local answer with no records and rcode, through
 * dns_reply; nothing is sent without memory. */
void	dns_reply_simple(struct dns_proxy *p, struct dns_conn *cn,
	    const struct sockaddr *src, socklen_t srclen,
	    const struct dns_query *q, bool has_q, uint8_t rcode);
/* dns_out_send: send every queued UDP answer now. */
void	dns_out_send(struct dns_proxy *p);
/* dns_deny_rcode: the rcode of the uniform deny under limits l. */
uint8_t	dns_deny_rcode(const struct pol_dns_limits *l);
/* dns_decide_name: the policy's decision on q's name and type for c. */
void	dns_decide_name(const struct dns_client *c, const struct dns_query *q,
	    struct pol_decision *d);
/* dns_handle_query: one query message (m, len) from (cn | src), from the
 * rate limit to an answer or a query in flight; may close cn. */
void	dns_handle_query(struct dns_proxy *p, struct dns_conn *cn,
	    const struct sockaddr *src, socklen_t srclen, const uint8_t *m,
	    size_t len);
/* dns_rbufs_prep: DNS_RECV_BATCH recvmmsg headers over p's receive slots
 * (DNS_MAX_QUERY + 1 bytes each) and from[] for the senders. */
void	dns_rbufs_prep(struct dns_proxy *p, struct mmsghdr *mh,
	    struct iovec *iov, struct sockaddr_storage *from);

/* ---- tcp.c ---- */

/* dns_tcp_accept_cb: the TCP listener's callback (arg: the proxy). */
void	dns_tcp_accept_cb(struct ev_loop *loop, int fd, unsigned events,
	    void *arg);
/* dns_conn_done: cn is half-closed with nothing left to answer or write. */
bool	dns_conn_done(struct dns_conn *cn);
/* dns_conn_send: queue message m for cn and write what the socket takes;
 * a client that does not read, or no memory, closes cn. */
void	dns_conn_send(struct dns_conn *cn, const uint8_t *m, size_t len);
/* dns_conn_close: close and free cn; its queries still upstream finish
 * and are recorded, unanswered. */
void	dns_conn_close(struct dns_conn *cn);

/* ---- upstream.c ---- */

/* dns_pq_alloc: a zeroed query, a spare one if there is one; NULL without
 * memory. */
struct dns_pq	*dns_pq_alloc(struct dns_proxy *p);
/* dns_pq_start: (re)send pq's question to upstream pq->up; a failure moves
 * it to the next upstream, and past the last one it ends in SERVFAIL. */
void		 dns_pq_start(struct dns_pq *pq);
/* dns_pq_finish: record pq with rcode, answer its client with b (or, b
 * NULL, a simple answer) unless the client left, and free pq. */
void		 dns_pq_finish(struct dns_pq *pq, ldns_buffer *b,
		    uint8_t rcode);
/* dns_pq_fail: pq ends in SERVFAIL, recorded with reason why. */
void		 dns_pq_fail(struct dns_pq *pq, enum pol_reason why);
/* dns_pq_free: pq unanswered and unrecorded: its sockets and timer closed,
 * unlinked from the proxy and its client, kept as a spare or freed. */
void		 dns_pq_free(struct dns_pq *pq);
/* dns_usend_flush: send the upstream queries queued during a listener
 * wakeup, and end the wakeup's deferral. */
void		 dns_usend_flush(struct dns_proxy *p);
/* dns_usock_close: close and free an upstream socket (none in flight). */
void		 dns_usock_close(struct dns_usock *us);

/* ---- probe.c ---- */

/* dns_probe_reply: a probe's checked answer (NOERROR or NXDOMAIN): its
 * HTTPS records to the https hook; pq is freed. pkt stays the caller's. */
void		 dns_probe_reply(struct dns_pq *pq, ldns_pkt *pkt);
/* dns_probe_fail: a probe without an answer: -1 to the https hook; pq
 * is freed. */
void		 dns_probe_fail(struct dns_pq *pq);

/* ---- cache.c ---- */

/* dns_cslots_new: the cache index for cfg; *maskp the slot count - 1,
 * *capp the entry bound. NULL without memory. */
struct dns_cslot *dns_cslots_new(const struct dns_config *cfg, size_t *maskp,
		    size_t *capp);
/* dns_cache_put: keep the checked upstream reply (m, len, parsed as pkt)
 * to q, when it may be kept. */
void		 dns_cache_put(struct dns_proxy *p, const struct dns_query *q,
		    ldns_pkt *pkt, const uint8_t *m, size_t len);
/* dns_cache_get: the cached answer to q with aged TTLs (the caller frees
 * it), or NULL. */
ldns_pkt	*dns_cache_get(struct dns_proxy *p, const struct dns_query *q);
/* dns_cache_clear: drop every entry (the index stays). */
void		 dns_cache_clear(struct dns_proxy *p);

/* ---- answer.c ---- */

/* dns_pq_answer: pq's checked upstream (or cached) answer pkt, filtered,
 * rebuilt and queued with its elements for the end of the loop iteration;
 * relookup when the query crossed a loop turn. pkt stays the caller's. */
void	dns_pq_answer(struct dns_pq *pq, ldns_pkt *pkt, bool relookup);
/* dns_flush_schedule: make sure the end-of-iteration flush (learn, then
 * release; queued UDP answers) runs. */
void	dns_flush_schedule(struct dns_proxy *p);
/* dns_learn_forget: empty the pending learn calls and the ready list
 * without answering or freeing their queries (dns_free frees them with
 * the rest). */
void	dns_learn_forget(struct dns_proxy *p);

#endif /* SLUICE_GATEWAY_DNS_DNS_INT_H */
