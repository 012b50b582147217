/*
 * fw.c: the nftables table that enforces sandbox egress in the kernel.
 *
 * Why this file exists: a sandbox is root in its own network namespace and can
 * ignore any proxy, open raw sockets or re-enable IPv6, so the only boundary
 * that holds is on the host side of its veth. This file writes that boundary
 * once (fw_init) as shared rules, plus one small set and chain per sandbox
 * reached through one verdict-map lookup (built here, managed by fw_elem.c
 * with the set elements). Packet cost is a fixed number of hash/pipapo
 * lookups whatever the number of sandboxes.
 *
 * The ruleset, in `nft list` syntax (G = nflog group, SVC = service address,
 * POOL = sandbox pool; "ipv4 key" means
 * `ifname . ipv4_addr . inet_proto . inet_service`, X = a sandbox's link,
 * e.g. "sl-12", GEN = X's generation; in the sizes, S =
 * fw_config.max_sandboxes, default 4096, and L = fw_config.max_learned, the
 * learned destinations one sandbox may hold, default 8192):
 *
 *   table inet sluice {
 *     set sbx4 { type ifname . ipv4_addr; size S; }    # anti-spoofing
 *     set sbx6 { type ifname . ipv6_addr; size S; }
 *     set deny4 { type ipv4_addr; flags interval; size 8194; } # always-deny,
 *                                                       # and the pool
 *     set deny6 { type ipv6_addr; flags interval; size 8194; }
 *     set private4 { type ipv4_addr; flags interval; size 8194; }
 *     set private6 { type ipv6_addr; flags interval; size 8194; }
 *     set restricted { type ifname; size S; }          # who is narrowed
 *     set learned4 { ipv4 key; flags timeout; size S*L; } # learned, one port
 *     set lkeep4 { ipv4 key; flags timeout; size S*L; }   # ... keep-list
 *     (learned6, lkeep6 alike)
 *     map quota { type ifname : quota; size S; }       # objects "q_<ifname>"
 *     map sbx_dispatch { type ifname : verdict; size S; } # "X" : jump sb_X
 *     map sbx_gen { type ifname : mark; size S; }      # "X" : GEN
 *     set sbx_own { type ifname . mark; size S; }      # "X" . GEN
 *     set logmeter { type ifname; flags dynamic,timeout; size 2*S; }
 *     counter unlogged                                 # denials not logged
 *
 *     per sandbox X, made and removed with it:
 *     set s_X { type mark . ipv6_addr . inet_proto . inet_service;
 *       flags interval,timeout; size 3*4096+1+2*L; }
 *       # role . address (IPv4 as ::ffff:a.b.c.d) . proto . port; roles:
 *       # 1/2 allow4/6, 3/4 pallow4/6 (rules inside private ranges),
 *       # 5/6 deny4/6 and 7 icmp4 (proto and port 0), 8/9 keep4/6,
 *       # 10/11 learned port ranges (timeout), 12/13 the same on the
 *       # keep-list, 14/15 keep4/6 rules inside a private range.
 *       # "@s_X role R" below: role R . ip daddr (mapped) . meta l4proto
 *       # . th dport (or . 0 . 0 for 5-7) in @s_X.
 *     chain sb_X {
 *       (only once fw_restrict narrowed X, checked in the policy's order:)
 *       @s_X role 5 goto d_rule
 *       ip daddr @private4 @s_X role 14 accept
 *       ip daddr @private4 goto d_private
 *       @s_X role 8 accept
 *       iifname . ip daddr . meta l4proto . th dport @lkeep4 accept
 *       @s_X role 12 accept
 *       (the same for IPv6: roles 6, 15, 9, 13, @private6, @lkeep6)
 *       goto d_tainted
 *       (always:)
 *       ct state established,related ct mark GEN accept  # X's own flows only
 *       meta l4proto 6-17 th dport 853 goto d_dot
 *       @s_X role 5 goto d_rule
 *       @s_X role 6 goto d_rule
 *       ip daddr @private4 @s_X role 3 accept
 *       ip daddr @private4 goto d_private
 *       ip6 daddr @private6 ... (the same two rules with role 4)
 *       iifname . ip daddr . meta l4proto . th dport @learned4 accept
 *       @s_X role 10 accept
 *       @s_X role 1 accept
 *       (the same three for ip6 daddr with @learned6, roles 11 and 2)
 *       icmp type echo-request @s_X role 7 accept
 *     }                                 # falling off returns to forward
 *     (IPv6 rules, v6 and restricted alike, only for a sandbox with an
 *     IPv6 address: without one in @sbx6 no IPv6 packet of it gets here)
 *
 *     chain forward { type filter hook forward priority filter; policy accept;
 *       iifname != "sl-*" oifname != "sl-*" return     # not ours
 *       iifname != "sl-*" oifname "sl-*" ct state established,related accept
 *       oifname "sl-*" drop                             # new flows inbound
 *       quota name iifname map @quota goto d_quota
 *       meta nfproto ipv4 iifname . ip saddr != @sbx4 goto d_spoof
 *       meta nfproto ipv6 iifname . ip6 saddr != @sbx6 goto d_spoof
 *       ip daddr @deny4 goto d_always
 *       ip6 daddr @deny6 goto d_always
 *       iifname vmap @sbx_dispatch
 *       goto d_default
 *     }
 *     chain input { type filter hook input priority filter; policy accept;
 *       ip daddr SVC iifname != "sl-*" drop      # sandboxes only, not lo
 *       (ip6 daddr SVC6 the same, when configured)
 *       iifname != "sl-*" return
 *       icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } ip6 hoplimit 255 accept
 *       meta nfproto ipv4 iifname . ip saddr != @sbx4 goto d_spoof
 *       meta nfproto ipv6 iifname . ip6 saddr != @sbx6 goto d_spoof
 *       ct state established,related iifname . ct mark @sbx_own accept
 *       ip daddr SVC udp dport 53 accept
 *       ip daddr SVC tcp dport 53 accept
 *       ip daddr SVC tcp dport BRIDGE accept
 *       (the same three for ip6 daddr SVC6 when configured)
 *       goto d_input
 *     }
 *     chain prerouting { type nat hook prerouting priority dstnat; policy accept;
 *       iifname "sl-*" ct mark set iifname map @sbx_gen  # a flow's 1st packet
 *       iifname "sl-*" ip daddr != SVC udp dport 53 dnat ip to SVC:53
 *       iifname "sl-*" ip daddr != SVC tcp dport 53 dnat ip to SVC:53
 *     }
 *     chain postrouting { type nat hook postrouting priority srcnat; policy accept;
 *       ip saddr POOL oifname != "sl-*" masquerade     # or oifname UPLINK
 *     }
 *
 *     Denials go to one chain per reason (D, verdict V: d_dot "deny:dot"
 *     drop, d_rule "deny:rule", d_private "deny:private", d_tainted
 *     "deny:tainted", d_always "deny:always" (these four reject with
 *     icmpx admin-prohibited), d_quota "deny:quota", d_spoof "deny:spoof",
 *     d_input "deny:input" (these drop), d_default "deny:default" (TCP
 *     reset, else admin-prohibited)), each:
 *     chain d_D {
 *       update @logmeter { iifname timeout 1m
 *           limit rate 20/second burst 50 packets }
 *           log prefix "deny:D" group G V
 *       counter name "unlogged" V
 *     }
 *     (d_default: both rules first with meta l4proto tcp and reject with
 *     tcp reset, then as above)
 *   }
 *
 * Notes on choices. Private ranges open only through role pallow, which
 * holds the static rules whose CIDR lies wholly inside a private range: a
 * broad rule such as 0.0.0.0/0 tcp 443 never opens 10/8. Reject, not drop,
 * for policy denials: the agent gets an immediate, parseable refusal (TCP
 * RST / admin-prohibited) instead of a timeout it may retry; spoofed and
 * inbound packets are silently dropped. The pool is in @deny4 so sandboxes
 * never reach each other. Postrouting matches the pool by source address
 * because iifname is not known there. Quota uses "over" quota objects
 * looked up by iifname: constant cost, bytes counted on every forwarded
 * packet from the sandbox.
 *
 * Flows belong to the sandbox (generation) that opened them. Conntrack
 * relates packets to flows by addresses and ports alone: accepted as
 * "established,related" without more, a sandbox could send an ICMP error
 * quoting another sandbox's live flow (conntrack calls it related to that
 * flow; its payload goes wherever the other sandbox talks to), or, made on
 * the link and address of a removed sandbox, send on the flows that one
 * left. So every sandbox has a generation (fw_sandbox.gen: nonzero, never
 * given twice, kept by the gateway), the first packet of each flow from
 * its link marks the flow with it (prerouting; a nat chain sees a flow's
 * first packet only, when its conntrack entry is new and unconfirmed, so a
 * leftover entry keeps the mark it had), and only flows with the
 * sandbox's own mark pass as established or related: a compare in sb_X,
 * a lookup of link . mark in @sbx_own in input. Another sandbox's flow,
 * or an earlier sandbox's on the same link, is judged like a new packet,
 * and no policy rule accepts an ICMP error. Replies into a sandbox are
 * unchanged (they come from outside, after anti-spoofing kept the
 * sandbox's own packets to its own address). An adopted sandbox keeps its
 * generation, so its flows live on across a restart. The whole ct mark is
 * ours on sandbox flows: another table that rewrites it makes those flows
 * be judged packet by packet (still by the policy).
 *
 * The service address is for sandboxes only: a packet to it from any
 * other link (the uplink, whatever source it claims and whatever rp_filter
 * says; lo, so not the host itself either) is dropped first thing in
 * input, and in input as in forward anti-spoofing comes before the
 * established accept.
 *
 * Logging is bounded per sandbox link: the d_* chains log only while the
 * link's meter entry (a dynamic set of links, each with its own limit,
 * FW_LOG_RATE a second after a burst of FW_LOG_BURST, expiring a minute
 * after its last denial) allows; over it, or with the meter full, the
 * packet is denied all the same and counted in "unlogged". A denial is a
 * goto: one rule in sb_X or a base chain, its logging and verdict in the
 * shared chain, so the per-sandbox chains are no longer than before.
 *
 * Set sizes: every set is bounded, and a full set refuses the element
 * (ENFILE), which only ever denies. Per-sandbox keyed sets hold S (the
 * most sandboxes fw_config allows; the gateway passes its max_sandboxes).
 * The range sets hold every range fw_config can pass (FW_MAX_RANGES, and
 * the pool), two kernel elements each. The learned sets hold S * L, so no
 * sandbox within its own cap (enforced in the gateway) is ever refused for
 * another's (S * L = 33,554,432 by default; a hash set with timeouts
 * grows as it fills, its size only caps it, while one without, such as
 * sbx4, is a fixed table of 4/3 S buckets rounded up to a power of two:
 * 64 KiB at S = 4096). A
 * sandbox's own set holds its statics and keep rules at FW_MAX_RULES each,
 * the ICMP catch-all and 2 * L learned port ranges. The log meter holds
 * 2 * S links (removed sandboxes' entries live a minute). A table whose
 * sets are smaller than asked is not adopted (fw_init) but replaced.
 *
 * Why a set and a chain per sandbox: interval (pipapo) sets
 * rebuild their lookup tables on every change, at a cost that grows with
 * the set, so shared interval sets keyed on ifname made deleting one
 * sandbox cost tens of milliseconds with a thousand present. A sandbox's
 * own set is small, and deleting it (with its chain) costs the same
 * whatever else the table holds; the shared learned sets are hashes,
 * deleted from by key. The role field keeps it to one set per sandbox: the
 * kernel finds sets by name with a linear search. What this costs: a batch
 * that adds rules (fw_sandbox_add, the first fw_restrict) makes the kernel
 * re-validate every chain reachable from the base chains, i.e. every
 * sandbox chain, so adding grows with the number of sandboxes (a few
 * microseconds each); hence the short chains.
 *
 * The per-packet path. Replies into a sandbox leave at the second rule.
 * A packet from a sandbox in an established flow still meets, before the
 * established accept, exactly one lookup each for quota (every byte
 * counts), anti-spoofing (a sandbox must not ride another sandbox's flow by
 * forging its address: conntrack would call that packet established),
 * always-deny (ranges added when a restarted daemon adopts the table cut
 * flows opened before) and the dispatch map (whose chain starts with the
 * restriction when there is one: a taint cuts open flows at once): four
 * constant-cost lookups (hash, hash, a short rbtree, hash); then the
 * generation, a compare of the flow's mark (no lookup). Marking costs a
 * flow's first packet one hash lookup (prerouting), and no later packet.
 * The keep lists are searched only for tainted sandboxes. New flows then
 * meet the sandbox's own small set and the learned hash; a learned
 * destination with one port is a hash lookup whatever the number of
 * learned elements, and it is tried before the sandbox's ranges and
 * statics (all accept, so their order changes no verdict, only what a new
 * flow costs).
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netlink.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

/* nft's datatype ids, only so that `nft list` prints our sets readably. */
#define DT_IPADDR	7
#define DT_IP6ADDR	8
#define DT_PROTO	12
#define DT_SERVICE	13
#define DT_IFNAME	41
#define DT_MARK		19

