/*
 * dnswire.c: the parent's side of the DNS process. The proxy itself
 * (gateway/dns/) runs in a child of its own, unprivileged
 * (gateway/dns/child.c); this file binds its listeners on the service
 * address (port 53 needs privileges the child does not have), starts it
 * and starts it again when it dies (gateway/privsep/proc.c), and keeps it
 * told, in messages only (gateway/privsep/msg.h): its configuration, the
 * policy set in force as text, the sandbox table as it changes. What comes
 * back is checked as if a sandbox had written it: a learn batch becomes one
 * fw_learn (the answer leaves the child only after our acknowledgement;
 * its names then go to the flow records, flowrec_learned),
 * an event becomes its dns.decision record. The named answers the kernel
 * took are kept (gateway/privsep/ansmem.h) and handed to the next child
 * before it serves, so that its name gate knows what the kernel still
 * lets each sandbox reach. A child that sends what the
 * protocol does not allow, or an element no policy can allow (metadata,
 * loopback, link-local...), is killed, recorded and restarted.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/dns/dns_rec.h"
#include "gateway/dnswire.h"
#include "gateway/flowrec.h"
#include "gateway/gatewire.h"
#include "gateway/log.h"
#include "gateway/privsep/ansmem.h"
#include "gateway/privsep/chan.h"
#include "gateway/privsep/msg.h"
#include "gateway/privsep/polrx.h"
#include "gateway/privsep/priv.h"
#include "gateway/privsep/proc.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"
#include "netns/fw.h"

/* Records of one loop turn held for one submission burst; a turn that
 * makes more is submitted in slices of this many. */
#define DNSW_PENDING	256
#define DNSW_CANON_BUF	8192	/* most records take under 1 KiB */

/* What the parent may have queued for a child that does not read: the
 * table and the set, several times over; past it the child is killed. */
#define DNSW_QUEUE_MIN	(32u * 1024u * 1024u)

struct dnsw {
	struct gw		*gw;
	struct rec		*rec;		/* borrowed, may be NULL */
	struct sbx		*sbx;
	struct ev_loop		*loop;
	struct ev_timer		*flush;		/* deferred submission, or NULL */
	struct {
		const char	*kind;		/* a literal */
		json_t		*fields;
	}			 pending[DNSW_PENDING];
	size_t			 npending;
	uint64_t		 record_failures;
	/* The child. */
	int			 lfd[3];	/* UDP, TCP listeners, kept across restarts;
						 * the gate's queue, new at each start */
	uint16_t		 port;
	struct proc		*proc;
	struct chan		*ch;
	bool			 serving;
	char			 uid[16], gid[16];
	char			*argv[12];
	struct msg_dns_config	 mcfg;
	struct fw_elem		*lbuf;		/* MSG_LEARN_MAX */
	struct dns_event	*evscratch;	/* one event of a batch */
	uint64_t		 learn_batches, learn_refused, violations;
	uint64_t		 exits, lost;
	struct flowrec		*fr;		/* net.flow records, borrowed */
	struct ansmem		*am;		/* the gate's answers, for the
						   next child */
};

/* The policy named name in the set in force, or NULL. The pointer is valid
 * until the loop runs again (gw keeps its own reference to the set until a
 * reload swaps it), which is all dns.h asks of lookup. */
static const struct pol_policy *
current_policy(struct gw *gw, const char *name)
{
	struct gw_pset *ps = gw_pset_ref(gw);
	const struct pol_policy *p;

	p = pol_set_get(gw_pset_set(ps), name);
	gw_pset_unref(ps);
	return p;
}

/*
 * Submits the records held since the last flush, in the order they were
 * made. Async: a DNS decision must never wait for the disk. A full queue is
 * counted by audit/ and written as log.gap, so nothing is lost silently;
 * the log line is for the operator.
 */
static void
flush_records(struct dnsw *d)
{
	size_t i;

	for (i = 0; i < d->npending; i++) {
		const char *kind = d->pending[i].kind;

		if (rec_async(d->rec, kind, d->pending[i].fields) == 0)
			continue;
		if (strcmp(kind, "finding") == 0)
			log_warn("finding record of a DNS decision");
		else if (d->record_failures++ % 1000 == 0)
			log_warn("dns.decision record (%llu failed so far)",
			    (unsigned long long)d->record_failures);
	}
	d->npending = 0;
}

static void
on_flush(struct ev_loop *loop, void *arg)
{
	struct dnsw *d = arg;

	(void)loop;
	d->flush = NULL;
	flush_records(d);
}

