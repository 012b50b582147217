/*
 * answer: from an upstream (or cached) reply that passed the checks to the
 * answer the sandbox gets. The reply is asked again about its sandbox and
 * name when its query crossed a loop turn, filtered (filter.c), rewritten,
 * and held with its elements until the end of the loop iteration; then the
 * elements of every answer that became ready in it go to the learn hook in
 * one call (one netlink batch, one kernel round trip), and only once the
 * kernel has them are the answers released, with TTLs no longer than the
 * kernel elements, UDP ones in one sendmmsg. It is a file of its own
 * because that order, no answer before its elements, is what the proxy
 * promises, and one place keeps it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns_int.h"
#include "gateway/log.h"

#define DNS_CAPNOTE_MS		60000	/* a learn cap finding per sandbox per this */

static void	dns_flush(struct ev_loop *, void *);

/* Makes sure dns_flush runs once this loop iteration's callbacks are done.
 * If even that cannot be arranged (no memory), flush now: an answer may
 * leave a little earlier than its neighbours, never before its elements. */
void
dns_flush_schedule(struct dns_proxy *p)
{
	/* dns_flush sends what it queues itself before it returns. */
	if (p->flush != NULL || p->flushing)
		return;
	if ((p->flush = ev_defer(p->loop, dns_flush, p)) == NULL)
		dns_flush(p->loop, p);
}

static void
ready_push(struct dns_pq *pq)
{
	struct dns_proxy *p = pq->p;

	pq->rnext = NULL;
	*p->ready_tail = pq;
	p->ready_tail = &pq->rnext;
	dns_flush_schedule(p);
}

static bool
elem_same(const struct fw_elem *a, const struct fw_elem *b)
{
	return a->family == b->family && a->proto == b->proto &&
	    a->port_lo == b->port_lo && a->port_hi == b->port_hi &&
	    a->flags == b->flags && memcmp(a->addr, b->addr,
	    sizeof(a->addr)) == 0 && strcmp(a->ifname, b->ifname) == 0;
}

/* Appends e to the batch, or, when the same element is already in it (two
 * names answering the same address, as CDNs do), keeps one with the longer
 * timeout: one element per key per batch. */
static void
batch_add(struct dns_proxy *p, size_t *nb, const struct fw_elem *e)
{
	size_t i;

	for (i = 0; i < *nb; i++) {
		if (elem_same(&p->bel[i], e)) {
			if (e->timeout_ms > p->bel[i].timeout_ms)
				p->bel[i].timeout_ms = e->timeout_ms;
			return;
		}
	}
	p->bel[(*nb)++] = *e;
}

/*
 * The sandbox of pq has as many learned destinations as it may have (the
 * learn hook said ENOSPC): SERVFAIL, the answer's addresses were never
 * reachable. A finding goes with the first refusal of each sandbox per
 * DNS_CAPNOTE_MS: a flood past the cap is one alert a minute, not one
 * per answer.
 */
