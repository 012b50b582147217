/*
 * check_ns: the sandbox namespace lifecycle (netns/netns.h) against the real
 * kernel. Needs root.
 *
 * main() first moves the whole run into a private network and mount
 * namespace of its own: the "host" side of every veth, the addresses and
 * the shared netns_dir mount live there, so nothing here touches the
 * machine's interfaces or mounts, parallel runs cannot collide, and even a
 * killed run leaves no namespace, link or mount behind (they die with the
 * process; only files in its /tmp/check_ns.* dir could stay). Names still
 * carry the PID, as the house rules ask. Every test also cleans up what it
 * made in its fixture, before and after, so one failure does not cascade.
 * Inspection uses `ip` and /proc from child processes that join the
 * sandbox; traffic is one UDP exchange between the two ends of a veth.
 * Durations are printed for the report and never asserted.
 */
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/ip.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "netns/netns.h"
#include "netns/ns_int.h"

#define LOOP_N	50
/* More creates in one process than ns.c lets one private procfs instance
 * serve (PROCFS_USES, 128), twice over. */
#define RECYCLE_N	266

#ifdef __SANITIZE_ADDRESS__
#define BUILD_KIND	"ASan"
#else
#define BUILD_KIND	"plain"
#endif

static char	g_tmp[32];		/* private temp dir of this run */
static char	g_netns_dir[64];
static char	g_etc_dir[64];
static char	g_idp[16];		/* "t<pid>" */
static char	g_ifp[16];		/* "sl-t<pid%10000>" */
static struct in_addr	g_pool, g_service;

/* Every suffix a test may use, so the fixture can clean up after any. */
static const char *const g_suffixes[] = { "a", "b", "c", "d", "e", "f" };

/* ------------------------------------------------------------ helpers */

/* The spec of this run's sandbox `suffix` at pool slot `index`, with a
 * host link name no other run can hold. */
static void
mkspec(struct ns_spec *s, const char *suffix, uint32_t index)
{
	char	id[64], err[256];

	snprintf(id, sizeof(id), "%s%s", g_idp, suffix);
	ck_assert_msg(ns_spec_init(s, id, index, &g_pool, 16, &g_service,
	    g_netns_dir, g_etc_dir, err, sizeof(err)) == 0, "spec: %s", err);
	ck_assert_int_lt(snprintf(s->host_if, sizeof(s->host_if), "%s%s",
	    g_ifp, suffix), (int)sizeof(s->host_if));
}

static void
cleanup_all(void)
{
	struct ns_spec	s;
	char		suffix[8], cmd[128], path[PATH_MAX];
	size_t		i;

	for (i = 0; i < sizeof(g_suffixes) / sizeof(g_suffixes[0]); i++) {
		mkspec(&s, g_suffixes[i], (uint32_t)i + 1);
		(void)ns_delete(&s, NULL, 0);
		/* What test_etc_dir_edge makes besides a sandbox. */
		snprintf(path, sizeof(path), "%s/%s", s.etc_dir, s.netns);
		(void)unlink(path);
		snprintf(path, sizeof(path), "%s/%s/resolv.conf", s.etc_dir,
		    s.netns);
		(void)rmdir(path);
		snprintf(path, sizeof(path), "%s/%s", s.etc_dir, s.netns);
		(void)rmdir(path);
		snprintf(path, sizeof(path), "%s/trap", g_tmp);
		(void)rmdir(path);
		snprintf(path, sizeof(path), "%s/etc3/%s/resolv.conf", g_tmp,
		    s.netns);
		(void)unlink(path);
		snprintf(path, sizeof(path), "%s/etc3/%s", g_tmp, s.netns);
		(void)rmdir(path);
		/* A link a test made to take a name (ns_delete removed
		 * ours already). */
		snprintf(cmd, sizeof(cmd), "%s%s", g_ifp, g_suffixes[i]);
		if (if_nametoindex(cmd) != 0) {
			snprintf(cmd, sizeof(cmd),
			    "ip link del %s%s >/dev/null 2>&1", g_ifp,
			    g_suffixes[i]);
			(void)system(cmd);
		}
	}
	for (i = 0; i < LOOP_N; i++) {
		snprintf(suffix, sizeof(suffix), "l%zu", i);
		mkspec(&s, suffix, (uint32_t)i + 100);
		(void)ns_delete(&s, NULL, 0);
	}
}

static void
setup(void)
{
	cleanup_all();
}

static void
teardown(void)
{
	cleanup_all();
}

static int
path_exists(const char *dir, const char *name)
{
	char	p[PATH_MAX];

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, name) >= sizeof(p))
		return 0;
	return access(p, F_OK) == 0;
}

/*
 * Runs `sh -c cmd` in the namespace of nsfd (the current one if -1) and
 * collects at most outlen - 1 bytes of its stdout and stderr. Returns the
 * exit status, or -1 if it could not run or was killed.
 */
static int
run_in(int nsfd, const char *cmd, char *out, size_t outlen)
{
	pid_t	pid;
	size_t	used = 0;
	ssize_t	n;
	char	drop[256];
	int	p[2], st;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], 1);
		dup2(p[1], 2);
		if (nsfd != -1 && setns(nsfd, CLONE_NEWNET) == -1)
			_exit(126);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		if (used + 1 < outlen)
			n = read(p[0], out + used, outlen - 1 - used);
		else
			n = read(p[0], drop, sizeof(drop));
		if (n <= 0)
			break;
		if (used + 1 < outlen)
			used += (size_t)n;
	}
	out[used] = '\0';
	close(p[0]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void
read_file(const char *path, char *buf, size_t len)
{
	ssize_t	n;
	int	fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd != -1, "open %s: %s", path, strerror(errno));
	n = read(fd, buf, len - 1);
	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	close(fd);
}

/*
 * One UDP datagram from the sandbox's eth0 to the host side and one back:
 * proves addresses, links, ARP and the on-link route on both ends. The
 * sandbox's socket is made while this thread visits the namespace (a
 * socket stays in the namespace it was made in). The poll timeouts only
 * bound a failing run; a passing one never waits for them.
 */
static void
udp_exchange(const struct ns_spec *s)
{
	struct sockaddr_in	 hsa = { 0 }, from = { 0 };
	struct pollfd		 pfd;
	socklen_t		 sl = sizeof(hsa);
	char			 buf[16];
	ssize_t			 n;
	int			 hs, ss, nsfd, self;

	hs = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ne(hs, -1);
	hsa.sin_family = AF_INET;
	hsa.sin_addr = s->host_addr;
	ck_assert_msg(bind(hs, (struct sockaddr *)&hsa, sizeof(hsa)) == 0,
	    "bind host side: %s", strerror(errno));
	ck_assert_int_eq(getsockname(hs, (struct sockaddr *)&hsa, &sl), 0);

	nsfd = ns_netns_fd(s);
	ck_assert_msg(nsfd != -1, "ns_netns_fd: %s", strerror(errno));
	self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ne(self, -1);
	ck_assert_int_eq(setns(nsfd, CLONE_NEWNET), 0);
	ss = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(setns(self, CLONE_NEWNET), 0);
	close(self);
	close(nsfd);
	ck_assert_int_ne(ss, -1);

	ck_assert_int_eq(sendto(ss, "ping", 4, 0, (struct sockaddr *)&hsa,
	    sizeof(hsa)), 4);
	pfd.fd = hs;
	pfd.events = POLLIN;
	ck_assert_msg(poll(&pfd, 1, 5000) == 1, "no datagram from sandbox");
	sl = sizeof(from);
	n = recvfrom(hs, buf, sizeof(buf), 0, (struct sockaddr *)&from, &sl);
	ck_assert_int_eq(n, 4);
	ck_assert_int_eq(memcmp(buf, "ping", 4), 0);
	ck_assert_uint_eq(from.sin_addr.s_addr, s->sandbox_addr.s_addr);
	ck_assert_int_eq(sendto(hs, "pong", 4, 0, (struct sockaddr *)&from,
	    sl), 4);
	pfd.fd = ss;
	ck_assert_msg(poll(&pfd, 1, 5000) == 1, "no reply inside sandbox");
	ck_assert_int_eq(recv(ss, buf, sizeof(buf), 0), 4);
	ck_assert_int_eq(memcmp(buf, "pong", 4), 0);
	close(ss);
	close(hs);
}

static int
has(char **v, const char *name)
{
	for (; *v != NULL; v++)
		if (strcmp(*v, name) == 0)
			return 1;
	return 0;
}

/* Retired host links ("sg-*") in this run's host namespace. */
static int
count_retired(char *name, size_t len)
{
	struct if_nameindex	*ifs, *p;
	int			 n = 0;

	ifs = if_nameindex();
	ck_assert_ptr_nonnull(ifs);
	for (p = ifs; p->if_index != 0; p++) {
		if (strncmp(p->if_name, NS_RETIRED_PREFIX,
		    strlen(NS_RETIRED_PREFIX)) != 0)
			continue;
		if (name != NULL)
			snprintf(name, len, "%s", p->if_name);
		n++;
	}
	if_freenameindex(ifs);
	return n;
}

/*
 * The kernel removes retired links with their namespace, asynchronously;
 * wait for that, bounded (10 s), and return how many are left. Used where
 * a test asserts that nothing at all remains, and before a test that counts
 * its own retired links.
 */
