/*
 * check_policy_hostile: every file in tests/policy/hostile/ must be refused
 * with exactly the errors in its .expect file, plus hostile inputs too big
 * to commit (generated here into a temporary directory).
 *
 * The directory is the regression corpus for the policy loader: adding a
 * hostile case is adding NAME.yaml and NAME.expect, no code. Tests run with
 * the repository top as the current directory.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/policy.h"

#define HOSTILE_DIR	"tests/policy/hostile"
#define CONFIG		"tests/policy/config.yaml"

static char	**files;
static size_t	  nfiles;

static char *
slurp(const char *path)
{
	FILE	*f;
	char	*buf;
	long	 len;

	if ((f = fopen(path, "rb")) == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)len + 1);
	if (buf != NULL && fread(buf, 1, (size_t)len, f) != (size_t)len) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static int
cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
scan(void)
{
	DIR		*d;
	struct dirent	*de;
	size_t		 len;

	if ((d = opendir(HOSTILE_DIR)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (len < 6 || strcmp(de->d_name + len - 5, ".yaml") != 0)
			continue;
		char **nf = realloc(files, (nfiles + 1) * sizeof(*files));

		/* Outside any test (main calls this): no ck_assert here. */
		if (nf == NULL || (nf[nfiles] = strndup(de->d_name,
		    len - 5)) == NULL) {
			fprintf(stderr, "check_policy_hostile: out of memory\n");
			exit(1);
		}
		files = nf;
		nfiles++;
	}
	closedir(d);
	qsort(files, nfiles, sizeof(*files), cmpstr);
}

/* errs_join: the stored messages, one per line, as the .expect holds. */
static char *
errs_join(const struct pol_errors *e)
{
	char	*out = NULL;
	size_t	 len = 0, i;
	FILE	*f = open_memstream(&out, &len);

	for (i = 0; pol_errors_get(e, i) != NULL; i++)
		fprintf(f, "%s\n", pol_errors_get(e, i));
	fclose(f);
	return out;
}

START_TEST(hostile_file)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_config	*cfg;
	struct pol_policy	*p;
	char			 path[512], expath[512], *want, *got;

	cfg = pol_config_load(CONFIG, e);
	ck_assert_msg(cfg != NULL, "config: %s", pol_errors_get(e, 0));
	snprintf(path, sizeof(path), "%s/%s.yaml", HOSTILE_DIR, files[_i]);
	snprintf(expath, sizeof(expath), "%s/%s.expect", HOSTILE_DIR,
	    files[_i]);
	want = slurp(expath);
	ck_assert_msg(want != NULL, "%s has no .expect file", path);
	ck_assert_msg(want[0] != '\0', "%s: empty .expect", path);
	p = pol_policy_load(path, cfg, e);
	ck_assert_msg(p == NULL, "%s loaded", path);
	got = errs_join(e);
	ck_assert_str_eq(got, want);
	ck_assert_uint_ge(pol_errors_count(e), 1);
	free(got);
	free(want);
	pol_config_free(cfg);
	pol_errors_free(e);
}
END_TEST

START_TEST(corpus_size)
{
	/* The corpus is the point of this suite: it must not go missing. */
	ck_assert_uint_ge(nfiles, 20);
}
END_TEST

static char	tmpdir[] = "/tmp/check_policy_hostile.XXXXXX";

