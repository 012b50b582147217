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

#endif /* SLUICE_NETNS_NS_INT_H */
