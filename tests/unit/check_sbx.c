/*
 * check_sbx: the pure parts of the sandbox manager (gateway/sandbox_valid.c)
 * and its state database (gateway/sandbox_db.c, real SQLite in a temporary
 * directory). What users rely on: a create request with a bad id, subject,
 * label or TTL is refused before anything is made (hostile forms included:
 * path tricks, globs, NULs, overlong values, numbers that overflow), also
 * when it comes as a flat spec from a caller other than the API; a new
 * sandbox gets the lowest free pool slot and a full pool says so; the slot
 * of a source address is found by arithmetic and only for real sandbox
 * addresses; the state database keeps tokens in a file only root can read,
 * and survives a reopen; a row of it is adopted at restart only if a
 * create could have written it.
 */
#include <sys/stat.h>

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "gateway/sandbox.h"
#include "gateway/sandbox_int.h"

/* ------------------------------------------------------------ ids */

static const struct {
	const char	*s;
	int		 ok;
} ids[] = {
	{ "a", 1 }, { "0", 1 }, { "agent-1", 1 }, { "a-b-c-9", 1 },
	{ "abcdefghijklmnopqrstuvwxyz012345", 1 },	/* 32 */
	{ "abcdefghijklmnopqrstuvwxyz0123456", 0 },	/* 33 */
	{ "", 0 }, { "-a", 0 }, { "A", 0 }, { "aB", 0 }, { "a_b", 0 },
	{ "a.b", 0 }, { "../x", 0 }, { "a/b", 0 }, { "a b", 0 }, { "é", 0 },
	{ "a\n", 0 }, { "a\t", 0 }, { "*", 0 }, { "a%2f", 0 },
};

START_TEST(test_id)
{
	ck_assert_msg(sbx_id_valid(ids[_i].s) == ids[_i].ok, "id '%s'",
	    ids[_i].s);
}
END_TEST

START_TEST(test_id_null)
{
	ck_assert_int_eq(sbx_id_valid(NULL), 0);
	ck_assert_int_eq(sbx_subject_valid(NULL), 0);
	ck_assert_int_eq(sbx_label_key_valid(NULL), 0);
	ck_assert_int_eq(sbx_label_value_valid(NULL), 0);
}
END_TEST

static const struct {
	const char	*s;
	int		 ok;
} subjects[] = {
	{ "alice", 1 }, { "Alice", 1 }, { "team-a/bob", 1 },
	{ "bob@example.com", 1 }, { "svc:ci+1", 1 }, { "a.b_c", 1 },
	{ "", 0 }, { "-alice", 0 }, { ".alice", 0 }, { "team-*", 0 },
	{ "a?", 0 }, { "a[b]", 0 }, { "a b", 0 }, { "a\"b", 0 },
	{ "a\\b", 0 }, { "ali\xc3\xa9", 0 }, { "a\x01", 0 }, { "a;rm", 0 },
};

START_TEST(test_subject)
{
	ck_assert_msg(sbx_subject_valid(subjects[_i].s) == subjects[_i].ok,
	    "subject '%s'", subjects[_i].s);
}
END_TEST

START_TEST(test_subject_long)
{
	char s[SBX_SUBJECT_MAX + 2];

	memset(s, 'a', sizeof(s));
	s[SBX_SUBJECT_MAX] = '\0';
	ck_assert_int_eq(sbx_subject_valid(s), 1);
	s[SBX_SUBJECT_MAX] = 'a';
	s[SBX_SUBJECT_MAX + 1] = '\0';
	ck_assert_int_eq(sbx_subject_valid(s), 0);
}
END_TEST

/* ------------------------------------------------------------ labels */

static const struct {
	const char	*json;
	int		 ok;
} labels[] = {
	{ "null", 1 },
	{ "{}", 1 },
	{ "{\"env\": \"dev\"}", 1 },
	{ "{\"team\": \"\"}", 1 },
	{ "{\"app.kubernetes.io/name\": \"x-1\", \"k\": \"a=b:c/d@e+f\"}", 1 },
	{ "[]", 0 },
	{ "\"env=dev\"", 0 },
	{ "{\"Env\": \"dev\"}", 0 },
	{ "{\"-env\": \"dev\"}", 0 },
	{ "{\"\": \"dev\"}", 0 },
	{ "{\"env\": 1}", 0 },
	{ "{\"env\": null}", 0 },
	{ "{\"env\": [\"dev\"]}", 0 },
	{ "{\"env\": {\"a\": \"b\"}}", 0 },
	{ "{\"env\": \"a b\"}", 0 },
	{ "{\"env\": \"a\\nb\"}", 0 },
	{ "{\"env\": \"x\\u0000y\"}", 0 },
	{ "{\"env\": \"caf\\u00e9\"}", 0 },
	{ "{\"e nv\": \"dev\"}", 0 },
};

START_TEST(test_labels)
{
	json_error_t je;
	json_t *v = json_loads(labels[_i].json, JSON_DECODE_ANY |
	    JSON_ALLOW_NUL, &je);
	char err[256] = "";
	int rc;

	ck_assert_msg(v != NULL, "%s: %s", labels[_i].json, je.text);
	rc = sbx_labels_check(v, err, sizeof(err));
	ck_assert_msg((rc == 0) == labels[_i].ok, "labels %s: rc %d (%s)",
	    labels[_i].json, rc, err);
	if (!labels[_i].ok)
		ck_assert_msg(strstr(err, "labels") != NULL,
		    "message names labels: %s", err);
	json_decref(v);
}
END_TEST

START_TEST(test_labels_count)
{
	json_t *o = json_object();
	char k[16], err[256];
	int i;

	for (i = 0; i < SBX_LABELS_MAX; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		json_object_set_new(o, k, json_string("v"));
	}
	ck_assert_int_eq(sbx_labels_check(o, err, sizeof(err)), 0);
	json_object_set_new(o, "one-more", json_string("v"));
	ck_assert_int_eq(sbx_labels_check(o, err, sizeof(err)), -1);
	json_decref(o);
}
END_TEST