/*
 * Holds one record (fields stolen) until the end of the loop turn. Every
 * submission may wake the audit writer, and the writer commits what it
 * finds queued as one transaction: records handed over one by one between
 * answers reach it a few at a time, the records of a whole turn handed over
 * back to back make one batch. The record is built now, while the event and
 * the policy it names are valid, so what is held is final.
 */
static void
hold_record(struct dnsw *d, const char *kind, json_t *fields)
{
	/* NULL (the converter ran out of memory) is held too: rec_async
	 * counts it as a failure and it is logged like one. */
	d->pending[d->npending].kind = kind;
	d->pending[d->npending++].fields = fields;
	if (d->npending == DNSW_PENDING) {
		flush_records(d);
		return;
	}
	/* Without a deferred callback the record goes now: later is only
	 * an optimisation, never a reason to lose it. */
	if (d->flush == NULL &&
	    (d->flush = ev_defer(d->loop, on_flush, d)) == NULL)
		flush_records(d);
}

/*
 * Packets anyone can send at line rate are counted, not recorded one by
 * one (rec_tally): from an address that is no sandbox (a host user, a
 * peer on the uplink), junk that does not parse, and a sandbox's queries
 * over its rate (the first of an interval is recorded, with its finding).
 * 1 when ev is to be recorded as it is.
 */
static int
itemised(const struct dnsw *d, const struct dns_event *ev)
{
	char key[sizeof(ev->client)], *hash;

	snprintf(key, sizeof(key), "%s", ev->client);
	/* The source address without its port: a flood from one address
	 * uses many ports. */
	if ((hash = strrchr(key, '#')) != NULL)
		*hash = '\0';
	if (ev->decision == DNS_DEC_MALFORMED)
		return rec_tally(d->rec, REC_TALLY_DNS_MALFORMED, key, ev->sandbox);
	if (ev->sandbox[0] == '\0')
		return rec_tally(d->rec, REC_TALLY_DNS_UNKNOWN, key, NULL);
	if (ev->reason == POL_REASON_RATE_LIMITED)
		return rec_tally(d->rec, REC_TALLY_DNS_RATE, ev->sandbox, NULL);
	return 1;
}

static void
h_record(void *ctx, const struct dns_event *ev)
{
	struct dnsw *d = ctx;
	const struct pol_policy *p = NULL;
	struct sbx_view v;
	char buf[DNSW_CANON_BUF];
	struct aud_cw w;

	/* A query is activity (resources.idle), itemised or not. */
	if (ev->sandbox[0] != '\0')
		sbx_touch_id(d->sbx, ev->sandbox);
	if (!itemised(d, ev))
		return;
	if (ev->sandbox[0] != '\0' &&
	    sbx_lookup_id(d->sbx, ev->sandbox, &v) == 0)
		p = current_policy(d->gw, v.policy);
	/* The common record goes as canonical bytes written in place: a
	 * JSON tree built, serialised and freed per query was what capped
	 * the proxy's queries/s. Held records go first, to keep the order;
	 * a record too large for the buffer takes the tree path. */
	aud_cw_init(&w, buf, sizeof(buf));
	if (dns_rec_canon(ev, p, &w) == 0) {
		if (d->npending > 0)
			flush_records(d);
		if (rec_canon(d->rec, "dns.decision", w.p, w.len) == 0)
			goto finding;
		/* Bytes the log refused (a bug here, never expected): the
		 * tree path still gets the decision recorded. A full queue
		 * is counted by audit/ and written as log.gap instead. */
		if (errno == EINVAL)
			hold_record(d, "dns.decision", dns_rec_fields(ev, p));
		if (d->record_failures++ % 1000 == 0)
			log_warn("dns.decision record (%llu failed so far)",
			    (unsigned long long)d->record_failures);
	} else
		hold_record(d, "dns.decision", dns_rec_fields(ev, p));
finding:
	if (ev->finding)
		hold_record(d, "finding", dns_rec_finding(ev));
}

static int
sa_from(struct sockaddr_storage *ss, socklen_t *len, const struct pol_addr *a,
    uint16_t port)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, a->a, 4);
		*len = sizeof(*s4);
		return 0;
	}
	if (a->family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, a->a, 16);
		*len = sizeof(*s6);
		return 0;
	}
	errno = EAFNOSUPPORT;
	return -1;
}

int
dnsw_config(const struct pol_config *cfg, uint16_t listen_port,
    struct dns_config *dc, char *err, size_t errlen)
{
	size_t i;

