/*
 * verify: the offline check of a log database (reference/audit.md §3.8) and
 * per-record proofs for reviewers. The verifier trusts nothing but `canon`,
 * the keys it is given and external checkpoints: it re-derives every hash,
 * link, index column and tree node, checks every stored checkpoint, and says
 * how much assurance the result carries. It opens the DB read-only inside one
 * read transaction, which is safe beside a running writer in WAL mode, and a
 * hostile file (wrong schema, types, sizes, bytes) yields a verdict, never a
 * crash.
 *
 * This file is the report: its checks, warnings and claims, the result and
 * the assurance level, and the order of the steps; the scan of the records
 * is in verify_scan.c, the checkpoint checks in verify_ckpt.c, the proofs in
 * verify_proof.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/verify.h"

static const char *const claims[] = {
	"every record with seq < N is exactly as written when checkpoint N was "
	    "signed",
	"records are contiguous from 0",
	"nothing was removed from a prefix that any external party holds a "
	    "checkpoint for",
	"a local root on the gateway host can rewrite everything not yet "
	    "covered by an externally held checkpoint and can sign new "
	    "checkpoints with the host key; only external checkpoints detect it",
	"completeness of capture is not claimed: losses are recorded as log.gap",
};

void
aud_vf_ok(struct aud_vctx *v, const char *name, const char *detail)
{
	json_array_append_new(v->checks, json_pack("{s:s,s:b,s:s}", "check",
	    name, "ok", 1, "detail", detail ? detail : ""));
}

void
aud_vf_fail(struct aud_vctx *v, int64_t seq, const char *check,
    const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_array_append_new(v->checks, json_pack("{s:s,s:b,s:s}", "check",
	    check, "ok", 0, "detail", buf));
	if (v->failed)
		return;
	v->failed = 1;
	json_object_set_new(v->rep, "first_failure", json_pack("{s:o,s:s,s:s}",
	    "seq", seq >= 0 ? json_integer(seq) : json_null(), "check", check,
	    "detail", buf));
}

void
aud_vf_error(struct aud_vctx *v, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!v->error)
		json_object_set_new(v->rep, "error", json_string(buf));
	v->error = 1;
}

void
aud_vf_warn(struct aud_vctx *v, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_array_append_new(v->warnings, json_string(buf));
}

static int
cmpu64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void
want_size(struct aud_vctx *v, uint64_t s, size_t cap)
{
	if (v->nsizes < cap)
		v->sizes[v->nsizes++] = s;
}

int
aud_verify(const struct aud_verify_opts *o, json_t **report)
{
	struct aud_vctx v;
	struct aud_ckpt ck;
	struct aud_key **keys;
	sqlite3_stmt *st = NULL;
	char meta[256], e[256], uri[4200];
	uint64_t n = 0, last_signed = 0, nck = 0, cap, u;
	size_t i, nkeys;
	int ext_ok = 0, local_ok = 0, code;

	memset(&v, 0, sizeof(v));
	v.rep = json_object();
	v.checks = json_array();
	v.warnings = json_array();
	v.gaps = json_array();
	json_object_set(v.rep, "checks", v.checks);
	json_object_set(v.rep, "warnings", v.warnings);
	json_object_set_new(v.rep, "first_failure", json_null());
	json_object_set_new(v.rep, "claims", json_array());
	for (i = 0; i < sizeof(claims) / sizeof(claims[0]); i++)
		json_array_append_new(json_object_get(v.rep, "claims"),
		    json_string(claims[i]));
	*report = v.rep;

	for (i = 0; i < o->nvkeys && v.npinned < AUD_VF_MAXKEYS; i++) {
		if ((v.pinned[v.npinned] = aud_key_from_vkey(o->vkeys[i], e,
		    sizeof(e))) == NULL) {
			aud_vf_error(&v, "--key: %s", e);
			goto out;
		}
		v.npinned++;
	}
	/* A URI keeps SQLite from creating a missing file. */
	if (o->db_path == NULL || strlen(o->db_path) > 4000) {
		aud_vf_error(&v, "no database");
		goto out;
	}
	snprintf(uri, sizeof(uri), "%s", o->db_path);
	if (aud_store_open_vfs(uri, 0, aud_vf_ra_name(), &v.db, e,
	    sizeof(e)) == -1) {
		aud_vf_error(&v, "%s", e);
		goto out;
	}
	/* The scan reads the whole file once, in order: map it and keep a
	 * large cache (read-only, so nothing here touches the writer). */
	sqlite3_exec(v.db, "PRAGMA mmap_size=1073741824;"
	    "PRAGMA cache_size=-65536;", NULL, NULL, NULL);
	if (sqlite3_exec(v.db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(v.db, "SELECT count(*) FROM sqlite_master", -1,
	    &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
		aud_vf_error(&v, "%s: not a readable SQLite database: %s",
		    o->db_path, sqlite3_errmsg(v.db));
		goto out;
	}
	sqlite3_finalize(st);
	st = NULL;

	/* 1. log_meta */
	if (aud_store_meta(v.db, "format", meta, sizeof(meta)) == -1 ||
	    strcmp(meta, AUD_FORMAT) != 0) {
		aud_vf_fail(&v, -1, "meta", "log_meta.format is not %s",
		    AUD_FORMAT);
		goto out;
	}
	if (aud_store_meta(v.db, "origin", v.origin, sizeof(v.origin)) == -1 ||
	    v.origin[0] == '\0') {
		aud_vf_fail(&v, -1, "meta", "log_meta.origin missing");
		goto out;
	}
	json_object_set_new(v.rep, "origin", json_string(v.origin));
	/* A log key is named after its log's origin (reference §3.6): a
	 * log under another origin is not the log the pinned keys vouch
	 * for, even when one of them signed its checkpoints. */
	if (v.npinned > 0) {
		for (i = 0; i < v.npinned; i++)
			if (strcmp(aud_key_name(v.pinned[i]), v.origin) == 0)
				break;
		if (i == v.npinned) {
			aud_vf_fail(&v, -1, "meta", "log origin %s is not the "
			    "name of a pinned key", v.origin);
			goto out;
		}
	}
	aud_vf_ok(&v, "meta", v.origin);

	/* Sizes whose roots steps 4 and 5 need, gathered before the scan. */
	cap = 1 + o->next_ckpts;
	if (sqlite3_prepare_v2(v.db, "SELECT count(*) FROM checkpoints", -1,
	    &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
		aud_vf_fail(&v, -1, "schema", "checkpoints unreadable: %s",
		    sqlite3_errmsg(v.db));
		goto out;
	}
	nck = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	st = NULL;
	if (nck > 10000000) {
		aud_vf_fail(&v, -1, "checkpoints", "implausible number of "
		    "checkpoints");
		goto out;
	}
	cap += nck;
	v.sizes = calloc(cap, sizeof(*v.sizes));
	v.roots = calloc(cap, sizeof(*v.roots));
	if (v.sizes == NULL || v.roots == NULL) {
		aud_vf_error(&v, "out of memory");
		goto out;
	}
	if (sqlite3_prepare_v2(v.db, "SELECT size FROM checkpoints", -1, &st,
	    NULL) != SQLITE_OK) {
		aud_vf_fail(&v, -1, "schema", "checkpoints unreadable");
		goto out;
	}
	while (sqlite3_step(st) == SQLITE_ROW)
		if (sqlite3_column_type(st, 0) == SQLITE_INTEGER &&
		    sqlite3_column_int64(st, 0) > 0)
			want_size(&v, (uint64_t)sqlite3_column_int64(st, 0), cap);
	sqlite3_finalize(st);
	st = NULL;
	for (i = 0; i < o->next_ckpts; i++) {
		if (aud_ckpt_parse(o->ext_ckpts[i], strlen(o->ext_ckpts[i]),
		    NULL, 0, &ck, e, sizeof(e)) == -1) {
			aud_vf_error(&v, "external checkpoint %zu: %s", i + 1,
			    e);
			goto out;
		}
		want_size(&v, ck.size, cap);
	}
	qsort(v.sizes, v.nsizes, sizeof(*v.sizes), cmpu64);

	/* 1-3. records and tree */
	n = aud_vf_scan(&v);
	json_object_set_new(v.rep, "size", json_integer((json_int_t)n));
	if (v.failed || v.error)
		goto out;

	/* 4. stored checkpoints, 5. external checkpoints */
	keys = v.npinned ? v.pinned : v.declared;
	nkeys = v.npinned ? v.npinned : v.ndeclared;
	if (aud_vf_stored_ckpts(&v, n, nck, keys, nkeys, &last_signed,
	    &local_ok) == -1 ||
	    aud_vf_external(&v, o, n, keys, nkeys, &ext_ok) == -1)
		goto out;

	/* 6. unsealed tail */
	json_object_set_new(v.rep, "unsealed_tail",
	    json_integer((json_int_t)(n - last_signed)));
	if (n > last_signed)
		aud_vf_warn(&v, "%llu records not covered by a signed "
		    "checkpoint", (unsigned long long)(n - last_signed));

	/* 7. gaps */
	for (u = 0, i = 0; i < json_array_size(v.gaps); i++)
		u += (uint64_t)json_integer_value(json_object_get(
		    json_array_get(v.gaps, i), "lost"));
	if (json_array_size(v.gaps) > 0)
		aud_vf_warn(&v, "%zu log.gap record(s), %llu events lost",
		    json_array_size(v.gaps), (unsigned long long)u);
out:
	sqlite3_finalize(st);
	json_object_set_new(v.rep, "gaps", v.gaps);
	if (v.error)
		code = AUD_ERROR;
	else if (v.failed)
		code = AUD_TAMPERED;
	else if (json_array_size(v.warnings) > 0)
		code = AUD_WARNINGS;
	else
		code = AUD_VERIFIED;
	json_object_set_new(v.rep, "result", json_string(
	    code == AUD_ERROR ? "error" : code == AUD_TAMPERED ? "tampered" :
	    code == AUD_WARNINGS ? "verified_with_warnings" : "verified"));
	json_object_set_new(v.rep, "assurance", json_string(
	    code != AUD_VERIFIED && code != AUD_WARNINGS ? "none" :
	    ext_ok ? "external" : local_ok ? "local-key" : "none"));
	if (json_object_get(v.rep, "size") == NULL)
		json_object_set_new(v.rep, "size", json_integer((json_int_t)n));
	if (v.db != NULL) {
		sqlite3_exec(v.db, "ROLLBACK", NULL, NULL, NULL);
		sqlite3_close(v.db);
	}
	json_decref(v.checks);
	json_decref(v.warnings);
	for (i = 0; i < v.npinned; i++)
		aud_key_free(v.pinned[i]);
	for (i = 0; i < v.ndeclared; i++)
		aud_key_free(v.declared[i]);
	free(v.sizes);
	free(v.roots);
	return code;
}
