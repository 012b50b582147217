/*
 * check_ct.c: ct_get, the read of one conntrack entry by its original
 * tuple that interim flow records rest on. The entries are made through
 * ctnetlink by the test itself (no traffic needed) in a network namespace
 * of the test's own (CK_FORK): the one asked for is found with its tuple
 * and its reply source, a neighbour with one port different is not
 * mistaken for it, an absent one is ENOENT, and bad arguments EINVAL.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <netinet/in.h>

#include <check.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

#include "netns/ct.h"

static int	have_ns;
static char	err[256];

static void
setup(void)
{
	have_ns = geteuid() == 0 && unshare(CLONE_NEWNET) == 0;
	if (!have_ns)
		fprintf(stderr, "check_ct: SKIP: needs root\n");
}

static void
tuple(struct nlmsghdr *nlh, uint16_t type, const char *src, const char *dst,
    uint16_t sport, uint16_t dport)
{
	struct nlattr *t, *n;
	uint8_t a[4];

	t = mnl_attr_nest_start(nlh, type);
	n = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
	inet_pton(AF_INET, src, a);
	mnl_attr_put(nlh, CTA_IP_V4_SRC, 4, a);
	inet_pton(AF_INET, dst, a);
	mnl_attr_put(nlh, CTA_IP_V4_DST, 4, a);
	mnl_attr_nest_end(nlh, n);
	n = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
	mnl_attr_put_u8(nlh, CTA_PROTO_NUM, IPPROTO_UDP);
	mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT, htons(sport));
	mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT, htons(dport));
	mnl_attr_nest_end(nlh, n);
	mnl_attr_nest_end(nlh, t);
}

/* A UDP entry src:sport -> dst:dport whose reply comes from rsrc. */
static void
make_entry(const char *src, const char *dst, const char *rsrc,
    uint16_t sport, uint16_t dport)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl;
	struct nlmsghdr *nlh;
	struct nfgenmsg *g;
	ssize_t n;

	memset(buf, 0, sizeof(buf));
	nl = mnl_socket_open(NETLINK_NETFILTER);
	ck_assert_ptr_nonnull(nl);
	ck_assert_int_eq(mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID), 0);
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL |
	    NLM_F_ACK;
	nlh->nlmsg_seq = (uint32_t)time(NULL);
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = AF_INET;
	g->version = NFNETLINK_V0;
	tuple(nlh, CTA_TUPLE_ORIG, src, dst, sport, dport);
	tuple(nlh, CTA_TUPLE_REPLY, rsrc, src, dport, sport);
	mnl_attr_put_u32(nlh, CTA_TIMEOUT, htonl(60));
	ck_assert_int_ge(mnl_socket_sendto(nl, nlh, nlh->nlmsg_len), 0);
	n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_msg(mnl_cb_run(buf, (size_t)n, 0, 0, NULL, NULL) >= 0,
	    "conntrack entry: %s", strerror(errno));
	mnl_socket_close(nl);
}

static struct ct_flow
flow(const char *src, const char *dst, uint16_t sport, uint16_t dport)
{
	struct ct_flow f;

	memset(&f, 0, sizeof(f));
	f.family = AF_INET;
	f.proto = IPPROTO_UDP;
	inet_pton(AF_INET, src, f.src);
	inet_pton(AF_INET, dst, f.dst);
	f.sport = sport;
	f.dport = dport;
	return f;
}

START_TEST(get_finds_by_tuple)
{
	struct ct *ct;
	struct ct_flow f;
	struct ct_end e;
	uint8_t want[4];

	if (!have_ns)
		return;
	make_entry("10.231.0.2", "192.0.2.10", "192.0.2.10", 40000, 53);
	make_entry("10.231.0.2", "192.0.2.10", "198.51.100.7", 40001, 53);
	ct = ct_new(err, sizeof(err));
	ck_assert_msg(ct != NULL, "ct_new: %s", err);

	f = flow("10.231.0.2", "192.0.2.10", 40001, 53);
	ck_assert_msg(ct_get(ct, &f, &e, err, sizeof(err)) == 0, "%s", err);
	ck_assert(!e.created);
	ck_assert_uint_eq(e.f.family, AF_INET);
	ck_assert_uint_eq(e.f.proto, IPPROTO_UDP);
	ck_assert_uint_eq(e.f.sport, 40001);
	ck_assert_uint_eq(e.f.dport, 53);
	ck_assert_mem_eq(e.f.src, f.src, 4);
	ck_assert_mem_eq(e.f.dst, f.dst, 4);
	/* The neighbour one port off answers from elsewhere: this is the
	 * entry asked for, not the first of the table. */
	inet_pton(AF_INET, "198.51.100.7", want);
	ck_assert_mem_eq(e.f.rsrc, want, 4);

	f = flow("10.231.0.2", "192.0.2.10", 40002, 53);
	errno = 0;
	ck_assert_int_eq(ct_get(ct, &f, &e, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ct_free(ct);
}
END_TEST

START_TEST(get_contract)
{
	struct ct *ct;
	struct ct_flow f = flow("10.231.0.2", "192.0.2.10", 1, 2);
	struct ct_end e;

	if (!have_ns)
		return;
	ct = ct_new(err, sizeof(err));
	ck_assert_msg(ct != NULL, "ct_new: %s", err);
	ck_assert_int_eq(ct_get(NULL, &f, &e, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ct_get(ct, NULL, &e, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ct_get(ct, &f, NULL, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	f.family = AF_INET6;
	ck_assert_int_eq(ct_get(ct, &f, &e, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ct_free(ct);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("ct");
	TCase	*tc = tcase_create("get");
	SRunner	*sr;
	int	 nf;

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, get_finds_by_tuple);
	tcase_add_test(tc, get_contract);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
