/*
 * ns: sandbox network namespaces, from address pool to teardown.
 *
 * ns_create follows iproute2's `ip netns add` (reserve the name with
 * O_EXCL, unshare(CLONE_NEWNET) in the calling thread, bind-mount
 * /proc/thread-self/ns/net onto the reservation, setns back) and does all
 * the in-namespace work during that single excursion: sysctls are opened
 * while inside (they belong to the opener's namespace) and the sandbox's
 * rtnetlink socket is made there, while the host socket was made before.
 * No fork, no exec, no per-call mount-propagation work: that is what keeps
 * a create and a delete in the low milliseconds. Every step records what it
 * made so a failure can undo exactly that.
 */
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <linux/ip.h>
#include <linux/magic.h>
#include <netinet/in.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netns/netns.h"
#include "netns/ns_int.h"

/* The calling thread's own namespace: /proc/self would name the thread
 * group leader's, which differs once a thread has unshared. */
#define THREAD_NETNS	"/proc/thread-self/ns/net"

static int	unpin(const char *pin, const char *etc, int first, char *err,
		    size_t errlen);

void
ns_seterr(char *err, size_t errlen, int errnum, const char *fmt, ...)
{
	va_list	 ap;
	size_t	 len;
	int	 saved = errno;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
		len = strlen(err);
		if (errnum != 0 && len < errlen)
			snprintf(err + len, errlen - len, ": %s",
			    strerror(errnum));
	}
	errno = errnum != 0 ? errnum : saved;
}

