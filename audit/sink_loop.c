/*
 * sink_loop: a sink's delivery loop and its durable cursor. A batch is read
 * from the cursor, handed to the transport, and only a positive
 * acknowledgement moves the cursor (at-least-once). Failures back off
 * exponentially with jitter; the lag is kept current for /metrics, and a
 * sink too far behind raises one finding.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "audit/sink.h"

int64_t
aud_sk_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
commit_cursor(struct aud_sink *s, const struct aud_sk_batch *b, char *err,
    size_t errlen)
{
	sqlite3_int64 ns = (sqlite3_int64)time(NULL) * 1000000000;

	if (sqlite3_exec(s->wr, "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
	    SQLITE_OK)
		goto fail;
	sqlite3_reset(s->q_upd);
	sqlite3_bind_text(s->q_upd, 1, s->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s->q_upd, 2, (sqlite3_int64)b->next);
	sqlite3_bind_int64(s->q_upd, 3, ns);
	if (sqlite3_step(s->q_upd) != SQLITE_DONE)
		goto rollback;
	sqlite3_reset(s->q_upd);
	sqlite3_bind_text(s->q_upd, 1, s->ckname, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s->q_upd, 2, (sqlite3_int64)b->ck_next);
	sqlite3_bind_int64(s->q_upd, 3, ns);
	if (sqlite3_step(s->q_upd) != SQLITE_DONE)
		goto rollback;
	sqlite3_reset(s->q_upd);
	if (sqlite3_exec(s->wr, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto rollback;
	return 0;
rollback:
	sqlite3_reset(s->q_upd);
	aud_seterr(err, errlen, "ship_cursor: %s", sqlite3_errmsg(s->wr));
	sqlite3_exec(s->wr, "ROLLBACK", NULL, NULL, NULL);
	errno = EIO;
	return -1;
fail:
	aud_seterr(err, errlen, "ship_cursor: %s", sqlite3_errmsg(s->wr));
	errno = EIO;
	return -1;
}

void
aud_sk_refresh_head(struct aud_sink *s)
{
	uint64_t head = 0;
	int ok = 0;

	sqlite3_reset(s->q_head);
	if (sqlite3_step(s->q_head) == SQLITE_ROW) {
		ok = 1;
		if (sqlite3_column_type(s->q_head, 0) == SQLITE_INTEGER)
			head = (uint64_t)sqlite3_column_int64(s->q_head, 0) + 1;
	}
	sqlite3_reset(s->q_head);
	if (!ok)
		return;
	pthread_mutex_lock(&s->mu);
	/* The head never moves back; a read that raced is just stale. */
	if (head > s->st.head)
		s->st.head = head;
	if (s->st.next_seq > s->st.head)
		s->st.head = s->st.next_seq;
	s->st.lag = s->st.head - s->st.next_seq;
	pthread_mutex_unlock(&s->mu);
}

static void
check_lag(struct aud_sink *s)
{
	uint64_t lag, head, next;
	char reason[200];
	json_t *f;

	if (s->lag_alert == 0)
		return;
	pthread_mutex_lock(&s->mu);
	lag = s->st.lag;
	head = s->st.head;
	next = s->st.next_seq;
	snprintf(reason, sizeof(reason), "%s", s->st.last_error[0] ?
	    s->st.last_error : "behind");
	pthread_mutex_unlock(&s->mu);
	if (lag <= s->lag_alert / 2)
		s->alerted = 0;
	if (lag <= s->lag_alert || s->alerted)
		return;
	s->alerted = 1;
	pthread_mutex_lock(&s->mu);
	s->st.findings++;
	pthread_mutex_unlock(&s->mu);
	if (s->hooks == NULL || s->hooks->finding == NULL)
		return;
	f = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:s}", "finding",
	    "sink.lag", "title", "audit sink behind", "sink", s->name, "lag",
	    (json_int_t)(lag > AUD_INT_MAX ? AUD_INT_MAX : lag), "threshold",
	    (json_int_t)(s->lag_alert > AUD_INT_MAX ? AUD_INT_MAX :
	    s->lag_alert), "head", (json_int_t)head, "next_seq",
	    (json_int_t)next, "reason", reason);
	if (f != NULL)
		s->hooks->finding(s->hooks->arg, f);
}

/*
 * Errors and curl messages can hold anything; the finding that may quote
 * them must stay inside the canonical subset (valid UTF-8, no NUL).
 */
static void
set_error(struct aud_sink *s, const char *msg)
{
	size_t i;

	pthread_mutex_lock(&s->mu);
	for (i = 0; msg[i] != '\0' && i + 1 < sizeof(s->st.last_error); i++)
		s->st.last_error[i] = msg[i] < 0x20 || msg[i] > 0x7e ? '?' :
		    msg[i];
	s->st.last_error[i] = '\0';
	pthread_mutex_unlock(&s->mu);
}

