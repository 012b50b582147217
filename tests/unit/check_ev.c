/*
 * check_ev: the daemon's event loop (gateway/ev.c), in particular
 * ev_defer, which the DNS proxy relies on to learn every answer of a loop
 * iteration in one netlink batch: the deferred job must run only after
 * every fd callback of that iteration, exactly once, never when cancelled,
 * and a job deferred from a timer or deferred callback must still run (in
 * the next iteration) instead of being lost or starving the loop. Each
 * test bounds its loop with a guard timer that stops it and fails the
 * test: a bug shows up as a failure, never as a hang.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/ev.h"

#define GUARD_MS	5000	/* a bound, not a timing assumption */

struct st {
	struct ev_loop	*loop;
	int		 fdcalls;	/* fd callbacks run */
	int		 fdcalls_at_defer; /* fdcalls when the job ran */
	int		 deferred;	/* deferred job runs */
	int		 timers;
	int		 guard_fired;
	int		 pipes[4][2];
	struct ev_timer	*pending;
	int		 order[8];
	int		 norder;
};

static void
guard_cb(struct ev_loop *loop, void *arg)
{
	struct st *s = arg;

	s->guard_fired = 1;
	ev_stop(loop);
}

static void
stop_cb(struct ev_loop *loop, void *arg)
{
	(void)arg;
	ev_stop(loop);
}

static void
deferred_cb(struct ev_loop *loop, void *arg)
{
	struct st *s = arg;

	(void)loop;
	s->deferred++;
	s->fdcalls_at_defer = s->fdcalls;
}

static void
deferred_stop_cb(struct ev_loop *loop, void *arg)
{
	deferred_cb(loop, arg);
	ev_stop(loop);
}

/* Every readable pipe: drain it, and the first one defers the job. */
static void
fd_cb(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct st *s = arg;
	char b[16];

	ck_assert(events & EV_READ);
	if (read(fd, b, sizeof(b)) < 0)
		ck_abort_msg("read: %s", strerror(errno));
	ev_del(loop, fd);
	if (s->fdcalls++ == 0)
		ck_assert_ptr_nonnull(ev_defer(loop, deferred_stop_cb, s));
}

static void
setup_pipes(struct st *s, int n)
{
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(pipe(s->pipes[i]), 0);
		ck_assert_int_eq(write(s->pipes[i][1], "x", 1), 1);
		ck_assert_int_eq(ev_add(s->loop, s->pipes[i][0], EV_READ, fd_cb,
		    s), 0);
	}
}

static void
close_pipes(struct st *s, int n)
{
	for (int i = 0; i < n; i++) {
		close(s->pipes[i][0]);
		close(s->pipes[i][1]);
	}
}

/* Four fds ready in the same iteration: the job deferred by the first
 * callback runs once, after all four. */
START_TEST(defer_after_all_fd_callbacks)
{
	struct st s;

	memset(&s, 0, sizeof(s));
	s.loop = ev_new();
	ck_assert_ptr_nonnull(s.loop);
	setup_pipes(&s, 4);
	ck_assert_ptr_nonnull(ev_timer_add(s.loop, GUARD_MS, guard_cb, &s));
	ck_assert_int_eq(ev_run(s.loop), 0);
	ck_assert_int_eq(s.guard_fired, 0);
	ck_assert_int_eq(s.deferred, 1);
	ck_assert_int_eq(s.fdcalls_at_defer, 4);
	close_pipes(&s, 4);
	ev_free(s.loop);
}
END_TEST

static void
cancel_in_fd_cb(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct st *s = arg;
	char b[16];

	(void)events;
	if (read(fd, b, sizeof(b)) < 0)
		ck_abort_msg("read: %s", strerror(errno));
	ev_del(loop, fd);
	s->fdcalls++;
	/* Defer, then change our mind: the job must not run. A later
	 * zero-delay timer ends the loop after the deferred one would have
	 * run. */
	s->pending = ev_defer(loop, deferred_cb, s);
	ck_assert_ptr_nonnull(s->pending);
	ev_timer_cancel(loop, s->pending);
	ck_assert_ptr_nonnull(ev_timer_add(loop, 0, stop_cb, s));
}

START_TEST(defer_cancelled_never_runs)
{
	struct st s;

	memset(&s, 0, sizeof(s));
	s.loop = ev_new();
	ck_assert_ptr_nonnull(s.loop);
	ck_assert_int_eq(pipe(s.pipes[0]), 0);
	ck_assert_int_eq(write(s.pipes[0][1], "x", 1), 1);
	ck_assert_int_eq(ev_add(s.loop, s.pipes[0][0], EV_READ,
	    cancel_in_fd_cb, &s), 0);
	ck_assert_ptr_nonnull(ev_timer_add(s.loop, GUARD_MS, guard_cb, &s));
	ck_assert_int_eq(ev_run(s.loop), 0);
	ck_assert_int_eq(s.guard_fired, 0);
	ck_assert_int_eq(s.fdcalls, 1);
	ck_assert_int_eq(s.deferred, 0);
	close_pipes(&s, 1);
	ev_free(s.loop);
}
END_TEST

/* A job deferred from a deferred job runs too, in a later iteration (the
 * loop does not sleep in between: no fd is ready and the guard is far). */
