/*
 * check_audit_oom: a record lost for lack of memory is never silent.
 *
 * An async record (a DNS decision, a net.deny, the writer's own heartbeat)
 * that cannot be queued because an allocation failed is gone: nobody waits
 * for it, and not every caller records the failure. Like a full queue's
 * drop, it must be counted and written as a signed log.gap (reference
 * audit.md §3.5, "signed gap, never silence"); a durable record instead
 * returns the error to its caller, who must not act. This suite counts the
 * allocations one submit makes, then repeats it on a fresh log once per
 * allocation with exactly that one failing, and holds the log to that
 * contract. The link wraps the allocators (-Wl,--wrap, see the Makefile);
 * only the test's own thread is failed, never the writer's, and
 * allocations inside jansson and SQLite are out of reach. It also wraps
 * sqlite3_exec to fail a COMMIT: the last batch lost at close must still
 * leave a signed log.gap.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <sqlite3.h>
#include <stdatomic.h>

#include "audit/audit.h"
#include "tests/unit/audit_fixture.h"
#include "tests/unit/oom_fixture.h"

/* ----------------------------------------------------- allocation faults */

void	*__real_realloc(void *, size_t);

void *
__wrap_realloc(void *p, size_t n)
{
	return oom_fault() ? NULL : __real_realloc(p, n);
}

/* ------------------------------------------------------------------ tests */

static void
setup(void)
{
	af_setup("check_audit_oom", "test.example");
}

/* Larger than the writer keeps for reuse and than the serialiser's inline
 * buffer: the submit allocates its copy every time. */
#define BIG	9000

static char big[BIG + 1];

static json_t *
big_fields(void)
{
	memset(big, 'x', BIG);
	big[BIG] = '\0';
	return json_pack("{s:s,s:s,s:{s:s,s:s}}", "decision", "deny", "note",
	    big, "sandbox", "id", "sb\n1", "run", "r-1");
}

static int	acked;

static void
on_done(void *arg, int ok, uint64_t seq)
{
	(void)arg;
	(void)ok;
	(void)seq;
	acked++;
}

/* Each takes fields made before the allocator is armed (and steals them),
 * and asserts nothing: Check allocates too. */
static int
sub_async(struct aud_log *l, json_t *f)
{
	return aud_submit_async(l, "dns.decision", f);
}

static int
sub_canon(struct aud_log *l, json_t *f)
{
	static char body[BIG + 128];
	int n;

	json_decref(f);
	/* Canonical bytes with an escaped column (the sandbox id): its
	 * decoding needs a scratch buffer too. */
	n = snprintf(body, sizeof(body), "{\"decision\":\"deny\",\"note\":"
	    "\"%s\",\"sandbox\":{\"id\":\"sb\\n1\",\"run\":\"r-1\"}}", big);
	return aud_submit_canon(l, "dns.decision", body, (size_t)n);
}

static int
sub_heartbeat(struct aud_log *l, json_t *f)
{
	json_decref(f);
	return aud_heartbeat(l);
}

static int
sub_durable(struct aud_log *l, json_t *f)
{
	return aud_submit_durable(l, "mcp.call", f, on_done, NULL);
}

static const struct {
	const char	*name;
	int		(*submit)(struct aud_log *, json_t *);
	int		 counted;	/* 0: the caller gets the error */
} subs[] = {
	{ "async", sub_async, 1 },
	{ "canon", sub_canon, 1 },
	{ "heartbeat", sub_heartbeat, 1 },
	{ "durable", sub_durable, 0 },
};

