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

#include "gateway/ctl/ctl.h"
#include "gateway/privsep/msg.h"

struct rec_wait;
struct ctl_wait;

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
	uint64_t	 record_waits, record_wait_us;
	uint64_t	 exits, violations;
	uint32_t	 pending_approvals;	/* as the child last said */
	struct rec_wait	*waits;
	struct ctl_wait	*ctls;
	uint64_t	 next_ticket;
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

#endif /* SLUICE_GATEWAY_BRWIRE_INT_H */
