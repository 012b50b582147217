/*
 * writer_submit: the producers' side of the writer. Records are serialised
 * and their index columns derived here, in the producer's thread, so that
 * the one writer thread only copies bytes; a record that cannot be queued
 * (full queue, no memory) is counted for a log.gap instead of blocking the
 * caller. Also the calls that wait for or read the writer's progress
 * (aud_sync, aud_dispatch, the counters).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/writer.h"

static const char *const reserved[] = {
	"v", "origin", "seq", "prev", "ts", "mono", "kind", NULL
};


/* Copies s into *pp (advancing it); NULL stays NULL. */
static const char *
stash(char **pp, const char *s)
{
	size_t n;
	char *d;

	if (s == NULL)
		return NULL;
	n = strlen(s) + 1;
	d = *pp;
	memcpy(d, s, n);
	*pp += n;
	return d;
}

static size_t
slen(const char *s)
{
	return s != NULL ? strlen(s) + 1 : 0;
}

/* A zeroed item with room for need bytes of data: a cached one if it
 * fits, else a new one. NULL with ENOMEM. */
static struct aud_wr_item *
item_take(struct aud_log *l, size_t need)
{
	struct aud_wr_item *it;
	size_t cap;

	pthread_mutex_lock(&l->mu);
	if ((it = l->cache) != NULL) {
		l->cache = it->next;
		l->ncache--;
	}
	pthread_mutex_unlock(&l->mu);
	if (it != NULL && it->cap < need) {
		free(it);
		it = NULL;
	}
	if (it == NULL) {
		/* Round up so that a cached item fits most later records. */
		cap = need < 1024 ? 1024 : (need + 511) & ~(size_t)511;
		if ((it = malloc(sizeof(*it) + cap)) == NULL) {
			errno = ENOMEM;
			return NULL;
		}
		it->cap = cap;
	}
	cap = it->cap;
	memset(it, 0, sizeof(*it));
	it->cap = cap;
	return it;
}

/*
 * An async record lost for lack of memory before it could be queued (its
 * fields, its copy or its item): nobody waits for it and not every caller
 * records the failure, so it is counted as a full queue's drop is, and the
 * next batch writes it as a log.gap (reason out_of_memory). -1 with ENOMEM
 * (EPIPE once closing, as queue_item).
 */
static int
lost_nomem(struct aud_log *l)
{
	int64_t ts = aud_wr_now_ns(CLOCK_REALTIME);
	int stopped;

	pthread_mutex_lock(&l->mu);
	if (!(stopped = l->stop))
		aud_wr_lossc_count(&l->pend.nomem, ts);
	pthread_mutex_unlock(&l->mu);
	errno = stopped ? EPIPE : ENOMEM;
	return -1;
}

/* Stamps it and appends it to the queue, or counts and recycles it when the
 * queue is full or closed (-1 with EAGAIN or EPIPE). */
static int
queue_item(struct aud_log *l, struct aud_wr_item *it)
{
	int durable = it->durable, wake;

	pthread_mutex_lock(&l->mu);
	it->ts = aud_wr_now_ns(CLOCK_REALTIME);
	it->mono = aud_wr_now_ns(CLOCK_MONOTONIC);
	/* log.close may take one slot past the bound: dropped as a flood
	 * record would be, it would leave the tail unsealed and the log
	 * looking crashed. */
	if (l->stop || (l->qlen >= l->queue_max && !it->closing)) {
		int stopped = l->stop;

		if (!stopped && !durable) {
			aud_wr_lossc_count(&l->pend.drop, it->ts);
			l->dropped++;
		}
		it->next = NULL;
		it = aud_wr_recycle_locked(l, it);
		pthread_mutex_unlock(&l->mu);
		aud_wr_free_items(it);
		errno = stopped ? EPIPE : EAGAIN;
		return -1;
	}
	if (l->qt != NULL)
		l->qt->next = it;
	else
		l->qh = it;
	l->qt = it;
	l->qlen++;
	l->enq++;
	if (durable)
		l->qdurable++;
	/* A lingering writer is woken only by what ends its wait: a wake-up
	 * per async record would cost the producer a futex call each. */
	wake = !l->lingering || durable || aud_wr_batch_full(l);
	pthread_mutex_unlock(&l->mu);
	/* Signalled after the unlock: a writer woken while the lock is
	 * still held blocks on it at once and needs a second wake-up, which
	 * a durable record's caller waits for. */
	if (wake)
		pthread_cond_signal(&l->cv);
	return 0;
}


