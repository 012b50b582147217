/*
 * ct.c: conntrack entries found and deleted through ctnetlink (libmnl).
 *
 * Why this file exists: nftables verdicts bind only new flows; an entry in
 * the conntrack table keeps a flow "established" after the rule, the
 * learned element or the sandbox that allowed it is gone (see ct.h). The
 * table is read with one dump per call and filtered here by the original
 * tuple (the kernel's dump filters differ between versions; one dump costs
 * the same whatever is asked); each match is deleted by the original tuple
 * exactly as the dump gave it, with its id, so a new entry that took the
 * same tuple meanwhile is left alone. ct_get reads one entry by its
 * tuple, for the counters of a flow that is still open.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmnl/libmnl.h>

#include "netns/ct.h"
#include "netns/ct_int.h"

#define CT_BUFSZ	(64 * 1024)
#define CT_TUPLEMAX	256		/* a nested tuple attribute, bytes */
#define CT_MAX_DEL	(1u << 20)	/* entries one call deletes, at most */

struct ct {
	struct mnl_socket	*nl;
	uint32_t		 portid;
	uint32_t		 seq;
	char			*buf;
};

/* An entry to delete: its original tuple attribute as dumped, its id
 * and zone. */
struct ct_victim {
	uint8_t		tuple[CT_TUPLEMAX];
	uint16_t	tlen;
	int		has_id, has_zone;
	uint32_t	id;		/* network order, as sent */
	uint16_t	zone;		/* network order */
};

struct ct_dump {
	uint8_t			 family;
	const uint8_t		*src;
	size_t			 alen;
	int			(*del)(const struct ct_flow *, void *);
	void			*arg;
	struct ct_victim	*v;
	size_t			 n, cap;
	int			 fail;		/* errno to report */
};

static void
ct_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	errno = saved;
}

struct ct *
ct_new(char *err, size_t errlen)
{
	struct ct	*ct;
	int		 one = 1;

	if ((ct = calloc(1, sizeof(*ct))) == NULL ||
	    (ct->buf = calloc(1, CT_BUFSZ)) == NULL) {
		free(ct);
		ct_seterr(err, errlen, "ct_new: %s", strerror(errno));
		return NULL;
	}
	if ((ct->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC)) ==
	    NULL || mnl_socket_bind(ct->nl, 0, MNL_SOCKET_AUTOPID) == -1) {
		ct_seterr(err, errlen, "ct_new: netfilter socket: %s",
		    strerror(errno));
		ct_free(ct);
		return NULL;
	}
	(void)mnl_socket_setsockopt(ct->nl, NETLINK_CAP_ACK, &one, sizeof(one));
	ct->portid = mnl_socket_get_portid(ct->nl);
	ct->seq = (uint32_t)time(NULL);
	return ct;
}

void
ct_free(struct ct *ct)
{
	int	saved = errno;

	if (ct == NULL)
		return;
	if (ct->nl != NULL)
		mnl_socket_close(ct->nl);
	free(ct->buf);
	free(ct);
	errno = saved;
}

