/*
 * ns_attach: wiring a network namespace Sluice did not make (a container's,
 * a pod's) exactly as ns_create wires its own, and taking back only that.
 *
 * A provider such as Docker (`--network none`), containerd or a CNI
 * runtime makes the namespace and puts its processes in it; Sluice adds
 * the veth pair, addresses, default route and sysctls of its own
 * sandboxes, and pins the namespace at <netns_dir>/sluice-<id> like one it
 * made, so that everything downstream (the firewall by host link, the
 * identity by namespace inode, `sluice exec`, reconciliation) is the same
 * code. What differs is removal: the namespace and its processes belong to
 * the provider, so the link is deleted (not retired with the namespace,
 * which lives on), the sysctls changed are set back to what they were, and
 * only the pin is dropped.
 *
 * The namespace is named by the fd the caller opened (ns_attach_open),
 * never by its path again: /proc/<pid>/ns/net names another namespace
 * once that pid is gone and reused, so the path is read once and the
 * identity (device and inode) taken from that open file.
 *
 * A namespace that already has a way out (an interface other than lo,
 * an address beyond loopback, a route not through lo) is refused: its
 * traffic would not pass Sluice's rules. The refusal says what was found.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <arpa/inet.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

#include "netns/netns.h"
#include "netns/ns_int.h"

#define THREAD_NETNS	"/proc/thread-self/ns/net"
#define LO_IFINDEX	1		/* in every namespace */

/* ------------------------------------------------------------ opening */

