/*
 * check_policy_load: policy files that must load, what they load into, and
 * every kind of loader error with its exact message and position.
 *
 * The example policies are documentation users copy, so they are loaded
 * here; the error table pins the wording users see from `sluice policy
 * check`. Tests run with the repository top as the current directory.
 */
#include <netinet/in.h>
#include <sys/socket.h>

#include <sys/stat.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "policy/policy.h"

static const char *const examples[] = {
	"examples/policies/coding-agent.yaml",
	"examples/policies/data-analyst.yaml",
	"examples/policies/locked-down.yaml",
};

static char	tmpdir[64];

static void
setup(void)
{
	strcpy(tmpdir, "/tmp/check_policy_load.XXXXXX");
	/* Unchecked fixture: runs in the parent, so cleanup survives a
	 * failing test. */
	if (mkdtemp(tmpdir) == NULL)
		abort();
}

static void
teardown(void)
{
	char	cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup failed: %s\n", tmpdir);
}

static void
write_file(const char *path, const char *text)
{
	FILE	*f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static struct pol_policy *
load_text(const char *name, const char *text, struct pol_errors *e,
    char *path, size_t plen)
{
	snprintf(path, plen, "%s/%s", tmpdir, name);
	write_file(path, text);
	return pol_policy_load(path, NULL, e);
}

START_TEST(examples_load)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_config	*cfg = pol_config_load("tests/policy/config.yaml", e);
	struct pol_policy	*p;
	const char		*base;
	char			 want[64];

	ck_assert_ptr_nonnull(cfg);
	p = pol_policy_load(examples[_i], cfg, e);
	ck_assert_msg(p != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_uint_eq(pol_errors_count(e), 0);
	base = strrchr(examples[_i], '/') + 1;
	snprintf(want, sizeof(want), "%.*s", (int)(strlen(base) - 5), base);
	ck_assert_str_eq(pol_policy_name(p), want);
	ck_assert_uint_eq(strlen(pol_policy_digest(p)), 64);
	pol_policy_free(p);
	pol_config_free(cfg);
	pol_errors_free(e);
}
END_TEST

START_TEST(digest_is_file_sha256)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_policy	*p;
	char			 path[256], hex[65];
	unsigned char		 md[32];
	unsigned int		 mdlen;
	const char		*text = "version: 1\n";
	int			 i;

	p = load_text("d.yaml", text, e, path, sizeof(path));
	ck_assert_ptr_nonnull(p);
	EVP_Digest(text, strlen(text), md, &mdlen, EVP_sha256(), NULL);
	for (i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
	ck_assert_str_eq(pol_policy_digest(p), hex);
	/* No name: the file's basename. */
	ck_assert_str_eq(pol_policy_name(p), "d");
	ck_assert_uint_eq(pol_egress_quota(p), 0);
	ck_assert_uint_eq(pol_tool_approval_timeout_ms(p), 300000);
	pol_policy_free(p);
	pol_errors_free(e);
}
END_TEST

START_TEST(coding_agent_contents)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_policy	*p;
	const struct pol_net_rule *r;
	struct pol_dns_limits	 l;
	struct pol_cidr		 c;
	size_t			 n;

	p = pol_policy_load(examples[0], NULL, e);
	ck_assert_ptr_nonnull(p);
	r = pol_egress_static(p, true, &n);
	ck_assert_uint_eq(n, 1);
	pol_cidr_parse("198.51.100.0/24", &c);
	ck_assert_mem_eq(&r[0].cidr, &c, sizeof(c));
	ck_assert_uint_eq(r[0].proto, IPPROTO_TCP);
	ck_assert_uint_eq(r[0].port_lo, 8000);
	ck_assert_uint_eq(r[0].port_hi, 8100);
	ck_assert_uint_eq(r[0].rule_index, 5);
	r = pol_egress_static(p, false, &n);
	ck_assert_uint_eq(n, 1);
	pol_cidr_parse("203.0.113.66/32", &c);
	ck_assert_mem_eq(&r[0].cidr, &c, sizeof(c));
	ck_assert_uint_eq(r[0].proto, 0);
	ck_assert_uint_eq(r[0].port_lo, 0);
	ck_assert_uint_eq(r[0].port_hi, 0);
	ck_assert_uint_eq(r[0].rule_index, 1);
	ck_assert_uint_eq(pol_egress_quota(p), 1ULL << 30);
	pol_taint_keep(p, &n);
	ck_assert_uint_eq(n, 0);	/* its keep-list is a host rule */
	pol_dns_limits(p, &l);
	ck_assert_uint_eq(l.min_ttl_s, 5);
	ck_assert_uint_eq(l.max_ttl_s, 3600);
	ck_assert_uint_eq(l.qps, 50);
	ck_assert_uint_eq(l.burst, 100);
	ck_assert_uint_eq(l.max_name_len, 253);
	ck_assert_uint_eq(l.max_label_len, 63);
	ck_assert_uint_eq(l.entropy_min_len, 24);
	ck_assert_uint_eq(l.entropy_millibits, 4000);
	ck_assert(!l.deny_refused);
	pol_policy_free(p);
	pol_errors_free(e);
}
END_TEST

