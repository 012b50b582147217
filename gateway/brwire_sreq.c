/*
 * brwire_sreq.c: the server requests a bridge process has carried to a
 * client and not yet recorded. A request an upstream makes of the agent's
 * client (sampling, elicitation, roots) is recorded as mcp.server_request
 * by the bridge once its outcome is known, which may be minutes after it
 * reached the client; a bridge process killed meanwhile would leave the
 * log saying nothing of it, though the client may have acted on it. So
 * the child announces each one when it is carried (MSG_BR_SREQ, with
 * what the record would say of it), its record names the announcement
 * it ends (msg_br_event's sreq_key), and when the parent sees the child
 * go, every announcement still open becomes an mcp.server_request record
 * whose outcome is unknown (reason outcome_unknown), as an open mcp.intent
 * becomes mcp.outcome_unknown (brwire_intent.c).
 *
 * Kept in memory only: a crash of the parent itself takes them with it.
 * Bounded as the child bounds what it carries: per sandbox by the daemon
 * config's server_requests_per_sandbox, and POL_LIM_SREQ_TOTAL in all;
 * one past the bound (which a child that keeps its own bounds never
 * sends) is logged and not kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/bridge.h"
#include "gateway/brwire.h"
#include "gateway/brwire_int.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/record.h"

static uint32_t
lim_sandbox(const struct brw *w)
{
	const struct pol_config *c = gw_config(w->gw);

	return c != NULL && c->lim_sreq_sandbox != 0 ? c->lim_sreq_sandbox :
	    POL_LIM_SREQ_SANDBOX;
}

void
brw_sreq_carried(struct brw *w, const struct msg_br_sreq *m)
{
	struct msg_br_sreq *a;
	size_t i, mine = 0, cap;

	for (i = 0; i < w->nsreqs; i++) {
		if (w->sreqs[i].key == m->key) {
			brw_violation(w, "a server request announced twice");
			return;
		}
		if (strcmp(w->sreqs[i].sandbox, m->sandbox) == 0)
			mine++;
	}
	if (mine >= lim_sandbox(w) || w->nsreqs >= POL_LIM_SREQ_TOTAL) {
		log_warnx("bridge process: %s of %s for %s over the bound of "
		    "server requests kept open", m->method, m->server,
		    m->sandbox);
		return;
	}
	if (w->nsreqs == w->capsreqs) {
		cap = w->capsreqs != 0 ? w->capsreqs * 2 : 16;
		if ((a = reallocarray(w->sreqs, cap, sizeof(*a))) == NULL) {
			log_warn("server request %s kept open", m->method);
			return;
		}
		w->sreqs = a;
		w->capsreqs = cap;
	}
	w->sreqs[w->nsreqs++] = *m;
}

void
brw_sreq_ended(struct brw *w, uint64_t key)
{
	size_t i;

	for (i = 0; i < w->nsreqs; i++)
		if (w->sreqs[i].key == key) {
			/* Order does not matter. */
			w->sreqs[i] = w->sreqs[--w->nsreqs];
			return;
		}
}

static void
on_unknown(void *arg, int ok, uint64_t seq)
{
	(void)arg;
	(void)seq;
	if (!ok)
		log_warnx("mcp.server_request of unknown outcome: record lost");
}

static const char *
opt(const char *s)
{
	return s[0] != '\0' ? s : NULL;
}

void
brw_sreqs_orphaned(struct brw *w, const char *why)
{
	const struct msg_br_sreq *m;
	struct br_event ev;
	char detail[320];
	size_t i;

	for (i = 0; i < w->nsreqs; i++) {
		m = &w->sreqs[i];
		snprintf(detail, sizeof(detail), "%s; outcome unknown: %s",
		    m->detail, why);
		memset(&ev, 0, sizeof(ev));
		ev.kind = BR_EV_SERVER_REQUEST;
		ev.kind_name = br_kind_name(ev.kind);
		ev.sandbox = m->sandbox;
		ev.subject = opt(m->subject);
		ev.policy = opt(m->policy);
		ev.src = opt(m->src);
		ev.session = opt(m->session);
		ev.server = m->server;
		ev.tool = m->method;
		ev.args_digest = opt(m->args_digest);
		ev.decision = "unknown";
		ev.reason = POL_REASON_OUTCOME_UNKNOWN;
		ev.detail = detail;
		ev.upstream_latency_us = -1;
		ev.approver_uid = -1;
		if (rec_durable(w->rec, ev.kind_name, brw_ev_fields(&ev),
		    on_unknown, NULL) == -1)
			log_warn("mcp.server_request of unknown outcome for %s",
			    m->sandbox);
	}
	w->nsreqs = 0;
}

void
brw_sreqs_free(struct brw *w)
{
	free(w->sreqs);
	w->sreqs = NULL;
	w->nsreqs = w->capsreqs = 0;
}
