/*
 * brwire: the capability bridge inside sluiced. gateway/bridge/ is written
 * against hooks (struct br_hooks) so that it can be tested alone and later
 * run behind a privilege boundary; this is the daemon's side of that seam:
 * who a request is (the sandbox manager's index by address, and the bearer
 * token minted at creation: both must agree), which policy applies (the set
 * in force, held by reference while a call is in flight), where decisions go
 * (durable mcp.call records and findings through gateway/record.h) and how a
 * tainting result narrows egress (sbx_taint). It also serves the bridge's
 * part of the control API: approvals and tool pins.
 *
 * The daemon holds the handle and hands it to gw (gw_set_brw) for status
 * and metrics. It hears of a sandbox that is gone as a watcher of the manager (sbx_watch_add): the
 * manager knows nothing of the bridge. Loop thread only.
 */
#ifndef SLUICE_GATEWAY_BRWIRE_H
#define SLUICE_GATEWAY_BRWIRE_H

#include <stdint.h>
#include <stdio.h>

#include "gateway/ctl/ctl.h"
#include "gateway/ev.h"
#include "gateway/gw.h"

struct sbx;
struct brw;

/*
 * brw_start: the bridge of the daemon, listening on the config's service
 * address and bridge_port (port overrides it when non-zero, for tests),
 * with the upstream servers of the config. Call after the sandbox manager
 * and the recorder exist (the service address must be on lo); calls and
 * findings are recorded to rec (NULL: none, and then no call is
 * released: no action without a record). gw, sbx, rec and loop are
 * borrowed and must outlive it; the config of gw must too. Takes one
 * of sbx's watchers (ENOSPC when none is left): a sandbox removed from then
 * on takes its sessions and pending approvals with it. NULL with a message
 * in err on failure (never a secret).
 */
struct rec;
struct brw	*brw_start(struct ev_loop *loop, struct gw *gw, struct sbx *sbx,
		    struct rec *rec, uint16_t port, char *err, size_t errlen);
/* brw_stop: frees the bridge (parked requests get 503, pending approvals
 * are denied and recorded, children stopped) and gives back its watcher
 * of the sandboxes. NULL is a no-op. Call before the recorder and the sandbox manager go. */
void		 brw_stop(struct brw *w);
/* brw_port: the TCP port the bridge listens on. */
uint16_t	 brw_port(const struct brw *w);
/*
 * brw_routes: registers on ctl
 *   GET  /v1/approvals                      pending calls (JSON array)
 *   POST /v1/approvals/{id}                 {decision, approver, reason?}
 *   GET  /v1/mcp/{server}/pins              the policy snippet (text/yaml)
 *   POST /v1/mcp/{server}/tools/{tool}/accept   make the current
 *                                           definition the baseline
 * w is borrowed by the handlers: free ctl before w. -1 with errno.
 */
int		 brw_routes(struct brw *w, struct ctl *ctl);
/* brw_status_json: {"pending_approvals", "calls": {"allow", "deny"},
 * "auth_failures", "findings", "record_failures", "port"} of bridge w, or
 * NULL when w is NULL (none runs) or on allocation failure. New
 * reference. */
json_t		*brw_status_json(const struct brw *w);
/* brw_metrics_print: sluice_mcp_* gauges and counters of w in Prometheus
 * text format; prints nothing when w is NULL. */
void		 brw_metrics_print(const struct brw *w, FILE *fp);

#endif /* SLUICE_GATEWAY_BRWIRE_H */
