/*
 * bench_fw: puts the data-path benchmark's nftables state in place.
 *
 * The data path is measured with real traffic (iperf3, bench_connect), so
 * the table must hold what the daemon would hold at each scale: the same
 * static rules (fw_init), one registered sandbox that sends, up to a few
 * thousand idle ones, and up to 100,000 DNS-learned elements. This program
 * makes those states step by step through the netns/fw API, in the network
 * namespace it runs in (run.sh enters the benchmark's own "host"
 * namespace). Each call adopts the table left by the previous one
 * (FW_ADOPT), so state accumulates across calls.
 *
 *   bench_fw init
 *   bench_fw sender IFNAME ADDR DST PORTLO PORTHI
 *        register the sending sandbox (typical rules) and learn DST
 *        tcp PORTLO-PORTHI for it, as the DNS proxy would
 *   bench_fw idle FROM TO      register idle sandboxes sl-f<FROM>..<TO-1>
 *   bench_fw learn FROM TO NSBX SENDER
 *        learn elements FROM..TO-1, round-robin over the sender and
 *        idle sandboxes sl-f1..sl-f<NSBX-1>; prints "learned N in S s"
 *   bench_fw learn1 N SENDER   time N single-element fw_learn calls, then
 *        remove those elements again; prints "learn1_us US" per call
 *   bench_fw del1 N            time N fw_sandbox_add and fw_sandbox_del
 *        calls at the current table size: each round registers a sandbox
 *        (typical rules; "add_us US"), learns 3 destinations for it and
 *        deletes it again ("del_us US")
 *   bench_fw count SET         elements in SET
 *   bench_fw destroy
 *
 * Exit 0 on success; 1 with a message on stderr on any failure.
 */
#include <limits.h>
#include <unistd.h>

#include "tests/bench/bench.h"

#define NRULES		3
#define LEARN_BATCH	1024
#define LEARN_TTL_MS	(2 * 3600 * 1000)	/* outlives the run */

static struct fw	*fw;
static char		 err[256];

static unsigned long
num(const char *s, unsigned long max)
{
	char		*end;
	unsigned long	 v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v > max)
		die("bad number '%s' (max %lu)", s, max);
	return v;
}

static void
open_table(int flags)
{
	struct fw_config	cfg;
	struct fw_cidr		deny[BENCH_MAXRANGES], priv[BENCH_MAXRANGES];

	if ((fw = fw_new(err, sizeof(err))) == NULL)
		die("fw_new: %s", err);
	bench_fw_config(&cfg, deny, priv);
	if (fw_init(fw, &cfg, flags, err, sizeof(err)) == -1)
		die("fw_init: %s", err);
}

static void
add_sandbox(const char *ifname, const uint8_t addr[4])
{
	struct fw_sandbox	sb;
	struct fw_rule		allow[NRULES], deny[1];

	memset(&sb, 0, sizeof(sb));
	if ((size_t)snprintf(sb.ifname, sizeof(sb.ifname), "%s", ifname) >=
	    sizeof(sb.ifname))
		die("ifname too long: %s", ifname);
	memcpy(sb.addr4, addr, 4);
	sb.gen = 1;		/* any nonzero one: fw does not compare them */
	/* A budget far above what the run sends: the quota lookup is on
	 * every packet's path, so it must be there to be measured. */
	sb.quota_bytes = 1ULL << 42;
	bench_rules(allow, deny);
	if (fw_sandbox_add(fw, &sb, allow, NRULES, deny, 1, err,
	    sizeof(err)) == -1)
		die("fw_sandbox_add %s: %s", ifname, err);
}

/* Idle sandbox i: link name sl-f<i>, pool slot i (10.231.0.0/16 in /30s). */
static void
idle_addr(unsigned long i, uint8_t a[4])
{
	uint32_t	v = 0x0ae70000u + (uint32_t)(4 * i + 2);

	a[0] = v >> 24;
	a[1] = (v >> 16) & 0xff;
	a[2] = (v >> 8) & 0xff;
	a[3] = v & 0xff;
}

static void
cmd_sender(char **av)
{
	struct fw_elem	e;
	uint8_t		a[4];

	if (inet_pton(AF_INET, av[1], a) != 1)
		die("bad address %s", av[1]);
	add_sandbox(av[0], a);
	memset(&e, 0, sizeof(e));
	snprintf(e.ifname, sizeof(e.ifname), "%s", av[0]);
	e.family = AF_INET;
	if (inet_pton(AF_INET, av[2], e.addr) != 1)
		die("bad address %s", av[2]);
	e.proto = IPPROTO_TCP;
	e.port_lo = (uint16_t)num(av[3], 65535);
	e.port_hi = (uint16_t)num(av[4], 65535);
	e.timeout_ms = LEARN_TTL_MS;
	if (fw_learn(fw, &e, 1, err, sizeof(err)) == -1)
		die("fw_learn: %s", err);
}

