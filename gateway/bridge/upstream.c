/*
 * upstream: the bridge as an MCP client, independent of the transport. It
 * exists so that the call pipeline sees one interface — send a request, get
 * exactly one answer or an error — whether the server is a stdio child or a
 * Streamable HTTP endpoint: it numbers requests, matches responses, bounds
 * every request in time, runs the initialize handshake (queueing requests
 * until it completes), hands server-to-client requests (sampling,
 * elicitation, roots) to srvreq.c, and restarts a
 * transport that fails, with backoff.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"

static void	up_restart_later(struct br_up *u);
static void	on_restart(struct ev_loop *loop, void *arg);

static int
transport_send(struct br_up *u, json_t *msg, bool is_init)
{
	if (u->srv->transport == POL_MCP_STDIO)
		return br_stdio_send(u, msg);
	return br_http_send(u, msg, is_init);
}

static void
req_free(struct br_up_req *r)
{
	TAILQ_REMOVE(&r->up->reqs, r, entry);
	ev_timer_cancel(r->up->br->loop, r->timer);
	json_decref(r->msg);
	free(r);
}

/* Runs r's callback once and forgets r. */
static void
req_finish(struct br_up_req *r, json_t *msg, const char *err)
{
	br_up_cb *cb = r->cb;
	void *arg = r->arg;

	req_free(r);
	if (cb != NULL)
		cb(arg, msg, err);
}

static void
on_req_timeout(struct ev_loop *loop, void *arg)
{
	struct br_up_req *r = arg;

	(void)loop;
	r->timer = NULL;
	req_finish(r, NULL, "the upstream server did not answer in time");
}

static int
req_send(struct br_up_req *r)
{
	if (transport_send(r->up, r->msg, r->internal) == -1)
		return -1;
	r->sent = true;
	json_decref(r->msg);
	r->msg = NULL;
	return 0;
}

static void
flush_queue(struct br_up *u)
{
	struct br_up_req *r, *t;

	TAILQ_FOREACH_SAFE(r, &u->reqs, entry, t) {
		if (r->sent)
			continue;
		if (req_send(r) == -1) {
			req_finish(r, NULL, "the upstream server is not "
			    "reachable");
		}
	}
}

static struct br_up_req *
req_new(struct br_up *u, const char *method, json_t *params, br_up_cb *cb,
    void *arg, bool internal)
{
	struct br_up_req *r;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		json_decref(params);
		return NULL;
	}
	r->up = u;
	r->id = u->next_id++;
	r->cb = cb;
	r->arg = arg;
	r->internal = internal;
	r->msg = json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id",
	    (json_int_t)r->id, "method", method);
	if (r->msg == NULL || (params != NULL &&
	    json_object_set_new(r->msg, "params", params) == -1)) {
		json_decref(r->msg);
		free(r);
		return NULL;
	}
	r->timer = ev_timer_add(u->br->loop, u->br->c.upstream_timeout_ms,
	    on_req_timeout, r);
	if (r->timer == NULL) {
		json_decref(r->msg);
		free(r);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&u->reqs, r, entry);
	return r;
}

/*
 * The revisions an upstream may answer with. Anything else ends the
 * handshake (the specification's rule for a client): the string is the
 * upstream's own, so it is neither kept, logged nor sent back in a header.
 */
static bool
version_known(const char *v)
{
	static const char *const known[] = { "2025-11-25", "2025-06-18",
	    "2025-03-26", "2024-11-05", NULL };
	size_t i;

	for (i = 0; known[i] != NULL; i++)
		if (strcmp(known[i], v) == 0)
			return true;
	return false;
}

static void
on_init_reply(void *arg, json_t *msg, const char *err)
{
	struct br_up *u = arg;
	json_t *res, *v, *n;

	if (msg == NULL || (res = json_object_get(msg, "result")) == NULL ||
	    !json_is_string(v = json_object_get(res, "protocolVersion"))) {
		br_up_failed(u, err != NULL ? err : "initialize failed");
		return;
	}
	if (!version_known(json_string_value(v))) {
		br_up_failed(u, "initialize answered an unknown protocol "
		    "version");
		return;
	}
	snprintf(u->version, sizeof(u->version), "%s", json_string_value(v));
	br_up_caps(u, json_object_get(res, "capabilities"));
	n = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
	    "notifications/initialized");
	if (n == NULL || transport_send(u, n, false) == -1) {
		json_decref(n);
		br_up_failed(u, "cannot send initialized");
		return;
	}
	json_decref(n);
	u->state = UP_READY;
	u->failures = 0;
	u->stale = true;
	log_info("bridge: upstream %s ready (protocol %s)", u->srv->name,
	    u->version);
	/* What it says outside any POST comes on its GET stream. */
	if (u->srv->transport != POL_MCP_STDIO)
		br_get_start(u);
	flush_queue(u);
}

static int
up_handshake(struct br_up *u)
{
	struct br_up_req *r;
	json_t *p, *caps;

	/* What a sandbox's client may be asked through us: whether it is
	 * carried is each call's policy's to say (srvreq.c), so the offer is
	 * made once for every session the upstream serves. Roots only when
	 * some policy may let them through: a server offered them asks at
	 * once and whenever they change, outside any call, and that goes
	 * to the one session listening (srvreq.c) or is refused. Over HTTP
	 * such a request comes on the GET stream the bridge opens once the
	 * session is ready (upstream_get.c); a server that offers none (405)
	 * can only ask within a call. */
	p = json_pack("{s:s, s:{s:{}, s:{}}, s:{s:s, s:s}}",
	    "protocolVersion", BR_PROTO_LATEST, "capabilities", "sampling",
	    "elicitation", "clientInfo", "name", "sluice", "version", "0.1.0");
	caps = json_object_get(p, "capabilities");
	if (p != NULL && u->br->h.roots_offered != NULL &&
	    u->br->h.roots_offered(u->br->h.ctx, u->srv->name) &&
	    json_object_set_new(caps, "roots", json_pack("{s:b}",
	    "listChanged", 1)) == -1) {
		json_decref(p);
		return -1;
	}
	r = req_new(u, "initialize", p, on_init_reply, u, true);
	if (r == NULL)
		return -1;
	/* The handshake goes out first, whatever is queued. */
	TAILQ_REMOVE(&u->reqs, r, entry);
	TAILQ_INSERT_HEAD(&u->reqs, r, entry);
	if (req_send(r) == -1) {
		req_free(r);
		return -1;
	}
	return 0;
}

