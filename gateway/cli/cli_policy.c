/*
 * cli_policy: `sluice policy check` and `sluice policy explain`, the
 * offline side of policies.
 *
 * Both work on files without a daemon: `check` is what a user (or CI) runs
 * before installing a policy, printing every error as FILE:LINE:COL so
 * editors can jump to it; `explain` answers "what would Sluice decide, and
 * which rule decides?" with the same pure functions the daemon uses, so the
 * answer cannot drift from enforcement. For a host name it also answers
 * for the DNS proxy (would it resolve the name, by which rule, and what
 * would its answers open), since a name is only reachable through it.
 */
#include <netinet/in.h>
#include <sys/socket.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/cli/cli.h"
#include "policy/policy.h"

#define MAX_LABELS	32

static int
usage(void)
{
	return cli_usage("policy");
}

static void
print_errors(const struct pol_errors *e, const char *file)
{
	size_t	i, stored = 0;

	for (i = 0; pol_errors_get(e, i) != NULL; i++, stored++)
		fprintf(stderr, "%s\n", pol_errors_get(e, i));
	if (pol_errors_count(e) > stored)
		fprintf(stderr, "%s: %zu more errors not shown\n", file,
		    pol_errors_count(e) - stored);
}

/* load_config: --config, or NULL when not given. -1 if given and bad. */
static int
load_config(const char *path, struct pol_config **out)
{
	struct pol_errors *e;

	*out = NULL;
	if (path == NULL)
		return 0;
	if ((e = pol_errors_new(50)) == NULL)
		return -1;
	if ((*out = pol_config_load(path, e)) == NULL)
		print_errors(e, path);
	pol_errors_free(e);
	return *out == NULL ? -1 : 0;
}

/*
 * Where sluiced's config lives when it is installed as the README says.
 * `policy check` uses it when no --config is given, so that a policy
 * naming a server the daemon does not declare fails here and not at the
 * daemon's start or reload.
 */
#define DEFAULT_CONFIG	"/etc/sluice/sluice.yaml"

static int
cmd_check(int argc, char **argv)
{
	struct pol_errors	*e;
	struct pol_config	*cfg;
	struct pol_policy	*p;
	const char		*cfgpath = NULL;
	int			 i = 1, rc = 0;

	if (i < argc && strcmp(argv[i], "--config") == 0) {
		if (i + 1 >= argc)
			return usage();
		cfgpath = argv[i + 1];
		i += 2;
	}
	if (i < argc && strcmp(argv[i], "--") == 0)
		i++;
	if (i >= argc)
		return usage();
	/* Absent is normal (a CI runner, a laptop); present but broken is
	 * an error, as with --config: the daemon would not start either. */
	if (cfgpath == NULL && access(DEFAULT_CONFIG, F_OK) == 0)
		cfgpath = DEFAULT_CONFIG;
	if (load_config(cfgpath, &cfg) == -1)
		return 1;
	if (cfgpath == NULL)
		printf("no daemon config found; server names not checked "
		    "(give --config FILE)\n");
	else
		printf("server names checked against %s\n", cfgpath);
	if ((e = pol_errors_new(50)) == NULL) {
		pol_config_free(cfg);
		return 1;
	}
	for (; i < argc; i++) {
		pol_errors_clear(e);
		if ((p = pol_policy_load(argv[i], cfg, e)) == NULL) {
			print_errors(e, argv[i]);
			rc = 1;
			continue;
		}
		printf("%s: ok\n", argv[i]);
		pol_policy_free(p);
	}
	pol_errors_free(e);
	pol_config_free(cfg);
	return rc;
}

static const char *
verdict_name(enum pol_verdict v)
{
	switch (v) {
	case POL_ALLOW:
		return "allow";
	case POL_ASK:
		return "ask";
	case POL_SYNTHETIC:
		return "synthetic";
	case POL_DENY:
		break;
	}
	return "deny";
}

/* parse_egress: HOST:PORT[/PROTO], [V6]:PORT[/PROTO] or HOST/icmp into q;
 * host points into buf. -1 on a malformed spec. */
