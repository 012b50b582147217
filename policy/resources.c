/*
 * resources.c: a policy's `resources:` section, what one sandbox may hold
 * of the machine. It is apart from load.c because it is the one section
 * whose values the kernel enforces rather than sluiced's deciders (the
 * cgroup limits of gateway/cgroup.c, the command timeout of the CLI, the
 * idle expiry of the manager), and its value syntax (cores with decimals)
 * is its own. Pure, like the rest of policy/: every error is reported
 * with FILE:LINE:COL and nothing of a malformed section is kept.
 */
#include <string.h>

#include "policy/internal.h"

int
pol_parse_cpu(const char *s, uint32_t *milli)
{
	uint64_t whole = 0, frac = 0;
	size_t i = 0, nd = 0, nf = 0;

	if (s == NULL)
		return -1;
	for (; s[i] >= '0' && s[i] <= '9'; i++, nd++) {
		if (nd >= 7)
			return -1;
		whole = whole * 10 + (uint64_t)(s[i] - '0');
	}
	if (nd == 0 || (nd > 1 && s[0] == '0'))
		return -1;
	if (s[i] == '.') {
		for (i++; s[i] >= '0' && s[i] <= '9'; i++, nf++) {
			if (nf >= 3)
				return -1;
			frac = frac * 10 + (uint64_t)(s[i] - '0');
		}
		if (nf == 0)
			return -1;
		for (; nf < 3; nf++)
			frac *= 10;
	}
	if (s[i] != '\0')
		return -1;
	whole = whole * 1000 + frac;
	if (whole < POL_RES_CPU_MIN || whole > POL_RES_CPU_MAX)
		return -1;
	*milli = (uint32_t)whole;
	return 0;
}

void
yresources(struct ywalk *w, const struct ynode *n, struct pol_resources *out)
{
	static const char *const keys[] = { "pids", "memory", "cpu",
	    "timeout", "idle", NULL };
	struct pol_resources r;
	const struct ynode *v;
	uint64_t u;
	size_t before = w->nerr;

	memset(&r, 0, sizeof(r));
	if (!ycheck_map(w, n, "resources", keys))
		return;
	if ((v = yget(n, "pids")) != NULL &&
	    yuint(w, v, POL_RES_PIDS_MAX, &u) == 0) {
		if (u == 0)
			yerr(w, v, "resources.pids must be at least 1");
		r.pids = (uint32_t)u;
	}
	if ((v = yget(n, "memory")) != NULL && ysize(w, v, &u) == 0) {
		if (u < POL_RES_MEMORY_MIN)
			yerr(w, v, "resources.memory must be at least 1MiB");
		r.memory = u;
	}
	/* A plain integer reads as a scalar too; cores are never quoted
	 * in examples, but a quoted "1.5" means the same. */
	if ((v = yget(n, "cpu")) != NULL && (v->kind != Y_SCALAR ||
	    pol_parse_cpu(v->str, &r.cpu_milli) == -1))
		yerr(w, v, "invalid cpu \"%s\" (cores, e.g. 1, 1.5, 0.25; "
		    "0.01 to 1024)", v->kind == Y_SCALAR ? v->str :
		    ykind_name(v->kind));
	if ((v = yget(n, "timeout")) != NULL && yduration(w, v, &u) == 0) {
		if (u == 0)
			yerr(w, v, "resources.timeout must be at least 1s");
		r.timeout_s = u;
	}
	if ((v = yget(n, "idle")) != NULL && yduration(w, v, &u) == 0) {
		if (u == 0)
			yerr(w, v, "resources.idle must be at least 1s");
		r.idle_s = u;
	}
	if (w->nerr == before)
		*out = r;
}

const struct pol_resources *
pol_policy_resources(const struct pol_policy *p)
{
	return &p->resources;
}
