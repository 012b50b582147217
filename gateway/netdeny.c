/*
 * netdeny.c: turns the kernel's denied-packet log (nflog) into aggregated
 * `net.deny` events, one per sandbox link, destination and reason per
 * second, at most ND_LINK_KEYS (and one summary) per link.
 * Without aggregation a sandbox looping on a blocked connect would write a
 * log line per packet; with an unbounded table it could grow the daemon's
 * memory instead. The table here has a fixed size and counts what does not
 * fit, so the cost of a flood is bounded on both sides.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/log.h"
#include "gateway/netdeny.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"

#define ND_FLUSH_MS	1000

_Static_assert(sizeof(((struct nd_entry *)0)->sandbox) == SBX_ID_MAX + 1,
    "nd_entry.sandbox holds a sandbox id");

struct nd_slot {
	int		 used;
	struct fw_denied key;		/* norm_key of the first packet */
	struct nd_entry	 e;
};

struct nd_table {
	struct nd_slot	*slots;
	size_t		 nslots;	/* power of two, >= 2 * cap */
	size_t		 cap, n;
	uint64_t	 dropped;
};

/* The family of a sandbox's summary key: no packet has it. */
#define ND_FAM_SUMMARY	0xff

struct nd_table *
nd_table_new(size_t cap)
{
	struct nd_table *t;
	size_t ns = 2;

	if (cap == 0 || cap > ND_TABLE_MAX) {
		errno = EINVAL;
		return NULL;
	}
	/* At most half full: probes stay short even when a flood fills
	 * every key the cap allows. */
	while (ns < cap * 2)
		ns *= 2;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	if ((t->slots = calloc(ns, sizeof(*t->slots))) == NULL) {
		free(t);
		return NULL;
	}
	t->nslots = ns;
	t->cap = cap;
	return t;
}

void
nd_table_free(struct nd_table *t)
{
	if (t == NULL)
		return;
	free(t->slots);
	free(t);
}

/* The key of d -- link, reason, family, protocol, destination address --
 * with every other byte zeroed, so that packets of one key compare equal
 * with memcmp. Source and ports are not part of it: a sandbox trying
 * every port of a host, or spoofing its source, is one key. */
static void
norm_key(const struct fw_denied *d, struct fw_denied *k)
{
	size_t alen = d->family == AF_INET6 ? 16 : 4;

	memset(k, 0, sizeof(*k));
	/* k is zeroed: copying at most size - 1 bytes keeps the NUL. */
	memcpy(k->ifname, d->ifname, strnlen(d->ifname,
	    sizeof(k->ifname) - 1));
	memcpy(k->prefix, d->prefix, strnlen(d->prefix,
	    sizeof(k->prefix) - 1));
	k->family = d->family;
	k->proto = d->proto;
	memcpy(k->dst, d->dst, alen);
}

/* The summary key of d's link. */
static void
summary_key(const struct fw_denied *d, struct fw_denied *k)
{
	memset(k, 0, sizeof(*k));
	memcpy(k->ifname, d->ifname, strnlen(d->ifname,
	    sizeof(k->ifname) - 1));
	k->family = ND_FAM_SUMMARY;
}

