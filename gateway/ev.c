/*
 * ev.c: epoll plus a binary heap of one-shot timers. Cancellation is lazy (the
 * heap entry stays, its callback is cleared) so that cancel is O(1) and safe
 * from inside callbacks; a cancelled entry costs memory only until its
 * deadline. Fd handlers live in a table indexed by fd, so dispatch never
 * searches.
 */
#include <sys/epoll.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/ev.h"

struct ev_fdh {
	ev_fd_cb	*cb;
	void		*arg;
	unsigned	 mask;
	unsigned	 gen;	/* bumped on del: stale events are skipped */
};

struct ev_timer {
	uint64_t	 when;
	uint64_t	 order;	/* FIFO among equal deadlines */
	ev_timer_cb	*cb;
	void		*arg;
};

struct ev_loop {
	int		  epfd;
	int		  stop;
	struct ev_fdh	 *fds;
	size_t		  nfds;
	struct ev_timer	**heap;
	size_t		  nheap, capheap;
	uint64_t	  order;
	int		  in_timers;	/* run_timers is running callbacks */
	uint64_t	  timers_now;	/* the clock it read when it began */
};

uint64_t
ev_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct ev_loop *
ev_new(void)
{
	struct ev_loop *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd == -1) {
		free(l);
		return NULL;
	}
	return l;
}

void
ev_free(struct ev_loop *l)
{
	size_t i;

	if (l == NULL)
		return;
	for (i = 0; i < l->nheap; i++)
		free(l->heap[i]);
	free(l->heap);
	free(l->fds);
	close(l->epfd);
	free(l);
}

static uint32_t
to_epoll(unsigned m)
{
	return ((m & EV_READ) ? EPOLLIN : 0) | ((m & EV_WRITE) ? EPOLLOUT : 0);
}

int
ev_add(struct ev_loop *l, int fd, unsigned events, ev_fd_cb *cb, void *arg)
{
	struct epoll_event ee;

	if (fd < 0 || cb == NULL) {
		errno = EINVAL;
		return -1;
	}
	if ((size_t)fd >= l->nfds) {
		size_t n = l->nfds ? l->nfds : 64;
		struct ev_fdh *p;

		while (n <= (size_t)fd)
			n *= 2;
		p = realloc(l->fds, n * sizeof(*p));
		if (p == NULL)
			return -1;
		memset(p + l->nfds, 0, (n - l->nfds) * sizeof(*p));
		l->fds = p;
		l->nfds = n;
	}
	if (l->fds[fd].cb != NULL) {
		errno = EEXIST;
		return -1;
	}
	memset(&ee, 0, sizeof(ee));
	ee.events = to_epoll(events);
	ee.data.fd = fd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ee) == -1)
		return -1;
	l->fds[fd].cb = cb;
	l->fds[fd].arg = arg;
	l->fds[fd].mask = events;
	return 0;
}

int
ev_mod(struct ev_loop *l, int fd, unsigned events)
{
	struct epoll_event ee;

	if (fd < 0 || (size_t)fd >= l->nfds || l->fds[fd].cb == NULL) {
		errno = ENOENT;
		return -1;
	}
	memset(&ee, 0, sizeof(ee));
	ee.events = to_epoll(events);
	ee.data.fd = fd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ee) == -1)
		return -1;
	l->fds[fd].mask = events;
	return 0;
}

void
ev_del(struct ev_loop *l, int fd)
{
	if (fd < 0 || (size_t)fd >= l->nfds || l->fds[fd].cb == NULL)
		return;
	/* The fd may already be closed by its owner; ignore the error. */
	(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	l->fds[fd].cb = NULL;
	l->fds[fd].arg = NULL;
	l->fds[fd].gen++;
}

static int
heap_less(const struct ev_timer *a, const struct ev_timer *b)
{
	return a->when < b->when || (a->when == b->when && a->order < b->order);
}

static void
heap_up(struct ev_loop *l, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		struct ev_timer *t;

		if (!heap_less(l->heap[i], l->heap[p]))
			break;
		t = l->heap[i];
		l->heap[i] = l->heap[p];
		l->heap[p] = t;
		i = p;
	}
}

static void
heap_down(struct ev_loop *l, size_t i)
{
	for (;;) {
		size_t a = 2 * i + 1, b = a + 1, m = i;
		struct ev_timer *t;

		if (a < l->nheap && heap_less(l->heap[a], l->heap[m]))
			m = a;
		if (b < l->nheap && heap_less(l->heap[b], l->heap[m]))
			m = b;
		if (m == i)
			break;
		t = l->heap[i];
		l->heap[i] = l->heap[m];
		l->heap[m] = t;
		i = m;
	}
}

