/*
 * srvreq: requests an upstream makes of the agent's client
 * (client/sampling.mdx, client/elicitation.mdx, client/roots.mdx). One
 * upstream serves every session of its server, so such a request is owned
 * by the one call in flight to that upstream, and it is decided with that
 * call's sandbox policy (pol_server_request, mcp.server_requests): with
 * several calls it could belong to, nobody's policy can let it through
 * and it is refused. With none (a server asks for roots after initialize,
 * and again when told they changed), it is owned by a session of that
 * server listening on its GET stream: for roots/list the session whose
 * notifications/roots/list_changed was relayed last, else the only one
 * listening. Such a request comes on a stdio upstream's output, or on the
 * GET stream the bridge holds open to an HTTP upstream (upstream_get.c),
 * and is taken the same way from both. Not a subscriptions/listen stream
 * (modern.c): a client of the 2026-07-28 revision takes no request from a
 * server but in a result (multi round-trip requests), and could never
 * answer one there. It goes there, under that session's policy and the
 * same bounds; with no session listening it is refused and recorded
 * no_stream, with several refused as nobody's.
 * A client's roots/list_changed is relayed (bare, as its method only)
 * when its policy may let roots/list of that server through, one at a
 * time per session.
 *
 * One the policy allows (or a person approves, under `ask`, through the
 * approvals every call uses) goes to the client on the call's own answer,
 * which becomes an event stream for it (stream.c, br_callstream;
 * transports.mdx lets a server send requests related to a POST on that
 * POST's stream before its response). The client never sees the
 * upstream's id: each request carried gets a bridge-owned id, random, and
 * the client's answer, a POST of a JSON-RPC response, is taken only from
 * the session the request went to, under that id, within a size bound
 * and a deadline; it is relayed to the upstream under the upstream's own
 * id. Everything else is refused to the upstream with a JSON-RPC error.
 * What was asked (bounded, or only its digest when the policy wants
 * digests) is recorded as mcp.server_request once its outcome is known,
 * tied to the call by the detail. One carried is announced first
 * (h.sreq_carried), and its record names the announcement: a bridge
 * process killed while the client holds it still leaves its record,
 * written by the parent with an unknown outcome (brwire_sreq.c). An
 * answer naming no request waiting is refused and logged, never recorded
 * (the sandbox could fill the audit log with them).
 *
 * A client of the stateless revision (modern.c) takes no request from a
 * server but in a result (basic/patterns/mrtr.mdx): its call's request
 * is answered with an InputRequiredResult naming what is asked, under
 * the bridge's ids, and a requestState that is a random handle of the
 * call, held meanwhile with the upstream still working on it. The retry
 * that brings the state back, from the same sandbox with the same
 * method, name and arguments, once, has its inputResponses relayed as
 * the answers and waits for the call's result (or is answered with the
 * next InputRequiredResult); the call is not decided, charged or
 * recorded again. A state that matches nothing is refused. Only kinds
 * the client declared in its capabilities are asked.
 * A client that declared the tasks extension gets a task instead
 * (tasks.c): what is asked shows in its tasks/get, and its tasks/update
 * answers as a retry would, under the same bounds.
 *
 * Bounds: SREQ_PER_CALL recorded per call; carried at once per session
 * and per sandbox, and the time the client has to answer, from the
 * daemon config's limits (lim_sreq_*, 4, 16 and 120 s unless set);
 * POL_LIM_SREQ_TOTAL in all, SREQ_ASK_MAX bytes of a request carried and
 * SREQ_ANSWER_MAX of an answer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"

#define ASKED_MAX	4096	/* bytes of params kept in a record */
#define SREQ_PER_CALL	16	/* recorded per call; more are refused
				   unrecorded, counted in the log */
#define SREQ_ASK_MAX	(256u * 1024)	/* bytes of a request carried */
#define SREQ_ANSWER_MAX	(256u * 1024)	/* bytes of a client's answer */

/* The config's bounds; a config without them (a unit test's) gets the
 * defaults. */
static uint32_t
lim_session(const struct br *br)
{
	const struct pol_config *c = br->c.cfg;

	return c != NULL && c->lim_sreq_session != 0 ? c->lim_sreq_session :
	    POL_LIM_SREQ_SESSION;
}

static uint32_t
lim_sandbox(const struct br *br)
{
	const struct pol_config *c = br->c.cfg;

	return c != NULL && c->lim_sreq_sandbox != 0 ? c->lim_sreq_sandbox :
	    POL_LIM_SREQ_SANDBOX;
}

static uint64_t
deadline_ms(const struct br *br)
{
	const struct pol_config *c = br->c.cfg;

	return (uint64_t)(c != NULL && c->lim_sreq_deadline_s != 0 ?
	    c->lim_sreq_deadline_s : POL_LIM_SREQ_DEADLINE_S) * 1000u;
}

static const struct {
	const char		*method;
	enum pol_sreq_kind	 kind;
} kinds[] = {
	{ "sampling/createMessage",	POL_SREQ_SAMPLING },
	{ "elicitation/create",		POL_SREQ_ELICITATION },
	{ "roots/list",			POL_SREQ_ROOTS },
};

enum sreq_state { SR_ASKING = 0, SR_SENT };

/* How a request reaches its client. */
enum sreq_way {
	SW_CALL = 0,	/* on the call's own POST answer, an event stream */
	SW_LISTEN,	/* on a session's GET stream, in no call */
	SW_RESULT,	/* in an InputRequiredResult of the call (MRTR) */
};

