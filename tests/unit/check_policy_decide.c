/*
 * check_policy_decide: the pure decisions, as tables.
 *
 * Each row is one question a sandbox can ask (an egress, a DNS query, a
 * tool call) and the verdict, rule and reason a user relies on; the rows
 * include the hostile forms (address tricks, path escapes, URL userinfo,
 * malformed JSON) that must deny. Addresses are documentation ones, and no
 * packet is sent: these are pure functions.
 */
#include <netinet/in.h>
#include <sys/socket.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "policy/policy.h"

#define PIN_A "sha256:0123456789abcdef0123456789abcdef" \
	    "0123456789abcdef0123456789abcdef"

static const char egress_policy[] =
"version: 1\n"
"name: decide\n"
"egress:\n"
"  allow:\n"
"    - {host: pypi.org, ports: [443]}\n"
"    - {host: \"*.pythonhosted.org\", ports: [443, \"8000-8100\"]}\n"
"    - {cidr: 10.1.0.0/16, ports: [5432]}\n"
"    - {cidr: 198.51.100.0/24, ports: [80], protocol: udp}\n"
"    - {host: dns.example, ports: [53], protocol: udp}\n"
"    - {cidr: 203.0.113.0/24, ports: [443]}\n"
"    - {cidr: 203.0.113.0/24, protocol: icmp}\n"
"    - {cidr: \"2001:db8:1::/48\", ports: [443]}\n"
"    - {cidr: 0.0.0.0/0, ports: [8443]}\n"
"    - {cidr: 10.0.0.0/7, ports: [9000]}\n"
"  deny:\n"
"    - host: \"*.evil.example\"\n"
"    - host: bad.pythonhosted.org\n"
"    - cidr: 203.0.113.66/32\n"
"    - {cidr: 10.1.2.0/24, protocol: tcp, ports: [5432]}\n"
"mcp:\n"
"  taint:\n"
"    level: confidential\n"
"    keep:\n"
"      - {host: pypi.org, ports: [443]}\n"
"      - {cidr: 203.0.113.0/25, ports: [443]}\n";

static const char tool_policy[] =
"version: 1\n"
"name: tools\n"
"mcp:\n"
"  audit_args: digest\n"
"  taint: {level: confidential}\n"
"  results: {max_bytes: 64KiB}\n"
"  budgets:\n"
"    - {name: calls, calls: 3}\n"
"    - {name: money, cost: 10, scope: subject, window: 1h}\n"
"    - {name: bytes, result_bytes: 100, scope: policy}\n"
"  tools:\n"
"    - tool: everything/echo\n"
"      decision: allow\n"
"      budgets: [calls]\n"
"      args:\n"
"        message: {type: string, max_length: 5, pattern: \"^[a-z]*$\"}\n"
"      required: [message]\n"
"    - tool: everything/long\n"
"      decision: allow\n"
"      args:\n"
"        s: {type: string, max_length: 3}\n"
"        r: {pattern: \"^(a+)+$\"}\n"
"    - tool: files/read\n"
"      decision: allow\n"
"      classification: secret\n"
"      subjects: [\"alice\", \"team-*\"]\n"
"      args:\n"
"        path: {type: string, path_prefix: /workspace/}\n"
"    - tool: files/read\n"
"      decision: deny\n"
"    - tool: web/fetch\n"
"      decision: allow\n"
"      cost: 4\n"
"      budgets: [money, bytes]\n"
"      labels: {env: dev}\n"
"      args:\n"
"        url: {type: string, url_hosts: [example.com, \"*.example.org\"]}\n"
"        n: {type: integer, min: 1, max: 10}\n"
"        x: {type: number, min: -5, max: 5}\n"
"        mode: {enum: [fast, slow, \"3\"]}\n"
"        flag: {type: boolean}\n"
"    - tool: web/*\n"
"      decision: ask\n"
"      classification: internal\n"
"      allow_other_args: true\n"
"    - tool: pinned/t\n"
"      decision: allow\n"
"      classification: confidential\n"
"      pin: \"" PIN_A "\"\n"
"      allow_other_args: true\n"
"    - tool: text/say\n"
"      decision: allow\n"
"      args:\n"
"        m: {type: string, pattern: \"^[ -~]*$\"}\n";

static struct pol_policy *pe, *pt;
static char	 tmpdir[64];

