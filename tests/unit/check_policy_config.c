/*
 * check_policy_config: the daemon config loader — the documented example,
 * the defaults a minimal file gets, and its errors with exact messages.
 *
 * examples/sluice.yaml is what operators copy, so it must load and mean
 * what its comments say. Tests run with the repository top as the current
 * directory.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/policy.h"

static char	tmpdir[64];

static void
setup(void)
{
	strcpy(tmpdir, "/tmp/check_policy_config.XXXXXX");
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

static struct pol_config *
load_text(const char *text, struct pol_errors *e, char *path, size_t plen)
{
	FILE	*f;

	snprintf(path, plen, "%s/sluice.yaml", tmpdir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return pol_config_load(path, e);
}

static void
assert_addr(const struct pol_addr *a, const char *want)
{
	char	buf[64];

	ck_assert_str_eq(pol_addr_format(a, buf, sizeof(buf)), want);
}

START_TEST(example_config)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_config	*c = pol_config_load("examples/sluice.yaml", e);
	const struct pol_mcp_server *s;
	static const char	*policies[] = {
		"examples/policies/coding-agent.yaml",
		"examples/policies/data-analyst.yaml",
		"examples/policies/locked-down.yaml",
	};
	struct pol_policy	*p;
	size_t			 i;

	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_str_eq(c->path, "examples/sluice.yaml");
	ck_assert_str_eq(c->state_dir, "/var/lib/sluice");
	ck_assert_str_eq(c->run_dir, "/run/sluice");
	ck_assert_str_eq(c->socket_path, "/run/sluice/sluice.sock");
	ck_assert_str_eq(c->policy_dir, "/etc/sluice/policies");
	assert_addr(&c->pool.addr, "10.231.0.0");
	ck_assert_uint_eq(c->pool.prefix, 16);
	assert_addr(&c->service_addr, "10.231.255.254");
	ck_assert_uint_eq(c->bridge_port, 8080);
	ck_assert_str_eq(c->uplink, "eth0");
	ck_assert(!c->ipv6);
	ck_assert_uint_eq(c->nflog_group, 7);
	ck_assert_uint_eq(c->gate_queue, 7741);
	ck_assert_uint_eq(c->ntreat_as_public, 1);
	ck_assert_uint_eq(c->ndns_upstreams, 2);
	assert_addr(&c->dns_upstreams[0], "192.0.2.53");
	ck_assert_uint_eq(c->dns_upstream_ports[0], 53);
	assert_addr(&c->dns_upstreams[1], "2001:db8::53");
	ck_assert_uint_eq(c->dns_upstream_ports[1], 5353);
	ck_assert_uint_eq(c->dns_timeout_ms, 2000);
	ck_assert_uint_eq(c->dns_cache_entries, 16384);
	ck_assert_uint_eq(c->max_sandboxes, 4096);
	ck_assert_uint_eq(c->default_ttl_s, 0);
	ck_assert_uint_eq(c->lim_sreq_session, 4);
	ck_assert_uint_eq(c->lim_sreq_sandbox, 16);
	ck_assert_uint_eq(c->lim_sreq_deadline_s, 120);
	ck_assert_str_eq(c->audit_db, "/var/lib/sluice/audit.db");
	ck_assert_str_eq(c->audit_key, "/etc/sluice/audit.key");
	ck_assert_str_eq(c->audit_origin, "sluice.example.com/prod");
	/* Credential-bearing sinks and credentials ship commented out: the
	 * Quickstart's daemon starts without any secret. */
	ck_assert_uint_eq(c->nsinks, 1);
	ck_assert_int_eq(c->sinks[0].type, POL_SINK_FILE);
	ck_assert_int_eq(c->sinks[0].format, POL_FMT_JSON);
	ck_assert_uint_eq(c->sinks[0].lag_alert, 10000);
	ck_assert_ptr_null(c->sinks[0].token_file);
	ck_assert_uint_eq(c->nservers, 3);
	s = pol_config_server(c, "everything");
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(s->transport, POL_MCP_HTTP);
	ck_assert_str_eq(s->url, "https://mcp.example.com/mcp");
	ck_assert_ptr_null(s->cred_env);
	ck_assert_ptr_null(s->cred_file);
	s = pol_config_server(c, "files");
	ck_assert_int_eq(s->transport, POL_MCP_STDIO);
	ck_assert_uint_eq(s->argc, 3);
	ck_assert_str_eq(s->argv[0], "/usr/local/bin/mcp-files");
	ck_assert_ptr_null(s->argv[3]);		/* execv-ready */
	ck_assert_uint_eq(s->nenv, 1);
	ck_assert_str_eq(s->env[0], "LOG_LEVEL=warn");
	ck_assert_ptr_null(s->cred_file);
	s = pol_config_server(c, "warehouse");
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(s->transport, POL_MCP_HTTP);
	ck_assert_ptr_null(s->cred_file);
	/* Every server an example policy names is declared. */
	for (i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		pol_errors_clear(e);
		p = pol_policy_load(policies[i], c, e);
		ck_assert_msg(p != NULL, "%s: %s", policies[i],
		    pol_errors_get(e, 0));
		pol_policy_free(p);
	}
	ck_assert_ptr_null(pol_config_server(c, "nope"));
	ck_assert_ptr_null(pol_config_server(NULL, "files"));
	pol_config_free(c);
	pol_errors_free(e);
}
END_TEST

