/*
 * fw_expr.c: the builders of nftables rules, one expression at a time.
 *
 * Why this file exists: libnftnl builds a rule from expressions (meta,
 * payload, cmp, lookup, immediate, ...) set attribute by attribute, so one
 * match such as "iifname . ip daddr in @set" is a dozen calls. Each helper
 * here emits one such match, so that the rule lists of fw_rules.c read like
 * the ruleset they write; fw_rb_start and fw_rb_put wrap a rule's
 * allocation and its NEWRULE message in the caller's batch (fw_batch.c).
 * An allocation failure is remembered in the builder (fw_rb.oom) and
 * reported once, when the rule is put.
 */
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

struct nftnl_expr *
fw_ex(struct fw_rb *rb, const char *name)
{
	struct nftnl_expr	*e;

	if ((e = nftnl_expr_alloc(name)) == NULL)
		rb->oom = 1;
	return e;
}

void
fw_ex_add(struct fw_rb *rb, struct nftnl_expr *e)
{
	if (e != NULL)
		nftnl_rule_add_expr(rb->r, e);
}

void
fw_e_meta(struct fw_rb *rb, uint32_t key, uint32_t dreg)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "meta")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
	fw_ex_add(rb, e);
}

void
fw_e_cmp(struct fw_rb *rb, uint32_t sreg, uint32_t op, const void *data,
    uint32_t len)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "cmp")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, sreg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	fw_ex_add(rb, e);
}

void
fw_e_payload(struct fw_rb *rb, uint32_t base, uint32_t off, uint32_t len,
    uint32_t dreg)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "payload")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
	fw_ex_add(rb, e);
}

void
fw_e_lookup(struct fw_rb *rb, uint32_t sreg, const char *set, int inv)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "lookup")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
	if (inv)
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS,
		    NFT_LOOKUP_F_INV);
	fw_ex_add(rb, e);
}

/* A verdict map lookup: the element's verdict (a jump) is the result. */
void
fw_e_vmap(struct fw_rb *rb, uint32_t sreg, const char *set)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "lookup")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
	fw_ex_add(rb, e);
}

void
fw_e_verdict(struct fw_rb *rb, int verdict)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "immediate")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
	fw_ex_add(rb, e);
}

void
fw_e_imm(struct fw_rb *rb, uint32_t dreg, const void *data, uint32_t len)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "immediate")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, dreg);
	nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, data, len);
	fw_ex_add(rb, e);
}

void
fw_e_log(struct fw_rb *rb, uint16_t group, const char *prefix)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "log")) == NULL)
		return;
	nftnl_expr_set_u16(e, NFTNL_EXPR_LOG_GROUP, group);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOG_PREFIX, prefix);
	/* Enough for IPv6 + TCP headers; the payload is never needed. */
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOG_SNAPLEN, 128);
	fw_ex_add(rb, e);
}

void
fw_e_reject(struct fw_rb *rb, uint32_t type, uint8_t code)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "reject")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, type);
	nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, code);
	fw_ex_add(rb, e);
}

void
fw_e_reject_admin(struct fw_rb *rb)
{
	fw_e_reject(rb, NFT_REJECT_ICMPX_UNREACH,
	    NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
}

void
fw_e_ct_established(struct fw_rb *rb)
{
	struct nftnl_expr	*e;
	uint32_t		 mask = NF_CT_STATE_BIT(IP_CT_ESTABLISHED) |
	    NF_CT_STATE_BIT(IP_CT_RELATED), zero = 0;

	if ((e = fw_ex(rb, "ct")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, FW_REG_TMP);
	fw_ex_add(rb, e);
	if ((e = fw_ex(rb, "bitwise")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, FW_REG_TMP);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, FW_REG_TMP);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, 4);
	fw_ex_add(rb, e);
	fw_e_cmp(rb, FW_REG_TMP, NFT_CMP_NEQ, &zero, 4);
}

/* ct KEY into dreg (get), or from sreg into the conntrack entry (set). */
void
fw_e_ct(struct fw_rb *rb, uint32_t key, uint32_t reg, int set)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "ct")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, key);
	nftnl_expr_set_u32(e, set ? NFTNL_EXPR_CT_SREG : NFTNL_EXPR_CT_DREG,
	    reg);
	fw_ex_add(rb, e);
}

/* A map lookup: the element's data lands in dreg. */
void
fw_e_map(struct fw_rb *rb, uint32_t sreg, const char *set, uint32_t dreg)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "lookup")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, dreg);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
	fw_ex_add(rb, e);
}

/* goto chain: its verdict is the packet's (the d_* chains end in one). */
void
fw_e_goto(struct fw_rb *rb, const char *chain)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "immediate")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)NFT_GOTO);
	nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
	fw_ex_add(rb, e);
}

/*
 * `update @logmeter { iifname timeout 60s limit rate FW_LOG_RATE/second
 * burst FW_LOG_BURST packets }`: true while the input link is within its
 * log budget. The meter is a dynamic set of links, each with a limit of
 * its own; a link over its budget, or that finds the meter full, breaks
 * the rule (the caller's next rule denies without logging).
 */