START_TEST(data_analyst_contents)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_policy	*p;
	const struct pol_net_rule *r;
	struct pol_dns_limits	 l;
	size_t			 n;

	p = pol_policy_load(examples[1], NULL, e);
	ck_assert_ptr_nonnull(p);
	r = pol_egress_static(p, true, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(r[1].proto, IPPROTO_UDP);
	ck_assert_uint_eq(r[1].cidr.prefix, 32);
	ck_assert_uint_eq(r[1].port_lo, 53);
	r = pol_taint_keep(p, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(r[0].port_lo, 5432);
	ck_assert_uint_eq(r[0].port_hi, 5432);
	ck_assert_uint_eq(r[0].cidr.prefix, 24);
	pol_dns_limits(p, &l);
	ck_assert(l.deny_refused);
	ck_assert_uint_eq(l.max_ttl_s, 600);
	ck_assert_uint_eq(l.max_label_len, 50);
	ck_assert_uint_eq(l.entropy_min_len, 20);
	ck_assert_uint_eq(l.entropy_millibits, 3800);
	ck_assert_uint_eq(pol_tool_approval_timeout_ms(p), 15 * 60 * 1000);
	pol_policy_free(p);
	pol_errors_free(e);
}
END_TEST

START_TEST(icmp_v6_rule)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_policy	*p;
	const struct pol_net_rule *r;
	char			 path[256];
	size_t			 n;

	p = load_text("icmp.yaml", "version: 1\negress:\n  allow:\n"
	    "    - {cidr: \"2001:db8::/32\", protocol: icmp}\n"
	    "    - {cidr: 192.0.2.0/24, protocol: icmp}\n"
	    "    - {cidr: 192.0.2.0/24, ports: [1, \"10-20\", 443]}\n",
	    e, path, sizeof(path));
	ck_assert_msg(p != NULL, "%s", pol_errors_get(e, 0));
	r = pol_egress_static(p, true, &n);
	ck_assert_uint_eq(n, 5);
	ck_assert_uint_eq(r[0].proto, IPPROTO_ICMPV6);
	ck_assert_uint_eq(r[1].proto, IPPROTO_ICMP);
	ck_assert_uint_eq(r[2].port_lo, 1);
	ck_assert_uint_eq(r[3].port_lo, 10);
	ck_assert_uint_eq(r[3].port_hi, 20);
	ck_assert_uint_eq(r[4].port_hi, 443);
	ck_assert_uint_eq(r[4].rule_index, 2);
	pol_policy_free(p);
	pol_errors_free(e);
}
END_TEST

/* Rule budgets: ids in rule order, carried by the static entries and by
 * the ports a name is learned with; the taint's own budget. */
