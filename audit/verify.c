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
#include <pthread.h>
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
	/* One ascending cursor per tree level: the scan produces the nodes
	 * of each level in idx order, so every check is a sequential step
	 * instead of a B-tree lookup. */
	sqlite3_stmt	*lvl_st[64];
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
	sqlite3_stmt *st;
	int ok;

	v->nodes_made++;
	if (v->node_bad)
		return;
	if (level >= 64)
		goto bad;
	if ((st = v->lvl_st[level]) == NULL) {
		if (sqlite3_prepare_v2(v->db, "SELECT idx, hash FROM "
		    "merkle_nodes WHERE level = ? ORDER BY idx", -1, &st,
		    NULL) != SQLITE_OK)
			goto bad;
		sqlite3_bind_int(st, 1, (int)level);
		v->lvl_st[level] = st;
	}
	/* The next stored node of this level must be exactly this one: a
	 * missing, extra or altered row shows as a mismatch here (extra rows
	 * past the end are caught by the count after the scan). */
	ok = sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) == SQLITE_INTEGER &&
	    sqlite3_column_int64(st, 0) == (sqlite3_int64)idx &&
	    sqlite3_column_type(st, 1) == SQLITE_BLOB &&
	    sqlite3_column_bytes(st, 1) == AUD_HASH_LEN &&
	    memcmp(sqlite3_column_blob(st, 1), h, AUD_HASH_LEN) == 0;
	if (ok)
		return;
bad:
	v->node_bad = 1;
	v->node_bad_level = level;
	v->node_bad_idx = idx;
}

static void
close_levels(struct vctx *v)
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

/*
 * Steps 1-3 run as a two-stage pipeline on two threads, because one core
 * could not keep up with a log written at full speed. The reader (the
 * calling thread, which alone uses the SQLite handle) steps the rows in seq
 * order, checks contiguity and copies them into batches; the checker checks
 * canonical form, hashes canon against rec_hash and checks the common
 * fields, the prev link and the index columns; batches then come back to
 * the reader in order, which extends the tree with the hashes of the rows
 * that passed and checks every stored node. Every check of the single-threaded verifier is still made on
 * every record; each stage stops at its first failure and the verdict is
 * the failure the sequential order would have met first: the lowest seq,
 * and within a record the order of the checks below.
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
 * values cannot make the copies grow without bound. */
#define VBATCH		512
#define VBATCH_BYTES	(4 * 1024 * 1024)
#define NBATCH		3
/* A text column longer than any record equals no value derived from one. */
#define COL_TOO_LONG	(-1)
struct vbatch {
	struct vbatch	*next;
	size_t		 n, nok;	/* rows; rows that passed the checker */
	int		 last;
	char		*arena;
	size_t		 alen, acap;
	struct vrow	 r[VBATCH];
};

struct pipe {
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	/* FIFOs both ways, so that rows come back in seq order. */
	struct vbatch	*full, **fullt, *done, **donet, *spare;
	int		 cstop;		/* the checker failed: stop reading */
	int		 oom;
	struct vctx	*v;
	struct vfail	 cf;		/* the checker's first failure */
	/* Checker state. */
	struct aud_scan	 sc;
	struct aud_strbuf sb;
	size_t		 olen;
	uint8_t		 prev[AUD_HASH_LEN];
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
	if ((s = mstr(f[K_DECISION], sb, &n)) != NULL) {
		if (n == 5 && memcmp(s, "allow", 5) == 0)
			decision = 1;
		else if (n == 4 && memcmp(s, "deny", 4) == 0)
			decision = 2;
		else if (n == 3 && memcmp(s, "ask", 3) == 0)
			decision = 3;
		else if (n == 3 && memcmp(s, "log", 3) == 0)
			decision = 4;
	}
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
	struct vctx *v = pp->v;
	const struct aud_member *f[K_N];
	const char *canon = b->arena + r->coff, *str;
	char phex[2 * AUD_HASH_LEN + 1], perr[256], kind[32];
	uint8_t h[AUD_HASH_LEN];
	int64_t seq = r->seq, tsns = 0, monons = 0;
	uint64_t pos = (uint64_t)seq, lost;
	json_t *rec, *x;
	long long iv;
	size_t slen;
	int kcode;

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
	} else if (!aud_kind_valid(kind)) {
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
	kcode = aud_kind_code(kind);
	if (!cols_match(b, r, f, kcode, tsns, &pp->sb)) {
		vf_set(&pp->cf, seq, pos, R_INDEX, "index",
		    "index column mismatch");
		return -1;
	}
	memcpy(r->h, h, AUD_HASH_LEN);
	memcpy(pp->prev, h, AUD_HASH_LEN);
	/* The few kinds whose content verify reads (keys, gaps) get a tree;
	 * they are rare. */
	if (strcmp(kind, "log.open") != 0 && strcmp(kind, "log.key") != 0 &&
	    strcmp(kind, "log.gap") != 0)
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

/* Checks a batch (in the checker thread, or inline without one). */
static void
check_batch(struct pipe *pp, struct vbatch *b)
{
	size_t i;

	for (i = 0; i < b->n && !pp->cf.set; i++)
		if (check_row(pp, b, &b->r[i]) == -1)
			break;
	b->nok = i;
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
		b->nok = 0;
		if (!pp->cf.set)
			check_batch(pp, b);
		last = b->last;
		pthread_mutex_lock(&pp->mu);
		if (pp->cf.set)
			pp->cstop = 1;
		b->next = NULL;
		*pp->donet = b;
		pp->donet = &b->next;
		pthread_cond_broadcast(&pp->cv);
		if (last)
			break;
	}
	pthread_mutex_unlock(&pp->mu);
	return NULL;
}

