/*
 * check_policy_classify: the address classifier and its parsers (policy/
 * classify.c) against egress.md §8-9, row by row.
 *
 * Every metadata endpoint, every range and every bypass literal from the
 * reference is a row in a table below, so a regression names the address
 * that broke. Two properties tie the classifier to the kernel: the deny and
 * private tables handed to netns/ list exactly the addresses the classifier
 * denies (checked on a sweep of the whole address space and on every range
 * boundary), and each table is sorted and overlap-free, as interval sets
 * require.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

#define NELEM(x)	(sizeof(x) / sizeof((x)[0]))

#define C(k)	POL_ADDR_##k
#define E(k)	POL_EMBED_##k

static struct pol_addr
addr(const char *s)
{
	struct pol_addr	 a;

	ck_assert_msg(pol_addr_parse(s, &a) == 0, "cannot parse %s", s);
	return a;
}

static const char *
fmt(const struct pol_addr *a, char *buf)
{
	const char	*r = pol_addr_format(a, buf, INET6_ADDRSTRLEN);

	ck_assert_ptr_nonnull(r);
	return r;
}

/* ------------------------------------------------------------ classify */

static const struct {
	const char		*text;
	enum pol_addr_class	 cls;
	enum pol_addr_embed	 embed;
	const char		*inner;		/* NULL when embed is NONE */
} class_rows[] = {
	/* egress.md §8: metadata wins over link-local, CGNAT, reserved, ULA */
	{ "169.254.169.254", C(METADATA), E(NONE), NULL },
	{ "169.254.169.253", C(METADATA), E(NONE), NULL },
	{ "169.254.169.123", C(METADATA), E(NONE), NULL },
	{ "169.254.170.2", C(METADATA), E(NONE), NULL },
	{ "169.254.170.23", C(METADATA), E(NONE), NULL },
	{ "100.100.100.200", C(METADATA), E(NONE), NULL },
	{ "168.63.129.16", C(METADATA), E(NONE), NULL },
	{ "192.0.0.192", C(METADATA), E(NONE), NULL },
	{ "169.254.42.42", C(METADATA), E(NONE), NULL },
	{ "fd00:ec2::254", C(METADATA), E(NONE), NULL },
	{ "fd00:ec2::253", C(METADATA), E(NONE), NULL },
	{ "fd00:ec2::123", C(METADATA), E(NONE), NULL },
	{ "fd00:ec2::23", C(METADATA), E(NONE), NULL },
	{ "fd20:ce::254", C(METADATA), E(NONE), NULL },
	{ "fd00:42::42", C(METADATA), E(NONE), NULL },
	{ "FD00:EC2:0:0:0:0:0:254", C(METADATA), E(NONE), NULL },
	{ "fd00:0ec2:0000::0254", C(METADATA), E(NONE), NULL },
	/* their neighbours are not metadata */
	{ "169.254.169.255", C(LINK_LOCAL), E(NONE), NULL },
	{ "169.254.170.3", C(LINK_LOCAL), E(NONE), NULL },
	{ "169.254.42.43", C(LINK_LOCAL), E(NONE), NULL },
	{ "100.100.100.201", C(CGNAT), E(NONE), NULL },
	{ "168.63.129.15", C(PUBLIC), E(NONE), NULL },
	{ "168.63.129.17", C(PUBLIC), E(NONE), NULL },
	{ "192.0.0.191", C(RESERVED), E(NONE), NULL },
	{ "fd00:ec2::255", C(ULA), E(NONE), NULL },
	{ "fd00:ec2::1:254", C(ULA), E(NONE), NULL },
	{ "fd20:ce::253", C(ULA), E(NONE), NULL },
	/* loopback */
	{ "127.0.0.1", C(LOOPBACK), E(NONE), NULL },
	{ "127.0.0.0", C(LOOPBACK), E(NONE), NULL },
	{ "127.255.255.255", C(LOOPBACK), E(NONE), NULL },
	{ "127.1.2.3", C(LOOPBACK), E(NONE), NULL },
	{ "::1", C(LOOPBACK), E(NONE), NULL },
	{ "0:0:0:0:0:0:0:1", C(LOOPBACK), E(NONE), NULL },
	/* unspecified (egress.md §9 item 7) */
	{ "0.0.0.0", C(UNSPECIFIED), E(NONE), NULL },
	{ "0.255.255.255", C(UNSPECIFIED), E(NONE), NULL },
	{ "0.1.2.3", C(UNSPECIFIED), E(NONE), NULL },
	{ "::", C(UNSPECIFIED), E(NONE), NULL },
	{ "0:0:0:0:0:0:0:0", C(UNSPECIFIED), E(NONE), NULL },
	/* link-local */
	{ "169.254.0.0", C(LINK_LOCAL), E(NONE), NULL },
	{ "169.254.255.255", C(LINK_LOCAL), E(NONE), NULL },
	{ "169.254.1.1", C(LINK_LOCAL), E(NONE), NULL },
	{ "169.253.255.255", C(PUBLIC), E(NONE), NULL },
	{ "169.255.0.0", C(PUBLIC), E(NONE), NULL },
	{ "fe80::1", C(LINK_LOCAL), E(NONE), NULL },
	{ "fe80::", C(LINK_LOCAL), E(NONE), NULL },
	{ "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(LINK_LOCAL), E(NONE), NULL },
	/* private */
	{ "10.0.0.0", C(PRIVATE), E(NONE), NULL },
	{ "10.255.255.255", C(PRIVATE), E(NONE), NULL },
	{ "9.255.255.255", C(PUBLIC), E(NONE), NULL },
	{ "11.0.0.0", C(PUBLIC), E(NONE), NULL },
	{ "172.16.0.0", C(PRIVATE), E(NONE), NULL },
	{ "172.31.255.255", C(PRIVATE), E(NONE), NULL },
	{ "172.15.255.255", C(PUBLIC), E(NONE), NULL },
	{ "172.32.0.0", C(PUBLIC), E(NONE), NULL },
	{ "172.17.0.1", C(PRIVATE), E(NONE), NULL },	/* Docker bridge gateway */
	{ "192.168.0.0", C(PRIVATE), E(NONE), NULL },
	{ "192.168.255.255", C(PRIVATE), E(NONE), NULL },
	{ "192.168.65.1", C(PRIVATE), E(NONE), NULL },
	{ "192.167.255.255", C(PUBLIC), E(NONE), NULL },
	{ "192.169.0.0", C(PUBLIC), E(NONE), NULL },
	{ "10.231.255.254", C(PRIVATE), E(NONE), NULL },	/* our service address */
	/* CGNAT (egress.md §9 item 6) */
	{ "100.64.0.0", C(CGNAT), E(NONE), NULL },
	{ "100.127.255.255", C(CGNAT), E(NONE), NULL },
	{ "100.63.255.255", C(PUBLIC), E(NONE), NULL },
	{ "100.128.0.0", C(PUBLIC), E(NONE), NULL },
	/* documentation */
	{ "192.0.2.0", C(DOCUMENTATION), E(NONE), NULL },
	{ "192.0.2.255", C(DOCUMENTATION), E(NONE), NULL },
	{ "192.0.3.0", C(PUBLIC), E(NONE), NULL },
	{ "198.51.100.7", C(DOCUMENTATION), E(NONE), NULL },
	{ "198.51.99.255", C(PUBLIC), E(NONE), NULL },
	{ "198.51.101.0", C(PUBLIC), E(NONE), NULL },
	{ "203.0.113.0", C(DOCUMENTATION), E(NONE), NULL },
	{ "203.0.113.255", C(DOCUMENTATION), E(NONE), NULL },
	{ "203.0.114.0", C(PUBLIC), E(NONE), NULL },
	{ "203.0.112.255", C(PUBLIC), E(NONE), NULL },
	{ "2001:db8::", C(DOCUMENTATION), E(NONE), NULL },
	{ "2001:db8::1", C(DOCUMENTATION), E(NONE), NULL },
	{ "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", C(DOCUMENTATION), E(NONE), NULL },
	{ "2001:db9::", C(PUBLIC), E(NONE), NULL },
	{ "3fff::1", C(DOCUMENTATION), E(NONE), NULL },
	{ "3fff:fff:ffff::", C(DOCUMENTATION), E(NONE), NULL },
	{ "3fff:1000::", C(PUBLIC), E(NONE), NULL },
	/* benchmarking */
	{ "198.18.0.0", C(BENCHMARKING), E(NONE), NULL },
	{ "198.19.255.255", C(BENCHMARKING), E(NONE), NULL },
	{ "198.17.255.255", C(PUBLIC), E(NONE), NULL },
	{ "198.20.0.0", C(PUBLIC), E(NONE), NULL },
	{ "2001:2::1", C(BENCHMARKING), E(NONE), NULL },
	{ "2001:2:0:ffff::1", C(BENCHMARKING), E(NONE), NULL },
	{ "2001:2:1::", C(PUBLIC), E(NONE), NULL },
	/* multicast */
	{ "224.0.0.0", C(MULTICAST), E(NONE), NULL },
	{ "224.0.0.251", C(MULTICAST), E(NONE), NULL },
	{ "239.255.255.255", C(MULTICAST), E(NONE), NULL },
	{ "223.255.255.255", C(PUBLIC), E(NONE), NULL },
	{ "ff02::1", C(MULTICAST), E(NONE), NULL },
	{ "ff0e::1", C(MULTICAST), E(NONE), NULL },
	{ "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(MULTICAST), E(NONE), NULL },
	/* reserved and broadcast */
	{ "240.0.0.0", C(RESERVED), E(NONE), NULL },
	{ "240.0.0.1", C(RESERVED), E(NONE), NULL },
	{ "255.255.255.254", C(RESERVED), E(NONE), NULL },
	{ "255.255.255.255", C(RESERVED), E(NONE), NULL },
	{ "192.0.0.0", C(RESERVED), E(NONE), NULL },
	{ "192.0.0.8", C(RESERVED), E(NONE), NULL },
	{ "192.0.0.255", C(RESERVED), E(NONE), NULL },
	{ "192.88.99.1", C(RESERVED), E(NONE), NULL },
	{ "192.88.98.255", C(PUBLIC), E(NONE), NULL },
	{ "192.88.100.0", C(PUBLIC), E(NONE), NULL },
	{ "100::", C(RESERVED), E(NONE), NULL },
	{ "100::ffff:ffff:ffff:ffff", C(RESERVED), E(NONE), NULL },
	{ "100:0:0:1::", C(RESERVED), E(NONE), NULL },
	{ "fec0::1", C(RESERVED), E(NONE), NULL },
	{ "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(RESERVED), E(NONE), NULL },
	{ "fe7f::1", C(RESERVED), E(NONE), NULL },
	{ "1fff::1", C(RESERVED), E(NONE), NULL },
	{ "4000::1", C(RESERVED), E(NONE), NULL },
	{ "c000::1", C(RESERVED), E(NONE), NULL },
	{ "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(RESERVED), E(NONE), NULL },
	{ "64:ff9b:0:0:1::808:808", C(RESERVED), E(NONE), NULL },
	/* ULA (egress.md §9 item 5) */
	{ "fc00::", C(ULA), E(NONE), NULL },
	{ "fd12:3456::1", C(ULA), E(NONE), NULL },
	{ "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C(ULA), E(NONE), NULL },
	/* public */
	{ "8.8.8.8", C(PUBLIC), E(NONE), NULL },
	{ "1.1.1.1", C(PUBLIC), E(NONE), NULL },
	{ "1.0.0.0", C(PUBLIC), E(NONE), NULL },
	{ "93.184.216.34", C(PUBLIC), E(NONE), NULL },
	{ "2606:4700::1111", C(PUBLIC), E(NONE), NULL },
	{ "2001:4860:4860::8888", C(PUBLIC), E(NONE), NULL },
	{ "2a00:1450:4001::1", C(PUBLIC), E(NONE), NULL },
	{ "2000::", C(PUBLIC), E(NONE), NULL },
	{ "3ffe::1", C(PUBLIC), E(NONE), NULL },
	{ "2001:1::1", C(PUBLIC), E(NONE), NULL },
	/* IPv4-mapped (egress.md §9 item 1): worst of outer and inner */
	{ "::ffff:169.254.169.254", C(METADATA), E(MAPPED), "169.254.169.254" },
	{ "::ffff:a9fe:a9fe", C(METADATA), E(MAPPED), "169.254.169.254" },
	{ "0:0:0:0:0:ffff:169.254.169.254", C(METADATA), E(MAPPED), "169.254.169.254" },
	{ "::ffff:100.100.100.200", C(METADATA), E(MAPPED), "100.100.100.200" },
	{ "::ffff:168.63.129.16", C(METADATA), E(MAPPED), "168.63.129.16" },
	{ "::ffff:127.0.0.1", C(LOOPBACK), E(MAPPED), "127.0.0.1" },
	{ "::ffff:0.0.0.0", C(UNSPECIFIED), E(MAPPED), "0.0.0.0" },
	{ "::ffff:169.254.1.1", C(LINK_LOCAL), E(MAPPED), "169.254.1.1" },
	{ "::ffff:224.0.0.1", C(MULTICAST), E(MAPPED), "224.0.0.1" },
	{ "::ffff:10.0.0.1", C(RESERVED), E(MAPPED), "10.0.0.1" },
	{ "::ffff:8.8.8.8", C(RESERVED), E(MAPPED), "8.8.8.8" },
	/* IPv4-compatible (item 2); :: and ::1 are not compatible forms */
	{ "::169.254.169.254", C(METADATA), E(COMPAT), "169.254.169.254" },
	{ "::a9fe:a9fe", C(METADATA), E(COMPAT), "169.254.169.254" },
	{ "::7f00:1", C(LOOPBACK), E(COMPAT), "127.0.0.1" },
	{ "::8.8.8.8", C(RESERVED), E(COMPAT), "8.8.8.8" },
	{ "::2", C(UNSPECIFIED), E(COMPAT), "0.0.0.2" },
	{ "::100", C(UNSPECIFIED), E(COMPAT), "0.0.1.0" },
	{ "::ffff", C(UNSPECIFIED), E(COMPAT), "0.0.255.255" },
	{ "::ffff:ffff", C(RESERVED), E(COMPAT), "255.255.255.255" },
	/* NAT64 (item 3) */
	{ "64:ff9b::7f00:1", C(LOOPBACK), E(NAT64), "127.0.0.1" },
	{ "64:ff9b::169.254.169.254", C(METADATA), E(NAT64), "169.254.169.254" },
	{ "64:ff9b::a9fe:a9fe", C(METADATA), E(NAT64), "169.254.169.254" },
	{ "64:ff9b::a00:1", C(RESERVED), E(NAT64), "10.0.0.1" },
	{ "64:ff9b::8.8.8.8", C(RESERVED), E(NAT64), "8.8.8.8" },
	{ "64:ff9b:1::a9fe:a9fe", C(METADATA), E(NAT64_LOCAL), "169.254.169.254" },
	{ "64:ff9b:1:ffff::7f00:1", C(LOOPBACK), E(NAT64_LOCAL), "127.0.0.1" },
	{ "64:ff9b:1:ffff::8.8.8.8", C(RESERVED), E(NAT64_LOCAL), "8.8.8.8" },
	/* 6to4 and Teredo (item 4) */
	{ "2002:a9fe:a9fe::", C(METADATA), E(6TO4), "169.254.169.254" },
	{ "2002:a9fe:a9fe:1:2:3:4:5", C(METADATA), E(6TO4), "169.254.169.254" },
	{ "2002:7f00:1::1", C(LOOPBACK), E(6TO4), "127.0.0.1" },
	{ "2002:808:808::1", C(RESERVED), E(6TO4), "8.8.8.8" },
	{ "2002:c000:204::", C(RESERVED), E(6TO4), "192.0.2.4" },
	{ "2002::", C(UNSPECIFIED), E(6TO4), "0.0.0.0" },
	{ "2001:0:4136:e378:8000:63bf:5601:5601", C(METADATA), E(TEREDO), "169.254.169.254" },
	{ "2001::80ff:fffe", C(LOOPBACK), E(TEREDO), "127.0.0.1" },
	{ "2001::ffff:ffff", C(UNSPECIFIED), E(TEREDO), "0.0.0.0" },
	{ "2001:0:4136:e378:8000:63bf:f7f7:f7f7", C(RESERVED), E(TEREDO), "8.8.8.8" },
	{ "2001::", C(RESERVED), E(TEREDO), "255.255.255.255" },
};

START_TEST(test_classify_table)
{
	struct pol_addr_info	 info;
	struct pol_addr		 a;
	struct pol_cidr		 none = { .prefix = 0 };
	char			 buf[INET6_ADDRSTRLEN];
	const char		*t = class_rows[_i].text;

	a = addr(t);
	pol_addr_classify(&a, NULL, 0, &info);
	ck_assert_msg(info.cls == class_rows[_i].cls, "%s: class %s, want %s",
	    t, pol_addr_class_name(info.cls),
	    pol_addr_class_name(class_rows[_i].cls));
	ck_assert_msg(info.embed == class_rows[_i].embed, "%s: embed %d, want %d",
	    t, info.embed, class_rows[_i].embed);
	ck_assert(!info.treated_public);
	if (class_rows[_i].inner == NULL) {
		ck_assert_int_eq(info.inner.family, 0);
	} else {
		ck_assert_int_eq(info.inner.family, AF_INET);
		ck_assert_str_eq(fmt(&info.inner, buf), class_rows[_i].inner);
	}
	/* The same answer with an empty (non-NULL) treat list. */
	pol_addr_classify(&a, &none, 0, &info);
	ck_assert_int_eq(info.cls, class_rows[_i].cls);
}
END_TEST

/* --------------------------------------------------------- treat_as_public */

static const struct {
	const char		*text;
	const char		*treat;		/* comma-separated CIDRs */
	enum pol_addr_class	 cls;
	bool			 treated;
} treat_rows[] = {
	{ "192.0.2.10", "192.0.2.0/24", C(PUBLIC), true },
	{ "203.0.113.5", "192.0.2.0/24,203.0.113.0/24", C(PUBLIC), true },
	{ "192.0.2.10", "198.51.100.0/24", C(DOCUMENTATION), false },
	{ "10.1.2.3", "10.0.0.0/8", C(PUBLIC), true },
	{ "10.1.2.3", "10.1.2.3", C(PUBLIC), true },
	{ "10.1.2.3", "10.1.2.4/32", C(PRIVATE), false },
	{ "100.64.1.1", "100.64.0.0/10", C(PUBLIC), true },
	{ "198.18.0.1", "198.18.0.0/15", C(PUBLIC), true },
	{ "2001:db8::1", "2001:db8::/32", C(PUBLIC), true },
	{ "fd00:ec2::1", "fc00::/7", C(PUBLIC), true },
	/* header contract: multicast and reserved may be lifted */
	{ "224.0.0.1", "224.0.0.0/4", C(PUBLIC), true },
	{ "240.0.0.1", "240.0.0.0/4", C(PUBLIC), true },
	/* never lifted: metadata, loopback, link-local, unspecified */
	{ "169.254.169.254", "169.254.0.0/16", C(METADATA), false },
	{ "169.254.169.254", "0.0.0.0/0", C(METADATA), false },
	{ "169.254.169.254", "169.254.169.254/32", C(METADATA), false },
	{ "100.100.100.200", "100.64.0.0/10", C(METADATA), false },
	{ "168.63.129.16", "168.63.0.0/16", C(METADATA), false },
	{ "192.0.0.192", "192.0.0.0/24", C(METADATA), false },
	{ "fd00:ec2::254", "fc00::/7", C(METADATA), false },
	{ "fd20:ce::254", "::/0", C(METADATA), false },
	{ "127.0.0.1", "0.0.0.0/0", C(LOOPBACK), false },
	{ "127.0.0.1", "127.0.0.0/8", C(LOOPBACK), false },
	{ "169.254.1.1", "169.254.0.0/16", C(LINK_LOCAL), false },
	{ "0.0.0.0", "0.0.0.0/0", C(UNSPECIFIED), false },
	{ "fe80::1", "::/0", C(LINK_LOCAL), false },
	{ "::", "::/0", C(UNSPECIFIED), false },
	{ "::1", "::/0", C(LOOPBACK), false },
	/* nothing to lift */
	{ "8.8.8.8", "8.0.0.0/8", C(PUBLIC), false },
	/* families do not mix */
	{ "10.0.0.1", "::/0", C(PRIVATE), false },
	{ "2001:db8::1", "0.0.0.0/0", C(DOCUMENTATION), false },
	/* embedded forms: outer and inner lifted separately */
	{ "::ffff:10.0.0.1", "10.0.0.0/8", C(RESERVED), false },
	{ "::ffff:10.0.0.1", "::ffff:0:0/96", C(PRIVATE), false },
	{ "::ffff:10.0.0.1", "::ffff:0:0/96,10.0.0.0/8", C(PUBLIC), true },
	{ "64:ff9b::a00:1", "64:ff9b::/96", C(PRIVATE), false },
	{ "64:ff9b::808:808", "64:ff9b::/96", C(PUBLIC), true },
	{ "64:ff9b::a9fe:a9fe", "64:ff9b::/96,0.0.0.0/0", C(METADATA), false },
	{ "64:ff9b::7f00:1", "::/0,0.0.0.0/0", C(LOOPBACK), false },
	{ "2002:a9fe:a9fe::", "2002::/16,169.254.0.0/16", C(METADATA), false },
	{ "2002:c000:204::", "2002::/16", C(DOCUMENTATION), false },
	{ "2002:c000:204::", "2002::/16,192.0.2.0/24", C(PUBLIC), true },
};

START_TEST(test_treat_table)
{
	struct pol_cidr		 treat[4];
	struct pol_addr_info	 info;
	struct pol_addr		 a;
	char			 list[128], *tok, *save = NULL;
	size_t			 n = 0;

	snprintf(list, sizeof(list), "%s", treat_rows[_i].treat);
	for (tok = strtok_r(list, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		ck_assert_uint_lt(n, NELEM(treat));
		ck_assert_msg(pol_cidr_parse(tok, &treat[n]) == 0, "%s", tok);
		n++;
	}
	a = addr(treat_rows[_i].text);
	pol_addr_classify(&a, treat, n, &info);
	ck_assert_msg(info.cls == treat_rows[_i].cls, "%s with %s: %s, want %s",
	    treat_rows[_i].text, treat_rows[_i].treat,
	    pol_addr_class_name(info.cls),
	    pol_addr_class_name(treat_rows[_i].cls));
	ck_assert_msg(info.treated_public == treat_rows[_i].treated,
	    "%s with %s: treated_public %d", treat_rows[_i].text,
	    treat_rows[_i].treat, info.treated_public);
	/* Without the list, nothing is ever treated. */
	pol_addr_classify(&a, NULL, 0, &info);
	ck_assert(!info.treated_public);
	pol_addr_classify(&a, NULL, 3, &info);
	ck_assert(!info.treated_public);
}
END_TEST

/* --------------------------------------------------------------- parse */

static const struct {
	const char	*text;
	int		 family;
	const char	*canon;
} parse_ok_rows[] = {
	{ "0.0.0.0", AF_INET, "0.0.0.0" },
	{ "1.2.3.4", AF_INET, "1.2.3.4" },
	{ "10.0.0.1", AF_INET, "10.0.0.1" },
	{ "100.100.100.200", AF_INET, "100.100.100.200" },
	{ "169.254.169.254", AF_INET, "169.254.169.254" },
	{ "255.255.255.255", AF_INET, "255.255.255.255" },
	{ "::", AF_INET6, "::" },
	{ "::1", AF_INET6, "::1" },
	{ "1::", AF_INET6, "1::" },
	{ "::ffff:169.254.169.254", AF_INET6, "::ffff:169.254.169.254" },
	{ "::FFFF:A9FE:A9FE", AF_INET6, "::ffff:169.254.169.254" },
	{ "0:0:0:0:0:ffff:169.254.169.254", AF_INET6, "::ffff:169.254.169.254" },
	{ "0000:0000:0000:0000:0000:ffff:255.255.255.255", AF_INET6,
	    "::ffff:255.255.255.255" },
	{ "::ffff:1.2.3.4", AF_INET6, "::ffff:1.2.3.4" },
	{ "::7f00:1", AF_INET6, "::127.0.0.1" },
	{ "2001:DB8::1", AF_INET6, "2001:db8::1" },
	{ "2001:0db8:0000:0000:0000:0000:0000:0001", AF_INET6, "2001:db8::1" },
	{ "2001:db8::0:1", AF_INET6, "2001:db8::1" },
	{ "2001:db8:0:1:0:0:0:1", AF_INET6, "2001:db8:0:1::1" },
	{ "fe80::1", AF_INET6, "fe80::1" },
	{ "1:2:3:4:5:6:7:8", AF_INET6, "1:2:3:4:5:6:7:8" },
	{ "1:2:3:4:5:6:1.2.3.4", AF_INET6, "1:2:3:4:5:6:102:304" },
	{ "64:ff9b::7f00:1", AF_INET6, "64:ff9b::7f00:1" },
	{ "fd00:ec2::254", AF_INET6, "fd00:ec2::254" },
	{ "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", AF_INET6,
	    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff" },
};

START_TEST(test_parse_ok)
{
	struct pol_addr	 a, b;
	char		 buf[INET6_ADDRSTRLEN];
	int		 i;

	memset(&a, 0xaa, sizeof(a));
	ck_assert_msg(pol_addr_parse(parse_ok_rows[_i].text, &a) == 0, "%s",
	    parse_ok_rows[_i].text);
	ck_assert_int_eq(a.family, parse_ok_rows[_i].family);
	if (a.family == AF_INET)
		for (i = 4; i < 16; i++)
			ck_assert_int_eq(a.a[i], 0);
	ck_assert_str_eq(fmt(&a, buf), parse_ok_rows[_i].canon);
	/* Round trip: the canonical form parses to the same bytes. */
	ck_assert_int_eq(pol_addr_parse(buf, &b), 0);
	ck_assert(memcmp(&a, &b, sizeof(a)) == 0);
}
END_TEST

static const char *const parse_bad_rows[] = {
	/* egress.md §9 item 10: alternate IPv4 literals */
	"2852039166", "0xA9FEA9FE", "0xa9fea9fe", "0251.0376.0251.0376",
	"0251.254.169.254", "425.510.425.510", "0xa9.0xfe.0xa9.0xfe",
	"169.254.43518", "169.16689662", "127.1", "127.0.1", "017700000001",
	"0x7f.1", "0x7f000001", "1e1.0.0.1",
	/* leading zeros */
	"01.2.3.4", "1.2.3.04", "00.0.0.0", "0.0.0.00", "169.254.169.0254",
	"010.0.0.1",
	/* out of range, wrong shape */
	"256.0.0.0", "1.2.3.256", "1.2.3.4444", "1000.0.0.0", "1..2.3",
	"1.2.3.", ".1.2.3", "1.2.3", "1.2.3.4.5", "169.254.169.254.",
	".169.254.169.254", "1.2.3.-4", "-1.2.3.4", "+1.2.3.4", "1.2.+3.4",
	/* spaces and trailing garbage */
	"", " ", " 169.254.169.254", "169.254.169.254 ", "169.254.169.254\n",
	"169.254.169.254\t", "169. 254.169.254", "169.254.169.254x",
	"169.254.169.254/32", "1.2.3.4:80", "::1 ", " ::1", "::1\n",
	/* names are not addresses */
	"localhost", "metadata.google.internal", "instance-data",
	"169.254.169.254.nip.io", "\xd9\xa1.\xd9\xa2.\xd9\xa3.\xd9\xa4",
	/* IPv6 that is not plain */
	"[::1]", "[::ffff:169.254.169.254]",
	"[0:0:0:0:0:ffff:169.254.169.254]", "::1%lo", "fe80::1%eth0",
	"fe80::1%1", ":::", ":", "1:2:3:4:5:6:7:8:9", "0:0:0:0:0:0:0:0:0",
	"12345::", "g::", "::ffff:01.2.3.4", "::ffff:1.2.3",
	"::ffff:1.2.3.4.5", "::ffff:256.1.1.1", "1::2::3", "1:2:3:4:5:6:7",
	"::ffff:169.254.169.254/128", "2001:db8::1/64",
	/* over the 45-character limit */
	"0000:0000:0000:0000:0000:ffff:255.255.255.2550",
	"00000:0000:0000:0000:0000:ffff:255.255.255.255",
};

START_TEST(test_parse_bad)
{
	struct pol_addr	 a, before;

	memset(&a, 0x5a, sizeof(a));
	before = a;
	errno = 0;
	ck_assert_msg(pol_addr_parse(parse_bad_rows[_i], &a) == -1,
	    "accepted \"%s\"", parse_bad_rows[_i]);
	ck_assert_int_eq(errno, EINVAL);
	/* The out-param is untouched on failure. */
	ck_assert(memcmp(&a, &before, sizeof(a)) == 0);
}
END_TEST

/* ---------------------------------------------------------------- CIDR */

static const struct {
	const char	*text;
	const char	*canon;		/* addr/prefix */
} cidr_ok_rows[] = {
	{ "10.0.0.0/8", "10.0.0.0/8" },
	{ "0.0.0.0/0", "0.0.0.0/0" },
	{ "128.0.0.0/1", "128.0.0.0/1" },
	{ "169.254.169.254", "169.254.169.254/32" },
	{ "169.254.169.254/32", "169.254.169.254/32" },
	{ "192.168.0.0/16", "192.168.0.0/16" },
	{ "100.64.0.0/10", "100.64.0.0/10" },
	{ "172.16.0.0/12", "172.16.0.0/12" },
	{ "::/0", "::/0" },
	{ "::1", "::1/128" },
	{ "::1/128", "::1/128" },
	{ "8000::/1", "8000::/1" },
	{ "2001:db8::/32", "2001:db8::/32" },
	{ "2001:DB8::/32", "2001:db8::/32" },
	{ "fe80::/10", "fe80::/10" },
	{ "fc00::/7", "fc00::/7" },
	{ "::ffff:0:0/96", "::ffff:0.0.0.0/96" },
	{ "64:ff9b:1::/48", "64:ff9b:1::/48" },
};

START_TEST(test_cidr_ok)
{
	struct pol_cidr	 c, d;
	char		 buf[INET6_ADDRSTRLEN], out[64];

	ck_assert_msg(pol_cidr_parse(cidr_ok_rows[_i].text, &c) == 0, "%s",
	    cidr_ok_rows[_i].text);
	snprintf(out, sizeof(out), "%s/%u", fmt(&c.addr, buf), c.prefix);
	ck_assert_str_eq(out, cidr_ok_rows[_i].canon);
	ck_assert(pol_cidr_contains(&c, &c.addr));
	ck_assert_int_eq(pol_cidr_parse(out, &d), 0);
	ck_assert(memcmp(&c, &d, sizeof(c)) == 0);
}
END_TEST

static const struct {
	const char	*text;
	const char	*why;		/* a word the error message must hold */
} cidr_bad_rows[] = {
	{ "10.0.0.1/8", "host bits" },
	{ "11.0.0.0/7", "host bits" },
	{ "169.254.169.254/16", "host bits" },
	{ "2001:db8::1/32", "host bits" },
	{ "::1/127", "host bits" },
	{ "fe80::1/10", "host bits" },
	{ "10.0.0.0/33", "range" },
	{ "0.0.0.0/100", "range" },
	{ "2001:db8::/129", "range" },
	{ "::/999", "range" },
	{ "10.0.0.0/4294967304", "range" },
	{ "10.0.0.0/99999999999999999999", "range" },
	{ "10.0.0.0/-1", "decimal" },
	{ "10.0.0.0/08", "decimal" },
	{ "10.0.0.0/00", "decimal" },
	{ "2001:db8::/032", "decimal" },
	{ "::/0000", "decimal" },
	{ "10.0.0.0/+8", "decimal" },
	{ "10.0.0.0/ 8", "decimal" },
	{ "10.0.0.0/", "decimal" },
	{ "10.0.0.0/0x8", "trailing" },
	{ "10.0.0.0/8 ", "trailing" },
	{ "10.0.0.0/8/8", "trailing" },
	{ "10.0.0.0/8.0", "trailing" },
	{ "::ffff:0:0/96x", "trailing" },
	{ "10.0.0.0 /8", "address" },
	{ "/8", "address" },
	{ "/", "address" },
	{ "010.0.0.0/8", "address" },
	{ "10/8", "address" },
	{ "10.0/16", "address" },
	{ "0xA/8", "address" },
	{ "fe80::/10%eth0", "trailing" },
	{ "fe80::%eth0/10", "address" },
	{ "[::1]/128", "address" },
	{ ":/8", "address" },
	{ "", "empty" },
	{ "0000:0000:0000:0000:0000:ffff:255.255.255.255/1288", "longer" },
};

START_TEST(test_cidr_bad)
{
	struct pol_cidr	 c, before;
	char		 err[128];

	memset(&c, 0x5a, sizeof(c));
	before = c;
	err[0] = '\0';
	errno = 0;
	ck_assert_msg(pol_cidr_parse_err(cidr_bad_rows[_i].text, &c, err,
	    sizeof(err)) == -1, "accepted \"%s\"", cidr_bad_rows[_i].text);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_msg(strstr(err, cidr_bad_rows[_i].why) != NULL,
	    "\"%s\": message \"%s\" lacks \"%s\"", cidr_bad_rows[_i].text, err,
	    cidr_bad_rows[_i].why);
	ck_assert(memcmp(&c, &before, sizeof(c)) == 0);
	ck_assert_int_eq(pol_cidr_parse(cidr_bad_rows[_i].text, &c), -1);
	/* A tiny or absent error buffer is fine. */
	ck_assert_int_eq(pol_cidr_parse_err(cidr_bad_rows[_i].text, &c, err,
	    1), -1);
	ck_assert_str_eq(err, "");
	ck_assert_int_eq(pol_cidr_parse_err(cidr_bad_rows[_i].text, &c, NULL,
	    64), -1);
}
END_TEST

static const struct {
	const char	*cidr;
	const char	*addr;
	bool		 in;
} contains_rows[] = {
	{ "10.0.0.0/8", "10.0.0.0", true },
	{ "10.0.0.0/8", "10.255.255.255", true },
	{ "10.0.0.0/8", "11.0.0.0", false },
	{ "10.0.0.0/8", "9.255.255.255", false },
	{ "172.16.0.0/12", "172.31.255.255", true },
	{ "172.16.0.0/12", "172.32.0.0", false },
	{ "0.0.0.0/0", "255.255.255.255", true },
	{ "1.2.3.4", "1.2.3.4", true },
	{ "1.2.3.4", "1.2.3.5", false },
	{ "10.0.0.0/8", "::ffff:10.0.0.1", false },
	{ "::ffff:0:0/96", "10.0.0.1", false },
	{ "::/0", "10.0.0.1", false },
	{ "0.0.0.0/0", "::", false },
	{ "fc00::/7", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true },
	{ "fc00::/7", "fe00::", false },
	{ "fc00::/7", "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false },
	{ "fe80::/10", "febf::", true },
	{ "fe80::/10", "fec0::", false },
	{ "2001:db8::/32", "2001:db8:ffff::1", true },
	{ "2001:db8::/32", "2001:db9::", false },
	{ "::/0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true },
	{ "::1", "::1", true },
	{ "::1", "::", false },
};

START_TEST(test_contains)
{
	struct pol_cidr	 c;
	struct pol_addr	 a;

	ck_assert_int_eq(pol_cidr_parse(contains_rows[_i].cidr, &c), 0);
	a = addr(contains_rows[_i].addr);
	ck_assert_msg(pol_cidr_contains(&c, &a) == contains_rows[_i].in,
	    "%s in %s", contains_rows[_i].addr, contains_rows[_i].cidr);
}
END_TEST

/* ------------------------------------------------------ the kernel tables */

static const struct {
	const char		*cidr;
	enum pol_addr_class	 first, last;
} deny4_rows[] = {
	{ "0.0.0.0/8", C(UNSPECIFIED), C(UNSPECIFIED) },
	{ "100.100.100.200/32", C(METADATA), C(METADATA) },
	{ "127.0.0.0/8", C(LOOPBACK), C(LOOPBACK) },
	{ "168.63.129.16/32", C(METADATA), C(METADATA) },
	{ "169.254.0.0/16", C(LINK_LOCAL), C(LINK_LOCAL) },
	{ "192.0.0.0/24", C(RESERVED), C(RESERVED) },
	{ "192.88.99.0/24", C(RESERVED), C(RESERVED) },
	{ "224.0.0.0/4", C(MULTICAST), C(MULTICAST) },
	{ "240.0.0.0/4", C(RESERVED), C(RESERVED) },
}, deny6_rows[] = {
	{ "::/3", C(UNSPECIFIED), C(RESERVED) },
	{ "2001::/32", C(RESERVED), C(UNSPECIFIED) },	/* Teredo xor */
	{ "2002::/16", C(UNSPECIFIED), C(RESERVED) },
	{ "4000::/2", C(RESERVED), C(RESERVED) },
	{ "8000::/2", C(RESERVED), C(RESERVED) },
	{ "c000::/3", C(RESERVED), C(RESERVED) },
	{ "e000::/4", C(RESERVED), C(RESERVED) },
	{ "f000::/5", C(RESERVED), C(RESERVED) },
	{ "f800::/6", C(RESERVED), C(RESERVED) },
	{ "fd00:42::42/128", C(METADATA), C(METADATA) },
	{ "fd00:ec2::23/128", C(METADATA), C(METADATA) },
	{ "fd00:ec2::123/128", C(METADATA), C(METADATA) },
	{ "fd00:ec2::253/128", C(METADATA), C(METADATA) },
	{ "fd00:ec2::254/128", C(METADATA), C(METADATA) },
	{ "fd20:ce::254/128", C(METADATA), C(METADATA) },
	{ "fe00::/9", C(RESERVED), C(RESERVED) },
	{ "fe80::/10", C(LINK_LOCAL), C(LINK_LOCAL) },
	{ "fec0::/10", C(RESERVED), C(RESERVED) },
	{ "ff00::/8", C(MULTICAST), C(MULTICAST) },
}, priv4_rows[] = {
	{ "10.0.0.0/8", C(PRIVATE), C(PRIVATE) },
	{ "100.64.0.0/10", C(CGNAT), C(CGNAT) },
	{ "172.16.0.0/12", C(PRIVATE), C(PRIVATE) },
	{ "192.0.2.0/24", C(DOCUMENTATION), C(DOCUMENTATION) },
	{ "192.168.0.0/16", C(PRIVATE), C(PRIVATE) },
	{ "198.18.0.0/15", C(BENCHMARKING), C(BENCHMARKING) },
	{ "198.51.100.0/24", C(DOCUMENTATION), C(DOCUMENTATION) },
	{ "203.0.113.0/24", C(DOCUMENTATION), C(DOCUMENTATION) },
}, priv6_rows[] = {
	{ "2001:2::/48", C(BENCHMARKING), C(BENCHMARKING) },
	{ "2001:db8::/32", C(DOCUMENTATION), C(DOCUMENTATION) },
	{ "3fff::/20", C(DOCUMENTATION), C(DOCUMENTATION) },
	{ "fc00::/7", C(ULA), C(ULA) },
};

static struct pol_addr
last_of(const struct pol_cidr *c)
{
	struct pol_addr	 a = c->addr;
	int		 n = a.family == AF_INET ? 4 : 16, i;

	for (i = 0; i < n; i++) {
		if (c->prefix <= i * 8)
			a.a[i] = 0xff;
		else if (c->prefix < i * 8 + 8)
			a.a[i] |= (uint8_t)(0xff >> (c->prefix - i * 8));
	}
	return a;
}

static void
check_table(const struct pol_cidr *t, size_t n, int family, bool deny,
    const char *const *want, const enum pol_addr_class *first,
    const enum pol_addr_class *last, size_t nwant)
{
	struct pol_addr_info	 info;
	struct pol_addr		 l;
	char			 buf[INET6_ADDRSTRLEN], text[64];
	size_t			 i;

	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(n, nwant);
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(t[i].addr.family, family);
		snprintf(text, sizeof(text), "%s/%u", fmt(&t[i].addr, buf),
		    t[i].prefix);
		ck_assert_str_eq(text, want[i]);
		pol_addr_classify(&t[i].addr, NULL, 0, &info);
		ck_assert_msg(info.cls == first[i], "first of %s: %s", text,
		    pol_addr_class_name(info.cls));
		ck_assert(deny ? pol_addr_class_always_denied(info.cls) :
		    pol_addr_class_private(info.cls));
		l = last_of(&t[i]);
		ck_assert(pol_cidr_contains(&t[i], &l));
		pol_addr_classify(&l, NULL, 0, &info);
		ck_assert_msg(info.cls == last[i], "last of %s (%s): %s", text,
		    fmt(&l, buf), pol_addr_class_name(info.cls));
		ck_assert(deny ? pol_addr_class_always_denied(info.cls) :
		    pol_addr_class_private(info.cls));
		/* Sorted and disjoint: the next range starts after our end. */
		if (i + 1 < n)
			ck_assert_msg(memcmp(l.a, t[i + 1].addr.a,
			    family == AF_INET ? 4 : 16) < 0,
			    "%s overlaps or is out of order", text);
	}
}

#define CHECK_TABLE(getter, fam, deny, rows) do {			\
	const char		*w[NELEM(rows)];			\
	enum pol_addr_class	 f[NELEM(rows)], l[NELEM(rows)];	\
	const struct pol_cidr	*t;					\
	size_t			 k, n = 999;				\
									\
	for (k = 0; k < NELEM(rows); k++) {				\
		w[k] = rows[k].cidr;					\
		f[k] = rows[k].first;					\
		l[k] = rows[k].last;					\
	}								\
	t = getter(fam, &n);						\
	check_table(t, n, fam, deny, w, f, l, NELEM(rows));		\
} while (0)

START_TEST(test_tables)
{
	CHECK_TABLE(pol_deny_ranges, AF_INET, true, deny4_rows);
	CHECK_TABLE(pol_deny_ranges, AF_INET6, true, deny6_rows);
	CHECK_TABLE(pol_private_ranges, AF_INET, false, priv4_rows);
	CHECK_TABLE(pol_private_ranges, AF_INET6, false, priv6_rows);
}
END_TEST

static bool
in_table(const struct pol_cidr *t, size_t n, const struct pol_addr *a)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		if (pol_cidr_contains(&t[i], a))
			return true;
	return false;
}

/* The classifier and the kernel tables agree on a. */
static void
agree(const struct pol_addr *a)
{
	const struct pol_cidr	*d, *p;
	struct pol_addr_info	 info;
	size_t			 nd, np;
	bool			 ind, inp, denied, priv;
	char			 buf[INET6_ADDRSTRLEN];

	d = pol_deny_ranges(a->family, &nd);
	p = pol_private_ranges(a->family, &np);
	ind = in_table(d, nd, a);
	inp = in_table(p, np, a);
	pol_addr_classify(a, NULL, 0, &info);
	denied = pol_addr_class_always_denied(info.cls);
	priv = pol_addr_class_private(info.cls);
	/*
	 * Plain ifs, not ck_assert: this runs a million times and Check
	 * records a mark point (a pipe write) for every passing assert.
	 */
	if (denied != ind)
		ck_abort_msg("%s: class %s, deny table %d", fmt(a, buf),
		    pol_addr_class_name(info.cls), ind);
	if (!ind && priv != inp)
		ck_abort_msg("%s: class %s, private table %d", fmt(a, buf),
		    pol_addr_class_name(info.cls), inp);
	if (denied + priv + (info.cls == POL_ADDR_PUBLIC) != 1)
		ck_abort_msg("%s: class %s in no or two sets", fmt(a, buf),
		    pol_addr_class_name(info.cls));
}

/* a +/- 1 at the last byte, with carry. */
static struct pol_addr
step(struct pol_addr a, int delta)
{
	int	 i = a.family == AF_INET ? 3 : 15;

	for (; i >= 0; i--) {
		a.a[i] = (uint8_t)(a.a[i] + delta);
		if ((delta > 0 && a.a[i] != 0) || (delta < 0 && a.a[i] != 0xff))
			break;
	}
	return a;
}

static void
agree_around(const struct pol_cidr *t, size_t n)
{
	struct pol_addr	 l;
	size_t		 i;

	for (i = 0; i < n; i++) {
		l = last_of(&t[i]);
		agree(&t[i].addr);
		agree(&l);
		agree((struct pol_addr[]){ step(t[i].addr, -1) });
		agree((struct pol_addr[]){ step(l, 1) });
	}
}

START_TEST(test_tables_agree_boundaries)
{
	const int		 fams[] = { AF_INET, AF_INET6 };
	const struct pol_cidr	*t;
	size_t			 n, i, j;
	struct pol_addr		 a;

	for (i = 0; i < NELEM(fams); i++) {
		t = pol_deny_ranges(fams[i], &n);
		agree_around(t, n);
		t = pol_private_ranges(fams[i], &n);
		agree_around(t, n);
	}
	for (j = 0; j < NELEM(class_rows); j++) {
		a = addr(class_rows[j].text);
		agree(&a);
		agree((struct pol_addr[]){ step(a, 1) });
		agree((struct pol_addr[]){ step(a, -1) });
	}
}
END_TEST

/*
 * A sweep: every /16 of IPv4 and every leading 16 bits of IPv6, with low
 * bits all zero, all one, and pseudo-random (a fixed LCG, so the run is
 * the same every time), and every IPv4 sample wrapped in each embedded form.
 */
START_TEST(test_tables_agree_sweep)
{
	struct pol_addr	 a;
	uint32_t	 x = 12345, hi;
	int		 pat, k;

	for (hi = 0; hi < 65536; hi++) {
		for (pat = 0; pat < 3; pat++) {
			memset(&a, 0, sizeof(a));
			a.family = AF_INET;
			a.a[0] = (uint8_t)(hi >> 8);
			a.a[1] = (uint8_t)hi;
			x = x * 1103515245u + 12345u;
			a.a[2] = pat == 0 ? 0 : pat == 1 ? 0xff : (uint8_t)(x >> 16);
			a.a[3] = pat == 0 ? 0 : pat == 1 ? 0xff : (uint8_t)(x >> 24);
			agree(&a);

			memset(&a, 0, sizeof(a));
			a.family = AF_INET6;
			a.a[0] = (uint8_t)(hi >> 8);
			a.a[1] = (uint8_t)hi;
			for (k = 2; k < 16; k++) {
				x = x * 1103515245u + 12345u;
				a.a[k] = pat == 0 ? 0 : pat == 1 ? 0xff :
				    (uint8_t)(x >> 16);
			}
			agree(&a);
		}
	}
}
END_TEST

static const char *const wrap_fmt[] = {
	"::ffff:%s", "::%s", "64:ff9b::%s", "64:ff9b:1:ab::%s",
};

START_TEST(test_embedded_agree)
{
	struct pol_addr_info	 outer, inner;
	struct pol_addr		 v4, v6;
	char			 text[80];
	size_t			 j, w;
	enum pol_addr_class	 want;

	for (j = 0; j < NELEM(class_rows); j++) {
		if (strchr(class_rows[j].text, ':') != NULL)
			continue;
		v4 = addr(class_rows[j].text);
		pol_addr_classify(&v4, NULL, 0, &inner);
		for (w = 0; w < NELEM(wrap_fmt) + 2; w++) {
			if (w < NELEM(wrap_fmt)) {
				snprintf(text, sizeof(text), wrap_fmt[w],
				    class_rows[j].text);
				if (strcmp(text, "::0.0.0.0") == 0 ||
				    strcmp(text, "::0.0.0.1") == 0)
					continue;
				v6 = addr(text);
			} else {
				memset(&v6, 0, sizeof(v6));
				v6.family = AF_INET6;
				v6.a[0] = 0x20;
				if (w == NELEM(wrap_fmt)) {	/* 6to4 */
					v6.a[1] = 0x02;
					memcpy(v6.a + 2, v4.a, 4);
				} else {			/* Teredo */
					v6.a[1] = 0x01;
					for (int i = 0; i < 4; i++)
						v6.a[12 + i] = (uint8_t)~v4.a[i];
				}
			}
			pol_addr_classify(&v6, NULL, 0, &outer);
			ck_assert_int_ne(outer.embed, POL_EMBED_NONE);
			ck_assert(memcmp(&outer.inner, &v4, sizeof(v4)) == 0);
			/* Embedded forms are never public or merely private. */
			ck_assert(pol_addr_class_always_denied(outer.cls));
			want = pol_addr_class_always_denied(inner.cls) ?
			    inner.cls : POL_ADDR_RESERVED;
			ck_assert_msg(outer.cls == want, "%s wrapped %zu: %s",
			    class_rows[j].text, w,
			    pol_addr_class_name(outer.cls));
			agree(&v6);
		}
	}
}
END_TEST

/* ----------------------------------------------------------- class sets */

static const struct {
	enum pol_addr_class	 cls;
	const char		*name;
	bool			 denied, priv;
} classset_rows[] = {
	{ C(PUBLIC), "public", false, false },
	{ C(METADATA), "metadata", true, false },
	{ C(LOOPBACK), "loopback", true, false },
	{ C(UNSPECIFIED), "unspecified", true, false },
	{ C(LINK_LOCAL), "link-local", true, false },
	{ C(PRIVATE), "private", false, true },
	{ C(CGNAT), "cgnat", false, true },
	{ C(DOCUMENTATION), "documentation", false, true },
	{ C(BENCHMARKING), "benchmarking", false, true },
	{ C(MULTICAST), "multicast", true, false },
	{ C(RESERVED), "reserved", true, false },
	{ C(ULA), "ula", false, true },
	{ C(_COUNT), "invalid", true, false },
	{ (enum pol_addr_class)1000, "invalid", true, false },
	{ (enum pol_addr_class)-1, "invalid", true, false },
};

START_TEST(test_class_sets)
{
	ck_assert_str_eq(pol_addr_class_name(classset_rows[_i].cls),
	    classset_rows[_i].name);
	ck_assert_int_eq(pol_addr_class_always_denied(classset_rows[_i].cls),
	    classset_rows[_i].denied);
	ck_assert_int_eq(pol_addr_class_private(classset_rows[_i].cls),
	    classset_rows[_i].priv);
}
END_TEST

/* --------------------------------------------------------------- limits */

START_TEST(test_limits_null)
{
	struct pol_addr_info	 info;
	struct pol_addr		 a;
	struct pol_cidr		 c;
	char			 buf[INET6_ADDRSTRLEN];
	size_t			 n = 7;

	ck_assert_int_eq(pol_addr_parse(NULL, &a), -1);
	ck_assert_int_eq(pol_addr_parse("1.2.3.4", NULL), -1);
	ck_assert_int_eq(pol_cidr_parse(NULL, &c), -1);
	ck_assert_int_eq(pol_cidr_parse("1.2.3.0/24", NULL), -1);
	ck_assert_ptr_null(pol_addr_format(NULL, buf, sizeof(buf)));
	a = addr("1.2.3.4");
	ck_assert_ptr_null(pol_addr_format(&a, NULL, sizeof(buf)));
	ck_assert(!pol_cidr_contains(NULL, &a));
	ck_assert_int_eq(pol_cidr_parse("0.0.0.0/0", &c), 0);
	ck_assert(!pol_cidr_contains(&c, NULL));

	/* Unreadable input is denied, not guessed at. */
	pol_addr_classify(NULL, NULL, 0, &info);
	ck_assert_int_eq(info.cls, POL_ADDR_RESERVED);
	memset(&a, 0, sizeof(a));
	a.family = AF_UNIX;
	pol_addr_classify(&a, NULL, 0, &info);
	ck_assert_int_eq(info.cls, POL_ADDR_RESERVED);
	a.family = 0;
	pol_addr_classify(&a, NULL, 0, &info);
	ck_assert_int_eq(info.cls, POL_ADDR_RESERVED);
	errno = 0;
	ck_assert_ptr_null(pol_addr_format(&a, buf, sizeof(buf)));
	ck_assert_int_eq(errno, EAFNOSUPPORT);
	pol_addr_classify(&a, NULL, 0, NULL);	/* no crash */

	ck_assert_ptr_null(pol_deny_ranges(AF_UNIX, &n));
	ck_assert_uint_eq(n, 0);
	n = 7;
	ck_assert_ptr_null(pol_private_ranges(0, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_nonnull(pol_deny_ranges(AF_INET, NULL));
	ck_assert_ptr_nonnull(pol_private_ranges(AF_INET6, NULL));
}
END_TEST

START_TEST(test_limits_format_buffer)
{
	struct pol_addr	 a;
	char		 buf[INET6_ADDRSTRLEN];

	a = addr("255.255.255.255");
	errno = 0;
	ck_assert_ptr_null(pol_addr_format(&a, buf, 15));
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_ptr_null(pol_addr_format(&a, buf, 0));
	ck_assert_ptr_nonnull(pol_addr_format(&a, buf, 16));
	ck_assert_str_eq(buf, "255.255.255.255");
	a = addr("::ffff:255.255.255.255");
	ck_assert_ptr_null(pol_addr_format(&a, buf, 22));
	ck_assert_ptr_nonnull(pol_addr_format(&a, buf, 23));
	a = addr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
	ck_assert_ptr_nonnull(pol_addr_format(&a, buf, INET6_ADDRSTRLEN));
}
END_TEST

START_TEST(test_limits_oversized)
{
	struct pol_addr	 a;
	struct pol_cidr	 c;
	char		*big;
	size_t		 n = 1 << 20;

	big = malloc(n + 1);
	ck_assert_ptr_nonnull(big);
	memset(big, '1', n);
	big[n] = '\0';
	ck_assert_int_eq(pol_addr_parse(big, &a), -1);
	ck_assert_int_eq(pol_cidr_parse(big, &c), -1);
	/* A valid address followed by a megabyte of zeros in the prefix. */
	memcpy(big, "10.0.0.0/", 9);
	memset(big + 9, '0', n - 9);
	ck_assert_int_eq(pol_cidr_parse(big, &c), -1);
	/* Colons all the way. */
	memset(big, ':', n);
	ck_assert_int_eq(pol_addr_parse(big, &a), -1);
	ck_assert_int_eq(pol_cidr_parse(big, &c), -1);
	free(big);
}
END_TEST

START_TEST(test_limits_nonzero_v4_tail)
{
	struct pol_addr_info	 info;
	struct pol_addr		 a;
	struct pol_cidr		 c;
	char			 buf[INET6_ADDRSTRLEN];

	/* Only the first four bytes of an AF_INET address are ever read. */
	a = addr("169.254.169.254");
	memset(a.a + 4, 0xee, 12);
	pol_addr_classify(&a, NULL, 0, &info);
	ck_assert_int_eq(info.cls, POL_ADDR_METADATA);
	ck_assert_str_eq(fmt(&a, buf), "169.254.169.254");
	ck_assert_int_eq(pol_cidr_parse("169.254.0.0/16", &c), 0);
	ck_assert(pol_cidr_contains(&c, &a));
	c.prefix = 33;	/* corrupt: no match rather than an over-read */
	ck_assert(!pol_cidr_contains(&c, &a));
}
END_TEST

static Suite *
classify_suite(void)
{
	Suite	*s = suite_create("policy_classify");
	TCase	*core = tcase_create("Core");
	TCase	*lim = tcase_create("Limits");

	tcase_add_loop_test(core, test_classify_table, 0, NELEM(class_rows));
	tcase_add_loop_test(core, test_treat_table, 0, NELEM(treat_rows));
	tcase_add_loop_test(core, test_parse_ok, 0, NELEM(parse_ok_rows));
	tcase_add_loop_test(core, test_cidr_ok, 0, NELEM(cidr_ok_rows));
	tcase_add_loop_test(core, test_contains, 0, NELEM(contains_rows));
	tcase_add_loop_test(core, test_class_sets, 0, NELEM(classset_rows));
	tcase_add_test(core, test_tables);
	tcase_add_test(core, test_tables_agree_boundaries);
	tcase_add_test(core, test_embedded_agree);
	tcase_add_loop_test(lim, test_parse_bad, 0, NELEM(parse_bad_rows));
	tcase_add_loop_test(lim, test_cidr_bad, 0, NELEM(cidr_bad_rows));
	tcase_add_test(lim, test_tables_agree_sweep);
	tcase_add_test(lim, test_limits_null);
	tcase_add_test(lim, test_limits_format_buffer);
	tcase_add_test(lim, test_limits_oversized);
	tcase_add_test(lim, test_limits_nonzero_v4_tail);
	tcase_set_timeout(lim, 120);
	suite_add_tcase(s, core);
	suite_add_tcase(s, lim);
	return s;
}

int
main(void)
{
	SRunner	*sr = srunner_create(classify_suite());
	int	 failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
