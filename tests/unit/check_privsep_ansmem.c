/*
 * check_privsep_ansmem: the parent's copy of the name gate's answers,
 * which a DNS process started again gets back. What it hands over must be
 * exactly what the gate was told and has not expired (a name that passed
 * too long would be a name passing that should not), bounded per
 * sandbox, gone with its sandbox, and in batches the protocol takes.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/privsep/ansmem.h"
#include "gateway/privsep/msg.h"
#include "tests/unit/run_suite.h"

#define MAXSEEN	8192

/* What a replay handed over, batch by batch. */
struct seen {
	struct msg_answer	a[MAXSEEN];
	size_t			n;
	size_t			batches;
	size_t			sizes[16];
	int			fail_at;	/* batch to refuse, 0: none */
};

static int
collect(void *ctx, const struct msg_answers *h, size_t len)
{
	struct seen *s = ctx;
	const struct msg_answer *a = (const struct msg_answer *)(h + 1);

	ck_assert(msg_check(MSG_GATE_ANSWERS, len, MSG_TO_CHILD) == 0);
	ck_assert(msg_answers_ok(h, len));
	if (s->batches < 16)
		s->sizes[s->batches] = h->n;
	if ((int)++s->batches == s->fail_at)
		return -1;
	ck_assert(s->n + h->n <= MAXSEEN);
	memcpy(&s->a[s->n], a, h->n * sizeof(*a));
	s->n += h->n;
	return 0;
}

static struct seen *
replay(struct ansmem *m, uint64_t now, long *rc)
{
	struct seen *s = calloc(1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	*rc = ansmem_replay(m, now, collect, s);
	return s;
}

static struct msg_answer
ans(const char *ifname, const char *name, uint8_t last, uint64_t exp)
{
	struct msg_answer a;

	memset(&a, 0, sizeof(a));
	snprintf(a.ifname, sizeof(a.ifname), "%s", ifname);
	snprintf(a.name, sizeof(a.name), "%s", name);
	a.family = AF_INET;
	a.addr[0] = 192;
	a.addr[2] = 2;
	a.addr[3] = last;
	a.proto = IPPROTO_TCP;
	a.port_lo = a.port_hi = 443;
	a.expires_ms = exp;
	return a;
}

static const struct msg_answer *
find(const struct seen *s, const char *ifname, const char *name,
    uint8_t last)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->a[i].ifname, ifname) == 0 &&
		    strcmp(s->a[i].name, name) == 0 && s->a[i].addr[3] == last)
			return &s->a[i];
	return NULL;
}

START_TEST(test_replay_is_what_was_put)
{
	struct ansmem *m = ansmem_new(16);
	struct msg_answer a = ans("sl-1", "pkg.example.com", 10, 5000);
	const struct msg_answer *r;
	struct seen *s;
	long rc;

	ck_assert_ptr_nonnull(m);
	a.port_lo = 8000;
	a.port_hi = 8443;
	ck_assert_int_eq(ansmem_put(m, &a, 1000), 0);
	s = replay(m, 1000, &rc);
	ck_assert_int_eq(rc, 1);
	ck_assert_uint_eq(s->n, 1);
	r = &s->a[0];
	/* Byte for byte: the gate gets back what it was told. */
	ck_assert(memcmp(r, &a, sizeof(a)) == 0);
	free(s);
	ansmem_free(m);
}
END_TEST

START_TEST(test_refresh_takes_the_new_expiry)
{
	struct ansmem *m = ansmem_new(16);
	struct msg_answer a = ans("sl-1", "pkg.example.com", 10, 5000);
	struct seen *s;
	long rc;

	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	a.expires_ms = 9000;
	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	ck_assert_uint_eq(ansmem_count(m), 1);
	s = replay(m, 0, &rc);
	ck_assert_uint_eq(s->a[0].expires_ms, 9000);
	free(s);
	/* A shorter answer later shortens it, as it does in the gate. */
	a.expires_ms = 3000;
	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	s = replay(m, 0, &rc);
	ck_assert_uint_eq(s->n, 1);
	ck_assert_uint_eq(s->a[0].expires_ms, 3000);
	free(s);
	ansmem_free(m);
}
END_TEST

