/*
 * check_audit_sink: the SOC feed against real receivers. Each test makes a
 * real log (the writer, SQLite, signed checkpoints) in a temp dir and ships
 * it to a file, to an HTTP server written here (plain NDJSON and Splunk
 * HEC), and to syslog receivers on a Unix datagram socket and on TCP. What
 * the receivers hold is checked by origin#seq: every record arrives, in
 * order, without gaps, duplicates only as a re-sent batch, checkpoints right
 * after the record they cover, and the durable cursor ends at the head.
 * Receivers that are down, answer garbage, 500s or redirects, hang or close
 * never make the feed lose or skip a record; a sink that falls behind raises
 * one finding that lands in the log (and in the feed). Waits are bounded by
 * count and a generous deadline; no result depends on timing.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <sqlite3.h>

#include "audit/audit.h"

#define TOKEN	"s3cr3t-T0ken.abc"
#define SINK_BIG	5000	/* larger than any token a sink accepts */

#include "tests/unit/audit_fixture.h"

static char tokpath[128];

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static void
setup(void)
{
	af_setup("check_audit_sink", "sink.example");
	snprintf(tokpath, sizeof(tokpath), "%s/token", af_dir);
	write_file(tokpath, TOKEN "\n");
}

/* A log that signs a checkpoint every 7 records and never on a clock, so
 * where checkpoints fall does not depend on timing. */
static struct aud_log *
open_log_every(unsigned every)
{
	struct aud_opts o = { 0 };
	struct aud_log *l;
	char err[256];

	o.db_path = af_dbpath;
	o.origin = af_origin;
	o.key_path = af_keypath;
	o.ckpt_every = every;
	o.ckpt_ms = 3600000;
	l = aud_open(&o, err, sizeof(err));
	ck_assert_msg(l != NULL, "aud_open: %s", err);
	return l;
}

static struct aud_log *
open_log(void)
{
	return open_log_every(7);
}

static void
write_records(struct aud_log *l, int n)
{
	char tool[32];
	int i;

	for (i = 0; i < n; i++) {
		snprintf(tool, sizeof(tool), "t%d", i);
		ck_assert_int_eq(aud_submit_async(l, i % 5 ? "mcp.call" :
		    "net.deny", json_pack("{s:s,s:s,s:s,s:{s:s,s:s},"
		    "s:{s:s,s:s}}", "server", "files", "tool", tool, "decision",
		    i % 3 ? "allow" : "deny", "sandbox", "id", "sb-1", "run",
		    "r-1", "policy", "id", "default", "rule", "r1")), 0);
	}
	ck_assert_int_eq(aud_sync(l), 0);
}

static struct aud_sink *
new_sink(const struct aud_sink_conf *c, const struct aud_sink_hooks *h)
{
	struct aud_sink *s;
	char err[256];

	s = aud_sink_new(af_dbpath, c, h, err, sizeof(err));
	ck_assert_msg(s != NULL, "aud_sink_new: %s", err);
	return s;
}

/* Ships synchronously until nothing is left; every attempt must succeed. */
static void
drain(struct aud_sink *s)
{
	char err[256];
	int64_t r;
	int i;

	for (i = 0; i < 10000; i++) {
		r = aud_sink_ship(s, err, sizeof(err));
		ck_assert_msg(r >= 0, "ship: %s", err);
		if (r == 0)
			return;
	}
	ck_abort_msg("drain did not end");
}

static int64_t
db_int(const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t v = -1;

	ck_assert_int_eq(sqlite3_open_v2(af_dbpath, &db, SQLITE_OPEN_READONLY,
	    NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL),
	    SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) != SQLITE_NULL)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static int64_t
cursor_of(const char *sink)
{
	char sql[128];

	snprintf(sql, sizeof(sql), "SELECT next_seq FROM ship_cursor WHERE "
	    "sink = '%s'", sink);
	return db_int(sql);
}

static int64_t
head(void)
{
	return db_int("SELECT max(seq) + 1 FROM records");
}

static void
db_exec(const char *sql)
{
	sqlite3 *db;
	char *msg = NULL;

	ck_assert_int_eq(sqlite3_open(af_dbpath, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK,
	    "%s: %s", sql, msg ? msg : "?");
	sqlite3_close(db);
}

/* ---- the stream checker ---- */

/*
 * One delivered event, reduced to what ordering is about: a record (seq)
 * or a checkpoint (its size), with the origin it names.
 */
struct evt {
	int	 ckpt;
	int64_t	 seq;
	char	 origin[160];
	char	 kind[40];
};

struct stream {
	struct evt	*e;
	size_t		 n, cap;
};

static void
stream_add(struct stream *st, int ckpt, int64_t seq, const char *org,
    const char *kind)
{
	if (st->n == st->cap) {
		st->cap = st->cap ? st->cap * 2 : 256;
		st->e = realloc(st->e, st->cap * sizeof(*st->e));
		ck_assert_ptr_nonnull(st->e);
	}
	st->e[st->n].ckpt = ckpt;
	st->e[st->n].seq = seq;
	snprintf(st->e[st->n].origin, sizeof(st->e[st->n].origin), "%s",
	    org ? org : "");
	snprintf(st->e[st->n].kind, sizeof(st->e[st->n].kind), "%s",
	    kind ? kind : "");
	st->n++;
}

/*
 * Reads one line as the sink writes it: plain canon (checked to be the
 * canonical form itself), a plain checkpoint, or an OCSF event.
 */
static void
stream_line(struct stream *st, const char *line, size_t len)
{
	json_t *v, *md, *un;
	const char *uid, *h;
	char org[160];

	v = json_loadb(line, len, 0, NULL);
	ck_assert_msg(v != NULL, "not JSON: %.*s", (int)len, line);
	if (json_is_string(json_object_get(v, "checkpoint"))) {
		const char *note = json_string_value(json_object_get(v,
		    "checkpoint"));

		h = strchr(note, '\n');
		ck_assert_ptr_nonnull(h);
		snprintf(org, sizeof(org), "%.*s", (int)(h - note), note);
		ck_assert_int_eq(atoll(h + 1), json_integer_value(
		    json_object_get(v, "size")));
		stream_add(st, 1, json_integer_value(json_object_get(v,
		    "size")), org, "checkpoint");
	} else if ((md = json_object_get(v, "metadata")) != NULL) {
		uid = json_string_value(json_object_get(md, "uid"));
		ck_assert_ptr_nonnull(uid);
		ck_assert_str_eq(json_string_value(json_object_get(md,
		    "version")), "1.8.0");
		h = strrchr(uid, '#');
		ck_assert_ptr_nonnull(h);
		snprintf(org, sizeof(org), "%.*s", (int)(h - uid), uid);
		if (strncmp(h, "#checkpoint/", 12) == 0) {
			un = json_object_get(v, "unmapped");
			ck_assert_int_eq(json_integer_value(json_object_get(un,
			    "size")), atoll(h + 12));
			ck_assert(json_is_string(json_object_get(un,
			    "checkpoint")));
			stream_add(st, 1, atoll(h + 12), org, "checkpoint");
		} else {
			/* The OCSF event carries the canon it maps. */
			json_t *raw = json_object_get(v, "raw_data");
			json_t *r = aud_canon_parse(json_string_value(raw),
			    json_string_length(raw), NULL, 0);

			ck_assert_ptr_nonnull(r);
			ck_assert_int_eq(json_integer_value(json_object_get(r,
			    "seq")), atoll(h + 1));
			ck_assert_int_eq(json_integer_value(json_object_get(md,
			    "sequence")), atoll(h + 1));
			stream_add(st, 0, atoll(h + 1), org, json_string_value(
			    json_object_get(r, "kind")));
			json_decref(r);
		}
	} else {
		json_t *r = aud_canon_parse(line, len, NULL, 0);

		ck_assert_msg(r != NULL, "not canonical: %.*s", (int)len, line);
		stream_add(st, 0, json_integer_value(json_object_get(r, "seq")),
		    json_string_value(json_object_get(r, "origin")),
		    json_string_value(json_object_get(r, "kind")));
		json_decref(r);
	}
	json_decref(v);
}

static void
stream_ndjson(struct stream *st, const char *buf, size_t len)
{
	const char *p = buf, *nl;

	while (p < buf + len) {
		nl = memchr(p, '\n', (size_t)(buf + len - p));
		ck_assert_msg(nl != NULL, "unterminated line");
		stream_line(st, p, (size_t)(nl - p));
		p = nl + 1;
	}
}

/*
 * The receiver's view after dedupe on origin#seq: records 0..want-1 in
 * order with no gap (a repeat may only go back to re-send), and every
 * checkpoint stored with size <= want seen after record size-1. Returns the
 * number of duplicates.
 */
static size_t
stream_check(const struct stream *st, int64_t want)
{
	int64_t next = 0, ncks;
	size_t i, dups = 0, cks = 0;

	for (i = 0; i < st->n; i++) {
		ck_assert_str_eq(st->e[i].origin, af_origin);
		if (st->e[i].ckpt) {
			size_t j;

			ck_assert_msg(st->e[i].seq >= 1 && st->e[i].seq <= next,
			    "checkpoint %lld before record %lld",
			    (long long)st->e[i].seq,
			    (long long)st->e[i].seq - 1);
			for (j = 0; j < i; j++)
				if (st->e[j].ckpt && st->e[j].seq ==
				    st->e[i].seq)
					break;
			if (j < i)
				dups++;
			else
				cks++;
			continue;
		}
		if (st->e[i].seq < next) {
			dups++;
			continue;
		}
		ck_assert_msg(st->e[i].seq == next, "gap: got %lld, want %lld",
		    (long long)st->e[i].seq, (long long)next);
		next++;
	}
	ck_assert_int_eq(next, want);
	{
		char sql[128];

		snprintf(sql, sizeof(sql), "SELECT count(*) FROM checkpoints "
		    "WHERE size BETWEEN 1 AND %lld", (long long)want);
		ncks = db_int(sql);
	}
	ck_assert_msg(ncks > 0, "the log should hold checkpoints");
	ck_assert_int_eq((int64_t)cks, ncks);
	return dups;
}

/* With every checkpoint signed before shipping began, each one comes
 * right after the record that completes it, not merely later. */
static void
stream_adjacent(const struct stream *st)
{
	size_t i;

	for (i = 0; i < st->n; i++)
		if (st->e[i].ckpt)
			ck_assert_msg(i > 0 && !st->e[i - 1].ckpt &&
			    st->e[i - 1].seq == st->e[i].seq - 1,
			    "checkpoint %lld not right after its record",
			    (long long)st->e[i].seq);
}

static void
stream_free(struct stream *st)
{
	free(st->e);
	memset(st, 0, sizeof(*st));
}

static char *
slurp(const char *path, size_t *lenp)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	buf[n] = '\0';
	*lenp = (size_t)n;
	return buf;
}

