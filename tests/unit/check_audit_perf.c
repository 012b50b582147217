/*
 * check_audit_perf: the fast paths of the audit log hold the same guarantees
 * as the slow ones they replaced.
 *
 * The writer now builds each record by merging the producer's pre-serialised
 * fields with the common fields, the verifier checks canonical form in one
 * pass without a JSON tree and re-derives the index columns from byte spans,
 * and items are recycled between producer and writer. Each of these is held
 * here against the reference behaviour: the one-pass check against parse +
 * re-serialise on mutated records, built records against aud_canon_dump, the
 * span-derived columns against tampering, and many concurrent durable
 * producers against exact, contiguous acknowledgement. Throughput figures are
 * printed ("# ..."), never asserted: tests do not depend on timing.
 */
#include <sys/stat.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <sqlite3.h>

#include "audit/audit.h"
#include "audit/priv.h"
#include "tests/unit/audit_fixture.h"

static void
setup(void)
{
	af_setup("check_audit_perf", "perf.example");
}

static struct aud_log *
open_log(unsigned batch_max, unsigned queue_max)
{
	struct aud_opts o = { 0 };
	struct aud_log *l;
	char err[256];

	o.db_path = af_dbpath;
	o.origin = af_origin;
	o.key_path = af_keypath;
	o.batch_max = batch_max;
	o.queue_max = queue_max;
	l = aud_open(&o, err, sizeof(err));
	ck_assert_msg(l != NULL, "aud_open: %s", err);
	return l;
}

static int
verify(json_t **rep)
{
	struct aud_verify_opts o = { 0 };
	const char *keys[1] = { af_vkey };

	o.db_path = af_dbpath;
	o.vkeys = keys;
	o.nvkeys = 1;
	return aud_verify(&o, rep);
}

