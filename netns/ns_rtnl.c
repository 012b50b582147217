/*
 * ns_rtnl: the few rtnetlink requests a sandbox namespace needs (links,
 * addresses, a default route), over libmnl. Each request carries NLM_F_ACK
 * and is answered before the next one is sent, so a failure maps to exactly
 * one step of ns_create and its rollback knows what exists. The daemon never
 * shells out to `ip`; this file is what it uses instead.
 */
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/vfs.h>

#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/net_namespace.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <netinet/in.h>

#include <linux/magic.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

#include "netns/netns.h"
#include "netns/ns_int.h"

/* Big enough for one link dump part; the kernel sizes parts to this. */
#define NS_RTNL_BUFSZ	32768

struct ns_rtnl {
	struct mnl_socket	*nl;
	uint32_t		 portid;
	uint32_t		 seq;
	char			 buf[NS_RTNL_BUFSZ];
};

struct ns_rtnl *
ns_rtnl_new(void)
{
	struct ns_rtnl	*r;
	int		 saved;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	if ((r->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC)) == NULL)
		goto fail;
	if (mnl_socket_bind(r->nl, 0, MNL_SOCKET_AUTOPID) == -1)
		goto fail;
	r->portid = mnl_socket_get_portid(r->nl);
	/* Any start works: answers are matched on our own portid and seq. */
	r->seq = 1;
	return r;
fail:
	saved = errno;
	ns_rtnl_free(r);
	errno = saved;
	return NULL;
}

void
ns_rtnl_free(struct ns_rtnl *r)
{
	if (r == NULL)
		return;
	if (r->nl != NULL)
		mnl_socket_close(r->nl);
	free(r);
}

/*
 * Sends nlh (already built in r->buf) and runs cb over the answers until
 * the ACK, the end of a dump, or an error. The send buffer is reused for
 * receiving: the request is gone by then.
 */
static int
rtnl_talk(struct ns_rtnl *r, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	uint32_t	 seq;
	ssize_t		 n;
	int		 ret;

	seq = nlh->nlmsg_seq = r->seq++;
	nlh->nlmsg_flags |= NLM_F_ACK;
	if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) == -1)
		return -1;
	do {
		n = mnl_socket_recvfrom(r->nl, r->buf, sizeof(r->buf));
		if (n == -1 && errno == EINTR) {
			/* The answer is still queued; a signal is no error. */
			ret = MNL_CB_OK;
			continue;
		}
		if (n == -1)
			return -1;
		ret = mnl_cb_run(r->buf, n, seq, r->portid, cb, data);
	} while (ret == MNL_CB_OK);
	return ret == MNL_CB_STOP ? 0 : -1;
}

static struct nlmsghdr *
rtnl_msg(struct ns_rtnl *r, uint16_t type, uint16_t flags)
{
	struct nlmsghdr	*nlh;

	memset(r->buf, 0, MNL_ALIGN(sizeof(struct nlmsghdr)) + 256);
	nlh = mnl_nlmsg_put_header(r->buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	return nlh;
}

static int
link_index_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct ifinfomsg	*ifm;
	int			*idx = data;

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifm))
		return MNL_CB_OK;
	ifm = mnl_nlmsg_get_payload(nlh);
	*idx = ifm->ifi_index;
	return MNL_CB_OK;
}

int
ns_rtnl_link_index(struct ns_rtnl *r, const char *name)
{
	struct nlmsghdr		*nlh;
	struct ifinfomsg	*ifm;
	int			 idx = 0;

	nlh = rtnl_msg(r, RTM_GETLINK, 0);
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	/* Statistics are the bulk of a link message and we want none. */
	mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	if (rtnl_talk(r, nlh, link_index_cb, &idx) == -1)
		return -1;
	if (idx <= 0) {
		errno = ENODEV;
		return -1;
	}
	return idx;
}

/* IFF_UP of ifindex set (up) or cleared. */
static int
link_set_up(struct ns_rtnl *r, int ifindex, int up)
{
	struct nlmsghdr		*nlh;
	struct ifinfomsg	*ifm;

	nlh = rtnl_msg(r, RTM_NEWLINK, 0);
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	ifm->ifi_flags = up ? IFF_UP : 0;
	ifm->ifi_change = IFF_UP;
	return rtnl_talk(r, nlh, NULL, NULL);
}

int
ns_rtnl_link_up(struct ns_rtnl *r, int ifindex)
{
	return link_set_up(r, ifindex, 1);
}

int
ns_rtnl_link_down(struct ns_rtnl *r, int ifindex)
{
	return link_set_up(r, ifindex, 0);
}