#define FW_GC_INTERVAL_MS	10000

/* Registers: ifname fills NFT_REG32_00..03, the address starts at 04. */
#define R_IF		NFT_REG32_00
#define R_ADDR		NFT_REG32_04
#define R_PROTO4	(NFT_REG32_04 + 1)
#define R_PORT4		(NFT_REG32_04 + 2)
#define R_PROTO6	(NFT_REG32_04 + 4)
#define R_PORT6		(NFT_REG32_04 + 5)
#define R_TMP		NFT_REG32_00

void
fw_seterr(char *err, size_t errlen, const char *fmt, ...)
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

/* ---------------------------------------------------------------- socket */

struct fw *
fw_new(char *err, size_t errlen)
{
	struct fw	*fw;
	int		 one = 1, rcv = 4 << 20;

	if ((fw = calloc(1, sizeof(*fw))) == NULL) {
		fw_seterr(err, errlen, "fw_new: %s", strerror(errno));
		return NULL;
	}
	/* Zeroed: libmnl sends attribute padding as it finds it. */
	if ((fw->buf = calloc(1, FW_BUFSZ)) == NULL)
		goto fail;
	if ((fw->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC)) == NULL)
		goto fail;
	if (mnl_socket_bind(fw->nl, 0, MNL_SOCKET_AUTOPID) == -1)
		goto fail;
	fw->portid = mnl_socket_get_portid(fw->nl);
	/* Short error messages (no echo of our batch), and room for them. */
	(void)mnl_socket_setsockopt(fw->nl, NETLINK_CAP_ACK, &one, sizeof(one));
	(void)mnl_socket_setsockopt(fw->nl, NETLINK_EXT_ACK, &one, sizeof(one));
	if (setsockopt(mnl_socket_get_fd(fw->nl), SOL_SOCKET, SO_RCVBUFFORCE,
	    &rcv, sizeof(rcv)) == -1)
		(void)setsockopt(mnl_socket_get_fd(fw->nl), SOL_SOCKET,
		    SO_RCVBUF, &rcv, sizeof(rcv));
	fw->seq = 1;
	snprintf(fw->table, sizeof(fw->table), "%s", "sluice");
	return fw;
fail:
	fw_seterr(err, errlen, "fw_new: netfilter socket: %s", strerror(errno));
	fw_free(fw);
	return NULL;
}

void
fw_free(struct fw *fw)
{
	int	saved = errno;

	if (fw == NULL)
		return;
	if (fw->nl != NULL)
		mnl_socket_close(fw->nl);
	fw_idx_clear(fw);
	free(fw->buf);
	free(fw->priv);
	free(fw);
	errno = saved;
}

/* ----------------------------------------------------------------- batch */

int
fw_batch_begin(struct fw *fw, struct fw_batch *b)
{
	memset(b, 0, sizeof(*b));
	b->fw = fw;
	b->b = mnl_nlmsg_batch_start(fw->buf, FW_BATCH_LIMIT);
	if (b->b == NULL)
		return -1;
	nftnl_batch_begin(mnl_nlmsg_batch_current(b->b), fw->seq++);
	mnl_nlmsg_batch_next(b->b);
	return 0;
}

struct nlmsghdr *
fw_batch_hdr(struct fw_batch *b, uint16_t type, uint16_t flags)
{
	b->last = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(b->b), type,
	    NFPROTO_INET, flags, b->fw->seq++);
	return b->last;
}

void
fw_batch_next(struct fw_batch *b)
{
	/* The buffer is twice the limit, so one message past it is safe; we
	 * refuse the batch rather than split it, which would lose atomicity. */
	if (!mnl_nlmsg_batch_next(b->b))
		b->overflow = 1;
	b->nmsg++;
}

void
fw_batch_abort(struct fw_batch *b)
{
	if (b->b != NULL)
		mnl_nlmsg_batch_stop(b->b);
	b->b = NULL;
}

/* Drains every reply queued on the socket. nfnetlink processes a batch
 * synchronously inside sendmsg, so all errors and the final ACK are already
 * queued when sendto returns. */
static int
fw_drain(struct fw *fw, int *acks, int *kerr, uint32_t *kseq)
{
	char			 rbuf[8192];
	ssize_t			 n;
	struct nlmsghdr		*nlh;
	struct nlmsgerr		*e;

	for (;;) {
		n = recv(mnl_socket_get_fd(fw->nl), rbuf, sizeof(rbuf),
		    MSG_DONTWAIT);
		if (n == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EINTR)
				continue;
			return -1;
		}
		for (nlh = (struct nlmsghdr *)rbuf; mnl_nlmsg_ok(nlh, (int)n);
		    nlh = mnl_nlmsg_next(nlh, (int *)&n)) {
			if (nlh->nlmsg_type != NLMSG_ERROR)
				continue;
			if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*e)))
				continue;
			e = mnl_nlmsg_get_payload(nlh);
			if (e->error == 0)
				(*acks)++;
			else if (*kerr == 0) {
				*kerr = -e->error;
				*kseq = e->msg.nlmsg_seq;
			}
		}
	}
}

int
fw_batch_commit(struct fw_batch *b, const char *what, char *err,
    size_t errlen)
{
	struct fw	*fw = b->fw;
	int		 acks = 0, kerr = 0;
	uint32_t	 kseq = 0, seq0;
	ssize_t		 n;

	if (b->overflow) {
		fw_batch_abort(b);
		errno = E2BIG;
		fw_seterr(err, errlen, "%s: batch too large", what);
		return -1;
	}
	if (b->nmsg == 0) {
		fw_batch_abort(b);
		return 0;
	}
	/* Only the last message asks for an ACK: errors are always reported,
	 * so "no error and the ACK" means the whole batch committed. */
	b->last->nlmsg_flags |= NLM_F_ACK;
	nftnl_batch_end(mnl_nlmsg_batch_current(b->b), fw->seq++);
	if (!mnl_nlmsg_batch_next(b->b)) {
		/* The END did not fit under the limit and libmnl left it out.
		 * The kernel aborts a batch without END yet still sends the
		 * ACK its last message asked for, which would read as a
		 * commit: refuse it here instead. */
		fw_batch_abort(b);
		errno = E2BIG;
		fw_seterr(err, errlen, "%s: batch too large", what);
		return -1;
	}
	/* Replies left over from an earlier failed call must not be counted. */
	(void)fw_drain(fw, &acks, &kerr, &kseq);
	acks = kerr = 0;
	seq0 = ((struct nlmsghdr *)mnl_nlmsg_batch_head(b->b))->nlmsg_seq;
	n = mnl_socket_sendto(fw->nl, mnl_nlmsg_batch_head(b->b),
	    mnl_nlmsg_batch_size(b->b));
	fw_batch_abort(b);
	if (n == -1) {
		fw_seterr(err, errlen, "%s: send: %s", what, strerror(errno));
		return -1;
	}
	if (fw_drain(fw, &acks, &kerr, &kseq) == -1) {
		fw_seterr(err, errlen, "%s: receive: %s", what,
		    strerror(errno));
		return -1;
	}
	if (kerr != 0) {
		errno = kerr;
		fw_seterr(err, errlen, "%s: kernel: message %u of %u: %s",
		    what, kseq - seq0, b->nmsg, strerror(kerr));
		return -1;
	}
	if (acks < 1) {
		errno = EPROTO;
		fw_seterr(err, errlen, "%s: no acknowledgement", what);
		return -1;
	}
	return 0;
}