static const char *
rstr(const json_t *o, const char *a, const char *b)
{
	json_t *v = json_object_get(o, a);

	if (b != NULL)
		v = json_object_get(v, b);
	return json_is_string(v) ? json_string_value(v) : "";
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the one-pass check against parse + re-serialise ---- */

static uint64_t rng = 0x2545f4914f6cdd1dULL;

static uint32_t
next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* Keys chosen to sit next to each other and to the common field names. */
static const char *const rkeys[] = {
	"a", "b", "seq", "seq0", "z9", "_", "k_1", "kind_x", "mon", "monox",
	"origin0", "pre", "prev_", "t", "ts_", "u", "v0", "0", "a_1", "a1",
};
static const char *const rstrs[] = {
	"", "x", "\xe2\x82\xac", "\"\\", "\n\t\x01\x1f\x7f", "\xf0\x9f\x98\x80",
	"/", "0123456789abcdef0123456789abcdef", "\b\f\r", "caf\xc3\xa9 ok",
	"a long plain string with spaces, commas: and colons",
};

static json_t *
random_value(int depth)
{
	json_t *v;
	int i, n;

	switch (depth > 3 ? next_rand() % 4 : next_rand() % 6) {
	case 0:
		return json_integer((json_int_t)(next_rand() % 2000001) -
		    1000000);
	case 1:
		return json_string(rstrs[next_rand() %
		    (sizeof(rstrs) / sizeof(rstrs[0]))]);
	case 2:
		return next_rand() % 3 == 0 ? json_true() :
		    next_rand() % 2 ? json_false() : json_null();
	case 3:
		return json_integer(next_rand() % 2 ? AUD_INT_MAX :
		    -AUD_INT_MAX);
	case 4:
		v = json_array();
		n = (int)(next_rand() % 4);
		for (i = 0; i < n; i++)
			json_array_append_new(v, random_value(depth + 1));
		return v;
	default:
		v = json_object();
		n = (int)(next_rand() % 6);
		for (i = 0; i < n; i++)
			json_object_set_new(v, rkeys[next_rand() %
			    (sizeof(rkeys) / sizeof(rkeys[0]))],
			    random_value(depth + 1));
		return v;
	}
}

/* Both must agree, and what either accepts must be exactly canonical. */
static int
same_verdict(const char *m, size_t len)
{
	struct aud_scan sc = { 0 };
	json_t *back;
	char *re;
	size_t rl;
	int a, b;

	a = aud_canon_check(m, len, &sc, NULL, 0) == 0;
	back = aud_canon_parse(m, len, NULL, 0);
	b = back != NULL;
	if (b) {
		re = aud_canon_dump(back, &rl, NULL, 0);
		ck_assert_ptr_nonnull(re);
		ck_assert(rl == len && memcmp(re, m, len) == 0);
		free(re);
		json_decref(back);
	}
	aud_scan_free(&sc);
	ck_assert_msg(a == b, "check says %d, parse says %d for [%.*s]", a, b,
	    (int)len, m);
	return a;
}

START_TEST(test_check_matches_parse)
{
	static const char special[] = " ,:\"\\0e.-{}[]u1fatn\x80\xff";
	json_t *v;
	char *out, *m;
	size_t len, j;
	int i, accepted = 0, refused = 0;

	/* Flip, insert, cut and swap bytes of valid records, many times. */
	for (i = 0; i < 20000; i++) {
		v = random_value(0);
		out = aud_canon_dump(v, &len, NULL, 0);
		json_decref(v);
		ck_assert_ptr_nonnull(out);
		ck_assert(same_verdict(out, len));
		m = malloc(len + 2);
		memcpy(m, out, len);
		j = len ? next_rand() % len : 0;
		switch (next_rand() % 4) {
		case 0:
			if (len)
				m[j] = (char)(next_rand() & 0xff);
			break;
		case 1:
			memmove(m + j + 1, m + j, len - j);
			m[j] = special[next_rand() % (sizeof(special) - 1)];
			len++;
			break;
		case 2:
			len = j;
			break;
		default:
			if (j + 1 < len) {
				char t = m[j];

				m[j] = m[j + 1];
				m[j + 1] = t;
			}
		}
		if (same_verdict(m, len))
			accepted++;
		else
			refused++;
		free(m);
		free(out);
	}
	ck_assert_int_gt(accepted, 0);
	ck_assert_int_gt(refused, 0);
}
END_TEST

/* Hand-picked edge cases of the serialiser's rules. */
static const struct {
	const char *in;
	size_t len;	/* 0: strlen */
} edges[] = {
	{ "\"\\u001f\"", 0 }, { "\"\\u001F\"", 0 }, { "\"\\u0008\"", 0 },
	{ "\"\\u0009\"", 0 }, { "\"\\u000a\"", 0 }, { "\"\\u000c\"", 0 },
	{ "\"\\u000d\"", 0 }, { "\"\\u0000\"", 0 }, { "\"\\u0020\"", 0 },
	{ "\"\\u007f\"", 0 }, { "\"\\u00e9\"", 0 }, { "\"\\u0100\"", 0 },
	{ "\"\\/\"", 0 }, { "\"\\b\\f\\n\\r\\t\\\"\\\\\"", 0 },
	{ "\"\x7f\"", 0 }, { "\"\xc3\xa9\"", 0 }, { "\"\xc0\x80\"", 0 },
	{ "\"\xed\xa0\x80\"", 0 }, { "\"\xf4\x8f\xbf\xbf\"", 0 },
	{ "\"\xf4\x90\x80\x80\"", 0 }, { "\"abcdefghijklmnop\"", 0 },
	{ "\"abcdefgh\x01ijklmnop\"", 0 }, { "\"abcdefg\"hijklmnop\"", 0 },
	{ "\"a\0b\"", 5 }, { "\"abcdefghijklmno\\", 0 },
	{ "0", 0 }, { "-0", 0 }, { "00", 0 }, { "-01", 0 }, { "1.0", 0 },
	{ "1e1", 0 }, { "9007199254740991", 0 }, { "9007199254740992", 0 },
	{ "-9007199254740991", 0 }, { "-9007199254740992", 0 },
	{ "10000000000000000", 0 }, { "-", 0 }, { "+1", 0 },
	{ "{\"a\":1,\"a\":1}", 0 }, { "{\"a\":1,\"a_\":1}", 0 },
	{ "{\"a_\":1,\"a\":1}", 0 }, { "{\"a\":1,\"a0\":1,\"a_\":1}", 0 },
	{ "{\"b\":1,\"a\":1}", 0 }, { "{\"\\u0061\":1}", 0 },
	{ "{\"A\":1}", 0 }, { "{\"\":1}", 0 }, { "{\"a\":1,}", 0 },
	{ "{\"a\" :1}", 0 }, { "[1,]", 0 }, { "[]", 0 }, { "{}", 0 },
	{ "[[[]]]", 0 }, { "true", 0 }, { "tru", 0 }, { "nulll", 0 },
	{ "{\"a\":[true,false,null,\"x\",{\"b\":-5}]}", 0 }, { "", 0 },
	{ "{}\0", 3 }, { "{\"a\":1}{}", 0 },
};

START_TEST(test_check_edges)
{
	size_t len = edges[_i].len ? edges[_i].len : strlen(edges[_i].in);

	same_verdict(edges[_i].in, len);
}
END_TEST

START_TEST(test_check_deep_and_large)
{
	char *buf;
	size_t n = 100000, i;

	buf = malloc(2 * n + 1);
	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < n; i++) {
		buf[i] = '[';
		buf[n + i] = ']';
	}
	ck_assert_int_eq(aud_canon_check(buf, 2 * n, NULL, NULL, 0), -1);
	for (i = 0; i <= AUD_MAX_DEPTH; i++) {
		buf[i] = '[';
		buf[AUD_MAX_DEPTH + 1 + i] = ']';
	}
	ck_assert(same_verdict(buf, 2 * (AUD_MAX_DEPTH + 1)));
	buf[AUD_MAX_DEPTH + 1] = '[';
	buf[AUD_MAX_DEPTH + 2] = ']';
	for (i = 0; i <= AUD_MAX_DEPTH; i++)
		buf[AUD_MAX_DEPTH + 3 + i] = ']';
	ck_assert(!same_verdict(buf, 2 * (AUD_MAX_DEPTH + 2)));
	free(buf);
	/* One byte over the record limit is refused before anything. */
	buf = malloc(AUD_MAX_RECORD + 1);
	ck_assert_ptr_nonnull(buf);
	memset(buf, 'a', AUD_MAX_RECORD + 1);
	buf[0] = '"';
	buf[AUD_MAX_RECORD] = '"';
	ck_assert_int_eq(aud_canon_check(buf, AUD_MAX_RECORD + 1, NULL,
	    NULL, 0), -1);
	ck_assert(same_verdict(buf + 1, AUD_MAX_RECORD - 1) == 0);
	free(buf);
}
END_TEST

