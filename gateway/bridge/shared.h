/*
 * shared: the bridge's side of the budgets a fleet's hosts share (scope
 * subject or policy; fleet/fleet.h holds the statements). libpq blocks and
 * the bridge is one event loop, so the connection belongs to a worker
 * thread of the bridge process: the loop hands it reservations and
 * settlements through a bounded queue and hears back through an eventfd.
 * A reservation that cannot be answered within the fleet's deadline (the
 * database down, slow, or the queue full) comes back UNAVAILABLE, which
 * the caller denies; the worker reconnects with backoff meanwhile, and its
 * state is in br_shared_stats. The bridge's own SQLite database keeps the
 * budgets of scope sandbox as before.
 */
#ifndef SLUICE_GATEWAY_BRIDGE_SHARED_H
#define SLUICE_GATEWAY_BRIDGE_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/ev.h"
#include "gateway/fleet/fleet.h"

struct br_shared;
struct br_shared_job;

struct br_shared_stats {
	int		 up;		/* connected, and the last statement
					 * worked */
	uint64_t	 reserved, exhausted, unavailable;
	uint64_t	 failures;	/* connects and statements that failed */
	uint64_t	 reconnects;	/* connections made after the first */
	uint64_t	 settle_failures;
	char		 last_error[160];
};

/*
 * br_shared_done: the answer to a reservation, in the loop's thread. r[0..n)
 * are the caller's budgets with used_* and window_at filled when RESERVED;
 * which names the used-up one when EXHAUSTED.
 */
typedef void br_shared_done(void *arg, enum fleet_resv_outcome o,
    const struct fleet_resv *r, size_t n, size_t which);

/*
 * br_shared_new: the worker for conninfo with password (NULL: libpq's own
 * sources; copied, and the caller may wipe its own), every statement and
 * every wait in the queue bounded by deadline_ms, answering on loop. It
 * connects on its own thread, so a database that is down now costs the
 * start nothing. NULL with errno and err.
 */
struct br_shared *br_shared_new(struct ev_loop *loop, const char *conninfo,
		    const char *password, unsigned deadline_ms, char *err,
		    size_t errlen);
/* br_shared_free: stops and joins the worker, drops what is queued (no
 * answer comes for it), wipes the password. NULL: no-op. */
void		 br_shared_free(struct br_shared *s);
/*
 * br_shared_reserve: queue a reservation of r[0..n) (n at most
 * FLEET_RESV_MAX; its strings are copied) for wall clock now_s. done(arg,
 * ...) comes later from the loop, never inside this call. NULL when it
 * cannot be queued (full, no memory): the caller denies as UNAVAILABLE.
 */
struct br_shared_job *br_shared_reserve(struct br_shared *s,
		    const struct fleet_resv *r, size_t n, uint64_t now_s,
		    br_shared_done *done, void *arg);
/* br_shared_forget: the caller of job is gone: done will not come, and
 * whatever job reserves is released again. */
void		 br_shared_forget(struct br_shared_job *job);
/* br_shared_settle: queue fleet_budget_settle of r[0..n) (as reserved:
 * window_at set), no answer; a failure is counted. */
void		 br_shared_settle(struct br_shared *s, const struct fleet_resv *r,
		    size_t n, uint64_t bytes, int release);
/* br_shared_stats: a consistent snapshot; zeroed for NULL. */
void		 br_shared_stats(const struct br_shared *s,
		    struct br_shared_stats *st);

#endif /* SLUICE_GATEWAY_BRIDGE_SHARED_H */
