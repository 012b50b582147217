/*
 * check_fw_learned.c: what the fw handle knows of a sandbox's learned
 * destinations, and what is left of a sandbox once it is removed.
 *
 * A reload decides learned elements again by the names they were learned
 * for (fw_learned_list), the learn cap bounds how many one sandbox has
 * (fw_set_learn_cap), and removal leaves nothing keyed on the sandbox's
 * link for the next sandbox on that link (learned elements, quota). The
 * conntrack sweep (netns/ct) is checked for its contract on an empty
 * table. Each test runs in a network namespace of its own (CK_FORK).
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netns/ct.h"
#include "netns/fw.h"

static struct fw	*fw;
static int		 have_ns;
static char		 err[256];
static struct fw_cidr	 deny_list[1], private_list[1];

static struct fw_cidr
cidr4(const char *a, uint8_t prefix)
{
	struct fw_cidr	c;

	memset(&c, 0, sizeof(c));
	c.family = AF_INET;
	inet_pton(AF_INET, a, c.addr);
	c.prefix = prefix;
	return c;
}

static void
setup(void)
{
	struct fw_config	cfg;

	have_ns = geteuid() == 0 && unshare(CLONE_NEWNET) == 0;
	if (!have_ns) {
		fprintf(stderr, "check_fw_learned: SKIP: needs root\n");
		return;
	}
	fw = fw_new(err, sizeof(err));
	ck_assert_msg(fw != NULL, "fw_new: %s", err);
	memset(&cfg, 0, sizeof(cfg));
	inet_pton(AF_INET, "10.231.255.254", cfg.svc4);
	cfg.bridge_port = 8080;
	cfg.nflog_group = 7;
	cfg.pool = cidr4("10.231.0.0", 16);
	deny_list[0] = cidr4("169.254.0.0", 16);
	private_list[0] = cidr4("10.0.0.0", 8);
	cfg.deny = deny_list;
	cfg.ndeny = 1;
	cfg.private = private_list;
	cfg.nprivate = 1;
	ck_assert_msg(fw_init(fw, &cfg, 0, err, sizeof(err)) == 0,
	    "fw_init: %s", err);
}

static void
teardown(void)
{
	fw_free(fw);
	fw = NULL;
}

static void
sandbox(struct fw_sandbox *sb, const char *ifname, uint64_t quota)
{
	struct fw_rule	r;

	memset(sb, 0, sizeof(*sb));
	snprintf(sb->ifname, sizeof(sb->ifname), "%s", ifname);
	inet_pton(AF_INET, "10.231.0.2", sb->addr4);
	sb->quota_bytes = quota;
	sb->gen = 1;		/* a sandbox always has a generation */
	memset(&r, 0, sizeof(r));
	r.family = AF_INET;
	inet_pton(AF_INET, "192.0.2.10", r.addr);
	r.prefix = 32;
	r.proto = IPPROTO_TCP;
	r.port_lo = r.port_hi = 80;
	ck_assert_msg(fw_sandbox_add(fw, sb, &r, 1, NULL, 0, err,
	    sizeof(err)) == 0, "fw_sandbox_add: %s", err);
}

static struct fw_elem
elem(const char *ifname, const char *addr, uint16_t port, const char *name)
{
	struct fw_elem	e;

	memset(&e, 0, sizeof(e));
	snprintf(e.ifname, sizeof(e.ifname), "%s", ifname);
	e.family = AF_INET;
	inet_pton(AF_INET, addr, e.addr);
	e.proto = IPPROTO_TCP;
	e.port_lo = e.port_hi = port;
	e.timeout_ms = 60000;
	e.name = name;
	return e;
}

/* The names entry i of l was learned for, joined with ','. */
static void
names_of(const struct fw_learned *l, char *out, size_t len)
{
	const char	*n = l->names;
	size_t		 i, off = 0;

	out[0] = '\0';
	for (i = 0; i < l->nnames; i++, n += strlen(n) + 1)
		off += (size_t)snprintf(out + off, len - off, "%s%s",
		    i > 0 ? "," : "", n);
}

