/*
 * rpc.c: JSON-RPC as the bridge reads it (br_rpc_parse: one message,
 * strict ids and methods; a batch is batch.c's, whose elements are read
 * by the same br_rpc_from_value) and the MCP methods it answers itself:
 * initialize (a new session, session.c), ping and tools/list (the upstream's
 * tools the sandbox's policy shows, paged with cursors of the bridge's
 * own). tools/call goes to the call pipeline (call.c), resources and prompts
 * to theirs (resources.c, prompts.c). Everything here runs
 * after front.c has checked the request and identified the sandbox, so a
 * method only has to be right about MCP.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"

/* 2025-03-26 is served too: a session that negotiated it may send
 * batches (batch.c says what else it gets). */
static const char *const versions[] = { "2025-11-25", "2025-06-18",
	BR_PROTO_BATCHED, NULL };

static void
rpc_invalid(struct br_rpc *out, int code, const char *msg)
{
	out->kind = BR_RPC_INVALID;
	out->code = code;
	out->http_status = 400;
	out->error = msg;
}

void
br_rpc_parse(const char *buf, size_t len, struct br_rpc *out)
{
	json_t *v;
	json_error_t jerr;

	memset(out, 0, sizeof(*out));
	if (buf == NULL) {
		rpc_invalid(out, -32700, "Parse error");
		return;
	}
	v = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
	    &jerr);
	if (v == NULL) {
		rpc_invalid(out, -32700, "Parse error");
		return;
	}
	if (json_is_array(v)) {
		json_decref(v);
		rpc_invalid(out, -32600, "Batching is not supported");
		return;
	}
	br_rpc_from_value(v, out);
}

void
br_rpc_from_value(json_t *v, struct br_rpc *out)
{
	json_t *id, *m;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(v)) {
		json_decref(v);
		rpc_invalid(out, -32600, "Invalid Request: not an object");
		return;
	}
	out->msg = v;
	m = json_object_get(v, "jsonrpc");
	if (!json_is_string(m) || strcmp(json_string_value(m), "2.0") != 0) {
		rpc_invalid(out, -32600, "Invalid Request: jsonrpc must be "
		    "\"2.0\"");
		return;
	}
	id = json_object_get(v, "id");
	/* A null id is forbidden by MCP; strings and integers only. */
	if (id != NULL && !json_is_string(id) && !json_is_integer(id)) {
		rpc_invalid(out, -32600, "Invalid Request: bad id");
		return;
	}
	if (json_is_string(id) && json_string_length(id) > 256) {
		rpc_invalid(out, -32600, "Invalid Request: id too long");
		return;
	}
	m = json_object_get(v, "method");
	if (m != NULL) {
		if (!json_is_string(m) || json_string_length(m) == 0 ||
		    json_string_length(m) > 128 ||
		    strlen(json_string_value(m)) != json_string_length(m)) {
			rpc_invalid(out, -32600, "Invalid Request: bad method");
			return;
		}
		if (json_object_get(v, "params") != NULL &&
		    !json_is_object(json_object_get(v, "params"))) {
			rpc_invalid(out, -32600, "Invalid Request: params "
			    "must be an object");
			return;
		}
		out->method = json_string_value(m);
		out->id = id;
		out->kind = id != NULL ? BR_RPC_REQUEST : BR_RPC_NOTIFICATION;
		return;
	}
	if (id != NULL && (json_object_get(v, "result") != NULL) !=
	    (json_object_get(v, "error") != NULL)) {
		out->id = id;
		out->kind = BR_RPC_RESPONSE;
		return;
	}
	rpc_invalid(out, -32600, "Invalid Request");
}

