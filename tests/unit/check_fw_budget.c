/*
 * check_fw_budget.c: byte budgets in the kernel, measured exactly.
 *
 * The sandbox-wide quota and the per-rule budgets (fw_budget_*) count the
 * bytes a sandbox sends; these tests compare what the kernel's quota
 * objects say they consumed with an independent counter (a table of the
 * test's own, on the forward hook before Sluice's), so a byte counted twice
 * or not at all shows as a difference, not as a tolerance. The name gate's
 * verdicts are given by the test itself through the queue, as the gate
 * process gives them: a bare SYN is accepted, data is passed with the
 * gate's mark and NF_REPEAT, which makes the kernel run the forward chain
 * once more for that packet.
 *
 * World (each test in Check's forked child, in fresh network and mount
 * namespaces; everything dies with it):
 *   ns "sbx" eth0 10.231.0.2/30 -- sl-1 10.231.0.1/30 (test ns, gateway)
 *   ns "inet" eth0 203.0.113.2/24 -- up0 203.0.113.1/24; lo 198.51.100.10,11
 */
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>

#include <check.h>
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

#include <libmnl/libmnl.h>

#include "netns/fw.h"

#define SVC	"10.231.255.254"
#define SBX	"10.231.0.2"
#define QUEUE	7743

static int	have_world;
static int	ns_host = -1, ns_sbx = -1, ns_inet = -1;
static struct fw *fw;
static char	 err[256];

static int
sh(const char *fmt, ...)
{
	char	cmd[768];
	va_list	ap;
	int	st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The first number after word in the output of cmd, or -1. */
static long long
num_after(const char *cmd, const char *word)
{
	char	 line[512], *p;
	FILE	*f;
	long long v = -1;

	if ((f = popen(cmd, "r")) == NULL)
		return -1;
	while (v == -1 && fgets(line, sizeof(line), f) != NULL)
		if ((p = strstr(line, word)) != NULL)
			v = strtoll(p + strlen(word), NULL, 10);
	pclose(f);
	return v;
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
		"echo 1 > /proc/sys/net/ipv4/ip_forward",
		/* The reference: every byte from the sandbox link, counted
		 * once, before Sluice's forward chain (priority filter). */
		"nft add table inet cktest",
		"nft add chain inet cktest cnt '{ type filter hook forward "
		    "priority -10; policy accept; }'",
		"nft add rule inet cktest cnt iifname sl-1 counter",
		NULL
	};
	size_t	i;

	if (geteuid() != 0 || unshare(CLONE_NEWNET | CLONE_NEWNS) == -1) {
		fprintf(stderr, "check_fw_budget: SKIP: needs root\n");
		return 0;
	}
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	(void)mkdir("/run/netns", 0755);
	ck_assert_int_eq(mount("tmpfs", "/run/netns", "tmpfs", 0, NULL), 0);
	for (i = 0; cmds[i] != NULL; i++)
		ck_assert_msg(sh("%s", cmds[i]) == 0, "setup: %s", cmds[i]);
	ns_host = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	ns_sbx = open("/run/netns/sbx", O_RDONLY | O_CLOEXEC);
	ns_inet = open("/run/netns/inet", O_RDONLY | O_CLOEXEC);
	ck_assert(ns_host != -1 && ns_sbx != -1 && ns_inet != -1);
	return 1;
}

static struct fw_cidr
cidr4(const char *a, uint8_t prefix)
{
	struct fw_cidr	c;

	memset(&c, 0, sizeof(c));
	c.family = AF_INET;
	ck_assert_int_eq(inet_pton(AF_INET, a, c.addr), 1);
	c.prefix = prefix;
	return c;
}

static struct fw_cidr	deny_list[2], private_list[1];

static void
init_table(int gate)
{
	struct fw_config	cfg;

	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.table, sizeof(cfg.table), "sluice");
	inet_pton(AF_INET, SVC, cfg.svc4);
	cfg.bridge_port = 8080;
	cfg.nflog_group = 7;
	cfg.pool = cidr4("10.231.0.0", 16);
	deny_list[0] = cidr4("169.254.0.0", 16);
	deny_list[1] = cidr4("127.0.0.0", 8);
	private_list[0] = cidr4("10.0.0.0", 8);
	cfg.deny = deny_list;
	cfg.ndeny = 2;
	cfg.private = private_list;
	cfg.nprivate = 1;
	cfg.gate = gate;
	cfg.gate_queue = QUEUE;
	ck_assert_msg(fw_init(fw, &cfg, 0, err, sizeof(err)) == 0,
	    "fw_init: %s", err);
}

