/*
 * check_dns: the DNS proxy against a real resolver. Each test runs the proxy
 * in-process on 127.0.0.1:<ephemeral> with an ev loop thread, in front of a
 * dnsmasq on loopback that the suite starts (and kills) itself, under a
 * policy file written into a temp dir. The learn hook records what it gets,
 * refuses what fw_learn would refuse and checks that the sandbox has not
 * seen the answer yet; the record hook
 * keeps every dns.decision event; the lookup hook maps 127.0.0.1 (and .3,
 * with a tight rate limit) to test sandboxes and everything else to
 * "unknown". No packet leaves loopback.
 */
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns.h"
#include "gateway/ev.h"
#include "policy/policy.h"

#define SBX_IF		"sl-dnstest"
#define RECV_MS		5000	/* a bound, not a timing assumption */
#define MAXEV		4096

/* ------------------------------------------------------------ the world */

static char	tmpdir[256];
static pid_t	dm_pid = -1;
static uint16_t	dm_port;
static char	dm_log[300];
static char	pol_main[300], pol_slow[300], pol_lan[300], pol_keep[300];
static char	pol_edge[300];
static uint16_t	dead_port;

static const struct pol_cidr *treat;
static struct pol_cidr treat_buf[3];

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static uint16_t
free_port(int type)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, type, 0);
	uint16_t port;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd == -1 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) == -1)
		abort();
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static void
sa_lo(struct sockaddr_storage *ss, socklen_t *sl, const char *ip,
    uint16_t port)
{
	struct sockaddr_in *s = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	inet_pton(AF_INET, ip, &s->sin_addr);
	*sl = sizeof(*s);
}

/* Raw query bytes for name/type with id, optionally with EDNS size. */
static size_t
mkquery(uint8_t *buf, size_t cap, const char *name, uint16_t type,
    uint16_t id, uint16_t edns)
{
	ldns_pkt *pkt = NULL;
	uint8_t *wire = NULL;
	size_t len = 0;

	ck_assert_int_eq(ldns_pkt_query_new_frm_str(&pkt, name, type,
	    LDNS_RR_CLASS_IN, LDNS_RD), LDNS_STATUS_OK);
	ldns_pkt_set_id(pkt, id);
	if (edns) {
		ldns_pkt_set_edns_udp_size(pkt, edns);
	}
	ck_assert_int_eq(ldns_pkt2wire(&wire, pkt, &len), LDNS_STATUS_OK);
	ck_assert_uint_le(len, cap);
	memcpy(buf, wire, len);
	LDNS_FREE(wire);
	ldns_pkt_free(pkt);
	return len;
}

/* Send a UDP query directly (no proxy); 0 on an answer. Used to wait for
 * dnsmasq to come up and for the latency comparison. */
static int
udp_rt(uint16_t port, const uint8_t *q, size_t ql, uint8_t *r, size_t *rl,
    int ms)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct pollfd pfd;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	sa_lo(&ss, &sl, "127.0.0.1", port);
	if (fd == -1 || sendto(fd, q, ql, 0, (struct sockaddr *)&ss, sl) == -1) {
		if (fd != -1)
			close(fd);
		return -1;
	}
	pfd.fd = fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, ms) != 1 || (n = recv(fd, r, *rl, 0)) <= 0) {
		close(fd);
		return -1;
	}
	*rl = (size_t)n;
	close(fd);
	return 0;
}

static void
world_up(void)
{
	char hr[64][96], *argv[200];
	int argc = 0, i, tries;
	uint8_t q[512], r[4096];
	size_t ql, rl;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_dns.%d", (int)getpid());
	mkdir(tmpdir, 0700);
	snprintf(dm_log, sizeof(dm_log), "%s/dnsmasq.log", tmpdir);
	snprintf(pol_main, sizeof(pol_main), "%s/main.yaml", tmpdir);
	snprintf(pol_slow, sizeof(pol_slow), "%s/slow.yaml", tmpdir);
	snprintf(pol_lan, sizeof(pol_lan), "%s/lan.yaml", tmpdir);
	snprintf(pol_keep, sizeof(pol_keep), "%s/keep.yaml", tmpdir);
	snprintf(pol_edge, sizeof(pol_edge), "%s/edge.yaml", tmpdir);
	/* Edges, answered by a fake upstream: any name under example.com
	 * (answers of any size), a name with an ICMP rule beside its TCP
	 * one, and TTLs from 0 to years. */
	write_file(pol_edge,
	    "version: 1\n"
	    "name: edge\n"
	    "egress:\n"
	    "  allow:\n"
	    "    - host: \"*.example.com\"\n"
	    "      ports: [443]\n"
	    "    - host: ping.example.net\n"
	    "      protocol: icmp\n"
	    "    - host: ping.example.net\n"
	    "      ports: [443]\n"
	    "dns:\n"
	    "  min_ttl: 0s\n"
	    "  max_ttl: 3650d\n"
	    "  rate:\n"
	    "    qps: 100000\n"
	    "    burst: 100000\n");
	/* A taint keep-list naming a host on part of its ports: what the
	 * proxy learns for it must carry FW_ELEM_KEEP exactly there. */
	write_file(pol_keep,
	    "version: 1\n"
	    "name: keep\n"
	    "egress:\n"
	    "  allow:\n"
	    "    - host: allowed.example.test\n"
	    "      ports: [443, 8000-8100]\n"
	    "    - host: \"*.wild.example.test\"\n"
	    "      ports: [80]\n"
	    "    - host: alias.example.test\n"
	    "      ports: [443]\n"
	    "mcp:\n"
	    "  taint:\n"
	    "    level: confidential\n"
	    "    keep:\n"
	    "      - host: allowed.example.test\n"
	    "        ports: [443, 8050-8200]\n"
	    "      - host: alias.example.test\n"
	    "        ports: [443]\n"
	    "dns:\n"
	    "  min_ttl: 30s\n"
	    "  max_ttl: 120s\n");
	/* Private answers only with an explicit CIDR allow; a CIDR deny
	 * removes a public answer; metadata never, whatever the rules. */
	write_file(pol_lan,
	    "version: 1\n"
	    "name: lan\n"
	    "egress:\n"
	    "  allow:\n"
	    "    - host: priv.example.test\n"
	    "      ports: [443]\n"
	    "    - host: meta.example.test\n"
	    "      ports: [443]\n"
	    "    - host: allowed.example.test\n"
	    "      ports: [443]\n"
	    "    - cidr: 10.0.0.0/8\n"
	    "      ports: [443]\n"
	    "    - cidr: 169.254.0.0/16\n"
	    "      ports: [443]\n"
	    "  deny:\n"
	    "    - cidr: 192.0.2.0/24\n");
	write_file(pol_main,
	    "version: 1\n"
	    "name: dnstest\n"
	    "egress:\n"
	    "  allow:\n"
	    "    - host: allowed.example.test\n"
	    "      ports: [443]\n"
	    "    - host: \"*.wild.example.test\"\n"
	    "      ports: [80, 443]\n"
	    "    - host: alias.example.test\n"
	    "      ports: [443]\n"
	    "    - host: big.example.test\n"
	    "      ports: [443]\n"
	    "    - host: mixed.example.test\n"
	    "      ports: [443]\n"
	    "    - host: meta.example.test\n"
	    "      ports: [443]\n"
	    "    - host: loop.example.test\n"
	    "      ports: [443]\n"
	    "    - host: priv.example.test\n"
	    "      ports: [443]\n"
	    "    - host: nowhere.example.test\n"
	    "      ports: [443]\n"
	    "  deny:\n"
	    "    - host: denied.example.test\n"
	    "dns:\n"
	    "  min_ttl: 30s\n"
	    "  max_ttl: 120s\n"
	    "  deny_answer: nxdomain\n"
	    "  rate:\n"
	    "    qps: 100000\n"
	    "    burst: 100000\n"
	    "  max_label_length: 40\n"
	    "  entropy:\n"
	    "    min_length: 20\n"
	    "    max_bits_per_char: 3.5\n");
	write_file(pol_slow,
	    "version: 1\n"
	    "name: slow\n"
	    "egress:\n"
	    "  allow:\n"
	    "    - host: allowed.example.test\n"
	    "      ports: [443]\n"
	    "dns:\n"
	    "  rate:\n"
	    "    qps: 1\n"
	    "    burst: 5\n");
	pol_cidr_parse("192.0.2.0/24", &treat_buf[0]);
	pol_cidr_parse("198.51.100.0/24", &treat_buf[1]);
	pol_cidr_parse("2001:db8::/32", &treat_buf[2]);
	treat = treat_buf;

	for (tries = 0; tries < 5; tries++) {
		char a_port[32], a_log[340];
		int st;

		dm_port = free_port(SOCK_DGRAM);
		argc = 0;
		argv[argc++] = "dnsmasq";
		argv[argc++] = "--no-daemon";
		argv[argc++] = "--no-resolv";
		argv[argc++] = "--no-hosts";
		argv[argc++] = "--conf-file=/dev/null";
		argv[argc++] = "--listen-address=127.0.0.1";
		argv[argc++] = "--bind-interfaces";
		argv[argc++] = "--log-queries";
		snprintf(a_port, sizeof(a_port), "--port=%u", dm_port);
		argv[argc++] = a_port;
		snprintf(a_log, sizeof(a_log), "--log-facility=%s", dm_log);
		argv[argc++] = a_log;
		i = 0;
		snprintf(hr[i++], 96, "--host-record=allowed.example.test,192.0.2.10,2001:db8::10,600");
		snprintf(hr[i++], 96, "--host-record=a.wild.example.test,192.0.2.11,10");
		snprintf(hr[i++], 96, "--host-record=target.example.test,198.51.100.7,300");
		snprintf(hr[i++], 96, "--cname=alias.example.test,target.example.test");
		snprintf(hr[i++], 96, "--host-record=mixed.example.test,192.0.2.30,60");
		snprintf(hr[i++], 96, "--host-record=mixed.example.test,10.0.0.1,60");
		snprintf(hr[i++], 96, "--host-record=meta.example.test,169.254.169.254,60");
		snprintf(hr[i++], 96, "--host-record=loop.example.test,127.0.0.1,60");
		snprintf(hr[i++], 96, "--host-record=priv.example.test,10.0.0.1,60");
		snprintf(hr[i++], 96, "--host-record=denied.example.test,192.0.2.99,60");
		snprintf(hr[i++], 96, "--host-record=secret.other.test,192.0.2.98,60");
		for (int k = 0; k < i; k++)
			argv[argc++] = hr[k];
		{
			static char big[100][80];

			for (int k = 0; k < 100; k++) {
				snprintf(big[k], sizeof(big[k]),
				    "--host-record=big.example.test,198.51.100.%d,60",
				    k + 1);
				argv[argc++] = big[k];
			}
		}
		argv[argc] = NULL;
		dm_pid = fork();
		if (dm_pid == 0) {
			int dn = open("/dev/null", O_RDWR);

			/* If the suite dies, dnsmasq goes with it. */
			prctl(PR_SET_PDEATHSIG, SIGTERM);

			dup2(dn, 1);
			dup2(dn, 2);
			execvp("dnsmasq", argv);
			_exit(127);
		}
		ck_assert_int_gt(dm_pid, 0);
		/* Wait until it answers; bounded. */
		ql = mkquery(q, sizeof(q), "allowed.example.test", 1, 1, 0);
		for (i = 0; i < 100; i++) {
			rl = sizeof(r);
			if (udp_rt(dm_port, q, ql, r, &rl, 50) == 0)
				break;
			if (waitpid(dm_pid, &st, WNOHANG) == dm_pid) {
				dm_pid = -1;
				break;
			}
		}
		if (dm_pid != -1 && i < 100)
			break;
		if (dm_pid != -1) {
			kill(dm_pid, SIGTERM);
			waitpid(dm_pid, NULL, 0);
			dm_pid = -1;
		}
	}
	if (dm_pid == -1) {
		fprintf(stderr, "check_dns: dnsmasq did not start\n");
		abort();
	}
	dead_port = free_port(SOCK_DGRAM);
}

static void
world_down(void)
{
	char cmd[400];

	if (dm_pid > 0) {
		kill(dm_pid, SIGTERM);
		waitpid(dm_pid, NULL, 0);
		dm_pid = -1;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (tmpdir[0] != '\0' && system(cmd) != 0)
		fprintf(stderr, "check_dns: could not remove %s\n", tmpdir);
}

/* How many times dnsmasq logged a query for name. */
static int
dm_queries(const char *name)
{
	FILE *f = fopen(dm_log, "r");
	char line[512], pat[300];
	int n = 0;

	if (f == NULL)
		return -1;
	snprintf(pat, sizeof(pat), "] %s from", name);
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, "query[") != NULL && strstr(line, pat) != NULL)
			n++;
	fclose(f);
	return n;
}

/* ------------------------------------------------------------ the proxy */

struct elog {
	pthread_mutex_t		mu;
	struct fw_elem		elems[1024];
	size_t			nelems;
	int			calls;
	int			fail;
	int			gone;		/* lookup fails from now on */
	int			client_fd;	/* must have no answer yet */
	int			early;		/* answers seen before learn */
	struct dns_event	*ev;
	size_t			nev;
	size_t			last_n;		/* elements of the last call */
	struct fw_elem		last[1024];
	/* Fail any batch holding this IPv4 address (0.0.0.0: none). */
	uint8_t			fail_addr[4];
	/* hold: the next learn call waits (in the loop thread) until the
	 * test clears it, so the test can queue more queries meanwhile;
	 * held tells the test that the call has begun. */
	int			hold, held;
	pthread_cond_t		cv;
	/* When set, 127.0.0.3 (policy slow) is the sandbox of this id. */
	char			id_as[33];
	int			taint5;		/* 127.0.0.5 is tainted now */
};

static struct elog	L;
static struct pol_policy *pmain, *pslow, *plan, *pkeep, *pedge;
static struct ev_loop	*loop;
static struct dns_proxy	*proxy;
static pthread_t	 thr;
static int		 stopfd = -1;
static uint16_t		 pport;

static int
h_lookup(void *ctx, const struct sockaddr *src, socklen_t len,
    struct dns_client *c)
{
	const struct sockaddr_in *s = (const struct sockaddr_in *)src;
	char ip[INET_ADDRSTRLEN];

	struct elog *l = ctx;
	int gone;

	pthread_mutex_lock(&l->mu);
	gone = l->gone;
	pthread_mutex_unlock(&l->mu);
	if (gone)
		return -1;
	if (src->sa_family == AF_INET6 &&
	    len >= sizeof(struct sockaddr_in6) && IN6_IS_ADDR_LOOPBACK(
	    &((const struct sockaddr_in6 *)src)->sin6_addr)) {
		memset(c, 0, sizeof(*c));
		snprintf(c->id, sizeof(c->id), "sbx-v6");
		snprintf(c->ifname, sizeof(c->ifname), SBX_IF);
		c->policy = pmain;
		return 0;
	}
	if (src->sa_family != AF_INET || len < sizeof(*s))
		return -1;
	inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
	memset(c, 0, sizeof(*c));
	if (strcmp(ip, "127.0.0.1") == 0) {
		snprintf(c->id, sizeof(c->id), "sbx-main");
		c->policy = pmain;
	} else if (strcmp(ip, "127.0.0.3") == 0) {
		pthread_mutex_lock(&l->mu);
		snprintf(c->id, sizeof(c->id), "%s",
		    l->id_as[0] != '\0' ? l->id_as : "sbx-slow");
		pthread_mutex_unlock(&l->mu);
		c->policy = pslow;
	} else if (strcmp(ip, "127.0.0.4") == 0) {
		snprintf(c->id, sizeof(c->id), "sbx-lan");
		c->policy = plan;
	} else if (strcmp(ip, "127.0.0.5") == 0) {
		snprintf(c->id, sizeof(c->id), "sbx-keep");
		c->policy = pkeep;
		pthread_mutex_lock(&l->mu);
		c->tainted = l->taint5 != 0;
		pthread_mutex_unlock(&l->mu);
	} else if (strcmp(ip, "127.0.0.6") == 0) {
		snprintf(c->id, sizeof(c->id), "sbx-tainted");
		c->policy = pkeep;
		c->tainted = true;
	} else if (strcmp(ip, "127.0.0.7") == 0) {
		snprintf(c->id, sizeof(c->id), "sbx-edge");
		c->policy = pedge;
	} else
		return -1;
	snprintf(c->ifname, sizeof(c->ifname), SBX_IF);
	return 0;
}

