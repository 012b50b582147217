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

/* rec_tally_start: summaries go to the open recorder from now on, their
 * timer on loop. rec_tally_stop: writes what is counted and stops (before
 * the log closes). */
void	rec_tally_start(struct ev_loop *loop);
void	rec_tally_stop(void);
void	rec_tally_metrics_print(FILE *fp);

struct rec_space;
/* rec_space_new: watches the volume of db_path every REC_SPACE_MS on loop
 * (a finding when it runs low, once per crossing; another when the log
 * gave up its reserve) and keeps the records of actions already done
 * until the log takes them (rec_commit_after). log, cfg and loop are
 * borrowed. NULL on allocation failure. */
struct rec_space *rec_space_new(struct ev_loop *loop, struct aud_log *log,
		    const struct pol_config *cfg, const char *db_path);
/* rec_space_free: hands what is still pending to the log as async
 * records (counted in a log.gap if even that fails), before the log
 * closes. NULL is a no-op. */
void	rec_space_free(struct rec_space *sp);
void	rec_space_metrics_print(const struct rec_space *sp, FILE *fp);

#define REC_SPACE_MS	2000	/* how often the volume is looked at */
#define REC_LATER_MS	1000	/* retry of a record not yet taken */
#define REC_LATER_MAX	4096	/* records held for retry, at most */

#endif /* SLUICE_GATEWAY_RECORD_INT_H */
