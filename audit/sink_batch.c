/*
 * sink_batch: what a sink sends, read from its cursor. Records and the
 * checkpoints they complete are read in order, each checkpoint right after
 * the record it covers, and formatted once (plain canonical JSON, byte for
 * byte the log's, or OCSF), whatever the transport. A record that is not a
 * canonical record of this log stops the feed: a damaged stream is never
 * shipped.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/sink.h"

#define SINK_BATCH_BYTES	(4u * 1024 * 1024)

void
aud_sk_batch_clear(struct aud_sk_batch *b)
{
	size_t i;

	for (i = 0; i < b->n; i++) {
		free(b->it[i].body);
		json_decref(b->it[i].ev);
	}
	free(b->it);
	memset(b, 0, sizeof(*b));
}

static struct aud_sk_item *
batch_add(struct aud_sk_batch *b)
{
	struct aud_sk_item *n;
	size_t cap;

	if (b->n == b->cap) {
		cap = b->cap ? b->cap * 2 : 64;
		if ((n = realloc(b->it, cap * sizeof(*n))) == NULL)
			return NULL;
		b->it = n;
		b->cap = cap;
	}
	n = &b->it[b->n++];
	memset(n, 0, sizeof(*n));
	return n;
}

static int
item_body(struct aud_sk_item *it)
{
	it->body = json_dumps(it->ev, JSON_COMPACT | JSON_SORT_KEYS);
	if (it->body == NULL)
		return -1;
	it->blen = strlen(it->body);
	return 0;
}

/* One record row as an item; NULL (with a message) if it is not a record
 * of this log: the feed stops there rather than ship a damaged stream. */
static int
record_item(struct aud_sink *s, struct aud_sk_item *it, uint64_t seq,
    const char *canon, size_t len, char *err, size_t errlen)
{
	const char *kind, *dec, *origin;
	uint8_t h[AUD_HASH_LEN];
	json_t *r;

	if ((r = aud_canon_parse(canon, len, err, errlen)) == NULL)
		goto bad;
	kind = json_string_value(json_object_get(r, "kind"));
	origin = json_string_value(json_object_get(r, "origin"));
	dec = json_string_value(json_object_get(r, "decision"));
	if (!aud_kind_valid(kind) || origin == NULL ||
	    strlen(origin) >= sizeof(it->origin) ||
	    !json_is_integer(json_object_get(r, "seq")) ||
	    (uint64_t)json_integer_value(json_object_get(r, "seq")) != seq ||
	    aud_ns_parse(json_object_get(r, "ts"), &it->ts_ns) == -1) {
		json_decref(r);
		aud_seterr(err, errlen, "not an audit record");
		goto bad;
	}
	it->seq = seq;
	snprintf(it->origin, sizeof(it->origin), "%s", origin);
	snprintf(it->msgid, sizeof(it->msgid), "%s", kind);
	it->sev = strcmp(kind, "finding") == 0 ? 4 :
	    dec != NULL && strcmp(dec, "deny") == 0 ? 5 : 6;
	aud_sha256(canon, len, h);
	aud_hex(h, AUD_HASH_LEN, it->hash);
	if (s->format == AUD_SINK_OCSF) {
		json_decref(r);
		if ((it->ev = aud_ocsf(canon, len, err, errlen)) == NULL)
			goto bad;
		if (item_body(it) == -1)
			return -1;
	} else {
		/* Plain JSON is the canon itself, byte for byte: a receiver
		 * can hash each line and check it against the log. */
		it->ev = r;
		if ((it->body = malloc(len + 1)) == NULL)
			return -1;
		memcpy(it->body, canon, len);
		it->body[len] = '\0';
		it->blen = len;
	}
	return 0;
bad:
	aud_seterr(err, errlen, "record %llu is not a canonical record of this "
	    "log; the feed stops before it", (unsigned long long)seq);
	errno = EBADMSG;
	return -1;
}

