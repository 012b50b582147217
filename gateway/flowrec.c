/*
 * flowrec.c: net.flow records from conntrack events and, for long flows,
 * from the kernel's counters read every interval (see flowrec.h). The
 * sandbox of a flow is the one whose address is the flow's original source
 * (anti-spoofing holds every sandbox to its own); its state sits in an
 * sbxtab by that address, the table the DNS and bridge processes keep
 * theirs in. A flow is followed from its new event (its name from the
 * answer that opened its destination, or from the gate's pass later) to
 * its destroy event, which carries what no record carried yet.
 */
#include <sys/random.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/flowrec_int.h"
#include "gateway/log.h"
#include "policy/policy.h"

/* How long a removed sandbox's entry waits for its flows' destroy events
 * (the removal deletes its conntrack entries: they come at once). */
#define FR_GONE_MS	(60 * 1000)

/* What one record says of one flow: its part, and its totals. */
struct fr_part {
	const struct ct_end	*e;	/* tuple, start and stop */
	const char		*name;
	enum fr_src		 src;
	bool			 interim;
	uint32_t		 seq;	/* interim records before this one */
	uint64_t		 bytes[2], packets[2];	/* this record's */
	uint64_t		 tbytes[2], tpackets[2];	/* the flow's */
};

static uint64_t
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t
sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* ------------------------------------------------------------ summaries */

static void
agg_emit(struct flowrec *fr, const struct fr_sbx *s, const struct fr_agg *a,
    bool other)
{
	json_t *o;
	int bad = 0;

	if (a->flows == 0 && a->interims == 0)
		return;
	if ((o = json_pack("{s:o,s:b,s:I,s:I,s:I,s:I,s:I}", "sandbox",
	    rec_sandbox_json(s->id), "summary", 1, "flows",
	    (json_int_t)a->flows, "bytes_out", (json_int_t)a->bytes[0],
	    "bytes_in", (json_int_t)a->bytes[1], "packets_out",
	    (json_int_t)a->packets[0], "packets_in",
	    (json_int_t)a->packets[1])) == NULL)
		return;
	if (a->name != NULL)
		bad |= rec_put(o, "name", rec_string(a->name));
	if (other)
		bad |= rec_put(o, "other", json_true());
	if (a->interims > 0)
		bad |= rec_put(o, "interims", json_integer((json_int_t)
		    a->interims));
	if (a->first_ms != 0)
		bad |= rec_put(o, "first_ms", json_integer((json_int_t)
		    a->first_ms));
	if (a->last_ms != 0)
		bad |= rec_put(o, "last_ms", json_integer((json_int_t)
		    a->last_ms));
	if (bad) {
		json_decref(o);
		return;
	}
	if (rec_async(fr->rec, "net.flow", o) == -1)
		log_debug("net.flow record: %s", strerror(errno));
}

/* The summaries of the second s counted, then none. */
static void
summaries(struct flowrec *fr, struct fr_sbx *s)
{
	uint32_t i;

	for (i = 0; i < s->nagg; i++) {
		agg_emit(fr, s, &s->agg[i], false);
		free(s->agg[i].name);
	}
	memset(s->agg, 0, sizeof(s->agg));
	s->nagg = 0;
	agg_emit(fr, s, &s->other, true);
	memset(&s->other, 0, sizeof(s->other));
}

static struct fr_agg *
agg_of(struct fr_sbx *s, const char *name)
{
	struct fr_agg *a;
	uint32_t i;

	for (i = 0; i < s->nagg; i++) {
		a = &s->agg[i];
		if ((a->name == NULL) == (name == NULL) &&
		    (name == NULL || strcmp(a->name, name) == 0))
			return a;
	}
	if (s->nagg == FLOWREC_SUMMARIES)
		return &s->other;
	a = &s->agg[s->nagg];
	memset(a, 0, sizeof(*a));
	if (name != NULL && (a->name = strndup(name, 255)) == NULL)
		return &s->other;
	s->nagg++;
	return a;
}

