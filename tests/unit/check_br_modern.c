/*
 * check_br_modern: how the bridge reads a request of the stateless
 * 2026-07-28 revision (gateway/bridge/modern.c) before anything is done
 * for it: which requests are of that revision at all, the _meta fields
 * they must carry, the headers that must mirror the body (and the base64
 * form of Mcp-Name), the refusal each failure gets, and what an answer
 * gains on the way out. Table-driven; no network, no loop.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/bridge/br_int.h"
#include "tests/unit/run_suite.h"

#define META(v) "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":" \
	"\"" v "\",\"io.modelcontextprotocol/clientCapabilities\":{}}"

static json_t *
msg(const char *text)
{
	json_t *m = json_loads(text, 0, NULL);

	ck_assert_msg(m != NULL, "bad fixture %s", text);
	return m;
}

START_TEST(which_requests_are_modern)
{
	static const struct {
		const char	*sid, *vhdr, *body;
		bool		 want;
	} t[] = {
		{ NULL, NULL, "{\"method\":\"tools/list\",\"params\":{"
		    META("2026-07-28") "}}", true },
		/* _meta says so, whatever version: refused later. */
		{ NULL, NULL, "{\"method\":\"tools/list\",\"params\":{"
		    META("2025-11-25") "}}", true },
		{ NULL, "2026-07-28", "{\"method\":\"tools/list\"}", true },
		{ NULL, "2025-11-25", "{\"method\":\"tools/list\"}", false },
		{ NULL, NULL, "{\"method\":\"tools/list\"}", false },
		/* A session's request stays a session's. */
		{ "abc", "2026-07-28", "{\"method\":\"tools/list\",\"params\":{"
		    META("2026-07-28") "}}", false },
		/* initialize selects the legacy revisions. */
		{ NULL, "2026-07-28", "{\"method\":\"initialize\",\"params\":{"
		    META("2026-07-28") "}}", false },
		{ NULL, "2026-07-28", "{\"id\":1,\"result\":{}}", false },
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		json_t *m = msg(t[i].body);

		ck_assert_msg(br_modern_wanted(t[i].sid, t[i].vhdr, m) ==
		    t[i].want, "case %zu", i);
		json_decref(m);
	}
}
END_TEST

