/*
 * brwire.c: the capability bridge inside sluiced (see gateway/brwire.h).
 * gateway/bridge/ decides nothing about identity, records and the firewall
 * by itself; this file gives it the daemon's answers: the sandbox manager's
 * index plus the bearer token for identity, the policy set in force held by
 * reference for as long as a call runs, gateway/record.c for durable
 * mcp.call records and findings, and sbx_taint to narrow egress. The
 * control API's approvals and pins endpoints live here too, as thin
 * translations to the bridge's functions; an approval is made in the name
 * of the uid the control socket's kernel credentials give, whatever the
 * request body says.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/bridge/bridge.h"
#include "gateway/brwire.h"
#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"

struct rec_wait;

struct brw {
	struct br	*br;
	struct rec	*rec;		/* borrowed, may be NULL */
	struct gw	*gw;
	struct sbx	*sbx;
	uint64_t	 calls_allow, calls_deny;
	uint64_t	 auth_failures, findings, record_failures;
	uint64_t	 taints, taint_failures;
	/* How long calls wait for their durable record: the part of a
	 * tools/call's latency the audit log adds (a Prometheus summary). */
	uint64_t	 record_waits, record_wait_us;
	/* Records still being committed: their completion may come after
	 * brw_stop (the log's close runs it), which detaches them. */
	struct rec_wait	*waits;
};

/* Copies s into dst (size bytes) whole, or -1 when it does not fit. */
static int
cp(char *dst, size_t size, const char *s)
{
	size_t n = strlen(s);

	if (n >= size)
		return -1;
	memcpy(dst, s, n + 1);
	return 0;
}

/* A reference to the set in force, with the policy picked from it: the
 * bridge hands the pointer back to release() once the call is finished. */
static int
h_identify(void *ctx, const struct sockaddr *src, socklen_t len,
    const char *token, struct br_client *out)
{
	struct brw *w = ctx;
	const struct sockaddr_in *sin;
	struct gw_pset *ps;
	struct sbx_view v;
	size_t i;

	/* Sandboxes only have IPv4 pool addresses; anything else, and any
	 * request without a token, is nobody. */
	if (src == NULL || src->sa_family != AF_INET ||
	    len < (socklen_t)sizeof(*sin) || token == NULL)
		return -1;
	sin = (const struct sockaddr_in *)(const void *)src;
	if (sbx_lookup_addr4(w->sbx, (const uint8_t *)&sin->sin_addr,
	    &v) == -1)
		return -1;
	/* The address alone is not enough (a process inside the sandbox may
	 * be handed a stolen token, or the token may leak to another
	 * sandbox): both must name the same sandbox. */
	if (!sbx_token_ok(w->sbx, v.id, token))
		return -1;
	/* A bridge request is activity (resources.idle). */
	sbx_touch_id(w->sbx, v.id);
	memset(out, 0, sizeof(*out));
	/* The bridge's fields are a byte shorter than the manager's limits
	 * for subjects and label values: a value that does not fit would be
	 * matched truncated by the policy, so it is refused instead. */
	if (cp(out->id, sizeof(out->id), v.id) == -1 ||
	    cp(out->subject, sizeof(out->subject), v.subject) == -1 ||
	    v.nlabels > BR_MAX_LABELS)
		return -1;
	for (i = 0; i < v.nlabels; i++)
		if (cp(out->label_keys[i], sizeof(out->label_keys[i]),
		    v.label_keys[i]) == -1 ||
		    cp(out->label_values[i], sizeof(out->label_values[i]),
		    v.label_values[i]) == -1)
			return -1;
	out->nlabels = i;
	out->tainted = v.tainted;
	ps = gw_pset_ref(w->gw);
	/* A sandbox whose policy vanished in a reload calls nothing:
	 * refusing is the closed way to fail. */
	if ((out->policy = pol_set_get(gw_pset_set(ps), v.policy)) == NULL) {
		gw_pset_unref(ps);
		return -1;
	}
	out->policy_ref = ps;
	return 0;
}

