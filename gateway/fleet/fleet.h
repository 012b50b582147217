/*
 * fleet: the PostgreSQL database the hosts of a fleet share (config section
 * fleet:, README "Running a fleet"), as both the daemon and the CLI use it:
 * pg.c speaks to PostgreSQL (a connection and every statement bounded by a
 * deadline, the versioned schema and its migrations, the pure reading of
 * the version row), budget.c reserves the budgets hosts share, aq.c
 * holds the approval queue they share, wload.c
 * reads a host's witnessed checkpoints back for `sluice audit verify
 * --witness`. A library like audit/, linked by the CLI too: leaf
 * functions that return errors, no threads, no logging; the daemon's use
 * of it (the witness thread) is fleetd.h beside it.
 */
#ifndef SLUICE_GATEWAY_FLEET_FLEET_H
#define SLUICE_GATEWAY_FLEET_FLEET_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <libpq-fe.h>

/* The schema version this build creates and understands. */
#define FLEET_SCHEMA_VERSION	3

/* ---- PostgreSQL (fleet/pg.c) ---- */

/*
 * fleet_pg_connect: a connection for conninfo (key=value or URI; libpq's
 * own defaults and environment apply) with password (NULL: none given, so
 * libpq's PGPASSWORD or ~/.pgpass may still supply one), made within
 * deadline_ms. NULL with errno (ETIMEDOUT past the deadline, ECONNREFUSED
 * for any other refusal) and a one-line message in err naming what
 * failed (a wrong password reads as libpq and the server say it).
 * The connection's statement_timeout is three quarters of deadline_ms, so
 * that the server ends a statement its caller is about to give up on
 * rather than letting it commit later.
 */
PGconn		*fleet_pg_connect(const char *conninfo, const char *password,
		    unsigned deadline_ms, char *err, size_t errlen);
/*
 * fleet_pg_connect_env: fleet_pg_connect with the password a command line
 * tool has: SLUICE_PG_PASSWORD, else none (libpq's own sources). The
 * copy of the password is wiped before it returns.
 */
PGconn		*fleet_pg_connect_env(const char *conninfo,
		    unsigned deadline_ms, char *err, size_t errlen);
/*
 * fleet_pg_exec: run sql with n text parameters (vals, NULL for SQL NULL)
 * and wait for its result within deadline_ms. The result (PGRES_COMMAND_OK
 * or PGRES_TUPLES_OK; the caller PQclear()s it), or NULL with errno and err:
 * EIO for an error the server returned (the connection is still usable),
 * ETIMEDOUT or EPIPE when the connection is no longer usable (the caller
 * must PQfinish it).
 */
PGresult	*fleet_pg_exec(PGconn *c, const char *sql, int n,
		    const char *const *vals, unsigned deadline_ms, char *err,
		    size_t errlen);
/*
 * fleet_pg_usable: whether c can take the next statement: connected, and
 * not still busy with one whose deadline passed (fleet_pg_exec's
 * ETIMEDOUT leaves it so; such a connection must be PQfinish()ed). 0 for
 * NULL.
 */
int		 fleet_pg_usable(PGconn *c);

enum fleet_schema_plan {
	FLEET_SCHEMA_CURRENT = 0,	/* nothing to do */
	FLEET_SCHEMA_MIGRATE,		/* older (or none): migrate up */
	FLEET_SCHEMA_NEWER,		/* made by a newer sluiced: refuse */
	FLEET_SCHEMA_BAD,		/* the version row is not a version */
};
/*
 * fleet_schema_plan_of: what to do about a schema_version column read as
 * text (NULL: no row, or no table, i.e. version 0) against known. Pure;
 * *have gets the version read (0 for none, -1 when BAD).
 */
enum fleet_schema_plan fleet_schema_plan_of(const char *text, int known,
		    int *have);
/*
 * fleet_schema_ensure: bring the schema to FLEET_SCHEMA_VERSION: read it,
 * and when it is older migrate it in one transaction under an advisory
 * lock (hosts starting together migrate once). 0 with *version set, or -1
 * with errno and err: EPROTO when it is newer than this build knows (never
 * touched then), EACCES when a migration is needed and this role may not
 * make it (run `sluice fleet migrate` as the owner), else fleet_pg_exec's.
 */
int		 fleet_schema_ensure(PGconn *c, unsigned deadline_ms,
		    int *version, char *err, size_t errlen);
