/*
 * fw_rules.c: the rules of the nftables table that enforces sandbox egress
 * in the kernel.
 *
 * Why this file exists: a sandbox is root in its own network namespace and can
 * ignore any proxy, open raw sockets or re-enable IPv6, so the only boundary
 * that holds is on the host side of its veth. This file holds that boundary's
 * rules: the shared ones, which fw_init (fw.c, with the sets and chains they
 * use) writes once, and those of the one small chain per sandbox, reached
 * through one verdict-map lookup (queued here; fw_sandbox.c makes and
 * removes them with the set elements, fw_restrict.c adds the narrowing). The
 * rules are built with fw_expr.c's helpers. Packet cost is a fixed number of
 * hash/pipapo lookups whatever the number of sandboxes.
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
 *       (only for a sandbox with byte budgets, fw_budget.c, at the head,
 *       and again above the narrowing once it is tainted: the taint's
 *       quota, a new flow's budget label from @b_X, the label's quota
 *       from @bq_X going to d_budget once spent)
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
 *       (meta mark & GM == 0, with the gate) quota name iifname map @quota
 *           goto d_quota                          # GM: the gate's marks
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
 *     reset, else admin-prohibited), d_budget "deny:budget" (a rule's or
 *     the taint's byte budget is spent, fw_budget.c: TCP reset, else
 *     drop)), each:
 *     chain d_D {
 *       update @logmeter { iifname timeout 1m
 *           limit rate 20/second burst 50 packets }
 *           log prefix "deny:D" group G V
 *       counter name "unlogged" V
 *     }
 *     (d_default and d_budget: both rules first with meta l4proto tcp and
 *     reject with tcp reset, then as above)
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
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>

#include <stdio.h>
#include <string.h>

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

/* ---------------------------------------------------------- shared rules */

/* RULE wraps the start and end of a rule so that the list below reads like
 * the ruleset comment; allocation failures are collected in rb.oom. */
#define RULE(chain, ...) do {						\
	if (fw_rb_start(&rb, t, chain) == -1)				\
		goto oom;						\
	__VA_ARGS__;							\
	if (fw_rb_end(b, &rb) == -1)					\
		goto oom;						\
} while (0)

/* The chains a denial goes to: each logs within the link's budget, then
 * gives its verdict (the ruleset comment at the top of this file). fw_init
 * makes them before the rules that go to them. */
enum { V_DROP, V_ADMIN, V_RESET };
const struct fw_tail fw_tails[] = {
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
	/* d_budget: TCP gets a reset (add_tails), the rest is dropped */
	{ "d_budget",	"deny:budget",	V_DROP },
};
const size_t fw_ntails = sizeof(fw_tails) / sizeof(fw_tails[0]);

