/*
 * check_audit_canon: the canonical record form (reference/audit.md §3.3).
 * The verifier's verdict rests on "same value, same bytes", so both halves
 * are tested by table: the writer's output for JCS-style vectors within the
 * subset, and the strict parser's refusal of every non-canonical or hostile
 * input (floats, duplicate or unsorted keys, whitespace, bad escapes, \/,
 * lone surrogates, invalid UTF-8, NUL, huge integers, deep nesting).
 */
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "audit/audit.h"

/* JSON input (parsed by jansson) -> expected canonical bytes. */
static const struct {
	const char *in, *out;
} dump_vec[] = {
	{ "{\"b\":1,\"a\":2}", "{\"a\":2,\"b\":1}" },
	{ "{ \"a\" : { \"c\" : [true, false, null], \"b\" : \"x\" } }",
	  "{\"a\":{\"b\":\"x\",\"c\":[true,false,null]}}" },
	{ "[1, -1, 0, 9007199254740991, -9007199254740991]",
	  "[1,-1,0,9007199254740991,-9007199254740991]" },
	/* JCS escapes: only \" \\ \b \f \n \r \t and \u00xx lowercase. */
	{ "[\"\\u0001\\n\\\"\\\\\\/\\u007f\\b\\f\\r\\t\\u001F\"]",
	  "[\"\\u0001\\n\\\"\\\\/\x7f\\b\\f\\r\\t\\u001f\"]" },
	/* Non-ASCII is emitted raw (RFC 8785 §3.2.2.2). */
	{ "[\"\\u20ac\", \"\\ud83d\\ude00\", \"\\u00e9\"]",
	  "[\"\xe2\x82\xac\",\"\xf0\x9f\x98\x80\",\"\xc3\xa9\"]" },
	/* Bytewise key order: '1' (0x31) < '_' (0x5f) < 'b'. */
	{ "{\"a_1\":1,\"a1\":2,\"a\":3,\"b\":4,\"0\":5}",
	  "{\"0\":5,\"a\":3,\"a1\":2,\"a_1\":1,\"b\":4}" },
	{ "{}", "{}" },
	{ "[]", "[]" },
	{ "[[[]],{}]", "[[[]],{}]" },
	{ "{\"s\":\"\"}", "{\"s\":\"\"}" },
};

/* Canonical buffers the parser must accept and return unchanged. */
static const char *const parse_ok[] = {
	"{}", "[]", "\"\"", "0", "-1", "true", "null",
	"\"\\u001f\"", "{\"a\":[{\"b\":null}]}", "\"\xe2\x82\xac\"",
	"\"\\\\\\\"\"", "9007199254740991", "-9007199254740991",
	"{\"a\":1,\"b\":{\"c\":\"d\"}}", "\"/\"", "\"\x7f\"",
};

/* Hostile or non-canonical buffers the parser must refuse. */
static const struct {
	const char *in;
	size_t len;	/* 0: strlen */
} parse_bad[] = {
	{ "{\"a\":1.0}", 0 }, { "{\"a\":1e3}", 0 }, { "1.5", 0 },
	{ "{\"a\":1,\"a\":2}", 0 },	/* duplicate key */
	{ "{\"b\":1,\"a\":2}", 0 },	/* unsorted */
	{ "{ \"a\":1}", 0 }, { "{\"a\": 1}", 0 }, { "{\"a\":1}\n", 0 },
	{ " {}", 0 },
	{ "\"\\/\"", 0 },		/* \/ */
	{ "\"\\u0041\"", 0 },		/* needless escape */
	{ "\"\\u001F\"", 0 },		/* uppercase hex */
	{ "\"\\u00e9\"", 0 },		/* non-ASCII escaped */
	{ "\"\\ud800\"", 0 }, { "\"\\udc00\"", 0 }, { "\"\\ud800\\u0041\"", 0 },
	{ "\"\\ud83d\\ude00\"", 0 },	/* valid pair, but not raw */
	{ "\"\xff\"", 0 }, { "\"\xc0\xaf\"", 0 }, { "\"\xed\xa0\x80\"", 0 },
	{ "\"\xf4\x90\x80\x80\"", 0 }, { "\"\xe2\x82\"", 0 },
	{ "\"\\u0000\"", 0 }, { "\"a\0b\"", 5 }, { "{}\0", 3 },
	{ "\"\t\"", 0 }, { "\"\\x\"", 0 }, { "\"abc", 0 }, { "\"\\", 0 },
	{ "9007199254740992", 0 }, { "-9007199254740992", 0 },
	{ "99999999999999999999999999999", 0 },
	{ "-0", 0 }, { "01", 0 }, { "-", 0 }, { "+1", 0 },
	{ "{\"A\":1}", 0 }, { "{\"a-b\":1}", 0 }, { "{\"\":1}", 0 },
	{ "{\"\xc3\xa9\":1}", 0 },
	{ "{\"a\":1,}", 0 }, { "[1,]", 0 }, { "[1 ]", 0 }, { "", 0 },
	{ "tru", 0 }, { "nul", 0 }, { "{\"a\":1}{}", 0 }, { "[1][2]", 0 },
	{ "{\"a\"}", 0 }, { "{\"a\":}", 0 }, { "{a:1}", 0 }, { "'a'", 0 },
	{ "[NaN]", 0 }, { "[Infinity]", 0 },
};

