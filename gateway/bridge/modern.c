/*
 * modern.c: the stateless revision of MCP, 2026-07-28, served beside the
 * session-based 2025-06-18 and 2025-11-25 on the same endpoint (a
 * "dual-era" server in the revision's words). It exists apart from rpc.c
 * and session.c because a request of this revision carries everything
 * about itself (version, capabilities) and nothing of a session: what has
 * to be checked is its metadata and the HTTP headers that mirror it; what
 * it asks for then goes through the same methods, the same policy
 * decisions and the same call pipeline as a session's request. Who sends
 * it is decided as for every request (front.c: bearer token and source
 * address), never by anything the request says about itself.
 *
 * Points of the published 2026-07-28 text implemented here:
 *  - versioning.mdx, "Backward Compatibility": a request that carries
 *    _meta["io.modelcontextprotocol/protocolVersion"] (or says
 *    MCP-Protocol-Version: 2026-07-28) and no Mcp-Session-Id is served
 *    statelessly; initialize selects the legacy revisions as before.
 *  - basic/index.mdx, "Per-request protocol fields": protocolVersion and
 *    clientCapabilities are required in _meta: missing, -32602 with 400.
 *  - versioning.mdx, "Protocol Version Negotiation": a version not served
 *    statelessly is -32022 UnsupportedProtocolVersion, 400, with
 *    data.supported and data.requested.
 *  - transports/streamable-http.mdx, "Request Metadata" and "Server
 *    Validation": MCP-Protocol-Version, Mcp-Method (every request) and
 *    Mcp-Name (tools/call, prompts/get: params.name; resources/read:
 *    params.uri) are required; missing, malformed (characters outside
 *    visible ASCII, space and tab) or not equal to the body: -32020
 *    HeaderMismatch with 400. The body decides what is done; a header is
 *    only compared. Mcp-Name in the "=?base64?...?=" form is decoded
 *    before the comparison. An Mcp-Name on a method that names nothing
 *    corresponds to nothing in the body: refused the same way.
 *  - same page: a method not served is 404 with -32601; ping,
 *    logging/setLevel, resources/subscribe and /unsubscribe are gone in
 *    this revision and are among them.
 *  - server/discover.mdx: supportedVersions, capabilities, instructions,
 *    _meta serverInfo; the capabilities are the upstream's as the bridge
 *    forwards them, without logging and resource subscription, which this
 *    revision serves differently and the bridge does not yet, and with
 *    extensions io.modelcontextprotocol/tasks, which the bridge serves.
 *  - basic/index.mdx, "ResultType", and server/utilities/caching.mdx:
 *    every result gets resultType "complete" and _meta serverInfo; lists,
 *    resources/read and server/discover get ttlMs 0 and cacheScope
 *    "private" (what a sandbox sees is filtered by its policy, which may
 *    change at any moment).
 *  - basic/patterns/subscriptions.mdx: subscriptions/listen answers with a
 *    long-lived event stream (stream.c, under the bounds of the GET
 *    stream: it is one), the acknowledgment first (for a listen that
 *    comes before the upstream's handshake, once the upstream has said
 *    what it offers), every notification tagged with _meta
 *    subscriptionId (the request's id); only what the
 *    filter asked for and the sandbox's policy shows: resourcesListChanged
 *    and promptsListChanged. toolsListChanged (the bridge re-lists tools
 *    itself and announces no list change) and resourceSubscriptions are
 *    not honored, so the acknowledgment omits them, as the text allows.
 *
 *  - basic/patterns/mrtr.mdx: what an upstream of an earlier revision
 *    asks during a call (sampling, elicitation, roots) reaches the
 *    client as an InputRequiredResult of its request, and its retry,
 *    with inputResponses and the requestState, resumes the same call
 *    (srvreq.c, br_srvreq_retry); the client's declared capabilities
 *    say which kinds may be asked.
 *
 *  - the tasks extension (io.modelcontextprotocol/tasks, specification
 *    tasks.md), served by the bridge itself (tasks.c), the upstreams
 *    unaware: for a client whose request's capabilities declare it, a
 *    tools/call that would keep it waiting (for a person's approval, or
 *    for its own input asked by the upstream) is answered with a task
 *    handle (resultType "task") and goes on detached; tasks/get polls it
 *    (the result, redacted and recorded as the call's answer would be,
 *    once its outcome record is durable), tasks/update carries the
 *    answers to what it asks (as a retry's inputResponses would),
 *    tasks/cancel cancels its call. Task ids are random and bound to the
 *    sandbox and server; Mcp-Name mirrors params.taskId. Every other call
 *    is answered on its request, as for a client without the extension,
 *    whose tasks/... get -32021.
 *
 * Not implemented: per-request logLevel, progress on the response
 * stream, x-mcp-header / Mcp-Param-* validation, the empty listen result
 * at a server-side end of the stream, and the tasks extension's
 * notifications/tasks (taskIds of subscriptions/listen are not
 * acknowledged: clients poll; asked for by a client that did not declare
 * the extension, the listen is refused -32021 as the text wants).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "gateway/bridge/br_int.h"

#define META_VERSION	"io.modelcontextprotocol/protocolVersion"
#define META_CAPS	"io.modelcontextprotocol/clientCapabilities"
#define META_SERVER	"io.modelcontextprotocol/serverInfo"
#define META_SUBID	"io.modelcontextprotocol/subscriptionId"
#define META_TASKS	"io.modelcontextprotocol/tasks"
#define NAME_MAX_HDR	4096

/* What each version is served as: stateless first, then by initialize. */
static const char *const supported[] = { BR_PROTO_MODERN, "2025-11-25",
	"2025-06-18", BR_PROTO_BATCHED, NULL };

