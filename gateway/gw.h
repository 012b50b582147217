/*
 * gw: the core state of sluiced: the daemon config, the policy set in force,
 * the counters the control API reports, and the policy reload. It exists so
 * that SIGHUP and POST /v1/reload share one reload (parse everything, then
 * swap, or change nothing), and so that later parts of the daemon (sandboxes,
 * DNS proxy, bridge) find the current policies in one place.
 *
 * Policy sets are reference-counted: a user that keeps a policy beyond the
 * current event (a sandbox created under it, a call in flight) takes a
 * reference with gw_pset_ref, so that a reload swapping the set does not
 * free what it still points into.
 */
#ifndef SLUICE_GATEWAY_GW_H
#define SLUICE_GATEWAY_GW_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "gateway/ctl/ctl.h"
#include "policy/policy.h"

#define SLUICE_VERSION	"0.1.0"

struct gw;
struct gw_pset;		/* a refcounted struct pol_set */

/* gw_new: the daemon state. Takes ownership of cfg and set (both freed by
 * gw_free, also when gw_new fails). NULL with errno on allocation
 * failure. */
struct gw		*gw_new(struct pol_config *cfg, struct pol_set *set);
/* gw_free: drops the current set (freed when its last reference goes) and
 * the config. gw_free(NULL) is a no-op. */
void			 gw_free(struct gw *gw);

const struct pol_config	*gw_config(const struct gw *gw);

/* gw_pset_ref: a new reference to the set in force; never NULL. Release it
 * with gw_pset_unref (NULL is a no-op). The set itself is read-only. */
struct gw_pset		*gw_pset_ref(struct gw *gw);
void			 gw_pset_unref(struct gw_pset *ps);
const struct pol_set	*gw_pset_set(const struct gw_pset *ps);

/* gw_reload: load the policy directory again and, only if every file is
 * valid, make the new set the one in force. errs (caller-owned, may be NULL)
 * gets the errors. On failure the old set stays, reload_failures is counted
 * and the errors are kept as the last reload error (gw_status_json). The
 * failure is logged with each FILE:LINE:COL. Returns 0 or -1. */
int			 gw_reload(struct gw *gw, struct pol_errors *errs);
/* gw_not_updated: sandboxes the last successful reload left on their old
 * rules (their re-application failed, with a sandbox.reapply_failed
 * finding; the next reload tries again). /v1/reload reports it. */
size_t			 gw_not_updated(const struct gw *gw);

/* gw_policies_json: [{"name":..., "digest":...}] of the set in force; a
 * new reference, NULL on allocation failure. */
json_t			*gw_policies_json(struct gw *gw);
/* gw_status_json: the body of GET /v1/status; a new reference, or NULL. */
json_t			*gw_status_json(struct gw *gw);
/* gw_metrics_print: the Prometheus text of GET /metrics, including ctl's
 * request counters when ctl is not NULL. */
void			 gw_metrics_print(struct gw *gw, const struct ctl *ctl,
			    FILE *fp);

/* gw_set_dns: the DNS service, for /metrics (NULL: none). */
struct dnsw;
void			 gw_set_dns(struct gw *gw, struct dnsw *dns);
/* gw_set_rec: the recorder of policy.reload records and of /metrics
 * (borrowed; NULL: none, reloads are then only logged; unset it before
 * closing the recorder). */
struct rec;
void			 gw_set_rec(struct gw *gw, struct rec *rec);
/* gw_set_brw: the capability bridge, for /v1/status and /metrics
 * (borrowed; NULL: none; unset it before stopping the bridge). */
struct brw;
void			 gw_set_brw(struct gw *gw, struct brw *brw);
/* gw_set_fleet: the fleet's shared store, for /v1/status and /metrics
 * (borrowed; NULL: none; unset it before freeing it). */
struct fleetd;
void			 gw_set_fleet(struct gw *gw, struct fleetd *fleet);
/* gw_on_reload: fn(ctx) runs after each successful reload, once the new
 * set is in force and before the sandboxes follow it (gw_pset_ref gives
 * it). At most 4; -1 with ENOSPC. */
int			 gw_on_reload(struct gw *gw, void (*fn)(void *ctx),
			    void *ctx);
/* gw_set_sandboxes: the sandbox manager and the net.deny reader whose
 * counts GET /v1/status and GET /metrics report (borrowed; either may be
 * NULL; unset them before freeing them). */
struct sbx;
struct nd;
void			 gw_set_sandboxes(struct gw *gw, struct sbx *sbx,
			    struct nd *nd);

/* gw_routes: register GET /v1/status, POST /v1/reload and GET /metrics on
 * ctl. Both are borrowed by the handlers: free ctl before gw. -1 with
 * errno. */
int			 gw_routes(struct gw *gw, struct ctl *ctl);

#endif /* SLUICE_GATEWAY_GW_H */