/* A request carried (or about to be) to a client. It lives no longer
 * than its stream, and so than the request it answers (SW_CALL,
 * SW_LISTEN), and no longer than its call (SW_CALL, SW_RESULT): cl is
 * the client of one of them. */
struct br_sreq {
	TAILQ_ENTRY(br_sreq)	 entry;
	struct br		*br;
	struct br_up		*up;
	struct br_stream	*st;		/* NULL: SW_RESULT */
	struct br_call		*call;		/* NULL: SW_LISTEN */
	const struct br_client	*cl;
	char			 session[65];	/* "": none (SW_RESULT) */
	char			 src[64];
	enum sreq_way		 way;
	enum sreq_state		 state;
	const char		*method;
	enum pol_verdict	 verdict;
	char			 id[40];	/* the client sees this one */
	json_t			*up_id;		/* the upstream's */
	json_t			*params;
	char			*asked;		/* params, compact JSON */
	char			 digest[72];
	char			 in[48];	/* "in call ID", or where */
	uint64_t		 key;		/* announced as (0: not) */
	struct ev_timer		*timer;		/* approval, then answer */
	/* approval */
	char			 approval_id[33];
	uint64_t		 created_ms, expires_ms;
	char			*approver;
	int64_t			 approver_uid;
	char			*approver_note;
	const char		*approval;
};

static void
answer_error(struct br_up *u, json_t *id, int code, const char *text)
{
	json_t *o;

	o = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id,
	    "error", "code", code, "message", text);
	if (o != NULL)
		(void)br_up_send(u, o);
	json_decref(o);
}

static void
on_recorded(void *arg, int ok)
{
	(void)arg;
	if (!ok)
		log_warnx("mcp.server_request: record not durable");
}

/* What one record says, besides who asked it of whom. */
struct outcome {
	const char	*decision;
	enum pol_reason	 reason;
	const char	*message;	/* what the upstream was told */
	const char	*detail;
	const char	*result_digest;
	uint64_t	 result_bytes;
};

/* Records what server u asked (asked, its digest) in the call of client
 * cl (NULL: no call) with outcome o; sr, when given, adds its approval. */
