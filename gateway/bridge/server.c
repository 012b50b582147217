/*
 * server: the sandbox-facing MCP endpoint, Streamable HTTP at /mcp/<server>.
 * It exists to turn untrusted HTTP into a small set of well-formed JSON-RPC
 * requests from an identified sandbox, answering everything else with the
 * status codes of the spec (transports.mdx, 2025-06-18 and 2025-11-25): the
 * checks run in a fixed order so that every request gets exactly one, and
 * the bridge keeps serving whatever arrives. libmicrohttpd runs inside our
 * ev loop through gateway/mhd.c, the driver the control API uses too:
 * requests that wait (an upstream call, an approval, the durable record)
 * are suspended connections, resumed and answered in the same loop
 * iteration as the event that completes them.
 *
 * Sessions: Mcp-Session-Id is 256 random bits, created by initialize, and
 * bound to the sandbox and the server path that created it: presented by
 * another sandbox (or on another path) it is unknown (404), never a way in.
 * Authentication is per request (source address + bearer token), never by
 * session. The table is bounded without locking anyone out: a session
 * unused for BR_SESSION_IDLE_MS expires, a sandbox at BR_SESSIONS_PER_SB
 * loses its own least recently used one, and a full table gives up one of
 * the sandbox holding the most; a session with a request in flight is
 * neither expired nor given up. The 2026-07-28 revision drops sessions and
 * initialize: it plugs in at session_check() below, where a request carrying
 * MCP-Protocol-Version 2026-07-28 would take its version and capabilities
 * from params._meta instead of a session (and Mcp-Method/Mcp-Name headers
 * would be checked against the body), leaving the rest of the pipeline as
 * is.
 */
/* SHA256_Init and friends (see br_sha256_hex): fast, stable, only marked
 * deprecated by OpenSSL 3, as in audit/merkle.c. */
#define OPENSSL_API_COMPAT 0x10100000L
#include <sys/random.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"
#include "gateway/mhd.h"
#include "gateway/record.h"

#define SLUICE_BR_VERSION	"0.1.0"

static const char *const versions[] = { "2025-11-25", "2025-06-18", NULL };

static void	session_hold(struct br *br, const struct br_req *rq, int delta);

/* ------------------------------------------------------------ utilities */

/* Lower-case hex of n bytes and a NUL: 2n + 1 bytes of out. Every call
 * digests its arguments and its result, so no printf per byte here. */
static void
hex(char *out, const unsigned char *b, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 0xf];
	}
	out[2 * n] = '\0';
}

void
br_sha256_hex(const void *data, size_t len, char out[72])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX c;

	/* Not SHA256(): in OpenSSL 3 the one-shot call fetches the method (a
	 * locked provider lookup) each time, about 5 % of the loop's CPU per
	 * tools/call (two digests each) in perf. */
	SHA256_Init(&c);
	SHA256_Update(&c, data, len);
	SHA256_Final(md, &c);
	memcpy(out, "sha256:", 7);
	hex(out + 7, md, sizeof(md));
}

int
br_random_hex(char *out, size_t nbytes)
{
	unsigned char b[64];

	if (nbytes > sizeof(b) ||
	    getrandom(b, nbytes, 0) != (ssize_t)nbytes)
		return -1;
	hex(out, b, nbytes);
	return 0;
}

uint64_t
br_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

const char *
br_kind_name(enum br_event_kind k)
{
	switch (k) {
	case BR_EV_CALL:
		return "mcp.call";
	case BR_EV_TOOL_DRIFT:
		return "mcp.tool_drift";
	case BR_EV_AUTH_FAILED:
		return "mcp.auth_failed";
	case BR_EV_TAINT:
		return "mcp.taint";
	case BR_EV_UPSTREAM:
		return "mcp.upstream";
	}
	return "mcp.unknown";
}