int
ns_id_valid(const char *id)
{
	size_t	i;

	if (id == NULL || id[0] == '\0' || id[0] == '-')
		return 0;
	for (i = 0; id[i] != '\0'; i++) {
		if (i >= NS_ID_MAX)
			return 0;
		if (!((id[i] >= 'a' && id[i] <= 'z') ||
		    (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
			return 0;
	}
	return 1;
}

int
ns_pool_addrs(const struct in_addr *pool_net, uint8_t pool_prefix,
    uint32_t index, struct in_addr *host, struct in_addr *sandbox,
    uint8_t *prefixlen)
{
	uint32_t	net, mask;
	uint64_t	slots;

	if (pool_net == NULL || host == NULL || sandbox == NULL ||
	    prefixlen == NULL || pool_prefix < 1 || pool_prefix > 29)
		goto inval;
	net = ntohl(pool_net->s_addr);
	mask = 0xffffffffu << (32 - pool_prefix);
	if ((net & ~mask) != 0)
		goto inval;
	/* The last /30 holds the service address: never a sandbox's. */
	slots = ((uint64_t)1 << (32 - pool_prefix)) / 4 - 1;
	if ((uint64_t)index >= slots)
		goto inval;
	host->s_addr = htonl(net + 4 * index + 1);
	sandbox->s_addr = htonl(net + 4 * index + 2);
	*prefixlen = 30;
	return 0;
inval:
	errno = EINVAL;
	return -1;
}

/* A directory we are given must be absolute and free of "." and ".."
 * components, so that names built on it stay where they seem to be. */
static int
dir_valid(const char *d, size_t cap)
{
	const char	*p;
	size_t		 len;

	if (d == NULL || (len = strnlen(d, cap)) == 0 || len >= cap ||
	    d[0] != '/')
		return 0;
	for (p = d; *p != '\0'; p++) {
		if (p[0] != '/')
			continue;
		if (p[1] == '.' && (p[2] == '/' || p[2] == '\0'))
			return 0;
		if (p[1] == '.' && p[2] == '.' && (p[3] == '/' || p[3] == '\0'))
			return 0;
	}
	return 1;
}

int
ns_spec_init(struct ns_spec *s, const char *id, uint32_t index,
    const struct in_addr *pool_net, uint8_t pool_prefix,
    const struct in_addr *service_addr, const char *netns_dir,
    const char *etc_dir, char *err, size_t errlen)
{
	if (s == NULL) {
		ns_seterr(err, errlen, EINVAL, "no spec");
		return -1;
	}
	memset(s, 0, sizeof(*s));
	if (netns_dir == NULL)
		netns_dir = NS_NETNS_DIR_DEFAULT;
	if (etc_dir == NULL)
		etc_dir = NS_ETC_DIR_DEFAULT;
	if (!ns_id_valid(id)) {
		ns_seterr(err, errlen, EINVAL, "invalid sandbox id");
		return -1;
	}
	if (service_addr == NULL) {
		ns_seterr(err, errlen, EINVAL, "no service address");
		return -1;
	}
	if (ns_pool_addrs(pool_net, pool_prefix, index, &s->host_addr,
	    &s->sandbox_addr, &s->prefixlen) == -1) {
		memset(s, 0, sizeof(*s));
		ns_seterr(err, errlen, EINVAL,
		    "slot %u is outside the address pool", index);
		return -1;
	}
	s->index = index;
	s->service_addr = *service_addr;
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->netns, sizeof(s->netns), NS_NETNS_PREFIX "%s", id);
	snprintf(s->host_if, sizeof(s->host_if), NS_LINK_PREFIX "%u", index);
	if (!dir_valid(netns_dir, sizeof(s->netns_dir)) ||
	    !dir_valid(etc_dir, sizeof(s->etc_dir))) {
		memset(s, 0, sizeof(*s));
		ns_seterr(err, errlen, EINVAL,
		    "directories must be absolute, without . or .., and "
		    "shorter than %zu bytes", sizeof(s->netns_dir));
		return -1;
	}
	snprintf(s->netns_dir, sizeof(s->netns_dir), "%s", netns_dir);
	snprintf(s->etc_dir, sizeof(s->etc_dir), "%s", etc_dir);
	if (ns_spec_valid(s, err, errlen) == -1) {
		memset(s, 0, sizeof(*s));
		return -1;
	}
	return 0;
}

int
ns_spec_valid(const struct ns_spec *s, char *err, size_t errlen)
{
	char		 want[sizeof(s->netns)];
	const char	*p;
	uint32_t	 h, b, v, mask;
	size_t		 len;

	if (s == NULL) {
		ns_seterr(err, errlen, EINVAL, "no spec");
		return -1;
	}
	/* Every string must end inside its array before anything reads it
	 * as a string: the spec may come from a less trusted process. */
	if (strnlen(s->id, sizeof(s->id)) == sizeof(s->id) ||
	    !ns_id_valid(s->id)) {
		ns_seterr(err, errlen, EINVAL, "spec: invalid sandbox id");
		return -1;
	}
	snprintf(want, sizeof(want), NS_NETNS_PREFIX "%s", s->id);
	if (strnlen(s->netns, sizeof(s->netns)) == sizeof(s->netns) ||
	    strcmp(s->netns, want) != 0) {
		ns_seterr(err, errlen, EINVAL,
		    "spec: netns must be \"%s\"", want);
		return -1;
	}
	len = strnlen(s->host_if, sizeof(s->host_if));
	if (len == sizeof(s->host_if) || len <= strlen(NS_LINK_PREFIX) ||
	    strncmp(s->host_if, NS_LINK_PREFIX, strlen(NS_LINK_PREFIX)) != 0) {
		ns_seterr(err, errlen, EINVAL,
		    "spec: host_if must be \"" NS_LINK_PREFIX "<name>\"");
		return -1;
	}
	for (p = s->host_if + strlen(NS_LINK_PREFIX); *p != '\0'; p++) {
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '-')) {
			ns_seterr(err, errlen, EINVAL,
			    "spec: bad character in host_if");
			return -1;
		}
	}
	if (!dir_valid(s->netns_dir, sizeof(s->netns_dir)) ||
	    !dir_valid(s->etc_dir, sizeof(s->etc_dir))) {
		ns_seterr(err, errlen, EINVAL,
		    "spec: directories must be absolute, without . or ..");
		return -1;
	}
	if (s->prefixlen != 30 && s->prefixlen != 31) {
		ns_seterr(err, errlen, EINVAL,
		    "spec: prefixlen must be 30 or 31");
		return -1;
	}
	h = ntohl(s->host_addr.s_addr);
	b = ntohl(s->sandbox_addr.s_addr);
	v = ntohl(s->service_addr.s_addr);
	mask = 0xffffffffu << (32 - s->prefixlen);
	if (h == b || (h & mask) != (b & mask) ||
	    (s->prefixlen == 30 && ((h & ~mask) == 0 || (h & ~mask) == 3 ||
	    (b & ~mask) == 0 || (b & ~mask) == 3))) {
		ns_seterr(err, errlen, EINVAL,
		    "spec: host and sandbox addresses must be the two hosts "
		    "of one /%u", s->prefixlen);
		return -1;
	}
	/* The sandbox reaches the service address through its default
	 * route; inside its own subnet it would be on-link and unreachable. */
	if (v == 0 || (v & mask) == (h & mask)) {
		ns_seterr(err, errlen, EINVAL,
		    "spec: service address inside the sandbox's subnet");
		return -1;
	}
	if (h == 0 || b == 0 || (h >> 24) == 127 || (h >> 28) >= 14 ||
	    (b >> 24) == 127 || (b >> 28) >= 14) {
		ns_seterr(err, errlen, EINVAL,
		    "spec: addresses must be unicast, not loopback");
		return -1;
	}
	return 0;
}

/*
 * Sysctls. A path under /proc/sys/net costs time in proportion to the
 * number of network namespaces on the machine: below /proc/sys/net each
 * namespace has its own "ipv4" and "ipv6" entries, with one parent and one
 * name, so the dentry cache keeps all of them in one hash chain, and a walk
 * through that component compares against the entry of every namespace
 * that ever looked there (each comparison taking the kernel's global
 * sysctl lock). With 1,000 sandboxes that was most of ns_create's time.
 *
 * So, first, ns_create walks as few such paths as it can: one per
 * namespace to the IPv6 conf directory, opening files relative to it, plus
 * ip_forward inside; the per-device IPv4 options go through rtnetlink
 * (ns_rtnl_inet_conf). Second, it walks them in a procfs instance of this
 * process's own: a detached mount (fsopen, fsmount) that no path leads to,
 * whose dentry cache holds only what ns_create put there. The instance is
 * shared by every call in the process and replaced after PROCFS_USES of
 * them, so that its chains stay short whatever the number of sandboxes
 * (the entries of namespaces that are gone leave with them; those of live
 * ones stay until the instance does). Dropping an instance costs about a
 * millisecond (the unmount and the superblock going), paid by one create
 * in PROCFS_USES: fewer than one in a hundred, so not even the 99th
 * percentile sees it. Where no private instance can be made (no fsopen,
 * no privilege), the machine's /proc serves, only slower.
 */
