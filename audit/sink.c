/*
 * sink: the SOC feed (reference/audit.md §3.10). Each configured sink has
 * one shipper thread and its own durable cursor, a row of ship_cursor named
 * after it. The thread reads records from that cursor on its own read-only
 * connection (the database is the disk buffer: there is no second queue, so
 * a sink that is down never slows the writer), formats them as plain
 * canonical JSON or OCSF 1.8, delivers them to a file, a syslog receiver or
 * an HTTP webhook (optionally Splunk HEC), and only after a positive
 * acknowledgement moves the cursor, through a second connection that touches
 * nothing but ship_cursor. A crash or a lost acknowledgement re-sends a
 * batch (at-least-once); every event carries origin#seq for receivers to
 * dedupe on. Checkpoints ride the same stream right after the record they
 * cover, so every SIEM copy is an external checkpoint holder for `audit
 * verify --checkpoint`; a second row, "<sink>#ckpt", remembers the newest
 * checkpoint delivered, so one signed after its record was shipped still
 * goes out (late, but still after the record it covers).
 *
 * This file makes and frees a sink from its configuration; the loop and the
 * cursor are in sink_loop.c, reading and formatting in sink_batch.c, the
 * transports in sink_file.c, sink_syslog.c and sink_http.c.
 */
#include <sys/random.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/sink.h"

