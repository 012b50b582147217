/*
 * check_fleet: the parts of the fleet module that need no database: what
 * the version row of the shared schema means (fleet_schema_plan_of), how a
 * conninfo is shown in messages (fleet_pg_mask: never its password), and
 * how the daemon's password is read (fleet_password_read: the file's
 * permissions, its first line, the environment), and what a reservation's
 * result means (fleet_resv_read, fleet_window_start). The database side runs
 * against a real PostgreSQL in tests/e2e/t_fleet.sh.
 */
#include <sys/stat.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/fleet/fleet.h"
#include "policy/policy.h"
#include "tests/unit/run_suite.h"

static const struct {
	const char		*text;	/* NULL: no row */
	int			 known;
	enum fleet_schema_plan	 want;
	int			 have;
} plans[] = {
	{ NULL, 1, FLEET_SCHEMA_MIGRATE, 0 },
	{ NULL, 0, FLEET_SCHEMA_CURRENT, 0 },
	{ "1", 1, FLEET_SCHEMA_CURRENT, 1 },
	{ "1", 3, FLEET_SCHEMA_MIGRATE, 1 },
	{ "2", 1, FLEET_SCHEMA_NEWER, 2 },
	{ "99", 1, FLEET_SCHEMA_NEWER, 99 },
	{ "2147483647", 1, FLEET_SCHEMA_NEWER, 2147483647 },
	{ "2147483648", 1, FLEET_SCHEMA_BAD, -1 },
	{ "99999999999999999999", 1, FLEET_SCHEMA_BAD, -1 },
	{ "0", 1, FLEET_SCHEMA_BAD, -1 },
	{ "-1", 1, FLEET_SCHEMA_BAD, -1 },
	{ "01", 1, FLEET_SCHEMA_BAD, -1 },
	{ "1 ", 1, FLEET_SCHEMA_BAD, -1 },
	{ "", 1, FLEET_SCHEMA_BAD, -1 },
	{ "1e3", 1, FLEET_SCHEMA_BAD, -1 },
};

START_TEST(schema_plan)
{
	int have = 12345;

	ck_assert_int_eq(fleet_schema_plan_of(plans[_i].text, plans[_i].known,
	    &have), plans[_i].want);
	ck_assert_int_eq(have, plans[_i].have);
}
END_TEST

START_TEST(mask_hides_password)
{
	char *m;

	m = fleet_pg_mask("host=/run/pg user=u dbname=f password=s3cret");
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_null(strstr(m, "s3cret"));
	ck_assert_ptr_nonnull(strstr(m, "host=/run/pg"));
	ck_assert_ptr_nonnull(strstr(m, "user=u"));
	free(m);
	m = fleet_pg_mask("postgresql://u:s3cret@db.example:6543/f");
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_null(strstr(m, "s3cret"));
	ck_assert_ptr_nonnull(strstr(m, "host=db.example"));
	ck_assert_ptr_nonnull(strstr(m, "port=6543"));
	free(m);
	m = fleet_pg_mask("host='unterminated");
	ck_assert_str_eq(m, "(unparsable conninfo)");
	free(m);
	m = fleet_pg_mask("");
	ck_assert_str_eq(m, "(defaults)");
	free(m);
}
END_TEST

static char dir[64];