START_TEST(test_members_and_spans)
{
	struct aud_scan sc = { 0 };
	struct aud_strbuf sb = { 0 };
	struct aud_members m;
	const struct aud_member *mm;
	const char *s, *val;
	json_t *v, *back;
	char *out, key[64];
	size_t len, i, n, vlen;
	long long iv;
	int k;

	for (k = 0; k < 3000; k++) {
		v = json_object();
		for (i = 0; i < 1 + next_rand() % 8; i++)
			json_object_set_new(v, rkeys[next_rand() %
			    (sizeof(rkeys) / sizeof(rkeys[0]))],
			    random_value(1));
		out = aud_canon_dump(v, &len, NULL, 0);
		ck_assert_ptr_nonnull(out);
		/* The writer's cut: same bytes, members where they are. */
		ck_assert_int_eq(aud_canon_members(v, &m, NULL, 0), 0);
		ck_assert_uint_eq(m.len, len);
		ck_assert(memcmp(m.buf, out, len) == 0);
		ck_assert_uint_eq(m.n, json_object_size(v));
		ck_assert_int_eq(aud_canon_check(out, len, &sc, NULL, 0), 0);
		ck_assert_uint_eq(sc.n, m.n);
		for (i = 0; i < sc.n; i++) {
			ck_assert(sc.m[i].key == out + m.start[i] + 1);
			ck_assert(sc.m[i].klen < sizeof(key));
			memcpy(key, sc.m[i].key, sc.m[i].klen);
			key[sc.m[i].klen] = '\0';
			mm = aud_scan_get(&sc, key);
			ck_assert(mm == &sc.m[i]);
			ck_assert_int_eq(aud_cv_member(out, len, key, &val,
			    &vlen), 0);
			ck_assert(val == sc.m[i].val && vlen == sc.m[i].vlen);
			back = aud_canon_parse(val, vlen, NULL, 0);
			ck_assert_ptr_nonnull(back);
			ck_assert(json_equal(back, json_object_get(v, key)));
			if (json_is_string(back)) {
				ck_assert_int_eq(aud_cv_str(val, vlen, &sb, &s,
				    &n), 0);
				ck_assert_uint_eq(n, json_string_length(back));
				ck_assert(memcmp(s, json_string_value(back),
				    n) == 0);
			} else
				ck_assert_int_eq(aud_cv_str(val, vlen, &sb, &s,
				    &n), -1);
			if (json_is_integer(back)) {
				ck_assert_int_eq(aud_cv_int(val, vlen, &iv), 0);
				ck_assert(iv == json_integer_value(back));
			} else
				ck_assert_int_eq(aud_cv_int(val, vlen, &iv), -1);
			json_decref(back);
		}
		ck_assert_ptr_null(aud_scan_get(&sc, "no_such_key"));
		ck_assert_int_eq(aud_cv_member(out, len, "no_such_key", &val,
		    &vlen), -1);
		aud_members_free(&m);
		free(out);
		json_decref(v);
	}
	aud_scan_free(&sc);
	free(sb.p);
}
END_TEST