static void
mk(const char *name, const char *data, size_t len, char *path, size_t plen)
{
	FILE	*f;

	snprintf(path, plen, "%s/%s", tmpdir, name);
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void
setup(void)
{
	/* Unchecked fixture: runs in the parent, so cleanup survives a
	 * failing test. */
	if (mkdtemp(tmpdir) == NULL)
		abort();
}

static void
teardown(void)
{
	char	cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup failed: %s\n", tmpdir);
	strcpy(tmpdir, "/tmp/check_policy_hostile.XXXXXX");
}

START_TEST(too_big)
{
	struct pol_errors *e = pol_errors_new(50);
	char		 path[256], want[300];
	size_t		 len = 1024 * 1024 + 1;
	char		*buf = malloc(len);

	/* Valid YAML that only its size makes hostile: a long comment. */
	memset(buf, '#', len);
	memcpy(buf, "version: 1\n", 11);
	mk("big.yaml", buf, len, path, sizeof(path));
	ck_assert_ptr_null(pol_policy_load(path, NULL, e));
	snprintf(want, sizeof(want), "%s:0:0: file is larger than 1 MiB", path);
	ck_assert_str_eq(pol_errors_get(e, 0), want);
	ck_assert_uint_eq(pol_errors_count(e), 1);
	free(buf);
	pol_errors_free(e);
}
END_TEST

START_TEST(exactly_max_size)
{
	struct pol_errors *e = pol_errors_new(50);
	char		 path[256];
	size_t		 len = 1024 * 1024;
	char		*buf = malloc(len);
	struct pol_policy *p;

	memset(buf, '#', len);
	memcpy(buf, "version: 1\n", 11);
	buf[len - 1] = '\n';
	mk("max.yaml", buf, len, path, sizeof(path));
	p = pol_policy_load(path, NULL, e);
	ck_assert_msg(p != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_str_eq(pol_policy_name(p), "max");
	pol_policy_free(p);
	free(buf);
	pol_errors_free(e);
}
END_TEST

START_TEST(too_many_nodes)
{
	struct pol_errors *e = pol_errors_new(50);
	char		 path[256], want[300];
	size_t		 n = 150000, i, len;
	char		*buf = malloc(20 + 2 * n + 4);

	len = (size_t)sprintf(buf, "version: 1\nx: [");
	for (i = 0; i < n; i++) {
		buf[len++] = '1';
		buf[len++] = ',';
	}
	buf[len++] = '1';
	buf[len++] = ']';
	buf[len++] = '\n';
	mk("nodes.yaml", buf, len, path, sizeof(path));
	ck_assert_ptr_null(pol_policy_load(path, NULL, e));
	ck_assert_uint_eq(pol_errors_count(e), 1);
	snprintf(want, sizeof(want), "%s:2:", path);
	ck_assert_msg(strncmp(pol_errors_get(e, 0), want, strlen(want)) == 0,
	    "%s", pol_errors_get(e, 0));
	ck_assert_ptr_nonnull(strstr(pol_errors_get(e, 0),
	    "too many nodes (more than 100000)"));
	free(buf);
	pol_errors_free(e);
}
END_TEST

START_TEST(too_many_keys)
{
	struct pol_errors *e = pol_errors_new(50);
	char		 path[256];
	size_t		 n = 5000, i, len = 0;
	char		*buf = malloc(32 * n);

	len = (size_t)sprintf(buf, "version: 1\nx:\n");
	for (i = 0; i < n; i++)
		len += (size_t)sprintf(buf + len, "  k%zu: 1\n", i);
	mk("keys.yaml", buf, len, path, sizeof(path));
	ck_assert_ptr_null(pol_policy_load(path, NULL, e));
	ck_assert_ptr_nonnull(strstr(pol_errors_get(e, 0),
	    ":4099:3: too many keys in one mapping (more than 4096)"));
	free(buf);
	pol_errors_free(e);
}
END_TEST

START_TEST(error_cap)
{
	struct pol_errors *e = pol_errors_new(50);
	char		 path[256];
	size_t		 i, len = 0;
	char		 buf[4096];

	/* 80 unknown keys: every one is counted, 50 are kept. */
	len = (size_t)sprintf(buf, "version: 1\n");
	for (i = 0; i < 80; i++)
		len += (size_t)sprintf(buf + len, "u%zu: 1\n", i);
	mk("many.yaml", buf, len, path, sizeof(path));
	ck_assert_ptr_null(pol_policy_load(path, NULL, e));
	ck_assert_uint_eq(pol_errors_count(e), 80);
	ck_assert_ptr_nonnull(pol_errors_get(e, 49));
	ck_assert_ptr_null(pol_errors_get(e, 50));
	ck_assert_ptr_nonnull(strstr(pol_errors_get(e, 49),
	    ":51:1: unknown key \"u49\" in the policy"));
	pol_errors_free(e);
}
END_TEST

START_TEST(not_a_file)
{
	struct pol_errors *e = pol_errors_new(50);
	char		 want[300];

	ck_assert_ptr_null(pol_policy_load(tmpdir, NULL, e));
	snprintf(want, sizeof(want), "%s:0:0: not a regular file", tmpdir);
	ck_assert_str_eq(pol_errors_get(e, 0), want);
	pol_errors_clear(e);
	ck_assert_ptr_null(pol_policy_load("/nonexistent/x.yaml", NULL, e));
	ck_assert_str_eq(pol_errors_get(e, 0), "/nonexistent/x.yaml:0:0: "
	    "cannot open: No such file or directory");
	pol_errors_free(e);
}
END_TEST

START_TEST(overlong_utf8)
{
	struct pol_errors *e = pol_errors_new(50);
	char		 path[256], want[300];
	/* An overlong '/' (C0 AF) and a surrogate (ED A0 80). */
	static const char *bad[] = { "version: 1\nd: \"\xc0\xaf\"\n",
	    "version: 1\nd: \"\xed\xa0\x80\"\n", "version: 1\nd: \"\xf4\x90"
	    "\x80\x80\"\n", "version: 1\nd: \"\xe2\x82\"\n" };
	size_t		 i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pol_errors_clear(e);
		mk("utf8.yaml", bad[i], strlen(bad[i]), path, sizeof(path));
		ck_assert_ptr_null(pol_policy_load(path, NULL, e));
		snprintf(want, sizeof(want), "%s:2:5: invalid UTF-8", path);
		ck_assert_str_eq(pol_errors_get(e, 0), want);
	}
	pol_errors_free(e);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("policy_hostile");
	TCase	*core = tcase_create("Core"), *lim = tcase_create("Limits");
	SRunner	*sr;
	int	 nf;

	scan();
	tcase_add_loop_test(core, hostile_file, 0, (int)nfiles);
	tcase_add_test(core, corpus_size);
	tcase_add_unchecked_fixture(lim, setup, teardown);
	tcase_set_timeout(lim, 60);
	tcase_add_test(lim, too_big);
	tcase_add_test(lim, exactly_max_size);
	tcase_add_test(lim, too_many_nodes);
	tcase_add_test(lim, too_many_keys);
	tcase_add_test(lim, error_cap);
	tcase_add_test(lim, not_a_file);
	tcase_add_test(lim, overlong_utf8);
	suite_add_tcase(s, core);
	suite_add_tcase(s, lim);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	while (nfiles > 0)
		free(files[--nfiles]);
	free(files);
	return nf == 0 ? 0 : 1;
}