static void
agg_add(struct fr_sbx *s, const struct fr_part *p)
{
	struct fr_agg *a = agg_of(s, p->name);
	uint64_t t0 = p->e->start_ns / 1000000, t1 = p->e->stop_ns / 1000000;
	int i;

	if (p->interim)
		a->interims++;
	else
		a->flows++;
	for (i = 0; i < 2; i++) {
		a->bytes[i] += p->bytes[i];
		a->packets[i] += p->packets[i];
	}
	if (t1 == 0)
		t1 = wall_ms();
	if (t0 != 0 && (a->first_ms == 0 || t0 < a->first_ms))
		a->first_ms = t0;
	if (t1 > a->last_ms)
		a->last_ms = t1;
}

/* -------------------------------------------------------------- records */

/* The rule of s's policy that allows the flow (by its name, else by its
 * address) into buf, "" if none does now. */
static void
rule_of(struct flowrec *fr, const struct fr_sbx *s, const struct fr_part *p,
    char *buf, size_t len)
{
	const struct pol_config *cfg = gw_config(fr->gw);
	struct gw_pset *ps = gw_pset_ref(fr->gw);
	const struct pol_policy *pol;
	struct pol_egress_q q;
	struct pol_decision d;
	char a[INET_ADDRSTRLEN];

	buf[0] = '\0';
	if ((pol = pol_set_get(gw_pset_set(ps), s->policy)) != NULL &&
	    inet_ntop(AF_INET, p->e->f.dst, a, sizeof(a)) != NULL) {
		memset(&q, 0, sizeof(q));
		q.host = p->name != NULL ? p->name : a;
		q.proto = p->e->f.proto;
		q.port = p->e->f.dport;
		q.tainted = s->tainted;
		q.treat_as_public = cfg->treat_as_public;
		q.ntreat_as_public = cfg->ntreat_as_public;
		pol_egress_decide(pol, &q, &d);
		if (d.verdict == POL_ALLOW && d.rule != NULL)
			snprintf(buf, len, "%s", d.rule);
	}
	gw_pset_unref(ps);
}

static json_t *
counts_json(const uint64_t bytes[2], const uint64_t packets[2])
{
	return json_pack("{s:I,s:I,s:I,s:I}", "bytes_out", (json_int_t)bytes[0],
	    "bytes_in", (json_int_t)bytes[1], "packets_out",
	    (json_int_t)packets[0], "packets_in", (json_int_t)packets[1]);
}

static void
itemise(struct flowrec *fr, const struct fr_sbx *s, const struct fr_part *p)
{
	const struct ct_end *e = p->e;
	char pb[8], rule[64];
	json_t *o;
	int bad = 0;

	if ((o = json_object()) == NULL)
		return;
	rule_of(fr, s, p, rule, sizeof(rule));
	bad |= rec_put(o, "sandbox", rec_sandbox_json(s->id));
	bad |= rec_put(o, "proto", json_string(rec_proto_name(e->f.proto, pb,
	    sizeof(pb))));
	bad |= rec_put(o, "src", json_pack("{s:o, s:I}", "ip",
	    rec_addr_json(AF_INET, e->f.src), "port", (json_int_t)e->f.sport));
	bad |= rec_put(o, "dst", json_pack("{s:o, s:I}", "ip",
	    rec_addr_json(AF_INET, e->f.dst), "port", (json_int_t)e->f.dport));
	if (p->name != NULL) {
		bad |= rec_put(o, "name", rec_string(p->name));
		bad |= rec_put(o, "name_from", json_string(p->src ==
		    FR_SRC_GATE ? "gate" : "dns"));
	}
	if (rule[0] != '\0')
		bad |= rec_put(o, "rule", json_string(rule));
	bad |= rec_put(o, "bytes_out", json_integer((json_int_t)p->bytes[0]));
	bad |= rec_put(o, "bytes_in", json_integer((json_int_t)p->bytes[1]));
	bad |= rec_put(o, "packets_out", json_integer((json_int_t)
	    p->packets[0]));
	bad |= rec_put(o, "packets_in", json_integer((json_int_t)
	    p->packets[1]));
	if (e->start_ns != 0)
		bad |= rec_put(o, "start_ms", json_integer((json_int_t)
		    (e->start_ns / 1000000)));
	if (p->interim) {
		bad |= rec_put(o, "interim", json_true());
		bad |= rec_put(o, "at_ms", json_integer((json_int_t)
		    wall_ms()));
	} else if (e->stop_ns != 0)
		bad |= rec_put(o, "end_ms", json_integer((json_int_t)
		    (e->stop_ns / 1000000)));
	/* A flow recorded in parts: which part, and what all of it was. */
	if (p->interim || p->seq > 0) {
		bad |= rec_put(o, "part", json_integer((json_int_t)p->seq +
		    1));
		bad |= rec_put(o, "total", counts_json(p->tbytes,
		    p->tpackets));
	}
	if (bad) {
		json_decref(o);
		return;
	}
	if (rec_async(fr->rec, "net.flow", o) == -1)
		log_debug("net.flow record: %s", strerror(errno));
}