static int
h_learn(void *ctx, uint64_t ticket, const struct fw_elem *e, size_t n,
    char *err, size_t errlen)
{
	struct elog *l = ctx;
	struct pollfd pfd;
	int rc = 0;

	(void)ticket;	/* synchronous: the asynchronous side is check_dns_learn */

	pthread_mutex_lock(&l->mu);
	l->calls++;
	if (l->client_fd != -1) {
		pfd.fd = l->client_fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 0) != 0)
			l->early++;
	}
	for (size_t i = 0; i < n && l->nelems < 1024; i++)
		l->elems[l->nelems++] = e[i];
	l->last_n = n;
	memcpy(l->last, e, (n < 1024 ? n : 1024) * sizeof(*e));
	if (l->fail) {
		snprintf(err, errlen, "test: told to fail");
		rc = -1;
	}
	/* What fw_learn refuses (netns/fw_elem.c valid_elem), refused here
	 * too: TCP or UDP, a port range, a timeout. */
	for (size_t i = 0; i < n; i++)
		if ((e[i].proto != IPPROTO_TCP && e[i].proto != IPPROTO_UDP) ||
		    e[i].port_lo > e[i].port_hi || e[i].timeout_ms == 0) {
			snprintf(err, errlen, "test: element %zu invalid", i);
			rc = -1;
		}
	for (size_t i = 0; i < n; i++)
		if ((l->fail_addr[0] | l->fail_addr[1] | l->fail_addr[2] |
		    l->fail_addr[3]) != 0 && e[i].family == AF_INET &&
		    memcmp(e[i].addr, l->fail_addr, 4) == 0) {
			snprintf(err, errlen, "test: refused element");
			rc = -1;
		}
	if (l->hold) {
		struct timespec ts;

		/* Bounded: a test that forgets to release fails, it does
		 * not hang. */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 10;
		l->held = 1;
		pthread_cond_broadcast(&l->cv);
		while (l->hold && pthread_cond_timedwait(&l->cv, &l->mu,
		    &ts) == 0)
			;
		l->hold = 0;
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

static void
h_record(void *ctx, const struct dns_event *ev)
{
	struct elog *l = ctx;

	pthread_mutex_lock(&l->mu);
	if (l->nev < MAXEV)
		l->ev[l->nev++] = *ev;
	pthread_mutex_unlock(&l->mu);
}

static void
stop_cb(struct ev_loop *lp, int fd, unsigned events, void *arg)
{
	uint64_t v;

	(void)events;
	(void)arg;
	if (read(fd, &v, sizeof(v)) < 0)
		return;
	ev_stop(lp);
}

static void *
run_loop(void *arg)
{
	(void)arg;
	ev_run(loop);
	return NULL;
}

struct pcfg {
	uint16_t	up[3];		/* upstream ports, 0 = end */
	uint32_t	timeout_ms;
	uint32_t	tcp_idle_ms;
	uint32_t	max_tcp_conns;
	uint32_t	tcp_per_sandbox;
	uint32_t	max_answer_addrs;
	bool		v6;		/* listen on ::1 */
	bool		no_cache;
	uint32_t	cache_max;
};

static void
proxy_up(const struct pcfg *pc)
{
	struct dns_config cfg;
	struct dns_hooks h;
	char err[256];
	size_t i;

	memset(&cfg, 0, sizeof(cfg));
	sa_lo(&cfg.listen, &cfg.listen_len, "127.0.0.1", 0);
	if (pc->v6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&cfg.listen;

		memset(&cfg.listen, 0, sizeof(cfg.listen));
		s6->sin6_family = AF_INET6;
		s6->sin6_addr = in6addr_loopback;
		cfg.listen_len = sizeof(*s6);
	}
	pol_addr_parse("10.231.255.254", &cfg.service_addr);
	for (i = 0; i < 3 && pc->up[i] != 0; i++)
		sa_lo(&cfg.upstreams[i], &cfg.upstream_lens[i], "127.0.0.1",
		    pc->up[i]);
	cfg.nupstreams = i;
	cfg.timeout_ms = pc->timeout_ms ? pc->timeout_ms : 2000;
	cfg.tcp_idle_ms = pc->tcp_idle_ms;
	cfg.max_tcp_conns = pc->max_tcp_conns;
	cfg.tcp_per_sandbox = pc->tcp_per_sandbox;
	cfg.max_answer_addrs = pc->max_answer_addrs;
	cfg.no_cache = pc->no_cache;
	cfg.cache_max = pc->cache_max;
	cfg.treat_as_public = treat;
	cfg.ntreat_as_public = 3;
	memset(&h, 0, sizeof(h));
	h.lookup = h_lookup;
	h.learn = h_learn;
	h.record = h_record;
	h.ctx = &L;
	loop = ev_new();
	ck_assert_ptr_nonnull(loop);
	proxy = dns_new(loop, &cfg, &h, err, sizeof(err));
	ck_assert_msg(proxy != NULL, "dns_new: %s", err);
	pport = dns_local_port(proxy);
	ck_assert_uint_ne(pport, 0);
	stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ck_assert_int_ne(stopfd, -1);
	ck_assert_int_eq(ev_add(loop, stopfd, EV_READ, stop_cb, NULL), 0);
	ck_assert_int_eq(pthread_create(&thr, NULL, run_loop, NULL), 0);
}

static void
setup(void)
{
	struct pol_errors *errs = pol_errors_new(8);

	memset(&L, 0, sizeof(L));
	pthread_mutex_init(&L.mu, NULL);
	pthread_cond_init(&L.cv, NULL);
	L.client_fd = -1;
	L.ev = calloc(MAXEV, sizeof(*L.ev));
	ck_assert_ptr_nonnull(L.ev);
	pmain = pol_policy_load(pol_main, NULL, errs);
	ck_assert_msg(pmain != NULL, "policy: %s", pol_errors_get(errs, 0));
	pslow = pol_policy_load(pol_slow, NULL, errs);
	ck_assert_msg(pslow != NULL, "policy: %s", pol_errors_get(errs, 0));
	plan = pol_policy_load(pol_lan, NULL, errs);
	ck_assert_msg(plan != NULL, "policy: %s", pol_errors_get(errs, 0));
	pkeep = pol_policy_load(pol_keep, NULL, errs);
	ck_assert_msg(pkeep != NULL, "policy: %s", pol_errors_get(errs, 0));
	pedge = pol_policy_load(pol_edge, NULL, errs);
	ck_assert_msg(pedge != NULL, "policy: %s", pol_errors_get(errs, 0));
	pol_errors_free(errs);
	proxy = NULL;
	/* Each test reads only its own queries in dnsmasq's log (which
	 * dnsmasq opens for appending). */
	if (truncate(dm_log, 0) == -1)
		abort();
}

static void
proxy_down(void)
{
	uint64_t one = 1;

	if (proxy == NULL)
		return;
	if (write(stopfd, &one, sizeof(one)) != sizeof(one))
		abort();
	pthread_join(thr, NULL);
	ev_del(loop, stopfd);
	close(stopfd);
	dns_free(proxy);
	ev_free(loop);
	proxy = NULL;
	loop = NULL;
}

static void
teardown(void)
{
	proxy_down();
	pol_policy_free(pmain);
	pol_policy_free(pslow);
	pol_policy_free(plan);
	pol_policy_free(pkeep);
	pol_policy_free(pedge);
	free(L.ev);
	pthread_cond_destroy(&L.cv);
	pthread_mutex_destroy(&L.mu);
}

static void
proxy_default(void)
{
	struct pcfg pc = { .up = { dm_port } };

	proxy_up(&pc);
}

/* ------------------------------------------------------------ a client */

struct ans {
	int		rcode;		/* -1: no answer */
	bool		tc;
	uint16_t	id;
	size_t		nan;
	uint16_t	types[256];
	uint32_t	ttls[256];
	char		addrs[256][INET6_ADDRSTRLEN];
	size_t		wirelen;
	uint8_t		wire[4096];
};

static void
parse_ans(const uint8_t *m, size_t len, struct ans *a)
{
	ldns_pkt *pkt = NULL;
	ldns_rr_list *an;
	size_t i;

	memset(a, 0, sizeof(*a));
	a->rcode = -1;
	if (ldns_wire2pkt(&pkt, m, len) != LDNS_STATUS_OK)
		return;
	a->rcode = ldns_pkt_get_rcode(pkt);
	a->tc = ldns_pkt_tc(pkt);
	a->id = ldns_pkt_id(pkt);
	an = ldns_pkt_answer(pkt);
	for (i = 0; i < ldns_rr_list_rr_count(an) && i < 256; i++) {
		ldns_rr *rr = ldns_rr_list_rr(an, i);
		ldns_rdf *rd = ldns_rr_rdf(rr, 0);

		a->types[i] = ldns_rr_get_type(rr);
		a->ttls[i] = ldns_rr_ttl(rr);
		if (a->types[i] == LDNS_RR_TYPE_A)
			inet_ntop(AF_INET, ldns_rdf_data(rd), a->addrs[i],
			    sizeof(a->addrs[i]));
		else if (a->types[i] == LDNS_RR_TYPE_AAAA)
			inet_ntop(AF_INET6, ldns_rdf_data(rd), a->addrs[i],
			    sizeof(a->addrs[i]));
	}
	a->nan = i;
	a->wirelen = len < sizeof(a->wire) ? len : sizeof(a->wire);
	memcpy(a->wire, m, a->wirelen);
	ldns_pkt_free(pkt);
}

/* A client socket of type (SOCK_DGRAM or SOCK_STREAM) connected to the
 * proxy, bound to ip first unless NULL; rcvbuf, when not 0, is its receive
 * buffer, set before connecting so a TCP window stays small. */
static int
client(int type, const char *ip, int rcvbuf)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd = socket(AF_INET, type, 0);

	ck_assert_int_ne(fd, -1);
	if (rcvbuf != 0)
		ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF,
		    &rcvbuf, sizeof(rcvbuf)), 0);
	if (ip != NULL) {
		sa_lo(&ss, &sl, ip, 0);
		ck_assert_int_eq(bind(fd, (struct sockaddr *)&ss, sl), 0);
	}
	sa_lo(&ss, &sl, "127.0.0.1", pport);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&ss, sl), 0);
	return fd;
}

/* Receive one datagram within the bound; -1 if none. */
static ssize_t
recv_bounded(int fd, uint8_t *buf, size_t cap, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	if (poll(&pfd, 1, ms) != 1)
		return -1;
	return recv(fd, buf, cap, 0);
}

/* One UDP query from ip through the proxy, its answer awaited for ms. */
static void
ask_from_ms(const char *ip, const char *name, uint16_t type, uint16_t edns,
    struct ans *a, int ms)
{
	uint8_t q[512], r[65536];
	size_t ql;
	ssize_t n;
	uint16_t id = (uint16_t)(rand() & 0xffff);
	int fd = client(SOCK_DGRAM, ip, 0);

	ql = mkquery(q, sizeof(q), name, type, id, edns);
	pthread_mutex_lock(&L.mu);
	L.client_fd = fd;
	pthread_mutex_unlock(&L.mu);
	ck_assert_int_eq(send(fd, q, ql, 0), (ssize_t)ql);
	n = recv_bounded(fd, r, sizeof(r), ms);
	pthread_mutex_lock(&L.mu);
	L.client_fd = -1;
	pthread_mutex_unlock(&L.mu);
	close(fd);
	memset(a, 0, sizeof(*a));
	a->rcode = -1;
	if (n > 0)
		parse_ans(r, (size_t)n, a);
	if (a->rcode != -1)
		ck_assert_uint_eq(a->id, id);
}

/* One UDP query from ip through the proxy. */
static void
ask_from(const char *ip, const char *name, uint16_t type, uint16_t edns,
    struct ans *a)
{
	ask_from_ms(ip, name, type, edns, a, RECV_MS);
}

static void
ask(const char *name, uint16_t type, struct ans *a)
{
	ask_from("127.0.0.1", name, type, 0, a);
}

/* The last recorded event for qname (a copy), or false. */
static bool
last_event(const char *qname, struct dns_event *out)
{
	bool found = false;

	pthread_mutex_lock(&L.mu);
	for (size_t i = L.nev; i-- > 0;)
		if (strcmp(L.ev[i].qname, qname) == 0) {
			*out = L.ev[i];
			found = true;
			break;
		}
	pthread_mutex_unlock(&L.mu);
	return found;
}

static size_t
nevents(void)
{
	size_t n;

	pthread_mutex_lock(&L.mu);
	n = L.nev;
	pthread_mutex_unlock(&L.mu);
	return n;
}

static bool
has_addr(const struct ans *a, const char *ip)
{
	for (size_t i = 0; i < a->nan; i++)
		if (strcmp(a->addrs[i], ip) == 0)
			return true;
	return false;
}

/* ------------------------------------------------------------------ Core */

START_TEST(allowed_learns_before_answer)
{
	struct ans a;
	struct dns_event ev;
	char ip[INET6_ADDRSTRLEN];

	proxy_default();
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	ck_assert_str_eq(a.addrs[0], "192.0.2.10");
	/* TTL 600 upstream, max_ttl 120: the sandbox sees at most 120. */
	ck_assert_uint_le(a.ttls[0], 120);
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.calls, 1);
	ck_assert_int_eq(L.early, 0);
	ck_assert_uint_eq(L.nelems, 1);
	ck_assert_str_eq(L.elems[0].ifname, SBX_IF);
	ck_assert_uint_eq(L.elems[0].family, AF_INET);
	inet_ntop(AF_INET, L.elems[0].addr, ip, sizeof(ip));
	ck_assert_str_eq(ip, "192.0.2.10");
	ck_assert_uint_eq(L.elems[0].proto, IPPROTO_TCP);
	ck_assert_uint_eq(L.elems[0].port_lo, 443);
	ck_assert_uint_eq(L.elems[0].port_hi, 443);
	ck_assert_uint_eq(L.elems[0].timeout_ms, 120000);
	pthread_mutex_unlock(&L.mu);
	ck_assert(last_event("allowed.example.test", &ev));
	ck_assert_int_eq(ev.decision, DNS_DEC_ALLOW);
	ck_assert_str_eq(ev.sandbox, "sbx-main");
	ck_assert_uint_eq(ev.nkept, 1);
	ck_assert_uint_eq(ev.nelems, 1);
	ck_assert_uint_eq(ev.rcode, 0);
	ck_assert(strstr(ev.upstream, "127.0.0.1#") == ev.upstream);
	{
		unsigned port = 0;
		char tail;

		/* Address and port written by hand (sa_format): exact. */
		ck_assert_int_eq(sscanf(ev.upstream, "127.0.0.1#%u%c", &port,
		    &tail), 1);
		ck_assert(port > 0 && port < 65536);
		ck_assert_int_eq(sscanf(ev.client, "127.0.0.1#%u%c", &port,
		    &tail), 1);
		ck_assert(port > 0 && port < 65536);
	}

	/* AAAA the same way. */
	ask("allowed.example.test", LDNS_RR_TYPE_AAAA, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	ck_assert_str_eq(a.addrs[0], "2001:db8::10");
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.calls, 2);
	ck_assert_int_eq(L.early, 0);
	ck_assert_uint_eq(L.elems[1].family, AF_INET6);
	pthread_mutex_unlock(&L.mu);
}
END_TEST

START_TEST(ttl_min_clamp_and_wildcard_ports)
{
	struct ans a;

	proxy_default();
	/* TTL 10 < min_ttl 30: the element lives 30 s, the sandbox caches
	 * no longer than the upstream said. Two ports: two elements, one
	 * learn call. */
	ask("A.Wild.Example.Test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	ck_assert_uint_le(a.ttls[0], 10);
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.calls, 1);
	ck_assert_uint_eq(L.nelems, 2);
	ck_assert_uint_eq(L.elems[0].timeout_ms, 30000);
	ck_assert_uint_eq(L.elems[1].timeout_ms, 30000);
	ck_assert_uint_ne(L.elems[0].port_lo, L.elems[1].port_lo);
	pthread_mutex_unlock(&L.mu);
	/* Refresh on every answer: asking again learns again. */
	ask("a.wild.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.calls, 2);
	pthread_mutex_unlock(&L.mu);
}
END_TEST

START_TEST(cname_chain_classified)
{
	struct ans a;
	bool cname = false;

	proxy_default();
	ask("alias.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	for (size_t i = 0; i < a.nan; i++)
		cname |= a.types[i] == LDNS_RR_TYPE_CNAME;
	ck_assert(cname);
	ck_assert(has_addr(&a, "198.51.100.7"));
	pthread_mutex_lock(&L.mu);
	ck_assert_uint_eq(L.nelems, 1);
	ck_assert_uint_eq(L.elems[0].port_lo, 443);
	pthread_mutex_unlock(&L.mu);
}
END_TEST

START_TEST(denied_uniform_no_upstream)
{
	struct ans a, b, c;
	struct dns_event ev;

	proxy_default();
	ask("denied.example.test", LDNS_RR_TYPE_A, &a);
	ask("secret.other.test", LDNS_RR_TYPE_A, &b);
	ask("does-not-exist.other.test", LDNS_RR_TYPE_A, &c);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NXDOMAIN);
	ck_assert_int_eq(b.rcode, LDNS_RCODE_NXDOMAIN);
	ck_assert_int_eq(c.rcode, LDNS_RCODE_NXDOMAIN);
	ck_assert_uint_eq(a.nan + b.nan + c.nan, 0);
	/* Identical bytes apart from the id and the question: an existing
	 * name, a denied one and a non-existent one look the same. */
	ck_assert_uint_eq(a.wirelen - strlen("denied.example.test"),
	    b.wirelen - strlen("secret.other.test"));
	ck_assert_uint_eq(b.wirelen - strlen("secret.other.test"),
	    c.wirelen - strlen("does-not-exist.other.test"));
	ck_assert_mem_eq(a.wire + 2, b.wire + 2, 10);
	ck_assert_mem_eq(a.wire + 2, c.wire + 2, 10);
	ck_assert(last_event("secret.other.test", &ev));
	ck_assert_int_eq(ev.decision, DNS_DEC_DENY);
	ck_assert_str_eq(ev.upstream, "");
	/* An allowed query after them, seen by dnsmasq, proves its log is
	 * current; the denied names never reached it. */
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_int_ge(dm_queries("allowed.example.test"), 1);
	ck_assert_int_eq(dm_queries("denied.example.test"), 0);
	ck_assert_int_eq(dm_queries("secret.other.test"), 0);
	ck_assert_int_eq(dm_queries("does-not-exist.other.test"), 0);
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.calls, 1);
	pthread_mutex_unlock(&L.mu);
}
END_TEST

static const struct {
	const char	*name;
	const char	*kept;		/* NULL: whole answer refused */
} rebind_cases[] = {
	{ "meta.example.test", NULL },
	{ "loop.example.test", NULL },
	{ "priv.example.test", NULL },
	{ "mixed.example.test", "192.0.2.30" },
};

START_TEST(rebinding_refused)
{
	struct ans a;
	struct dns_event ev;
	const char *name = rebind_cases[_i].name;

	proxy_default();
	ask(name, LDNS_RR_TYPE_A, &a);
	ck_assert(last_event(name, &ev));
	ck_assert(ev.finding);
	ck_assert_uint_ge(ev.nremoved, 1);
	if (rebind_cases[_i].kept == NULL) {
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NXDOMAIN);
		ck_assert_uint_eq(a.nan, 0);
		ck_assert_int_eq(ev.decision, DNS_DEC_DENY);
		ck_assert_str_eq(pol_reason_name(ev.reason), "rebinding");
		pthread_mutex_lock(&L.mu);
		ck_assert_int_eq(L.calls, 0);
		pthread_mutex_unlock(&L.mu);
	} else {
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
		ck_assert_uint_eq(a.nan, 1);
		ck_assert_str_eq(a.addrs[0], rebind_cases[_i].kept);
		pthread_mutex_lock(&L.mu);
		ck_assert_uint_eq(L.nelems, 1);
		pthread_mutex_unlock(&L.mu);
	}
}
END_TEST

