/*
 * brwire_ctl.c: the bridge's part of the control API in the parent
 * (approvals, tool pins). The bridge process holds the pending calls and
 * the pins, so each request is checked here (who asks is the uid the
 * control socket's kernel credentials give, whatever the body says; every
 * text bounded and printable) and forwarded as a flat MSG_BR_CTL; the
 * request waits, suspended, for the child's MSG_BR_CTL_REPLY, whose body
 * is passed on as text and never parsed here. A child that goes away
 * answers what waits with 503.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/brwire.h"
#include "gateway/brwire_int.h"
#include "gateway/log.h"
#include "gateway/privsep/chan.h"

static void
ctl_unlink(struct ctl_wait *cw)
{
	if ((*cw->prevp = cw->next) != NULL)
		cw->next->prevp = cw->prevp;
}

static void
on_ctl_cancel(struct ctl_req *req, void *arg)
{
	struct ctl_wait *cw = arg;

	(void)req;
	ctl_unlink(cw);
	free(cw);
}

void
brw_ctl_fail_all(struct brw *w, const char *why)
{
	struct ctl_wait *cw;

	while ((cw = w->ctls) != NULL) {
		ctl_unlink(cw);
		ctl_req_on_cancel(cw->req, NULL, NULL);
		(void)ctl_reply_error(cw->req, 503, "unavailable", "%s", why);
		free(cw);
	}
}

/* Forwards m to the child; the answer comes in ctl_answer. */
static enum ctl_rc
forward(struct brw *w, struct ctl_req *req, struct msg_br_ctl *m)
{
	struct ctl_wait *cw;

	if (w->ch == NULL || !w->serving)
		return ctl_reply_error(req, 503, "unavailable",
		    "the bridge process is restarting");
	if ((cw = calloc(1, sizeof(*cw))) == NULL)
		return ctl_reply_error(req, 500, "internal", "memory");
	m->ticket = ++w->next_ticket;
	cw->w = w;
	cw->req = req;
	cw->ticket = m->ticket;
	cw->m = *m;
	if (chan_send1(w->ch, MSG_BR_CTL, m, sizeof(*m)) == -1) {
		free(cw);
		return ctl_reply_error(req, 503, "unavailable",
		    "the bridge process does not take requests: %s",
		    strerror(errno));
	}
	if ((cw->next = w->ctls) != NULL)
		cw->next->prevp = &cw->next;
	cw->prevp = &w->ctls;
	w->ctls = cw;
	ctl_req_on_cancel(req, on_ctl_cancel, cw);
	return CTL_SUSPEND;
}

/* The child's answer (r NULL: none could be had). The body is the
 * child's text, passed on as it is, never parsed here. */
static void
ctl_answer(struct ctl_wait *cw, const struct msg_br_ctl_reply *r,
    const char *body)
{
	const struct msg_br_ctl *m = &cw->m;
	struct ctl_req *req = cw->req;
	int e = r != NULL ? r->err_no : ENOMEM;

	ctl_unlink(cw);
	ctl_req_on_cancel(req, NULL, NULL);
	switch (m->op) {
	case MSG_BR_OP_APPROVALS:
		if (e == ENOTCONN)
			(void)ctl_reply_error(req, 503, "unavailable", "the "
			    "fleet's approval queue does not answer (see "
			    "sluice status)");
		else if (e != 0)
			(void)ctl_reply_error(req, 500, "internal", "%s",
			    strerror(e));
		else
			(void)ctl_reply_text(req, 200, "application/json",
			    body);
		break;
	case MSG_BR_OP_DECIDE:
		if (e == ENOENT)
			(void)ctl_reply_error(req, 404, "not_found", "no "
			    "pending call %s (unknown, already decided or "
			    "timed out)", m->id);
		else if (e == ENOTCONN)
			(void)ctl_reply_error(req, 503, "unavailable", "call "
			    "%s is not decided: the fleet's approval queue "
			    "does not answer (see sluice status)", m->id);
		else if (e == EIO)
			(void)ctl_reply_error(req, 500, "internal", "call %s "
			    "was decided, but this host could not record the "
			    "decision", m->id);
		else if (e != 0)
			(void)ctl_reply_error(req, 400, "bad_request", "cannot "
			    "decide call %s: %s", m->id, strerror(e));
		else {
			log_info("approval %s: %s by %s (uid %lld)%s%s", m->id,
			    m->approve ? "approve" : "deny", m->name,
			    (long long)m->uid, m->has_note ? ", note: " : "",
			    m->has_note ? m->note : "");
			(void)ctl_reply_json(req, 200, json_pack("{s:s,s:s,s:s,"
			    "s:I}", "id", m->id, "decision", m->approve ?
			    "approved" : "denied", "approver", m->name,
			    "approver_uid", (json_int_t)m->uid));
		}
		break;
	case MSG_BR_OP_PINS:
		if (e == ENOENT)
			(void)ctl_reply_error(req, 404, "not_found", "unknown "
			    "server %s, or its tools were not listed yet",
			    m->server);
		else if (e != 0)
			(void)ctl_reply_error(req, 500, "internal", "%s",
			    strerror(e));
		else
			(void)ctl_reply_text(req, 200,
			    "text/yaml; charset=utf-8", body);
		break;
	default:	/* MSG_BR_OP_ACCEPT */
		if (e == ENOENT)
			(void)ctl_reply_error(req, 404, "not_found", "unknown "
			    "server %s or tool %s", m->server, m->tool);
		else if (e != 0)
			(void)ctl_reply_error(req, 500, "internal", "%s",
			    strerror(e));
		else {
			log_info("mcp pins: %s/%s accepted", m->server,
			    m->tool);
			(void)ctl_reply_json(req, 200, json_pack("{s:s,s:s}",
			    "server", m->server, "tool", m->tool));
		}
		break;
	}
	free(cw);
}