	memset(dc, 0, sizeof(*dc));
	if (sa_from(&dc->listen, &dc->listen_len, &cfg->service_addr,
	    listen_port != 0 ? listen_port : 53) == -1) {
		snprintf(err, errlen, "service address: bad family");
		return -1;
	}
	dc->service_addr = cfg->service_addr;
	if (cfg->ndns_upstreams == 0) {
		snprintf(err, errlen, "dns: no upstreams");
		errno = EINVAL;
		return -1;
	}
	/* The config allows more upstreams than the proxy fails over to;
	 * the first ones are the preferred ones. */
	for (i = 0; i < cfg->ndns_upstreams && i < DNS_MAX_UPSTREAMS; i++) {
		uint16_t port = cfg->dns_upstream_ports != NULL &&
		    cfg->dns_upstream_ports[i] != 0 ?
		    cfg->dns_upstream_ports[i] : 53;

		if (sa_from(&dc->upstreams[i], &dc->upstream_lens[i],
		    &cfg->dns_upstreams[i], port) == -1) {
			snprintf(err, errlen, "dns upstream %zu: bad family",
			    i + 1);
			return -1;
		}
	}
	dc->nupstreams = i;
	dc->timeout_ms = cfg->dns_timeout_ms;
	dc->treat_as_public = cfg->treat_as_public;
	dc->ntreat_as_public = cfg->ntreat_as_public;
	/* cache_max 0 means "the default" to the proxy, so the config's
	 * 0 (no cache) has to become no_cache rather than pass through. */
	if (cfg->dns_cache_entries == 0)
		dc->no_cache = true;
	else
		dc->cache_max = cfg->dns_cache_entries;
	/* limits: (0 in a hand-made config: the proxy's defaults). */
	dc->max_tcp_conns = cfg->lim_dns_tcp_conns;
	dc->tcp_per_sandbox = cfg->lim_dns_tcp_conns_sbx;
	dc->tcp_idle_ms = cfg->lim_dns_tcp_query_s * 1000u;
	return 0;
}

/* ------------------------------------------------------ the child */

static void	child_sync(struct dnsw *d);

/* The child broke the protocol: it goes, a finding says why, and proc
 * starts a fresh one (which gets the whole state again). */
static void
violation(struct dnsw *d, const char *what)
{
	char detail[160];

	d->violations++;
	log_warnx("dns process %ld: %s; killing it", (long)proc_pid(d->proc),
	    what);
	snprintf(detail, sizeof(detail), "dns process: %s", what);
	if (rec_async(d->rec, "finding", rec_finding_fields(NULL,
	    "privsep_violation", "high", detail)) == -1)
		log_warn("privsep_violation record");
	proc_kill(d->proc);
}

/* Sends one message, or ends the child when it cannot take it (a child
 * that does not read is as broken as one that writes nonsense). */
static void
send_or_kill(struct dnsw *d, uint32_t type, const void *p, size_t len)
{
	if (d->ch == NULL)
		return;
	if (chan_send1(d->ch, type, p, len) == 0)
		return;
	log_warnx("dns process: %s: %s; restarting it", msg_name(type),
	    strerror(errno));
	chan_free(d->ch);
	d->ch = NULL;
	d->serving = false;
	proc_kill(d->proc);
}

static void
sbx_msg(struct msg_sbx *m, const struct sbx_view *v)
{
	memset(m, 0, sizeof(*m));
	memcpy(m->id, v->id, strnlen(v->id, sizeof(m->id) - 1));
	memcpy(m->ifname, v->ifname, strnlen(v->ifname, sizeof(m->ifname) -
	    1));
	memcpy(m->policy, v->policy, strnlen(v->policy, sizeof(m->policy) -
	    1));
	memcpy(m->addr4, v->addr4, 4);
	m->tainted = v->tainted ? 1 : 0;
}

static void
w_added(void *ctx, const struct sbx_view *v)
{
	struct msg_sbx m;

	sbx_msg(&m, v);
	send_or_kill(ctx, MSG_SBX_ADD, &m, sizeof(m));
}

static void
w_removed(void *ctx, const struct sbx_view *v)
{
	struct dnsw *d = ctx;
	struct msg_sbx m;

	ansmem_forget(d->am, v->ifname);
	sbx_msg(&m, v);
	send_or_kill(ctx, MSG_SBX_DEL, &m, sizeof(m));
}

static void
w_changed(void *ctx, const struct sbx_view *v)
{
	struct msg_sbx m;

	sbx_msg(&m, v);
	send_or_kill(ctx, MSG_SBX_CHANGE, &m, sizeof(m));
}

/* The set in force, as the bytes it was loaded from. */
static void
send_policies(struct dnsw *d)
{
	struct gw_pset *ps;

	if (d->ch == NULL)
		return;
	ps = gw_pset_ref(d->gw);
	if (polrx_send(d->ch, gw_pset_set(ps)) == -1) {
		log_warnx("dns process: the policy set: %s; restarting it",
		    strerror(errno));
		chan_free(d->ch);
		d->ch = NULL;
		d->serving = false;
		proc_kill(d->proc);
	}
	gw_pset_unref(ps);
}

