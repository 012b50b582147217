/*
 * notify: what an upstream tells the sessions of its server, and what the
 * bridge offers them because of it. An upstream is shared by every session
 * of its server, so its notifications are fanned out here: a resource's
 * update only to the sessions subscribed to that URI (which the policy
 * showed them when they subscribed), a list change only to sessions whose
 * policy opens resources or prompts of that server. Each is rebuilt from
 * the fields the specification gives it (nothing else of the upstream's
 * message passes), queued per session (at most BR_NOTES_MAX, duplicates
 * folded) and delivered at once on the session's GET stream when it has
 * one (stream.c), else before the session's next answer, on an event
 * stream (transports.mdx allows a server's messages before the response
 * on a POST's stream). The capabilities a session is offered at
 * initialize are the upstream's, as far as the bridge forwards them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"

#define NOTE_URI_MAX	2048

void
br_up_caps(struct br_up *u, const json_t *caps)
{
	const json_t *r = json_object_get(caps, "resources");
	const json_t *p = json_object_get(caps, "prompts");

	u->caps_known = true;
	u->has_resources = json_is_object(r);
	u->res_subscribe = json_is_true(json_object_get(r, "subscribe"));
	u->res_list_changed = json_is_true(json_object_get(r, "listChanged"));
	u->has_prompts = json_is_object(p);
	u->prompts_list_changed = json_is_true(json_object_get(p,
	    "listChanged"));
	u->has_logging = json_is_object(json_object_get(caps, "logging"));
	u->has_completions = json_is_object(json_object_get(caps,
	    "completions"));
}

json_t *
br_rpc_caps(const struct br_up *u)
{
	json_t *o;

	o = json_pack("{s:{s:b}}", "tools", "listChanged", 0);
	if (o == NULL || u == NULL || !u->caps_known)
		return o;
	if (u->has_resources)
		json_object_set_new(o, "resources", json_pack("{s:b, s:b}",
		    "subscribe", u->res_subscribe, "listChanged",
		    u->res_list_changed));
	if (u->has_prompts)
		json_object_set_new(o, "prompts", json_pack("{s:b}",
		    "listChanged", u->prompts_list_changed));
	if (u->has_logging)
		json_object_set_new(o, "logging", json_object());
	if (u->has_completions)
		json_object_set_new(o, "completions", json_object());
	return o;
}

/* Queue note (stolen) for s, unless an equal one waits already or the
 * queue is full (a session that never asks anything cannot make us hold
 * more). */
static void
queue(struct br_session *s, json_t *note)
{
	size_t before = json_array_size(s->notes);

	json_t *o;
	size_t i;

	if (note == NULL)
		return;
	if (s->notes == NULL && (s->notes = json_array()) == NULL) {
		json_decref(note);
		return;
	}
	json_array_foreach(s->notes, i, o)
		if (json_equal(o, note))
			break;
	if (i < json_array_size(s->notes) ||
	    json_array_size(s->notes) >= BR_NOTES_MAX)
		json_decref(note);
	else
		(void)json_array_append_new(s->notes, note);
	/* A session listening on its GET stream hears it now. */
	if (json_array_size(s->notes) > before)
		br_stream_wake(s);
}

void
br_notify_upstream(struct br_up *u, const char *method, json_t *msg)
{
	struct br_session *s;
	const json_t *uri = json_object_get(json_object_get(msg, "params"),
	    "uri");
	bool updated = strcmp(method, "notifications/resources/updated") == 0;
	bool rlist = strcmp(method,
	    "notifications/resources/list_changed") == 0;
	bool plist = strcmp(method,
	    "notifications/prompts/list_changed") == 0;
	bool log = strcmp(method, "notifications/message") == 0;
	json_t *note = NULL;
	const char *sid = NULL;
	int level = -1;

	if (strcmp(method, "notifications/progress") == 0) {
		if ((note = br_progress_note(u, msg, &sid)) != NULL &&
		    (s = br_session_find(u->br, sid)) != NULL)
			queue(s, note);
		else
			json_decref(note);
		return;
	}
	if (log) {
		if ((note = br_logging_note(msg, &level)) == NULL)
			return;
		TAILQ_FOREACH(s, &u->br->sessions, entry)
			if (strcmp(s->server, u->srv->name) == 0 &&
			    s->log_level >= 0 && level >= s->log_level)
				queue(s, json_deep_copy(note));
		json_decref(note);
		return;
	}
	if (!updated && !rlist && !plist)
		return;
	if (updated && (!json_is_string(uri) || json_string_length(uri) >
	    NOTE_URI_MAX || strlen(json_string_value(uri)) !=
	    json_string_length(uri)))
		return;
	TAILQ_FOREACH(s, &u->br->sessions, entry) {
		if (strcmp(s->server, u->srv->name) != 0)
			continue;
		if (updated && json_object_get(s->subs,
		    json_string_value(uri)) != NULL)
			queue(s, json_pack("{s:s, s:s, s:{s:O}}", "jsonrpc",
			    "2.0", "method", method, "params", "uri", uri));
		else if ((rlist && s->res_ok) || (plist && s->prompts_ok))
			queue(s, json_pack("{s:s, s:s}", "jsonrpc", "2.0",
			    "method", method));
	}
}

char *
br_notes_events(struct br *br, struct br_session *s,
    const struct pol_policy *p)
{
	json_t *o;
	char *out = NULL, *t, *n;
	size_t i;

	if (json_array_size(s->notes) == 0)
		return NULL;
	json_array_foreach(s->notes, i, o) {
		/* A log message is redacted for this session's policy; one
		 * that cannot be is not sent. */
		if (br_logging_redact(br, p, o) == -1)
			continue;
		br_modern_tag(s, o);
		t = json_dumps(o, JSON_COMPACT);
		if (t == NULL || asprintf(&n, "%sevent: message\ndata: %s\n\n",
		    out != NULL ? out : "", t) == -1) {
			free(t);
			free(out);
			return NULL;
		}
		free(t);
		free(out);
		out = n;
	}
	json_array_clear(s->notes);
	/* Every one withheld: nothing to send, and nothing waits. */
	return out;
}

char *
br_session_take_notes(struct br *br, const char *sid,
    const struct pol_policy *p, const char *body)
{
	struct br_session *s = br_session_find(br, sid);
	char *ev, *n;

	if (s == NULL || json_array_size(s->notes) == 0)
		return NULL;
	if ((ev = br_notes_events(br, s, p)) == NULL)
		return NULL;
	if (asprintf(&n, "%sevent: message\ndata: %s\n\n", ev, body) == -1)
		n = NULL;
	free(ev);
	return n;
}
