/*
 * egress_budget.c: the byte budgets of egress rules in a policy file
 * (`budget:` and `window:` on an egress.allow rule) and their accessors.
 *
 * Why a file of its own: a rule budget is a kernel object in every
 * sandbox of the policy, so the loader bounds how many there are and
 * refuses, where they are written, the budgets the kernel could not
 * charge (none on deny or keep rules, none on ICMP, none of 0 bytes);
 * the rule loader (load.c) calls ybudget_key for each rule.
 */
#include <netinet/in.h>

#include <string.h>

#include "policy/internal.h"

/* ybudget_key: a rule's `budget:` (a size, at least one byte) and its
 * `window:` (a duration; without it the budget lasts the sandbox's
 * life), on egress.allow rules only: a deny sends nothing and the keep
 * list has the taint's own budget (mcp.taint.budget). At most
 * POL_MAX_RULE_BUDGETS rules carry one: each is a kernel quota object in
 * every sandbox of the policy. */
void
ybudget_key(struct ywalk *w, struct pol_policy *p, const struct ynode *n,
    struct erule *r, bool budgets)
{
	const struct ynode *bg = yget(n, "budget"), *wn = yget(n, "window");
	struct pol_rule_budget rb;

	r->budget = -1;
	if (bg == NULL && wn == NULL)
		return;
	if (!budgets) {
		yerr(w, bg != NULL ? bg : wn, "budget and window apply to "
		    "egress.allow rules only (a tainted sandbox's budget is "
		    "mcp.taint.budget)");
		return;
	}
	if (bg == NULL) {
		yerr(w, wn, "window needs a budget on the same rule");
		return;
	}
	/* The kernel charges flows by port (ICMP has none to key on). */
	if (r->proto == IPPROTO_ICMP) {
		yerr(w, bg, "budget applies to tcp and udp rules");
		return;
	}
	memset(&rb, 0, sizeof(rb));
	if (ysize(w, bg, &rb.bytes) == -1)
		return;
	if (rb.bytes == 0) {
		yerr(w, bg, "budget must be at least one byte (omit it "
		    "for none; deny the rule to send nothing)");
		return;
	}
	if (wn != NULL && (yduration(w, wn, &rb.window_s) == -1 ||
	    rb.window_s < POL_BUDGET_WINDOW_MIN_S)) {
		if (rb.window_s == 0 && wn->kind == Y_SCALAR &&
		    pol_parse_duration(wn->str, &rb.window_s) == 0)
			yerr(w, wn, "window must be at least %us",
			    POL_BUDGET_WINDOW_MIN_S);
		return;
	}
	if (p->nrbudgets >= POL_MAX_RULE_BUDGETS) {
		yerr(w, bg, "at most %d egress.allow rules may carry a "
		    "budget", POL_MAX_RULE_BUDGETS);
		return;
	}
	r->budget = (int)p->nrbudgets;
	p->rbudgets[p->nrbudgets++] = rb;
}

const struct pol_rule_budget *
pol_egress_budgets(const struct pol_policy *p, size_t *n)
{
	*n = p->nrbudgets;
	return p->rbudgets;
}

uint64_t
pol_taint_budget(const struct pol_policy *p)
{
	return p->taint_budget;
}
