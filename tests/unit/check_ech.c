/*
 * check_ech: the reader of the ECH configs an HTTPS record publishes
 * (gateway/dns/ech.c). The name gate refuses a ClientHello that uses one
 * of them and passes GREASE, so what this reader misses is a real ECH
 * passed as GREASE: every row here is a record built byte by byte, read
 * whole or refused whole.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "gateway/dns/ech.h"

struct buf {
	uint8_t	b[4096];
	size_t	n;
};

static void
put(struct buf *b, const void *p, size_t n)
{
	ck_assert_uint_le(b->n + n, sizeof(b->b));
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void
put8(struct buf *b, unsigned v)
{
	uint8_t c = (uint8_t)v;

	put(b, &c, 1);
}

static void
put16(struct buf *b, unsigned v)
{
	put8(b, v >> 8);
	put8(b, v);
}

/* One ECHConfig of version ver: id, X25519, a 32-byte key, nsuites
 * suites (kdf 1, aead 1..nsuites), public_name pn. */
static void
config(struct buf *b, unsigned ver, uint8_t id, unsigned nsuites,
    const char *pn)
{
	struct buf c = { .n = 0 };
	unsigned i;

	put8(&c, id);
	put16(&c, 0x0020);
	put16(&c, 32);
	for (i = 0; i < 32; i++)
		put8(&c, 0x11);
	put16(&c, 4 * nsuites);
	for (i = 0; i < nsuites; i++) {
		put16(&c, 1);
		put16(&c, i + 1);
	}
	put8(&c, 0);			/* maximum_name_length */
	put8(&c, (unsigned)strlen(pn));
	put(&c, pn, strlen(pn));
	put16(&c, 0);			/* extensions */
	put16(b, ver);
	put16(b, (unsigned)c.n);
	put(b, c.b, c.n);
}

/* An ECHConfigList around the configs in c. */
static void
list(struct buf *out, const struct buf *c)
{
	out->n = 0;
	put16(out, (unsigned)c->n);
	put(out, c->b, c->n);
}

START_TEST(one_config)
{
	struct buf c = { .n = 0 }, l;
	struct ech_set s;

	config(&c, ECH_VERSION, 0x2a, 1, "public.example.com");
	list(&l, &c);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(ech_config_list(l.b, l.n, &s), 0);
	ck_assert_uint_eq(s.n, 1);
	ck_assert_uint_eq(s.c[0].config_id, 0x2a);
	ck_assert_uint_eq(s.c[0].kem, 0x20);
	ck_assert_uint_eq(s.c[0].nsuites, 1);
	ck_assert_str_eq(s.c[0].public_name, "public.example.com");
	ck_assert(ech_match(&s, 0x2a, 1, 1));
	/* Another id, or a suite it does not offer: not this config. */
	ck_assert(!ech_match(&s, 0x2b, 1, 1));
	ck_assert(!ech_match(&s, 0x2a, 1, 2));
	ck_assert(!ech_match(&s, 0x2a, 2, 1));
	/* Every prefix and every longer length is refused. */
	for (size_t n = 0; n < l.n; n++) {
		memset(&s, 0, sizeof(s));
		ck_assert_int_eq(ech_config_list(l.b, n, &s), -1);
	}
	l.b[l.n++] = 0;
	ck_assert_int_eq(ech_config_list(l.b, l.n, &s), -1);
}
END_TEST

START_TEST(versions_and_bounds)
{
	struct buf c = { .n = 0 }, l;
	struct ech_set s;
	unsigned i;

	/* Another version is skipped by its length; the next one read. */
	config(&c, 0xfe0a, 9, 1, "old.example.com");
	config(&c, ECH_VERSION, 3, 3, "new.example.com");
	list(&l, &c);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(ech_config_list(l.b, l.n, &s), 0);
	ck_assert_uint_eq(s.n, 1);
	ck_assert_uint_eq(s.c[0].config_id, 3);
	ck_assert(ech_match(&s, 3, 1, 3));
	ck_assert(!ech_match(&s, 9, 1, 1));
	/* More suites than kept: the id alone decides. */
	c.n = 0;
	config(&c, ECH_VERSION, 4, ECH_SUITES_MAX + 2, "p.example.com");
	list(&l, &c);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(ech_config_list(l.b, l.n, &s), 0);
	ck_assert(s.c[0].more_suites);
	ck_assert(ech_match(&s, 4, 7, 7));
	/* More configs than kept: said, so that the gate can doubt. */
	c.n = 0;
	for (i = 0; i < ECH_CONFIGS_MAX + 1; i++)
		config(&c, ECH_VERSION, (uint8_t)i, 1, "p.example.com");
	list(&l, &c);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(ech_config_list(l.b, l.n, &s), 0);
	ck_assert_uint_eq(s.n, ECH_CONFIGS_MAX);
	ck_assert(s.more);
}
END_TEST