START_TEST(private_needs_cidr_allow)
{
	struct ans a;
	struct dns_event ev;

	proxy_default();
	/* 10.0.0.1 is kept for this sandbox: its policy allows 10/8. */
	ask_from("127.0.0.4", "priv.example.test", LDNS_RR_TYPE_A, 0, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	ck_assert_str_eq(a.addrs[0], "10.0.0.1");
	/* Metadata stays refused although 169.254/16 is "allowed". */
	ask_from("127.0.0.4", "meta.example.test", LDNS_RR_TYPE_A, 0, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NXDOMAIN);
	ck_assert(last_event("meta.example.test", &ev));
	ck_assert_str_eq(pol_reason_name(ev.reason), "rebinding");
	ck_assert_str_eq(ev.addrs[0].cls, "metadata");
	/* An explicit CIDR deny removes an allowed name's answer. */
	ask_from("127.0.0.4", "allowed.example.test", LDNS_RR_TYPE_A, 0, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NXDOMAIN);
	pthread_mutex_lock(&L.mu);
	ck_assert_uint_eq(L.nelems, 1);
	ck_assert_uint_eq(L.elems[0].addr[0], 10);
	pthread_mutex_unlock(&L.mu);
}
END_TEST

START_TEST(types_txt_any_https)
{
	struct ans a;

	proxy_default();
	ask("allowed.example.test", LDNS_RR_TYPE_TXT, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NXDOMAIN);
	ask("allowed.example.test", LDNS_RR_TYPE_ANY, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NXDOMAIN);
	ask("allowed.example.test", 65, &a);		/* HTTPS */
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 0);
	ask("allowed.example.test", 64, &a);		/* SVCB */
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 0);
	ck_assert_int_eq(dm_queries("allowed.example.test"), 0);
}
END_TEST

START_TEST(synthetic_names)
{
	struct ans a;

	proxy_default();
	ask("sluice.internal", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	ck_assert_str_eq(a.addrs[0], "10.231.255.254");
	ask("bridge.sluice.internal", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_str_eq(a.addrs[0], "10.231.255.254");
	ck_assert_int_eq(dm_queries("sluice.internal"), 0);
	ck_assert_int_eq(dm_queries("bridge.sluice.internal"), 0);
}
END_TEST

START_TEST(tunnel_names_refused)
{
	struct ans a;
	struct dns_event ev;
	/* a 40+ character label, and a high-entropy one under an allowed
	 * wildcard: both would otherwise be forwarded. */
	const char *names[] = {
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.wild.example.test",
	    "q8zk3vx0w7m2lr9pa4tj6hy1.wild.example.test",
	};

	proxy_default();
	for (size_t i = 0; i < 2; i++) {
		ask(names[i], LDNS_RR_TYPE_A, &a);
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NXDOMAIN);
		ck_assert(last_event(names[i], &ev));
		ck_assert_int_eq(ev.decision, DNS_DEC_DENY);
		ck_assert(ev.finding);
		ck_assert_int_eq(dm_queries(names[i]), 0);
	}
}
END_TEST

/* Events of sandbox id: how many, and the sum of their suppressed. */
static size_t
events_of(const char *id, uint64_t *suppressed, size_t *limited)
{
	size_t n = 0;

	*suppressed = 0;
	if (limited != NULL)
		*limited = 0;
	pthread_mutex_lock(&L.mu);
	for (size_t i = 0; i < L.nev; i++) {
		if (strcmp(L.ev[i].sandbox, id) != 0)
			continue;
		n++;
		*suppressed += L.ev[i].suppressed;
		if (limited != NULL &&
		    L.ev[i].reason == POL_REASON_RATE_LIMITED)
			(*limited)++;
	}
	pthread_mutex_unlock(&L.mu);
	return n;
}

/*
 * Over its rate a sandbox gets one recorded (and answered) rate_limited
 * denial a second; its other queries are dropped unanswered before any
 * work and only counted, and the count rides on its next record, so that
 * every query is accounted for: answered and recorded, or counted.
 */
START_TEST(rate_limit_holds)
{
	struct ans a;
	int ok = 0, denied = 0, lost, i;
	struct timespec t0, t1, pause = { 1, 200 * 1000000 };
	double el;
	uint64_t sup;
	size_t nev, nlim;

	proxy_default();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < 30; i++) {
		/* A dropped query is never answered: 500 ms is the bound
		 * for one that is (loopback, also under memcheck). */
		ask_from_ms("127.0.0.3", "allowed.example.test",
		    LDNS_RR_TYPE_A, 0, &a, 500);
		if (a.rcode == LDNS_RCODE_NOERROR)
			ok++;
		else if (a.rcode == LDNS_RCODE_NXDOMAIN)
			denied++;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	el = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	lost = 30 - ok - denied;
	/* burst 5 at 1 qps: at least the burst, never more than the burst
	 * plus what the elapsed time refilled. */
	ck_assert_int_ge(ok, 5);
	ck_assert_int_le(ok, 5 + (int)el + 1);
	/* One rate_limited answer a second at most, the rest dropped. */
	ck_assert_int_ge(denied, 1);
	ck_assert_int_le(denied, (int)el + 1);
	ck_assert_int_ge(lost, 1);
	ck_assert_int_le(dm_queries("allowed.example.test"), ok);
	/* A second later a token is back: answered, and its record carries
	 * what was dropped before it. */
	nanosleep(&pause, NULL);
	ask_from("127.0.0.3", "allowed.example.test", LDNS_RR_TYPE_A, 0, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	nev = events_of("sbx-slow", &sup, &nlim);
	ck_assert_uint_eq(nev, (size_t)(ok + denied + 1));
	ck_assert_uint_eq(nlim, (size_t)denied);
	ck_assert_uint_eq(sup, (uint64_t)lost);
	/* The other sandbox is not affected. */
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
}
END_TEST

/*
 * A flood far over the rate costs the proxy a lookup per datagram, not a
 * record or an answer: 3,000 queries from one sandbox make a handful of
 * records, every one of them is accounted for (recorded or counted on a
 * record), and another sandbox is answered meanwhile.
 */
START_TEST(rate_limit_flood_cheap)
{
	enum { N = 3000 };
	uint8_t q[512], r[4096];
	size_t ql;
	int fd, i, answered = 0;
	struct timespec t0, t1, pause = { 1, 200 * 1000000 };
	double el;
	uint64_t sup;
	size_t nev, nlim;
	struct ans a;
	ssize_t n;

	proxy_default();
	fd = client(SOCK_DGRAM, "127.0.0.3", 1 << 20);	/* burst 5, 1 qps */
	ql = mkquery(q, sizeof(q), "nope.other.test", 1, 0x7777, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < N; i++) {
		ck_assert_int_eq(send(fd, q, ql, 0), (ssize_t)ql);
		/* Paced a little, so that the kernel drops none of them
		 * before the proxy sees them (they are counted). */
		if (i % 50 == 49) {
			struct timespec ms = { 0, 2 * 1000000 };

			nanosleep(&ms, NULL);
		}
	}
	/* Meanwhile another sandbox. */
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	while ((n = recv_bounded(fd, r, sizeof(r), 300)) > 0)
		answered++;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	el = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	close(fd);
	/* The burst, what time refilled and one rate_limited a second. */
	ck_assert_int_le(answered, 5 + 2 * ((int)el + 1));
	nanosleep(&pause, NULL);
	ask_from("127.0.0.3", "nope.other.test", LDNS_RR_TYPE_A, 0, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NXDOMAIN);
	nev = events_of("sbx-slow", &sup, &nlim);
	ck_assert_uint_le(nev, (size_t)(5 + 2 * ((int)el + 2)));
	ck_assert_uint_ge(nlim, 1);
	/* Every datagram the proxy read is either recorded or counted (the
	 * kernel may have dropped some on a loaded machine, or under
	 * memcheck). */
	ck_assert_uint_le(nev - 1 + sup, N);
	ck_assert_uint_ge(nev - 1 + sup, N / 4);
}
END_TEST

/* The rate buckets' home slot of a sandbox id: the FNV-1a hash rl_take
 * uses, modulo its 4096 slots (white box: it picks colliding ids). */
static size_t
rl_home(const char *id)
{
	uint64_t h = 1469598103934665603ull;

	for (; *id != '\0'; id++)
		h = (h ^ (uint8_t)*id) * 1099511628211ull;
	return (size_t)(h % 4096);
}

/* Queries from 127.0.0.3 as sandbox id: how many were rate limited
 * (answered as such, or dropped unanswered over the rate). */
static int
ask_as(const char *id, int n)
{
	struct dns_event ev;
	struct ans a;
	int limited = 0;
	size_t before;

	pthread_mutex_lock(&L.mu);
	snprintf(L.id_as, sizeof(L.id_as), "%s", id);
	pthread_mutex_unlock(&L.mu);
	for (int i = 0; i < n; i++) {
		before = nevents();
		ask_from_ms("127.0.0.3", "nope.other.test", LDNS_RR_TYPE_A,
		    0, &a, 500);
		if (a.rcode == -1) {
			/* Dropped over the rate: no record of its own. */
			ck_assert_uint_eq(nevents(), before);
			limited++;
			continue;
		}
		ck_assert(last_event("nope.other.test", &ev));
		ck_assert_str_eq(ev.sandbox, id);
		limited += ev.reason == POL_REASON_RATE_LIMITED;
	}
	return limited;
}

/*
 * Two live sandboxes whose buckets share a home slot, once every slot they
 * may probe is held by other sandboxes (a long-running daemon's table
 * fills with the buckets of sandboxes long gone): taking a slot must not
 * hand either of them a fresh full burst on every query, or the two
 * alternating are never limited at all.
 */
START_TEST(rate_limit_survives_full_buckets)
{
	char a[33], b[33], fill[8][33];
	size_t home, nfill = 0;
	int limited = 0, i;
	struct timespec ts = { 0, 20 * 1000000 };

	proxy_default();
	snprintf(a, sizeof(a), "sbx-a");
	home = rl_home(a);
	for (i = 0; ; i++) {
		snprintf(b, sizeof(b), "sbx-b%d", i);
		if (rl_home(b) == home)
			break;
	}
	/* Eight others with the same home fill its whole probe window. */
	for (i = 0; nfill < 8; i++) {
		snprintf(fill[nfill], sizeof(fill[nfill]), "old-%d", i);
		if (rl_home(fill[nfill]) == home)
			ask_as(fill[nfill++], 1);
	}
	nanosleep(&ts, NULL);
	/* burst 5, 1 qps: 24 queries in well under a few seconds. */
	for (i = 0; i < 12; i++) {
		limited += ask_as(a, 1);
		limited += ask_as(b, 1);
	}
	ck_assert_int_ge(limited, 10);
}
END_TEST

/* Read one framed message; length or -1 (EOF, error, bound). */
static ssize_t
tcp_read_msg(int fd, uint8_t *buf, size_t cap)
{
	size_t got = 0, want = 2;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t n;

	while (got < want) {
		if (poll(&pfd, 1, RECV_MS) != 1)
			return -1;
		n = recv(fd, buf + got, want - got, 0);
		if (n <= 0)
			return -1;
		got += (size_t)n;
		if (got == 2 && want == 2) {
			want = 2 + (size_t)(buf[0] << 8 | buf[1]);
			if (want > cap)
				return -1;
		}
	}
	return (ssize_t)(want - 2);
}

START_TEST(tcp_two_queries_one_connection)
{
	uint8_t q[1024], r[70000];
	size_t l1, l2;
	ssize_t n;
	struct ans a;
	int fd, seen = 0;

	proxy_default();
	fd = client(SOCK_STREAM, NULL, 0);
	l1 = mkquery(q + 2, 500, "allowed.example.test", 1, 0x1111, 0);
	q[0] = 0; q[1] = (uint8_t)l1;
	l2 = mkquery(q + 4 + l1, 500, "big.example.test", 1, 0x2222, 0);
	q[2 + l1] = 0; q[3 + l1] = (uint8_t)l2;
	/* Both in one write: the proxy must split the stream itself. */
	ck_assert_int_eq(send(fd, q, 4 + l1 + l2, 0), (ssize_t)(4 + l1 + l2));
	for (int k = 0; k < 2; k++) {
		n = tcp_read_msg(fd, r, sizeof(r));
		ck_assert_int_gt(n, 0);
		parse_ans(r + 2, (size_t)n, &a);
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
		if (a.id == 0x1111) {
			ck_assert_uint_eq(a.nan, 1);
			seen |= 1;
		} else {
			ck_assert_uint_eq(a.id, 0x2222);
			/* The proxy retried over TCP upstream when dnsmasq
			 * truncated its UDP answer, and kept the first 32
			 * of its 100 addresses (the per-answer cap). */
			ck_assert_uint_eq(a.nan, 32);
			ck_assert(!a.tc);
			seen |= 2;
		}
	}
	ck_assert_int_eq(seen, 3);
	close(fd);
	pthread_mutex_lock(&L.mu);
	ck_assert_uint_eq(L.nelems, 33);
	ck_assert_int_eq(L.calls, 2);
	pthread_mutex_unlock(&L.mu);
}
END_TEST

START_TEST(tcp_half_close_still_answered)
{
	uint8_t q[600], r[4096];
	size_t l;
	ssize_t n;
	struct ans a;
	int fd;

	proxy_default();
	fd = client(SOCK_STREAM, NULL, 0);
	l = mkquery(q + 2, 500, "allowed.example.test", 1, 0x5555, 0);
	q[0] = 0; q[1] = (uint8_t)l;
	/* The query goes upstream; the client is done writing at once. */
	ck_assert_int_eq(send(fd, q, l + 2, 0), (ssize_t)(l + 2));
	ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
	n = tcp_read_msg(fd, r, sizeof(r));
	ck_assert_int_gt(n, 0);
	parse_ans(r + 2, (size_t)n, &a);
	ck_assert_uint_eq(a.id, 0x5555);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_str_eq(a.addrs[0], "192.0.2.10");
	/* And then the proxy closes its side. */
	ck_assert_int_eq(tcp_read_msg(fd, r, sizeof(r)), -1);
	close(fd);
}
END_TEST

START_TEST(udp_truncation_over_client_size)
{
	/* All 100 addresses of big.example.test: over 1232 bytes. */
	struct pcfg pc = { .up = { dm_port }, .max_answer_addrs = 100 };
	struct ans a;

	proxy_up(&pc);
	/* No EDNS: 512 bytes. */
	ask("big.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert(a.tc);
	ck_assert_uint_eq(a.nan, 0);
	/* EDNS 65000 is clamped to 1232: still too big. */
	ask_from("127.0.0.1", "big.example.test", LDNS_RR_TYPE_A, 65000, &a);
	ck_assert(a.tc);
	ck_assert_uint_le(a.wirelen, 1232);
	/* A small answer with EDNS fits and is not truncated. */
	ask_from("127.0.0.1", "allowed.example.test", LDNS_RR_TYPE_A, 1232,
	    &a);
	ck_assert(!a.tc);
	ck_assert_uint_eq(a.nan, 1);
}
END_TEST

START_TEST(upstream_down_servfail)
{
	struct pcfg pc = { .up = { dead_port }, .timeout_ms = 300 };
	struct ans a;
	struct dns_event ev;

	proxy_up(&pc);
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_SERVFAIL);
	ck_assert(last_event("allowed.example.test", &ev));
	ck_assert_int_eq(ev.decision, DNS_DEC_ERROR);
	ck_assert_str_eq(pol_reason_name(ev.reason), "upstream_failed");
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.calls, 0);
	pthread_mutex_unlock(&L.mu);
}
END_TEST

START_TEST(upstream_failover)
{
	struct pcfg pc = { .up = { dead_port, dm_port }, .timeout_ms = 300 };
	struct ans a;

	proxy_up(&pc);
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_str_eq(a.addrs[0], "192.0.2.10");
}
END_TEST

/* A fake upstream: a UDP socket on loopback that the test answers from
 * (fake_answer). Its port becomes pc's only upstream. */
static int
fake_upstream(struct pcfg *pc)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int sfd = socket(AF_INET, SOCK_DGRAM, 0);

	ck_assert_int_ne(sfd, -1);
	sa_lo(&ss, &sl, "127.0.0.1", 0);
	ck_assert_int_eq(bind(sfd, (struct sockaddr *)&ss, sl), 0);
	sl = sizeof(ss);
	ck_assert_int_eq(getsockname(sfd, (struct sockaddr *)&ss, &sl), 0);
	pc->up[0] = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return sfd;
}

/* Waits (bounded) for the next question the proxy forwards to the fake
 * upstream sfd: into buf (len bytes), the sender into from/fl. Returns
 * the question's length (a whole header at least). */
static size_t
fake_question(int sfd, uint8_t *buf, size_t len, struct sockaddr_storage *from,
    socklen_t *fl)
{
	struct pollfd pfd = { .fd = sfd, .events = POLLIN };
	ssize_t n;

	*fl = sizeof(*from);
	ck_assert_int_eq(poll(&pfd, 1, RECV_MS), 1);
	n = recvfrom(sfd, buf, len, 0, (struct sockaddr *)from, fl);
	ck_assert_int_gt(n, 12);
	return (size_t)n;
}

START_TEST(upstream_silent_timeout)
{
	/* An upstream that receives but never answers. */
	struct pcfg pc = { .timeout_ms = 200 };
	int sfd = fake_upstream(&pc);
	struct ans a;

	proxy_up(&pc);
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_SERVFAIL);
	close(sfd);
}
END_TEST

/* The wire answer to the forwarded question q[0..qlen): the question with
 * QR set and the records rrs[0..n) (zone-file text). Free with LDNS_FREE. */
static void
answer_wire(const uint8_t *q, size_t qlen, const char *const *rrs, size_t n,
    uint8_t **w, size_t *wl)
{
	ldns_pkt *pkt = NULL;
	size_t i;

	ck_assert_int_eq(ldns_wire2pkt(&pkt, q, qlen), LDNS_STATUS_OK);
	ldns_pkt_set_qr(pkt, true);
	for (i = 0; i < n; i++) {
		ldns_rr *rr = NULL;

		ck_assert_int_eq(ldns_rr_new_frm_str(&rr, rrs[i], 0, NULL,
		    NULL), LDNS_STATUS_OK);
		ck_assert(ldns_pkt_push_rr(pkt, LDNS_SECTION_ANSWER, rr));
	}
	ck_assert_int_eq(ldns_pkt2wire(w, pkt, wl), LDNS_STATUS_OK);
	ldns_pkt_free(pkt);
}