void
br_finding(struct br *br, enum br_event_kind kind, const char *sandbox,
    const char *server, const char *tool, const char *detail)
{
	struct br_event ev;

	if (br->h.finding == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	ev.kind_name = br_kind_name(kind);
	ev.sandbox = sandbox;
	ev.server = server;
	ev.tool = tool;
	ev.detail = detail;
	ev.upstream_latency_us = -1;
	br->h.finding(br->h.ctx, &ev);
}

void
br_client_release(struct br *br, struct br_client *c)
{
	if (c->policy_ref != NULL && br->h.release != NULL)
		br->h.release(br->h.ctx, c->policy_ref);
	c->policy_ref = NULL;
	c->policy = NULL;
}

struct br_up *
br_up_find(struct br *br, const char *name)
{
	size_t i;

	for (i = 0; i < br->nups; i++)
		if (strcmp(br->ups[i]->srv->name, name) == 0)
			return br->ups[i];
	return NULL;
}

/* ------------------------------------------------------------ JSON-RPC */

static void
rpc_invalid(struct br_rpc *out, int code, const char *msg)
{
	out->kind = BR_RPC_INVALID;
	out->code = code;
	out->http_status = 400;
	out->error = msg;
}

void
br_rpc_parse(const char *buf, size_t len, struct br_rpc *out)
{
	json_t *v, *id, *m;
	json_error_t jerr;

	memset(out, 0, sizeof(*out));
	if (buf == NULL) {
		rpc_invalid(out, -32700, "Parse error");
		return;
	}
	v = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
	    &jerr);
	if (v == NULL) {
		rpc_invalid(out, -32700, "Parse error");
		return;
	}
	if (json_is_array(v)) {
		json_decref(v);
		rpc_invalid(out, -32600, "Batching is not supported");
		return;
	}
	if (!json_is_object(v)) {
		json_decref(v);
		rpc_invalid(out, -32600, "Invalid Request: not an object");
		return;
	}
	out->msg = v;
	m = json_object_get(v, "jsonrpc");
	if (!json_is_string(m) || strcmp(json_string_value(m), "2.0") != 0) {
		rpc_invalid(out, -32600, "Invalid Request: jsonrpc must be "
		    "\"2.0\"");
		return;
	}
	id = json_object_get(v, "id");
	/* A null id is forbidden by MCP; strings and integers only. */
	if (id != NULL && !json_is_string(id) && !json_is_integer(id)) {
		rpc_invalid(out, -32600, "Invalid Request: bad id");
		return;
	}
	if (json_is_string(id) && json_string_length(id) > 256) {
		rpc_invalid(out, -32600, "Invalid Request: id too long");
		return;
	}
	m = json_object_get(v, "method");
	if (m != NULL) {
		if (!json_is_string(m) || json_string_length(m) == 0 ||
		    json_string_length(m) > 128 ||
		    strlen(json_string_value(m)) != json_string_length(m)) {
			rpc_invalid(out, -32600, "Invalid Request: bad method");
			return;
		}
		if (json_object_get(v, "params") != NULL &&
		    !json_is_object(json_object_get(v, "params"))) {
			rpc_invalid(out, -32600, "Invalid Request: params "
			    "must be an object");
			return;
		}
		out->method = json_string_value(m);
		out->id = id;
		out->kind = id != NULL ? BR_RPC_REQUEST : BR_RPC_NOTIFICATION;
		return;
	}
	if (id != NULL && (json_object_get(v, "result") != NULL) !=
	    (json_object_get(v, "error") != NULL)) {
		out->id = id;
		out->kind = BR_RPC_RESPONSE;
		return;
	}
	rpc_invalid(out, -32600, "Invalid Request");
}

void
br_rpc_clear(struct br_rpc *r)
{
	if (r == NULL)
		return;
	json_decref(r->msg);
	memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------ replies */

static enum MHD_Result
queue_reply(struct br_req *rq)
{
	enum MHD_Result ret;

	ret = MHD_queue_response(rq->conn, rq->status, rq->resp);
	MHD_destroy_response(rq->resp);
	rq->resp = NULL;
	rq->state = RQ_QUEUED;
	return ret;
}

/* Every answer goes through here; a parked request is resumed so that MHD
 * calls the access handler again, the only place it accepts a response. */
static void
reply_raw(struct br_req *rq, unsigned status, const char *ctype,
    const char *body, size_t len, const char *session_hdr, const char *allow)
{
	struct MHD_Response *resp;

	if (rq->resp != NULL || rq->state == RQ_RESUMING ||
	    rq->state == RQ_QUEUED)
		return;
	resp = MHD_create_response_from_buffer(len, (void *)(uintptr_t)body,
	    MHD_RESPMEM_MUST_COPY);
	if (resp == NULL) {
		log_warnx("bridge: out of memory for a response");
	} else {
		if (ctype != NULL)
			(void)MHD_add_response_header(resp,
			    MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
		if (session_hdr != NULL)
			(void)MHD_add_response_header(resp, "Mcp-Session-Id",
			    session_hdr);
		if (allow != NULL)
			(void)MHD_add_response_header(resp,
			    MHD_HTTP_HEADER_ALLOW, allow);
		if (status == 401)
			(void)MHD_add_response_header(resp,
			    MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
		rq->resp = resp;
		rq->status = status;
	}
	if (rq->state == RQ_PARKED) {
		TAILQ_REMOVE(&rq->br->parked, rq, entry);
		session_hold(rq->br, rq, -1);
		rq->state = RQ_RESUMING;
		mhd_resume(rq->br->mhd, rq->conn);
	}
}

void
br_req_reply(struct br_req *rq, unsigned status, const char *body,
    const char *session_hdr)
{
	reply_raw(rq, status, body != NULL ? "application/json" : NULL,
	    body != NULL ? body : "", body != NULL ? strlen(body) : 0,
	    session_hdr, NULL);
}

static void
reply_json(struct br_req *rq, unsigned status, json_t *o,
    const char *session_hdr)
{
	char *s;

	s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s == NULL) {
		br_req_reply(rq, 500, "{\"jsonrpc\":\"2.0\",\"id\":null,"
		    "\"error\":{\"code\":-32603,\"message\":\"Internal "
		    "error\"}}", NULL);
		return;
	}
	br_req_reply(rq, status, s, session_hdr);
	free(s);
}

void
br_reply_rpc_result(struct br_req *rq, json_t *id, json_t *result)
{
	json_t *o;

	o = json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", id,
	    "result", result);
	reply_json(rq, 200, o, NULL);
}

void
br_reply_rpc_error(struct br_req *rq, unsigned status, json_t *id, int code,
    const char *msg)
{
	json_t *o;

	o = json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
	    id != NULL ? id : json_null(), "error", "code", code, "message",
	    msg);
	reply_json(rq, status, o, NULL);
}

