/*
 * brwire.c: the parent's side of the bridge process. The capability bridge
 * itself (gateway/bridge/) runs in a child of its own, unprivileged
 * (gateway/bridge/child.c), which alone parses what sandboxes send to the
 * bridge port and alone holds the upstream credentials. This file binds
 * its listener on the service address, checks before anything starts that
 * the credentials are there (without reading them), starts the child and
 * starts it again when it dies (gateway/privsep/proc.c), and keeps it
 * told, in messages only (gateway/privsep/msg.h): the daemon config and the
 * policy set as the bytes they were loaded from, the sandbox table with a
 * digest of each bearer token. What comes back is checked as if a sandbox
 * had written it: a call's mcp.intent becomes a durable record whose
 * commit is acknowledged (the child forwards the call only then), its
 * mcp.call outcome likewise (the child releases the result only then),
 * and the intents still open are kept (brwire_intent.c) so that those
 * whose outcome cannot come any more are closed as mcp.outcome_unknown; a
 * finding
 * becomes a record within the recorder's budgets, a taint becomes
 * sbx_taint and its acknowledgement. The control API's approvals and pins
 * endpoints are forwarded to the child (brwire_ctl.c). A child that breaks
 * the protocol is killed, recorded and restarted; while it is down the
 * bridge port is not served (connections wait in the listener's backlog)
 * and the control endpoints answer 503.
 */
#include <sys/socket.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/bridge/bridge.h"
#include "gateway/fleet/fleet.h"
#include "gateway/brwire.h"
#include "gateway/brwire_int.h"
#include "gateway/log.h"
#include "gateway/privsep/chan.h"
#include "gateway/privsep/msg.h"
#include "gateway/privsep/polrx.h"
#include "gateway/privsep/priv.h"
#include "gateway/privsep/proc.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"

/* What the parent may have queued for a child that does not read. */
#define BRW_QUEUE_MAX	(64u * 1024u * 1024u)
/* How long the first start may take (credentials, database, upstreams'
 * processes): past it the daemon does not start. */
#define BRW_START_MS	60000u

/* A record being committed for the child: its acknowledgement goes back
 * to the child that asked, if it is still the one running. */
struct rec_wait {
	struct rec_wait	*next, **prevp;	/* on w->waits while w lives */
	struct brw	*w;		/* NULL once brw_stop has run */
	uint64_t	 gen, ticket;
	uint64_t	 t0_us;
	enum br_event_kind kind;	/* BR_EV_INTENT or BR_EV_CALL */
	char		 call_id[33];	/* "" when the event had none */
};

