/*
 * sandbox_db.c: the state database of the sandbox manager,
 * <state_dir>/state.db. The kernel keeps a sandbox's namespace and set
 * elements across a crash of sluiced, but not who asked for it, under
 * which policy, or its bearer token: this table is that memory, so a
 * restart can adopt what is alive and remove what is not. Writes are
 * synchronous (synchronous=FULL) because a sandbox exists for the daemon
 * only once its row is durable.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "gateway/sandbox_int.h"

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS sandboxes ("
    " id TEXT PRIMARY KEY NOT NULL,"
    " policy TEXT NOT NULL,"
    " subject TEXT NOT NULL,"
    " labels TEXT NOT NULL,"
    " idx INTEGER NOT NULL UNIQUE,"
    " address TEXT NOT NULL,"
    " host_address TEXT NOT NULL,"
    " token TEXT NOT NULL,"
    " created INTEGER NOT NULL,"
    " expires INTEGER NOT NULL,"
    " tainted INTEGER NOT NULL DEFAULT 0,"
    " gen INTEGER NOT NULL DEFAULT 0,"
    " attached INTEGER NOT NULL DEFAULT 0,"
    " attach_src TEXT NOT NULL DEFAULT '',"
    " ns_dev INTEGER NOT NULL DEFAULT 0,"
    " ns_ino INTEGER NOT NULL DEFAULT 0,"
    " prior INTEGER NOT NULL DEFAULT 0);"
    /* Named counters; "next_gen" is the first generation never given. */
    "CREATE TABLE IF NOT EXISTS counters ("
    " name TEXT PRIMARY KEY NOT NULL,"
    " value INTEGER NOT NULL);";

/* Columns added since the first schema, each with the default a row
 * written before it means: gen 0 (given one when adopted), and not
 * attached. */
static const struct {
	const char	*name, *decl;
} added_columns[] = {
	{ "gen", "gen INTEGER NOT NULL DEFAULT 0" },
	{ "attached", "attached INTEGER NOT NULL DEFAULT 0" },
	{ "attach_src", "attach_src TEXT NOT NULL DEFAULT ''" },
	{ "ns_dev", "ns_dev INTEGER NOT NULL DEFAULT 0" },
	{ "ns_ino", "ns_ino INTEGER NOT NULL DEFAULT 0" },
	{ "prior", "prior INTEGER NOT NULL DEFAULT 0" },
};

static int
add_columns(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	char sql[128];
	size_t i;

	for (i = 0; i < sizeof(added_columns) / sizeof(added_columns[0]);
	    i++) {
		snprintf(sql, sizeof(sql), "SELECT %s FROM sandboxes LIMIT 0",
		    added_columns[i].name);
		if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
			sqlite3_finalize(st);
			continue;
		}
		snprintf(sql, sizeof(sql), "ALTER TABLE sandboxes ADD COLUMN "
		    "%s;", added_columns[i].decl);
		if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
			return -1;
	}
	return 0;
}

static void
db_err(sqlite3 *db, char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "state database: %s: %s", what,
	    db != NULL ? sqlite3_errmsg(db) : "out of memory");
}

struct sqlite3 *
sbx_db_open(const char *path, char *err, size_t errlen)
{
	sqlite3 *db = NULL;
	char *msg = NULL;
	int fd;

	/* Create the file ourselves so it is never readable by others,
	 * not even for an instant: it holds the bearer tokens. O_NOFOLLOW:
	 * a symlink planted there must not redirect them. */
	if ((fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
	    0600)) == -1) {
		snprintf(err, errlen, "state database %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	if (fchmod(fd, 0600) == -1) {
		snprintf(err, errlen, "state database %s: chmod: %s", path,
		    strerror(errno));
		close(fd);
		return NULL;
	}
	close(fd);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
		db_err(db, err, errlen, path);
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, 2000);
	if (sqlite3_exec(db, "PRAGMA synchronous=FULL;", NULL, NULL,
	    &msg) != SQLITE_OK || sqlite3_exec(db, schema, NULL, NULL,
	    &msg) != SQLITE_OK || add_columns(db) == -1) {
		snprintf(err, errlen, "state database %s: %s", path,
		    msg != NULL ? msg : "schema");
		sqlite3_free(msg);
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

void
sbx_db_close(struct sqlite3 *db)
{
	if (db != NULL)
		sqlite3_close(db);
}

int
sbx_db_insert(struct sqlite3 *db, const struct sbx_rec *r, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(db, "INSERT INTO sandboxes (id, policy, "
	    "subject, labels, idx, address, host_address, token, created, "
	    "expires, tainted, gen, attached, attach_src, ns_dev, ns_ino, "
	    "prior) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st,
	    NULL) != SQLITE_OK) {
		db_err(db, err, errlen, "insert");
		return -1;
	}
	sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->policy, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, r->subject, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, r->labels, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, r->index);
	sqlite3_bind_text(st, 6, r->addr, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, r->host_addr, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, r->token, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 9, r->created);
	sqlite3_bind_int64(st, 10, r->expires);
	sqlite3_bind_int(st, 11, r->tainted);
	sqlite3_bind_int64(st, 12, r->gen);
	sqlite3_bind_int(st, 13, r->attached);
	sqlite3_bind_text(st, 14, r->attach_src, -1, SQLITE_STATIC);
	/* Device and inode numbers as SQLite's signed 64 bits, bit for bit. */
	sqlite3_bind_int64(st, 15, (sqlite3_int64)r->ns_dev);
	sqlite3_bind_int64(st, 16, (sqlite3_int64)r->ns_ino);
	sqlite3_bind_int64(st, 17, r->prior);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		db_err(db, err, errlen, "insert");
		errno = (rc == SQLITE_CONSTRAINT) ? EEXIST : EIO;
		sqlite3_finalize(st);
		return -1;
	}
	sqlite3_finalize(st);
	return 0;
}