/* The reader's side of the tree: the rows of a checked batch, in order. */
struct tstate {
	struct aud_tree	*t;
	uint64_t	 n;		/* leaves appended */
	struct vfail	 f;
};

static void
absorb(struct vctx *v, struct tstate *ts, const struct vbatch *b)
{
	uint8_t leaf[AUD_HASH_LEN];
	size_t i;

	for (i = 0; i < b->nok && !ts->f.set; i++) {
		aud_leaf_hash(b->r[i].h, AUD_HASH_LEN, leaf);
		aud_tree_append(ts->t, leaf, node_check, v);
		if (v->node_bad) {
			vf_set(&ts->f, b->r[i].seq, ts->n, R_MERKLE, "merkle",
			    "merkle_nodes (%llu,%llu) missing or wrong",
			    (unsigned long long)v->node_bad_level,
			    (unsigned long long)v->node_bad_idx);
			break;
		}
		ts->n++;
		while (v->nextsz < v->nsizes && v->sizes[v->nextsz] <= ts->n) {
			if (v->sizes[v->nextsz] == ts->n)
				aud_tree_root(ts->t, v->roots[v->nextsz]);
			v->nextsz++;
		}
	}
}

/* Takes the next checked batch back (FIFO), waiting for it; NULL when none
 * is in flight. */
static struct vbatch *
take_done(struct pipe *pp, int *inflight)
{
	struct vbatch *b;

	if (*inflight == 0)
		return NULL;
	pthread_mutex_lock(&pp->mu);
	while (pp->done == NULL)
		pthread_cond_wait(&pp->cv, &pp->mu);
	b = pp->done;
	if ((pp->done = b->next) == NULL)
		pp->donet = &pp->done;
	pthread_mutex_unlock(&pp->mu);
	(*inflight)--;
	return b;
}

/* Hands a batch to the checker and returns an empty one, after adding the
 * rows of the oldest checked batch to the tree. NULL: the checker or the
 * tree failed (stop reading), or b was the last. */
static struct vbatch *
hand_over(struct vctx *v, struct pipe *pp, struct tstate *ts,
    struct vbatch *b, int threaded, int *inflight)
{
	struct vbatch *nb;
	int stop;

	if (!threaded) {
		b->nok = 0;
		check_batch(pp, b);
		absorb(v, ts, b);
		b->n = b->nok = b->alen = 0;
		return pp->cf.set || ts->f.set || b->last ? NULL : b;
	}
	pthread_mutex_lock(&pp->mu);
	b->next = NULL;
	*pp->fullt = b;
	pp->fullt = &b->next;
	(*inflight)++;
	pthread_cond_broadcast(&pp->cv);
	if (b->last) {
		pthread_mutex_unlock(&pp->mu);
		return NULL;
	}
	nb = pp->spare;
	if (nb != NULL)
		pp->spare = nb->next;
	pthread_mutex_unlock(&pp->mu);
	if (nb == NULL) {
		nb = take_done(pp, inflight);
		absorb(v, ts, nb);
	}
	pthread_mutex_lock(&pp->mu);
	stop = pp->cstop;
	pthread_mutex_unlock(&pp->mu);
	nb->n = nb->nok = nb->alen = 0;
	nb->last = 0;
	if (stop || ts->f.set) {
		/* Keep it: the end marker needs a batch. */
		pthread_mutex_lock(&pp->mu);
		nb->next = pp->spare;
		pp->spare = nb;
		pthread_mutex_unlock(&pp->mu);
		return NULL;
	}
	return nb;
}