static void
on_reload(void *ctx)
{
	send_policies(ctx);
}

static int
send_answers(void *ctx, const struct msg_answers *h, size_t len)
{
	struct dnsw *d = ctx;

	send_or_kill(d, MSG_GATE_ANSWERS, h, len);
	return d->ch != NULL ? 0 : -1;
}

/* Everything a new child needs before it serves, in order: the answers
 * after the sandboxes they belong to, and before MSG_SYNC, after which
 * its gate reads packets. */
static void
child_sync(struct dnsw *d)
{
	long n;

	send_or_kill(d, MSG_DNS_CONFIG, &d->mcfg, sizeof(d->mcfg));
	send_policies(d);
	sbx_foreach(d->sbx, w_added, d);
	if (d->mcfg.gate && d->ch != NULL &&
	    (n = ansmem_replay(d->am, ev_now_ms(), send_answers, d)) > 0)
		log_info("dns process %ld: %ld answers of the gate handed "
		    "over", (long)proc_pid(d->proc), n);
	send_or_kill(d, MSG_SYNC, NULL, 0);
}

/* Keeps the named elements the kernel just took, for the next child's
 * gate (the child called gate_learn with the same ones). Only the name's
 * bytes are copied, never read: the parent compares them, nothing more. */
static void
keep_answers(struct dnsw *d, const struct msg_elem *me, uint32_t n)
{
	struct msg_answer a;
	uint64_t now = ev_now_ms();
	uint32_t i;

	if (!d->mcfg.gate)
		return;
	for (i = 0; i < n; i++) {
		if (me[i].name[0] == '\0')
			continue;
		memset(&a, 0, sizeof(a));
		a.expires_ms = now + me[i].timeout_ms;
		memcpy(a.ifname, me[i].ifname, sizeof(a.ifname));
		memcpy(a.name, me[i].name, sizeof(a.name));
		a.family = me[i].family;
		memcpy(a.addr, me[i].addr, sizeof(a.addr));
		a.proto = me[i].proto;
		a.port_lo = me[i].port_lo;
		a.port_hi = me[i].port_hi;
		/* Not kept (no memory), a restart costs the sandbox one
		 * more query: its flows are refused until then. */
		if (ansmem_put(d->am, &a, now) == -1)
			log_debug("gate answer not kept: %s", strerror(errno));
	}
}

static void
on_learn(struct dnsw *d, const struct msg_learn *m, size_t len)
{
	const struct msg_elem *me = (const struct msg_elem *)(m + 1);
	const struct pol_config *cfg = gw_config(d->gw);
	struct msg_learn_ack a;
	struct pol_addr_info ai;
	struct pol_addr pa;
	struct fw *fw = sbx_fw(d->sbx);
	uint32_t i;
	int budget_err;

	if (!msg_learn_ok(m, len)) {
		violation(d, "a malformed learn batch");
		return;
	}
	budget_err = 0;
	for (i = 0; i < m->n; i++) {
		msg_elem_to(&d->lbuf[i], &me[i]);
		/* The budget a destination is charged to: the parent's. */
		if (sbx_learn_budget(d->sbx, &d->lbuf[i]) == -1)
			budget_err = 1;
		/* What no policy can allow never reaches the kernel, whoever
		 * asks: the child's filter drops these, so one here means
		 * the child is not the one we started. */
		pa.family = me[i].family;
		memcpy(pa.a, me[i].addr, sizeof(pa.a));
		pol_addr_classify(&pa, cfg->treat_as_public,
		    cfg->ntreat_as_public, &ai);
		if (pol_addr_class_always_denied(ai.cls)) {
			violation(d, "a learn of an address no policy allows");
			return;
		}
	}
	memset(&a, 0, sizeof(a));
	a.ticket = m->ticket;
	d->learn_batches++;
	if (fw == NULL) {
		a.err_no = ENOTCONN;
		snprintf(a.err, sizeof(a.err), "no nftables handle");
	} else if (budget_err) {
		a.err_no = EPERM;
		snprintf(a.err, sizeof(a.err), "a budget the sandbox lacks");
		d->learn_refused++;
	} else if (fw_learn(fw, d->lbuf, m->n, a.err, sizeof(a.err)) == -1) {
		a.err_no = errno != 0 ? errno : EIO;
		d->learn_refused++;
	} else {
		flowrec_learned(d->fr, d->lbuf, m->n);	/* names of ungated flows */
		keep_answers(d, me, m->n);
	}
	send_or_kill(d, MSG_LEARN_ACK, &a, sizeof(a));
}

