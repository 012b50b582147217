/*
 * brwire_int.h: what the two halves of the parent's side of the bridge
 * process share (brwire.c: the child, its messages and records;
 * brwire_ctl.c: the control API forwarded to it). Not for other modules.
 */
#ifndef SLUICE_GATEWAY_BRWIRE_INT_H
#define SLUICE_GATEWAY_BRWIRE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "gateway/ctl/ctl.h"
#include "gateway/privsep/msg.h"

struct rec_wait;
struct ctl_wait;
struct unk_wait;
struct br_event;

/* A call forwarded (or about to be) whose outcome the log does not hold
 * yet (brwire_intent.c). */
struct brw_intent {
	char		 id[33];
	uint64_t	 lb;		/* a bound below its seq; its seq once
					   durable */
	uint64_t	 gen;		/* the child that sent it; 0: a
					   previous run's */
	uint8_t		 durable;	/* its intent record is */
	uint8_t		 closing;	/* a record closing it is on its way */
	char		 sandbox[MSG_ID_MAX];
	char		 server[128];
	char		 tool[160];
};

struct brw {
	struct gw	*gw;
	struct rec	*rec;		/* borrowed, may be NULL */
	struct sbx	*sbx;
	struct ev_loop	*loop;
	int		 lfd;		/* the listener, kept across restarts */
	uint16_t	 port;
	struct proc	*proc;
	struct chan	*ch;
	uint64_t	 gen;		/* which child: acknowledgements of
					   records go to the one that asked */
	bool		 serving;
	bool		 starting;	/* brw_run waits for the first start */
	bool		 stopping;	/* brw_stop waits for the last end */
	int		 start_rc;
	char		 start_err[256];
	char		 uid[16], gid[16];
	char		*argv[12];
	uint64_t	 calls_allow, calls_deny;
	uint64_t	 auth_failures, findings, record_failures;
	uint64_t	 taints, taint_failures;
	uint64_t	 record_waits, record_wait_us;	/* outcomes */
	uint64_t	 intent_waits, intent_wait_us;
	uint64_t	 exits, violations;
	uint32_t	 pending_approvals;	/* as the child last said */
	struct msg_br_stats	 stats;		/* the same, whole */
	struct rec_wait	*waits;
	struct ctl_wait	*ctls;
	uint64_t	 next_ticket;
	/* open intents (brwire_intent.c) */
	struct brw_intent *intents;
	size_t		 nintents, capintents;
	struct unk_wait	*unks;
	uint64_t	 mark_saved;
	struct ev_timer	*mark_timer;
	uint64_t	 intents_refused;
	/* server requests carried, not yet recorded (brwire_sreq.c) */
	struct msg_br_sreq *sreqs;
	size_t		 nsreqs, capsreqs;
};

/* A control request forwarded to the child. */
struct ctl_wait {
	struct ctl_wait	*next, **prevp;
	struct brw	*w;
	struct ctl_req	*req;
	uint64_t	 ticket;
	struct msg_br_ctl m;		/* what was asked, for the answer */
};

/* brw_cp: s into dst (size bytes) whole, or -1 when it does not fit. */
static inline int
brw_cp(char *dst, size_t size, const char *s)
{
	size_t n = strlen(s);

	if (n >= size)
		return -1;
	memcpy(dst, s, n + 1);
	return 0;
}

/* brw_violation: the child broke the protocol: killed, recorded,
 * restarted (brwire.c). */
void	brw_violation(struct brw *w, const char *what);
/* brw_ctl_reply: a MSG_BR_CTL_REPLY of len payload bytes answers the
 * request that waits for it (brwire_ctl.c). */
void	brw_ctl_reply(struct brw *w, const struct msg_br_ctl_reply *r,
	    size_t len);
/* brw_ctl_fail_all: every request that waits gets 503 with why. */
void	brw_ctl_fail_all(struct brw *w, const char *why);

/* ---- brwire_intent.c ---- */
/* brw_intent_open: intent ev of the running child is about to be
 * submitted: kept open. -1 (EINVAL: its call_id is not 32 hex digits or
 * is open already; ENOSPC: the child has too many open; ENOMEM): it must
 * not be recorded, and its call is refused. */
int	brw_intent_open(struct brw *w, const struct br_event *ev);
/* brw_intent_durable: the intent of call id is in the log (ok, at seq),
 * or is not and never will be. */
void	brw_intent_durable(struct brw *w, const char *id, int ok,
	    uint64_t seq);
/* brw_outcome_submitted / brw_outcome_durable: the outcome of call id is
 * on its way to the log / is in it (ok) or lost. */
void	brw_outcome_submitted(struct brw *w, const char *id);
void	brw_outcome_durable(struct brw *w, const char *id, int ok);
/* brw_intents_orphaned: nobody will record the outcome of the open
 * intents (their child is gone): each gets mcp.outcome_unknown. */
void	brw_intents_orphaned(struct brw *w, const char *why);
/* brw_intents_recover: at start, before the first child: the intents a
 * previous run left open get mcp.outcome_unknown; starts the mark's
 * timer. 0, or -1 with err (the state database or the log unreadable). */
int	brw_intents_recover(struct brw *w, char *err, size_t errlen);
/* brw_intents_stop: at stop: open intents closed as above, the table
 * freed. */
void	brw_intents_stop(struct brw *w);

/* brw_ev_fields: the fields of a record or finding of the child's event
 * ev (brwire.c); NULL without memory. */
json_t	*brw_ev_fields(const struct br_event *ev);

/* ---- brwire_sreq.c ---- */
/* brw_sreq_carried: the child carried the server request m (checked by
 * msg_br_sreq_ok) to a client: kept open until its record comes, within
 * the bounds (past them it is logged, not kept). */
void	brw_sreq_carried(struct brw *w, const struct msg_br_sreq *m);
/* brw_sreq_ended: the record of the announcement key came. */
void	brw_sreq_ended(struct brw *w, uint64_t key);
/* brw_sreqs_orphaned: the child is gone: each open one is recorded as
 * mcp.server_request of unknown outcome, why in its detail. */
void	brw_sreqs_orphaned(struct brw *w, const char *why);
/* brw_sreqs_free: at stop, after the last orphaning. */
void	brw_sreqs_free(struct brw *w);

#endif /* SLUICE_GATEWAY_BRWIRE_INT_H */
