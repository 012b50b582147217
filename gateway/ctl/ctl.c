/*
 * ctl.c: the control server. libmicrohttpd parses HTTP; this file owns the
 * Unix socket, the route table, the checks every request goes through before
 * a handler sees it, the caller's credentials (SO_PEERCRED) and the parking
 * of suspended requests. MHD runs inside our ev loop through gateway/mhd.c
 * (the driver the bridge uses too), so the whole daemon stays one thread.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <microhttpd.h>

#include "gateway/ctl/ctl.h"
#include "gateway/mhd.h"

/* Refused bodies up to this size are read and discarded (see on_request). */
#define CTL_DRAIN_MAX	(4 * 1024 * 1024)
#include "gateway/log.h"

#define CTL_MAX_SEGS	16	/* deeper paths match no route */
#define CTL_MAX_HDRS	8	/* extra reply headers per request */
#define CTL_CODES	600

struct ctl_route {
	char		*method;
	char		*pattern;
	char		*segs[CTL_MAX_SEGS];	/* point into pattern copy */
	char		*pbuf;
	unsigned char	 isparam[CTL_MAX_SEGS];
	size_t		 nsegs;
	ctl_handler	*fn;
	void		*arg;
};

enum req_state {
	REQ_RECEIVING = 0,	/* headers seen, body (if any) arriving */
	REQ_PARKED,		/* handler returned CTL_SUSPEND */
	REQ_RESUMING,		/* replied while parked; MHD will call again */
	REQ_QUEUED,		/* response handed to MHD */
};

struct ctl_req {
	struct ctl		*ctl;
	struct MHD_Connection	*conn;
	enum req_state		 state;
	char			*method;
	char			*path;
	char			*body_buf;
	size_t			 body_len, body_cap;
	size_t			 drained;	/* refused bytes read so far */
	int			 too_big;
	json_t			*body;
	char			*pathbuf;		/* split copy of path */
	const char		*pnames[CTL_MAX_PARAMS];
	const char		*pvals[CTL_MAX_PARAMS];
	size_t			 nparams;
	char			*hname[CTL_MAX_HDRS], *hval[CTL_MAX_HDRS];
	size_t			 nhdrs;
	struct MHD_Response	*resp;
	unsigned		 status;
	ctl_cancel_cb		*cancel;
	void			*cancel_arg;
	struct ucred		 peer;		/* valid when has_peer */
	int			 has_peer;
	int			 refused;	/* by the peer check */
	int			 peer_errno;
	TAILQ_ENTRY(ctl_req)	 entry;
};

struct ctl {
	struct ev_loop		*loop;
	struct mhd		*mhd;
	char			*path;
	dev_t			 sock_dev;
	ino_t			 sock_ino;
	ctl_peer_check		*peer_check;	/* may refuse a caller */
	void			*peer_arg;
	ctl_refused_cb		*refused_cb;	/* told of our refusals */
	void			*refused_arg;
	struct ctl_route	*routes;
	size_t			 nroutes;
	uint64_t		 counts[CTL_CODES];
	TAILQ_HEAD(, ctl_req)	 parked;
};

