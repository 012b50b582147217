/*
 * fleetq.c: the thread that holds the bridge's connection to the fleet's
 * approval queue (see fleetq.h for why it is a thread of its own, apart
 * from the budgets' worker in shared.c: it must sit in poll(2) on its
 * connection to hear notifications, which a worker waiting on a condition
 * variable cannot).
 *
 * The thread waits on two descriptors: an eventfd the loop writes when it
 * queues a statement, and the connection's socket, readable when a
 * notification came. Statements run in the order they were queued, each
 * within the deadline; one that waited in the queue past the deadline
 * fails without being run, so a slow database makes a call wait at most
 * about twice the deadline. Without a connection the thread retries after
 * a backoff that doubles up to FQ_BACKOFF_MAX, and what is queued meanwhile
 * fails at once: a database that is down costs a call its denial, not a
 * wait. After every (re)connection the decisions made while it was away
 * are read, since their notifications were lost with it.
 */
#include <sys/eventfd.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/bridge/fleetq.h"
#include "gateway/log.h"

#define FQ_QUEUE_MAX	1024
#define FQ_POLL_MS	1000	/* decided rows read this often while any
				 * row of this host is open */
#define FQ_PING_MS	2000	/* an idle connection is checked this often */
#define FQ_BACKOFF_MIN	100
#define FQ_BACKOFF_MAX	10000
#define FQ_DECIDED_MAX	64	/* decisions read per round */
#define FQ_LIST_MAX	1000	/* rows a listing shows */
#define FQ_ARGS_MAX	8192	/* larger arguments are not shared */

enum fq_kind { FQ_POST = 1, FQ_DECIDE, FQ_LIST, FQ_CLOSE, FQ_DELIVER };

struct br_fq_job {
	struct br_fq_job	*next;
	enum fq_kind		 kind;
	uint64_t		 queued_ms;
	/* POST */
	char			 sandbox[64], subject[128], server[128];
	char			 tool[256], ikind[16], rule[64];
	int			 has_rule;
	uint64_t		 expires_ms;
	char			*args;
	/* POST, CLOSE: d.id; DECIDE, DELIVER: all of d */
	struct fleet_aq_decision d;
	struct fleet_aq_held	 held;
	enum fleet_aq_close	 why;
	/* the answer */
	int			 ok;
	json_t			*list;
	char			 err[200];
	br_fq_done		*done;	/* NULL: forgotten */
	void			*arg;
};

struct br_fq {
	struct ev_loop		*loop;
	char			*conninfo, *password;
	char			 host[128];
	unsigned		 deadline_ms;
	br_fq_deliver		*deliver;
	void			*darg;
	int			 efd;	/* thread -> loop: answers */
	int			 wfd;	/* loop -> thread: work */
	pthread_t		 thr;
	int			 started;
	pthread_mutex_t		 mu;
	/* under mu */
	struct br_fq_job	*head, **tail;
	struct br_fq_job	*done;
	size_t			 queued;
	int			 stop;
	struct br_fq_stats	 st;
};

/* The thread's own state. */
struct fq_conn {
	PGconn		*c;
	int		 ever, swept, want;	/* want: read decisions */
	uint64_t	 next_try_ms, next_poll_ms, idle_ms;
	unsigned	 backoff_ms;
	size_t		 open;			/* rows it posted, not closed */
};

static void
kick(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) == -1 && errno != EAGAIN)
		log_warnx("bridge: approval queue: eventfd: %s",
		    strerror(errno));
}

static void
set_error(struct br_fq *q, const char *e)
{
	pthread_mutex_lock(&q->mu);
	q->st.failures++;
	snprintf(q->st.last_error, sizeof(q->st.last_error), "%.150s", e);
	pthread_mutex_unlock(&q->mu);
}

static struct br_fq_job *
push(struct br_fq *q, struct br_fq_job *j)
{
	pthread_mutex_lock(&q->mu);
	if (q->stop || q->queued >= FQ_QUEUE_MAX) {
		pthread_mutex_unlock(&q->mu);
		free(j->args);
		free(j);
		return NULL;
	}
	j->next = NULL;
	j->queued_ms = ev_now_ms();
	*q->tail = j;
	q->tail = &j->next;
	q->queued++;
	pthread_mutex_unlock(&q->mu);
	kick(q->wfd);
	return j;
}