static int
ckpt_item(struct aud_sink *s, struct aud_sk_item *it, uint64_t size,
    const char *note, size_t len, int64_t signed_ns)
{
	const char *nl;
	char uid[300];

	if (len == 0 || len > 65536 || memchr(note, '\0', len) != NULL ||
	    (nl = memchr(note, '\n', len)) == NULL ||
	    (size_t)(nl - note) >= sizeof(it->origin) || nl == note) {
		errno = EBADMSG;
		return -1;
	}
	it->ckpt = 1;
	it->seq = size;
	it->ts_ns = signed_ns;
	it->sev = 6;
	snprintf(it->msgid, sizeof(it->msgid), "checkpoint");
	memcpy(it->origin, note, (size_t)(nl - note));
	it->origin[nl - note] = '\0';
	if (s->format == AUD_SINK_OCSF) {
		snprintf(uid, sizeof(uid), "%s#checkpoint/%llu", it->origin,
		    (unsigned long long)size);
		it->ev = json_pack("{s:i,s:i,s:i,s:i,s:I,s:i,s:i,s:s,"
		    "s:{s:s,s:{s:s,s:s},s:s,s:I,s:s},s:{s:s%,s:I}}",
		    "class_uid", 6002, "category_uid", 6, "activity_id", 99,
		    "type_uid", 600299, "time", (json_int_t)(signed_ns / 1000000),
		    "severity_id", 1, "status_id", 1, "message", "log.checkpoint",
		    "metadata", "version", "1.8.0", "product", "name", "sluice",
		    "vendor_name", "sluice", "uid", uid, "sequence",
		    (json_int_t)size, "log_name", "sluice-audit",
		    "unmapped", "checkpoint", note, len, "size", (json_int_t)size);
	} else
		/* The shape aud_ship_file always wrote: files shipped before
		 * and after it became a wrapper over this one read alike. */
		it->ev = json_pack("{s:s%,s:I}", "checkpoint", note, len,
		    "size", (json_int_t)size);
	if (it->ev == NULL) {
		errno = EBADMSG;
		return -1;
	}
	return item_body(it);
}

/*
 * Reads the next batch: records from the cursor (contiguous, bounded in
 * count and bytes), and the checkpoints not yet delivered that those records
 * complete, each placed right after record size-1 (or first, if that record
 * went out earlier). 0 with b filled (b->n == 0: nothing to do), or -1.
 */
