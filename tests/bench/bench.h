/*
 * bench.h: what the benchmark programs of tests/bench/ share.
 *
 * The benchmarks must load the same nftables table the daemon loads, or they
 * would measure something Sluice never runs. This header builds that
 * configuration once (the classifier's always-deny and private ranges, the
 * default pool and service address, the documentation ranges of the fake
 * internet treated as public exactly as tests/e2e/world.sh configures
 * sluiced), plus a monotonic clock and a fatal-error helper. Everything is
 * static: each bench program is one translation unit plus the module objects
 * it links, built by tests/bench/run.sh.
 */
#ifndef SLUICE_TESTS_BENCH_BENCH_H
#define SLUICE_TESTS_BENCH_BENCH_H

#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "netns/fw.h"
#include "policy/policy.h"

#define BENCH_POOL	"10.231.0.0"
#define BENCH_POOL_LEN	16
#define BENCH_SERVICE	"10.231.255.254"
#define BENCH_BRIDGE	8080
#define BENCH_NFLOG	7
#define BENCH_MAXRANGES	64

/* die: a bench program cannot measure anything after a failed step; say
 * which and stop (run.sh reports the section as failed). */
static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	fprintf(stderr, "bench: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* now_ns: CLOCK_MONOTONIC in nanoseconds. */
static int64_t
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The fake internet's ranges, public for the benchmark as for the e2e
 * world (config `treat_as_public`). */
static const char *const bench_public[] = {
	"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32",
};

static int
bench_is_public(const struct pol_cidr *c)
{
	struct pol_cidr	t;
	size_t		i;

	for (i = 0; i < sizeof(bench_public) / sizeof(bench_public[0]); i++) {
		if (pol_cidr_parse(bench_public[i], &t) == -1)
			die("pol_cidr_parse %s", bench_public[i]);
		if (t.addr.family == c->addr.family && c->prefix >= t.prefix &&
		    pol_cidr_contains(&t, &c->addr))
			return 1;
	}
	return 0;
}

static size_t
bench_ranges(const struct pol_cidr *(*fn)(int, size_t *), int skip_public,
    struct fw_cidr *out, size_t n)
{
	static const int	 fams[] = { AF_INET, AF_INET6 };
	const struct pol_cidr	*r;
	size_t			 i, f, nr;

	for (f = 0; f < 2; f++) {
		if ((r = fn(fams[f], &nr)) == NULL)
			die("range table for family %d", fams[f]);
		for (i = 0; i < nr; i++) {
			if (skip_public && bench_is_public(&r[i]))
				continue;
			if (n >= BENCH_MAXRANGES)
				die("more than %d ranges", BENCH_MAXRANGES);
			memset(&out[n], 0, sizeof(out[n]));
			out[n].family = r[i].addr.family;
			memcpy(out[n].addr, r[i].addr.a, sizeof(out[n].addr));
			out[n].prefix = r[i].prefix;
			n++;
		}
	}
	return n;
}

/*
 * bench_fw_config: the daemon's table configuration. deny and priv are
 * caller arrays of BENCH_MAXRANGES entries that cfg points into.
 */
static void
bench_fw_config(struct fw_config *cfg, struct fw_cidr *deny,
    struct fw_cidr *priv)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->table, sizeof(cfg->table), "sluice");
	if (inet_pton(AF_INET, BENCH_SERVICE, cfg->svc4) != 1)
		die("service address");
	cfg->bridge_port = BENCH_BRIDGE;
	cfg->nflog_group = BENCH_NFLOG;
	cfg->pool.family = AF_INET;
	if (inet_pton(AF_INET, BENCH_POOL, cfg->pool.addr) != 1)
		die("pool");
	cfg->pool.prefix = BENCH_POOL_LEN;
	cfg->deny = deny;
	cfg->ndeny = bench_ranges(pol_deny_ranges, 0, deny, 0);
	cfg->private = priv;
	cfg->nprivate = bench_ranges(pol_private_ranges, 1, priv, 0);
}

/* bench_rule: one static rule for the per-sandbox allow lists. */
static struct fw_rule
bench_rule(const char *addr, uint8_t prefix, uint8_t proto, uint16_t lo,
    uint16_t hi)
{
	struct fw_rule	r;

	memset(&r, 0, sizeof(r));
	r.family = AF_INET;
	if (inet_pton(AF_INET, addr, r.addr) != 1)
		die("bad rule address %s", addr);
	r.prefix = prefix;
	r.proto = proto;
	r.port_lo = lo;
	r.port_hi = hi;
	return r;
}

/*
 * bench_rules: what a typical policy gives a sandbox (a package index, an
 * API, NTP) and one explicit deny, none of which covers the benchmark's
 * destination 203.0.113.80. Fills allow[3] and deny[1].
 */
static void
bench_rules(struct fw_rule *allow, struct fw_rule *deny)
{
	allow[0] = bench_rule("192.0.2.0", 24, IPPROTO_TCP, 443, 443);
	allow[1] = bench_rule("198.51.100.0", 24, IPPROTO_TCP, 80, 443);
	allow[2] = bench_rule("192.0.2.123", 32, IPPROTO_UDP, 123, 123);
	deny[0] = bench_rule("198.51.100.66", 32, IPPROTO_TCP, 1, 65535);
}

#endif /* SLUICE_TESTS_BENCH_BENCH_H */
