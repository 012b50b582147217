/*
 * srvreq: requests an upstream makes of the agent's client
 * (client/sampling.mdx, client/elicitation.mdx, client/roots.mdx). One
 * upstream serves every session of its server, so such a request is owned
 * by the one call in flight to that upstream, and it is decided with that
 * call's sandbox policy (pol_server_request, mcp.server_requests): with no
 * call, or several it could belong to, nobody's policy can let it through
 * and it is refused. The upstream gets its answer at once; what it asked
 * (bounded, or only its digest when the policy wants digests) is recorded
 * as mcp.server_request, tied to the call by the detail. The bridge does
 * not carry a request to the client: one the policy allows or would ask
 * about is refused too, recorded as not forwarded, so the record says
 * what the policy would have let through.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"

#define ASKED_MAX	4096	/* bytes of params kept in a record */
#define SREQ_PER_CALL	16	/* recorded per call; more are refused
				   unrecorded, counted in the log */

static const struct {
	const char		*method;
	enum pol_sreq_kind	 kind;
} kinds[] = {
	{ "sampling/createMessage",	POL_SREQ_SAMPLING },
	{ "elicitation/create",		POL_SREQ_ELICITATION },
	{ "roots/list",			POL_SREQ_ROOTS },
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

void
br_srvreq_take(struct br_up *u, json_t *msg)
{
	const char *method = json_string_value(json_object_get(msg,
	    "method"));
	json_t *id = json_object_get(msg, "id");
	json_t *params = json_object_get(msg, "params");
	struct br_event ev;
	struct br_call *c;
	enum pol_verdict v = POL_DENY;
	char *asked = NULL, digest[72], detail[128];
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(method, kinds[i].method) == 0)
			break;
	if (i == sizeof(kinds) / sizeof(kinds[0])) {
		/* Nothing else is the client's to answer through us. */
		answer_error(u, id, -32601, "Method not found");
		return;
	}
	answer_error(u, id, -32601, "Not supported by the client");

	c = owner(u);
	if (c != NULL && c->sreqs >= SREQ_PER_CALL) {
		log_warnx("%s: %s refused unrecorded: over %u in one call",
		    u->srv->name, method, SREQ_PER_CALL);
		return;
	}
	if (c != NULL) {
		c->sreqs++;
		v = pol_server_request(c->client.policy, u->srv->name,
		    kinds[i].kind);
	}
	if (u->br->h.record == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.kind = BR_EV_SERVER_REQUEST;
	ev.kind_name = br_kind_name(ev.kind);
	ev.server = u->srv->name;
	ev.tool = method;
	ev.decision = "deny";
	ev.upstream_latency_us = -1;
	ev.approver_uid = -1;
	ev.message = "Not supported by the client";
	asked = params != NULL ? json_dumps(params, JSON_COMPACT |
	    JSON_SORT_KEYS) : strdup("{}");
	if (asked == NULL)
		return;
	br_sha256_hex(asked, strlen(asked), digest);
	ev.args_digest = digest;
	if (c == NULL) {
		ev.reason = POL_REASON_NOT_IN_CALL;
		snprintf(detail, sizeof(detail), "refused");
	} else {
		ev.sandbox = c->client.id;
		ev.subject = c->client.subject;
		ev.policy = pol_policy_name(c->client.policy);
		ev.src = c->src;
		ev.session = c->session;
		if (!pol_tool_audit_digest(c->client.policy) &&
		    strlen(asked) <= ASKED_MAX)
			ev.args = asked;
		ev.reason = v == POL_DENY ? POL_REASON_RULE_DENY :
		    POL_REASON_NOT_FORWARDED;
		snprintf(detail, sizeof(detail), "refused; policy %s; in call %s",
		    v == POL_ALLOW ? "allow" : v == POL_ASK ? "ask" : "deny",
		    c->call_id);
	}
	ev.detail = detail;
	if (u->br->h.record(u->br->h.ctx, &ev, on_recorded, NULL) == -1)
		log_warnx("mcp.server_request: record not sent");
	free(asked);
}
