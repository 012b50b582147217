/*
 * child.c: the DNS process. sluiced's parent starts it (gateway/privsep/
 * proc.c) with the listeners it bound on the service address and one end
 * of a socket pair; everything a sandbox sends to port 53 is parsed here,
 * by a process that runs as its own unprivileged user, with no
 * capabilities, no_new_privs and a seccomp filter (gateway/privsep/priv.h),
 * holding no key, no database and no netlink socket. What it knows it was
 * told in messages (gateway/privsep/msg.h): the proxy's configuration, the
 * policy set as text (loaded here again, so no pointer crosses), and the
 * sandbox table as add/remove/change. What it decides goes back as
 * messages too: learn batches, which the parent applies in one netlink
 * batch and acknowledges before the answers leave (dns_learn_done), and
 * the dns.decision events of each loop turn, in one message, for the audit
 * log.
 *
 * It fails closed: until the first MSG_SYNC it serves nothing, and when
 * the parent goes away it exits (its answers could no longer be learned).
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/dns/dns.h"
#include "gateway/dns/gate.h"
#include "gateway/ev.h"
#include "gateway/log.h"
#include "gateway/privsep/chan.h"
#include "gateway/privsep/msg.h"
#include "gateway/privsep/pchild.h"
#include "gateway/privsep/sbxtab.h"
#include "gateway/privsep/polrx.h"
#include "gateway/privsep/priv.h"
#include "gateway/privsep/proc.h"

#define DNSC_QUEUE_MAX	(64u * 1024u * 1024u)	/* to the parent */
#define DNSC_PROBES	64u	/* HTTPS lookups the gate asked for, to start */

struct dnsc {
	struct ev_loop		*loop;
	struct chan		*ch;
	struct dns_proxy	*proxy;
	struct msg_dns_config	 cfg;
	bool			 have_cfg;
	int			 ufd, tfd, gfd;
	struct gate		*gate;		/* the name gate, on gfd */
	struct pol_set		*set, *old;
	struct ev_timer		*old_free;
	struct polrx		*rx;
	struct sbxtab		*tab;		/* struct msg_sbx by address */
	struct msg_elem		*ebuf;		/* MSG_LEARN_MAX of them */
	unsigned char		*evbuf;		/* this turn's MSG_DNS_EVENTS */
	size_t			 evlen;		/* its bytes so far */
	uint32_t		 nev;		/* its records */
	struct ev_timer		*evflush;	/* its send at the turn's end */
	char			 probe[DNSC_PROBES][256];	/* to look up */
	size_t			 nprobe;
	struct ev_timer		*probe_t;	/* starts them after the turn */
	uint64_t		 lost;
	int			 status;	/* exit status */
	/* What an earlier process answered (MSG_GATE_ANSWERS), held until
	 * the gate starts at MSG_SYNC. */
	struct msg_answer	*replay;
	size_t			 nreplay, replaycap;
};

/* ------------------------------------------------------------- hooks */

static const uint32_t table_types[] = { MSG_SBX_ADD, MSG_SBX_DEL,
    MSG_SBX_CHANGE };

static int
h_lookup(void *ctx, const struct sockaddr *src, socklen_t len,
    struct dns_client *c)
{
	struct dnsc *d = ctx;
	const struct sockaddr_in *sin;
	const struct msg_sbx *e;

	if (src == NULL || src->sa_family != AF_INET ||
	    len < (socklen_t)sizeof(*sin))
		return -1;
	sin = (const struct sockaddr_in *)(const void *)src;
	/* A sandbox is in the table before its creation returns: its
	 * MSG_SBX_ADD is on the socket before anything in it can send a
	 * query. */
	if ((e = sbxtab_lookup(d->tab, (const uint8_t *)&sin->sin_addr, d->ch,
	    table_types, sizeof(table_types) / sizeof(table_types[0]))) ==
	    NULL)
		return -1;
	memset(c, 0, sizeof(*c));
	memcpy(c->id, e->id, strnlen(e->id, sizeof(c->id) - 1));
	memcpy(c->ifname, e->ifname, strnlen(e->ifname,
	    sizeof(c->ifname) - 1));
	/* A sandbox whose policy is not in the set resolves nothing. */
	if ((c->policy = pol_set_get(d->set, e->policy)) == NULL)
		return -1;
	c->tainted = e->tainted != 0;
	return 0;
}

