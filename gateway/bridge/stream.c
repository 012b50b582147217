/*
 * stream.c: the standalone event stream a client opens with GET on the MCP
 * endpoint (transports.mdx, "Listening for Messages from the Server"), so
 * that what an upstream says reaches a session at once rather than with
 * its next answer. It exists apart from front.c because a stream is the
 * one answer that never ends: it outlives the request that opened it, is
 * fed from elsewhere in the loop (notify.c queues, we wake), and must be
 * ended from outside (the session ends, the sandbox is removed or changes,
 * the bridge stops) without waiting for the client.
 *
 * Bounds, since the client is the sandbox: one stream per session (a new
 * GET of the same session replaces the old stream, which ends: the
 * client's reconnection after a network loss is never refused for a stream
 * the bridge has not yet seen die), at most BR_STREAMS_PER_SB per sandbox
 * and never more than half its connection cap (one more ends that
 * sandbox's oldest, so streams never take the connections its requests
 * need), and every stream is one of the
 * sandbox's connections, counted by gateway/mhd.c's per-address and total
 * limits like any other; when the server is full a stream may be closed
 * to make room. What waits for a stream is the session's note queue
 * (BR_NOTES_MAX): text is made from it only when MHD asks for more, so a
 * client that does not read holds no more than that queue and one block.
 *
 * libmicrohttpd's pattern for it: a response whose content reader, with
 * nothing to send, suspends the connection and returns 0; a note, a
 * keepalive or an end resumes it. A suspended connection is not watched by
 * MHD: gateway/mhd.c watches a suspended stream's socket itself, so a
 * client that went away is closed at once; the keepalive comment
 * (BR_KEEPALIVE_MS) finds the rest and keeps intermediaries from timing
 * the stream out.
 * The stream opens with a comment, so that a client sees it is open
 * before anything is said. No event carries an id: nothing is replayed, and a Last-Event-ID is
 * answered with a fresh stream (the spec leaves replay to the server).
 *
 * The same machinery carries a call's own stream: a POST whose call is
 * in flight is answered with an event stream once the upstream asks the
 * client something during it (srvreq.c pushes the request), and the
 * call's final answer is its last event (transports.mdx, "Sending
 * Messages to the Server": requests related to the originating one, then
 * its response). Such a stream has no session of its own (s is NULL): it
 * holds the session as its parked POST did, until it is freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"
#include "gateway/mhd.h"

struct br_stream {
	TAILQ_ENTRY(br_stream)	 entry;		/* oldest first */
	struct br		*br;
	struct br_req		*rq;		/* the GET; owns us */
	struct br_session	*s;		/* NULL once it ended */
	char			 sandbox[64];
	char			*buf;		/* text not yet taken by MHD */
	size_t			 len, off;
	bool			 suspended;
	bool			 ping;		/* a keepalive is owed */
	bool			 ending;	/* end after what is pending */
	bool			 call;		/* a POST's stream */
};

static void	keepalive_arm(struct br *br);
static ssize_t	reader(void *cls, uint64_t pos, char *buf, size_t max);

/* A response of st's text, an event stream; NULL without memory. */
static struct MHD_Response *
stream_response(struct br_stream *st)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096,
	    reader, st, NULL);
	if (resp == NULL)
		return NULL;
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
	    "text/event-stream");
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
	    "no-cache");
	return resp;
}

/* From the loop, never from inside MHD's own callbacks for this conn:
 * MHD runs it again from a zero-delay timer (gateway/mhd.c). */
static void
wake(struct br_stream *st)
{
	if (!st->suspended)
		return;
	st->suspended = false;
	mhd_resume(st->br->mhd, st->rq->conn);
}

/* The stream no longer belongs to its session; a subscriptions/listen
 * session (modern.c), which lives as long as its stream, goes. */
static void
detach(struct br_stream *st)
{
	struct br_session *s = st->s;

	if (s == NULL)
		return;
	s->stream = NULL;
	if (s->inflight > 0)
		s->inflight--;
	st->s = NULL;
	if (s->listen)
		br_session_free(st->br, s);
}

/* The next text for MHD: what is pending, else the session's notes, else
 * a keepalive comment. 0 when there is none. */