START_TEST(test_labels_long)
{
	char key[SBX_LABEL_KEY_MAX + 2], val[SBX_LABEL_VALUE_MAX + 2];

	memset(key, 'k', sizeof(key));
	key[SBX_LABEL_KEY_MAX] = '\0';
	ck_assert_int_eq(sbx_label_key_valid(key), 1);
	key[SBX_LABEL_KEY_MAX] = 'k';
	key[SBX_LABEL_KEY_MAX + 1] = '\0';
	ck_assert_int_eq(sbx_label_key_valid(key), 0);
	memset(val, 'v', sizeof(val));
	val[SBX_LABEL_VALUE_MAX] = '\0';
	ck_assert_int_eq(sbx_label_value_valid(val), 1);
	val[SBX_LABEL_VALUE_MAX] = 'v';
	val[SBX_LABEL_VALUE_MAX + 1] = '\0';
	ck_assert_int_eq(sbx_label_value_valid(val), 0);
}
END_TEST

/* ------------------------------------------------------------ ttl */

static const struct {
	const char	*json;
	long		 secs;		/* -1: refused */
} ttls[] = {
	{ "1", 1 }, { "3600", 3600 }, { "\"30s\"", 30 }, { "\"5m\"", 300 },
	{ "\"2h\"", 7200 }, { "\"1d\"", 86400 }, { "\"30d\"", 2592000 },
	{ "\"90\"", 90 }, { "2592000", 2592000 },
	{ "0", -1 }, { "-1", -1 }, { "2592001", -1 }, { "\"31d\"", -1 },
	{ "\"0s\"", -1 }, { "\"05m\"", -1 }, { "\"-5m\"", -1 },
	{ "\"+5m\"", -1 }, { "\"5 m\"", -1 }, { "\"5w\"", -1 },
	{ "\"m\"", -1 }, { "\"\"", -1 }, { "\"1h30m\"", -1 },
	{ "\"99999999999999999d\"", -1 }, { "\"18446744073709551617\"", -1 },
	{ "1.5", -1 }, { "true", -1 }, { "null", -1 }, { "[60]", -1 },
	{ "9223372036854775807", -1 }, { "\"1\\u0000d\"", -1 },
};

START_TEST(test_ttl)
{
	json_error_t je;
	json_t *v = json_loads(ttls[_i].json, JSON_DECODE_ANY |
	    JSON_ALLOW_NUL, &je);
	uint32_t secs = 12345;
	char err[256] = "";
	int rc;

	ck_assert_msg(v != NULL, "%s: %s", ttls[_i].json, je.text);
	rc = sbx_ttl_parse(v, &secs, err, sizeof(err));
	if (ttls[_i].secs < 0) {
		ck_assert_msg(rc == -1, "ttl %s accepted as %u", ttls[_i].json,
		    secs);
		ck_assert_msg(secs == 12345, "ttl %s: out touched",
		    ttls[_i].json);
		ck_assert_msg(strstr(err, "ttl") != NULL, "message: %s", err);
	} else {
		ck_assert_msg(rc == 0, "ttl %s refused: %s", ttls[_i].json,
		    err);
		ck_assert_uint_eq(secs, (uint32_t)ttls[_i].secs);
	}
	json_decref(v);
}
END_TEST

/* ------------------------------------------------------------ slots */

START_TEST(test_slots_lowest)
{
	struct sbx_slots *s = sbx_slots_new(200);
	int i;

	ck_assert_ptr_nonnull(s);
	for (i = 0; i < 130; i++)
		ck_assert_int_eq(sbx_slots_alloc(s), i);
	ck_assert_uint_eq(sbx_slots_count(s), 130);
	/* Freed slots are reused lowest first. */
	sbx_slots_put(s, 70);
	sbx_slots_put(s, 3);
	sbx_slots_put(s, 64);
	ck_assert_int_eq(sbx_slots_alloc(s), 3);
	ck_assert_int_eq(sbx_slots_alloc(s), 64);
	ck_assert_int_eq(sbx_slots_alloc(s), 70);
	ck_assert_int_eq(sbx_slots_alloc(s), 130);
	ck_assert_int_eq(sbx_slots_used(s, 130), 1);
	ck_assert_int_eq(sbx_slots_used(s, 131), 0);
	sbx_slots_free(s);
}
END_TEST

