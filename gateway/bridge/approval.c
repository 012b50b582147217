/*
 * approval: calls waiting for a person (`decision: ask`), on one host or
 * in the queue a fleet's hosts share.
 *
 * A call that asks waits in br->approvals with a timer, bounded per
 * sandbox and in all. Without a fleet that is all: the control API lists
 * and decides the queue directly. With one (fleetq.h), the call is also a
 * row in the shared queue, and the row decides: every decision, made on
 * this host or another, is one conditional UPDATE there, so two people
 * never both decide a call, and a call that cannot be posted does not
 * wait at all (it is denied shared_state_unavailable: nobody elsewhere
 * could approve it). A decision made elsewhere comes back as a delivery
 * and is carried out like a local one, the approver's host kept in the
 * record; a decision made here for a call another host holds is recorded
 * here too, as mcp.approval, before the person is told it was made.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"

/* Arguments larger than this stay on the holding host; the shared row
 * says so and carries their digest. */
#define AP_ARGS_SHARED	8192

void
br_approval_unqueue(struct br_call *c, enum fleet_aq_close why)
{
	struct br *br = c->br;

	if (c->state != CALL_ASKING || br == NULL)
		return;
	TAILQ_REMOVE(&br->approvals, c, entry);
	br->napprovals--;
	ev_timer_cancel(br->loop, c->atimer);
	c->atimer = NULL;
	c->state = CALL_NEW;
	br_fq_forget(c->fqjob);
	c->fqjob = NULL;
	if (c->fq_posted)
		br_fq_close(br->fq, c->approval_id, why);
	c->fq_posted = false;
}

static void
on_approval_timeout(struct ev_loop *loop, void *arg)
{
	struct br_call *c = arg;

	(void)loop;
	c->atimer = NULL;
	br_approval_unqueue(c, FLEET_AQ_TIMEOUT);
	c->approval = "timeout";
	br_call_deny(c, NULL, POL_REASON_APPROVAL_TIMEOUT,
	    "Nobody approved this call in time.");
}

static const char *
kind_text(const struct br_call *c)
{
	if (c->kind == NULL)
		return "tool";
	return c->kind->ev == BR_EV_RESOURCE ? "resource" : "prompt";
}

static void
on_posted(void *arg, int ok, const struct fleet_aq_held *held, json_t *list,
    const char *err)
{
	struct br_call *c = arg;

	(void)held;
	(void)list;
	c->fqjob = NULL;
	if (ok == 1) {
		c->fq_posted = true;
		return;
	}
	log_warnx("bridge: call %s/%s from %s cannot wait for approval: the "
	    "fleet's approval queue: %s", c->up->srv->name, c->tool,
	    c->client.id, err);
	br_approval_unqueue(c, FLEET_AQ_GONE);
	br_call_deny(c, NULL, POL_REASON_SHARED_STATE_UNAVAILABLE,
	    "Approvals are unavailable right now; try again later.");
}

/* Posts c's row; false when it cannot even be queued (c is then denied). */
static bool
post(struct br_call *c)
{
	struct fleet_aq_item it;
	char *args = NULL, note[96];

	memset(&it, 0, sizeof(it));
	it.id = c->approval_id;
	it.host = br_fq_host(c->br->fq);
	it.sandbox = c->client.id;
	it.subject = c->client.subject;
	it.server = c->up->srv->name;
	it.tool = c->tool;
	it.kind = kind_text(c);
	it.rule = c->rule[0] != '\0' ? c->rule : NULL;
	it.expires_ms = c->expires_ms;
	if ((args = json_dumps(c->args, JSON_COMPACT | JSON_ENCODE_ANY)) !=
	    NULL && strlen(args) > AP_ARGS_SHARED) {
		free(args);
		snprintf(note, sizeof(note), "\"(held on the host: %.72s)\"",
		    c->args_digest);
		args = strdup(note);
	}
	it.arguments = args;
	c->fqjob = br_fq_post(c->br->fq, &it, on_posted, c);
	free(args);
	return c->fqjob != NULL;
}