/* The HTTPS lookups the gate asks for start after the gate's own turn:
 * their end (which may come at once, on a failure) judges flows again,
 * which must not happen inside the judging that asked. */
static void
on_probes(struct ev_loop *loop, void *arg)
{
	struct dnsc *d = arg;
	char names[DNSC_PROBES][256];
	size_t i, n = d->nprobe;

	(void)loop;
	d->probe_t = NULL;
	memcpy(names, d->probe, n * sizeof(names[0]));
	d->nprobe = 0;
	for (i = 0; i < n; i++)
		if (dns_probe_https(d->proxy, names[i]) == -1)
			gate_ech_done(d->gate, names[i], -1, NULL, 0);
}

/* The gate keeps at most DNSC_PROBES lookups pending (gate_ech.h), so
 * the list has room; without memory for the deferral the lookup stays
 * pending, and the flows that wait for it are refused at their bound. */
static void
g_ech_lookup(void *ctx, const char *name)
{
	struct dnsc *d = ctx;

	if (d->nprobe == DNSC_PROBES || (d->probe_t == NULL &&
	    (d->probe_t = ev_defer(d->loop, on_probes, d)) == NULL)) {
		log_warnx("gate: an HTTPS lookup not started");
		return;
	}
	snprintf(d->probe[d->nprobe++], sizeof(d->probe[0]), "%s", name);
}

static void
h_https(void *ctx, const char *name, int status, const struct ech_set *set,
    uint32_t ttl_s)
{
	struct dnsc *d = ctx;

	gate_ech_done(d->gate, name, status, set, ttl_s);
}

static int
h_learn(void *ctx, uint64_t ticket, const struct fw_elem *e, size_t n,
    char *err, size_t errlen)
{
	struct dnsc *d = ctx;
	struct msg_learn m;
	struct iovec v[2];
	size_t i;

	if (n == 0 || n > MSG_LEARN_MAX) {
		snprintf(err, errlen, "%zu elements in one batch", n);
		errno = EINVAL;
		return -1;
	}
	memset(&m, 0, sizeof(m));
	m.ticket = ticket;
	m.n = (uint32_t)n;
	for (i = 0; i < n; i++) {
		msg_elem_from(&d->ebuf[i], &e[i]);
		/* What the gate will check a flow's name against. A
		 * sandbox over the gate's bound has flows to the address
		 * refused, never opened. */
		if (d->gate != NULL && e[i].name != NULL &&
		    gate_learn(d->gate, e[i].ifname, e[i].name, e[i].family,
		    e[i].addr, e[i].proto, e[i].port_lo, e[i].port_hi,
		    e[i].timeout_ms) == -1 && errno != ENOSPC)
			log_warn("gate: an answer not kept");
	}
	v[0].iov_base = &m;
	v[0].iov_len = sizeof(m);
	v[1].iov_base = d->ebuf;
	v[1].iov_len = n * sizeof(*d->ebuf);
	if (chan_send(d->ch, MSG_LEARN, v, 2) == -1) {
		snprintf(err, errlen, "to the parent: %s", strerror(errno));
		return -1;
	}
	return DNS_LEARN_PENDING;
}

/* Sends the events held for this turn (after the count of those lost
 * before, to keep the order in which the parent hears of them). A parent
 * that does not keep up costs records, counted, never answers. */
static void
send_events(struct dnsc *d)
{
	struct msg_dns_events h;
	struct msg_lost l;

	if (d->nev == 0)
		return;
	if (d->lost > 0 && d->ch != NULL) {
		l.events = d->lost;
		if (chan_send1(d->ch, MSG_LOST, &l, sizeof(l)) == 0)
			d->lost = 0;
	}
	memset(&h, 0, sizeof(h));
	h.n = d->nev;
	memcpy(d->evbuf, &h, sizeof(h));
	if (d->lost > 0 || d->ch == NULL ||
	    chan_send1(d->ch, MSG_DNS_EVENTS, d->evbuf, d->evlen) == -1)
		d->lost += d->nev;
	d->nev = 0;
	d->evlen = sizeof(h);
}

