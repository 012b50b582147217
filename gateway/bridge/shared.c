/*
 * shared.c: the worker thread that holds the bridge's connection to the
 * fleet's database (see shared.h for why it is a thread).
 *
 * The queue is bounded and every job carries the time it was queued: a
 * reservation that waited past the deadline is answered UNAVAILABLE
 * without being run, so a database that answers slowly makes calls wait
 * at most about twice the deadline (the wait, then the statement) and
 * never piles up work. While there is no connection the worker tries
 * again after a backoff that doubles up to SH_BACKOFF_MAX, and answers
 * every reservation UNAVAILABLE at once in between: a database that is
 * down costs a call nothing but its denial. Settlements (result bytes,
 * releases) are queued the same way and only counted when they fail.
 */
#include <sys/eventfd.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/bridge/shared.h"
#include "gateway/ev.h"
#include "gateway/log.h"

#define SH_QUEUE_MAX	1024
#define SH_BACKOFF_MIN	100
#define SH_BACKOFF_MAX	10000
#define SH_STR_MAX	192
#define SH_PING_MS	2000	/* an idle connection is checked this often */

enum sh_kind { SH_RESERVE = 1, SH_SETTLE, SH_RELEASE };

struct br_shared_job {
	struct br_shared_job	*next;
	enum sh_kind		 kind;
	uint64_t		 queued_ms, now_s, bytes;
	size_t			 n, which;
	struct fleet_resv	 r[FLEET_RESV_MAX];
	char			 owner[FLEET_RESV_MAX][SH_STR_MAX];
	char			 name[FLEET_RESV_MAX][SH_STR_MAX];
	enum fleet_resv_outcome	 o;
	br_shared_done		*done;	/* loop's side only; NULL: forgotten */
	void			*arg;
};

struct br_shared {
	struct ev_loop		*loop;
	char			*conninfo, *password;
	unsigned		 deadline_ms;
	int			 efd;
	pthread_t		 thr;
	int			 started;
	pthread_mutex_t		 mu;
	pthread_cond_t		 cv;
	/* under mu */
	struct br_shared_job	*head, **tail;	/* to the worker */
	struct br_shared_job	*done;		/* back to the loop */
	size_t			 queued;
	int			 stop;
	struct br_shared_stats	 st;
};

/* Under mu. */
static void
set_error(struct br_shared *s, const char *e)
{
	snprintf(s->st.last_error, sizeof(s->st.last_error), "%.150s", e);
}

