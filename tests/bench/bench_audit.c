/*
 * bench_audit: the audit log's durable write rate, latency and verification
 * speed (targets: >= 50,000 durable records/s with group commit, >= 500,000
 * records/s verified, the added latency of one durable record).
 *
 * Everything goes through the public audit/ API as the daemon uses it:
 * aud_open with a signing key (so checkpoints are signed as in production),
 * aud_submit_durable with a done callback, the notify fd and aud_dispatch,
 * then aud_verify on the closed database with the pinned verifier key. The
 * anchor is what one would write without group commit: the same canonical
 * record, hashed and chained, one INSERT per transaction in SQLite (WAL,
 * synchronous=FULL), in the same run and on the same disk.
 *
 *   bench_audit DIR MAXREC MAXSECS NLAT
 *
 * MAXREC and MAXSECS bound the throughput run (the anchor runs at most
 * min(MAXSECS, 3) seconds); NLAT is the number of latency samples.
 *
 * DIR must be an empty directory on a real disk (not tmpfs, or "durable"
 * means nothing). Output lines:
 *   durable_rate R n N ok K secs S
 *   lat US                      (NLAT lines: one durable record, idle log)
 *   verify_rate R size N secs S result X
 *   verify_warnings JSON        (only when verify reports warnings)
 *   naive_rate R n N secs S
 *   naive_lat US                (one line per naive record)
 * Exit 1 if any step fails, a record is not written, or verification does
 * not report the log intact.
 */
#include <sys/types.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <sqlite3.h>

#include "audit/audit.h"

#define NAIVE_MAX	20000
#define DRAIN_SECS	60

struct counts {
	uint64_t	done, ok;
};

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	fprintf(stderr, "bench_audit: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static int64_t
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static unsigned long
num(const char *s, unsigned long max)
{
	char		*end;
	unsigned long	 v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v > max)
		die("bad number '%s'", s);
	return v;
}

/* A typical tool-call record: what the bridge writes for every call. */
static json_t *
record(uint64_t i)
{
	char	args[65];

	snprintf(args, sizeof(args), "%064llx", (unsigned long long)i);
	return json_pack("{s:{s:s,s:s},s:{s:s,s:i,s:s,s:s},s:s,s:s,s:s,s:s,"
	    "s:s,s:i}",
	    "sandbox", "id", "bench-1", "run", "r-0001",
	    "policy", "id", "default", "version", 1, "sha256",
	    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
	    "rule", "mcp.tools[3]",
	    "decision", "allow", "reason", "rule",
	    "server", "github", "tool", "search_issues",
	    "args_sha256", args, "result_bytes", (json_int_t)(i % 4096));
}

static void
done_cb(void *arg, int ok, uint64_t seq)
{
	struct counts	*c = arg;

	(void)seq;
	c->done++;
	if (ok)
		c->ok++;
}

/* wait_dispatch: wait (bounded) for completions and run them. */
static void
wait_dispatch(struct aud_log *l, int ms)
{
	struct pollfd	pfd;

	pfd.fd = aud_notify_fd(l);
	pfd.events = POLLIN;
	if (poll(&pfd, 1, ms) > 0)
		aud_dispatch(l);
}

static void
throughput(struct aud_log *l, unsigned long maxrec, unsigned long maxsecs)
{
	struct counts	c = { 0, 0 };
	json_t		*f;
	uint64_t	 n = 0;
	int64_t		 t0, end, drain;

	t0 = now_ns();
	end = t0 + (int64_t)maxsecs * 1000000000;
	while (n < maxrec && ((n & 255) != 0 || now_ns() < end)) {
		if ((f = record(n)) == NULL)
			die("json_pack");
		if (aud_submit_durable(l, "mcp.call", f, done_cb, &c) == 0) {
			n++;
			if ((n & 255) == 0)
				aud_dispatch(l);
			continue;
		}
		if (errno != EAGAIN)
			die("aud_submit_durable: %s", strerror(errno));
		/* Queue full: the producer waits for the writer, as a
		 * caller that must not act before the record would. */
		wait_dispatch(l, 100);
	}
	drain = now_ns() + (int64_t)DRAIN_SECS * 1000000000;
	while (c.done < n && now_ns() < drain)
		wait_dispatch(l, 100);
	if (c.done < n)
		die("%llu of %llu records never completed",
		    (unsigned long long)(n - c.done), (unsigned long long)n);
	printf("durable_rate %.0f n %llu ok %llu secs %.3f\n",
	    (double)c.ok / ((double)(now_ns() - t0) / 1e9),
	    (unsigned long long)n, (unsigned long long)c.ok,
	    (double)(now_ns() - t0) / 1e9);
	if (c.ok != n)
		die("%llu records failed", (unsigned long long)(n - c.ok));
}

static void
latency(struct aud_log *l, unsigned long nlat)
{
	struct counts	c;
	json_t		*f;
	unsigned long	 i;
	int64_t		 t0, limit;

	for (i = 0; i < nlat; i++) {
		c.done = c.ok = 0;
		if ((f = record(i)) == NULL)
			die("json_pack");
		t0 = now_ns();
		if (aud_submit_durable(l, "mcp.call", f, done_cb, &c) == -1)
			die("aud_submit_durable: %s", strerror(errno));
		limit = t0 + 10LL * 1000000000;
		while (c.done == 0 && now_ns() < limit)
			wait_dispatch(l, 100);
		if (c.ok != 1)
			die("latency record %lu not written", i);
		printf("lat %.1f\n", (double)(now_ns() - t0) / 1e3);
	}
}