static uint64_t
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
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
json_t *
brw_ev_fields(const struct br_event *ev)
{
	json_t *o;
	int bad = 0;

	if ((o = json_object()) == NULL)
		return NULL;
	bad |= put_opt(o, "call_id", ev->call_id);
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
	/* A read names its URI, a prompt its name, where a call names its
	 * tool. */
	bad |= put_opt(o, ev->kind == BR_EV_RESOURCE ? "uri" :
	    ev->kind == BR_EV_PROMPT ? "prompt" :
	    ev->kind == BR_EV_SERVER_REQUEST ? "method" : "tool", ev->tool);
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
	bad |= put_opt(o, "approver_host", ev->approver_host);
	bad |= put_opt(o, "held_by", ev->held_by);
	bad |= put_opt(o, "approval", ev->approval);
	bad |= put_opt(o, "classification", ev->classification);
	if (br_kind_is_record(ev->kind)) {
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


/* ------------------------------------------------------ the child */

void
brw_violation(struct brw *w, const char *what)
{
	char detail[160];

	w->violations++;
	log_warnx("bridge process %ld: %s; killing it",
	    (long)proc_pid(w->proc), what);
	snprintf(detail, sizeof(detail), "bridge process: %s", what);
	if (rec_async(w->rec, "finding", rec_finding_fields(NULL,
	    "privsep_violation", "high", detail)) == -1)
		log_warn("privsep_violation record");
	proc_kill(w->proc);
}

static void
lose_child(struct brw *w)
{
	chan_free(w->ch);
	w->ch = NULL;
	w->serving = false;
	brw_ctl_fail_all(w, "the bridge process is restarting");
	/* The calls it had forwarded: their outcomes will not come. */
	brw_intents_orphaned(w, "the bridge process ended before the call's "
	    "outcome was recorded");
	brw_sreqs_orphaned(w, "the bridge process ended before it was "
	    "recorded");
}

/* Sends one message, or ends the child when it cannot take it. */
static int
send_or_kill(struct brw *w, uint32_t type, const void *p, size_t len)
{
	if (w->ch == NULL)
		return -1;
	if (chan_send1(w->ch, type, p, len) == 0)
		return 0;
	log_warnx("bridge process: %s: %s; restarting it", msg_name(type),
	    strerror(errno));
	lose_child(w);
	proc_kill(w->proc);
	return -1;
}

/* The sandbox as the child needs it. A subject or label that does not
 * fit the bridge's fields would be matched truncated by the policy: such
 * a sandbox is sent unusable, and calls nothing. */
static void
sbx_msg(struct brw *w, struct msg_br_sbx *m, const struct sbx_view *v)
{
	size_t i;
	bool fits;

	memset(m, 0, sizeof(*m));
	memcpy(m->id, v->id, strnlen(v->id, sizeof(m->id) - 1));
	memcpy(m->policy, v->policy, strnlen(v->policy, sizeof(m->policy) -
	    1));
	memcpy(m->addr4, v->addr4, 4);
	m->tainted = v->tainted ? 1 : 0;
	fits = strlen(v->id) < sizeof(m->id) &&
	    strlen(v->policy) < sizeof(m->policy) &&
	    brw_cp(m->subject, sizeof(m->subject), v->subject) == 0 &&
	    v->nlabels <= MSG_BR_LABELS;
	for (i = 0; fits && i < v->nlabels; i++)
		fits = brw_cp(m->label_keys[i], sizeof(m->label_keys[i]),
		    v->label_keys[i]) == 0 && brw_cp(m->label_values[i],
		    sizeof(m->label_values[i]), v->label_values[i]) == 0;
	m->nlabels = fits ? (uint8_t)v->nlabels : 0;
	m->usable = fits && sbx_token_digest(w->sbx, v->id,
	    m->token_sha256) == 0 ? 1 : 0;
	if (!m->usable)
		memset(m->token_sha256, 0, sizeof(m->token_sha256));
}

static void
w_added(void *ctx, const struct sbx_view *v)
{
	struct msg_br_sbx m;

	sbx_msg(ctx, &m, v);
	(void)send_or_kill(ctx, MSG_BR_SBX_ADD, &m, sizeof(m));
}

static void
w_removed(void *ctx, const struct sbx_view *v)
{
	struct msg_br_sbx m;

	sbx_msg(ctx, &m, v);
	(void)send_or_kill(ctx, MSG_BR_SBX_DEL, &m, sizeof(m));
}

static void
w_changed(void *ctx, const struct sbx_view *v)
{
	struct msg_br_sbx m;

	sbx_msg(ctx, &m, v);
	(void)send_or_kill(ctx, MSG_BR_SBX_CHANGE, &m, sizeof(m));
}

static void
send_policies(struct brw *w)
{
	struct gw_pset *ps;

	if (w->ch == NULL)
		return;
	ps = gw_pset_ref(w->gw);
	if (polrx_send(w->ch, gw_pset_set(ps)) == -1) {
		log_warnx("bridge process: the policy set: %s; restarting it",
		    strerror(errno));
		lose_child(w);
		proc_kill(w->proc);
	}
	gw_pset_unref(ps);
}

static void
on_reload(void *ctx)
{
	send_policies(ctx);
}

/* The config as the bytes it was loaded from, with the limits fitted to
 * our descriptors at start. */
static void
send_config(struct brw *w)
{
	const struct pol_config *cfg = gw_config(w->gw);
	struct msg_br_config m;
	const char *src;
	size_t len, off, n;

	src = pol_config_source(cfg, &len);
	memset(&m, 0, sizeof(m));
	snprintf(m.path, sizeof(m.path), "%s", cfg->path);
	m.len = (uint32_t)len;
	msg_digest(src, len, m.digest);
	m.lim_conns = cfg->lim_bridge_conns;
	m.lim_conns_sbx = cfg->lim_bridge_conns_sbx;
	m.lim_request_s = cfg->lim_bridge_request_s;
	if (cfg->fleet_conninfo != NULL) {
		char e[320], *pw;

		/* Read again at every start of the bridge: a password
		 * changed on disk reaches it with its restart. */
		errno = 0;
		if ((pw = fleet_password_read(cfg->fleet_password_file, e,
		    sizeof(e))) == NULL && errno != 0)
			log_warnx("bridge: fleet password: %s", e);
		if (pw != NULL && strlen(pw) < sizeof(m.pg_password)) {
			m.has_pg_password = 1;
			memcpy(m.pg_password, pw, strlen(pw) + 1);
		}
		if (pw != NULL)
			explicit_bzero(pw, strlen(pw));
		free(pw);
		/* The name fleetd_open checked before the daemon started. */
		if (cfg->fleet_host != NULL)
			snprintf(m.fleet_host, sizeof(m.fleet_host), "%s",
			    cfg->fleet_host);
		else if (gethostname(m.fleet_host, sizeof(m.fleet_host)) ==
		    -1)
			m.fleet_host[0] = '\0';
		m.fleet_host[sizeof(m.fleet_host) - 1] = '\0';
	}
	if (send_or_kill(w, MSG_BR_CONFIG, &m, sizeof(m)) == -1) {
		explicit_bzero(&m, sizeof(m));
		return;
	}
	explicit_bzero(&m, sizeof(m));
	for (off = 0; off < len; off += n) {
		n = len - off < MSG_DATA_MAX ? len - off : MSG_DATA_MAX;
		if (send_or_kill(w, MSG_BR_CONFIG_DATA, src + off, n) == -1)
			return;
	}
}

static void
child_sync(struct brw *w)
{
	send_config(w);
	send_policies(w);
	if (w->ch != NULL)
		sbx_foreach(w->sbx, w_added, w);
	(void)send_or_kill(w, MSG_SYNC, NULL, 0);
}

/* An event of the child as struct br_event, its strings inside m. */
static bool
event_from(struct br_event *ev, const struct msg_br_event *m, size_t len)
{
	const char *s[MSG_BR_NSTR];

	if (!msg_br_event_ok(m, len, s))
		return false;
	memset(ev, 0, sizeof(*ev));
	ev->kind = (enum br_event_kind)m->kind;
	ev->sandbox = s[MSG_BRS_SANDBOX];
	ev->subject = s[MSG_BRS_SUBJECT];
	ev->policy = s[MSG_BRS_POLICY];
	ev->src = s[MSG_BRS_SRC];
	ev->session = s[MSG_BRS_SESSION];
	ev->server = s[MSG_BRS_SERVER];
	ev->tool = s[MSG_BRS_TOOL];
	ev->args = s[MSG_BRS_ARGS];
	ev->args_digest = s[MSG_BRS_ARGS_DIGEST];
	ev->decision = s[MSG_BRS_DECISION];
	ev->rule = s[MSG_BRS_RULE];
	ev->reason = (enum pol_reason)m->reason;
	ev->message = s[MSG_BRS_MESSAGE];
	ev->budget = s[MSG_BRS_BUDGET];
	ev->approver = s[MSG_BRS_APPROVER];
	ev->approver_uid = m->approver_uid;
	ev->approver_note = s[MSG_BRS_APPROVER_NOTE];
	ev->approval = s[MSG_BRS_APPROVAL];
	ev->classification = s[MSG_BRS_CLASSIFICATION];
	ev->taints = m->taints != 0;
	ev->upstream_latency_us = m->upstream_latency_us;
	ev->result_bytes = m->result_bytes;
	ev->result_digest = s[MSG_BRS_RESULT_DIGEST];
	ev->redactions = m->redactions;
	ev->detail = s[MSG_BRS_DETAIL];
	ev->call_id = s[MSG_BRS_CALL_ID];
	ev->approver_host = s[MSG_BRS_APPROVER_HOST];
	ev->held_by = s[MSG_BRS_HELD_BY];
	/* The kind's name is ours, never the child's text. */
	ev->kind_name = br_kind_name(ev->kind);
	return true;
}

static void
on_durable(void *arg, int ok, uint64_t seq)
{
	struct rec_wait rw = *(struct rec_wait *)arg;
	struct msg_br_done d;

	free(arg);
	if (rw.w == NULL)
		return;
	if ((*rw.prevp = rw.next) != NULL)
		rw.next->prevp = rw.prevp;
	if (!ok)
		rw.w->record_failures++;
	if (rw.kind == BR_EV_INTENT) {
		rw.w->intent_waits++;
		rw.w->intent_wait_us += mono_us() - rw.t0_us;
		brw_intent_durable(rw.w, rw.call_id, ok, seq);
	} else {
		rw.w->record_waits++;
		rw.w->record_wait_us += mono_us() - rw.t0_us;
		if (rw.call_id[0] != '\0')
			brw_outcome_durable(rw.w, rw.call_id, ok);
	}
	/* A child that died meanwhile gets nothing: its call is gone. */
	if (rw.gen != rw.w->gen || rw.w->ch == NULL)
		return;
	memset(&d, 0, sizeof(d));
	d.ticket = rw.ticket;
	d.ok = ok ? 1 : 0;
	(void)send_or_kill(rw.w, MSG_BR_RECORD_DONE, &d, sizeof(d));
}

static void
on_record(struct brw *w, const struct msg_br_event *m, size_t len)
{
	struct br_event ev;
	struct rec_wait *rw;
	struct msg_br_done d;
	bool intent;

	if (!event_from(&ev, m, len) || (!br_kind_is_record(ev.kind) &&
	    ev.kind != BR_EV_INTENT && ev.kind != BR_EV_APPROVAL)) {
		brw_violation(w, "a malformed mcp.call event");
		return;
	}
	intent = ev.kind == BR_EV_INTENT;
	if (ev.kind == BR_EV_SERVER_REQUEST && m->sreq_key != 0)
		brw_sreq_ended(w, m->sreq_key);
	/* A server request is not a call the sandbox made. */
	if (!intent && ev.kind != BR_EV_SERVER_REQUEST &&
	    ev.kind != BR_EV_APPROVAL) {
		if (ev.decision != NULL && strcmp(ev.decision, "allow") == 0)
			w->calls_allow++;
		else
			w->calls_deny++;
	}
	memset(&d, 0, sizeof(d));
	d.ticket = m->ticket;
	/* An intent we cannot keep open is not recorded: its call is
	 * refused, never forwarded with nobody to close it. */
	if (intent && brw_intent_open(w, &ev) == -1) {
		w->intents_refused++;
		(void)send_or_kill(w, MSG_BR_RECORD_DONE, &d, sizeof(d));
		return;
	}
	if ((rw = malloc(sizeof(*rw))) == NULL) {
		w->record_failures++;
		if (intent)
			brw_intent_durable(w, ev.call_id, 0, 0);
		(void)send_or_kill(w, MSG_BR_RECORD_DONE, &d, sizeof(d));
		return;
	}
	rw->w = w;
	rw->gen = w->gen;
	rw->ticket = m->ticket;
	rw->t0_us = mono_us();
	rw->kind = ev.kind;
	snprintf(rw->call_id, sizeof(rw->call_id), "%s", ev.call_id != NULL &&
	    strlen(ev.call_id) < sizeof(rw->call_id) ? ev.call_id : "");
	/* Linked first: the completion may run inside rec_durable. */
	if ((rw->next = w->waits) != NULL)
		rw->next->prevp = &rw->next;
	rw->prevp = &w->waits;
	w->waits = rw;
	if (!intent && rw->call_id[0] != '\0')
		brw_outcome_submitted(w, rw->call_id);
	/* No action without a record: the child forwards the call, or
	 * releases its result, only when we say it is durable. Intents
	 * are submitted without waiting for each other, so concurrent
	 * calls share the writer's group commit. */
	if (rec_durable(w->rec, ev.kind_name, brw_ev_fields(&ev), on_durable,
	    rw) == -1) {
		log_warn("%s record for %s/%s", ev.kind_name, ev.server !=
		    NULL ? ev.server : "-", ev.tool != NULL ? ev.tool : "-");
		if ((*rw->prevp = rw->next) != NULL)
			rw->next->prevp = rw->prevp;
		if (intent)
			brw_intent_durable(w, rw->call_id, 0, 0);
		else if (rw->call_id[0] != '\0')
			brw_outcome_durable(w, rw->call_id, 0);
		free(rw);
		w->record_failures++;
		(void)send_or_kill(w, MSG_BR_RECORD_DONE, &d, sizeof(d));
	}
}

static void
on_finding(struct brw *w, const struct msg_br_event *m, size_t len)
{
	struct br_event ev;
	json_t *o;

	if (!event_from(&ev, m, len) || br_kind_is_record(ev.kind) ||
	    ev.kind == BR_EV_INTENT) {
		brw_violation(w, "a malformed finding");
		return;
	}
	if (ev.kind == BR_EV_AUTH_FAILED) {
		w->auth_failures++;
		/* Anyone who reaches the port can cause these: within the
		 * recorder's budget per source, the rest summarised. */
		if (ev.src == NULL ||
		    rec_tally(w->rec, REC_TALLY_MCP_AUTH, ev.src, NULL) == 0)
			return;
	}
	w->findings++;
	if ((o = brw_ev_fields(&ev)) != NULL &&
	    (rec_put(o, "type", rec_string(ev.kind_name)) == -1 ||
	    rec_put(o, "severity", json_string(finding_severity(ev.kind))) ==
	    -1 || rec_put(o, "decision", json_string("log")) == -1)) {
		json_decref(o);
		o = NULL;
	}
	if (rec_async(w->rec, "finding", o) == -1)
		log_warn("finding %s", ev.kind_name);
	if (ev.kind == BR_EV_UPSTREAM || ev.kind == BR_EV_TOOL_DRIFT)
		log_warnx("%s: server %s tool %s: %s", ev.kind_name,
		    ev.server != NULL ? ev.server : "-",
		    ev.tool != NULL ? ev.tool : "-",
		    ev.detail != NULL ? ev.detail : "");
}

/* Narrowing only ever takes egress away, so the child may ask it for any
 * sandbox; it is applied to the kernel before the answer goes back. */
static void
on_taint(struct brw *w, const struct msg_br_taint *m)
{
	struct msg_br_done d;
	char err[256];

	if (!msg_str_ok(m->id, sizeof(m->id))) {
		brw_violation(w, "a malformed taint");
		return;
	}
	memset(&d, 0, sizeof(d));
	d.ticket = m->ticket;
	if (sbx_taint(w->sbx, m->id, err, sizeof(err)) == -1) {
		log_warnx("sandbox %s: taint: %s", m->id, err);
		w->taint_failures++;
	} else {
		w->taints++;
		d.ok = 1;
	}
	(void)send_or_kill(w, MSG_BR_TAINT_DONE, &d, sizeof(d));
}

static void
on_child_msg(void *ctx, uint32_t type, void *pl, size_t len)
{
	struct brw *w = ctx;

	switch (type) {
	case MSG_READY:
		w->serving = true;
		log_info("bridge process %ld serving on port %u",
		    (long)proc_pid(w->proc), w->port);
		if (w->starting) {
			w->starting = false;
			w->start_rc = 0;
			ev_stop(w->loop);
		}
		break;
	case MSG_BR_FAIL: {
		struct msg_br_fail *f = pl;

		f->err[sizeof(f->err) - 1] = '\0';
		log_warnx("bridge process %ld: %s", (long)proc_pid(w->proc),
		    f->err);
		if (w->starting)
			snprintf(w->start_err, sizeof(w->start_err), "%s",
			    f->err);
		break;
	}
	case MSG_BR_RECORD:
		on_record(w, pl, len);
		break;
	case MSG_BR_FINDING:
		on_finding(w, pl, len);
		break;
	case MSG_BR_TAINT:
		on_taint(w, pl);
		break;
	case MSG_BR_CTL_REPLY:
		brw_ctl_reply(w, pl, len);
		break;
	case MSG_BR_ACTIVE: {
		struct msg_br_active *a = pl;

		/* At worst a taken-over bridge keeps a sandbox from idling
		 * out; its TTL still ends it. */
		if (!msg_str_ok(a->id, sizeof(a->id))) {
			brw_violation(w, "a malformed activity note");
			return;
		}
		sbx_touch_id(w->sbx, a->id);
		break;
	}
	case MSG_BR_SREQ:
		if (!msg_br_sreq_ok(pl)) {
			brw_violation(w, "a malformed server request");
			return;
		}
		brw_sreq_carried(w, pl);
		break;
	case MSG_BR_STATS:
		w->pending_approvals = ((struct msg_br_stats *)pl)->
		    pending_approvals;
		memcpy(&w->stats, pl, sizeof(w->stats));
		break;
	default:	/* the DNS process's messages: not from this one */
		brw_violation(w, "a message of another process");
		break;
	}
}

static void
on_child_gone(void *ctx, const char *why)
{
	struct brw *w = ctx;

	if (proc_pid(w->proc) != 0)
		log_warnx("bridge process %ld: channel %s",
		    (long)proc_pid(w->proc), why);
	lose_child(w);
	proc_kill(w->proc);
}

static void
on_child_up(void *ctx, int fd, pid_t pid)
{
	struct brw *w = ctx;

	w->gen++;
	if ((w->ch = chan_new(w->loop, fd, MSG_TO_PARENT, BRW_QUEUE_MAX,
	    on_child_msg, on_child_gone, w)) == NULL) {
		log_warn("bridge process %ld: channel", (long)pid);
		proc_kill(w->proc);
		return;
	}
	child_sync(w);
}

static void
on_child_down(void *ctx, pid_t pid, int status, unsigned restarts)
{
	struct brw *w = ctx;
	char detail[256];

	lose_child(w);
	if (w->stopping) {
		w->stopping = false;
		ev_stop(w->loop);
		return;
	}
	w->exits++;
	snprintf(detail, sizeof(detail), "bridge process %ld %s %d after %u "
	    "restarts, %u calls waiting for approval lost; tool calls are "
	    "refused until it is back", (long)pid, WIFSIGNALED(status) ?
	    "killed by signal" : "exited with status", WIFSIGNALED(status) ?
	    WTERMSIG(status) : WEXITSTATUS(status), restarts,
	    w->pending_approvals);
	w->pending_approvals = 0;
	log_warnx("%s", detail);
	if (w->starting) {
		/* The first start failed: the daemon does not serve. */
		w->starting = false;
		w->start_rc = -1;
		if (w->start_err[0] == '\0')
			snprintf(w->start_err, sizeof(w->start_err), "the "
			    "bridge process %s %d before it served",
			    WIFSIGNALED(status) ? "was killed by signal" :
			    "exited with status", WIFSIGNALED(status) ?
			    WTERMSIG(status) : WEXITSTATUS(status));
		ev_stop(w->loop);
		return;
	}
	if (rec_async(w->rec, "finding", rec_finding_fields(NULL,
	    "process_exit", "high", detail)) == -1)
		log_warn("process_exit record");
}

/* ------------------------------------------------------------ start, stop */

/* The bridge's listener on the service address: ours, so that it stays
 * bound while the child restarts (connections wait in its backlog). */
static int
bind_listener(const struct pol_config *cfg, uint16_t port, int *fdp,
    uint16_t *portp, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	socklen_t slen;
	int fd, one = 1, e;

	memset(&ss, 0, sizeof(ss));
	if (cfg->service_addr.family == AF_INET) {
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, cfg->service_addr.a, 4);
		sin->sin_port = htons(port);
		slen = sizeof(*sin);
	} else {
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, cfg->service_addr.a, 16);
		sin6->sin6_port = htons(port);
		slen = sizeof(*sin6);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0);
	if (fd == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ==
	    -1 || bind(fd, (struct sockaddr *)&ss, slen) == -1 ||
	    listen(fd, 256) == -1 ||
	    getsockname(fd, (struct sockaddr *)&ss, &slen) == -1) {
		e = errno;
		snprintf(err, errlen, "bridge: listen on port %u: %s", port,
		    strerror(e));
		if (fd != -1)
			close(fd);
		errno = e;
		return -1;
	}
	*portp = ntohs(ss.ss_family == AF_INET ? sin->sin_port :
	    sin6->sin6_port);
	*fdp = fd;
	return 0;
}

