/*
 * ns_cgroup.c: the two things done to a sandbox's cgroup from both sides:
 * a value written into one of its files (the daemon's limits, the
 * command joining it as `sluice exec` and `sluice run` enter the sandbox)
 * and everything in it killed (the daemon ending a sandbox, the CLI at a
 * command's timeout). Here, beside ns_enter, because the CLI links the
 * files that enter a sandbox and never the daemon's (gateway/cgroup.c
 * keeps where groups are and what limits become).
 */
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netns/netns.h"

#define NS_CG_PATH_MAX	1024

int
ns_cg_write(const char *dir, const char *file, const char *value)
{
	char path[2 * NS_CG_PATH_MAX + 64];
	size_t len = strlen(value);
	ssize_t w;
	int fd, saved;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >=
	    (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return -1;
	w = write(fd, value, len);
	saved = errno;
	close(fd);
	errno = saved;
	return w == (ssize_t)len ? 0 : -1;
}

ssize_t
ns_cg_read(const char *dir, const char *file, char *buf, size_t len)
{
	char path[2 * NS_CG_PATH_MAX + 64];
	ssize_t n, got = 0;
	int fd;

	if (len == 0 || snprintf(path, sizeof(path), "%s/%s", dir, file) >=
	    (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return -1;
	while ((size_t)got + 1 < len && (n = read(fd, buf + got,
	    len - 1 - (size_t)got)) > 0)
		got += n;
	close(fd);
	buf[got] = '\0';
	return got;
}

/* Signals every pid listed in dir/cgroup.procs; how many, or -1. */
static int
kill_listed(const char *dir)
{
	char buf[65536], *p, *end;
	long pid;
	int n = 0;

	if (ns_cg_read(dir, "cgroup.procs", buf, sizeof(buf)) == -1)
		return -1;
	for (p = buf; *p != '\0'; p = end) {
		pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
			n++;
		while (*end == '\n')
			end++;
	}
	return n;
}

int
ns_cg_kill(const char *dir)
{
	int total = 0, n, pass;

	if (ns_cg_write(dir, "cgroup.kill", "1") == 0)
		return 0;
	/* v1, or v2 before 5.14: signal the list until it is empty. */
	for (pass = 0; pass < 64; pass++) {
		if ((n = kill_listed(dir)) < 0)
			return pass == 0 ? -1 : total;
		if (n == 0)
			break;
		total += n;
	}
	return total;
}