static int
refill(struct br_stream *st)
{
	char *t;

	if (st->off < st->len)
		return 1;
	free(st->buf);
	st->buf = NULL;
	st->len = st->off = 0;
	if (st->s != NULL && (t = br_notes_events(st->br, st->s,
	    st->rq->client.policy)) != NULL) {
		st->buf = t;
		st->len = strlen(t);
		st->ping = false;
		return 1;
	}
	if (st->ping && (st->buf = strdup(": keepalive\n\n")) != NULL) {
		st->len = strlen(st->buf);
		st->ping = false;
		return 1;
	}
	return 0;
}

static ssize_t
reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct br_stream *st = cls;
	size_t n;

	(void)pos;
	/* Called: MHD runs the connection, whatever we thought. */
	st->suspended = false;
	if (mhd_gone(st->br->mhd, st->rq->conn))
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (!refill(st)) {
		if (st->ending || (!st->call && st->s == NULL))
			return MHD_CONTENT_READER_END_OF_STREAM;
		st->suspended = true;
		mhd_suspend(st->br->mhd, st->rq->conn);
		return 0;
	}
	n = st->len - st->off < max ? st->len - st->off : max;
	memcpy(buf, st->buf + st->off, n);
	st->off += n;
	return (ssize_t)n;
}

/* Ends st after what it has pending; abort: now, its socket shut (the
 * client may not be reading, and nothing waits for it). */
static void
stream_end(struct br_stream *st, bool abort)
{
	detach(st);
	st->ending = true;
	wake(st);
	if (abort)
		mhd_close(st->br->mhd, st->rq->conn);
}

