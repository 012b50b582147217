/*
 * check_sbx_netdeny: the aggregation of denied packets into net.deny events
 * (gateway/netdeny.c). What users rely on: one event per sandbox link,
 * reason, protocol and destination address per second, with the right
 * count, first/last times and the ports tried; packets that differ in any
 * part of the key are never merged, while source, ports and garbage beyond
 * the key (bytes after a NUL, the unused tail of an IPv4 address) never
 * split a key; a sandbox trying every port of a host is one event, one
 * trying many hosts makes at most ND_LINK_KEYS events and one summary a
 * second; a flood cannot grow the table past its cap, and what did not fit
 * is counted; the reason names the rule class and, for always-denied and
 * private destinations, the address class ("always_denied:metadata").
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/netdeny.h"

static void
pkt(struct fw_denied *d, const char *ifname, const char *src,
    const char *dst, uint8_t proto, uint16_t sport, uint16_t dport,
    const char *prefix)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->ifname, sizeof(d->ifname), "%s", ifname);
	snprintf(d->prefix, sizeof(d->prefix), "%s", prefix);
	if (strchr(dst, ':') != NULL) {
		d->family = AF_INET6;
		ck_assert_int_eq(inet_pton(AF_INET6, src, d->src), 1);
		ck_assert_int_eq(inet_pton(AF_INET6, dst, d->dst), 1);
	} else {
		d->family = AF_INET;
		ck_assert_int_eq(inet_pton(AF_INET, src, d->src), 1);
		ck_assert_int_eq(inet_pton(AF_INET, dst, d->dst), 1);
	}
	d->proto = proto;
	d->sport = sport;
	d->dport = dport;
}

struct seen {
	struct nd_entry	e[64];
	size_t		n;
};

static void
seen_cb(const struct nd_entry *e, void *arg)
{
	struct seen *s = arg;

	ck_assert_uint_lt(s->n, 64);
	s->e[s->n++] = *e;
}

START_TEST(test_aggregate_same)
{
	struct nd_table *t = nd_table_new(16);
	struct fw_denied d;
	struct seen s = { .n = 0 };
	int i;

	ck_assert_ptr_nonnull(t);
	pkt(&d, "sl-0", "10.231.0.2", "169.254.169.254", IPPROTO_TCP, 40000,
	    80, "deny:always");
	ck_assert_int_eq(nd_table_add(t, &d, 5000), 1);
	for (i = 1; i < 100; i++)
		ck_assert_int_eq(nd_table_add(t, &d, 5000 + i), 0);
	/* Out of order times still give the true first and last. */
	ck_assert_int_eq(nd_table_add(t, &d, 4990), 0);
	/* The key and its link's summary (empty: not a record). */
	ck_assert_uint_eq(nd_table_size(t), 2);
	ck_assert_uint_eq(nd_table_flush(t, seen_cb, &s), 0);
	ck_assert_uint_eq(s.n, 1);
	ck_assert_uint_eq(s.e[0].count, 101);
	ck_assert_int_eq(s.e[0].first_ms, 4990);
	ck_assert_int_eq(s.e[0].last_ms, 5099);
	ck_assert_str_eq(s.e[0].d.ifname, "sl-0");
	ck_assert_uint_eq(s.e[0].d.dport, 80);
	/* Flushed means empty: the next second starts from nothing. */
	ck_assert_uint_eq(nd_table_size(t), 0);
	s.n = 0;
	nd_table_flush(t, seen_cb, &s);
	ck_assert_uint_eq(s.n, 0);
	ck_assert_int_eq(nd_table_add(t, &d, 6000), 1);
	nd_table_free(t);
	nd_table_free(NULL);
}
END_TEST

/* The sandbox named when the first packet arrived stays with the key until
 * the flush (the sandbox may be gone by then); a new period starts untagged,
 * and tagging a packet that has no key fails. */
