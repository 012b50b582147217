/*
 * resources: MCP resources through the bridge. A resource is data an agent
 * reads without calling a tool, so a read takes the path of a call (call.c
 * with br_kind_resource): the pure decision of policy/ on its URI
 * (pol_resource_decide), `ask` through the approvals, budgets, result
 * limits, taint, redaction of every text and of every blob (decoded,
 * redacted, encoded again) and a durable mcp.resource record before the
 * sandbox sees a byte. Contents the upstream returns under a URI the
 * policy does not show are dropped. Listings (resources, templates, and
 * prompts through prompts.c) are forwarded page by page: the upstream's
 * cursor passes through and each page is filtered on its own, so an
 * agent pages exactly as it would without Sluice. Subscriptions are kept
 * per session (notify.c delivers the updates) and only for URIs the
 * policy shows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "gateway/bridge/br_int.h"

#define CURSOR_MAX	1024
#define URI_MAX		2048
#define PAGE_ITEMS_MAX	BR_TOOLS_MAX

/* ------------------------------------------------------------ listings */

static bool
resource_listed(const struct br_req *rq, const char *uri)
{
	enum pol_reason why;

	return pol_resource_visible(rq->client.policy, rq->server, uri, false,
	    &why);
}

static bool
template_listed(const struct br_req *rq, const char *tmpl)
{
	enum pol_reason why;

	return pol_resource_visible(rq->client.policy, rq->server, tmpl, true,
	    &why);
}

const struct br_list_kind br_list_resources = {
	"resources/list", "resources", "uri", false, resource_listed
};
const struct br_list_kind br_list_templates = {
	"resources/templates/list", "resourceTemplates", "uriTemplate", false,
	template_listed
};

/* A string member the bridge passes on: not empty, no NUL inside, at
 * most max. */
static const char *
plain_string(const json_t *v, size_t max)
{
	const char *s = br_str_bounded(v, max);

	return s != NULL && *s != '\0' ? s : NULL;
}

static void
on_page(void *arg, json_t *msg, const char *err)
{
	struct br_req *rq = arg;
	const struct br_list_kind *k = rq->list;
	json_t *res, *items, *out, *it, *next, *o;
	const char *name, *cur;
	size_t i;

	(void)err;
	rq->ureq = NULL;
	res = json_object_get(msg, "result");
	items = json_object_get(res, k->key);
	if (msg != NULL && json_is_object(json_object_get(msg, "error"))) {
		/* Its own message is the upstream's text: not passed on. */
		br_reply_rpc_error(rq, 200, rq->rpc_id, json_is_integer(
		    json_object_get(json_object_get(msg, "error"), "code")) &&
		    json_integer_value(json_object_get(json_object_get(msg,
		    "error"), "code")) == -32602 ? -32602 : -32603,
		    "The upstream server refused the listing");
		return;
	}
	if (!json_is_array(items) || json_array_size(items) >
	    PAGE_ITEMS_MAX) {
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32603,
		    "The upstream server is not available");
		return;
	}
	if ((out = json_array()) == NULL)
		goto fail;
	json_array_foreach(items, i, it) {
		name = plain_string(json_object_get(it, k->what), URI_MAX);
		/* A definition carrying a held credential is never shown. */
		if (name == NULL || !k->visible(rq, name) ||
		    br_def_holds_credential(rq->br, it))
			continue;
		if (json_array_append(out, it) == -1) {
			json_decref(out);
			goto fail;
		}
	}
	if ((o = json_pack("{s:o}", k->key, out)) == NULL)
		goto fail;
	next = json_object_get(res, "nextCursor");
	cur = plain_string(next, CURSOR_MAX);
	if (cur != NULL && !br_holds_credential(rq->br, cur))
		json_object_set(o, "nextCursor", next);
	else if (next != NULL && !json_is_null(next)) {
		/* A page that cannot say where the next one is ends the
		 * listing short: say so rather than pretend it is whole. */
		json_decref(o);
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32603,
		    "The upstream server's cursor is unusable");
		return;
	}
	br_reply_rpc_result(rq, rq->rpc_id, o);
	return;
fail:
	br_reply_rpc_error(rq, 500, rq->rpc_id, -32603, "Internal error");
}

