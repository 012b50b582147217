/*
 * upstream_get: the GET stream of an HTTP upstream (transports.mdx,
 * "Listening for Messages from the Server"). Over Streamable HTTP a server
 * can say nothing outside a POST's answer unless its client holds this
 * stream open: no roots/list once initialized, no resources/updated or
 * list_changed between calls. So once an upstream session is ready the
 * bridge opens it, with the session's id, protocol version and
 * credential (br_http_hdrs), and hands every message it carries to
 * br_up_deliver, where it is taken exactly as the same message from a
 * stdio upstream outside a call: a request through srvreq.c's routing
 * and policy, a notification through notify.c, and the answers go back
 * as POSTs of the upstream's session.
 *
 * It is one more libcurl transfer of the bridge's multi handle, driven by
 * the same ev loop as upstream_http.c (which tells us when one of ours is
 * done and when to deliver): no thread. A server that offers no stream
 * answers 405: nothing more is asked of it, and that is no failure. One
 * whose stream ends or breaks is asked again after a backoff (250 ms
 * doubling to 30 s, back to the start once a stream worked), with the
 * Last-Event-ID of the last event it sent, so that it may replay what
 * was lost meanwhile. 404 is the end of its session: the upstream is
 * failed, and a new session (and stream) follows from br_up_failed's
 * restart. Any other refusal, or a broken connection, may also mean a
 * session the server forgot without saying 404 (server-everything says
 * 400): the session is pinged, and a ping that fails fails the upstream
 * the same way.
 *
 * Bounds: an event may not exceed GET_EVENT_MAX bytes (the stream is
 * dropped, and asked again after the backoff); messages are taken at
 * GET_RATE a second (bursts of GET_BURST), and at most GET_PENDING wait
 * to be delivered (and what one read of libcurl's buffer holds): past
 * either the transfer is paused, so the server is slowed by TCP, not
 * buffered for. What arrives is further bounded where
 * it goes (srvreq.c's, notify.c's bounds per session and sandbox).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"

#define GET_EVENT_MAX	(1024u * 1024)	/* bytes of one event */
#define GET_RATE	100u		/* messages a second, sustained */
#define GET_BURST	200u		/* ... and at once */
#define GET_PENDING	256u		/* messages read, not yet delivered */
#define GET_BACKOFF_MS	250u
#define GET_BACKOFF_MAX	30000u
#define GET_STABLE_MS	10000u		/* a stream open this long worked */

struct br_get {
	struct br_up		*up;
	CURL			*easy;
	struct curl_slist	*hdrs;
	struct br_sse		*sse;
	json_t			*pending;	/* messages not delivered yet */
	struct ev_timer		*timer;		/* reconnect, or resume */
	char			 last_id[BR_SSE_ID_MAX];
	bool			 typed, ok;	/* a 200 event stream */
	bool			 paused;
	unsigned		 failures;
	uint64_t		 opened_ms;
	double			 tokens;	/* messages it may still send */
	uint64_t		 refilled_ms;
};

static void	get_open(struct br_get *g);

/* Ends g's transfer, if any; g stays. */
static void
get_drop(struct br_get *g)
{
	struct br *br = g->up->br;

	if (g->easy != NULL) {
		curl_multi_remove_handle(br->multi, g->easy);
		curl_easy_cleanup(g->easy);
		g->easy = NULL;
	}
	curl_slist_free_all(g->hdrs);
	g->hdrs = NULL;
	br_sse_free(g->sse);
	g->sse = NULL;
	g->paused = false;
}

void
br_get_stop(struct br_up *u)
{
	struct br_get *g = u->get;

	/* A new session may offer what the old one did not. */
	u->no_get = false;
	if (g == NULL)
		return;
	u->get = NULL;
	get_drop(g);
	ev_timer_cancel(u->br->loop, g->timer);
	json_decref(g->pending);
	free(g);
}

static void
on_reopen(struct ev_loop *loop, void *arg)
{
	struct br_get *g = arg;

	(void)loop;
	g->timer = NULL;
	get_open(g);
}

