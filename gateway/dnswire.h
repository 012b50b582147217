/*
 * dnswire: the DNS proxy inside sluiced. gateway/dns/ is written against
 * hooks (struct dns_hooks) so that it can be tested alone and later run
 * behind a privilege boundary; this is the daemon's side of that seam: the
 * glue between the proxy, the sandbox manager and the recorder
 * (gateway/record.h), as gateway/brwire.h is for the bridge.
 */
#ifndef SLUICE_GATEWAY_DNSWIRE_H
#define SLUICE_GATEWAY_DNSWIRE_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
 * dnsw_start: the DNS service of the daemon: binds its listeners (UDP and
 * TCP) on the service address (port 53, or listen_port when non-zero) and
 * prepares the DNS process (gateway/dns/child.c) that will serve them as
 * the user privsep.dns_user. Call after the sandbox manager set up the
 * host (the service address must exist on lo); nothing runs until
 * dnsw_run. It follows the sandbox table (sbx_watch_add) and reloads
 * (gw_on_reload) and turns what the child sends into fw_learn calls and
 * dns.decision records (plus findings), handed to rec_async together with
 * the rest of that loop turn's records when the turn ends (ev_defer; at
 * once if that fails), in order, to rec (NULL: none; the child still
 * sends them, they are dropped). gw, sbx, rec and loop are borrowed and
 * must outlive it. NULL with err on failure (an unknown or root user, a port
 * taken).
 */
struct rec;
struct dnsw	*dnsw_start(struct ev_loop *loop, struct gw *gw,
		    struct sbx *sbx, struct rec *rec, uint16_t listen_port,
		    char *err, size_t errlen);
/* dnsw_run: starts the DNS process (in the process that stays after
 * daemon(3): the child dies with its parent). It is restarted whenever it
 * dies; meanwhile DNS is unanswered. 0, or -1 with err. */
int		 dnsw_run(struct dnsw *d, char *err, size_t errlen);
/* dnsw_stop: stops the DNS process, closes the listeners and frees the
 * wiring. NULL is a no-op. */
void		 dnsw_stop(struct dnsw *d);
/* dnsw_port: the port the listeners are bound to (host order). */
uint16_t	 dnsw_port(const struct dnsw *d);
/* dnsw_pid: the DNS process now, or 0 while there is none. */
pid_t		 dnsw_pid(const struct dnsw *d);
/* dnsw_metrics_print: sluice_process_up, sluice_process_exits_total and
 * sluice_privsep_violations_total for room "dns". NULL prints nothing. */
void		 dnsw_metrics_print(const struct dnsw *d, FILE *fp);

struct flowrec;
/* dnsw_set_flowrec: where the names the gate passed flows for go (the
 * flows' net.flow records); NULL: nowhere. */
void		 dnsw_set_flowrec(struct dnsw *d, struct flowrec *fr);

#endif /* SLUICE_GATEWAY_DNSWIRE_H */
