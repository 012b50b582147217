/*
 * check_audit_log: the writer and the verifier together on real SQLite files
 * in a temp dir. Durable records are all present, contiguous and
 * acknowledged; a full queue is never silent (log.gap with the exact count);
 * reopening continues the chain; a writer killed mid-stream loses no
 * acknowledged record. The tamper scenarios edit a copy through SQL after
 * dropping the triggers, as an attacker with the file would, and verify must
 * name the failure (and its seq), TRUNCATION, FORK and the assurance level.
 * Hostile files (missing tables, wrong types, huge or non-canonical canon)
 * get a verdict, never a crash.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <sqlite3.h>

#include "audit/audit.h"
#include "tests/unit/audit_fixture.h"

static void
setup(void)
{
	af_setup("check_audit_log", "test.example");
}

static struct aud_log *
open_log(const char *db, unsigned queue_max)
{
	struct aud_opts o = { 0 };
	struct aud_log *l;
	char err[256];

	o.db_path = db;
	o.origin = af_origin;
	o.key_path = af_keypath;
	o.queue_max = queue_max;
	l = aud_open(&o, err, sizeof(err));
	ck_assert_msg(l != NULL, "aud_open: %s", err);
	return l;
}

static json_t *
mcp_fields(int i)
{
	char tool[32];

	snprintf(tool, sizeof(tool), "t%d", i);
	return json_pack("{s:s,s:s,s:s,s:{s:s,s:s},s:{s:s,s:s}}", "server",
	    "files", "tool", tool, "decision", i % 3 ? "allow" : "deny",
	    "sandbox", "id", "sb-1", "run", "r-1", "policy", "id", "default",
	    "rule", "r1");
}

struct acks {
	int	 n, ok, bad;
	uint64_t seqs[100000];
};

static void
on_done(void *arg, int ok, uint64_t seq)
{
	struct acks *a = arg;

	if (ok)
		a->seqs[a->ok++] = seq;
	else
		a->bad++;
	a->n++;
}

/* Waits (bounded by count, not by a clock) until want callbacks ran. */
static void
wait_acks(struct aud_log *l, struct acks *a, int want)
{
	struct pollfd p = { aud_notify_fd(l), POLLIN, 0 };
	int rounds = 0;

	while (a->n < want && rounds++ < 100000) {
		if (poll(&p, 1, 1000) == -1 && errno != EINTR)
			break;
		aud_dispatch(l);
	}
}

static int
verify(const char *db, const char *key, const char **ext, size_t next,
    json_t **rep)
{
	struct aud_verify_opts o = { 0 };
	const char *keys[1] = { key };
	json_t *r;
	int rc;

	o.db_path = db;
	o.vkeys = keys;
	o.nvkeys = key ? 1 : 0;
	o.ext_ckpts = ext;
	o.next_ckpts = next;
	rc = aud_verify(&o, &r);
	ck_assert_ptr_nonnull(r);
	if (rep != NULL)
		*rep = r;
	else
		json_decref(r);
	return rc;
}

static const char *
rstr(json_t *rep, const char *a, const char *b)
{
	json_t *v = json_object_get(rep, a);

	if (b != NULL)
		v = json_object_get(v, b);
	return json_is_string(v) ? json_string_value(v) : "";
}

static long long
rep_int(json_t *rep, const char *a, const char *b)
{
	json_t *v = json_object_get(rep, a);

	if (b != NULL)
		v = json_object_get(v, b);
	return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* Builds a closed log with n mcp.call records. */
static void
make_log(const char *db, int n)
{
	struct aud_log *l = open_log(db, 0);
	int i;

	for (i = 0; i < n; i++)
		ck_assert_int_eq(aud_submit_async(l, "mcp.call", mcp_fields(i)),
		    0);
	ck_assert_int_eq(aud_sync(l), 0);
	aud_close(l);
}

static void
exec_sql(const char *db, const char *sql)
{
	sqlite3 *h;
	char *msg = NULL;

	ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(h, sql, NULL, NULL, &msg) == SQLITE_OK,
	    "%s: %s", sql, msg ? msg : "");
	sqlite3_close(h);
}

static const char drop_triggers[] =
    "DROP TRIGGER rec_no_upd; DROP TRIGGER rec_no_del;"
    "DROP TRIGGER mn_no_upd; DROP TRIGGER mn_no_del;"
    "DROP TRIGGER ck_no_upd; DROP TRIGGER ck_no_del;";

/* A consistent copy (the online backup API also takes the WAL's pages). */
static void
copy_db(const char *from, const char *to)
{
	sqlite3 *src, *dst;
	sqlite3_backup *b;

	unlink(to);
	ck_assert_int_eq(sqlite3_open(from, &src), SQLITE_OK);
	ck_assert_int_eq(sqlite3_open(to, &dst), SQLITE_OK);
	b = sqlite3_backup_init(dst, "main", src, "main");
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(sqlite3_backup_step(b, -1), SQLITE_DONE);
	sqlite3_backup_finish(b);
	sqlite3_close(dst);
	sqlite3_close(src);
}

START_TEST(test_durable)
{
	struct acks *a = calloc(1, sizeof(*a));
	struct aud_log *l = open_log(af_dbpath, 0);
	json_t *rep;
	int i, n = 1000;
	struct timespec t0, t1;
	double dt;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(aud_submit_durable(l, "mcp.call", mcp_fields(i),
		    on_done, a), 0);
	wait_acks(l, a, n);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("# durable, group commit: %d records in %.3f s = %.0f/s\n",
	    n, dt, n / dt);
	ck_assert_int_eq(a->n, n);
	ck_assert_int_eq(a->ok, n);
	/* seq 0 is log.open; records follow in submission order. */
	for (i = 0; i < n; i++)
		ck_assert_uint_eq(a->seqs[i], (uint64_t)i + 1);
	ck_assert_uint_eq(aud_next_seq(l), (uint64_t)n + 1);
	aud_close(l);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(verify(af_dbpath, af_vkey, NULL, 0, &rep), AUD_WARNINGS);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("# verify: %d records in %.3f s = %.0f/s\n", n + 2, dt,
	    (n + 2) / dt);
	ck_assert_int_eq(rep_int(rep, "size", NULL), n + 2);
	ck_assert_str_eq(rstr(rep, "assurance", NULL), "local-key");
	/* log.close forced a final checkpoint: nothing unsealed. */
	ck_assert_int_eq(rep_int(rep, "unsealed_tail", NULL), 0);
	ck_assert(json_is_null(json_object_get(rep, "first_failure")));
	json_decref(rep);
	free(a);
}
END_TEST

/* Async records may wait to fill a batch (async_linger_usec); that wait
 * never delays what someone waits for. With a linger of ten minutes, an
 * aud_sync, a durable record and aud_close each commit at once (a wait
 * that did not end would run into the test's timeout). */
START_TEST(test_async_linger_ends)
{
	struct acks *a = calloc(1, sizeof(*a));
	struct aud_opts o = { 0 };
	struct aud_log *l;
	char err[256];
	json_t *rep;
	int i;

	o.db_path = af_dbpath;
	o.origin = af_origin;
	o.key_path = af_keypath;
	o.async_linger_usec = 600u * 1000 * 1000;
	l = aud_open(&o, err, sizeof(err));
	ck_assert_msg(l != NULL, "aud_open: %s", err);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(aud_submit_async(l, "net.deny",
		    json_object()), 0);
	ck_assert_int_eq(aud_sync(l), 0);
	ck_assert_uint_eq(aud_next_seq(l), 6);	/* log.open and the five */
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(aud_submit_async(l, "net.deny",
		    json_object()), 0);
	ck_assert_int_eq(aud_submit_durable(l, "mcp.call", mcp_fields(1),
	    on_done, a), 0);
	wait_acks(l, a, 1);
	ck_assert_int_eq(a->ok, 1);
	ck_assert_uint_eq(a->seqs[0], 9);	/* after the three async */
	ck_assert_uint_eq(aud_next_seq(l), 10);
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(aud_submit_async(l, "net.deny",
		    json_object()), 0);
	ck_assert_uint_eq(aud_close(l), 0);
	ck_assert_int_eq(verify(af_dbpath, af_vkey, NULL, 0, &rep), AUD_WARNINGS);
	ck_assert_int_eq(rep_int(rep, "size", NULL), 13);	/* and log.close */
	json_decref(rep);
	free(a);
}
END_TEST

