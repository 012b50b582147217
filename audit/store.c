/*
 * store: the SQLite side of the log (reference/audit.md §3.2). One schema,
 * opened in WAL mode with synchronous=FULL by the writer (a checkpoint must
 * never cover rows a power loss can undo) and read-only by verify, proof and
 * tail, which works beside a running writer. The append-only triggers are
 * guards against our own bugs, not against root.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "audit/priv.h"

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS log_meta (k TEXT PRIMARY KEY, v BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS records ("
    " seq INTEGER PRIMARY KEY, ts_ns INTEGER NOT NULL, kind INTEGER NOT NULL,"
    " canon BLOB NOT NULL,"
    " rec_hash BLOB NOT NULL CHECK (length(rec_hash) = 32),"
    " decision INTEGER, sandbox TEXT, dst_host TEXT, dst_ip TEXT,"
    " dst_port INTEGER, rule_id TEXT, mcp_server TEXT, mcp_tool TEXT);"
    "CREATE INDEX IF NOT EXISTS rec_ts ON records(ts_ns);"
    "CREATE INDEX IF NOT EXISTS rec_dst ON records(dst_host);"
    "CREATE INDEX IF NOT EXISTS rec_sandbox ON records(sandbox);"
    "CREATE TABLE IF NOT EXISTS merkle_nodes (level INTEGER NOT NULL,"
    " idx INTEGER NOT NULL, hash BLOB NOT NULL, PRIMARY KEY (level, idx))"
    " WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS checkpoints (size INTEGER PRIMARY KEY,"
    " note BLOB NOT NULL, signed_ns INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS ship_cursor (sink TEXT PRIMARY KEY,"
    " next_seq INTEGER NOT NULL, updated_ns INTEGER NOT NULL);"
    "CREATE TRIGGER IF NOT EXISTS rec_no_upd BEFORE UPDATE ON records"
    " BEGIN SELECT RAISE(ABORT,'append-only'); END;"
    "CREATE TRIGGER IF NOT EXISTS rec_no_del BEFORE DELETE ON records"
    " BEGIN SELECT RAISE(ABORT,'append-only'); END;"
    "CREATE TRIGGER IF NOT EXISTS mn_no_upd BEFORE UPDATE ON merkle_nodes"
    " BEGIN SELECT RAISE(ABORT,'append-only'); END;"
    "CREATE TRIGGER IF NOT EXISTS mn_no_del BEFORE DELETE ON merkle_nodes"
    " BEGIN SELECT RAISE(ABORT,'append-only'); END;"
    "CREATE TRIGGER IF NOT EXISTS ck_no_upd BEFORE UPDATE ON checkpoints"
    " BEGIN SELECT RAISE(ABORT,'append-only'); END;"
    "CREATE TRIGGER IF NOT EXISTS ck_no_del BEFORE DELETE ON checkpoints"
    " BEGIN SELECT RAISE(ABORT,'append-only'); END;";

void
aud_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

void
aud_hex(const uint8_t *in, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hx[in[i] >> 4];
		out[2 * i + 1] = hx[in[i] & 15];
	}
	out[2 * n] = '\0';
}

json_t *
aud_ns_json(int64_t ns)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lld", (long long)(ns < 0 ? 0 : ns));
	return json_string(buf);
}

int
aud_ns_parse_str(const char *s, size_t n, int64_t *ns)
{
	size_t i;
	int64_t x = 0;

	if (n == 0 || n > 19 || (n > 1 && s[0] == '0'))
		return -1;
	/* Up to 18 digits cannot overflow: no check per digit. */
	if (n <= 18) {
		for (i = 0; i < n; i++) {
			if (s[i] < '0' || s[i] > '9')
				return -1;
			x = x * 10 + (s[i] - '0');
		}
		*ns = x;
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' ||
		    x > (INT64_MAX - (s[i] - '0')) / 10)
			return -1;
		x = x * 10 + (s[i] - '0');
	}
	*ns = x;
	return 0;
}

