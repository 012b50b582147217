/*
 * spawn: the starter of the bridge process's stdio MCP servers. The bridge
 * process runs under a seccomp filter that allows no exec, and an MCP
 * server (third-party code that meets agent input) must neither inherit
 * that filter (it would die on its first unlisted call) nor run with
 * Sluice's privileges. So the bridge process forks this starter before it
 * drops its own: the starter reads the stdio servers' credentials while it
 * still may, becomes the bridge's user without capabilities, and from then
 * on does one thing: start server i of the config when asked, and hand
 * back its pipes and a pidfd over a socket (SCM_RIGHTS). It builds every
 * server's command line and environment from its own copy of the config,
 * so a compromised bridge can only ask for a server the config declares.
 */
#ifndef SLUICE_GATEWAY_BRIDGE_SPAWN_H
#define SLUICE_GATEWAY_BRIDGE_SPAWN_H

#include <sys/types.h>

#include <stddef.h>

#include "policy/policy.h"

/*
 * brsp_start: forks the starter for cfg's stdio servers (as root, before
 * the caller drops its privileges): it reads their credentials (get, NULL
 * = getenv), drops to uid/gid (gateway/privsep/priv.h: no capabilities,
 * no_new_privs) and serves. Returns the caller's end of the socket
 * (close-on-exec, blocking) and the starter's pid in *pid, or -1 with a
 * message in err (a credential that cannot be read: the message br_new
 * would give). The starter exits when that socket closes, killing the
 * servers it started that are still running.
 */
int	brsp_start(const struct pol_config *cfg, const char *(*get)(const char *),
	    uid_t uid, gid_t gid, pid_t *pid, char *err, size_t errlen);

/*
 * brsp_spawn: asks the starter at fd to start server idx of the config.
 * 0 with the server's stdin (write end), stdout (read end) and a pidfd,
 * all close-on-exec; -1 with errno (EINVAL: not a stdio server of the
 * config; EPIPE: the starter is gone; ETIMEDOUT: it did not answer within
 * 10 s; others: the starter's fork, exec or pidfd error).
 */
int	brsp_spawn(int fd, size_t idx, int *in_fd, int *out_fd, int *pidfd);

#endif /* SLUICE_GATEWAY_BRIDGE_SPAWN_H */