/* ------------------------------------------------------------ checks */

static const char *
hdr(struct br_req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

/* Does the comma-separated media list carry type (parameters ignored)? */
static bool
accept_has(const char *list, const char *type)
{
	const char *p = list, *e;
	size_t n = strlen(type), l;

	while (p != NULL && *p != '\0') {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		e = p + strcspn(p, ",");
		l = strcspn(p, ";, \t");
		if (l == n && strncasecmp(p, type, n) == 0)
			return true;
		p = e;
	}
	return false;
}

static bool
is_json_type(const char *ct)
{
	static const char want[] = "application/json";
	size_t n = sizeof(want) - 1;

	if (ct == NULL)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	if (strncasecmp(ct, want, n) != 0)
		return false;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t';
}

static bool
version_ok(const char *v)
{
	size_t i;

	for (i = 0; versions[i] != NULL; i++)
		if (strcmp(versions[i], v) == 0)
			return true;
	return false;
}

static bool
origin_ok(struct br *br, const char *origin)
{
	size_t i;

	if (origin == NULL)
		return true;
	if (strcmp(origin, br->origin_self) == 0)
		return true;
	for (i = 0; i < br->c.norigins; i++)
		if (br->c.origins[i] != NULL &&
		    strcmp(br->c.origins[i], origin) == 0)
			return true;
	return false;
}

/* "/mcp/<server>" with a configured server; copies the name. */
static bool
path_server(struct br *br, const char *path, char *out, size_t outlen)
{
	const char *s;

	if (strncmp(path, "/mcp/", 5) != 0)
		return false;
	s = path + 5;
	if (*s == '\0' || strlen(s) >= outlen || strchr(s, '/') != NULL)
		return false;
	if (br_up_find(br, s) == NULL)
		return false;
	snprintf(out, outlen, "%s", s);
	return true;
}

static int
identify(struct br_req *rq)
{
	struct br *br = rq->br;
	const union MHD_ConnectionInfo *ci;
	const struct sockaddr *sa;
	socklen_t slen;
	const char *auth, *token = NULL;
	char detail[160];

	ci = MHD_get_connection_info(rq->conn,
	    MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (ci == NULL || ci->client_addr == NULL)
		return -1;
	sa = ci->client_addr;
	slen = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
	    sizeof(struct sockaddr_in);
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)
		    (const void *)sa)->sin_addr, rq->src, sizeof(rq->src));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)
		    (const void *)sa)->sin6_addr, rq->src, sizeof(rq->src));
	auth = hdr(rq, MHD_HTTP_HEADER_AUTHORIZATION);
	if (auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0) {
		token = auth + 7;
		while (*token == ' ')
			token++;
	}
	memset(&rq->client, 0, sizeof(rq->client));
	if (br->h.identify(br->h.ctx, sa, slen, token, &rq->client) == -1 ||
	    rq->client.policy == NULL || rq->client.id[0] == '\0') {
		br_client_release(br, &rq->client);
		/* Anyone who reaches the port can send these: recorded
		 * within a budget per source and interval, the rest counted
		 * into one summary (rec_tally). */
		if (rec_tally(REC_TALLY_MCP_AUTH, rq->src, NULL) == 0)
			return -1;
		/* Never the token itself: only whether one came. */
		snprintf(detail, sizeof(detail), "bridge request from %s %s "
		    "refused: %s", rq->src, rq->path, token == NULL ?
		    "no bearer token" : "address and token do not agree");
		br_finding(br, BR_EV_AUTH_FAILED, NULL, rq->server, NULL,
		    detail);
		return -1;
	}
	rq->client.id[sizeof(rq->client.id) - 1] = '\0';
	rq->client.subject[sizeof(rq->client.subject) - 1] = '\0';
	if (rq->client.nlabels > BR_MAX_LABELS)
		rq->client.nlabels = BR_MAX_LABELS;
	rq->identified = true;
	return 0;
}

/* ------------------------------------------------------------ sessions */

static struct br_session *
session_find(struct br *br, const char *id)
{
	struct br_session *s;

	/* From the most recently used end: a request's session is there
	 * (session_check moves it), so the common lookup is one step. */
	TAILQ_FOREACH_REVERSE(s, &br->sessions, br_sessions, entry)
		if (strcmp(s->id, id) == 0)
			return s;
	return NULL;
}

static void
session_free(struct br *br, struct br_session *s)
{
	TAILQ_REMOVE(&br->sessions, s, entry);
	br->nsessions--;
	free(s);
}