/* Plays the upstream for one query: waits (bounded) for the question the
 * proxy forwards to sfd and answers it with the records rrs[0..n)
 * (zone-file text). */
static void
fake_answer(int sfd, const char *const *rrs, size_t n)
{
	struct sockaddr_storage from;
	socklen_t fl;
	uint8_t buf[2048], *w = NULL;
	size_t wl, got = fake_question(sfd, buf, sizeof(buf), &from, &fl);

	answer_wire(buf, got, rrs, n, &w, &wl);
	ck_assert_int_eq(sendto(sfd, w, wl, 0, (struct sockaddr *)&from, fl),
	    (ssize_t)wl);
	LDNS_FREE(w);
}

/* The test plays the upstream: it sees the forwarded query and answers
 * with forgeries before the real answer. */
START_TEST(upstream_answers_checked)
{
	/* Both rounds must reach the upstream: no cache. */
	struct pcfg pc = { .timeout_ms = 3000, .no_cache = true };
	int sfd = fake_upstream(&pc), cfd;
	struct sockaddr_storage from;
	socklen_t fl;
	uint8_t q[512], buf[2048], fake[2048];
	size_t ql, n;
	uint16_t upid, ports[2];
	struct ans a;
	ldns_pkt *pkt;
	uint8_t *w;
	size_t wl;

	proxy_up(&pc);
	for (int round = 0; round < 2; round++) {
		cfd = client(SOCK_DGRAM, "127.0.0.1", 0);
		ql = mkquery(q, sizeof(q), "allowed.example.test", 1, 0x4242,
		    0);
		ck_assert_int_eq(send(cfd, q, ql, 0), (ssize_t)ql);
		n = fake_question(sfd, buf, sizeof(buf), &from, &fl);
		upid = (uint16_t)(buf[0] << 8 | buf[1]);
		ports[round] = ntohs(((struct sockaddr_in *)&from)->sin_port);
		/* Build a real answer for the forwarded question. */
		ck_assert_int_eq(ldns_wire2pkt(&pkt, buf, (size_t)n),
		    LDNS_STATUS_OK);
		ldns_pkt_set_qr(pkt, true);
		{
			ldns_rr *rr = NULL;

			ck_assert_int_eq(ldns_rr_new_frm_str(&rr,
			    "allowed.example.test. 60 IN A 192.0.2.10", 0,
			    NULL, NULL), LDNS_STATUS_OK);
			ldns_pkt_push_rr(pkt, LDNS_SECTION_ANSWER, rr);
		}
		ck_assert_int_eq(ldns_pkt2wire(&w, pkt, &wl), LDNS_STATUS_OK);
		ldns_pkt_free(pkt);
		/* Forgery 1: the same answer under a wrong id. */
		memcpy(fake, w, wl);
		fake[0] ^= 0x5a;
		ck_assert_int_eq(sendto(sfd, fake, wl, 0,
		    (struct sockaddr *)&from, fl), (ssize_t)wl);
		/* Forgery 2: right id, another question type. */
		memcpy(fake, w, wl);
		fake[12 + 22] = 0; fake[12 + 23] = 28;	/* qtype AAAA */
		ck_assert_int_eq(sendto(sfd, fake, wl, 0,
		    (struct sockaddr *)&from, fl), (ssize_t)wl);
		/* The real one. */
		ck_assert_int_eq(sendto(sfd, w, wl, 0,
		    (struct sockaddr *)&from, fl), (ssize_t)wl);
		LDNS_FREE(w);
		n = recv_bounded(cfd, buf, sizeof(buf), RECV_MS);
		ck_assert_int_gt(n, 0);
		parse_ans(buf, (size_t)n, &a);
		ck_assert_uint_eq(a.id, 0x4242);
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
		ck_assert_uint_eq(a.nan, 1);
		ck_assert_str_eq(a.addrs[0], "192.0.2.10");
		/* The client's id never goes upstream. */
		ck_assert_uint_ne(upid, 0x4242);
		close(cfd);
	}
	/* The first queries each open a socket of the pool: the two source
	 * ports differ. */
	ck_assert_uint_ne(ports[0], ports[1]);
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.calls, 2);
	pthread_mutex_unlock(&L.mu);
	close(sfd);
}
END_TEST

/* An upstream UDP answer longer than the size we advertised cannot be read
 * whole: the query is asked again over TCP (as for a truncated answer),
 * not left to time out. The test plays the upstream on UDP and TCP. */
START_TEST(upstream_oversized_udp_to_tcp)
{
	int sfd, lfd, afd, cfd, one = 1;
	struct sockaddr_storage ss, from;
	socklen_t sl, fl;
	struct pcfg pc = { .timeout_ms = 3000, .no_cache = true };
	struct pollfd pfd = { .events = POLLIN };
	uint8_t q[512], buf[2048], *big = calloc(1, 6000), *w;
	size_t ql, wl, got = 0, want, fq;
	ssize_t n;
	struct ans a;
	const char *rr = "allowed.example.test. 60 IN A 192.0.2.10";

	ck_assert_ptr_nonnull(big);
	sfd = fake_upstream(&pc);
	sa_lo(&ss, &sl, "127.0.0.1", pc.up[0]);	/* TCP on the same port */
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&ss, sl), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	proxy_up(&pc);
	cfd = client(SOCK_DGRAM, "127.0.0.1", 0);
	ql = mkquery(q, sizeof(q), "allowed.example.test", 1, 0x5151, 0);
	ck_assert_int_eq(send(cfd, q, ql, 0), (ssize_t)ql);
	fq = fake_question(sfd, buf, sizeof(buf), &from, &fl);
	/* 6,000 bytes under the query's id, flagged as an answer. */
	memcpy(big, buf, fq);
	big[2] |= 0x80;
	ck_assert_int_eq(sendto(sfd, big, 6000, 0, (struct sockaddr *)&from,
	    fl), 6000);
	/* The retry over TCP, answered properly. */
	pfd.fd = lfd;
	ck_assert_int_eq(poll(&pfd, 1, RECV_MS), 1);
	afd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(afd, 0);
	pfd.fd = afd;
	while (got < 2 || got < 2 + (size_t)(buf[0] << 8 | buf[1])) {
		ck_assert_int_eq(poll(&pfd, 1, RECV_MS), 1);
		n = recv(afd, buf + got, sizeof(buf) - got, 0);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
	}
	want = (size_t)(buf[0] << 8 | buf[1]);
	answer_wire(buf + 2, want, &rr, 1, &w, &wl);
	buf[0] = (uint8_t)(wl >> 8);
	buf[1] = (uint8_t)wl;
	ck_assert_int_eq(send(afd, buf, 2, 0), 2);
	ck_assert_int_eq(send(afd, w, wl, 0), (ssize_t)wl);
	LDNS_FREE(w);
	n = recv_bounded(cfd, buf, sizeof(buf), RECV_MS);
	ck_assert_int_gt(n, 0);
	parse_ans(buf, (size_t)n, &a);
	ck_assert_uint_eq(a.id, 0x5151);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	ck_assert_str_eq(a.addrs[0], "192.0.2.10");
	free(big);
	close(afd);
	close(lfd);
	close(cfd);
	close(sfd);
}
END_TEST

/*
 * An upstream that truncates every answer and then accepts TCP without
 * ever answering (as one a sandbox controls can) would have each query of
 * a flood hold a descriptor for the whole timeout. One sandbox's queries
 * hold at most 8 such connections; its 9th and later queries get SERVFAIL
 * at once ("overload"), never another connection.
 */
START_TEST(upstream_tcp_bounded)
{
	enum { N = 12 };
	int sfd, lfd, cfd[N], afd[N] = { 0 }, one = 1, i, nacc = 0, nfail = 0;
	struct sockaddr_storage ss, from;
	socklen_t sl, fl;
	/* Long enough that none of the held queries times out meanwhile. */
	struct pcfg pc = { .timeout_ms = 20000, .no_cache = true };
	struct pollfd pfd = { .events = POLLIN };
	uint8_t q[512], buf[2048];
	size_t ql, fq;
	char name[64];
	struct dns_event ev;
	ssize_t n;

	sfd = fake_upstream(&pc);
	sa_lo(&ss, &sl, "127.0.0.1", pc.up[0]);	/* TCP on the same port */
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&ss, sl), 0);
	ck_assert_int_eq(listen(lfd, 64), 0);
	proxy_up(&pc);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "t%d.wild.example.test", i);
		cfd[i] = client(SOCK_DGRAM, "127.0.0.1", 0);
		ql = mkquery(q, sizeof(q), name, 1, (uint16_t)(0x6100 + i), 0);
		ck_assert_int_eq(send(cfd[i], q, ql, 0), (ssize_t)ql);
		/* Truncated: the proxy asks again over TCP. */
		fq = fake_question(sfd, buf, sizeof(buf), &from, &fl);
		buf[2] |= 0x82;		/* QR, TC */
		ck_assert_int_eq(sendto(sfd, buf, fq, 0,
		    (struct sockaddr *)&from, fl), (ssize_t)fq);
	}
	/* The ones over the bound are answered SERVFAIL at once. */
	for (i = 0; i < N; i++) {
		n = recv_bounded(cfd[i], buf, sizeof(buf), 300);
		if (n >= 12) {
			ck_assert_uint_eq(buf[3] & 0xf, LDNS_RCODE_SERVFAIL);
			nfail++;
		}
	}
	/* And the upstream got no more connections than the bound. */
	pfd.fd = lfd;
	while (nacc < N && poll(&pfd, 1, 300) == 1) {
		afd[nacc] = accept(lfd, NULL, NULL);
		ck_assert_int_ge(afd[nacc], 0);
		nacc++;
	}
	ck_assert_int_eq(nacc, 8);
	ck_assert_int_eq(nfail, N - 8);
	ck_assert(last_event("t11.wild.example.test", &ev));
	ck_assert_str_eq(pol_reason_name(ev.reason), "overload");
	for (i = 0; i < nacc; i++)
		close(afd[i]);
	for (i = 0; i < N; i++)
		close(cfd[i]);
	close(lfd);
	close(sfd);
}
END_TEST

/* The upstream socket pool: 150 queries in flight at once are spread over
 * several random ports, no port carries more than 64 of them, ids are
 * unique per port, every answer reaches the query it answers (the
 * upstream answers in reverse order, each name with its own address), and
 * a socket older than a second takes no new query. */
START_TEST(upstream_socket_pool)
{
	enum { N = 150 };
	int sfd, cfd;
	struct sockaddr_storage from[N];
	socklen_t fl[N];
	struct pcfg pc = { .timeout_ms = 5000, .no_cache = true };
	uint8_t q[512], buf[2048], fwd[N][512];
	size_t ql, fwdlen[N];
	uint16_t port[N], id[N], nports = 0, ports[N] = { 0 }, late;
	size_t per[N];
	bool seen[N];
	ssize_t n;
	struct ans *a = calloc(1, sizeof(*a));
	int i, j, got = 0;

	ck_assert_ptr_nonnull(a);
	sfd = fake_upstream(&pc);
	proxy_up(&pc);
	cfd = client(SOCK_DGRAM, "127.0.0.1", 1 << 20);
	for (i = 0; i < N; i++) {
		char name[64];

		snprintf(name, sizeof(name), "q%d.wild.example.test", i);
		ql = mkquery(q, sizeof(q), name, LDNS_RR_TYPE_A, (uint16_t)i, 0);
		ck_assert_int_eq(send(cfd, q, ql, 0), (ssize_t)ql);
	}
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < N; i++) {
		ldns_pkt *pkt = NULL;
		char *owner;
		int k = -1;

		fwdlen[i] = fake_question(sfd, fwd[i], sizeof(fwd[i]), &from[i],
		    &fl[i]);
		port[i] = ntohs(((struct sockaddr_in *)&from[i])->sin_port);
		id[i] = (uint16_t)(fwd[i][0] << 8 | fwd[i][1]);
		ck_assert_int_eq(ldns_wire2pkt(&pkt, fwd[i], fwdlen[i]),
		    LDNS_STATUS_OK);
		owner = ldns_rdf2str(ldns_rr_owner(ldns_rr_list_rr(
		    ldns_pkt_question(pkt), 0)));
		ck_assert_int_eq(sscanf(owner, "q%d.", &k), 1);
		ck_assert(k >= 0 && k < N && !seen[k]);
		seen[k] = true;
		free(owner);
		ldns_pkt_free(pkt);
	}
	/* Spread, capped and unique per port. */
	memset(per, 0, sizeof(per));
	for (i = 0; i < N; i++) {
		for (j = 0; j < nports && ports[j] != port[i]; j++)
			;
		if (j == nports)
			ports[nports++] = port[i];
		per[j]++;
		for (j = 0; j < i; j++)
			ck_assert(port[j] != port[i] || id[j] != id[i]);
	}
	/* A wakeup's queries share a socket (sent with one sendmmsg), so the
	 * guaranteed spread is what the per-socket cap of 64 forces. */
	ck_assert_uint_ge(nports, (N + 63) / 64);
	for (j = 0; j < nports; j++)
		ck_assert_uint_le(per[j], 64);
	/* Answer in reverse order, each name with an address of its own. */
	for (i = N - 1; i >= 0; i--) {
		ldns_pkt *pkt = NULL;
		char *owner, line[128];
		const char *rr = line;
		uint8_t *w;
		size_t wl;
		int k;

		ck_assert_int_eq(ldns_wire2pkt(&pkt, fwd[i], fwdlen[i]),
		    LDNS_STATUS_OK);
		owner = ldns_rdf2str(ldns_rr_owner(ldns_rr_list_rr(
		    ldns_pkt_question(pkt), 0)));
		ldns_pkt_free(pkt);
		ck_assert_int_eq(sscanf(owner, "q%d.", &k), 1);
		snprintf(line, sizeof(line), "%s 60 IN A 192.0.2.%d", owner,
		    k % 200 + 1);
		free(owner);
		answer_wire(fwd[i], fwdlen[i], &rr, 1, &w, &wl);
		ck_assert_int_eq(sendto(sfd, w, wl, 0,
		    (struct sockaddr *)&from[i], fl[i]), (ssize_t)wl);
		LDNS_FREE(w);
	}
	memset(seen, 0, sizeof(seen));
	for (got = 0; got < N; got++) {
		char want[32];

		n = recv_bounded(cfd, buf, sizeof(buf), RECV_MS);
		ck_assert_int_gt(n, 0);
		parse_ans(buf, (size_t)n, a);
		ck_assert_int_eq(a->rcode, LDNS_RCODE_NOERROR);
		ck_assert_uint_lt(a->id, N);
		ck_assert(!seen[a->id]);
		seen[a->id] = true;
		ck_assert_uint_eq(a->nan, 1);
		snprintf(want, sizeof(want), "192.0.2.%d", a->id % 200 + 1);
		ck_assert_str_eq(a->addrs[0], want);
	}
	/* Past the age limit no pooled socket takes the next query. */
	nanosleep(&(struct timespec){ .tv_sec = 1, .tv_nsec = 100000000 }, NULL);
	ql = mkquery(q, sizeof(q), "late.wild.example.test", LDNS_RR_TYPE_A,
	    0x7777, 0);
	ck_assert_int_eq(send(cfd, q, ql, 0), (ssize_t)ql);
	{
		struct sockaddr_storage lf;
		socklen_t ll;

		fake_question(sfd, buf, sizeof(buf), &lf, &ll);
		late = ntohs(((struct sockaddr_in *)&lf)->sin_port);
	}
	for (j = 0; j < nports; j++)
		ck_assert_uint_ne(late, ports[j]);
	free(a);
	close(cfd);
	close(sfd);
}
END_TEST

/* The sandbox is removed while its query is upstream: the answer finds
 * no sandbox, nothing is learned, the client gets SERVFAIL. */
START_TEST(sandbox_gone_mid_query)
{
	struct pcfg pc = { .timeout_ms = 3000 };
	int sfd = fake_upstream(&pc), cfd;
	struct sockaddr_storage from;
	socklen_t fl;
	uint8_t q[512], buf[2048];
	size_t ql;
	ssize_t n;
	struct ans a;
	struct dns_event ev;

	proxy_up(&pc);
	cfd = client(SOCK_DGRAM, "127.0.0.1", 0);
	ql = mkquery(q, sizeof(q), "allowed.example.test", 1, 0x4343, 0);
	ck_assert_int_eq(send(cfd, q, ql, 0), (ssize_t)ql);
	fake_question(sfd, buf, sizeof(buf), &from, &fl);
	pthread_mutex_lock(&L.mu);
	L.gone = 1;
	pthread_mutex_unlock(&L.mu);
	/* Answer: the question echoed, QR set, one A record appended. */
	buf[2] |= 0x80;
	buf[7] = 1;				/* ANCOUNT 1 */
	buf[11] = 0;				/* drop our OPT */
	n = 12 + 22 + 4;
	memcpy(buf + n, "\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04"
	    "\xc0\x00\x02\x0a", 16);
	n += 16;
	ck_assert_int_eq(sendto(sfd, buf, (size_t)n, 0,
	    (struct sockaddr *)&from, fl), n);
	n = recv_bounded(cfd, buf, sizeof(buf), RECV_MS);
	ck_assert_int_gt(n, 0);
	parse_ans(buf, (size_t)n, &a);
	ck_assert_uint_eq(a.id, 0x4343);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(a.nan, 0);
	ck_assert(last_event("allowed.example.test", &ev));
	ck_assert_str_eq(pol_reason_name(ev.reason), "sandbox_gone");
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.calls, 0);
	pthread_mutex_unlock(&L.mu);
	close(cfd);
	close(sfd);
}
END_TEST

/* A sandbox tainted while its query is upstream: the answer is decided
 * under the policy and taint in force when it arrives, as a fresh query
 * would be: a name off the keep-list gets the uniform deny, recorded as
 * such, and nothing is learned. */