int
aud_sk_load_batch(struct aud_sink *s, struct aud_sk_batch *b, char *err,
    size_t errlen)
{
	struct { uint64_t size; int64_t ns; char *note; size_t len; } *ck = NULL;
	size_t nck = 0, ci = 0, bytes = 0, i, nrec0;
	uint64_t expect = s->st.next_seq, last;
	int rc, len, ret = -1;
	struct aud_sk_item *it;

	memset(b, 0, sizeof(*b));
	b->next = expect;
	b->ck_next = s->ck_next;
	sqlite3_reset(s->q_rec);
	sqlite3_bind_int64(s->q_rec, 1, (sqlite3_int64)expect);
	sqlite3_bind_int64(s->q_rec, 2, (sqlite3_int64)s->batch_max);
	while (bytes < SINK_BATCH_BYTES &&
	    (rc = sqlite3_step(s->q_rec)) == SQLITE_ROW) {
		uint64_t seq = (uint64_t)sqlite3_column_int64(s->q_rec, 0);

		len = sqlite3_column_bytes(s->q_rec, 1);
		/* A hole means a damaged log: never ship past it. */
		if (seq != expect || len <= 0 || len > AUD_MAX_RECORD) {
			aud_seterr(err, errlen, "record %llu missing or empty; "
			    "the feed stops before it",
			    (unsigned long long)expect);
			errno = EBADMSG;
			goto out;
		}
		if ((it = batch_add(b)) == NULL)
			goto nomem;
		if (record_item(s, it, seq, sqlite3_column_blob(s->q_rec, 1),
		    (size_t)len, err, errlen) == -1)
			goto out;
		bytes += it->blen;
		expect = seq + 1;
		b->nrec++;
	}
	if (bytes < SINK_BATCH_BYTES && rc != SQLITE_DONE) {
		aud_seterr(err, errlen, "records: %s", sqlite3_errmsg(s->rd));
		errno = EIO;
		goto out;
	}
	sqlite3_reset(s->q_rec);
	b->next = expect;
	last = expect;	/* checkpoints up to this size are covered */

	sqlite3_reset(s->q_ck);
	sqlite3_bind_int64(s->q_ck, 1, (sqlite3_int64)s->ck_next);
	sqlite3_bind_int64(s->q_ck, 2, (sqlite3_int64)last);
	sqlite3_bind_int64(s->q_ck, 3, (sqlite3_int64)s->batch_max + 64);
	while ((rc = sqlite3_step(s->q_ck)) == SQLITE_ROW) {
		void *p;

		if ((p = realloc(ck, (nck + 1) * sizeof(*ck))) == NULL)
			goto nomem;
		ck = p;
		ck[nck].size = (uint64_t)sqlite3_column_int64(s->q_ck, 0);
		ck[nck].ns = sqlite3_column_int64(s->q_ck, 2);
		len = sqlite3_column_bytes(s->q_ck, 1);
		if (len <= 0 || len > 65536 ||
		    (ck[nck].note = malloc((size_t)len)) == NULL) {
			aud_seterr(err, errlen, "checkpoint %llu is damaged",
			    (unsigned long long)ck[nck].size);
			errno = EBADMSG;
			goto out;
		}
		memcpy(ck[nck].note, sqlite3_column_blob(s->q_ck, 1),
		    (size_t)len);
		ck[nck].len = (size_t)len;
		nck++;
	}
	sqlite3_reset(s->q_ck);
	if (rc != SQLITE_DONE) {
		aud_seterr(err, errlen, "checkpoints: %s",
		    sqlite3_errmsg(s->rd));
		errno = EIO;
		goto out;
	}

	/* Interleave: move the records aside and rebuild the list. */
	{
		struct aud_sk_item *recs = b->it;
		size_t nr = b->n;

		nrec0 = b->nrec;
		b->it = NULL;
		b->n = b->cap = 0;
		for (i = 0; i <= nr; i++) {
			uint64_t upto = i < nr ? recs[i].seq : UINT64_MAX;

			/* Checkpoints whose last record is before recs[i]. */
			while (ci < nck && (ck[ci].size <= upto ||
			    i == nr)) {
				if ((it = batch_add(b)) == NULL ||
				    ckpt_item(s, it, ck[ci].size, ck[ci].note,
				    ck[ci].len, ck[ci].ns) == -1) {
					if (it == NULL)
						errno = ENOMEM;
					aud_seterr(err, errlen, "checkpoint "
					    "%llu: %s",
					    (unsigned long long) ck[ci].size,
					    strerror(errno));
					for (; i < nr; i++) {
						free(recs[i].body);
						json_decref(recs[i].ev);
					}
					free(recs);
					goto out;
				}
				b->ck_next = ck[ci].size;
				b->nck++;
				ci++;
			}
			if (i < nr) {
				if ((it = batch_add(b)) == NULL) {
					for (; i < nr; i++) {
						free(recs[i].body);
						json_decref(recs[i].ev);
					}
					free(recs);
					goto nomem;
				}
				*it = recs[i];
			}
		}
		free(recs);
		b->nrec = nrec0;
	}
	ret = 0;
	goto out;
nomem:
	aud_seterr(err, errlen, "out of memory");
	errno = ENOMEM;
out:
	sqlite3_reset(s->q_rec);
	sqlite3_reset(s->q_ck);
	for (i = 0; i < nck; i++)
		free(ck[i].note);
	free(ck);
	if (ret == -1)
		aud_sk_batch_clear(b);
	return ret;
}

