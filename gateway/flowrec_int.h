/*
 * flowrec_int.h: what flowrec.c (events, records, the tick) and
 * flowrec_tab.c (the tables of open flows and learned names) share, and
 * nobody else. Every table here is bounded per sandbox (flowrec.h gives
 * the numbers); the chains hash with a key drawn at start, so that no
 * sandbox chooses which of its entries collide.
 */
#ifndef SLUICE_GATEWAY_FLOWREC_INT_H
#define SLUICE_GATEWAY_FLOWREC_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway/ev.h"
#include "gateway/flowrec.h"
#include "gateway/gw.h"
#include "gateway/privsep/sbxtab.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"
#include "netns/ct.h"

#define FR_KEYLEN	13		/* src dst sport dport proto */
#define FR_FLOW_BUCKETS	65536u
#define FR_LEARN_BUCKETS 65536u

/* Where a flow's name came from. */
enum fr_src { FR_SRC_NONE = 0, FR_SRC_GATE, FR_SRC_DNS };

/* An open flow of a sandbox, from its first event to its destroy: its
 * name, and what its records have carried so far. */
struct fr_flow {
	struct fr_flow	*hnext;		/* the table's chain */
	struct fr_flow	*prev, *next;	/* its sandbox's list, by due_ms */
	struct fr_sbx	*s;
	uint8_t		 key[FR_KEYLEN];
	uint8_t		 src;		/* enum fr_src */
	uint8_t		 missed;	/* the kernel had no entry once */
	uint64_t	 due_ms;	/* next interim record (monotonic) */
	uint64_t	 bytes[2], packets[2];	/* recorded so far */
	uint32_t	 interims;
	char		*name;		/* NULL: none known */
};

/* A destination a DNS answer opened for a sandbox, and for which name. */
struct fr_learn {
	struct fr_learn	*hnext;		/* the table's chain */
	struct fr_learn	*snext;		/* its sandbox's list */
	uint8_t		 sbx[4], dst[4];
	uint8_t		 proto;
	uint16_t	 lo, hi;
	uint64_t	 expires_ms;	/* monotonic, as the kernel's element */
	char		*name;
};

/* One summary of a second: the flows of one name past the itemised bound. */
struct fr_agg {
	char		*name;		/* NULL: flows without a name */
	uint64_t	 flows, interims;
	uint64_t	 bytes[2], packets[2];
	uint64_t	 first_ms, last_ms;	/* wall clock */
};

/* A sandbox, by its address (an entry of the sbxtab). It outlives the
 * sandbox by FR_GONE_MS: the removal deletes its conntrack entries, and
 * their destroy events come after it. */
struct fr_sbx {
	struct fr_sbx	*prev, *next;	/* every entry, for the tick */
	uint8_t		 addr[4];
	char		 id[SBX_ID_MAX + 1];
	char		 policy[SBX_POLICY_MAX + 1];
	bool		 tainted;
	uint64_t	 gone_ms;	/* removed at (monotonic), 0: alive */
	/* The rate bound: itemised this second, the rest summarised. */
	uint64_t	 sec;
	uint32_t	 n;
	struct fr_agg	 agg[FLOWREC_SUMMARIES];
	uint32_t	 nagg;
	struct fr_agg	 other;		/* names past FLOWREC_SUMMARIES */
	/* Open flows, oldest due first; learned names. */
	struct fr_flow	*due, *due_tail;
	uint32_t	 nflows;
	struct fr_learn	*learned;
	uint32_t	 nlearned;
	uint64_t	 lpruned_ms;
	uint64_t	 untracked, unlearned;	/* past the bounds, counted */
};

struct flowrec {
	struct ev_loop	*loop;
	struct gw	*gw;
	struct sbx	*sbx;
	struct rec	*rec;
	struct ct	*ct;		/* counters of long flows */
	uint8_t		 svc4[4];
	uint64_t	 interval_ms;
	int		 fd;
	struct ev_timer	*tick;
	uint64_t	 lost, missing;
	uint32_t	 seed;
	struct sbxtab	*sbxs;		/* struct fr_sbx by address */
	struct fr_sbx	*all;		/* and in a list, for the tick */
	struct fr_flow	*fh[FR_FLOW_BUCKETS];
	uint32_t	 nflows;
	struct fr_learn	*lh[FR_LEARN_BUCKETS];
	uint32_t	 nlearned;
};

/* frt_key: the key of IPv4 flow f. */
void		 frt_key(uint8_t k[FR_KEYLEN], const struct ct_flow *f);
/* frt_flow: f's entry from its key (ports, addresses, protocol), or NULL. */
struct fr_flow	*frt_flow(struct flowrec *fr, const uint8_t k[FR_KEYLEN]);
/* frt_flow_add: a new entry of sandbox s for key k, due an interim at
 * due_ms, or NULL when s has FLOWREC_FLOWS open (or the daemon
 * FLOWREC_FLOWS_ALL, or no memory): s->untracked counts it. */
struct fr_flow	*frt_flow_add(struct flowrec *fr, struct fr_sbx *s,
		    const uint8_t k[FR_KEYLEN], uint64_t due_ms);
/* frt_flow_due: f is due again at due_ms (not before any flow of its
 * sandbox: the interval is one), at the tail of its sandbox's list. */
void		 frt_flow_due(struct fr_flow *f, uint64_t due_ms);
/* frt_flow_set_name: f's name from now on (copied; NULL clears). */
void		 frt_flow_set_name(struct fr_flow *f, const char *name,
		    enum fr_src src);
/* frt_flow_del: removes and frees f. */
void		 frt_flow_del(struct flowrec *fr, struct fr_flow *f);

/* frt_learn_put: sandbox s learned dst (proto, ports lo..hi) for name,
 * until expires_ms: the newest name of that destination replaces the one
 * before. Past FLOWREC_LEARNED of s (after dropping what expired, at
 * most once a second), nothing is kept and s->unlearned counts it. */
void		 frt_learn_put(struct flowrec *fr, struct fr_sbx *s,
		    const uint8_t dst[4], uint8_t proto, uint16_t lo,
		    uint16_t hi, uint64_t expires_ms, const char *name,
		    uint64_t now_ms);
/* frt_learn_name: the name s learned dst for, for proto and port, still
 * alive at now_ms (the latest to expire), or NULL. */
const char	*frt_learn_name(struct flowrec *fr, const struct fr_sbx *s,
		    const uint8_t dst[4], uint8_t proto, uint16_t port,
		    uint64_t now_ms);

/* frt_sbx_clear: frees every flow and learned name of s. */
void		 frt_sbx_clear(struct flowrec *fr, struct fr_sbx *s);

#endif /* SLUICE_GATEWAY_FLOWREC_INT_H */
