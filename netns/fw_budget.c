/*
 * fw_budget.c: byte budgets of single allow rules, and of a tainted
 * sandbox, in the kernel.
 *
 * Why it exists: the sandbox-wide quota bounds everything a sandbox sends,
 * but a policy wants "at most 100 MiB to the upload host" while the
 * package mirror stays unbounded. A budget is a quota object per sandbox
 * and budgeted rule, and a flow is charged to the budget of the rule its
 * destination was allowed by, decided once, when the flow begins:
 *
 *   map b_X { type mark . ipv6_addr . inet_proto . inet_service : ct_label;
 *     flags interval,timeout; }   # role 16/17 . address . proto . port
 *                                 #   : the label bit 104 + k of budget k
 *   map bq_X { type ct_label : quota; size 16; }  # bit : "b<k>_X"
 *   quota b<k>_X { over BYTES }   # k < the sandbox's budgets (<= 16)
 *   quota t_X { over BYTES }      # the taint budget, made at the taint
 *   chain sb_X {                  # first, only for sandboxes with budgets
 *     ct state new ct label set @b_X role 16/17 lookup   # label the flow
 *     ct label & BITS objref @bq_X goto d_budget         # count, or deny
 *     ... }
 *
 * Why labels and not a lookup of each packet's destination: the learned
 * elements that let a flow begin expire with their DNS answer while the
 * flow lives on; a destination lookup per packet would stop counting an
 * open flow the moment its answer expired. The flow's label lives as long
 * as the flow, so every byte of it counts, and the per-packet cost is one
 * hash lookup of the label (the interval lookup is paid once, by the first
 * packet). Elements per sandbox stay bounded: b_X holds the budgeted
 * statics (at most FW_MAX_RULES) and learned elements (within the
 * learn cap, expiring with them), bq_X at most FW_MAX_BUDGETS, and there
 * are at most FW_MAX_BUDGETS + 1 quota objects.
 *
 * What a budget counts: every packet of a flow whose destination a
 * budgeted rule allowed when it began, counted before the verdicts below
 * (a packet a later rule denies still counts: that only ever tightens).
 * Two budgeted rules may not claim one destination (address, protocol and
 * port): the kernel refuses the overlapping element, which fails the
 * sandbox's creation or, for a learned name, the answer (it is refused,
 * never charged to the wrong budget). The name gate's reinjected packets
 * are not seen twice here: a flow's packets that wait in the queue were
 * queued before the dispatch to sb_X, and only their second pass gets
 * here.
 *
 * The taint budget (fw_restrict_budget) is a named quota at the head of
 * the chain from the taint on: everything the tainted sandbox sends (its
 * keep list is all it can still reach) counts, and the rule budgets'
 * two rules are put above the narrowing again, so both apply.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/set.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

#define DT_MARK		19
#define DT_IP6ADDR	8
#define DT_PROTO	12
#define DT_SERVICE	13
#define DT_CT_LABEL	30

#define R_KEY		NFT_REG32_00	/* fw_e_role_key's registers */
#define R_LABEL		NFT_REG32_08	/* 16 bytes: 08..11 */

static const uint8_t	K_B[] = { 4, 16, 1, 2 };
static const uint8_t	DT_B[] = { DT_MARK, DT_IP6ADDR, DT_PROTO, DT_SERVICE };
static const uint8_t	K_L[] = { 16 };
static const uint8_t	DT_L[] = { DT_CT_LABEL };

const struct fw_setdef fw_budget_mapdef = {
	"b_", NULL, K_B, DT_B, sizeof(K_B),
	NFT_SET_INTERVAL | NFT_SET_TIMEOUT | NFT_SET_MAP, 1, FW_SZ_OWN,
	DT_CT_LABEL, 16
};
const struct fw_setdef fw_budget_qmapdef = {
	"bq_", NULL, K_L, DT_L, sizeof(K_L), NFT_SET_OBJECT, 1, 0, 0, 0
};

/* ---------------------------------------------------------------- names */

static void
names(const char *ifname, char map[FW_NAMEMAX], char qmap[FW_NAMEMAX])
{
	int	n = (int)strnlen(ifname, FW_IFNAMSIZ - 1);

	if (map != NULL)
		snprintf(map, FW_NAMEMAX, "b_%.*s", n, ifname);
	if (qmap != NULL)
		snprintf(qmap, FW_NAMEMAX, "bq_%.*s", n, ifname);
}