/* ------------------------------------------------------------ checks */

static const json_t *
meta_of(const json_t *msg)
{
	return json_object_get(json_object_get(msg, "params"), "_meta");
}

bool
br_modern_wanted(const char *sid, const char *vhdr, const json_t *msg)
{
	const char *m = json_string_value(json_object_get(msg, "method"));

	if (sid != NULL || m == NULL || strcmp(m, "initialize") == 0)
		return false;
	return json_object_get(meta_of(msg), META_VERSION) != NULL ||
	    (vhdr != NULL && strcmp(vhdr, BR_PROTO_MODERN) == 0);
}

/* Visible ASCII, space and tab only (RFC 9110 field values), not empty. */
static bool
hdr_chars_ok(const char *v)
{
	const unsigned char *p = (const unsigned char *)v;

	if (*p == '\0')
		return false;
	for (; *p != '\0'; p++)
		if ((*p < 0x20 || *p > 0x7e) && *p != '\t')
			return false;
	return true;
}

int
br_hdr_value_decode(const char *hv, char *out, size_t outlen)
{
	static const char pre[] = "=?base64?", suf[] = "?=";
	size_t n = strlen(hv), b, dlen;
	unsigned char *tmp;
	int d;

	if (!hdr_chars_ok(hv))
		return -1;
	if (n < sizeof(pre) - 1 + sizeof(suf) - 1 ||
	    strncmp(hv, pre, sizeof(pre) - 1) != 0 ||
	    strcmp(hv + n - (sizeof(suf) - 1), suf) != 0) {
		if (n >= outlen)
			return -1;
		memcpy(out, hv, n + 1);
		return (int)n;
	}
	hv += sizeof(pre) - 1;
	b = n - (sizeof(pre) - 1) - (sizeof(suf) - 1);
	if (b == 0 || b % 4 != 0 || b > NAME_MAX_HDR ||
	    (tmp = malloc(b / 4 * 3 + 1)) == NULL)
		return -1;
	d = EVP_DecodeBlock(tmp, (const unsigned char *)hv, (int)b);
	if (d < 0) {
		free(tmp);
		return -1;
	}
	/* EVP_DecodeBlock counts the padding's bytes too. */
	dlen = (size_t)d - (hv[b - 1] == '=') - (b > 1 && hv[b - 2] == '=');
	if (dlen >= outlen || memchr(tmp, '\0', dlen) != NULL) {
		free(tmp);
		return -1;
	}
	memcpy(out, tmp, dlen);
	out[dlen] = '\0';
	free(tmp);
	return (int)dlen;
}

static int
verdict(struct br_meta_verdict *v, unsigned status, int code,
    const char *msg, const char *detail)
{
	v->status = status;
	v->code = code;
	snprintf(v->msg, sizeof(v->msg), "%s%s%s", msg, detail ? ": " : "",
	    detail ? detail : "");
	return -1;
}

/* The member of params that Mcp-Name mirrors for method m, or NULL. */
static const char *
name_key(const char *m)
{
	if (strcmp(m, "tools/call") == 0 || strcmp(m, "prompts/get") == 0)
		return "name";
	if (strcmp(m, "resources/read") == 0)
		return "uri";
	/* The tasks extension, "Streamable HTTP: Routing Headers". */
	if (br_task_method(m))
		return "taskId";
	return NULL;
}

int
br_modern_check(const struct br_meta_hdrs *h, const json_t *msg,
    struct br_meta_verdict *v)
{
	const json_t *meta = meta_of(msg), *pv;
	const char *m = json_string_value(json_object_get(msg, "method"));
	const char *key, *body_name;
	char dec[NAME_MAX_HDR];

