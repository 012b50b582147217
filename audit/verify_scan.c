/*
 * verify_scan: steps 1-3 of `audit verify`, the scan of every record and
 * every stored tree node. It is the verifier's cost -- a log written at
 * full speed for hours is millions of rows -- so it runs as a two-stage
 * pipeline (below) and checks canonical form without building trees; it is
 * also the part that must never trust the file, whatever its rows hold.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/verify.h"


static void
close_levels(struct aud_vctx *v)
{
	size_t i;

	for (i = 0; i < 64; i++) {
		sqlite3_finalize(v->lvl_st[i]);
		v->lvl_st[i] = NULL;
	}
}

/* The members verify reads, in bytewise order (the canonical order). */
enum {
	K_DECISION, K_DST, K_KIND, K_MONO, K_ORIGIN, K_POLICY, K_PREV,
	K_SANDBOX, K_SEQ, K_SERVER, K_TOOL, K_TS, K_V, K_N
};
static const char *const knames[K_N] = {
	"decision", "dst", "kind", "mono", "origin", "policy", "prev",
	"sandbox", "seq", "server", "tool", "ts", "v"
};
static const size_t klens[K_N] = { 8, 3, 4, 4, 6, 6, 4, 7, 3, 6, 4, 2, 1 };

/* One merge walk over the sorted members instead of a search per key. */
static void
pick(const struct aud_scan *sc, const struct aud_member *out[K_N])
{
	size_t i = 0, k = 0, l, j;
	int c;

	memset(out, 0, K_N * sizeof(out[0]));
	while (i < sc->n && k < K_N) {
		l = sc->m[i].klen < klens[k] ? sc->m[i].klen : klens[k];
		for (j = 0; j < l && sc->m[i].key[j] == knames[k][j]; j++)
			;
		c = j < l ? (unsigned char)sc->m[i].key[j] -
		    (unsigned char)knames[k][j] :
		    (sc->m[i].klen > klens[k]) - (sc->m[i].klen < klens[k]);
		if (c == 0)
			out[k++] = &sc->m[i++];
		else if (c < 0)
			i++;
		else
			k++;
	}
}

/* A member's string value (NULL if absent or not a string). */
static const char *
mstr(const struct aud_member *m, struct aud_strbuf *sb, size_t *n)
{
	const char *out;

	if (m == NULL || aud_cv_str(m->val, m->vlen, sb, &out, n) == -1)
		return NULL;
	return out;
}

/* The string at key inside a member holding an object. */
static const char *
mstr2(const struct aud_member *m, const char *key, struct aud_strbuf *sb,
    size_t *n)
{
	const char *val, *out;
	size_t vlen;

	if (m == NULL || aud_cv_member(m->val, m->vlen, key, &val,
	    &vlen) == -1 || aud_cv_str(val, vlen, sb, &out, n) == -1)
		return NULL;
	return out;
}

/* A member's integer value: 0, or -1 when absent or not an integer. */
static int
mint(const struct aud_member *m, long long *out)
{
	return m == NULL ? -1 : aud_cv_int(m->val, m->vlen, out);
}

