/*
 * check_br_tasks: the pure parts of the bridge's tasks extension
 * (gateway/bridge/tasks.c) and what modern.c checks of a tasks/...
 * request before it: which capabilities declare the extension, which
 * methods are the extension's, which taskId is one a task could have,
 * the times a task shows, and the Mcp-Name that must mirror taskId.
 * Table-driven; no network, no loop.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/bridge/br_int.h"
#include "tests/unit/run_suite.h"

static json_t *
msg(const char *text)
{
	json_t *m = json_loads(text, 0, NULL);

	ck_assert_msg(m != NULL, "bad fixture %s", text);
	return m;
}

START_TEST(extension_declared)
{
	static const struct {
		const char	*caps;
		bool		 want;
	} t[] = {
		{ "{\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}}",
		    true },
		{ "{\"sampling\":{},\"extensions\":{\"io.modelcontextprotocol"
		    "/tasks\":{\"x\":1}}}", true },
		{ "{}", false },
		{ "{\"extensions\":{}}", false },
		{ "{\"extensions\":[\"io.modelcontextprotocol/tasks\"]}",
		    false },
		/* The text: an object says support, nothing else does. */
		{ "{\"extensions\":{\"io.modelcontextprotocol/tasks\":true}}",
		    false },
		{ "{\"tasks\":{}}", false },
	};
	json_t *c;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		c = msg(t[i].caps);
		ck_assert_msg(br_task_declared(c) == t[i].want, "%s",
		    t[i].caps);
		json_decref(c);
	}
	ck_assert(!br_task_declared(NULL));
}
END_TEST

START_TEST(methods_of_the_extension)
{
	ck_assert(br_task_method("tasks/get"));
	ck_assert(br_task_method("tasks/update"));
	ck_assert(br_task_method("tasks/cancel"));
	ck_assert(!br_task_method("tasks/list"));
	ck_assert(!br_task_method("tasks/result"));
	ck_assert(!br_task_method("tasks/get/x"));
	ck_assert(!br_task_method("tools/call"));
	ck_assert(!br_task_method(NULL));
}
END_TEST

START_TEST(task_id_params)
{
	static const struct {
		const char	*params;
		const char	*want;	/* NULL: malformed */
	} t[] = {
		{ "{\"taskId\":\"sluice-task-00ff\"}", "sluice-task-00ff" },
		{ "{\"taskId\":\"anything\"}", "anything" },
		{ "{}", NULL },
		{ "{\"taskId\":7}", NULL },
		{ "{\"taskId\":\"\"}", NULL },
		{ "{\"taskId\":null}", NULL },
		{ "{\"taskId\":[\"a\"]}", NULL },
	};
	char big[300];
	json_t *p;
	const char *got;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		p = msg(t[i].params);
		got = br_task_id_param(p);
		if (t[i].want == NULL)
			ck_assert_msg(got == NULL, "%s", t[i].params);
		else
			ck_assert_str_eq(got, t[i].want);
		json_decref(p);
	}
	ck_assert_ptr_null(br_task_id_param(NULL));
	/* 128 bytes is the longest taken. */
	memset(big, 'x', 128);
	big[128] = '\0';
	p = json_pack("{s:s}", "taskId", big);
	ck_assert_ptr_nonnull(br_task_id_param(p));
	json_decref(p);
	memset(big, 'x', 129);
	big[129] = '\0';
	p = json_pack("{s:s}", "taskId", big);
	ck_assert_ptr_null(br_task_id_param(p));
	json_decref(p);
}
END_TEST

START_TEST(times_in_iso_8601)
{
	char out[32];

	ck_assert_int_eq(br_task_iso(0, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "1970-01-01T00:00:00.000Z");
	ck_assert_int_eq(br_task_iso(1764158400123ull, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "2025-11-26T12:00:00.123Z");
	ck_assert_int_eq(br_task_iso(1000, out, 8), -1);
}
END_TEST

START_TEST(mcp_name_mirrors_task_id)
{
	static const char get[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
	    "\"tasks/get\",\"params\":{\"taskId\":\"sluice-task-ab\","
	    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":"
	    "\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":"
	    "{}}}}";
	static const struct {
		const char	*m, *n;
		int		 code;
	} t[] = {
		{ "tasks/get", "sluice-task-ab", 0 },
		{ "tasks/get", "=?base64?c2x1aWNlLXRhc2stYWI=?=", 0 },
		{ "tasks/get", NULL, -32020 },
		{ "tasks/get", "sluice-task-cd", -32020 },
		{ "tasks/cancel", "sluice-task-ab", -32020 },
	};
	struct br_meta_hdrs h;
	struct br_meta_verdict v;
	json_t *m;
	size_t i;
	int r;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		m = msg(get);
		memset(&h, 0, sizeof(h));
		h.version = "2026-07-28";
		h.method = t[i].m;
		h.name = t[i].n;
		r = br_modern_check(&h, m, &v);
		if (t[i].code == 0)
			ck_assert_msg(r == 0, "%zu: %s", i, v.msg);
		else {
			ck_assert_int_eq(r, -1);
			ck_assert_int_eq(v.code, t[i].code);
			ck_assert_uint_eq(v.status, 400);
		}
		json_decref(m);
	}
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("br_tasks");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, extension_declared);
	tcase_add_test(tc, methods_of_the_extension);
	tcase_add_test(tc, task_id_params);
	tcase_add_test(tc, times_in_iso_8601);
	tcase_add_test(tc, mcp_name_mirrors_task_id);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
