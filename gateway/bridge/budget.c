/*
 * budget: the bridge's own SQLite database, <state_dir>/bridge.db, holding
 * the cumulative budget counters and the approved tool pins. It exists so
 * that a restart of the daemon neither resets a budget nor re-trusts a
 * drifted tool. Reservations happen inside one IMMEDIATE transaction
 * (read the counters, decide, add) before a call is forwarded, so that
 * concurrent calls — in this loop or in another process on the same file —
 * can never overrun a limit. synchronous=FULL: a reservation that was
 * acted on survives a crash.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/bridge/br_int.h"

static const char schema[] =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=FULL;"
    "CREATE TABLE IF NOT EXISTS br_budget ("
    "  scope INTEGER NOT NULL, owner TEXT NOT NULL, name TEXT NOT NULL,"
    "  window_s INTEGER NOT NULL, window_start INTEGER NOT NULL,"
    "  calls INTEGER NOT NULL, cost INTEGER NOT NULL,"
    "  result_bytes INTEGER NOT NULL,"
    "  PRIMARY KEY (scope, owner, name));"
    "CREATE TABLE IF NOT EXISTS br_pins ("
    "  server TEXT NOT NULL, tool TEXT NOT NULL, pin TEXT NOT NULL,"
    "  PRIMARY KEY (server, tool));";

/*
 * The bridge process opens its database as root and then gives up every
 * right to the state directory (it runs as its own user, and the directory
 * is root's). From then on SQLite must never create a file: no rollback
 * journal per transaction, no -shm, no temporary file, no directory sync.
 * WAL in exclusive locking mode does that (the write-ahead log is opened
 * once and kept, its index lives in the heap), kept on close so that the
 * next process finds it, with a first write now so that the log exists
 * and the directory has been synced before the rights go.
 */
static int
mode_is_wal(void *arg, int n, char **v, char **names)
{
	(void)names;
	*(int *)arg = n == 1 && v[0] != NULL && strcmp(v[0], "wal") == 0;
	return 0;
}

static int
db_exclusive(sqlite3 *db, char **emsg)
{
	int one = 1, wal = 0;

	if (sqlite3_exec(db, "PRAGMA locking_mode=EXCLUSIVE;"
	    "PRAGMA temp_store=MEMORY;", NULL, NULL, emsg) != SQLITE_OK ||
	    sqlite3_exec(db, "PRAGMA journal_mode=WAL;", mode_is_wal, &wal,
	    emsg) != SQLITE_OK || !wal ||
	    sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL,
	    &one) != SQLITE_OK)
		return -1;
	return 0;
}

static const char warm[] =
    "CREATE TABLE IF NOT EXISTS br_meta ("
    "  k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
    "INSERT INTO br_meta VALUES ('opened', 1) ON CONFLICT (k) DO UPDATE "
    "  SET v = v + 1;";

