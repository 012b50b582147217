/*
 * ct: the kernel's connection tracking table, through ctnetlink.
 *
 * Rules in the forward chain accept "ct state established" before they look
 * at a sandbox's allows, so a flow outlives the allow that let it start:
 * removing a sandbox, reusing its address, or narrowing what it may reach
 * must also remove the conntrack entries that rule no longer covers, or a
 * leftover entry (same tuple, a new sandbox on the same address) is
 * accepted as established. This module finds entries by their original
 * tuple and deletes them. It also reads one entry's counters (ct_get),
 * for the records of flows that live long.
 *
 * A leaf: it never logs or exits. Every call works in the network
 * namespace the handle was made in. Functions return a count (or 0) on
 * success and -1 with errno and a message in err on failure. A handle is
 * not thread-safe.
 */
#ifndef SLUICE_NETNS_CT_H
#define SLUICE_NETNS_CT_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

/* One conntrack entry as seen in its original direction. Addresses in
 * network byte order (AF_INET: the first 4 bytes), ports in host byte
 * order (0 for protocols without ports). */
struct ct_flow {
	uint8_t		family;		/* AF_INET or AF_INET6 */
	uint8_t		proto;		/* IPPROTO_* */
	uint8_t		src[16], dst[16];
	uint16_t	sport, dport;
	uint8_t		rsrc[16];	/* reply source (after DNAT: the
					 * address that answers) */
};

struct ct;

/* ct_new: one NETLINK_NETFILTER socket in the caller's current network
 * namespace. NULL with errno and err on failure. Free with ct_free. */
struct ct	*ct_new(char *err, size_t errlen);
/* ct_free: closes the socket; NULL is a no-op. */
void		 ct_free(struct ct *ct);

/* ct_del_src: deletes every entry of family whose original source address
 * is addr (4 or 16 bytes). Returns how many were deleted (entries that
 * went away meanwhile are not counted and are no error), or -1. */
int		 ct_del_src(struct ct *ct, uint8_t family, const uint8_t *addr,
		    char *err, size_t errlen);

/* ct_del_dst: deletes the entries from src to dst of protocol proto (0:
 * any) whose original destination port is in [lo, hi] (ignored for
 * protocols without ports). Returns how many, or -1. */
int		 ct_del_dst(struct ct *ct, uint8_t family, const uint8_t *src,
		    const uint8_t *dst, uint8_t proto, uint16_t lo, uint16_t hi,
		    char *err, size_t errlen);

/* ct_del_if: deletes the entries whose original source is src for which
 * del(flow, arg) returns non-zero; del is called once per such entry,
 * after the table was read and before anything is deleted. Returns how
 * many were deleted, or -1. */
int		 ct_del_if(struct ct *ct, uint8_t family, const uint8_t *src,
		    int (*del)(const struct ct_flow *f, void *arg), void *arg,
		    char *err, size_t errlen);

struct ct_end;
/* ct_get: the entry of the IPv4 flow f (its original tuple: family,
 * proto, src, dst, ports) as it is now, counters and start included, into
 * *out (out->created false, no stop). One request and its answer on the
 * handle's socket, which the kernel gives at once (no blocking on the
 * flow). 0, or -1 with errno (ENOENT: no such entry, and err untouched;
 * EINVAL: not IPv4 or NULL). */
int		 ct_get(struct ct *ct, const struct ct_flow *f,
		    struct ct_end *out, char *err, size_t errlen);

/* ------------------------------------------------------- ct_events.c */

/* A flow that ended, as its conntrack entry's destroy event tells it:
 * counters of each direction ([0] original, the sandbox's, [1] reply),
 * its conntrack mark, and its start and end (CLOCK_REALTIME ns; 0 when
 * the kernel kept no timestamp). Or, with created set, a flow the kernel
 * let through and began to track (its tuple only; nothing counted yet). */
struct ct_end {
	bool		created;
	struct ct_flow	f;
	uint32_t	mark;
	uint64_t	packets[2], bytes[2];
	uint64_t	start_ns, stop_ns;
};

/* ct_events_open: a non-blocking, close-on-exec socket subscribed to the
 * new-flow and destroy events of the caller's network namespace, after turning on
 * the per-flow counters and timestamps there (nf_conntrack_acct,
 * nf_conntrack_timestamp: flows that began before count nothing). The fd,
 * or -1 with errno and err. */
int	ct_events_open(char *err, size_t errlen);
/* ct_events_read: every event waiting on fd, each to fn (f is valid
 * during the call). The number read, or -1 with errno (EAGAIN: none;
 * ENOBUFS: the kernel dropped some, *lost set to 1; read again). */
int	ct_events_read(int fd, void (*fn)(void *arg, const struct ct_end *e),
	    void *arg, int *lost);

#endif /* SLUICE_NETNS_CT_H */
