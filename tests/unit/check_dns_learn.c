/*
 * check_dns_learn: the DNS proxy's asynchronous learn (dns.h: the learn
 * hook's DNS_LEARN_PENDING, dns_learn_done, dns_learn_abort_all). When the
 * proxy runs in a process of its own, the kernel's acknowledgement comes
 * back later, and the no-race promise (no answer before its elements)
 * then rests on the proxy holding answers across loop turns; this suite
 * checks that hold and what ends it. Everything runs in the test's own
 * thread: the test turns the proxy's loop itself, plays the upstream on a
 * socket of the same loop, and calls dns_learn_done between turns, as the
 * daemon's socket callback would. No packet leaves loopback; the addresses
 * answered are documentation ones.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns.h"
#include "gateway/ev.h"
#include "policy/policy.h"

#define SBX_IF		"sl-learntest"
#define BOUND_MS	5000	/* a bound, not a timing assumption */
#define QUIET_TURNS	20	/* loop turns a held answer must stay held */
#define MAXCALLS	512
#define MAXEV		512

static char		 tmpdir[256], pol_path[300];
static struct pol_cidr	 treat[1];

/* What the hooks saw, and how learn is to answer. */
enum lmode { L_PENDING = 0, L_OK, L_FAIL };
struct lcall {
	uint64_t	ticket;
	size_t		n;
	struct fw_elem	e[8];
};
static struct {
	enum lmode	 mode;
	int		 fail_errno;
	struct lcall	 calls[MAXCALLS];
	size_t		 ncalls;
	struct dns_event ev[MAXEV];
	size_t		 nev;
} L;

static struct pol_policy *pol;
static struct ev_loop	*loop;
static struct dns_proxy	*proxy;
static uint16_t		 pport;
static int		 upfd = -1;	/* the fake upstream */

/* ------------------------------------------------------------ the hooks */

static int
h_lookup(void *ctx, const struct sockaddr *src, socklen_t len,
    struct dns_client *c)
{
	const struct sockaddr_in *s = (const struct sockaddr_in *)src;

	(void)ctx;
	if (src->sa_family != AF_INET || len < sizeof(*s) ||
	    s->sin_addr.s_addr != htonl(INADDR_LOOPBACK))
		return -1;
	memset(c, 0, sizeof(*c));
	snprintf(c->id, sizeof(c->id), "sbx-learn");
	snprintf(c->ifname, sizeof(c->ifname), SBX_IF);
	c->policy = pol;
	return 0;
}

static int
h_learn(void *ctx, uint64_t ticket, const struct fw_elem *e, size_t n,
    char *err, size_t errlen)
{
	struct lcall *c;

	(void)ctx;
	ck_assert_uint_lt(L.ncalls, MAXCALLS);
	c = &L.calls[L.ncalls++];
	c->ticket = ticket;
	c->n = n;
	memcpy(c->e, e, (n < 8 ? n : 8) * sizeof(*e));
	if (L.mode == L_OK)
		return 0;
	if (L.mode == L_FAIL) {
		snprintf(err, errlen, "test: refused now");
		errno = L.fail_errno;
		return -1;
	}
	return DNS_LEARN_PENDING;
}

static void
h_record(void *ctx, const struct dns_event *ev)
{
	(void)ctx;
	if (L.nev < MAXEV)
		L.ev[L.nev++] = *ev;
}

/* ------------------------------------------------------------ the world */

/* The fake upstream: "nK.example.test" has the address 192.0.2.K (TTL
 * 600, so the proxy caches it), "nx.example.test" does not exist. */