static void
pq_fail_capped(struct dns_pq *pq)
{
	struct dns_proxy *p = pq->p;
	struct dns_capnote *cn;
	uint64_t h = 1469598103934665603ull, now = ev_now_ms();
	const char *s;

	for (s = pq->c.id; *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	cn = &p->capnote[h % DNS_CAPNOTE_SLOTS];
	if (strcmp(cn->id, pq->c.id) != 0 || cn->ms == 0 ||
	    now - cn->ms >= DNS_CAPNOTE_MS) {
		dns_copystr(cn->id, sizeof(cn->id), pq->c.id);
		cn->ms = now != 0 ? now : 1;
		pq->ev.finding = true;
	}
	dns_pq_fail(pq, POL_REASON_LEARNED_CAP);
}

static void
ready_release(struct dns_pq *pq)
{
	ldns_buffer *b = pq->ans;

	pq->ans = NULL;
	dns_pq_finish(pq, b, pq->ans_rcode);
	ldns_buffer_free(b);
}

/*
 * dns_flush: the end of a loop iteration. The elements of every answer
 * that became ready in it go to the kernel in one learn call (one netlink
 * batch, one round trip) and, once it is acknowledged, the answers leave
 * (recorded first, as everywhere). When a batch fails, each of its
 * answers is tried again alone, so one element the kernel refuses costs
 * only its own query a SERVFAIL, not its neighbours'. Queued UDP answers
 * leave together at the end (sendmmsg).
 */
static void
dns_flush(struct ev_loop *loop, void *arg)
{
	struct dns_proxy *p = arg;
	struct dns_pq *list, *pq, *next, *end;
	size_t nb, tot, npq;
	char err[128];

	(void)loop;
	p->flush = NULL;
	p->flushing = true;
	list = p->ready;
	p->ready = NULL;
	p->ready_tail = &p->ready;
	while (list != NULL) {
		/* A chunk: as many answers as fit in one batch (one answer
		 * has at most DNS_MAX_ELEMS < DNS_BATCH_ELEMS elements). */
		nb = tot = npq = 0;
		for (end = list; end != NULL && (npq == 0 ||
		    tot + end->nel <= DNS_BATCH_ELEMS); end = end->rnext) {
			size_t i;

			for (i = 0; i < end->nel; i++)
				batch_add(p, &nb, &end->el[i]);
			tot += end->nel;
			npq++;
		}
		err[0] = '\0';
		if (nb > 0 && p->h.learn(p->h.ctx, p->bel, nb, err,
		    sizeof(err)) != 0) {
			/* ENOSPC: a sandbox at its learn cap, which its
			 * findings report; only other failures are logged. */
			int e = errno;

			if (e != ENOSPC)
				log_warnx("%s: learn of %zu elements for %zu "
				    "answers failed: %s%s", __func__, nb, npq,
				    err, npq > 1 ? "; trying each answer "
				    "alone" : "");
			for (pq = list; pq != end; pq = next) {
				next = pq->rnext;
				err[0] = '\0';
				if (pq->nel > 0 && (npq == 1 ||
				    (e = 0, p->h.learn(p->h.ctx, pq->el,
				    pq->nel, err, sizeof(err)) != 0))) {
					if (npq > 1)
						e = errno;
					if (e == ENOSPC) {
						pq_fail_capped(pq);
						continue;
					}
					if (npq > 1)
						log_warnx("%s: learn for %s "
						    "(%s) failed: %s", __func__,
						    pq->c.id, pq->q.qname, err);
					dns_pq_fail(pq, POL_REASON_LEARN_FAILED);
				} else
					ready_release(pq);
			}
		} else {
			if (nb > 0) {
				p->stat_batches++;
				p->stat_batched += npq;
			}
			for (pq = list; pq != end; pq = next) {
				next = pq->rnext;
				ready_release(pq);
			}
		}
		list = end;
	}
	if (p->nout > 0)
		dns_out_send(p);
	p->flushing = false;
}

/* The upstream (or cached) answer passed the checks: filter it, build the
 * answer and the elements, and queue both for dns_flush, which learns the
 * elements of every answer of this loop iteration in one batch and only
 * then releases the answers. relookup: the query crossed a loop turn, so
 * its sandbox and policy are looked up again and the name decided again. */
void
dns_pq_answer(struct dns_pq *pq, ldns_pkt *pkt, bool relookup)
{
	struct dns_event *ev = &pq->ev;
	ldns_rr_list *an = ldns_pkt_answer(pkt);
	size_t nan = ldns_rr_list_rr_count(an), i, nout = 0;
	struct dns_filter_in fin;
	struct dns_filter_out fo;
	struct pol_decision d;
	ldns_buffer *b = NULL;
	uint8_t rcode = (uint8_t)ldns_pkt_get_rcode(pkt);

	memset(&fo, 0, sizeof(fo));
	/* Ask again who the client is: the policy pointer of the first
	 * lookup is not held across loop turns (a reload may have replaced
	 * it), and a sandbox removed meanwhile learns nothing. */
	if (relookup) {
		struct dns_client c;
		bool same;

		memset(&c, 0, sizeof(c));
		if (pq->p->h.lookup(pq->p->h.ctx, (struct sockaddr *)&pq->src,
		    pq->srclen, &c) != 0 || c.policy == NULL ||
		    strcmp(c.id, pq->c.id) != 0) {
			dns_pq_fail(pq, POL_REASON_SANDBOX_GONE);
			goto out;
		}
		/* The same policy text and taint decide the same
		 * (pol_dns_decide is pure): only a change is decided again
		 * below. */
		same = c.tainted == pq->c.tainted && memcmp(pq->pdigest,
		    pol_policy_digest(c.policy), sizeof(pq->pdigest)) == 0;
		pq->c = c;
		pol_dns_limits(c.policy, &pq->lim);
		if (pq->lim.max_ttl_s < pq->lim.min_ttl_s)
			pq->lim.max_ttl_s = pq->lim.min_ttl_s;
		/* And decided again: a reload or a taint while the query
		 * was upstream may have taken the name away, and an answer
		 * is released under the policy in force, never an older
		 * one (the uniform deny, as for a fresh query). */
		if (same)
			goto decided;
		dns_decide_name(&c, &pq->q, &d);
		if (d.verdict != POL_ALLOW || d.reason == POL_REASON_NODATA) {
			bool nodata = d.verdict == POL_ALLOW;

			ev->decision = nodata ? DNS_DEC_NODATA : DNS_DEC_DENY;
			ev->reason = d.reason;
			dns_copystr(ev->rule, sizeof(ev->rule), d.rule);
			dns_pq_finish(pq, NULL, nodata ? RCODE_NOERROR :
			    dns_deny_rcode(&pq->lim));
			goto out;
		}
	}
decided:
	fin.q = &pq->q;
	fin.c = &pq->c;
	fin.lim = &pq->lim;
	fin.treat_as_public = pq->p->cfg.treat_as_public;
	fin.ntreat_as_public = pq->p->cfg.ntreat_as_public;
	fin.max_addrs = pq->p->cfg.max_answer_addrs;
	if (dns_filter_answer(&fin, pkt, ev, &fo) == -1)
		goto servfail;
	if (ev->naddrs > 0 && ev->nkept == 0) {
		ev->decision = DNS_DEC_DENY;
		ev->reason = POL_REASON_REBINDING;
		dns_pq_finish(pq, NULL, dns_deny_rcode(&pq->lim));
		goto out;
	}
	ev->nelems = fo.nel;
	memcpy(ev->elems, fo.el, (fo.nel < DNS_EV_MAX_ELEMS ? fo.nel :
	    DNS_EV_MAX_ELEMS) * sizeof(*fo.el));
	/* Learned for the name asked (the one the policy decided), which
	 * lives with pq until the answer leaves: a reload decides the
	 * element again by it. The event's copies carry no pointer. */
	for (i = 0; i < fo.nel; i++)
		fo.el[i].name = pq->q.qname;

	/* Under 1 KiB: the common answer fits, and a small request stays
	 * out of malloc's large bins; the buffer grows when it must. */
	if ((b = ldns_buffer_new(512)) == NULL)
		goto servfail;
	for (i = 0; i < nan; i++)
		nout += fo.keep[i];
	if (rcode != RCODE_NOERROR && rcode != RCODE_NXDOMAIN)
		rcode = RCODE_SERVFAIL;
	dns_put_head(b, &pq->q, true, rcode, false, (uint16_t)nout);
	for (i = 0; i < nan; i++) {
		ldns_rr *rr = ldns_rr_list_rr(an, i);

		if (!fo.keep[i])
			continue;
		ldns_rr_set_ttl(rr, fo.ttls[i]);
		if (ldns_rr2buffer_wire(b, rr, LDNS_SECTION_ANSWER) !=
		    LDNS_STATUS_OK)
			goto servfail;
	}
	if (pq->q.edns)
		dns_put_opt(b, pq->p->cfg.max_udp_size);
	if (!ldns_buffer_status_ok(b) || ldns_buffer_position(b) > DNS_MAX_MSG)
		goto servfail;
	pq->ans = b;
	pq->ans_rcode = rcode;
	pq->el = fo.el;
	pq->nel = fo.nel;
	fo.el = NULL;
	b = NULL;
	ready_push(pq);
	goto out;
servfail:
	dns_pq_fail(pq, POL_REASON_INTERNAL);
out:
	ldns_buffer_free(b);
	dns_filter_out_free(&fo);
}
