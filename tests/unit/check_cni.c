/*
 * check_cni: the parser and answers of sluice-cni (gateway/cni/cni_conf.c):
 * what a runtime may hand the plugin, and the CNI error code each kind of
 * bad input gets (malformed, oversized, wrong types, hostile CNI_ARGS), the
 * policy's precedence, the sandbox id, and the result it builds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "gateway/cni/cni.h"

#define GOOD	"{\"cniVersion\":\"1.0.0\",\"name\":\"sluice\"," \
		"\"type\":\"sluice-cni\",\"policy\":\"coding-agent\"}"

static struct cni_env
env_add(void)
{
	struct cni_env env = { "ADD", "0123456789abcdef", "/run/netns/cni-1",
	    "eth0", NULL, "/opt/cni/bin" };

	return env;
}

/* cni_parse of text under env: its return, with *code. */
static int
parse(const struct cni_env *env, const char *text, struct cni_req *req,
    enum cni_code *code)
{
	struct cni_err e;
	int rc;

	rc = cni_parse(env, text, strlen(text), req, &e);
	*code = e.code;
	if (rc == -1)
		ck_assert_uint_gt(strlen(e.msg), 0);
	return rc;
}

START_TEST(test_good)
{
	struct cni_env env = env_add();
	struct cni_req req;
	enum cni_code code;
	char id2[33];

	ck_assert_int_eq(parse(&env, GOOD, &req, &code), 0);
	ck_assert_int_eq(req.cmd, CNI_CMD_ADD);
	ck_assert_str_eq(req.version, "1.0.0");
	ck_assert_str_eq(req.name, "sluice");
	ck_assert_str_eq(req.policy, "coding-agent");
	ck_assert_str_eq(req.subject, "cni:sluice");
	ck_assert_str_eq(req.socket, CNI_DEFAULT_SOCKET);
	ck_assert_str_eq(req.netns, "/run/netns/cni-1");
	ck_assert_int_eq(strncmp(req.id, "cni-", 4), 0);
	ck_assert_uint_eq(strlen(req.id), 20);
	ck_assert_ptr_null(req.prev);
	/* The same container and interface, the same id; another, not. */
	cni_sandbox_id("0123456789abcdef", "eth0", id2);
	ck_assert_str_eq(req.id, id2);
	cni_sandbox_id("0123456789abcdee", "eth0", id2);
	ck_assert_str_ne(req.id, id2);
	cni_req_clear(&req);
	cni_req_clear(NULL);
}
END_TEST

START_TEST(test_policy_precedence)
{
	struct cni_env env = env_add();
	struct cni_req req;
	enum cni_code code;

	/* args.cni (annotations) over "policy"; CNI_ARGS over both. */
	ck_assert_int_eq(parse(&env, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\","
	    "\"type\":\"t\",\"policy\":\"a\",\"args\":{\"cni\":"
	    "{\"sluice.policy\":\"b\"}}}", &req, &code), 0);
	ck_assert_str_eq(req.policy, "b");
	cni_req_clear(&req);
	env.args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;"
	    "K8S_POD_NAME=agent-0;SLUICE_POLICY=c;K8S_POD_UID=x";
	ck_assert_int_eq(parse(&env, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\","
	    "\"type\":\"t\",\"policy\":\"a\",\"args\":{\"cni\":"
	    "{\"sluice.policy\":\"b\"}}}", &req, &code), 0);
	ck_assert_str_eq(req.policy, "c");
	ck_assert_str_eq(req.subject, "k8s:team-a/agent-0");
	cni_req_clear(&req);
	/* No policy anywhere: refused, as a config error. */
	env.args = NULL;
	ck_assert_int_eq(parse(&env, "{\"cniVersion\":\"1.0.0\",\"name\":\"n\","
	    "\"type\":\"t\"}", &req, &code), -1);
	ck_assert_int_eq(code, CNI_E_CONFIG);
	cni_req_clear(&req);
	/* DEL needs none, nor a namespace. */
	env.command = "DEL";
	env.netns = NULL;
	ck_assert_int_eq(parse(&env, "{\"cniVersion\":\"1.0.0\",\"name\":\"n\","
	    "\"type\":\"t\"}", &req, &code), 0);
	cni_req_clear(&req);
}
END_TEST