static void
h_release(void *ctx, void *policy_ref)
{
	(void)ctx;
	gw_pset_unref(policy_ref);
}

/* Sets key to a string only when s is given: absent fields stay absent
 * rather than becoming "" in the log. */
static int
put_opt(json_t *o, const char *key, const char *s)
{
	if (s == NULL)
		return 0;
	return rec_put(o, key, rec_string(s));
}

/*
 * The fields of an mcp.call record or of a finding. Arguments and budget
 * state are kept as JSON text, not as objects: their keys come from the
 * sandbox and from policy names, and the canonical record format only takes
 * keys in [a-z0-9_] (an object would get the whole record refused).
 */
static json_t *
ev_fields(const struct br_event *ev)
{
	json_t *o;
	int bad = 0;

	if ((o = json_object()) == NULL)
		return NULL;
	if (ev->sandbox != NULL)
		bad |= rec_put(o, "sandbox", rec_sandbox_json(ev->sandbox));
	if (ev->policy != NULL)
		bad |= rec_put(o, "policy", ev->rule != NULL ?
		    json_pack("{s:o,s:o}", "id", rec_string(ev->policy),
		    "rule", rec_string(ev->rule)) :
		    json_pack("{s:o}", "id", rec_string(ev->policy)));
	bad |= put_opt(o, "subject", ev->subject);
	bad |= put_opt(o, "client", ev->src);
	bad |= put_opt(o, "session", ev->session);
	bad |= put_opt(o, "server", ev->server);
	bad |= put_opt(o, "tool", ev->tool);
	bad |= put_opt(o, "arguments", ev->args);
	bad |= put_opt(o, "arguments_digest", ev->args_digest);
	bad |= put_opt(o, "decision", ev->decision);
	bad |= put_opt(o, "rule", ev->rule);
	bad |= put_opt(o, "reason", ev->reason != POL_REASON_NONE ?
	    pol_reason_name(ev->reason) : NULL);
	bad |= put_opt(o, "message", ev->message);
	bad |= put_opt(o, "budget", ev->budget);
	bad |= put_opt(o, "approver", ev->approver);
	if (ev->approver != NULL && ev->approver_uid >= 0)
		bad |= rec_put(o, "approver_uid",
		    json_integer(ev->approver_uid));
	bad |= put_opt(o, "approver_note", ev->approver_note);
	bad |= put_opt(o, "approval", ev->approval);
	bad |= put_opt(o, "classification", ev->classification);
	if (ev->kind == BR_EV_CALL) {
		bad |= rec_put(o, "taints", json_boolean(ev->taints));
		bad |= rec_put(o, "upstream_latency_us",
		    json_integer(ev->upstream_latency_us));
		bad |= rec_put(o, "result_bytes",
		    json_integer((json_int_t)ev->result_bytes));
		bad |= rec_put(o, "redactions", json_integer(ev->redactions));
	}
	bad |= put_opt(o, "result_digest", ev->result_digest);
	bad |= put_opt(o, "detail", ev->detail);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* rec_durable's completion carries a sequence number the bridge does not
 * want; this carries the bridge's own callback across. */
struct rec_wait {
	struct rec_wait	*next, **prevp;	/* on w->waits while w lives */
	struct brw	*w;		/* NULL once brw_stop has run */
	br_record_done	*done;
	void		*arg;
	uint64_t	 t0_us;
};

static uint64_t
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void
on_durable(void *arg, int ok, uint64_t seq)
{
	struct rec_wait rw = *(struct rec_wait *)arg;

	(void)seq;
	if (rw.w != NULL) {
		if ((*rw.prevp = rw.next) != NULL)
			rw.next->prevp = rw.prevp;
		if (!ok)
			rw.w->record_failures++;
		rw.w->record_waits++;
		rw.w->record_wait_us += mono_us() - rw.t0_us;
	}
	free(arg);
	rw.done(rw.arg, ok);
}

static int
h_record(void *ctx, const struct br_event *ev, br_record_done *done,
    void *arg)
{
	struct brw *w = ctx;
	struct rec_wait *rw;

	if (ev->decision != NULL && strcmp(ev->decision, "allow") == 0)
		w->calls_allow++;
	else
		w->calls_deny++;
	if ((rw = malloc(sizeof(*rw))) == NULL) {
		w->record_failures++;
		return -1;
	}
	rw->w = w;
	rw->done = done;
	rw->arg = arg;
	rw->t0_us = mono_us();
	/* Linked first: the completion may run inside rec_durable. */
	if ((rw->next = w->waits) != NULL)
		rw->next->prevp = &rw->next;
	rw->prevp = &w->waits;
	w->waits = rw;
	/* No action without a record: the bridge releases the result only
	 * from on_durable with ok = 1. */
	if (rec_durable(w->rec, ev->kind_name != NULL ? ev->kind_name :
	    "mcp.call", ev_fields(ev), on_durable, rw) == -1) {
		log_warn("mcp.call record for %s/%s",
		    ev->server != NULL ? ev->server : "-",
		    ev->tool != NULL ? ev->tool : "-");
		if ((*rw->prevp = rw->next) != NULL)
			rw->next->prevp = rw->prevp;
		free(rw);
		w->record_failures++;
		return -1;
	}
	return 0;
}

static const char *
finding_severity(enum br_event_kind k)
{
	switch (k) {
	case BR_EV_TOOL_DRIFT:
	case BR_EV_AUTH_FAILED:
		return "high";
	case BR_EV_TAINT:
	case BR_EV_UPSTREAM:
		return "medium";
	default:
		return "low";
	}
}

static void
h_finding(void *ctx, const struct br_event *ev)
{
	struct brw *w = ctx;
	json_t *o;

	w->findings++;
	if (ev->kind == BR_EV_AUTH_FAILED)
		w->auth_failures++;
	/* The generic finding shape (type, severity, detail) plus what the
	 * event knows: who, which server and tool. */
	if ((o = ev_fields(ev)) != NULL &&
	    (rec_put(o, "type", rec_string(ev->kind_name)) == -1 ||
	    rec_put(o, "severity", json_string(finding_severity(ev->kind))) ==
	    -1 ||
	    rec_put(o, "decision", json_string("log")) == -1)) {
		json_decref(o);
		o = NULL;
	}
	if (rec_async(w->rec, "finding", o) == -1)
		log_warn("finding %s", ev->kind_name != NULL ? ev->kind_name :
		    "?");
	if (ev->kind == BR_EV_UPSTREAM || ev->kind == BR_EV_TOOL_DRIFT)
		log_warnx("%s: server %s tool %s: %s", ev->kind_name,
		    ev->server != NULL ? ev->server : "-",
		    ev->tool != NULL ? ev->tool : "-",
		    ev->detail != NULL ? ev->detail : "");
}

static int
h_restrict(void *ctx, const char *sandbox_id)
{
	struct brw *w = ctx;
	char err[256];

	if (sbx_taint(w->sbx, sandbox_id, err, sizeof(err)) == -1) {
		/* The bridge withholds the tainting result then. */
		log_warnx("sandbox %s: taint: %s", sandbox_id, err);
		w->taint_failures++;
		return -1;
	}
	w->taints++;
	return 0;
}

/* Within the recorder's budget per source, the rest summarised. */
static int
h_auth_tally(void *ctx, const char *src)
{
	struct brw *w = ctx;

	return rec_tally(w->rec, REC_TALLY_MCP_AUTH, src, NULL);
}

/* The manager's watcher (sbx_watch_add, removed by brw_stop): a removed
 * sandbox's sessions are forgotten and its pending approvals denied. */
static void
on_sandbox_removed(void *ctx, const struct sbx_view *v)
{
	struct brw *w = ctx;

	br_sandbox_gone(w->br, v->id);
}

struct brw *
brw_start(struct ev_loop *loop, struct gw *gw, struct sbx *sbx,
    struct rec *rec, uint16_t port, char *err, size_t errlen)
{
	const struct pol_config *cfg = gw_config(gw);
	struct br_config bc;
	struct br_hooks h;
	struct brw *w;

	if ((w = calloc(1, sizeof(*w))) == NULL) {
		snprintf(err, errlen, "bridge: %s", strerror(errno));
		return NULL;
	}
	w->gw = gw;
	w->rec = rec;
	w->sbx = sbx;
	if (sbx_watch_add(sbx, &(struct sbx_watch){ .removed =
	    on_sandbox_removed, .ctx = w }) == -1) {
		snprintf(err, errlen, "bridge: watching the sandboxes: %s",
		    strerror(errno));
		free(w);
		errno = ENOSPC;
		return NULL;
	}
	memset(&bc, 0, sizeof(bc));
	bc.cfg = cfg;
	bc.port = port != 0 ? port : cfg->bridge_port;
	memset(&h, 0, sizeof(h));
	h.identify = h_identify;
	h.release = h_release;
	h.record = h_record;
	h.finding = h_finding;
	h.restrict_egress = h_restrict;
	h.auth_tally = h_auth_tally;
	h.ctx = w;
	if ((w->br = br_new(loop, &bc, &h, err, errlen)) == NULL) {
		int e = errno;

		sbx_watch_del(sbx, w);
		free(w);
		errno = e;
		return NULL;
	}
	return w;
}

void
brw_stop(struct brw *w)
{
	struct rec_wait *rw;

	if (w == NULL)
		return;
	/* Before br_free, which records the approvals it denies: those
	 * are counted here. */
	br_free(w->br);
	sbx_watch_del(w->sbx, w);
	/* Their completions still run (the log's close runs them), with
	 * nothing left here to count into. */
	for (rw = w->waits; rw != NULL; rw = rw->next)
		rw->w = NULL;
	free(w);
}

uint16_t
brw_port(const struct brw *w)
{
	return br_port(w->br);
}


json_t *
brw_status_json(const struct brw *w)
{
	json_t *list;
	size_t pending;

	if (w == NULL)
		return NULL;
	if ((list = br_approvals_list(w->br)) == NULL)
		return NULL;
	pending = json_array_size(list);
	json_decref(list);
	return json_pack("{s:I,s:{s:I,s:I},s:I,s:I,s:I,s:I,s:i}",
	    "pending_approvals", (json_int_t)pending,
	    "calls", "allow", (json_int_t)w->calls_allow,
	    "deny", (json_int_t)w->calls_deny,
	    "auth_failures", (json_int_t)w->auth_failures,
	    "findings", (json_int_t)w->findings,
	    "record_failures", (json_int_t)w->record_failures,
	    "taints", (json_int_t)w->taints,
	    "port", (int)br_port(w->br));
}

void
brw_metrics_print(const struct brw *w, FILE *fp)
{
	json_t *list;
	size_t pending = 0;

	if (w == NULL)
		return;
	if ((list = br_approvals_list(w->br)) != NULL) {
		pending = json_array_size(list);
		json_decref(list);
	}
	fprintf(fp,
	    "# HELP sluice_mcp_pending_approvals Tool calls waiting for a "
	    "person.\n"
	    "# TYPE sluice_mcp_pending_approvals gauge\n"
	    "sluice_mcp_pending_approvals %zu\n"
	    "# HELP sluice_mcp_calls_total Tool calls by decision.\n"
	    "# TYPE sluice_mcp_calls_total counter\n"
	    "sluice_mcp_calls_total{decision=\"allow\"} %llu\n"
	    "sluice_mcp_calls_total{decision=\"deny\"} %llu\n"
	    "# HELP sluice_mcp_auth_failures_total Bridge requests refused "
	    "with 401.\n"
	    "# TYPE sluice_mcp_auth_failures_total counter\n"
	    "sluice_mcp_auth_failures_total %llu\n"
	    "# HELP sluice_mcp_findings_total Bridge findings (drift, 401, "
	    "taint, upstream).\n"
	    "# TYPE sluice_mcp_findings_total counter\n"
	    "sluice_mcp_findings_total %llu\n"
	    "# HELP sluice_mcp_taints_total Sandboxes whose egress a result "
	    "narrowed.\n"
	    "# TYPE sluice_mcp_taints_total counter\n"
	    "sluice_mcp_taints_total %llu\n"
	    "# HELP sluice_mcp_record_wait_seconds Time tool calls waited "
	    "for their durable audit record.\n"
	    "# TYPE sluice_mcp_record_wait_seconds summary\n"
	    "sluice_mcp_record_wait_seconds_sum %.6f\n"
	    "sluice_mcp_record_wait_seconds_count %llu\n",
	    pending, (unsigned long long)w->calls_allow,
	    (unsigned long long)w->calls_deny,
	    (unsigned long long)w->auth_failures,
	    (unsigned long long)w->findings,
	    (unsigned long long)w->taints,
	    (double)w->record_wait_us / 1e6,
	    (unsigned long long)w->record_waits);
}

/* ------------------------------------------------------------ control API */

static enum ctl_rc
approvals_get(struct ctl_req *req, void *arg)
{
	struct brw *w = arg;

	return ctl_reply_json(req, 200, br_approvals_list(w->br));
}

/* Printable, bounded text for the record: approver and reason come from
 * whoever may use the control socket, and end up in the audit log. */
static int
text_ok(const char *s, size_t max)
{
	size_t n;

	for (n = 0; s[n] != '\0'; n++)
		if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f || n >= max)
			return 0;
	return 1;
}