static struct ev_timer *
timer_push(struct ev_loop *l, uint64_t when, ev_timer_cb *cb, void *arg)
{
	struct ev_timer *t;

	if (l->nheap == l->capheap) {
		size_t n = l->capheap ? l->capheap * 2 : 64;
		struct ev_timer **p = realloc(l->heap, n * sizeof(*p));

		if (p == NULL)
			return NULL;
		l->heap = p;
		l->capheap = n;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->when = when;
	t->order = l->order++;
	t->cb = cb;
	t->arg = arg;
	l->heap[l->nheap++] = t;
	heap_up(l, l->nheap - 1);
	return t;
}

struct ev_timer *
ev_timer_add(struct ev_loop *l, uint64_t ms, ev_timer_cb *cb, void *arg)
{
	return timer_push(l, ev_now_ms() + ms, cb, arg);
}

/* A deadline of 0 is always due and sorts before every real deadline, so a
 * deferred job runs in the run_timers that follows this iteration's fd
 * callbacks (they are dispatched before run_timers, and run_timers takes
 * every entry whose order is below the counter it read when it started).
 * A job deferred by a timer or deferred callback runs in the next
 * iteration instead; it gets the deadline run_timers began with, so that
 * it sorts after every timer already due: at the top of the heap it would
 * end this run_timers (its order is past the limit) and hold back due
 * timers for as long as each iteration defers again, as the DNS proxy
 * does on every answer. */
struct ev_timer *
ev_defer(struct ev_loop *l, ev_timer_cb *cb, void *arg)
{
	return timer_push(l, l->in_timers ? l->timers_now : 0, cb, arg);
}

void
ev_timer_cancel(struct ev_loop *l, struct ev_timer *t)
{
	(void)l;
	if (t != NULL)
		t->cb = NULL;
}

void
ev_stop(struct ev_loop *l)
{
	l->stop = 1;
}

/* Pops and runs every timer due now. Timers added by callbacks with a zero
 * delay run in the next iteration, so a timer cannot starve fds. */
static void
run_timers(struct ev_loop *l)
{
	uint64_t now = ev_now_ms(), limit = l->order;

	l->in_timers = 1;
	l->timers_now = now;
	while (l->nheap > 0 && l->heap[0]->when <= now &&
	    l->heap[0]->order < limit) {
		struct ev_timer *t = l->heap[0];
		ev_timer_cb *cb = t->cb;
		void *arg = t->arg;

		l->heap[0] = l->heap[--l->nheap];
		heap_down(l, 0);
		free(t);
		if (cb != NULL)
			cb(l, arg);
	}
	l->in_timers = 0;
}

static int
next_timeout(struct ev_loop *l)
{
	uint64_t now;

	while (l->nheap > 0 && l->heap[0]->cb == NULL) {
		free(l->heap[0]);
		l->heap[0] = l->heap[--l->nheap];
		heap_down(l, 0);
	}
	if (l->nheap == 0)
		return 1000;
	now = ev_now_ms();
	if (l->heap[0]->when <= now)
		return 0;
	return l->heap[0]->when - now > 1000 ? 1000 :
	    (int)(l->heap[0]->when - now);
}

int
ev_run(struct ev_loop *l)
{
	struct epoll_event evs[64];
	unsigned gens[64];

	l->stop = 0;
	while (!l->stop) {
		int n, i;

		n = epoll_wait(l->epfd, evs, 64, next_timeout(l));
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		for (i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			gens[i] = (size_t)fd < l->nfds ? l->fds[fd].gen : 0;
		}
		for (i = 0; i < n && !l->stop; i++) {
			int fd = evs[i].data.fd;
			unsigned m = 0;
			struct ev_fdh *h;

			if ((size_t)fd >= l->nfds)
				continue;
			h = &l->fds[fd];
			/* Deleted (or deleted and re-added) during this batch. */
			if (h->cb == NULL || h->gen != gens[i])
				continue;
			if (evs[i].events & EPOLLIN)
				m |= EV_READ;
			if (evs[i].events & EPOLLOUT)
				m |= EV_WRITE;
			if (evs[i].events & (EPOLLERR | EPOLLHUP))
				m |= EV_ERROR;
			h->cb(l, fd, m, h->arg);
		}
		run_timers(l);
	}
	return 0;
}