static void
record(struct br_up *u, const char *method, const struct br_client *cl,
    const char *src, const char *session, const char *asked,
    const char *digest, const struct outcome *o, const struct br_sreq *sr)
{
	struct br_event ev;

	if (u->br->h.record == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.kind = BR_EV_SERVER_REQUEST;
	ev.kind_name = br_kind_name(ev.kind);
	ev.server = u->srv->name;
	ev.tool = method;
	ev.decision = o->decision;
	ev.reason = o->reason;
	ev.message = o->message;
	ev.detail = o->detail;
	ev.upstream_latency_us = -1;
	ev.approver_uid = -1;
	ev.args_digest = digest;
	ev.result_digest = o->result_digest;
	ev.result_bytes = o->result_bytes;
	ev.sreq_key = sr != NULL ? sr->key : 0;
	if (cl != NULL) {
		ev.sandbox = cl->id;
		ev.subject = cl->subject;
		ev.policy = pol_policy_name(cl->policy);
		ev.src = src;
		ev.session = session;
		if (!pol_tool_audit_digest(cl->policy) &&
		    strlen(asked) <= ASKED_MAX)
			ev.args = asked;
	}
	if (sr != NULL && sr->approval != NULL) {
		ev.approval = sr->approval;
		ev.approver = sr->approver;
		ev.approver_uid = sr->approver != NULL ? sr->approver_uid : -1;
		ev.approver_note = sr->approver_note;
	}
	if (u->br->h.record(u->br->h.ctx, &ev, on_recorded, NULL) == -1)
		log_warnx("mcp.server_request: record not sent");
}

static const char *
verdict_name(enum pol_verdict v)
{
	return v == POL_ALLOW ? "allow" : v == POL_ASK ? "ask" : "deny";
}

/* The one call in flight to u, or NULL when there is none or several. */
static struct br_call *
owner(struct br_up *u)
{
	struct br_call *c, *found = NULL;

	TAILQ_FOREACH(c, &u->br->calls, all) {
		if (c->up != u || c->state != CALL_FORWARDED)
			continue;
		if (found != NULL)
			return NULL;
		found = c;
	}
	return found;
}

/* Whether any call is in flight to u. */
static bool
any_call(const struct br_up *u)
{
	const struct br_call *c;

	TAILQ_FOREACH(c, &u->br->calls, all)
		if (c->up == u && c->state == CALL_FORWARDED)
			return true;
	return false;
}

/* ------------------------------------------------------------ pending */

static void
sr_free(struct br_sreq *sr)
{
	struct br *br = sr->br;

	TAILQ_REMOVE(&br->sreqs, sr, entry);
	br->nsreqs--;
	if (sr->state == SR_ASKING && sr->approval_id[0] != '\0' &&
	    br->napprovals > 0)
		br->napprovals--;
	ev_timer_cancel(br->loop, sr->timer);
	json_decref(sr->up_id);
	json_decref(sr->params);
	free(sr->asked);
	free(sr->approver);
	free(sr->approver_note);
	free(sr);
}

/* sr ends with outcome o; when code is non-zero the upstream is refused
 * with it and text first. */
static void
sr_end(struct br_sreq *sr, int code, const char *text,
    const struct outcome *o)
{
	if (code != 0)
		answer_error(sr->up, sr->up_id, code, text);
	record(sr->up, sr->method, sr->cl, sr->src, sr->session, sr->asked,
	    sr->digest, o, sr);
	sr_free(sr);
}

/* Refuses sr to its upstream: denied with reason, detail said why. */
static void
sr_refuse(struct br_sreq *sr, int code, const char *text,
    enum pol_reason reason, const char *why)
{
	struct outcome o;
	char detail[192];

	snprintf(detail, sizeof(detail), "%s; policy %s; %s", why,
	    verdict_name(sr->verdict), sr->in);
	memset(&o, 0, sizeof(o));
	o.decision = "deny";
	o.reason = reason;
	o.message = text;
	o.detail = detail;
	sr_end(sr, code, text, &o);
}

static void
on_deadline(struct ev_loop *loop, void *arg)
{
	struct br_sreq *sr = arg;

	(void)loop;
	sr->timer = NULL;
	if (sr->state == SR_ASKING) {
		sr->approval = "timeout";
		sr_refuse(sr, -1, "Nobody approved this request in time",
		    POL_REASON_APPROVAL_TIMEOUT, "refused");
		return;
	}
	sr_refuse(sr, -32001, "The client did not answer in time",
	    POL_REASON_NO_ANSWER, "forwarded; no answer in time");
}

/*
 * basic/patterns/mrtr.mdx: the request of call c waiting for its answer
 * (c->req, the first one or a retry) is answered with an
 * InputRequiredResult of what its client is asked now (every SW_RESULT
 * request of c sent and not answered, each under the bridge's id), and
 * the call is held for the retry that brings the answers. Its
 * requestState is a new random handle, known only here and good for one
 * retry of the same sandbox, method, name and arguments (br_srvreq_retry):
 * nothing in it is read back, so a changed one is an unknown one.
 */
json_t *
br_srvreq_inputs(struct br *br, const struct br_call *c)
{
	struct br_sreq *sr;
	json_t *reqs;

	reqs = json_object();
	TAILQ_FOREACH(sr, &br->sreqs, entry)
		if (reqs != NULL && sr->call == c && sr->way == SW_RESULT &&
		    sr->state == SR_SENT && json_object_set_new(reqs, sr->id,
		    json_pack("{s:s, s:O}", "method", sr->method, "params",
		    sr->params)) == -1) {
			json_decref(reqs);
			reqs = NULL;
		}
	return reqs;
}

static void
mrtr_offer(struct br *br, struct br_call *c)
{
	struct br_req *rq = c->req;
	json_t *reqs, *o = NULL;
	char *text = NULL;

	reqs = br_srvreq_inputs(br, c);
	memcpy(c->mrtr_state, "sluice-mrtr-", 12);
	if (reqs != NULL && br_random_hex(c->mrtr_state + 12, 16) == 0 &&
	    (o = json_pack("{s:s, s:O, s:{s:s, s:O, s:s}}", "jsonrpc", "2.0",
	    "id", c->rpc_id, "result", "resultType", "input_required",
	    "inputRequests", reqs, "requestState", c->mrtr_state)) != NULL)
		text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	json_decref(reqs);
	/* Held, not the request's any more: it ends with this answer. */
	c->req = NULL;
	rq->call = NULL;
	if (text == NULL) {
		c->mrtr_state[0] = '\0';
		br_reply_rpc_error(rq, 500, c->rpc_id, -32603,
		    "Internal error");
		return;
	}
	br_req_reply(rq, 200, text, NULL);
	free(text);
	log_info("bridge: call %s of %s held for the client's input",
	    c->call_id, c->client.id);
}

/* sr is with its client now: announced, so that a bridge that dies
 * before its record still leaves one (of unknown outcome). */
static void
announce(struct br_sreq *sr)
{
	struct br *br = sr->br;
	struct br_event ev;
	char detail[192];

	if (br->h.sreq_carried == NULL)
		return;
	snprintf(detail, sizeof(detail), "forwarded as %s; policy %s; %s",
	    sr->id, verdict_name(sr->verdict), sr->in);
	memset(&ev, 0, sizeof(ev));
	ev.kind = BR_EV_SERVER_REQUEST;
	ev.sandbox = sr->cl->id;
	ev.subject = sr->cl->subject;
	ev.policy = pol_policy_name(sr->cl->policy);
	ev.src = sr->src;
	ev.session = sr->session;
	ev.server = sr->up->srv->name;
	ev.tool = sr->method;
	ev.args_digest = sr->digest;
	ev.detail = detail;
	sr->key = ++br->sreq_seq;
	br->h.sreq_carried(br->h.ctx, sr->key, &ev);
}

/* Carries sr to its client: on its stream, or in its call's result. */
static void
sr_send(struct br_sreq *sr)
{
	json_t *o;
	char *m = NULL, *ev = NULL;

	sr->state = SR_SENT;
	if (sr->way == SW_RESULT) {
		if ((sr->timer = ev_timer_add(sr->br->loop,
		    deadline_ms(sr->br), on_deadline, sr)) == NULL) {
			sr_refuse(sr, -32603, "Internal error",
			    POL_REASON_NO_MEMORY, "not forwarded");
			return;
		}
		log_info("bridge: %s of %s asked of %s as %s", sr->method,
		    sr->up->srv->name, sr->cl->id, sr->id);
		announce(sr);
		/* Until a retry comes, it waits to be asked with the next;
		 * a client of the tasks extension gets a task instead, and
		 * its tasks/get shows what is asked (tasks.c). */
		if (sr->call->req != NULL && br_task_offer(sr->call, true,
		    NULL, 0) != 0)
			mrtr_offer(sr->br, sr->call);
		return;
	}
	o = json_pack("{s:s, s:s, s:s, s:O}", "jsonrpc", "2.0", "id", sr->id,
	    "method", sr->method, "params", sr->params);
	if (o != NULL)
		m = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (m == NULL || asprintf(&ev, "event: message\ndata: %s\n\n", m) ==
	    -1)
		ev = NULL;
	free(m);
	if (ev == NULL || br_stream_push(sr->st, ev) == -1 ||
	    (sr->timer = ev_timer_add(sr->br->loop, deadline_ms(sr->br),
	    on_deadline, sr)) == NULL) {
		free(ev);
		sr_refuse(sr, -32603, "Internal error", POL_REASON_NO_MEMORY,
		    "not forwarded");
		return;
	}
	free(ev);
	log_info("bridge: %s of %s carried to %s as %s", sr->method,
	    sr->up->srv->name, sr->cl->id, sr->id);
	announce(sr);
}

/* sr waits for a person, as a call does (call.c, ask). */
static void
sr_ask(struct br_sreq *sr)
{
	struct br *br = sr->br;
	struct br_sreq *o;
	uint64_t ms = pol_tool_approval_timeout_ms(sr->cl->policy);
	size_t mine = 0;

	TAILQ_FOREACH(o, &br->sreqs, entry)
		if (o->state == SR_ASKING && o->approval_id[0] != '\0' &&
		    strcmp(o->cl->id, sr->cl->id) == 0)
			mine++;
	if (br->napprovals >= BR_APPROVALS_MAX ||
	    mine >= BR_APPROVALS_PER_SB ||
	    br_random_hex(sr->approval_id, 16) == -1 ||
	    (sr->timer = ev_timer_add(br->loop, ms, on_deadline, sr)) ==
	    NULL) {
		sr->approval_id[0] = '\0';
		sr_refuse(sr, -32603, "Too many requests wait for approval",
		    POL_REASON_APPROVAL_UNAVAILABLE, "refused");
		return;
	}
	br->napprovals++;
	sr->created_ms = br_wall_ms();
	sr->expires_ms = sr->created_ms + ms;
	log_info("bridge: %s of %s for %s waits for approval (id %s)",
	    sr->method, sr->up->srv->name, sr->cl->id,
	    sr->approval_id);
}

int
br_srvreq_approvals(struct br *br, json_t *a)
{
	struct br_sreq *sr;
	json_t *o;

	TAILQ_FOREACH(sr, &br->sreqs, entry) {
		if (sr->state != SR_ASKING || sr->approval_id[0] == '\0')
			continue;
		o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:O, s:s, s:I, s:I}",
		    "id", sr->approval_id, "sandbox", sr->cl->id,
		    "subject", sr->cl->subject, "server",
		    sr->up->srv->name, "tool", sr->method, "arguments",
		    sr->params, "rule", "server_requests",
		    "created_ms", (json_int_t)sr->created_ms,
		    "expires_ms", (json_int_t)sr->expires_ms);
		if (o == NULL || json_array_append_new(a, o) == -1)
			return -1;
	}
	return 0;
}