#define PROCFS_USES	128

static pthread_mutex_t	procfs_mtx = PTHREAD_MUTEX_INITIALIZER;
static int		procfs_fd = -1;		/* root of the instance */
static unsigned int	procfs_uses;

/* A new private procfs instance: the fd of its root, or -1. */
static int
procfs_new(void)
{
	int	fsfd, mfd, saved;

	if ((fsfd = fsopen("proc", FSOPEN_CLOEXEC)) == -1)
		return -1;
	if (fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == -1) {
		saved = errno;
		close(fsfd);
		errno = saved;
		return -1;
	}
	mfd = fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID |
	    MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	saved = errno;
	close(fsfd);
	errno = saved;
	return mfd;
}

/*
 * ns_procfs_get: for one ns_create, an fd of the root of the current private
 * procfs instance (the caller closes it), or -1 if there is none, in which
 * case sys_open falls back to /proc. An fd, not the shared one, so that a
 * replacement by another thread never pulls it from under the caller.
 */
int
ns_procfs_get(void)
{
	int	fd = -1, old = -1, nfd;

	pthread_mutex_lock(&procfs_mtx);
	if ((procfs_fd == -1 || procfs_uses >= PROCFS_USES) &&
	    (nfd = procfs_new()) != -1) {
		old = procfs_fd;
		procfs_fd = nfd;
		procfs_uses = 0;
	}
	if (procfs_fd != -1) {
		fd = fcntl(procfs_fd, F_DUPFD_CLOEXEC, 0);
		procfs_uses++;
	}
	pthread_mutex_unlock(&procfs_mtx);
	/* The old instance goes when its last user closes it. */
	if (old != -1)
		close(old);
	return fd;
}

/* Opens <procfs>/rel: in the instance of ns_procfs_get's fd pfd, or in /proc
 * when pfd is -1. */
