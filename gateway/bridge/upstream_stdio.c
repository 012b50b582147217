/*
 * upstream_stdio: MCP servers that are child processes speaking
 * newline-delimited JSON-RPC on stdin/stdout (transports.mdx §stdio). It
 * exists to start them with only the environment the config declares (plus
 * the credential in the declared variable: the daemon's own environment
 * never leaks into them), to move bytes through non-blocking pipes in the
 * ev loop, to cap what a hostile child can make us buffer, and to notice
 * when one dies so the upstream layer can restart it.
 */
#include <sys/prctl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <linux/capability.h>
#include <linux/securebits.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"

static void	on_out(struct ev_loop *loop, int fd, unsigned events, void *arg);
static void	on_in(struct ev_loop *loop, int fd, unsigned events, void *arg);

/* The child's environment: the config's K=V entries and the credential;
 * PATH only if the config gives one. */
char **
br_stdio_env(const struct pol_mcp_server *s, const char *secret)
{
	char **env;
	size_t i, n = 0;

	if ((env = calloc(s->nenv + 2, sizeof(char *))) == NULL)
		return NULL;
	for (i = 0; i < s->nenv; i++)
		if ((env[n++] = strdup(s->env[i])) == NULL)
			goto fail;
	if (secret != NULL && s->cred_child_env != NULL) {
		size_t len = strlen(s->cred_child_env) + strlen(secret) + 2;

		if ((env[n] = malloc(len)) == NULL)
			goto fail;
		snprintf(env[n++], len, "%s=%s", s->cred_child_env, secret);
	}
	return env;
fail:
	for (i = 0; i < n; i++)
		free(env[i]);
	free(env);
	return NULL;
}

void
br_stdio_env_free(char **env)
{
	size_t i;

	for (i = 0; env != NULL && env[i] != NULL; i++) {
		explicit_bzero(env[i], strlen(env[i]));
		free(env[i]);
	}
	free(env);
}

/*
 * In the child, before exec: sluiced runs as root with CAP_SYS_ADMIN and
 * CAP_NET_ADMIN, which an MCP server (third-party code meeting agent input)
 * must not inherit. Root regains every capability in the bounding set at
 * exec, so: empty the inheritable and ambient sets, drop the whole bounding
 * set, and lock SECBIT_NOROOT so uid 0 means no capabilities; no_new_privs
 * keeps setuid binaries from giving any back. Either of the last two
 * suffices (with CAP_SETPCAP both work); when neither can be had, the child
 * does not run: 0 ready, -1 refuse. Only raw syscalls (async-signal-safe).
 */
static int
child_drop_caps(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	int c, bset_left = 0, noroot;

	if (syscall(SYS_capget, &h, d) == -1)
		return -1;
	for (c = 0; c < _LINUX_CAPABILITY_U32S_3; c++)
		d[c].inheritable = 0;
	if (syscall(SYS_capset, &h, d) == -1)
		return -1;
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	for (c = 0; c <= 63; c++) {
		if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) != 1)
			continue;	/* not in the set, or past the last */
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == -1)
			bset_left = 1;
	}
	noroot = prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
	    SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
	    SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
	    0, 0, 0) == 0;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		return -1;
	return bset_left && !noroot ? -1 : 0;
}

int
br_stdio_fork(const struct pol_mcp_server *srv, char *const *env,
    int *in_w, int *out_r, pid_t *pidp)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, devnull, saved;
	pid_t pid;

	if (srv->argc == 0 || srv->argv == NULL) {
		errno = EINVAL;
		return -1;
	}
	if (pipe2(in, O_CLOEXEC) == -1 || pipe2(out, O_CLOEXEC) == -1)
		goto fail;
	if ((pid = fork()) == -1)
		goto fail;
	if (pid == 0) {
		/* Only async-signal-safe calls from here on. */
		sigset_t none;

		/* Its own session first: a signal the server sends its
		 * process group (kill(0, ...), common in Node tooling) must
		 * not reach sluiced, nor a terminal's signals meant for
		 * sluiced reach the child (sluiced closes it in order); the
		 * sooner, the smaller the window in which it shares ours. */
		(void)setsid();
		devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (dup2(in[0], 0) == -1 || dup2(out[1], 1) == -1 ||
		    (devnull != -1 && dup2(devnull, 2) == -1))
			_exit(127);
		/* Nothing of sluiced's but the three: a descriptor some
		 * library opened without close-on-exec (libcurl's sockets,
		 * the audit database) must not reach third-party code. */
		(void)syscall(SYS_close_range, 3U, ~0U, 0U);
		/* sluiced blocks SIGTERM, SIGINT and SIGHUP for its
		 * signalfd; the mask survives exec, and the server must
		 * get the SIGTERM that asks it to stop. */
		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		if (child_drop_caps() == -1)
			_exit(126);
		/* The daemon's PATH finds the program; the child gets only
		 * the declared environment. */
		execvpe(srv->argv[0], srv->argv, env);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*in_w = in[1];
	*out_r = out[0];
	*pidp = pid;
	return 0;
fail:
	saved = errno;
	if (in[0] != -1) {
		close(in[0]);
		close(in[1]);
	}
	if (out[0] != -1) {
		close(out[0]);
		close(out[1]);
	}
	errno = saved;
	return -1;
}