static void
cmd_idle(unsigned long from, unsigned long to)
{
	char		ifname[FW_IFNAMSIZ];
	uint8_t		a[4];
	unsigned long	i;

	for (i = from; i < to; i++) {
		snprintf(ifname, sizeof(ifname), "sl-f%u",
		    (unsigned)(i % 100000));
		idle_addr(i, a);
		add_sandbox(ifname, a);
	}
}

/*
 * learned_elem: element j of the scaling runs. It belongs to sandbox
 * j % nsbx (0 = the sender); address and port come from j alone, so every
 * element is distinct whatever nsbx was when it was made, and all lie in
 * the fake internet's ranges away from the benchmark's destination
 * (203.0.113.0/24).
 */
static void
learned_elem(struct fw_elem *e, unsigned long j, unsigned long nsbx,
    const char *sender)
{
	unsigned long	k = j % nsbx;

	memset(e, 0, sizeof(*e));
	if (k == 0)
		snprintf(e->ifname, sizeof(e->ifname), "%s", sender);
	else
		snprintf(e->ifname, sizeof(e->ifname), "sl-f%u",
		    (unsigned)(k % 100000));
	e->family = AF_INET;
	e->addr[0] = j % 2 ? 198 : 192;
	e->addr[1] = j % 2 ? 51 : 0;
	e->addr[2] = j % 2 ? 100 : 2;
	e->addr[3] = (j / 2) % 256;
	e->proto = IPPROTO_TCP;
	e->port_lo = e->port_hi = (uint16_t)(1024 + j / 512);
	e->timeout_ms = LEARN_TTL_MS;
}

static void
cmd_learn(unsigned long from, unsigned long to, unsigned long nsbx,
    const char *sender)
{
	struct fw_elem	*b;
	unsigned long	 j;
	size_t		 n = 0;
	int64_t		 t0;

	if (to > 512UL * 60000)
		die("too many elements");
	if ((b = calloc(LEARN_BATCH, sizeof(*b))) == NULL)
		die("calloc");
	t0 = now_ns();
	for (j = from; j < to; j++) {
		learned_elem(&b[n], j, nsbx, sender);
		if (++n == LEARN_BATCH || j + 1 == to) {
			if (fw_learn(fw, b, n, err, sizeof(err)) == -1)
				die("fw_learn at %lu: %s", j, err);
			n = 0;
		}
	}
	printf("learned %lu in %.3f s\n", to - from,
	    (double)(now_ns() - t0) / 1e9);
	free(b);
}

/*
 * cmd_learn1: what one DNS answer costs the kernel at the current set
 * size: n calls of fw_learn with one new element each (sender, 203.0.113.x,
 * ports 40000 and up), each timed ("learn1_us US"), then all removed in
 * one fw_unlearn so the set is as before.
 */
static void
cmd_learn1(unsigned long n, const char *sender)
{
	struct fw_elem	*e;
	unsigned long	 i;
	int64_t		 t0;

	if (n == 0 || n > 256 * 1000)
		die("learn1: 1..256000 elements");
	if ((e = calloc(n, sizeof(*e))) == NULL)
		die("calloc");
	for (i = 0; i < n; i++) {
		snprintf(e[i].ifname, sizeof(e[i].ifname), "%s", sender);
		e[i].family = AF_INET;
		e[i].addr[0] = 203;
		e[i].addr[1] = 0;
		e[i].addr[2] = 113;
		e[i].addr[3] = i % 256;
		e[i].proto = IPPROTO_TCP;
		e[i].port_lo = e[i].port_hi = (uint16_t)(40000 + i / 256);
		e[i].timeout_ms = LEARN_TTL_MS;
		t0 = now_ns();
		if (fw_learn(fw, &e[i], 1, err, sizeof(err)) == -1)
			die("fw_learn: %s", err);
		printf("learn1_us %.1f\n", (double)(now_ns() - t0) / 1e3);
	}
	if (fw_unlearn(fw, e, n, err, sizeof(err)) == -1)
		die("fw_unlearn: %s", err);
	free(e);
}