void
br_call_ask(struct br_call *c)
{
	struct br *br = c->br;
	uint64_t ms = pol_tool_approval_timeout_ms(c->client.policy);
	struct br_call *o;
	size_t mine = 0;
	char why[160];

	/* One sandbox cannot crowd out everyone else's approvals. */
	TAILQ_FOREACH(o, &br->approvals, entry)
		if (strcmp(o->client.id, c->client.id) == 0)
			mine++;
	if (br->napprovals >= BR_APPROVALS_MAX ||
	    mine >= BR_APPROVALS_PER_SB ||
	    br_random_hex(c->approval_id, 16) == -1 ||
	    (c->atimer = ev_timer_add(br->loop, ms, on_approval_timeout, c)) ==
	    NULL) {
		br_call_deny(c, NULL, POL_REASON_APPROVAL_UNAVAILABLE,
		    "Too many calls are waiting for approval; try again "
		    "later.");
		return;
	}
	c->created_ms = br_wall_ms();
	c->expires_ms = c->created_ms + ms;
	c->state = CALL_ASKING;
	TAILQ_INSERT_TAIL(&br->approvals, c, entry);
	br->napprovals++;
	if (br->fq != NULL && !post(c)) {
		br_approval_unqueue(c, FLEET_AQ_GONE);
		br_call_deny(c, NULL, POL_REASON_SHARED_STATE_UNAVAILABLE,
		    "Approvals are unavailable right now; try again later.");
		return;
	}
	/* A client of the tasks extension does not wait on its request:
	 * the call becomes a task (tasks.c), or is refused when the
	 * sandbox holds all the tasks it may. */
	if (br_task_offer(c, false, why, sizeof(why)) == -1) {
		br_approval_unqueue(c, FLEET_AQ_GONE);
		br_call_deny(c, NULL, POL_REASON_OVERLOAD, why);
		return;
	}
	log_info("bridge: call %s/%s from %s waits for approval (id %s)",
	    c->up->srv->name, c->tool, c->client.id, c->approval_id);
}

/* The local queue (and the server requests, which stay per host), as
 * the listing shows them; the host is named when there is a fleet. */
static json_t *
local_list(struct br *br, bool calls)
{
	const char *host = br_fq_host(br->fq);
	struct br_call *c;
	json_t *a, *o;
	size_t i;

	if ((a = json_array()) == NULL)
		return NULL;
	TAILQ_FOREACH(c, &br->approvals, entry) {
		if (!calls)
			break;
		o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:O, s:s, s:I, s:I}",
		    "id", c->approval_id, "sandbox", c->client.id,
		    "subject", c->client.subject, "server", c->up->srv->name,
		    "tool", c->tool, "arguments", c->args, "rule", c->rule,
		    "created_ms", (json_int_t)c->created_ms,
		    "expires_ms", (json_int_t)c->expires_ms);
		if (o == NULL || json_array_append_new(a, o) == -1)
			goto fail;
	}
	if (br_srvreq_approvals(br, a) == -1)
		goto fail;
	json_array_foreach(a, i, o)
		if (host != NULL && json_object_set_new(o, "host",
		    json_string(host)) == -1)
			goto fail;
	return a;
fail:
	json_decref(a);
	return NULL;
}

json_t *
br_approvals_list(struct br *br)
{
	return local_list(br, true);
}

/* Takes pending call id out of the approval queue and carries out the
 * decision; uid -1 is Sluice deciding in its own name. host is where the
 * decision was made (NULL without a fleet). */
static int
decide_pending(struct br *br, const char *id, bool approve, const char *name,
    int64_t uid, const char *note, const char *reason, const char *host,
    enum fleet_aq_close why)
{
	struct br_call *c;
	char msg[256];

	TAILQ_FOREACH(c, &br->approvals, entry)
		if (strcmp(c->approval_id, id) == 0)
			break;
	if (c == NULL)
		return br_srvreq_decide(br, id, approve, name, uid, note,
		    reason);
	br_approval_unqueue(c, why);
	c->approver = strdup(name);
	c->approver_uid = uid;
	c->approver_note = note != NULL ? strdup(note) : NULL;
	c->approver_host = host != NULL ? strdup(host) : NULL;
	if (c->approver == NULL || (note != NULL && c->approver_note ==
	    NULL) || (host != NULL && c->approver_host == NULL)) {
		/* An approval must name who gave it: without memory for
		 * that, the call does not go ahead. */
		c->approval = "denied";
		br_call_deny(c, NULL, POL_REASON_INTERNAL_ERROR,
		    "The approval could not be recorded.");
		return 0;
	}
	if (approve) {
		c->approval = "approved";
		/* The wait may have outlasted the listing it was asked on:
		 * the call meets a recent definition, as any other does. */
		c->approved = true;
		br_call_decide(c);
		return 0;
	}
	c->approval = "denied";
	if (reason != NULL && *reason != '\0')
		snprintf(msg, sizeof(msg), "%s declined this call: %.180s",
		    uid >= 0 ? "A person" : "Sluice", reason);
	else
		snprintf(msg, sizeof(msg), "%s declined this call.",
		    uid >= 0 ? "A person" : "Sluice");
	br_call_deny(c, NULL, POL_REASON_APPROVAL_DENIED, msg);
	return 0;
}

