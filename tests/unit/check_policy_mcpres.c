/*
 * check_policy_mcpres: the pure decisions on MCP resources and prompts, as
 * tables, and the loader's refusals of their rules. The rows include the
 * URIs a glob could be fooled by (dot segments, encoded dots and slashes,
 * an upper-case scheme past a deny rule, control characters), which must
 * deny before any rule is read. And mcp.server_requests: what an upstream
 * may ask of the agent's client, per server and kind, default deny.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "tests/unit/run_suite.h"

static const char policy_text[] =
"version: 1\n"
"name: res\n"
"mcp:\n"
"  taint: {level: confidential}\n"
"  results: {max_bytes: 64KiB}\n"
"  budgets:\n"
"    - {name: two, calls: 2}\n"
"  resources:\n"
"    - {server: docs, uri: \"file:///srv/docs/secret/*\", decision: deny}\n"
"    - {server: docs, uri: \"file:///srv/docs/*\", schemes: [file],\n"
"       decision: allow, max_bytes: 1KiB}\n"
"    - {server: docs, uri: \"note://hr/*\", decision: allow,\n"
"       classification: confidential}\n"
"    - {server: docs, uri: \"note://ask/*\", decision: ask}\n"
"    - {server: docs, uri: \"note://counted/*\", decision: allow,\n"
"       budgets: [two]}\n"
"    - {server: web, schemes: [https], decision: allow}\n"
"  prompts:\n"
"    - prompt: docs/secret\n"
"      decision: deny\n"
"    - prompt: docs/summarize\n"
"      decision: allow\n"
"      classification: secret\n"
"      args:\n"
"        topic: {type: string, max_length: 10, pattern: \"^[a-z ]*$\"}\n"
"      required: [topic]\n"
"    - prompt: docs/review\n"
"      decision: ask\n"
"      allow_other_args: true\n";

static struct pol_policy *pp;

static void
setup(void)
{
	struct pol_errors *e = pol_errors_new(10);

	pp = pol_policy_load_buf("res.yaml", policy_text,
	    sizeof(policy_text) - 1, NULL, e);
	if (pp == NULL && pol_errors_count(e) > 0)
		fprintf(stderr, "%s\n", pol_errors_get(e, 0));
	ck_assert_ptr_nonnull(pp);
	pol_errors_free(e);
}

static void
teardown(void)
{
	pol_policy_free(pp);
}

static const struct {
	const char	*server, *uri;
	enum pol_verdict v;
	const char	*rule;
	enum pol_reason	 reason;
	bool		 taints;
	uint64_t	 max;
} rq[] = {
	{ "docs", "file:///srv/docs/a.txt", POL_ALLOW, "mcp.resources[1]",
	  POL_REASON_ALLOWED, false, 1024 },
	{ "docs", "file:///srv/docs/sub/b.txt", POL_ALLOW, "mcp.resources[1]",
	  POL_REASON_ALLOWED, false, 1024 },
	/* The scheme is lower-cased before the deny rule is read. */
	{ "docs", "FILE:///srv/docs/secret/k", POL_DENY, "mcp.resources[0]",
	  POL_REASON_RULE_DENY, false, 0 },
	{ "docs", "file:///srv/docs/secret/k", POL_DENY, "mcp.resources[0]",
	  POL_REASON_RULE_DENY, false, 0 },
	/* Tricks a glob would fall for: refused before any rule. */
	{ "docs", "file:///srv/docs/../../etc/passwd", POL_DENY, "input",
	  POL_REASON_BAD_URI, false, 0 },
	{ "docs", "file:///srv/docs/./secret/k", POL_DENY, "input",
	  POL_REASON_BAD_URI, false, 0 },
	{ "docs", "file:///srv/docs/..", POL_DENY, "input",
	  POL_REASON_BAD_URI, false, 0 },
	{ "docs", "file:///srv/docs/%2e%2e/etc/passwd", POL_DENY, "input",
	  POL_REASON_BAD_URI, false, 0 },
	{ "docs", "file:///srv/docs/a%2Fb", POL_DENY, "input",
	  POL_REASON_BAD_URI, false, 0 },
	{ "docs", "file:///srv/docs/a\nb", POL_DENY, "input",
	  POL_REASON_BAD_URI, false, 0 },
	{ "docs", "file:///srv/docs/a b", POL_DENY, "input",
	  POL_REASON_BAD_URI, false, 0 },
	{ "docs", "file:///srv/docs\\..\\x", POL_DENY, "input",
	  POL_REASON_BAD_URI, false, 0 },
	{ "docs", "file:///srv/docs/{x}", POL_DENY, "input",
	  POL_REASON_BAD_URI, false, 0 },
	{ "docs", "/srv/docs/a.txt", POL_DENY, "input",
	  POL_REASON_BAD_URI, false, 0 },
	{ "docs", "", POL_DENY, "input", POL_REASON_BAD_URI, false, 0 },
	{ "docs", "1file:///srv/docs/a", POL_DENY, "input",
	  POL_REASON_BAD_URI, false, 0 },
	/* A query may hold dots: only the path's segments count. */
	{ "docs", "file:///srv/docs/a?x=..", POL_ALLOW, "mcp.resources[1]",
	  POL_REASON_ALLOWED, false, 1024 },
	{ "docs", "note://hr/salaries", POL_ALLOW, "mcp.resources[2]",
	  POL_REASON_ALLOWED, true, 65536 },
	{ "docs", "note://ask/x", POL_ASK, "mcp.resources[3]",
	  POL_REASON_APPROVAL_REQUIRED, false, 65536 },
	{ "docs", "note://other/x", POL_DENY, "default",
	  POL_REASON_NO_MATCHING_RULE, false, 0 },
	{ "docs", "https://example.com/x", POL_DENY, "default",
	  POL_REASON_NO_MATCHING_RULE, false, 0 },
	/* Scheme allowlist: the glob "*" alone would take http too. */
	{ "web", "https://example.com/x", POL_ALLOW, "mcp.resources[5]",
	  POL_REASON_ALLOWED, false, 65536 },
	{ "web", "http://example.com/x", POL_DENY, "default",
	  POL_REASON_NO_MATCHING_RULE, false, 0 },
	{ "web", "HTTPS://example.com/x", POL_ALLOW, "mcp.resources[5]",
	  POL_REASON_ALLOWED, false, 65536 },
	{ "nosuch", "file:///srv/docs/a", POL_DENY, "default",
	  POL_REASON_NO_MATCHING_RULE, false, 0 },
};