int
br_srvreq_decide(struct br *br, const char *id, bool approve,
    const char *name, int64_t uid, const char *note, const char *reason)
{
	struct br_sreq *sr;
	char why[224];

	TAILQ_FOREACH(sr, &br->sreqs, entry)
		if (sr->state == SR_ASKING && sr->approval_id[0] != '\0' &&
		    strcmp(sr->approval_id, id) == 0)
			break;
	if (sr == NULL) {
		errno = ENOENT;
		return -1;
	}
	ev_timer_cancel(br->loop, sr->timer);
	sr->timer = NULL;
	br->napprovals--;
	sr->approval_id[0] = '\0';
	sr->approver = strdup(name);
	sr->approver_uid = uid;
	sr->approver_note = note != NULL ? strdup(note) : NULL;
	if (sr->approver == NULL || (note != NULL &&
	    sr->approver_note == NULL)) {
		sr->approval = "denied";
		sr_refuse(sr, -32603, "Internal error",
		    POL_REASON_INTERNAL_ERROR, "approval not recorded");
		return 0;
	}
	if (approve) {
		sr->approval = "approved";
		sr_send(sr);
		return 0;
	}
	sr->approval = "denied";
	snprintf(why, sizeof(why), "declined%s%.180s",
	    reason != NULL && *reason != '\0' ? ": " : "",
	    reason != NULL ? reason : "");
	sr_refuse(sr, -1, "The request was declined",
	    POL_REASON_APPROVAL_DENIED, why);
	return 0;
}

/* ------------------------------------------------------------ take */

/* Why a request of asked_len bytes cannot go to client cl (of session,
 * "" for none) the way it would, or NULL. rq is the request it would go
 * on (SW_CALL: the call's POST, NULL once the client left). */
static const char *
unfit(struct br *br, enum sreq_way way, const struct br_req *rq,
    const struct br_client *cl, const char *session, unsigned caps,
    enum pol_sreq_kind kind, size_t asked_len, enum pol_reason *reason)
{
	const struct br_sreq *o;
	size_t sess = 0, sb = 0;
	const char *acc;