/* The log.gap records of a closed log: their number and total lost. */
static void
gaps_of(const char *db, const char *reason, size_t *ngaps, long long *lost,
    long long *size)
{
	struct aud_verify_opts o = { 0 };
	const char *keys[1] = { af_vkey };
	json_t *rep, *gaps, *g;
	size_t i;
	int rc;

	o.db_path = db;
	o.vkeys = keys;
	o.nvkeys = 1;
	rc = aud_verify(&o, &rep);
	ck_assert_ptr_nonnull(rep);
	/* Whatever failed, what was written is intact. */
	ck_assert_msg(rc == AUD_VERIFIED || rc == AUD_WARNINGS, "%s",
	    json_dumps(json_object_get(rep, "first_failure"), 0));
	gaps = json_object_get(rep, "gaps");
	*ngaps = json_array_size(gaps);
	*lost = 0;
	for (i = 0; i < *ngaps; i++) {
		g = json_array_get(gaps, i);
		ck_assert_str_eq(json_string_value(json_object_get(g,
		    "reason")), reason);
		*lost += json_integer_value(json_object_get(g, "lost"));
	}
	*size = json_integer_value(json_object_get(rep, "size"));
	json_decref(rep);
}

/*
 * One submit per allocation it makes, each on a fresh log with exactly that
 * allocation failing. A refused async record must appear in a log.gap
 * (reason out_of_memory, lost 1); a refused durable one must not (its
 * caller was told); an accepted one must be in the log. The last round
 * fails nothing and must succeed.
 */
START_TEST(test_submit_oom)
{
	struct aud_opts o = { 0 };
	struct aud_log *l;
	json_t *f;
	char db[256], err[256];
	long k, n = -1;
	long long lost, size;
	size_t ngaps;
	int rc, e, failures = 0;

	for (k = 0; n == -1 || k <= n; k++) {
		snprintf(db, sizeof(db), "%s/oom%ld.db", af_dir, k);
		o.db_path = db;
		o.origin = af_origin;
		o.key_path = af_keypath;
		l = aud_open(&o, err, sizeof(err));
		ck_assert_msg(l != NULL, "aud_open: %s", err);
		/* Empty the writer's cache of reusable items (log.open's is
		 * taken by a durable record whose ack stays undispatched): the
		 * submit below must allocate its item. */
		ck_assert_int_eq(aud_submit_durable(l, "mcp.call",
		    json_pack("{s:s}", "tool", "t"), on_done, NULL), 0);
		ck_assert_int_eq(aud_sync(l), 0);
		f = big_fields();
		ck_assert_ptr_nonnull(f);
		arm(k);
		rc = subs[_i].submit(l, f);
		e = errno;
		if (disarm() <= k) {
			/* Nothing failed: the count of a good submit. */
			ck_assert_int_eq(rc, 0);
			n = k;
		} else if (rc == -1) {
			ck_assert_msg(e == ENOMEM, "%s: allocation %ld: %s",
			    subs[_i].name, k, strerror(e));
			failures++;
		}
		ck_assert_int_eq(aud_sync(l), 0);
		ck_assert_uint_eq(aud_close(l), 0);
		gaps_of(db, "out_of_memory", &ngaps, &lost, &size);
		if (rc == -1 && subs[_i].counted) {
			ck_assert_msg(lost == 1, "%s: allocation %ld failed and "
			    "was not counted", subs[_i].name, k);
			ck_assert_uint_eq(ngaps, 1);
		} else
			ck_assert_uint_eq(ngaps, 0);
		/* log.open, the durable record, the submit if accepted, the
		 * gap if any, log.close: nothing else, nothing missing. */
		ck_assert_int_eq(size, 3 + (rc == 0) + (long long)ngaps);
	}
	ck_assert_msg(failures > 0, "%s: no allocation to fail",
	    subs[_i].name);
}
END_TEST

/* The fixture's log, opened with default options. */
static struct aud_log *
open_default(void)
{
	struct aud_opts o = { 0 };
	struct aud_log *l;

	o.db_path = af_dbpath;
	o.origin = af_origin;
	o.key_path = af_keypath;
	l = aud_open(&o, NULL, 0);
	ck_assert_ptr_nonnull(l);
	return l;
}

/* A record a caller's converter could not build (fields NULL for lack of
 * memory) is as lost as one the log could not copy. */