static struct nlmsghdr *
ct_msg(struct ct *ct, uint8_t type, uint16_t flags, uint8_t family)
{
	struct nlmsghdr	*nlh;
	struct nfgenmsg	*g;

	nlh = mnl_nlmsg_put_header(ct->buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = ++ct->seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = family;
	g->version = NFNETLINK_V0;
	g->res_id = 0;
	return nlh;
}

/* Sends nlh and reads until its answer is complete (cb per message). */
static int
ct_request(struct ct *ct, struct nlmsghdr *nlh, mnl_cb_t cb, void *arg)
{
	uint32_t	seq = nlh->nlmsg_seq;
	ssize_t		n;
	int		ret;

	if (mnl_socket_sendto(ct->nl, nlh, nlh->nlmsg_len) == -1)
		return -1;
	for (;;) {
		n = mnl_socket_recvfrom(ct->nl, ct->buf, CT_BUFSZ);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		ret = mnl_cb_run(ct->buf, (size_t)n, seq, ct->portid, cb, arg);
		if (ret == MNL_CB_ERROR)
			return -1;
		if (ret == MNL_CB_STOP)
			return 0;
	}
}

/* ------------------------------------------------------------ parsing */

/* Reads an address pair (CTA_TUPLE_IP) into src/dst. */
static void
parse_ip(const struct nlattr *nest, uint8_t *src, uint8_t *dst)
{
	const struct nlattr	*a;

	mnl_attr_for_each_nested(a, nest) {
		uint16_t	type = mnl_attr_get_type(a);
		size_t		len = mnl_attr_get_payload_len(a);

		if ((type == CTA_IP_V4_SRC || type == CTA_IP_V4_DST) &&
		    len == 4)
			memcpy(type == CTA_IP_V4_SRC ? src : dst,
			    mnl_attr_get_payload(a), 4);
		else if ((type == CTA_IP_V6_SRC || type == CTA_IP_V6_DST) &&
		    len == 16)
			memcpy(type == CTA_IP_V6_SRC ? src : dst,
			    mnl_attr_get_payload(a), 16);
	}
}

static void
parse_proto(const struct nlattr *nest, uint8_t *proto, uint16_t *sport,
    uint16_t *dport)
{
	const struct nlattr	*a;

	mnl_attr_for_each_nested(a, nest) {
		uint16_t	type = mnl_attr_get_type(a);
		size_t		len = mnl_attr_get_payload_len(a);

		if (type == CTA_PROTO_NUM && len >= 1)
			*proto = mnl_attr_get_u8(a);
		else if (type == CTA_PROTO_SRC_PORT && len >= 2 && sport)
			*sport = ntohs(mnl_attr_get_u16(a));
		else if (type == CTA_PROTO_DST_PORT && len >= 2 && dport)
			*dport = ntohs(mnl_attr_get_u16(a));
	}
}

/* A tuple (CTA_TUPLE_ORIG or _REPLY): addresses, protocol, ports. */
void
ct_parse_tuple(const struct nlattr *nest, uint8_t *src, uint8_t *dst,
    uint8_t *proto, uint16_t *sport, uint16_t *dport)
{
	const struct nlattr	*a;

	mnl_attr_for_each_nested(a, nest) {
		if (mnl_attr_get_type(a) == CTA_TUPLE_IP)
			parse_ip(a, src, dst);
		else if (mnl_attr_get_type(a) == CTA_TUPLE_PROTO)
			parse_proto(a, proto, sport, dport);
	}
}

static int
dump_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct ct_dump		*d = arg;
	const struct nfgenmsg	*g = mnl_nlmsg_get_payload(nlh);
	const struct nlattr	*a, *orig = NULL, *reply = NULL;
	const struct nlattr	*id = NULL, *zone = NULL;
	struct ct_flow		 f;
	struct ct_victim	*v;
	uint8_t			 rdst[16], rproto = 0;

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*g)) ||
	    g->nfgen_family != d->family)
		return MNL_CB_OK;
	mnl_attr_for_each(a, nlh, sizeof(*g)) {
		switch (mnl_attr_get_type(a)) {
		case CTA_TUPLE_ORIG:
			orig = a;
			break;
		case CTA_TUPLE_REPLY:
			reply = a;
			break;
		case CTA_ID:
			id = a;
			break;
		case CTA_ZONE:
			zone = a;
			break;
		default:
			break;
		}
	}
	if (orig == NULL)
		return MNL_CB_OK;
	memset(&f, 0, sizeof(f));
	f.family = d->family;
	ct_parse_tuple(orig, f.src, f.dst, &f.proto, &f.sport, &f.dport);
	if (memcmp(f.src, d->src, d->alen) != 0)
		return MNL_CB_OK;
	if (reply != NULL)
		ct_parse_tuple(reply, f.rsrc, rdst, &rproto, NULL, NULL);
	if (f.proto != IPPROTO_TCP && f.proto != IPPROTO_UDP &&
	    f.proto != IPPROTO_SCTP && f.proto != IPPROTO_UDPLITE &&
	    f.proto != IPPROTO_DCCP)
		f.sport = f.dport = 0;
	if (d->del != NULL && !d->del(&f, d->arg))
		return MNL_CB_OK;
	if (mnl_attr_get_len(orig) > CT_TUPLEMAX || d->n >= CT_MAX_DEL) {
		d->fail = mnl_attr_get_len(orig) > CT_TUPLEMAX ? EPROTO :
		    E2BIG;
		return MNL_CB_OK;
	}
	if (d->n == d->cap) {
		size_t ncap = d->cap ? d->cap * 2 : 16;

		if ((v = reallocarray(d->v, ncap, sizeof(*v))) == NULL) {
			d->fail = ENOMEM;
			return MNL_CB_OK;
		}
		d->v = v;
		d->cap = ncap;
	}
	v = &d->v[d->n++];
	memset(v, 0, sizeof(*v));
	v->tlen = mnl_attr_get_len(orig);
	memcpy(v->tuple, orig, v->tlen);
	if (id != NULL && mnl_attr_get_payload_len(id) == 4) {
		v->has_id = 1;
		memcpy(&v->id, mnl_attr_get_payload(id), 4);
	}
	if (zone != NULL && mnl_attr_get_payload_len(zone) >= 2) {
		v->has_zone = 1;
		memcpy(&v->zone, mnl_attr_get_payload(zone), 2);
	}
	return MNL_CB_OK;
}

