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
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	 * of each level in idx order, so the reader copies the rows a batch
	 * will produce with sequential steps instead of B-tree lookups. */
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
close_levels(struct vctx *v)
{
	size_t i;

	for (i = 0; i < 64; i++) {
		sqlite3_finalize(v->lvl_st[i]);
		v->lvl_st[i] = NULL;
	}
}

/*
 * The read-ahead VFS. A scan of the log is dominated by the first touch of
 * each mapped page (a page fault, and on virtual machines with shadow page
 * tables a trip to the hypervisor): SQLite's own mmap pays it in the reader,
 * the thread that limits the pipeline. This shim passes every call to the
 * default VFS except xFetch, which returns pages from a read-only mapping of
 * the main database file made at open; a helper thread touches that mapping
 * ahead of the reader, so the reader finds its pages mapped. SQLite's rules
 * are unchanged: pages in the WAL are still read from the WAL, pages past
 * the mapping (a file that grew) through xRead, and locks and the shared
 * memory belong to the default VFS.
 */
#define RA_VFS		"sluice-verify-ra"
#define RA_MAPMAX	((sqlite3_int64)1 << 40)

struct rafile {
	sqlite3_file	 base;
	sqlite3_file	*real;		/* the default VFS's file, after us */
	const unsigned char *map;
	sqlite3_int64	 maplen;
};

static sqlite3_vfs *ra_parent;
static sqlite3_vfs ra_vfs;
static pthread_once_t ra_once = PTHREAD_ONCE_INIT;
static int ra_ok;

#define RF(f)	(((struct rafile *)(void *)(f))->real)

static int
ra_close(sqlite3_file *f)
{
	struct rafile *r = (struct rafile *)(void *)f;
	int rc;

	rc = r->real->pMethods->xClose(r->real);
	if (r->map != NULL)
		munmap((void *)r->map, (size_t)r->maplen);
	r->map = NULL;
	return rc;
}

static int
ra_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o)
{
	return RF(f)->pMethods->xRead(RF(f), b, n, o);
}

static int
ra_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
	return RF(f)->pMethods->xWrite(RF(f), b, n, o);
}

static int
ra_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	return RF(f)->pMethods->xTruncate(RF(f), size);
}

static int
ra_sync(sqlite3_file *f, int flags)
{
	return RF(f)->pMethods->xSync(RF(f), flags);
}

static int
ra_filesize(sqlite3_file *f, sqlite3_int64 *size)
{
	return RF(f)->pMethods->xFileSize(RF(f), size);
}

static int
ra_lock(sqlite3_file *f, int l)
{
	return RF(f)->pMethods->xLock(RF(f), l);
}

static int
ra_unlock(sqlite3_file *f, int l)
{
	return RF(f)->pMethods->xUnlock(RF(f), l);
}

static int
ra_reserved(sqlite3_file *f, int *out)
{
	return RF(f)->pMethods->xCheckReservedLock(RF(f), out);
}

static int
ra_fcntl(sqlite3_file *f, int op, void *arg)
{
	return RF(f)->pMethods->xFileControl(RF(f), op, arg);
}

static int
ra_sectorsize(sqlite3_file *f)
{
	return RF(f)->pMethods->xSectorSize(RF(f));
}

static int
ra_devchar(sqlite3_file *f)
{
	return RF(f)->pMethods->xDeviceCharacteristics(RF(f));
}

static int
ra_shmmap(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
	if (RF(f)->pMethods->iVersion < 2)
		return SQLITE_IOERR;
	return RF(f)->pMethods->xShmMap(RF(f), pg, pgsz, extend, pp);
}

static int
ra_shmlock(sqlite3_file *f, int off, int n, int flags)
{
	if (RF(f)->pMethods->iVersion < 2)
		return SQLITE_IOERR;
	return RF(f)->pMethods->xShmLock(RF(f), off, n, flags);
}

static void
ra_shmbarrier(sqlite3_file *f)
{
	if (RF(f)->pMethods->iVersion >= 2)
		RF(f)->pMethods->xShmBarrier(RF(f));
}

static int
ra_shmunmap(sqlite3_file *f, int del)
{
	if (RF(f)->pMethods->iVersion < 2)
		return SQLITE_OK;
	return RF(f)->pMethods->xShmUnmap(RF(f), del);
}

