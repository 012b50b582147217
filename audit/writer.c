/*
 * writer: the one thread that owns the log's database. Producers on the
 * daemon's event-loop thread queue records and never wait for the disk; the
 * writer group-commits them (one BEGIN IMMEDIATE ... COMMIT per batch of up to
 * 256 records or 2 ms), and only after that FULL commit acknowledges durable
 * records (through an eventfd and aud_dispatch() in the caller's thread) and
 * signs a checkpoint. A full queue never blocks: the drop is counted and
 * written as one log.gap, because a silent hole would be worse than a signed
 * one (reference/audit.md §3.5).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "audit/priv.h"

struct item {
	struct item	*next;
	char		 kind[32];
	json_t		*fields;
	int		 durable, force_ckpt, ok;
	aud_done_fn	 done;
	void		*arg;
	int64_t		 ts, mono;
	uint64_t	 seq;
};

struct aud_log {
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;		/* work for the writer */
	pthread_cond_t	 idle;		/* a batch finished */
	struct item	*qh, *qt;
	size_t		 qlen;
	struct item	*ch, *ct;	/* completions for aud_dispatch */
	uint64_t	 enq, done;	/* items queued / processed */
	uint64_t	 dropped, drop_pending, werr_pending;
	int64_t		 drop_from, drop_to;
	uint64_t	 failures;
	int		 stop, started;
	pthread_t	 th;
	int		 efd;

	/* Writer-thread state below; read by others only under mu. */
	sqlite3		*db;
	sqlite3_stmt	*ins_rec, *ins_node;
	struct aud_tree	*tree;
	uint8_t		 prev[AUD_HASH_LEN];
	uint64_t	 next_seq;
	char		 origin[256];
	struct aud_key	*key;
	uint64_t	 last_ckpt_size;
	int64_t		 last_ckpt_mono;
	unsigned	 batch_max, batch_usec, queue_max, ckpt_ms, ckpt_every;
	int		 node_err;
};

static void
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int64_t
now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *const reserved[] = {
	"v", "origin", "seq", "prev", "ts", "mono", "kind", NULL
};

static void
node_cb(void *arg, unsigned level, uint64_t idx, const uint8_t h[AUD_HASH_LEN])
{
	struct aud_log *l = arg;

	sqlite3_reset(l->ins_node);
	sqlite3_bind_int(l->ins_node, 1, (int)level);
	sqlite3_bind_int64(l->ins_node, 2, (sqlite3_int64)idx);
	sqlite3_bind_blob(l->ins_node, 3, h, AUD_HASH_LEN, SQLITE_STATIC);
	if (sqlite3_step(l->ins_node) != SQLITE_DONE)
		l->node_err = 1;
}

static void
bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s != NULL)
		sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

/* Adds the common fields, writes the row and its tree nodes. In a txn. */
static int
append_record(struct aud_log *l, const char *kind, json_t *rec, int64_t ts,
    int64_t mono, uint64_t *seqp)
{
	struct aud_cols c;
	uint8_t h[AUD_HASH_LEN], leaf[AUD_HASH_LEN];
	char phex[2 * AUD_HASH_LEN + 1], *canon;
	size_t len;
	int rc;

	aud_hex(l->prev, AUD_HASH_LEN, phex);
	json_object_set_new(rec, "v", json_integer(1));
	json_object_set_new(rec, "origin", json_string(l->origin));
	json_object_set_new(rec, "seq", json_integer((json_int_t)l->next_seq));
	json_object_set_new(rec, "prev", json_string(phex));
	/* Nanosecond clocks pass 2^53 (104 days), beyond what the canonical
	 * subset allows as a number: they travel as decimal strings (the
	 * RFC 7493 advice), exact and sortable by length then bytes. */
	json_object_set_new(rec, "ts", aud_ns_json(ts));
	json_object_set_new(rec, "mono", aud_ns_json(mono));
	json_object_set_new(rec, "kind", json_string(kind));
	if ((canon = aud_canon_dump(rec, &len, NULL, 0)) == NULL)
		return -1;
	aud_sha256(canon, len, h);
	aud_cols_from(rec, &c);
	sqlite3_reset(l->ins_rec);
	sqlite3_clear_bindings(l->ins_rec);
	sqlite3_bind_int64(l->ins_rec, 1, (sqlite3_int64)l->next_seq);
	sqlite3_bind_int64(l->ins_rec, 2, ts);
	sqlite3_bind_int(l->ins_rec, 3, c.kind);
	sqlite3_bind_blob(l->ins_rec, 4, canon, (int)len, SQLITE_TRANSIENT);
	sqlite3_bind_blob(l->ins_rec, 5, h, AUD_HASH_LEN, SQLITE_TRANSIENT);
	if (c.decision)
		sqlite3_bind_int(l->ins_rec, 6, c.decision);
	bind_text(l->ins_rec, 7, c.sandbox);
	bind_text(l->ins_rec, 8, c.dst_host);
	bind_text(l->ins_rec, 9, c.dst_ip);
	if (c.has_port)
		sqlite3_bind_int64(l->ins_rec, 10, c.dst_port);
	bind_text(l->ins_rec, 11, c.rule_id);
	bind_text(l->ins_rec, 12, c.mcp_server);
	bind_text(l->ins_rec, 13, c.mcp_tool);
	rc = sqlite3_step(l->ins_rec);
	free(canon);
	if (rc != SQLITE_DONE)
		return -1;
	aud_leaf_hash(h, AUD_HASH_LEN, leaf);
	l->node_err = 0;
	if (aud_tree_append(l->tree, leaf, node_cb, l) == -1 || l->node_err)
		return -1;
	memcpy(l->prev, h, AUD_HASH_LEN);
	*seqp = l->next_seq++;
	return 0;
}

