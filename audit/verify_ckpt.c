/*
 * verify_ckpt: steps 4 and 5 of `audit verify`, the signed checkpoints --
 * stored ones, and those an external party holds -- against the roots the
 * scan computed. These are what give the verdict its assurance: a
 * checkpoint signed with a pinned key, and above all one held outside the
 * host, is what a local root cannot rewrite.
 */
#include <stdio.h>
#include <string.h>

#include "audit/verify.h"

const uint8_t *
aud_vf_root_for(struct aud_vctx *v, uint64_t size)
{
	size_t i;

	for (i = 0; i < v->nsizes; i++)
		if (v->sizes[i] == size)
			return v->roots[i];
	return NULL;
}

/* A key retired at last_seq may not vouch alone for later records. */
static int
signer_valid(struct aud_vctx *v, const struct aud_ckpt *ck)
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

/*
 * Step 4. Every stored checkpoint must be of this log, no larger than it,
 * match the root of its prefix and, when keys are known, be signed by one
 * that was not retired before it.
 */
int
aud_vf_stored_ckpts(struct aud_vctx *v, uint64_t n, uint64_t nck,
    struct aud_key **keys, size_t nkeys, uint64_t *last_signed, int *local_ok)
{
	struct aud_ckpt ck;
	sqlite3_stmt *st;
	const uint8_t *r;
	char e[256];
	int rc;

	if (sqlite3_prepare_v2(v->db, "SELECT size, note FROM checkpoints "
	    "ORDER BY size", -1, &st, NULL) != SQLITE_OK) {
		aud_vf_fail(v, -1, "schema", "checkpoints unreadable");
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		sqlite3_int64 sz = sqlite3_column_int64(st, 0);
		int len = sqlite3_column_bytes(st, 1);
		const char *note = sqlite3_column_blob(st, 1);

		if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || sz <= 0 ||
		    note == NULL || len <= 0) {
			aud_vf_fail(v, -1, "checkpoint", "malformed checkpoint "
			    "row");
			break;
		}
		if (aud_ckpt_parse(note, (size_t)len, keys, nkeys, &ck, e,
		    sizeof(e)) == -1) {
			aud_vf_fail(v, (int64_t)sz - 1, "checkpoint",
			    "checkpoint %lld: %s", (long long)sz, e);
			break;
		}
		if (strcmp(ck.origin, v->origin) != 0 ||
		    ck.size != (uint64_t)sz) {
			aud_vf_fail(v, sz - 1, "checkpoint", "checkpoint %lld: "
			    "origin or size differ from its row",
			    (long long)sz);
			break;
		}
		if (ck.size > n) {
			aud_vf_fail(v, (int64_t)n, "TRUNCATION", "stored "
			    "checkpoint covers %llu records, the log has %llu: "
			    "%llu missing", (unsigned long long)ck.size,
			    (unsigned long long)n,
			    (unsigned long long)(ck.size - n));
			break;
		}
		r = aud_vf_root_for(v, ck.size);
		if (r == NULL || memcmp(r, ck.root, AUD_HASH_LEN) != 0) {
			aud_vf_fail(v, (int64_t)ck.size - 1, "checkpoint",
			    "checkpoint %llu: root differs from the records",
			    (unsigned long long)ck.size);
			break;
		}
		if (nkeys > 0 && !signer_valid(v, &ck)) {
			aud_vf_fail(v, (int64_t)ck.size - 1, "checkpoint",
			    "checkpoint %llu signed only by a retired key",
			    (unsigned long long)ck.size);
			break;
		}
		if (nkeys > 0)
			*last_signed = ck.size;
		if (v->npinned > 0)
			*local_ok = 1;
	}
	sqlite3_finalize(st);
	if (v->failed)
		return -1;
	if (nkeys == 0 && nck > 0)
		aud_vf_warn(v, "no verifier key: %llu checkpoint(s) not "
		    "signature-checked", (unsigned long long)nck);
	else if (v->npinned == 0 && nck > 0)
		aud_vf_warn(v, "checkpoints checked only against keys the log "
		    "declares itself (pin one with --key)");
	aud_vf_ok(v, "checkpoints", "stored checkpoints match the tree");
	return 0;
}

/*
 * Step 5. An external checkpoint larger than the log shows truncation, one
 * whose root differs a fork; one that cannot be read is an error, not a
 * verdict on the log.
 */
int
aud_vf_external(struct aud_vctx *v, const struct aud_verify_opts *o,
    uint64_t n, struct aud_key **keys, size_t nkeys, int *ext_ok)
{
	struct aud_ckpt ck;
	const uint8_t *r;
	char e[256];
	size_t i;

	for (i = 0; i < o->next_ckpts; i++) {
		if (aud_ckpt_parse(o->ext_ckpts[i], strlen(o->ext_ckpts[i]),
		    keys, nkeys, &ck, e, sizeof(e)) == -1) {
			aud_vf_error(v, "external checkpoint %zu: %s", i + 1,
			    e);
			return -1;
		}
		if (strcmp(ck.origin, v->origin) != 0) {
			aud_vf_error(v, "external checkpoint %zu is for origin "
			    "%s", i + 1, ck.origin);
			return -1;
		}
		if (ck.size > n) {
			aud_vf_fail(v, (int64_t)n, "TRUNCATION", "external "
			    "checkpoint covers %llu records, the log has %llu: "
			    "%llu missing", (unsigned long long)ck.size,
			    (unsigned long long)n,
			    (unsigned long long)(ck.size - n));
			json_object_set_new(v->rep, "missing",
			    json_integer((json_int_t)(ck.size - n)));
			return -1;
		}
		r = aud_vf_root_for(v, ck.size);
		if (ck.size > 0 && (r == NULL ||
		    memcmp(r, ck.root, AUD_HASH_LEN) != 0)) {
			aud_vf_fail(v, (int64_t)ck.size - 1, "FORK", "external "
			    "checkpoint %llu: root differs, the log was "
			    "rewritten", (unsigned long long)ck.size);
			return -1;
		}
		if (nkeys > 0)
			*ext_ok = 1;
	}
	if (o->next_ckpts > 0)
		aud_vf_ok(v, "external", "external checkpoints are prefixes");
	else
		aud_vf_warn(v, "no external checkpoint given: truncation of "
		    "the unshipped tail cannot be detected");
	return 0;
}