static void
e_deny(struct fw_rb *rb, int verdict)
{
	if (verdict == V_DROP)
		fw_e_verdict(rb, NF_DROP);
	else if (verdict == V_RESET)
		fw_e_reject(rb, NFT_REJECT_TCP_RST, 0);
	else
		fw_e_reject_admin(rb);
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
	struct fw_rb	rb;

	RULE(chain, {
		if (tcp)
			fw_e_l4proto(&rb, IPPROTO_TCP);
		fw_e_log_budget(&rb);
		fw_e_log(&rb, g, prefix);
		e_deny(&rb, verdict);
	});
	RULE(chain, {
		if (tcp)
			fw_e_l4proto(&rb, IPPROTO_TCP);
		fw_e_unlogged(&rb);
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

	for (i = 0; i < fw_ntails; i++) {
		if ((strcmp(fw_tails[i].chain, "d_default") == 0 ||
		    strcmp(fw_tails[i].chain, "d_budget") == 0) &&
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
e_daddr_svc(struct fw_rb *rb, const struct fw_config *cfg, int six)
{
	fw_e_nfproto(rb, six ? NFPROTO_IPV6 : NFPROTO_IPV4);
	if (six) {
		fw_e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 24, 16,
		    FW_REG_ADDR);
		fw_e_cmp(rb, FW_REG_ADDR, NFT_CMP_EQ, cfg->svc6, 16);
	} else {
		fw_e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 16, 4,
		    FW_REG_ADDR);
		fw_e_cmp(rb, FW_REG_ADDR, NFT_CMP_EQ, cfg->svc4, 4);
	}
}

/*
 * fw_add_rules: queues into b the shared rules of table t, from cfg: the
 * d_* chains' denials, then forward, input, prerouting and postrouting as
 * the ruleset comment shows them. The chains must be queued before (fw.c).
 * -1 (ENOMEM) on failure; the caller aborts the batch.
 */
int
fw_add_rules(struct fw_batch *b, const char *t, const struct fw_config *cfg)
{
	struct fw_rb	 rb;
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
		fw_e_sbx_if(&rb, NFT_META_IIFNAME, 0);
		fw_e_sbx_if(&rb, NFT_META_OIFNAME, 0);
		fw_e_verdict(&rb, NFT_RETURN);
	});
	/* Replies come from outside: a packet from one sandbox into
	 * another's flow (its address forged, conntrack would call it
	 * established) falls to the drop below even if rp_filter is off. */
	RULE("forward", {
		fw_e_sbx_if(&rb, NFT_META_IIFNAME, 0);
		fw_e_sbx_if(&rb, NFT_META_OIFNAME, 1);
		fw_e_ct_established(&rb);
		fw_e_verdict(&rb, NF_ACCEPT);
	});
	RULE("forward", {
		fw_e_sbx_if(&rb, NFT_META_OIFNAME, 1);
		fw_e_verdict(&rb, NF_DROP);
	});
	/* With the name gate, a packet it passed comes back (NF_REPEAT)
	 * and runs this chain again with the gate's mark: it was counted
	 * on its first pass, so it is not counted again. A sandbox cannot
	 * send a packet with that mark (crossing namespaces clears it). */
	RULE("forward", {
		struct nftnl_expr *e;
		if (cfg->gate)
			fw_e_gate_unmarked(&rb);
		fw_e_meta(&rb, NFT_META_IIFNAME, FW_REG_IF);
		if ((e = fw_ex(&rb, "objref")) != NULL) {
			nftnl_expr_set_u32(e, NFTNL_EXPR_OBJREF_SET_SREG,
			    FW_REG_IF);
			nftnl_expr_set_str(e, NFTNL_EXPR_OBJREF_SET_NAME,
			    "quota");
			fw_ex_add(&rb, e);
		}
		fw_e_goto(&rb, "d_quota");
	});
	for (six = 0; six <= 1; six++)
		RULE("forward", {
			fw_e_if_addr(&rb, six, 0);
			fw_e_lookup(&rb, FW_REG_IF, six ? "sbx6" : "sbx4", 1);
			fw_e_goto(&rb, "d_spoof");
		});
	/* Always-deny and taint apply to established flows too: a range
	 * added at adoption or a taint cuts what is already open. */
	for (six = 0; six <= 1; six++)
		RULE("forward", {
			fw_e_daddr_in(&rb, six, six ? "deny6" : "deny4");
			fw_e_goto(&rb, "d_always");
		});
	/* The name gate's verdicts and queue (fw_gate.c), before the
	 * dispatch so that a flow waiting for its name costs one compare. */
	if (cfg->gate && fw_gate_forward(b, t, cfg->gate_queue) == -1)
		goto oom;
	/* One hash lookup leads each sandbox to its own chain; a link with
	 * no entry (or whose chain returns) meets the default denial. */
	RULE("forward", {
		fw_e_meta(&rb, NFT_META_IIFNAME, FW_REG_IF);
		fw_e_vmap(&rb, FW_REG_IF, "sbx_dispatch");
	});
	RULE("forward", fw_e_goto(&rb, "d_default"));

	/* input. The service address is for sandboxes only: from any other
	 * link (the uplink, lo, another interface) it is dropped, whatever
	 * the source claims, so that no peer can speak as a sandbox. */
	for (six = 0; six <= (cfg->has_svc6 ? 1 : 0); six++)
		RULE("input", {
			e_daddr_svc(&rb, cfg, six);
			fw_e_sbx_if(&rb, NFT_META_IIFNAME, 0);
			fw_e_verdict(&rb, NF_DROP);
		});
	RULE("input", {
		fw_e_sbx_if(&rb, NFT_META_IIFNAME, 0);
		fw_e_verdict(&rb, NFT_RETURN);
	});
	/* IPv6 neighbour discovery with the gateway (from link-local
	 * addresses, so before anti-spoofing); hop limit 255 proves it was
	 * not routed. Without it no IPv6 sandbox could reach its router. */
	for (six = 135; six <= 136; six++)
		RULE("input", {
			uint8_t type = (uint8_t)six, hl = 255;

			fw_e_nfproto(&rb, NFPROTO_IPV6);
			fw_e_l4proto(&rb, IPPROTO_ICMPV6);
			fw_e_payload(&rb, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1,
			    FW_REG_TMP);
			fw_e_cmp(&rb, FW_REG_TMP, NFT_CMP_EQ, &type, 1);
			fw_e_payload(&rb, NFT_PAYLOAD_NETWORK_HEADER, 7, 1,
			    FW_REG_TMP);
			fw_e_cmp(&rb, FW_REG_TMP, NFT_CMP_EQ, &hl, 1);
			fw_e_verdict(&rb, NF_ACCEPT);
		});
	/* Anti-spoofing before the established accept, as in forward. */
	for (six = 0; six <= 1; six++)
		RULE("input", {
			fw_e_if_addr(&rb, six, 0);
			fw_e_lookup(&rb, FW_REG_IF, six ? "sbx6" : "sbx4", 1);
			fw_e_goto(&rb, "d_spoof");
		});
	/* Established only for the link's own flows: its generation is
	 * the flow's conntrack mark (set in prerouting when it began). */
	RULE("input", {
		fw_e_ct_established(&rb);
		fw_e_meta(&rb, NFT_META_IIFNAME, FW_REG_IF);
		fw_e_ct(&rb, NFT_CT_MARK, FW_REG_ADDR, 0);
		fw_e_lookup(&rb, FW_REG_IF, "sbx_own", 0);
		fw_e_verdict(&rb, NF_ACCEPT);
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
				fw_e_l4proto(&rb, svc[i].proto);
				fw_e_dport(&rb, svc[i].bridge ?
				    cfg->bridge_port : dns);
				fw_e_verdict(&rb, NF_ACCEPT);
			});
	}
	RULE("input", fw_e_goto(&rb, "d_input"));

	/* prerouting: a new flow from a sandbox link is marked with the
	 * sandbox's generation. A nat chain sees only a flow's first packet
	 * (a conntrack entry not yet confirmed), so a leftover entry of an
	 * earlier sandbox keeps its own mark, and no packet pays for this
	 * after the first. A link without a generation leaves the mark 0,
	 * which no sandbox has. */
	RULE("prerouting", {
		fw_e_sbx_if(&rb, NFT_META_IIFNAME, 1);
		fw_e_meta(&rb, NFT_META_IIFNAME, FW_REG_IF);
		fw_e_map(&rb, FW_REG_IF, "sbx_gen", FW_REG_ADDR);
		fw_e_ct(&rb, NFT_CT_MARK, FW_REG_ADDR, 1);
	});
	/* then stray DNS lands at the proxy, whatever the address */
	for (six = 0; six < 2; six++)
		RULE("prerouting", {
			uint16_t portbe = htons(dns);
			struct nftnl_expr *e;

			fw_e_sbx_if(&rb, NFT_META_IIFNAME, 1);
			fw_e_nfproto(&rb, NFPROTO_IPV4);
			fw_e_payload(&rb, NFT_PAYLOAD_NETWORK_HEADER, 16, 4,
			    FW_REG_ADDR);
			fw_e_cmp(&rb, FW_REG_ADDR, NFT_CMP_NEQ, cfg->svc4, 4);
			fw_e_l4proto(&rb, six ? IPPROTO_TCP : IPPROTO_UDP);
			fw_e_payload(&rb, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2,
			    FW_REG_TMP);
			fw_e_cmp(&rb, FW_REG_TMP, NFT_CMP_EQ, &dnsbe, 2);
			fw_e_imm(&rb, NFT_REG32_00, cfg->svc4, 4);
			fw_e_imm(&rb, NFT_REG32_00 + 1, &portbe, 2);
			if ((e = fw_ex(&rb, "nat")) != NULL) {
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
				fw_ex_add(&rb, e);
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

		fw_e_nfproto(&rb, NFPROTO_IPV4);
		fw_e_payload(&rb, NFT_PAYLOAD_NETWORK_HEADER, 12, 4,
		    FW_REG_ADDR);
		if ((e = fw_ex(&rb, "bitwise")) != NULL) {
			nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG,
			    FW_REG_ADDR);
			nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG,
			    FW_REG_ADDR);
			nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 4);
			nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, 4);
			nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, 4);
			fw_ex_add(&rb, e);
		}
		fw_e_cmp(&rb, FW_REG_ADDR, NFT_CMP_EQ, net, 4);
		if (cfg->uplink[0] != '\0') {
			char ifn[FW_IFNAMSIZ] = { 0 };

			memcpy(ifn, cfg->uplink, strnlen(cfg->uplink, sizeof(ifn) - 1));
			fw_e_meta(&rb, NFT_META_OIFNAME, FW_REG_TMP);
			fw_e_cmp(&rb, FW_REG_TMP, NFT_CMP_EQ, ifn, sizeof(ifn));
		} else
			fw_e_sbx_if(&rb, NFT_META_OIFNAME, 0);
		if ((e = fw_ex(&rb, "masq")) != NULL)
			fw_ex_add(&rb, e);
	});
	return 0;
