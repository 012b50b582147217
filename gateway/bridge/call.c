/*
 * call: one tools/call from decision to answer. It exists so that every
 * call takes the same path, whatever happens: the tool's current definition
 * (re-listed if unknown or stale; drifted tools are refused), the pure
 * decision of policy/ with the budget use read inside the reservation's
 * transaction, an approval wait for `ask`, a durable intent record, then
 * forwarding, result processing (redaction, size cap), the taint step
 * (egress narrowed before release), and a durable outcome record before
 * anything reaches the sandbox. The intent comes first so that a crash at
 * any point leaves no upstream action unrecorded: whatever the upstream
 * received has its intent in the log, and an intent whose outcome never
 * came is closed by the daemon as mcp.outcome_unknown. Any failure
 * along the way denies, with a neutral message the agent can act on, as a
 * tool result with isError set (tools.mdx): the call itself was fine, the
 * tool is what refused. Resources and prompts take the same path as calls
 * of a kind (struct br_call_kind): their own decision, upstream method,
 * result processing and record kind, and refusals as JSON-RPC errors (their
 * results have no isError).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"

static void	decide(struct br_call *c);
static void	finish(struct br_call *c);

/* Upstream latency goes into records in microseconds: ev_now_ms is too
 * coarse for it. */
static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static const char *
scope_name(enum pol_budget_scope s)
{
	switch (s) {
	case POL_SCOPE_SANDBOX:
		return "sandbox";
	case POL_SCOPE_SUBJECT:
		return "subject";
	case POL_SCOPE_POLICY:
		return "policy";
	}
	return "unknown";
}

static const char *
scope_owner(struct br_call *c, enum pol_budget_scope s)
{
	switch (s) {
	case POL_SCOPE_SANDBOX:
		return c->client.id;
	case POL_SCOPE_SUBJECT:
		return c->client.subject;
	case POL_SCOPE_POLICY:
		return pol_policy_name(c->client.policy);
	}
	return NULL;
}

static void
call_free(struct br_call *c)
{
	/* What the upstream asked in it and nobody answered is refused,
	 * recorded while the call's client is still known. */
	if (c->br != NULL)
		br_srvreq_call_gone(c->br, c);
	if (c->task != NULL)
		br_task_call_gone(c);
	/* A reservation still on its way is given back when it comes; one
	 * held by a call that never went upstream is given back now. */
	br_shared_forget(c->sjob);
	if (c->sheld && !c->forwarded && c->br != NULL)
		br_shared_settle(c->br->shared, c->sres, c->nsres, 0, 1);
	json_decref(c->ptoken);
	if (c->req != NULL)
		c->req->call = NULL;
	if (c->br != NULL) {
		TAILQ_REMOVE(&c->br->calls, c, all);
		br_approval_unqueue(c, FLEET_AQ_GONE);
	}
	if (c->ureq != NULL)
		br_up_cancel(c->ureq);
	if (c->twait != NULL)
		c->twait->c = NULL;
	if (c->client.policy_ref != NULL && c->release != NULL)
		c->release(c->hctx, c->client.policy_ref);
	json_decref(c->rpc_id);
	json_decref(c->args);
	json_decref(c->result);
	free(c->tool);
	free(c->args_json);
	free(c->approver);
	free(c->approver_note);
	free(c->approver_host);
	free(c->result_text);
	free(c->rtext);
	free(c);
}

static json_t *
error_result(const char *text)
{
	return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
	    "text", text, "isError", 1);
}

/* ------------------------------------------------------------ records */

static void
on_recorded(void *arg, int ok)
{
	struct br_call *c = arg;
	static const char withheld[] = "The call could not be recorded, so "
	    "its result is withheld.";
	json_t *o;
	char *s;

	if (c->br != NULL && c->task != NULL) {
		/* A task's: its outcome is durable (or not) before the
		 * task shows it. */
		br_task_done(c, ok);
		c->state = CALL_DONE;
		call_free(c);
		return;
	}
	if (c->br == NULL || c->req == NULL) {
		/* Orphaned (bridge gone) or the client left. */
		call_free(c);
		return;
	}
	if (ok) {
		br_req_reply(c->req, 200, c->result_text, NULL);
	} else {
		log_warnx("bridge: %s/%s for %s: record failed, result "
		    "withheld", c->up->srv->name, c->tool, c->client.id);
		o = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id",
		    c->rpc_id, "result", error_result(withheld));
		s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (s != NULL)
			br_req_reply(c->req, 200, s, NULL);
		else
			br_reply_rpc_error(c->req, 500, c->rpc_id, -32603,
			    "Internal error");
		free(s);
	}
	c->state = CALL_DONE;
	call_free(c);
}