/* The quota object of budget k of ifname, or the taint's. */
static void
obj_name(const char *ifname, unsigned k, char out[FW_NAMEMAX])
{
	int	n = (int)strnlen(ifname, FW_IFNAMSIZ - 1);

	if (k == FW_BUDGET_TAINT)
		snprintf(out, FW_NAMEMAX, "t_%.*s", n, ifname);
	else
		snprintf(out, FW_NAMEMAX, "b%u_%.*s", k, n, ifname);
}

static void
label_of(unsigned k, uint8_t out[16])
{
	uint32_t	w[4] = { 0, 0, 0, 0 };
	unsigned	bit = FW_BUDGET_LABEL0 + k;

	w[bit / 32] = 1u << (bit % 32);
	memcpy(out, w, 16);
}

static void
label_mask(uint8_t out[16])
{
	uint32_t	w[4] = { 0, 0, 0, 0 };
	unsigned	k;

	for (k = 0; k < FW_MAX_BUDGETS; k++)
		w[(FW_BUDGET_LABEL0 + k) / 32] |= 1u <<
		    ((FW_BUDGET_LABEL0 + k) % 32);
	memcpy(out, w, 16);
}

/* --------------------------------------------------------- the objects */

/* A quota object: create (EXCL) or update in place (keeps what it
 * consumed). */
static int
quota_obj(struct fw_batch *b, const char *table, const char *name,
    uint64_t bytes, uint16_t flags)
{
	struct nftnl_obj	*o;

	if ((o = nftnl_obj_alloc()) == NULL)
		return -1;
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, table);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_QUOTA);
	nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_INET);
	nftnl_obj_set_u64(o, NFTNL_OBJ_QUOTA_BYTES, bytes);
	nftnl_obj_set_u32(o, NFTNL_OBJ_QUOTA_FLAGS, NFT_QUOTA_F_INV);
	nftnl_obj_nlmsg_build_payload(fw_batch_hdr(b, NFT_MSG_NEWOBJ, flags),
	    o);
	nftnl_obj_free(o);
	fw_batch_next(b);
	return 0;
}