static void
up_cb(struct ev_loop *lp, int fd, unsigned events, void *arg)
{
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	uint8_t buf[2048], *w = NULL;
	ldns_pkt *pkt = NULL;
	ldns_rr *rr = NULL;
	char *qn, text[300];
	unsigned k;
	size_t wl;
	ssize_t n;

	(void)lp;
	(void)events;
	(void)arg;
	n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
	if (n <= 0 || ldns_wire2pkt(&pkt, buf, (size_t)n) != LDNS_STATUS_OK)
		return;
	ldns_pkt_set_qr(pkt, true);
	qn = ldns_rdf2str(ldns_rr_owner(ldns_rr_list_rr(
	    ldns_pkt_question(pkt), 0)));
	if (qn != NULL && sscanf(qn, "n%u.", &k) == 1 && k < 256) {
		snprintf(text, sizeof(text), "%s 600 IN A 192.0.2.%u", qn, k);
		if (ldns_rr_new_frm_str(&rr, text, 0, NULL, NULL) ==
		    LDNS_STATUS_OK)
			ldns_pkt_push_rr(pkt, LDNS_SECTION_ANSWER, rr);
	} else
		ldns_pkt_set_rcode(pkt, LDNS_RCODE_NXDOMAIN);
	free(qn);
	if (ldns_pkt2wire(&w, pkt, &wl) == LDNS_STATUS_OK)
		(void)sendto(fd, w, wl, 0, (struct sockaddr *)&from, fl);
	LDNS_FREE(w);
	ldns_pkt_free(pkt);
}

static void
sa_lo(struct sockaddr_storage *ss, socklen_t *sl, uint16_t port)
{
	struct sockaddr_in *s = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	*sl = sizeof(*s);
}

static void
world_up(void)
{
	FILE *f;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_dns_learn.%d",
	    (int)getpid());
	if (mkdir(tmpdir, 0700) == -1 && errno != EEXIST)
		abort();
	snprintf(pol_path, sizeof(pol_path), "%s/learn.yaml", tmpdir);
	if ((f = fopen(pol_path, "w")) == NULL)
		abort();
	fputs("version: 1\n"
	    "name: learn\n"
	    "egress:\n"
	    "  allow:\n"
	    "    - host: \"*.example.test\"\n"
	    "      ports: [443]\n"
	    "dns:\n"
	    "  min_ttl: 30s\n"
	    "  max_ttl: 120s\n"
	    "  rate:\n"
	    "    qps: 100000\n"
	    "    burst: 100000\n", f);
	fclose(f);
	pol_cidr_parse("192.0.2.0/24", &treat[0]);
}

static void
world_down(void)
{
	unlink(pol_path);
	rmdir(tmpdir);
}

static void
proxy_up(uint32_t timeout_ms)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct dns_config cfg;
	struct dns_hooks h;
	char err[256];

	upfd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	ck_assert_int_ne(upfd, -1);
	sa_lo(&ss, &sl, 0);
	ck_assert_int_eq(bind(upfd, (struct sockaddr *)&ss, sl), 0);
	sl = sizeof(ss);
	ck_assert_int_eq(getsockname(upfd, (struct sockaddr *)&ss, &sl), 0);
	memset(&cfg, 0, sizeof(cfg));
	sa_lo(&cfg.listen, &cfg.listen_len, 0);
	pol_addr_parse("10.231.255.254", &cfg.service_addr);
	sa_lo(&cfg.upstreams[0], &cfg.upstream_lens[0],
	    ntohs(((struct sockaddr_in *)&ss)->sin_port));
	cfg.nupstreams = 1;
	cfg.timeout_ms = timeout_ms;
	cfg.treat_as_public = treat;
	cfg.ntreat_as_public = 1;
	memset(&h, 0, sizeof(h));
	h.lookup = h_lookup;
	h.learn = h_learn;
	h.record = h_record;
	loop = ev_new();
	ck_assert_ptr_nonnull(loop);
	ck_assert_int_eq(ev_add(loop, upfd, EV_READ, up_cb, NULL), 0);
	proxy = dns_new(loop, &cfg, &h, err, sizeof(err));
	ck_assert_msg(proxy != NULL, "dns_new: %s", err);
	pport = dns_local_port(proxy);
}

static void
proxy_down(void)
{
	dns_free(proxy);
	proxy = NULL;
	if (loop != NULL) {
		ev_del(loop, upfd);
		ev_free(loop);
		loop = NULL;
	}
	if (upfd != -1)
		close(upfd);
	upfd = -1;
}

static void
setup(void)
{
	struct pol_errors *errs = pol_errors_new(8);

	memset(&L, 0, sizeof(L));
	pol = pol_policy_load(pol_path, NULL, errs);
	ck_assert_msg(pol != NULL, "policy: %s", pol_errors_get(errs, 0));
	pol_errors_free(errs);
	proxy_up(2000);
}