static int
retired_settle(void)
{
	struct timespec	ts = { 0, 10 * 1000 * 1000 };
	int		i, n = 0;

	for (i = 0; i < 1000; i++) {
		if ((n = count_retired(NULL, 0)) == 0)
			break;
		nanosleep(&ts, NULL);
	}
	return n;
}

/* Nothing of s remains: no host link, no pin, no etc dir. */
static void
assert_gone(const struct ns_spec *s)
{
	char	etc[PATH_MAX];

	ck_assert_msg(if_nametoindex(s->host_if) == 0, "%s still there",
	    s->host_if);
	ck_assert_msg(!path_exists(s->netns_dir, s->netns), "pin %s remains",
	    s->netns);
	snprintf(etc, sizeof(etc), "%s/%s", s->etc_dir, s->netns);
	ck_assert_msg(access(etc, F_OK) == -1 && errno == ENOENT,
	    "%s remains", etc);
	ck_assert_int_eq(ns_exists(s), 0);
}

static void
create_ok(const struct ns_spec *s)
{
	char	err[256] = "";

	ck_assert_msg(ns_create(s, err, sizeof(err)) == 0, "ns_create %s: %s",
	    s->id, err);
}

static void
delete_ok(const struct ns_spec *s)
{
	char	err[256] = "";

	ck_assert_msg(ns_delete(s, err, sizeof(err)) == 0, "ns_delete %s: %s",
	    s->id, err);
}

/*
 * Reads path into buf (NUL-terminated) as the network namespace of nsfd
 * sees it (this thread's own when nsfd is -1): /proc/sys and
 * /proc/thread-self/net follow the reading thread's namespace, so the
 * thread visits and comes back. 0, or -1 if it could not; asserts nothing,
 * so that a forked child can use it, and never leaves the thread away.
 */
static int
read_in(int nsfd, const char *path, char *buf, size_t len)
{
	ssize_t	n = -1;
	int	fd, self = -1, ret = -1;

	if (nsfd != -1) {
		if ((self = open("/proc/thread-self/ns/net", O_RDONLY |
		    O_CLOEXEC)) == -1)
			return -1;
		if (setns(nsfd, CLONE_NEWNET) == -1) {
			close(self);
			return -1;
		}
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
		n = read(fd, buf, len - 1);
		close(fd);
	}
	if (n >= 0) {
		buf[n] = '\0';
		ret = 0;
	}
	if (self != -1) {
		if (setns(self, CLONE_NEWNET) == -1)
			abort();	/* stranded: nothing after this is valid */
		close(self);
	}
	return ret;
}

/* Does the if_inet6 table (read as in read_in) list an address on dev,
 * or on any device when dev is NULL? 1, 0, or -1 if it cannot be read. */
static int
has_inet6(int nsfd, const char *dev)
{
	char	buf[4096], *line, *save = NULL, *last;
	size_t	dl;

	if (read_in(nsfd, "/proc/thread-self/net/if_inet6", buf,
	    sizeof(buf)) == -1)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (dev == NULL)
			return 1;
		last = strrchr(line, ' ');
		dl = strlen(dev);
		if (last != NULL && strncmp(last + 1, dev, dl) == 0 &&
		    last[1 + dl] == '\0')
			return 1;
	}
	return 0;
}

/*
 * Every setting ns_create promises, read back from the kernel in the
 * calling thread's namespace (the host side) and in the sandbox: NULL if
 * all hold, else the first that does not (in a static buffer). Asserts
 * nothing itself, so a forked child or a thread can use it too.
 */
static const char *
settings_wrong(const struct ns_spec *s)
{
	static char	why[256];
	static const struct {
		const char	*path, *want;
	} inside[] = {
		{ "/proc/sys/net/ipv6/conf/all/disable_ipv6", "1\n" },
		{ "/proc/sys/net/ipv6/conf/default/disable_ipv6", "1\n" },
		{ "/proc/sys/net/ipv6/conf/lo/disable_ipv6", "1\n" },
		{ "/proc/sys/net/ipv6/conf/eth0/disable_ipv6", "1\n" },
		{ "/proc/sys/net/ipv4/ip_forward", "0\n" },
	};
	struct {
		char		 path[PATH_MAX];
		const char	*want;
	} host[3];
	char	buf[64];
	size_t	i;
	int	fd;

	memset(host, 0, sizeof(host));
	snprintf(host[0].path, sizeof(host[0].path),
	    "/proc/sys/net/ipv6/conf/%s/disable_ipv6", s->host_if);
	host[0].want = "1\n";
	snprintf(host[1].path, sizeof(host[1].path),
	    "/proc/sys/net/ipv4/conf/%s/rp_filter", s->host_if);
	host[1].want = "1\n";
	snprintf(host[2].path, sizeof(host[2].path),
	    "/proc/sys/net/ipv4/conf/%s/proxy_arp", s->host_if);
	host[2].want = "0\n";
	for (i = 0; i < 3; i++) {
		if (read_in(-1, host[i].path, buf, sizeof(buf)) == -1) {
			snprintf(why, sizeof(why), "%.200s: %.40s",
			    host[i].path, strerror(errno));
			return why;
		}
		if (strcmp(buf, host[i].want) != 0) {
			snprintf(why, sizeof(why), "%.200s is %.40s",
			    host[i].path, buf);
			return why;
		}
	}
	if (has_inet6(-1, s->host_if) != 0) {
		snprintf(why, sizeof(why), "host side has IPv6");
		return why;
	}
	if ((fd = ns_netns_fd(s)) == -1) {
		snprintf(why, sizeof(why), "ns_netns_fd: %s", strerror(errno));
		return why;
	}
	for (i = 0; i < sizeof(inside) / sizeof(inside[0]); i++) {
		if (read_in(fd, inside[i].path, buf, sizeof(buf)) == -1)
			snprintf(buf, sizeof(buf), "unreadable");
		if (strcmp(buf, inside[i].want) != 0) {
			close(fd);
			snprintf(why, sizeof(why), "inside: %s is %s",
			    inside[i].path, buf);
			return why;
		}
	}
	if (has_inet6(fd, NULL) != 0) {
		close(fd);
		snprintf(why, sizeof(why), "IPv6 address inside");
		return why;
	}
	close(fd);
	return NULL;
}

/* -------------------------------------------------------- pool table */

static const struct {
	const char	*pool;
	uint8_t		 prefix;
	uint32_t	 index;
	const char	*host;		/* NULL: must fail */
	const char	*sandbox;
} pool_cases[] = {
	{ "10.231.0.0", 16, 0, "10.231.0.1", "10.231.0.2" },
	{ "10.231.0.0", 16, 1, "10.231.0.5", "10.231.0.6" },
	{ "10.231.0.0", 16, 63, "10.231.0.253", "10.231.0.254" },
	{ "10.231.0.0", 16, 64, "10.231.1.1", "10.231.1.2" },
	/* 16384 /30s; the last (10.231.255.252/30) holds the service. */
	{ "10.231.0.0", 16, 16382, "10.231.255.249", "10.231.255.250" },
	{ "10.231.0.0", 16, 16383, NULL, NULL },
	{ "10.231.0.0", 16, 16384, NULL, NULL },
	{ "10.231.0.0", 16, UINT32_MAX, NULL, NULL },
	{ "198.51.100.0", 24, 0, "198.51.100.1", "198.51.100.2" },
	{ "198.51.100.0", 24, 62, "198.51.100.249", "198.51.100.250" },
	{ "198.51.100.0", 24, 63, NULL, NULL },
	/* Smallest pool: two /30s, one of which is reserved. */
	{ "192.0.2.0", 29, 0, "192.0.2.1", "192.0.2.2" },
	{ "192.0.2.0", 29, 1, NULL, NULL },
	/* A /30 pool would be nothing but the reserved block. */
	{ "192.0.2.0", 30, 0, NULL, NULL },
	{ "192.0.2.0", 31, 0, NULL, NULL },
	{ "192.0.2.0", 32, 0, NULL, NULL },
	{ "0.0.0.0", 0, 0, NULL, NULL },
	{ "192.0.2.0", 200, 0, NULL, NULL },
	/* Host bits set: a misaligned pool is refused, not rounded. */
	{ "10.231.0.1", 16, 0, NULL, NULL },
	{ "10.231.128.0", 16, 0, NULL, NULL },
	/* Large pools do not overflow 4*i. */
	{ "10.0.0.0", 8, 4194302, "10.255.255.249", "10.255.255.250" },
	{ "10.0.0.0", 8, 4194303, NULL, NULL },
	{ "0.0.0.0", 1, 536870910, "127.255.255.249", "127.255.255.250" },
	{ "0.0.0.0", 1, 536870911, NULL, NULL },
};

