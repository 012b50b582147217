/*
 * cli_limits.c: what `sluice exec` and `sluice run` do for the sandbox's
 * `resources:`. The daemon makes the sandbox's cgroups and names them in
 * its exec reply; the command joins them itself, before it drops its
 * capabilities, so that it and everything it forks count against the
 * limits from their first instruction (no window where a fork bomb runs
 * outside them). The timeout is the CLI's to keep, as timeout(1) does:
 * it is the parent that waits, and exits 124 when it had to kill.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gateway/cli/cli.h"
#include "netns/netns.h"

#define CG_PREFIX	"/sys/fs/cgroup/"

/* Is dir a group of sandbox id as the daemon makes them, .../sluice-<8
 * hex digits>/<id>? */
static int
cgroup_dir_ok(const char *dir, const char *id)
{
	char tail[64];
	const char *p, *b;
	size_t dl = strlen(dir), tl, i;

	if (strncmp(dir, CG_PREFIX, strlen(CG_PREFIX)) != 0)
		return 0;
	tl = (size_t)snprintf(tail, sizeof(tail), "/%s", id);
	if (tl >= sizeof(tail) || dl <= tl + 16 ||
	    strcmp(dir + dl - tl, tail) != 0)
		return 0;
	b = dir + dl - tl - 16;		/* "/sluice-xxxxxxxx" */
	if (strncmp(b, "/sluice-", 8) != 0)
		return 0;
	for (i = 8; i < 16; i++)
		if (!((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' &&
		    b[i] <= 'f')))
			return 0;
	for (p = dir; (p = strchr(p, '/')) != NULL; p++)
		if (strncmp(p, "/./", 3) == 0 || strncmp(p, "/../", 4) == 0 ||
		    strcmp(p, "/.") == 0 || strcmp(p, "/..") == 0 ||
		    p[1] == '/')
			return 0;
	return 1;
}

int
cli_limits_parse(const json_t *reply, const char *id, struct cli_limits *out)
{
	const json_t *lim, *cgs, *v, *t;
	const char *dir;
	size_t i;

	memset(out, 0, sizeof(*out));
	if ((lim = json_object_get(reply, "limits")) == NULL)
		return 0;
	if (!json_is_object(lim))
		return -1;
	if ((t = json_object_get(lim, "timeout_s")) != NULL) {
		if (!json_is_integer(t) || json_integer_value(t) < 0 ||
		    json_integer_value(t) > 100LL * 365 * 86400)
			return -1;
		out->timeout_s = (unsigned long)json_integer_value(t);
	}
	if ((cgs = json_object_get(lim, "cgroups")) == NULL)
		return 0;
	if (!json_is_array(cgs) || json_array_size(cgs) > CLI_CGROUPS_MAX)
		return -1;
	json_array_foreach(cgs, i, v) {
		if ((dir = json_string_value(v)) == NULL ||
		    strlen(dir) >= sizeof(out->cgroup[0]) ||
		    !cgroup_dir_ok(dir, id))
			return -1;
		snprintf(out->cgroup[out->ncgroups++], sizeof(out->cgroup[0]),
		    "%s", dir);
	}
	return 0;
}

int
cli_limits_join(const struct cli_limits *l, char *err, size_t errlen)
{
	size_t i;

	/* "0" is the writer itself. */
	for (i = 0; i < l->ncgroups; i++)
		if (ns_cg_write(l->cgroup[i], "cgroup.procs", "0") == -1) {
			snprintf(err, errlen, "%s: %s", l->cgroup[i],
			    strerror(errno));
			return -1;
		}
	return 0;
}

static volatile sig_atomic_t alarmed;
static volatile sig_atomic_t alarm_pid;

/* The kill is the handler's own (kill(2) is async-signal-safe): a
 * deadline that passes between two waits cannot be missed. */
static void
on_alarm(int sig)
{
	(void)sig;
	alarmed = 1;
	if (alarm_pid > 0)
		(void)kill((pid_t)alarm_pid, SIGKILL);
}

void
cli_limits_wait(pid_t pid, const struct cli_limits *l, int *st,
    int *timed_out)
{
	struct sigaction sa, old;
	size_t i;

	*timed_out = 0;
	alarmed = 0;
	alarm_pid = pid;
	if (l->timeout_s > 0) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_alarm;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGALRM, &sa, &old);
		alarm(l->timeout_s > 86400u * 365 ? 86400u * 365 :
		    (unsigned)l->timeout_s);
	}
	while (waitpid(pid, st, 0) == -1) {
		if (errno != EINTR) {
			*st = 1 << 8;
			break;
		}
	}
	if (l->timeout_s > 0) {
		alarm(0);
		sigaction(SIGALRM, &old, NULL);
	}
	alarm_pid = 0;
	if (alarmed) {
		/* What the command left in its groups goes with it. */
		*timed_out = 1;
		for (i = 0; i < l->ncgroups; i++)
			(void)ns_cg_kill(l->cgroup[i]);
	}
}
