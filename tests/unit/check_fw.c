/*
 * check_fw: the nftables enforcement (netns/fw*.c) against the real kernel.
 *
 * Each test runs in Check's forked child, which first moves into a new
 * network and mount namespace (so the host's ruleset, links and /run/netns
 * are never touched) and builds a tiny world with `ip`:
 *
 *   sandbox ns "sbx"  eth0 10.231.0.2/30 ---- sl-1 10.231.0.1/30  test ns
 *   (default via .1)                          (the gateway; service address
 *                                              10.231.255.254 on lo)
 *   internet ns "inet" eth0 203.0.113.2/24 -- up0 203.0.113.1/24
 *   lo: 198.51.100.10, .11, 192.0.2.10, 169.254.169.254, 172.16.5.5
 *
 * Outcomes are asserted with real traffic made by sockets opened inside the
 * namespaces (setns there and back). Everything dies with the child: the
 * namespaces are pinned only in the child's private mount namespace, and no
 * helper process is left running. Negative outcomes are either an immediate
 * reject (TCP RST / ICMP admin-prohibited: deterministic) or a drop, checked
 * with a bounded wait.
 */
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <netinet/udp.h>

#include <check.h>
#include <libmnl/libmnl.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "netns/fw.h"
#include "netns/fw_int.h"	/* white box: force the refresh mode */

#define SVC	"10.231.255.254"
#define SBX	"10.231.0.2"
#define GROUP	7
#define DROP_WAIT_MS	1200	/* a dropped SYN: no answer within this */

static int	have_world;
static int	ns_host = -1, ns_sbx = -1, ns_inet = -1;
static struct fw *fw;
static char	 err[256];

/* ---------------------------------------------------------------- world */

static int
sh(const char *fmt, ...)
{
	char	cmd[512];
	va_list	ap;
	int	st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void
must(const char *cmd)
{
	ck_assert_msg(sh("%s", cmd) == 0, "setup failed: %s", cmd);
}

static int
world_up(void)
{
	static const char *cmds[] = {
		"ip link set lo up",
		"ip netns add sbx",
		"ip netns add inet",
		"ip link add sl-1 type veth peer name eth0 netns sbx",
		"ip addr add 10.231.0.1/30 dev sl-1",
		"ip link set sl-1 up",
		"ip addr add " SVC "/32 dev lo",
		"ip -n sbx link set lo up",
		"ip -n sbx addr add " SBX "/30 dev eth0",
		"ip -n sbx link set eth0 up",
		"ip -n sbx route add default via 10.231.0.1",
		"ip link add up0 type veth peer name eth0 netns inet",
		"ip addr add 203.0.113.1/24 dev up0",
		"ip link set up0 up",
		"ip route add default via 203.0.113.2",
		"ip -n inet link set lo up",
		"ip -n inet addr add 203.0.113.2/24 dev eth0",
		"ip -n inet link set eth0 up",
		"ip -n inet addr add 198.51.100.10/32 dev lo",
		"ip -n inet addr add 198.51.100.11/32 dev lo",
		"ip -n inet addr add 192.0.2.10/32 dev lo",
		"ip -n inet addr add 169.254.169.254/32 dev lo",
		"ip -n inet addr add 172.16.5.5/32 dev lo",
		"echo 1 > /proc/sys/net/ipv4/ip_forward",
		NULL
	};
	size_t	i;

	if (geteuid() != 0) {
		fprintf(stderr, "check_fw: SKIP: needs root\n");
		return 0;
	}
	if (unshare(CLONE_NEWNET | CLONE_NEWNS) == -1) {
		fprintf(stderr, "check_fw: SKIP: unshare: %s\n",
		    strerror(errno));
		return 0;
	}
	/* Private mounts: the netns pins vanish with this process. */
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	(void)mkdir("/run/netns", 0755);
	ck_assert_int_eq(mount("tmpfs", "/run/netns", "tmpfs", 0, NULL), 0);
	for (i = 0; cmds[i] != NULL; i++)
		must(cmds[i]);
	ns_host = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	ns_sbx = open("/run/netns/sbx", O_RDONLY | O_CLOEXEC);
	ns_inet = open("/run/netns/inet", O_RDONLY | O_CLOEXEC);
	ck_assert(ns_host != -1 && ns_sbx != -1 && ns_inet != -1);
	return 1;
}

static struct fw_cidr
cidr(const char *s)
{
	struct fw_cidr	c;
	char		buf[64], *slash;

	memset(&c, 0, sizeof(c));
	snprintf(buf, sizeof(buf), "%s", s);
	slash = strchr(buf, '/');
	ck_assert(slash != NULL);
	*slash = '\0';
	c.prefix = (uint8_t)atoi(slash + 1);
	if (strchr(buf, ':') != NULL) {
		c.family = AF_INET6;
		ck_assert_int_eq(inet_pton(AF_INET6, buf, c.addr), 1);
	} else {
		c.family = AF_INET;
		ck_assert_int_eq(inet_pton(AF_INET, buf, c.addr), 1);
	}
	return c;
}

static struct fw_cidr	deny_list[8], private_list[8];

static void
config(struct fw_config *cfg, const char *table)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->table, sizeof(cfg->table), "%s", table);
	inet_pton(AF_INET, SVC, cfg->svc4);
	cfg->bridge_port = 8080;
	cfg->nflog_group = GROUP;
	cfg->pool = cidr("10.231.0.0/16");
	/* What the classifier would pass, minus the documentation ranges the
	 * fake internet lives in. */
	deny_list[0] = cidr("169.254.0.0/16");
	deny_list[1] = cidr("127.0.0.0/8");
	deny_list[2] = cidr("0.0.0.0/8");
	deny_list[3] = cidr("100.64.0.0/10");
	deny_list[4] = cidr("::ffff:0:0/96");
	deny_list[5] = cidr("fc00::/7");
	deny_list[6] = cidr("fe80::/10");
	deny_list[7] = cidr("224.0.0.0/4");
	cfg->deny = deny_list;
	cfg->ndeny = 8;
	private_list[0] = cidr("10.0.0.0/8");
	private_list[1] = cidr("172.16.0.0/12");
	private_list[2] = cidr("192.168.0.0/16");
	cfg->private = private_list;
	cfg->nprivate = 3;
}

static void
setup(void)
{
	struct fw_config	cfg;

	have_world = world_up();
	if (!have_world)
		return;
	fw = fw_new(err, sizeof(err));
	ck_assert_msg(fw != NULL, "fw_new: %s", err);
	config(&cfg, "sluice");
	ck_assert_msg(fw_init(fw, &cfg, 0, err, sizeof(err)) == 0,
	    "fw_init: %s", err);
}

static void
teardown(void)
{
	fw_free(fw);
	fw = NULL;
}

/* ------------------------------------------------------------- traffic */

/* A socket created inside namespace nsfd. */
static int
sock_in(int nsfd, int type, int proto)
{
	int	s;

	ck_assert_int_eq(setns(nsfd, CLONE_NEWNET), 0);
	s = socket(AF_INET, type | SOCK_CLOEXEC, proto);
	ck_assert_int_eq(setns(ns_host, CLONE_NEWNET), 0);
	ck_assert(s != -1);
	return s;
}

static struct sockaddr_in
sin_of(const char *addr, uint16_t port)
{
	struct sockaddr_in	sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	ck_assert_int_eq(inet_pton(AF_INET, addr, &sin.sin_addr), 1);
	return sin;
}

/* A listener in namespace nsfd on addr:port (TCP or UDP). */
static int
listen_in(int nsfd, int type, const char *addr, uint16_t port)
{
	struct sockaddr_in	sin = sin_of(addr, port);
	int			s, one = 1;

	s = sock_in(nsfd, type, 0);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_msg(bind(s, (struct sockaddr *)&sin, sizeof(sin)) == 0,
	    "bind %s:%u: %s", addr, port, strerror(errno));
	if (type == SOCK_STREAM)
		ck_assert_int_eq(listen(s, 64), 0);
	return s;
}

#define T_OK		1	/* connected */
#define T_REFUSED	0	/* immediate RST or ICMP error */
#define T_TIMEOUT	(-1)	/* nothing came back: dropped */

/* TCP connect from the sandbox (optionally bound to src). */
static int
tcp_try(const char *src, const char *dst, uint16_t port)
{
	struct sockaddr_in	sin = sin_of(dst, port), ssin;
	struct pollfd		pfd;
	socklen_t		len = sizeof(int);
	int			s, e = 0, r;

	s = sock_in(ns_sbx, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (src != NULL) {
		ssin = sin_of(src, 0);
		ck_assert_int_eq(bind(s, (struct sockaddr *)&ssin,
		    sizeof(ssin)), 0);
	}
	r = connect(s, (struct sockaddr *)&sin, sizeof(sin));
	if (r == 0) {
		close(s);
		return T_OK;
	}
	ck_assert_int_eq(errno, EINPROGRESS);
	pfd.fd = s;
	pfd.events = POLLOUT;
	r = poll(&pfd, 1, DROP_WAIT_MS);
	if (r == 0) {
		close(s);
		return T_TIMEOUT;
	}
	getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &len);
	close(s);
	return e == 0 ? T_OK : T_REFUSED;
}

/* Sends one UDP datagram from the sandbox to dst:port and reports whether
 * the listener `rx` got it (T_OK), the sandbox got an ICMP error
 * (T_REFUSED), or neither (T_TIMEOUT). */
static int
udp_try(int rx, const char *dst, uint16_t port)
{
	struct sockaddr_in	sin = sin_of(dst, port);
	struct pollfd		pfd[2];
	char			buf[64];
	int			s, r, i;

	s = sock_in(ns_sbx, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	ck_assert_int_eq(connect(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(send(s, "ping", 4, 0), 4);
	pfd[0].fd = rx;
	pfd[0].events = POLLIN;
	pfd[1].fd = s;
	pfd[1].events = POLLIN;
	for (i = 0; i < 3; i++) {
		r = poll(pfd, 2, DROP_WAIT_MS);
		if (r == 0)
			break;
		if (pfd[0].revents & POLLIN) {
			(void)recv(rx, buf, sizeof(buf), MSG_DONTWAIT);
			close(s);
			return T_OK;
		}
		if (pfd[1].revents & (POLLERR | POLLIN)) {
			if (recv(s, buf, sizeof(buf), MSG_DONTWAIT) == -1 &&
			    errno != EAGAIN) {
				close(s);
				return T_REFUSED;
			}
		}
	}
	close(s);
	return T_TIMEOUT;
}

static uint16_t
csum(const void *p, size_t len)
{
	const uint8_t	*b = p;
	uint32_t	 sum = 0;
	size_t		 i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (len & 1)
		sum += (uint32_t)(b[len - 1] << 8);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

/* ICMP echo from the sandbox over a raw socket: T_OK on an echo reply,
 * T_REFUSED on an ICMP error back, T_TIMEOUT on silence. */
static int
ping_try(const char *dst)
{
	struct sockaddr_in	sin = sin_of(dst, 0);
	struct icmphdr		ic;
	struct pollfd		pfd;
	uint8_t			buf[256];
	ssize_t			n;
	int			s, i;
	size_t			hl;

	s = sock_in(ns_sbx, SOCK_RAW, IPPROTO_ICMP);
	memset(&ic, 0, sizeof(ic));
	ic.type = ICMP_ECHO;
	ic.un.echo.id = htons(0x5151);
	ic.un.echo.sequence = htons(1);
	ic.checksum = csum(&ic, sizeof(ic));
	ck_assert(sendto(s, &ic, sizeof(ic), 0, (struct sockaddr *)&sin,
	    sizeof(sin)) == (ssize_t)sizeof(ic));
	pfd.fd = s;
	pfd.events = POLLIN;
	for (i = 0; i < 8; i++) {
		if (poll(&pfd, 1, DROP_WAIT_MS) <= 0)
			break;
		n = recv(s, buf, sizeof(buf), 0);
		if (n < 28)
			continue;
		hl = (size_t)(buf[0] & 0x0f) * 4;
		if ((size_t)n < hl + 8)
			continue;
		if (buf[hl] == ICMP_ECHOREPLY) {
			close(s);
			return T_OK;
		}
		if (buf[hl] == ICMP_DEST_UNREACH) {
			close(s);
			return T_REFUSED;
		}
	}
	close(s);
	return T_TIMEOUT;
}

/* A UDP datagram built by hand and sent on a raw IP_HDRINCL socket in the
 * sandbox (what a root-in-sandbox could do to skip socket-level rules). */
static void
raw_udp_send_from(const char *src, uint16_t sport, const char *dst,
    uint16_t dport)
{
	struct sockaddr_in	sin = sin_of(dst, 0);
	uint8_t			pkt[sizeof(struct iphdr) +
				    sizeof(struct udphdr) + 4];
	struct iphdr		*ip = (struct iphdr *)pkt;
	struct udphdr		*udp = (struct udphdr *)(pkt + sizeof(*ip));
	int			s;

	memset(pkt, 0, sizeof(pkt));
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons(sizeof(pkt));
	inet_pton(AF_INET, src, &ip->saddr);
	inet_pton(AF_INET, dst, &ip->daddr);
	udp->source = htons(sport);
	udp->dest = htons(dport);
	udp->len = htons(sizeof(struct udphdr) + 4);
	memcpy(pkt + sizeof(*ip) + sizeof(*udp), "raw!", 4);
	s = sock_in(ns_sbx, SOCK_RAW, IPPROTO_RAW);
	ck_assert(sendto(s, pkt, sizeof(pkt), 0, (struct sockaddr *)&sin,
	    sizeof(sin)) == (ssize_t)sizeof(pkt));
	close(s);
}

static void
raw_udp_send(const char *src, const char *dst, uint16_t dport)
{
	raw_udp_send_from(src, 40000, dst, dport);
}


/* TCP over IPv6 from the sandbox. */
static int
tcp6_try(const char *dst, uint16_t port)
{
	struct sockaddr_in6	sin6;
	struct pollfd		pfd;
	socklen_t		len = sizeof(int);
	int			s, e = 0, r;

	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons(port);
	ck_assert_int_eq(inet_pton(AF_INET6, dst, &sin6.sin6_addr), 1);
	ck_assert_int_eq(setns(ns_sbx, CLONE_NEWNET), 0);
	s = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(setns(ns_host, CLONE_NEWNET), 0);
	ck_assert(s != -1);
	r = connect(s, (struct sockaddr *)&sin6, sizeof(sin6));
	if (r == 0) {
		close(s);
		return T_OK;
	}
	ck_assert_int_eq(errno, EINPROGRESS);
	pfd.fd = s;
	pfd.events = POLLOUT;
	if (poll(&pfd, 1, DROP_WAIT_MS) == 0) {
		close(s);
		return T_TIMEOUT;
	}
	getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &len);
	close(s);
	return e == 0 ? T_OK : T_REFUSED;
}

static int
listen6_inet(uint16_t port)
{
	struct sockaddr_in6	sin6;
	int			s, one = 1;

	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons(port);
	ck_assert_int_eq(setns(ns_inet, CLONE_NEWNET), 0);
	s = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(setns(ns_host, CLONE_NEWNET), 0);
	ck_assert(s != -1);
	setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sin6, sizeof(sin6)), 0);
	ck_assert_int_eq(listen(s, 64), 0);
	return s;
}

static int
readable(int fd, int ms)
{
	struct pollfd	pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, ms) == 1;
}

