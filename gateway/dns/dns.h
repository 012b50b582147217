/*
 * dns: the sandbox-facing DNS proxy (DESIGN §5, egress.md §9 items 8-19).
 *
 * A sandbox can only reach what its DNS answers taught the kernel, so this
 * proxy is where names become addresses: it identifies the sandbox by the
 * query's source address, asks policy/ whether the name and type may be
 * resolved, forwards only allowed names upstream, classifies every answered
 * address (no rebinding to metadata, loopback or private ranges), has the
 * daemon insert the kept addresses into the kernel sets and only then
 * releases the answer. Everything else gets one uniform answer, so a denied
 * name leaks nothing and no packet about it leaves the host.
 *
 * It runs inside the daemon's single epoll loop (gateway/ev.h) and reaches
 * the rest of the daemon only through struct dns_hooks, whose arguments are
 * flat structs: this seam is the privilege-separation boundary. Learning
 * may be synchronous (the daemon inserts the elements itself) or
 * asynchronous (the proxy runs in a process of its own and asks the
 * privileged parent, whose acknowledgement comes back later through
 * dns_learn_done); either way no answer leaves before its elements.
 */
#ifndef SLUICE_GATEWAY_DNS_DNS_H
#define SLUICE_GATEWAY_DNS_DNS_H

#include <sys/socket.h>

#include <netinet/in.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/ev.h"
#include "netns/fw.h"
#include "policy/policy.h"

#define DNS_MAX_UPSTREAMS	8
#define DNS_EV_MAX_ADDRS	32	/* answered addresses kept in an event */
#define DNS_EV_MAX_ELEMS	32	/* learned elements kept in an event */
/* Descriptors of upstream traffic: a UDP socket is shared by up to 64
 * queries, a TCP retry (after a truncated answer, which an upstream that a
 * sandbox controls can send for every name) takes one of its own for up to
 * timeout_ms. Both are bounded (the TCP ones per sandbox too: 8), so that
 * upstreams cannot use up the daemon's descriptors; over the bound a query
 * gets SERVFAIL. With the TCP clients (max_tcp_conns) and the listeners
 * that is all the descriptors the proxy ever holds. */
#define DNS_USOCK_MAX		128	/* UDP upstream sockets */
#define DNS_TCP_UP_MAX		64	/* TCP upstream connections */
#define DNS_UPSTREAM_FDS	(DNS_USOCK_MAX + DNS_TCP_UP_MAX)
/* What the learn hook returns when it sent the request elsewhere: the
 * answers wait for dns_learn_done. Positive, unlike 0 and -1. */
#define DNS_LEARN_PENDING	1
/* Learn calls that may be pending at once. Answers ready beyond that wait
 * (still unanswered) until an acknowledgement frees a slot, so a parent
 * that is slow to answer costs held queries (bounded by max_pending), not
 * an unbounded backlog of requests on its socket. */
#define DNS_LEARN_INFLIGHT	64

/* What the daemon tells the proxy about the sandbox a query came from. */
struct dns_client {
	char			 id[33];	/* sandbox id */
	char			 ifname[16];	/* its host-side link, for fw elements */
	const struct pol_policy	*policy;
	bool			 tainted;
};

enum dns_decision {
	DNS_DEC_ALLOW = 0,	/* forwarded, answer released */
	DNS_DEC_DENY,		/* policy, limits, rebinding: uniform deny answer */
	DNS_DEC_NODATA,		/* allowed name, type answered empty (HTTPS/SVCB) */
	DNS_DEC_SYNTHETIC,	/* sluice.internal names, answered locally */
	DNS_DEC_REFUSED,	/* unknown source */
	DNS_DEC_ERROR,		/* upstream or learn failure: SERVFAIL */
	DNS_DEC_MALFORMED,	/* FORMERR or dropped */
};

/* One element handed to learn, as the event keeps it: struct fw_elem's
 * key and lifetime without its borrowed name (the event's qname). */
struct dns_ev_elem {
	char		ifname[FW_IFNAMSIZ];
	uint8_t		family;
	uint8_t		addr[16];
	uint8_t		proto;
	uint8_t		flags;
	uint16_t	port_lo, port_hi;
	uint32_t	timeout_ms;
};

/* One answered address and what happened to it. */
struct dns_ev_addr {
	uint8_t		family;		/* AF_INET or AF_INET6 */
	uint8_t		addr[16];
	uint32_t	ttl;		/* as the upstream sent it */
	char		cls[16];	/* pol_addr_class_name() */
	bool		kept;
};

/* One dns.decision record. Flat (fixed arrays, no pointers) so it can cross
 * a process boundary unchanged. Counts may exceed the stored arrays; the
 * arrays hold the first DNS_EV_MAX_* entries. */