/* One record's worth of a flow of s: itemised within the bound, else into
 * the second's summary of its name. */
static void
account(struct flowrec *fr, struct fr_sbx *s, const struct fr_part *p)
{
	uint64_t sec = ev_now_ms() / 1000;

	if (s->sec != sec) {
		summaries(fr, s);
		s->sec = sec;
		s->n = 0;
	}
	if (s->n >= FLOWREC_PER_S) {
		agg_add(s, p);
		return;
	}
	s->n++;
	itemise(fr, s, p);
}

/* ------------------------------------------------------------ sandboxes */

static void
sbx_forget(struct flowrec *fr, struct fr_sbx *s)
{
	summaries(fr, s);
	frt_sbx_clear(fr, s);
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		fr->all = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	sbxtab_del(fr->sbxs, s->addr);
}

static void
w_added(void *ctx, const struct sbx_view *v)
{
	struct flowrec *fr = ctx;
	struct fr_sbx *s = sbxtab_get(fr->sbxs, v->addr4);
	int made;

	/* A new sandbox on the address: nothing of the last one is its. */
	if (s != NULL && strcmp(s->id, v->id) != 0)
		sbx_forget(fr, s);
	if ((s = sbxtab_put(fr->sbxs, v->addr4, &made)) == NULL) {
		log_warn("flow records: sandbox %s", v->id);
		return;
	}
	if (made) {
		memcpy(s->addr, v->addr4, 4);
		s->next = fr->all;
		if (fr->all != NULL)
			fr->all->prev = s;
		fr->all = s;
	}
	snprintf(s->id, sizeof(s->id), "%s", v->id);
	snprintf(s->policy, sizeof(s->policy), "%s", v->policy);
	s->tainted = v->tainted;
	s->gone_ms = 0;
}

static void
w_removed(void *ctx, const struct sbx_view *v)
{
	struct flowrec *fr = ctx;
	struct fr_sbx *s = sbxtab_get(fr->sbxs, v->addr4);

	/* Its flows end after it (the removal deletes their entries): the
	 * entry waits for them, so that they are still its own. */
	if (s != NULL && strcmp(s->id, v->id) == 0) {
		summaries(fr, s);
		s->gone_ms = ev_now_ms();
	}
}

static void
w_changed(void *ctx, const struct sbx_view *v)
{
	struct flowrec *fr = ctx;
	struct fr_sbx *s = sbxtab_get(fr->sbxs, v->addr4);

	if (s != NULL && strcmp(s->id, v->id) == 0) {
		snprintf(s->policy, sizeof(s->policy), "%s", v->policy);
		s->tainted = v->tainted;
	}
}

/* ---------------------------------------------------------------- names */