START_TEST(learned_names)
{
	struct fw_sandbox	 sb;
	struct fw_learned	*l = NULL;
	struct fw_elem		 e[2];
	size_t			 n = 0;
	char			 names[128];

	if (!have_ns)
		return;
	sandbox(&sb, "sl-1", 0);
	e[0] = elem("sl-1", "192.0.2.20", 443, "a.example.com");
	e[1] = elem("sl-1", "192.0.2.21", 443, "b.example.com");
	ck_assert_msg(fw_learn(fw, e, 2, err, sizeof(err)) == 0, "%s", err);
	/* The same destination learned for a second name (a CDN): both. */
	e[0].name = "c.example.com";
	ck_assert_int_eq(fw_learn(fw, e, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_learned_list(fw, "sl-1", &l, &n, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(n, 2);
	for (size_t i = 0; i < n; i++) {
		names_of(&l[i], names, sizeof(names));
		ck_assert(l[i].e.timeout_ms > 0 && l[i].e.timeout_ms <= 60000);
		if (l[i].e.addr[3] == 20)
			ck_assert_str_eq(names, "a.example.com,c.example.com");
		else
			ck_assert_str_eq(names, "b.example.com");
	}
	free(l);
	/* Unlearned: no longer listed. */
	ck_assert_int_eq(fw_unlearn(fw, e, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_learned_list(fw, "sl-1", &l, &n, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(l[0].e.addr[3], 21);
	free(l);
	ck_assert_int_eq(fw_learned_list(fw, "bad", &l, &n, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(learned_cap)
{
	struct fw_sandbox	sb, sb2;
	struct fw_elem		e[4], two[2];
	char			a[32];

	if (!have_ns)
		return;
	sandbox(&sb, "sl-1", 0);
	sandbox(&sb2, "sl-2", 0);
	fw_set_learn_cap(fw, 3);
	for (int i = 0; i < 4; i++) {
		snprintf(a, sizeof(a), "192.0.2.%d", 30 + i);
		e[i] = elem("sl-1", a, 443, "x.example.com");
	}
	ck_assert_msg(fw_learn(fw, e, 3, err, sizeof(err)) == 0, "%s", err);
	/* A fourth destination: refused whole, nothing added. */
	errno = 0;
	ck_assert_int_eq(fw_learn(fw, &e[3], 1, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 3);
	/* A batch of one known and one new one: refused whole as well. */
	two[0] = e[0];
	two[1] = e[3];
	ck_assert_int_eq(fw_learn(fw, two, 2, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 3);
	/* Refreshing what it has is no new destination. */
	ck_assert_msg(fw_learn(fw, e, 3, err, sizeof(err)) == 0, "%s", err);
	/* Another sandbox has a cap of its own. */
	for (int i = 0; i < 3; i++)
		memcpy(e[i].ifname, "sl-2", 5);
	ck_assert_msg(fw_learn(fw, e, 3, err, sizeof(err)) == 0, "%s", err);
	/* Once some went, there is room again. */
	memcpy(e[0].ifname, "sl-1", 5);
	ck_assert_int_eq(fw_unlearn(fw, e, 1, err, sizeof(err)), 0);
	ck_assert_msg(fw_learn(fw, &e[3], 1, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 3);
	/* A first batch larger than the cap, for a sandbox with none. */
	fw_set_learn_cap(fw, 1);
	ck_assert_int_eq(fw_sandbox_del(fw, &sb2, err, sizeof(err)), 0);
	sandbox(&sb2, "sl-2", 0);
	ck_assert_int_eq(fw_learn(fw, e + 1, 2, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOSPC);
}
END_TEST

/* A removed sandbox leaves nothing keyed on its link: the next sandbox
 * given that link starts empty. */
START_TEST(del_leaves_nothing)
{
	struct fw_sandbox	 sb;
	struct fw_learned	*l = NULL;
	struct fw_elem		 e[2];
	size_t			 n = 5;

	if (!have_ns)
		return;
	sandbox(&sb, "sl-1", 1 << 20);
	e[0] = elem("sl-1", "192.0.2.40", 443, "a.example.com");
	e[1] = elem("sl-1", "192.0.2.41", 443, "a.example.com");
	e[1].port_hi = 444;	/* a range: the sandbox's own set */
	e[0].flags = FW_ELEM_KEEP;
	ck_assert_msg(fw_learn(fw, e, 2, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 2);
	ck_assert_int_eq(fw_count_elems(fw, "quota", "sl-1", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(fw_sandbox_del(fw, &sb, err, sizeof(err)), 0);
	sandbox(&sb, "sl-1", 0);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(fw, "lkeep4", "sl-1", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(fw, "quota", "sl-1", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_learned_list(fw, "sl-1", &l, &n, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(n, 0);
	free(l);
}
END_TEST

START_TEST(ct_contract)
{
	struct ct	*ct;
	uint8_t		 a[4] = { 10, 231, 0, 2 }, d[4] = { 192, 0, 2, 10 };

	if (!have_ns)
		return;
	ct_free(NULL);
	ct = ct_new(err, sizeof(err));
	ck_assert_msg(ct != NULL, "ct_new: %s", err);
	ck_assert_int_eq(ct_del_src(ct, AF_INET, a, err, sizeof(err)), 0);
	ck_assert_int_eq(ct_del_dst(ct, AF_INET, a, d, IPPROTO_TCP, 1, 65535,
	    err, sizeof(err)), 0);
	ck_assert_int_eq(ct_del_src(ct, AF_UNIX, a, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ct_del_dst(ct, AF_INET, a, d, IPPROTO_TCP, 9, 1,
	    err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ct_del_if(ct, AF_INET, a, NULL, NULL, err,
	    sizeof(err)), -1);
	ct_free(ct);
}
END_TEST

static Suite *
fw_learned_suite(void)
{
	Suite	*s = suite_create("fw_learned");
	TCase	*tc = tcase_create("learned");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, learned_names);
	tcase_add_test(tc, learned_cap);
	tcase_add_test(tc, del_leaves_nothing);
	tcase_add_test(tc, ct_contract);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner	*sr;
	int	 failed;

	sr = srunner_create(fw_learned_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
