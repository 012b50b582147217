/*
 * check_flowrec.c: the tables net.flow records keep between a flow's
 * events (gateway/flowrec_tab.c), where a sandbox's bounds are: its open
 * flows stop at FLOWREC_FLOWS and the next is refused and counted while
 * another sandbox's still go in; its learned names stop at
 * FLOWREC_LEARNED, what expired is dropped to make room, and a name is
 * found only for its own sandbox, protocol, port range and life, the
 * newest answer's name winning; the due list stays in due order.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/flowrec_int.h"

static struct flowrec	*fr;
static struct fr_sbx	 sa, sb;

static void
setup(void)
{
	fr = calloc(1, sizeof(*fr));
	ck_assert_ptr_nonnull(fr);
	fr->seed = 12345;
	memset(&sa, 0, sizeof(sa));
	memset(&sb, 0, sizeof(sb));
	inet_pton(AF_INET, "10.231.0.2", sa.addr);
	inet_pton(AF_INET, "10.231.0.3", sb.addr);
}

static void
teardown(void)
{
	frt_sbx_clear(fr, &sa);
	frt_sbx_clear(fr, &sb);
	ck_assert_uint_eq(fr->nflows, 0);
	ck_assert_uint_eq(fr->nlearned, 0);
	free(fr);
}

static void
key(uint8_t k[FR_KEYLEN], const struct fr_sbx *s, uint32_t n)
{
	struct ct_flow f;

	memset(&f, 0, sizeof(f));
	f.family = AF_INET;
	f.proto = IPPROTO_TCP;
	memcpy(f.src, s->addr, 4);
	inet_pton(AF_INET, "192.0.2.10", f.dst);
	f.sport = (uint16_t)(1024 + n % 60000);
	f.dport = (uint16_t)(1 + n / 60000);
	frt_key(k, &f);
}

START_TEST(flows_bounded_per_sandbox)
{
	uint8_t k[FR_KEYLEN];
	struct fr_flow *f;
	uint32_t i;

	for (i = 0; i < FLOWREC_FLOWS; i++) {
		key(k, &sa, i);
		ck_assert_ptr_nonnull(frt_flow_add(fr, &sa, k, 1000 + i));
	}
	ck_assert_uint_eq(sa.nflows, FLOWREC_FLOWS);
	key(k, &sa, FLOWREC_FLOWS);
	ck_assert_ptr_null(frt_flow_add(fr, &sa, k, 9999));
	ck_assert_uint_eq(sa.untracked, 1);
	/* An entry it has is found again, not refused. */
	key(k, &sa, 7);
	ck_assert_ptr_eq(frt_flow_add(fr, &sa, k, 1), frt_flow(fr, k));
	ck_assert_uint_eq(sa.untracked, 1);
	/* The other sandbox is not held to the first one's count. */
	key(k, &sb, 0);
	ck_assert_ptr_nonnull(f = frt_flow_add(fr, &sb, k, 5));
	ck_assert_uint_eq(sb.untracked, 0);
	frt_flow_set_name(f, "pkg.example.com", FR_SRC_GATE);
	ck_assert_str_eq(frt_flow(fr, k)->name, "pkg.example.com");
	ck_assert_uint_eq(frt_flow(fr, k)->src, FR_SRC_GATE);
	/* One ends: there is room for the refused one. */
	key(k, &sa, 3);
	frt_flow_del(fr, frt_flow(fr, k));
	ck_assert_ptr_null(frt_flow(fr, k));
	key(k, &sa, FLOWREC_FLOWS);
	ck_assert_ptr_nonnull(frt_flow_add(fr, &sa, k, 9999));
	ck_assert_uint_eq(fr->nflows, FLOWREC_FLOWS + 1);
}
END_TEST

START_TEST(due_order)
{
	uint8_t k[FR_KEYLEN];
	struct fr_flow *f[3], *p;
	uint64_t last = 0;
	uint32_t i, n = 0;

	for (i = 0; i < 3; i++) {
		key(k, &sa, i);
		f[i] = frt_flow_add(fr, &sa, k, 100 + i);
	}
	/* The first is recorded and due an interval later: last. */
	frt_flow_due(f[0], 200);
	ck_assert_ptr_eq(sa.due, f[1]);
	ck_assert_ptr_eq(sa.due_tail, f[0]);
	for (p = sa.due; p != NULL; p = p->next, n++) {
		ck_assert_uint_ge(p->due_ms, last);
		last = p->due_ms;
	}
	ck_assert_uint_eq(n, 3);
	frt_flow_del(fr, f[1]);
	ck_assert_ptr_eq(sa.due, f[2]);
	ck_assert_ptr_null(f[2]->prev);
}
END_TEST

