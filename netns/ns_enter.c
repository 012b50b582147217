/*
 * ns_enter: what `ip netns exec` does before exec, for `sluice exec`:
 * join the sandbox's network namespace, take a private view of the mounts
 * so that /sys describes that namespace and /etc shows the sandbox's own
 * resolv.conf. It lives apart from ns.c because it runs in a different
 * process (the one about to become the sandboxed command) and, unlike
 * everything else here, does not come back.
 */
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "netns/netns.h"
#include "netns/ns_int.h"

static int
name_ok(const char *netns)
{
	size_t	plen = strlen(NS_NETNS_PREFIX);

	return netns != NULL &&
	    strncmp(netns, NS_NETNS_PREFIX, plen) == 0 &&
	    ns_id_valid(netns + plen);
}

static int
dir_ok(const char *d)
{
	return d != NULL && d[0] == '/' && strstr(d, "/..") == NULL &&
	    strlen(d) < 64;
}

/* Bind each regular file of dir over /etc/<same name>. */
static int
bind_etc(const char *dir, char *err, size_t errlen)
{
	char		 src[PATH_MAX], dst[PATH_MAX];
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	int		 n;

	if ((d = opendir(dir)) == NULL) {
		/* No per-sandbox /etc: nothing to show. */
		if (errno == ENOENT)
			return 0;
		ns_seterr(err, errlen, errno, "open %s", dir);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		n = snprintf(src, sizeof(src), "%s/%s", dir, de->d_name);
		if (n < 0 || (size_t)n >= sizeof(src))
			goto toolong;
		n = snprintf(dst, sizeof(dst), "/etc/%s", de->d_name);
		if (n < 0 || (size_t)n >= sizeof(dst))
			goto toolong;
		/* Only plain files we made; a symlink there could point the
		 * bind anywhere. */
		if (lstat(src, &st) == -1 || !S_ISREG(st.st_mode))
			continue;
		if (mount(src, dst, "none", MS_BIND, NULL) == -1) {
			ns_seterr(err, errlen, errno, "bind %s on %s", src,
			    dst);
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	return 0;
toolong:
	closedir(d);
	ns_seterr(err, errlen, ENAMETOOLONG, "path in %s", dir);
	return -1;
}

int
ns_enter(const char *netns_dir, const char *etc_dir, const char *netns,
    char *err, size_t errlen)
{
	char		path[PATH_MAX];
	struct statvfs	vfs;
	unsigned long	flags = 0;
	int		fd, e;

	if (netns_dir == NULL)
		netns_dir = NS_NETNS_DIR_DEFAULT;
	if (etc_dir == NULL)
		etc_dir = NS_ETC_DIR_DEFAULT;
	if (!name_ok(netns) || !dir_ok(netns_dir) || !dir_ok(etc_dir)) {
		ns_seterr(err, errlen, EINVAL,
		    "bad namespace name or directory");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", netns_dir, netns);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		ns_seterr(err, errlen, errno, "open %s", path);
		return -1;
	}
	/* setns refuses anything that is not a network namespace, so a
	 * bare reservation left by a crash cannot be "entered". */
	if (setns(fd, CLONE_NEWNET) == -1) {
		e = errno;
		close(fd);
		ns_seterr(err, errlen, e, "setns %s", path);
		return -1;
	}
	close(fd);
	if (unshare(CLONE_NEWNS) == -1) {
		ns_seterr(err, errlen, errno, "unshare(CLONE_NEWNS)");
		return -1;
	}
	/* Don't let any mounts propagate back to the parent. */
	if (mount("", "/", "none", MS_SLAVE | MS_REC, NULL) == -1) {
		ns_seterr(err, errlen, errno, "make / rslave");
		return -1;
	}
	/* A sysfs instance shows the namespace of whoever mounts it. Drop
	 * the old one; if that is impossible, overlay it, read-only if it
	 * was, since a read-only mount cannot be shadowed read-write. */
	if (umount2("/sys", MNT_DETACH) == -1 && statvfs("/sys", &vfs) == 0 &&
	    (vfs.f_flag & ST_RDONLY))
		flags = MS_RDONLY;
	if (mount(netns, "/sys", "sysfs", flags, NULL) == -1) {
		ns_seterr(err, errlen, errno, "mount /sys");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", etc_dir, netns);
	return bind_etc(path, err, errlen);
}