static void
flow_of(struct ct_flow *f, const uint8_t k[FR_KEYLEN])
{
	memset(f, 0, sizeof(*f));
	f->family = AF_INET;
	memcpy(f->src, k, 4);
	memcpy(f->dst, k + 4, 4);
	memcpy(&f->sport, k + 8, 2);
	memcpy(&f->dport, k + 10, 2);
	f->proto = k[12];
}

void
flowrec_name(struct flowrec *fr, const uint8_t saddr[4],
    const uint8_t daddr[4], uint16_t sport, uint16_t dport, const char *name)
{
	struct ct_flow cf;
	struct fr_sbx *s;
	struct fr_flow *f;
	uint8_t k[FR_KEYLEN];

	if (fr == NULL || name == NULL ||
	    (s = sbxtab_get(fr->sbxs, saddr)) == NULL)
		return;
	memset(&cf, 0, sizeof(cf));
	cf.family = AF_INET;
	cf.proto = IPPROTO_TCP;
	memcpy(cf.src, saddr, 4);
	memcpy(cf.dst, daddr, 4);
	cf.sport = sport;
	cf.dport = dport;
	frt_key(k, &cf);
	/* Its new event was lost, or is still on the way: followed from
	 * now. */
	if ((f = frt_flow(fr, k)) == NULL)
		f = frt_flow_add(fr, s, k, ev_now_ms() + fr->interval_ms);
	if (f != NULL)
		frt_flow_set_name(f, name, FR_SRC_GATE);
}

void
flowrec_learned(struct flowrec *fr, const struct fw_elem *e, size_t n)
{
	char ifname[FW_IFNAMSIZ] = "";
	struct fr_sbx *s = NULL;
	struct sbx_view *v;
	uint64_t now = ev_now_ms();
	size_t i;

	if (fr == NULL || n == 0 || (v = malloc(sizeof(*v))) == NULL)
		return;
	for (i = 0; i < n; i++) {
		if (e[i].family != AF_INET || e[i].name == NULL)
			continue;
		/* A batch is one answer's, of one sandbox: one lookup. */
		if (strncmp(ifname, e[i].ifname, sizeof(ifname)) != 0) {
			memcpy(ifname, e[i].ifname, sizeof(ifname));
			ifname[sizeof(ifname) - 1] = '\0';
			s = sbx_lookup_ifname(fr->sbx, ifname, v) == 0 ?
			    sbxtab_get(fr->sbxs, v->addr4) : NULL;
		}
		if (s != NULL && s->gone_ms == 0)
			frt_learn_put(fr, s, e[i].addr, e[i].proto,
			    e[i].port_lo, e[i].port_hi, now + e[i].timeout_ms,
			    e[i].name, now);
	}
	free(v);
}

/* ---------------------------------------------------------------- events */

static void
on_new(struct flowrec *fr, struct fr_sbx *s, const struct ct_end *e)
{
	uint64_t now = ev_now_ms();
	uint8_t k[FR_KEYLEN];
	struct fr_flow *f;

	/* A new flow the kernel let through is activity (resources.idle). */
	sbx_touch_addr4(fr->sbx, e->f.src);
	if (s->gone_ms != 0)
		return;
	frt_key(k, &e->f);
	if ((f = frt_flow_add(fr, s, k, now + fr->interval_ms)) != NULL &&
	    f->name == NULL)
		frt_flow_set_name(f, frt_learn_name(fr, s, e->f.dst,
		    e->f.proto, e->f.dport, now), FR_SRC_DNS);
}