START_TEST(malformed_configs)
{
	struct buf c, l;
	struct ech_set s;

	/* An empty list. */
	l.n = 0;
	put16(&l, 0);
	ck_assert_int_eq(ech_config_list(l.b, l.n, &s), -1);
	/* An empty public_name. */
	c.n = 0;
	config(&c, ECH_VERSION, 1, 1, "");
	list(&l, &c);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(ech_config_list(l.b, l.n, &s), -1);
	/* No suites. */
	c.n = 0;
	config(&c, ECH_VERSION, 1, 0, "p.example.com");
	list(&l, &c);
	ck_assert_int_eq(ech_config_list(l.b, l.n, &s), -1);
	/* A public_name with a NUL in it. */
	c.n = 0;
	config(&c, ECH_VERSION, 1, 1, "p.example.com");
	c.b[c.n - 2 - 5] = 0;
	list(&l, &c);
	ck_assert_int_eq(ech_config_list(l.b, l.n, &s), -1);
	/* A config's length one short of its contents. */
	c.n = 0;
	config(&c, ECH_VERSION, 1, 1, "p.example.com");
	c.b[3]--;
	list(&l, &c);
	ck_assert_int_eq(ech_config_list(l.b, l.n, &s), -1);
	ck_assert_int_eq(ech_config_list(NULL, 0, &s), -1);
}
END_TEST

/* HTTPS RDATA: priority, target ".", alpn=h2, ipv4hint, then ech. */
static void
rdata(struct buf *r, const struct buf *l)
{
	r->n = 0;
	put16(r, 1);
	put8(r, 0);
	put16(r, 1);
	put16(r, 3);
	put(r, "\x02h2", 3);
	put16(r, 4);
	put16(r, 4);
	put(r, "\xc0\x00\x02\x0a", 4);
	if (l != NULL) {
		put16(r, ECH_PARAM_KEY);
		put16(r, (unsigned)l->n);
		put(r, l->b, l->n);
	}
}

START_TEST(svcb_rdata)
{
	struct buf c = { .n = 0 }, l, r;
	struct ech_set s;

	config(&c, ECH_VERSION, 0x2a, 1, "public.example.com");
	list(&l, &c);
	rdata(&r, &l);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(ech_svcb_rdata(r.b, r.n, &s), 0);
	ck_assert_uint_eq(s.n, 1);
	ck_assert(ech_match(&s, 0x2a, 1, 1));
	/* Without ech: nothing published, not an error. */
	rdata(&r, NULL);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(ech_svcb_rdata(r.b, r.n, &s), 0);
	ck_assert_uint_eq(s.n, 0);
	/* A target name with labels. */
	r.n = 0;
	put16(&r, 1);
	put(&r, "\x03" "cdn\x07" "example\x03" "net\x00", 17);
	put16(&r, ECH_PARAM_KEY);
	put16(&r, (unsigned)l.n);
	put(&r, l.b, l.n);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(ech_svcb_rdata(r.b, r.n, &s), 0);
	ck_assert_uint_eq(s.n, 1);
	/* AliasMode: a target only. */
	r.n = 0;
	put16(&r, 0);
	put(&r, "\x03" "cdn\x00", 5);
	ck_assert_int_eq(ech_svcb_rdata(r.b, r.n, &s), 0);
	put16(&r, 1);
	ck_assert_int_eq(ech_svcb_rdata(r.b, r.n, &s), -1);
	/* Every prefix of a ServiceMode record with ech is refused but the
	 * ones ending between params. */
	rdata(&r, &l);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(ech_svcb_rdata(r.b, r.n - 1, &s), -1);
	ck_assert_int_eq(ech_svcb_rdata(r.b, 1, &s), -1);
	/* Keys out of order, a repeated key, a compression pointer. */
	r.n = 0;
	put16(&r, 1);
	put8(&r, 0);
	put16(&r, 4);
	put16(&r, 4);
	put(&r, "\xc0\x00\x02\x0a", 4);
	put16(&r, 1);
	put16(&r, 3);
	put(&r, "\x02h2", 3);
	ck_assert_int_eq(ech_svcb_rdata(r.b, r.n, &s), -1);
	r.n = 0;
	put16(&r, 1);
	put8(&r, 0);
	put16(&r, ECH_PARAM_KEY);
	put16(&r, (unsigned)l.n);
	put(&r, l.b, l.n);
	put16(&r, ECH_PARAM_KEY);
	put16(&r, (unsigned)l.n);
	put(&r, l.b, l.n);
	ck_assert_int_eq(ech_svcb_rdata(r.b, r.n, &s), -1);
	r.n = 0;
	put16(&r, 1);
	put(&r, "\xc0\x0c", 2);
	ck_assert_int_eq(ech_svcb_rdata(r.b, r.n, &s), -1);
	/* An ech param whose list is malformed makes the record so. */
	l.b[0]++;
	rdata(&r, &l);
	ck_assert_int_eq(ech_svcb_rdata(r.b, r.n, &s), -1);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("ech");
	TCase	*tc = tcase_create("core");
	SRunner	*sr;
	int	 nf;

	tcase_add_test(tc, one_config);
	tcase_add_test(tc, versions_and_bounds);
	tcase_add_test(tc, malformed_configs);
	tcase_add_test(tc, svcb_rdata);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
