/*
 * bench_lifecycle: how long Sluice takes to create and delete a sandbox.
 *
 * The target is a median of 10 ms or less for each, against the usual
 * shell approach (`ip netns add`, `ip link`, `nft -f`) that run.sh times in
 * the same run. A sandbox here is what the daemon makes: ns_create (pinned
 * namespace, veth pair, addresses, routes, sysctls, resolv.conf) followed by
 * fw_sandbox_add with a typical rule set; deletion is fw_sandbox_del then
 * ns_delete. Growth: -p N first makes N whole sandboxes that stay while the
 * timed ones come and go, so the cost at 1,000 sandboxes can be compared
 * with the cost at one.
 *
 *   bench_lifecycle -d DIR -n ITER [-t SECS] [-p PRE] [-s FIRSTSLOT]
 *
 * At most ITER timed iterations, and none started after SECS seconds (the
 * machine may be loaded; run.sh's time limits must hold).
 *
 * Run it in a throwaway network namespace (run.sh does): it loads the
 * `inet sluice` table there. DIR (absolute, short) receives the pins
 * (DIR/netns) and resolv.conf files (DIR/etc). Output, one line per timed
 * iteration (see below). Everything it made is removed before it
 * exits, also after a failed step; run.sh sweeps DIR if it is killed.
 *
 * Each output line is "create_us delete_us ns_create_us fw_add_us
 * fw_del_us ns_delete_us": the totals first, then their parts, so that a
 * slow total can be traced to the module that costs it.
 */
#include <sys/types.h>

#include <getopt.h>
#include <limits.h>
#include <unistd.h>

#include "netns/netns.h"
#include "tests/bench/bench.h"

#define NRULES	3

static struct fw	*fw;
static struct ns_spec	*pre;
static size_t		 npre;

static void
spec(struct ns_spec *s, const char *dir, uint32_t slot)
{
	struct in_addr	pool, svc;
	char		id[NS_ID_MAX + 1], nd[64], ed[64], err[256];

	inet_pton(AF_INET, BENCH_POOL, &pool);
	inet_pton(AF_INET, BENCH_SERVICE, &svc);
	snprintf(id, sizeof(id), "bench-%u", slot);
	if ((size_t)snprintf(nd, sizeof(nd), "%s/netns", dir) >= sizeof(nd) ||
	    (size_t)snprintf(ed, sizeof(ed), "%s/etc", dir) >= sizeof(ed))
		die("directory too long: %s", dir);
	if (ns_spec_init(s, id, slot, &pool, BENCH_POOL_LEN, &svc, nd, ed,
	    err, sizeof(err)) == -1)
		die("ns_spec_init: %s", err);
}

static void
fw_sb(struct fw_sandbox *sb, const struct ns_spec *s)
{
	memset(sb, 0, sizeof(*sb));
	snprintf(sb->ifname, sizeof(sb->ifname), "%s", s->host_if);
	memcpy(sb->addr4, &s->sandbox_addr, 4);
	sb->quota_bytes = 1ULL << 40;
	sb->gen = 1;		/* any nonzero one: fw does not compare them */
}

/* Split times of the last make/unmake (ns part, fw part), in ns. */
static int64_t	t_ns, t_fw;

/* make: one whole sandbox, as the daemon makes it. */
static int
make(const struct ns_spec *s, char *err, size_t errlen)
{
	struct fw_sandbox	sb;
	struct fw_rule		allow[NRULES], deny[1];
	int64_t			t0, t1;

	bench_rules(allow, deny);
	fw_sb(&sb, s);
	t0 = now_ns();
	if (ns_create(s, err, errlen) == -1)
		return -1;
	t1 = now_ns();
	if (fw_sandbox_add(fw, &sb, allow, NRULES, deny, 1, err,
	    errlen) == -1) {
		(void)ns_delete(s, NULL, 0);
		return -1;
	}
	t_ns = t1 - t0;
	t_fw = now_ns() - t1;
	return 0;
}

static int
unmake(const struct ns_spec *s, char *err, size_t errlen)
{
	struct fw_sandbox	sb;
	int64_t			t0, t1;
	int			rc = 0;

	fw_sb(&sb, s);
	t0 = now_ns();
	if (fw_sandbox_del(fw, &sb, err, errlen) == -1)
		rc = -1;
	t1 = now_ns();
	/* Always try the namespace too: a half-removed sandbox would leak. */
	if (ns_delete(s, rc == -1 ? NULL : err, errlen) == -1)
		rc = -1;
	t_fw = t1 - t0;
	t_ns = now_ns() - t1;
	return rc;
}