/* The user name of uid, or the uid in decimal when it has none (a
 * container's numeric user): never empty, never made up. */
static void
uid_name(uid_t uid, char *out, size_t outlen)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 &&
	    res != NULL && res->pw_name != NULL && res->pw_name[0] != '\0' &&
	    text_ok(res->pw_name, 128)) {
		snprintf(out, outlen, "%s", res->pw_name);
		return;
	}
	snprintf(out, outlen, "%lu", (unsigned long)uid);
}

static enum ctl_rc
approvals_post(struct ctl_req *req, void *arg)
{
	struct brw *w = arg;
	const char *id = ctl_req_param(req, "id");
	json_t *body = ctl_req_body(req), *v;
	const char *decision, *note = NULL, *reason = NULL;
	const char *key;
	struct br_approver who;
	char name[160];
	uid_t uid;
	bool approve;

	/* Who approves is who connected, as the kernel saw it: a caller
	 * that cannot be identified decides nothing. */
	if (ctl_req_peer(req, &uid, NULL, NULL) == -1)
		return ctl_reply_error(req, 403, "forbidden",
		    "the caller's identity cannot be established (%s)",
		    strerror(errno));
	if (!json_is_object(body))
		return ctl_reply_error(req, 400, "bad_request",
		    "body must be {decision, reason?, note?}");
	json_object_foreach(body, key, v) {
		if (strcmp(key, "decision") != 0 && strcmp(key, "note") != 0 &&
		    strcmp(key, "approver") != 0 && strcmp(key, "reason") != 0)
			return ctl_reply_error(req, 400, "bad_request",
			    "unknown field");
	}
	decision = json_string_value(json_object_get(body, "decision"));
	if ((v = json_object_get(body, "reason")) != NULL &&
	    (reason = json_string_value(v)) == NULL)
		return ctl_reply_error(req, 400, "bad_request",
		    "reason must be a string");
	/* "approver" is what clients used to send as the identity; it is
	 * kept, like "note", only as a remark beside the real one. */
	if (json_object_get(body, "note") != NULL &&
	    json_object_get(body, "approver") != NULL)
		return ctl_reply_error(req, 400, "bad_request",
		    "give note or approver, not both");
	v = json_object_get(body, "note");
	if (v == NULL)
		v = json_object_get(body, "approver");
	if (v != NULL && (note = json_string_value(v)) == NULL)
		return ctl_reply_error(req, 400, "bad_request",
		    "note must be a string");
	if (decision == NULL || (strcmp(decision, "approve") != 0 &&
	    strcmp(decision, "deny") != 0))
		return ctl_reply_error(req, 400, "bad_request",
		    "decision must be \"approve\" or \"deny\"");
	if (note != NULL && (note[0] == '\0' || !text_ok(note, 128)))
		return ctl_reply_error(req, 400, "bad_request",
		    "note must be printable text (1 to 128 bytes)");
	if (reason != NULL && !text_ok(reason, 1024))
		return ctl_reply_error(req, 400, "bad_request",
		    "reason must be printable text (at most 1024 bytes)");
	approve = strcmp(decision, "approve") == 0;
	uid_name(uid, name, sizeof(name));
	who.name = name;
	who.uid = (int64_t)uid;
	who.note = note;
	if (br_approval_decide(w->br, id, approve, &who, reason) == -1) {
		if (errno == ENOENT)
			return ctl_reply_error(req, 404, "not_found",
			    "no pending call %s (unknown, already decided or "
			    "timed out)", id);
		return ctl_reply_error(req, 400, "bad_request",
		    "cannot decide call %s: %s", id, strerror(errno));
	}
	log_info("approval %s: %s by %s (uid %lu)%s%s", id, decision, name,
	    (unsigned long)uid, note != NULL ? ", note: " : "",
	    note != NULL ? note : "");
	return ctl_reply_json(req, 200, json_pack("{s:s,s:s,s:s,s:I}", "id",
	    id, "decision", approve ? "approved" : "denied", "approver", name,
	    "approver_uid", (json_int_t)uid));
}

