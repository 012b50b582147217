/*
 * sbxtab: a copy of the sandbox table, keyed by the sandbox's IPv4
 * address, the only thing a packet or a request tells about its sender.
 * Each child (DNS, bridge) keeps its own entries (its flat message of the
 * sandbox plus what it adds), and so do the parent's flow records
 * (gateway/flowrec.c: what a sandbox's flows carried); the table only
 * stores copies of entry_size bytes, each at an address that stays until
 * it is deleted, and finds them, in O(1), on the per-query, per-request
 * and per-flow path.
 */
#ifndef SLUICE_GATEWAY_PRIVSEP_SBXTAB_H
#define SLUICE_GATEWAY_PRIVSEP_SBXTAB_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/privsep/chan.h"

struct sbxtab;

/* sbxtab_new: an empty table of entries of entry_size bytes. NULL with
 * errno. */
struct sbxtab	*sbxtab_new(size_t entry_size);
/* sbxtab_free: every entry and the table. NULL is a no-op. */
void		 sbxtab_free(struct sbxtab *t);
/* sbxtab_get: addr4's entry (network byte order), or NULL. */
void		*sbxtab_get(const struct sbxtab *t, const uint8_t addr4[4]);
/* sbxtab_put: addr4's entry, made zeroed if there was none (*made 1),
 * else the one there (*made 0); the caller fills it. NULL with errno
 * ENOMEM. */
void		*sbxtab_put(struct sbxtab *t, const uint8_t addr4[4], int *made);
/* sbxtab_del: removes addr4's entry. */
void		 sbxtab_del(struct sbxtab *t, const uint8_t addr4[4]);
/*
 * sbxtab_lookup: sbxtab_get, and on a miss the table's messages waiting on
 * ch (types[0..ntypes), through chan_take: they touch nothing but the
 * table) are taken first and it looks again. A sandbox's add is on the
 * socket before its creation returns, so a sender made just now is found.
 */
void		*sbxtab_lookup(const struct sbxtab *t, const uint8_t addr4[4],
		    struct chan *ch, const uint32_t *types, size_t ntypes);

#endif /* SLUICE_GATEWAY_PRIVSEP_SBXTAB_H */
