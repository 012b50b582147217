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
 */
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "audit/priv.h"

#define SINK_BATCH_BYTES	(4u * 1024 * 1024)
#define SINK_TOKEN_MAX		4096
#define SINK_RESP_MAX		(1024 * 1024)
/* Datagrams larger than this carry a stub instead of the event (the
 * structured data still names seq and hash). */
#define SINK_DGRAM_MAX		60000
#define SINK_PEN		"sluice@32473"
#define SYSLOG_FACILITY		13	/* log audit (RFC 5424 §6.2.1) */

enum { TR_UNIX = 1, TR_UDP, TR_TCP };

struct item {
	int		 ckpt;		/* 1: a checkpoint, seq is its size */
	uint64_t	 seq;
	int64_t		 ts_ns;
	int		 sev;		/* syslog severity */
	char		 msgid[33];
	char		 origin[256];
	char		 hash[2 * AUD_HASH_LEN + 1];
	char		*body;		/* one JSON line, no newline */
	size_t		 blen;
	json_t		*ev;		/* the same event as an object */
};

struct batch {
	struct item	*it;
	size_t		 n, cap;
	size_t		 nrec, nck;
	uint64_t	 next;		/* cursor after an ack */
	uint64_t	 ck_next;	/* newest checkpoint size after an ack */
};

struct aud_sink {
	char		 name[33];
	char		 ckname[40];
	int		 type, format, hec;
	char		*target;
	char		*token;
	uint64_t	 lag_alert;
	unsigned	 batch_max, timeout_ms, bo_min, bo_max, poll_ms;

	/* Owned by the shipper (or by aud_sink_ship's caller). */
	sqlite3		*rd, *wr;
	sqlite3_stmt	*q_rec, *q_ck, *q_head, *q_upd;
	uint64_t	 ck_next;
	int		 fd;		/* syslog connection */
	int		 dir_synced;	/* file: its directory entry is durable */
	int		 tr;
	char		 host[256];
	char		 addr[256];	/* syslog host or unix path */
	char		 port[16];
	CURL		*curl;
	struct curl_slist *hdrs;
	char		 hostname[256];
	uint64_t	 rnd;
	int		 alerted;

	const struct aud_sink_hooks *hooks;
	struct aud_sink_hooks hooks_copy;

	pthread_t	 thr;
	int		 running;
	atomic_int	 stopping;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	int		 kicked;
	struct aud_sink_stats st;	/* under mu */
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

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void	refresh_head(struct aud_sink *s);

/* ---- configuration ---- */

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
		seterr(err, errlen, "token_file %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode) ||
	    sb.st_size > SINK_TOKEN_MAX + 2) {
		seterr(err, errlen, "token_file %s: not a small regular file",
		    path);
		close(fd);
		errno = EINVAL;
		return NULL;
	}
	len = 0;
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (n == -1) {
		seterr(err, errlen, "token_file %s: %s", path, strerror(errno));
		return NULL;
	}
	buf[len] = '\0';
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (len > 0 && buf[len - 1] == '\r')
		buf[--len] = '\0';
	if (len == 0 || len > SINK_TOKEN_MAX) {
		seterr(err, errlen, "token_file %s: empty or too long", path);
		errno = EINVAL;
		return NULL;
	}
	for (i = 0; i < len; i++)
		if (buf[i] < 0x21 || buf[i] > 0x7e) {
			seterr(err, errlen, "token_file %s: the token must be "
			    "one line of visible ASCII", path);
			errno = EINVAL;
			return NULL;
		}
	return strdup(buf);
}

/*
 * Syslog targets: "unix:/path" or "/path", "udp://host[:port]",
 * "tcp://host[:port]", host a name, an IPv4 address or [IPv6].
 */