oom:
	return -1;
}

/* ------------------------------------------------- per-sandbox chains */

/* SRULE: as RULE, for a sandbox chain (v6: the sandbox has IPv6). */
#define SRULE(chain, ...) do {						\
	if (fw_rb_start(&rb, t, chain) == -1)				\
		goto oom;						\
	rb.v4only = !v6;						\
	__VA_ARGS__;							\
	if (fw_rb_end(b, &rb) == -1)					\
		goto oom;						\
} while (0)

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
void
fw_e_role(struct fw_rb *rb, const char *set, int six, uint32_t role, int ports)
{
	fw_e_role_key(rb, six, role, ports);
	fw_e_lookup(rb, R_ROLE, set, 0);
}

/* The key of fw_e_role, built in NFT_REG32_00..06 (no lookup). */
void
fw_e_role_key(struct fw_rb *rb, int six, uint32_t role, int ports)
{
	uint8_t	imm[16];

	/* An immediate holds at most 16 bytes (struct nft_data). */
	memset(imm, 0, sizeof(imm));
	role = htonl(role);	/* so that `nft list` prints it as is */
	memcpy(imm, &role, 4);
	if (!six)
		imm[4 + 10] = imm[4 + 11] = 0xff;
	fw_e_nfproto(rb, six ? NFPROTO_IPV6 : NFPROTO_IPV4);
	fw_e_imm(rb, R_ROLE, imm, six ? 4 : 16);
	if (six)
		fw_e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 24, 16, R_SADDR);
	else
		fw_e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, R_SADDR4);
	if (ports) {
		fw_e_meta(rb, NFT_META_L4PROTO, R_SPROTO);
		fw_e_payload(rb, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, R_SPORT);
	} else {
		memset(imm, 0, sizeof(imm));
		fw_e_imm(rb, R_SPROTO, imm, 8);
	}
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
    uint32_t gen, int v6, int budgets)
{
	struct fw_rb	rb;
	char		set[FW_NAMEMAX], chain[FW_NAMEMAX];
	int		six;

	fw_sbx_names(ifname, set, chain);
	if (fw_add_set(b, t, &fw_sbx_setdef, set,
	    fw_setsize(b->fw, &fw_sbx_setdef)) == -1 ||
	    fw_add_chain(b, t, chain, NULL, 0, 0) == -1)
		goto oom;
	/* Rule budgets first: every packet of a budgeted flow counts,
	 * established or not (fw_budget.c; its maps are queued before). */
	if (budgets && fw_budget_queue_rules(b, t, ifname, v6, 0) == -1)
		goto oom;
	/* Only its own flows: the conntrack mark prerouting gave the flow
	 * when it began is this sandbox's generation. Another sandbox's
	 * flow (a related ICMP error quoting it, say) or one left by an
	 * earlier sandbox on this link carries another mark and is judged
	 * below like a new packet. One compare more per packet. */
	SRULE(chain, {
		fw_e_ct_established(&rb);
		fw_e_ct(&rb, NFT_CT_MARK, FW_REG_TMP, 0);
		fw_e_cmp(&rb, FW_REG_TMP, NFT_CMP_EQ, &gen, 4);
		fw_e_verdict(&rb, NF_ACCEPT);
	});
	/* DoT, TCP and UDP in one rule: l4proto 6-17 also takes in a few
	 * protocols no rule allows (7-16), whose packets are denied anyway. */
	SRULE(chain, {
		struct nftnl_expr *e;
		uint8_t lo = IPPROTO_TCP, hi = IPPROTO_UDP;
		fw_e_meta(&rb, NFT_META_L4PROTO, FW_REG_TMP);
		if ((e = fw_ex(&rb, "range")) != NULL) {
			nftnl_expr_set_u32(e, NFTNL_EXPR_RANGE_SREG,
			    FW_REG_TMP);
			nftnl_expr_set_u32(e, NFTNL_EXPR_RANGE_OP,
			    NFT_RANGE_EQ);
			nftnl_expr_set(e, NFTNL_EXPR_RANGE_FROM_DATA, &lo, 1);
			nftnl_expr_set(e, NFTNL_EXPR_RANGE_TO_DATA, &hi, 1);
			fw_ex_add(&rb, e);
		}
		fw_e_dport(&rb, 853);
		fw_e_goto(&rb, "d_dot");
	});
	for (six = 0; six <= v6; six++)
		SRULE(chain, {
			fw_e_role(&rb, set, six, six ? FW_R_DENY6 : FW_R_DENY4,
			    0);
			fw_e_goto(&rb, "d_rule");
		});
	for (six = 0; six <= v6; six++) {
		SRULE(chain, {
			fw_e_daddr_in(&rb, six, six ? "private6" : "private4");
			fw_e_role(&rb, set, six, six ? FW_R_PALLOW6 :
			    FW_R_PALLOW4, 1);
			fw_e_verdict(&rb, NF_ACCEPT);
		});
		SRULE(chain, {
			fw_e_daddr_in(&rb, six, six ? "private6" : "private4");
			fw_e_goto(&rb, "d_private");
		});
	}
	/* All three accept, so their order is free: the shared learned
	 * hash first (most flows go to names the DNS proxy learned), then
	 * the sandbox's learned ranges and its static allows. */
	for (six = 0; six <= v6; six++) {
		/* TCP to a learned destination waits for the name gate. */
		if (b->fw->gate && (fw_gate_learned(b, t, chain, six ?
		    "learned6" : "learned4", six, 0, v6, 0) == -1 ||
		    fw_gate_learned(b, t, chain, NULL, six, six ?
		    FW_R_LRANGE6 : FW_R_LRANGE4, v6, 0) == -1))
			goto oom;
		SRULE(chain, {
			fw_e_tuple(&rb, six);
			fw_e_lookup(&rb, FW_REG_IF, six ? "learned6" :
			    "learned4", 0);
			fw_e_verdict(&rb, NF_ACCEPT);
		});
		SRULE(chain, {
			fw_e_role(&rb, set, six, six ? FW_R_LRANGE6 :
			    FW_R_LRANGE4, 1);
			fw_e_verdict(&rb, NF_ACCEPT);
		});
		SRULE(chain, {
			fw_e_role(&rb, set, six, six ? FW_R_ALLOW6 : FW_R_ALLOW4,
			    1);
			fw_e_verdict(&rb, NF_ACCEPT);
		});
	}
	SRULE(chain, {
		uint8_t echo = 8;
		fw_e_l4proto(&rb, IPPROTO_ICMP);
		fw_e_payload(&rb, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1,
		    FW_REG_TMP);
		fw_e_cmp(&rb, FW_REG_TMP, NFT_CMP_EQ, &echo, 1);
		fw_e_role(&rb, set, 0, FW_R_ICMP4, 0);
		fw_e_verdict(&rb, NF_ACCEPT);
	});
	return 0;
oom:
	return -1;
}

