/*
 * probe.c: lookups the proxy makes on its own, for the name gate: the
 * HTTPS records of a name it answered to a sandbox that now sends an ECH
 * ClientHello to one of the name's addresses, whose `ech`
 * param says which ECH configs the name's servers take (gateway/dns/
 * ech.h). A sandbox's own HTTPS questions are answered NODATA by default
 * (clients then have no configs); the gate still needs to know what a
 * config id in a ClientHello would mean, so the proxy asks itself.
 *
 * A probe is a query in flight like any other (the same upstreams,
 * failover, TCP after truncation, timeouts, max_pending), without a
 * client: its answer is parsed here and handed to the https hook, never
 * cached (a sandbox's HTTPS question must still be answered by its
 * policy), never recorded as a dns.decision. Which names are probed, and
 * how many at once, is the gate's to bound (gate_ech_want).
 */
#include <errno.h>
#include <string.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns_int.h"
#include "gateway/dns/ech.h"

#define RR_HTTPS	65u
#define PROBE_ID	"~https"	/* the sandbox id probes count under */

/* name (presentation, no trailing dot) as a question's wire name. */
static int
to_wire(const char *name, struct dns_query *q)
{
	size_t i = 0, o = 0, start;

	if (name[0] == '\0')
		return -1;
	while (name[i] != '\0') {
		start = i;
		while (name[i] != '\0' && name[i] != '.')
			i++;
		if (i == start || i - start > 63 ||
		    o + 1 + (i - start) + 1 > sizeof(q->qwire))
			return -1;
		q->qwire[o++] = (uint8_t)(i - start);
		memcpy(q->qwire + o, name + start, i - start);
		o += i - start;
		if (name[i] == '.')
			i++;
	}
	q->qwire[o++] = 0;
	q->qwire_len = o;
	return 0;
}

int
dns_probe_https(struct dns_proxy *p, const char *name)
{
	struct dns_query q;
	struct dns_pq *pq;
	size_t n;

	if (p == NULL || name == NULL ||
	    (n = strlen(name)) >= sizeof(q.qname)) {
		errno = EINVAL;
		return -1;
	}
	memset(&q, 0, sizeof(q));
	if (to_wire(name, &q) == -1) {
		errno = EINVAL;
		return -1;
	}
	memcpy(q.qname, name, n + 1);
	q.qtype = RR_HTTPS;
	q.qclass = LDNS_RR_CLASS_IN;
	q.rd = true;
	if (p->npending >= p->cfg.max_pending) {
		errno = EBUSY;
		return -1;
	}
	if ((pq = dns_pq_alloc(p)) == NULL)
		return -1;
	pq->p = p;
	pq->fd = -1;
	pq->q = q;
	pq->probe = true;
	memcpy(pq->c.id, PROBE_ID, sizeof(PROBE_ID));
	pq->t0_us = dns_now_us();
	pq->next = p->pqs;
	if (p->pqs != NULL)
		p->pqs->prev = pq;
	p->pqs = pq;
	p->npending++;
	dns_pq_start(pq);
	return 0;
}

static void
done(struct dns_pq *pq, int status, const struct ech_set *set,
    uint32_t ttl)
{
	struct dns_proxy *p = pq->p;
	char name[sizeof(pq->q.qname)];

	/* The hook may start another probe, which may reuse pq. */
	memcpy(name, pq->q.qname, sizeof(name));
	dns_pq_free(pq);
	if (p->h.https != NULL)
		p->h.https(p->h.ctx, name, status, set, ttl);
}

void
dns_probe_fail(struct dns_pq *pq)
{
	done(pq, -1, NULL, 0);
}

/* The RDATA of rr, as its fields' wire bytes one after the other (how
 * ldns keeps them, whether it knows the type or not). */
static int
rdata(const ldns_rr *rr, uint8_t *out, size_t cap, size_t *len)
{
	size_t i, k;

	*len = 0;
	for (i = 0; i < ldns_rr_rd_count(rr); i++) {
		const ldns_rdf *f = ldns_rr_rdf(rr, i);

		if (f == NULL)
			return -1;
		k = ldns_rdf_size(f);
		if (k > cap - *len)
			return -1;
		memcpy(out + *len, ldns_rdf_data(f), k);
		*len += k;
	}
	return 0;
}

void
dns_probe_reply(struct dns_pq *pq, ldns_pkt *pkt)
{
	static uint8_t rd[65536];
	struct ech_set set;
	ldns_rr_list *an = ldns_pkt_answer(pkt);
	uint32_t ttl = UINT32_MAX;
	size_t i, len;

	memset(&set, 0, sizeof(set));
	/* Every HTTPS record of the answer counts, the chain's too: a
	 * CNAME's target publishes for the name that led to it. One record
	 * that does not read makes the whole answer unknown. */
	for (i = 0; an != NULL && i < ldns_rr_list_rr_count(an); i++) {
		const ldns_rr *rr = ldns_rr_list_rr(an, i);

		if ((uint16_t)ldns_rr_get_type(rr) != RR_HTTPS)
			continue;
		if (rdata(rr, rd, sizeof(rd), &len) == -1 ||
		    ech_svcb_rdata(rd, len, &set) == -1) {
			done(pq, -1, NULL, 0);
			return;
		}
		if (ldns_rr_ttl(rr) < ttl)
			ttl = ldns_rr_ttl(rr);
	}
	done(pq, 0, &set, ttl == UINT32_MAX ? 0 : ttl);
}