START_TEST(test_pool_table)
{
	struct in_addr	pool, host, sb, want;
	uint8_t		plen = 0;
	int		r;

	ck_assert_int_eq(inet_pton(AF_INET, pool_cases[_i].pool, &pool), 1);
	host.s_addr = sb.s_addr = 0x5a5a5a5a;
	r = ns_pool_addrs(&pool, pool_cases[_i].prefix, pool_cases[_i].index,
	    &host, &sb, &plen);
	if (pool_cases[_i].host == NULL) {
		ck_assert_int_eq(r, -1);
		ck_assert_int_eq(errno, EINVAL);
		/* Out-parameters are left alone on failure. */
		ck_assert_uint_eq(host.s_addr, 0x5a5a5a5a);
		ck_assert_uint_eq(sb.s_addr, 0x5a5a5a5a);
		return;
	}
	ck_assert_int_eq(r, 0);
	ck_assert_int_eq(plen, 30);
	inet_pton(AF_INET, pool_cases[_i].host, &want);
	ck_assert_uint_eq(host.s_addr, want.s_addr);
	inet_pton(AF_INET, pool_cases[_i].sandbox, &want);
	ck_assert_uint_eq(sb.s_addr, want.s_addr);
}
END_TEST

START_TEST(test_pool_null)
{
	struct in_addr	pool = { htonl(0x0ae70000) }, a, b;
	uint8_t		plen;

	ck_assert_int_eq(ns_pool_addrs(NULL, 16, 0, &a, &b, &plen), -1);
	ck_assert_int_eq(ns_pool_addrs(&pool, 16, 0, NULL, &b, &plen), -1);
	ck_assert_int_eq(ns_pool_addrs(&pool, 16, 0, &a, NULL, &plen), -1);
	ck_assert_int_eq(ns_pool_addrs(&pool, 16, 0, &a, &b, NULL), -1);
}
END_TEST

/* ---------------------------------------------------------- id table */

static const struct {
	const char	*id;
	int		 valid;
} id_cases[] = {
	{ "a", 1 },
	{ "0", 1 },
	{ "sandbox-1", 1 },
	{ "a-", 1 },
	{ "a--b", 1 },
	{ "abcdefghijklmnopqrstuvwxyz012345", 1 },	/* 32 */
	{ "abcdefghijklmnopqrstuvwxyz0123456", 0 },	/* 33 */
	{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0 },
	{ "", 0 },
	{ "-a", 0 },
	{ "-", 0 },
	{ "Abc", 0 },
	{ "abC", 0 },
	{ "a/b", 0 },
	{ "/", 0 },
	{ "..", 0 },
	{ "../etc", 0 },
	{ "a.b", 0 },
	{ "a b", 0 },
	{ "a_b", 0 },
	{ "a\nb", 0 },
	{ "a\tb", 0 },
	{ "a%n", 0 },
	{ "a\xc3\xa9", 0 },				/* UTF-8 e-acute */
	{ "a\xff", 0 },
	{ "*", 0 },
	{ "a:b", 0 },
};

START_TEST(test_id_table)
{
	ck_assert_msg(ns_id_valid(id_cases[_i].id) == id_cases[_i].valid,
	    "id case %d", _i);
}
END_TEST

START_TEST(test_id_null)
{
	ck_assert_int_eq(ns_id_valid(NULL), 0);
}
END_TEST

/* ------------------------------------------------------------- specs */

START_TEST(test_spec_init)
{
	struct ns_spec	s;
	char		err[256];
	char		a[INET_ADDRSTRLEN];

	ck_assert_int_eq(ns_spec_init(&s, "box-7", 7, &g_pool, 16, &g_service,
	    NULL, NULL, err, sizeof(err)), 0);
	ck_assert_str_eq(s.id, "box-7");
	ck_assert_str_eq(s.netns, "sluice-box-7");
	ck_assert_str_eq(s.host_if, "sl-7");
	ck_assert_uint_eq(s.index, 7);
	ck_assert_int_eq(s.prefixlen, 30);
	ck_assert_str_eq(inet_ntop(AF_INET, &s.host_addr, a, sizeof(a)),
	    "10.231.0.29");
	ck_assert_str_eq(inet_ntop(AF_INET, &s.sandbox_addr, a, sizeof(a)),
	    "10.231.0.30");
	ck_assert_uint_eq(s.service_addr.s_addr, g_service.s_addr);
	ck_assert_str_eq(s.netns_dir, "/run/netns");
	ck_assert_str_eq(s.etc_dir, "/etc/netns");
	ck_assert_int_eq(ns_spec_valid(&s, err, sizeof(err)), 0);

	/* The longest id still fits every name, and the largest index the
	 * link name. */
	ck_assert_int_eq(ns_spec_init(&s, "abcdefghijklmnopqrstuvwxyz012345",
	    16382, &g_pool, 16, &g_service, "/x", "/y", err, sizeof(err)), 0);
	ck_assert_str_eq(s.netns, "sluice-abcdefghijklmnopqrstuvwxyz012345");
	ck_assert_str_eq(s.host_if, "sl-16382");
}
END_TEST

