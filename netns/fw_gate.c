/*
 * fw_gate.c: the kernel half of the name gate (fw.h, "fw_gate.c").
 *
 * Why it exists: policies name hosts, the kernel sees addresses, and most
 * allowed hosts share their addresses with thousands of others on a CDN.
 * An address learned from a DNS answer therefore opens a TCP flow only as
 * far as its handshake: its first packets go to the gate in the DNS
 * process (gateway/dns/gate.c), which reads the TLS server_name or the
 * HTTP Host and says whether this sandbox was answered for that name at
 * that address. The rules here carry the flow to the gate and carry its
 * verdict into conntrack, so that every later packet costs one label
 * compare and nothing else:
 *
 *   forward, before the dispatch map:
 *     meta mark & M == OK   ct label set DONE  meta mark set mark & ~M
 *     meta mark & M == DENY ct label set DENY  meta mark set mark & ~M
 *     meta l4proto tcp ct label & DENY != 0    reject with tcp reset
 *     meta l4proto tcp ct label & (REQ|DONE) == REQ
 *         (ip word, tcp word) != a bare ACK   queue num Q
 *   sb_X, before each learned accept (and the keep ones once tainted):
 *     meta l4proto tcp ct label & (REQ|DONE) == 0 <learned lookup>
 *         ct label set REQ  queue num Q
 *
 * The queue is xtables' NFQUEUE target through nft_compat (this kernel
 * family has no native queue expression everywhere), revision 3 without
 * NFQ_FLAG_BYPASS: with no reader the packets are dropped. The gate's
 * verdicts are NF_REPEAT with a packet mark (conntrack attributes in a
 * verdict need a kernel option that is often off), and a sandbox cannot
 * forge that mark: a packet crossing from its namespace has it cleared.
 * The SYN is queued too, so that data in a SYN (TCP Fast Open) never
 * passes unread.
 *
 * Bare ACKs of a flow not yet decided are not queued: they carry nothing
 * the gate reads, and each one queued was a round trip through two
 * processes on the flow's way to its name. Bare means ACK without SYN,
 * FIN or RST, and no byte after the TCP header. nf_tables has no payload
 * length and no arithmetic, so the test is one lookup of two masked words,
 * (IPv4 version and header length, total length) and (TCP data offset,
 * those four flags), in a constant set of the 121 pairs whose headers fill
 * the packet exactly (bare_set). Anything else, an IPv6 packet, one with a
 * byte of data, or a header this kernel could not read, is queued as
 * before: the rule fails towards the gate.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netfilter/xt_NFQUEUE.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>

#include "netns/fw.h"
#include "netns/fw_int.h"
#include "netns/nlsock.h"

#define RULE(chain, ...) do {						\
	if (fw_rb_start(&rb, t, chain) == -1)				\
		return -1;						\
	__VA_ARGS__;							\
	if (fw_rb_end(b, &rb) == -1)					\
		return -1;						\
} while (0)

static void
label_bits(uint32_t w[4], int a, int c)
{
	memset(w, 0, 16);
	if (a >= 0)
		w[a / 32] |= 1u << (a % 32);
	if (c >= 0)
		w[c / 32] |= 1u << (c % 32);
}

static void
e_bitwise(struct fw_rb *rb, uint32_t reg, const void *mask, uint32_t len)
{
	static const uint8_t zero[16];
	struct nftnl_expr *e;

	if ((e = fw_ex(rb, "bitwise")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, reg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, reg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, zero, len);
	fw_ex_add(rb, e);
}

/* ct label & (bits a, c) OP value (bits v, w; -1 = none). */
static void
e_label_cmp(struct fw_rb *rb, int a, int c, uint32_t op, int v, int w)
{
	uint32_t mask[4], val[4];

	label_bits(mask, a, c);
	label_bits(val, v, w);
	fw_e_ct(rb, NFT_CT_LABELS, NFT_REG32_00, 0);
	e_bitwise(rb, NFT_REG32_00, mask, 16);
	fw_e_cmp(rb, NFT_REG32_00, op, val, 16);
}