static int
name_ok(const char *s)
{
	size_t i, n = s ? strlen(s) : 0;

	if (n == 0 || n > 32 || s[0] == '-' || s[0] == '_')
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

/*
 * The token ends up in an HTTP header: anything but visible ASCII could
 * split the header or smuggle another one, so it is refused.
 */
static char *
read_token(const char *path, char *err, size_t errlen)
{
	char buf[SINK_TOKEN_MAX + 4];
	struct stat sb;
	ssize_t n;
	size_t len, i;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		aud_seterr(err, errlen, "token_file %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode) ||
	    sb.st_size > SINK_TOKEN_MAX + 2) {
		aud_seterr(err, errlen, "token_file %s: not a small regular "
		    "file", path);
		close(fd);
		errno = EINVAL;
		return NULL;
	}
	len = 0;
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (n == -1) {
		aud_seterr(err, errlen, "token_file %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	buf[len] = '\0';
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (len > 0 && buf[len - 1] == '\r')
		buf[--len] = '\0';
	if (len == 0 || len > SINK_TOKEN_MAX) {
		aud_seterr(err, errlen, "token_file %s: empty or too long",
		    path);
		errno = EINVAL;
		return NULL;
	}
	for (i = 0; i < len; i++)
		if (buf[i] < 0x21 || buf[i] > 0x7e) {
			aud_seterr(err, errlen, "token_file %s: the token must "
			    "be one line of visible ASCII", path);
			errno = EINVAL;
			return NULL;
		}
	return strdup(buf);
}

static int
prepare(struct aud_sink *s, const char *db_path, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	uint64_t next = 0;
	int have = 0, haveck = 0, rc;

	/* The writable connection first: it brings the -wal and -shm files
	 * a read-only connection needs. No CREATE: sinks ship an existing
	 * log, they never make one. */
	rc = sqlite3_open_v2(db_path, &s->wr, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		aud_seterr(err, errlen, "%s: %s", db_path, s->wr ?
		    sqlite3_errmsg(s->wr) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_busy_timeout(s->wr, 5000);
	if (sqlite3_exec(s->wr, "PRAGMA synchronous=FULL", NULL, NULL, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(s->wr, "INSERT INTO ship_cursor (sink, "
	    "next_seq, updated_ns) VALUES (?1, ?2, ?3) ON CONFLICT(sink) DO "
	    "UPDATE SET next_seq = ?2, updated_ns = ?3", -1, &s->q_upd, NULL) !=
	    SQLITE_OK) {
		aud_seterr(err, errlen, "%s: not an audit log: %s", db_path,
		    sqlite3_errmsg(s->wr));
		goto fail;
	}
	if (aud_store_open(db_path, 0, &s->rd, err, errlen) == -1)
		goto fail;
	if (sqlite3_prepare_v2(s->rd, "SELECT seq, canon FROM records WHERE "
	    "seq >= ? ORDER BY seq LIMIT ?", -1, &s->q_rec, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->rd, "SELECT size, note, signed_ns FROM "
	    "checkpoints WHERE size > ? AND size <= ? ORDER BY size LIMIT ?",
	    -1, &s->q_ck, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->rd, "SELECT max(seq) FROM records", -1,
	    &s->q_head, NULL) != SQLITE_OK) {
		aud_seterr(err, errlen, "%s: not an audit log: %s", db_path,
		    sqlite3_errmsg(s->rd));
		goto fail;
	}
	if (sqlite3_prepare_v2(s->rd, "SELECT sink, next_seq FROM ship_cursor "
	    "WHERE sink IN (?1, ?2)", -1, &st, NULL) != SQLITE_OK) {
		aud_seterr(err, errlen, "%s: %s", db_path,
		    sqlite3_errmsg(s->rd));
		goto fail;
	}
	sqlite3_bind_text(st, 1, s->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, s->ckname, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		sqlite3_int64 v = sqlite3_column_int64(st, 1);
		const char *k = (const char *)sqlite3_column_text(st, 0);

		if (sqlite3_column_type(st, 1) != SQLITE_INTEGER || v < 0 ||
		    k == NULL) {
			sqlite3_finalize(st);
			aud_seterr(err, errlen, "ship_cursor of %s is damaged",
			    s->name);
			goto fail;
		}
		if (strcmp(k, s->name) == 0) {
			next = (uint64_t)v;
			have = 1;
		} else {
			s->ck_next = (uint64_t)v;
			haveck = 1;
		}
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		aud_seterr(err, errlen, "%s: %s", db_path,
		    sqlite3_errmsg(s->rd));
		goto fail;
	}
	/* A cursor with no checkpoint row, as aud_ship_file left it before
	 * it became a wrapper over this file (it shipped checkpoints inline):
	 * re-send only the checkpoint that could have been signed after its
	 * record went out. */
	if (have && !haveck)
		s->ck_next = next > 0 ? next - 1 : 0;
	s->st.next_seq = next;
	return 0;
fail:
	if (errno == 0 || errno == ENOENT)
		errno = EIO;
	return -1;
}

struct aud_sink *
aud_sink_new(const char *db_path, const struct aud_sink_conf *c,
    const struct aud_sink_hooks *hooks, char *err, size_t errlen)
{
	struct aud_sink *s;
	pthread_condattr_t ca;
	int e;

	if (db_path == NULL || c == NULL || !name_ok(c->name) ||
	    c->target == NULL || c->target[0] == '\0' ||
	    strlen(c->target) > 4096) {
		aud_seterr(err, errlen, "sink: bad name, target or database "
		    "path");
		errno = EINVAL;
		return NULL;
	}
	if (c->type < AUD_SINK_FILE || c->type > AUD_SINK_WEBHOOK ||
	    c->format < 0 || c->format > AUD_SINK_OCSF) {
		aud_seterr(err, errlen, "sink %s: bad type or format", c->name);
		errno = EINVAL;
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		aud_seterr(err, errlen, "out of memory");
		return NULL;
	}
	s->fd = -1;
	snprintf(s->name, sizeof(s->name), "%s", c->name);
	/* '#' is outside sink names: the checkpoint row cannot collide. */
	snprintf(s->ckname, sizeof(s->ckname), "%s#ckpt", c->name);
	s->type = c->type;
	s->format = c->format ? c->format : AUD_SINK_JSON;
	s->hec = c->splunk_hec != 0;
	s->lag_alert = c->lag_alert;
	s->batch_max = c->batch_max ? c->batch_max : 256;
	if (s->batch_max > 65536)
		s->batch_max = 65536;
	s->timeout_ms = c->timeout_ms ? c->timeout_ms : 10000;
	s->bo_min = c->backoff_min_ms ? c->backoff_min_ms : 200;
	s->bo_max = c->backoff_max_ms ? c->backoff_max_ms : 60000;
	if (s->bo_max < s->bo_min)
		s->bo_max = s->bo_min;
	s->poll_ms = c->poll_ms ? c->poll_ms : 2000;
	if (hooks != NULL) {
		s->hooks_copy = *hooks;
		s->hooks = &s->hooks_copy;
	}
	if (getrandom(&s->rnd, sizeof(s->rnd), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(s->rnd))
		s->rnd = (uint64_t)aud_sk_now_ms() ^ (uint64_t)(uintptr_t)s;
	s->rnd |= 1;
	if (gethostname(s->hostname, sizeof(s->hostname)) == -1 ||
	    s->hostname[0] == '\0')
		snprintf(s->hostname, sizeof(s->hostname), "-");
	s->hostname[sizeof(s->hostname) - 1] = '\0';
	for (e = 0; s->hostname[e] != '\0'; e++)
		if (s->hostname[e] < 0x21 || s->hostname[e] > 0x7e)
			s->hostname[e] = '_';
	if ((s->target = strdup(c->target)) == NULL) {
		aud_seterr(err, errlen, "out of memory");
		goto fail;
	}
	errno = EINVAL;
	switch (s->type) {
	case AUD_SINK_FILE:
		if (s->target[0] != '/' || s->hec || c->token_file != NULL) {
			aud_seterr(err, errlen, "sink %s: a file sink takes an "
			    "absolute path and no token or HEC mode", s->name);
			goto fail;
		}
		break;
	case AUD_SINK_SYSLOG:
		if (s->hec || c->token_file != NULL) {
			aud_seterr(err, errlen, "sink %s: a syslog sink takes "
			    "no token or HEC mode", s->name);
			goto fail;
		}
		if (aud_sk_parse_syslog(s, s->target, err, errlen) == -1)
			goto fail;
		break;
	case AUD_SINK_WEBHOOK:
		/* Here, in the caller's thread: before 7.84 libcurl's global
		 * init is not thread-safe. */
		curl_global_init(CURL_GLOBAL_DEFAULT);
		if (strncmp(s->target, "http://", 7) != 0 &&
		    strncmp(s->target, "https://", 8) != 0) {
			aud_seterr(err, errlen, "sink %s: a webhook needs an "
			    "http:// or https:// URL", s->name);
			goto fail;
		}
		if (s->hec && c->token_file == NULL) {
			aud_seterr(err, errlen, "sink %s: Splunk HEC needs a "
			    "token_file", s->name);
			goto fail;
		}
		if (c->token_file != NULL && (s->token =
		    read_token(c->token_file, err, errlen)) == NULL)
			goto fail;
		break;
	}
	errno = 0;
	if (prepare(s, db_path, err, errlen) == -1)
		goto fail;
	if ((e = pthread_mutex_init(&s->mu, NULL)) != 0) {
		errno = e;
		aud_seterr(err, errlen, "mutex: %s", strerror(e));
		goto fail;
	}
	/* Monotonic waits: a clock step must not stall or spin the feed. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	e = pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (e != 0) {
		pthread_mutex_destroy(&s->mu);
		errno = e;
		aud_seterr(err, errlen, "condvar: %s", strerror(e));
		goto fail;
	}
	s->running = -1;	/* sync primitives live; no thread yet */
	/* /metrics shows a true lag from the start, not 0 until a send. */
	aud_sk_refresh_head(s);
	return s;
fail:
	e = errno;
	sqlite3_finalize(s->q_rec);
	sqlite3_finalize(s->q_ck);
	sqlite3_finalize(s->q_head);
	sqlite3_finalize(s->q_upd);
	sqlite3_close(s->rd);
	sqlite3_close(s->wr);
	free(s->target);
	free(s->token);
	free(s);
	errno = e ? e : EINVAL;
	return NULL;
}

const char *
aud_sink_name(const struct aud_sink *s)
{
	return s->name;
}

void
aud_sink_free(struct aud_sink *s)
{
	if (s == NULL)
		return;
	aud_sink_stop(s);
	aud_sk_sock_close(s);
	if (s->curl != NULL)
		curl_easy_cleanup(s->curl);
	curl_slist_free_all(s->hdrs);
	sqlite3_finalize(s->q_rec);
	sqlite3_finalize(s->q_ck);
	sqlite3_finalize(s->q_head);
	sqlite3_finalize(s->q_upd);
	sqlite3_close(s->rd);
	sqlite3_close(s->wr);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s->target);
	if (s->token != NULL) {
		explicit_bzero(s->token, strlen(s->token));
		free(s->token);
	}
	free(s);
}