/* Pages inside the mapping come from it; anything else is read. */
static int
ra_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **pp)
{
	struct rafile *r = (struct rafile *)(void *)f;

	*pp = NULL;
	if (r->map != NULL && o >= 0 && n > 0 && o <= r->maplen - n)
		*pp = (void *)(r->map + o);
	return SQLITE_OK;
}

/* The mapping lives until close; nothing to release per page. */
static int
ra_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p)
{
	(void)f;
	(void)o;
	(void)p;
	return SQLITE_OK;
}

static const sqlite3_io_methods ra_io = {
	3, ra_close, ra_read, ra_write, ra_truncate, ra_sync, ra_filesize,
	ra_lock, ra_unlock, ra_reserved, ra_fcntl, ra_sectorsize, ra_devchar,
	ra_shmmap, ra_shmlock, ra_shmbarrier, ra_shmunmap, ra_fetch, ra_unfetch
};

static int
ra_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags,
    int *outflags)
{
	struct rafile *r = (struct rafile *)(void *)f;
	struct stat sb;
	void *m;
	int rc, fd;

	(void)vfs;
	memset(r, 0, sizeof(*r));
	r->real = (sqlite3_file *)(void *)(r + 1);
	rc = ra_parent->xOpen(ra_parent, name, r->real, flags, outflags);
	/* SQLite calls xClose only on a file with methods. */
	if (r->real->pMethods == NULL)
		return rc;
	r->base.pMethods = &ra_io;
	if (rc != SQLITE_OK || name == NULL ||
	    !(flags & SQLITE_OPEN_MAIN_DB) || !(flags & SQLITE_OPEN_READONLY))
		return rc;
	/* Without a mapping every page is read: slower, never wrong. */
	if ((fd = open(name, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1)
		return rc;
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
	    sb.st_size <= RA_MAPMAX && (m = mmap(NULL, (size_t)sb.st_size,
	    PROT_READ, MAP_SHARED, fd, 0)) != MAP_FAILED) {
		r->map = m;
		r->maplen = sb.st_size;
	}
	close(fd);
	return rc;
}

static int
ra_delete(sqlite3_vfs *vfs, const char *name, int sync)
{
	(void)vfs;
	return ra_parent->xDelete(ra_parent, name, sync);
}

static int
ra_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
	(void)vfs;
	return ra_parent->xAccess(ra_parent, name, flags, out);
}

static int
ra_fullpath(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
	(void)vfs;
	return ra_parent->xFullPathname(ra_parent, name, n, out);
}

static int
ra_random(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	return ra_parent->xRandomness(ra_parent, n, out);
}

static int
ra_sleep(sqlite3_vfs *vfs, int us)
{
	(void)vfs;
	return ra_parent->xSleep(ra_parent, us);
}

static int
ra_time(sqlite3_vfs *vfs, double *out)
{
	(void)vfs;
	return ra_parent->xCurrentTime(ra_parent, out);
}

static int
ra_lasterr(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	return ra_parent->xGetLastError(ra_parent, n, out);
}

static int
ra_time64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
	(void)vfs;
	return ra_parent->xCurrentTimeInt64(ra_parent, out);
}

static void
ra_register(void)
{
	if ((ra_parent = sqlite3_vfs_find(NULL)) == NULL ||
	    ra_parent->iVersion < 2 || ra_parent->xCurrentTimeInt64 == NULL)
		return;
	memset(&ra_vfs, 0, sizeof(ra_vfs));
	ra_vfs.iVersion = 2;
	ra_vfs.szOsFile = (int)sizeof(struct rafile) + ra_parent->szOsFile;
	ra_vfs.mxPathname = ra_parent->mxPathname;
	ra_vfs.zName = RA_VFS;
	ra_vfs.xOpen = ra_open;
	ra_vfs.xDelete = ra_delete;
	ra_vfs.xAccess = ra_access;
	ra_vfs.xFullPathname = ra_fullpath;
	ra_vfs.xRandomness = ra_random;
	ra_vfs.xSleep = ra_sleep;
	ra_vfs.xCurrentTime = ra_time;
	ra_vfs.xGetLastError = ra_lasterr;
	ra_vfs.xCurrentTimeInt64 = ra_time64;
	ra_ok = sqlite3_vfs_register(&ra_vfs, 0) == SQLITE_OK;
}