/* ---- an HTTP receiver ---- */

enum {
	H_OK, H_FAIL3, H_LOSTACK3, H_GARBAGE, H_500, H_HANG, H_CLOSE,
	H_REDIRECT, H_BIGBODY, H_PARTIAL,
};

struct req {
	char	*body;
	size_t	 len;
	int	 acked;
	char	 path[128];
	char	 auth[256];
	char	 ctype[64];
};

struct http {
	int		 lfd, port, listening;
	pthread_t	 thr;
	atomic_int	 stop, mode;
	pthread_mutex_t	 mu;
	struct req	 r[4096];
	int		 n;
};

static int
hdr(const char *h, const char *name, char *out, size_t cap)
{
	const char *p = h;
	size_t nl = strlen(name);

	while ((p = strstr(p, "\r\n")) != NULL) {
		p += 2;
		if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1, *e;

			while (*v == ' ')
				v++;
			e = strstr(v, "\r\n");
			snprintf(out, cap, "%.*s", (int)(e ? e - v : 0), v);
			return 1;
		}
	}
	out[0] = '\0';
	return 0;
}

static void
send_str(int fd, const char *s)
{
	if (send(fd, s, strlen(s), MSG_NOSIGNAL) < 0)
		return;
}

static void
serve_one(struct http *h, int fd)
{
	char head[16384], cl[32];
	size_t hl = 0, bl = 0, want;
	char *body = NULL, *end;
	struct req *r;
	int n, mode, idx, acked;
	ssize_t k;

	/* Headers, bounded. */
	while (hl < sizeof(head) - 1) {
		k = recv(fd, head + hl, sizeof(head) - 1 - hl, 0);
		if (k <= 0)
			return;
		hl += (size_t)k;
		head[hl] = '\0';
		if ((end = strstr(head, "\r\n\r\n")) != NULL)
			break;
	}
	if ((end = strstr(head, "\r\n\r\n")) == NULL)
		return;
	hdr(head, "Content-Length", cl, sizeof(cl));
	want = (size_t)atol(cl);
	if (want > 64 * 1024 * 1024)
		return;
	body = malloc(want + 1);
	bl = hl - (size_t)(end + 4 - head);
	memcpy(body, end + 4, bl);
	while (bl < want) {
		k = recv(fd, body + bl, want - bl, 0);
		if (k <= 0) {
			free(body);
			return;
		}
		bl += (size_t)k;
	}
	body[bl] = '\0';
	pthread_mutex_lock(&h->mu);
	idx = h->n;
	mode = atomic_load(&h->mode);
	n = idx + 1;
	/* What the receiver answers 2xx to (a flood of an answer is not
	 * one the sink believes). */
	acked = mode == H_OK ? 1 : (mode == H_FAIL3 || mode == H_LOSTACK3) ?
	    n % 3 != 0 : 0;
	if (idx < (int)(sizeof(h->r) / sizeof(h->r[0]))) {
		r = &h->r[h->n++];
		r->body = body;
		r->len = bl;
		r->acked = acked;
		snprintf(r->path, sizeof(r->path), "%.*s", (int)strcspn(
		    head + 5, " "), strchr(head, ' ') ? strchr(head, ' ') + 1 :
		    "");
		hdr(head, "Authorization", r->auth, sizeof(r->auth));
		hdr(head, "Content-Type", r->ctype, sizeof(r->ctype));
		body = NULL;
	}
	pthread_mutex_unlock(&h->mu);
	free(body);
	switch (mode) {
	case H_OK:
		send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
		    "Connection: close\r\n\r\nok");
		break;
	case H_FAIL3:
	case H_LOSTACK3:
		if (n % 3 == 0)
			send_str(fd, "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n"
			    "Connection: close\r\n\r\n");
		else
			send_str(fd, "HTTP/1.1 204 No Content\r\n"
			    "Connection: close\r\n\r\n");
		break;
	case H_GARBAGE:
		send_str(fd, "\x01\x02 not http at all \xff\xfe\r\n\r\n");
		break;
	case H_500:
		send_str(fd, "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n"
		    "Connection: close\r\n\r\n");
		break;
	case H_HANG: {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int i;

		/* Until the client gives up or the test ends (bounded). */
		for (i = 0; i < 600 && !atomic_load(&h->stop); i++)
			if (poll(&p, 1, 100) == 1 && recv(fd, head, 1, 0) <= 0)
				break;
		break;
	}
	case H_CLOSE:
		break;
	case H_REDIRECT:
		send_str(fd, "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:"
		    "9/x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
		break;
	case H_BIGBODY: {
		static char junk[65536];
		int i;

		memset(junk, 'A', sizeof(junk));
		send_str(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
		for (i = 0; i < 64; i++)	/* 4 MiB, more than a sink reads */
			if (send(fd, junk, sizeof(junk), MSG_NOSIGNAL) < 0)
				break;
		break;
	}
	case H_PARTIAL:
		send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort");
		break;
	}
}

static void *
http_loop(void *arg)
{
	struct http *h = arg;
	struct pollfd p;
	int fd;

	p.fd = h->lfd;
	p.events = POLLIN;
	while (!atomic_load(&h->stop)) {
		if (poll(&p, 1, 50) != 1)
			continue;
		if ((fd = accept(h->lfd, NULL, NULL)) == -1)
			continue;
		serve_one(h, fd);
		close(fd);
	}
	return NULL;
}

/* Binds 127.0.0.1:0; listens (and serves) only if listening. A bound
 * socket that does not listen refuses connections: a receiver that is
 * down, deterministically. */
static void
http_start(struct http *h, int mode, int listening)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int one = 1;

	memset(h, 0, sizeof(*h));
	pthread_mutex_init(&h->mu, NULL);
	atomic_store(&h->mode, mode);
	h->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(h->lfd, 0);
	setsockopt(h->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(h->lfd, (struct sockaddr *)&sin, sizeof(sin)),
	    0);
	ck_assert_int_eq(getsockname(h->lfd, (struct sockaddr *)&sin, &sl), 0);
	h->port = ntohs(sin.sin_port);
	if (listening) {
		ck_assert_int_eq(listen(h->lfd, 16), 0);
		ck_assert_int_eq(pthread_create(&h->thr, NULL, http_loop, h),
		    0);
		h->listening = 1;
	}
}

static void
http_listen(struct http *h)
{
	ck_assert_int_eq(listen(h->lfd, 16), 0);
	ck_assert_int_eq(pthread_create(&h->thr, NULL, http_loop, h), 0);
	h->listening = 1;
}