/* A request of rq's session starts (delta 1) or stops (-1) waiting for
 * its answer. By id, not by pointer: the session may be gone meanwhile
 * (DELETE, a removed sandbox), and then there is nothing to count. */
static void
session_hold(struct br *br, const struct br_req *rq, int delta)
{
	struct br_session *s;

	if (rq->session[0] == '\0' ||
	    (s = session_find(br, rq->session)) == NULL)
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
			session_free(br, s);
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

static struct br_session *
session_new(struct br *br, struct br_req *rq, const char *version)
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
		session_free(br, s);
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

	TAILQ_FOREACH_SAFE(s, &br->sessions, entry, t)
		if (strcmp(s->sandbox, sandbox_id) == 0)
			session_free(br, s);
	TAILQ_FOREACH_SAFE(c, &br->approvals, entry, d)
		if (strcmp(c->client.id, sandbox_id) == 0)
			(void)br_call_sluice_denies(br, c->approval_id,
			    "sandbox removed");
}

/* The session rules of transports.mdx for this request; NULL and an answer
 * already given when it may not go on. Where the stateless 2026-07-28
 * revision plugs in (see the file comment). */
static struct br_session *
session_check(struct br_req *rq, const struct br_rpc *rpc, bool *fresh)
{
	const char *sid = hdr(rq, "Mcp-Session-Id");
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
	s = session_find(rq->br, sid);
	if (s == NULL || strcmp(s->sandbox, rq->client.id) != 0 ||
	    strcmp(s->server, rq->server) != 0) {
		br_reply_rpc_error(rq, 404, NULL, -32001, "Session not found");
		return NULL;
	}
	if (rpc->kind == BR_RPC_REQUEST &&
	    strcmp(rpc->method, "initialize") == 0) {
		*fresh = true;
		return NULL;
	}
	/* Kept in order of use, for session_expire and the victims. */
	s->used_ms = ev_now_ms();
	TAILQ_REMOVE(&rq->br->sessions, s, entry);
	TAILQ_INSERT_TAIL(&rq->br->sessions, s, entry);
	snprintf(rq->session, sizeof(rq->session), "%s", s->id);
	return s;
}

/* ------------------------------------------------------------ methods */

static void
do_initialize(struct br_req *rq, const struct br_rpc *rpc)
{
	json_t *params = json_object_get(rpc->msg, "params");
	json_t *pv = json_object_get(params, "protocolVersion");
	const char *v = BR_PROTO_LATEST;
	struct br_session *s;
	json_t *o;
	char *txt;

	if (!json_is_string(pv)) {
		br_reply_rpc_error(rq, 200, rpc->id, -32602,
		    "Invalid params: protocolVersion is required");
		return;
	}
	/* Echo a version we speak, else offer our latest (lifecycle.mdx). */
	if (version_ok(json_string_value(pv)))
		v = json_string_value(pv);
	if ((s = session_new(rq->br, rq, v)) == NULL) {
		br_reply_rpc_error(rq, 503, rpc->id, -32603,
		    "Too many sessions");
		return;
	}
	o = json_pack("{s:s, s:O, s:{s:s, s:{s:{s:b}}, s:{s:s, s:s}, s:s}}",
	    "jsonrpc", "2.0", "id", rpc->id, "result",
	    "protocolVersion", v,
	    "capabilities", "tools", "listChanged", 0,
	    "serverInfo", "name", "sluice", "version", SLUICE_BR_VERSION,
	    "instructions", "Tools offered through Sluice; every call is "
	    "checked against the sandbox's policy.");
	txt = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (txt == NULL) {
		session_free(rq->br, s);
		br_reply_rpc_error(rq, 500, rpc->id, -32603, "Internal error");
		return;
	}
	br_req_reply(rq, 200, txt, s->id);
	free(txt);
}

/* "sluice-<offset>": opaque to clients, checked strictly here. */
static int
cursor_parse(const char *c, size_t *off)
{
	char *end;
	unsigned long v;

	if (strncmp(c, "sluice-", 7) != 0 || c[7] < '0' || c[7] > '9' ||
	    (c[7] == '0' && c[8] != '\0'))
		return -1;
	errno = 0;
	v = strtoul(c + 7, &end, 10);
	if (errno != 0 || *end != '\0' || v > 1000000)
		return -1;
	*off = v;
	return 0;
}

