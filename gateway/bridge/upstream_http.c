/*
 * upstream_http: MCP servers reached over Streamable HTTP, through libcurl's
 * multi interface driven by our ev loop (CURLMOPT_SOCKETFUNCTION and
 * TIMERFUNCTION become ev_add/ev_mod/ev_del and ev_timer_add), so that no
 * upstream call ever blocks the daemon or needs a thread. It exists to speak
 * the client half of transports.mdx: one POST per message with both Accept
 * types, the upstream's Mcp-Session-Id and MCP-Protocol-Version once known,
 * answers as JSON or as an SSE stream (parsed as it arrives and delivered
 * once libcurl has returned, so that an answer in a stream the server keeps
 * open is not held back until the stream ends, and the transfer is dropped
 * as soon as its request is answered), and the credential header added here
 * and nowhere else (br_http_hdrs, which the GET stream of upstream_get.c
 * shares). Redirects are never followed (a redirect could carry the
 * credential elsewhere) and response sizes are capped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"

struct hx {
	struct hx		*next, *prev;
	struct br_up		*up;
	CURL			*easy;
	struct curl_slist	*hdrs;
	char			*body;		/* request */
	char			*buf;		/* response so far */
	size_t			 len, cap;
	struct br_sse		*sse_rd;	/* an SSE answer's reader */
	json_t			*pending;	/* SSE messages not delivered yet */
	json_int_t		 rid;		/* the request's id ... */
	bool			 want;		/* ... if it carried one */
	bool			 answered;	/* its answer has arrived */
	struct ev_timer		*grace;		/* then: how long it may stay */
	bool			 sse, typed;
	bool			 is_init;
	char			 session[128];
};

static void	check_done(struct br *br);
static void	deliver_pending(struct br *br);

static void
on_sock(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct br *br = arg;
	int flags = 0, running;

	(void)loop;
	if (events & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (events & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	if (events & EV_ERROR)
		flags |= CURL_CSELECT_ERR;
	(void)curl_multi_socket_action(br->multi, fd, flags, &running);
	check_done(br);
	deliver_pending(br);
	br_get_deliver(br);
}

static int
sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct br *br = userp;
	unsigned ev = 0;

	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (socketp != NULL) {
			ev_del(br->loop, s);
			curl_multi_assign(br->multi, s, NULL);
		}
		return 0;
	}
	if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
		ev |= EV_READ;
	if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
		ev |= EV_WRITE;
	if (socketp == NULL) {
		if (ev_add(br->loop, s, ev, on_sock, br) == -1)
			return -1;
		curl_multi_assign(br->multi, s, br);
	} else if (ev_mod(br->loop, s, ev) == -1)
		return -1;
	return 0;
}

static void
on_curl_timer(struct ev_loop *loop, void *arg)
{
	struct br *br = arg;
	int running;

	(void)loop;
	br->curl_timer = NULL;
	(void)curl_multi_socket_action(br->multi, CURL_SOCKET_TIMEOUT, 0,
	    &running);
	check_done(br);
	deliver_pending(br);
	br_get_deliver(br);
}

static int
timer_cb(CURLM *m, long ms, void *userp)
{
	struct br *br = userp;

	(void)m;
	ev_timer_cancel(br->loop, br->curl_timer);
	br->curl_timer = NULL;
	if (ms >= 0 && (br->curl_timer = ev_timer_add(br->loop,
	    (uint64_t)ms, on_curl_timer, br)) == NULL)
		return -1;
	return 0;
}

