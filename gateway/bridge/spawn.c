/*
 * spawn.c: the starter of stdio MCP servers (see spawn.h). It is a small
 * process on purpose: a request is one fixed-size integer, an answer one
 * integer with three descriptors, and everything it starts comes from the
 * config it was forked with. It is not under the bridge's seccomp filter
 * (its children must exec), but it parses nothing a sandbox wrote.
 */
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/bridge/br_int.h"
#include "gateway/bridge/spawn.h"
#include "gateway/log.h"
#include "gateway/privsep/priv.h"

#define BRSP_MAX_LIVE		256	/* servers it keeps track of */
#define BRSP_REPLY_WAIT_MS	10000

struct brsp_req {
	uint32_t	idx;
};

struct brsp_reply {
	int32_t		err_no;		/* 0: three descriptors came along */
};

/* Sends the answer, with the descriptors when there are any. */
static void
reply(int sock, int err_no, const int fds[3])
{
	struct brsp_reply r = { .err_no = err_no };
	union {
		struct cmsghdr	h;
		char		buf[CMSG_SPACE(3 * sizeof(int))];
	} u;
	struct iovec v = { .iov_base = &r, .iov_len = sizeof(r) };
	struct msghdr m;
	struct cmsghdr *c;

	memset(&m, 0, sizeof(m));
	m.msg_iov = &v;
	m.msg_iovlen = 1;
	if (err_no == 0) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(3 * sizeof(int));
		memcpy(CMSG_DATA(c), fds, 3 * sizeof(int));
	}
	(void)sendmsg(sock, &m, MSG_NOSIGNAL);
}

static void
reap(pid_t *live, size_t *nlive)
{
	size_t i;
	pid_t p;

	while ((p = waitpid(-1, NULL, WNOHANG)) > 0)
		for (i = 0; i < *nlive; i++)
			if (live[i] == p) {
				live[i] = live[--*nlive];
				break;
			}
}

static void
serve(int sock, const struct pol_config *cfg, char **secrets)
{
	pid_t live[BRSP_MAX_LIVE];
	size_t nlive = 0, i;
	struct pollfd p = { .fd = sock, .events = POLLIN };
	struct brsp_req rq;
	const struct pol_mcp_server *s;
	char **env;
	int fds[3], e;
	pid_t pid;
	ssize_t n;

	for (;;) {
		reap(live, &nlive);
		/* The poll's timeout is only for reaping: a server that
		 * died waits at most this long as a zombie. */
		if (poll(&p, 1, 1000) <= 0)
			continue;
		n = recv(sock, &rq, sizeof(rq), 0);
		if (n == -1 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(rq))
			break;	/* the bridge is gone (or spoke nonsense) */
		if (rq.idx >= cfg->nservers ||
		    (s = &cfg->servers[rq.idx])->transport != POL_MCP_STDIO ||
		    nlive >= BRSP_MAX_LIVE) {
			reply(sock, rq.idx >= cfg->nservers ? EINVAL : EAGAIN,
			    NULL);
			continue;
		}
		if ((env = br_stdio_env(s, secrets[rq.idx])) == NULL) {
			reply(sock, ENOMEM, NULL);
			continue;
		}
		e = br_stdio_fork(s, env, &fds[0], &fds[1], &pid) == -1 ?
		    errno : 0;
		br_stdio_env_free(env);
		if (e != 0) {
			reply(sock, e, NULL);
			continue;
		}
		live[nlive++] = pid;
		/* Before any wait: a server that died at once is a zombie
		 * still, and its pidfd says so. */
		if ((fds[2] = (int)syscall(SYS_pidfd_open, pid, 0)) == -1) {
			e = errno;
			(void)kill(pid, SIGKILL);
			close(fds[0]);
			close(fds[1]);
			reply(sock, e, NULL);
			continue;
		}
		(void)fcntl(fds[2], F_SETFD, FD_CLOEXEC);
		reply(sock, 0, fds);
		for (i = 0; i < 3; i++)
			close(fds[i]);
	}
	/* Nothing it started outlives the bridge it served. */
	for (i = 0; i < nlive; i++)
		(void)kill(live[i], SIGKILL);
	while (waitpid(-1, NULL, 0) > 0)
		;
}