/* g is asked again after its backoff. */
static void
get_later(struct br_get *g)
{
	uint64_t ms;

	get_drop(g);
	/* A resume pending is moot with its transfer gone. */
	ev_timer_cancel(g->up->br->loop, g->timer);
	g->timer = NULL;
	if (g->up->br->closing)
		return;
	if (g->ok && ev_now_ms() - g->opened_ms >= GET_STABLE_MS)
		g->failures = 0;
	ms = (uint64_t)GET_BACKOFF_MS << (g->failures < 7 ? g->failures : 7);
	if (ms > GET_BACKOFF_MAX)
		ms = GET_BACKOFF_MAX;
	g->failures++;
	if ((g->timer = ev_timer_add(g->up->br->loop, ms, on_reopen, g)) ==
	    NULL)
		log_warnx("bridge: the GET stream of %s not asked again: no "
		    "memory", g->up->srv->name);
}

static void
on_resume(struct ev_loop *loop, void *arg)
{
	struct br_get *g = arg;

	(void)loop;
	g->timer = NULL;
	if (g->easy == NULL || !g->paused)
		return;
	g->paused = false;
	/* May call on_write at once; what it reads waits in pending. */
	(void)curl_easy_pause(g->easy, CURLPAUSE_CONT);
	br_get_deliver(g->up->br);
}

/* Whether g may take more messages now; refills its tokens. */
static bool
get_may_take(struct br_get *g)
{
	uint64_t now = ev_now_ms();

	g->tokens += (double)(now - g->refilled_ms) * GET_RATE / 1000.0;
	if (g->tokens > GET_BURST)
		g->tokens = GET_BURST;
	g->refilled_ms = now;
	return g->tokens >= 1 && json_array_size(g->pending) < GET_PENDING;
}

/* libcurl's body callback: an event stream is read as it arrives, its
 * messages kept for br_get_deliver (delivering here, inside libcurl,
 * could close this transfer). Anything but a 200 event stream is not
 * read: the transfer ends, and br_get_done looks at its status. */