int
aud_wr_enqueue(struct aud_log *l, const char *kind, json_t *fields, int durable,
    aud_done_fn done, void *arg, int force)
{
	struct aud_members m;	/* on the stack: no allocation per record */
	struct aud_cols c;
	struct aud_wr_item *it;
	const char *const *r;
	char *d;
	size_t need;
	int e;

	/* NULL fields: the producer's converter ran out of memory. */
	if (l != NULL && aud_kind_valid(kind) && fields == NULL && !durable)
		return lost_nomem(l);
	if (l == NULL || !aud_kind_valid(kind) || !json_is_object(fields)) {
		json_decref(fields);
		errno = EINVAL;
		return -1;
	}
	for (r = reserved; *r != NULL; r++)
		if (json_object_get(fields, *r) != NULL) {
			json_decref(fields);
			errno = EINVAL;
			return -1;
		}
	/* Serialise here, in the producer's thread: what the writer could
	 * not serialise is refused now, and the writer only copies bytes. */
	if (aud_canon_members(fields, &m, NULL, 0) == -1 ||
	    m.len > AUD_MAX_RECORD - 1024 - l->origin_jlen) {
		e = m.buf == NULL && errno == ENOMEM ? ENOMEM : EINVAL;
		aud_members_free(&m);
		json_decref(fields);
		if (e == ENOMEM && !durable)
			return lost_nomem(l);
		errno = e;
		return -1;
	}
	aud_cols_from(fields, &c);
	c.kind = aud_kind_code(kind);
	need = m.n * sizeof(size_t) + m.len + 1 + slen(c.sandbox) +
	    slen(c.dst_host) + slen(c.dst_ip) + slen(c.rule_id) +
	    slen(c.mcp_server) + slen(c.mcp_tool);
	if ((it = item_take(l, need)) == NULL) {
		aud_members_free(&m);
		json_decref(fields);
		if (!durable)
			return lost_nomem(l);
		errno = ENOMEM;
		return -1;
	}
	memcpy(it->data, m.start, m.n * sizeof(size_t));
	it->start = it->data;
	it->nmem = m.n;
	d = (char *)(it->data + m.n);
	memcpy(d, m.buf, m.len + 1);
	it->body = d;
	it->blen = m.len;
	d += m.len + 1;
	it->cols = c;
	it->cols.sandbox = stash(&d, c.sandbox);
	it->cols.dst_host = stash(&d, c.dst_host);
	it->cols.dst_ip = stash(&d, c.dst_ip);
	it->cols.rule_id = stash(&d, c.rule_id);
	it->cols.mcp_server = stash(&d, c.mcp_server);
	it->cols.mcp_tool = stash(&d, c.mcp_tool);
	aud_members_free(&m);
	json_decref(fields);
	snprintf(it->kind, sizeof(it->kind), "%s", kind);
	it->durable = durable;
	it->done = done;
	it->arg = arg;
	it->force_ckpt = force != 0;
	it->closing = force == AUD_ENQ_CLOSE;
	return queue_item(l, it);
}

int
aud_submit_async(struct aud_log *l, const char *kind, json_t *fields)
{
	return aud_wr_enqueue(l, kind, fields, 0, NULL, NULL, 0);
}

/* A string member's decoded bytes up to any NUL (what aud_cols_from keeps
 * of a JSON string), or NULL. sub: the string at that key of an object
 * member instead. *nomem is set when a string was there but sb could not
 * grow to decode it (the column would be wrong, not absent). */
static const char *
scan_str(const struct aud_scan *sc, const char *key, const char *sub,
    struct aud_strbuf *sb, size_t *n, int *nomem)
{
	const struct aud_member *m = aud_scan_get(sc, key);
	const char *val, *out;
	size_t vlen;