static int
sys_open(int pfd, const char *rel, int flags)
{
	char	path[128];

	if (pfd != -1)
		return openat(pfd, rel, flags | O_CLOEXEC);
	if ((size_t)snprintf(path, sizeof(path), "/proc/%s", rel) >=
	    sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return open(path, flags | O_CLOEXEC);
}

/* Writes a short value to the sysctl file open at fd, and closes fd. */
int
ns_sysctl_put(int fd, const char *val)
{
	ssize_t	 n;
	size_t	 len = strlen(val);
	int	 saved;

	n = write(fd, val, len);
	saved = errno;
	close(fd);
	if (n != (ssize_t)len) {
		errno = n == -1 ? saved : EIO;
		return -1;
	}
	return 0;
}

/* Writes val to the sysctl <procfs>/rel (see sys_open). The file belongs
 * to the calling thread's network namespace when it is opened. */
int
ns_sysctl_write(int pfd, const char *rel, const char *val)
{
	int	fd;

	if ((fd = sys_open(pfd, rel, O_WRONLY)) == -1)
		return -1;
	return ns_sysctl_put(fd, val);
}

/*
 * The IPv6 conf directory (<procfs>/sys/net/ipv6/conf) of the calling
 * thread's current namespace, as a directory fd for ipv6_disable. -1 with
 * *none = 1 when the kernel has no IPv6 at all (ipv6.disable=1: the whole
 * tree is missing, which is as off as it gets); -1 with *none = 0 and
 * errno on a real failure.
 */
int
ns_conf6_open(int pfd, int *none)
{
	int	fd, e;

	*none = 0;
	fd = sys_open(pfd, "sys/net/ipv6/conf", O_RDONLY | O_DIRECTORY);
	if (fd == -1 && errno == ENOENT) {
		e = errno;
		if (pfd != -1 ? faccessat(pfd, "sys/net/ipv6", F_OK, 0) == -1 :
		    access("/proc/sys/net/ipv6", F_OK) == -1)
			*none = 1;
		errno = e;
	}
	return fd;
}

/* Opens dev's disable_ipv6 (dev may be "all", "default") under the
 * ns_conf6_open directory c6 with flags; the fd, or -1 with errno. */
int
ns_ipv6_conf_open(int c6, const char *dev, int flags)
{
	char	rel[64];

	if ((size_t)snprintf(rel, sizeof(rel), "%s/disable_ipv6", dev) >=
	    sizeof(rel)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return openat(c6, rel, flags | O_CLOEXEC);
}

/* Sets disable_ipv6 of dev (or "all", "default") in the namespace of the
 * ns_conf6_open directory c6; c6 == -1 (no IPv6 in the kernel) is a no-op. */
static int
ipv6_disable(int c6, const char *dev)
{
	int	fd;

	if (c6 == -1)
		return 0;
	if ((fd = ns_ipv6_conf_open(c6, dev, O_WRONLY)) == -1)
		return -1;
	return ns_sysctl_put(fd, "1");
}

/*
 * Like ipv6_disable, but reads first and writes only if IPv6 is still on.
 * Writing disable_ipv6 of "all" or of a device takes the kernel's RTNL
 * lock with a trylock that restarts the write until it succeeds: while
 * another task holds RTNL (the kernel tearing down the namespace of a
 * sandbox deleted a moment ago does, for a grace period or more) the write
 * spins, and on a busy machine each such write can cost milliseconds. A
 * read takes no lock. Used where the value is already inherited ("all"
 * covers lo, "default" covers a device made afterwards); should it not be
 * (another kernel), the write still happens, so the result is the same.
 */
static int
ipv6_ensure_off(int c6, const char *dev)
{
	char	buf[8];
	ssize_t	n;
	int	fd;

	if (c6 == -1)
		return 0;
	if ((fd = ns_ipv6_conf_open(c6, dev, O_RDONLY)) == -1)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n == 2 && buf[0] == '1' && buf[1] == '\n')
		return 0;
	return ipv6_disable(c6, dev);
}

int
ns_path_join(char *buf, size_t len, const char *dir, const char *name)
{
	int	n;

	n = snprintf(buf, len, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* Removes the regular files of dir and then dir itself. Absent is fine. */
int
ns_etc_remove(const char *dir)
{
	struct dirent	*de;
	DIR		*d;
	int		 dfd, ret = 0, first = 0;

	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		return errno == ENOENT ? 0 : -1;
	if ((d = fdopendir(dfd)) == NULL) {
		first = errno;
		close(dfd);
		errno = first;
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == -1 &&
		    errno != ENOENT && first == 0)
			first = errno;
	}
	closedir(d);
	if (rmdir(dir) == -1 && errno != ENOENT) {
		ret = -1;
		if (first == 0)
			first = errno;
	}
	if (first != 0) {
		errno = first;
		return -1;
	}
	return ret;
}

int
ns_resolv_write(const char *dir, const struct in_addr *service)
{
	char	path[PATH_MAX], line[128], a[INET_ADDRSTRLEN];
	ssize_t	n;
	int	fd, len, saved;

	if (ns_path_join(path, sizeof(path), dir, "resolv.conf") == -1)
		return -1;
	if (inet_ntop(AF_INET, service, a, sizeof(a)) == NULL)
		return -1;
	len = snprintf(line, sizeof(line), "nameserver %s\noptions edns0\n", a);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0644)) == -1)
		return -1;
	n = write(fd, line, (size_t)len);
	saved = errno;
	if (close(fd) == -1 && n == len) {
		n = -1;
		saved = errno;
	}
	if (n != len) {
		errno = n == -1 ? saved : EIO;
		return -1;
	}
	return 0;
}

/* Is path a mounted namespace file (as opposed to a bare reservation)? */
static int
is_nsfs(const char *path)
{
	struct statfs	st;

	if (statfs(path, &st) == -1)
		return -1;
	return st.f_type == NSFS_MAGIC;
}

int
ns_dirs_setup(const char *netns_dir, const char *etc_dir, char *err,
    size_t errlen)
{
	if (!dir_valid(netns_dir, 64) || !dir_valid(etc_dir, 64)) {
		ns_seterr(err, errlen, EINVAL,
		    "directories must be absolute, without . or ..");
		return -1;
	}
	if (mkdir(netns_dir, 0755) == -1 && errno != EEXIST) {
		ns_seterr(err, errlen, errno, "mkdir %s", netns_dir);
		return -1;
	}
	/* iproute2's dance: make it shared, or first make it a mount point
	 * (bind onto itself) so that it can be made shared. */
	if (mount("", netns_dir, "none", MS_SHARED | MS_REC, NULL) == -1) {
		if (errno != EINVAL) {
			ns_seterr(err, errlen, errno, "make %s shared",
			    netns_dir);
			return -1;
		}
		if (mount(netns_dir, netns_dir, "none", MS_BIND | MS_REC,
		    NULL) == -1) {
			ns_seterr(err, errlen, errno, "bind %s", netns_dir);
			return -1;
		}
		if (mount("", netns_dir, "none", MS_SHARED | MS_REC,
		    NULL) == -1) {
			ns_seterr(err, errlen, errno, "make %s shared",
			    netns_dir);
			return -1;
		}
	}
	if (mkdir(etc_dir, 0755) == -1 && errno != EEXIST) {
		ns_seterr(err, errlen, errno, "mkdir %s", etc_dir);
		return -1;
	}
	return 0;
}

