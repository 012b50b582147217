/*
 * mhd.c: libmicrohttpd inside the ev loop (see gateway/mhd.h). Two servers
 * of sluiced (the control API and the MCP bridge) used to carry a copy each
 * of this driver; one copy means one place to get the timer and the resume
 * path right, and the resume path is what a tools/call waits on.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/log.h"
#include "gateway/mhd.h"

/* Passes of MHD_run at shutdown: resume, handler, write (see mhd_free). */
#define MHD_DRAIN_PASSES	4

struct mhd {
	struct ev_loop		*loop;
	struct MHD_Daemon	*d;
	int			 epfd;		/* MHD's epoll fd, in the loop */
	struct ev_timer		*timer;
	uint64_t		 timer_due;	/* ev_now_ms() deadline */
	char			 name[32];
};

static void
on_log(void *cls, const char *fmt, va_list ap)
{
	struct mhd *m = cls;
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	log_debug("%s: libmicrohttpd: %s", m->name, msg);
}

static void	on_timer(struct ev_loop *loop, void *arg);

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Percent-decoding of the path and query arguments, as MHD's own (lenient:
 * a '%' without two hex digits stays as it is) except that "%00" is left
 * encoded. Decoded, it would end the C string MHD hands us: the path
 * "/v1/sandboxes/a%00b" would name sandbox "a", a request acting on an id
 * the client never sent. Kept as text, such an id matches nothing.
 */
static size_t
unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	char *r = s, *w = s;
	int hi, lo;

	(void)cls;
	(void)conn;
	while (*r != '\0') {
		if (r[0] == '%' && (hi = hexval(r[1])) != -1 &&
		    (lo = hexval(r[2])) != -1 && (hi != 0 || lo != 0)) {
			*w++ = (char)(hi << 4 | lo);
			r += 3;
		} else
			*w++ = *r++;
	}
	*w = '\0';
	return (size_t)(w - s);
}

/* Keep one timer that fires no later than MHD needs: an early run is
 * harmless and re-arms, while replacing the timer on every run would leave
 * a cancelled entry per request in the loop's heap. */
static void
arm(struct mhd *m, uint64_t ms)
{
	uint64_t now = ev_now_ms();

	if (m->timer != NULL && m->timer_due <= now + ms)
		return;
	ev_timer_cancel(m->loop, m->timer);
	if ((m->timer = ev_timer_add(m->loop, ms, on_timer, m)) == NULL) {
		/* The fd still drives MHD; only idle timeouts are late. */
		log_warn("%s: timer", m->name);
		return;
	}
	m->timer_due = now + ms;
}

void
mhd_run(struct mhd *m)
{
	MHD_UNSIGNED_LONG_LONG ms;

	if (m == NULL || m->d == NULL)
		return;
	if (MHD_run(m->d) == MHD_NO)
		log_debug("%s: MHD_run failed", m->name);
	if (MHD_get_timeout(m->d, &ms) == MHD_YES)
		arm(m, ms > 1000 * 1000 ? 1000 * 1000 : (uint64_t)ms);
}

static void
on_timer(struct ev_loop *loop, void *arg)
{
	struct mhd *m = arg;

	(void)loop;
	m->timer = NULL;
	mhd_run(m);
}

static void
on_fd(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	(void)loop;
	(void)fd;
	(void)events;
	mhd_run(arg);
}

struct mhd *
mhd_new(struct ev_loop *loop, const struct mhd_config *c, char *err,
    size_t errlen)
{
	const union MHD_DaemonInfo *di;
	struct mhd *m;
	int saved;

	if (loop == NULL || c == NULL || c->listen_fd < 0 ||
	    c->on_request == NULL) {
		snprintf(err, errlen, "http server: bad call");
		if (c != NULL && c->listen_fd >= 0)
			close(c->listen_fd);
		errno = EINVAL;
		return NULL;
	}
	if ((m = calloc(1, sizeof(*m))) == NULL) {
		saved = errno;
		snprintf(err, errlen, "%s: out of memory", c->name != NULL ?
		    c->name : "http server");
		close(c->listen_fd);
		errno = saved;
		return NULL;
	}
	m->loop = loop;
	m->epfd = -1;
	snprintf(m->name, sizeof(m->name), "%s", c->name != NULL ? c->name :
	    "http");
	/*
	 * The external logger comes first so that MHD never prints on its
	 * own. MHD sets TCP_NODELAY on accepted sockets itself and sends a
	 * small response (headers and body) in one sendmsg, so no Nagle
	 * delay sits between an answer and the client.
	 */
	m->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
	    MHD_USE_ERROR_LOG, 0, NULL, NULL, c->on_request, c->arg,
	    MHD_OPTION_EXTERNAL_LOGGER, on_log, m,
	    MHD_OPTION_LISTEN_SOCKET, c->listen_fd,
	    MHD_OPTION_NOTIFY_COMPLETED, c->on_completed, c->arg,
	    MHD_OPTION_CONNECTION_TIMEOUT, c->conn_timeout_s,
	    MHD_OPTION_CONNECTION_LIMIT, c->conn_limit != 0 ? c->conn_limit :
	    (unsigned)FD_SETSIZE - 4,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, c->per_ip_limit,
	    MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
	    MHD_OPTION_END);
	if (m->d == NULL) {
		snprintf(err, errlen, "%s: cannot start the HTTP server",
		    m->name);
		close(c->listen_fd);
		free(m);
		errno = EIO;
		return NULL;
	}
	/* From here on MHD owns the listening socket. */
	di = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_EPOLL_FD);
	if (di == NULL || (m->epfd = di->epoll_fd) < 0) {
		saved = EIO;
		goto fail;
	}
	if (ev_add(loop, m->epfd, EV_READ, on_fd, m) == -1) {
		saved = errno;
		m->epfd = -1;
		goto fail;
	}
	mhd_run(m);
	return m;
fail:
	snprintf(err, errlen, "%s: %s", m->name, strerror(saved));
	MHD_stop_daemon(m->d);
	free(m);
	errno = saved;
	return NULL;
}

void
mhd_free(struct mhd *m)
{
	int i;

	if (m == NULL)
		return;
	if (m->epfd != -1)
		ev_del(m->loop, m->epfd);
	ev_timer_cancel(m->loop, m->timer);
	/* Resumed connections get their answer out while the socket buffer
	 * has room; what is left is closed by the stop. */
	for (i = 0; i < MHD_DRAIN_PASSES; i++)
		(void)MHD_run(m->d);
	MHD_stop_daemon(m->d);
	free(m);
}

struct MHD_Daemon *
mhd_daemon(const struct mhd *m)
{
	return m->d;
}

void
mhd_suspend(struct mhd *m, struct MHD_Connection *conn)
{
	(void)m;
	MHD_suspend_connection(conn);
}

void
mhd_resume(struct mhd *m, struct MHD_Connection *conn)
{
	MHD_resume_connection(conn);
	/*
	 * MHD's inter-thread channel makes its epoll fd readable, but only
	 * for the next epoll_wait. A zero-delay timer runs MHD in this
	 * iteration's timer pass, after the callback that resumed us has
	 * returned: never inside another MHD callback.
	 */
	arm(m, 0);
}
