/*
 * record.c: the recorder of sluiced. audit/ knows how to
 * store, chain and sign records; this is the one place the daemon submits
 * them from: it opens the log from the config, hands the SOC sinks their
 * wake-ups, keeps the heartbeat, and gives producers the three ways a
 * record can go (async, durable with a callback, committed before the
 * caller acts). What a record says is the producer's (see record.h).
 */
#include <sys/stat.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/record_int.h"

struct rec {
	const struct pol_config	*cfg;
	struct aud_log		*log;		/* NULL while suspended */
	struct aud_sink		**sinks;	/* the SOC feed, one per sink */
	size_t			 nsinks;
	struct ev_loop		*loop;
	struct ev_timer		*hb;
	char			*db_path;
	uint64_t		 async_ok, durable_ok, failures;
	struct rec_space	*space;		/* the volume, late records */
	struct rec_tally	*tally;		/* NULL while suspended */
};

static void	arm_heartbeat(struct rec *r);

/* Durable commits and heartbeats wake the shippers; async records are
 * picked up by their slow poll. */
static void
kick_sinks(struct rec *r)
{
	size_t i;

	for (i = 0; i < r->nsinks; i++)
		aud_sink_kick(r->sinks[i]);
}

/* Runs in a shipper thread: aud_submit_async is thread-safe, the rec
 * counters are not, so this goes to the log directly. */
static void
on_sink_finding(void *arg, json_t *fields)
{
	struct rec *r = arg;

	log_warn("audit sink %s: lag %lld past its alert threshold",
	    json_string_value(json_object_get(fields, "sink")),
	    (long long)json_integer_value(json_object_get(fields, "lag")));
	if (aud_submit_async(r->log, "finding", fields) == -1)
		log_warn("audit: finding not recorded");
}

static void
close_sinks(struct rec *r)
{
	size_t i;

	for (i = 0; i < r->nsinks; i++)
		aud_sink_free(r->sinks[i]);
	free(r->sinks);
	r->sinks = NULL;
	r->nsinks = 0;
}

static int
open_sinks(struct rec *r, const struct pol_config *cfg, char *err,
    size_t errlen)
{
	struct aud_sink_hooks hk = { on_sink_finding, r };
	struct aud_sink_conf c;
	const struct pol_sink *ps;
	char serr[512];
	size_t i;

	if (cfg->nsinks == 0)
		return 0;
	if ((r->sinks = calloc(cfg->nsinks, sizeof(*r->sinks))) == NULL) {
		snprintf(err, errlen, "audit sinks: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < cfg->nsinks; i++) {
		ps = &cfg->sinks[i];
		memset(&c, 0, sizeof(c));
		c.name = ps->name;
		c.type = ps->type == POL_SINK_FILE ? AUD_SINK_FILE :
		    ps->type == POL_SINK_SYSLOG ? AUD_SINK_SYSLOG :
		    AUD_SINK_WEBHOOK;
		c.format = ps->format == POL_FMT_OCSF ? AUD_SINK_OCSF :
		    AUD_SINK_JSON;
		c.target = ps->target;
		c.splunk_hec = ps->splunk_hec;
		c.token_file = ps->token_file;
		c.lag_alert = ps->lag_alert;
		if ((r->sinks[i] = aud_sink_new(r->db_path, &c, &hk, serr,
		    sizeof(serr))) == NULL ||
		    aud_sink_start(r->sinks[i], serr, sizeof(serr)) == -1) {
			snprintf(err, errlen, "audit sink %s: %s", ps->name,
			    serr);
			r->nsinks = i + 1;
			close_sinks(r);
			return -1;
		}
		r->nsinks = i + 1;
	}
	return 0;
}

static void
on_notify(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct rec *r = arg;

	(void)loop;
	(void)fd;
	(void)events;
	aud_dispatch(r->log);
	kick_sinks(r);
}

static void
on_heartbeat(struct ev_loop *loop, void *arg)
{
	struct rec *r = arg;

	(void)loop;
	r->hb = NULL;
	kick_sinks(r);
	/* A heartbeat also forces a signed checkpoint, so an idle log still
	 * proves every minute that nothing was cut from its tail. */
	if (aud_heartbeat(r->log) == -1)
		log_warn("audit: heartbeat");
	arm_heartbeat(r);
}

static void
arm_heartbeat(struct rec *r)
{
	if ((r->hb = ev_timer_add(r->loop, REC_HEARTBEAT_MS, on_heartbeat,
	    r)) == NULL)
		log_warn("audit: heartbeat timer");
}

/* mkdir -p of the directory holding path, new directories mode 0750: a
 * fresh install has no state directory yet, and the log is the first thing
 * the daemon writes there. 0 or -1 with errno. */
static int
mkdir_parent(const char *path)
{
	char *buf, *p, *slash;
	int rc = 0;

	if ((buf = strdup(path)) == NULL)
		return -1;
	if ((slash = strrchr(buf, '/')) == NULL || slash == buf) {
		free(buf);
		return 0;
	}
	*slash = '\0';
	for (p = buf + 1; rc == 0; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;

			*p = '\0';
			if (mkdir(buf, 0750) == -1 && errno != EEXIST)
				rc = -1;
			if ((*p = c) == '\0')
				break;
		}
	}
	free(buf);
	return rc;
}