/*
 * The JSON-RPC answer around the serialized result: the bytes are the ones
 * json_pack + json_dumps would give ({"jsonrpc", "id", "result"} in that
 * order, compact), built without serializing the result a second time.
 */
static char *
answer_text(const json_t *rpc_id, const char *rtext, size_t rlen)
{
	static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
	static const char mid[] = ",\"result\":";
	char *id, *out;
	size_t ilen, n;

	if ((id = json_dumps(rpc_id, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL)
		return NULL;
	ilen = strlen(id);
	n = sizeof(head) - 1 + ilen + sizeof(mid) - 1 + rlen + 2;
	if ((out = malloc(n)) != NULL) {
		memcpy(out, head, sizeof(head) - 1);
		memcpy(out + sizeof(head) - 1, id, ilen);
		memcpy(out + sizeof(head) - 1 + ilen, mid, sizeof(mid) - 1);
		memcpy(out + sizeof(head) - 1 + ilen + sizeof(mid) - 1, rtext,
		    rlen);
		out[n - 2] = '}';
		out[n - 1] = '\0';
	}
	free(id);
	return out;
}

/* The JSON-RPC error answer to rpc_id, or NULL (no memory). */
static char *
rpc_error_text(json_t *rpc_id, int code, const char *message)
{
	json_t *msg;
	char *out;

	msg = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
	    rpc_id, "error", "code", code, "message", message);
	out = msg != NULL ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	return out;
}

/* What the intent and the outcome of c both say: who called what, and
 * what was decided. */
static void
call_event(struct br_call *c, enum br_event_kind kind, struct br_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->kind = kind;
	ev->kind_name = br_kind_name(kind);
	ev->call_id = c->call_id[0] != '\0' ? c->call_id : NULL;
	ev->sandbox = c->client.id;
	ev->subject = c->client.subject;
	ev->policy = pol_policy_name(c->client.policy);
	ev->src = c->src;
	ev->session = c->session;
	ev->server = c->up->srv->name;
	ev->tool = c->tool;
	/* From the policy, not the decision: a call refused before any rule
	 * ran (unknown tool, drift, visibility) has no decision to ask. */
	ev->args = pol_tool_audit_digest(c->client.policy) ? NULL :
	    c->args_json;
	ev->args_digest = c->args_digest;
	ev->decision = c->decision;
	ev->rule = c->rule;
	ev->reason = c->reason;
	ev->budget = c->budget_json[0] != '\0' ? c->budget_json : NULL;
	ev->approver = c->approver;
	ev->approver_uid = c->approver != NULL ? c->approver_uid : -1;
	ev->approver_note = c->approver_note;
	ev->approver_host = c->approver_host;
	ev->approval = c->approval;
	ev->classification = c->dec.classification;
	ev->upstream_latency_us = -1;
	ev->detail = c->task_detail[0] != '\0' ? c->task_detail : NULL;
}

/* Serializes the answer, records it, and replies once it is durable. */
static void
finish(struct br_call *c)
{
	struct br *br = c->br;
	struct br_event ev;

	if (c->result == NULL) {
		free(c->rtext);
		c->rtext = NULL;
		c->result = error_result("The call failed inside Sluice.");
	}
	/* on_result leaves the text br_result_process wrote and checked;
	 * anything else (a denial, an error result) is serialized here,
	 * once, and checked too: an upstream's error message can spell a
	 * held credential in the answer's text as a result can (see
	 * br_holds_credential). Our own texts never do. */
	if (c->rtext == NULL && c->result != NULL &&
	    (c->rtext = json_dumps(c->result, JSON_COMPACT)) != NULL &&
	    br_holds_credential(br, c->rtext)) {
		free(c->rtext);
		json_decref(c->result);
		c->decision = "deny";
		c->reason = POL_REASON_REDACTION_FAILED;
		snprintf(c->message, sizeof(c->message), "The result is "
		    "withheld because it could not be checked for secrets.");
		c->result = error_result(c->message);
		c->rtext = c->result != NULL ? json_dumps(c->result,
		    JSON_COMPACT) : NULL;
	}
	/* A task keeps its result until it is read: bounded, as what the
	 * sandbox would get, before it is recorded. */
	if (c->task != NULL && c->rtext != NULL && strlen(c->rtext) >
	    POL_LIM_TASK_BYTES) {
		snprintf(c->message, sizeof(c->message), "The result (%zu "
		    "bytes) is larger than a task can keep (%u bytes).",
		    strlen(c->rtext), POL_LIM_TASK_BYTES);
		free(c->rtext);
		json_decref(c->result);
		c->reason = POL_REASON_RESULT_TOO_LARGE;
		c->result = error_result(c->message);
		c->rtext = c->result != NULL ? json_dumps(c->result,
		    JSON_COMPACT) : NULL;
	}
	/* A refusal of a kind's call is an error answer, in the kind's code
	 * unless the upstream or Sluice failed. */
	if (c->kind != NULL && c->rpc_code == 0 &&
	    json_is_true(json_object_get(c->result, "isError")))
		c->rpc_code = c->reason == POL_REASON_UPSTREAM_ERROR ||
		    c->reason == POL_REASON_INTERNAL_ERROR ? -32603 :
		    c->kind->deny_code;
	if (c->rtext != NULL) {
		c->result_bytes = strlen(c->rtext);
		br_sha256_hex(c->rtext, c->result_bytes, c->result_digest);
		c->result_text = c->rpc_code != 0 ? rpc_error_text(c->rpc_id,
		    c->rpc_code, c->message) : answer_text(c->rpc_id, c->rtext,
		    c->result_bytes);
	}
	if (c->result_text == NULL) {
		on_recorded(c, 0);
		return;
	}
	call_event(c, c->kind != NULL ? c->kind->ev : BR_EV_CALL, &ev);
	ev.message = c->message[0] != '\0' ? c->message : NULL;
	ev.taints = c->taint_done;
	ev.upstream_latency_us = c->latency_us;
	ev.result_bytes = c->result_bytes;
	ev.result_digest = c->result_digest[0] != '\0' ? c->result_digest :
	    NULL;
	ev.redactions = c->redactions;
	c->state = CALL_RECORDING;
	/* c may be gone when record returns (done can run inside it). */
	if (br->h.record(br->h.ctx, &ev, on_recorded, c) == -1)
		on_recorded(c, 0);
}

static void
deny(struct br_call *c, const char *rule, enum pol_reason reason,
    const char *message);

void
br_call_deny(struct br_call *c, const char *rule, enum pol_reason reason,
    const char *message)
{
	deny(c, rule, reason, message);
}

const char *
br_call_owner(struct br_call *c, enum pol_budget_scope s)
{
	return scope_owner(c, s);
}

static void
deny(struct br_call *c, const char *rule, enum pol_reason reason,
    const char *message)
{
	c->decision = "deny";
	if (rule != NULL)
		snprintf(c->rule, sizeof(c->rule), "%s", rule);
	c->reason = reason;
	snprintf(c->message, sizeof(c->message), "%s", message);
	json_decref(c->result);
	free(c->rtext);
	c->rtext = NULL;
	c->result = error_result(c->message);
	finish(c);
}

/* ------------------------------------------------------------ results */

static void
on_tainted(void *arg, int ok)
{
	struct br_taint_wait *tw = arg;
	struct br_call *c = tw->c;
	struct br *br;
	char detail[320];

	free(tw);
	if (c == NULL)
		return;		/* the call went first */
	c->twait = NULL;
	c->state = CALL_NEW;
	br = c->br;
	if (!ok) {
		deny(c, NULL, POL_REASON_TAINT_FAILED, "The result is withheld "
		    "because the sandbox's network could not be narrowed.");
		return;
	}
	c->client.tainted = true;
	snprintf(detail, sizeof(detail), "sandbox %s received %s data from "
	    "%s/%s; egress narrowed to the taint keep-list", c->client.id,
	    c->dec.classification != NULL ? c->dec.classification :
	    "classified", c->up->srv->name, c->tool);
	br_finding(br, BR_EV_TAINT, c->client.id, c->up->srv->name, c->tool,
	    detail);
	c->taint_done = true;
	finish(c);
}

/*
 * The taint step. Whatever a tainting tool answers (its result, or the text
 * of the error it returned) is its data: it reaches the sandbox only once
 * the sandbox's other egress is gone. 0: nothing to wait for, the answer
 * may be released now (c->taint_done says whether it taints: egress was
 * narrowed already). 1: the call is in other hands (narrowing under way,
 * or it failed and c was denied with the answer withheld): c may be gone.
 */
static int
taint_step(struct br_call *c)
{
	struct br *br = c->br;
	struct br_taint_wait *tw;

	if (!c->dec.taints)
		return 0;
	if (c->client.tainted) {
		c->taint_done = true;
		return 0;
	}
	if (br->h.restrict_egress == NULL ||
	    (tw = calloc(1, sizeof(*tw))) == NULL) {
		deny(c, NULL, POL_REASON_TAINT_FAILED, "The result is withheld "
		    "because the sandbox's network could not be narrowed.");
		return 1;
	}
	tw->c = c;
	c->twait = tw;
	c->state = CALL_TAINTING;
	/* The completion may run inside the hook. */
	if (br->h.restrict_egress(br->h.ctx, c->client.id, on_tainted,
	    tw) == -1)
		on_tainted(tw, 0);
	return 1;
}

static void
on_result(void *arg, json_t *msg, const char *err)
{
	struct br_call *c = arg;
	struct br *br = c->br;
	json_t *res, *tool;
	const char *pin, *drift, *emsg;
	char buf[320], *red;
	size_t i, len;
	int red_n;
	bool theirs = false;
	uint64_t now_s = (uint64_t)time(NULL);

	c->ureq = NULL;
	c->latency_us = (int64_t)(now_us() - c->sent_us);
	c->decision = "allow";
	c->reason = c->dec.d.reason;
	res = json_object_get(msg, "result");
	if (msg == NULL || !json_is_object(res)) {
		if (msg != NULL && json_is_object(json_object_get(msg,
		    "error"))) {
			theirs = true;
			emsg = json_string_value(json_object_get(
			    json_object_get(msg, "error"), "message"));
			/* The upstream's message can hold anything: redact
			 * it too. */
			red = NULL;
			if (br_redact_string(br, c->client.policy, emsg !=
			    NULL ? emsg : "", &red) == -1)
				snprintf(buf, sizeof(buf), "The tool failed.");
			else
				snprintf(buf, sizeof(buf), "The tool failed: "
				    "%.200s", red != NULL ? red : emsg != NULL ?
				    emsg : "");
			free(red);
		} else
			snprintf(buf, sizeof(buf), "The tool could not be "
			    "reached: %s", err != NULL ? err :
			    "malformed answer");
		c->reason = POL_REASON_UPSTREAM_ERROR;
		snprintf(c->message, sizeof(c->message), "%.250s", buf);
		c->result = error_result(buf);
		/* An error the upstream wrote carries its text: taint
		 * before it is released, as for a result. */
		if (theirs && taint_step(c) != 0)
			return;
		finish(c);
		return;
	}
	/* The message is the upstream request's to drop once this returns:
	 * its result is ours to change, no copy needed. */
	c->result = json_incref(res);
	json_object_del(c->result, "_meta");
	tool = c->kind == NULL ? br_tools_get(c->up, c->tool, &pin, &drift) :
	    NULL;
	/* Serialized once, by br_result_process: this text is checked
	 * there, measured here, digested, recorded and sent by finish(). */
	if ((red_n = c->kind != NULL ? c->kind->process(c, c->result,
	    &c->rtext) : br_result_process(br, c->client.policy, c->result,
	    tool, &c->rtext)) == -1) {
		json_decref(c->result);
		c->result = NULL;
		deny(c, NULL, POL_REASON_REDACTION_FAILED,
		    "The result is withheld "
		    "because it could not be checked for secrets.");
		return;
	}
	c->redactions += (unsigned)red_n;
	len = strlen(c->rtext);
	if (c->dec.max_result_bytes != 0 && len > c->dec.max_result_bytes) {
		free(c->rtext);
		c->rtext = NULL;
		json_decref(c->result);
		snprintf(c->message, sizeof(c->message), "The result (%zu "
		    "bytes) is larger than the policy allows (%llu bytes).",
		    len, (unsigned long long)c->dec.max_result_bytes);
		c->result = error_result(c->message);
		c->reason = POL_REASON_RESULT_TOO_LARGE;
		len = 0;
	}
	/* Result bytes count against the budgets that were reserved. */
	if (c->sheld && len > 0)
		br_shared_settle(br->shared, c->sres, c->nsres, len, 0);
	if (c->dec.nres > 0 && len > 0) {
		int bad = br_db_begin(br) == -1;

		for (i = 0; !bad && i < c->dec.nres; i++)
			bad = !br_call_is_shared(c, c->dec.res[i].scope) &&
			    br_budget_add(br, c->dec.res[i].scope,
			    scope_owner(c, c->dec.res[i].scope),
			    c->dec.res[i].budget, c->dec.res[i].window_s,
			    now_s, 0, 0, len) == -1;
		if (bad || br_db_commit(br) == -1) {
			br_db_rollback(br);
			json_decref(c->result);
			c->result = NULL;
			deny(c, NULL, POL_REASON_INTERNAL_ERROR,
			    "The call could not "
			    "be accounted, so its result is withheld.");
			return;
		}
	}
	/* Taint before release: once the sandbox holds the data, its other
	 * egress must already be gone. A result too large to release
	 * releases nothing. */
	if (c->reason != POL_REASON_RESULT_TOO_LARGE && taint_step(c) != 0)
		return;
	finish(c);
}

static void
forward(struct br_call *c)
{
	json_t *params;

	if (c->kind == NULL || c->kind->has_args)
		params = json_pack("{s:s, s:O}", c->kind != NULL ?
		    c->kind->name_key : "name", c->tool, "arguments", c->args);
	else
		params = json_pack("{s:s}", c->kind->name_key, c->tool);
	br_progress_forward(c, params);
	c->state = CALL_FORWARDED;
	c->sent_us = now_us();
	/* Set first: the answer may come inside the request. */
	c->forwarded = params != NULL;
	if (params == NULL || (c->ureq = br_up_request(c->up, c->kind !=
	    NULL ? c->kind->method : "tools/call", params, on_result,
	    c)) == NULL) {
		c->forwarded = false;
		deny(c, NULL, POL_REASON_UPSTREAM_ERROR,
		    "The tool could not be "
		    "reached.");
		return;
	}
}

/* The intent is durable (ok) or will never be: forward, or refuse with a
 * JSON-RPC error (nothing went upstream, the refusal is recorded as the
 * call's outcome). */
static void
on_intent(void *arg, int ok)
{
	struct br_call *c = arg;

	if (c->br == NULL) {
		/* Orphaned while the intent was on its way (the bridge
		 * stops): nothing is forwarded; a durable intent without
		 * an outcome is closed by the daemon. */
		call_free(c);
		return;
	}
	c->state = CALL_NEW;
	if (!ok) {
		log_warnx("bridge: %s/%s for %s: intent record failed, call "
		    "not forwarded", c->up->srv->name, c->tool, c->client.id);
		c->rpc_code = -32603;
		deny(c, NULL, POL_REASON_RECORD_FAILED, "The call could not "
		    "be recorded, so it was not forwarded.");
		return;
	}
	forward(c);
}

/*
 * An allowed (or approved) call is recorded as an intent, durably, before
 * its request leaves for the upstream: whatever the upstream acts on is
 * in the log even if Sluice dies before the outcome. Concurrent calls'
 * intents share the writer's group commit.
 */
static void
intend(struct br_call *c)
{
	struct br_event ev;

	c->decision = "allow";
	c->reason = c->dec.d.reason;
	call_event(c, BR_EV_INTENT, &ev);
	c->state = CALL_INTENDING;
	/* The completion may run inside the hook. */
	if (c->br->h.record(c->br->h.ctx, &ev, on_intent, c) == -1)
		on_intent(c, 0);
}

static void	reserve(struct br_call *c, bool approved);

/* ------------------------------------------------------------ decision */

static void
budget_state(struct br_call *c, const struct pol_budget_use *use)
{
	json_t *o = json_object(), *b;
	const struct pol_reservation *r;
	char *s;
	size_t i;

	for (i = 0; o != NULL && i < c->dec.nres; i++) {
		r = &c->dec.res[i];
		b = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "scope",
		    scope_name(r->scope), "calls",
		    (json_int_t)(use[i].calls + r->calls), "limit_calls",
		    (json_int_t)r->limit_calls, "cost",
		    (json_int_t)(use[i].cost + r->cost), "limit_cost",
		    (json_int_t)r->limit_cost, "window_s",
		    (json_int_t)r->window_s);
		if (b != NULL)
			json_object_set_new(o, r->budget, b);
	}
	s = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	if (s != NULL && strlen(s) < sizeof(c->budget_json))
		snprintf(c->budget_json, sizeof(c->budget_json), "%s", s);
	else
		snprintf(c->budget_json, sizeof(c->budget_json),
		    "{\"truncated\":true}");
	free(s);
}