/* Sends one request and runs cb over the replies until the ACK or the end of
 * a dump. Returns 0, or -1 with errno (the kernel's error for ENOENT etc.). */
int
fw_request(struct fw *fw, struct nlmsghdr *nlh, mnl_cb_t cb, void *arg)
{
	char		*rbuf = fw->buf + FW_BATCH_LIMIT * 2;
	uint32_t	 seq = nlh->nlmsg_seq;
	ssize_t		 n;
	int		 ret, acks = 0, kerr = 0;
	uint32_t	 kseq;

	(void)fw_drain(fw, &acks, &kerr, &kseq);
	if (mnl_socket_sendto(fw->nl, nlh, nlh->nlmsg_len) == -1)
		return -1;
	for (;;) {
		n = mnl_socket_recvfrom(fw->nl, rbuf, FW_RBUFSZ);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		ret = mnl_cb_run(rbuf, n, seq, fw->portid, cb, arg);
		if (ret == MNL_CB_ERROR)
			return -1;
		if (ret == MNL_CB_STOP)
			return 0;
	}
}

/* ---------------------------------------------------------- expressions */

struct rb {
	struct nftnl_rule	*r;
	int			 oom;
	int			 v4only;	/* e_nfproto emits nothing */
};

static struct nftnl_expr *
ex(struct rb *rb, const char *name)
{
	struct nftnl_expr	*e;

	if ((e = nftnl_expr_alloc(name)) == NULL)
		rb->oom = 1;
	return e;
}

static void
ex_add(struct rb *rb, struct nftnl_expr *e)
{
	if (e != NULL)
		nftnl_rule_add_expr(rb->r, e);
}

static void
e_meta(struct rb *rb, uint32_t key, uint32_t dreg)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "meta")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
	ex_add(rb, e);
}

static void
e_cmp(struct rb *rb, uint32_t sreg, uint32_t op, const void *data,
    uint32_t len)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "cmp")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, sreg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	ex_add(rb, e);
}

static void
e_payload(struct rb *rb, uint32_t base, uint32_t off, uint32_t len,
    uint32_t dreg)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "payload")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
	ex_add(rb, e);
}

static void
e_lookup(struct rb *rb, uint32_t sreg, const char *set, int inv)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "lookup")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
	if (inv)
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS,
		    NFT_LOOKUP_F_INV);
	ex_add(rb, e);
}

/* A verdict map lookup: the element's verdict (a jump) is the result. */
static void
e_vmap(struct rb *rb, uint32_t sreg, const char *set)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "lookup")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
	ex_add(rb, e);
}

static void
e_verdict(struct rb *rb, int verdict)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "immediate")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
	ex_add(rb, e);
}

static void
e_imm(struct rb *rb, uint32_t dreg, const void *data, uint32_t len)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "immediate")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, dreg);
	nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, data, len);
	ex_add(rb, e);
}

static void
e_log(struct rb *rb, uint16_t group, const char *prefix)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "log")) == NULL)
		return;
	nftnl_expr_set_u16(e, NFTNL_EXPR_LOG_GROUP, group);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOG_PREFIX, prefix);
	/* Enough for IPv6 + TCP headers; the payload is never needed. */
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOG_SNAPLEN, 128);
	ex_add(rb, e);
}

static void
e_reject(struct rb *rb, uint32_t type, uint8_t code)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "reject")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, type);
	nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, code);
	ex_add(rb, e);
}

static void
e_reject_admin(struct rb *rb)
{
	e_reject(rb, NFT_REJECT_ICMPX_UNREACH,
	    NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
}

static void
e_ct_established(struct rb *rb)
{
	struct nftnl_expr	*e;
	uint32_t		 mask = NF_CT_STATE_BIT(IP_CT_ESTABLISHED) |
	    NF_CT_STATE_BIT(IP_CT_RELATED), zero = 0;

	if ((e = ex(rb, "ct")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, R_TMP);
	ex_add(rb, e);
	if ((e = ex(rb, "bitwise")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, R_TMP);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, R_TMP);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, 4);
	ex_add(rb, e);
	e_cmp(rb, R_TMP, NFT_CMP_NEQ, &zero, 4);
}

/* ct KEY into dreg (get), or from sreg into the conntrack entry (set). */
static void
e_ct(struct rb *rb, uint32_t key, uint32_t reg, int set)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "ct")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, key);
	nftnl_expr_set_u32(e, set ? NFTNL_EXPR_CT_SREG : NFTNL_EXPR_CT_DREG,
	    reg);
	ex_add(rb, e);
}

/* A map lookup: the element's data lands in dreg. */
static void
e_map(struct rb *rb, uint32_t sreg, const char *set, uint32_t dreg)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "lookup")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, dreg);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
	ex_add(rb, e);
}

/* goto chain: its verdict is the packet's (the d_* chains end in one). */
static void
e_goto(struct rb *rb, const char *chain)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "immediate")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)NFT_GOTO);
	nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
	ex_add(rb, e);
}

/*
 * `update @logmeter { iifname timeout 60s limit rate FW_LOG_RATE/second
 * burst FW_LOG_BURST packets }`: true while the input link is within its
 * log budget. The meter is a dynamic set of links, each with a limit of
 * its own; a link over its budget, or that finds the meter full, breaks
 * the rule (the caller's next rule denies without logging).
 */
static void
e_log_budget(struct rb *rb)
{
	struct nftnl_expr	*e, *l;

	e_meta(rb, NFT_META_IIFNAME, R_IF);
	if ((e = ex(rb, "dynset")) == NULL)
		return;
	if ((l = ex(rb, "limit")) == NULL) {
		nftnl_expr_free(e);
		return;
	}
	nftnl_expr_set_u64(l, NFTNL_EXPR_LIMIT_RATE, FW_LOG_RATE);
	nftnl_expr_set_u64(l, NFTNL_EXPR_LIMIT_UNIT, 1);
	nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_BURST, FW_LOG_BURST);
	nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
	nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_FLAGS, 0);
	nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, R_IF);
	nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_OP, NFT_DYNSET_OP_UPDATE);
	nftnl_expr_set_u64(e, NFTNL_EXPR_DYNSET_TIMEOUT, FW_LOG_METER_MS);
	nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME, "logmeter");
	/* From here e owns l. */
	nftnl_expr_set(e, NFTNL_EXPR_DYNSET_EXPR, l, 0);
	ex_add(rb, e);
}

/* counter name "unlogged": what the log budget kept out of nflog. */
static void
e_unlogged(struct rb *rb)
{
	struct nftnl_expr	*e;

	if ((e = ex(rb, "objref")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_OBJREF_IMM_TYPE, NFT_OBJECT_COUNTER);
	nftnl_expr_set_str(e, NFTNL_EXPR_OBJREF_IMM_NAME, FW_UNLOGGED);
	ex_add(rb, e);
}

/* iifname/oifname "sl-*": compare only the prefix, as nft does for '*'. */
static void
e_sbx_if(struct rb *rb, uint32_t key, int eq)
{
	e_meta(rb, key, R_TMP);
	e_cmp(rb, R_TMP, eq ? NFT_CMP_EQ : NFT_CMP_NEQ, FW_IFPREFIX,
	    sizeof(FW_IFPREFIX) - 1);
}

/* In the chain of a sandbox without an IPv6 address, where anti-spoofing
 * has let no IPv6 packet through, the family test is left out (rb->v4only):
 * every rule there costs each later rule-adding batch its validation. */
static void
e_nfproto(struct rb *rb, uint8_t proto)
{
	if (rb->v4only)
		return;
	e_meta(rb, NFT_META_NFPROTO, R_TMP);
	e_cmp(rb, R_TMP, NFT_CMP_EQ, &proto, 1);
}

static void
e_l4proto(struct rb *rb, uint8_t proto)
{
	e_meta(rb, NFT_META_L4PROTO, R_TMP);
	e_cmp(rb, R_TMP, NFT_CMP_EQ, &proto, 1);
}

static void
e_dport(struct rb *rb, uint16_t port)
{
	uint16_t	be = htons(port);

	e_payload(rb, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, R_TMP);
	e_cmp(rb, R_TMP, NFT_CMP_EQ, &be, 2);
}

/* Loads (iifname, daddr|saddr) into R_IF.. for a lookup; v6 when six. */
static void
e_if_addr(struct rb *rb, int six, int dst)
{
	e_nfproto(rb, six ? NFPROTO_IPV6 : NFPROTO_IPV4);
	e_meta(rb, NFT_META_IIFNAME, R_IF);
	if (six)
		e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, dst ? 24 : 8, 16,
		    R_ADDR);
	else
		e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, dst ? 16 : 12, 4,
		    R_ADDR);
}

/* Loads iifname . daddr . l4proto . dport. Only TCP and UDP can match the
 * sets, since every element carries one of them. */
static void
e_tuple(struct rb *rb, int six)
{
	e_if_addr(rb, six, 1);
	e_meta(rb, NFT_META_L4PROTO, six ? R_PROTO6 : R_PROTO4);
	e_payload(rb, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2,
	    six ? R_PORT6 : R_PORT4);
}

static void
e_daddr_in(struct rb *rb, int six, const char *set)
{
	e_nfproto(rb, six ? NFPROTO_IPV6 : NFPROTO_IPV4);
	if (six)
		e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 24, 16, R_ADDR);
	else
		e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, R_ADDR);
	e_lookup(rb, R_ADDR, set, 0);
}

/* ------------------------------------------------------------- the table */

