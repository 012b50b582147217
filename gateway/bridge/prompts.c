/*
 * prompts: MCP prompts through the bridge. A prompt is text an upstream
 * writes into the agent's context, with arguments the agent chose, so a
 * prompts/get takes the path of a call (call.c with br_kind_prompt): the
 * prompt rules of the policy with the argument constraints of tool rules
 * (pol_prompt_decide), `ask`, budgets, taint, redaction of every message
 * and a durable mcp.prompt record. prompts/list is filtered page by page
 * (resources.c's listing).
 */
#include <stdio.h>
#include <string.h>

#include "gateway/bridge/br_int.h"

static bool
prompt_listed(const struct br_req *rq, const char *name)
{
	const char *keys[BR_MAX_LABELS], *vals[BR_MAX_LABELS];
	struct pol_tool_q q;
	enum pol_reason why;

	br_client_q(&rq->client, keys, vals, &q);
	q.server = rq->server;
	q.tool = name;
	return pol_prompt_visible_q(rq->client.policy, &q, &why);
}

const struct br_list_kind br_list_prompts = {
	"prompts/list", "prompts", "name", true, prompt_listed
};

/* Prompt arguments are strings (prompts.mdx): anything else is refused
 * before the policy is asked. */
static void
prompt_decide(const struct br_call *c, const struct pol_tool_q *q,
    struct pol_tool_decision *out)
{
	const char *key;
	json_t *v;

	json_object_foreach(c->args, key, v) {
		if (!json_is_string(v)) {
			memset(out, 0, sizeof(*out));
			out->d.verdict = POL_DENY;
			out->d.rule = "input";
			out->d.reason = POL_REASON_BAD_ARGUMENTS;
			out->classification = "public";
			snprintf(out->message, sizeof(out->message), "Invalid "
			    "params: argument \"%.64s\" must be a string.",
			    key);
			return;
		}
	}
	pol_prompt_decide(c->client.policy, q, out);
}

static int
prompt_process(struct br_call *c, json_t *result, char **text)
{
	json_object_del(result, "isError");
	if (!json_is_array(json_object_get(result, "messages")))
		return -1;
	return br_result_process(c->br, c->client.policy, result, NULL, text);
}

const struct br_call_kind br_kind_prompt = {
	"prompts/get", "name", 128, true, BR_EV_PROMPT, -32602,
	prompt_decide, prompt_process
};
