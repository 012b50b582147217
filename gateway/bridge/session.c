/*
 * session.c: the bridge's MCP sessions. Mcp-Session-Id is 256 random bits,
 * created by initialize, and bound to the sandbox and the server path that
 * created it: presented by another sandbox (or on another path) it is
 * unknown (404), never a way in. Authentication is per request (source
 * address + bearer token, front.c), never by session. The table is bounded
 * without locking anyone out: a session unused for BR_SESSION_IDLE_MS
 * expires, a sandbox at BR_SESSIONS_PER_SB loses its own least recently
 * used one, and a full table gives up one of the sandbox holding the most;
 * a session with a request in flight is neither expired nor given up. The
 * stateless 2026-07-28 revision has no sessions: its requests never come
 * here (modern.c), except that a subscriptions/listen stream is given a
 * session of its own, which no Mcp-Session-Id names.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"

struct br_session *
br_session_find(struct br *br, const char *id)
{
	struct br_session *s;

	/* From the most recently used end: a request's session is there
	 * (session_check moves it), so the common lookup is one step. */
	TAILQ_FOREACH_REVERSE(s, &br->sessions, br_sessions, entry)
		if (strcmp(s->id, id) == 0)
			return s;
	return NULL;
}

void
br_session_free(struct br *br, struct br_session *s)
{
	TAILQ_REMOVE(&br->sessions, s, entry);
	br->nsessions--;
	/* Going already: its stream's end must not free it again. */
	s->listen = false;
	br_stream_end(s->stream);
	br_subs_drop(br, s);
	json_decref(s->notes);
	json_decref(s->subs);
	json_decref(s->listen_id);
	free(s);
}

/* A request of rq's session starts (delta 1) or stops (-1) waiting for
 * its answer. By id, not by pointer: the session may be gone meanwhile
 * (DELETE, a removed sandbox), and then there is nothing to count. */
void
br_session_hold(struct br *br, const struct br_req *rq, int delta)
{
	struct br_session *s;

	if (rq->session[0] == '\0' ||
	    (s = br_session_find(br, rq->session)) == NULL)
		return;
	if (delta > 0)
		s->inflight++;
	else if (s->inflight > 0)
		s->inflight--;
}

/* Frees the sessions unused for BR_SESSION_IDLE_MS, except those with a
 * request in flight. The list is least recently used first: the walk ends
 * at the first recent one. */
static void
session_expire(struct br *br)
{
	struct br_session *s, *t;
	uint64_t now = ev_now_ms();

	TAILQ_FOREACH_SAFE(s, &br->sessions, entry, t) {
		if (now - s->used_ms < BR_SESSION_IDLE_MS)
			break;
		if (s->inflight == 0)
			br_session_free(br, s);
	}
}

/* qsort order: by sandbox, least recently used first within one. */
static int
session_cmp(const void *a, const void *b)
{
	const struct br_session *x = *(const struct br_session *const *)a;
	const struct br_session *y = *(const struct br_session *const *)b;
	int r;

	if ((r = strcmp(x->sandbox, y->sandbox)) != 0)
		return r;
	return x->used_ms < y->used_ms ? -1 : x->used_ms > y->used_ms;
}

/*
 * The session to give up when the table is full: the least recently used
 * idle one of the sandbox that holds the most sessions (ties: the one
 * unused longest), so that however many sandboxes fill the table, the ones
 * with few sessions keep them and a new sandbox still gets one. NULL when
 * every session has a request in flight. Runs only on a full table.
 */
static struct br_session *
session_victim(struct br *br)
{
	struct br_session **v, *s, *idle, *best = NULL;
	size_t i, j, n = 0, bestn = 0;

	if ((v = calloc(br->nsessions, sizeof(*v))) == NULL) {
		/* Without memory to count: the least recently used idle
		 * session of anyone. */
		TAILQ_FOREACH(s, &br->sessions, entry)
			if (s->inflight == 0)
				return s;
		return NULL;
	}
	TAILQ_FOREACH(s, &br->sessions, entry)
		v[n++] = s;
	qsort(v, n, sizeof(*v), session_cmp);
	for (i = 0; i < n; i = j) {
		idle = NULL;
		for (j = i; j < n && strcmp(v[j]->sandbox, v[i]->sandbox) ==
		    0; j++)
			if (idle == NULL && v[j]->inflight == 0)
				idle = v[j];
		if (idle != NULL && (j - i > bestn || (j - i == bestn &&
		    idle->used_ms < best->used_ms))) {
			best = idle;
			bestn = j - i;
		}
	}
	free(v);
	return best;
}