	*reason = POL_REASON_NOT_FORWARDED;
	if (way == SW_CALL && rq == NULL)
		return "not forwarded: the client left the call";
	/* basic/patterns/mrtr.mdx: never a request of a kind the client
	 * did not declare. */
	if (way == SW_RESULT && (caps & (1u << kind)) == 0)
		return "not forwarded: the client did not declare it";
	if (kind == POL_SREQ_ELICITATION && br_session_batched(br, session))
		return "not forwarded: the client's revision has none";
	*reason = POL_REASON_NO_STREAM;
	acc = rq != NULL && rq->conn != NULL ? MHD_lookup_connection_value(rq->conn,
	    MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT) : NULL;
	if (way == SW_CALL && (acc == NULL ||
	    strstr(acc, "text/event-stream") == NULL))
		return "not forwarded: the client's Accept has no "
		    "text/event-stream";
	*reason = POL_REASON_OVERLOAD;
	if (asked_len > SREQ_ASK_MAX)
		return "not forwarded: too big";
	TAILQ_FOREACH(o, &br->sreqs, entry) {
		if (strcmp(o->cl->id, cl->id) == 0)
			sb++;
		if (session[0] != '\0' && strcmp(o->session, session) == 0)
			sess++;
	}
	/* The narrowest bound full is the one named. */
	if (sess >= lim_session(br))
		return "not forwarded: too many wait for the client in its "
		    "session";
	if (sb >= lim_sandbox(br))
		return "not forwarded: too many wait for the client in its "
		    "sandbox";
	if (br->nsreqs >= POL_LIM_SREQ_TOTAL)
		return "not forwarded: too many wait for clients";
	return NULL;
}

/* The session of u's server listening on a stream that owns a request
 * of u made outside any call, method: for roots/list, the one whose
 * change of roots was relayed last, if it listens; else the only one
 * listening. NULL with *n the number listening (0, or more than one). */
static struct br_session *
listener(struct br_up *u, const char *method, size_t *n)
{
	struct br_session *s, *found = NULL;

	*n = 0;
	if (strcmp(method, "roots/list") == 0 && u->roots_session[0] != '\0') {
		s = br_session_find(u->br, u->roots_session);
		u->roots_session[0] = '\0';
		if (s != NULL && !s->listen && s->stream != NULL &&
		    br_stream_live(s->stream) &&
		    strcmp(s->server, u->srv->name) == 0) {
			*n = 1;
			return s;
		}
	}
	TAILQ_FOREACH(s, &u->br->sessions, entry) {
		if (s->listen || s->stream == NULL ||
		    strcmp(s->server, u->srv->name) != 0 ||
		    !br_stream_live(s->stream))
			continue;
		(*n)++;
		found = s;
	}
	return *n == 1 ? found : NULL;
}

void
br_srvreq_take(struct br_up *u, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg,
	    "method"));
	json_t *id = json_object_get(msg, "id");
	json_t *params = json_object_get(msg, "params");
	struct br *br = u->br;
	struct br_sreq *sr;
	struct br_call *c;
	struct br_session *ls = NULL;
	struct br_req *rq = NULL;
	struct br_stream *st = NULL;
	const struct br_client *cl = NULL;
	const char *src = NULL, *session = NULL;
	enum sreq_way way = SW_CALL;
	unsigned caps = 0;
	struct outcome o;
	enum pol_verdict v = POL_DENY;
	enum pol_reason reason = POL_REASON_NONE;
	const char *why;
	char *asked = NULL, digest[72], detail[192], in[48];
	size_t i, nl = 0;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(method, kinds[i].method) == 0)
			break;
	if (i == sizeof(kinds) / sizeof(kinds[0])) {
		/* Nothing else is the client's to answer through us. */
		answer_error(u, id, -32601, "Method not found");
		return;
	}
	c = owner(u);
	if (c != NULL && c->sreqs >= SREQ_PER_CALL) {
		answer_error(u, id, -32601, "Not supported by the client");
		log_warnx("%s: %s refused unrecorded: over %u in one call",
		    u->srv->name, method, SREQ_PER_CALL);
		return;
	}
	if (c != NULL) {
		c->sreqs++;
		rq = c->req;
		/* A client of the stateless revision is asked in a result,
		 * and so is every later request of a call held for it. */
		if (c->mrtr || (rq != NULL && rq->modern))
			way = SW_RESULT;
		caps = rq != NULL ? rq->sreq_caps : c->mrtr_caps;
		cl = &c->client;
		src = c->src;
		session = c->session;
		snprintf(in, sizeof(in), "in call %s", c->call_id);
	} else if (!any_call(u) && (ls = listener(u, kinds[i].method, &nl)) !=
	    NULL && (rq = br_stream_req(ls->stream)) != NULL) {
		way = SW_LISTEN;
		cl = &rq->client;
		src = rq->src;
		session = rq->session;
		snprintf(in, sizeof(in), "on its session's stream");
	}
	if (cl != NULL)
		v = pol_server_request(cl->policy, u->srv->name,
		    kinds[i].kind);
	asked = params != NULL ? json_dumps(params, JSON_COMPACT |
	    JSON_SORT_KEYS) : strdup("{}");
	if (asked == NULL) {
		answer_error(u, id, -32603, "Internal error");
		return;
	}
	br_sha256_hex(asked, strlen(asked), digest);
	memset(&o, 0, sizeof(o));
	o.decision = "deny";
	o.detail = detail;
	if (cl == NULL) {
		answer_error(u, id, -32601, "Not supported by the client");
		o.message = "Not supported by the client";
		if (any_call(u)) {
			o.reason = POL_REASON_NOT_IN_CALL;
			snprintf(detail, sizeof(detail), "refused: several "
			    "calls in flight, none owns it");
		} else if (nl == 0) {
			o.reason = POL_REASON_NO_STREAM;
			snprintf(detail, sizeof(detail), "refused: outside "
			    "any call, no session listens");
		} else {
			o.reason = POL_REASON_NOT_IN_CALL;
			snprintf(detail, sizeof(detail), "refused: outside "
			    "any call, %zu sessions listen, none owns it", nl);
		}
		record(u, method, NULL, NULL, NULL, asked, digest, &o, NULL);
		free(asked);
		return;
	}
	why = v == POL_DENY ? "refused" : unfit(br, way, rq, cl, session,
	    caps, kinds[i].kind, strlen(asked), &reason);
	if (v == POL_DENY)
		reason = POL_REASON_RULE_DENY;
	if (why == NULL) {
		if ((sr = calloc(1, sizeof(*sr))) == NULL ||
		    br_random_hex(sr->id + 7, 16) == -1 ||
		    (way == SW_CALL && (st = br_callstream(rq)) == NULL)) {
			free(sr);
			why = "not forwarded: no memory";
			reason = POL_REASON_NO_MEMORY;
		} else if (way == SW_LISTEN)
			st = ls->stream;
	}
	if (why != NULL) {
		o.reason = reason;
		o.message = v == POL_DENY ? "Not supported by the client" :
		    "Not forwarded to the client";
		answer_error(u, id, -32601, o.message);
		snprintf(detail, sizeof(detail), "%s; policy %s; %s", why,
		    verdict_name(v), in);
		record(u, method, cl, src, session, asked, digest, &o, NULL);
		free(asked);
		return;
	}
	memcpy(sr->id, "sluice-", 7);
	sr->br = br;
	sr->up = u;
	sr->st = st;
	sr->call = c;
	sr->cl = cl;
	snprintf(sr->session, sizeof(sr->session), "%s", session);
	snprintf(sr->src, sizeof(sr->src), "%s", src);
	sr->way = way;
	if (way == SW_RESULT) {
		c->mrtr = true;
		c->mrtr_caps = caps;
	}
	sr->method = kinds[i].method;
	sr->verdict = v;
	sr->up_id = json_incref(id);
	sr->params = params != NULL ? json_incref(params) : json_object();
	sr->asked = asked;
	memcpy(sr->digest, digest, sizeof(sr->digest));
	snprintf(sr->in, sizeof(sr->in), "%s", in);
	sr->approver_uid = -1;
	TAILQ_INSERT_TAIL(&br->sreqs, sr, entry);
	br->nsreqs++;
	if (sr->params == NULL)
		sr_refuse(sr, -32603, "Internal error", POL_REASON_NO_MEMORY,
		    "not forwarded");
	else if (v == POL_ASK)
		sr_ask(sr);
	else
		sr_send(sr);
}

