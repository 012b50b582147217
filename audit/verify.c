/*
 * verify: the offline check of a log database (reference/audit.md §3.8) and
 * per-record proofs for reviewers. The verifier trusts nothing but `canon`,
 * the keys it is given and external checkpoints: it re-derives every hash,
 * link, index column and tree node, checks every stored checkpoint, and says
 * how much assurance the result carries. It opens the DB read-only inside one
 * read transaction, which is safe beside a running writer in WAL mode, and a
 * hostile file (wrong schema, types, sizes, bytes) yields a verdict, never a
 * crash.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/priv.h"

#define MAXKEYS	32

struct vctx {
	sqlite3		*db;
	json_t		*rep, *checks, *warnings, *gaps;
	int		 failed, error;
	char		 origin[256];
	struct aud_key	*pinned[MAXKEYS], *declared[MAXKEYS];
	size_t		 npinned, ndeclared;
	uint64_t	 retire_last[MAXKEYS];	/* per declared key */
	int		 retired[MAXKEYS];
	/* Roots wanted at these sizes (stored and external checkpoints). */
	uint64_t	*sizes;
	uint8_t		(*roots)[AUD_HASH_LEN];
	size_t		 nsizes, nextsz;
	sqlite3_stmt	*node_st;
	int		 node_bad;
	uint64_t	 node_bad_level, node_bad_idx, nodes_made;
};

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

static void
check_ok(struct vctx *v, const char *name, const char *detail)
{
	json_array_append_new(v->checks, json_pack("{s:s,s:b,s:s}", "check",
	    name, "ok", 1, "detail", detail ? detail : ""));
}

static void
fail(struct vctx *v, int64_t seq, const char *check, const char *fmt, ...)
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

static void
error(struct vctx *v, const char *fmt, ...)
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

static void
warn(struct vctx *v, const char *fmt, ...)
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
want_size(struct vctx *v, uint64_t s, size_t cap)
{
	if (v->nsizes < cap)
		v->sizes[v->nsizes++] = s;
}

static void
node_check(void *arg, unsigned level, uint64_t idx,
    const uint8_t h[AUD_HASH_LEN])
{
	struct vctx *v = arg;
	int ok;

	v->nodes_made++;
	if (v->node_bad)
		return;
	sqlite3_reset(v->node_st);
	sqlite3_bind_int(v->node_st, 1, (int)level);
	sqlite3_bind_int64(v->node_st, 2, (sqlite3_int64)idx);
	ok = sqlite3_step(v->node_st) == SQLITE_ROW &&
	    sqlite3_column_type(v->node_st, 0) == SQLITE_BLOB &&
	    sqlite3_column_bytes(v->node_st, 0) == AUD_HASH_LEN &&
	    memcmp(sqlite3_column_blob(v->node_st, 0), h, AUD_HASH_LEN) == 0;
	if (!ok) {
		v->node_bad = 1;
		v->node_bad_level = level;
		v->node_bad_idx = idx;
	}
}

static int
col_text_eq(sqlite3_stmt *st, int i, const char *want)
{
	const unsigned char *t;

	if (want == NULL)
		return sqlite3_column_type(st, i) == SQLITE_NULL;
	if (sqlite3_column_type(st, i) != SQLITE_TEXT)
		return 0;
	t = sqlite3_column_text(st, i);
	return t != NULL && strcmp((const char *)t, want) == 0 &&
	    (size_t)sqlite3_column_bytes(st, i) == strlen(want);
}

static int
col_int_eq(sqlite3_stmt *st, int i, int has, long long want)
{
	if (!has)
		return sqlite3_column_type(st, i) == SQLITE_NULL;
	return sqlite3_column_type(st, i) == SQLITE_INTEGER &&
	    sqlite3_column_int64(st, i) == want;
}

static void
note_keys(struct vctx *v, const json_t *rec, const char *kind, uint64_t seq)
{
	const char *vk = NULL, *rt;
	struct aud_key *k;
	json_t *ls;
	size_t i;

	if (strcmp(kind, "log.open") == 0 || strcmp(kind, "log.key") == 0) {
		vk = json_string_value(json_object_get(rec,
		    strcmp(kind, "log.open") == 0 ? "vkey" : "add"));
		if (vk != NULL && v->ndeclared < MAXKEYS &&
		    (k = aud_key_from_vkey(vk, NULL, 0)) != NULL) {
			for (i = 0; i < v->ndeclared; i++)
				if (aud_key_id(v->declared[i]) == aud_key_id(k))
					break;
			if (i == v->ndeclared)
				v->declared[v->ndeclared++] = k;
			else
				aud_key_free(k);
		}
	}
	if (strcmp(kind, "log.key") == 0 &&
	    (rt = json_string_value(json_object_get(rec, "retire"))) != NULL &&
	    (k = aud_key_from_vkey(rt, NULL, 0)) != NULL) {
		ls = json_object_get(rec, "last_seq");
		for (i = 0; i < v->ndeclared; i++)
			if (aud_key_id(v->declared[i]) == aud_key_id(k)) {
				v->retired[i] = 1;
				v->retire_last[i] = json_is_integer(ls) ?
				    (uint64_t)json_integer_value(ls) : seq;
			}
		aud_key_free(k);
	}
}

