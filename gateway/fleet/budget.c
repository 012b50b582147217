/*
 * budget.c: budgets the hosts of a fleet share, reserved in PostgreSQL.
 *
 * A security budget must fail closed and must never be overrun by hosts
 * racing each other, so a reservation is no read-then-write: it is one
 * INSERT ... ON CONFLICT DO UPDATE ... WHERE <the limits still allow it>
 * per budget, which PostgreSQL evaluates on the newest version of the row
 * while it holds the row's lock. No row back means the budget is used up.
 * The limits are those policy/ computed for the call (the same tests as
 * policy/decide.c: calls below the limit, cost within it, result bytes
 * below theirs); a fresh row or a new window is only written when the
 * call alone fits, which the policy's first pass (with no use) has already
 * checked. A call under several budgets reserves them in one transaction:
 * all or none. Whatever goes wrong on the way (no answer by the deadline,
 * an error, a result that is not the counters) is UNAVAILABLE, which the
 * caller denies.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/fleet/fleet.h"

/*
 * newer: the row holds another window length (a changed policy) or an
 * older window: this reservation starts the window afresh. A row in a
 * newer window than the caller's (a host whose clock is behind) keeps it,
 * and the call counts there: windows never go back.
 */
#define NEWER	"(b.window_s <> excluded.window_s OR " \
		"excluded.window_start > b.window_start)"

static const char reserve_sql[] =
    "INSERT INTO budgets AS b (scope, owner, name, window_s, window_start,"
    " calls, cost, result_bytes) VALUES ($1, $2, $3, $4::bigint,"
    " $5::bigint, $6::bigint, $7::bigint, 0)"
    " ON CONFLICT (scope, owner, name) DO UPDATE SET"
    " window_s = excluded.window_s,"
    " window_start = CASE WHEN " NEWER " THEN excluded.window_start"
    "  ELSE b.window_start END,"
    " calls = CASE WHEN " NEWER " THEN excluded.calls"
    "  ELSE b.calls + excluded.calls END,"
    " cost = CASE WHEN " NEWER " THEN excluded.cost"
    "  ELSE b.cost + excluded.cost END,"
    " result_bytes = CASE WHEN " NEWER " THEN 0 ELSE b.result_bytes END,"
    " updated_at = now()"
    " WHERE " NEWER " OR ("
    "  ($8::bigint = 0 OR b.calls < $8::bigint) AND"
    "  ($9::bigint = 0 OR b.cost + excluded.cost <= $9::bigint) AND"
    "  ($10::bigint = 0 OR b.result_bytes < $10::bigint))"
    " RETURNING calls, cost, result_bytes, window_start";

static const char release_sql[] =
    "UPDATE budgets SET calls = greatest(calls - $4::bigint, 0),"
    " cost = greatest(cost - $5::bigint, 0), updated_at = now()"
    " WHERE scope = $1 AND owner = $2 AND name = $3"
    " AND window_s = $6::bigint AND window_start = $7::bigint";

/* The same parameters as release_sql; $5 (the cost) is not needed, but
 * every parameter must be typed. */
static const char bytes_sql[] =
    "UPDATE budgets SET result_bytes = result_bytes + $4::bigint,"
    " updated_at = now()"
    " WHERE scope = $1 AND owner = $2 AND name = $3"
    " AND window_s = $6::bigint AND window_start = $7::bigint"
    " AND $5::bigint >= 0";

/* Values bound as text: bigint holds at most 2^63 - 1. */
#define U63	((uint64_t)INT64_MAX)

uint64_t
fleet_window_start(uint64_t window_s, uint64_t now_s)
{
	return window_s == 0 ? 0 : now_s - now_s % window_s;
}

static const char *
scope_text(enum fleet_scope s)
{
	return s == FLEET_SCOPE_SUBJECT ? "subject" :
	    s == FLEET_SCOPE_POLICY ? "policy" : NULL;
}

/* A decimal bigint that is not negative, into *v. */
static int
num(const char *s, uint64_t *v)
{
	uint64_t x = 0;

	if (s == NULL || *s == '\0')
		return -1;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9' || x > (U63 - (uint64_t)(*s - '0')) /
		    10)
			return -1;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*v = x;
	return 0;
}

enum fleet_resv_outcome
fleet_resv_read(int ntuples, const char *calls, const char *cost,
    const char *bytes, const char *wstart, struct fleet_resv *r)
{
	uint64_t c, k, b, w;

	if (ntuples == 0)
		return FLEET_RESV_EXHAUSTED;
	if (ntuples != 1 || num(calls, &c) == -1 || num(cost, &k) == -1 ||
	    num(bytes, &b) == -1 || num(wstart, &w) == -1 || c < r->calls ||
	    k < r->cost)
		return FLEET_RESV_UNAVAILABLE;
	r->used_calls = c - r->calls;
	r->used_cost = k - r->cost;
	r->used_result_bytes = b;
	r->window_at = w;
	return FLEET_RESV_RESERVED;
}

static int
resv_ok(const struct fleet_resv *r)
{
	return scope_text(r->scope) != NULL && r->owner != NULL &&
	    r->name != NULL && r->window_s <= U63 && r->calls <= U63 &&
	    r->cost <= U63 && r->limit_calls <= U63 && r->limit_cost <= U63 &&
	    r->limit_result_bytes <= U63;
}