static void
e_label_set(struct fw_rb *rb, int bit)
{
	uint32_t v[4];

	label_bits(v, bit, -1);
	fw_e_imm(rb, NFT_REG32_00, v, 16);
	fw_e_ct(rb, NFT_CT_LABELS, NFT_REG32_00, 1);
}

static void
e_queue(struct fw_rb *rb, uint16_t queue)
{
	struct xt_NFQ_info_v3	*info;
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "target")) == NULL)
		return;
	/* libnftnl keeps (and frees) the target's info it is given. */
	if ((info = calloc(1, sizeof(*info))) == NULL) {
		nftnl_expr_free(e);
		rb->oom = 1;
		return;
	}
	info->queuenum = queue;
	info->queues_total = 1;
	info->flags = 0;	/* never NFQ_FLAG_BYPASS */
	nftnl_expr_set_str(e, NFTNL_EXPR_TG_NAME, "NFQUEUE");
	nftnl_expr_set_u32(e, NFTNL_EXPR_TG_REV, 3);
	nftnl_expr_set(e, NFTNL_EXPR_TG_INFO, info, sizeof(*info));
	fw_ex_add(rb, e);
}

/* The words of bare_set's key: IP bytes 0-3 (the TOS masked off) and TCP
 * bytes 12-15 (the data offset and FIN, SYN, RST, ACK kept). */
static const uint8_t bare_ipmask[4] = { 0xff, 0x00, 0xff, 0xff };
static const uint8_t bare_tcpmask[4] = { 0xf0, 0x17, 0x00, 0x00 };
#define BARE_ACK	0x10
#define BARE_SET	"__set%d"	/* anonymous: the kernel names it */

/*
 * Queues into b the anonymous constant set of bare ACK keys, with batch id
 * id (the rule's lookup refers to it by that id; the kernel frees the set
 * with the rule). -1 (ENOMEM) on failure.
 */
static int
bare_set(struct fw_batch *b, const char *t, uint32_t id)
{
	struct nftnl_set	*s;
	struct nftnl_set_elem	*e;
	uint8_t			 key[8];
	unsigned		 ihl, doff, len;

	if ((s = nftnl_set_alloc()) == NULL)
		return -1;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, t);
	nftnl_set_set_str(s, NFTNL_SET_NAME, BARE_SET);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_ANONYMOUS |
	    NFT_SET_CONSTANT);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, sizeof(key));
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, 0);
	nftnl_set_set_u32(s, NFTNL_SET_ID, id);
	nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, 11 * 11);
	nftnl_set_nlmsg_build_payload(fw_batch_hdr(b, NFT_MSG_NEWSET,
	    NLM_F_CREATE), s);
	fw_batch_next(b);
	/* Header lengths are counted in words of 4 bytes, 5 to 15 each. */
	for (ihl = 5; ihl <= 15; ihl++)
		for (doff = 5; doff <= 15; doff++) {
			if ((e = nftnl_set_elem_alloc()) == NULL) {
				nftnl_set_free(s);
				return -1;
			}
			len = 4 * (ihl + doff);
			memset(key, 0, sizeof(key));
			key[0] = (uint8_t)(0x40 | ihl);
			key[2] = (uint8_t)(len >> 8);
			key[3] = (uint8_t)len;
			key[4] = (uint8_t)(doff << 4);
			key[5] = BARE_ACK;
			nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key,
			    sizeof(key));
			nftnl_set_elem_add(s, e);
		}
	nftnl_set_elems_nlmsg_build_payload(fw_batch_hdr(b,
	    NFT_MSG_NEWSETELEM, NLM_F_CREATE), s);
	fw_batch_next(b);
	nftnl_set_free(s);
	return 0;
}