/* Steps 1-3: contiguity, every record, the tree. Returns records seen. */
static uint64_t
scan_records(struct vctx *v)
{
	sqlite3_stmt *st = NULL;
	struct aud_tree *t;
	struct aud_cols c;
	uint8_t prev[AUD_HASH_LEN], h[AUD_HASH_LEN], leaf[AUD_HASH_LEN];
	char phex[2 * AUD_HASH_LEN + 1], perr[256];
	const char *kind;
	json_t *rec, *x;
	uint64_t n = 0, lost;
	sqlite3_int64 seq;
	int64_t tsns = 0, monons = 0;
	const void *canon;
	int len, rc;

	memset(prev, 0, sizeof(prev));
	if (sqlite3_prepare_v2(v->db, "SELECT seq, ts_ns, kind, canon, "
	    "rec_hash, decision, sandbox, dst_host, dst_ip, dst_port, rule_id, "
	    "mcp_server, mcp_tool FROM records ORDER BY seq", -1, &st, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(v->db, "SELECT hash FROM merkle_nodes WHERE "
	    "level = ? AND idx = ?", -1, &v->node_st, NULL) != SQLITE_OK) {
		fail(v, -1, "schema", "records/merkle_nodes unreadable: %s",
		    sqlite3_errmsg(v->db));
		sqlite3_finalize(st);
		sqlite3_finalize(v->node_st);
		v->node_st = NULL;
		return 0;
	}
	if ((t = aud_tree_new()) == NULL) {
		sqlite3_finalize(st);
		error(v, "out of memory");
		return 0;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (sqlite3_column_type(st, 0) != SQLITE_INTEGER) {
			fail(v, (int64_t)n, "contiguity", "seq is not an integer");
			break;
		}
		seq = sqlite3_column_int64(st, 0);
		if (seq != (sqlite3_int64)n) {
			if (seq > (sqlite3_int64)n)
				fail(v, (int64_t)n, "contiguity", "records %llu"
				    "..%lld missing (gap)", (unsigned long long)n,
				    (long long)seq - 1);
			else
				fail(v, (int64_t)seq, "contiguity",
				    "seq %lld out of order", (long long)seq);
			break;
		}
		len = sqlite3_column_bytes(st, 3);
		canon = sqlite3_column_blob(st, 3);
		if ((sqlite3_column_type(st, 3) != SQLITE_BLOB &&
		    sqlite3_column_type(st, 3) != SQLITE_TEXT) ||
		    len <= 0 || len > AUD_MAX_RECORD || canon == NULL) {
			fail(v, seq, "canonical", "canon missing, of the wrong "
			    "type or larger than %d bytes", AUD_MAX_RECORD);
			break;
		}
		if ((rec = aud_canon_parse(canon, (size_t)len, perr,
		    sizeof(perr))) == NULL) {
			fail(v, seq, "canonical", "%s", perr);
			break;
		}
		aud_sha256(canon, (size_t)len, h);
		if (sqlite3_column_type(st, 4) != SQLITE_BLOB ||
		    sqlite3_column_bytes(st, 4) != AUD_HASH_LEN ||
		    memcmp(sqlite3_column_blob(st, 4), h, AUD_HASH_LEN) != 0) {
			json_decref(rec);
			fail(v, seq, "rec_hash", "rec_hash != SHA-256(canon)");
			break;
		}
		aud_hex(prev, AUD_HASH_LEN, phex);
		kind = json_string_value(json_object_get(rec, "kind"));
		x = json_object_get(rec, "seq");
		if (!json_is_integer(json_object_get(rec, "v")) ||
		    json_integer_value(json_object_get(rec, "v")) != 1) {
			fail(v, seq, "record", "v is not 1");
		} else if (!json_is_integer(x) || json_integer_value(x) != seq) {
			fail(v, seq, "record", "canon.seq != seq");
		} else if (!json_is_string(json_object_get(rec, "origin")) ||
		    strcmp(json_string_value(json_object_get(rec, "origin")),
		    v->origin) != 0) {
			fail(v, seq, "record", "canon.origin != log origin");
		} else if (!json_is_string(json_object_get(rec, "prev")) ||
		    strcmp(json_string_value(json_object_get(rec, "prev")),
		    phex) != 0) {
			fail(v, seq, "prev", "prev does not link to record %lld",
			    (long long)seq - 1);
		} else if (!aud_kind_valid(kind)) {
			fail(v, seq, "record", "unknown kind");
		} else if (aud_ns_parse(json_object_get(rec, "ts"), &tsns) ||
		    aud_ns_parse(json_object_get(rec, "mono"), &monons)) {
			fail(v, seq, "record", "ts or mono missing or malformed");
		}
		if (v->failed) {
			json_decref(rec);
			break;
		}
		aud_cols_from(rec, &c);
		if (!col_int_eq(st, 1, 1, tsns) ||
		    !col_int_eq(st, 2, 1, c.kind) ||
		    !col_int_eq(st, 5, c.decision != 0, c.decision) ||
		    !col_text_eq(st, 6, c.sandbox) ||
		    !col_text_eq(st, 7, c.dst_host) ||
		    !col_text_eq(st, 8, c.dst_ip) ||
		    !col_int_eq(st, 9, c.has_port, c.dst_port) ||
		    !col_text_eq(st, 10, c.rule_id) ||
		    !col_text_eq(st, 11, c.mcp_server) ||
		    !col_text_eq(st, 12, c.mcp_tool)) {
			json_decref(rec);
			fail(v, seq, "index", "index column mismatch");
			break;
		}
		note_keys(v, rec, kind, (uint64_t)seq);
		if (strcmp(kind, "log.gap") == 0) {
			x = json_object_get(rec, "lost");
			lost = json_is_integer(x) && json_integer_value(x) > 0 ?
			    (uint64_t)json_integer_value(x) : 0;
			json_array_append_new(v->gaps, json_pack("{s:I,s:o,s:I}",
			    "seq", (json_int_t)seq, "reason",
			    json_incref(json_object_get(rec, "reason")) ?
			    json_object_get(rec, "reason") : json_null(),
			    "lost", (json_int_t)lost));
		}
		json_decref(rec);
		aud_leaf_hash(h, AUD_HASH_LEN, leaf);
		aud_tree_append(t, leaf, node_check, v);
		if (v->node_bad) {
			fail(v, seq, "merkle", "merkle_nodes (%llu,%llu) missing "
			    "or wrong", (unsigned long long)v->node_bad_level,
			    (unsigned long long)v->node_bad_idx);
			break;
		}
		memcpy(prev, h, AUD_HASH_LEN);
		n++;
		while (v->nextsz < v->nsizes && v->sizes[v->nextsz] <= n) {
			if (v->sizes[v->nextsz] == n)
				aud_tree_root(t, v->roots[v->nextsz]);
			v->nextsz++;
		}
	}
	if (!v->failed && rc != SQLITE_DONE && rc != SQLITE_ROW)
		fail(v, (int64_t)n, "schema", "reading records: %s",
		    sqlite3_errmsg(v->db));
	sqlite3_finalize(st);
	if (!v->failed) {
		sqlite3_stmt *cs;

		/* Nodes the records do not produce are forged or stale. */
		if (sqlite3_prepare_v2(v->db, "SELECT count(*) FROM "
		    "merkle_nodes", -1, &cs, NULL) == SQLITE_OK &&
		    sqlite3_step(cs) == SQLITE_ROW &&
		    (uint64_t)sqlite3_column_int64(cs, 0) != v->nodes_made)
			fail(v, -1, "merkle", "merkle_nodes has %lld rows, the "
			    "records make %llu",
			    (long long)sqlite3_column_int64(cs, 0),
			    (unsigned long long)v->nodes_made);
		sqlite3_finalize(cs);
	}
	if (!v->failed) {
		char rh[2 * AUD_HASH_LEN + 1];
		uint8_t root[AUD_HASH_LEN];

		aud_tree_root(t, root);
		aud_hex(root, AUD_HASH_LEN, rh);
		json_object_set_new(v->rep, "root", json_string(rh));
		check_ok(v, "records", "contiguous, canonical, hashed, linked");
		check_ok(v, "merkle", "every stored node recomputed");
	}
	aud_tree_free(t);
	sqlite3_finalize(v->node_st);
	v->node_st = NULL;
	return n;
}

static const uint8_t *
root_for(struct vctx *v, uint64_t size)
{
	size_t i;

	for (i = 0; i < v->nsizes; i++)
		if (v->sizes[i] == size)
			return v->roots[i];
	return NULL;
}

/* A key retired at last_seq may not vouch alone for later records. */
static int
signer_valid(struct vctx *v, const struct aud_ckpt *ck)
{
	int i;
	size_t j;

	for (i = 0; i < ck->nverified && i < 16; i++) {
		for (j = 0; j < v->ndeclared; j++)
			if (aud_key_id(v->declared[j]) == ck->signer_ids[i])
				break;
		if (j == v->ndeclared || !v->retired[j] ||
		    ck->size <= v->retire_last[j] + 1)
			return 1;
	}
	return 0;
}

int
aud_verify(const struct aud_verify_opts *o, json_t **report)
{
	struct vctx v;
	struct aud_ckpt ck;
	struct aud_key **keys;
	sqlite3_stmt *st = NULL;
	char meta[256], e[256], uri[4200];
	uint64_t n = 0, last_signed = 0, nck = 0, cap, u;
	size_t i, nkeys;
	const uint8_t *r;
	int rc, ext_ok = 0, local_ok = 0, code;

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

	for (i = 0; i < o->nvkeys && v.npinned < MAXKEYS; i++) {
		if ((v.pinned[v.npinned] = aud_key_from_vkey(o->vkeys[i], e,
		    sizeof(e))) == NULL) {
			error(&v, "--key: %s", e);
			goto out;
		}
		v.npinned++;
	}
	/* A URI keeps SQLite from creating a missing file. */
	if (o->db_path == NULL || strlen(o->db_path) > 4000) {
		error(&v, "no database");
		goto out;
	}
	snprintf(uri, sizeof(uri), "%s", o->db_path);
	if (aud_store_open(uri, 0, &v.db, e, sizeof(e)) == -1) {
		error(&v, "%s", e);
		goto out;
	}
	if (sqlite3_exec(v.db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(v.db, "SELECT count(*) FROM sqlite_master", -1,
	    &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
		error(&v, "%s: not a readable SQLite database: %s", o->db_path,
		    sqlite3_errmsg(v.db));
		goto out;
	}
	sqlite3_finalize(st);
	st = NULL;

	/* 1. log_meta */
	if (aud_store_meta(v.db, "format", meta, sizeof(meta)) == -1 ||
	    strcmp(meta, AUD_FORMAT) != 0) {
		fail(&v, -1, "meta", "log_meta.format is not %s", AUD_FORMAT);
		goto out;
	}
	if (aud_store_meta(v.db, "origin", v.origin, sizeof(v.origin)) == -1 ||
	    v.origin[0] == '\0') {
		fail(&v, -1, "meta", "log_meta.origin missing");
		goto out;
	}
	json_object_set_new(v.rep, "origin", json_string(v.origin));
	check_ok(&v, "meta", v.origin);

	/* Sizes whose roots steps 4 and 5 need, gathered before the scan. */
	cap = 1 + o->next_ckpts;
	if (sqlite3_prepare_v2(v.db, "SELECT count(*) FROM checkpoints", -1,
	    &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
		fail(&v, -1, "schema", "checkpoints unreadable: %s",
		    sqlite3_errmsg(v.db));
		goto out;
	}
	nck = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	st = NULL;
	if (nck > 10000000) {
		fail(&v, -1, "checkpoints", "implausible number of checkpoints");
		goto out;
	}
	cap += nck;
	v.sizes = calloc(cap, sizeof(*v.sizes));
	v.roots = calloc(cap, sizeof(*v.roots));
	if (v.sizes == NULL || v.roots == NULL) {
		error(&v, "out of memory");
		goto out;
	}
	if (sqlite3_prepare_v2(v.db, "SELECT size FROM checkpoints", -1, &st,
	    NULL) != SQLITE_OK) {
		fail(&v, -1, "schema", "checkpoints unreadable");
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
			error(&v, "external checkpoint %zu: %s", i + 1, e);
			goto out;
		}
		want_size(&v, ck.size, cap);
	}
	qsort(v.sizes, v.nsizes, sizeof(*v.sizes), cmpu64);

	/* 1-3. records and tree */
	n = scan_records(&v);
	json_object_set_new(v.rep, "size", json_integer((json_int_t)n));
	if (v.failed || v.error)
		goto out;

	/* 4. stored checkpoints */
	keys = v.npinned ? v.pinned : v.declared;
	nkeys = v.npinned ? v.npinned : v.ndeclared;
	if (sqlite3_prepare_v2(v.db, "SELECT size, note FROM checkpoints "
	    "ORDER BY size", -1, &st, NULL) != SQLITE_OK) {
		fail(&v, -1, "schema", "checkpoints unreadable");
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		sqlite3_int64 sz = sqlite3_column_int64(st, 0);
		int len = sqlite3_column_bytes(st, 1);
		const char *note = sqlite3_column_blob(st, 1);

		if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || sz <= 0 ||
		    note == NULL || len <= 0) {
			fail(&v, -1, "checkpoint", "malformed checkpoint row");
			break;
		}
		if (aud_ckpt_parse(note, (size_t)len, keys, nkeys, &ck, e,
		    sizeof(e)) == -1) {
			fail(&v, (int64_t)sz - 1, "checkpoint", "checkpoint %lld: "
			    "%s", (long long)sz, e);
			break;
		}
		if (strcmp(ck.origin, v.origin) != 0 ||
		    ck.size != (uint64_t)sz) {
			fail(&v, sz - 1, "checkpoint", "checkpoint %lld: origin "
			    "or size differ from its row", (long long)sz);
			break;
		}
		if (ck.size > n) {
			fail(&v, (int64_t)n, "TRUNCATION", "stored checkpoint "
			    "covers %llu records, the log has %llu: %llu "
			    "missing", (unsigned long long)ck.size,
			    (unsigned long long)n,
			    (unsigned long long)(ck.size - n));
			break;
		}
		r = root_for(&v, ck.size);
		if (r == NULL || memcmp(r, ck.root, AUD_HASH_LEN) != 0) {
			fail(&v, (int64_t)ck.size - 1, "checkpoint",
			    "checkpoint %llu: root differs from the records",
			    (unsigned long long)ck.size);
			break;
		}
		if (nkeys > 0 && !signer_valid(&v, &ck)) {
			fail(&v, (int64_t)ck.size - 1, "checkpoint",
			    "checkpoint %llu signed only by a retired key",
			    (unsigned long long)ck.size);
			break;
		}
		if (nkeys > 0)
			last_signed = ck.size;
		if (v.npinned > 0)
			local_ok = 1;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (v.failed)
		goto out;
	if (nkeys == 0 && nck > 0)
		warn(&v, "no verifier key: %llu checkpoint(s) not "
		    "signature-checked", (unsigned long long)nck);
	else if (v.npinned == 0 && nck > 0)
		warn(&v, "checkpoints checked only against keys the log "
		    "declares itself (pin one with --key)");
	check_ok(&v, "checkpoints", "stored checkpoints match the tree");

	/* 5. external checkpoints */
	for (i = 0; i < o->next_ckpts; i++) {
		if (aud_ckpt_parse(o->ext_ckpts[i], strlen(o->ext_ckpts[i]),
		    keys, nkeys, &ck, e, sizeof(e)) == -1) {
			error(&v, "external checkpoint %zu: %s", i + 1, e);
			goto out;
		}
		if (strcmp(ck.origin, v.origin) != 0) {
			error(&v, "external checkpoint %zu is for origin %s",
			    i + 1, ck.origin);
			goto out;
		}
		if (ck.size > n) {
			fail(&v, (int64_t)n, "TRUNCATION", "external checkpoint "
			    "covers %llu records, the log has %llu: %llu "
			    "missing", (unsigned long long)ck.size,
			    (unsigned long long)n,
			    (unsigned long long)(ck.size - n));
			json_object_set_new(v.rep, "missing",
			    json_integer((json_int_t)(ck.size - n)));
			goto out;
		}
		r = root_for(&v, ck.size);
		if (ck.size > 0 && (r == NULL ||
		    memcmp(r, ck.root, AUD_HASH_LEN) != 0)) {
			fail(&v, (int64_t)ck.size - 1, "FORK", "external "
			    "checkpoint %llu: root differs, the log was "
			    "rewritten", (unsigned long long)ck.size);
			goto out;
		}
		if (nkeys > 0)
			ext_ok = 1;
	}
	if (o->next_ckpts > 0)
		check_ok(&v, "external", "external checkpoints are prefixes");
	else
		warn(&v, "no external checkpoint given: truncation of the "
		    "unshipped tail cannot be detected");

	/* 6. unsealed tail */
	json_object_set_new(v.rep, "unsealed_tail",
	    json_integer((json_int_t)(n - last_signed)));
	if (n > last_signed)
		warn(&v, "%llu records not covered by a signed checkpoint",
		    (unsigned long long)(n - last_signed));

	/* 7. gaps */
	for (u = 0, i = 0; i < json_array_size(v.gaps); i++)
		u += (uint64_t)json_integer_value(json_object_get(
		    json_array_get(v.gaps, i), "lost"));
	if (json_array_size(v.gaps) > 0)
		warn(&v, "%zu log.gap record(s), %llu events lost",
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

/* ---- proofs ---- */

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