struct brw *
brw_start(struct ev_loop *loop, struct gw *gw, struct sbx *sbx,
    struct rec *rec, uint16_t port, char *err, size_t errlen)
{
	const struct pol_config *cfg = gw_config(gw);
	struct sbx_watch sw;
	struct proc_spec ps;
	uid_t uid;
	gid_t gid;
	struct brw *w;
	size_t k = 0;

	/* The credentials are the bridge process's to read; whether they
	 * are there is ours to know before the daemon says it started. */
	if (br_check_credentials(cfg, NULL, err, errlen) == -1)
		return NULL;
	if (priv_user(cfg->privsep_bridge_user, &uid, &gid, err, errlen) == -1)
		return NULL;
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		snprintf(err, errlen, "bridge: %s", strerror(errno));
		return NULL;
	}
	w->gw = gw;
	w->rec = rec;
	w->sbx = sbx;
	w->loop = loop;
	w->lfd = -1;
	if (bind_listener(cfg, port != 0 ? port : cfg->bridge_port, &w->lfd,
	    &w->port, err, errlen) == -1)
		goto fail;
	snprintf(w->uid, sizeof(w->uid), "%lu", (unsigned long)uid);
	snprintf(w->gid, sizeof(w->gid), "%lu", (unsigned long)gid);
	w->argv[k++] = "sluiced";
	w->argv[k++] = "--room";
	w->argv[k++] = "bridge";
	w->argv[k++] = "--uid";
	w->argv[k++] = w->uid;
	w->argv[k++] = "--gid";
	w->argv[k++] = w->gid;
	if (log_getforeground())
		w->argv[k++] = "--foreground";
	if (log_getverbose())
		w->argv[k++] = "--verbose";
	w->argv[k] = NULL;
	memset(&ps, 0, sizeof(ps));
	ps.role = "bridge";
	ps.exe = "/proc/self/exe";
	ps.argv = w->argv;
	ps.fds = &w->lfd;
	ps.nfds = 1;
	if ((w->proc = proc_new(loop, &ps, on_child_up, on_child_down, w)) ==
	    NULL) {
		snprintf(err, errlen, "bridge: %s", strerror(errno));
		goto fail;
	}
	memset(&sw, 0, sizeof(sw));
	sw.added = w_added;
	sw.removed = w_removed;
	sw.changed = w_changed;
	sw.ctx = w;
	if (sbx_watch_add(sbx, &sw) == -1 ||
	    gw_on_reload(gw, on_reload, w) == -1) {
		snprintf(err, errlen, "bridge: cannot follow the sandbox "
		    "table");
		errno = ENOSPC;
		goto fail;
	}
	return w;