static void
list_answer(struct br_req *rq)
{
	struct br *br = rq->br;
	struct br_up *u = rq->up;
	const char *keys[BR_MAX_LABELS], *vals[BR_MAX_LABELS];
	struct pol_tool_q q;
	json_t *out, *t, *page, *res;
	const char *pin, *drift, *name;
	enum pol_reason why;
	size_t i, off = 0, psize, n;
	char next[32];

	if (rq->cursor != NULL && cursor_parse(rq->cursor, &off) == -1) {
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32602,
		    "Invalid params: unknown cursor");
		return;
	}
	memset(&q, 0, sizeof(q));
	for (i = 0; i < rq->client.nlabels; i++) {
		keys[i] = rq->client.label_keys[i];
		vals[i] = rq->client.label_values[i];
	}
	q.subject = rq->client.subject;
	q.label_keys = keys;
	q.label_values = vals;
	q.nlabels = rq->client.nlabels;
	q.server = u->srv->name;
	if ((out = json_array()) == NULL)
		goto fail;
	json_array_foreach(u->tools, i, t) {
		name = json_string_value(json_object_get(t, "name"));
		if (name == NULL ||
		    br_tools_get(u, name, &pin, &drift) == NULL ||
		    drift != NULL)
			continue;
		q.tool = name;
		q.pin_hex = pin;
		if (pol_tool_visible_q(rq->client.policy, &q, &why))
			json_array_append(out, t);
	}
	n = json_array_size(out);
	if (off > n || (off == n && off != 0)) {
		json_decref(out);
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32602,
		    "Invalid params: unknown cursor");
		return;
	}
	psize = br->c.page_size;
	if ((page = json_array()) == NULL) {
		json_decref(out);
		goto fail;
	}
	for (i = off; i < n && i < off + psize; i++)
		json_array_append(page, json_array_get(out, i));
	json_decref(out);
	res = json_pack("{s:o}", "tools", page);
	if (res != NULL && off + psize < n) {
		snprintf(next, sizeof(next), "sluice-%zu", off + psize);
		json_object_set_new(res, "nextCursor", json_string(next));
	}
	if (res == NULL)
		goto fail;
	br_reply_rpc_result(rq, rq->rpc_id, res);
	return;
fail:
	br_reply_rpc_error(rq, 500, rq->rpc_id, -32603, "Internal error");
}

static void
list_refreshed(void *arg, int ok)
{
	struct br_req *rq = arg;

	if (!ok) {
		br_reply_rpc_error(rq, 200, rq->rpc_id, -32603,
		    "The upstream server is not available");
		return;
	}
	list_answer(rq);
}

static void
do_tools_list(struct br_req *rq, const struct br_rpc *rpc)
{
	json_t *params = json_object_get(rpc->msg, "params");
	json_t *cur = json_object_get(params, "cursor");

	if (cur != NULL && !json_is_string(cur)) {
		br_reply_rpc_error(rq, 200, rpc->id, -32602,
		    "Invalid params: cursor must be a string");
		return;
	}
	rq->up = br_up_find(rq->br, rq->server);
	rq->rpc_id = json_incref(rpc->id);
	if (cur != NULL && (rq->cursor = strdup(json_string_value(cur))) ==
	    NULL) {
		br_reply_rpc_error(rq, 500, rpc->id, -32603, "Internal error");
		return;
	}
	/* The first page re-lists the upstream so that drift is seen when
	 * the agent looks; later pages come from that same listing. */
	if (cur == NULL || !rq->up->listed)
		br_tools_refresh(rq->up, list_refreshed, rq);
	else
		list_answer(rq);
}

static void
do_request(struct br_req *rq, const struct br_rpc *rpc)
{
	const char *m = rpc->method;
	json_t *params = json_object_get(rpc->msg, "params");

	if (strcmp(m, "ping") == 0) {
		br_reply_rpc_result(rq, rpc->id, json_object());
	} else if (strcmp(m, "tools/list") == 0) {
		do_tools_list(rq, rpc);
	} else if (strcmp(m, "tools/call") == 0) {
		br_call_start(rq, rpc->id, params, br_up_find(rq->br,
		    rq->server));
	} else {
		/* Resources, prompts, completion, logging, tasks: not
		 * opened by any policy yet. */
		br_reply_rpc_error(rq, 200, rpc->id, -32601,
		    "Method not found");
	}
}

/* Runs the checks in their documented order once the body is complete. */
static void
dispatch(struct br_req *rq)
{
	struct br *br = rq->br;
	struct br_rpc rpc;
	struct br_session *s;
	const char *v;
	bool fresh;

	if (strcmp(rq->method, "DELETE") == 0) {
		const char *sid = hdr(rq, "Mcp-Session-Id");

		if (sid == NULL) {
			br_reply_rpc_error(rq, 400, NULL, -32600,
			    "Bad Request: Mcp-Session-Id header is required");
			return;
		}
		s = session_find(br, sid);
		if (s == NULL || strcmp(s->sandbox, rq->client.id) != 0 ||
		    strcmp(s->server, rq->server) != 0) {
			br_reply_rpc_error(rq, 404, NULL, -32001,
			    "Session not found");
			return;
		}
		session_free(br, s);
		br_req_reply(rq, 200, NULL, NULL);
		return;
	}
	if (rq->too_big) {
		br_reply_rpc_error(rq, 413, NULL, -32600,
		    "Request body too large");
		return;
	}
	if (!is_json_type(hdr(rq, MHD_HTTP_HEADER_CONTENT_TYPE))) {
		br_reply_rpc_error(rq, 415, NULL, -32600,
		    "Unsupported Media Type: Content-Type must be "
		    "application/json");
		return;
	}
	v = hdr(rq, MHD_HTTP_HEADER_ACCEPT);
	if (v == NULL || !accept_has(v, "application/json") ||
	    !accept_has(v, "text/event-stream")) {
		br_reply_rpc_error(rq, 406, NULL, -32600, "Not Acceptable: "
		    "Accept must list application/json and "
		    "text/event-stream");
		return;
	}
	br_rpc_parse(rq->body, rq->len, &rpc);
	if (rpc.kind == BR_RPC_INVALID) {
		br_reply_rpc_error(rq, rpc.http_status, NULL, rpc.code,
		    rpc.error);
		br_rpc_clear(&rpc);
		return;
	}
	v = hdr(rq, "MCP-Protocol-Version");
	if (v != NULL && !version_ok(v)) {
		br_reply_rpc_error(rq, 400, NULL, -32600, "Bad Request: "
		    "unsupported MCP-Protocol-Version");
		br_rpc_clear(&rpc);
		return;
	}
	s = session_check(rq, &rpc, &fresh);
	if (s == NULL && !fresh) {
		br_rpc_clear(&rpc);
		return;
	}
	if (rpc.kind != BR_RPC_REQUEST) {
		if (rpc.kind == BR_RPC_NOTIFICATION &&
		    strcmp(rpc.method, "notifications/initialized") == 0)
			s->initialized = true;
		br_req_reply(rq, 202, NULL, NULL);
	} else if (fresh)
		do_initialize(rq, &rpc);
	else
		do_request(rq, &rpc);
	br_rpc_clear(&rpc);
}