/* The name of the read-ahead VFS, or NULL (the default) if unavailable. */
static const char *
ra_name(void)
{
	pthread_once(&ra_once, ra_register);
	return ra_ok ? RA_VFS : NULL;
}

/* The toucher: one read per page of the mapping, in file order. */
struct toucher {
	const unsigned char	*map;
	size_t			 len;
	int			 stop;		/* atomic */
	pthread_t		 th;
	int			 started;
};

static void *
toucher_main(void *arg)
{
	struct toucher *t = arg;
	volatile unsigned char sink = 0;
	size_t off, pg = (size_t)sysconf(_SC_PAGESIZE);

	if (pg == 0 || pg > 65536)
		pg = 4096;
	for (off = 0; off < t->len; off += pg) {
		if ((off & ((size_t)255 * 4096)) == 0 &&
		    __atomic_load_n(&t->stop, __ATOMIC_RELAXED))
			break;
		sink += t->map[off];
	}
	(void)sink;
	return NULL;
}

/* Starts the toucher on the main database's mapping, if it has one. */
static void
toucher_start(sqlite3 *db, struct toucher *t)
{
	sqlite3_file *f = NULL;
	struct rafile *r;

	memset(t, 0, sizeof(*t));
	if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &f) !=
	    SQLITE_OK || f == NULL || f->pMethods != &ra_io)
		return;
	r = (struct rafile *)(void *)f;
	if (r->map == NULL)
		return;
	t->map = r->map;
	t->len = (size_t)r->maplen;
	t->started = pthread_create(&t->th, NULL, toucher_main, t) == 0;
}

static void
toucher_stop(struct toucher *t)
{
	if (!t->started)
		return;
	__atomic_store_n(&t->stop, 1, __ATOMIC_RELAXED);
	pthread_join(t->th, NULL);
	t->started = 0;
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
	struct vctx	*v;
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
	struct vctx *v = pp->v;
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
	struct vctx *v = pp->v;
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
fill_nodes(struct vctx *v, struct vbatch *b)
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
hand_over(struct vctx *v, struct pipe *pp, struct vbatch *b, int threaded)
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
static uint64_t
scan_records(struct vctx *v)
{
	static const int cols[] = { 1, 2, 5, 6, 7, 8, 9, 10, 11, 12 };
	sqlite3_stmt *st = NULL;
	struct pipe pp;
	struct vbatch *bs[NBATCH], *b;
	struct vfail rf, *w;
	struct vrow *r;
	struct toucher tc;
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
		fail(v, -1, "schema", "records/merkle_nodes unreadable: %s",
		    sqlite3_errmsg(v->db));
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
		error(v, "out of memory");
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
		toucher_start(v->db, &tc);
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
		error(v, "out of memory");
		goto done;
	}
	/* The failure the sequential order meets first. */
	w = rf.set ? &rf : NULL;
	if (pp.cf.set && (w == NULL || pp.cf.pos < w->pos ||
	    (pp.cf.pos == w->pos && pp.cf.rank < w->rank)))
		w = &pp.cf;
	n = pp.ts.n;
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

		aud_tree_root(pp.ts.t, root);
		aud_hex(root, AUD_HASH_LEN, rh);
		json_object_set_new(v->rep, "root", json_string(rh));
		check_ok(v, "records", "contiguous, canonical, hashed, linked");
		check_ok(v, "merkle", "every stored node recomputed");
	}
done:
	toucher_stop(&tc);
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
	if (aud_store_open_vfs(uri, 0, ra_name(), &v.db, e, sizeof(e)) == -1) {
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
	/* A log key is named after its log's origin (reference §3.6): a
	 * log under another origin is not the log the pinned keys vouch
	 * for, even when one of them signed its checkpoints. */
	if (v.npinned > 0) {
		for (i = 0; i < v.npinned; i++)
			if (strcmp(aud_key_name(v.pinned[i]), v.origin) == 0)
				break;
		if (i == v.npinned) {
			fail(&v, -1, "meta", "log origin %s is not the name of "
			    "a pinned key", v.origin);
			goto out;
		}
	}
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