void
br_rpc_clear(struct br_rpc *r)
{
	if (r == NULL)
		return;
	json_decref(r->msg);
	memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------ methods */

bool
br_version_ok(const char *v)
{
	size_t i;

	for (i = 0; versions[i] != NULL; i++)
		if (strcmp(versions[i], v) == 0)
			return true;
	return false;
}

/* The session's flags: what the policy lets it hear about. */
static void
session_flags(struct br_req *rq, struct br_session *s)
{
	s->res_ok = pol_mcp_offers(rq->client.policy, rq->server, false);
	s->prompts_ok = pol_mcp_offers(rq->client.policy, rq->server, true);
}

static void
init_answer(struct br_req *rq, json_t *id, const char *v)
{
	struct br_session *s;
	json_t *o;
	char *txt;

	if ((s = br_session_new(rq->br, rq, v)) == NULL) {
		br_reply_rpc_error(rq, 503, id, -32603,
		    "Too many sessions");
		return;
	}
	session_flags(rq, s);
	o = json_pack("{s:s, s:O, s:{s:s, s:o, s:{s:s, s:s}, s:s}}",
	    "jsonrpc", "2.0", "id", id, "result",
	    "protocolVersion", v,
	    "capabilities", br_rpc_caps(br_up_find(rq->br, rq->server)),
	    "serverInfo", "name", "sluice", "version", BR_SERVER_VERSION,
	    "instructions", BR_INSTRUCTIONS);
	txt = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (txt == NULL) {
		br_session_free(rq->br, s);
		br_reply_rpc_error(rq, 500, id, -32603, "Internal error");
		return;
	}
	br_req_reply(rq, 200, txt, s->id);
	free(txt);
}

static void
on_offer(void *arg, json_t *msg, const char *err)
{
	struct br_req *rq = arg;

	(void)msg;
	(void)err;
	rq->ureq = NULL;
	init_answer(rq, rq->rpc_id, rq->init_version);
}

void
br_rpc_initialize(struct br_req *rq, const struct br_rpc *rpc)
{
	json_t *params = json_object_get(rpc->msg, "params");
	json_t *pv = json_object_get(params, "protocolVersion");
	const char *v = BR_PROTO_LATEST;
	struct br_up *u = br_up_find(rq->br, rq->server);

	if (!json_is_string(pv)) {
		br_reply_rpc_error(rq, 200, rpc->id, -32602,
		    "Invalid params: protocolVersion is required");
		return;
	}
	/* Echo a version we speak, else offer our latest (lifecycle.mdx). */
	if (br_version_ok(json_string_value(pv)))
		v = json_string_value(pv);
	/* What the session is offered depends on what the upstream offers:
	 * a first session waits for its handshake (a ping queued behind
	 * it). One that fails offers tools only. */
	if (u != NULL && !u->caps_known) {
		rq->rpc_id = json_incref(rpc->id);
		snprintf(rq->init_version, sizeof(rq->init_version), "%s", v);
		if ((rq->ureq = br_up_request(u, "ping", NULL, on_offer,
		    rq)) != NULL)
			return;
	}
	init_answer(rq, rpc->id, v);
}

void
br_client_q(const struct br_client *cl, const char **keys, const char **vals,
    struct pol_tool_q *q)
{
	size_t i;

	memset(q, 0, sizeof(*q));
	for (i = 0; i < cl->nlabels && i < BR_MAX_LABELS; i++) {
		keys[i] = cl->label_keys[i];
		vals[i] = cl->label_values[i];
	}
	q->subject = cl->subject;
	q->label_keys = keys;
	q->label_values = vals;
	q->nlabels = i;
}

/* "sluice-<offset>": opaque to clients, checked strictly here. */
static int
cursor_parse(const char *c, size_t *off)
{
	char *end;
	unsigned long v;

	if (strncmp(c, "sluice-", 7) != 0 || c[7] < '0' || c[7] > '9' ||
	    (c[7] == '0' && c[8] != '\0'))
		return -1;
	errno = 0;
	v = strtoul(c + 7, &end, 10);
	if (errno != 0 || *end != '\0' || v > 1000000)
		return -1;
	*off = v;
	return 0;
}

static void
list_answer(struct br_req *rq)
{
	struct br *br = rq->br;
	struct br_up *u = rq->up;
	const char *keys[BR_MAX_LABELS], *vals[BR_MAX_LABELS];
	struct pol_tool_q q;
	json_t *out, *t, *page, *res;
	const char *pin, *drift, *name;
	enum pol_reason why;
	size_t i, off = 0, psize, n;
	char next[32];

	if (rq->cursor != NULL && cursor_parse(rq->cursor, &off) == -1) {
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32602,
		    "Invalid params: unknown cursor");
		return;
	}
	br_client_q(&rq->client, keys, vals, &q);
	q.server = u->srv->name;
	if ((out = json_array()) == NULL)
		goto fail;
	json_array_foreach(u->tools, i, t) {
		name = json_string_value(json_object_get(t, "name"));
		if (name == NULL ||
		    br_tools_get(u, name, &pin, &drift) == NULL ||
		    drift != NULL)
			continue;
		q.tool = name;
		q.pin_hex = pin;
		if (pol_tool_visible_q(rq->client.policy, &q, &why))
			json_array_append(out, t);
	}
	n = json_array_size(out);
	if (off > n || (off == n && off != 0)) {
		json_decref(out);
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32602,
		    "Invalid params: unknown cursor");
		return;
	}
	psize = br->c.page_size;
	if ((page = json_array()) == NULL) {
		json_decref(out);
		goto fail;
	}
	for (i = off; i < n && i < off + psize; i++)
		json_array_append(page, json_array_get(out, i));
	json_decref(out);
	res = json_pack("{s:o}", "tools", page);
	if (res != NULL && off + psize < n) {
		snprintf(next, sizeof(next), "sluice-%zu", off + psize);
		json_object_set_new(res, "nextCursor", json_string(next));
	}
	if (res == NULL)
		goto fail;
	br_reply_rpc_result(rq, rq->rpc_id, res);
	return;
