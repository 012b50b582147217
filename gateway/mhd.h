/*
 * mhd: one libmicrohttpd server driven by the daemon's ev loop. The control
 * API (gateway/ctl/) and the MCP bridge (gateway/bridge/front.c) both run
 * MHD in "external epoll" mode inside the single-threaded loop; this module
 * is the one place that knows how: it starts the daemon on a listening
 * socket the caller made, puts MHD's epoll fd in the loop, calls MHD_run
 * when that fd is readable and when MHD's own deadline (idle connection
 * timeouts) is due, and runs MHD again right after a suspended connection
 * is resumed, so an answer that arrives from elsewhere in the loop (an
 * upstream, the audit writer, an approval) goes out in the same loop
 * iteration instead of at the next timer tick.
 *
 * The caller keeps the HTTP logic: its access handler and completion
 * callback are plain libmicrohttpd callbacks, and it reads requests and
 * queues responses with the MHD API as usual.
 */
#ifndef SLUICE_GATEWAY_MHD_H
#define SLUICE_GATEWAY_MHD_H

#include <stdbool.h>

#include <microhttpd.h>

#include "gateway/ev.h"

struct mhd;

/*
 * Limits for servers that face untrusted clients (the bridge; the control
 * API leaves them 0). A client is its address (a sandbox has one).
 *
 * per_ip_limit: connections one address may hold at once; one more is
 * closed at accept. conn_limit: connections at once in all. When every one
 * is taken, a newcomer whose address holds fewer than the address holding
 * the most takes a slot of that address: its connection waiting longest
 * for a request (never one whose request is being served or is suspended)
 * is closed. So no one client, nor a few of them together, can lock the
 * others out; a newcomer whose address holds the most (or ties) is
 * refused. With per_ip_limit 0, conn_limit is MHD's own plain limit.
 *
 * recv_deadline_ms: a request's line, headers and body must all be in
 * within this of the accept (for the first request) or of the end of the
 * previous request (the next on a kept-alive connection); past it the
 * connection is closed. A deadline, not an idle timeout: a client sending
 * a byte every few seconds is closed as surely as a silent one.
 * conn_timeout_s stays MHD's idle timeout (a client that reads no answer).
 */
struct mhd_config {
	const char		*name;		/* for log lines ("bridge") */
	int			 listen_fd;	/* bound, listening, non-blocking */
	MHD_AccessHandlerCallback on_request;
	MHD_RequestCompletedCallback on_completed;	/* may be NULL */
	void			*arg;		/* for both callbacks */
	unsigned		 conn_timeout_s;	/* idle connections */
	unsigned		 conn_limit;		/* 0: MHD's default */
	unsigned		 per_ip_limit;		/* 0: none */
	unsigned		 recv_deadline_ms;	/* 0: none */
};

/* mhd_new: start serving c->listen_fd on loop (borrowed; it must outlive
 * the mhd). The listening socket belongs to the mhd from this call on:
 * closed by mhd_free, or already closed when mhd_new fails. Connections may be
 * suspended (MHD_ALLOW_SUSPEND_RESUME); resume them with mhd_resume. The
 * path and query arguments are percent-decoded, except "%00", which stays
 * as it is (a NUL would cut the string short). NULL with errno and a
 * message in err on failure. */
struct mhd	*mhd_new(struct ev_loop *loop, const struct mhd_config *c,
		    char *err, size_t errlen);
/* mhd_free: leave the loop, let MHD send what resumed connections have
 * queued (a few passes, never blocking), then stop it: remaining
 * connections are closed and their completion callbacks run. Every
 * suspended connection must have been resumed first (MHD refuses to stop
 * otherwise). mhd_free(NULL) is a no-op. */
void		 mhd_free(struct mhd *m);

/* mhd_daemon: the libmicrohttpd daemon (borrowed), for MHD_* calls. */
struct MHD_Daemon *mhd_daemon(const struct mhd *m);

/* mhd_suspend: MHD_suspend_connection; call it from the access handler
 * only, as MHD requires. A streaming connection (mhd_streaming) is then
 * watched in the loop, and shut at once when its client goes away. */
void		 mhd_suspend(struct mhd *m, struct MHD_Connection *conn);
/* mhd_resume: wake a suspended connection; MHD calls its access handler
 * again (where the caller queues its response) within the current loop
 * iteration. Safe from any callback of the loop, including other MHD
 * servers' handlers: MHD itself runs from a zero-delay timer, never from
 * inside this call. */
void		 mhd_resume(struct mhd *m, struct MHD_Connection *conn);

/* mhd_streaming: conn's request is all in and its answer is an endless
 * stream (an SSE stream for server messages): no request deadline runs on
 * it any more, and when the server is full it may be closed to make room
 * as a connection waiting for a request may (it waits for nobody's work,
 * and its client may open it again). */
void		 mhd_streaming(struct mhd *m, struct MHD_Connection *conn);
/* mhd_close: close streaming conn from outside MHD now (its socket is
 * shut down, and resumed if suspended): it stops counting against the
 * limits at once, whether or not its client reads. Its content reader
 * must then end the answer (mhd_gone says when). Without limits nothing
 * is tracked: the caller resumes conn and its reader ends the answer. */
void		 mhd_close(struct mhd *m, struct MHD_Connection *conn);
/* mhd_borrow: conn's request does the work of delta (> 0) more
 * connections at once (a JSON-RPC batch's messages in flight): they count
 * against its address's per_ip_limit and the conn_limit as connections
 * would, until given back (delta < 0) or the connection closes. -1 when
 * they do not fit (nothing counted); 0 otherwise, and always without
 * limits. */
int		 mhd_borrow(struct mhd *m, struct MHD_Connection *conn,
		    int delta);
/* mhd_gone: conn was closed from outside (mhd_close, or to make room). */
bool		 mhd_gone(struct mhd *m, struct MHD_Connection *conn);

/* mhd_stats: connections refused at accept (over per_ip_limit, or full
 * with nobody to give way), closed to make room for another client, and
 * closed by recv_deadline_ms, since mhd_new. Any pointer may be NULL. */
void		 mhd_stats(const struct mhd *m, unsigned long long *refused,
		    unsigned long long *evicted, unsigned long long *expired);

/* mhd_run: run MHD now and re-arm its deadline timer. For callers that
 * need MHD to make progress outside the loop (shutdown paths); never call
 * it from inside one of this mhd's own MHD callbacks. */
void		 mhd_run(struct mhd *m);

#endif /* SLUICE_GATEWAY_MHD_H */
