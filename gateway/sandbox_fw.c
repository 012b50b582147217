/*
 * sandbox_fw.c: a policy in the kernel's form. The classifier decides in
 * policy/; the kernel enforces with set elements (netns/fw.h), so a
 * policy's static rules, its taint keep-list and the always-denied and
 * private ranges are translated here, once for the table at start and
 * once per sandbox whenever its rules are (re)applied.
 */
#include <netinet/in.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/log.h"
#include "gateway/sandbox.h"
#include "gateway/sandbox_int.h"
#include "netns/fw.h"

static void
pol_to_fw_cidr(const struct pol_cidr *p, struct fw_cidr *f)
{
	memset(f, 0, sizeof(*f));
	f->family = p->addr.family;
	memcpy(f->addr, p->addr.a, sizeof(f->addr));
	f->prefix = p->prefix;
}

/* A policy's budget ids are the kernel's. */
_Static_assert(POL_MAX_RULE_BUDGETS == FW_MAX_BUDGETS,
    "policy and kernel budget bounds differ");

/*
 * The kernel's form of a policy's static rules. ICMPv6 is dropped (IPv6 is
 * off inside sandboxes, so nothing could use it); an allow without ports
 * means every port. *icmp is set when an ICMP allow exists.
 */
size_t
sb_rules_to_fw(const struct pol_net_rule *r, size_t n, int allow,
    struct fw_rule *out, int *icmp)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		if (allow && r[i].proto != IPPROTO_TCP &&
		    r[i].proto != IPPROTO_UDP && r[i].proto != IPPROTO_ICMP)
			continue;
		if (allow && r[i].proto == IPPROTO_ICMP &&
		    r[i].cidr.addr.family != AF_INET)
			continue;
		memset(&out[k], 0, sizeof(out[k]));
		out[k].family = r[i].cidr.addr.family;
		memcpy(out[k].addr, r[i].cidr.addr.a, sizeof(out[k].addr));
		out[k].prefix = r[i].cidr.prefix;
		out[k].proto = r[i].proto;
		out[k].port_lo = r[i].port_lo;
		out[k].port_hi = r[i].port_hi;
		out[k].budget = allow ? r[i].budget : 0;
		if (allow && r[i].proto != IPPROTO_ICMP &&
		    r[i].port_lo == 0 && r[i].port_hi == 0) {
			out[k].port_lo = 1;
			out[k].port_hi = 65535;
		}
		if (allow && r[i].proto == IPPROTO_ICMP && icmp != NULL)
			*icmp = 1;
		k++;
	}
	return k;
}

/* The policy sandbox s runs under: its name in the set its statics came
 * from (s->ps), which a reload that dropped the policy leaves in place.
 * NULL when that set has no such policy either. */
const struct pol_policy *
sb_policy(const struct sandbox *s)
{
	if (s->ps == NULL)
		return NULL;
	return pol_set_get(gw_pset_set(s->ps), s->rec.policy);
}

/* The kernel's form of a policy's static rules (all empty for p NULL). */
struct statics {
	struct fw_rule	*fa, *fd, *fk;
	size_t		 na, nd, nk;
	int		 icmp;
	uint64_t	 quota, taint_budget;
	uint64_t	 budgets[FW_MAX_BUDGETS];
	size_t		 nbudgets;
};

static void
statics_free(struct statics *st)
{
	free(st->fa);
	free(st->fd);
	free(st->fk);
	memset(st, 0, sizeof(*st));
}

