/*
 * cache: the proxy's answer cache. It saves the upstream round trip, never
 * the checks: a cached answer goes through the same question match,
 * CNAME-chain cut, address classification, policy of the asking sandbox
 * and learn (the elements are refreshed on every answer, cached or not:
 * DESIGN §5) as a fresh one, with its TTLs aged. Only NOERROR answers with
 * records are kept, for the smallest TTL among them (at most
 * DNS_CACHE_TTL_MAX: a changed record is picked up within the hour);
 * bounded in entries (cfg.cache_max) and bytes (DNS_CACHE_BYTES) and drops
 * its oldest entry when full. Entries are found through an open-addressed
 * index that keeps each entry's hash: a name never seen (under a flood of
 * fresh names, every query) costs a read of the index, not of the entries;
 * this cut the cache's share of the loop thread's time under the
 * benchmark's load from about 6 % to about 2 %.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns_int.h"

#define DNS_CACHE_MAX		16384	/* default cfg.cache_max */
#define DNS_CACHE_BYTES		(4u << 20)	/* all entries together */
#define DNS_CACHE_MSG_MAX	4096	/* larger answers are not kept */
#define DNS_CACHE_TTL_MAX	3600	/* seconds, whatever the upstream says */

/* One cached upstream answer: the checked reply as the upstream sent it,
 * keyed by the question (name lower-cased). Every use goes through the
 * same filter, policy and learn path as a fresh answer. */
struct dns_centry {
	struct dns_centry	*onext, *oprev;		/* insertion order */
	uint64_t		 stored_ms, expires_ms;
	uint32_t		 hash;
	uint16_t		 qtype, qclass;
	size_t			 klen, mlen;
	uint8_t			 data[];		/* key, then message */
};

/* A slot of the cache's open-addressed index: the entry's hash is kept
 * beside the pointer so that a lookup that misses (every query for a name
 * never seen) reads only the index, not the entries. */
struct dns_cslot {
	uint32_t		 hash;
	struct dns_centry	*e;			/* NULL: free */
};

static uint32_t
cache_hash(const uint8_t *k, size_t kl, uint16_t qtype, uint16_t qclass)
{
	uint32_t h = 2166136261u ^ qtype ^ ((uint32_t)qclass << 16);
	size_t i;

	for (i = 0; i < kl; i++)
		h = (h ^ k[i]) * 16777619u;
	return h;
}

/* The lower-cased wire name of q: the cache key. */
static size_t
cache_key(const struct dns_query *q, uint8_t *k)
{
	size_t i;

	for (i = 0; i < q->qwire_len; i++)
		k[i] = q->qwire[i] >= 'A' && q->qwire[i] <= 'Z' ?
		    (uint8_t)(q->qwire[i] - 'A' + 'a') : q->qwire[i];
	return q->qwire_len;
}

/*
 * Removes e's slot from the index (linear probing, load at most 1/2). The
 * entries after it in its run move back when their home slot allows it
 * (backward-shift deletion), so no tombstones pile up and a lookup stops
 * at the first free slot.
 */
static void
cslot_del(struct dns_proxy *p, const struct dns_centry *e)
{
	size_t i = e->hash & p->cmask, j, k;

	while (p->cslots[i].e != e)
		i = (i + 1) & p->cmask;
	for (j = i;;) {
		j = (j + 1) & p->cmask;
		if (p->cslots[j].e == NULL)
			break;
		k = p->cslots[j].hash & p->cmask;
		/* The entry at j stays when its home k lies cyclically in
		 * (i, j]: moving it to i would put it before its home. */
		if (i <= j ? i < k && k <= j : i < k || k <= j)
			continue;
		p->cslots[i] = p->cslots[j];
		i = j;
	}
	p->cslots[i].e = NULL;
	p->cslots[i].hash = 0;
}

static void
cache_unlink(struct dns_proxy *p, struct dns_centry *e)
{
	cslot_del(p, e);
	if (e->oprev != NULL)
		e->oprev->onext = e->onext;
	else
		p->cold = e->onext;
	if (e->onext != NULL)
		e->onext->oprev = e->oprev;
	else
		p->cnew = e->oprev;
	p->ncache--;
	p->cache_bytes -= sizeof(*e) + e->klen + e->mlen;
	free(e);
}

static struct dns_centry *
cache_find(struct dns_proxy *p, const struct dns_query *q, uint64_t now)
{
	uint8_t k[sizeof(q->qwire)];
	size_t kl = cache_key(q, k);
	uint32_t h = cache_hash(k, kl, q->qtype, q->qclass);
	struct dns_centry *e;
	size_t i;

	for (i = h & p->cmask; (e = p->cslots[i].e) != NULL;
	    i = (i + 1) & p->cmask) {
		if (p->cslots[i].hash != h || e->qtype != q->qtype ||
		    e->qclass != q->qclass || e->klen != kl ||
		    memcmp(e->data, k, kl) != 0)
			continue;
		if (now >= e->expires_ms) {
			cache_unlink(p, e);
			return NULL;
		}
		return e;
	}
	return NULL;
}

