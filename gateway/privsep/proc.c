/*
 * proc.c: starting, watching and restarting one child (see proc.h).
 *
 * Between fork and exec the child runs only async-signal-safe calls: the
 * parent has threads (the audit writer, libmicrohttpd's), and a lock one
 * of them held at the fork would never be released in the child.
 */
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/log.h"
#include "gateway/privsep/chan.h"
#include "gateway/privsep/proc.h"

#define PROC_QUICK_MS	5000	/* a child that dies sooner is crash-looping */
#define PROC_DELAY_MIN	100	/* ms before the first quick restart */
#define PROC_DELAY_MAX	10000

struct proc {
	struct ev_loop		*loop;
	struct proc_spec	 spec;
	proc_up_fn		*up;
	proc_down_fn		*down;
	void			*ctx;
	pid_t			 pid;
	int			 pidfd;
	uint64_t		 started_ms;
	unsigned		 starts;
	unsigned		 quick;		/* quick deaths in a row */
	struct ev_timer		*restart;
};

struct proc *
proc_new(struct ev_loop *loop, const struct proc_spec *spec, proc_up_fn *up,
    proc_down_fn *down, void *ctx)
{
	struct proc *pr;

	if (loop == NULL || spec == NULL || spec->exe == NULL ||
	    spec->argv == NULL || spec->nfds > PROC_MAX_FDS || up == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if ((pr = calloc(1, sizeof(*pr))) == NULL)
		return NULL;
	pr->loop = loop;
	pr->spec = *spec;
	pr->up = up;
	pr->down = down;
	pr->ctx = ctx;
	pr->pidfd = -1;
	return pr;
}

/* In the child, before exec: the channel at PROC_CHAN_FD, the spec's fds
 * after it, nothing else open, default signal mask, and death with the
 * parent (a child outliving its parent would serve with nobody to apply
 * what it learns). */
static _Noreturn void
child_exec(const struct proc *pr, int chan, pid_t parent)
{
	int tmp[PROC_MAX_FDS + 1];
	sigset_t none;
	size_t i;

	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 || getppid() != parent)
		_exit(126);
	/* Out of the way first, so that no target number overwrites a
	 * source still to be moved. */
	if ((tmp[0] = fcntl(chan, F_DUPFD_CLOEXEC, 64)) == -1)
		_exit(126);
	for (i = 0; i < pr->spec.nfds; i++)
		if ((tmp[i + 1] = fcntl(pr->spec.fds[i], F_DUPFD_CLOEXEC,
		    64)) == -1)
			_exit(126);
	if (dup2(tmp[0], PROC_CHAN_FD) == -1)
		_exit(126);
	for (i = 0; i < pr->spec.nfds; i++)
		if (dup2(tmp[i + 1], PROC_FIRST_FD + (int)i) == -1)
			_exit(126);
	(void)close_range(PROC_FIRST_FD + (unsigned)pr->spec.nfds, ~0u, 0);
	execv(pr->spec.exe, pr->spec.argv);
	_exit(127);
}

static void	pidfd_cb(struct ev_loop *, int, unsigned, void *);