START_TEST(learned_names)
{
	uint8_t d[4], d2[4];

	inet_pton(AF_INET, "192.0.2.10", d);
	inet_pton(AF_INET, "192.0.2.11", d2);
	frt_learn_put(fr, &sa, d, IPPROTO_TCP, 9000, 9010, 5000,
	    "pkg.example.com", 0);
	frt_learn_put(fr, &sa, d, IPPROTO_UDP, 53, 53, 5000, "udp.example.com",
	    0);
	ck_assert_str_eq(frt_learn_name(fr, &sa, d, IPPROTO_TCP, 9005, 10),
	    "pkg.example.com");
	ck_assert_str_eq(frt_learn_name(fr, &sa, d, IPPROTO_UDP, 53, 10),
	    "udp.example.com");
	/* Not another port, protocol, address or sandbox, nor expired. */
	ck_assert_ptr_null(frt_learn_name(fr, &sa, d, IPPROTO_TCP, 9011, 10));
	ck_assert_ptr_null(frt_learn_name(fr, &sa, d, IPPROTO_UDP, 9005, 10));
	ck_assert_ptr_null(frt_learn_name(fr, &sa, d2, IPPROTO_TCP, 9005, 10));
	ck_assert_ptr_null(frt_learn_name(fr, &sb, d, IPPROTO_TCP, 9005, 10));
	ck_assert_ptr_null(frt_learn_name(fr, &sa, d, IPPROTO_TCP, 9005,
	    5000));
	/* The newest answer for the same element names it, and renews it. */
	frt_learn_put(fr, &sa, d, IPPROTO_TCP, 9000, 9010, 9000,
	    "b.wild.example.com", 4000);
	ck_assert_str_eq(frt_learn_name(fr, &sa, d, IPPROTO_TCP, 9005, 6000),
	    "b.wild.example.com");
	ck_assert_uint_eq(sa.nlearned, 2);
	/* No name, no entry. */
	frt_learn_put(fr, &sa, d2, IPPROTO_TCP, 1, 1, 9000, "", 0);
	frt_learn_put(fr, &sa, d2, IPPROTO_TCP, 1, 1, 9000, NULL, 0);
	ck_assert_uint_eq(sa.nlearned, 2);
}
END_TEST

START_TEST(learned_bounded_per_sandbox)
{
	uint8_t d[4];
	uint32_t i;

	for (i = 0; i < FLOWREC_LEARNED; i++) {
		d[0] = 192;
		d[1] = 0;
		d[2] = (uint8_t)(i >> 8);
		d[3] = (uint8_t)i;
		/* Half of them short-lived. */
		frt_learn_put(fr, &sa, d, IPPROTO_TCP, 443, 443,
		    i % 2 ? 100000 : 500, "n.example.com", 0);
	}
	ck_assert_uint_eq(sa.nlearned, FLOWREC_LEARNED);
	d[2] = 0xff;
	d[3] = 0xff;
	/* Full, and nothing expired yet: refused and counted. */
	frt_learn_put(fr, &sa, d, IPPROTO_TCP, 443, 443, 100000, "late", 400);
	ck_assert_uint_eq(sa.unlearned, 1);
	ck_assert_uint_eq(sa.nlearned, FLOWREC_LEARNED);
	/* The other sandbox is not held to it. */
	frt_learn_put(fr, &sb, d, IPPROTO_TCP, 443, 443, 100000, "b", 400);
	ck_assert_uint_eq(sb.nlearned, 1);
	/* Within a second of the last look (at 0): not looked through,
	 * though half have expired by now. */
	frt_learn_put(fr, &sa, d, IPPROTO_TCP, 443, 443, 100000, "late", 999);
	ck_assert_uint_eq(sa.unlearned, 2);
	/* Later, the expired half makes room. */
	frt_learn_put(fr, &sa, d, IPPROTO_TCP, 443, 443, 100000, "late", 1500);
	ck_assert_uint_eq(sa.unlearned, 2);
	ck_assert_uint_eq(sa.nlearned, FLOWREC_LEARNED / 2 + 1);
	ck_assert_str_eq(frt_learn_name(fr, &sa, d, IPPROTO_TCP, 443, 1500),
	    "late");
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("flowrec");
	TCase	*tc = tcase_create("tables");
	SRunner	*sr;
	int	 nf;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, flows_bounded_per_sandbox);
	tcase_add_test(tc, due_order);
	tcase_add_test(tc, learned_names);
	tcase_add_test(tc, learned_bounded_per_sandbox);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