static void
http_stop(struct http *h)
{
	int i;

	atomic_store(&h->stop, 1);
	if (h->listening)
		pthread_join(h->thr, NULL);
	close(h->lfd);
	for (i = 0; i < h->n; i++)
		free(h->r[i].body);
	pthread_mutex_destroy(&h->mu);
}

/* The stream as the receiver kept it: acknowledged requests only, or
 * everything it read. */
static void
http_stream(struct http *h, struct stream *st, int all, int hec)
{
	int i;

	pthread_mutex_lock(&h->mu);
	for (i = 0; i < h->n; i++) {
		if (!all && !h->r[i].acked)
			continue;
		if (!hec) {
			stream_ndjson(st, h->r[i].body, h->r[i].len);
			continue;
		}
		{
			const char *p = h->r[i].body, *nl;

			while ((nl = strchr(p, '\n')) != NULL) {
				json_t *v = json_loadb(p, (size_t)(nl - p), 0,
				    NULL), *ev;
				char *line;

				ck_assert_ptr_nonnull(v);
				ev = json_object_get(v, "event");
				ck_assert(json_is_object(ev));
				line = json_dumps(ev, JSON_COMPACT |
				    JSON_SORT_KEYS);
				stream_line(st, line, strlen(line));
				free(line);
				json_decref(v);
				p = nl + 1;
			}
		}
	}
	pthread_mutex_unlock(&h->mu);
}

static int
http_count(struct http *h)
{
	int n;

	pthread_mutex_lock(&h->mu);
	n = h->n;
	pthread_mutex_unlock(&h->mu);
	return n;
}

static void
webhook_conf(struct aud_sink_conf *c, char *url, size_t ul, int port,
    const char *path)
{
	memset(c, 0, sizeof(*c));
	snprintf(url, ul, "http://127.0.0.1:%d%s", port, path);
	c->name = "hook";
	c->type = AUD_SINK_WEBHOOK;
	c->format = AUD_SINK_JSON;
	c->target = url;
	c->token_file = tokpath;
	c->batch_max = 5;
	c->timeout_ms = 5000;
	c->backoff_min_ms = 1;
	c->backoff_max_ms = 20;
	c->poll_ms = 50;
}

/* Bounded wait for the shipper thread to reach want (30 s at most). */
static void
wait_cursor(struct aud_sink *s, uint64_t want)
{
	struct aud_sink_stats st;
	int i;

	for (i = 0; i < 3000; i++) {
		aud_sink_stats(s, &st);
		if (st.next_seq >= want)
			return;
		aud_sink_kick(s);
		usleep(10000);
	}
	aud_sink_stats(s, &st);
	ck_abort_msg("cursor %llu, want %llu (%s)",
	    (unsigned long long)st.next_seq, (unsigned long long)want,
	    st.last_error);
}

/* ---- Core ---- */

START_TEST(file_in_order)
{
	struct aud_sink_conf c = { 0 };
	struct aud_sink_stats ss;
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	char path[160], *buf;
	size_t len;
	int64_t n;

	write_records(l, 40);
	snprintf(path, sizeof(path), "%s/feed.ndjson", af_dir);
	c.name = "spool";
	c.type = AUD_SINK_FILE;
	c.target = path;
	c.batch_max = 8;
	s = new_sink(&c, NULL);
	drain(s);
	n = head();
	ck_assert_int_ge(n, 41);
	ck_assert_int_eq(cursor_of("spool"), n);
	ck_assert_uint_eq(aud_sink_lag(s), 0);
	aud_sink_stats(s, &ss);
	ck_assert_uint_eq(ss.records, (uint64_t)n);
	ck_assert_int_eq(ss.up, 1);
	buf = slurp(path, &len);
	stream_ndjson(&st, buf, len);
	/* Nothing failed: exactly once, records and checkpoints. */
	ck_assert_uint_eq(stream_check(&st, n), 0);
	stream_adjacent(&st);
	ck_assert_uint_eq(ss.checkpoints, (uint64_t)db_int(
	    "SELECT count(*) FROM checkpoints WHERE size >= 1"));
	free(buf);
	stream_free(&st);
	aud_sink_free(s);
	aud_close(l);
}
END_TEST

START_TEST(file_restart_resumes)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	struct stat sb;
	char path[160], *buf;
	size_t len;
	int64_t n;

	write_records(l, 30);
	snprintf(path, sizeof(path), "%s/feed.ndjson", af_dir);
	c.name = "spool";
	c.type = AUD_SINK_FILE;
	c.target = path;
	c.batch_max = 10;
	s = new_sink(&c, NULL);
	/* The lag is known before anything is sent. */
	ck_assert_uint_eq(aud_sink_lag(s), (uint64_t)head());
	ck_assert_uint_eq(aud_sink_lag(NULL), 0);
	ck_assert_int_eq(aud_sink_ship(s, NULL, 0), 10);
	ck_assert_int_eq(cursor_of("spool"), 10);
	ck_assert_uint_gt(aud_sink_lag(s), 0);
	aud_sink_free(s);		/* the daemon stops */
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	write_records(l, 20);		/* the log moves on meanwhile */
	s = new_sink(&c, NULL);		/* and restarts */
	drain(s);
	aud_sink_free(s);
	aud_close(l);
	/* log.close and the final checkpoint, from a fresh start. */
	s = new_sink(&c, NULL);
	drain(s);
	aud_sink_free(s);
	n = head();
	ck_assert_int_eq(cursor_of("spool"), n);
	buf = slurp(path, &len);
	stream_ndjson(&st, buf, len);
	ck_assert_uint_eq(stream_check(&st, n), 0);
	ck_assert_str_eq(st.e[st.n - 1].kind, "checkpoint");
	ck_assert_int_eq(st.e[st.n - 1].seq, n);
	free(buf);
	stream_free(&st);
}
END_TEST

START_TEST(file_ocsf)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	char path[160], *buf;
	size_t len, i, rec = 0;

	write_records(l, 20);
	snprintf(path, sizeof(path), "%s/ocsf.ndjson", af_dir);
	c.name = "ocsf-spool";
	c.type = AUD_SINK_FILE;
	c.format = AUD_SINK_OCSF;
	c.target = path;
	s = new_sink(&c, NULL);
	drain(s);
	buf = slurp(path, &len);
	stream_ndjson(&st, buf, len);
	ck_assert_uint_eq(stream_check(&st, head()), 0);
	stream_adjacent(&st);
	for (i = 0; i < st.n; i++)
		rec += !st.e[i].ckpt && strcmp(st.e[i].kind, "mcp.call") == 0;
	ck_assert_uint_eq(rec, 16);
	/* The OCSF classes the SIEM gets: 6003 for tool calls. */
	ck_assert_ptr_nonnull(strstr(buf, "\"class_uid\":6003"));
	ck_assert_ptr_nonnull(strstr(buf, "\"class_uid\":4001"));
	free(buf);
	stream_free(&st);
	aud_sink_free(s);
	aud_close(l);
}
END_TEST

START_TEST(webhook_fail_every_third)
{
	struct aud_sink_conf c;
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	struct aud_sink_stats ss;
	struct http h;
	char url[128];
	int64_t n;
	int i;

	write_records(l, 60);
	http_start(&h, H_FAIL3, 1);
	webhook_conf(&c, url, sizeof(url), h.port, "/ingest");
	s = new_sink(&c, NULL);
	ck_assert_int_eq(aud_sink_start(s, NULL, 0), 0);
	/* Records keep coming while the sink ships. */
	write_records(l, 25);
	aud_sink_kick(s);
	n = head();
	wait_cursor(s, (uint64_t)n);
	aud_sink_stop(s);
	aud_sink_stats(s, &ss);
	ck_assert_uint_gt(ss.failures, 0);
	ck_assert_int_eq(cursor_of("hook"), n);
	/* Exactly once in what the receiver accepted. */
	http_stream(&h, &st, 0, 0);
	ck_assert_uint_eq(stream_check(&st, n), 0);
	for (i = 0; i < h.n; i++) {
		ck_assert_str_eq(h.r[i].auth, "Bearer " TOKEN);
		ck_assert_str_eq(h.r[i].path, "/ingest");
		ck_assert_str_eq(h.r[i].ctype, "application/x-ndjson");
	}
	stream_free(&st);
	aud_sink_free(s);
	http_stop(&h);
	aud_close(l);
}
END_TEST

/* The receiver keeps what it read but the answer is lost: the batch comes
 * again, whole, and nothing else repeats. */
