/*
 * answer: from an upstream (or cached) reply that passed the checks to the
 * answer the sandbox gets. The reply is asked again about its sandbox and
 * name when its query crossed a loop turn, filtered (filter.c), rewritten,
 * and held with its elements until the end of the loop iteration; then the
 * elements of every answer that became ready in it go to the learn hook in
 * one call (one netlink batch, one kernel round trip), and only once the
 * kernel has them are the answers released, with TTLs no longer than the
 * kernel elements, UDP ones in one sendmmsg. The kernel's acknowledgement
 * is the hook's return, or, when the proxy runs apart from the privileged
 * process, a later dns_learn_done: then the answers stay held here, a
 * bounded number of calls at a time. It is a file of its own because that
 * order, no answer before its elements, is what the proxy promises, and
 * one place keeps it.
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

/* Puts list (linked by rnext) back at the front of the ready list: answers
 * to be learned again go before the ones that became ready after them. */
static void
ready_unshift(struct dns_proxy *p, struct dns_pq *list)
{
	struct dns_pq *last = list;

	while (last->rnext != NULL)
		last = last->rnext;
	last->rnext = p->ready;
	if (p->ready == NULL)
		p->ready_tail = &last->rnext;
	p->ready = list;
}

/*
 * How the learn call for the answers of list (npq of them, nb elements)
 * went: err_no 0 or the refusal's errno, known now (the hook's return) or
 * later (dns_learn_done). Success releases them. A refused call of several
 * answers puts each back at the front of the ready list, to be learned
 * alone: one element the kernel refuses then costs only its own query a
 * SERVFAIL, not its neighbours' (and a batch mixes sandboxes, so one at
 * its learn cap must not fail the others). A refused answer alone gets
 * SERVFAIL.
 */
static void
batch_end(struct dns_proxy *p, struct dns_pq *list, size_t npq, size_t nb,
    int err_no, const char *err)
{
	struct dns_pq *pq, *next;

	if (err == NULL || *err == '\0')
		err = strerror(err_no);
	if (err_no == 0) {
		/* Retries alone are not counted as batches. */
		if (!list->alone) {
			p->stat_batches++;
			p->stat_batched += npq;
		}
		for (pq = list; pq != NULL; pq = next) {
			next = pq->rnext;
			ready_release(pq);
		}
		return;
	}
	if (npq > 1) {
		/* ENOSPC: a sandbox at its learn cap, which its findings
		 * report; only other failures are logged. */
		if (err_no != ENOSPC)
			log_warnx("dns: learn of %zu elements for %zu answers "
			    "failed: %s; trying each answer alone", nb, npq,
			    err);
		for (pq = list; pq != NULL; pq = pq->rnext)
			pq->alone = true;
		ready_unshift(p, list);
		dns_flush_schedule(p);
		return;
	}
	if (err_no == ENOSPC) {
		pq_fail_capped(list);
		return;
	}
	if (list->alone)
		log_warnx("dns: learn for %s (%s) failed: %s", list->c.id,
		    list->q.qname, err);
	else
		log_warnx("dns: learn of %zu elements for 1 answer failed: %s",
		    nb, err);
	dns_pq_fail(list, POL_REASON_LEARN_FAILED);
}

/* One learn call for the answers of list (npq of them, whose nb elements
 * are in p->bel); the caller saw a free slot for it in p->lb. */
static void
batch_learn(struct dns_proxy *p, struct dns_pq *list, size_t npq, size_t nb)
{
	uint64_t t = ++p->ticket;
	char err[128];
	size_t i;
	int rc, e;

	err[0] = '\0';
	errno = 0;
	p->in_learn = true;
	rc = p->h.learn(p->h.ctx, t, p->bel, nb, err, sizeof(err));
	e = errno;
	p->in_learn = false;
	if (rc != DNS_LEARN_PENDING) {
		/* Anything but 0 is a refusal, with EIO if errno says none. */
		batch_end(p, list, npq, nb, rc == 0 ? 0 : e != 0 ? e : EIO,
		    err);
		return;
	}
	for (i = 0; i < DNS_LEARN_INFLIGHT; i++) {
		struct dns_lbatch *lb = &p->lb[i];

		if (lb->pqs != NULL)
			continue;
		lb->ticket = t;
		lb->pqs = list;
		lb->npq = npq;
		lb->nb = nb;
		p->nlb++;
		p->stat_learn_pending++;
		return;
	}
	/* Not reached: dns_flush calls only with a slot free. */
	batch_end(p, list, npq, nb, EAGAIN, "no learn slot");
}