/* cleanup_pre: the pre-made sandboxes go with the table (fw_destroy, one
 * batch, in main) and one ns_delete each: deleting them one by one through
 * fw_sandbox_del would cost minutes at this scale and measure nothing. */
static void
cleanup_pre(void)
{
	size_t	i;

	for (i = 0; i < npre; i++)
		(void)ns_delete(&pre[i], NULL, 0);
	npre = 0;
}

static void
usage(void)
{
	fprintf(stderr, "usage: bench_lifecycle -d DIR -n ITER [-t SECS] "
	    "[-p PRE] [-s FIRSTSLOT]\n");
	exit(2);
}

static unsigned long
num(const char *s, unsigned long max)
{
	char		*end;
	unsigned long	 v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v > max)
		usage();
	return v;
}

int
main(int argc, char *argv[])
{
	struct fw_config	 cfg;
	struct fw_cidr		 deny[BENCH_MAXRANGES], priv[BENCH_MAXRANGES];
	struct ns_spec		 s;
	const char		*dir = NULL;
	char			 nd[64], ed[64], err[256];
	unsigned long		 iters = 0, npre_want = 0, first = 1, i;
	unsigned long		 secs = 3600;
	int64_t			 t0, t1, t2, c_ns, c_fw, end;
	int			 ch, failed = 0;

	while ((ch = getopt(argc, argv, "d:n:p:s:t:")) != -1) {
		switch (ch) {
		case 'd':
			dir = optarg;
			break;
		case 'n':
			iters = num(optarg, 100000);
			break;
		case 'p':
			npre_want = num(optarg, 4000);
			break;
		case 's':
			first = num(optarg, 8000);
			break;
		case 't':
			secs = num(optarg, 3600);
			break;
		default:
			usage();
		}
	}
	if (dir == NULL || dir[0] != '/' || iters == 0)
		usage();
	/* Pre-made sandboxes take slots first..first+PRE-1; timed ones
	 * take the next slot, reused every iteration. The pool holds
	 * 16,383 slots. */
	if (first + npre_want + 1 >= 16383)
		usage();
	snprintf(nd, sizeof(nd), "%s/netns", dir);
	snprintf(ed, sizeof(ed), "%s/etc", dir);
	if (ns_dirs_setup(nd, ed, err, sizeof(err)) == -1)
		die("ns_dirs_setup: %s", err);
	if ((fw = fw_new(err, sizeof(err))) == NULL)
		die("fw_new: %s", err);
	bench_fw_config(&cfg, deny, priv);
	if (fw_init(fw, &cfg, 0, err, sizeof(err)) == -1)
		die("fw_init: %s", err);

	if (npre_want > 0 && (pre = calloc(npre_want, sizeof(*pre))) == NULL)
		die("calloc");
	for (i = 0; i < npre_want; i++) {
		spec(&pre[i], dir, (uint32_t)(first + i));
		if (make(&pre[i], err, sizeof(err)) == -1) {
			cleanup_pre();
			die("pre-made sandbox %lu: %s", i, err);
		}
		npre++;
	}

	spec(&s, dir, (uint32_t)(first + npre_want));
	end = now_ns() + (int64_t)secs * 1000000000;
	for (i = 0; i < iters && now_ns() < end; i++) {
		t0 = now_ns();
		if (make(&s, err, sizeof(err)) == -1) {
			fprintf(stderr, "bench: create %lu: %s\n", i, err);
			failed = 1;
			break;
		}
		t1 = now_ns();
		c_ns = t_ns;
		c_fw = t_fw;
		if (unmake(&s, err, sizeof(err)) == -1) {
			fprintf(stderr, "bench: delete %lu: %s\n", i, err);
			failed = 1;
			break;
		}
		t2 = now_ns();
		printf("%.1f %.1f %.1f %.1f %.1f %.1f\n",
		    (double)(t1 - t0) / 1e3, (double)(t2 - t1) / 1e3,
		    (double)c_ns / 1e3, (double)c_fw / 1e3,
		    (double)t_fw / 1e3, (double)t_ns / 1e3);
	}
	fflush(stdout);
	/* The timed sandbox too: a failed delete above broke the loop and
	 * may have left parts of it (ns_delete is idempotent). */
	(void)ns_delete(&s, NULL, 0);
	cleanup_pre();
	free(pre);
	if (fw_destroy(fw, NULL, err, sizeof(err)) == -1 && errno != ENOENT)
		fprintf(stderr, "bench: fw_destroy: %s\n", err);
	fw_free(fw);
	return failed;
}