START_TEST(webhook_lost_ack_dups_within_batch)
{
	struct aud_sink_conf c;
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	struct http h;
	char url[128];
	int64_t n, r;
	int i, fails = 0;

	write_records(l, 50);
	http_start(&h, H_LOSTACK3, 1);
	webhook_conf(&c, url, sizeof(url), h.port, "/");
	s = new_sink(&c, NULL);
	for (i = 0; i < 200; i++) {
		if ((r = aud_sink_ship(s, NULL, 0)) == 0)
			break;
		if (r == -1)
			fails++;
	}
	ck_assert_int_gt(fails, 0);
	n = head();
	ck_assert_int_eq(cursor_of("hook"), n);
	http_stream(&h, &st, 1, 0);
	ck_assert_uint_gt(stream_check(&st, n), 0);
	/* Each failed request is re-sent byte for byte by the next. */
	for (i = 0; i + 1 < h.n; i++)
		if (!h.r[i].acked) {
			ck_assert_uint_eq(h.r[i].len, h.r[i + 1].len);
			ck_assert_int_eq(memcmp(h.r[i].body, h.r[i + 1].body,
			    h.r[i].len), 0);
		}
	stream_free(&st);
	aud_sink_free(s);
	http_stop(&h);
	aud_close(l);
}
END_TEST

static void
hec_run(int format)
{
	struct aud_sink_conf c;
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	struct http h;
	char url[128];
	int i, nev = 0;

	write_records(l, 15);
	http_start(&h, H_OK, 1);
	webhook_conf(&c, url, sizeof(url), h.port, "/services/collector/event");
	c.splunk_hec = 1;
	c.format = format;
	s = new_sink(&c, NULL);
	drain(s);
	ck_assert_int_eq(cursor_of("hook"), head());
	for (i = 0; i < h.n; i++) {
		const char *p = h.r[i].body, *nl;

		ck_assert_str_eq(h.r[i].auth, "Splunk " TOKEN);
		ck_assert_str_eq(h.r[i].path, "/services/collector/event");
		while ((nl = strchr(p, '\n')) != NULL) {
			json_t *v = json_loadb(p, (size_t)(nl - p), 0, NULL);
			json_t *f = json_object_get(v, "fields"), *ev;
			const char *stype;

			ck_assert_ptr_nonnull(v);
			ev = json_object_get(v, "event");
			ck_assert(json_is_object(ev));
			ck_assert(json_is_number(json_object_get(v, "time")));
			ck_assert_double_gt(json_number_value(json_object_get(v,
			    "time")), 1.7e9);
			stype = json_string_value(json_object_get(v,
			    "sourcetype"));
			ck_assert_ptr_nonnull(stype);
			ck_assert_str_eq(json_string_value(json_object_get(f,
			    "sluice_origin")), af_origin);
			if (strcmp(stype, "sluice:checkpoint") == 0)
				ck_assert(json_is_integer(json_object_get(f,
				    "sluice_checkpoint_size")));
			else {
				ck_assert_str_eq(stype, format ==
				    AUD_SINK_OCSF ? "sluice:ocsf" :
				    "sluice:audit");
				/* The dedupe key, as a HEC indexed field. */
				ck_assert_int_eq(json_integer_value(
				    json_object_get(f, "sluice_seq")),
				    format == AUD_SINK_OCSF ?
				    json_integer_value(json_object_get(
				    json_object_get(ev, "metadata"),
				    "sequence")) : json_integer_value(
				    json_object_get(ev, "seq")));
				ck_assert_uint_eq(strlen(json_string_value(
				    json_object_get(f, "sluice_hash"))), 64);
			}
			nev++;
			json_decref(v);
			p = nl + 1;
		}
	}
	ck_assert_int_gt(nev, 15);
	http_stream(&h, &st, 0, 1);
	ck_assert_uint_eq(stream_check(&st, head()), 0);
	stream_adjacent(&st);
	stream_free(&st);
	aud_sink_free(s);
	http_stop(&h);
	aud_close(l);
}

START_TEST(hec_json)
{
	hec_run(AUD_SINK_JSON);
}
END_TEST

START_TEST(hec_ocsf)
{
	hec_run(AUD_SINK_OCSF);
}
END_TEST

/* ---- syslog receivers ---- */

struct slog {
	int		 fd, lfd, tcp;
	pthread_t	 thr;
	atomic_int	 stop;
	pthread_mutex_t	 mu;
	char		*msg[4096];
	size_t		 len[4096];
	int		 n;
	char		 path[160];
	int		 port;
	atomic_int	 paused;	/* TCP: accept, but read nothing */
	atomic_int	 restart;	/* TCP: drop the connection, go on */
};

static void
slog_keep(struct slog *r, const char *m, size_t len)
{
	pthread_mutex_lock(&r->mu);
	if (r->n < 4096) {
		r->msg[r->n] = malloc(len + 1);
		memcpy(r->msg[r->n], m, len);
		r->msg[r->n][len] = '\0';
		r->len[r->n++] = len;
	}
	pthread_mutex_unlock(&r->mu);
}

static void *
slog_loop(void *arg)
{
	struct slog *r = arg;
	static char buf[256 * 1024];
	struct pollfd p;
	size_t have = 0;
	ssize_t k;
	int fd = r->tcp ? -1 : r->fd;

	while (!atomic_load(&r->stop)) {
		if (r->tcp && fd == -1) {
			p.fd = r->lfd;
			p.events = POLLIN;
			if (poll(&p, 1, 50) == 1)
				fd = accept(r->lfd, NULL, NULL);
			have = 0;
			continue;
		}
		if (atomic_load(&r->restart)) {
			int big = 256 * 1024;

			/* A receiver that restarts: what it had not read is
			 * gone, and new connections get a normal window. */
			setsockopt(r->lfd, SOL_SOCKET, SO_RCVBUF, &big,
			    sizeof(big));
			close(fd);
			fd = -1;
			atomic_store(&r->restart, 0);
			atomic_store(&r->paused, 0);
			continue;
		}
		p.fd = fd;
		p.events = POLLIN;
		if (atomic_load(&r->paused)) {
			poll(NULL, 0, 20);
			continue;
		}
		if (poll(&p, 1, 50) != 1)
			continue;
		if (!r->tcp) {
			k = recv(fd, buf, sizeof(buf), 0);
			if (k > 0)
				slog_keep(r, buf, (size_t)k);
			continue;
		}
		k = recv(fd, buf + have, sizeof(buf) - have, 0);
		if (k <= 0) {
			close(fd);
			fd = -1;
			continue;
		}
		have += (size_t)k;
		/* RFC 6587 octet counting: "LEN SP MSG". */
		for (;;) {
			char *sp = memchr(buf, ' ', have < 12 ? have : 12);
			size_t ml, hl;

			if (sp == NULL)
				break;
			ml = (size_t)atol(buf);
			hl = (size_t)(sp - buf) + 1;
			if (have < hl + ml)
				break;
			slog_keep(r, buf + hl, ml);
			memmove(buf, buf + hl + ml, have - hl - ml);
			have -= hl + ml;
		}
	}
	if (r->tcp && fd != -1)
		close(fd);
	return NULL;
}

static void
slog_start_paused(struct slog *r, int tcp, int paused)
{
	struct sockaddr_un sun;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int small = 1024;

	memset(r, 0, sizeof(*r));
	atomic_store(&r->paused, paused);
	pthread_mutex_init(&r->mu, NULL);
	r->tcp = tcp;
	if (tcp == 2) {
		/* UDP: a datagram receiver on loopback. */
		r->tcp = 0;
		r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ck_assert_int_eq(bind(r->fd, (struct sockaddr *)&sin,
		    sizeof(sin)), 0);
		ck_assert_int_eq(getsockname(r->fd, (struct sockaddr *)&sin,
		    &sl), 0);
		r->port = ntohs(sin.sin_port);
	} else if (!tcp) {
		snprintf(r->path, sizeof(r->path), "%s/syslog.sock", af_dir);
		r->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		ck_assert_uint_lt(strlen(r->path), sizeof(sun.sun_path));
		memcpy(sun.sun_path, r->path, strlen(r->path));
		ck_assert_int_eq(bind(r->fd, (struct sockaddr *)&sun,
		    sizeof(sun)), 0);
	} else {
		r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		/* A paused receiver's window fills after a few records. */
		if (paused)
			ck_assert_int_eq(setsockopt(r->lfd, SOL_SOCKET,
			    SO_RCVBUF, &small, sizeof(small)), 0);
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ck_assert_int_eq(bind(r->lfd, (struct sockaddr *)&sin,
		    sizeof(sin)), 0);
		ck_assert_int_eq(getsockname(r->lfd, (struct sockaddr *)&sin,
		    &sl), 0);
		r->port = ntohs(sin.sin_port);
		ck_assert_int_eq(listen(r->lfd, 4), 0);
	}
	ck_assert_int_eq(pthread_create(&r->thr, NULL, slog_loop, r), 0);
}