/* The pure decision of c's kind (tools: pol_tool_decide). */
static void
call_decide(const struct br_call *c, const struct pol_tool_q *q,
    struct pol_tool_decision *out)
{
	if (c->kind != NULL)
		c->kind->decide(c, q, out);
	else
		pol_tool_decide(c->client.policy, q, out);
}

/* A tool call meets the tool's current, undrifted definition (*pin its
 * pin); -1: c was denied. */
static int
tool_known(struct br_call *c, const char **pin)
{
	const char *drift;

	if (br_tools_get(c->up, c->tool, pin, &drift) == NULL) {
		deny(c, "default", POL_REASON_UNKNOWN_TOOL,
		    "This tool does not exist "
		    "on this server.");
		return -1;
	}
	if (drift != NULL) {
		deny(c, "pin", POL_REASON_TOOL_DRIFT,
		    "The tool's definition changed "
		    "since it was approved.");
		return -1;
	}
	return 0;
}

/* Decide with the budget use read inside the transaction that reserves:
 * nothing can change the counters between the check and the add. */
static void
reserve(struct br_call *c, bool approved)
{
	struct br *br = c->br;
	const char *keys[BR_MAX_LABELS], *vals[BR_MAX_LABELS];
	struct pol_budget_use use[POL_MAX_RESERVATIONS];
	struct pol_tool_decision first;
	struct pol_tool_q q;
	const char *pin;
	enum pol_reason why;
	uint64_t now_s = (uint64_t)time(NULL);
	size_t i, k;

	pin = NULL;
	if (c->kind == NULL && tool_known(c, &pin) == -1)
		return;
	br_client_q(&c->client, keys, vals, &q);
	q.server = c->up->srv->name;
	q.tool = c->tool;
	q.args_json = c->args_json;
	q.pin_hex = pin;
	if (c->kind == NULL && !pol_tool_visible_q(c->client.policy, &q,
	    &why)) {
		snprintf(c->rule, sizeof(c->rule), "visibility");
		deny(c, NULL, why, why == POL_REASON_PIN_MISMATCH ?
		    "The tool's definition changed since it was approved." :
		    "The policy does not allow this tool.");
		return;
	}
	/* First pass: which budgets apply. Second, inside the transaction
	 * that reserves: with their use. A call under no budget needs no
	 * transaction at all. */
	call_decide(c, &q, &first);
	if (first.d.verdict == POL_DENY) {
		c->dec = first;
		snprintf(c->rule, sizeof(c->rule), "%s", first.d.rule ?
		    first.d.rule : "default");
		deny(c, NULL, first.d.reason, first.message);
		return;
	}
	if (first.nres == 0) {
		c->dec = first;
		snprintf(c->rule, sizeof(c->rule), "%s", c->dec.d.rule ?
		    c->dec.d.rule : "default");
		if (c->dec.d.verdict == POL_ASK && !approved) {
			br_call_ask(c);
			return;
		}
		if (c->dec.d.verdict != POL_ALLOW &&
		    c->dec.d.verdict != POL_ASK) {
			deny(c, NULL, POL_REASON_INTERNAL_ERROR,
			    "The call could not be "
			    "evaluated.");
			return;
		}
		intend(c);
		return;
	}
	if (br_call_shared_pending(c, &first, now_s))
		return;
	if (br_db_begin(br) == -1) {
		deny(c, "budget", POL_REASON_INTERNAL_ERROR,
		    "The call could not be "
		    "evaluated.");
		return;
	}
	for (i = k = 0; i < first.nres; i++) {
		if (br_call_is_shared(c, first.res[i].scope)) {
			br_call_shared_use(c, k++, first.res[i].budget, &use[i]);
			continue;
		}
		if (br_budget_get(br, first.res[i].scope, scope_owner(c,
		    first.res[i].scope), first.res[i].budget,
		    first.res[i].window_s, now_s, &use[i]) == -1) {
			br_db_rollback(br);
			deny(c, "budget", POL_REASON_INTERNAL_ERROR,
			    "The call could "
			    "not be evaluated.");
			return;
		}
	}
	q.budgets = use;
	q.nbudgets = first.nres;
	call_decide(c, &q, &c->dec);
	snprintf(c->rule, sizeof(c->rule), "%s", c->dec.d.rule ?
	    c->dec.d.rule : "default");
	if (c->dec.d.verdict == POL_DENY || c->dec.d.verdict ==
	    POL_SYNTHETIC || c->sexhausted != 0) {
		br_db_rollback(br);
		br_call_shared_drop(c);
		if (c->dec.d.verdict != POL_DENY) {
			deny(c, "budget", POL_REASON_BUDGET_EXHAUSTED, "A "
			    "budget of this call is used up.");
			return;
		}
		deny(c, NULL, c->dec.d.reason != POL_REASON_NONE ?
		    c->dec.d.reason : POL_REASON_DENIED,
		    c->dec.message[0] != '\0' ? c->dec.message :
		    "The policy does not allow this call.");
		return;
	}
	if (c->dec.d.verdict == POL_ASK && !approved) {
		br_db_rollback(br);
		br_call_shared_drop(c);
		br_call_ask(c);
		return;
	}
	/* The second pass must name the same budgets, in order. */
	for (i = 0; i < c->dec.nres; i++) {
		if (i >= first.nres || strcmp(c->dec.res[i].budget,
		    first.res[i].budget) != 0 ||
		    (!br_call_is_shared(c, c->dec.res[i].scope) && br_budget_add(br, c->dec.res[i].scope, scope_owner(c,
		    c->dec.res[i].scope), c->dec.res[i].budget,
		    c->dec.res[i].window_s, now_s, c->dec.res[i].calls,
		    c->dec.res[i].cost, 0) == -1)) {
			br_db_rollback(br);
			deny(c, NULL, POL_REASON_INTERNAL_ERROR,
			    "The call could not "
			    "be evaluated.");
			return;
		}
	}
	if (br_db_commit(br) == -1) {
		deny(c, NULL, POL_REASON_INTERNAL_ERROR,
		    "The call could not be "
		    "evaluated.");
		return;
	}
	budget_state(c, use);
	intend(c);
}

