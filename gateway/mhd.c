/*
 * mhd.c: libmicrohttpd inside the ev loop (see gateway/mhd.h). Two servers
 * of sluiced (the control API and the MCP bridge) used to carry a copy each
 * of this driver; one copy means one place to get the timer and the resume
 * path right, and the resume path is what a tools/call waits on.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/log.h"
#include "gateway/mhd.h"

/* Passes of MHD_run at shutdown: resume, handler, write (see mhd_free). */
#define MHD_DRAIN_PASSES	4
/* MHD's own connection limit is ours plus this: a connection closed to
 * make room (shutdown below) still counts for MHD until its next run. */
#define MHD_EVICT_SLACK		64

/*
 * One connection, as the limits see it (only when the server has limits:
 * struct mhd_config). MHD owns the connection; we hold its address, its
 * socket (to shut it down: MHD then reads the end of the stream and closes
 * the connection itself, the only way to close one from outside MHD) and
 * where its current request is.
 */
struct mhd_conn {
	struct mhd		*m;
	struct mhd_conn		*next, *prev;
	int			 fd;
	struct sockaddr_storage	 addr;
	uint64_t		 since;		/* accept, or last request's end */
	unsigned		 calls;		/* handler calls, this request */
	bool			 received;	/* this request is all in */
	bool			 suspended;
	bool			 gone;		/* shut down, no longer counted */
	bool			 stream;	/* an endless answer that waits
						   for nobody's work: may make
						   room like an idle one */
	bool			 watched;	/* fd in the loop: peer_watch */
	unsigned		 extra;		/* connections its request
						   counts for (mhd_borrow) */
	struct MHD_Connection	*conn;
	struct ev_timer		*deadline;
};

struct mhd {
	struct ev_loop		*loop;
	struct MHD_Daemon	*d;
	int			 epfd;		/* MHD's epoll fd, in the loop */
	struct ev_timer		*timer;
	uint64_t		 timer_due;	/* ev_now_ms() deadline */
	char			 name[32];
	/* The caller's callbacks, which ours wrap, and the limits. */
	MHD_AccessHandlerCallback on_request;
	MHD_RequestCompletedCallback on_completed;
	void			*arg;
	unsigned		 conn_limit, per_ip_limit, recv_deadline_ms;
	bool			 track;		/* limits need struct mhd_conn */
	struct mhd_conn		*conns;
	size_t			 nconns;	/* not gone */
	size_t			 nextra;	/* their extra, in all */
	unsigned long long	 stat_refused, stat_evicted, stat_expired;
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
static void	arm(struct mhd *m, uint64_t ms);

/* ---------------------------------------------------------------- limits */

static void
addr_text(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	const void *a = ss->ss_family == AF_INET6 ?
	    (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr :
	    (const void *)&((const struct sockaddr_in *)ss)->sin_addr;

	if (inet_ntop(ss->ss_family, a, buf, (socklen_t)len) == NULL)
		snprintf(buf, len, "?");
}

/* The same client: the same address (the port does not count). */
static int
addr_cmp(const struct sockaddr_storage *a, const struct sockaddr *b)
{
	if (a->ss_family != b->sa_family)
		return a->ss_family < b->sa_family ? -1 : 1;
	if (a->ss_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
		    &((const struct sockaddr_in *)(const void *)b)->sin_addr,
		    4);
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		    &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
		    16);
	return 0;
}

static int
conn_addr_cmp(const void *x, const void *y)
{
	const struct mhd_conn *a = *(const struct mhd_conn *const *)x;
	const struct mhd_conn *b = *(const struct mhd_conn *const *)y;

	return addr_cmp(&a->addr, (const struct sockaddr *)&b->addr);
}

static struct mhd_conn *
conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci != NULL ? ci->socket_context : NULL;
}

/*
 * A suspended stream's socket is watched by nobody: MHD leaves suspended
 * connections out of its epoll set. A client that went away would then
 * hold its connection, a slot of its sandbox's, until the stream next
 * wrote (its keepalive). So while a stream is suspended its socket is in
 * the loop, for reading: its client's end (EOF, or an error) shuts the
 * connection at once. A client that sends bytes on a stream (nothing
 * should) is no longer watched, so that a level-triggered readable
 * socket cannot keep the loop busy; its keepalive still finds its end.
 */
static void	conn_shut(struct mhd_conn *mc);

static void
peer_unwatch(struct mhd_conn *mc)
{
	if (!mc->watched)
		return;
	mc->watched = false;
	ev_del(mc->m->loop, mc->fd);
}