int
br_http_init(struct br *br)
{
	if ((br->multi = curl_multi_init()) == NULL)
		return -1;
	curl_multi_setopt(br->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
	curl_multi_setopt(br->multi, CURLMOPT_SOCKETDATA, br);
	curl_multi_setopt(br->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(br->multi, CURLMOPT_TIMERDATA, br);
	/* Idle connections kept for reuse. libcurl's default follows the
	 * number of transfers in flight, so that a burst of concurrent
	 * calls ends with most of its connections closed and the next one
	 * opens them again; bounded all the same. */
	curl_multi_setopt(br->multi, CURLMOPT_MAXCONNECTS, (long)BR_CONN_CACHE);
	return 0;
}

/* A curl handle with no option set: a reset one from the pool, or new. */
static CURL *
easy_get(struct br *br)
{
	if (br->neasy_pool > 0)
		return br->easy_pool[--br->neasy_pool];
	return curl_easy_init();
}

/* Back to the pool, reset: nothing of its last transfer (options,
 * headers, the credential's header list) stays set on it. */
static void
easy_put(struct br *br, CURL *e)
{
	if (br->neasy_pool == BR_EASY_POOL) {
		curl_easy_cleanup(e);
		return;
	}
	curl_easy_reset(e);
	br->easy_pool[br->neasy_pool++] = e;
}

static void
hx_free(struct br *br, struct hx *x)
{
	if (x->prev != NULL)
		x->prev->next = x->next;
	else if (br->hx_list == x)
		br->hx_list = x->next;
	if (x->next != NULL)
		x->next->prev = x->prev;
	if (x->easy != NULL) {
		curl_multi_remove_handle(br->multi, x->easy);
		easy_put(br, x->easy);
	}
	ev_timer_cancel(br->loop, x->grace);
	curl_slist_free_all(x->hdrs);
	json_decref(x->pending);
	br_sse_free(x->sse_rd);
	free(x->body);
	free(x->buf);
	free(x);
}

void
br_http_fini(struct br *br)
{
	if (br->multi == NULL)
		return;
	while (br->hx_list != NULL)
		hx_free(br, br->hx_list);
	while (br->neasy_pool > 0)
		curl_easy_cleanup(br->easy_pool[--br->neasy_pool]);
	ev_timer_cancel(br->loop, br->curl_timer);
	br->curl_timer = NULL;
	curl_multi_cleanup(br->multi);
	br->multi = NULL;
}

void
br_http_close(struct br_up *u)
{
	struct br *br = u->br;
	struct hx *x, *next;

	br_get_stop(u);
	free(u->session);
	u->session = NULL;
	for (x = br->hx_list; x != NULL; x = next) {
		next = x->next;
		if (x->up == u)
			hx_free(br, x);
	}
}

/* An initialize answered with an Mcp-Session-Id opens the session. */
static void
take_session(struct hx *x)
{
	if (x->is_init && x->session[0] != '\0' && x->up->session == NULL)
		x->up->session = strdup(x->session);
}

/* True when msg answers the request transfer x carried. */
static bool
answers(const struct hx *x, json_t *msg)
{
	json_t *id = json_object_get(msg, "id");

	return x->want && json_is_integer(id) &&
	    json_integer_value(id) == x->rid &&
	    json_object_get(msg, "method") == NULL &&
	    (json_object_get(msg, "result") != NULL ||
	    json_object_get(msg, "error") != NULL);
}

/* An answered stream still open after its grace: nothing more on it is for
 * us, so it goes (and its connection with it). */
static void
on_grace(struct ev_loop *loop, void *arg)
{
	struct hx *x = arg;

	(void)loop;
	x->grace = NULL;
	hx_free(x->up->br, x);
}

/*
 * Hands on what SSE streams delivered so far. A transfer whose request is
 * answered may still finish normally (the usual end, which keeps its
 * connection for the next request), but a server that keeps the stream
 * open loses it after ANSWERED_GRACE_MS. A delivery may send or close
 * transfers, so the list is walked again from its head each time.
 */
#define ANSWERED_GRACE_MS	1000

static void
deliver_pending(struct br *br)
{
	struct hx *x;
	struct br_up *u;
	json_t *msgs, *msg;
	size_t i;

	for (;;) {
		for (x = br->hx_list; x != NULL; x = x->next)
			if (x->pending != NULL &&
			    json_array_size(x->pending) > 0)
				break;
		if (x == NULL)
			return;
		u = x->up;
		msgs = x->pending;
		x->pending = NULL;
		if (x->answered) {
			take_session(x);
			if (x->grace == NULL && (x->grace = ev_timer_add(
			    br->loop, ANSWERED_GRACE_MS, on_grace, x)) == NULL)
				hx_free(br, x);
		}
		json_array_foreach(msgs, i, msg)
			br_up_deliver(u, msg);
		json_decref(msgs);
	}
}

/*
 * libcurl's body callback. An SSE answer goes through its reader as it
 * arrives; its messages wait in x->pending, since delivering here, inside
 * libcurl, could send requests or close the transfer (deliver_pending hands
 * them on once libcurl has returned). Once the request is answered the
 * rest of the stream is not for us. A JSON answer is kept whole. Returning
 * less than len (too big, no memory) aborts the transfer.
 */
static size_t
on_write(char *data, size_t sz, size_t n, void *arg)
{
	struct hx *x = arg;
	size_t len = sz * n, i, from;
	char *ct = NULL, *p;

	if (!x->typed) {
		x->typed = true;
		curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &ct);
		x->sse = ct != NULL && strncasecmp(ct, "text/event-stream",
		    17) == 0;
		if (x->sse && (x->sse_rd = br_sse_new(BR_LINE_MAX)) == NULL)
			return 0;
	}
	if (x->sse) {
		if (x->answered)
			return len;
		if (x->pending == NULL && (x->pending = json_array()) == NULL)
			return 0;
		from = json_array_size(x->pending);
		if (br_sse_feed(x->sse_rd, data, len, x->pending) == -1)
			return 0;
		for (i = from; i < json_array_size(x->pending); i++)
			if (answers(x, json_array_get(x->pending, i)))
				x->answered = true;
		return len;
	}
	if (x->len + len > BR_LINE_MAX)
		return 0;
	if (x->len + len + 1 > x->cap) {
		size_t cap = x->cap ? x->cap : 8192;

		while (cap < x->len + len + 1)
			cap *= 2;
		if ((p = realloc(x->buf, cap)) == NULL)
			return 0;
		x->buf = p;
		x->cap = cap;
	}
	memcpy(x->buf + x->len, data, len);
	x->len += len;
	return len;
}

static size_t
on_header(char *data, size_t sz, size_t n, void *arg)
{
	struct hx *x = arg;
	size_t len = sz * n, vl;
	const char *v;

	if (len > 15 && strncasecmp(data, "mcp-session-id:", 15) == 0) {
		v = data + 15;
		while (v < data + len && (*v == ' ' || *v == '\t'))
			v++;
		vl = (size_t)(data + len - v);
		while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' ||
		    v[vl - 1] == ' '))
			vl--;
		if (vl > 0 && vl < sizeof(x->session)) {
			memcpy(x->session, v, vl);
			x->session[vl] = '\0';
		}
	}
	return len;
}

