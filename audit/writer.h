/*
 * writer.h: the log writer's state, shared by the files that make up the
 * writer (audit/writer*.c) and by nobody else. The writer is one object --
 * a queue fed by producers, one thread that commits it, a WAL checkpointer
 * beside it -- whose parts are split by concern across files; they all see
 * struct aud_log, so it is defined here rather than in audit/priv.h, which
 * the verifier and the sinks include too.
 */
#ifndef SLUICE_AUDIT_WRITER_H
#define SLUICE_AUDIT_WRITER_H

#include <pthread.h>
#include <time.h>

#include "audit/priv.h"

/*
 * A queued record. The producer serialises its fields (and derives the index
 * columns) before queueing, so the writer thread -- the one resource every
 * producer shares -- never touches a JSON tree: it copies bytes, hashes and
 * inserts.
 */
struct aud_wr_item {
	struct aud_wr_item	*next;
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


/* Async records lost before they reached the queue, for one log.gap. */
struct aud_wr_lossc {
	uint64_t	 n;
	int64_t		 from, to;	/* CLOCK_REALTIME of the first, last */
};

/* What the next batch writes as log.gap records before its own. */
struct aud_wr_pending {
	struct aud_wr_lossc	 drop;		/* queue_overflow */
	struct aud_wr_lossc	 nomem;		/* out_of_memory */
	struct aud_wr_lossc	 werr;		/* write_error: async rows of a failed
					 * batch, by their own times */
	struct aud_wr_lossc	 full;		/* disk_full: async rows not written
					 * while the log is constrained */
};

struct aud_log {
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;		/* work for the writer */
	pthread_cond_t	 idle;		/* a batch finished */
	struct aud_wr_item	*qh, *qt;
	size_t		 qlen;
	struct aud_wr_item	*ch, *ct;	/* completions for aud_dispatch */
	struct aud_wr_item	*cache;		/* free items for reuse */
	size_t		 ncache;
	uint64_t	 enq, done;	/* items queued / processed */
	uint64_t	 dropped;	/* for a full queue, ever */
	struct aud_wr_pending	 pend;
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
	unsigned	 linger_usec;	/* async-only batches; see aud_wr_main */
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


/* A fields object in canonical bytes, cut at its top-level members. */
struct aud_wr_fbytes {
	const char	*buf;
	size_t		 len, n;
	const size_t	*start;
};

/* aud_wr_enqueue's force: a checkpoint after the record; AUD_ENQ_CLOSE also
 * lets it past a full queue. */
#define AUD_ENQ_CKPT	1
#define AUD_ENQ_CLOSE	2

/* ---- the writer thread and its group commit (audit/writer.c) ---- */
/* aud_wr_main: the writer thread's body; arg is the struct aud_log. */
void	*aud_wr_main(void *arg);
/* aud_wr_now_ns: the time on clock c in nanoseconds. */
int64_t	 aud_wr_now_ns(clockid_t c);
/* aud_wr_lossc_count: counts one lost record at ts. Under l->mu. */
void	 aud_wr_lossc_count(struct aud_wr_lossc *c, int64_t ts);
/* aud_wr_recycle_locked: returns a list of items to the cache; what does
 * not fit is returned, for aud_wr_free_items outside the lock. Under
 * l->mu. */
struct aud_wr_item *aud_wr_recycle_locked(struct aud_log *l,
	    struct aud_wr_item *list);
void	 aud_wr_free_items(struct aud_wr_item *list);
/* aud_wr_batch_full: enough queued that a lingering writer must commit
 * now. Under l->mu. */
int	 aud_wr_batch_full(const struct aud_log *l);

/* ---- the chain: record bytes, hashes, nodes, checkpoints
 * (audit/writer_chain.c); writer thread only ---- */
/* aud_wr_append: writes one record and its tree nodes, in a txn. 0 with
 * *seqp set, or -1 (the caller rolls back). */
int	 aud_wr_append(struct aud_log *l, const char *kind,
	    const struct aud_wr_fbytes *m, const struct aud_cols *c, int64_t ts,
	    int64_t mono, uint64_t *seqp);
/* aud_wr_gap: appends one log.gap record, in a txn. 0 or -1. */
int	 aud_wr_gap(struct aud_log *l, const char *reason, uint64_t lost,
	    int64_t from, int64_t to);
/* aud_wr_checkpoint: signs and stores the current tree. Only after the
 * FULL commit of every row it covers. */
void	 aud_wr_checkpoint(struct aud_log *l);

/* ---- the WAL checkpointer (audit/writer_wal.c) ---- */
/* aud_wr_wal_hook: the writer connection's sqlite3_wal_hook. */
int	 aud_wr_wal_hook(void *arg, sqlite3 *db, const char *name,
	    int nframe);
/* aud_wr_ckpt_start: starts the checkpointer on its own connection to
 * path; on failure SQLite's own policy stays. */
void	 aud_wr_ckpt_start(struct aud_log *l, const char *path);
/* aud_wr_ckpt_stop: stops it and closes its connection (a no-op if it
 * never started). */
void	 aud_wr_ckpt_stop(struct aud_log *l);

/* ---- producers (audit/writer_submit.c) ---- */
/* aud_wr_enqueue: serialises fields (consumed) in the caller's thread and
 * queues the record; force is 0 or AUD_ENQ_*. 0, or -1 with errno. */
int	 aud_wr_enqueue(struct aud_log *l, const char *kind, json_t *fields,
	    int durable, aud_done_fn done, void *arg, int force);

#endif /* SLUICE_AUDIT_WRITER_H */
