/*
 * completion: `completion/complete` (server/utilities/completion.mdx)
 * through the bridge. A completion names a prompt or a resource template
 * and returns values the upstream suggests for one of its arguments, so it
 * is forwarded only for a prompt or template the sandbox's policy shows
 * (what its lists show: a rule that allows or asks); anything else is
 * -32602 and never reaches the upstream. The request is rebuilt from the
 * fields the specification gives it, each bounded, and so is the answer:
 * at most 100 string values, redacted like a tool result.
 */
#include <string.h>

#include "gateway/bridge/br_int.h"

#define NAME_MAX_LEN	128
#define URI_MAX_LEN	2048
#define VALUE_MAX_LEN	1024
#define VALUES_MAX	100	/* completion.mdx: at most 100 */
#define CONTEXT_MAX	16	/* context.arguments entries */

static void
on_complete(void *arg, json_t *msg, const char *err)
{
	struct br_req *rq = arg;
	const json_t *c = json_object_get(json_object_get(msg, "result"),
	    "completion");
	const json_t *vals = json_object_get(c, "values");
	const json_t *v;
	json_t *out, *arr;
	size_t i;

	(void)err;
	rq->ureq = NULL;
	if (!json_is_array(vals)) {
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32603,
		    "The upstream server did not complete");
		return;
	}
	if ((arr = json_array()) == NULL)
		goto fail;
	json_array_foreach(vals, i, v)
		if (json_array_size(arr) < VALUES_MAX &&
		    br_str_bounded(v, VALUE_MAX_LEN) != NULL)
			json_array_append(arr, (json_t *)v);
	if ((out = json_pack("{s:{s:o}}", "completion", "values", arr)) ==
	    NULL)
		goto fail;
	v = json_object_get(c, "total");
	if (json_is_integer(v) && json_integer_value(v) >= 0)
		json_object_set(json_object_get(out, "completion"), "total",
		    (json_t *)v);
	v = json_object_get(c, "hasMore");
	if (json_is_boolean(v))
		json_object_set(json_object_get(out, "completion"), "hasMore",
		    (json_t *)v);
	if (br_result_process(rq->br, rq->client.policy, out, NULL, NULL) ==
	    -1) {
		json_decref(out);
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32603,
		    "The completion was withheld: it could not be redacted");
		return;
	}
	br_reply_rpc_result(rq, rq->rpc_id, out);
	return;
fail:
	br_reply_rpc_error(rq, 500, rq->rpc_id, -32603, "Internal error");
}

/* Is ref (validated) shown to rq's sandbox? */
static bool
ref_shown(struct br_req *rq, const char *type, const char *key)
{
	const char *keys[BR_MAX_LABELS], *vals[BR_MAX_LABELS];
	struct pol_tool_q q;
	enum pol_reason why;

	if (strcmp(type, "ref/resource") == 0)
		return pol_resource_visible(rq->client.policy, rq->server,
		    key, true, &why);
	br_client_q(&rq->client, keys, vals, &q);
	q.server = rq->server;
	q.tool = key;
	return pol_prompt_visible_q(rq->client.policy, &q, &why);
}

/* context.arguments rebuilt (a new object), or NULL when malformed;
 * *none when there is no context. */
static json_t *
context_args(const json_t *ctx, bool *none)
{
	const json_t *a = json_object_get(ctx, "arguments");
	const char *k;
	json_t *v, *out;

	*none = ctx == NULL || a == NULL;
	if (*none)
		return ctx == NULL || json_is_object(ctx) ? json_object() :
		    NULL;
	if (!json_is_object(ctx) || !json_is_object(a) ||
	    json_object_size(a) > CONTEXT_MAX || (out = json_object()) == NULL)
		return NULL;
	json_object_foreach((json_t *)a, k, v) {
		if (strlen(k) > NAME_MAX_LEN ||
		    br_str_bounded(v, VALUE_MAX_LEN) == NULL) {
			json_decref(out);
			return NULL;
		}
		json_object_set(out, k, v);
	}
	return out;
}

void
br_complete(struct br_req *rq, const struct br_rpc *rpc)
{
	json_t *params = json_object_get(rpc->msg, "params");
	json_t *ref = json_object_get(params, "ref");
	json_t *arg = json_object_get(params, "argument");
	const char *type = br_str_bounded(json_object_get(ref, "type"), 16);
	const char *key = NULL, *aname, *aval;
	struct br_up *u = br_up_find(rq->br, rq->server);
	json_t *cargs, *p;
	bool none, prompt;

	prompt = type != NULL && strcmp(type, "ref/prompt") == 0;
	if (prompt)
		key = br_str_bounded(json_object_get(ref, "name"), NAME_MAX_LEN);
	else if (type != NULL && strcmp(type, "ref/resource") == 0)
		key = br_str_bounded(json_object_get(ref, "uri"), URI_MAX_LEN);
	aname = br_str_bounded(json_object_get(arg, "name"), NAME_MAX_LEN);
	aval = br_str_bounded(json_object_get(arg, "value"), VALUE_MAX_LEN);
	if (key == NULL || aname == NULL || aval == NULL) {
		br_reply_rpc_error(rq, 200, rpc->id, -32602, "Invalid params: "
		    "ref must be a ref/prompt with a name or a ref/resource "
		    "with a uri, argument a name and a value (strings)");
		return;
	}
	if ((cargs = context_args(json_object_get(params, "context"),
	    &none)) == NULL) {
		br_reply_rpc_error(rq, 200, rpc->id, -32602, "Invalid params: "
		    "context.arguments must map names to strings");
		return;
	}
	if (u == NULL || (u->caps_known && !u->has_completions)) {
		json_decref(cargs);
		br_reply_rpc_error(rq, 200, rpc->id, -32601,
		    "Method not found");
		return;
	}
	if (!ref_shown(rq, type, key)) {
		json_decref(cargs);
		br_reply_rpc_error(rq, 200, rpc->id, -32602, prompt ?
		    "The policy does not allow completion for this prompt." :
		    "The policy does not allow completion for this "
		    "resource.");
		return;
	}
	p = json_pack("{s:{s:s, s:s}, s:{s:s, s:s}}", "ref", "type", type,
	    prompt ? "name" : "uri", key, "argument", "name", aname, "value",
	    aval);
	if (p != NULL && !none)
		json_object_set_new(p, "context", json_pack("{s:O}",
		    "arguments", cargs));
	json_decref(cargs);
	rq->rpc_id = json_incref(rpc->id);
	if (p == NULL || (rq->ureq = br_up_request(u, "completion/complete",
	    p, on_complete, rq)) == NULL)
		br_reply_rpc_error(rq, 500, rpc->id, -32603, "Internal error");
}