void
br_call_decide(struct br_call *c)
{
	decide(c);
}

void
br_call_redecide(struct br_call *c)
{
	reserve(c, c->approved);
}

static void
on_listed(void *arg, int ok)
{
	struct br_call *c = arg;

	c->state = CALL_NEW;
	/* Without the upstream's current definitions nothing is checked
	 * against a pin: deny. */
	if (!ok) {
		deny(c, NULL, POL_REASON_UPSTREAM_ERROR,
		    "The tool list of this server "
		    "could not be read.");
		return;
	}
	/* Listed once: a tool still unknown is refused, not re-listed. */
	reserve(c, c->approved);
}

static void
decide(struct br_call *c)
{
	const char *pin, *drift;

	/* An unknown tool or a stale list (list_changed, or older than
	 * BR_LIST_TTL_MS: HTTP upstreams cannot notify us) is listed again
	 * first, so a call meets a recent definition of the tool. */
	if (c->kind == NULL && c->state != CALL_LISTING && (!c->up->listed ||
	    c->up->stale ||
	    ev_now_ms() - c->up->listed_ms > BR_LIST_TTL_MS ||
	    br_tools_get(c->up, c->tool, &pin, &drift) == NULL)) {
		c->state = CALL_LISTING;
		br_tools_refresh(c->up, on_listed, c);
		return;
	}
	reserve(c, c->approved);
}

