/*
 * ns_isolate.c: a sandbox namespace cut off while processes still hold
 * it (sandboxes.on_end: isolate, and the grace before SIGKILL). Removing
 * the pin and retiring the host link leaves the pair to the kernel, which
 * deletes it only with the namespace: as long as a process keeps the
 * namespace, its eth0 stays. Here the pair goes at once, deleted from
 * inside, by a child that joins the namespace (the daemon's own threads
 * never change namespace), so nothing of the link is left on either side.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "netns/netns.h"
#include "netns/ns_int.h"

int
ns_isolate(int nsfd, char *err, size_t errlen)
{
	struct ns_rtnl *r;
	pid_t pid;
	int st, rc;

	if ((pid = fork()) == -1) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		/* Only kernel calls here, none a process in the namespace
		 * can make wait: the parent's wait is bounded by them. */
		if (setns(nsfd, CLONE_NEWNET) == -1)
			_exit(2);
		if ((r = ns_rtnl_new()) == NULL)
			_exit(3);
		rc = ns_rtnl_link_del(r, NS_SANDBOX_IF) == 0 || errno == ENODEV ?
		    0 : 4;
		_exit(rc);
	}
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR) {
			snprintf(err, errlen, "waitpid: %s", strerror(errno));
			return -1;
		}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(err, errlen, "%s: cannot delete (step %d)",
		    NS_SANDBOX_IF, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return -1;
	}
	return 0;
}