static struct fw_rule
rule(const char *c, uint8_t proto, uint16_t lo, uint16_t hi)
{
	struct fw_cidr	x = cidr(c);
	struct fw_rule	r;

	memset(&r, 0, sizeof(r));
	r.family = x.family;
	memcpy(r.addr, x.addr, 16);
	r.prefix = x.prefix;
	r.proto = proto;
	r.port_lo = lo;
	r.port_hi = hi;
	return r;
}

static struct fw_sandbox
sandbox(void)
{
	struct fw_sandbox	sb;

	memset(&sb, 0, sizeof(sb));
	snprintf(sb.ifname, sizeof(sb.ifname), "sl-1");
	inet_pton(AF_INET, SBX, sb.addr4);
	sb.gen = 1;
	return sb;
}

static struct fw_elem
elem(const char *addr, uint8_t proto, uint16_t lo, uint16_t hi, uint32_t ms)
{
	struct fw_elem	e;

	memset(&e, 0, sizeof(e));
	snprintf(e.ifname, sizeof(e.ifname), "sl-1");
	e.family = AF_INET;
	ck_assert_int_eq(inet_pton(AF_INET, addr, e.addr), 1);
	e.proto = proto;
	e.port_lo = lo;
	e.port_hi = hi;
	e.timeout_ms = ms;
	return e;
}

static double
now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void
sleep_ms(long ms)
{
	struct timespec	ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

#define WORLD() do { if (!have_world) return; } while (0)

/* ------------------------------------------------------------ Core tests */

START_TEST(test_init_ruleset)
{
	WORLD();
	/* The table is there with its four base chains and the deny rule. */
	ck_assert_int_eq(sh("nft list chain inet sluice forward | "
	    "grep -q 'goto d_default'"), 0);
	ck_assert_int_eq(sh("nft list chain inet sluice input | "
	    "grep -q 'goto d_input'"), 0);
	ck_assert_int_eq(sh("nft list chain inet sluice d_default | "
	    "grep -q 'deny:default'"), 0);
	ck_assert_int_eq(sh("nft list chain inet sluice prerouting | "
	    "grep -q 'dnat'"), 0);
	ck_assert_int_eq(sh("nft list chain inet sluice postrouting | "
	    "grep -q 'masquerade'"), 0);
	/* The pool is an always-deny destination (no sandbox to sandbox). */
	ck_assert_int_eq(sh("nft list set inet sluice deny4 | "
	    "grep -q '10.231.0.0/16'"), 0);
	ck_assert_int_eq(fw_list_sandboxes(fw, NULL, NULL, err, sizeof(err)),
	    0);
}
END_TEST

START_TEST(test_allow_cidr_port)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];
	int			l443, l80;

	WORLD();
	l443 = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	l80 = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 80);
	/* Before the sandbox is registered nothing passes. */
	ck_assert_int_ne(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	allow[0] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_OK);
	/* Same address, other port; other address, same port: TCP reset. */
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 80), T_REFUSED);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 443), T_REFUSED);
	close(l443);
	close(l80);
}
END_TEST

START_TEST(test_always_deny_wins)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[2];
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 80);
	allow[0] = rule("0.0.0.0/0", IPPROTO_TCP, 80, 80);
	allow[1] = rule("169.254.169.254/32", IPPROTO_TCP, 80, 80);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 2, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 80), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "169.254.169.254", 80), T_REFUSED);
	/* A broad rule does not open private space either. */
	ck_assert_int_eq(tcp_try(NULL, "172.16.5.5", 80), T_REFUSED);
	close(l);
}
END_TEST

START_TEST(test_private_needs_rule)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[2];
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 80);
	allow[0] = rule("0.0.0.0/0", IPPROTO_TCP, 80, 80);
	allow[1] = rule("172.16.5.0/24", IPPROTO_TCP, 80, 80);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 2, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "172.16.5.5", 80), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 80), T_OK);
	close(l);
}
END_TEST

START_TEST(test_explicit_deny)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1], deny[1];
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	allow[0] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	deny[0] = rule("198.51.100.11/32", 0, 0, 0);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, deny, 1, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_REFUSED);
	close(l);
}
END_TEST

START_TEST(test_spoof_dropped)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	allow[0] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	must("ip -n sbx addr add 10.231.7.7/32 dev eth0");
	ck_assert_int_eq(tcp_try(SBX, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(tcp_try("10.231.7.7", "198.51.100.10", 443),
	    T_TIMEOUT);
	close(l);
}
END_TEST

START_TEST(test_raw_socket)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];
	int			u5000, u5001;

	WORLD();
	u5000 = listen_in(ns_inet, SOCK_DGRAM, "0.0.0.0", 5000);
	u5001 = listen_in(ns_inet, SOCK_DGRAM, "0.0.0.0", 5001);
	allow[0] = rule("198.51.100.10/32", IPPROTO_UDP, 5001, 5001);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	/* The hand-made packet to the allowed port passes (the raw path
	 * works), the same to another port and a spoofed source do not. */
	raw_udp_send(SBX, "198.51.100.10", 5001);
	ck_assert(readable(u5001, DROP_WAIT_MS));
	raw_udp_send(SBX, "198.51.100.10", 5000);
	ck_assert(!readable(u5000, DROP_WAIT_MS));
	{
		char b[16];
		(void)recv(u5001, b, sizeof(b), MSG_DONTWAIT);
	}
	raw_udp_send("10.231.9.9", "198.51.100.10", 5001);
	ck_assert(!readable(u5001, DROP_WAIT_MS));
	close(u5000);
	close(u5001);
}
END_TEST

/* A second sandbox, sl-2 10.231.0.6, for the tests between two. */
static void
second_sandbox(struct fw_sandbox *sb)
{
	must("ip netns add sbx2");
	must("ip link add sl-2 type veth peer name eth0 netns sbx2");
	must("ip addr add 10.231.0.5/30 dev sl-2");
	must("ip link set sl-2 up");
	must("ip -n sbx2 link set lo up");
	must("ip -n sbx2 addr add 10.231.0.6/30 dev eth0");
	must("ip -n sbx2 link set eth0 up");
	must("ip -n sbx2 route add default via 10.231.0.5");
	memset(sb, 0, sizeof(*sb));
	snprintf(sb->ifname, sizeof(sb->ifname), "sl-2");
	inet_pton(AF_INET, "10.231.0.6", sb->addr4);
	sb->gen = 2;
}

START_TEST(test_no_ride_on_other_sandbox_flow)
{
	struct fw_sandbox	sa = sandbox(), sb;
	struct fw_rule		allow[1];
	struct sockaddr_in	to = sin_of("198.51.100.10", 5001), from,
				bsin = sin_of("10.231.0.6", 40000);
	socklen_t		flen = sizeof(from);
	char			buf[64], natted[INET_ADDRSTRLEN];
	int			u, b, ns_b;

	WORLD();
	second_sandbox(&sb);
	/* Without strict rp_filter (an operator may have turned it off):
	 * the ruleset alone must keep sandbox A out of B's flows. */
	must("sysctl -q -w net.ipv4.conf.all.rp_filter=0");
	must("sysctl -q -w net.ipv4.conf.sl-1.rp_filter=0");
	allow[0] = rule("198.51.100.10/32", IPPROTO_UDP, 5001, 5001);
	ck_assert_msg(fw_sandbox_add(fw, &sa, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	/* Bound to the address B sends to, so that its reply comes from
	 * there and matches B's flow. */
	u = listen_in(ns_inet, SOCK_DGRAM, "198.51.100.10", 5001);
	ns_b = open("/run/netns/sbx2", O_RDONLY | O_CLOEXEC);
	ck_assert(ns_b != -1);
	b = sock_in(ns_b, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	ck_assert_int_eq(bind(b, (struct sockaddr *)&bsin, sizeof(bsin)), 0);
	ck_assert_int_eq(connect(b, (struct sockaddr *)&to, sizeof(to)), 0);
	ck_assert_int_eq(send(b, "out", 3, 0), 3);
	ck_assert(readable(u, DROP_WAIT_MS));
	ck_assert_int_eq(recvfrom(u, buf, sizeof(buf), 0,
	    (struct sockaddr *)&from, &flen), 3);
	inet_ntop(AF_INET, &from.sin_addr, natted, sizeof(natted));
	/* A forges the server's reply to B's masqueraded flow: conntrack
	 * calls it established and un-NATs it to B. It must not arrive. */
	raw_udp_send_from("198.51.100.10", 5001, natted,
	    ntohs(from.sin_port));
	ck_assert_msg(!readable(b, DROP_WAIT_MS),
	    "a packet forged in sandbox A reached sandbox B's flow");
	/* The real reply still does. */
	ck_assert_int_eq(sendto(u, "back", 4, 0, (struct sockaddr *)&from,
	    flen), 4);
	ck_assert(readable(b, DROP_WAIT_MS));
	ck_assert_int_eq(recv(b, buf, sizeof(buf), 0), 4);
	close(b);
	close(u);
	close(ns_b);
}
END_TEST

START_TEST(test_udp_icmp_default)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];
	int			u;

	WORLD();
	u = listen_in(ns_inet, SOCK_DGRAM, "0.0.0.0", 5000);
	allow[0] = rule("198.51.100.0/24", IPPROTO_TCP, 1, 65535);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	/* UDP (QUIC included) and ICMP are off unless allowed. */
	ck_assert_int_eq(udp_try(u, "198.51.100.10", 5000), T_REFUSED);
	ck_assert_int_eq(udp_try(u, "198.51.100.10", 443), T_REFUSED);
	ck_assert_int_eq(ping_try("198.51.100.10"), T_REFUSED);
	close(u);
}
END_TEST

START_TEST(test_icmp_allowed)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];

	WORLD();
	sb.icmp = 1;
	allow[0] = rule("198.51.100.10/32", IPPROTO_ICMP, 0, 0);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(ping_try("198.51.100.10"), T_OK);
	ck_assert_int_eq(ping_try("198.51.100.11"), T_REFUSED);
	ck_assert_int_eq(ping_try("169.254.169.254"), T_REFUSED);
}
END_TEST

START_TEST(test_stray_dns_dnat)
{
	struct fw_sandbox	sb = sandbox();
	struct sockaddr_in	peer;
	socklen_t		plen = sizeof(peer);
	char			buf[16], ip[32];
	int			u53, t53, c;

	WORLD();
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	u53 = listen_in(ns_host, SOCK_DGRAM, SVC, 53);
	t53 = listen_in(ns_host, SOCK_STREAM, SVC, 53);
	/* Direct and stray queries both land at the service address. */
	ck_assert_int_eq(udp_try(u53, SVC, 53), T_OK);
	ck_assert_int_eq(udp_try(u53, "8.8.8.8", 53), T_OK);
	ck_assert_int_eq(udp_try(u53, "198.51.100.10", 53), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 53), T_OK);
	c = accept(t53, (struct sockaddr *)&peer, &plen);
	ck_assert_int_ge(c, 0);
	inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
	ck_assert_str_eq(ip, SBX);
	close(c);
	(void)buf;
	close(u53);
	close(t53);
}
END_TEST

START_TEST(test_input_only_service)
{
	struct fw_sandbox	sb = sandbox();
	int			br, ssh, hostl;

	WORLD();
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	br = listen_in(ns_host, SOCK_STREAM, "0.0.0.0", 8080);
	ssh = listen_in(ns_host, SOCK_STREAM, "0.0.0.0", 22);
	hostl = listen_in(ns_host, SOCK_STREAM, "0.0.0.0", 9999);
	ck_assert_int_eq(tcp_try(NULL, SVC, 8080), T_OK);
	ck_assert_int_eq(tcp_try(NULL, SVC, 22), T_TIMEOUT);
	ck_assert_int_eq(tcp_try(NULL, "10.231.0.1", 8080), T_TIMEOUT);
	ck_assert_int_eq(tcp_try(NULL, "203.0.113.1", 9999), T_TIMEOUT);
	close(br);
	close(ssh);
	close(hostl);
}
END_TEST

