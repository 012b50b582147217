/*
 * front.c: the bridge's HTTP side, Streamable HTTP at /mcp/<server>. It
 * exists to turn untrusted HTTP into a small set of well-formed JSON-RPC
 * requests from an identified sandbox, answering everything else with the
 * status codes of the spec (transports.mdx, 2025-03-26, 2025-06-18 and
 * 2025-11-25; the stateless 2026-07-28 revision's own checks are
 * modern.c's, a 2025-03-26 session's batches batch.c's, which hands each
 * of their messages back to br_front_message):
 * the checks (path, method, Origin, identity, body size, media types,
 * protocol version, session) run in a fixed order so that every request
 * gets exactly one answer, and the bridge keeps serving whatever arrives.
 * libmicrohttpd runs inside our ev loop through gateway/mhd.c, the driver
 * the control API uses too (its connection limits are set in br_new):
 * requests that wait (an upstream call, an approval, the durable record)
 * are suspended connections, resumed and answered in the same loop
 * iteration as the event that completes them.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"
#include "gateway/mhd.h"

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
		br_session_hold(rq->br, rq, -1);
		rq->state = RQ_RESUMING;
		mhd_resume(rq->br->mhd, rq->conn);
	}
}

void
br_req_reply(struct br_req *rq, unsigned status, const char *body,
    const char *session_hdr)
{
	char *sse, *mod;

	/* A batch's message is answered into its batch (batch.c). */
	if (rq->batch != NULL) {
		br_batch_answer(rq, status, body);
		return;
	}
	/* A call answered on its own stream ends it. */
	if (br_callstream_finish(rq, body) == 0)
		return;
	/* The stateless revision's answers carry fields of their own. */
	if (rq->modern && body != NULL && (status == 200 || status == 400) &&
	    (mod = br_modern_result(rq, body, &status)) != NULL) {
		reply_raw(rq, status, "application/json", mod, strlen(mod),
		    NULL, NULL);
		free(mod);
		return;
	}
	/* What the upstream said since the session's last answer goes out
	 * before this one, on an event stream (transports.mdx). */
	if (status == 200 && body != NULL && rq->session[0] != '\0' &&
	    (sse = br_session_take_notes(rq->br, rq->session,
	    rq->client.policy, body)) !=
	    NULL) {
		reply_raw(rq, status, "text/event-stream", sse, strlen(sse),
		    session_hdr, NULL);
		free(sse);
		return;
	}
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

int
br_front_identify(struct br_req *rq)
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
		/* Anyone who reaches the port can send these: reported
		 * within a budget per source and interval, the rest counted
		 * into one summary (the auth_tally hook). */
		if (br->h.auth_tally != NULL &&
		    br->h.auth_tally(br->h.ctx, rq->src) == 0)
			return -1;
		/* Never the token itself: only whether one came. */
		snprintf(detail, sizeof(detail), "bridge request from %s %s "
		    "refused: %s", rq->src, rq->path, token == NULL ?
		    "no bearer token" : "address and token do not agree");
		if (br->h.finding != NULL) {
			struct br_event ev;

			/* With its source: whoever records it keeps a
			 * budget per source. */
			memset(&ev, 0, sizeof(ev));
			ev.kind = BR_EV_AUTH_FAILED;
			ev.kind_name = br_kind_name(ev.kind);
			ev.src = rq->src;
			ev.server = rq->server;
			ev.detail = detail;
			ev.upstream_latency_us = -1;
			br->h.finding(br->h.ctx, &ev);
		}
		return -1;
	}
	rq->client.id[sizeof(rq->client.id) - 1] = '\0';
	rq->client.subject[sizeof(rq->client.subject) - 1] = '\0';
	if (rq->client.nlabels > BR_MAX_LABELS)
		rq->client.nlabels = BR_MAX_LABELS;
	rq->identified = true;
	return 0;
}

void
br_front_message(struct br_req *rq, struct br_session *s,
    const struct br_rpc *rpc, bool fresh)
{
	if (rpc->kind == BR_RPC_RESPONSE && s != NULL) {
		br_srvreq_answer(rq, s->id, rpc);
	} else if (rpc->kind != BR_RPC_REQUEST) {
		if (rpc->kind == BR_RPC_NOTIFICATION &&
		    strcmp(rpc->method, "notifications/initialized") == 0)
			s->initialized = true;
		else if (rpc->kind == BR_RPC_NOTIFICATION &&
		    strcmp(rpc->method, "notifications/cancelled") == 0) {
			const json_t *rid = json_object_get(json_object_get(
			    rpc->msg, "params"), "requestId");

			if (!br_srvreq_client_cancelled(rq->br, s->id, rid))
				br_call_cancel(rq->br, s->id, rid);
		} else if (rpc->kind == BR_RPC_NOTIFICATION && s != NULL &&
		    strcmp(rpc->method, "notifications/roots/list_changed") ==
		    0)
			br_srvreq_roots_changed(rq, s);
		br_req_reply(rq, 202, NULL, NULL);
	} else if (fresh)
		br_rpc_initialize(rq, rpc);
	else
		br_rpc_request(rq, rpc);
}