void
br_srvreq_roots_changed(struct br_req *rq, const struct br_session *s)
{
	struct br_up *u = br_up_find(rq->br, s->server);
	const struct br_sreq *o;
	json_t *n;

	if (u == NULL || pol_server_request(rq->client.policy, s->server,
	    POL_SREQ_ROOTS) == POL_DENY)
		return;
	/* One relayed at a time per session: the upstream asks again for
	 * each, and until the client has answered that, another change
	 * tells the upstream nothing new. */
	TAILQ_FOREACH(o, &rq->br->sreqs, entry)
		if (strcmp(o->session, s->id) == 0 &&
		    strcmp(o->method, "roots/list") == 0)
			return;
	/* Only the method: nothing the client said goes upstream. */
	n = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
	    "notifications/roots/list_changed");
	if (n == NULL || br_up_send(u, n) == -1)
		log_warnx("bridge: roots/list_changed of %s not relayed to %s",
		    rq->client.id, s->server);
	else
		snprintf(u->roots_session, sizeof(u->roots_session), "%s",
		    s->id);
	json_decref(n);
}

/* ------------------------------------------------------------ answers */

/* The client's answer to sr, result (an object) or else err, goes to its
 * upstream under the upstream's id, and sr ends recorded as answered; 0,
 * or -1 when it could not be sent (sr then refused, recorded). */
static int
relay(struct br_sreq *sr, const json_t *result, const json_t *err)
{
	struct outcome o;
	char detail[192], digest[72], *text;
	const char *emsg;
	json_t *m;
	int code;

	if (json_is_object(result))
		m = json_pack("{s:s, s:O, s:O}", "jsonrpc", "2.0", "id",
		    sr->up_id, "result", result);
	else {
		/* Only the parts the spec defines go to the upstream. */
		code = (int)json_integer_value(json_object_get(err, "code"));
		emsg = json_string_value(json_object_get(err, "message"));
		m = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
		    "id", sr->up_id, "error", "code", code != 0 ? code :
		    -32603, "message", emsg != NULL ? emsg : "Error");
	}
	text = m != NULL ? json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS) :
	    NULL;
	if (text == NULL || br_up_send(sr->up, m) == -1) {
		json_decref(m);
		free(text);
		sr_refuse(sr, -32603, "Internal error",
		    POL_REASON_UPSTREAM_FAILED, "forwarded; answer not "
		    "relayed");
		return -1;
	}
	json_decref(m);
	br_sha256_hex(text, strlen(text), digest);
	memset(&o, 0, sizeof(o));
	o.decision = "allow";
	o.reason = POL_REASON_ALLOWED;
	o.detail = detail;
	o.result_digest = digest;
	o.result_bytes = strlen(text);
	free(text);
	if (json_is_object(result))
		snprintf(detail, sizeof(detail), "forwarded as %s; answered; "
		    "policy %s; %s", sr->id, verdict_name(sr->verdict), sr->in);
	else
		snprintf(detail, sizeof(detail), "forwarded as %s; answered "
		    "with an error; policy %s; %s", sr->id,
		    verdict_name(sr->verdict), sr->in);
	sr_end(sr, 0, NULL, &o);
	return 0;
}

