/*
 * aq.c: the approval queue the hosts of a fleet share, one row per call
 * waiting for a person in the table approvals (schema version 3).
 *
 * A person may decide a call from any host, so the row, not the holding
 * host's memory, is where a decision is made: fleet_aq_decide is one
 * conditional UPDATE on a row still open and undecided, so two people
 * deciding at once (on two hosts, or one on the holder) get one winner,
 * and the loser is told there was nothing to decide. The same statement
 * notifies the holding host (NOTIFY on channel FLEET_AQ_CHANNEL with the
 * holder's name as payload, sent by PostgreSQL at commit), which then
 * reads its decided rows (fleet_aq_decided) and closes each once it has
 * carried it out. A row is never deleted by a host: closed rows are the
 * queue's history (README "Running a fleet" says how an owner prunes them).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/fleet/fleet.h"

static const char post_sql[] =
    "INSERT INTO approvals (id, host, sandbox, subject, server, tool, kind,"
    " arguments, rule, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8,"
    " $9, to_timestamp($10::bigint / 1000.0))";

/* pg_notify in the select list: the notification goes at commit, only
 * when a row was decided. */
static const char decide_sql[] =
    "WITH d AS (UPDATE approvals SET decision = $2, approver = $3,"
    " approver_uid = $4::bigint, approver_host = $5, approver_note = $6,"
    " reason = $7, decided_at = now()"
    " WHERE id = $1 AND decision IS NULL AND closed_at IS NULL"
    " AND expires_at > now()"
    " RETURNING host, sandbox, subject, server, tool, kind)"
    " SELECT host, sandbox, subject, server, tool, kind,"
    " pg_notify('" FLEET_AQ_CHANNEL "', host) FROM d";

static const char decided_sql[] =
    "SELECT id, decision, approver, approver_uid, approver_host,"
    " approver_note, reason FROM approvals"
    " WHERE host = $1 AND decision IS NOT NULL AND closed_at IS NULL"
    " ORDER BY decided_at LIMIT $2::bigint";

static const char close_sql[] =
    "UPDATE approvals SET closed_at = now(), closed = $3"
    " WHERE id = $1 AND host = $2 AND closed_at IS NULL";

static const char sweep_sql[] =
    "UPDATE approvals SET closed_at = now(), closed = 'gone'"
    " WHERE host = $1 AND closed_at IS NULL";

static const char list_sql[] =
    "SELECT id, host, sandbox, subject, server, tool, kind, arguments,"
    " rule, (extract(epoch FROM created_at) * 1000)::bigint,"
    " (extract(epoch FROM expires_at) * 1000)::bigint FROM approvals"
    " WHERE decision IS NULL AND closed_at IS NULL AND expires_at > now()"
    " ORDER BY created_at LIMIT $1::bigint";

static const char *const close_names[] = {
	[FLEET_AQ_TAKEN] = "taken",
	[FLEET_AQ_TIMEOUT] = "timeout",
	[FLEET_AQ_CANCELLED] = "cancelled",
	[FLEET_AQ_GONE] = "gone",
};

static void
seterr(char *err, size_t errlen, const char *what, const char *why)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "approval queue: %s: %s", what, why);
}

/* Copies s into a fixed field; -1 when it does not fit (nothing is cut:
 * a cut name would be another name). */
static int
cp(char *dst, size_t n, const char *s)
{
	size_t l = s != NULL ? strlen(s) : 0;

	if (l >= n)
		return -1;
	memcpy(dst, s != NULL ? s : "", l);
	dst[l] = '\0';
	return 0;
}