/* Queues j for the worker; -1 when full (j is not taken then). */
static int
push(struct br_shared *s, struct br_shared_job *j)
{
	pthread_mutex_lock(&s->mu);
	if (s->stop || s->queued >= SH_QUEUE_MAX) {
		pthread_mutex_unlock(&s->mu);
		return -1;
	}
	j->next = NULL;
	j->queued_ms = ev_now_ms();
	*s->tail = j;
	s->tail = &j->next;
	s->queued++;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/* A job owning copies of r's strings; NULL when one does not fit. */
static struct br_shared_job *
job_new(enum sh_kind kind, const struct fleet_resv *r, size_t n)
{
	struct br_shared_job *j;
	size_t i;

	if (n == 0 || n > FLEET_RESV_MAX || (j = calloc(1, sizeof(*j))) ==
	    NULL)
		return NULL;
	j->kind = kind;
	j->n = n;
	for (i = 0; i < n; i++) {
		j->r[i] = r[i];
		if (r[i].owner == NULL || r[i].name == NULL ||
		    strlen(r[i].owner) >= SH_STR_MAX ||
		    strlen(r[i].name) >= SH_STR_MAX) {
			free(j);
			return NULL;
		}
		memcpy(j->owner[i], r[i].owner, strlen(r[i].owner) + 1);
		memcpy(j->name[i], r[i].name, strlen(r[i].name) + 1);
		j->r[i].owner = j->owner[i];
		j->r[i].name = j->name[i];
	}
	return j;
}

/* ------------------------------------------------------------ the worker */

struct sh_conn {
	PGconn		*c;
	int		 ever;		/* a connection was made before */
	uint64_t	 next_try_ms;
	unsigned	 backoff_ms;
};

/* Connects when it is time to; 0 with a connection. */
static int
ensure(struct br_shared *s, struct sh_conn *k)
{
	char e[400];
	PGconn *c;

	if (k->c != NULL)
		return 0;
	if (ev_now_ms() < k->next_try_ms)
		return -1;
	if ((c = fleet_pg_connect(s->conninfo, s->password, s->deadline_ms,
	    e, sizeof(e))) == NULL) {
		k->backoff_ms = k->backoff_ms == 0 ? SH_BACKOFF_MIN :
		    k->backoff_ms * 2 > SH_BACKOFF_MAX ? SH_BACKOFF_MAX :
		    k->backoff_ms * 2;
		k->next_try_ms = ev_now_ms() + k->backoff_ms;
		pthread_mutex_lock(&s->mu);
		if (s->st.up || s->st.failures == 0)
			log_warnx("bridge: shared budgets: no connection to "
			    "the fleet's database (%s); retrying", e);
		s->st.up = 0;
		s->st.failures++;
		set_error(s, e);
		pthread_mutex_unlock(&s->mu);
		return -1;
	}
	k->c = c;
	k->backoff_ms = 0;
	pthread_mutex_lock(&s->mu);
	if (k->ever)
		s->st.reconnects++;
	if (k->ever || s->st.failures > 0)
		log_info("bridge: shared budgets: connected to the fleet's "
		    "database again");
	k->ever = 1;
	s->st.up = 1;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/* After a statement that failed: a connection no longer usable goes, and
 * the next is tried after the shortest backoff. */
static void
failed(struct br_shared *s, struct sh_conn *k, const char *e)
{
	pthread_mutex_lock(&s->mu);
	s->st.failures++;
	set_error(s, e);
	if (!fleet_pg_usable(k->c))
		s->st.up = 0;
	pthread_mutex_unlock(&s->mu);
	if (!fleet_pg_usable(k->c)) {
		log_warnx("bridge: shared budgets: the fleet's database "
		    "stopped answering (%s); reconnecting", e);
		PQfinish(k->c);
		k->c = NULL;
		k->backoff_ms = SH_BACKOFF_MIN;
		k->next_try_ms = ev_now_ms() + SH_BACKOFF_MIN;
	}
}

/* An idle connection still answers (or goes, see failed()). */
static void
ping(struct br_shared *s, struct sh_conn *k)
{
	char e[400] = "";
	PGresult *r;

	if ((r = fleet_pg_exec(k->c, "SELECT 1", 0, NULL, s->deadline_ms, e,
	    sizeof(e))) == NULL) {
		failed(s, k, e);
		return;
	}
	PQclear(r);
	pthread_mutex_lock(&s->mu);
	s->st.up = 1;
	pthread_mutex_unlock(&s->mu);
}

static void
run(struct br_shared *s, struct sh_conn *k, struct br_shared_job *j)
{
	char e[400] = "";
	int late = ev_now_ms() - j->queued_ms > s->deadline_ms;

	if (j->kind == SH_RESERVE) {
		j->o = FLEET_RESV_UNAVAILABLE;
		if (late)
			snprintf(e, sizeof(e), "the reservation waited past "
			    "the deadline");
		else if (ensure(s, k) == 0) {
			j->o = fleet_budget_reserve(k->c, j->r, j->n, j->now_s,
			    s->deadline_ms, &j->which, e, sizeof(e));
			if (j->o == FLEET_RESV_UNAVAILABLE)
				failed(s, k, e);
		}
		pthread_mutex_lock(&s->mu);
		if (j->o == FLEET_RESV_RESERVED)
			s->st.reserved++;
		else if (j->o == FLEET_RESV_EXHAUSTED)
			s->st.exhausted++;
		else
			s->st.unavailable++;
		pthread_mutex_unlock(&s->mu);
		return;
	}
	/* A settlement is worth more late than never. */
	if (ensure(s, k) == -1 || fleet_budget_settle(k->c, j->r, j->n,
	    j->bytes, j->kind == SH_RELEASE, s->deadline_ms, e,
	    sizeof(e)) == -1) {
		if (k->c != NULL)
			failed(s, k, e);
		pthread_mutex_lock(&s->mu);
		s->st.settle_failures++;
		pthread_mutex_unlock(&s->mu);
	}
}

static void *
worker(void *arg)
{
	struct br_shared *s = arg;
	struct sh_conn k = { NULL, 0, 0, 0 };
	struct br_shared_job *j, *list;
	struct timespec ts;
	uint64_t one = 1, at, idle_ms;

	(void)ensure(s, &k);
	idle_ms = ev_now_ms();
	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (!s->stop && s->head == NULL) {
			/* Idle with a connection: checked now and then, so
			 * that status says the database went away before a
			 * call finds out. No connection: try again at the
			 * backoff's end, whether or not a call waits. */
			at = k.c != NULL ? idle_ms + SH_PING_MS : k.next_try_ms;
			if (at <= ev_now_ms())
				break;
			ts.tv_sec = (time_t)(at / 1000);
			ts.tv_nsec = (long)(at % 1000) * 1000000;
			(void)pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		}
		if (s->stop) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		if ((j = s->head) != NULL) {
			if ((s->head = j->next) == NULL)
				s->tail = &s->head;
			s->queued--;
		}
		pthread_mutex_unlock(&s->mu);
		if (j == NULL) {
			if (k.c != NULL)
				ping(s, &k);
			else
				(void)ensure(s, &k);
			idle_ms = ev_now_ms();
			continue;
		}
		run(s, &k, j);
		idle_ms = ev_now_ms();
		if (j->kind != SH_RESERVE) {
			free(j);
			continue;
		}
		pthread_mutex_lock(&s->mu);
		j->next = s->done;
		s->done = j;
		pthread_mutex_unlock(&s->mu);
		if (write(s->efd, &one, sizeof(one)) == -1 && errno != EAGAIN)
			log_warnx("bridge: shared budgets: eventfd: %s",
			    strerror(errno));
	}
	/* Stopping: what was reserved for calls that never went out is
	 * given back while the database answers; reservations are not
	 * started any more. */
	pthread_mutex_lock(&s->mu);
	while ((j = s->head) != NULL) {
		s->head = j->next;
		s->queued--;
		pthread_mutex_unlock(&s->mu);
		if (j->kind != SH_RESERVE && k.c != NULL)
			run(s, &k, j);
		free(j);
		pthread_mutex_lock(&s->mu);
	}
	s->tail = &s->head;
	/* Reservations won but not yet handed to the loop: their calls
	 * were stopped meanwhile and will never go out, so they go back
	 * too. */
	list = s->done;
	s->done = NULL;
	pthread_mutex_unlock(&s->mu);
	while ((j = list) != NULL) {
		list = j->next;
		if (j->kind == SH_RESERVE && j->o == FLEET_RESV_RESERVED &&
		    k.c != NULL) {
			j->kind = SH_RELEASE;
			run(s, &k, j);
		}
		free(j);
	}
	PQfinish(k.c);
	return NULL;
}

/* ------------------------------------------------------------ the loop */

static void
on_done(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct br_shared *s = arg;
	struct br_shared_job *j, *list, *rev = NULL;
	uint64_t v;

	(void)loop;
	(void)events;
	(void)read(fd, &v, sizeof(v));
	pthread_mutex_lock(&s->mu);
	list = s->done;
	s->done = NULL;
	pthread_mutex_unlock(&s->mu);
	/* Answers in the order they came. */
	while ((j = list) != NULL) {
		list = j->next;
		j->next = rev;
		rev = j;
	}
	while ((j = rev) != NULL) {
		rev = j->next;
		if (j->done != NULL)
			j->done(j->arg, j->o, j->r, j->n, j->which);
		else if (j->o == FLEET_RESV_RESERVED)
			br_shared_settle(s, j->r, j->n, 0, 1);
		free(j);
	}
}

struct br_shared *
br_shared_new(struct ev_loop *loop, const char *conninfo,
    const char *password, unsigned deadline_ms, char *err, size_t errlen)
{
	struct br_shared *s;
	pthread_condattr_t ca;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "bridge: out of memory");
		return NULL;
	}
	s->loop = loop;
	s->efd = -1;
	s->tail = &s->head;
	s->deadline_ms = deadline_ms != 0 ? deadline_ms : 1000;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	if ((s->conninfo = strdup(conninfo)) == NULL ||
	    (password != NULL && (s->password = strdup(password)) == NULL) ||
	    (s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1 ||
	    ev_add(loop, s->efd, EV_READ, on_done, s) == -1) {
		snprintf(err, errlen, "bridge: shared budgets: %s",
		    strerror(errno));
		goto fail;
	}
	if ((errno = pthread_create(&s->thr, NULL, worker, s)) != 0) {
		snprintf(err, errlen, "bridge: shared budgets: thread: %s",
		    strerror(errno));
		goto fail;
	}
	s->started = 1;
	return s;
fail:
	br_shared_free(s);
	return NULL;
}