int
fw_budget_queue_sets(struct fw_batch *b, struct fw *fw,
    const struct fw_sandbox *sb, int create)
{
	struct fw_eq	 q;
	char		 map[FW_NAMEMAX], qmap[FW_NAMEMAX], on[FW_NAMEMAX];
	uint8_t		 lab[16];
	unsigned	 k;

	names(sb->ifname, map, qmap);
	if (create && (fw_add_set(b, fw->table, &fw_budget_mapdef, map,
	    fw_setsize(fw, &fw_budget_mapdef)) == -1 ||
	    fw_add_set(b, fw->table, &fw_budget_qmapdef, qmap,
	    FW_MAX_BUDGETS) == -1))
		return -1;
	for (k = 0; k < sb->nbudgets; k++) {
		obj_name(sb->ifname, k, on);
		if (quota_obj(b, fw->table, on, sb->budget_bytes[k],
		    NLM_F_CREATE) == -1)
			return -1;
	}
	fw_eq_init(&q, b, fw->table, qmap, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
	for (k = 0; k < sb->nbudgets; k++) {
		obj_name(sb->ifname, k, on);
		label_of(k, lab);
		fw_eq_add(&q, lab, 16, NULL, 0, 0, on);
	}
	return fw_eq_done(&q);
}

int
fw_budget_queue_rules(struct fw_batch *b, const char *t, const char *ifname,
    int v6, int insert)
{
	struct fw_rb		 rb;
	struct nftnl_expr	*e;
	char			 map[FW_NAMEMAX], qmap[FW_NAMEMAX];
	uint8_t			 mask[16], zero[16];
	char			 set[FW_NAMEMAX], chain[FW_NAMEMAX];
	int			 six, i;

	names(ifname, map, qmap);
	fw_sbx_names(ifname, set, chain);
	memset(zero, 0, sizeof(zero));
	label_mask(mask);
	/* Inserted at the head one by one, the count goes in first so
	 * that the labelling ends up above it; appended, the other way. */
	for (i = 0; i < 2; i++) {
		int count = insert ? i == 0 : i == 1;

		if (count) {
			if (fw_rb_start(&rb, t, chain) == -1)
				return -1;
			fw_e_ct(&rb, NFT_CT_LABELS, R_LABEL, 0);
			if ((e = fw_ex(&rb, "bitwise")) != NULL) {
				nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG,
				    R_LABEL);
				nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG,
				    R_LABEL);
				nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN,
				    16);
				nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK,
				    mask, 16);
				nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR,
				    zero, 16);
				fw_ex_add(&rb, e);
			}
			if ((e = fw_ex(&rb, "objref")) != NULL) {
				nftnl_expr_set_u32(e,
				    NFTNL_EXPR_OBJREF_SET_SREG, R_LABEL);
				nftnl_expr_set_str(e,
				    NFTNL_EXPR_OBJREF_SET_NAME, qmap);
				fw_ex_add(&rb, e);
			}
			fw_e_goto(&rb, "d_budget");
			if (fw_rb_put(b, &rb, insert) == -1)
				return -1;
			continue;
		}
		for (six = 0; six <= v6; six++) {
			uint32_t st = NF_CT_STATE_BIT(IP_CT_NEW), z = 0;

			if (fw_rb_start(&rb, t, chain) == -1)
				return -1;
			rb.v4only = !v6;
			fw_e_ct(&rb, NFT_CT_STATE, R_LABEL, 0);
			if ((e = fw_ex(&rb, "bitwise")) != NULL) {
				nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG,
				    R_LABEL);
				nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG,
				    R_LABEL);
				nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN,
				    4);
				nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &st,
				    4);
				nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &z,
				    4);
				fw_ex_add(&rb, e);
			}
			fw_e_cmp(&rb, R_LABEL, NFT_CMP_NEQ, &z, 4);
			fw_e_role_key(&rb, six, six ? FW_R_BUDGET6 :
			    FW_R_BUDGET4, 1);
			fw_e_map(&rb, R_KEY, map, R_LABEL);
			fw_e_ct(&rb, NFT_CT_LABELS, R_LABEL, 1);
			if (fw_rb_put(b, &rb, insert) == -1)
				return -1;
		}
	}
	return 0;
}

/* Does [alo, ahi] meet [blo, bhi] (keys compared as bytes)? */
static int
keys_meet(const struct fw_key *alo, const struct fw_key *ahi,
    const struct fw_key *blo, const struct fw_key *bhi)
{
	return memcmp(alo->b, bhi->b, FW_SBX_KEYLEN) <= 0 &&
	    memcmp(blo->b, ahi->b, FW_SBX_KEYLEN) <= 0;
}

static void
rule_keys(const struct fw_rule *r, struct fw_key *lo, struct fw_key *hi)
{
	uint8_t	a[16], z[16];
	size_t	alen = r->family == AF_INET ? 4 : 16;
	uint32_t role = r->family == AF_INET ? FW_R_BUDGET4 : FW_R_BUDGET6;

	(void)fw_cidr_range(r->family, r->addr, r->prefix, a, z);
	fw_key_sbx(lo, role, a, alen, r->proto, r->port_lo);
	fw_key_sbx(hi, role, z, alen, r->proto, r->port_hi);
}

int
fw_budget_check_rules(const struct fw_sandbox *sb, const struct fw_rule *r,
    size_t n)
{
	struct fw_key	alo, ahi, blo, bhi;
	size_t		i, j;

	if (sb->nbudgets > FW_MAX_BUDGETS)
		return -1;
	for (i = 0; i < sb->nbudgets; i++)
		if (sb->budget_bytes[i] == 0)
			return -1;
	if (r == NULL)		/* the rules' own checks say what is wrong */
		return 0;
	for (i = 0; i < n; i++) {
		if (r[i].budget == 0)
			continue;
		if (r[i].budget > sb->nbudgets || r[i].proto == IPPROTO_ICMP)
			return -1;
		/* One destination, one budget: the kernel would refuse the
		 * overlap anyway; refused here with a clear reason. Bounded
		 * by the rules a sandbox has (FW_MAX_RULES). */
		rule_keys(&r[i], &alo, &ahi);
		for (j = 0; j < i; j++) {
			if (r[j].budget == 0)
				continue;
			rule_keys(&r[j], &blo, &bhi);
			if (keys_meet(&alo, &ahi, &blo, &bhi))
				return -1;
		}
	}
	return 0;
}