static void
on_end(void *arg, const struct ct_end *e)
{
	struct flowrec *fr = arg;
	struct fr_sbx *s;
	struct fr_flow *f;
	struct fr_part p;
	uint8_t k[FR_KEYLEN];
	int i;

	if (e->f.family != AF_INET || memcmp(e->f.dst, fr->svc4, 4) == 0 ||
	    (s = sbxtab_get(fr->sbxs, e->f.src)) == NULL)
		return;
	if (e->created) {
		on_new(fr, s, e);
		return;
	}
	frt_key(k, &e->f);
	f = frt_flow(fr, k);
	memset(&p, 0, sizeof(p));
	p.e = e;
	if (f != NULL) {
		p.name = f->name;
		p.src = (enum fr_src)f->src;
		p.seq = f->interims;
	} else if ((p.name = frt_learn_name(fr, s, e->f.dst, e->f.proto,
	    e->f.dport, ev_now_ms())) != NULL)
		p.src = FR_SRC_DNS;
	/* The rest: what the flow's interim records did not carry. */
	for (i = 0; i < 2; i++) {
		p.tbytes[i] = e->bytes[i];
		p.tpackets[i] = e->packets[i];
		p.bytes[i] = sub0(e->bytes[i], f != NULL ? f->bytes[i] : 0);
		p.packets[i] = sub0(e->packets[i], f != NULL ?
		    f->packets[i] : 0);
	}
	account(fr, s, &p);
	if (f != NULL)
		frt_flow_del(fr, f);
}

static void
on_read(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct flowrec *fr = arg;
	int lost = 0;

	(void)loop;
	(void)events;
	if (ct_events_read(fd, on_end, fr, &lost) == -1 && errno != EAGAIN)
		log_warn("flow records: conntrack events");
	if (lost && fr->lost++ % 1000 == 0)
		log_warnx("flow records: the kernel dropped conntrack events "
		    "(%" PRIu64 " times)", fr->lost);
}

/* ---------------------------------------------------------------- tick */

/* f is due: its counters now, and an interim record of what they grew by
 * since its last record. 0, or -1 when the kernel cannot be asked. */
static int
interim(struct flowrec *fr, struct fr_sbx *s, struct fr_flow *f,
    uint64_t now)
{
	struct ct_flow cf;
	struct ct_end e;
	struct fr_part p;
	char err[128];
	int i;

	flow_of(&cf, f->key);
	if (ct_get(fr->ct, &cf, &e, err, sizeof(err)) == -1) {
		if (errno != ENOENT) {
			log_warnx("flow records: %s", err);
			frt_flow_due(f, now + fr->interval_ms);
			return -1;
		}
		/* Gone, and its destroy event either on the way (it finds
		 * the entry, marked) or lost: an interval later, it goes. */
		if (f->missed) {
			fr->missing++;
			frt_flow_del(fr, f);
		} else {
			f->missed = 1;
			frt_flow_due(f, now + fr->interval_ms);
		}
		return 0;
	}
	f->missed = 0;
	/* An interval in which it carried nothing gives no record (an idle
	 * flow, or one that closed and waits out its last timeout). */
	if (e.bytes[0] == f->bytes[0] && e.bytes[1] == f->bytes[1] &&
	    e.packets[0] == f->packets[0] && e.packets[1] == f->packets[1]) {
		frt_flow_due(f, now + fr->interval_ms);
		return 0;
	}
	e.f = cf;
	e.stop_ns = 0;
	memset(&p, 0, sizeof(p));
	p.e = &e;
	p.name = f->name;
	p.src = (enum fr_src)f->src;
	p.interim = true;
	p.seq = f->interims;
	for (i = 0; i < 2; i++) {
		p.tbytes[i] = e.bytes[i];
		p.tpackets[i] = e.packets[i];
		p.bytes[i] = sub0(e.bytes[i], f->bytes[i]);
		p.packets[i] = sub0(e.packets[i], f->packets[i]);
	}
	account(fr, s, &p);
	for (i = 0; i < 2; i++) {
		if (e.bytes[i] > f->bytes[i])
			f->bytes[i] = e.bytes[i];
		if (e.packets[i] > f->packets[i])
			f->packets[i] = e.packets[i];
	}
	f->interims++;
	frt_flow_due(f, now + fr->interval_ms);
	return 0;
}

/*
 * Once a second: the summaries of the second that ended, the entries of
 * sandboxes gone long enough, and the interim records due, at most
 * FLOWREC_GETS_PER_SBX of a sandbox and FLOWREC_GETS in all. The list
 * turns by one sandbox a tick, so that when the budget runs out it is not
 * always the same sandboxes that wait.
 */