START_TEST(test_async_null_counted)
{
	struct aud_log *l;
	long long lost, size;
	size_t ngaps;

	l = open_default();
	ck_assert_int_eq(aud_submit_async(l, "dns.decision", NULL), -1);
	ck_assert_int_eq(errno, ENOMEM);
	/* A durable one is refused, not counted: its caller must not act. */
	ck_assert_int_eq(aud_submit_durable(l, "mcp.call", NULL, on_done,
	    NULL), -1);
	ck_assert_uint_eq(aud_close(l), 0);
	gaps_of(af_dbpath, "out_of_memory", &ngaps, &lost, &size);
	ck_assert_uint_eq(ngaps, 1);
	ck_assert_int_eq(lost, 1);
	ck_assert_int_eq(size, 3);
}
END_TEST

/* ------------------------------------------------------- a failed commit */

/* sqlite3_exec wrapped: while commit_fail > 0, each COMMIT fails as a disk
 * refusing a write would (the caller rolls back). */
static atomic_int commit_fail;

int	__real_sqlite3_exec(sqlite3 *, const char *,
	    int (*)(void *, int, char **, char **), void *, char **);

int
__wrap_sqlite3_exec(sqlite3 *db, const char *sql,
    int (*cb)(void *, int, char **, char **), void *arg, char **errmsg)
{
	if (sql != NULL && strcmp(sql, "COMMIT") == 0 &&
	    atomic_load(&commit_fail) > 0) {
		atomic_fetch_sub(&commit_fail, 1);
		return SQLITE_IOERR;
	}
	return __real_sqlite3_exec(db, sql, cb, arg, errmsg);
}

/* The log's last record and whether a signed checkpoint covers it all. */
static void
tail_of(const char *db, char *kind, size_t kindlen, long long *unsealed)
{
	struct aud_verify_opts o = { 0 };
	const char *keys[1] = { af_vkey };
	json_t *rep, *r;
	sqlite3 *h;
	sqlite3_stmt *st;

	o.db_path = db;
	o.vkeys = keys;
	o.nvkeys = 1;
	(void)aud_verify(&o, &rep);
	ck_assert_ptr_nonnull(rep);
	*unsealed = json_integer_value(json_object_get(rep, "unsealed_tail"));
	json_decref(rep);
	ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT canon FROM records "
	    "ORDER BY seq DESC LIMIT 1", -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	r = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
	ck_assert_ptr_nonnull(r);
	snprintf(kind, kindlen, "%s", json_string_value(json_object_get(r,
	    "kind")));
	json_decref(r);
	sqlite3_finalize(st);
	sqlite3_close(h);
}

/*
 * The last batch at close fails, log.close with it: the writer tries once
 * more with nothing but the log.gap that counts what that batch lost, and
 * seals it with a checkpoint. aud_close then reports nothing unwritten
 * (the gap says it), and the log verifies with the gap as its last record,
 * covered by the signed checkpoint. With the retry failing too, aud_close
 * reports what is lost (test_close_unwritten_counted in check_audit_log).
 */
START_TEST(test_close_gap_only)
{
	struct aud_log *l;
	long long lost, size, unsealed;
	size_t ngaps;
	char kind[32];
	int i;

	l = open_default();
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(aud_submit_async(l, "net.deny",
		    json_object()), 0);
	ck_assert_int_eq(aud_sync(l), 0);
	atomic_store(&commit_fail, 1);
	ck_assert_uint_eq(aud_close(l), 0);
	ck_assert_int_eq(atomic_load(&commit_fail), 0);
	gaps_of(af_dbpath, "write_error", &ngaps, &lost, &size);
	ck_assert_uint_eq(ngaps, 1);
	ck_assert_int_eq(lost, 1);		/* log.close */
	ck_assert_int_eq(size, 1 + 3 + 1);	/* open, the three, the gap */
	tail_of(af_dbpath, kind, sizeof(kind), &unsealed);
	ck_assert_str_eq(kind, "log.gap");
	ck_assert_int_eq(unsealed, 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("audit_oom");
	TCase *tc = tcase_create("Core");
	SRunner *sr;
	int nf;

	tcase_add_checked_fixture(tc, setup, af_teardown);
	tcase_add_loop_test(tc, test_submit_oom, 0,
	    sizeof(subs) / sizeof(subs[0]));
	tcase_add_test(tc, test_async_null_counted);
	tcase_add_test(tc, test_close_gap_only);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