static void
setup(void)
{
	have_world = world_up();
	if (!have_world)
		return;
	fw = fw_new(err, sizeof(err));
	ck_assert_msg(fw != NULL, "fw_new: %s", err);
}

static void
teardown(void)
{
	fw_free(fw);
	fw = NULL;
}

#define WORLD() do { if (!have_world) return; } while (0)

static int
sock_in(int nsfd, int type)
{
	int	s;

	ck_assert_int_eq(setns(nsfd, CLONE_NEWNET), 0);
	s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
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

static int
listen_in(int nsfd, const char *addr, uint16_t port)
{
	struct sockaddr_in	sin = sin_of(addr, port);
	int			s, one = 1;

	s = sock_in(nsfd, SOCK_STREAM);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(listen(s, 16), 0);
	return s;
}

static int64_t
mono_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------- a test's gate */

static void
verdict(int q, uint32_t id, uint32_t v, uint32_t mark)
{
	char			 buf[128];
	struct nlmsghdr		*nlh;
	struct nfgenmsg		*gm;
	struct nfqnl_msg_verdict_hdr vh;

	vh.verdict = htonl(v);
	vh.id = htonl(id);
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	gm = mnl_nlmsg_put_extra_header(nlh, sizeof(*gm));
	gm->nfgen_family = AF_UNSPEC;
	gm->version = NFNETLINK_V0;
	gm->res_id = htons(QUEUE);
	mnl_attr_put(nlh, NFQA_VERDICT_HDR, sizeof(vh), &vh);
	if (mark != 0)
		mnl_attr_put_u32(nlh, NFQA_MARK, htonl(mark));
	ck_assert(send(q, nlh, nlh->nlmsg_len, 0) == (ssize_t)nlh->nlmsg_len);
}

/* Answers what waits in queue q as the gate would: a packet without TCP
 * payload is accepted alone, one with payload passes the flow (mark and
 * NF_REPEAT). Returns how many packets were answered. */
static int
serve_gate(int q)
{
	static char	 buf[70000];
	struct nlmsghdr	*nlh;
	ssize_t		 n;
	int		 done = 0;

	while ((n = recv(q, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		for (nlh = (struct nlmsghdr *)buf; mnl_nlmsg_ok(nlh, (int)n);
		    nlh = mnl_nlmsg_next(nlh, (int *)&n)) {
			struct nlattr *a;
			struct nfqnl_msg_packet_hdr *ph = NULL;
			const uint8_t *pkt = NULL;
			size_t plen = 0, ihl, thl;

			if ((nlh->nlmsg_type & 0xff) != NFQNL_MSG_PACKET)
				continue;
			mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
				if (mnl_attr_get_type(a) == NFQA_PACKET_HDR)
					ph = mnl_attr_get_payload(a);
				else if (mnl_attr_get_type(a) == NFQA_PAYLOAD) {
					pkt = mnl_attr_get_payload(a);
					plen = mnl_attr_get_payload_len(a);
				}
			}
			ck_assert(ph != NULL && pkt != NULL && plen >= 40);
			ihl = (size_t)(pkt[0] & 0x0f) * 4;
			thl = (size_t)(pkt[ihl + 12] >> 4) * 4;
			if (plen > ihl + thl)
				verdict(q, ntohl(ph->packet_id), NF_REPEAT,
				    FW_GATE_M_OK);
			else
				verdict(q, ntohl(ph->packet_id), NF_ACCEPT, 0);
			done++;
		}
	}
	return done;
}

/* Connects from the sandbox to dst:port through the test's gate, sends
 * len bytes and waits (bounded) until the far side read them all; the
 * flow stays open (no FIN) so that nothing more is counted. Returns the
 * bytes the far side read. *queued gets the packets the gate answered. */
static size_t
gated_send(int q, int l, const char *dst, uint16_t port, size_t len,
    int *queued)
{
	struct sockaddr_in	sin = sin_of(dst, port);
	char			buf[4096];
	size_t			got = 0, sent = 0;
	int64_t			deadline = mono_ms() + 5000;
	int			s, a = -1;
	ssize_t			n;

	memset(buf, 'b', sizeof(buf));
	*queued = 0;
	s = sock_in(ns_sbx, SOCK_STREAM | SOCK_NONBLOCK);
	ck_assert(connect(s, (struct sockaddr *)&sin, sizeof(sin)) == 0 ||
	    errno == EINPROGRESS);
	while (got < len && mono_ms() < deadline) {
		struct pollfd pfd[3] = {
			{ .fd = q, .events = POLLIN },
			{ .fd = a != -1 ? a : l, .events = POLLIN },
			{ .fd = s, .events = sent < len ? POLLOUT : 0 },
		};

		(void)poll(pfd, 3, 100);
		*queued += serve_gate(q);
		if (a == -1 && (pfd[1].revents & POLLIN))
			a = accept(l, NULL, NULL);
		else if (a != -1 && (pfd[1].revents & POLLIN)) {
			n = recv(a, buf, sizeof(buf), MSG_DONTWAIT);
			if (n > 0)
				got += (size_t)n;
		}
		if (sent < len && (pfd[2].revents & POLLOUT)) {
			size_t k = len - sent < sizeof(buf) ? len - sent :
			    sizeof(buf);

			n = send(s, buf, k, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
		}
	}
	/* What the flow still sends (the ACKs of nothing) is nothing: the
	 * far side sent no data. Keep both ends open until measured. */
	serve_gate(q);
	if (a != -1)
		close(a);
	close(s);
	return got;
}

/* ------------------------------------------------------------------ tests */

/*
 * A flow the name gate passes sends its first data packets twice through
 * the forward chain (queued, then reinjected with NF_REPEAT): each of its
 * bytes must count once against the sandbox's quota. The quota's "used"
 * must equal the reference counter exactly, measured before the flow's
 * FIN (closing would add the same packets to both anyway).
 */
START_TEST(test_gate_quota_counts_once)
{
	struct fw_sandbox	sb;
	struct fw_elem		e;
	long long		used, ref;
	int			q, l, queued;
	size_t			got;

	WORLD();
	init_table(1);
	memset(&sb, 0, sizeof(sb));
	snprintf(sb.ifname, sizeof(sb.ifname), "sl-1");
	inet_pton(AF_INET, SBX, sb.addr4);
	sb.gen = 1;
	sb.quota_bytes = 1ULL << 30;
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	memset(&e, 0, sizeof(e));
	snprintf(e.ifname, sizeof(e.ifname), "sl-1");
	e.family = AF_INET;
	inet_pton(AF_INET, "198.51.100.11", e.addr);
	e.proto = IPPROTO_TCP;
	e.port_lo = e.port_hi = 443;
	e.timeout_ms = 60000;
	ck_assert_msg(fw_learn(fw, &e, 1, err, sizeof(err)) == 0, "%s", err);
	q = fw_gate_open(QUEUE, err, sizeof(err));
	ck_assert_msg(q >= 0, "%s", err);
	l = listen_in(ns_inet, "198.51.100.11", 443);
	got = gated_send(q, l, "198.51.100.11", 443, 300, &queued);
	ck_assert_uint_eq(got, 300);
	/* The SYN and at least the first data segment went to the gate. */
	ck_assert_int_ge(queued, 2);
	used = num_after("nft list quota inet sluice q_sl-1", "used ");
	ref = num_after("nft list chain inet cktest cnt", "bytes ");
	ck_assert_msg(ref > 300 && used == ref,
	    "quota used %lld bytes, the link sent %lld", used, ref);
	close(l);
	close(q);
}
END_TEST

/* Does table sluice hold the set, object (a quota) or chain `name`? One
 * GET by name, answered by the kernel itself. */
static int
kernel_has(uint16_t type, const char *name)
{
	char			 buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket	*nl;
	struct nlmsghdr		*nlh;
	struct nfgenmsg		*g;
	ssize_t			 n;
	int			 ret;

	nl = mnl_socket_open(NETLINK_NETFILTER);
	ck_assert_ptr_nonnull(nl);
	ck_assert_int_eq(mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID), 0);
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = 1;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = NFPROTO_INET;
	g->version = NFNETLINK_V0;
	g->res_id = 0;
	if (type == NFT_MSG_GETSET) {
		mnl_attr_put_strz(nlh, NFTA_SET_TABLE, "sluice");
		mnl_attr_put_strz(nlh, NFTA_SET_NAME, name);
	} else if (type == NFT_MSG_GETOBJ) {
		mnl_attr_put_strz(nlh, NFTA_OBJ_TABLE, "sluice");
		mnl_attr_put_strz(nlh, NFTA_OBJ_NAME, name);
		mnl_attr_put_u32(nlh, NFTA_OBJ_TYPE, htonl(NFT_OBJECT_QUOTA));
	} else {
		mnl_attr_put_strz(nlh, NFTA_CHAIN_TABLE, "sluice");
		mnl_attr_put_strz(nlh, NFTA_CHAIN_NAME, name);
	}
	ck_assert(mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) >= 0);
	ret = 0;
	for (;;) {
		n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		ck_assert(n > 0);
		ret = mnl_cb_run(buf, (size_t)n, 1, mnl_socket_get_portid(nl),
		    NULL, NULL);
		if (ret <= MNL_CB_STOP)
			break;
	}
	mnl_socket_close(nl);
	if (ret == MNL_CB_ERROR)
		ck_assert_msg(errno == ENOENT, "GET %s: %s", name,
		    strerror(errno));
	return ret != MNL_CB_ERROR;
}

/* --------------------------------------------------- rule budgets */

static struct fw_rule
rule4(const char *a, uint8_t prefix, uint16_t port, uint8_t budget)
{
	struct fw_rule	r;

	memset(&r, 0, sizeof(r));
	r.family = AF_INET;
	ck_assert_int_eq(inet_pton(AF_INET, a, r.addr), 1);
	r.prefix = prefix;
	r.proto = IPPROTO_TCP;
	r.port_lo = r.port_hi = port;
	r.budget = budget;
	return r;
}

static struct fw_sandbox
sandbox(uint8_t nbudgets, uint64_t bytes)
{
	struct fw_sandbox	sb;
	uint8_t			k;

	memset(&sb, 0, sizeof(sb));
	snprintf(sb.ifname, sizeof(sb.ifname), "sl-1");
	inet_pton(AF_INET, SBX, sb.addr4);
	sb.gen = 1;
	sb.nbudgets = nbudgets;
	for (k = 0; k < nbudgets; k++)
		sb.budget_bytes[k] = bytes;
	return sb;
}

/* Sends up to len bytes from the sandbox to dst:port (listener l in the
 * far namespace) until the far side has them all, the flow is refused or
 * reset, or a deadline passes; the far side's count is returned, after
 * it stopped growing (bounded). *dead: the sender saw its flow fail. */
static size_t
send_until(int l, const char *dst, uint16_t port, size_t len, int *dead)
{
	struct sockaddr_in	sin = sin_of(dst, port);
	char			buf[8192];
	size_t			got = 0, sent = 0;
	int64_t			deadline = mono_ms() + 8000, quiet = 0;
	int			s, a = -1;
	ssize_t			n;

	memset(buf, 'x', sizeof(buf));
	*dead = 0;
	s = sock_in(ns_sbx, SOCK_STREAM | SOCK_NONBLOCK);
	ck_assert(connect(s, (struct sockaddr *)&sin, sizeof(sin)) == 0 ||
	    errno == EINPROGRESS);
	while (got < len && mono_ms() < deadline) {
		struct pollfd pfd[2] = {
			{ .fd = a != -1 ? a : l, .events = POLLIN },
			{ .fd = s, .events = !*dead && sent < len ?
			    POLLOUT : 0 },
		};

		if (poll(pfd, 2, 100) == 0 && *dead) {
			/* The sender is gone and nothing more came. */
			if (quiet == 0)
				quiet = mono_ms();
			else if (mono_ms() - quiet > 500)
				break;
			continue;
		}
		quiet = 0;
		if (a == -1 && (pfd[0].revents & POLLIN))
			a = accept(l, NULL, NULL);
		else if (a != -1 && (pfd[0].revents & (POLLIN | POLLHUP |
		    POLLERR))) {
			n = recv(a, buf, sizeof(buf), MSG_DONTWAIT);
			if (n > 0)
				got += (size_t)n;
			else if (n == 0 || errno != EAGAIN)
				*dead = 1;
		}
		if (pfd[1].revents & (POLLERR | POLLHUP))
			*dead = 1;
		else if (!*dead && sent < len && (pfd[1].revents & POLLOUT)) {
			size_t k = len - sent < sizeof(buf) ? len - sent :
			    sizeof(buf);

			n = send(s, buf, k, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
			else if (errno != EAGAIN)
				*dead = 1;
		}
		if (*dead && a == -1)
			break;
	}
	if (a != -1)
		close(a);
	close(s);
	return got;
}

#define BUDGET	60000

/*
 * A static rule's budget stops its flows at the budget: the far side gets
 * less than BUDGET bytes of payload (headers count too, and the kernel
 * charges a packet before it lets it pass, so there is no slack beyond
 * the budget), the flow is reset, and a new one to the same destination
 * is refused while another allowed destination keeps working. A reset
 * (the end of a window) opens it again.
 */
START_TEST(test_rule_budget_static)
{
	struct fw_sandbox	sb = sandbox(1, BUDGET);
	struct fw_rule		allow[2];
	uint64_t		used = 0, bytes = 0;
	size_t			got;
	int			l, l2, dead;

	WORLD();
	init_table(0);
	allow[0] = rule4("198.51.100.10", 32, 5001, 1);
	allow[1] = rule4("198.51.100.11", 32, 5002, 0);
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 2, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	l = listen_in(ns_inet, "198.51.100.10", 5001);
	l2 = listen_in(ns_inet, "198.51.100.11", 5002);
	got = send_until(l, "198.51.100.10", 5001, 4 * BUDGET, &dead);
	ck_assert_msg(dead && got > BUDGET / 2 && got < BUDGET,
	    "the far side got %zu bytes of a %d byte budget", got, BUDGET);
	ck_assert_int_eq(fw_budget_used(fw, "sl-1", 0, &used, &bytes, err,
	    sizeof(err)), 0);
	ck_assert_uint_eq(bytes, BUDGET);
	ck_assert_uint_ge(used, BUDGET);
	/* Spent: a new flow gets nothing through. */
	got = send_until(l, "198.51.100.10", 5001, 1000, &dead);
	ck_assert_uint_eq(got, 0);
	/* The destination without a budget is not touched. */
	got = send_until(l2, "198.51.100.11", 5002, 4 * BUDGET, &dead);
	ck_assert_uint_eq(got, 4 * BUDGET);
	/* A window ends: the budget starts again. */
	ck_assert_msg(fw_budget_reset(fw, "sl-1", 0, &used, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_uint_ge(used, BUDGET);
	got = send_until(l, "198.51.100.10", 5001, 1000, &dead);
	ck_assert_uint_eq(got, 1000);
	close(l);
	close(l2);
}
END_TEST

/*
 * A learned destination's budget follows the flow, not the element: a
 * flow opened while its DNS answer lived stays counted after the answer
 * expired, so waiting for the expiry gains nothing.
 */
START_TEST(test_rule_budget_learned_outlives_answer)
{
	struct fw_sandbox	sb = sandbox(2, BUDGET);
	struct sockaddr_in	sin = sin_of("198.51.100.11", 443);
	struct fw_elem		e;
	char			buf[4096];
	size_t			got = 0, sent = 0;
	int64_t			deadline;
	int			l, s, a, i;
	ssize_t			n;

	WORLD();
	init_table(0);
	ck_assert_msg(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	memset(&e, 0, sizeof(e));
	snprintf(e.ifname, sizeof(e.ifname), "sl-1");
	e.family = AF_INET;
	inet_pton(AF_INET, "198.51.100.11", e.addr);
	e.proto = IPPROTO_TCP;
	e.port_lo = e.port_hi = 443;
	e.timeout_ms = 1000;
	e.budget = 2;
	ck_assert_msg(fw_learn(fw, &e, 1, err, sizeof(err)) == 0, "%s", err);
	l = listen_in(ns_inet, "198.51.100.11", 443);
	s = sock_in(ns_sbx, SOCK_STREAM);
	ck_assert_int_eq(connect(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
	a = accept(l, NULL, NULL);
	ck_assert_int_ge(a, 0);
	/* Wait (bounded) until the element is gone from the kernel. */
	deadline = mono_ms() + 5000;
	while (sh("nft list set inet sluice learned4 | grep -q 198.51.100.11")
	    == 0 && mono_ms() < deadline)
		(void)poll(NULL, 0, 50);
	ck_assert_int_lt(mono_ms(), deadline);
	memset(buf, 'y', sizeof(buf));
	fcntl(s, F_SETFL, O_NONBLOCK);
	fcntl(a, F_SETFL, O_NONBLOCK);
	for (i = 0; i < 2000 && sent < 4 * BUDGET; i++) {
		struct pollfd pfd[2] = { { .fd = s, .events = POLLOUT },
		    { .fd = a, .events = POLLIN } };

		(void)poll(pfd, 2, 20);
		if ((n = send(s, buf, sizeof(buf), MSG_NOSIGNAL)) > 0)
			sent += (size_t)n;
		else if (errno != EAGAIN)
			break;
		while ((n = recv(a, buf, sizeof(buf), 0)) > 0)
			got += (size_t)n;
	}
	while (poll(&(struct pollfd){ .fd = a, .events = POLLIN }, 1, 300) ==
	    1 && (n = recv(a, buf, sizeof(buf), 0)) > 0)
		got += (size_t)n;
	ck_assert_msg(got > 0 && got < BUDGET, "the far side got %zu bytes "
	    "of a %d byte budget after the answer expired", got, BUDGET);
	close(a);
	close(s);
	close(l);
}
END_TEST

/* Two budgeted rules on one destination: refused (which budget would
 * count is not guessed), and no budget without a budget object. */
START_TEST(test_rule_budget_refused)
{
	struct fw_sandbox	sb = sandbox(2, BUDGET);
	struct fw_rule		allow[2];

	WORLD();
	init_table(0);
	allow[0] = rule4("198.51.100.0", 24, 5001, 1);
	allow[1] = rule4("198.51.100.10", 32, 5001, 2);
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, allow, 2, NULL, 0, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	allow[1] = rule4("198.51.100.10", 32, 5001, 3);	/* no budget 2 */
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, allow + 1, 1, NULL, 0, err,
	    sizeof(err)), -1);
	sb.budget_bytes[1] = 0;
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)), -1);
	sb.nbudgets = FW_MAX_BUDGETS + 1;
	ck_assert_int_eq(fw_sandbox_add(fw, &sb, NULL, 0, NULL, 0, err,
	    sizeof(err)), -1);
}
END_TEST

/*
 * The taint budget: from the taint on, what the sandbox sends to its keep
 * list stops at the budget; before it, the same destination took more.
 */
START_TEST(test_taint_budget)
{
	struct fw_sandbox	sb = sandbox(0, 0);
	struct fw_rule		allow[1], keep[1];
	size_t			got;
	int			l, dead;

	WORLD();
	init_table(0);
	allow[0] = rule4("198.51.100.10", 32, 5001, 0);
	keep[0] = allow[0];
	ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
	    sizeof(err)) == 0, "%s", err);
	l = listen_in(ns_inet, "198.51.100.10", 5001);
	got = send_until(l, "198.51.100.10", 5001, 2 * BUDGET, &dead);
	ck_assert_uint_eq(got, 2 * BUDGET);
	ck_assert_msg(fw_restrict_budget(fw, "sl-1", keep, 1, BUDGET, err,
	    sizeof(err)) == 0, "%s", err);
	got = send_until(l, "198.51.100.10", 5001, 2 * BUDGET, &dead);
	ck_assert_msg(dead && got > 0 && got < BUDGET, "the far side got "
	    "%zu bytes of a %d byte taint budget", got, BUDGET);
	/* A second narrowing (a reload) leaves the taint budget spent. */
	ck_assert_msg(fw_restrict_budget(fw, "sl-1", keep, 1, BUDGET, err,
	    sizeof(err)) == 0, "%s", err);
	got = send_until(l, "198.51.100.10", 5001, 1000, &dead);
	ck_assert_uint_eq(got, 0);
	close(l);
}
END_TEST