/*
 * Not a bare ACK (see the opening comment). The packet's TCP header was
 * read whole by conntrack before: a packet it refuses has no conntrack
 * entry, so the label compare before this has already failed.
 */
static void
e_not_bare(struct fw_rb *rb, uint32_t id)
{
	struct nftnl_expr	*e;

	fw_e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 0, 4, NFT_REG32_00);
	e_bitwise(rb, NFT_REG32_00, bare_ipmask, 4);
	fw_e_payload(rb, NFT_PAYLOAD_TRANSPORT_HEADER, 12, 4, NFT_REG32_01);
	e_bitwise(rb, NFT_REG32_01, bare_tcpmask, 4);
	if ((e = fw_ex(rb, "lookup")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG32_00);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, BARE_SET);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, id);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
	fw_ex_add(rb, e);
}

void
fw_e_gate_unmarked(struct fw_rb *rb)
{
	uint32_t m = FW_GATE_M_MASK, zero = 0;

	fw_e_meta(rb, NFT_META_MARK, NFT_REG32_04);
	e_bitwise(rb, NFT_REG32_04, &m, 4);
	fw_e_cmp(rb, NFT_REG32_04, NFT_CMP_EQ, &zero, 4);
}

int
fw_gate_forward(struct fw_batch *b, const char *t, uint16_t queue)
{
	static const struct { uint32_t mark; int label; } v[] = {
		{ FW_GATE_M_OK, FW_GATE_L_DONE },
		{ FW_GATE_M_DENY, FW_GATE_L_DENY },
	};
	struct fw_rb	rb;
	size_t		i;
	uint32_t	id;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		RULE("forward", {
			uint32_t m = FW_GATE_M_MASK, keep = ~FW_GATE_M_MASK;
			struct nftnl_expr *e;

			fw_e_meta(&rb, NFT_META_MARK, NFT_REG32_04);
			e_bitwise(&rb, NFT_REG32_04, &m, 4);
			fw_e_cmp(&rb, NFT_REG32_04, NFT_CMP_EQ, &v[i].mark, 4);
			e_label_set(&rb, v[i].label);
			/* The mark's other bits are someone else's. */
			fw_e_meta(&rb, NFT_META_MARK, NFT_REG32_04);
			e_bitwise(&rb, NFT_REG32_04, &keep, 4);
			if ((e = fw_ex(&rb, "meta")) != NULL) {
				nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY,
				    NFT_META_MARK);
				nftnl_expr_set_u32(e, NFTNL_EXPR_META_SREG,
				    NFT_REG32_04);
				fw_ex_add(&rb, e);
			}
		});
	RULE("forward", {
		fw_e_l4proto(&rb, IPPROTO_TCP);
		e_label_cmp(&rb, FW_GATE_L_DENY, -1, NFT_CMP_NEQ, -1, -1);
		fw_e_reject(&rb, NFT_REJECT_TCP_RST, 0);
	});
	/* Unique in this batch, as the set table's ids are (message
	 * number + 1). */
	id = b->nmsg + 1;
	if (bare_set(b, t, id) == -1)
		return -1;
	RULE("forward", {
		fw_e_l4proto(&rb, IPPROTO_TCP);
		e_label_cmp(&rb, FW_GATE_L_REQ, FW_GATE_L_DONE, NFT_CMP_EQ,
		    FW_GATE_L_REQ, -1);
		e_not_bare(&rb, id);
		e_queue(&rb, queue);
	});
	return 0;
}