int
ns_rtnl_dump(struct ns_rtnl *r, uint16_t type, uint8_t family,
    int (*cb)(const struct nlmsghdr *, void *), void *data)
{
	struct nlmsghdr		*nlh;
	struct ifinfomsg	*ifm;
	struct ifaddrmsg	*ifa;
	struct rtmsg		*rtm;

	nlh = rtnl_msg(r, type, NLM_F_DUMP);
	/* Each dump with the header of its kind, as a strict kernel wants. */
	switch (type) {
	case RTM_GETLINK:
		ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
		ifm->ifi_family = family;
		mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
		break;
	case RTM_GETADDR:
		ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
		ifa->ifa_family = family;
		break;
	case RTM_GETROUTE:
		rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
		rtm->rtm_family = family;
		break;
	default:
		errno = EINVAL;
		return -1;
	}
	return rtnl_talk(r, nlh, cb, data);
}

int
ns_rtnl_link_del(struct ns_rtnl *r, const char *name)
{
	struct nlmsghdr		*nlh;
	struct ifinfomsg	*ifm;

	nlh = rtnl_msg(r, RTM_DELLINK, 0);
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return rtnl_talk(r, nlh, NULL, NULL);
}

int
ns_rtnl_veth_add(struct ns_rtnl *r, const char *name, const char *peer,
    int peer_nsfd)
{
	struct nlmsghdr		*nlh;
	struct ifinfomsg	*ifm, *pifm;
	struct nlattr		*linkinfo, *info, *pnest;

	nlh = rtnl_msg(r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	info = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	pnest = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	/* The peer attribute opens with its own ifinfomsg, as in iproute2;
	 * libmnl has no helper for a header inside a nest. */
	pifm = (struct ifinfomsg *)((char *)nlh + nlh->nlmsg_len);
	memset(pifm, 0, MNL_ALIGN(sizeof(*pifm)));
	pifm->ifi_family = AF_UNSPEC;
	nlh->nlmsg_len += MNL_ALIGN(sizeof(*pifm));
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
	/* Created directly in the sandbox: the peer never exists on the host,
	 * not even for a moment. */
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_nsfd);
	mnl_attr_nest_end(nlh, pnest);
	mnl_attr_nest_end(nlh, info);
	mnl_attr_nest_end(nlh, linkinfo);
	return rtnl_talk(r, nlh, NULL, NULL);
}

int
ns_rtnl_addr_add(struct ns_rtnl *r, int ifindex, const struct in_addr *addr,
    uint8_t prefixlen, int replace)
{
	struct nlmsghdr		*nlh;
	struct ifaddrmsg	*ifa;

	nlh = rtnl_msg(r, RTM_NEWADDR, NLM_F_CREATE |
	    (replace ? NLM_F_REPLACE : NLM_F_EXCL));
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = prefixlen;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (uint32_t)ifindex;
	mnl_attr_put(nlh, IFA_LOCAL, sizeof(*addr), addr);
	mnl_attr_put(nlh, IFA_ADDRESS, sizeof(*addr), addr);
	return rtnl_talk(r, nlh, NULL, NULL);
}

int
ns_rtnl_route_default(struct ns_rtnl *r, int ifindex, const struct in_addr *gw)
{
	struct nlmsghdr	*nlh;
	struct rtmsg	*rtm;

	nlh = rtnl_msg(r, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_dst_len = 0;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put(nlh, RTA_GATEWAY, sizeof(*gw), gw);
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
	return rtnl_talk(r, nlh, NULL, NULL);
}

int
ns_rtnl_inet_conf(struct ns_rtnl *r, int ifindex, const int *ids,
    const uint32_t *vals, size_t n)
{
	struct nlmsghdr		*nlh;
	struct ifinfomsg	*ifm;
	struct nlattr		*spec, *inet, *conf;
	size_t			 i;

	/* A handful is all anyone needs; the bound keeps the message far
	 * inside buf. */
	if (n == 0 || n > 32) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (ids[i] <= 0 || ids[i] > UINT16_MAX) {
			errno = EINVAL;
			return -1;
		}
	}
	nlh = rtnl_msg(r, RTM_NEWLINK, 0);
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	/* What `sysctl net.ipv4.conf.<dev>.<key>` sets, without a path
	 * walk through /proc/sys: that walk costs time in proportion to
	 * the number of network namespaces on the machine (see ns.c). */
	spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
	inet = mnl_attr_nest_start(nlh, AF_INET);
	conf = mnl_attr_nest_start(nlh, IFLA_INET_CONF);
	for (i = 0; i < n; i++)
		mnl_attr_put_u32(nlh, (uint16_t)ids[i], vals[i]);
	mnl_attr_nest_end(nlh, conf);
	mnl_attr_nest_end(nlh, inet);
	mnl_attr_nest_end(nlh, spec);
	return rtnl_talk(r, nlh, NULL, NULL);
}