/* Parse everything first and free the transfer, then deliver: a delivery
 * may send new requests or close this upstream. */
static void
hx_done(struct br *br, struct hx *x, CURLcode rc)
{
	struct br_up *u = x->up;
	long status = 0;
	json_t *msgs, *msg;
	json_error_t jerr;
	char why[96];
	size_t i;

	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	why[0] = '\0';
	if ((msgs = json_array()) == NULL)
		snprintf(why, sizeof(why), "out of memory");
	else if (x->answered) {
		/* What broke after the answer (a stream cut) is no
		 * failure; what is still pending goes out now. */
		take_session(x);
		if (x->pending != NULL)
			json_array_extend(msgs, x->pending);
	} else if (rc != CURLE_OK)
		snprintf(why, sizeof(why), "HTTP transfer failed (%s)",
		    curl_easy_strerror(rc));
	else if (status == 404 && u->session != NULL)
		snprintf(why, sizeof(why), "upstream session expired");
	else if (status != 200 && status != 202 && status != 204)
		snprintf(why, sizeof(why), "HTTP status %ld", status);
	else {
		take_session(x);
		if (x->sse) {
			if (x->sse_rd != NULL && (x->pending != NULL ||
			    (x->pending = json_array()) != NULL))
				br_sse_end(x->sse_rd, x->pending);
			if (x->pending != NULL)
				json_array_extend(msgs, x->pending);
		} else if (x->len > 0 && (msg = json_loadb(x->buf, x->len,
		    JSON_REJECT_DUPLICATES, &jerr)) != NULL)
			json_array_append_new(msgs, msg);
	}
	hx_free(br, x);
	if (why[0] != '\0') {
		json_decref(msgs);
		br_up_failed(u, why);
		return;
	}
	json_array_foreach(msgs, i, msg)
		br_up_deliver(u, msg);
	json_decref(msgs);
}

