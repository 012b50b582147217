/*
 * check_policy_resources: a policy's `resources:` section, by table: the
 * values it takes (sizes, cores with decimals, durations) and what each
 * malformed value is refused with, at its FILE:LINE:COL; and the cores
 * parser alone, which is the section's own syntax.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

static const struct {
	const char	*s;
	int		 ok;
	uint32_t	 milli;
} cpus[] = {
	{ "1", 1, 1000 }, { "1.5", 1, 1500 }, { "0.25", 1, 250 },
	{ "0.01", 1, 10 }, { "1024", 1, 1024000 }, { "2.125", 1, 2125 },
	{ "0", 0, 0 }, { "0.001", 0, 0 }, { "1025", 0, 0 }, { "1.", 0, 0 },
	{ ".5", 0, 0 }, { "-1", 0, 0 }, { "+1", 0, 0 }, { "1e3", 0, 0 },
	{ "01", 0, 0 }, { "1.2345", 0, 0 }, { "", 0, 0 }, { "1 ", 0, 0 },
	{ "99999999", 0, 0 },
};

START_TEST(cpu_parse)
{
	uint32_t m = 7;
	int rc = pol_parse_cpu(cpus[_i].s, &m);

	ck_assert_msg((rc == 0) == cpus[_i].ok, "\"%s\": rc %d", cpus[_i].s,
	    rc);
	if (cpus[_i].ok)
		ck_assert_uint_eq(m, cpus[_i].milli);
	else
		ck_assert_uint_eq(m, 7);
}
END_TEST

static struct pol_policy *
load(const char *text, struct pol_errors *e)
{
	return pol_policy_load_buf("r.yaml", text, strlen(text), NULL, e);
}

START_TEST(values)
{
	struct pol_errors *e = pol_errors_new(10);
	struct pol_policy *p;
	const struct pol_resources *r;

	p = load("version: 1\nname: r\nresources:\n  pids: 64\n"
	    "  memory: 64MiB\n  cpu: 1.5\n  timeout: 2s\n  idle: 30m\n", e);
	ck_assert_msg(p != NULL, "%s", pol_errors_get(e, 0));
	r = pol_policy_resources(p);
	ck_assert_uint_eq(r->pids, 64);
	ck_assert_uint_eq(r->memory, 64ULL << 20);
	ck_assert_uint_eq(r->cpu_milli, 1500);
	ck_assert_uint_eq(r->timeout_s, 2);
	ck_assert_uint_eq(r->idle_s, 1800);
	pol_policy_free(p);
	/* No section: no limits at all. */
	p = load("version: 1\nname: r\n", e);
	ck_assert_ptr_nonnull(p);
	r = pol_policy_resources(p);
	ck_assert(r->pids == 0 && r->memory == 0 && r->cpu_milli == 0 &&
	    r->timeout_s == 0 && r->idle_s == 0);
	pol_policy_free(p);
	pol_errors_free(e);
}
END_TEST

static const struct {
	const char	*yaml;	/* the resources: lines */
	const char	*want;	/* the first error, exactly */
} bad[] = {
	{ "  pids: 0\n", "r.yaml:4:9: resources.pids must be at least 1" },
	{ "  pids: -3\n", "r.yaml:4:9: expected an integer from 0 to 4194304" },
	{ "  pids: 4194305\n", "r.yaml:4:9: " },
	{ "  memory: 64MB\n", "r.yaml:4:11: invalid size \"64MB\"" },
	{ "  memory: 512KiB\n",
	  "r.yaml:4:11: resources.memory must be at least 1MiB" },
	{ "  cpu: 1,5\n", "r.yaml:4:8: invalid cpu \"1,5\"" },
	{ "  cpu: [1]\n", "r.yaml:4:8: invalid cpu \"list\"" },
	{ "  timeout: 2\n", "r.yaml:4:12: invalid duration \"2\"" },
	{ "  timeout: 0s\n",
	  "r.yaml:4:12: resources.timeout must be at least 1s" },
	{ "  idle: soon\n", "r.yaml:4:9: invalid duration \"soon\"" },
	{ "  swap: 1GiB\n", "r.yaml:4:3: " },
};

START_TEST(errors)
{
	struct pol_errors *e = pol_errors_new(10);
	char text[256];
	struct pol_policy *p;

	snprintf(text, sizeof(text), "version: 1\nname: r\nresources:\n%s",
	    bad[_i].yaml);
	p = load(text, e);
	ck_assert_ptr_null(p);
	ck_assert_uint_ge(pol_errors_count(e), 1);
	ck_assert_msg(strncmp(pol_errors_get(e, 0), bad[_i].want,
	    strlen(bad[_i].want)) == 0, "%s: got \"%s\", want \"%s...\"",
	    bad[_i].yaml, pol_errors_get(e, 0), bad[_i].want);
	pol_errors_free(e);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("policy_resources");
	TCase	*tc = tcase_create("Core");
	SRunner	*sr;
	int	 nf;

	tcase_add_loop_test(tc, cpu_parse, 0, sizeof(cpus) / sizeof(cpus[0]));
	tcase_add_test(tc, values);
	tcase_add_loop_test(tc, errors, 0, sizeof(bad) / sizeof(bad[0]));
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