/* Steps 1-3: contiguity, every record, the tree. Returns records seen. */
static uint64_t
scan_records(struct vctx *v)
{
	static const int cols[] = { 1, 2, 5, 6, 7, 8, 9, 10, 11, 12 };
	sqlite3_stmt *st = NULL;
	struct tstate ts;
	struct pipe pp;
	struct vbatch *bs[NBATCH], *b;
	struct vfail rf, *w, *c3[3];
	struct vrow *r;
	pthread_t th;
	uint64_t n = 0;
	sqlite3_int64 seq;
	const void *canon;
	size_t i, k;
	int len, rc = SQLITE_DONE, threaded = 0, ct, inflight = 0;

	memset(&rf, 0, sizeof(rf));
	memset(&ts, 0, sizeof(ts));
	memset(&pp, 0, sizeof(pp));
	memset(bs, 0, sizeof(bs));
	if (sqlite3_prepare_v2(v->db, "SELECT seq, ts_ns, kind, canon, "
	    "rec_hash, decision, sandbox, dst_host, dst_ip, dst_port, rule_id, "
	    "mcp_server, mcp_tool FROM records ORDER BY seq", -1, &st, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(v->db, "SELECT hash FROM merkle_nodes WHERE "
	    "level = ? AND idx = ?", -1, &v->lvl_st[0], NULL) != SQLITE_OK) {
		fail(v, -1, "schema", "records/merkle_nodes unreadable: %s",
		    sqlite3_errmsg(v->db));
		sqlite3_finalize(st);
		close_levels(v);
		return 0;
	}
	/* Level 0 is never stored (leaves are rec_hash): the probe above
	 * only checked that the table is readable. */
	close_levels(v);
	ts.t = aud_tree_new();
	for (i = 0; i < NBATCH; i++)
		if ((bs[i] = calloc(1, sizeof(*bs[i]))) == NULL)
			break;
	if (ts.t == NULL || i < NBATCH) {
		error(v, "out of memory");
		goto done;
	}
	pp.v = v;
	pp.olen = strlen(v->origin);
	pp.fullt = &pp.full;
	pp.donet = &pp.done;
	pthread_mutex_init(&pp.mu, NULL);
	pthread_cond_init(&pp.cv, NULL);
	for (i = 1; i < NBATCH; i++) {
		bs[i]->next = pp.spare;
		pp.spare = bs[i];
	}
	b = bs[0];
	/* Without a second thread the same stages run in turn. */
	threaded = pthread_create(&th, NULL, checker_main, &pp) == 0;
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
			b = hand_over(v, &pp, &ts, b, threaded, &inflight);
	}
	if (!rf.set && !pp.oom && b != NULL && rc != SQLITE_DONE &&
	    rc != SQLITE_ROW)
		vf_set(&rf, (int64_t)n, n, R_SCHEMA, "schema",
		    "reading records: %s", sqlite3_errmsg(v->db));
	/* The rows read so far still go through the checker and the tree:
	 * an earlier check of the same or an earlier record may fail there
	 * first. */
	if (b == NULL && threaded) {
		pthread_mutex_lock(&pp.mu);
		b = pp.spare;
		pp.spare = b->next;
		pthread_mutex_unlock(&pp.mu);
		b->n = b->nok = b->alen = 0;
	}
	if (b != NULL) {
		b->last = 1;
		hand_over(v, &pp, &ts, b, threaded, &inflight);
	}
	if (threaded) {
		pthread_join(th, NULL);
		while ((b = take_done(&pp, &inflight)) != NULL)
			absorb(v, &ts, b);
	}
	pthread_mutex_destroy(&pp.mu);
	pthread_cond_destroy(&pp.cv);
	if (pp.oom) {
		error(v, "out of memory");
		goto done;
	}
	/* The failure the sequential order meets first. */
	c3[0] = &rf;
	c3[1] = &pp.cf;
	c3[2] = &ts.f;
	w = NULL;
	for (i = 0; i < 3; i++)
		if (c3[i]->set && (w == NULL || c3[i]->pos < w->pos ||
		    (c3[i]->pos == w->pos && c3[i]->rank < w->rank)))
			w = c3[i];
	n = ts.n;
	if (w != NULL) {
		fail(v, w->seq, w->check, "%s", w->detail);
		n = w->pos;
	}
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

		aud_tree_root(ts.t, root);
		aud_hex(root, AUD_HASH_LEN, rh);
		json_object_set_new(v->rep, "root", json_string(rh));
		check_ok(v, "records", "contiguous, canonical, hashed, linked");
		check_ok(v, "merkle", "every stored node recomputed");
	}
done:
	sqlite3_finalize(st);
	close_levels(v);
	aud_tree_free(ts.t);
	aud_scan_free(&pp.sc);
	free(pp.sb.p);
	for (i = 0; i < NBATCH; i++) {
		if (bs[i] != NULL)
			free(bs[i]->arena);
		free(bs[i]);
	}
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
	/* The scan reads the whole file once, in order: map it and keep a
	 * large cache (read-only, so nothing here touches the writer). */
	sqlite3_exec(v.db, "PRAGMA mmap_size=1073741824;"
	    "PRAGMA cache_size=-65536;", NULL, NULL, NULL);
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