static int
parse_syslog(struct aud_sink *s, const char *t, char *err, size_t errlen)
{
	const char *p, *h, *e;
	size_t hl;
	char *end;
	long port;

	if (strncmp(t, "unix:", 5) == 0 || t[0] == '/') {
		p = t[0] == '/' ? t : t + 5;
		if (p[0] != '/' || strlen(p) >= sizeof(((struct sockaddr_un *)
		    0)->sun_path)) {
			seterr(err, errlen, "syslog target %s: the socket "
			    "path must be absolute and short", t);
			return -1;
		}
		s->tr = TR_UNIX;
		snprintf(s->addr, sizeof(s->addr), "%s", p);
		return 0;
	}
	if (strncmp(t, "udp://", 6) == 0) {
		s->tr = TR_UDP;
		snprintf(s->port, sizeof(s->port), "514");
	} else if (strncmp(t, "tcp://", 6) == 0) {
		s->tr = TR_TCP;
		snprintf(s->port, sizeof(s->port), "601");
	} else {
		seterr(err, errlen, "syslog target %s: want unix:/PATH, "
		    "udp://HOST[:PORT] or tcp://HOST[:PORT]", t);
		return -1;
	}
	h = t + 6;
	if (h[0] == '[') {
		if ((e = strchr(h, ']')) == NULL)
			goto bad;
		hl = (size_t)(e - h - 1);
		h++;
		e++;
	} else {
		e = strchr(h, ':');
		if (e == NULL)
			e = h + strlen(h);
		hl = (size_t)(e - h);
	}
	if (hl == 0 || hl >= sizeof(s->addr) || memchr(h, '/', hl) != NULL ||
	    memchr(h, '@', hl) != NULL)
		goto bad;
	memcpy(s->addr, h, hl);
	s->addr[hl] = '\0';
	if (*e == ':') {
		errno = 0;
		port = strtol(e + 1, &end, 10);
		if (errno != 0 || end == e + 1 || *end != '\0' || port < 1 ||
		    port > 65535)
			goto bad;
		snprintf(s->port, sizeof(s->port), "%ld", port);
	} else if (*e != '\0')
		goto bad;
	return 0;
bad:
	seterr(err, errlen, "syslog target %s: bad host or port", t);
	return -1;
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
		seterr(err, errlen, "%s: %s", db_path, s->wr ?
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
		seterr(err, errlen, "%s: not an audit log: %s", db_path,
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
		seterr(err, errlen, "%s: not an audit log: %s", db_path,
		    sqlite3_errmsg(s->rd));
		goto fail;
	}
	if (sqlite3_prepare_v2(s->rd, "SELECT sink, next_seq FROM ship_cursor "
	    "WHERE sink IN (?1, ?2)", -1, &st, NULL) != SQLITE_OK) {
		seterr(err, errlen, "%s: %s", db_path, sqlite3_errmsg(s->rd));
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
			seterr(err, errlen, "ship_cursor of %s is damaged",
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
		seterr(err, errlen, "%s: %s", db_path, sqlite3_errmsg(s->rd));
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
		seterr(err, errlen, "sink: bad name, target or database path");
		errno = EINVAL;
		return NULL;
	}
	if (c->type < AUD_SINK_FILE || c->type > AUD_SINK_WEBHOOK ||
	    c->format < 0 || c->format > AUD_SINK_OCSF) {
		seterr(err, errlen, "sink %s: bad type or format", c->name);
		errno = EINVAL;
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		seterr(err, errlen, "out of memory");
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
		s->rnd = (uint64_t)now_ms() ^ (uint64_t)(uintptr_t)s;
	s->rnd |= 1;
	if (gethostname(s->hostname, sizeof(s->hostname)) == -1 ||
	    s->hostname[0] == '\0')
		snprintf(s->hostname, sizeof(s->hostname), "-");
	s->hostname[sizeof(s->hostname) - 1] = '\0';
	for (e = 0; s->hostname[e] != '\0'; e++)
		if (s->hostname[e] < 0x21 || s->hostname[e] > 0x7e)
			s->hostname[e] = '_';
	if ((s->target = strdup(c->target)) == NULL) {
		seterr(err, errlen, "out of memory");
		goto fail;
	}
	errno = EINVAL;
	switch (s->type) {
	case AUD_SINK_FILE:
		if (s->target[0] != '/' || s->hec || c->token_file != NULL) {
			seterr(err, errlen, "sink %s: a file sink takes an "
			    "absolute path and no token or HEC mode", s->name);
			goto fail;
		}
		break;
	case AUD_SINK_SYSLOG:
		if (s->hec || c->token_file != NULL) {
			seterr(err, errlen, "sink %s: a syslog sink takes no "
			    "token or HEC mode", s->name);
			goto fail;
		}
		if (parse_syslog(s, s->target, err, errlen) == -1)
			goto fail;
		break;
	case AUD_SINK_WEBHOOK:
		/* Here, in the caller's thread: before 7.84 libcurl's global
		 * init is not thread-safe. */
		curl_global_init(CURL_GLOBAL_DEFAULT);
		if (strncmp(s->target, "http://", 7) != 0 &&
		    strncmp(s->target, "https://", 8) != 0) {
			seterr(err, errlen, "sink %s: a webhook needs an "
			    "http:// or https:// URL", s->name);
			goto fail;
		}
		if (s->hec && c->token_file == NULL) {
			seterr(err, errlen, "sink %s: Splunk HEC needs a "
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
		seterr(err, errlen, "mutex: %s", strerror(e));
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
		seterr(err, errlen, "condvar: %s", strerror(e));
		goto fail;
	}
	s->running = -1;	/* sync primitives live; no thread yet */
	/* /metrics shows a true lag from the start, not 0 until a send. */
	refresh_head(s);
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

/* ---- reading and formatting ---- */

static void
batch_clear(struct batch *b)
{
	size_t i;

	for (i = 0; i < b->n; i++) {
		free(b->it[i].body);
		json_decref(b->it[i].ev);
	}
	free(b->it);
	memset(b, 0, sizeof(*b));
}

static struct item *
batch_add(struct batch *b)
{
	struct item *n;
	size_t cap;

	if (b->n == b->cap) {
		cap = b->cap ? b->cap * 2 : 64;
		if ((n = realloc(b->it, cap * sizeof(*n))) == NULL)
			return NULL;
		b->it = n;
		b->cap = cap;
	}
	n = &b->it[b->n++];
	memset(n, 0, sizeof(*n));
	return n;
}

static int
item_body(struct item *it)
{
	it->body = json_dumps(it->ev, JSON_COMPACT | JSON_SORT_KEYS);
	if (it->body == NULL)
		return -1;
	it->blen = strlen(it->body);
	return 0;
}

/* One record row as an item; NULL (with a message) if it is not a record
 * of this log: the feed stops there rather than ship a damaged stream. */
static int
record_item(struct aud_sink *s, struct item *it, uint64_t seq,
    const char *canon, size_t len, char *err, size_t errlen)
{
	const char *kind, *dec, *origin;
	uint8_t h[AUD_HASH_LEN];
	json_t *r;

	if ((r = aud_canon_parse(canon, len, err, errlen)) == NULL)
		goto bad;
	kind = json_string_value(json_object_get(r, "kind"));
	origin = json_string_value(json_object_get(r, "origin"));
	dec = json_string_value(json_object_get(r, "decision"));
	if (!aud_kind_valid(kind) || origin == NULL ||
	    strlen(origin) >= sizeof(it->origin) ||
	    !json_is_integer(json_object_get(r, "seq")) ||
	    (uint64_t)json_integer_value(json_object_get(r, "seq")) != seq ||
	    aud_ns_parse(json_object_get(r, "ts"), &it->ts_ns) == -1) {
		json_decref(r);
		seterr(err, errlen, "not an audit record");
		goto bad;
	}
	it->seq = seq;
	snprintf(it->origin, sizeof(it->origin), "%s", origin);
	snprintf(it->msgid, sizeof(it->msgid), "%s", kind);
	it->sev = strcmp(kind, "finding") == 0 ? 4 :
	    dec != NULL && strcmp(dec, "deny") == 0 ? 5 : 6;
	aud_sha256(canon, len, h);
	aud_hex(h, AUD_HASH_LEN, it->hash);
	if (s->format == AUD_SINK_OCSF) {
		json_decref(r);
		if ((it->ev = aud_ocsf(canon, len, err, errlen)) == NULL)
			goto bad;
		if (item_body(it) == -1)
			return -1;
	} else {
		/* Plain JSON is the canon itself, byte for byte: a receiver
		 * can hash each line and check it against the log. */
		it->ev = r;
		if ((it->body = malloc(len + 1)) == NULL)
			return -1;
		memcpy(it->body, canon, len);
		it->body[len] = '\0';
		it->blen = len;
	}
	return 0;
bad:
	seterr(err, errlen, "record %llu is not a canonical record of this "
	    "log; the feed stops before it", (unsigned long long)seq);
	errno = EBADMSG;
	return -1;
}

static int
ckpt_item(struct aud_sink *s, struct item *it, uint64_t size,
    const char *note, size_t len, int64_t signed_ns)
{
	const char *nl;
	char uid[300];

	if (len == 0 || len > 65536 || memchr(note, '\0', len) != NULL ||
	    (nl = memchr(note, '\n', len)) == NULL ||
	    (size_t)(nl - note) >= sizeof(it->origin) || nl == note) {
		errno = EBADMSG;
		return -1;
	}
	it->ckpt = 1;
	it->seq = size;
	it->ts_ns = signed_ns;
	it->sev = 6;
	snprintf(it->msgid, sizeof(it->msgid), "checkpoint");
	memcpy(it->origin, note, (size_t)(nl - note));
	it->origin[nl - note] = '\0';
	if (s->format == AUD_SINK_OCSF) {
		snprintf(uid, sizeof(uid), "%s#checkpoint/%llu", it->origin,
		    (unsigned long long)size);
		it->ev = json_pack("{s:i,s:i,s:i,s:i,s:I,s:i,s:i,s:s,"
		    "s:{s:s,s:{s:s,s:s},s:s,s:I,s:s},s:{s:s%,s:I}}",
		    "class_uid", 6002, "category_uid", 6, "activity_id", 99,
		    "type_uid", 600299, "time", (json_int_t)(signed_ns / 1000000),
		    "severity_id", 1, "status_id", 1, "message", "log.checkpoint",
		    "metadata", "version", "1.8.0", "product", "name", "sluice",
		    "vendor_name", "sluice", "uid", uid, "sequence",
		    (json_int_t)size, "log_name", "sluice-audit",
		    "unmapped", "checkpoint", note, len, "size", (json_int_t)size);
	} else
		/* The shape aud_ship_file always wrote: files shipped before
		 * and after it became a wrapper over this one read alike. */
		it->ev = json_pack("{s:s%,s:I}", "checkpoint", note, len,
		    "size", (json_int_t)size);
	if (it->ev == NULL) {
		errno = EBADMSG;
		return -1;
	}
	return item_body(it);
}

/*
 * Reads the next batch: records from the cursor (contiguous, bounded in
 * count and bytes), and the checkpoints not yet delivered that those records
 * complete, each placed right after record size-1 (or first, if that record
 * went out earlier). 0 with b filled (b->n == 0: nothing to do), or -1.
 */
static int
load_batch(struct aud_sink *s, struct batch *b, char *err, size_t errlen)
{
	struct { uint64_t size; int64_t ns; char *note; size_t len; } *ck = NULL;
	size_t nck = 0, ci = 0, bytes = 0, i, nrec0;
	uint64_t expect = s->st.next_seq, last;
	int rc, len, ret = -1;
	struct item *it;

	memset(b, 0, sizeof(*b));
	b->next = expect;
	b->ck_next = s->ck_next;
	sqlite3_reset(s->q_rec);
	sqlite3_bind_int64(s->q_rec, 1, (sqlite3_int64)expect);
	sqlite3_bind_int64(s->q_rec, 2, (sqlite3_int64)s->batch_max);
	while (bytes < SINK_BATCH_BYTES &&
	    (rc = sqlite3_step(s->q_rec)) == SQLITE_ROW) {
		uint64_t seq = (uint64_t)sqlite3_column_int64(s->q_rec, 0);

		len = sqlite3_column_bytes(s->q_rec, 1);
		/* A hole means a damaged log: never ship past it. */
		if (seq != expect || len <= 0 || len > AUD_MAX_RECORD) {
			seterr(err, errlen, "record %llu missing or empty; the "
			    "feed stops before it", (unsigned long long)expect);
			errno = EBADMSG;
			goto out;
		}
		if ((it = batch_add(b)) == NULL)
			goto nomem;
		if (record_item(s, it, seq, sqlite3_column_blob(s->q_rec, 1),
		    (size_t)len, err, errlen) == -1)
			goto out;
		bytes += it->blen;
		expect = seq + 1;
		b->nrec++;
	}
	if (bytes < SINK_BATCH_BYTES && rc != SQLITE_DONE) {
		seterr(err, errlen, "records: %s", sqlite3_errmsg(s->rd));
		errno = EIO;
		goto out;
	}
	sqlite3_reset(s->q_rec);
	b->next = expect;
	last = expect;	/* checkpoints up to this size are covered */

	sqlite3_reset(s->q_ck);
	sqlite3_bind_int64(s->q_ck, 1, (sqlite3_int64)s->ck_next);
	sqlite3_bind_int64(s->q_ck, 2, (sqlite3_int64)last);
	sqlite3_bind_int64(s->q_ck, 3, (sqlite3_int64)s->batch_max + 64);
	while ((rc = sqlite3_step(s->q_ck)) == SQLITE_ROW) {
		void *p;

		if ((p = realloc(ck, (nck + 1) * sizeof(*ck))) == NULL)
			goto nomem;
		ck = p;
		ck[nck].size = (uint64_t)sqlite3_column_int64(s->q_ck, 0);
		ck[nck].ns = sqlite3_column_int64(s->q_ck, 2);
		len = sqlite3_column_bytes(s->q_ck, 1);
		if (len <= 0 || len > 65536 ||
		    (ck[nck].note = malloc((size_t)len)) == NULL) {
			seterr(err, errlen, "checkpoint %llu is damaged",
			    (unsigned long long)ck[nck].size);
			errno = EBADMSG;
			goto out;
		}
		memcpy(ck[nck].note, sqlite3_column_blob(s->q_ck, 1),
		    (size_t)len);
		ck[nck].len = (size_t)len;
		nck++;
	}
	sqlite3_reset(s->q_ck);
	if (rc != SQLITE_DONE) {
		seterr(err, errlen, "checkpoints: %s", sqlite3_errmsg(s->rd));
		errno = EIO;
		goto out;
	}

	/* Interleave: move the records aside and rebuild the list. */
	{
		struct item *recs = b->it;
		size_t nr = b->n;

		nrec0 = b->nrec;
		b->it = NULL;
		b->n = b->cap = 0;
		for (i = 0; i <= nr; i++) {
			uint64_t upto = i < nr ? recs[i].seq : UINT64_MAX;

			/* Checkpoints whose last record is before recs[i]. */
			while (ci < nck && (ck[ci].size <= upto ||
			    i == nr)) {
				if ((it = batch_add(b)) == NULL ||
				    ckpt_item(s, it, ck[ci].size, ck[ci].note,
				    ck[ci].len, ck[ci].ns) == -1) {
					if (it == NULL)
						errno = ENOMEM;
					seterr(err, errlen, "checkpoint %llu: "
					    "%s", (unsigned long long)
					    ck[ci].size, strerror(errno));
					for (; i < nr; i++) {
						free(recs[i].body);
						json_decref(recs[i].ev);
					}
					free(recs);
					goto out;
				}
				b->ck_next = ck[ci].size;
				b->nck++;
				ci++;
			}
			if (i < nr) {
				if ((it = batch_add(b)) == NULL) {
					for (; i < nr; i++) {
						free(recs[i].body);
						json_decref(recs[i].ev);
					}
					free(recs);
					goto nomem;
				}
				*it = recs[i];
			}
		}
		free(recs);
		b->nrec = nrec0;
	}
	ret = 0;
	goto out;
nomem:
	seterr(err, errlen, "out of memory");
	errno = ENOMEM;
out:
	sqlite3_reset(s->q_rec);
	sqlite3_reset(s->q_ck);
	for (i = 0; i < nck; i++)
		free(ck[i].note);
	free(ck);
	if (ret == -1)
		batch_clear(b);
	return ret;
}

/* ---- transports ---- */

static int
put_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, p, n)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * A crash or a full disk can leave a torn last line. Nothing after the last
 * newline was ever acknowledged (the cursor moves only after fsync), so it
 * is cut off rather than glued to the next line.
 */
static int
repair_tail(int fd, off_t size)
{
	char buf[4096];
	off_t end = size, at;
	ssize_t n, i;

	if (size == 0)
		return 0;
	if (pread(fd, buf, 1, size - 1) != 1)
		return -1;
	if (buf[0] == '\n')
		return 0;
	while (end > 0) {
		at = end > (off_t)sizeof(buf) ? end - (off_t)sizeof(buf) : 0;
		if ((n = pread(fd, buf, (size_t)(end - at), at)) <= 0)
			return -1;
		for (i = n - 1; i >= 0; i--)
			if (buf[i] == '\n')
				return ftruncate(fd, at + i + 1);
		end = at;
	}
	return ftruncate(fd, 0);
}

static int
send_file(struct aud_sink *s, struct batch *b, char *err, size_t errlen)
{
	struct stat sb;
	char *buf = NULL, *dir;
	size_t total = 0, off = 0, i;
	int fd, created = 0, e, dfd;

	if ((fd = open(s->target, O_RDWR | O_APPEND | O_CLOEXEC |
	    O_NOFOLLOW | O_NONBLOCK)) == -1 && errno == ENOENT) {
		fd = open(s->target, O_RDWR | O_APPEND | O_CREAT | O_EXCL |
		    O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
		created = fd != -1;
	}
	if (fd == -1) {
		seterr(err, errlen, "%s: %s", s->target, strerror(errno));
		return -1;
	}
	/* A FIFO or a device could block the feed or swallow it. */
	if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode)) {
		seterr(err, errlen, "%s: not a regular file", s->target);
		close(fd);
		errno = EINVAL;
		return -1;
	}
	if (repair_tail(fd, sb.st_size) == -1 || fstat(fd, &sb) == -1) {
		e = errno;
		seterr(err, errlen, "%s: torn last line: %s", s->target,
		    strerror(e));
		close(fd);
		errno = e;
		return -1;
	}
	for (i = 0; i < b->n; i++)
		total += b->it[i].blen + 1;
	if ((buf = malloc(total ? total : 1)) == NULL) {
		close(fd);
		seterr(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < b->n; i++) {
		memcpy(buf + off, b->it[i].body, b->it[i].blen);
		off += b->it[i].blen;
		buf[off++] = '\n';
	}
	if (put_all(fd, buf, total) == -1 || fsync(fd) == -1) {
		e = errno;
		if (ftruncate(fd, sb.st_size) == -1) {
			/* Left torn: repair_tail cuts it next time. */
		}
		close(fd);
		free(buf);
		seterr(err, errlen, "%s: %s", s->target, strerror(e));
		errno = e;
		return -1;
	}
	free(buf);
	if (close(fd) == -1) {
		seterr(err, errlen, "%s: %s", s->target, strerror(errno));
		return -1;
	}
	if (created)
		s->dir_synced = 0;
	if (!s->dir_synced) {
		/* The file's name must survive a crash as well as its lines,
		 * before the cursor moves: once per new file (and once per
		 * start, for a file a crash may have just created). */
		if ((dir = strdup(s->target)) == NULL) {
			seterr(err, errlen, "out of memory");
			return -1;
		}
		dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		e = dfd == -1 || fsync(dfd) == -1 ? errno : 0;
		if (dfd != -1)
			close(dfd);
		free(dir);
		if (e != 0) {
			seterr(err, errlen, "%s: directory: %s", s->target,
			    strerror(e));
			errno = e;
			return -1;
		}
		s->dir_synced = 1;
	}
	return 0;
}

static void
sd_escape(char *out, size_t cap, const char *in)
{
	size_t o = 0;

	/* RFC 5424 §6.3.3: '"', '\' and ']' are escaped in PARAM-VALUE. */
	for (; *in != '\0' && o + 3 < cap; in++) {
		if (*in == '"' || *in == '\\' || *in == ']')
			out[o++] = '\\';
		out[o++] = *in;
	}
	out[o] = '\0';
}

/* One RFC 5424 message (no framing) into a malloc'd buffer. */
static char *
syslog_msg(struct aud_sink *s, const struct item *it, size_t *lenp)
{
	char ts[40], org[520], sd[700], stub[400];
	const char *body = it->body;
	size_t blen = it->blen, hl;
	struct tm tm;
	time_t t;
	char *m;
	int n;

	t = (time_t)(it->ts_ns / 1000000000);
	gmtime_r(&t, &tm);
	n = (int)strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - (size_t)n, ".%06lldZ",
	    (long long)(it->ts_ns % 1000000000 / 1000));
	sd_escape(org, sizeof(org), it->origin);
	if (it->ckpt)
		snprintf(sd, sizeof(sd), "[" SINK_PEN " size=\"%llu\" "
		    "origin=\"%s\"]", (unsigned long long)it->seq, org);
	else
		snprintf(sd, sizeof(sd), "[" SINK_PEN " seq=\"%llu\" "
		    "origin=\"%s\" hash=\"%s\"]", (unsigned long long)it->seq,
		    org, it->hash);
	hl = strlen(ts) + strlen(s->hostname) + strlen(it->msgid) +
	    strlen(sd) + 64;
	if (s->tr != TR_TCP && hl + blen > SINK_DGRAM_MAX) {
		/* Too big for one datagram: the SD still names seq and hash,
		 * so the receiver knows exactly what to fetch from the log. */
		json_t *o = json_pack("{s:s,s:I,s:b,s:I}", "origin",
		    it->origin, it->ckpt ? "size" : "seq", (json_int_t)it->seq,
		    "truncated", 1, "bytes", (json_int_t)it->blen);

		m = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(o);
		if (m == NULL)
			return NULL;
		snprintf(stub, sizeof(stub), "%s", m);
		free(m);
		body = stub;
		blen = strlen(stub);
	}
	if ((m = malloc(hl + blen + 1)) == NULL)
		return NULL;
	n = snprintf(m, hl + 1, "<%d>1 %s %s sluiced %d %s %s ",
	    SYSLOG_FACILITY * 8 + it->sev, ts, s->hostname, (int)getpid(),
	    it->msgid, sd);
	if (n < 0 || (size_t)n >= hl + 1) {
		free(m);
		return NULL;
	}
	memcpy(m + n, body, blen);
	m[(size_t)n + blen] = '\0';
	*lenp = (size_t)n + blen;
	return m;
}

static void
sock_close(struct aud_sink *s)
{
	if (s->fd != -1)
		close(s->fd);
	s->fd = -1;
}

static int
sock_open(struct aud_sink *s, char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL, *ai;
	struct sockaddr_un sun;
	struct timeval tv;
	struct pollfd pfd;
	int fd = -1, rc, soerr, one = 1;
	socklen_t sl;

	tv.tv_sec = s->timeout_ms / 1000;
	tv.tv_usec = (s->timeout_ms % 1000) * 1000;
	if (s->tr == TR_UNIX) {
		if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
			goto syserr;
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		/* parse_syslog checked that the path fits. */
		memcpy(sun.sun_path, s->addr, strnlen(s->addr,
		    sizeof(sun.sun_path) - 1));
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
			goto syserr;
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		s->fd = fd;
		return 0;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = s->tr == TR_TCP ? SOCK_STREAM : SOCK_DGRAM;
	if ((rc = getaddrinfo(s->addr, s->port, &hints, &res)) != 0) {
		seterr(err, errlen, "%s: %s", s->addr, gai_strerror(rc));
		errno = EHOSTUNREACH;
		return -1;
	}
	errno = ECONNREFUSED;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol);
		if (fd == -1)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (errno == EINPROGRESS) {
			/* Bounded: a blackholed receiver costs one timeout. */
			pfd.fd = fd;
			pfd.events = POLLOUT;
			sl = sizeof(soerr);
			if (poll(&pfd, 1, (int)s->timeout_ms) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr,
			    &sl) == 0) {
				if (soerr == 0)
					break;
				errno = soerr;
			} else
				errno = ETIMEDOUT;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1)
		goto syserr;
	/* Back to blocking sends, each bounded by the timeout. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == -1)
		goto syserr;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (s->tr == TR_TCP)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->fd = fd;
	return 0;
syserr:
	rc = errno;
	seterr(err, errlen, "syslog %s: %s", s->target, strerror(rc));
	if (fd != -1)
		close(fd);
	errno = rc;
	return -1;
}

/*
 * TCP syslog has no application acknowledgement (RFC 6587). The best proof
 * of receipt it offers is the peer's TCP stack acknowledging every byte:
 * wait (bounded) until nothing is left unacknowledged in the send queue.
 */
static int
tcp_drained(struct aud_sink *s)
{
	int64_t deadline = now_ms() + s->timeout_ms;
	struct pollfd pfd;
	char junk[512];
	int outq;

	for (;;) {
		if (ioctl(s->fd, SIOCOUTQ, &outq) == -1)
			return -1;
		if (outq == 0)
			return 0;
		if (now_ms() >= deadline || atomic_load(&s->stopping)) {
			errno = ETIMEDOUT;
			return -1;
		}
		pfd.fd = s->fd;
		pfd.events = POLLIN | POLLRDHUP;
		if (poll(&pfd, 1, 5) == 1) {
			/* The peer closed or reset before acknowledging. */
			if (pfd.revents & (POLLERR | POLLHUP | POLLRDHUP)) {
				errno = ECONNRESET;
				return -1;
			}
			if (recv(s->fd, junk, sizeof(junk), MSG_DONTWAIT) == 0) {
				errno = ECONNRESET;
				return -1;
			}
		}
	}
}

static int
send_syslog(struct aud_sink *s, struct batch *b, char *err, size_t errlen)
{
	char pre[24];
	size_t i, len, off;
	ssize_t w;
	char *m;
	int e, n;

	if (s->fd == -1 && sock_open(s, err, errlen) == -1)
		return -1;
	for (i = 0; i < b->n; i++) {
		if ((m = syslog_msg(s, &b->it[i], &len)) == NULL) {
			seterr(err, errlen, "out of memory");
			errno = ENOMEM;
			return -1;
		}
		if (s->tr == TR_TCP) {
			/* RFC 6587 octet counting: "LEN SP MSG". */
			n = snprintf(pre, sizeof(pre), "%zu ", len);
			if (send(s->fd, pre, (size_t)n, MSG_NOSIGNAL) != n)
				goto fail;
			for (off = 0; off < len; off += (size_t)w) {
				w = send(s->fd, m + off, len - off,
				    MSG_NOSIGNAL);
				if (w == -1 && errno == EINTR) {
					w = 0;
					continue;
				}
				if (w <= 0)
					goto fail;
			}
		} else if (send(s->fd, m, len, MSG_NOSIGNAL) != (ssize_t)len)
			goto fail;
		free(m);
		continue;
fail:
		e = errno ? errno : EIO;
		free(m);
		seterr(err, errlen, "syslog %s: %s", s->target, strerror(e));
		sock_close(s);
		errno = e;
		return -1;
	}
	if (s->tr == TR_TCP && tcp_drained(s) == -1) {
		e = errno;
		seterr(err, errlen, "syslog %s: not acknowledged: %s",
		    s->target, strerror(e));
		sock_close(s);
		errno = e;
		return -1;
	}
	return 0;
}

static size_t
discard(char *p, size_t sz, size_t n, void *arg)
{
	size_t *got = arg;

	(void)p;
	/* A receiver that streams without end is cut off (and not
	 * believed: the delivery counts as failed). */
	if ((*got += sz * n) > SINK_RESP_MAX)
		return 0;
	return sz * n;
}

static int
progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct aud_sink *s = arg;

	(void)a; (void)b; (void)c; (void)d;
	return atomic_load(&s->stopping) ? 1 : 0;
}

static int
webhook_init(struct aud_sink *s, char *err, size_t errlen)
{
	struct curl_slist *h = NULL, *n;
	char auth[SINK_TOKEN_MAX + 32];

	if ((s->curl = curl_easy_init()) == NULL) {
		seterr(err, errlen, "curl_easy_init failed");
		errno = ENOMEM;
		return -1;
	}
	h = curl_slist_append(NULL, s->hec ? "Content-Type: application/json" :
	    "Content-Type: application/x-ndjson");
	if (h != NULL && (n = curl_slist_append(h, "Expect:")) != NULL)
		h = n;
	if (h != NULL && s->token != NULL) {
		snprintf(auth, sizeof(auth), "Authorization: %s %s",
		    s->hec ? "Splunk" : "Bearer", s->token);
		if ((n = curl_slist_append(h, auth)) != NULL)
			h = n;
		else {
			curl_slist_free_all(h);
			h = NULL;
		}
		explicit_bzero(auth, sizeof(auth));
	}
	if (h == NULL) {
		seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	s->hdrs = h;
	curl_easy_setopt(s->curl, CURLOPT_URL, s->target);
	curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, s->hdrs);
	curl_easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(s->curl, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
	curl_easy_setopt(s->curl, CURLOPT_CONNECTTIMEOUT_MS,
	    (long)s->timeout_ms);
	/* A redirect is not an acknowledgement, and must not carry the
	 * token elsewhere. */
	curl_easy_setopt(s->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(s->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(s->curl, CURLOPT_USERAGENT, "sluiced-audit-sink");
	curl_easy_setopt(s->curl, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(s->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(s->curl, CURLOPT_XFERINFOFUNCTION, progress);
	curl_easy_setopt(s->curl, CURLOPT_XFERINFODATA, s);
	return 0;
}

static json_t *
hec_event(struct aud_sink *s, const struct item *it)
{
	json_t *f;

	if (it->ckpt)
		f = json_pack("{s:I,s:s}", "sluice_checkpoint_size",
		    (json_int_t)it->seq, "sluice_origin", it->origin);
	else
		f = json_pack("{s:I,s:s,s:s}", "sluice_seq", (json_int_t)it->seq,
		    "sluice_origin", it->origin, "sluice_hash", it->hash);
	return json_pack("{s:O,s:f,s:s,s:s,s:s,s:o}", "event", it->ev,
	    "time", (double)(it->ts_ns / 1000000) / 1000.0, "sourcetype",
	    it->ckpt ? "sluice:checkpoint" : s->format == AUD_SINK_OCSF ?
	    "sluice:ocsf" : "sluice:audit", "source", "sluice", "host",
	    s->hostname, "fields", f);
}

static int
send_webhook(struct aud_sink *s, struct batch *b, char *err, size_t errlen)
{
	char ebuf[CURL_ERROR_SIZE];
	char *body = NULL, *line, *p;
	size_t total = 0, cap = 0, len, got = 0, i;
	long code = 0;
	json_t *ev;
	CURLcode rc;

	if (s->curl == NULL && webhook_init(s, err, errlen) == -1)
		return -1;
	for (i = 0; i < b->n; i++) {
		if (s->hec) {
			ev = hec_event(s, &b->it[i]);
			line = ev ? json_dumps(ev, JSON_COMPACT |
			    JSON_SORT_KEYS | JSON_REAL_PRECISION(15)) : NULL;
			json_decref(ev);
			if (line == NULL)
				goto nomem;
			len = strlen(line);
		} else {
			line = b->it[i].body;
			len = b->it[i].blen;
		}
		if (total + len + 1 > cap) {
			cap = (total + len + 1) * 2;
			if ((p = realloc(body, cap)) == NULL) {
				if (s->hec)
					free(line);
				goto nomem;
			}
			body = p;
		}
		memcpy(body + total, line, len);
		total += len;
		body[total++] = '\n';
		if (s->hec)
			free(line);
	}
	ebuf[0] = '\0';
	curl_easy_setopt(s->curl, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(s->curl, CURLOPT_POSTFIELDSIZE_LARGE,
	    (curl_off_t)total);
	curl_easy_setopt(s->curl, CURLOPT_WRITEDATA, &got);
	rc = curl_easy_perform(s->curl);
	curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, NULL);
	curl_easy_setopt(s->curl, CURLOPT_ERRORBUFFER, NULL);
	free(body);
	if (rc != CURLE_OK) {
		seterr(err, errlen, "webhook: %s", ebuf[0] ? ebuf :
		    curl_easy_strerror(rc));
		errno = rc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : EIO;
		return -1;
	}
	curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code < 200 || code > 299) {
		seterr(err, errlen, "webhook: HTTP status %ld", code);
		errno = EIO;
		return -1;
	}
	return 0;
nomem:
	free(body);
	seterr(err, errlen, "out of memory");
	errno = ENOMEM;
	return -1;
}

/* ---- cursor, lag and the loop ---- */

static int
commit_cursor(struct aud_sink *s, const struct batch *b, char *err,
    size_t errlen)
{
	sqlite3_int64 ns = (sqlite3_int64)time(NULL) * 1000000000;

	if (sqlite3_exec(s->wr, "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
	    SQLITE_OK)
		goto fail;
	sqlite3_reset(s->q_upd);
	sqlite3_bind_text(s->q_upd, 1, s->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s->q_upd, 2, (sqlite3_int64)b->next);
	sqlite3_bind_int64(s->q_upd, 3, ns);
	if (sqlite3_step(s->q_upd) != SQLITE_DONE)
		goto rollback;
	sqlite3_reset(s->q_upd);
	sqlite3_bind_text(s->q_upd, 1, s->ckname, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s->q_upd, 2, (sqlite3_int64)b->ck_next);
	sqlite3_bind_int64(s->q_upd, 3, ns);
	if (sqlite3_step(s->q_upd) != SQLITE_DONE)
		goto rollback;
	sqlite3_reset(s->q_upd);
	if (sqlite3_exec(s->wr, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto rollback;
	return 0;
rollback:
	sqlite3_reset(s->q_upd);
	seterr(err, errlen, "ship_cursor: %s", sqlite3_errmsg(s->wr));
	sqlite3_exec(s->wr, "ROLLBACK", NULL, NULL, NULL);
	errno = EIO;
	return -1;
fail:
	seterr(err, errlen, "ship_cursor: %s", sqlite3_errmsg(s->wr));
	errno = EIO;
	return -1;
}

static void
refresh_head(struct aud_sink *s)
{
	uint64_t head = 0;
	int ok = 0;

	sqlite3_reset(s->q_head);
	if (sqlite3_step(s->q_head) == SQLITE_ROW) {
		ok = 1;
		if (sqlite3_column_type(s->q_head, 0) == SQLITE_INTEGER)
			head = (uint64_t)sqlite3_column_int64(s->q_head, 0) + 1;
	}
	sqlite3_reset(s->q_head);
	if (!ok)
		return;
	pthread_mutex_lock(&s->mu);
	/* The head never moves back; a read that raced is just stale. */
	if (head > s->st.head)
		s->st.head = head;
	if (s->st.next_seq > s->st.head)
		s->st.head = s->st.next_seq;
	s->st.lag = s->st.head - s->st.next_seq;
	pthread_mutex_unlock(&s->mu);
}

static void
check_lag(struct aud_sink *s)
{
	uint64_t lag, head, next;
	char reason[200];
	json_t *f;

	if (s->lag_alert == 0)
		return;
	pthread_mutex_lock(&s->mu);
	lag = s->st.lag;
	head = s->st.head;
	next = s->st.next_seq;
	snprintf(reason, sizeof(reason), "%s", s->st.last_error[0] ?
	    s->st.last_error : "behind");
	pthread_mutex_unlock(&s->mu);
	if (lag <= s->lag_alert / 2)
		s->alerted = 0;
	if (lag <= s->lag_alert || s->alerted)
		return;
	s->alerted = 1;
	pthread_mutex_lock(&s->mu);
	s->st.findings++;
	pthread_mutex_unlock(&s->mu);
	if (s->hooks == NULL || s->hooks->finding == NULL)
		return;
	f = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:s}", "finding",
	    "sink.lag", "title", "audit sink behind", "sink", s->name, "lag",
	    (json_int_t)(lag > AUD_INT_MAX ? AUD_INT_MAX : lag), "threshold",
	    (json_int_t)(s->lag_alert > AUD_INT_MAX ? AUD_INT_MAX :
	    s->lag_alert), "head", (json_int_t)head, "next_seq",
	    (json_int_t)next, "reason", reason);
	if (f != NULL)
		s->hooks->finding(s->hooks->arg, f);
}

/*
 * Errors and curl messages can hold anything; the finding that may quote
 * them must stay inside the canonical subset (valid UTF-8, no NUL).
 */
static void
set_error(struct aud_sink *s, const char *msg)
{
	size_t i;

	pthread_mutex_lock(&s->mu);
	for (i = 0; msg[i] != '\0' && i + 1 < sizeof(s->st.last_error); i++)
		s->st.last_error[i] = msg[i] < 0x20 || msg[i] > 0x7e ? '?' :
		    msg[i];
	s->st.last_error[i] = '\0';
	pthread_mutex_unlock(&s->mu);
}

static int64_t
ship_once(struct aud_sink *s, char *err, size_t errlen)
{
	struct batch b;
	int rc;

	if (load_batch(s, &b, err, errlen) == -1)
		return -1;
	if (b.n == 0) {
		batch_clear(&b);
		return 0;
	}
	switch (s->type) {
	case AUD_SINK_FILE:
		rc = send_file(s, &b, err, errlen);
		break;
	case AUD_SINK_SYSLOG:
		rc = send_syslog(s, &b, err, errlen);
		break;
	default:
		rc = send_webhook(s, &b, err, errlen);
		break;
	}
	/* Only a positive acknowledgement moves the cursor. */
	if (rc == 0 && commit_cursor(s, &b, err, errlen) == 0) {
		s->ck_next = b.ck_next;
		pthread_mutex_lock(&s->mu);
		s->st.next_seq = b.next;
		if (s->st.head < b.next)
			s->st.head = b.next;
		s->st.lag = s->st.head - s->st.next_seq;
		s->st.records += b.nrec;
		s->st.checkpoints += b.nck;
		s->st.up = 1;
		s->st.last_error[0] = '\0';
		pthread_mutex_unlock(&s->mu);
		rc = (int)b.nrec;
		/* A batch of only late checkpoints still made progress. */
		if (rc == 0)
			rc = -2;
	} else
		rc = -1;
	batch_clear(&b);
	return rc;
}

static int64_t
attempt(struct aud_sink *s, char *err, size_t errlen)
{
	char e[256];
	int64_t r;

	e[0] = '\0';
	refresh_head(s);
	r = ship_once(s, e, sizeof(e));
	if (r == -1) {
		pthread_mutex_lock(&s->mu);
		s->st.failures++;
		s->st.up = 0;
		pthread_mutex_unlock(&s->mu);
		set_error(s, e[0] ? e : "delivery failed");
		seterr(err, errlen, "%s", e);
	}
	refresh_head(s);
	check_lag(s);
	return r;
}

int64_t
aud_sink_ship(struct aud_sink *s, char *err, size_t errlen)
{
	int64_t r;
	int e;

	if (s == NULL || s->running == 1) {
		seterr(err, errlen, "sink is running its own thread");
		errno = EBUSY;
		return -1;
	}
	errno = 0;
	r = attempt(s, err, errlen);
	if (r == -1) {
		e = errno ? errno : EIO;
		errno = e;
		return -1;
	}
	return r == -2 ? 0 : r;
}

static uint64_t
rnd_next(struct aud_sink *s)
{
	/* xorshift64*: jitter only, not secrets. */
	s->rnd ^= s->rnd >> 12;
	s->rnd ^= s->rnd << 25;
	s->rnd ^= s->rnd >> 27;
	return s->rnd * 2685821657736338717ULL;
}

static void
deadline_ts(struct timespec *ts, int64_t ms_from_now)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms_from_now / 1000;
	ts->tv_nsec += (ms_from_now % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

static void *
shipper(void *arg)
{
	struct aud_sink *s = arg;
	struct timespec ts;
	int64_t r, next_try = 0, now, wait;
	uint64_t backoff = 0, lag;

	while (!atomic_load(&s->stopping)) {
		now = now_ms();
		if (now >= next_try) {
			r = attempt(s, NULL, 0);
			if (r == -1) {
				/* Exponential, capped, with equal jitter so
				 * sinks that failed together retry apart. */
				backoff = backoff ? backoff * 2 : s->bo_min;
				if (backoff > s->bo_max)
					backoff = s->bo_max;
				next_try = now_ms() + (int64_t)(backoff / 2 +
				    rnd_next(s) % (backoff / 2 + 1));
			} else {
				backoff = 0;
				next_try = 0;
				if (r != 0)
					continue;	/* maybe more */
			}
		} else {
			/* Woken while backing off: keep the lag current so
			 * /metrics and the finding see a sink that is down. */
			refresh_head(s);
			check_lag(s);
		}
		pthread_mutex_lock(&s->mu);
		lag = s->st.lag;
		if (!s->kicked && !atomic_load(&s->stopping)) {
			now = now_ms();
			wait = s->poll_ms;
			if (next_try != 0 && next_try - now < wait)
				wait = next_try - now;
			else if (next_try == 0 && lag > 0)
				wait = 0;
			if (wait > 0) {
				deadline_ts(&ts, wait);
				pthread_cond_timedwait(&s->cv, &s->mu, &ts);
			}
		}
		s->kicked = 0;
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

int
aud_sink_start(struct aud_sink *s, char *err, size_t errlen)
{
	int e;

	if (s == NULL || s->running == 1) {
		seterr(err, errlen, "sink already started");
		errno = EBUSY;
		return -1;
	}
	atomic_store(&s->stopping, 0);
	if ((e = pthread_create(&s->thr, NULL, shipper, s)) != 0) {
		seterr(err, errlen, "pthread_create: %s", strerror(e));
		errno = e;
		return -1;
	}
	s->running = 1;
	return 0;
}

void
aud_sink_kick(struct aud_sink *s)
{
	if (s == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	s->kicked = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

void
aud_sink_stop(struct aud_sink *s)
{
	if (s == NULL || s->running != 1)
		return;
	pthread_mutex_lock(&s->mu);
	atomic_store(&s->stopping, 1);
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thr, NULL);
	s->running = -1;
}

uint64_t
aud_sink_lag(const struct aud_sink *s)
{
	struct aud_sink_stats st;

	aud_sink_stats(s, &st);
	return st.lag;
}

void
aud_sink_stats(const struct aud_sink *s, struct aud_sink_stats *st)
{
	/* The lock guards the numbers, not the handle: readers take it
	 * through a const pointer. */
	pthread_mutex_t *mu;

	if (s == NULL) {
		memset(st, 0, sizeof(*st));
		return;
	}
	mu = (pthread_mutex_t *)&s->mu;
	pthread_mutex_lock(mu);
	*st = s->st;
	pthread_mutex_unlock(mu);
}

void
aud_sink_free(struct aud_sink *s)
{
	if (s == NULL)
		return;
	aud_sink_stop(s);
	sock_close(s);
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