/*
 * fleet_password_read: the password for the daemon's role: the first line
 * of path when path is not NULL (a regular file, no group or other access
 * bits, at most 1 KiB), else SLUICE_PG_PASSWORD, else NULL with errno 0
 * (none: libpq's own sources may give one). malloc'd; NULL with errno and
 * err on failure.
 */
char		*fleet_password_read(const char *path, char *err, size_t errlen);
/* fleet_pg_mask: conninfo for messages (malloc'd; NULL on failure): the
 * parsed options other than password, so no secret reaches a log. */
char		*fleet_pg_mask(const char *conninfo);

/* ---- shared budgets (fleet/budget.c) ----
 *
 * A budget with scope subject or policy counts the calls of every host.
 * A reservation is one conditional upsert per budget: the row's counters
 * grow only WHERE the limits still allow it, evaluated by PostgreSQL on the
 * newest row under its lock, so concurrent hosts never overrun a limit and
 * nothing is read before it is written. Several budgets of one call are
 * reserved in one transaction, all or none. Windows are fixed, aligned on
 * multiples of window_s (wall clock seconds), so every host counts the
 * same window; a row never goes back to an older window, so a host whose
 * clock is behind counts into the newer one instead of resetting it.
 */
#define FLEET_RESV_MAX	8

enum fleet_scope { FLEET_SCOPE_SUBJECT = 1, FLEET_SCOPE_POLICY };

struct fleet_resv {
	enum fleet_scope scope;
	const char	*owner;		/* the subject, or the policy's name */
	const char	*name;		/* the budget's name */
	uint64_t	 window_s;	/* 0: the budget's lifetime */
	uint64_t	 calls, cost;	/* what this call adds */
	uint64_t	 limit_calls, limit_cost, limit_result_bytes; /* 0: none */
	/* Out (reserved only): the use of the window before this call, and
	 * the window it went into, which fleet_budget_settle needs. */
	uint64_t	 used_calls, used_cost, used_result_bytes;
	uint64_t	 window_at;
};

enum fleet_resv_outcome {
	FLEET_RESV_RESERVED = 0,	/* every budget reserved */
	FLEET_RESV_EXHAUSTED,		/* one is used up: nothing reserved */
	FLEET_RESV_UNAVAILABLE,		/* no answer in time, or an error:
					 * nothing known reserved; deny */
};

/* fleet_window_start: the start of the window of now_s (0 for window 0). */
uint64_t	 fleet_window_start(uint64_t window_s, uint64_t now_s);
/*
 * fleet_resv_read: the outcome of one upsert from its result: no row is a
 * used-up budget (the limits held the row back); one row of the counters
 * after the add (calls, cost, result_bytes, window_start as text) fills
 * r's used_* with what was there before, and window_at. A row that cannot be the counters (not numbers,
 * smaller than the add) is UNAVAILABLE: nothing is assumed. Pure.
 */
enum fleet_resv_outcome fleet_resv_read(int ntuples, const char *calls,
		    const char *cost, const char *bytes, const char *wstart,
		    struct fleet_resv *r);
/*
 * fleet_budget_reserve: reserve r[0..n) (n at most FLEET_RESV_MAX) for
 * now_s. RESERVED with every used_* set; EXHAUSTED with *which the first
 * budget used up; UNAVAILABLE with err (the caller must PQfinish c when
 * PQstatus(c) is no longer CONNECTION_OK).
 */
enum fleet_resv_outcome fleet_budget_reserve(PGconn *c, struct fleet_resv *r,
		    size_t n, uint64_t now_s, unsigned deadline_ms,
		    size_t *which, char *err, size_t errlen);
/*
 * fleet_budget_settle: after a reserved call, add bytes to the result
 * bytes of r[0..n) (release = 0), or give back its calls and cost (release
 * = 1: the call was not forwarded after all), in the window each went into
 * (window_at; a window that has passed meanwhile is left alone). 0, or -1
 * with err.
 */
int		 fleet_budget_settle(PGconn *c, const struct fleet_resv *r,
		    size_t n, uint64_t bytes, int release, unsigned deadline_ms,
		    char *err, size_t errlen);

/* ---- the shared approval queue (fleet/aq.c) ----
 *
 * One row per call waiting for a person, posted by the host that holds
 * the call. Any host decides it (one conditional UPDATE: one winner), which
 * notifies the holder on FLEET_AQ_CHANNEL with its host name as payload;
 * the holder reads its decided rows, carries each out and closes it. */
