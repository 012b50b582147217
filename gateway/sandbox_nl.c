/*
 * sandbox_nl.c: one read-only rtnetlink question reconciliation must ask
 * before it removes a namespace nobody recorded: is it ours? /run/netns is
 * shared by every network namespace of the machine, so a `sluice-*` pin may
 * belong to a sluiced serving another namespace (a test world, a second
 * instance). The kernel gives a namespace an id (nsid) in ours once a link
 * joined the two, which every sandbox of ours has had; a namespace with no
 * id here was never ours and is left alone. Asking needs no privilege and
 * changes nothing, which is why it lives here rather than in netns/.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>
#include <linux/net_namespace.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <libmnl/libmnl.h>

#include "gateway/sandbox_int.h"

static int
nsid_attr(const struct nlattr *a, void *arg)
{
	int *id = arg;

	if (mnl_attr_get_type(a) == NETNSA_NSID &&
	    mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
		*id = (int32_t)mnl_attr_get_u32(a);
	return MNL_CB_OK;
}

static int
nsid_msg(const struct nlmsghdr *nlh, void *arg)
{
	if (nlh->nlmsg_type != RTM_NEWNSID)
		return MNL_CB_OK;
	return mnl_attr_parse(nlh, sizeof(struct rtgenmsg), nsid_attr, arg);
}

int
sbx_nl_nsid(const char *path)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl = NULL;
	struct nlmsghdr *nlh;
	struct rtgenmsg *g;
	struct statfs sf;
	unsigned seq, portid;
	ssize_t n;
	int fd, id = -1, rc = -2, e;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return -2;
	if (fstatfs(fd, &sf) == -1 || sf.f_type != NSFS_MAGIC) {
		close(fd);
		errno = EINVAL;
		return -2;
	}
	if ((nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC)) == NULL ||
	    mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == -1)
		goto out;
	portid = mnl_socket_get_portid(nl);
	seq = (unsigned)time(NULL);
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_GETNSID;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	nlh->nlmsg_seq = seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->rtgen_family = AF_UNSPEC;
	mnl_attr_put_u32(nlh, NETNSA_FD, (uint32_t)fd);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		goto out;
	if ((n = mnl_socket_recvfrom(nl, buf, sizeof(buf))) <= 0)
		goto out;
	if (mnl_cb_run(buf, (size_t)n, seq, portid, nsid_msg, &id) == -1)
		goto out;
	/* NETNSA_NSID_NOT_ASSIGNED (-1): never linked to us. */
	rc = id >= 0 ? id : -1;
out:
	e = errno;
	if (nl != NULL)
		mnl_socket_close(nl);
	close(fd);
	errno = e;
	return rc;
}
