/*
 * dnswire: the DNS proxy inside sluiced. gateway/dns/ is written against
 * hooks (struct dns_hooks) so that it can be tested alone and later run
 * behind a privilege boundary; this is the daemon's side of that seam: the
 * glue between the proxy, the sandbox manager and the recorder
 * (gateway/record.h), as gateway/brwire.h is for the bridge.
 */
#ifndef SLUICE_GATEWAY_DNSWIRE_H
#define SLUICE_GATEWAY_DNSWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/dns/dns.h"
#include "gateway/ev.h"
#include "gateway/gw.h"
#include "policy/policy.h"

struct sbx;
struct dnsw;

/*
 * dnsw_config: fills *dc from cfg: listen on the service address port 53
 * (listen_port overrides 53 when non-zero, for tests), the upstreams,
 * timeout and treat_as_public (borrowed from cfg), and the answer cache
 * (dns_cache_entries: 0 sets no_cache, else cache_max). 0, or -1 with err.
 */
int	dnsw_config(const struct pol_config *cfg, uint16_t listen_port,
	    struct dns_config *dc, char *err, size_t errlen);
/*
 * dnsw_start: the DNS proxy of the daemon, listening (UDP and TCP) on the
 * service address (port 53, or listen_port when non-zero). Call after the
 * sandbox manager set up the host (the service address must exist on lo).
 * Its hooks: lookup -> sbx_lookup_addr4 and the policy of that name in
 * gw's current set; learn -> fw_learn on sbx_fw(sbx); record -> the
 * dns.decision fields (plus a finding when the event asks for one), built
 * at once and handed to rec_async together with the rest of that loop
 * turn's records when the turn ends (ev_defer; at once if that fails), in
 * order. gw, sbx and loop are borrowed and must outlive it. NULL with err
 * on failure.
 */
struct dnsw	*dnsw_start(struct ev_loop *loop, struct gw *gw,
		    struct sbx *sbx, uint16_t listen_port, char *err,
		    size_t errlen);
/* dnsw_stop: closes the proxy (pending queries are dropped unanswered)
 * and frees the wiring. NULL is a no-op. */
void		 dnsw_stop(struct dnsw *d);
/* dnsw_port: the port the proxy is bound to (host order). */
uint16_t	 dnsw_port(const struct dnsw *d);

#endif /* SLUICE_GATEWAY_DNSWIRE_H */
