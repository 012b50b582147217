/*
 * rec_space.c: the recorder's side of a log volume that fills up. Two
 * things must hold however full it gets. The operator hears of it before
 * it is full: the volume is looked at every few seconds and falling under
 * the configured free space is a finding (once per crossing) and a metric.
 * And removing a sandbox never waits for the log: when the record of a
 * removal cannot be committed first, the removal goes ahead and its record
 * is kept here, submitted again until the log takes it (at close it goes as
 * an async record, which the log writes or counts in a log.gap). The log's
 * own reserve (audit/reserve.c) makes that rare; this makes it harmless.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/record_int.h"

struct later {
	struct later	*next;
	struct rec_space *sp;
	char		 kind[32];
	json_t		*fields;
	int		 inflight;
};

struct rec_space {
	struct rec		*r;
	struct ev_loop		*loop;
	struct aud_log		*log;		/* NULL while detached */
	const struct pol_config	*cfg;
	char			*db;
	struct ev_timer		*check, *retry;
	int			 low;		/* under the threshold now */
	int			 low_raised;	/* its finding is out */
	uint64_t		 released_seen;
	/* The records held: they outlive a suspension of the recorder
	 * (the reopened log takes them). */
	struct {
		struct later	*head;
		size_t		 n;
	}			 held;
};

static void	on_retry(struct ev_loop *loop, void *arg);
static void	later_submit(struct rec_space *sp, struct later *it);

/* Held records are tried again a while later, not at once: the log that
 * refused one is unlikely to take it a moment after. */
static void
arm_retry(struct rec_space *sp)
{
	if (sp->retry == NULL && (sp->retry = ev_timer_add(sp->loop,
	    REC_LATER_MS, on_retry, sp)) == NULL)
		log_warn("audit: retry timer");
}

static uint64_t
threshold(const struct rec_space *sp, uint64_t total)
{
	uint64_t pct = total / 100 * sp->cfg->audit_min_free_percent;
	uint64_t abs = (uint64_t)sp->cfg->audit_min_free_mib << 20;

	return pct > abs ? pct : abs;
}

static void
noop_done(void *arg, int ok, uint64_t seq)
{
	(void)arg;
	(void)ok;
	(void)seq;
}

static void
check_space(struct rec_space *sp)
{
	struct aud_space_info si;
	uint64_t avail, total, thr;
	char detail[320];

	if (aud_volume_space(sp->db, &avail, &total) == 0) {
		thr = threshold(sp, total);
		sp->low = avail < thr;
		if (sp->low && !sp->low_raised) {
			snprintf(detail, sizeof(detail), "audit volume of %s: "
			    "%" PRIu64 " bytes free of %" PRIu64 ", under "
			    "%" PRIu64, sp->db, avail, total, thr);
			log_warnx("%s", detail);
			if (rec_async(sp->r, "finding", rec_finding_fields(NULL,
			    "audit.volume_low", "high", detail)) == -1)
				log_warn("audit: volume finding");
			sp->low_raised = 1;
		} else if (!sp->low && sp->low_raised && avail - thr >=
		    thr / 10) {
			/* Re-armed with some room, so that a volume hovering
			 * at the threshold does not raise it every look. */
			log_info("audit volume of %s: %" PRIu64 " bytes free "
			    "again", sp->db, avail);
			sp->low_raised = 0;
		}
	}
	aud_space(sp->log, &si);
	if (si.released > sp->released_seen) {
		sp->released_seen = si.released;
		snprintf(detail, sizeof(detail), "audit volume of %s is full: "
		    "the reserve is in use; only lifecycle records are "
		    "written, the rest is counted in log.gap (disk_full)",
		    sp->db);
		log_warnx("%s", detail);
		/* Durable: a constrained log writes those, not async ones. */
		if (rec_durable(sp->r, "finding", rec_finding_fields(NULL,
		    "audit.volume_full", "high", detail), noop_done,
		    NULL) == -1)
			log_warn("audit: volume finding");
	}
}

static void
on_check(struct ev_loop *loop, void *arg)
{
	struct rec_space *sp = arg;

	sp->check = NULL;
	check_space(sp);
	if ((sp->check = ev_timer_add(loop, REC_SPACE_MS, on_check, sp)) ==
	    NULL)
		log_warn("audit: volume timer");
}

struct rec_space *
rec_space_new(struct rec *r, struct ev_loop *loop,
    const struct pol_config *cfg, const char *db_path)
{
	struct rec_space *sp;

	if ((sp = calloc(1, sizeof(*sp))) == NULL)
		return NULL;
	/* The database itself: statvfs of any file names its volume. */
	if ((sp->db = strdup(db_path)) == NULL) {
		free(sp);
		return NULL;
	}
	sp->r = r;
	sp->loop = loop;
	sp->cfg = cfg;
	return sp;
}

void
rec_space_attach(struct rec_space *sp, struct aud_log *log)
{
	sp->log = log;
	on_check(sp->loop, sp);
	/* Held while the log was closed: submitted now. */
	if (sp->held.head != NULL)
		on_retry(sp->loop, sp);
}

static void
later_unlink(struct later *it)
{
	struct rec_space *sp = it->sp;
	struct later **pp;

	for (pp = &sp->held.head; *pp != NULL; pp = &(*pp)->next)
		if (*pp == it) {
			*pp = it->next;
			sp->held.n--;
			return;
		}
}

static void
later_done(void *arg, int ok, uint64_t seq)
{
	struct later *it = arg;

	(void)seq;
	it->inflight = 0;
	if (ok) {
		log_info("%s: recorded after the action", it->kind);
		later_unlink(it);
		json_decref(it->fields);
		free(it);
		return;
	}
	if (it->sp->log != NULL)
		arm_retry(it->sp);
}