void
br_call_start(struct br_req *rq, json_t *rpc_id, json_t *params,
    struct br_up *up)
{
	br_call_start_kind(rq, rpc_id, params, up, NULL);
}

void
br_call_start_kind(struct br_req *rq, json_t *rpc_id, json_t *params,
    struct br_up *up, const struct br_call_kind *k)
{
	struct br *br = rq->br;
	struct br_call *c;
	json_t *name = json_object_get(params, k != NULL ? k->name_key :
	    "name");
	json_t *args = k == NULL || k->has_args ? json_object_get(params,
	    "arguments") : NULL;
	bool bad;

	bad = !json_is_string(name) || json_string_length(name) == 0 ||
	    json_string_length(name) > (k != NULL ? k->name_max : 128) ||
	    strlen(json_string_value(name)) != json_string_length(name) ||
	    (args != NULL && !json_is_object(args));
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		br_reply_rpc_error(rq, 500, rpc_id, -32603, "Internal error");
		return;
	}
	c->br = br;
	c->release = br->h.release;
	c->hctx = br->h.ctx;
	c->up = up;
	c->kind = k;
	c->req = rq;
	c->latency_us = -1;
	c->approver_uid = -1;
	c->rpc_id = json_incref(rpc_id);
	/* A malformed call is still a call the sandbox tried: refused with
	 * -32602 and recorded like any denial, with what could be read. */
	c->tool = strdup(bad ? "" : json_string_value(name));
	/* Shared with the request's message, which nothing changes. */
	c->args = args != NULL && json_is_object(args) ? json_incref(args) :
	    json_object();
	c->args_json = c->args != NULL ? json_dumps(c->args, JSON_COMPACT |
	    JSON_SORT_KEYS) : NULL;
	br_progress_take(c, params);
	/* The request's policy reference moves to the call. */
	c->client = rq->client;
	rq->identified = false;
	snprintf(c->session, sizeof(c->session), "%s", rq->session);
	snprintf(c->src, sizeof(c->src), "%s", rq->src);
	snprintf(c->rule, sizeof(c->rule), "default");
	TAILQ_INSERT_TAIL(&br->calls, c, all);
	rq->call = c;
	if (c->tool == NULL || c->args == NULL || c->args_json == NULL) {
		deny(c, NULL, POL_REASON_INTERNAL_ERROR,
		    "The call could not be "
		    "evaluated.");
		return;
	}
	br_sha256_hex(c->args_json, strlen(c->args_json), c->args_digest);
	/* Every call has an id, forwarded or not: its records name it.
	 * Unique, not secret: 64 random bits per process, then a count. */
	if (br->call_prefix[0] == '\0' &&
	    br_random_hex(br->call_prefix, 8) == -1)
		br->call_prefix[0] = '\0';
	if (br->call_prefix[0] == '\0' || snprintf(c->call_id,
	    sizeof(c->call_id), "%s%016llx", br->call_prefix,
	    (unsigned long long)++br->call_seq) != 32) {
		deny(c, NULL, POL_REASON_INTERNAL_ERROR,
		    "The call could not be "
		    "evaluated.");
		return;
	}
	if (bad) {
		c->rpc_code = -32602;
		deny(c, NULL, POL_REASON_INVALID_PARAMS, k != NULL ?
		    "Invalid params" : "Invalid params: name must be "
		    "a tool name and arguments an object");
		return;
	}
	decide(c);
}