/* A queue smaller than a batch: the linger ends once half the queue is
 * taken, not at a full batch that could never queue (records beyond the
 * queue would be dropped meanwhile). Bounded wait, not a timing claim. */
START_TEST(test_linger_small_queue)
{
	struct aud_opts o = { 0 };
	struct aud_log *l;
	char err[256];
	int i;

	o.db_path = af_dbpath;
	o.origin = af_origin;
	o.key_path = af_keypath;
	o.queue_max = 4;
	o.async_linger_usec = 600u * 1000 * 1000;
	l = aud_open(&o, err, sizeof(err));
	ck_assert_msg(l != NULL, "aud_open: %s", err);
	ck_assert_int_eq(aud_sync(l), 0);	/* log.open is in */
	ck_assert_int_eq(aud_submit_async(l, "net.deny", json_object()), 0);
	ck_assert_int_eq(aud_submit_async(l, "net.deny", json_object()), 0);
	for (i = 0; i < 600 && aud_next_seq(l) < 3; i++)
		nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
	ck_assert_uint_eq(aud_next_seq(l), 3);
	ck_assert_uint_eq(aud_dropped(l), 0);
	ck_assert_uint_eq(aud_close(l), 0);
}
END_TEST

/* The fields part of the canonical record seq, as JSON. */
static json_t *
stored_fields(const char *db, int seq)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	json_t *o = NULL;
	static const char *const own[] = { "v", "origin", "seq", "prev", "ts",
	    "mono", "kind", NULL };

	ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT canon FROM records "
	    "WHERE seq = ?", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_int(st, 1, seq);
	if (sqlite3_step(st) == SQLITE_ROW)
		o = json_loadb(sqlite3_column_blob(st, 0),
		    (size_t)sqlite3_column_bytes(st, 0), 0, NULL);
	sqlite3_finalize(st);
	sqlite3_close(h);
	ck_assert_ptr_nonnull(o);
	for (int i = 0; own[i] != NULL; i++)
		json_object_del(o, own[i]);
	return o;
}

/* aud_submit_canon: canonical bytes in, the same record out as the tree
 * gives (fields and the index columns, which the verifier re-derives from
 * the bytes and compares), also with escapes in a column's value; bytes
 * that are not canonical, not an object or name a reserved member are
 * refused at once and never logged. */
START_TEST(test_submit_canon)
{
	struct aud_log *l = open_log(af_dbpath, 0);
	json_t *f[2], *a, *b, *rep;
	char *body;
	size_t len;
	int i;
	static const char *const bad[] = {
		"", "[]", "{", "{}x", "{\"b\":1,\"a\":2}", "{\"a\": 1}",
		"{\"a\":1.5}", "{\"A\":1}", "{\"a\":\"\\u0041\"}",
		"{\"seq\":1}", "{\"kind\":\"x\"}", "{\"a\":9007199254740992}",
		"{\"a\":\"\xff\"}", NULL
	};

	f[0] = mcp_fields(7);
	f[1] = json_pack("{s:s,s:{s:s,s:s,s:i},s:{s:s},s:s,s:s}",
	    "decision", "deny", "dst", "host", "h\"q.example.com", "ip",
	    "192.0.2.7", "port", 443, "sandbox", "id", "sb\\2", "server",
	    "s\n1", "tool", "t\"x");
	for (i = 0; i < 2; i++) {
		ck_assert_ptr_nonnull(f[i]);
		body = aud_canon_dump(f[i], &len, NULL, 0);
		ck_assert_ptr_nonnull(body);
		ck_assert_int_eq(aud_submit_canon(l, "mcp.call", body, len), 0);
		ck_assert_int_eq(aud_submit_async(l, "mcp.call",
		    json_incref(f[i])), 0);
		free(body);
	}
	for (i = 0; bad[i] != NULL; i++) {
		errno = 0;
		ck_assert_msg(aud_submit_canon(l, "mcp.call", bad[i],
		    strlen(bad[i])) == -1, "accepted %s", bad[i]);
		ck_assert_int_eq(errno, EINVAL);
	}
	ck_assert_int_eq(aud_submit_canon(l, "no.such", "{}", 2), -1);
	ck_assert_int_eq(aud_submit_canon(l, "mcp.call", NULL, 0), -1);
	ck_assert_int_eq(aud_submit_canon(NULL, "mcp.call", "{}", 2), -1);
	ck_assert_int_eq(aud_sync(l), 0);
	ck_assert_uint_eq(aud_next_seq(l), 5);	/* log.open and the four */
	aud_close(l);
	for (i = 0; i < 2; i++) {
		a = stored_fields(af_dbpath, 1 + 2 * i);
		b = stored_fields(af_dbpath, 2 + 2 * i);
		ck_assert(json_equal(a, f[i]));
		ck_assert(json_equal(b, f[i]));
		json_decref(a);
		json_decref(b);
		json_decref(f[i]);
	}
	/* The verifier re-derives every row's index columns from its bytes:
	 * a column aud_submit_canon got wrong is a failure here. */
	i = verify(af_dbpath, af_vkey, NULL, 0, &rep);
	ck_assert_msg(i == AUD_WARNINGS, "%s", json_dumps(json_object_get(rep,
	    "first_failure"), 0));
	ck_assert_int_eq(rep_int(rep, "size", NULL), 6);
	json_decref(rep);
}
END_TEST

