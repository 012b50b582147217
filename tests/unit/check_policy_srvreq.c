/*
 * check_policy_srvreq: mcp.server_requests (policy/srvreq.c), by table:
 * what an upstream may ask of the agent's client per server and kind, the
 * default deny (no key, no entry, a kind left out, NULL), first entry wins
 * with "*", and every malformed entry refused with its message.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"
#include "tests/unit/run_suite.h"

static const char policy_text[] =
    "version: 1\nname: sr\nmcp:\n  server_requests:\n"
    "    - server: docs\n      sampling: ask\n      elicitation: allow\n"
    "    - server: mail\n      roots: allow\n      sampling: deny\n"
    "    - server: \"*\"\n      elicitation: ask\n"
    "    - server: late\n      sampling: allow\n";

static const struct {
	const char		*server;
	enum pol_sreq_kind	 kind;
	enum pol_verdict	 want;
} rows[] = {
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
load(const char *text)
{
	struct pol_errors *e = pol_errors_new(10);
	struct pol_policy *p;

	p = pol_policy_load_buf("sr.yaml", text, strlen(text), NULL, e);
	ck_assert_msg(p != NULL, "%s", pol_errors_count(e) > 0 ?
	    pol_errors_get(e, 0) : "?");
	pol_errors_free(e);
	return p;
}

START_TEST(decide)
{
	struct pol_policy *p = load(policy_text);

	ck_assert_msg(pol_server_request(p, rows[_i].server, rows[_i].kind) ==
	    rows[_i].want, "row %d", _i);
	pol_policy_free(p);
}
END_TEST

START_TEST(default_deny)
{
	struct pol_policy *p = load("version: 1\nname: none\n");
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

static const struct { const char *yaml, *error; } bad[] = {
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
	char buf[512];
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
	Suite	*s = suite_create("policy_srvreq");
	TCase	*tc = tcase_create("core");

	tcase_add_loop_test(tc, decide, 0, sizeof(rows) / sizeof(rows[0]));
	tcase_add_test(tc, default_deny);
	tcase_add_loop_test(tc, load_errors, 0, sizeof(bad) / sizeof(bad[0]));
	suite_add_tcase(s, tc);
	return run_suite(s);
}