fail:
	sbx_watch_del(sbx, w);
	proc_free(w->proc);
	if (w->lfd != -1)
		close(w->lfd);
	free(w);
	return NULL;
}

static void
on_start_timeout(struct ev_loop *loop, void *arg)
{
	struct brw *w = arg;

	(void)loop;
	if (!w->starting)
		return;
	w->starting = false;
	w->start_rc = -1;
	snprintf(w->start_err, sizeof(w->start_err), "the bridge process did "
	    "not serve within %u s", BRW_START_MS / 1000);
	ev_stop(w->loop);
}

int
brw_run(struct brw *w, char *err, size_t errlen)
{
	struct ev_timer *t;

	/* What a crash of the previous run left open is closed before any
	 * new call can be made. */
	if (brw_intents_recover(w, err, errlen) == -1 ||
	    proc_start(w->proc, err, errlen) == -1)
		return -1;
	/* The loop runs until the child says it serves (or fails): the
	 * daemon starts only with a bridge that works. */
	w->starting = true;
	w->start_rc = -1;
	w->start_err[0] = '\0';
	if ((t = ev_timer_add(w->loop, BRW_START_MS, on_start_timeout, w)) ==
	    NULL) {
		snprintf(err, errlen, "bridge: %s", strerror(errno));
		return -1;
	}
	if (ev_run(w->loop) == -1)
		w->start_rc = -1;
	if (w->starting) {
		w->starting = false;
		snprintf(w->start_err, sizeof(w->start_err), "event loop: %s",
		    strerror(errno));
	} else
		ev_timer_cancel(w->loop, t);
	if (w->start_rc == -1) {
		snprintf(err, errlen, "%s", w->start_err);
		return -1;
	}
	return 0;
}

