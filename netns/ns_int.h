/*
 * ns_int: what the files of the namespace side of netns/ (ns.c, ns_rtnl.c,
 * ns_enter.c) share and nobody else sees: a small rtnetlink client over
 * libmnl and the error-buffer helper. The socket of a struct ns_rtnl
 * belongs to the network namespace the calling thread was in when it was
 * made, whatever the thread does afterwards: that is what lets ns_create
 * talk to the host and the new namespace at once.
 */
#ifndef SLUICE_NETNS_NS_INT_H
#define SLUICE_NETNS_NS_INT_H

#include <netinet/in.h>

#include <stddef.h>
#include <stdint.h>

struct ns_rtnl;
struct nlmsghdr;

/* ns_seterr: formats into err (if err != NULL and errlen > 0), appending
 * ": strerror(errno)" when errnum != 0. Leaves errno as errnum (or as it
 * was when errnum is 0). */
void	ns_seterr(char *err, size_t errlen, int errnum, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));

/* ns_rtnl_new: a NETLINK_ROUTE socket in the calling thread's current
 * network namespace. NULL with errno on failure. */
struct ns_rtnl	*ns_rtnl_new(void);
void		 ns_rtnl_free(struct ns_rtnl *r);

/* The requests below wait for the kernel's answer: 0 on success, -1 with
 * the kernel's errno otherwise. */

/* ns_rtnl_link_index: ifindex of `name` (> 0), -1/ENODEV if absent. */
int	ns_rtnl_link_index(struct ns_rtnl *r, const char *name);
/* ns_rtnl_link_up: sets IFF_UP on ifindex. */
int	ns_rtnl_link_up(struct ns_rtnl *r, int ifindex);
/* ns_rtnl_link_del: deletes link `name`; -1/ENODEV if absent. */
int	ns_rtnl_link_del(struct ns_rtnl *r, const char *name);
/* ns_rtnl_veth_add: one request making veth `name` (down) here and its
 * peer `peer` (down) directly in the namespace of peer_nsfd. EEXIST if
 * `name` exists. */
int	ns_rtnl_veth_add(struct ns_rtnl *r, const char *name,
	    const char *peer, int peer_nsfd);
/* ns_rtnl_addr_add: addr/prefixlen on ifindex (scope global). With
 * replace != 0 an existing identical address is not an error. */
int	ns_rtnl_addr_add(struct ns_rtnl *r, int ifindex,
	    const struct in_addr *addr, uint8_t prefixlen, int replace);
/* ns_rtnl_route_default: default route via gw out of ifindex (main). */
int	ns_rtnl_route_default(struct ns_rtnl *r, int ifindex,
	    const struct in_addr *gw);
/* ns_rtnl_link_peer: ifindex of `name` (> 0) and, in *link_nsid, the id
 * (as seen from here) of the namespace its peer lives in, -1 if it has
 * none. -1/ENODEV if absent. */
int	ns_rtnl_link_peer(struct ns_rtnl *r, const char *name, int *link_nsid);
/* ns_rtnl_inet_conf: sets the IPv4 options ids[i] (IPV4_DEVCONF_*, the
 * files of /proc/sys/net/ipv4/conf/<dev>/) to vals[i] on ifindex, in one
 * request; 1 <= n <= 32. -1/EINVAL for a bad id or count. */
int	ns_rtnl_inet_conf(struct ns_rtnl *r, int ifindex, const int *ids,
	    const uint32_t *vals, size_t n);
/* ns_rtnl_nsid: the id this namespace gives the namespace of nsfd, -1
 * with errno 0 if it has none. */
int	ns_rtnl_nsid(struct ns_rtnl *r, int nsfd);
/* ns_rtnl_link_retire: takes ifindex out of service without waiting for
 * the kernel's unregistration: down, addr/prefixlen removed, renamed to
 * newname. */
int	ns_rtnl_link_retire(struct ns_rtnl *r, int ifindex,
	    const struct in_addr *addr, uint8_t prefixlen, const char *newname);
/* ns_rtnl_link_names: every link whose name starts with prefix, as a
 * sorted NULL-terminated array (caller frees with ns_names_free); count in
 * *n. Out-parameters set only on success. */
int	ns_rtnl_link_names(struct ns_rtnl *r, const char *prefix,
	    char ***names, size_t *n);

/* ns_names_sort: sorts names[0..n) and NULL-terminates it (the
 * array has room for n + 1). */
