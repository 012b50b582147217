/*
 * ev: the daemon's one event loop (epoll, in the shape of Redis's early ae.c).
 * Every input of sluiced is a file descriptor here: the control and bridge
 * HTTP servers (libmicrohttpd's epoll fd), DNS sockets, netlink sockets,
 * signalfd, libcurl's sockets and the audit writer's completion eventfd.
 * Timers are one-shot; a periodic job re-arms itself. Single-threaded: call
 * ev_* only from the thread running ev_run.
 */
#ifndef SLUICE_GATEWAY_EV_H
#define SLUICE_GATEWAY_EV_H

#include <stdint.h>

#define EV_READ		0x1u
#define EV_WRITE	0x2u
#define EV_ERROR	0x4u	/* reported only: EPOLLERR or EPOLLHUP */

struct ev_loop;
struct ev_timer;

/* fd callback: events is a mask of EV_READ | EV_WRITE | EV_ERROR. */
typedef void ev_fd_cb(struct ev_loop *loop, int fd, unsigned events, void *arg);
/* timer callback: the timer is already gone when this runs. */
typedef void ev_timer_cb(struct ev_loop *loop, void *arg);

/* ev_new: a loop with no fds and no timers; NULL with errno on failure. */
struct ev_loop	*ev_new(void);
/* ev_free: closes the epoll fd and frees pending timers (not the fds
 * registered, which belong to their owners). ev_free(NULL) is a no-op. */
void		 ev_free(struct ev_loop *loop);

/* ev_add: watch fd for events (EV_READ/EV_WRITE, level-triggered). One
 * registration per fd; -1 with errno (EEXIST, ENOMEM, ...) on failure. */
int		 ev_add(struct ev_loop *loop, int fd, unsigned events,
		    ev_fd_cb *cb, void *arg);
/* ev_mod: change the mask of a registered fd. -1 with errno on failure. */
int		 ev_mod(struct ev_loop *loop, int fd, unsigned events);
/* ev_del: stop watching fd. Safe from inside any callback, including fd's
 * own; events already collected for fd in this iteration are dropped. */
void		 ev_del(struct ev_loop *loop, int fd);

/* ev_timer_add: run cb(arg) once, after ms milliseconds. The returned handle
 * is valid until the callback starts or ev_timer_cancel is called. NULL with
 * errno on allocation failure. */
struct ev_timer	*ev_timer_add(struct ev_loop *loop, uint64_t ms,
		    ev_timer_cb *cb, void *arg);
/* ev_defer: run cb(arg) once, after every fd callback of the current loop
 * iteration has run (or, when called from a timer or deferred callback, in
 * the next iteration, which then does not sleep). Lets a callback gather
 * work that several fds made ready and finish it in one go (the DNS proxy
 * learns all answers of an iteration in one netlink batch). Returns a timer
 * handle with ev_timer_add's contract: cancel it with ev_timer_cancel. NULL
 * with errno on allocation failure. */
struct ev_timer	*ev_defer(struct ev_loop *loop, ev_timer_cb *cb, void *arg);
/* ev_timer_cancel: the callback will not run. NULL is a no-op. */
void		 ev_timer_cancel(struct ev_loop *loop, struct ev_timer *t);

/* ev_run: dispatch until ev_stop. Returns 0, or -1 with errno if epoll
 * itself fails (EINTR is retried). */
int		 ev_run(struct ev_loop *loop);
/* ev_stop: ev_run returns after the current iteration. */
void		 ev_stop(struct ev_loop *loop);
/* ev_now_ms: CLOCK_MONOTONIC in milliseconds. */
uint64_t	 ev_now_ms(void);

#endif /* SLUICE_GATEWAY_EV_H */