void
fw_e_log_budget(struct fw_rb *rb)
{
	struct nftnl_expr	*e, *l;

	fw_e_meta(rb, NFT_META_IIFNAME, FW_REG_IF);
	if ((e = fw_ex(rb, "dynset")) == NULL)
		return;
	if ((l = fw_ex(rb, "limit")) == NULL) {
		nftnl_expr_free(e);
		return;
	}
	nftnl_expr_set_u64(l, NFTNL_EXPR_LIMIT_RATE, FW_LOG_RATE);
	nftnl_expr_set_u64(l, NFTNL_EXPR_LIMIT_UNIT, 1);
	nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_BURST, FW_LOG_BURST);
	nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
	nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_FLAGS, 0);
	nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, FW_REG_IF);
	nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_OP, NFT_DYNSET_OP_UPDATE);
	nftnl_expr_set_u64(e, NFTNL_EXPR_DYNSET_TIMEOUT, FW_LOG_METER_MS);
	nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME, "logmeter");
	/* From here e owns l. */
	nftnl_expr_set(e, NFTNL_EXPR_DYNSET_EXPR, l, 0);
	fw_ex_add(rb, e);
}

/* counter name "unlogged": what the log budget kept out of nflog. */
void
fw_e_unlogged(struct fw_rb *rb)
{
	struct nftnl_expr	*e;

	if ((e = fw_ex(rb, "objref")) == NULL)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_OBJREF_IMM_TYPE, NFT_OBJECT_COUNTER);
	nftnl_expr_set_str(e, NFTNL_EXPR_OBJREF_IMM_NAME, FW_UNLOGGED);
	fw_ex_add(rb, e);
}

/* iifname/oifname "sl-*": compare only the prefix, as nft does for '*'. */
void
fw_e_sbx_if(struct fw_rb *rb, uint32_t key, int eq)
{
	fw_e_meta(rb, key, FW_REG_TMP);
	fw_e_cmp(rb, FW_REG_TMP, eq ? NFT_CMP_EQ : NFT_CMP_NEQ, FW_IFPREFIX,
	    sizeof(FW_IFPREFIX) - 1);
}

/* In the chain of a sandbox without an IPv6 address, where anti-spoofing
 * has let no IPv6 packet through, the family test is left out (rb->v4only):
 * every rule there costs each later rule-adding batch its validation. */
void
fw_e_nfproto(struct fw_rb *rb, uint8_t proto)
{
	if (rb->v4only)
		return;
	fw_e_meta(rb, NFT_META_NFPROTO, FW_REG_TMP);
	fw_e_cmp(rb, FW_REG_TMP, NFT_CMP_EQ, &proto, 1);
}

void
fw_e_l4proto(struct fw_rb *rb, uint8_t proto)
{
	fw_e_meta(rb, NFT_META_L4PROTO, FW_REG_TMP);
	fw_e_cmp(rb, FW_REG_TMP, NFT_CMP_EQ, &proto, 1);
}

void
fw_e_dport(struct fw_rb *rb, uint16_t port)
{
	uint16_t	be = htons(port);

	fw_e_payload(rb, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, FW_REG_TMP);
	fw_e_cmp(rb, FW_REG_TMP, NFT_CMP_EQ, &be, 2);
}

/* Loads (iifname, daddr|saddr) into FW_REG_IF.. for a lookup; v6 when six. */
void
fw_e_if_addr(struct fw_rb *rb, int six, int dst)
{
	fw_e_nfproto(rb, six ? NFPROTO_IPV6 : NFPROTO_IPV4);
	fw_e_meta(rb, NFT_META_IIFNAME, FW_REG_IF);
	if (six)
		fw_e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, dst ? 24 : 8, 16,
		    FW_REG_ADDR);
	else
		fw_e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, dst ? 16 : 12, 4,
		    FW_REG_ADDR);
}

/* Loads iifname . daddr . l4proto . dport. Only TCP and UDP can match the
 * sets, since every element carries one of them. */
void
fw_e_tuple(struct fw_rb *rb, int six)
{
	fw_e_if_addr(rb, six, 1);
	fw_e_meta(rb, NFT_META_L4PROTO, six ? FW_REG_PROTO6 : FW_REG_PROTO4);
	fw_e_payload(rb, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2,
	    six ? FW_REG_PORT6 : FW_REG_PORT4);
}

void
fw_e_daddr_in(struct fw_rb *rb, int six, const char *set)
{
	fw_e_nfproto(rb, six ? NFPROTO_IPV6 : NFPROTO_IPV4);
	if (six)
		fw_e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 24, 16,
		    FW_REG_ADDR);
	else
		fw_e_payload(rb, NFT_PAYLOAD_NETWORK_HEADER, 16, 4,
		    FW_REG_ADDR);
	fw_e_lookup(rb, FW_REG_ADDR, set, 0);
}

/* Starts a rule in chain; finish it with fw_rb_end. */
int
fw_rb_start(struct fw_rb *rb, const char *table, const char *chain)
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
int
fw_rb_put(struct fw_batch *b, struct fw_rb *rb, int insert)
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

int
fw_rb_end(struct fw_batch *b, struct fw_rb *rb)
{
	return fw_rb_put(b, rb, 0);
}
