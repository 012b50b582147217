/*
 * gate.c: the name gate's handler (see gate.h): the queue socket, the
 * flows waiting for their name, the answers each sandbox was given, and
 * the verdicts.
 *
 * The kernel queues a gated flow's packets from its SYN on (fw_gate.c).
 * The SYN gives the flow its start: the bytes the server will read first
 * begin at ISN + 1, and only bytes in order from there are read, so a
 * segment sent ahead of a gap (which the server would place after the
 * gap) can never be what the gate reads as the start. Segments with data
 * are held, unanswered, until the name is read or a bound is reached;
 * one that repeats held bytes must repeat them exactly (a server keeps
 * one copy, and which one is its choice); one past a gap is dropped (the
 * sender sends it again). Bare ACKs pass: they carry nothing.
 *
 * Verdicts are NF_REPEAT with the gate's bit in the packet mark (the
 * forward chain turns it into the flow's conntrack label), or NF_DROP
 * for packets a verdict makes useless. This process decides them; the
 * parent sends them (enum gate_action), as the kernel takes verdicts only
 * from a process with CAP_NET_ADMIN. A flow decided is forgotten:
 * the kernel never queues it again.
 */
#include <sys/queue.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

#include "gateway/dns/gate.h"
#include "gateway/dns/gate_ech.h"
#include "gateway/dns/peek.h"
#include "gateway/log.h"

#define G_FLOW_BUCKETS	8192u
#define G_ANS_BUCKETS	65536u
#define G_SBX_BUCKETS	1024u
#define G_HELD_MAX	64		/* packets held per flow */
#define G_SWEEP_MS	200
#define G_RBUF		(65536u + 4096u)

#define TH_FIN	0x01
#define TH_SYN	0x02
#define TH_RST	0x04

struct g_sbx;

/* An answer is found two ways: by (sandbox, address), for the names a
 * flow's address was answered for, and by (sandbox, address, name), for
 * the refresh of one answer and the check of one name. One chain served
 * both, and a CDN address answered for thousands of names made every
 * answer a walk of all of them. */
struct g_ans {
	struct g_ans	*next, **pprev;		/* (sandbox, address) chain */
	struct g_ans	*xnext, **xpprev;	/* (sandbox, address, name) */
	struct g_ans	*snext;		/* the sandbox's list */
	struct g_sbx	*sbx;
	uint8_t		 family, proto;
	uint16_t	 lo, hi;
	uint8_t		 addr[16];
	uint64_t	 expires_ms;
	char		*name;
};

struct g_flow {
	struct g_flow	*next;		/* bucket chain */
	struct g_flow	*lprev, *lnext;	/* every flow, for the sweep */
	struct g_sbx	*sbx;
	uint8_t		 saddr[4], daddr[4];
	uint16_t	 sport, dport;
	uint32_t	 start, next_seq;	/* ISN + 1, and what comes next */
	uint64_t	 syn_ms, data_ms;	/* data_ms 0: nothing held yet */
	unsigned	 checks;		/* 1 << enum pol_check */
	bool		 ech_wait;		/* its ECH waits for a lookup */
	uint8_t		*buf;
	size_t		 blen;
	uint32_t	 held[G_HELD_MAX];
	size_t		 nheld;
	/* Decided: packets queued before the verdict reached conntrack
	 * still arrive, and get the same answer, for GATE_HOLD_MS or
	 * until the flow is the oldest decided one over a bound. */
	int		 decided;		/* 0, DEC_OK, DEC_DENY */
	uint64_t	 decided_ms;
	TAILQ_ENTRY(g_flow) sdq;		/* its sandbox's decided, oldest first */
	TAILQ_ENTRY(g_flow) gdq;		/* every sandbox's decided */
};

TAILQ_HEAD(g_flowq, g_flow);

#define DEC_OK		1
#define DEC_DENY	2

struct g_sbx {
	struct g_sbx	*next;
	char		 ifname[16];
	char		 id[33];
	struct g_ans	*ans;
	size_t		 nans;
	size_t		 nflows;	/* between SYN and verdict */
	size_t		 ndecided;
	struct g_flowq	 decided;
	uint64_t	 min_exp;	/* no answer expires before (0: unknown) */
	uint64_t	 ev_sec;
	uint32_t	 ev_count, suppressed;
};

struct gate {
	struct ev_loop		*loop;
	int			 fd;
	struct gate_hooks	 h;
	struct ev_timer		*sweep;
	uint8_t			*rbuf;
	uint16_t		 queue;		/* the configured NFQUEUE number */
	struct g_flow		*flows[G_FLOW_BUCKETS];
	struct g_flow		*all;
	size_t			 nflows, nans;	/* nflows: between SYN and verdict */
	size_t			 ndecided;
	struct g_flowq		 decided;
	struct g_ans		*ans[G_ANS_BUCKETS];	/* by sandbox, address */
	struct g_ans		*xans[G_ANS_BUCKETS];	/* ... and name */
	struct g_sbx		*sbx[G_SBX_BUCKETS];
	struct gech		*ech;		/* what names publish for ECH */
};

