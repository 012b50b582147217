/*
 * sandbox_attach.c: attach mode of the sandbox manager. A sandbox can be
 * made around a network namespace that a provider made (a container's, a
 * pod's) instead of one of ours: netns/ns_attach.c wires it exactly as
 * ns_create wires its own and pins it under the same name, so the rest of
 * the manager (rules, DNS, bridge, audit, identity by namespace inode)
 * treats it as any other. What differs is here: the namespace is opened
 * and checked before the create is authorized, held open (s->att_fd) for
 * as long as the sandbox lives, so that no later path lookup can name
 * another namespace (a pid that died and was reused), and its removal
 * takes back only what the attach added.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gateway/sandbox.h"
#include "gateway/sandbox_int.h"
#include "netns/netns.h"

/* The sandbox whose namespace has identity dev/ino, or NULL. */
static const struct sandbox *
by_ident(const struct sbx *m, uint64_t dev, uint64_t ino)
{
	const struct sandbox *s;
	size_t i;

	for (i = 0; i < SBX_HASH; i++)
		for (s = m->by_id[i]; s != NULL; s = s->hnext)
			if (s->ns_known && (uint64_t)s->ns_dev == dev &&
			    (uint64_t)s->ns_ino == ino)
				return s;
	return NULL;
}

int
sb_attach_open(struct sbx *m, const struct sbx_spec *spec, struct sbx_rec *r,
    int *fd, enum sbx_err *why, char *msg, size_t msglen)
{
	const struct sandbox *other;
	char found[400];
	uint64_t dev, ino;
	int rc;

	*fd = -1;
	if (ns_attach_open(spec->attach, fd, &dev, &ino, msg, msglen) ==
	    -1) {
		/* The caller named something that is not there or not a
		 * namespace: the request's fault, not the daemon's. */
		*why = errno == ENOMEM || errno == EMFILE || errno == ENFILE ?
		    SBX_ERR_INTERNAL : SBX_ERR_INVALID;
		return -1;
	}
	if ((other = by_ident(m, dev, ino)) != NULL) {
		snprintf(msg, msglen, "attach: %s is already the namespace of "
		    "sandbox %s", spec->attach, other->rec.id);
		*why = SBX_ERR_EXISTS;
		goto fail;
	}
	if ((rc = ns_attach_probe(*fd, found, sizeof(found))) != 1) {
		if (rc == 0) {
			snprintf(msg, msglen, "attach: %s has a way out "
			    "already, refused: %s", spec->attach, found);
			*why = SBX_ERR_NETNS_BUSY;
		} else {
			snprintf(msg, msglen, "attach: %s: probe: %s",
			    spec->attach, strerror(errno));
			*why = SBX_ERR_KERNEL;
		}
		goto fail;
	}
	r->attached = 1;
	r->ns_dev = dev;
	r->ns_ino = ino;
	snprintf(r->attach_src, sizeof(r->attach_src), "%s", spec->attach);
	return 0;
fail:
	close(*fd);
	*fd = -1;
	return -1;
}

int
sb_attach_make(struct sandbox *s, char *err, size_t errlen)
{
	if (s->att_fd == -1) {
		snprintf(err, errlen, "attach: the namespace is not open");
		errno = EBADF;
		return -1;
	}
	return ns_attach(&s->spec, s->att_fd, &s->rec.prior, err, errlen);
}

int
sb_attach_adopt(struct sandbox *s)
{
	struct stat st;
	int fd;

	if ((fd = ns_netns_fd(&s->spec)) == -1)
		return errno == ENOENT || errno == EINVAL ? 0 : -1;
	if (fstat(fd, &st) == -1) {
		close(fd);
		return -1;
	}
	if ((uint64_t)st.st_dev != s->rec.ns_dev ||
	    (uint64_t)st.st_ino != s->rec.ns_ino) {
		close(fd);
		return 0;
	}
	if (s->att_fd != -1)
		close(s->att_fd);
	s->att_fd = fd;
	return 1;
}

int
sb_ns_remove(const struct sandbox *s, char *err, size_t errlen)
{
	if (s->rec.attached)
		return ns_detach(&s->spec, s->att_fd, s->rec.prior, err,
		    errlen);
	return ns_delete(&s->spec, err, errlen);
}