static void
mkdir_tmp(void)
{
	strcpy(dir, "/tmp/check_fleet.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_int_eq(chmod(path, mode), 0);
}

START_TEST(password_file)
{
	char path[128], big[1100], err[256], *pw;

	mkdir_tmp();
	snprintf(path, sizeof(path), "%s/pw", dir);
	write_file(path, "first line\nsecond\n", 0600);
	pw = fleet_password_read(path, err, sizeof(err));
	ck_assert_ptr_nonnull(pw);
	ck_assert_str_eq(pw, "first line");
	free(pw);
	write_file(path, "no newline", 0400);
	pw = fleet_password_read(path, err, sizeof(err));
	ck_assert_str_eq(pw, "no newline");
	free(pw);
	/* Readable by the group or others: refused, and said how to fix. */
	write_file(path, "secret\n", 0640);
	ck_assert_ptr_null(fleet_password_read(path, err, sizeof(err)));
	ck_assert_int_eq(errno, EACCES);
	ck_assert_ptr_nonnull(strstr(err, "chmod 0600"));
	ck_assert_ptr_null(strstr(err, "secret"));
	write_file(path, "\n", 0600);
	ck_assert_ptr_null(fleet_password_read(path, err, sizeof(err)));
	ck_assert_int_eq(errno, EINVAL);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	write_file(path, big, 0600);
	ck_assert_ptr_null(fleet_password_read(path, err, sizeof(err)));
	ck_assert_int_eq(errno, EACCES);
	/* A symlink is not followed. */
	write_file(path, "secret\n", 0600);
	snprintf(big, sizeof(big), "%s/link", dir);
	ck_assert_int_eq(symlink(path, big), 0);
	ck_assert_ptr_null(fleet_password_read(big, err, sizeof(err)));
	ck_assert_int_eq(errno, ELOOP);
	unlink(big);
	unlink(path);
	ck_assert_ptr_null(fleet_password_read(path, err, sizeof(err)));
	ck_assert_int_eq(errno, ENOENT);
	rmdir(dir);
}
END_TEST

START_TEST(password_env)
{
	char err[256], *pw;

	unsetenv("SLUICE_PG_PASSWORD");
	errno = EINVAL;
	ck_assert_ptr_null(fleet_password_read(NULL, err, sizeof(err)));
	ck_assert_int_eq(errno, 0);
	setenv("SLUICE_PG_PASSWORD", "", 1);
	errno = EINVAL;
	ck_assert_ptr_null(fleet_password_read(NULL, err, sizeof(err)));
	ck_assert_int_eq(errno, 0);
	setenv("SLUICE_PG_PASSWORD", "from-env", 1);
	pw = fleet_password_read(NULL, err, sizeof(err));
	ck_assert_str_eq(pw, "from-env");
	free(pw);
	unsetenv("SLUICE_PG_PASSWORD");
}
END_TEST

/* No server: the connect fails, within the deadline, with the reason. */
START_TEST(connect_nowhere)
{
	char err[400];

	ck_assert_ptr_null(fleet_pg_connect("host=/nonexistent/dir dbname=x",
	    NULL, 2000, err, sizeof(err)));
	ck_assert_int_eq(errno, ECONNREFUSED);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/dir"));
	ck_assert_ptr_null(strchr(err, '\n'));
	ck_assert_ptr_null(fleet_pg_connect("host='x", NULL, 2000, err,
	    sizeof(err)));
}
END_TEST

/* No row: used up. One row of counters: reserved, with the use before.
 * Anything else: unavailable, never assumed reserved. */
static const struct {
	int			 n;
	const char		*calls, *cost, *bytes, *wstart;
	enum fleet_resv_outcome	 want;
	uint64_t		 used_calls, used_cost;
} reads[] = {
	{ 0, NULL, NULL, NULL, NULL, FLEET_RESV_EXHAUSTED, 0, 0 },
	{ 1, "1", "5", "0", "0", FLEET_RESV_RESERVED, 0, 0 },
	{ 1, "10", "50", "77", "3600", FLEET_RESV_RESERVED, 9, 45 },
	{ 1, "9223372036854775807", "5", "0", "0", FLEET_RESV_RESERVED,
	  9223372036854775806ULL, 0 },
	{ 1, "9223372036854775808", "5", "0", "0", FLEET_RESV_UNAVAILABLE,
	  0, 0 },
	{ 1, "0", "5", "0", "0", FLEET_RESV_UNAVAILABLE, 0, 0 },
	{ 1, "1", "4", "0", "0", FLEET_RESV_UNAVAILABLE, 0, 0 },
	{ 1, "-1", "5", "0", "0", FLEET_RESV_UNAVAILABLE, 0, 0 },
	{ 1, "1", "5", "", "0", FLEET_RESV_UNAVAILABLE, 0, 0 },
	{ 1, "1", "5", "0", NULL, FLEET_RESV_UNAVAILABLE, 0, 0 },
	{ 1, "1x", "5", "0", "0", FLEET_RESV_UNAVAILABLE, 0, 0 },
	{ 2, "1", "5", "0", "0", FLEET_RESV_UNAVAILABLE, 0, 0 },
	{ -1, "1", "5", "0", "0", FLEET_RESV_UNAVAILABLE, 0, 0 },
};

START_TEST(resv_read)
{
	struct fleet_resv r;

	memset(&r, 0, sizeof(r));
	r.calls = 1;
	r.cost = 5;
	ck_assert_int_eq(fleet_resv_read(reads[_i].n, reads[_i].calls,
	    reads[_i].cost, reads[_i].bytes, reads[_i].wstart, &r),
	    reads[_i].want);
	if (reads[_i].want == FLEET_RESV_RESERVED) {
		ck_assert_uint_eq(r.used_calls, reads[_i].used_calls);
		ck_assert_uint_eq(r.used_cost, reads[_i].used_cost);
		ck_assert_uint_eq(r.window_at, strtoull(reads[_i].wstart,
		    NULL, 10));
	}
}
END_TEST

START_TEST(windows_and_reason)
{
	ck_assert_uint_eq(fleet_window_start(0, 1234567), 0);
	ck_assert_uint_eq(fleet_window_start(3600, 7199), 3600);
	ck_assert_uint_eq(fleet_window_start(3600, 7200), 7200);
	ck_assert_uint_eq(fleet_window_start(86400, 86399), 0);
	ck_assert_str_eq(pol_reason_name(POL_REASON_SHARED_STATE_UNAVAILABLE),
	    "shared_state_unavailable");
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("fleet");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, schema_plan, 0, sizeof(plans) /
	    sizeof(plans[0]));
	tcase_add_test(tc, mask_hides_password);
	tcase_add_test(tc, password_file);
	tcase_add_test(tc, password_env);
	tcase_add_test(tc, connect_nowhere);
	tcase_add_loop_test(tc, resv_read, 0, sizeof(reads) / sizeof(reads[0]));
	tcase_add_test(tc, windows_and_reason);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