/* ------------------------------------------------------------ MHD */

static void
req_free(struct br_req *rq)
{
	if (rq->call != NULL)
		br_call_detach(rq->call);
	if (rq->identified)
		br_client_release(rq->br, &rq->client);
	if (rq->resp != NULL)
		MHD_destroy_response(rq->resp);
	json_decref(rq->rpc_id);
	free(rq->cursor);
	free(rq->method);
	free(rq->path);
	free(rq->body);
	free(rq);
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **con_cls)
{
	struct br *br = cls;
	struct br_req *rq = *con_cls;

	(void)version;
	if (rq == NULL) {
		const char *cl;

		if ((rq = calloc(1, sizeof(*rq))) == NULL)
			return MHD_NO;
		rq->br = br;
		rq->conn = conn;
		*con_cls = rq;
		if ((rq->method = strdup(method)) == NULL ||
		    (rq->path = strdup(url)) == NULL)
			return MHD_NO;
		/* Header-only checks answer before any body is read. */
		if (!path_server(br, url, rq->server, sizeof(rq->server))) {
			br_reply_rpc_error(rq, 404, NULL, -32600, "Not Found");
		} else if (strcmp(method, "POST") != 0 &&
		    strcmp(method, "DELETE") != 0) {
			/* No GET stream: the spec allows 405 for it. */
			static const char m405[] = "{\"jsonrpc\":\"2.0\","
			    "\"id\":null,\"error\":{\"code\":-32600,"
			    "\"message\":\"Method Not Allowed\"}}";

			reply_raw(rq, 405, "application/json", m405,
			    sizeof(m405) - 1, NULL, "POST, DELETE");
		} else if (!origin_ok(br, hdr(rq, "Origin"))) {
			br_reply_rpc_error(rq, 403, NULL, -32600,
			    "Forbidden: Origin not allowed");
		} else if (identify(rq) == -1) {
			br_reply_rpc_error(rq, 401, NULL, -32600,
			    "Unauthorized");
		} else {
			cl = hdr(rq, MHD_HTTP_HEADER_CONTENT_LENGTH);
			if (cl != NULL) {
				char *end;
				unsigned long long n;

				errno = 0;
				n = strtoull(cl, &end, 10);
				if (errno != 0 || end == cl ||
				    n > br->c.body_max) {
					rq->too_big = true;
					br_reply_rpc_error(rq, 413, NULL,
					    -32600, "Request body too large");
				}
			}
		}
		if (rq->resp != NULL)
			return queue_reply(rq);
		return MHD_YES;
	}
	if (rq->state == RQ_QUEUED) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size != 0) {
		if (!rq->too_big && rq->len + *upload_size > br->c.body_max) {
			rq->too_big = true;
			free(rq->body);
			rq->body = NULL;
			rq->len = rq->cap = 0;
		}
		if (!rq->too_big) {
			if (rq->len + *upload_size > rq->cap) {
				size_t cap = rq->cap ? rq->cap : 1024;
				char *p;

				while (cap < rq->len + *upload_size)
					cap *= 2;
				if ((p = realloc(rq->body, cap)) == NULL)
					return MHD_NO;
				rq->body = p;
				rq->cap = cap;
			}
			memcpy(rq->body + rq->len, upload, *upload_size);
			rq->len += *upload_size;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (rq->state == RQ_RESUMING)
		return rq->resp != NULL ? queue_reply(rq) : MHD_NO;
	if (rq->state != RQ_RECEIVING)
		return MHD_YES;
	dispatch(rq);
	if (rq->resp != NULL)
		return queue_reply(rq);
	if (rq->state == RQ_RECEIVING) {
		/* An answer comes later (upstream, approval). */
		mhd_suspend(br->mhd, conn);
		rq->state = RQ_PARKED;
		TAILQ_INSERT_TAIL(&br->parked, rq, entry);
		session_hold(br, rq, 1);
		return MHD_YES;
	}
	return MHD_NO;
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct br *br = cls;
	struct br_req *rq = *con_cls;

	(void)conn;
	(void)toe;
	if (rq == NULL)
		return;
	if (rq->state == RQ_PARKED) {
		TAILQ_REMOVE(&br->parked, rq, entry);
		session_hold(br, rq, -1);
	}
	req_free(rq);
	*con_cls = NULL;
}

static int
listen_sock(struct br *br, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	socklen_t slen;
	char abuf[INET6_ADDRSTRLEN];
	const char *addr = br->c.listen_addr;
	int fd, one = 1, saved;

	memset(&ss, 0, sizeof(ss));
	if (addr == NULL) {
		if (br->c.cfg == NULL || pol_addr_format(
		    &br->c.cfg->service_addr, abuf, sizeof(abuf)) == NULL) {
			snprintf(err, errlen, "bridge: no listen address");
			errno = EINVAL;
			return -1;
		}
		addr = abuf;
	}
	if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(br->c.port);
		slen = sizeof(*sin);
		snprintf(br->origin_self, sizeof(br->origin_self),
		    "http://%s", addr);
	} else if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(br->c.port);
		slen = sizeof(*sin6);
		snprintf(br->origin_self, sizeof(br->origin_self),
		    "http://[%s]", addr);
	} else {
		snprintf(err, errlen, "bridge: bad listen address");
		errno = EINVAL;
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0);
	if (fd == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ==
	    -1 || bind(fd, (struct sockaddr *)&ss, slen) == -1 ||
	    listen(fd, 256) == -1 ||
	    getsockname(fd, (struct sockaddr *)&ss, &slen) == -1) {
		saved = errno;
		snprintf(err, errlen, "bridge: listen on %s port %u: %s",
		    addr, br->c.port, strerror(saved));
		if (fd != -1)
			close(fd);
		errno = saved;
		return -1;
	}
	br->port = ntohs(ss.ss_family == AF_INET ? sin->sin_port :
	    sin6->sin6_port);
	snprintf(br->origin_self + strlen(br->origin_self),
	    sizeof(br->origin_self) - strlen(br->origin_self), ":%u",
	    br->port);
	return fd;
}