static size_t
on_write(char *data, size_t sz, size_t n, void *arg)
{
	struct br_get *g = arg;
	size_t len = sz * n, from, i;
	long status = 0;
	char *ct = NULL;

	if (!g->typed) {
		g->typed = true;
		curl_easy_getinfo(g->easy, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(g->easy, CURLINFO_CONTENT_TYPE, &ct);
		g->ok = status == 200 && ct != NULL &&
		    strncasecmp(ct, "text/event-stream", 17) == 0;
		if (g->ok) {
			g->opened_ms = ev_now_ms();
			log_info("bridge: the GET stream of %s is open",
			    g->up->srv->name);
		}
	}
	if (!g->ok)
		return 0;
	if (!get_may_take(g)) {
		/* Read again on resume: nothing of data is taken. */
		if (g->timer == NULL)
			g->timer = ev_timer_add(g->up->br->loop, 1000 /
			    GET_RATE + 1, on_resume, g);
		if (g->timer == NULL)
			return 0;
		g->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	from = json_array_size(g->pending);
	if (br_sse_feed(g->sse, data, len, g->pending) == -1) {
		log_warnx("bridge: the GET stream of %s dropped: an event "
		    "over %u bytes", g->up->srv->name, GET_EVENT_MAX);
		return 0;
	}
	for (i = from; i < json_array_size(g->pending); i++)
		g->tokens -= 1;
	snprintf(g->last_id, sizeof(g->last_id), "%s",
	    br_sse_last_id(g->sse));
	return len;
}

static void
get_open(struct br_get *g)
{
	struct br_up *u = g->up;
	struct curl_slist *h;
	char hbuf[BR_SSE_ID_MAX + 32];

	g->typed = g->ok = false;
	if ((g->sse = br_sse_new_stream(GET_EVENT_MAX)) == NULL ||
	    (g->easy = curl_easy_init()) == NULL ||
	    (g->hdrs = br_http_hdrs(u, "Accept: text/event-stream")) == NULL)
		goto fail;
	if (g->last_id[0] != '\0') {
		snprintf(hbuf, sizeof(hbuf), "Last-Event-ID: %s", g->last_id);
		if ((h = curl_slist_append(g->hdrs, hbuf)) == NULL)
			goto fail;
		g->hdrs = h;
	}
	br_http_easy_base(u, g->easy, g->hdrs);
	curl_easy_setopt(g->easy, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(g->easy, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(g->easy, CURLOPT_WRITEDATA, g);
	curl_easy_setopt(g->easy, CURLOPT_PRIVATE, g);
	/* It stays open as long as the server likes: no timeout, but a
	 * peer that vanished is found by TCP. */
	curl_easy_setopt(g->easy, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(g->easy, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(g->easy, CURLOPT_TCP_KEEPINTVL, 10L);
	if (curl_multi_add_handle(u->br->multi, g->easy) != CURLM_OK)
		goto fail;
	return;
fail:
	log_warnx("bridge: the GET stream of %s not opened: no memory",
	    u->srv->name);
	get_later(g);
}

void
br_get_start(struct br_up *u)
{
	struct br_get *g;

	if (u->srv->transport == POL_MCP_STDIO || u->srv->url == NULL ||
	    u->get != NULL || u->no_get || u->br->multi == NULL)
		return;
	if ((g = calloc(1, sizeof(*g))) == NULL ||
	    (g->pending = json_array()) == NULL) {
		free(g);
		log_warnx("bridge: the GET stream of %s not opened: no memory",
		    u->srv->name);
		return;
	}
	g->up = u;
	g->tokens = GET_BURST;
	g->refilled_ms = ev_now_ms();
	u->get = g;
	get_open(g);
}

/* The ping that checks a session after its stream was refused: a failed
 * one has failed the upstream already (hx_done), nothing is left here. */
static void
on_ping(void *arg, json_t *msg, const char *err)
{
	(void)arg;
	(void)msg;
	(void)err;
}

bool
br_get_done(struct br *br, CURL *easy, CURLcode rc)
{
	struct br_get *g = NULL;
	struct br_up *u;
	long status = 0;
	size_t i;

	for (i = 0; i < br->nups; i++)
		if (br->ups[i]->get != NULL && br->ups[i]->get->easy == easy) {
			g = br->ups[i]->get;
			break;
		}
	if (g == NULL)
		return false;
	u = g->up;
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
	if (g->ok && g->sse != NULL)
		br_sse_end(g->sse, g->pending);
	if (status == 405) {
		/* It offers none: nothing more is asked of this session. */
		log_info("bridge: upstream %s offers no GET stream",
		    u->srv->name);
		u->no_get = true;
		br_get_stop(u);
		u->no_get = true;
		return true;
	}
	if (status == 404 && u->session != NULL) {
		br_get_stop(u);
		br_up_failed(u, "upstream session expired");
		return true;
	}
	if (g->ok)
		log_info("bridge: the GET stream of %s ended (%s)",
		    u->srv->name, rc == CURLE_OK ? "closed by the server" :
		    curl_easy_strerror(rc));
	else
		log_warnx("bridge: the GET stream of %s refused (HTTP %ld, "
		    "%s)", u->srv->name, status, curl_easy_strerror(rc));
	/* What it said before it ended still goes (br_get_deliver). */
	get_later(g);
	if (!g->ok && u->state == UP_READY && br_up_request(u, "ping", NULL,
	    on_ping, NULL) == NULL)
		log_warnx("bridge: the session of %s not checked: no memory",
		    u->srv->name);
	return true;
}

void
br_get_deliver(struct br *br)
{
	struct br_up *u;
	json_t *msg;
	size_t i;

	/* One at a time, from the start again: a delivery may end any
	 * upstream's session and stream. */
	for (;;) {
		u = NULL;
		for (i = 0; i < br->nups; i++)
			if (br->ups[i]->get != NULL &&
			    json_array_size(br->ups[i]->get->pending) > 0) {
				u = br->ups[i];
				break;
			}
		if (u == NULL)
			return;
		msg = json_incref(json_array_get(u->get->pending, 0));
		json_array_remove(u->get->pending, 0);
		br_up_deliver(u, msg);
		json_decref(msg);
	}
}
