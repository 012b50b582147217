/*
 * wit.c: the daemon's fleet handle and the checkpoint witness.
 *
 * A host's audit log reaches assurance "external" only when its signed
 * checkpoints are held somewhere the host cannot rewrite. The witness is a
 * thread of the parent that copies each checkpoint the log signs into the
 * table checkpoints of the fleet's database, where the daemon's role may
 * INSERT and SELECT but never UPDATE or DELETE. It reads the checkpoints
 * from the log's own database, on a read-only connection of its own, from
 * the newest size the witness already holds for this host: the log is the
 * queue, bounded by the log itself, lost by no crash, and the audit writer
 * never waits for it. A database that is down or slow is retried with
 * backoff; how far the witness is behind is in the stats, /v1/status and
 * /metrics. A size the witness holds with another root than the log's is
 * counted and said loudly: this host's log was rewritten since.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "audit/audit.h"
#include "gateway/fleet/fleetd.h"
#include "gateway/log.h"

#define WIT_BATCH	64	/* checkpoints a round reads and sends */
#define WIT_POLL_MS	500	/* an idle round, without a kick */
#define WIT_BACKOFF_MIN	200
#define WIT_BACKOFF_MAX	30000

struct fleetd {
	const struct pol_config	*cfg;
	char			*password;	/* NULL: libpq's own sources */
	char			 host[POL_FLEET_HOST_MAX + 1];
	char			*db_path;	/* the audit log, once started */

	pthread_t		 thr;
	int			 started;
	pthread_mutex_t		 mu;
	pthread_cond_t		 cv;
	int			 stop;		/* under mu */
	int			 kicked;	/* under mu */
	struct fleetd_stats st;	/* under mu */
};

static int
host_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > POL_FLEET_HOST_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		    (i > 0 && (s[i] == '.' || s[i] == '-' || s[i] == '_'))))
			return 0;
	return 1;
}

struct fleetd *
fleetd_open(const struct pol_config *cfg, char *err, size_t errlen)
{
	struct fleetd *f;
	pthread_condattr_t ca;
	char e[400], *mask;
	PGconn *c;
	int version;

	if (cfg->fleet_conninfo == NULL) {
		errno = 0;
		return NULL;
	}
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		snprintf(err, errlen, "fleet: out of memory");
		return NULL;
	}
	f->cfg = cfg;
	pthread_mutex_init(&f->mu, NULL);
	/* nap() waits on CLOCK_MONOTONIC deadlines: the condition must use
	 * that clock, or every wait ends at once. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cv, &ca);
	pthread_condattr_destroy(&ca);
	errno = 0;
	if ((f->password = fleet_password_read(cfg->fleet_password_file, e,
	    sizeof(e))) == NULL && errno != 0) {
		snprintf(err, errlen, "fleet: %s", e);
		goto fail;
	}
	if (cfg->fleet_host != NULL)
		snprintf(f->host, sizeof(f->host), "%s", cfg->fleet_host);
	else if (gethostname(f->host, sizeof(f->host)) == -1 ||
	    !host_ok(f->host)) {
		snprintf(err, errlen, "fleet: the host name is not usable in "
		    "the shared tables: set fleet.host");
		errno = EINVAL;
		goto fail;
	}
	if ((c = fleet_pg_connect(cfg->fleet_conninfo, f->password,
	    cfg->fleet_deadline_ms, e, sizeof(e))) == NULL) {
		int eno = errno;

		mask = fleet_pg_mask(cfg->fleet_conninfo);
		snprintf(err, errlen, "fleet: cannot connect to PostgreSQL "
		    "(%s): %s", mask != NULL ? mask : "?", e);
		free(mask);
		errno = eno;
		goto fail;
	}
	if (fleet_schema_ensure(c, cfg->fleet_deadline_ms, &version, e,
	    sizeof(e)) == -1) {
		int eno = errno;

		snprintf(err, errlen, "fleet: %s", e);
		PQfinish(c);
		errno = eno;
		goto fail;
	}
	PQfinish(c);
	log_info("fleet: host %s, database schema version %d", f->host,
	    version);
	return f;
fail:
	fleetd_free(f);
	return NULL;
}

void
fleetd_free(struct fleetd *f)
{
	if (f == NULL)
		return;
	fleetd_witness_stop(f);
	if (f->password != NULL) {
		explicit_bzero(f->password, strlen(f->password));
		free(f->password);
	}
	free(f->db_path);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

const char *
fleetd_host(const struct fleetd *f)
{
	return f->host;
}

/* ------------------------------------------------------------ the thread */