int
ns_attach_path_valid(const char *path)
{
	size_t i, n;

	if (path == NULL || path[0] != '/' ||
	    (n = strnlen(path, NS_ATTACH_PATH_MAX + 1)) > NS_ATTACH_PATH_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (path[i] < 0x21 || path[i] > 0x7e)
			return 0;
	return 1;
}

int
ns_attach_open(const char *path, int *fdp, uint64_t *dev, uint64_t *ino,
    char *err, size_t errlen)
{
	struct statfs	sf;
	struct stat	st, own;
	char		re[64];
	int		pfd, fd, type;

	if (!ns_attach_path_valid(path)) {
		ns_seterr(err, errlen, EINVAL, "attach: want an absolute path "
		    "of at most %d printable characters", NS_ATTACH_PATH_MAX);
		return -1;
	}
	/* O_PATH first: the path is the caller's, and opening for real
	 * something that is not a namespace (a device) could have effects.
	 * /proc/<pid>/ns/net is a link that must be followed. */
	if ((pfd = open(path, O_PATH | O_CLOEXEC)) == -1) {
		ns_seterr(err, errlen, errno, "attach: %s", path);
		return -1;
	}
	if (fstatfs(pfd, &sf) == -1 || sf.f_type != NSFS_MAGIC) {
		close(pfd);
		ns_seterr(err, errlen, EINVAL, "attach: %s is not a namespace",
		    path);
		return -1;
	}
	/* The same file for real, through the O_PATH fd: no second walk
	 * of a path that may have changed meanwhile. */
	snprintf(re, sizeof(re), "/proc/self/fd/%d", pfd);
	fd = open(re, O_RDONLY | O_CLOEXEC);
	close(pfd);
	if (fd == -1) {
		ns_seterr(err, errlen, errno, "attach: open %s", path);
		return -1;
	}
	if ((type = ioctl(fd, NS_GET_NSTYPE)) != CLONE_NEWNET) {
		close(fd);
		ns_seterr(err, errlen, EINVAL, "attach: %s is not a network "
		    "namespace", path);
		return -1;
	}
	if (fstat(fd, &st) == -1 || stat(THREAD_NETNS, &own) == -1) {
		ns_seterr(err, errlen, errno, "attach: stat %s", path);
		close(fd);
		return -1;
	}
	/* Wiring the daemon's own namespace would put the host behind a
	 * sandbox's rules and its default route. */
	if (st.st_dev == own.st_dev && st.st_ino == own.st_ino) {
		close(fd);
		ns_seterr(err, errlen, EINVAL, "attach: %s is the daemon's own "
		    "network namespace", path);
		return -1;
	}
	*fdp = fd;
	*dev = (uint64_t)st.st_dev;
	*ino = (uint64_t)st.st_ino;
	return 0;
}

/* ------------------------------------------------------------ probing */

/* What a probe saw; `out` collects the words of a refusal. */
struct probe {
	char	*out;
	size_t	 len, used;
	int	 found;		/* a way out seen */
	int	 lo_up;
	char	 names[64][IFNAMSIZ];	/* by ifindex, when small */
};

static void
say(struct probe *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
say(struct probe *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	p->found = 1;
	if (p->out == NULL || p->used + 1 >= p->len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(p->out + p->used, p->len - p->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		p->used += (size_t)n < p->len - p->used ? (size_t)n :
		    p->len - p->used - 1;
}

static const char *
ifname(const struct probe *p, unsigned idx, char *buf, size_t len)
{
	if (idx < 64 && p->names[idx][0] != '\0')
		return p->names[idx];
	snprintf(buf, len, "if%u", idx);
	return buf;
}

static int
attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t t = mnl_attr_get_type(a);

	if (t < 32)
		tb[t] = a;
	return MNL_CB_OK;
}

/* The header of a dump answer of type (hdrlen bytes) with its
 * attributes in tb[32], or NULL for another message. */
static const void *
msg_parse(const struct nlmsghdr *nlh, uint16_t type, size_t hdrlen,
    const struct nlattr **tb)
{
	if (nlh->nlmsg_type != type || mnl_nlmsg_get_payload_len(nlh) < hdrlen)
		return NULL;
	(void)mnl_attr_parse(nlh, (unsigned)hdrlen, attr_cb, tb);
	return mnl_nlmsg_get_payload(nlh);
}

static int
link_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nlattr *tb[32] = { 0 };
	const struct ifinfomsg *ifm;
	struct probe *p = data;
	const char *name = "?";

	if ((ifm = msg_parse(nlh, RTM_NEWLINK, sizeof(*ifm), tb)) == NULL)
		return MNL_CB_OK;
	if (tb[IFLA_IFNAME] != NULL &&
	    mnl_attr_validate(tb[IFLA_IFNAME], MNL_TYPE_NUL_STRING) == 0)
		name = mnl_attr_get_str(tb[IFLA_IFNAME]);
	if (ifm->ifi_index > 0 && ifm->ifi_index < 64)
		snprintf(p->names[ifm->ifi_index], IFNAMSIZ, "%s", name);
	if (ifm->ifi_index == LO_IFINDEX) {
		p->lo_up = (ifm->ifi_flags & IFF_UP) != 0;
		return MNL_CB_OK;
	}
	say(p, "%sinterface %s (%s)", p->used ? "; " : "", name,
	    (ifm->ifi_flags & IFF_UP) ? "up" : "down");
	return MNL_CB_OK;
}

static int
addr_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nlattr *tb[32] = { 0 };
	const struct ifaddrmsg *ifa;
	struct probe *p = data;
	const struct nlattr *a;
	char s[INET6_ADDRSTRLEN], nb[16];
	const uint8_t *b;

	if ((ifa = msg_parse(nlh, RTM_NEWADDR, sizeof(*ifa), tb)) == NULL)
		return MNL_CB_OK;
	a = tb[IFA_LOCAL] != NULL ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
	if (a == NULL || (ifa->ifa_family == AF_INET ?
	    mnl_attr_get_payload_len(a) != 4 :
	    mnl_attr_get_payload_len(a) != 16))
		return MNL_CB_OK;
	b = mnl_attr_get_payload(a);
	/* Loopback addresses on lo are every namespace's. */
	if (ifa->ifa_index == LO_IFINDEX && ((ifa->ifa_family == AF_INET &&
	    b[0] == 127) || (ifa->ifa_family == AF_INET6 &&
	    memcmp(b, &in6addr_loopback, 16) == 0)))
		return MNL_CB_OK;
	inet_ntop(ifa->ifa_family, b, s, sizeof(s));
	say(p, "%saddress %s/%u on %s", p->used ? "; " : "", s,
	    (unsigned)ifa->ifa_prefixlen, ifname(p, ifa->ifa_index, nb,
	    sizeof(nb)));
	return MNL_CB_OK;
}

static int
route_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nlattr *tb[32] = { 0 };
	const struct rtmsg *rtm;
	struct probe *p = data;
	char dst[INET6_ADDRSTRLEN] = "default", via[INET6_ADDRSTRLEN + 5] = "",
	    nb[16];
	uint32_t table, oif = 0;

	if ((rtm = msg_parse(nlh, RTM_NEWROUTE, sizeof(*rtm), tb)) == NULL)
		return MNL_CB_OK;
	table = rtm->rtm_table;
	if (tb[RTA_TABLE] != NULL &&
	    mnl_attr_validate(tb[RTA_TABLE], MNL_TYPE_U32) == 0)
		table = mnl_attr_get_u32(tb[RTA_TABLE]);
	if (tb[RTA_OIF] != NULL &&
	    mnl_attr_validate(tb[RTA_OIF], MNL_TYPE_U32) == 0)
		oif = mnl_attr_get_u32(tb[RTA_OIF]);
	/* The local table and lo's own routes lead nowhere outside. */
	if (table == RT_TABLE_LOCAL || rtm->rtm_type != RTN_UNICAST ||
	    oif == LO_IFINDEX)
		return MNL_CB_OK;
	if (tb[RTA_DST] != NULL && (mnl_attr_get_payload_len(tb[RTA_DST]) ==
	    4 || mnl_attr_get_payload_len(tb[RTA_DST]) == 16))
		inet_ntop(rtm->rtm_family, mnl_attr_get_payload(tb[RTA_DST]),
		    dst, sizeof(dst));
	if (tb[RTA_GATEWAY] != NULL &&
	    (mnl_attr_get_payload_len(tb[RTA_GATEWAY]) == 4 ||
	    mnl_attr_get_payload_len(tb[RTA_GATEWAY]) == 16)) {
		memcpy(via, " via ", 6);
		inet_ntop(rtm->rtm_family,
		    mnl_attr_get_payload(tb[RTA_GATEWAY]), via + 5,
		    sizeof(via) - 5);
	}
	say(p, "%sroute %s/%u%s dev %s", p->used ? "; " : "", dst,
	    (unsigned)rtm->rtm_dst_len, via, oif != 0 ? ifname(p, oif, nb,
	    sizeof(nb)) : "?");
	return MNL_CB_OK;
}

