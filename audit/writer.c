/*
 * writer: the one thread that owns the log's database. Producers on the
 * daemon's event-loop thread queue records (already serialised, in their own
 * thread) and never wait for the disk; the writer group-commits them (one
 * BEGIN IMMEDIATE ... COMMIT per batch: whatever queued during the previous
 * commit, up to 4096 records, with no timer), and only after that FULL commit
 * acknowledges durable records (through an eventfd and aud_dispatch() in the
 * caller's thread) and then signs a checkpoint. WAL checkpoints run in a
 * second thread so that their copying and fsync stay off the commit path. A full queue never blocks: the drop is counted and
 * written as one log.gap, because a silent hole would be worse than a signed
 * one (reference/audit.md §3.5). An async record that cannot be queued for
 * lack of memory is counted the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit/priv.h"

/*
 * A queued record. The producer serialises its fields (and derives the index
 * columns) before queueing, so the writer thread -- the one resource every
 * producer shares -- never touches a JSON tree: it copies bytes, hashes and
 * inserts.
 */
struct item {
	struct item	*next;
	size_t		 cap;		/* bytes of data[] */
	char		 kind[32];
	const char	*body;		/* canonical fields object, in data[] */
	size_t		 blen, nmem;
	const size_t	*start;		/* member offsets, in data[] */
	struct aud_cols	 cols;		/* strings point into data[] */
	int		 durable, force_ckpt, ok;
	int		 skip;		/* not written: the log is constrained */
	int		 closing;	/* aud_close's log.close: never
					 * refused for a full queue */
	aud_done_fn	 done;
	void		*arg;
	int64_t		 ts, mono;
	uint64_t	 seq;
	size_t		 data[];	/* offsets, then body and strings */
};

/*
 * Processed items are kept for reuse rather than freed: at tens of
 * thousands of records a second, malloc/free across threads made glibc grow
 * and trim its arenas constantly, and the page faults cost more than the
 * records. Under load the cache holds at most what the queue held (it never
 * exceeds queue_max items of at most CACHE_ITEM_MAX bytes); when the writer
 * goes idle it shrinks back to CACHE_IDLE items.
 */
#define CACHE_ITEM_MAX	8192
#define CACHE_IDLE	1024

/* Async records lost before they reached the queue, for one log.gap. */
struct lossc {
	uint64_t	 n;
	int64_t		 from, to;	/* CLOCK_REALTIME of the first, last */
};

/* What the next batch writes as log.gap records before its own. */
struct pending {
	struct lossc	 drop;		/* queue_overflow */
	struct lossc	 nomem;		/* out_of_memory */
	struct lossc	 werr;		/* write_error: async rows of a failed
					 * batch, by their own times */
	struct lossc	 full;		/* disk_full: async rows not written
					 * while the log is constrained */
};

struct aud_log {
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;		/* work for the writer */
	pthread_cond_t	 idle;		/* a batch finished */
	struct item	*qh, *qt;
	size_t		 qlen;
	struct item	*ch, *ct;	/* completions for aud_dispatch */
	struct item	*cache;		/* free items for reuse */
	size_t		 ncache;
	uint64_t	 enq, done;	/* items queued / processed */
	uint64_t	 dropped;	/* for a full queue, ever */
	struct pending	 pend;
	uint64_t	 failures;
	int		 stop, started;
	pthread_t	 th;
	/* The WAL checkpointer: its own thread and connection, so that the
	 * copy into the main file and its fsync stay off the commit path. */
	pthread_t	 ckth;
	pthread_cond_t	 ckcv;
	sqlite3		*ckdb;
	int		 ck_started, ck_want, ck_stop;
	int		 wal_req;	/* WAL frames at the last request */
	int		 efd;

	/* Writer-thread state below; read by others only under mu. */
	sqlite3		*db;
	sqlite3_stmt	*ins_rec, *ins_node, *ins_ckpt;
	char		*out;		/* the record being built */
	size_t		 outcap;
	char		 origin_json[1600];	/* "origin" as canonical string */
	size_t		 origin_jlen;
	struct aud_tree	*tree;
	uint8_t		 prev[AUD_HASH_LEN];
	uint64_t	 next_seq;
	uint64_t	 committed_seq;	/* next_seq after the last commit; mu */
	uint64_t	 unwritten;	/* lost at close, not even a gap */
	char		 origin[256];
	struct aud_key	*key;
	uint64_t	 last_ckpt_size;
	int64_t		 last_ckpt_mono;
	unsigned	 batch_max, batch_usec, queue_max, ckpt_ms, ckpt_every;
	unsigned	 linger_usec;	/* async-only batches; see writer_main */
	size_t		 qdurable;	/* durable items in the queue; mu */
	int		 lingering;	/* writer waits for more async; mu */
	int		 syncers;	/* threads inside aud_sync; mu */
	/* aud_submit_canon's scratch, reused so that it allocates nothing
	 * per record: the member scan and a decoding buffer per column. */
	pthread_mutex_t	 cmu;
	struct aud_scan	 csc;
	struct aud_strbuf csb[6];
	int		 node_err;
	/* The volume (audit/reserve.c): constrained once the reserve was
	 * given up for a full volume, until it is held again. Writer
	 * thread; the counters are read under mu. */
	struct aud_reserve *reserve;
	int		 constrained;
	int64_t		 space_mono;	/* last try to take the reserve */
	uint64_t	 skipped, released;
	uint64_t	 reserve_bytes;
};