int
brsp_start(const struct pol_config *cfg, const char *(*get)(const char *),
    uid_t uid, gid_t gid, pid_t *pidp, char *err, size_t errlen)
{
	char **secrets;
	char derr[256];
	int sv[2];
	size_t i;
	pid_t pid;

	if ((secrets = calloc(cfg->nservers + 1, sizeof(char *))) == NULL) {
		snprintf(err, errlen, "stdio starter: %s", strerror(errno));
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(err, errlen, "stdio starter: %s", strerror(errno));
		free(secrets);
		return -1;
	}
	if ((pid = fork()) == -1) {
		snprintf(err, errlen, "stdio starter: fork: %s",
		    strerror(errno));
		close(sv[0]);
		close(sv[1]);
		free(secrets);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		/* Only the stdio servers' credentials: the HTTP ones are
		 * the bridge's, never this process's. */
		for (i = 0; i < cfg->nservers; i++) {
			const struct pol_mcp_server *s = &cfg->servers[i];

			if (s->transport != POL_MCP_STDIO ||
			    (s->cred_file == NULL && s->cred_env == NULL))
				continue;
			if ((secrets[i] = br_secret_read(s, get, derr,
			    sizeof(derr))) == NULL) {
				log_warnx("stdio starter: %s", derr);
				_exit(1);
			}
		}
		/* Nothing of the bridge's but the socket. */
		for (i = 3; i < 1024; i++)
			if ((int)i != sv[1])
				(void)close((int)i);
		if (priv_drop(uid, gid, NULL, derr, sizeof(derr)) == -1) {
			log_warnx("stdio starter: %s", derr);
			_exit(1);
		}
		log_procinit("stdio");
		serve(sv[1], cfg, secrets);
		_exit(0);
	}
	close(sv[1]);
	free(secrets);
	*pidp = pid;
	return sv[0];
}

int
brsp_spawn(int fd, size_t idx, int *in_fd, int *out_fd, int *pidfd)
{
	struct brsp_req rq = { .idx = (uint32_t)idx };
	struct brsp_reply r;
	union {
		struct cmsghdr	h;
		char		buf[CMSG_SPACE(3 * sizeof(int))];
	} u;
	struct iovec v = { .iov_base = &r, .iov_len = sizeof(r) };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct msghdr m;
	struct cmsghdr *c;
	int fds[3];
	ssize_t n;

	if (idx > UINT32_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (send(fd, &rq, sizeof(rq), MSG_NOSIGNAL) != (ssize_t)sizeof(rq))
		return -1;
	/* A start is a fork and an exec: the starter answers in
	 * milliseconds, or it is broken. */
	if (poll(&p, 1, BRSP_REPLY_WAIT_MS) != 1) {
		errno = ETIMEDOUT;
		return -1;
	}
	memset(&m, 0, sizeof(m));
	m.msg_iov = &v;
	m.msg_iovlen = 1;
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	if ((n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC)) != (ssize_t)sizeof(r)) {
		errno = n == 0 ? EPIPE : EPROTO;
		return -1;
	}
	c = CMSG_FIRSTHDR(&m);
	if (r.err_no != 0) {
		errno = r.err_no;
		return -1;
	}
	if (c == NULL || c->cmsg_level != SOL_SOCKET ||
	    c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(3 * sizeof(int))) {
		errno = EPROTO;
		return -1;
	}
	memcpy(fds, CMSG_DATA(c), sizeof(fds));
	*in_fd = fds[0];
	*out_fd = fds[1];
	*pidfd = fds[2];
	return 0;
}