int
fw_budget_queue_statics(struct fw_batch *b, struct fw *fw, const char *ifname,
    const struct fw_rule *r, size_t n, uint16_t type)
{
	struct fw_eq	 q;
	struct fw_key	 lo, hi;
	char		 map[FW_NAMEMAX];
	uint8_t		 lab[16];
	size_t		 i;

	names(ifname, map, NULL);
	fw_eq_init(&q, b, fw->table, map, type,
	    type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE | NLM_F_EXCL : 0);
	for (i = 0; i < n; i++) {
		if (r[i].budget == 0)
			continue;
		rule_keys(&r[i], &lo, &hi);
		if (type == NFT_MSG_NEWSETELEM) {
			label_of(r[i].budget - 1u, lab);
			q.data = lab;
			q.dlen = 16;
		}
		fw_eq_add(&q, lo.b, lo.len, hi.b, 0, 0, NULL);
	}
	return fw_eq_done(&q);
}

int
fw_budget_learn_queue(struct fw_batch *b, struct fw *fw,
    const struct fw_elem *e, size_t n, uint16_t type)
{
	struct fw_eq	 q;
	struct fw_key	 lo, hi;
	char		 map[FW_NAMEMAX];
	uint8_t		 lab[16];
	size_t		 i, alen;
	uint32_t	 role;

	for (i = 0; i < n; i++) {
		if (e[i].budget == 0 || e[i].budget > FW_MAX_BUDGETS)
			continue;
		names(e[i].ifname, map, NULL);
		alen = e[i].family == AF_INET ? 4 : 16;
		role = e[i].family == AF_INET ? FW_R_BUDGET4 : FW_R_BUDGET6;
		fw_key_sbx(&lo, role, e[i].addr, alen, e[i].proto,
		    e[i].port_lo);
		fw_key_sbx(&hi, role, e[i].addr, alen, e[i].proto,
		    e[i].port_hi);
		fw_eq_init(&q, b, fw->table, map, type,
		    type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0);
		if (type == NFT_MSG_NEWSETELEM) {
			label_of(e[i].budget - 1u, lab);
			q.data = lab;
			q.dlen = 16;
		}
		fw_eq_add(&q, lo.b, lo.len, hi.b, 0,
		    type == NFT_MSG_NEWSETELEM ? e[i].timeout_ms : 0, NULL);
		if (fw_eq_done(&q) == -1)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------------- removal */

int
fw_quota_obj_del(struct fw_batch *b, const char *table, const char *name,
    uint16_t type)
{
	struct nftnl_obj	*o;

	if ((o = nftnl_obj_alloc()) == NULL)
		return -1;
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, table);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_QUOTA);
	nftnl_obj_nlmsg_build_payload(fw_batch_hdr(b, type, 0), o);
	nftnl_obj_free(o);
	fw_batch_next(b);
	return 0;
}

static int
set_del(struct fw_batch *b, const char *table, const char *name,
    uint16_t type)
{
	struct nftnl_set	*s;

	if ((s = nftnl_set_alloc()) == NULL)
		return -1;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, name);
	nftnl_set_nlmsg_build_payload(fw_batch_hdr(b, type, 0), s);
	nftnl_set_free(s);
	fw_batch_next(b);
	return 0;
}

int
fw_budget_queue_del(struct fw_batch *b, struct fw *fw, const char *ifname,
    int destroy, uint32_t found)
{
	char		map[FW_NAMEMAX], qmap[FW_NAMEMAX], on[FW_NAMEMAX];
	unsigned	k;

	names(ifname, map, qmap);
	/* The maps (their elements reference the objects) before the
	 * objects; both after the chain whose rules reference them. */
	if (destroy || (found & FW_BUDGET_P_MAPS)) {
		if (set_del(b, fw->table, map, destroy ? NFT_MSG_DESTROYSET :
		    NFT_MSG_DELSET) == -1 ||
		    set_del(b, fw->table, qmap, destroy ? NFT_MSG_DESTROYSET :
		    NFT_MSG_DELSET) == -1)
			return -1;
	}
	for (k = 0; k < FW_MAX_BUDGETS; k++) {
		if (!destroy && !(found & (1u << k)))
			continue;
		obj_name(ifname, k, on);
		if (fw_quota_obj_del(b, fw->table, on, destroy ?
		    NFT_MSG_DESTROYOBJ : NFT_MSG_DELOBJ) == -1)
			return -1;
	}
	if (destroy || (found & FW_BUDGET_P_TAINT)) {
		obj_name(ifname, FW_BUDGET_TAINT, on);
		if (fw_quota_obj_del(b, fw->table, on, destroy ?
		    NFT_MSG_DESTROYOBJ : NFT_MSG_DELOBJ) == -1)
			return -1;
	}
	return 0;
}

