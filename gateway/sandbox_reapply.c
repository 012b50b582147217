/*
 * sandbox_reapply.c: what changes a live sandbox's rules. A taint (from
 * the bridge) narrows it to its policy's keep-list at once; a reload
 * moves it to its policy in the new set, replacing its static elements
 * and deciding again what it learned and which of its open flows stay.
 * Both keep the sandbox as it was when the record or the kernel refuses,
 * and say so, so that nothing is looser than the log claims.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"
#include "gateway/sandbox_int.h"
#include "netns/ct.h"
#include "netns/fw.h"

int
sbx_taint(struct sbx *m, const char *id, char *err, size_t errlen)
{
	const struct pol_net_rule *rk = NULL;
	const struct pol_policy *p;
	struct fw_rule *fk;
	struct sandbox *s;
	size_t nk = 0;
	int rc;

	if ((s = sb_find(m, id)) == NULL) {
		snprintf(err, errlen, "no sandbox %s", id);
		errno = ENOENT;
		return -1;
	}
	if (s->rec.tainted && s->taint_logged)
		return 0;
	/* The policy it runs under (kept on its snapshot if a reload dropped
	 * it); none at all keeps nothing: fail closed. */
	if ((p = sb_policy(s)) != NULL)
		rk = pol_taint_keep(p, &nk);
	if ((fk = calloc(nk + 1, sizeof(*fk))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	nk = sb_rules_to_fw(rk, nk, 1, fk, NULL);
	/* Narrowed and saved already, but its record was not committed:
	 * only the record is left to do, or the log would never say that
	 * this sandbox was tainted once the caller goes on. */
	if (s->rec.tainted) {
		free(fk);
		goto record;
	}
	rc = fw_restrict_budget(m->fw, s->fsb.ifname, fk, nk,
	    p != NULL ? pol_taint_budget(p) : 0, err, errlen);
	free(fk);
	if (rc == -1)
		return -1;
	/* Tainted only once the row says so: a taint the state database
	 * lost would hand a restart that cannot adopt the table the full
	 * egress back. On failure the kernel stays narrowed (fw_restrict is
	 * idempotent), the caller withholds what tainted, and the next
	 * taint tries the row again. */
	if (sbx_db_set_tainted(m->db, id, err, errlen) == -1) {
		log_warnx("sandbox %s: taint not persisted: %s", id, err);
		errno = EIO;
		return -1;
	}
	s->rec.tainted = 1;
	/* Narrowed in the kernel and saved: copies follow now, whether or
	 * not the record below goes in. */
	sb_notify(m, SB_CHANGED, s);
record:
	if (sb_event(m, "sandbox.taint", id, s, "keep=%zu", nk) == -1) {
		snprintf(err, errlen, "the taint's audit record was not "
		    "committed");
		errno = EIO;
		return -1;
	}
	s->taint_logged = 1;
	return 0;
}

/* The durable record of a change of s's statics: a finding of type
 * sandbox.policy_update carrying the sandbox fields (policy and digest as
 * they are about to be applied). 0, or -1 with err. */
static int
policy_update_commit(struct sbx *m, const struct sandbox *s,
    const char *detail, char *err, size_t errlen)
{
	json_t *f;
	char e[256];

	if ((f = sb_fields(s, "log", "policy_update", detail)) == NULL ||
	    json_object_set_new(f, "type",
	    json_string("sandbox.policy_update")) == -1 ||
	    json_object_set_new(f, "severity", json_string("low")) == -1) {
		json_decref(f);
		snprintf(err, errlen, "audit log: out of memory");
		return -1;
	}
	if (rec_commit(m->rec, "finding", f, NULL, e, sizeof(e)) == -1) {
		snprintf(err, errlen, "audit log: %s", e);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ narrowing */

/* Does one of the names l was learned for still give it under p? With
 * no name known (an element found in a table adopted after a restart),
 * nothing can say so: no. */
static int
learned_allowed(const struct pol_policy *p, const struct fw_learned *l,
    bool tainted)
{
	const char *n = l->names;
	size_t i;

	for (i = 0; i < l->nnames; i++, n += strlen(n) + 1)
		if (pol_egress_range_allowed(p, n, l->e.proto,
		    l->e.port_lo, l->e.port_hi, tainted))
			return 1;
	return 0;
}

/* What a narrowing keeps, for deciding which flows stay. */
struct narrow {
	const struct pol_policy	*p;
	const struct pol_config	*cfg;
	const struct fw_elem	*kept;		/* learned elements that stay */
	size_t			 nkept;
	bool			 tainted;
	uint8_t			 svc[4];
};

/* ct_del_if's predicate: 1 for a flow of the sandbox that nothing in force
 * allows any more. Flows with the service address (DNS, the bridge: the
 * input path, not egress) stay. The policy decides the address (always-
 * denied classes, explicit denies, private ranges, static CIDR allows);
 * what it leaves to names stays only while a learned element covers it. */
static int
flow_gone(const struct ct_flow *f, void *arg)
{
	const struct narrow *nw = arg;
	struct pol_egress_q q;
	struct pol_decision d;
	char lit[INET6_ADDRSTRLEN];
	size_t i;

	if (f->family == AF_INET && (memcmp(f->dst, nw->svc, 4) == 0 ||
	    memcmp(f->rsrc, nw->svc, 4) == 0))
		return 0;
	if (f->proto != IPPROTO_TCP && f->proto != IPPROTO_UDP &&
	    f->proto != IPPROTO_ICMP)
		return 1;
	if (inet_ntop(f->family, f->dst, lit, sizeof(lit)) == NULL)
		return 1;
	memset(&q, 0, sizeof(q));
	q.host = lit;
	q.proto = f->proto;
	q.port = f->dport;
	q.tainted = nw->tainted;
	q.treat_as_public = nw->cfg->treat_as_public;
	q.ntreat_as_public = nw->cfg->ntreat_as_public;
	memset(&d, 0, sizeof(d));
	d.verdict = POL_DENY;
	pol_egress_decide(nw->p, &q, &d);
	if (d.verdict == POL_ALLOW)
		return 0;
	if (d.reason != POL_REASON_NO_MATCHING_RULE &&
	    d.reason != POL_REASON_TAINTED)
		return 1;
	for (i = 0; i < nw->nkept; i++) {
		const struct fw_elem *e = &nw->kept[i];

		if (e->family == f->family && e->proto == f->proto &&
		    memcmp(e->addr, f->dst, f->family == AF_INET ? 4 : 16) ==
		    0 && f->dport >= e->port_lo && f->dport <= e->port_hi &&
		    (!nw->tainted || (e->flags & FW_ELEM_KEEP)))
			return 0;
	}
	return 1;
}

/* fw_learn or fw_unlearn over e[0..n) in batches the handle takes. */
static int
learn_chunks(struct fw *fw, const struct fw_elem *e, size_t n, int unlearn,
    char *err, size_t errlen)
{
	size_t off, k;

	for (off = 0; off < n; off += k) {
		k = n - off > 1024 ? 1024 : n - off;
		if ((unlearn ? fw_unlearn(fw, e + off, k, err, errlen) :
		    fw_learn(fw, e + off, k, err, errlen)) == -1)
			return -1;
	}
	return 0;
}

/*
 * sb_narrow: after s's statics were replaced by those of the policy it now
 * runs under, what it learned is decided again by the names it was
 * learned for: an element no name of it is allowed any more goes, one
 * whose name left the taint keep-list loses its keep mark (it is learned
 * again without it, for what is left of its life), and then every
 * conntrack entry of the sandbox that nothing in force allows any more
 * is deleted, so a narrowing holds for open flows too, not only new ones.
 * Returns how many elements went, or -1 with err.
 */
static int
sb_narrow(struct sbx *m, struct sandbox *s, char *err, size_t errlen)
{
	const struct pol_policy *p = sb_policy(s);
	struct fw_learned *l = NULL;
	struct fw_elem *drop = NULL, *kept = NULL, *re;
	struct narrow nw;
	size_t n = 0, i, nd = 0, nk = 0, nr = 0;
	int rc = -1;

	if (p == NULL) {
		snprintf(err, errlen, "no policy");
		return -1;
	}
	if (fw_learned_list(m->fw, s->fsb.ifname, &l, &n, err, errlen) == -1)
		return -1;
	/* drop: first what goes, then (from the end) what loses its mark. */
	if ((drop = calloc(n + 1, sizeof(*drop))) == NULL ||
	    (kept = calloc(n + 1, sizeof(*kept))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		l[i].e.name = NULL;
		if (!learned_allowed(p, &l[i], false))
			drop[nd++] = l[i].e;
		else if ((l[i].e.flags & FW_ELEM_KEEP) &&
		    !learned_allowed(p, &l[i], true)) {
			drop[n - ++nr] = l[i].e;
			l[i].e.flags &= (uint8_t)~FW_ELEM_KEEP;
			kept[nk++] = l[i].e;
		} else
			kept[nk++] = l[i].e;
	}
	re = drop + n - nr;
	/* The names point into the handle: done with them before it
	 * changes. Re-learned elements lose theirs (a later reload
	 * removes them, and the next answer brings them back named). */
	free(l);
	l = NULL;
	if (learn_chunks(m->fw, drop, nd, 1, err, errlen) == -1 ||
	    learn_chunks(m->fw, re, nr, 1, err, errlen) == -1)
		goto out;
	for (i = 0; i < nr; i++)
		re[i].flags &= (uint8_t)~FW_ELEM_KEEP;
	if (learn_chunks(m->fw, re, nr, 0, err, errlen) == -1)
		goto out;
	memset(&nw, 0, sizeof(nw));
	nw.p = p;
	nw.cfg = m->cfg;
	nw.kept = kept;
	nw.nkept = nk;
	nw.tainted = s->rec.tainted != 0;
	memcpy(nw.svc, &m->svc, 4);
	if (ct_del_if(m->ct, AF_INET, s->fsb.addr4, flow_gone, &nw, err,
	    errlen) == -1)
		goto out;
	rc = (int)nd;
out:
	free(l);
	free(drop);
	free(kept);
	return rc;
}

/*
 * One sandbox after a reload. Its policy is looked up in the set now in
 * force: gone, it stays on the snapshot it runs under (s->ps) and a
 * finding says so, once; the same file (digest), it simply moves to the
 * new set; changed, its statics are replaced in the kernel in one batch
 * (fw_sandbox_update keeps learned elements and a taint restriction),
 * after a record of the change is durable.
 */
static int
sb_reapply(struct sbx *m, struct sandbox *s, struct gw_pset *ps)
{
	const struct pol_policy *np, *op;
	struct gw_pset *old;
	char detail[256], e[512];
	const char *od;
	int nd;

	np = pol_set_get(gw_pset_set(ps), s->rec.policy);
	op = sb_policy(s);
	if (np == NULL) {
		if (s->orphaned)
			return 0;
		s->orphaned = 1;
		snprintf(detail, sizeof(detail), "policy %s is no longer "
		    "loaded: the sandbox keeps the rules it was created with",
		    s->rec.policy);
		log_warnx("sandbox %s: %s", s->rec.id, detail);
		if (rec_async(m->rec, "finding", rec_finding_fields(s->rec.id,
		    "sandbox.policy_removed", "medium", detail)) == -1)
			log_warn("sandbox %s: finding", s->rec.id);
		/* Its policy now lives only in the snapshot it runs under. */
		sb_notify(m, SB_CHANGED, s);
		return 0;
	}
	od = op != NULL ? pol_policy_digest(op) : "";
	if (op == NULL || strcmp(od, pol_policy_digest(np)) != 0) {
		/* The sandbox moves to np for the record and sb_fw_apply. */
		old = s->ps;
		s->ps = gw_pset_ref(m->gw);
		snprintf(detail, sizeof(detail), "statics re-applied: "
		    "sha256 %.64s -> %.64s", od[0] != '\0' ? od : "none",
		    pol_policy_digest(np));
		if (policy_update_commit(m, s, detail, e, sizeof(e)) == -1 ||
		    sb_fw_apply(m, s, 1, e, sizeof(e)) == -1) {
			/* Still on the old rules, in the kernel and here;
			 * the next reload tries again. */
			gw_pset_unref(s->ps);
			s->ps = old;
			log_warnx("sandbox %s: policy %s not re-applied: %s",
			    s->rec.id, s->rec.policy, e);
			if (rec_async(m->rec, "finding", rec_finding_fields(s->rec.id,
			    "sandbox.reapply_failed", "high", e)) == -1)
				log_warn("sandbox %s: finding", s->rec.id);
			m->failures++;
			return 1;
		}
		gw_pset_unref(old);
		s->orphaned = 0;
		m->reapplied++;
		log_info("sandbox %s: policy %s re-applied", s->rec.id,
		    s->rec.policy);
		sb_limits_reapply(m, s);
		sb_notify(m, SB_CHANGED, s);
		/* In the same step: what it learned and the flows it holds
		 * follow the new rules at once, not when they expire. */
		if ((nd = sb_narrow(m, s, e, sizeof(e))) == -1) {
			log_warnx("sandbox %s: narrowing: %s", s->rec.id, e);
			if (rec_async(m->rec, "finding", rec_finding_fields(s->rec.id,
			    "sandbox.narrow_failed", "high", e)) == -1)
				log_warn("sandbox %s: finding", s->rec.id);
			m->failures++;
			return 1;
		}
		if (nd > 0)
			log_info("sandbox %s: %d learned destinations removed",
			    s->rec.id, nd);
		return 0;
	}
	/* Same policy file: only the set it lives in changes, so the old
	 * set can be freed once no sandbox is left on it. */
	old = s->ps;
	s->ps = gw_pset_ref(m->gw);
	gw_pset_unref(old);
	s->orphaned = 0;
	return 0;
}

size_t
sbx_reapply(struct sbx *m)
{
	struct gw_pset *ps;
	uint32_t i;
	size_t failed = 0;

	if (m == NULL)
		return 0;
	ps = gw_pset_ref(m->gw);
	for (i = 0; i < m->nslots; i++)
		if (m->by_slot[i] != NULL)
			failed += (size_t)sb_reapply(m, m->by_slot[i], ps);
	gw_pset_unref(ps);
	return failed;
}