/* ------------------------------------------------------------ sweeping */

static int
del_one(struct ct *ct, uint8_t family, const struct ct_victim *v)
{
	struct nlmsghdr	*nlh;
	struct nlattr	*t;

	nlh = ct_msg(ct, IPCTNL_MSG_CT_DELETE, NLM_F_ACK, family);
	/* The tuple attribute goes back as the kernel wrote it. */
	t = (struct nlattr *)((char *)nlh + nlh->nlmsg_len);
	memcpy(t, v->tuple, v->tlen);
	nlh->nlmsg_len += MNL_ALIGN(v->tlen);
	if (v->has_id)
		mnl_attr_put(nlh, CTA_ID, 4, &v->id);
	if (v->has_zone)
		mnl_attr_put(nlh, CTA_ZONE, 2, &v->zone);
	if (ct_request(ct, nlh, NULL, NULL) == 0)
		return 1;
	/* Gone meanwhile (it timed out, or the id belongs to a newer
	 * entry of that tuple): not ours to delete, and no error. */
	return errno == ENOENT ? 0 : -1;
}

/* One dump of family's table, then the deletion of every match. */
static int
ct_sweep(struct ct *ct, uint8_t family, const uint8_t *src,
    int (*del)(const struct ct_flow *, void *), void *arg, const char *what,
    char *err, size_t errlen)
{
	struct ct_dump	 d;
	struct nlmsghdr	*nlh;
	size_t		 i;
	int		 n = 0, r;

	if (ct == NULL || src == NULL || (family != AF_INET &&
	    family != AF_INET6)) {
		errno = EINVAL;
		ct_seterr(err, errlen, "%s: invalid arguments", what);
		return -1;
	}
	memset(&d, 0, sizeof(d));
	d.family = family;
	d.src = src;
	d.alen = family == AF_INET ? 4 : 16;
	d.del = del;
	d.arg = arg;
	nlh = ct_msg(ct, IPCTNL_MSG_CT_GET, NLM_F_DUMP, family);
	if (ct_request(ct, nlh, dump_cb, &d) == -1) {
		free(d.v);
		/* No conntrack in this kernel (or namespace): no entries. */
		if (errno == EOPNOTSUPP || errno == EPROTONOSUPPORT)
			return 0;
		ct_seterr(err, errlen, "%s: dump: %s", what, strerror(errno));
		return -1;
	}
	for (i = 0; i < d.n; i++) {
		if ((r = del_one(ct, family, &d.v[i])) == -1) {
			ct_seterr(err, errlen, "%s: delete: %s", what,
			    strerror(errno));
			free(d.v);
			return -1;
		}
		n += r;
	}
	free(d.v);
	if (d.fail != 0) {
		errno = d.fail;
		ct_seterr(err, errlen, "%s: %s", what, strerror(errno));
		return -1;
	}
	return n;
}

int
ct_del_src(struct ct *ct, uint8_t family, const uint8_t *addr, char *err,
    size_t errlen)
{
	return ct_sweep(ct, family, addr, NULL, NULL, "ct_del_src", err,
	    errlen);
}

struct dst_match {
	uint8_t		dst[16];
	size_t		alen;
	uint8_t		proto;
	uint16_t	lo, hi;
};