static void
teardown(void)
{
	proxy_down();
	pol_policy_free(pol);
}

/* ------------------------------------------------------- turning the loop */

static void
stop_cb(struct ev_loop *lp, void *arg)
{
	(void)arg;
	ev_stop(lp);
}

/* Runs the proxy's loop for about ms (at least one iteration). */
static void
turn(uint64_t ms)
{
	ck_assert_ptr_nonnull(ev_timer_add(loop, ms, stop_cb, NULL));
	ck_assert_int_eq(ev_run(loop), 0);
}

/* Turns the loop until fd is readable; false past the bound. */
static bool
turn_until_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	for (int i = 0; i < BOUND_MS / 5; i++) {
		if (poll(&pfd, 1, 0) == 1)
			return true;
		turn(5);
	}
	return poll(&pfd, 1, 0) == 1;
}

/* Turns the loop until the learn hook was called n times in all. */
static void
turn_until_calls(size_t n)
{
	for (int i = 0; i < BOUND_MS / 5 && L.ncalls < n; i++)
		turn(5);
	ck_assert_msg(L.ncalls >= n, "learn called %zu times, not %zu",
	    L.ncalls, n);
}

/* QUIET_TURNS loop turns in which fd gets nothing. */
static void
assert_quiet(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	for (int i = 0; i < QUIET_TURNS; i++) {
		turn(5);
		ck_assert_msg(poll(&pfd, 1, 0) == 0,
		    "an answer left while its learn was pending");
	}
}

/* ------------------------------------------------------------ a client */

struct ans {
	int		rcode;
	uint16_t	id;
	size_t		nan;
	char		addr[INET6_ADDRSTRLEN];	/* the first A record */
};

static int
client(int type)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd = socket(AF_INET, type, 0);

	ck_assert_int_ne(fd, -1);
	sa_lo(&ss, &sl, pport);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&ss, sl), 0);
	return fd;
}

/* Sends the query for name (type A) with id; over TCP with its frame. */
static void
send_q(int fd, bool tcp, const char *name, uint16_t id)
{
	ldns_pkt *pkt = NULL;
	uint8_t *wire = NULL, m[600];
	size_t len = 0, o = tcp ? 2 : 0;

	ck_assert_int_eq(ldns_pkt_query_new_frm_str(&pkt, name,
	    LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD), LDNS_STATUS_OK);
	ldns_pkt_set_id(pkt, id);
	ck_assert_int_eq(ldns_pkt2wire(&wire, pkt, &len), LDNS_STATUS_OK);
	ck_assert_uint_le(len + o, sizeof(m));
	m[0] = (uint8_t)(len >> 8);
	m[1] = (uint8_t)len;
	memcpy(m + o, wire, len);
	LDNS_FREE(wire);
	ldns_pkt_free(pkt);
	ck_assert_int_eq(send(fd, m, len + o, 0), (ssize_t)(len + o));
}

static void
parse_ans(const uint8_t *m, size_t len, struct ans *a)
{
	ldns_pkt *pkt = NULL;
	ldns_rr_list *an;

	memset(a, 0, sizeof(*a));
	a->rcode = -1;
	if (ldns_wire2pkt(&pkt, m, len) != LDNS_STATUS_OK)
		return;
	a->rcode = ldns_pkt_get_rcode(pkt);
	a->id = ldns_pkt_id(pkt);
	an = ldns_pkt_answer(pkt);
	a->nan = ldns_rr_list_rr_count(an);
	if (a->nan > 0 && ldns_rr_get_type(ldns_rr_list_rr(an, 0)) ==
	    LDNS_RR_TYPE_A)
		inet_ntop(AF_INET, ldns_rdf_data(ldns_rr_rdf(
		    ldns_rr_list_rr(an, 0), 0)), a->addr, sizeof(a->addr));
	ldns_pkt_free(pkt);
}

/* The next UDP answer on fd, turning the loop until it arrives. */
static void
recv_ans(int fd, struct ans *a)
{
	uint8_t r[4096];
	ssize_t n;

	ck_assert_msg(turn_until_readable(fd), "no answer within the bound");
	n = recv(fd, r, sizeof(r), 0);
	ck_assert_int_gt(n, 0);
	parse_ans(r, (size_t)n, a);
}