/* Field lengths (unpadded) of each set's key. */
static const uint8_t	K_IF[] = { 16 };
static const uint8_t	K_V4[] = { 4 };
static const uint8_t	K_V6[] = { 16 };
static const uint8_t	K_IF_V4[] = { 16, 4 };
static const uint8_t	K_IF_V6[] = { 16, 16 };
static const uint8_t	K_T4[] = { 16, 4, 1, 2 };
static const uint8_t	K_T6[] = { 16, 16, 1, 2 };
static const uint8_t	DT_IF[] = { DT_IFNAME };
static const uint8_t	DT_V4[] = { DT_IPADDR };
static const uint8_t	DT_V6[] = { DT_IP6ADDR };
static const uint8_t	DT_IF_V4[] = { DT_IFNAME, DT_IPADDR };
static const uint8_t	DT_IF_V6[] = { DT_IFNAME, DT_IP6ADDR };
static const uint8_t	DT_T4[] = { DT_IFNAME, DT_IPADDR, DT_PROTO, DT_SERVICE };
static const uint8_t	DT_T6[] = { DT_IFNAME, DT_IP6ADDR, DT_PROTO, DT_SERVICE };

static const uint8_t	K_IF_MARK[] = { 16, 4 };
static const uint8_t	DT_IF_MARK[] = { DT_IFNAME, DT_MARK };

#define SD(n, k, dt, fl, pers, sz) \
	{ n, NULL, k, dt, sizeof(k), fl, pers, sz, 0 }
#define SA(n, also, k, dt, fl) \
	{ n, also, k, dt, sizeof(k), fl, 1, FW_SZ_LEARNED, 0 }
#define SM(n, k, dt, dtype) \
	{ n, NULL, k, dt, sizeof(k), NFT_SET_MAP, 1, FW_SZ_SBX, dtype }
#define CI	NFT_SET_INTERVAL
#define TO	NFT_SET_TIMEOUT

/*
 * pers: per-sandbox state, kept across FW_ADOPT; the others are rewritten.
 * Learned destinations with one port (the common `ports: [443]`) live in
 * hash sets: inserting one costs the same at 10 or 100,000 elements,
 * whereas a pipapo (interval) set rebuilds its lookup tables on every
 * change. Only port ranges go to the interval sets. "also" makes
 * fw_count_elems("learned4") count both halves of the learned state.
 * The last column is what the set's size counts (FW_SZ_*, fw_setsize).
 */
const struct fw_setdef fw_sets[] = {
	SD("sbx4", K_IF_V4, DT_IF_V4, 0, 1, FW_SZ_SBX),
	SD("sbx6", K_IF_V6, DT_IF_V6, 0, 1, FW_SZ_SBX),
	SD("deny4", K_V4, DT_V4, NFT_SET_INTERVAL, 0, FW_SZ_RANGES),
	SD("deny6", K_V6, DT_V6, NFT_SET_INTERVAL, 0, FW_SZ_RANGES),
	SD("private4", K_V4, DT_V4, NFT_SET_INTERVAL, 0, FW_SZ_RANGES),
	SD("private6", K_V6, DT_V6, NFT_SET_INTERVAL, 0, FW_SZ_RANGES),
	SD("restricted", K_IF, DT_IF, 0, 1, FW_SZ_SBX),
	SA("learned4", "lrange4", K_T4, DT_T4, TO),
	SA("learned6", "lrange6", K_T6, DT_T6, TO),
	SA("lkeep4", "lkrange4", K_T4, DT_T4, TO),
	SA("lkeep6", "lkrange6", K_T6, DT_T6, TO),
	SD("quota", K_IF, DT_IF, NFT_SET_OBJECT, 1, FW_SZ_SBX),
	SD("sbx_dispatch", K_IF, DT_IF, NFT_SET_MAP, 1, FW_SZ_SBX),
	/* A sandbox's generation: the conntrack mark its new flows get
	 * (prerouting), and the pair its established input must carry. */
	SM("sbx_gen", K_IF, DT_IF, DT_MARK),
	SD("sbx_own", K_IF_MARK, DT_IF_MARK, 0, 1, FW_SZ_SBX),
	/* Per-link log meter (dynamic: the d_* chains add to it; kept
	 * across FW_ADOPT, so a restart resets no budget, and removed with
	 * the sandbox, so the next one on its link starts afresh). */
	SD("logmeter", K_IF, DT_IF, NFT_SET_EVAL | TO, 1, FW_SZ_METER),
	{ NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0 }
};

/* The per-sandbox set s_<ifname> (see fw_int.h for the key layout).
 * Interval because rules are CIDRs and port ranges, timeout because
 * learned port ranges expire; static elements carry no timeout. Small:
 * one sandbox's rules, so its pipapo tables rebuild in microseconds. */
static const uint8_t	K_S[] = { 4, 16, 1, 2 };
static const uint8_t	DT_S[] = { DT_MARK, DT_IP6ADDR, DT_PROTO, DT_SERVICE };
const struct fw_setdef fw_sbx_setdef = {
	FW_SBX_SET, NULL, K_S, DT_S, sizeof(K_S), CI | TO, 1, FW_SZ_OWN, 0
};

/* The bounds of a table made with max sandboxes s and learned cap l. */
static uint32_t
setsize(uint32_t s, uint32_t l, int bound)
{
	uint64_t	n;

	switch (bound) {
	case FW_SZ_SBX:
		return s;
	case FW_SZ_LEARNED:
		n = (uint64_t)s * l;
		return n > (1u << 31) ? 1u << 31 : (uint32_t)n;
	case FW_SZ_RANGES:
		return FW_RANGE_ELEMS;
	case FW_SZ_METER:
		return 2 * s;
	case FW_SZ_OWN:
		return FW_SBX_ELEMS(l);
	}
	return 0;
}

uint32_t
fw_setsize(const struct fw *fw, const struct fw_setdef *d)
{
	return setsize(fw->max_sbx ? fw->max_sbx : FW_MAX_SANDBOXES_DEFAULT,
	    fw->max_learned ? fw->max_learned : FW_MAX_LEARNED_DEFAULT,
	    d->bound);
}

const struct fw_setdef *
fw_setdef(const char *name)
{
	const struct fw_setdef	*d;

	for (d = fw_sets; d->name != NULL; d++)
		if (strcmp(d->name, name) == 0)
			return d;
	return NULL;
}

size_t
fw_keylen(const struct fw_setdef *d)
{
	size_t	i, len = 0;

	for (i = 0; i < d->nfields; i++)
		len += (d->fields[i] + 3u) & ~3u;
	return len;
}

/* Queues the creation of set d, named name (NULL: d->name). Without
 * NLM_F_CREATE in flags it creates nothing: the kernel refuses the batch
 * (ENOENT) unless the set exists (see fw_sbx_queue_check). */
static int
add_set_flags(struct fw_batch *b, const char *table,
    const struct fw_setdef *d, const char *name, uint16_t nlflags,
    uint32_t size)
{
	struct nftnl_set	*s;
	uint32_t		 type = 0;
	size_t			 i;
	int			 concat;

	if ((s = nftnl_set_alloc()) == NULL)
		return -1;
	for (i = 0; i < d->nfields; i++)
		type = type << 6 | d->types[i];
	nftnl_set_set_str(s, NFTNL_SET_TABLE, table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, name != NULL ? name : d->name);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, (uint32_t)fw_keylen(d));
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, type);
	/* As nft does: a concatenation is described (and flagged CONCAT)
	 * only for interval sets, where the kernel needs the field lengths
	 * to pick pipapo; the kernel refuses CONCAT on a hash. */
	concat = d->nfields > 1 && (d->flags & NFT_SET_INTERVAL);
	nftnl_set_set_u32(s, NFTNL_SET_FLAGS, d->flags |
	    (concat ? NFT_SET_CONCAT : 0));
	nftnl_set_set_u32(s, NFTNL_SET_ID, b->nmsg + 1);	/* unique here */
	if (concat)
		nftnl_set_set_data(s, NFTNL_SET_DESC_CONCAT, d->fields,
		    (uint32_t)d->nfields);
	if (d->flags & NFT_SET_OBJECT)
		nftnl_set_set_u32(s, NFTNL_SET_OBJ_TYPE, NFT_OBJECT_QUOTA);
	if ((d->flags & NFT_SET_MAP) && d->dtype != 0) {
		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, d->dtype);
		nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, 4);
	} else if (d->flags & NFT_SET_MAP)
		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
	/* Every set is bounded (the ruleset comment says by what): a full
	 * set refuses the element (ENFILE), which only ever denies. */
	if (size != 0)
		nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, size);
	/* A timeout hash set is swept by a timer that walks every element
	 * (once a second by default): with 100,000 learned elements that
	 * walk cost more CPU than all the lookups (perf: nft_rhash_gc).
	 * Expired elements never match, so sweeping less often only keeps
	 * their memory a little longer. Interval sets collect at commit. */
	if ((d->flags & NFT_SET_TIMEOUT) && !(d->flags & NFT_SET_INTERVAL))
		nftnl_set_set_u32(s, NFTNL_SET_GC_INTERVAL, FW_GC_INTERVAL_MS);
	if (d->nfields == 1 && d->types[0] == DT_IFNAME) {
		/* nft's user data "key byte order: host", without which
		 * `nft list` prints the interface names as "" (and "data
		 * byte order: host" for a mark map). Display only; the
		 * kernel ignores it. */
		static const uint8_t ud[] = { 0, 4, 1, 0, 0, 0,
		    1, 4, 1, 0, 0, 0 };

		nftnl_set_set_data(s, NFTNL_SET_USERDATA, ud,
		    d->dtype != 0 ? sizeof(ud) : sizeof(ud) / 2);
	}
	nftnl_set_nlmsg_build_payload(fw_batch_hdr(b, NFT_MSG_NEWSET,
	    nlflags), s);
	nftnl_set_free(s);
	fw_batch_next(b);
	return 0;
}

static int
add_set(struct fw_batch *b, const char *table, const struct fw_setdef *d,
    const char *name, uint32_t size)
{
	return add_set_flags(b, table, d, name, NLM_F_CREATE, size);
}

/*
 * fw_sbx_queue_check: queues into b a message that changes nothing but
 * fails the whole batch with ENOENT when sandbox ifname is not registered
 * (its set s_<ifname> is absent, in the kernel's view at commit time): a
 * NEWSET of that set, as fw_sbx_queue_objects made it, without
 * NLM_F_CREATE. -1 (ENOMEM) on failure.
 */
