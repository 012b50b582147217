/*
 * verify_ra: a read-ahead SQLite VFS for the verifier's scan, and the
 * helper thread that touches the mapping ahead of the reader. It is a
 * performance device only -- every byte still comes through SQLite's own
 * rules -- and sits apart from the checks so that a reader of those need
 * not read a VFS.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "audit/verify.h"

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
const char *
aud_vf_ra_name(void)
{
	pthread_once(&ra_once, ra_register);
	return ra_ok ? RA_VFS : NULL;
}


static void *
toucher_main(void *arg)
{
	struct aud_vf_toucher *t = arg;
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
void
aud_vf_toucher_start(sqlite3 *db, struct aud_vf_toucher *t)
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

void
aud_vf_toucher_stop(struct aud_vf_toucher *t)
{
	if (!t->started)
		return;
	__atomic_store_n(&t->stop, 1, __ATOMIC_RELAXED);
	pthread_join(t->th, NULL);
	t->started = 0;
}