struct dns_event {
	char			sandbox[33];	/* "" when the source is unknown */
	char			client[INET6_ADDRSTRLEN + 8];	/* addr#port */
	bool			tcp;
	char			qname[256];	/* presentation form, no trailing dot */
	uint16_t		qtype;
	enum dns_decision	decision;
	enum pol_reason		reason;		/* its name in the record */
	char			rule[48];	/* the policy rule that decided, or "" */
	uint8_t			rcode;		/* the rcode the sandbox got; 255 = no answer */
	struct dns_ev_addr	addrs[DNS_EV_MAX_ADDRS];
	size_t			naddrs;		/* answered A/AAAA records */
	size_t			nkept, nremoved;
	struct dns_ev_elem	elems[DNS_EV_MAX_ELEMS];
	size_t			nelems;		/* elements handed to learn */
	char			upstream[INET6_ADDRSTRLEN + 8]; /* "" if none used */
	uint64_t		latency_us;	/* query in -> answer out */
	bool			finding;	/* suspected tunnel/rebinding: alert */
	/* Queries of this sandbox dropped over its rate since its previous
	 * record, neither answered nor recorded one by one (the proxy
	 * records one over-rate query a second; see dns/proxy.c,
	 * dns_handle_query). */
	uint32_t		suppressed;
};

/* Called on the loop's thread. learn either blocks the loop until the
 * kernel answers or hands the request on (DNS_LEARN_PENDING) and the proxy
 * holds the answers until dns_learn_done: never an answer before its
 * elements. record is called before the answer is sent, so a record exists
 * for every answer anyone can observe; the event is only valid during the
 * call. */
struct ech_set;	/* gateway/dns/ech.h */

struct dns_hooks {
	/* Identify the sandbox by the query's source address (v4 or v6): 0
	 * and fill *c, or -1: not a live sandbox -> REFUSED, recorded.
	 * c->policy is used only until the hook's caller returns to the
	 * loop: a query that went upstream is looked up again when its
	 * answer arrives (a sandbox gone by then gets SERVFAIL and learns
	 * nothing; a name its policy or taint no longer allows gets the
	 * uniform deny), so a reload may free old policies between loop
	 * turns. */
	int	(*lookup)(void *ctx, const struct sockaddr *src, socklen_t len,
		    struct dns_client *c);
	/*
	 * Insert/refresh the kernel elements e[0..n). One call carries the
	 * elements of every answer that became ready in one loop iteration
	 * (several queries, possibly of several sandboxes: each element
	 * names its link); none of those answers leaves before the kernel
	 * has them. e, and the names its elements point to, are valid only
	 * during the call: a hook that sends the request elsewhere copies
	 * them. ticket names the call: unique per proxy, increasing. Returns
	 *   0                  the kernel has them now (synchronous success):
	 *                      the answers leave;
	 *   -1                 refused now, errno set (ENOSPC: a sandbox is
	 *                      at its learn cap) and a message in err;
	 *   DNS_LEARN_PENDING  the request was sent elsewhere: the answers
	 *                      stay held until dns_learn_done(p, ticket, ...)
	 *                      reports its outcome (which must not be called
	 *                      from inside this hook).
	 * A refused call (now or later) of several answers is retried one
	 * answer at a time, each retry again a call that may be pending; a
	 * refused answer alone gets SERVFAIL (ENOSPC: learned_cap, with a
	 * finding once a minute per sandbox; otherwise learn_failed). At
	 * most DNS_LEARN_INFLIGHT calls are pending at once. Elements on
	 * the sandbox's taint keep-list carry FW_ELEM_KEEP, also while it
	 * is not tainted.
	 */
	int	(*learn)(void *ctx, uint64_t ticket, const struct fw_elem *e,
		    size_t n, char *err, size_t errlen);
	/* One dns.decision event per query (and findings). */
	void	(*record)(void *ctx, const struct dns_event *ev);
	/* The end of a dns_probe_https of name: status 0 with set (the ECH
	 * configs its HTTPS records publish, maybe none) and ttl_s (their
	 * smallest TTL), or -1 (no answer, an error, a malformed record).
	 * May be NULL when no probe is ever made. */
	void	(*https)(void *ctx, const char *name, int status,
		    const struct ech_set *set, uint32_t ttl_s);
	void	*ctx;
};