START_TEST(test_aggregate_tag)
{
	struct nd_table *t = nd_table_new(16);
	struct fw_denied d, other;
	struct seen s = { .n = 0 };

	ck_assert_ptr_nonnull(t);
	pkt(&d, "sl-3", "10.231.0.14", "198.51.100.66", IPPROTO_TCP, 40000,
	    443, "deny:default");
	pkt(&other, "sl-3", "10.231.0.14", "198.51.100.67", IPPROTO_TCP,
	    40001, 443, "deny:default");
	ck_assert_int_eq(nd_table_tag(t, &d, "sbx-a"), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(nd_table_add(t, &d, 1000), 1);
	ck_assert_int_eq(nd_table_tag(t, &d, "sbx-a"), 0);
	ck_assert_int_eq(nd_table_tag(t, &other, "sbx-b"), -1);
	ck_assert_int_eq(nd_table_add(t, &d, 1001), 0);
	/* Longer than an id: cut, never overflowing. */
	ck_assert_int_eq(nd_table_add(t, &other, 1002), 1);
	ck_assert_int_eq(nd_table_tag(t, &other,
	    "0123456789012345678901234567890123456789"), 0);
	nd_table_flush(t, seen_cb, &s);
	ck_assert_uint_eq(s.n, 2);
	ck_assert_str_eq(s.e[0].d.sport == 40000 ? s.e[0].sandbox :
	    s.e[1].sandbox, "sbx-a");
	ck_assert_str_eq(s.e[0].d.sport == 40001 ? s.e[0].sandbox :
	    s.e[1].sandbox, "01234567890123456789012345678901");
	ck_assert_int_eq(s.e[0].summary, 0);
	ck_assert_int_eq(s.e[1].summary, 0);
	s.n = 0;
	ck_assert_int_eq(nd_table_add(t, &d, 2000), 1);
	nd_table_flush(t, seen_cb, &s);
	ck_assert_uint_eq(s.n, 1);
	ck_assert_str_eq(s.e[0].sandbox, "");
	nd_table_free(t);
}
END_TEST

/* Each variant differs from the base in exactly one part of the key
 * (d[1..4]) or in a part that is not (d[5..7]: source, ports). */
START_TEST(test_aggregate_distinct)
{
	struct nd_table *t = nd_table_new(64);
	struct fw_denied d[8];
	struct seen s = { .n = 0 };
	size_t i;

	ck_assert_ptr_nonnull(t);
	pkt(&d[0], "sl-0", "10.231.0.2", "198.51.100.66", IPPROTO_TCP, 40000,
	    443, "deny:default");
	pkt(&d[1], "sl-1", "10.231.0.2", "198.51.100.66", IPPROTO_TCP, 40000,
	    443, "deny:default");
	pkt(&d[2], "sl-0", "10.231.0.2", "198.51.100.67", IPPROTO_TCP, 40000,
	    443, "deny:default");
	pkt(&d[3], "sl-0", "10.231.0.2", "198.51.100.66", IPPROTO_UDP, 40000,
	    443, "deny:default");
	pkt(&d[4], "sl-0", "10.231.0.2", "198.51.100.66", IPPROTO_TCP, 40000,
	    443, "deny:rule");
	pkt(&d[5], "sl-0", "10.231.0.6", "198.51.100.66", IPPROTO_TCP, 40000,
	    443, "deny:default");
	pkt(&d[6], "sl-0", "10.231.0.2", "198.51.100.66", IPPROTO_TCP, 40001,
	    443, "deny:default");
	pkt(&d[7], "sl-0", "10.231.0.2", "198.51.100.66", IPPROTO_TCP, 40000,
	    444, "deny:default");
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(nd_table_add(t, &d[i], 1), ND_ADD_NEW);
	for (i = 5; i < 8; i++)
		ck_assert_int_eq(nd_table_add(t, &d[i], 1), ND_ADD_COUNTED);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(nd_table_add(t, &d[i], 2), ND_ADD_COUNTED);
	/* Five keys and the summaries of links sl-0 and sl-1. */
	ck_assert_uint_eq(nd_table_size(t), 7);
	nd_table_flush(t, seen_cb, &s);
	ck_assert_uint_eq(s.n, 5);
	for (i = 0; i < 5; i++) {
		int base = strcmp(s.e[i].d.ifname, "sl-0") == 0 &&
		    s.e[i].d.proto == IPPROTO_TCP && s.e[i].d.dst[3] == 66 &&
		    strcmp(s.e[i].d.prefix, "deny:default") == 0;

		ck_assert_uint_eq(s.e[i].count, base ? 5 : 2);
		/* The first packet's source and ports; the ports tried. */
		ck_assert_uint_eq(s.e[i].d.sport, 40000);
		ck_assert_uint_eq(s.e[i].d.dport, 443);
		ck_assert_uint_eq(s.e[i].nports, base ? 2 : 1);
	}
	nd_table_free(t);
}
END_TEST

START_TEST(test_aggregate_garbage)
{
	struct nd_table *t = nd_table_new(4);
	struct fw_denied a, b;

	ck_assert_ptr_nonnull(t);
	pkt(&a, "sl-0", "10.231.0.2", "198.51.100.66", IPPROTO_TCP, 1, 2,
	    "deny:default");
	b = a;
	/* Bytes past the NULs and past the IPv4 address are not the key. */
	memset(b.ifname + 5, 'X', sizeof(b.ifname) - 5);
	b.ifname[sizeof(b.ifname) - 1] = 'X';
	memset(b.prefix + 13, 'Y', sizeof(b.prefix) - 13);
	memset(b.src + 4, 0xee, 12);
	memset(b.dst + 4, 0xdd, 12);
	ck_assert_int_eq(nd_table_add(t, &a, 1), 1);
	ck_assert_int_eq(nd_table_add(t, &b, 1), 0);
	ck_assert_uint_eq(nd_table_size(t), 2);	/* key and link summary */
	nd_table_free(t);
}
END_TEST

/* A sandbox trying 10000 ports of one host: one key, the ports it tried
 * first named, the rest counted. */
START_TEST(test_port_scan)
{
	struct nd_table *t = nd_table_new(100);
	struct fw_denied d;
	struct seen s = { .n = 0 };
	unsigned port;

	ck_assert_ptr_nonnull(t);
	for (port = 1; port <= 10000; port++) {
		pkt(&d, "sl-0", "10.231.0.2", "198.51.100.66", IPPROTO_UDP,
		    5000, (uint16_t)port, "deny:default");
		ck_assert_int_eq(nd_table_add(t, &d, port), port == 1 ?
		    ND_ADD_NEW : ND_ADD_COUNTED);
	}
	ck_assert_uint_eq(nd_table_dropped(t), 0);
	nd_table_flush(t, seen_cb, &s);
	ck_assert_uint_eq(s.n, 1);
	ck_assert_uint_eq(s.e[0].count, 10000);
	ck_assert_uint_eq(s.e[0].nports, ND_PORTS_KEEP);
	ck_assert_uint_eq(s.e[0].ports[0], 1);
	ck_assert_uint_eq(s.e[0].ports[ND_PORTS_KEEP - 1], ND_PORTS_KEEP);
	ck_assert_uint_eq(s.e[0].other_ports, 10000 - ND_PORTS_KEEP);
	nd_table_free(t);
}
END_TEST

/* A sandbox trying 1000 hosts: ND_LINK_KEYS keys, the rest in its link's
 * one summary; another link still gets its own keys. */
START_TEST(test_link_budget)
{
	struct nd_table *t = nd_table_new(1000);
	struct fw_denied d;
	struct seen s = { .n = 0 };
	char dst[32];
	size_t i, keys = 0, sums = 0;
	int rc;

	ck_assert_ptr_nonnull(t);
	for (i = 0; i < 1000; i++) {
		snprintf(dst, sizeof(dst), "198.51.%zu.%zu", 100 + i / 250,
		    i % 250 + 1);
		pkt(&d, "sl-0", "10.231.0.2", dst, IPPROTO_TCP, 5000, 443,
		    "deny:default");
		rc = nd_table_add(t, &d, (int64_t)i);
		ck_assert_int_eq(rc, i < ND_LINK_KEYS ? ND_ADD_NEW :
		    ND_ADD_SUMMARISED);
		if (i == 0)
			ck_assert_int_eq(nd_table_tag(t, &d, "sbx-a"), 0);
	}
	pkt(&d, "sl-1", "10.231.0.6", "198.51.100.1", IPPROTO_TCP, 5000, 443,
	    "deny:default");
	ck_assert_int_eq(nd_table_add(t, &d, 5), ND_ADD_NEW);
	nd_table_flush(t, seen_cb, &s);
	for (i = 0; i < s.n; i++) {
		if (!s.e[i].summary) {
			keys++;
			continue;
		}
		sums++;
		ck_assert_str_eq(s.e[i].d.ifname, "sl-0");
		ck_assert_str_eq(s.e[i].sandbox, "sbx-a");
		ck_assert_uint_eq(s.e[i].count, 1000 - ND_LINK_KEYS);
		ck_assert_uint_eq(s.e[i].nkeys, ND_LINK_KEYS);
		ck_assert_int_eq(s.e[i].first_ms, ND_LINK_KEYS);
		ck_assert_int_eq(s.e[i].last_ms, 999);
	}
	ck_assert_uint_eq(keys, ND_LINK_KEYS + 1);
	ck_assert_uint_eq(sums, 1);
	nd_table_free(t);
}
END_TEST

/* Links beyond what the table holds: the rest counted as dropped. */
START_TEST(test_cap)
{
	struct nd_table *t = nd_table_new(100);
	struct fw_denied d;
	struct seen s = { .n = 0 };
	char ifname[16];
	unsigned i;
	int adds = 0;

	ck_assert_ptr_nonnull(t);
	/* 10000 links, a key and a summary each: 50 fit. */
	for (i = 0; i < 10000; i++) {
		snprintf(ifname, sizeof(ifname), "sl-%u", i);
		pkt(&d, ifname, "10.231.0.2", "198.51.100.66", IPPROTO_UDP,
		    5000, 53, "deny:default");
		if (nd_table_add(t, &d, i) == ND_ADD_NEW)
			adds++;
	}
	ck_assert_int_eq(adds, 50);
	ck_assert_uint_eq(nd_table_size(t), 100);
	ck_assert_uint_eq(nd_table_dropped(t), 9950);
	/* Keys already held still count while the table is full. */
	pkt(&d, "sl-0", "10.231.0.2", "198.51.100.66", IPPROTO_UDP, 5000, 53,
	    "deny:default");
	ck_assert_int_eq(nd_table_add(t, &d, 20000), ND_ADD_COUNTED);
	ck_assert_uint_eq(nd_table_dropped(t), 9950);
	ck_assert_uint_eq(nd_table_flush(t, NULL, NULL), 9950);
	ck_assert_uint_eq(nd_table_dropped(t), 0);
	ck_assert_uint_eq(nd_table_size(t), 0);
	/* After a flush the table takes new keys again. */
	ck_assert_int_eq(nd_table_add(t, &d, 1), ND_ADD_NEW);
	nd_table_flush(t, seen_cb, &s);
	ck_assert_uint_eq(s.n, 1);
	nd_table_free(t);
}
END_TEST

START_TEST(test_bad_cap)
{
	ck_assert_ptr_null(nd_table_new(0));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(nd_table_new(ND_TABLE_MAX + 1));
}
END_TEST

static const struct {
	const char	*dst, *prefix, *reason;
} reasons[] = {
	{ "169.254.169.254", "deny:always", "always_denied:metadata" },
	{ "127.0.0.1", "deny:always", "always_denied:loopback" },
	{ "fd00:ec2::254", "deny:always", "always_denied:metadata" },
	{ "::ffff:169.254.169.254", "deny:always", "always_denied:metadata" },
	{ "10.1.2.3", "deny:private", "private_range:private" },
	{ "100.64.0.1", "deny:private", "private_range:cgnat" },
	/* treat_as_public (192.0.2.0/24 below) is not the kernel's: a
	 * private denial names the range's own class. */
	{ "192.0.2.10", "deny:private", "private_range:documentation" },
	{ "198.51.100.66", "deny:private", "private_range:documentation" },
	{ "198.51.100.66", "deny:default", "no_matching_rule" },
	{ "198.51.100.66", "deny:rule", "explicit_deny" },
	{ "198.51.100.66", "deny:spoof", "spoofed_source" },
	{ "198.51.100.66", "deny:dot", "dns_over_tls" },
	{ "198.51.100.66", "deny:tainted", "tainted" },
	{ "198.51.100.66", "deny:quota", "quota_exhausted" },
	{ "10.231.255.254", "deny:input", "input" },
	{ "198.51.100.66", "", "denied" },
	{ "198.51.100.66", "deny:", "denied" },
	{ "198.51.100.66", "deny:alwaysX", "denied" },
	{ "198.51.100.66", "DENY:ALWAYS", "denied" },
};

START_TEST(test_reason)
{
	struct pol_cidr tp;
	struct fw_denied d;
	char buf[64];

	ck_assert_int_eq(pol_cidr_parse("192.0.2.0/24", &tp), 0);
	pkt(&d, "sl-0", strchr(reasons[_i].dst, ':') ? "::1" : "10.231.0.2",
	    reasons[_i].dst, IPPROTO_TCP, 1, 80, reasons[_i].prefix);
	ck_assert_str_eq(nd_reason(&d, &tp, 1, buf, sizeof(buf)),
	    reasons[_i].reason);
}
END_TEST

START_TEST(test_reason_hostile)
{
	struct fw_denied d;
	char buf[64], small[8];

	/* A prefix with no NUL in its array, an unknown family: no overread,
	 * a neutral reason; a small buffer is truncated, not overrun. */
	pkt(&d, "sl-0", "10.231.0.2", "10.1.2.3", IPPROTO_TCP, 1, 80,
	    "deny:always");
	memset(d.prefix, 'A', sizeof(d.prefix));
	ck_assert_str_eq(nd_reason(&d, NULL, 0, buf, sizeof(buf)), "denied");
	pkt(&d, "sl-0", "10.231.0.2", "169.254.169.254", IPPROTO_TCP, 1, 80,
	    "deny:always");
	d.family = 99;
	ck_assert_str_eq(nd_reason(&d, NULL, 0, buf, sizeof(buf)),
	    "always_denied");
	d.family = AF_INET;
	ck_assert_str_eq(nd_reason(&d, NULL, 0, small, sizeof(small)),
	    "always_");
}
END_TEST

static Suite *
nd_suite(void)
{
	Suite *s = suite_create("netdeny");
	TCase *tc = tcase_create("Core"), *tl = tcase_create("Limits");

	tcase_add_test(tc, test_aggregate_same);
	tcase_add_test(tc, test_aggregate_distinct);
	tcase_add_test(tc, test_aggregate_tag);
	tcase_add_loop_test(tc, test_reason, 0,
	    sizeof(reasons) / sizeof(reasons[0]));
	suite_add_tcase(s, tc);
	tcase_add_test(tl, test_aggregate_garbage);
	tcase_add_test(tl, test_cap);
	tcase_add_test(tl, test_port_scan);
	tcase_add_test(tl, test_link_budget);
	tcase_add_test(tl, test_bad_cap);
	tcase_add_test(tl, test_reason_hostile);
	suite_add_tcase(s, tl);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(nd_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