int
fw_sbx_queue_check(struct fw_batch *b, const char *table, const char *ifname)
{
	char	set[FW_NAMEMAX];

	fw_sbx_names(ifname, set, NULL);
	/* No size: this message must change nothing of the set. */
	return add_set_flags(b, table, &fw_sbx_setdef, set, 0, 0);
}

static int
add_chain(struct fw_batch *b, const char *table, const char *name,
    const char *type, uint32_t hook, int prio)
{
	struct nftnl_chain	*c;

	if ((c = nftnl_chain_alloc()) == NULL)
		return -1;
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, table);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	/* type NULL: a regular chain, entered only by a jump. */
	if (type != NULL) {
		nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, hook);
		nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	}
	nftnl_chain_nlmsg_build_payload(fw_batch_hdr(b, NFT_MSG_NEWCHAIN,
	    NLM_F_CREATE), c);
	nftnl_chain_free(c);
	fw_batch_next(b);
	return 0;
}

/* Starts a rule in chain; finish it with rule_end. */
static int
rule_start(struct rb *rb, const char *table, const char *chain)
{
	memset(rb, 0, sizeof(*rb));
	if ((rb->r = nftnl_rule_alloc()) == NULL)
		return -1;
	nftnl_rule_set_str(rb->r, NFTNL_RULE_TABLE, table);
	nftnl_rule_set_str(rb->r, NFTNL_RULE_CHAIN, chain);
	nftnl_rule_set_u32(rb->r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	return 0;
}

/* Appends the rule, or with insert puts it at the head of its chain. */
static int
rule_put(struct fw_batch *b, struct rb *rb, int insert)
{
	if (rb->oom) {
		nftnl_rule_free(rb->r);
		errno = ENOMEM;
		return -1;
	}
	nftnl_rule_nlmsg_build_payload(fw_batch_hdr(b, NFT_MSG_NEWRULE,
	    NLM_F_CREATE | (insert ? 0 : NLM_F_APPEND)), rb->r);
	nftnl_rule_free(rb->r);
	fw_batch_next(b);
	return 0;
}

static int
rule_end(struct fw_batch *b, struct rb *rb)
{
	return rule_put(b, rb, 0);
}

/* RULE wraps the start and end of a rule so that the list below reads like
 * the ruleset comment; allocation failures are collected in rb.oom. */
#define RULE(chain, ...) do {						\
	if (rule_start(&rb, t, chain) == -1)				\
		goto oom;						\
	__VA_ARGS__;							\
	if (rule_end(b, &rb) == -1)					\
		goto oom;						\
} while (0)

/* The chains a denial goes to: each logs within the link's budget, then
 * gives its verdict (the ruleset comment at the top of this file). */
enum { V_DROP, V_ADMIN, V_RESET };
static const struct {
	const char	*chain, *prefix;
	int		 verdict;
} fw_tails[] = {
	{ "d_dot",	"deny:dot",	V_DROP },
	{ "d_rule",	"deny:rule",	V_ADMIN },
	{ "d_private",	"deny:private",	V_ADMIN },
	{ "d_tainted",	"deny:tainted",	V_ADMIN },
	{ "d_quota",	"deny:quota",	V_DROP },
	{ "d_spoof",	"deny:spoof",	V_DROP },
	{ "d_always",	"deny:always",	V_ADMIN },
	/* d_default: TCP gets a reset (add_tails) */
	{ "d_default",	"deny:default",	V_ADMIN },
	{ "d_input",	"deny:input",	V_DROP },
};
#define FW_NTAILS	(sizeof(fw_tails) / sizeof(fw_tails[0]))

static void
e_deny(struct rb *rb, int verdict)
{
	if (verdict == V_DROP)
		e_verdict(rb, NF_DROP);
	else if (verdict == V_RESET)
		e_reject(rb, NFT_REJECT_TCP_RST, 0);
	else
		e_reject_admin(rb);
}

/*
 * The two rules of a denial in chain: logged within the link's budget,
 * else only counted; the verdict is the same either way. tcp: both rules
 * only for TCP (the reset of d_default).
 */
static int
deny_pair(struct fw_batch *b, const char *t, const char *chain, uint16_t g,
    const char *prefix, int verdict, int tcp)
{
	struct rb	rb;

	RULE(chain, {
		if (tcp)
			e_l4proto(&rb, IPPROTO_TCP);
		e_log_budget(&rb);
		e_log(&rb, g, prefix);
		e_deny(&rb, verdict);
	});
	RULE(chain, {
		if (tcp)
			e_l4proto(&rb, IPPROTO_TCP);
		e_unlogged(&rb);
		e_deny(&rb, verdict);
	});
	return 0;
oom:
	return -1;
}

static int
add_tails(struct fw_batch *b, const char *t, uint16_t g)
{
	size_t	i;

	for (i = 0; i < FW_NTAILS; i++) {
		if (strcmp(fw_tails[i].chain, "d_default") == 0 &&
		    deny_pair(b, t, fw_tails[i].chain, g, fw_tails[i].prefix,
		    V_RESET, 1) == -1)
			return -1;
		if (deny_pair(b, t, fw_tails[i].chain, g, fw_tails[i].prefix,
		    fw_tails[i].verdict, 0) == -1)
			return -1;
	}
	return 0;
}

/* The service address, v4 (six 0) or v6, in a rule of the inet family. */
static void
e_daddr_svc(struct rb *rb, const struct fw_config *cfg, int six)
{
	e_nfproto(rb, six ? NFPROTO_IPV6 : NFPROTO_IPV4);
	if (six) {
		e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 24, 16, R_ADDR);
		e_cmp(rb, R_ADDR, NFT_CMP_EQ, cfg->svc6, 16);
	} else {
		e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, R_ADDR);
		e_cmp(rb, R_ADDR, NFT_CMP_EQ, cfg->svc4, 4);
	}
}

