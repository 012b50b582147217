/*
 * sandbox_procs.c: the processes of a sandbox, and their end when it ends.
 * Sluice owns a sandbox's network namespace, and so everything that runs
 * in it: whoever started a process there (`sluice exec`, `ip netns exec`,
 * a container runtime that joined it), it is found by the namespace's
 * identity (device and inode of /proc/<pid>/ns/net, as sbx_pid_sandbox
 * knows a caller), never by a name a process can choose.
 *
 * An end (struct sb_end) holds the namespace open from before its pin and
 * link go until its last process is gone: the kernel can then not free
 * the namespace and give its inode to a new one, so a later pass never
 * takes another sandbox's process for this one's. Its passes run from
 * timers on the daemon's loop: SIGTERM at once, then a check after 10 ms,
 * 20, 40, ... up to every 250 ms, which ends early when all are gone, and
 * SIGKILL at the grace (sandboxes.kill_grace). The loop never sleeps on
 * behalf of one sandbox: other sandboxes, the DNS process and the control
 * API go on during a grace. The outcome is a sandbox.terminated finding.
 *
 * What a pass costs is bounded by the host, not by the sandbox: one stat
 * of /proc/<pid>/ns/net per process of the machine (nothing a process
 * controls is read: not its cmdline nor its memory, whose locks a hostile
 * process could hold), at most SB_SCAN_MAX entries, and SIGKILL passes at
 * most SB_KILL_PASSES. Signals go through a pidfd taken before the
 * namespace is checked, so a pid reused between the check and the signal
 * is never signalled.
 */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/cgroup.h"
#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/sandbox_int.h"
#include "netns/netns.h"

#define SB_SCAN_MAX	(1 << 22)	/* /proc entries per pass (pid_max) */
#define SB_KILL_PASSES	50		/* SIGKILL passes before giving up */
#define SB_POLL_FIRST	10		/* ms */
#define SB_POLL_MAX	250		/* ms */
#define SB_KILL_POLL	20		/* ms between SIGKILL passes */

struct sb_end {
	struct sbx	*m;
	char		 id[SBX_ID_MAX + 1];
	int		 nsfd;		/* holds the namespace */
	dev_t		 dev;
	ino_t		 ino;
	int		 cg;		/* its cgroup goes at the end */
	unsigned	 found, termed, killed;
	int		 left;
	int		 kill_phase, passes;
	uint64_t	 waited_ms, delay_ms;
	struct ev_timer	*timer;
	struct sb_end	*next;
};

static int
xpidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int
xpidfd_signal(int fd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
}

/* Is the process of /proc entry name in the namespace dev/ino? */
static int
in_ns(int procfd, const char *name, dev_t dev, ino_t ino)
{
	char path[300];
	struct stat st;

	snprintf(path, sizeof(path), "%s/ns/net", name);
	return fstatat(procfd, path, &st, 0) == 0 && st.st_dev == dev &&
	    st.st_ino == ino;
}

int
sb_procs_scan(dev_t dev, ino_t ino, int sig)
{
	struct dirent *de;
	DIR *d;
	long n = 0, seen = 0;
	pid_t self = getpid(), pid;
	char *end;
	int fd, procfd;

	if ((d = opendir("/proc")) == NULL)
		return -1;
	procfd = dirfd(d);
	while ((de = readdir(d)) != NULL && seen++ < SB_SCAN_MAX) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid = (pid_t)strtol(de->d_name, &end, 10);
		if (*end != '\0' || pid == self)
			continue;
		if (!in_ns(procfd, de->d_name, dev, ino))
			continue;
		if (sig == 0) {
			n++;
			continue;
		}
		/* The pidfd first, the namespace again after: the pid
		 * cannot change hands in between any more. */
		if ((fd = xpidfd_open(pid)) == -1)
			continue;
		if (in_ns(procfd, de->d_name, dev, ino) &&
		    xpidfd_signal(fd, sig) == 0)
			n++;
		close(fd);
	}
	closedir(d);
	return n > INT_MAX ? INT_MAX : (int)n;
}

int
sb_end_begin(struct sbx *m, struct sandbox *s, struct sb_end **out)
{
	char path[PATH_MAX];
	struct sb_end *e;
	struct stat st;
	int n;

	*out = NULL;
	if ((e = calloc(1, sizeof(*e))) == NULL)
		return -1;
	e->m = m;
	e->nsfd = -1;
	snprintf(e->id, sizeof(e->id), "%s", s->rec.id);
	e->cg = s->cg;
	snprintf(path, sizeof(path), "%s/%s", s->spec.netns_dir,
	    s->spec.netns);
	/* The identity comes from the pin when it is there (it is what
	 * the namespace is now), else from what was taken at creation. */
	if ((e->nsfd = open(path, O_RDONLY | O_CLOEXEC)) != -1 &&
	    fstat(e->nsfd, &st) == 0) {
		e->dev = st.st_dev;
		e->ino = st.st_ino;
	} else if (s->ns_known) {
		e->dev = s->ns_dev;
		e->ino = s->ns_ino;
	} else {
		if (e->nsfd != -1)
			close(e->nsfd);
		free(e);
		return 0;
	}
	if ((n = sb_procs_scan(e->dev, e->ino, 0)) < 0)
		n = 0;
	e->found = (unsigned)n;
	*out = e;
	return n;
}

static void end_free(struct sb_end *e);
static void end_tick(struct ev_loop *loop, void *arg);