static void
on_evflush(struct ev_loop *loop, void *arg)
{
	struct dnsc *d = arg;

	(void)loop;
	d->evflush = NULL;
	send_events(d);
}

/*
 * Holds one event for the message of this loop turn: one send per turn
 * instead of one per query, and only the used part of each event (most
 * carry one or two addresses of their slots). A full batch goes now.
 */
static void
h_record(void *ctx, const struct dns_event *ev)
{
	struct dnsc *d = ctx;
	size_t sz = msg_dns_ev_size(ev);

	if (d->nev == MSG_EVENTS_MAX ||
	    d->evlen + sz > sizeof(struct msg_dns_events) + MSG_EVENTS_BYTES)
		send_events(d);
	d->evlen += msg_dns_ev_put(d->evbuf + d->evlen, ev);
	d->nev++;
	/* Without a deferred send the batch goes now: later is only an
	 * optimisation, never a reason to lose a record. */
	if (d->evflush == NULL &&
	    (d->evflush = ev_defer(d->loop, on_evflush, d)) == NULL)
		send_events(d);
}

/* ---------------------------------------------------------- name gate */

static void	quit(struct dnsc *, int, const char *);

static int
g_lookup(void *ctx, const uint8_t addr4[4], struct gate_sbx *out)
{
	struct dnsc *d = ctx;
	const struct msg_sbx *e;

	if ((e = sbxtab_lookup(d->tab, addr4, d->ch, table_types,
	    sizeof(table_types) / sizeof(table_types[0]))) == NULL)
		return -1;
	memset(out, 0, sizeof(*out));
	memcpy(out->id, e->id, strnlen(e->id, sizeof(out->id) - 1));
	memcpy(out->ifname, e->ifname, strnlen(e->ifname,
	    sizeof(out->ifname) - 1));
	if ((out->policy = pol_set_get(d->set, e->policy)) == NULL)
		return -1;
	out->tainted = e->tainted != 0;
	return 0;
}

static void
g_deny(void *ctx, const struct gate_event *ev)
{
	struct dnsc *d = ctx;

	/* Counted like a lost dns.decision when the parent lags. */
	if (d->ch == NULL ||
	    chan_send1(d->ch, MSG_GATE_EVENT, ev, sizeof(*ev)) == -1)
		d->lost++;
}

static void
g_verdict(void *ctx, uint16_t queue, uint32_t id, enum gate_action a)
{
	struct dnsc *d = ctx;
	struct msg_gate_verdict v;

	(void)queue;	/* one queue, the parent's */
	v.id = id;
	v.action = (uint32_t)a;
	/* Not sent, the packet stays queued: it never passes, and goes
	 * with the queue. */
	if (d->ch == NULL ||
	    chan_send1(d->ch, MSG_GATE_VERDICT, &v, sizeof(v)) == -1)
		log_warnx("gate: a verdict not sent");
}

static void
g_pass(void *ctx, const uint8_t saddr[4], const uint8_t daddr[4],
    uint16_t sport, uint16_t dport, const char *name)
{
	struct dnsc *d = ctx;
	struct msg_gate_pass m;

	memset(&m, 0, sizeof(m));
	memcpy(m.saddr, saddr, 4);
	memcpy(m.daddr, daddr, 4);
	m.sport = sport;
	m.dport = dport;
	memcpy(m.name, name, strnlen(name, sizeof(m.name) - 1));
	/* Lost, the flow's record goes without its name. */
	if (d->ch != NULL)
		(void)chan_send1(d->ch, MSG_GATE_PASS, &m, sizeof(m));
}

static void
restore_one(struct dnsc *d, const struct msg_answer *a)
{
	if (gate_restore(d->gate, a->ifname, a->name, a->family, a->addr,
	    a->proto, a->port_lo, a->port_hi, a->expires_ms) == -1 &&
	    errno != ENOSPC)
		log_warn("gate: an answer not restored");
}