void	ns_names_sort(char **names, size_t n);

/* ---------------------------------------- ns.c, shared with ns_attach.c
 * The pieces of ns_create that attaching an existing namespace reuses. */

struct ns_spec;

/* ns_procfs_get: an fd of the root of the private procfs instance (the
 * caller closes it), or -1 when there is none (then /proc serves). */
int	ns_procfs_get(void);
/* ns_sysctl_put: writes val to the sysctl open at fd and closes fd. */
int	ns_sysctl_put(int fd, const char *val);
/* ns_sysctl_write: writes val to <procfs>/rel (pfd from ns_procfs_get,
 * or -1 for /proc), in the calling thread's namespace at open time. */
int	ns_sysctl_write(int pfd, const char *rel, const char *val);
/* ns_conf6_open: <procfs>/sys/net/ipv6/conf of the calling thread's
 * namespace as a directory fd; -1 with *none = 1 when the kernel has no
 * IPv6, -1 with *none = 0 and errno on failure. */
int	ns_conf6_open(int pfd, int *none);
/* ns_ipv6_conf_open: dev's disable_ipv6 under the directory c6. */
int	ns_ipv6_conf_open(int c6, const char *dev, int flags);
/* ns_path_join: dir/name into buf; -1/ENAMETOOLONG if it does not fit. */
int	ns_path_join(char *buf, size_t len, const char *dir, const char *name);
/* ns_etc_remove: the regular files of dir, then dir; absent is fine. */
int	ns_etc_remove(const char *dir);
/* ns_resolv_write: dir/resolv.conf naming service. */
int	ns_resolv_write(const char *dir, const struct in_addr *service);
/* ns_etc_make: the directory etc (<etc_dir>/<netns>) and its
 * resolv.conf; *made = 1 once the directory exists. */
int	ns_etc_make(const struct ns_spec *s, const char *etc, int *made,
	    char *err, size_t errlen);
/* ns_inside_links: the veth pair (host_if through host, eth0 in the
 * namespace of nsfd; *linked = 1 once it exists), IPv6 off on eth0 (c6:
 * the namespace's IPv6 conf directory, -1 for none), and through in (a
 * socket inside): lo up, eth0 with s's address, up, default route via the
 * host side. The calling thread is inside the namespace. */
int	ns_inside_links(const struct ns_spec *s, struct ns_rtnl *host,
	    struct ns_rtnl *in, int nsfd, int c6, int *linked, char *err,
	    size_t errlen);
/* ns_begin: the first steps of ns_create and ns_attach: s checked, the
 * pin's and the etc directory's paths (PATH_MAX bytes each), the host's
 * rtnetlink socket (*host), a procfs fd (*pfd, may be -1) and the pin
 * reserved (O_EXCL: EEXIST if taken). On failure nothing is left. */
int	ns_begin(const struct ns_spec *s, char *pin, char *etc,
	    struct ns_rtnl **host, int *pfd, char *err, size_t errlen);
/* ns_remove: ns_delete, or with inside != NULL the removal of an
 * attached namespace: the host link deleted synchronously (never retired:
 * the namespace lives on), then inside(arg, err, errlen) to set back what
 * was changed in it, then the pin and etc directory. Tries every part;
 * the first error is reported. */
int	ns_remove(const struct ns_spec *s,
	    int (*inside)(void *arg, char *err, size_t errlen), void *arg,
	    char *err, size_t errlen);
/* ns_host_side: the host end of s's veth set up (IPv6 off, no proxy ARP,
 * strict rp_filter, host_addr, up), through host (the host's socket). */
int	ns_host_side(const struct ns_spec *s, struct ns_rtnl *host, int pfd,
	    char *err, size_t errlen);

/* ----------------------------------------------- ns_rtnl.c: dumps */

/* ns_rtnl_dump: a dump request of type (RTM_GETLINK, RTM_GETADDR,
 * RTM_GETROUTE) for family, each answer handed to cb (libmnl's mnl_cb_t:
 * int cb(const struct nlmsghdr *, void *)) with data. */
int	ns_rtnl_dump(struct ns_rtnl *r, uint16_t type, uint8_t family,
	    int (*cb)(const struct nlmsghdr *, void *), void *data);
/* ns_rtnl_link_down: clears IFF_UP on ifindex. */
int	ns_rtnl_link_down(struct ns_rtnl *r, int ifindex);

#endif /* SLUICE_NETNS_NS_INT_H */