enum MHD_Result
br_stream_open(struct br_req *rq, struct br_session *s)
{
	struct br *br = rq->br;
	struct br_stream *st, *t, *oldest = NULL;
	struct MHD_Response *resp;
	size_t mine = 0;
	enum MHD_Result ret;

	if ((st = calloc(1, sizeof(*st))) == NULL)
		return MHD_NO;
	if ((resp = stream_response(st)) == NULL) {
		free(st);
		return MHD_NO;
	}
	TAILQ_FOREACH(t, &br->streams, entry) {
		if (strcmp(t->sandbox, rq->client.id) != 0 || t->s == NULL)
			continue;
		if (oldest == NULL)
			oldest = t;
		mine++;
	}
	if (s->stream != NULL)
		stream_end(s->stream, false);
	else if (mine >= br->streams_max && oldest != NULL)
		stream_end(oldest, false);
	st->br = br;
	st->rq = rq;
	st->s = s;
	/* Named, so that what is carried on it outside any call (srvreq.c)
	 * is answered from its session only. */
	snprintf(rq->session, sizeof(rq->session), "%s", s->id);
	snprintf(st->sandbox, sizeof(st->sandbox), "%s", rq->client.id);
	st->ping = true;	/* a first comment: the client sees it open */
	/* Held like a request in flight: a listened-to session is in use. */
	s->stream = st;
	s->inflight++;
	rq->stream = st;
	TAILQ_INSERT_TAIL(&br->streams, st, entry);
	br->nstreams++;
	keepalive_arm(br);
	mhd_streaming(br->mhd, rq->conn);
	ret = MHD_queue_response(rq->conn, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	rq->state = RQ_QUEUED;
	return ret;
}

void
br_stream_free(struct br_stream *st)
{
	if (st == NULL)
		return;
	/* A GET carries server requests made outside any call too. */
	br_srvreq_stream_gone(st->br, st);
	if (st->call)
		br_session_hold(st->br, st->rq, -1);
	detach(st);
	TAILQ_REMOVE(&st->br->streams, st, entry);
	st->br->nstreams--;
	free(st->buf);
	free(st);
}

struct br_stream *
br_callstream(struct br_req *rq)
{
	struct br *br = rq->br;
	struct br_stream *st;
	struct MHD_Response *resp;

	if (rq->stream != NULL)
		return rq->stream->call ? rq->stream : NULL;
	if (rq->state != RQ_PARKED || rq->resp != NULL)
		return NULL;
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return NULL;
	if ((resp = stream_response(st)) == NULL) {
		free(st);
		return NULL;
	}
	st->br = br;
	st->rq = rq;
	st->call = true;
	snprintf(st->sandbox, sizeof(st->sandbox), "%s", rq->client.id);
	rq->stream = st;
	TAILQ_INSERT_TAIL(&br->streams, st, entry);
	br->nstreams++;
	keepalive_arm(br);
	/* Answered now, as front.c answers a parked request, except that
	 * the session stays held: the call goes on, on this stream. */
	TAILQ_REMOVE(&br->parked, rq, entry);
	rq->resp = resp;
	rq->status = MHD_HTTP_OK;
	rq->state = RQ_RESUMING;
	/* Not mhd_streaming: this answer is a call's, never closed to make
	 * room as an idle listener may be. */
	mhd_resume(br->mhd, rq->conn);
	return st;
}

struct br_req *
br_stream_req(const struct br_stream *st)
{
	return st != NULL ? st->rq : NULL;
}

bool
br_stream_live(const struct br_stream *st)
{
	return st != NULL && st->s != NULL && !st->ending;
}

int
br_stream_push(struct br_stream *st, const char *text)
{
	size_t n = strlen(text);
	char *p;

	if (st->ending)
		return -1;
	if (st->off > 0) {
		memmove(st->buf, st->buf + st->off, st->len - st->off);
		st->len -= st->off;
		st->off = 0;
	}
	if ((p = realloc(st->buf, st->len + n + 1)) == NULL)
		return -1;
	memcpy(p + st->len, text, n + 1);
	st->buf = p;
	st->len += n;
	wake(st);
	return 0;
}

int
br_callstream_finish(struct br_req *rq, const char *body)
{
	struct br_stream *st = rq->stream;
	char *t = NULL;

	if (st == NULL || !st->call)
		return -1;
	if (st->ending)
		return 0;
	/* Nothing more is asked in this call: what still waits for the
	 * client's answer is settled before the answer goes. */
	br_srvreq_stream_gone(st->br, st);
	if (body != NULL && (t = br_session_take_notes(st->br, rq->session,
	    rq->client.policy, body)) == NULL &&
	    asprintf(&t, "event: message\ndata: %s\n\n", body) == -1)
		t = NULL;
	if (t == NULL || br_stream_push(st, t) == -1)
		log_warnx("bridge: a call's answer lost on its stream");
	free(t);
	st->ending = true;
	wake(st);
	return 0;
}

void
br_stream_wake(struct br_session *s)
{
	if (s->stream != NULL)
		wake(s->stream);
}

void
br_stream_end(struct br_stream *st)
{
	if (st != NULL)
		stream_end(st, false);
}

void
br_sandbox_changed(struct br *br, const char *sandbox_id)
{
	struct br_stream *st;

	/* Opened under what the sandbox was (its policy, its taint): the
	 * client opens it again under what it is now. */
	TAILQ_FOREACH(st, &br->streams, entry)
		if (st->s != NULL && strcmp(st->sandbox, sandbox_id) == 0)
			stream_end(st, false);
}

void
br_streams_close(struct br *br, const char *sandbox_id)
{
	struct br_stream *st;

	TAILQ_FOREACH(st, &br->streams, entry)
		if (sandbox_id == NULL || strcmp(st->sandbox, sandbox_id) == 0)
			stream_end(st, true);
	if (sandbox_id == NULL) {
		ev_timer_cancel(br->loop, br->keepalive);
		br->keepalive = NULL;
	}
}

static void
on_keepalive(struct ev_loop *loop, void *arg)
{
	struct br *br = arg;
	struct br_stream *st;

	(void)loop;
	br->keepalive = NULL;
	TAILQ_FOREACH(st, &br->streams, entry) {
		st->ping = true;
		wake(st);
	}
	keepalive_arm(br);
}

static void
keepalive_arm(struct br *br)
{
	if (br->keepalive != NULL || br->nstreams == 0 || br->closing)
		return;
	if ((br->keepalive = ev_timer_add(br->loop, BR_KEEPALIVE_MS,
	    on_keepalive, br)) == NULL)
		log_warn("bridge: keepalive timer");
}