static struct pol_policy *
load(const char *name, const char *text)
{
	struct pol_errors *e = pol_errors_new(50);
	struct pol_policy *p;
	char		 path[256];
	FILE		*f;

	snprintf(path, sizeof(path), "%s/%s.yaml", tmpdir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	p = pol_policy_load(path, NULL, e);
	ck_assert_msg(p != NULL, "%s", pol_errors_get(e, 0));
	pol_errors_free(e);
	return p;
}

/* The directory is made and removed by the parent (unchecked fixture), so
 * it goes away even when a test fails; the policies are loaded per test. */
static void
mkdir_setup(void)
{
	strcpy(tmpdir, "/tmp/check_policy_decide.XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		abort();
}

static void
rmdir_teardown(void)
{
	char	cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup failed: %s\n", tmpdir);
}

static void
setup(void)
{
	pe = load("egress", egress_policy);
	pt = load("tools", tool_policy);
}

static void
teardown(void)
{
	pol_policy_free(pe);
	pol_policy_free(pt);
}

/* ------------------------------------------------------------ egress */

#define TCP IPPROTO_TCP
#define UDP IPPROTO_UDP
#define ICMP IPPROTO_ICMP
#define A POL_ALLOW
#define D POL_DENY

static const struct {
	const char	*host;
	uint8_t		 proto;
	uint16_t	 port;
	bool		 tainted, tap;	/* tap: 203.0.113.0/24 treated public */
	enum pol_verdict v;
	const char	*rule, *reason;
} eg[] = {
	{ "pypi.org", TCP, 443, 0, 0, A, "egress.allow[0]", "allowed" },
	{ "PyPI.Org.", TCP, 443, 0, 0, A, "egress.allow[0]", "allowed" },
	{ "pypi.org", TCP, 80, 0, 0, D, "default", "no_matching_rule" },
	{ "pypi.org", UDP, 443, 0, 0, D, "default", "no_matching_rule" },
	{ "pypi.org", ICMP, 0, 0, 0, D, "default", "no_matching_rule" },
	{ "www.pypi.org", TCP, 443, 0, 0, D, "default", "no_matching_rule" },
	{ "pypi.org.evil", TCP, 443, 0, 0, D, "default", "no_matching_rule" },
	{ "files.pythonhosted.org", TCP, 443, 0, 0, A, "egress.allow[1]",
	  "allowed" },
	{ "a.b.pythonhosted.org", TCP, 8050, 0, 0, A, "egress.allow[1]",
	  "allowed" },
	{ "a.pythonhosted.org", TCP, 8101, 0, 0, D, "default",
	  "no_matching_rule" },
	{ "pythonhosted.org", TCP, 443, 0, 0, D, "default",
	  "no_matching_rule" },
	{ "xpythonhosted.org", TCP, 443, 0, 0, D, "default",
	  "no_matching_rule" },
	{ "bad.pythonhosted.org", TCP, 443, 0, 0, D, "egress.deny[1]",
	  "explicit_deny" },
	{ "x.evil.example", TCP, 443, 0, 0, D, "egress.deny[0]",
	  "explicit_deny" },
	{ "dns.example", UDP, 53, 0, 0, A, "egress.allow[4]", "allowed" },
	{ "dns.example", TCP, 53, 0, 0, D, "default", "no_matching_rule" },
	/* Always-denied classes, whatever the rules say. */
	{ "169.254.169.254", TCP, 80, 0, 0, D, "class:metadata",
	  "always_denied_class" },
	{ "::ffff:169.254.169.254", TCP, 80, 0, 0, D, "class:metadata",
	  "always_denied_class" },
	{ "127.0.0.1", TCP, 443, 0, 0, D, "class:loopback",
	  "always_denied_class" },
	{ "::1", TCP, 443, 0, 0, D, "class:loopback", "always_denied_class" },
	{ "0.0.0.0", TCP, 443, 0, 0, D, "class:unspecified",
	  "always_denied_class" },
	{ "224.0.0.1", UDP, 5353, 0, 0, D, "class:multicast",
	  "always_denied_class" },
	{ "169.254.169.254", TCP, 80, 1, 1, D, "class:metadata",
	  "always_denied_class" },
	/* Private ranges: only an explicit CIDR allow opens them. */
	{ "10.1.0.5", TCP, 5432, 0, 0, A, "egress.allow[2]", "allowed" },
	{ "10.1.2.3", TCP, 5432, 0, 0, D, "egress.deny[3]", "explicit_deny" },
	{ "10.1.2.3", UDP, 5432, 0, 0, D, "class:private", "private_range" },
	{ "10.1.0.5", TCP, 5433, 0, 0, D, "class:private", "private_range" },
	{ "10.2.0.1", TCP, 5432, 0, 0, D, "class:private", "private_range" },
	{ "192.168.1.1", TCP, 443, 0, 0, D, "class:private", "private_range" },
	{ "100.64.0.1", TCP, 443, 0, 0, D, "class:cgnat", "private_range" },
	{ "198.51.100.7", UDP, 80, 0, 0, A, "egress.allow[3]", "allowed" },
	{ "198.51.100.7", TCP, 80, 0, 0, D, "class:documentation",
	  "private_range" },
	{ "198.51.100.7", ICMP, 0, 0, 0, D, "class:documentation",
	  "private_range" },
	{ "203.0.113.10", TCP, 443, 0, 0, A, "egress.allow[5]", "allowed" },
	{ "203.0.113.10", TCP, 444, 0, 0, D, "class:documentation",
	  "private_range" },
	{ "203.0.113.10", TCP, 444, 0, 1, D, "default", "no_matching_rule" },
	{ "203.0.113.10", TCP, 443, 0, 1, A, "egress.allow[5]", "allowed" },
	{ "203.0.113.5", ICMP, 0, 0, 0, A, "egress.allow[6]", "allowed" },
	{ "203.0.113.66", TCP, 443, 0, 1, D, "egress.deny[2]",
	  "explicit_deny" },
	{ "2001:db8:1::5", TCP, 443, 0, 0, A, "egress.allow[7]", "allowed" },
	{ "2001:db8:2::5", TCP, 443, 0, 0, D, "class:documentation",
	  "private_range" },
	/* A broad rule for the internet does not open private ranges. */
	{ "10.1.0.5", TCP, 8443, 0, 0, D, "class:private", "private_range" },
	{ "203.0.113.9", TCP, 8443, 0, 0, D, "class:documentation",
	  "private_range" },
	{ "203.0.113.9", TCP, 8443, 0, 1, A, "egress.allow[8]", "allowed" },
	{ "10.1.0.5", TCP, 9000, 0, 0, A, "egress.allow[9]", "allowed" },
	{ "11.1.0.5", TCP, 9000, 0, 0, A, "egress.allow[9]", "allowed" },
	{ "11.1.0.5", TCP, 8443, 0, 0, A, "egress.allow[8]", "allowed" },
	/* Address spellings that are neither an address nor a name. */
	{ "0251.0376.0251.0376", TCP, 80, 0, 0, D, "input", "bad_host" },
	{ "2852039166", TCP, 80, 0, 0, D, "input", "bad_host" },
	{ "425.510.425.510", TCP, 80, 0, 0, D, "input", "bad_host" },
	{ "0xA9FEA9FE", TCP, 80, 0, 0, D, "default", "no_matching_rule" },
	{ "[::1]", TCP, 443, 0, 0, D, "input", "bad_host" },
	{ "", TCP, 443, 0, 0, D, "input", "bad_host" },
	{ "a..b", TCP, 443, 0, 0, D, "input", "bad_host" },
	{ "pypi.org ", TCP, 443, 0, 0, D, "input", "bad_host" },
	{ "pypi.org", TCP, 0, 0, 0, D, "input", "bad_port" },
	{ "pypi.org", 132, 443, 0, 0, D, "input", "bad_protocol" },
	/* Tainted: only the keep-list, and denies still apply. */
	{ "pypi.org", TCP, 443, 1, 0, A, "mcp.taint.keep[0]", "allowed" },
	{ "files.pythonhosted.org", TCP, 443, 1, 0, D, "mcp.taint",
	  "tainted" },
	{ "203.0.113.10", TCP, 443, 1, 1, A, "mcp.taint.keep[1]", "allowed" },
	{ "203.0.113.200", TCP, 443, 1, 1, D, "mcp.taint", "tainted" },
	{ "203.0.113.200", TCP, 443, 1, 0, D, "class:documentation",
	  "private_range" },
	{ "x.evil.example", TCP, 443, 1, 0, D, "egress.deny[0]",
	  "explicit_deny" },
	{ "10.1.0.5", TCP, 5432, 1, 0, D, "class:private", "private_range" },
};

START_TEST(egress_table)
{
	struct pol_decision	d;
	struct pol_egress_q	q;
	struct pol_cidr		tap;

	ck_assert_int_eq(pol_cidr_parse("203.0.113.0/24", &tap), 0);
	memset(&q, 0, sizeof(q));
	q.host = eg[_i].host;
	q.proto = eg[_i].proto;
	q.port = eg[_i].port;
	q.tainted = eg[_i].tainted;
	if (eg[_i].tap) {
		q.treat_as_public = &tap;
		q.ntreat_as_public = 1;
	}
	pol_egress_decide(pe, &q, &d);
	ck_assert_msg(d.verdict == eg[_i].v, "%s: verdict %d", eg[_i].host,
	    d.verdict);
	ck_assert_str_eq(d.rule, eg[_i].rule);
	ck_assert_str_eq(pol_reason_name(d.reason), eg[_i].reason);
}
END_TEST

START_TEST(egress_bad_input)
{
	struct pol_decision	d;
	struct pol_egress_q	q;

	memset(&q, 0, sizeof(q));
	q.proto = TCP;
	q.port = 443;
	pol_egress_decide(pe, &q, &d);		/* host NULL */
	ck_assert_int_eq(d.verdict, POL_DENY);
	ck_assert_str_eq(pol_reason_name(d.reason), "bad_request");
	q.host = "pypi.org";
	pol_egress_decide(NULL, &q, &d);
	ck_assert_int_eq(d.verdict, POL_DENY);
	pol_egress_decide(pe, NULL, &d);
	ck_assert_int_eq(d.verdict, POL_DENY);
}
END_TEST

START_TEST(ports_for_name)
{
	struct pol_net_rule	r[8];

	ck_assert_uint_eq(pol_egress_ports_for_name(pe, "pypi.org", false, r,
	    8), 1);
	ck_assert_uint_eq(r[0].proto, TCP);
	ck_assert_uint_eq(r[0].port_lo, 443);
	ck_assert_uint_eq(r[0].port_hi, 443);
	ck_assert_uint_eq(r[0].rule_index, 0);
	ck_assert_uint_eq(pol_egress_ports_for_name(pe,
	    "cdn.pythonhosted.org.", false, r, 8), 2);
	ck_assert_uint_eq(r[1].port_lo, 8000);
	ck_assert_uint_eq(r[1].port_hi, 8100);
	/* max bounds the output. */
	ck_assert_uint_eq(pol_egress_ports_for_name(pe,
	    "cdn.pythonhosted.org", false, r, 1), 1);
	ck_assert_uint_eq(pol_egress_ports_for_name(pe, "dns.example", false,
	    r, 8), 1);
	ck_assert_uint_eq(r[0].proto, UDP);
	ck_assert_uint_eq(pol_egress_ports_for_name(pe, "bad.pythonhosted.org",
	    false, r, 8), 0);
	ck_assert_uint_eq(pol_egress_ports_for_name(pe, "pythonhosted.org",
	    false, r, 8), 0);
	ck_assert_uint_eq(pol_egress_ports_for_name(pe, "x.evil.example",
	    false, r, 8), 0);
	ck_assert_uint_eq(pol_egress_ports_for_name(pe, "pypi.org", true, r,
	    8), 1);
	ck_assert_uint_eq(pol_egress_ports_for_name(pe, "cdn.pythonhosted.org",
	    true, r, 8), 0);
	ck_assert_uint_eq(pol_egress_ports_for_name(pe, "192.0.2.1", false, r,
	    8), 0);
}
END_TEST

/* ------------------------------------------------------------ dns */

#define SYN POL_SYNTHETIC

static const struct {
	const char	*name;
	uint16_t	 qtype;
	bool		 tainted;
	enum pol_verdict v;
	const char	*rule, *reason;
} dq[] = {
	{ "pypi.org", 1, 0, A, "egress.allow[0]", "allowed" },
	{ "PYPI.org.", 28, 0, A, "egress.allow[0]", "allowed" },
	{ "pypi.org", 5, 0, A, "egress.allow[0]", "allowed" },
	{ "pypi.org", 16, 0, D, "dns.types", "type_not_allowed" },
	{ "pypi.org", 255, 0, D, "dns.types", "type_not_allowed" },
	{ "pypi.org", 15, 0, D, "dns.types", "type_not_allowed" },
	{ "pypi.org", 65, 0, A, "egress.allow[0]", "nodata" },
	{ "pypi.org", 64, 0, A, "egress.allow[0]", "nodata" },
	{ "x.pythonhosted.org", 1, 0, A, "egress.allow[1]", "allowed" },
	{ "pythonhosted.org", 1, 0, D, "default", "no_matching_rule" },
	{ "bad.pythonhosted.org", 1, 0, D, "egress.deny[1]", "explicit_deny" },
	{ "x.evil.example", 1, 0, D, "egress.deny[0]", "explicit_deny" },
	{ "evil.example", 1, 0, D, "default", "no_matching_rule" },
	{ "dns.example", 1, 0, A, "egress.allow[4]", "allowed" },
	{ "sluice.internal", 1, 0, SYN, "synthetic", "synthetic" },
	{ "BRIDGE.SLUICE.INTERNAL.", 28, 0, SYN, "synthetic", "synthetic" },
	{ "x.sluice.internal", 1, 0, D, "default", "no_matching_rule" },
	{ "example.com", 1, 0, D, "default", "no_matching_rule" },
	{ "203.0.113.10", 1, 0, D, "input", "bad_name" },
	{ "", 1, 0, D, "input", "bad_name" },
	{ ".", 1, 0, D, "input", "bad_name" },
	{ "pypi..org", 1, 0, D, "input", "bad_name" },
	{ "pypi.org..", 1, 0, D, "input", "bad_name" },
	{ "py pi.org", 1, 0, D, "input", "bad_name" },
	{ "q7x9k2m4v8b1n5c3z6l0p2w8j4h6.pythonhosted.org", 1, 0, D,
	  "dns.limits", "high_entropy" },
	/* The absolute form gets the same tunnelling checks. */
	{ "q7x9k2m4v8b1n5c3z6l0p2w8j4h6.pythonhosted.org.", 1, 0, D,
	  "dns.limits", "high_entropy" },
	{ "pypi.org", 1, 1, A, "mcp.taint.keep[0]", "allowed" },
	{ "x.pythonhosted.org", 1, 1, D, "mcp.taint", "tainted" },
	{ "sluice.internal", 1, 1, SYN, "synthetic", "synthetic" },
};

START_TEST(dns_table)
{
	struct pol_decision	d;
	struct pol_dns_q	q = { dq[_i].name, dq[_i].qtype,
				    dq[_i].tainted };

	pol_dns_decide(pe, &q, &d);
	ck_assert_msg(d.verdict == dq[_i].v, "%s: verdict %d", dq[_i].name,
	    d.verdict);
	ck_assert_str_eq(d.rule, dq[_i].rule);
	ck_assert_str_eq(pol_reason_name(d.reason), dq[_i].reason);
}
END_TEST

START_TEST(dns_listed_https)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_policy	*p = pol_policy_load(
				    "examples/policies/data-analyst.yaml", NULL, e);
	struct pol_decision	 d;
	struct pol_dns_q	 q = { "x.data.example.org", 65, false };

	ck_assert_ptr_nonnull(p);
	pol_dns_decide(p, &q, &d);
	ck_assert_int_eq(d.verdict, POL_ALLOW);
	ck_assert_str_eq(pol_reason_name(d.reason), "allowed");
	q.qtype = 64;	/* SVCB is not listed: NODATA */
	pol_dns_decide(p, &q, &d);
	ck_assert_int_eq(d.verdict, POL_ALLOW);
	ck_assert_str_eq(pol_reason_name(d.reason), "nodata");
	q.name = "x.paste.example.com";
	pol_dns_decide(p, &q, &d);
	ck_assert_int_eq(d.verdict, POL_DENY);
	q.name = NULL;
	pol_dns_decide(p, &q, &d);
	ck_assert_str_eq(pol_reason_name(d.reason), "bad_request");
	pol_policy_free(p);
	pol_errors_free(e);
}
END_TEST

static const struct {
	const char	*name;
	const char	*reason;	/* NULL = not suspect */
} sq[] = {
	{ "www.example.com", NULL },
	{ "www.example.com.", NULL },
	{ "aaaaaaaaaaaaaaaaaaaa.com", NULL },		/* 20: at the limit */
	{ "aaaaaaaaaaaaaaaaaaaaa.com", "label_too_long" },
	{ "x.aaaaaaaaaaaaaaaaaaaaa", "label_too_long" },
	{ "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.eeee",
	  "name_too_long" },
	{ "abcdefghijkl.com", "high_entropy" },		/* log2(12) = 3.58 */
	{ "ABCDEFGHIJKL.com", "high_entropy" },
	{ "abcdefghijk.com", NULL },			/* under min_length */
	{ "aaaaaabbbbbb.com", NULL },			/* 1 bit/char */
	{ "abcdefabcdef.com", NULL },			/* log2(6) = 2.58 */
	{ "", NULL },
};

START_TEST(suspect_table)
{
	struct pol_dns_limits	l;
	enum pol_reason		 why;
	bool			 s;

	memset(&l, 0, sizeof(l));
	l.max_name_len = 60;
	l.max_label_len = 20;
	l.entropy_min_len = 12;
	l.entropy_millibits = 3500;
	s = pol_dns_name_suspect(&l, sq[_i].name, &why);
	if (sq[_i].reason == NULL) {
		ck_assert_msg(!s, "%s: %s", sq[_i].name,
		    pol_reason_name(why));
		ck_assert_int_eq(why, POL_REASON_NONE);
	} else {
		ck_assert_msg(s, "%s not suspect", sq[_i].name);
		ck_assert_str_eq(pol_reason_name(why), sq[_i].reason);
	}
}
END_TEST

/* The threshold is exact: "aabbccdd" has 2 bits/char, "abcdefgh" 3. */
START_TEST(entropy_threshold)
{
	struct pol_dns_limits	l;
	enum pol_reason		 why;

	memset(&l, 0, sizeof(l));
	l.max_name_len = 253;
	l.max_label_len = 63;
	l.entropy_min_len = 8;
	l.entropy_millibits = 2000;
	ck_assert(!pol_dns_name_suspect(&l, "aabbccdd.example", &why));
	l.entropy_millibits = 1999;
	ck_assert(pol_dns_name_suspect(&l, "aabbccdd.example", &why));
	ck_assert_str_eq(pol_reason_name(why), "high_entropy");
	l.entropy_millibits = 3000;
	ck_assert(!pol_dns_name_suspect(&l, "abcdefgh.example", &why));
	l.entropy_millibits = 2999;
	ck_assert(pol_dns_name_suspect(&l, "abcdefgh.example", &why));
	/* 0 disables the entropy check; lengths still apply. */
	l.entropy_min_len = 0;
	ck_assert(!pol_dns_name_suspect(&l, "abcdefgh.example", &why));
}
END_TEST

/* ------------------------------------------------------------ tools */

#define ASK POL_ASK

static const struct {
	const char	*subject;
	const char	*env;		/* label env=, NULL = no labels */
	const char	*server, *tool;
	const char	*args;
	uint64_t	 used_calls, used_money, used_bytes;
	const char	*pin;
	enum pol_verdict v;
	const char	*rule, *reason;
} tq[] = {
	{ "alice", 0, "everything", "echo", "{\"message\":\"hi\"}", 0, 0, 0, 0,
	  A, "mcp.tools[0]", "allowed" },
	{ "alice", 0, "everything", "echo", " { \"message\" : \"\" } ", 0, 0,
	  0, 0, A, "mcp.tools[0]", "allowed" },
	{ "alice", 0, "everything", "echo", "{\"message\":\"Hi\"}", 0, 0, 0, 0,
	  D, "mcp.tools[0]", "argument_constraint" },
	{ "alice", 0, "everything", "echo", "{\"message\":\"sixsix\"}", 0, 0,
	  0, 0, D, "mcp.tools[0]", "argument_constraint" },
	{ "alice", 0, "everything", "echo", "{\"message\":5}", 0, 0, 0, 0, D,
	  "mcp.tools[0]", "argument_constraint" },
	/* An escaped NUL is refused by the JSON parser itself. */
	{ "alice", 0, "everything", "echo", "{\"message\":\"a\\u0000b\"}", 0,
	  0, 0, 0, D, "mcp.tools[0]", "bad_arguments" },
	{ "alice", 0, "everything", "echo", "{}", 0, 0, 0, 0, D,
	  "mcp.tools[0]", "missing_argument" },
	/* A pattern matches the whole value as written: `$` is its very
	 * end, not "before a final newline", and no line separator ends
	 * the value early (the examples' own "^[ -~]*$"). */
#define SAY(args, v, reason) \
	{ "alice", 0, "text", "say", args, 0, 0, 0, 0, v, "mcp.tools[7]", \
	  reason }
	SAY("{\"m\":\"hi\"}", A, "allowed"),
	SAY("{\"m\":\"\"}", A, "allowed"),
	SAY("{\"m\":\"hi\\n\"}", D, "argument_constraint"),
	SAY("{\"m\":\"hi\\r\\n\"}", D, "argument_constraint"),
	SAY("{\"m\":\"hi\\r\"}", D, "argument_constraint"),
	SAY("{\"m\":\"\\nhi\"}", D, "argument_constraint"),
	SAY("{\"m\":\"hi\\n\\n\"}", D, "argument_constraint"),
	SAY("{\"m\":\"hi\\u0000\"}", D, "bad_arguments"),
	SAY("{\"m\":\"hi\\u2028\"}", D, "argument_constraint"),
	SAY("{\"m\":\"hi\\u2029\"}", D, "argument_constraint"),
	SAY("{\"m\":\"hi\\u0085\"}", D, "argument_constraint"),
	SAY("{\"m\":\"hi\xe2\x80\xa8\"}", D, "argument_constraint"),
	SAY("{\"m\":\"hi\xc2\x85\"}", D, "argument_constraint"),
	SAY("{\"m\":\"hi\\u000b\"}", D, "argument_constraint"),
#undef SAY
	{ "alice", 0, "everything", "echo", "{\"message\":\"ab\\n\"}", 0,
	  0, 0, 0, D, "mcp.tools[0]", "argument_constraint" },
	{ "alice", 0, "everything", "echo", NULL, 0, 0, 0, 0, D,
	  "mcp.tools[0]", "missing_argument" },
	{ "alice", 0, "everything", "echo", "{\"message\":\"hi\",\"x\":1}", 0,
	  0, 0, 0, D, "mcp.tools[0]", "unknown_argument" },
	{ "alice", 0, "everything", "echo", "[\"hi\"]", 0, 0, 0, 0, D,
	  "mcp.tools[0]", "bad_arguments" },
	{ "alice", 0, "everything", "echo", "not json", 0, 0, 0, 0, D,
	  "mcp.tools[0]", "bad_arguments" },
	{ "alice", 0, "everything", "echo", "", 0, 0, 0, 0, D,
	  "mcp.tools[0]", "bad_arguments" },
	{ "alice", 0, "everything", "echo",
	  "{\"message\":\"a\",\"message\":\"b\"}", 0, 0, 0, 0, D,
	  "mcp.tools[0]", "bad_arguments" },
	{ "alice", 0, "everything", "echo", "{\"message\":\"hi\"", 0, 0, 0, 0,
	  D, "mcp.tools[0]", "bad_arguments" },
	{ "alice", 0, "everything", "echo", "{\"message\":\"hi\"}", 2, 0, 0, 0,
	  A, "mcp.tools[0]", "allowed" },
	{ "alice", 0, "everything", "echo", "{\"message\":\"hi\"}", 3, 0, 0, 0,
	  D, "mcp.tools[0]", "budget_exhausted" },
	{ "alice", 0, "everything", "echo", "{\"message\":\"hi\"}", 99, 0, 0,
	  0, D, "mcp.tools[0]", "budget_exhausted" },
	{ "alice", 0, "everything", "other", "{}", 0, 0, 0, 0, D, "default",
	  "no_matching_rule" },
	{ "alice", 0, "nothing", "echo", "{}", 0, 0, 0, 0, D, "default",
	  "no_matching_rule" },
	/* max_length counts characters, not bytes. */
	{ 0, 0, "everything", "long", "{\"s\":\"\xc3\xa9\xc3\xa9\xc3\xa9\"}",
	  0, 0, 0, 0, A, "mcp.tools[1]", "allowed" },
	{ 0, 0, "everything", "long", "{\"s\":\"abcd\"}", 0, 0, 0, 0, D,
	  "mcp.tools[1]", "argument_constraint" },
	/* Catastrophic backtracking hits the match limit and denies. */
	{ 0, 0, "everything", "long", "{\"r\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab\"}", 0, 0, 0, 0, D, "mcp.tools[1]",
	  "argument_constraint" },
	{ 0, 0, "everything", "long", "{\"r\":\"aaaa\"}", 0, 0, 0, 0, A,
	  "mcp.tools[1]", "allowed" },
	/* Paths. */
	{ "alice", 0, "files", "read", "{\"path\":\"/workspace/a/b\"}", 0, 0,
	  0, 0, A, "mcp.tools[2]", "allowed" },
	{ "team-x", 0, "files", "read", "{\"path\":\"/workspace/./a/../b\"}",
	  0, 0, 0, 0, A, "mcp.tools[2]", "allowed" },
	{ "team-x", 0, "files", "read", "{\"path\":\"/workspace\"}", 0, 0, 0,
	  0, A, "mcp.tools[2]", "allowed" },
	{ "team-x", 0, "files", "read", "{\"path\":\"//workspace//a\"}", 0, 0,
	  0, 0, A, "mcp.tools[2]", "allowed" },
	{ "team-x", 0, "files", "read",
	  "{\"path\":\"/workspace/../etc/passwd\"}", 0, 0, 0, 0, D,
	  "mcp.tools[2]", "argument_constraint" },
	{ "team-x", 0, "files", "read", "{\"path\":\"/workspace/a/../../etc\"}",
	  0, 0, 0, 0, D, "mcp.tools[2]", "argument_constraint" },
	{ "team-x", 0, "files", "read", "{\"path\":\"/workspacex/a\"}", 0, 0,
	  0, 0, D, "mcp.tools[2]", "argument_constraint" },
	{ "team-x", 0, "files", "read", "{\"path\":\"workspace/a\"}", 0, 0, 0,
	  0, D, "mcp.tools[2]", "argument_constraint" },
	{ "team-x", 0, "files", "read", "{\"path\":\"/../workspace/a\"}", 0,
	  0, 0, 0, D, "mcp.tools[2]", "argument_constraint" },
	{ "team-x", 0, "files", "read", "{\"path\":\"\"}", 0, 0, 0, 0, D,
	  "mcp.tools[2]", "argument_constraint" },
	{ "team-x", 0, "files", "read", "{\"path\":[\"/workspace/a\"]}", 0,
	  0, 0, 0, D, "mcp.tools[2]", "argument_constraint" },
	{ "bob", 0, "files", "read", "{\"path\":\"/workspace/a\"}", 0, 0, 0,
	  0, D, "mcp.tools[3]", "rule_deny" },
	{ "team-", 0, "files", "read", "{\"path\":\"/workspace/a\"}", 0, 0, 0,
	  0, A, "mcp.tools[2]", "allowed" },
	{ "xteam-a", 0, "files", "read", "{\"path\":\"/workspace/a\"}", 0, 0,
	  0, 0, D, "mcp.tools[3]", "rule_deny" },
	{ NULL, 0, "files", "read", "{\"path\":\"/workspace/a\"}", 0, 0, 0,
	  0, D, "mcp.tools[3]", "rule_deny" },
	/* URLs and labels. */
	{ "bob", "dev", "web", "fetch", "{\"url\":\"https://example.com/x\"}",
	  0, 0, 0, 0, A, "mcp.tools[4]", "allowed" },
	{ "bob", "dev", "web", "fetch", "{\"url\":\"https://EXAMPLE.com.\"}",
	  0, 0, 0, 0, A, "mcp.tools[4]", "allowed" },
	{ "bob", "dev", "web", "fetch",
	  "{\"url\":\"https://a.example.org:8443/p?q#f\"}", 0, 0, 0, 0, A,
	  "mcp.tools[4]", "allowed" },
	{ "bob", "dev", "web", "fetch",
	  "{\"url\":\"https://example.com@evil.net/\"}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch",
	  "{\"url\":\"https://user:pw@example.com/\"}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch",
	  "{\"url\":\"https://evil.net/?u=example.com\"}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch",
	  "{\"url\":\"https://example.com\\\\@evil.net/\"}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch",
	  "{\"url\":\"https://example.com%2eevil.net/\"}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"url\":\"https://example.org/\"}",
	  0, 0, 0, 0, D, "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"url\":\"http://192.0.2.1/\"}", 0,
	  0, 0, 0, D, "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"url\":\"http://[2001:db8::1]/\"}",
	  0, 0, 0, 0, D, "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"url\":\"http://3221225985/\"}", 0,
	  0, 0, 0, D, "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"url\":\"ftp://example.com/\"}", 0,
	  0, 0, 0, D, "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"url\":\"example.com\"}", 0, 0, 0,
	  0, D, "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"url\":\"https://example.com:/\"}",
	  0, 0, 0, 0, D, "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch",
	  "{\"url\":\"https://exa mple.com/\"}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	/* Numbers, enums, booleans. */
	{ "bob", "dev", "web", "fetch", "{\"n\":1}", 0, 0, 0, 0, A,
	  "mcp.tools[4]", "allowed" },
	{ "bob", "dev", "web", "fetch", "{\"n\":0}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"n\":11}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"n\":5.5}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"n\":\"5\"}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"x\":-5}", 0, 0, 0, 0, A,
	  "mcp.tools[4]", "allowed" },
	{ "bob", "dev", "web", "fetch", "{\"x\":4.99}", 0, 0, 0, 0, A,
	  "mcp.tools[4]", "allowed" },
	{ "bob", "dev", "web", "fetch", "{\"x\":5.01}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"x\":-1e300}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"mode\":\"fast\"}", 0, 0, 0, 0, A,
	  "mcp.tools[4]", "allowed" },
	{ "bob", "dev", "web", "fetch", "{\"mode\":3}", 0, 0, 0, 0, A,
	  "mcp.tools[4]", "allowed" },
	{ "bob", "dev", "web", "fetch", "{\"mode\":\"medium\"}", 0, 0, 0, 0,
	  D, "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"mode\":null}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	{ "bob", "dev", "web", "fetch", "{\"flag\":true}", 0, 0, 0, 0, A,
	  "mcp.tools[4]", "allowed" },
	{ "bob", "dev", "web", "fetch", "{\"flag\":\"true\"}", 0, 0, 0, 0, D,
	  "mcp.tools[4]", "argument_constraint" },
	/* Budgets: cost 4 against 10, bytes 100. */
	{ "bob", "dev", "web", "fetch", "{}", 0, 6, 0, 0, A, "mcp.tools[4]",
	  "allowed" },
	{ "bob", "dev", "web", "fetch", "{}", 0, 7, 0, 0, D, "mcp.tools[4]",
	  "budget_exhausted" },
	{ "bob", "dev", "web", "fetch", "{}", 0, UINT64_MAX, 0, 0, D,
	  "mcp.tools[4]", "budget_exhausted" },
	{ "bob", "dev", "web", "fetch", "{}", 0, 0, 99, 0, A, "mcp.tools[4]",
	  "allowed" },
	{ "bob", "dev", "web", "fetch", "{}", 0, 0, 100, 0, D, "mcp.tools[4]",
	  "budget_exhausted" },
	/* Another label value: the next rule, which asks. */
	{ "bob", "prod", "web", "fetch", "{\"anything\":1}", 0, 0, 0, 0, ASK,
	  "mcp.tools[5]", "approval_required" },
	{ "bob", NULL, "web", "other", "{}", 0, 0, 0, 0, ASK, "mcp.tools[5]",
	  "approval_required" },
	{ "bob", NULL, "web", "other", "[]", 0, 0, 0, 0, D, "mcp.tools[5]",
	  "bad_arguments" },
	/* Pins. */
	{ "bob", NULL, "pinned", "t", "{}", 0, 0, 0, PIN_A, A, "mcp.tools[6]",
	  "allowed" },
	{ "bob", NULL, "pinned", "t", "{}", 0, 0, 0, "sha256:00", D,
	  "mcp.tools[6]", "pin_mismatch" },
	{ "bob", NULL, "pinned", "t", "{}", 0, 0, 0, NULL, D, "mcp.tools[6]",
	  "pin_mismatch" },
};

START_TEST(tool_table)
{
	struct pol_tool_decision d;
	struct pol_tool_q	 q;
	struct pol_budget_use	 use[3];
	const char		*lk[] = { "team", "env" };
	const char		*lv[] = { "core", tq[_i].env };

	memset(&q, 0, sizeof(q));
	memset(use, 0, sizeof(use));
	use[0].name = "calls";
	use[0].calls = tq[_i].used_calls;
	use[1].name = "money";
	use[1].cost = tq[_i].used_money;
	use[2].name = "bytes";
	use[2].result_bytes = tq[_i].used_bytes;
	q.subject = tq[_i].subject;
	q.label_keys = lk;
	q.label_values = lv;
	q.nlabels = tq[_i].env ? 2 : 1;
	q.server = tq[_i].server;
	q.tool = tq[_i].tool;
	q.args_json = tq[_i].args;
	q.budgets = use;
	q.nbudgets = 3;
	q.pin_hex = tq[_i].pin;
	pol_tool_decide(pt, &q, &d);
	ck_assert_msg(d.d.verdict == tq[_i].v, "row %d: verdict %d (%s)", _i,
	    d.d.verdict, pol_reason_name(d.d.reason));
	ck_assert_str_eq(d.d.rule, tq[_i].rule);
	ck_assert_str_eq(pol_reason_name(d.d.reason), tq[_i].reason);
	if (d.d.verdict == POL_DENY) {
		ck_assert_uint_eq(d.nres, 0);
		/* The agent gets a sentence, never an empty message. */
		ck_assert_uint_gt(strlen(d.message), 10);
	}
	ck_assert_uint_eq(d.max_result_bytes, 64 * 1024);
	ck_assert(d.args_digest_only);
}
END_TEST

START_TEST(tool_reservations)
{
	struct pol_tool_decision d;
	struct pol_tool_q	 q;
	struct pol_budget_use	 use = { "money", 0, 2, 0 };
	const char		*lk[] = { "env" }, *lv[] = { "dev" };

	memset(&q, 0, sizeof(q));
	q.subject = "bob";
	q.label_keys = lk;
	q.label_values = lv;
	q.nlabels = 1;
	q.server = "web";
	q.tool = "fetch";
	q.args_json = "{\"url\":\"https://example.com/\"}";
	q.budgets = &use;
	q.nbudgets = 1;
	pol_tool_decide(pt, &q, &d);
	ck_assert_int_eq(d.d.verdict, POL_ALLOW);
	ck_assert_uint_eq(d.nres, 2);
	ck_assert_str_eq(d.res[0].budget, "money");
	ck_assert_int_eq(d.res[0].scope, POL_SCOPE_SUBJECT);
	ck_assert_uint_eq(d.res[0].window_s, 3600);
	ck_assert_uint_eq(d.res[0].calls, 1);
	ck_assert_uint_eq(d.res[0].cost, 4);
	ck_assert_uint_eq(d.res[0].limit_cost, 10);
	ck_assert_uint_eq(d.res[0].limit_calls, 0);
	ck_assert_str_eq(d.res[1].budget, "bytes");
	ck_assert_int_eq(d.res[1].scope, POL_SCOPE_POLICY);
	ck_assert_uint_eq(d.res[1].window_s, 0);
	ck_assert_uint_eq(d.res[1].limit_result_bytes, 100);
	ck_assert_str_eq(d.classification, "public");
	ck_assert(!d.taints);

	q.subject = "alice";
	q.server = "files";
	q.tool = "read";
	q.args_json = "{\"path\":\"/workspace/../etc/shadow\"}";
	pol_tool_decide(pt, &q, &d);
	ck_assert_int_eq(d.d.verdict, POL_DENY);
	ck_assert_str_eq(d.message,
	    "Argument \"path\" is outside the allowed paths.");
	ck_assert_str_eq(d.classification, "secret");
	ck_assert(d.taints);

	q.server = "web";
	q.tool = "other";
	q.args_json = "{}";
	pol_tool_decide(pt, &q, &d);
	ck_assert_int_eq(d.d.verdict, POL_ASK);
	ck_assert_str_eq(d.classification, "internal");
	ck_assert(!d.taints);	/* internal < confidential */

	q.server = NULL;
	pol_tool_decide(pt, &q, &d);
	ck_assert_int_eq(d.d.verdict, POL_DENY);
	ck_assert_str_eq(pol_reason_name(d.d.reason), "bad_request");
	pol_tool_decide(pt, NULL, &d);
	ck_assert_int_eq(d.d.verdict, POL_DENY);
}
END_TEST

START_TEST(tool_visibility)
{
	struct pol_tool_q	 q;
	enum pol_reason		 why;

	ck_assert(pol_tool_visible(pt, "everything", "echo", NULL, &why));
	ck_assert_str_eq(pol_reason_name(why), "visible");
	ck_assert(!pol_tool_visible(pt, "everything", "nope", NULL, &why));
	ck_assert_str_eq(pol_reason_name(why), "no_matching_rule");
	/* Allowed for some subjects: listed; calls are still decided. */
	ck_assert(pol_tool_visible(pt, "files", "read", NULL, &why));
	ck_assert(pol_tool_visible(pt, "pinned", "t", PIN_A, &why));
	ck_assert(!pol_tool_visible(pt, "pinned", "t", NULL, &why));
	ck_assert_str_eq(pol_reason_name(why), "pin_mismatch");
	ck_assert(!pol_tool_visible(pt, "pinned", "t", "sha256:"
	    "1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	    &why));
	ck_assert(!pol_tool_visible(NULL, "pinned", "t", PIN_A, &why));

	memset(&q, 0, sizeof(q));
	q.server = "files";
	q.tool = "read";
	q.subject = "bob";
	ck_assert(!pol_tool_visible_q(pt, &q, &why));
	ck_assert_str_eq(pol_reason_name(why), "rule_deny");
	q.subject = "alice";
	ck_assert(pol_tool_visible_q(pt, &q, &why));
	q.server = "pinned";
	q.tool = "t";
	q.pin_hex = PIN_A;
	ck_assert(pol_tool_visible_q(pt, &q, &why));
	ck_assert(!pol_tool_visible_q(pt, NULL, &why));
}
END_TEST

/* ------------------------------------------------------------ pins */

static void
sha256_hex(const char *s, char *out)
{
	unsigned char	md[32];
	unsigned int	len;
	int		i;

	EVP_Digest(s, strlen(s), md, &len, EVP_sha256(), NULL);
	strcpy(out, "sha256:");
	for (i = 0; i < 32; i++)
		sprintf(out + 7 + 2 * i, "%02x", md[i]);
}

START_TEST(pin_canonical)
{
	char	a[80], b[80], want[80];

	/* Key order, whitespace and unpinned members do not move the pin. */
	ck_assert_int_eq(pol_tool_pin("{\"name\":\"echo\",\"description\":"
	    "\"Echo\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
	    "{\"b\":1,\"a\":2}}}", a, sizeof(a)), 0);
	ck_assert_int_eq(pol_tool_pin(" {\n \"inputSchema\" : {\"properties\""
	    ": {\"a\": 2, \"b\": 1}, \"type\": \"object\"},\n\t\"_meta\": {\"x\""
	    ": 1}, \"description\": \"Echo\", \"name\": \"echo\", \"icons\": "
	    "[] }", b, sizeof(b)), 0);
	ck_assert_str_eq(a, b);
	sha256_hex("{\"description\":\"Echo\",\"inputSchema\":{\"properties\":"
	    "{\"a\":2,\"b\":1},\"type\":\"object\"},\"name\":\"echo\"}", want);
	ck_assert_str_eq(a, want);
	ck_assert_uint_eq(strlen(a), 71);
	/* Escaped and literal forms of one string are one pin. */
	ck_assert_int_eq(pol_tool_pin("{\"name\":\"\\u00e9\"}", a, sizeof(a)),
	    0);
	ck_assert_int_eq(pol_tool_pin("{\"name\":\"\xc3\xa9\"}", b, sizeof(b)),
	    0);
	ck_assert_str_eq(a, b);
}
END_TEST

START_TEST(pin_changes)
{
	char	a[80], b[80];
	static const char *const variants[] = {
		"{\"name\":\"echo\",\"description\":\"Echo!\"}",
		"{\"name\":\"echo2\",\"description\":\"Echo\"}",
		"{\"name\":\"echo\",\"description\":\"Echo\",\"title\":\"E\"}",
		"{\"name\":\"echo\",\"description\":\"Echo\",\"annotations\":"
		    "{\"readOnlyHint\":true}}",
		"{\"name\":\"echo\",\"description\":\"Echo\",\"outputSchema\":"
		    "{}}",
		"{\"name\":\"echo\",\"description\":\"Echo\",\"inputSchema\":"
		    "{}}",
	};
	size_t	i;

	ck_assert_int_eq(pol_tool_pin("{\"name\":\"echo\",\"description\":"
	    "\"Echo\"}", a, sizeof(a)), 0);
	for (i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		ck_assert_int_eq(pol_tool_pin(variants[i], b, sizeof(b)), 0);
		ck_assert_str_ne(a, b);
	}
}
END_TEST

START_TEST(pin_bad_input)
{
	char	a[80];

	ck_assert_int_eq(pol_tool_pin("[]", a, sizeof(a)), -1);
	ck_assert_int_eq(pol_tool_pin("{}", a, sizeof(a)), -1);
	ck_assert_int_eq(pol_tool_pin("{\"name\":1}", a, sizeof(a)), -1);
	ck_assert_int_eq(pol_tool_pin("{\"name\":\"a\"", a, sizeof(a)), -1);
	ck_assert_int_eq(pol_tool_pin("{\"name\":\"a\",\"name\":\"b\"}", a,
	    sizeof(a)), -1);
	ck_assert_int_eq(pol_tool_pin("", a, sizeof(a)), -1);
	ck_assert_int_eq(pol_tool_pin(NULL, a, sizeof(a)), -1);
	ck_assert_int_eq(pol_tool_pin("{\"name\":\"a\"}", a, 71), -1);
	ck_assert_int_eq(pol_tool_pin("{\"name\":\"a\"}", a, 72), 0);
}
END_TEST

/* ------------------------------------------------------- reason names */

/* Every reason has its own name, and one that records can hold as it is
 * (lower case and '_'): a value added to the enum without a name in the
 * table gets the out-of-range name and fails here. */
START_TEST(reason_names)
{
	const char	*unknown = pol_reason_name(POL_REASON__COUNT);
	const char	*n, *c;
	int		 i, j;

	ck_assert_ptr_nonnull(unknown);
	ck_assert_str_eq(pol_reason_name((enum pol_reason)-1), unknown);
	for (i = 0; i < POL_REASON__COUNT; i++) {
		n = pol_reason_name((enum pol_reason)i);
		ck_assert_ptr_nonnull(n);
		ck_assert_msg(n[0] != '\0', "reason %d: empty name", i);
		ck_assert_msg(strcmp(n, unknown) != 0, "reason %d: no name", i);
		for (c = n; *c != '\0'; c++)
			ck_assert_msg((*c >= 'a' && *c <= 'z') || *c == '_',
			    "reason %d: name \"%s\"", i, n);
		for (j = 0; j < i; j++)
			ck_assert_msg(strcmp(n, pol_reason_name(
			    (enum pol_reason)j)) != 0, "reasons %d and %d: "
			    "both \"%s\"", j, i, n);
	}
	/* Names only the gateway sets, which the DNS and bridge records and
	 * their findings are read by. */
	ck_assert_str_eq(pol_reason_name(POL_REASON_RATE_LIMITED),
	    "rate_limited");
	ck_assert_str_eq(pol_reason_name(POL_REASON_LEARNED_CAP),
	    "learned_cap");
	ck_assert_str_eq(pol_reason_name(POL_REASON_REBINDING), "rebinding");
	ck_assert_str_eq(pol_reason_name(POL_REASON_RESULT_TOO_LARGE),
	    "result_too_large");
	ck_assert_str_eq(pol_reason_name(POL_REASON_APPROVAL_TIMEOUT),
	    "approval_timeout");
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("policy_decide");
	TCase	*core = tcase_create("Core"), *lim = tcase_create("Limits");
	SRunner	*sr;
	int	 nf;

	tcase_add_unchecked_fixture(core, mkdir_setup, rmdir_teardown);
	tcase_add_checked_fixture(core, setup, teardown);
	tcase_add_loop_test(core, egress_table, 0, sizeof(eg) / sizeof(eg[0]));
	tcase_add_test(core, ports_for_name);
	tcase_add_loop_test(core, dns_table, 0, sizeof(dq) / sizeof(dq[0]));
	tcase_add_test(core, dns_listed_https);
	tcase_add_test(core, entropy_threshold);
	tcase_add_loop_test(core, suspect_table, 0, sizeof(sq) / sizeof(sq[0]));
	tcase_add_loop_test(core, tool_table, 0, sizeof(tq) / sizeof(tq[0]));
	tcase_add_test(core, tool_reservations);
	tcase_add_test(core, tool_visibility);
	tcase_add_test(core, pin_canonical);
	tcase_add_test(core, pin_changes);
	tcase_add_unchecked_fixture(lim, mkdir_setup, rmdir_teardown);
	tcase_add_checked_fixture(lim, setup, teardown);
	tcase_add_test(lim, egress_bad_input);
	tcase_add_test(lim, pin_bad_input);
	tcase_add_test(lim, reason_names);
	suite_add_tcase(s, core);
	suite_add_tcase(s, lim);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