START_TEST(taint_mid_query_denied)
{
	struct pcfg pc = { .timeout_ms = 3000 };
	int sfd = fake_upstream(&pc), cfd;
	static const char *const rrs[] = {
	    "a.wild.example.test. 60 IN A 192.0.2.11" };
	struct sockaddr_storage from;
	socklen_t fl;
	uint8_t q[512], buf[2048], *w = NULL;
	size_t ql, got, wl;
	ssize_t n;
	struct ans a;
	struct dns_event ev;

	proxy_up(&pc);
	cfd = client(SOCK_DGRAM, "127.0.0.5", 0);
	ql = mkquery(q, sizeof(q), "a.wild.example.test", 1, 0x7a17, 0);
	ck_assert_int_eq(send(cfd, q, ql, 0), (ssize_t)ql);
	got = fake_question(sfd, buf, sizeof(buf), &from, &fl);
	pthread_mutex_lock(&L.mu);
	L.taint5 = 1;
	pthread_mutex_unlock(&L.mu);
	answer_wire(buf, got, rrs, 1, &w, &wl);
	ck_assert_int_eq(sendto(sfd, w, wl, 0, (struct sockaddr *)&from, fl),
	    (ssize_t)wl);
	LDNS_FREE(w);
	n = recv_bounded(cfd, buf, sizeof(buf), RECV_MS);
	ck_assert_int_gt(n, 0);
	parse_ans(buf, (size_t)n, &a);
	ck_assert_uint_eq(a.id, 0x7a17);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NXDOMAIN);
	ck_assert_uint_eq(a.nan, 0);
	ck_assert(last_event("a.wild.example.test", &ev));
	ck_assert_int_eq(ev.decision, DNS_DEC_DENY);
	ck_assert_str_eq(pol_reason_name(ev.reason), "tainted");
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.calls, 0);
	pthread_mutex_unlock(&L.mu);
	close(cfd);
	close(sfd);
}
END_TEST

START_TEST(ipv6_client)
{
	struct pcfg pc = { .up = { dm_port }, .v6 = true };
	struct sockaddr_in6 sa;
	uint8_t q[512], r[4096];
	size_t ql;
	ssize_t n;
	struct ans a;
	struct dns_event ev;
	int fd;

	proxy_up(&pc);
	fd = socket(AF_INET6, SOCK_DGRAM, 0);
	ck_assert_int_ne(fd, -1);
	memset(&sa, 0, sizeof(sa));
	sa.sin6_family = AF_INET6;
	sa.sin6_addr = in6addr_loopback;
	sa.sin6_port = htons(pport);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ql = mkquery(q, sizeof(q), "allowed.example.test", LDNS_RR_TYPE_AAAA,
	    0x6006, 0);
	ck_assert_int_eq(send(fd, q, ql, 0), (ssize_t)ql);
	n = recv_bounded(fd, r, sizeof(r), RECV_MS);
	ck_assert_int_gt(n, 0);
	parse_ans(r, (size_t)n, &a);
	ck_assert_uint_eq(a.id, 0x6006);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_str_eq(a.addrs[0], "2001:db8::10");
	ck_assert(last_event("allowed.example.test", &ev));
	ck_assert_str_eq(ev.sandbox, "sbx-v6");
	ck_assert(strncmp(ev.client, "::1#", 4) == 0);
	pthread_mutex_lock(&L.mu);
	ck_assert_uint_eq(L.nelems, 1);
	ck_assert_uint_eq(L.elems[0].family, AF_INET6);
	ck_assert_uint_eq(L.elems[0].addr[15], 0x10);
	pthread_mutex_unlock(&L.mu);
	close(fd);
}
END_TEST

START_TEST(learn_failure_servfail)
{
	struct ans a;
	struct dns_event ev;

	proxy_default();
	pthread_mutex_lock(&L.mu);
	L.fail = 1;
	pthread_mutex_unlock(&L.mu);
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(a.nan, 0);
	ck_assert(last_event("allowed.example.test", &ev));
	ck_assert_str_eq(pol_reason_name(ev.reason), "learn_failed");
}
END_TEST

START_TEST(unknown_source_refused)
{
	struct ans a;
	struct dns_event ev;

	proxy_default();
	ask_from("127.0.0.2", "allowed.example.test", LDNS_RR_TYPE_A, 0, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_REFUSED);
	ck_assert(last_event("allowed.example.test", &ev));
	ck_assert_int_eq(ev.decision, DNS_DEC_REFUSED);
	ck_assert_str_eq(ev.sandbox, "");
	ck_assert_int_eq(dm_queries("allowed.example.test"), 0);
}
END_TEST

/* -------------------------------------------------------------- Limits */

/* Each case: bytes, and the expected outcome (-1 dropped, else rcode). */
static size_t
bad_packet(int i, uint8_t *b, size_t cap, int *expect)
{
	static const uint8_t hdr[12] = { 0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0,
	    0, 0, 0, 0 };
	size_t n = 0;

	memcpy(b, hdr, 12);
	switch (i) {
	case 0:		/* short header */
		*expect = -1;
		return 5;
	case 1:		/* compression loop: the name points at itself */
		b[12] = 0xc0; b[13] = 12;
		b[14] = 0; b[15] = 1; b[16] = 0; b[17] = 1;
		*expect = LDNS_RCODE_FORMERR;
		return 18;
	case 2:		/* lying counts: 3 questions, one present */
		b[5] = 3;
		n = mkquery(b, cap, "allowed.example.test", 1, 0xabcd, 0);
		b[5] = 3;
		*expect = LDNS_RCODE_FORMERR;
		return n;
	case 3:		/* lying counts: answers announced, none there */
		n = mkquery(b, cap, "allowed.example.test", 1, 0xabcd, 0);
		b[7] = 9;
		*expect = LDNS_RCODE_FORMERR;
		return n;
	case 4:		/* oversized */
		n = mkquery(b, cap, "allowed.example.test", 1, 0xabcd, 0);
		memset(b + n, 0, 5000 - n);
		*expect = LDNS_RCODE_FORMERR;
		return 5000;
	case 5:		/* a response (QR=1) */
		n = mkquery(b, cap, "allowed.example.test", 1, 0xabcd, 0);
		b[2] |= 0x80;
		*expect = -1;
		return n;
	case 6:		/* QDCOUNT 0 */
		b[5] = 0;
		*expect = LDNS_RCODE_FORMERR;
		return 12;
	case 7:		/* opcode STATUS */
		n = mkquery(b, cap, "allowed.example.test", 1, 0xabcd, 0);
		b[2] = (b[2] & 0x87) | (2 << 3);
		*expect = LDNS_RCODE_NOTIMPL;
		return n;
	case 8:		/* question cut in the middle of a label */
		n = mkquery(b, cap, "allowed.example.test", 1, 0xabcd, 0);
		*expect = LDNS_RCODE_FORMERR;
		return 20;
	case 9:		/* label length past the end */
		b[12] = 63; memcpy(b + 13, "abc", 3);
		*expect = LDNS_RCODE_FORMERR;
		return 16;
	case 10:	/* a NUL byte inside a label: parsed, then denied */
		n = mkquery(b, cap, "allowed.example.test", 1, 0xabcd, 0);
		b[15] = 0;
		*expect = LDNS_RCODE_NXDOMAIN;
		return n;
	}
	*expect = -2;
	return 0;
}
#define NBAD 11

START_TEST(malformed_then_good)
{
	uint8_t b[6000], r[4096], q[512];
	size_t n, ql;
	ssize_t rn;
	int expect, fd;
	struct ans a;

	proxy_default();
	n = bad_packet(_i, b, sizeof(b), &expect);
	ck_assert_int_ne(expect, -2);
	fd = client(SOCK_DGRAM, "127.0.0.1", 0);
	ck_assert_int_eq(send(fd, b, n, 0), (ssize_t)n);
	/* The good query goes second; if the bad one was answered its
	 * answer arrives first (one socket, loopback, one proxy thread). */
	ql = mkquery(q, sizeof(q), "allowed.example.test", 1, 0x7777, 0);
	ck_assert_int_eq(send(fd, q, ql, 0), (ssize_t)ql);
	rn = recv_bounded(fd, r, sizeof(r), RECV_MS);
	ck_assert_int_ge(rn, 12);
	if (expect == -1) {
		parse_ans(r, (size_t)rn, &a);
		ck_assert_uint_eq(a.id, 0x7777);
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	} else {
		ck_assert_uint_eq((r[0] << 8 | r[1]), 0xabcd);
		ck_assert_uint_eq(r[3] & 0xf, (unsigned)expect);
		ck_assert(r[2] & 0x80);
		rn = recv_bounded(fd, r, sizeof(r), RECV_MS);
		ck_assert_int_gt(rn, 0);
		parse_ans(r, (size_t)rn, &a);
		ck_assert_uint_eq(a.id, 0x7777);
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	}
	close(fd);
}
END_TEST

/* Deterministic mutations of a valid query, over UDP and TCP; afterwards
 * the proxy still answers. */
START_TEST(mutations_keep_serving)
{
	uint8_t q[512], m[512], r[4096];
	size_t ql;
	unsigned seed = 12345;
	struct ans a;
	int fd, tfd;

	proxy_default();
	ql = mkquery(q, sizeof(q), "a.wild.example.test", 1, 0x1234, 1232);
	fd = client(SOCK_DGRAM, "127.0.0.1", 0);
	tfd = client(SOCK_STREAM, NULL, 0);
	for (int i = 0; i < 2000; i++) {
		size_t len = ql, k;

		memcpy(m, q, ql);
		for (k = 0; k < 1 + (size_t)(rand_r(&seed) % 4); k++)
			m[rand_r(&seed) % ql] = (uint8_t)rand_r(&seed);
		if (rand_r(&seed) % 5 == 0)
			len = (size_t)rand_r(&seed) % (ql + 1);
		m[2] &= 0x7f;	/* keep QR=0 so most are parsed */
		(void)send(fd, m, len, 0);
		if (i % 10 == 0) {
			uint8_t fr[2] = { (uint8_t)(len >> 8), (uint8_t)len };

			(void)send(tfd, fr, 2, MSG_NOSIGNAL);
			(void)send(tfd, m, len, MSG_NOSIGNAL);
		}
		while (recv(fd, r, sizeof(r), MSG_DONTWAIT) > 0)
			;
		/* Every 100 packets a good query must still be answered;
		 * waiting for it also keeps the flood within the proxy's
		 * socket buffer, so no good query is lost to UDP drops. */
		if (i % 100 == 99) {
			ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
			ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
		}
	}
	close(tfd);
	close(fd);
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
}
END_TEST

START_TEST(tcp_idle_and_cap)
{
	struct pcfg pc = { .up = { dm_port }, .tcp_idle_ms = 200,
	    .max_tcp_conns = 3 };
	int fds[5], i;
	uint8_t r[512], q[512];
	size_t ql;
	ssize_t n;
	struct ans a;

	proxy_up(&pc);
	for (i = 0; i < 5; i++)
		fds[i] = client(SOCK_STREAM, NULL, 0);
	/* The first three are served, the rest closed by the proxy. */
	ql = mkquery(q + 2, 500, "allowed.example.test", 1, 0x3333, 0);
	q[0] = 0; q[1] = (uint8_t)ql;
	for (i = 0; i < 5; i++) {
		(void)send(fds[i], q, ql + 2, MSG_NOSIGNAL);
		n = tcp_read_msg(fds[i], r, sizeof(r));
		if (i < 3) {
			ck_assert_int_gt(n, 0);
			parse_ans(r + 2, (size_t)n, &a);
			ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
		} else
			ck_assert_int_eq(n, -1);
	}
	/* Idle: the proxy closes the connections (EOF within the bound). */
	for (i = 0; i < 3; i++) {
		n = tcp_read_msg(fds[i], r, sizeof(r));
		ck_assert_int_eq(n, -1);
	}
	for (i = 0; i < 5; i++)
		close(fds[i]);
	/* A fresh connection still works once the idle ones are gone. */
	fds[0] = client(SOCK_STREAM, NULL, 0);
	(void)send(fds[0], q, ql + 2, MSG_NOSIGNAL);
	n = tcp_read_msg(fds[0], r, sizeof(r));
	ck_assert_int_gt(n, 0);
	close(fds[0]);
}
END_TEST

/* One address holds at most 8 of the TCP slots every sandbox shares: its
 * 9th connection is closed at once, while another address is served. */
START_TEST(tcp_per_source_cap)
{
	struct pcfg pc = { .up = { dm_port }, .max_tcp_conns = 64 };
	int fds[9], other, i;
	uint8_t r[512], q[512];
	size_t ql;
	ssize_t n;
	struct ans a;

	proxy_up(&pc);
	ql = mkquery(q + 2, 500, "allowed.example.test", 1, 0x4444, 0);
	q[0] = 0; q[1] = (uint8_t)ql;
	for (i = 0; i < 9; i++)
		fds[i] = client(SOCK_STREAM, "127.0.0.1", 0);
	for (i = 0; i < 9; i++) {
		(void)send(fds[i], q, ql + 2, MSG_NOSIGNAL);
		n = tcp_read_msg(fds[i], r, sizeof(r));
		if (i < 8) {
			ck_assert_msg(n > 0, "connection %d not served", i);
			parse_ans(r + 2, (size_t)n, &a);
			ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
		} else
			ck_assert_int_eq(n, -1);
	}
	/* Another address (no sandbox: refused, but answered). */
	other = client(SOCK_STREAM, "127.0.0.9", 0);
	(void)send(other, q, ql + 2, MSG_NOSIGNAL);
	n = tcp_read_msg(other, r, sizeof(r));
	ck_assert_int_gt(n, 0);
	parse_ans(r + 2, (size_t)n, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_REFUSED);
	close(other);
	for (i = 0; i < 9; i++)
		close(fds[i]);
}
END_TEST

/* The per-sandbox share of the TCP slots is the config's
 * (limits.dns_tcp_connections_per_sandbox): 3 here, the 4th is closed. */
START_TEST(tcp_per_sandbox_configured)
{
	struct pcfg pc = { .up = { dm_port }, .max_tcp_conns = 64,
	    .tcp_per_sandbox = 3 };
	int fds[4], i;
	uint8_t r[512], q[512];
	size_t ql;
	ssize_t n;

	proxy_up(&pc);
	ql = mkquery(q + 2, 500, "allowed.example.test", 1, 0x4545, 0);
	q[0] = 0; q[1] = (uint8_t)ql;
	for (i = 0; i < 4; i++)
		fds[i] = client(SOCK_STREAM, "127.0.0.1", 0);
	for (i = 0; i < 4; i++) {
		(void)send(fds[i], q, ql + 2, MSG_NOSIGNAL);
		n = tcp_read_msg(fds[i], r, sizeof(r));
		if (i < 3)
			ck_assert_msg(n > 0, "connection %d not served", i);
		else
			ck_assert_int_eq(n, -1);
	}
	for (i = 0; i < 4; i++)
		close(fds[i]);
}
END_TEST

/* Sends one framed A query for name with id on the TCP connection fd: the
 * rcode of its answer, or -1 (closed, or no answer within the bound). */
static int
tcp_ask(int fd, const char *name, uint16_t id)
{
	uint8_t q[512], r[512];
	size_t ql = mkquery(q + 2, sizeof(q) - 2, name, 1, id, 0);
	ssize_t n;
	struct ans a;

	q[0] = (uint8_t)(ql >> 8);
	q[1] = (uint8_t)ql;
	(void)send(fd, q, ql + 2, MSG_NOSIGNAL);
	n = tcp_read_msg(fd, r, sizeof(r));
	if (n <= 0)
		return -1;
	parse_ans(r + 2, (size_t)n, &a);
	return a.id == id ? a.rcode : -1;
}

/* The proxy closed the TCP connection fd (nothing was left to read on
 * it): EOF or a reset within the bound. */
static bool
tcp_closed(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint8_t b[512];

	return poll(&pfd, 1, RECV_MS) == 1 && recv(fd, b, sizeof(b), 0) <= 0;
}

/*
 * The TCP slots are shared by every sandbox: when all are taken, a new
 * connection from a source holding fewer than the source holding the most
 * takes the slot of that source's connection idle the longest, so however
 * the others fill the pool each sandbox gets its share. A source that
 * holds the most (or ties) is refused as before.
 */
START_TEST(tcp_pool_full_fair_share)
{
	struct pcfg pc = { .up = { dm_port }, .max_tcp_conns = 4 };
	int a[4], b, c[3], i;

	proxy_up(&pc);
	/* 127.0.0.1 takes three slots, 127.0.0.4 the last one; each is
	 * answered, so the proxy accepted them in this order. */
	for (i = 0; i < 3; i++) {
		a[i] = client(SOCK_STREAM, "127.0.0.1", 0);
		ck_assert_int_eq(tcp_ask(a[i], "allowed.example.test",
		    (uint16_t)(0x6100 + i)), LDNS_RCODE_NOERROR);
	}
	b = client(SOCK_STREAM, "127.0.0.4", 0);
	ck_assert_int_eq(tcp_ask(b, "priv.example.test", 0x6200),
	    LDNS_RCODE_NOERROR);
	/* A new sandbox is served: 127.0.0.1 (3 of 4) loses its oldest. */
	c[0] = client(SOCK_STREAM, "127.0.0.5", 0);
	ck_assert_msg(tcp_ask(c[0], "allowed.example.test", 0x6300) ==
	    LDNS_RCODE_NOERROR, "a new source was refused while another "
	    "held 3 of the 4 slots");
	ck_assert_msg(tcp_closed(a[0]), "the connection idle the longest "
	    "of the source holding the most was not the one closed");
	/* Its second one too (127.0.0.1 holds 2, it holds 1). */
	c[1] = client(SOCK_STREAM, "127.0.0.5", 0);
	ck_assert_int_eq(tcp_ask(c[1], "allowed.example.test", 0x6301),
	    LDNS_RCODE_NOERROR);
	ck_assert(tcp_closed(a[1]));
	/* Now it holds the most (2, 1, 1): its third is refused. */
	c[2] = client(SOCK_STREAM, "127.0.0.5", 0);
	ck_assert_int_eq(tcp_ask(c[2], "allowed.example.test", 0x6302), -1);
	/* 127.0.0.1 holds fewer: it takes 127.0.0.5's oldest back. */
	a[3] = client(SOCK_STREAM, "127.0.0.1", 0);
	ck_assert_int_eq(tcp_ask(a[3], "allowed.example.test", 0x6103),
	    LDNS_RCODE_NOERROR);
	ck_assert(tcp_closed(c[0]));
	/* Everyone else kept theirs. */
	ck_assert_int_eq(tcp_ask(a[2], "allowed.example.test", 0x6102),
	    LDNS_RCODE_NOERROR);
	ck_assert_int_eq(tcp_ask(b, "priv.example.test", 0x6201),
	    LDNS_RCODE_NOERROR);
	ck_assert_int_eq(tcp_ask(c[1], "allowed.example.test", 0x6303),
	    LDNS_RCODE_NOERROR);
	for (i = 0; i < 4; i++)
		close(a[i]);
	for (i = 0; i < 3; i++)
		close(c[i]);
	close(b);
}
END_TEST