/* --------------------------------------------------------- inspection */

struct obj_ctx {
	uint64_t	used, bytes;
	int		got;
};

static int
obj_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct obj_ctx		*c = arg;
	struct nftnl_obj	*o;

	if ((o = nftnl_obj_alloc()) == NULL)
		return MNL_CB_ERROR;
	if (nftnl_obj_nlmsg_parse(nlh, o) == 0 &&
	    nftnl_obj_get_u32(o, NFTNL_OBJ_TYPE) == NFT_OBJECT_QUOTA) {
		c->used = nftnl_obj_get_u64(o, NFTNL_OBJ_QUOTA_CONSUMED);
		c->bytes = nftnl_obj_get_u64(o, NFTNL_OBJ_QUOTA_BYTES);
		c->got = 1;
	}
	nftnl_obj_free(o);
	return MNL_CB_OK;
}

/* One GETOBJ (or GETOBJ_RESET) of quota object name. */
static int
obj_get(struct fw *fw, const char *name, int reset, struct obj_ctx *c)
{
	struct nftnl_obj	*o;
	struct nlmsghdr		*nlh;

	memset(c, 0, sizeof(*c));
	if ((o = nftnl_obj_alloc()) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, fw->table);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_QUOTA);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, reset ? NFT_MSG_GETOBJ_RESET :
	    NFT_MSG_GETOBJ, NFPROTO_INET, NLM_F_ACK, fw->seq++);
	nftnl_obj_nlmsg_build_payload(nlh, o);
	nftnl_obj_free(o);
	if (fw_request(fw, nlh, obj_cb, c) == -1)
		return -1;
	if (!c->got) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

static int
budget_get(struct fw *fw, const char *ifname, unsigned k, int reset,
    struct obj_ctx *c, const char *what, char *err, size_t errlen)
{
	char	on[FW_NAMEMAX];

	if (fw == NULL || ifname == NULL || !fw_valid_ifname(ifname) ||
	    (k >= FW_MAX_BUDGETS && k != FW_BUDGET_TAINT)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "%s: invalid arguments", what);
		return -1;
	}
	obj_name(ifname, k, on);
	if (obj_get(fw, on, reset, c) == -1) {
		fw_seterr(err, errlen, "%s %s: %s", what, on, strerror(errno));
		return -1;
	}
	return 0;
}

int
fw_budget_reset(struct fw *fw, const char *ifname, unsigned k, uint64_t *used,
    char *err, size_t errlen)
{
	struct obj_ctx	c;

	if (budget_get(fw, ifname, k, 1, &c, "fw_budget_reset", err,
	    errlen) == -1)
		return -1;
	if (used != NULL)
		*used = c.used;
	return 0;
}

int
fw_budget_used(struct fw *fw, const char *ifname, unsigned k, uint64_t *used,
    uint64_t *bytes, char *err, size_t errlen)
{
	struct obj_ctx	c;

	if (budget_get(fw, ifname, k, 0, &c, "fw_budget_used", err,
	    errlen) == -1)
		return -1;
	if (used != NULL)
		*used = c.used;
	if (bytes != NULL)
		*bytes = c.bytes;
	return 0;
}

