/*
 * gate_ech: what the name gate knows of the ECH configs each name
 * publishes (its HTTPS records, looked up by the DNS process when an ECH
 * ClientHello goes to an address answered for the name). Internal to
 * the gate
 * (gateway/dns/gate.c), which asks it whether an encrypted_client_hello
 * names a real config.
 *
 * Bounded like everything a sandbox drives: names kept in all and per
 * sandbox (the one whose answer made the entry), lookups pending in all
 * and per sandbox. What is over a bound is not looked up, and a name the
 * store knows nothing of counts as publishing configs the gate cannot see
 * (its ECH ClientHellos are refused): doubt denies.
 */
#ifndef SLUICE_GATEWAY_DNS_GATE_ECH_H
#define SLUICE_GATEWAY_DNS_GATE_ECH_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway/dns/ech.h"

#define GECH_MAX		4096u	/* names known, in all */
#define GECH_PER_OWNER		256u	/* ... made by one sandbox's answers */
#define GECH_PENDING_MAX	64u	/* lookups in flight, in all */
#define GECH_PENDING_OWNER	8u	/* ... for one sandbox */
#define GECH_TTL_MIN_S		60u	/* a record's TTL is kept within */
#define GECH_TTL_MAX_S		86400u
#define GECH_FAIL_S		30u	/* a failed lookup is tried again after */
#define GECH_STALE_MS		(3600u * 1000u)	/* an expired entry is used
					 * (and refreshed) this long after */

enum gech_state {
	GECH_UNKNOWN = 0,	/* never looked up, or gone */
	GECH_PENDING,		/* a lookup in flight */
	GECH_KNOWN,		/* what it publishes (possibly nothing) */
	GECH_FAILED,		/* the lookup failed or the record was malformed */
};

struct gech;

/* gech_new / gech_free (NULL is a no-op). */
struct gech	*gech_new(void);
void		 gech_free(struct gech *e);
/*
 * gech_want: an ECH ClientHello of the sandbox of link owner needs what
 * name (lower case) publishes, at now: true when a lookup should start (the entry is then pending,
 * until gech_done): the name is not known, or its entry expired, and no
 * bound stops it.
 */
bool		 gech_want(struct gech *e, const char *owner, const char *name,
		    uint64_t now);
/* gech_done: name's lookup ended: status 0 with set (what it publishes)
 * and the records' ttl_s, or -1. A name no lookup was pending for is
 * ignored (0 is returned then, 1 when an entry changed). */
int		 gech_done(struct gech *e, const char *name, int status,
		    const struct ech_set *set, uint32_t ttl_s, uint64_t now);
/* gech_get: name's state at now; *set its configs when GECH_KNOWN (or
 * GECH_PENDING with configs from before the lookup), else NULL. */
enum gech_state	 gech_get(struct gech *e, const char *name, uint64_t now,
		    const struct ech_set **set);
/* gech_sweep: entries past their stale bound go. */
void		 gech_sweep(struct gech *e, uint64_t now);

#endif /* SLUICE_GATEWAY_DNS_GATE_ECH_H */