static void
on_tick(struct ev_loop *loop, void *arg)
{
	struct flowrec *fr = arg;
	uint64_t now = ev_now_ms(), sec = now / 1000;
	struct fr_sbx *s, *next, *last;
	uint32_t budget = FLOWREC_GETS, k;
	int down = 0;

	for (s = fr->all; s != NULL; s = next) {
		next = s->next;
		if (s->gone_ms != 0 && now - s->gone_ms >= FR_GONE_MS) {
			sbx_forget(fr, s);
			continue;
		}
		if (s->sec != sec)
			summaries(fr, s);
		for (k = 0; !down && budget > 0 && k < FLOWREC_GETS_PER_SBX &&
		    s->due != NULL && s->due->due_ms <= now; k++, budget--)
			down = interim(fr, s, s->due, now) == -1;
	}
	if ((s = fr->all) != NULL && s->next != NULL) {
		for (last = s; last->next != NULL; last = last->next)
			;
		fr->all = s->next;
		fr->all->prev = NULL;
		s->next = NULL;
		s->prev = last;
		last->next = s;
	}
	fr->tick = ev_timer_add(loop, 1000, on_tick, fr);
}

struct flowrec *
flowrec_new(struct ev_loop *loop, struct gw *gw, struct sbx *sbx,
    struct rec *rec, char *err, size_t errlen)
{
	const struct pol_config *cfg = gw_config(gw);
	struct flowrec *fr;
	struct sbx_watch w;

	if ((fr = calloc(1, sizeof(*fr))) == NULL ||
	    (fr->sbxs = sbxtab_new(sizeof(struct fr_sbx))) == NULL) {
		free(fr);
		snprintf(err, errlen, "flow records: %s", strerror(errno));
		return NULL;
	}
	fr->loop = loop;
	fr->gw = gw;
	fr->sbx = sbx;
	fr->rec = rec;
	fr->fd = -1;
	memcpy(fr->svc4, cfg->service_addr.a, 4);
	fr->interval_ms = (uint64_t)(cfg->audit_flow_interval_s > 0 ?
	    cfg->audit_flow_interval_s : POL_FLOW_INTERVAL_DEFAULT) * 1000;
	if (getrandom(&fr->seed, sizeof(fr->seed), 0) != sizeof(fr->seed))
		fr->seed = (uint32_t)ev_now_ms();
	if ((fr->ct = ct_new(err, errlen)) == NULL ||
	    (fr->fd = ct_events_open(err, errlen)) == -1)
		goto fail;
	memset(&w, 0, sizeof(w));
	w.added = w_added;
	w.removed = w_removed;
	w.changed = w_changed;
	w.ctx = fr;
	if (ev_add(loop, fr->fd, EV_READ, on_read, fr) == -1 ||
	    sbx_watch_add(sbx, &w) == -1 ||
	    (fr->tick = ev_timer_add(loop, 1000, on_tick, fr)) == NULL) {
		snprintf(err, errlen, "flow records: %s", strerror(errno));
		goto fail;
	}
	sbx_foreach(sbx, w_added, fr);
	return fr;
fail:
	flowrec_free(fr);
	return NULL;
}

void
flowrec_free(struct flowrec *fr)
{
	if (fr == NULL)
		return;
	sbx_watch_del(fr->sbx, fr);
	ev_timer_cancel(fr->loop, fr->tick);
	if (fr->fd >= 0) {
		ev_del(fr->loop, fr->fd);
		close(fr->fd);
	}
	while (fr->all != NULL) {
		frt_sbx_clear(fr, fr->all);
		for (uint32_t i = 0; i < fr->all->nagg; i++)
			free(fr->all->agg[i].name);
		fr->all = fr->all->next;
	}
	sbxtab_free(fr->sbxs);
	ct_free(fr->ct);
	free(fr);
}