	memset(v, 0, sizeof(*v));
	pv = json_object_get(meta, META_VERSION);
	if (!json_is_string(pv) || json_string_length(pv) == 0 ||
	    json_string_length(pv) >= sizeof(v->requested))
		return verdict(v, 400, -32602, "Invalid params",
		    "_meta " META_VERSION " is required");
	snprintf(v->requested, sizeof(v->requested), "%s",
	    json_string_value(pv));
	if (!json_is_object(json_object_get(meta, META_CAPS)))
		return verdict(v, 400, -32602, "Invalid params",
		    "_meta " META_CAPS " is required");
	if (h->version == NULL)
		return verdict(v, 400, -32020, "Header mismatch",
		    "MCP-Protocol-Version header is required");
	if (strcmp(h->version, v->requested) != 0)
		return verdict(v, 400, -32020, "Header mismatch",
		    "MCP-Protocol-Version does not match _meta");
	if (strcmp(v->requested, BR_PROTO_MODERN) != 0)
		return verdict(v, 400, -32022, "Unsupported protocol version",
		    NULL);
	if (m == NULL)
		return verdict(v, 400, -32600, "Invalid Request", NULL);
	if (h->method == NULL)
		return verdict(v, 400, -32020, "Header mismatch",
		    "Mcp-Method header is required");
	if (strcmp(h->method, m) != 0)
		return verdict(v, 400, -32020, "Header mismatch",
		    "Mcp-Method does not match the body's method");
	/* Only requests name something: a notification stops here. */
	if (json_object_get(msg, "id") == NULL)
		return 0;
	key = name_key(m);
	body_name = key != NULL ? json_string_value(json_object_get(
	    json_object_get(msg, "params"), key)) : NULL;
	if (h->name == NULL) {
		if (body_name != NULL)
			return verdict(v, 400, -32020, "Header mismatch",
			    "Mcp-Name header is required");
		return 0;	/* nothing named: the method says -32602 */
	}
	if (key == NULL)
		return verdict(v, 400, -32020, "Header mismatch",
		    "Mcp-Name on a request that names nothing");
	if (br_hdr_value_decode(h->name, dec, sizeof(dec)) == -1)
		return verdict(v, 400, -32020, "Header mismatch",
		    "Mcp-Name is malformed");
	if (body_name == NULL || strcmp(dec, body_name) != 0)
		return verdict(v, 400, -32020, "Header mismatch",
		    "Mcp-Name does not match the body");
	return 0;
}

/* ------------------------------------------------------------ replies */

static void
reply_err(struct br_req *rq, json_t *id, const struct br_meta_verdict *v)
{
	json_t *o, *sup;
	char *s;
	size_t i;

	o = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
	    id != NULL ? id : json_null(), "error", "code", v->code,
	    "message", v->msg);
	if (o != NULL && v->code == -32022 && (sup = json_array()) != NULL) {
		for (i = 0; supported[i] != NULL; i++)
			json_array_append_new(sup, json_string(supported[i]));
		json_object_set_new(json_object_get(o, "error"), "data",
		    json_pack("{s:o, s:s}", "supported", sup, "requested",
		    v->requested));
	}
	s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s == NULL) {
		br_reply_rpc_error(rq, 500, id, -32603, "Internal error");
		return;
	}
	br_req_reply(rq, v->status, s, NULL);
	free(s);
}

