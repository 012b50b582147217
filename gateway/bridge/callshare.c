/*
 * callshare: the part of a call's decision that the fleet's hosts share.
 * A call under budgets of scope subject or policy reserves them in the
 * fleet's database (gateway/bridge/shared.h) before its local budgets are
 * read, and is decided again with the counts the database returned; it
 * exists apart from call.c so that the state machine there stays one
 * path, with one step more (CALL_RESERVING). A database that does not
 * answer in time denies the call as shared_state_unavailable, recorded
 * like any denial; calls under no shared budget never wait for it.
 */
#include <stdio.h>
#include <string.h>

#include "gateway/bridge/br_int.h"

/* A budget whose count the fleet's hosts share (with a fleet configured:
 * without one, every budget is this host's). */
bool
br_call_is_shared(const struct br_call *c, enum pol_budget_scope s)
{
	return c->br != NULL && c->br->shared != NULL && s != POL_SCOPE_SANDBOX;
}

static void
deny_unavailable(struct br_call *c)
{
	br_call_deny(c, "budget", POL_REASON_SHARED_STATE_UNAVAILABLE, "This call's "
	    "budget is shared by the fleet and could not be checked; try "
	    "again later.");
}

/* What c holds in the fleet's database goes back (a denial, or a wait for
 * approval, after which it is reserved again). */
void
br_call_shared_drop(struct br_call *c)
{
	if (c->sheld)
		br_shared_settle(c->br->shared, c->sres, c->nsres, 0, 1);
	c->sheld = false;
	c->nsres = 0;
	c->sexhausted = 0;
}

static void
on_reserved(void *arg, enum fleet_resv_outcome o, const struct fleet_resv *r,
    size_t n, size_t which)
{
	struct br_call *c = arg;
	size_t i;

	c->sjob = NULL;
	c->state = CALL_NEW;
	if (o == FLEET_RESV_UNAVAILABLE || n != c->nsres) {
		c->nsres = 0;
		deny_unavailable(c);
		return;
	}
	if (o == FLEET_RESV_EXHAUSTED)
		c->sexhausted = which + 1;
	else {
		for (i = 0; i < n; i++) {
			c->sres[i].used_calls = r[i].used_calls;
			c->sres[i].used_cost = r[i].used_cost;
			c->sres[i].used_result_bytes = r[i].used_result_bytes;
			c->sres[i].window_at = r[i].window_at;
		}
		c->sheld = true;
	}
	/* Decided again, now with the fleet's counts. */
	br_call_redecide(c);
}

/*
 * The budgets of first that the fleet shares are reserved in its database
 * before anything local, with the limits of the first pass (the upsert
 * adds only where they still allow it); the call comes back to reserve()
 * with the answer. true: c is in other hands (reserving, or denied).
 */
bool
br_call_shared_pending(struct br_call *c, const struct pol_tool_decision *first,
    uint64_t now_s)
{
	const struct pol_reservation *p;
	struct fleet_resv *r;
	size_t i;

	if (c->sheld || c->sexhausted != 0)
		return false;
	c->nsres = 0;
	for (i = 0; i < first->nres; i++) {
		p = &first->res[i];
		if (!br_call_is_shared(c, p->scope))
			continue;
		r = &c->sres[c->nsres++];
		memset(r, 0, sizeof(*r));
		r->scope = p->scope == POL_SCOPE_SUBJECT ? FLEET_SCOPE_SUBJECT :
		    FLEET_SCOPE_POLICY;
		r->owner = br_call_owner(c, p->scope);
		r->name = p->budget;
		r->window_s = p->window_s;
		r->calls = p->calls;
		r->cost = p->cost;
		r->limit_calls = p->limit_calls;
		r->limit_cost = p->limit_cost;
		r->limit_result_bytes = p->limit_result_bytes;
	}
	if (c->nsres == 0)
		return false;
	c->state = CALL_RESERVING;
	if ((c->sjob = br_shared_reserve(c->br->shared, c->sres, c->nsres,
	    now_s, on_reserved, c)) == NULL) {
		c->state = CALL_NEW;
		c->nsres = 0;
		deny_unavailable(c);
	}
	return true;
}

/* The use of the k-th shared budget as the fleet's database had it: a
 * used-up one at its limits, so that the policy refuses in its words. */
void
br_call_shared_use(const struct br_call *c, size_t k, const char *name,
    struct pol_budget_use *use)
{
	const struct fleet_resv *r = &c->sres[k];

	memset(use, 0, sizeof(*use));
	use->name = name;
	if (k >= c->nsres)
		return;
	if (c->sexhausted == k + 1) {
		use->calls = r->limit_calls;
		use->cost = r->limit_cost;
		use->result_bytes = r->limit_result_bytes;
	} else if (c->sheld) {
		use->calls = r->used_calls;
		use->cost = r->used_cost;
		use->result_bytes = r->used_result_bytes;
	}
}

