/*
 * check_cgroup: the pure half of gateway/cgroup.c, by table: where the
 * daemon's own cgroup is in /proc/self/cgroup on v1, hybrid and v2 hosts
 * (and a restarted daemon's leaf stripped, so it finds its predecessor's
 * groups), which files and values a policy's limits become on each, the
 * kernel's event counters, and the names a group may have. Then the
 * directories themselves over a fake tree under /tmp.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/cgroup.h"

static const char hybrid[] =
    "9:name=systemd:/\n8:pids:/\n4:memory:/svc/abc\n2:cpu,cpuacct:/x\n"
    "0::/\n";
static const char v2[] = "0::/system.slice/sluiced.service/sluiced\n";

static const struct {
	const char	*text;
	const char	*ctl;
	const char	*want;		/* NULL: -1 */
} selfs[] = {
	{ hybrid, "pids", "/" },
	{ hybrid, "memory", "/svc/abc" },
	{ hybrid, "cpu", "/x" },
	{ hybrid, "cpuacct", "/x" },
	{ hybrid, "blkio", NULL },
	{ hybrid, NULL, "/" },
	{ v2, NULL, "/system.slice/sluiced.service" },
	{ "0::/sluiced\n", NULL, "/" },
	{ "0::/a/notsluiced\n", NULL, "/a/notsluiced" },
	{ "0::relative\n", NULL, NULL },
	{ "0::\n", NULL, NULL },
	{ "", "pids", NULL },
	{ "garbage", NULL, NULL },
	{ "10:pids:/a", "pids", "/a" },		/* no final newline */
};

START_TEST(self_path)
{
	char out[256];
	int rc = cg_self_path(selfs[_i].text, selfs[_i].ctl, out, sizeof(out));

	if (selfs[_i].want == NULL) {
		ck_assert_int_eq(rc, -1);
		return;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_str_eq(out, selfs[_i].want);
}
END_TEST

static const char *
value_of(const struct cg_write *w, size_t n, const char *file)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(w[i].file, file) == 0)
			return w[i].value;
	return NULL;
}

START_TEST(limit_writes)
{
	struct pol_resources r = { .pids = 64, .memory = 64ULL << 20,
	    .cpu_milli = 1500 }, none = { 0 };
	struct cg_write w[CG_WRITES_MAX];
	size_t n, i, lim = 0, sw = 0;

	n = cg_limit_writes(CG_V2, &r, w);
	ck_assert_str_eq(value_of(w, n, "pids.max"), "64");
	ck_assert_str_eq(value_of(w, n, "memory.max"), "67108864");
	ck_assert_str_eq(value_of(w, n, "memory.swap.max"), "0");
	ck_assert_str_eq(value_of(w, n, "cpu.max"), "150000 100000");
	for (i = 0; i < n; i++)
		ck_assert_uint_eq(w[i].tree, 0);
	n = cg_limit_writes(CG_V2, &none, w);
	ck_assert_str_eq(value_of(w, n, "pids.max"), "max");
	ck_assert_str_eq(value_of(w, n, "memory.max"), "max");
	ck_assert_str_eq(value_of(w, n, "cpu.max"), "max 100000");

	n = cg_limit_writes(CG_V1, &r, w);
	ck_assert_str_eq(value_of(w, n, "pids.max"), "64");
	ck_assert_str_eq(value_of(w, n, "memory.limit_in_bytes"), "67108864");
	ck_assert_str_eq(value_of(w, n, "memory.memsw.limit_in_bytes"),
	    "67108864");
	ck_assert_str_eq(value_of(w, n, "cpu.cfs_quota_us"), "150000");
	ck_assert_str_eq(value_of(w, n, "cpu.cfs_period_us"), "100000");
	/* The limit before memory+swap, which must never be below it. */
	for (i = 0; i < n; i++) {
		if (strcmp(w[i].file, "memory.limit_in_bytes") == 0)
			lim = i;
		if (strcmp(w[i].file, "memory.memsw.limit_in_bytes") == 0)
			sw = i;
		ck_assert_uint_eq(w[i].tree, strncmp(w[i].file, "pids", 4) ==
		    0 ? 0 : strncmp(w[i].file, "memory", 6) == 0 ? 1 : 2);
	}
	ck_assert_uint_lt(lim, sw);
	n = cg_limit_writes(CG_V1, &none, w);
	ck_assert_str_eq(value_of(w, n, "pids.max"), "max");
	ck_assert_str_eq(value_of(w, n, "memory.limit_in_bytes"), "-1");
	ck_assert_str_eq(value_of(w, n, "cpu.cfs_quota_us"), "-1");
	ck_assert_uint_eq(cg_limit_writes(CG_NONE, &r, w), 0);
}
END_TEST

START_TEST(events)
{
	ck_assert_uint_eq(cg_event_count("oom_kill_disable 0\nunder_oom 0\n"
	    "oom_kill 3\n", "oom_kill"), 3);
	ck_assert_uint_eq(cg_event_count("low 0\nhigh 0\nmax 9\noom 2\n"
	    "oom_kill 2\noom_group_kill 0\n", "oom_kill"), 2);
	ck_assert_uint_eq(cg_event_count("max 17\n", "max"), 17);
	ck_assert_uint_eq(cg_event_count("maximum 5\n", "max"), 0);
	ck_assert_uint_eq(cg_event_count("", "max"), 0);
}
END_TEST