static const struct {
	const char	*id;
	uint32_t	 index;
	const char	*service;
	const char	*netns_dir;
	const char	*etc_dir;
} spec_bad[] = {
	{ "Bad", 0, "10.231.255.254", NULL, NULL },
	{ "../x", 0, "10.231.255.254", NULL, NULL },
	{ NULL, 0, "10.231.255.254", NULL, NULL },
	{ "ok", 16383, "10.231.255.254", NULL, NULL },
	{ "ok", 0, "10.231.0.2", NULL, NULL },		/* service in slot */
	{ "ok", 0, "10.231.0.1", NULL, NULL },
	{ "ok", 0, "0.0.0.0", NULL, NULL },
	{ "ok", 0, "10.231.255.254", "run/netns", NULL },
	{ "ok", 0, "10.231.255.254", NULL, "etc/netns" },
	{ "ok", 0, "10.231.255.254", "/run/../tmp", NULL },
	{ "ok", 0, "10.231.255.254", "/run/netns/..", NULL },
	{ "ok", 0, "10.231.255.254", NULL, "/etc/./netns" },
	{ "ok", 0, "10.231.255.254", "", NULL },
	{ "ok", 0, "10.231.255.254",
	  "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	  NULL },
};

START_TEST(test_spec_init_bad)
{
	struct ns_spec	s;
	struct in_addr	svc;
	char		err[256] = "";

	ck_assert_int_eq(inet_pton(AF_INET, spec_bad[_i].service, &svc), 1);
	memset(&s, 0x41, sizeof(s));
	ck_assert_int_eq(ns_spec_init(&s, spec_bad[_i].id, spec_bad[_i].index,
	    &g_pool, 16, &svc, spec_bad[_i].netns_dir, spec_bad[_i].etc_dir,
	    err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_msg(err[0] != '\0', "no message");
	/* A refused spec is zeroed, so it cannot be used by mistake. */
	ck_assert_str_eq(s.id, "");
	ck_assert_int_eq(ns_spec_valid(&s, NULL, 0), -1);
}
END_TEST

/* Each case spoils one field of a good spec, as a compromised or buggy
 * sender across the privilege boundary might. */
static void
spoil(struct ns_spec *s, int which)
{
	switch (which) {
	case 0:	memset(s->id, 'a', sizeof(s->id)); break;	/* no NUL */
	case 1:	memset(s->netns, 'a', sizeof(s->netns)); break;
	case 2:	memset(s->host_if, 'a', sizeof(s->host_if)); break;
	case 3:	memset(s->netns_dir, 'a', sizeof(s->netns_dir)); break;
	case 4:	memset(s->etc_dir, '/', sizeof(s->etc_dir)); break;
	case 5:	strcpy(s->netns, "sluice-other"); break;
	case 6:	strcpy(s->netns, "../../etc"); break;
	case 7:	strcpy(s->host_if, "eth0"); break;
	case 8:	strcpy(s->host_if, "sl-"); break;
	case 9:	strcpy(s->host_if, "sl-a/b"); break;
	case 10: strcpy(s->host_if, "sl-A"); break;
	case 11: strcpy(s->host_if, "lo"); break;
	case 12: strcpy(s->id, "UP"); strcpy(s->netns, "sluice-UP"); break;
	case 13: strcpy(s->id, ".."); strcpy(s->netns, "sluice-.."); break;
	case 14: strcpy(s->netns_dir, "relative"); break;
	case 15: strcpy(s->netns_dir, "/tmp/../etc"); break;
	case 16: strcpy(s->etc_dir, "/etc/.."); break;
	case 17: s->prefixlen = 24; break;
	case 18: s->prefixlen = 0; break;
	case 19: s->prefixlen = 32; break;
	case 20: s->sandbox_addr = s->host_addr; break;
	case 21: s->sandbox_addr.s_addr = htonl(0xc0000202); break;
	case 22: s->service_addr = s->sandbox_addr; break;
	case 23: s->service_addr.s_addr = 0; break;
	case 24:	/* network address of the /30 */
		s->host_addr.s_addr = htonl(ntohl(s->host_addr.s_addr) - 1);
		break;
	case 25:	/* broadcast address of the /30 */
		s->sandbox_addr.s_addr =
		    htonl(ntohl(s->sandbox_addr.s_addr) + 1);
		break;
	case 26:
		s->host_addr.s_addr = htonl(0x7f000001);
		s->sandbox_addr.s_addr = htonl(0x7f000002);
		break;
	case 27:
		s->host_addr.s_addr = htonl(0xe0000001);
		s->sandbox_addr.s_addr = htonl(0xe0000002);
		break;
	case 28: strcpy(s->id, ""); strcpy(s->netns, "sluice-"); break;
	}
}
#define SPOIL_N	29

START_TEST(test_spec_hostile)
{
	struct ns_spec	s;
	char		err[256] = "", pin[PATH_MAX];

	mkspec(&s, "a", 1);
	snprintf(pin, sizeof(pin), "%s/%s", s.netns_dir, s.netns);
	spoil(&s, _i);
	ck_assert_int_eq(ns_spec_valid(&s, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_msg(strncmp(err, "spec:", 5) == 0, "message: %s", err);
	/* Refused before anything is made or removed. */
	ck_assert_int_eq(ns_create(&s, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(access(pin, F_OK), -1);
	ck_assert_int_eq(ns_delete(&s, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ns_exists(&s), -1);
	ck_assert_int_eq(ns_netns_fd(&s), -1);
	ck_assert_int_eq(ns_spec_valid(NULL, NULL, 0), -1);
}
END_TEST

/* A deliberate spec may use a /31: the pair is the whole subnet. */
START_TEST(test_spec_slash31)
{
	struct ns_spec	s;
	char		err[256];

	mkspec(&s, "b", 2);
	s.prefixlen = 31;
	s.host_addr.s_addr = htonl(0x0ae70a00);		/* 10.231.10.0 */
	s.sandbox_addr.s_addr = htonl(0x0ae70a01);	/* 10.231.10.1 */
	ck_assert_msg(ns_spec_valid(&s, err, sizeof(err)) == 0, "%s", err);
	create_ok(&s);
	udp_exchange(&s);
	delete_ok(&s);
	assert_gone(&s);
}
END_TEST

/* ---------------------------------------------------------- lifecycle */

START_TEST(test_create_inspect)
{
	struct ns_spec	s;
	char		out[4096], cmd[512], path[PATH_MAX], buf[256];
	int		fd;

	mkspec(&s, "a", 1);
	create_ok(&s);
	ck_assert_int_eq(ns_exists(&s), 1);

	/* Host side: address, up, IPv6 off, no proxy ARP, strict rp_filter. */
	snprintf(cmd, sizeof(cmd), "ip -o -4 addr show dev %s; "
	    "ip -o link show dev %s; ip -o -6 addr show dev %s", s.host_if,
	    s.host_if, s.host_if);
	ck_assert_int_eq(run_in(-1, cmd, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "inet 10.231.0.5/30 ") != NULL, "%s", out);
	ck_assert_msg(strstr(out, ",UP") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "inet6") == NULL, "host side IPv6: %s", out);
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6",
	    s.host_if);
	read_file(path, buf, sizeof(buf));
	ck_assert_str_eq(buf, "1\n");
	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/rp_filter",
	    s.host_if);
	read_file(path, buf, sizeof(buf));
	ck_assert_str_eq(buf, "1\n");
	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/proxy_arp",
	    s.host_if);
	read_file(path, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0\n");

	/* Inside. */
	fd = ns_netns_fd(&s);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(run_in(fd, "ip -o link show dev lo", out,
	    sizeof(out)), 0);
	ck_assert_msg(strstr(out, "<LOOPBACK,UP") != NULL, "%s", out);
	ck_assert_int_eq(run_in(fd, "ip -o link show", out, sizeof(out)), 0);
	/* Exactly lo and eth0: nothing else leads out. */
	ck_assert_msg(strstr(out, "1: lo:") != NULL &&
	    strstr(out, " eth0@") != NULL && strstr(out, "\n3:") == NULL &&
	    strstr(out, s.host_if) == NULL, "%s", out);
	ck_assert_int_eq(run_in(fd, "ip -o -4 addr show dev eth0", out,
	    sizeof(out)), 0);
	ck_assert_msg(strstr(out, "inet 10.231.0.6/30 ") != NULL, "%s", out);
	ck_assert_int_eq(run_in(fd, "ip -o link show dev eth0", out,
	    sizeof(out)), 0);
	ck_assert_msg(strstr(out, ",UP") != NULL, "%s", out);
	ck_assert_int_eq(run_in(fd, "ip -4 route show default", out,
	    sizeof(out)), 0);
	ck_assert_msg(strstr(out, "default via 10.231.0.5 dev eth0") != NULL,
	    "%s", out);
	ck_assert_int_eq(run_in(fd, "ip -6 addr show; ip -6 route show", out,
	    sizeof(out)), 0);
	ck_assert_msg(out[0] == '\0', "IPv6 inside: %s", out);
	ck_assert_int_eq(run_in(fd, "cd /proc/sys/net/ipv6/conf && "
	    "cat all/disable_ipv6 default/disable_ipv6 lo/disable_ipv6 "
	    "eth0/disable_ipv6 /proc/sys/net/ipv4/ip_forward", out,
	    sizeof(out)), 0);
	ck_assert_str_eq(out, "1\n1\n1\n1\n0\n");
	close(fd);

	snprintf(path, sizeof(path), "%s/%s/resolv.conf", s.etc_dir, s.netns);
	read_file(path, buf, sizeof(buf));
	ck_assert_str_eq(buf, "nameserver 10.231.255.254\noptions edns0\n");

	udp_exchange(&s);

	delete_ok(&s);
	assert_gone(&s);
}
END_TEST

START_TEST(test_duplicate)
{
	struct ns_spec	s, other;
	char		err[256] = "";

	mkspec(&s, "a", 1);
	create_ok(&s);
	ck_assert_int_eq(ns_create(&s, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_msg(strstr(err, "reserve") != NULL, "%s", err);
	/* The first one is intact and still works. */
	ck_assert_int_eq(ns_exists(&s), 1);
	udp_exchange(&s);

	/* Another sandbox that wants the same host link fails whole: its
	 * pin and etc dir are gone, and the first sandbox is untouched. */
	mkspec(&other, "b", 2);
	strcpy(other.host_if, s.host_if);
	ck_assert_int_eq(ns_create(&other, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_msg(!path_exists(other.netns_dir, other.netns), "pin left");
	ck_assert_msg(!path_exists(other.etc_dir, other.netns), "etc left");
	ck_assert_int_eq(ns_exists(&s), 1);
	udp_exchange(&s);

	delete_ok(&s);
	assert_gone(&s);
}
END_TEST

/* A failure midway (the host link name is taken by someone else's link)
 * rolls back everything and leaves that link alone. */
START_TEST(test_rollback)
{
	struct ns_spec	s;
	char		err[256] = "", cmd[256], out[512];

	mkspec(&s, "c", 3);
	snprintf(cmd, sizeof(cmd), "ip link add %s type bridge", s.host_if);
	ck_assert_int_eq(run_in(-1, cmd, out, sizeof(out)), 0);
	ck_assert_int_eq(ns_create(&s, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_msg(strstr(err, "veth") != NULL, "%s", err);
	ck_assert_msg(!path_exists(s.netns_dir, s.netns), "pin left");
	ck_assert_msg(!path_exists(s.etc_dir, s.netns), "etc left");
	ck_assert_int_eq(ns_exists(&s), 0);
	snprintf(cmd, sizeof(cmd), "ip -o link show dev %s", s.host_if);
	ck_assert_int_eq(run_in(-1, cmd, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, s.host_if) != NULL, "%s", out);
	/* The thread is back in its own namespace. */
	ck_assert_uint_ne(if_nametoindex(s.host_if), 0);
	snprintf(cmd, sizeof(cmd), "ip link del %s", s.host_if);
	ck_assert_int_eq(run_in(-1, cmd, out, sizeof(out)), 0);
	/* With the name free, the same spec now works. */
	create_ok(&s);
	udp_exchange(&s);
	delete_ok(&s);
	assert_gone(&s);
}
END_TEST

/*
 * The last step fails (resolv.conf cannot be written: a directory holds
 * its name), after the namespace, both links, addresses and routes exist:
 * all of it goes, and the calling thread is back home.
 */
START_TEST(test_rollback_late)
{
	struct ns_spec	s;
	char		p[PATH_MAX], err[256] = "";
	struct stat	st1, st2;

	/* An earlier test's retired links go with their namespace, which
	 * the kernel frees asynchronously: none may be counted as ours. */
	ck_assert_int_eq(retired_settle(), 0);
	mkspec(&s, "d", 4);
	ck_assert_int_eq(stat("/proc/thread-self/ns/net", &st1), 0);
	snprintf(p, sizeof(p), "%s/%s", s.etc_dir, s.netns);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/%s/resolv.conf", s.etc_dir, s.netns);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	ck_assert_int_eq(ns_create(&s, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EISDIR);
	ck_assert_msg(strstr(err, "resolv.conf") != NULL, "%s", err);
	ck_assert_int_eq(stat("/proc/thread-self/ns/net", &st2), 0);
	ck_assert_uint_eq(st1.st_ino, st2.st_ino);
	ck_assert_uint_eq(if_nametoindex(s.host_if), 0);
	ck_assert_int_eq(retired_settle(), 0);
	ck_assert_msg(!path_exists(s.netns_dir, s.netns), "pin left");
	ck_assert_int_eq(ns_exists(&s), 0);
	/* Only files are ours to remove; the directory stays. */
	ck_assert_int_eq(rmdir(p), 0);
	snprintf(p, sizeof(p), "%s/%s", s.etc_dir, s.netns);
	ck_assert_int_eq(rmdir(p), 0);
	create_ok(&s);
	delete_ok(&s);
	assert_gone(&s);
}
END_TEST

/* A missing netns_dir fails cleanly (nothing made, ENOENT). */
START_TEST(test_no_netns_dir)
{
	struct ns_spec	s;
	char		err[256] = "";

	mkspec(&s, "d", 4);
	snprintf(s.netns_dir, sizeof(s.netns_dir), "%s/missing", g_tmp);
	ck_assert_int_eq(ns_create(&s, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_uint_eq(if_nametoindex(s.host_if), 0);
	ck_assert_msg(!path_exists(s.etc_dir, s.netns), "etc left");
}
END_TEST

START_TEST(test_delete_twice)
{
	struct ns_spec	s;

	mkspec(&s, "a", 1);
	/* Never created: nothing to do, not an error. */
	delete_ok(&s);
	create_ok(&s);
	delete_ok(&s);
	delete_ok(&s);
	assert_gone(&s);
}
END_TEST

/* What a crash can leave behind: a bare reservation (no mount) and a stale
 * etc dir. Neither passes for a sandbox; ns_delete clears both. */
START_TEST(test_leftovers)
{
	struct ns_spec	s;
	char		p[PATH_MAX], buf[256], err[256] = "";
	int		fd;

	mkspec(&s, "e", 5);
	snprintf(p, sizeof(p), "%s/%s", s.netns_dir, s.netns);
	fd = open(p, O_RDONLY | O_CREAT | O_EXCL, 0);
	ck_assert_int_ne(fd, -1);
	close(fd);
	ck_assert_int_eq(ns_exists(&s), 0);
	ck_assert_int_eq(ns_netns_fd(&s), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ns_enter(s.netns_dir, s.etc_dir, s.netns, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ns_create(&s, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EEXIST);
	/* The refused create did not remove what it did not make. */
	ck_assert_int_eq(access(p, F_OK), 0);

	snprintf(p, sizeof(p), "%s/%s", s.etc_dir, s.netns);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/%s/hosts", s.etc_dir, s.netns);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	ck_assert_int_ne(fd, -1);
	close(fd);
	snprintf(p, sizeof(p), "%s/%s/resolv.conf", s.etc_dir, s.netns);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(write(fd, "nameserver 192.0.2.1\nextra\n", 27), 27);
	close(fd);

	delete_ok(&s);
	assert_gone(&s);

	/* A stale etc dir alone does not block a create, and its old
	 * resolv.conf is replaced, not appended to. */
	snprintf(p, sizeof(p), "%s/%s", s.etc_dir, s.netns);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/%s/resolv.conf", s.etc_dir, s.netns);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(write(fd, "nameserver 192.0.2.1\nnameserver "
	    "192.0.2.2\nsearch example\n", 54), 54);
	close(fd);
	create_ok(&s);
	read_file(p, buf, sizeof(buf));
	ck_assert_str_eq(buf, "nameserver 10.231.255.254\noptions edns0\n");
	delete_ok(&s);
	assert_gone(&s);
}
END_TEST

/* A symlink where the etc dir goes is not followed: the create fails
 * whole and the link, not ours, stays. A missing etc_dir is made. */
START_TEST(test_etc_dir_edge)
{
	struct ns_spec	s;
	char		p[PATH_MAX], err[256] = "", trap[PATH_MAX];

	mkspec(&s, "f", 6);
	snprintf(trap, sizeof(trap), "%s/trap", g_tmp);
	ck_assert_int_eq(mkdir(trap, 0700), 0);
	snprintf(p, sizeof(p), "%s/%s", s.etc_dir, s.netns);
	ck_assert_int_eq(symlink(trap, p), 0);
	ck_assert_int_eq(ns_create(&s, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOTDIR);
	ck_assert_msg(!path_exists(s.netns_dir, s.netns), "pin left");
	ck_assert_uint_eq(if_nametoindex(s.host_if), 0);
	ck_assert_msg(!path_exists(trap, "resolv.conf"), "wrote through");
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(rmdir(trap), 0);

	snprintf(s.etc_dir, sizeof(s.etc_dir), "%s/etc3", g_tmp);
	create_ok(&s);
	snprintf(p, sizeof(p), "%s/%s/resolv.conf", s.etc_dir, s.netns);
	ck_assert_int_eq(access(p, F_OK), 0);
	delete_ok(&s);
	assert_gone(&s);
	ck_assert_int_eq(rmdir(s.etc_dir), 0);
}
END_TEST

/*
 * Makes fsopen(2) fail with EPERM in this process from now on (seccomp),
 * as a container's profile or an older kernel would. 0, or -1 where the
 * architecture is not one this filter knows.
 */
static int
deny_fsopen(void)
{
#if defined(__x86_64__)
#define NS_TEST_ARCH	AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NS_TEST_ARCH	AUDIT_ARCH_AARCH64
#endif
#ifdef NS_TEST_ARCH
	struct sock_filter	f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NS_TEST_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fsopen, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog	prog = {
		.len = sizeof(f) / sizeof(f[0]),
		.filter = f,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
	errno = ENOSYS;
	return -1;
#endif
}

/*
 * Where no private procfs instance can be made (here: fsopen denied by
 * seccomp), ns_create falls back to /proc and the sandbox is exactly as
 * before. A child of its own runs it: the filter cannot be undone, and the
 * child has never made an instance that it could go on using.
 */
START_TEST(test_no_private_procfs)
{
	struct ns_spec	s;
	pid_t		pid;
	int		st;

	mkspec(&s, "c", 3);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		const char	*why;
		char		 err[256] = "";

		if (deny_fsopen() == -1)
			_exit(errno == ENOSYS ? 77 : 20);
		/* The filter works: no private instance is possible. */
		if (syscall(__NR_fsopen, "proc", 0) != -1 || errno != EPERM)
			_exit(21);
		if (ns_create(&s, err, sizeof(err)) == -1) {
			fprintf(stderr, "ns_create: %s\n", err);
			_exit(22);
		}
		if ((why = settings_wrong(&s)) != NULL) {
			fprintf(stderr, "settings: %s\n", why);
			_exit(23);
		}
		if (ns_delete(&s, err, sizeof(err)) == -1) {
			fprintf(stderr, "ns_delete: %s\n", err);
			_exit(24);
		}
		if (if_nametoindex(s.host_if) != 0 ||
		    path_exists(s.netns_dir, s.netns) ||
		    path_exists(s.etc_dir, s.netns))
			_exit(25);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st), "child status %d", st);
	if (WEXITSTATUS(st) == 77) {
		fprintf(stderr, "check_ns: test_no_private_procfs: no seccomp "
		    "filter for this architecture, not run\n");
		return;
	}
	ck_assert_msg(WEXITSTATUS(st) == 0, "child exit %d",
	    WEXITSTATUS(st));
	assert_gone(&s);
}
END_TEST

static void
conf_expect(const char *dev, const char *key, const char *want)
{
	char	path[PATH_MAX], buf[64];

	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/%s", dev,
	    key);
	read_file(path, buf, sizeof(buf));
	ck_assert_msg(strcmp(buf, want) == 0, "%s is %s", path, buf);
}

/*
 * The per-device IPv4 options request (ns_rtnl_inet_conf), which replaced
 * the proxy_arp and rp_filter sysctls: it sets what it is asked to, and
 * refuses a bad count, an id outside 1..65535, an id the kernel does not
 * know and a device that does not exist, changing nothing in each case.
 */
START_TEST(test_inet_conf)
{
	static const int	 ids[] = { IPV4_DEVCONF_PROXY_ARP,
				    IPV4_DEVCONF_RP_FILTER };
	static const uint32_t	 on[] = { 1, 2 }, off[] = { 0, 1 };
	static const int	 bad_ids[] = { 0, -1, INT_MIN, 65536, INT_MAX };
	int			 many[33], kernel_bad[] = { 4096 };
	uint32_t		 vals[33] = { 0 };
	struct ns_rtnl		*r;
	char			 dev[IF_NAMESIZE + 8], cmd[128], out[256];
	size_t			 i;
	int			 idx;

	/* A name cleanup_all removes should the test fail halfway. */
	ck_assert_int_lt(snprintf(dev, sizeof(dev), "%se", g_ifp),
	    IF_NAMESIZE);
	snprintf(cmd, sizeof(cmd), "ip link add name %s type bridge", dev);
	ck_assert_int_eq(run_in(-1, cmd, out, sizeof(out)), 0);
	idx = (int)if_nametoindex(dev);
	ck_assert_int_gt(idx, 0);
	r = ns_rtnl_new();
	ck_assert_ptr_nonnull(r);

	ck_assert_int_eq(ns_rtnl_inet_conf(r, idx, ids, on, 2), 0);
	conf_expect(dev, "proxy_arp", "1\n");
	conf_expect(dev, "rp_filter", "2\n");
	ck_assert_int_eq(ns_rtnl_inet_conf(r, idx, ids, off, 2), 0);
	conf_expect(dev, "proxy_arp", "0\n");
	conf_expect(dev, "rp_filter", "1\n");

	/* Bad counts. */
	errno = 0;
	ck_assert_int_eq(ns_rtnl_inet_conf(r, idx, ids, on, 0), -1);
	ck_assert_int_eq(errno, EINVAL);
	for (i = 0; i < 33; i++)
		many[i] = IPV4_DEVCONF_PROXY_ARP;
	errno = 0;
	ck_assert_int_eq(ns_rtnl_inet_conf(r, idx, many, vals, 33), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* Ids that cannot be an attribute type, alone or after a good one:
	 * nothing is sent, so the good one is not applied either. */
	for (i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		int	pair[2] = { IPV4_DEVCONF_PROXY_ARP, bad_ids[i] };

		errno = 0;
		ck_assert_int_eq(ns_rtnl_inet_conf(r, idx, &bad_ids[i], on,
		    1), -1);
		ck_assert_int_eq(errno, EINVAL);
		errno = 0;
		ck_assert_int_eq(ns_rtnl_inet_conf(r, idx, pair, on, 2), -1);
		ck_assert_int_eq(errno, EINVAL);
		conf_expect(dev, "proxy_arp", "0\n");
	}
	/* An id the kernel does not know: refused by the kernel, whole. */
	errno = 0;
	ck_assert_int_eq(ns_rtnl_inet_conf(r, idx, kernel_bad, on, 1), -1);
	ck_assert_int_eq(errno, EINVAL);
	conf_expect(dev, "proxy_arp", "0\n");
	/* No such device. */
	errno = 0;
	ck_assert_int_eq(ns_rtnl_inet_conf(r, INT_MAX, ids, on, 2), -1);
	ck_assert_int_eq(errno, ENODEV);
	/* The socket is still usable after all those refusals. */
	ck_assert_int_eq(ns_rtnl_inet_conf(r, idx, ids, on, 1), 0);
	conf_expect(dev, "proxy_arp", "1\n");

	ns_rtnl_free(r);
	ns_rtnl_free(NULL);
	snprintf(cmd, sizeof(cmd), "ip link del %s", dev);
	ck_assert_int_eq(run_in(-1, cmd, out, sizeof(out)), 0);
}
END_TEST

static int
dbl_cmp(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double
ms_since(const struct timespec *t0)
{
	struct timespec	t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 +
	    (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* 50 creates and deletes leave nothing behind; the times are printed for
 * the report, never asserted. */
START_TEST(test_loop50)
{
	struct ns_spec	s[LOOP_N];
	struct timespec	t0;
	double		tc[LOOP_N], td[LOOP_N];
	char		suffix[8], **pins, **links;
	size_t		i, j, np, nl;

	for (i = 0; i < LOOP_N; i++) {
		snprintf(suffix, sizeof(suffix), "l%zu", i);
		mkspec(&s[i], suffix, (uint32_t)i + 100);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		create_ok(&s[i]);
		tc[i] = ms_since(&t0);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		delete_ok(&s[i]);
		td[i] = ms_since(&t0);
		ck_assert_uint_eq(if_nametoindex(s[i].host_if), 0);
	}
	for (i = 0; i < LOOP_N; i++)
		assert_gone(&s[i]);
	ck_assert_int_eq(retired_settle(), 0);
	ck_assert_int_eq(ns_list(g_netns_dir, &pins, &np, &links, &nl, NULL,
	    0), 0);
	ck_assert_uint_eq(np, 0);
	for (j = 0; j < nl; j++)
		ck_assert_msg(strncmp(links[j], g_ifp, strlen(g_ifp)) != 0,
		    "left: %s", links[j]);
	ns_names_free(pins);
	ns_names_free(links);
	qsort(tc, LOOP_N, sizeof(tc[0]), dbl_cmp);
	qsort(td, LOOP_N, sizeof(td[0]), dbl_cmp);
	fprintf(stderr, "check_ns: %d create/delete (%s build): create "
	    "median %.2f ms (min %.2f, max %.2f), delete median %.2f ms "
	    "(min %.2f, max %.2f)\n", LOOP_N, BUILD_KIND, tc[LOOP_N / 2], tc[0],
	    tc[LOOP_N - 1], td[LOOP_N / 2], td[0], td[LOOP_N - 1]);
}
END_TEST

/*
 * ns_delete does not wait for the kernel to unregister the veth: the host
 * side is taken out of service (down, no address, renamed) and goes with
 * the namespace. While something still holds the namespace (here an fd),
 * the retired link stays, harmless, and the name and addresses are free
 * for a new sandbox at once.
 */
START_TEST(test_retired_link)
{
	struct ns_spec	s;
	char		gone[IF_NAMESIZE], cmd[256], out[1024], **pins, **links;
	size_t		np, nl;
	int		fd;

	/* An earlier test's retired links go with their namespace, which
	 * the kernel frees asynchronously: count only this test's. */
	ck_assert_int_eq(retired_settle(), 0);
	mkspec(&s, "a", 1);
	create_ok(&s);
	fd = ns_netns_fd(&s);
	ck_assert_int_ne(fd, -1);
	delete_ok(&s);
	assert_gone(&s);
	ck_assert_int_eq(count_retired(gone, sizeof(gone)), 1);
	snprintf(cmd, sizeof(cmd), "ip -o link show dev %s; "
	    "ip -o -4 addr show dev %s", gone, gone);
	ck_assert_int_eq(run_in(-1, cmd, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, ",UP") == NULL && strstr(out, "inet ") ==
	    NULL, "retired link in service: %s", out);
	/* And no route of any table leads into it any more. */
	snprintf(cmd, sizeof(cmd), "ip -4 route show table all dev %s", gone);
	ck_assert_int_eq(run_in(-1, cmd, out, sizeof(out)), 0);
	ck_assert_msg(out[0] == '\0', "routes into retired link: %s", out);
	/* Not something reconciliation should adopt. */
	ck_assert_int_eq(ns_list(g_netns_dir, &pins, &np, &links, &nl, NULL,
	    0), 0);
	ck_assert_uint_eq(np, 0);
	ck_assert(!has(links, gone));
	ns_names_free(pins);
	ns_names_free(links);

	/* The same spec again, while the old pair lingers. */
	create_ok(&s);
	udp_exchange(&s);
	delete_ok(&s);
	close(fd);
	ck_assert_int_eq(retired_settle(), 0);
	assert_gone(&s);
}
END_TEST

/* A host link whose namespace lost its pin (or whose peer is elsewhere)
 * is deleted synchronously: nothing is left to take it away later. */
START_TEST(test_delete_lost_pin)
{
	struct ns_spec	s;
	char		pin[PATH_MAX], out[1024];
	int		fd;

	/* An earlier test's retired links go with their namespace, which
	 * the kernel frees asynchronously: count only this test's. */
	ck_assert_int_eq(retired_settle(), 0);
	mkspec(&s, "b", 2);
	create_ok(&s);
	fd = ns_netns_fd(&s);
	ck_assert_int_ne(fd, -1);
	snprintf(pin, sizeof(pin), "%s/%s", s.netns_dir, s.netns);
	ck_assert_int_eq(umount2(pin, MNT_DETACH), 0);
	ck_assert_int_eq(unlink(pin), 0);
	ck_assert_int_eq(ns_exists(&s), 0);
	delete_ok(&s);
	assert_gone(&s);
	ck_assert_int_eq(count_retired(NULL, 0), 0);
	/* The peer went with it, although the namespace still lives. */
	ck_assert_int_eq(run_in(fd, "ip -o link show", out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "eth0") == NULL, "%s", out);
	close(fd);
}
END_TEST

static void *
create_thread(void *arg)
{
	static int	ret;

	ret = ns_create(arg, NULL, 0);
	return &ret;
}

/*
 * From a second thread: only that thread visits the new namespace, and
 * the pin names the new namespace, not the thread group leader's (the
 * /proc/self versus /proc/thread-self trap).
 */
START_TEST(test_create_in_thread)
{
	struct ns_spec	s;
	struct stat	self, pin;
	pthread_t	t;
	void		*ret;
	int		fd;

	mkspec(&s, "c", 3);
	ck_assert_int_eq(pthread_create(&t, NULL, create_thread, &s), 0);
	ck_assert_int_eq(pthread_join(t, &ret), 0);
	ck_assert_int_eq(*(int *)ret, 0);
	ck_assert_int_eq(stat("/proc/thread-self/ns/net", &self), 0);
	fd = ns_netns_fd(&s);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(fstat(fd, &pin), 0);
	close(fd);
	ck_assert_uint_ne(self.st_ino, pin.st_ino);
	ck_assert_uint_ne(if_nametoindex(s.host_if), 0);
	ck_assert_uint_eq(if_nametoindex("eth0"), 0);
	udp_exchange(&s);
	delete_ok(&s);
	assert_gone(&s);
}
END_TEST

/* Create/delete interleaved: many alive at once, removed out of order. */
START_TEST(test_many_alive)
{
	struct ns_spec	s[LOOP_N];
	char		suffix[8];
	size_t		i;

	for (i = 0; i < LOOP_N; i++) {
		snprintf(suffix, sizeof(suffix), "l%zu", i);
		mkspec(&s[i], suffix, (uint32_t)i + 100);
		create_ok(&s[i]);
	}
	for (i = 0; i < LOOP_N; i++)
		ck_assert_int_eq(ns_exists(&s[i]), 1);
	udp_exchange(&s[LOOP_N - 1]);
	udp_exchange(&s[0]);
	for (i = 1; i < LOOP_N; i += 2)
		delete_ok(&s[i]);
	for (i = 0; i < LOOP_N; i += 2) {
		ck_assert_int_eq(ns_exists(&s[i]), 1);
		delete_ok(&s[i]);
	}
	for (i = 0; i < LOOP_N; i++)
		assert_gone(&s[i]);
}
END_TEST

/*
 * More creates in one process than one private procfs instance serves
 * (ns.c replaces it every 128): every sandbox still gets every setting,
 * and one made before the replacements stays whole and working.
 */
START_TEST(test_recycle)
{
	struct ns_spec	 keep, s;
	const char	*why;
	int		 i;

	mkspec(&keep, "a", 1);
	create_ok(&keep);
	ck_assert_ptr_null(settings_wrong(&keep));
	mkspec(&s, "b", 2);
	for (i = 0; i < RECYCLE_N; i++) {
		create_ok(&s);
		why = settings_wrong(&s);
		ck_assert_msg(why == NULL, "create %d: %s", i, why);
		delete_ok(&s);
	}
	why = settings_wrong(&keep);
	ck_assert_msg(why == NULL, "%s", why);
	udp_exchange(&keep);
	delete_ok(&keep);
	assert_gone(&keep);
	assert_gone(&s);
}
END_TEST

struct other_ns {
	struct ns_spec	 s;
	const char	*why;
	int		 created, seen, deleted, gone;
	char		 err[256];
};

/* ns_create and ns_delete from a thread that lives in a network namespace
 * of its own: that namespace is the host side there. */
static void *
other_ns_thread(void *arg)
{
	struct other_ns	*o = arg;

	if (unshare(CLONE_NEWNET) == -1) {
		snprintf(o->err, sizeof(o->err), "unshare: %s",
		    strerror(errno));
		return NULL;
	}
	if (ns_create(&o->s, o->err, sizeof(o->err)) == -1)
		return NULL;
	o->created = 1;
	o->seen = if_nametoindex(o->s.host_if) != 0;
	o->why = settings_wrong(&o->s);
	if (ns_delete(&o->s, o->err, sizeof(o->err)) == 0)
		o->deleted = 1;
	o->gone = if_nametoindex(o->s.host_if) == 0;
	return NULL;
}

/*
 * The private procfs instance is shared by every call in the process, but
 * a sysctl belongs to the namespace of the thread that opens it: a create
 * from a thread in another namespace, after this thread made the instance,
 * sets up the host side in that thread's namespace, not in the one the
 * instance was made from, and the first sandbox is not disturbed.
 */
START_TEST(test_create_other_netns)
{
	struct ns_spec	 keep;
	struct other_ns	 o;
	pthread_t	 t;
	const char	*why;

	mkspec(&keep, "a", 1);
	create_ok(&keep);
	memset(&o, 0, sizeof(o));
	mkspec(&o.s, "b", 2);
	ck_assert_int_eq(pthread_create(&t, NULL, other_ns_thread, &o), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(o.created, "ns_create in thread: %s", o.err);
	ck_assert_msg(o.seen, "host side not in the thread's namespace");
	ck_assert_msg(o.why == NULL, "in thread: %s", o.why);
	ck_assert_msg(o.deleted, "ns_delete in thread: %s", o.err);
	ck_assert(o.gone);
	/* Never here. */
	ck_assert_uint_eq(if_nametoindex(o.s.host_if), 0);
	ck_assert_msg(!path_exists(o.s.netns_dir, o.s.netns), "pin left");
	why = settings_wrong(&keep);
	ck_assert_msg(why == NULL, "%s", why);
	udp_exchange(&keep);
	delete_ok(&keep);
	assert_gone(&keep);
}
END_TEST

/* -------------------------------------------------------- reconcile */

START_TEST(test_list)
{
	struct ns_spec	a, b;
	char		**pins = NULL, **links = NULL, p[PATH_MAX], err[256];
	size_t		np = 99, nl = 99, i;
	int		fd;
	static const char *const strays[] = { "sluice-BAD", "other",
	    "sluice-", "sluice--x", "sluice-a.b" };

	/* Nothing yet: an empty, NULL-terminated list. */
	ck_assert_int_eq(ns_list(g_netns_dir, &pins, &np, &links, &nl, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(np, 0);
	ck_assert_ptr_null(pins[0]);
	ns_names_free(pins);
	ns_names_free(links);

	mkspec(&a, "a", 1);
	mkspec(&b, "b", 2);
	create_ok(&b);
	create_ok(&a);
	/* Names that are not ours stay invisible to reconciliation. */
	for (i = 0; i < sizeof(strays) / sizeof(strays[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", g_netns_dir, strays[i]);
		fd = open(p, O_RDONLY | O_CREAT | O_EXCL, 0);
		ck_assert_int_ne(fd, -1);
		close(fd);
	}
	ck_assert_int_eq(ns_list(g_netns_dir, &pins, &np, &links, &nl, err,
	    sizeof(err)), 0);
	for (i = 0; i < sizeof(strays) / sizeof(strays[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", g_netns_dir, strays[i]);
		unlink(p);
	}
	ck_assert_uint_eq(np, 2);
	/* Sorted. */
	ck_assert_str_eq(pins[0], a.netns);
	ck_assert_str_eq(pins[1], b.netns);
	ck_assert_ptr_null(pins[2]);
	ck_assert(has(links, a.host_if));
	ck_assert(has(links, b.host_if));
	for (i = 0; i < nl; i++)
		ck_assert_msg(strncmp(links[i], "sl-", 3) == 0, "%s", links[i]);
	ck_assert_ptr_null(links[nl]);
	ns_names_free(pins);
	ns_names_free(links);
	ns_names_free(NULL);

	/* A missing directory is an empty list; a bad one is refused. */
	snprintf(p, sizeof(p), "%s/nope", g_tmp);
	ck_assert_int_eq(ns_list(p, &pins, &np, &links, &nl, NULL, 0), 0);
	ck_assert_uint_eq(np, 0);
	ns_names_free(pins);
	ns_names_free(links);
	pins = links = NULL;
	ck_assert_int_eq(ns_list("relative", &pins, &np, &links, &nl, NULL,
	    0), -1);
	ck_assert_ptr_null(pins);
	ck_assert_ptr_null(links);

	delete_ok(&a);
	delete_ok(&b);
}
END_TEST

/* ------------------------------------------------------------ entering */

START_TEST(test_enter)
{
	struct ns_spec	s;
	char		err[256] = "", buf[256];
	pid_t		pid;
	int		st;

	mkspec(&s, "a", 1);
	create_ok(&s);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		int fd, n;

		if (ns_enter(g_netns_dir, g_etc_dir, s.netns, err,
		    sizeof(err)) == -1) {
			fprintf(stderr, "ns_enter: %s\n", err);
			_exit(10);
		}
		/* /etc shows the sandbox's resolv.conf. */
		if ((fd = open("/etc/resolv.conf", O_RDONLY)) == -1)
			_exit(11);
		n = (int)read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n < 0)
			_exit(12);
		buf[n] = '\0';
		if (strcmp(buf, "nameserver 10.231.255.254\n"
		    "options edns0\n") != 0)
			_exit(13);
		/* /sys describes the sandbox: eth0, not the host side. */
		if (access("/sys/class/net/eth0", F_OK) == -1)
			_exit(14);
		snprintf(buf, sizeof(buf), "/sys/class/net/%s", s.host_if);
		if (access(buf, F_OK) == 0)
			_exit(15);
		/* And the network is the sandbox's. */
		if (if_nametoindex("eth0") == 0 ||
		    if_nametoindex(s.host_if) != 0)
			_exit(16);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "child status %d", st);
	/* Nothing propagated back to us: our /etc/resolv.conf is not the
	 * sandbox's, and we are still in our own namespace. */
	{
		int	fd, n = 0;

		if ((fd = open("/etc/resolv.conf", O_RDONLY)) != -1) {
			n = (int)read(fd, buf, sizeof(buf) - 1);
			close(fd);
		}
		buf[n > 0 ? n : 0] = '\0';
		ck_assert_str_ne(buf, "nameserver 10.231.255.254\n"
		    "options edns0\n");
	}
	ck_assert_uint_ne(if_nametoindex(s.host_if), 0);
	ck_assert_uint_eq(if_nametoindex("eth0"), 0);
	delete_ok(&s);
	assert_gone(&s);
}
END_TEST

static const struct {
	const char	*netns_dir, *etc_dir, *netns;
	int		 err;
} enter_bad[] = {
	{ NULL, NULL, NULL, EINVAL },
	{ NULL, NULL, "", EINVAL },
	{ NULL, NULL, "sluice-", EINVAL },
	{ NULL, NULL, "sluice-UP", EINVAL },
	{ NULL, NULL, "sluice-../x", EINVAL },
	{ NULL, NULL, "../sluice-x", EINVAL },
	{ NULL, NULL, "other", EINVAL },
	{ NULL, NULL, "sluice-a/b", EINVAL },
	{ "relative", NULL, "sluice-a", EINVAL },
	{ "/run/../etc", NULL, "sluice-a", EINVAL },
	{ NULL, "/etc/..", "sluice-a", EINVAL },
};

/* Bad arguments are refused before the process changes at all, so this
 * can run in the test process itself. */
START_TEST(test_enter_bad)
{
	char	err[256] = "";
	ino_t	before, after;
	struct stat st;

	ck_assert_int_eq(stat("/proc/self/ns/net", &st), 0);
	before = st.st_ino;
	ck_assert_int_eq(ns_enter(enter_bad[_i].netns_dir,
	    enter_bad[_i].etc_dir, enter_bad[_i].netns, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, enter_bad[_i].err);
	ck_assert_int_eq(stat("/proc/self/ns/net", &st), 0);
	after = st.st_ino;
	ck_assert_uint_eq(before, after);
}
END_TEST

START_TEST(test_enter_missing)
{
	char	err[256] = "";

	ck_assert_int_eq(ns_enter(g_netns_dir, g_etc_dir, "sluice-nonexistent",
	    err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/* ----------------------------------------------------------- host setup */

static int
mounted_shared(const char *dir)
{
	char	line[1024];
	FILE	*f;
	int	found = 0;

	if ((f = fopen("/proc/self/mountinfo", "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		char	mp[512];

		/* id parent maj:min root mountpoint opts optional... */
		if (sscanf(line, "%*s %*s %*s %*s %511s", mp) == 1 &&
		    strcmp(mp, dir) == 0)
			found = strstr(line, " shared:") != NULL;
	}
	fclose(f);
	return found;
}

/*
 * ns_host_setup acts on the fixed /run/netns and /etc/netns and on the
 * namespace it runs in, so it runs in a child with a fresh network
 * namespace and tmpfs over /run and /etc of a private mount namespace:
 * the real /run, /etc and host network never see it.
 */
START_TEST(test_host_setup)
{
	pid_t	pid;
	int	st;

	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		struct in_addr	svc;
		char		err[256], out[1024], buf[16];
		int		i;

		if (unshare(CLONE_NEWNET | CLONE_NEWNS) == -1 ||
		    mount("", "/", "none", MS_REC | MS_PRIVATE, NULL) == -1 ||
		    mount("t", "/run", "tmpfs", 0, NULL) == -1 ||
		    mount("t", "/etc", "tmpfs", 0, NULL) == -1)
			_exit(20);
		inet_pton(AF_INET, "10.231.255.254", &svc);
		/* Twice: the second run must change nothing and succeed. */
		for (i = 0; i < 2; i++) {
			if (ns_host_setup(&svc, err, sizeof(err)) == -1) {
				fprintf(stderr, "ns_host_setup: %s\n", err);
				_exit(21);
			}
		}
		if (!mounted_shared("/run/netns"))
			_exit(22);
		if (access("/etc/netns", F_OK) == -1)
			_exit(23);
		if (run_in(-1, "ip -o -4 addr show dev lo", out,
		    sizeof(out)) != 0 ||
		    strstr(out, "inet 10.231.255.254/32 ") == NULL)
			_exit(24);
		/* Exactly one copy of the address after two runs. */
		if (strstr(strstr(out, "10.231.255.254/32") + 1,
		    "10.231.255.254/32") != NULL)
			_exit(25);
		if (run_in(-1, "ip -o link show dev lo", out,
		    sizeof(out)) != 0 || strstr(out, ",UP") == NULL)
			_exit(26);
		{
			int fd = open("/proc/sys/net/ipv4/ip_forward",
			    O_RDONLY);
			ssize_t n;

			if (fd == -1 || (n = read(fd, buf, 15)) <= 0)
				_exit(27);
			buf[n] = '\0';
			if (strcmp(buf, "1\n") != 0)
				_exit(28);
		}
		/* Bad input. */
		if (ns_host_setup(NULL, err, sizeof(err)) != -1 ||
		    errno != EINVAL)
			_exit(29);
		svc.s_addr = 0;
		if (ns_host_setup(&svc, err, sizeof(err)) != -1)
			_exit(30);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "child status %d (exit %d)", st, WEXITSTATUS(st));
}
END_TEST

START_TEST(test_dirs_setup)
{
	char	err[256] = "", nd[64], ed[64];

	/* Our own dirs were set up by the fixture: shared, and a second
	 * call is harmless. */
	ck_assert(mounted_shared(g_netns_dir));
	ck_assert_int_eq(ns_dirs_setup(g_netns_dir, g_etc_dir, err,
	    sizeof(err)), 0);
	ck_assert(mounted_shared(g_netns_dir));
	ck_assert_int_eq(ns_dirs_setup("relative", g_etc_dir, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ns_dirs_setup(g_netns_dir, "/etc/../x", err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	snprintf(nd, sizeof(nd), "%s/no/such", g_tmp);
	snprintf(ed, sizeof(ed), "%s/etc2", g_tmp);
	ck_assert_int_eq(ns_dirs_setup(nd, ed, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/* --------------------------------------------------------------- main */

static void
global_setup(void)
{
	char	err[256];

	snprintf(g_tmp, sizeof(g_tmp), "/tmp/check_ns.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(g_tmp));
	snprintf(g_netns_dir, sizeof(g_netns_dir), "%s/netns", g_tmp);
	snprintf(g_etc_dir, sizeof(g_etc_dir), "%s/etc", g_tmp);
	ck_assert_msg(ns_dirs_setup(g_netns_dir, g_etc_dir, err,
	    sizeof(err)) == 0, "ns_dirs_setup: %s", err);
}

static void
global_teardown(void)
{
	char	p[PATH_MAX];

	cleanup_all();
	(void)retired_settle();
	(void)umount2(g_netns_dir, MNT_DETACH);
	rmdir(g_netns_dir);
	rmdir(g_etc_dir);
	snprintf(p, sizeof(p), "%s/etc2", g_tmp);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/etc3", g_tmp);
	rmdir(p);
	rmdir(g_tmp);
}

static Suite *
ns_suite(void)
{
	Suite	*s = suite_create("ns");
	TCase	*core = tcase_create("Core");
	TCase	*lim = tcase_create("Limits");

	tcase_set_timeout(core, 120);
	tcase_set_timeout(lim, 60);
	tcase_add_unchecked_fixture(core, global_setup, global_teardown);
	tcase_add_checked_fixture(core, setup, teardown);
	tcase_add_test(core, test_spec_init);
	tcase_add_test(core, test_create_inspect);
	tcase_add_test(core, test_delete_twice);
	tcase_add_test(core, test_list);
	tcase_add_test(core, test_enter);
	tcase_add_test(core, test_host_setup);
	tcase_add_test(core, test_dirs_setup);
	tcase_add_test(core, test_loop50);
	tcase_add_test(core, test_many_alive);
	tcase_add_test(core, test_retired_link);
	tcase_add_test(core, test_delete_lost_pin);
	tcase_add_test(core, test_create_in_thread);
	tcase_add_test(core, test_spec_slash31);
	tcase_add_test(core, test_recycle);
	tcase_add_test(core, test_create_other_netns);
	tcase_add_loop_test(core, test_pool_table, 0,
	    sizeof(pool_cases) / sizeof(pool_cases[0]));
	suite_add_tcase(s, core);

	tcase_add_unchecked_fixture(lim, global_setup, global_teardown);
	tcase_add_checked_fixture(lim, setup, teardown);
	tcase_add_loop_test(lim, test_id_table, 0,
	    sizeof(id_cases) / sizeof(id_cases[0]));
	tcase_add_test(lim, test_id_null);
	tcase_add_test(lim, test_pool_null);
	tcase_add_loop_test(lim, test_spec_init_bad, 0,
	    sizeof(spec_bad) / sizeof(spec_bad[0]));
	tcase_add_loop_test(lim, test_spec_hostile, 0, SPOIL_N);
	tcase_add_test(lim, test_duplicate);
	tcase_add_test(lim, test_rollback);
	tcase_add_test(lim, test_rollback_late);
	tcase_add_test(lim, test_no_netns_dir);
	tcase_add_test(lim, test_leftovers);
	tcase_add_test(lim, test_etc_dir_edge);
	tcase_add_test(lim, test_no_private_procfs);
	tcase_add_test(lim, test_inet_conf);
	tcase_add_loop_test(lim, test_enter_bad, 0,
	    sizeof(enter_bad) / sizeof(enter_bad[0]));
	tcase_add_test(lim, test_enter_missing);
	suite_add_tcase(s, lim);
	return s;
}

int
main(void)
{
	SRunner	*sr;
	int	 failed;

	if (geteuid() != 0) {
		fprintf(stderr, "check_ns: needs root (namespaces, links)\n");
		return 1;
	}
	/* The whole run happens in a private network and mount namespace:
	 * its "host" side is a throwaway, the machine's is never touched. */
	if (unshare(CLONE_NEWNET | CLONE_NEWNS) == -1 ||
	    mount("", "/", "none", MS_REC | MS_SLAVE, NULL) == -1) {
		fprintf(stderr, "check_ns: private namespaces: %s\n",
		    strerror(errno));
		return 1;
	}
	snprintf(g_idp, sizeof(g_idp), "t%ld", (long)getpid());
	snprintf(g_ifp, sizeof(g_ifp), "sl-t%ld", (long)getpid() % 10000);
	inet_pton(AF_INET, "10.231.0.0", &g_pool);
	inet_pton(AF_INET, "10.231.255.254", &g_service);

	sr = srunner_create(ns_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
