/*
 * status.c: what the kernel says a process may do, read from
 * /proc/<pid>/status. The tests use it to see a child's drop from the
 * outside (not through the child's own word), the daemon to report its
 * children. The file is the kernel's, but a bounded reader costs nothing
 * and keeps a surprise (a Groups: line of 65536 groups) from growing a
 * buffer: lines are read into a fixed buffer, and one that does not fit
 * is skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/privsep/priv.h"

#define PRIV_STATUS_LINE	4096
#define PRIV_STATUS_MAX		(1024 * 1024)

/* Bits of struct priv_state found, to tell missing from zero. */
enum {
	F_UID = 1 << 0, F_GID = 1 << 1, F_INH = 1 << 2, F_PRM = 1 << 3,
	F_EFF = 1 << 4, F_BND = 1 << 5, F_AMB = 1 << 6, F_NNP = 1 << 7,
	F_SEC = 1 << 8, F_ALL = (1 << 9) - 1
};

/* One unsigned number in base at s, then optional blanks: the end of
 * it in *end. -1 when there is none or it exceeds max. */
static int
number(const char *s, int base, unsigned long long max,
    unsigned long long *v, const char **end)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!(base == 16 ? (*s >= '0' && *s <= '9') ||
	    (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F') :
	    (*s >= '0' && *s <= '9')))
		return -1;
	errno = 0;
	*v = strtoull(s, &e, base);
	if (errno != 0 || *v > max)
		return -1;
	*end = e;
	return 0;
}

/* "Uid:\treal\teffective\tsaved\tfs": the first two. */
static int
two_ids(const char *s, unsigned long long *real, unsigned long long *eff)
{
	const char *e;

	if (number(s, 10, (uid_t)-1, real, &e) == -1 ||
	    (*e != ' ' && *e != '\t') ||
	    number(e, 10, (uid_t)-1, eff, &e) == -1)
		return -1;
	return 0;
}

/* A value alone on its line ("CapEff:\t0000000000000000"). */
static int
alone(const char *s, int base, unsigned long long max,
    unsigned long long *v)
{
	const char *e;

	if (number(s, base, max, v, &e) == -1)
		return -1;
	while (*e == ' ' || *e == '\t')
		e++;
	return *e == '\0' ? 0 : -1;
}

/* One NUL-ended line without its newline: the field it gives into out,
 * its bit into *found; -1 when a field of ours is malformed. */
static int
parse_line(const char *line, struct priv_state *out, unsigned *found)
{
	static const struct {
		const char *key;
		unsigned bit;
		size_t off;
	} caps[] = {
		{ "CapInh:", F_INH, offsetof(struct priv_state, cap_inh) },
		{ "CapPrm:", F_PRM, offsetof(struct priv_state, cap_prm) },
		{ "CapEff:", F_EFF, offsetof(struct priv_state, cap_eff) },
		{ "CapBnd:", F_BND, offsetof(struct priv_state, cap_bnd) },
		{ "CapAmb:", F_AMB, offsetof(struct priv_state, cap_amb) },
	};
	unsigned long long a, b;
	size_t i;

	if (strncmp(line, "Uid:", 4) == 0) {
		if (two_ids(line + 4, &a, &b) == -1)
			return -1;
		out->uid_real = (uid_t)a;
		out->uid_eff = (uid_t)b;
		*found |= F_UID;
	} else if (strncmp(line, "Gid:", 4) == 0) {
		if (two_ids(line + 4, &a, &b) == -1)
			return -1;
		out->gid_real = (gid_t)a;
		out->gid_eff = (gid_t)b;
		*found |= F_GID;
	} else if (strncmp(line, "NoNewPrivs:", 11) == 0) {
		if (alone(line + 11, 10, 1, &a) == -1)
			return -1;
		out->no_new_privs = (int)a;
		*found |= F_NNP;
	} else if (strncmp(line, "Seccomp:", 8) == 0) {
		if (alone(line + 8, 10, 2, &a) == -1)
			return -1;
		out->seccomp = (int)a;
		*found |= F_SEC;
	} else {
		for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
			size_t kl = strlen(caps[i].key);

			if (strncmp(line, caps[i].key, kl) != 0)
				continue;
			if (alone(line + kl, 16, UINT64_MAX, &a) == -1)
				return -1;
			*(uint64_t *)(void *)((char *)out + caps[i].off) = a;
			*found |= caps[i].bit;
		}
	}
	return 0;
}

int
priv_status(pid_t pid, struct priv_state *out)
{
	char path[64], buf[PRIV_STATUS_LINE];
	size_t len = 0, total = 0;
	unsigned found = 0;
	int fd, skipping = 0, bad = 0, saved;
	ssize_t n;

	memset(out, 0, sizeof(*out));
	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/status");
	else
		snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	while (total < PRIV_STATUS_MAX) {
		char *nl, *start;

		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			saved = errno;
			close(fd);
			errno = saved;
			return -1;
		}
		if (n == 0)
			break;
		total += (size_t)n;
		len += (size_t)n;
		buf[len] = '\0';
		start = buf;
		while ((nl = memchr(start, '\n', len - (size_t)(start - buf)))
		    != NULL) {
			*nl = '\0';
			if (!skipping && parse_line(start, out, &found) == -1)
				bad = 1;
			skipping = 0;
			start = nl + 1;
		}
		len -= (size_t)(start - buf);
		memmove(buf, start, len);
		if (len == sizeof(buf) - 1) {
			/* A line longer than the buffer: not one of ours. */
			skipping = 1;
			len = 0;
		}
	}
	close(fd);
	if (len > 0 && !skipping) {
		buf[len] = '\0';	/* a last line without newline */
		if (parse_line(buf, out, &found) == -1)
			bad = 1;
	}
	if (bad || found != F_ALL) {
		errno = EPROTO;
		return -1;
	}
	return 0;
}