void
br_srvreq_answer(struct br_req *rq, const char *sid, const struct br_rpc *rpc)
{
	struct br *br = rq->br;
	struct br_sreq *sr;
	const char *id = json_string_value(json_object_get(rpc->msg, "id"));
	json_t *result = json_object_get(rpc->msg, "result");
	json_t *err = json_object_get(rpc->msg, "error");

	sr = NULL;
	if (id != NULL)
		TAILQ_FOREACH(sr, &br->sreqs, entry)
			if (sr->state == SR_SENT &&
			    strcmp(sr->id, id) == 0 &&
			    strcmp(sr->session, sid) == 0)
				break;
	if (sr == NULL) {
		/* A guess, a replay or another session's: the sandbox can
		 * send any number, so only the log hears of them. */
		log_warnx("bridge: %s answered no request waiting in its "
		    "session", rq->client.id);
		br_reply_rpc_error(rq, 400, NULL, -32600, "Bad Request: no "
		    "request of this session waits for that answer");
		return;
	}
	if (rq->len > SREQ_ANSWER_MAX) {
		/* Refused, not taken: the client may answer again. */
		log_warnx("bridge: %s answered %s with %zu bytes, over %u",
		    rq->client.id, sr->id, rq->len, SREQ_ANSWER_MAX);
		br_reply_rpc_error(rq, 413, NULL, -32600,
		    "Answer too large");
		return;
	}
	if (relay(sr, result, err) == -1) {
		br_reply_rpc_error(rq, 500, NULL, -32603, "Internal error");
		return;
	}
	br_req_reply(rq, 202, NULL, NULL);
}

void
br_srvreq_cancelled(struct br_up *u, const json_t *msg)
{
	const json_t *params = json_object_get(msg, "params");
	const json_t *rid = json_object_get(params, "requestId");
	const char *why = br_str_bounded(json_object_get(params, "reason"),
	    128);
	struct br_sreq *sr;
	struct outcome o;
	json_t *n;
	char *m = NULL, *ev = NULL, detail[320];

	if (rid == NULL)
		return;
	TAILQ_FOREACH(sr, &u->br->sreqs, entry)
		if (sr->up == u && json_equal(sr->up_id, (json_t *)rid))
			break;
	if (sr == NULL)
		return;
	if (sr->state == SR_SENT && sr->st != NULL) {
		/* The client learns it under the id it knows; the reason,
		 * the upstream's words, goes only to the record. */
		n = json_pack("{s:s, s:s, s:{s:s}}", "jsonrpc", "2.0",
		    "method", "notifications/cancelled", "params",
		    "requestId", sr->id);
		if (n != NULL)
			m = json_dumps(n, JSON_COMPACT);
		json_decref(n);
		if (m == NULL || asprintf(&ev, "event: message\ndata: %s\n\n",
		    m) == -1 || br_stream_push(sr->st, ev) == -1)
			log_warnx("bridge: the cancel of %s not carried",
			    sr->id);
		free(m);
		free(ev);
	} else if (sr->state == SR_ASKING)
		sr->approval = "cancelled";
	snprintf(detail, sizeof(detail), "%s; cancelled by the server%s%s; "
	    "policy %s; %s", sr->state == SR_SENT ? "forwarded" :
	    "refused", why != NULL ? ": " : "", why != NULL ? why : "",
	    verdict_name(sr->verdict), sr->in);
	memset(&o, 0, sizeof(o));
	o.decision = "deny";
	o.reason = POL_REASON_CANCELLED;
	o.detail = detail;
	sr_end(sr, 0, NULL, &o);
}

bool
br_srvreq_client_cancelled(struct br *br, const char *sid, const json_t *rid)
{
	const char *id = json_string_value(rid);
	struct br_sreq *sr;
	struct outcome o;
	json_t *n;
	char detail[192];

	if (id == NULL)
		return false;
	TAILQ_FOREACH(sr, &br->sreqs, entry)
		if (sr->state == SR_SENT && strcmp(sr->id, id) == 0 &&
		    strcmp(sr->session, sid) == 0)
			break;
	if (sr == NULL)
		return false;
	/* The upstream hears it under its own id, and nothing else the
	 * client said (its reason is the sandbox's text). */
	n = json_pack("{s:s, s:s, s:{s:O}}", "jsonrpc", "2.0", "method",
	    "notifications/cancelled", "params", "requestId", sr->up_id);
	if (n == NULL || br_up_send(sr->up, n) == -1)
		log_warnx("bridge: the client's cancel of %s not relayed",
		    sr->id);
	json_decref(n);
	snprintf(detail, sizeof(detail), "forwarded as %s; cancelled by the "
	    "client; policy %s; %s", sr->id, verdict_name(sr->verdict),
	    sr->in);
	memset(&o, 0, sizeof(o));
	o.decision = "deny";
	o.reason = POL_REASON_CANCELLED;
	o.detail = detail;
	sr_end(sr, 0, NULL, &o);
	return true;
}