static void
on_stop_timeout(struct ev_loop *loop, void *arg)
{
	struct brw *w = arg;

	w->stopping = false;
	ev_stop(loop);
}

/* The child denies what waits (approvals, calls in flight) and records
 * it through us before it goes: nothing a sandbox asked for goes
 * unrecorded because the daemon stopped. Bounded: past a few seconds it
 * is killed like any child. */
static void
stop_child(struct brw *w)
{
	struct ev_timer *t;

	if (w->ch == NULL || !w->serving ||
	    chan_send1(w->ch, MSG_BR_STOP, NULL, 0) == -1 ||
	    (t = ev_timer_add(w->loop, 5000, on_stop_timeout, w)) == NULL)
		return;
	w->stopping = true;
	if (ev_run(w->loop) == -1 || w->stopping)
		log_warnx("bridge process: did not stop in time");
	w->stopping = false;
	ev_timer_cancel(w->loop, t);
}

void
brw_stop(struct brw *w)
{
	struct rec_wait *rw;

	if (w == NULL)
		return;
	stop_child(w);
	sbx_watch_del(w->sbx, w);
	proc_free(w->proc);
	lose_child(w);
	brw_intents_stop(w);
	brw_sreqs_free(w);
	/* Their completions still run (the log's close runs them), with
	 * nothing left here to count into. */
	for (rw = w->waits; rw != NULL; rw = rw->next)
		rw->w = NULL;
	close(w->lfd);
	free(w);
}

