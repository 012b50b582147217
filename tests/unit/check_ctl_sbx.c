/*
 * check_ctl_sbx: the control API's half of /v1/sandboxes
 * (gateway/ctl/sandboxes.c) without a manager. What clients rely on: a
 * create body that breaks a rule is answered 400 bad_request with the
 * same message as ever, the first problem in the order the API has always
 * reported them (unknown members, id, subject, labels, ttl, policy), with
 * hostile forms (NULs inside strings, overlong strings, wrong types)
 * refused rather than cut into something valid; and every reason the
 * manager can give maps to one status and an error code, the same word
 * the audit log gives it.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/ctl/sandboxes.h"
#include "gateway/log.h"
#include "gateway/sandbox.h"

#define OKP	"\"policy\":\"tp\""
#define OKS	"\"subject\":\"alice\""

static const struct {
	const char	*body;
	const char	*message;
} refusals[] = {
	{ "[]", "the body must be a JSON object" },
	{ "{" OKP "," OKS ",\"tll\":\"1h\"}", "unknown member 'tll'" },
	/* Unknown members first, whatever else is wrong. */
	{ "{\"id\":\"A\",\"x\":1}", "unknown member 'x'" },
	{ "{\"id\":5," OKP "," OKS "}", SBX_ID_WANT },
	{ "{\"id\":\"A\"," OKP "," OKS "}", SBX_ID_WANT },
	{ "{\"id\":\"\"," OKP "," OKS "}", SBX_ID_WANT },
	{ "{\"id\":\"abcdefghijklmnopqrstuvwxyz0123456\"," OKP "," OKS "}",
	    SBX_ID_WANT },
	/* A NUL would leave a valid prefix: refused, not cut. */
	{ "{\"id\":\"ab\\u0000c\"," OKP "," OKS "}", SBX_ID_WANT },
	{ "{\"id\":\"a\"," OKP ",\"subject\":\"a b\",\"labels\":[]}",
	    SBX_SUBJECT_WANT },
	{ "{" OKP "}", SBX_SUBJECT_WANT },
	{ "{" OKP ",\"subject\":\"al\\u0000ice\"}", SBX_SUBJECT_WANT },
	{ "{" OKP ",\"subject\":7}", SBX_SUBJECT_WANT },
	{ "{" OKP "," OKS ",\"labels\":[],\"ttl\":0}",
	    "labels: must be an object" },
	{ "{" OKP "," OKS ",\"labels\":{\"K\":\"v\"}}",
	    "labels: bad key (want [a-z0-9][a-z0-9._/-]{0,62})" },
	{ "{" OKP "," OKS ",\"labels\":{\"k\":1}}",
	    "labels.k: bad value (want a string of at most 128 of "
	    "[A-Za-z0-9._:/@+=-])" },
	{ "{" OKP "," OKS ",\"labels\":{\"k\":\"a\\u0000b\"}}",
	    "labels.k: bad value (want a string of at most 128 of "
	    "[A-Za-z0-9._:/@+=-])" },
	{ "{" OKP "," OKS ",\"ttl\":0}", "ttl: must be between 1s and 30d" },
	{ "{" OKP "," OKS ",\"ttl\":\"31d\"}",
	    "ttl: must be between 1s and 30d" },
	{ "{" OKP "," OKS ",\"ttl\":\"5x\"}", "ttl: want <n>[s|m|h|d]" },
	{ "{" OKP "," OKS ",\"ttl\":true}",
	    "ttl: want seconds or a duration string" },
	{ "{" OKS "}", SBX_POLICY_WANT },
	{ "{" OKS ",\"policy\":\"\"}", SBX_POLICY_WANT },
	{ "{" OKS ",\"policy\":3}", SBX_POLICY_WANT },
	{ "{" OKS ",\"policy\":\"t\\u0000p\"}", SBX_POLICY_WANT },
	{ "{" OKS ",\"policy\":\"p234567890123456789012345678901234567890"
	    "12345678901234567890123456\"}", SBX_POLICY_WANT },
};

