/*
 * writer_wal: the WAL checkpointer. Copying the WAL into the main database
 * and its fsync compete with the commit's own fsync; they run in a second
 * thread on a second connection, woken by the writer's WAL hook, so that
 * the commit path -- what durable callers wait for -- does not pay for
 * them.
 */
#include <pthread.h>

#include "audit/writer.h"

/* WAL frames after which the checkpointer is woken, and after which the
 * writer checkpoints itself (a WAL that is never fully copied is never
 * restarted: without this it would grow for as long as writes go on).
 * Either happens again only after WAL_SOFT more frames. */
#define WAL_SOFT	1000
#define WAL_HARD	8000

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
int
aud_wr_wal_hook(void *arg, sqlite3 *db, const char *name, int nframe)
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
void
aud_wr_ckpt_start(struct aud_log *l, const char *path)
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

void
aud_wr_ckpt_stop(struct aud_log *l)
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