struct ctl *
ctl_new(struct ev_loop *loop)
{
	struct ctl *ctl;

	if (loop == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if ((ctl = calloc(1, sizeof(*ctl))) == NULL)
		return NULL;
	ctl->loop = loop;
	TAILQ_INIT(&ctl->parked);
	return ctl;
}

void
ctl_set_peer_check(struct ctl *ctl, ctl_peer_check *fn, void *arg)
{
	ctl->peer_check = fn;
	ctl->peer_arg = arg;
}

void
ctl_set_refused_hook(struct ctl *ctl, ctl_refused_cb *fn, void *arg)
{
	ctl->refused_cb = fn;
	ctl->refused_arg = arg;
}

/* A refusal by ctl itself, before any handler: replied as
 * ctl_reply_error, then told to the refused hook (the owner of the
 * endpoint records it; a handler records its own). */
static void
refuse(struct ctl_req *r, unsigned status, const char *code,
    const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctl_reply_error(r, status, code, "%s", msg);
	if (r->ctl->refused_cb != NULL)
		r->ctl->refused_cb(r->method, r->path, status, code, msg,
		    r->has_peer ? r->peer.pid : 0, r->ctl->refused_arg);
}

static void
req_free(struct ctl_req *r)
{
	size_t i;

	if (r == NULL)
		return;
	if (r->resp != NULL)
		MHD_destroy_response(r->resp);
	for (i = 0; i < r->nhdrs; i++) {
		free(r->hname[i]);
		free(r->hval[i]);
	}
	json_decref(r->body);
	free(r->body_buf);
	free(r->pathbuf);
	free(r->method);
	free(r->path);
	free(r);
}

void
ctl_free(struct ctl *ctl)
{
	struct ctl_req *r;
	struct stat st;
	size_t i;

	if (ctl == NULL)
		return;
	/* MHD refuses to stop with suspended connections: answer them all
	 * first. The owners learn through their cancel callbacks. */
	while ((r = TAILQ_FIRST(&ctl->parked)) != NULL) {
		if (r->cancel != NULL)
			r->cancel(r, r->cancel_arg);
		r->cancel = NULL;
		/* The owner may have replied from its cancel callback. */
		if (r->state == REQ_PARKED)
			ctl_reply_error(r, 503, "shutting_down",
			    "the daemon is shutting down");
	}
	/* Resumed connections get their answer out first; closes the
	 * listening socket too. */
	mhd_free(ctl->mhd);
	/* Remove the socket file only if it is still ours: a second daemon
	 * that replaced it must not lose its socket. */
	if (ctl->path != NULL && lstat(ctl->path, &st) == 0 &&
	    st.st_dev == ctl->sock_dev && st.st_ino == ctl->sock_ino)
		(void)unlink(ctl->path);
	for (i = 0; i < ctl->nroutes; i++) {
		free(ctl->routes[i].method);
		free(ctl->routes[i].pattern);
		free(ctl->routes[i].pbuf);
	}
	free(ctl->routes);
	free(ctl->path);
	free(ctl);
}

/* Splits s in place at '/' into at most max segments; s must start with
 * '/'. Returns the count, or -1 if s is not a path or is too deep. */
static int
split_path(char *s, char **segs, size_t max)
{
	size_t n = 0;
	char *p;

	if (*s != '/')
		return -1;
	p = s + 1;
	for (;;) {
		char *slash = strchr(p, '/');

		if (n == max)
			return -1;
		segs[n++] = p;
		if (slash == NULL)
			break;
		*slash = '\0';
		p = slash + 1;
	}
	return (int)n;
}

static int
is_placeholder(const char *seg)
{
	size_t n = strlen(seg);

	return n >= 3 && seg[0] == '{' && seg[n - 1] == '}';
}

int
ctl_route(struct ctl *ctl, const char *method, const char *pattern,
    ctl_handler *fn, void *arg)
{
	struct ctl_route r, *nr;
	size_t i, nph = 0;
	int n;

	if (ctl == NULL || method == NULL || *method == '\0' ||
	    pattern == NULL || fn == NULL) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < ctl->nroutes; i++) {
		if (strcmp(ctl->routes[i].method, method) == 0 &&
		    strcmp(ctl->routes[i].pattern, pattern) == 0) {
			errno = EINVAL;
			return -1;
		}
	}
	memset(&r, 0, sizeof(r));
	r.fn = fn;
	r.arg = arg;
	r.method = strdup(method);
	r.pattern = strdup(pattern);
	r.pbuf = strdup(pattern);
	if (r.method == NULL || r.pattern == NULL || r.pbuf == NULL)
		goto nomem;
	if ((n = split_path(r.pbuf, r.segs, CTL_MAX_SEGS)) == -1)
		goto inval;
	r.nsegs = (size_t)n;
	for (i = 0; i < r.nsegs; i++) {
		const char *s = r.segs[i];

		if (is_placeholder(s)) {
			if (++nph > CTL_MAX_PARAMS)
				goto inval;
			/* Store the bare name: "{id}" -> "id". */
			r.isparam[i] = 1;
			r.segs[i][strlen(s) - 1] = '\0';
			r.segs[i]++;
		} else if (strchr(s, '{') != NULL || strchr(s, '}') != NULL)
			goto inval;
	}
	nr = reallocarray(ctl->routes, ctl->nroutes + 1, sizeof(*nr));
	if (nr == NULL)
		goto nomem;
	ctl->routes = nr;
	ctl->routes[ctl->nroutes++] = r;
	return 0;
inval:
	errno = EINVAL;
	/* FALLTHROUGH */
nomem:
	{
		int saved = errno;

		free(r.method);
		free(r.pattern);
		free(r.pbuf);
		errno = saved;
	}
	return -1;
}