int
ns_host_setup(const struct in_addr *service_addr, char *err, size_t errlen)
{
	struct ns_rtnl	*r;
	int		 lo;

	if (service_addr == NULL || service_addr->s_addr == 0) {
		ns_seterr(err, errlen, EINVAL, "no service address");
		return -1;
	}
	if ((r = ns_rtnl_new()) == NULL) {
		ns_seterr(err, errlen, errno, "rtnetlink socket");
		return -1;
	}
	if ((lo = ns_rtnl_link_index(r, "lo")) == -1) {
		ns_seterr(err, errlen, errno, "find lo");
		goto fail;
	}
	/* REPLACE makes a second start (or a restart) a no-op. */
	if (ns_rtnl_addr_add(r, lo, service_addr, 32, 1) == -1) {
		ns_seterr(err, errlen, errno, "service address on lo");
		goto fail;
	}
	if (ns_rtnl_link_up(r, lo) == -1) {
		ns_seterr(err, errlen, errno, "lo up");
		goto fail;
	}
	ns_rtnl_free(r);
	r = NULL;
	if (ns_sysctl_write(-1, "sys/net/ipv4/ip_forward", "1") == -1) {
		ns_seterr(err, errlen, errno, "enable ip_forward");
		return -1;
	}
	return ns_dirs_setup(NS_NETNS_DIR_DEFAULT, NS_ETC_DIR_DEFAULT, err,
	    errlen);
fail:
	ns_rtnl_free(r);
	return -1;
}

/* What ns_create has made so far, for the rollback. */
struct made {
	int	reserved, mounted, linked, etcdir;
};

int
ns_inside_links(const struct ns_spec *s, struct ns_rtnl *host,
    struct ns_rtnl *in, int nsfd, int c6, int *linked, char *err,
    size_t errlen)
{
	int	eth0;

	if (ns_rtnl_veth_add(host, s->host_if, NS_SANDBOX_IF, nsfd) == -1) {
		ns_seterr(err, errlen, errno, "create veth %s", s->host_if);
		return -1;
	}
	*linked = 1;
	if (ipv6_ensure_off(c6, NS_SANDBOX_IF) == -1) {
		ns_seterr(err, errlen, errno, "disable IPv6 on eth0");
		return -1;
	}
	/* The loopback device is ifindex 1 in every namespace. */
	if (ns_rtnl_link_up(in, 1) == -1) {
		ns_seterr(err, errlen, errno, "lo up inside");
		return -1;
	}
	if ((eth0 = ns_rtnl_link_index(in, NS_SANDBOX_IF)) == -1) {
		ns_seterr(err, errlen, errno, "find eth0");
		return -1;
	}
	if (ns_rtnl_addr_add(in, eth0, &s->sandbox_addr, s->prefixlen,
	    0) == -1) {
		ns_seterr(err, errlen, errno, "address on eth0");
		return -1;
	}
	if (ns_rtnl_link_up(in, eth0) == -1) {
		ns_seterr(err, errlen, errno, "eth0 up");
		return -1;
	}
	if (ns_rtnl_route_default(in, eth0, &s->host_addr) == -1) {
		ns_seterr(err, errlen, errno, "default route inside");
		return -1;
	}
	return 0;
}

/* The part of ns_create done inside the new namespace; the thread is in
 * it on entry and the caller brings it back. */
static int
create_inside(const struct ns_spec *s, struct ns_rtnl *host, int pfd,
    int nsfd, struct made *m, char *err, size_t errlen)
{
	struct ns_rtnl	*in = NULL;
	int		 c6, none, ret = -1;

	if ((c6 = ns_conf6_open(pfd, &none)) == -1 && !none) {
		ns_seterr(err, errlen, errno, "disable IPv6 inside");
		return -1;
	}
	/* Before the peer exists, so it inherits "default" as it is made
	 * and never has an IPv6 address, not even a link-local one.
	 * "default" takes no lock; "all" also turns it off on lo, the only
	 * device there is yet (see ipv6_ensure_off). */
	if (ipv6_disable(c6, "default") == -1 ||
	    ipv6_disable(c6, "all") == -1 ||
	    ipv6_ensure_off(c6, "lo") == -1) {
		ns_seterr(err, errlen, errno, "disable IPv6 inside");
		goto out;
	}
	/* A new namespace copies the host's ip_forward; a sandbox routes
	 * nothing. */
	if (ns_sysctl_write(pfd, "sys/net/ipv4/ip_forward", "0") == -1) {
		ns_seterr(err, errlen, errno, "disable forwarding inside");
		goto out;
	}
	if ((in = ns_rtnl_new()) == NULL) {
		ns_seterr(err, errlen, errno, "rtnetlink socket inside");
		goto out;
	}
	if (ns_inside_links(s, host, in, nsfd, c6, &m->linked, err,
	    errlen) == -1)
		goto out;
	ret = 0;
out:
	if (c6 != -1)
		close(c6);
	ns_rtnl_free(in);
	return ret;
}

/* Host side of the veth: IPv6 off before it is up, no proxy ARP, strict
 * reverse-path filtering (a sandbox cannot send with another's source). */