static int
dst_match(const struct ct_flow *f, void *arg)
{
	const struct dst_match	*m = arg;

	if (memcmp(f->dst, m->dst, m->alen) != 0)
		return 0;
	if (m->proto != 0 && f->proto != m->proto)
		return 0;
	if (f->proto != IPPROTO_TCP && f->proto != IPPROTO_UDP &&
	    f->proto != IPPROTO_SCTP && f->proto != IPPROTO_UDPLITE &&
	    f->proto != IPPROTO_DCCP)
		return 1;
	return f->dport >= m->lo && f->dport <= m->hi;
}

int
ct_del_dst(struct ct *ct, uint8_t family, const uint8_t *src,
    const uint8_t *dst, uint8_t proto, uint16_t lo, uint16_t hi, char *err,
    size_t errlen)
{
	struct dst_match	m;

	if (dst == NULL || lo > hi) {
		errno = EINVAL;
		ct_seterr(err, errlen, "ct_del_dst: invalid arguments");
		return -1;
	}
	memset(&m, 0, sizeof(m));
	m.alen = family == AF_INET ? 4 : 16;
	memcpy(m.dst, dst, m.alen);
	m.proto = proto;
	m.lo = lo;
	m.hi = hi;
	return ct_sweep(ct, family, src, dst_match, &m, "ct_del_dst", err,
	    errlen);
}

int
ct_del_if(struct ct *ct, uint8_t family, const uint8_t *src,
    int (*del)(const struct ct_flow *f, void *arg), void *arg, char *err,
    size_t errlen)
{
	if (del == NULL) {
		errno = EINVAL;
		ct_seterr(err, errlen, "ct_del_if: invalid arguments");
		return -1;
	}
	return ct_sweep(ct, family, src, del, arg, "ct_del_if", err, errlen);
}

/* ------------------------------------------------------------ one flow */

struct get_ctx {
	struct ct_end	*out;
	int		 found;
};

static int
get_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct get_ctx *c = arg;

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct nfgenmsg)) ||
	    (nlh->nlmsg_type & 0xff) != IPCTNL_MSG_CT_NEW)
		return MNL_CB_OK;
	memset(c->out, 0, sizeof(*c->out));
	ct_parse_end(nlh, c->out);
	c->found = 1;
	return MNL_CB_OK;
}

int
ct_get(struct ct *ct, const struct ct_flow *f, struct ct_end *out, char *err,
    size_t errlen)
{
	struct nlmsghdr	*nlh;
	struct nlattr	*t, *n;
	struct get_ctx	 c = { out, 0 };
	uint16_t	 port;

	if (ct == NULL || f == NULL || out == NULL || f->family != AF_INET) {
		errno = EINVAL;
		ct_seterr(err, errlen, "ct_get: invalid arguments");
		return -1;
	}
	nlh = ct_msg(ct, IPCTNL_MSG_CT_GET, NLM_F_ACK, f->family);
	t = mnl_attr_nest_start(nlh, CTA_TUPLE_ORIG);
	n = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
	mnl_attr_put(nlh, CTA_IP_V4_SRC, 4, f->src);
	mnl_attr_put(nlh, CTA_IP_V4_DST, 4, f->dst);
	mnl_attr_nest_end(nlh, n);
	n = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
	mnl_attr_put_u8(nlh, CTA_PROTO_NUM, f->proto);
	if (f->proto == IPPROTO_TCP || f->proto == IPPROTO_UDP ||
	    f->proto == IPPROTO_SCTP || f->proto == IPPROTO_UDPLITE ||
	    f->proto == IPPROTO_DCCP) {
		port = htons(f->sport);
		mnl_attr_put(nlh, CTA_PROTO_SRC_PORT, 2, &port);
		port = htons(f->dport);
		mnl_attr_put(nlh, CTA_PROTO_DST_PORT, 2, &port);
	}
	mnl_attr_nest_end(nlh, n);
	mnl_attr_nest_end(nlh, t);
	/* The entry comes first, then the acknowledgement that ends the
	 * answer: one round trip, the kernel answering from the call. */
	if (ct_request(ct, nlh, get_cb, &c) == -1) {
		if (errno != ENOENT)
			ct_seterr(err, errlen, "ct_get: %s", strerror(errno));
		return -1;
	}
	if (!c.found) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}