/* An answer (or a delivery) back to the loop. */
static void
answer(struct br_fq *q, struct br_fq_job *j)
{
	pthread_mutex_lock(&q->mu);
	j->next = q->done;
	q->done = j;
	pthread_mutex_unlock(&q->mu);
	kick(q->efd);
}

/* ------------------------------------------------------------ the thread */

static void
drop(struct br_fq *q, struct fq_conn *k, const char *e)
{
	log_warnx("bridge: approval queue: the fleet's database stopped "
	    "answering (%s); reconnecting", e);
	PQfinish(k->c);
	k->c = NULL;
	k->backoff_ms = FQ_BACKOFF_MIN;
	k->next_try_ms = ev_now_ms() + FQ_BACKOFF_MIN;
	pthread_mutex_lock(&q->mu);
	q->st.up = 0;
	pthread_mutex_unlock(&q->mu);
}

/* After a statement that failed: a connection no longer usable goes. */
static void
failed(struct br_fq *q, struct fq_conn *k, const char *e)
{
	set_error(q, e);
	if (k->c != NULL && !fleet_pg_usable(k->c))
		drop(q, k, e);
}

/* Connects and listens when it is time to; 0 with a connection. */
static int
ensure(struct br_fq *q, struct fq_conn *k)
{
	char e[400] = "";
	PGresult *r;
	long n;

	if (k->c != NULL)
		return 0;
	if (ev_now_ms() < k->next_try_ms)
		return -1;
	if ((k->c = fleet_pg_connect(q->conninfo, q->password, q->deadline_ms,
	    e, sizeof(e))) == NULL ||
	    (r = fleet_pg_exec(k->c, "LISTEN " FLEET_AQ_CHANNEL, 0, NULL,
	    q->deadline_ms, e, sizeof(e))) == NULL) {
		PQfinish(k->c);
		k->c = NULL;
		k->backoff_ms = k->backoff_ms == 0 ? FQ_BACKOFF_MIN :
		    k->backoff_ms * 2 > FQ_BACKOFF_MAX ? FQ_BACKOFF_MAX :
		    k->backoff_ms * 2;
		k->next_try_ms = ev_now_ms() + k->backoff_ms;
		pthread_mutex_lock(&q->mu);
		if (q->st.up || q->st.failures == 0)
			log_warnx("bridge: approval queue: no connection to "
			    "the fleet's database (%s); retrying", e);
		q->st.up = 0;
		pthread_mutex_unlock(&q->mu);
		set_error(q, e);
		return -1;
	}
	PQclear(r);
	/* The rows an earlier process of this host left open hold calls
	 * that died with it: nobody may approve them now. */
	if (!k->swept) {
		if ((n = fleet_aq_sweep(k->c, q->host, q->deadline_ms, e,
		    sizeof(e))) == -1) {
			failed(q, k, e);
			return k->c != NULL ? 0 : -1;
		}
		k->swept = 1;
		if (n > 0)
			log_info("bridge: approval queue: closed %ld calls an "
			    "earlier run of this host left waiting", n);
	}
	k->backoff_ms = 0;
	k->want = 1;		/* what was decided while we were away */
	k->idle_ms = ev_now_ms();
	pthread_mutex_lock(&q->mu);
	if (k->ever)
		q->st.reconnects++;
	if (k->ever || q->st.failures > 0)
		log_info("bridge: approval queue: connected to the fleet's "
		    "database again");
	k->ever = 1;
	q->st.up = 1;
	pthread_mutex_unlock(&q->mu);
	return 0;
}

/* Notifications that came (read from the socket when it is readable):
 * one naming this host means decisions to read. */
static void
notifies(struct br_fq *q, struct fq_conn *k, int readable)
{
	PGnotify *n;

	if (k->c == NULL)
		return;
	if (readable && PQconsumeInput(k->c) == 0) {
		failed(q, k, PQerrorMessage(k->c));
		if (k->c != NULL)
			drop(q, k, "the connection broke");
		return;
	}
	while ((n = PQnotifies(k->c)) != NULL) {
		if (n->extra != NULL && strcmp(n->extra, q->host) == 0)
			k->want = 1;
		PQfreemem(n);
	}
}