void
br_call_detach(struct br_call *c)
{
	c->req = NULL;
}

void
br_call_abort_all(struct br *br)
{
	struct br_call *c, *t;

	/* Pending approvals are denied (and recorded) while the hooks still
	 * work. */
	while ((c = TAILQ_FIRST(&br->approvals)) != NULL) {
		br_approval_unqueue(c, FLEET_AQ_GONE);
		c->approval = "denied";
		c->approver = strdup("sluice");
		c->approver_uid = -1;
		deny(c, NULL, POL_REASON_SHUTDOWN,
		    "Sluice stopped before anyone "
		    "approved this call.");
	}
	/* So are calls the upstream may already have acted on, and calls
	 * waiting for a listing: nothing a sandbox asked for goes
	 * unrecorded because Sluice stopped. Their answers will not come
	 * (the listing waiters are gone, the upstream request is
	 * cancelled). */
	TAILQ_FOREACH_SAFE(c, &br->calls, all, t) {
		if (c->state == CALL_TAINTING) {
			/* The tool ran; its answer is never released. */
			c->twait->c = NULL;
			c->twait = NULL;
			c->state = CALL_NEW;
			deny(c, NULL, POL_REASON_SHUTDOWN, "Sluice stopped "
			    "before the result could be released.");
			continue;
		}
		if (c->state != CALL_FORWARDED && c->state != CALL_LISTING &&
		    c->state != CALL_RESERVING)
			continue;
		br_shared_forget(c->sjob);
		c->sjob = NULL;
		if (c->ureq != NULL) {
			br_up_cancel(c->ureq);
			c->ureq = NULL;
		}
		if (c->state == CALL_FORWARDED) {
			/* A latency says it went upstream. */
			c->latency_us = (int64_t)(now_us() - c->sent_us);
			c->state = CALL_NEW;
			deny(c, NULL, POL_REASON_SHUTDOWN,
			    "Sluice stopped before the "
			    "tool answered.");
		} else {
			c->state = CALL_NEW;
			deny(c, NULL, POL_REASON_SHUTDOWN,
			    "Sluice stopped before this "
			    "call could be evaluated.");
		}
	}
	TAILQ_FOREACH_SAFE(c, &br->calls, all, t) {
		TAILQ_REMOVE(&br->calls, c, all);
		if (c->state == CALL_RECORDING || c->state == CALL_INTENDING) {
			/* done() will still come: it frees the call. */
			c->br = NULL;
			continue;
		}
		if (c->ureq != NULL) {
			br_up_cancel(c->ureq);
			c->ureq = NULL;
		}
		c->br = NULL;
		call_free(c);
	}
}