/* ---- records built by merging, read back ---- */

static json_t *
tricky_fields(int i)
{
	json_t *f = random_value(4);

	/* Fields whose names sort around every common field, and index
	 * fields in each shape the columns read, escapes included. */
	json_decref(f);
	f = json_pack("{s:i,s:s,s:i,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s}",
	    "a", i, "kind_x", "k", "kinda", i, "mon", "m", "monox", 1,
	    "origin0", 2, "pre", 3, "prev_", 4, "seq0", 5, "t", 6, "ts_", 7,
	    "v0", 8, "zz", "\xe2\x82\xac\n\"");
	switch (i % 4) {
	case 0:
		json_object_set_new(f, "sandbox", json_pack("{s:s,s:s}", "id",
		    "sb-\"quoted\"\x01", "run", "r"));
		json_object_set_new(f, "dst", json_pack("{s:s,s:s,s:i}", "host",
		    "h\\ost.example", "ip", "192.0.2.7", "port", 443));
		json_object_set_new(f, "decision", json_string("deny"));
		break;
	case 1:
		json_object_set_new(f, "sandbox", json_string("plain-sb"));
		json_object_set_new(f, "dst", json_pack("{s:s,s:s}", "host",
		    "x.example", "port", "443"));
		json_object_set_new(f, "decision", json_string("maybe"));
		break;
	case 2:
		json_object_set_new(f, "sandbox", json_pack("{s:i}", "id", 5));
		json_object_set_new(f, "policy", json_pack("{s:s,s:s}", "id",
		    "p", "rule", "mcp.tools[3] \"x\""));
		json_object_set_new(f, "server", json_string("srv\tx"));
		json_object_set_new(f, "tool", json_string("t\xc3\xa9"));
		json_object_set_new(f, "decision", json_string("ask"));
		break;
	default:
		json_object_set_new(f, "dst", json_string("not an object"));
		json_object_set_new(f, "policy", json_string("flat"));
		json_object_set_new(f, "decision", json_string("log"));
	}
	return f;
}