/* The next framed TCP answer on fd, turning the loop while it comes. */
static void
recv_ans_tcp(int fd, struct ans *a)
{
	uint8_t r[4096];
	size_t got = 0, want = 2;
	ssize_t n;

	while (got < want) {
		ck_assert_msg(turn_until_readable(fd), "no TCP answer");
		n = recv(fd, r + got, want - got, 0);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
		if (got == 2 && want == 2) {
			want = 2 + (size_t)(r[0] << 8 | r[1]);
			ck_assert_uint_le(want, sizeof(r));
		}
	}
	parse_ans(r + 2, want - 2, a);
}

/* How many records there are for qname, and the last one in *ev. */
static size_t
events_for(const char *qname, struct dns_event *ev)
{
	size_t n = 0;

	for (size_t i = 0; i < L.nev; i++)
		if (strcmp(L.ev[i].qname, qname) == 0) {
			n++;
			if (ev != NULL)
				*ev = L.ev[i];
		}
	return n;
}

/* Asks name once from a fresh client and acknowledges its learn at once,
 * so that the proxy caches the answer: the next ask is ready within the
 * loop iteration that reads it. */
static void
prime(const char *name)
{
	struct ans a;
	int fd = client(SOCK_DGRAM);
	size_t calls = L.ncalls;

	send_q(fd, false, name, 1);
	turn_until_calls(calls + 1);
	dns_learn_done(proxy, L.calls[calls].ticket, 0, NULL);
	recv_ans(fd, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	close(fd);
}

/* ------------------------------------------------------------- the tests */

/* The answer waits for the acknowledgement, however many loop turns pass,
 * and leaves with the addresses its elements carried. */
START_TEST(pending_holds_until_done)
{
	struct dns_event ev;
	struct ans a;
	char ip[INET_ADDRSTRLEN];
	int fd = client(SOCK_DGRAM);

	send_q(fd, false, "n10.example.test", 0x1010);
	turn_until_calls(1);
	ck_assert_uint_gt(L.calls[0].ticket, 0);
	ck_assert_uint_eq(L.calls[0].n, 1);
	inet_ntop(AF_INET, L.calls[0].e[0].addr, ip, sizeof(ip));
	ck_assert_str_eq(ip, "192.0.2.10");
	ck_assert_uint_eq(L.calls[0].e[0].proto, IPPROTO_TCP);
	ck_assert_uint_eq(L.calls[0].e[0].port_lo, 443);
	ck_assert_str_eq(L.calls[0].e[0].ifname, SBX_IF);
	assert_quiet(fd);
	/* Not even recorded: the record comes with the answer. */
	ck_assert_uint_eq(events_for("n10.example.test", NULL), 0);
	dns_learn_done(proxy, L.calls[0].ticket, 0, NULL);
	recv_ans(fd, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_uint_eq(a.id, 0x1010);
	ck_assert_uint_eq(a.nan, 1);
	ck_assert_str_eq(a.addr, "192.0.2.10");
	ck_assert_uint_eq(events_for("n10.example.test", &ev), 1);
	ck_assert_int_eq(ev.decision, DNS_DEC_ALLOW);
	ck_assert_uint_eq(ev.rcode, 0);
	ck_assert_uint_eq(ev.nelems, 1);
	ck_assert_uint_eq(L.ncalls, 1);
	close(fd);
}
END_TEST

/* A ticket that is not pending (never given, or already done) changes
 * nothing: the held answer stays held, a released one is not sent twice. */
START_TEST(unknown_ticket_ignored)
{
	struct ans a;
	int fd = client(SOCK_DGRAM);
	uint64_t t;

	send_q(fd, false, "n11.example.test", 0x1111);
	turn_until_calls(1);
	t = L.calls[0].ticket;
	dns_learn_done(proxy, t + 1000, 0, NULL);
	dns_learn_done(proxy, 0, EIO, "test: not a ticket");
	assert_quiet(fd);
	dns_learn_done(proxy, t, 0, NULL);
	recv_ans(fd, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	dns_learn_done(proxy, t, EIO, "test: done twice");
	assert_quiet(fd);
	ck_assert_uint_eq(events_for("n11.example.test", NULL), 1);
	close(fd);
}
END_TEST

/* A refusal acknowledged later, for an answer alone: SERVFAIL, with the
 * cap's reason and finding for ENOSPC and learn_failed otherwise. */
static const struct {
	int		err_no;
	const char	*reason;
	bool		finding;
} refuse_cases[] = {
	{ EIO, "learn_failed", false },
	{ ENOSPC, "learned_cap", true },
};

START_TEST(done_refused_single)
{
	struct dns_event ev;
	struct ans a;
	int fd = client(SOCK_DGRAM);

	send_q(fd, false, "n12.example.test", 0x1212);
	turn_until_calls(1);
	dns_learn_done(proxy, L.calls[0].ticket, refuse_cases[_i].err_no,
	    "test: refused later");
	recv_ans(fd, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(a.nan, 0);
	ck_assert_uint_eq(events_for("n12.example.test", &ev), 1);
	ck_assert_int_eq(ev.decision, DNS_DEC_ERROR);
	ck_assert_str_eq(pol_reason_name(ev.reason), refuse_cases[_i].reason);
	ck_assert_int_eq(ev.finding, refuse_cases[_i].finding);
	/* An answer alone is not retried. */
	turn(20);
	ck_assert_uint_eq(L.ncalls, 1);
	close(fd);
}
END_TEST

/*
 * Two answers ready in one loop iteration go in one call; refused later
 * (by either errno: a batch mixes sandboxes, so one at its cap must not
 * fail the others), each is learned again alone, each retry pending in
 * turn: the one refused again gets SERVFAIL, the other its address.
 */
START_TEST(done_refused_batch_retried_alone)
{
	struct dns_event ev;
	struct ans a;
	size_t base, i, bad;
	int c1, c2;

	prime("n21.example.test");
	prime("n22.example.test");
	base = L.ncalls;
	c1 = client(SOCK_DGRAM);
	c2 = client(SOCK_DGRAM);
	/* Both are in the proxy's socket before the loop turns: read in
	 * one wakeup, answered from the cache, ready together. */
	send_q(c1, false, "n21.example.test", 0x2121);
	send_q(c2, false, "n22.example.test", 0x2222);
	turn_until_calls(base + 1);
	ck_assert_uint_eq(L.calls[base].n, 2);
	assert_quiet(c1);
	assert_quiet(c2);
	ck_assert_uint_eq(L.ncalls, base + 1);
	dns_learn_done(proxy, L.calls[base].ticket, refuse_cases[_i].err_no,
	    "test: batch refused");
	turn_until_calls(base + 3);
	ck_assert_uint_eq(L.calls[base + 1].n, 1);
	ck_assert_uint_eq(L.calls[base + 2].n, 1);
	ck_assert_uint_gt(L.calls[base + 1].ticket, L.calls[base].ticket);
	ck_assert_uint_gt(L.calls[base + 2].ticket, L.calls[base + 1].ticket);
	/* Still nothing out: the retries are pending too. */
	assert_quiet(c1);
	assert_quiet(c2);
	bad = L.calls[base + 1].e[0].addr[3] == 22 ? base + 1 : base + 2;
	ck_assert_uint_eq(L.calls[bad].e[0].addr[3], 22);
	for (i = base + 1; i <= base + 2; i++)
		dns_learn_done(proxy, L.calls[i].ticket, i == bad ?
		    refuse_cases[_i].err_no : 0, NULL);
	recv_ans(c1, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_str_eq(a.addr, "192.0.2.21");
	recv_ans(c2, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(events_for("n22.example.test", &ev), 2);
	ck_assert_str_eq(pol_reason_name(ev.reason), refuse_cases[_i].reason);
	ck_assert_uint_eq(L.ncalls, base + 3);
	close(c1);
	close(c2);
}
END_TEST

/*
 * At most DNS_LEARN_INFLIGHT calls pending: an answer ready beyond that
 * is not handed to learn until an acknowledgement frees a slot, and then
 * it is; every answer leaves once its own call is done.
 */
START_TEST(inflight_bounded)
{
	enum { N = DNS_LEARN_INFLIGHT + 1 };
	bool seen[N];
	struct ans a;
	size_t base, i;
	int fd;

	prime("n30.example.test");
	base = L.ncalls;
	fd = client(SOCK_DGRAM);
	/* One query per loop iteration: one call each. */
	for (i = 0; i < DNS_LEARN_INFLIGHT; i++) {
		send_q(fd, false, "n30.example.test", (uint16_t)i);
		turn_until_calls(base + i + 1);
	}
	send_q(fd, false, "n30.example.test", N - 1);
	assert_quiet(fd);
	ck_assert_uint_eq(L.ncalls, base + DNS_LEARN_INFLIGHT);
	/* One acknowledgement: its answer leaves, and the waiting one goes
	 * to learn (and is held there in turn). */
	dns_learn_done(proxy, L.calls[base].ticket, 0, NULL);
	recv_ans(fd, &a);
	ck_assert_uint_eq(a.id, 0);
	turn_until_calls(base + N);
	assert_quiet(fd);
	for (i = 1; i < N; i++)
		dns_learn_done(proxy, L.calls[base + i].ticket, 0, NULL);
	memset(seen, 0, sizeof(seen));
	for (i = 1; i < N; i++) {
		recv_ans(fd, &a);
		ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
		ck_assert_uint_lt(a.id, N);
		ck_assert(!seen[a.id]);
		seen[a.id] = true;
	}
	ck_assert_uint_eq(L.ncalls, base + N);
	close(fd);
}
END_TEST

/* A held answer is out of its query timer's reach: a timeout shorter than
 * the wait for the acknowledgement neither fails it over nor answers it. */
START_TEST(held_outlives_query_timeout)
{
	struct ans a;
	int fd;

	proxy_down();
	proxy_up(100);
	fd = client(SOCK_DGRAM);
	send_q(fd, false, "n40.example.test", 0x4040);
	turn_until_calls(1);
	for (int i = 0; i < 4; i++) {
		turn(100);
		ck_assert_uint_eq(events_for("n40.example.test", NULL), 0);
	}
	assert_quiet(fd);
	dns_learn_done(proxy, L.calls[0].ticket, 0, NULL);
	recv_ans(fd, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_str_eq(a.addr, "192.0.2.40");
	close(fd);
}
END_TEST

/* A TCP client: one that half-closes while its answer is held still gets
 * it; one that resets the connection meanwhile has its answer dropped on
 * release (recorded, rcode none), nothing used after it is freed. */
START_TEST(held_tcp_client)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct dns_event ev;
	struct ans a;
	int fd;

	fd = client(SOCK_STREAM);
	send_q(fd, true, "n50.example.test", 0x5050);
	turn_until_calls(1);
	ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
	assert_quiet(fd);
	dns_learn_done(proxy, L.calls[0].ticket, 0, NULL);
	recv_ans_tcp(fd, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_str_eq(a.addr, "192.0.2.50");
	close(fd);

	fd = client(SOCK_STREAM);
	send_q(fd, true, "n51.example.test", 0x5151);
	turn_until_calls(2);
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg,
	    sizeof(lg)), 0);
	close(fd);
	for (int i = 0; i < QUIET_TURNS; i++)
		turn(5);
	ck_assert_uint_eq(events_for("n51.example.test", NULL), 0);
	dns_learn_done(proxy, L.calls[1].ticket, 0, NULL);
	turn(5);
	ck_assert_uint_eq(events_for("n51.example.test", &ev), 1);
	ck_assert(ev.tcp);
	ck_assert_int_eq(ev.decision, DNS_DEC_ALLOW);
	ck_assert_uint_eq(ev.rcode, 255);	/* nobody to answer */
}
END_TEST

/* When the acknowledgements will never come: every held answer gets
 * SERVFAIL, and a late acknowledgement of their tickets is ignored. */
START_TEST(abort_all_fails_pending)
{
	struct dns_event ev;
	struct ans a;
	int c1 = client(SOCK_DGRAM), c2 = client(SOCK_DGRAM);

	send_q(c1, false, "n60.example.test", 0x6060);
	turn_until_calls(1);
	send_q(c2, false, "n61.example.test", 0x6161);
	turn_until_calls(2);
	ck_assert_uint_eq(dns_learn_abort_all(proxy), 2);
	recv_ans(c1, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_SERVFAIL);
	recv_ans(c2, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(events_for("n61.example.test", &ev), 1);
	ck_assert_str_eq(pol_reason_name(ev.reason), "learn_failed");
	dns_learn_done(proxy, L.calls[0].ticket, 0, NULL);
	assert_quiet(c1);
	ck_assert_uint_eq(dns_learn_abort_all(proxy), 0);
	ck_assert_uint_eq(L.ncalls, 2);
	close(c1);
	close(c2);
}
END_TEST

/* dns_free with calls pending frees every held query without answering
 * or recording it (the sanitizers check the rest). */
START_TEST(free_with_pending)
{
	int u = client(SOCK_DGRAM), t = client(SOCK_STREAM);
	struct pollfd pfd = { .fd = u, .events = POLLIN };

	send_q(u, false, "n70.example.test", 0x7070);
	turn_until_calls(1);
	send_q(t, true, "n71.example.test", 0x7171);
	turn_until_calls(2);
	proxy_down();
	ck_assert_uint_eq(L.nev, 0);
	ck_assert_int_eq(poll(&pfd, 1, 0), 0);
	close(u);
	close(t);
}
END_TEST

/* An answer with no element to learn (NXDOMAIN) needs no call. */
START_TEST(nothing_to_learn_no_call)
{
	struct ans a;
	int fd = client(SOCK_DGRAM);

	send_q(fd, false, "nx.example.test", 0x0808);
	recv_ans(fd, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NXDOMAIN);
	ck_assert_uint_eq(L.ncalls, 0);
	close(fd);
}
END_TEST

/* The synchronous hook as the daemon's is today: 0 releases at once, -1
 * answers SERVFAIL at once; tickets increase call by call either way. */
START_TEST(sync_hook_unchanged)
{
	struct dns_event ev;
	struct ans a;
	int fd = client(SOCK_DGRAM);

	L.mode = L_OK;
	send_q(fd, false, "n80.example.test", 0x8080);
	recv_ans(fd, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_NOERROR);
	ck_assert_str_eq(a.addr, "192.0.2.80");
	L.mode = L_FAIL;
	L.fail_errno = EIO;
	send_q(fd, false, "n81.example.test", 0x8181);
	recv_ans(fd, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(events_for("n81.example.test", &ev), 1);
	ck_assert_str_eq(pol_reason_name(ev.reason), "learn_failed");
	L.fail_errno = ENOSPC;
	send_q(fd, false, "n82.example.test", 0x8282);
	recv_ans(fd, &a);
	ck_assert_int_eq(a.rcode, LDNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(events_for("n82.example.test", &ev), 1);
	ck_assert_str_eq(pol_reason_name(ev.reason), "learned_cap");
	ck_assert_uint_eq(L.ncalls, 3);
	ck_assert_uint_lt(L.calls[0].ticket, L.calls[1].ticket);
	ck_assert_uint_lt(L.calls[1].ticket, L.calls[2].ticket);
	/* A late dns_learn_done of a synchronous ticket is not pending. */
	dns_learn_done(proxy, L.calls[0].ticket, EIO, NULL);
	assert_quiet(fd);
	close(fd);
}
END_TEST

static Suite *
learn_suite(void)
{
	Suite *s = suite_create("dns_learn");
	TCase *tc = tcase_create("Async");

	tcase_add_unchecked_fixture(tc, world_up, world_down);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, pending_holds_until_done);
	tcase_add_test(tc, unknown_ticket_ignored);
	tcase_add_loop_test(tc, done_refused_single, 0,
	    sizeof(refuse_cases) / sizeof(refuse_cases[0]));
	tcase_add_loop_test(tc, done_refused_batch_retried_alone, 0,
	    sizeof(refuse_cases) / sizeof(refuse_cases[0]));
	tcase_add_test(tc, inflight_bounded);
	tcase_add_test(tc, held_outlives_query_timeout);
	tcase_add_test(tc, held_tcp_client);
	tcase_add_test(tc, abort_all_fails_pending);
	tcase_add_test(tc, free_with_pending);
	tcase_add_test(tc, nothing_to_learn_no_call);
	tcase_add_test(tc, sync_hook_unchanged);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(learn_suite());
	int nf;

	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