static void
check_done(struct br *br)
{
	CURLMsg *m;
	int left;
	struct hx *x;

	while (br->multi != NULL &&
	    (m = curl_multi_info_read(br->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE ||
		    br_get_done(br, m->easy_handle, m->data.result))
			continue;
		x = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
		    (char **)&x);
		if (x != NULL)
			hx_done(br, x, m->data.result);
	}
}

struct curl_slist *
br_http_hdrs(const struct br_up *u, const char *accept)
{
	struct curl_slist *l, *n;
	char hbuf[256], *h;
	size_t len;

	if ((l = curl_slist_append(NULL, accept)) == NULL)
		return NULL;
	if (u->session != NULL) {
		snprintf(hbuf, sizeof(hbuf), "Mcp-Session-Id: %s", u->session);
		if ((n = curl_slist_append(l, hbuf)) == NULL)
			goto fail;
		l = n;
	}
	if (u->version[0] != '\0') {
		snprintf(hbuf, sizeof(hbuf), "MCP-Protocol-Version: %s",
		    u->version);
		if ((n = curl_slist_append(l, hbuf)) == NULL)
			goto fail;
		l = n;
	}
	if (u->secret != NULL && u->srv->cred_header != NULL) {
		len = strlen(u->srv->cred_header) + strlen(u->secret) +
		    (u->srv->cred_prefix ? strlen(u->srv->cred_prefix) : 0) +
		    3;
		if ((h = malloc(len)) == NULL)
			goto fail;
		snprintf(h, len, "%s: %s%s", u->srv->cred_header,
		    u->srv->cred_prefix ? u->srv->cred_prefix : "", u->secret);
		n = curl_slist_append(l, h);
		explicit_bzero(h, len);
		free(h);
		if (n == NULL)
			goto fail;
		l = n;
	}
	return l;
fail:
	curl_slist_free_all(l);
	return NULL;
}

void
br_http_easy_base(const struct br_up *u, CURL *e, struct curl_slist *hdrs)
{
	curl_easy_setopt(e, CURLOPT_URL, u->srv->url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
}

int
br_http_send(struct br_up *u, json_t *msg, bool is_init)
{
	struct br *br = u->br;
	struct curl_slist *h;
	struct hx *x;

	if (u->srv->url == NULL || (x = calloc(1, sizeof(*x))) == NULL)
		return -1;
	x->up = u;
	x->is_init = is_init;
	if (json_is_integer(json_object_get(msg, "id")) &&
	    json_is_string(json_object_get(msg, "method"))) {
		x->want = true;
		x->rid = json_integer_value(json_object_get(msg, "id"));
	}
	if ((x->body = json_dumps(msg, JSON_COMPACT)) == NULL ||
	    (x->easy = easy_get(br)) == NULL)
		goto fail;
	if ((x->hdrs = br_http_hdrs(u, "Accept: application/json, "
	    "text/event-stream")) == NULL ||
	    (h = curl_slist_append(x->hdrs, "Content-Type: application/json"))
	    == NULL)
		goto fail;
	x->hdrs = h;
	br_http_easy_base(u, x->easy, x->hdrs);
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body);
	curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(x->body));
	curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(x->easy, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
	curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS,
	    (long)br->c.upstream_timeout_ms);
	if (curl_multi_add_handle(br->multi, x->easy) != CURLM_OK)
		goto fail;
	x->next = br->hx_list;
	if (x->next != NULL)
		x->next->prev = x;
	br->hx_list = x;
	/* libcurl's timer callback (0 ms) starts the transfer. */
	return 0;
fail:
	if (x->easy != NULL) {
		easy_put(br, x->easy);
		x->easy = NULL;
	}
	hx_free(br, x);
	return -1;
}