START_TEST(test_built_records)
{
	struct aud_log *l = open_log(0, 0);
	sqlite3 *db;
	sqlite3_stmt *st;
	json_t *rep, *rec, *want;
	const char *const common[] = { "v", "origin", "seq", "prev", "ts",
	    "mono", "kind", NULL };
	char *re;
	size_t rl, k;
	int i, n = 0;

	for (i = 0; i < 200; i++)
		ck_assert_int_eq(aud_submit_async(l, i % 2 ? "egress.decision" :
		    "mcp.call", tricky_fields(i)), 0);
	ck_assert_int_eq(aud_sync(l), 0);
	aud_close(l);
	/* Every stored record is canonical and holds exactly its fields. */
	ck_assert_int_eq(sqlite3_open_v2(af_dbpath, &db, SQLITE_OPEN_READONLY,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT canon FROM records "
	    "WHERE seq BETWEEN 1 AND 200 ORDER BY seq", -1, &st, NULL),
	    SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		rec = aud_canon_parse(sqlite3_column_blob(st, 0),
		    (size_t)sqlite3_column_bytes(st, 0), NULL, 0);
		ck_assert_ptr_nonnull(rec);
		re = aud_canon_dump(rec, &rl, NULL, 0);
		ck_assert_uint_eq(rl, (size_t)sqlite3_column_bytes(st, 0));
		free(re);
		ck_assert_int_eq(json_integer_value(json_object_get(rec,
		    "seq")), n + 1);
		for (k = 0; common[k] != NULL; k++) {
			ck_assert_ptr_nonnull(json_object_get(rec, common[k]));
			json_object_del(rec, common[k]);
		}
		want = tricky_fields(n);
		ck_assert(json_equal(rec, want));
		json_decref(want);
		json_decref(rec);
		n++;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	ck_assert_int_eq(n, 200);
	/* The verifier's span-derived columns agree with the writer's. */
	ck_assert_int_eq(verify(&rep), AUD_WARNINGS);
	ck_assert(json_is_null(json_object_get(rep, "first_failure")));
	json_decref(rep);
}
END_TEST

/* A column that stored the escaped form instead of the value is caught. */
static const char *const col_tamper[] = {
	"UPDATE records SET sandbox = 'sb-\\\"quoted\\\"\\u0001' WHERE seq = 1",
	"UPDATE records SET dst_host = 'h\\\\ost.example' WHERE seq = 1",
	"UPDATE records SET dst_port = 444 WHERE seq = 1",
	"UPDATE records SET dst_port = 443 WHERE seq = 2",
	"UPDATE records SET sandbox = NULL WHERE seq = 2",
	"UPDATE records SET sandbox = '5' WHERE seq = 3",
	"UPDATE records SET rule_id = 'mcp.tools[3] \\\"x\\\"' WHERE seq = 3",
	"UPDATE records SET mcp_tool = 't' WHERE seq = 3",
	"UPDATE records SET decision = 3 WHERE seq = 2",
	"UPDATE records SET decision = NULL WHERE seq = 4",
	"UPDATE records SET dst_host = 'not an object' WHERE seq = 4",
};

START_TEST(test_span_columns_tamper)
{
	struct aud_log *l = open_log(0, 0);
	sqlite3 *db;
	json_t *rep;
	int i;

	for (i = 0; i < 4; i++)
		ck_assert_int_eq(aud_submit_async(l, "egress.decision",
		    tricky_fields(i)), 0);
	ck_assert_int_eq(aud_sync(l), 0);
	aud_close(l);
	ck_assert_int_eq(verify(&rep), AUD_WARNINGS);
	json_decref(rep);
	ck_assert_int_eq(sqlite3_open(af_dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "DROP TRIGGER rec_no_upd", NULL,
	    NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, col_tamper[_i], NULL, NULL, NULL),
	    SQLITE_OK);
	ck_assert_int_eq(sqlite3_changes(db), 1);
	sqlite3_close(db);
	ck_assert_int_eq(verify(&rep), AUD_TAMPERED);
	ck_assert_str_eq(rstr(rep, "first_failure", "check"), "index");
	json_decref(rep);
}
END_TEST

/* ---- many producers, durable ---- */

struct prod {
	struct aud_log	*l;
	int		 id, n, refused;
};

static pthread_mutex_t ack_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *ack_seen;
static uint64_t ack_cap, ack_ok, ack_bad, ack_dup;

static void
on_ack(void *arg, int ok, uint64_t seq)
{
	(void)arg;
	pthread_mutex_lock(&ack_mu);
	if (!ok)
		ack_bad++;
	else if (seq >= ack_cap || ack_seen[seq]++)
		ack_dup++;
	else
		ack_ok++;
	pthread_mutex_unlock(&ack_mu);
}

static json_t *
call_fields(int id, int i)
{
	char args[65];

	snprintf(args, sizeof(args), "%064x", (unsigned)(id * 1000003 + i));
	return json_pack("{s:{s:s,s:s},s:{s:s,s:i,s:s},s:s,s:s,s:s,s:s,s:i}",
	    "sandbox", "id", "perf-1", "run", "r-1", "policy", "id", "default",
	    "version", 1, "rule", "mcp.tools[3]", "decision", "allow",
	    "server", "github", "tool", "search_issues", "args_sha256", args,
	    "result_bytes", i);
}

static void *
producer(void *arg)
{
	struct prod *p = arg;
	int i = 0, spins = 0;

	/* Bounded: a full queue is waited out at most this many times. */
	while (i < p->n && spins < 1000000) {
		if (aud_submit_durable(p->l, "mcp.call", call_fields(p->id, i),
		    on_ack, NULL) == 0) {
			i++;
			continue;
		}
		ck_assert_int_eq(errno, EAGAIN);
		p->refused++;
		spins++;
		usleep(100);
	}
	p->n = i;
	return NULL;
}

static void
run_producers(struct aud_log *l, int nthreads, int per, double *secs)
{
	struct pollfd pfd = { aud_notify_fd(l), POLLIN, 0 };
	struct prod p[8];
	pthread_t th[8];
	uint64_t total = 0, rounds = 0;
	double t0;
	int i;

	ck_assert_int_le(nthreads, 8);
	t0 = now_s();
	for (i = 0; i < nthreads; i++) {
		p[i].l = l;
		p[i].id = i;
		p[i].n = per;
		p[i].refused = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, producer, &p[i]),
		    0);
	}
	/* This thread plays the daemon's loop: it runs the callbacks. */
	for (;;) {
		pthread_mutex_lock(&ack_mu);
		total = ack_ok + ack_bad + ack_dup;
		pthread_mutex_unlock(&ack_mu);
		if (total >= (uint64_t)nthreads * per || rounds++ > 200000)
			break;
		if (poll(&pfd, 1, 100) > 0)
			aud_dispatch(l);
	}
	for (i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(p[i].n, per);
	}
	aud_dispatch(l);
	*secs = now_s() - t0;
}

