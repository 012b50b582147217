/*
 * proc: the parent's side of one child process: start it (fork, then exec
 * of sluiced itself in the child's role, the way OpenBSD's daemons re-exec
 * so that a child shares no memory with the parent: no key, no database
 * handle, no heap), watch it through a pidfd on the event loop, and start
 * it again when it dies. A child that keeps dying is restarted with a
 * growing delay, so a crash loop costs little; its service stays closed
 * meanwhile, which is the safe way for it to fail.
 */
#ifndef SLUICE_GATEWAY_PRIVSEP_PROC_H
#define SLUICE_GATEWAY_PRIVSEP_PROC_H

#include <sys/types.h>

#include <stddef.h>

#include "gateway/ev.h"

#define PROC_CHAN_FD	3	/* the child's end of the socket pair */
#define PROC_FIRST_FD	4	/* where the spec's fds arrive, in order */
#define PROC_MAX_FDS	8

struct proc;

struct proc_spec {
	const char	*role;		/* for logs: "dns" */
	const char	*exe;		/* what to exec, e.g. "/proc/self/exe" */
	char *const	*argv;		/* borrowed for the life of the proc */
	const int	*fds;		/* kept by the caller, passed at each start */
	size_t		 nfds;		/* at most PROC_MAX_FDS */
};

/* A child was started: chan_fd is the parent's end of its socket pair,
 * now the owner's (for chan_new). */
typedef void	proc_up_fn(void *ctx, int chan_fd, pid_t pid);
/* The child pid ended with wait status status; restarts counts the
 * starts after the first. A restart follows unless the proc is being
 * freed. */
typedef void	proc_down_fn(void *ctx, pid_t pid, int status,
		    unsigned restarts);

/* proc_new: a supervisor for spec on loop (spec and what it points to are
 * borrowed). Nothing runs until proc_start. NULL with errno. */
struct proc	*proc_new(struct ev_loop *loop, const struct proc_spec *spec,
		    proc_up_fn *up, proc_down_fn *down, void *ctx);
/* proc_start: starts the child now. 0, or -1 with err (fork, exec setup). */
int		 proc_start(struct proc *pr, char *err, size_t errlen);
/* proc_kill: SIGKILL to the running child (one that broke the protocol);
 * its end is reported and it is restarted like any other death. */
void		 proc_kill(struct proc *pr);
/* proc_pid: the running child, or 0 while there is none. */
pid_t		 proc_pid(const struct proc *pr);
/* proc_restarts: how many times it was started after the first. */
unsigned	 proc_restarts(const struct proc *pr);
/* proc_free: stops the child for good (SIGTERM, then SIGKILL when it has
 * not gone within a second), reaps it and frees pr. No restart, no down
 * callback. NULL is a no-op. */
void		 proc_free(struct proc *pr);

#endif /* SLUICE_GATEWAY_PRIVSEP_PROC_H */