/* Signs the current tree. Called only after the FULL commit of its rows. */
static void
checkpoint(struct aud_log *l)
{
	sqlite3_stmt *st;
	uint8_t root[AUD_HASH_LEN];
	char *body, *note;
	uint64_t size = aud_tree_size(l->tree);

	if (l->key == NULL || size == 0 || size <= l->last_ckpt_size)
		return;
	aud_tree_root(l->tree, root);
	if ((body = aud_ckpt_body(l->origin, size, root)) == NULL)
		return;
	note = aud_note_sign(l->key, body, NULL, 0);
	free(body);
	if (note == NULL)
		return;
	if (sqlite3_prepare_v2(l->db, "INSERT INTO checkpoints (size, note, "
	    "signed_ns) VALUES (?, ?, ?)", -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, (sqlite3_int64)size);
		sqlite3_bind_blob(st, 2, note, (int)strlen(note), SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, now_ns(CLOCK_REALTIME));
		if (sqlite3_step(st) == SQLITE_DONE) {
			l->last_ckpt_size = size;
			l->last_ckpt_mono = now_ns(CLOCK_MONOTONIC);
		}
		sqlite3_finalize(st);
	}
	free(note);
}

static int
write_gap(struct aud_log *l, const char *reason, uint64_t lost, int64_t from,
    int64_t to)
{
	uint64_t seq;
	json_t *gap;
	int rc;

	gap = json_pack("{s:s,s:I,s:o,s:o}", "reason", reason, "lost",
	    (json_int_t)lost, "from_ts", aud_ns_json(from), "to_ts",
	    aud_ns_json(to));
	rc = gap == NULL ? -1 : append_record(l, "log.gap", gap, to,
	    now_ns(CLOCK_MONOTONIC), &seq);
	json_decref(gap);
	return rc;
}