START_TEST(resource_table)
{
	struct pol_resource_q q;
	struct pol_tool_decision d;

	memset(&q, 0, sizeof(q));
	q.server = rq[_i].server;
	q.uri = rq[_i].uri;
	pol_resource_decide(pp, &q, &d);
	ck_assert_msg(d.d.verdict == rq[_i].v, "row %d %s: verdict %d", _i,
	    rq[_i].uri, d.d.verdict);
	ck_assert_str_eq(d.d.rule, rq[_i].rule);
	ck_assert_str_eq(pol_reason_name(d.d.reason),
	    pol_reason_name(rq[_i].reason));
	if (d.d.verdict != POL_DENY) {
		ck_assert(d.taints == rq[_i].taints);
		ck_assert_uint_eq(d.max_result_bytes, rq[_i].max);
	}
	ck_assert(strlen(d.message) > 0 || d.d.verdict == POL_ALLOW);
}
END_TEST

START_TEST(resource_budget)
{
	struct pol_budget_use use = { "two", 0, 0, 0 };
	struct pol_resource_q q = { .server = "docs",
	    .uri = "note://counted/1", .budgets = &use, .nbudgets = 1 };
	struct pol_tool_decision d;

	pol_resource_decide(pp, &q, &d);
	ck_assert_int_eq(d.d.verdict, POL_ALLOW);
	ck_assert_uint_eq(d.nres, 1);
	ck_assert_str_eq(d.res[0].budget, "two");
	ck_assert_uint_eq(d.res[0].calls, 1);
	use.calls = 2;
	pol_resource_decide(pp, &q, &d);
	ck_assert_int_eq(d.d.verdict, POL_DENY);
	ck_assert_int_eq(d.d.reason, POL_REASON_BUDGET_EXHAUSTED);
	ck_assert_uint_eq(d.nres, 0);
	ck_assert_ptr_nonnull(strstr(d.message, "resource"));
	/* NULLs fail closed. */
	pol_resource_decide(NULL, &q, &d);
	ck_assert_int_eq(d.d.verdict, POL_DENY);
	pol_resource_decide(pp, NULL, &d);
	ck_assert_int_eq(d.d.reason, POL_REASON_BAD_REQUEST);
	q.uri = NULL;
	pol_resource_decide(pp, &q, &d);
	ck_assert_int_eq(d.d.verdict, POL_DENY);
}
END_TEST