int
br_approval_decide(struct br *br, const char *id, bool approve,
    const struct br_approver *who, const char *reason)
{
	if (br == NULL || id == NULL || who == NULL || who->name == NULL ||
	    who->name[0] == '\0' || who->uid < 0) {
		errno = EINVAL;
		return -1;
	}
	return decide_pending(br, id, approve, who->name, who->uid, who->note,
	    reason, br_fq_host(br->fq), FLEET_AQ_TAKEN);
}

int
br_call_sluice_denies(struct br *br, const char *id, const char *reason)
{
	return decide_pending(br, id, false, "sluice", -1, NULL, reason, NULL,
	    FLEET_AQ_GONE);
}

void
br_approval_delivered(void *arg, const struct fleet_aq_decision *d)
{
	struct br *br = arg;
	struct br_call *c;

	TAILQ_FOREACH(c, &br->approvals, entry)
		if (strcmp(c->approval_id, d->id) == 0)
			break;
	if (c == NULL) {
		/* Carried out already (a decision made here comes back
		 * too), or its call went away: the row is closed either
		 * way, and a closed row stays as it was. */
		br_fq_close(br->fq, d->id, FLEET_AQ_GONE);
		return;
	}
	log_info("bridge: call %s/%s from %s %s by %s on %s (id %s)",
	    c->up->srv->name, c->tool, c->client.id, d->approve ? "approved" :
	    "denied", d->approver, d->approver_host, d->id);
	(void)decide_pending(br, d->id, d->approve != 0, d->approver,
	    d->approver_uid, d->note[0] != '\0' ? d->note : NULL,
	    d->reason[0] != '\0' ? d->reason : NULL, d->approver_host,
	    FLEET_AQ_TAKEN);
}

/* ------------------------------------------------------------ asynchronous
 * listing and deciding, for a fleet: the answer comes from its database. */

struct ap_wait {
	struct br		*br;
	br_approval_answer	*cb;
	void			*arg;
	struct fleet_aq_decision d;
	struct fleet_aq_held	 held;
};

static void
on_listed(void *arg, int ok, const struct fleet_aq_held *held, json_t *list,
    const char *err)
{
	struct ap_wait *w = arg;
	json_t *mine;

	(void)held;
	if (ok != 1) {
		log_warnx("bridge: approvals: the fleet's queue: %s", err);
		w->cb(w->arg, ENOTCONN, NULL);
	} else if ((mine = local_list(w->br, false)) == NULL ||
	    json_array_extend(list, mine) == -1) {
		json_decref(mine);
		w->cb(w->arg, ENOMEM, NULL);
	} else {
		json_decref(mine);
		w->cb(w->arg, 0, list);
	}
	json_decref(list);
	free(w);
}