/*
 * A connection taken for a new source while its query is upstream: the
 * answer, when it comes, has nowhere to go; the query is still recorded
 * (no answer sent) and nothing is used after it is freed (ASan).
 */
START_TEST(tcp_evicted_with_query_pending)
{
	struct pcfg pc = { .timeout_ms = 3000, .max_tcp_conns = 2 };
	int sfd = fake_upstream(&pc), a0, a1, c;
	const char *rr = "allowed.example.test. 60 IN A 192.0.2.10";
	struct sockaddr_storage from;
	socklen_t fl;
	uint8_t q[512], buf[2048], *w = NULL;
	size_t ql, got, wl;
	struct dns_event ev;
	bool seen = false;

	proxy_up(&pc);
	a0 = client(SOCK_STREAM, "127.0.0.1", 0);
	ql = mkquery(q + 2, sizeof(q) - 2, "allowed.example.test", 1,
	    0x7001, 0);
	q[0] = 0;
	q[1] = (uint8_t)ql;
	ck_assert_int_eq(send(a0, q, ql + 2, 0), (ssize_t)(ql + 2));
	got = fake_question(sfd, buf, sizeof(buf), &from, &fl);
	/* Denied names are answered locally: no second upstream query. */
	a1 = client(SOCK_STREAM, "127.0.0.1", 0);
	ck_assert_int_eq(tcp_ask(a1, "denied.example.test", 0x7002),
	    LDNS_RCODE_NXDOMAIN);
	c = client(SOCK_STREAM, "127.0.0.5", 0);
	ck_assert_int_ne(tcp_ask(c, "denied.example.test", 0x7003), -1);
	ck_assert(tcp_closed(a0));
	/* The upstream answers the evicted connection's query now. */
	answer_wire(buf, got, &rr, 1, &w, &wl);
	ck_assert_int_eq(sendto(sfd, w, wl, 0, (struct sockaddr *)&from, fl),
	    (ssize_t)wl);
	LDNS_FREE(w);
	for (int i = 0; i < RECV_MS / 10 && !seen; i++) {
		seen = last_event("allowed.example.test", &ev);
		if (!seen)
			usleep(10 * 1000);
	}
	ck_assert_msg(seen, "the evicted connection's query not recorded");
	ck_assert(ev.tcp);
	ck_assert_uint_eq(ev.rcode, 255);	/* no answer sent */
	/* The proxy goes on serving the others. */
	ck_assert_int_eq(tcp_ask(a1, "denied.example.test", 0x7004),
	    LDNS_RCODE_NXDOMAIN);
	ck_assert_int_ne(tcp_ask(c, "denied.example.test", 0x7005), -1);
	close(a0);
	close(a1);
	close(c);
	close(sfd);
}
END_TEST

/*
 * Slowloris: a client that drips a message byte by byte, each byte within
 * the idle period, is not "active": the connection slots are shared by
 * every sandbox. A message must arrive whole within one idle period.
 */
START_TEST(tcp_slow_drip_closed)
{
	struct pcfg pc = { .up = { dm_port }, .tcp_idle_ms = 300 };
	uint8_t q[512], r[512];
	size_t ql, i;
	bool closed = false;
	struct ans a;
	ssize_t n;
	int fd;

	proxy_up(&pc);
	fd = client(SOCK_STREAM, NULL, 0);
	ql = mkquery(q + 2, 500, "allowed.example.test", 1, 0x5105, 0);
	q[0] = 0; q[1] = (uint8_t)ql;
	/* One byte every 100 ms: 30 of them take 3 s, ten idle periods. */
	for (i = 0; i < 30 && i < ql + 2 && !closed; i++) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		(void)send(fd, q + i, 1, MSG_NOSIGNAL);
		if (poll(&pfd, 1, 100) == 1 && recv(fd, r, sizeof(r), 0) <= 0)
			closed = true;
	}
	ck_assert_msg(closed, "a dripping client kept its slot for %zu bytes",
	    i);
	close(fd);
	/* A client that sends whole messages is served as before. */
	fd = client(SOCK_STREAM, NULL, 0);
	ck_assert_int_eq(send(fd, q, ql + 2, 0), (ssize_t)(ql + 2));
	n = tcp_read_msg(fd, r, sizeof(r));
	ck_assert_int_gt(n, 0);
	parse_ans(r + 2, (size_t)n, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	close(fd);
}
END_TEST

START_TEST(malformed_costs_tokens)
{
	uint8_t b[600], r[4096];
	size_t n;
	ssize_t rn;
	int fd, expect, formerr = 0, i;
	struct timespec t0, t1;
	double el;
	struct ans a;

	proxy_default();
	fd = client(SOCK_DGRAM, "127.0.0.3", 0);		/* burst 5, 1 qps */
	n = bad_packet(3, b, sizeof(b), &expect);	/* lying counts */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < 20; i++)
		ck_assert_int_eq(send(fd, b, n, 0), (ssize_t)n);
	/* A good query last: its answer closes the exchange. */
	n = mkquery(b, sizeof(b), "allowed.example.test", 1, 0x6666, 0);
	ck_assert_int_eq(send(fd, b, n, 0), (ssize_t)n);
	for (;;) {
		/* Over the rate the good query may be dropped unanswered
		 * like the garbage before it: the bound ends the wait. */
		rn = recv_bounded(fd, r, sizeof(r), 1000);
		if (rn == -1)
			break;
		ck_assert_int_ge(rn, 12);
		if ((r[0] << 8 | r[1]) == 0x6666)
			break;
		ck_assert_uint_eq(r[3] & 0xf, LDNS_RCODE_FORMERR);
		formerr++;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	el = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	/* Garbage is answered only within the sandbox's rate. */
	ck_assert_int_ge(formerr, 1);
	ck_assert_int_le(formerr, 5 + (int)el + 1);
	/* The good query itself is over the rate by now (unless a second
	 * passed and refilled a token): uniform deny, or dropped. */
	if (rn != -1) {
		parse_ans(r, (size_t)rn, &a);
		ck_assert(a.rcode == LDNS_RCODE_NXDOMAIN || el >= 1.0);
	}
	close(fd);
}
END_TEST

START_TEST(tcp_bad_frames)
{
	static uint8_t q[2 + 6000];
	uint8_t r[4096];
	size_t l;
	ssize_t n;
	struct ans a;
	int fd;

	proxy_default();
	fd = client(SOCK_STREAM, NULL, 0);
	/* An oversized frame (5000 bytes), then a zero-length one, then a
	 * good query: FORMERR, nothing (no id to answer), the answer. */
	l = mkquery(q + 2, 500, "allowed.example.test", 1, 0x0bad, 0);
	memset(q + 2 + l, 0, 5000 - l);
	q[0] = 5000 >> 8; q[1] = 5000 & 0xff;
	ck_assert_int_eq(send(fd, q, 5002, 0), 5002);
	q[0] = 0; q[1] = 0;
	ck_assert_int_eq(send(fd, q, 2, 0), 2);
	l = mkquery(q + 2, 500, "allowed.example.test", 1, 0x600d, 0);
	q[0] = 0; q[1] = (uint8_t)l;
	ck_assert_int_eq(send(fd, q, l + 2, 0), (ssize_t)(l + 2));
	n = tcp_read_msg(fd, r, sizeof(r));
	ck_assert_int_ge(n, 12);
	ck_assert_uint_eq((r[2] << 8 | r[3]), 0x0bad);
	ck_assert_uint_eq(r[5] & 0xf, LDNS_RCODE_FORMERR);
	n = tcp_read_msg(fd, r, sizeof(r));
	ck_assert_int_gt(n, 0);
	parse_ans(r + 2, (size_t)n, &a);
	ck_assert_uint_eq(a.id, 0x600d);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	close(fd);
}
END_TEST

START_TEST(parser_table)
{
	struct dns_query q;
	uint8_t b[6000];
	int expect;
	size_t n;

	for (int i = 0; i < NBAD; i++) {
		enum dns_parse_result r;

		n = bad_packet(i, b, sizeof(b), &expect);
		r = dns_parse_query(b, n, &q);
		if (expect == -1)
			ck_assert_int_eq(r, DNS_PARSE_DROP);
		else if (expect == LDNS_RCODE_FORMERR)
			ck_assert_int_eq(r, DNS_PARSE_FORMERR);
		else if (expect == LDNS_RCODE_NOTIMPL)
			ck_assert_int_eq(r, DNS_PARSE_NOTIMP);
		else {
			ck_assert_int_eq(r, DNS_PARSE_OK);
			ck_assert(q.bad_name);
		}
	}
	n = mkquery(b, sizeof(b), "MiXeD.Example.TEST", 28, 9, 1400);
	ck_assert_int_eq(dns_parse_query(b, n, &q), DNS_PARSE_OK);
	ck_assert_str_eq(q.qname, "mixed.example.test");
	ck_assert_uint_eq(q.qtype, 28);
	ck_assert(q.edns);
	ck_assert_uint_eq(q.edns_size, 1400);
	ck_assert_uint_eq(q.id, 9);
	/* The wire form keeps the client's case for the echoed question. */
	ck_assert_mem_eq(q.qwire, "\x05MiXeD", 6);
	ck_assert_int_eq(dns_parse_query(NULL, 0, &q), DNS_PARSE_DROP);
}
END_TEST

/* Not asserted: the added latency, printed for the report. */
static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* ------------------------------------------------- cache, batches, keep */

static void
send_q(int fd, const char *name, uint16_t type, uint16_t id)
{
	uint8_t q[512];
	size_t ql = mkquery(q, sizeof(q), name, type, id, 0);

	ck_assert_int_eq(send(fd, q, ql, 0), (ssize_t)ql);
}

static void
recv_ans(int fd, uint16_t id, struct ans *a)
{
	uint8_t r[65536];
	ssize_t n = recv_bounded(fd, r, sizeof(r), RECV_MS);

	memset(a, 0, sizeof(*a));
	a->rcode = -1;
	if (n > 0)
		parse_ans(r, (size_t)n, a);
	ck_assert_msg(a->rcode != -1, "no answer within the bound");
	ck_assert_uint_eq(a->id, id);
}

/* The next learn call will wait for hold_release. */
static void
hold_next(void)
{
	pthread_mutex_lock(&L.mu);
	L.hold = 1;
	L.held = 0;
	pthread_mutex_unlock(&L.mu);
}

/* Waits (bounded) until the loop thread sits in the held learn call. */
static void
hold_wait(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += RECV_MS / 1000;
	pthread_mutex_lock(&L.mu);
	while (!L.held && pthread_cond_timedwait(&L.cv, &L.mu, &ts) == 0)
		;
	ck_assert_msg(L.held, "learn was not called");
	pthread_mutex_unlock(&L.mu);
}

static void
hold_release(void)
{
	pthread_mutex_lock(&L.mu);
	L.hold = 0;
	pthread_cond_broadcast(&L.cv);
	pthread_mutex_unlock(&L.mu);
}

static int
learn_calls(void)
{
	int n;

	pthread_mutex_lock(&L.mu);
	n = L.calls;
	pthread_mutex_unlock(&L.mu);
	return n;
}

/* A second ask for a name is answered from the cache (the upstream saw
 * one query) and still learns its element before the answer, with TTLs
 * no longer than the first answer's. */
START_TEST(cache_answer_still_learned)
{
	struct ans a, b;
	struct dns_event ev;
	int calls;

	proxy_default();
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	calls = learn_calls();
	ask("allowed.example.test", LDNS_RR_TYPE_A, &b);
	ck_assert_int_eq(b.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(b.nan, 1);
	ck_assert_str_eq(b.addrs[0], "192.0.2.10");
	ck_assert_uint_le(b.ttls[0], a.ttls[0]);
	ck_assert_int_eq(dm_queries("allowed.example.test"), 1);
	ck_assert_int_eq(learn_calls(), calls + 1);
	ck_assert(last_event("allowed.example.test", &ev));
	ck_assert_int_eq(ev.decision, DNS_DEC_ALLOW);
	ck_assert_uint_eq(ev.nelems, 1);
	ck_assert_uint_eq(ev.elems[0].port_lo, 443);
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.early, 0);
	pthread_mutex_unlock(&L.mu);
	/* A different type is a different question. */
	ask("allowed.example.test", LDNS_RR_TYPE_AAAA, &b);
	ck_assert_int_eq(dm_queries("allowed.example.test"), 2);
}
END_TEST

/* A cached answer is decided with the asking sandbox's policy: sbx-lan
 * denies 192.0.2.0/24, so the address sbx-main got must not reach it. */
START_TEST(cache_applies_asking_policy)
{
	struct ans a;

	proxy_default();
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	ask_from("127.0.0.4", "allowed.example.test", LDNS_RR_TYPE_A, 0, &a);
	ck_assert_int_eq(dm_queries("allowed.example.test"), 1);
	ck_assert_int_ne(a.rcode, LDNS_RCODE_NOERROR);
	for (size_t i = 0; i < a.nan; i++)
		ck_assert_str_ne(a.addrs[i], "192.0.2.10");
}
END_TEST

/* A cached answer pointing at metadata is refused again (the filter runs
 * on every use, not once per upstream answer) and nothing is learned. */
START_TEST(cache_rebinding_still_refused)
{
	struct ans a;
	struct dns_event ev;

	proxy_default();
	for (int i = 0; i < 2; i++) {
		ask("meta.example.test", LDNS_RR_TYPE_A, &a);
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NXDOMAIN);
		ck_assert_uint_eq(a.nan, 0);
		ck_assert(last_event("meta.example.test", &ev));
		ck_assert_int_eq(ev.decision, DNS_DEC_DENY);
		ck_assert_uint_eq(ev.nelems, 0);
		ck_assert_uint_eq(ev.nremoved, 1);
	}
	ck_assert_int_eq(dm_queries("meta.example.test"), 1);
	pthread_mutex_lock(&L.mu);
	for (size_t i = 0; i < L.nelems; i++)
		ck_assert(!(L.elems[i].family == AF_INET &&
		    L.elems[i].addr[0] == 169 && L.elems[i].addr[1] == 254));
	pthread_mutex_unlock(&L.mu);
}
END_TEST

/* Answers that become ready in the same loop iteration are learned in one
 * call (identical elements once), and none leaves before it returned. */