START_TEST(test_dump_vectors)
{
	json_error_t je;
	json_t *v, *back;
	char *out;
	size_t len;

	v = json_loads(dump_vec[_i].in, JSON_DECODE_ANY, &je);
	ck_assert_msg(v != NULL, "vector %d does not load: %s", _i, je.text);
	out = aud_canon_dump(v, &len, NULL, 0);
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(len, strlen(dump_vec[_i].out));
	ck_assert_str_eq(out, dump_vec[_i].out);
	/* And the strict parser takes the result back, byte for byte. */
	back = aud_canon_parse(out, len, NULL, 0);
	ck_assert_ptr_nonnull(back);
	ck_assert(json_equal(v, back));
	json_decref(back);
	free(out);
	json_decref(v);
}
END_TEST

START_TEST(test_parse_ok)
{
	const char *in = parse_ok[_i];
	char err[128], *out;
	json_t *v;
	size_t len;

	v = aud_canon_parse(in, strlen(in), err, sizeof(err));
	ck_assert_msg(v != NULL, "%s refused: %s", in, err);
	out = aud_canon_dump(v, &len, NULL, 0);
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(len, strlen(in));
	ck_assert(memcmp(out, in, len) == 0);
	free(out);
	json_decref(v);
}
END_TEST

START_TEST(test_parse_bad)
{
	size_t len = parse_bad[_i].len ? parse_bad[_i].len :
	    strlen(parse_bad[_i].in);
	char err[128] = "";
	json_t *v;

	v = aud_canon_parse(parse_bad[_i].in, len, err, sizeof(err));
	ck_assert_msg(v == NULL, "hostile vector %d accepted: %s", _i,
	    parse_bad[_i].in);
	ck_assert_msg(err[0] != '\0', "vector %d: no message", _i);
}
END_TEST

START_TEST(test_dump_refuses)
{
	json_t *v[6];
	json_t *deep, *d;
	char err[128];
	int i;

	v[0] = json_pack("{s:f}", "a", 1.5);
	v[1] = json_pack("{s:i}", "A", 1);
	v[2] = json_pack("{s:o}", "a", json_stringn("a\0b", 3));
	v[3] = json_pack("{s:I}", "a", (json_int_t)AUD_INT_MAX + 1);
	v[4] = json_pack("{s:I}", "a", -(json_int_t)AUD_INT_MAX - 1);
	v[5] = json_pack("{s:i}", "a b", 1);
	for (i = 0; i < 6; i++) {
		ck_assert_ptr_nonnull(v[i]);
		ck_assert_msg(aud_canon_dump(v[i], NULL, err, sizeof(err)) ==
		    NULL, "value %d dumped", i);
		json_decref(v[i]);
	}
	deep = json_array();
	for (d = deep, i = 0; i < AUD_MAX_DEPTH + 5; i++) {
		json_t *n = json_array();

		json_array_append_new(d, n);
		d = n;
	}
	ck_assert_ptr_null(aud_canon_dump(deep, NULL, err, sizeof(err)));
	json_decref(deep);
}
END_TEST

START_TEST(test_parse_deep)
{
	char buf[2 * 100000 + 1];
	size_t n = 100000, i;

	/* A stack-exhaustion attempt must be refused, not crash. */
	for (i = 0; i < n; i++) {
		buf[i] = '[';
		buf[n + i] = ']';
	}
	ck_assert_ptr_null(aud_canon_parse(buf, 2 * n, NULL, 0));
	/* Exactly at the limit is fine. */
	for (i = 0; i <= AUD_MAX_DEPTH; i++)
		buf[i] = '[';
	for (i = 0; i <= AUD_MAX_DEPTH; i++)
		buf[AUD_MAX_DEPTH + 1 + i] = ']';
	json_t *v = aud_canon_parse(buf, 2 * (AUD_MAX_DEPTH + 1), NULL, 0);
	ck_assert_ptr_nonnull(v);
	json_decref(v);
}
END_TEST

