/*
 * batch.c: the 2025-03-26 revision, the one revision the bridge serves
 * whose clients may send JSON-RPC batches (basic/index.mdx of 2025-03-26:
 * implementations MUST support receiving them; 2025-06-18 removed them,
 * so a batch in any later session stays 400 / -32600).
 *
 * What a 2025-03-26 session gets. It is negotiated by initialize like the
 * other legacy revisions, and any session may name it in its
 * MCP-Protocol-Version header (the revision that header came with; the
 * session's negotiated revision still governs). Against 2025-06-18 it
 * lacks elicitation, structured tool output (outputSchema,
 * structuredContent), resource_link content, title fields and the
 * version header. The bridge's answer: listings and results pass as for
 * 2025-06-18, since what later revisions add are members a 2025-03-26
 * client ignores under JSON's rules and the upstream chose to send (the
 * bridge rewrites no result by revision); the one thing such a client
 * could not take is a request it has no capability for, so elicitation
 * is never carried to a 2025-03-26 session (srvreq.c refuses and records
 * it, br_session_batched). Sampling and roots are carried as for any
 * legacy session, except from inside a batch (below).
 *
 * A batch: an array of 1..BR_BATCH_MAX (16) messages, requests and
 * notifications, or responses (a client's answers to server requests);
 * a mixed one is taken element by element too. Each element is handled
 * as if it came alone in a POST of its own: identified again, its session
 * checked again, then br_front_message, so its policy decision, records
 * and error are its own; one bad element never spoils the others (a
 * malformed one gets its own -32600 in the answer, with its id when it
 * had a usable one). initialize may not be batched (lifecycle.mdx). An
 * empty array is one -32600; more than 16 is one -32600 and 400.
 *
 * Answers: the responses to its requests, as an event stream carrying
 * each as it completes once anything has to wait, or as one JSON array
 * when every element was answered at once. A batch without requests is
 * 202, or 400 with the errors of the elements refused. A server request
 * of a call inside a batch is not carried (the stream is the batch's,
 * not the call's): refused and recorded as for a client with no stream.
 *
 * Bounds: a batch can get no more out of the bridge than its messages
 * sent one by one. The body is one body (body_max). Each element in
 * flight beyond the first counts as one more connection of the sandbox
 * (mhd_borrow, against its per-sandbox and the total connection limits,
 * which bound calls in flight): when none is free, the next element waits
 * for one of the batch's own to finish. Ids repeated within a batch or in
 * flight are treated as the single-message path treats them (each message
 * is handled on its own; notifications/cancelled finds the first).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"
#include "gateway/mhd.h"

struct br_batch {
	struct br		*br;
	struct br_req		*rq;		/* the POST; NULL once gone */
	struct br_batch_parts	 parts;
	char			 sid[65];
	struct br_req		**subs;		/* one a message, once started */
	bool			*answered;
	size_t			 next;		/* next message to start */
	size_t			 running;	/* started, not answered */
	size_t			 nanswered;
	int			 borrowed;	/* connections (mhd_borrow) */
	json_t			*pending;	/* answers not yet sent */
	struct br_stream	*st;		/* the event stream, or NULL */
	struct ev_timer		*timer;		/* stream_or_reap, due */
	bool			 starting;	/* inside start_more */
	bool			 refused;	/* a non-request was refused */
	bool			 done;
};

/* ------------------------------------------------------------ pure */

bool
br_batch_looks(const char *buf, size_t len)
{
	size_t i;

	for (i = 0; buf != NULL && i < len; i++) {
		if (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' ||
		    buf[i] == '\n')
			continue;
		return buf[i] == '[';
	}
	return false;
}

int
br_batch_parse(const char *buf, size_t len, size_t max,
    struct br_batch_parts *out)
{
	json_t *v, *e;
	json_error_t jerr;
	size_t i;

