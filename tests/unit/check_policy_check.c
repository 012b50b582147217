/*
 * check_policy_check: which name check the gate applies to a TCP flow
 * (policy/check.c, pol_egress_check), and the `check:` key the loader
 * takes only where it means something.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

static const char text[] =
"version: 1\n"
"name: checks\n"
"egress:\n"
"  allow:\n"
"    - {host: pypi.org, ports: [443, 80, 22, 8443]}\n"
"    - {host: \"*.example.org\", ports: [8080], check: http}\n"
"    - {host: git.example.org, ports: [443], check: none}\n"
"    - {host: tls.example.org, ports: [9000], check: tls}\n"
"    - {cidr: 203.0.113.0/24, ports: [443]}\n"
"  deny:\n"
"    - host: bad.example.org\n"
"mcp:\n"
"  taint:\n"
"    level: confidential\n"
"    keep:\n"
"      - {host: pypi.org, ports: [443]}\n"
"      - {host: keep.example.org, ports: [443], check: none}\n";

static struct pol_policy *p;

static void
setup(void)
{
	struct pol_errors *e = pol_errors_new(8);

	p = pol_policy_load_buf("checks.yaml", text, sizeof(text) - 1, NULL, e);
	ck_assert_msg(p != NULL, "%s", pol_errors_get(e, 0));
	pol_errors_free(e);
}

static void
teardown(void)
{
	pol_policy_free(p);
}

static const struct {
	const char	*name;
	uint16_t	 port;
	bool		 tainted;
	enum pol_verdict v;
	enum pol_check	 check;
} rows[] = {
	{ "pypi.org", 443, false, POL_ALLOW, POL_CHECK_TLS },
	{ "PyPI.org.", 80, false, POL_ALLOW, POL_CHECK_HTTP },
	{ "pypi.org", 22, false, POL_ALLOW, POL_CHECK_NONE },
	{ "pypi.org", 8443, false, POL_ALLOW, POL_CHECK_NONE },
	{ "pypi.org", 8080, false, POL_DENY, POL_CHECK_NONE },
	{ "a.example.org", 8080, false, POL_ALLOW, POL_CHECK_HTTP },
	{ "git.example.org", 443, false, POL_ALLOW, POL_CHECK_NONE },
	{ "tls.example.org", 9000, false, POL_ALLOW, POL_CHECK_TLS },
	{ "bad.example.org", 8080, false, POL_DENY, POL_CHECK_NONE },
	{ "evil.example", 443, false, POL_DENY, POL_CHECK_NONE },
	/* tainted: the keep list's rules, their checks */
	{ "pypi.org", 443, true, POL_ALLOW, POL_CHECK_TLS },
	{ "keep.example.org", 443, true, POL_ALLOW, POL_CHECK_NONE },
	{ "git.example.org", 443, true, POL_DENY, POL_CHECK_NONE },
	/* an address is never a name the gate checks */
	{ "203.0.113.5", 443, false, POL_ALLOW, POL_CHECK_NONE },
};

START_TEST(check_table)
{
	struct pol_decision d;
	enum pol_check c = POL_CHECK_HTTP;

	pol_egress_check(p, rows[_i].name, rows[_i].port, rows[_i].tainted,
	    &d, &c);
	ck_assert_msg(d.verdict == rows[_i].v, "row %d: verdict %d (%s)", _i,
	    d.verdict, d.rule);
	ck_assert_msg(c == rows[_i].check, "row %d: check %s", _i,
	    pol_check_name(c));
}
END_TEST

static const struct {
	const char	*rule;
	const char	*msg;
} bad[] = {
	{ "    - {cidr: 192.0.2.0/24, ports: [443], check: tls}\n",
	    "check applies to host allow rules over tcp only" },
	{ "    - {host: a.example, ports: [53], protocol: udp, check: tls}\n",
	    "check applies to host allow rules over tcp only" },
	{ "    - {host: a.example, ports: [443], check: quic}\n",
	    "invalid check \"quic\" (tls, http or none)" },
	{ "    - {host: a.example, ports: [443], check: [tls]}\n", "check" },
};

START_TEST(check_key_refused)
{
	char buf[512];
	struct pol_errors *e = pol_errors_new(8);
	struct pol_policy *q;

	snprintf(buf, sizeof(buf), "version: 1\nname: bad\negress:\n"
	    "  allow:\n%s", bad[_i].rule);
	q = pol_policy_load_buf("bad.yaml", buf, strlen(buf), NULL, e);
	ck_assert_ptr_null(q);
	ck_assert_msg(strstr(pol_errors_get(e, 0), bad[_i].msg) != NULL,
	    "row %d: %s", _i, pol_errors_get(e, 0));
	pol_errors_free(e);
}
END_TEST

START_TEST(check_deny_refused)
{
	static const char t[] = "version: 1\nname: bad\negress:\n  deny:\n"
	    "    - {host: a.example, check: tls}\n";
	struct pol_errors *e = pol_errors_new(8);

	ck_assert_ptr_null(pol_policy_load_buf("bad.yaml", t, sizeof(t) - 1,
	    NULL, e));
	ck_assert_ptr_nonnull(strstr(pol_errors_get(e, 0), "check applies"));
	pol_errors_free(e);
}
END_TEST

START_TEST(names)
{
	ck_assert_str_eq(pol_check_name(POL_CHECK_NONE), "none");
	ck_assert_str_eq(pol_check_name(POL_CHECK_TLS), "tls");
	ck_assert_str_eq(pol_check_name(POL_CHECK_HTTP), "http");
	ck_assert_str_eq(pol_check_name((enum pol_check)7), "unknown_check");
	ck_assert_str_eq(pol_reason_name(POL_REASON_NAME_MISMATCH),
	    "name_mismatch");
	ck_assert_str_eq(pol_reason_name(POL_REASON_NO_NAME), "no_name");
	ck_assert_str_eq(pol_reason_name(POL_REASON_ECH), "ech");
	ck_assert_str_eq(pol_reason_name(POL_REASON_NOT_TLS), "not_tls");
	ck_assert_str_eq(pol_reason_name(POL_REASON_NOT_HTTP), "not_http");
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("policy_check");
	TCase	*tc = tcase_create("Core");
	SRunner	*sr;
	int	 nf;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, check_table, 0, sizeof(rows) / sizeof(rows[0]));
	tcase_add_loop_test(tc, check_key_refused, 0,
	    sizeof(bad) / sizeof(bad[0]));
	tcase_add_test(tc, check_deny_refused);
	tcase_add_test(tc, names);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