static int
add_rules(struct fw_batch *b, const char *t, const struct fw_config *cfg)
{
	struct rb	 rb;
	uint16_t	 g = cfg->nflog_group;
	uint16_t	 dns = cfg->dns_port ? cfg->dns_port : 53;
	uint16_t	 dnsbe = htons(53);
	int		 six;
	uint8_t		 mask[4], net[4];
	uint32_t	 m;

	if (add_tails(b, t, g) == -1)
		goto oom;

	/* forward: replies into a sandbox first, then everything from one */
	RULE("forward", {
		e_sbx_if(&rb, NFT_META_IIFNAME, 0);
		e_sbx_if(&rb, NFT_META_OIFNAME, 0);
		e_verdict(&rb, NFT_RETURN);
	});
	/* Replies come from outside: a packet from one sandbox into
	 * another's flow (its address forged, conntrack would call it
	 * established) falls to the drop below even if rp_filter is off. */
	RULE("forward", {
		e_sbx_if(&rb, NFT_META_IIFNAME, 0);
		e_sbx_if(&rb, NFT_META_OIFNAME, 1);
		e_ct_established(&rb);
		e_verdict(&rb, NF_ACCEPT);
	});
	RULE("forward", {
		e_sbx_if(&rb, NFT_META_OIFNAME, 1);
		e_verdict(&rb, NF_DROP);
	});
	RULE("forward", {
		struct nftnl_expr *e;
		e_meta(&rb, NFT_META_IIFNAME, R_IF);
		if ((e = ex(&rb, "objref")) != NULL) {
			nftnl_expr_set_u32(e, NFTNL_EXPR_OBJREF_SET_SREG, R_IF);
			nftnl_expr_set_str(e, NFTNL_EXPR_OBJREF_SET_NAME,
			    "quota");
			ex_add(&rb, e);
		}
		e_goto(&rb, "d_quota");
	});
	for (six = 0; six <= 1; six++)
		RULE("forward", {
			e_if_addr(&rb, six, 0);
			e_lookup(&rb, R_IF, six ? "sbx6" : "sbx4", 1);
			e_goto(&rb, "d_spoof");
		});
	/* Always-deny and taint apply to established flows too: a range
	 * added at adoption or a taint cuts what is already open. */
	for (six = 0; six <= 1; six++)
		RULE("forward", {
			e_daddr_in(&rb, six, six ? "deny6" : "deny4");
			e_goto(&rb, "d_always");
		});
	/* One hash lookup leads each sandbox to its own chain; a link with
	 * no entry (or whose chain returns) meets the default denial. */
	RULE("forward", {
		e_meta(&rb, NFT_META_IIFNAME, R_IF);
		e_vmap(&rb, R_IF, "sbx_dispatch");
	});
	RULE("forward", e_goto(&rb, "d_default"));

	/* input. The service address is for sandboxes only: from any other
	 * link (the uplink, lo, another interface) it is dropped, whatever
	 * the source claims, so that no peer can speak as a sandbox. */
	for (six = 0; six <= (cfg->has_svc6 ? 1 : 0); six++)
		RULE("input", {
			e_daddr_svc(&rb, cfg, six);
			e_sbx_if(&rb, NFT_META_IIFNAME, 0);
			e_verdict(&rb, NF_DROP);
		});
	RULE("input", {
		e_sbx_if(&rb, NFT_META_IIFNAME, 0);
		e_verdict(&rb, NFT_RETURN);
	});
	/* IPv6 neighbour discovery with the gateway (from link-local
	 * addresses, so before anti-spoofing); hop limit 255 proves it was
	 * not routed. Without it no IPv6 sandbox could reach its router. */
	for (six = 135; six <= 136; six++)
		RULE("input", {
			uint8_t type = (uint8_t)six, hl = 255;

			e_nfproto(&rb, NFPROTO_IPV6);
			e_l4proto(&rb, IPPROTO_ICMPV6);
			e_payload(&rb, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1,
			    R_TMP);
			e_cmp(&rb, R_TMP, NFT_CMP_EQ, &type, 1);
			e_payload(&rb, NFT_PAYLOAD_NETWORK_HEADER, 7, 1,
			    R_TMP);
			e_cmp(&rb, R_TMP, NFT_CMP_EQ, &hl, 1);
			e_verdict(&rb, NF_ACCEPT);
		});
	/* Anti-spoofing before the established accept, as in forward. */
	for (six = 0; six <= 1; six++)
		RULE("input", {
			e_if_addr(&rb, six, 0);
			e_lookup(&rb, R_IF, six ? "sbx6" : "sbx4", 1);
			e_goto(&rb, "d_spoof");
		});
	/* Established only for the link's own flows: its generation is
	 * the flow's conntrack mark (set in prerouting when it began). */
	RULE("input", {
		e_ct_established(&rb);
		e_meta(&rb, NFT_META_IIFNAME, R_IF);
		e_ct(&rb, NFT_CT_MARK, R_ADDR, 0);
		e_lookup(&rb, R_IF, "sbx_own", 0);
		e_verdict(&rb, NF_ACCEPT);
	});
	for (six = 0; six <= (cfg->has_svc6 ? 1 : 0); six++) {
		static const struct { uint8_t proto; int bridge; } svc[] = {
			{ IPPROTO_UDP, 0 }, { IPPROTO_TCP, 0 },
			{ IPPROTO_TCP, 1 },
		};
		size_t i;

		for (i = 0; i < sizeof(svc) / sizeof(svc[0]); i++)
			RULE("input", {
				e_daddr_svc(&rb, cfg, six);
				e_l4proto(&rb, svc[i].proto);
				e_dport(&rb, svc[i].bridge ?
				    cfg->bridge_port : dns);
				e_verdict(&rb, NF_ACCEPT);
			});
	}
	RULE("input", e_goto(&rb, "d_input"));

	/* prerouting: a new flow from a sandbox link is marked with the
	 * sandbox's generation. A nat chain sees only a flow's first packet
	 * (a conntrack entry not yet confirmed), so a leftover entry of an
	 * earlier sandbox keeps its own mark, and no packet pays for this
	 * after the first. A link without a generation leaves the mark 0,
	 * which no sandbox has. */
	RULE("prerouting", {
		e_sbx_if(&rb, NFT_META_IIFNAME, 1);
		e_meta(&rb, NFT_META_IIFNAME, R_IF);
		e_map(&rb, R_IF, "sbx_gen", R_ADDR);
		e_ct(&rb, NFT_CT_MARK, R_ADDR, 1);
	});
	/* then stray DNS lands at the proxy, whatever the address */
	for (six = 0; six < 2; six++)
		RULE("prerouting", {
			uint16_t portbe = htons(dns);
			struct nftnl_expr *e;

			e_sbx_if(&rb, NFT_META_IIFNAME, 1);
			e_nfproto(&rb, NFPROTO_IPV4);
			e_payload(&rb, NFT_PAYLOAD_NETWORK_HEADER, 16, 4,
			    R_ADDR);
			e_cmp(&rb, R_ADDR, NFT_CMP_NEQ, cfg->svc4, 4);
			e_l4proto(&rb, six ? IPPROTO_TCP : IPPROTO_UDP);
			e_payload(&rb, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2,
			    R_TMP);
			e_cmp(&rb, R_TMP, NFT_CMP_EQ, &dnsbe, 2);
			e_imm(&rb, NFT_REG32_00, cfg->svc4, 4);
			e_imm(&rb, NFT_REG32_00 + 1, &portbe, 2);
			if ((e = ex(&rb, "nat")) != NULL) {
				nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_TYPE,
				    NFT_NAT_DNAT);
				nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FAMILY,
				    NFPROTO_IPV4);
				nftnl_expr_set_u32(e,
				    NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG32_00);
				nftnl_expr_set_u32(e,
				    NFTNL_EXPR_NAT_REG_PROTO_MIN,
				    NFT_REG32_00 + 1);
				nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FLAGS,
				    NF_NAT_RANGE_MAP_IPS |
				    NF_NAT_RANGE_PROTO_SPECIFIED);
				ex_add(&rb, e);
			}
		});

	/* postrouting */
	m = cfg->pool.prefix == 0 ? 0 :
	    htonl(0xffffffffu << (32 - cfg->pool.prefix));
	memcpy(mask, &m, 4);
	for (int i = 0; i < 4; i++)
		net[i] = cfg->pool.addr[i] & mask[i];
	RULE("postrouting", {
		struct nftnl_expr *e;
		uint32_t zero = 0;

		e_nfproto(&rb, NFPROTO_IPV4);
		e_payload(&rb, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, R_ADDR);
		if ((e = ex(&rb, "bitwise")) != NULL) {
			nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, R_ADDR);
			nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, R_ADDR);
			nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 4);
			nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, 4);
			nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, 4);
			ex_add(&rb, e);
		}
		e_cmp(&rb, R_ADDR, NFT_CMP_EQ, net, 4);
		if (cfg->uplink[0] != '\0') {
			char ifn[FW_IFNAMSIZ] = { 0 };

			memcpy(ifn, cfg->uplink, strnlen(cfg->uplink, sizeof(ifn) - 1));
			e_meta(&rb, NFT_META_OIFNAME, R_TMP);
			e_cmp(&rb, R_TMP, NFT_CMP_EQ, ifn, sizeof(ifn));
		} else
			e_sbx_if(&rb, NFT_META_OIFNAME, 0);
		if ((e = ex(&rb, "masq")) != NULL)
			ex_add(&rb, e);
	});
	return 0;
oom:
	return -1;
}

/* ------------------------------------------------- per-sandbox objects */

/* SRULE: as RULE, for a sandbox chain (v6: the sandbox has IPv6). */
#define SRULE(chain, ...) do {						\
	if (rule_start(&rb, t, chain) == -1)				\
		goto oom;						\
	rb.v4only = !v6;						\
	__VA_ARGS__;							\
	if (rule_end(b, &rb) == -1)					\
		goto oom;						\
} while (0)

void
fw_sbx_names(const char *ifname, char set[FW_NAMEMAX],
    char chain[FW_NAMEMAX])
{
	int	n = (int)strnlen(ifname, FW_IFNAMSIZ - 1);

	if (set != NULL)
		snprintf(set, FW_NAMEMAX, "%s%.*s", FW_SBX_SET, n, ifname);
	if (chain != NULL)
		snprintf(chain, FW_NAMEMAX, "%s%.*s", FW_SBX_CHAIN, n, ifname);
}

/* Registers of the per-sandbox key: role, address, l4proto, port. */
#define R_ROLE		NFT_REG32_00
#define R_SADDR		(NFT_REG32_00 + 1)
#define R_SADDR4	(NFT_REG32_00 + 4)	/* last word of the address */
#define R_SPROTO	(NFT_REG32_00 + 5)
#define R_SPORT		(NFT_REG32_00 + 6)

/*
 * Looks role . daddr (IPv4 mapped) . l4proto . dport up in the sandbox's
 * set. Without ports (denies, ICMP) proto and port stay 0, as their
 * elements are written, so those lookups need no transport header.
 */
static void
e_role(struct rb *rb, const char *set, int six, uint32_t role, int ports)
{
	uint8_t	imm[16];

	/* An immediate holds at most 16 bytes (struct nft_data). */
	memset(imm, 0, sizeof(imm));
	role = htonl(role);	/* so that `nft list` prints it as is */
	memcpy(imm, &role, 4);
	if (!six)
		imm[4 + 10] = imm[4 + 11] = 0xff;
	e_nfproto(rb, six ? NFPROTO_IPV6 : NFPROTO_IPV4);
	e_imm(rb, R_ROLE, imm, six ? 4 : 16);
	if (six)
		e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 24, 16, R_SADDR);
	else
		e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, R_SADDR4);
	if (ports) {
		e_meta(rb, NFT_META_L4PROTO, R_SPROTO);
		e_payload(rb, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, R_SPORT);
	} else {
		memset(imm, 0, sizeof(imm));
		e_imm(rb, R_SPROTO, imm, 8);
	}
	e_lookup(rb, R_ROLE, set, 0);
}

/*
 * fw_sbx_queue_objects: queues the set and chain of sandbox ifname and the
 * chain's rules (see the ruleset at the top of this file) into b; the
 * caller adds the elements and, last, the @sbx_dispatch entry that makes
 * the chain live. The IPv6 rules only when v6: a sandbox without an IPv6
 * address in @sbx6 sends no IPv6 packet past anti-spoofing, and every
 * rule here costs each later batch that adds rules (the kernel validates
 * all chains reachable from the base chains then). -1 (ENOMEM) on
 * failure; the caller aborts the batch.
 */