static const struct {
	const char	*server, *uri;
	bool		 tmpl, visible;
	enum pol_reason	 reason;
} vq[] = {
	{ "docs", "file:///srv/docs/a", false, true, POL_REASON_VISIBLE },
	{ "docs", "file:///srv/docs/secret/a", false, false,
	  POL_REASON_RULE_DENY },
	{ "docs", "note://ask/1", false, true, POL_REASON_VISIBLE },
	{ "docs", "note://x/1", false, false, POL_REASON_NO_MATCHING_RULE },
	{ "docs", "file:///srv/docs/{name}", true, true, POL_REASON_VISIBLE },
	{ "docs", "file:///srv/docs/{name}", false, false, POL_REASON_BAD_URI },
	{ "docs", "file:///{path}", true, false, POL_REASON_NO_MATCHING_RULE },
	{ "docs", "file:///srv/docs/../{x}", true, false, POL_REASON_BAD_URI },
	{ NULL, "file:///srv/docs/a", false, false, POL_REASON_BAD_REQUEST },
};

START_TEST(resource_visible)
{
	enum pol_reason why;

	ck_assert(pol_resource_visible(pp, vq[_i].server, vq[_i].uri,
	    vq[_i].tmpl, &why) == vq[_i].visible);
	ck_assert_str_eq(pol_reason_name(why), pol_reason_name(vq[_i].reason));
}
END_TEST

static const struct {
	const char	*prompt, *args;
	enum pol_verdict v;
	enum pol_reason	 reason;
} pq[] = {
	{ "summarize", "{\"topic\":\"cats\"}", POL_ALLOW, POL_REASON_ALLOWED },
	{ "summarize", "{\"topic\":\"CATS; rm\"}", POL_DENY,
	  POL_REASON_ARGUMENT_CONSTRAINT },
	{ "summarize", "{\"topic\":\"a very long topic\"}", POL_DENY,
	  POL_REASON_ARGUMENT_CONSTRAINT },
	{ "summarize", "{}", POL_DENY, POL_REASON_MISSING_ARGUMENT },
	{ "summarize", "{\"topic\":\"x\",\"other\":\"y\"}", POL_DENY,
	  POL_REASON_UNKNOWN_ARGUMENT },
	{ "summarize", "[1]", POL_DENY, POL_REASON_BAD_ARGUMENTS },
	{ "secret", "{}", POL_DENY, POL_REASON_RULE_DENY },
	{ "review", "{\"anything\":\"goes\"}", POL_ASK,
	  POL_REASON_APPROVAL_REQUIRED },
	{ "nosuch", "{}", POL_DENY, POL_REASON_NO_MATCHING_RULE },
};

START_TEST(prompt_table)
{
	struct pol_tool_q q;
	struct pol_tool_decision d;
	enum pol_reason why;

	memset(&q, 0, sizeof(q));
	q.server = "docs";
	q.tool = pq[_i].prompt;
	q.args_json = pq[_i].args;
	pol_prompt_decide(pp, &q, &d);
	ck_assert_msg(d.d.verdict == pq[_i].v, "row %d: verdict %d (%s)", _i,
	    d.d.verdict, d.message);
	ck_assert_str_eq(pol_reason_name(d.d.reason),
	    pol_reason_name(pq[_i].reason));
	if (d.d.verdict == POL_DENY)
		ck_assert(strstr(d.message, "tool") == NULL);
	if (strcmp(pq[_i].prompt, "summarize") == 0 && d.d.verdict ==
	    POL_ALLOW) {
		ck_assert(d.taints);
		ck_assert_str_eq(d.classification, "secret");
	}
	ck_assert(pol_prompt_visible_q(pp, &q, &why) ==
	    (pq[_i].reason != POL_REASON_RULE_DENY &&
	    pq[_i].reason != POL_REASON_NO_MATCHING_RULE));
	/* Tool rules never open a prompt, nor prompt rules a tool. */
	pol_tool_decide(pp, &q, &d);
	ck_assert_int_eq(d.d.verdict, POL_DENY);
}
END_TEST