START_TEST(test_names_of_one_address_expire_apart)
{
	struct ansmem *m = ansmem_new(16);
	struct msg_answer a = ans("sl-1", "short.example.com", 10, 2000);
	struct msg_answer b = ans("sl-1", "long.example.com", 10, 300000);
	struct seen *s;
	long rc;

	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	ck_assert_int_eq(ansmem_put(m, &b, 0), 0);
	ck_assert_uint_eq(ansmem_count(m), 2);
	s = replay(m, 1999, &rc);
	ck_assert_int_eq(rc, 2);
	free(s);
	/* The address lives on for the long name; the short name does
	 * not come back with it. */
	s = replay(m, 2000, &rc);
	ck_assert_int_eq(rc, 1);
	ck_assert_ptr_nonnull(find(s, "sl-1", "long.example.com", 10));
	ck_assert_ptr_null(find(s, "sl-1", "short.example.com", 10));
	/* And what expired is dropped, not only skipped. */
	ck_assert_uint_eq(ansmem_count(m), 1);
	free(s);
	ansmem_free(m);
}
END_TEST

START_TEST(test_key_is_the_whole_answer)
{
	struct ansmem *m = ansmem_new(64);
	struct msg_answer a = ans("sl-1", "pkg.example.com", 10, 5000), b;

	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	b = a;
	b.proto = IPPROTO_UDP;
	ck_assert_int_eq(ansmem_put(m, &b, 0), 0);
	b = a;
	b.port_hi = 444;
	ck_assert_int_eq(ansmem_put(m, &b, 0), 0);
	b = a;
	b.addr[3] = 11;
	ck_assert_int_eq(ansmem_put(m, &b, 0), 0);
	b = a;
	b.family = AF_INET6;
	ck_assert_int_eq(ansmem_put(m, &b, 0), 0);
	b = a;
	snprintf(b.ifname, sizeof(b.ifname), "sl-2");
	ck_assert_int_eq(ansmem_put(m, &b, 0), 0);
	/* Names are bytes to the parent: it compares, never folds. */
	b = a;
	snprintf(b.name, sizeof(b.name), "PKG.example.com");
	ck_assert_int_eq(ansmem_put(m, &b, 0), 0);
	ck_assert_uint_eq(ansmem_count(m), 7);
	ck_assert_uint_eq(ansmem_count_sbx(m, "sl-1"), 6);
	ck_assert_uint_eq(ansmem_count_sbx(m, "sl-2"), 1);
	ansmem_free(m);
}
END_TEST

START_TEST(test_forget_a_sandbox)
{
	struct ansmem *m = ansmem_new(16);
	struct msg_answer a = ans("sl-1", "pkg.example.com", 10, 5000);
	struct msg_answer b = ans("sl-2", "pkg.example.com", 10, 5000);
	struct seen *s;
	long rc;

	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	ck_assert_int_eq(ansmem_put(m, &b, 0), 0);
	ansmem_forget(m, "sl-1");
	ansmem_forget(m, "sl-9");	/* none: nothing happens */
	ansmem_forget(NULL, "sl-1");
	ck_assert_uint_eq(ansmem_count(m), 1);
	ck_assert_uint_eq(ansmem_count_sbx(m, "sl-1"), 0);
	s = replay(m, 0, &rc);
	ck_assert_int_eq(rc, 1);
	ck_assert_ptr_nonnull(find(s, "sl-2", "pkg.example.com", 10));
	free(s);
	/* The next sandbox on the link starts with nothing of the last. */
	a.addr[3] = 20;
	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	s = replay(m, 0, &rc);
	ck_assert_int_eq(rc, 2);
	ck_assert_ptr_null(find(s, "sl-1", "pkg.example.com", 10));
	free(s);
	ansmem_free(m);
}
END_TEST