/* Runs the checks in their documented order once the body is complete;
 * the access handler's result when it queued a stream itself (listen),
 * else MHD_YES. */
static enum MHD_Result
dispatch(struct br_req *rq)
{
	struct br *br = rq->br;
	struct br_rpc rpc;
	struct br_session *s;
	struct br_meta_hdrs mh;
	enum MHD_Result ret;
	const char *v;
	bool fresh;

	if (strcmp(rq->method, "DELETE") == 0) {
		const char *sid = hdr(rq, "Mcp-Session-Id");

		if (sid == NULL) {
			br_reply_rpc_error(rq, 400, NULL, -32600,
			    "Bad Request: Mcp-Session-Id header is required");
			return MHD_YES;
		}
		s = br_session_find(br, sid);
		if (s == NULL || s->listen ||
		    strcmp(s->sandbox, rq->client.id) != 0 ||
		    strcmp(s->server, rq->server) != 0) {
			br_reply_rpc_error(rq, 404, NULL, -32001,
			    "Session not found");
			return MHD_YES;
		}
		br_session_free(br, s);
		br_req_reply(rq, 200, NULL, NULL);
		return MHD_YES;
	}
	if (rq->too_big) {
		br_reply_rpc_error(rq, 413, NULL, -32600,
		    "Request body too large");
		return MHD_YES;
	}
	if (!is_json_type(hdr(rq, MHD_HTTP_HEADER_CONTENT_TYPE))) {
		br_reply_rpc_error(rq, 415, NULL, -32600,
		    "Unsupported Media Type: Content-Type must be "
		    "application/json");
		return MHD_YES;
	}
	v = hdr(rq, MHD_HTTP_HEADER_ACCEPT);
	if (v == NULL || !accept_has(v, "application/json") ||
	    !accept_has(v, "text/event-stream")) {
		br_reply_rpc_error(rq, 406, NULL, -32600, "Not Acceptable: "
		    "Accept must list application/json and "
		    "text/event-stream");
		return MHD_YES;
	}
	if (br_batch_looks(rq->body, rq->len)) {
		br_batch_dispatch(rq, hdr(rq, "Mcp-Session-Id"));
		return MHD_YES;
	}
	br_rpc_parse(rq->body, rq->len, &rpc);
	if (rpc.kind == BR_RPC_INVALID) {
		br_reply_rpc_error(rq, rpc.http_status, NULL, rpc.code,
		    rpc.error);
		br_rpc_clear(&rpc);
		return MHD_YES;
	}
	v = hdr(rq, "MCP-Protocol-Version");
	if (br_modern_wanted(hdr(rq, "Mcp-Session-Id"), v, rpc.msg)) {
		mh.version = v;
		mh.method = hdr(rq, "Mcp-Method");
		mh.name = hdr(rq, "Mcp-Name");
		ret = br_modern_dispatch(rq, &rpc, &mh);
		br_rpc_clear(&rpc);
		return ret;
	}
	if (v != NULL && !br_version_ok(v)) {
		br_reply_rpc_error(rq, 400, NULL, -32600, "Bad Request: "
		    "unsupported MCP-Protocol-Version");
		br_rpc_clear(&rpc);
		return MHD_YES;
	}
	s = br_session_check(rq, hdr(rq, "Mcp-Session-Id"), &rpc,
	    &fresh);
	if (s == NULL && !fresh) {
		br_rpc_clear(&rpc);
		return MHD_YES;
	}
	br_front_message(rq, s, &rpc, fresh);
	br_rpc_clear(&rpc);
	return MHD_YES;
}

/* The checks of a GET for the stream of server messages, in the order of
 * a POST's (media type, version, session): its session, or NULL with an
 * answer given. A GET carries no body, so they run on its headers. */
