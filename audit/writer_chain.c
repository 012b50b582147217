/*
 * writer_chain: what the writer thread appends for each record -- its
 * canonical bytes, built by merging the producer's members with the common
 * fields; its hash, linked to the previous one; its Merkle tree nodes -- and
 * the signed checkpoint over the tree after a commit. Kept apart from the
 * thread's batching and locking (writer.c) because this is the part whose
 * output is evidence: byte for byte what the verifier re-derives.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit/writer.h"

static void
node_cb(void *arg, unsigned level, uint64_t idx, const uint8_t h[AUD_HASH_LEN])
{
	struct aud_log *l = arg;

	sqlite3_reset(l->ins_node);
	sqlite3_bind_int(l->ins_node, 1, (int)level);
	sqlite3_bind_int64(l->ins_node, 2, (sqlite3_int64)idx);
	sqlite3_bind_blob(l->ins_node, 3, h, AUD_HASH_LEN, SQLITE_STATIC);
	if (sqlite3_step(l->ins_node) != SQLITE_DONE)
		l->node_err = 1;
}

static void
bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s != NULL)
		sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

/* Compares the key of the member at s ('"key":...') with a C string. */
static int
memberkeycmp(const char *s, const char *want)
{
	for (s++; *s != '"' && *want != '\0' && *s == *want; s++, want++)
		;
	if (*s == '"')
		return *want == '\0' ? 0 : -1;
	if (*want == '\0')
		return 1;
	return (unsigned char)*s < (unsigned char)*want ? -1 : 1;
}

static char *
put_u64(char *p, uint64_t v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (n > 0)
		*p++ = tmp[--n];
	return p;
}

/* The common fields in bytewise key order (the canonical order). */
enum { R_KIND, R_MONO, R_ORIGIN, R_PREV, R_SEQ, R_TS, R_V, R_N };
static const char *const rnames[R_N] = {
	"kind", "mono", "origin", "prev", "seq", "ts", "v"
};

/*
 * Writes the record's canonical bytes into l->out: the producer's members
 * (already canonical and sorted) merged with the common fields. The result
 * is byte for byte what aud_canon_dump gives for the whole record, which
 * check_audit_perf asserts.
 */
static int
build_record(struct aud_log *l, const char *kind, const struct aud_wr_fbytes *m,
    int64_t ts, int64_t mono, size_t *lenp)
{
	size_t need, fi = 0, ri = 0, e;
	char *p, *np;
	int first = 1, c;

	need = m->len + l->origin_jlen + strlen(kind) + 256;
	if (need > l->outcap) {
		if ((np = realloc(l->out, need)) == NULL)
			return -1;
		l->out = np;
		l->outcap = need;
	}
	if (l->next_seq > (uint64_t)AUD_INT_MAX) {
		errno = EOVERFLOW;
		return -1;
	}
	p = l->out;
	*p++ = '{';
	while (fi < m->n || ri < R_N) {
		c = fi >= m->n ? 1 : ri >= R_N ? -1 :
		    memberkeycmp(m->buf + m->start[fi], rnames[ri]);
		if (c == 0) {
			errno = EINVAL;
			return -1;
		}
		if (!first)
			*p++ = ',';
		first = 0;
		if (c < 0) {
			/* Up to the comma before the next member, or the
			 * closing brace. */
			e = fi + 1 < m->n ? m->start[fi + 1] - 1 : m->len - 1;
			memcpy(p, m->buf + m->start[fi], e - m->start[fi]);
			p += e - m->start[fi];
			fi++;
			continue;
		}
		switch (ri++) {
		case R_KIND:
			p += sprintf(p, "\"kind\":\"%s\"", kind);
			break;
		case R_MONO:
			memcpy(p, "\"mono\":\"", 8);
			p = put_u64(p + 8, mono < 0 ? 0 : (uint64_t)mono);
			*p++ = '"';
			break;
		case R_ORIGIN:
			memcpy(p, "\"origin\":", 9);
			memcpy(p + 9, l->origin_json, l->origin_jlen);
			p += 9 + l->origin_jlen;
			break;
		case R_PREV:
			memcpy(p, "\"prev\":\"", 8);
			aud_hex(l->prev, AUD_HASH_LEN, p + 8);
			p += 8 + 2 * AUD_HASH_LEN;
			*p++ = '"';
			break;
		case R_SEQ:
			memcpy(p, "\"seq\":", 6);
			p = put_u64(p + 6, l->next_seq);
			break;
		case R_TS:
			memcpy(p, "\"ts\":\"", 6);
			p = put_u64(p + 6, ts < 0 ? 0 : (uint64_t)ts);
			*p++ = '"';
			break;
		case R_V:
			memcpy(p, "\"v\":1", 5);
			p += 5;
			break;
		}
	}
	*p++ = '}';
	*p = '\0';
	*lenp = (size_t)(p - l->out);
	return 0;
}