static uint32_t
hash(const void *p, size_t n, uint32_t h)
{
	const uint8_t *b = p;

	while (n-- > 0)
		h = (h ^ *b++) * 16777619u;
	return h;
}

/* ------------------------------------------------------------ sandboxes */

static struct g_sbx *
sbx_get(struct gate *g, const char *ifname, bool make)
{
	char key[16] = { 0 };
	uint32_t b;
	struct g_sbx *s;

	memcpy(key, ifname, strnlen(ifname, sizeof(key) - 1));
	b = hash(key, sizeof(key), 2166136261u) % G_SBX_BUCKETS;
	for (s = g->sbx[b]; s != NULL; s = s->next)
		if (memcmp(s->ifname, key, sizeof(key)) == 0)
			return s;
	if (!make || (s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	memcpy(s->ifname, key, sizeof(key));
	TAILQ_INIT(&s->decided);
	s->next = g->sbx[b];
	g->sbx[b] = s;
	return s;
}

/* -------------------------------------------------------------- answers */

static uint32_t
ans_bucket(const struct g_sbx *s, const uint8_t addr[16])
{
	return hash(addr, 16, hash(&s, sizeof(s), 2166136261u)) %
	    G_ANS_BUCKETS;
}

static uint32_t
xans_bucket(const struct g_sbx *s, const uint8_t addr[16], const char *name)
{
	return hash(name, strlen(name), hash(addr, 16, hash(&s, sizeof(s),
	    2166136261u))) % G_ANS_BUCKETS;
}

static void
ans_unlink(struct gate *g, struct g_ans *a)
{
	if ((*a->pprev = a->next) != NULL)
		a->next->pprev = a->pprev;
	if ((*a->xpprev = a->xnext) != NULL)
		a->xnext->xpprev = a->xpprev;
	g->nans--;
	a->sbx->nans--;
}

/* The sandbox's expired answers go (at its bound, before a new one).
 * A sandbox at its bound with nothing expired would otherwise walk all
 * its answers for every new one: the walk waits until the earliest
 * expiry it found has passed. */
static void
ans_prune(struct gate *g, struct g_sbx *s, uint64_t now)
{
	struct g_ans **pp = &s->ans, *a;
	uint64_t min = UINT64_MAX;

	if (s->min_exp > now)
		return;
	while ((a = *pp) != NULL) {
		if (a->expires_ms > now) {
			if (a->expires_ms < min)
				min = a->expires_ms;
			pp = &a->snext;
			continue;
		}
		*pp = a->snext;
		ans_unlink(g, a);
		free(a->name);
		free(a);
	}
	s->min_exp = min;
}

static void
lower(char *d, const char *s, size_t size)
{
	size_t i;

	for (i = 0; i + 1 < size && s[i] != '\0'; i++)
		d[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') :
		    s[i];
	d[i] = '\0';
	/* One trailing dot is the same name. */
	if (i > 1 && d[i - 1] == '.')
		d[i - 1] = '\0';
}

/* gate_learn and gate_restore: an answer that lives until expires (on
 * ev_now_ms's clock), now being now. */
static int
learn_until(struct gate *g, const char *ifname, const char *name,
    uint8_t family, const uint8_t addr[16], uint8_t proto, uint16_t lo,
    uint16_t hi, uint64_t now, uint64_t expires)
{
	char n[PEEK_NAME_MAX];
	struct g_sbx *s;
	struct g_ans *a;
	uint32_t b;

	if (g == NULL || ifname == NULL || name == NULL || name[0] == '\0' ||
	    addr == NULL) {
		errno = EINVAL;
		return -1;
	}
	lower(n, name, sizeof(n));
	if ((s = sbx_get(g, ifname, true)) == NULL)
		return -1;
	b = xans_bucket(s, addr, n);
	for (a = g->xans[b]; a != NULL; a = a->xnext)
		if (a->sbx == s && a->family == family && a->proto == proto &&
		    a->lo == lo && a->hi == hi &&
		    memcmp(a->addr, addr, 16) == 0 && strcmp(a->name, n) == 0) {
			a->expires_ms = expires;
			if (a->expires_ms < s->min_exp)
				s->min_exp = a->expires_ms;
			return 0;
		}
	if (s->nans >= GATE_ANSWERS_PER_SBX)
		ans_prune(g, s, now);
	if (s->nans >= GATE_ANSWERS_PER_SBX) {
		errno = ENOSPC;
		return -1;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL ||
	    (a->name = strdup(n)) == NULL) {
		free(a);
		return -1;
	}
	a->sbx = s;
	a->family = family;
	a->proto = proto;
	a->lo = lo;
	a->hi = hi;
	memcpy(a->addr, addr, 16);
	a->expires_ms = expires;
	if (a->expires_ms < s->min_exp)
		s->min_exp = a->expires_ms;
	if ((a->xnext = g->xans[b]) != NULL)
		a->xnext->xpprev = &a->xnext;
	a->xpprev = &g->xans[b];
	g->xans[b] = a;
	b = ans_bucket(s, addr);
	if ((a->next = g->ans[b]) != NULL)
		a->next->pprev = &a->next;
	a->pprev = &g->ans[b];
	g->ans[b] = a;
	a->snext = s->ans;
	s->ans = a;
	s->nans++;
	g->nans++;
	return 0;
}

int
gate_learn(struct gate *g, const char *ifname, const char *name,
    uint8_t family, const uint8_t addr[16], uint8_t proto, uint16_t lo,
    uint16_t hi, uint32_t timeout_ms)
{
	uint64_t now = ev_now_ms();

	return learn_until(g, ifname, name, family, addr, proto, lo, hi, now,
	    now + timeout_ms);
}

int
gate_restore(struct gate *g, const char *ifname, const char *name,
    uint8_t family, const uint8_t addr[16], uint8_t proto, uint16_t lo,
    uint16_t hi, uint64_t expires_ms)
{
	uint64_t now = ev_now_ms();

	/* What ended while no process held it is not brought back. */
	if (expires_ms <= now)
		return 0;
	return learn_until(g, ifname, name, family, addr, proto, lo, hi, now,
	    expires_ms);
}

static const uint8_t *
v4key(const uint8_t a4[4], uint8_t out[16])
{
	memset(out, 0, 16);
	memcpy(out, a4, 4);
	return out;
}

/* Was s answered name (NULL: any name) with daddr, usable on TCP dport,
 * and not expired? With name NULL, fn sees each such name. */
static bool
answered(struct gate *g, struct g_sbx *s, const char *name,
    const uint8_t daddr[4], uint16_t dport,
    void (*fn)(void *, const char *), void *arg)
{
	uint8_t key[16];
	uint64_t now = ev_now_ms();
	struct g_ans *a;
	bool any = false;

	v4key(daddr, key);
	if (name != NULL) {
		for (a = g->xans[xans_bucket(s, key, name)]; a != NULL;
		    a = a->xnext)
			if (a->sbx == s && a->family == AF_INET &&
			    a->proto == IPPROTO_TCP && dport >= a->lo &&
			    dport <= a->hi && a->expires_ms > now &&
			    memcmp(a->addr, key, 16) == 0 &&
			    strcmp(a->name, name) == 0)
				return true;
		return false;
	}
	for (a = g->ans[ans_bucket(s, key)]; a != NULL; a = a->next) {
		if (a->sbx != s || a->family != AF_INET ||
		    a->proto != IPPROTO_TCP || dport < a->lo ||
		    dport > a->hi || a->expires_ms <= now ||
		    memcmp(a->addr, key, 16) != 0)
			continue;
		fn(arg, a->name);
		any = true;
	}
	return any;
}

/* ---------------------------------------------------------------- flows */

static uint32_t
flow_bucket(const uint8_t s[4], const uint8_t d[4], uint16_t sp, uint16_t dp)
{
	uint32_t h = hash(s, 4, 2166136261u);

	h = hash(d, 4, h);
	h = hash(&sp, 2, h);
	return hash(&dp, 2, h) % G_FLOW_BUCKETS;
}

static struct g_flow *
flow_find(struct gate *g, const uint8_t s[4], const uint8_t d[4],
    uint16_t sp, uint16_t dp)
{
	struct g_flow *f;

	for (f = g->flows[flow_bucket(s, d, sp, dp)]; f != NULL; f = f->next)
		if (f->sport == sp && f->dport == dp &&
		    memcmp(f->saddr, s, 4) == 0 && memcmp(f->daddr, d, 4) == 0)
			return f;
	return NULL;
}

/* A decided flow leaves the decided queues (freed, or its tuple
 * reused by a new flow). */
static void
undecided(struct gate *g, struct g_flow *f)
{
	TAILQ_REMOVE(&f->sbx->decided, f, sdq);
	TAILQ_REMOVE(&g->decided, f, gdq);
	f->sbx->ndecided--;
	g->ndecided--;
}

static void
flow_free(struct gate *g, struct g_flow *f)
{
	struct g_flow **pp = &g->flows[flow_bucket(f->saddr, f->daddr,
	    f->sport, f->dport)];

	for (; *pp != NULL; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	if (f->lprev != NULL)
		f->lprev->lnext = f->lnext;
	else
		g->all = f->lnext;
	if (f->lnext != NULL)
		f->lnext->lprev = f->lprev;
	if (f->decided)
		undecided(g, f);
	else {
		g->nflows--;
		f->sbx->nflows--;
	}
	free(f->buf);
	free(f);
}

/* --------------------------------------------------------------- verdicts */

static void
act(struct gate *g, uint32_t id, enum gate_action a)
{
	g->h.verdict(g->h.ctx, g->queue, id, a);
}

static void
report(struct gate *g, struct g_sbx *s, const uint8_t sa[4],
    const uint8_t da[4], uint16_t sp, uint16_t dp, enum pol_reason r,
    unsigned checks, const char *name)
{
	struct gate_event ev;
	uint64_t sec = ev_now_ms() / 1000;

	if (s == NULL || g->h.deny == NULL)
		return;
	if (s->ev_sec != sec) {
		s->ev_sec = sec;
		s->ev_count = 0;
	}
	if (s->ev_count >= GATE_EVENTS_PER_S) {
		s->suppressed++;
		return;
	}
	s->ev_count++;
	memset(&ev, 0, sizeof(ev));
	memcpy(ev.sandbox, s->id, sizeof(ev.sandbox));
	if (name != NULL)
		memcpy(ev.name, name, strnlen(name, sizeof(ev.name) - 1));
	memcpy(ev.saddr, sa, 4);
	memcpy(ev.daddr, da, 4);
	ev.sport = sp;
	ev.dport = dp;
	ev.reason = (uint32_t)r;
	ev.check = (checks & (1u << POL_CHECK_TLS)) ? POL_CHECK_TLS :
	    (checks & (1u << POL_CHECK_HTTP)) ? POL_CHECK_HTTP : POL_CHECK_NONE;
	ev.suppressed = s->suppressed;
	s->suppressed = 0;
	g->h.deny(g->h.ctx, &ev);
}

/*
 * A decided flow is remembered only for its late packets, which come
 * within milliseconds of the verdict. It no longer counts among the flows
 * waiting for a name, whose bound it filled for GATE_HOLD_MS: a sandbox
 * opening more than GATE_FLOWS_PER_SBX / 2 s flows each second had its
 * SYNs dropped, each costing its client a second. Decided flows have
 * bounds of their own, per sandbox and in all, and over one the oldest
 * are forgotten (trim_decided), though not here: a decision can come
 * from a walk of every flow, which must not lose its next one.
 */
static void
remember_decided(struct gate *g, struct g_flow *f)
{
	struct g_sbx *s = f->sbx;

	g->nflows--;
	s->nflows--;
	TAILQ_INSERT_TAIL(&s->decided, f, sdq);
	TAILQ_INSERT_TAIL(&g->decided, f, gdq);
	s->ndecided++;
	g->ndecided++;
}

/* Back within the decided bounds: sandbox s's (if not NULL), then all.
 * Over them by at most the flows one walk decided. */
static void
trim_decided(struct gate *g, struct g_sbx *s)
{
	while (s != NULL && s->ndecided > GATE_DECIDED_PER_SBX)
		flow_free(g, TAILQ_FIRST(&s->decided));
	while (g->ndecided > GATE_DECIDED_MAX)
		flow_free(g, TAILQ_FIRST(&g->decided));
}

/* The flow's held packets: the first carries the verdict, the others
 * follow it (allowed) or are dropped (refused: the reset answers). */
static void
decide(struct gate *g, struct g_flow *f, bool ok, enum pol_reason r,
    const char *name)
{
	size_t i;

	for (i = 0; i < f->nheld; i++) {
		if (ok)
			act(g, f->held[i], GATE_PASS);
		else if (i == 0)
			act(g, f->held[i], GATE_REFUSE);
		else
			act(g, f->held[i], GATE_DROP);
	}
	f->nheld = 0;
	if (ok && name != NULL && g->h.pass != NULL)
		g->h.pass(g->h.ctx, f->saddr, f->daddr, f->sport, f->dport,
		    name);
	if (!ok)
		report(g, f->sbx, f->saddr, f->daddr, f->sport, f->dport, r,
		    f->checks, name);
	free(f->buf);
	f->buf = NULL;
	f->blen = 0;
	if (f->decided) {
		f->decided = ok ? DEC_OK : DEC_DENY;
		return;
	}
	f->decided = ok ? DEC_OK : DEC_DENY;
	f->decided_ms = ev_now_ms();
	remember_decided(g, f);
}

struct checks_ctx {
	const struct gate_sbx	*sb;
	uint16_t		 port;
	unsigned		 checks;
};

static void
add_check(void *arg, const char *name)
{
	struct checks_ctx *c = arg;
	struct pol_decision d;
	enum pol_check ck;

	pol_egress_check(c->sb->policy, name, c->port, c->sb->tainted, &d,
	    &ck);
	if (d.verdict == POL_ALLOW)
		c->checks |= 1u << ck;
}

/* The name read from f's bytes: the policy allows it on the port with
 * the check that read it, and the sandbox was answered it here. */
static void
judge_name(struct gate *g, struct g_flow *f, const struct gate_sbx *sb,
    enum pol_check by, const char *name)
{
	struct pol_decision d;
	enum pol_check ck;

	pol_egress_check(sb->policy, name, f->dport, sb->tainted, &d, &ck);
	if (d.verdict == POL_ALLOW && ck == by &&
	    answered(g, f->sbx, name, f->daddr, f->dport, NULL, NULL))
		decide(g, f, true, POL_REASON_ALLOWED, name);
	else
		decide(g, f, false, POL_REASON_NAME_MISMATCH, name);
}

/*
 * An encrypted_client_hello. Real ECH hides the name the server reads
 * (the inner ClientHello's), so it is refused; GREASE ECH (what clients
 * send when they have no config) leaves the outer server_name the real
 * one, judged as usual. The two differ only in whether the config id
 * and suite name a config the server publishes, so the gate asks what
 * the names this sandbox was answered at the flow's address publish
 * (their HTTPS records, which the DNS process looks up at the first ECH
 * ClientHello that needs them, and keeps for their TTL):
 *   - a match, or a name whose configs are unknown (over a bound, the
 *     lookup failed, more configs than kept): refused, reason ech;
 *   - a lookup still pending: the flow waits (within GATE_HOLD_MS);
 *   - none: GREASE, and the outer server_name decides.
 * What remains: a config the server accepts that its names do not
 * publish (an old one still honoured, one handed out of band) passes as
 * GREASE; its outer server_name must still be a name this sandbox was
 * answered at this address and its policy allows, so the flow reaches
 * only a server that the sandbox may reach, but the name inside, which
 * the server acts on, is not read.
 */
struct ech_ctx {
	struct gate		*g;
	const struct g_sbx	*s;
	const struct peek_out	*o;
	bool			 real, wait;
};

static void
ech_name(void *arg, const char *name)
{
	struct ech_ctx *c = arg;
	struct gate *g = c->g;
	const struct ech_set *set;
	uint64_t now = ev_now_ms();
	enum gech_state st = gech_get(g->ech, name, now, &set);

	switch (st) {
	case GECH_PENDING:
		c->wait = true;
		break;
	case GECH_KNOWN:
		if (set != NULL && (set->more || ech_match(set,
		    c->o->ech_config_id, c->o->ech_kdf, c->o->ech_aead)))
			c->real = true;
		break;
	case GECH_UNKNOWN:
		/* Looked up at the first ECH that needs it: the DNS path
		 * pays nothing for names no ECH ClientHello goes to. Over
		 * a bound, unknown stays unknown. */
		if (g->h.ech_lookup != NULL &&
		    gech_want(g->ech, c->s->ifname, name, now)) {
			g->h.ech_lookup(g->h.ctx, name);
			c->wait = true;
		} else
			c->real = true;
		break;
	case GECH_FAILED:
	default:
		c->real = true;
		break;
	}
	/* An expired entry is used while its refresh is looked up. */
	if (st == GECH_KNOWN && g->h.ech_lookup != NULL &&
	    gech_want(g->ech, c->s->ifname, name, now))
		g->h.ech_lookup(g->h.ctx, name);
}

static void
judge_ech(struct gate *g, struct g_flow *f, const struct gate_sbx *sb,
    const struct peek_out *o)
{
	struct ech_ctx c = { g, f->sbx, o, false, false };

	f->ech_wait = false;
	if (o->ech_outer)
		(void)answered(g, f->sbx, NULL, f->daddr, f->dport, ech_name,
		    &c);
	if (!o->ech_outer || c.real) {
		decide(g, f, false, POL_REASON_ECH, o->name);
		return;
	}
	if (c.wait) {
		f->ech_wait = true;
		return;
	}
	if (o->name[0] == '\0') {
		decide(g, f, false, POL_REASON_NO_NAME, NULL);
		return;
	}
	judge_name(g, f, sb, POL_CHECK_TLS, o->name);
}

/* What f's bytes so far say, read as the port's check would. */
static void
judge(struct gate *g, struct g_flow *f, const struct gate_sbx *sb)
{
	bool tls = f->blen > 0 && f->buf[0] == 0x16;
	enum peek_result r;
	struct peek_out o;

	if (tls && !(f->checks & (1u << POL_CHECK_TLS))) {
		decide(g, f, false, POL_REASON_NOT_HTTP, NULL);
		return;
	}
	if (!tls && !(f->checks & (1u << POL_CHECK_HTTP))) {
		decide(g, f, false, POL_REASON_NOT_TLS, NULL);
		return;
	}
	r = tls ? peek_tls(f->buf, f->blen, &o) : peek_http(f->buf, f->blen,
	    &o);
	switch (r) {
	case PEEK_MORE:
		return;
	case PEEK_NAME:
		judge_name(g, f, sb, tls ? POL_CHECK_TLS : POL_CHECK_HTTP,
		    o.name);
		return;
	case PEEK_ECH:
		judge_ech(g, f, sb, &o);
		return;
	case PEEK_NO_NAME:
		decide(g, f, false, POL_REASON_NO_NAME, NULL);
		return;
	case PEEK_NOT_HTTP:
		decide(g, f, false, POL_REASON_NOT_HTTP, NULL);
		return;
	case PEEK_NOT_TLS:
	case PEEK_MALFORMED:
	default:
		decide(g, f, false, tls ? POL_REASON_NOT_TLS :
		    POL_REASON_NOT_HTTP, NULL);
		return;
	}
}

/* ---------------------------------------------------------------- packets */

struct pkt {
	uint32_t	 id;
	const uint8_t	*ip;
	size_t		 iplen;
};

static int
attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(a);

	if (mnl_attr_type_valid(a, NFQA_MAX) > 0)
		tb[type] = a;
	return MNL_CB_OK;
}

/* A SYN: the flow's start. Data in it is never let through unread. */
static void
on_syn(struct gate *g, const struct pkt *p, const struct gate_sbx *sb,
    const uint8_t sa[4], const uint8_t da[4], uint16_t sp, uint16_t dp,
    uint32_t seq, size_t dlen)
{
	struct checks_ctx c = { sb, dp, 0 };
	struct g_sbx *s;
	struct g_flow *f;
	uint32_t b;

	if ((s = sbx_get(g, sb->ifname, true)) == NULL) {
		act(g, p->id, GATE_DROP);
		return;
	}
	memcpy(s->id, sb->id, sizeof(s->id));
	trim_decided(g, s);
	if (dlen > 0) {
		act(g, p->id, GATE_DROP);
		return;
	}
	(void)answered(g, s, NULL, da, dp, add_check, &c);
	if (c.checks == 0) {
		act(g, p->id, GATE_REFUSE);
		report(g, s, sa, da, sp, dp, POL_REASON_NAME_MISMATCH, 0, NULL);
		return;
	}
	/* Address only is what the policy asked for, for some name the
	 * sandbox was answered here (check: none). */
	if (c.checks & (1u << POL_CHECK_NONE)) {
		act(g, p->id, GATE_PASS);
		return;
	}
	f = flow_find(g, sa, da, sp, dp);
	if ((f == NULL || f->decided) && (s->nflows >= GATE_FLOWS_PER_SBX ||
	    g->nflows >= GATE_FLOWS_MAX)) {
		/* Its client sends the SYN again in a second. */
		act(g, p->id, GATE_DROP);
		report(g, s, sa, da, sp, dp, POL_REASON_OVERLOAD, c.checks,
		    NULL);
		return;
	}
	if (f == NULL) {
		if ((f = calloc(1, sizeof(*f))) == NULL) {
			act(g, p->id, GATE_DROP);
			report(g, s, sa, da, sp, dp, POL_REASON_NO_MEMORY,
			    c.checks, NULL);
			return;
		}
		f->sbx = s;
		memcpy(f->saddr, sa, 4);
		memcpy(f->daddr, da, 4);
		f->sport = sp;
		f->dport = dp;
		b = flow_bucket(sa, da, sp, dp);
		f->next = g->flows[b];
		g->flows[b] = f;
		f->lnext = g->all;
		if (g->all != NULL)
			g->all->lprev = f;
		g->all = f;
		g->nflows++;
		s->nflows++;
	} else if (f->decided) {
		/* The tuple again (a port reused): a new flow, and nothing of
		 * the old one may count for it. Its first data's time, kept,
		 * made the sweep refuse the new flow for holding data past
		 * its bound before it had sent any. */
		undecided(g, f);
		g->nflows++;
		s->nflows++;
		f->decided = 0;
		f->data_ms = 0;
		f->ech_wait = false;
	} else if (f->nheld > 0) {
		/* A new SYN on a flow holding data: refused. */
		decide(g, f, false, POL_REASON_NO_NAME, NULL);
		act(g, p->id, GATE_DROP);
		return;
	}
	f->start = f->next_seq = seq + 1;
	f->syn_ms = ev_now_ms();
	f->checks = c.checks;
	act(g, p->id, GATE_ACCEPT);
}

static void
on_data(struct gate *g, const struct pkt *p, struct g_flow *f,
    const struct gate_sbx *sb, uint32_t seq, const uint8_t *d, size_t dlen)
{
	int32_t rel = (int32_t)(seq - f->next_seq);
	size_t off = (size_t)(uint32_t)(seq - f->start), fresh;
	uint8_t *nb;

	if (rel > 0) {
		/* Past a gap: the sender will send it again. */
		act(g, p->id, GATE_DROP);
		return;
	}
	if (off > f->blen) {
		/* Before the start: nothing the server reads first. */
		act(g, p->id, GATE_DROP);
		return;
	}
	fresh = off + dlen > f->blen ? off + dlen - f->blen : 0;
	if (memcmp(f->buf != NULL ? f->buf + off : d, d, dlen - fresh) != 0) {
		decide(g, f, false, f->buf[0] == 0x16 ? POL_REASON_NOT_TLS :
		    POL_REASON_NOT_HTTP, NULL);
		act(g, p->id, GATE_DROP);
		return;
	}
	if (fresh == 0) {
		act(g, p->id, GATE_DROP);	/* a held copy */
		return;
	}
	if (f->blen + fresh > PEEK_MAX || f->nheld >= G_HELD_MAX) {
		act(g, p->id, GATE_DROP);
		decide(g, f, false, f->blen > 0 && f->buf[0] == 0x16 ?
		    POL_REASON_NOT_TLS : POL_REASON_NOT_HTTP, NULL);
		return;
	}
	if ((nb = realloc(f->buf, f->blen + fresh)) == NULL) {
		act(g, p->id, GATE_DROP);
		return;
	}
	f->buf = nb;
	memcpy(f->buf + f->blen, d + (dlen - fresh), fresh);
	f->blen += fresh;
	f->next_seq += (uint32_t)fresh;
	f->held[f->nheld++] = p->id;
	if (f->data_ms == 0)
		f->data_ms = ev_now_ms();
	judge(g, f, sb);
}

static void
on_packet(struct gate *g, const struct pkt *p)
{
	const uint8_t *ip = p->ip, *t;
	size_t ihl, tot, doff, dlen;
	uint16_t sp, dp;
	uint32_t seq;
	struct gate_sbx sb;
	struct g_flow *f;
	uint8_t flags;

	/* Only IPv4 sandboxes are known by address here: anything else
	 * the gate cannot place is refused. */
	if (p->iplen < 20 || ip[0] >> 4 != 4 ||
	    (ihl = (size_t)(ip[0] & 15) * 4) < 20 ||
	    (tot = (size_t)ip[2] << 8 | ip[3]) > p->iplen || tot < ihl + 20 ||
	    ip[9] != IPPROTO_TCP ||
	    (doff = (size_t)(ip[ihl + 12] >> 4) * 4) < 20 || ihl + doff > tot) {
		act(g, p->id, GATE_REFUSE);
		return;
	}
	t = ip + ihl;
	sp = (uint16_t)(t[0] << 8 | t[1]);
	dp = (uint16_t)(t[2] << 8 | t[3]);
	seq = (uint32_t)t[4] << 24 | (uint32_t)t[5] << 16 |
	    (uint32_t)t[6] << 8 | t[7];
	flags = t[13];
	dlen = tot - ihl - doff;
	memset(&sb, 0, sizeof(sb));
	if (g->h.lookup(g->h.ctx, ip + 12, &sb) == -1 || sb.policy == NULL) {
		act(g, p->id, GATE_REFUSE);
		return;
	}
	if (flags & TH_SYN) {
		on_syn(g, p, &sb, ip + 12, ip + 16, sp, dp, seq, dlen);
		return;
	}
	f = flow_find(g, ip + 12, ip + 16, sp, dp);
	if (f != NULL && f->decided) {
		/* Queued before the verdict took hold: the same answer. */
		act(g, p->id, f->decided == DEC_OK ? GATE_PASS : GATE_DROP);
		return;
	}
	if (f == NULL) {
		/* No SYN seen (an earlier process saw it, or none was
		 * sent): nothing says where its stream starts. */
		if (dlen == 0 && (flags & (TH_FIN | TH_RST))) {
			act(g, p->id, GATE_ACCEPT);
			return;
		}
		act(g, p->id, GATE_REFUSE);
		report(g, sbx_get(g, sb.ifname, false), ip + 12, ip + 16, sp,
		    dp, POL_REASON_NO_NAME, 0, NULL);
		return;
	}
	if (dlen == 0) {
		if (flags & (TH_FIN | TH_RST)) {
			if (f->nheld > 0)
				decide(g, f, false, POL_REASON_NO_NAME, NULL);
			flow_free(g, f);
		}
		act(g, p->id, GATE_ACCEPT);
		return;
	}
	on_data(g, p, f, &sb, seq, t + doff, dlen);
}

static int
msg_cb(const struct nlmsghdr *nlh, void *data)
{
	struct gate *g = data;
	const struct nlattr *tb[NFQA_MAX + 1] = { 0 };
	const struct nfqnl_msg_packet_hdr *ph;
	const struct nfgenmsg *gm = mnl_nlmsg_get_payload(nlh);
	struct pkt p;

	if ((nlh->nlmsg_type & 0xff) != NFQNL_MSG_PACKET ||
	    mnl_attr_parse(nlh, sizeof(*gm), attr_cb, tb) < 0 ||
	    tb[NFQA_PACKET_HDR] == NULL ||
	    mnl_attr_get_payload_len(tb[NFQA_PACKET_HDR]) < sizeof(*ph))
		return MNL_CB_OK;
	if (ntohs(gm->res_id) != g->queue) {
		log_warnx("gate: a packet of queue %u, not %u", ntohs(gm->res_id),
		    g->queue);
		return MNL_CB_OK;
	}
	ph = mnl_attr_get_payload(tb[NFQA_PACKET_HDR]);
	memset(&p, 0, sizeof(p));
	p.id = ntohl(ph->packet_id);
	if (tb[NFQA_PAYLOAD] != NULL) {
		p.ip = mnl_attr_get_payload(tb[NFQA_PAYLOAD]);
		p.iplen = mnl_attr_get_payload_len(tb[NFQA_PAYLOAD]);
	}
	on_packet(g, &p);
	return MNL_CB_OK;
}

static void
on_read(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct gate *g = arg;
	ssize_t n;
	int i;

	(void)loop;
	(void)events;
	/* A bounded batch per turn: the DNS listeners get their share. */
	for (i = 0; i < 64; i++) {
		if ((n = recv(fd, g->rbuf, G_RBUF, MSG_DONTWAIT)) <= 0) {
			if (n == -1 && errno != EAGAIN && errno != EINTR &&
			    errno != ENOBUFS)
				log_warn("gate: queue");
			return;
		}
		(void)mnl_cb_run(g->rbuf, (size_t)n, 0, 0, msg_cb, g);
	}
}

void
gate_ech_done(struct gate *g, const char *name, int status,
    const struct ech_set *set, uint32_t ttl_s)
{
	char n[PEEK_NAME_MAX];
	struct gate_sbx sb;
	struct g_flow *f, *nx;

	if (g == NULL || name == NULL)
		return;
	lower(n, name, sizeof(n));
	if (gech_done(g->ech, n, status, set, ttl_s, ev_now_ms()) == 0)
		return;
	/* Every flow that waited on a lookup is judged again: few wait, and
	 * one may have waited on this name among others. */
	for (f = g->all; f != NULL; f = nx) {
		nx = f->lnext;
		if (f->decided || !f->ech_wait)
			continue;
		if (g->h.lookup(g->h.ctx, f->saddr, &sb) == -1) {
			decide(g, f, false, POL_REASON_SANDBOX_GONE, NULL);
			continue;
		}
		judge(g, f, &sb);
	}
	trim_decided(g, NULL);
}

/* Flows past their bounds: data held 2 s without a name is refused, a
 * flow that never sent data after its SYN forgotten. */
static void
on_sweep(struct ev_loop *loop, void *arg)
{
	struct gate *g = arg;
	struct g_flow *f, *nx;
	uint64_t now = ev_now_ms();

	for (f = g->all; f != NULL; f = nx) {
		nx = f->lnext;
		if (f->decided) {
			if (now - f->decided_ms >= GATE_HOLD_MS)
				flow_free(g, f);
		} else if (f->data_ms != 0 && now - f->data_ms >= GATE_HOLD_MS &&
		    f->ech_wait) {
			/* Its ECH's lookup did not end in time: unknown. */
			struct peek_out o;

			(void)peek_tls(f->buf, f->blen, &o);
			decide(g, f, false, POL_REASON_ECH, o.name);
		} else if (f->data_ms != 0 && now - f->data_ms >= GATE_HOLD_MS)
			decide(g, f, false, POL_REASON_NO_NAME, NULL);
		else if (f->data_ms == 0 && now - f->syn_ms >= GATE_IDLE_MS)
			flow_free(g, f);
	}
	trim_decided(g, NULL);
	gech_sweep(g->ech, now);
	if ((g->sweep = ev_timer_add(loop, G_SWEEP_MS, on_sweep, g)) == NULL)
		log_warn("gate: sweep timer");
}

struct gate *
gate_new(struct ev_loop *loop, int fd, uint16_t queue,
    const struct gate_hooks *hooks)
{
	struct gate *g;

	if (loop == NULL || fd < 0 || hooks == NULL || hooks->lookup == NULL ||
	    hooks->verdict == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if ((g = calloc(1, sizeof(*g))) == NULL ||
	    (g->rbuf = malloc(G_RBUF)) == NULL) {
		free(g);
		return NULL;
	}
	g->loop = loop;
	TAILQ_INIT(&g->decided);
	g->fd = fd;
	g->queue = queue;
	g->h = *hooks;
	if ((g->ech = gech_new()) == NULL ||
	    ev_add(loop, fd, EV_READ, on_read, g) == -1 ||
	    (g->sweep = ev_timer_add(loop, G_SWEEP_MS, on_sweep, g)) ==
	    NULL) {
		int e = errno;

		ev_del(loop, fd);
		gech_free(g->ech);
		free(g->rbuf);
		free(g);
		errno = e;
		return NULL;
	}
	return g;
}

void
gate_forget(struct gate *g, const char *ifname)
{
	struct g_sbx **pp, *s;
	struct g_flow *f, *nx;
	struct g_ans *a;
	char key[16] = { 0 };

	if (g == NULL || ifname == NULL ||
	    (s = sbx_get(g, ifname, false)) == NULL)
		return;
	for (f = g->all; f != NULL; f = nx) {
		nx = f->lnext;
		if (f->sbx != s)
			continue;
		if (!f->decided)
			decide(g, f, false, POL_REASON_SANDBOX_GONE, NULL);
		flow_free(g, f);
	}
	while ((a = s->ans) != NULL) {
		s->ans = a->snext;
		ans_unlink(g, a);
		free(a->name);
		free(a);
	}
	memcpy(key, s->ifname, sizeof(key));
	pp = &g->sbx[hash(key, sizeof(key), 2166136261u) % G_SBX_BUCKETS];
	for (; *pp != NULL; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	free(s);
}

void
gate_free(struct gate *g)
{
	size_t i;

	if (g == NULL)
		return;
	g->h.deny = NULL;	/* going down is no sandbox's doing */
	for (i = 0; i < G_SBX_BUCKETS; i++)
		while (g->sbx[i] != NULL)
			gate_forget(g, g->sbx[i]->ifname);
	while (g->all != NULL)
		flow_free(g, g->all);
	ev_timer_cancel(g->loop, g->sweep);
	ev_del(g->loop, g->fd);
	close(g->fd);
	gech_free(g->ech);
	free(g->rbuf);
	free(g);
}
