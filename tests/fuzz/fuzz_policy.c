/*
 * fuzz_policy: arbitrary bytes as a policy file (policy/load.c, yaml.c),
 * then every decision on whatever loaded.
 *
 * Policy files are operator text, but they arrive through reloads, CI and
 * copy-paste, and a loader that crashes or half-loads on a bad file takes
 * the daemon's enforcement with it. Beyond "does not crash", every input is
 * held to what users rely on:
 *   - the loader either returns a policy and no error, or NULL and at
 *     least one error (never both, never neither);
 *   - every error message is "fuzz.yaml:LINE:COL: text", with decimal
 *     LINE and COL and non-empty text, so editors and CI can jump to it;
 *   - loading is deterministic: the same bytes give the same outcome and
 *     the same messages; a loaded policy's digest is 64 hex digits;
 *   - on a loaded policy every decision function answers with a known
 *     verdict, a rule and a reason (egress, DNS, tools, visibility), the
 *     static tables are consistent, and redaction either succeeds without
 *     leaving an enabled class's sample in place or fails with errno set;
 *   - the input itself, redacted as a tool result under an every-class
 *     policy, keeps no upstream credential and no AWS key id, and is
 *     unchanged when no marker was placed.
 * Queries use fixed names plus the input's own first line (less a leading
 * '#'), so the fuzzer also steers the decision inputs.
 */
#include <netinet/in.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "tests/fuzz/fuzz.h"

#define NAME	"fuzz.yaml"

static void
check_decision(const struct pol_decision *d)
{
	REQUIRE(d->verdict == POL_DENY || d->verdict == POL_ALLOW ||
	    d->verdict == POL_ASK || d->verdict == POL_SYNTHETIC);
	REQUIRE(d->rule != NULL && d->rule[0] != '\0');
	REQUIRE(d->reason != POL_REASON_NONE &&
	    d->reason < POL_REASON__COUNT);
}

static void
check_rules(const struct pol_net_rule *r, size_t n)
{
	size_t	i;

	REQUIRE(n == 0 || r != NULL);
	for (i = 0; i < n; i++) {
		REQUIRE(r[i].cidr.addr.family == AF_INET ||
		    r[i].cidr.addr.family == AF_INET6);
		REQUIRE(r[i].port_lo <= r[i].port_hi);
		REQUIRE(pol_cidr_contains(&r[i].cidr, &r[i].cidr.addr));
	}
}

static void
egress(const struct pol_policy *p, const char *host)
{
	static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_UDP,
	    IPPROTO_ICMP, IPPROTO_ICMPV6, 0, 99 };
	static const uint16_t ports[] = { 443, 80, 0, 53, 65535 };
	struct pol_egress_q	 q;
	struct pol_decision	 d;
	struct pol_net_rule	 out[4];
	size_t			 i, j, n;

	for (i = 0; i < sizeof(protos); i++) {
		for (j = 0; j < sizeof(ports) / sizeof(ports[0]); j++) {
			memset(&q, 0, sizeof(q));
			q.host = host;
			q.proto = protos[i];
			q.port = ports[j];
			q.tainted = (i + j) & 1;
			pol_egress_decide(p, &q, &d);
			check_decision(&d);
			REQUIRE(d.verdict == POL_DENY ||
			    d.verdict == POL_ALLOW);
		}
	}
	n = pol_egress_ports_for_name(p, host, false, out, 4);
	REQUIRE(n <= 4);
	n = pol_egress_ports_for_name(p, host, true, out, 4);
	REQUIRE(n <= 4);
}

static void
dns(const struct pol_policy *p, const char *name)
{
	static const uint16_t types[] = { 1, 28, 5, 16, 65, 64, 255, 0 };
	struct pol_dns_q	 q;
	struct pol_decision	 d;
	struct pol_dns_limits	 l;
	enum pol_reason		 why = POL_REASON_NONE;
	size_t			 i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		q.name = name;
		q.qtype = types[i];
		q.tainted = i & 1;
		pol_dns_decide(p, &q, &d);
		check_decision(&d);
	}
	pol_dns_limits(p, &l);
	REQUIRE(l.min_ttl_s <= l.max_ttl_s);
	if (pol_dns_name_suspect(&l, name, &why))
		REQUIRE(why != POL_REASON_NONE);
}