START_TEST(headers_and_meta_checked)
{
	static const char call[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
	    "\"tools/call\",\"params\":{\"name\":\"touch\"," META("2026-07-28")
	    "}}";
	static const char read[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
	    "\"resources/read\",\"params\":{\"uri\":\"note://d/é\","
	    META("2026-07-28") "}}";
	static const char list[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
	    "\"tools/list\",\"params\":{" META("2026-07-28") "}}";
	static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/x\",\"params\":{" META("2026-07-28") "}}";
	static const struct {
		const char	*body, *v, *m, *n;
		int		 code;	/* 0: accepted */
		unsigned	 status;
	} t[] = {
		{ call, "2026-07-28", "tools/call", "touch", 0, 0 },
		{ call, "2026-07-28", "tools/call", "=?base64?dG91Y2g=?=", 0,
		    0 },
		{ call, "2026-07-28", "tools/call", "other", -32020, 400 },
		{ call, "2026-07-28", "tools/call", NULL, -32020, 400 },
		{ call, "2026-07-28", "tools/list", "touch", -32020, 400 },
		{ call, "2026-07-28", NULL, "touch", -32020, 400 },
		{ call, NULL, "tools/call", "touch", -32020, 400 },
		{ call, "2025-11-25", "tools/call", "touch", -32020, 400 },
		/* header values are case-sensitive */
		{ call, "2026-07-28", "Tools/Call", "touch", -32020, 400 },
		{ call, "2026-07-28", "tools/call", "touch\x01", -32020, 400 },
		{ call, "2026-07-28", "tools/call", "=?base64?dG91Y2g?=",
		    -32020, 400 },
		{ call, "2026-07-28", "tools/call", "=?base64?AHRvdWNo?=",
		    -32020, 400 },	/* decodes to a NUL first */
		/* non-ASCII URI: only in the base64 form */
		{ read, "2026-07-28", "resources/read",
		    "=?base64?bm90ZTovL2Qvw6k=?=", 0, 0 },
		{ list, "2026-07-28", "tools/list", NULL, 0, 0 },
		{ list, "2026-07-28", "tools/list", "x", -32020, 400 },
		{ note, "2026-07-28", "notifications/x", NULL, 0, 0 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
		    "\"params\":{}}", "2026-07-28", "tools/list", NULL,
		    -32602, 400 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
		    "\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
		    "protocolVersion\":\"2026-07-28\"}}}", "2026-07-28",
		    "tools/list", NULL, -32602, 400 },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
		    "\"params\":{" META("1900-01-01") "}}", "1900-01-01",
		    "tools/list", NULL, -32022, 400 },
	};
	struct br_meta_verdict v;
	struct br_meta_hdrs h;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		json_t *m = msg(t[i].body);
		int r;

		h.version = t[i].v;
		h.method = t[i].m;
		h.name = t[i].n;
		r = br_modern_check(&h, m, &v);
		ck_assert_msg(r == (t[i].code == 0 ? 0 : -1), "case %zu: %d",
		    i, r);
		if (t[i].code != 0) {
			ck_assert_msg(v.code == t[i].code, "case %zu: code %d",
			    i, v.code);
			ck_assert_uint_eq(v.status, t[i].status);
			ck_assert(v.msg[0] != '\0');
		}
		json_decref(m);
	}
	/* The version asked for is kept for -32022's data. */
	{
		json_t *m = msg(t[sizeof(t) / sizeof(t[0]) - 1].body);

		h.version = "1900-01-01";
		h.method = "tools/list";
		h.name = NULL;
		ck_assert_int_eq(br_modern_check(&h, m, &v), -1);
		ck_assert_str_eq(v.requested, "1900-01-01");
		json_decref(m);
	}
}
END_TEST

START_TEST(header_values_decoded)
{
	char out[16];

	ck_assert_int_eq(br_hdr_value_decode("touch", out, sizeof(out)), 5);
	ck_assert_str_eq(out, "touch");
	ck_assert_int_eq(br_hdr_value_decode("=?base64?IHBhZGRlZCA=?=", out,
	    sizeof(out)), 8);
	ck_assert_str_eq(out, " padded ");
	/* The sentinel alone, or a value too long for out. */
	ck_assert_int_eq(br_hdr_value_decode("=?base64?" "?=", out,
	    sizeof(out)), -1);
	ck_assert_int_eq(br_hdr_value_decode("0123456789abcdef", out,
	    sizeof(out)), -1);
	ck_assert_int_eq(br_hdr_value_decode("", out, sizeof(out)), -1);
	ck_assert_int_eq(br_hdr_value_decode("a\nb", out, sizeof(out)), -1);
	ck_assert_int_eq(br_hdr_value_decode("\xc3\xa9", out, sizeof(out)),
	    -1);
	/* Lowercase markers only: anything else is a plain value. */
	ck_assert_int_eq(br_hdr_value_decode("=?BASE64?YQ==?=", out,
	    sizeof(out)), 15);
}
END_TEST

START_TEST(answers_adapted)
{
	struct br_req rq;
	unsigned status = 200;
	char *s;
	json_t *o;

	memset(&rq, 0, sizeof(rq));
	rq.cacheable = true;
	s = br_modern_result(&rq, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":"
	    "{\"tools\":[],\"_meta\":{\"k\":1}}}", &status);
	ck_assert_ptr_nonnull(s);
	o = json_loads(s, 0, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(o,
	    "result"), "resultType")), "complete");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(o,
	    "result"), "cacheScope")), "private");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(o,
	    "result"), "ttlMs")), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(
	    json_object_get(o, "result"), "_meta"), "k")), 1);
	ck_assert_ptr_nonnull(json_object_get(json_object_get(json_object_get(
	    o, "result"), "_meta"), "io.modelcontextprotocol/serverInfo"));
	json_decref(o);
	free(s);
	/* A call's result: no cache fields. */
	rq.cacheable = false;
	s = br_modern_result(&rq, "{\"id\":1,\"result\":{}}", &status);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_null(strstr(s, "ttlMs"));
	free(s);
	/* Errors pass as they are; a method not found becomes a 404. */
	ck_assert_ptr_null(br_modern_result(&rq, "{\"id\":1,\"error\":"
	    "{\"code\":-32602,\"message\":\"x\"}}", &status));
	ck_assert_uint_eq(status, 200);
	ck_assert_ptr_null(br_modern_result(&rq, "{\"id\":1,\"error\":"
	    "{\"code\":-32601,\"message\":\"x\"}}", &status));
	ck_assert_uint_eq(status, 404);
	ck_assert_ptr_null(br_modern_result(&rq, "not json", &status));
}
END_TEST

START_TEST(listen_notes_tagged)
{
	struct br_session s;
	json_t *n;

	memset(&s, 0, sizeof(s));
	n = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
	    "notifications/prompts/list_changed");
	br_modern_tag(&s, n);
	ck_assert_ptr_null(json_object_get(n, "params"));
	s.listen_id = json_integer(77);
	br_modern_tag(&s, n);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(
	    json_object_get(n, "params"), "_meta"),
	    "io.modelcontextprotocol/subscriptionId")), 77);
	json_decref(n);
	json_decref(s.listen_id);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("br_modern");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, which_requests_are_modern);
	tcase_add_test(tc, headers_and_meta_checked);
	tcase_add_test(tc, header_values_decoded);
	tcase_add_test(tc, answers_adapted);
	tcase_add_test(tc, listen_notes_tagged);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