START_TEST(test_many_durable_producers)
{
	struct aud_log *l;
	json_t *rep;
	double secs, vs;
	uint64_t s;
	int nthreads = 4, per = _i == 0 ? 3000 : 1500, i;

	ack_cap = (uint64_t)nthreads * per + 16;
	ack_seen = calloc(ack_cap, 1);
	ack_ok = ack_bad = ack_dup = 0;
	/* Small batches and a small queue: many commits, refusals, reuse. */
	l = open_log(_i == 0 ? 0 : 7, _i == 0 ? 0 : 64);
	run_producers(l, nthreads, per, &secs);
	ck_assert_uint_eq(ack_bad, 0);
	ck_assert_uint_eq(ack_dup, 0);
	ck_assert_uint_eq(ack_ok, (uint64_t)nthreads * per);
	/* Every acknowledged seq is distinct and they are 1..N: log.open
	 * holds 0 and nothing else was written in between. */
	for (s = 1; s <= (uint64_t)nthreads * per; s++)
		ck_assert_msg(ack_seen[s] == 1, "seq %llu not acked once",
		    (unsigned long long)s);
	printf("# durable (batch_max %s): %d records from %d threads in "
	    "%.3f s = %.0f/s\n", _i == 0 ? "default" : "7", nthreads * per,
	    nthreads, secs, (double)(nthreads * per) / secs);
	aud_close(l);
	vs = now_s();
	i = verify(&rep);
	vs = now_s() - vs;
	ck_assert_int_eq(i, AUD_WARNINGS);
	ck_assert_int_eq(json_integer_value(json_object_get(rep, "size")),
	    nthreads * per + 2);
	printf("# verify: %lld records in %.3f s = %.0f/s\n",
	    (long long)json_integer_value(json_object_get(rep, "size")), vs,
	    (double)json_integer_value(json_object_get(rep, "size")) / vs);
	json_decref(rep);
	free(ack_seen);
	ack_seen = NULL;
}
END_TEST

/* Recycled items of one size must carry records of another intact. */
START_TEST(test_mixed_sizes)
{
	struct aud_log *l = open_log(3, 0);
	json_t *rep, *f;
	char *big;
	size_t sz;
	int i;

	big = malloc(300000);
	ck_assert_ptr_nonnull(big);
	for (i = 0; i < 60; i++) {
		sz = i % 3 == 0 ? 1 : i % 3 == 1 ? 3000 : 299999;
		memset(big, 'a' + i % 26, sz);
		big[sz] = '\0';
		f = json_pack("{s:s,s:i}", "blob", big, "i", i);
		ck_assert_int_eq(aud_submit_async(l, "finding", f), 0);
		if (i % 7 == 0)
			ck_assert_int_eq(aud_sync(l), 0);
	}
	ck_assert_int_eq(aud_sync(l), 0);
	aud_close(l);
	free(big);
	ck_assert_int_eq(verify(&rep), AUD_WARNINGS);
	ck_assert(json_is_null(json_object_get(rep, "first_failure")));
	ck_assert_int_eq(json_integer_value(json_object_get(rep, "size")), 62);
	json_decref(rep);
}
END_TEST