static void
tools(const struct pol_policy *p, const char *text)
{
	static const char *const refs[][2] = {
		{ "everything", "echo" }, { "files", "read_file" },
		{ "files", "write_file" }, { "x", "*" }, { "", "" },
	};
	const char *const args[] = { NULL, "{}", "{\"message\":\"hi\"}",
	    "{\"path\":\"/workspace/../etc\"}", "[1]", "not json", text };
	struct pol_budget_use	 use = { "tool-calls", 1000, 1000, 1000 };
	struct pol_tool_q	 q;
	struct pol_tool_decision td;
	enum pol_reason		 reason;
	size_t			 i, j;

	for (i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
		for (j = 0; j < sizeof(args) / sizeof(args[0]); j++) {
			memset(&q, 0, sizeof(q));
			q.subject = j & 1 ? "alice" : NULL;
			q.server = refs[i][0];
			q.tool = refs[i][1];
			q.args_json = args[j];
			q.budgets = j & 2 ? &use : NULL;
			q.nbudgets = j & 2 ? 1 : 0;
			q.pin_hex = j & 4 ? "sha256:00" : NULL;
			pol_tool_decide(p, &q, &td);
			check_decision(&td.d);
			REQUIRE(td.d.verdict != POL_SYNTHETIC);
			REQUIRE(td.nres <= POL_MAX_RESERVATIONS);
			REQUIRE(memchr(td.message, '\0',
			    sizeof(td.message)) != NULL);
			if (td.d.verdict == POL_DENY)
				REQUIRE(td.nres == 0);
			else
				REQUIRE(td.max_result_bytes ==
				    pol_result_max_bytes(p));
			REQUIRE(td.classification != NULL);
			reason = POL_REASON_NONE;
			(void)pol_tool_visible_q(p, &q, &reason);
			REQUIRE(reason != POL_REASON_NONE);
		}
		reason = POL_REASON_NONE;
		(void)pol_tool_visible(p, refs[i][0], refs[i][1], NULL,
		    &reason);
		REQUIRE(reason != POL_REASON_NONE);
	}
}

static void
redact(const struct pol_policy *p, const char *text, size_t len)
{
	static const char sample[] = "k=AKIAIOSFODNN7EXAMPLE Bearer abc "
	    "upstream-secret-1 ";
	const char	*sec[] = { "upstream-secret-1" };
	char		*in, *out;
	size_t		 outlen;
	unsigned	 count;
	int		 rc;

	if ((in = malloc(sizeof(sample) + len)) == NULL)
		return;
	memcpy(in, sample, sizeof(sample) - 1);
	memcpy(in + sizeof(sample) - 1, text, len);
	errno = 0;
	rc = pol_redact(p, sec, 1, in, sizeof(sample) - 1 + len, &out,
	    &outlen, &count);
	if (rc == -1) {
		REQUIRE(errno != 0);
		REQUIRE(out == NULL);
	} else {
		REQUIRE(rc == 0 && out != NULL && out[outlen] == '\0');
		if (!pol_redact_enabled(p))
			REQUIRE(count == 0);
		/* No marker, no change. */
		if (count == 0)
			REQUIRE(outlen == sizeof(sample) - 1 + len &&
			    memcmp(out, in, outlen) == 0);
		else
			REQUIRE(strstr(out, "[REDACTED:") != NULL);
		free(out);
	}
	free(in);
}