START_TEST(offers)
{
	ck_assert(pol_mcp_offers(pp, "docs", false));
	ck_assert(pol_mcp_offers(pp, "docs", true));
	ck_assert(pol_mcp_offers(pp, "web", false));
	ck_assert(!pol_mcp_offers(pp, "web", true));
	ck_assert(!pol_mcp_offers(NULL, "docs", true));
	ck_assert(!pol_mcp_offers(pp, NULL, false));
}
END_TEST

/* mcp.server_requests: the first entry for the server (or "*") decides
 * each kind; a kind left out, no entry, no policy: deny. */
static const char sr_text[] =
    "version: 1\nname: sr\nmcp:\n  server_requests:\n"
    "    - server: docs\n      sampling: ask\n      elicitation: allow\n"
    "    - server: mail\n      roots: allow\n      sampling: deny\n"
    "    - server: \"*\"\n      elicitation: ask\n"
    "    - server: late\n      sampling: allow\n";

static const struct {
	const char		*server;
	enum pol_sreq_kind	 kind;
	enum pol_verdict	 want;
} srq[] = {
	{ "docs", POL_SREQ_SAMPLING, POL_ASK },
	{ "docs", POL_SREQ_ELICITATION, POL_ALLOW },
	{ "docs", POL_SREQ_ROOTS, POL_DENY },		/* left out */
	{ "mail", POL_SREQ_SAMPLING, POL_DENY },
	{ "mail", POL_SREQ_ELICITATION, POL_DENY },
	{ "mail", POL_SREQ_ROOTS, POL_ALLOW },
	{ "other", POL_SREQ_ELICITATION, POL_ASK },	/* "*" */
	{ "other", POL_SREQ_SAMPLING, POL_DENY },
	{ "late", POL_SREQ_SAMPLING, POL_DENY },	/* "*" came first */
	{ "late", POL_SREQ_ELICITATION, POL_ASK },
	{ "docs", POL_SREQ_NKINDS, POL_DENY },		/* out of range */
	{ "docs", (enum pol_sreq_kind)-1, POL_DENY },
};

static struct pol_policy *
sr_load(const char *text)
{
	struct pol_errors *e = pol_errors_new(10);
	struct pol_policy *p;

	p = pol_policy_load_buf("sr.yaml", text, strlen(text), NULL, e);
	ck_assert_msg(p != NULL, "%s", pol_errors_count(e) > 0 ?
	    pol_errors_get(e, 0) : "?");
	pol_errors_free(e);
	return p;
}

START_TEST(server_requests)
{
	struct pol_policy *p = sr_load(sr_text);

	ck_assert_msg(pol_server_request(p, srq[_i].server, srq[_i].kind) ==
	    srq[_i].want, "row %d", _i);
	pol_policy_free(p);
}
END_TEST

START_TEST(server_requests_default_deny)
{
	struct pol_policy *p = sr_load("version: 1\nname: none\n");
	enum pol_sreq_kind k;

	for (k = 0; k < POL_SREQ_NKINDS; k++) {
		ck_assert_int_eq(pol_server_request(p, "docs", k), POL_DENY);
		ck_assert_int_eq(pol_server_request(NULL, "docs", k),
		    POL_DENY);
	}
	ck_assert_int_eq(pol_server_request(p, NULL, POL_SREQ_ROOTS),
	    POL_DENY);
	pol_policy_free(p);
}
END_TEST