/* IRULE: as RULE, but the rule goes to the head of its chain. */
#define IRULE(chain, ...) do {						\
	if (fw_rb_start(&rb, t, chain) == -1)				\
		goto oom;						\
	rb.v4only = !v6;						\
	__VA_ARGS__;							\
	if (fw_rb_put(b, &rb, 1) == -1)					\
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
	struct fw_rb	rb;
	char		set[FW_NAMEMAX], chain[FW_NAMEMAX];
	int		six;

	fw_sbx_names(ifname, set, chain);
	/* Inserted at the head one by one: queue them last rule first. */
	IRULE(chain, fw_e_goto(&rb, "d_tainted"));
	for (six = v6; six >= 0; six--) {
		IRULE(chain, {
			fw_e_role(&rb, set, six, six ? FW_R_LKRANGE6 :
			    FW_R_LKRANGE4, 1);
			fw_e_verdict(&rb, NF_ACCEPT);
		});
		IRULE(chain, {
			fw_e_tuple(&rb, six);
			fw_e_lookup(&rb, FW_REG_IF, six ? "lkeep6" : "lkeep4",
			    0);
			fw_e_verdict(&rb, NF_ACCEPT);
		});
		/* Inserted after, so above: the keep list's TCP flows wait
		 * for the name gate as the learned ones do. */
		if (b->fw->gate && (fw_gate_learned(b, t, chain, NULL, six,
		    six ? FW_R_LKRANGE6 : FW_R_LKRANGE4, v6, 1) == -1 ||
		    fw_gate_learned(b, t, chain, six ? "lkeep6" : "lkeep4",
		    six, 0, v6, 1) == -1))
			goto oom;
		IRULE(chain, {
			fw_e_role(&rb, set, six, six ? FW_R_KEEP6 : FW_R_KEEP4,
			    1);
			fw_e_verdict(&rb, NF_ACCEPT);
		});
	}
	/* Above the keep list, what the policy checks before it for a
	 * tainted sandbox too (pol_egress_decide): the explicit denies,
	 * then the private ranges, which only a keep rule lying inside one
	 * opens. Without them a broad keep rule (0.0.0.0/0 tcp 443) would
	 * reach what the policy denies and 10/8, wider than untainted. */
	for (six = v6; six >= 0; six--) {
		IRULE(chain, {
			fw_e_daddr_in(&rb, six, six ? "private6" : "private4");
			fw_e_goto(&rb, "d_private");
		});
		IRULE(chain, {
			fw_e_daddr_in(&rb, six, six ? "private6" : "private4");
			fw_e_role(&rb, set, six, six ? FW_R_PKEEP6 :
			    FW_R_PKEEP4, 1);
			fw_e_verdict(&rb, NF_ACCEPT);
		});
	}
	for (six = v6; six >= 0; six--)
		IRULE(chain, {
			fw_e_role(&rb, set, six, six ? FW_R_DENY6 : FW_R_DENY4,
			    0);
			fw_e_goto(&rb, "d_rule");
		});
	return 0;
oom:
	return -1;
}

#undef IRULE
#undef SRULE
#undef RULE