/* Reads the decisions made for this host's calls and hands them over. */
static void
fetch(struct br_fq *q, struct fq_conn *k)
{
	struct fleet_aq_decision *a;
	struct br_fq_job *j;
	char e[400] = "";
	size_t n, i;

	k->want = 0;
	k->next_poll_ms = ev_now_ms() + FQ_POLL_MS;
	if ((a = fleet_aq_decided(k->c, q->host, FQ_DECIDED_MAX,
	    q->deadline_ms, &n, e, sizeof(e))) == NULL) {
		failed(q, k, e);
		return;
	}
	for (i = 0; i < n; i++) {
		if ((j = calloc(1, sizeof(*j))) == NULL) {
			k->want = 1;	/* the rest next round */
			break;
		}
		j->kind = FQ_DELIVER;
		j->d = a[i];
		pthread_mutex_lock(&q->mu);
		q->st.delivered++;
		pthread_mutex_unlock(&q->mu);
		answer(q, j);
	}
	free(a);
}

static void
run(struct br_fq *q, struct fq_conn *k, struct br_fq_job *j)
{
	struct fleet_aq_item it;
	char e[400] = "";

	j->ok = -1;
	if (j->kind != FQ_CLOSE && ev_now_ms() - j->queued_ms >
	    q->deadline_ms) {
		snprintf(j->err, sizeof(j->err), "waited past the deadline");
		return;
	}
	if (ensure(q, k) == -1) {
		snprintf(j->err, sizeof(j->err), "no connection to the "
		    "fleet's database");
		return;
	}
	switch (j->kind) {
	case FQ_POST:
		memset(&it, 0, sizeof(it));
		it.id = j->d.id;
		it.host = q->host;
		it.sandbox = j->sandbox;
		it.subject = j->subject;
		it.server = j->server;
		it.tool = j->tool;
		it.kind = j->ikind;
		it.arguments = j->args;
		it.rule = j->has_rule ? j->rule : NULL;
		it.expires_ms = j->expires_ms;
		if ((j->ok = fleet_aq_post(k->c, &it, q->deadline_ms, e,
		    sizeof(e)) == 0 ? 1 : -1) == 1) {
			k->open++;
			pthread_mutex_lock(&q->mu);
			q->st.posted++;
			pthread_mutex_unlock(&q->mu);
		}
		break;
	case FQ_DECIDE:
		if ((j->ok = fleet_aq_decide(k->c, &j->d, q->deadline_ms,
		    &j->held, e, sizeof(e))) == 1) {
			pthread_mutex_lock(&q->mu);
			q->st.decided++;
			pthread_mutex_unlock(&q->mu);
		}
		break;
	case FQ_LIST:
		j->list = fleet_aq_list(k->c, FQ_LIST_MAX, q->deadline_ms, e,
		    sizeof(e));
		j->ok = j->list != NULL ? 1 : -1;
		break;
	case FQ_CLOSE:
		if (k->open > 0)
			k->open--;
		j->ok = fleet_aq_close(k->c, j->d.id, q->host, j->why,
		    q->deadline_ms, e, sizeof(e)) == 0 ? 1 : -1;
		break;
	case FQ_DELIVER:
		break;
	}
	if (j->ok == -1) {
		snprintf(j->err, sizeof(j->err), "%.190s", e);
		failed(q, k, e);
	}
	k->idle_ms = ev_now_ms();
}

/* How long the thread may sleep in poll(2); -1: until woken. */
static int
wait_ms(const struct fq_conn *k)
{
	uint64_t now = ev_now_ms(), at;

	if (k->c == NULL)
		at = k->next_try_ms;
	else {
		at = k->idle_ms + FQ_PING_MS;
		if (k->open > 0 && k->next_poll_ms < at)
			at = k->next_poll_ms;
	}
	return at <= now ? 0 : at - now > 60000 ? 60000 : (int)(at - now);
}