static int
parse_egress(const char *spec, char *buf, size_t buflen,
    struct pol_egress_q *q)
{
	char		*slash, *colon, *host, *end;
	unsigned long	 port;

	if (strlen(spec) >= buflen)
		return -1;
	strcpy(buf, spec);
	q->proto = IPPROTO_TCP;
	if ((slash = strrchr(buf, '/')) != NULL) {
		*slash++ = '\0';
		if (strcmp(slash, "tcp") == 0)
			q->proto = IPPROTO_TCP;
		else if (strcmp(slash, "udp") == 0)
			q->proto = IPPROTO_UDP;
		else if (strcmp(slash, "icmp") == 0)
			q->proto = IPPROTO_ICMP;
		else
			return -1;
	}
	host = buf;
	if (*host == '[') {
		if ((end = strchr(host, ']')) == NULL)
			return -1;
		*end = '\0';
		host++;
		colon = end[1] == ':' ? end + 1 : NULL;
		if (colon == NULL && end[1] != '\0')
			return -1;
	} else {
		colon = strrchr(host, ':');
		/* A bare IPv6 literal has several colons and no port. */
		if (colon != NULL && strchr(host, ':') != colon)
			return -1;
	}
	if (colon != NULL) {
		*colon++ = '\0';
		port = strtoul(colon, &end, 10);
		if (*colon == '\0' || *end != '\0' || port > 65535)
			return -1;
		q->port = (uint16_t)port;
	} else if (q->proto != IPPROTO_ICMP)
		return -1;
	if (*host == '\0')
		return -1;
	if (q->proto == IPPROTO_ICMP && strchr(host, ':') != NULL)
		q->proto = IPPROTO_ICMPV6;
	q->host = host;
	return 0;
}

static void
print_decision(const struct pol_decision *d)
{
	printf("decision: %s\nrule: %s\nreason: %s\n", verdict_name(d->verdict),
	    d->rule, pol_reason_name(d->reason));
}

/* The byte budget an allowed flow is counted against: the rule's
 * ("budget: 100MiB per 3600s", "none"), and a tainted sandbox's. */
static void
print_budget(const struct pol_policy *p, const struct pol_egress_q *q,
    const struct pol_decision *d)
{
	const struct pol_rule_budget *b;
	size_t n;
	int id;

	if (d->verdict != POL_ALLOW)
		return;
	b = pol_egress_budgets(p, &n);
	if ((id = pol_egress_budget_id(p, q)) >= 0 && (size_t)id < n) {
		printf("egress_budget: %llu bytes",
		    (unsigned long long)b[id].bytes);
		if (b[id].window_s != 0)
			printf(" per %llus window",
			    (unsigned long long)b[id].window_s);
		else
			printf(" for the sandbox's life");
		printf("\n");
	} else if (!q->tainted)
		printf("egress_budget: none\n");
	if (q->tainted && pol_taint_budget(p) != 0)
		printf("taint_budget: %llu bytes from the taint on\n",
		    (unsigned long long)pol_taint_budget(p));
	else if (q->tainted)
		printf("taint_budget: none\n");
}

static const char *
proto_name(uint8_t proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return "tcp";
	case IPPROTO_UDP:
		return "udp";
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		return "icmp";
	}
	return "any";
}

/* One opened TCP range's name check (pol_egress_check) as "=tls": at its
 * first port, and where the default differs inside it (80, 443), there
 * too ("=none,443=tls"). */
static void
print_check(const struct pol_policy *p, const char *name, bool tainted,
    const struct pol_net_rule *r)
{
	static const uint16_t special[] = { 80, 443 };
	struct pol_decision d;
	enum pol_check c0, c;
	size_t i;

	pol_egress_check(p, name, r->port_lo, tainted, &d, &c0);
	printf("=%s", pol_check_name(c0));
	for (i = 0; i < sizeof(special) / sizeof(special[0]); i++) {
		if (special[i] <= r->port_lo || special[i] > r->port_hi)
			continue;
		pol_egress_check(p, name, special[i], tainted, &d, &c);
		if (c != c0)
			printf(",%u=%s", special[i], pol_check_name(c));
	}
}