/* Runs sql with ?1 = id and, when idx >= 0, ?2 = idx; "what" names the
 * step in the error text. */
static int
exec_id(struct sqlite3 *db, const char *sql, const char *id, int64_t idx,
    const char *what, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		db_err(db, err, errlen, what);
		errno = EIO;
		return -1;
	}
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	if (idx >= 0)
		sqlite3_bind_int64(st, 2, idx);
	if (sqlite3_step(st) != SQLITE_DONE) {
		db_err(db, err, errlen, what);
		sqlite3_finalize(st);
		errno = EIO;
		return -1;
	}
	sqlite3_finalize(st);
	return 0;
}

int
sbx_db_delete(struct sqlite3 *db, const char *id, char *err, size_t errlen)
{
	return exec_id(db, "DELETE FROM sandboxes WHERE id = ?", id, -1,
	    "update", err, errlen);
}

int
sbx_db_purge(struct sqlite3 *db, const char *id, uint32_t index, char *err,
    size_t errlen)
{
	return exec_id(db, "DELETE FROM sandboxes WHERE id = ?1 OR idx = ?2", id,
	    index, "purge", err, errlen);
}

int
sbx_db_set_tainted(struct sqlite3 *db, const char *id, char *err,
    size_t errlen)
{
	return exec_id(db, "UPDATE sandboxes SET tainted = 1 WHERE id = ?",
	    id, -1, "update", err, errlen);
}

int
sbx_db_set_gen(struct sqlite3 *db, const char *id, uint32_t gen, char *err,
    size_t errlen)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, "UPDATE sandboxes SET gen = ?1 WHERE "
	    "id = ?2", -1, &st, NULL) != SQLITE_OK) {
		db_err(db, err, errlen, "generation");
		errno = EIO;
		return -1;
	}
	sqlite3_bind_int64(st, 1, gen);
	sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE) {
		db_err(db, err, errlen, "generation");
		sqlite3_finalize(st);
		errno = EIO;
		return -1;
	}
	sqlite3_finalize(st);
	return 0;
}

/* The integer that sql (one row, one column) gives; dflt when none. */
static int
query_int(sqlite3 *db, const char *sql, sqlite3_int64 dflt,
    sqlite3_int64 *out)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	rc = sqlite3_step(st);
	*out = dflt;
	if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER)
		*out = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

int
sbx_db_gen_reserve(struct sqlite3 *db, uint32_t n, uint32_t *first,
    uint32_t *got, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	sqlite3_int64 next, above, end;

	if (sqlite3_exec(db, "BEGIN IMMEDIATE;", NULL, NULL, NULL) !=
	    SQLITE_OK) {
		db_err(db, err, errlen, "generation");
		errno = EIO;
		return -1;
	}
	/* Above every row too: a counter row lost or rolled back (a copy
	 * of an old database) must not hand out a generation in use. */
	if (query_int(db, "SELECT value FROM counters WHERE name = "
	    "'next_gen'", 1, &next) == -1 || query_int(db, "SELECT "
	    "MAX(gen) FROM sandboxes", 0, &above) == -1)
		goto fail;
	if (next < above + 1)
		next = above + 1;
	if (next < 1)
		next = 1;
	end = next + n;
	if (end > (sqlite3_int64)UINT32_MAX + 1)
		end = (sqlite3_int64)UINT32_MAX + 1;
	if (n == 0 || end <= next) {
		(void)sqlite3_exec(db, "ROLLBACK;", NULL, NULL, NULL);
		snprintf(err, errlen, "state database: no sandbox generation "
		    "left");
		errno = ERANGE;
		return -1;
	}
	if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO counters (name, "
	    "value) VALUES ('next_gen', ?)", -1, &st, NULL) != SQLITE_OK)
		goto fail;
	sqlite3_bind_int64(st, 1, end);
	if (sqlite3_step(st) != SQLITE_DONE) {
		sqlite3_finalize(st);
		goto fail;
	}
	sqlite3_finalize(st);
	if (sqlite3_exec(db, "COMMIT;", NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	*first = (uint32_t)next;
	*got = (uint32_t)(end - next);
	return 0;
fail:
	db_err(db, err, errlen, "generation");
	(void)sqlite3_exec(db, "ROLLBACK;", NULL, NULL, NULL);
	errno = EIO;
	return -1;
}

/* Copies column i as text into dst; 0 if it fits (and is text), else -1. */
static int
col_text(sqlite3_stmt *st, int i, char *dst, size_t len)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	int n = sqlite3_column_bytes(st, i);

	dst[0] = '\0';
	if (t == NULL || sqlite3_column_type(st, i) != SQLITE_TEXT ||
	    n < 0 || (size_t)n >= len || strlen((const char *)t) != (size_t)n)
		return -1;
	memcpy(dst, t, (size_t)n + 1);
	return 0;
}