static enum ctl_rc
pins_get(struct ctl_req *req, void *arg)
{
	struct brw *w = arg;
	const char *server = ctl_req_param(req, "server");
	char *buf = NULL;
	size_t len = 0;
	FILE *fp;
	int rc, e;
	enum ctl_rc r;

	if ((fp = open_memstream(&buf, &len)) == NULL)
		return ctl_reply_error(req, 500, "internal", "memory");
	rc = br_pins_snippet(w->br, server, fp);
	e = errno;
	if (fclose(fp) != 0 && rc == 0) {
		rc = -1;
		e = ENOMEM;
	}
	if (rc == -1) {
		free(buf);
		if (e == ENOENT)
			return ctl_reply_error(req, 404, "not_found",
			    "unknown server %s, or its tools were not listed "
			    "yet", server);
		return ctl_reply_error(req, 500, "internal", "%s",
		    strerror(e));
	}
	r = ctl_reply_text(req, 200, "text/yaml; charset=utf-8", buf);
	free(buf);
	return r;
}

static enum ctl_rc
pins_accept(struct ctl_req *req, void *arg)
{
	struct brw *w = arg;
	const char *server = ctl_req_param(req, "server");
	const char *tool = ctl_req_param(req, "tool");

	if (br_pins_accept(w->br, server, tool) == -1) {
		if (errno == ENOENT)
			return ctl_reply_error(req, 404, "not_found",
			    "unknown server %s or tool %s", server, tool);
		return ctl_reply_error(req, 500, "internal", "%s",
		    strerror(errno));
	}
	log_info("mcp pins: %s/%s accepted", server, tool);
	return ctl_reply_json(req, 200, json_pack("{s:s,s:s}", "server",
	    server, "tool", tool));
}

int
brw_routes(struct brw *w, struct ctl *ctl)
{
	if (ctl_route(ctl, "GET", "/v1/approvals", approvals_get, w) == -1 ||
	    ctl_route(ctl, "POST", "/v1/approvals/{id}", approvals_post,
	    w) == -1 ||
	    ctl_route(ctl, "GET", "/v1/mcp/{server}/pins", pins_get, w) == -1 ||
	    ctl_route(ctl, "POST", "/v1/mcp/{server}/tools/{tool}/accept",
	    pins_accept, w) == -1)
		return -1;
	return 0;
}