/* Sustained writes keep the WAL bounded (the writer checkpoints itself when
 * the background checkpointer cannot finish), and nothing is lost. */
START_TEST(test_wal_bounded)
{
	struct aud_log *l = open_log(0, 0);
	struct stat sb;
	char wal[160];
	off_t maxwal = 0;
	json_t *rep;
	int i;

	snprintf(wal, sizeof(wal), "%s-wal", af_dbpath);
	for (i = 0; i < 30000; i++) {
		ck_assert_int_eq(aud_submit_async(l, "mcp.call",
		    call_fields(9, i)), 0);
		if (i % 2000 == 1999) {
			ck_assert_int_eq(aud_sync(l), 0);
			if (stat(wal, &sb) == 0 && sb.st_size > maxwal)
				maxwal = sb.st_size;
		}
	}
	ck_assert_int_eq(aud_sync(l), 0);
	ck_assert_uint_eq(aud_dropped(l), 0);
	aud_close(l);
	printf("# WAL peak %lld bytes over 30000 records\n",
	    (long long)maxwal);
	/* 8000 frames of at most 64 KiB pages plus one batch. */
	ck_assert_int_lt(maxwal, 8000LL * 65560 + 64LL * 1024 * 1024);
	ck_assert_int_eq(verify(&rep), AUD_WARNINGS);
	ck_assert_int_eq(json_integer_value(json_object_get(rep, "size")),
	    30002);
	json_decref(rep);
}
END_TEST

/* ---- the verifier's two stages agree on the first failure ---- */

/*
 * The log spans many of the verifier's batches; each case tampers with one
 * or two places, and the verdict must be the failure a sequential check
 * meets first (lowest seq; within a record: canonical, rec_hash, fields,
 * index, merkle), whichever stage found it.
 */
static const struct {
	const char	*sql[2];
	const char	*check;
	long long	 seq;
} late[] = {
	{ { "UPDATE records SET canon = CAST(replace(CAST(canon AS TEXT), "
	    "',', ', ') AS BLOB) WHERE seq = 2500", NULL }, "canonical", 2500 },
	{ { "UPDATE records SET rec_hash = zeroblob(32) WHERE seq = 2500",
	    NULL }, "rec_hash", 2500 },
	{ { "UPDATE records SET sandbox = 'other' WHERE seq = 2500", NULL },
	  "index", 2500 },
	{ { "UPDATE merkle_nodes SET hash = zeroblob(32) WHERE level = 1 AND "
	    "idx = 1250", NULL }, "merkle", 2501 },
	{ { "UPDATE records SET sandbox = 'other' WHERE seq = 1500",
	    "UPDATE records SET rec_hash = zeroblob(32) WHERE seq = 2500" },
	  "index", 1500 },
	{ { "UPDATE records SET rec_hash = zeroblob(32) WHERE seq = 1500",
	    "UPDATE records SET sandbox = 'other' WHERE seq = 2500" },
	  "rec_hash", 1500 },
	{ { "UPDATE records SET sandbox = 'other' WHERE seq = 2000",
	    "UPDATE records SET rec_hash = zeroblob(32) WHERE seq = 2000" },
	  "rec_hash", 2000 },
	{ { "UPDATE records SET sandbox = 'other' WHERE seq = 2001",
	    "UPDATE merkle_nodes SET hash = zeroblob(32) WHERE level = 1 AND "
	    "idx = 1000" }, "index", 2001 },
	{ { "UPDATE records SET canon = CAST(replace(CAST(canon AS TEXT), "
	    "'\"v\":1', '\"v\":2') AS BLOB) WHERE seq = 2999", NULL },
	  "rec_hash", 2999 },
	{ { "DELETE FROM records WHERE seq = 2222", NULL }, "contiguity", 2222 },
	{ { "UPDATE records SET kind = 99 WHERE seq = 1", NULL }, "index", 1 },
	/* The reader copies the stored nodes each batch completes (512
	 * rows a batch): nodes at the edges of batches, nodes above a batch,
	 * and rows missing, extra, misplaced or malformed. */
	{ { "UPDATE merkle_nodes SET hash = zeroblob(32) WHERE level = 9 AND "
	    "idx = 0", NULL }, "merkle", 511 },
	{ { "DELETE FROM merkle_nodes WHERE level = 1 AND idx = 256", NULL },
	  "merkle", 513 },
	{ { "INSERT INTO merkle_nodes VALUES (1, -1, zeroblob(32))", NULL },
	  "merkle", 1 },
	{ { "UPDATE merkle_nodes SET hash = x'00' WHERE level = 3 AND "
	    "idx = 100", NULL }, "merkle", 807 },
	{ { "UPDATE merkle_nodes SET hash = zeroblob(32) WHERE level = 11 AND "
	    "idx = 0", NULL }, "merkle", 2047 },
	{ { "UPDATE merkle_nodes SET idx = 'x' WHERE level = 1 AND idx = 600",
	    NULL }, "merkle", 1201 },
	{ { "UPDATE merkle_nodes SET hash = zeroblob(32) WHERE level = 1 AND "
	    "idx = 255", "UPDATE records SET sandbox = 'other' WHERE seq = 511" },
	  "index", 511 },
};