static void
on_peer(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct mhd_conn *mc = arg;
	ssize_t n;
	char c;

	(void)loop;
	(void)events;
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
	    errno == EINTR))
		return;
	peer_unwatch(mc);
	if (n <= 0) {
		char a[INET6_ADDRSTRLEN];

		addr_text(&mc->addr, a, sizeof(a));
		log_info("%s: the client of an event stream from %s went "
		    "away: closed", mc->m->name, a);
		conn_shut(mc);
	}
}

static void
peer_watch(struct mhd_conn *mc)
{
	if (mc->watched || !mc->stream || mc->gone)
		return;
	if (ev_add(mc->m->loop, mc->fd, EV_READ, on_peer, mc) == 0)
		mc->watched = true;
}

/* Closes mc's connection from outside MHD: the socket is shut down, MHD
 * reads the end of the stream at its next run and closes the connection
 * (and tells us, on_connection). From now on mc does not count. */
static void
conn_shut(struct mhd_conn *mc)
{
	struct mhd *m = mc->m;

	if (mc->gone)
		return;
	peer_unwatch(mc);
	mc->gone = true;
	m->nconns--;
	m->nextra -= mc->extra;
	mc->extra = 0;
	ev_timer_cancel(m->loop, mc->deadline);
	mc->deadline = NULL;
	(void)shutdown(mc->fd, SHUT_RDWR);
	/* MHD watches no suspended socket: woken, it finds the end (the
	 * caller's content reader asks mhd_gone and stops). */
	if (mc->suspended && mc->conn != NULL) {
		mc->suspended = false;
		MHD_resume_connection(mc->conn);
	}
	arm(m, 0);
}

static void
on_deadline(struct ev_loop *loop, void *arg)
{
	struct mhd_conn *mc = arg;
	char a[INET6_ADDRSTRLEN];

	(void)loop;
	mc->deadline = NULL;
	addr_text(&mc->addr, a, sizeof(a));
	log_debug("%s: no whole request from %s within %u ms: closing",
	    mc->m->name, a, mc->m->recv_deadline_ms);
	mc->m->stat_expired++;
	conn_shut(mc);
}

/* (Re)starts mc's deadline for a whole request, from now. */
static void
deadline_arm(struct mhd_conn *mc)
{
	struct mhd *m = mc->m;

	ev_timer_cancel(m->loop, mc->deadline);
	mc->deadline = NULL;
	mc->since = ev_now_ms();
	if (m->recv_deadline_ms == 0 || mc->gone)
		return;
	if ((mc->deadline = ev_timer_add(m->loop, m->recv_deadline_ms,
	    on_deadline, mc)) == NULL) {
		/* Without a timer there is no deadline: closed now, the
		 * closed way to fail (the client may try again). */
		log_warn("%s: deadline timer", m->name);
		conn_shut(mc);
	}
}

/*
 * The connection to close so that a client whose address holds `mine'
 * connections gets one when every one is taken: of the address holding
 * the most (more than mine), the connection waiting longest for a request
 * (not one whose request is all in, being served or suspended). NULL when
 * there is none. Sorting by address keeps it O(n log n); it runs only when
 * the server is full.
 */
static struct mhd_conn *
conn_victim(struct mhd *m, size_t mine)
{
	struct mhd_conn **v, *mc, *best = NULL, *gbest;
	size_t n = 0, i, j, most = 0, cnt;

	if (m->nconns == 0 || (v = calloc(m->nconns, sizeof(*v))) == NULL)
		return NULL;
	for (mc = m->conns; mc != NULL && n < m->nconns; mc = mc->next)
		if (!mc->gone)
			v[n++] = mc;
	qsort(v, n, sizeof(*v), conn_addr_cmp);
	for (i = 0; i < n; i = j) {
		gbest = NULL;
		for (j = i; j < n && conn_addr_cmp(&v[j], &v[i]) == 0; j++)
			if (((!v[j]->received && !v[j]->suspended) ||
			    v[j]->stream) && (gbest == NULL || v[j]->since < gbest->since))
				gbest = v[j];
		cnt = j - i;
		if (gbest == NULL || cnt <= mine)
			continue;
		if (cnt > most || (cnt == most && gbest->since < best->since)) {
			most = cnt;
			best = gbest;
		}
	}
	free(v);
	return best;
}