int
aud_ns_parse(const json_t *v, int64_t *ns)
{
	const char *s;

	if (!json_is_string(v))
		return -1;
	s = json_string_value(v);
	return aud_ns_parse_str(s, strlen(s), ns);
}

int
aud_kind_code(const char *kind)
{
	if (kind == NULL)
		return 0;
	if (strcmp(kind, "egress.decision") == 0)
		return 1;
	if (strcmp(kind, "dns.decision") == 0)
		return 2;
	if (strcmp(kind, "net.deny") == 0)
		return 3;
	/* A call's intent, its outcome, and the daemon's word that the
	 * outcome is not known: one family, as the log.* kinds are. */
	if (strcmp(kind, "mcp.call") == 0 || strcmp(kind, "mcp.intent") == 0 ||
	    strcmp(kind, "mcp.outcome_unknown") == 0 ||
	    strcmp(kind, "mcp.approval") == 0)
		return 4;
	if (strcmp(kind, "finding") == 0)
		return 5;
	if (strcmp(kind, "log.open") == 0 || strcmp(kind, "log.gap") == 0 ||
	    strcmp(kind, "log.key") == 0 || strcmp(kind, "log.heartbeat") == 0 ||
	    strcmp(kind, "log.close") == 0)
		return 6;
	if (strcmp(kind, "sandbox.create") == 0 ||
	    strcmp(kind, "sandbox.delete") == 0 ||
	    strcmp(kind, "sandbox.expire") == 0 ||
	    strcmp(kind, "sandbox.adopt") == 0)
		return 7;
	if (strcmp(kind, "policy.reload") == 0)
		return 8;
	if (strcmp(kind, "net.flow") == 0)
		return 9;
	if (strcmp(kind, "mcp.resource") == 0)
		return 10;
	if (strcmp(kind, "mcp.prompt") == 0)
		return 11;
	if (strcmp(kind, "mcp.server_request") == 0)
		return 12;
	return 0;
}

int
aud_kind_valid(const char *kind)
{
	return aud_kind_code(kind) != 0;
}