char *
br_modern_result(const struct br_req *rq, const char *body, unsigned *status)
{
	json_t *o, *r, *meta, *err;
	char *s;

	if ((o = json_loads(body, 0, NULL)) == NULL)
		return NULL;
	err = json_object_get(o, "error");
	if (json_integer_value(json_object_get(err, "code")) == -32601) {
		/* streamable-http.mdx: a method not served is a 404. */
		*status = 404;
		json_decref(o);
		return NULL;
	}
	r = json_object_get(o, "result");
	if (!json_is_object(r)) {
		json_decref(o);
		return NULL;
	}
	if (json_object_get(r, "resultType") == NULL)
		json_object_set_new(r, "resultType", json_string("complete"));
	if (!json_is_object(meta = json_object_get(r, "_meta"))) {
		meta = json_object();
		json_object_set_new(r, "_meta", meta);
	}
	json_object_set_new(meta, META_SERVER, json_pack("{s:s, s:s}",
	    "name", "sluice", "version", BR_SERVER_VERSION));
	if (rq->cacheable) {
		json_object_set_new(r, "ttlMs", json_integer(0));
		json_object_set_new(r, "cacheScope", json_string("private"));
	}
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

/* ------------------------------------------------------------ methods */

static void
discover_answer(struct br_req *rq, json_t *id)
{
	json_t *caps, *sup, *res;
	size_t i;

	caps = br_rpc_caps(br_up_find(rq->br, rq->server));
	sup = json_array();
	if (caps == NULL || sup == NULL) {
		json_decref(caps);
		json_decref(sup);
		br_reply_rpc_error(rq, 500, id, -32603, "Internal error");
		return;
	}
	/* Served otherwise in this revision (per-request logLevel, listen),
	 * neither by the bridge yet: not offered. */
	json_object_del(caps, "logging");
	if (json_is_object(json_object_get(caps, "resources")))
		json_object_del(json_object_get(caps, "resources"),
		    "subscribe");
	for (i = 0; supported[i] != NULL; i++)
		json_array_append_new(sup, json_string(supported[i]));
	/* Served by the bridge itself, whatever the upstream knows. */
	json_object_set_new(caps, "extensions", json_pack("{s:{}}",
	    META_TASKS));
	res = json_pack("{s:o, s:o, s:s}", "supportedVersions", sup,
	    "capabilities", caps, "instructions", BR_INSTRUCTIONS);
	br_reply_rpc_result(rq, id, res);
}

static void
on_caps(void *arg, json_t *msg, const char *err)
{
	struct br_req *rq = arg;

	(void)msg;
	(void)err;
	rq->ureq = NULL;
	discover_answer(rq, rq->rpc_id);
}

/* What the upstream offers is learned from its handshake: a first request
 * waits for it (a ping queued behind it), as initialize does. */
static void
discover(struct br_req *rq, const struct br_rpc *rpc)
{
	struct br_up *u = br_up_find(rq->br, rq->server);

	if (u != NULL && !u->caps_known) {
		rq->rpc_id = json_incref(rpc->id);
		if ((rq->ureq = br_up_request(u, "ping", NULL, on_caps,
		    rq)) != NULL)
			return;
	}
	discover_answer(rq, rpc->id);
}

/* The acknowledgment of listen session s, first on its stream: what its
 * filter asked for, the policy shows and upstream u announces (u's offer
 * known). Those are then the flags notify.c's fan-out reads. */
static int
listen_ack(struct br_session *s, const struct br_up *u)
{
	json_t *ack, *n;

	s->res_ok = s->want_res && u != NULL && u->res_list_changed;
	s->prompts_ok = s->want_prompts && u != NULL &&
	    u->prompts_list_changed;
	ack = json_pack("{s:s, s:s, s:{s:{}}}", "jsonrpc", "2.0", "method",
	    "notifications/subscriptions/acknowledged", "params",
	    "notifications");
	if (ack == NULL)
		return -1;
	n = json_object_get(json_object_get(ack, "params"), "notifications");
	if (s->res_ok)
		json_object_set_new(n, "resourcesListChanged", json_true());
	if (s->prompts_ok)
		json_object_set_new(n, "promptsListChanged", json_true());
	if ((s->notes == NULL && (s->notes = json_array()) == NULL) ||
	    json_array_insert_new(s->notes, 0, ack) == -1) {
		json_decref(ack);
		return -1;
	}
	br_stream_wake(s);
	return 0;
}

static void
on_listen_caps(void *arg, json_t *msg, const char *err)
{
	struct br_req *rq = arg;
	struct br_session *s;

	(void)msg;
	(void)err;
	rq->ureq = NULL;
	/* By id: the stream (and its session) may have ended meanwhile. */
	if ((s = br_session_find(rq->br, rq->session)) != NULL && s->listen &&
	    listen_ack(s, br_up_find(rq->br, rq->server)) == -1)
		br_stream_end(s->stream);
}

/* subscriptions/listen: a session of its own, never named to anyone and
 * ended with its stream (stream.c), so that notify.c's fan-out reaches it
 * like any session. A first request of an upstream that has not told its
 * offer yet gets its stream at once and its acknowledgment once the
 * upstream answers (a ping queued behind its handshake, cancelled if the
 * client goes first: rq->ureq). */
static enum MHD_Result
listen_open(struct br_req *rq, const struct br_rpc *rpc)
{
	json_t *f = json_object_get(json_object_get(rpc->msg, "params"),
	    "notifications");
	struct br_up *u = br_up_find(rq->br, rq->server);
	struct br_session *s;

	if (!json_is_object(f)) {
		br_reply_rpc_error(rq, 400, rpc->id, -32602, "Invalid params: "
		    "notifications must be an object");
		return MHD_YES;
	}
	/* The tasks extension: task notifications only for a client that
	 * declared it (and none is sent: taskIds are not acknowledged). */
	if (json_object_get(f, "taskIds") != NULL && !rq->tasks) {
		br_task_undeclared(rq, rpc->id);
		return MHD_YES;
	}
	if ((s = br_session_new(rq->br, rq, BR_PROTO_MODERN)) == NULL) {
		br_reply_rpc_error(rq, 503, rpc->id, -32603,
		    "Too many subscriptions");
		return MHD_YES;
	}
	s->listen = true;
	s->listen_id = json_incref(rpc->id);
	s->want_res = json_is_true(json_object_get(f,
	    "resourcesListChanged")) && pol_mcp_offers(rq->client.policy,
	    rq->server, false);
	s->want_prompts = json_is_true(json_object_get(f,
	    "promptsListChanged")) && pol_mcp_offers(rq->client.policy,
	    rq->server, true);
	snprintf(rq->session, sizeof(rq->session), "%s", s->id);
	if (u != NULL && !u->caps_known && (rq->ureq = br_up_request(u,
	    "ping", NULL, on_listen_caps, rq)) != NULL)
		return br_stream_open(rq, s);
	if (listen_ack(s, u) == -1) {
		br_session_free(rq->br, s);
		br_reply_rpc_error(rq, 500, rpc->id, -32603, "Internal error");
		return MHD_YES;
	}
	return br_stream_open(rq, s);
}

static bool
served(const char *m)
{
	static const char *const methods[] = { "tools/list", "tools/call",
		"resources/list", "resources/templates/list",
		"resources/read", "prompts/list", "prompts/get",
		"completion/complete", NULL };
	size_t i;

	for (i = 0; methods[i] != NULL; i++)
		if (strcmp(methods[i], m) == 0)
			return true;
	return false;
}

enum MHD_Result
br_modern_dispatch(struct br_req *rq, const struct br_rpc *rpc,
    const struct br_meta_hdrs *h)
{
	struct br_meta_verdict v;
	const char *m = rpc->method;
	const json_t *caps;

	if (br_modern_check(h, rpc->msg, &v) == -1) {
		reply_err(rq, rpc->id, &v);
		return MHD_YES;
	}
	rq->modern = true;
	caps = json_object_get(meta_of(rpc->msg), META_CAPS);
	if (json_object_get(caps, "sampling") != NULL)
		rq->sreq_caps |= 1u << POL_SREQ_SAMPLING;
	if (json_object_get(caps, "elicitation") != NULL)
		rq->sreq_caps |= 1u << POL_SREQ_ELICITATION;
	if (json_object_get(caps, "roots") != NULL)
		rq->sreq_caps |= 1u << POL_SREQ_ROOTS;
	rq->tasks = br_task_declared(caps);
	if (rpc->kind != BR_RPC_REQUEST) {
		/* None is defined over HTTP in this revision; accepted. */
		br_req_reply(rq, 202, NULL, NULL);
		return MHD_YES;
	}
	/* CacheableResult (caching.mdx): the lists, a read, discover. */
	rq->cacheable = strcmp(m, "server/discover") == 0 ||
	    strcmp(m, "resources/read") == 0 ||
	    (strstr(m, "/list") != NULL && strcmp(m, "subscriptions/listen") !=
	    0);
	if (strcmp(m, "server/discover") == 0)
		discover(rq, rpc);
	else if (strcmp(m, "subscriptions/listen") == 0)
		return listen_open(rq, rpc);
	else if (br_task_method(m))
		br_task_request(rq, rpc);
	else if (served(m)) {
		/* A retry of a call held for its client's input resumes
		 * that call (srvreq.c); anything else is a new request. */
		if ((strcmp(m, "tools/call") != 0 && strcmp(m, "prompts/get") !=
		    0 && strcmp(m, "resources/read") != 0) ||
		    !br_srvreq_retry(rq, rpc))
			br_rpc_request(rq, rpc);
	} else
		br_reply_rpc_error(rq, 404, rpc->id, -32601,
		    "Method not found");
	return MHD_YES;
}

void
br_modern_tag(const struct br_session *s, json_t *note)
{
	json_t *p, *meta;

	if (s->listen_id == NULL)
		return;
	if (!json_is_object(p = json_object_get(note, "params"))) {
		p = json_object();
		json_object_set_new(note, "params", p);
	}
	if (!json_is_object(meta = json_object_get(p, "_meta"))) {
		meta = json_object();
		json_object_set_new(p, "_meta", meta);
	}
	json_object_set(meta, META_SUBID, s->listen_id);
}