int
fw_gate_learned(struct fw_batch *b, const char *t, const char *chain,
    const char *set, int six, uint32_t role, int v6, int insert)
{
	struct fw_rb	rb;

	if (fw_rb_start(&rb, t, chain) == -1)
		return -1;
	rb.v4only = !v6;
	fw_e_l4proto(&rb, IPPROTO_TCP);
	e_label_cmp(&rb, FW_GATE_L_REQ, FW_GATE_L_DONE, NFT_CMP_EQ, -1, -1);
	if (set != NULL) {
		fw_e_tuple(&rb, six);
		fw_e_lookup(&rb, FW_REG_IF, set, 0);
	} else {
		char sset[FW_NAMEMAX], schain[FW_NAMEMAX];

		/* chain is sb_<ifname>: its set is s_<ifname>. */
		fw_sbx_names(chain + strlen(FW_SBX_CHAIN), sset, schain);
		fw_e_role(&rb, sset, six, role, 1);
	}
	e_label_set(&rb, FW_GATE_L_REQ);
	e_queue(&rb, b->fw->gate_queue);
	return fw_rb_put(b, &rb, insert);
}

/* ------------------------------------------------------- queue socket */

static int
cfg_send(struct mnl_socket *nl, char *buf, uint16_t queue,
    void (*fill)(struct nlmsghdr *, void *), void *arg)
{
	struct nlmsghdr	*nlh;
	struct nfgenmsg	*g;
	uint32_t	 seq = (uint32_t)time(NULL);
	int		 n;

	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_CONFIG;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = AF_UNSPEC;
	g->version = NFNETLINK_V0;
	g->res_id = htons(queue);
	fill(nlh, arg);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	if ((n = (int)mnl_socket_recvfrom(nl, buf, 8192)) < 0)
		return -1;
	return mnl_cb_run(buf, (size_t)n, seq, mnl_socket_get_portid(nl),
	    NULL, NULL) < 0 ? -1 : 0;
}

static void
fill_bind(struct nlmsghdr *nlh, void *arg)
{
	struct nfqnl_msg_config_cmd cmd;

	(void)arg;
	memset(&cmd, 0, sizeof(cmd));
	cmd.command = NFQNL_CFG_CMD_BIND;
	mnl_attr_put(nlh, NFQA_CFG_CMD, sizeof(cmd), &cmd);
}

static void
fill_params(struct nlmsghdr *nlh, void *arg)
{
	struct nfqnl_msg_config_params p;

	(void)arg;
	memset(&p, 0, sizeof(p));
	p.copy_range = htonl(0xffff);
	p.copy_mode = NFQNL_COPY_PACKET;
	mnl_attr_put(nlh, NFQA_CFG_PARAMS, sizeof(p), &p);
	mnl_attr_put_u32(nlh, NFQA_CFG_QUEUE_MAXLEN, htonl(4096));
	/* Explicitly not NFQA_CFG_F_FAIL_OPEN: a full queue drops. */
	mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(NFQA_CFG_F_FAIL_OPEN));
	mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(0));
}

int
fw_gate_open(uint16_t queue, char *err, size_t errlen)
{
	static char		 buf[8192];
	struct timeval		 tv = { 1, 0 };
	struct mnl_socket	*nl;
	int			 fd, e, one = 1;

	if ((nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC)) ==
	    NULL) {
		fw_seterr(err, errlen, "gate queue: socket: %s",
		    strerror(errno));
		return -1;
	}
	/* Setting up waits for each answer (they come straight back);
	 * serving, in the gate, never blocks. */
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == -1 ||
	    mnl_socket_setsockopt(nl, NETLINK_NO_ENOBUFS, &one,
	    sizeof(one)) == -1 ||
	    setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
	    sizeof(tv)) == -1 ||
	    cfg_send(nl, buf, queue, fill_bind, NULL) == -1 ||
	    cfg_send(nl, buf, queue, fill_params, NULL) == -1) {
		e = errno;
		mnl_socket_close(nl);
		fw_seterr(err, errlen, "gate queue %u: %s", queue,
		    strerror(e));
		errno = e;
		return -1;
	}
	/* The handle was a wrapper; the copy keeps the bound socket. */
	if ((fd = nlsock_keep(nl)) == -1)
		fw_seterr(err, errlen, "gate queue %u: %s", queue,
		    strerror(errno));
	return fd;
}