	memset(out, 0, sizeof(*out));
	v = buf != NULL ? json_loadb(buf, len, JSON_REJECT_DUPLICATES |
	    JSON_DECODE_ANY, &jerr) : NULL;
	if (v == NULL) {
		out->code = -32700;
		out->error = "Parse error";
		return 0;
	}
	out->code = -32600;
	if (!json_is_array(v))
		out->error = "Invalid Request: not a batch";
	else if (json_array_size(v) == 0)
		out->error = "Invalid Request";
	else if (json_array_size(v) > max)
		out->error = "Invalid Request: a batch holds at most 16 "
		    "messages";
	else
		out->code = 0;
	if (out->code != 0) {
		json_decref(v);
		return 0;
	}
	if ((out->msgs = calloc(json_array_size(v), sizeof(*out->msgs))) ==
	    NULL) {
		json_decref(v);
		return -1;
	}
	json_array_foreach(v, i, e) {
		br_rpc_from_value(json_incref(e), &out->msgs[i]);
		if (out->msgs[i].kind == BR_RPC_REQUEST)
			out->nrequests++;
	}
	out->n = json_array_size(v);
	json_decref(v);
	return 0;
}

void
br_batch_parts_clear(struct br_batch_parts *p)
{
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; i < p->n; i++)
		br_rpc_clear(&p->msgs[i]);
	free(p->msgs);
	memset(p, 0, sizeof(*p));
}

/* ------------------------------------------------------------ serving */

bool
br_session_batched(struct br *br, const char *sid)
{
	struct br_session *s;

	if (sid == NULL || sid[0] == '\0' ||
	    (s = br_session_find(br, sid)) == NULL)
		return false;
	return strcmp(s->version, BR_PROTO_BATCHED) == 0;
}

/* The id an element's answer names: its own when it had a usable one. */
static json_t *
elem_id(const struct br_rpc *r)
{
	json_t *id = json_object_get(r->msg, "id");

	if (json_is_integer(id) || (json_is_string(id) &&
	    json_string_length(id) <= 256))
		return id;
	return json_null();
}

static void	start_more(struct br_batch *b);
static void	stream_or_reap(struct ev_loop *loop, void *arg);
static void	batch_release(struct br_batch *b);

/* Element i's answer body goes out, or waits for the stream or the
 * array; the batch ends with its last one. */
static void
emit(struct br_batch *b, size_t i, const char *body)
{
	char *ev = NULL;

	if (body == NULL || b->rq == NULL)
		return;
	if (b->st != NULL) {
		ev = br_session_take_notes(b->br, b->sid, b->rq->client.policy,
		    body);
		if (ev == NULL && asprintf(&ev, "event: message\ndata: %s\n\n",
		    body) == -1)
			ev = NULL;
		if (ev == NULL || br_stream_push(b->st, ev) == -1)
			log_warnx("bridge: the answer to a batch's message %zu "
			    "lost on its stream", i);
		free(ev);
		return;
	}
	if (json_array_append_new(b->pending, json_loads(body, 0, NULL)) ==
	    -1)
		log_warnx("bridge: the answer to a batch's message %zu lost",
		    i);
}

static void
give_back(struct br_batch *b, int n)
{
	if (n <= 0 || b->rq == NULL)
		return;
	(void)mhd_borrow(b->br->mhd, b->rq->conn, -n);
	b->borrowed -= n;
}

/* Every message is answered: the POST's own answer. */
static void
finish(struct br_batch *b)
{
	char *txt;
	unsigned status;

	if (b->done || b->rq == NULL)
		return;
	b->done = true;
	give_back(b, b->borrowed);
	if (b->st != NULL) {
		br_stream_end(b->st);
		return;
	}
	if (json_array_size(b->pending) == 0) {
		br_req_reply(b->rq, 202, NULL, NULL);
		return;
	}
	/* Only refusals: the POST could not be taken in whole. */
	status = b->parts.nrequests == 0 && b->refused ? 400 : 200;
	if ((txt = json_dumps(b->pending, JSON_COMPACT)) == NULL) {
		br_reply_rpc_error(b->rq, 500, NULL, -32603, "Internal error");
		return;
	}
	br_req_reply(b->rq, status, txt, NULL);
	free(txt);
}

/* Element i (a message of the batch) is answered without a request of
 * its own: refused before it could be handled. */
static void
answer_now(struct br_batch *b, size_t i, int code, const char *msg)
{
	json_t *o;
	char *txt;

	o = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
	    elem_id(&b->parts.msgs[i]), "error", "code", code, "message", msg);
	txt = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	b->answered[i] = true;
	b->nanswered++;
	if (b->parts.msgs[i].kind != BR_RPC_REQUEST)
		b->refused = true;
	emit(b, i, txt != NULL ? txt : "{\"jsonrpc\":\"2.0\",\"id\":null,"
	    "\"error\":{\"code\":-32603,\"message\":\"Internal error\"}}");
	free(txt);
}