	if (m == NULL)
		return NULL;
	val = m->val;
	vlen = m->vlen;
	if (sub != NULL && aud_cv_member(m->val, m->vlen, sub, &val,
	    &vlen) == -1)
		return NULL;
	if (aud_cv_str(val, vlen, sb, &out, n) == -1) {
		/* The bytes passed aud_canon_check: a string span fails
		 * only to grow sb. */
		if (vlen >= 2 && val[0] == '"')
			*nomem = 1;
		return NULL;
	}
	*n = strnlen(out, *n);
	return out;
}

static const char *
stash_n(char **pp, const char *s, size_t n)
{
	char *d;

	if (s == NULL)
		return NULL;
	d = *pp;
	memcpy(d, s, n);
	d[n] = '\0';
	*pp += n + 1;
	return d;
}

int
aud_submit_canon(struct aud_log *l, const char *kind, const char *body,
    size_t len)
{
	enum { C_SANDBOX, C_HOST, C_IP, C_RULE, C_SERVER, C_TOOL, C_N };
	const char *cs[C_N], *d, *val;
	size_t cn[C_N], need, i, vlen;
	const struct aud_member *m;
	const char *const *r;
	struct aud_cols c;
	struct aud_wr_item *it;
	long long port;
	int nomem = 0;
	char *p;

	if (l == NULL || !aud_kind_valid(kind) || body == NULL || len == 0 ||
	    body[0] != '{' || len > AUD_MAX_RECORD - 1024 - l->origin_jlen) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&l->cmu);
	if (aud_canon_check(body, len, &l->csc, NULL, 0) == -1) {
		/* The member scan is the check's only allocation, and it fails
		 * as EINVAL: bytes that pass without it were refused for lack
		 * of memory, not for what they are. */
		if (aud_canon_check(body, len, NULL, NULL, 0) == 0)
			goto nomem;
		goto invalid;
	}
	for (r = reserved; *r != NULL; r++)
		if (aud_scan_get(&l->csc, *r) != NULL)
			goto invalid;
	/* The columns, as aud_cols_from derives them from a tree. */
	memset(&c, 0, sizeof(c));
	c.kind = aud_kind_code(kind);
	/* Spans, not C strings: compared with their length. */
	if ((d = scan_str(&l->csc, "decision", NULL, &l->csb[0], &i,
	    &nomem)) != NULL)
		c.decision = aud_decision_code(d, i);
	if ((cs[C_SANDBOX] = scan_str(&l->csc, "sandbox", "id",
	    &l->csb[C_SANDBOX], &cn[C_SANDBOX], &nomem)) == NULL)
		cs[C_SANDBOX] = scan_str(&l->csc, "sandbox", NULL,
		    &l->csb[C_SANDBOX], &cn[C_SANDBOX], &nomem);
	cs[C_HOST] = scan_str(&l->csc, "dst", "host", &l->csb[C_HOST],
	    &cn[C_HOST], &nomem);
	cs[C_IP] = scan_str(&l->csc, "dst", "ip", &l->csb[C_IP], &cn[C_IP],
	    &nomem);
	if ((m = aud_scan_get(&l->csc, "dst")) != NULL &&
	    aud_cv_member(m->val, m->vlen, "port", &val, &vlen) == 0 &&
	    aud_cv_int(val, vlen, &port) == 0) {
		c.dst_port = port;
		c.has_port = 1;
	}
	cs[C_RULE] = scan_str(&l->csc, "policy", "rule", &l->csb[C_RULE],
	    &cn[C_RULE], &nomem);
	cs[C_SERVER] = scan_str(&l->csc, "server", NULL, &l->csb[C_SERVER],
	    &cn[C_SERVER], &nomem);
	cs[C_TOOL] = scan_str(&l->csc, "tool", NULL, &l->csb[C_TOOL],
	    &cn[C_TOOL], &nomem);
	if (nomem)
		goto nomem;
	need = l->csc.n * sizeof(size_t) + len + 1;
	for (i = 0; i < C_N; i++)
		if (cs[i] != NULL)
			need += cn[i] + 1;
	if ((it = item_take(l, need)) == NULL)
		goto nomem;
	for (i = 0; i < l->csc.n; i++)
		it->data[i] = (size_t)(l->csc.m[i].key - body) - 1;
	it->start = it->data;
	it->nmem = l->csc.n;
	p = (char *)(it->data + l->csc.n);
	memcpy(p, body, len);
	p[len] = '\0';
	it->body = p;
	it->blen = len;
	p += len + 1;
	it->cols = c;
	it->cols.sandbox = stash_n(&p, cs[C_SANDBOX], cn[C_SANDBOX]);
	it->cols.dst_host = stash_n(&p, cs[C_HOST], cn[C_HOST]);
	it->cols.dst_ip = stash_n(&p, cs[C_IP], cn[C_IP]);
	it->cols.rule_id = stash_n(&p, cs[C_RULE], cn[C_RULE]);
	it->cols.mcp_server = stash_n(&p, cs[C_SERVER], cn[C_SERVER]);
	it->cols.mcp_tool = stash_n(&p, cs[C_TOOL], cn[C_TOOL]);
	pthread_mutex_unlock(&l->cmu);
	snprintf(it->kind, sizeof(it->kind), "%s", kind);
	return queue_item(l, it);
