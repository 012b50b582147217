/*
 * gw.c: the daemon's core state and its three built-in endpoints (status,
 * reload, metrics). Reload follows unwind's rule: parse everything first,
 * swap only when all of it is valid; a bad file leaves the daemon exactly as
 * it was, apart from the failure counter and the remembered error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/brwire.h"
#include "gateway/dnswire.h"
#include "gateway/ev.h"
#include "gateway/fleet/fleetd.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/netdeny.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"

#define GW_MAX_ERRORS	64	/* errors kept per failed load */
#define GW_RELOAD_HOOKS	4

struct gw_pset {
	unsigned	 refs;
	struct pol_set	*set;
};

struct gw {
	struct pol_config	*cfg;
	struct gw_pset		*cur;
	uint64_t		 started_ms;	/* monotonic */
	time_t			 started_at;	/* wall clock, for humans */
	uint64_t		 reloads_ok;
	uint64_t		 reload_failures;
	json_t			*last_error;	/* array of strings, or NULL */
	size_t			 not_updated;	/* sandboxes the last reload
						   left on old rules */
	time_t			 last_reload_at;
	struct ctl		*ctl;		/* for /metrics; borrowed */
	struct sbx		*sbx;		/* borrowed, may be NULL */
	struct nd		*nd;		/* borrowed, may be NULL */
	struct dnsw		*dns;		/* borrowed, may be NULL */
	struct brw		*brw;		/* borrowed, may be NULL */
	struct rec		*rec;		/* borrowed, may be NULL */
	struct fleetd		*fleet;		/* borrowed, may be NULL */
	struct {
		void	(*fn)(void *);
		void	*ctx;
	}			 on_reload[GW_RELOAD_HOOKS];
	size_t			 non_reload;
};

static struct gw_pset *
pset_new(struct pol_set *set)
{
	struct gw_pset *ps;

	if ((ps = calloc(1, sizeof(*ps))) == NULL)
		return NULL;
	ps->refs = 1;
	ps->set = set;
	return ps;
}

void
gw_pset_unref(struct gw_pset *ps)
{
	if (ps == NULL || --ps->refs > 0)
		return;
	pol_set_free(ps->set);
	free(ps);
}

struct gw_pset *
gw_pset_ref(struct gw *gw)
{
	gw->cur->refs++;
	return gw->cur;
}

const struct pol_set *
gw_pset_set(const struct gw_pset *ps)
{
	return ps->set;
}

struct gw *
gw_new(struct pol_config *cfg, struct pol_set *set)
{
	struct gw *gw;

	if (cfg == NULL || set == NULL) {
		errno = EINVAL;
		goto fail;
	}
	if ((gw = calloc(1, sizeof(*gw))) == NULL)
		goto fail;
	if ((gw->cur = pset_new(set)) == NULL) {
		free(gw);
		goto fail;
	}
	gw->cfg = cfg;
	gw->started_ms = ev_now_ms();
	gw->started_at = time(NULL);
	return gw;
fail:
	pol_set_free(set);
	pol_config_free(cfg);
	return NULL;
}

void
gw_free(struct gw *gw)
{
	if (gw == NULL)
		return;
	gw_pset_unref(gw->cur);
	json_decref(gw->last_error);
	pol_config_free(gw->cfg);
	free(gw);
}

const struct pol_config *
gw_config(const struct gw *gw)
{
	return gw->cfg;
}

static json_t *
errors_json(const struct pol_errors *errs)
{
	json_t *a = json_array();
	size_t i, n = pol_errors_count(errs);
	const char *m;

	if (a == NULL)
		return NULL;
	for (i = 0; (m = pol_errors_get(errs, i)) != NULL; i++)
		json_array_append_new(a, json_string(m));
	if (n > i)
		json_array_append_new(a, json_sprintf("... and %zu more "
		    "errors", n - i));
	return a;
}