/* MHD's accept policy: before MHD makes a connection of it. */
static enum MHD_Result
on_accept(void *cls, const struct sockaddr *sa, socklen_t len)
{
	struct mhd *m = cls;
	struct mhd_conn *mc, *victim = NULL;
	struct sockaddr_storage ss;
	char a[INET6_ADDRSTRLEN];
	size_t mine = 0;

	if (sa == NULL || len == 0)
		return MHD_NO;
	for (mc = m->conns; mc != NULL; mc = mc->next)
		if (!mc->gone && addr_cmp(&mc->addr, sa) == 0)
			mine += 1 + mc->extra;
	if ((m->per_ip_limit != 0 && mine >= m->per_ip_limit) ||
	    (m->conn_limit != 0 && m->nconns + m->nextra >= m->conn_limit &&
	    (victim = conn_victim(m, mine)) == NULL)) {
		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, sa, len < sizeof(ss) ? len : sizeof(ss));
		addr_text(&ss, a, sizeof(a));
		/* Debug only: a client over its share may try thousands of
		 * times a second. Counted (mhd_stats). */
		log_debug("%s: connection from %s refused: it holds %zu of "
		    "%zu", m->name, a, mine, m->nconns);
		m->stat_refused++;
		return MHD_NO;
	}
	if (victim != NULL) {
		m->stat_evicted++;
		conn_shut(victim);
	}
	return MHD_YES;
}

/* MHD's connection notifications: start and end of every connection. */
static void
on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
    enum MHD_ConnectionNotificationCode code)
{
	struct mhd *m = cls;
	struct mhd_conn *mc;
	const union MHD_ConnectionInfo *fi, *ai;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if ((mc = *socket_context) == NULL)
			return;
		*socket_context = NULL;
		peer_unwatch(mc);
		ev_timer_cancel(m->loop, mc->deadline);
		if (!mc->gone) {
			m->nconns--;
			m->nextra -= mc->extra;
		}
		if (mc->prev != NULL)
			mc->prev->next = mc->next;
		else
			m->conns = mc->next;
		if (mc->next != NULL)
			mc->next->prev = mc->prev;
		free(mc);
		return;
	}
	if (code != MHD_CONNECTION_NOTIFY_STARTED)
		return;
	*socket_context = NULL;
	fi = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	ai = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (fi == NULL || (mc = calloc(1, sizeof(*mc))) == NULL) {
		/* Untracked, it would escape the limits: not served. */
		if (fi != NULL)
			(void)shutdown(fi->connect_fd, SHUT_RDWR);
		m->stat_refused++;
		return;
	}
	mc->m = m;
	mc->fd = fi->connect_fd;
	mc->conn = conn;
	if (ai != NULL && ai->client_addr != NULL)
		memcpy(&mc->addr, ai->client_addr,
		    ai->client_addr->sa_family == AF_INET6 ?
		    sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	mc->next = m->conns;
	if (m->conns != NULL)
		m->conns->prev = mc;
	m->conns = mc;
	m->nconns++;
	*socket_context = mc;
	deadline_arm(mc);
}

/* The caller's access handler, seeing where each request is: the first
 * call comes with the headers, then one per piece of body, then one with
 * nothing (the request is all in: its deadline ends). */
static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **con_cls)
{
	struct mhd *m = cls;
	struct mhd_conn *mc;

	if (m->track && (mc = conn_of(conn)) != NULL && !mc->received) {
		if (mc->calls > 0 && *upload_size == 0) {
			mc->received = true;
			ev_timer_cancel(m->loop, mc->deadline);
			mc->deadline = NULL;
		}
		mc->calls++;
	}
	return m->on_request(m->arg, conn, url, method, version, upload,
	    upload_size, con_cls);
}

/* The caller's completion callback; on a kept-alive connection the next
 * request's deadline starts here. */
static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct mhd *m = cls;
	struct mhd_conn *mc;

	if (m->on_completed != NULL)
		m->on_completed(m->arg, conn, con_cls, toe);
	if (m->track && (mc = conn_of(conn)) != NULL && !mc->gone) {
		mc->calls = 0;
		mc->received = false;
		mc->suspended = false;
		peer_unwatch(mc);
		deadline_arm(mc);
	}
}

void
mhd_stats(const struct mhd *m, unsigned long long *refused,
    unsigned long long *evicted, unsigned long long *expired)
{
	if (refused != NULL)
		*refused = m != NULL ? m->stat_refused : 0;
	if (evicted != NULL)
		*evicted = m != NULL ? m->stat_evicted : 0;
	if (expired != NULL)
		*expired = m != NULL ? m->stat_expired : 0;
}

