/*
 * check_br_notify: how the bridge fans an upstream's notifications out to
 * the sessions of its server (gateway/bridge/notify.c), and what it offers
 * at initialize. One upstream serves every session of its server, so the
 * rules are checked here with sessions of several sandboxes and servers:
 * an update reaches only the sessions subscribed to its URI, a list change
 * only sessions whose policy opens that kind, each message is rebuilt from
 * the fields the specification defines, repeats fold, a session holds at
 * most BR_NOTES_MAX, and delivery is one event stream ahead of the answer
 * that empties the queue. Log messages go by the level each session set
 * and are redacted when delivered. No network: the structs are the bridge's own.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/bridge/br_int.h"
#include "tests/unit/run_suite.h"

static struct br br;
static struct pol_mcp_server srv_docs = { .name = "docs" };
static struct br_up up;

static struct br_session *
session(const char *id, const char *server, bool res_ok, bool prompts_ok)
{
	struct br_session *s = calloc(1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->server, sizeof(s->server), "%s", server);
	s->res_ok = res_ok;
	s->prompts_ok = prompts_ok;
	s->log_level = -1;
	TAILQ_INSERT_TAIL(&br.sessions, s, entry);
	br.nsessions++;
	return s;
}

static void
setup(void)
{
	memset(&br, 0, sizeof(br));
	TAILQ_INIT(&br.sessions);
	/* No upstream to unsubscribe from when sessions go. */
	br.closing = true;
	memset(&up, 0, sizeof(up));
	up.br = &br;
	up.srv = &srv_docs;
}

static void
teardown(void)
{
	struct br_session *s;

	while ((s = TAILQ_FIRST(&br.sessions)) != NULL)
		br_session_free(&br, s);
}

static void
notify(const char *json)
{
	json_t *m = json_loads(json, 0, NULL);

	ck_assert_ptr_nonnull(m);
	br_notify_upstream(&up, json_string_value(json_object_get(m,
	    "method")), m);
	json_decref(m);
}

START_TEST(caps_follow_upstream)
{
	json_t *caps, *want;
	const json_t *offer;

	/* Not known (the upstream never answered): tools only. */
	caps = br_rpc_caps(&up);
	ck_assert_ptr_null(json_object_get(caps, "resources"));
	ck_assert_ptr_null(json_object_get(caps, "prompts"));
	ck_assert_ptr_nonnull(json_object_get(caps, "tools"));
	json_decref(caps);
	offer = json_loads("{\"resources\":{\"subscribe\":true},"
	    "\"prompts\":{\"listChanged\":true},\"logging\":{}}", 0, NULL);
	br_up_caps(&up, offer);
	caps = br_rpc_caps(&up);
	want = json_loads("{\"tools\":{\"listChanged\":false},"
	    "\"resources\":{\"subscribe\":true,\"listChanged\":false},"
	    "\"prompts\":{\"listChanged\":true},\"logging\":{}}", 0, NULL);
	ck_assert_msg(json_equal(caps, want), "%s", json_dumps(caps, 0));
	json_decref(caps);
	json_decref(want);
	json_decref((json_t *)offer);
	/* An upstream without them: none offered. */
	br_up_caps(&up, NULL);
	caps = br_rpc_caps(&up);
	ck_assert_uint_eq(json_object_size(caps), 1);
	json_decref(caps);
	caps = br_rpc_caps(NULL);
	ck_assert_uint_eq(json_object_size(caps), 1);
	json_decref(caps);
}
END_TEST

START_TEST(updates_to_subscribers_only)
{
	struct br_session *a = session("a", "docs", true, true);
	struct br_session *b = session("b", "docs", true, true);
	struct br_session *o = session("o", "other", true, true);
	json_t *n;

	a->subs = json_pack("{s:b}", "note://x", 1);
	o->subs = json_pack("{s:b}", "note://x", 1);
	notify("{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/resources/updated\",\"params\":{\"uri\":"
	    "\"note://x\",\"title\":\"t\",\"_meta\":{\"k\":1}}}");
	notify("{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/resources/updated\",\"params\":{\"uri\":"
	    "\"note://y\"}}");
	/* No uri, or not a string: dropped. */
	notify("{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/resources/updated\",\"params\":{\"uri\":7}}");
	ck_assert_uint_eq(json_array_size(a->notes), 1);
	ck_assert_uint_eq(json_array_size(b->notes), 0);
	ck_assert_uint_eq(json_array_size(o->notes), 0);
	n = json_array_get(a->notes, 0);
	/* Rebuilt: the uri only, nothing else of the upstream's. */
	ck_assert_uint_eq(json_object_size(json_object_get(n, "params")), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(n,
	    "params"), "uri")), "note://x");
	ck_assert_ptr_null(json_object_get(n, "id"));
}
END_TEST