void
br_list_forward(struct br_req *rq, const struct br_rpc *rpc,
    const struct br_list_kind *k)
{
	json_t *params = json_object_get(rpc->msg, "params");
	json_t *cur = json_object_get(params, "cursor"), *p = NULL;
	struct br_up *u = br_up_find(rq->br, rq->server);

	if (cur != NULL && plain_string(cur, CURSOR_MAX) == NULL) {
		br_reply_rpc_error(rq, 200, rpc->id, -32602,
		    "Invalid params: cursor must be a string of at most 1024 "
		    "bytes");
		return;
	}
	rq->rpc_id = json_incref(rpc->id);
	rq->list = k;
	if ((cur != NULL && (p = json_pack("{s:O}", "cursor", cur)) ==
	    NULL) || (rq->ureq = br_up_request(u, k->method, p, on_page,
	    rq)) == NULL)
		br_reply_rpc_error(rq, 500, rpc->id, -32603,
		    "Internal error");
}

/* ------------------------------------------------------------ reads */

static void
resource_decide(const struct br_call *c, const struct pol_tool_q *q,
    struct pol_tool_decision *out)
{
	const struct pol_resource_q rq = { .server = q->server,
	    .uri = q->tool, .budgets = q->budgets, .nbudgets = q->nbudgets };

	pol_resource_decide(c->client.policy, &rq, out);
}

/* The blob of content item it, decoded, redacted and encoded again when
 * anything matched. The count, or -1 (not base64, no memory, a redaction
 * that failed): withhold. */
static int
blob_redact(struct br *br, const struct pol_policy *p, json_t *it)
{
	json_t *blob = json_object_get(it, "blob");
	const char *b64 = json_string_value(blob);
	size_t len = json_string_length(blob), rlen;
	unsigned char *raw;
	char *red = NULL, *enc;
	int n, k;

	if (b64 == NULL || len % 4 != 0 || len > BR_LINE_MAX ||
	    (raw = malloc(len / 4 * 3 + 1)) == NULL)
		return -1;
	if ((n = EVP_DecodeBlock(raw, (const unsigned char *)b64,
	    (int)len)) < 0) {
		free(raw);
		return -1;
	}
	/* EVP_DecodeBlock counts the padding's bytes too. */
	if (len > 0 && b64[len - 1] == '=')
		n--;
	if (len > 1 && b64[len - 2] == '=')
		n--;
	k = br_redact_bytes(br, p, (const char *)raw, (size_t)n, &red, &rlen);
	free(raw);
	if (k <= 0)
		return k;
	if ((enc = malloc(4 * ((rlen + 2) / 3) + 1)) == NULL) {
		free(red);
		return -1;
	}
	EVP_EncodeBlock((unsigned char *)enc, (const unsigned char *)red,
	    (int)rlen);
	free(red);
	k = json_object_set_new(it, "blob", json_string(enc)) == -1 ? -1 : k;
	free(enc);
	return k;
}

static int
resource_process(struct br_call *c, json_t *result, char **text)
{
	json_t *contents = json_object_get(result, "contents"), *it;
	const char *uri;
	enum pol_reason why;
	size_t i;
	int n = 0, k;

	/* A read's result has no isError: one would turn it into a
	 * refusal (call.c). */
	json_object_del(result, "isError");
	if (!json_is_array(contents))
		return -1;
	for (i = 0; i < json_array_size(contents); ) {
		it = json_array_get(contents, i);
		uri = plain_string(json_object_get(it, "uri"), URI_MAX);
		/* What comes back under a URI the policy does not show is
		 * not the sandbox's to read. */
		if (!json_is_object(it) || uri == NULL ||
		    !pol_resource_visible(c->client.policy, c->up->srv->name,
		    uri, false, &why)) {
			json_array_remove(contents, i);
			continue;
		}
		if (json_object_get(it, "blob") != NULL) {
			if ((k = blob_redact(c->br, c->client.policy, it)) ==
			    -1)
				return -1;
			n += k;
		}
		i++;
	}
	if ((k = br_result_process(c->br, c->client.policy, result, NULL,
	    text)) == -1)
		return -1;
	return n + k;
}

const struct br_call_kind br_kind_resource = {
	"resources/read", "uri", URI_MAX, false, BR_EV_RESOURCE, -32002,
	resource_decide, resource_process
};

/* ------------------------------------------------------------ subscriptions */