START_TEST(test_slots_take)
{
	struct sbx_slots *s = sbx_slots_new(10);

	ck_assert_ptr_nonnull(s);
	/* An adopted or reserved slot is skipped by alloc. */
	ck_assert_int_eq(sbx_slots_take(s, 0), 0);
	ck_assert_int_eq(sbx_slots_take(s, 2), 0);
	ck_assert_int_eq(sbx_slots_take(s, 2), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(sbx_slots_take(s, 10), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(sbx_slots_alloc(s), 1);
	ck_assert_int_eq(sbx_slots_alloc(s), 3);
	sbx_slots_free(s);
	sbx_slots_free(NULL);
}
END_TEST

START_TEST(test_slots_full)
{
	struct sbx_slots *s = sbx_slots_new(65);
	int i;

	ck_assert_ptr_nonnull(s);
	for (i = 0; i < 65; i++)
		ck_assert_int_eq(sbx_slots_alloc(s), i);
	ck_assert_int_eq(sbx_slots_alloc(s), -1);
	ck_assert_int_eq(errno, ENOSPC);
	/* Freeing out of range or twice changes nothing. */
	sbx_slots_put(s, 1000);
	sbx_slots_put(s, 64);
	sbx_slots_put(s, 64);
	ck_assert_uint_eq(sbx_slots_count(s), 64);
	ck_assert_int_eq(sbx_slots_alloc(s), 64);
	ck_assert_int_eq(sbx_slots_alloc(s), -1);
	sbx_slots_free(s);
}
END_TEST

START_TEST(test_slots_bad_size)
{
	ck_assert_ptr_null(sbx_slots_new(0));
	ck_assert_ptr_null(sbx_slots_new(SBX_SLOTS_MAX + 1));
}
END_TEST

/* ------------------------------------------------------------ pool */

static const struct {
	uint8_t		pool[4], prefix, addr[4];
	long		slot;		/* -1: not a sandbox address */
} pool_slots[] = {
	{ { 10, 231, 0, 0 }, 16, { 10, 231, 0, 2 }, 0 },
	{ { 10, 231, 0, 0 }, 16, { 10, 231, 0, 6 }, 1 },
	{ { 10, 231, 0, 0 }, 16, { 10, 231, 1, 2 }, 64 },
	{ { 10, 231, 0, 0 }, 16, { 10, 231, 255, 246 }, 16381 },
	/* The last /30 is the service address's. */
	{ { 10, 231, 0, 0 }, 16, { 10, 231, 255, 250 }, 16382 },
	{ { 10, 231, 0, 0 }, 16, { 10, 231, 255, 254 }, -1 },
	{ { 10, 231, 0, 0 }, 16, { 10, 231, 0, 1 }, -1 },	/* host side */
	{ { 10, 231, 0, 0 }, 16, { 10, 231, 0, 0 }, -1 },
	{ { 10, 231, 0, 0 }, 16, { 10, 231, 0, 3 }, -1 },
	{ { 10, 231, 0, 0 }, 16, { 10, 232, 0, 2 }, -1 },
	{ { 10, 231, 0, 0 }, 16, { 192, 0, 2, 2 }, -1 },
	{ { 10, 231, 0, 0 }, 28, { 10, 231, 0, 10 }, 2 },
	{ { 10, 231, 0, 0 }, 28, { 10, 231, 0, 14 }, -1 },
	{ { 10, 231, 0, 0 }, 30, { 10, 231, 0, 2 }, -1 },	/* bad pool */
	{ { 10, 231, 0, 0 }, 0, { 10, 231, 0, 2 }, -1 },
};

START_TEST(test_pool_slot)
{
	ck_assert_int_eq(sbx_pool_slot(pool_slots[_i].pool,
	    pool_slots[_i].prefix, pool_slots[_i].addr), pool_slots[_i].slot);
}
END_TEST

START_TEST(test_pool_nslots)
{
	ck_assert_uint_eq(sbx_pool_nslots(16), 16383);
	ck_assert_uint_eq(sbx_pool_nslots(28), 3);
	ck_assert_uint_eq(sbx_pool_nslots(29), 1);
	ck_assert_uint_eq(sbx_pool_nslots(30), 0);
	ck_assert_uint_eq(sbx_pool_nslots(0), 0);
	ck_assert_uint_eq(sbx_pool_nslots(1), SBX_SLOTS_MAX);
}
END_TEST

/* ------------------------------------------------------------ subtract */

static const struct {
	const char	*c;
	const char	*t[3];
	const char	*want;		/* blocks, space separated */
} subtracts[] = {
	{ "192.0.2.0/24", { "192.0.2.0/24" }, "" },
	{ "192.0.2.0/24", { "192.0.0.0/16" }, "" },
	{ "192.0.2.0/24", { "198.51.100.0/24" }, "192.0.2.0/24" },
	{ "192.0.2.0/24", { NULL }, "192.0.2.0/24" },
	{ "10.0.0.0/8", { "10.1.0.0/16" },
	    "10.0.0.0/16 10.2.0.0/15 10.4.0.0/14 10.8.0.0/13 10.16.0.0/12 "
	    "10.32.0.0/11 10.64.0.0/10 10.128.0.0/9" },
	{ "192.0.2.0/24", { "192.0.2.0/25", "192.0.2.192/26" },
	    "192.0.2.128/26" },
	{ "192.0.2.0/30", { "192.0.2.1/32" }, "192.0.2.0/32 192.0.2.2/31" },
	/* Another family never subtracts. */
	{ "2001:db8::/32", { "192.0.2.0/24" }, "2001:db8::/32" },
	{ "fc00::/7", { "fd00::/8" }, "fc00::/8" },
	{ "2001:db8::/32", { "2001:db8::/32", "0.0.0.0/0" }, "" },
};

START_TEST(test_subtract)
{
	struct pol_cidr c, t[3], *out = NULL;
	size_t nt = 0, n = 0, cap = 0, i;
	char buf[1024] = "", a[64];

	ck_assert_int_eq(pol_cidr_parse(subtracts[_i].c, &c), 0);
	for (nt = 0; nt < 3 && subtracts[_i].t[nt] != NULL; nt++)
		ck_assert_int_eq(pol_cidr_parse(subtracts[_i].t[nt], &t[nt]),
		    0);
	ck_assert_int_eq(sbx_cidr_subtract(&c, t, nt, &out, &n, &cap), 0);
	for (i = 0; i < n; i++) {
		ck_assert_ptr_nonnull(pol_addr_format(&out[i].addr, a,
		    sizeof(a)));
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s/%u",
		    i > 0 ? " " : "", a, out[i].prefix);
	}
	ck_assert_str_eq(buf, subtracts[_i].want);
	free(out);
}
END_TEST

/* ------------------------------------------------------------ state db */

static char tdir[64];

static void
db_setup(void)
{
	snprintf(tdir, sizeof(tdir), "/tmp/check_sbx.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tdir));
}

static void
db_teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	(void)system(cmd);
}

static void
rec_fill(struct sbx_rec *r, const char *id, uint32_t idx)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", id);
	snprintf(r->policy, sizeof(r->policy), "coding-agent");
	snprintf(r->subject, sizeof(r->subject), "alice");
	snprintf(r->labels, sizeof(r->labels), "{\"env\":\"dev\"}");
	r->index = idx;
	snprintf(r->addr, sizeof(r->addr), "10.231.0.%u", idx * 4 + 2);
	snprintf(r->host_addr, sizeof(r->host_addr), "10.231.0.%u",
	    idx * 4 + 1);
	memset(r->token, 'a' + (int)idx, SBX_TOKEN_HEX);
	r->created = 1700000000;
	r->expires = idx == 1 ? 1700003600 : 0;
}