/* Enters nsfd in the calling thread just long enough to make a socket
 * there; NULL with errno. */
static struct ns_rtnl *
rtnl_in(int nsfd)
{
	struct ns_rtnl *r;
	int saved, e;

	if ((saved = open(THREAD_NETNS, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	if (setns(nsfd, CLONE_NEWNET) == -1) {
		e = errno;
		close(saved);
		errno = e;
		return NULL;
	}
	r = ns_rtnl_new();
	e = errno;
	if (setns(saved, CLONE_NEWNET) == -1)
		abort();	/* a thread stranded in a sandbox: never go on */
	close(saved);
	errno = e;
	return r;
}

/* The probe through socket r (in the namespace); -1 with errno. */
static int
probe_run(struct ns_rtnl *r, struct probe *p)
{
	if (ns_rtnl_dump(r, RTM_GETLINK, AF_UNSPEC, link_cb, p) == -1 ||
	    ns_rtnl_dump(r, RTM_GETADDR, AF_INET, addr_cb, p) == -1 ||
	    ns_rtnl_dump(r, RTM_GETROUTE, AF_INET, route_cb, p) == -1)
		return -1;
	/* No IPv6 in the kernel is no IPv6 way out. */
	if ((ns_rtnl_dump(r, RTM_GETADDR, AF_INET6, addr_cb, p) == -1 ||
	    ns_rtnl_dump(r, RTM_GETROUTE, AF_INET6, route_cb, p) == -1) &&
	    errno != EAFNOSUPPORT)
		return -1;
	return 0;
}

int
ns_attach_probe(int nsfd, char *found, size_t foundlen)
{
	struct ns_rtnl *r;
	struct probe *p;
	int rc, e;

	if (found != NULL && foundlen > 0)
		found[0] = '\0';
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return -1;
	p->out = found;
	p->len = foundlen;
	if ((r = rtnl_in(nsfd)) == NULL) {
		e = errno;
		free(p);
		errno = e;
		return -1;
	}
	rc = probe_run(r, p);
	e = errno;
	ns_rtnl_free(r);
	if (rc == 0)
		rc = p->found ? 0 : 1;
	free(p);
	errno = e;
	return rc;
}

/* ------------------------------------------------------------ wiring */

/* Reads a 0/1 sysctl open at fd (closed here): the digit, or -1. */
static int
sysctl_get(int fd)
{
	char buf[8];
	ssize_t n;

	if (fd == -1)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 1 || (buf[0] != '0' && buf[0] != '1'))
		return -1;
	return buf[0] - '0';
}

static int
sys_open_ro(int pfd, const char *rel)
{
	char path[128];

	if (pfd != -1)
		return openat(pfd, rel, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%s", rel);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* The sysctls and lo set back to *prior's record, inside the namespace
 * of nsfd (the thread enters and leaves it). Tries all; -1 with err. */
static int
restore_inside(int nsfd, uint32_t prior, char *err, size_t errlen)
{
	struct ns_rtnl *in = NULL;
	int saved, pfd, c6, none, fd, rc = 0;

	if (!(prior & NS_PRIOR_KNOWN))
		return 0;
	if ((saved = open(THREAD_NETNS, O_RDONLY | O_CLOEXEC)) == -1) {
		ns_seterr(err, errlen, errno, "open own netns");
		return -1;
	}
	if (setns(nsfd, CLONE_NEWNET) == -1) {
		ns_seterr(err, errlen, errno, "enter attached netns");
		close(saved);
		return -1;
	}
	pfd = ns_procfs_get();
	if ((prior & NS_PRIOR_V6_DEFAULT) &&
	    (c6 = ns_conf6_open(pfd, &none)) != -1) {
		if ((fd = ns_ipv6_conf_open(c6, "default", O_WRONLY)) == -1 ||
		    ns_sysctl_put(fd, "0") == -1) {
			ns_seterr(err, errlen, errno, "restore IPv6 default");
			rc = -1;
		}
		close(c6);
	}
	if ((prior & NS_PRIOR_FORWARD) && ns_sysctl_write(pfd,
	    "sys/net/ipv4/ip_forward", "1") == -1 && rc == 0) {
		ns_seterr(err, errlen, errno, "restore ip_forward");
		rc = -1;
	}
	if ((prior & NS_PRIOR_LO_DOWN) && ((in = ns_rtnl_new()) == NULL ||
	    ns_rtnl_link_down(in, LO_IFINDEX) == -1) && rc == 0) {
		ns_seterr(err, errlen, errno, "set lo down again");
		rc = -1;
	}
	ns_rtnl_free(in);
	if (pfd != -1)
		close(pfd);
	if (setns(saved, CLONE_NEWNET) == -1)
		abort();	/* see rtnl_in */
	close(saved);
	return rc;
}

/* What ns_attach does inside; the thread is in the namespace on entry
 * and the caller brings it back. */
static int
attach_inside(const struct ns_spec *s, struct ns_rtnl *host, int pfd,
    int nsfd, int lo_up, uint32_t *prior, int *linked, char *err,
    size_t errlen)
{
	struct ns_rtnl *in = NULL;
	int c6, none, v, ret = -1;

	*prior = NS_PRIOR_KNOWN | (lo_up ? 0 : NS_PRIOR_LO_DOWN);
	if ((c6 = ns_conf6_open(pfd, &none)) == -1 && !none) {
		ns_seterr(err, errlen, errno, "IPv6 conf inside");
		return -1;
	}
	/* "default" on before the peer is made, so that it never has an
	 * IPv6 address; "all" is left alone: it would change the
	 * provider's other devices (lo), and eth0 is the only way out. */
	if (c6 != -1) {
		v = sysctl_get(ns_ipv6_conf_open(c6, "default", O_RDONLY));
		if (v == 0)
			*prior |= NS_PRIOR_V6_DEFAULT;
		if (v != 1 && (ns_sysctl_put(ns_ipv6_conf_open(c6, "default",
		    O_WRONLY), "1")) == -1) {
			ns_seterr(err, errlen, errno, "disable IPv6 inside");
			goto out;
		}
	}
	if ((v = sysctl_get(sys_open_ro(pfd, "sys/net/ipv4/ip_forward"))) ==
	    1)
		*prior |= NS_PRIOR_FORWARD;
	if (v != 0 && ns_sysctl_write(pfd, "sys/net/ipv4/ip_forward",
	    "0") == -1) {
		ns_seterr(err, errlen, errno, "disable forwarding inside");
		goto out;
	}
	if ((in = ns_rtnl_new()) == NULL) {
		ns_seterr(err, errlen, errno, "rtnetlink socket inside");
		goto out;
	}
	if (ns_inside_links(s, host, in, nsfd, c6, linked, err, errlen) == -1)
		goto out;
	ret = 0;
out:
	if (c6 != -1)
		close(c6);
	ns_rtnl_free(in);
	return ret;
}

int
ns_attach(const struct ns_spec *s, int nsfd, uint32_t *prior, char *err,
    size_t errlen)
{
	char pin[PATH_MAX], etc[PATH_MAX], src[64], found[512];
	struct ns_rtnl *host = NULL;
	struct probe lo = { 0 };
	int saved = -1, pfd = -1, inside = 0, reserved = 0, mounted = 0,
	    linked = 0, etcdir = 0, e, r;

	*prior = 0;
	/* Again here, not only when the request was checked: something may
	 * have been added since. */
	if ((r = ns_attach_probe(nsfd, found, sizeof(found))) != 1) {
		if (r == 0)
			ns_seterr(err, errlen, EBUSY, "the namespace has a way "
			    "out already: %s", found);
		else
			ns_seterr(err, errlen, errno, "probe the namespace");
		return -1;
	}
	if (ns_begin(s, pin, etc, &host, &pfd, err, errlen) == -1)
		return -1;
	reserved = 1;
	/* The pin is the namespace of nsfd itself, not whatever its path
	 * names by now. */
	snprintf(src, sizeof(src), "/proc/self/fd/%d", nsfd);
	if (mount(src, pin, "none", MS_BIND, NULL) == -1) {
		ns_seterr(err, errlen, errno, "pin %s", pin);
		goto fail;
	}
	mounted = 1;
	/* lo's state for the record, read through the probe's walk. */
	{
		struct ns_rtnl *in = rtnl_in(nsfd);

		if (in == NULL || ns_rtnl_dump(in, RTM_GETLINK, AF_UNSPEC,
		    link_cb, &lo) == -1) {
			ns_seterr(err, errlen, errno, "links inside");
			ns_rtnl_free(in);
			goto fail;
		}
		ns_rtnl_free(in);
	}
	if ((saved = open(THREAD_NETNS, O_RDONLY | O_CLOEXEC)) == -1) {
		ns_seterr(err, errlen, errno, "open own netns");
		goto fail;
	}
	if (setns(nsfd, CLONE_NEWNET) == -1) {
		ns_seterr(err, errlen, errno, "enter the namespace");
		goto fail;
	}
	inside = 1;
	if (attach_inside(s, host, pfd, nsfd, lo.lo_up, prior, &linked, err,
	    errlen) == -1)
		goto fail;
	if (setns(saved, CLONE_NEWNET) == -1)
		abort();	/* see rtnl_in */
	inside = 0;
	if (ns_host_side(s, host, pfd, err, errlen) == -1)
		goto fail;
	if (ns_etc_make(s, etc, &etcdir, err, errlen) == -1)
		goto fail;
	close(saved);
	if (pfd != -1)
		close(pfd);
	ns_rtnl_free(host);
	return 0;
fail:
	e = errno;
	if (inside && setns(saved, CLONE_NEWNET) == -1)
		abort();
	/* Deleted, not retired: the namespace outlives the pin. */
	if (linked)
		(void)ns_rtnl_link_del(host, s->host_if);
	(void)restore_inside(nsfd, *prior, NULL, 0);
	*prior = 0;
	if (etcdir)
		(void)ns_etc_remove(etc);
	if (mounted)
		(void)umount2(pin, MNT_DETACH);
	if (reserved)
		(void)unlink(pin);
	if (saved != -1)
		close(saved);
	if (pfd != -1)
		close(pfd);
	ns_rtnl_free(host);
	errno = e;
	return -1;
}

/* What ns_detach sets back inside, for ns_remove. */
struct restore {
	int		nsfd;
	uint32_t	prior;
};

static int
restore_cb(void *arg, char *err, size_t errlen)
{
	const struct restore *r = arg;

	/* No fd: a namespace whose identity is not known is not touched. */
	if (r->nsfd == -1)
		return 0;
	return restore_inside(r->nsfd, r->prior, err, errlen);
}

int
ns_detach(const struct ns_spec *s, int nsfd, uint32_t prior, char *err,
    size_t errlen)
{
	struct restore r = { nsfd, prior };

	return ns_remove(s, restore_cb, &r, err, errlen);
}