START_TEST(test_parse_oversized)
{
	size_t n = AUD_MAX_RECORD + 10;
	char *buf = malloc(n);

	ck_assert_ptr_nonnull(buf);
	memset(buf, 'a', n);
	buf[0] = '"';
	buf[n - 1] = '"';
	ck_assert_ptr_null(aud_canon_parse(buf, n, NULL, 0));
	free(buf);
}
END_TEST

/* A fixed-seed generator: the same "random" inputs on every run. */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint32_t
next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static json_t *
random_value(int depth)
{
	static const char *const keys[] = { "a", "b", "seq", "z9", "_", "k_1" };
	static const char *const strs[] = { "", "x", "\xe2\x82\xac", "\"\\",
	    "\n\t\x01", "\xf0\x9f\x98\x80", "/", "\x7f" };
	json_t *v;
	int i, n;

	switch (depth > 3 ? next_rand() % 4 : next_rand() % 6) {
	case 0:
		return json_integer((json_int_t)(next_rand() % 2000001) -
		    1000000);
	case 1:
		return json_string(strs[next_rand() % 8]);
	case 2:
		return next_rand() % 2 ? json_true() : json_null();
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
		n = (int)(next_rand() % 5);
		for (i = 0; i < n; i++)
			json_object_set_new(v, keys[next_rand() % 6],
			    random_value(depth + 1));
		return v;
	}
}

START_TEST(test_roundtrip_random)
{
	json_t *v, *back;
	char *out;
	size_t len;
	int i;

	for (i = 0; i < 2000; i++) {
		v = random_value(0);
		out = aud_canon_dump(v, &len, NULL, 0);
		ck_assert_ptr_nonnull(out);
		back = aud_canon_parse(out, len, NULL, 0);
		ck_assert_msg(back != NULL, "own output refused: %s", out);
		ck_assert(json_equal(v, back));
		json_decref(back);
		free(out);
		json_decref(v);
	}
}
END_TEST

START_TEST(test_mutations)
{
	json_t *v, *back;
	char *out, *m, *re;
	size_t len, rl;
	int i, j, accepted = 0;

	/* Flip, insert and cut bytes of valid records: whatever the parser
	 * accepts must be exactly canonical; nothing may crash (ASan). */
	for (i = 0; i < 3000; i++) {
		v = random_value(0);
		out = aud_canon_dump(v, &len, NULL, 0);
		json_decref(v);
		ck_assert_ptr_nonnull(out);
		m = malloc(len + 2);
		memcpy(m, out, len);
		j = len ? (int)(next_rand() % len) : 0;
		switch (next_rand() % 3) {
		case 0:
			if (len)
				m[j] = (char)(next_rand() & 0xff);
			break;
		case 1:
			memmove(m + j + 1, m + j, len - (size_t)j);
			m[j] = " ,:\"\\0e.-"[next_rand() % 10];
			len++;
			break;
		default:
			len = (size_t)j;
		}
		back = aud_canon_parse(m, len, NULL, 0);
		if (back != NULL) {
			accepted++;
			re = aud_canon_dump(back, &rl, NULL, 0);
			ck_assert_ptr_nonnull(re);
			ck_assert_uint_eq(rl, len);
			ck_assert(memcmp(re, m, len) == 0);
			free(re);
			json_decref(back);
		}
		free(m);
		free(out);
	}
	/* Some mutations (a digit for a digit) stay canonical. */
	ck_assert_int_gt(accepted, 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("audit_canon");
	TCase *core = tcase_create("Core"), *lim = tcase_create("Limits");
	SRunner *sr;
	int nf;

	tcase_add_loop_test(core, test_dump_vectors, 0,
	    sizeof(dump_vec) / sizeof(dump_vec[0]));
	tcase_add_loop_test(core, test_parse_ok, 0,
	    sizeof(parse_ok) / sizeof(parse_ok[0]));
	tcase_add_loop_test(lim, test_parse_bad, 0,
	    sizeof(parse_bad) / sizeof(parse_bad[0]));
	tcase_add_test(lim, test_dump_refuses);
	tcase_add_test(lim, test_parse_deep);
	tcase_add_test(lim, test_parse_oversized);
	tcase_add_test(core, test_roundtrip_random);
	tcase_add_test(lim, test_mutations);
	suite_add_tcase(s, core);
	suite_add_tcase(s, lim);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