START_TEST(list_changes_by_policy)
{
	struct br_session *r = session("r", "docs", true, false);
	struct br_session *p = session("p", "docs", false, true);
	struct br_session *none = session("n", "docs", false, false);
	int i;

	for (i = 0; i < 3; i++) {
		notify("{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"notifications/resources/list_changed\",\"params\":{}}");
		notify("{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"notifications/prompts/list_changed\"}");
	}
	/* Others are not forwarded by this path. */
	notify("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
	    "\"params\":{\"level\":\"info\",\"data\":\"x\"}}");
	/* Repeats fold into one. */
	ck_assert_uint_eq(json_array_size(r->notes), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(
	    r->notes, 0), "method")), "notifications/resources/list_changed");
	ck_assert_uint_eq(json_array_size(p->notes), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(
	    p->notes, 0), "method")), "notifications/prompts/list_changed");
	ck_assert_uint_eq(json_array_size(none->notes), 0);
}
END_TEST

START_TEST(queue_is_bounded)
{
	struct br_session *a = session("a", "docs", true, true);
	char buf[160], uri[32];
	int i;

	a->subs = json_object();
	for (i = 0; i < 3 * BR_NOTES_MAX; i++) {
		snprintf(uri, sizeof(uri), "note://%d", i);
		json_object_set_new(a->subs, uri, json_true());
		snprintf(buf, sizeof(buf), "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"notifications/resources/updated\",\"params\":{\"uri\":"
		    "\"%s\"}}", uri);
		notify(buf);
	}
	ck_assert_uint_eq(json_array_size(a->notes), BR_NOTES_MAX);
}
END_TEST

START_TEST(delivered_before_the_answer)
{
	struct br_session *a = session("a", "docs", true, true);
	const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
	char *sse, *first, *second;
	size_t tail;

	ck_assert_ptr_null(br_session_take_notes(&br, "a", NULL, body));
	ck_assert_ptr_null(br_session_take_notes(&br, "nosuch", NULL, body));
	notify("{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/resources/list_changed\"}");
	notify("{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/prompts/list_changed\"}");
	sse = br_session_take_notes(&br, "a", NULL, body);
	ck_assert_ptr_nonnull(sse);
	/* Two notifications in order, then the answer, one event each. */
	first = strstr(sse, "resources/list_changed");
	second = strstr(sse, "prompts/list_changed");
	ck_assert(first != NULL && second != NULL && first < second);
	ck_assert(strstr(sse, body) > second);
	ck_assert_int_eq(strncmp(sse, "event: message\ndata: {", 22), 0);
	tail = strlen(body) + strlen("event: message\ndata: \n\n");
	ck_assert_uint_ge(strlen(sse), tail);
	ck_assert_int_eq(strncmp(sse + strlen(sse) - tail,
	    "event: message\ndata: ", 21), 0);
	ck_assert_str_eq(sse + strlen(sse) - 2, "\n\n");
	free(sse);
	/* Emptied: the next answer goes out as JSON. */
	ck_assert_uint_eq(json_array_size(a->notes), 0);
	ck_assert_ptr_null(br_session_take_notes(&br, "a", NULL, body));
}
END_TEST

START_TEST(logging_levels)
{
	static const struct { const char *json; int want; } t[] = {
		{ "\"debug\"", 0 }, { "\"info\"", 1 }, { "\"notice\"", 2 },
		{ "\"warning\"", 3 }, { "\"error\"", 4 },
		{ "\"critical\"", 5 }, { "\"alert\"", 6 },
		{ "\"emergency\"", 7 }, { "\"DEBUG\"", -1 },
		{ "\"warn\"", -1 }, { "\"\"", -1 }, { "3", -1 },
		{ "null", -1 }, { "[\"info\"]", -1 },
	};
	size_t i;
	json_t *v;

	ck_assert_int_eq(br_logging_level(NULL), -1);
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		v = json_loads(t[i].json, JSON_DECODE_ANY, NULL);
		ck_assert_ptr_nonnull(v);
		ck_assert_msg(br_logging_level(v) == t[i].want, "%s",
		    t[i].json);
		json_decref(v);
	}
}
END_TEST