/* Opens the log of r and everything that lives with it. 0, or -1 with
 * errno and err; r is left suspended then. */
static int
rec_start(struct rec *r, char *err, size_t errlen)
{
	struct aud_opts o;
	char aerr[512];
	int e;

	if (mkdir_parent(r->db_path) == -1) {
		e = errno;
		snprintf(err, errlen, "audit log %s: %s", r->db_path,
		    strerror(e));
		errno = e;
		return -1;
	}
	memset(&o, 0, sizeof(o));
	o.db_path = r->db_path;
	o.origin = r->cfg->audit_origin;
	o.key_path = r->cfg->audit_key;
	o.reserve_bytes = (uint64_t)r->cfg->audit_reserve_kib * 1024;
	if ((r->log = aud_open(&o, aerr, sizeof(aerr))) == NULL) {
		e = errno;
		snprintf(err, errlen, "audit log %s: %s", r->db_path, aerr);
		errno = e;
		return -1;
	}
	if (ev_add(r->loop, aud_notify_fd(r->log), EV_READ, on_notify, r) ==
	    -1) {
		e = errno;
		snprintf(err, errlen, "audit: event loop: %s", strerror(e));
		aud_close(r->log);
		r->log = NULL;
		errno = e;
		return -1;
	}
	if (open_sinks(r, r->cfg, err, errlen) == -1) {
		ev_del(r->loop, aud_notify_fd(r->log));
		aud_close(r->log);
		r->log = NULL;
		errno = EINVAL;
		return -1;
	}
	arm_heartbeat(r);
	/* Without it every event is recorded on its own, as with no
	 * recorder: more records, none lost. */
	if ((r->tally = rec_tally_new(r, r->loop)) == NULL)
		log_warn("audit: summaries");
	rec_space_attach(r->space, r->log);
	return 0;
}

/* The reverse of rec_start; a suspended r is left as it is. */
static void
rec_stop(struct rec *r)
{
	uint64_t lost;

	if (r->log == NULL)
		return;
	/* Summaries and held records still go in, while the log is open. */
	rec_tally_free(r->tally);
	r->tally = NULL;
	rec_space_detach(r->space);
	ev_timer_cancel(r->loop, r->hb);
	r->hb = NULL;
	ev_del(r->loop, aud_notify_fd(r->log));
	/* The shippers stop first: what they had not delivered is still in
	 * the log, and their cursors say where to resume. */
	close_sinks(r);
	/* aud_close runs the pending done callbacks itself. */
	if ((lost = aud_close(r->log)) > 0)
		log_warnx("audit: %llu records could not be written at "
		    "shutdown, not even as a gap (database locked, full or "
		    "failing)", (unsigned long long)lost);
	r->log = NULL;
}

