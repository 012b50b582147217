/*
 * check_br_shared: the bridge's worker for the budgets a fleet shares
 * (gateway/bridge/shared.c), without a database: every reservation it
 * cannot make is answered UNAVAILABLE through the loop (never inside the
 * call, never lost), in the order asked; a forgotten one is answered to
 * nobody; what it cannot carry is refused at once; the stats say the
 * database is down. The reservations themselves against PostgreSQL are
 * tests/e2e/t_fleet.sh's.
 */
#include <check.h>
#include <stdbool.h>
#include <string.h>

#include "gateway/bridge/shared.h"
#include "gateway/ev.h"
#include "tests/unit/run_suite.h"

#define NOWHERE	"host=/nonexistent/sluice-check dbname=x user=x"

struct seen {
	struct ev_loop	*loop;
	int		 n;
	int		 order[4];
	enum fleet_resv_outcome o[4];
	bool		 inside;	/* set while br_shared_reserve runs */
	bool		 early;		/* an answer came inside the call */
};

struct tagged {
	struct seen	*s;
	int		 tag;
};

static void
done(void *arg, enum fleet_resv_outcome o, const struct fleet_resv *r,
    size_t n, size_t which)
{
	struct seen *s = ((struct tagged *)arg)->s;
	int tag = ((struct tagged *)arg)->tag;

	(void)r;
	(void)n;
	(void)which;
	if (s->inside)
		s->early = true;
	if (s->n < 4) {
		s->order[s->n] = tag;
		s->o[s->n] = o;
	}
	s->n++;
	ev_stop(s->loop);
}

static void
too_long(struct ev_loop *loop, void *arg)
{
	(void)arg;
	ev_stop(loop);
	ck_abort_msg("no answer within 30 s");
}

static void
resv(struct fleet_resv *r, const char *owner)
{
	memset(r, 0, sizeof(*r));
	r->scope = FLEET_SCOPE_SUBJECT;
	r->owner = owner;
	r->name = "calls";
	r->calls = 1;
	r->limit_calls = 10;
}

START_TEST(down_is_unavailable)
{
	struct ev_loop *loop = ev_new();
	struct br_shared *sh;
	struct br_shared_stats st;
	struct fleet_resv r;
	struct seen s;
	struct tagged a = { &s, 1 }, b = { &s, 2 };
	struct ev_timer *t;
	char err[320];

	ck_assert_ptr_nonnull(loop);
	memset(&s, 0, sizeof(s));
	s.loop = loop;
	sh = br_shared_new(loop, NOWHERE, "pw", 500, err, sizeof(err));
	ck_assert_msg(sh != NULL, "%s", err);
	resv(&r, "alice");
	s.inside = true;
	ck_assert_ptr_nonnull(br_shared_reserve(sh, &r, 1, 1000, done, &a));
	ck_assert_ptr_nonnull(br_shared_reserve(sh, &r, 1, 1000, done, &b));
	s.inside = false;
	t = ev_timer_add(loop, 30000, too_long, NULL);
	while (s.n < 2)
		ck_assert_int_eq(ev_run(loop), 0);
	ev_timer_cancel(loop, t);
	ck_assert(!s.early);
	ck_assert_int_eq(s.order[0], 1);
	ck_assert_int_eq(s.order[1], 2);
	ck_assert_int_eq(s.o[0], FLEET_RESV_UNAVAILABLE);
	ck_assert_int_eq(s.o[1], FLEET_RESV_UNAVAILABLE);
	br_shared_stats(sh, &st);
	ck_assert_int_eq(st.up, 0);
	ck_assert_uint_ge(st.failures, 1);
	ck_assert_uint_eq(st.unavailable, 2);
	ck_assert_uint_eq(st.reserved, 0);
	ck_assert(st.last_error[0] != '\0');
	ck_assert_ptr_null(strstr(st.last_error, "pw"));
	br_shared_free(sh);
	ev_free(loop);
}
END_TEST

START_TEST(forgotten_is_answered_to_nobody)
{
	struct ev_loop *loop = ev_new();
	struct br_shared *sh;
	struct br_shared_job *j;
	struct fleet_resv r;
	struct seen s;
	struct tagged a = { &s, 1 }, b = { &s, 2 };
	struct ev_timer *t;
	char err[320];

	memset(&s, 0, sizeof(s));
	s.loop = loop;
	sh = br_shared_new(loop, NOWHERE, NULL, 500, err, sizeof(err));
	ck_assert_msg(sh != NULL, "%s", err);
	resv(&r, "alice");
	ck_assert_ptr_nonnull(j = br_shared_reserve(sh, &r, 1, 1000, done,
	    &a));
	br_shared_forget(j);
	ck_assert_ptr_nonnull(br_shared_reserve(sh, &r, 1, 1000, done, &b));
	t = ev_timer_add(loop, 30000, too_long, NULL);
	while (s.n < 1)
		ck_assert_int_eq(ev_run(loop), 0);
	ev_timer_cancel(loop, t);
	/* In order: the first was answered before the second, to nobody. */
	ck_assert_int_eq(s.n, 1);
	ck_assert_int_eq(s.order[0], 2);
	br_shared_forget(NULL);
	br_shared_free(sh);
	ev_free(loop);
}
END_TEST

START_TEST(refused_at_once)
{
	struct ev_loop *loop = ev_new();
	struct br_shared *sh;
	struct br_shared_stats st;
	struct fleet_resv r[FLEET_RESV_MAX + 1];
	struct seen s;
	struct tagged a = { &s, 1 };
	char err[320], big[400];
	size_t i;

	memset(&s, 0, sizeof(s));
	s.loop = loop;
	sh = br_shared_new(loop, NOWHERE, NULL, 500, err, sizeof(err));
	ck_assert_msg(sh != NULL, "%s", err);
	for (i = 0; i <= FLEET_RESV_MAX; i++)
		resv(&r[i], "alice");
	ck_assert_ptr_null(br_shared_reserve(sh, r, 0, 1000, done, &a));
	ck_assert_ptr_null(br_shared_reserve(sh, r, FLEET_RESV_MAX + 1,
	    1000, done, &a));
	ck_assert_ptr_null(br_shared_reserve(sh, r, 1, 1000, NULL, &a));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	r[0].owner = big;
	ck_assert_ptr_null(br_shared_reserve(sh, r, 1, 1000, done, &a));
	ck_assert_ptr_null(br_shared_reserve(NULL, r, 1, 1000, done, &a));
	/* A settlement it cannot carry is counted. */
	br_shared_settle(sh, r, 1, 10, 0);
	br_shared_stats(sh, &st);
	ck_assert_uint_eq(st.settle_failures, 1);
	br_shared_stats(NULL, &st);
	ck_assert_int_eq(st.up, 0);
	ck_assert_int_eq(s.n, 0);
	br_shared_free(sh);
	br_shared_free(NULL);
	ev_free(loop);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("br_shared");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, down_is_unavailable);
	tcase_add_test(tc, forgotten_is_answered_to_nobody);
	tcase_add_test(tc, refused_at_once);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
