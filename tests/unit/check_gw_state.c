/*
 * check_gw_state: the daemon's core state (gateway/gw.c) against the real
 * policy loader, with policy files in a temporary directory. What users rely
 * on: status shows the policies in force with their digests; a reload is all
 * or nothing (a broken file, even next to a valid edit, changes nothing and
 * is counted and remembered); a policy set a user still holds survives a
 * reload; /metrics text carries the counters.
 */
#include <sys/stat.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "gateway/ctl/ctl.h"
#include "gateway/ev.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "policy/policy.h"

static char		 tdir[128];
static char		 pdir[192];
static struct gw	*gw;

static void
write_file(const char *name, const char *text)
{
	char path[512];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", pdir, name);
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	fputs(text, fp);
	ck_assert_int_eq(fclose(fp), 0);
}

static void
remove_file(const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", pdir, name);
	ck_assert_int_eq(unlink(path), 0);
}

/* Hex SHA-256 of a file's bytes, as pol_policy_digest promises. */
static void
file_sha256(const char *name, char out[65])
{
	unsigned char md[32], buf[65536];
	char path[512];
	unsigned int mdlen = 0, i;
	size_t n;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", pdir, name);
	ck_assert_ptr_nonnull(fp = fopen(path, "rb"));
	n = fread(buf, 1, sizeof(buf), fp);
	fclose(fp);
	ck_assert_int_eq(EVP_Digest(buf, n, md, &mdlen, EVP_sha256(), NULL),
	    1);
	for (i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static struct gw *
start(void)
{
	struct pol_errors *errs = pol_errors_new(16);
	struct pol_config *cfg;
	struct pol_set *set;
	char path[256];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/sluice.yaml", tdir);
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	fprintf(fp, "version: 1\nstate_dir: %s/state\nrun_dir: %s/run\n"
	    "policy_dir: %s\ndns:\n  upstreams: [192.0.2.53]\n", tdir, tdir,
	    pdir);
	ck_assert_int_eq(fclose(fp), 0);
	cfg = pol_config_load(path, errs);
	ck_assert_msg(cfg != NULL, "%s", pol_errors_get(errs, 0));
	set = pol_set_load_dir(pdir, cfg, errs);
	ck_assert_msg(set != NULL, "%s", pol_errors_get(errs, 0));
	pol_errors_free(errs);
	return gw_new(cfg, set);
}

static void
setup(void)
{
	log_init(1, "check_gw_state");
	snprintf(tdir, sizeof(tdir), "/tmp/check_gw.%ld.XXXXXX",
	    (long)getpid());
	ck_assert_ptr_nonnull(mkdtemp(tdir));
	snprintf(pdir, sizeof(pdir), "%s/policies", tdir);
	ck_assert_int_eq(mkdir(pdir, 0700), 0);
	write_file("alpha.yaml", "version: 1\nname: alpha\n");
	write_file("beta.yml", "version: 1\nname: beta\n");
	ck_assert_ptr_nonnull(gw = start());
}

static void
teardown(void)
{
	char cmd[256];

	gw_free(gw);
	gw = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	(void)system(cmd);
}

static json_t *
status(void)
{
	json_t *s = gw_status_json(gw);

	ck_assert_ptr_nonnull(s);
	return s;
}

static json_int_t
sint(json_t *s, const char *k)
{
	ck_assert_msg(json_is_integer(json_object_get(s, k)), "%s", k);
	return json_integer_value(json_object_get(s, k));
}

/* "alpha=<digest>,beta=<digest>" of the set in force. */
static char *
fingerprint(void)
{
	json_t *s = status(), *p;
	char *out = calloc(1, 4096);
	size_t i;

	json_array_foreach(json_object_get(s, "policies"), i, p) {
		snprintf(out + strlen(out), 4096 - strlen(out), "%s%s=%s",
		    i ? "," : "",
		    json_string_value(json_object_get(p, "name")),
		    json_string_value(json_object_get(p, "digest")));
	}
	json_decref(s);
	return out;
}

/* ------------------------------------------------------------------ Core */

START_TEST(status_at_start)
{
	json_t *s = status(), *pols;
	char want[65];

	ck_assert_str_eq(json_string_value(json_object_get(s, "version")),
	    SLUICE_VERSION);
	ck_assert_int_eq(sint(s, "pid"), getpid());
	ck_assert_int_ge(sint(s, "uptime_s"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(s, "policy_dir")),
	    pdir);
	pols = json_object_get(s, "policies");
	ck_assert_int_eq(json_array_size(pols), 2);
	ck_assert_int_eq(sint(s, "policies_loaded"), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(pols,
	    0), "name")), "alpha");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(pols,
	    1), "name")), "beta");
	file_sha256("alpha.yaml", want);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(
	    json_array_get(pols, 0), "digest")), want));
	ck_assert_int_eq(sint(s, "reloads_ok"), 0);
	ck_assert_int_eq(sint(s, "reload_failures"), 0);
	ck_assert(json_is_null(json_object_get(s, "last_reload_error")));
	ck_assert(json_is_null(json_object_get(s, "last_reload_at")));
	ck_assert_int_eq(sint(s, "sandboxes"), 0);
	json_decref(s);
}
END_TEST