/* How often a constrained writer looks for room to take the reserve. */
#define SPACE_RETRY_NS	1000000000LL

/* WAL frames after which the checkpointer is woken, and after which the
 * writer checkpoints itself (a WAL that is never fully copied is never
 * restarted: without this it would grow for as long as writes go on).
 * Either happens again only after WAL_SOFT more frames. */
#define WAL_SOFT	1000
#define WAL_HARD	8000

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

/* Counts one lost record at ts. Under l->mu. */
static void
lossc_count(struct lossc *c, int64_t ts)
{
	if (c->n++ == 0 || ts < c->from)
		c->from = ts;
	if (c->n == 1 || ts > c->to)
		c->to = ts;
}

/* Adds the counts of src (taken earlier) back into dst. Under l->mu. */
static void
lossc_add(struct lossc *dst, const struct lossc *src)
{
	if (src->n == 0)
		return;
	if (dst->n == 0 || src->from < dst->from)
		dst->from = src->from;
	if (dst->n == 0 || src->to > dst->to)
		dst->to = src->to;
	dst->n += src->n;
}

static uint64_t
pending_total(const struct pending *pd)
{
	return pd->drop.n + pd->nomem.n + pd->werr.n + pd->full.n;
}

static const char *const reserved[] = {
	"v", "origin", "seq", "prev", "ts", "mono", "kind", NULL
};

/* Returns a list of items to the cache, freeing what does not fit. Under
 * l->mu. */
static struct item *
recycle_locked(struct aud_log *l, struct item *list)
{
	struct item *it, *next, *spill = NULL;

	for (it = list; it != NULL; it = next) {
		next = it->next;
		if (l->ncache < l->queue_max && it->cap <= CACHE_ITEM_MAX) {
			it->next = l->cache;
			l->cache = it;
			l->ncache++;
		} else {
			it->next = spill;
			spill = it;
		}
	}
	return spill;
}

static void
free_items(struct item *list)
{
	struct item *next;

	for (; list != NULL; list = next) {
		next = list->next;
		free(list);
	}
}

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
		sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

/* Compares the key of the member at s ('"key":...') with a C string. */
static int
memberkeycmp(const char *s, const char *want)
{
	for (s++; *s != '"' && *want != '\0' && *s == *want; s++, want++)
		;
	if (*s == '"')
		return *want == '\0' ? 0 : -1;
	if (*want == '\0')
		return 1;
	return (unsigned char)*s < (unsigned char)*want ? -1 : 1;
}

static char *
put_u64(char *p, uint64_t v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (n > 0)
		*p++ = tmp[--n];
	return p;
}

/* A fields object in canonical bytes, cut at its top-level members. */
struct fbytes {
	const char	*buf;
	size_t		 len, n;
	const size_t	*start;
};

/* The common fields in bytewise key order (the canonical order). */
enum { R_KIND, R_MONO, R_ORIGIN, R_PREV, R_SEQ, R_TS, R_V, R_N };
static const char *const rnames[R_N] = {
	"kind", "mono", "origin", "prev", "seq", "ts", "v"
};

/*
 * Writes the record's canonical bytes into l->out: the producer's members
 * (already canonical and sorted) merged with the common fields. The result
 * is byte for byte what aud_canon_dump gives for the whole record, which
 * check_audit_perf asserts.
 */