static void
chain_cb(struct ev_loop *loop, void *arg)
{
	struct st *s = arg;

	s->order[s->norder++] = ++s->deferred;
	if (s->deferred < 3)
		ck_assert_ptr_nonnull(ev_defer(loop, chain_cb, s));
	else
		ev_stop(loop);
}

static void
timer_then_defer_cb(struct ev_loop *loop, void *arg)
{
	struct st *s = arg;

	s->timers++;
	ck_assert_ptr_nonnull(ev_defer(loop, chain_cb, s));
}

START_TEST(defer_from_timer_and_defer)
{
	struct st s;

	memset(&s, 0, sizeof(s));
	s.loop = ev_new();
	ck_assert_ptr_nonnull(s.loop);
	ck_assert_ptr_nonnull(ev_timer_add(s.loop, 0, timer_then_defer_cb,
	    &s));
	ck_assert_ptr_nonnull(ev_timer_add(s.loop, GUARD_MS, guard_cb, &s));
	ck_assert_int_eq(ev_run(s.loop), 0);
	ck_assert_int_eq(s.guard_fired, 0);
	ck_assert_int_eq(s.timers, 1);
	ck_assert_int_eq(s.deferred, 3);
	ck_assert_int_eq(s.norder, 3);
	ck_assert_int_eq(s.order[2], 3);
	ev_free(s.loop);
}
END_TEST

/* Jobs that defer again every iteration must not hold back due timers:
 * an fd always ready defers a job, which defers another (the DNS proxy's
 * answer path does this on every answer). A 1 ms timer must still fire;
 * the iteration bound turns the bug into a failure instead of a hang. */
#define SPIN_MAX	2000000

static void
spin_inner_cb(struct ev_loop *loop, void *arg)
{
	(void)loop;
	(void)arg;
}

static void
spin_outer_cb(struct ev_loop *loop, void *arg)
{
	ck_assert_ptr_nonnull(ev_defer(loop, spin_inner_cb, arg));
}

static void
spin_fd_cb(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct st *s = arg;

	(void)fd;
	(void)events;
	if (++s->fdcalls >= SPIN_MAX)
		ev_stop(loop);
	else
		ck_assert_ptr_nonnull(ev_defer(loop, spin_outer_cb, s));
}

static void
spin_timer_cb(struct ev_loop *loop, void *arg)
{
	struct st *s = arg;

	s->timers++;
	ev_stop(loop);
}

START_TEST(defer_chain_does_not_starve_timers)
{
	struct st s;

	memset(&s, 0, sizeof(s));
	s.loop = ev_new();
	ck_assert_ptr_nonnull(s.loop);
	ck_assert_int_eq(pipe(s.pipes[0]), 0);
	ck_assert_int_eq(write(s.pipes[0][1], "x", 1), 1);	/* never read */
	ck_assert_int_eq(ev_add(s.loop, s.pipes[0][0], EV_READ, spin_fd_cb,
	    &s), 0);
	ck_assert_ptr_nonnull(ev_timer_add(s.loop, 1, spin_timer_cb, &s));
	ck_assert_int_eq(ev_run(s.loop), 0);
	ck_assert_msg(s.timers == 1, "the timer never fired in %d iterations",
	    s.fdcalls);
	ck_assert_int_lt(s.fdcalls, SPIN_MAX);
	ev_del(s.loop, s.pipes[0][0]);
	close_pipes(&s, 1);
	ev_free(s.loop);
}
END_TEST

/* A pending deferred job is freed with the loop (ASan's leak check). */
START_TEST(defer_pending_freed_with_loop)
{
	struct ev_loop *l = ev_new();
	struct st s;

	memset(&s, 0, sizeof(s));
	ck_assert_ptr_nonnull(l);
	ck_assert_ptr_nonnull(ev_defer(l, deferred_cb, &s));
	ev_free(l);
	ck_assert_int_eq(s.deferred, 0);
	ev_free(NULL);
}
END_TEST

/* Bad arguments: ev_add refuses a negative fd and a missing callback;
 * ev_mod of an fd never added is ENOENT. */
START_TEST(ev_bad_arguments)
{
	struct ev_loop *l = ev_new();

	ck_assert_ptr_nonnull(l);
	errno = 0;
	ck_assert_int_eq(ev_add(l, -1, EV_READ, fd_cb, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ev_add(l, 0, EV_READ, NULL, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ev_mod(l, 12345, EV_READ), -1);
	ck_assert_int_eq(errno, ENOENT);
	ev_del(l, 12345);	/* not registered: a no-op */
	ev_timer_cancel(l, NULL);
	ev_free(l);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("ev");
	TCase *tc = tcase_create("Core"), *tl = tcase_create("Limits");
	SRunner *sr;
	int nf;

	tcase_add_test(tc, defer_after_all_fd_callbacks);
	tcase_add_test(tc, defer_cancelled_never_runs);
	tcase_add_test(tc, defer_from_timer_and_defer);
	tcase_add_test(tc, defer_pending_freed_with_loop);
	tcase_add_test(tc, defer_chain_does_not_starve_timers);
	suite_add_tcase(s, tc);
	tcase_add_test(tl, ev_bad_arguments);
	suite_add_tcase(s, tl);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