START_TEST(test_dot_dropped)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];
	int			l443, l853;

	WORLD();
	l443 = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	l853 = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 853);
	allow[0] = rule("198.51.100.10/32", IPPROTO_TCP, 1, 65535);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 853), T_TIMEOUT);
	close(l443);
	close(l853);
}
END_TEST

START_TEST(test_learn_expires)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_elem		e;
	int64_t			exp;
	int			l, i;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_REFUSED);
	e = elem("198.51.100.11", IPPROTO_TCP, 443, 443, 1000);
	ck_assert_msg(fw_learn(fw, &e, 1, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_OK);
	exp = fw_elem_expiration(fw, &e, err, sizeof(err));
	ck_assert_msg(exp > 0 && exp <= 1000, "expiration %lld",
	    (long long)exp);
	/* Wait, bounded, until the kernel no longer lists the element. */
	for (i = 0; i < 40 && fw_elem_expiration(fw, &e, NULL, 0) >= 0; i++)
		sleep_ms(100);
	ck_assert_int_lt(i, 40);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_REFUSED);
	close(l);
}
END_TEST

/* The name gate's kernel half: a learned TCP flow waits in the queue
 * (never with bypass), so with nobody answering it never opens; a static
 * CIDR rule stays address only. */
START_TEST(test_gate_fail_closed)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_config	cfg;
	struct fw_rule		allow[1];
	struct fw_elem		e;
	int			l, q;

	WORLD();
	config(&cfg, "sluice");
	cfg.gate = 1;
	cfg.gate_queue = 7742;
	ck_assert_msg(fw_init(fw, &cfg, 0, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(sh("nft list chain inet sluice forward | "
	    "grep -q 'queue num 7742'"), 0);
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	allow[0] = rule("198.51.100.10/32", IPPROTO_TCP, 443, 443);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	e = elem("198.51.100.11", IPPROTO_TCP, 443, 443, 60000);
	ck_assert_msg(fw_learn(fw, &e, 1, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_TIMEOUT);
	/* A reader that never answers: the same. */
	q = fw_gate_open(7742, err, sizeof(err));
	ck_assert_msg(q >= 0, "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_TIMEOUT);
	close(q);
	close(l);
}
END_TEST

START_TEST(test_learn_refresh)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_elem		e[4];
	int64_t			exp;
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	e[0] = elem("198.51.100.11", IPPROTO_TCP, 443, 443, 1000);
	ck_assert_msg(fw_learn(fw, e, 1, err, sizeof(err)) == 0, "%s", err);
	sleep_ms(500);
	e[0].timeout_ms = 60000;
	/* Refresh together with new elements, in one batch. */
	e[1] = elem("198.51.100.10", IPPROTO_TCP, 443, 443, 60000);
	e[2] = elem("192.0.2.10", IPPROTO_UDP, 5000, 5010, 60000);
	e[3] = elem("192.0.2.10", IPPROTO_TCP, 8000, 8999, 60000);
	ck_assert_msg(fw_learn(fw, e, 4, err, sizeof(err)) == 0, "%s", err);
	exp = fw_elem_expiration(fw, &e[0], err, sizeof(err));
	ck_assert_msg(exp > 30000, "timeout not refreshed: %lld",
	    (long long)exp);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 4);
	sleep_ms(1200);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_OK);
	/* Unlearn is idempotent: a missing element is no error. */
	ck_assert_int_eq(fw_unlearn(fw, e, 4, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_unlearn(fw, e, 4, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_REFUSED);
	close(l);
}
END_TEST


/* Kernels before element timeout updates need add + delete + add in one
 * batch; this kernel has both paths, so force the old one and check it. */
START_TEST(test_learn_refresh_deladd)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_elem		e[2];
	int64_t			exp;
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)), 0);
	fw->refresh = FW_REFRESH_DELADD;
	e[0] = elem("198.51.100.11", IPPROTO_TCP, 443, 443, 1000);
	ck_assert_msg(fw_learn(fw, e, 1, err, sizeof(err)) == 0, "%s", err);
	exp = fw_elem_expiration(fw, &e[0], err, sizeof(err));
	ck_assert(exp > 0 && exp <= 1000);
	e[0].timeout_ms = 60000;
	e[1] = elem("198.51.100.10", IPPROTO_TCP, 443, 443, 60000);
	ck_assert_msg(fw_learn(fw, e, 2, err, sizeof(err)) == 0, "%s", err);
	exp = fw_elem_expiration(fw, &e[0], err, sizeof(err));
	ck_assert_msg(exp > 30000, "timeout not refreshed: %lld",
	    (long long)exp);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 2);
	sleep_ms(1200);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	close(l);
}
END_TEST

START_TEST(test_restrict)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[2], keep[1];
	struct fw_elem		e;
	int			l80, l443;

	WORLD();
	l80 = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 80);
	l443 = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	allow[0] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	allow[1] = rule("192.0.2.10/32", IPPROTO_TCP, 80, 80);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 2, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	e = elem("192.0.2.10", IPPROTO_TCP, 443, 443, 60000);
	ck_assert_int_eq(fw_learn(fw, &e, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 443), T_OK);
	keep[0] = rule("192.0.2.10/32", IPPROTO_TCP, 80, 80);
	ck_assert_msg(fw_restrict(fw, "sl-1", keep, 1, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 80), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_REFUSED);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 443), T_REFUSED);
	close(l80);
	close(l443);
}
END_TEST

/* A taint narrows, never widens: a broad keep rule (0.0.0.0/0 tcp 443)
 * still meets the sandbox's explicit denies and the private ranges, in
 * the policy's order (pol_egress_decide), and a keep rule lying inside a
 * private range opens that range, as an allow would. */