struct rec *
rec_open(const struct pol_config *cfg, struct ev_loop *loop, char *err,
    size_t errlen)
{
	struct rec *r;
	int e;

	if (cfg == NULL || loop == NULL) {
		snprintf(err, errlen, "audit: no config");
		errno = EINVAL;
		return NULL;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		snprintf(err, errlen, "audit: %s", strerror(errno));
		return NULL;
	}
	r->cfg = cfg;
	r->loop = loop;
	if (cfg->audit_db != NULL && cfg->audit_db[0] != '\0')
		r->db_path = strdup(cfg->audit_db);
	else if (asprintf(&r->db_path, "%s/audit.db", cfg->state_dir) == -1)
		r->db_path = NULL;
	if (r->db_path == NULL ||
	    (r->space = rec_space_new(r, loop, cfg, r->db_path)) == NULL) {
		e = errno;
		snprintf(err, errlen, "audit: %s", strerror(e));
		free(r->db_path);
		free(r);
		errno = e;
		return NULL;
	}
	if (rec_start(r, err, errlen) == -1) {
		e = errno;
		rec_space_free(r->space);
		free(r->db_path);
		free(r);
		errno = e;
		return NULL;
	}
	return r;
}

void
rec_suspend(struct rec *r)
{
	if (r != NULL)
		rec_stop(r);
}

int
rec_reopen(struct rec *r, char *err, size_t errlen)
{
	if (r->log != NULL) {
		snprintf(err, errlen, "audit log already open");
		errno = EBUSY;
		return -1;
	}
	return rec_start(r, err, errlen);
}

void
rec_close(struct rec *r)
{
	if (r == NULL)
		return;
	rec_stop(r);
	rec_space_free(r->space);
	free(r->db_path);
	free(r);
}

int
rec_is_open(const struct rec *r)
{
	return r != NULL && r->log != NULL;
}

struct rec_tally *
rec_tally_of(const struct rec *r)
{
	return r != NULL ? r->tally : NULL;
}

struct rec_space *
rec_space_of(const struct rec *r)
{
	return r != NULL ? r->space : NULL;
}

const char *
rec_db_path(const struct rec *r)
{
	return r->db_path;
}

uint64_t
rec_next_seq(const struct rec *r)
{
	return r != NULL && r->log != NULL ? aud_next_seq(r->log) : 0;
}

static int
refuse(struct rec *r, json_t *fields, int e)
{
	json_decref(fields);
	if (r != NULL)
		r->failures++;
	errno = e;
	return -1;
}

int
rec_async(struct rec *r, const char *kind, json_t *fields)
{
	if (!rec_is_open(r))
		return refuse(r, fields, EPIPE);
	/* fields NULL (the converter ran out of memory) goes on: the log
	 * counts the lost record and writes it as a log.gap. */
	if (aud_submit_async(r->log, kind, fields) == -1) {
		r->failures++;
		return -1;
	}
	r->async_ok++;
	return 0;
}

int
rec_canon(struct rec *r, const char *kind, const char *body, size_t len)
{
	if (!rec_is_open(r)) {
		errno = EPIPE;
		return -1;
	}
	if (aud_submit_canon(r->log, kind, body, len) == -1) {
		r->failures++;
		return -1;
	}
	r->async_ok++;
	return 0;
}

int
rec_durable(struct rec *r, const char *kind, json_t *fields, aud_done_fn done,
    void *arg)
{
	if (!rec_is_open(r))
		return refuse(r, fields, EPIPE);
	if (fields == NULL)
		return refuse(r, NULL, ENOMEM);
	if (aud_submit_durable(r->log, kind, fields, done, arg) == -1) {
		r->failures++;
		return -1;
	}
	r->durable_ok++;
	return 0;
}

struct commit_wait {
	int		fired, ok, abandoned;
	uint64_t	seq;
};

static void
commit_done(void *arg, int ok, uint64_t seq)
{
	struct commit_wait *w = arg;

	if (w->abandoned) {
		free(w);
		return;
	}
	w->fired = 1;
	w->ok = ok;
	w->seq = seq;
}