static const struct {
	const char	*yaml, *error;
} bad[] = {
	{ "  resources:\n    - {uri: \"*\", decision: allow}\n",
	  "missing required key \"server\"" },
	{ "  resources:\n    - {server: docs}\n",
	  "missing required key \"decision\"" },
	{ "  resources:\n    - {server: docs, decision: maybe}\n",
	  "invalid decision" },
	{ "  resources:\n    - {server: docs, decision: allow, schemes: []}\n",
	  "schemes must not be empty" },
	{ "  resources:\n    - {server: docs, decision: allow, "
	  "schemes: [\"ht tp\"]}\n", "invalid URI scheme" },
	{ "  resources:\n    - {server: docs, decision: allow, "
	  "classification: top}\n", "invalid classification" },
	{ "  resources:\n    - {server: docs, decision: allow, "
	  "budgets: [nosuch]}\n", "unknown budget" },
	{ "  resources:\n    - {server: docs, decision: allow, "
	  "max_bytes: 0}\n", "max_bytes must be at least 1" },
	{ "  resources:\n    - {server: docs, decision: allow, tool: x}\n",
	  "unknown key" },
	{ "  resources:\n    - {server: Docs!, decision: allow}\n",
	  "invalid server name" },
	{ "  prompts:\n    - {prompt: docs/x, decision: allow, pin: "
	  "\"sha256:00\"}\n", "unknown key" },
	{ "  prompts:\n    - {decision: allow}\n",
	  "missing required key \"prompt\"" },
	{ "  prompts:\n    - {prompt: nosl, decision: allow}\n",
	  "invalid prompt reference" },
	{ "  prompts:\n    - {prompt: docs/x, decision: allow, args: "
	  "{a: {type: string}}, required: [b]}\n", "is not declared in args" },
	{ "  prompts: {a: 1}\n", "mcp.prompts" },
	{ "  server_requests: {docs: allow}\n", "mcp.server_requests" },
	{ "  server_requests:\n    - sampling: allow\n", "server is required" },
	{ "  server_requests:\n    - {server: docs, sampling: yes}\n",
	  "invalid \"yes\" (deny, ask or allow)" },
	{ "  server_requests:\n    - {server: docs, sampling: [allow]}\n",
	  "sampling" },
	{ "  server_requests:\n    - {server: docs, tools: allow}\n", "tools" },
	{ "  server_requests:\n    - {server: \"Bad Name\"}\n",
	  "invalid server" },
	{ "  server_requests:\n    - {server: docs}\n    - {server: docs}\n",
	  "is already in mcp.server_requests[0]" },
};

START_TEST(load_errors)
{
	char buf[1024];
	struct pol_errors *e = pol_errors_new(10);
	struct pol_policy *p;
	size_t i;
	bool found = false;

	snprintf(buf, sizeof(buf), "version: 1\nname: bad\nmcp:\n%s",
	    bad[_i].yaml);
	p = pol_policy_load_buf("bad.yaml", buf, strlen(buf), NULL, e);
	ck_assert_ptr_null(p);
	for (i = 0; i < pol_errors_count(e) && i < 10; i++)
		if (strstr(pol_errors_get(e, i), bad[_i].error) != NULL)
			found = true;
	ck_assert_msg(found, "row %d: wanted \"%s\", got \"%s\"", _i,
	    bad[_i].error, pol_errors_count(e) > 0 ? pol_errors_get(e, 0) :
	    "no error");
	pol_errors_free(e);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("policy_mcpres");
	TCase	*tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, resource_table, 0, sizeof(rq) / sizeof(rq[0]));
	tcase_add_test(tc, resource_budget);
	tcase_add_loop_test(tc, resource_visible, 0,
	    sizeof(vq) / sizeof(vq[0]));
	tcase_add_loop_test(tc, prompt_table, 0, sizeof(pq) / sizeof(pq[0]));
	tcase_add_test(tc, offers);
	tcase_add_loop_test(tc, server_requests, 0,
	    sizeof(srq) / sizeof(srq[0]));
	tcase_add_test(tc, server_requests_default_deny);
	tcase_add_loop_test(tc, load_errors, 0, sizeof(bad) / sizeof(bad[0]));
	suite_add_tcase(s, tc);
	return run_suite(s);
}