START_TEST(test_restrict_keeps_policy_order)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1], deny[1], keep[2];
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	allow[0] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	deny[0] = rule("198.51.100.11/32", 0, 0, 0);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, deny, 1, err,
	    sizeof(err)) == 0, "%s", err);
	keep[0] = rule("0.0.0.0/0", IPPROTO_TCP, 443, 443);
	ck_assert_msg(fw_restrict(fw, "sl-1", keep, 1, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 443), T_OK);
	/* The explicit deny wins over the keep list... */
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_REFUSED);
	/* ...the broad rule does not open a private range... */
	ck_assert_int_eq(tcp_try(NULL, "172.16.5.5", 443), T_REFUSED);
	/* ...and one inside it does, even next to the broad one. */
	keep[1] = rule("172.16.5.0/24", IPPROTO_TCP, 443, 443);
	ck_assert_msg(fw_restrict(fw, "sl-1", keep, 2, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "172.16.5.5", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_REFUSED);
	ck_assert_int_eq(fw_count_elems(fw, "pkeep4", "sl-1", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(fw, "keep4", "sl-1", err,
	    sizeof(err)), 1);
	/* Restricting again (a reload changed the keep list) replaces the
	 * list: what the new one drops stops at once. */
	keep[0] = rule("192.0.2.10/32", IPPROTO_TCP, 443, 443);
	ck_assert_msg(fw_restrict(fw, "sl-1", keep, 1, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_REFUSED);
	ck_assert_int_eq(tcp_try(NULL, "172.16.5.5", 443), T_REFUSED);
	ck_assert_int_eq(fw_count_elems(fw, "pkeep4", "sl-1", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(fw, "keep4", "sl-1", err,
	    sizeof(err)), 1);
	close(l);
}
END_TEST

/* A link whose @sbx_dispatch entry is missing (never added, or
 * removed) reaches no sandbox chain and meets the default denial: the
 * per-sandbox rules are only ever reached through that one lookup. */
START_TEST(test_dispatch_fail_closed)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	allow[0] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(sh("nft list map inet sluice sbx_dispatch | "
	    "grep -q '\"sl-1\" : jump sb_sl-1'"), 0);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(sh("nft delete element inet sluice sbx_dispatch "
	    "'{ \"sl-1\" }'"), 0);
	/* Chain and set are still there, but nothing leads to them. */
	ck_assert_int_eq(sh("nft list chain inet sluice sb_sl-1 "
	    ">/dev/null 2>&1"), 0);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_REFUSED);
	/* Deleting tolerates the missing entry and removes the rest. */
	ck_assert_msg(fw_sandbox_del(fw, &sb, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert_int_eq(sh("nft list chain inet sluice sb_sl-1 "
	    ">/dev/null 2>&1"), 1);
	ck_assert_int_eq(sh("nft list set inet sluice s_sl-1 "
	    ">/dev/null 2>&1"), 1);
	close(l);
}
END_TEST

/* fw_restrict puts its rules in once however often it is called;
 * fw_sandbox_update replaces the statics only, keeping the restriction,
 * the keep list and learned port ranges in the same per-sandbox set. */
START_TEST(test_restrict_twice_then_update)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1], keep[1], nallow[1];
	struct fw_elem		e;
	int			l443, l8443;

	WORLD();
	l443 = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	l8443 = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 8443);
	allow[0] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	e = elem("198.51.100.11", IPPROTO_TCP, 8000, 8999, 600000);
	e.flags = FW_ELEM_KEEP;
	ck_assert_msg(fw_learn(fw, &e, 1, err, sizeof(err)) == 0, "%s", err);
	keep[0] = rule("198.51.100.10/32", IPPROTO_TCP, 443, 443);
	ck_assert_msg(fw_restrict(fw, "sl-1", keep, 1, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_msg(fw_restrict(fw, "sl-1", keep, 1, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_int_eq(sh("test $(nft list chain inet sluice sb_sl-1 | "
	    "grep -c d_tainted) -eq 1"), 0);
	/* The narrowing comes before the established accept. */
	ck_assert_int_eq(sh("nft list chain inet sluice sb_sl-1 | "
	    "grep -n 'd_tainted\\|ct state' | head -n 1 | "
	    "grep -q d_tainted"), 0);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.20", 443), T_REFUSED);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 8443), T_OK);
	nallow[0] = rule("203.0.113.0/24", IPPROTO_TCP, 80, 80);
	ck_assert_msg(fw_sandbox_update(fw, &sb, nallow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(fw_count_elems(fw, "allow4", "sl-1", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(fw, "keep4", "sl-1", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(fw, "lrange4", "sl-1", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(fw, "lkrange4", "sl-1", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(fw, "restricted", "sl-1", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.20", 443), T_REFUSED);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 8443), T_OK);
	close(l443);
	close(l8443);
}
END_TEST

/* A table of the layout before per-sandbox chains (shared static
 * interval sets, no @sbx_dispatch) cannot be adopted: fw_init refuses it
 * and leaves it as it is; without FW_ADOPT it is replaced (what
 * gateway/sandbox.c does next). */
START_TEST(test_adopt_old_layout_refused)
{
	struct fw_config	cfg;
	struct fw_sandbox	sb = sandbox();

	WORLD();
	ck_assert_int_eq(sh("nft delete table inet sluice && "
	    "nft add table inet sluice && "
	    "nft add set inet sluice allow4 '{ type ifname . ipv4_addr . "
	    "inet_proto . inet_service; flags interval; }' && "
	    "nft add set inet sluice sbx4 '{ type ifname . ipv4_addr; }' && "
	    "nft add element inet sluice sbx4 '{ \"sl-9\" . 10.231.0.9 }'"),
	    0);
	fw_free(fw);
	fw = fw_new(err, sizeof(err));
	ck_assert(fw != NULL);
	config(&cfg, "sluice");
	errno = 0;
	ck_assert_int_eq(fw_init(fw, &cfg, FW_ADOPT, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_msg(strstr(err, "layout") != NULL, "%s", err);
	ck_assert_int_eq(sh("nft list set inet sluice allow4 "
	    ">/dev/null 2>&1"), 0);
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(sh("nft list set inet sluice allow4 "
	    ">/dev/null 2>&1"), 1);
	ck_assert_int_eq(fw_list_sandboxes(fw, NULL, NULL, err, sizeof(err)),
	    0);
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	/* And the new layout adopts. */
	ck_assert_int_eq(fw_init(fw, &cfg, FW_ADOPT, err, sizeof(err)), 1);
	ck_assert_int_eq(fw_list_sandboxes(fw, NULL, NULL, err, sizeof(err)),
	    1);
}
END_TEST

/* Every per-sandbox set; "learned4" also counts its port-range half
 * "lrange4", "lkeep4" its "lkrange4" (and the same for v6). */
static const char *persistent_sets[] = { "sbx4", "sbx6", "sbx_deny4",
    "sbx_deny6", "restricted", "keep4", "keep6", "allow4", "allow6",
    "pallow4", "pallow6", "learned4", "learned6", "lkeep4", "lkeep6",
    "icmp4", "quota", "sbx_gen", "sbx_own", NULL };

static int
count_all(const char *ifname)
{
	int	i, n, total = 0;

	for (i = 0; persistent_sets[i] != NULL; i++) {
		n = fw_count_elems(fw, persistent_sets[i], ifname, err,
		    sizeof(err));
		ck_assert_msg(n >= 0, "%s: %s", persistent_sets[i], err);
		total += n;
	}
	return total;
}

START_TEST(test_sandbox_del)
{
	struct fw_sandbox	sb = sandbox(), sb2 = sandbox();
	struct fw_rule		allow[4], deny[1];
	struct fw_elem		e[2];
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	sb.icmp = 1;
	sb.quota_bytes = 1 << 30;
	sb.has_addr6 = 1;
	inet_pton(AF_INET6, "fd00:5::2", sb.addr6);
	allow[0] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	allow[1] = rule("2001:db8::/32", IPPROTO_TCP, 443, 443);
	allow[2] = rule("10.9.0.0/16", IPPROTO_TCP, 22, 22);
	allow[3] = rule("198.51.100.10/32", IPPROTO_ICMP, 0, 0);
	deny[0] = rule("198.51.100.99/32", 0, 0, 0);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 4, deny, 1, err,
	    sizeof(err)) == 0, "%s", err);
	snprintf(sb2.ifname, sizeof(sb2.ifname), "sl-2");
	sb2.addr4[3] = 6;
	ck_assert_msg(fw_sandbox_add(fw, &sb2, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	e[0] = elem("192.0.2.10", IPPROTO_TCP, 443, 443, 60000);
	e[1] = elem("192.0.2.11", IPPROTO_TCP, 443, 443, 60000);
	e[1].family = AF_INET6;
	memset(e[1].addr, 0, sizeof(e[1].addr));
	inet_pton(AF_INET6, "2001:db8::1", e[1].addr);
	ck_assert_msg(fw_learn(fw, e, 2, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(fw_restrict(fw, "sl-1", allow, 2, err, sizeof(err)),
	    0);
	/* sbx4, sbx6, allow4, allow6, pallow4, sbx_deny4, icmp4, quota,
	 * learned4, learned6, restricted, keep4, keep6, sbx_gen, sbx_own */
	ck_assert_int_eq(count_all("sl-1"), 15);
	ck_assert_int_eq(count_all("sl-2"), 4);
	ck_assert_int_eq(fw_list_sandboxes(fw, NULL, NULL, err, sizeof(err)),
	    2);
	ck_assert_msg(fw_sandbox_del(fw, &sb, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert_int_eq(count_all("sl-1"), 0);
	ck_assert_int_eq(count_all("sl-2"), 4);
	ck_assert_int_eq(sh("nft list table inet sluice | grep -q 'sl-1'"),
	    1);
	ck_assert_int_eq(sh("nft list table inet sluice | grep -q 'q_sl-1'"),
	    1);
	ck_assert_int_eq(fw_list_sandboxes(fw, NULL, NULL, err, sizeof(err)),
	    1);
	ck_assert_int_ne(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	/* Deleting again finds nothing and is not an error. */
	ck_assert_int_eq(fw_sandbox_del(fw, &sb, err, sizeof(err)), 0);
	/* And the name can be registered again. */
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	close(l);
}
END_TEST

/* A DNS answer whose sandbox was deleted meanwhile: its elements must not
 * land keyed on the link name, which the next sandbox in that pool slot
 * gets (sl-<slot>), or that sandbox would reach what the old one learned.
 * fw_learn refuses the whole batch (ENOENT), whichever handle deleted the
 * sandbox, and a handle without an index alike. */
START_TEST(test_learn_after_del)
{
	struct fw_sandbox	sb = sandbox(), sb2 = sandbox();
	struct fw_elem		e[2];
	struct fw		*fw2;
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	snprintf(sb2.ifname, sizeof(sb2.ifname), "sl-2");
	sb2.addr4[3] = 6;
	ck_assert_msg(fw_sandbox_add(fw, &sb2, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_msg(fw_sandbox_del(fw, &sb, err, sizeof(err)) == 0, "%s",
	    err);
	/* One port (the shared hash) and a range (the sandbox's set). */
	e[0] = elem("198.51.100.11", IPPROTO_TCP, 443, 443, 60000);
	e[1] = elem("198.51.100.10", IPPROTO_TCP, 440, 450, 60000);
	errno = 0;
	ck_assert_int_eq(fw_learn(fw, &e[0], 1, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(fw_learn(fw, &e[1], 1, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	/* A batch with a live sandbox's element fails whole. */
	snprintf(e[1].ifname, sizeof(e[1].ifname), "sl-2");
	ck_assert_int_eq(fw_learn(fw, e, 2, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", NULL, err,
	    sizeof(err)), 0);
	/* A handle that never ran fw_init (no index) is held alike. */
	ck_assert_ptr_nonnull(fw2 = fw_new(err, sizeof(err)));
	ck_assert_int_eq(fw_learn(fw2, &e[0], 1, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_msg(fw_learn(fw2, &e[1], 1, err, sizeof(err)) == 0, "%s",
	    err);
	fw_free(fw2);
	/* The link's next owner reaches nothing the old one learned. */
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_REFUSED);
	/* Registered again, it learns. */
	ck_assert_msg(fw_learn(fw, &e[0], 1, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_OK);
	close(l);
}
END_TEST

/* A restricted (tainted) sandbox still reaches destinations
 * learned for its keep-list host names (FW_ELEM_KEEP), one port or a
 * range, whenever they were learned; everything else it learned is
 * rejected; unlearn and delete take the keep copies too. */
START_TEST(test_learn_keep)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_elem		e[4];
	int			l80, l443;

	WORLD();
	l80 = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 80);
	l443 = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)), 0);
	e[0] = elem("192.0.2.10", IPPROTO_TCP, 443, 443, 60000);
	e[0].flags = FW_ELEM_KEEP;
	e[1] = elem("198.51.100.10", IPPROTO_TCP, 443, 443, 60000);
	e[2] = elem("198.51.100.11", IPPROTO_TCP, 79, 81, 60000);
	e[2].flags = FW_ELEM_KEEP;
	ck_assert_msg(fw_learn(fw, e, 3, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 3);
	ck_assert_int_eq(fw_count_elems(fw, "lkeep4", "sl-1", err,
	    sizeof(err)), 2);
	ck_assert_int_eq(fw_count_elems(fw, "lkrange4", "sl-1", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 80), T_OK);
	/* Tainted with no static keep rule at all. */
	ck_assert_msg(fw_restrict(fw, "sl-1", NULL, 0, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 80), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_REFUSED);
	/* The range holds only its ports; 443 of a keep host is not kept. */
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_REFUSED);
	/* Learned as keep after the taint (the DNS proxy answers a keep
	 * name of a tainted sandbox): reachable at once. */
	e[3] = e[1];
	e[3].flags = FW_ELEM_KEEP;
	ck_assert_int_eq(fw_learn(fw, &e[3], 1, err, sizeof(err)), 0);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	/* Unlearn without the flag still removes the keep copy. */
	e[0].flags = 0;
	ck_assert_int_eq(fw_unlearn(fw, e, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 443), T_REFUSED);
	ck_assert_int_eq(fw_count_elems(fw, "lkeep4", "sl-1", err,
	    sizeof(err)), 2);
	ck_assert_int_eq(fw_sandbox_del(fw, &sb, err, sizeof(err)), 0);
	ck_assert_int_eq(count_all("sl-1"), 0);
	close(l80);
	close(l443);
}
END_TEST

/* One-port destinations live in the hash sets, ranges in the
 * interval sets; both refresh their timeout on re-add and report their
 * expiration; a mixed batch is one commit. */
START_TEST(test_learn_hash_and_range)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_elem		e[3];
	int64_t			exp;
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 8443);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)), 0);
	e[0] = elem("198.51.100.10", IPPROTO_TCP, 8443, 8443, 1000);
	e[1] = elem("198.51.100.11", IPPROTO_TCP, 8000, 8999, 1000);
	e[2] = elem("192.0.2.10", IPPROTO_UDP, 53, 53, 1000);
	ck_assert_msg(fw_learn(fw, e, 3, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(fw_count_elems(fw, "lrange4", "sl-1", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 3);
	ck_assert_int_eq(sh("nft list set inet sluice learned4 | "
	    "grep -q '198.51.100.10 . tcp . 8443'"), 0);
	/* Ranges sit in the sandbox's own set, under the learned range
	 * role (0x0000000a), the address in its IPv4-mapped form. */
	ck_assert_int_eq(sh("nft list set inet sluice s_sl-1 | grep -q "
	    "'0x0000000a . ::ffff:198.51.100.11 . tcp . 8000-'"), 0);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 8443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 8443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 8443), T_REFUSED);
	for (int i = 0; i < 2; i++) {
		exp = fw_elem_expiration(fw, &e[i], err, sizeof(err));
		ck_assert_msg(exp > 0 && exp <= 1000, "%d: %lld", i,
		    (long long)exp);
		e[i].timeout_ms = 600000;
	}
	ck_assert_int_eq(fw_learn(fw, e, 2, err, sizeof(err)), 0);
	for (int i = 0; i < 2; i++) {
		exp = fw_elem_expiration(fw, &e[i], err, sizeof(err));
		ck_assert_msg(exp > 300000, "%d not refreshed: %lld", i,
		    (long long)exp);
	}
	/* A port range and a single port of the same address are
	 * different elements: the expiration is asked of the right one. */
	e[0].port_hi = 8444;
	ck_assert_int_eq(fw_elem_expiration(fw, &e[0], NULL, 0), -1);
	ck_assert_int_eq(errno, ENOENT);
	/* The UDP element was not refreshed and goes. */
	for (int i = 0; i < 40 && fw_elem_expiration(fw, &e[2], NULL, 0) >= 0;
	    i++)
		sleep_ms(100);
	ck_assert_int_eq(fw_elem_expiration(fw, &e[2], NULL, 0), -1);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", "sl-1", err,
	    sizeof(err)), 2);
	close(l);
}
END_TEST

/* Learns, lets one expire, restricts, keeps; n_extra more destinations. */
static void
fill_sandbox(struct fw_sandbox *sb, int n_extra)
{
	struct fw_rule	allow[2], deny[1], keep[1];
	struct fw_elem	e[3], *many;
	int		i;

	sb->icmp = 1;
	sb->quota_bytes = 1 << 30;
	allow[0] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	allow[1] = rule("10.9.0.0/16", IPPROTO_TCP, 22, 22);
	deny[0] = rule("198.51.100.99/32", 0, 0, 0);
	ck_assert_msg(fw_sandbox_add(fw, sb, allow, 2, deny, 1, err,
	    sizeof(err)) == 0, "%s", err);
	e[0] = elem("192.0.2.10", IPPROTO_TCP, 443, 443, 600000);
	e[1] = elem("192.0.2.11", IPPROTO_TCP, 1000, 2000, 600000);
	e[1].flags = FW_ELEM_KEEP;
	e[2] = elem("192.0.2.12", IPPROTO_TCP, 443, 443, 300);	/* expires */
	e[2].flags = FW_ELEM_KEEP;
	for (i = 0; i < 3; i++)
		snprintf(e[i].ifname, sizeof(e[i].ifname), "%s", sb->ifname);
	ck_assert_msg(fw_learn(fw, e, 3, err, sizeof(err)) == 0, "%s", err);
	for (i = 0; i < 40 && fw_elem_expiration(fw, &e[2], NULL, 0) >= 0;
	    i++)
		sleep_ms(50);
	ck_assert_int_eq(fw_elem_expiration(fw, &e[2], NULL, 0), -1);
	keep[0] = rule("192.0.2.10/32", IPPROTO_TCP, 443, 443);
	ck_assert_int_eq(fw_restrict(fw, sb->ifname, keep, 1, err,
	    sizeof(err)), 0);
	if (n_extra <= 0)
		return;
	many = calloc((size_t)n_extra, sizeof(*many));
	ck_assert(many != NULL);
	for (i = 0; i < n_extra; i++) {
		many[i] = elem("203.0.113.1", IPPROTO_TCP, 443, 443, 600000);
		snprintf(many[i].ifname, sizeof(many[i].ifname), "%s",
		    sb->ifname);
		many[i].addr[2] = (uint8_t)(113 + i / 256);
		many[i].addr[3] = (uint8_t)i;
		if (i % 3 == 0)
			many[i].flags = FW_ELEM_KEEP;
		if (i % 5 == 0)
			many[i].port_hi = 444;
	}
	ck_assert_msg(fw_learn(fw, many, (size_t)n_extra, err,
	    sizeof(err)) == 0, "%s", err);
	free(many);
}

/* Deletion by key leaves nothing, whatever happened before:
 * learning, expiry, restrict, a restart (a new handle adopting the
 * table), more learning after it, more learned destinations than fit one
 * batch; the fallback paths (no DESTROY, a handle that never initialised)
 * leave nothing either. The other sandbox keeps all it had. */
START_TEST(test_del_leaves_nothing)
{
	struct fw_sandbox	sb = sandbox(), sb2 = sandbox(), sb3, sb4;
	struct fw_config	cfg;
	struct fw		*raw;
	struct fw_elem		e;
	int			before2;

	WORLD();
	snprintf(sb2.ifname, sizeof(sb2.ifname), "sl-2");
	sb2.addr4[3] = 6;
	fill_sandbox(&sb2, 0);
	before2 = count_all("sl-2");
	ck_assert_int_eq(before2, 13);

	/* Same handle, index path. */
	fill_sandbox(&sb, 0);
	ck_assert_int_gt(count_all("sl-1"), 10);
	ck_assert_int_eq(fw_sandbox_del(fw, &sb, err, sizeof(err)), 0);
	ck_assert_int_eq(fw->destroy, FW_DESTROY_YES);
	ck_assert(fw->idx_valid);
	ck_assert_int_eq(count_all("sl-1"), 0);
	ck_assert_int_eq(sh("nft list table inet sluice | grep -q 'sl-1'"), 1);

	/* After a restart: the new handle finds it all in one dump. */
	fill_sandbox(&sb, 600);
	fw_free(fw);
	fw = fw_new(err, sizeof(err));
	ck_assert(fw != NULL);
	config(&cfg, "sluice");
	ck_assert_int_eq(fw_init(fw, &cfg, FW_ADOPT, err, sizeof(err)), 1);
	ck_assert(fw->idx_valid);
	e = elem("198.51.100.12", IPPROTO_TCP, 443, 443, 600000);
	e.flags = FW_ELEM_KEEP;
	ck_assert_int_eq(fw_learn(fw, &e, 1, err, sizeof(err)), 0);
	ck_assert_int_gt(count_all("sl-1"), 600);
	ck_assert_int_eq(fw_sandbox_del(fw, &sb, err, sizeof(err)), 0);
	ck_assert_int_eq(count_all("sl-1"), 0);
	ck_assert_int_eq(sh("nft list table inet sluice | grep -q 'sl-1'"), 1);
	/* Again: nothing left is not an error. */
	ck_assert_int_eq(fw_sandbox_del(fw, &sb, err, sizeof(err)), 0);

	/* A kernel without DESTROY: the dump path. */
	sb3 = sandbox();
	snprintf(sb3.ifname, sizeof(sb3.ifname), "sl-3");
	sb3.addr4[3] = 10;
	fill_sandbox(&sb3, 40);
	fw->destroy = FW_DESTROY_NO;
	ck_assert_int_eq(fw_sandbox_del(fw, &sb3, err, sizeof(err)), 0);
	ck_assert_int_eq(count_all("sl-3"), 0);
	fw->destroy = FW_DESTROY_UNKNOWN;

	/* A handle that never ran fw_init knows nothing: it dumps. */
	sb4 = sandbox();
	snprintf(sb4.ifname, sizeof(sb4.ifname), "sl-4");
	sb4.addr4[3] = 14;
	fill_sandbox(&sb4, 10);
	raw = fw_new(err, sizeof(err));
	ck_assert(raw != NULL);
	ck_assert(!raw->idx_valid);
	ck_assert_int_eq(fw_sandbox_del(raw, &sb4, err, sizeof(err)), 0);
	fw_free(raw);
	ck_assert_int_eq(count_all("sl-4"), 0);

	/* The bystander is intact and still works. */
	ck_assert_int_eq(count_all("sl-2"), before2);
	ck_assert_int_eq(fw_list_sandboxes(fw, NULL, NULL, err, sizeof(err)),
	    1);
}
END_TEST

/* fw_sandbox_update through the index: old statics out, new in, the
 * learned and restricted state untouched, then deletion leaves nothing. */
START_TEST(test_update_then_del)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];
	int			l, n;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	fill_sandbox(&sb, 5);
	n = count_all("sl-1");
	allow[0] = rule("192.0.2.0/24", IPPROTO_TCP, 443, 443);
	sb.quota_bytes = 0;
	ck_assert_msg(fw_sandbox_update(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	/* 2 allows, 1 deny and the quota went; 1 allow came. */
	ck_assert_int_eq(count_all("sl-1"), n - 3);
	ck_assert_int_eq(fw_count_elems(fw, "allow4", "sl-1", err,
	    sizeof(err)), 1);
	ck_assert_int_eq(sh("nft list table inet sluice | grep -q 'q_sl-1'"),
	    1);
	ck_assert_int_eq(fw_sandbox_del(fw, &sb, err, sizeof(err)), 0);
	ck_assert_int_eq(count_all("sl-1"), 0);
	close(l);
}
END_TEST

static void
list_cb(const char *ifname, const uint8_t addr4[4], void *arg)
{
	char	*out = arg;
	char	 ip[32];

	inet_ntop(AF_INET, addr4, ip, sizeof(ip));
	snprintf(out, 64, "%s=%s", ifname, ip);
}

START_TEST(test_adopt_keeps_state)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];
	struct fw_elem		e;
	struct fw_config	cfg;
	char			seen[64] = "";
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	allow[0] = rule("198.51.100.10/32", IPPROTO_TCP, 443, 443);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)), 0);
	e = elem("192.0.2.10", IPPROTO_TCP, 443, 443, 600000);
	ck_assert_int_eq(fw_learn(fw, &e, 1, err, sizeof(err)), 0);
	/* The daemon goes away; the kernel keeps enforcing. */
	fw_free(fw);
	fw = NULL;
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_REFUSED);
	fw = fw_new(err, sizeof(err));
	ck_assert(fw != NULL);
	config(&cfg, "sluice");
	ck_assert_msg(fw_init(fw, &cfg, FW_ADOPT, err, sizeof(err)) == 1,
	    "%s", err);
	ck_assert_int_eq(fw_list_sandboxes(fw, list_cb, seen, err,
	    sizeof(err)), 1);
	ck_assert_str_eq(seen, "sl-1=" SBX);
	ck_assert_int_eq(count_all("sl-1"), 5);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 443), T_OK);
	/* Rules were rewritten, not duplicated. */
	ck_assert_int_eq(sh("test $(nft list chain inet sluice forward | "
	    "grep -c 'goto d_default') -eq 1"), 0);
	/* Without the flag the table is replaced: state is gone. */
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(count_all("sl-1"), 0);
	ck_assert_int_ne(tcp_try(NULL, "192.0.2.10", 443), T_OK);
	/* FW_ADOPT with no table creates it. */
	ck_assert_int_eq(fw_destroy(fw, NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_init(fw, &cfg, FW_ADOPT, err, sizeof(err)), 0);
	close(l);
}
END_TEST

START_TEST(test_replace_is_atomic)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];
	struct fw_config	cfg;
	struct fw_cidr		*many;
	size_t			i;
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	allow[0] = rule("198.51.100.10/32", IPPROTO_TCP, 443, 443);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)), 0);
	/* A replacement that cannot be committed (too many disjoint ranges
	 * for one batch) leaves the old table fully in place. */
	config(&cfg, "sluice");
	many = calloc(4096, sizeof(*many));
	ck_assert(many != NULL);
	for (i = 0; i < 4096; i++) {
		many[i].family = AF_INET6;
		many[i].addr[0] = 0x30;
		many[i].addr[1] = (uint8_t)(i >> 8);
		many[i].addr[2] = (uint8_t)i;
		many[i].addr[15] = 1;
		many[i].prefix = 128;
	}
	cfg.deny = many;
	cfg.ndeny = 4096;
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, E2BIG);
	free(many);
	ck_assert_int_eq(count_all("sl-1"), 4);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.11", 443), T_REFUSED);
	close(l);
}
END_TEST


START_TEST(test_ipv6)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[2];
	static const char	*cmds[] = {
		"echo 1 > /proc/sys/net/ipv6/conf/all/forwarding",
		"ip addr add 2001:db8:1::1/64 dev sl-1 nodad",
		"ip -n sbx addr add 2001:db8:1::2/64 dev eth0 nodad",
		"ip -n sbx -6 route add default via 2001:db8:1::1",
		"ip addr add 2001:db8:ff::1/64 dev up0 nodad",
		"ip -6 route add default via 2001:db8:ff::2",
		"ip -n inet addr add 2001:db8:ff::2/64 dev eth0 nodad",
		"ip -n inet addr add 2001:db8:2::10/128 dev lo",
		"ip -n inet addr add fd00:ec2::254/128 dev lo",
		"ip -n inet -6 route add default via 2001:db8:ff::1",
		NULL
	};
	int			l443, l80, i;

	WORLD();
	for (i = 0; cmds[i] != NULL; i++)
		must(cmds[i]);
	l443 = listen6_inet(443);
	l80 = listen6_inet(80);
	allow[0] = rule("2001:db8:2::/48", IPPROTO_TCP, 443, 443);
	allow[1] = rule("::/0", IPPROTO_TCP, 443, 443);
	/* A sandbox registered without IPv6 that turns it on gets nowhere. */
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, allow, 2, NULL, 0, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(tcp6_try("2001:db8:2::10", 443), T_TIMEOUT);
	ck_assert_int_eq(fw_sandbox_del(fw, &sb, err, sizeof(err)), 0);
	sb.has_addr6 = 1;
	inet_pton(AF_INET6, "2001:db8:1::2", sb.addr6);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 2, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp6_try("2001:db8:2::10", 443), T_OK);
	ck_assert_int_eq(tcp6_try("2001:db8:2::10", 80), T_REFUSED);
	/* Metadata on a ULA: always denied, whatever the allow rules. */
	ck_assert_int_eq(tcp6_try("fd00:ec2::254", 443), T_REFUSED);
	close(l443);
	close(l80);
}
END_TEST

/* fw_restrict on a handle whose index does not know the sandbox (another
 * handle registered it after this one adopted the table) must still write
 * the IPv6 narrowing rules: with IPv4 rules only, which test no family in
 * a chain believed IPv4-only, an IPv6 packet met the keep4 lookup with
 * bytes of its source address as destination, and a broad IPv4 keep rule
 * let every IPv6 destination through. */
START_TEST(test_restrict_v6_other_handle)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_config	cfg;
	struct fw_rule		allow[1], keep[1];
	struct fw		*fw2;
	static const char	*cmds[] = {
		"echo 1 > /proc/sys/net/ipv6/conf/all/forwarding",
		"ip addr add 2001:db8:1::1/64 dev sl-1 nodad",
		"ip -n sbx addr add 2001:db8:1::2/64 dev eth0 nodad",
		"ip -n sbx -6 route add default via 2001:db8:1::1",
		"ip addr add 2001:db8:ff::1/64 dev up0 nodad",
		"ip -6 route add default via 2001:db8:ff::2",
		"ip -n inet addr add 2001:db8:ff::2/64 dev eth0 nodad",
		"ip -n inet addr add 2001:db8:2::10/128 dev lo",
		"ip -n inet -6 route add default via 2001:db8:ff::1",
		NULL
	};
	int			l443, i;

	WORLD();
	for (i = 0; cmds[i] != NULL; i++)
		must(cmds[i]);
	l443 = listen6_inet(443);
	ck_assert_ptr_nonnull(fw2 = fw_new(err, sizeof(err)));
	config(&cfg, "sluice");
	ck_assert_msg(fw_init(fw2, &cfg, FW_ADOPT, err, sizeof(err)) == 1,
	    "%s", err);
	sb.has_addr6 = 1;
	inet_pton(AF_INET6, "2001:db8:1::2", sb.addr6);
	allow[0] = rule("::/0", IPPROTO_TCP, 443, 443);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	/* The first SYNs may wait for neighbour discovery: bounded retry. */
	for (i = 0; i < 3 && tcp6_try("2001:db8:2::10", 443) != T_OK; i++)
		;
	ck_assert_int_lt(i, 3);
	keep[0] = rule("0.0.0.0/0", IPPROTO_TCP, 443, 443);
	ck_assert_msg(fw_restrict(fw2, "sl-1", keep, 1, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(tcp6_try("2001:db8:2::10", 443), T_REFUSED);
	fw_free(fw2);
	close(l443);
}
END_TEST

START_TEST(test_restrict_cuts_open_flow)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1], keep[1];
	struct sockaddr_in	sin = sin_of("198.51.100.10", 443);
	char			b[16];
	int			l, c, a;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	allow[0] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)), 0);
	c = sock_in(ns_sbx, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&sin, sizeof(sin)), 0);
	a = accept(l, NULL, NULL);
	ck_assert_int_ge(a, 0);
	ck_assert_int_eq(send(c, "one", 3, 0), 3);
	ck_assert(readable(a, DROP_WAIT_MS));
	ck_assert_int_eq(recv(a, b, sizeof(b), 0), 3);
	/* Tainted: the open connection to a non-keep destination stops. */
	keep[0] = rule("192.0.2.10/32", IPPROTO_TCP, 80, 80);
	ck_assert_int_eq(fw_restrict(fw, "sl-1", keep, 1, err, sizeof(err)),
	    0);
	(void)send(c, "two", 3, MSG_NOSIGNAL);
	ck_assert(!readable(a, DROP_WAIT_MS));
	close(a);
	close(c);
	close(l);
}
END_TEST


