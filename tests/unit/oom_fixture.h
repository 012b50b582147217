/*
 * oom_fixture.h: allocation-failure injection for the suites linked with
 * -Wl,--wrap over the allocators (check_policy_oom, check_audit_oom; see
 * their Makefile rules), written once.
 *
 * Included by exactly one .c per suite binary: it defines static storage
 * and functions, and the __wrap_malloc and __wrap_calloc every such suite
 * needs; a suite wraps further allocators itself, each calling
 * oom_fault(). arm(N) makes the N-th allocation (from 0) of this thread
 * fail, counting from then on; disarm() stops and returns how many were
 * made. State is per thread, so another thread of the code under test (the
 * audit writer) is never failed nor counted. OOM_TRACE=N prints where
 * allocation N is made, to find it.
 */
#ifndef TESTS_UNIT_OOM_FIXTURE_H
#define TESTS_UNIT_OOM_FIXTURE_H

#include <execinfo.h>
#include <stdlib.h>

static _Thread_local int	oom_armed;
static _Thread_local long	oom_fail_at = -1, oom_seen;

void	*__real_malloc(size_t);
void	*__real_calloc(size_t, size_t);

static int
oom_fault(void)
{
	const char *t;

	if (!oom_armed || oom_seen++ != oom_fail_at)
		return 0;
	if ((t = getenv("OOM_TRACE")) != NULL && atol(t) == oom_seen - 1) {
		void *bt[16];

		backtrace_symbols_fd(bt, backtrace(bt, 16), 2);
	}
	return 1;
}

void *
__wrap_malloc(size_t n)
{
	return oom_fault() ? NULL : __real_malloc(n);
}

void *
__wrap_calloc(size_t n, size_t sz)
{
	return oom_fault() ? NULL : __real_calloc(n, sz);
}

static void
arm(long at)
{
	oom_seen = 0;
	oom_fail_at = at;
	oom_armed = 1;
}

static long
disarm(void)
{
	oom_armed = 0;
	oom_fail_at = -1;
	return oom_seen;
}

#endif
