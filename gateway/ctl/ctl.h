/*
 * ctl: the control API of sluiced, HTTP/1.1 + JSON on a Unix socket
 * (DESIGN §8). It exists so that every endpoint of the daemon is one line of
 * registration plus one handler, and so that the parts every endpoint shares
 * (socket setup, body cap, content type, JSON parsing, the error shape, the
 * status-code counters for /metrics, suspension of slow requests, the
 * caller's kernel credentials) are written and tested once. libmicrohttpd
 * does the HTTP; it runs inside our ev loop through gateway/mhd.c, never in
 * threads of its own.
 *
 * Registering an endpoint:
 *
 *	static enum ctl_rc
 *	sandbox_get(struct ctl_req *req, void *arg)
 *	{
 *		const char *id = ctl_req_param(req, "id");
 *		...
 *		return ctl_reply_json(req, 200, obj);
 *	}
 *	ctl_route(ctl, "GET", "/v1/sandboxes/{id}", sandbox_get, sb);
 *
 * A pattern is a literal path whose segments may be "{name}" placeholders;
 * a placeholder matches one non-empty segment (no '/'), and the handler reads
 * it with ctl_req_param. Before a handler runs, ctl has already answered:
 *   404 not_found            no pattern matches the path
 *   405 method_not_allowed   a pattern matches but not for this method
 *                            (with an Allow header listing the methods)
 *   413 body_too_large       body over CTL_BODY_MAX bytes
 *   415 unsupported_media_type  a non-empty body that is not application/json
 *   400 bad_json             a body that does not parse (object or array)
 * Every error body is {"error": CODE, "message": TEXT}.
 *
 * Asynchronous handlers: a handler that cannot answer now (an approval that
 * waits for a human, an upstream call in flight) returns CTL_SUSPEND without
 * replying. The connection is then parked; later, from any callback of the
 * same ev loop, the owner calls one ctl_reply_* on the request, which wakes
 * the connection and sends the answer. A parked request stays valid until
 * it is answered; if ctl is freed first (shutdown), the request gets a 503
 * and its cancel callback (ctl_req_on_cancel) runs so the owner can forget
 * the pointer.
 */
#ifndef SLUICE_GATEWAY_CTL_CTL_H
#define SLUICE_GATEWAY_CTL_CTL_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "gateway/ev.h"

#define CTL_BODY_MAX	(64 * 1024)	/* request body cap, bytes */
#define CTL_MAX_PARAMS	4		/* placeholders per pattern */

struct ctl;
struct ctl_req;

enum ctl_rc {
	CTL_DONE = 0,		/* the handler replied (or failed: see below) */
	CTL_SUSPEND = 1,	/* the handler will reply later */
};

/* A handler gets the request and the arg given to ctl_route. It returns
 * CTL_DONE after one ctl_reply_* call, or CTL_SUSPEND to answer later. A
 * handler that returns CTL_DONE without replying gets a 500 "internal" for
 * it (fail closed: the client never hangs). */
typedef enum ctl_rc ctl_handler(struct ctl_req *req, void *arg);
/* Called when ctl gives up on a suspended request (ctl_free). */
typedef void ctl_cancel_cb(struct ctl_req *req, void *arg);

/* ctl_new: a control server with no routes, driven by loop (borrowed; it must
 * outlive the ctl). Nothing listens until ctl_listen. NULL with errno on
 * allocation failure. */
struct ctl	*ctl_new(struct ev_loop *loop);
/* A check of every caller by its pid (from SO_PEERCRED), made when its
 * request starts: non-zero refuses the request with 403 "from_sandbox"
 * before any handler sees it. */
typedef int ctl_peer_check(pid_t pid, void *arg);
/* ctl_set_peer_check: installs fn (NULL: none, the default) with arg
 * (borrowed; it must outlive the ctl). */
void		 ctl_set_peer_check(struct ctl *ctl, ctl_peer_check *fn,
		    void *arg);
/* What ctl refused by itself, before any handler ran: 403 from the peer
 * check, 413, 415, 400 bad_json (not 404/405: no endpoint was reached).
 * method and path are the client's, untrusted; pid is 0 when the caller
 * has no credentials. */
typedef void ctl_refused_cb(const char *method, const char *path,
		    unsigned status, const char *code, const char *message,
		    pid_t pid, void *arg);