/* Bad input, and the code each gets. */
static const struct {
	const char	*text;
	enum cni_code	 code;
} bad[] = {
	{ "", CNI_E_DECODE },
	{ "{", CNI_E_DECODE },
	{ "[1]", CNI_E_DECODE },
	{ "{\"a\":1,\"a\":2}", CNI_E_DECODE },
	{ "{\"name\":\"n\",\"type\":\"t\"}", CNI_E_VERSION },
	{ "{\"cniVersion\":\"0.4.0\",\"name\":\"n\",\"type\":\"t\"}",
	  CNI_E_VERSION },
	{ "{\"cniVersion\":1,\"name\":\"n\",\"type\":\"t\"}", CNI_E_VERSION },
	{ "{\"cniVersion\":\"1.0.0\",\"type\":\"t\",\"policy\":\"p\"}",
	  CNI_E_CONFIG },
	{ "{\"cniVersion\":\"1.0.0\",\"name\":\"-n\",\"type\":\"t\","
	  "\"policy\":\"p\"}", CNI_E_CONFIG },
	{ "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"policy\":\"p\"}",
	  CNI_E_CONFIG },
	{ "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"t\","
	  "\"policy\":\"Bad Name\"}", CNI_E_CONFIG },
	{ "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"t\","
	  "\"policy\":7}", CNI_E_CONFIG },
	{ "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"t\","
	  "\"policy\":\"p\",\"socket\":\"relative\"}", CNI_E_CONFIG },
	{ "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"t\","
	  "\"policy\":\"p\",\"prevResult\":[]}", CNI_E_CONFIG },
	{ "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"t\","
	  "\"policy\":\"p\",\"subject\":\"a b\"}", CNI_E_CONFIG },
	{ "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"t\","
	  "\"policy\":\"p\\u0000x\"}", CNI_E_DECODE },
};

START_TEST(test_bad_config)
{
	struct cni_env env = env_add();
	struct cni_req req;
	enum cni_code code;

	ck_assert_int_eq(parse(&env, bad[_i].text, &req, &code), -1);
	ck_assert_msg(code == bad[_i].code, "row %d: code %d, want %d", _i,
	    code, bad[_i].code);
	cni_req_clear(&req);
}
END_TEST

START_TEST(test_bad_env)
{
	struct cni_env env;
	struct cni_req req;
	enum cni_code code;
	char *big;

	env = env_add();
	env.command = "ADDX";
	ck_assert_int_eq(parse(&env, GOOD, &req, &code), -1);
	ck_assert_int_eq(code, CNI_E_ENV);
	cni_req_clear(&req);
	env = env_add();
	env.containerid = NULL;
	ck_assert_int_eq(parse(&env, GOOD, &req, &code), -1);
	ck_assert_int_eq(code, CNI_E_ENV);
	cni_req_clear(&req);
	env = env_add();
	env.containerid = "../x";
	ck_assert_int_eq(parse(&env, GOOD, &req, &code), -1);
	cni_req_clear(&req);
	env = env_add();
	env.netns = NULL;
	ck_assert_int_eq(parse(&env, GOOD, &req, &code), -1);
	ck_assert_int_eq(code, CNI_E_ENV);
	cni_req_clear(&req);
	env = env_add();
	env.netns = "/run/netns/a b";
	ck_assert_int_eq(parse(&env, GOOD, &req, &code), -1);
	cni_req_clear(&req);
	env = env_add();
	env.ifname = "net1";
	ck_assert_int_eq(parse(&env, GOOD, &req, &code), -1);
	ck_assert_int_eq(code, CNI_E_CONFIG);
	cni_req_clear(&req);
	env = env_add();
	env.args = "K8S_POD_NAME";
	ck_assert_int_eq(parse(&env, GOOD, &req, &code), -1);
	ck_assert_int_eq(code, CNI_E_ENV);
	cni_req_clear(&req);
	env.args = "SLUICE_POLICY=a\x01";
	ck_assert_int_eq(parse(&env, GOOD, &req, &code), -1);
	cni_req_clear(&req);
	ck_assert_ptr_nonnull(big = malloc(CNI_ARGS_MAX + 2));
	memset(big, 'a', CNI_ARGS_MAX + 1);
	big[CNI_ARGS_MAX + 1] = '\0';
	env.args = big;
	ck_assert_int_eq(parse(&env, GOOD, &req, &code), -1);
	ck_assert_int_eq(code, CNI_E_ENV);
	cni_req_clear(&req);
	free(big);
}
END_TEST