START_TEST(reload_adopts_changes)
{
	json_t *s;
	char want[65], *fp;

	write_file("gamma.yaml", "version: 1\nname: gamma\n");
	write_file("alpha.yaml", "version: 1\nname: alpha\n# edited\n");
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	s = status();
	ck_assert_int_eq(sint(s, "policies_loaded"), 3);
	ck_assert_int_eq(sint(s, "reloads_ok"), 1);
	ck_assert_int_eq(sint(s, "reload_failures"), 0);
	ck_assert(json_is_integer(json_object_get(s, "last_reload_at")));
	json_decref(s);
	file_sha256("alpha.yaml", want);
	fp = fingerprint();
	ck_assert_ptr_nonnull(strstr(fp, want));
	ck_assert_ptr_nonnull(strstr(fp, "gamma="));
	free(fp);
	/* A removed file goes away on reload too. */
	remove_file("gamma.yaml");
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	fp = fingerprint();
	ck_assert_ptr_null(strstr(fp, "gamma="));
	free(fp);
}
END_TEST

START_TEST(broken_reload_changes_nothing)
{
	struct pol_errors *errs = pol_errors_new(16);
	char *before, *after, want[600];
	json_t *s, *le;

	before = fingerprint();
	/* A valid edit next to a broken file must not be adopted. */
	write_file("alpha.yaml", "version: 1\nname: alpha\n# edited\n");
	write_file("zz.yaml", "version: 1\nname: zz\nbogus: true\n");
	ck_assert_int_eq(gw_reload(gw, errs), -1);
	ck_assert_uint_ge(pol_errors_count(errs), 1);
	snprintf(want, sizeof(want), "%s/zz.yaml:3:1: ", pdir);
	ck_assert_msg(strncmp(pol_errors_get(errs, 0), want, strlen(want)) ==
	    0, "%s", pol_errors_get(errs, 0));
	after = fingerprint();
	ck_assert_str_eq(before, after);
	s = status();
	ck_assert_int_eq(sint(s, "reload_failures"), 1);
	ck_assert_int_eq(sint(s, "reloads_ok"), 0);
	ck_assert_int_eq(sint(s, "policies_loaded"), 2);
	le = json_object_get(s, "last_reload_error");
	ck_assert(json_is_array(le));
	ck_assert_str_eq(json_string_value(json_array_get(le, 0)),
	    pol_errors_get(errs, 0));
	json_decref(s);
	/* Fixed: the edit is adopted and the error forgotten. */
	remove_file("zz.yaml");
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	s = status();
	ck_assert(json_is_null(json_object_get(s, "last_reload_error")));
	ck_assert_int_eq(sint(s, "reload_failures"), 1);
	ck_assert_int_eq(sint(s, "reloads_ok"), 1);
	json_decref(s);
	free(after);
	after = fingerprint();
	ck_assert_str_ne(before, after);
	free(before);
	free(after);
	pol_errors_free(errs);
}
END_TEST

START_TEST(held_set_survives_reload)
{
	struct gw_pset *old = gw_pset_ref(gw), *cur;
	const struct pol_set *s;

	write_file("alpha.yaml", "version: 1\nname: alpha\n# v2\n");
	write_file("delta.yaml", "version: 1\nname: delta\n");
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	/* The holder still reads the set it took (ASan would catch a free). */
	s = gw_pset_set(old);
	ck_assert_uint_eq(pol_set_count(s), 2);
	ck_assert_str_eq(pol_policy_name(pol_set_at(s, 0)), "alpha");
	cur = gw_pset_ref(gw);
	ck_assert_ptr_ne(cur, old);
	ck_assert_uint_eq(pol_set_count(gw_pset_set(cur)), 3);
	gw_pset_unref(old);
	gw_pset_unref(cur);
	gw_pset_unref(NULL);
}
END_TEST

START_TEST(metrics_text)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *fp;

	write_file("zz.yaml", "not: [valid\n");
	ck_assert_int_eq(gw_reload(gw, NULL), -1);
	remove_file("zz.yaml");
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	ck_assert_int_eq(gw_reload(gw, NULL), 0);
	ck_assert_ptr_nonnull(fp = open_memstream(&buf, &len));
	gw_metrics_print(gw, NULL, fp);
	fclose(fp);
	ck_assert_ptr_nonnull(strstr(buf, "\nsluice_up 1\n"));
	ck_assert_ptr_nonnull(strstr(buf, "# TYPE sluice_up gauge\n"));
	ck_assert_ptr_nonnull(strstr(buf, "\nsluice_policies_loaded 2\n"));
	ck_assert_ptr_nonnull(strstr(buf,
	    "\nsluice_reloads_total{result=\"ok\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(buf,
	    "\nsluice_reloads_total{result=\"error\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(buf,
	    "\nsluice_build_info{version=\"" SLUICE_VERSION "\"} 1\n"));
	/* Without a ctl there are no request counters to print. */
	ck_assert_ptr_null(strstr(buf, "sluice_control_requests_total"));
	free(buf);
}
END_TEST