static void
statics(const struct pol_policy *p)
{
	const struct pol_net_rule *r;
	const char	*s;
	size_t		 n, i;

	r = pol_egress_static(p, true, &n);
	check_rules(r, n);
	r = pol_egress_static(p, false, &n);
	check_rules(r, n);
	r = pol_taint_keep(p, &n);
	check_rules(r, n);
	s = pol_policy_digest(p);
	REQUIRE(strlen(s) == 64);
	for (i = 0; i < 64; i++)
		REQUIRE((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f'));
	REQUIRE(pol_policy_name(p) != NULL && pol_policy_name(p)[0] != '\0');
	s = pol_taint_level(p);
	REQUIRE(s == NULL || strcmp(s, "public") == 0 ||
	    strcmp(s, "internal") == 0 || strcmp(s, "confidential") == 0 ||
	    strcmp(s, "secret") == 0);
}

/* aws_id_at: an AKIA/ASIA key id starts at s[i]. */
static bool
aws_id_at(const char *s, size_t n, size_t i)
{
	size_t	k;

	if (i + 20 > n || s[i] != 'A' || (s[i + 1] != 'K' && s[i + 1] != 'S') ||
	    s[i + 2] != 'I' || s[i + 3] != 'A')
		return false;
	for (k = 4; k < 20; k++)
		if (!((s[i + k] >= 'A' && s[i + k] <= 'Z') ||
		    (s[i + k] >= '0' && s[i + k] <= '9')))
			return false;
	return true;
}

/*
 * The input as a tool result, under a policy with every built-in class
 * (with and without a pattern): the call succeeds unless a pattern meets
 * invalid UTF-8, nothing changes without a marker, and neither the
 * upstream credential nor an AWS key id survives anywhere in the output.
 */
static void
redact_input(const uint8_t *data, size_t size, bool patterns)
{
	static const char text[] = "version: 1\nmcp:\n  results:\n"
	    "    redact: [aws_keys, private_keys, bearer_tokens, "
	    "github_tokens, upstream_credentials]\n";
	static const char pat[] = "    redact_patterns: [\"(?i)secret-"
	    "[a-z0-9]+\"]\n";
	const char	*sec[] = { "upstream-secret-1", "Zm9vYmFy" };
	struct pol_errors *e = pol_errors_new(5);
	struct pol_policy *p;
	char		 buf[sizeof(text) + sizeof(pat)], *out;
	size_t		 outlen, i;
	unsigned	 count;
	int		 rc;

	snprintf(buf, sizeof(buf), "%s%s", text, patterns ? pat : "");
	p = pol_policy_load_buf("redact.yaml", buf, strlen(buf), NULL, e);
	REQUIRE(p != NULL);
	errno = 0;
	rc = pol_redact(p, sec, 2, (const char *)data, size, &out, &outlen,
	    &count);
	if (rc == -1) {
		REQUIRE(patterns && errno == EINVAL && out == NULL);
	} else {
		REQUIRE(out != NULL && out[outlen] == '\0');
		if (count == 0)
			REQUIRE(outlen == size && memcmp(out, data, size) == 0);
		for (i = 0; i < 2; i++)
			REQUIRE(memmem(out, outlen, sec[i],
			    strlen(sec[i])) == NULL);
		for (i = 0; i < outlen; i++)
			REQUIRE(!aws_id_at(out, outlen, i));
		free(out);
	}
	pol_policy_free(p);
	pol_errors_free(e);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const hosts[] = { "pypi.org", "x.evil.example",
	    "169.254.169.254", "::ffff:10.0.0.1", "198.51.100.9",
	    "sluice.internal", "", "a..b", "files.pythonhosted.org." };
	struct pol_errors	*e, *e2;
	struct pol_policy	*p, *p2;
	char			 line[80];
	size_t			 i, n, len;

	if ((e = pol_errors_new(50)) == NULL ||
	    (e2 = pol_errors_new(50)) == NULL) {
		pol_errors_free(e);
		return 0;
	}
	/* data is not NUL-terminated: the loader takes a length. */
	p = pol_policy_load_buf(NAME, (const char *)data, size, NULL, e);
	n = pol_errors_count(e);
	REQUIRE((p != NULL) == (n == 0));
	for (i = 0; i < n && i < 50; i++)
		fuzz_check_message(NAME, pol_errors_get(e, i));
	REQUIRE(n > 50 || pol_errors_get(e, n) == NULL);

	p2 = pol_policy_load_buf(NAME, (const char *)data, size, NULL, e2);
	REQUIRE((p2 != NULL) == (p != NULL));
	REQUIRE(pol_errors_count(e2) == n);
	for (i = 0; i < n && i < 50; i++)
		REQUIRE(strcmp(pol_errors_get(e, i),
		    pol_errors_get(e2, i)) == 0);
	if (p != NULL) {
		REQUIRE(strcmp(pol_policy_digest(p),
		    pol_policy_digest(p2)) == 0);
		REQUIRE(strcmp(pol_policy_name(p), pol_policy_name(p2)) == 0);
	}
	pol_policy_free(p2);
	pol_errors_free(e2);

	if (p != NULL) {
		/* The input's first line, less a leading '#' (a YAML
		 * comment), steers the queries. */
		i = size > 0 && data[0] == '#' ? 1 : 0;
		len = 0;
		while (i + len < size && len < sizeof(line) - 1 &&
		    data[i + len] != '\n' && data[i + len] != '\0')
			len++;
		memcpy(line, data + i, len);
		line[len] = '\0';
		statics(p);
		for (i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
			egress(p, hosts[i]);
			dns(p, hosts[i]);
		}
		egress(p, line);
		dns(p, line);
		tools(p, line);
		redact(p, line, len);
	}
	pol_policy_free(p);
	pol_errors_free(e);
	redact_input(data, size, false);
	redact_input(data, size, true);
	return 0;
}
