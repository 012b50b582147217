/*
 * fleet_reserve: one shared-budget operation against a fleet database, as
 * a host makes it (gateway/fleet/budget.c), for tests/e2e/t_fleet.sh. Compiled by
 * the scenario with gateway/fleet/pg.c and gateway/fleet/budget.c.
 *
 *   fleet_reserve CONNINFO reserve SUBJECT BUDGET LIMIT [WINDOW_S]
 *       prints "reserved USED" (the calls before this one), "exhausted"
 *       or "unavailable: why"; exit 0, 1, 3
 *   fleet_reserve CONNINFO release SUBJECT BUDGET WINDOW_S WINDOW_AT
 *       gives one call back; exit 0 or 3
 *
 * The password comes from SLUICE_PG_PASSWORD. The deadline is 10 s: 50 of
 * these at once on a small test machine measure atomicity, not latency.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/fleet/fleet.h"

int
main(int argc, char **argv)
{
	struct fleet_resv r;
	char err[400];
	enum fleet_resv_outcome o;
	size_t which;
	PGconn *c;

	if (argc < 6)
		return 2;
	memset(&r, 0, sizeof(r));
	r.scope = FLEET_SCOPE_SUBJECT;
	r.owner = argv[3];
	r.name = argv[4];
	r.calls = 1;
	if ((c = fleet_pg_connect_env(argv[1], 10000, err, sizeof(err))) ==
	    NULL) {
		printf("unavailable: %s\n", err);
		return 3;
	}
	if (strcmp(argv[2], "release") == 0 && argc == 7) {
		r.window_s = strtoull(argv[5], NULL, 10);
		r.window_at = strtoull(argv[6], NULL, 10);
		if (fleet_budget_settle(c, &r, 1, 0, 1, 10000, err,
		    sizeof(err)) == -1) {
			printf("unavailable: %s\n", err);
			PQfinish(c);
			return 3;
		}
		PQfinish(c);
		return 0;
	}
	r.limit_calls = strtoull(argv[5], NULL, 10);
	r.window_s = argc > 6 ? strtoull(argv[6], NULL, 10) : 0;
	o = fleet_budget_reserve(c, &r, 1, (uint64_t)time(NULL), 10000, &which,
	    err, sizeof(err));
	PQfinish(c);
	switch (o) {
	case FLEET_RESV_RESERVED:
		printf("reserved %llu %llu\n", (unsigned long long)r.used_calls,
		    (unsigned long long)r.window_at);
		return 0;
	case FLEET_RESV_EXHAUSTED:
		printf("exhausted\n");
		return 1;
	default:
		printf("unavailable: %s\n", err);
		return 3;
	}
}
