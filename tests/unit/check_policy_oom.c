/*
 * check_policy_oom: the loaders stay all-or-nothing when memory runs out,
 * and redaction fails closed.
 *
 * A loader that meets a failed allocation and carries on can hand the daemon
 * a policy missing a port list, a deny rule, a budget or a redaction pattern:
 * the file read fine, so nobody would know the rule was never enforced. The
 * contract is "NULL on any error; nothing is half-loaded", and this suite
 * holds the loaders to it at every allocation they make: it counts the
 * allocations of a good load, then repeats the load once per allocation with
 * exactly that one failing, and requires each such load to fail with an
 * error. The link wraps the allocators (-Wl,--wrap, see the Makefile), so
 * the injection reaches every allocation policy/ makes itself; allocations
 * inside libc and PCRE2 are out of its reach and report failure through
 * their own return values.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE		/* vasprintf */
#endif
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "tests/unit/oom_fixture.h"

#define CONFIG		"tests/policy/config.yaml"	/* names every server */
#define POLICY_DIR	"examples/policies"

/* ----------------------------------------------------- allocation faults */

void	*__real_reallocarray(void *, size_t, size_t);
char	*__real_strdup(const char *);
char	*__real_strndup(const char *, size_t);

void *
__wrap_reallocarray(void *p, size_t n, size_t sz)
{
	return oom_fault() ? NULL : __real_reallocarray(p, n, sz);
}

char *
__wrap_strdup(const char *s)
{
	return oom_fault() ? NULL : __real_strdup(s);
}

char *
__wrap_strndup(const char *s, size_t n)
{
	return oom_fault() ? NULL : __real_strndup(s, n);
}

int
__wrap_asprintf(char **out, const char *fmt, ...)
{
	va_list	ap;
	int	r;

	if (oom_fault()) {
		*out = NULL;
		return -1;
	}
	va_start(ap, fmt);
	r = vasprintf(out, fmt, ap);	/* not wrapped */
	va_end(ap);
	return r;
}

/* ------------------------------------------------------------------ tests */

static struct pol_config *
config(struct pol_errors *e)
{
	struct pol_config *cfg = pol_config_load(CONFIG, e);

	ck_assert_msg(cfg != NULL, "%s: %s", CONFIG, pol_errors_get(e, 0));
	return cfg;
}

/* One loader run: true when it returned something (and frees it). */
typedef bool	 load_fn(const char *, const struct pol_config *,
		    struct pol_errors *);

static bool
load_policy(const char *path, const struct pol_config *cfg,
    struct pol_errors *e)
{
	struct pol_policy *p = pol_policy_load(path, cfg, e);

	pol_policy_free(p);
	return p != NULL;
}

static bool
load_config(const char *path, const struct pol_config *cfg,
    struct pol_errors *e)
{
	struct pol_config *c = pol_config_load(path, e);

	(void)cfg;
	pol_config_free(c);
	return c != NULL;
}

static bool
load_dir(const char *path, const struct pol_config *cfg,
    struct pol_errors *e)
{
	struct pol_set *s = pol_set_load_dir(path, cfg, e);

	pol_set_free(s);
	return s != NULL;
}

/* sweep: a clean run of load over path must succeed; then, once per
 * allocation that run made, the same run with that allocation failing must
 * fail and report an error. The failures are listed together, each as
 * "N loaded" or "N silent" (OOM_TRACE=N shows where N is made). */
static void
sweep(load_fn *load, const char *path, const struct pol_config *cfg)
{
	struct pol_errors	*e = pol_errors_new(8);
	char			 bad[512];
	size_t			 blen = 0;
	long			 n, i, nbad = 0;
	bool			 ok;

	ck_assert_ptr_nonnull(e);
	arm(-1);
	ok = load(path, cfg, e);
	n = disarm();
	ck_assert_msg(ok, "%s: %s", path, pol_errors_get(e, 0));
	ck_assert_int_gt(n, 10);
	pol_errors_free(e);

	bad[0] = '\0';
	for (i = 0; i < n; i++) {
		ck_assert_ptr_nonnull(e = pol_errors_new(8));
		arm(i);
		ok = load(path, cfg, e);
		disarm();
		if (ok || pol_errors_count(e) == 0) {
			nbad++;
			if (blen < sizeof(bad) - 32)
				blen += (size_t)snprintf(bad + blen,
				    sizeof(bad) - blen, " %ld %s", i,
				    ok ? "loaded" : "silent");
		}
		pol_errors_free(e);
	}
	ck_assert_msg(nbad == 0, "%s: %ld of %ld failed allocations were not "
	    "refused with an error:%s", path, nbad, n, bad);
}

