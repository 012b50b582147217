/*
 * brwire: the parent's side of the bridge process (gateway/bridge/child.c
 * runs the capability bridge unprivileged). It binds the bridge's listener,
 * starts the child and restarts it when it dies, streams it the config,
 * the policy set and the sandbox table (each token as a digest), records
 * its calls durably and acknowledges them, applies its taints, and serves
 * the bridge's part of the control API (approvals, tool pins) by
 * forwarding to it. Loop thread only.
 */
#ifndef SLUICE_GATEWAY_BRWIRE_H
#define SLUICE_GATEWAY_BRWIRE_H

#include <sys/types.h>

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
 * with the upstream servers of the config. Binds the listener and checks
 * that every upstream credential is there (br_check_credentials, never
 * reading one) and that privsep.bridge_user exists; starts nothing (see
 * brw_run). Call after the sandbox manager and the recorder exist (the
 * service address must be on lo); calls and findings are recorded to rec
 * (NULL: none, and then no call is released). gw, sbx, rec and loop are
 * borrowed and must outlive it. Takes one of sbx's watchers (ENOSPC when
 * none is left). NULL with a message in err on failure (never a secret).
 */
struct rec;
struct brw	*brw_start(struct ev_loop *loop, struct gw *gw, struct sbx *sbx,
		    struct rec *rec, uint16_t port, char *err, size_t errlen);
/* brw_run: starts the bridge process and runs the loop until it serves
 * (or fails, or 60 s pass): 0 once it serves, -1 with its error in err.
 * Call once, from the process that stays (the child dies with it). */
int		 brw_run(struct brw *w, char *err, size_t errlen);
/* brw_pid: the bridge process, or 0 while none runs. */
pid_t		 brw_pid(const struct brw *w);
/* brw_stop: stops the bridge process and frees w, giving back its watcher
 * of the sandboxes. NULL is a no-op. Call after ctl_free and before the
 * recorder and the sandbox manager go. */
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
 * "auth_failures", "findings", "record_failures", "taints", "port",
 * "serving"} of bridge w, or
 * NULL when w is NULL (none runs) or on allocation failure. New
 * reference. */
json_t		*brw_status_json(const struct brw *w);
/* brw_metrics_print: sluice_mcp_* gauges and counters of w in Prometheus
 * text format; prints nothing when w is NULL. */
void		 brw_metrics_print(const struct brw *w, FILE *fp);

/*
 * brw_intent_scan: the tool calls the audit log at db_path holds an
 * mcp.intent of, at seq >= from, and no later mcp.call or
 * mcp.outcome_unknown of the same call_id: *open is a new object call_id
 * -> {seq, sandbox, server, tool} (those known), *scanned the count of MCP
 * records read. The daemon runs it at start from its mark
 * (gateway/brwire_intent.c). 0, or -1 with errno EIO and err.
 */
int		 brw_intent_scan(const char *db_path, uint64_t from,
		    json_t **open, uint64_t *scanned, char *err,
		    size_t errlen);

#endif /* SLUICE_GATEWAY_BRWIRE_H */