int
fw_sbx_queue_objects(struct fw_batch *b, const char *t, const char *ifname,
    uint32_t gen, int v6)
{
	struct rb	rb;
	char		set[FW_NAMEMAX], chain[FW_NAMEMAX];
	int		six;

	fw_sbx_names(ifname, set, chain);
	if (add_set(b, t, &fw_sbx_setdef, set,
	    fw_setsize(b->fw, &fw_sbx_setdef)) == -1 ||
	    add_chain(b, t, chain, NULL, 0, 0) == -1)
		goto oom;
	/* Only its own flows: the conntrack mark prerouting gave the flow
	 * when it began is this sandbox's generation. Another sandbox's
	 * flow (a related ICMP error quoting it, say) or one left by an
	 * earlier sandbox on this link carries another mark and is judged
	 * below like a new packet. One compare more per packet. */
	SRULE(chain, {
		e_ct_established(&rb);
		e_ct(&rb, NFT_CT_MARK, R_TMP, 0);
		e_cmp(&rb, R_TMP, NFT_CMP_EQ, &gen, 4);
		e_verdict(&rb, NF_ACCEPT);
	});
	/* DoT, TCP and UDP in one rule: l4proto 6-17 also takes in a few
	 * protocols no rule allows (7-16), whose packets are denied anyway. */
	SRULE(chain, {
		struct nftnl_expr *e;
		uint8_t lo = IPPROTO_TCP, hi = IPPROTO_UDP;
		e_meta(&rb, NFT_META_L4PROTO, R_TMP);
		if ((e = ex(&rb, "range")) != NULL) {
			nftnl_expr_set_u32(e, NFTNL_EXPR_RANGE_SREG, R_TMP);
			nftnl_expr_set_u32(e, NFTNL_EXPR_RANGE_OP,
			    NFT_RANGE_EQ);
			nftnl_expr_set(e, NFTNL_EXPR_RANGE_FROM_DATA, &lo, 1);
			nftnl_expr_set(e, NFTNL_EXPR_RANGE_TO_DATA, &hi, 1);
			ex_add(&rb, e);
		}
		e_dport(&rb, 853);
		e_goto(&rb, "d_dot");
	});
	for (six = 0; six <= v6; six++)
		SRULE(chain, {
			e_role(&rb, set, six, six ? FW_R_DENY6 : FW_R_DENY4,
			    0);
			e_goto(&rb, "d_rule");
		});
	for (six = 0; six <= v6; six++) {
		SRULE(chain, {
			e_daddr_in(&rb, six, six ? "private6" : "private4");
			e_role(&rb, set, six, six ? FW_R_PALLOW6 :
			    FW_R_PALLOW4, 1);
			e_verdict(&rb, NF_ACCEPT);
		});
		SRULE(chain, {
			e_daddr_in(&rb, six, six ? "private6" : "private4");
			e_goto(&rb, "d_private");
		});
	}
	/* All three accept, so their order is free: the shared learned
	 * hash first (most flows go to names the DNS proxy learned), then
	 * the sandbox's learned ranges and its static allows. */
	for (six = 0; six <= v6; six++) {
		SRULE(chain, {
			e_tuple(&rb, six);
			e_lookup(&rb, R_IF, six ? "learned6" : "learned4", 0);
			e_verdict(&rb, NF_ACCEPT);
		});
		SRULE(chain, {
			e_role(&rb, set, six, six ? FW_R_LRANGE6 :
			    FW_R_LRANGE4, 1);
			e_verdict(&rb, NF_ACCEPT);
		});
		SRULE(chain, {
			e_role(&rb, set, six, six ? FW_R_ALLOW6 : FW_R_ALLOW4,
			    1);
			e_verdict(&rb, NF_ACCEPT);
		});
	}
	SRULE(chain, {
		uint8_t echo = 8;
		e_l4proto(&rb, IPPROTO_ICMP);
		e_payload(&rb, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1, R_TMP);
		e_cmp(&rb, R_TMP, NFT_CMP_EQ, &echo, 1);
		e_role(&rb, set, 0, FW_R_ICMP4, 0);
		e_verdict(&rb, NF_ACCEPT);
	});
	return 0;
oom:
	return -1;
}

/* IRULE: as RULE, but the rule goes to the head of its chain. */
#define IRULE(chain, ...) do {						\
	if (rule_start(&rb, t, chain) == -1)				\
		goto oom;						\
	rb.v4only = !v6;						\
	__VA_ARGS__;							\
	if (rule_put(b, &rb, 1) == -1)					\
		goto oom;						\
} while (0)

/*
 * fw_sbx_queue_restrict: queues the rules that narrow sandbox ifname
 * (its explicit denies and the private ranges as the policy checks them,
 * its keep roles, the shared learned keep hash, then "deny:tainted"),
 * each inserted at the head of its chain, so they end up first, in the
 * order of the ruleset comment, above the established accept: a taint
 * cuts open flows too. Queue once per sandbox; IPv6 rules only when v6.
 * -1 (ENOMEM) on failure.
 */
int
fw_sbx_queue_restrict(struct fw_batch *b, const char *t, const char *ifname,
    int v6)
{
	struct rb	rb;
	char		set[FW_NAMEMAX], chain[FW_NAMEMAX];
	int		six;

	fw_sbx_names(ifname, set, chain);
	/* Inserted at the head one by one: queue them last rule first. */
	IRULE(chain, e_goto(&rb, "d_tainted"));
	for (six = v6; six >= 0; six--) {
		IRULE(chain, {
			e_role(&rb, set, six, six ? FW_R_LKRANGE6 :
			    FW_R_LKRANGE4, 1);
			e_verdict(&rb, NF_ACCEPT);
		});
		IRULE(chain, {
			e_tuple(&rb, six);
			e_lookup(&rb, R_IF, six ? "lkeep6" : "lkeep4", 0);
			e_verdict(&rb, NF_ACCEPT);
		});
		IRULE(chain, {
			e_role(&rb, set, six, six ? FW_R_KEEP6 : FW_R_KEEP4,
			    1);
			e_verdict(&rb, NF_ACCEPT);
		});
	}
	/* Above the keep list, what the policy checks before it for a
	 * tainted sandbox too (pol_egress_decide): the explicit denies,
	 * then the private ranges, which only a keep rule lying inside one
	 * opens. Without them a broad keep rule (0.0.0.0/0 tcp 443) would
	 * reach what the policy denies and 10/8, wider than untainted. */
	for (six = v6; six >= 0; six--) {
		IRULE(chain, {
			e_daddr_in(&rb, six, six ? "private6" : "private4");
			e_goto(&rb, "d_private");
		});
		IRULE(chain, {
			e_daddr_in(&rb, six, six ? "private6" : "private4");
			e_role(&rb, set, six, six ? FW_R_PKEEP6 :
			    FW_R_PKEEP4, 1);
			e_verdict(&rb, NF_ACCEPT);
		});
	}
	for (six = v6; six >= 0; six--)
		IRULE(chain, {
			e_role(&rb, set, six, six ? FW_R_DENY6 : FW_R_DENY4,
			    0);
			e_goto(&rb, "d_rule");
		});
	return 0;
oom:
	return -1;
}

#undef IRULE
#undef SRULE

#undef RULE

/* Adds the deny/private ranges of one family, merged (the kernel's rbtree
 * refuses overlapping intervals, and callers' lists overlap: the pool lies
 * inside 10/8). */
static int
add_ranges(struct fw_batch *b, const char *t, const char *set, int fam,
    const struct fw_cidr *c, size_t n, const struct fw_cidr *extra)
{
	struct fw_range	*r;
	size_t		 nr = 0, i;
	int		 ret = -1;

	if ((r = calloc(n + 1, sizeof(*r))) == NULL)
		return -1;
	for (i = 0; i < n; i++) {
		if (c[i].family != fam)
			continue;
		if (fw_cidr_range(c[i].family, c[i].addr, c[i].prefix,
		    r[nr].lo, r[nr].hi) == -1)
			goto out;
		nr++;
	}
	if (extra != NULL && extra->family == fam) {
		if (fw_cidr_range(extra->family, extra->addr, extra->prefix,
		    r[nr].lo, r[nr].hi) == -1)
			goto out;
		nr++;
	}
	ret = fw_add_intervals(b, t, set, fam == AF_INET ? 4 : 16, r, nr);
out:
	free(r);
	return ret;
}

static int
table_exists(struct fw *fw, const char *t)
{
	struct nftnl_table	*tb;
	struct nlmsghdr		*nlh;

	if ((tb = nftnl_table_alloc()) == NULL)
		return -1;
	nftnl_table_set_str(tb, NFTNL_TABLE_NAME, t);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETTABLE, NFPROTO_INET,
	    NLM_F_ACK, fw->seq++);
	nftnl_table_nlmsg_build_payload(nlh, tb);
	nftnl_table_free(tb);
	if (fw_request(fw, nlh, NULL, NULL) == 0)
		return 1;
	return errno == ENOENT ? 0 : -1;
}

static int
set_size_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nftnl_set	*s;
	uint32_t		*size = arg;

	if ((s = nftnl_set_alloc()) == NULL)
		return MNL_CB_ERROR;
	if (nftnl_set_nlmsg_parse(nlh, s) == 0 &&
	    nftnl_set_is_set(s, NFTNL_SET_DESC_SIZE))
		*size = nftnl_set_get_u32(s, NFTNL_SET_DESC_SIZE);
	nftnl_set_free(s);
	return MNL_CB_OK;
}

/* 1 if set exists in table t, 0 if not, -1 on error. With size, also its
 * declared size (0: none, unbounded). */
static int
set_exists(struct fw *fw, const char *t, const char *set, uint32_t *size)
{
	struct nftnl_set	*s;
	struct nlmsghdr		*nlh;
	uint32_t		 sz = 0;

	if ((s = nftnl_set_alloc()) == NULL)
		return -1;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, t);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETSET, NFPROTO_INET,
	    NLM_F_ACK, fw->seq++);
	nftnl_set_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	if (fw_request(fw, nlh, size != NULL ? set_size_cb : NULL, &sz) == 0) {
		if (size != NULL)
			*size = sz;
		return 1;
	}
	return errno == ENOENT ? 0 : -1;
}

/* Queues the named counter obj (kept, with its count, if it exists). */
static int
add_counter(struct fw_batch *b, const char *t, const char *name)
{
	struct nftnl_obj	*o;

	if ((o = nftnl_obj_alloc()) == NULL)
		return -1;
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, t);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
	nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_INET);
	nftnl_obj_nlmsg_build_payload(fw_batch_hdr(b, NFT_MSG_NEWOBJ,
	    NLM_F_CREATE), o);
	nftnl_obj_free(o);
	fw_batch_next(b);
	return 0;
}

static void
table_msg(struct fw_batch *b, const char *t, uint16_t type, uint16_t flags)
{
	struct nftnl_table	*tb;

	if ((tb = nftnl_table_alloc()) == NULL) {
		b->overflow = 1;	/* reported as a failure at commit */
		return;
	}
	nftnl_table_set_str(tb, NFTNL_TABLE_NAME, t);
	nftnl_table_set_u32(tb, NFTNL_TABLE_FAMILY, NFPROTO_INET);
	nftnl_table_nlmsg_build_payload(fw_batch_hdr(b, type, flags), tb);
	nftnl_table_free(tb);
	fw_batch_next(b);
}

