/*
 * check_peek: the name gate's reader of first bytes (gateway/dns/peek.c).
 *
 * The code in a sandbox knows this parser and writes its first bytes to
 * make it read a name the server will not: every row here is a form that
 * must come out as the server reads it, or be refused. ClientHellos are
 * built byte by byte below, so each row says which field it bends.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/dns/peek.h"

/* ------------------------------------------------------ a ClientHello */

struct hb {
	uint8_t	b[PEEK_MAX * 2];
	size_t	n;
};

static void
put(struct hb *h, const void *p, size_t n)
{
	ck_assert_uint_le(h->n + n, sizeof(h->b));
	memcpy(h->b + h->n, p, n);
	h->n += n;
}

static void
put16(struct hb *h, unsigned v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };

	put(h, b, 2);
}

static void
ext_sni(struct hb *e, const char *name)
{
	size_t n = strlen(name);

	put16(e, 0);
	put16(e, (unsigned)n + 5);
	put16(e, (unsigned)n + 3);
	put(e, "\0", 1);
	put16(e, (unsigned)n);
	put(e, name, n);
}

static void
ext_raw(struct hb *e, unsigned type, size_t len)
{
	put16(e, type);
	put16(e, (unsigned)len);
	for (size_t i = 0; i < len; i++)
		put(e, "\x2a", 1);
}

/* One TLS record (or several, of rec bytes at most each) carrying a
 * ClientHello whose extensions are exts. */
static void
hello(struct hb *out, const struct hb *exts, size_t rec)
{
	static struct hb body, hs;
	size_t off;

	body.n = hs.n = out->n = 0;
	put(&body, "\x03\x03", 2);
	for (int i = 0; i < 32; i++)
		put(&body, "\x11", 1);
	put(&body, "\0", 1);			/* session id */
	put16(&body, 4);
	put(&body, "\xc0\x2f\x13\x01", 4);	/* cipher suites */
	put(&body, "\x01\x00", 2);		/* compression */
	if (exts != NULL) {
		put16(&body, (unsigned)exts->n);
		put(&body, exts->b, exts->n);
	}
	put(&hs, "\x01", 1);
	put(&hs, (uint8_t[]){ (uint8_t)(body.n >> 16), (uint8_t)(body.n >> 8),
	    (uint8_t)body.n }, 3);
	put(&hs, body.b, body.n);
	for (off = 0; off < hs.n; off += rec) {
		size_t k = hs.n - off < rec ? hs.n - off : rec;

		put(out, "\x16\x03\x01", 3);
		put16(out, (unsigned)k);
		put(out, hs.b + off, k);
	}
}

static struct hb E, H;

static enum peek_result
tls(const struct hb *h, struct peek_out *o)
{
	return peek_tls(h->b, h->n, o);
}

START_TEST(tls_name)
{
	struct peek_out o;

	E.n = 0;
	ext_raw(&E, 10, 4);
	ext_sni(&E, "PyPI.org");
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_NAME);
	ck_assert_str_eq(o.name, "pypi.org");
	/* Every prefix is "more", never a decision. */
	for (size_t n = 0; n < H.n; n++)
		ck_assert_int_eq(peek_tls(H.b, n, &o), PEEK_MORE);
}
END_TEST

START_TEST(tls_records)
{
	struct peek_out o;

	/* The handshake in records of 7 bytes: one ClientHello still. */
	E.n = 0;
	ext_sni(&E, "files.example.org");
	ext_raw(&E, 51, 1200);	/* a large key share */
	hello(&H, &E, 7);
	ck_assert_int_eq(tls(&H, &o), PEEK_NAME);
	ck_assert_str_eq(o.name, "files.example.org");
	/* An alert record in the middle of it. */
	H.b[5 + 7] = 21;
	ck_assert_int_eq(tls(&H, &o), PEEK_MALFORMED);
}
END_TEST

START_TEST(tls_refusals)
{
	struct peek_out o;
	static const uint8_t http[] = "GET / HTTP/1.1\r\n";

	ck_assert_int_eq(peek_tls(http, sizeof(http) - 1, &o), PEEK_NOT_TLS);
	/* No extensions; extensions without server_name. */
	hello(&H, NULL, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_NO_NAME);
	E.n = 0;
	ext_raw(&E, 10, 4);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_NO_NAME);
	/* Two server_name extensions: which one counts is the server's
	 * choice. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	ext_sni(&E, "evil.example");
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_MALFORMED);
	/* Names no server takes as a host name. */
	E.n = 0;
	ext_sni(&E, "pypi.org/.evil");
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_MALFORMED);
	E.n = 0;
	ext_sni(&E, "pypi..org");
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_MALFORMED);
	/* ECH (and its drafts) with an allowed outer name. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	ext_raw(&E, 0xfe0d, 200);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert_str_eq(o.name, "pypi.org");
	/* An extension longer than what encloses it. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	hello(&H, &E, 16384);
	H.b[H.n - 1 - strlen("pypi.org")]++;	/* the name's length */
	ck_assert_int_eq(tls(&H, &o), PEEK_MALFORMED);
}
END_TEST