/* Writes one record and its tree nodes. In a txn. */
int
aud_wr_append(struct aud_log *l, const char *kind,
    const struct aud_wr_fbytes *m, const struct aud_cols *c, int64_t ts,
    int64_t mono, uint64_t *seqp)
{
	uint8_t h[AUD_HASH_LEN], leaf[AUD_HASH_LEN];
	sqlite3_stmt *st = l->ins_rec;
	size_t len;

	if (build_record(l, kind, m, ts, mono, &len) == -1)
		return -1;
	aud_sha256(l->out, len, h);
	sqlite3_reset(st);
	/* Every parameter is bound on every row (NULLs included), so no
	 * clear_bindings; the buffers outlive the step. */
	sqlite3_bind_int64(st, 1, (sqlite3_int64)l->next_seq);
	sqlite3_bind_int64(st, 2, ts);
	sqlite3_bind_int(st, 3, c->kind);
	sqlite3_bind_blob(st, 4, l->out, (int)len, SQLITE_STATIC);
	sqlite3_bind_blob(st, 5, h, AUD_HASH_LEN, SQLITE_STATIC);
	if (c->decision)
		sqlite3_bind_int(st, 6, c->decision);
	else
		sqlite3_bind_null(st, 6);
	bind_text(st, 7, c->sandbox);
	bind_text(st, 8, c->dst_host);
	bind_text(st, 9, c->dst_ip);
	if (c->has_port)
		sqlite3_bind_int64(st, 10, c->dst_port);
	else
		sqlite3_bind_null(st, 10);
	bind_text(st, 11, c->rule_id);
	bind_text(st, 12, c->mcp_server);
	bind_text(st, 13, c->mcp_tool);
	if (sqlite3_step(st) != SQLITE_DONE) {
		sqlite3_reset(st);
		return -1;
	}
	sqlite3_reset(st);
	aud_leaf_hash(h, AUD_HASH_LEN, leaf);
	l->node_err = 0;
	if (aud_tree_append(l->tree, leaf, node_cb, l) == -1 || l->node_err)
		return -1;
	memcpy(l->prev, h, AUD_HASH_LEN);
	*seqp = l->next_seq++;
	return 0;
}

/* Signs the current tree. Called only after the FULL commit of its rows. */
void
aud_wr_checkpoint(struct aud_log *l)
{
	sqlite3_stmt *st;
	uint8_t root[AUD_HASH_LEN];
	char *body, *note;
	uint64_t size = aud_tree_size(l->tree);

	if (l->key == NULL || size == 0 || size <= l->last_ckpt_size)
		return;
	aud_tree_root(l->tree, root);
	if ((body = aud_ckpt_body(l->origin, size, root)) == NULL)
		return;
	note = aud_note_sign(l->key, body, NULL, 0);
	free(body);
	if (note == NULL)
		return;
	st = l->ins_ckpt;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, (sqlite3_int64)size);
	sqlite3_bind_blob(st, 2, note, (int)strlen(note), SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, aud_wr_now_ns(CLOCK_REALTIME));
	if (sqlite3_step(st) == SQLITE_DONE) {
		l->last_ckpt_size = size;
		l->last_ckpt_mono = aud_wr_now_ns(CLOCK_MONOTONIC);
	}
	sqlite3_reset(st);
	free(note);
}

int
aud_wr_gap(struct aud_log *l, const char *reason, uint64_t lost, int64_t from,
    int64_t to)
{
	struct aud_members *m;
	struct aud_wr_fbytes fb;
	struct aud_cols c;
	uint64_t seq;
	json_t *gap;
	int rc = -1;

	/* Rare: the writer may build this one from a tree itself. */
	gap = json_pack("{s:s,s:I,s:o,s:o}", "reason", reason, "lost",
	    (json_int_t)lost, "from_ts", aud_ns_json(from), "to_ts",
	    aud_ns_json(to));
	if ((m = malloc(sizeof(*m))) != NULL && gap != NULL &&
	    aud_canon_members(gap, m, NULL, 0) == 0) {
		aud_cols_from(gap, &c);
		c.kind = aud_kind_code("log.gap");
		fb.buf = m->buf;
		fb.len = m->len;
		fb.n = m->n;
		fb.start = m->start;
		rc = aud_wr_append(l, "log.gap", &fb, &c, to,
		    aud_wr_now_ns(CLOCK_MONOTONIC), &seq);
		aud_members_free(m);
	}
	free(m);
	json_decref(gap);
	return rc;
}