/* One upsert; RESERVED, EXHAUSTED or UNAVAILABLE. */
static enum fleet_resv_outcome
reserve_one(PGconn *c, struct fleet_resv *r, uint64_t now_s, unsigned dl,
    char *err, size_t errlen)
{
	char v[7][24];
	const char *p[10];
	enum fleet_resv_outcome o;
	PGresult *res;
	int i;

	snprintf(v[0], sizeof(v[0]), "%" PRIu64, r->window_s);
	snprintf(v[1], sizeof(v[1]), "%" PRIu64,
	    fleet_window_start(r->window_s, now_s));
	snprintf(v[2], sizeof(v[2]), "%" PRIu64, r->calls);
	snprintf(v[3], sizeof(v[3]), "%" PRIu64, r->cost);
	snprintf(v[4], sizeof(v[4]), "%" PRIu64, r->limit_calls);
	snprintf(v[5], sizeof(v[5]), "%" PRIu64, r->limit_cost);
	snprintf(v[6], sizeof(v[6]), "%" PRIu64, r->limit_result_bytes);
	p[0] = scope_text(r->scope);
	p[1] = r->owner;
	p[2] = r->name;
	for (i = 0; i < 7; i++)
		p[3 + i] = v[i];
	if ((res = fleet_pg_exec(c, reserve_sql, 10, p, dl, err, errlen)) ==
	    NULL)
		return FLEET_RESV_UNAVAILABLE;
	o = PQnfields(res) != 4 ? FLEET_RESV_UNAVAILABLE :
	    fleet_resv_read(PQntuples(res),
	    PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : NULL,
	    PQntuples(res) > 0 ? PQgetvalue(res, 0, 1) : NULL,
	    PQntuples(res) > 0 ? PQgetvalue(res, 0, 2) : NULL,
	    PQntuples(res) > 0 ? PQgetvalue(res, 0, 3) : NULL, r);
	PQclear(res);
	if (o == FLEET_RESV_UNAVAILABLE && err != NULL && errlen > 0 &&
	    err[0] == '\0')
		snprintf(err, errlen, "the reservation returned no counters");
	return o;
}

static int
simple(PGconn *c, const char *sql, unsigned dl, char *err, size_t errlen)
{
	PGresult *r = fleet_pg_exec(c, sql, 0, NULL, dl, err, errlen);

	PQclear(r);
	return r == NULL ? -1 : 0;
}

enum fleet_resv_outcome
fleet_budget_reserve(PGconn *c, struct fleet_resv *r, size_t n,
    uint64_t now_s, unsigned dl, size_t *which, char *err, size_t errlen)
{
	enum fleet_resv_outcome o = FLEET_RESV_RESERVED;
	size_t i;

	*which = 0;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (n == 0 || n > FLEET_RESV_MAX) {
		snprintf(err, errlen, "%zu budgets in one reservation", n);
		errno = EINVAL;
		return FLEET_RESV_UNAVAILABLE;
	}
	for (i = 0; i < n; i++)
		if (!resv_ok(&r[i])) {
			snprintf(err, errlen, "budget %zu is not one the "
			    "database can hold", i);
			errno = EINVAL;
			return FLEET_RESV_UNAVAILABLE;
		}
	/* One budget: the statement is its own transaction. */
	if (n == 1)
		return reserve_one(c, r, now_s, dl, err, errlen);
	if (simple(c, "BEGIN", dl, err, errlen) == -1)
		return FLEET_RESV_UNAVAILABLE;
	for (i = 0; i < n && o == FLEET_RESV_RESERVED; i++) {
		o = reserve_one(c, &r[i], now_s, dl, err, errlen);
		*which = i;
	}
	if (o != FLEET_RESV_RESERVED) {
		/* Nothing of it stays; a lost connection rolls back too. */
		if (fleet_pg_usable(c))
			(void)simple(c, "ROLLBACK", dl, NULL, 0);
		return o;
	}
	*which = 0;
	if (simple(c, "COMMIT", dl, err, errlen) == -1)
		return FLEET_RESV_UNAVAILABLE;
	return FLEET_RESV_RESERVED;
}

int
fleet_budget_settle(PGconn *c, const struct fleet_resv *r, size_t n,
    uint64_t bytes, int release, unsigned dl, char *err, size_t errlen)
{
	char v[4][24];
	const char *p[7];
	PGresult *res;
	size_t i;
	int rc = 0;

	if (bytes > U63) {
		snprintf(err, errlen, "result too large to count");
		errno = EINVAL;
		return -1;
	}
	if (n > 1 && simple(c, "BEGIN", dl, err, errlen) == -1)
		return -1;
	for (i = 0; i < n && rc == 0; i++) {
		if (!resv_ok(&r[i])) {
			snprintf(err, errlen, "budget %zu is not one the "
			    "database can hold", i);
			errno = EINVAL;
			rc = -1;
			break;
		}
		snprintf(v[0], sizeof(v[0]), "%" PRIu64, release ? r[i].calls :
		    bytes);
		snprintf(v[1], sizeof(v[1]), "%" PRIu64, r[i].cost);
		snprintf(v[2], sizeof(v[2]), "%" PRIu64, r[i].window_s);
		snprintf(v[3], sizeof(v[3]), "%" PRIu64, r[i].window_at);
		p[0] = scope_text(r[i].scope);
		p[1] = r[i].owner;
		p[2] = r[i].name;
		p[3] = v[0];
		p[4] = v[1];
		p[5] = v[2];
		p[6] = v[3];
		if ((res = fleet_pg_exec(c, release ? release_sql : bytes_sql,
		    7, p, dl, err, errlen)) == NULL)
			rc = -1;
		PQclear(res);
	}
	if (n > 1) {
		if (rc == 0)
			rc = simple(c, "COMMIT", dl, err, errlen);
		else if (fleet_pg_usable(c))
			(void)simple(c, "ROLLBACK", dl, NULL, 0);
	}
	return rc;
}