/* The names a group and a daemon's base may have, both checkers. */
static const struct {
	int		(*ok)(const char *);
	const char	*s;
	int		 want;
} names[] = {
	{ cg_id_ok, "sb-0a1b", 1 }, { cg_id_ok, "a", 1 }, { cg_id_ok, "", 0 },
	{ cg_id_ok, "-a", 0 }, { cg_id_ok, "..", 0 }, { cg_id_ok, "a/b", 0 },
	{ cg_id_ok, "A", 0 }, { cg_id_ok, NULL, 0 },
	{ cg_id_ok, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0 },
	{ cg_base_name_ok, "sluice-0123abcd", 1 },
	{ cg_base_name_ok, "sluice", 0 }, { cg_base_name_ok, NULL, 0 },
	{ cg_base_name_ok, "sluice-0123abcg", 0 },
	{ cg_base_name_ok, "sluice-0123abcde", 0 },
	{ cg_base_name_ok, "../sluice-01234567", 0 },
};

START_TEST(name_checks)
{
	ck_assert_int_eq(names[_i].ok(names[_i].s), names[_i].want);
}
END_TEST

START_TEST(base_names)
{
	char a[CG_NAME_MAX], b[CG_NAME_MAX];

	cg_base_name("/var/lib/sluice", a, sizeof(a));
	cg_base_name("/tmp/world/state", b, sizeof(b));
	ck_assert_int_eq(cg_base_name_ok(a), 1);
	ck_assert_int_eq(cg_base_name_ok(b), 1);
	/* Two daemons, two directories; one daemon, always the same. */
	ck_assert_str_ne(a, b);
	cg_base_name("/var/lib/sluice", b, sizeof(b));
	ck_assert_str_eq(a, b);
}
END_TEST

/* v1 over a fake tree: the base is under the daemon's own group of each
 * controller, a group is a directory per tree, removal takes them all. */
START_TEST(v1_dirs)
{
	char root[] = "/tmp/check_cgroup.XXXXXX", path[600], err[256],
	    cmd[128];
	struct pol_resources none = { 0 };
	struct stat st;
	struct cg *g;
	const char *t[] = { "pids", "memory", "cpu" };
	size_t i;

	ck_assert_ptr_nonnull(mkdtemp(root));
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, t[i]);
		ck_assert_int_eq(mkdir(path, 0755), 0);
	}
	snprintf(path, sizeof(path), "%s/memory/svc", root);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	ck_assert_ptr_null(cg_new(root, CG_V1, "8:pids:/\n", "../x", err,
	    sizeof(err)));
	g = cg_new(root, CG_V1, "8:pids:/\n4:memory:/svc\n1:cpu:/\n",
	    "sluice-0123abcd", err, sizeof(err));
	ck_assert_msg(g != NULL, "%s", err);
	ck_assert_uint_eq(cg_ntrees(g), 3);
	ck_assert_int_eq(cg_dir(g, 1, "sb-1", path, sizeof(path)), 0);
	snprintf(cmd, sizeof(cmd), "%s/memory/svc/sluice-0123abcd/sb-1", root);
	ck_assert_str_eq(path, cmd);
	ck_assert_int_eq(cg_dir(g, 0, "sb-1", path, sizeof(path)), 0);
	snprintf(cmd, sizeof(cmd), "%s/pids/sluice-0123abcd/sb-1", root);
	ck_assert_str_eq(path, cmd);
	ck_assert_int_eq(cg_dir(g, 3, "sb-1", path, sizeof(path)), -1);
	ck_assert_int_eq(cg_dir(g, 0, "../x", path, sizeof(path)), -1);
	/* Limit files do not exist in a fake tree: all or nothing. */
	ck_assert_int_eq(cg_create(g, "sb-1", &none, err, sizeof(err)), -1);
	ck_assert_int_eq(cg_exists(g, "sb-1"), 0);
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s/%ssluice-0123abcd/sb-1", root, t[i],
		    i == 1 ? "svc/" : "");
		ck_assert_int_eq(mkdir(path, 0755), 0);
	}
	ck_assert_int_eq(cg_exists(g, "sb-1"), 1);
	ck_assert_int_eq(cg_remove(g, "sb-1", err, sizeof(err)), 0);
	ck_assert_int_eq(cg_exists(g, "sb-1"), 0);
	ck_assert_int_eq(stat(path, &st), -1);
	ck_assert_int_eq(cg_remove(g, "sb-1", err, sizeof(err)), 0);
	cg_free(g);
	cg_free(NULL);
	ck_assert_ptr_null(cg_new(root, CG_NONE, "", "sluice-0123abcd", err,
	    sizeof(err)));
	ck_assert_int_eq(cg_detect(root), CG_NONE);	/* not cgroupfs */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("cgroup");
	TCase	*tc = tcase_create("Core");
	SRunner	*sr;
	int	 nf;

	tcase_add_loop_test(tc, self_path, 0, sizeof(selfs) / sizeof(selfs[0]));
	tcase_add_test(tc, limit_writes);
	tcase_add_test(tc, events);
	tcase_add_loop_test(tc, name_checks, 0, sizeof(names) / sizeof(names[0]));
	tcase_add_test(tc, base_names);
	tcase_add_test(tc, v1_dirs);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