int
ns_host_side(const struct ns_spec *s, struct ns_rtnl *host, int pfd,
    char *err, size_t errlen)
{
	static const int	 ids[] = { IPV4_DEVCONF_PROXY_ARP,
				    IPV4_DEVCONF_RP_FILTER };
	static const uint32_t	 vals[] = { 0, 1 };
	int			 c6, none, idx, rc;

	if ((c6 = ns_conf6_open(pfd, &none)) == -1 && !none) {
		ns_seterr(err, errlen, errno, "disable IPv6 on %s", s->host_if);
		return -1;
	}
	rc = ipv6_disable(c6, s->host_if);
	if (c6 != -1)
		close(c6);
	if (rc == -1) {
		ns_seterr(err, errlen, errno, "disable IPv6 on %s", s->host_if);
		return -1;
	}
	if ((idx = ns_rtnl_link_index(host, s->host_if)) == -1) {
		ns_seterr(err, errlen, errno, "find %s", s->host_if);
		return -1;
	}
	if (ns_rtnl_inet_conf(host, idx, ids, vals,
	    sizeof(ids) / sizeof(ids[0])) == -1) {
		ns_seterr(err, errlen, errno, "IPv4 options of %s", s->host_if);
		return -1;
	}
	if (ns_rtnl_addr_add(host, idx, &s->host_addr, s->prefixlen,
	    0) == -1) {
		ns_seterr(err, errlen, errno, "address on %s", s->host_if);
		return -1;
	}
	if (ns_rtnl_link_up(host, idx) == -1) {
		ns_seterr(err, errlen, errno, "%s up", s->host_if);
		return -1;
	}
	return 0;
}

/*
 * ns_etc_make: <etc_dir>/<netns>/ (the path etc) with its resolv.conf
 * naming the service address. *made is set once the directory is there,
 * so that a failure after it knows to remove it.
 */
int
ns_etc_make(const struct ns_spec *s, const char *etc, int *made, char *err,
    size_t errlen)
{
	struct stat	 st;

	if (mkdir(etc, 0755) == -1) {
		/* The etc dir may be missing (ns_dirs_setup not run for
		 * it) or be a leftover of a crash: the caller's reservation
		 * of the pin says the name is ours now, so reuse it. */
		if (errno == ENOENT && mkdir(s->etc_dir, 0755) == -1 &&
		    errno != EEXIST) {
			ns_seterr(err, errlen, errno, "mkdir %s", s->etc_dir);
			return -1;
		}
		if (mkdir(etc, 0755) == -1 && errno != EEXIST) {
			ns_seterr(err, errlen, errno, "mkdir %s", etc);
			return -1;
		}
		/* Reused only if it is a real directory: a symlink there
		 * would send resolv.conf somewhere else. */
		if (lstat(etc, &st) == -1) {
			ns_seterr(err, errlen, errno, "stat %s", etc);
			return -1;
		}
		if (!S_ISDIR(st.st_mode)) {
			ns_seterr(err, errlen, ENOTDIR, "%s", etc);
			return -1;
		}
	}
	*made = 1;
	if (ns_resolv_write(etc, &s->service_addr) == -1) {
		ns_seterr(err, errlen, errno, "write %s/resolv.conf", etc);
		return -1;
	}
	return 0;
}

int
ns_begin(const struct ns_spec *s, char *pin, char *etc,
    struct ns_rtnl **host, int *pfd, char *err, size_t errlen)
{
	int	fd, e;

	*host = NULL;
	*pfd = -1;
	if (ns_spec_valid(s, err, errlen) == -1)
		return -1;
	if (ns_path_join(pin, PATH_MAX, s->netns_dir, s->netns) == -1 ||
	    ns_path_join(etc, PATH_MAX, s->etc_dir, s->netns) == -1) {
		ns_seterr(err, errlen, errno, "paths");
		return -1;
	}
	if ((*host = ns_rtnl_new()) == NULL) {
		ns_seterr(err, errlen, errno, "rtnetlink socket");
		return -1;
	}
	/* -1 (no private instance) is not an error: /proc serves then. */
	*pfd = ns_procfs_get();
	/* The reservation is what makes two creates of one name exclusive. */
	if ((fd = open(pin, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0)) == -1) {
		e = errno;
		ns_seterr(err, errlen, e, "reserve %s", pin);
		ns_rtnl_free(*host);
		*host = NULL;
		if (*pfd != -1)
			close(*pfd);
		*pfd = -1;
		errno = e;
		return -1;
	}
	close(fd);
	return 0;
}