/* Creates table inet `name` owned by a new netlink socket (kept open, so
 * the kernel refuses changes from anyone else). Returns the socket. */
static struct mnl_socket *
owned_table(const char *name)
{
	struct mnl_socket	*nl;
	struct mnl_nlmsg_batch	*b;
	struct nftnl_table	*t;
	struct nlmsghdr		*nlh;
	static char		 buf[8192];
	char			 rbuf[8192];
	ssize_t			 n;

	nl = mnl_socket_open(NETLINK_NETFILTER);
	ck_assert(nl != NULL);
	ck_assert_int_eq(mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID), 0);
	t = nftnl_table_alloc();
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, name);
	nftnl_table_set_u32(t, NFTNL_TABLE_FLAGS, NFT_TABLE_F_OWNER);
	b = mnl_nlmsg_batch_start(buf, sizeof(buf));
	nftnl_batch_begin(mnl_nlmsg_batch_current(b), 1);
	mnl_nlmsg_batch_next(b);
	nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(b),
	    NFT_MSG_NEWTABLE, NFPROTO_INET, NLM_F_CREATE | NLM_F_ACK, 2);
	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	mnl_nlmsg_batch_next(b);
	nftnl_batch_end(mnl_nlmsg_batch_current(b), 3);
	mnl_nlmsg_batch_next(b);
	ck_assert(mnl_socket_sendto(nl, mnl_nlmsg_batch_head(b),
	    mnl_nlmsg_batch_size(b)) > 0);
	mnl_nlmsg_batch_stop(b);
	n = mnl_socket_recvfrom(nl, rbuf, sizeof(rbuf));
	ck_assert(n > 0);
	ck_assert_int_ge(mnl_cb_run(rbuf, (size_t)n, 0, mnl_socket_get_portid(nl),
	    NULL, NULL), 0);
	return nl;
}

START_TEST(test_replace_refused_by_kernel)
{
	struct fw_config	cfg;
	struct mnl_socket	*owner;

	WORLD();
	/* The kernel refuses the replacement half way (the table belongs to
	 * another process); nothing of the batch may remain. */
	owner = owned_table("taken");
	config(&cfg, "taken");
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(sh("nft list table inet taken | grep -q chain"), 1);
	ck_assert_int_eq(sh("nft list table inet taken >/dev/null"), 0);
	/* Our own table was not touched by the failed call. */
	ck_assert_int_eq(sh("nft list chain inet sluice forward | "
	    "grep -q 'goto d_default'"), 0);
	mnl_socket_close(owner);
	/* Once the owner is gone the kernel drops its table; init works. */
	ck_assert_msg(fw_init(fw, &cfg, 0, err, sizeof(err)) == 0, "%s", err);
}
END_TEST