static void
on_subscribed(void *arg, json_t *msg, const char *err)
{
	struct br_req *rq = arg;
	struct br_session *s = br_session_find(rq->br, rq->session);

	(void)err;
	rq->ureq = NULL;
	if (msg == NULL || !json_is_object(json_object_get(msg, "result"))) {
		/* Not held upstream: not held here either. */
		if (s != NULL && rq->cursor != NULL)
			json_object_del(s->subs, rq->cursor);
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32603,
		    "The upstream server refused the subscription");
		return;
	}
	br_reply_rpc_result(rq, rq->rpc_id, json_object());
}

static void
on_unsubscribed(void *arg, json_t *msg, const char *err)
{
	(void)msg;
	(void)err;
	if (arg != NULL) {
		((struct br_req *)arg)->ureq = NULL;
		br_reply_rpc_result(arg, ((struct br_req *)arg)->rpc_id,
		    json_object());
	}
}

/* Does a session of server other than s hold uri? */
static bool
held_elsewhere(struct br *br, const struct br_session *s, const char *uri)
{
	struct br_session *o;

	TAILQ_FOREACH(o, &br->sessions, entry)
		if (o != s && strcmp(o->server, s->server) == 0 &&
		    json_object_get(o->subs, uri) != NULL)
			return true;
	return false;
}

void
br_subs_drop(struct br *br, struct br_session *s)
{
	struct br_up *u;
	const char *uri;
	json_t *v;

	/* Closing, the upstreams go first (and their subscriptions with
	 * them). */
	if (br->closing || (u = br_up_find(br, s->server)) == NULL)
		return;
	json_object_foreach(s->subs, uri, v)
		if (!held_elsewhere(br, s, uri))
			(void)br_up_request(u, "resources/unsubscribe",
			    json_pack("{s:s}", "uri", uri), on_unsubscribed,
			    NULL);
}

void
br_subscribe(struct br_req *rq, const struct br_rpc *rpc, bool on)
{
	json_t *params = json_object_get(rpc->msg, "params");
	const char *uri = plain_string(json_object_get(params, "uri"),
	    URI_MAX);
	struct br_session *s = br_session_find(rq->br, rq->session);
	struct br_up *u = br_up_find(rq->br, rq->server);
	enum pol_reason why;

	if (uri == NULL) {
		br_reply_rpc_error(rq, 200, rpc->id, -32602,
		    "Invalid params: uri must be a string");
		return;
	}
	if (s == NULL || (u->caps_known && !u->res_subscribe)) {
		br_reply_rpc_error(rq, 200, rpc->id, -32601,
		    "Method not found");
		return;
	}
	if (!on) {
		if (json_object_get(s->subs, uri) == NULL) {
			br_reply_rpc_error(rq, 200, rpc->id, -32602,
			    "Invalid params: not subscribed to this URI");
			return;
		}
		json_object_del(s->subs, uri);
		rq->rpc_id = json_incref(rpc->id);
		if (held_elsewhere(rq->br, s, uri) || (rq->ureq =
		    br_up_request(u, "resources/unsubscribe", json_pack(
		    "{s:s}", "uri", uri), on_unsubscribed, rq)) == NULL)
			br_reply_rpc_result(rq, rpc->id, json_object());
		return;
	}
	if (!pol_resource_visible(rq->client.policy, rq->server, uri, false,
	    &why)) {
		br_reply_rpc_error(rq, 200, rpc->id, -32002,
		    why == POL_REASON_BAD_URI ? "The resource URI is not one "
		    "Sluice accepts." : "The policy does not allow this "
		    "resource.");
		return;
	}
	if (s->subs == NULL && (s->subs = json_object()) == NULL) {
		br_reply_rpc_error(rq, 500, rpc->id, -32603, "Internal error");
		return;
	}
	if (json_object_get(s->subs, uri) == NULL &&
	    json_object_size(s->subs) >= BR_SUBS_MAX) {
		br_reply_rpc_error(rq, 200, rpc->id, -32603,
		    "Too many subscriptions in this session");
		return;
	}
	rq->rpc_id = json_incref(rpc->id);
	if (json_object_set_new(s->subs, uri, json_true()) == -1 ||
	    (rq->cursor = strdup(uri)) == NULL ||
	    (rq->ureq = br_up_request(u, "resources/subscribe",
	    json_pack("{s:s}", "uri", uri), on_subscribed, rq)) == NULL) {
		json_object_del(s->subs, uri);
		br_reply_rpc_error(rq, 500, rpc->id, -32603, "Internal error");
	}
}