static int
build_record(struct aud_log *l, const char *kind, const struct fbytes *m,
    int64_t ts, int64_t mono, size_t *lenp)
{
	size_t need, fi = 0, ri = 0, e;
	char *p, *np;
	int first = 1, c;

	need = m->len + l->origin_jlen + strlen(kind) + 256;
	if (need > l->outcap) {
		if ((np = realloc(l->out, need)) == NULL)
			return -1;
		l->out = np;
		l->outcap = need;
	}
	if (l->next_seq > (uint64_t)AUD_INT_MAX) {
		errno = EOVERFLOW;
		return -1;
	}
	p = l->out;
	*p++ = '{';
	while (fi < m->n || ri < R_N) {
		c = fi >= m->n ? 1 : ri >= R_N ? -1 :
		    memberkeycmp(m->buf + m->start[fi], rnames[ri]);
		if (c == 0) {
			errno = EINVAL;
			return -1;
		}
		if (!first)
			*p++ = ',';
		first = 0;
		if (c < 0) {
			/* Up to the comma before the next member, or the
			 * closing brace. */
			e = fi + 1 < m->n ? m->start[fi + 1] - 1 : m->len - 1;
			memcpy(p, m->buf + m->start[fi], e - m->start[fi]);
			p += e - m->start[fi];
			fi++;
			continue;
		}
		switch (ri++) {
		case R_KIND:
			p += sprintf(p, "\"kind\":\"%s\"", kind);
			break;
		case R_MONO:
			memcpy(p, "\"mono\":\"", 8);
			p = put_u64(p + 8, mono < 0 ? 0 : (uint64_t)mono);
			*p++ = '"';
			break;
		case R_ORIGIN:
			memcpy(p, "\"origin\":", 9);
			memcpy(p + 9, l->origin_json, l->origin_jlen);
			p += 9 + l->origin_jlen;
			break;
		case R_PREV:
			memcpy(p, "\"prev\":\"", 8);
			aud_hex(l->prev, AUD_HASH_LEN, p + 8);
			p += 8 + 2 * AUD_HASH_LEN;
			*p++ = '"';
			break;
		case R_SEQ:
			memcpy(p, "\"seq\":", 6);
			p = put_u64(p + 6, l->next_seq);
			break;
		case R_TS:
			memcpy(p, "\"ts\":\"", 6);
			p = put_u64(p + 6, ts < 0 ? 0 : (uint64_t)ts);
			*p++ = '"';
			break;
		case R_V:
			memcpy(p, "\"v\":1", 5);
			p += 5;
			break;
		}
	}
	*p++ = '}';
	*p = '\0';
	*lenp = (size_t)(p - l->out);
	return 0;
}

/* Writes one record and its tree nodes. In a txn. */
static int
append_record(struct aud_log *l, const char *kind, const struct fbytes *m,
    const struct aud_cols *c, int64_t ts, int64_t mono, uint64_t *seqp)
{
	uint8_t h[AUD_HASH_LEN], leaf[AUD_HASH_LEN];
	sqlite3_stmt *st = l->ins_rec;
	size_t len;

	if (build_record(l, kind, m, ts, mono, &len) == -1)
		return -1;
	aud_sha256(l->out, len, h);
	sqlite3_reset(st);
	/* Every parameter is bound on every row (NULLs included), so no
	 * clear_bindings; the buffers outlive the step. */
	sqlite3_bind_int64(st, 1, (sqlite3_int64)l->next_seq);
	sqlite3_bind_int64(st, 2, ts);
	sqlite3_bind_int(st, 3, c->kind);
	sqlite3_bind_blob(st, 4, l->out, (int)len, SQLITE_STATIC);
	sqlite3_bind_blob(st, 5, h, AUD_HASH_LEN, SQLITE_STATIC);
	if (c->decision)
		sqlite3_bind_int(st, 6, c->decision);
	else
		sqlite3_bind_null(st, 6);
	bind_text(st, 7, c->sandbox);
	bind_text(st, 8, c->dst_host);
	bind_text(st, 9, c->dst_ip);
	if (c->has_port)
		sqlite3_bind_int64(st, 10, c->dst_port);
	else
		sqlite3_bind_null(st, 10);
	bind_text(st, 11, c->rule_id);
	bind_text(st, 12, c->mcp_server);
	bind_text(st, 13, c->mcp_tool);
	if (sqlite3_step(st) != SQLITE_DONE) {
		sqlite3_reset(st);
		return -1;
	}
	sqlite3_reset(st);
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
	st = l->ins_ckpt;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, (sqlite3_int64)size);
	sqlite3_bind_blob(st, 2, note, (int)strlen(note), SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now_ns(CLOCK_REALTIME));
	if (sqlite3_step(st) == SQLITE_DONE) {
		l->last_ckpt_size = size;
		l->last_ckpt_mono = now_ns(CLOCK_MONOTONIC);
	}
	sqlite3_reset(st);
	free(note);
}

static int
write_gap(struct aud_log *l, const char *reason, uint64_t lost, int64_t from,
    int64_t to)
{
	struct aud_members *m;
	struct fbytes fb;
	struct aud_cols c;
	uint64_t seq;
	json_t *gap;
	int rc = -1;

	/* Rare: the writer may build this one from a tree itself. */
	gap = json_pack("{s:s,s:I,s:o,s:o}", "reason", reason, "lost",
	    (json_int_t)lost, "from_ts", aud_ns_json(from), "to_ts",
	    aud_ns_json(to));
	if ((m = malloc(sizeof(*m))) != NULL && gap != NULL &&
	    aud_canon_members(gap, m, NULL, 0) == 0) {
		aud_cols_from(gap, &c);
		c.kind = aud_kind_code("log.gap");
		fb.buf = m->buf;
		fb.len = m->len;
		fb.n = m->n;
		fb.start = m->start;
		rc = append_record(l, "log.gap", &fb, &c, to,
		    now_ns(CLOCK_MONOTONIC), &seq);
		aud_members_free(m);
	}
	free(m);
	json_decref(gap);
	return rc;
}

