/*
 * sandbox_budget.c: the parent's side of byte budgets (netns/fw_budget.c
 * enforces them in the kernel): windows and the record of a spent budget.
 *
 * A rule's `window:` is the parent's: the kernel counts, and when a
 * window ends the parent resets that budget's quota object (one netlink
 * request, atomic) and records it (sandbox.budget_window, with what was
 * spent). Windows are kept on the loop's monotonic clock from the moment
 * the sandbox's objects exist, so a window is never shorter than
 * written; a late timer only makes one longer. One timer per sandbox,
 * at its nearest window end; sandboxes without windows have none.
 *
 * A spent budget is recorded once per window: the first denial of it that
 * nflog reports (within the per-link log budget) makes the parent look at
 * the sandbox's quota objects, at most once a second per sandbox, and
 * record a finding for each budget newly over its size. So what a sandbox
 * can make the parent spend is bounded by that rate and by its 17 objects.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/sandbox_int.h"

#define LOOK_MS		1000
#define TAINT_BIT	(1u << 31)

static void on_window(struct ev_loop *loop, void *arg);

static const struct pol_rule_budget *
budgets_of(const struct sandbox *s, size_t *n)
{
	const struct pol_policy *p = sb_policy(s);

	*n = 0;
	if (p == NULL)
		return NULL;
	return pol_egress_budgets(p, n);
}

static void
arm_next(struct sbx *m, struct sandbox *s)
{
	uint64_t now = ev_now_ms(), next = 0;
	size_t k;

	for (k = 0; k < s->fsb.nbudgets; k++)
		if (s->budget_next_ms[k] != 0 && (next == 0 ||
		    s->budget_next_ms[k] < next))
			next = s->budget_next_ms[k];
	if (next == 0 || s->budget_timer != NULL)
		return;
	if ((s->budget_timer = ev_timer_add(m->loop, next > now ? next - now :
	    0, on_window, s)) == NULL)
		log_warn("sandbox %s: budget window timer", s->rec.id);
}

void
sb_budget_arm(struct sbx *m, struct sandbox *s)
{
	const struct pol_rule_budget *b;
	uint64_t now = ev_now_ms();
	size_t n, k;

	b = budgets_of(s, &n);
	for (k = 0; k < FW_MAX_BUDGETS; k++) {
		if (k >= n || k >= s->fsb.nbudgets || b[k].window_s == 0)
			s->budget_next_ms[k] = 0;
		else if (s->budget_next_ms[k] == 0)
			s->budget_next_ms[k] = now + b[k].window_s * 1000;
	}
	arm_next(m, s);
}

void
sb_budget_cancel(struct sandbox *s)
{
	if (s->budget_timer != NULL)
		ev_timer_cancel(s->m->loop, s->budget_timer);
	s->budget_timer = NULL;
}

static void
on_window(struct ev_loop *loop, void *arg)
{
	struct sandbox *s = arg;
	struct sbx *m = s->m;
	const struct pol_rule_budget *b;
	uint64_t now = ev_now_ms(), used = 0;
	char err[256];
	size_t n, k;

	(void)loop;
	s->budget_timer = NULL;
	b = budgets_of(s, &n);
	for (k = 0; k < s->fsb.nbudgets && k < n; k++) {
		if (s->budget_next_ms[k] == 0 || s->budget_next_ms[k] > now)
			continue;
		if (fw_budget_reset(m->fw, s->fsb.ifname, (unsigned)k, &used,
		    err, sizeof(err)) == -1) {
			/* Not reset: the budget stays spent (denies), and
			 * the next look tries again. */
			log_warnx("sandbox %s: budget %zu: %s", s->rec.id, k,
			    err);
			s->budget_next_ms[k] = now + 1000;
			continue;
		}
		s->budget_spent &= ~(1u << k);
		s->budget_next_ms[k] = now + b[k].window_s * 1000;
		(void)sb_event(m, "sandbox.budget_window", s->rec.id, s,
		    "egress.allow[%u] budget %llu bytes: window of %llus "
		    "ended with %llu bytes sent", b[k].rule_index,
		    (unsigned long long)b[k].bytes,
		    (unsigned long long)b[k].window_s,
		    (unsigned long long)used);
	}
	arm_next(m, s);
}