int
br_stdio_spawn(struct br_up *u)
{
	int in_w, out_r, saved, rc;
	char **env;
	pid_t pid = 0;

	if (u->srv->argc == 0 || u->srv->argv == NULL) {
		errno = EINVAL;
		return -1;
	}
	if ((env = br_stdio_env(u->srv, u->secret)) == NULL)
		return -1;
	/* Started elsewhere when the bridge cannot exec (its process is
	 * under a seccomp filter that an MCP server must not inherit). */
	if (u->br->c.spawn != NULL)
		rc = u->br->c.spawn(u->br->c.spawn_ctx, u->srv, &in_w, &out_r,
		    &u->pidfd);
	else
		rc = br_stdio_fork(u->srv, env, &in_w, &out_r, &pid);
	saved = errno;
	br_stdio_env_free(env);
	if (rc == -1) {
		errno = saved;
		return -1;
	}
	u->has_pidfd = u->br->c.spawn != NULL;
	u->pid = pid;
	u->in_fd = in_w;
	u->out_fd = out_r;
	u->rlen = u->wlen = 0;
	if (fcntl(u->in_fd, F_SETFL, O_NONBLOCK) == -1 ||
	    fcntl(u->out_fd, F_SETFL, O_NONBLOCK) == -1 ||
	    ev_add(u->br->loop, u->out_fd, EV_READ, on_out, u) == -1) {
		br_stdio_close(u);
		return -1;
	}
	return 0;
}

/* A server started elsewhere: its starter reaps it; we only ask it to go
 * and make sure it has, within the same ~100 ms as our own children. */
static void
stop_pidfd(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	if (syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0) == -1)
		return;		/* gone already */
	if (poll(&p, 1, 100) == 1)
		return;
	(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	(void)poll(&p, 1, 1000);
}

void
br_stdio_close(struct br_up *u)
{
	int status, i;

	if (u->in_fd != -1) {
		ev_del(u->br->loop, u->in_fd);
		close(u->in_fd);
		u->in_fd = -1;
	}
	if (u->out_fd != -1) {
		ev_del(u->br->loop, u->out_fd);
		close(u->out_fd);
		u->out_fd = -1;
	}
	if (u->pid > 0) {
		/* stdin closed is the polite request (lifecycle.mdx);
		 * then SIGTERM, then SIGKILL. Bounded: at most ~100 ms. */
		(void)kill(u->pid, SIGTERM);
		for (i = 0; i < 20; i++) {
			if (waitpid(u->pid, &status, WNOHANG) != 0)
				break;
			usleep(5000);
		}
		if (i == 20) {
			(void)kill(u->pid, SIGKILL);
			(void)waitpid(u->pid, &status, 0);
		}
		u->pid = 0;
	}
	if (u->has_pidfd) {
		stop_pidfd(u->pidfd);
		close(u->pidfd);
		u->has_pidfd = false;
	}
	free(u->rbuf);
	free(u->wbuf);
	u->rbuf = u->wbuf = NULL;
	u->rlen = u->rcap = u->wlen = u->wcap = 0;
}

static void
flush_out(struct br_up *u)
{
	ssize_t n;

	while (u->wlen > 0) {
		n = write(u->in_fd, u->wbuf, u->wlen);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			break;
		if (n <= 0) {
			br_up_failed(u, "cannot write to the child");
			return;
		}
		memmove(u->wbuf, u->wbuf + n, u->wlen - (size_t)n);
		u->wlen -= (size_t)n;
	}
	if (u->wlen > 0)
		(void)ev_add(u->br->loop, u->in_fd, EV_WRITE, on_in, u);
	else
		ev_del(u->br->loop, u->in_fd);
}