START_TEST(test_pipeline_first_failure)
{
	struct aud_log *l = open_log(0, 0);
	sqlite3 *db;
	json_t *rep, *fs;
	int i;

	for (i = 0; i < 3000; i++) {
		ck_assert_int_eq(aud_submit_async(l, "mcp.call",
		    call_fields(3, i)), 0);
		if (i % 1000 == 999)
			ck_assert_int_eq(aud_sync(l), 0);
	}
	ck_assert_int_eq(aud_sync(l), 0);
	aud_close(l);
	ck_assert_int_eq(verify(&rep), AUD_WARNINGS);
	json_decref(rep);
	ck_assert_int_eq(sqlite3_open(af_dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "DROP TRIGGER rec_no_upd;"
	    "DROP TRIGGER rec_no_del;DROP TRIGGER mn_no_upd;"
	    "DROP TRIGGER mn_no_del", NULL, NULL, NULL), SQLITE_OK);
	for (i = 0; i < 2 && late[_i].sql[i] != NULL; i++) {
		ck_assert_int_eq(sqlite3_exec(db, late[_i].sql[i], NULL, NULL,
		    NULL), SQLITE_OK);
		ck_assert_int_eq(sqlite3_changes(db), 1);
	}
	sqlite3_close(db);
	ck_assert_int_eq(verify(&rep), AUD_TAMPERED);
	ck_assert_str_eq(rstr(rep, "first_failure", "check"), late[_i].check);
	fs = json_object_get(json_object_get(rep, "first_failure"), "seq");
	ck_assert_int_eq(json_integer_value(fs), late[_i].seq);
	json_decref(rep);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("audit_perf");
	TCase *core = tcase_create("Core"), *lim = tcase_create("Limits");
	SRunner *sr;
	int nf;

	tcase_set_timeout(core, 600);
	tcase_set_timeout(lim, 600);
	tcase_add_checked_fixture(core, setup, af_teardown);
	tcase_add_checked_fixture(lim, setup, af_teardown);
	tcase_add_test(core, test_members_and_spans);
	tcase_add_test(core, test_built_records);
	tcase_add_loop_test(core, test_many_durable_producers, 0, 2);
	tcase_add_test(core, test_mixed_sizes);
	tcase_add_test(lim, test_check_matches_parse);
	tcase_add_loop_test(lim, test_check_edges, 0,
	    sizeof(edges) / sizeof(edges[0]));
	tcase_add_test(lim, test_check_deep_and_large);
	tcase_add_loop_test(lim, test_span_columns_tamper, 0,
	    sizeof(col_tamper) / sizeof(col_tamper[0]));
	tcase_add_test(lim, test_wal_bounded);
	tcase_add_loop_test(lim, test_pipeline_first_failure, 0,
	    sizeof(late) / sizeof(late[0]));
	suite_add_tcase(s, core);
	suite_add_tcase(s, lim);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