START_TEST(test_bound_per_sandbox)
{
	struct ansmem *m = ansmem_new(3);
	struct msg_answer a;
	struct seen *s;
	char n[32];
	long rc;
	int i;

	for (i = 0; i < 3; i++) {
		snprintf(n, sizeof(n), "n%d.example.com", i);
		a = ans("sl-1", n, 10, 10000);
		ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	}
	a = ans("sl-2", "other.example.com", 10, 10000);
	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	/* n0 refreshed: n1 is the one learned longest ago. */
	a = ans("sl-1", "n0.example.com", 10, 10000);
	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	a = ans("sl-1", "n3.example.com", 10, 10000);
	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	ck_assert_uint_eq(ansmem_count_sbx(m, "sl-1"), 3);
	ck_assert_uint_eq(ansmem_count_sbx(m, "sl-2"), 1);
	s = replay(m, 0, &rc);
	ck_assert_ptr_null(find(s, "sl-1", "n1.example.com", 10));
	ck_assert_ptr_nonnull(find(s, "sl-1", "n0.example.com", 10));
	ck_assert_ptr_nonnull(find(s, "sl-1", "n3.example.com", 10));
	ck_assert_ptr_nonnull(find(s, "sl-2", "other.example.com", 10));
	free(s);
	/* What expired makes room before anything that lives. */
	a = ans("sl-1", "n2.example.com", 10, 100);
	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	a = ans("sl-1", "n4.example.com", 10, 10000);
	ck_assert_int_eq(ansmem_put(m, &a, 200), 0);
	s = replay(m, 200, &rc);
	ck_assert_int_eq(rc, 4);
	ck_assert_ptr_null(find(s, "sl-1", "n2.example.com", 10));
	ck_assert_ptr_nonnull(find(s, "sl-1", "n0.example.com", 10));
	ck_assert_ptr_nonnull(find(s, "sl-1", "n3.example.com", 10));
	ck_assert_ptr_nonnull(find(s, "sl-1", "n4.example.com", 10));
	free(s);
	ansmem_free(m);
}
END_TEST

START_TEST(test_refuses_what_the_gate_would_not_take)
{
	struct ansmem *m = ansmem_new(3);
	struct msg_answer a = ans("sl-1", "", 10, 100);

	ck_assert_int_eq(ansmem_put(m, &a, 0), -1);
	ck_assert_int_eq(errno, EINVAL);
	a = ans("", "pkg.example.com", 10, 100);
	ck_assert_int_eq(ansmem_put(m, &a, 0), -1);
	a = ans("sl-1", "pkg.example.com", 10, 100);
	a.family = AF_UNIX;
	ck_assert_int_eq(ansmem_put(m, &a, 0), -1);
	a = ans("sl-1", "pkg.example.com", 10, 100);
	a.proto = IPPROTO_ICMP;
	ck_assert_int_eq(ansmem_put(m, &a, 0), -1);
	a = ans("sl-1", "pkg.example.com", 10, 100);
	a.port_lo = 444;
	ck_assert_int_eq(ansmem_put(m, &a, 0), -1);
	a = ans("sl-1", "pkg.example.com", 10, 100);
	memset(a.name, 'a', sizeof(a.name));
	ck_assert_int_eq(ansmem_put(m, &a, 0), -1);
	ck_assert_int_eq(ansmem_put(NULL, &a, 0), -1);
	ck_assert_uint_eq(ansmem_count(m), 0);
	ck_assert_ptr_null(ansmem_new(0));
	ansmem_free(m);
	ansmem_free(NULL);
}
END_TEST