START_TEST(budget_rules)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_policy	*p;
	const struct pol_net_rule *r;
	const struct pol_rule_budget *b;
	struct pol_net_rule	 pr[4];
	struct pol_egress_q	 q;
	char			 path[256];
	size_t			 n;

	p = load_text("budget.yaml", "version: 1\negress:\n  allow:\n"
	    "    - {host: free.example, ports: [443]}\n"
	    "    - {host: up.example, ports: [443, 8443], budget: 100MiB}\n"
	    "    - {cidr: 192.0.2.0/24, ports: [80], budget: 64KiB, "
	    "window: 1h}\n"
	    "mcp:\n  taint: {budget: 1KiB, keep: [{host: up.example, "
	    "ports: [443]}]}\n", e, path, sizeof(path));
	ck_assert_msg(p != NULL, "%s", pol_errors_get(e, 0));
	b = pol_egress_budgets(p, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(b[0].bytes, 100ULL << 20);
	ck_assert_uint_eq(b[0].window_s, 0);
	ck_assert_uint_eq(b[0].rule_index, 1);
	ck_assert_uint_eq(b[1].bytes, 64ULL << 10);
	ck_assert_uint_eq(b[1].window_s, 3600);
	ck_assert_uint_eq(b[1].rule_index, 2);
	ck_assert_uint_eq(pol_taint_budget(p), 1024);
	r = pol_egress_static(p, true, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(r[0].budget, 2);	/* id 1, plus one */
	ck_assert_uint_eq(pol_egress_ports_for_name(p, "up.example", false,
	    pr, 4), 2);
	ck_assert_uint_eq(pr[0].budget, 1);
	ck_assert_uint_eq(pr[1].budget, 1);
	ck_assert_uint_eq(pol_egress_ports_for_name(p, "free.example", false,
	    pr, 4), 1);
	ck_assert_uint_eq(pr[0].budget, 0);
	/* The keep list has no rule budgets: the taint's is separate. */
	ck_assert_uint_eq(pol_egress_ports_for_name(p, "up.example", true,
	    pr, 4), 1);
	ck_assert_uint_eq(pr[0].budget, 0);
	memset(&q, 0, sizeof(q));
	q.host = "up.example";
	q.proto = IPPROTO_TCP;
	q.port = 8443;
	ck_assert_int_eq(pol_egress_budget_id(p, &q), 0);
	q.host = "192.0.2.9";
	q.port = 80;
	ck_assert_int_eq(pol_egress_budget_id(p, &q), 1);
	q.host = "free.example";
	q.port = 443;
	ck_assert_int_eq(pol_egress_budget_id(p, &q), -1);
	q.host = "up.example";
	q.port = 22;	/* denied: no budget */
	ck_assert_int_eq(pol_egress_budget_id(p, &q), -1);
	q.port = 443;
	q.tainted = true;
	ck_assert_int_eq(pol_egress_budget_id(p, &q), -1);
	pol_policy_free(p);
	pol_errors_free(e);
}
END_TEST

/* Error table: the file's text and every message it must produce, after
 * the "PATH:" prefix. */
static const struct {
	const char *text;
	const char *want;
} bad[] = {
	{ "version: 1\nversion: 1\n", "2:1: duplicate key \"version\"\n" },
	{ "version: 1\nfoo: 1\n", "2:1: unknown key \"foo\" in the policy\n" },
	{ "version: 1\negress: []\n",
	  "2:9: egress must be a mapping, not a list\n" },
	{ "version: 1\negress: {allow: [{host: a.example, ports: [443], "
	  "x: 1}]}\n", "2:50: unknown key \"x\" in egress.allow[0]\n" },
	{ "version: 1\negress: {allow: [{host: a.example, cidr: 192.0.2.0/24,"
	  " ports: [1]}]}\n",
	  "2:18: egress.allow[0] needs exactly one of host or cidr\n" },
	{ "version: 1\negress: {deny: [{cidr: 192.0.2.1/24}]}\n",
	  "2:24: invalid CIDR \"192.0.2.1/24\": host bits set after /24\n" },
	{ "version: 1\negress: {budget: -1}\n", "2:18: invalid size \"-1\" "
	  "(use e.g. 65536, 64KiB, 1GiB; at most 1024TiB)\n" },
	{ "version: 1\negress: {budget: 18446744073709551616}\n",
	  "2:18: invalid size \"18446744073709551616\" (use e.g. 65536, 64KiB, "
	  "1GiB; at most 1024TiB)\n" },
	{ "version: 1\negress: {budget: 1025TiB}\n", "2:18: invalid size "
	  "\"1025TiB\" (use e.g. 65536, 64KiB, 1GiB; at most 1024TiB)\n" },
	{ "version: 1\ndns: {min_ttl: 1h1m}\n", "2:16: invalid duration "
	  "\"1h1m\" (use e.g. 30s, 5m, 1h, 2d; at most 100 years)\n" },
	{ "version: 1\ndns: {min_ttl: 30}\n", "2:16: invalid duration "
	  "\"30\" (use e.g. 30s, 5m, 1h, 2d; at most 100 years)\n" },
	{ "version: 1\ndns: {max_ttl: 5 m}\n", "2:16: invalid duration "
	  "\"5 m\" (use e.g. 30s, 5m, 1h, 2d; at most 100 years)\n" },
	{ "version: 1\ndns: {min_ttl: 36501d}\n", "2:16: invalid duration "
	  "\"36501d\" (use e.g. 30s, 5m, 1h, 2d; at most 100 years)\n" },
	{ "version: 1\negress: {deny: [{host: \"*.*.example\"}]}\n",
	  "2:24: invalid host \"*.*.example\": a wildcard is allowed only as "
	  "a leading \"*.\" label\n" },
	{ "version: 1\negress: {deny: [{host: \"example.123\"}]}\n",
	  "2:24: invalid host \"example.123\": not a valid DNS name\n" },
	{ "version: 1\negress: {deny: [{host: \"2001:db8::1\"}]}\n",
	  "2:24: invalid host \"2001:db8::1\": IP addresses go in cidr, not "
	  "host\n" },
	{ "version: 1\nmcp: {tools: [{tool: a/b, decision: allow, args: {x: "
	  "{pattern: \"[\"}}}]}\n", "2:64: invalid regex \"[\": missing "
	  "terminating ] for character class at offset 1\n" },
	{ "version: 1\nmcp: {tools: [{tool: a/b, decision: allow, budgets: "
	  "[x]}]}\n", "2:54: unknown budget \"x\"\n" },
	{ "version: 1\nmcp: {tools: [{tool: a/b, decision: allow, args: {x: "
	  "{type: text}}}]}\n", "2:61: invalid type \"text\" (string, integer,"
	  " number, boolean, array, object or any)\n" },
	{ "version: 1\nmcp: {tools: [{tool: a/b}]}\n",
	  "2:15: missing required key \"decision\" in mcp.tools[0]\n" },
	{ "version: 1\nmcp: {taint: {level: top}}\n",
	  "2:22: invalid taint level \"top\" (public, internal, confidential "
	  "or secret)\n" },
	{ "version: 1\nmcp: {results: {redact: [ssn]}}\n",
	  "2:26: unknown redaction \"ssn\"\n" },
	{ "version: 1\nmcp: {audit_args: some}\n",
	  "2:19: invalid audit_args \"some\" (full or digest)\n" },
	{ "version: 1\nname: \"-x\"\n", "2:7: invalid policy name \"-x\" "
	  "(use [a-z0-9][a-z0-9_-]{0,63})\n" },
	{ "version: 1\ndescription: null\n",
	  "2:14: expected a string, found null\n" },
	{ "version: 1.0\n", "1:10: unsupported version 1.0 (expected 1)\n" },
	{ "version: 1\nx: &a 1\n", "2:4: anchors are not allowed\n" },
	{ "version: 1\nx: !!str 1\n", "2:4: tags are not allowed\n" },
	{ "# only a comment\n", "1:1: empty file\n" },
	{ "version: 1\n  bad: indent\n", "2:6: syntax error: mapping values "
	  "are not allowed in this context\n" },
	/* A limit of 0 would read as "no limit": refused, not guessed. */
	{ "version: 1\nmcp: {budgets: [{name: b, calls: 0}]}\n",
	  "2:34: calls must be at least 1 (leave it out for no limit)\n" },
	{ "version: 1\nmcp: {budgets: [{name: b, cost: 0, result_bytes: 0}]}\n",
	  "2:33: cost must be at least 1 (leave it out for no limit)\n"
	  "2:50: result_bytes must be at least 1 (leave it out for no "
	  "limit)\n" },
	/* One budget listed twice would be reserved twice, checked once. */
	{ "version: 1\nmcp: {budgets: [{name: b, calls: 5}], tools: [{tool: "
	  "a/b, decision: allow, budgets: [b, b]}]}\n",
	  "2:89: budget \"b\" is listed twice\n" },
	/* String and number constraints together: one would be dropped. */
	{ "version: 1\nmcp: {tools: [{tool: a/b, decision: allow, args: {x: "
	  "{pattern: \"^[0-9]+$\", max: 10}}}]}\n",
	  "2:54: mcp.tools[0].args.x: string constraints and min/max cannot "
	  "be combined\n" },
	/* Rule budgets: a size of at least one byte, a window of at least
	 * a second, on egress.allow rules only. */
	{ "version: 1\negress: {allow: [{host: a.example, ports: [443], "
	  "budget: 0}]}\n", "2:58: budget must be at least one byte (omit "
	  "it for none; deny the rule to send nothing)\n" },
	{ "version: 1\negress: {allow: [{host: a.example, ports: [443], "
	  "budget: -1}]}\n", "2:58: invalid size \"-1\" (use e.g. 65536, "
	  "64KiB, 1GiB; at most 1024TiB)\n" },
	{ "version: 1\negress: {allow: [{host: a.example, ports: [443], "
	  "budget: 1025TiB}]}\n", "2:58: invalid size \"1025TiB\" (use "
	  "e.g. 65536, 64KiB, 1GiB; at most 1024TiB)\n" },
	{ "version: 1\negress: {allow: [{host: a.example, ports: [443], "
	  "window: 1h}]}\n", "2:58: window needs a budget on the same "
	  "rule\n" },
	{ "version: 1\negress: {allow: [{host: a.example, ports: [443], "
	  "budget: 1MiB, window: 0s}]}\n", "2:72: window must be at least "
	  "1s\n" },
	{ "version: 1\negress: {allow: [{host: a.example, ports: [443], "
	  "budget: 1MiB, window: 1x}]}\n", "2:72: invalid duration \"1x\" "
	  "(use e.g. 30s, 5m, 1h, 2d; at most 100 years)\n" },
	{ "version: 1\negress: {deny: [{host: a.example, budget: 1MiB}]}\n",
	  "2:43: budget and window apply to egress.allow rules only (a "
	  "tainted sandbox's budget is mcp.taint.budget)\n" },
	{ "version: 1\nmcp: {taint: {keep: [{host: a.example, ports: [443], "
	  "budget: 1MiB}]}}\n", "2:62: budget and window apply to egress.allow "
	  "rules only (a tainted sandbox's budget is mcp.taint.budget)\n" },
	{ "version: 1\negress: {allow: [{cidr: 192.0.2.0/24, protocol: icmp, "
	  "budget: 1KiB}]}\n", "2:63: budget applies to tcp and udp rules\n" },
	{ "version: 1\nmcp: {taint: {budget: 0}}\n", "2:23: mcp.taint.budget "
	  "must be at least one byte (omit it for none)\n" },
	{ "version: 1\nmcp: {taint: {budget: 1.5MiB}}\n", "2:23: invalid "
	  "size \"1.5MiB\" (use e.g. 65536, 64KiB, 1GiB; at most 1024TiB)\n" },
	{ "version: 1\negress: {allow: ["
	  "{cidr: 192.0.2.1/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.2/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.3/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.4/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.5/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.6/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.7/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.8/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.9/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.10/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.11/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.12/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.13/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.14/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.15/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.16/32, ports: [1], budget: 1}, "
	  "{cidr: 192.0.2.17/32, ports: [1], budget: 1}]}\n",
	  "2:787: at most 16 egress.allow rules may carry a budget\n" },
	/* Several errors in one file: all of them, in file order. */
	{ "version: 3\negress:\n  allow:\n    - host: \"*\"\n      ports: "
	  "[0]\n  bogus: 1\n", "1:10: unsupported version 3 (expected 1)\n"
	  "6:3: unknown key \"bogus\" in egress\n4:13: invalid host \"*\": a "
	  "wildcard is allowed only as a leading \"*.\" label\n5:15: invalid "
	  "port \"0\" (1-65535)\n" },
};

START_TEST(error_messages)
{
	struct pol_errors	*e = pol_errors_new(50);
	char			 path[256], *got = NULL;
	size_t			 len = 0, i, plen;
	FILE			*f;

	ck_assert_ptr_null(load_text("bad.yaml", bad[_i].text, e, path,
	    sizeof(path)));
	plen = strlen(path) + 1;
	f = open_memstream(&got, &len);
	for (i = 0; pol_errors_get(e, i) != NULL; i++) {
		ck_assert(strncmp(pol_errors_get(e, i), path, plen - 1) == 0);
		fprintf(f, "%s\n", pol_errors_get(e, i) + plen);
	}
	fclose(f);
	ck_assert_str_eq(got, bad[_i].want);
	free(got);
	pol_errors_free(e);
}
END_TEST

START_TEST(set_examples)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_set		*s = pol_set_load_dir("examples/policies", NULL,
				    e);

	ck_assert_msg(s != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_uint_eq(pol_set_count(s), 3);
	ck_assert_str_eq(pol_policy_name(pol_set_at(s, 0)), "coding-agent");
	ck_assert_ptr_eq(pol_set_get(s, "locked-down"), pol_set_at(s, 2));
	ck_assert_ptr_null(pol_set_get(s, "nope"));
	ck_assert_ptr_null(pol_set_at(s, 3));
	pol_set_free(s);
	pol_set_free(NULL);
	pol_errors_free(e);
}
END_TEST

START_TEST(set_all_or_nothing)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_set		*s;
	char			 dir[128], p1[256], p2[256], want[300];

	/* Its own directory: other tests leave files in tmpdir. */
	snprintf(dir, sizeof(dir), "%s/set", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	snprintf(p1, sizeof(p1), "%s/a.yaml", dir);
	snprintf(p2, sizeof(p2), "%s/b.yml", dir);
	write_file(p1, "version: 1\nname: same\n");
	write_file(p2, "version: 1\nname: same\n");
	ck_assert_ptr_null(pol_set_load_dir(dir, NULL, e));
	snprintf(want, sizeof(want), "%s:0:0: duplicate policy name \"same\"",
	    p2);
	ck_assert_str_eq(pol_errors_get(e, 0), want);
	pol_errors_clear(e);
	/* One good and one bad file: nothing loads. */
	write_file(p2, "version: 1\nname: other\nx: 1\n");
	ck_assert_ptr_null(pol_set_load_dir(dir, NULL, e));
	ck_assert_uint_eq(pol_errors_count(e), 1);
	pol_errors_clear(e);
	write_file(p2, "version: 1\nname: other\n");
	s = pol_set_load_dir(dir, NULL, e);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(pol_set_count(s), 2);
	pol_set_free(s);
	ck_assert_ptr_null(pol_set_load_dir("/nonexistent-dir", NULL, e));
	pol_errors_free(e);
}
END_TEST

/* load_buf is what load does, minus the file: same policy, same digest,
 * messages named by the given name; the buffer needs no NUL. */
START_TEST(load_buf_matches_file)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_policy	*a, *b;
	FILE			*f;
	char			*text;
	long			 len;

	f = fopen(examples[_i], "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	rewind(f);
	/* No NUL after the text: ASan catches a read past len. */
	text = malloc((size_t)len);
	ck_assert_ptr_nonnull(text);
	ck_assert_uint_eq(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	a = pol_policy_load(examples[_i], NULL, e);
	b = pol_policy_load_buf(examples[_i], text, (size_t)len, NULL, e);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_str_eq(pol_policy_digest(a), pol_policy_digest(b));
	ck_assert_str_eq(pol_policy_name(a), pol_policy_name(b));
	ck_assert_uint_eq(pol_result_max_bytes(a), pol_result_max_bytes(b));
	pol_policy_free(a);
	pol_policy_free(b);
	free(text);
	pol_errors_free(e);
}
END_TEST

static const struct buf_case {
	const char	*text;
	size_t		 len;		/* 0: strlen */
	const char	*err0;		/* first message, NULL: loads */
} buf_cases[] = {
	{ "version: 1\n", 0, NULL },
	{ "version: 1\nname: n\n", 0, NULL },
	{ "", 0, "mem.yaml:1:1: empty file" },
	{ "version: 1\nx: 1\n", 0, "mem.yaml:2:1: unknown key \"x\" in the "
	    "policy" },
	/* The length, not a NUL, ends the text. */
	{ "version: 1\nx: 1\n", 11, NULL },
	{ "version: 1\0x", 12, "mem.yaml:0:0: NUL byte in file" },
	{ "version: \xff\n", 0, "mem.yaml:1:10: invalid UTF-8" },
	/* A value with line breaks and escapes stays on one line. */
	{ "version: \"1\\nmem.yaml:9:9: fake\"\n", 0,
	    "mem.yaml:1:10: version must be the number 1" },
	{ "version: 1\n\n  r\n", 0,
	    "mem.yaml:1:10: unsupported version 1\\nr (expected 1)" },
	{ "version: 1\nname: \"a\\e[31mb\\r\\tc\"\n", 0,
	    "mem.yaml:2:7: invalid policy name \"a\\x1b[31mb\\r\\tc\" (use "
	    "[a-z0-9][a-z0-9_-]{0,63})" },
};

START_TEST(load_buf_cases)
{
	const struct buf_case *c = &buf_cases[_i];
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_policy	*p;
	size_t			 len = c->len ? c->len : strlen(c->text);

	p = pol_policy_load_buf("mem.yaml", c->text, len, NULL, e);
	if (c->err0 == NULL) {
		ck_assert_msg(p != NULL, "%s", pol_errors_get(e, 0) ?
		    pol_errors_get(e, 0) : "");
		ck_assert_uint_eq(pol_errors_count(e), 0);
		/* The default name comes from the given name. */
		if (strstr(c->text, "name:") == NULL)
			ck_assert_str_eq(pol_policy_name(p), "mem");
	} else {
		ck_assert_ptr_null(p);
		ck_assert_uint_ge(pol_errors_count(e), 1);
		ck_assert_str_eq(pol_errors_get(e, 0), c->err0);
		ck_assert_ptr_null(strchr(pol_errors_get(e, 0), '\n'));
	}
	pol_policy_free(p);
	pol_errors_free(e);
}
END_TEST

/* A message cut at the buffer's end loses its partial UTF-8 sequence. */
START_TEST(errors_cut_utf8)
{
	struct pol_errors	*e = pol_errors_new(2);
	char			 body[1100];
	const char		*m;
	size_t			 i, n;

	for (i = 0; i + 2 < sizeof(body); i += 2)
		memcpy(body + i, "\xc3\xa9", 2);
	body[i] = '\0';
	/* 511 bytes fit: 255 whole characters and half of one. */
	pol_errors_add(e, "f", 1, 1, "%s", body);
	m = pol_errors_get(e, 0);
	ck_assert_ptr_nonnull(m);
	n = strlen(m);
	ck_assert_uint_eq(n, strlen("f:1:1: ") + 510);
	/* Ends with a whole "\xc3\xa9". */
	ck_assert_uint_eq((unsigned char)m[n - 1], 0xa9);
	ck_assert_uint_eq((unsigned char)m[n - 2], 0xc3);
	pol_errors_add(e, "f", 2, 3, "%s", "tab\there\x7f\x01");
	ck_assert_str_eq(pol_errors_get(e, 1), "f:2:3: tab\\there\\x7f\\x01");
	pol_errors_free(e);
}
END_TEST

START_TEST(free_null)
{
	pol_policy_free(NULL);
	pol_errors_free(NULL);
	pol_config_free(NULL);
	ck_assert_uint_eq(pol_errors_count(NULL), 0);
	ck_assert_ptr_null(pol_errors_get(NULL, 0));
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("policy_load");
	TCase	*core = tcase_create("Core"), *lim = tcase_create("Limits");
	SRunner	*sr;
	int	 nf;

	tcase_add_unchecked_fixture(core, setup, teardown);
	tcase_add_loop_test(core, examples_load, 0,
	    sizeof(examples) / sizeof(examples[0]));
	tcase_add_test(core, digest_is_file_sha256);
	tcase_add_test(core, coding_agent_contents);
	tcase_add_test(core, data_analyst_contents);
	tcase_add_test(core, icmp_v6_rule);
	tcase_add_test(core, budget_rules);
	tcase_add_test(core, set_examples);
	tcase_add_test(core, set_all_or_nothing);
	tcase_add_test(core, free_null);
	tcase_add_loop_test(core, load_buf_matches_file, 0,
	    sizeof(examples) / sizeof(examples[0]));
	tcase_add_loop_test(lim, load_buf_cases, 0,
	    sizeof(buf_cases) / sizeof(buf_cases[0]));
	tcase_add_test(lim, errors_cut_utf8);
	tcase_add_unchecked_fixture(lim, setup, teardown);
	tcase_add_loop_test(lim, error_messages, 0, sizeof(bad) / sizeof(bad[0]));
	suite_add_tcase(s, core);
	suite_add_tcase(s, lim);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