struct got {
	struct sbx_rec	r[8];
	int		bad[8];
	int		n;
};

static void
got_cb(const struct sbx_rec *r, int bad, void *arg)
{
	struct got *g = arg;

	ck_assert_int_lt(g->n, 8);
	g->r[g->n] = *r;
	g->bad[g->n] = bad;
	g->n++;
}

START_TEST(test_db_roundtrip)
{
	struct sbx_rec a, b;
	struct got g = { .n = 0 };
	struct sqlite3 *db;
	struct stat st;
	char path[128], err[256];

	snprintf(path, sizeof(path), "%s/state.db", tdir);
	ck_assert_ptr_nonnull(db = sbx_db_open(path, err, sizeof(err)));
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	rec_fill(&a, "one", 0);
	rec_fill(&b, "two", 1);
	ck_assert_int_eq(sbx_db_insert(db, &b, err, sizeof(err)), 0);
	ck_assert_int_eq(sbx_db_insert(db, &a, err, sizeof(err)), 0);
	/* Same id, or same slot: refused, the first row stays. */
	ck_assert_int_eq(sbx_db_insert(db, &a, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EEXIST);
	rec_fill(&a, "three", 1);
	ck_assert_int_eq(sbx_db_insert(db, &a, err, sizeof(err)), -1);
	ck_assert_int_eq(sbx_db_set_tainted(db, "two", err, sizeof(err)), 0);
	sbx_db_close(db);

	/* A restart reads back what was written, in slot order. */
	ck_assert_ptr_nonnull(db = sbx_db_open(path, err, sizeof(err)));
	ck_assert_int_eq(sbx_db_load(db, got_cb, &g, err, sizeof(err)), 2);
	ck_assert_str_eq(g.r[0].id, "one");
	ck_assert_int_eq(g.bad[0], 0);
	ck_assert_int_eq(g.r[0].tainted, 0);
	ck_assert_str_eq(g.r[1].id, "two");
	ck_assert_int_eq(g.r[1].tainted, 1);
	ck_assert_int_eq(g.r[1].expires, 1700003600);
	ck_assert_str_eq(g.r[1].addr, "10.231.0.6");
	ck_assert_str_eq(g.r[1].labels, "{\"env\":\"dev\"}");
	rec_fill(&b, "two", 1);
	ck_assert_str_eq(g.r[1].token, b.token);
	ck_assert_int_eq(sbx_db_delete(db, "one", err, sizeof(err)), 0);
	ck_assert_int_eq(sbx_db_delete(db, "none", err, sizeof(err)), 0);
	g.n = 0;
	ck_assert_int_eq(sbx_db_load(db, got_cb, &g, err, sizeof(err)), 1);
	ck_assert_str_eq(g.r[0].id, "two");
	sbx_db_close(db);
	sbx_db_close(NULL);
}
END_TEST

/* Generations: reserved in blocks, durably, never twice: not after a
 * row goes, not across a reopen, and always above what any row holds (an
 * old database's rows, or a counter row that went missing). */
START_TEST(test_db_generations)
{
	struct sbx_rec a;
	struct got g = { .n = 0 };
	struct sqlite3 *db;
	char path[128], err[256];
	uint32_t first, got, first2, got2;

	snprintf(path, sizeof(path), "%s/state.db", tdir);
	ck_assert_ptr_nonnull(db = sbx_db_open(path, err, sizeof(err)));
	ck_assert_int_eq(sbx_db_gen_reserve(db, 16, &first, &got, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(first, 1);
	ck_assert_uint_eq(got, 16);
	rec_fill(&a, "one", 0);
	a.gen = first + 3;
	ck_assert_int_eq(sbx_db_insert(db, &a, err, sizeof(err)), 0);
	ck_assert_int_eq(sbx_db_delete(db, "one", err, sizeof(err)), 0);
	sbx_db_close(db);
	ck_assert_ptr_nonnull(db = sbx_db_open(path, err, sizeof(err)));
	ck_assert_int_eq(sbx_db_gen_reserve(db, 16, &first2, &got2, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(first2, first + got);
	/* A row above the counter (its counter row lost): above it. */
	ck_assert_int_eq(sqlite3_exec(db, "DELETE FROM counters", NULL, NULL,
	    NULL), SQLITE_OK);
	rec_fill(&a, "two", 1);
	a.gen = 1000;
	ck_assert_int_eq(sbx_db_insert(db, &a, err, sizeof(err)), 0);
	ck_assert_int_eq(sbx_db_gen_reserve(db, 1, &first, &got, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(first, 1001);
	ck_assert_int_eq(sbx_db_set_gen(db, "two", 4294967295u, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(sbx_db_load(db, got_cb, &g, err, sizeof(err)), 1);
	ck_assert_uint_eq(g.r[0].gen, 4294967295u);
	ck_assert_int_eq(g.bad[0], 0);
	/* The 32-bit space is spent: refused, never wrapped to 0. */
	errno = 0;
	ck_assert_int_eq(sbx_db_gen_reserve(db, 1, &first, &got, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, ERANGE);
	sbx_db_close(db);
}
END_TEST

/* A database written before generations: its rows load with gen 0. */
START_TEST(test_db_old_schema)
{
	struct got g = { .n = 0 };
	struct sqlite3 *db;
	char path[128], err[256];

	snprintf(path, sizeof(path), "%s/state.db", tdir);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "CREATE TABLE sandboxes ("
	    " id TEXT PRIMARY KEY NOT NULL, policy TEXT NOT NULL,"
	    " subject TEXT NOT NULL, labels TEXT NOT NULL,"
	    " idx INTEGER NOT NULL UNIQUE, address TEXT NOT NULL,"
	    " host_address TEXT NOT NULL, token TEXT NOT NULL,"
	    " created INTEGER NOT NULL, expires INTEGER NOT NULL,"
	    " tainted INTEGER NOT NULL DEFAULT 0);"
	    "INSERT INTO sandboxes VALUES ('old', 'p', 's', '{}', 3, 'a', 'h', "
	    "'t', 1, 0, 0);", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_ptr_nonnull(db = sbx_db_open(path, err, sizeof(err)));
	ck_assert_int_eq(sbx_db_load(db, got_cb, &g, err, sizeof(err)), 1);
	ck_assert_int_eq(g.bad[0], 0);
	ck_assert_uint_eq(g.r[0].gen, 0);
	ck_assert_int_eq(sbx_db_set_gen(db, "old", 7, err, sizeof(err)), 0);
	sbx_db_close(db);
	ck_assert_ptr_nonnull(db = sbx_db_open(path, err, sizeof(err)));
	g.n = 0;
	ck_assert_int_eq(sbx_db_load(db, got_cb, &g, err, sizeof(err)), 1);
	ck_assert_uint_eq(g.r[0].gen, 7);
	sbx_db_close(db);
}
END_TEST

/* The columns of the first schemas: a row as an older daemon wrote it. */
#define ROW12	"INSERT INTO sandboxes (id, policy, subject, labels, idx, " \
		"address, host_address, token, created, expires, tainted, " \
		"gen) VALUES "

START_TEST(test_db_bad_rows)
{
	struct got g = { .n = 0 };
	struct sqlite3 *db;
	char path[128], err[256];
	int i;

	snprintf(path, sizeof(path), "%s/state.db", tdir);
	ck_assert_ptr_nonnull(db = sbx_db_open(path, err, sizeof(err)));
	/* Rows the daemon did not write: overlong fields, wrong types, a
	 * negative slot. Each is reported as bad, never trusted. */
	ck_assert_int_eq(sqlite3_exec(db,
	    ROW12 "('x', 'p', 's', '{}', -1, 'a', 'h', "
	    "'t', 0, 0, 0, 1);"
	    ROW12 "('y', 'p', 's', '{}', 5, 'a', 'h', "
	    "x'00', 0, 0, 0, 2);"
	    ROW12 "('zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
	    "zzzzzzzzzz', 'p', 's', '{}', 6, 'a', 'h', 't', 0, 0, 0, 3);"
	    ROW12 "('w', 'p', 's', '{}', '7', 'a', 'h', "
	    "'t', 0, 0, 0, 4);"
	    ROW12 "('v', 'p', 's', '{}', 8, 'a', 'h', "
	    "'t', 0, 0, 0, 4294967296);", NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sbx_db_load(db, got_cb, &g, err, sizeof(err)), 5);
	ck_assert_int_eq(g.bad[0] + g.bad[1] + g.bad[2], 3);
	/* A generation beyond 32 bits is no row of ours either. */
	for (i = 0; i < g.n; i++)
		if (strcmp(g.r[i].id, "v") == 0)
			break;
	ck_assert_int_lt(i, g.n);
	ck_assert_int_eq(g.bad[i], 1);
	sbx_db_close(db);
}
END_TEST

START_TEST(test_db_symlink)
{
	struct sqlite3 *db;
	char path[128], target[128], err[256];

	/* A symlink planted at the database's path must not receive the
	 * tokens. */
	snprintf(path, sizeof(path), "%s/state.db", tdir);
	snprintf(target, sizeof(target), "%s/elsewhere", tdir);
	ck_assert_int_eq(symlink(target, path), 0);
	ck_assert_ptr_null(db = sbx_db_open(path, err, sizeof(err)));
	ck_assert_int_eq(access(target, F_OK), -1);
}
END_TEST

/* ------------------------------------------------------------ rows */

/*
 * A row of the state database is adopted at restart only if a create
 * could have written it (sbx_rec_valid): each field that reaches the
 * kernel or the audit log, one bad value at a time, from a good row.
 */
enum { F_NONE, F_ID, F_POLICY, F_SUBJECT, F_LABELS, F_TOKEN, F_CREATED,
    F_EXPIRES, F_TAINTED };

static const struct {
	int		 field;
	const char	*text;		/* for the string fields */
	int64_t		 n;		/* for the numbers */
	int		 ok;
} rows[] = {
	{ F_NONE, NULL, 0, 1 },
	{ F_ID, "", 0, 0 }, { F_ID, "../etc", 0, 0 }, { F_ID, "A", 0, 0 },
	{ F_ID, "a b", 0, 0 }, { F_ID, "-x", 0, 0 },
	{ F_POLICY, "tp", 0, 1 }, { F_POLICY, "a_b-9", 0, 1 },
	{ F_POLICY, "", 0, 0 }, { F_POLICY, "../tp", 0, 0 },
	{ F_POLICY, "Tp", 0, 0 }, { F_POLICY, "_tp", 0, 0 },
	{ F_POLICY, "t p", 0, 0 }, { F_POLICY, "tp\n", 0, 0 },
	{ F_POLICY, "t*", 0, 0 },
	{ F_SUBJECT, "bob@example.com", 0, 1 }, { F_SUBJECT, "", 0, 0 },
	{ F_SUBJECT, "a b", 0, 0 }, { F_SUBJECT, "team-*", 0, 0 },
	{ F_SUBJECT, "a\"b", 0, 0 }, { F_SUBJECT, "a\x1b[2J", 0, 0 },
	{ F_LABELS, "{}", 0, 1 }, { F_LABELS, "{\"k\":\"v\"}", 0, 1 },
	{ F_LABELS, "", 0, 0 }, { F_LABELS, "null", 0, 0 },
	{ F_LABELS, "[]", 0, 0 }, { F_LABELS, "{\"K\":\"v\"}", 0, 0 },
	{ F_LABELS, "{\"k\":1}", 0, 0 }, { F_LABELS, "{\"k\":\"a b\"}", 0, 0 },
	{ F_LABELS, "{\"k\":\"v\",\"k\":\"w\"}", 0, 0 },
	{ F_LABELS, "{\"k\":\"v\"", 0, 0 },
	{ F_TOKEN, "", 0, 0 }, { F_TOKEN, "abc", 0, 0 },
	{ F_TOKEN, "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef01"
	    "23456789", 0, 0 },
	{ F_TOKEN, "g0cdef0123456789abcdef0123456789abcdef0123456789abcdef01"
	    "23456789", 0, 0 },
	{ F_TOKEN, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef01"
	    "23456789", 0, 1 },
	{ F_CREATED, NULL, 0, 0 }, { F_CREATED, NULL, -5, 0 },
	{ F_CREATED, NULL, 1, 1 },
	{ F_EXPIRES, NULL, 0, 1 },			/* never */
	{ F_EXPIRES, NULL, 1700000001, 1 },		/* 1s TTL */
	{ F_EXPIRES, NULL, 1700000000 + 4294967295LL, 1 },
	{ F_EXPIRES, NULL, 1700000000 + 4294967296LL, 0 },
	{ F_EXPIRES, NULL, 1700000000, 0 },		/* = created */
	{ F_EXPIRES, NULL, 1600000000, 0 },		/* before */
	{ F_EXPIRES, NULL, -1, 0 },
	{ F_EXPIRES, NULL, INT64_MAX, 0 },
	{ F_TAINTED, NULL, 1, 1 }, { F_TAINTED, NULL, 2, 0 },
	{ F_TAINTED, NULL, -1, 0 },
};

START_TEST(test_rec_valid)
{
	struct sbx_rec r;
	char err[256] = "", *dst = NULL;
	size_t len = 0;
	int rc;

	memset(&r, 0, sizeof(r));
	snprintf(r.id, sizeof(r.id), "sb-0123456789ab");
	snprintf(r.policy, sizeof(r.policy), "coding-agent");
	snprintf(r.subject, sizeof(r.subject), "alice");
	snprintf(r.labels, sizeof(r.labels), "{\"env\":\"dev\"}");
	memset(r.token, 'f', SBX_TOKEN_HEX);
	r.created = 1700000000;
	r.expires = 1700003600;
	switch (rows[_i].field) {
	case F_ID: dst = r.id, len = sizeof(r.id); break;
	case F_POLICY: dst = r.policy, len = sizeof(r.policy); break;
	case F_SUBJECT: dst = r.subject, len = sizeof(r.subject); break;
	case F_LABELS: dst = r.labels, len = sizeof(r.labels); break;
	case F_TOKEN: dst = r.token, len = sizeof(r.token); break;
	case F_CREATED: r.created = rows[_i].n; r.expires = 0; break;
	case F_EXPIRES: r.expires = rows[_i].n; break;
	case F_TAINTED: r.tainted = (int)rows[_i].n; break;
	default: break;
	}
	if (dst != NULL)
		snprintf(dst, len, "%s", rows[_i].text);
	rc = sbx_rec_valid(&r, err, sizeof(err));
	ck_assert_msg((rc == 0) == rows[_i].ok, "row %d (field %d '%s' %lld): "
	    "rc %d (%s)", _i, rows[_i].field, rows[_i].text ? rows[_i].text :
	    "", (long long)rows[_i].n, rc, err);
	if (rc == -1) {
		ck_assert_uint_gt(strlen(err), 0);
		/* The message never quotes the row. */
		if (dst != NULL && rows[_i].text[0] != '\0')
			ck_assert_ptr_null(strstr(err, rows[_i].text));
	}
}
END_TEST

START_TEST(test_rec_valid_unterminated)
{
	struct sbx_rec r;
	char err[256];

	/* Fields filling their buffers without a NUL: refused, not read
	 * past. */
	memset(&r, 0, sizeof(r));
	memset(r.id, 'a', sizeof(r.id));
	snprintf(r.policy, sizeof(r.policy), "tp");
	snprintf(r.subject, sizeof(r.subject), "a");
	snprintf(r.labels, sizeof(r.labels), "{}");
	memset(r.token, 'f', SBX_TOKEN_HEX);
	r.created = 1;
	ck_assert_int_eq(sbx_rec_valid(&r, err, sizeof(err)), -1);
	r.id[0] = 'x', r.id[1] = '\0';
	ck_assert_int_eq(sbx_rec_valid(&r, err, sizeof(err)), 0);
	memset(r.token, 'f', sizeof(r.token));
	ck_assert_int_eq(sbx_rec_valid(&r, err, sizeof(err)), -1);
	r.token[SBX_TOKEN_HEX] = '\0';
	memset(r.policy, 'p', sizeof(r.policy));
	ck_assert_int_eq(sbx_rec_valid(&r, err, sizeof(err)), -1);
	memset(r.policy, 'p', SBX_POLICY_MAX);
	r.policy[SBX_POLICY_MAX] = '\0';
	ck_assert_int_eq(sbx_rec_valid(&r, err, sizeof(err)), 0);
	ck_assert_int_eq(sbx_policy_name_valid(NULL), 0);
}
END_TEST

/* jansson's allocator (json_set_alloc_funcs): while jfail is set, the
 * allocation numbered jfail fails (1 the first) and every later one too. */
static int	jfail, jcount;

static void *
jmalloc(size_t n)
{
	return jfail && ++jcount >= jfail ? NULL : malloc(n);
}

/*
 * A good row whose labels cannot be parsed for lack of memory is not a bad
 * row: sbx_rec_valid says ENOMEM, so that a restart does not drop it (and
 * remove the live sandbox it names) on a passing allocation failure.
 */
START_TEST(test_rec_valid_nomem)
{
	struct sbx_rec r;
	char err[256];
	int rc, e, n;

	memset(&r, 0, sizeof(r));
	snprintf(r.id, sizeof(r.id), "sb-0123456789ab");
	snprintf(r.policy, sizeof(r.policy), "tp");
	snprintf(r.subject, sizeof(r.subject), "alice");
	/* Long enough that jansson's lexer grows its buffer, nested and with
	 * several members: every allocation of the parse is failed in turn
	 * (the nth and all after it), each must come out as ENOMEM. */
	snprintf(r.labels, sizeof(r.labels), "{\"env\":\"dev\",\"team\":"
	    "\"platform-engineering-and-developer-tooling\",\"owner\":"
	    "\"alice\"}");
	memset(r.token, 'f', SBX_TOKEN_HEX);
	r.created = 1;
	ck_assert_int_eq(sbx_rec_valid(&r, err, sizeof(err)), 0);
	json_set_alloc_funcs(jmalloc, free);
	for (n = 1; n < 64; n++) {
		jfail = n;
		jcount = 0;
		errno = 0;
		rc = sbx_rec_valid(&r, err, sizeof(err));
		e = errno;
		jfail = 0;
		if (rc == 0)
			break;		/* past the parse's last allocation */
		ck_assert_msg(e == ENOMEM, "allocation %d failed: errno %d "
		    "(%s)", n, e, err);
	}
	json_set_alloc_funcs(malloc, free);
	ck_assert_msg(n > 2 && n < 64, "parse allocations: %d", n - 1);
	/* Bad labels stay EINVAL, also those of the shape every row has. */
	snprintf(r.labels, sizeof(r.labels), "{\"env\":");
	errno = 0;
	ck_assert_int_eq(sbx_rec_valid(&r, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	snprintf(r.labels, sizeof(r.labels), "{\"env\":\"a\",\"env\":\"b\"}");
	errno = 0;
	ck_assert_int_eq(sbx_rec_valid(&r, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	snprintf(r.labels, sizeof(r.labels), "{\"env\":\"dev\"}");
	ck_assert_int_eq(sbx_rec_valid(&r, err, sizeof(err)), 0);
}
END_TEST

/* ------------------------------------------------------------ specs */

/* A spec a create takes: two labels, a TTL, a drawn id. */
static void
good_spec(struct sbx_spec *sp)
{
	memset(sp, 0, sizeof(*sp));
	snprintf(sp->policy, sizeof(sp->policy), "coding-agent");
	snprintf(sp->subject, sizeof(sp->subject), "alice@example.test");
	sp->nlabels = 2;
	snprintf(sp->label_keys[0], sizeof(sp->label_keys[0]), "env");
	snprintf(sp->label_values[0], sizeof(sp->label_values[0]), "dev");
	snprintf(sp->label_keys[1], sizeof(sp->label_keys[1]), "team");
	/* label_values[1]: empty, which is allowed. */
	sp->ttl_s = 3600;
}

/* sbx_spec_check on sp: refused with the message want, or (want NULL)
 * taken. */
static void
spec_says(const struct sbx_spec *sp, const char *want)
{
	char err[256] = "";
	int rc = sbx_spec_check(sp, err, sizeof(err));

	if (want == NULL) {
		ck_assert_msg(rc == 0, "refused: %s", err);
		return;
	}
	ck_assert_int_eq(rc, -1);
	ck_assert_str_eq(err, want);
}

/* The manager checks a spec itself, whoever built it (a caller that
 * skipped the control API's parser, or one in another process): each
 * rule gives its message, the first broken in the documented order, and
 * strings that fill their arrays unterminated are refused, not read past. */
START_TEST(test_spec_check)
{
	struct sbx_spec sp;

	good_spec(&sp);
	spec_says(&sp, NULL);
	snprintf(sp.id, sizeof(sp.id), "agent-1");
	spec_says(&sp, NULL);
	sp.ttl_s = SBX_TTL_MAX_S;
	spec_says(&sp, NULL);
	sp.ttl_s = 0;		/* the default */
	spec_says(&sp, NULL);

	/* Everything wrong at once: the id is reported, then each in turn. */
	snprintf(sp.id, sizeof(sp.id), "-a");
	sp.subject[0] = '\0';
	sp.policy[0] = '\0';
	spec_says(&sp, SBX_ID_WANT);
	memset(sp.id, 'a', sizeof(sp.id));
	spec_says(&sp, SBX_ID_WANT);
	sp.id[0] = '\0';
	spec_says(&sp, SBX_SUBJECT_WANT);
	memset(sp.subject, 'a', sizeof(sp.subject));
	spec_says(&sp, SBX_SUBJECT_WANT);
	snprintf(sp.subject, sizeof(sp.subject), "a*");
	spec_says(&sp, SBX_SUBJECT_WANT);
	snprintf(sp.subject, sizeof(sp.subject), "alice");
	spec_says(&sp, SBX_POLICY_WANT);
	memset(sp.policy, 'p', sizeof(sp.policy));
	spec_says(&sp, SBX_POLICY_WANT);
	snprintf(sp.policy, sizeof(sp.policy), "tp");
	spec_says(&sp, NULL);

	/* Labels: the same rules and words as sbx_labels_check, and no key
	 * twice (a JSON object cannot say that; a spec can). */
	good_spec(&sp);
	snprintf(sp.label_keys[1], sizeof(sp.label_keys[1]), "Team");
	spec_says(&sp, "labels: bad key (want [a-z0-9][a-z0-9._/-]{0,62})");
	good_spec(&sp);
	snprintf(sp.label_values[1], sizeof(sp.label_values[1]), "a b");
	spec_says(&sp, "labels.team: bad value (want a string of at most 128 "
	    "of [A-Za-z0-9._:/@+=-])");
	good_spec(&sp);
	memset(sp.label_values[0], 'v', sizeof(sp.label_values[0]));
	spec_says(&sp, "labels: a key or value is not terminated");
	good_spec(&sp);
	snprintf(sp.label_keys[1], sizeof(sp.label_keys[1]), "env");
	spec_says(&sp, "labels.env: given twice");
	good_spec(&sp);
	sp.nlabels = SBX_LABELS_MAX + 1;
	spec_says(&sp, "labels: more than 16");

	good_spec(&sp);
	sp.ttl_s = SBX_TTL_MAX_S + 1;
	spec_says(&sp, "ttl: must be between 1s and 30d");

	/* Attach: an absolute printable path, or none. */
	good_spec(&sp);
	snprintf(sp.attach, sizeof(sp.attach), "/proc/42/ns/net");
	spec_says(&sp, NULL);
	snprintf(sp.attach, sizeof(sp.attach), "proc/42/ns/net");
	spec_says(&sp, SBX_ATTACH_WANT);
	snprintf(sp.attach, sizeof(sp.attach), "/a b");
	spec_says(&sp, SBX_ATTACH_WANT);
	memset(sp.attach, '/', sizeof(sp.attach));
	spec_says(&sp, SBX_ATTACH_WANT);
}
END_TEST

/* The attach columns: written, read back after a reopen; and a row whose
 * attach columns no create could write is refused by sbx_rec_valid. */
START_TEST(test_db_attach)
{
	struct sbx_rec a;
	struct got g = { .n = 0 };
	struct sqlite3 *db;
	char path[128], err[256];

	snprintf(path, sizeof(path), "%s/state.db", tdir);
	ck_assert_ptr_nonnull(db = sbx_db_open(path, err, sizeof(err)));
	rec_fill(&a, "att", 2);
	a.attached = 1;
	a.prior = NS_PRIOR_KNOWN | NS_PRIOR_FORWARD;
	a.ns_dev = 4;
	a.ns_ino = UINT64_C(0xfffffffff0000001);
	snprintf(a.attach_src, sizeof(a.attach_src), "/run/docker/netns/x");
	ck_assert_int_eq(sbx_rec_valid(&a, err, sizeof(err)), 0);
	ck_assert_int_eq(sbx_db_insert(db, &a, err, sizeof(err)), 0);
	sbx_db_close(db);
	ck_assert_ptr_nonnull(db = sbx_db_open(path, err, sizeof(err)));
	ck_assert_int_eq(sbx_db_load(db, got_cb, &g, err, sizeof(err)), 1);
	ck_assert_int_eq(g.bad[0], 0);
	ck_assert_int_eq(g.r[0].attached, 1);
	ck_assert_uint_eq(g.r[0].prior, a.prior);
	ck_assert_uint_eq(g.r[0].ns_dev, 4);
	ck_assert(g.r[0].ns_ino == a.ns_ino);
	ck_assert_str_eq(g.r[0].attach_src, "/run/docker/netns/x");
	sbx_db_close(db);

	/* Inconsistent: attached without identity or path, bits ns_attach
	 * never sets, or attach columns on a sandbox that is not. */
	a.ns_ino = 0;
	ck_assert_int_eq(sbx_rec_valid(&a, err, sizeof(err)), -1);
	a.ns_ino = 9;
	a.prior = 0x100;
	ck_assert_int_eq(sbx_rec_valid(&a, err, sizeof(err)), -1);
	a.prior = 0;
	a.attach_src[0] = '\0';
	ck_assert_int_eq(sbx_rec_valid(&a, err, sizeof(err)), -1);
	a.attached = 0;
	ck_assert_int_eq(sbx_rec_valid(&a, err, sizeof(err)), -1);
	a.ns_ino = 0;
	a.ns_dev = 0;
	ck_assert_int_eq(sbx_rec_valid(&a, err, sizeof(err)), 0);
	a.attached = 2;
	ck_assert_int_eq(sbx_rec_valid(&a, err, sizeof(err)), -1);
}
END_TEST

/* Labels as an object, in the order given (as the API shows a view's). */
START_TEST(test_labels_json)
{
	struct sbx_spec sp;
	json_t *o;
	char *text;

	good_spec(&sp);
	ck_assert_ptr_nonnull(o = sbx_labels_json(sp.nlabels, sp.label_keys,
	    sp.label_values));
	ck_assert_ptr_nonnull(text = json_dumps(o, JSON_COMPACT));
	ck_assert_str_eq(text, "{\"env\":\"dev\",\"team\":\"\"}");
	free(text);
	json_decref(o);
	ck_assert_ptr_nonnull(o = sbx_labels_json(0, sp.label_keys,
	    sp.label_values));
	ck_assert_uint_eq(json_object_size(o), 0);
	json_decref(o);
}
END_TEST

static Suite *
sbx_suite(void)
{
	Suite *s = suite_create("sbx");
	TCase *tc = tcase_create("Core"), *tl = tcase_create("Limits"),
	    *td = tcase_create("StateDB");

	tcase_add_loop_test(tc, test_id, 0, sizeof(ids) / sizeof(ids[0]));
	tcase_add_loop_test(tc, test_subject, 0,
	    sizeof(subjects) / sizeof(subjects[0]));
	tcase_add_loop_test(tc, test_labels, 0,
	    sizeof(labels) / sizeof(labels[0]));
	tcase_add_loop_test(tc, test_ttl, 0, sizeof(ttls) / sizeof(ttls[0]));
	tcase_add_test(tc, test_slots_lowest);
	tcase_add_test(tc, test_slots_take);
	tcase_add_loop_test(tc, test_pool_slot, 0,
	    sizeof(pool_slots) / sizeof(pool_slots[0]));
	tcase_add_test(tc, test_pool_nslots);
	tcase_add_test(tc, test_spec_check);
	tcase_add_test(tc, test_labels_json);
	tcase_add_loop_test(tc, test_rec_valid, 0,
	    sizeof(rows) / sizeof(rows[0]));
	tcase_add_loop_test(tc, test_subtract, 0,
	    sizeof(subtracts) / sizeof(subtracts[0]));
	suite_add_tcase(s, tc);

	tcase_add_test(tl, test_id_null);
	tcase_add_test(tl, test_subject_long);
	tcase_add_test(tl, test_labels_count);
	tcase_add_test(tl, test_labels_long);
	tcase_add_test(tl, test_slots_full);
	tcase_add_test(tl, test_slots_bad_size);
	tcase_add_test(tl, test_rec_valid_unterminated);
	tcase_add_test(tl, test_rec_valid_nomem);
	suite_add_tcase(s, tl);

	tcase_add_checked_fixture(td, db_setup, db_teardown);
	tcase_add_test(td, test_db_roundtrip);
	tcase_add_test(td, test_db_bad_rows);
	tcase_add_test(td, test_db_attach);
	tcase_add_test(td, test_db_generations);
	tcase_add_test(td, test_db_old_schema);
	tcase_add_test(td, test_db_symlink);
	suite_add_tcase(s, td);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(sbx_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