struct dns_config {
	/* Where to listen (UDP and TCP on the same address and port). Port 0
	 * picks an ephemeral port; dns_local_port tells which. */
	struct sockaddr_storage	listen;
	socklen_t		listen_len;
	/* The address synthetic names answer with (sluice.internal). */
	struct pol_addr		service_addr;
	struct sockaddr_storage	upstreams[DNS_MAX_UPSTREAMS];
	socklen_t		upstream_lens[DNS_MAX_UPSTREAMS];
	size_t			nupstreams;
	uint32_t		timeout_ms;	/* per upstream attempt; 0 = 2000 */
	const struct pol_cidr	*treat_as_public; /* borrowed, may be NULL */
	size_t			ntreat_as_public;
	/* TCP clients. Each whole query must arrive within tcp_idle_ms of
	 * the accept or of the previous one (a deadline, not an idle timer:
	 * a part of a message does not extend it), and a connection with
	 * nothing owed is closed then. max_tcp_conns is shared by every
	 * sandbox; one source address (a sandbox) holds at most
	 * tcp_per_sandbox of them, and when all are taken a newcomer whose
	 * source holds fewer takes the slot of the source holding the most.
	 * A tcp_per_sandbox given must be below max_tcp_conns (else it is
	 * cut to half of it), so that no one sandbox can fill them. */
	uint32_t		tcp_idle_ms;	/* 0 = 10000 */
	uint32_t		max_tcp_conns;	/* 0 = 256 */
	uint32_t		tcp_per_sandbox; /* 0 = 8 */
	/* Addresses (A or AAAA records of the question's CNAME chain) one
	 * answer may teach the kernel: the first ones are kept, the rest
	 * are dropped from the answer unexamined. 0 = 32, at most 512. */
	uint32_t		max_answer_addrs;
	uint32_t		max_pending;	/* queries in flight; 0 = 4096 */
	uint16_t		max_udp_size;	/* EDNS clamp; 0 = 1232, at most 4096 */
	/* Upstream answers kept for reuse (each use is still filtered,
	 * decided and learned like a fresh answer); 0 = 16384, and 4 MiB
	 * at most whatever the count. no_cache sends every query upstream. */
	uint32_t		cache_max;
	bool			no_cache;
	/* Listeners the caller bound already (dns_listen; a process that
	 * may not bind the port gets them from one that may): dns_new takes
	 * them (dns_free closes them) and does not bind listen. */
	bool			prebound;
	int			listen_udp, listen_tcp;
};

struct dns_proxy;

/* dns_fd_port: the local port (host order) of the bound socket fd.
 * 0, or -1 with errno. */
int			 dns_fd_port(int fd, uint16_t *port);
/* dns_listen: binds the UDP and TCP listeners of cfg->listen (TCP on the
 * UDP port, also an ephemeral one), non-blocking, close-on-exec, TCP
 * listening. 0 with *udp and *tcp, or -1 with errno and err. */
int			 dns_listen(const struct dns_config *cfg, int *udp,
			    int *tcp, char *err, size_t errlen);

/* dns_new: bind the UDP and TCP listeners of cfg and register them with
 * loop. hooks is copied (lookup and learn are required; record may be
 * NULL); cfg is copied except treat_as_public, which is borrowed and must
 * outlive the proxy. NULL on failure with errno set (EINVAL for bad
 * arguments, else the socket call's) and a message in err. Call only from
 * the loop's thread (or before the loop runs). */
struct dns_proxy	*dns_new(struct ev_loop *loop, const struct dns_config *cfg,
			    const struct dns_hooks *hooks, char *err, size_t errlen);
/* dns_free: close every socket, cancel every timer, drop pending queries
 * without answering them, those held for a pending learn call too (their
 * tickets die with the proxy). dns_free(NULL) is a no-op. Loop thread only. */
void			 dns_free(struct dns_proxy *p);
/* dns_child_main: main() of the DNS process (gateway/dns/child.c),
 * started by the daemon as `sluiced --room dns --uid U --gid G
 * [--foreground] [--verbose]` with its channel and listeners at fixed
 * descriptors (gateway/privsep/proc.h). Returns the exit status. */
int			 dns_child_main(int argc, char **argv);
/* dns_local_port: the bound port (host order), useful after port 0. */
uint16_t		 dns_local_port(const struct dns_proxy *p);
/*
 * dns_learn_done: the outcome of the learn call ticket that returned
 * DNS_LEARN_PENDING. err_no 0: the kernel has the elements, and the
 * call's answers are released (recorded first; UDP ones leave together
 * at the end of the loop iteration). Otherwise err_no is the refusal's
 * errno (ENOSPC: a learn cap) and err a message or NULL, handled as a
 * refusal of the call itself would be (see struct dns_hooks, learn). A
 * ticket that is not pending (unknown, or already done) is ignored.
 * Loop thread only, and never from inside the learn hook: a ticket is
 * pending only once the hook has returned.
 */