/* The outcome, and the end's resources let go. */
static void
end_finish(struct sb_end *e)
{
	struct sbx *m = e->m;
	struct sb_end **pp;
	char detail[200], err[256] = "";

	if (e->cg && m->cg != NULL) {
		if (cg_remove(m->cg, e->id, err, sizeof(err)) == -1)
			log_warnx("sandbox %s: cgroup stays: %s", e->id, err);
	}
	snprintf(detail, sizeof(detail), "processes=%u sigterm=%u sigkill=%u "
	    "left=%d grace=%us", e->found, e->termed, e->killed, e->left,
	    m->cfg->kill_grace_s);
	log_info("sandbox.terminated id=%s %s", e->id, detail);
	if (rec_async(m->rec, "finding", rec_finding_fields(e->id,
	    "sandbox.terminated", e->left > 0 ? "high" : e->killed > 0 ?
	    "medium" : "low", detail)) == -1)
		log_warn("sandbox %s: finding", e->id);
	for (pp = &m->ends; *pp != NULL; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	end_free(e);
}

static void
end_free(struct sb_end *e)
{
	if (e == NULL)
		return;
	if (e->timer != NULL)
		ev_timer_cancel(e->m->loop, e->timer);
	if (e->nsfd != -1)
		close(e->nsfd);
	free(e);
}

static void
end_arm(struct sb_end *e, uint64_t ms)
{
	int n;

	if ((e->timer = ev_timer_add(e->m->loop, ms, end_tick, e)) == NULL) {
		/* No timer: no grace either, rather than processes that
		 * outlive their sandbox. */
		log_warn("sandbox %s: termination timer", e->id);
		if ((n = sb_procs_scan(e->dev, e->ino, SIGKILL)) > 0 &&
		    e->killed == 0)
			e->killed = (unsigned)n;
		e->left = 0;
		end_finish(e);
	}
}

static void
end_tick(struct ev_loop *loop, void *arg)
{
	struct sb_end *e = arg;
	uint64_t grace = (uint64_t)e->m->cfg->kill_grace_s * 1000;
	int n;

	(void)loop;
	e->timer = NULL;
	e->waited_ms += e->delay_ms;
	if (!e->kill_phase) {
		if ((n = sb_procs_scan(e->dev, e->ino, 0)) <= 0) {
			e->left = 0;
			end_finish(e);
			return;
		}
		if (e->waited_ms < grace) {
			e->delay_ms = e->delay_ms * 2 > SB_POLL_MAX ?
			    SB_POLL_MAX : e->delay_ms * 2;
			if (e->waited_ms + e->delay_ms > grace)
				e->delay_ms = grace - e->waited_ms;
			end_arm(e, e->delay_ms);
			return;
		}
		e->kill_phase = 1;
	}
	/* Past the grace: the cgroup at once (v2 cgroup.kill is atomic
	 * against forks), then everything still in the namespace. */
	if (e->cg && e->m->cg != NULL && e->passes == 0)
		(void)cg_kill(e->m->cg, e->id);
	n = sb_procs_scan(e->dev, e->ino, SIGKILL);
	/* Those the first pass finds needed SIGKILL; later passes see them
	 * again until their exit is through, and count nothing new. */
	if (n > 0 && e->passes == 0)
		e->killed = (unsigned)n;
	e->passes++;
	/* Signalled but not yet gone (exit takes a moment), or forked
	 * since: another pass, up to SB_KILL_PASSES, before saying some
	 * are left. */
	if (n > 0 && e->passes < SB_KILL_PASSES) {
		e->delay_ms = SB_KILL_POLL;
		end_arm(e, e->delay_ms);
		return;
	}
	e->left = n > 0 ? n : 0;
	end_finish(e);
}

void
sb_end_go(struct sbx *m, struct sb_end *e)
{
	char err[256];
	int n;

	if (e == NULL)
		return;
	if (m->cfg->on_end == POL_ON_END_ISOLATE) {
		/* With processes in it the namespace outlives its pin, and
		 * with it the pair the kernel would delete with it: the
		 * link goes now. (On kill, the retired host side, without
		 * address or elements, carries nothing until the grace
		 * ends, and the synchronous delete would cost the removal
		 * an RCU grace period.) */
		if (e->found > 0 && e->nsfd != -1 &&
		    ns_isolate(e->nsfd, err, sizeof(err)) == -1)
			log_warnx("sandbox %s: link: %s", e->id, err);
		/* They stay, without the namespace's link; so does their
		 * cgroup (and its limits) while it has members. */
		if (e->cg && m->cg != NULL && cg_members(m->cg, e->id) == 0)
			(void)cg_remove(m->cg, e->id, NULL, 0);
		end_free(e);
		return;
	}
	if ((n = sb_procs_scan(e->dev, e->ino, SIGTERM)) > 0)
		e->termed = (unsigned)n;
	e->next = m->ends;
	m->ends = e;
	e->delay_ms = SB_POLL_FIRST;
	end_arm(e, e->delay_ms);
}

int
sb_end_pending(const struct sbx *m, const char *id)
{
	const struct sb_end *e;

	for (e = m->ends; e != NULL; e = e->next)
		if (strcmp(e->id, id) == 0)
			return 1;
	return 0;
}

void
sb_ends_stop(struct sbx *m)
{
	struct sb_end *e;

	/* A daemon that stops leaves no ended sandbox's process behind:
	 * what the grace was still waiting for is killed now. */
	while ((e = m->ends) != NULL) {
		if (e->cg && m->cg != NULL)
			(void)cg_kill(m->cg, e->id);
		(void)sb_procs_scan(e->dev, e->ino, SIGKILL);
		if (e->cg && m->cg != NULL)
			(void)cg_remove(m->cg, e->id, NULL, 0);
		m->ends = e->next;
		end_free(e);
	}
}