/* An outer encrypted_client_hello: type 0, suite, config id, enc of
 * enclen bytes, payload of plen bytes. */
static void
ext_ech(struct hb *e, uint8_t type, unsigned kdf, unsigned aead, uint8_t id,
    size_t enclen, size_t plen)
{
	put16(e, 0xfe0d);
	put16(e, (unsigned)(1 + 4 + 1 + 2 + enclen + 2 + plen));
	put(e, &type, 1);
	put16(e, kdf);
	put16(e, aead);
	put(e, &id, 1);
	put16(e, (unsigned)enclen);
	for (size_t i = 0; i < enclen; i++)
		put(e, "\x33", 1);
	put16(e, (unsigned)plen);
	for (size_t i = 0; i < plen; i++)
		put(e, "\x44", 1);
}

START_TEST(tls_ech_outer)
{
	struct peek_out o;

	/* The outer extension's config id and suite, beside the outer
	 * server_name, whichever comes first. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	ext_ech(&E, 0, 1, 3, 0x9c, 32, 144);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert_str_eq(o.name, "pypi.org");
	ck_assert(o.ech_outer);
	ck_assert_uint_eq(o.ech_config_id, 0x9c);
	ck_assert_uint_eq(o.ech_kdf, 1);
	ck_assert_uint_eq(o.ech_aead, 3);
	E.n = 0;
	ext_ech(&E, 0, 2, 1, 7, 0, 1);
	ext_sni(&E, "public.example.net");
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert_str_eq(o.name, "public.example.net");
	ck_assert(o.ech_outer);
	ck_assert_uint_eq(o.ech_config_id, 7);
	/* Without a server_name: no name, still read. */
	E.n = 0;
	ext_ech(&E, 0, 1, 1, 1, 32, 10);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert_str_eq(o.name, "");
	ck_assert(o.ech_outer);
	/* Split over records of 9 bytes: the same fields. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	ext_ech(&E, 0, 1, 1, 0x42, 32, 200);
	hello(&H, &E, 9);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert(o.ech_outer);
	ck_assert_uint_eq(o.ech_config_id, 0x42);
}
END_TEST

/* What is not a whole outer extension says nothing of a config: the gate
 * refuses it as a real ECH. */
START_TEST(tls_ech_not_outer)
{
	struct peek_out o;

	/* Type inner in the clear. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	ext_ech(&E, 1, 1, 1, 5, 32, 16);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert(!o.ech_outer);
	/* An empty payload. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	ext_ech(&E, 0, 1, 1, 5, 32, 0);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert(!o.ech_outer);
	/* Too short for its fields; bytes after the payload. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	ext_raw(&E, 0xfe0d, 5);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert(!o.ech_outer);
	E.n = 0;
	ext_sni(&E, "pypi.org");
	put16(&E, 0xfe0d);
	put16(&E, 1 + 4 + 1 + 2 + 2 + 1 + 1);
	put(&E, "\x00\x00\x01\x00\x01\x05\x00\x00\x00\x01\x44\x99", 12);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert(!o.ech_outer);
	/* An enc length past the extension. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	put16(&E, 0xfe0d);
	put16(&E, 10);
	put(&E, "\x00\x00\x01\x00\x01\x05\x01\x00\x00\x01", 10);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert(!o.ech_outer);
	/* A whole outer extension beside a predecessor (ESNI). */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	ext_ech(&E, 0, 1, 1, 5, 32, 16);
	ext_raw(&E, 0xffce, 40);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert(!o.ech_outer);
	/* A draft's code point alone. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	ext_raw(&E, 0xfe0a, 40);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_ECH);
	ck_assert(!o.ech_outer);
	/* Two encrypted_client_hello extensions: malformed. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	ext_ech(&E, 0, 1, 1, 5, 32, 16);
	ext_ech(&E, 0, 1, 1, 6, 32, 16);
	hello(&H, &E, 16384);
	ck_assert_int_eq(tls(&H, &o), PEEK_MALFORMED);
}
END_TEST

START_TEST(tls_bound)
{
	struct peek_out o;

	/* A ClientHello over the gate's bound is refused, not waited for. */
	E.n = 0;
	ext_sni(&E, "pypi.org");
	ext_raw(&E, 21, PEEK_MAX);	/* padding */
	hello(&H, &E, 16384);
	ck_assert_int_eq(peek_tls(H.b, 9, &o), PEEK_MALFORMED);
	ck_assert_int_eq(tls(&H, &o), PEEK_MALFORMED);
}
END_TEST

/* ---------------------------------------------------------------- HTTP */

static const struct {
	const char		*req;
	enum peek_result	 r;
	const char		*name;
} hq[] = {
	{ "GET / HTTP/1.1\r\nHost: pypi.org\r\n\r\n", PEEK_NAME, "pypi.org" },
	{ "GET /x HTTP/1.1\r\nUser-Agent: a\r\nhOsT:  PyPI.org:8080 \r\n\r\n",
	    PEEK_NAME, "pypi.org" },
	{ "GET / HTTP/1.1\r\nHost: pypi.org.\r\n\r\n", PEEK_NAME, "pypi.org" },
	{ "GET http://pypi.org/simple HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
	    PEEK_NAME, "pypi.org" },
	{ "GET / HTTP/1.0\r\n\r\n", PEEK_NO_NAME, NULL },
	{ "GET / HTTP/1.1\r\nHost: pypi.org\r\n", PEEK_MORE, NULL },
	{ "GE", PEEK_MORE, NULL },
	{ "", PEEK_MORE, NULL },
	/* refused */
	{ "\x16\x03\x01", PEEK_NOT_HTTP, NULL },
	{ "get / HTTP/1.1\r\n\r\n", PEEK_NOT_HTTP, NULL },
	{ "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", PEEK_NOT_HTTP, NULL },
	{ "GET / HTTP/1.1\r\n\r\n", PEEK_MALFORMED, NULL },
	{ "GET / HTTP/1.1\r\nHost: pypi.org\r\nHost: evil.example\r\n\r\n",
	    PEEK_MALFORMED, NULL },
	{ "GET http://evil.example/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
	    PEEK_MALFORMED, NULL },
	{ "GET http://pypi.org@evil.example/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
	    PEEK_MALFORMED, NULL },
	{ "GET / HTTP/1.1\r\nX: a\r\n Host: evil.example\r\nHost: pypi.org\r\n\r\n",
	    PEEK_MALFORMED, NULL },
	{ "GET / HTTP/1.1\r\nHost : evil.example\r\nHost: pypi.org\r\n\r\n",
	    PEEK_MALFORMED, NULL },
	{ "GET / HTTP/1.1\nHost: evil.example\r\nHost: pypi.org\r\n\r\n",
	    PEEK_MALFORMED, NULL },
	{ "CONNECT evil.example:443 HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
	    PEEK_MALFORMED, NULL },
	{ "GET / HTTP/1.1\r\nHost: pypi.org:99999\r\n\r\n", PEEK_MALFORMED,
	    NULL },
	{ "GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n", PEEK_MALFORMED, NULL },
};

START_TEST(http_table)
{
	struct peek_out o;
	enum peek_result r;

	r = peek_http((const uint8_t *)hq[_i].req, strlen(hq[_i].req), &o);
	ck_assert_msg(r == hq[_i].r, "row %d: %s, want %s (%s)", _i,
	    peek_result_name(r), peek_result_name(hq[_i].r),
	    o.why != NULL ? o.why : "");
	if (hq[_i].name != NULL)
		ck_assert_str_eq(o.name, hq[_i].name);
}
END_TEST

START_TEST(http_bound)
{
	static uint8_t big[PEEK_MAX + 64];
	struct peek_out o;

	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	ck_assert_int_eq(peek_http(big, sizeof(big), &o), PEEK_MALFORMED);
	ck_assert_int_eq(peek_http(big, 100, &o), PEEK_MORE);
	ck_assert_int_eq(peek_http(NULL, 0, &o), PEEK_MORE);
	ck_assert_int_eq(peek_tls(NULL, 0, &o), PEEK_MORE);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("peek");
	TCase	*tc = tcase_create("Core");
	SRunner	*sr;
	int	 nf;

	tcase_add_test(tc, tls_name);
	tcase_add_test(tc, tls_records);
	tcase_add_test(tc, tls_refusals);
	tcase_add_test(tc, tls_ech_outer);
	tcase_add_test(tc, tls_ech_not_outer);
	tcase_add_test(tc, tls_bound);
	tcase_add_loop_test(tc, http_table, 0, sizeof(hq) / sizeof(hq[0]));
	tcase_add_test(tc, http_bound);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
