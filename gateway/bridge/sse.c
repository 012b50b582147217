/*
 * sse: the reader of the Server-Sent Events streams an MCP server may answer
 * a POST with (transports.mdx, Streamable HTTP). It exists apart from the
 * HTTP client so that the one property the client relies on can be tested
 * and fuzzed by itself: a stream yields the same messages however the
 * network splits it, and yields each as soon as its event is complete, so
 * that an answer in a stream the server keeps open is not held back.
 *
 * Lines end in CR LF, LF or a lone CR (a CR ends its line at once, and an LF
 * that follows it, perhaps in the next read, is part of the same end, so
 * an event is never held back waiting for a byte). An event ends
 * at a blank line; its data: lines, joined by LF, are one JSON-RPC message.
 * event:, retry: and comments need nothing from us; the last id: seen is
 * kept, for the Last-Event-ID of a stream resumed (upstream_get.c). Data
 * that is not one JSON value is skipped: the request it should have
 * answered then times out, which is the caller's failure path. Consumed
 * bytes are dropped, so memory holds at most one unfinished event; a POST
 * answer's whole stream is bounded by the max given at creation, a stream
 * that stays open (br_sse_new_stream) by the size of one event.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"

struct br_sse {
	char	*buf;		/* unconsumed bytes */
	size_t	 len, cap;
	size_t	 folded;	/* buf[..folded] has its line ends as LF */
	bool	 cr;		/* the last byte folded was a CR */
	size_t	 total, max;	/* bytes fed so far, and the bound */
	size_t	 event_max;	/* 0, or the bound of one event */
	char	 id[BR_SSE_ID_MAX];	/* the last id: field, or "" */
};

struct br_sse *
br_sse_new(size_t max)
{
	struct br_sse *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->max = max;
	return s;
}

struct br_sse *
br_sse_new_stream(size_t event_max)
{
	struct br_sse *s;

	if ((s = br_sse_new(SIZE_MAX)) != NULL)
		s->event_max = event_max;
	return s;
}

const char *
br_sse_last_id(const struct br_sse *s)
{
	return s->id;
}

void
br_sse_free(struct br_sse *s)
{
	if (s == NULL)
		return;
	free(s->buf);
	free(s);
}

/* The value of an id: field (from v to e): kept as the stream's last id
 * unless it holds a NUL (which the format says to ignore) or is too long
 * to send back. */
static void
take_id(struct br_sse *s, const char *v, const char *e)
{
	if (v < e && *v == ' ')
		v++;
	if ((size_t)(e - v) >= sizeof(s->id) || memchr(v, '\0',
	    (size_t)(e - v)) != NULL)
		return;
	memcpy(s->id, v, (size_t)(e - v));
	s->id[e - v] = '\0';
}

/* One event (its lines, LF-separated, without the blank line): the JSON
 * value of its data, appended to out. */
static void
event(struct br_sse *s, const char *ev, size_t len, json_t *out)
{
	const char *p = ev, *e, *v, *end = ev + len;
	char *data;
	size_t dl = 0;
	bool any = false;
	json_t *msg;
	json_error_t jerr;

	if ((data = malloc(len + 1)) == NULL)
		return;
	while (p < end) {
		if ((e = memchr(p, '\n', (size_t)(end - p))) == NULL)
			e = end;
		v = NULL;
		if ((size_t)(e - p) >= 5 && memcmp(p, "data:", 5) == 0) {
			v = p + 5;
			if (v < e && *v == ' ')
				v++;
		} else if (e - p == 4 && memcmp(p, "data", 4) == 0)
			v = e;		/* a field name alone: empty value */
		else if ((size_t)(e - p) >= 3 && memcmp(p, "id:", 3) == 0)
			take_id(s, p + 3, e);
		if (v != NULL) {
			if (any)
				data[dl++] = '\n';
			memcpy(data + dl, v, (size_t)(e - v));
			dl += (size_t)(e - v);
			any = true;
		}
		p = e + 1;
	}
	/* A priming event (an id and empty data) carries no message. */
	if (dl > 0 && (msg = json_loadb(data, dl, JSON_REJECT_DUPLICATES,
	    &jerr)) != NULL)
		json_array_append_new(out, msg);
	free(data);
}

/*
 * Folds the new line ends into LF and consumes every complete event. A CR
 * ends its line at once; an LF right after it (possibly in the next feed)
 * is the same line end and is dropped. At the stream's end an event the
 * server did not close with a blank line still counts: its data is all
 * there.
 */
static void
drain(struct br_sse *s, json_t *out, bool end)
{
	size_t i, j, p = 0, from;
	const char *sep;

	/* What was there before holds no blank line (every complete event
	 * was consumed): the search starts at its last byte, which may pair
	 * with a new one. Searching from the start each time would make an
	 * event sent in many pieces cost its size squared. */
	from = s->folded > 0 ? s->folded - 1 : 0;
	for (i = j = s->folded; i < s->len; i++) {
		if (s->buf[i] == '\n' && s->cr) {
			s->cr = false;
			continue;
		}
		s->cr = s->buf[i] == '\r';
		s->buf[j++] = s->cr ? '\n' : s->buf[i];
	}
	s->len = s->folded = j;
	if (s->len == 0)
		return;
	while ((sep = memmem(s->buf + from, s->len - from, "\n\n", 2)) !=
	    NULL) {
		event(s, s->buf + p, (size_t)(sep - (s->buf + p)), out);
		from = p = (size_t)(sep - s->buf) + 2;
	}
	if (end && p < s->len) {
		event(s, s->buf + p, s->len - p, out);
		p = s->len;
	}
	if (p > 0)
		memmove(s->buf, s->buf + p, s->len - p);
	s->len -= p;
	s->folded = s->len;
}

int
br_sse_feed(struct br_sse *s, const char *data, size_t len, json_t *out)
{
	size_t cap;
	char *nb;

	if (len > s->max - s->total)
		return -1;
	if (s->len + len > s->cap) {
		cap = s->cap ? s->cap : 4096;
		while (cap < s->len + len)
			cap *= 2;
		if ((nb = realloc(s->buf, cap)) == NULL)
			return -1;
		s->buf = nb;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, len);
	s->len += len;
	s->total += len;
	drain(s, out, false);
	/* A stream that stays open: only what is left unconsumed, one
	 * unfinished event, is bounded. */
	if (s->event_max != 0 && s->len > s->event_max)
		return -1;
	return 0;
}

void
br_sse_end(struct br_sse *s, json_t *out)
{
	drain(s, out, true);
}