int
proc_start(struct proc *pr, char *err, size_t errlen)
{
	int sv[2], pfd;
	pid_t pid, self = getpid();

	if (pr->pid != 0) {
		snprintf(err, errlen, "%s: already running", pr->spec.role);
		errno = EBUSY;
		return -1;
	}
	if (chan_pair(sv) == -1) {
		snprintf(err, errlen, "%s: socketpair: %s", pr->spec.role,
		    strerror(errno));
		return -1;
	}
	if ((pid = fork()) == -1) {
		snprintf(err, errlen, "%s: fork: %s", pr->spec.role,
		    strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0)
		child_exec(pr, sv[1], self);
	close(sv[1]);
	if ((pfd = pidfd_open(pid, 0)) == -1 ||
	    ev_add(pr->loop, pfd, EV_READ, pidfd_cb, pr) == -1) {
		int e = errno;

		snprintf(err, errlen, "%s: pidfd: %s", pr->spec.role,
		    strerror(e));
		if (pfd != -1)
			close(pfd);
		(void)kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		close(sv[0]);
		errno = e;
		return -1;
	}
	pr->pid = pid;
	pr->pidfd = pfd;
	pr->started_ms = ev_now_ms();
	pr->starts++;
	pr->up(pr->ctx, sv[0], pid);
	return 0;
}

static void
on_restart(struct ev_loop *loop, void *arg)
{
	struct proc *pr = arg;
	char err[160];

	(void)loop;
	pr->restart = NULL;
	if (proc_start(pr, err, sizeof(err)) == 0)
		return;
	log_warnx("%s", err);
	/* Try again later: without the child its service stays closed. */
	if ((pr->restart = ev_timer_add(pr->loop, PROC_DELAY_MAX, on_restart,
	    pr)) == NULL)
		log_warn("%s: cannot schedule a restart", pr->spec.role);
}

/* The child ended: reap it, tell the owner, and start it again, at once
 * after a long life, later and later after short ones. */
static void
pidfd_cb(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct proc *pr = arg;
	uint64_t lived, delay = 0;
	int status = 0;
	pid_t pid = pr->pid, r;

	(void)events;
	do
		r = waitpid(pid, &status, WNOHANG);
	while (r == -1 && errno == EINTR);
	if (r == 0)
		return;		/* not yet: level-triggered, we come back */
	ev_del(loop, fd);
	close(fd);
	pr->pidfd = -1;
	pr->pid = 0;
	lived = ev_now_ms() - pr->started_ms;
	if (lived < PROC_QUICK_MS) {
		unsigned k = pr->quick < 16 ? pr->quick : 16;

		delay = (uint64_t)PROC_DELAY_MIN << k;
		if (delay > PROC_DELAY_MAX)
			delay = PROC_DELAY_MAX;
		pr->quick++;
	} else
		pr->quick = 0;
	if (pr->down != NULL)
		pr->down(pr->ctx, pid, status, pr->starts - 1);
	pr->restart = delay == 0 ? ev_defer(loop, on_restart, pr) :
	    ev_timer_add(loop, delay, on_restart, pr);
	if (pr->restart == NULL)
		log_warn("%s: cannot schedule a restart", pr->spec.role);
}

void
proc_kill(struct proc *pr)
{
	if (pr != NULL && pr->pid != 0 && pr->pidfd != -1)
		(void)pidfd_send_signal(pr->pidfd, SIGKILL, NULL, 0);
}

pid_t
proc_pid(const struct proc *pr)
{
	return pr != NULL ? pr->pid : 0;
}

unsigned
proc_restarts(const struct proc *pr)
{
	return pr != NULL && pr->starts > 0 ? pr->starts - 1 : 0;
}

/* Waits up to ms for the child to end; 1 when it did (reaped). */
static int
reap_within(struct proc *pr, unsigned ms)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	unsigned waited;
	pid_t r;

	for (waited = 0; waited <= ms; waited += 10) {
		r = waitpid(pr->pid, NULL, WNOHANG);
		if (r == pr->pid || (r == -1 && errno == ECHILD))
			return 1;
		(void)nanosleep(&ts, NULL);
	}
	return 0;
}

void
proc_free(struct proc *pr)
{
	if (pr == NULL)
		return;
	ev_timer_cancel(pr->loop, pr->restart);
	if (pr->pid != 0) {
		(void)pidfd_send_signal(pr->pidfd, SIGTERM, NULL, 0);
		if (!reap_within(pr, 1000)) {
			(void)pidfd_send_signal(pr->pidfd, SIGKILL, NULL, 0);
			(void)waitpid(pr->pid, NULL, 0);
		}
	}
	if (pr->pidfd != -1) {
		ev_del(pr->loop, pr->pidfd);
		close(pr->pidfd);
	}
	free(pr);
}