static enum ctl_rc
approvals_get(struct ctl_req *req, void *arg)
{
	struct msg_br_ctl m;

	memset(&m, 0, sizeof(m));
	m.op = MSG_BR_OP_APPROVALS;
	return forward(arg, req, &m);
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
	struct msg_br_ctl m;
	char name[160];
	uid_t uid;

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
	memset(&m, 0, sizeof(m));
	if (id == NULL || brw_cp(m.id, sizeof(m.id), id) == -1)
		return ctl_reply_error(req, 404, "not_found",
		    "no pending call %s (unknown, already decided or timed "
		    "out)", id != NULL ? id : "");
	uid_name(uid, name, sizeof(name));
	m.op = MSG_BR_OP_DECIDE;
	m.approve = strcmp(decision, "approve") == 0;
	m.uid = (int64_t)uid;
	(void)brw_cp(m.name, sizeof(m.name), name);
	if (note != NULL) {
		m.has_note = 1;
		(void)brw_cp(m.note, sizeof(m.note), note);
	}
	if (reason != NULL) {
		m.has_reason = 1;
		(void)brw_cp(m.reason, sizeof(m.reason), reason);
	}
	return forward(w, req, &m);
}

static enum ctl_rc
pins_get(struct ctl_req *req, void *arg)
{
	const char *server = ctl_req_param(req, "server");
	struct msg_br_ctl m;

	memset(&m, 0, sizeof(m));
	if (server == NULL || brw_cp(m.server, sizeof(m.server), server) == -1)
		return ctl_reply_error(req, 404, "not_found",
		    "unknown server %s, or its tools were not listed yet",
		    server != NULL ? server : "");
	m.op = MSG_BR_OP_PINS;
	return forward(arg, req, &m);
}

static enum ctl_rc
pins_accept(struct ctl_req *req, void *arg)
{
	const char *server = ctl_req_param(req, "server");
	const char *tool = ctl_req_param(req, "tool");
	struct msg_br_ctl m;

	memset(&m, 0, sizeof(m));
	if (server == NULL || tool == NULL ||
	    brw_cp(m.server, sizeof(m.server), server) == -1 ||
	    brw_cp(m.tool, sizeof(m.tool), tool) == -1)
		return ctl_reply_error(req, 404, "not_found",
		    "unknown server %s or tool %s", server != NULL ? server :
		    "", tool != NULL ? tool : "");
	m.op = MSG_BR_OP_ACCEPT;
	return forward(arg, req, &m);
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

void
brw_ctl_reply(struct brw *w, const struct msg_br_ctl_reply *r, size_t len)
{
	struct ctl_wait *cw;
	char *body;

	if (len != sizeof(*r) + r->len) {
		brw_violation(w, "a malformed control reply");
		return;
	}
	for (cw = w->ctls; cw != NULL; cw = cw->next)
		if (cw->ticket == r->ticket)
			break;
	if (cw == NULL)
		return;		/* its caller went away */
	if ((body = malloc((size_t)r->len + 1)) == NULL) {
		ctl_answer(cw, NULL, NULL);
		return;
	}
	memcpy(body, r + 1, r->len);
	body[r->len] = '\0';
	ctl_answer(cw, r, body);
	free(body);
}
