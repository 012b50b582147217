/*
 * dnswire.c: the DNS proxy inside sluiced. gateway/dns/ is written against
 * three hooks so that it can be tested alone and later moved behind a
 * privilege boundary; this file is the daemon's side of that seam: who sent
 * a query (the sandbox manager's index by address, and the policy of that
 * sandbox in the set in force now), how an answer becomes kernel state
 * (fw_learn on the manager's nftables handle) and where the decision goes
 * (the audit log, through gateway/record.c).
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/dns/dns_rec.h"
#include "gateway/dnswire.h"
#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"

/* Records of one loop turn held for one submission burst; a turn that
 * makes more is submitted in slices of this many. */
#define DNSW_PENDING	256
#define DNSW_CANON_BUF	8192	/* most records take under 1 KiB */

struct dnsw {
	struct dns_proxy	*proxy;
	struct gw		*gw;
	struct sbx		*sbx;
	struct ev_loop		*loop;
	struct ev_timer		*flush;		/* deferred submission, or NULL */
	struct {
		const char	*kind;		/* a literal */
		json_t		*fields;
	}			 pending[DNSW_PENDING];
	size_t			 npending;
	uint64_t		 record_failures;
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

static int
h_lookup(void *ctx, const struct sockaddr *src, socklen_t len,
    struct dns_client *c)
{
	struct dnsw *d = ctx;
	const struct sockaddr_in *sin;
	struct sbx_view v;

	/* Sandboxes have IPv4 addresses from the pool only; anything else
	 * is not a sandbox and is refused. */
	if (src == NULL || src->sa_family != AF_INET ||
	    len < (socklen_t)sizeof(*sin))
		return -1;
	sin = (const struct sockaddr_in *)(const void *)src;
	if (sbx_lookup_addr4(d->sbx, (const uint8_t *)&sin->sin_addr,
	    &v) == -1)
		return -1;
	/* Once per query: copies into the zeroed client (a cut copy stays
	 * terminated), not snprintf. */
	memset(c, 0, sizeof(*c));
	memcpy(c->id, v.id, strnlen(v.id, sizeof(c->id) - 1));
	memcpy(c->ifname, v.ifname, strnlen(v.ifname, sizeof(c->ifname) - 1));
	/* A sandbox whose policy vanished in a reload resolves nothing:
	 * refusing is the closed way to fail. */
	if ((c->policy = current_policy(d->gw, v.policy)) == NULL)
		return -1;
	c->tainted = v.tainted;
	return 0;
}

/* Synchronous: the daemon holds the nftables handle itself, so the
 * ticket names nothing anyone waits for. */
static int
h_learn(void *ctx, uint64_t ticket, const struct fw_elem *e, size_t n,
    char *err, size_t errlen)
{
	struct dnsw *d = ctx;
	struct fw *fw = sbx_fw(d->sbx);

	(void)ticket;

	if (fw == NULL) {
		snprintf(err, errlen, "no nftables handle");
		errno = ENOTCONN;
		return -1;
	}
	return fw_learn(fw, e, n, err, errlen);
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

		if (rec_async(kind, d->pending[i].fields) == 0)
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
itemised(const struct dns_event *ev)
{
	char key[sizeof(ev->client)], *hash;

	snprintf(key, sizeof(key), "%s", ev->client);
	/* The source address without its port: a flood from one address
	 * uses many ports. */
	if ((hash = strrchr(key, '#')) != NULL)
		*hash = '\0';
	if (ev->decision == DNS_DEC_MALFORMED)
		return rec_tally(REC_TALLY_DNS_MALFORMED, key, ev->sandbox);
	if (ev->sandbox[0] == '\0')
		return rec_tally(REC_TALLY_DNS_UNKNOWN, key, NULL);
	if (ev->reason == POL_REASON_RATE_LIMITED)
		return rec_tally(REC_TALLY_DNS_RATE, ev->sandbox, NULL);
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

	if (!itemised(ev))
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
		if (rec_canon("dns.decision", w.p, w.len) == 0)
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

struct dnsw *
dnsw_start(struct ev_loop *loop, struct gw *gw, struct sbx *sbx,
    uint16_t listen_port, char *err, size_t errlen)
{
	const struct pol_config *cfg = gw_config(gw);
	struct dns_config dc;
	struct dns_hooks h;
	struct dnsw *d;

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
	if ((d = calloc(1, sizeof(*d))) == NULL) {
		snprintf(err, errlen, "dns: %s", strerror(errno));
		return NULL;
	}
	d->gw = gw;
	d->sbx = sbx;
	d->loop = loop;
	memset(&h, 0, sizeof(h));
	h.lookup = h_lookup;
	h.learn = h_learn;
	h.record = h_record;
	h.ctx = d;
	if ((d->proxy = dns_new(loop, &dc, &h, err, errlen)) == NULL) {
		int e = errno;

		free(d);
		errno = e;
		return NULL;
	}
	return d;
}

void
dnsw_stop(struct dnsw *d)
{
	if (d == NULL)
		return;
	dns_free(d->proxy);
	/* What the last turn decided is still recorded. */
	ev_timer_cancel(d->loop, d->flush);
	d->flush = NULL;
	flush_records(d);
	free(d);
}

uint16_t
dnsw_port(const struct dnsw *d)
{
	return dns_local_port(d->proxy);
}