struct br_session *
br_session_new(struct br *br, struct br_req *rq, const char *version)
{
	struct br_session *s, *t, *own = NULL;
	size_t mine = 0;

	session_expire(br);
	/* A sandbox that opens sessions without end loses its least
	 * recently used idle one rather than anyone else's. */
	TAILQ_FOREACH(t, &br->sessions, entry) {
		if (strcmp(t->sandbox, rq->client.id) != 0)
			continue;
		mine++;
		if (own == NULL && t->inflight == 0)
			own = t;
	}
	if (mine >= BR_SESSIONS_PER_SB)
		s = own;
	else if (br->nsessions >= BR_SESSIONS_MAX)
		s = session_victim(br);
	else
		s = NULL;
	if (s != NULL)
		br_session_free(br, s);
	else if (mine >= BR_SESSIONS_PER_SB ||
	    br->nsessions >= BR_SESSIONS_MAX) {
		/* Every candidate has a request in flight. */
		errno = ENOSPC;
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	if (br_random_hex(s->id, 32) == -1) {
		free(s);
		return NULL;
	}
	snprintf(s->sandbox, sizeof(s->sandbox), "%s", rq->client.id);
	snprintf(s->server, sizeof(s->server), "%s", rq->server);
	snprintf(s->version, sizeof(s->version), "%s", version);
	s->log_level = -1;
	s->used_ms = ev_now_ms();
	TAILQ_INSERT_TAIL(&br->sessions, s, entry);
	br->nsessions++;
	return s;
}

void
br_sandbox_gone(struct br *br, const char *sandbox_id)
{
	struct br_session *s, *t;
	struct br_call *c, *d;

	br_streams_close(br, sandbox_id);
	TAILQ_FOREACH_SAFE(s, &br->sessions, entry, t)
		if (strcmp(s->sandbox, sandbox_id) == 0)
			br_session_free(br, s);
	TAILQ_FOREACH_SAFE(c, &br->approvals, entry, d)
		if (strcmp(c->client.id, sandbox_id) == 0)
			(void)br_call_sluice_denies(br, c->approval_id,
			    "sandbox removed");
	br_tasks_sandbox_gone(br, sandbox_id);
}

/* The session rules of transports.mdx for this request (sid: its
 * Mcp-Session-Id header, or NULL); NULL and an answer already given when
 * it may not go on. */
struct br_session *
br_session_check(struct br_req *rq, const char *sid, const struct br_rpc *rpc,
    bool *fresh)
{
	struct br_session *s;

	*fresh = false;
	if (sid == NULL) {
		if (rpc->kind == BR_RPC_REQUEST &&
		    strcmp(rpc->method, "initialize") == 0) {
			*fresh = true;
			return NULL;
		}
		br_reply_rpc_error(rq, 400, NULL, -32600,
		    "Bad Request: Mcp-Session-Id header is required");
		return NULL;
	}
	if ((s = br_session_owned(rq, sid)) == NULL)
		return NULL;
	if (rpc->kind == BR_RPC_REQUEST &&
	    strcmp(rpc->method, "initialize") == 0) {
		*fresh = true;
		return NULL;
	}
	br_session_touch(rq->br, s);
	snprintf(rq->session, sizeof(rq->session), "%s", s->id);
	return s;
}

struct br_session *
br_session_owned(struct br_req *rq, const char *sid)
{
	struct br_session *s;

	s = br_session_find(rq->br, sid);
	/* A listen stream's session is nobody's to name. */
	if (s == NULL || s->listen || strcmp(s->sandbox, rq->client.id) != 0 ||
	    strcmp(s->server, rq->server) != 0) {
		br_reply_rpc_error(rq, 404, NULL, -32001, "Session not found");
		return NULL;
	}
	return s;
}

void
br_session_touch(struct br *br, struct br_session *s)
{
	/* Kept in order of use, for session_expire and the victims. */
	s->used_ms = ev_now_ms();
	TAILQ_REMOVE(&br->sessions, s, entry);
	TAILQ_INSERT_TAIL(&br->sessions, s, entry);
}