fail:
	br_reply_rpc_error(rq, 500, rq->rpc_id, -32603, "Internal error");
}

static void
list_refreshed(void *arg, int ok)
{
	struct br_req *rq = arg;

	if (!ok) {
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32603,
		    "The upstream server is not available");
		return;
	}
	list_answer(rq);
}

static void
do_tools_list(struct br_req *rq, const struct br_rpc *rpc)
{
	json_t *params = json_object_get(rpc->msg, "params");
	json_t *cur = json_object_get(params, "cursor");

	if (cur != NULL && !json_is_string(cur)) {
		br_reply_rpc_error(rq, 200, rpc->id, -32602,
		    "Invalid params: cursor must be a string");
		return;
	}
	rq->up = br_up_find(rq->br, rq->server);
	rq->rpc_id = json_incref(rpc->id);
	if (cur != NULL && (rq->cursor = strdup(json_string_value(cur))) ==
	    NULL) {
		br_reply_rpc_error(rq, 500, rpc->id, -32603, "Internal error");
		return;
	}
	/* The first page re-lists the upstream so that drift is seen when
	 * the agent looks; later pages come from that same listing. */
	if (cur == NULL || !rq->up->listed)
		br_tools_refresh(rq->up, list_refreshed, rq);
	else
		list_answer(rq);
}

/* Does rq's upstream offer prompts (or resources)? Not known yet counts
 * as offered: the request then finds out. */
static bool
offered(struct br_req *rq, bool prompts)
{
	struct br_up *u = br_up_find(rq->br, rq->server);

	return u != NULL && (!u->caps_known || (prompts ? u->has_prompts :
	    u->has_resources));
}

void
br_rpc_request(struct br_req *rq, const struct br_rpc *rpc)
{
	const char *m = rpc->method;
	json_t *params = json_object_get(rpc->msg, "params");
	struct br_session *s = br_session_find(rq->br, rq->session);
	bool res = strncmp(m, "resources/", 10) == 0;
	bool pr = strncmp(m, "prompts/", 8) == 0;

	if (s != NULL)
		session_flags(rq, s);
	if ((res || pr) && !offered(rq, pr)) {
		br_reply_rpc_error(rq, 200, rpc->id, -32601,
		    "Method not found");
	} else if (strcmp(m, "resources/list") == 0) {
		br_list_forward(rq, rpc, &br_list_resources);
	} else if (strcmp(m, "resources/templates/list") == 0) {
		br_list_forward(rq, rpc, &br_list_templates);
	} else if (strcmp(m, "prompts/list") == 0) {
		br_list_forward(rq, rpc, &br_list_prompts);
	} else if (strcmp(m, "resources/read") == 0) {
		br_call_start_kind(rq, rpc->id, params, br_up_find(rq->br,
		    rq->server), &br_kind_resource);
	} else if (strcmp(m, "prompts/get") == 0) {
		br_call_start_kind(rq, rpc->id, params, br_up_find(rq->br,
		    rq->server), &br_kind_prompt);
	} else if (strcmp(m, "resources/subscribe") == 0) {
		br_subscribe(rq, rpc, true);
	} else if (strcmp(m, "resources/unsubscribe") == 0) {
		br_subscribe(rq, rpc, false);
	} else if (strcmp(m, "completion/complete") == 0) {
		br_complete(rq, rpc);
	} else if (strcmp(m, "logging/setLevel") == 0) {
		br_logging_set(rq, rpc);
	} else if (strcmp(m, "ping") == 0) {
		br_reply_rpc_result(rq, rpc->id, json_object());
	} else if (strcmp(m, "tools/list") == 0) {
		do_tools_list(rq, rpc);
	} else if (strcmp(m, "tools/call") == 0) {
		br_call_start(rq, rpc->id, params, br_up_find(rq->br,
		    rq->server));
	} else {
		/* Tasks: not opened by any policy yet. */
		br_reply_rpc_error(rq, 200, rpc->id, -32601,
		    "Method not found");
	}
}