static void *
thread_main(void *arg)
{
	struct br_fq *q = arg;
	struct fq_conn k;
	struct br_fq_job *j;
	struct pollfd p[2];
	uint64_t v;
	char e[400];
	PGresult *r;

	memset(&k, 0, sizeof(k));
	(void)ensure(q, &k);
	for (;;) {
		pthread_mutex_lock(&q->mu);
		if (q->stop) {
			pthread_mutex_unlock(&q->mu);
			break;
		}
		if ((j = q->head) != NULL) {
			if ((q->head = j->next) == NULL)
				q->tail = &q->head;
			q->queued--;
		}
		pthread_mutex_unlock(&q->mu);
		if (j != NULL) {
			run(q, &k, j);
			notifies(q, &k, 0);
			if (j->kind == FQ_CLOSE) {
				free(j->args);
				free(j);
			} else
				answer(q, j);
			continue;
		}
		if (k.c == NULL)
			(void)ensure(q, &k);
		if (k.c != NULL && (k.want || (k.open > 0 &&
		    ev_now_ms() >= k.next_poll_ms)))
			fetch(q, &k);
		if (k.c != NULL && ev_now_ms() >= k.idle_ms + FQ_PING_MS) {
			e[0] = '\0';
			if ((r = fleet_pg_exec(k.c, "SELECT 1", 0, NULL,
			    q->deadline_ms, e, sizeof(e))) == NULL)
				failed(q, &k, e);
			PQclear(r);
			k.idle_ms = ev_now_ms();
			notifies(q, &k, 0);
			continue;
		}
		p[0].fd = q->wfd;
		p[0].events = POLLIN;
		p[1].fd = k.c != NULL ? PQsocket(k.c) : -1;
		p[1].events = POLLIN;
		p[0].revents = p[1].revents = 0;
		if (poll(p, 2, wait_ms(&k)) == -1 && errno != EINTR) {
			log_warn("bridge: approval queue: poll");
			continue;
		}
		if (p[0].revents & POLLIN)
			(void)read(q->wfd, &v, sizeof(v));
		if (p[1].revents != 0)
			notifies(q, &k, 1);
	}
	/* Stopping: the rows of calls that went away are closed while the
	 * database answers, so no other host lists them; nothing else is
	 * started any more. */
	pthread_mutex_lock(&q->mu);
	while ((j = q->head) != NULL) {
		q->head = j->next;
		q->queued--;
		pthread_mutex_unlock(&q->mu);
		if (j->kind == FQ_CLOSE) {
			if (k.c != NULL)
				run(q, &k, j);
			free(j->args);
			free(j);
		} else {
			/* Answered by br_fq_free, in the loop's thread. */
			j->ok = -1;
			snprintf(j->err, sizeof(j->err), "the bridge is "
			    "stopping");
			answer(q, j);
		}
		pthread_mutex_lock(&q->mu);
	}
	q->tail = &q->head;
	pthread_mutex_unlock(&q->mu);
	PQfinish(k.c);
	return NULL;
}

/* ------------------------------------------------------------ the loop */

static void
on_done(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct br_fq *q = arg;
	struct br_fq_job *j, *list, *rev = NULL;
	uint64_t v;

	(void)loop;
	if (events != 0)
		(void)read(fd, &v, sizeof(v));
	pthread_mutex_lock(&q->mu);
	list = q->done;
	q->done = NULL;
	pthread_mutex_unlock(&q->mu);
	while ((j = list) != NULL) {	/* in the order they came */
		list = j->next;
		j->next = rev;
		rev = j;
	}
	while ((j = rev) != NULL) {
		rev = j->next;
		if (j->kind == FQ_DELIVER) {
			if (events != 0)
				q->deliver(q->darg, &j->d);
		}
		else if (j->done != NULL) {
			j->done(j->arg, j->ok, j->kind == FQ_DECIDE &&
			    j->ok == 1 ? &j->held : NULL, j->list, j->err);
			j->list = NULL;
		}
		json_decref(j->list);
		free(j->args);
		free(j);
	}
}