/*
 * explain_dns: a sandbox reaches a host name only through the DNS proxy,
 * so for a name the egress answer is half the story: print whether the
 * proxy would resolve it (A and AAAA), which rule decides that, which
 * protocol/ports its answers would open in the kernel, and on each TCP
 * port which name check the gate applies before a flow opens. -1 if the
 * proxy would refuse the name.
 */
static int
explain_dns(const struct pol_policy *p, const char *name, bool tainted)
{
	static const struct { uint16_t type; const char *name; } types[] = {
		{ 1, "A" }, { 28, "AAAA" },
	};
	struct pol_dns_q	 q;
	struct pol_decision	 d[2];
	const struct pol_decision *show = NULL;
	struct pol_net_rule	 r[32];
	char			 ok[16] = "";
	size_t			 i, n;

	memset(&q, 0, sizeof(q));
	q.name = name;
	q.tainted = tainted;
	for (i = 0; i < 2; i++) {
		q.qtype = types[i].type;
		pol_dns_decide(p, &q, &d[i]);
		if (d[i].verdict == POL_SYNTHETIC && show == NULL)
			show = &d[i];
		if (d[i].verdict == POL_ALLOW &&
		    d[i].reason == POL_REASON_ALLOWED) {
			if (show == NULL)
				show = &d[i];
			if (ok[0] != '\0')
				strcat(ok, " ");
			strcat(ok, types[i].name);
		}
	}
	if (show == NULL)
		show = &d[0];
	printf("dns: %s\ndns_rule: %s\ndns_reason: %s\n",
	    verdict_name(show->verdict), show->rule,
	    pol_reason_name(show->reason));
	if (show->verdict != POL_ALLOW)
		return show->verdict == POL_DENY ? -1 : 0;
	printf("dns_types: %s\n", ok);
	n = pol_egress_ports_for_name(p, name, tainted, r,
	    sizeof(r) / sizeof(r[0]));
	printf("dns_opens:");
	for (i = 0; i < n; i++) {
		if (r[i].port_lo == 0 && r[i].port_hi == 0)
			printf(" %s", proto_name(r[i].proto));
		else if (r[i].port_lo == r[i].port_hi)
			printf(" %s/%u", proto_name(r[i].proto), r[i].port_lo);
		else
			printf(" %s/%u-%u", proto_name(r[i].proto),
			    r[i].port_lo, r[i].port_hi);
	}
	printf("\n");
	printf("dns_checks:");
	for (i = 0; i < n; i++) {
		if (r[i].proto != IPPROTO_TCP || r[i].port_lo == 0)
			continue;
		if (r[i].port_lo == r[i].port_hi)
			printf(" tcp/%u", r[i].port_lo);
		else
			printf(" tcp/%u-%u", r[i].port_lo, r[i].port_hi);
		print_check(p, name, tainted, &r[i]);
	}
	printf("\n");
	return 0;
}

