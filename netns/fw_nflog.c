/*
 * fw_nflog.c: denied packets, as the kernel logs them, back to the daemon.
 *
 * Why this file exists: the deny rules in fw_rules.c log to an nflog group
 * before rejecting, and every denial must become an audit record
 * (`net.deny`). This file subscribes to that group over nfnetlink and turns
 * each logged packet into a flat struct fw_denied (link, rule prefix,
 * 5-tuple). It does no aggregation and reads no clock: the gateway has the
 * clock and folds repeats per second, so a flood cannot flood the log.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

#define NFLOG_COPY	128	/* bytes of each packet: IPv6 + TCP headers */
#define NFLOG_RBUF	(64 * 1024)
#define NFLOG_MAXPKT	1024	/* per fw_nflog_read call, to bound the work */

struct fw_nflog {
	struct mnl_socket	*nl;
	uint32_t		 portid;
	uint16_t		 group;
	char			*buf;
};

static struct nlmsghdr *
cfg_hdr(char *buf, uint16_t group, uint32_t seq)
{
	struct nlmsghdr	*nlh;
	struct nfgenmsg	*nfg;

	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_UNSPEC;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(group);
	return nlh;
}

/* Sends one config message and waits for its ACK (queued synchronously). */
static int
cfg_send(struct fw_nflog *nl, struct nlmsghdr *nlh)
{
	char	rbuf[1024];
	ssize_t	n;
	int	ret;

	if (mnl_socket_sendto(nl->nl, nlh, nlh->nlmsg_len) == -1)
		return -1;
	n = recv(mnl_socket_get_fd(nl->nl), rbuf, sizeof(rbuf), MSG_DONTWAIT);
	if (n == -1)
		return -1;
	ret = mnl_cb_run(rbuf, (size_t)n, nlh->nlmsg_seq, nl->portid, NULL,
	    NULL);
	return ret == MNL_CB_ERROR ? -1 : 0;
}

struct fw_nflog *
fw_nflog_open(uint16_t group, char *err, size_t errlen)
{
	struct fw_nflog			*nl;
	struct nlmsghdr			*nlh;
	struct nfulnl_msg_config_cmd	 cmd;
	struct nfulnl_msg_config_mode	 mode;
	uint32_t			 qthresh;
	char				 buf[256] = { 0 };
	int				 one = 1;

	if ((nl = calloc(1, sizeof(*nl))) == NULL ||
	    (nl->buf = malloc(NFLOG_RBUF)) == NULL) {
		fw_seterr(err, errlen, "fw_nflog_open: %s", strerror(errno));
		fw_nflog_free(nl);
		return NULL;
	}
	nl->group = group;
	if ((nl->nl = mnl_socket_open2(NETLINK_NETFILTER,
	    SOCK_NONBLOCK | SOCK_CLOEXEC)) == NULL ||
	    mnl_socket_bind(nl->nl, 0, MNL_SOCKET_AUTOPID) == -1) {
		fw_seterr(err, errlen, "fw_nflog_open: socket: %s",
		    strerror(errno));
		goto fail;
	}
	nl->portid = mnl_socket_get_portid(nl->nl);
	(void)mnl_socket_setsockopt(nl->nl, NETLINK_CAP_ACK, &one,
	    sizeof(one));
	/* A full receive queue loses packets, reported as ENOBUFS; ask for
	 * the kernel not to report it to keep the socket simple to drain. */
	(void)mnl_socket_setsockopt(nl->nl, NETLINK_NO_ENOBUFS, &one,
	    sizeof(one));

	nlh = cfg_hdr(buf, group, 1);
	memset(&cmd, 0, sizeof(cmd));
	cmd.command = NFULNL_CFG_CMD_BIND;
	mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(cmd), &cmd);
	if (cfg_send(nl, nlh) == -1) {
		fw_seterr(err, errlen, "fw_nflog_open: bind group %u: %s",
		    group, strerror(errno));
		goto fail;
	}
	memset(buf, 0, sizeof(buf));
	nlh = cfg_hdr(buf, group, 2);
	mode.copy_range = htonl(NFLOG_COPY);
	mode.copy_mode = NFULNL_COPY_PACKET;
	mode._pad = 0;
	mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(mode), &mode);
	if (cfg_send(nl, nlh) == -1) {
		fw_seterr(err, errlen, "fw_nflog_open: copy mode: %s",
		    strerror(errno));
		goto fail;
	}
	/* The kernel batches up to 100 packets or 1 s per message by
	 * default: a denial would reach us a second late, after the sandbox
	 * (and its link's name) may be gone. One packet per message; a flood
	 * is bounded by the socket buffer and aggregated by the caller. */
	memset(buf, 0, sizeof(buf));
	nlh = cfg_hdr(buf, group, 3);
	qthresh = htonl(1);
	mnl_attr_put(nlh, NFULA_CFG_QTHRESH, sizeof(qthresh), &qthresh);
	if (cfg_send(nl, nlh) == -1) {
		fw_seterr(err, errlen, "fw_nflog_open: queue threshold: %s",
		    strerror(errno));
		goto fail;
	}
	return nl;