struct br_fq *
br_fq_new(struct ev_loop *loop, const char *conninfo, const char *password,
    const char *host, unsigned deadline_ms, br_fq_deliver *deliver,
    void *darg, char *err, size_t errlen)
{
	struct br_fq *q;

	if (host == NULL || strlen(host) == 0 || strlen(host) >=
	    sizeof(q->host) || deliver == NULL) {
		snprintf(err, errlen, "bridge: approval queue: no usable "
		    "host name");
		return NULL;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL) {
		snprintf(err, errlen, "bridge: out of memory");
		return NULL;
	}
	q->loop = loop;
	q->efd = q->wfd = -1;
	q->tail = &q->head;
	q->deadline_ms = deadline_ms != 0 ? deadline_ms : 1000;
	q->deliver = deliver;
	q->darg = darg;
	memcpy(q->host, host, strlen(host) + 1);
	pthread_mutex_init(&q->mu, NULL);
	if ((q->conninfo = strdup(conninfo)) == NULL ||
	    (password != NULL && (q->password = strdup(password)) == NULL) ||
	    (q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1 ||
	    (q->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1 ||
	    ev_add(loop, q->efd, EV_READ, on_done, q) == -1) {
		snprintf(err, errlen, "bridge: approval queue: %s",
		    strerror(errno));
		goto fail;
	}
	if ((errno = pthread_create(&q->thr, NULL, thread_main, q)) != 0) {
		snprintf(err, errlen, "bridge: approval queue: thread: %s",
		    strerror(errno));
		goto fail;
	}
	q->started = 1;
	return q;
fail:
	br_fq_free(q);
	return NULL;
}

void
br_fq_free(struct br_fq *q)
{

	if (q == NULL)
		return;
	if (q->started) {
		pthread_mutex_lock(&q->mu);
		q->stop = 1;
		pthread_mutex_unlock(&q->mu);
		kick(q->wfd);
		pthread_join(q->thr, NULL);
	}
	/* What still waits for an answer gets a failure, so that its
	 * caller can free what it holds; deliveries are dropped (their rows
	 * stay decided and open, and the next start closes them). */
	on_done(q->loop, q->efd, 0, q);
	if (q->efd != -1) {
		ev_del(q->loop, q->efd);
		close(q->efd);
	}
	if (q->wfd != -1)
		close(q->wfd);
	if (q->password != NULL)
		explicit_bzero(q->password, strlen(q->password));
	free(q->password);
	free(q->conninfo);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

const char *
br_fq_host(const struct br_fq *q)
{
	return q != NULL ? q->host : NULL;
}

/* Copies s into a fixed field; -1 when it does not fit. */
static int
cp(char *dst, size_t n, const char *s)
{
	if (s == NULL || strlen(s) >= n)
		return -1;
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

struct br_fq_job *
br_fq_post(struct br_fq *q, const struct fleet_aq_item *it, br_fq_done *done,
    void *arg)
{
	struct br_fq_job *j;

	if (q == NULL || it == NULL || done == NULL ||
	    (j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	j->kind = FQ_POST;
	j->done = done;
	j->arg = arg;
	j->expires_ms = it->expires_ms;
	if (cp(j->d.id, sizeof(j->d.id), it->id) == -1 ||
	    cp(j->sandbox, sizeof(j->sandbox), it->sandbox) == -1 ||
	    cp(j->subject, sizeof(j->subject), it->subject) == -1 ||
	    cp(j->server, sizeof(j->server), it->server) == -1 ||
	    cp(j->tool, sizeof(j->tool), it->tool) == -1 ||
	    cp(j->ikind, sizeof(j->ikind), it->kind) == -1 ||
	    (it->rule != NULL && cp(j->rule, sizeof(j->rule), it->rule) ==
	    -1) || (it->arguments != NULL && strlen(it->arguments) <=
	    FQ_ARGS_MAX && (j->args = strdup(it->arguments)) == NULL)) {
		free(j);
		return NULL;
	}
	j->has_rule = it->rule != NULL;
	return push(q, j);
}

struct br_fq_job *
br_fq_decide(struct br_fq *q, const struct fleet_aq_decision *d,
    br_fq_done *done, void *arg)
{
	struct br_fq_job *j;

	if (q == NULL || d == NULL || done == NULL ||
	    (j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	j->kind = FQ_DECIDE;
	j->done = done;
	j->arg = arg;
	j->d = *d;
	memcpy(j->d.approver_host, q->host, sizeof(j->d.approver_host));
	return push(q, j);
}

struct br_fq_job *
br_fq_list(struct br_fq *q, br_fq_done *done, void *arg)
{
	struct br_fq_job *j;

	if (q == NULL || done == NULL || (j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	j->kind = FQ_LIST;
	j->done = done;
	j->arg = arg;
	return push(q, j);
}

void
br_fq_forget(struct br_fq_job *job)
{
	if (job != NULL)
		job->done = NULL;
}

void
br_fq_close(struct br_fq *q, const char *id, enum fleet_aq_close why)
{
	struct br_fq_job *j;

	if (q == NULL || (j = calloc(1, sizeof(*j))) == NULL)
		return;
	j->kind = FQ_CLOSE;
	j->why = why;
	if (cp(j->d.id, sizeof(j->d.id), id) == -1) {
		free(j);
		return;
	}
	if (push(q, j) == NULL)
		set_error(q, "too many statements waiting; a row stays open "
		    "until it expires");
}

void
br_fq_stats(const struct br_fq *q, struct br_fq_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (q == NULL)
		return;
	pthread_mutex_lock((pthread_mutex_t *)&q->mu);
	*st = q->st;
	pthread_mutex_unlock((pthread_mutex_t *)&q->mu);
}