START_TEST(defaults)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_config	*c;
	char			 path[256];

	c = load_text("version: 1\ndns: {upstreams: [192.0.2.53]}\n", e,
	    path, sizeof(path));
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_str_eq(c->state_dir, "/var/lib/sluice");
	ck_assert_str_eq(c->run_dir, "/run/sluice");
	ck_assert_str_eq(c->socket_path, "/run/sluice/sluice.sock");
	ck_assert_str_eq(c->policy_dir, "/etc/sluice/policies");
	assert_addr(&c->pool.addr, "10.231.0.0");
	ck_assert_uint_eq(c->pool.prefix, 16);
	assert_addr(&c->service_addr, "10.231.255.254");
	ck_assert_uint_eq(c->bridge_port, 8080);
	ck_assert_ptr_null(c->uplink);
	ck_assert(!c->ipv6);
	ck_assert_uint_eq(c->dns_timeout_ms, 2000);
	ck_assert_uint_eq(c->dns_cache_entries, 16384);
	ck_assert_uint_eq(c->ntreat_as_public, 0);
	ck_assert_uint_eq(c->max_sandboxes, 4096);
	ck_assert_uint_eq(c->default_ttl_s, 0);
	ck_assert_uint_eq(c->nflog_group, 7);
	ck_assert_uint_eq(c->gate_queue, POL_GATE_QUEUE_DEFAULT);
	ck_assert_str_eq(c->audit_db, "/var/lib/sluice/audit.db");
	ck_assert_ptr_null(c->audit_key);
	ck_assert_str_eq(c->audit_origin, "sluice");
	ck_assert_uint_eq(c->nsinks, 0);
	ck_assert_uint_eq(c->nservers, 0);
	ck_assert_uint_eq(c->audit_flow_interval_s, 300);
	pol_config_free(c);

	/* Derived defaults follow the directories and the pool. */
	c = load_text("version: 1\nstate_dir: /srv/s\nrun_dir: /srv/r\n"
	    "network: {pool: 10.9.8.0/24}\nsandboxes: {default_ttl: 2h}\n"
	    "dns: {upstreams: [\"192.0.2.1:5353\"]}\n", e, path,
	    sizeof(path));
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_str_eq(c->socket_path, "/srv/r/sluice.sock");
	ck_assert_str_eq(c->audit_db, "/srv/s/audit.db");
	assert_addr(&c->service_addr, "10.9.8.254");
	ck_assert_uint_eq(c->default_ttl_s, 7200);
	ck_assert_uint_eq(c->dns_upstream_ports[0], 5353);
	pol_config_free(c);
	pol_errors_free(e);
}
END_TEST

/* dns.cache_entries: 0 turns the answer cache off (the bench runs both
 * sides uncached with it), the bounds are inclusive. */
static const struct {
	const char	*val;
	uint32_t	 want;
} cache_ok[] = {
	{ "0", 0 },
	{ "1", 1 },
	{ "16384", 16384 },
	{ "999999", 999999 },
	{ "1000000", 1000000 },
};

