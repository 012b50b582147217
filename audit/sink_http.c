/*
 * sink_http: the webhook transport, HTTP(S) POSTs of NDJSON or of Splunk
 * HEC events through libcurl. Only a 2xx answer acknowledges a batch; a
 * redirect does not, and is not followed, so that the token never goes
 * elsewhere.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/sink.h"

#define SINK_RESP_MAX		(1024 * 1024)

static size_t
discard(char *p, size_t sz, size_t n, void *arg)
{
	size_t *got = arg;

	(void)p;
	/* A receiver that streams without end is cut off (and not
	 * believed: the delivery counts as failed). */
	if ((*got += sz * n) > SINK_RESP_MAX)
		return 0;
	return sz * n;
}

static int
progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct aud_sink *s = arg;

	(void)a; (void)b; (void)c; (void)d;
	return atomic_load(&s->stopping) ? 1 : 0;
}

static int
webhook_init(struct aud_sink *s, char *err, size_t errlen)
{
	struct curl_slist *h = NULL, *n;
	char auth[SINK_TOKEN_MAX + 32];

	if ((s->curl = curl_easy_init()) == NULL) {
		aud_seterr(err, errlen, "curl_easy_init failed");
		errno = ENOMEM;
		return -1;
	}
	h = curl_slist_append(NULL, s->hec ? "Content-Type: application/json" :
	    "Content-Type: application/x-ndjson");
	if (h != NULL && (n = curl_slist_append(h, "Expect:")) != NULL)
		h = n;
	if (h != NULL && s->token != NULL) {
		snprintf(auth, sizeof(auth), "Authorization: %s %s",
		    s->hec ? "Splunk" : "Bearer", s->token);
		if ((n = curl_slist_append(h, auth)) != NULL)
			h = n;
		else {
			curl_slist_free_all(h);
			h = NULL;
		}
		explicit_bzero(auth, sizeof(auth));
	}
	if (h == NULL) {
		aud_seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	s->hdrs = h;
	curl_easy_setopt(s->curl, CURLOPT_URL, s->target);
	curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, s->hdrs);
	curl_easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(s->curl, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
	curl_easy_setopt(s->curl, CURLOPT_CONNECTTIMEOUT_MS,
	    (long)s->timeout_ms);
	/* A redirect is not an acknowledgement, and must not carry the
	 * token elsewhere. */
	curl_easy_setopt(s->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(s->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(s->curl, CURLOPT_USERAGENT, "sluiced-audit-sink");
	curl_easy_setopt(s->curl, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(s->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(s->curl, CURLOPT_XFERINFOFUNCTION, progress);
	curl_easy_setopt(s->curl, CURLOPT_XFERINFODATA, s);
	return 0;
}

static json_t *
hec_event(struct aud_sink *s, const struct aud_sk_item *it)
{
	json_t *f;

	if (it->ckpt)
		f = json_pack("{s:I,s:s}", "sluice_checkpoint_size",
		    (json_int_t)it->seq, "sluice_origin", it->origin);
	else
		f = json_pack("{s:I,s:s,s:s}", "sluice_seq", (json_int_t)it->seq,
		    "sluice_origin", it->origin, "sluice_hash", it->hash);
	return json_pack("{s:O,s:f,s:s,s:s,s:s,s:o}", "event", it->ev,
	    "time", (double)(it->ts_ns / 1000000) / 1000.0, "sourcetype",
	    it->ckpt ? "sluice:checkpoint" : s->format == AUD_SINK_OCSF ?
	    "sluice:ocsf" : "sluice:audit", "source", "sluice", "host",
	    s->hostname, "fields", f);
}

int
aud_sk_send_webhook(struct aud_sink *s, struct aud_sk_batch *b, char *err,
    size_t errlen)
{
	char ebuf[CURL_ERROR_SIZE];
	char *body = NULL, *line, *p;
	size_t total = 0, cap = 0, len, got = 0, i;
	long code = 0;
	json_t *ev;
	CURLcode rc;

	if (s->curl == NULL && webhook_init(s, err, errlen) == -1)
		return -1;
	for (i = 0; i < b->n; i++) {
		if (s->hec) {
			ev = hec_event(s, &b->it[i]);
			line = ev ? json_dumps(ev, JSON_COMPACT |
			    JSON_SORT_KEYS | JSON_REAL_PRECISION(15)) : NULL;
			json_decref(ev);
			if (line == NULL)
				goto nomem;
			len = strlen(line);
		} else {
			line = b->it[i].body;
			len = b->it[i].blen;
		}
		if (total + len + 1 > cap) {
			cap = (total + len + 1) * 2;
			if ((p = realloc(body, cap)) == NULL) {
				if (s->hec)
					free(line);
				goto nomem;
			}
			body = p;
		}
		memcpy(body + total, line, len);
		total += len;
		body[total++] = '\n';
		if (s->hec)
			free(line);
	}
	ebuf[0] = '\0';
	curl_easy_setopt(s->curl, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(s->curl, CURLOPT_POSTFIELDSIZE_LARGE,
	    (curl_off_t)total);
	curl_easy_setopt(s->curl, CURLOPT_WRITEDATA, &got);
	rc = curl_easy_perform(s->curl);
	curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, NULL);
	curl_easy_setopt(s->curl, CURLOPT_ERRORBUFFER, NULL);
	free(body);
	if (rc != CURLE_OK) {
		aud_seterr(err, errlen, "webhook: %s", ebuf[0] ? ebuf :
		    curl_easy_strerror(rc));
		errno = rc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : EIO;
		return -1;
	}
	curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code < 200 || code > 299) {
		aud_seterr(err, errlen, "webhook: HTTP status %ld", code);
		errno = EIO;
		return -1;
	}
	return 0;
nomem:
	free(body);
	aud_seterr(err, errlen, "out of memory");
	errno = ENOMEM;
	return -1;
}