static void
slog_start(struct slog *r, int tcp)
{
	slog_start_paused(r, tcp, 0);
}

static void
slog_stop(struct slog *r)
{
	int i;

	atomic_store(&r->stop, 1);
	pthread_join(r->thr, NULL);
	close(r->tcp ? r->lfd : r->fd);
	for (i = 0; i < r->n; i++)
		free(r->msg[i]);
	pthread_mutex_destroy(&r->mu);
}

/* Waits until the receiver holds want messages (bounded: 30 s). */
static void
slog_wait(struct slog *r, int want)
{
	int i, n = 0;

	for (i = 0; i < 3000; i++) {
		pthread_mutex_lock(&r->mu);
		n = r->n;
		pthread_mutex_unlock(&r->mu);
		if (n >= want)
			return;
		usleep(10000);
	}
	ck_abort_msg("syslog receiver got %d of %d", n, want);
}

static const char *
sd_param(const char *m, const char *name, char *out, size_t cap)
{
	char key[32];
	const char *p, *e;

	snprintf(key, sizeof(key), " %s=\"", name);
	if ((p = strstr(m, key)) == NULL)
		return NULL;
	p += strlen(key);
	e = strchr(p, '"');
	ck_assert_ptr_nonnull(e);
	snprintf(out, cap, "%.*s", (int)(e - p), p);
	return out;
}

/*
 * Parses an RFC 5424 message the way a collector would: PRI, VERSION,
 * TIMESTAMP, HOSTNAME, APP-NAME, PROCID, MSGID, our SD element, then MSG;
 * checks SD against MSG and feeds MSG to the stream.
 */
static void
slog_parse(struct stream *st, const char *m, size_t len)
{
	char tok[6][300], seq[32], org[200], hash[80], hex[65];
	const char *p = m, *msg;
	uint8_t h[AUD_HASH_LEN];
	int pri, i, k;

	ck_assert_int_eq(sscanf(m, "<%d>1 ", &pri), 1);
	ck_assert_int_eq(pri / 8, 13);
	p = strchr(m, '>') + 3;
	for (i = 0; i < 5; i++) {
		k = (int)strcspn(p, " ");
		ck_assert_int_lt(k, 300);
		snprintf(tok[i], sizeof(tok[i]), "%.*s", k, p);
		p += k + 1;
	}
	/* 2026-11-29T08:00:00.123456Z */
	ck_assert_uint_eq(strlen(tok[0]), 27);
	ck_assert_int_eq(tok[0][10], 'T');
	ck_assert_int_eq(tok[0][26], 'Z');
	ck_assert_str_eq(tok[2], "sluiced");
	ck_assert_int_eq(atoi(tok[3]), (int)getpid());
	ck_assert(strncmp(p, "[sluice@32473 ", 14) == 0);
	msg = strstr(p, "] ");
	ck_assert_ptr_nonnull(msg);
	msg += 2;
	ck_assert_ptr_nonnull(sd_param(p, "origin", org, sizeof(org)));
	ck_assert_str_eq(org, af_origin);
	if (strcmp(tok[4], "checkpoint") == 0) {
		ck_assert_ptr_nonnull(sd_param(p, "size", seq, sizeof(seq)));
		stream_line(st, msg, len - (size_t)(msg - m));
		ck_assert_int_eq(st->e[st->n - 1].seq, atoll(seq));
		return;
	}
	ck_assert_ptr_nonnull(sd_param(p, "seq", seq, sizeof(seq)));
	ck_assert_ptr_nonnull(sd_param(p, "hash", hash, sizeof(hash)));
	/* Plain JSON: MSG is the canon, and hash is its SHA-256. */
	aud_sha256(msg, len - (size_t)(msg - m), h);
	for (i = 0; i < AUD_HASH_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	ck_assert_str_eq(hash, hex);
	stream_line(st, msg, len - (size_t)(msg - m));
	ck_assert_int_eq(st->e[st->n - 1].seq, atoll(seq));
	ck_assert_str_eq(st->e[st->n - 1].kind, tok[4]);
}

static void
syslog_run(int tcp)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	struct aud_sink_stats ss;
	struct slog r;
	char target[200];
	int i;

	write_records(l, 30);
	slog_start(&r, tcp);
	if (tcp == 2)
		snprintf(target, sizeof(target), "udp://127.0.0.1:%d", r.port);
	else if (tcp)
		snprintf(target, sizeof(target), "tcp://127.0.0.1:%d", r.port);
	else
		snprintf(target, sizeof(target), "unix:%s", r.path);
	c.name = "syslog";
	c.type = AUD_SINK_SYSLOG;
	c.target = target;
	c.batch_max = 6;
	s = new_sink(&c, NULL);
	ck_assert_int_eq(aud_sink_start(s, NULL, 0), 0);
	aud_sink_kick(s);
	wait_cursor(s, (uint64_t)head());
	aud_sink_stop(s);
	aud_sink_stats(s, &ss);
	slog_wait(&r, (int)(ss.records + ss.checkpoints));
	pthread_mutex_lock(&r.mu);
	for (i = 0; i < r.n; i++)
		slog_parse(&st, r.msg[i], r.len[i]);
	pthread_mutex_unlock(&r.mu);
	ck_assert_uint_eq(stream_check(&st, head()), 0);
	stream_free(&st);
	aud_sink_free(s);
	slog_stop(&r);
	aud_close(l);
}

START_TEST(syslog_unix)
{
	syslog_run(0);
}
END_TEST

START_TEST(syslog_tcp)
{
	syslog_run(1);
}
END_TEST

START_TEST(syslog_udp)
{
	syslog_run(2);
}
END_TEST

/* The shipper is SIGKILLed mid-stream (a child process runs it): a restart
 * resumes from the durable cursor, nothing is lost, the file stays NDJSON. */
START_TEST(file_crash_resumes)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	char path[160], *buf;
	struct stat sb;
	size_t len;
	pid_t pid;
	int i, status;

	write_records(l, 1000);
	snprintf(path, sizeof(path), "%s/feed.ndjson", af_dir);
	c.name = "spool";
	c.type = AUD_SINK_FILE;
	c.target = path;
	c.batch_max = 2;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		s = aud_sink_new(af_dbpath, &c, NULL, NULL, 0);
		if (s == NULL || aud_sink_start(s, NULL, 0) == -1)
			_exit(1);
		for (;;)
			pause();
	}
	/* Kill it once some, and not yet all, has been shipped. */
	for (i = 0; i < 3000; i++) {
		if (stat(path, &sb) == 0 && sb.st_size > 4096)
			break;
		usleep(2000);
	}
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));
	/* And a torn line, as a power cut could leave. */
	{
		FILE *f = fopen(path, "a");

		ck_assert_ptr_nonnull(f);
		fputs("{\"origin\":\"torn", f);
		fclose(f);
	}
	s = new_sink(&c, NULL);
	drain(s);
	ck_assert_int_eq(cursor_of("spool"), head());
	buf = slurp(path, &len);
	stream_ndjson(&st, buf, len);
	stream_check(&st, head());
	free(buf);
	stream_free(&st);
	aud_sink_free(s);
	aud_close(l);
}
END_TEST

struct found {
	struct aud_log	*l;
	atomic_int	 n;
	int64_t		 lag;
};

static void
on_finding(void *arg, json_t *f)
{
	struct found *fd = arg;

	fd->lag = json_integer_value(json_object_get(f, "lag"));
	/* As the daemon wires it: the finding goes into the log. */
	if (aud_submit_async(fd->l, "finding", f) == 0)
		atomic_fetch_add(&fd->n, 1);
}

/* A receiver down for a while: the lag grows, one finding, then recovery
 * delivers everything, the finding included. */