int
ns_create(const struct ns_spec *s, char *err, size_t errlen)
{
	char		 pin[PATH_MAX], etc[PATH_MAX];
	struct made	 m = { 0 };
	struct ns_rtnl	*host = NULL;
	int		 saved = -1, nsfd = -1, pfd = -1, inside = 0, e;

	if (ns_begin(s, pin, etc, &host, &pfd, err, errlen) == -1)
		return -1;
	m.reserved = 1;
	if ((saved = open(THREAD_NETNS, O_RDONLY | O_CLOEXEC)) == -1) {
		ns_seterr(err, errlen, errno, "open own netns");
		goto fail;
	}
	if (unshare(CLONE_NEWNET) == -1) {
		ns_seterr(err, errlen, errno, "unshare(CLONE_NEWNET)");
		goto fail;
	}
	inside = 1;
	if (mount(THREAD_NETNS, pin, "none", MS_BIND, NULL) == -1) {
		ns_seterr(err, errlen, errno, "pin %s", pin);
		goto fail;
	}
	m.mounted = 1;
	if ((nsfd = open(THREAD_NETNS, O_RDONLY | O_CLOEXEC)) == -1) {
		ns_seterr(err, errlen, errno, "open new netns");
		goto fail;
	}
	if (create_inside(s, host, pfd, nsfd, &m, err, errlen) == -1)
		goto fail;
	if (setns(saved, CLONE_NEWNET) == -1) {
		ns_seterr(err, errlen, errno, "return to own netns");
		goto fail;
	}
	inside = 0;
	if (ns_host_side(s, host, pfd, err, errlen) == -1)
		goto fail;
	if (ns_etc_make(s, etc, &m.etcdir, err, errlen) == -1)
		goto fail;
	close(nsfd);
	close(saved);
	if (pfd != -1)
		close(pfd);
	ns_rtnl_free(host);
	return 0;

fail:
	e = errno;
	/* Back home first: the cleanup below must act on the host. */
	if (inside && setns(saved, CLONE_NEWNET) == -1) {
		/* Cannot happen with a valid fd of our own namespace. The
		 * thread is stranded; say so rather than clean up from the
		 * wrong place. */
		ns_seterr(err, errlen, errno,
		    "cannot return to own netns after failure");
		e = errno;
	}
	/* Only a link we made: a name that was taken stays as it was. If
	 * this fails, dropping the namespace below takes the peer and with
	 * it the host side, so the rollback still completes. */
	if (m.linked)
		(void)ns_rtnl_link_del(host, s->host_if);
	if (m.etcdir)
		(void)ns_etc_remove(etc);
	if (m.mounted)
		(void)umount2(pin, MNT_DETACH);
	if (m.reserved)
		(void)unlink(pin);
	if (nsfd != -1)
		close(nsfd);
	if (saved != -1)
		close(saved);
	if (pfd != -1)
		close(pfd);
	ns_rtnl_free(host);
	errno = e;
	return -1;
}

/*
 * Takes host_if out of the host. The fast way (retire) is only for a link
 * whose peer is in the namespace pinned at pin, which is about to lose its
 * pin: the kernel then removes the pair with the namespace. Anything else
 * (no pin, a peer elsewhere, a retire that fails) is deleted and waited
 * for. -1/ENODEV when there is no such link.
 */