START_TEST(dns_cache_entries)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_config	*c;
	char			 path[256], text[256];

	snprintf(text, sizeof(text), "version: 1\ndns:\n  upstreams: "
	    "[192.0.2.53]\n  cache_entries: %s\n", cache_ok[_i].val);
	c = load_text(text, e, path, sizeof(path));
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_uint_eq(c->dns_cache_entries, cache_ok[_i].want);
	ck_assert_uint_eq(pol_errors_count(e), 0);
	pol_config_free(c);
	pol_errors_free(e);
}
END_TEST

/* audit.flow_interval: a duration from 1s (what the scenarios use to see
 * interim records without waiting minutes) to 1d, both inclusive. */
static const struct {
	const char	*val;
	uint32_t	 want;
} interval_ok[] = {
	{ "1s", 1 },
	{ "5m", 300 },
	{ "1h", 3600 },
	{ "1d", 86400 },
};

START_TEST(flow_interval)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_config	*c;
	char			 path[256], text[256];

	snprintf(text, sizeof(text), "version: 1\ndns: {upstreams: "
	    "[192.0.2.53]}\naudit:\n  flow_interval: %s\n",
	    interval_ok[_i].val);
	c = load_text(text, e, path, sizeof(path));
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_uint_eq(c->audit_flow_interval_s, interval_ok[_i].want);
	ck_assert_uint_eq(pol_errors_count(e), 0);
	pol_config_free(c);
	pol_errors_free(e);
}
END_TEST

/* Queue numbers the gate can be moved to, ends of the range included. */
static const struct {
	const char	*val;
	uint32_t	 want;
} queue_ok[] = {
	{ "0", 0 }, { "1", 1 }, { "7742", 7742 }, { "65535", 65535 },
};

START_TEST(gate_queue)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_config	*c;
	char			 path[256], text[256];

	snprintf(text, sizeof(text), "version: 1\nnetwork:\n  gate_queue: "
	    "%s\ndns:\n  upstreams: [192.0.2.53]\n", queue_ok[_i].val);
	c = load_text(text, e, path, sizeof(path));
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_uint_eq(c->gate_queue, queue_ok[_i].want);
	ck_assert_uint_eq(c->nflog_group, 7);	/* its neighbour untouched */
	pol_config_free(c);
	pol_errors_free(e);
}
END_TEST

START_TEST(world_config)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_config	*c;
	char			 path[256];

	/* The shape tests/e2e/world.sh writes. */
	c = load_text("version: 1\nstate_dir: /tmp/w/state\nrun_dir: /tmp/w/run"
	    "\nsocket: /tmp/w/run/s.sock\npolicy_dir: /tmp/w/p\nnetwork:\n"
	    "  pool: 10.77.0.0/16\n  service_address: 10.77.255.254\n"
	    "  bridge_port: 18080\n  uplink: veth-up1\n  ipv6: false\n"
	    "  treat_as_public:\n    - 192.0.2.0/24\n    - 2001:db8::/32\n"
	    "dns:\n  upstreams:\n    - 192.0.2.53\n  timeout_ms: 2000\n"
	    "audit:\n  db: /tmp/w/state/audit.db\n  origin: sluice.test/x\n",
	    e, path, sizeof(path));
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_uint_eq(c->bridge_port, 18080);
	ck_assert_uint_eq(c->ntreat_as_public, 2);
	ck_assert_str_eq(c->audit_origin, "sluice.test/x");
	pol_config_free(c);
	pol_errors_free(e);
}
END_TEST