int
gw_reload(struct gw *gw, struct pol_errors *errs)
{
	struct pol_errors *own = NULL;
	struct pol_set *set;
	struct gw_pset *ps;
	const char *m;
	size_t i;

	if (errs == NULL && (errs = own = pol_errors_new(GW_MAX_ERRORS)) ==
	    NULL) {
		log_warn("reload");
		gw->reload_failures++;
		return -1;
	}
	gw->last_reload_at = time(NULL);
	set = pol_set_load_dir(gw->cfg->policy_dir, gw->cfg, errs);
	if (set == NULL || (ps = pset_new(set)) == NULL) {
		if (set != NULL) {
			pol_set_free(set);
			pol_errors_add(errs, gw->cfg->policy_dir, 0, 0,
			    "out of memory");
		} else if (pol_errors_count(errs) == 0)
			pol_errors_add(errs, gw->cfg->policy_dir, 0, 0,
			    "cannot load policies: %s", strerror(errno));
		gw->reload_failures++;
		json_decref(gw->last_error);
		gw->last_error = errors_json(errs);
		log_warnx("reload failed, the previous %zu policies stay in "
		    "force", pol_set_count(gw->cur->set));
		if (rec_async(gw->rec, "policy.reload", rec_reload_fields(false,
		    gw->cfg->policy_dir, gw_policies_json(gw), errs)) == -1)
			log_warn("policy.reload record");
		for (i = 0; (m = pol_errors_get(errs, i)) != NULL; i++)
			log_warnx("reload: %s", m);
		if (pol_errors_count(errs) > i)
			log_warnx("reload: ... and %zu more errors",
			    pol_errors_count(errs) - i);
		pol_errors_free(own);
		return -1;
	}
	gw_pset_unref(gw->cur);
	gw->cur = ps;
	gw->reloads_ok++;
	json_decref(gw->last_error);
	gw->last_error = NULL;
	log_info("reload: %zu policies loaded from %s", pol_set_count(set),
	    gw->cfg->policy_dir);
	if (rec_async(gw->rec, "policy.reload", rec_reload_fields(true,
	    gw->cfg->policy_dir, gw_policies_json(gw), NULL)) == -1)
		log_warn("policy.reload record");
	/* Copies of the set elsewhere (the DNS process) first, so that the
	 * sandboxes' changes below find their policies there. */
	for (i = 0; i < gw->non_reload; i++)
		gw->on_reload[i].fn(gw->on_reload[i].ctx);
	/* Live sandboxes follow the new set (after its record); those that
	 * could not are reported with the reload. */
	gw->not_updated = sbx_reapply(gw->sbx);
	pol_errors_free(own);
	return 0;
}

size_t
gw_not_updated(const struct gw *gw)
{
	return gw->not_updated;
}

