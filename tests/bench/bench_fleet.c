/*
 * bench_fleet: the shared-budget reservation of a fleet host
 * (gateway/fleet/budget.c) in a loop, for the fleet section of `make
 * bench`. A host's bridge makes one such statement per budgeted call; how
 * many the database takes per second, with one host and with two hosts
 * (two of these at once, each its own connection) contending for one
 * subject's row, is the ceiling of budgeted calls the fleet can make,
 * whatever the bridges in front of it do.
 *
 *   bench_fleet CONNINFO SUBJECT SECS
 *       reserves one call of budget "bench" of SUBJECT (no limit that
 *       could be reached) for SECS seconds after a warm-up of 50, then
 *       prints the microseconds of every reservation, one a line, and
 *       "rate <reservations/s>"; exit 0, or 1 on any failed reservation
 *       (a refusing database must never look fast), 2 on usage.
 *
 *   bench_fleet --sqlite PATH SUBJECT SECS
 *       the same reservation made the way a single host makes it without
 *       a fleet: one upsert of the budget's row in its own transaction,
 *       in a SQLite database at PATH in WAL mode with synchronous=FULL, as
 *       the bridge keeps its own (gateway/bridge/budget.c): the anchor.
 *
 * The password comes from SLUICE_PG_PASSWORD, as for the CLI. Both stores
 * must be durable for the comparison to mean anything: the bench turns
 * fsync on in its throwaway cluster.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "gateway/fleet/fleet.h"

#define BF_WARM		50
#define BF_MAX		200000	/* samples kept: a bound on memory */
#define BF_DEADLINE_MS	5000

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* One reservation; 0, or -1 with the reason on stderr. */
static int
reserve_one(PGconn *c, const char *subject)
{
	struct fleet_resv r;
	char err[300];
	size_t which;

	memset(&r, 0, sizeof(r));
	r.scope = FLEET_SCOPE_SUBJECT;
	r.owner = subject;
	r.name = "bench";
	r.calls = 1;
	if (fleet_budget_reserve(c, &r, 1, (uint64_t)time(NULL),
	    BF_DEADLINE_MS, &which, err, sizeof(err)) != FLEET_RESV_RESERVED) {
		fprintf(stderr, "bench_fleet: reservation failed: %s\n", err);
		return -1;
	}
	return 0;
}

/* The local store's reservation: the counters of one row grow by one in a
 * transaction of their own. 0, or -1 with the reason on stderr. */
static int
reserve_sqlite(sqlite3 *db, sqlite3_stmt *st)
{
	int rc;

	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		(void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		goto fail;
	}
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "bench_fleet: sqlite: %s\n", sqlite3_errmsg(db));
	return -1;
}

static int
main_sqlite(const char *path, const char *subject, double secs)
{
	static const char ddl[] =
	    "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
	    "CREATE TABLE IF NOT EXISTS budgets (owner TEXT, name TEXT,"
	    " calls INTEGER NOT NULL, PRIMARY KEY (owner, name));";
	double t0, t, end, *lat;
	sqlite3_stmt *st = NULL;
	sqlite3 *db = NULL;
	size_t n = 0, i;
	int ok = 1;

	if ((lat = calloc(BF_MAX, sizeof(*lat))) == NULL)
		return 1;
	if (sqlite3_open(path, &db) != SQLITE_OK ||
	    sqlite3_exec(db, ddl, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO budgets VALUES (?1, 'bench', 1)"
	    " ON CONFLICT (owner, name) DO UPDATE SET calls = calls + 1",
	    -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_bind_text(st, 1, subject, -1, SQLITE_STATIC) != SQLITE_OK) {
		fprintf(stderr, "bench_fleet: sqlite: %s\n", sqlite3_errmsg(db));
		goto out;
	}
	for (i = 0; i < BF_WARM; i++)
		if (reserve_sqlite(db, st) == -1)
			goto out;
	t0 = now_us();
	end = t0 + secs * 1e6;
	for (t = t0; t < end && n < BF_MAX; n++) {
		if (reserve_sqlite(db, st) == -1)
			goto out;
		lat[n] = now_us() - t;
		t += lat[n];
	}
	for (i = 0; i < n; i++)
		printf("%.1f\n", lat[i]);
	printf("rate %.1f\n", (double)n / ((t - t0) / 1e6));
	ok = 0;
out:
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(lat);
	return ok;
}

int
main(int argc, char **argv)
{
	char err[400];
	double secs, t0, t, end, *lat;
	size_t n = 0, i;
	PGconn *c;

	if (argc == 5 && strcmp(argv[1], "--sqlite") == 0 &&
	    (secs = strtod(argv[4], NULL)) > 0 && secs <= 120)
		return main_sqlite(argv[2], argv[3], secs);
	if (argc != 4 || (secs = strtod(argv[3], NULL)) <= 0 || secs > 120) {
		fprintf(stderr, "usage: bench_fleet CONNINFO SUBJECT SECS\n"
		    "       bench_fleet --sqlite PATH SUBJECT SECS\n");
		return 2;
	}
	if ((lat = calloc(BF_MAX, sizeof(*lat))) == NULL)
		return 1;
	if ((c = fleet_pg_connect_env(argv[1], BF_DEADLINE_MS, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "bench_fleet: %s\n", err);
		free(lat);
		return 1;
	}
	for (i = 0; i < BF_WARM; i++)
		if (reserve_one(c, argv[2]) == -1)
			goto fail;
	t0 = now_us();
	end = t0 + secs * 1e6;
	for (t = t0; t < end && n < BF_MAX; n++) {
		if (reserve_one(c, argv[2]) == -1)
			goto fail;
		lat[n] = now_us() - t;
		t += lat[n];
	}
	for (i = 0; i < n; i++)
		printf("%.1f\n", lat[i]);
	printf("rate %.1f\n", (double)n / ((t - t0) / 1e6));
	PQfinish(c);
	free(lat);
	return 0;
fail:
	PQfinish(c);
	free(lat);
	return 1;
}
