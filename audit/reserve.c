/*
 * reserve: space on the log's volume held back for the records that must
 * never be refused. A sandbox or a peer that makes the daemon record a
 * great deal can fill the volume; if that made the removal of a sandbox
 * impossible to record, the removal would be refused and the sandbox would
 * live on. So a file of a fixed size is kept beside the database. When
 * SQLite reports the volume full, the writer deletes it, which gives the
 * space back at once, and from then on writes only what must be written
 * (audit/writer.c decides what that is), until the volume has room for the
 * reserve again and it is made anew.
 */
#include <sys/statvfs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/priv.h"

struct aud_reserve {
	char		*path;		/* <db>.reserve */
	char		*db;		/* what statvfs asks about */
	uint64_t	 bytes;
	int		 held;		/* the file exists at full size */
};

struct aud_reserve *
aud_reserve_new(const char *db_path, uint64_t bytes)
{
	struct aud_reserve *r;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->bytes = bytes;
	if (asprintf(&r->path, "%s.reserve", db_path) == -1) {
		free(r);
		return NULL;
	}
	if ((r->db = strdup(db_path)) == NULL) {
		free(r->path);
		free(r);
		return NULL;
	}
	return r;
}

void
aud_reserve_free(struct aud_reserve *r)
{
	if (r == NULL)
		return;
	free(r->path);
	free(r->db);
	free(r);
}

int
aud_reserve_make(struct aud_reserve *r)
{
	uint64_t avail, total;
	int fd, e;

	if (r->held)
		return 0;
	/* Never more than an eighth of the volume: a reserve that takes a
	 * small volume whole leaves nothing to write in. */
	if (aud_volume_space(r->db, &avail, &total) == 0 &&
	    r->bytes > total / 8)
		r->bytes = total / 8;
	if ((fd = open(r->path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    0600)) == -1)
		return -1;
	/* Blocks allocated, not a sparse hole: the point is that the
	 * volume counts them as used until they are given back. */
	if ((e = posix_fallocate(fd, 0, (off_t)r->bytes)) != 0) {
		close(fd);
		(void)unlink(r->path);
		errno = e;
		return -1;
	}
	if (fsync(fd) == -1) {
		e = errno;
		close(fd);
		(void)unlink(r->path);
		errno = e;
		return -1;
	}
	close(fd);
	r->held = 1;
	return 0;
}

int
aud_reserve_release(struct aud_reserve *r)
{
	if (r == NULL || !r->held)
		return 0;
	r->held = 0;
	/* Unlinked, not truncated: no descriptor is open on it, so its
	 * blocks are free the moment the name goes. */
	if (unlink(r->path) == -1 && errno != ENOENT)
		return 0;
	return 1;
}

int
aud_reserve_restore(struct aud_reserve *r)
{
	uint64_t avail, total;

	if (r->held)
		return 0;
	/* Twice the reserve free before it is taken again: taking it on a
	 * volume that is nearly full would only make the next commit fail
	 * and give it back. */
	if (aud_volume_space(r->db, &avail, &total) == -1 ||
	    avail < 2 * r->bytes) {
		errno = ENOSPC;
		return -1;
	}
	return aud_reserve_make(r);
}

int
aud_volume_space(const char *path, uint64_t *avail, uint64_t *total)
{
	struct statvfs sv;

	if (statvfs(path, &sv) == -1)
		return -1;
	/* f_bavail: what an unprivileged writer could still use is what
	 * the kernel shows; root may have a few percent more on ext4. */
	*avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	*total = (uint64_t)sv.f_blocks * sv.f_frsize;
	return 0;
}
