/*
 * logging: `logging/setLevel` and the upstream's `notifications/message`
 * (server/utilities/logging.mdx). One upstream serves every session of its
 * server, so the level it is asked for is the most verbose any of those
 * sessions set, and each session then gets only the messages at or above
 * its own level. A session that never set a level gets none (the spec
 * lets a server choose; the bridge chooses silence). A message is rebuilt
 * from the fields the specification gives it, bounded, queued like the
 * other notifications (notify.c) and redacted under the receiving
 * session's policy when it is delivered; one that cannot be redacted is
 * dropped, never passed as it came.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"

#define LOGGER_MAX	128
#define LOG_DATA_MAX	(16 * 1024)	/* data as compact JSON text */

/* RFC 5424 severities as MCP names them, most verbose first. */
static const char *const levels[] = {
	"debug", "info", "notice", "warning", "error", "critical", "alert",
	"emergency", NULL
};

const char *
br_str_bounded(const json_t *v, size_t max)
{
	if (!json_is_string(v) || json_string_length(v) > max ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return NULL;
	return json_string_value(v);
}

int
br_logging_level(const json_t *v)
{
	size_t i;

	if (!json_is_string(v))
		return -1;
	for (i = 0; levels[i] != NULL; i++)
		if (strcmp(json_string_value(v), levels[i]) == 0)
			return (int)i;
	return -1;
}

static void
on_set(void *arg, json_t *msg, const char *err)
{
	struct br_req *rq = arg;

	(void)err;
	rq->ureq = NULL;
	if (msg == NULL || !json_is_object(json_object_get(msg, "result"))) {
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32603,
		    "The upstream server refused the logging level");
		return;
	}
	br_reply_rpc_result(rq, rq->rpc_id, json_object());
}

void
br_logging_set(struct br_req *rq, const struct br_rpc *rpc)
{
	json_t *params = json_object_get(rpc->msg, "params");
	struct br_session *s = br_session_find(rq->br, rq->session);
	struct br_up *u = br_up_find(rq->br, rq->server);
	struct br_session *o;
	int lv = br_logging_level(json_object_get(params, "level")), min;

	if (lv == -1) {
		br_reply_rpc_error(rq, 200, rpc->id, -32602,
		    "Invalid params: level must be one of debug, info, "
		    "notice, warning, error, critical, alert, emergency");
		return;
	}
	if (s == NULL || u == NULL || (u->caps_known && !u->has_logging)) {
		br_reply_rpc_error(rq, 200, rpc->id, -32601,
		    "Method not found");
		return;
	}
	s->log_level = lv;
	min = lv;
	TAILQ_FOREACH(o, &rq->br->sessions, entry)
		if (strcmp(o->server, s->server) == 0 && o->log_level >= 0 &&
		    o->log_level < min)
			min = o->log_level;
	rq->rpc_id = json_incref(rpc->id);
	if ((rq->ureq = br_up_request(u, "logging/setLevel", json_pack(
	    "{s:s}", "level", levels[min]), on_set, rq)) == NULL)
		br_reply_rpc_error(rq, 500, rpc->id, -32603, "Internal error");
}

json_t *
br_logging_note(const json_t *msg, int *level)
{
	const json_t *p = json_object_get(msg, "params");
	const json_t *logger = json_object_get(p, "logger");
	const json_t *data = json_object_get(p, "data");
	json_t *out;
	char *t;
	size_t n;

	if ((*level = br_logging_level(json_object_get(p, "level"))) == -1 ||
	    data == NULL)
		return NULL;
	if (logger != NULL && br_str_bounded(logger, LOGGER_MAX) == NULL)
		return NULL;
	if ((t = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL)
		return NULL;
	n = strlen(t);
	free(t);
	if (n > LOG_DATA_MAX)
		return NULL;
	out = json_pack("{s:s, s:s, s:{s:s, s:O}}", "jsonrpc", "2.0",
	    "method", "notifications/message", "params", "level",
	    levels[*level], "data", data);
	if (out != NULL && logger != NULL)
		json_object_set(json_object_get(out, "params"), "logger",
		    (json_t *)logger);
	return out;
}

int
br_logging_redact(struct br *br, const struct pol_policy *p, json_t *note)
{
	const char *m = json_string_value(json_object_get(note, "method"));
	json_t *params = json_object_get(note, "params");
	json_t *tmp;
	int rc;

	if (m != NULL && strcmp(m, "notifications/progress") == 0 &&
	    json_object_get(params, "message") != NULL) {
		/* The message is the upstream's text: as a result's. */
		if ((tmp = json_pack("{s:O}", "text", json_object_get(params,
		    "message"))) == NULL)
			return -1;
		rc = br_result_process(br, p, tmp, NULL, NULL);
		if (rc != -1 && json_object_set(params, "message",
		    json_object_get(tmp, "text")) == -1)
			rc = -1;
		json_decref(tmp);
		return rc == -1 ? -1 : 0;
	}
	if (m == NULL || strcmp(m, "notifications/message") != 0)
		return 0;
	/* As a tool result is: every string redacted, a secret in a key or
	 * in what cannot be rewritten withholds it. The data goes under a
	 * key of its own, so that a string of it is text, not a payload. */
	if ((tmp = json_pack("{s:O}", "value", json_object_get(params,
	    "data"))) == NULL)
		return -1;
	if (json_object_get(params, "logger") != NULL)
		json_object_set(tmp, "logger", json_object_get(params,
		    "logger"));
	rc = br_result_process(br, p, tmp, NULL, NULL);
	if (rc != -1 && (json_object_set(params, "data", json_object_get(tmp,
	    "value")) == -1 || (json_object_get(tmp, "logger") != NULL &&
	    json_object_set(params, "logger", json_object_get(tmp,
	    "logger")) == -1)))
		rc = -1;
	json_decref(tmp);
	return rc == -1 ? -1 : 0;
}