uint16_t
brw_port(const struct brw *w)
{
	return w->port;
}

pid_t
brw_pid(const struct brw *w)
{
	return w != NULL ? proc_pid(w->proc) : 0;
}

/* The budgets the fleet shares, as the bridge last said (null: no fleet). */
static json_t *
shared_json(const struct brw *w)
{
	const struct msg_br_stats *s = &w->stats;

	if (!s->shared)
		return json_null();
	return json_pack("{s:b,s:I,s:I,s:I,s:I,s:I}", "up", s->shared_up != 0,
	    "reserved", (json_int_t)s->shared_reserved,
	    "exhausted", (json_int_t)s->shared_exhausted,
	    "unavailable", (json_int_t)s->shared_unavailable,
	    "failures", (json_int_t)s->shared_failures,
	    "reconnects", (json_int_t)s->shared_reconnects);
}

/* The approval queue the fleet shares, as the bridge last said. */
static json_t *
aq_json(const struct brw *w)
{
	const struct msg_br_stats *s = &w->stats;

	if (!s->shared)
		return json_null();
	return json_pack("{s:b,s:I,s:I,s:I,s:I,s:I}", "up", s->aq_up != 0,
	    "posted", (json_int_t)s->aq_posted,
	    "decided_here", (json_int_t)s->aq_decided,
	    "delivered", (json_int_t)s->aq_delivered,
	    "failures", (json_int_t)s->aq_failures,
	    "reconnects", (json_int_t)s->aq_reconnects);
}