START_TEST(down_then_recovers)
{
	struct aud_sink_conf c;
	struct aud_sink_hooks hk;
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	struct aud_sink_stats ss;
	struct found fd = { 0 };
	struct http h;
	char url[128];
	int64_t n;
	int i, sawfinding = 0;

	fd.l = l;
	hk.finding = on_finding;
	hk.arg = &fd;
	http_start(&h, H_OK, 0);	/* bound, not listening: refused */
	webhook_conf(&c, url, sizeof(url), h.port, "/");
	c.lag_alert = 10;
	s = new_sink(&c, &hk);
	ck_assert_int_eq(aud_sink_start(s, NULL, 0), 0);
	write_records(l, 40);
	aud_sink_kick(s);
	for (i = 0; i < 3000 && atomic_load(&fd.n) == 0; i++)
		usleep(10000);
	ck_assert_int_eq(atomic_load(&fd.n), 1);
	ck_assert_int_gt(fd.lag, 10);
	ck_assert_int_eq(cursor_of("hook"), -1);
	/* More records while down: still exactly one finding. */
	write_records(l, 20);
	aud_sink_kick(s);
	for (i = 0; i < 3000; i++) {
		aud_sink_stats(s, &ss);
		if (ss.lag >= 61)
			break;
		usleep(10000);
	}
	ck_assert_uint_ge(ss.lag, 61);
	ck_assert_uint_eq(ss.findings, 1);
	ck_assert_int_eq(ss.up, 0);
	ck_assert_str_ne(ss.last_error, "");
	http_listen(&h);
	ck_assert_int_eq(aud_sync(l), 0);
	n = head();
	wait_cursor(s, (uint64_t)n);
	aud_sink_stop(s);
	aud_sink_stats(s, &ss);
	ck_assert_uint_eq(ss.lag, 0);
	ck_assert_uint_eq(ss.findings, 1);
	ck_assert_int_eq(atomic_load(&fd.n), 1);
	http_stream(&h, &st, 0, 0);
	ck_assert_uint_eq(stream_check(&st, n), 0);
	for (i = 0; i < (int)st.n; i++)
		sawfinding += strcmp(st.e[i].kind, "finding") == 0;
	ck_assert_int_eq(sawfinding, 1);
	stream_free(&st);
	aud_sink_free(s);
	http_stop(&h);
	aud_close(l);
}
END_TEST

/* A checkpoint signed after its record went out still goes out, once, and
 * after that record. */
START_TEST(late_checkpoint)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log_every(1000000);
	struct aud_sink *s;
	struct stream st = { 0 };
	struct aud_sink_stats ss;
	char path[160], sql[512], *buf;
	size_t len;
	int64_t n, cursor_at;

	write_records(l, 10);
	snprintf(path, sizeof(path), "%s/feed.ndjson", af_dir);
	c.name = "spool";
	c.type = AUD_SINK_FILE;
	c.target = path;
	s = new_sink(&c, NULL);
	drain(s);
	/* The head is shipped and not signed yet. */
	n = head();
	ck_assert_int_eq(cursor_of("spool"), n);
	ck_assert_int_lt(db_int("SELECT ifnull(max(size), 0) FROM "
	    "checkpoints"), n);
	/* What the writer does a moment after the commit. */
	snprintf(sql, sizeof(sql), "INSERT INTO checkpoints (size, note, "
	    "signed_ns) VALUES (%lld, CAST('%s\n%lld\nAAAA\n\n— %s x\n' AS "
	    "BLOB), 1)", (long long)n, af_origin, (long long)n, af_origin);
	db_exec(sql);
	cursor_at = head();
	ck_assert_int_eq(aud_sink_ship(s, NULL, 0), 0);
	aud_sink_stats(s, &ss);
	ck_assert_uint_eq(ss.checkpoints, (uint64_t)db_int(
	    "SELECT count(*) FROM checkpoints WHERE size >= 1"));
	ck_assert_int_eq(cursor_of("spool#ckpt"), n);
	ck_assert_int_eq(aud_sink_ship(s, NULL, 0), 0);
	write_records(l, 3);
	drain(s);
	buf = slurp(path, &len);
	stream_ndjson(&st, buf, len);
	ck_assert_uint_eq(stream_check(&st, head()), 0);
	/* Exactly one copy of the late checkpoint (stream_check saw it after
	 * record n-1), and before the records written after it went out. */
	{
		size_t i, seen = 0, at = 0;

		for (i = 0; i < st.n; i++)
			if (st.e[i].ckpt && st.e[i].seq == n) {
				seen++;
				at = i;
			}
		ck_assert_uint_eq(seen, 1);
		for (i = 0; i < at; i++)
			ck_assert(st.e[i].ckpt || st.e[i].seq < cursor_at);
		for (i = at + 1; i < st.n; i++)
			ck_assert(st.e[i].ckpt || st.e[i].seq >= cursor_at);
	}
	free(buf);
	stream_free(&st);
	aud_sink_free(s);
	aud_close(l);
}
END_TEST

/* A TCP receiver that stops reading: what its stack has not acknowledged
 * is not delivered, the cursor stays; the receiver restarts (losing what
 * it had not read) and the next attempt re-sends the whole batch. */
START_TEST(syslog_tcp_unacknowledged)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	struct slog r;
	char target[200], err[256];
	int i;

	write_records(l, 300);
	slog_start_paused(&r, 1, 1);
	snprintf(target, sizeof(target), "tcp://127.0.0.1:%d", r.port);
	c.name = "syslog";
	c.type = AUD_SINK_SYSLOG;
	c.target = target;
	c.batch_max = 300;
	c.timeout_ms = 500;
	s = new_sink(&c, NULL);
	ck_assert_int_eq(aud_sink_ship(s, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "syslog"));
	ck_assert_int_eq(cursor_of("syslog"), -1);
	atomic_store(&r.restart, 1);
	for (i = 0; i < 3000 && atomic_load(&r.restart); i++)
		usleep(10000);
	drain(s);
	ck_assert_int_eq(cursor_of("syslog"), head());
	/* Everything, possibly twice (the first connection's bytes may still
	 * arrive): dedupe on origin#seq gives the whole log in order. */
	for (i = 0; i < 3000; i++) {
		stream_free(&st);
		pthread_mutex_lock(&r.mu);
		{
			int j;

			for (j = 0; j < r.n; j++)
				slog_parse(&st, r.msg[j], r.len[j]);
		}
		pthread_mutex_unlock(&r.mu);
		if (st.n > 0 && !st.e[st.n - 1].ckpt &&
		    st.e[st.n - 1].seq == head() - 1)
			break;
		if (st.n > 0 && st.e[st.n - 1].ckpt &&
		    st.e[st.n - 1].seq == head())
			break;
		usleep(10000);
	}
	stream_check(&st, head());
	stream_free(&st);
	aud_sink_free(s);
	slog_stop(&r);
	aud_close(l);
}
END_TEST

/*
 * aud_ship_file is the one-shot form of the file sink: it and a sink of the
 * same name are one stream, in either order, with one cursor -- no gap, no
 * repeated record and, since both keep the checkpoint row, no repeated
 * checkpoint either.
 */
START_TEST(resume_after_ship_file)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	char path[160], err[256], *buf;
	int64_t before, n;
	size_t len, i, recs = 0;

	write_records(l, 30);
	snprintf(path, sizeof(path), "%s/feed.ndjson", af_dir);
	ck_assert_int_eq(aud_ship_file(af_dbpath, "spool", path, 0, 16, err,
	    sizeof(err)), 16);
	ck_assert_int_eq(cursor_of("spool"), 16);
	/* The newest checkpoint delivered, as a running sink keeps it. */
	ck_assert_int_ge(cursor_of("spool#ckpt"), 1);
	ck_assert_int_le(cursor_of("spool#ckpt"), 16);
	c.name = "spool";
	c.type = AUD_SINK_FILE;
	c.target = path;
	s = new_sink(&c, NULL);
	drain(s);
	aud_sink_free(s);
	ck_assert_int_eq(cursor_of("spool"), head());
	/* And back: the one-shot call carries on from the sink's cursor. */
	write_records(l, 5);
	ck_assert_int_eq(aud_sync(l), 0);
	before = cursor_of("spool");
	n = aud_ship_file(af_dbpath, "spool", path, 0, 1000, err, sizeof(err));
	ck_assert_msg(n >= 5, "ship: %s", err);
	ck_assert_int_eq(before + n, head());
	ck_assert_int_eq(cursor_of("spool"), head());
	buf = slurp(path, &len);
	stream_ndjson(&st, buf, len);
	ck_assert_uint_eq(stream_check(&st, head()), 0);
	for (i = 0; i < st.n; i++)
		recs += !st.e[i].ckpt;
	ck_assert_uint_eq(recs, (size_t)head());
	free(buf);
	stream_free(&st);
	aud_close(l);
}
END_TEST

/*
 * A cursor as aud_ship_file left it before it became a wrapper over the
 * sink: the "spool" row and no "spool#ckpt" row (it shipped checkpoints
 * inline, in the same NDJSON shape). Logs shipped that way must carry on
 * without a gap or a repeated record; the one checkpoint that may have been
 * signed after its record went out is sent once more, and nothing else.
 */