START_TEST(test_batches_and_many_sandboxes)
{
	struct ansmem *m = ansmem_new(5000);
	struct msg_answer a;
	struct seen *s;
	char n[32], ifn[16];
	long rc;
	int i;

	/* 2500 answers for one sandbox, then 3000 over 30 more: the hash
	 * grows under them and every refresh still finds its answer. */
	for (i = 0; i < 2500; i++) {
		snprintf(n, sizeof(n), "h%d.example.com", i);
		a = ans("sl-1", n, (uint8_t)(i % 250), 10000);
		ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	}
	for (i = 0; i < 3000; i++) {
		snprintf(ifn, sizeof(ifn), "sl-%d", 100 + i % 30);
		snprintf(n, sizeof(n), "m%d.example.com", i);
		a = ans(ifn, n, 1, 10000);
		ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	}
	for (i = 0; i < 2500; i++) {
		snprintf(n, sizeof(n), "h%d.example.com", i);
		a = ans("sl-1", n, (uint8_t)(i % 250), 20000);
		ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	}
	ck_assert_uint_eq(ansmem_count(m), 5500);
	ck_assert_uint_eq(ansmem_count_sbx(m, "sl-1"), 2500);
	s = replay(m, 0, &rc);
	ck_assert_int_eq(rc, 5500);
	ck_assert_uint_eq(s->n, 5500);
	/* Full batches, then the rest: 5 * 1024 + 380. */
	ck_assert_uint_eq(s->batches, 6);
	for (i = 0; i < 5; i++)
		ck_assert_uint_eq(s->sizes[i], MSG_ANSWERS_MAX);
	ck_assert_uint_eq(s->sizes[5], 5500 - 5 * MSG_ANSWERS_MAX);
	ck_assert_uint_eq(find(s, "sl-1", "h7.example.com", 7)->expires_ms,
	    20000);
	free(s);
	/* A batch the sender cannot send ends the replay. */
	s = calloc(1, sizeof(*s));
	s->fail_at = 2;
	ck_assert_int_eq(ansmem_replay(m, 0, collect, s), -1);
	ck_assert_uint_eq(s->batches, 2);
	free(s);
	ansmem_free(m);
}
END_TEST

START_TEST(test_msg_answers_ok)
{
	struct {
		struct msg_answers	h;
		struct msg_answer	a[2];
	} b;
	size_t len = sizeof(b);

	memset(&b, 0, sizeof(b));
	b.h.n = 2;
	b.a[0] = ans("sl-1", "pkg.example.com", 10, 1);
	b.a[1] = ans("sl-1", "web.example.org", 11, 1);
	ck_assert(msg_answers_ok(&b.h, len));
	ck_assert(!msg_answers_ok(&b.h, len - 1));
	b.h.n = 1;
	ck_assert(!msg_answers_ok(&b.h, len));
	ck_assert(msg_answers_ok(&b.h, len - sizeof(b.a[0])));
	b.h.n = 0;
	ck_assert(!msg_answers_ok(&b.h, sizeof(b.h)));
	b.h.n = MSG_ANSWERS_MAX + 1;
	ck_assert(!msg_answers_ok(&b.h, len));
	b.h.n = 2;
	memset(b.a[1].ifname, 'x', sizeof(b.a[1].ifname));
	ck_assert(!msg_answers_ok(&b.h, len));
	ck_assert_int_eq(msg_check(MSG_GATE_ANSWERS, len, MSG_TO_PARENT), -1);
	ck_assert_int_eq(msg_check(MSG_GATE_ANSWERS, sizeof(b.h),
	    MSG_TO_CHILD), -1);
}
END_TEST


static bool
keep_not_sl2(void *ctx, const char *ifname)
{
	(void)ctx;
	return strcmp(ifname, "sl-2") != 0;
}

static void
tmpname(char *buf, size_t size)
{
	snprintf(buf, size, "/tmp/check_ansmem.%ld", (long)getpid());
}