void
br_call_cancel(struct br *br, const char *sid, const json_t *id)
{
	struct br_call *c;

	if (sid == NULL || id == NULL)
		return;
	/* Whether or not its POST is still open: a client that cancels
	 * may already have closed it. */
	TAILQ_FOREACH(c, &br->calls, all)
		if (c->br != NULL && c->rpc_id != NULL &&
		    strcmp(c->session, sid) == 0 &&
		    json_equal(c->rpc_id, (json_t *)id))
			break;
	if (c != NULL)
		(void)br_call_cancel_one(c);
}

bool
br_call_cancel_one(struct br_call *c)
{
	json_t *n;

	if (c->state == CALL_ASKING) {
		/* Never reserved (reserve() runs again once approved), never
		 * forwarded: nothing to give back. */
		br_approval_unqueue(c, FLEET_AQ_CANCELLED);
		c->approval = "cancelled";
		deny(c, NULL, POL_REASON_CANCELLED, "The call was cancelled.");
		return true;
	}
	if (c->state != CALL_FORWARDED || c->ureq == NULL)
		return false;	/* deciding, or its answer is already here */
	/* It reached the upstream: what it reserved stays spent. The
	 * upstream hears of it under its own request id. */
	n = json_pack("{s:s, s:s, s:{s:I, s:s}}", "jsonrpc", "2.0", "method",
	    "notifications/cancelled", "params", "requestId",
	    (json_int_t)c->ureq->id, "reason", "cancelled by the client");
	if (n != NULL)
		(void)br_up_send(c->up, n);
	json_decref(n);
	br_up_cancel(c->ureq);
	c->ureq = NULL;
	c->latency_us = (int64_t)(now_us() - c->sent_us);
	c->decision = "allow";
	c->reason = POL_REASON_CANCELLED;
	snprintf(c->message, sizeof(c->message), "The call was cancelled.");
	json_decref(c->result);
	free(c->rtext);
	c->rtext = NULL;
	c->result = error_result(c->message);
	finish(c);
	return true;
}
