/*
 * fleetq: the bridge's side of the approval queue a fleet's hosts share
 * (fleet/fleet.h holds the statements, README "Running a fleet" the
 * behaviour). A call waiting for a person is a row any host can decide;
 * this host must hear of a decision made elsewhere at once, so a thread of
 * the bridge process owns one connection that LISTENs on the queue's
 * channel, runs the loop's statements (post, decide, close, list) in the
 * order they came, and, on a notification naming this host (or every
 * FQ_POLL_MS while it holds open rows, should a notification be lost),
 * reads the decisions made for this host's calls and hands them to the
 * loop. Like shared.c, nothing here blocks the loop: a statement that
 * cannot be answered within the fleet's deadline fails, and the caller
 * fails closed (a call that cannot be posted does not wait).
 */
#ifndef SLUICE_GATEWAY_BRIDGE_FLEETQ_H
#define SLUICE_GATEWAY_BRIDGE_FLEETQ_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gateway/ev.h"
#include "gateway/fleet/fleet.h"

struct br_fq;
struct br_fq_job;

struct br_fq_stats {
	int		 up;		/* connected and listening */
	uint64_t	 posted, decided, delivered;
	uint64_t	 failures;	/* connects and statements that failed */
	uint64_t	 reconnects;
	char		 last_error[160];
};

/* A decision made for one of this host's calls, in the loop's thread. */
typedef void br_fq_deliver(void *arg, const struct fleet_aq_decision *d);

/*
 * br_fq_done: a statement's answer, in the loop's thread: ok 1 (for a
 * decide: 1 decided with *held set, 0 nothing to decide), or -1 with err.
 * list: LIST's rows (a new reference the callee owns), NULL otherwise.
 */
typedef void br_fq_done(void *arg, int ok, const struct fleet_aq_held *held,
    json_t *list, const char *err);

/*
 * br_fq_new: the queue's thread for conninfo with password (copied) as
 * host, each statement bounded by deadline_ms, delivering decisions to
 * deliver(darg, ...) on loop. Its first connection closes the rows an
 * earlier process of this host left open (their calls are gone). NULL with
 * err.
 */
struct br_fq	*br_fq_new(struct ev_loop *loop, const char *conninfo,
		    const char *password, const char *host,
		    unsigned deadline_ms, br_fq_deliver *deliver, void *darg,
		    char *err, size_t errlen);
/* br_fq_free: stop and join the thread after the closes still queued
 * were tried (each within the deadline); no answer comes for anything
 * else queued. NULL: no-op. */
void		 br_fq_free(struct br_fq *q);
/* br_fq_host: this host's name in the queue (borrowed). */
const char	*br_fq_host(const struct br_fq *q);

/*
 * br_fq_post, br_fq_decide, br_fq_list: queue a statement (strings are
 * copied); done(arg, ...) comes later from the loop, never inside the call.
 * NULL when it cannot be queued (full, no memory, a field too long): the
 * caller fails closed. d->approver_host is set to this host by decide.
 */
struct br_fq_job *br_fq_post(struct br_fq *q, const struct fleet_aq_item *it,
		    br_fq_done *done, void *arg);
struct br_fq_job *br_fq_decide(struct br_fq *q,
		    const struct fleet_aq_decision *d, br_fq_done *done,
		    void *arg);
struct br_fq_job *br_fq_list(struct br_fq *q, br_fq_done *done, void *arg);
/* br_fq_forget: the caller of job went away: its answer is dropped. */
void		 br_fq_forget(struct br_fq_job *job);
/* br_fq_close: queue the close of this host's row id (no answer). */
void		 br_fq_close(struct br_fq *q, const char *id,
		    enum fleet_aq_close why);
/* br_fq_stats: a consistent snapshot (zeroed for NULL). */
void		 br_fq_stats(const struct br_fq *q, struct br_fq_stats *st);

#endif /* SLUICE_GATEWAY_BRIDGE_FLEETQ_H */