/* ------------------------------------------------------------ secrets */

static char *
read_secret(struct br *br, const struct pol_mcp_server *s, char *err,
    size_t errlen)
{
	char buf[8192], *p;
	const char *v;
	FILE *fp;
	size_t n;

	if (s->cred_file != NULL) {
		if ((fp = fopen(s->cred_file, "re")) == NULL) {
			snprintf(err, errlen, "upstream %s: credential file "
			    "%s: %s", s->name, s->cred_file, strerror(errno));
			return NULL;
		}
		n = fread(buf, 1, sizeof(buf) - 1, fp);
		fclose(fp);
		buf[n] = '\0';
		buf[strcspn(buf, "\r\n")] = '\0';
		if (buf[0] == '\0') {
			snprintf(err, errlen, "upstream %s: credential file "
			    "%s is empty", s->name, s->cred_file);
			errno = EINVAL;
			return NULL;
		}
		p = strdup(buf);
		explicit_bzero(buf, sizeof(buf));
		return p;
	}
	v = br->c.getenv != NULL ? br->c.getenv(s->cred_env) :
	    getenv(s->cred_env);
	if (v == NULL || *v == '\0') {
		snprintf(err, errlen, "upstream %s: credential variable %s is "
		    "not set", s->name, s->cred_env);
		errno = ENOENT;
		return NULL;
	}
	return strdup(v);
}

/* ------------------------------------------------------------ lifetime */