START_TEST(test_uplink_masquerade)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];
	struct fw_config	cfg;
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 443);
	allow[0] = rule("198.51.100.10/32", IPPROTO_TCP, 443, 443);
	config(&cfg, "sluice");
	snprintf(cfg.uplink, sizeof(cfg.uplink), "up0");
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_OK);
	/* Another uplink name: no masquerade on up0, and the internet has
	 * no route back to the pool, so the allowed flow goes nowhere. */
	snprintf(cfg.uplink, sizeof(cfg.uplink), "wan9");
	ck_assert_int_eq(fw_init(fw, &cfg, FW_ADOPT, err, sizeof(err)), 1);
	ck_assert_int_eq(tcp_try(NULL, "198.51.100.10", 443), T_TIMEOUT);
	close(l);
}
END_TEST

struct seen {
	int			n;
	struct fw_denied	d[16];
};

static void
nflog_cb(const struct fw_denied *d, void *arg)
{
	struct seen	*s = arg;

	if (s->n < 16)
		s->d[s->n++] = *d;
}

START_TEST(test_nflog)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_nflog		*nl;
	struct seen		 s;
	char			 src[32], dst[32];
	int			 i, found = 0;

	WORLD();
	nl = fw_nflog_open(GROUP, err, sizeof(err));
	ck_assert_msg(nl != NULL, "%s", err);
	ck_assert_int_ge(fw_nflog_fd(nl), 0);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 4444), T_REFUSED);
	memset(&s, 0, sizeof(s));
	for (i = 0; i < 10 && s.n == 0; i++) {
		if (readable(fw_nflog_fd(nl), 500))
			ck_assert_int_ge(fw_nflog_read(nl, nflog_cb, &s), 0);
	}
	for (i = 0; i < s.n; i++) {
		inet_ntop(AF_INET, s.d[i].src, src, sizeof(src));
		inet_ntop(AF_INET, s.d[i].dst, dst, sizeof(dst));
		if (strcmp(s.d[i].ifname, "sl-1") == 0 &&
		    strcmp(s.d[i].prefix, "deny:default") == 0 &&
		    s.d[i].family == AF_INET && s.d[i].proto == IPPROTO_TCP &&
		    strcmp(src, SBX) == 0 && strcmp(dst, "192.0.2.10") == 0 &&
		    s.d[i].dport == 4444 && s.d[i].sport != 0)
			found = 1;
	}
	ck_assert_msg(found, "no matching nflog record (%d seen)", s.n);
	/* Nothing queued: a read returns 0 without blocking. */
	ck_assert_int_eq(fw_nflog_read(nl, nflog_cb, &s), 0);
	fw_nflog_free(nl);
}
END_TEST

START_TEST(test_quota)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		allow[1];
	struct sockaddr_in	sin = sin_of("198.51.100.10", 5001);
	char			pkt[1000], b[1500];
	int			u, s, i, got = 0;

	WORLD();
	u = listen_in(ns_inet, SOCK_DGRAM, "0.0.0.0", 5001);
	sb.quota_bytes = 20000;
	allow[0] = rule("198.51.100.10/32", IPPROTO_UDP, 5001, 5001);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)), 0);
	memset(pkt, 'x', sizeof(pkt));
	s = sock_in(ns_sbx, SOCK_DGRAM, 0);
	for (i = 0; i < 40; i++)
		(void)sendto(s, pkt, sizeof(pkt), 0, (struct sockaddr *)&sin,
		    sizeof(sin));
	while (readable(u, 300) && got < 100)
		if (recv(u, b, sizeof(b), 0) > 0)
			got++;
	/* 1028 bytes per datagram on the wire: about 19 fit in 20000. */
	ck_assert_msg(got >= 15 && got <= 20, "%d datagrams passed", got);
	close(s);
	close(u);
}
END_TEST

/* ------------------------------------------- hostile flows (generations) */

/*
 * An ICMP port-unreachable sent from namespace nsfd over a raw socket:
 * outer src -> dst, quoting a UDP packet isrc:isport -> idst:idport and
 * then the bytes of marker (what an exfiltration would carry).
 */
static void
raw_icmp_unreach(int nsfd, const char *src, const char *dst,
    const char *isrc, uint16_t isport, const char *idst, uint16_t idport,
    const char *marker)
{
	struct sockaddr_in	sin = sin_of(dst, 0);
	uint8_t			pkt[256];
	struct iphdr		*ip = (struct iphdr *)pkt, *in;
	struct icmphdr		*ic;
	struct udphdr		*udp;
	size_t			mlen = strlen(marker), len;
	int			s;

	memset(pkt, 0, sizeof(pkt));
	len = sizeof(*ip) + sizeof(*ic) + sizeof(*in) + sizeof(*udp) + mlen;
	ck_assert(len <= sizeof(pkt));
	ic = (struct icmphdr *)(pkt + sizeof(*ip));
	in = (struct iphdr *)(pkt + sizeof(*ip) + sizeof(*ic));
	udp = (struct udphdr *)((uint8_t *)in + sizeof(*in));
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_ICMP;
	ip->tot_len = htons((uint16_t)len);
	inet_pton(AF_INET, src, &ip->saddr);
	inet_pton(AF_INET, dst, &ip->daddr);
	ic->type = ICMP_DEST_UNREACH;
	ic->code = ICMP_PORT_UNREACH;
	in->version = 4;
	in->ihl = 5;
	in->ttl = 60;
	in->protocol = IPPROTO_UDP;
	in->tot_len = htons((uint16_t)(sizeof(*in) + sizeof(*udp) + mlen));
	inet_pton(AF_INET, isrc, &in->saddr);
	inet_pton(AF_INET, idst, &in->daddr);
	in->check = csum(in, sizeof(*in));
	udp->source = htons(isport);
	udp->dest = htons(idport);
	udp->len = htons((uint16_t)(sizeof(*udp) + mlen));
	memcpy((uint8_t *)udp + sizeof(*udp), marker, mlen);
	/* Conntrack checks the ICMP checksum before it relates anything. */
	ic->checksum = csum(ic, len - sizeof(*ip));
	s = sock_in(nsfd, SOCK_RAW, IPPROTO_RAW);
	ck_assert(sendto(s, pkt, len, 0, (struct sockaddr *)&sin,
	    sizeof(sin)) == (ssize_t)len);
	close(s);
}

/* Whether an ICMP packet carrying marker reaches raw socket rx in time. */
static int
icmp_seen(int rx, const char *marker, int ms)
{
	uint8_t	buf[512];
	ssize_t	n;
	int	i;

	for (i = 0; i < 8 && readable(rx, ms); i++) {
		n = recv(rx, buf, sizeof(buf), 0);
		if (n > 0 && memmem(buf, (size_t)n, marker, strlen(marker)))
			return 1;
	}
	return 0;
}

/* B's UDP flow from 10.231.0.6:40000 to 198.51.100.10:5001, answered so
 * that conntrack calls it established. Returns B's socket; *u the far
 * end's. */