static void
on_lost(struct dnsw *d, const struct msg_lost *l)
{
	char detail[128];

	d->lost += l->events;
	snprintf(detail, sizeof(detail), "%llu dns.decision records the "
	    "dns process could not hand over", (unsigned long long)l->events);
	log_warnx("%s", detail);
	if (rec_async(d->rec, "finding", rec_finding_fields(NULL, "dns_records_lost",
	    "medium", detail)) == -1)
		log_warn("dns_records_lost record");
}

/* A batch is checked whole before any of it is recorded: a child that
 * sends one inconsistent record is not the one we started, and none of
 * what it says in that message is taken. */
static void
on_events(struct dnsw *d, const void *pl, size_t len)
{
	size_t off = sizeof(struct msg_dns_events);
	uint32_t i, n;

	if (!msg_dns_events_ok(pl, len, d->evscratch)) {
		violation(d, "a malformed dns event batch");
		return;
	}
	memcpy(&n, pl, sizeof(n));
	for (i = 0; i < n; i++) {
		if (!msg_dns_ev_get(pl, len, &off, d->evscratch))
			return;	/* checked above: never */
		h_record(d, d->evscratch);
	}
}

static void
on_child_msg(void *ctx, uint32_t type, void *pl, size_t len)
{
	struct dnsw *d = ctx;

	switch (type) {
	case MSG_READY:
		d->serving = true;
		log_info("dns process %ld serving on port %u",
		    (long)proc_pid(d->proc), d->port);
		break;
	case MSG_LEARN:
		on_learn(d, pl, len);
		break;
	case MSG_DNS_EVENTS:
		on_events(d, pl, len);
		break;
	case MSG_LOST:
		on_lost(d, pl);
		break;
	case MSG_GATE_VERDICT: {
		const struct msg_gate_verdict *v = pl;

		if (d->lfd[2] == -1)
			break;
		if (gatew_verdict(d->lfd[2], d->mcfg.gate_queue, v->id,
		    v->action) == -1) {
			if (errno == EINVAL) {
				violation(d, "a gate verdict that is none");
				return;
			}
			log_warn("gate: verdict");
		}
		break;
	}
	case MSG_GATE_PASS: {
		struct msg_gate_pass *m = pl;

		if (!msg_str_ok(m->name, sizeof(m->name))) {
			violation(d, "a malformed gate pass");
			return;
		}
		flowrec_name(d->fr, m->saddr, m->daddr, m->sport, m->dport,
		    m->name);
		break;
	}
	case MSG_GATE_EVENT:
		if (!msg_gate_event_ok(pl)) {
			violation(d, "a malformed gate event");
			return;
		}
		if (rec_async(d->rec, "net.deny", gatew_fields(
		    &((struct msg_gate_event *)pl)->ev)) == -1)
			log_debug("net.deny record: %s", strerror(errno));
		break;
	default:	/* msg_check let only the child's messages through */
		break;
	}
}

static void
on_child_gone(void *ctx, const char *why)
{
	struct dnsw *d = ctx;

	if (proc_pid(d->proc) != 0)
		log_warnx("dns process %ld: channel %s", (long)proc_pid(d->proc),
		    why);
	chan_free(d->ch);
	d->ch = NULL;
	d->serving = false;
	/* Whatever it was doing, it cannot do it without us: restart. */
	proc_kill(d->proc);
}

static size_t
set_bytes(struct dnsw *d)
{
	struct gw_pset *ps = gw_pset_ref(d->gw);
	const struct pol_set *set = gw_pset_set(ps);
	size_t i, len, n = 0;
	const char *path;

	for (i = 0; i < pol_set_count(set); i++) {
		(void)pol_policy_source(pol_set_at(set, i), &path, &len);
		n += len;
	}
	gw_pset_unref(ps);
	return n;
}

static void
on_child_up(void *ctx, int fd, pid_t pid)
{
	struct dnsw *d = ctx;

	/* Room for the answers handed over too: each sandbox's are bounded,
	 * and all of them go before the child reads any. */
	if ((d->ch = chan_new(d->loop, fd, MSG_TO_PARENT, DNSW_QUEUE_MIN +
	    2 * set_bytes(d) + ansmem_count(d->am) *
	    (sizeof(struct msg_answer) + 1), on_child_msg, on_child_gone,
	    d)) == NULL) {
		log_warn("dns process %ld: channel", (long)pid);
		proc_kill(d->proc);
		return;
	}
	child_sync(d);
}

/* The gate's queue socket, on the configured queue number. Another
 * program that holds that number is the usual reason it cannot be bound:
 * the message says which setting moves the gate out of its way. */