static void
note_keys(struct aud_vctx *v, const json_t *rec, const char *kind, uint64_t seq)
{
	const char *vk = NULL, *rt;
	struct aud_key *k;
	json_t *ls;
	size_t i;

	if (strcmp(kind, "log.open") == 0 || strcmp(kind, "log.key") == 0) {
		vk = json_string_value(json_object_get(rec,
		    strcmp(kind, "log.open") == 0 ? "vkey" : "add"));
		if (vk != NULL && v->ndeclared < AUD_VF_MAXKEYS &&
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

/*
 * Steps 1-3 run as a two-stage pipeline on two threads, because one core
 * could not keep up with a log written at full speed. The reader (the
 * calling thread, which alone uses the SQLite handle) steps the rows in seq
 * order, checks contiguity and copies them into batches, together with the
 * stored merkle_nodes rows that those records must produce; the checker
 * checks canonical form, hashes canon against rec_hash, checks the common
 * fields, the prev link and the index columns, then extends the tree with
 * the record and compares every node it completes with the copied row.
 * Reading SQLite pages is the reader's whole job because it is the largest
 * cost; everything that hashes runs in the checker, so the two stages take
 * about the same time. Every check of the single-threaded verifier is still
 * made on every record; each stage stops at its first failure and the
 * verdict is the failure the sequential order would have met first: the
 * lowest seq, and within a record the order of the checks below.
 */
enum {
	R_CONTIG, R_CTYPE, R_CANON, R_HASH, R_FIELDS, R_INDEX, R_MERKLE,
	R_SCHEMA
};

struct vfail {
	int		 set;
	int		 rank;
	int64_t		 seq;		/* reported seq */
	uint64_t	 pos;		/* records that passed before it */
	char		 check[16];
	char		 detail[400];
};

static void
vf_set(struct vfail *f, int64_t seq, uint64_t pos, int rank,
    const char *check, const char *fmt, ...)
{
	va_list ap;

	if (f->set)
		return;
	f->set = 1;
	f->rank = rank;
	f->seq = seq;
	f->pos = pos;
	snprintf(f->check, sizeof(f->check), "%s", check);
	va_start(ap, fmt);
	vsnprintf(f->detail, sizeof(f->detail), fmt, ap);
	va_end(ap);
}

/* A column value copied out of the row (text lives in the batch arena). */
struct colv {
	int		 type;
	long long	 i;
	size_t		 off, n;
};

#define NCOL	13
struct vrow {
	int64_t		 seq;
	size_t		 coff, clen;
	int		 rh_ok;		/* rec_hash is a 32-byte blob */
	uint8_t		 rh[AUD_HASH_LEN];	/* stored rec_hash */
	uint8_t		 h[AUD_HASH_LEN];	/* SHA-256(canon), by the checker */
	struct colv	 col[NCOL];
};

/* Rows and bytes per batch, and batches in flight: a hostile file of huge
 * values cannot make the copies grow without bound. Several batches in
 * flight let either stage run ahead while the other waits for a core. */
#define VBATCH		512
#define VBATCH_BYTES	(4 * 1024 * 1024)
#define NBATCH		6
/* A text column longer than any record equals no value derived from one. */
#define COL_TOO_LONG	(-1)

/* A stored merkle_nodes row as the reader stepped it. */
struct vnode {
	int64_t		 idx;
	int		 ok;		/* idx integer and hash a 32-byte blob */
	uint8_t		 h[AUD_HASH_LEN];
};

struct vbatch {
	struct vbatch	*next;
	size_t		 n;		/* rows */
	uint64_t	 pos;		/* records before the first row */
	int		 last;
	char		*arena;
	size_t		 alen, acap;
	struct vrow	 r[VBATCH];
	/*
	 * The nodes of level l (1..63) that rows [pos, pos + n) complete,
	 * in idx order, are nodes[nstart[l] .. nstart[l + 1]): one per node
	 * they produce, or fewer when the table has fewer rows. A level holds
	 * at most n / 2^l + 1 of them.
	 */
	size_t		 nstart[65];
	struct vnode	 nodes[VBATCH + 64];
};

/* The checker's side of the tree. */
struct tstate {
	struct aud_tree	*t;
	uint64_t	 n;		/* leaves appended */
	const struct vbatch *b;		/* the batch being appended */
	size_t		 used[64];	/* its node rows consumed, per level */
};

struct pipe {
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	/* Batches to check, in seq order, and empty ones. */
	struct vbatch	*full, **fullt, *spare;
	int		 cstop;		/* the checker failed: stop reading */
	int		 oom;
	struct aud_vctx	*v;
	struct vfail	 cf;		/* the checker's first failure */
	/* Checker state. */
	struct aud_scan	 sc;
	struct aud_strbuf sb;
	size_t		 olen;
	uint8_t		 prev[AUD_HASH_LEN];
	struct tstate	 ts;
};

static int
arena_put(struct vbatch *b, const void *p, size_t n, size_t *off)
{
	size_t ncap;
	char *na;

	if (b->alen + n > b->acap) {
		ncap = b->acap ? b->acap : 1 << 18;
		while (ncap < b->alen + n)
			ncap *= 2;
		if ((na = realloc(b->arena, ncap)) == NULL)
			return -1;
		b->arena = na;
		b->acap = ncap;
	}
	if (n > 0)
		memcpy(b->arena + b->alen, p, n);
	*off = b->alen;
	b->alen += n;
	return 0;
}

static int
cv_int_eq(const struct colv *c, int has, long long want)
{
	if (!has)
		return c->type == SQLITE_NULL;
	return c->type == SQLITE_INTEGER && c->i == want;
}

static int
cv_text_eq(const struct vbatch *b, const struct colv *c, const char *want,
    size_t n)
{
	if (want == NULL)
		return c->type == SQLITE_NULL;
	return c->type == SQLITE_TEXT && c->n == n &&
	    memcmp(b->arena + c->off, want, n) == 0;
}

/*
 * The index columns re-derived from the checked bytes and compared with
 * the row. This mirrors aud_cols_from (audit/store.c), which the writer
 * uses; check_audit_perf holds the two against each other.
 */
static int
cols_match(const struct vbatch *b, const struct vrow *r,
    const struct aud_member *const *f, int kind, int64_t tsns,
    struct aud_strbuf *sb)
{
	const struct aud_member *m;
	const char *s, *val;
	size_t n, vlen;
	long long port;
	int decision = 0, has;

	if (!cv_int_eq(&r->col[1], 1, tsns) || !cv_int_eq(&r->col[2], 1, kind))
		return 0;
	if ((s = mstr(f[K_DECISION], sb, &n)) != NULL)
		decision = aud_decision_code(s, n);
	if (!cv_int_eq(&r->col[5], decision != 0, decision))
		return 0;
	if ((s = mstr2(f[K_SANDBOX], "id", sb, &n)) == NULL)
		s = mstr(f[K_SANDBOX], sb, &n);
	if (!cv_text_eq(b, &r->col[6], s, n))
		return 0;
	s = mstr2(f[K_DST], "host", sb, &n);
	if (!cv_text_eq(b, &r->col[7], s, n))
		return 0;
	s = mstr2(f[K_DST], "ip", sb, &n);
	if (!cv_text_eq(b, &r->col[8], s, n))
		return 0;
	has = (m = f[K_DST]) != NULL &&
	    aud_cv_member(m->val, m->vlen, "port", &val, &vlen) == 0 &&
	    aud_cv_int(val, vlen, &port) == 0;
	if (!cv_int_eq(&r->col[9], has, has ? port : 0))
		return 0;
	s = mstr2(f[K_POLICY], "rule", sb, &n);
	if (!cv_text_eq(b, &r->col[10], s, n))
		return 0;
	s = mstr(f[K_SERVER], sb, &n);
	if (!cv_text_eq(b, &r->col[11], s, n))
		return 0;
	s = mstr(f[K_TOOL], sb, &n);
	return cv_text_eq(b, &r->col[12], s, n);
}

/* The checker's work on one row; -1 at its first failure. */
static int
check_row(struct pipe *pp, const struct vbatch *b, struct vrow *r)
{
	struct aud_vctx *v = pp->v;
	const struct aud_member *f[K_N];
	const char *canon = b->arena + r->coff, *str;
	char phex[2 * AUD_HASH_LEN + 1], perr[256], kind[32];
	uint8_t h[AUD_HASH_LEN];
	int64_t seq = r->seq, tsns = 0, monons = 0;
	uint64_t pos = (uint64_t)seq, lost;
	json_t *rec, *x;
	long long iv;
	size_t slen;
	int kcode = 0;

	/* The strict one-pass check: the same verdict as parsing,
	 * re-serialising and comparing bytes, without a tree. */
	if (aud_canon_check(canon, r->clen, &pp->sc, perr,
	    sizeof(perr)) == -1) {
		vf_set(&pp->cf, seq, pos, R_CANON, "canonical", "%s", perr);
		return -1;
	}
	aud_sha256(canon, r->clen, h);
	if (!r->rh_ok || memcmp(r->rh, h, AUD_HASH_LEN) != 0) {
		vf_set(&pp->cf, seq, pos, R_HASH, "rec_hash",
		    "rec_hash != SHA-256(canon)");
		return -1;
	}
	aud_hex(pp->prev, AUD_HASH_LEN, phex);
	pick(&pp->sc, f);
	kind[0] = '\0';
	if ((str = mstr(f[K_KIND], &pp->sb, &slen)) != NULL &&
	    slen < sizeof(kind)) {
		memcpy(kind, str, slen);
		kind[slen] = '\0';
		/* A kind with a NUL inside is no kind. */
		if (strlen(kind) != slen)
			kind[0] = '\0';
	}
	if (mint(f[K_V], &iv) == -1 || iv != 1) {
		vf_set(&pp->cf, seq, pos, R_FIELDS, "record", "v is not 1");
	} else if (mint(f[K_SEQ], &iv) == -1 || iv != seq) {
		vf_set(&pp->cf, seq, pos, R_FIELDS, "record",
		    "canon.seq != seq");
	} else if ((str = mstr(f[K_ORIGIN], &pp->sb, &slen)) == NULL ||
	    slen != pp->olen || memcmp(str, v->origin, slen) != 0) {
		vf_set(&pp->cf, seq, pos, R_FIELDS, "record",
		    "canon.origin != log origin");
	} else if ((str = mstr(f[K_PREV], &pp->sb, &slen)) == NULL ||
	    slen != 2 * AUD_HASH_LEN || memcmp(str, phex, slen) != 0) {
		vf_set(&pp->cf, seq, pos, R_FIELDS, "prev",
		    "prev does not link to record %lld", (long long)seq - 1);
	} else if ((kcode = aud_kind_code(kind)) == 0) {
		vf_set(&pp->cf, seq, pos, R_FIELDS, "record", "unknown kind");
	} else if ((str = mstr(f[K_TS], &pp->sb, &slen)) == NULL ||
	    aud_ns_parse_str(str, slen, &tsns) == -1 ||
	    (str = mstr(f[K_MONO], &pp->sb, &slen)) == NULL ||
	    aud_ns_parse_str(str, slen, &monons) == -1) {
		vf_set(&pp->cf, seq, pos, R_FIELDS, "record",
		    "ts or mono missing or malformed");
	}
	if (pp->cf.set)
		return -1;
	if (!cols_match(b, r, f, kcode, tsns, &pp->sb)) {
		vf_set(&pp->cf, seq, pos, R_INDEX, "index",
		    "index column mismatch");
		return -1;
	}
	memcpy(r->h, h, AUD_HASH_LEN);
	memcpy(pp->prev, h, AUD_HASH_LEN);
	/* The few kinds whose content verify reads (keys, gaps) get a tree;
	 * they are rare, and all log.* (code 6). */
	if (kcode != 6 || (strcmp(kind, "log.open") != 0 &&
	    strcmp(kind, "log.key") != 0 && strcmp(kind, "log.gap") != 0))
		return 0;
	if ((rec = aud_canon_parse(canon, r->clen, perr, sizeof(perr))) ==
	    NULL) {
		vf_set(&pp->cf, seq, pos, R_CANON, "canonical", "%s", perr);
		return -1;
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
	return 0;
}

/*
 * The checker's node callback: a completed node must be the next stored row
 * of its level that the reader copied for this batch. A missing, extra or
 * altered row shows as a mismatch here (extra rows past the end are caught
 * by the count after the scan).
 */
static void
node_check(void *arg, unsigned level, uint64_t idx,
    const uint8_t h[AUD_HASH_LEN])
{
	struct pipe *pp = arg;
	struct tstate *ts = &pp->ts;
	struct aud_vctx *v = pp->v;
	const struct vnode *nd;
	size_t k;

	v->nodes_made++;
	if (v->node_bad)
		return;
	if (level >= 64)
		goto bad;
	k = ts->b->nstart[level] + ts->used[level]++;
	if (k >= ts->b->nstart[level + 1])
		goto bad;
	nd = &ts->b->nodes[k];
	if (nd->ok && nd->idx == (int64_t)idx &&
	    memcmp(nd->h, h, AUD_HASH_LEN) == 0)
		return;
bad:
	v->node_bad = 1;
	v->node_bad_level = level;
	v->node_bad_idx = idx;
}

/* Adds a checked row to the tree and checks the nodes it completes. */
static int
absorb(struct pipe *pp, const struct vrow *r)
{
	struct aud_vctx *v = pp->v;
	struct tstate *ts = &pp->ts;
	uint8_t leaf[AUD_HASH_LEN];

	aud_leaf_hash(r->h, AUD_HASH_LEN, leaf);
	aud_tree_append(ts->t, leaf, node_check, pp);
	if (v->node_bad) {
		vf_set(&pp->cf, r->seq, ts->n, R_MERKLE, "merkle",
		    "merkle_nodes (%llu,%llu) missing or wrong",
		    (unsigned long long)v->node_bad_level,
		    (unsigned long long)v->node_bad_idx);
		return -1;
	}
	ts->n++;
	while (v->nextsz < v->nsizes && v->sizes[v->nextsz] <= ts->n) {
		if (v->sizes[v->nextsz] == ts->n)
			aud_tree_root(ts->t, v->roots[v->nextsz]);
		v->nextsz++;
	}
	return 0;
}

/* Checks a batch (in the checker thread, or inline without one). */
static void
check_batch(struct pipe *pp, struct vbatch *b)
{
	size_t i;

	pp->ts.b = b;
	memset(pp->ts.used, 0, sizeof(pp->ts.used));
	for (i = 0; i < b->n && !pp->cf.set; i++)
		if (check_row(pp, b, &b->r[i]) == -1 ||
		    absorb(pp, &b->r[i]) == -1)
			break;
}

static void *
checker_main(void *arg)
{
	struct pipe *pp = arg;
	struct vbatch *b;
	int last;

	pthread_mutex_lock(&pp->mu);
	for (;;) {
		while (pp->full == NULL)
			pthread_cond_wait(&pp->cv, &pp->mu);
		b = pp->full;
		if ((pp->full = b->next) == NULL)
			pp->fullt = &pp->full;
		pthread_mutex_unlock(&pp->mu);
		/* Only this thread writes cf: no lock needed to read it. */
		if (!pp->cf.set)
			check_batch(pp, b);
		last = b->last;
		pthread_mutex_lock(&pp->mu);
		if (pp->cf.set)
			pp->cstop = 1;
		b->next = pp->spare;
		pp->spare = b;
		pthread_cond_broadcast(&pp->cv);
		if (last)
			break;
	}
	pthread_mutex_unlock(&pp->mu);
	return NULL;
}

/*
 * The reader's part of the tree: copies, level by level, as many stored
 * node rows as rows [pos, pos + n) complete -- exactly the rows the
 * sequential check would step -- so that the checker needs no SQLite.
 */
static void
fill_nodes(struct aud_vctx *v, struct vbatch *b)
{
	sqlite3_stmt *st;
	struct vnode *nd;
	uint64_t a = b->pos, e = b->pos + b->n, want;
	size_t k = 0;
	unsigned l;

	b->nstart[0] = b->nstart[1] = 0;
	for (l = 1; l < 64; l++) {
		b->nstart[l] = k;
		want = (e >> l) - (a >> l);
		st = v->lvl_st[l];
		if (want > 0 && st == NULL) {
			if (sqlite3_prepare_v2(v->db, "SELECT idx, hash FROM "
			    "merkle_nodes WHERE level = ? ORDER BY idx", -1,
			    &st, NULL) != SQLITE_OK) {
				sqlite3_finalize(st);
				st = NULL;
				want = 0;	/* no rows: the checker fails */
			} else {
				sqlite3_bind_int(st, 1, (int)l);
				v->lvl_st[l] = st;
			}
		}
		for (; want > 0 && sqlite3_step(st) == SQLITE_ROW; want--) {
			nd = &b->nodes[k++];
			nd->ok = sqlite3_column_type(st, 0) == SQLITE_INTEGER &&
			    sqlite3_column_type(st, 1) == SQLITE_BLOB &&
			    sqlite3_column_bytes(st, 1) == AUD_HASH_LEN;
			nd->idx = sqlite3_column_int64(st, 0);
			if (nd->ok)
				memcpy(nd->h, sqlite3_column_blob(st, 1),
				    AUD_HASH_LEN);
		}
	}
	b->nstart[64] = k;
}

/* An empty batch, waiting for the checker to return one. Under pp->mu. */
static struct vbatch *
get_spare(struct pipe *pp)
{
	struct vbatch *b;

	while (pp->spare == NULL)
		pthread_cond_wait(&pp->cv, &pp->mu);
	b = pp->spare;
	pp->spare = b->next;
	b->n = b->alen = 0;
	b->last = 0;
	return b;
}

/* Hands a batch to the checker and returns an empty one. NULL: the checker
 * failed (stop reading), or b was the last. */
static struct vbatch *
hand_over(struct aud_vctx *v, struct pipe *pp, struct vbatch *b, int threaded)
{
	struct vbatch *nb = NULL;
	uint64_t next = b->pos + b->n;

	fill_nodes(v, b);
	if (!threaded) {
		check_batch(pp, b);
		b->pos = next;
		b->n = b->alen = 0;
		return pp->cf.set || b->last ? NULL : b;
	}
	pthread_mutex_lock(&pp->mu);
	b->next = NULL;
	*pp->fullt = b;
	pp->fullt = &b->next;
	pthread_cond_broadcast(&pp->cv);
	if (!b->last && !pp->cstop) {
		nb = get_spare(pp);
		nb->pos = next;
	}
	pthread_mutex_unlock(&pp->mu);
	return nb;
}

/* Steps 1-3: contiguity, every record, the tree. Returns records seen. */
uint64_t
aud_vf_scan(struct aud_vctx *v)
{
	static const int cols[] = { 1, 2, 5, 6, 7, 8, 9, 10, 11, 12 };
	sqlite3_stmt *st = NULL;
	struct pipe pp;
	struct vbatch *bs[NBATCH], *b;
	struct vfail rf, *w;
	struct vrow *r;
	struct aud_vf_toucher tc;
	pthread_t th;
	uint64_t n = 0;
	sqlite3_int64 seq;
	const void *canon;
	size_t i, k;
	int len, rc = SQLITE_DONE, threaded = 0, ct;

	memset(&rf, 0, sizeof(rf));
	memset(&pp, 0, sizeof(pp));
	memset(&tc, 0, sizeof(tc));
	memset(bs, 0, sizeof(bs));
	if (sqlite3_prepare_v2(v->db, "SELECT seq, ts_ns, kind, canon, "
	    "rec_hash, decision, sandbox, dst_host, dst_ip, dst_port, rule_id, "
	    "mcp_server, mcp_tool FROM records ORDER BY seq", -1, &st, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(v->db, "SELECT hash FROM merkle_nodes WHERE "
	    "level = ? AND idx = ?", -1, &v->lvl_st[0], NULL) != SQLITE_OK) {
		aud_vf_fail(v, -1, "schema", "records/merkle_nodes unreadable: "
		    "%s", sqlite3_errmsg(v->db));
		sqlite3_finalize(st);
		close_levels(v);
		return 0;
	}
	/* Level 0 is never stored (leaves are rec_hash): the probe above
	 * only checked that the table is readable. */
	close_levels(v);
	pp.ts.t = aud_tree_new();
	for (i = 0; i < NBATCH; i++)
		if ((bs[i] = calloc(1, sizeof(*bs[i]))) == NULL)
			break;
	if (pp.ts.t == NULL || i < NBATCH) {
		aud_vf_error(v, "out of memory");
		goto done;
	}
	pp.v = v;
	pp.olen = strlen(v->origin);
	pp.fullt = &pp.full;
	pthread_mutex_init(&pp.mu, NULL);
	pthread_cond_init(&pp.cv, NULL);
	for (i = 1; i < NBATCH; i++) {
		bs[i]->next = pp.spare;
		pp.spare = bs[i];
	}
	b = bs[0];
	/* Without a second thread the same stages run in turn. */
	threaded = pthread_create(&th, NULL, checker_main, &pp) == 0;
	if (threaded)
		aud_vf_toucher_start(v->db, &tc);
	while (b != NULL && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (sqlite3_column_type(st, 0) != SQLITE_INTEGER) {
			vf_set(&rf, (int64_t)n, n, R_CONTIG, "contiguity",
			    "seq is not an integer");
			break;
		}
		seq = sqlite3_column_int64(st, 0);
		if (seq != (sqlite3_int64)n) {
			if (seq > (sqlite3_int64)n)
				vf_set(&rf, (int64_t)n, n, R_CONTIG,
				    "contiguity", "records %llu..%lld missing "
				    "(gap)", (unsigned long long)n,
				    (long long)seq - 1);
			else
				vf_set(&rf, (int64_t)seq, n, R_CONTIG,
				    "contiguity", "seq %lld out of order",
				    (long long)seq);
			break;
		}
		len = sqlite3_column_bytes(st, 3);
		canon = sqlite3_column_blob(st, 3);
		ct = sqlite3_column_type(st, 3);
		if ((ct != SQLITE_BLOB && ct != SQLITE_TEXT) || len <= 0 ||
		    len > AUD_MAX_RECORD || canon == NULL) {
			vf_set(&rf, seq, n, R_CTYPE, "canonical", "canon "
			    "missing, of the wrong type or larger than %d "
			    "bytes", AUD_MAX_RECORD);
			break;
		}
		r = &b->r[b->n];
		r->seq = seq;
		r->clen = (size_t)len;
		if (arena_put(b, canon, (size_t)len, &r->coff) == -1) {
			pp.oom = 1;
			break;
		}
		r->rh_ok = sqlite3_column_type(st, 4) == SQLITE_BLOB &&
		    sqlite3_column_bytes(st, 4) == AUD_HASH_LEN;
		if (r->rh_ok)
			memcpy(r->rh, sqlite3_column_blob(st, 4),
			    AUD_HASH_LEN);
		for (k = 0; k < sizeof(cols) / sizeof(cols[0]); k++) {
			struct colv *c = &r->col[cols[k]];

			c->type = sqlite3_column_type(st, cols[k]);
			if (c->type == SQLITE_INTEGER)
				c->i = sqlite3_column_int64(st, cols[k]);
			else if (c->type == SQLITE_TEXT) {
				const unsigned char *tx =
				    sqlite3_column_text(st, cols[k]);

				c->n = (size_t)sqlite3_column_bytes(st,
				    cols[k]);
				if (c->n > AUD_MAX_RECORD) {
					c->type = COL_TOO_LONG;
					continue;
				}
				if (tx == NULL || arena_put(b, tx, c->n,
				    &c->off) == -1) {
					pp.oom = 1;
					break;
				}
			}
		}
		if (pp.oom)
			break;
		b->n++;
		n++;
		if (b->n == VBATCH || b->alen >= VBATCH_BYTES)
			b = hand_over(v, &pp, b, threaded);
	}
	if (!rf.set && !pp.oom && b != NULL && rc != SQLITE_DONE &&
	    rc != SQLITE_ROW)
		vf_set(&rf, (int64_t)n, n, R_SCHEMA, "schema",
		    "reading records: %s", sqlite3_errmsg(v->db));
	/* The rows read so far still go through the checker and the tree:
	 * an earlier check of the same or an earlier record may fail there
	 * first. */
	if (b == NULL && threaded) {
		/* The end marker: the checker returns every batch it takes,
		 * failed or not, so one comes back. */
		pthread_mutex_lock(&pp.mu);
		b = get_spare(&pp);
		b->pos = n;
		pthread_mutex_unlock(&pp.mu);
	}
	if (b != NULL) {
		b->last = 1;
		hand_over(v, &pp, b, threaded);
	}
	if (threaded)
		pthread_join(th, NULL);
	pthread_mutex_destroy(&pp.mu);
	pthread_cond_destroy(&pp.cv);
	if (pp.oom) {
		aud_vf_error(v, "out of memory");
		goto done;
	}
	/* The failure the sequential order meets first. */
	w = rf.set ? &rf : NULL;
	if (pp.cf.set && (w == NULL || pp.cf.pos < w->pos ||
	    (pp.cf.pos == w->pos && pp.cf.rank < w->rank)))
		w = &pp.cf;
	n = pp.ts.n;
	if (w != NULL) {
		aud_vf_fail(v, w->seq, w->check, "%s", w->detail);
		n = w->pos;
	}
	if (!v->failed) {
		sqlite3_stmt *cs;

		/* Nodes the records do not produce are forged or stale. */
		if (sqlite3_prepare_v2(v->db, "SELECT count(*) FROM "
		    "merkle_nodes", -1, &cs, NULL) == SQLITE_OK &&
		    sqlite3_step(cs) == SQLITE_ROW &&
		    (uint64_t)sqlite3_column_int64(cs, 0) != v->nodes_made)
			aud_vf_fail(v, -1, "merkle", "merkle_nodes has %lld "
			    "rows, the records make %llu",
			    (long long)sqlite3_column_int64(cs, 0),
			    (unsigned long long)v->nodes_made);
		sqlite3_finalize(cs);
	}
	if (!v->failed) {
		char rh[2 * AUD_HASH_LEN + 1];
		uint8_t root[AUD_HASH_LEN];

		aud_tree_root(pp.ts.t, root);
		aud_hex(root, AUD_HASH_LEN, rh);
		json_object_set_new(v->rep, "root", json_string(rh));
		aud_vf_ok(v, "records", "contiguous, canonical, hashed, "
		    "linked");
		aud_vf_ok(v, "merkle", "every stored node recomputed");
	}
done:
	aud_vf_toucher_stop(&tc);
	sqlite3_finalize(st);
	close_levels(v);
	aud_tree_free(pp.ts.t);
	aud_scan_free(&pp.sc);
	free(pp.sb.p);
	for (i = 0; i < NBATCH; i++) {
		if (bs[i] != NULL)
			free(bs[i]->arena);
		free(bs[i]);
	}
	return n;
}