static int
host_link_remove(const struct ns_spec *s, struct ns_rtnl *host,
    const char *pin)
{
	struct statfs	st;
	char		gone[16];
	int		idx, link_nsid = -1, nsid = -1, fd;

	if ((idx = ns_rtnl_link_peer(host, s->host_if, &link_nsid)) == -1)
		return -1;
	if (link_nsid >= 0 &&
	    (fd = open(pin, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) != -1) {
		if (fstatfs(fd, &st) == 0 && st.f_type == NSFS_MAGIC)
			nsid = ns_rtnl_nsid(host, fd);
		close(fd);
	}
	if (nsid >= 0 && nsid == link_nsid) {
		snprintf(gone, sizeof(gone), NS_RETIRED_PREFIX "%d", idx);
		if (ns_rtnl_link_retire(host, idx, &s->host_addr,
		    s->prefixlen, gone) == 0)
			return 0;
	}
	return ns_rtnl_link_del(host, s->host_if);
}

int
ns_delete(const struct ns_spec *s, char *err, size_t errlen)
{
	return ns_remove(s, NULL, NULL, err, errlen);
}

int
ns_remove(const struct ns_spec *s, int (*inside)(void *, char *, size_t),
    void *arg, char *err, size_t errlen)
{
	char		 pin[PATH_MAX], etc[PATH_MAX], e2[256];
	struct ns_rtnl	*host;
	int		 first = 0, r;

	if (ns_spec_valid(s, err, errlen) == -1)
		return -1;
	if (ns_path_join(pin, sizeof(pin), s->netns_dir, s->netns) == -1 ||
	    ns_path_join(etc, sizeof(etc), s->etc_dir, s->netns) == -1) {
		ns_seterr(err, errlen, errno, "paths");
		return -1;
	}
	if ((host = ns_rtnl_new()) == NULL) {
		ns_seterr(err, errlen, errno, "rtnetlink socket");
		first = errno;
	} else {
		/* A namespace that outlives its pin (attached) keeps no
		 * retired link: it is deleted, and eth0 inside with it. */
		r = inside != NULL ? ns_rtnl_link_del(host, s->host_if) :
		    host_link_remove(s, host, pin);
		if (r == -1 && errno != ENODEV) {
			ns_seterr(err, errlen, errno, "delete %s", s->host_if);
			first = errno;
		}
		ns_rtnl_free(host);
	}
	if (inside != NULL && inside(arg, e2, sizeof(e2)) == -1 &&
	    first == 0) {
		first = errno != 0 ? errno : EIO;
		ns_seterr(err, errlen, 0, "%s", e2);
	}
	return unpin(pin, etc, first, err, errlen);
}

/* The last steps of a removal: the pin unmounted and unlinked, the etc
 * directory removed; absent parts are fine. first is the errno of an
 * earlier step (0 for none), whose message is in err already and stays
 * the one reported. */
static int
unpin(const char *pin, const char *etc, int first, char *err, size_t errlen)
{
	/* EINVAL: not a mount point (a reservation, or already gone). */
	if (umount2(pin, MNT_DETACH | UMOUNT_NOFOLLOW) == -1 &&
	    errno != EINVAL && errno != ENOENT && first == 0) {
		ns_seterr(err, errlen, errno, "unmount %s", pin);
		first = errno;
	}
	if (unlink(pin) == -1 && errno != ENOENT && first == 0) {
		ns_seterr(err, errlen, errno, "unlink %s", pin);
		first = errno;
	}
	if (ns_etc_remove(etc) == -1 && first == 0) {
		ns_seterr(err, errlen, errno, "remove %s", etc);
		first = errno;
	}
	if (first != 0) {
		errno = first;
		return -1;
	}
	return 0;
}

int
ns_exists(const struct ns_spec *s)
{
	char		 pin[PATH_MAX];
	struct ns_rtnl	*host;
	int		 r;

	if (ns_spec_valid(s, NULL, 0) == -1)
		return -1;
	if (ns_path_join(pin, sizeof(pin), s->netns_dir, s->netns) == -1)
		return -1;
	if ((r = is_nsfs(pin)) == -1)
		return errno == ENOENT ? 0 : -1;
	if (r == 0)
		return 0;
	if ((host = ns_rtnl_new()) == NULL)
		return -1;
	r = ns_rtnl_link_index(host, s->host_if);
	if (r == -1 && errno == ENODEV)
		r = 0;
	else if (r > 0)
		r = 1;
	ns_rtnl_free(host);
	return r;
}

int
ns_netns_fd(const struct ns_spec *s)
{
	char		pin[PATH_MAX];
	struct statfs	st;
	int		fd;

	if (ns_spec_valid(s, NULL, 0) == -1)
		return -1;
	if (ns_path_join(pin, sizeof(pin), s->netns_dir, s->netns) == -1)
		return -1;
	if ((fd = open(pin, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return -1;
	if (fstatfs(fd, &st) == -1 || st.f_type != NSFS_MAGIC) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

static int
names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void
ns_names_sort(char **names, size_t n)
{
	qsort(names, n, sizeof(*names), names_cmp);
	names[n] = NULL;
}

void
ns_names_free(char **names)
{
	size_t	i;

	if (names == NULL)
		return;
	for (i = 0; names[i] != NULL; i++)
		free(names[i]);
	free(names);
}

static int
list_pins(const char *dir, char ***out, size_t *nout)
{
	struct dirent	*de;
	DIR		*d;
	char		**v = NULL, **nv;
	size_t		 n = 0, cap = 0, plen = strlen(NS_NETNS_PREFIX);

	if ((d = opendir(dir)) == NULL) {
		if (errno != ENOENT)
			return -1;
	} else {
		while ((de = readdir(d)) != NULL) {
			if (strncmp(de->d_name, NS_NETNS_PREFIX, plen) != 0 ||
			    !ns_id_valid(de->d_name + plen))
				continue;
			if (n + 1 >= cap) {
				nv = reallocarray(v, cap * 2 + 8, sizeof(*v));
				if (nv == NULL)
					goto nomem;
				v = nv;
				cap = cap * 2 + 8;
			}
			if ((v[n] = strdup(de->d_name)) == NULL)
				goto nomem;
			n++;
		}
		closedir(d);
	}
	if (v == NULL && (v = calloc(1, sizeof(*v))) == NULL)
		return -1;
	ns_names_sort(v, n);
	*out = v;
	*nout = n;
	return 0;
nomem:
	closedir(d);
	while (n > 0)
		free(v[--n]);
	free(v);
	errno = ENOMEM;
	return -1;
}

int
ns_list(const char *netns_dir, char ***netns, size_t *nnetns, char ***links,
    size_t *nlinks, char *err, size_t errlen)
{
	struct ns_rtnl	*r;
	char		**pins, **ls;
	size_t		 np, nl;

	if (netns_dir == NULL)
		netns_dir = NS_NETNS_DIR_DEFAULT;
	if (netns == NULL || links == NULL || !dir_valid(netns_dir, 64)) {
		ns_seterr(err, errlen, EINVAL, "bad arguments");
		return -1;
	}
	if (list_pins(netns_dir, &pins, &np) == -1) {
		ns_seterr(err, errlen, errno, "list %s", netns_dir);
		return -1;
	}
	if ((r = ns_rtnl_new()) == NULL ||
	    ns_rtnl_link_names(r, NS_LINK_PREFIX, &ls, &nl) == -1) {
		ns_seterr(err, errlen, errno, "list links");
		ns_rtnl_free(r);
		ns_names_free(pins);
		return -1;
	}
	ns_rtnl_free(r);
	*netns = pins;
	*links = ls;
	if (nnetns != NULL)
		*nnetns = np;
	if (nlinks != NULL)
		*nlinks = nl;
	return 0;
}