/* sr ends before its client answered: its stream or its call went. */
static void
gone(struct br_sreq *sr)
{
	const char *what = sr->way == SW_LISTEN ? "stream" : "call";
	char why[64];

	if (sr->state == SR_ASKING)
		sr->approval = "cancelled";
	snprintf(why, sizeof(why), "%s the %s ended first", sr->state ==
	    SR_ASKING ? "refused:" : "forwarded;", what);
	sr_refuse(sr, -32603, sr->way == SW_LISTEN ? "The stream ended" :
	    "The call ended", sr->state == SR_ASKING ? POL_REASON_CANCELLED :
	    POL_REASON_NO_ANSWER, why);
}

void
br_srvreq_stream_gone(struct br *br, struct br_stream *st)
{
	struct br_sreq *sr, *t;

	TAILQ_FOREACH_SAFE(sr, &br->sreqs, entry, t)
		if (sr->st == st)
			gone(sr);
}

void
br_srvreq_call_gone(struct br *br, struct br_call *c)
{
	struct br_sreq *sr, *t;

	TAILQ_FOREACH_SAFE(sr, &br->sreqs, entry, t)
		if (sr->call == c)
			gone(sr);
}

void
br_srvreq_abort_all(struct br *br)
{
	struct br_sreq *sr;

	while ((sr = TAILQ_FIRST(&br->sreqs)) != NULL) {
		if (sr->state == SR_ASKING)
			sr->approval = "denied";
		sr_refuse(sr, -32603, "Sluice is stopping",
		    POL_REASON_SHUTDOWN, "refused: stopping");
	}
}

/* The answers in resp to what call c asks of its client go upstream;
 * true when one is left unanswered. One not answered is asked again;
 * what it does not know is ignored (mrtr.mdx, "Error Handling"). */
static bool
answers(struct br *br, const struct br_call *c, const json_t *resp)
{
	struct br_sreq *sr, *t;
	const json_t *a;
	bool left = false;

	TAILQ_FOREACH_SAFE(sr, &br->sreqs, entry, t) {
		if (sr->call != c || sr->way != SW_RESULT ||
		    sr->state != SR_SENT)
			continue;
		a = json_object_get(resp, sr->id);
		if (!json_is_object(a))
			left = true;
		else
			(void)relay(sr, a, NULL);
	}
	return left;
}

int
br_srvreq_task_answers(struct br *br, const struct br_call *c,
    const json_t *resp, size_t len)
{
	if (len > SREQ_ANSWER_MAX)
		return -1;
	(void)answers(br, c, resp);
	return 0;
}

/* The member of a call's params that names what it calls. */
static const char *
call_name_key(const struct br_call *c)
{
	return c->kind != NULL ? c->kind->name_key : "name";
}

bool
br_srvreq_retry(struct br_req *rq, const struct br_rpc *rpc)
{
	struct br *br = rq->br;
	const json_t *params = json_object_get(rpc->msg, "params");
	const json_t *state = json_object_get(params, "requestState");
	const json_t *resp = json_object_get(params, "inputResponses");
	const json_t *args, *name;
	struct br_call *c;
	char *aj, digest[72];
	bool left = false;

	if (state == NULL)
		return false;
	/* Only while the upstream works on it: once its result is in,
	 * the answer is made for the request it had. */
	TAILQ_FOREACH(c, &br->calls, all)
		if (c->mrtr && c->mrtr_state[0] != '\0' &&
		    c->state == CALL_FORWARDED && json_is_string(state) &&
		    strcmp(c->mrtr_state, json_string_value(state)) == 0)
			break;
	/* The same sandbox, and the request it was given for: the same
	 * method, name and arguments (what the call was decided on). */
	if (c != NULL) {
		name = json_object_get(params, call_name_key(c));
		args = json_object_get(params, "arguments");
		aj = args != NULL ? json_dumps(args, JSON_COMPACT |
		    JSON_SORT_KEYS) : strdup("{}");
		if (aj != NULL)
			br_sha256_hex(aj, strlen(aj), digest);
		if (aj == NULL || c->req != NULL ||
		    strcmp(c->client.id, rq->client.id) != 0 ||
		    strcmp(rpc->method, c->kind != NULL ? c->kind->method :
		    "tools/call") != 0 || !json_is_string(name) ||
		    strcmp(json_string_value(name), c->tool) != 0 ||
		    strcmp(digest, c->args_digest) != 0)
			c = NULL;
		free(aj);
	}
	if (c == NULL) {
		log_warnx("bridge: %s retried with a requestState of no call "
		    "held for it", rq->client.id);
		br_reply_rpc_error(rq, 400, rpc->id, -32602, "Invalid params: "
		    "requestState is not valid for this request");
		return true;
	}
	if (rq->len > SREQ_ANSWER_MAX) {
		/* Refused, not taken: the client may retry again. */
		br_reply_rpc_error(rq, 413, rpc->id, -32600,
		    "Answer too large");
		return true;
	}
	/* Good for one retry. */
	c->mrtr_state[0] = '\0';
	left = answers(br, c, resp);
	json_decref(c->rpc_id);
	c->rpc_id = json_incref(rpc->id);
	c->req = rq;
	c->mrtr_caps = rq->sreq_caps;
	rq->call = c;
	log_info("bridge: call %s of %s resumed by a retry", c->call_id,
	    c->client.id);
	if (left)
		mrtr_offer(br, c);
	/* Else it waits, parked, for the call's result or what the
	 * upstream asks next. */
	return true;
}