static int
check_config(const struct fw_config *cfg, char *err, size_t errlen)
{
	size_t	i;
	uint8_t	lo[16], hi[16];

	if (cfg->table[0] != '\0' &&
	    strnlen(cfg->table, sizeof(cfg->table)) >= sizeof(cfg->table)) {
		fw_seterr(err, errlen, "fw_init: table name too long");
		return -1;
	}
	if (cfg->pool.family != AF_INET || cfg->pool.prefix > 32) {
		fw_seterr(err, errlen, "fw_init: bad sandbox pool");
		return -1;
	}
	if (cfg->max_sandboxes > FW_MAX_SANDBOXES_LIMIT ||
	    cfg->max_learned > FW_MAX_LEARNED_LIMIT) {
		fw_seterr(err, errlen, "fw_init: set bounds out of range");
		return -1;
	}
	if (cfg->bridge_port == 0) {
		fw_seterr(err, errlen, "fw_init: bridge port missing");
		return -1;
	}
	if (cfg->uplink[0] != '\0' &&
	    strnlen(cfg->uplink, FW_IFNAMSIZ) >= FW_IFNAMSIZ) {
		fw_seterr(err, errlen, "fw_init: uplink name too long");
		return -1;
	}
	if ((cfg->ndeny > 0 && cfg->deny == NULL) ||
	    (cfg->nprivate > 0 && cfg->private == NULL) ||
	    cfg->ndeny > FW_MAX_RANGES || cfg->nprivate > FW_MAX_RANGES) {
		fw_seterr(err, errlen, "fw_init: bad range list");
		return -1;
	}
	for (i = 0; i < cfg->ndeny; i++)
		if (fw_cidr_range(cfg->deny[i].family, cfg->deny[i].addr,
		    cfg->deny[i].prefix, lo, hi) == -1) {
			fw_seterr(err, errlen, "fw_init: bad deny range %zu", i);
			return -1;
		}
	for (i = 0; i < cfg->nprivate; i++)
		if (fw_cidr_range(cfg->private[i].family, cfg->private[i].addr,
		    cfg->private[i].prefix, lo, hi) == -1) {
			fw_seterr(err, errlen, "fw_init: bad private range %zu",
			    i);
			return -1;
		}
	return 0;
}

int
fw_init(struct fw *fw, const struct fw_config *cfg, int flags, char *err,
    size_t errlen)
{
	struct fw_batch		 b;
	const struct fw_setdef	*d;
	const char		*t;
	int			 exists = 0, adopt;
	uint32_t		 nsbx, nlearned, have;
	size_t			 i;

	if (fw == NULL || cfg == NULL || (flags & ~FW_ADOPT) != 0) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_init: invalid arguments");
		return -1;
	}
	if (check_config(cfg, err, errlen) == -1) {
		errno = EINVAL;
		return -1;
	}
	t = cfg->table[0] != '\0' ? cfg->table : "sluice";
	nsbx = cfg->max_sandboxes ? cfg->max_sandboxes :
	    FW_MAX_SANDBOXES_DEFAULT;
	nlearned = cfg->max_learned ? cfg->max_learned :
	    FW_MAX_LEARNED_DEFAULT;
	if (flags & FW_ADOPT) {
		if ((exists = table_exists(fw, t)) == -1) {
			fw_seterr(err, errlen, "fw_init: table lookup: %s",
			    strerror(errno));
			return -1;
		}
	}
	adopt = exists == 1;
	/* A table of another layout (shared static sets, no dispatch map)
	 * cannot be adopted: its sandboxes have no chains of their own.
	 * Refuse, and let the caller replace it and re-add its sandboxes. */
	if (adopt && set_exists(fw, t, "sbx_dispatch", NULL) != 1) {
		errno = EPROTO;
		fw_seterr(err, errlen, "fw_init: table %s has another layout",
		    t);
		return -1;
	}
	/* Nor one whose sandbox chains take any flow as established (made
	 * before generations), or whose sets cannot hold what cfg allows
	 * (a kernel may keep a set's size when it is declared again). */
	if (adopt && (set_exists(fw, t, "sbx_own", &have) != 1 ||
	    have < nsbx || set_exists(fw, t, "learned4", &have) != 1 ||
	    have < setsize(nsbx, nlearned, FW_SZ_LEARNED))) {
		errno = EPROTO;
		fw_seterr(err, errlen, "fw_init: table %s has another layout "
		    "(no generations, or smaller sets)", t);
		return -1;
	}
	if (fw_batch_begin(fw, &b) == -1) {
		fw_seterr(err, errlen, "fw_init: %s", strerror(errno));
		return -1;
	}
	if (!adopt) {
		/* add + delete + add: replaces the table whether or not it
		 * existed, atomically, with no ENOENT to tolerate. */
		table_msg(&b, t, NFT_MSG_NEWTABLE, NLM_F_CREATE);
		table_msg(&b, t, NFT_MSG_DELTABLE, 0);
	}
	table_msg(&b, t, NFT_MSG_NEWTABLE, NLM_F_CREATE);
	for (d = fw_sets; d->name != NULL; d++)
		if (add_set(&b, t, d, NULL, setsize(nsbx, nlearned,
		    d->bound)) == -1)
			goto oom;
	/* The regular chains first: the base chains' rules go to them. */
	for (i = 0; i < FW_NTAILS; i++)
		if (add_chain(&b, t, fw_tails[i].chain, NULL, 0, 0) == -1)
			goto oom;
	if (add_chain(&b, t, "forward", "filter", NF_INET_FORWARD,
	    NF_IP_PRI_FILTER) == -1 ||
	    add_chain(&b, t, "input", "filter", NF_INET_LOCAL_IN,
	    NF_IP_PRI_FILTER) == -1 ||
	    add_chain(&b, t, "prerouting", "nat", NF_INET_PRE_ROUTING,
	    NF_IP_PRI_NAT_DST) == -1 ||
	    add_chain(&b, t, "postrouting", "nat", NF_INET_POST_ROUTING,
	    NF_IP_PRI_NAT_SRC) == -1 ||
	    add_counter(&b, t, FW_UNLOGGED) == -1)
		goto oom;
	if (adopt) {
		/* Rewrite what comes from cfg; keep per-sandbox sets. A
		 * DELRULE naming only the chain flushes it, a DELSETELEM
		 * without elements flushes the set. */
		static const char *chains[] = { "forward", "input",
		    "prerouting", "postrouting" };
		const size_t		 nbase = sizeof(chains) /
		    sizeof(chains[0]);
		struct nftnl_rule	*r;
		struct nftnl_set	*s;

		/* The base chains and the d_* chains (cfg's nflog group). */
		for (i = 0; i < nbase + FW_NTAILS; i++) {
			if ((r = nftnl_rule_alloc()) == NULL)
				goto oom;
			nftnl_rule_set_str(r, NFTNL_RULE_TABLE, t);
			nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, i < nbase ?
			    chains[i] : fw_tails[i - nbase].chain);
			nftnl_rule_nlmsg_build_payload(fw_batch_hdr(&b,
			    NFT_MSG_DELRULE, 0), r);
			nftnl_rule_free(r);
			fw_batch_next(&b);
		}
		for (d = fw_sets; d->name != NULL; d++) {
			if (d->persistent)
				continue;
			if ((s = nftnl_set_alloc()) == NULL)
				goto oom;
			nftnl_set_set_str(s, NFTNL_SET_TABLE, t);
			nftnl_set_set_str(s, NFTNL_SET_NAME, d->name);
			nftnl_set_elems_nlmsg_build_payload(fw_batch_hdr(&b,
			    NFT_MSG_DELSETELEM, 0), s);
			nftnl_set_free(s);
			fw_batch_next(&b);
		}
	}
	if (add_rules(&b, t, cfg) == -1)
		goto oom;
	/* The pool is always denied as a destination: no sandbox-to-sandbox. */
	if (add_ranges(&b, t, "deny4", AF_INET, cfg->deny, cfg->ndeny,
	    &cfg->pool) == -1 ||
	    add_ranges(&b, t, "deny6", AF_INET6, cfg->deny, cfg->ndeny,
	    NULL) == -1 ||
	    add_ranges(&b, t, "private4", AF_INET, cfg->private,
	    cfg->nprivate, NULL) == -1 ||
	    add_ranges(&b, t, "private6", AF_INET6, cfg->private,
	    cfg->nprivate, NULL) == -1)
		goto oom;
	if (fw_batch_commit(&b, "fw_init", err, errlen) == -1)
		return -1;
	snprintf(fw->table, sizeof(fw->table), "%s", t);
	fw->group = cfg->nflog_group;
	fw->max_sbx = nsbx;
	fw->max_learned = nlearned;
	/* From here this handle knows what the table holds per sandbox:
	 * nothing (new table) or what one dump per set finds (adopted). If
	 * that dump fails, deletion falls back to dumping each time. */
	fw_idx_clear(fw);
	fw->idx_valid = adopt ? fw_idx_rebuild(fw) == 0 : 1;
	free(fw->priv);
	fw->priv = NULL;
	fw->npriv = 0;
	if (cfg->nprivate > 0 &&
	    (fw->priv = calloc(cfg->nprivate, sizeof(*fw->priv))) != NULL) {
		memcpy(fw->priv, cfg->private,
		    cfg->nprivate * sizeof(*fw->priv));
		fw->npriv = cfg->nprivate;
	} else if (cfg->nprivate > 0) {
		/* The table is in place; without the list every rule would
		 * count as public, which only ever denies more. */
		errno = ENOMEM;
		fw_seterr(err, errlen, "fw_init: out of memory");
		return -1;
	}
	return adopt;
oom:
	fw_batch_abort(&b);
	errno = ENOMEM;
	fw_seterr(err, errlen, "fw_init: out of memory");
	return -1;
}

int
fw_destroy(struct fw *fw, const char *table, char *err, size_t errlen)
{
	struct fw_batch	 b;
	const char	*t;

	if (fw == NULL) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_destroy: invalid arguments");
		return -1;
	}
	t = table != NULL && table[0] != '\0' ? table : fw->table;
	if (strnlen(t, FW_TABLE_MAX) >= FW_TABLE_MAX) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_destroy: table name too long");
		return -1;
	}
	if (fw_batch_begin(fw, &b) == -1) {
		fw_seterr(err, errlen, "fw_destroy: %s", strerror(errno));
		return -1;
	}
	table_msg(&b, t, NFT_MSG_DELTABLE, 0);
	if (fw_batch_commit(&b, "fw_destroy", err, errlen) == -1)
		return -1;
	if (strcmp(t, fw->table) == 0) {
		fw_idx_clear(fw);
		fw->idx_valid = 0;
	}
	return 0;
}
