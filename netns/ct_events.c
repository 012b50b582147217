/*
 * ct_events.c: the end of every flow, from ctnetlink's destroy events (see
 * ct.h). The kernel tells when a conntrack entry goes (closed, reset, timed
 * out, deleted) with its counters and its start: the one place where the
 * bytes a sandbox sent to a destination are known without a packet of it
 * passing through userspace. A leaf, like ct.c.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

#include "netns/ct.h"
#include "netns/ct_int.h"
#include "netns/nlsock.h"

#define CTE_RCVBUF	(8 * 1024 * 1024)

static int
sysctl_on(const char *path)
{
	int fd, r;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	r = write(fd, "1\n", 2) == 2 ? 0 : -1;
	close(fd);
	return r;
}

int
ct_events_open(char *err, size_t errlen)
{
	struct mnl_socket *nl;
	int fd, e, sz = CTE_RCVBUF;
	unsigned groups = 1u << (NFNLGRP_CONNTRACK_NEW - 1) |
	    1u << (NFNLGRP_CONNTRACK_DESTROY - 1);

	if (sysctl_on("/proc/sys/net/netfilter/nf_conntrack_acct") == -1 ||
	    sysctl_on("/proc/sys/net/netfilter/nf_conntrack_timestamp") == -1) {
		snprintf(err, errlen, "conntrack counters: %s", strerror(errno));
		return -1;
	}
	if ((nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC)) == NULL) {
		snprintf(err, errlen, "conntrack events: %s", strerror(errno));
		return -1;
	}
	/* The group in bind(), as conntrack(8) does: joined that way the
	 * kernel counts a listener and keeps events for new flows. */
	if (mnl_socket_bind(nl, groups, MNL_SOCKET_AUTOPID) == -1 ||
	    (setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVBUFFORCE, &sz,
	    sizeof(sz)) == -1 && setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET,
	    SO_RCVBUF, &sz, sizeof(sz)) == -1)) {
		e = errno;
		mnl_socket_close(nl);
		snprintf(err, errlen, "conntrack events: %s", strerror(e));
		errno = e;
		return -1;
	}
	if ((fd = nlsock_keep(nl)) == -1)
		snprintf(err, errlen, "conntrack events: %s", strerror(errno));
	return fd;
}

/* Two 64-bit values of a nest (counters: packets and bytes; the
 * timestamp: start and stop), by their attribute types. */
static void
pair(const struct nlattr *nest, uint16_t ta, uint64_t *a, uint16_t tb,
    uint64_t *b)
{
	const struct nlattr *x;

	mnl_attr_for_each_nested(x, nest) {
		if (mnl_attr_get_payload_len(x) < 8)
			continue;
		if (mnl_attr_get_type(x) == ta)
			*a = be64toh(mnl_attr_get_u64(x));
		else if (mnl_attr_get_type(x) == tb)
			*b = be64toh(mnl_attr_get_u64(x));
	}
}

struct rd {
	void	(*fn)(void *, const struct ct_end *);
	void	*arg;
	int	 n;
};

void
ct_parse_end(const struct nlmsghdr *nlh, struct ct_end *e)
{
	const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;
	uint8_t rsrc[16], rproto = 0;

	e->f.family = g->nfgen_family;
	mnl_attr_for_each(a, nlh, sizeof(*g)) {
		switch (mnl_attr_get_type(a)) {
		case CTA_TUPLE_ORIG:
			ct_parse_tuple(a, e->f.src, e->f.dst, &e->f.proto,
			    &e->f.sport, &e->f.dport);
			break;
		case CTA_TUPLE_REPLY:
			ct_parse_tuple(a, e->f.rsrc, rsrc, &rproto, NULL, NULL);
			break;
		case CTA_COUNTERS_ORIG:
			pair(a, CTA_COUNTERS_PACKETS, &e->packets[0],
			    CTA_COUNTERS_BYTES, &e->bytes[0]);
			break;
		case CTA_COUNTERS_REPLY:
			pair(a, CTA_COUNTERS_PACKETS, &e->packets[1],
			    CTA_COUNTERS_BYTES, &e->bytes[1]);
			break;
		case CTA_TIMESTAMP:
			pair(a, CTA_TIMESTAMP_START, &e->start_ns,
			    CTA_TIMESTAMP_STOP, &e->stop_ns);
			break;
		case CTA_MARK:
			if (mnl_attr_get_payload_len(a) >= 4)
				e->mark = ntohl(mnl_attr_get_u32(a));
			break;
		default:
			break;
		}
	}
}

static int
event_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct rd *r = arg;
	struct ct_end e;

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct nfgenmsg)))
		return MNL_CB_OK;
	memset(&e, 0, sizeof(e));
	/* A new entry comes as IPCTNL_MSG_CT_NEW with NLM_F_CREATE; its
	 * later updates without it, and are not wanted. */
	if ((nlh->nlmsg_type & 0xff) == IPCTNL_MSG_CT_NEW)
		e.created = true;
	else if ((nlh->nlmsg_type & 0xff) != IPCTNL_MSG_CT_DELETE)
		return MNL_CB_OK;
	if (e.created && !(nlh->nlmsg_flags & NLM_F_CREATE))
		return MNL_CB_OK;
	ct_parse_end(nlh, &e);
	r->fn(r->arg, &e);
	r->n++;
	return MNL_CB_OK;
}

int
ct_events_read(int fd, void (*fn)(void *, const struct ct_end *), void *arg,
    int *lost)
{
	static char buf[64 * 1024];
	struct rd r = { fn, arg, 0 };
	ssize_t n;
	int i;

	*lost = 0;
	/* A bounded batch: the loop's other sources get their turn. */
	for (i = 0; i < 256; i++) {
		if ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) == -1) {
			if (errno == ENOBUFS) {
				*lost = 1;
				continue;
			}
			if (errno == EAGAIN || errno == EINTR)
				break;
			return -1;
		}
		(void)mnl_cb_run(buf, (size_t)n, 0, 0, event_cb, &r);
	}
	return r.n;
}