START_TEST(resume_after_legacy_cursor)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	char path[160], *buf;
	size_t len, i, recs = 0;

	/* log.open, 14 records and a heartbeat: a checkpoint of size 16,
	 * the one the legacy cursor cannot tell was already sent. */
	write_records(l, 14);
	ck_assert_int_eq(aud_heartbeat(l), 0);
	ck_assert_int_eq(aud_sync(l), 0);
	ck_assert_int_eq(head(), 16);
	ck_assert_int_eq(db_int("SELECT count(*) FROM checkpoints WHERE "
	    "size = 16"), 1);
	write_records(l, 15);
	snprintf(path, sizeof(path), "%s/feed.ndjson", af_dir);
	c.name = "spool";
	c.type = AUD_SINK_FILE;
	c.target = path;
	c.batch_max = 16;
	s = new_sink(&c, NULL);
	ck_assert_int_eq(aud_sink_ship(s, NULL, 0), 16);
	aud_sink_free(s);
	db_exec("DELETE FROM ship_cursor WHERE sink = 'spool#ckpt'");
	ck_assert_int_eq(cursor_of("spool#ckpt"), -1);
	ck_assert_int_eq(cursor_of("spool"), 16);
	c.batch_max = 0;
	s = new_sink(&c, NULL);
	drain(s);
	ck_assert_int_eq(cursor_of("spool"), head());
	buf = slurp(path, &len);
	stream_ndjson(&st, buf, len);
	ck_assert_uint_eq(stream_check(&st, head()), 1);
	for (i = 0; i < st.n; i++) {
		size_t j;

		recs += !st.e[i].ckpt;
		if (!st.e[i].ckpt)
			continue;
		/* A repeat may only be the checkpoint of size 16. */
		for (j = 0; j < i; j++)
			if (st.e[j].ckpt && st.e[j].seq == st.e[i].seq)
				ck_assert_int_eq(st.e[i].seq, 16);
	}
	/* Every record exactly once. */
	ck_assert_uint_eq(recs, (size_t)head());
	free(buf);
	stream_free(&st);
	aud_sink_free(s);
	aud_close(l);
}
END_TEST

/* ---- Limits ---- */

struct badconf {
	const char	*name;
	int		 type, format;
	const char	*target;
	int		 hec;
	const char	*token;		/* file content; NULL: no token_file */
	const char	*why;
};

static const struct badconf badconfs[] = {
	{ "", AUD_SINK_FILE, 1, "/tmp/x", 0, NULL, "empty name" },
	{ "Big", AUD_SINK_FILE, 1, "/tmp/x", 0, NULL, "upper case" },
	{ "-x", AUD_SINK_FILE, 1, "/tmp/x", 0, NULL, "leading dash" },
	{ "a b", AUD_SINK_FILE, 1, "/tmp/x", 0, NULL, "space" },
	{ "a#ckpt", AUD_SINK_FILE, 1, "/tmp/x", 0, NULL, "the ckpt row" },
	{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", AUD_SINK_FILE, 1, "/tmp/x", 0,
	    NULL, "33 chars" },
	{ "x", 0, 1, "/tmp/x", 0, NULL, "type 0" },
	{ "x", 4, 1, "/tmp/x", 0, NULL, "type 4" },
	{ "x", AUD_SINK_FILE, 3, "/tmp/x", 0, NULL, "format 3" },
	{ "x", AUD_SINK_FILE, 1, "", 0, NULL, "empty target" },
	{ "x", AUD_SINK_FILE, 1, "rel/path", 0, NULL, "relative file" },
	{ "x", AUD_SINK_FILE, 1, "/tmp/x", 1, NULL, "file with HEC" },
	{ "x", AUD_SINK_FILE, 1, "/tmp/x", 0, "t", "file with token" },
	{ "x", AUD_SINK_SYSLOG, 1, "syslog.example", 0, NULL, "no scheme" },
	{ "x", AUD_SINK_SYSLOG, 1, "udp://", 0, NULL, "no host" },
	{ "x", AUD_SINK_SYSLOG, 1, "udp://h:0", 0, NULL, "port 0" },
	{ "x", AUD_SINK_SYSLOG, 1, "tcp://h:70000", 0, NULL, "port 70000" },
	{ "x", AUD_SINK_SYSLOG, 1, "tcp://h:5x", 0, NULL, "port junk" },
	{ "x", AUD_SINK_SYSLOG, 1, "tcp://[::1", 0, NULL, "open bracket" },
	{ "x", AUD_SINK_SYSLOG, 1, "tcp://u@h:1", 0, NULL, "userinfo" },
	{ "x", AUD_SINK_SYSLOG, 1, "unix:rel", 0, NULL, "relative socket" },
	{ "x", AUD_SINK_SYSLOG, 1, "unix:/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaa", 0, NULL, "socket path too long" },
	{ "x", AUD_SINK_SYSLOG, 1, "udp://h:514", 0, "t", "syslog token" },
	{ "x", AUD_SINK_WEBHOOK, 1, "ftp://h/x", 0, NULL, "ftp" },
	{ "x", AUD_SINK_WEBHOOK, 1, "file:///etc/passwd", 0, NULL, "file:" },
	{ "x", AUD_SINK_WEBHOOK, 1, "http://h/", 1, NULL, "HEC no token" },
	{ "x", AUD_SINK_WEBHOOK, 1, "http://h/", 0, "", "empty token" },
	{ "x", AUD_SINK_WEBHOOK, 1, "http://h/", 0, "\n", "blank token" },
	{ "x", AUD_SINK_WEBHOOK, 1, "http://h/", 0, "a\nX-Evil: 1",
	    "header injection" },
	{ "x", AUD_SINK_WEBHOOK, 1, "http://h/", 0, "a b", "space in token" },
	{ "x", AUD_SINK_WEBHOOK, 1, "http://h/", 0, "a\rb", "CR in token" },
	{ "x", AUD_SINK_WEBHOOK, 1, "http://h/", 0, "tok\xc3\xa9",
	    "non-ASCII token" },
};

START_TEST(bad_conf)
{
	const struct badconf *b = &badconfs[_i];
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	char err[256] = "", tp[160];

	aud_close(l);
	c.name = b->name;
	c.type = b->type;
	c.format = b->format;
	c.target = b->target;
	c.splunk_hec = b->hec;
	if (b->token != NULL) {
		snprintf(tp, sizeof(tp), "%s/badtoken", af_dir);
		write_file(tp, b->token);
		c.token_file = tp;
	}
	errno = 0;
	ck_assert_msg(aud_sink_new(af_dbpath, &c, NULL, err, sizeof(err)) ==
	    NULL, "accepted: %s", b->why);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_msg(err[0] != '\0', "no message: %s", b->why);
	/* Nothing was shipped or recorded. */
	ck_assert_int_eq(db_int("SELECT count(*) FROM ship_cursor"), 0);
}
END_TEST

START_TEST(bad_token_files)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	char big[SINK_BIG], tp[160], err[256];

	aud_close(l);
	c.name = "x";
	c.type = AUD_SINK_WEBHOOK;
	c.target = "http://127.0.0.1:9/";
	c.token_file = "/nonexistent/token";
	ck_assert_ptr_null(aud_sink_new(af_dbpath, &c, NULL, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "token_file"));
	/* A directory, and a token too large to be one. */
	c.token_file = af_dir;
	ck_assert_ptr_null(aud_sink_new(af_dbpath, &c, NULL, err, sizeof(err)));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	snprintf(tp, sizeof(tp), "%s/big", af_dir);
	write_file(tp, big);
	c.token_file = tp;
	ck_assert_ptr_null(aud_sink_new(af_dbpath, &c, NULL, err, sizeof(err)));
	/* A symlink is not followed to a token elsewhere. */
	snprintf(big, sizeof(big), "%s/link", af_dir);
	ck_assert_int_eq(symlink(tokpath, big), 0);
	c.token_file = big;
	ck_assert_ptr_null(aud_sink_new(af_dbpath, &c, NULL, err, sizeof(err)));
	/* And the good one works. */
	c.token_file = tokpath;
	aud_sink_free(new_sink(&c, NULL));
	aud_sink_free(NULL);
}
END_TEST