struct br *
br_new(struct ev_loop *loop, const struct br_config *c,
    const struct br_hooks *h, char *err, size_t errlen)
{
	struct br *br;
	const struct pol_config *cfg;
	struct mhd_config mc;
	size_t i;
	int fd = -1, saved;

	if (loop == NULL || c == NULL || c->cfg == NULL || h == NULL ||
	    h->identify == NULL || h->record == NULL) {
		snprintf(err, errlen, "bridge: bad call");
		errno = EINVAL;
		return NULL;
	}
	if ((br = calloc(1, sizeof(*br))) == NULL) {
		snprintf(err, errlen, "bridge: out of memory");
		return NULL;
	}
	br->loop = loop;
	br->c = *c;
	br->h = *h;
	if (br->c.body_max == 0)
		br->c.body_max = 1024 * 1024;
	if (br->c.page_size == 0)
		br->c.page_size = 100;
	if (br->c.upstream_timeout_ms == 0)
		br->c.upstream_timeout_ms = 30000;
	TAILQ_INIT(&br->parked);
	TAILQ_INIT(&br->sessions);
	TAILQ_INIT(&br->approvals);
	TAILQ_INIT(&br->calls);
	cfg = c->cfg;
	if (br_db_open(br, c->state_dir != NULL ? c->state_dir :
	    cfg->state_dir, err, errlen) == -1)
		goto fail;
	if (br_http_init(br) == -1) {
		snprintf(err, errlen, "bridge: cannot start libcurl");
		goto fail;
	}
	if (cfg->nservers > 0 &&
	    ((br->ups = calloc(cfg->nservers, sizeof(*br->ups))) == NULL ||
	    (br->secrets = calloc(cfg->nservers, sizeof(char *))) == NULL)) {
		snprintf(err, errlen, "bridge: out of memory");
		goto fail;
	}
	for (i = 0; i < cfg->nservers; i++) {
		struct br_up *u;

		if ((u = calloc(1, sizeof(*u))) == NULL) {
			snprintf(err, errlen, "bridge: out of memory");
			goto fail;
		}
		br->ups[br->nups++] = u;
		u->br = br;
		u->srv = &cfg->servers[i];
		u->in_fd = u->out_fd = -1;
		u->next_id = 1;
		TAILQ_INIT(&u->reqs);
		if (u->srv->cred_file != NULL || u->srv->cred_env != NULL) {
			if ((u->secret = read_secret(br, u->srv, err,
			    errlen)) == NULL)
				goto fail;
			br->secrets[br->nsecrets++] = u->secret;
		}
		if (br_tools_load_baseline(u) == -1) {
			snprintf(err, errlen, "bridge: cannot read the pins "
			    "of %s", u->srv->name);
			goto fail;
		}
	}
	if ((fd = listen_sock(br, err, errlen)) == -1)
		goto fail;
	memset(&mc, 0, sizeof(mc));
	mc.name = "bridge";
	mc.listen_fd = fd;
	mc.on_request = on_request;
	mc.on_completed = on_completed;
	mc.arg = br;
	/*
	 * A sandbox is its source address. It may hold
	 * lim_bridge_conns_sbx connections (t_bridge.sh makes 50 calls at
	 * once from one sandbox), all of them lim_bridge_conns, and when
	 * they are all taken a sandbox holding fewer takes the slot of one
	 * waiting for its request in the sandbox holding the most
	 * (gateway/mhd.h): a few sandboxes holding half-sent requests no
	 * longer lock the others out. Each request must be all in within
	 * lim_bridge_request_s of the accept or of the previous answer,
	 * however slowly it trickles. 0 in a hand-made config: the
	 * defaults.
	 */
	mc.conn_timeout_s = 60;
	mc.conn_limit = cfg->lim_bridge_conns != 0 ? cfg->lim_bridge_conns :
	    POL_LIM_BRIDGE_CONNS;
	mc.per_ip_limit = cfg->lim_bridge_conns_sbx != 0 ?
	    cfg->lim_bridge_conns_sbx : POL_LIM_BRIDGE_CONNS_SBX;
	if (mc.per_ip_limit >= mc.conn_limit)
		mc.per_ip_limit = mc.conn_limit / 2 != 0 ? mc.conn_limit / 2 :
		    1;
	mc.recv_deadline_ms = (cfg->lim_bridge_request_s != 0 ?
	    cfg->lim_bridge_request_s : POL_LIM_BRIDGE_REQUEST_S) * 1000u;
	if ((br->mhd = mhd_new(loop, &mc, err, errlen)) == NULL)
		goto fail;
	for (i = 0; i < br->nups; i++)
		if (br_up_start(br->ups[i]) == -1)
			log_warnx("bridge: upstream %s did not start; "
			    "retrying", br->ups[i]->srv->name);
	return br;
fail:
	saved = errno;
	br_free(br);
	errno = saved != 0 ? saved : EINVAL;
	return NULL;
}

void
br_free(struct br *br)
{
	struct br_req *rq;
	struct br_session *s;
	size_t i;

	if (br == NULL)
		return;
	br->closing = true;
	/* Listing waiters point at requests and calls freed below. */
	for (i = 0; i < br->nups; i++) {
		free(br->ups[i]->waiters);
		br->ups[i]->waiters = NULL;
		br->ups[i]->nwaiters = 0;
	}
	br_call_abort_all(br);
	while ((rq = TAILQ_FIRST(&br->parked)) != NULL)
		br_reply_rpc_error(rq, 503, NULL, -32603,
		    "The bridge is shutting down");
	mhd_free(br->mhd);
	for (i = 0; i < br->nups; i++) {
		br_up_stop(br->ups[i]);
		br_tools_free(br->ups[i]);
		if (br->ups[i]->secret != NULL)
			explicit_bzero(br->ups[i]->secret,
			    strlen(br->ups[i]->secret));
		free(br->ups[i]->secret);
		free(br->ups[i]);
	}
	free(br->ups);
	free(br->secrets);
	br_http_fini(br);
	while ((s = TAILQ_FIRST(&br->sessions)) != NULL)
		session_free(br, s);
	br_db_close(br);
	free(br);
}

uint16_t
br_port(const struct br *br)
{
	return br->port;
}