int
sbx_db_load(struct sqlite3 *db, void (*cb)(const struct sbx_rec *, int,
    void *), void *arg, char *err, size_t errlen)
{
	struct sbx_rec r;
	sqlite3_stmt *st = NULL;
	sqlite3_int64 idx, gen;
	int rc, n = 0, bad;

	if (sqlite3_prepare_v2(db, "SELECT id, policy, subject, labels, idx, "
	    "address, host_address, token, created, expires, tainted, gen, "
	    "attached, attach_src, ns_dev, ns_ino, prior "
	    "FROM sandboxes ORDER BY idx", -1, &st, NULL) != SQLITE_OK) {
		db_err(db, err, errlen, "load");
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		memset(&r, 0, sizeof(r));
		/* The id first: a bad row can only be removed by its id. */
		bad = col_text(st, 0, r.id, sizeof(r.id));
		bad |= col_text(st, 1, r.policy, sizeof(r.policy));
		bad |= col_text(st, 2, r.subject, sizeof(r.subject));
		bad |= col_text(st, 3, r.labels, sizeof(r.labels));
		idx = sqlite3_column_int64(st, 4);
		if (sqlite3_column_type(st, 4) != SQLITE_INTEGER || idx < 0 ||
		    idx >= SBX_SLOTS_MAX)
			bad = -1;
		else
			r.index = (uint32_t)idx;
		bad |= col_text(st, 5, r.addr, sizeof(r.addr));
		bad |= col_text(st, 6, r.host_addr, sizeof(r.host_addr));
		bad |= col_text(st, 7, r.token, sizeof(r.token));
		r.created = sqlite3_column_int64(st, 8);
		r.expires = sqlite3_column_int64(st, 9);
		r.tainted = sqlite3_column_int(st, 10) != 0;
		gen = sqlite3_column_int64(st, 11);
		if (sqlite3_column_type(st, 11) != SQLITE_INTEGER || gen < 0 ||
		    gen > UINT32_MAX)
			bad = -1;
		else
			r.gen = (uint32_t)gen;
		r.attached = sqlite3_column_int(st, 12);
		bad |= col_text(st, 13, r.attach_src, sizeof(r.attach_src));
		r.ns_dev = (uint64_t)sqlite3_column_int64(st, 14);
		r.ns_ino = (uint64_t)sqlite3_column_int64(st, 15);
		gen = sqlite3_column_int64(st, 16);
		if (gen < 0 || gen > UINT32_MAX)
			bad = -1;
		else
			r.prior = (uint32_t)gen;
		cb(&r, bad != 0, arg);
		n++;
	}
	if (rc != SQLITE_DONE) {
		db_err(db, err, errlen, "load");
		sqlite3_finalize(st);
		return -1;
	}
	sqlite3_finalize(st);
	return n;
}

int
sbx_counter_get(struct sbx *m, const char *name, uint64_t *v)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*v = 0;
	if (m == NULL || m->db == NULL || sqlite3_prepare_v2(m->db,
	    "SELECT value FROM counters WHERE name = ?", -1, &st, NULL) !=
	    SQLITE_OK) {
		errno = EIO;
		return -1;
	}
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW &&
	    sqlite3_column_int64(st, 0) > 0)
		*v = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		errno = EIO;
		return -1;
	}
	return 0;
}

int
sbx_counter_set(struct sbx *m, const char *name, uint64_t v)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (m == NULL || m->db == NULL || v > INT64_MAX ||
	    sqlite3_prepare_v2(m->db, "INSERT OR REPLACE INTO counters (name, "
	    "value) VALUES (?, ?)", -1, &st, NULL) != SQLITE_OK) {
		errno = EIO;
		return -1;
	}
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)v);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		errno = EIO;
		return -1;
	}
	return 0;
}