static int
open_gate(struct dnsw *d, const struct pol_config *cfg, char *err,
    size_t errlen)
{
	if (cfg->gate_queue > UINT16_MAX) {
		snprintf(err, errlen, "network.gate_queue %u out of range",
		    cfg->gate_queue);
		errno = EINVAL;
		return -1;
	}
	d->mcfg.gate_queue = (uint16_t)cfg->gate_queue;
	/* The kernel says EPERM for a queue another socket is bound to,
	 * EBUSY for one that exists already. */
	if ((d->lfd[2] = fw_gate_open(d->mcfg.gate_queue, err, errlen)) ==
	    -1 && (errno == EBUSY || errno == EPERM)) {
		int e = errno;
		size_t n = strlen(err);

		snprintf(err + n, errlen - n, " (is another program bound to "
		    "NFQUEUE %u? network.gate_queue chooses another)",
		    d->mcfg.gate_queue);
		errno = e;
	}
	return d->lfd[2] == -1 ? -1 : 0;
}

/* The gate's queue socket is closed with the child that read it: the
 * packets it held and had not answered die with it (they never pass),
 * and the next child starts on a new one. Until then, and if it cannot
 * be opened, gated flows find no reader and fail. */
static void
gate_reopen(struct dnsw *d)
{
	char err[160];

	if (d->lfd[2] != -1)
		close(d->lfd[2]);
	if ((d->lfd[2] = fw_gate_open(d->mcfg.gate_queue, err,
	    sizeof(err))) == -1)
		log_warnx("%s", err);
}

static void
on_child_down(void *ctx, pid_t pid, int status, unsigned restarts)
{
	struct dnsw *d = ctx;
	char detail[160];

	chan_free(d->ch);
	d->ch = NULL;
	d->serving = false;
	d->exits++;
	if (WIFSIGNALED(status))
		snprintf(detail, sizeof(detail), "dns process %ld killed by "
		    "signal %d after %u restarts; DNS is closed until it is "
		    "back", (long)pid, WTERMSIG(status), restarts);
	else
		snprintf(detail, sizeof(detail), "dns process %ld exited with "
		    "status %d after %u restarts; DNS is closed until it is "
		    "back", (long)pid, WEXITSTATUS(status), restarts);
	log_warnx("%s", detail);
	if (rec_async(d->rec, "finding", rec_finding_fields(NULL, "process_exit",
	    "high", detail)) == -1)
		log_warn("process_exit record");
	gate_reopen(d);
}

static int
mcfg_fill(struct msg_dns_config *m, const struct dns_config *dc, char *err,
    size_t errlen)
{
	size_t i;

	if (dc->ntreat_as_public > MSG_TAP_MAX) {
		snprintf(err, errlen, "dns: at most %u treat_as_public ranges",
		    MSG_TAP_MAX);
		errno = EINVAL;
		return -1;
	}
	memset(m, 0, sizeof(*m));
	m->service_addr = dc->service_addr;
	memcpy(m->upstreams, dc->upstreams, sizeof(m->upstreams));
	for (i = 0; i < DNS_MAX_UPSTREAMS; i++)
		m->upstream_lens[i] = (uint32_t)dc->upstream_lens[i];
	m->nupstreams = (uint32_t)dc->nupstreams;
	m->timeout_ms = dc->timeout_ms;
	m->tcp_idle_ms = dc->tcp_idle_ms;
	m->max_tcp_conns = dc->max_tcp_conns;
	m->tcp_per_sandbox = dc->tcp_per_sandbox;
	m->max_answer_addrs = dc->max_answer_addrs;
	m->max_pending = dc->max_pending;
	m->cache_max = dc->cache_max;
	m->max_udp_size = dc->max_udp_size;
	m->no_cache = dc->no_cache ? 1 : 0;
	m->ntap = (uint32_t)dc->ntreat_as_public;
	for (i = 0; i < dc->ntreat_as_public; i++)
		m->tap[i] = dc->treat_as_public[i];
	return 0;
}

/* ---------------------------------------- the answers across a restart */

#define DNSW_ANSWERS_FILE	"gate-answers"

/* The kernel's boot id: expiries on CLOCK_MONOTONIC hold in this boot
 * only. 0, or -1 (then nothing is saved or loaded). */
