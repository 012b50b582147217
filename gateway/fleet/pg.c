/*
 * pg.c: how the fleet module speaks to PostgreSQL. Everything goes through
 * libpq's asynchronous calls and poll(2), so that a connection and every
 * statement end by the configured deadline, whatever the network or the
 * server does: a slow or unreachable database is an error the caller sees
 * in time, never a thread stuck in a blocking read. The versioned schema
 * lives here too, with its migrations, as does the pure reading of the
 * version row (fleet_schema_plan_of, table-tested).
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/fleet/fleet.h"

#define PW_MAX		1024
/* Held for the migration's transaction: hosts that start together
 * migrate one after the other, the later ones finding nothing to do. */
#define MIGRATE_LOCK	"7234017283807667300"

/*
 * The migrations, in order: steps[v] takes a schema from version v to
 * v + 1, and records v + 1 in schema_version (one row per version reached, so
 * the table is also the schema's history). The witness table refuses
 * UPDATE, DELETE and TRUNCATE by trigger, whoever asks: the daemon's role
 * has no such privilege anyway (README: the GRANTs), and the trigger stops
 * an owner's slip too (dropping it takes a deliberate DDL statement).
 */
static const char *const steps[FLEET_SCHEMA_VERSION] = {
	"CREATE TABLE IF NOT EXISTS schema_version ("
	" version integer NOT NULL CHECK (version > 0),"
	" migrated_at timestamptz NOT NULL DEFAULT now());"
	"CREATE TABLE checkpoints ("
	" host text NOT NULL CHECK (length(host) BETWEEN 1 AND 63),"
	" size bigint NOT NULL CHECK (size > 0),"
	" origin text NOT NULL,"
	" root bytea NOT NULL CHECK (length(root) = 32),"
	" signature text NOT NULL,"
	" note text NOT NULL,"
	" signed_at timestamptz NOT NULL,"
	" witnessed_at timestamptz NOT NULL DEFAULT now(),"
	" PRIMARY KEY (host, size));"
	"CREATE FUNCTION checkpoints_append_only() RETURNS trigger"
	" LANGUAGE plpgsql AS $$ BEGIN"
	" RAISE EXCEPTION 'checkpoints is append-only: % refused', TG_OP"
	" USING ERRCODE = 'insufficient_privilege'; END $$;"
	"CREATE TRIGGER checkpoints_no_rewrite BEFORE UPDATE OR DELETE"
	" ON checkpoints FOR EACH ROW"
	" EXECUTE FUNCTION checkpoints_append_only();"
	"CREATE TRIGGER checkpoints_no_truncate BEFORE TRUNCATE"
	" ON checkpoints FOR EACH STATEMENT"
	" EXECUTE FUNCTION checkpoints_append_only();"
	"REVOKE ALL ON checkpoints FROM PUBLIC;"
	"REVOKE ALL ON schema_version FROM PUBLIC;"
	"INSERT INTO schema_version (version) VALUES (1);",
	/* 2: the shared budgets (fleet/budget.c), one row per budget and
	 * owner, holding the window it counts. */
	"CREATE TABLE budgets ("
	" scope text NOT NULL CHECK (scope IN ('subject', 'policy')),"
	" owner text NOT NULL,"
	" name text NOT NULL,"
	" window_s bigint NOT NULL CHECK (window_s >= 0),"
	" window_start bigint NOT NULL CHECK (window_start >= 0),"
	" calls bigint NOT NULL CHECK (calls >= 0),"
	" cost bigint NOT NULL CHECK (cost >= 0),"
	" result_bytes bigint NOT NULL CHECK (result_bytes >= 0),"
	" updated_at timestamptz NOT NULL DEFAULT now(),"
	" PRIMARY KEY (scope, owner, name));"
	"REVOKE ALL ON budgets FROM PUBLIC;"
	"INSERT INTO schema_version (version) VALUES (2);",
	/* 3: the approval queue (fleet/aq.c), one row per call that waited
	 * for a person, kept when closed as the queue's history. */
	"CREATE TABLE approvals ("
	" id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{32}$'),"
	" host text NOT NULL,"
	" sandbox text NOT NULL, subject text NOT NULL,"
	" server text NOT NULL, tool text NOT NULL,"
	" kind text NOT NULL CHECK (kind IN ('tool', 'resource', 'prompt')),"
	" arguments text, rule text,"
	" created_at timestamptz NOT NULL DEFAULT now(),"
	" expires_at timestamptz NOT NULL,"
	" decision text CHECK (decision IN ('approved', 'denied')),"
	" approver text, approver_uid bigint, approver_host text,"
	" approver_note text, reason text, decided_at timestamptz,"
	" closed_at timestamptz,"
	" closed text CHECK (closed IN ('taken', 'timeout', 'cancelled',"
	"  'gone')),"
	" CHECK ((decision IS NULL) = (decided_at IS NULL)),"
	" CHECK ((closed IS NULL) = (closed_at IS NULL)));"
	"CREATE INDEX approvals_open ON approvals (host)"
	" WHERE closed_at IS NULL;"
	"REVOKE ALL ON approvals FROM PUBLIC;"
	"INSERT INTO schema_version (version) VALUES (3);",
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

/* libpq's messages end in a newline and may span lines ("connection to
 * server ... failed: FATAL: ..."): one line for our logs. */
static void
oneline(char *out, size_t len, const char *msg)
{
	size_t i, j = 0;

	if (len == 0)
		return;
	for (i = 0; msg != NULL && msg[i] != '\0' && j + 1 < len; i++) {
		if (msg[i] == '\n') {
			if (msg[i + 1] == '\0')
				break;
			if (j + 2 < len) {
				out[j++] = ';';
				out[j++] = ' ';
			}
		} else
			out[j++] = msg[i];
	}
	out[j] = '\0';
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 1 when the connection's socket is ready, 0 past end, -1 on error. */
static int
wait_sock(PGconn *c, int forwrite, int64_t end)
{
	struct pollfd pfd;
	int64_t left;
	int r;

	for (;;) {
		if ((pfd.fd = PQsocket(c)) < 0) {
			errno = EPIPE;
			return -1;
		}
		pfd.events = forwrite ? POLLOUT : POLLIN;
		pfd.revents = 0;
		if ((left = end - now_ms()) <= 0)
			return 0;
		r = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (r > 0)
			return 1;
		if (r == -1 && errno != EINTR)
			return -1;
	}
}

/*
 * The server itself ends a statement of this connection at three quarters
 * of the deadline. A statement the caller gave up on would otherwise go
 * on in the server (waiting on a lock, say) and could still commit: a
 * reservation counted for a call that was refused. Ending it a quarter
 * early leaves the answer time to arrive before the caller stops waiting.
 */
static int
server_deadline(PGconn *c, unsigned deadline_ms, int64_t end, char *err,
    size_t errlen)
{
	char sql[64];
	int64_t left = end - now_ms();
	PGresult *r;

	snprintf(sql, sizeof(sql), "SET statement_timeout = %u",
	    deadline_ms > 4 ? deadline_ms - deadline_ms / 4 : 1);
	if (left < 1)
		left = 1;
	r = fleet_pg_exec(c, sql, 0, NULL, (unsigned)left, err, errlen);
	PQclear(r);
	return r == NULL ? -1 : 0;
}

int
fleet_pg_usable(PGconn *c)
{
	PGTransactionStatusType t;

	if (c == NULL || PQstatus(c) != CONNECTION_OK)
		return 0;
	t = PQtransactionStatus(c);
	return t != PQTRANS_ACTIVE && t != PQTRANS_UNKNOWN;
}

PGconn *
fleet_pg_connect(const char *conninfo, const char *password,
    unsigned deadline_ms, char *err, size_t errlen)
{
	const char *const kw[] = { "dbname", "password", NULL };
	const char *vals[] = { conninfo, password, NULL };
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	int64_t end = now_ms() + deadline_ms;
	char line[300];
	PGconn *c;
	int r;

	/* expand_dbname: conninfo is the whole connection string; the
	 * password given beside it comes later and wins. */
	if ((c = PQconnectStartParams(kw, vals, 1)) == NULL) {
		seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	if (PQstatus(c) == CONNECTION_BAD) {
		oneline(line, sizeof(line), PQerrorMessage(c));
		seterr(err, errlen, "%s", line);
		PQfinish(c);
		errno = ECONNREFUSED;
		return NULL;
	}
	while (st != PGRES_POLLING_OK) {
		if (st == PGRES_POLLING_FAILED) {
			oneline(line, sizeof(line), PQerrorMessage(c));
			seterr(err, errlen, "%s", line);
			PQfinish(c);
			errno = ECONNREFUSED;
			return NULL;
		}
		if ((r = wait_sock(c, st == PGRES_POLLING_WRITING, end)) != 1) {
			seterr(err, errlen, r == 0 ? "no connection within "
			    "the deadline (%u ms)" : "connecting: %s",
			    deadline_ms, strerror(errno));
			PQfinish(c);
			errno = r == 0 ? ETIMEDOUT : ECONNREFUSED;
			return NULL;
		}
		st = PQconnectPoll(c);
	}
	if (PQsetnonblocking(c, 1) == -1) {
		seterr(err, errlen, "non-blocking mode refused");
		PQfinish(c);
		errno = EPIPE;
		return NULL;
	}
	if (server_deadline(c, deadline_ms, end, err, errlen) == -1) {
		PQfinish(c);
		return NULL;
	}
	return c;
}

PGconn *
fleet_pg_connect_env(const char *conninfo, unsigned deadline_ms, char *err,
    size_t errlen)
{
	PGconn *c;
	char *pw;

	errno = 0;
	if ((pw = fleet_password_read(NULL, err, errlen)) == NULL &&
	    errno != 0)
		return NULL;
	c = fleet_pg_connect(conninfo, pw, deadline_ms, err, errlen);
	if (pw != NULL) {
		explicit_bzero(pw, strlen(pw));
		free(pw);
	}
	return c;
}

PGresult *
fleet_pg_exec(PGconn *c, const char *sql, int n, const char *const *vals,
    unsigned deadline_ms, char *err, size_t errlen)
{
	int64_t end = now_ms() + deadline_ms;
	PGresult *res, *keep = NULL, *bad = NULL;
	char line[300];
	int r, sent;

	/* Without parameters the simple protocol: a migration is several
	 * statements in one string. */
	sent = n == 0 ? PQsendQuery(c, sql) :
	    PQsendQueryParams(c, sql, n, NULL, vals, NULL, NULL, 0);
	if (!sent) {
		oneline(line, sizeof(line), PQerrorMessage(c));
		seterr(err, errlen, "%s", line);
		errno = EPIPE;
		return NULL;
	}
	while ((r = PQflush(c)) == 1)
		if ((r = wait_sock(c, 1, end)) != 1)
			goto lost;
	if (r == -1)
		goto lost;
	for (;;) {
		while (PQisBusy(c)) {
			if ((r = wait_sock(c, 0, end)) != 1)
				goto lost;
			if (!PQconsumeInput(c)) {
				r = -1;
				goto lost;
			}
		}
		if ((res = PQgetResult(c)) == NULL)
			break;
		switch (PQresultStatus(res)) {
		case PGRES_COMMAND_OK:
		case PGRES_TUPLES_OK:
			PQclear(keep);
			keep = res;
			break;
		default:
			if (bad == NULL)
				bad = res;
			else
				PQclear(res);
			break;
		}
	}
	if (bad != NULL) {
		oneline(line, sizeof(line), PQresultErrorMessage(bad));
		seterr(err, errlen, "%s", line);
		r = PQstatus(c) == CONNECTION_OK;
		PQclear(bad);
		PQclear(keep);
		errno = r ? EIO : EPIPE;
		return NULL;
	}
	if (keep == NULL) {
		seterr(err, errlen, "no result");
		errno = EIO;
	}
	return keep;
lost:
	PQclear(keep);
	PQclear(bad);
	if (r == 0) {
		seterr(err, errlen, "no answer within the deadline (%u ms)",
		    deadline_ms);
		errno = ETIMEDOUT;
	} else {
		oneline(line, sizeof(line), PQerrorMessage(c));
		seterr(err, errlen, "connection lost: %s", line[0] ? line :
		    strerror(errno));
		errno = EPIPE;
	}
	return NULL;
}

enum fleet_schema_plan
fleet_schema_plan_of(const char *text, int known, int *have)
{
	const char *p;
	long v = 0;

	*have = -1;
	if (text == NULL) {
		*have = 0;
		return known > 0 ? FLEET_SCHEMA_MIGRATE : FLEET_SCHEMA_CURRENT;
	}
	if (text[0] < '1' || text[0] > '9')
		return FLEET_SCHEMA_BAD;
	for (p = text; *p != '\0'; p++) {
		if (*p < '0' || *p > '9' || v > (INT_MAX - (*p - '0')) / 10)
			return FLEET_SCHEMA_BAD;
		v = v * 10 + (*p - '0');
	}
	*have = (int)v;
	if (v > known)
		return FLEET_SCHEMA_NEWER;
	return v == known ? FLEET_SCHEMA_CURRENT : FLEET_SCHEMA_MIGRATE;
}

/* The schema's version as text (NULL: no table or no row) into *text
 * (malloc'd). 0, or -1 with errno and err. */
static int
read_version(PGconn *c, unsigned dl, char **text, char *err, size_t errlen)
{
	PGresult *r;
	int exists;

	*text = NULL;
	if ((r = fleet_pg_exec(c, "SELECT to_regclass('schema_version') IS "
	    "NOT NULL", 0, NULL, dl, err, errlen)) == NULL)
		return -1;
	exists = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	PQclear(r);
	if (!exists)
		return 0;
	if ((r = fleet_pg_exec(c, "SELECT max(version) FROM schema_version",
	    0, NULL, dl, err, errlen)) == NULL)
		return -1;
	if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) &&
	    (*text = strdup(PQgetvalue(r, 0, 0))) == NULL) {
		PQclear(r);
		seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	PQclear(r);
	return 0;
}

static int
plan(PGconn *c, unsigned dl, int *have, enum fleet_schema_plan *p,
    char *err, size_t errlen)
{
	char *text;

	if (read_version(c, dl, &text, err, errlen) == -1)
		return -1;
	*p = fleet_schema_plan_of(text, FLEET_SCHEMA_VERSION, have);
	if (*p == FLEET_SCHEMA_BAD) {
		seterr(err, errlen, "schema_version holds \"%s\", not a "
		    "version", text);
		free(text);
		errno = EPROTO;
		return -1;
	}
	free(text);
	if (*p == FLEET_SCHEMA_NEWER) {
		seterr(err, errlen, "the database schema is at version %d, "
		    "newer than this sluiced knows (%d): upgrade sluiced, "
		    "never the other way round", *have, FLEET_SCHEMA_VERSION);
		errno = EPROTO;
		return -1;
	}
	return 0;
}

static void
rollback(PGconn *c, unsigned dl)
{
	PGresult *r = fleet_pg_exec(c, "ROLLBACK", 0, NULL, dl, NULL, 0);

	PQclear(r);
}

int
fleet_schema_ensure(PGconn *c, unsigned dl, int *version, char *err,
    size_t errlen)
{
	enum fleet_schema_plan p;
	char e[300], line[300];
	PGresult *r;
	int have, v;

	if (plan(c, dl, &have, &p, err, errlen) == -1)
		return -1;
	if (p == FLEET_SCHEMA_CURRENT) {
		*version = have;
		return 0;
	}
	if ((r = fleet_pg_exec(c, "BEGIN; SELECT pg_advisory_xact_lock("
	    MIGRATE_LOCK ")", 0, NULL, dl, err, errlen)) == NULL)
		return -1;
	PQclear(r);
	/* Again under the lock: another host may have migrated meanwhile. */
	if (plan(c, dl, &have, &p, err, errlen) == -1) {
		v = errno;
		rollback(c, dl);
		errno = v;
		return -1;
	}
	/* steps[v] takes version v to v + 1. */
	for (v = have < 0 ? 0 : have; p == FLEET_SCHEMA_MIGRATE &&
	    v < FLEET_SCHEMA_VERSION; v++) {
		if ((r = fleet_pg_exec(c, steps[v], 0, NULL, dl, e,
		    sizeof(e))) == NULL) {
			int eno = errno;

			/* The role's privileges decide what may be fixed by
			 * whom: say so rather than only quote the server. */
			oneline(line, sizeof(line), e);
			if (eno == EIO && strstr(line, "permission denied")) {
				seterr(err, errlen, "the database schema is at "
				    "version %d, this sluiced needs %d, and this "
				    "role may not migrate it (%s): run `sluice "
				    "fleet migrate` as the schema's owner", have,
				    FLEET_SCHEMA_VERSION, line);
				eno = EACCES;
			} else
				seterr(err, errlen, "migrating the schema to "
				    "version %d: %s", v + 1, line);
			rollback(c, dl);
			errno = eno;
			return -1;
		}
		PQclear(r);
	}
	if ((r = fleet_pg_exec(c, "COMMIT", 0, NULL, dl, err, errlen)) ==
	    NULL)
		return -1;
	PQclear(r);
	*version = FLEET_SCHEMA_VERSION;
	return 0;
}

char *
fleet_password_read(const char *path, char *err, size_t errlen)
{
	char buf[PW_MAX + 2], *nl, *pw;
	const char *env;
	struct stat sb;
	ssize_t n;
	size_t len = 0;
	int fd;

	if (path == NULL) {
		env = getenv("SLUICE_PG_PASSWORD");
		if (env == NULL || env[0] == '\0') {
			errno = 0;
			return NULL;
		}
		if ((pw = strdup(env)) == NULL)
			seterr(err, errlen, "out of memory");
		return pw;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		seterr(err, errlen, "password_file %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode) ||
	    sb.st_uid != geteuid() || (sb.st_mode & 077) != 0 ||
	    sb.st_size > PW_MAX + 1) {
		seterr(err, errlen, "password_file %s: not a small regular "
		    "file of ours without group or other access (chmod 0600)",
		    path);
		close(fd);
		errno = EACCES;
		return NULL;
	}
	while (len < sizeof(buf) - 1 &&
	    (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	if ((nl = strchr(buf, '\n')) != NULL)
		*nl = '\0';
	if (buf[0] == '\0') {
		seterr(err, errlen, "password_file %s is empty", path);
		errno = EINVAL;
		return NULL;
	}
	if ((pw = strdup(buf)) == NULL)
		seterr(err, errlen, "out of memory");
	explicit_bzero(buf, sizeof(buf));
	return pw;
}

char *
fleet_pg_mask(const char *conninfo)
{
	PQconninfoOption *opts, *o;
	char *out = NULL;
	size_t len = 0;
	FILE *f;
	int first = 1;

	if ((opts = PQconninfoParse(conninfo, NULL)) == NULL)
		return strdup("(unparsable conninfo)");
	if ((f = open_memstream(&out, &len)) == NULL) {
		PQconninfoFree(opts);
		return NULL;
	}
	for (o = opts; o->keyword != NULL; o++)
		if (o->val != NULL && o->val[0] != '\0' &&
		    strcmp(o->keyword, "password") != 0) {
			fprintf(f, "%s%s=%s", first ? "" : " ", o->keyword,
			    o->val);
			first = 0;
		}
	fclose(f);
	PQconninfoFree(opts);
	if (out != NULL && out[0] == '\0') {
		free(out);
		out = strdup("(defaults)");
	}
	return out;
}