#define FLEET_AQ_CHANNEL	"sluice_approvals"

struct fleet_aq_item {
	const char	*id;		/* 32 hex */
	const char	*host;		/* the holder */
	const char	*sandbox, *subject, *server, *tool;
	const char	*kind;		/* "tool" | "resource" | "prompt" */
	const char	*arguments;	/* JSON text, or NULL (too large) */
	const char	*rule;		/* or NULL */
	uint64_t	 expires_ms;	/* wall clock */
};

/* A decision as it is made and as the holder reads it back. */
struct fleet_aq_decision {
	char		 id[33];
	int		 approve;
	char		 approver[160];	/* a user name */
	int64_t		 approver_uid;
	char		 approver_host[128];
	char		 note[129];	/* "" for none */
	char		 reason[1025];	/* "" for none */
};

/* What fleet_aq_decide says of the call it decided. */
struct fleet_aq_held {
	char		 host[128];	/* the holder */
	char		 sandbox[64], subject[128], server[128], tool[256];
	char		 kind[16];
};

enum fleet_aq_close {
	FLEET_AQ_TAKEN = 1,	/* the holder carried the decision out */
	FLEET_AQ_TIMEOUT,	/* nobody decided in time */
	FLEET_AQ_CANCELLED,	/* the client cancelled the call */
	FLEET_AQ_GONE,		/* the call went away (its sandbox, a stop) */
};

/* fleet_aq_post: the row of a call waiting for a person. 0, or -1 with
 * errno and err (the call must then not wait: nobody could decide it). */
int		 fleet_aq_post(PGconn *c, const struct fleet_aq_item *it,
		    unsigned deadline_ms, char *err, size_t errlen);
/*
 * fleet_aq_decide: decide row d->id if it is still open, undecided and
 * unexpired, and notify its holder. 1 with *held filled, 0 when there was
 * nothing to decide (unknown, decided already, closed, expired), -1 with
 * errno and err.
 */
int		 fleet_aq_decide(PGconn *c, const struct fleet_aq_decision *d,
		    unsigned deadline_ms, struct fleet_aq_held *held,
		    char *err, size_t errlen);
/*
 * fleet_aq_decided: the decided rows host holds and has not closed, the
 * oldest decision first, at most max: a calloc'd array of *n (rows that do
 * not fit the fields are skipped). NULL with err on failure.
 */
struct fleet_aq_decision *fleet_aq_decided(PGconn *c, const char *host,
		    size_t max, unsigned deadline_ms, size_t *n, char *err,
		    size_t errlen);
/* fleet_aq_close: close host's row id for why (a row already closed stays
 * as it was). 0, or -1 with err. */
int		 fleet_aq_close(PGconn *c, const char *id, const char *host,
		    enum fleet_aq_close why, unsigned deadline_ms, char *err,
		    size_t errlen);
/* fleet_aq_sweep: close every open row of host as gone (a restarted
 * process holds none of them). The rows closed, or -1 with err. */
long		 fleet_aq_sweep(PGconn *c, const char *host,
		    unsigned deadline_ms, char *err, size_t errlen);
/*
 * fleet_aq_list: the open, undecided, unexpired rows of every host, oldest
 * first, at most max, as a new JSON array of {id, host, sandbox, subject,
 * server, tool, kind, arguments, rule, created_ms, expires_ms}. NULL with
 * err on failure.
 */
json_t		*fleet_aq_list(PGconn *c, size_t max, unsigned deadline_ms,
		    char *err, size_t errlen);

/* ---- reading the witness back (fleet/wload.c) ---- */

/*
 * fleet_witness_load: the signed checkpoint notes the database behind c
 * holds for host, newest first, as a malloc'd array of *n malloc'd strings
 * (fleet_notes_free): at most max of them, the newest (the newest decides
 * truncation; each is a prefix check). NULL with errno and err on failure;
 * an empty array (*n = 0) when there are none.
 */
char		**fleet_witness_load(PGconn *c, const char *host, size_t max,
		    unsigned deadline_ms, size_t *n, char *err, size_t errlen);
void		 fleet_notes_free(char **notes, size_t n);

#endif /* SLUICE_GATEWAY_FLEET_FLEET_H */