void			 dns_learn_done(struct dns_proxy *p, uint64_t ticket,
			    int err_no, const char *err);
/*
 * dns_probe_https: asks the upstreams, as the proxy asks for a sandbox,
 * for the HTTPS records (type 65) of name; the end goes to the https
 * hook, and nothing of it to a client, the cache or the record hook.
 * It counts as one query pending (max_pending). 0, or -1 with errno
 * (EINVAL: not a name that fits a question, EBUSY: at max_pending,
 * ENOMEM); on -1 the hook is not called.
 */
int			 dns_probe_https(struct dns_proxy *p,
			    const char *name);
/*
 * dns_learn_abort_all: every pending learn call is taken as refused for
 * good: its answers get SERVFAIL (learn_failed), none retried. For when
 * whoever was to acknowledge is gone (the parent process); answers still
 * waiting for a free slot are left to the next learn call. Returns the
 * number of answers failed. Loop thread only, not from inside a hook.
 */
size_t			 dns_learn_abort_all(struct dns_proxy *p);

/*
 * The query parser, exposed for the fuzz target and unit tests. Pure: no
 * I/O, no allocation that outlives the call.
 */
struct dns_query {
	uint16_t	id;
	bool		rd;
	bool		edns;		/* an OPT record was present */
	uint16_t	edns_size;	/* the client's advertised size (raw) */
	uint16_t	qtype, qclass;
	char		qname[256];	/* lower case, no trailing dot */
	bool		bad_name;	/* a byte outside [a-z0-9_-] (shown as '?') */
	uint8_t		qwire[256];	/* the question name as sent (wire, case kept) */
	size_t		qwire_len;
};

enum dns_parse_result {
	DNS_PARSE_OK = 0,
	DNS_PARSE_DROP,		/* not answerable: short, a response, ... */
	DNS_PARSE_FORMERR,	/* answer FORMERR (id is valid) */
	DNS_PARSE_NOTIMP,	/* opcode other than QUERY */
};

/* dns_parse_query: validate one query message (buf, len). On OK fills *q.
 * On FORMERR/NOTIMP q->id and q->rd are set so an error can be sent. Never
 * reads past len; any doubt is FORMERR or DROP. */
enum dns_parse_result dns_parse_query(const uint8_t *buf, size_t len,
			    struct dns_query *q);

/*
 * The answer filter, exposed for the fuzz target and unit tests: what the
 * proxy keeps of an upstream (or cached) answer that passed the id and
 * question checks. Pure apart from allocation: no I/O, no clock, no proxy
 * state. in and everything it points to are borrowed for the call.
 */
struct dns_filter_in {
	const struct dns_query		*q;	/* the sandbox's question */
	const struct dns_client		*c;	/* its sandbox and policy */
	const struct pol_dns_limits	*lim;	/* min_ttl <= max_ttl */
	const struct pol_cidr		*treat_as_public;
	size_t				 ntreat_as_public;
	size_t				 max_addrs;	/* 0 = 32 */
};
struct dns_filter_out {
	bool		*keep;	/* per answer-section record: sent on */
	uint32_t	*ttls;	/* per answer-section record: its new TTL */
	struct fw_elem	*el;	/* the elements to learn, nel of them */
	size_t		 nel;
};
struct ldns_struct_pkt;
/*
 * dns_filter_answer: follow the CNAME chain from the question's name
 * through pkt's answer section (records of other owners are dropped),
 * keep no more than the first max_addrs A/AAAA records of the asked type
 * (the rest are dropped unexamined: the cap bounds what one answer costs
 * the kernel and the loop), classify each with policy/ (always-denied
 * classes, private ranges without an explicit allow and explicit denies
 * are removed), and for each kept address make one element per port
 * segment the name is allowed on over TCP or UDP (ICMP rules for a name
 * are not learned: the firewall allows ICMP by address), with timeout
 * clamp(TTL, min, max) kept within [1 s, UINT32_MAX ms]; a kept address's
 * record gets a TTL no longer than its elements live. Adds
 * the answered addresses to ev (addrs, naddrs, nkept, nremoved, finding).
 * 0 with *out filled (release with dns_filter_out_free), or -1 (ENOMEM)
 * with *out empty. pkt is not modified.
 */
int	dns_filter_answer(const struct dns_filter_in *in,
	    struct ldns_struct_pkt *pkt, struct dns_event *ev,
	    struct dns_filter_out *out);
/* dns_filter_out_free: free what out holds and empty it; NULL is a no-op. */
void	dns_filter_out_free(struct dns_filter_out *out);

#endif /* SLUICE_GATEWAY_DNS_DNS_H */