/* ctl_set_refused_hook: fn (NULL: none) is told of each such refusal,
 * after the reply is built, so that the owner of the endpoint can record
 * it. arg is borrowed. */
void		 ctl_set_refused_hook(struct ctl *ctl, ctl_refused_cb *fn,
		    void *arg);
/* ctl_free: answers parked requests with 503, stops the HTTP server, closes
 * the listening socket and removes its file. ctl_free(NULL) is a no-op. */
void		 ctl_free(struct ctl *ctl);

/* ctl_route: handle method (e.g. "GET") on pattern (see above). method and
 * pattern are copied; arg is borrowed. Routes are tried in registration
 * order. -1 with errno EINVAL (bad pattern, more than CTL_MAX_PARAMS
 * placeholders, or a route already registered for method and pattern) or
 * ENOMEM. */
int		 ctl_route(struct ctl *ctl, const char *method,
		    const char *pattern, ctl_handler *fn, void *arg);

/* ctl_listen: create the Unix socket at path and start serving on loop.
 * The parent directory is created (mode 0750) if missing; the socket gets
 * mode 0660. An existing socket file nobody answers on is replaced; one a
 * live server answers on is EADDRINUSE; any other kind of file there is
 * EEXIST (never deleted). -1 with errno and a message in err on failure. */
int		 ctl_listen(struct ctl *ctl, const char *path, char *err,
		    size_t errlen);
/* ctl_socket_path: the path given to ctl_listen, or NULL. */
const char	*ctl_socket_path(const struct ctl *ctl);

/* Request accessors; strings are owned by req and valid while it is. */
const char	*ctl_req_method(const struct ctl_req *req);
const char	*ctl_req_path(const struct ctl_req *req);
/* ctl_req_param: the segment a "{name}" placeholder matched, or NULL. */
const char	*ctl_req_param(const struct ctl_req *req, const char *name);
/* ctl_req_query: a query-string argument (?key=value), or NULL. */
const char	*ctl_req_query(struct ctl_req *req, const char *key);
/* ctl_req_body: the parsed body (borrowed), NULL when the body was empty. */
json_t		*ctl_req_body(const struct ctl_req *req);
/* ctl_req_peer: the uid, gid and pid of the process that connected to the
 * control socket (SO_PEERCRED: recorded by the kernel at connect(), not
 * something the client says). Any output may be NULL. 0, or -1 with errno
 * when the socket gave no credentials: treat that caller as nobody. */
int		 ctl_req_peer(const struct ctl_req *req, uid_t *uid, gid_t *gid,
		    pid_t *pid);
/* ctl_req_on_cancel: see ctl_cancel_cb. Replaces any previous callback. */
void		 ctl_req_on_cancel(struct ctl_req *req, ctl_cancel_cb *cb,
		    void *arg);

/* Replies. Exactly one per request; a second one is refused (-1, EALREADY)
 * and its body freed. They all return CTL_DONE on success so a handler can
 * end with "return ctl_reply_json(...)"; on allocation failure they still
 * make sure the client gets a 500. */
/* ctl_reply_json: body is stolen (its reference is ctl's now), even on
 * failure. NULL (typically a json_pack that failed) sends 500 "internal",
 * never a success; send json_object() for an empty object. */
enum ctl_rc	 ctl_reply_json(struct ctl_req *req, unsigned status,
		    json_t *body);
/* ctl_reply_text: text is copied. */
enum ctl_rc	 ctl_reply_text(struct ctl_req *req, unsigned status,
		    const char *content_type, const char *text);
/* ctl_reply_error: {"error": code, "message": printf(fmt, ...)}. */
enum ctl_rc	 ctl_reply_error(struct ctl_req *req, unsigned status,
		    const char *code, const char *fmt, ...)
		    __attribute__((format(printf, 4, 5)));
/* ctl_reply_header: add a response header (e.g. Location) to the reply the
 * handler is about to send. Copied. -1 with errno on failure. */
int		 ctl_reply_header(struct ctl_req *req, const char *name,
		    const char *value);

/* ctl_requests_total: answers sent with status code (100..599). */
uint64_t	 ctl_requests_total(const struct ctl *ctl, unsigned code);
/* ctl_metrics_print: sluice_control_requests_total{code="..."} lines in
 * Prometheus text format (with HELP and TYPE) to fp. */
void		 ctl_metrics_print(const struct ctl *ctl, FILE *fp);

#endif /* SLUICE_GATEWAY_CTL_CTL_H */