static void
on_in(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	(void)loop;
	(void)fd;
	(void)events;
	flush_out(arg);
}

int
br_stdio_send(struct br_up *u, json_t *msg)
{
	char *s;
	size_t len;
	ssize_t n;

	if (u->in_fd == -1) {
		errno = EPIPE;
		return -1;
	}
	/* Compact JSON escapes newlines inside strings: one line each. */
	if ((s = json_dumps(msg, JSON_COMPACT)) == NULL)
		return -1;
	len = strlen(s);
	if (u->wlen + len + 1 > u->wcap) {
		size_t cap = u->wcap ? u->wcap : 4096;
		char *p;

		while (cap < u->wlen + len + 1)
			cap *= 2;
		if ((p = realloc(u->wbuf, cap)) == NULL) {
			free(s);
			return -1;
		}
		u->wbuf = p;
		u->wcap = cap;
	}
	memcpy(u->wbuf + u->wlen, s, len);
	u->wbuf[u->wlen + len] = '\n';
	u->wlen += len + 1;
	free(s);
	/* Behind earlier bytes: the registered writer sends them in order. */
	if (u->wlen != len + 1)
		return 0;
	/*
	 * An idle pipe takes a message whole (a pipe holds 64 KiB): write it
	 * now rather than in a second loop turn, which would cost the call
	 * an epoll round trip. Only a complete write is settled here. Short
	 * writes and errors go to the loop's writer, because a failed write
	 * tears the upstream down and frees its pending requests, which our
	 * caller is still about to use.
	 */
	n = write(u->in_fd, u->wbuf, u->wlen);
	if (n > 0) {
		memmove(u->wbuf, u->wbuf + n, u->wlen - (size_t)n);
		u->wlen -= (size_t)n;
		if (u->wlen == 0)
			return 0;
	}
	if (ev_add(u->br->loop, u->in_fd, EV_WRITE, on_in, u) == -1 &&
	    errno != EEXIST) {
		/* Out of memory in epoll. The rest of a torn message is
		 * dropped: the line the child finally reads is not JSON it
		 * can run, so both requests fail (by timeout), closed. */
		if (n > 0)
			u->wlen = 0;
		else
			u->wlen -= len + 1;
		return -1;
	}
	return 0;
}

static void
on_out(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct br_up *u = arg;
	char *nl, *p;
	size_t from, off = 0;
	ssize_t n;
	json_t *msg;
	json_error_t jerr;

	(void)loop;
	(void)events;
	if (u->rcap - u->rlen < 65536) {
		size_t cap = u->rcap ? u->rcap * 2 : 65536;

		if (cap > BR_LINE_MAX + 65536 ||
		    (p = realloc(u->rbuf, cap)) == NULL) {
			br_up_failed(u, "message too long");
			return;
		}
		u->rbuf = p;
		u->rcap = cap;
	}
	n = read(fd, u->rbuf + u->rlen, u->rcap - u->rlen);
	if (n == -1 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		br_up_failed(u, "the child exited");
		return;
	}
	/* The bytes held before this read have no LF (every line was
	 * taken): only the new ones are searched, and the lines taken are
	 * moved out once, at the end. Searching from the start, or moving
	 * the rest after each line, would make a long line sent in small
	 * writes, or a read of many short lines, cost its size squared. */
	from = u->rlen;
	u->rlen += (size_t)n;
	/* Deliver whole lines; the upstream may be closed by a callback
	 * (its buffer freed), so re-check the fd each time. */
	while (u->out_fd == fd && (nl = memchr(u->rbuf + from, '\n',
	    u->rlen - from)) != NULL) {
		/* Empty lines carry nothing: not worth a parse. */
		msg = nl == u->rbuf + off ? NULL : json_loadb(u->rbuf + off,
		    (size_t)(nl - (u->rbuf + off)), JSON_REJECT_DUPLICATES,
		    &jerr);
		from = off = (size_t)(nl - u->rbuf) + 1;
		/* Non-JSON lines are the server's bug; skip them. */
		if (msg != NULL) {
			br_up_deliver(u, msg);
			json_decref(msg);
		}
	}
	if (u->out_fd != fd)
		return;
	if (off > 0) {
		memmove(u->rbuf, u->rbuf + off, u->rlen - off);
		u->rlen -= off;
	}
	if (u->rlen > BR_LINE_MAX)
		br_up_failed(u, "message too long");
}