START_TEST(test_save_and_load)
{
	struct ansmem *m = ansmem_new(16), *m2 = ansmem_new(16);
	struct msg_answer a = ans("sl-1", "pkg.example.com", 10, 5000);
	struct msg_answer b = ans("sl-1", "short.example.com", 10, 1500);
	struct msg_answer c = ans("sl-2", "pkg.example.com", 10, 5000);
	const struct msg_answer *r;
	char path[64];
	struct seen *s;
	long rc;

	tmpname(path, sizeof(path));
	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	ck_assert_int_eq(ansmem_put(m, &b, 0), 0);
	ck_assert_int_eq(ansmem_put(m, &c, 0), 0);
	ck_assert_int_eq(ansmem_save(m, path, "boot-1", 1000), 0);
	ck_assert_int_eq(access(path, F_OK), 0);
	/* short ends while no daemon runs; sl-2's sandbox was not
	 * adopted; sl-1's pkg comes back as it was. */
	ck_assert_int_eq(ansmem_load(m2, path, "boot-1", 2000, keep_not_sl2,
	    NULL), 1);
	ck_assert_int_eq(access(path, F_OK), -1);	/* read once */
	s = replay(m2, 2000, &rc);
	ck_assert_int_eq(rc, 1);
	ck_assert_ptr_nonnull(r = find(s, "sl-1", "pkg.example.com", 10));
	ck_assert(memcmp(r, &a, sizeof(a)) == 0);
	free(s);
	ck_assert_int_eq(ansmem_load(m2, path, "boot-1", 2000, keep_not_sl2,
	    NULL), -1);
	ck_assert_int_eq(errno, ENOENT);
	ansmem_free(m2);
	/* Another boot's expiries mean nothing here. */
	m2 = ansmem_new(16);
	ck_assert_int_eq(ansmem_save(m, path, "boot-1", 1000), 0);
	ck_assert_int_eq(ansmem_load(m2, path, "boot-2", 1000, keep_not_sl2,
	    NULL), -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_uint_eq(ansmem_count(m2), 0);
	ck_assert_int_eq(access(path, F_OK), -1);
	ansmem_free(m2);
	ansmem_free(m);
}
END_TEST

START_TEST(test_load_refuses_a_bad_file)
{
	struct ansmem *m = ansmem_new(16), *m2;
	struct msg_answer a = ans("sl-1", "pkg.example.com", 10, 5000);
	struct msg_answer b = ans("sl-1", "web.example.org", 11, 5000);
	char path[64];
	FILE *fp;
	long size;

	tmpname(path, sizeof(path));
	ck_assert_int_eq(ansmem_put(m, &a, 0), 0);
	ck_assert_int_eq(ansmem_put(m, &b, 0), 0);
	/* A record that is none (its name not terminated): nothing of
	 * the file is kept, not even the good record before it. */
	ck_assert_int_eq(ansmem_save(m, path, "boot-1", 0), 0);
	ck_assert_ptr_nonnull(fp = fopen(path, "r+"));
	ck_assert_int_eq(fseek(fp, 0, SEEK_END), 0);
	size = ftell(fp);
	ck_assert_int_eq(fseek(fp, size - (long)sizeof(struct msg_answer) +
	    (long)offsetof(struct msg_answer, name), SEEK_SET), 0);
	for (unsigned i = 0; i < MSG_NAME_MAX; i++)
		fputc('x', fp);
	fclose(fp);
	m2 = ansmem_new(16);
	ck_assert_int_eq(ansmem_load(m2, path, "boot-1", 0, keep_not_sl2,
	    NULL), -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_uint_eq(ansmem_count(m2), 0);
	ansmem_free(m2);
	/* Cut inside a record. */
	ck_assert_int_eq(ansmem_save(m, path, "boot-1", 0), 0);
	ck_assert_int_eq(truncate(path, size - 10), 0);
	m2 = ansmem_new(16);
	ck_assert_int_eq(ansmem_load(m2, path, "boot-1", 0, keep_not_sl2,
	    NULL), -1);
	ck_assert_uint_eq(ansmem_count(m2), 0);
	ansmem_free(m2);
	/* Not such a file at all. */
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	fputs("version: 1\n", fp);
	fclose(fp);
	m2 = ansmem_new(16);
	ck_assert_int_eq(ansmem_load(m2, path, "boot-1", 0, keep_not_sl2,
	    NULL), -1);
	ck_assert_int_eq(errno, EPROTO);
	ansmem_free(m2);
	ansmem_free(m);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("privsep_ansmem");
	TCase *t = tcase_create("ansmem");

	tcase_add_test(t, test_replay_is_what_was_put);
	tcase_add_test(t, test_refresh_takes_the_new_expiry);
	tcase_add_test(t, test_names_of_one_address_expire_apart);
	tcase_add_test(t, test_key_is_the_whole_answer);
	tcase_add_test(t, test_forget_a_sandbox);
	tcase_add_test(t, test_bound_per_sandbox);
	tcase_add_test(t, test_refuses_what_the_gate_would_not_take);
	tcase_add_test(t, test_batches_and_many_sandboxes);
	tcase_add_test(t, test_msg_answers_ok);
	tcase_add_test(t, test_save_and_load);
	tcase_add_test(t, test_load_refuses_a_bad_file);
	suite_add_tcase(s, t);
	return s;
}

int
main(void)
{
	return run_suite(suite());
}