int
br_db_open(struct br *br, const char *dir, char *err, size_t errlen)
{
	char path[4096];
	char *emsg = NULL;
	int fd;

	if (dir == NULL) {
		snprintf(err, errlen, "bridge: no state directory");
		errno = EINVAL;
		return -1;
	}
	if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
		snprintf(err, errlen, "bridge: %s: %s", dir, strerror(errno));
		return -1;
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/bridge.db", dir) >=
	    sizeof(path)) {
		snprintf(err, errlen, "bridge: state directory path too long");
		errno = ENAMETOOLONG;
		return -1;
	}
	/* Made by us, 0600 from the first instant (SQLite would use 0644,
	 * and its -journal copies the database's mode): budgets and
	 * accepted pins are nobody else's to read. A file left wider by an
	 * older version is narrowed; a symlink planted there is refused. */
	if ((fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
	    0600)) == -1 || fchmod(fd, 0600) == -1) {
		snprintf(err, errlen, "bridge: %s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	close(fd);
	if (sqlite3_open_v2(path, &br->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
	    sqlite3_busy_timeout(br->db, 2000) != SQLITE_OK ||
	    (br->c.db_exclusive && db_exclusive(br->db, &emsg) == -1) ||
	    sqlite3_exec(br->db, schema, NULL, NULL, &emsg) != SQLITE_OK ||
	    (br->c.db_exclusive && sqlite3_exec(br->db, warm, NULL, NULL,
	    &emsg) != SQLITE_OK)) {
		snprintf(err, errlen, "bridge: %s: %s", path,
		    emsg != NULL ? emsg : br->db != NULL ?
		    sqlite3_errmsg(br->db) : "cannot open");
		sqlite3_free(emsg);
		sqlite3_close(br->db);
		br->db = NULL;
		errno = EIO;
		return -1;
	}
	return 0;
}

void
br_db_close(struct br *br)
{
	if (br->db != NULL)
		sqlite3_close(br->db);
	br->db = NULL;
}

int
br_db_begin(struct br *br)
{
	return sqlite3_exec(br->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) ==
	    SQLITE_OK ? 0 : -1;
}

int
br_db_commit(struct br *br)
{
	if (sqlite3_exec(br->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
		return 0;
	br_db_rollback(br);
	return -1;
}

void
br_db_rollback(struct br *br)
{
	(void)sqlite3_exec(br->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Fixed windows aligned on multiples of window_s: the same for every
 * process and across restarts. */
static uint64_t
window_start(uint64_t window_s, uint64_t now_s)
{
	return window_s == 0 ? 0 : now_s - now_s % window_s;
}

int
br_budget_get(struct br *br, int scope, const char *owner, const char *name,
    uint64_t window_s, uint64_t now_s, struct pol_budget_use *use)
{
	sqlite3_stmt *st = NULL;
	int rc;

	memset(use, 0, sizeof(*use));
	use->name = name;
	if (sqlite3_prepare_v2(br->db, "SELECT window_s, window_start, calls,"
	    " cost, result_bytes FROM br_budget WHERE scope = ?1 AND"
	    " owner = ?2 AND name = ?3", -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int(st, 1, scope);
	sqlite3_bind_text(st, 2, owner, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		/* A row from another window (or another window length
		 * after a policy change) counts as empty. */
		if ((uint64_t)sqlite3_column_int64(st, 0) == window_s &&
		    (uint64_t)sqlite3_column_int64(st, 1) ==
		    window_start(window_s, now_s)) {
			use->calls = (uint64_t)sqlite3_column_int64(st, 2);
			use->cost = (uint64_t)sqlite3_column_int64(st, 3);
			use->result_bytes = (uint64_t)sqlite3_column_int64(st,
			    4);
		}
		rc = SQLITE_DONE;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

int
br_budget_add(struct br *br, int scope, const char *owner, const char *name,
    uint64_t window_s, uint64_t now_s, uint64_t calls, uint64_t cost,
    uint64_t bytes)
{
	struct pol_budget_use use;
	sqlite3_stmt *st = NULL;
	int rc;

	if (br_budget_get(br, scope, owner, name, window_s, now_s, &use) ==
	    -1)
		return -1;
	if (sqlite3_prepare_v2(br->db, "INSERT OR REPLACE INTO br_budget"
	    " (scope, owner, name, window_s, window_start, calls, cost,"
	    " result_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", -1, &st,
	    NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int(st, 1, scope);
	sqlite3_bind_text(st, 2, owner, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)window_s);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)window_start(window_s,
	    now_s));
	sqlite3_bind_int64(st, 6, (sqlite3_int64)(use.calls + calls));
	sqlite3_bind_int64(st, 7, (sqlite3_int64)(use.cost + cost));
	sqlite3_bind_int64(st, 8, (sqlite3_int64)(use.result_bytes + bytes));
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

int
br_pin_store(struct br *br, const char *server, const char *tool,
    const char *pin)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(br->db, "INSERT OR REPLACE INTO br_pins"
	    " (server, tool, pin) VALUES (?1, ?2, ?3)", -1, &st, NULL) !=
	    SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, server, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, tool, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, pin, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		errno = EIO;
		return -1;
	}
	return 0;
}

int
br_pin_delete(struct br *br, const char *server, const char *tool)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(br->db, "DELETE FROM br_pins WHERE server = ?1"
	    " AND tool = ?2", -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, server, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, tool, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		errno = EIO;
		return -1;
	}
	return 0;
}

json_t *
br_pin_load(struct br *br, const char *server)
{
	sqlite3_stmt *st = NULL;
	json_t *o;
	int rc;

	if ((o = json_object()) == NULL)
		return NULL;
	if (sqlite3_prepare_v2(br->db, "SELECT tool, pin FROM br_pins WHERE"
	    " server = ?1", -1, &st, NULL) != SQLITE_OK) {
		json_decref(o);
		return NULL;
	}
	sqlite3_bind_text(st, 1, server, -1, SQLITE_TRANSIENT);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		json_object_set_new(o, (const char *)sqlite3_column_text(st, 0),
		    json_string((const char *)sqlite3_column_text(st, 1)));
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		json_decref(o);
		return NULL;
	}
	return o;
}