/*
 * Does a constrained log still write it? Durable records (a removal, a
 * taint, an orphan's removal: whoever waits for them acts on them) and the
 * log's own do; sandbox.create does not, since a create may be refused,
 * and async records do not, since they are what filled the volume.
 */
static int
must_write(const struct item *it)
{
	if (it->cols.kind == aud_kind_code("log.open"))
		return 1;
	return it->durable && strcmp(it->kind, "sandbox.create") != 0;
}

/* SQLite's verdict on the last statement: the volume is full. */
static int
db_full(struct aud_log *l)
{
	return (sqlite3_errcode(l->db) & 0xff) == SQLITE_FULL;
}

/*
 * One try at committing a batch, after the gaps pd counts: 1 when it is
 * durable, 0 when nothing of it is (the in-memory state wound back), with
 * *full set when SQLite said the volume is full. A constrained log skips
 * what must_write refuses: durable ones get ok = 0, async ones are counted
 * in *skip (a disk_full gap, once the batch is in).
 */
static int
commit_once(struct aud_log *l, struct item *batch, const struct pending *pd,
    struct lossc *skip, int *full, int *force)
{
	struct aud_tree *snap;
	struct fbytes fb;
	uint8_t prev[AUD_HASH_LEN];
	uint64_t next = l->next_seq;
	struct item *it;
	int ok = 1;

