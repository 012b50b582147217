/*
 * mhd: one libmicrohttpd server driven by the daemon's ev loop. The control
 * API (gateway/ctl.c) and the MCP bridge (gateway/bridge/server.c) both run
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

#include <microhttpd.h>

#include "gateway/ev.h"

struct mhd;

struct mhd_config {
	const char		*name;		/* for log lines ("bridge") */
	int			 listen_fd;	/* bound, listening, non-blocking */
	MHD_AccessHandlerCallback on_request;
	MHD_RequestCompletedCallback on_completed;	/* may be NULL */
	void			*arg;		/* for both callbacks */
	unsigned		 conn_timeout_s;	/* idle connections */
	unsigned		 conn_limit;		/* 0: MHD's default */
	unsigned		 per_ip_limit;		/* 0: none */
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
 * only, as MHD requires. */
void		 mhd_suspend(struct mhd *m, struct MHD_Connection *conn);
/* mhd_resume: wake a suspended connection; MHD calls its access handler
 * again (where the caller queues its response) within the current loop
 * iteration. Safe from any callback of the loop, including other MHD
 * servers' handlers: MHD itself runs from a zero-delay timer, never from
 * inside this call. */
void		 mhd_resume(struct mhd *m, struct MHD_Connection *conn);

/* mhd_run: run MHD now and re-arm its deadline timer. For callers that
 * need MHD to make progress outside the loop (shutdown paths); never call
 * it from inside one of this mhd's own MHD callbacks. */
void		 mhd_run(struct mhd *m);

#endif /* SLUICE_GATEWAY_MHD_H */
