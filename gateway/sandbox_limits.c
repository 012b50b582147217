/*
 * sandbox_limits.c: what the policy's `resources:` asks of a sandbox, in
 * the manager: its cgroup (gateway/cgroup.h) made with it, adopted by a
 * restarted daemon and removed with it; the kernel's counters of the
 * limits being hit (OOM kills, forks refused at pids.max), read once a
 * second and turned into findings; and idle expiry, the sandbox that saw
 * no DNS query, no new flow and no bridge request for resources.idle.
 *
 * Activity is one store of the loop's clock into the sandbox (sbx_touch_*,
 * O(1) by address or id); only the idle timer, once per idle period,
 * looks at it. The counters are two small cgroupfs reads per sandbox with
 * a cgroup per second.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/cgroup.h"
#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/sandbox_int.h"

#define EVENTS_MS	1000

static const struct pol_resources no_limits;

static const struct pol_resources *
res_of(const struct sandbox *s)
{
	const struct pol_policy *p = sb_policy(s);

	return p != NULL ? pol_policy_resources(p) : &no_limits;
}

static int
has_cg_limits(const struct pol_resources *r)
{
	return r->pids != 0 || r->memory != 0 || r->cpu_milli != 0;
}

static void events_tick(struct ev_loop *loop, void *arg);

void
sb_limits_init(struct sbx *m)
{
	char self[4096], err[256], name[CG_NAME_MAX];
	enum cg_mode mode;
	FILE *fp;
	size_t n;

	const char *root = m->cfg->cgroup_root;

	if ((mode = cg_detect(root)) == CG_NONE) {
		log_warnx("cgroups: no usable tree under %s: resources "
		    "limits cannot be applied", root);
		return;
	}
	if ((fp = fopen("/proc/self/cgroup", "re")) == NULL) {
		log_warn("/proc/self/cgroup");
		return;
	}
	n = fread(self, 1, sizeof(self) - 1, fp);
	self[n] = '\0';
	fclose(fp);
	cg_base_name(m->cfg->state_dir, name, sizeof(name));
	if ((m->cg = cg_new(root, mode, self, name, err, sizeof(err))) ==
	    NULL) {
		log_warnx("cgroups: %s: resources limits cannot be applied",
		    err);
		return;
	}
	{
		char dir[CG_PATH_MAX];
		size_t i;

		/* One line per tree: where this daemon's groups are (what a
		 * cleanup that outlives it reads). */
		for (i = 0; i < cg_ntrees(m->cg); i++)
			if (cg_base(m->cg, i, dir, sizeof(dir)) == 0)
				log_info("cgroups: %s, sandbox groups in %s",
				    mode == CG_V2 ? "v2" : "v1", dir);
	}
	if ((m->events_timer = ev_timer_add(m->loop, EVENTS_MS, events_tick,
	    m)) == NULL)
		log_warn("cgroups: events timer");
}

void
sb_limits_stop(struct sbx *m)
{
	if (m->events_timer != NULL)
		ev_timer_cancel(m->loop, m->events_timer);
	m->events_timer = NULL;
	cg_release(m->cg);
	cg_free(m->cg);
	m->cg = NULL;
}

int
sb_cg_make(struct sbx *m, struct sandbox *s, char *err, size_t errlen)
{
	const struct pol_resources *r = res_of(s);

	if (m->cg == NULL) {
		if (!has_cg_limits(r))
			return 0;
		snprintf(err, errlen, "policy %s sets resources limits and "
		    "this host offers no cgroup tree for them", s->rec.policy);
		return -1;
	}
	if (cg_create(m->cg, s->rec.id, r, err, errlen) == -1)
		return -1;
	s->cg = 1;
	memset(&s->ev_seen, 0, sizeof(s->ev_seen));
	return 0;
}

void
sb_cg_adopt(struct sbx *m, struct sandbox *s)
{
	char err[256];

	/* The group its predecessor made stays as it is, with its members
	 * and its limits; one that went missing is made again (empty). */
	if (m->cg == NULL)
		return;
	if (cg_exists(m->cg, s->rec.id)) {
		s->cg = 1;
		(void)cg_read_events(m->cg, s->rec.id, &s->ev_seen);
		return;
	}
	if (sb_cg_make(m, s, err, sizeof(err)) == -1)
		log_warnx("sandbox %s: cgroup: %s", s->rec.id, err);
}

void
sb_cg_drop(struct sbx *m, struct sandbox *s)
{
	if (s->cg && m->cg != NULL)
		(void)cg_remove(m->cg, s->rec.id, NULL, 0);
	s->cg = 0;
}

/* Findings for what the kernel counted since the last look. */
void
sb_cg_check(struct sbx *m, struct sandbox *s)
{
	const struct pol_resources *r;
	struct cg_events ev;
	char detail[160];

	if (!s->cg || m->cg == NULL ||
	    cg_read_events(m->cg, s->rec.id, &ev) == -1)
		return;
	r = res_of(s);
	if (ev.oom_kills > s->ev_seen.oom_kills) {
		snprintf(detail, sizeof(detail), "oom_kill=%llu (+%llu) "
		    "memory=%llu", (unsigned long long)ev.oom_kills,
		    (unsigned long long)(ev.oom_kills - s->ev_seen.oom_kills),
		    (unsigned long long)r->memory);
		log_info("sandbox.oom_kill id=%s %s", s->rec.id, detail);
		if (rec_async(m->rec, "finding", rec_finding_fields(s->rec.id,
		    "sandbox.oom_kill", "medium", detail)) == -1)
			log_warn("sandbox %s: finding", s->rec.id);
	}
	if (ev.pids_max > s->ev_seen.pids_max) {
		snprintf(detail, sizeof(detail), "refused_forks=%llu (+%llu) "
		    "pids=%u", (unsigned long long)ev.pids_max,
		    (unsigned long long)(ev.pids_max - s->ev_seen.pids_max),
		    r->pids);
		log_info("sandbox.pids_limit id=%s %s", s->rec.id, detail);
		if (rec_async(m->rec, "finding", rec_finding_fields(s->rec.id,
		    "sandbox.pids_limit", "medium", detail)) == -1)
			log_warn("sandbox %s: finding", s->rec.id);
	}
	s->ev_seen = ev;
}