/* Element i starts, as a POST of its own would: identified, its session
 * checked, then handled. */
static void
start_one(struct br_batch *b, size_t i)
{
	struct br_rpc *r = &b->parts.msgs[i];
	struct br_req *rq = b->rq, *sub;
	struct br_session *s;

	if (r->kind == BR_RPC_INVALID) {
		answer_now(b, i, r->code, r->error);
		return;
	}
	if (r->kind == BR_RPC_REQUEST && strcmp(r->method, "initialize") == 0) {
		answer_now(b, i, -32600, "Invalid Request: initialize may not "
		    "be part of a batch");
		return;
	}
	if ((sub = calloc(1, sizeof(*sub))) == NULL) {
		answer_now(b, i, -32603, "Internal error");
		return;
	}
	sub->br = b->br;
	sub->conn = rq->conn;
	sub->batch = b;
	sub->state = RQ_RECEIVING;
	snprintf(sub->server, sizeof(sub->server), "%s", rq->server);
	b->subs[i] = sub;
	b->running++;
	if ((sub->method = strdup(rq->method)) == NULL ||
	    (sub->path = strdup(rq->path)) == NULL) {
		br_reply_rpc_error(sub, 500, NULL, -32603, "Internal error");
		return;
	}
	if (br_front_identify(sub) == -1) {
		br_reply_rpc_error(sub, 401, NULL, -32600, "Unauthorized");
		return;
	}
	if ((s = br_session_owned(sub, b->sid)) == NULL)
		return;
	br_session_touch(b->br, s);
	snprintf(sub->session, sizeof(sub->session), "%s", s->id);
	br_front_message(sub, s, r, false);
}

/* Starts what may start: one element at a time beyond the first in
 * flight only with a connection of the sandbox to count it against. */
static void
start_more(struct br_batch *b)
{
	if (b->starting || b->rq == NULL)
		return;
	b->starting = true;
	/* A bridge that stops starts nothing more: the rest is refused. */
	while (b->br->closing && b->next < b->parts.n)
		answer_now(b, b->next++, -32603, "The bridge is shutting down");
	while (b->next < b->parts.n) {
		if (b->running >= 1 + (size_t)b->borrowed) {
			if (mhd_borrow(b->br->mhd, b->rq->conn, 1) == -1)
				break;
			b->borrowed++;
		}
		start_one(b, b->next++);
	}
	b->starting = false;
	/* Nothing left to start: what no element in flight uses goes
	 * back (the POST's own connection carries one). */
	if (b->next == b->parts.n)
		give_back(b, b->borrowed - (b->running > 1 ?
		    (int)b->running - 1 : 0));
	if (b->nanswered == b->parts.n)
		finish(b);
}

void
br_batch_answer(struct br_req *rq, unsigned status, const char *body)
{
	struct br_batch *b = rq->batch;
	struct br_rpc *r;
	json_t *o, *id;
	char *txt = NULL;
	size_t i;

	for (i = 0; i < b->parts.n && b->subs[i] != rq; i++)
		;
	if (i == b->parts.n || b->answered[i])
		return;		/* answered once, as a POST is */
	b->answered[i] = true;
	b->nanswered++;
	b->running--;
	r = &b->parts.msgs[i];
	if (r->kind != BR_RPC_REQUEST && status >= 400)
		b->refused = true;
	/* A request's error that could not name it (refused before its
	 * message was read, as a POST would be) names it here. */
	if (body != NULL && r->kind == BR_RPC_REQUEST &&
	    (o = json_loads(body, 0, NULL)) != NULL) {
		id = json_object_get(o, "id");
		if ((id == NULL || json_is_null(id)) &&
		    json_object_set(o, "id", r->id) == 0)
			txt = json_dumps(o, JSON_COMPACT);
		json_decref(o);
	}
	if (status != 202)
		emit(b, i, txt != NULL ? txt : body);
	free(txt);
	if (b->rq == NULL) {
		/* The POST went; the last element left frees the batch,
		 * from the loop: its caller may still hold rq. */
		if (b->running == 0 && b->timer == NULL)
			b->timer = ev_timer_add(b->br->loop, 0, stream_or_reap,
			    b);
		return;
	}
	if (!b->starting)
		start_more(b);
}