/*
 * The answers an earlier DNS process gave, which the kernel still lets
 * the sandboxes reach: they come before MSG_SYNC, so that the gate knows
 * them before it reads its first packet, and are held until it exists.
 * The parent sends them (it is trusted; its copy is bounded per sandbox),
 * so holding them costs what the gate will hold anyway.
 */
static void
on_answers(struct dnsc *d, const struct msg_answers *m, size_t len)
{
	const struct msg_answer *a = (const struct msg_answer *)(m + 1);
	struct msg_answer *nv;
	size_t cap;
	uint32_t i;

	if (!msg_answers_ok(m, len)) {
		quit(d, 1, "gate answers: a malformed batch");
		return;
	}
	if (!d->have_cfg || !d->cfg.gate)
		return;
	if (d->gate != NULL) {
		for (i = 0; i < m->n; i++)
			restore_one(d, &a[i]);
		return;
	}
	if (d->nreplay + m->n > d->replaycap) {
		cap = d->replaycap != 0 ? d->replaycap : MSG_ANSWERS_MAX;
		while (cap < d->nreplay + m->n)
			cap *= 2;
		if ((nv = reallocarray(d->replay, cap, sizeof(*nv))) == NULL) {
			/* Not kept, their flows are refused until the
			 * sandbox asks again: never let through. */
			log_warn("gate: answers not restored");
			return;
		}
		d->replay = nv;
		d->replaycap = cap;
	}
	memcpy(d->replay + d->nreplay, a, m->n * sizeof(*a));
	d->nreplay += m->n;
}

static void
start_gate(struct dnsc *d)
{
	struct gate_hooks gh;

	if (!d->cfg.gate || d->gfd == -1)
		return;
	memset(&gh, 0, sizeof(gh));
	gh.lookup = g_lookup;
	gh.deny = g_deny;
	gh.verdict = g_verdict;
	gh.pass = g_pass;
	gh.ech_lookup = g_ech_lookup;
	gh.ctx = d;
	if ((d->gate = gate_new(d->loop, d->gfd, d->cfg.gate_queue, &gh)) == NULL) {
		quit(d, 1, "gate: cannot serve the queue");
		return;
	}
	d->gfd = -1;	/* the gate's now */
	for (size_t i = 0; i < d->nreplay; i++)
		restore_one(d, &d->replay[i]);
	if (d->nreplay > 0)
		log_info("gate: %zu answers of an earlier process restored",
		    d->nreplay);
	free(d->replay);
	d->replay = NULL;
	d->nreplay = d->replaycap = 0;
	log_info("gate: serving its queue");
}

/* --------------------------------------------------------- messages */

static void
quit(struct dnsc *d, int status, const char *why)
{
	if (why != NULL)
		log_warnx("%s", why);
	send_events(d);
	d->status = status;
	ev_stop(d->loop);
}

static void
on_gone(void *ctx, const char *why)
{
	struct dnsc *d = ctx;

	/* Without the parent nothing can be learned: stop serving. */
	chan_free(d->ch);
	d->ch = NULL;
	quit(d, 0, NULL);
	(void)why;
}

static void
free_old(struct ev_loop *loop, void *arg)
{
	struct dnsc *d = arg;

	(void)loop;
	d->old_free = NULL;
	pol_set_free(d->old);
	d->old = NULL;
}

static void
on_policy(struct dnsc *d, uint32_t type, const void *pl, size_t len)
{
	struct pol_set *s;
	char err[320];
	int rc;

	if ((rc = polrx_msg(d->rx, type, pl, len, NULL, &s, err,
	    sizeof(err))) == -1) {
		quit(d, 1, err);
		return;
	}
	if (rc == 0)
		return;
	/* The old set may still be pointed at by this loop turn's
	 * queries: it goes once the turn is over. */
	if (d->old != NULL) {
		ev_timer_cancel(d->loop, d->old_free);
		pol_set_free(d->old);
	}
	d->old = d->set;
	d->set = s;
	if (d->old != NULL && (d->old_free = ev_defer(d->loop, free_old,
	    d)) == NULL)
		log_warn("policy set: deferred free");
}