/* The rule budgets apply to a tainted sandbox too (their rules go above
 * the narrowing), and removal leaves no map, set, chain or object of the
 * sandbox in the table: through the index, and through a handle that
 * never initialised the table (the dump path). */
START_TEST(test_budget_taint_then_del_leaves_nothing)
{
	struct fw_sandbox	sb = sandbox(FW_MAX_BUDGETS, BUDGET);
	struct fw_rule		allow[1];
	struct fw		*other;
	size_t			got;
	int			l, dead, pass, k;

	WORLD();
	init_table(0);
	for (pass = 0; pass < 2; pass++) {
		allow[0] = rule4("198.51.100.10", 32, 5001, FW_MAX_BUDGETS);
		ck_assert_msg(fw_sandbox_add(fw, &sb, allow, 1, NULL, 0, err,
		    sizeof(err)) == 0, "%s", err);
		allow[0].budget = 0;
		ck_assert_msg(fw_restrict_budget(fw, "sl-1", allow, 1,
		    10 * BUDGET, err, sizeof(err)) == 0, "%s", err);
		l = listen_in(ns_inet, "198.51.100.10", 5001);
		got = send_until(l, "198.51.100.10", 5001, 4 * BUDGET, &dead);
		ck_assert_msg(dead && got < BUDGET, "tainted: %zu bytes "
		    "through a %d byte rule budget", got, BUDGET);
		close(l);
		ck_assert(kernel_has(NFT_MSG_GETSET, "b_sl-1") &&
		    kernel_has(NFT_MSG_GETSET, "bq_sl-1") &&
		    kernel_has(NFT_MSG_GETOBJ, "b15_sl-1") &&
		    kernel_has(NFT_MSG_GETOBJ, "t_sl-1") &&
		    kernel_has(NFT_MSG_GETCHAIN, "sb_sl-1"));
		other = pass == 0 ? fw : fw_new(err, sizeof(err));
		ck_assert_ptr_nonnull(other);
		ck_assert_msg(fw_sandbox_del(other, &sb, err, sizeof(err)) ==
		    0, "%s", err);
		if (other != fw)
			fw_free(other);
		ck_assert_int_eq(sh("nft list table inet sluice | grep -q "
		    "sl-1"), 1);
		/* nft 1.0 cannot print the per-sandbox sets: asked by name. */
		ck_assert(!kernel_has(NFT_MSG_GETSET, "b_sl-1") &&
		    !kernel_has(NFT_MSG_GETSET, "bq_sl-1") &&
		    !kernel_has(NFT_MSG_GETSET, "s_sl-1") &&
		    !kernel_has(NFT_MSG_GETOBJ, "t_sl-1") &&
		    !kernel_has(NFT_MSG_GETCHAIN, "sb_sl-1"));
		for (k = 0; k < FW_MAX_BUDGETS; k++) {
			char on[32];

			snprintf(on, sizeof(on), "b%d_sl-1", k);
			ck_assert(!kernel_has(NFT_MSG_GETOBJ, on));
		}
	}
}
END_TEST

static Suite *
budget_suite(void)
{
	Suite	*s = suite_create("fw_budget");
	TCase	*tc = tcase_create("Core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_gate_quota_counts_once);
	tcase_add_test(tc, test_rule_budget_static);
	tcase_add_test(tc, test_rule_budget_learned_outlives_answer);
	tcase_add_test(tc, test_rule_budget_refused);
	tcase_add_test(tc, test_taint_budget);
	tcase_add_test(tc, test_budget_taint_then_del_leaves_nothing);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner	*sr;
	int	 failed;

	sr = srunner_create(budget_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