void
br_batch_dispatch(struct br_req *rq, const char *sid)
{
	struct br *br = rq->br;
	struct br_session *s;
	struct br_batch *b;
	const char *v;

	if (sid == NULL) {
		br_reply_rpc_error(rq, 400, NULL, -32600,
		    "Batching is not supported");
		return;
	}
	v = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND,
	    "MCP-Protocol-Version");
	if (v != NULL && !br_version_ok(v)) {
		br_reply_rpc_error(rq, 400, NULL, -32600, "Bad Request: "
		    "unsupported MCP-Protocol-Version");
		return;
	}
	if ((s = br_session_owned(rq, sid)) == NULL)
		return;
	if (strcmp(s->version, BR_PROTO_BATCHED) != 0) {
		br_reply_rpc_error(rq, 400, NULL, -32600,
		    "Batching is not supported");
		return;
	}
	br_session_touch(br, s);
	snprintf(rq->session, sizeof(rq->session), "%s", s->id);
	if ((b = calloc(1, sizeof(*b))) == NULL ||
	    br_batch_parse(rq->body, rq->len, BR_BATCH_MAX, &b->parts) == -1) {
		free(b);
		br_reply_rpc_error(rq, 500, NULL, -32603, "Internal error");
		return;
	}
	if (b->parts.code != 0) {
		br_reply_rpc_error(rq, 400, NULL, b->parts.code,
		    b->parts.error);
		br_batch_parts_clear(&b->parts);
		free(b);
		return;
	}
	b->br = br;
	b->rq = rq;
	snprintf(b->sid, sizeof(b->sid), "%s", s->id);
	if ((b->subs = calloc(b->parts.n, sizeof(*b->subs))) == NULL ||
	    (b->answered = calloc(b->parts.n, sizeof(*b->answered))) ==
	    NULL || (b->pending = json_array()) == NULL) {
		rq->batch_own = b;
		br_reply_rpc_error(rq, 500, NULL, -32603, "Internal error");
		return;
	}
	rq->batch_own = b;
	start_more(b);
}

/* From the loop, never inside MHD's handler of the POST: its event
 * stream starts, carrying what is answered already; or, the POST gone,
 * the batch is freed. */
static void
stream_or_reap(struct ev_loop *loop, void *arg)
{
	struct br_batch *b = arg;
	json_t *o;
	char *txt;
	size_t i;

	(void)loop;
	b->timer = NULL;
	if (b->rq == NULL) {
		if (b->running == 0)
			batch_release(b);
		return;
	}
	if (b->done || b->st != NULL)
		return;
	/* Without a stream the answers wait for one array. */
	if ((b->st = br_callstream(b->rq)) == NULL)
		return;
	json_array_foreach(b->pending, i, o) {
		if ((txt = json_dumps(o, JSON_COMPACT)) != NULL)
			emit(b, i, txt);
		free(txt);
	}
	json_array_clear(b->pending);
}

void
br_batch_parked(struct br_req *rq)
{
	struct br_batch *b = rq->batch_own;

	if (b != NULL && !b->done && b->timer == NULL)
		b->timer = ev_timer_add(b->br->loop, 0, stream_or_reap, b);
}

/* Everything of b goes. */
static void
batch_release(struct br_batch *b)
{
	size_t i;

	ev_timer_cancel(b->br->loop, b->timer);
	for (i = 0; b->subs != NULL && i < b->parts.n; i++)
		if (b->subs[i] != NULL)
			br_front_sub_free(b->subs[i]);
	free(b->subs);
	free(b->answered);
	json_decref(b->pending);
	br_batch_parts_clear(&b->parts);
	free(b);
}

void
br_batch_free(struct br_batch *b)
{
	size_t i;

	if (b == NULL)
		return;
	/* The POST goes (answered, or its client left). What still runs
	 * goes on as a lone message whose client left would: a call
	 * detached (it records its outcome), anything else answered into
	 * the orphaned batch, which the last of them frees. */
	give_back(b, b->borrowed);
	b->rq->batch_own = NULL;
	b->rq = NULL;
	b->st = NULL;
	ev_timer_cancel(b->br->loop, b->timer);
	b->timer = NULL;
	for (i = 0; b->subs != NULL && i < b->parts.n; i++) {
		if (b->subs[i] == NULL)
			continue;
		b->subs[i]->conn = NULL;
		if (!b->answered[i] && b->subs[i]->call != NULL) {
			br_call_detach(b->subs[i]->call);
			b->subs[i]->call = NULL;
			b->answered[i] = true;
			b->running--;
		}
	}
	if (b->running == 0)
		batch_release(b);
}