static void
process(struct aud_log *l, struct item *batch, uint64_t lost, int64_t from,
    int64_t to, uint64_t werr)
{
	struct aud_tree *snap;
	uint8_t prev[AUD_HASH_LEN];
	uint64_t next = l->next_seq, size;
	struct item *it;
	int ok = 1, force = 0;

	if ((snap = aud_tree_dup(l->tree)) == NULL)
		ok = 0;
	memcpy(prev, l->prev, AUD_HASH_LEN);
	if (ok && sqlite3_exec(l->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
	    SQLITE_OK)
		ok = 0;
	if (ok && lost > 0 && write_gap(l, "queue_overflow", lost, from, to) ==
	    -1)
		ok = 0;
	if (ok && werr > 0 && write_gap(l, "write_error", werr, batch ?
	    batch->ts : to, now_ns(CLOCK_REALTIME)) == -1)
		ok = 0;
	for (it = batch; ok && it != NULL; it = it->next) {
		if (append_record(l, it->kind, it->fields, it->ts, it->mono,
		    &it->seq) == -1)
			ok = 0;
		force |= it->force_ckpt;
	}
	if (ok && sqlite3_exec(l->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		ok = 0;
	if (!ok) {
		/* Nothing of the batch is durable: undo the in-memory state
		 * so seq, prev and the tree keep matching the table. */
		sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
		if (snap != NULL) {
			aud_tree_free(l->tree);
			l->tree = snap;
			snap = NULL;
		}
		memcpy(l->prev, prev, AUD_HASH_LEN);
		l->next_seq = next;
	}
	aud_tree_free(snap);
	for (it = batch; it != NULL; it = it->next)
		it->ok = ok;
	if (ok) {
		size = aud_tree_size(l->tree);
		if (force || size - l->last_ckpt_size >= l->ckpt_every ||
		    now_ns(CLOCK_MONOTONIC) - l->last_ckpt_mono >=
		    (int64_t)l->ckpt_ms * 1000000)
			checkpoint(l);
	}
	pthread_mutex_lock(&l->mu);
	if (!ok) {
		l->failures++;
		/* Neither the drop count nor the async records of a failed
		 * batch vanish: they become a log.gap once writing works
		 * again. Durable callers learn it from ok = 0. */
		l->drop_pending += lost;
		l->werr_pending += werr;
		for (it = batch; it != NULL; it = it->next)
			if (!it->durable)
				l->werr_pending++;
	}
	pthread_mutex_unlock(&l->mu);
}

static void *
writer_main(void *arg)
{
	struct aud_log *l = arg;
	struct item *batch, *it, *next, **tail;
	struct timespec dl;
	uint64_t lost, werr, n, one = 1;
	int64_t from, to;
	int notify;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (l->qh == NULL && !l->stop)
			pthread_cond_wait(&l->cv, &l->mu);
		if (l->qh == NULL && l->stop)
			break;
		/* Group commit: wait up to the batch window for more. */
		if (l->qlen < l->batch_max && !l->stop) {
			clock_gettime(CLOCK_REALTIME, &dl);
			dl.tv_nsec += (long)l->batch_usec * 1000;
			while (dl.tv_nsec >= 1000000000) {
				dl.tv_nsec -= 1000000000;
				dl.tv_sec++;
			}
			while (l->qlen < l->batch_max && !l->stop &&
			    pthread_cond_timedwait(&l->cv, &l->mu, &dl) == 0)
				;
		}
		batch = l->qh;
		tail = &batch;
		for (n = 0; *tail != NULL && n < l->batch_max; n++)
			tail = &(*tail)->next;
		l->qh = *tail;
		*tail = NULL;
		if (l->qh == NULL)
			l->qt = NULL;
		l->qlen -= n;
		lost = l->drop_pending;
		from = l->drop_from;
		to = l->drop_to;
		l->drop_pending = 0;
		werr = l->werr_pending;
		l->werr_pending = 0;
		pthread_mutex_unlock(&l->mu);

		process(l, batch, lost, from, to, werr);

		pthread_mutex_lock(&l->mu);
		notify = 0;
		for (it = batch; it != NULL; it = next) {
			next = it->next;
			json_decref(it->fields);
			it->fields = NULL;
			if (!it->durable) {
				free(it);
				continue;
			}
			it->next = NULL;
			if (l->ct != NULL)
				l->ct->next = it;
			else
				l->ch = it;
			l->ct = it;
			notify = 1;
		}
		l->done += n;
		pthread_cond_broadcast(&l->idle);
		if (notify && write(l->efd, &one, sizeof(one)) == -1) {
			/* The counter only saturates; readers still wake. */
		}
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static int
enqueue(struct aud_log *l, const char *kind, json_t *fields, int durable,
    aud_done_fn done, void *arg, int force)
{
	struct item *it;
	const char *const *r;
	char *c;
	size_t len;

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
	/* Refuse now what the writer could not serialise later. */
	if ((c = aud_canon_dump(fields, &len, NULL, 0)) == NULL ||
	    len > AUD_MAX_RECORD - 1024) {
		free(c);
		json_decref(fields);
		errno = EINVAL;
		return -1;
	}
	free(c);
	if ((it = calloc(1, sizeof(*it))) == NULL) {
		json_decref(fields);
		errno = ENOMEM;
		return -1;
	}
	snprintf(it->kind, sizeof(it->kind), "%s", kind);
	it->fields = fields;
	it->durable = durable;
	it->done = done;
	it->arg = arg;
	it->force_ckpt = force;
	pthread_mutex_lock(&l->mu);
	it->ts = now_ns(CLOCK_REALTIME);
	it->mono = now_ns(CLOCK_MONOTONIC);
	if (l->stop || l->qlen >= l->queue_max) {
		int stopped = l->stop;

		if (!stopped && !durable) {
			if (l->drop_pending == 0)
				l->drop_from = it->ts;
			l->drop_to = it->ts;
			l->drop_pending++;
			l->dropped++;
		}
		pthread_mutex_unlock(&l->mu);
		json_decref(fields);
		free(it);
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
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return 0;
}

int
aud_submit_async(struct aud_log *l, const char *kind, json_t *fields)
{
	return enqueue(l, kind, fields, 0, NULL, NULL, 0);
}

int
aud_submit_durable(struct aud_log *l, const char *kind, json_t *fields,
    aud_done_fn done, void *arg)
{
	return enqueue(l, kind, fields, 1, done, arg, 0);
}

int
aud_heartbeat(struct aud_log *l)
{
	return enqueue(l, "log.heartbeat", json_object(), 0, NULL, NULL, 1);
}

int
aud_notify_fd(const struct aud_log *l)
{
	return l->efd;
}

void
aud_dispatch(struct aud_log *l)
{
	struct item *it, *next;
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
	for (; it != NULL; it = next) {
		next = it->next;
		if (it->done != NULL)
			it->done(it->arg, it->ok, it->seq);
		free(it);
	}
}

int
aud_sync(struct aud_log *l)
{
	uint64_t ticket, f;

	pthread_mutex_lock(&l->mu);
	ticket = l->enq;
	f = l->failures;
	while (l->done < ticket && l->started)
		pthread_cond_wait(&l->idle, &l->mu);
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

uint64_t
aud_next_seq(const struct aud_log *l)
{
	uint64_t n;

	/* next_seq moves in the writer between batches; lock for a clean
	 * read rather than a torn one. */
	pthread_mutex_lock((pthread_mutex_t *)&l->mu);
	n = l->next_seq;
	pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
	return n;
}

/* Reads the newest checkpoint and checks it against the rebuilt tree. */
static int
check_last_ckpt(struct aud_log *l, uint64_t n, char *err, size_t errlen)
{
	struct aud_ckpt ck;
	struct aud_key *keys[1];
	sqlite3_stmt *st;
	uint8_t root[AUD_HASH_LEN];
	int rc = 0;

	if (sqlite3_prepare_v2(l->db, "SELECT size, note FROM checkpoints "
	    "ORDER BY size DESC LIMIT 1", -1, &st, NULL) != SQLITE_OK) {
		seterr(err, errlen, "checkpoints: %s", sqlite3_errmsg(l->db));
		return -1;
	}
	if (sqlite3_step(st) == SQLITE_ROW) {
		keys[0] = l->key;
		if (aud_ckpt_parse(sqlite3_column_blob(st, 1),
		    (size_t)sqlite3_column_bytes(st, 1), keys, l->key ? 1 : 0,
		    &ck, err, errlen) == -1) {
			/* Signed by an earlier key (rotation) or unsigned:
			 * the root must still match; verify judges keys. */
			if (errno != EPERM || aud_ckpt_parse(
			    sqlite3_column_blob(st, 1),
			    (size_t)sqlite3_column_bytes(st, 1), NULL, 0, &ck,
			    err, errlen) == -1)
				rc = -1;
		}
		else if (strcmp(ck.origin, l->origin) != 0 || ck.size > n ||
		    (uint64_t)sqlite3_column_int64(st, 0) != ck.size ||
		    aud_root_at(ck.size, aud_store_subtree, l->db, root) == -1 ||
		    memcmp(root, ck.root, AUD_HASH_LEN) != 0) {
			seterr(err, errlen, "newest checkpoint (size %llu) does "
			    "not match the records: refusing to extend a log "
			    "that was rewritten or truncated",
			    (unsigned long long)ck.size);
			rc = -1;
		}
		if (rc == 0)
			l->last_ckpt_size = ck.size;
	}
	sqlite3_finalize(st);
	if (rc == -1)
		errno = EBADMSG;
	return rc;
}

static int
last_kind_is_close(sqlite3 *db, uint64_t n)
{
	sqlite3_stmt *st;
	json_t *r;
	int closed = 0;

	if (n == 0 || sqlite3_prepare_v2(db, "SELECT canon FROM records WHERE "
	    "seq = ?", -1, &st, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)(n - 1));
	if (sqlite3_step(st) == SQLITE_ROW &&
	    (r = aud_canon_parse(sqlite3_column_blob(st, 0),
	    (size_t)sqlite3_column_bytes(st, 0), NULL, 0)) != NULL) {
		closed = json_is_string(json_object_get(r, "kind")) &&
		    strcmp(json_string_value(json_object_get(r, "kind")),
		    "log.close") == 0;
		json_decref(r);
	}
	sqlite3_finalize(st);
	return closed;
}

static void
free_log(struct aud_log *l)
{
	struct item *it, *next;

	for (it = l->qh; it != NULL; it = next) {
		next = it->next;
		json_decref(it->fields);
		free(it);
	}
	for (it = l->ch; it != NULL; it = next) {
		next = it->next;
		free(it);
	}
	sqlite3_finalize(l->ins_rec);
	sqlite3_finalize(l->ins_node);
	sqlite3_close(l->db);
	aud_tree_free(l->tree);
	aud_key_free(l->key);
	if (l->efd != -1)
		close(l->efd);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	pthread_cond_destroy(&l->idle);
	free(l);
}

struct aud_log *
aud_open(const struct aud_opts *o, char *err, size_t errlen)
{
	struct aud_log *l;
	sqlite3_stmt *st;
	char meta[256], vkey[512];
	uint64_t n;
	int clean, e;
	json_t *f;

	if (o == NULL || o->db_path == NULL) {
		seterr(err, errlen, "no database path");
		errno = EINVAL;
		return NULL;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	pthread_cond_init(&l->idle, NULL);
	l->efd = -1;
	l->batch_max = o->batch_max ? o->batch_max : 256;
	l->batch_usec = o->batch_usec ? o->batch_usec : 2000;
	l->queue_max = o->queue_max ? o->queue_max : 65536;
	l->ckpt_ms = o->ckpt_ms ? o->ckpt_ms : 1000;
	l->ckpt_every = o->ckpt_every ? o->ckpt_every : 4096;
	if ((l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1 ||
	    (l->tree = aud_tree_new()) == NULL) {
		seterr(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	/* The log is evidence about sandboxes: create it private (SQLite
	 * would use 0644); the -wal and -shm files inherit this mode. */
	if ((e = open(o->db_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) != -1)
		close(e);
	if (aud_store_open(o->db_path, 1, &l->db, err, errlen) == -1)
		goto fail;
	if (aud_store_meta(l->db, "origin", meta, sizeof(meta)) == 0) {
		if (o->origin != NULL && strcmp(o->origin, meta) != 0) {
			seterr(err, errlen, "log origin is \"%s\", not \"%s\"",
			    meta, o->origin);
			errno = EINVAL;
			goto fail;
		}
		snprintf(l->origin, sizeof(l->origin), "%s", meta);
		if (aud_store_meta(l->db, "format", meta, sizeof(meta)) == -1 ||
		    strcmp(meta, AUD_FORMAT) != 0) {
			seterr(err, errlen, "not a %s database", AUD_FORMAT);
			errno = EINVAL;
			goto fail;
		}
	} else {
		if (o->origin == NULL || *o->origin == '\0' ||
		    strlen(o->origin) >= sizeof(l->origin) ||
		    strpbrk(o->origin, " \t\n+") != NULL) {
			seterr(err, errlen, "a new log needs a valid origin");
			errno = EINVAL;
			goto fail;
		}
		snprintf(l->origin, sizeof(l->origin), "%s", o->origin);
		if (sqlite3_prepare_v2(l->db, "INSERT INTO log_meta (k, v) "
		    "VALUES ('format', ?), ('origin', ?), ('created_ns', ?)",
		    -1, &st, NULL) != SQLITE_OK) {
			seterr(err, errlen, "log_meta: %s", sqlite3_errmsg(l->db));
			goto fail;
		}
		sqlite3_bind_text(st, 1, AUD_FORMAT, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, l->origin, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, now_ns(CLOCK_REALTIME));
		e = sqlite3_step(st);
		sqlite3_finalize(st);
		if (e != SQLITE_DONE) {
			seterr(err, errlen, "log_meta: %s", sqlite3_errmsg(l->db));
			goto fail;
		}
	}
	if (o->key_path != NULL &&
	    (l->key = aud_key_load(o->key_path, l->origin, err, errlen)) == NULL)
		goto fail;
	if (aud_store_size(l->db, &n) == -1) {
		seterr(err, errlen, "records are not contiguous from 0");
		errno = EBADMSG;
		goto fail;
	}
	/* Crash recovery: rebuild the frontier from stored nodes and the tail
	 * leaves, then hold it against the newest signed checkpoint. */
	if (aud_tree_load(l->tree, n, aud_store_subtree, l->db) == -1) {
		seterr(err, errlen, "merkle_nodes do not cover %llu records",
		    (unsigned long long)n);
		errno = EBADMSG;
		goto fail;
	}
	l->next_seq = n;
	if (n > 0) {
		if (sqlite3_prepare_v2(l->db, "SELECT rec_hash FROM records "
		    "WHERE seq = ?", -1, &st, NULL) != SQLITE_OK)
			goto fail;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)(n - 1));
		e = sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_bytes(st, 0) == AUD_HASH_LEN;
		if (e)
			memcpy(l->prev, sqlite3_column_blob(st, 0),
			    AUD_HASH_LEN);
		sqlite3_finalize(st);
		if (!e) {
			seterr(err, errlen, "bad rec_hash at seq %llu",
			    (unsigned long long)(n - 1));
			errno = EBADMSG;
			goto fail;
		}
	}
	if (check_last_ckpt(l, n, err, errlen) == -1)
		goto fail;
	l->last_ckpt_mono = now_ns(CLOCK_MONOTONIC);
	clean = last_kind_is_close(l->db, n);
	if (sqlite3_prepare_v2(l->db, "INSERT INTO records (seq, ts_ns, kind, "
	    "canon, rec_hash, decision, sandbox, dst_host, dst_ip, dst_port, "
	    "rule_id, mcp_server, mcp_tool) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
	    -1, &l->ins_rec, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(l->db, "INSERT INTO merkle_nodes (level, idx, "
	    "hash) VALUES (?, ?, ?)", -1, &l->ins_node, NULL) != SQLITE_OK) {
		seterr(err, errlen, "prepare: %s", sqlite3_errmsg(l->db));
		goto fail;
	}
	if (pthread_create(&l->th, NULL, writer_main, l) != 0) {
		seterr(err, errlen, "cannot start the writer thread");
		goto fail;
	}
	l->started = 1;
	f = json_pack("{s:b,s:s,s:I}", "recovered", n > 0 && !clean,
	    "format", AUD_FORMAT, "last_ckpt_size",
	    (json_int_t)l->last_ckpt_size);
	json_object_set_new(f, "last_seq", n > 0 ?
	    json_integer((json_int_t)(n - 1)) : json_null());
	if (l->key != NULL && aud_key_vkey(l->key, vkey, sizeof(vkey)) == 0)
		json_object_set_new(f, "vkey", json_string(vkey));
	else
		json_object_set_new(f, "vkey", json_null());
	if (enqueue(l, "log.open", f, 0, NULL, NULL, 1) == -1 ||
	    aud_sync(l) == -1) {
		seterr(err, errlen, "cannot append log.open");
		aud_close(l);
		errno = EIO;
		return NULL;
	}
	return l;
fail:
	e = errno;
	free_log(l);
	errno = e ? e : EIO;
	return NULL;
}

void
aud_close(struct aud_log *l)
{
	if (l == NULL)
		return;
	if (l->started) {
		enqueue(l, "log.close", json_object(), 0, NULL, NULL, 1);
		pthread_mutex_lock(&l->mu);
		l->stop = 1;
		pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->th, NULL);
		l->started = 0;
	}
	aud_dispatch(l);
	free_log(l);
}
