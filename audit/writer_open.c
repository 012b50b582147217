/*
 * writer_open: opening a log for writing and closing it. Opening creates
 * the database private, takes the space reserve, checks or records the
 * origin and format, and recovers after a crash: it rebuilds the tree
 * frontier and holds it against the newest signed checkpoint, so that a log
 * that was rewritten or truncated is refused rather than extended. Closing
 * seals the log with log.close and hands back what could not be written.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit/writer.h"

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
		aud_seterr(err, errlen, "checkpoints: %s",
		    sqlite3_errmsg(l->db));
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
			aud_seterr(err, errlen, "newest checkpoint (size %llu) "
			    "does not match the records: refusing to extend a "
			    "log that was rewritten or truncated",
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
	aud_wr_free_items(l->qh);
	aud_wr_free_items(l->ch);
	aud_wr_free_items(l->cache);
	sqlite3_finalize(l->ins_rec);
	sqlite3_finalize(l->ins_node);
	sqlite3_finalize(l->ins_ckpt);
	free(l->out);
	aud_wr_ckpt_stop(l);
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
		aud_seterr(err, errlen, "no database path");
		errno = EINVAL;
		return NULL;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		aud_seterr(err, errlen, "out of memory");
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
		aud_seterr(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	/* The log is evidence about sandboxes: create it private (SQLite
	 * would use 0644), and narrow one an older version left wider; the
	 * -wal and -shm files inherit this mode. */
	if ((e = open(o->db_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) ==
	    -1 || fchmod(e, 0600) == -1) {
		aud_seterr(err, errlen, "%s: %s", o->db_path, strerror(errno));
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
			aud_seterr(err, errlen, "out of memory");
			goto fail;
		}
		if (aud_reserve_make(l->reserve) == -1) {
			if (errno != ENOSPC && errno != EDQUOT) {
				aud_seterr(err, errlen, "%s.reserve: %s",
				    o->db_path, strerror(errno));
				goto fail;
			}
			l->constrained = 1;
			l->space_mono = aud_wr_now_ns(CLOCK_MONOTONIC);
		}
	}
	if (aud_store_meta(l->db, "origin", meta, sizeof(meta)) == 0) {
		if (o->origin != NULL && strcmp(o->origin, meta) != 0) {
			aud_seterr(err, errlen, "log origin is \"%s\", not "
			    "\"%s\"", meta, o->origin);
			errno = EINVAL;
			goto fail;
		}
		snprintf(l->origin, sizeof(l->origin), "%s", meta);
		if (aud_store_meta(l->db, "format", meta, sizeof(meta)) == -1 ||
		    strcmp(meta, AUD_FORMAT) != 0) {
			aud_seterr(err, errlen, "not a %s database",
			    AUD_FORMAT);
			errno = EINVAL;
			goto fail;
		}
	} else {
		if (o->origin == NULL || *o->origin == '\0' ||
		    strlen(o->origin) >= sizeof(l->origin) ||
		    strpbrk(o->origin, " \t\n+") != NULL) {
			aud_seterr(err, errlen, "a new log needs a valid "
			    "origin");
			errno = EINVAL;
			goto fail;
		}
		snprintf(l->origin, sizeof(l->origin), "%s", o->origin);
		if (sqlite3_prepare_v2(l->db, "INSERT INTO log_meta (k, v) "
		    "VALUES ('format', ?), ('origin', ?), ('created_ns', ?)",
		    -1, &st, NULL) != SQLITE_OK) {
			aud_seterr(err, errlen, "log_meta: %s",
			    sqlite3_errmsg(l->db));
			goto fail;
		}
		sqlite3_bind_text(st, 1, AUD_FORMAT, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, l->origin, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, aud_wr_now_ns(CLOCK_REALTIME));
		e = sqlite3_step(st);
		sqlite3_finalize(st);
		if (e != SQLITE_DONE) {
			aud_seterr(err, errlen, "log_meta: %s",
			    sqlite3_errmsg(l->db));
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
		aud_seterr(err, errlen, "log origin is not valid UTF-8 text");
		errno = EINVAL;
		goto fail;
	}
	memcpy(l->origin_json, c, clen);
	l->origin_jlen = clen;
	json_decref(f);
	free(c);
	if (aud_store_size(l->db, &n) == -1) {
		aud_seterr(err, errlen, "records are not contiguous from 0");
		errno = EBADMSG;
		goto fail;
	}
	/* Crash recovery: rebuild the frontier from stored nodes and the tail
	 * leaves, then hold it against the newest signed checkpoint. */
	if (aud_tree_load(l->tree, n, aud_store_subtree, l->db) == -1) {
		aud_seterr(err, errlen, "merkle_nodes do not cover %llu "
		    "records", (unsigned long long)n);
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
			aud_seterr(err, errlen, "bad rec_hash at seq %llu",
			    (unsigned long long)(n - 1));
			errno = EBADMSG;
			goto fail;
		}
	}
	if (check_last_ckpt(l, n, err, errlen) == -1)
		goto fail;
	l->last_ckpt_mono = aud_wr_now_ns(CLOCK_MONOTONIC);
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
		aud_seterr(err, errlen, "prepare: %s", sqlite3_errmsg(l->db));
		goto fail;
	}
	aud_wr_ckpt_start(l, o->db_path);
	sqlite3_wal_hook(l->db, aud_wr_wal_hook, l);
	if (pthread_create(&l->th, NULL, aud_wr_main, l) != 0) {
		aud_seterr(err, errlen, "cannot start the writer thread");
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
	if (aud_wr_enqueue(l, "log.open", f, 0, NULL, NULL,
	    AUD_ENQ_CKPT) == -1 ||
	    aud_sync(l) == -1) {
		aud_seterr(err, errlen, "cannot append log.open");
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
		aud_wr_enqueue(l, "log.close", json_object(), 0, NULL, NULL,
		    AUD_ENQ_CLOSE);
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