struct names_acc {
	const char	*prefix;
	char		**v;
	size_t		 n, cap;
	int		 error;
};

static int
link_name_attr_cb(const struct nlattr *a, void *data)
{
	const char	**name = data;

	if (mnl_attr_get_type(a) == IFLA_IFNAME &&
	    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
		*name = mnl_attr_get_str(a);
	return MNL_CB_OK;
}

static int
link_names_cb(const struct nlmsghdr *nlh, void *data)
{
	struct names_acc	*acc = data;
	const char		*name = NULL;
	char			**nv;

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct ifinfomsg))
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(struct ifinfomsg), link_name_attr_cb,
	    &name) == MNL_CB_ERROR || name == NULL)
		return MNL_CB_OK;
	if (strncmp(name, acc->prefix, strlen(acc->prefix)) != 0)
		return MNL_CB_OK;
	/* Keep room for the terminating NULL at every step. */
	if (acc->n + 1 >= acc->cap) {
		nv = reallocarray(acc->v, acc->cap * 2 + 8, sizeof(*nv));
		if (nv == NULL)
			goto nomem;
		acc->v = nv;
		acc->cap = acc->cap * 2 + 8;
	}
	if ((acc->v[acc->n] = strdup(name)) == NULL)
		goto nomem;
	acc->n++;
	return MNL_CB_OK;
nomem:
	acc->error = ENOMEM;
	/* Keep reading so the dump is drained from the socket. */
	return MNL_CB_OK;
}

int
ns_rtnl_link_names(struct ns_rtnl *r, const char *prefix, char ***names,
    size_t *n)
{
	struct nlmsghdr		*nlh;
	struct ifinfomsg	*ifm;
	struct names_acc	 acc = { .prefix = prefix };
	size_t			 i;

	nlh = rtnl_msg(r, RTM_GETLINK, NLM_F_DUMP);
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	if (rtnl_talk(r, nlh, link_names_cb, &acc) == -1 && acc.error == 0)
		acc.error = errno != 0 ? errno : EIO;
	if (acc.error == 0 && acc.v == NULL &&
	    (acc.v = calloc(1, sizeof(*acc.v))) == NULL)
		acc.error = ENOMEM;
	if (acc.error != 0) {
		for (i = 0; i < acc.n; i++)
			free(acc.v[i]);
		free(acc.v);
		errno = acc.error;
		return -1;
	}
	ns_names_sort(acc.v, acc.n);
	*names = acc.v;
	if (n != NULL)
		*n = acc.n;
	return 0;
}

struct link_info {
	int	index;
	int	link_nsid;
};

static int
link_info_attr_cb(const struct nlattr *a, void *data)
{
	struct link_info	*li = data;

	if (mnl_attr_get_type(a) == IFLA_LINK_NETNSID &&
	    mnl_attr_validate(a, MNL_TYPE_U32) == 0)
		li->link_nsid = (int32_t)mnl_attr_get_u32(a);
	return MNL_CB_OK;
}

static int
link_info_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct ifinfomsg	*ifm;
	struct link_info	*li = data;

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifm))
		return MNL_CB_OK;
	ifm = mnl_nlmsg_get_payload(nlh);
	li->index = ifm->ifi_index;
	(void)mnl_attr_parse(nlh, sizeof(*ifm), link_info_attr_cb, li);
	return MNL_CB_OK;
}

int
ns_rtnl_link_peer(struct ns_rtnl *r, const char *name, int *link_nsid)
{
	struct nlmsghdr		*nlh;
	struct ifinfomsg	*ifm;
	struct link_info	 li = { 0, -1 };

	nlh = rtnl_msg(r, RTM_GETLINK, 0);
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	if (rtnl_talk(r, nlh, link_info_cb, &li) == -1)
		return -1;
	if (li.index <= 0) {
		errno = ENODEV;
		return -1;
	}
	*link_nsid = li.link_nsid;
	return li.index;
}

static int
nsid_attr_cb(const struct nlattr *a, void *data)
{
	int	*nsid = data;

	if (mnl_attr_get_type(a) == NETNSA_NSID &&
	    mnl_attr_validate(a, MNL_TYPE_U32) == 0)
		*nsid = (int32_t)mnl_attr_get_u32(a);
	return MNL_CB_OK;
}