/* Does route rt match the split path? Fills the request's parameters when
 * r is not NULL. */
static int
route_match(const struct ctl_route *rt, char **segs, size_t nsegs,
    struct ctl_req *r)
{
	size_t i, np = 0;

	if (rt->nsegs != nsegs)
		return 0;
	for (i = 0; i < nsegs; i++) {
		if (rt->isparam[i]) {
			if (*segs[i] == '\0')
				return 0;
		} else if (strcmp(rt->segs[i], segs[i]) != 0)
			return 0;
	}
	if (r != NULL) {
		for (i = 0; i < nsegs; i++) {
			if (rt->isparam[i] && np < CTL_MAX_PARAMS) {
				r->pnames[np] = rt->segs[i];
				r->pvals[np] = segs[i];
				np++;
			}
		}
		r->nparams = np;
	}
	return 1;
}

const char *
ctl_socket_path(const struct ctl *ctl)
{
	return ctl == NULL ? NULL : ctl->path;
}

const char *
ctl_req_method(const struct ctl_req *r)
{
	return r->method;
}

const char *
ctl_req_path(const struct ctl_req *r)
{
	return r->path;
}

const char *
ctl_req_param(const struct ctl_req *r, const char *name)
{
	size_t i;

	for (i = 0; i < r->nparams; i++)
		if (strcmp(r->pnames[i], name) == 0)
			return r->pvals[i];
	return NULL;
}

const char *
ctl_req_query(struct ctl_req *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND,
	    key);
}

json_t *
ctl_req_body(const struct ctl_req *r)
{
	return r->body;
}

int
ctl_req_peer(const struct ctl_req *r, uid_t *uid, gid_t *gid, pid_t *pid)
{
	if (!r->has_peer) {
		errno = r->peer_errno != 0 ? r->peer_errno : ENOTCONN;
		return -1;
	}
	if (uid != NULL)
		*uid = r->peer.uid;
	if (gid != NULL)
		*gid = r->peer.gid;
	if (pid != NULL)
		*pid = r->peer.pid;
	return 0;
}

/* The kernel's record of who connected (taken at connect(), so a client
 * cannot choose it). Without one the request has no identity, and the
 * handlers that need one refuse it. */
static void
peer_get(struct ctl_req *r)
{
	const union MHD_ConnectionInfo *ci;
	socklen_t len = sizeof(r->peer);

	ci = MHD_get_connection_info(r->conn,
	    MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci == NULL) {
		r->peer_errno = EBADF;
		return;
	}
	if (getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &r->peer,
	    &len) == -1 || len != sizeof(r->peer)) {
		r->peer_errno = errno != 0 ? errno : EPROTO;
		return;
	}
	r->has_peer = 1;
	if (r->ctl->peer_check != NULL &&
	    r->ctl->peer_check(r->peer.pid, r->ctl->peer_arg) != 0)
		r->refused = 1;
}

void
ctl_req_on_cancel(struct ctl_req *r, ctl_cancel_cb *cb, void *arg)
{
	r->cancel = cb;
	r->cancel_arg = arg;
}