static int
b_flow(int ns_b, int *u)
{
	struct sockaddr_in	to = sin_of("198.51.100.10", 5001), from,
				bsin = sin_of("10.231.0.6", 40000);
	socklen_t		flen = sizeof(from);
	char			buf[64];
	int			b;

	*u = listen_in(ns_inet, SOCK_DGRAM, "198.51.100.10", 5001);
	b = sock_in(ns_b, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	ck_assert_int_eq(bind(b, (struct sockaddr *)&bsin, sizeof(bsin)), 0);
	ck_assert_int_eq(connect(b, (struct sockaddr *)&to, sizeof(to)), 0);
	ck_assert_int_eq(send(b, "out", 3, 0), 3);
	ck_assert(readable(*u, DROP_WAIT_MS));
	ck_assert_int_eq(recvfrom(*u, buf, sizeof(buf), 0,
	    (struct sockaddr *)&from, &flen), 3);
	ck_assert_int_eq(sendto(*u, "back", 4, 0, (struct sockaddr *)&from,
	    flen), 4);
	ck_assert(readable(b, DROP_WAIT_MS));
	ck_assert_int_eq(recv(b, buf, sizeof(buf), 0), 4);
	return b;
}

/*
 * Sandbox A, which may send no UDP at
 * all, quotes sandbox B's live UDP flow in an ICMP error of its own.
 * Conntrack calls that error related to B's flow; accepted as such, it
 * would carry A's payload to any host B talks to. Only B's own errors
 * about its own flow pass.
 */
START_TEST(test_related_icmp_own_flow_only)
{
	struct fw_sandbox	sa = sandbox(), sb;
	struct fw_rule		allow[1];
	int			u, b, ns_b, rx;

	WORLD();
	second_sandbox(&sb);
	allow[0] = rule("198.51.100.10/32", IPPROTO_UDP, 5001, 5001);
	ck_assert_msg(fw_sandbox_add(fw, &sa, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ns_b = open("/run/netns/sbx2", O_RDONLY | O_CLOEXEC);
	ck_assert(ns_b != -1);
	b = b_flow(ns_b, &u);
	rx = sock_in(ns_inet, SOCK_RAW, IPPROTO_ICMP);
	/* A, with its own source address (anti-spoofing passes it). */
	raw_icmp_unreach(ns_sbx, SBX, "198.51.100.10", "198.51.100.10", 5001,
	    "10.231.0.6", 40000, "EXFIL-from-A");
	ck_assert_msg(!icmp_seen(rx, "EXFIL-from-A", DROP_WAIT_MS),
	    "sandbox A's ICMP error quoting B's flow left the gateway");
	/* B's error about its own flow is its own related traffic. */
	raw_icmp_unreach(ns_b, "10.231.0.6", "198.51.100.10", "198.51.100.10",
	    5001, "10.231.0.6", 40000, "own-error-of-B");
	ck_assert_msg(icmp_seen(rx, "own-error-of-B", DROP_WAIT_MS),
	    "B's own related ICMP error did not pass");
	close(rx);
	close(b);
	close(u);
	close(ns_b);
}
END_TEST

/*
 * A flow a removed sandbox left in conntrack never passes for the
 * next sandbox on the same link and address: its generation differs.
 * (Were the generation reused, it would: the last step shows that.)
 */
START_TEST(test_leftover_flow_other_generation)
{
	struct fw_sandbox	sa = sandbox(), sb = sandbox();
	struct fw_rule		allow[1];
	struct sockaddr_in	to = sin_of("198.51.100.10", 5001), from,
				asin = sin_of(SBX, 40001);
	socklen_t		flen = sizeof(from);
	char			buf[64];
	int			u, a, one = 1;

	WORLD();
	allow[0] = rule("198.51.100.10/32", IPPROTO_UDP, 5001, 5001);
	ck_assert_msg(fw_sandbox_add(fw, &sa, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	u = listen_in(ns_inet, SOCK_DGRAM, "198.51.100.10", 5001);
	a = sock_in(ns_sbx, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	setsockopt(a, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(a, (struct sockaddr *)&asin, sizeof(asin)), 0);
	ck_assert_int_eq(connect(a, (struct sockaddr *)&to, sizeof(to)), 0);
	ck_assert_int_eq(send(a, "a1", 2, 0), 2);
	ck_assert(readable(u, DROP_WAIT_MS));
	ck_assert_int_eq(recvfrom(u, buf, sizeof(buf), 0,
	    (struct sockaddr *)&from, &flen), 2);
	ck_assert_int_eq(sendto(u, "back", 4, 0, (struct sockaddr *)&from,
	    flen), 4);
	ck_assert(readable(a, DROP_WAIT_MS));
	ck_assert_int_eq(recv(a, buf, sizeof(buf), 0), 4);
	/* A goes (its conntrack entry stays); B, allowed no UDP, takes the
	 * same link and address and sends on A's 5-tuple. */
	ck_assert_int_eq(fw_sandbox_del(fw, &sa, err, sizeof(err)), 0);
	sb.gen = 2;
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(send(a, "b1", 2, 0), 2);
	ck_assert_msg(!readable(u, DROP_WAIT_MS),
	    "the new sandbox rode the old one's flow");
	/* The same sandbox again with the old generation: it would. */
	ck_assert_int_eq(fw_sandbox_del(fw, &sb, err, sizeof(err)), 0);
	sb.gen = 1;
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	{
		/* The refusal of "b1" left an error on the socket. */
		int e = 0;
		socklen_t el = sizeof(e);

		(void)getsockopt(a, SOL_SOCKET, SO_ERROR, &e, &el);
	}
	ck_assert_int_eq(send(a, "b2", 2, 0), 2);
	ck_assert(readable(u, DROP_WAIT_MS));
	/* Generation 0 is no generation. */
	sb.gen = 0;
	snprintf(sb.ifname, sizeof(sb.ifname), "sl-3");
	errno = 0;
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	close(a);
	close(u);
}
END_TEST

/*
 * The service address answers sandbox links only. A peer on the
 * uplink that forges a sandbox's source (with rp_filter loose, as Ubuntu
 * sets all.rp_filter=2), one that does not, and the host itself (lo) all
 * reach nothing there. And a sandbox cannot ride another's established
 * flow to the service: anti-spoofing comes first in input too.
 */
START_TEST(test_service_only_from_sandboxes)
{
	struct fw_sandbox	sa = sandbox(), sb;
	struct sockaddr_in	svc = sin_of(SVC, 53), from,
				forged = sin_of(SBX, 40002),
				peer = sin_of("203.0.113.2", 40003);
	socklen_t		flen = sizeof(from);
	char			buf[64];
	int			rx, s, a, ns_b;

	WORLD();
	second_sandbox(&sb);
	must("sysctl -q -w net.ipv4.conf.all.rp_filter=2");
	must("sysctl -q -w net.ipv4.conf.up0.rp_filter=2");
	must("sysctl -q -w net.ipv4.conf.sl-2.rp_filter=0");
	must("ip -n inet route add 10.231.0.0/16 via 203.0.113.1");
	must("ip -n inet addr add " SBX "/32 dev lo");
	ck_assert_msg(fw_sandbox_add(fw, &sa, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	rx = listen_in(ns_host, SOCK_DGRAM, SVC, 53);
	/* From the sandbox: answered (and established, for below). */
	a = sock_in(ns_sbx, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	ck_assert_int_eq(bind(a, (struct sockaddr *)&forged, sizeof(forged)),
	    0);
	ck_assert_int_eq(connect(a, (struct sockaddr *)&svc, sizeof(svc)), 0);
	ck_assert_int_eq(send(a, "q1", 2, 0), 2);
	ck_assert(readable(rx, DROP_WAIT_MS));
	ck_assert_int_eq(recvfrom(rx, buf, sizeof(buf), 0,
	    (struct sockaddr *)&from, &flen), 2);
	ck_assert_int_eq(sendto(rx, "a1", 2, 0, (struct sockaddr *)&from,
	    flen), 2);
	ck_assert(readable(a, DROP_WAIT_MS));
	/* From the uplink, as the sandbox (the same 5-tuple, even). */
	s = sock_in(ns_inet, SOCK_DGRAM, 0);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&forged, sizeof(forged)),
	    0);
	ck_assert_int_eq(sendto(s, "q2", 2, 0, (struct sockaddr *)&svc,
	    sizeof(svc)), 2);
	close(s);
	ck_assert_msg(!readable(rx, DROP_WAIT_MS),
	    "a query forged on the uplink reached the service address");
	/* From the uplink as itself. */
	s = sock_in(ns_inet, SOCK_DGRAM, 0);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&peer, sizeof(peer)), 0);
	ck_assert_int_eq(sendto(s, "q3", 2, 0, (struct sockaddr *)&svc,
	    sizeof(svc)), 2);
	close(s);
	ck_assert(!readable(rx, DROP_WAIT_MS));
	ck_assert_int_eq(tcp_try(NULL, SVC, 8080) == T_OK, 0);
	/* From the host itself, over lo. */
	s = sock_in(ns_host, SOCK_DGRAM, 0);
	ck_assert_int_eq(sendto(s, "q4", 2, 0, (struct sockaddr *)&svc,
	    sizeof(svc)), 2);
	close(s);
	ck_assert(!readable(rx, DROP_WAIT_MS));
	/* B forges A's source on A's established flow to the service. */
	ns_b = open("/run/netns/sbx2", O_RDONLY | O_CLOEXEC);
	ck_assert(ns_b != -1);
	{
		int sv = ns_sbx;

		ns_sbx = ns_b;
		raw_udp_send_from(SBX, 40002, SVC, 53);
		ns_sbx = sv;
	}
	ck_assert_msg(!readable(rx, DROP_WAIT_MS),
	    "a packet forged in B on A's flow reached the service");
	/* A's own flow still works. */
	ck_assert_int_eq(send(a, "q5", 2, 0), 2);
	ck_assert(readable(rx, DROP_WAIT_MS));
	close(ns_b);
	close(a);
	close(rx);
}
END_TEST

/* Packets of counter FW_UNLOGGED. */
static long
unlogged(void)
{
	FILE	*p;
	long	 n = -1;

	p = popen("nft list counter inet sluice " FW_UNLOGGED " | "
	    "sed -n 's/.*packets \\([0-9]*\\).*/\\1/p'", "r");
	ck_assert(p != NULL);
	if (fscanf(p, "%ld", &n) != 1)
		n = -1;
	pclose(p);
	return n;
}

struct logcount {
	int	n[2];	/* sl-1, sl-2 */
};

static void
logcount_cb(const struct fw_denied *d, void *arg)
{
	struct logcount	*c = arg;

	if (strcmp(d->ifname, "sl-1") == 0)
		c->n[0]++;
	else if (strcmp(d->ifname, "sl-2") == 0)
		c->n[1]++;
}

/*
 * What one sandbox can make nflog carry is bounded (a burst,
 * then FW_LOG_RATE a second), every packet is denied all the same, what
 * was not logged is counted, and the budget is the sandbox's own: another
 * sandbox is still logged meanwhile.
 */
START_TEST(test_log_budget)
{
	struct fw_sandbox	sa = sandbox(), sb;
	struct fw_nflog		*nl;
	struct logcount		 c = { { 0, 0 } };
	struct sockaddr_in	 to = sin_of("192.0.2.10", 4444);
	double			 t0, secs;
	int			 s, u, i, ns_b;

	WORLD();
	second_sandbox(&sb);
	nl = fw_nflog_open(GROUP, err, sizeof(err));
	ck_assert_msg(nl != NULL, "%s", err);
	ck_assert_int_eq(fw_sandbox_add(fw, &sa, NULL, 0, NULL, 0, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(unlogged(), 0);
	u = listen_in(ns_inet, SOCK_DGRAM, "192.0.2.10", 4444);
	s = sock_in(ns_sbx, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	t0 = now_us();
	for (i = 0; i < 400; i++)
		(void)sendto(s, "x", 1, 0, (struct sockaddr *)&to, sizeof(to));
	close(s);
	/* B, meanwhile, has a budget of its own. */
	ns_b = open("/run/netns/sbx2", O_RDONLY | O_CLOEXEC);
	ck_assert(ns_b != -1);
	s = sock_in(ns_b, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	for (i = 0; i < 5; i++)
		(void)sendto(s, "y", 1, 0, (struct sockaddr *)&to, sizeof(to));
	close(s);
	close(ns_b);
	secs = (now_us() - t0) / 1e6;
	while (readable(fw_nflog_fd(nl), 500))
		ck_assert_int_ge(fw_nflog_read(nl, logcount_cb, &c), 0);
	ck_assert_msg(c.n[0] >= FW_LOG_BURST / 2 &&
	    c.n[0] <= FW_LOG_BURST + (int)(FW_LOG_RATE * (secs + 1)),
	    "sandbox A logged %d of 400 in %.2f s", c.n[0], secs);
	ck_assert_int_eq(c.n[1], 5);
	ck_assert_msg(unlogged() >= 400 - c.n[0], "unlogged %ld, logged %d",
	    unlogged(), c.n[0]);
	/* Denied all the same. */
	ck_assert(!readable(u, 200));
	/* The meter entry goes with its sandbox, by key (this handle's
	 * index) and by dump (a handle that never ran fw_init). */
	ck_assert_int_eq(sh("nft list set inet sluice logmeter | "
	    "grep -q '\"sl-1\"'"), 0);
	ck_assert_int_eq(fw_sandbox_del(fw, &sa, err, sizeof(err)), 0);
	ck_assert_int_eq(sh("nft list set inet sluice logmeter | "
	    "grep -q '\"sl-1\"'"), 1);
	{
		struct fw *raw = fw_new(err, sizeof(err));

		ck_assert(raw != NULL);
		ck_assert_int_eq(sh("nft list set inet sluice logmeter | "
		    "grep -q '\"sl-2\"'"), 0);
		ck_assert_int_eq(fw_sandbox_del(raw, &sb, err, sizeof(err)), 0);
		ck_assert_int_eq(sh("nft list set inet sluice logmeter | "
		    "grep -q '\"sl-2\"'"), 1);
		fw_free(raw);
	}
	close(u);
	fw_nflog_free(nl);
}
END_TEST

/* Every set of the table has a size, from fw_config's bounds; a table
 * smaller than asked is not adopted; a full set refuses, atomically. */
START_TEST(test_set_sizes)
{
	struct fw_config	cfg;
	struct fw_sandbox	sb = sandbox();
	int			i;

	WORLD();
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)), 0);
	/* No set or map block without its size line. */
	ck_assert_int_eq(sh("nft list table inet sluice | awk "
	    "'/^\\t(set|map) /{n++; if (b) bad=1; b=1} /^\\t\\tsize /{b=0} "
	    "/^\\t}/{if (b) bad=1; b=0} END{exit !(n >= 16 && !bad)}'"), 0);
	ck_assert_int_eq(sh("nft list set inet sluice learned4 | "
	    "grep -q 'size 33554432'"), 0);
	ck_assert_int_eq(sh("nft list set inet sluice sbx4 | "
	    "grep -q 'size 4096$'"), 0);
	config(&cfg, "sluice");
	cfg.max_sandboxes = 2;
	cfg.max_learned = 10;
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(sh("nft list set inet sluice learned4 | "
	    "grep -q 'size 20$'"), 0);
	for (i = 1; i <= 3; i++) {
		sb = sandbox();
		snprintf(sb.ifname, sizeof(sb.ifname), "sl-%d", i);
		sb.addr4[3] = (uint8_t)(4 * i + 2);
		errno = 0;
		ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
		    sizeof(err)), i <= 2 ? 0 : -1);
	}
	ck_assert_int_eq(errno, ENFILE);
	ck_assert_int_eq(fw_list_sandboxes(fw, NULL, NULL, err, sizeof(err)),
	    2);
	ck_assert_int_eq(sh("nft list chain inet sluice sb_sl-3 "
	    ">/dev/null 2>&1"), 1);
	ck_assert_int_eq(sh("nft list set inet sluice s_sl-1 | "
	    "grep -q 'size 12309$'"), 0);
	/* Asked for more than the table holds: not adopted. */
	cfg.max_sandboxes = 3;
	errno = 0;
	ck_assert_int_eq(fw_init(fw, &cfg, FW_ADOPT, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EPROTO);
	cfg.max_sandboxes = 2;
	ck_assert_int_eq(fw_init(fw, &cfg, FW_ADOPT, err, sizeof(err)), 1);
	cfg.max_sandboxes = FW_MAX_SANDBOXES_LIMIT + 1;
	errno = 0;
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
}
END_TEST

/* ---------------------------------------------------------- Limits tests */

START_TEST(test_bad_config)
{
	struct fw_config	cfg;

	WORLD();
	errno = 0;
	ck_assert_int_eq(fw_init(fw, NULL, 0, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	config(&cfg, "sluice");
	ck_assert_int_eq(fw_init(fw, &cfg, 0x100, err, sizeof(err)), -1);
	cfg.pool.family = AF_INET6;
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), -1);
	config(&cfg, "sluice");
	cfg.pool.prefix = 33;
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), -1);
	config(&cfg, "sluice");
	deny_list[2].prefix = 129;
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), -1);
	config(&cfg, "sluice");
	deny_list[2].family = 99;
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), -1);
	config(&cfg, "sluice");
	cfg.bridge_port = 0;
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), -1);
	config(&cfg, "sluice");
	cfg.ndeny = 5000;
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), -1);
	config(&cfg, "sluice");
	memset(cfg.uplink, 'u', sizeof(cfg.uplink));
	ck_assert_int_eq(fw_init(fw, &cfg, 0, err, sizeof(err)), -1);
	/* None of that touched the installed table. */
	ck_assert_int_eq(sh("nft list chain inet sluice forward | "
	    "grep -q 'goto d_default'"), 0);
	/* Overlapping deny ranges (pool inside 10/8, duplicates) merge. */
	config(&cfg, "sluice");
	deny_list[3] = cidr("10.0.0.0/8");
	deny_list[7] = cidr("10.0.0.0/8");
	ck_assert_msg(fw_init(fw, &cfg, 0, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(fw_destroy(fw, "nosuch", err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(test_bad_sandbox)
{
	struct fw_sandbox	sb;
	struct fw_rule		r[2];
	static const char	*names[] = { "eth0", "sl-", "", "sl",
	    "xsl-1", NULL };
	size_t			i;

	WORLD();
	for (i = 0; names[i] != NULL; i++) {
		sb = sandbox();
		snprintf(sb.ifname, sizeof(sb.ifname), "%s", names[i]);
		ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
		    sizeof(err)), -1);
		ck_assert_int_eq(errno, EINVAL);
	}
	sb = sandbox();
	memset(sb.ifname, 'a', sizeof(sb.ifname));	/* no NUL */
	memcpy(sb.ifname, "sl-", 3);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)), -1);
	sb = sandbox();
	r[0] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	r[1] = r[0];
	r[1].prefix = 33;
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, r, 2, NULL, 0, err,
	    sizeof(err)), -1);
	r[1] = r[0];
	r[1].proto = 47;	/* GRE: only TCP/UDP/ICMP rules exist */
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, r, 2, NULL, 0, err,
	    sizeof(err)), -1);
	r[1] = r[0];
	r[1].port_lo = 500;
	r[1].port_hi = 400;
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, r, 2, NULL, 0, err,
	    sizeof(err)), -1);
	r[1] = r[0];
	r[1].family = 0;
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, r, 2, NULL, 0, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 3, NULL, 0, err,
	    sizeof(err)), -1);
	/* Nothing of the refused calls reached the kernel. */
	ck_assert_int_eq(count_all("sl-1"), 0);
	/* Registering twice is refused, and the refusal adds nothing. */
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, r, 1, NULL, 0, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, r, 1, NULL, 0, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(count_all("sl-1"), 4);
	ck_assert_int_eq(fw_restrict(fw, "eth0", r, 1, err, sizeof(err)), -1);
	r[1] = rule("198.51.100.0/24", IPPROTO_ICMP, 0, 0);
	ck_assert_int_eq(fw_restrict(fw, "sl-1", r, 2, err, sizeof(err)), -1);
	ck_assert_int_eq(fw_count_elems(fw, "restricted", NULL, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_count_elems(fw, "nosuchset", NULL, err,
	    sizeof(err)), -1);
}
END_TEST