START_TEST(test_oversized)
{
	struct cni_env env = env_add();
	struct cni_req req;
	struct cni_err e;
	size_t n = CNI_CONF_MAX + 1;
	char *big;

	ck_assert_ptr_nonnull(big = malloc(n));
	memset(big, ' ', n);
	memcpy(big, GOOD, strlen(GOOD));
	ck_assert_int_eq(cni_parse(&env, big, n, &req, &e), -1);
	ck_assert_int_eq(e.code, CNI_E_DECODE);
	ck_assert_ptr_nonnull(strstr(e.msg, "more than"));
	cni_req_clear(&req);
	/* Up to the bound, whitespace is fine. */
	ck_assert_int_eq(cni_parse(&env, big, n - 1, &req, &e), 0);
	cni_req_clear(&req);
	free(big);
}
END_TEST

START_TEST(test_result)
{
	struct cni_env env = env_add();
	struct cni_req req;
	struct cni_err e;
	enum cni_code code;
	json_t *sb, *r;
	char *text;

	ck_assert_int_eq(parse(&env, "{\"cniVersion\":\"1.0.0\",\"name\":\"n\","
	    "\"type\":\"t\",\"policy\":\"p\",\"prevResult\":{\"cniVersion\":"
	    "\"1.0.0\",\"interfaces\":[{\"name\":\"lo\",\"sandbox\":\"/x\"}],"
	    "\"ips\":[{\"address\":\"127.0.0.1/8\",\"interface\":0}]}}", &req,
	    &code), 0);
	sb = json_pack("{s:s, s:s, s:s, s:s}", "interface", "sl-3", "address",
	    "10.231.0.14", "host_address", "10.231.0.13", "dns",
	    "10.231.255.254");
	ck_assert_ptr_nonnull(r = cni_result(&req, sb, &e));
	text = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
	ck_assert_str_eq(text, "{\"cniVersion\":\"1.0.0\",\"dns\":"
	    "{\"nameservers\":[\"10.231.255.254\"]},\"interfaces\":[{\"name\":"
	    "\"lo\",\"sandbox\":\"/x\"},{\"name\":\"sl-3\"},{\"name\":\"eth0\","
	    "\"sandbox\":\"/run/netns/cni-1\"}],\"ips\":[{\"address\":"
	    "\"127.0.0.1/8\",\"interface\":0},{\"address\":\"10.231.0.14/30\","
	    "\"gateway\":\"10.231.0.13\",\"interface\":2}],\"routes\":[{\"dst\":"
	    "\"0.0.0.0/0\",\"gw\":\"10.231.0.13\"}]}");
	free(text);
	json_decref(r);
	json_object_del(sb, "address");
	ck_assert_ptr_null(cni_result(&req, sb, &e));
	ck_assert_int_eq(e.code, CNI_E_IO);
	json_decref(sb);
	cni_req_clear(&req);
}
END_TEST

START_TEST(test_error_json)
{
	struct cni_err e = { CNI_E_CONFIG, "bad", "why" };
	json_t *o = cni_error_json("1.0.0", &e);
	char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);

	ck_assert_str_eq(text, "{\"cniVersion\":\"1.0.0\",\"code\":7,"
	    "\"details\":\"why\",\"msg\":\"bad\"}");
	free(text);
	json_decref(o);
	o = cni_error_json("9.9", &e);
	ck_assert_str_eq(json_string_value(json_object_get(o, "cniVersion")),
	    CNI_DEFAULT_VERSION);
	json_decref(o);
}
END_TEST

static Suite *
cni_suite(void)
{
	Suite *s = suite_create("cni");
	TCase *tc = tcase_create("conf");

	tcase_add_test(tc, test_good);
	tcase_add_test(tc, test_policy_precedence);
	tcase_add_loop_test(tc, test_bad_config, 0,
	    (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, test_bad_env);
	tcase_add_test(tc, test_oversized);
	tcase_add_test(tc, test_result);
	tcase_add_test(tc, test_error_json);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(cni_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