START_TEST(batch_one_learn_per_iteration)
{
	int c0, c1, c2, c3, calls;
	struct ans a;
	bool seen10 = false, seen11_80 = false, seen11_443 = false;

	proxy_default();
	/* Fill the cache, so that the next answers need no upstream and
	 * are all ready as soon as their queries are read. */
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ask("a.wild.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	c0 = client(SOCK_DGRAM, "127.0.0.1", 0);
	c1 = client(SOCK_DGRAM, "127.0.0.1", 0);
	c2 = client(SOCK_DGRAM, "127.0.0.1", 0);
	c3 = client(SOCK_DGRAM, "127.0.0.1", 0);
	hold_next();
	send_q(c0, "allowed.example.test", LDNS_RR_TYPE_A, 100);
	hold_wait();
	/* The loop is inside c0's learn: these three wait in the socket
	 * and are read together once it returns. */
	send_q(c1, "allowed.example.test", LDNS_RR_TYPE_A, 101);
	send_q(c2, "allowed.example.test", LDNS_RR_TYPE_A, 102);
	send_q(c3, "a.wild.example.test", LDNS_RR_TYPE_A, 103);
	calls = learn_calls();
	hold_release();
	recv_ans(c0, 100, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	recv_ans(c1, 101, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_str_eq(a.addrs[0], "192.0.2.10");
	recv_ans(c2, 102, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	recv_ans(c3, 103, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_str_eq(a.addrs[0], "192.0.2.11");
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.calls, calls + 1);
	/* 192.0.2.10:443 once (two answers), 192.0.2.11 on 80 and 443. */
	ck_assert_uint_eq(L.last_n, 3);
	for (size_t i = 0; i < L.last_n; i++) {
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, L.last[i].addr, ip, sizeof(ip));
		if (strcmp(ip, "192.0.2.10") == 0 && L.last[i].port_lo == 443)
			seen10 = true;
		if (strcmp(ip, "192.0.2.11") == 0 && L.last[i].port_lo == 80)
			seen11_80 = true;
		if (strcmp(ip, "192.0.2.11") == 0 && L.last[i].port_lo == 443)
			seen11_443 = true;
	}
	pthread_mutex_unlock(&L.mu);
	ck_assert(seen10 && seen11_80 && seen11_443);
	close(c0);
	close(c1);
	close(c2);
	close(c3);
}
END_TEST

/* A batch the kernel refuses is retried answer by answer: the answer
 * whose element is refused gets SERVFAIL, its neighbour its address. */
START_TEST(batch_failure_isolated)
{
	int c0, c1, c2;
	struct ans a;
	struct dns_event ev;

	proxy_default();
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ask("a.wild.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	c0 = client(SOCK_DGRAM, "127.0.0.1", 0);
	c1 = client(SOCK_DGRAM, "127.0.0.1", 0);
	c2 = client(SOCK_DGRAM, "127.0.0.1", 0);
	hold_next();
	send_q(c0, "allowed.example.test", LDNS_RR_TYPE_A, 200);
	hold_wait();
	send_q(c1, "allowed.example.test", LDNS_RR_TYPE_A, 201);
	send_q(c2, "a.wild.example.test", LDNS_RR_TYPE_A, 202);
	pthread_mutex_lock(&L.mu);
	inet_pton(AF_INET, "192.0.2.11", L.fail_addr);
	pthread_mutex_unlock(&L.mu);
	hold_release();
	recv_ans(c0, 200, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	recv_ans(c1, 201, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	ck_assert_str_eq(a.addrs[0], "192.0.2.10");
	recv_ans(c2, 202, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(a.nan, 0);
	ck_assert(last_event("a.wild.example.test", &ev));
	ck_assert_str_eq(pol_reason_name(ev.reason), "learn_failed");
	ck_assert_int_eq(ev.decision, DNS_DEC_ERROR);
	close(c0);
	close(c1);
	close(c2);
}
END_TEST

/* FW_ELEM_KEEP: which learned elements are on the taint keep-list. keep
 * policy: allowed.example.test on 443 and 8000-8100, keep-list 443 and
 * 8050-8200; *.wild on 80, not kept; alias (CNAME to target) on 443,
 * kept. A tainted sandbox learns only keep ports, all flagged. */
static const struct keep_case {
	const char	*ip;
	const char	*name;
	int		 rcode;
	const char	*want;	/* "lo-hi:flag ..." in element order */
} keep_cases[] = {
	{ "127.0.0.5", "allowed.example.test", LDNS_RCODE_NOERROR,
	    "443-443:1 8000-8049:0 8050-8100:1" },
	{ "127.0.0.5", "a.wild.example.test", LDNS_RCODE_NOERROR, "80-80:0" },
	{ "127.0.0.5", "alias.example.test", LDNS_RCODE_NOERROR, "443-443:1" },
	{ "127.0.0.6", "allowed.example.test", LDNS_RCODE_NOERROR,
	    "443-443:1 8050-8200:1" },
	{ "127.0.0.6", "alias.example.test", LDNS_RCODE_NOERROR, "443-443:1" },
	/* Tainted, not on the keep-list: the uniform deny, nothing learned. */
	{ "127.0.0.6", "a.wild.example.test", LDNS_RCODE_NXDOMAIN, "" },
	/* The plain policy has no keep-list: nothing is flagged. */
	{ "127.0.0.1", "allowed.example.test", LDNS_RCODE_NOERROR,
	    "443-443:0" },
};

START_TEST(keep_flag_table)
{
	const struct keep_case *kc = &keep_cases[_i];
	struct ans a;
	struct dns_event ev;
	char got[256] = "";
	size_t i;

	proxy_default();
	/* Twice: the fresh answer and the cached one flag the same. */
	for (int round = 0; round < 2; round++) {
		pthread_mutex_lock(&L.mu);
		L.nev = 0;
		pthread_mutex_unlock(&L.mu);
		ask_from(kc->ip, kc->name, LDNS_RR_TYPE_A, 0, &a);
		ck_assert_int_eq(a.rcode, kc->rcode);
		ck_assert(last_event(kc->name, &ev));
		got[0] = '\0';
		for (i = 0; i < ev.nelems; i++) {
			size_t o = strlen(got);

			snprintf(got + o, sizeof(got) - o, "%s%u-%u:%d",
			    i ? " " : "", ev.elems[i].port_lo,
			    ev.elems[i].port_hi,
			    (ev.elems[i].flags & FW_ELEM_KEEP) != 0);
		}
		ck_assert_msg(strcmp(got, kc->want) == 0,
		    "%s from %s (round %d): elements \"%s\", want \"%s\"",
		    kc->name, kc->ip, round, got, kc->want);
	}
}
END_TEST

/* The cache is bounded: with room for two answers, a third pushes the
 * oldest out and asking for it again reaches the upstream. */
START_TEST(cache_bounded)
{
	struct pcfg pc = { .up = { dm_port }, .cache_max = 2 };
	struct ans a;

	proxy_up(&pc);
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ask("a.wild.example.test", LDNS_RR_TYPE_A, &a);
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(dm_queries("allowed.example.test"), 1);
	/* (alias.example.test would not do: its CNAME has TTL 0, and an
	 * answer with a record of TTL 0 is never cached.) */
	ask("alias.example.test", LDNS_RR_TYPE_A, &a);
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(dm_queries("allowed.example.test"), 1);
	ask("big.example.test", LDNS_RR_TYPE_A, &a);
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_int_eq(dm_queries("allowed.example.test"), 2);
	ask("a.wild.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(dm_queries("a.wild.example.test"), 2);
}
END_TEST

/* no_cache: every query goes upstream. */
START_TEST(cache_off)
{
	struct pcfg pc = { .up = { dm_port }, .no_cache = true };
	struct ans a;

	proxy_up(&pc);
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_int_eq(dm_queries("allowed.example.test"), 2);
}
END_TEST

START_TEST(latency_figure)
{
	enum { N = 201 };
	static uint64_t direct[N], via[N];
	uint8_t q[512], r[4096];
	size_t ql, rl;
	struct timespec t0, t1;
	struct ans a;

	proxy_default();
	ql = mkquery(q, sizeof(q), "allowed.example.test", 1, 77, 0);
	for (int i = 0; i < N; i++) {
		rl = sizeof(r);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ck_assert_int_eq(udp_rt(dm_port, q, ql, r, &rl, RECV_MS), 0);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		direct[i] = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000 +
		    (uint64_t)(t1.tv_nsec - t0.tv_nsec) / 1000;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ask("allowed.example.test", LDNS_RR_TYPE_A, &a);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
		via[i] = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000 +
		    (uint64_t)(t1.tv_nsec - t0.tv_nsec) / 1000;
	}
	qsort(direct, N, sizeof(direct[0]), cmp_u64);
	qsort(via, N, sizeof(via[0]), cmp_u64);
	fprintf(stderr, "check_dns: latency median direct %llu us, via proxy "
	    "%llu us, added %lld us (n=%d)\n",
	    (unsigned long long)direct[N / 2], (unsigned long long)via[N / 2],
	    (long long)via[N / 2] - (long long)direct[N / 2], N);
	ck_assert_uint_eq(nevents(), N);
}
END_TEST

/*
 * dns_filter_answer alone (no proxy, no kernel): what is kept of an answer,
 * table by table. The policy allows *.example.com on 443 and 8000-8010 and
 * one private range, and denies one public range; TTLs clamp to 30 s..1 h.
 */
static const char filter_policy[] =
    "version: 1\n"
    "name: filter\n"
    "egress:\n"
    "  allow:\n"
    "    - host: \"*.example.com\"\n"
    "      ports: [443, \"8000-8010\"]\n"
    "    - cidr: 10.9.0.0/16\n"
    "      ports: [443]\n"
    "  deny:\n"
    "    - cidr: 93.184.0.0/24\n"
    "dns:\n"
    "  types: [A, AAAA, CNAME]\n"
    "  min_ttl: 30s\n"
    "  max_ttl: 1h\n";

static const struct filter_case {
	const char	*what;
	uint16_t	 qtype;
	const char	*rrs[4];	/* answer section, zone-file text */
	const char	*kept;		/* per record: 'k' kept, '-' not */
	size_t		 naddrs, nremoved;
	uint32_t	 elem_timeout_s;	/* of every element; 0: none */
	uint32_t	 ttl0;		/* the first record's TTL as sent on */
} filter_cases[] = {
	{ "public address kept, two port segments", LDNS_RR_TYPE_A,
	  { "www.example.com. 300 IN A 93.184.216.34" }, "k", 1, 0, 300, 300 },
	{ "metadata removed", LDNS_RR_TYPE_A,
	  { "www.example.com. 300 IN A 169.254.169.254" }, "-", 1, 1, 0, 0 },
	{ "loopback removed, public kept", LDNS_RR_TYPE_A,
	  { "www.example.com. 300 IN A 127.0.0.1",
	    "www.example.com. 300 IN A 93.184.216.34" }, "-k", 2, 1, 300, 0 },
	{ "private kept only inside the CIDR allow", LDNS_RR_TYPE_A,
	  { "www.example.com. 300 IN A 10.9.1.1",
	    "www.example.com. 300 IN A 10.1.2.3" }, "k-", 2, 1, 300, 300 },
	{ "an explicitly denied range removed", LDNS_RR_TYPE_A,
	  { "www.example.com. 300 IN A 93.184.0.7" }, "-", 1, 1, 0, 0 },
	{ "another owner's address dropped unseen", LDNS_RR_TYPE_A,
	  { "evil.example.net. 300 IN A 93.184.216.34" }, "-", 0, 0, 0, 0 },
	{ "CNAME chain followed", LDNS_RR_TYPE_A,
	  { "www.example.com. 600 IN CNAME cdn.example.net.",
	    "cdn.example.net. 300 IN A 93.184.216.34" }, "kk", 1, 0, 300,
	  600 },
	{ "a CNAME link of another class is not followed", LDNS_RR_TYPE_A,
	  { "www.example.com. 600 CH CNAME cdn.example.net.",
	    "cdn.example.net. 300 IN A 93.184.216.34" }, "--", 0, 0, 0, 0 },
	{ "short TTL: element min_ttl, record keeps its own", LDNS_RR_TYPE_A,
	  { "www.example.com. 5 IN A 93.184.216.34" }, "k", 1, 0, 30, 5 },
	{ "long TTL clamped to max_ttl on both", LDNS_RR_TYPE_A,
	  { "www.example.com. 604800 IN A 93.184.216.34" }, "k", 1, 0, 3600,
	  3600 },
	{ "an A record does not answer an AAAA question", LDNS_RR_TYPE_AAAA,
	  { "www.example.com. 300 IN A 93.184.216.34" }, "-", 0, 0, 0, 0 },
	{ "IPv4-mapped metadata in AAAA removed", LDNS_RR_TYPE_AAAA,
	  { "www.example.com. 300 IN AAAA ::ffff:169.254.169.254" }, "-", 1,
	  1, 0, 0 },
};

/* The question for name/qtype, as the query parser leaves it. */
static bool
parse_name_into(struct dns_query *q, const char *name, uint16_t qtype)
{
	uint8_t m[300];
	size_t o = 12, l;
	const char *p = name, *dot;

	memset(m, 0, sizeof(m));
	m[5] = 1;
	while (*p != '\0') {
		dot = strchr(p, '.');
		l = dot != NULL ? (size_t)(dot - p) : strlen(p);
		if (l == 0 || l > 63 || o + l + 6 > sizeof(m))
			return false;
		m[o++] = (uint8_t)l;
		memcpy(m + o, p, l);
		o += l;
		p += l + (dot != NULL);
	}
	m[o++] = 0;
	m[o++] = (uint8_t)(qtype >> 8);
	m[o++] = (uint8_t)qtype;
	m[o++] = 0;
	m[o++] = 1;
	return dns_parse_query(m, o, q) == DNS_PARSE_OK;
}

/* The filter policy loaded, and a sandbox under it (c, lim). */
static struct pol_policy *
filter_client(struct dns_client *c, struct pol_dns_limits *lim)
{
	struct pol_errors *errs = pol_errors_new(5);
	struct pol_policy *pol;

	pol = pol_policy_load_buf("filter.yaml", filter_policy,
	    sizeof(filter_policy) - 1, NULL, errs);
	ck_assert_msg(pol != NULL, "filter policy did not load");
	pol_errors_free(errs);
	memset(c, 0, sizeof(*c));
	snprintf(c->id, sizeof(c->id), "filt");
	snprintf(c->ifname, sizeof(c->ifname), "sl-filt");
	c->policy = pol;
	pol_dns_limits(pol, lim);
	return pol;
}

START_TEST(filter_table)
{
	const struct filter_case *fc = &filter_cases[_i];
	struct pol_policy *pol;
	struct pol_dns_limits lim;
	struct dns_client c;
	struct dns_query q;
	struct dns_filter_in in;
	struct dns_filter_out out;
	struct dns_event *ev = calloc(1, sizeof(*ev));
	ldns_pkt *pkt = ldns_pkt_new();
	ldns_rr_list *an;
	size_t i, nrr = 0, nkept_addr = 0;

	ck_assert_ptr_nonnull(ev);
	ck_assert_ptr_nonnull(pkt);
	pol = filter_client(&c, &lim);
	for (i = 0; i < 4 && fc->rrs[i] != NULL; i++, nrr++) {
		ldns_rr *rr = NULL;

		ck_assert_int_eq(ldns_rr_new_frm_str(&rr, fc->rrs[i], 0, NULL,
		    NULL), LDNS_STATUS_OK);
		ck_assert(ldns_pkt_push_rr(pkt, LDNS_SECTION_ANSWER, rr));
	}
	ck_assert_msg(parse_name_into(&q, "www.example.com", fc->qtype),
	    "question");
	memset(&in, 0, sizeof(in));
	in.q = &q;
	in.c = &c;
	in.lim = &lim;
	ck_assert_int_eq(dns_filter_answer(&in, pkt, ev, &out), 0);
	an = ldns_pkt_answer(pkt);
	ck_assert_uint_eq(ldns_rr_list_rr_count(an), nrr);
	for (i = 0; i < nrr; i++) {
		ck_assert_msg(out.keep[i] == (fc->kept[i] == 'k'),
		    "%s: record %zu kept=%d", fc->what, i, (int)out.keep[i]);
		if (out.keep[i] && (ldns_rr_get_type(ldns_rr_list_rr(an, i)) ==
		    LDNS_RR_TYPE_A || ldns_rr_get_type(ldns_rr_list_rr(an, i)) ==
		    LDNS_RR_TYPE_AAAA))
			nkept_addr++;
	}
	if (fc->ttl0 != 0)
		ck_assert_uint_eq(out.ttls[0], fc->ttl0);
	ck_assert_uint_eq(ev->naddrs, fc->naddrs);
	ck_assert_uint_eq(ev->nremoved, fc->nremoved);
	ck_assert_uint_eq(ev->nkept, nkept_addr);
	ck_assert(ev->finding == (fc->nremoved > 0));
	/* One element per allowed port segment (443, 8000-8010) per kept
	 * address, all for this sandbox's link, with the clamped TTL. */
	ck_assert_uint_eq(out.nel, 2 * nkept_addr);
	for (i = 0; i < out.nel; i++) {
		ck_assert_str_eq(out.el[i].ifname, "sl-filt");
		ck_assert_uint_eq(out.el[i].timeout_ms,
		    fc->elem_timeout_s * 1000u);
		ck_assert(out.el[i].port_lo == 443 ?
		    out.el[i].port_hi == 443 :
		    out.el[i].port_lo == 8000 && out.el[i].port_hi == 8010);
	}
	dns_filter_out_free(&out);
	dns_filter_out_free(NULL);
	ldns_pkt_free(pkt);
	pol_policy_free(pol);
	free(ev);
}
END_TEST

/*
 * The per-answer cap: an upstream (one a sandbox controls, behind a
 * wildcard its policy allows) answers with 1,000 addresses. Only the first
 * max_addrs (default 32) are looked at, kept and learned; the others are
 * dropped from the answer, unexamined (not counted as answered either).
 * Removed addresses count against the cap like kept ones.
 */
START_TEST(filter_answer_cap)
{
	static const size_t caps[] = { 0, 5 };	/* 0: the default, 32 */
	struct pol_policy *pol;
	struct pol_dns_limits lim;
	struct dns_client c;
	struct dns_query q;
	struct dns_filter_in in;
	struct dns_filter_out out;
	struct dns_event *ev = calloc(1, sizeof(*ev));
	ldns_pkt *pkt = ldns_pkt_new();
	size_t i, k, nkept;
	char rr[96];

	ck_assert_ptr_nonnull(ev);
	ck_assert_ptr_nonnull(pkt);
	pol = filter_client(&c, &lim);
	/* One loopback address first (removed, and counted), then public
	 * ones. */
	for (i = 0; i < 1000; i++) {
		ldns_rr *r = NULL;

		if (i == 0)
			snprintf(rr, sizeof(rr),
			    "www.example.com. 300 IN A 127.0.0.1");
		else
			snprintf(rr, sizeof(rr),
			    "www.example.com. 300 IN A 198.51.%zu.%zu",
			    i / 250, i % 250 + 1);
		ck_assert_int_eq(ldns_rr_new_frm_str(&r, rr, 0, NULL, NULL),
		    LDNS_STATUS_OK);
		ck_assert(ldns_pkt_push_rr(pkt, LDNS_SECTION_ANSWER, r));
	}
	ck_assert(parse_name_into(&q, "www.example.com", LDNS_RR_TYPE_A));
	for (k = 0; k < 2; k++) {
		size_t cap = caps[k] != 0 ? caps[k] : 32;

		memset(ev, 0, sizeof(*ev));
		memset(&in, 0, sizeof(in));
		in.q = &q;
		in.c = &c;
		in.lim = &lim;
		in.max_addrs = caps[k];
		ck_assert_int_eq(dns_filter_answer(&in, pkt, ev, &out), 0);
		ck_assert_uint_eq(ev->naddrs, cap);
		ck_assert_uint_eq(ev->nremoved, 1);
		ck_assert_uint_eq(ev->nkept, cap - 1);
		for (i = 0, nkept = 0; i < 1000; i++) {
			ck_assert(out.keep[i] == (i >= 1 && i < cap));
			nkept += out.keep[i];
		}
		ck_assert_uint_eq(nkept, cap - 1);
		/* Two port segments (443, 8000-8010) per kept address. */
		ck_assert_uint_eq(out.nel, 2 * (cap - 1));
		dns_filter_out_free(&out);
	}
	ldns_pkt_free(pkt);
	pol_policy_free(pol);
	free(ev);
}
END_TEST

/* ------------------------------------------ fake upstream: sizes, ICMP, TTL */

/* One query for name/type with EDNS size edns from ip, over UDP or TCP,
 * answered by the fake upstream sfd with rrs[0..n). */
static void
ask_fake(int sfd, bool tcp, const char *ip, const char *name, uint16_t type,
    uint16_t edns, const char *const *rrs, size_t n, struct ans *a)
{
	static uint8_t r[65536];
	uint8_t q[514];
	uint16_t id = (uint16_t)(rand() & 0xffff);
	size_t ql = mkquery(q + 2, sizeof(q) - 2, name, type, id, edns);
	ssize_t got;
	int fd = client(tcp ? SOCK_STREAM : SOCK_DGRAM, ip, 0);

	q[0] = (uint8_t)(ql >> 8);
	q[1] = (uint8_t)ql;
	pthread_mutex_lock(&L.mu);
	L.client_fd = fd;
	pthread_mutex_unlock(&L.mu);
	if (tcp)
		ck_assert_int_eq(send(fd, q, ql + 2, 0), (ssize_t)(ql + 2));
	else
		ck_assert_int_eq(send(fd, q + 2, ql, 0), (ssize_t)ql);
	fake_answer(sfd, rrs, n);
	if (tcp) {
		got = tcp_read_msg(fd, r, sizeof(r));
		if (got > 0)
			memmove(r, r + 2, (size_t)got);
	} else
		got = recv_bounded(fd, r, sizeof(r), RECV_MS);
	pthread_mutex_lock(&L.mu);
	L.client_fd = -1;
	pthread_mutex_unlock(&L.mu);
	close(fd);
	memset(a, 0, sizeof(*a));
	a->rcode = -1;
	if (got > 0)
		parse_ans(r, (size_t)got, a);
	ck_assert_msg(a->rcode != -1, "%s: no answer within the bound", name);
	ck_assert_uint_eq(a->id, id);
}

/* The UDP size the answer's OPT record advertises; 0: no OPT. */
static unsigned
ans_edns(const struct ans *a)
{
	ldns_pkt *pkt = NULL;
	unsigned size = 0;

	ck_assert_int_eq(ldns_wire2pkt(&pkt, a->wire, a->wirelen),
	    LDNS_STATUS_OK);
	if (ldns_pkt_edns(pkt))
		size = ldns_pkt_edns_udp_size(pkt);
	ldns_pkt_free(pkt);
	return size;
}

/*
 * Allowed answers that end within 11 bytes (our OPT record) of the answer
 * buffer's capacity (1024, then 1536 and 2304 as it grows by half), asked
 * with EDNS: the OPT record must get room, not run past the buffer. The
 * question <label>.example.com has label+14 wire bytes; the answer is
 * 12 + (label+14) + 4 + n * (label+14 + 10 + 4) bytes before the OPT
 * (owner names uncompressed).
 */
static const struct size_case {
	size_t	label;		/* length of the first label */
	size_t	n;		/* A records */
} size_cases[] = {
	{ 2, 33 },	/* 1022: aa.example.com, the review's case */
	{ 2, 32 },	/* 992: the OPT fits */
	{ 2, 34 },	/* 1052: the buffer grew on its own */
	{ 1, 34 },	/* 1017 */
	{ 16, 22 },	/* 1014: one byte short of room */
	{ 2, 50 },	/* 1532 */
	{ 31, 25 },	/* 1536: the grown buffer exactly full */
	{ 3, 73 },	/* 2296 */
};

START_TEST(edns_answer_near_buffer_end)
{
	const struct size_case *sc = &size_cases[_i];
	/* Up to 80 addresses in one answer: past the default cap. */
	struct pcfg pc = { .no_cache = true, .max_answer_addrs = 80 };
	static char rrtext[80][160];
	const char *rrs[80];
	char name[80];
	size_t i, size;
	struct ans a;
	int sfd, tcp;

	ck_assert_uint_le(sc->n, 80);
	memset(name, 'a', sc->label);
	snprintf(name + sc->label, sizeof(name) - sc->label, ".example.com");
	for (i = 0; i < sc->n; i++) {
		snprintf(rrtext[i], sizeof(rrtext[i]),
		    "%s. 60 IN A 198.51.100.%zu", name, i + 1);
		rrs[i] = rrtext[i];
	}
	size = 12 + (sc->label + 14) + 4 + sc->n * (sc->label + 14 + 14);
	sfd = fake_upstream(&pc);
	proxy_up(&pc);
	/* UDP (the client's 4096 clamped to 1232: what does not fit comes
	 * truncated, still with its OPT) and TCP (always whole). */
	for (tcp = 0; tcp < 2; tcp++) {
		ask_fake(sfd, tcp, "127.0.0.7", name, LDNS_RR_TYPE_A, 4096,
		    rrs, sc->n, &a);
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
		ck_assert_uint_eq(ans_edns(&a), 1232);
		if (!tcp && size + 11 > 1232) {
			ck_assert(a.tc);
			ck_assert_uint_eq(a.nan, 0);
			continue;
		}
		ck_assert(!a.tc);
		ck_assert_uint_eq(a.nan, sc->n);
		ck_assert_uint_eq(a.wirelen, size + 11);
		for (i = 0; i < sc->n; i++)
			ck_assert_uint_eq(a.types[i], LDNS_RR_TYPE_A);
	}
	close(sfd);
}
END_TEST

/* The cache's index under churn: room for 8 answers (16 slots), 300
 * names through it, so every slot is freed and refilled many times, runs
 * wrap around the table's end and entries move back as others leave. The
 * 8 newest must then all be answered from the cache (an entry the index
 * lost would go upstream, where nobody answers: SERVFAIL), with their own
 * address (a slot pointing at another entry would answer another name's),
 * and an evicted name must reach the upstream again. */
START_TEST(cache_index_churn)
{
	enum { N = 300, ROOM = 8 };
	struct pcfg pc = { .cache_max = ROOM, .timeout_ms = 500 };
	struct pollfd pfd;
	struct ans a;
	char name[64], rr[128], want[32];
	const char *rrs[1] = { rr };
	int sfd = fake_upstream(&pc), i;

	proxy_up(&pc);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "n%d.wild.example.test", i);
		snprintf(rr, sizeof(rr), "%s. 600 IN A 192.0.2.%d", name,
		    i % 250 + 1);
		ask_fake(sfd, false, "127.0.0.1", name, LDNS_RR_TYPE_A, 0,
		    rrs, 1, &a);
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
		/* Now and then the newest few again: hits in a churning
		 * table. */
		if (i % 37 == 0 && i >= 3) {
			snprintf(name, sizeof(name), "n%d.wild.example.test",
			    i - 3);
			ask(name, LDNS_RR_TYPE_A, &a);
			ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
		}
	}
	for (i = N - ROOM; i < N; i++) {
		snprintf(name, sizeof(name), "n%d.wild.example.test", i);
		snprintf(want, sizeof(want), "192.0.2.%d", i % 250 + 1);
		ask(name, LDNS_RR_TYPE_A, &a);
		ck_assert_msg(a.rcode == LDNS_RCODE_NOERROR,
		    "%s: rcode %d, not from the cache", name, a.rcode);
		ck_assert_uint_eq(a.nan, 1);
		ck_assert_str_eq(a.addrs[0], want);
	}
	pfd.fd = sfd;
	pfd.events = POLLIN;
	ck_assert_int_eq(poll(&pfd, 1, 0), 0);	/* nothing went upstream */
	snprintf(rr, sizeof(rr), "n0.wild.example.test. 600 IN A 192.0.2.1");
	ask_fake(sfd, false, "127.0.0.1", "n0.wild.example.test",
	    LDNS_RR_TYPE_A, 0, rrs, 1, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	close(sfd);
}
END_TEST

/* A name with an ICMP rule beside its TCP rule resolves, and only the TCP
 * element is learned: ICMP to a name is not opened by learning (the
 * firewall allows ICMP by address), and fw_learn would refuse it. */
START_TEST(icmp_rule_not_learned)
{
	struct pcfg pc = { .no_cache = true };
	const char *rrs[] = { "ping.example.net. 60 IN A 198.51.100.20" };
	struct ans a;
	struct dns_event ev;
	char ip[INET_ADDRSTRLEN];
	int sfd = fake_upstream(&pc);

	proxy_up(&pc);
	ask_fake(sfd, false, "127.0.0.7", "ping.example.net", LDNS_RR_TYPE_A,
	    0, rrs, 1, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	ck_assert_str_eq(a.addrs[0], "198.51.100.20");
	pthread_mutex_lock(&L.mu);
	ck_assert_int_eq(L.calls, 1);
	ck_assert_int_eq(L.early, 0);
	ck_assert_uint_eq(L.nelems, 1);
	inet_ntop(AF_INET, L.elems[0].addr, ip, sizeof(ip));
	ck_assert_str_eq(ip, "198.51.100.20");
	ck_assert_uint_eq(L.elems[0].proto, IPPROTO_TCP);
	ck_assert_uint_eq(L.elems[0].port_lo, 443);
	ck_assert_uint_eq(L.elems[0].port_hi, 443);
	pthread_mutex_unlock(&L.mu);
	ck_assert(last_event("ping.example.net", &ev));
	ck_assert_int_eq(ev.decision, DNS_DEC_ALLOW);
	ck_assert_uint_eq(ev.nelems, 1);
	close(sfd);
}
END_TEST

/* TTL edges (min_ttl 0s, max_ttl 3650d): an upstream TTL 0 still gives an
 * element fw_learn takes (at least a second), and a TTL of years gives a
 * timeout that did not wrap in 32 bits, with a sandbox TTL no longer than
 * the element lives. */
START_TEST(ttl_edges_element_timeout)
{
	struct pcfg pc = { .no_cache = true };
	const char *zero[] = { "zero.example.com. 0 IN A 198.51.100.30" };
	const char *years[] = {
	    "years.example.com. 2147483647 IN A 198.51.100.31" };
	struct ans a;
	uint32_t tmo;
	int sfd = fake_upstream(&pc);

	proxy_up(&pc);
	ask_fake(sfd, false, "127.0.0.7", "zero.example.com", LDNS_RR_TYPE_A,
	    0, zero, 1, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	ck_assert_uint_eq(a.ttls[0], 0);
	pthread_mutex_lock(&L.mu);
	ck_assert_uint_eq(L.nelems, 1);
	ck_assert_uint_ge(L.elems[0].timeout_ms, 1000);
	pthread_mutex_unlock(&L.mu);

	/* 3650 days is 315360000 s: in ms that is past UINT32_MAX. */
	ask_fake(sfd, false, "127.0.0.7", "years.example.com", LDNS_RR_TYPE_A,
	    0, years, 1, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.nan, 1);
	pthread_mutex_lock(&L.mu);
	ck_assert_uint_eq(L.nelems, 2);
	tmo = L.elems[1].timeout_ms;
	pthread_mutex_unlock(&L.mu);
	ck_assert_uint_eq(tmo, UINT32_MAX);
	ck_assert_uint_le((uint64_t)a.ttls[0] * 1000u, tmo);
	ck_assert_uint_gt(a.ttls[0], 0);
	close(sfd);
}
END_TEST

/* The proxy's side of the TCP connection whose client end is cfd, found
 * among this process's descriptors (the proxy runs in it); -1 if none. */
static int
proxy_side_fd(int cfd)
{
	struct sockaddr_in me, peer;
	socklen_t ml = sizeof(me), pl;
	int fd, type;
	socklen_t tl;

	ck_assert_int_eq(getsockname(cfd, (struct sockaddr *)&me, &ml), 0);
	for (fd = 0; fd < 4096; fd++) {
		tl = sizeof(type);
		pl = sizeof(peer);
		if (fd == cfd || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type,
		    &tl) == -1 || type != SOCK_STREAM ||
		    getpeername(fd, (struct sockaddr *)&peer, &pl) == -1 ||
		    pl != sizeof(peer) || peer.sin_family != AF_INET)
			continue;
		if (peer.sin_port == me.sin_port &&
		    peer.sin_addr.s_addr == me.sin_addr.s_addr)
			return fd;
	}
	return -1;
}

/*
 * A TCP client that sends queries and never reads their answers holds
 * its connection slot (max_tcp_conns, shared by every sandbox) only until
 * its output has not moved for an idle period: then it is closed and the
 * next client is served.
 */
START_TEST(tcp_unread_answers_closed)
{
	enum { NQ = 2000 };
	struct pcfg pc = { .up = { dm_port }, .tcp_idle_ms = 500,
	    .max_tcp_conns = 1 };
	static uint8_t qs[NQ * 64], big[65536];
	uint8_t q[512], r[512];
	size_t ql, off = 0;
	struct timespec t0, t1;
	struct pollfd pfd;
	bool served = false;
	ssize_t n;
	int fd, sfd, fd2, sb = 4096, i;

	proxy_up(&pc);
	fd = client(SOCK_STREAM, "127.0.0.1", 4096);
	/* Denied: answered locally, 39 bytes each with the frame. */
	ql = mkquery(q + 2, 500, "denied.example.test", 1, 0x0d0d, 0);
	q[0] = 0;
	q[1] = (uint8_t)ql;
	/* One exchange first: by then the proxy has accepted it. */
	ck_assert_int_eq(send(fd, q, ql + 2, 0), (ssize_t)(ql + 2));
	ck_assert_int_gt(tcp_read_msg(fd, r, sizeof(r)), 0);
	/* Loopback would absorb megabytes of answers in socket buffers
	 * before any stayed queued in the proxy (more than the proxy's own
	 * cap, which closes for another reason): shrink its side. */
	sfd = proxy_side_fd(fd);
	ck_assert_int_ne(sfd, -1);
	ck_assert_int_eq(setsockopt(sfd, SOL_SOCKET, SO_SNDBUF, &sb,
	    sizeof(sb)), 0);
	for (i = 0; i < NQ; i++) {
		memcpy(qs + off, q, ql + 2);
		off += ql + 2;
	}
	/* About 78 KB of answers: the buffers take some, the rest stays
	 * queued in the proxy, and the client never reads again. */
	ck_assert_int_eq(send(fd, qs, off, MSG_NOSIGNAL), (ssize_t)off);
	/* The bound starts once every query was answered (recorded), so a
	 * slow run (memcheck) is not mistaken for a slot never freed. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (nevents() < NQ + 1) {
		usleep(10 * 1000);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ck_assert_msg((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec -
		    t0.tv_nsec) / 1000000 < 4 * RECV_MS, "queries unanswered");
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		fd2 = client(SOCK_STREAM, NULL, 0);
		(void)send(fd2, q, ql + 2, MSG_NOSIGNAL);
		n = tcp_read_msg(fd2, r, sizeof(r));
		close(fd2);
		if (n > 0) {
			served = true;
			break;
		}
		usleep(50 * 1000);
		clock_gettime(CLOCK_MONOTONIC, &t1);
	} while ((t1.tv_sec - t0.tv_sec) * 1000 +
	    (t1.tv_nsec - t0.tv_nsec) / 1000000 < RECV_MS);
	ck_assert_msg(served, "the slot of a client that does not read was "
	    "not freed");
	/* The first client's connection is gone: what the kernel still
	 * held, then EOF (or a reset). */
	for (;;) {
		pfd.fd = fd;
		pfd.events = POLLIN;
		ck_assert_int_eq(poll(&pfd, 1, RECV_MS), 1);
		if (recv(fd, big, sizeof(big), 0) <= 0)
			break;
	}
	close(fd);
}
END_TEST

static Suite *
dns_suite(void)
{
	Suite *s = suite_create("dns");
	TCase *tc = tcase_create("Core"), *tl = tcase_create("Limits"), *tf;

	tcase_add_unchecked_fixture(tc, world_up, world_down);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, allowed_learns_before_answer);
	tcase_add_test(tc, ttl_min_clamp_and_wildcard_ports);
	tcase_add_test(tc, cname_chain_classified);
	tcase_add_test(tc, denied_uniform_no_upstream);
	tcase_add_loop_test(tc, rebinding_refused, 0,
	    sizeof(rebind_cases) / sizeof(rebind_cases[0]));
	tcase_add_test(tc, private_needs_cidr_allow);
	tcase_add_test(tc, types_txt_any_https);
	tcase_add_test(tc, synthetic_names);
	tcase_add_test(tc, tcp_two_queries_one_connection);
	tcase_add_test(tc, tcp_half_close_still_answered);
	tcase_add_test(tc, udp_truncation_over_client_size);
	tcase_add_test(tc, upstream_down_servfail);
	tcase_add_test(tc, upstream_failover);
	tcase_add_test(tc, upstream_silent_timeout);
	tcase_add_test(tc, upstream_answers_checked);
	tcase_add_test(tc, upstream_socket_pool);
	tcase_add_test(tc, upstream_oversized_udp_to_tcp);
	tcase_add_test(tc, upstream_tcp_bounded);
	tcase_add_test(tc, sandbox_gone_mid_query);
	tcase_add_test(tc, taint_mid_query_denied);
	tcase_add_test(tc, ipv6_client);
	tcase_add_test(tc, learn_failure_servfail);
	tcase_add_test(tc, unknown_source_refused);
	tcase_add_test(tc, latency_figure);
	tcase_add_test(tc, cache_answer_still_learned);
	tcase_add_test(tc, cache_applies_asking_policy);
	tcase_add_test(tc, cache_rebinding_still_refused);
	tcase_add_test(tc, batch_one_learn_per_iteration);
	tcase_add_test(tc, batch_failure_isolated);
	tcase_add_loop_test(tc, keep_flag_table, 0,
	    sizeof(keep_cases) / sizeof(keep_cases[0]));
	tcase_add_loop_test(tc, edns_answer_near_buffer_end, 0,
	    sizeof(size_cases) / sizeof(size_cases[0]));
	tcase_add_test(tc, icmp_rule_not_learned);
	tcase_add_test(tc, ttl_edges_element_timeout);
	suite_add_tcase(s, tc);

	tcase_add_unchecked_fixture(tl, world_up, world_down);
	tcase_add_checked_fixture(tl, setup, teardown);
	tcase_set_timeout(tl, 60);
	tcase_add_test(tl, tunnel_names_refused);
	tcase_add_test(tl, rate_limit_holds);
	tcase_add_test(tl, rate_limit_flood_cheap);
	tcase_add_test(tl, rate_limit_survives_full_buckets);
	tcase_add_loop_test(tl, malformed_then_good, 0, NBAD);
	tcase_add_test(tl, mutations_keep_serving);
	tcase_add_test(tl, tcp_idle_and_cap);
	tcase_add_test(tl, tcp_slow_drip_closed);
	tcase_add_test(tl, tcp_per_source_cap);
	tcase_add_test(tl, tcp_per_sandbox_configured);
	tcase_add_test(tl, tcp_pool_full_fair_share);
	tcase_add_test(tl, tcp_evicted_with_query_pending);
	tcase_add_test(tl, tcp_unread_answers_closed);
	tcase_add_test(tl, malformed_costs_tokens);
	tcase_add_test(tl, tcp_bad_frames);
	tcase_add_test(tl, parser_table);
	tcase_add_test(tl, cache_bounded);
	tcase_add_test(tl, cache_off);
	tcase_add_test(tl, cache_index_churn);
	suite_add_tcase(s, tl);

	tf = tcase_create("Filter");
	tcase_add_loop_test(tf, filter_table, 0,
	    sizeof(filter_cases) / sizeof(filter_cases[0]));
	tcase_add_test(tf, filter_answer_cap);
	suite_add_tcase(s, tf);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(dns_suite());
	int nf;

	srand((unsigned)getpid());
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