int
rec_commit(struct rec *r, const char *kind, json_t *fields, uint64_t *seq,
    char *err, size_t errlen)
{
	struct commit_wait *w;
	int ok;

	if ((w = calloc(1, sizeof(*w))) == NULL) {
		json_decref(fields);
		snprintf(err, errlen, "audit record %s: %s", kind,
		    strerror(errno));
		return -1;
	}
	if (rec_durable(r, kind, fields, commit_done, w) == -1) {
		snprintf(err, errlen, "audit record %s: %s", kind,
		    strerror(errno));
		free(w);
		return -1;
	}
	/* aud_sync returns once the writer has finished everything queued so
	 * far, ours included; its completion is then on the list that
	 * aud_dispatch runs (with any others, all on this thread). */
	(void)aud_sync(r->log);
	aud_dispatch(r->log);
	kick_sinks(r);
	if (!w->fired) {
		/* Only if the writer stopped: the completion comes later
		 * (aud_close runs it) and frees w then. */
		w->abandoned = 1;
		r->failures++;
		snprintf(err, errlen, "audit record %s: not committed", kind);
		errno = EIO;
		return -1;
	}
	ok = w->ok;
	if (seq != NULL)
		*seq = w->seq;
	free(w);
	if (!ok) {
		r->failures++;
		snprintf(err, errlen, "audit record %s: not committed", kind);
		errno = EIO;
		return -1;
	}
	return 0;
}

void
rec_metrics_print(const struct rec *r, FILE *fp)
{
	if (!rec_is_open(r))
		return;
	fprintf(fp,
	    "# HELP sluice_audit_records_total Records handed to the audit "
	    "log.\n"
	    "# TYPE sluice_audit_records_total counter\n"
	    "sluice_audit_records_total{mode=\"async\"} %" PRIu64 "\n"
	    "sluice_audit_records_total{mode=\"durable\"} %" PRIu64 "\n"
	    "# HELP sluice_audit_submit_failures_total Records the log "
	    "refused.\n"
	    "# TYPE sluice_audit_submit_failures_total counter\n"
	    "sluice_audit_submit_failures_total %" PRIu64 "\n"
	    "# HELP sluice_audit_dropped_total Records lost to a full queue "
	    "(written as log.gap).\n"
	    "# TYPE sluice_audit_dropped_total counter\n"
	    "sluice_audit_dropped_total %" PRIu64 "\n"
	    "# HELP sluice_audit_next_seq The next record's seq.\n"
	    "# TYPE sluice_audit_next_seq gauge\n"
	    "sluice_audit_next_seq %" PRIu64 "\n",
	    r->async_ok, r->durable_ok, r->failures,
	    aud_dropped(r->log), aud_next_seq(r->log));
	if (r->space != NULL)
		rec_space_metrics_print(r->space, fp);
	if (r->tally != NULL)
		rec_tally_metrics_print(r->tally, fp);
	if (r->nsinks > 0) {
		struct aud_sink_stats st;
		size_t i;

		fprintf(fp, "# HELP sluice_audit_sink_lag Records in the log "
		    "not yet acknowledged by the sink.\n"
		    "# TYPE sluice_audit_sink_lag gauge\n");
		for (i = 0; i < r->nsinks; i++)
			fprintf(fp, "sluice_audit_sink_lag{sink=\"%s\"} %"
			    PRIu64 "\n", aud_sink_name(r->sinks[i]),
			    aud_sink_lag(r->sinks[i]));
		fprintf(fp, "# HELP sluice_audit_sink_next_seq The sink's "
		    "durable cursor.\n"
		    "# TYPE sluice_audit_sink_next_seq gauge\n");
		for (i = 0; i < r->nsinks; i++) {
			aud_sink_stats(r->sinks[i], &st);
			fprintf(fp, "sluice_audit_sink_next_seq{sink=\"%s\"} %"
			    PRIu64 "\n", aud_sink_name(r->sinks[i]),
			    st.next_seq);
		}
		fprintf(fp, "# HELP sluice_audit_sink_failures_total "
		    "Deliveries that were not acknowledged.\n"
		    "# TYPE sluice_audit_sink_failures_total counter\n");
		for (i = 0; i < r->nsinks; i++) {
			aud_sink_stats(r->sinks[i], &st);
			fprintf(fp, "sluice_audit_sink_failures_total{sink="
			    "\"%s\"} %" PRIu64 "\n",
			    aud_sink_name(r->sinks[i]), st.failures);
		}
	}
}
