/*
 * netdeny: denied packets as `net.deny` events. The kernel logs every packet
 * the `inet sluice` table refuses to an nflog group; a sandbox that hammers
 * a blocked address, or tries every port of it, would turn that into a
 * flood of events, so they are aggregated per (sandbox link, reason,
 * protocol, destination address) for one second and reported once per key
 * with a count and the destination ports seen. A link makes at most
 * ND_LINK_KEYS keys a second; its packets beyond them go into one summary
 * record of that link. The table is bounded too: when it is full, further
 * new keys are counted as dropped (and reported as one summary), never
 * stored, so a flood costs neither memory nor log volume (the packets are
 * still denied; only their records are summarised).
 *
 * The table (nd_table_*) is pure and unit-tested; the daemon part (nd_new)
 * reads nflog in the event loop and flushes once a second.
 */
#ifndef SLUICE_GATEWAY_NETDENY_H
#define SLUICE_GATEWAY_NETDENY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "gateway/ev.h"
#include "netns/fw.h"
#include "policy/policy.h"

#define ND_TABLE_DEFAULT	4096	/* keys per second */
#define ND_TABLE_MAX		(1u << 20)
#define ND_LINK_KEYS		32	/* keys per link per second */
#define ND_PORTS_KEEP		16	/* destination ports named per key */

/* One aggregated key: the first packet as nflog reported it (addresses
 * and ports, input link, log prefix), how many, first and last time seen
 * (ms, as given to nd_table_add), and the distinct destination ports (the
 * first ND_PORTS_KEEP; packets to others are counted in other_ports).
 * summary: a link's packets over its ND_LINK_KEYS (count of them; d holds
 * only the link and the first such packet's addresses), nkeys: the keys
 * the link made. */
struct nd_entry {
	struct fw_denied	d;
	uint64_t		count;
	int64_t			first_ms, last_ms;
	char			sandbox[33];	/* id ("" = unknown) */
	uint16_t		ports[ND_PORTS_KEEP];
	uint8_t			nports;
	uint64_t		other_ports;
	int			summary;
	uint32_t		nkeys;
};

enum nd_add {
	ND_ADD_DROPPED = -1,	/* the table is full: counted as dropped */
	ND_ADD_COUNTED = 0,	/* into the key it already had */
	ND_ADD_NEW = 1,		/* a new key */
	ND_ADD_SUMMARISED = 2,	/* its link's keys are spent: into the
				 * link's summary */
};

struct nd_table;

/* nd_table_new: room for cap keys (1..ND_TABLE_MAX). NULL with errno. */
struct nd_table	*nd_table_new(size_t cap);
/* nd_table_free: NULL is a no-op. */
void		 nd_table_free(struct nd_table *t);
/* nd_table_add: counts packet d seen at ts_ms; an enum nd_add. Fields of
 * d beyond the NUL of its strings and beyond the address length of its
 * family are ignored, so packets of one key always meet. */
int		 nd_table_add(struct nd_table *t, const struct fw_denied *d,
		    int64_t ts_ms);
/* nd_table_size: keys held now. */
size_t		 nd_table_size(const struct nd_table *t);
/* nd_table_dropped: packets dropped since the last flush. */
uint64_t	 nd_table_dropped(const struct nd_table *t);
/* nd_table_flush: calls cb once per key and once per link summary that
 * holds packets (in no particular order), then empties the table and
 * resets the dropped count. Returns the packets dropped in the period. */
uint64_t	 nd_table_flush(struct nd_table *t,
		    void (*cb)(const struct nd_entry *e, void *arg), void *arg);

/* nd_table_tag: names the sandbox (id, copied, cut to fit) of the key of
 * d (and of its link's summary, if that has none yet), so the aggregate
 * keeps it even if the sandbox is gone when the table is flushed. 0, or
 * -1/ENOENT when d has no key in t. */
int		 nd_table_tag(struct nd_table *t, const struct fw_denied *d,
		    const char *sandbox);

/* nd_reason: the net.deny reason of an nflog prefix ("deny:always",
 * "deny:default", ...), refined with the class of the destination for
 * always-denied and private ones ("always_denied:metadata",
 * "private_range:private"). treat_as_public applies to the always-denied
 * refinement only: the kernel's private sets do not know it, so a private
 * denial names the range's own class ("private_range:documentation").
 * Writes at most len bytes to buf; returns buf.
 * Unknown prefixes give "denied". Pure. */
const char	*nd_reason(const struct fw_denied *d,
		    const struct pol_cidr *treat_as_public, size_t ntreat,
		    char *buf, size_t len);
/* nd_rec_fields: a net.deny record for one aggregated key: sandbox {id}
 * (omitted when sandbox is NULL or "-"), iface, proto, src, dst (the first
 * packet's), decision "deny", reason, count, first_ts, last_ts (ms since
 * the epoch), and when more than one port was tried dst_ports (the first
 * ND_PORTS_KEEP) and other_ports (packets to the rest). For a summary
 * entry: sandbox, iface, summary true, decision, reason, count, keys,
 * first_ts, last_ts. New reference, NULL on allocation failure. */
json_t		*nd_rec_fields(const struct nd_entry *e, const char *sandbox,
		    const char *reason);

struct nd;
struct sbx;

/* nd_new: opens nflog group cfg->nflog_group in the caller's network
 * namespace, reads it from loop and flushes net.deny events once a second.
 * The records go to rec (NULL: none, the events are only logged). sbx
 * (names the sandbox of a link; may be NULL), rec and cfg are borrowed
 * and must outlive nd. NULL with err on failure. */
struct rec;
struct nd	*nd_new(struct ev_loop *loop, const struct sbx *sbx,
		    struct rec *rec, const struct pol_config *cfg, char *err,
		    size_t errlen);
/* nd_free: flushes what is pending, closes the socket. NULL is a no-op. */
void		 nd_free(struct nd *nd);
/* nd_metrics_print: sluice_net_deny_packets_total,
 * sluice_net_deny_events_total and sluice_net_deny_dropped_total. */
void		 nd_metrics_print(const struct nd *nd, FILE *fp);

#endif /* SLUICE_GATEWAY_NETDENY_H */