/* Submits the held record it unless it is in flight; arms the retry
 * timer when the log refuses it at once. */
static void
later_submit(struct rec_space *sp, struct later *it)
{
	if (it->inflight)
		return;
	if (aud_submit_durable(sp->log, it->kind, json_incref(it->fields),
	    later_done, it) == 0)
		it->inflight = 1;
	else
		arm_retry(sp);
}

static void
on_retry(struct ev_loop *loop, void *arg)
{
	struct rec_space *sp = arg;
	struct later *it;

	(void)loop;
	sp->retry = NULL;
	for (it = sp->held.head; it != NULL; it = it->next)
		later_submit(sp, it);
}

void
rec_commit_after(struct rec *r, const char *kind, json_t *fields)
{
	struct rec_space *sp = rec_space_of(r);

	if (sp == NULL) {
		/* No recorder: refused, and said in the daemon's log. */
		log_warnx("%s: done, and no audit log to record it", kind);
		json_decref(fields);
		return;
	}
	rec_space_hold(sp, kind, fields);
}

void
rec_space_hold(struct rec_space *sp, const char *kind, json_t *fields)
{
	struct later *it;

	if (fields == NULL || sp->held.n >= REC_LATER_MAX ||
	    (it = calloc(1, sizeof(*it))) == NULL) {
		/* Async: written, or counted in a log.gap. */
		(void)rec_async(sp->r, kind, fields);
		return;
	}
	it->sp = sp;
	snprintf(it->kind, sizeof(it->kind), "%s", kind);
	it->fields = fields;
	it->next = sp->held.head;
	sp->held.head = it;
	sp->held.n++;
	log_warnx("%s: done before its record; recorded when the log takes "
	    "it", kind);
	if (sp->log != NULL)
		later_submit(sp, it);
}

void
rec_space_detach(struct rec_space *sp)
{
	struct later *it, *next;

	if (sp->log == NULL)
		return;
	ev_timer_cancel(sp->loop, sp->check);
	ev_timer_cancel(sp->loop, sp->retry);
	sp->check = sp->retry = NULL;
	/* Let what is in flight finish, then hand the rest to the closing
	 * log as async records: it writes them or counts them as lost. One
	 * still in flight (the writer stopped) stays held, for its
	 * completion, which aud_close runs. */
	(void)aud_sync(sp->log);
	aud_dispatch(sp->log);
	for (it = sp->held.head; it != NULL; it = next) {
		next = it->next;
		if (it->inflight)
			continue;
		later_unlink(it);
		if (aud_submit_async(sp->log, it->kind, it->fields) == -1)
			log_warnx("%s: not recorded", it->kind);
		free(it);
	}
	sp->log = NULL;
}

void
rec_space_free(struct rec_space *sp)
{
	struct later *it, *next;

	if (sp == NULL)
		return;
	rec_space_detach(sp);
	for (it = sp->held.head; it != NULL; it = next) {
		next = it->next;
		log_warnx("%s: not recorded", it->kind);
		json_decref(it->fields);
		free(it);
	}
	free(sp->db);
	free(sp);
}

void
rec_space_metrics_print(const struct rec_space *sp, FILE *fp)
{
	struct aud_space_info si;
	uint64_t avail = 0, total = 0;
	int known;

	known = aud_volume_space(sp->db, &avail, &total) == 0;
	aud_space(sp->log, &si);
	fprintf(fp, "# HELP sluice_audit_volume_free_bytes Free space on the "
	    "audit log's volume.\n"
	    "# TYPE sluice_audit_volume_free_bytes gauge\n");
	if (known)
		fprintf(fp, "sluice_audit_volume_free_bytes %" PRIu64 "\n"
		    "# HELP sluice_audit_volume_size_bytes Size of the audit "
		    "log's volume.\n"
		    "# TYPE sluice_audit_volume_size_bytes gauge\n"
		    "sluice_audit_volume_size_bytes %" PRIu64 "\n"
		    "# HELP sluice_audit_volume_low_threshold_bytes Free space "
		    "under which the volume is low.\n"
		    "# TYPE sluice_audit_volume_low_threshold_bytes gauge\n"
		    "sluice_audit_volume_low_threshold_bytes %" PRIu64 "\n",
		    avail, total, threshold(sp, total));
	fprintf(fp,
	    "# HELP sluice_audit_volume_low 1 while free space is under the "
	    "threshold.\n"
	    "# TYPE sluice_audit_volume_low gauge\n"
	    "sluice_audit_volume_low %d\n"
	    "# HELP sluice_audit_constrained 1 while the log writes only "
	    "lifecycle records (its volume was full).\n"
	    "# TYPE sluice_audit_constrained gauge\n"
	    "sluice_audit_constrained %d\n"
	    "# HELP sluice_audit_reserve_bytes Space held back for lifecycle "
	    "records.\n"
	    "# TYPE sluice_audit_reserve_bytes gauge\n"
	    "sluice_audit_reserve_bytes %" PRIu64 "\n"
	    "# HELP sluice_audit_disk_full_skipped_total Records not written "
	    "for want of space (in log.gap, disk_full).\n"
	    "# TYPE sluice_audit_disk_full_skipped_total counter\n"
	    "sluice_audit_disk_full_skipped_total %" PRIu64 "\n"
	    "# HELP sluice_audit_pending_records Records of actions already "
	    "done that the log has not taken yet.\n"
	    "# TYPE sluice_audit_pending_records gauge\n"
	    "sluice_audit_pending_records %zu\n",
	    known ? avail < threshold(sp, total) : sp->low, si.constrained,
	    si.reserve_held ? si.reserve_bytes : 0, si.skipped, sp->held.n);
}