static struct br_session *
get_checks(struct br_req *rq)
{
	struct br_session *s;
	const char *v, *sid;

	v = hdr(rq, MHD_HTTP_HEADER_ACCEPT);
	if (v == NULL || !accept_has(v, "text/event-stream")) {
		br_reply_rpc_error(rq, 406, NULL, -32600, "Not Acceptable: "
		    "Accept must list text/event-stream");
		return NULL;
	}
	v = hdr(rq, "MCP-Protocol-Version");
	if (v != NULL && !br_version_ok(v)) {
		br_reply_rpc_error(rq, 400, NULL, -32600, "Bad Request: "
		    "unsupported MCP-Protocol-Version");
		return NULL;
	}
	if ((sid = hdr(rq, "Mcp-Session-Id")) == NULL) {
		br_reply_rpc_error(rq, 400, NULL, -32600,
		    "Bad Request: Mcp-Session-Id header is required");
		return NULL;
	}
	if ((s = br_session_owned(rq, sid)) != NULL)
		br_session_touch(rq->br, s);
	return s;
}

/* ------------------------------------------------------------ MHD */

static void	req_free(struct br_req *rq);

void
br_front_sub_free(struct br_req *rq)
{
	req_free(rq);
}

static void
req_free(struct br_req *rq)
{
	br_batch_free(rq->batch_own);
	br_stream_free(rq->stream);
	if (rq->call != NULL)
		br_call_detach(rq->call);
	br_up_cancel(rq->ureq);
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

enum MHD_Result
br_front_request(void *cls, struct MHD_Connection *conn, const char *url,
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
		    strcmp(method, "DELETE") != 0 &&
		    strcmp(method, "GET") != 0) {
			static const char m405[] = "{\"jsonrpc\":\"2.0\","
			    "\"id\":null,\"error\":{\"code\":-32600,"
			    "\"message\":\"Method Not Allowed\"}}";

			reply_raw(rq, 405, "application/json", m405,
			    sizeof(m405) - 1, NULL, "GET, POST, DELETE");
		} else if (!origin_ok(br, hdr(rq, "Origin"))) {
			br_reply_rpc_error(rq, 403, NULL, -32600,
			    "Forbidden: Origin not allowed");
		} else if (br_front_identify(rq) == -1) {
			br_reply_rpc_error(rq, 401, NULL, -32600,
			    "Unauthorized");
		} else if (strcmp(method, "GET") == 0) {
			struct br_session *s = get_checks(rq);

			if (s != NULL)
				return br_stream_open(rq, s);
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
	if (dispatch(rq) == MHD_NO)
		return MHD_NO;
	if (rq->resp != NULL)
		return queue_reply(rq);
	if (rq->stream != NULL)
		return MHD_YES;	/* a listen stream, queued */
	if (rq->state == RQ_RECEIVING) {
		/* An answer comes later (upstream, approval). */
		mhd_suspend(br->mhd, conn);
		rq->state = RQ_PARKED;
		TAILQ_INSERT_TAIL(&br->parked, rq, entry);
		br_session_hold(br, rq, 1);
		if (rq->batch_own != NULL)
			br_batch_parked(rq);
		return MHD_YES;
	}
	return MHD_NO;
}

void
br_front_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
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
		br_session_hold(br, rq, -1);
	}
	req_free(rq);
	*con_cls = NULL;
}

int
br_front_listen(struct br *br, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	socklen_t slen;
	char abuf[INET6_ADDRSTRLEN];
	const char *addr = br->c.listen_addr;
	int fd, one = 1, saved;

	memset(&ss, 0, sizeof(ss));
	if (br->c.prebound) {
		/* Bound by the parent: only what it is bound to is learned. */
		slen = sizeof(ss);
		if (br->c.listen_fd < 0 || getsockname(br->c.listen_fd,
		    (struct sockaddr *)&ss, &slen) == -1 ||
		    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)) {
			snprintf(err, errlen, "bridge: the listener handed "
			    "over is not a bound socket");
			errno = EBADF;
			return -1;
		}
		if (ss.ss_family == AF_INET) {
			inet_ntop(AF_INET, &sin->sin_addr, abuf, sizeof(abuf));
			snprintf(br->origin_self, sizeof(br->origin_self),
			    "http://%s", abuf);
		} else {
			inet_ntop(AF_INET6, &sin6->sin6_addr, abuf,
			    sizeof(abuf));
			snprintf(br->origin_self, sizeof(br->origin_self),
			    "http://[%s]", abuf);
		}
		fd = br->c.listen_fd;
		goto bound;
	}
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
bound:
	br->port = ntohs(ss.ss_family == AF_INET ? sin->sin_port :
	    sin6->sin6_port);
	snprintf(br->origin_self + strlen(br->origin_self),
	    sizeof(br->origin_self) - strlen(br->origin_self), ":%u",
	    br->port);
	return fd;
}