START_TEST(test_overlapping_rules)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_rule		r[6];
	int			l;

	WORLD();
	l = listen_in(ns_inet, SOCK_STREAM, "0.0.0.0", 95);
	/* Duplicates, nested CIDRs and touching port ranges, as a policy
	 * author may well write them: normalised, not refused. */
	r[0] = rule("0.0.0.0/0", IPPROTO_TCP, 443, 443);
	r[1] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	r[2] = rule("198.51.100.0/24", IPPROTO_TCP, 443, 443);
	r[3] = rule("192.0.2.0/24", IPPROTO_TCP, 80, 90);
	r[4] = rule("192.0.2.0/24", IPPROTO_TCP, 85, 100);
	r[5] = rule("192.0.2.0/24", IPPROTO_TCP, 101, 101);
	ck_assert_msg(fw_sandbox_add(fw, &sb, r, 6, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(fw_count_elems(fw, "allow4", "sl-1", err,
	    sizeof(err)), 2);
	ck_assert_int_eq(tcp_try(NULL, "192.0.2.10", 95), T_OK);
	close(l);
}
END_TEST

START_TEST(test_bad_learn)
{
	struct fw_sandbox	sb = sandbox();
	struct fw_elem		e[3], *big;

	WORLD();
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)), 0);
	e[0] = elem("198.51.100.10", IPPROTO_TCP, 443, 443, 60000);
	e[1] = e[0];
	e[1].timeout_ms = 0;
	ck_assert_int_eq(fw_learn(fw, e, 2, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	e[1] = e[0];
	e[1].proto = IPPROTO_ICMP;
	ck_assert_int_eq(fw_learn(fw, e, 2, err, sizeof(err)), -1);
	e[1] = e[0];
	e[1].family = 3;
	ck_assert_int_eq(fw_learn(fw, e, 2, err, sizeof(err)), -1);
	e[1] = e[0];
	snprintf(e[1].ifname, sizeof(e[1].ifname), "lo");
	ck_assert_int_eq(fw_learn(fw, e, 2, err, sizeof(err)), -1);
	e[1] = e[0];
	e[1].port_lo = 2;
	e[1].port_hi = 1;
	ck_assert_int_eq(fw_learn(fw, e, 2, err, sizeof(err)), -1);
	ck_assert_int_eq(fw_learn(fw, NULL, 1, err, sizeof(err)), -1);
	/* All or nothing: the valid first element was not added. */
	ck_assert_int_eq(fw_count_elems(fw, "learned4", NULL, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(fw_learn(fw, e, 0, err, sizeof(err)), 0);
	big = calloc(1025, sizeof(*big));
	ck_assert(big != NULL);
	ck_assert_int_eq(fw_learn(fw, big, 1025, err, sizeof(err)), -1);
	free(big);
	/* Overlapping port ranges on one address (two policy rules for names
	 * sharing an IP) are accepted by this kernel's pipapo sets. */
	e[1] = e[0];
	e[1].port_lo = 400;
	e[1].port_hi = 500;
	e[2] = elem("198.51.100.11", IPPROTO_TCP, 443, 443, 60000);
	ck_assert_msg(fw_learn(fw, e, 3, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(fw_count_elems(fw, "learned4", NULL, err,
	    sizeof(err)), 3);
	/* A batch the kernel refuses (the table is gone) reports it. */
	ck_assert_int_eq(fw_destroy(fw, NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_learn(fw, e, 3, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/* Appends a NEWTABLE for table t with u bytes of userdata (at most 256,
 * as the kernel takes) to b. */
static void
put_table_msg(struct fw_batch *b, const char *t, size_t u)
{
	static const char pad[256];
	struct nftnl_table *nt = nftnl_table_alloc();

	ck_assert_ptr_nonnull(nt);
	ck_assert_uint_le(u, sizeof(pad));
	nftnl_table_set_str(nt, NFTNL_TABLE_NAME, t);
	nftnl_table_set_u32(nt, NFTNL_TABLE_FAMILY, NFPROTO_INET);
	if (u > 0)
		nftnl_table_set_data(nt, NFTNL_TABLE_USERDATA, pad,
		    (uint32_t)u);
	nftnl_table_nlmsg_build_payload(fw_batch_hdr(b, NFT_MSG_NEWTABLE,
	    NLM_F_CREATE), nt);
	nftnl_table_free(nt);
	fw_batch_next(b);
}

/* A batch that ends within 20 bytes of the size limit: libmnl leaves the
 * END message out, and the kernel aborts such a batch but still sends the
 * ACK its last message asked for. It must be refused, not reported
 * committed (and nothing of it may exist afterwards). */
START_TEST(test_batch_end_does_not_fit)
{
	struct fw_batch b;
	struct fw *f;
	char err[256];
	size_t left, base, u;

	ck_assert_ptr_nonnull(f = fw_new(err, sizeof(err)));
	ck_assert_int_eq(fw_batch_begin(f, &b), 0);
	put_table_msg(&b, "sluice_endfit", 0);
	base = mnl_nlmsg_batch_size(b.b);
	put_table_msg(&b, "sluice_endfit", 0);
	base = mnl_nlmsg_batch_size(b.b) - base;	/* one, no userdata */
	/* Large messages while far from the limit, then one sized to
	 * leave 12 bytes: less than the 20 of the END message. */
	while ((left = FW_BATCH_LIMIT - mnl_nlmsg_batch_size(b.b)) >
	    2 * (base + 4 + 256))
		put_table_msg(&b, "sluice_endfit", 256);
	while ((left = FW_BATCH_LIMIT - mnl_nlmsg_batch_size(b.b)) >
	    base + 4 + 256 + 12)
		put_table_msg(&b, "sluice_endfit", 128);
	ck_assert_uint_ge(left, base + 4 + 12);
	u = left - 12 - base - 4;
	put_table_msg(&b, "sluice_endfit", u);
	ck_assert_uint_eq(FW_BATCH_LIMIT - mnl_nlmsg_batch_size(b.b), 12);
	errno = 0;
	ck_assert_int_eq(fw_batch_commit(&b, "endfit", err, sizeof(err)), -1);
	ck_assert_int_eq(errno, E2BIG);
	ck_assert_int_eq(system("nft list table inet sluice_endfit "
	    ">/dev/null 2>&1"), 256);	/* exit 1: no such table */
	fw_free(f);
}
END_TEST

/* Descriptors of this process not marked close-on-exec. */
static int
count_inheritable(void)
{
	struct dirent *de;
	DIR *d;
	int n = 0, fd, fl;

	ck_assert_ptr_nonnull(d = opendir("/proc/self/fd"));
	while ((de = readdir(d)) != NULL) {
		fd = atoi(de->d_name);
		if (de->d_name[0] == '.' || fd == dirfd(d))
			continue;
		if ((fl = fcntl(fd, F_GETFD)) != -1 && !(fl & FD_CLOEXEC))
			n++;
	}
	closedir(d);
	return n;
}

/* The netfilter socket is close-on-exec: the stdio MCP servers sluiced
 * starts must not inherit it (one could steal the kernel's replies and
 * hang or fail the daemon's batches). */
START_TEST(test_socket_cloexec)
{
	struct fw *f;
	char err[256];
	int before = count_inheritable();

	ck_assert_ptr_nonnull(f = fw_new(err, sizeof(err)));
	ck_assert_int_eq(count_inheritable(), before);
	fw_free(f);
}
END_TEST

START_TEST(test_null_and_free)
{
	WORLD();
	fw_free(NULL);
	fw_nflog_free(NULL);
	fw_nflog_close(NULL);
	ck_assert_int_eq(fw_nflog_read(NULL, nflog_cb, NULL), -1);
	ck_assert_int_eq(fw_nflog_fd(NULL), -1);
	ck_assert_int_eq(fw_sandbox_del(fw, NULL, err, sizeof(err)), -1);
	ck_assert_int_eq(fw_list_sandboxes(NULL, NULL, NULL, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(fw_elem_expiration(fw, NULL, err, sizeof(err)), -1);
	/* A handle in a namespace without the table reports ENOENT. */
	ck_assert_int_eq(fw_destroy(fw, NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(fw_list_sandboxes(fw, NULL, NULL, err, sizeof(err)),
	    -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/* ----------------------------------------------------------- Benchmarks */

static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

START_TEST(test_bench)
{
	struct fw_sandbox	sb;
	struct fw_rule		allow[8];
	struct fw_elem		e[4];
	double			t[200], t0, add = 0, del = 0;
	int			i;

	WORLD();
	for (i = 0; i < 8; i++)
		allow[i] = rule("198.51.100.0/24", IPPROTO_TCP,
		    (uint16_t)(1000 + i * 10), (uint16_t)(1000 + i * 10));
	sb = sandbox();
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, allow, 8, NULL, 0, err,
	    sizeof(err)), 0);
	for (i = 0; i < 200; i++) {
		e[0] = elem("198.51.100.10", IPPROTO_TCP, 443, 443, 60000);
		e[1] = elem("198.51.100.11", IPPROTO_TCP, 443, 443, 60000);
		e[2] = elem("192.0.2.10", IPPROTO_TCP, 443, 443, 60000);
		e[3] = elem("192.0.2.11", IPPROTO_TCP, 443, 443, 60000);
		e[0].addr[3] = (uint8_t)i;	/* new and refreshed mixed */
		t0 = now_us();
		ck_assert_int_eq(fw_learn(fw, e, 4, err, sizeof(err)), 0);
		t[i] = now_us() - t0;
	}
	qsort(t, 200, sizeof(t[0]), cmp_double);
	for (i = 0; i < 20; i++) {
		sb = sandbox();
		snprintf(sb.ifname, sizeof(sb.ifname), "sl-b%d", i);
		sb.addr4[3] = (uint8_t)(10 + i);
		sb.quota_bytes = 1000000;
		t0 = now_us();
		ck_assert_int_eq(fw_sandbox_add(fw, &sb, allow, 8, NULL, 0,
		    err, sizeof(err)), 0);
		add += now_us() - t0;
		t0 = now_us();
		ck_assert_int_eq(fw_sandbox_del(fw, &sb, err, sizeof(err)), 0);
		del += now_us() - t0;
	}
	fprintf(stderr, "check_fw bench (refresh by %s): fw_learn(4) median %.0f us, p90 %.0f "
	    "us; fw_sandbox_add(8 rules + quota) %.0f us; fw_sandbox_del "
	    "%.0f us (avg of 20)\n", fw->refresh == FW_REFRESH_READD ?
	    "re-add" : "delete+add", t[100], t[180], add / 20, del / 20);
}
END_TEST

static Suite *
fw_suite(void)
{
	Suite	*s = suite_create("fw");
	TCase	*tc;

	tc = tcase_create("Core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_init_ruleset);
	tcase_add_test(tc, test_allow_cidr_port);
	tcase_add_test(tc, test_always_deny_wins);
	tcase_add_test(tc, test_private_needs_rule);
	tcase_add_test(tc, test_explicit_deny);
	tcase_add_test(tc, test_spoof_dropped);
	tcase_add_test(tc, test_no_ride_on_other_sandbox_flow);
	tcase_add_test(tc, test_raw_socket);
	tcase_add_test(tc, test_udp_icmp_default);
	tcase_add_test(tc, test_icmp_allowed);
	tcase_add_test(tc, test_stray_dns_dnat);
	tcase_add_test(tc, test_input_only_service);
	tcase_add_test(tc, test_dot_dropped);
	tcase_add_test(tc, test_learn_expires);
	tcase_add_test(tc, test_gate_fail_closed);
	tcase_add_test(tc, test_learn_refresh);
	tcase_add_test(tc, test_learn_refresh_deladd);
	tcase_add_test(tc, test_restrict);
	tcase_add_test(tc, test_restrict_cuts_open_flow);
	tcase_add_test(tc, test_ipv6);
	tcase_add_test(tc, test_restrict_v6_other_handle);
	tcase_add_test(tc, test_sandbox_del);
	tcase_add_test(tc, test_learn_after_del);
	tcase_add_test(tc, test_learn_keep);
	tcase_add_test(tc, test_learn_hash_and_range);
	tcase_add_test(tc, test_del_leaves_nothing);
	tcase_add_test(tc, test_update_then_del);
	tcase_add_test(tc, test_adopt_keeps_state);
	tcase_add_test(tc, test_replace_is_atomic);
	tcase_add_test(tc, test_replace_refused_by_kernel);
	tcase_add_test(tc, test_nflog);
	tcase_add_test(tc, test_uplink_masquerade);
	tcase_add_test(tc, test_quota);
	tcase_add_test(tc, test_dispatch_fail_closed);
	tcase_add_test(tc, test_restrict_twice_then_update);
	tcase_add_test(tc, test_restrict_keeps_policy_order);
	tcase_add_test(tc, test_adopt_old_layout_refused);
	tcase_add_test(tc, test_related_icmp_own_flow_only);
	tcase_add_test(tc, test_leftover_flow_other_generation);
	tcase_add_test(tc, test_service_only_from_sandboxes);
	tcase_add_test(tc, test_log_budget);
	tcase_add_test(tc, test_set_sizes);
	suite_add_tcase(s, tc);

	tc = tcase_create("Limits");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bad_config);
	tcase_add_test(tc, test_bad_sandbox);
	tcase_add_test(tc, test_overlapping_rules);
	tcase_add_test(tc, test_bad_learn);
	tcase_add_test(tc, test_null_and_free);
	tcase_add_test(tc, test_socket_cloexec);
	tcase_add_test(tc, test_batch_end_does_not_fit);
	suite_add_tcase(s, tc);

	tc = tcase_create("Bench");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_bench);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner	*sr;
	int	 failed;

	sr = srunner_create(fw_suite());
	/* Every test must run in its own child: it changes namespaces. */
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