json_t *
gw_policies_json(struct gw *gw)
{
	const struct pol_set *set = gw->cur->set;
	json_t *a = json_array();
	size_t i;

	if (a == NULL)
		return NULL;
	for (i = 0; i < pol_set_count(set); i++) {
		const struct pol_policy *p = pol_set_at(set, i);

		if (json_array_append_new(a, json_pack("{s:s, s:s}", "name",
		    pol_policy_name(p), "digest", pol_policy_digest(p))) ==
		    -1) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static void
iso_time(time_t t, char *buf, size_t len)
{
	struct tm tm;

	if (t == 0 || gmtime_r(&t, &tm) == NULL) {
		snprintf(buf, len, "never");
		return;
	}
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

json_t *
gw_status_json(struct gw *gw)
{
	char started[32];
	json_t *pols, *mcp, *fl;

	if ((pols = gw_policies_json(gw)) == NULL)
		return NULL;
	iso_time(gw->started_at, started, sizeof(started));
	return json_pack("{s:s, s:I, s:I, s:s, s:s, s:o, s:I, s:I, s:I, s:O, "
	    "s:o, s:I, s:o, s:o}",
	    "version", SLUICE_VERSION,
	    "pid", (json_int_t)getpid(),
	    "uptime_s", (json_int_t)((ev_now_ms() - gw->started_ms) / 1000),
	    "started_at", started,
	    "policy_dir", gw->cfg->policy_dir,
	    "policies", pols,
	    "policies_loaded", (json_int_t)pol_set_count(gw->cur->set),
	    "reloads_ok", (json_int_t)gw->reloads_ok,
	    "reload_failures", (json_int_t)gw->reload_failures,
	    "last_reload_error", gw->last_error != NULL ? gw->last_error :
	    json_null(),
	    "last_reload_at", gw->last_reload_at == 0 ? json_null() :
	    json_integer((json_int_t)gw->last_reload_at),
	    "sandboxes", (json_int_t)(gw->sbx != NULL ? sbx_count(gw->sbx) :
	    0),
	    /* The bridge's counters, or null when it does not run. */
	    "mcp", (mcp = brw_status_json(gw->brw)) != NULL ? mcp :
	    json_null(),
	    /* The shared store of a fleet, or null without one. */
	    "fleet", (fl = fleetd_status_json(gw->fleet)) != NULL ? fl :
	    json_null());
}

void
gw_metrics_print(struct gw *gw, const struct ctl *ctl, FILE *fp)
{
	fprintf(fp,
	    "# HELP sluice_up Whether sluiced is serving.\n"
	    "# TYPE sluice_up gauge\n"
	    "sluice_up 1\n"
	    "# HELP sluice_build_info Build of the running sluiced.\n"
	    "# TYPE sluice_build_info gauge\n"
	    "sluice_build_info{version=\"%s\"} 1\n"
	    "# HELP sluice_uptime_seconds Seconds since sluiced started.\n"
	    "# TYPE sluice_uptime_seconds gauge\n"
	    "sluice_uptime_seconds %llu\n"
	    "# HELP sluice_policies_loaded Policies in force.\n"
	    "# TYPE sluice_policies_loaded gauge\n"
	    "sluice_policies_loaded %zu\n"
	    "# HELP sluice_reloads_total Policy reloads by result.\n"
	    "# TYPE sluice_reloads_total counter\n"
	    "sluice_reloads_total{result=\"ok\"} %llu\n"
	    "sluice_reloads_total{result=\"error\"} %llu\n",
	    SLUICE_VERSION,
	    (unsigned long long)((ev_now_ms() - gw->started_ms) / 1000),
	    pol_set_count(gw->cur->set),
	    (unsigned long long)gw->reloads_ok,
	    (unsigned long long)gw->reload_failures);
	if (gw->sbx != NULL)
		sbx_metrics_print(gw->sbx, fp);
	else
		fprintf(fp, "# HELP sluice_sandboxes Sandboxes that exist.\n"
		    "# TYPE sluice_sandboxes gauge\nsluice_sandboxes 0\n");
	if (gw->nd != NULL)
		nd_metrics_print(gw->nd, fp);
	rec_metrics_print(gw->rec, fp);
	dnsw_metrics_print(gw->dns, fp);
	brw_metrics_print(gw->brw, fp);
	fleetd_metrics_print(gw->fleet, fp);
	if (ctl != NULL)
		ctl_metrics_print(ctl, fp);
}

static enum ctl_rc
h_status(struct ctl_req *req, void *arg)
{
	json_t *o = gw_status_json(arg);

	if (o == NULL)
		return ctl_reply_error(req, 500, "internal", "out of memory");
	return ctl_reply_json(req, 200, o);
}

static enum ctl_rc
h_reload(struct ctl_req *req, void *arg)
{
	struct gw *gw = arg;
	struct pol_errors *errs;
	json_t *o;

	if ((errs = pol_errors_new(GW_MAX_ERRORS)) == NULL)
		return ctl_reply_error(req, 500, "internal", "out of memory");
	if (gw_reload(gw, errs) == 0) {
		pol_errors_free(errs);
		/* The set is in force either way; sandboxes left on their
		 * old rules (sandbox.reapply_failed findings) are said, so
		 * that "reloaded" never hides them. */
		o = json_pack("{s:s, s:o*, s:I}", "result", "ok", "policies",
		    gw_policies_json(gw), "sandboxes_not_updated",
		    (json_int_t)gw->not_updated);
		if (o == NULL)
			return ctl_reply_error(req, 500, "internal",
			    "out of memory");
		return ctl_reply_json(req, 200, o);
	}
	o = json_pack("{s:s, s:s, s:o*, s:o*}", "error", "reload_failed",
	    "message", "the policy directory has errors; the previous "
	    "policies stay in force",
	    "errors", errors_json(errs),
	    "policies", gw_policies_json(gw));
	pol_errors_free(errs);
	if (o == NULL)
		return ctl_reply_error(req, 500, "internal", "out of memory");
	return ctl_reply_json(req, 422, o);
}

static enum ctl_rc
h_metrics(struct ctl_req *req, void *arg)
{
	struct gw *gw = arg;
	char *buf = NULL;
	size_t len = 0;
	FILE *fp;
	enum ctl_rc rc;

	if ((fp = open_memstream(&buf, &len)) == NULL)
		return ctl_reply_error(req, 500, "internal", "out of memory");
	gw_metrics_print(gw, gw->ctl, fp);
	if (fclose(fp) != 0 || buf == NULL) {
		free(buf);
		return ctl_reply_error(req, 500, "internal", "out of memory");
	}
	rc = ctl_reply_text(req, 200, "text/plain; version=0.0.4", buf);
	free(buf);
	return rc;
}

void
gw_set_sandboxes(struct gw *gw, struct sbx *sbx, struct nd *nd)
{
	gw->sbx = sbx;
	gw->nd = nd;
}

void
gw_set_dns(struct gw *gw, struct dnsw *dns)
{
	gw->dns = dns;
}

void
gw_set_rec(struct gw *gw, struct rec *rec)
{
	gw->rec = rec;
}

void
gw_set_fleet(struct gw *gw, struct fleetd *fleet)
{
	gw->fleet = fleet;
}

void
gw_set_brw(struct gw *gw, struct brw *brw)
{
	gw->brw = brw;
}

int
gw_on_reload(struct gw *gw, void (*fn)(void *ctx), void *ctx)
{
	if (gw->non_reload == GW_RELOAD_HOOKS) {
		errno = ENOSPC;
		return -1;
	}
	gw->on_reload[gw->non_reload].fn = fn;
	gw->on_reload[gw->non_reload++].ctx = ctx;
	return 0;
}

int
gw_routes(struct gw *gw, struct ctl *ctl)
{
	gw->ctl = ctl;
	if (ctl_route(ctl, "GET", "/v1/status", h_status, gw) == -1 ||
	    ctl_route(ctl, "POST", "/v1/reload", h_reload, gw) == -1 ||
	    ctl_route(ctl, "GET", "/metrics", h_metrics, gw) == -1)
		return -1;
	return 0;
}