int
br_approvals_list_async(struct br *br, br_approval_answer *cb, void *arg)
{
	struct ap_wait *w;

	if (br->fq == NULL) {
		json_t *a = br_approvals_list(br);

		cb(arg, a != NULL ? 0 : ENOMEM, a);
		json_decref(a);
		return 0;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return -1;
	w->br = br;
	w->cb = cb;
	w->arg = arg;
	if (br_fq_list(br->fq, on_listed, w) == NULL) {
		free(w);
		errno = ENOTCONN;
		return -1;
	}
	return 0;
}

static void
on_approval_recorded(void *arg, int ok)
{
	struct ap_wait *w = arg;

	/* Decided either way; a decision this host could not record is
	 * said to the person, who must know the record is missing. */
	w->cb(w->arg, ok ? 0 : EIO, NULL);
	free(w);
}

/* This host decided a call another host holds: its own record of it. */
static void
record_remote(struct ap_wait *w)
{
	struct br_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = BR_EV_APPROVAL;
	ev.kind_name = br_kind_name(BR_EV_APPROVAL);
	ev.sandbox = w->held.sandbox;
	ev.subject = w->held.subject;
	ev.server = w->held.server;
	ev.tool = w->held.tool;
	ev.approver = w->d.approver;
	ev.approver_uid = w->d.approver_uid;
	ev.approver_note = w->d.note[0] != '\0' ? w->d.note : NULL;
	ev.approver_host = w->d.approver_host;
	ev.held_by = w->held.host;
	ev.approval = w->d.approve ? "approved" : "denied";
	ev.decision = w->d.approve ? "allow" : "deny";
	ev.message = w->d.reason[0] != '\0' ? w->d.reason : NULL;
	ev.call_id = w->d.id;
	ev.upstream_latency_us = -1;
	if (w->br->h.record(w->br->h.ctx, &ev, on_approval_recorded, w) == -1)
		on_approval_recorded(w, 0);
}

static void
on_decided(void *arg, int ok, const struct fleet_aq_held *held, json_t *list,
    const char *err)
{
	struct ap_wait *w = arg;
	int e;

	(void)list;
	if (ok == -1) {
		log_warnx("bridge: approval %s: the fleet's queue: %s",
		    w->d.id, err);
		w->cb(w->arg, ENOTCONN, NULL);
		free(w);
		return;
	}
	if (ok == 0) {
		w->cb(w->arg, ENOENT, NULL);
		free(w);
		return;
	}
	w->held = *held;
	if (strcmp(held->host, w->d.approver_host) != 0) {
		log_info("bridge: approval %s: %s by %s for host %s", w->d.id,
		    w->d.approve ? "approved" : "denied", w->d.approver,
		    held->host);
		record_remote(w);
		return;
	}
	/* Ours: carried out now, not when the notification comes back. */
	e = decide_pending(w->br, w->d.id, w->d.approve != 0, w->d.approver,
	    w->d.approver_uid, w->d.note[0] != '\0' ? w->d.note : NULL,
	    w->d.reason[0] != '\0' ? w->d.reason : NULL, w->d.approver_host,
	    FLEET_AQ_TAKEN) == 0 ? 0 : errno;
	w->cb(w->arg, e, NULL);
	free(w);
}

/* Copies s into a fixed field; -1 when it does not fit. */
static int
cp(char *dst, size_t n, const char *s)
{
	if (strlen(s) >= n)
		return -1;
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

int
br_approval_decide_async(struct br *br, const char *id, bool approve,
    const struct br_approver *who, const char *reason,
    br_approval_answer *cb, void *arg)
{
	struct ap_wait *w;
	int e;

	if (br == NULL || id == NULL || who == NULL || who->name == NULL ||
	    who->name[0] == '\0' || who->uid < 0) {
		errno = EINVAL;
		return -1;
	}
	if (br->fq == NULL) {
		e = br_approval_decide(br, id, approve, who, reason) == 0 ? 0 :
		    errno;
		cb(arg, e, NULL);
		return 0;
	}
	/* Server requests wait on this host only. */
	if (br_srvreq_decide(br, id, approve, who->name, who->uid, who->note,
	    reason) == 0) {
		cb(arg, 0, NULL);
		return 0;
	}
	if (errno != ENOENT) {
		cb(arg, errno, NULL);
		return 0;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return -1;
	w->br = br;
	w->cb = cb;
	w->arg = arg;
	w->d.approve = approve;
	w->d.approver_uid = who->uid;
	if (cp(w->d.id, sizeof(w->d.id), id) == -1) {
		free(w);
		cb(arg, ENOENT, NULL);
		return 0;
	}
	if (cp(w->d.approver, sizeof(w->d.approver), who->name) == -1 ||
	    (who->note != NULL && cp(w->d.note, sizeof(w->d.note),
	    who->note) == -1) || (reason != NULL && cp(w->d.reason,
	    sizeof(w->d.reason), reason) == -1)) {
		free(w);
		errno = EINVAL;
		return -1;
	}
	(void)cp(w->d.approver_host, sizeof(w->d.approver_host),
	    br_fq_host(br->fq));
	if (br_fq_decide(br->fq, &w->d, on_decided, w) == NULL) {
		free(w);
		errno = ENOTCONN;
		return -1;
	}
	return 0;
}
