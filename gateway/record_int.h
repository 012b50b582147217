/*
 * record_int: what the files of the recorder (gateway/record.c,
 * gateway/rec_tally.c, gateway/rec_space.c) share and nobody else uses;
 * the recorder's interface is gateway/record.h.
 */
#ifndef SLUICE_GATEWAY_RECORD_INT_H
#define SLUICE_GATEWAY_RECORD_INT_H

#include <stdio.h>

#include "audit/audit.h"
#include "gateway/ev.h"
#include "policy/policy.h"

struct rec;
struct rec_tally;
struct rec_space;

/* rec_is_open: r is not NULL and its log is open (not suspended). */
int	rec_is_open(const struct rec *r);
/* The parts of r (NULL for a NULL r; the tally also while suspended). */
struct rec_tally *rec_tally_of(const struct rec *r);
struct rec_space *rec_space_of(const struct rec *r);

/* rec_tally_new: the summaries of r, their timer on loop; while it lives
 * rec_tally counts. NULL on allocation failure. rec_tally_free: writes
 * what is counted to r and stops (before the log closes); NULL is a
 * no-op. */
struct rec_tally *rec_tally_new(struct rec *r, struct ev_loop *loop);
void	rec_tally_free(struct rec_tally *t);
void	rec_tally_metrics_print(const struct rec_tally *t, FILE *fp);

/* rec_space_new: the volume watch and the records of actions already
 * done that the log has not taken (rec_commit_after) of r, which outlive
 * a suspension of r: the reopened log takes them. Watches db_path every
 * REC_SPACE_MS on loop (a finding when it runs low, once per crossing;
 * another when the log gave up its reserve) while attached. r, cfg and
 * loop are borrowed. NULL on allocation failure. */
struct rec_space *rec_space_new(struct rec *r, struct ev_loop *loop,
		    const struct pol_config *cfg, const char *db_path);
/* rec_space_attach: log is open: watch it, and submit what is held. */
void	rec_space_attach(struct rec_space *sp, struct aud_log *log);
/* rec_space_detach: before log closes: hands what is held and not in
 * flight to it as async records (written, or counted in a log.gap), and
 * stops watching. One in flight (the writer stopped) stays held. */
void	rec_space_detach(struct rec_space *sp);
/* rec_space_free: after the log closed, drops what is still held (said
 * in the daemon's log). NULL is a no-op. */
void	rec_space_free(struct rec_space *sp);
/* rec_space_hold: see rec_commit_after. */
void	rec_space_hold(struct rec_space *sp, const char *kind, json_t *fields);
void	rec_space_metrics_print(const struct rec_space *sp, FILE *fp);

#define REC_SPACE_MS	2000	/* how often the volume is looked at */
#define REC_LATER_MS	1000	/* retry of a record not yet taken */
#define REC_LATER_MAX	4096	/* records held for retry, at most */

#endif /* SLUICE_GATEWAY_RECORD_INT_H */
