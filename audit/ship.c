/*
 * ship: at-least-once delivery of the log to a file sink (NDJSON of canon or
 * OCSF) with a durable cursor (reference/audit.md §3.10). The database is the
 * disk buffer, so there is no second queue: each call reads from the sink's
 * cursor, appends and fsyncs, and only then advances ship_cursor. A crash in
 * between re-sends; receivers dedupe on origin#seq. Checkpoints ride the same
 * stream right after the record that completes them, so every copy of the
 * stream is an external checkpoint holder for `audit verify --checkpoint`.
 * The syslog and HTTP sinks build on the same cursor (not yet written).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/priv.h"

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

static int
sink_name_ok(const char *s)
{
	size_t i, n = s ? strlen(s) : 0;

	if (n == 0 || n > 32)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

static int
put(int fd, const char *s, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, s, n)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

int64_t
aud_ship_file(const char *db_path, const char *sink, const char *path,
    int ocsf, size_t max, char *err, size_t errlen)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *cur = NULL, *rec = NULL, *ck = NULL, *upd = NULL;
	uint64_t next = 0, seq;
	int64_t shipped = 0;
	char *line;
	json_t *ev;
	int fd = -1, rc, len;

	if (!sink_name_ok(sink) || path == NULL || max == 0) {
		seterr(err, errlen, "bad sink name, path or batch size");
		errno = EINVAL;
		return -1;
	}
	if (aud_store_open(db_path, 0, &db, err, errlen) == -1)
		return -1;
	sqlite3_close(db);
	/* Read-write only for ship_cursor; the schema must already exist. */
	if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL) !=
	    SQLITE_OK) {
		seterr(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
		goto fail;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT next_seq FROM ship_cursor WHERE "
	    "sink = ?", -1, &cur, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT seq, canon FROM records WHERE "
	    "seq >= ? ORDER BY seq LIMIT ?", -1, &rec, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT note FROM checkpoints WHERE size = ?",
	    -1, &ck, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO ship_cursor (sink, next_seq, "
	    "updated_ns) VALUES (?1, ?2, ?3) ON CONFLICT(sink) DO UPDATE SET "
	    "next_seq = ?2, updated_ns = ?3", -1, &upd, NULL) != SQLITE_OK) {
		seterr(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
		goto fail;
	}
	sqlite3_bind_text(cur, 1, sink, -1, SQLITE_STATIC);
	if (sqlite3_step(cur) == SQLITE_ROW)
		next = (uint64_t)sqlite3_column_int64(cur, 0);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
	    0600)) == -1) {
		seterr(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	sqlite3_bind_int64(rec, 1, (sqlite3_int64)next);
	sqlite3_bind_int64(rec, 2, (sqlite3_int64)max);
	while ((rc = sqlite3_step(rec)) == SQLITE_ROW) {
		seq = (uint64_t)sqlite3_column_int64(rec, 0);
		len = sqlite3_column_bytes(rec, 1);
		/* A hole means the log is damaged: stop rather than ship a
		 * stream that silently skips records. */
		if (seq != next || len <= 0) {
			seterr(err, errlen, "record %llu missing or empty",
			    (unsigned long long)next);
			goto fail;
		}
		if (ocsf) {
			if ((ev = aud_ocsf(sqlite3_column_blob(rec, 1),
			    (size_t)len, err, errlen)) == NULL)
				goto fail;
			line = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
			json_decref(ev);
			if (line == NULL || put(fd, line, strlen(line)) == -1 ||
			    put(fd, "\n", 1) == -1) {
				free(line);
				goto werr;
			}
			free(line);
		} else if (put(fd, sqlite3_column_blob(rec, 1), (size_t)len) ==
		    -1 || put(fd, "\n", 1) == -1)
			goto werr;
		next = seq + 1;
		shipped++;
		sqlite3_reset(ck);
		sqlite3_bind_int64(ck, 1, (sqlite3_int64)next);
		if (sqlite3_step(ck) == SQLITE_ROW &&
		    sqlite3_column_bytes(ck, 0) > 0) {
			json_t *c = json_pack("{s:s%,s:I}", "checkpoint",
			    (const char *)sqlite3_column_blob(ck, 0),
			    (size_t)sqlite3_column_bytes(ck, 0), "size",
			    (json_int_t)next);

			line = c ? json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS) :
			    NULL;
			json_decref(c);
			if (line == NULL || put(fd, line, strlen(line)) == -1 ||
			    put(fd, "\n", 1) == -1) {
				free(line);
				goto werr;
			}
			free(line);
		}
	}
	if (rc != SQLITE_DONE) {
		seterr(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
		goto fail;
	}
	if (fsync(fd) == -1)
		goto werr;
	if (close(fd) == -1) {
		fd = -1;
		goto werr;
	}
	fd = -1;
	/* Only what is on the sink's disk moves the cursor. */
	sqlite3_bind_text(upd, 1, sink, -1, SQLITE_STATIC);
	sqlite3_bind_int64(upd, 2, (sqlite3_int64)next);
	sqlite3_bind_int64(upd, 3, (sqlite3_int64)time(NULL) * 1000000000);
	if (sqlite3_step(upd) != SQLITE_DONE) {
		seterr(err, errlen, "ship_cursor: %s", sqlite3_errmsg(db));
		goto fail;
	}
	sqlite3_finalize(cur);
	sqlite3_finalize(rec);
	sqlite3_finalize(ck);
	sqlite3_finalize(upd);
	sqlite3_close(db);
	return shipped;
werr:
	seterr(err, errlen, "%s: %s", path, strerror(errno));
fail:
	if (fd != -1)
		close(fd);
	sqlite3_finalize(cur);
	sqlite3_finalize(rec);
	sqlite3_finalize(ck);
	sqlite3_finalize(upd);
	sqlite3_close(db);
	if (errno == 0)
		errno = EIO;
	return -1;
}