START_TEST(bad_database)
{
	struct aud_sink_conf c = { 0 };
	char p[160], err[256];
	sqlite3 *db;

	c.name = "x";
	c.type = AUD_SINK_FILE;
	c.target = "/tmp/never-written";
	snprintf(p, sizeof(p), "%s/none.db", af_dir);
	ck_assert_ptr_null(aud_sink_new(p, &c, NULL, err, sizeof(err)));
	/* Sinks never create a log. */
	ck_assert_int_eq(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "%s/junk.db", af_dir);
	write_file(p, "this is not a database, just text long enough to be "
	    "read as a header by SQLite\n");
	ck_assert_ptr_null(aud_sink_new(p, &c, NULL, err, sizeof(err)));
	snprintf(p, sizeof(p), "%s/empty.db", af_dir);
	ck_assert_int_eq(sqlite3_open(p, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL,
	    NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_ptr_null(aud_sink_new(p, &c, NULL, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "not an audit log"));
}
END_TEST

static const int hostile_modes[] = {
	H_GARBAGE, H_500, H_HANG, H_CLOSE, H_REDIRECT, H_BIGBODY, H_PARTIAL,
};

/* Hostile answers never move the cursor; once the receiver behaves, the
 * whole log arrives without a gap. */
START_TEST(hostile_receiver)
{
	struct aud_sink_conf c;
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct stream st = { 0 };
	struct http h;
	char url[128], err[256];
	int i;

	write_records(l, 12);
	http_start(&h, hostile_modes[_i], 1);
	webhook_conf(&c, url, sizeof(url), h.port, "/");
	c.timeout_ms = 300;	/* bounds the hanging receiver */
	s = new_sink(&c, NULL);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(aud_sink_ship(s, err, sizeof(err)), -1);
		ck_assert_str_ne(err, "");
	}
	ck_assert_int_eq(cursor_of("hook"), -1);
	ck_assert_uint_eq(aud_sink_lag(s), (uint64_t)head());
	ck_assert_int_ge(http_count(&h), 1);
	atomic_store(&h.mode, H_OK);
	drain(s);
	ck_assert_int_eq(cursor_of("hook"), head());
	http_stream(&h, &st, 0, 0);
	ck_assert_uint_eq(stream_check(&st, head()), 0);
	stream_free(&st);
	aud_sink_free(s);
	http_stop(&h);
	aud_close(l);
}
END_TEST

/* A hole or a damaged record in the log stops the feed before it: the
 * SOC copy never silently skips. */
START_TEST(damaged_log_stops)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	struct aud_sink *s;
	char path[160], err[256];
	int i;

	write_records(l, 20);
	aud_close(l);
	snprintf(path, sizeof(path), "%s/feed.ndjson", af_dir);
	c.name = "spool";
	c.type = AUD_SINK_FILE;
	c.target = path;
	c.batch_max = 4;
	if (_i == 0)
		db_exec("DROP TRIGGER rec_no_del; DELETE FROM records "
		    "WHERE seq = 9");
	else
		db_exec("DROP TRIGGER rec_no_upd; UPDATE records SET canon = "
		    "CAST(replace(CAST(canon AS TEXT), '\"t8\"', '\"t8\" ') AS "
		    "BLOB) WHERE seq = 9");
	s = new_sink(&c, NULL);
	for (i = 0; i < 10; i++)
		if (aud_sink_ship(s, err, sizeof(err)) == -1)
			break;
	ck_assert_int_lt(i, 10);
	ck_assert_int_eq(errno, EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, "9"));
	ck_assert_int_eq(cursor_of("spool"), 8);
	/* And it stays stopped. */
	ck_assert_int_eq(aud_sink_ship(s, NULL, 0), -1);
	ck_assert_int_eq(cursor_of("spool"), 8);
	aud_sink_free(s);
}
END_TEST

/* A spool path that is a FIFO or a directory is refused per delivery. */
START_TEST(file_not_regular)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	struct aud_sink *s;
	char path[160];

	write_records(l, 3);
	snprintf(path, sizeof(path), "%s/fifo", af_dir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	c.name = "spool";
	c.type = AUD_SINK_FILE;
	c.target = path;
	s = new_sink(&c, NULL);
	ck_assert_int_eq(aud_sink_ship(s, NULL, 0), -1);
	aud_sink_free(s);
	c.target = af_dir;
	s = new_sink(&c, NULL);
	ck_assert_int_eq(aud_sink_ship(s, NULL, 0), -1);
	ck_assert_int_eq(cursor_of("spool"), -1);
	aud_sink_free(s);
	aud_close(l);
}
END_TEST

/* A record too big for one datagram still goes out: a stub that names
 * seq and hash, never a silent hole. */
START_TEST(syslog_oversize_datagram)
{
	struct aud_sink_conf c = { 0 };
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct slog r;
	char target[200], *big, seq[32];
	int i, stubs = 0;

	big = malloc(100001);
	memset(big, 'x', 100000);
	big[100000] = '\0';
	write_records(l, 2);
	ck_assert_int_eq(aud_submit_async(l, "mcp.call", json_pack("{s:s,"
	    "s:s,s:s}", "server", "files", "tool", "big", "reason", big)), 0);
	write_records(l, 2);
	free(big);
	slog_start(&r, 0);
	snprintf(target, sizeof(target), "%s", r.path);
	c.name = "syslog";
	c.type = AUD_SINK_SYSLOG;
	c.target = target;
	s = new_sink(&c, NULL);
	drain(s);
	ck_assert_int_eq(cursor_of("syslog"), head());
	slog_wait(&r, (int)head());
	pthread_mutex_lock(&r.mu);
	for (i = 0; i < r.n; i++) {
		ck_assert_uint_le(r.len[i], 60000);
		if (strstr(r.msg[i], "\"truncated\":true") != NULL) {
			stubs++;
			ck_assert_ptr_nonnull(sd_param(r.msg[i], "seq", seq,
			    sizeof(seq)));
			ck_assert_ptr_nonnull(sd_param(r.msg[i], "hash", seq,
			    sizeof(seq)));
		}
	}
	pthread_mutex_unlock(&r.mu);
	ck_assert_int_eq(stubs, 1);
	aud_sink_free(s);
	slog_stop(&r);
	aud_close(l);
}
END_TEST

/* Stopping a sink whose receiver hangs returns (the transfer is aborted)
 * and moves nothing. */
START_TEST(stop_while_hanging)
{
	struct aud_sink_conf c;
	struct aud_log *l = open_log();
	struct aud_sink *s;
	struct http h;
	char url[128];
	int i;

	write_records(l, 5);
	http_start(&h, H_HANG, 1);
	webhook_conf(&c, url, sizeof(url), h.port, "/");
	c.timeout_ms = 60000;
	s = new_sink(&c, NULL);
	ck_assert_int_eq(aud_sink_start(s, NULL, 0), 0);
	ck_assert_int_eq(aud_sink_start(s, NULL, 0), -1);
	ck_assert_int_eq(aud_sink_ship(s, NULL, 0), -1);
	ck_assert_int_eq(errno, EBUSY);
	for (i = 0; i < 3000 && http_count(&h) == 0; i++)
		usleep(10000);
	ck_assert_int_ge(http_count(&h), 1);
	aud_sink_free(s);
	ck_assert_int_eq(cursor_of("hook"), -1);
	http_stop(&h);
	aud_close(l);
}
END_TEST

static Suite *
sink_suite(void)
{
	Suite *su = suite_create("audit_sink");
	TCase *tc = tcase_create("Core"), *lim = tcase_create("Limits");

	tcase_add_checked_fixture(tc, setup, af_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, file_in_order);
	tcase_add_test(tc, file_restart_resumes);
	tcase_add_test(tc, file_ocsf);
	tcase_add_test(tc, webhook_fail_every_third);
	tcase_add_test(tc, webhook_lost_ack_dups_within_batch);
	tcase_add_test(tc, hec_json);
	tcase_add_test(tc, hec_ocsf);
	tcase_add_test(tc, syslog_unix);
	tcase_add_test(tc, syslog_tcp);
	tcase_add_test(tc, syslog_udp);
	tcase_add_test(tc, file_crash_resumes);
	tcase_add_test(tc, down_then_recovers);
	tcase_add_test(tc, late_checkpoint);
	tcase_add_test(tc, syslog_tcp_unacknowledged);
	tcase_add_test(tc, resume_after_ship_file);
	tcase_add_test(tc, resume_after_legacy_cursor);
	suite_add_tcase(su, tc);

	tcase_add_checked_fixture(lim, setup, af_teardown);
	tcase_set_timeout(lim, 120);
	tcase_add_loop_test(lim, bad_conf, 0,
	    (int)(sizeof(badconfs) / sizeof(badconfs[0])));
	tcase_add_test(lim, bad_token_files);
	tcase_add_test(lim, bad_database);
	tcase_add_loop_test(lim, hostile_receiver, 0,
	    (int)(sizeof(hostile_modes) / sizeof(hostile_modes[0])));
	tcase_add_loop_test(lim, damaged_log_stops, 0, 2);
	tcase_add_test(lim, file_not_regular);
	tcase_add_test(lim, syslog_oversize_datagram);
	tcase_add_test(lim, stop_while_hanging);
	suite_add_tcase(su, lim);
	return su;
}

int
main(void)
{
	SRunner *sr = srunner_create(sink_suite());
	int nf;

	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