fail:
	fw_nflog_free(nl);
	return NULL;
}

void
fw_nflog_free(struct fw_nflog *nl)
{
	int	saved = errno;

	if (nl == NULL)
		return;
	/* Closing the socket unbinds the group. */
	if (nl->nl != NULL)
		mnl_socket_close(nl->nl);
	free(nl->buf);
	free(nl);
	errno = saved;
}

void
fw_nflog_close(struct fw_nflog *nl)
{
	fw_nflog_free(nl);
}

int
fw_nflog_fd(const struct fw_nflog *nl)
{
	if (nl == NULL) {
		errno = EINVAL;
		return -1;
	}
	return mnl_socket_get_fd(nl->nl);
}

static int
attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr	**tb = data;
	int			  type = mnl_attr_get_type(a);

	if (mnl_attr_type_valid(a, NFULA_MAX) < 0)
		return MNL_CB_OK;	/* newer kernels: ignore unknown */
	tb[type] = a;
	return MNL_CB_OK;
}

/* Fills the 5-tuple from the copied network header; returns -1 if the
 * packet is too short to be trusted. */
static int
parse_payload(struct fw_denied *d, const uint8_t *p, size_t len)
{
	size_t	hl;
	uint8_t	proto;

	if (len < 1)
		return -1;
	if ((p[0] >> 4) == 4) {
		if (len < 20 || (hl = (size_t)(p[0] & 0x0f) * 4) < 20 ||
		    hl > len)
			return -1;
		d->family = AF_INET;
		proto = p[9];
		memcpy(d->src, p + 12, 4);
		memcpy(d->dst, p + 16, 4);
		/* Later fragments carry no ports. */
		if ((((p[6] & 0x1f) << 8) | p[7]) != 0)
			hl = len;
	} else if ((p[0] >> 4) == 6) {
		if (len < 40)
			return -1;
		d->family = AF_INET6;
		proto = p[6];
		memcpy(d->src, p + 8, 16);
		memcpy(d->dst, p + 24, 16);
		/* Extension headers are not walked: ports stay 0. */
		hl = 40;
	} else
		return -1;
	d->proto = proto;
	if ((proto == IPPROTO_TCP || proto == IPPROTO_UDP) && len >= hl + 4) {
		d->sport = (uint16_t)(p[hl] << 8 | p[hl + 1]);
		d->dport = (uint16_t)(p[hl + 2] << 8 | p[hl + 3]);
	}
	return 0;
}

struct read_ctx {
	void	(*cb)(const struct fw_denied *, void *);
	void	 *arg;
	int	  count;
};

static int
packet_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct read_ctx	*c = arg;
	const struct nlattr *tb[NFULA_MAX + 1];
	struct fw_denied d;
	char		 ifn[IF_NAMESIZE];

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
		return MNL_CB_OK;
	memset(tb, 0, sizeof(tb));
	if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), attr_cb, tb) < 0)
		return MNL_CB_OK;	/* malformed: skip */
	memset(&d, 0, sizeof(d));
	if (tb[NFULA_PAYLOAD] == NULL ||
	    parse_payload(&d, mnl_attr_get_payload(tb[NFULA_PAYLOAD]),
	    mnl_attr_get_payload_len(tb[NFULA_PAYLOAD])) == -1)
		return MNL_CB_OK;
	if (tb[NFULA_PREFIX] != NULL) {
		size_t plen = mnl_attr_get_payload_len(tb[NFULA_PREFIX]);

		if (plen >= sizeof(d.prefix))
			plen = sizeof(d.prefix) - 1;
		memcpy(d.prefix, mnl_attr_get_payload(tb[NFULA_PREFIX]), plen);
		d.prefix[plen] = '\0';
	}
	if (tb[NFULA_IFINDEX_INDEV] != NULL &&
	    mnl_attr_get_payload_len(tb[NFULA_IFINDEX_INDEV]) == 4 &&
	    if_indextoname(ntohl(mnl_attr_get_u32(tb[NFULA_IFINDEX_INDEV])),
	    ifn) != NULL)
		snprintf(d.ifname, sizeof(d.ifname), "%s", ifn);
	c->cb(&d, c->arg);
	c->count++;
	return MNL_CB_OK;
}

int
fw_nflog_read(struct fw_nflog *nl, void (*cb)(const struct fw_denied *d,
    void *arg), void *arg)
{
	struct read_ctx	c = { cb, arg, 0 };
	ssize_t		n;

	if (nl == NULL || cb == NULL) {
		errno = EINVAL;
		return -1;
	}
	while (c.count < NFLOG_MAXPKT) {
		n = recv(mnl_socket_get_fd(nl->nl), nl->buf, NFLOG_RBUF,
		    MSG_DONTWAIT);
		if (n == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			return -1;
		}
		/* Packets are not replies: no seq or portid to check. */
		(void)mnl_cb_run(nl->buf, (size_t)n, 0, 0, packet_cb, &c);
	}
	return c.count;
}