START_TEST(logs_by_session_level)
{
	struct br_session *warn = session("w", "docs", true, true);
	struct br_session *never = session("n", "docs", true, true);
	struct br_session *all = session("a", "docs", false, false);
	struct br_session *other = session("o", "mail", true, true);
	static const char pre[] = "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/message\",\"params\":{\"level\":\"error\","
	    "\"data\":\"";
	json_t *p;
	char big[20000];

	warn->log_level = 3;
	all->log_level = 0;
	other->log_level = 0;
	notify("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
	    "\"params\":{\"level\":\"info\",\"logger\":\"db\",\"data\":"
	    "{\"q\":1},\"extra\":\"dropped\",\"_meta\":{\"x\":1}}}");
	ck_assert_uint_eq(json_array_size(warn->notes), 0);
	ck_assert_uint_eq(json_array_size(never->notes), 0);
	ck_assert_uint_eq(json_array_size(other->notes), 0);
	ck_assert_uint_eq(json_array_size(all->notes), 1);
	p = json_object_get(json_array_get(all->notes, 0), "params");
	ck_assert_uint_eq(json_object_size(p), 3);
	ck_assert_str_eq(json_string_value(json_object_get(p, "logger")),
	    "db");
	notify("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
	    "\"params\":{\"level\":\"error\",\"data\":\"disk\"}}");
	ck_assert_uint_eq(json_array_size(warn->notes), 1);
	ck_assert_uint_eq(json_array_size(all->notes), 2);
	ck_assert_uint_eq(json_array_size(never->notes), 0);
	/* Malformed or oversized: nobody gets it. */
	notify("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
	    "\"params\":{\"level\":\"loud\",\"data\":1}}");
	notify("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
	    "\"params\":{\"level\":\"error\"}}");
	notify("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
	    "\"params\":{\"level\":\"error\",\"logger\":7,\"data\":1}}");
	memset(big, 'x', sizeof(big));
	memcpy(big, pre, strlen(pre));
	memcpy(big + sizeof(big) - 4, "\"}}", 4);
	notify(big);
	ck_assert_uint_eq(json_array_size(warn->notes), 1);
	ck_assert_uint_eq(json_array_size(all->notes), 2);
}
END_TEST

START_TEST(logs_redacted_when_delivered)
{
	static char held[] = "sk-held-credential-4242";
	char *secrets[] = { held };
	struct br_session *a = session("a", "docs", false, false);
	const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
	char *sse;

	br.secrets = secrets;
	br.nsecrets = 1;
	a->log_level = 0;
	notify("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
	    "\"params\":{\"level\":\"info\",\"data\":"
	    "\"token sk-held-credential-4242 used\"}}");
	/* A secret in a key cannot be rewritten: that message is dropped. */
	notify("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
	    "\"params\":{\"level\":\"info\",\"data\":"
	    "{\"sk-held-credential-4242\":1}}}");
	ck_assert_uint_eq(json_array_size(a->notes), 2);
	sse = br_session_take_notes(&br, "a", NULL, body);
	ck_assert_ptr_nonnull(sse);
	ck_assert_ptr_null(strstr(sse, held));
	ck_assert_ptr_nonnull(strstr(sse, "token [REDACTED] used"));
	ck_assert_ptr_nonnull(strstr(sse, body));
	free(sse);
	br.secrets = NULL;
	br.nsecrets = 0;
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("br_notify");
	TCase	*tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, caps_follow_upstream);
	tcase_add_test(tc, updates_to_subscribers_only);
	tcase_add_test(tc, list_changes_by_policy);
	tcase_add_test(tc, queue_is_bounded);
	tcase_add_test(tc, delivered_before_the_answer);
	tcase_add_test(tc, logging_levels);
	tcase_add_test(tc, logs_by_session_level);
	tcase_add_test(tc, logs_redacted_when_delivered);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
