/*
 * sink_file: the file transport. A batch is appended and fsynced (the file
 * and, once, its directory entry) before the cursor moves, so that a line
 * in the file is a line that was acknowledged, and a torn last line left by
 * a crash is cut, never glued to the next.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/sink.h"

static int
put_all(int fd, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, p, n)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * A crash or a full disk can leave a torn last line. Nothing after the last
 * newline was ever acknowledged (the cursor moves only after fsync), so it
 * is cut off rather than glued to the next line.
 */
static int
repair_tail(int fd, off_t size)
{
	char buf[4096];
	off_t end = size, at;
	ssize_t n, i;

	if (size == 0)
		return 0;
	if (pread(fd, buf, 1, size - 1) != 1)
		return -1;
	if (buf[0] == '\n')
		return 0;
	while (end > 0) {
		at = end > (off_t)sizeof(buf) ? end - (off_t)sizeof(buf) : 0;
		if ((n = pread(fd, buf, (size_t)(end - at), at)) <= 0)
			return -1;
		for (i = n - 1; i >= 0; i--)
			if (buf[i] == '\n')
				return ftruncate(fd, at + i + 1);
		end = at;
	}
	return ftruncate(fd, 0);
}

int
aud_sk_send_file(struct aud_sink *s, struct aud_sk_batch *b, char *err,
    size_t errlen)
{
	struct stat sb;
	char *buf = NULL, *dir;
	size_t total = 0, off = 0, i;
	int fd, created = 0, e, dfd;

	if ((fd = open(s->target, O_RDWR | O_APPEND | O_CLOEXEC |
	    O_NOFOLLOW | O_NONBLOCK)) == -1 && errno == ENOENT) {
		fd = open(s->target, O_RDWR | O_APPEND | O_CREAT | O_EXCL |
		    O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
		created = fd != -1;
	}
	if (fd == -1) {
		aud_seterr(err, errlen, "%s: %s", s->target, strerror(errno));
		return -1;
	}
	/* A FIFO or a device could block the feed or swallow it. */
	if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode)) {
		aud_seterr(err, errlen, "%s: not a regular file", s->target);
		close(fd);
		errno = EINVAL;
		return -1;
	}
	if (repair_tail(fd, sb.st_size) == -1 || fstat(fd, &sb) == -1) {
		e = errno;
		aud_seterr(err, errlen, "%s: torn last line: %s", s->target,
		    strerror(e));
		close(fd);
		errno = e;
		return -1;
	}
	for (i = 0; i < b->n; i++)
		total += b->it[i].blen + 1;
	if ((buf = malloc(total ? total : 1)) == NULL) {
		close(fd);
		aud_seterr(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < b->n; i++) {
		memcpy(buf + off, b->it[i].body, b->it[i].blen);
		off += b->it[i].blen;
		buf[off++] = '\n';
	}
	if (put_all(fd, buf, total) == -1 || fsync(fd) == -1) {
		e = errno;
		if (ftruncate(fd, sb.st_size) == -1) {
			/* Left torn: repair_tail cuts it next time. */
		}
		close(fd);
		free(buf);
		aud_seterr(err, errlen, "%s: %s", s->target, strerror(e));
		errno = e;
		return -1;
	}
	free(buf);
	if (close(fd) == -1) {
		aud_seterr(err, errlen, "%s: %s", s->target, strerror(errno));
		return -1;
	}
	if (created)
		s->dir_synced = 0;
	if (!s->dir_synced) {
		/* The file's name must survive a crash as well as its lines,
		 * before the cursor moves: once per new file (and once per
		 * start, for a file a crash may have just created). */
		if ((dir = strdup(s->target)) == NULL) {
			aud_seterr(err, errlen, "out of memory");
			return -1;
		}
		dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		e = dfd == -1 || fsync(dfd) == -1 ? errno : 0;
		if (dfd != -1)
			close(dfd);
		free(dir);
		if (e != 0) {
			aud_seterr(err, errlen, "%s: directory: %s", s->target,
			    strerror(e));
			errno = e;
			return -1;
		}
		s->dir_synced = 1;
	}
	return 0;
}