static int
statics_build(const struct pol_policy *p, struct statics *st, char *err,
    size_t errlen)
{
	const struct pol_net_rule *ra = NULL, *rd = NULL, *rk = NULL;

	memset(st, 0, sizeof(*st));
	if (p != NULL) {
		ra = pol_egress_static(p, true, &st->na);
		rd = pol_egress_static(p, false, &st->nd);
		rk = pol_taint_keep(p, &st->nk);
		const struct pol_rule_budget *b;
		size_t i;

		st->quota = pol_egress_quota(p);
		st->taint_budget = pol_taint_budget(p);
		b = pol_egress_budgets(p, &st->nbudgets);
		for (i = 0; i < st->nbudgets && i < FW_MAX_BUDGETS; i++)
			st->budgets[i] = b[i].bytes;
	}
	if ((st->fa = calloc(st->na + 1, sizeof(*st->fa))) == NULL ||
	    (st->fd = calloc(st->nd + 1, sizeof(*st->fd))) == NULL ||
	    (st->fk = calloc(st->nk + 1, sizeof(*st->fk))) == NULL) {
		statics_free(st);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	st->na = sb_rules_to_fw(ra, st->na, 1, st->fa, &st->icmp);
	st->nd = sb_rules_to_fw(rd, st->nd, 0, st->fd, NULL);
	st->nk = sb_rules_to_fw(rk, st->nk, 1, st->fk, NULL);
	return 0;
}

/*
 * Puts s's static elements in the kernel from the policy it runs under
 * (and its taint restriction, if any). A policy that does not exist gives
 * a sandbox with no allows: fail closed. With update, s is registered
 * already (adopted after a restart) and only its statics are replaced,
 * keeping what it learned.
 */
int
sb_fw_apply(struct sbx *m, struct sandbox *s, int update, char *err,
    size_t errlen)
{
	const struct pol_policy *p = sb_policy(s);
	struct statics st;
	int rc = -1;

	if (p == NULL)
		log_warnx("sandbox %s: policy %s is not loaded: no static "
		    "allows", s->rec.id, s->rec.policy);
	if (statics_build(p, &st, err, errlen) == -1)
		return -1;
	s->fsb.quota_bytes = st.quota;
	s->fsb.icmp = st.icmp;
	/* The number of budgets is the kernel's from the sandbox's start
	 * (a reload changes their sizes, adds ones, never drops objects
	 * that flows may still be labelled with). */
	if (!update || st.nbudgets > s->fsb.nbudgets)
		s->fsb.nbudgets = (uint8_t)(st.nbudgets < FW_MAX_BUDGETS ?
		    st.nbudgets : FW_MAX_BUDGETS);
	memcpy(s->fsb.budget_bytes, st.budgets, sizeof(st.budgets));
	{
		size_t k;

		/* A budget a reload dropped: the object stays, with a size
		 * no flow reaches (no rule labels flows for it any more). */
		for (k = st.nbudgets; k < s->fsb.nbudgets; k++)
			s->fsb.budget_bytes[k] = UINT64_MAX / 2;
	}
	if (update) {
		rc = fw_sandbox_update(m->fw, &s->fsb, st.fa, st.na, st.fd,
		    st.nd, err, errlen);
		/* A tainted sandbox follows the new keep list too: one the
		 * reload narrowed must not stay reachable. */
		if (rc == 0 && s->rec.tainted)
			rc = fw_restrict_budget(m->fw, s->fsb.ifname, st.fk,
			    st.nk, st.taint_budget, err, errlen);
		statics_free(&st);
		return rc;
	}
	if (fw_sandbox_add(m->fw, &s->fsb, st.fa, st.na, st.fd, st.nd, err,
	    errlen) == -1)
		goto out;
	if (s->rec.tainted && fw_restrict_budget(m->fw, s->fsb.ifname, st.fk,
	    st.nk, st.taint_budget, err, errlen) == -1) {
		(void)fw_sandbox_del(m->fw, &s->fsb, NULL, 0);
		goto out;
	}
	rc = 0;
out:
	statics_free(&st);
	return rc;
}

/* ------------------------------------------------------------ the table */

int
sb_fw_setup(struct sbx *m, char *err, size_t errlen)
{
	const struct pol_config *c = m->cfg;
	struct fw_cidr *deny = NULL, *priv = NULL;
	struct pol_cidr *pv = NULL;
	size_t npv = 0, cap = 0;
	const struct pol_cidr *d4, *d6, *p4, *p6;
	struct fw_config fc;
	size_t nd4, nd6, np4, np6, i, k;
	char e[512];
	int rc = -1, r;

	d4 = pol_deny_ranges(AF_INET, &nd4);
	d6 = pol_deny_ranges(AF_INET6, &nd6);
	p4 = pol_private_ranges(AF_INET, &np4);
	p6 = pol_private_ranges(AF_INET6, &np6);
	if ((deny = calloc(nd4 + nd6 + 1, sizeof(*deny))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* The always-deny ranges go in whole: treat_as_public never lifts
	 * metadata, loopback, link-local or unspecified, and for the other
	 * always-denied classes the kernel errs on the closed side. */
	for (i = 0, k = 0; i < nd4; i++)
		pol_to_fw_cidr(&d4[i], &deny[k++]);
	for (i = 0; i < nd6; i++)
		pol_to_fw_cidr(&d6[i], &deny[k++]);
	/* treat_as_public reaches the kernel here: the classifier calls
	 * those addresses public, so the private sets must not hold them,
	 * or an allow the policy grants would still be refused. */
	for (i = 0; i < np4 + np6; i++) {
		if (sbx_cidr_subtract(i < np4 ? &p4[i] : &p6[i - np4],
		    c->treat_as_public, c->ntreat_as_public, &pv, &npv,
		    &cap) == -1) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	if ((priv = calloc(npv + 1, sizeof(*priv))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (i = 0; i < npv; i++)
		pol_to_fw_cidr(&pv[i], &priv[i]);

	memset(&fc, 0, sizeof(fc));
	memcpy(fc.svc4, &m->svc, 4);
	fc.dns_port = 53;
	fc.bridge_port = c->bridge_port;
	if (c->uplink != NULL) {
		if (strlen(c->uplink) >= sizeof(fc.uplink)) {
			snprintf(err, errlen, "uplink %s: name too long",
			    c->uplink);
			goto out;
		}
		snprintf(fc.uplink, sizeof(fc.uplink), "%s", c->uplink);
	}
	if (c->nflog_group > UINT16_MAX) {
		snprintf(err, errlen, "nflog_group %u out of range",
		    c->nflog_group);
		goto out;
	}
	fc.nflog_group = (uint16_t)c->nflog_group;
	pol_to_fw_cidr(&c->pool, &fc.pool);
	fc.deny = deny;
	fc.ndeny = nd4 + nd6;
	fc.private = priv;
	fc.nprivate = npv;
	/* The table's sets are sized for the most sandboxes the daemon
	 * runs; the learned sets for each at its learned cap. */
	fc.max_sandboxes = c->max_sandboxes;
	fc.max_learned = c->dns_max_learned;
	/* The name gate: the DNS process reads the queue (dnswire.c). */
	fc.gate = 1;
	if (c->gate_queue > UINT16_MAX) {
		snprintf(err, errlen, "gate_queue %u out of range",
		    c->gate_queue);
		goto out;
	}
	fc.gate_queue = (uint16_t)c->gate_queue;
	if ((m->fw = fw_new(err, errlen)) == NULL)
		goto out;
	if ((r = fw_init(m->fw, &fc, FW_ADOPT, e, sizeof(e))) == -1) {
		/* The old table cannot be adopted (another layout, another
		 * pool): start afresh; reconcile re-adds the sandboxes. */
		log_warnx("nftables: cannot adopt the existing table (%s): "
		    "replacing it", e);
		r = fw_init(m->fw, &fc, 0, err, errlen);
	}
	if (r == -1)
		goto out;
	log_info("nftables: table %s", r == 1 ? "adopted" : "created");
	rc = 0;
out:
	free(deny);
	free(priv);
	free(pv);
	return rc;
}