static int
boot_id(char out[40])
{
	ssize_t n;
	int fd;

	memset(out, 0, 40);
	if ((fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY |
	    O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, out, 39);
	close(fd);
	if (n <= 0)
		return -1;
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return out[0] != '\0' ? 0 : -1;
}

static int
answers_path(struct dnsw *d, char *buf, size_t size)
{
	const char *dir = gw_config(d->gw)->state_dir;

	if (dir == NULL || snprintf(buf, size, "%s/%s", dir,
	    DNSW_ANSWERS_FILE) >= (int)size)
		return -1;
	return 0;
}

/* The links of the sandboxes there are now, sorted, for keep_link. */
struct links {
	char	(*v)[FW_IFNAMSIZ];
	size_t	  n, cap;
	bool	  oom;
};

static void
add_link(void *ctx, const struct sbx_view *v)
{
	struct links *l = ctx;
	char (*nv)[FW_IFNAMSIZ];

	if (l->n == l->cap) {
		size_t cap = l->cap * 2 + 64;

		if ((nv = reallocarray(l->v, cap, sizeof(*nv))) == NULL) {
			l->oom = true;
			return;
		}
		l->v = nv;
		l->cap = cap;
	}
	memset(l->v[l->n], 0, FW_IFNAMSIZ);
	memcpy(l->v[l->n], v->ifname, strnlen(v->ifname, FW_IFNAMSIZ - 1));
	l->n++;
}

static int
link_cmp(const void *a, const void *b)
{
	return strncmp(a, b, FW_IFNAMSIZ);
}

static bool
keep_link(void *ctx, const char *ifname)
{
	struct links *l = ctx;

	return l->n > 0 && bsearch(ifname, l->v, l->n, FW_IFNAMSIZ,
	    link_cmp) != NULL;
}

/*
 * What the DNS process of the daemon before this one answered, for the
 * sandboxes this one adopted: without it, a sluiced restarted with its
 * sandboxes kept would refuse every gated flow to what their kernel
 * elements still reach. Only answers of links that have a sandbox now
 * are kept: no sandbox made later on a link inherits one.
 */
static void
load_answers(struct dnsw *d)
{
	struct links l = { NULL, 0, 0, false };
	char path[4096], boot[40];
	long n;

	if (answers_path(d, path, sizeof(path)) == -1)
		return;
	if (boot_id(boot) == -1) {
		(void)unlink(path);
		return;
	}
	sbx_foreach(d->sbx, add_link, &l);
	if (l.oom) {
		(void)unlink(path);
		free(l.v);
		return;
	}
	if (l.n > 0)
		qsort(l.v, l.n, FW_IFNAMSIZ, link_cmp);
	if ((n = ansmem_load(d->am, path, boot, ev_now_ms(), keep_link,
	    &l)) == -1) {
		if (errno != ENOENT)
			log_warn("dns: %s: the gate's answers not taken", path);
	} else
		log_info("dns: %ld answers of the gate kept from before the "
		    "restart", n);
	free(l.v);
}

/* At a clean stop: the next daemon may adopt the sandboxes. */
static void
save_answers(struct dnsw *d)
{
	char path[4096], boot[40];

	if (!d->mcfg.gate || ansmem_count(d->am) == 0 ||
	    answers_path(d, path, sizeof(path)) == -1 ||
	    boot_id(boot) == -1)
		return;
	if (ansmem_save(d->am, path, boot, ev_now_ms()) == -1)
		log_warn("dns: %s: the gate's answers not saved", path);
}

struct dnsw *
dnsw_start(struct ev_loop *loop, struct gw *gw, struct sbx *sbx,
    struct rec *rec, uint16_t listen_port, char *err, size_t errlen)
{
	const struct pol_config *cfg = gw_config(gw);
	struct sbx_watch w;
	struct proc_spec ps;
	struct dns_config dc;
	uid_t uid;
	gid_t gid;
	struct dnsw *d;
	size_t k = 0;

	if (sbx == NULL) {
		snprintf(err, errlen, "dns: no sandbox manager");
		errno = EINVAL;
		return NULL;
	}
	if (dnsw_config(cfg, listen_port, &dc, err, errlen) == -1)
		return NULL;
	if (cfg->ndns_upstreams > DNS_MAX_UPSTREAMS)
		log_warnx("dns: %zu upstreams configured, the first %d are "
		    "used", cfg->ndns_upstreams, DNS_MAX_UPSTREAMS);
	if (priv_user(cfg->privsep_dns_user, &uid, &gid, err, errlen) == -1)
		return NULL;
	/* The gate's answers kept per sandbox: as many as the kernel keeps
	 * learned elements for it. */
	if ((d = calloc(1, sizeof(*d))) == NULL ||
	    (d->lbuf = calloc(MSG_LEARN_MAX, sizeof(*d->lbuf))) == NULL ||
	    (d->evscratch = calloc(1, sizeof(*d->evscratch))) == NULL ||
	    (d->am = ansmem_new(cfg->dns_max_learned != 0 ?
	    cfg->dns_max_learned : FW_MAX_LEARNED_DEFAULT)) == NULL) {
		snprintf(err, errlen, "dns: %s", strerror(errno));
		if (d != NULL) {
			free(d->lbuf);
			free(d->evscratch);
		}
		free(d);
		return NULL;
	}
	d->gw = gw;
	d->rec = rec;
	d->sbx = sbx;
	d->loop = loop;
	d->lfd[0] = d->lfd[1] = d->lfd[2] = -1;
	if (mcfg_fill(&d->mcfg, &dc, err, errlen) == -1 ||
	    dns_listen(&dc, &d->lfd[0], &d->lfd[1], err, errlen) == -1 ||
	    open_gate(d, cfg, err, errlen) == -1)
		goto fail;
	d->mcfg.gate = 1;
	load_answers(d);
	(void)dns_fd_port(d->lfd[0], &d->port);
	snprintf(d->uid, sizeof(d->uid), "%lu", (unsigned long)uid);
	snprintf(d->gid, sizeof(d->gid), "%lu", (unsigned long)gid);
	d->argv[k++] = "sluiced";
	d->argv[k++] = "--room";
	d->argv[k++] = "dns";
	d->argv[k++] = "--uid";
	d->argv[k++] = d->uid;
	d->argv[k++] = "--gid";
	d->argv[k++] = d->gid;
	if (log_getforeground())
		d->argv[k++] = "--foreground";
	if (log_getverbose())
		d->argv[k++] = "--verbose";
	d->argv[k] = NULL;
	memset(&ps, 0, sizeof(ps));
	ps.role = "dns";
	ps.exe = "/proc/self/exe";
	ps.argv = d->argv;
	ps.fds = d->lfd;
	ps.nfds = 3;
	if ((d->proc = proc_new(loop, &ps, on_child_up, on_child_down, d)) ==
	    NULL) {
		snprintf(err, errlen, "dns: %s", strerror(errno));
		goto fail;
	}
	memset(&w, 0, sizeof(w));
	w.added = w_added;
	w.removed = w_removed;
	w.changed = w_changed;
	w.ctx = d;
	if (sbx_watch_add(sbx, &w) == -1 ||
	    gw_on_reload(gw, on_reload, d) == -1) {
		snprintf(err, errlen, "dns: cannot follow the sandbox table");
		goto fail;
	}
	return d;
fail:
	sbx_watch_del(sbx, d);
	proc_free(d->proc);
	if (d->lfd[0] != -1)
		close(d->lfd[0]);
	if (d->lfd[1] != -1)
		close(d->lfd[1]);
	if (d->lfd[2] != -1)
		close(d->lfd[2]);
	free(d->lbuf);
	free(d->evscratch);
	ansmem_free(d->am);
	free(d);
	return NULL;
}

int
dnsw_run(struct dnsw *d, char *err, size_t errlen)
{
	return proc_start(d->proc, err, errlen);
}

void
dnsw_stop(struct dnsw *d)
{
	if (d == NULL)
		return;
	sbx_watch_del(d->sbx, d);
	proc_free(d->proc);
	chan_free(d->ch);
	/* What the last turn decided is still recorded. */
	ev_timer_cancel(d->loop, d->flush);
	d->flush = NULL;
	flush_records(d);
	save_answers(d);
	close(d->lfd[0]);
	close(d->lfd[1]);
	if (d->lfd[2] != -1)
		close(d->lfd[2]);
	free(d->lbuf);
	free(d->evscratch);
	ansmem_free(d->am);
	free(d);
}

void
dnsw_set_flowrec(struct dnsw *d, struct flowrec *fr)
{
	if (d != NULL)
		d->fr = fr;
}

uint16_t
dnsw_port(const struct dnsw *d)
{
	return d->port;
}

pid_t
dnsw_pid(const struct dnsw *d)
{
	return d != NULL ? proc_pid(d->proc) : 0;
}

void
dnsw_metrics_print(const struct dnsw *d, FILE *fp)
{
	if (d == NULL)
		return;
	fprintf(fp,
	    "# HELP sluice_process_up Whether the process serves.\n"
	    "# TYPE sluice_process_up gauge\n"
	    "sluice_process_up{room=\"dns\"} %d\n"
	    "# HELP sluice_process_exits_total Child processes that ended "
	    "(each is restarted).\n"
	    "# TYPE sluice_process_exits_total counter\n"
	    "sluice_process_exits_total{room=\"dns\"} %llu\n"
	    "# HELP sluice_privsep_violations_total Messages of a child the "
	    "protocol does not allow (the child is killed).\n"
	    "# TYPE sluice_privsep_violations_total counter\n"
	    "sluice_privsep_violations_total{room=\"dns\"} %llu\n",
	    d->serving ? 1 : 0, (unsigned long long)d->exits,
	    (unsigned long long)d->violations);
}