int
br_up_start(struct br_up *u)
{
	if (u->state != UP_DOWN)
		return 0;
	u->state = UP_STARTING;
	if (u->srv->transport == POL_MCP_STDIO && br_stdio_spawn(u) == -1) {
		u->state = UP_DOWN;
		up_restart_later(u);
		return -1;
	}
	if (up_handshake(u) == -1) {
		br_up_failed(u, "cannot start the handshake");
		return -1;
	}
	return 0;
}

void
br_up_stop(struct br_up *u)
{
	struct br_up_req *r;

	ev_timer_cancel(u->br->loop, u->restart);
	u->restart = NULL;
	while ((r = TAILQ_FIRST(&u->reqs)) != NULL)
		req_finish(r, NULL, "the bridge is shutting down");
	if (u->srv->transport == POL_MCP_STDIO)
		br_stdio_close(u);
	else
		br_http_close(u);
	u->state = UP_DOWN;
}

static void
on_restart(struct ev_loop *loop, void *arg)
{
	struct br_up *u = arg;

	(void)loop;
	u->restart = NULL;
	(void)br_up_start(u);
}

static void
up_restart_later(struct br_up *u)
{
	uint64_t ms;

	if (u->br->closing || u->restart != NULL)
		return;
	/* 250 ms doubling to 30 s: a crashing child cannot spin us. */
	ms = 250ull << (u->failures < 7 ? u->failures : 7);
	if (ms > 30000)
		ms = 30000;
	u->failures++;
	u->restart = ev_timer_add(u->br->loop, ms, on_restart, u);
}

void
br_up_failed(struct br_up *u, const char *why)
{
	struct br_up_req *r;
	char detail[256];
	bool was_ready = u->state == UP_READY;

	if (u->state == UP_DOWN && TAILQ_EMPTY(&u->reqs))
		return;
	if (u->srv->transport == POL_MCP_STDIO)
		br_stdio_close(u);
	else
		br_http_close(u);
	u->state = UP_DOWN;
	while ((r = TAILQ_FIRST(&u->reqs)) != NULL)
		req_finish(r, NULL, "the upstream server failed");
	if (!u->br->closing) {
		snprintf(detail, sizeof(detail), "upstream %s %s: %s",
		    u->srv->name, was_ready ? "failed" : "did not start", why);
		log_warnx("bridge: %s", detail);
		br_finding(u->br, BR_EV_UPSTREAM, NULL, u->srv->name, NULL,
		    detail);
	}
	/* stdio children are restarted; HTTP reconnects on demand too. */
	up_restart_later(u);
}

struct br_up_req *
br_up_request(struct br_up *u, const char *method, json_t *params,
    br_up_cb *cb, void *arg)
{
	struct br_up_req *r;

	if ((r = req_new(u, method, params, cb, arg, false)) == NULL)
		return NULL;
	if (u->state == UP_READY) {
		if (req_send(r) == -1) {
			req_free(r);
			return NULL;
		}
	} else if (u->state == UP_DOWN && u->restart == NULL) {
		/*
		 * Started from the loop, never from here: a handshake that
		 * fails at once finishes every request, r with them, and
		 * the callback would run (and free its caller's state)
		 * before our caller even holds r. The deferred start is the
		 * upstream's pending restart, so nothing starts it twice.
		 */
		if ((u->restart = ev_defer(u->br->loop, on_restart, u)) ==
		    NULL) {
			req_free(r);
			return NULL;
		}
	}
	/* r waits in the queue until the handshake completes (or r times
	 * out) */
	return r;
}

void
br_up_cancel(struct br_up_req *r)
{
	if (r != NULL) {
		r->cb = NULL;
		r->arg = NULL;
	}
}

int
br_up_send(struct br_up *u, json_t *msg)
{
	return transport_send(u, msg, false);
}

void
br_up_deliver(struct br_up *u, json_t *msg)
{
	struct br_up_req *r;
	json_t *id, *m;

	if (!json_is_object(msg))
		return;
	id = json_object_get(msg, "id");
	m = json_object_get(msg, "method");
	if (json_is_string(m)) {
		if (id != NULL) {
			/* Sampling, elicitation, roots: decided, answered
			 * and recorded by srvreq.c. */
			br_srvreq_take(u, msg);
			return;
		}
		if (strcmp(json_string_value(m),
		    "notifications/cancelled") == 0) {
			/* Only of its own requests to a client, if any. */
			br_srvreq_cancelled(u, msg);
			return;
		}
		if (strcmp(json_string_value(m),
		    "notifications/tools/list_changed") == 0)
			br_tools_changed(u);
		else
			br_notify_upstream(u, json_string_value(m), msg);
		return;
	}
	if (!json_is_integer(id))
		return;
	TAILQ_FOREACH(r, &u->reqs, entry) {
		if (r->id == json_integer_value(id) && r->sent) {
			req_finish(r, msg, NULL);
			return;
		}
	}
}