START_TEST(routes_registered_once)
{
	struct ev_loop *loop = ev_new();
	struct ctl *ctl = ctl_new(loop);

	ck_assert_int_eq(gw_routes(gw, ctl), 0);
	/* The same endpoints twice is a programming error, refused. */
	ck_assert_int_eq(gw_routes(gw, ctl), -1);
	ck_assert_int_eq(errno, EINVAL);
	ctl_free(ctl);
	ev_free(loop);
}
END_TEST

START_TEST(new_and_free_edges)
{
	struct pol_errors *errs = pol_errors_new(4);
	char path[256];

	gw_free(NULL);
	errno = 0;
	ck_assert_ptr_null(gw_new(NULL, NULL));
	ck_assert_int_eq(errno, EINVAL);
	/* A set without a config is freed, not leaked (LeakSanitizer). */
	snprintf(path, sizeof(path), "%s", pdir);
	ck_assert_ptr_null(gw_new(NULL, pol_set_load_dir(path, NULL, errs)));
	pol_errors_free(errs);
}
END_TEST

/* ---------------------------------------------------------------- Limits */

static const char *const hostile[] = {
	"\x01\x02\xff\xfe\x7f",				/* binary */
	"version: 1\nname: a\nname: b\n",		/* duplicate key */
	"version: 2\nname: x\n",			/* unknown version */
	"- just\n- a list\n",				/* wrong top type */
	"a: &a [*a, *a]\n",				/* self alias */
	"version: 1\nname: \"\\xff\"\n",		/* bad name */
	"version: 1\nname: beta\n",			/* name taken by beta.yml */
};

START_TEST(hostile_file_changes_nothing)
{
	char *before = fingerprint(), *after;
	json_t *s;

	write_file("zz.yaml", hostile[_i]);
	ck_assert_int_eq(gw_reload(gw, NULL), -1);
	after = fingerprint();
	ck_assert_str_eq(before, after);
	s = status();
	ck_assert_int_eq(sint(s, "reload_failures"), 1);
	ck_assert_uint_ge(json_array_size(json_object_get(s,
	    "last_reload_error")), 1);
	json_decref(s);
	free(before);
	free(after);
}
END_TEST

START_TEST(missing_dir_changes_nothing)
{
	char *before = fingerprint(), *after, cmd[300];
	json_t *s;

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", pdir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(gw_reload(gw, NULL), -1);
	after = fingerprint();
	ck_assert_str_eq(before, after);
	s = status();
	ck_assert_int_eq(sint(s, "reload_failures"), 1);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_array_get(
	    json_object_get(s, "last_reload_error"), 0)), pdir));
	json_decref(s);
	free(before);
	free(after);
}
END_TEST

START_TEST(many_errors_are_capped)
{
	json_t *s, *le;
	char name[32];
	int i;

	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "bad%03d.yaml", i);
		write_file(name, "version: 1\nbogus: 1\n");
	}
	ck_assert_int_eq(gw_reload(gw, NULL), -1);
	s = status();
	le = json_object_get(s, "last_reload_error");
	ck_assert(json_is_array(le));
	/* Bounded, and says that more were left out. */
	ck_assert_uint_le(json_array_size(le), 65);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_array_get(le,
	    json_array_size(le) - 1)), "more errors"));
	ck_assert_int_eq(sint(s, "policies_loaded"), 2);
	json_decref(s);
}
END_TEST

static Suite *
gw_suite(void)
{
	Suite *s = suite_create("gw_state");
	TCase *core = tcase_create("Core");
	TCase *lim = tcase_create("Limits");

	tcase_add_checked_fixture(core, setup, teardown);
	tcase_add_test(core, status_at_start);
	tcase_add_test(core, reload_adopts_changes);
	tcase_add_test(core, broken_reload_changes_nothing);
	tcase_add_test(core, held_set_survives_reload);
	tcase_add_test(core, metrics_text);
	tcase_add_test(core, routes_registered_once);
	tcase_add_test(core, new_and_free_edges);
	suite_add_tcase(s, core);

	tcase_add_checked_fixture(lim, setup, teardown);
	tcase_set_timeout(lim, 60);
	tcase_add_loop_test(lim, hostile_file_changes_nothing, 0,
	    sizeof(hostile) / sizeof(hostile[0]));
	tcase_add_test(lim, missing_dir_changes_nothing);
	tcase_add_test(lim, many_errors_are_capped);
	suite_add_tcase(s, lim);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(gw_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
