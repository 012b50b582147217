/*
 * writer: the one thread that owns the log's database. Producers on the
 * daemon's event-loop thread queue records (already serialised, in their own
 * thread) and never wait for the disk; the writer group-commits them (one
 * BEGIN IMMEDIATE ... COMMIT per batch: whatever queued during the previous
 * commit, up to 4096 records, with no timer), and only after that FULL commit
 * acknowledges durable records (through an eventfd and aud_dispatch() in the
 * caller's thread) and then signs a checkpoint. WAL checkpoints run in a
 * second thread so that their copying and fsync stay off the commit path.
 * A full queue never blocks: the drop is counted and written as one log.gap,
 * because a silent hole would be worse than a signed one (reference/audit.md
 * §3.5). An async record that cannot be queued for lack of memory is counted
 * the same way.
 *
 * This file is the writer thread: its group commit, the gaps a batch
 * writes first, and the hand-off to the space reserve when the volume is
 * full. Producers' side: writer_submit.c; the bytes and hashes of each
 * record and the signed checkpoint: writer_chain.c; the WAL checkpointer:
 * writer_wal.c; opening, recovery and closing: writer_open.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/writer.h"

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

/* How often a constrained writer looks for room to take the reserve. */
#define SPACE_RETRY_NS	1000000000LL

int64_t
aud_wr_now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Counts one lost record at ts. Under l->mu. */
void
aud_wr_lossc_count(struct aud_wr_lossc *c, int64_t ts)
{
	if (c->n++ == 0 || ts < c->from)
		c->from = ts;
	if (c->n == 1 || ts > c->to)
		c->to = ts;
}

/* Adds the counts of src (taken earlier) back into dst. Under l->mu. */
static void
lossc_add(struct aud_wr_lossc *dst, const struct aud_wr_lossc *src)
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
pending_total(const struct aud_wr_pending *pd)
{
	return pd->drop.n + pd->nomem.n + pd->werr.n + pd->full.n;
}

/* Returns a list of items to the cache, freeing what does not fit. Under
 * l->mu. */
struct aud_wr_item *
aud_wr_recycle_locked(struct aud_log *l, struct aud_wr_item *list)
{
	struct aud_wr_item *it, *next, *spill = NULL;

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

void
aud_wr_free_items(struct aud_wr_item *list)
{
	struct aud_wr_item *next;

	for (; list != NULL; list = next) {
		next = list->next;
		free(list);
	}
}

/*
 * Does a constrained log still write it? Durable records (a removal, a
 * taint, an orphan's removal: whoever waits for them acts on them) and the
 * log's own do; sandbox.create does not, since a create may be refused,
 * and async records do not, since they are what filled the volume.
 */
static int
must_write(const struct aud_wr_item *it)
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
commit_once(struct aud_log *l, struct aud_wr_item *batch,
    const struct aud_wr_pending *pd, struct aud_wr_lossc *skip, int *full,
    int *force)
{
	struct aud_tree *snap;
	struct aud_wr_fbytes fb;
	uint8_t prev[AUD_HASH_LEN];
	uint64_t next = l->next_seq;
	struct aud_wr_item *it;
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
	if (ok && pd->drop.n > 0 && aud_wr_gap(l, "queue_overflow", pd->drop.n,
	    pd->drop.from, pd->drop.to) == -1)
		ok = 0;
	if (ok && pd->nomem.n > 0 && aud_wr_gap(l, "out_of_memory",
	    pd->nomem.n, pd->nomem.from, pd->nomem.to) == -1)
		ok = 0;
	/* From the first lost row's time; to now, when they are known lost
	 * for good (as the record's own time, it follows the others). */
	if (ok && pd->werr.n > 0 && aud_wr_gap(l, "write_error", pd->werr.n,
	    pd->werr.from, aud_wr_now_ns(CLOCK_REALTIME)) == -1)
		ok = 0;
	if (ok && pd->full.n > 0 && aud_wr_gap(l, "disk_full", pd->full.n,
	    pd->full.from, pd->full.to) == -1)
		ok = 0;
	for (it = batch; ok && it != NULL; it = it->next) {
		it->skip = l->constrained && !must_write(it);
		if (it->skip) {
			if (!it->durable)
				aud_wr_lossc_count(skip, it->ts);
			continue;
		}
		fb.buf = it->body;
		fb.len = it->blen;
		fb.n = it->nmem;
		fb.start = it->start;
		if (aud_wr_append(l, it->kind, &fb, &it->cols, it->ts,
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
	now = aud_wr_now_ns(CLOCK_MONOTONIC);
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
process(struct aud_log *l, struct aud_wr_item *batch,
    const struct aud_wr_pending *pd_in)
{
	static const struct aud_wr_pending none;
	const struct aud_wr_pending *pd = pd_in;
	struct aud_wr_lossc skip;
	uint64_t size;
	struct aud_wr_item *it;
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
		l->space_mono = aud_wr_now_ns(CLOCK_MONOTONIC);
		ok = commit_once(l, batch, pd, &skip, &full, &force);
	}
	for (it = batch; it != NULL; it = it->next)
		it->ok = ok && !it->skip;
	if (ok) {
		size = aud_tree_size(l->tree);
		due = force || size - l->last_ckpt_size >= l->ckpt_every ||
		    aud_wr_now_ns(CLOCK_MONOTONIC) - l->last_ckpt_mono >=
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
				aud_wr_lossc_count(&l->pend.werr, it->ts);
	}
	pthread_mutex_unlock(&l->mu);
	return due;
}

/* Enough queued that a lingering writer must commit now: a full batch,
 * or half the queue (with a queue smaller than a batch, waiting for a
 * full batch would drop records). Under l->mu. */
int
aud_wr_batch_full(const struct aud_log *l)
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

void *
aud_wr_main(void *arg)
{
	struct aud_log *l = arg;
	struct aud_wr_item *batch, *it, *next, **tail, *dh, **dt, *dead;
	struct aud_wr_item *dlast = NULL;
	struct timespec dl;
	struct aud_wr_pending pd;
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
			aud_wr_free_items(dead);
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
					aud_wr_checkpoint(l);
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
		    !aud_wr_batch_full(l) && !l->stop && l->syncers == 0) {
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
			while (l->qdurable == 0 && !aud_wr_batch_full(l) &&
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
		dead = aud_wr_recycle_locked(l, dead);
		pthread_mutex_unlock(&l->mu);
		/* After the unlock: the woken loop takes l->mu at once to
		 * drain, and would otherwise sleep again on it. */
		if (notify && write(l->efd, &one, sizeof(one)) == -1) {
			/* The counter only saturates; readers still wake. */
		}
		aud_wr_free_items(dead);
		/* Signed only now, after the FULL commit of every row it
		 * covers; aud_sync waits for it (done moves after). */
		if (due)
			aud_wr_checkpoint(l);
		pthread_mutex_lock(&l->mu);
		l->done += n;
		pthread_cond_broadcast(&l->idle);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}