uint32_t
fw_budget_probe(struct fw *fw, const char *ifname)
{
	struct obj_ctx	c;
	struct nftnl_set *s;
	struct nlmsghdr	*nlh;
	char		map[FW_NAMEMAX], on[FW_NAMEMAX];
	uint32_t	found = 0;
	unsigned	k;

	for (k = 0; k < FW_MAX_BUDGETS; k++) {
		obj_name(ifname, k, on);
		if (obj_get(fw, on, 0, &c) == 0)
			found |= 1u << k;
	}
	obj_name(ifname, FW_BUDGET_TAINT, on);
	if (obj_get(fw, on, 0, &c) == 0)
		found |= FW_BUDGET_P_TAINT;
	names(ifname, map, NULL);
	if ((s = nftnl_set_alloc()) != NULL) {
		nftnl_set_set_str(s, NFTNL_SET_TABLE, fw->table);
		nftnl_set_set_str(s, NFTNL_SET_NAME, map);
		nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETSET,
		    NFPROTO_INET, NLM_F_ACK, fw->seq++);
		nftnl_set_nlmsg_build_payload(nlh, s);
		nftnl_set_free(s);
		if (fw_request(fw, nlh, NULL, NULL) == 0)
			found |= FW_BUDGET_P_MAPS;
	}
	return found;
}

/* --------------------------------------------------------------- taint */

/* The taint budget's object and its rule, at the head of the chain
 * (queued after everything else the first narrowing inserts, so it ends
 * up first). With rule budgets (has_maps), their two rules go above the
 * narrowing too, under the taint's. */
int
fw_budget_queue_taint(struct fw_batch *b, struct fw *fw, const char *ifname,
    uint64_t bytes, int has_maps, int v6)
{
	struct fw_rb		 rb;
	struct nftnl_expr	*e;
	char			 chain[FW_NAMEMAX], on[FW_NAMEMAX];

	if (has_maps && fw_budget_queue_rules(b, fw->table, ifname, v6,
	    1) == -1)
		return -1;
	if (bytes == 0)
		return 0;
	obj_name(ifname, FW_BUDGET_TAINT, on);
	if (quota_obj(b, fw->table, on, bytes, NLM_F_CREATE) == -1)
		return -1;
	fw_sbx_names(ifname, NULL, chain);
	if (fw_rb_start(&rb, fw->table, chain) == -1)
		return -1;
	if ((e = fw_ex(&rb, "objref")) != NULL) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_OBJREF_IMM_TYPE,
		    NFT_OBJECT_QUOTA);
		nftnl_expr_set_str(e, NFTNL_EXPR_OBJREF_IMM_NAME, on);
		fw_ex_add(&rb, e);
	}
	fw_e_goto(&rb, "d_budget");
	return fw_rb_put(b, &rb, 1);
}

/* -------------------------------------------------------------- update */

static int
del_static(struct nftnl_set_elem *e, void *arg)
{
	struct fw_eq	*q = arg;
	const void	*key, *kend;
	uint32_t	 klen = 0, elen = 0, role;

	/* Learned elements carry a timeout and stay. */
	if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_TIMEOUT))
		return 0;
	role = fw_elem_role(e);
	if (role != FW_R_BUDGET4 && role != FW_R_BUDGET6)
		return 0;
	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	kend = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END) ?
	    nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &elen) : NULL;
	if (kend == NULL || elen != klen)
		return 0;
	fw_eq_add(q, key, klen, kend, 0, 0, NULL);
	return 0;
}

struct nftnl_set *
fw_budget_dump(struct fw *fw, const char *ifname)
{
	char	map[FW_NAMEMAX];

	names(ifname, map, NULL);
	return fw_dump_set(fw, map);
}

int
fw_budget_queue_update(struct fw_batch *b, struct fw *fw,
    const struct fw_sandbox *sb, const struct fw_rule *allow, size_t nallow,
    struct nftnl_set *old, int v6)
{
	struct fw_eq	q;
	char		map[FW_NAMEMAX];

	names(sb->ifname, map, NULL);
	if (old != NULL) {
		/* The old budgeted statics out, the new in, in the batch
		 * that replaces the sandbox's statics. */
		fw_eq_init(&q, b, fw->table, map, NFT_MSG_DELSETELEM, 0);
		fw_each_elem(old, del_static, &q);
		if (fw_eq_done(&q) == -1)
			return -1;
	}
	if (sb->nbudgets == 0)
		return 0;
	/* Budgets a sandbox made without them gets now: the maps, and
	 * the rules at the head of its chain (above a narrowing too). */
	if (fw_budget_queue_sets(b, fw, sb, old == NULL) == -1 ||
	    (old == NULL && fw_budget_queue_rules(b, fw->table, sb->ifname,
	    v6, 1) == -1))
		return -1;
	return fw_budget_queue_statics(b, fw, sb->ifname, allow, nallow,
	    NFT_MSG_NEWSETELEM);
}