START_TEST(test_submit_refuses)
{
	struct aud_log *l = open_log(af_dbpath, 0);

	ck_assert_int_eq(aud_submit_async(l, "no.such", json_object()), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(aud_submit_async(l, "mcp.call", json_array()), -1);
	ck_assert_int_eq(aud_submit_async(l, "mcp.call",
	    json_pack("{s:f}", "x", 0.5)), -1);
	ck_assert_int_eq(aud_submit_async(l, "mcp.call",
	    json_pack("{s:i}", "seq", 7)), -1);
	ck_assert_int_eq(aud_submit_async(l, "mcp.call",
	    json_pack("{s:i}", "Bad", 7)), -1);
	ck_assert_int_eq(aud_submit_async(l, "mcp.call",
	    json_pack("{s:I}", "x", (json_int_t)1 << 60)), -1);
	ck_assert_int_eq(aud_submit_durable(l, "mcp.call", NULL, on_done, NULL),
	    -1);
	ck_assert_int_eq(aud_submit_async(NULL, "mcp.call", json_object()), -1);
	ck_assert_int_eq(aud_sync(l), 0);
	ck_assert_uint_eq(aud_next_seq(l), 1);
	aud_close(l);
	aud_close(NULL);
}
END_TEST

START_TEST(test_overflow_gap)
{
	struct aud_log *l = open_log(af_dbpath, 2);
	uint64_t refused = 0, accepted = 0, i, lost = 0;
	json_t *rep, *gaps;
	size_t k;

	/* Bounded by count: with a queue of 2 and a FULL commit per batch
	 * the producer outruns the writer long before the bound. */
	for (i = 0; i < 2000000 && refused < 50; i++) {
		if (aud_submit_async(l, "net.deny", json_pack("{s:I}", "count",
		    (json_int_t)i)) == 0)
			accepted++;
		else {
			ck_assert_int_eq(errno, EAGAIN);
			refused++;
		}
	}
	ck_assert_uint_gt(refused, 0);
	ck_assert_uint_eq(aud_dropped(l), refused);
	ck_assert_int_eq(aud_sync(l), 0);
	aud_close(l);
	ck_assert_int_eq(verify(af_dbpath, af_vkey, NULL, 0, &rep), AUD_WARNINGS);
	gaps = json_object_get(rep, "gaps");
	ck_assert_uint_gt(json_array_size(gaps), 0);
	for (k = 0; k < json_array_size(gaps); k++) {
		ck_assert_str_eq(rstr(json_array_get(gaps, k), "reason", NULL),
		    "queue_overflow");
		lost += (uint64_t)rep_int(json_array_get(gaps, k), "lost", NULL);
	}
	/* Never silent: every refused record is counted in a log.gap. */
	ck_assert_uint_eq(lost, refused);
	/* log.open + accepted + gaps + log.close */
	ck_assert_int_eq(rep_int(rep, "size", NULL),
	    (long long)(accepted + 2 + json_array_size(gaps)));
	json_decref(rep);
}
END_TEST

/* The writer's own heartbeat, refused by a full queue, is counted like any
 * other async record: no heartbeat vanishes without a log.gap. */
START_TEST(test_heartbeat_overflow_gap)
{
	struct aud_log *l = open_log(af_dbpath, 2);
	uint64_t refused = 0, hb_refused = 0, accepted = 0, i, lost = 0;
	json_t *rep, *gaps;
	size_t k;

	/* Bounded by count: each round fills the queue, then asks for a
	 * heartbeat while it is (most likely) still full. */
	for (i = 0; i < 2000000 && hb_refused < 20; i++) {
		if (aud_submit_async(l, "net.deny", json_pack("{s:I}", "count",
		    (json_int_t)i)) == 0) {
			accepted++;
			continue;
		}
		ck_assert_int_eq(errno, EAGAIN);
		refused++;
		if (aud_heartbeat(l) == 0)
			accepted++;
		else {
			ck_assert_int_eq(errno, EAGAIN);
			hb_refused++;
		}
	}
	ck_assert_uint_gt(hb_refused, 0);
	ck_assert_uint_eq(aud_dropped(l), refused + hb_refused);
	ck_assert_int_eq(aud_sync(l), 0);
	aud_close(l);
	ck_assert_int_eq(verify(af_dbpath, af_vkey, NULL, 0, &rep), AUD_WARNINGS);
	gaps = json_object_get(rep, "gaps");
	for (k = 0; k < json_array_size(gaps); k++)
		lost += (uint64_t)rep_int(json_array_get(gaps, k), "lost", NULL);
	ck_assert_uint_eq(lost, refused + hb_refused);
	/* log.open + accepted (records and heartbeats) + gaps + log.close */
	ck_assert_int_eq(rep_int(rep, "size", NULL),
	    (long long)(accepted + 2 + json_array_size(gaps)));
	json_decref(rep);
}
END_TEST

START_TEST(test_reopen_continues)
{
	struct aud_log *l;
	sqlite3 *h;
	sqlite3_stmt *st;
	json_t *rep;

	make_log(af_dbpath, 10);
	make_log(af_dbpath, 10);
	ck_assert_int_eq(verify(af_dbpath, af_vkey, NULL, 0, &rep), AUD_WARNINGS);
	ck_assert_int_eq(rep_int(rep, "size", NULL), 24);
	json_decref(rep);
	/* The second log.open says it follows a clean close. */
	ck_assert_int_eq(sqlite3_open(af_dbpath, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT canon FROM records "
	    "WHERE seq = 12", -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	ck_assert_ptr_nonnull(strstr((const char *)sqlite3_column_text(st, 0),
	    "\"kind\":\"log.open\""));
	ck_assert_ptr_nonnull(strstr((const char *)sqlite3_column_text(st, 0),
	    "\"recovered\":false"));
	ck_assert_ptr_nonnull(strstr((const char *)sqlite3_column_text(st, 0),
	    "\"last_seq\":11"));
	sqlite3_finalize(st);
	sqlite3_close(h);
	/* Another origin cannot take over the file. */
	{
		struct aud_opts o = { 0 };

		o.db_path = af_dbpath;
		o.origin = "other.example";
		ck_assert_ptr_null(aud_open(&o, NULL, 0));
	}
	l = open_log(af_dbpath, 0);
	aud_close(l);
}
END_TEST

START_TEST(test_crash_recovery)
{
	int fds[2], status, i, nacked = 0;
	uint64_t seq, acked[1000];
	pid_t pid;
	ssize_t r;
	json_t *rep;
	sqlite3 *h;
	sqlite3_stmt *st;
	struct aud_log *l;
	char tool[32];

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		struct acks *a = calloc(1, sizeof(*a));
		struct aud_log *cl;
		int sent = 0;

		close(fds[0]);
		cl = open_log(af_dbpath, 0);
		for (i = 0; i < 400; i++)
			aud_submit_durable(cl, "mcp.call", mcp_fields(i),
			    on_done, a);
		/* Report every acknowledgement, then die mid-stream. */
		while (a->ok < 150) {
			wait_acks(cl, a, a->n + 1);
			for (; sent < a->ok; sent++)
				if (write(fds[1], &a->seqs[sent],
				    sizeof(seq)) != sizeof(seq))
					_exit(3);
		}
		_exit(0);
	}
	close(fds[1]);
	while ((r = read(fds[0], &seq, sizeof(seq))) == sizeof(seq) &&
	    nacked < 1000)
		acked[nacked++] = seq;
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_ge(nacked, 150);

	l = open_log(af_dbpath, 0);
	ck_assert_int_eq(aud_submit_async(l, "mcp.call", mcp_fields(9999)), 0);
	aud_close(l);
	ck_assert_int_eq(verify(af_dbpath, af_vkey, NULL, 0, &rep), AUD_WARNINGS);
	ck_assert(json_is_null(json_object_get(rep, "first_failure")));
	json_decref(rep);
	/* Every acknowledged record is there, with its content. */
	ck_assert_int_eq(sqlite3_open(af_dbpath, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT mcp_tool FROM records "
	    "WHERE seq = ?", -1, &st, NULL), SQLITE_OK);
	for (i = 0; i < nacked; i++) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, (sqlite3_int64)acked[i]);
		ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
		snprintf(tool, sizeof(tool), "t%d", (int)acked[i] - 1);
		ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), tool);
	}
	sqlite3_finalize(st);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT count(*) FROM records "
	    "WHERE kind = 6 AND CAST(canon AS TEXT) LIKE "
	    "'%\"recovered\":true%'", -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	ck_assert_int_eq(sqlite3_column_int(st, 0), 1);
	sqlite3_finalize(st);
	sqlite3_close(h);
}
END_TEST

static int
count_ckpts(const char *db)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	int n = -1;

	ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT count(*) FROM "
	    "checkpoints", -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return n;
}