static void
events_tick(struct ev_loop *loop, void *arg)
{
	struct sbx *m = arg;
	uint32_t i;

	(void)loop;
	m->events_timer = NULL;
	for (i = 0; i < m->nslots; i++)
		if (m->by_slot[i] != NULL)
			sb_cg_check(m, m->by_slot[i]);
	if ((m->events_timer = ev_timer_add(m->loop, EVENTS_MS, events_tick,
	    m)) == NULL)
		log_warn("cgroups: events timer");
}

void
sb_limits_reapply(struct sbx *m, struct sandbox *s)
{
	char err[256];

	sb_idle_arm(m, s);
	sb_budget_arm(m, s);
	if (!s->cg || m->cg == NULL)
		return;
	/* cg_create on an existing group only writes the limits. */
	if (cg_create(m->cg, s->rec.id, res_of(s), err, sizeof(err)) == -1) {
		s->cg = cg_exists(m->cg, s->rec.id);
		log_warnx("sandbox %s: limits: %s", s->rec.id, err);
		if (rec_async(m->rec, "finding", rec_finding_fields(s->rec.id,
		    "sandbox.limits_failed", "high", err)) == -1)
			log_warn("sandbox %s: finding", s->rec.id);
	}
}

static void
orphan(const char *id, void *arg)
{
	struct sbx *m = arg;
	char err[256];
	int n, i;

	if (sb_find(m, id) != NULL)
		return;
	if (sb_event(m, "sandbox.orphan", id, NULL, "cgroup %s: removing "
	    "(no sandbox has it)", id) == -1)
		return;
	n = cg_kill(m->cg, id);
	/* At start, before anything is served: a short bounded wait for
	 * the killed to leave the group (exit is not instant). */
	for (i = 0; i < 50 && cg_members(m->cg, id) > 0; i++)
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	if (cg_remove(m->cg, id, err, sizeof(err)) == -1)
		log_warnx("cgroup %s stays (%d killed): %s", id, n, err);
	else
		log_info("sandbox.orphan cgroup %s removed (%d killed)", id, n);
}

void
sb_cg_orphans(struct sbx *m)
{
	if (m->cg != NULL)
		cg_foreach(m->cg, orphan, m);
}

/* ------------------------------------------------------------ idle */

static void
on_idle(struct ev_loop *loop, void *arg)
{
	struct sandbox *s = arg;
	struct sbx *m = s->m;
	uint64_t idle = res_of(s)->idle_s * 1000, now = ev_now_ms(), quiet;
	char err[256];

	(void)loop;
	s->idle_timer = NULL;
	if (idle == 0)
		return;
	quiet = now - s->active_ms;
	if (quiet < idle) {
		if ((s->idle_timer = ev_timer_add(m->loop, idle - quiet,
		    on_idle, s)) == NULL)
			log_warn("sandbox %s: idle timer", s->rec.id);
		return;
	}
	if (sb_remove(m, s, "sandbox.expire", "idle", err, sizeof(err)) ==
	    0) {
		m->expires++;
		return;
	}
	if ((s->idle_timer = ev_timer_add(m->loop, 10000, on_idle, s)) ==
	    NULL)
		log_warn("sandbox %s: idle timer", s->rec.id);
}

void
sb_idle_arm(struct sbx *m, struct sandbox *s)
{
	uint64_t idle = res_of(s)->idle_s * 1000;

	s->active_ms = ev_now_ms();
	if (idle == 0 || s->idle_timer != NULL)
		return;
	if ((s->idle_timer = ev_timer_add(m->loop, idle, on_idle, s)) == NULL)
		log_warn("sandbox %s: idle timer", s->rec.id);
}

void
sbx_touch_addr4(const struct sbx *m, const uint8_t addr4[4])
{
	int64_t slot;
	struct sandbox *s;

	if (m == NULL)
		return;
	slot = sbx_pool_slot(m->pool4, m->prefix, addr4);
	if (slot >= 0 && (uint64_t)slot < m->nslots &&
	    (s = m->by_slot[slot]) != NULL &&
	    memcmp(&s->spec.sandbox_addr, addr4, 4) == 0)
		s->active_ms = ev_now_ms();
}

void
sbx_touch_id(const struct sbx *m, const char *id)
{
	struct sandbox *s;

	if (m != NULL && (s = sb_find(m, id)) != NULL)
		s->active_ms = ev_now_ms();
}

int
sbx_exec_limits(const struct sbx *m, const char *id, struct sbx_limits *out)
{
	const struct sandbox *s;
	size_t i;

	memset(out, 0, sizeof(*out));
	if ((s = sb_find(m, id)) == NULL) {
		errno = ENOENT;
		return -1;
	}
	out->timeout_s = res_of(s)->timeout_s;
	if (!s->cg || m->cg == NULL) {
		/* Limits it cannot be held to: no command, rather than one
		 * without them. */
		if (has_cg_limits(res_of(s))) {
			errno = EIO;
			return -1;
		}
		return 0;
	}
	for (i = 0; i < cg_ntrees(m->cg) && i < SBX_CGROUPS_MAX; i++)
		if (cg_dir(m->cg, i, id, out->cgroup[i],
		    sizeof(out->cgroup[i])) == 0)
			out->ncgroups++;
	return 0;
}