int
ctl_reply_header(struct ctl_req *r, const char *name, const char *value)
{
	if (r->nhdrs == CTL_MAX_HDRS || strchr(name, '\n') != NULL ||
	    strchr(value, '\n') != NULL || strchr(value, '\r') != NULL) {
		errno = EINVAL;
		return -1;
	}
	r->hname[r->nhdrs] = strdup(name);
	r->hval[r->nhdrs] = strdup(value);
	if (r->hname[r->nhdrs] == NULL || r->hval[r->nhdrs] == NULL) {
		free(r->hname[r->nhdrs]);
		free(r->hval[r->nhdrs]);
		return -1;
	}
	r->nhdrs++;
	return 0;
}

/* MHD_NO tells MHD to close the connection: a request we could not answer
 * must not sit there. */
static enum MHD_Result
queue_reply(struct ctl_req *r)
{
	enum MHD_Result ret;

	ret = MHD_queue_response(r->conn, r->status, r->resp);
	if (ret == MHD_NO)
		log_warnx("control: %s %s: cannot queue response %u",
		    r->method, r->path, r->status);
	else
		r->ctl->counts[r->status]++;
	MHD_destroy_response(r->resp);
	r->resp = NULL;
	r->state = REQ_QUEUED;
	return ret;
}

/* Builds the response; a parked request is woken so that MHD calls the
 * access handler again, which queues it (MHD only accepts a response from
 * inside that handler). */
static enum ctl_rc
set_reply(struct ctl_req *r, unsigned status, const char *ctype,
    const char *data, size_t len)
{
	struct MHD_Response *resp;
	size_t i;

	if (r->resp != NULL || r->state == REQ_RESUMING ||
	    r->state == REQ_QUEUED) {
		errno = EALREADY;
		return CTL_DONE;
	}
	if (status < 100 || status >= CTL_CODES)
		status = 500;
	resp = MHD_create_response_from_buffer(len, (void *)(uintptr_t)data,
	    MHD_RESPMEM_MUST_COPY);
	if (resp == NULL) {
		/* Leave r->resp NULL: the access handler answers 500, or,
		 * for a parked request, closes the connection. */
		log_warnx("control: %s %s: out of memory for the response",
		    r->method, r->path);
	} else {
		(void)MHD_add_response_header(resp,
		    MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
		for (i = 0; i < r->nhdrs; i++)
			(void)MHD_add_response_header(resp, r->hname[i],
			    r->hval[i]);
		r->resp = resp;
		r->status = status;
	}
	if (r->state == REQ_PARKED) {
		TAILQ_REMOVE(&r->ctl->parked, r, entry);
		r->state = REQ_RESUMING;
		mhd_resume(r->ctl->mhd, r->conn);
	}
	return CTL_DONE;
}

enum ctl_rc
ctl_reply_text(struct ctl_req *r, unsigned status, const char *ctype,
    const char *text)
{
	return set_reply(r, status, ctype, text, strlen(text));
}

enum ctl_rc
ctl_reply_json(struct ctl_req *r, unsigned status, json_t *body)
{
	char *s;
	enum ctl_rc rc;

	/* NULL is usually a json_pack that failed: never turn that into a
	 * success. */
	s = body != NULL ? json_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII) :
	    NULL;
	json_decref(body);
	if (s == NULL) {
		static const char oops[] = "{\"error\":\"internal\","
		    "\"message\":\"cannot build the response\"}";

		log_warnx("control: %s %s: cannot build the response",
		    r->method, r->path);
		return set_reply(r, 500, "application/json", oops,
		    sizeof(oops) - 1);
	}
	rc = set_reply(r, status, "application/json", s, strlen(s));
	free(s);
	return rc;
}

