/*
 * ctl/sandboxes: the control API's /v1/sandboxes endpoints. It exists so
 * that the sandbox manager (gateway/sandbox.h) speaks no HTTP: here a
 * request's JSON body becomes a struct sbx_spec, and the manager's answers
 * (struct sbx_info, enum sbx_err) become JSON replies and statuses, from
 * one table. The check that keeps sandboxed code off the control socket is
 * wired here too, next to the endpoints it protects.
 */
#ifndef SLUICE_GATEWAY_CTL_SANDBOXES_H
#define SLUICE_GATEWAY_CTL_SANDBOXES_H

#include <jansson.h>

#include "gateway/ctl/ctl.h"
#include "gateway/sandbox.h"

/* ctl_sbx_routes: registers POST/GET /v1/sandboxes, GET/DELETE
 * /v1/sandboxes/{id} and POST /v1/sandboxes/{id}/exec on ctl, and makes ctl
 * refuse every request from a process in a sandbox's network namespace, or
 * in a network namespace of a user namespace other than the daemon's (one
 * that sandboxed code made itself) (ctl_set_peer_check, sbx_pid_sandbox),
 * recording such refusals, and those of a create's body, that ctl makes by
 * itself (ctl_set_refused_hook). m is borrowed by the handlers. -1 with
 * errno. */
int		 ctl_sbx_routes(struct ctl *ctl, struct sbx *m);

/* ctl_sbx_create: what POST /v1/sandboxes does with body (borrowed; the
 * parsed request body, NULL when empty), {id?, policy, subject, labels?,
 * ttl?}: returns the HTTP status (201 when the sandbox exists) and in
 * *reply a new reference: the sandbox with its token, or {error,
 * message}. A body refused here is recorded like the manager's own
 * refusals (sbx_create_refused, with the status). */
unsigned	 ctl_sbx_create(struct sbx *m, json_t *body, json_t **reply);

/* ctl_sbx_status: the HTTP status the API answers why with, and in *code
 * its error code; 500 "internal" for SBX_ERR_NONE and outside the enum
 * (a failure that says nothing is still a failure). */
unsigned	 ctl_sbx_status(enum sbx_err why, const char **code);

#endif /* SLUICE_GATEWAY_CTL_SANDBOXES_H */
