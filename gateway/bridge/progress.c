/*
 * progress: `notifications/progress` for calls in flight
 * (basic/utilities/progress.mdx). One upstream serves every session of its
 * server, so a client's progressToken cannot be passed on as it is (two
 * sandboxes could choose the same one, or one could choose another's): a
 * call that brings a token is forwarded with a random one of the bridge's,
 * and the upstream's progress under that token goes back, with the
 * client's token, to the session of that call only, while it is in
 * flight. Each is rebuilt from progress, total and message (bounded; the
 * message redacted on delivery), and progress that does not increase is
 * dropped, as the specification requires it to increase.
 */
#include <string.h>

#include "gateway/bridge/br_int.h"

#define TOKEN_MAX	128
#define MESSAGE_MAX	1024

void
br_progress_take(struct br_call *c, const json_t *params)
{
	const json_t *t = json_object_get(json_object_get(params, "_meta"),
	    "progressToken");

	if (json_is_integer(t) || (json_is_string(t) &&
	    json_string_length(t) > 0 && br_str_bounded(t, TOKEN_MAX) !=
	    NULL)) {
		if (br_random_hex(c->ptoken_up, 16) == 0)
			c->ptoken = json_deep_copy(t);
	}
}

void
br_progress_forward(const struct br_call *c, json_t *params)
{
	if (c->ptoken != NULL && params != NULL)
		json_object_set_new(params, "_meta", json_pack("{s:s}",
		    "progressToken", c->ptoken_up));
}

json_t *
br_progress_note(struct br_up *u, const json_t *msg, const char **sid)
{
	const json_t *p = json_object_get(msg, "params");
	const char *tok = json_string_value(json_object_get(p,
	    "progressToken"));
	const json_t *prog = json_object_get(p, "progress");
	const json_t *total = json_object_get(p, "total");
	const json_t *m = json_object_get(p, "message");
	struct br_call *c;
	json_t *out;

	if (tok == NULL || !json_is_number(prog) || (total != NULL &&
	    !json_is_number(total)) || (m != NULL &&
	    br_str_bounded(m, MESSAGE_MAX) == NULL))
		return NULL;
	TAILQ_FOREACH(c, &u->br->calls, all)
		if (c->up == u && c->ptoken != NULL &&
		    c->state == CALL_FORWARDED && c->req != NULL &&
		    strcmp(c->ptoken_up, tok) == 0)
			break;
	if (c == NULL || (c->psent && json_number_value(prog) <=
	    c->plast))
		return NULL;
	out = json_pack("{s:s, s:s, s:{s:O, s:O}}", "jsonrpc", "2.0",
	    "method", "notifications/progress", "params", "progressToken",
	    c->ptoken, "progress", prog);
	if (out == NULL)
		return NULL;
	if (total != NULL)
		json_object_set(json_object_get(out, "params"), "total",
		    (json_t *)total);
	if (m != NULL)
		json_object_set(json_object_get(out, "params"), "message",
		    (json_t *)m);
	c->psent = true;
	c->plast = json_number_value(prog);
	*sid = c->session;
	return out;
}