/* One statement whose rows the caller does not need; -1 with err. */
static int
run(PGconn *c, const char *what, const char *sql, int n,
    const char *const *vals, unsigned deadline_ms, long *rows, char *err,
    size_t errlen)
{
	char e[320] = "";
	PGresult *r;

	if ((r = fleet_pg_exec(c, sql, n, vals, deadline_ms, e, sizeof(e))) ==
	    NULL) {
		seterr(err, errlen, what, e);
		return -1;
	}
	if (rows != NULL)
		*rows = strtol(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return 0;
}

int
fleet_aq_post(PGconn *c, const struct fleet_aq_item *it,
    unsigned deadline_ms, char *err, size_t errlen)
{
	char exp[24];
	const char *v[10];

	if (it == NULL || it->id == NULL || it->host == NULL ||
	    it->sandbox == NULL || it->subject == NULL || it->server == NULL ||
	    it->tool == NULL || it->kind == NULL) {
		seterr(err, errlen, "post", "a field is missing");
		errno = EINVAL;
		return -1;
	}
	snprintf(exp, sizeof(exp), "%" PRIu64, it->expires_ms);
	v[0] = it->id;
	v[1] = it->host;
	v[2] = it->sandbox;
	v[3] = it->subject;
	v[4] = it->server;
	v[5] = it->tool;
	v[6] = it->kind;
	v[7] = it->arguments;
	v[8] = it->rule;
	v[9] = exp;
	return run(c, "post", post_sql, 10, v, deadline_ms, NULL, err, errlen);
}

int
fleet_aq_decide(PGconn *c, const struct fleet_aq_decision *d,
    unsigned deadline_ms, struct fleet_aq_held *held, char *err,
    size_t errlen)
{
	char uid[24], e[320] = "";
	const char *v[7];
	PGresult *r;
	int n;

	if (d == NULL || held == NULL) {
		errno = EINVAL;
		return -1;
	}
	snprintf(uid, sizeof(uid), "%" PRId64, d->approver_uid);
	v[0] = d->id;
	v[1] = d->approve ? "approved" : "denied";
	v[2] = d->approver;
	v[3] = uid;
	v[4] = d->approver_host;
	v[5] = d->note[0] != '\0' ? d->note : NULL;
	v[6] = d->reason[0] != '\0' ? d->reason : NULL;
	if ((r = fleet_pg_exec(c, decide_sql, 7, v, deadline_ms, e,
	    sizeof(e))) == NULL) {
		seterr(err, errlen, "decide", e);
		return -1;
	}
	if ((n = PQntuples(r)) == 0) {
		PQclear(r);
		return 0;
	}
	memset(held, 0, sizeof(*held));
	/* Fields the row holds came from a host: one that does not fit is
	 * not a row this build wrote. */
	if (n != 1 || cp(held->host, sizeof(held->host), PQgetvalue(r, 0, 0)) ==
	    -1 || cp(held->sandbox, sizeof(held->sandbox), PQgetvalue(r, 0,
	    1)) == -1 || cp(held->subject, sizeof(held->subject),
	    PQgetvalue(r, 0, 2)) == -1 || cp(held->server,
	    sizeof(held->server), PQgetvalue(r, 0, 3)) == -1 ||
	    cp(held->tool, sizeof(held->tool), PQgetvalue(r, 0, 4)) == -1 ||
	    cp(held->kind, sizeof(held->kind), PQgetvalue(r, 0, 5)) == -1) {
		PQclear(r);
		seterr(err, errlen, "decide", "the row does not fit its fields");
		errno = EPROTO;
		return -1;
	}
	PQclear(r);
	return 1;
}

/* One row of decided_sql into d; -1 when it is not one this build
 * wrote. */
static int
decision_of(PGresult *r, int i, struct fleet_aq_decision *d)
{
	const char *dec = PQgetvalue(r, i, 1);
	char *end;

	memset(d, 0, sizeof(*d));
	if (cp(d->id, sizeof(d->id), PQgetvalue(r, i, 0)) == -1 ||
	    (strcmp(dec, "approved") != 0 && strcmp(dec, "denied") != 0) ||
	    cp(d->approver, sizeof(d->approver), PQgetvalue(r, i, 2)) == -1 ||
	    cp(d->approver_host, sizeof(d->approver_host), PQgetvalue(r, i,
	    4)) == -1 || cp(d->note, sizeof(d->note), PQgetvalue(r, i, 5)) ==
	    -1 || cp(d->reason, sizeof(d->reason), PQgetvalue(r, i, 6)) == -1)
		return -1;
	d->approve = strcmp(dec, "approved") == 0;
	errno = 0;
	d->approver_uid = strtoll(PQgetvalue(r, i, 3), &end, 10);
	if (errno != 0 || *end != '\0' || d->approver[0] == '\0')
		return -1;
	return 0;
}

struct fleet_aq_decision *
fleet_aq_decided(PGconn *c, const char *host, size_t max,
    unsigned deadline_ms, size_t *n, char *err, size_t errlen)
{
	struct fleet_aq_decision *a;
	char lim[24], e[320] = "";
	const char *v[2];
	PGresult *r;
	int i, got;

	*n = 0;
	snprintf(lim, sizeof(lim), "%zu", max);
	v[0] = host;
	v[1] = lim;
	if ((r = fleet_pg_exec(c, decided_sql, 2, v, deadline_ms, e,
	    sizeof(e))) == NULL) {
		seterr(err, errlen, "decided", e);
		return NULL;
	}
	got = PQntuples(r);
	if ((a = calloc(got > 0 ? (size_t)got : 1, sizeof(*a))) == NULL) {
		PQclear(r);
		seterr(err, errlen, "decided", strerror(ENOMEM));
		return NULL;
	}
	for (i = 0; i < got; i++) {
		if (decision_of(r, i, &a[*n]) == -1)
			continue;	/* not ours to carry out: skipped */
		(*n)++;
	}
	PQclear(r);
	return a;
}

int
fleet_aq_close(PGconn *c, const char *id, const char *host,
    enum fleet_aq_close why, unsigned deadline_ms, char *err, size_t errlen)
{
	const char *v[3];

	if ((unsigned)why > FLEET_AQ_GONE || why == 0) {
		errno = EINVAL;
		return -1;
	}
	v[0] = id;
	v[1] = host;
	v[2] = close_names[why];
	return run(c, "close", close_sql, 3, v, deadline_ms, NULL, err,
	    errlen);
}

long
fleet_aq_sweep(PGconn *c, const char *host, unsigned deadline_ms, char *err,
    size_t errlen)
{
	const char *v[1] = { host };
	long rows = 0;

	if (run(c, "sweep", sweep_sql, 1, v, deadline_ms, &rows, err,
	    errlen) == -1)
		return -1;
	return rows;
}

/* Arguments as the local listing shows them: the JSON text parsed back,
 * or the text itself when it is not JSON (a row of another build). */
static json_t *
args_json(const char *s)
{
	json_t *j;

	if (s == NULL)
		return json_null();
	if ((j = json_loads(s, JSON_DECODE_ANY, NULL)) != NULL)
		return j;
	return json_string(s);
}

json_t *
fleet_aq_list(PGconn *c, size_t max, unsigned deadline_ms, char *err,
    size_t errlen)
{
	char lim[24], e[320] = "";
	const char *v[1];
	PGresult *r;
	json_t *a, *o;
	int i;

	snprintf(lim, sizeof(lim), "%zu", max);
	v[0] = lim;
	if ((r = fleet_pg_exec(c, list_sql, 1, v, deadline_ms, e,
	    sizeof(e))) == NULL) {
		seterr(err, errlen, "list", e);
		return NULL;
	}
	if ((a = json_array()) == NULL)
		goto nomem;
	for (i = 0; i < PQntuples(r); i++) {
		o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:s?,s:I,s:I}",
		    "id", PQgetvalue(r, i, 0), "host", PQgetvalue(r, i, 1),
		    "sandbox", PQgetvalue(r, i, 2),
		    "subject", PQgetvalue(r, i, 3),
		    "server", PQgetvalue(r, i, 4), "tool", PQgetvalue(r, i, 5),
		    "kind", PQgetvalue(r, i, 6),
		    "arguments", args_json(PQgetisnull(r, i, 7) ? NULL :
		    PQgetvalue(r, i, 7)),
		    "rule", PQgetisnull(r, i, 8) ? NULL : PQgetvalue(r, i, 8),
		    "created_ms", (json_int_t)strtoll(PQgetvalue(r, i, 9),
		    NULL, 10),
		    "expires_ms", (json_int_t)strtoll(PQgetvalue(r, i, 10),
		    NULL, 10));
		if (o == NULL || json_array_append_new(a, o) == -1)
			goto nomem;
	}
	PQclear(r);
	return a;
nomem:
	PQclear(r);
	json_decref(a);
	seterr(err, errlen, "list", strerror(ENOMEM));
	errno = ENOMEM;
	return NULL;
}