/*
 * cmd_del1: what adding and deleting one sandbox cost with everything else
 * in the table present: n rounds of a timed register (sl-d<i>, a pool slot
 * past the idle ones), learn 3 destinations, then a timed fw_sandbox_del.
 */
static void
cmd_del1(unsigned long n)
{
	struct fw_sandbox	sb;
	struct fw_elem		e[3];
	unsigned long		i;
	int			j;
	int64_t			t0;
	uint8_t			a[4];

	if (n == 0 || n > 10000)
		die("del1: 1..10000 rounds");
	for (i = 0; i < n; i++) {
		char name[FW_IFNAMSIZ];

		snprintf(name, sizeof(name), "sl-d%u-%lu",
		    (unsigned)getpid() % 100000, i);
		idle_addr(16000 + i % 100, a);
		t0 = now_ns();
		add_sandbox(name, a);
		printf("add_us %.1f\n", (double)(now_ns() - t0) / 1e3);
		for (j = 0; j < 3; j++) {
			memset(&e[j], 0, sizeof(e[j]));
			snprintf(e[j].ifname, sizeof(e[j].ifname), "%s", name);
			e[j].family = AF_INET;
			e[j].addr[0] = 192;
			e[j].addr[2] = 2;
			e[j].addr[3] = (uint8_t)(j + 1);
			e[j].proto = IPPROTO_TCP;
			e[j].port_lo = e[j].port_hi = 443;
			e[j].timeout_ms = LEARN_TTL_MS;
		}
		if (fw_learn(fw, e, 3, err, sizeof(err)) == -1)
			die("fw_learn: %s", err);
		memset(&sb, 0, sizeof(sb));
		snprintf(sb.ifname, sizeof(sb.ifname), "%s", name);
		t0 = now_ns();
		if (fw_sandbox_del(fw, &sb, err, sizeof(err)) == -1)
			die("fw_sandbox_del: %s", err);
		printf("del_us %.1f\n", (double)(now_ns() - t0) / 1e3);
	}
	/* Checked after the timed rounds: a dump of a large learned set
	 * between them would evict what the next round's kernel work finds
	 * in the caches, which the daemon's own calls never do. */
	for (i = 0; i < n; i++) {
		char name[FW_IFNAMSIZ];

		snprintf(name, sizeof(name), "sl-d%u-%lu",
		    (unsigned)getpid() % 100000, i);
		if (fw_count_elems(fw, "learned4", name, err, sizeof(err)) != 0)
			die("fw_sandbox_del left learned elements of %s", name);
	}
}

int
main(int argc, char *argv[])
{
	int	n;

	if (argc < 2)
		die("usage: bench_fw init|sender|idle|learn|count|destroy ...");
	if (strcmp(argv[1], "init") == 0 && argc == 2) {
		open_table(0);
	} else if (strcmp(argv[1], "sender") == 0 && argc == 7) {
		open_table(FW_ADOPT);
		cmd_sender(argv + 2);
	} else if (strcmp(argv[1], "idle") == 0 && argc == 4) {
		open_table(FW_ADOPT);
		cmd_idle(num(argv[2], 16000), num(argv[3], 16000));
	} else if (strcmp(argv[1], "learn") == 0 && argc == 6) {
		open_table(FW_ADOPT);
		cmd_learn(num(argv[2], 10000000), num(argv[3], 10000000),
		    num(argv[4], 16000) ? num(argv[4], 16000) : 1, argv[5]);
	} else if (strcmp(argv[1], "learn1") == 0 && argc == 4) {
		open_table(FW_ADOPT);
		cmd_learn1(num(argv[2], 256000), argv[3]);
	} else if (strcmp(argv[1], "del1") == 0 && argc == 3) {
		open_table(FW_ADOPT);
		cmd_del1(num(argv[2], 10000));
	} else if (strcmp(argv[1], "count") == 0 && argc == 3) {
		open_table(FW_ADOPT);
		if ((n = fw_count_elems(fw, argv[2], NULL, err,
		    sizeof(err))) == -1)
			die("fw_count_elems: %s", err);
		printf("%d\n", n);
	} else if (strcmp(argv[1], "destroy") == 0 && argc == 2) {
		if ((fw = fw_new(err, sizeof(err))) == NULL)
			die("fw_new: %s", err);
		if (fw_destroy(fw, "sluice", err, sizeof(err)) == -1 &&
		    errno != ENOENT)
			die("fw_destroy: %s", err);
	} else {
		die("bad command or argument count");
	}
	fw_free(fw);
	return 0;
}