	*full = 0;
	*force = 0;
	memset(skip, 0, sizeof(*skip));
	if ((snap = aud_tree_dup(l->tree)) == NULL)
		ok = 0;
	memcpy(prev, l->prev, AUD_HASH_LEN);
	if (ok && sqlite3_exec(l->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
	    SQLITE_OK)
		ok = 0;
	if (ok && pd->drop.n > 0 && write_gap(l, "queue_overflow", pd->drop.n,
	    pd->drop.from, pd->drop.to) == -1)
		ok = 0;
	if (ok && pd->nomem.n > 0 && write_gap(l, "out_of_memory",
	    pd->nomem.n, pd->nomem.from, pd->nomem.to) == -1)
		ok = 0;
	/* From the first lost row's time; to now, when they are known lost
	 * for good (as the record's own time, it follows the others). */
	if (ok && pd->werr.n > 0 && write_gap(l, "write_error", pd->werr.n,
	    pd->werr.from, now_ns(CLOCK_REALTIME)) == -1)
		ok = 0;
	if (ok && pd->full.n > 0 && write_gap(l, "disk_full", pd->full.n,
	    pd->full.from, pd->full.to) == -1)
		ok = 0;
	for (it = batch; ok && it != NULL; it = it->next) {
		it->skip = l->constrained && !must_write(it);
		if (it->skip) {
			if (!it->durable)
				lossc_count(skip, it->ts);
			continue;
		}
		fb.buf = it->body;
		fb.len = it->blen;
		fb.n = it->nmem;
		fb.start = it->start;
		if (append_record(l, it->kind, &fb, &it->cols, it->ts,
		    it->mono, &it->seq) == -1)
			ok = 0;
		*force |= it->force_ckpt;
	}
	if (ok && sqlite3_exec(l->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		ok = 0;
	if (!ok) {
		*full = db_full(l);
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
	return ok;
}

/*
 * A constrained writer takes the reserve back once the volume has room for
 * it (checked at most once a second), and is then unconstrained.
 */
static void
space_retry(struct aud_log *l)
{
	int64_t now;

	if (!l->constrained || l->reserve == NULL)
		return;
	now = now_ns(CLOCK_MONOTONIC);
	if (now - l->space_mono < SPACE_RETRY_NS)
		return;
	l->space_mono = now;
	if (aud_reserve_restore(l->reserve) == 0) {
		pthread_mutex_lock(&l->mu);
		l->constrained = 0;
		pthread_mutex_unlock(&l->mu);
	}
}

/* Commits one batch, after the gaps pd counts. A batch refused for a full
 * volume is tried once more from the reserve, constrained. Returns 1 when
 * a checkpoint is due after it. */
static int
process(struct aud_log *l, struct item *batch, const struct pending *pd_in)
{
	static const struct pending none;
	const struct pending *pd = pd_in;
	struct lossc skip;
	uint64_t size;
	struct item *it;
	int ok, full, force, due = 0, must = batch == NULL;

	space_retry(l);
	for (it = batch; it != NULL; it = it->next)
		must |= must_write(it);
	/* A constrained log writes its gaps only beside a record it must
	 * write (a heartbeat at least once a minute): a gap per batch of a
	 * flood would spend the reserve on gaps. */
	if (l->constrained && !must)
		pd = &none;
	ok = commit_once(l, batch, pd, &skip, &full, &force);
	if (!ok && full && aud_reserve_release(l->reserve)) {
		pthread_mutex_lock(&l->mu);
		l->constrained = 1;
		l->released++;
		pthread_mutex_unlock(&l->mu);
		l->space_mono = now_ns(CLOCK_MONOTONIC);
		ok = commit_once(l, batch, pd, &skip, &full, &force);
	}
	for (it = batch; it != NULL; it = it->next)
		it->ok = ok && !it->skip;
	if (ok) {
		size = aud_tree_size(l->tree);
		due = force || size - l->last_ckpt_size >= l->ckpt_every ||
		    now_ns(CLOCK_MONOTONIC) - l->last_ckpt_mono >=
		    (int64_t)l->ckpt_ms * 1000000;
	}
	pthread_mutex_lock(&l->mu);
	if (pd != pd_in) {
		lossc_add(&l->pend.drop, &pd_in->drop);
		lossc_add(&l->pend.nomem, &pd_in->nomem);
		lossc_add(&l->pend.werr, &pd_in->werr);
		lossc_add(&l->pend.full, &pd_in->full);
	}
	if (ok) {
		l->committed_seq = l->next_seq;
		/* Not written, and now known not to be: one gap with the
		 * next batch. */
		lossc_add(&l->pend.full, &skip);
		l->skipped += skip.n;
	}
	if (!ok) {
		l->failures++;
		/* Neither the loss counts nor the async records of a failed
		 * batch vanish: they become a log.gap once writing works
		 * again. Durable callers learn it from ok = 0. */
		lossc_add(&l->pend.drop, &pd->drop);
		lossc_add(&l->pend.nomem, &pd->nomem);
		lossc_add(&l->pend.werr, &pd->werr);
		lossc_add(&l->pend.full, &pd->full);
		for (it = batch; it != NULL; it = it->next)
			if (!it->durable)
				lossc_count(&l->pend.werr, it->ts);
	}
	pthread_mutex_unlock(&l->mu);
	return due;
}

/*
 * Runs after each commit on the writer's connection (outside the write
 * lock), in place of SQLite's autocheckpoint. nframe counts the frames
 * since the WAL last restarted, and the WAL restarts only at a write that
 * finds it fully copied; a checkpoint requested on every commit past the
 * threshold kept one running beside nearly every commit -- its fsync of the
 * database competing with the commit's fsync of the WAL, so that the WAL
 * was never found fully copied and the next commit asked again. A request
 * therefore needs WAL_SOFT frames more than the previous one.
 */
static int
wal_hook(void *arg, sqlite3 *db, const char *name, int nframe)
{
	struct aud_log *l = arg;

	if (nframe < l->wal_req)
		l->wal_req = 0;		/* the WAL restarted */
	if (nframe - l->wal_req < WAL_SOFT)
		return SQLITE_OK;
	l->wal_req = nframe;
	if (nframe >= WAL_HARD || !l->ck_started) {
		/* PASSIVE: never waits for readers; the checkpointer has
		 * done most of the copying already. */
		sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE,
		    NULL, NULL);
	} else {
		pthread_mutex_lock(&l->mu);
		l->ck_want = 1;
		pthread_cond_signal(&l->ckcv);
		pthread_mutex_unlock(&l->mu);
	}
	return SQLITE_OK;
}

static void *
ckpt_main(void *arg)
{
	struct aud_log *l = arg;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (!l->ck_want && !l->ck_stop)
			pthread_cond_wait(&l->ckcv, &l->mu);
		if (l->ck_stop)
			break;
		l->ck_want = 0;
		pthread_mutex_unlock(&l->mu);
		/* A failure (busy, I/O) leaves the frames in the WAL, where
		 * they are as durable; the next wakeup or the writer's own
		 * checkpoint at WAL_HARD retries. */
		sqlite3_wal_checkpoint_v2(l->ckdb, NULL,
		    SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* Starts the checkpointer; on failure SQLite's own policy stays. */
static void
ckpt_start(struct aud_log *l, const char *path)
{
	if (sqlite3_open_v2(path, &l->ckdb, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
	    sqlite3_exec(l->ckdb, "PRAGMA synchronous=FULL;", NULL, NULL,
	    NULL) != SQLITE_OK) {
		sqlite3_close(l->ckdb);
		l->ckdb = NULL;
		return;
	}
	sqlite3_busy_timeout(l->ckdb, 1000);
	/* The writer's hook decides when; this connection never writes
	 * rows, so its own autocheckpoint never fires. */
	if (pthread_create(&l->ckth, NULL, ckpt_main, l) != 0) {
		sqlite3_close(l->ckdb);
		l->ckdb = NULL;
		return;
	}
	l->ck_started = 1;
}

static void
ckpt_stop(struct aud_log *l)
{
	if (l->ck_started) {
		pthread_mutex_lock(&l->mu);
		l->ck_stop = 1;
		pthread_cond_signal(&l->ckcv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->ckth, NULL);
		l->ck_started = 0;
	}
	sqlite3_close(l->ckdb);
	l->ckdb = NULL;
}

/* Enough queued that a lingering writer must commit now: a full batch,
 * or half the queue (with a queue smaller than a batch, waiting for a
 * full batch would drop records). Under l->mu. */
static int
batch_full(const struct aud_log *l)
{
	return l->qlen >= l->batch_max || l->qlen >= l->queue_max / 2;
}

/* dl = now + usec on the clock the condition variables wait on. */
static void
deadline_in(struct timespec *dl, unsigned usec)
{
	clock_gettime(CLOCK_REALTIME, dl);
	dl->tv_nsec += (long)usec * 1000;
	while (dl->tv_nsec >= 1000000000) {
		dl->tv_nsec -= 1000000000;
		dl->tv_sec++;
	}
}

static void *
writer_main(void *arg)
{
	struct aud_log *l = arg;
	struct item *batch, *it, *next, **tail, *dh, **dt, *dlast = NULL, *dead;
	struct timespec dl;
	struct pending pd;
	uint64_t n, one = 1;
	int notify, due;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		if (l->qh == NULL && l->ncache > CACHE_IDLE) {
			/* Idle: give back what a burst made us keep. */
			dead = NULL;
			while (l->ncache > CACHE_IDLE) {
				it = l->cache;
				l->cache = it->next;
				l->ncache--;
				it->next = dead;
				dead = it;
			}
			pthread_mutex_unlock(&l->mu);
			free_items(dead);
			pthread_mutex_lock(&l->mu);
			continue;
		}
		while (l->qh == NULL && !l->stop)
			pthread_cond_wait(&l->cv, &l->mu);
		if (l->qh == NULL && l->stop) {
			/* A failed last batch left records only as counts
			 * meant for a later log.gap: one more try, gap only,
			 * before the writer ends; what still cannot be
			 * written is handed to aud_close's caller. */
			if (pending_total(&l->pend) > 0) {
				pd = l->pend;
				memset(&l->pend, 0, sizeof(l->pend));
				pthread_mutex_unlock(&l->mu);
				n = aud_tree_size(l->tree);
				(void)process(l, NULL, &pd);
				/* The gap is the log's last row: sealed now,
				 * not left to a next open. */
				if (aud_tree_size(l->tree) > n)
					checkpoint(l);
				pthread_mutex_lock(&l->mu);
			}
			l->unwritten = pending_total(&l->pend);
			break;
		}
		/*
		 * Group commit. By default a batch closes as soon as the queue
		 * is drained: records that arrive during one commit's fsync
		 * form the next batch by themselves, so waiting would only add
		 * latency. A caller may still ask for a window (batch_usec).
		 */
		if (l->batch_usec > 0 && l->qlen < l->batch_max && !l->stop) {
			deadline_in(&dl, l->batch_usec);
			while (l->qlen < l->batch_max && !l->stop &&
			    pthread_cond_timedwait(&l->cv, &l->mu, &dl) == 0)
				;
		} else if (l->linger_usec > 0 && l->qdurable == 0 &&
		    !batch_full(l) && !l->stop && l->syncers == 0) {
			/*
			 * Only async records queued: nobody waits for their
			 * commit, and a commit costs mostly per commit (the
			 * same B-tree pages written to the WAL again, one
			 * fdatasync). At tens of thousands of DNS decisions a
			 * second, commits of a few records each took most of a
			 * core, so such a batch waits up to linger_usec to
			 * grow. reference/audit.md §3.5 guessed 2 ms; 10 ms
			 * measured 7 % more DNS queries/s on the 2-core test
			 * machine (the writer shares it with the proxy) and
			 * still puts an async record in the log within 10 ms.
			 * A durable record, a full batch, aud_sync or closing
			 * ends the wait at once.
			 */
			deadline_in(&dl, l->linger_usec);
			l->lingering = 1;
			while (l->qdurable == 0 && !batch_full(l) &&
			    !l->stop && l->syncers == 0 &&
			    pthread_cond_timedwait(&l->cv, &l->mu, &dl) == 0)
				;
			l->lingering = 0;
		}
		batch = l->qh;
		tail = &batch;
		for (n = 0; *tail != NULL && n < l->batch_max; n++) {
			if ((*tail)->durable)
				l->qdurable--;
			tail = &(*tail)->next;
		}
		l->qh = *tail;
		*tail = NULL;
		if (l->qh == NULL)
			l->qt = NULL;
		l->qlen -= n;
		pd = l->pend;
		memset(&l->pend, 0, sizeof(l->pend));
		pthread_mutex_unlock(&l->mu);

		due = process(l, batch, &pd);

		/* Split the batch outside the lock: async items die here,
		 * durable ones go to the completion list in one splice. */
		dh = NULL;
		dt = &dh;
		dead = NULL;
		for (it = batch; it != NULL; it = next) {
			next = it->next;
			if (!it->durable) {
				it->next = dead;
				dead = it;
				continue;
			}
			it->next = NULL;
			*dt = it;
			dt = &it->next;
			dlast = it;
		}
		/* Durable acks go out right after the commit: the signing
		 * and storing of a checkpoint need not delay them. */
		pthread_mutex_lock(&l->mu);
		notify = dh != NULL;
		if (dh != NULL) {
			if (l->ct != NULL)
				l->ct->next = dh;
			else
				l->ch = dh;
			l->ct = dlast;
		}
		dead = recycle_locked(l, dead);
		pthread_mutex_unlock(&l->mu);
		/* After the unlock: the woken loop takes l->mu at once to
		 * drain, and would otherwise sleep again on it. */
		if (notify && write(l->efd, &one, sizeof(one)) == -1) {
			/* The counter only saturates; readers still wake. */
		}
		free_items(dead);
		/* Signed only now, after the FULL commit of every row it
		 * covers; aud_sync waits for it (done moves after). */
		if (due)
			checkpoint(l);
		pthread_mutex_lock(&l->mu);
		l->done += n;
		pthread_cond_broadcast(&l->idle);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

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
static struct item *
item_take(struct aud_log *l, size_t need)
{
	struct item *it;
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
	int64_t ts = now_ns(CLOCK_REALTIME);
	int stopped;

	pthread_mutex_lock(&l->mu);
	if (!(stopped = l->stop))
		lossc_count(&l->pend.nomem, ts);
	pthread_mutex_unlock(&l->mu);
	errno = stopped ? EPIPE : ENOMEM;
	return -1;
}

/* Stamps it and appends it to the queue, or counts and recycles it when the
 * queue is full or closed (-1 with EAGAIN or EPIPE). */
static int
queue_item(struct aud_log *l, struct item *it)
{
	int durable = it->durable, wake;

	pthread_mutex_lock(&l->mu);
	it->ts = now_ns(CLOCK_REALTIME);
	it->mono = now_ns(CLOCK_MONOTONIC);
	/* log.close may take one slot past the bound: dropped as a flood
	 * record would be, it would leave the tail unsealed and the log
	 * looking crashed. */
	if (l->stop || (l->qlen >= l->queue_max && !it->closing)) {
		int stopped = l->stop;

		if (!stopped && !durable) {
			lossc_count(&l->pend.drop, it->ts);
			l->dropped++;
		}
		it->next = NULL;
		it = recycle_locked(l, it);
		pthread_mutex_unlock(&l->mu);
		free_items(it);
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
	wake = !l->lingering || durable || batch_full(l);
	pthread_mutex_unlock(&l->mu);
	/* Signalled after the unlock: a writer woken while the lock is
	 * still held blocks on it at once and needs a second wake-up, which
	 * a durable record's caller waits for. */
	if (wake)
		pthread_cond_signal(&l->cv);
	return 0;
}

/* enqueue's force: a checkpoint after the record; ENQ_CLOSE also lets it
 * past a full queue. */
#define ENQ_CKPT	1
#define ENQ_CLOSE	2

static int
enqueue(struct aud_log *l, const char *kind, json_t *fields, int durable,
    aud_done_fn done, void *arg, int force)
{
	struct aud_members m;	/* on the stack: no allocation per record */
	struct aud_cols c;
	struct item *it;
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
	it->closing = force == ENQ_CLOSE;
	return queue_item(l, it);
}

int
aud_submit_async(struct aud_log *l, const char *kind, json_t *fields)
{
	return enqueue(l, kind, fields, 0, NULL, NULL, 0);
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
	struct item *it;
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
	return enqueue(l, kind, fields, 1, done, arg, 0);
}

int
aud_heartbeat(struct aud_log *l)
{
	return enqueue(l, "log.heartbeat", json_object(), 0, NULL, NULL,
	    ENQ_CKPT);
}

int
aud_notify_fd(const struct aud_log *l)
{
	return l->efd;
}

void
aud_dispatch(struct aud_log *l)
{
	struct item *it, *list;
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
		list = recycle_locked(l, list);
		pthread_mutex_unlock(&l->mu);
		free_items(list);
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
		/* Signed by an earlier key (rotation) or unsigned: parsed
		 * without a key, and the checks below apply all the same
		 * (verify judges keys; this judges the records). */
		if (aud_ckpt_parse(sqlite3_column_blob(st, 1),
		    (size_t)sqlite3_column_bytes(st, 1), keys, l->key ? 1 : 0,
		    &ck, err, errlen) == -1 && (errno != EPERM ||
		    aud_ckpt_parse(sqlite3_column_blob(st, 1),
		    (size_t)sqlite3_column_bytes(st, 1), NULL, 0, &ck,
		    err, errlen) == -1))
			rc = -1;
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
	free_items(l->qh);
	free_items(l->ch);
	free_items(l->cache);
	sqlite3_finalize(l->ins_rec);
	sqlite3_finalize(l->ins_node);
	sqlite3_finalize(l->ins_ckpt);
	free(l->out);
	ckpt_stop(l);
	sqlite3_close(l->db);
	aud_tree_free(l->tree);
	aud_key_free(l->key);
	aud_reserve_free(l->reserve);
	if (l->efd != -1)
		close(l->efd);
	aud_scan_free(&l->csc);
	for (size_t i = 0; i < sizeof(l->csb) / sizeof(l->csb[0]); i++)
		free(l->csb[i].p);
	pthread_mutex_destroy(&l->cmu);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	pthread_cond_destroy(&l->idle);
	pthread_cond_destroy(&l->ckcv);
	free(l);
}

struct aud_log *
aud_open(const struct aud_opts *o, char *err, size_t errlen)
{
	struct aud_log *l;
	sqlite3_stmt *st;
	char meta[256], vkey[512], *c = NULL;
	uint64_t n;
	size_t clen;
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
	pthread_mutex_init(&l->cmu, NULL);
	pthread_cond_init(&l->cv, NULL);
	pthread_cond_init(&l->idle, NULL);
	pthread_cond_init(&l->ckcv, NULL);
	l->efd = -1;
	/* Large batches only happen under load (a batch is what queued up
	 * during the previous commit); they amortise the fsync. */
	l->batch_max = o->batch_max ? o->batch_max : 4096;
	l->batch_usec = o->batch_usec;
	l->linger_usec = o->async_linger_usec == 0 ? 10000 :
	    o->async_linger_usec == AUD_LINGER_NONE ? 0 : o->async_linger_usec;
	l->queue_max = o->queue_max ? o->queue_max : 65536;
	l->ckpt_ms = o->ckpt_ms ? o->ckpt_ms : 1000;
	l->ckpt_every = o->ckpt_every ? o->ckpt_every : 4096;
	if ((l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1 ||
	    (l->tree = aud_tree_new()) == NULL) {
		seterr(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	/* The log is evidence about sandboxes: create it private (SQLite
	 * would use 0644), and narrow one an older version left wider; the
	 * -wal and -shm files inherit this mode. */
	if ((e = open(o->db_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) ==
	    -1 || fchmod(e, 0600) == -1) {
		seterr(err, errlen, "%s: %s", o->db_path, strerror(errno));
		if (e != -1)
			close(e);
		goto fail;
	}
	close(e);
	if (aud_store_open(o->db_path, 1, &l->db, err, errlen) == -1)
		goto fail;
	/* Taken before anything else is written. A volume already too full
	 * for it starts constrained; the writer takes it once there is
	 * room. */
	if (o->reserve_bytes > 0) {
		l->reserve_bytes = o->reserve_bytes;
		if ((l->reserve = aud_reserve_new(o->db_path,
		    o->reserve_bytes)) == NULL) {
			seterr(err, errlen, "out of memory");
			goto fail;
		}
		if (aud_reserve_make(l->reserve) == -1) {
			if (errno != ENOSPC && errno != EDQUOT) {
				seterr(err, errlen, "%s.reserve: %s",
				    o->db_path, strerror(errno));
				goto fail;
			}
			l->constrained = 1;
			l->space_mono = now_ns(CLOCK_MONOTONIC);
		}
	}
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
	/* Every record carries the origin: serialise it once. */
	if ((f = json_string(l->origin)) == NULL ||
	    (c = aud_canon_dump(f, &clen, NULL, 0)) == NULL ||
	    clen >= sizeof(l->origin_json)) {
		json_decref(f);
		free(c);
		seterr(err, errlen, "log origin is not valid UTF-8 text");
		errno = EINVAL;
		goto fail;
	}
	memcpy(l->origin_json, c, clen);
	l->origin_jlen = clen;
	json_decref(f);
	free(c);
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
	l->next_seq = l->committed_seq = n;
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
	    "hash) VALUES (?, ?, ?)", -1, &l->ins_node, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(l->db, "INSERT INTO checkpoints (size, note, "
	    "signed_ns) VALUES (?, ?, ?)", -1, &l->ins_ckpt, NULL) !=
	    SQLITE_OK) {
		seterr(err, errlen, "prepare: %s", sqlite3_errmsg(l->db));
		goto fail;
	}
	ckpt_start(l, o->db_path);
	sqlite3_wal_hook(l->db, wal_hook, l);
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
	if (enqueue(l, "log.open", f, 0, NULL, NULL, ENQ_CKPT) == -1 ||
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

uint64_t
aud_close(struct aud_log *l)
{
	uint64_t lost;

	if (l == NULL)
		return 0;
	if (l->started) {
		enqueue(l, "log.close", json_object(), 0, NULL, NULL,
		    ENQ_CLOSE);
		pthread_mutex_lock(&l->mu);
		l->stop = 1;
		pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->th, NULL);
		l->started = 0;
	}
	aud_dispatch(l);
	lost = l->unwritten;
	free_log(l);
	return lost;
}