/* One finding for budget k (FW_BUDGET_TAINT: the taint's). */
static void
spent(const struct sbx *m, struct sandbox *s, unsigned k, uint64_t used,
    uint64_t bytes, const struct pol_rule_budget *b)
{
	char detail[256];

	if (k == FW_BUDGET_TAINT)
		snprintf(detail, sizeof(detail), "mcp.taint budget of %llu "
		    "bytes spent (%llu counted): further egress is denied",
		    (unsigned long long)bytes, (unsigned long long)used);
	else
		snprintf(detail, sizeof(detail), "egress.allow[%u] budget of "
		    "%llu bytes spent (%llu counted%s): its flows are denied "
		    "%s", b->rule_index, (unsigned long long)bytes,
		    (unsigned long long)used, b->window_s ? " this window" :
		    "", b->window_s ? "until the window ends" :
		    "for the sandbox's life");
	log_info("egress.budget_exhausted id=%s %s", s->rec.id, detail);
	if (rec_async(m->rec, "finding", rec_finding_fields(s->rec.id,
	    "egress.budget_exhausted", "medium", detail)) == -1)
		log_warn("sandbox %s: finding", s->rec.id);
}

void
sbx_budget_denied(const struct sbx *m, const char *id)
{
	const struct pol_rule_budget *b;
	struct sandbox *s;
	uint64_t now = ev_now_ms(), used, bytes;
	size_t n, k;

	if (m == NULL || m->fw == NULL || (s = sb_find(m, id)) == NULL)
		return;
	if (s->budget_look_ms != 0 && now - s->budget_look_ms < LOOK_MS)
		return;
	s->budget_look_ms = now;
	b = budgets_of(s, &n);
	for (k = 0; k < s->fsb.nbudgets && k < n; k++) {
		if ((s->budget_spent & (1u << k)) ||
		    fw_budget_used(m->fw, s->fsb.ifname, (unsigned)k, &used,
		    &bytes, NULL, 0) == -1 || used < bytes)
			continue;
		s->budget_spent |= 1u << k;
		spent(m, s, (unsigned)k, used, bytes, &b[k]);
	}
	if (!(s->budget_spent & TAINT_BIT) && s->rec.tainted &&
	    fw_budget_used(m->fw, s->fsb.ifname, FW_BUDGET_TAINT, &used,
	    &bytes, NULL, 0) == 0 && used >= bytes) {
		s->budget_spent |= TAINT_BIT;
		spent(m, s, FW_BUDGET_TAINT, used, bytes, NULL);
	}
}

int
sbx_learn_budget(const struct sbx *m, struct fw_elem *e)
{
	struct pol_net_rule r[32];
	const struct pol_policy *p;
	struct sbx_view v;
	struct sandbox *s;
	size_t n, i;

	e->budget = 0;
	if (m == NULL || sbx_lookup_ifname(m, e->ifname, &v) == -1 ||
	    (s = sb_find(m, v.id)) == NULL)
		return 0;	/* fw_learn refuses it: no such sandbox */
	if ((p = sb_policy(s)) == NULL || e->name == NULL)
		return 0;
	n = pol_egress_ports_for_name(p, e->name, s->rec.tainted != 0, r,
	    sizeof(r) / sizeof(r[0]));
	for (i = 0; i < n; i++) {
		uint16_t lo = r[i].port_lo, hi = r[i].port_hi;

		if (lo == 0 && hi == 0)
			hi = 65535;
		if (r[i].proto != e->proto || e->port_lo < lo ||
		    e->port_hi > hi)
			continue;
		if (r[i].budget > s->fsb.nbudgets) {
			/* A budget the kernel has no object for would
			 * count nothing: refused, not learned uncounted. */
			errno = EPERM;
			return -1;
		}
		e->budget = r[i].budget;
		return 0;
	}
	return 0;
}