/* The first MSG_SYNC: configuration, policies and table are in; now the
 * listeners are served. */
static void
start_proxy(struct dnsc *d)
{
	struct dns_config dc;
	struct dns_hooks h;
	struct msg_ready r;
	char err[256];

	if (!d->have_cfg || d->set == NULL) {
		quit(d, 1, "sync before configuration and policies");
		return;
	}
	memset(&dc, 0, sizeof(dc));
	dc.service_addr = d->cfg.service_addr;
	memcpy(dc.upstreams, d->cfg.upstreams, sizeof(dc.upstreams));
	for (size_t i = 0; i < DNS_MAX_UPSTREAMS; i++)
		dc.upstream_lens[i] = d->cfg.upstream_lens[i];
	dc.nupstreams = d->cfg.nupstreams;
	dc.timeout_ms = d->cfg.timeout_ms;
	dc.tcp_idle_ms = d->cfg.tcp_idle_ms;
	dc.max_tcp_conns = d->cfg.max_tcp_conns;
	dc.tcp_per_sandbox = d->cfg.tcp_per_sandbox;
	dc.max_answer_addrs = d->cfg.max_answer_addrs;
	dc.max_pending = d->cfg.max_pending;
	dc.cache_max = d->cfg.cache_max;
	dc.max_udp_size = d->cfg.max_udp_size;
	dc.no_cache = d->cfg.no_cache != 0;
	dc.treat_as_public = d->cfg.tap;
	dc.ntreat_as_public = d->cfg.ntap;
	dc.prebound = true;
	dc.listen_udp = d->ufd;
	dc.listen_tcp = d->tfd;
	memset(&h, 0, sizeof(h));
	h.lookup = h_lookup;
	h.learn = h_learn;
	h.record = h_record;
	h.https = h_https;
	h.ctx = d;
	d->ufd = d->tfd = -1;	/* the proxy's now, whatever happens */
	if ((d->proxy = dns_new(d->loop, &dc, &h, err, sizeof(err))) ==
	    NULL) {
		quit(d, 1, err);
		return;
	}
	start_gate(d);
	if (d->gate == NULL && d->cfg.gate)
		return;
	r.pid = (uint32_t)getpid();
	(void)chan_send1(d->ch, MSG_READY, &r, sizeof(r));
	log_info("serving");
}

static void
on_msg(void *ctx, uint32_t type, void *pl, size_t len)
{
	struct dnsc *d = ctx;

	switch (type) {
	case MSG_DNS_CONFIG:
		memcpy(&d->cfg, pl, sizeof(d->cfg));
		if (d->proxy != NULL || d->cfg.nupstreams == 0 ||
		    d->cfg.nupstreams > DNS_MAX_UPSTREAMS ||
		    d->cfg.ntap > MSG_TAP_MAX) {
			quit(d, 1, "a configuration it cannot use");
			return;
		}
		d->have_cfg = true;
		break;
	case MSG_POLICY_BEGIN:
	case MSG_POLICY_FILE:
	case MSG_POLICY_DATA:
	case MSG_POLICY_END:
		on_policy(d, type, pl, len);
		break;
	case MSG_SBX_ADD:
	case MSG_SBX_CHANGE: {
		const struct msg_sbx *m = pl;
		struct msg_sbx *e;
		int made;

		if (!msg_sbx_ok(m) ||
		    (e = sbxtab_put(d->tab, m->addr4, &made)) == NULL) {
			quit(d, 1, "sandbox table: bad entry or no memory");
			return;
		}
		*e = *m;
		break;
	}
	case MSG_SBX_DEL: {
		const struct msg_sbx *m = pl, *e;

		if (!msg_sbx_ok(m)) {
			quit(d, 1, "sandbox table: bad entry");
			return;
		}
		/* Only the sandbox named: the address may be another's by
		 * now. */
		if ((e = sbxtab_get(d->tab, m->addr4)) != NULL &&
		    strcmp(e->id, m->id) == 0) {
			sbxtab_del(d->tab, m->addr4);
			/* Its answers go with it, as the parent's copy
			 * does: the next sandbox on the link starts with
			 * none. */
			gate_forget(d->gate, m->ifname);
		}
		break;
	}
	case MSG_GATE_ANSWERS:
		on_answers(d, pl, len);
		break;
	case MSG_SYNC:
		if (d->proxy == NULL)
			start_proxy(d);
		break;
	case MSG_LEARN_ACK: {
		struct msg_learn_ack *a = pl;

		a->err[sizeof(a->err) - 1] = '\0';
		if (d->proxy != NULL)
			dns_learn_done(d->proxy, a->ticket, a->err_no,
			    a->err[0] != '\0' ? a->err : NULL);
		break;
	}
	default:
		break;
	}
}