START_TEST(test_cadence_and_heartbeat)
{
	struct aud_opts o = { 0 };
	struct aud_log *l;
	json_t *rep;
	struct stat sb;
	int i, before;

	o.db_path = af_dbpath;
	o.origin = af_origin;
	o.key_path = af_keypath;
	o.ckpt_ms = 3600 * 1000;	/* time never triggers here */
	o.ckpt_every = 10;
	o.batch_max = 5;
	l = aud_open(&o, NULL, 0);
	ck_assert_ptr_nonnull(l);
	/* The DB is private to the gateway. */
	ck_assert_int_eq(stat(af_dbpath, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 077, 0);
	before = count_ckpts(af_dbpath);
	ck_assert_int_eq(before, 1);	/* log.open forces one */
	for (i = 0; i < 100; i++) {
		ck_assert_int_eq(aud_submit_async(l, "net.deny",
		    json_pack("{s:i}", "count", i)), 0);
		if (i % 5 == 4)
			ck_assert_int_eq(aud_sync(l), 0);
	}
	ck_assert_int_eq(aud_sync(l), 0);
	/* Every 10 records (at batch ends of 5): 10 more checkpoints. */
	ck_assert_int_eq(count_ckpts(af_dbpath), before + 10);
	ck_assert_int_eq(aud_submit_async(l, "net.deny", json_object()), 0);
	ck_assert_int_eq(aud_sync(l), 0);
	ck_assert_int_eq(verify(af_dbpath, af_vkey, NULL, 0, &rep), AUD_WARNINGS);
	ck_assert_int_eq(rep_int(rep, "unsealed_tail", NULL), 1);
	json_decref(rep);
	/* The idle heartbeat seals the tail (and itself). */
	ck_assert_int_eq(aud_heartbeat(l), 0);
	ck_assert_int_eq(aud_sync(l), 0);
	ck_assert_int_eq(verify(af_dbpath, af_vkey, NULL, 0, &rep), AUD_WARNINGS);
	ck_assert_int_eq(rep_int(rep, "unsealed_tail", NULL), 0);
	json_decref(rep);
	aud_close(l);
}
END_TEST

START_TEST(test_key_rotation_reopen)
{
	struct aud_key *k2 = aud_key_new(af_origin, NULL, 0);
	struct aud_opts o = { 0 };
	struct aud_log *l;
	char k2path[160], vk2[256];
	const char *both[2];
	struct aud_verify_opts vo = { 0 };
	json_t *rep;

	make_log(af_dbpath, 5);
	snprintf(k2path, sizeof(k2path), "%s/key2.pem", af_dir);
	ck_assert_int_eq(aud_key_save(k2, k2path, NULL, 0), 0);
	aud_key_vkey(k2, vk2, sizeof(vk2));
	aud_key_free(k2);
	/* A new key can continue a log signed by the old one. */
	o.db_path = af_dbpath;
	o.key_path = k2path;
	l = aud_open(&o, NULL, 0);
	ck_assert_ptr_nonnull(l);
	aud_submit_async(l, "mcp.call", mcp_fields(1));
	aud_close(l);
	/* Pinning only the new key: the old checkpoints are not vouched. */
	ck_assert_int_eq(verify(af_dbpath, vk2, NULL, 0, NULL), AUD_TAMPERED);
	both[0] = af_vkey;
	both[1] = vk2;
	vo.db_path = af_dbpath;
	vo.vkeys = both;
	vo.nvkeys = 2;
	ck_assert_int_eq(aud_verify(&vo, &rep), AUD_WARNINGS);
	ck_assert_str_eq(rstr(rep, "assurance", NULL), "local-key");
	json_decref(rep);
}
END_TEST

/* Another writer holds the database: a batch cannot commit. Its async
 * record is counted in a write_error gap that starts when the record was
 * submitted, written with the next batch (_i 0) or by the close alone
 * (_i 1). The outcome, not its timing, is asserted. */
START_TEST(test_write_error_gap)
{
	struct acks *a = calloc(1, sizeof(*a));
	struct aud_log *l = open_log(af_dbpath, 0);
	struct timespec t0;
	sqlite3 *h;
	sqlite3_stmt *st;
	json_t *rep, *gaps, *g = NULL;
	int64_t from, t0ns;

	ck_assert_int_eq(sqlite3_open(af_dbpath, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL),
	    SQLITE_OK);
	clock_gettime(CLOCK_REALTIME, &t0);
	t0ns = (int64_t)t0.tv_sec * 1000000000 + t0.tv_nsec;
	ck_assert_int_eq(aud_submit_async(l, "net.deny", json_object()), 0);
	ck_assert_int_eq(aud_submit_durable(l, "mcp.call", mcp_fields(1),
	    on_done, a), 0);
	wait_acks(l, a, 1);
	ck_assert_int_eq(a->n, 1);
	ck_assert_int_eq(a->bad, 1);	/* the caller must not act */
	ck_assert_int_eq(sqlite3_exec(h, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	if (_i == 0) {
		ck_assert_int_eq(aud_submit_async(l, "net.deny",
		    json_object()), 0);
		ck_assert_int_eq(aud_sync(l), 0);
	}
	aud_close(l);
	ck_assert_int_eq(verify(af_dbpath, af_vkey, NULL, 0, &rep), AUD_WARNINGS);
	gaps = json_object_get(rep, "gaps");
	ck_assert_uint_eq(json_array_size(gaps), 1);
	ck_assert_str_eq(rstr(json_array_get(gaps, 0), "reason", NULL),
	    "write_error");
	/* The lost async record is counted, never silent. */
	ck_assert_int_eq(rep_int(json_array_get(gaps, 0), "lost", NULL), 1);
	json_decref(rep);
	/* It starts when that record was submitted, not at the epoch. */
	ck_assert_int_eq(sqlite3_open(af_dbpath, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT canon FROM records",
	    -1, &st, NULL), SQLITE_OK);
	while (g == NULL && sqlite3_step(st) == SQLITE_ROW) {
		const char *c = (const char *)sqlite3_column_text(st, 0);

		if (c != NULL && strstr(c, "\"write_error\"") != NULL)
			g = json_loads(c, 0, NULL);
	}
	ck_assert_ptr_nonnull(g);
	ck_assert_str_eq(json_string_value(json_object_get(g, "kind")),
	    "log.gap");
	ck_assert_ptr_nonnull(json_string_value(json_object_get(g,
	    "from_ts")));
	from = strtoll(json_string_value(json_object_get(g, "from_ts")),
	    NULL, 10);
	ck_assert_msg(from >= t0ns && from <= t0ns + 60 * 1000000000LL,
	    "write_error gap from %lld, the lost record was submitted at "
	    "%lld", (long long)from, (long long)t0ns);
	json_decref(g);
	sqlite3_finalize(st);
	sqlite3_close(h);
	free(a);
}
END_TEST

/* The database refusing the last batch before close: the async records
 * it held are neither silently gone nor pretended written; aud_close
 * reports them (after one more try as a gap), so the daemon can say so. */
START_TEST(test_close_unwritten_counted)
{
	struct aud_log *l = open_log(af_dbpath, 0);
	sqlite3 *h;
	int i;

	ck_assert_int_eq(aud_sync(l), 0);	/* log.open is in */
	ck_assert_int_eq(sqlite3_open(af_dbpath, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL),
	    SQLITE_OK);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(aud_submit_async(l, "net.deny",
		    json_object()), 0);
	/* The three, and the log.close record aud_close itself wrote. */
	ck_assert_uint_eq(aud_close(l), 4);
	ck_assert_int_eq(sqlite3_exec(h, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	ck_assert_uint_eq(aud_close(NULL), 0);
}
END_TEST

/* Releases a write lock held by another connection after a pause. */
static void *
release_later(void *arg)
{
	sqlite3 *h = arg;

	usleep(300000);
	sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
	return NULL;
}

/*
 * aud_close with the queue full (a flood at shutdown): log.close and the
 * final checkpoint must still be written, not dropped like a flood record
 * and left as an unsealed tail without a close marker.
 */
START_TEST(test_close_full_queue)
{
	struct aud_log *l = open_log(af_dbpath, 8);
	pthread_t th;
	sqlite3 *h;
	sqlite3_stmt *st;
	json_t *rep, *last;
	int i, refused = 0;

	ck_assert_int_eq(aud_sync(l), 0);
	ck_assert_int_eq(sqlite3_open(af_dbpath, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL),
	    SQLITE_OK);
	/* The writer is held by the lock: fill the queue to the brim. */
	for (i = 0; i < 1000 && refused == 0; i++)
		if (aud_submit_async(l, "net.deny", json_object()) == -1)
			refused++;
	ck_assert_int_eq(refused, 1);
	ck_assert_int_eq(pthread_create(&th, NULL, release_later, h), 0);
	ck_assert_uint_eq(aud_close(l), 0);
	pthread_join(th, NULL);
	sqlite3_close(h);
	ck_assert_int_eq(verify(af_dbpath, af_vkey, NULL, 0, &rep),
	    AUD_WARNINGS);
	ck_assert_int_eq(rep_int(rep, "unsealed_tail", NULL), 0);
	json_decref(rep);
	ck_assert_int_eq(sqlite3_open(af_dbpath, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT canon FROM records "
	    "ORDER BY seq DESC LIMIT 1", -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	last = aud_canon_parse(sqlite3_column_blob(st, 0),
	    (size_t)sqlite3_column_bytes(st, 0), NULL, 0);
	ck_assert_ptr_nonnull(last);
	ck_assert_str_eq(json_string_value(json_object_get(last, "kind")),
	    "log.close");
	json_decref(last);
	sqlite3_finalize(st);
	sqlite3_close(h);
}
END_TEST

START_TEST(test_triggers_guard)
{
	sqlite3 *h;

	make_log(af_dbpath, 3);
	ck_assert_int_eq(sqlite3_open(af_dbpath, &h), SQLITE_OK);
	ck_assert_int_ne(sqlite3_exec(h, "DELETE FROM records WHERE seq = 1",
	    NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_ne(sqlite3_exec(h, "UPDATE records SET ts_ns = 0", NULL,
	    NULL, NULL), SQLITE_OK);
	ck_assert_int_ne(sqlite3_exec(h, "DELETE FROM merkle_nodes", NULL,
	    NULL, NULL), SQLITE_OK);
	ck_assert_int_ne(sqlite3_exec(h, "DELETE FROM checkpoints", NULL,
	    NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(h, "UPDATE ship_cursor SET next_seq = 1",
	    NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
}
END_TEST

/* ---- tamper scenarios ---- */

static char *ext_ckpt;		/* exported after the original log closed */
static char tdb[160];

static void
tamper_setup(void)
{
	setup();
	make_log(af_dbpath, 50);
	ext_ckpt = aud_latest_checkpoint(af_dbpath, NULL, 0);
	ck_assert_ptr_nonnull(ext_ckpt);
	snprintf(tdb, sizeof(tdb), "%s/tampered.db", af_dir);
	copy_db(af_dbpath, tdb);
	exec_sql(tdb, drop_triggers);
}

static void
tamper_teardown(void)
{
	free(ext_ckpt);
	af_teardown();
}

START_TEST(test_untampered_external)
{
	const char *ext[1] = { ext_ckpt };
	json_t *rep;

	/* Same log, external checkpoint matches: the best assurance. */
	ck_assert_int_eq(verify(tdb, af_vkey, ext, 1, &rep), AUD_VERIFIED);
	ck_assert_str_eq(rstr(rep, "assurance", NULL), "external");
	ck_assert_str_eq(rstr(rep, "result", NULL), "verified");
	json_decref(rep);
	/* No key at all: nothing vouches. */
	ck_assert_int_eq(verify(tdb, NULL, NULL, 0, &rep), AUD_WARNINGS);
	ck_assert_str_eq(rstr(rep, "assurance", NULL), "none");
	json_decref(rep);
}
END_TEST

START_TEST(test_tamper_byte)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	char *c;
	int len;
	json_t *rep;

	ck_assert_int_eq(sqlite3_open(tdb, &h), SQLITE_OK);
	sqlite3_prepare_v2(h, "SELECT canon FROM records WHERE seq = 17", -1,
	    &st, NULL);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	len = sqlite3_column_bytes(st, 0);
	c = malloc((size_t)len);
	memcpy(c, sqlite3_column_blob(st, 0), (size_t)len);
	sqlite3_finalize(st);
	/* "t16" -> "t1X": still canonical, still the same length. */
	ck_assert_ptr_nonnull(strstr(c, "\"t16\""));
	strstr(c, "\"t16\"")[3] = 'X';
	sqlite3_prepare_v2(h, "UPDATE records SET canon = ? WHERE seq = 17",
	    -1, &st, NULL);
	sqlite3_bind_blob(st, 1, c, len, SQLITE_STATIC);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	sqlite3_close(h);
	free(c);
	ck_assert_int_eq(verify(tdb, af_vkey, NULL, 0, &rep), AUD_TAMPERED);
	ck_assert_int_eq(rep_int(rep, "first_failure", "seq"), 17);
	ck_assert_str_eq(rstr(rep, "first_failure", "check"), "rec_hash");
	ck_assert_str_eq(rstr(rep, "result", NULL), "tampered");
	json_decref(rep);
}
END_TEST

START_TEST(test_tamper_delete)
{
	json_t *rep;

	exec_sql(tdb, "DELETE FROM records WHERE seq = 20");
	ck_assert_int_eq(verify(tdb, af_vkey, NULL, 0, &rep), AUD_TAMPERED);
	ck_assert_int_eq(rep_int(rep, "first_failure", "seq"), 20);
	ck_assert_str_eq(rstr(rep, "first_failure", "check"), "contiguity");
	ck_assert_ptr_nonnull(strstr(rstr(rep, "first_failure", "detail"),
	    "gap"));
	json_decref(rep);
}
END_TEST

START_TEST(test_tamper_swap)
{
	json_t *rep;

	/* Swap the whole rows' evidence, hashes included. */
	exec_sql(tdb, "CREATE TEMP TABLE t AS SELECT seq, canon, rec_hash FROM "
	    "records WHERE seq IN (10, 11);"
	    "UPDATE records SET canon = (SELECT canon FROM t WHERE seq = 11), "
	    "rec_hash = (SELECT rec_hash FROM t WHERE seq = 11) WHERE seq = 10;"
	    "UPDATE records SET canon = (SELECT canon FROM t WHERE seq = 10), "
	    "rec_hash = (SELECT rec_hash FROM t WHERE seq = 10) WHERE seq = 11;");
	ck_assert_int_eq(verify(tdb, af_vkey, NULL, 0, &rep), AUD_TAMPERED);
	ck_assert_int_eq(rep_int(rep, "first_failure", "seq"), 10);
	json_decref(rep);
}
END_TEST

START_TEST(test_tamper_truncate)
{
	const char *ext[1] = { ext_ckpt };
	json_t *rep;

	/* Cut the tail and every trace of it, as root would. */
	exec_sql(tdb, "DELETE FROM records WHERE seq >= 40;"
	    "DELETE FROM merkle_nodes WHERE ((idx + 1) << level) > 40;"
	    "DELETE FROM checkpoints WHERE size > 40;");
	/* Without an external checkpoint the cut is not visible... */
	ck_assert_int_eq(verify(tdb, af_vkey, NULL, 0, &rep), AUD_WARNINGS);
	ck_assert(json_is_null(json_object_get(rep, "first_failure")));
	json_decref(rep);
	/* ...with one it is, with the number of missing records. */
	ck_assert_int_eq(verify(tdb, af_vkey, ext, 1, &rep), AUD_TAMPERED);
	ck_assert_str_eq(rstr(rep, "first_failure", "check"), "TRUNCATION");
	ck_assert_int_eq(rep_int(rep, "missing", NULL), 52 - 40);
	json_decref(rep);
	/* The writer refuses to extend a log whose stored checkpoint is
	 * beyond its records. */
	copy_db(af_dbpath, tdb);
	exec_sql(tdb, drop_triggers);
	exec_sql(tdb, "DELETE FROM records WHERE seq >= 40;"
	    "DELETE FROM merkle_nodes WHERE ((idx + 1) << level) > 40;");
	{
		struct aud_opts o = { 0 };
		char err[256];

		struct aud_key *k2 = aud_key_new(af_origin, NULL, 0);
		char k2path[160];

		o.db_path = tdb;
		o.key_path = af_keypath;
		ck_assert_ptr_null(aud_open(&o, err, sizeof(err)));
		/* Nor with another key (after a rotation): the records are
		 * judged whoever signed the checkpoint. */
		ck_assert_ptr_nonnull(k2);
		snprintf(k2path, sizeof(k2path), "%s/key-other.pem", af_dir);
		ck_assert_int_eq(aud_key_save(k2, k2path, NULL, 0), 0);
		aud_key_free(k2);
		o.key_path = k2path;
		ck_assert_ptr_null(aud_open(&o, err, sizeof(err)));
		ck_assert_ptr_nonnull(strstr(err, "rewritten or truncated"));
	}
}
END_TEST

START_TEST(test_tamper_fork)
{
	const char *ext[1] = { ext_ckpt };
	char fdb[160];
	struct aud_log *l;
	json_t *rep;
	int i;

	/* Root rewrites history and re-signs it with the host key. */
	snprintf(fdb, sizeof(fdb), "%s/forged.db", af_dir);
	l = open_log(fdb, 0);
	for (i = 0; i < 50; i++)
		aud_submit_async(l, "mcp.call", mcp_fields(i + 1000));
	aud_sync(l);
	aud_close(l);
	ck_assert_int_eq(verify(fdb, af_vkey, NULL, 0, &rep), AUD_WARNINGS);
	ck_assert_str_eq(rstr(rep, "assurance", NULL), "local-key");
	json_decref(rep);
	ck_assert_int_eq(verify(fdb, af_vkey, ext, 1, &rep), AUD_TAMPERED);
	ck_assert_str_eq(rstr(rep, "first_failure", "check"), "FORK");
	json_decref(rep);
}
END_TEST

START_TEST(test_tamper_index_column)
{
	json_t *rep;

	exec_sql(tdb, "UPDATE records SET mcp_tool = 'innocent' WHERE seq = 5");
	ck_assert_int_eq(verify(tdb, af_vkey, NULL, 0, &rep), AUD_TAMPERED);
	ck_assert_int_eq(rep_int(rep, "first_failure", "seq"), 5);
	ck_assert_str_eq(rstr(rep, "first_failure", "check"), "index");
	json_decref(rep);
}
END_TEST

START_TEST(test_tamper_merkle_and_ckpt)
{
	json_t *rep;

	exec_sql(tdb, "UPDATE merkle_nodes SET hash = zeroblob(32) WHERE "
	    "level = 2 AND idx = 3");
	ck_assert_int_eq(verify(tdb, af_vkey, NULL, 0, &rep), AUD_TAMPERED);
	ck_assert_str_eq(rstr(rep, "first_failure", "check"), "merkle");
	ck_assert_int_eq(rep_int(rep, "first_failure", "seq"), 15);
	json_decref(rep);
	copy_db(af_dbpath, tdb);
	exec_sql(tdb, drop_triggers);
	exec_sql(tdb, "INSERT INTO merkle_nodes VALUES (9, 9, zeroblob(32))");
	ck_assert_int_eq(verify(tdb, af_vkey, NULL, 0, NULL), AUD_TAMPERED);
	/* A checkpoint whose signature no longer matches its body. */
	copy_db(af_dbpath, tdb);
	exec_sql(tdb, drop_triggers);
	exec_sql(tdb, "UPDATE checkpoints SET note = CAST(replace(CAST(note AS "
	    "TEXT), char(10) || '52' || char(10), char(10) || '51' || char(10)) "
	    "AS BLOB) WHERE size = 52");
	ck_assert_int_eq(verify(tdb, af_vkey, NULL, 0, &rep), AUD_TAMPERED);
	ck_assert_str_eq(rstr(rep, "first_failure", "check"), "checkpoint");
	json_decref(rep);
}
END_TEST

START_TEST(test_wrong_key)
{
	struct aud_key *k = aud_key_new(af_origin, NULL, 0);
	char other[256];
	json_t *rep;

	aud_key_vkey(k, other, sizeof(other));
	aud_key_free(k);
	/* Checkpoints not signed by the pinned key: tamper, not a pass. */
	ck_assert_int_eq(verify(tdb, other, NULL, 0, &rep), AUD_TAMPERED);
	ck_assert_str_eq(rstr(rep, "first_failure", "check"), "checkpoint");
	json_decref(rep);
	ck_assert_int_eq(verify(tdb, "not a vkey", NULL, 0, NULL), AUD_ERROR);
}
END_TEST

/*
 * The pinned key names the log it vouches for (its name is the origin):
 * a log renamed to another origin, its checkpoints signed by the host key
 * under the pinned name, is not the pinned log, and must not pass as
 * "local-key" (nor turn a FORK into a mere error against an external
 * checkpoint of the real origin).
 */
START_TEST(test_origin_not_pinned)
{
	struct aud_opts o = { 0 };
	struct aud_log *l;
	struct aud_key *k;
	sqlite3 *h;
	sqlite3_stmt *st;
	char rdb[160], other[160], *body, *note;
	uint8_t root[32];
	const char *hex;
	json_t *rep;
	long long size;
	int i;

	snprintf(rdb, sizeof(rdb), "%s/renamed.db", af_dir);
	snprintf(other, sizeof(other), "%s.renamed", af_origin);
	o.db_path = rdb;
	o.origin = other;
	l = aud_open(&o, NULL, 0);
	ck_assert_ptr_nonnull(l);
	for (i = 0; i < 5; i++)
		aud_submit_async(l, "mcp.call", mcp_fields(i));
	aud_close(l);
	ck_assert_int_eq(verify(rdb, NULL, NULL, 0, &rep), AUD_WARNINGS);
	size = rep_int(rep, "size", NULL);
	hex = rstr(rep, "root", NULL);
	ck_assert_uint_eq(strlen(hex), 64);
	for (i = 0; i < 32; i++)
		sscanf(hex + 2 * i, "%2hhx", &root[i]);
	json_decref(rep);
	/* The host key, under the pinned name, signs the renamed log. */
	k = aud_key_load(af_keypath, af_origin, NULL, 0);
	ck_assert_ptr_nonnull(k);
	body = aud_ckpt_body(other, (uint64_t)size, root);
	note = aud_note_sign(k, body, NULL, 0);
	ck_assert_ptr_nonnull(note);
	ck_assert_int_eq(sqlite3_open(rdb, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "INSERT INTO checkpoints "
	    "(size, note, signed_ns) VALUES (?, ?, 0)", -1, &st, NULL),
	    SQLITE_OK);
	sqlite3_bind_int64(st, 1, size);
	sqlite3_bind_blob(st, 2, note, (int)strlen(note), SQLITE_STATIC);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	sqlite3_close(h);
	free(body);
	free(note);
	aud_key_free(k);
	ck_assert_int_eq(verify(rdb, af_vkey, NULL, 0, &rep), AUD_TAMPERED);
	ck_assert_str_eq(rstr(rep, "assurance", NULL), "none");
	json_decref(rep);
	{
		const char *ext[1] = { ext_ckpt };

		ck_assert_int_eq(verify(rdb, af_vkey, ext, 1, NULL),
		    AUD_TAMPERED);
	}
}
END_TEST

/* Hostile files: each must give tampered or error, never a crash. */
static const char *const hostile_sql[] = {
	"DROP TABLE records",
	"DROP TABLE merkle_nodes",
	"DROP TABLE checkpoints",
	"DROP TABLE log_meta",
	"UPDATE log_meta SET v = 'other/1' WHERE k = 'format'",
	"UPDATE records SET canon = 42 WHERE seq = 3",
	"UPDATE records SET canon = zeroblob(2000000) WHERE seq = 3",
	"UPDATE records SET rec_hash = 'x' WHERE seq = 3",
	"UPDATE records SET seq = 'abc' WHERE seq = 3",
	"UPDATE records SET canon = CAST(replace(CAST(canon AS TEXT), ',', ', ')"
	    " AS BLOB), rec_hash = sha3(1) WHERE seq = 3",
	"UPDATE checkpoints SET note = zeroblob(10)",
	"UPDATE checkpoints SET size = -5 WHERE size = (SELECT min(size) FROM "
	    "checkpoints)",
	"UPDATE merkle_nodes SET hash = 'short'",
	"UPDATE records SET ts_ns = 'x' WHERE seq = 2",
	"ALTER TABLE records RENAME COLUMN canon TO c2",
};

START_TEST(test_hostile_db)
{
	int rc;
	json_t *rep;
	sqlite3 *h;

	ck_assert_int_eq(sqlite3_open(tdb, &h), SQLITE_OK);
	/* sha3() is not built in everywhere: fall back to a wrong hash. */
	if (sqlite3_exec(h, hostile_sql[_i], NULL, NULL, NULL) != SQLITE_OK)
		ck_assert_int_eq(sqlite3_exec(h, "UPDATE records SET canon = "
		    "CAST(replace(CAST(canon AS TEXT), ',', ', ') AS BLOB) "
		    "WHERE seq = 3", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	rc = verify(tdb, af_vkey, NULL, 0, &rep);
	ck_assert_msg(rc == AUD_TAMPERED || rc == AUD_ERROR,
	    "hostile %d: rc %d", _i, rc);
	ck_assert(json_is_string(json_object_get(rep, "result")));
	json_decref(rep);
}
END_TEST

START_TEST(test_not_a_db)
{
	char path[160];
	FILE *f;

	snprintf(path, sizeof(path), "%s/missing.db", af_dir);
	ck_assert_int_eq(verify(path, af_vkey, NULL, 0, NULL), AUD_ERROR);
	/* verify never creates the file it was asked to read. */
	ck_assert_int_eq(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/garbage.db", af_dir);
	f = fopen(path, "w");
	fputs("this is not SQLite, just bytes pretending\n", f);
	fclose(f);
	ck_assert_int_eq(verify(path, af_vkey, NULL, 0, NULL), AUD_ERROR);
}
END_TEST

START_TEST(test_proofs)
{
	struct aud_key *k = aud_key_from_vkey(af_vkey, NULL, 0), *o;
	char *p, err[256];
	json_t *rec;
	int i;

	for (i = 0; i < 52; i += 7) {
		p = aud_proof(af_dbpath, (uint64_t)i, err, sizeof(err));
		ck_assert_msg(p != NULL, "proof %d: %s", i, err);
		ck_assert_int_eq(aud_check_proof(p, strlen(p), k, &rec, err,
		    sizeof(err)), 0);
		ck_assert_int_eq(json_integer_value(json_object_get(rec, "seq")),
		    i);
		json_decref(rec);
		/* An edited record inside the proof is caught. */
		p[strlen("c2sp.org/tlog-proof@v1\nextra ") + 10] ^= 0x01;
		ck_assert_int_eq(aud_check_proof(p, strlen(p), k, NULL, err,
		    sizeof(err)), -1);
		free(p);
	}
	p = aud_proof(af_dbpath, 9, err, sizeof(err));
	o = aud_key_new(af_origin, NULL, 0);
	ck_assert_int_eq(aud_check_proof(p, strlen(p), o, NULL, err,
	    sizeof(err)), -1);
	/* Pretending it is another index fails too. */
	memcpy(strstr(p, "index 9"), "index 8", 7);
	ck_assert_int_eq(aud_check_proof(p, strlen(p), k, NULL, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(aud_check_proof("garbage", 7, k, NULL, err,
	    sizeof(err)), -1);
	free(p);
	ck_assert_ptr_null(aud_proof(af_dbpath, 52, err, sizeof(err)));
	aud_key_free(k);
	aud_key_free(o);
}
END_TEST

START_TEST(test_ocsf)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	json_t *ev;
	char uid[200];

	ck_assert_int_eq(sqlite3_open(af_dbpath, &h), SQLITE_OK);
	sqlite3_prepare_v2(h, "SELECT canon, hex(rec_hash) FROM records WHERE "
	    "seq = 3", -1, &st, NULL);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	ev = aud_ocsf(sqlite3_column_blob(st, 0),
	    (size_t)sqlite3_column_bytes(st, 0), NULL, 0);
	ck_assert_ptr_nonnull(ev);
	ck_assert_int_eq(json_integer_value(json_object_get(ev, "class_uid")),
	    6003);
	ck_assert_int_eq(json_integer_value(json_object_get(ev, "type_uid")),
	    600399);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(ev,
	    "metadata"), "version")), "1.8.0");
	snprintf(uid, sizeof(uid), "%s#3", af_origin);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(ev,
	    "metadata"), "uid")), uid);
	ck_assert_int_eq(strcasecmp(json_string_value(json_object_get(
	    json_object_get(ev, "raw_data_hash"), "value")),
	    (const char *)sqlite3_column_text(st, 1)), 0);
	/* record 3 is t2: decision deny? (2 % 3 != 0 -> allow) */
	ck_assert_int_eq(json_integer_value(json_object_get(ev, "action_id")),
	    1);
	json_decref(ev);
	sqlite3_finalize(st);
	sqlite3_close(h);
	ck_assert_ptr_null(aud_ocsf("{\"a\":1}", 7, NULL, 0));
	ck_assert_ptr_null(aud_ocsf("{ }", 3, NULL, 0));
}
END_TEST

/* The MCP record kinds in OCSF: each is API Activity (6003) naming what
 * was done (api.operation, activity_name) to which object (resources[0]),
 * a resource read as activity 2 (Read). */
START_TEST(test_ocsf_mcp_kinds)
{
	static const struct {
		const char *kind, *key, *name, *op, *type;
		int act;
	} k[] = {
		{ "mcp.call", "tool", "echo", "tools/call", "mcp.tool", 99 },
		{ "mcp.resource", "uri", "note://docs/a", "resources/read",
		  "mcp.resource", 2 },
		{ "mcp.prompt", "prompt", "summarize", "prompts/get",
		  "mcp.prompt", 99 },
	};
	json_t *rec, *ev, *res;
	char *canon;
	size_t i;

	for (i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		rec = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s}", "kind",
		    k[i].kind, "seq", 7, "origin", "o.test", "ts",
		    "1700000000000000000", "decision", "allow", "server",
		    "docs", k[i].key, k[i].name);
		canon = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
		ev = aud_ocsf(canon, strlen(canon), NULL, 0);
		ck_assert_msg(ev != NULL, "%s", canon);
		ck_assert_int_eq(json_integer_value(json_object_get(ev,
		    "class_uid")), 6003);
		ck_assert_int_eq(json_integer_value(json_object_get(ev,
		    "activity_id")), k[i].act);
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_object_get(ev, "api"), "operation")), k[i].op);
		ck_assert_str_eq(json_string_value(json_object_get(ev,
		    "activity_name")), k[i].op);
		res = json_array_get(json_object_get(ev, "resources"), 0);
		ck_assert_str_eq(json_string_value(json_object_get(res,
		    "name")), k[i].name);
		ck_assert_str_eq(json_string_value(json_object_get(res,
		    "type")), k[i].type);
		json_decref(ev);
		free(canon);
		json_decref(rec);
	}
}
END_TEST

/* A server request in OCSF: API Activity whose operation is the method the
 * upstream asked, about the server that asked it. */
START_TEST(test_ocsf_server_request)
{
	static const char *const methods[] = { "sampling/createMessage",
		"elicitation/create", "roots/list" };
	json_t *rec, *ev, *res;
	char *canon;
	size_t i;

	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		rec = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s}", "kind",
		    "mcp.server_request", "seq", 7, "origin", "o.test", "ts",
		    "1700000000000000000", "decision", "deny", "server",
		    "docs", "method", methods[i]);
		canon = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
		ev = aud_ocsf(canon, strlen(canon), NULL, 0);
		ck_assert_msg(ev != NULL, "%s", canon);
		ck_assert_int_eq(json_integer_value(json_object_get(ev,
		    "class_uid")), 6003);
		ck_assert_int_eq(json_integer_value(json_object_get(ev,
		    "activity_id")), 99);
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_object_get(ev, "api"), "operation")), methods[i]);
		ck_assert_str_eq(json_string_value(json_object_get(ev,
		    "activity_name")), methods[i]);
		res = json_array_get(json_object_get(ev, "resources"), 0);
		ck_assert_str_eq(json_string_value(json_object_get(res,
		    "name")), "docs");
		ck_assert_str_eq(json_string_value(json_object_get(res,
		    "type")), "mcp.server");
		json_decref(ev);
		free(canon);
		json_decref(rec);
	}
}
END_TEST