static int
nsid_cb(const struct nlmsghdr *nlh, void *data)
{
	if (nlh->nlmsg_type != RTM_NEWNSID)
		return MNL_CB_OK;
	(void)mnl_attr_parse(nlh, sizeof(struct rtgenmsg), nsid_attr_cb, data);
	return MNL_CB_OK;
}

int
ns_rtnl_nsid(struct ns_rtnl *r, int nsfd)
{
	struct nlmsghdr	*nlh;
	struct rtgenmsg	*g;
	int		 nsid = -1;

	nlh = rtnl_msg(r, RTM_GETNSID, 0);
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->rtgen_family = AF_UNSPEC;
	mnl_attr_put_u32(nlh, NETNSA_FD, (uint32_t)nsfd);
	if (rtnl_talk(r, nlh, nsid_cb, &nsid) == -1)
		return -1;
	return nsid;
}

int
ns_rtnl_link_retire(struct ns_rtnl *r, int ifindex, const struct in_addr *addr,
    uint8_t prefixlen, const char *newname)
{
	struct nlmsghdr		*nlh;
	struct ifinfomsg	*ifm;
	struct ifaddrmsg	*ifa;

	/*
	 * The address goes first, while the link is still up: removing it
	 * removes its routes one by one, and with them every trace of the
	 * link in the FIB, so the link-down that follows finds nothing to
	 * flush. The other order (down first) makes the kernel sweep the
	 * whole FIB of the host (fib_table_flush), a cost that grows with
	 * every sandbox on the machine. In the moment between the two the
	 * host has no route into the sandbox, and what the sandbox sends
	 * still meets the firewall's rules for "sl-*" links (the name goes
	 * last), whose anti-spoofing drops all of it once the sandbox's
	 * elements are gone, as they are before the daemon calls ns_delete;
	 * strict rp_filter drops it as well, having no route back through
	 * the link. Removing the address also means a new sandbox in the same
	 * pool slot never shares it with a link on its way out.
	 */
	nlh = rtnl_msg(r, RTM_DELADDR, 0);
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = prefixlen;
	ifa->ifa_index = (uint32_t)ifindex;
	mnl_attr_put(nlh, IFA_LOCAL, sizeof(*addr), addr);
	if (rtnl_talk(r, nlh, NULL, NULL) == -1 && errno != EADDRNOTAVAIL)
		return -1;
	nlh = rtnl_msg(r, RTM_NEWLINK, 0);
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	ifm->ifi_flags = 0;
	ifm->ifi_change = IFF_UP;
	if (rtnl_talk(r, nlh, NULL, NULL) == -1)
		return -1;
	/* A veth can only be renamed while down. */
	nlh = rtnl_msg(r, RTM_NEWLINK, 0);
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, newname);
	return rtnl_talk(r, nlh, NULL, NULL);
}

/*
 * The public form of ns_rtnl_nsid, for reconciliation in the daemon: the
 * question is read-only and needs no privilege, but it is rtnetlink, and
 * rtnetlink is spoken here and nowhere else.
 */
int
ns_nsid(const char *path, int *nsid, char *err, size_t errlen)
{
	struct ns_rtnl	*r;
	struct statfs	 sf;
	int		 fd, id, saved;

	if (path == NULL || nsid == NULL) {
		ns_seterr(err, errlen, EINVAL, "ns_nsid: no path");
		return -1;
	}
	/* O_NOFOLLOW: a pin is a bind mount, never a symlink; one planted
	 * in a shared directory must not send us to another file. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		ns_seterr(err, errlen, errno, "%s", path);
		return -1;
	}
	if (fstatfs(fd, &sf) == -1 || sf.f_type != NSFS_MAGIC) {
		close(fd);
		ns_seterr(err, errlen, EINVAL, "%s: not a namespace", path);
		return -1;
	}
	if ((r = ns_rtnl_new()) == NULL) {
		saved = errno;
		close(fd);
		ns_seterr(err, errlen, saved, "rtnetlink");
		return -1;
	}
	errno = 0;
	id = ns_rtnl_nsid(r, fd);
	saved = errno;
	ns_rtnl_free(r);
	close(fd);
	if (id == -1 && saved != 0) {
		ns_seterr(err, errlen, saved, "%s: RTM_GETNSID", path);
		return -1;
	}
	/* NETNSA_NSID_NOT_ASSIGNED is -1 too: never linked to us. */
	*nsid = id >= 0 ? id : -1;
	return 0;
}