/*
 * dns_flush: the end of a loop iteration. The elements of every answer
 * that became ready in it go to the kernel in one learn call (one netlink
 * batch, one round trip) and, once it is acknowledged (by the hook's
 * return, or later by dns_learn_done), the answers leave (recorded first,
 * as everywhere). When a batch fails, each of its answers is tried again
 * alone (batch_end). While DNS_LEARN_INFLIGHT calls are pending the rest
 * stays on the ready list, in order, until an acknowledgement frees a
 * slot and flushes again. Queued UDP answers leave together at the end
 * (sendmmsg).
 */
static void
dns_flush(struct ev_loop *loop, void *arg)
{
	struct dns_proxy *p = arg;
	struct dns_pq *list, *pq, *next, *end, *last;
	size_t nb, tot, npq, i;

	(void)loop;
	p->flush = NULL;
	p->flushing = true;
	while ((list = p->ready) != NULL && p->nlb < DNS_LEARN_INFLIGHT) {
		/* A chunk: as many answers as fit in one batch (one answer
		 * has at most DNS_MAX_ELEMS < DNS_BATCH_ELEMS elements), or
		 * one answer to be learned alone. */
		nb = tot = npq = 0;
		last = list;
		for (end = list; end != NULL && (npq == 0 || (!list->alone &&
		    !end->alone && tot + end->nel <= DNS_BATCH_ELEMS));
		    end = end->rnext) {
			for (i = 0; i < end->nel; i++)
				batch_add(p, &nb, &end->el[i]);
			tot += end->nel;
			npq++;
			last = end;
		}
		p->ready = end;
		if (end == NULL)
			p->ready_tail = &p->ready;
		last->rnext = NULL;
		if (nb > 0) {
			batch_learn(p, list, npq, nb);
			continue;
		}
		/* Nothing to learn (no address kept, NXDOMAIN): they go. */
		for (pq = list; pq != NULL; pq = next) {
			next = pq->rnext;
			ready_release(pq);
		}
	}
	if (p->nout > 0)
		dns_out_send(p);
	p->flushing = false;
}

void
dns_learn_done(struct dns_proxy *p, uint64_t ticket, int err_no,
    const char *err)
{
	struct dns_lbatch b;
	size_t i;

	if (p == NULL)
		return;
	if (p->in_learn) {
		/* Against the contract: the ticket is not pending yet, and
		 * the call in progress would be left holding its answers. */
		log_warnx("dns: learn ticket %llu acknowledged from inside "
		    "the learn hook; ignored", (unsigned long long)ticket);
		return;
	}
	for (i = 0; i < DNS_LEARN_INFLIGHT; i++)
		if (p->lb[i].pqs != NULL && p->lb[i].ticket == ticket)
			break;
	if (i == DNS_LEARN_INFLIGHT) {
		log_debug("dns: learn ticket %llu is not pending; ignored",
		    (unsigned long long)ticket);
		return;
	}
	b = p->lb[i];
	memset(&p->lb[i], 0, sizeof(p->lb[i]));
	p->nlb--;
	batch_end(p, b.pqs, b.npq, b.nb, err_no, err);
	/* A slot is free: answers waiting for one go at the end of this
	 * loop iteration, together. */
	if (p->ready != NULL)
		dns_flush_schedule(p);
}

size_t
dns_learn_abort_all(struct dns_proxy *p)
{
	struct dns_pq *pq, *next;
	size_t i, n = 0;

	if (p == NULL)
		return 0;
	for (i = 0; i < DNS_LEARN_INFLIGHT; i++) {
		struct dns_lbatch b = p->lb[i];

		if (b.pqs == NULL)
			continue;
		memset(&p->lb[i], 0, sizeof(p->lb[i]));
		p->nlb--;
		/* No retry: whoever was to answer is gone. */
		for (pq = b.pqs; pq != NULL; pq = next) {
			next = pq->rnext;
			dns_pq_fail(pq, POL_REASON_LEARN_FAILED);
			n++;
		}
	}
	if (n > 0)
		log_warnx("dns: %zu answers failed: their learn calls will "
		    "never be acknowledged", n);
	if (p->ready != NULL)
		dns_flush_schedule(p);
	return n;
}

void
dns_learn_forget(struct dns_proxy *p)
{
	memset(p->lb, 0, sizeof(p->lb));
	p->nlb = 0;
	p->ready = NULL;
	p->ready_tail = &p->ready;
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
	for (i = 0; i < fo.nel && i < DNS_EV_MAX_ELEMS; i++) {
		struct dns_ev_elem *x = &ev->elems[i];

		memcpy(x->ifname, fo.el[i].ifname, sizeof(x->ifname));
		x->family = fo.el[i].family;
		memcpy(x->addr, fo.el[i].addr, sizeof(x->addr));
		x->proto = fo.el[i].proto;
		x->flags = fo.el[i].flags;
		x->port_lo = fo.el[i].port_lo;
		x->port_hi = fo.el[i].port_hi;
		x->timeout_ms = fo.el[i].timeout_ms;
	}
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