struct wctx {
	struct fleetd	*f;
	sqlite3		*db;		/* the audit log, read-only */
	PGconn		*pg;
	uint64_t	 witnessed;
	int		 connected_once;
	unsigned	 backoff;
	int		 lost;		/* the last statement lost pg */
	char		 err[256];
};

/* Sleeps ms or until kicked or stopped; returns 1 to stop. */
static int
nap(struct fleetd *f, unsigned ms)
{
	struct timespec ts;
	int stop;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&f->mu);
	while (!f->stop && !f->kicked)
		if (pthread_cond_timedwait(&f->cv, &f->mu, &ts) == ETIMEDOUT)
			break;
	f->kicked = 0;
	stop = f->stop;
	pthread_mutex_unlock(&f->mu);
	return stop;
}

static void
failed(struct wctx *w, const char *what)
{
	struct fleetd *f = w->f;
	int was;

	pthread_mutex_lock(&f->mu);
	was = f->st.up || f->st.failures == 0;
	f->st.up = 0;
	f->st.failures++;
	snprintf(f->st.last_error, sizeof(f->st.last_error), "%s: %s", what,
	    w->err);
	pthread_mutex_unlock(&f->mu);
	/* Said once per outage, not once per retry. */
	if (was)
		log_warnx("fleet witness: %s: %s (retrying with backoff)", what,
		    w->err);
	if (w->pg != NULL && !fleet_pg_usable(w->pg)) {
		PQfinish(w->pg);
		w->pg = NULL;
	}
	w->backoff = w->backoff == 0 ? WIT_BACKOFF_MIN :
	    w->backoff * 2 > WIT_BACKOFF_MAX ? WIT_BACKOFF_MAX : w->backoff * 2;
}

/* After a statement that left the connection unusable (timeout, lost). */
static void
drop(struct wctx *w)
{
	if (w->pg != NULL) {
		PQfinish(w->pg);
		w->pg = NULL;
	}
}

static int
connect_pg(struct wctx *w)
{
	const struct pol_config *cfg = w->f->cfg;
	const char *p[1] = { w->f->host };
	PGresult *r;

	if ((w->pg = fleet_pg_connect(cfg->fleet_conninfo, w->f->password,
	    cfg->fleet_deadline_ms, w->err, sizeof(w->err))) == NULL) {
		failed(w, "connect");
		return -1;
	}
	/* Where this host's witness stands: the table is the cursor. */
	if ((r = fleet_pg_exec(w->pg, "SELECT coalesce(max(size), 0) FROM "
	    "checkpoints WHERE host = $1", 1, p, cfg->fleet_deadline_ms,
	    w->err, sizeof(w->err))) == NULL) {
		drop(w);
		failed(w, "reading the witness");
		return -1;
	}
	w->witnessed = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	pthread_mutex_lock(&w->f->mu);
	if (w->connected_once)
		w->f->st.reconnects++;
	w->f->st.witnessed = w->witnessed;
	pthread_mutex_unlock(&w->f->mu);
	if (w->connected_once)
		log_info("fleet witness: connected again, at size %" PRIu64,
		    w->witnessed);
	w->connected_once = 1;
	return 0;
}