static const char *
str_at(const json_t *o, const char *a, const char *b)
{
	json_t *v = json_object_get(o, a);

	if (b != NULL)
		v = json_is_object(v) ? json_object_get(v, b) : NULL;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int
aud_decision_code(const char *s, size_t n)
{
	static const char *const names[] = { "allow", "deny", "ask", "log" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && memcmp(s, names[i], n) == 0)
			return (int)i + 1;
	return 0;
}

void
aud_cols_from(const json_t *rec, struct aud_cols *c)
{
	const char *d;
	json_t *p;

	memset(c, 0, sizeof(*c));
	c->kind = aud_kind_code(str_at(rec, "kind", NULL));
	if ((d = str_at(rec, "decision", NULL)) != NULL)
		c->decision = aud_decision_code(d, strlen(d));
	c->sandbox = str_at(rec, "sandbox", "id");
	if (c->sandbox == NULL)
		c->sandbox = str_at(rec, "sandbox", NULL);
	c->dst_host = str_at(rec, "dst", "host");
	c->dst_ip = str_at(rec, "dst", "ip");
	p = json_object_get(rec, "dst");
	if (json_is_object(p) && json_is_integer(json_object_get(p, "port"))) {
		c->dst_port = json_integer_value(json_object_get(p, "port"));
		c->has_port = 1;
	}
	c->rule_id = str_at(rec, "policy", "rule");
	c->mcp_server = str_at(rec, "server", NULL);
	c->mcp_tool = str_at(rec, "tool", NULL);
}

int
aud_store_open(const char *path, int rw, sqlite3 **dbp, char *err,
    size_t errlen)
{
	return aud_store_open_vfs(path, rw, NULL, dbp, err, errlen);
}

int
aud_store_open_vfs(const char *path, int rw, const char *vfs, sqlite3 **dbp,
    char *err, size_t errlen)
{
	sqlite3 *db = NULL;
	char *msg = NULL;
	int rc, flags;

	*dbp = NULL;
	flags = rw ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE :
	    SQLITE_OPEN_READONLY;
	flags |= SQLITE_OPEN_NOMUTEX;
	if ((rc = sqlite3_open_v2(path, &db, flags, vfs)) != SQLITE_OK) {
		aud_seterr(err, errlen, "%s: %s", path,
		    db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		errno = EIO;
		return -1;
	}
	sqlite3_busy_timeout(db, 5000);
	/* Bound what a hostile file can make us allocate. */
	sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 16 * 1024 * 1024);
	if (rw) {
		if (sqlite3_exec(db, "PRAGMA journal_mode=WAL;"
		    "PRAGMA synchronous=FULL;PRAGMA foreign_keys=ON;", NULL,
		    NULL, &msg) != SQLITE_OK ||
		    sqlite3_exec(db, schema, NULL, NULL, &msg) != SQLITE_OK) {
			aud_seterr(err, errlen, "%s: %s", path,
			    msg ? msg : sqlite3_errmsg(db));
			sqlite3_free(msg);
			sqlite3_close(db);
			errno = EIO;
			return -1;
		}
	}
	*dbp = db;
	return 0;
}

int
aud_store_subtree(void *arg, unsigned level, uint64_t idx,
    uint8_t out[AUD_HASH_LEN])
{
	sqlite3 *db = arg;
	sqlite3_stmt *st;
	int rc = -1;

	if (level == 0) {
		if (sqlite3_prepare_v2(db,
		    "SELECT rec_hash FROM records WHERE seq = ?", -1, &st,
		    NULL) != SQLITE_OK)
			return -1;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)idx);
		if (sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_type(st, 0) == SQLITE_BLOB &&
		    sqlite3_column_bytes(st, 0) == AUD_HASH_LEN) {
			aud_leaf_hash(sqlite3_column_blob(st, 0), AUD_HASH_LEN,
			    out);
			rc = 0;
		}
	} else {
		if (sqlite3_prepare_v2(db, "SELECT hash FROM merkle_nodes "
		    "WHERE level = ? AND idx = ?", -1, &st, NULL) != SQLITE_OK)
			return -1;
		sqlite3_bind_int(st, 1, (int)level);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)idx);
		if (sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_type(st, 0) == SQLITE_BLOB &&
		    sqlite3_column_bytes(st, 0) == AUD_HASH_LEN) {
			memcpy(out, sqlite3_column_blob(st, 0), AUD_HASH_LEN);
			rc = 0;
		}
	}
	sqlite3_finalize(st);
	if (rc == -1)
		errno = ENOENT;
	return rc;
}

int
aud_store_size(sqlite3 *db, uint64_t *n)
{
	sqlite3_stmt *st;
	int rc = -1;

	if (sqlite3_prepare_v2(db, "SELECT count(*), max(seq) FROM records",
	    -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW) {
		sqlite3_int64 c = sqlite3_column_int64(st, 0);
		sqlite3_int64 m = sqlite3_column_int64(st, 1);

		/* A hole or a duplicate means the table is not a log. */
		if (c == 0 || (m == c - 1 &&
		    sqlite3_column_type(st, 1) == SQLITE_INTEGER)) {
			*n = (uint64_t)c;
			rc = 0;
		} else
			errno = EBADMSG;
	}
	sqlite3_finalize(st);
	return rc;
}

int
aud_store_meta(sqlite3 *db, const char *k, char *buf, size_t len)
{
	sqlite3_stmt *st;
	int rc = -1, n;

	if (sqlite3_prepare_v2(db, "SELECT v FROM log_meta WHERE k = ?", -1,
	    &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		n = sqlite3_column_bytes(st, 0);
		if (n >= 0 && (size_t)n < len) {
			if (n > 0)
				memcpy(buf, sqlite3_column_blob(st, 0),
				    (size_t)n);
			buf[n] = '\0';
			if (strlen(buf) == (size_t)n)
				rc = 0;
		}
	}
	sqlite3_finalize(st);
	return rc;
}