static void
verify(const char *db, const char *vkey)
{
	struct aud_verify_opts	 o;
	json_t			*rep = NULL;
	const char		*keys[1] = { vkey };
	int64_t			 t0, t1;
	json_int_t		 size;
	int			 rc;

	memset(&o, 0, sizeof(o));
	o.db_path = db;
	o.vkeys = keys;
	o.nvkeys = 1;
	t0 = now_ns();
	rc = aud_verify(&o, &rep);
	t1 = now_ns();
	size = json_integer_value(json_object_get(rep, "size"));
	printf("verify_rate %.0f size %lld secs %.3f result %d\n",
	    (double)size / ((double)(t1 - t0) / 1e9), (long long)size,
	    (double)(t1 - t0) / 1e9, rc);
	if (rc == AUD_WARNINGS) {
		char *w = json_dumps(json_object_get(rep, "warnings"),
		    JSON_COMPACT);

		printf("verify_warnings %s\n", w != NULL ? w : "?");
		free(w);
	}
	if (rc != AUD_VERIFIED && rc != AUD_WARNINGS) {
		char *s = json_dumps(rep, JSON_COMPACT);

		die("verify result %d: %s", rc, s != NULL ? s : "?");
	}
	json_decref(rep);
}

/* The anchor: canonical record, chained hash, one commit per record. */
static void
naive(const char *path, unsigned long maxsecs)
{
	sqlite3		*db;
	sqlite3_stmt	*st;
	json_t		*f;
	char		*buf, err[256], *hex;
	uint8_t		 prev[AUD_HASH_LEN] = { 0 }, h[AUD_HASH_LEN];
	size_t		 len, i, k;
	int64_t		 t0, t, end;

	if (sqlite3_open(path, &db) != SQLITE_OK ||
	    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
	    "CREATE TABLE rec (seq INTEGER PRIMARY KEY, prev TEXT NOT NULL,"
	    " canon TEXT NOT NULL, hash BLOB NOT NULL)", NULL, NULL,
	    NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO rec VALUES (?, ?, ?, ?)", -1,
	    &st, NULL) != SQLITE_OK)
		die("naive sqlite: %s", sqlite3_errmsg(db));
	if ((hex = malloc(2 * AUD_HASH_LEN + 1)) == NULL)
		die("malloc");
	t0 = now_ns();
	end = t0 + (int64_t)maxsecs * 1000000000;
	for (i = 0; i < NAIVE_MAX && (t = now_ns()) < end; i++) {
		if ((f = record(i)) == NULL)
			die("json_pack");
		if (json_object_set_new(f, "seq", json_integer((json_int_t)i))
		    == -1 || (buf = aud_canon_dump(f, &len, err,
		    sizeof(err))) == NULL)
			die("canon: %s", err);
		json_decref(f);
		for (k = 0; k < AUD_HASH_LEN; k++)
			snprintf(hex + 2 * k, 3, "%02x", prev[k]);
		aud_leaf_hash(buf, len, h);
		sqlite3_bind_int64(st, 1, (sqlite3_int64)i);
		sqlite3_bind_text(st, 2, hex, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, buf, (int)len, SQLITE_STATIC);
		sqlite3_bind_blob(st, 4, h, AUD_HASH_LEN, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE)
			die("naive insert: %s", sqlite3_errmsg(db));
		sqlite3_reset(st);
		free(buf);
		memcpy(prev, h, AUD_HASH_LEN);
		printf("naive_lat %.1f\n", (double)(now_ns() - t) / 1e3);
	}
	printf("naive_rate %.0f n %zu secs %.3f\n",
	    (double)i / ((double)(now_ns() - t0) / 1e9), i,
	    (double)(now_ns() - t0) / 1e9);
	free(hex);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

int
main(int argc, char *argv[])
{
	struct aud_opts	 o;
	struct aud_key	*k;
	struct aud_log	*l;
	char		 db[512], key[512], nv[512], vkey[512], err[256];
	unsigned long	 maxrec, maxsecs, nlat;

	if (argc != 5)
		die("usage: bench_audit DIR MAXREC MAXSECS NLAT");
	maxrec = num(argv[2], 100000000);
	maxsecs = num(argv[3], 600);
	nlat = num(argv[4], 100000);
	if ((size_t)snprintf(db, sizeof(db), "%s/audit.db", argv[1]) >=
	    sizeof(db) ||
	    (size_t)snprintf(key, sizeof(key), "%s/key.pem", argv[1]) >=
	    sizeof(key) ||
	    (size_t)snprintf(nv, sizeof(nv), "%s/naive.db", argv[1]) >=
	    sizeof(nv))
		die("directory name too long");

	if ((k = aud_key_new("bench.sluice.test/audit", err,
	    sizeof(err))) == NULL || aud_key_save(k, key, err,
	    sizeof(err)) == -1 || aud_key_vkey(k, vkey, sizeof(vkey)) == -1)
		die("key: %s", err);
	aud_key_free(k);

	memset(&o, 0, sizeof(o));
	o.db_path = db;
	o.origin = "bench.sluice.test/audit";
	o.key_path = key;
	if ((l = aud_open(&o, err, sizeof(err))) == NULL)
		die("aud_open: %s", err);
	throughput(l, maxrec, maxsecs);
	latency(l, nlat);
	aud_close(l);
	fflush(stdout);

	verify(db, vkey);
	fflush(stdout);
	/* The anchor's rate settles within a second or two. */
	naive(nv, maxsecs < 3 ? maxsecs : 3);
	return 0;
}