json_t *
brw_status_json(const struct brw *w)
{
	if (w == NULL)
		return NULL;
	return json_pack("{s:I,s:{s:I,s:I},s:I,s:I,s:I,s:I,s:i,s:b,s:o,s:o}",
	    "pending_approvals", (json_int_t)w->pending_approvals,
	    "calls", "allow", (json_int_t)w->calls_allow,
	    "deny", (json_int_t)w->calls_deny,
	    "auth_failures", (json_int_t)w->auth_failures,
	    "findings", (json_int_t)w->findings,
	    "record_failures", (json_int_t)w->record_failures,
	    "taints", (json_int_t)w->taints,
	    "port", (int)w->port,
	    "serving", w->serving,
	    "shared_budgets", shared_json(w),
	    "approval_queue", aq_json(w));
}

void
brw_metrics_print(const struct brw *w, FILE *fp)
{
	size_t pending;

	if (w == NULL)
		return;
	pending = w->pending_approvals;
	if (w->stats.shared)
		fprintf(fp,
		    "# HELP sluice_fleet_budgets_up The bridge reaches the "
		    "fleet's database for shared budgets.\n"
		    "# TYPE sluice_fleet_budgets_up gauge\n"
		    "sluice_fleet_budgets_up %d\n"
		    "# HELP sluice_fleet_budget_reservations_total Shared "
		    "budget reservations by outcome.\n"
		    "# TYPE sluice_fleet_budget_reservations_total counter\n"
		    "sluice_fleet_budget_reservations_total{outcome="
		    "\"reserved\"} %llu\n"
		    "sluice_fleet_budget_reservations_total{outcome="
		    "\"exhausted\"} %llu\n"
		    "sluice_fleet_budget_reservations_total{outcome="
		    "\"unavailable\"} %llu\n"
		    "# HELP sluice_fleet_budget_reconnects_total Connections "
		    "the bridge made again to the fleet's database.\n"
		    "# TYPE sluice_fleet_budget_reconnects_total counter\n"
		    "sluice_fleet_budget_reconnects_total %llu\n"
		    "# HELP sluice_fleet_approvals_up The bridge reaches the "
		    "fleet's approval queue.\n"
		    "# TYPE sluice_fleet_approvals_up gauge\n"
		    "sluice_fleet_approvals_up %d\n"
		    "# HELP sluice_fleet_approvals_total Rows of the fleet's "
		    "approval queue by what this host did.\n"
		    "# TYPE sluice_fleet_approvals_total counter\n"
		    "sluice_fleet_approvals_total{event=\"posted\"} %llu\n"
		    "sluice_fleet_approvals_total{event=\"decided_here\"} "
		    "%llu\n"
		    "sluice_fleet_approvals_total{event=\"delivered\"} "
		    "%llu\n",
		    w->stats.shared_up != 0,
		    (unsigned long long)w->stats.shared_reserved,
		    (unsigned long long)w->stats.shared_exhausted,
		    (unsigned long long)w->stats.shared_unavailable,
		    (unsigned long long)w->stats.shared_reconnects,
		    w->stats.aq_up != 0,
		    (unsigned long long)w->stats.aq_posted,
		    (unsigned long long)w->stats.aq_decided,
		    (unsigned long long)w->stats.aq_delivered);
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
	fprintf(fp,
	    "# HELP sluice_mcp_open_intents Tool calls recorded as intended "
	    "whose outcome is not recorded yet.\n"
	    "# TYPE sluice_mcp_open_intents gauge\n"
	    "sluice_mcp_open_intents %zu\n"
	    "# HELP sluice_mcp_intents_refused_total Tool calls refused "
	    "because their intent could not be kept open.\n"
	    "# TYPE sluice_mcp_intents_refused_total counter\n"
	    "sluice_mcp_intents_refused_total %llu\n"
	    "# HELP sluice_mcp_intent_wait_seconds Time tool calls waited "
	    "for their durable intent record before they were forwarded.\n"
	    "# TYPE sluice_mcp_intent_wait_seconds summary\n"
	    "sluice_mcp_intent_wait_seconds_sum %.6f\n"
	    "sluice_mcp_intent_wait_seconds_count %llu\n",
	    w->nintents, (unsigned long long)w->intents_refused,
	    (double)w->intent_wait_us / 1e6,
	    (unsigned long long)w->intent_waits);
	fprintf(fp,
	    "sluice_process_up{room=\"bridge\"} %d\n"
	    "sluice_process_exits_total{room=\"bridge\"} %llu\n"
	    "sluice_privsep_violations_total{room=\"bridge\"} %llu\n",
	    w->serving ? 1 : 0, (unsigned long long)w->exits,
	    (unsigned long long)w->violations);
}