void
br_shared_free(struct br_shared *s)
{
	struct br_shared_job *j;

	if (s == NULL)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->mu);
		s->stop = 1;
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thr, NULL);
	}
	while ((j = s->head) != NULL) {
		s->head = j->next;
		free(j);
	}
	while ((j = s->done) != NULL) {
		s->done = j->next;
		free(j);
	}
	if (s->efd != -1) {
		ev_del(s->loop, s->efd);
		close(s->efd);
	}
	if (s->password != NULL)
		explicit_bzero(s->password, strlen(s->password));
	free(s->password);
	free(s->conninfo);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

struct br_shared_job *
br_shared_reserve(struct br_shared *s, const struct fleet_resv *r, size_t n,
    uint64_t now_s, br_shared_done *done, void *arg)
{
	struct br_shared_job *j;

	if (s == NULL || done == NULL || (j = job_new(SH_RESERVE, r, n)) ==
	    NULL)
		return NULL;
	j->now_s = now_s;
	j->done = done;
	j->arg = arg;
	if (push(s, j) == -1) {
		pthread_mutex_lock(&s->mu);
		s->st.unavailable++;
		set_error(s, "too many reservations waiting");
		pthread_mutex_unlock(&s->mu);
		free(j);
		return NULL;
	}
	return j;
}

void
br_shared_forget(struct br_shared_job *job)
{
	if (job != NULL)
		job->done = NULL;
}

void
br_shared_settle(struct br_shared *s, const struct fleet_resv *r, size_t n,
    uint64_t bytes, int release)
{
	struct br_shared_job *j;

	if (s == NULL)
		return;
	if ((j = job_new(release ? SH_RELEASE : SH_SETTLE, r, n)) != NULL) {
		j->bytes = bytes;
		if (push(s, j) == 0)
			return;
		free(j);
	}
	pthread_mutex_lock(&s->mu);
	s->st.settle_failures++;
	pthread_mutex_unlock(&s->mu);
}

void
br_shared_stats(const struct br_shared *s, struct br_shared_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (s == NULL)
		return;
	pthread_mutex_lock((pthread_mutex_t *)&s->mu);
	*st = s->st;
	pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
}
