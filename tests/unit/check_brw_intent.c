/*
 * check_brw_intent: the restart scan of the tool calls a crash left open
 * (brw_intent_scan, gateway/brwire_intent.c). A real audit log is
 * written with the writer, as the daemon writes it, and read back: every
 * mcp.intent without a later mcp.call or mcp.outcome_unknown of its call_id
 * is found, and nothing before the mark is read.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "audit/audit.h"
#include "gateway/brwire.h"

static char dir[64], db[128];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/check_brw_intent.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(db, sizeof(db), "%s/audit.db", dir);
}

static void
teardown(void)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static struct aud_log *
open_log(void)
{
	struct aud_opts o = { 0 };
	struct aud_log *l;
	char err[256];

	o.db_path = db;
	o.origin = "sluice.test/intent";
	l = aud_open(&o, err, sizeof(err));
	ck_assert_msg(l != NULL, "aud_open: %s", err);
	return l;
}

/* The id of call n: 32 hex digits. */
static const char *
cid(int n)
{
	static char b[8][40];
	static int k;
	char *s = b[k++ % 8];

	snprintf(s, 40, "%032x", n);
	return s;
}

static void
put(struct aud_log *l, const char *kind, int n, const char *tool)
{
	json_t *f = json_pack("{s:s, s:{s:s}, s:s, s:s}", "call_id", cid(n),
	    "sandbox", "id", "sb-1", "server", "srv", "tool", tool);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(aud_submit_async(l, kind, f), 0);
}

static json_t *
scan(uint64_t from, uint64_t *n)
{
	json_t *open;
	char err[256];

	ck_assert_msg(brw_intent_scan(db, from, &open, n, err, sizeof(err)) ==
	    0, "scan: %s", err);
	return open;
}

START_TEST(test_scan_pairs)
{
	struct aud_log *l = open_log();
	json_t *open, *e;
	uint64_t n, mark;

	put(l, "mcp.intent", 1, "a");		/* answered */
	put(l, "mcp.intent", 2, "b");		/* open */
	put(l, "mcp.call", 1, "a");
	put(l, "mcp.intent", 3, "c");		/* closed by the daemon */
	put(l, "mcp.outcome_unknown", 3, "c");
	put(l, "mcp.call", 9, "z");		/* refused, never intended */
	ck_assert_int_eq(aud_submit_async(l, "finding", json_pack("{s:s}",
	    "call_id", cid(4))), 0);		/* not an MCP record */
	ck_assert_int_eq(aud_sync(l), 0);
	mark = aud_next_seq(l);
	put(l, "mcp.intent", 5, "e");		/* after the mark, open */
	ck_assert_int_eq(aud_sync(l), 0);
	aud_close(l);

	open = scan(0, &n);
	ck_assert_int_eq(json_object_size(open), 2);
	ck_assert_ptr_nonnull(e = json_object_get(open, cid(2)));
	ck_assert_str_eq(json_string_value(json_object_get(e, "tool")), "b");
	ck_assert_str_eq(json_string_value(json_object_get(e, "sandbox")),
	    "sb-1");
	ck_assert_str_eq(json_string_value(json_object_get(e, "server")),
	    "srv");
	ck_assert(json_integer_value(json_object_get(e, "seq")) >= 1);
	ck_assert_ptr_nonnull(json_object_get(open, cid(5)));
	ck_assert_ptr_null(json_object_get(open, cid(1)));
	ck_assert_ptr_null(json_object_get(open, cid(3)));
	/* Only the MCP records are read. */
	ck_assert_uint_eq(n, 7);
	json_decref(open);

	/* From the mark: what lies before it is not read at all. */
	open = scan(mark, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(json_object_size(open), 1);
	ck_assert_ptr_nonnull(json_object_get(open, cid(5)));
	json_decref(open);
}
END_TEST

/* A later run's log: the start that closed an intent (a new log.open,
 * then its mcp.outcome_unknown) leaves nothing open for the next. */
START_TEST(test_scan_across_runs)
{
	struct aud_log *l = open_log();
	json_t *open;
	uint64_t n;

	put(l, "mcp.intent", 7, "g");
	ck_assert_int_eq(aud_sync(l), 0);
	aud_close(l);
	open = scan(0, &n);
	ck_assert_int_eq(json_object_size(open), 1);
	json_decref(open);
	l = open_log();
	put(l, "mcp.outcome_unknown", 7, "g");
	ck_assert_int_eq(aud_sync(l), 0);
	aud_close(l);
	open = scan(0, &n);
	ck_assert_int_eq(json_object_size(open), 0);
	ck_assert_uint_eq(n, 2);
	json_decref(open);
}
END_TEST

START_TEST(test_scan_no_log)
{
	json_t *open = NULL;
	uint64_t n;
	char err[256], missing[160];

	snprintf(missing, sizeof(missing), "%s/none.db", dir);
	ck_assert_int_eq(brw_intent_scan(missing, 0, &open, &n, err,
	    sizeof(err)), -1);
	ck_assert_ptr_null(open);
	ck_assert(strlen(err) > 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("brw_intent");
	TCase *tc = tcase_create("scan");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_scan_pairs);
	tcase_add_test(tc, test_scan_across_runs);
	tcase_add_test(tc, test_scan_no_log);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