static uint64_t
key_hash(const struct fw_denied *k)
{
	const unsigned char *p = (const unsigned char *)k;
	uint64_t h = 1469598103934665603ULL;
	size_t i;

	for (i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

/* The slot of k: the one holding it, or the free one where it would go. */
static struct nd_slot *
find(struct nd_table *t, const struct fw_denied *k)
{
	struct nd_slot *s;
	size_t i, mask = t->nslots - 1;

	for (i = key_hash(k) & mask;; i = (i + 1) & mask) {
		s = &t->slots[i];
		if (!s->used || memcmp(&s->key, k, sizeof(*k)) == 0)
			return s;
	}
}

static void
count_in(struct nd_entry *e, int64_t ts_ms)
{
	e->count++;
	if (ts_ms < e->first_ms)
		e->first_ms = ts_ms;
	if (ts_ms > e->last_ms)
		e->last_ms = ts_ms;
}

/* Takes a free slot for k (the first packet d), if the cap allows. */
static struct nd_entry *
take(struct nd_table *t, struct nd_slot *s, const struct fw_denied *k,
    const struct fw_denied *d, int64_t ts_ms)
{
	if (t->n >= t->cap)
		return NULL;
	memset(s, 0, sizeof(*s));
	s->used = 1;
	s->key = *k;
	/* The first packet as it came, within its family's address. */
	s->e.d = *k;
	memcpy(s->e.d.src, d->src, d->family == AF_INET6 ? 16 : 4);
	s->e.d.sport = d->sport;
	s->e.d.dport = d->dport;
	s->e.first_ms = s->e.last_ms = ts_ms;
	t->n++;
	return &s->e;
}

/* Notes d's destination port in e: kept when new and there is room,
 * else the packet is counted as one to another port. */
static void
note_port(struct nd_entry *e, uint16_t port)
{
	size_t i;

	for (i = 0; i < e->nports; i++)
		if (e->ports[i] == port)
			return;
	if (e->nports < ND_PORTS_KEEP)
		e->ports[e->nports++] = port;
	else
		e->other_ports++;
}

int
nd_table_add(struct nd_table *t, const struct fw_denied *d, int64_t ts_ms)
{
	struct fw_denied k, sk;
	struct nd_slot *s, *ss;
	struct nd_entry *e, *se;

	norm_key(d, &k);
	s = find(t, &k);
	if (s->used) {
		count_in(&s->e, ts_ms);
		note_port(&s->e, d->dport);
		return ND_ADD_COUNTED;
	}
	/* A new key: its link's summary holds how many keys the link made
	 * this period, and the packets over its budget. */
	summary_key(d, &sk);
	ss = find(t, &sk);
	if (!ss->used) {
		if ((se = take(t, ss, &sk, d, ts_ms)) == NULL) {
			t->dropped++;
			return ND_ADD_DROPPED;
		}
		se->summary = 1;
		se->count = 0;
		/* A new slot may have moved s's probe end: look again. */
		s = find(t, &k);
	}
	se = &ss->e;
	if (se->nkeys >= ND_LINK_KEYS) {
		if (se->count++ == 0 || ts_ms < se->first_ms)
			se->first_ms = ts_ms;
		if (ts_ms > se->last_ms)
			se->last_ms = ts_ms;
		return ND_ADD_SUMMARISED;
	}
	if ((e = take(t, s, &k, d, ts_ms)) == NULL) {
		t->dropped++;
		return ND_ADD_DROPPED;
	}
	e->count = 1;
	note_port(e, d->dport);
	se->nkeys++;
	return ND_ADD_NEW;
}

int
nd_table_tag(struct nd_table *t, const struct fw_denied *d, const char *sandbox)
{
	struct fw_denied k;
	struct nd_slot *s;
	int rc = -1;

	norm_key(d, &k);
	if ((s = find(t, &k))->used) {
		snprintf(s->e.sandbox, sizeof(s->e.sandbox), "%s", sandbox);
		rc = 0;
	}
	summary_key(d, &k);
	if ((s = find(t, &k))->used && s->e.sandbox[0] == '\0')
		snprintf(s->e.sandbox, sizeof(s->e.sandbox), "%s", sandbox);
	if (rc == -1)
		errno = ENOENT;
	return rc;
}

size_t
nd_table_size(const struct nd_table *t)
{
	return t->n;
}

uint64_t
nd_table_dropped(const struct nd_table *t)
{
	return t->dropped;
}

uint64_t
nd_table_flush(struct nd_table *t, void (*cb)(const struct nd_entry *,
    void *), void *arg)
{
	uint64_t dropped = t->dropped;
	size_t i;

	for (i = 0; i < t->nslots && t->n > 0; i++) {
		if (!t->slots[i].used)
			continue;
		/* A link's summary is a record only when it summarised. */
		if (cb != NULL && (!t->slots[i].e.summary ||
		    t->slots[i].e.count > 0))
			cb(&t->slots[i].e, arg);
		t->slots[i].used = 0;
		t->n--;
	}
	/* Open addressing: clearing in place is only safe because every
	 * slot goes; make sure no stale one survives a callback that
	 * stopped early (there is none, but fail safe). */
	memset(t->slots, 0, t->nslots * sizeof(*t->slots));
	t->n = 0;
	t->dropped = 0;
	return dropped;
}

const char *
nd_reason(const struct fw_denied *d, const struct pol_cidr *treat_as_public,
    size_t ntreat, char *buf, size_t len)
{
	static const struct {
		const char	*prefix, *reason;
		int		 classify;
	} map[] = {
		{ "deny:always",	"always_denied",	1 },
		{ "deny:private",	"private_range",	1 },
		{ "deny:rule",		"explicit_deny",	0 },
		{ "deny:default",	"no_matching_rule",	0 },
		{ "deny:spoof",		"spoofed_source",	0 },
		{ "deny:dot",		"dns_over_tls",		0 },
		{ "deny:tainted",	"tainted",		0 },
		{ "deny:quota",		"quota_exhausted",	0 },
		{ "deny:input",		"input",		0 },
		/* pol_reason_name(POL_REASON_BUDGET_EXHAUSTED) */
		{ "deny:budget",	"budget_exhausted",	0 },
	};
	struct pol_addr_info info;
	struct pol_addr a;
	char prefix[FW_PREFIX_MAX];
	size_t i;

	memcpy(prefix, d->prefix, sizeof(prefix));
	prefix[sizeof(prefix) - 1] = '\0';
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (strcmp(prefix, map[i].prefix) != 0)
			continue;
		if (!map[i].classify || (d->family != AF_INET &&
		    d->family != AF_INET6)) {
			snprintf(buf, len, "%s", map[i].reason);
			return buf;
		}
		memset(&a, 0, sizeof(a));
		a.family = d->family;
		memcpy(a.a, d->dst, d->family == AF_INET ? 4 : 16);
		/* The kernel's private sets know nothing of treat_as_public:
		 * name the class that made it deny. */
		if (strcmp(map[i].prefix, "deny:private") == 0)
			pol_addr_classify(&a, NULL, 0, &info);
		else
			pol_addr_classify(&a, treat_as_public, ntreat, &info);
		snprintf(buf, len, "%s:%s", map[i].reason,
		    pol_addr_class_name(info.cls));
		return buf;
	}
	snprintf(buf, len, "denied");
	return buf;
}

/* ------------------------------------------------------------ daemon */

struct nd {
	struct ev_loop		*loop;
	struct rec		*rec;		/* borrowed, may be NULL */
	const struct sbx	*sbx;
	const struct pol_config	*cfg;
	struct fw_nflog		*nl;
	struct nd_table		*t;
	struct ev_timer		*flush;
	uint64_t		 packets, events, dropped;
};

static int64_t
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
iso_ms(int64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char s[32];

	if (gmtime_r(&t, &tm) == NULL) {
		snprintf(buf, len, "?");
		return;
	}
	strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%s.%03dZ", s, (int)(ms % 1000));
}

json_t *
nd_rec_fields(const struct nd_entry *e, const char *sandbox,
    const char *reason)
{
	char ifname[FW_IFNAMSIZ + 1], pb[8];
	json_t *o;
	int bad = 0;

	if ((o = json_object()) == NULL)
		return NULL;
	memcpy(ifname, e->d.ifname, FW_IFNAMSIZ);
	ifname[FW_IFNAMSIZ] = '\0';
	if (sandbox != NULL && sandbox[0] != '\0' && strcmp(sandbox, "-") != 0)
		bad |= rec_put(o, "sandbox", rec_sandbox_json(sandbox));
	bad |= rec_put(o, "iface", rec_string(ifname));
	if (e->summary) {
		/* Packets of a link beyond its keys (or of no link, the
		 * table full): how many, and when; no one destination. */
		bad |= rec_put(o, "summary", json_true());
		bad |= rec_put(o, "decision", json_string("deny"));
		bad |= rec_put(o, "reason", rec_string(reason != NULL ? reason :
		    "not_itemised"));
		bad |= rec_put(o, "count", json_integer((json_int_t)(e->count >
		    (uint64_t)AUD_INT_MAX ? (uint64_t)AUD_INT_MAX :
		    e->count)));
		if (e->nkeys > 0)
			bad |= rec_put(o, "keys", json_integer(e->nkeys));
		bad |= rec_put(o, "first_ts", json_integer((json_int_t)
		    e->first_ms));
		bad |= rec_put(o, "last_ts", json_integer((json_int_t)
		    e->last_ms));
		if (bad) {
			json_decref(o);
			return NULL;
		}
		return o;
	}
	if (e->nports > 1 || e->other_ports > 0) {
		json_t *a = json_array();
		size_t i;

		for (i = 0; a != NULL && i < e->nports; i++)
			if (json_array_append_new(a,
			    json_integer(e->ports[i])) == -1)
				bad = 1;
		bad |= rec_put(o, "dst_ports", a);
		bad |= rec_put(o, "other_ports", json_integer((json_int_t)
		    (e->other_ports > (uint64_t)AUD_INT_MAX ?
		    (uint64_t)AUD_INT_MAX : e->other_ports)));
	}
	bad |= rec_put(o, "proto", json_string(rec_proto_name(e->d.proto, pb,
	    sizeof(pb))));
	bad |= rec_put(o, "src", json_pack("{s:o, s:I}", "ip",
	    rec_addr_json(e->d.family, e->d.src), "port",
	    (json_int_t)e->d.sport));
	bad |= rec_put(o, "dst", json_pack("{s:o, s:I}", "ip",
	    rec_addr_json(e->d.family, e->d.dst), "port",
	    (json_int_t)e->d.dport));
	bad |= rec_put(o, "decision", json_string("deny"));
	bad |= rec_put(o, "reason", rec_string(reason != NULL ? reason :
	    "denied"));
	bad |= rec_put(o, "count", json_integer((json_int_t)(e->count >
	    (uint64_t)AUD_INT_MAX ? (uint64_t)AUD_INT_MAX : e->count)));
	bad |= rec_put(o, "first_ts", json_integer((json_int_t)e->first_ms));
	bad |= rec_put(o, "last_ts", json_integer((json_int_t)e->last_ms));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static void
emit(const struct nd_entry *e, void *arg)
{
	struct nd *nd = arg;
	struct sbx_view v;
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN], reason[64], pb[8],
	    first[40], last[40], ifname[FW_IFNAMSIZ];
	int af = e->d.family == AF_INET6 ? AF_INET6 : AF_INET;
	const char *sandbox = "-";

	memcpy(ifname, e->d.ifname, sizeof(ifname));
	ifname[sizeof(ifname) - 1] = '\0';
	/* The sandbox of the first packet: by now it may have been removed
	 * (or its link reused), so only an untagged key is looked up. */
	if (e->sandbox[0] != '\0')
		sandbox = e->sandbox;
	else if (nd->sbx != NULL && sbx_lookup_ifname(nd->sbx, ifname, &v) == 0)
		sandbox = v.id;
	if (inet_ntop(af, e->d.src, src, sizeof(src)) == NULL)
		snprintf(src, sizeof(src), "?");
	if (inet_ntop(af, e->d.dst, dst, sizeof(dst)) == NULL)
		snprintf(dst, sizeof(dst), "?");
	nd_reason(&e->d, nd->cfg->treat_as_public, nd->cfg->ntreat_as_public,
	    reason, sizeof(reason));
	iso_ms(e->first_ms, first, sizeof(first));
	iso_ms(e->last_ms, last, sizeof(last));
	nd->events++;
	if (e->summary) {
		log_info("net.deny sandbox=%s iface=%s summary: %" PRIu64
		    " denied packets beyond %d destinations first_ts=%s "
		    "last_ts=%s", sandbox, ifname[0] != '\0' ? ifname : "-",
		    e->count, ND_LINK_KEYS, first, last);
		if (rec_async(nd->rec, "net.deny", nd_rec_fields(e, sandbox,
		    "not_itemised")) == -1)
			log_debug("net.deny record: %s", strerror(errno));
		return;
	}
	/* The log line carries the record's fields, for operators without
	 * the audit tools. */
	log_info("net.deny sandbox=%s iface=%s proto=%s src=%s dst=%s "
	    "sport=%u dport=%u reason=%s count=%" PRIu64 " first_ts=%s "
	    "last_ts=%s", sandbox, ifname[0] != '\0' ? ifname : "-",
	    rec_proto_name(e->d.proto, pb, sizeof(pb)), src, dst, e->d.sport,
	    e->d.dport, reason, e->count, first, last);
	/* Async: a flood of denials must never wait for the disk. */
	if (rec_async(nd->rec, "net.deny", nd_rec_fields(e, sandbox, reason)) ==
	    -1)
		log_debug("net.deny record: %s", strerror(errno));
}

static void
flush(struct nd *nd)
{
	uint64_t dropped;

	struct nd_entry sum;

	if ((dropped = nd_table_flush(nd->t, emit, nd)) > 0) {
		nd->dropped += dropped;
		log_warnx("net.deny: %" PRIu64 " denied packets in the last "
		    "second not itemised (more than %d distinct)", dropped,
		    ND_TABLE_DEFAULT);
		/* Recorded too, as one summary of no particular link. */
		memset(&sum, 0, sizeof(sum));
		sum.summary = 1;
		sum.count = dropped;
		sum.first_ms = sum.last_ms = wall_ms();
		if (rec_async(nd->rec, "net.deny", nd_rec_fields(&sum, NULL,
		    "table_full")) == -1)
			log_debug("net.deny record: %s", strerror(errno));
	}
}

static void
on_flush(struct ev_loop *loop, void *arg)
{
	struct nd *nd = arg;

	(void)loop;
	nd->flush = NULL;
	flush(nd);
}

static void
on_packet(const struct fw_denied *d, void *arg)
{
	struct nd *nd = arg;
	struct sbx_view v;
	char ifname[FW_IFNAMSIZ];

	nd->packets++;
	snprintf(ifname, sizeof(ifname), "%.*s", (int)sizeof(ifname) - 1,
	    d->ifname);
	/* A spent byte budget is recorded once (the manager looks, at
	 * most once a second per sandbox; the kernel logs within the
	 * link's budget). */
	if (nd->sbx != NULL && strncmp(d->prefix, "deny:budget",
	    sizeof(d->prefix)) == 0 && sbx_lookup_ifname(nd->sbx, ifname,
	    &v) == 0)
		sbx_budget_denied(nd->sbx, v.id);
	if (nd_table_add(nd->t, d, wall_ms()) != 1 || nd->sbx == NULL)
		return;
	/* A new key: name its sandbox now, while the link is still its. */
	if (sbx_lookup_ifname(nd->sbx, ifname, &v) == 0) {
		(void)nd_table_tag(nd->t, d, v.id);
		/* A new flow it tried is activity (resources.idle). */
		sbx_touch_id(nd->sbx, v.id);
	}
}

static void
on_read(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct nd *nd = arg;

	(void)fd;
	(void)events;
	if (fw_nflog_read(nd->nl, on_packet, nd) == -1 && errno != EAGAIN &&
	    errno != EINTR)
		log_warn("nflog read");
	/* One timer per period, armed by the first packet of it: an idle
	 * daemon wakes for nothing. */
	if (nd->flush == NULL && (nd_table_size(nd->t) > 0 ||
	    nd_table_dropped(nd->t) > 0) && (nd->flush = ev_timer_add(loop,
	    ND_FLUSH_MS, on_flush, nd)) == NULL)
		log_warn("net.deny flush timer");
}

struct nd *
nd_new(struct ev_loop *loop, const struct sbx *sbx, struct rec *rec,
    const struct pol_config *cfg, char *err, size_t errlen)
{
	struct nd *nd;

	if (cfg->nflog_group > UINT16_MAX) {
		snprintf(err, errlen, "nflog group %u out of range",
		    cfg->nflog_group);
		return NULL;
	}
	if ((nd = calloc(1, sizeof(*nd))) == NULL ||
	    (nd->t = nd_table_new(ND_TABLE_DEFAULT)) == NULL) {
		snprintf(err, errlen, "out of memory");
		free(nd);
		return NULL;
	}
	nd->loop = loop;
	nd->sbx = sbx;
	nd->rec = rec;
	nd->cfg = cfg;
	if ((nd->nl = fw_nflog_open((uint16_t)cfg->nflog_group, err,
	    errlen)) == NULL)
		goto fail;
	if (ev_add(loop, fw_nflog_fd(nd->nl), EV_READ, on_read, nd) == -1) {
		snprintf(err, errlen, "ev_add nflog: %s", strerror(errno));
		goto fail;
	}
	return nd;
fail:
	fw_nflog_free(nd->nl);
	nd_table_free(nd->t);
	free(nd);
	return NULL;
}

void
nd_free(struct nd *nd)
{
	if (nd == NULL)
		return;
	if (nd->flush != NULL)
		ev_timer_cancel(nd->loop, nd->flush);
	/* Packets the kernel reported but the loop has not read yet are
	 * denials too: read what is queued (the read is non-blocking and
	 * bounded by the socket buffer) before the last flush. */
	(void)fw_nflog_read(nd->nl, on_packet, nd);
	flush(nd);
	ev_del(nd->loop, fw_nflog_fd(nd->nl));
	fw_nflog_free(nd->nl);
	nd_table_free(nd->t);
	free(nd);
}

void
nd_metrics_print(const struct nd *nd, FILE *fp)
{
	fprintf(fp,
	    "# HELP sluice_net_deny_packets_total Denied packets reported by "
	    "the kernel.\n"
	    "# TYPE sluice_net_deny_packets_total counter\n"
	    "sluice_net_deny_packets_total %" PRIu64 "\n"
	    "# HELP sluice_net_deny_events_total Aggregated net.deny events.\n"
	    "# TYPE sluice_net_deny_events_total counter\n"
	    "sluice_net_deny_events_total %" PRIu64 "\n"
	    "# HELP sluice_net_deny_dropped_total Denied packets not itemised "
	    "(aggregation table full).\n"
	    "# TYPE sluice_net_deny_dropped_total counter\n"
	    "sluice_net_deny_dropped_total %" PRIu64 "\n",
	    nd->packets, nd->events, nd->dropped);
}