static int
cmd_explain(int argc, char **argv)
{
	struct pol_errors	*e = NULL;
	struct pol_config	*cfg = NULL;
	struct pol_policy	*p = NULL;
	struct pol_egress_q	 eq;
	struct pol_decision	 d;
	struct pol_addr		 addr;
	struct pol_tool_q	 tq;
	struct pol_tool_decision td;
	const char		*file = NULL, *egress = NULL, *tool = NULL;
	const char		*args = NULL, *subject = NULL, *cfgpath = NULL;
	const char		*pin = NULL, *lk[MAX_LABELS], *lv[MAX_LABELS];
	char			*labels[MAX_LABELS], hostbuf[300], server[64];
	char			*eq_sign;
	const char		*slash;
	size_t			 nlabels = 0, i;
	bool			 tainted = false;
	int			 a, rc = 2;

	for (a = 1; a < argc; a++) {
		const char *o = argv[a];
		bool has = a + 1 < argc;

		if (strcmp(o, "--egress") == 0 && has && egress == NULL)
			egress = argv[++a];
		else if (strcmp(o, "--tool") == 0 && has && tool == NULL)
			tool = argv[++a];
		else if (strcmp(o, "--args") == 0 && has && args == NULL)
			args = argv[++a];
		else if (strcmp(o, "--subject") == 0 && has && subject == NULL)
			subject = argv[++a];
		else if (strcmp(o, "--config") == 0 && has && cfgpath == NULL)
			cfgpath = argv[++a];
		else if (strcmp(o, "--pin") == 0 && has && pin == NULL)
			pin = argv[++a];
		else if (strcmp(o, "--label") == 0 && has &&
		    nlabels < MAX_LABELS)
			labels[nlabels++] = argv[++a];
		else if (strcmp(o, "--tainted") == 0)
			tainted = true;
		else if (o[0] != '-' && file == NULL)
			file = o;
		else
			return usage();
	}
	if (file == NULL || (egress == NULL) == (tool == NULL) ||
	    (tool != NULL && args == NULL) || (egress != NULL &&
	    (args != NULL || subject != NULL || pin != NULL || nlabels > 0)))
		return usage();
	for (i = 0; i < nlabels; i++) {
		if ((eq_sign = strchr(labels[i], '=')) == NULL ||
		    eq_sign == labels[i])
			return usage();
	}
	memset(&eq, 0, sizeof(eq));
	memset(&tq, 0, sizeof(tq));
	if (egress != NULL && parse_egress(egress, hostbuf, sizeof(hostbuf),
	    &eq) == -1) {
		fprintf(stderr, "sluice policy explain: bad --egress \"%s\" "
		    "(HOST:PORT[/tcp|udp] or HOST/icmp)\n", egress);
		return 2;
	}
	if (tool != NULL) {
		slash = strchr(tool, '/');
		if (slash == NULL || slash == tool || slash[1] == '\0' ||
		    (size_t)(slash - tool) >= sizeof(server)) {
			fprintf(stderr, "sluice policy explain: bad --tool "
			    "\"%s\" (SERVER/TOOL)\n", tool);
			return 2;
		}
		memcpy(server, tool, (size_t)(slash - tool));
		server[slash - tool] = '\0';
		tq.server = server;
		tq.tool = slash + 1;
	}
	rc = 1;
	if (load_config(cfgpath, &cfg) == -1)
		goto out;
	if ((e = pol_errors_new(50)) == NULL)
		goto out;
	if ((p = pol_policy_load(file, cfg, e)) == NULL) {
		print_errors(e, file);
		goto out;
	}
	if (egress != NULL) {
		eq.tainted = tainted;
		if (cfg != NULL) {
			eq.treat_as_public = cfg->treat_as_public;
			eq.ntreat_as_public = cfg->ntreat_as_public;
		}
		pol_egress_decide(p, &eq, &d);
		print_decision(&d);
		print_budget(p, &eq, &d);
		rc = d.verdict == POL_DENY ? 1 : 0;
		/* A name the proxy refuses cannot be reached at all. */
		if (pol_addr_parse(eq.host, &addr) == -1 &&
		    explain_dns(p, eq.host, tainted) == -1)
			rc = 1;
		goto out;
	}
	/* Labels are split in place: argv strings are ours to edit. */
	for (i = 0; i < nlabels; i++) {
		eq_sign = strchr(labels[i], '=');
		*eq_sign = '\0';
		lk[i] = labels[i];
		lv[i] = eq_sign + 1;
	}
	tq.subject = subject;
	tq.label_keys = lk;
	tq.label_values = lv;
	tq.nlabels = nlabels;
	tq.args_json = args;
	tq.pin_hex = pin;
	pol_tool_decide(p, &tq, &td);
	print_decision(&td.d);
	if (td.message[0] != '\0')
		printf("message: %s\n", td.message);
	printf("classification: %s\n", td.classification);
	for (i = 0; i < td.nres; i++)
		printf("budget: %s\n", td.res[i].budget);
	rc = td.d.verdict == POL_DENY ? 1 : 0;
out:
	pol_policy_free(p);
	pol_errors_free(e);
	pol_config_free(cfg);
	return rc;
}

int
cli_policy(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	if (strcmp(argv[1], "check") == 0)
		return cmd_check(argc - 1, argv + 1);
	if (strcmp(argv[1], "explain") == 0)
		return cmd_explain(argc - 1, argv + 1);
	return usage();
}