invalid:
	pthread_mutex_unlock(&l->cmu);
	errno = EINVAL;
	return -1;
nomem:
	pthread_mutex_unlock(&l->cmu);
	return lost_nomem(l);
}

int
aud_submit_durable(struct aud_log *l, const char *kind, json_t *fields,
    aud_done_fn done, void *arg)
{
	return aud_wr_enqueue(l, kind, fields, 1, done, arg, 0);
}

int
aud_heartbeat(struct aud_log *l)
{
	return aud_wr_enqueue(l, "log.heartbeat", json_object(), 0, NULL, NULL,
	    AUD_ENQ_CKPT);
}

int
aud_notify_fd(const struct aud_log *l)
{
	return l->efd;
}

void
aud_dispatch(struct aud_log *l)
{
	struct aud_wr_item *it, *list;
	uint64_t v;

	if (l == NULL)
		return;
	pthread_mutex_lock(&l->mu);
	it = l->ch;
	l->ch = l->ct = NULL;
	/* Drain under the lock so a wakeup for a later batch is kept. */
	if (read(l->efd, &v, sizeof(v)) == -1) {
		/* EAGAIN: nothing pending. */
	}
	pthread_mutex_unlock(&l->mu);
	for (list = it; it != NULL; it = it->next)
		if (it->done != NULL)
			it->done(it->arg, it->ok, it->seq);
	if (list != NULL) {
		pthread_mutex_lock(&l->mu);
		list = aud_wr_recycle_locked(l, list);
		pthread_mutex_unlock(&l->mu);
		aud_wr_free_items(list);
	}
}

int
aud_sync(struct aud_log *l)
{
	uint64_t ticket, f;

	pthread_mutex_lock(&l->mu);
	ticket = l->enq;
	f = l->failures;
	l->syncers++;
	pthread_cond_signal(&l->cv);	/* a lingering writer commits now */
	while (l->done < ticket && l->started)
		pthread_cond_wait(&l->idle, &l->mu);
	l->syncers--;
	f = l->failures - f;
	pthread_mutex_unlock(&l->mu);
	if (f != 0) {
		errno = EIO;
		return -1;
	}
	return 0;
}

uint64_t
aud_dropped(const struct aud_log *l)
{
	uint64_t n;

	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	n = l->dropped;
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
	return n;
}

void
aud_space(const struct aud_log *l, struct aud_space_info *out)
{
	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	out->constrained = l->constrained;
	/* The writer is constrained exactly while it lacks the reserve. */
	out->reserve_held = l->reserve != NULL && !l->constrained;
	out->reserve_bytes = l->reserve_bytes;
	out->skipped = l->skipped;
	out->released = l->released;
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
}

uint64_t
aud_next_seq(const struct aud_log *l)
{
	uint64_t n;

	/* The writer moves next_seq without the lock while it builds a
	 * batch (and winds it back if the batch fails); what it published
	 * under the lock after a commit is what other threads may read. */
	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	n = l->committed_seq;
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
	return n;
}