/* Each is refused before the manager is asked: m is NULL here, and a
 * body that reached it would crash the suite. */
START_TEST(test_create_refused)
{
	json_t *body, *reply;
	json_error_t e;

	body = json_loads(refusals[_i].body, JSON_ALLOW_NUL, &e);
	ck_assert_msg(body != NULL, "%s: %s", refusals[_i].body, e.text);
	reply = NULL;
	ck_assert_uint_eq(ctl_sbx_create(NULL, body, &reply), 400);
	json_decref(body);
	ck_assert_ptr_nonnull(reply);
	ck_assert_str_eq(json_string_value(json_object_get(reply, "error")),
	    "bad_request");
	ck_assert_str_eq(json_string_value(json_object_get(reply, "message")),
	    refusals[_i].message);
	json_decref(reply);
}
END_TEST

/* No body at all (an empty POST): the same 400. */
START_TEST(test_create_no_body)
{
	json_t *reply = NULL;

	ck_assert_uint_eq(ctl_sbx_create(NULL, NULL, &reply), 400);
	ck_assert_str_eq(json_string_value(json_object_get(reply, "message")),
	    "the body must be a JSON object");
	json_decref(reply);
}
END_TEST

static const struct {
	enum sbx_err	 why;
	unsigned	 status;
	const char	*code;
} statuses[] = {
	{ SBX_ERR_INVALID, 400, "bad_request" },
	{ SBX_ERR_LIMIT, 400, "bad_request" },
	{ SBX_ERR_NO_POLICY, 422, "unknown_policy" },
	{ SBX_ERR_EXISTS, 409, "exists" },
	{ SBX_ERR_NOT_FOUND, 404, "not_found" },
	{ SBX_ERR_NETNS_BUSY, 409, "netns_busy" },
	{ SBX_ERR_POOL_FULL, 503, "pool_exhausted" },
	{ SBX_ERR_AUDIT_UNAVAILABLE, 503, "audit_unavailable" },
	{ SBX_ERR_KERNEL, 500, "kernel" },
	{ SBX_ERR_STATE_DB, 500, "state_db" },
	{ SBX_ERR_INTERNAL, 500, "internal" },
};

START_TEST(test_statuses)
{
	const char *code = NULL;
	int why, seen[SBX_ERR_COUNT] = { 0 };
	size_t i;

	for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		ck_assert_uint_eq(ctl_sbx_status(statuses[i].why, &code),
		    statuses[i].status);
		ck_assert_str_eq(code, statuses[i].code);
		seen[statuses[i].why] = 1;
	}
	/* Every reason is answered, with the word the audit log uses. */
	for (why = SBX_ERR_NONE + 1; why < SBX_ERR_COUNT; why++) {
		ck_assert_msg(seen[why], "reason %d has no row here", why);
		(void)ctl_sbx_status((enum sbx_err)why, &code);
		ck_assert_str_eq(code, sbx_err_name((enum sbx_err)why));
	}
	/* A failure that says nothing, or a value outside the enum: 500. */
	ck_assert_uint_eq(ctl_sbx_status(SBX_ERR_NONE, &code), 500);
	ck_assert_str_eq(code, "internal");
	ck_assert_uint_eq(ctl_sbx_status((enum sbx_err)SBX_ERR_COUNT, &code),
	    500);
	ck_assert_str_eq(code, "internal");
	ck_assert_str_eq(sbx_err_name((enum sbx_err)SBX_ERR_COUNT), "?");
}
END_TEST

static Suite *
ctl_sbx_suite(void)
{
	Suite *s = suite_create("ctl_sbx");
	TCase *tc = tcase_create("Core");

	tcase_add_loop_test(tc, test_create_refused, 0,
	    sizeof(refusals) / sizeof(refusals[0]));
	tcase_add_test(tc, test_create_no_body);
	tcase_add_test(tc, test_statuses);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	log_init(1, "check_ctl_sbx");
	sr = srunner_create(ctl_sbx_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
