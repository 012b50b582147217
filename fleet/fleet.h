/*
 * fleet: the PostgreSQL database the hosts of a fleet share (config section
 * fleet:, README "Running a fleet"), as both the daemon and the CLI use it:
 * pg.c speaks to PostgreSQL (a connection and every statement bounded by a
 * deadline, the versioned schema and its migrations, the pure reading of
 * the version row), wload.c reads a host's witnessed checkpoints back for
 * `sluice audit verify --witness`. A library module like audit/: leaf
 * functions that return errors, no threads, no logging; the daemon's use
 * of it (the witness thread) is gateway/fleet/.
 */
#ifndef SLUICE_FLEET_FLEET_H
#define SLUICE_FLEET_FLEET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <libpq-fe.h>

/* The schema version this build creates and understands. */
#define FLEET_SCHEMA_VERSION	1

/* ---- PostgreSQL (fleet/pg.c) ---- */

/*
 * fleet_pg_connect: a connection for conninfo (key=value or URI; libpq's
 * own defaults and environment apply) with password (NULL: none given, so
 * libpq's PGPASSWORD or ~/.pgpass may still supply one), made within
 * deadline_ms. NULL with errno (ETIMEDOUT past the deadline, ECONNREFUSED
 * for any other refusal) and a one-line message in err naming what
 * failed (a wrong password reads as libpq and the server say it).
 */
PGconn		*fleet_pg_connect(const char *conninfo, const char *password,
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

#endif /* SLUICE_FLEET_FLEET_H */