static const struct {
	const char *text;
	const char *want;
} bad[] = {
	{ "dns: {upstreams: [192.0.2.1]}\n",
	  "1:1: missing required key \"version\"\n" },
	{ "version: 2\ndns: {upstreams: [192.0.2.1]}\n",
	  "1:10: unsupported version 2 (expected 1)\n" },
	{ "version: 1\n", "1:1: at least one DNS upstream is required "
	  "(dns.upstreams)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], timeout: 2s}\n",
	  "2:31: unknown key \"timeout\" in dns\n" },
	/* network.gate_queue: a 16-bit NFQUEUE number, never cut. */
	{ "version: 1\nnetwork: {gate_queue: 65536}\n"
	  "dns: {upstreams: [192.0.2.1]}\n",
	  "2:23: invalid gate_queue \"65536\" (an NFQUEUE number from 0 to "
	  "65535)\n" },
	{ "version: 1\nnetwork: {gate_queue: -1}\n"
	  "dns: {upstreams: [192.0.2.1]}\n",
	  "2:23: invalid gate_queue \"-1\" (an NFQUEUE number from 0 to "
	  "65535)\n" },
	{ "version: 1\nnetwork: {gate_queue: \"7741\"}\n"
	  "dns: {upstreams: [192.0.2.1]}\n",
	  "2:23: invalid gate_queue \"7741\" (an NFQUEUE number from 0 to "
	  "65535)\n" },
	{ "version: 1\nnetwork: {gate_queue: [1]}\n"
	  "dns: {upstreams: [192.0.2.1]}\n",
	  "2:23: invalid gate_queue (an NFQUEUE number from 0 to 65535)\n" },
	{ "version: 1\nnetwork: {gate_queu: 1}\n"
	  "dns: {upstreams: [192.0.2.1]}\n",
	  "2:11: unknown key \"gate_queu\" in network\n" },
	{ "version: 1\ndns: {upstreams: [dns.example]}\n",
	  "2:19: invalid DNS upstream \"dns.example\" (ADDR, ADDR:PORT or "
	  "[V6ADDR]:PORT)\n" },
	{ "version: 1\ndns: {upstreams: [\"192.0.2.1:0\"]}\n",
	  "2:19: invalid DNS upstream \"192.0.2.1:0\" (ADDR, ADDR:PORT or "
	  "[V6ADDR]:PORT)\n" },
	{ "version: 1\ndns: {upstreams: [\"2001:db8::1:53\", \"[2001:db8::1]\"]}"
	  "\n", "2:37: invalid DNS upstream \"[2001:db8::1]\" (ADDR, ADDR:PORT "
	  "or [V6ADDR]:PORT)\n" },
	{ "version: 1\nstate_dir: var/lib\ndns: {upstreams: [192.0.2.1]}\n",
	  "2:12: \"var/lib\" is not an absolute path\n" },
	{ "version: 1\nnetwork: {pool: 10.0.0.0/30}\n"
	  "dns: {upstreams: [192.0.2.1]}\n", "2:17: invalid pool "
	  "\"10.0.0.0/30\" (an IPv4 CIDR from /8 to /28, host bits clear)\n" },
	{ "version: 1\nnetwork: {service_address: 10.9.0.1}\n"
	  "dns: {upstreams: [192.0.2.1]}\n", "2:28: service_address 10.9.0.1 "
	  "is not inside the pool\n" },
	{ "version: 1\nnetwork: {bridge_port: 0}\n"
	  "dns: {upstreams: [192.0.2.1]}\n",
	  "2:24: bridge_port must be 1-65535\n" },
	{ "version: 1\nnetwork: {treat_as_public: [10.0.0.1/8]}\n"
	  "dns: {upstreams: [192.0.2.1]}\n", "2:29: invalid CIDR \"10.0.0.1/8\": "
	  "host bits set after /8\n" },
	{ "version: 1\nnetwork: {ipv6: yes}\ndns: {upstreams: [192.0.2.1]}\n",
	  "2:17: expected true or false\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\nservers:\n"
	  "  - {name: a, transport: http}\n",
	  "4:5: an http server needs url (and no command or env)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\nservers:\n"
	  "  - {name: a, transport: stdio, command: []}\n",
	  "4:5: a stdio server needs a non-empty command (and no url)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\nservers:\n"
	  "  - {name: a, transport: http, url: \"ftp://x\"}\n",
	  "4:37: invalid url \"ftp://x\" (http:// or https://)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\nservers:\n"
	  "  - {name: a, transport: http, url: \"http://x\"}\n"
	  "  - {name: a, transport: http, url: \"http://y\"}\n",
	  "5:12: duplicate server name \"a\"\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\nservers:\n"
	  "  - {name: A, transport: grpc}\n", "4:12: invalid server name "
	  "\"A\" (use [a-z0-9][a-z0-9_-]{0,31})\n4:26: invalid transport "
	  "\"grpc\" (http or stdio)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\nservers:\n"
	  "  - name: a\n    transport: http\n    url: http://x\n"
	  "    credential: {file: /k, env: K, header: H}\n",
	  "7:17: a credential needs exactly one of file or env\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\nservers:\n"
	  "  - name: a\n    transport: stdio\n    command: [x]\n"
	  "    credential: {env: K, header: H}\n", "7:17: a stdio credential "
	  "needs child_env (and no header or prefix)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\naudit_sinks:\n"
	  "  - {name: s, type: kafka, target: x}\n", "4:21: invalid sink type "
	  "\"kafka\" (file, syslog or webhook)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\naudit_sinks:\n"
	  "  - {name: s, type: file, target: rel.log, splunk_hec: true}\n",
	  "4:35: a file sink needs an absolute path\n4:56: splunk_hec needs "
	  "type webhook\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\nsandboxes: {max: 0}\n",
	  "3:18: max must be at least 1\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\naudit: {origin: \"a b\"}\n",
	  "3:17: origin must be non-empty without spaces\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\npolicies: /x\n",
	  "3:1: unknown key \"policies\" in the config\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\naudit: {flow_interval: 0s}\n",
	  "3:24: flow_interval must be from 1s to 1d\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\naudit: {flow_interval: 25h}\n",
	  "3:24: flow_interval must be from 1s to 1d\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\naudit: {flow_interval: soon}\n",
	  "3:24: invalid duration \"soon\" (use e.g. 30s, 5m, 1h, 2d; at most "
	  "100 years)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\naudit: {flow_intervl: 5m}\n",
	  "3:9: unknown key \"flow_intervl\" in audit\n" },
	{ "version: 1\ndns: &d {upstreams: [192.0.2.1]}\n",
	  "2:6: anchors are not allowed\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: 1000001}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: 4294967296}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: 18446744073709551616}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: -1}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: \"16\"}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: 1e3}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: 0x10}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: 16k}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: 1.5}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: [1]}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: {n: 1}}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: ~}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: true}\n",
	  "2:46: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns:\n  upstreams: [192.0.2.1]\n  cache_entries:\n",
	  "4:17: expected an integer from 0 to 1000000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache_entries: 5, "
	  "cache_entries: 6}\n", "2:49: duplicate key \"cache_entries\"\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1], cache: 0}\n",
	  "2:31: unknown key \"cache\" in dns\n" },
	/* fleet: the password never in the config, in any spelling libpq
	 * takes; the conninfo as libpq parses it. */
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "fleet: {postgresql: \"host=/run/pg dbname=f password=s3cret\"}\n",
	  "3:21: fleet.postgresql must not hold a password (use "
	  "fleet.password_file or SLUICE_PG_PASSWORD)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "fleet: {postgresql: \"postgresql://u:s3cret@db.example/f\"}\n",
	  "3:21: fleet.postgresql must not hold a password (use "
	  "fleet.password_file or SLUICE_PG_PASSWORD)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "fleet: {postgresql: \"postgresql:///f?password=s3cret\"}\n",
	  "3:21: fleet.postgresql must not hold a password (use "
	  "fleet.password_file or SLUICE_PG_PASSWORD)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "fleet: {postgresql: \"host=/run/pg dbnme=f\"}\n",
	  "3:21: invalid fleet.postgresql conninfo: invalid connection "
	  "option \"...\"\n" },
	/* A mistyped URI scheme reads as an option name holding the
	 * password: libpq quotes it, the message must not. */
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "fleet: {postgresql: \"postgrsql://u:s3cret@db/f\"}\n",
	  "3:21: invalid fleet.postgresql conninfo: missing \"...\"\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "fleet: {postgresql: \"host='/run/pg\"}\n",
	  "3:21: invalid fleet.postgresql conninfo: unterminated quoted "
	  "string in connection info string\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "fleet: {postgresql: \"\"}\n",
	  "3:21: fleet.postgresql must not be empty\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\nfleet: {host: a}\n",
	  "3:8: missing required key \"postgresql\" in fleet\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "fleet: {postgresql: \"dbname=f\", host: \"a b\", "
	  "password_file: rel, deadline_ms: 0}\n",
	  "3:39: invalid fleet.host \"a b\" (letters, digits, '.', '-', '_', "
	  "at most 63)\n3:61: \"rel\" is not an absolute path\n"
	  "3:79: deadline_ms must be at least 1\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "fleet: {postgresql: \"dbname=f\", deadline_ms: 60001}\n",
	  "3:46: expected an integer from 0 to 60000\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "fleet: {postgresql: \"dbname=f\", redis: x}\n",
	  "3:33: unknown key \"redis\" in fleet\n" },
	/* limits: the server-request bounds and deadline. */
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "limits: {server_requests_per_session: 5, "
	  "server_requests_per_sandbox: 4}\n",
	  "3:9: server_requests_per_session (5) must not be above "
	  "server_requests_per_sandbox (4)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "limits: {server_requests_per_session: 0}\n",
	  "3:39: server_requests_per_session must be at least 1\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "limits: {server_requests_per_sandbox: 1024}\n",
	  "3:39: expected an integer from 0 to 1023\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "limits: {server_request_deadline: 0s}\n",
	  "3:35: server_request_deadline must be from 1s to 10m\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "limits: {server_request_deadline: 11m}\n",
	  "3:35: server_request_deadline must be from 1s to 10m\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "limits: {server_request_deadline: soon}\n",
	  "3:35: invalid duration \"soon\" (use e.g. 30s, 5m, 1h, 2d; at "
	  "most 100 years)\n" },
	{ "version: 1\ndns: {upstreams: [192.0.2.1]}\n"
	  "limits: {server_requests: 4}\n",
	  "3:10: unknown key \"server_requests\" in limits\n" },
};

/* limits: the server-request bounds default to 4, 16 and 120 s, and
 * take what is written, the edges included. */
START_TEST(server_request_limits)
{
	static const struct {
		unsigned	 session, sandbox;
		const char	*deadline;
		uint32_t	 secs;
	} edges[] = { { 1, 1, "1s", 1 }, { 1023, 1023, "10m", 600 } };
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_config	*c;
	char			 path[256], text[256];
	size_t			 i;

	c = load_text("version: 1\ndns: {upstreams: [192.0.2.53]}\n", e,
	    path, sizeof(path));
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_uint_eq(c->lim_sreq_session, 4);
	ck_assert_uint_eq(c->lim_sreq_sandbox, 16);
	ck_assert_uint_eq(c->lim_sreq_deadline_s, 120);
	ck_assert_uint_eq(c->lim_tasks_sandbox, 16);
	ck_assert_uint_eq(c->lim_task_keep_s, 300);
	pol_config_free(c);
	c = load_text("version: 1\ndns: {upstreams: [192.0.2.53]}\n"
	    "limits: {tasks_per_sandbox: 255, task_keep: 1s}\n", e, path,
	    sizeof(path));
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_uint_eq(c->lim_tasks_sandbox, 255);
	ck_assert_uint_eq(c->lim_task_keep_s, 1);
	pol_config_free(c);
	/* No more than the bridge holds in all, none at all, no forever. */
	c = load_text("version: 1\ndns: {upstreams: [192.0.2.53]}\n"
	    "limits: {tasks_per_sandbox: 256}\n", e, path, sizeof(path));
	ck_assert_ptr_null(c);
	c = load_text("version: 1\ndns: {upstreams: [192.0.2.53]}\n"
	    "limits: {tasks_per_sandbox: 0}\n", e, path, sizeof(path));
	ck_assert_ptr_null(c);
	c = load_text("version: 1\ndns: {upstreams: [192.0.2.53]}\n"
	    "limits: {task_keep: 11m}\n", e, path, sizeof(path));
	ck_assert_ptr_null(c);

	for (i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
		snprintf(text, sizeof(text), "version: 1\ndns: {upstreams: "
		    "[192.0.2.53]}\nlimits:\n  server_requests_per_session: "
		    "%u\n  server_requests_per_sandbox: %u\n"
		    "  server_request_deadline: %s\n", edges[i].session,
		    edges[i].sandbox, edges[i].deadline);
		c = load_text(text, e, path, sizeof(path));
		ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
		ck_assert_uint_eq(c->lim_sreq_session, edges[i].session);
		ck_assert_uint_eq(c->lim_sreq_sandbox, edges[i].sandbox);
		ck_assert_uint_eq(c->lim_sreq_deadline_s, edges[i].secs);
		pol_config_free(c);
	}

	/* A session bound alone may not pass the default sandbox one. */
	c = load_text("version: 1\ndns: {upstreams: [192.0.2.53]}\n"
	    "limits: {server_requests_per_session: 17}\n", e, path,
	    sizeof(path));
	ck_assert_ptr_null(c);
	pol_errors_free(e);
}
END_TEST

/* fleet: absent, nothing changes; present, its fields and defaults. */
START_TEST(fleet_section)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_config	*c;
	char			 path[256];

	c = load_text("version: 1\ndns: {upstreams: [192.0.2.53]}\n", e,
	    path, sizeof(path));
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_ptr_null(c->fleet_conninfo);
	ck_assert_ptr_null(c->fleet_host);
	ck_assert_ptr_null(c->fleet_password_file);
	pol_config_free(c);

	c = load_text("version: 1\ndns: {upstreams: [192.0.2.53]}\n"
	    "fleet:\n  postgresql: \"host=/run/pg user=sluice_host "
	    "dbname=fleet\"\n", e, path, sizeof(path));
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_str_eq(c->fleet_conninfo,
	    "host=/run/pg user=sluice_host dbname=fleet");
	ck_assert_ptr_null(c->fleet_host);
	ck_assert_uint_eq(c->fleet_deadline_ms, 2000);
	pol_config_free(c);

	c = load_text("version: 1\ndns: {upstreams: [192.0.2.53]}\n"
	    "fleet:\n  postgresql: \"postgresql://sluice_host@db.example/f"
	    "?sslmode=require\"\n  host: web-01.example\n"
	    "  password_file: /etc/sluice/pg.pw\n  deadline_ms: 60000\n", e,
	    path, sizeof(path));
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	ck_assert_str_eq(c->fleet_host, "web-01.example");
	ck_assert_str_eq(c->fleet_password_file, "/etc/sluice/pg.pw");
	ck_assert_uint_eq(c->fleet_deadline_ms, 60000);
	ck_assert_uint_eq(pol_errors_count(e), 0);
	pol_config_free(c);
	pol_errors_free(e);
}
END_TEST

START_TEST(error_messages)
{
	struct pol_errors	*e = pol_errors_new(50);
	char			 path[256], *got = NULL;
	size_t			 len = 0, i, plen;
	FILE			*f;

	ck_assert_ptr_null(load_text(bad[_i].text, e, path, sizeof(path)));
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

START_TEST(policy_checks_servers)
{
	struct pol_errors	*e = pol_errors_new(50);
	struct pol_config	*c = pol_config_load("tests/policy/config.yaml",
				    e);
	struct pol_policy	*p;

	ck_assert_ptr_nonnull(c);
	/* The same policy loads without a config, not with one that lacks
	 * its server. */
	p = pol_policy_load("tests/policy/hostile/unknown-server.yaml", NULL,
	    e);
	ck_assert_ptr_nonnull(p);
	pol_policy_free(p);
	p = pol_policy_load("tests/policy/hostile/unknown-server.yaml", c, e);
	ck_assert_ptr_null(p);
	pol_config_free(c);
	pol_errors_free(e);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("policy_config");
	TCase	*core = tcase_create("Core"), *lim = tcase_create("Limits");
	SRunner	*sr;
	int	 nf;

	tcase_add_unchecked_fixture(core, setup, teardown);
	tcase_add_test(core, example_config);
	tcase_add_test(core, defaults);
	tcase_add_test(core, world_config);
	tcase_add_loop_test(core, dns_cache_entries, 0,
	    sizeof(cache_ok) / sizeof(cache_ok[0]));
	tcase_add_loop_test(core, flow_interval, 0,
	    sizeof(interval_ok) / sizeof(interval_ok[0]));
	tcase_add_test(core, policy_checks_servers);
	tcase_add_test(core, fleet_section);
	tcase_add_test(core, server_request_limits);
	tcase_add_loop_test(core, gate_queue, 0,
	    sizeof(queue_ok) / sizeof(queue_ok[0]));
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