static int64_t
ship_once(struct aud_sink *s, char *err, size_t errlen)
{
	struct aud_sk_batch b;
	int rc;

	if (aud_sk_load_batch(s, &b, err, errlen) == -1)
		return -1;
	if (b.n == 0) {
		aud_sk_batch_clear(&b);
		return 0;
	}
	switch (s->type) {
	case AUD_SINK_FILE:
		rc = aud_sk_send_file(s, &b, err, errlen);
		break;
	case AUD_SINK_SYSLOG:
		rc = aud_sk_send_syslog(s, &b, err, errlen);
		break;
	default:
		rc = aud_sk_send_webhook(s, &b, err, errlen);
		break;
	}
	/* Only a positive acknowledgement moves the cursor. */
	if (rc == 0 && commit_cursor(s, &b, err, errlen) == 0) {
		s->ck_next = b.ck_next;
		pthread_mutex_lock(&s->mu);
		s->st.next_seq = b.next;
		if (s->st.head < b.next)
			s->st.head = b.next;
		s->st.lag = s->st.head - s->st.next_seq;
		s->st.records += b.nrec;
		s->st.checkpoints += b.nck;
		s->st.up = 1;
		s->st.last_error[0] = '\0';
		pthread_mutex_unlock(&s->mu);
		rc = (int)b.nrec;
		/* A batch of only late checkpoints still made progress. */
		if (rc == 0)
			rc = -2;
	} else
		rc = -1;
	aud_sk_batch_clear(&b);
	return rc;
}

static int64_t
attempt(struct aud_sink *s, char *err, size_t errlen)
{
	char e[256];
	int64_t r;

	e[0] = '\0';
	aud_sk_refresh_head(s);
	r = ship_once(s, e, sizeof(e));
	if (r == -1) {
		pthread_mutex_lock(&s->mu);
		s->st.failures++;
		s->st.up = 0;
		pthread_mutex_unlock(&s->mu);
		set_error(s, e[0] ? e : "delivery failed");
		aud_seterr(err, errlen, "%s", e);
	}
	aud_sk_refresh_head(s);
	check_lag(s);
	return r;
}

int64_t
aud_sink_ship(struct aud_sink *s, char *err, size_t errlen)
{
	int64_t r;
	int e;

	if (s == NULL || s->running == 1) {
		aud_seterr(err, errlen, "sink is running its own thread");
		errno = EBUSY;
		return -1;
	}
	errno = 0;
	r = attempt(s, err, errlen);
	if (r == -1) {
		e = errno ? errno : EIO;
		errno = e;
		return -1;
	}
	return r == -2 ? 0 : r;
}

static uint64_t
rnd_next(struct aud_sink *s)
{
	/* xorshift64*: jitter only, not secrets. */
	s->rnd ^= s->rnd >> 12;
	s->rnd ^= s->rnd << 25;
	s->rnd ^= s->rnd >> 27;
	return s->rnd * 2685821657736338717ULL;
}

static void
deadline_ts(struct timespec *ts, int64_t ms_from_now)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms_from_now / 1000;
	ts->tv_nsec += (ms_from_now % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

static void *
shipper(void *arg)
{
	struct aud_sink *s = arg;
	struct timespec ts;
	int64_t r, next_try = 0, now, wait;
	uint64_t backoff = 0, lag;

	while (!atomic_load(&s->stopping)) {
		now = aud_sk_now_ms();
		if (now >= next_try) {
			r = attempt(s, NULL, 0);
			if (r == -1) {
				/* Exponential, capped, with equal jitter so
				 * sinks that failed together retry apart. */
				backoff = backoff ? backoff * 2 : s->bo_min;
				if (backoff > s->bo_max)
					backoff = s->bo_max;
				next_try = aud_sk_now_ms() +
				    (int64_t)(backoff / 2 +
				    rnd_next(s) % (backoff / 2 + 1));
			} else {
				backoff = 0;
				next_try = 0;
				if (r != 0)
					continue;	/* maybe more */
			}
		} else {
			/* Woken while backing off: keep the lag current so
			 * /metrics and the finding see a sink that is down. */
			aud_sk_refresh_head(s);
			check_lag(s);
		}
		pthread_mutex_lock(&s->mu);
		lag = s->st.lag;
		if (!s->kicked && !atomic_load(&s->stopping)) {
			now = aud_sk_now_ms();
			wait = s->poll_ms;
			if (next_try != 0 && next_try - now < wait)
				wait = next_try - now;
			else if (next_try == 0 && lag > 0)
				wait = 0;
			if (wait > 0) {
				deadline_ts(&ts, wait);
				pthread_cond_timedwait(&s->cv, &s->mu, &ts);
			}
		}
		s->kicked = 0;
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

int
aud_sink_start(struct aud_sink *s, char *err, size_t errlen)
{
	int e;

	if (s == NULL || s->running == 1) {
		aud_seterr(err, errlen, "sink already started");
		errno = EBUSY;
		return -1;
	}
	atomic_store(&s->stopping, 0);
	if ((e = pthread_create(&s->thr, NULL, shipper, s)) != 0) {
		aud_seterr(err, errlen, "pthread_create: %s", strerror(e));
		errno = e;
		return -1;
	}
	s->running = 1;
	return 0;
}

void
aud_sink_kick(struct aud_sink *s)
{
	if (s == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	s->kicked = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

void
aud_sink_stop(struct aud_sink *s)
{
	if (s == NULL || s->running != 1)
		return;
	pthread_mutex_lock(&s->mu);
	atomic_store(&s->stopping, 1);
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thr, NULL);
	s->running = -1;
}

uint64_t
aud_sink_lag(const struct aud_sink *s)
{
	struct aud_sink_stats st;

	aud_sink_stats(s, &st);
	return st.lag;
}

void
aud_sink_stats(const struct aud_sink *s, struct aud_sink_stats *st)
{
	/* The lock guards the numbers, not the handle: readers take it
	 * through a const pointer. */
	pthread_mutex_t *mu;

	if (s == NULL) {
		memset(st, 0, sizeof(*st));
		return;
	}
	mu = (pthread_mutex_t *)&s->mu;
	pthread_mutex_lock(mu);
	*st = s->st;
	pthread_mutex_unlock(mu);
}