static void
warm_up(void)
{
	static const char text[] = "version: 1\nname: warm-up\n";
	struct pol_errors *errs = pol_errors_new(1);

	if (errs != NULL)
		pol_policy_free(pol_policy_load_buf("warm-up", text,
		    sizeof(text) - 1, NULL, errs));
	pol_errors_free(errs);
}

int
dns_child_main(int argc, char **argv)
{
	uid_t uid;
	gid_t gid;
	char err[256];
	struct dnsc *d;
	int c;

	if ((c = pchild_start(argc, argv, "dns", &uid, &gid)) != 0)
		return c;
	/* What loads files on its first use does it now, while it still
	 * may: OpenSSL reads its config at the first digest (a policy's),
	 * libyaml and the loader allocate their tables. A policy that does
	 * not validate is enough to go through all of them. */
	warm_up();
	/* Nothing of a sandbox's has been read yet, and nothing will be
	 * before this: every later syscall is the filter's to allow. */
	if (priv_drop(uid, gid, NULL, err, sizeof(err)) == -1 ||
	    priv_seccomp(PRIV_ROOM_DNS, err, sizeof(err)) == -1) {
		log_warnx("%s", err);
		return 1;
	}
	if ((d = calloc(1, sizeof(*d))) == NULL ||
	    (d->ebuf = calloc(MSG_LEARN_MAX, sizeof(*d->ebuf))) == NULL ||
	    (d->evbuf = malloc(sizeof(struct msg_dns_events) +
	    MSG_EVENTS_BYTES)) == NULL ||
	    (d->rx = polrx_new()) == NULL ||
	    (d->tab = sbxtab_new(sizeof(struct msg_sbx))) == NULL ||
	    (d->loop = ev_new()) == NULL) {
		log_warn("start");
		return 1;
	}
	d->evlen = sizeof(struct msg_dns_events);
	d->ufd = PROC_FIRST_FD;
	d->tfd = PROC_FIRST_FD + 1;
	d->gfd = PROC_FIRST_FD + 2;	/* meaningful only with cfg.gate */
	if ((d->ch = chan_new(d->loop, PROC_CHAN_FD, MSG_TO_CHILD,
	    DNSC_QUEUE_MAX, on_msg, on_gone, d)) == NULL) {
		log_warn("channel");
		return 1;
	}
	if (ev_run(d->loop) == -1)
		log_warn("event loop");
	c = d->status;
	gate_free(d->gate);
	d->gate = NULL;
	dns_free(d->proxy);
	send_events(d);		/* what the last turn and the teardown made */
	if (d->ufd != -1)
		close(d->ufd);
	if (d->tfd != -1)
		close(d->tfd);
	if (d->gfd != -1 && d->cfg.gate)
		close(d->gfd);
	chan_free(d->ch);
	ev_timer_cancel(d->loop, d->evflush);
	ev_timer_cancel(d->loop, d->probe_t);
	ev_timer_cancel(d->loop, d->old_free);
	pol_set_free(d->old);
	pol_set_free(d->set);
	polrx_free(d->rx);
	sbxtab_free(d->tab);
	ev_free(d->loop);
	free(d->ebuf);
	free(d->evbuf);
	free(d->replay);
	free(d);
	return c;
}
