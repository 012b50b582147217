/*
 * cli_fleet: `sluice fleet migrate CONNINFO`, the fleet database's schema
 * made or brought up to date by its owner. A daemon migrates at start when
 * its role may; in a fleet set up as the README says it may not (its role
 * only INSERTs and SELECTs), so the owner runs this once per upgrade,
 * before the upgraded daemons start. It is the same migration the daemon
 * runs (gateway/fleet/pg.c), under the same advisory lock.
 */
#include <stdio.h>
#include <string.h>

#include "gateway/fleet/fleet.h"
#include "gateway/cli/cli.h"

#define MIGRATE_DEADLINE_MS	30000

int
cli_fleet(int argc, char **argv)
{
	char err[400];
	PGconn *c;
	int version, rc;

	if (argc != 3 || strcmp(argv[1], "migrate") != 0)
		return cli_usage("fleet");
	if ((c = fleet_pg_connect_env(argv[2], MIGRATE_DEADLINE_MS, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "sluice fleet: cannot connect: %s\n", err);
		return 1;
	}
	rc = fleet_schema_ensure(c, MIGRATE_DEADLINE_MS, &version, err,
	    sizeof(err));
	PQfinish(c);
	if (rc == -1) {
		fprintf(stderr, "sluice fleet: %s\n", err);
		return 1;
	}
	printf("fleet schema at version %d\n", version);
	return 0;
}
