/*
 * verify_proof: per-record proofs for reviewers (c2sp.org/tlog-proof): one
 * record, its inclusion path and the newest signed checkpoint, checkable
 * without the database. Apart from the full verification because a proof
 * is read by someone who holds no log at all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/priv.h"


char *
aud_latest_checkpoint(const char *db_path, char *err, size_t errlen)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char *out = NULL;
	int len;

	if (aud_store_open(db_path, 0, &db, err, errlen) == -1)
		return NULL;
	if (sqlite3_prepare_v2(db, "SELECT note FROM checkpoints ORDER BY size "
	    "DESC LIMIT 1", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
		sqlite3_close(db);
		errno = EIO;
		return NULL;
	}
	if (sqlite3_step(st) == SQLITE_ROW &&
	    (len = sqlite3_column_bytes(st, 0)) > 0 &&
	    (out = malloc((size_t)len + 1)) != NULL) {
		memcpy(out, sqlite3_column_blob(st, 0), (size_t)len);
		out[len] = '\0';
	} else {
		snprintf(err, errlen, "no checkpoint in %s", db_path);
		errno = ENOENT;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return out;
}

char *
aud_proof(const char *db_path, uint64_t seq, char *err, size_t errlen)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	struct aud_ckpt ck;
	uint8_t proof[64][AUD_HASH_LEN], root[AUD_HASH_LEN];
	char *note, *out = NULL, *p, *b64 = NULL;
	size_t np, i, cap;
	int len = 0;

	if ((note = aud_latest_checkpoint(db_path, err, errlen)) == NULL)
		return NULL;
	if (aud_ckpt_parse(note, strlen(note), NULL, 0, &ck, err,
	    errlen) == -1) {
		free(note);
		return NULL;
	}
	if (seq >= ck.size) {
		snprintf(err, errlen, "seq %llu is not covered by the newest "
		    "checkpoint (size %llu)", (unsigned long long)seq,
		    (unsigned long long)ck.size);
		free(note);
		errno = ENOENT;
		return NULL;
	}
	if (aud_store_open(db_path, 0, &db, err, errlen) == -1) {
		free(note);
		return NULL;
	}
	sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
	if (aud_root_at(ck.size, aud_store_subtree, db, root) == -1 ||
	    memcmp(root, ck.root, AUD_HASH_LEN) != 0 ||
	    aud_inclusion_proof(seq, ck.size, aud_store_subtree, db, proof,
	    &np) == -1) {
		snprintf(err, errlen, "the database does not match its newest "
		    "checkpoint: run audit verify");
		goto done;
	}
	if (sqlite3_prepare_v2(db, "SELECT canon FROM records WHERE seq = ?",
	    -1, &st, NULL) != SQLITE_OK)
		goto done;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)seq);
	if (sqlite3_step(st) == SQLITE_ROW &&
	    (len = sqlite3_column_bytes(st, 0)) > 0 && len <= AUD_MAX_RECORD &&
	    (b64 = malloc(((size_t)len + 2) / 3 * 4 + 1)) != NULL)
		aud_b64_encode(sqlite3_column_blob(st, 0), (size_t)len, b64);
	sqlite3_finalize(st);
	if (b64 == NULL) {
		snprintf(err, errlen, "record %llu unreadable",
		    (unsigned long long)seq);
		goto done;
	}
	cap = strlen(b64) + strlen(note) + np * 46 + 128;
	if ((out = malloc(cap)) == NULL)
		goto done;
	p = out;
	p += sprintf(p, "c2sp.org/tlog-proof@v1\nextra %s\nindex %llu\n", b64,
	    (unsigned long long)seq);
	for (i = 0; i < np; i++) {
		p += aud_b64_encode(proof[i], AUD_HASH_LEN, p);
		*p++ = '\n';
	}
	sprintf(p, "\n%s", note);
done:
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(db);
	free(b64);
	free(note);
	if (out == NULL)
		errno = EBADMSG;
	return out;
}

int
aud_check_proof(const char *proof, size_t len, struct aud_key *key,
    json_t **canonp, char *err, size_t errlen)
{
	struct aud_ckpt ck;
	uint8_t hashes[64][AUD_HASH_LEN], h[AUD_HASH_LEN], leaf[AUD_HASH_LEN];
	uint8_t *canon = NULL;
	const char *p = proof, *end = proof + len, *e;
	ssize_t cl = -1;
	size_t nh = 0;
	uint64_t idx = 0;
	json_t *rec = NULL, *x;
	char *ep;
	int rc = -1;

	if (canonp != NULL)
		*canonp = NULL;
#define LINE() ((e = memchr(p, '\n', (size_t)(end - p))) != NULL)
	if (len > 4 * 1024 * 1024 || !LINE() ||
	    (size_t)(e - p) != strlen("c2sp.org/tlog-proof@v1") ||
	    memcmp(p, "c2sp.org/tlog-proof@v1", (size_t)(e - p)) != 0)
		goto malformed;
	p = e + 1;
	if (!LINE() || e - p < 7 || memcmp(p, "extra ", 6) != 0)
		goto malformed;
	if ((canon = malloc((size_t)(e - p))) == NULL)
		goto malformed;
	cl = aud_b64_decode(p + 6, (size_t)(e - p - 6), canon,
	    (size_t)(e - p));
	if (cl <= 0)
		goto malformed;
	p = e + 1;
	if (!LINE() || e - p < 7 || memcmp(p, "index ", 6) != 0 ||
	    (p[6] == '0' && e - p > 7) || p[6] < '0' || p[6] > '9')
		goto malformed;
	errno = 0;
	idx = strtoull(p + 6, &ep, 10);
	if (ep != e || errno != 0)
		goto malformed;
	p = e + 1;
	while (LINE() && e > p) {
		if (nh >= 64 || aud_b64_decode(p, (size_t)(e - p), hashes[nh],
		    AUD_HASH_LEN) != AUD_HASH_LEN)
			goto malformed;
		nh++;
		p = e + 1;
	}
	if (!LINE())
		goto malformed;
	p = e + 1;
	if (aud_ckpt_parse(p, (size_t)(end - p), &key, 1, &ck, err,
	    errlen) == -1)
		goto out;
	if ((rec = aud_canon_parse((const char *)canon, (size_t)cl, err,
	    errlen)) == NULL)
		goto out;
	x = json_object_get(rec, "seq");
	if (!json_is_integer(x) || (uint64_t)json_integer_value(x) != idx ||
	    !json_is_string(json_object_get(rec, "origin")) ||
	    strcmp(json_string_value(json_object_get(rec, "origin")),
	    ck.origin) != 0) {
		snprintf(err, errlen, "record seq/origin do not match the proof");
		goto out;
	}
	aud_sha256(canon, (size_t)cl, h);
	aud_leaf_hash(h, AUD_HASH_LEN, leaf);
	if (aud_inclusion_verify(idx, ck.size, leaf,
	    (const uint8_t (*)[AUD_HASH_LEN])hashes, nh, ck.root) == -1) {
		snprintf(err, errlen, "inclusion proof does not lead to the "
		    "signed root");
		goto out;
	}
	rc = 0;
	if (canonp != NULL) {
		*canonp = rec;
		rec = NULL;
	}
	goto out;
malformed:
	snprintf(err, errlen, "malformed tlog-proof");
out:
#undef LINE
	json_decref(rec);
	free(canon);
	if (rc == -1)
		errno = EBADMSG;
	return rc;
}