/* Keeps the checked upstream reply (m, len) to pq's question. */
void
dns_cache_put(struct dns_proxy *p, const struct dns_query *q, ldns_pkt *pkt,
    const uint8_t *m, size_t len)
{
	ldns_rr_list *an = ldns_pkt_answer(pkt);
	size_t nan = ldns_rr_list_rr_count(an), i;
	uint32_t minttl = UINT32_MAX;
	uint64_t now = ev_now_ms();
	struct dns_centry *e;

	if (p->cfg.no_cache || ldns_pkt_get_rcode(pkt) != LDNS_RCODE_NOERROR ||
	    ldns_pkt_tc(pkt) || nan == 0 || len > DNS_CACHE_MSG_MAX)
		return;
	for (i = 0; i < nan; i++)
		if (ldns_rr_ttl(ldns_rr_list_rr(an, i)) < minttl)
			minttl = ldns_rr_ttl(ldns_rr_list_rr(an, i));
	if (minttl == 0)
		return;
	if (minttl > DNS_CACHE_TTL_MAX)
		minttl = DNS_CACHE_TTL_MAX;
	if ((e = cache_find(p, q, now)) != NULL)
		cache_unlink(p, e);
	while ((p->ncache >= p->cache_cap || p->cache_bytes +
	    sizeof(*e) + q->qwire_len + len > DNS_CACHE_BYTES) &&
	    p->cold != NULL)
		cache_unlink(p, p->cold);
	if ((e = calloc(1, sizeof(*e) + q->qwire_len + len)) == NULL)
		return;
	e->klen = cache_key(q, e->data);
	e->mlen = len;
	memcpy(e->data + e->klen, m, len);
	e->qtype = q->qtype;
	e->qclass = q->qclass;
	e->hash = cache_hash(e->data, e->klen, q->qtype, q->qclass);
	e->stored_ms = now;
	e->expires_ms = now + (uint64_t)minttl * 1000u;
	for (i = e->hash & p->cmask; p->cslots[i].e != NULL;
	    i = (i + 1) & p->cmask)
		;
	p->cslots[i].hash = e->hash;
	p->cslots[i].e = e;
	e->oprev = p->cnew;
	if (p->cnew != NULL)
		p->cnew->onext = e;
	else
		p->cold = e;
	p->cnew = e;
	p->ncache++;
	p->cache_bytes += sizeof(*e) + e->klen + e->mlen;
}

/* The cached answer to q as a packet with aged TTLs, or NULL. */
ldns_pkt *
dns_cache_get(struct dns_proxy *p, const struct dns_query *q)
{
	uint64_t now = ev_now_ms();
	struct dns_centry *e = cache_find(p, q, now);
	ldns_pkt *pkt = NULL;
	ldns_rr_list *an;
	uint32_t age;
	size_t i;

	if (e == NULL || p->cfg.no_cache)
		return NULL;
	if (ldns_wire2pkt(&pkt, e->data + e->klen, e->mlen) !=
	    LDNS_STATUS_OK || pkt == NULL) {
		cache_unlink(p, e);
		return NULL;
	}
	age = (uint32_t)((now - e->stored_ms) / 1000u);
	an = ldns_pkt_answer(pkt);
	for (i = 0; i < ldns_rr_list_rr_count(an); i++) {
		ldns_rr *rr = ldns_rr_list_rr(an, i);

		ldns_rr_set_ttl(rr, ldns_rr_ttl(rr) > age ?
		    ldns_rr_ttl(rr) - age : 0);
	}
	p->stat_cache_hits++;
	return pkt;
}

void
dns_cache_clear(struct dns_proxy *p)
{
	while (p->cold != NULL)
		cache_unlink(p, p->cold);
}

/* The cache's index for cfg: a power of two of at least twice the entries
 * the cache may hold (cfg->cache_max, 0 for DNS_CACHE_MAX, and no more
 * than DNS_CACHE_BYTES can hold), so that probes stay short; *capp gets
 * that entry bound, *maskp the slot count - 1. NULL: no memory. */
struct dns_cslot *
dns_cslots_new(const struct dns_config *cfg, size_t *maskp, size_t *capp)
{
	size_t cap = cfg->cache_max != 0 ? cfg->cache_max : DNS_CACHE_MAX;
	size_t n = 2;

	if (cap > DNS_CACHE_BYTES / sizeof(struct dns_centry))
		cap = DNS_CACHE_BYTES / sizeof(struct dns_centry);
	while (n < 2 * cap)
		n *= 2;
	*maskp = n - 1;
	*capp = cap;
	return calloc(n, sizeof(struct dns_cslot));
}