/* ------------------------------------------------------------------ MHD */

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
	unsigned limit;
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
	m->on_request = c->on_request;
	m->on_completed = c->on_completed;
	m->arg = c->arg;
	m->per_ip_limit = c->per_ip_limit;
	m->conn_limit = c->per_ip_limit != 0 ? c->conn_limit : 0;
	m->recv_deadline_ms = c->recv_deadline_ms;
	m->track = c->per_ip_limit != 0 || c->recv_deadline_ms != 0;
	/* MHD's own limit: ours plus room for connections being closed to
	 * make room (our accounting decides), or the plain limit. */
	limit = c->conn_limit != 0 ? c->conn_limit : (unsigned)FD_SETSIZE - 4;
	if (m->conn_limit != 0)
		limit += MHD_EVICT_SLACK;
	/*
	 * The external logger comes first so that MHD never prints on its
	 * own. MHD sets TCP_NODELAY on accepted sockets itself and sends a
	 * small response (headers and body) in one sendmsg, so no Nagle
	 * delay sits between an answer and the client.
	 */
	/* The per-address limit is ours (on_accept), not MHD's: MHD's only
	 * refuses, ours also makes room for a client holding fewer. Without
	 * limits the accept policy and the notifications are left out. */
	m->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
	    MHD_USE_ERROR_LOG, 0, m->track ? on_accept : NULL, m,
	    on_request, m,
	    MHD_OPTION_EXTERNAL_LOGGER, on_log, m,
	    MHD_OPTION_LISTEN_SOCKET, c->listen_fd,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, m,
	    MHD_OPTION_NOTIFY_CONNECTION, m->track ? on_connection : NULL, m,
	    MHD_OPTION_CONNECTION_TIMEOUT, c->conn_timeout_s,
	    MHD_OPTION_CONNECTION_LIMIT, limit,
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
	struct mhd_conn *mc;

	/* Never closed to make room while suspended: it is waiting for us,
	 * not for its client. */
	if (m->track && (mc = conn_of(conn)) != NULL) {
		mc->suspended = true;
		peer_watch(mc);
	}
	MHD_suspend_connection(conn);
}

void
mhd_resume(struct mhd *m, struct MHD_Connection *conn)
{
	struct mhd_conn *mc;

	if (m->track && (mc = conn_of(conn)) != NULL) {
		mc->suspended = false;
		peer_unwatch(mc);
	}
	MHD_resume_connection(conn);
	/*
	 * MHD's inter-thread channel makes its epoll fd readable, but only
	 * for the next epoll_wait. A zero-delay timer runs MHD in this
	 * iteration's timer pass, after the callback that resumed us has
	 * returned: never inside another MHD callback.
	 */
	arm(m, 0);
}

void
mhd_streaming(struct mhd *m, struct MHD_Connection *conn)
{
	struct mhd_conn *mc;

	if (!m->track || (mc = conn_of(conn)) == NULL)
		return;
	mc->received = true;
	mc->stream = true;
	ev_timer_cancel(m->loop, mc->deadline);
	mc->deadline = NULL;
}

void
mhd_close(struct mhd *m, struct MHD_Connection *conn)
{
	struct mhd_conn *mc;

	/* Untracked (no limits), there is no socket to shut: the caller's
	 * reader ends the answer itself. */
	if (m->track && (mc = conn_of(conn)) != NULL)
		conn_shut(mc);
	else
		arm(m, 0);
}

int
mhd_borrow(struct mhd *m, struct MHD_Connection *conn, int delta)
{
	struct mhd_conn *mc = NULL, *o;
	size_t mine = 0;

	if (!m->track || conn == NULL || (mc = conn_of(conn)) == NULL)
		return 0;
	if (mc->gone)
		return delta > 0 ? -1 : 0;
	if (delta < 0) {
		unsigned d = (unsigned)-delta < mc->extra ? (unsigned)-delta :
		    mc->extra;

		mc->extra -= d;
		m->nextra -= d;
		return 0;
	}
	for (o = m->conns; o != NULL; o = o->next)
		if (!o->gone && addr_cmp(&o->addr,
		    (const struct sockaddr *)&mc->addr) == 0)
			mine += 1 + o->extra;
	if ((m->per_ip_limit != 0 && mine + (unsigned)delta >
	    m->per_ip_limit) || (m->conn_limit != 0 && m->nconns + m->nextra +
	    (unsigned)delta > m->conn_limit))
		return -1;
	mc->extra += (unsigned)delta;
	m->nextra += (unsigned)delta;
	return 0;
}

bool
mhd_gone(struct mhd *m, struct MHD_Connection *conn)
{
	struct mhd_conn *mc;

	return m->track && (mc = conn_of(conn)) != NULL && mc->gone;
}