enum ctl_rc
ctl_reply_error(struct ctl_req *r, unsigned status, const char *code,
    const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *o;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o = json_pack("{s:s, s:s}", "error", code, "message", msg);
	if (o == NULL) {
		size_t i;

		/* Not UTF-8: quoted input cut inside a character (by a
		 * precision or by the buffer). Keep the answer's status and
		 * show such bytes as '?' rather than turn it into a 500. */
		for (i = 0; msg[i] != '\0'; i++)
			if ((unsigned char)msg[i] < 0x20 ||
			    (unsigned char)msg[i] >= 0x7f)
				msg[i] = '?';
		o = json_pack("{s:s, s:s}", "error", code, "message", msg);
	}
	return ctl_reply_json(r, status, o);
}

/* "application/json", any case, optionally followed by parameters. */
static int
is_json_type(const char *ct)
{
	static const char want[] = "application/json";
	size_t n = sizeof(want) - 1;

	if (ct == NULL)
		return 0;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	if (strncasecmp(ct, want, n) != 0)
		return 0;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t';
}

/* Runs the checks of ctl.h in their documented order, then the handler. */
static enum MHD_Result
dispatch(struct ctl *ctl, struct ctl_req *r)
{
	char *segs[CTL_MAX_SEGS], allow[128];
	const struct ctl_route *hit = NULL;
	size_t i;
	int n, pathmatch = 0;
	enum ctl_rc rc;

	allow[0] = '\0';
	if (r->refused) {
		log_warnx("control: %s %s refused: pid %ld (uid %ld) runs in "
		    "a sandbox", r->method, r->path, (long)r->peer.pid,
		    (long)r->peer.uid);
		refuse(r, 403, "from_sandbox", "control requests are not "
		    "taken from inside a sandbox");
		goto send;
	}
	if ((r->pathbuf = strdup(r->path)) == NULL)
		goto internal;
	n = split_path(r->pathbuf, segs, CTL_MAX_SEGS);
	for (i = 0; n > 0 && i < ctl->nroutes; i++) {
		const struct ctl_route *rt = &ctl->routes[i];

		if (!route_match(rt, segs, (size_t)n, NULL))
			continue;
		pathmatch = 1;
		if (strcmp(rt->method, r->method) == 0) {
			hit = rt;
			break;
		}
		if (strstr(allow, rt->method) == NULL &&
		    strlen(allow) + strlen(rt->method) + 3 < sizeof(allow)) {
			if (allow[0] != '\0')
				strcat(allow, ", ");
			strcat(allow, rt->method);
		}
	}
	if (hit == NULL && !pathmatch) {
		ctl_reply_error(r, 404, "not_found", "no such endpoint");
		goto send;
	}
	if (hit == NULL) {
		(void)ctl_reply_header(r, MHD_HTTP_HEADER_ALLOW, allow);
		ctl_reply_error(r, 405, "method_not_allowed",
		    "method %s not allowed here (allowed: %s)", r->method,
		    allow);
		goto send;
	}
	(void)route_match(hit, segs, (size_t)n, r);
	if (r->too_big) {
		refuse(r, 413, "body_too_large", "request body over %d bytes",
		    CTL_BODY_MAX);
		goto send;
	}
	if (r->body_len > 0) {
		json_error_t jerr;

		if (!is_json_type(MHD_lookup_connection_value(r->conn,
		    MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE))) {
			refuse(r, 415, "unsupported_media_type",
			    "the body must be application/json");
			goto send;
		}
		r->body = json_loadb(r->body_buf, r->body_len,
		    JSON_REJECT_DUPLICATES, &jerr);
		if (r->body == NULL) {
			refuse(r, 400, "bad_json",
			    "malformed JSON at line %d column %d: %s",
			    jerr.line, jerr.column, jerr.text);
			goto send;
		}
	}
	rc = hit->fn(r, hit->arg);
	if (r->resp == NULL && rc == CTL_SUSPEND && r->state == REQ_RECEIVING) {
		mhd_suspend(ctl->mhd, r->conn);
		r->state = REQ_PARKED;
		TAILQ_INSERT_TAIL(&ctl->parked, r, entry);
		return MHD_YES;
	}
	if (r->resp == NULL) {
		log_warnx("control: %s %s: handler gave no answer", r->method,
		    r->path);
		goto internal;
	}
	goto send;
internal:
	/* Drop any half-built state so the 500 can be built. */
	if (r->resp != NULL) {
		MHD_destroy_response(r->resp);
		r->resp = NULL;
	}
	ctl_reply_error(r, 500, "internal", "internal error");
send:
	/* No response at all means even the 500 could not be built. */
	return r->resp != NULL ? queue_reply(r) : MHD_NO;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **con_cls)
{
	struct ctl *ctl = cls;
	struct ctl_req *r = *con_cls;

	(void)version;
	if (r == NULL) {
		const char *cl;

		if ((r = calloc(1, sizeof(*r))) == NULL)
			return MHD_NO;
		r->ctl = ctl;
		r->conn = conn;
		r->method = strdup(method);
		r->path = strdup(url);
		*con_cls = r;
		if (r->method == NULL || r->path == NULL)
			return MHD_NO;
		peer_get(r);
		/* Refuse an announced oversized body before reading it. */
		cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		    MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl != NULL) {
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(cl, &end, 10);
			/*
			 * A body we refuse is still drained up to
			 * CTL_DRAIN_MAX: closing on unread data makes the
			 * kernel reset the connection, and the client may
			 * lose the 413 it was sent. Past that, answer now.
			 */
			if (errno == 0 && end != cl && v > CTL_BODY_MAX &&
			    v <= CTL_DRAIN_MAX) {
				r->too_big = 1;
				return MHD_YES;
			}
			if (errno != 0 || end == cl || v > CTL_BODY_MAX) {
				r->too_big = 1;
				refuse(r, 413, "body_too_large",
				    "request body over %d bytes",
				    CTL_BODY_MAX);
				return r->resp != NULL ? queue_reply(r) :
				    MHD_NO;
			}
		}
		return MHD_YES;
	}
	if (r->state == REQ_QUEUED) {
		/* Answered already (a 413 sent before the body): read on only
		 * up to the drain bound, then drop the connection, so that no
		 * client holds one of the few connections by sending without
		 * end. */
		if (r->too_big && (r->drained += *upload_size) > CTL_DRAIN_MAX)
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size != 0) {
		/* A chunked body has no length up front: count as it
		 * arrives, keep nothing past the cap, and read a refused one
		 * only up to the drain bound. */
		if (!r->too_big && r->body_len + *upload_size > CTL_BODY_MAX) {
			r->too_big = 1;
			free(r->body_buf);
			r->body_buf = NULL;
			r->body_len = r->body_cap = 0;
		}
		if (r->too_big && (r->drained += *upload_size) > CTL_DRAIN_MAX)
			return MHD_NO;
		if (!r->too_big) {
			if (r->body_len + *upload_size > r->body_cap) {
				size_t cap = r->body_cap ? r->body_cap : 1024;
				char *p;

				while (cap < r->body_len + *upload_size)
					cap *= 2;
				if ((p = realloc(r->body_buf, cap)) == NULL)
					return MHD_NO;
				r->body_buf = p;
				r->body_cap = cap;
			}
			memcpy(r->body_buf + r->body_len, upload,
			    *upload_size);
			r->body_len += *upload_size;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->state == REQ_RESUMING)
		return r->resp != NULL ? queue_reply(r) : MHD_NO;
	if (r->state == REQ_RECEIVING)
		return dispatch(ctl, r);
	return MHD_YES;
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct ctl *ctl = cls;
	struct ctl_req *r = *con_cls;

	(void)conn;
	(void)toe;
	if (r == NULL)
		return;
	if (r->state == REQ_PARKED)
		TAILQ_REMOVE(&ctl->parked, r, entry);
	req_free(r);
	*con_cls = NULL;
}