static int
count_lines(const char *path, char *last_ckpt, size_t len)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	int n = 0;

	ck_assert_ptr_nonnull(f);
	while (getline(&line, &cap, f) != -1) {
		n++;
		if (last_ckpt != NULL && strncmp(line, "{\"checkpoint\"", 13) ==
		    0)
			snprintf(last_ckpt, len, "%s", line);
	}
	free(line);
	fclose(f);
	return n;
}

START_TEST(test_ship_file)
{
	char out[160], oc[160], err[256], last[4096] = "", line[4096];
	const char *ext[1];
	json_t *j, *rep;
	struct aud_log *l;
	int nck, lines;
	FILE *f;

	snprintf(out, sizeof(out), "%s/sink.ndjson", af_dir);
	snprintf(oc, sizeof(oc), "%s/sink.ocsf", af_dir);
	nck = count_ckpts(af_dbpath);
	ck_assert_int_eq(aud_ship_file(af_dbpath, "soc", out, 0, 1000, err,
	    sizeof(err)), 52);
	lines = count_lines(out, last, sizeof(last));
	ck_assert_int_eq(lines, 52 + nck);
	/* The cursor is durable: nothing is sent twice. */
	ck_assert_int_eq(aud_ship_file(af_dbpath, "soc", out, 0, 1000, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(count_lines(out, NULL, 0), lines);
	/* The shipped checkpoint is an external one for verify. */
	j = json_loads(last, 0, NULL);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "size")), 52);
	ext[0] = json_string_value(json_object_get(j, "checkpoint"));
	ck_assert_int_eq(verify(af_dbpath, af_vkey, ext, 1, &rep), AUD_VERIFIED);
	ck_assert_str_eq(rstr(rep, "assurance", NULL), "external");
	json_decref(rep);
	json_decref(j);
	/* New records follow, in batches of at most max. */
	l = open_log(af_dbpath, 0);
	aud_submit_async(l, "mcp.call", mcp_fields(7));
	aud_close(l);
	ck_assert_int_eq(aud_ship_file(af_dbpath, "soc", out, 0, 2, err,
	    sizeof(err)), 2);
	ck_assert_int_eq(aud_ship_file(af_dbpath, "soc", out, 0, 2, err,
	    sizeof(err)), 1);
	ck_assert_int_eq(aud_ship_file(af_dbpath, "soc", out, 0, 2, err,
	    sizeof(err)), 0);
	/* Each sink has its own cursor; OCSF events carry origin#seq. */
	ck_assert_int_eq(aud_ship_file(af_dbpath, "ocsf-1", oc, 1, 1000, err,
	    sizeof(err)), 55);
	f = fopen(oc, "r");
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	fclose(f);
	j = json_loads(line, 0, NULL);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j,
	    "metadata"), "sequence")), 0);
	json_decref(j);
	ck_assert_int_eq(aud_ship_file(af_dbpath, "Bad Name", oc, 0, 10, err,
	    sizeof(err)), -1);
	snprintf(line, sizeof(line), "%s/none.db", af_dir);
	ck_assert_int_eq(aud_ship_file(line, "soc", oc, 0, 10, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(access(line, F_OK), -1);
	/* A relative path is the working directory's; a sink of its own
	 * gets the same stream as the one shipped in small batches. */
	ck_assert_int_eq(chdir(af_dir), 0);
	ck_assert_int_eq(aud_ship_file(af_dbpath, "rel", "rel.ndjson", 0, 1000,
	    err, sizeof(err)), 55);
	snprintf(line, sizeof(line), "%s/rel.ndjson", af_dir);
	ck_assert_int_eq(count_lines(line, NULL, 0), count_lines(out, NULL,
	    0));
	/* The feed never follows a symlink nor writes into a non-file:
	 * nothing is shipped and the cursor stays. */
	snprintf(line, sizeof(line), "%s/link.ndjson", af_dir);
	ck_assert_int_eq(symlink(out, line), 0);
	ck_assert_int_eq(aud_ship_file(af_dbpath, "lnk", line, 0, 10, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(aud_ship_file(af_dbpath, "lnk", af_dir, 0, 10, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(aud_ship_file(af_dbpath, "soc", out, 0, 0, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	snprintf(line, sizeof(line), "%s/lnk.ndjson", af_dir);
	ck_assert_int_eq(aud_ship_file(af_dbpath, "lnk", line, 0, 1, err,
	    sizeof(err)), 1);
	f = fopen(line, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	fclose(f);
	j = json_loads(line, 0, NULL);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "seq")), 0);
	json_decref(j);
	/* A damaged log is not shipped with a hole in it. */
	exec_sql(tdb, "DELETE FROM records WHERE seq = 3");
	snprintf(line, sizeof(line), "%s/t.ndjson", af_dir);
	ck_assert_int_eq(aud_ship_file(tdb, "soc2", line, 0, 100, err,
	    sizeof(err)), -1);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("audit_log");
	TCase *core = tcase_create("Core"), *lim = tcase_create("Limits");
	TCase *tam = tcase_create("Tamper");
	SRunner *sr;
	int nf;

	tcase_add_checked_fixture(core, setup, af_teardown);
	tcase_add_test(core, test_durable);
	tcase_add_test(core, test_async_linger_ends);
	tcase_add_test(core, test_linger_small_queue);
	tcase_add_test(core, test_submit_canon);
	tcase_add_test(core, test_reopen_continues);
	tcase_add_test(core, test_crash_recovery);
	tcase_add_test(core, test_triggers_guard);
	tcase_add_test(core, test_cadence_and_heartbeat);
	tcase_add_test(core, test_key_rotation_reopen);
	tcase_set_timeout(core, 300);
	tcase_add_checked_fixture(lim, setup, af_teardown);
	tcase_add_test(lim, test_submit_refuses);
	tcase_add_test(lim, test_overflow_gap);
	tcase_add_test(lim, test_heartbeat_overflow_gap);
	tcase_add_loop_test(lim, test_write_error_gap, 0, 2);
	tcase_add_test(lim, test_close_unwritten_counted);
	tcase_add_test(lim, test_close_full_queue);
	tcase_set_timeout(lim, 300);
	tcase_add_checked_fixture(tam, tamper_setup, tamper_teardown);
	tcase_add_test(tam, test_untampered_external);
	tcase_add_test(tam, test_tamper_byte);
	tcase_add_test(tam, test_tamper_delete);
	tcase_add_test(tam, test_tamper_swap);
	tcase_add_test(tam, test_tamper_truncate);
	tcase_add_test(tam, test_tamper_fork);
	tcase_add_test(tam, test_tamper_index_column);
	tcase_add_test(tam, test_tamper_merkle_and_ckpt);
	tcase_add_test(tam, test_wrong_key);
	tcase_add_test(tam, test_origin_not_pinned);
	tcase_add_loop_test(tam, test_hostile_db, 0,
	    sizeof(hostile_sql) / sizeof(hostile_sql[0]));
	tcase_add_test(tam, test_not_a_db);
	tcase_add_test(tam, test_proofs);
	tcase_add_test(tam, test_ocsf);
	tcase_add_test(tam, test_ocsf_mcp_kinds);
	tcase_add_test(tam, test_ocsf_server_request);
	tcase_add_test(tam, test_ship_file);
	tcase_set_timeout(tam, 300);
	suite_add_tcase(s, core);
	suite_add_tcase(s, lim);
	suite_add_tcase(s, tam);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