/* The example files, the ones a deployment starts from: between them they
 * use every section (egress, dns, mcp tools with args, labels, pins,
 * budgets, redaction). */
static const char *const policies[] = {
	POLICY_DIR "/coding-agent.yaml",
	POLICY_DIR "/data-analyst.yaml",
	POLICY_DIR "/locked-down.yaml",
};

START_TEST(policy_load_fails_whole)
{
	struct pol_errors	*e = pol_errors_new(8);
	struct pol_config	*cfg = config(e);

	sweep(load_policy, policies[_i], cfg);
	pol_config_free(cfg);
	pol_errors_free(e);
}
END_TEST

/* Both configs: the example (sinks, servers) and the tests' own. */
START_TEST(config_load_fails_whole)
{
	sweep(load_config, _i == 0 ? CONFIG : "examples/sluice.yaml", NULL);
}
END_TEST

START_TEST(set_load_fails_whole)
{
	struct pol_errors	*e = pol_errors_new(8);
	struct pol_config	*cfg = config(e);

	sweep(load_dir, POLICY_DIR, cfg);
	pol_config_free(cfg);
	pol_errors_free(e);
}
END_TEST

/*
 * Redaction fails closed: with any one of its allocations failing it
 * reports ENOMEM (the bridge then withholds the result) or gives the same
 * redacted text as with memory, never a text with a credential left in.
 * The input takes every path that allocates: encoded forms, levels of
 * escapes of each kind, the forms of a secret holding what a level undoes,
 * \x read both ways, wrapped base64 and a built-in class.
 */
#define REDACT_POLICY							\
	"version: 1\nname: r\nmcp:\n  results:\n"			\
	"    redact: [upstream_credentials, bearer_tokens]\n"

START_TEST(redact_fails_closed)
{
	static const char *const secrets[] = { "s3cr3t-upstream-token-XYZ",
	    "pa%41ss-wd-9", "p\xc3\xa4ssw\xc3\xb6rd-1" };
	static const char in[] = "a \\u0073\\x33cr3t-upstream-token-XYZ "
	    "&#115;3cr3t-upstream-token-XYZ %5Cu0070a%2541ss-wd-9 "
	    "'p\\xe4ssw\\xf6rd-1' Bearer abcdefgh123 "
	    "7333637233742d757073747265616d2d746f6b656e2d58595a "
	    "czNjcjN0LXVwc3RyZWFt\nLXRva2VuLVhZWg==";
	struct pol_errors	*e = pol_errors_new(8);
	struct pol_policy	*p;
	char			*want = NULL, *out;
	long			 n, i;
	int			 rc;

	ck_assert_ptr_nonnull(e);
	p = pol_policy_load_buf("r.yaml", REDACT_POLICY,
	    strlen(REDACT_POLICY), NULL, e);
	ck_assert_ptr_nonnull(p);
	arm(-1);
	rc = pol_redact(p, secrets, 3, in, strlen(in), &want, NULL, NULL);
	n = disarm();
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(want, "a [REDACTED:credential] [REDACTED:credential] "
	    "[REDACTED:credential] '[REDACTED:credential]' "
	    "Bearer [REDACTED:bearer_token] [REDACTED:credential] "
	    "[REDACTED:credential]");
	ck_assert_int_gt(n, 20);
	for (i = 0; i < n; i++) {
		out = NULL;
		errno = 0;
		arm(i);
		rc = pol_redact(p, secrets, 3, in, strlen(in), &out, NULL,
		    NULL);
		disarm();
		if (rc == 0)
			ck_assert_msg(strcmp(out, want) == 0,
			    "allocation %ld: %s", i, out);
		else
			ck_assert_msg(errno == ENOMEM && out == NULL,
			    "allocation %ld: errno %d", i, errno);
		free(out);
		/* pol_holds_secret: found, or cannot tell; never "no". */
		arm(i);
		rc = pol_holds_secret(secrets, 3, in + 2, 33);
		disarm();
		ck_assert_msg(rc == 1 || (rc == -1 && errno == ENOMEM),
		    "allocation %ld: holds_secret %d", i, rc);
	}
	free(want);
	pol_policy_free(p);
	pol_errors_free(e);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("policy_oom");
	TCase	*tc = tcase_create("Core");
	SRunner	*sr;
	int	 nf;

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, policy_load_fails_whole, 0,
	    (int)(sizeof(policies) / sizeof(policies[0])));
	tcase_add_loop_test(tc, config_load_fails_whole, 0, 2);
	tcase_add_test(tc, set_load_fails_whole);
	tcase_add_test(tc, redact_fails_closed);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