/* mkdir -p for the directory part of path; new directories get 0750. */
static int
make_parent(const char *path)
{
	char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *p;

	snprintf(buf, sizeof(buf), "%s", path);
	if ((p = strrchr(buf, '/')) == NULL || p == buf)
		return 0;
	*p = '\0';
	for (p = buf + 1; ; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;

			*p = '\0';
			if (mkdir(buf, 0750) == -1 && errno != EEXIST)
				return -1;
			if ((*p = c) == '\0')
				break;
		}
	}
	return 0;
}

int
ctl_listen(struct ctl *ctl, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	struct mhd_config mc;
	struct stat st;
	mode_t omask;
	int fd = -1, saved;

	if (ctl->mhd != NULL || path == NULL || *path == '\0') {
		snprintf(err, errlen, "control socket: bad call");
		errno = EINVAL;
		return -1;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "%s: socket path too long", path);
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path));
	if (make_parent(path) == -1) {
		saved = errno;
		snprintf(err, errlen, "%s: cannot create its directory: %s",
		    path, strerror(saved));
		errno = saved;
		return -1;
	}
	if (lstat(path, &st) == 0) {
		int probe;

		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s: exists and is not a socket",
			    path);
			errno = EEXIST;
			return -1;
		}
		/* A socket someone answers on belongs to a live daemon. */
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe != -1 && connect(probe, (struct sockaddr *)&sun,
		    sizeof(sun)) == 0) {
			close(probe);
			snprintf(err, errlen, "%s: another daemon is "
			    "listening there", path);
			errno = EADDRINUSE;
			return -1;
		}
		if (probe != -1)
			close(probe);
		if (unlink(path) == -1 && errno != ENOENT) {
			saved = errno;
			snprintf(err, errlen, "%s: cannot remove stale socket: "
			    "%s", path, strerror(saved));
			errno = saved;
			return -1;
		}
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1)
		goto fail;
	/* The umask keeps the socket from ever being wider than 0660. */
	omask = umask(0117);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		saved = errno;
		umask(omask);
		errno = saved;
		goto fail;
	}
	umask(omask);
	if (chmod(path, 0660) == -1 || lstat(path, &st) == -1 ||
	    listen(fd, 64) == -1)
		goto fail_unlink;
	ctl->sock_dev = st.st_dev;
	ctl->sock_ino = st.st_ino;
	if ((ctl->path = strdup(path)) == NULL)
		goto fail_unlink;
	memset(&mc, 0, sizeof(mc));
	mc.name = "control";
	mc.listen_fd = fd;
	mc.on_request = on_request;
	mc.on_completed = on_completed;
	mc.arg = ctl;
	mc.conn_timeout_s = 30;
	mc.conn_limit = 64;
	fd = -1;	/* the mhd's now, also when mhd_new fails */
	if ((ctl->mhd = mhd_new(ctl->loop, &mc, err, errlen)) == NULL) {
		saved = errno;
		free(ctl->path);
		ctl->path = NULL;
		(void)unlink(path);
		errno = saved;
		return -1;
	}
	return 0;
fail_unlink:
	saved = errno;
	(void)unlink(path);
	errno = saved;
fail:
	saved = errno;
	if (fd != -1)
		close(fd);
	snprintf(err, errlen, "%s: %s", path, strerror(saved));
	errno = saved;
	return -1;
}

uint64_t
ctl_requests_total(const struct ctl *ctl, unsigned code)
{
	return code < CTL_CODES ? ctl->counts[code] : 0;
}

void
ctl_metrics_print(const struct ctl *ctl, FILE *fp)
{
	unsigned c;

	fprintf(fp, "# HELP sluice_control_requests_total Control API "
	    "answers by HTTP status code.\n"
	    "# TYPE sluice_control_requests_total counter\n");
	for (c = 100; c < CTL_CODES; c++)
		if (ctl->counts[c] != 0)
			fprintf(fp, "sluice_control_requests_total{code=\"%u\"} "
			    "%llu\n", c, (unsigned long long)ctl->counts[c]);
}