/* The signature lines of a signed note: everything after its blank line. */
static const char *
note_sigs(const char *note)
{
	const char *p = strstr(note, "\n\n");

	return p != NULL ? p + 2 : "";
}

/*
 * One checkpoint into the witness. 0 when it is there (inserted now or
 * before with the same root), 1 when the witness holds another root for
 * that size (counted, said), -1 on a database failure.
 */
static int
witness_one(struct wctx *w, uint64_t size, const char *note, int64_t ns)
{
	const struct pol_config *cfg = w->f->cfg;
	struct aud_ckpt ck;
	char sz[24], hex[2 * AUD_HASH_LEN + 1], tns[24], e[200];
	const char *p[7];
	PGresult *r;
	size_t i;
	int ins;

	if (aud_ckpt_parse(note, strlen(note), NULL, 0, &ck, e,
	    sizeof(e)) == -1 || ck.size != size) {
		/* The log's own row is broken: `audit verify` says so;
		 * the witness skips it rather than stall behind it. */
		log_warnx("fleet witness: local checkpoint %" PRIu64 " is "
		    "unreadable (%s): skipped", size, e);
		return 0;
	}
	for (i = 0; i < AUD_HASH_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", ck.root[i]);
	snprintf(sz, sizeof(sz), "%" PRIu64, size);
	snprintf(tns, sizeof(tns), "%" PRId64, ns);
	p[0] = w->f->host;
	p[1] = sz;
	p[2] = ck.origin;
	p[3] = hex;
	p[4] = note_sigs(note);
	p[5] = note;
	p[6] = tns;
	if ((r = fleet_pg_exec(w->pg, "INSERT INTO checkpoints (host, size, "
	    "origin, root, signature, note, signed_at) VALUES ($1, $2, $3, "
	    "decode($4, 'hex'), $5, $6, to_timestamp($7::double precision / "
	    "1e9)) ON CONFLICT (host, size) DO NOTHING RETURNING size", 7, p,
	    cfg->fleet_deadline_ms, w->err, sizeof(w->err))) == NULL) {
		w->lost = errno != EIO;
		return -1;
	}
	ins = PQntuples(r);
	PQclear(r);
	if (ins == 1) {
		pthread_mutex_lock(&w->f->mu);
		w->f->st.inserted++;
		pthread_mutex_unlock(&w->f->mu);
		return 0;
	}
	if ((r = fleet_pg_exec(w->pg, "SELECT encode(root, 'hex') FROM "
	    "checkpoints WHERE host = $1 AND size = $2", 2, p,
	    cfg->fleet_deadline_ms, w->err, sizeof(w->err))) == NULL) {
		w->lost = errno != EIO;
		return -1;
	}
	ins = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), hex) == 0;
	PQclear(r);
	if (ins)
		return 0;
	pthread_mutex_lock(&w->f->mu);
	w->f->st.conflicts++;
	pthread_mutex_unlock(&w->f->mu);
	log_warnx("fleet witness: the witness holds another root for size %"
	    PRIu64 " of host %s: this log was rewritten (run sluice audit "
	    "verify --witness)", size, w->f->host);
	return 1;
}

/* The local log's newest size and how many checkpoints are past from. */
static void
local_state(struct wctx *w, uint64_t from)
{
	sqlite3_stmt *st = NULL;
	uint64_t local = 0, pending = 0;

	if (sqlite3_prepare_v2(w->db, "SELECT coalesce(max(size), 0), "
	    "count(*) FILTER (WHERE size > ?) FROM checkpoints", -1, &st,
	    NULL) == SQLITE_OK && sqlite3_bind_int64(st, 1,
	    (sqlite3_int64)from) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW) {
		local = (uint64_t)sqlite3_column_int64(st, 0);
		pending = (uint64_t)sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	pthread_mutex_lock(&w->f->mu);
	w->f->st.local = local;
	w->f->st.pending = pending;
	pthread_mutex_unlock(&w->f->mu);
}

/* One round: up to WIT_BATCH checkpoints past the cursor. The number
 * sent, or -1 (the database failed; w->err says why). */
static int
round_once(struct wctx *w)
{
	sqlite3_stmt *st = NULL;
	int n = 0, rc;

	if (sqlite3_prepare_v2(w->db, "SELECT size, note, signed_ns FROM "
	    "checkpoints WHERE size > ? ORDER BY size LIMIT ?", -1, &st,
	    NULL) != SQLITE_OK) {
		/* A log being created has no table yet: nothing to send. */
		sqlite3_finalize(st);
		return 0;
	}
	sqlite3_bind_int64(st, 1, (sqlite3_int64)w->witnessed);
	sqlite3_bind_int(st, 2, WIT_BATCH);
	while (sqlite3_step(st) == SQLITE_ROW) {
		uint64_t size = (uint64_t)sqlite3_column_int64(st, 0);
		const char *note = (const char *)sqlite3_column_text(st, 1);

		if (note == NULL)
			continue;
		if ((rc = witness_one(w, size, note,
		    sqlite3_column_int64(st, 2))) == -1) {
			sqlite3_finalize(st);
			return -1;
		}
		w->witnessed = size;
		n++;
	}
	sqlite3_finalize(st);
	pthread_mutex_lock(&w->f->mu);
	w->f->st.witnessed = w->witnessed;
	w->f->st.up = 1;
	pthread_mutex_unlock(&w->f->mu);
	return n;
}

static void *
witness_main(void *arg)
{
	struct wctx w;
	int n;

	memset(&w, 0, sizeof(w));
	w.f = arg;
	if (sqlite3_open_v2(w.f->db_path, &w.db, SQLITE_OPEN_READONLY,
	    NULL) != SQLITE_OK) {
		snprintf(w.err, sizeof(w.err), "%s: %s", w.f->db_path,
		    sqlite3_errmsg(w.db));
		failed(&w, "audit log");
		sqlite3_close(w.db);
		return NULL;
	}
	sqlite3_busy_timeout(w.db, 1000);
	for (;;) {
		/* How far behind, also (above all) while the database is
		 * away: the log goes on without it. */
		local_state(&w, w.witnessed);
		if (w.pg == NULL && connect_pg(&w) == -1) {
			if (nap(w.f, w.backoff))
				break;
			continue;
		}
		if ((n = round_once(&w)) == -1) {
			/* A statement cut off mid-way leaves the
			 * connection in no known state: a new one. */
			if (w.lost || (w.pg != NULL &&
			    !fleet_pg_usable(w.pg)))
				drop(&w);
			w.lost = 0;
			failed(&w, "insert");
			if (nap(w.f, w.backoff))
				break;
			continue;
		}
		w.backoff = 0;
		if (n > 0)
			local_state(&w, w.witnessed);
		/* A full batch: more may be waiting, go on at once. */
		if (n < WIT_BATCH && nap(w.f, WIT_POLL_MS))
			break;
	}
	/* Stopped after the log's close: its final checkpoint goes too,
	 * while the database answers (one round, within the deadline). */
	if (w.pg != NULL && round_once(&w) >= 0)
		local_state(&w, w.witnessed);
	drop(&w);
	sqlite3_close(w.db);
	return NULL;
}

int
fleetd_witness_start(struct fleetd *f, const char *audit_db, char *err,
    size_t errlen)
{
	int e;

	if (f->started) {
		errno = EBUSY;
		snprintf(err, errlen, "fleet witness: already started");
		return -1;
	}
	free(f->db_path);
	if ((f->db_path = strdup(audit_db)) == NULL) {
		snprintf(err, errlen, "fleet witness: out of memory");
		return -1;
	}
	f->stop = 0;
	if ((e = pthread_create(&f->thr, NULL, witness_main, f)) != 0) {
		snprintf(err, errlen, "fleet witness: %s", strerror(e));
		errno = e;
		return -1;
	}
	f->started = 1;
	return 0;
}

void
fleetd_witness_kick(struct fleetd *f)
{
	if (f == NULL || !f->started)
		return;
	pthread_mutex_lock(&f->mu);
	f->kicked = 1;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

void
fleetd_witness_stop(struct fleetd *f)
{
	if (f == NULL || !f->started)
		return;
	pthread_mutex_lock(&f->mu);
	f->stop = 1;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thr, NULL);
	f->started = 0;
}

void
fleetd_witness_stats(const struct fleetd *f, struct fleetd_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (f == NULL)
		return;
	pthread_mutex_lock((pthread_mutex_t *)&f->mu);
	*st = f->st;
	pthread_mutex_unlock((pthread_mutex_t *)&f->mu);
}

json_t *
fleetd_status_json(const struct fleetd *f)
{
	struct fleetd_stats st;

	if (f == NULL)
		return NULL;
	fleetd_witness_stats(f, &st);
	return json_pack("{s:s, s:b, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
	    "s:s?}}", "host", f->host, "up", st.up, "witness",
	    "witnessed", (json_int_t)st.witnessed,
	    "local", (json_int_t)st.local,
	    "pending", (json_int_t)st.pending,
	    "inserted", (json_int_t)st.inserted,
	    "failures", (json_int_t)st.failures,
	    "reconnects", (json_int_t)st.reconnects,
	    "conflicts", (json_int_t)st.conflicts,
	    "last_error", st.last_error[0] != '\0' ? st.last_error : NULL);
}

void
fleetd_metrics_print(const struct fleetd *f, FILE *fp)
{
	struct fleetd_stats st;

	if (f == NULL)
		return;
	fleetd_witness_stats(f, &st);
	fprintf(fp, "# HELP sluice_fleet_witness_up 1 when the checkpoint "
	    "witness reached the fleet database in its last round.\n"
	    "# TYPE sluice_fleet_witness_up gauge\n"
	    "sluice_fleet_witness_up %d\n"
	    "# HELP sluice_fleet_witness_pending Signed checkpoints of the "
	    "local log not yet in the witness.\n"
	    "# TYPE sluice_fleet_witness_pending gauge\n"
	    "sluice_fleet_witness_pending %" PRIu64 "\n"
	    "# HELP sluice_fleet_witness_behind Records the local log holds "
	    "past the newest witnessed checkpoint's size.\n"
	    "# TYPE sluice_fleet_witness_behind gauge\n"
	    "sluice_fleet_witness_behind %" PRIu64 "\n"
	    "# HELP sluice_fleet_witness_inserted_total Checkpoints written "
	    "to the witness.\n"
	    "# TYPE sluice_fleet_witness_inserted_total counter\n"
	    "sluice_fleet_witness_inserted_total %" PRIu64 "\n"
	    "# HELP sluice_fleet_witness_failures_total Connects and rounds "
	    "of the witness that failed.\n"
	    "# TYPE sluice_fleet_witness_failures_total counter\n"
	    "sluice_fleet_witness_failures_total %" PRIu64 "\n"
	    "# HELP sluice_fleet_witness_reconnects_total Connections the "
	    "witness made again after losing one.\n"
	    "# TYPE sluice_fleet_witness_reconnects_total counter\n"
	    "sluice_fleet_witness_reconnects_total %" PRIu64 "\n"
	    "# HELP sluice_fleet_witness_conflicts_total Sizes the witness "
	    "holds with another root than this log's.\n"
	    "# TYPE sluice_fleet_witness_conflicts_total counter\n"
	    "sluice_fleet_witness_conflicts_total %" PRIu64 "\n",
	    st.up, st.pending, st.local > st.witnessed ?
	    st.local - st.witnessed : 0, st.inserted, st.failures,
	    st.reconnects, st.conflicts);
}
