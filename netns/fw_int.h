/*
 * fw_int.h: what the files of the fw part of netns/ share and nobody else
 * sees: the handle's layout, the batch helpers, the set table, the rule
 * and element builders and the per-ifname index. The public interface is
 * netns/fw.h. The files, by concern: fw.c (the handle, the table's sets and
 * chains, fw_init and adoption), fw_rules.c (the ruleset: shared rules and
 * per-sandbox chains), fw_expr.c (expression and rule builders),
 * fw_batch.c (netlink batches and requests), fw_elem.c (keys and element
 * queues), fw_sandbox.c, fw_learn.c, fw_restrict.c (what a sandbox adds),
 * fw_index.c (what this handle added, per ifname), fw_dump.c (reading the
 * table back), fw_nflog.c (denials logged back).
 */
#ifndef SLUICE_NETNS_FW_INT_H
#define SLUICE_NETNS_FW_INT_H

#include <stddef.h>
#include <stdint.h>

#include <linux/netfilter/nf_tables.h>

#include <libmnl/libmnl.h>

#include "netns/fw.h"

struct nftnl_expr;
struct nftnl_rule;
struct nftnl_set;
struct nftnl_set_elem;

#define FW_BATCH_LIMIT		(128 * 1024)
#define FW_RBUFSZ		(64 * 1024)
#define FW_BUFSZ		(FW_BATCH_LIMIT * 2 + FW_RBUFSZ)
#define FW_IFPREFIX		"sl-"
#define FW_MAX_RANGES		4096	/* per fw_config list */
#define FW_MAX_RULES		4096	/* per fw_sandbox_add/fw_restrict */
#define FW_MAX_LEARN		1024	/* per fw_learn */
#define FW_ELEMS_PER_MSG	64	/* keeps each message far below the limit */
#define FW_KEYMAX		64
#define FW_LEARN_CHUNK		256	/* learned elements per deletion batch */

/* A static, anti-spoofing, keep, restricted or quota element this process
 * put in the kernel for one sandbox: which set (index into fw_sets) and the
 * key (and interval end) exactly as sent. */
#define FW_RAWKEY		40	/* longest key: ifname . ipv6 . proto . port */
struct fw_raw {
	uint8_t		set;
	uint8_t		has_end;
	uint8_t		key[FW_RAWKEY];
	uint8_t		kend[FW_RAWKEY];
};

/* A learned element without its ifname (the sandbox record holds it). */
struct fw_lkey {
	uint8_t		used;		/* slot of the open-addressing table */
	uint8_t		family, proto, keep;
	uint16_t	port_lo, port_hi;
	uint8_t		addr[16];
	int64_t		expires_ms;	/* CLOCK_MONOTONIC, for pruning */
	uint8_t		nnames;		/* names it was learned for */
	char		*names;		/* nnames NUL-terminated, or NULL */
};

/* Everything keyed on one ifname that this process added (or found when it
 * adopted the table): what fw_sandbox_del must remove, so that deleting
 * costs the same whatever else the table holds. */
struct fw_sbx {
	struct fw_sbx	*next;		/* hash chain */
	char		 ifname[FW_IFNAMSIZ];
	struct fw_raw	*raw;
	size_t		 nraw, rawcap;
	struct fw_lkey	*lk;		/* open addressing, power of 2 */
	size_t		 nlk, lkcap, lkprune;
	int64_t		 lkcapped_ms;	/* last pruning at the learn cap */
	int		 quota;		/* object q_<ifname> exists */
};

#define FW_IDX_BUCKETS	1024

struct fw {
	struct mnl_socket	*nl;
	uint32_t		 portid;
	uint32_t		 seq;
	char			 table[FW_TABLE_MAX];
	/* One buffer: the batch (2 * limit) then the reply area. Requests
	 * (fw_request: table lookups, dumps) also build at its start, so
	 * they must never run while a batch is being built. */
	char			*buf;
	int			 refresh;	/* FW_REFRESH_* */
	struct fw_cidr		*priv;		/* private ranges from fw_init */
	size_t			 npriv;
	int			 destroy;	/* FW_DESTROY_* */
	uint16_t		 group;		/* nflog group from fw_init */
	uint32_t		 learn_cap;	/* per sandbox, 0 = none */
	/* The per-ifname index (fw_index.c). Valid only after fw_init on
	 * this handle: a handle that never initialised (or adopted) the
	 * table does not know what is in it and deletes through dumps. */
	int			 idx_valid;
	struct fw_sbx		*idx[FW_IDX_BUCKETS];
	/* Set bounds from fw_init (defaults on a handle that never ran
	 * it): the sizes the per-sandbox set s_<ifname> is made with. */
	uint32_t		 max_sbx, max_learned;
	int			 gate;		/* fw_config.gate, gate_queue */
	uint16_t		 gate_queue;
};

#define FW_DESTROY_UNKNOWN	0
#define FW_DESTROY_YES		1	/* NFT_MSG_DESTROYSETELEM works */
#define FW_DESTROY_NO		2	/* older kernel: dump and delete */

/* Linux 6.3 names; the installed headers (and libnftnl 1.2.4) predate
 * them. The numbers are the kernel ABI. */
#ifndef NFT_MSG_DESTROYSETELEM
#define NFT_MSG_DESTROYSETELEM	30
#endif
#ifndef NFT_MSG_DESTROYCHAIN
#define NFT_MSG_DESTROYCHAIN	27
#endif
#ifndef NFT_MSG_DESTROYSET
#define NFT_MSG_DESTROYSET	29
#endif
#ifndef NFT_MSG_DESTROYOBJ
#define NFT_MSG_DESTROYOBJ	31
#endif

#define FW_REFRESH_UNKNOWN	0
#define FW_REFRESH_READD	1	/* re-adding updates the timeout */
#define FW_REFRESH_DELADD	2	/* needs add + delete + add */

struct fw_batch {
	struct fw		*fw;
	struct mnl_nlmsg_batch	*b;
	struct nlmsghdr		*last;
	unsigned		 nmsg;
	int			 overflow;	/* or an allocation failure */
};

struct fw_setdef {
	const char	*name;
	const char	*also;		/* counted with it by fw_count_elems */
	const uint8_t	*fields;	/* unpadded field lengths */
	const uint8_t	*types;		/* nft datatype ids (display only) */
	size_t		 nfields;
	uint32_t	 flags;		/* NFT_SET_* */
	int		 persistent;	/* per-sandbox state */
	int		 bound;		/* FW_SZ_*: its size */
	uint32_t	 dtype;		/* a data map's value (nft id) */
	uint32_t	 dlen;		/* its length, 0 = 4 */
};

/* What a set's `size` is made of (fw_setsize; the ruleset comment in fw_rules.c
 * says why each bound holds). S = max sandboxes, L = learned per sandbox. */
#define FW_SZ_SBX	1	/* one element per sandbox: S */
#define FW_SZ_LEARNED	2	/* S * L */
#define FW_SZ_RANGES	3	/* a range list: FW_RANGE_ELEMS */
#define FW_SZ_METER	4	/* the log meter: 2 * S */
#define FW_SZ_OWN	5	/* s_<ifname>: FW_SBX_ELEMS(L) */

/* An interval of a single-field (rbtree) set is two kernel elements; the
 * pool joins the deny list. */
#define FW_RANGE_ELEMS		(2 * (FW_MAX_RANGES + 1))
/* A sandbox's own set: allows, denies and keep rules (FW_MAX_RULES each),
 * the ICMP catch-all, and learned port ranges (normal and keep). */
#define FW_SBX_ELEMS(l)		(3u * FW_MAX_RULES + 1u + 2u * (l))

/* Logging (the d_* chains): per sandbox link, at most FW_LOG_RATE denied
 * packets a second reach nflog after a burst of FW_LOG_BURST; the rest are
 * denied all the same and counted in the counter FW_UNLOGGED. A link's
 * meter entry lives FW_LOG_METER_MS after its last denial. */
#define FW_LOG_RATE		20
#define FW_LOG_BURST		50
#define FW_LOG_METER_MS		60000
#define FW_UNLOGGED		"unlogged"

uint32_t	 fw_setsize(const struct fw *fw, const struct fw_setdef *d);

struct fw_range {
	uint8_t	lo[16], hi[16];
};

/*
 * The per-sandbox objects: set "s_<ifname>" and chain "sb_<ifname>",
 * reached from the forward chain through @sbx_dispatch. The set holds all
 * of one sandbox's interval elements, told apart by a role field:
 * role[4] . addr[16] . l4proto[1+3] . port[2+2]. IPv4 addresses sit in the
 * address field in their IPv4-mapped form (::ffff:a.b.c.d); the role says
 * which family a key is, so a mapped IPv6 destination never meets an IPv4
 * rule. Roles without ports (denies, ICMP) use proto 0 and port 0.
 */
#define FW_SBX_SET	"s_"
#define FW_SBX_CHAIN	"sb_"
#define FW_SBX_KEYLEN	28
#define FW_NAMEMAX	(FW_IFNAMSIZ + 8)
enum fw_role {
	FW_R_ALLOW4 = 1, FW_R_ALLOW6, FW_R_PALLOW4, FW_R_PALLOW6,
	FW_R_DENY4, FW_R_DENY6, FW_R_ICMP4, FW_R_KEEP4, FW_R_KEEP6,
	FW_R_LRANGE4, FW_R_LRANGE6, FW_R_LKRANGE4, FW_R_LKRANGE6,
	FW_R_PKEEP4, FW_R_PKEEP6,	/* keep rules inside a private range */
	FW_R_BUDGET4, FW_R_BUDGET6	/* b_<ifname>: budgeted destinations */
};

/* fw_batch.c */
void		 fw_seterr(char *err, size_t errlen, const char *fmt, ...)
		    __attribute__((format(printf, 3, 4)));
int		 fw_batch_begin(struct fw *fw, struct fw_batch *b);
struct nlmsghdr	*fw_batch_hdr(struct fw_batch *b, uint16_t type,
		    uint16_t flags);
void		 fw_batch_next(struct fw_batch *b);
void		 fw_batch_abort(struct fw_batch *b);
int		 fw_batch_commit(struct fw_batch *b, const char *what,
		    char *err, size_t errlen);
int		 fw_request(struct fw *fw, struct nlmsghdr *nlh, mnl_cb_t cb,
		    void *arg);

/* fw.c: the set table (fw_set_index: the index of set name in fw_sets,
 * -1 if none), and the creation of sets and chains in a batch (fw_add_set:
 * NULL name = d->name; fw_add_chain: type NULL makes a regular chain, else
 * a base chain of that type at hook and prio). -1 (ENOMEM) on failure;
 * the caller aborts the batch. */
extern const struct fw_setdef fw_sets[];
extern const struct fw_setdef fw_sbx_setdef;

const struct fw_setdef *fw_setdef(const char *name);
int		 fw_set_index(const char *name);
size_t		 fw_keylen(const struct fw_setdef *d);
int		 fw_add_set(struct fw_batch *b, const char *table,
		    const struct fw_setdef *d, const char *name, uint32_t size);
int		 fw_add_chain(struct fw_batch *b, const char *table,
		    const char *name, const char *type, uint32_t hook,
		    int prio);
void		 fw_sbx_names(const char *ifname, char set[FW_NAMEMAX],
		    char chain[FW_NAMEMAX]);
int		 fw_sbx_queue_check(struct fw_batch *b, const char *table,
		    const char *ifname);

/* fw_rules.c: the ruleset. fw_tails are the chains a denial goes to
 * (d_*), which fw_init makes and, adopting a table, flushes. */
struct fw_tail {
	const char	*chain, *prefix;
	int		 verdict;	/* as fw_rules.c writes it */
};
extern const struct fw_tail	fw_tails[];
extern const size_t		fw_ntails;

int		 fw_add_rules(struct fw_batch *b, const char *table,
		    const struct fw_config *cfg);
int		 fw_sbx_queue_objects(struct fw_batch *b, const char *table,
		    const char *ifname, uint32_t gen, int v6, int budgets);
int		 fw_sbx_queue_restrict(struct fw_batch *b, const char *table,
		    const char *ifname, int v6);

/*
 * fw_expr.c: a rule under construction (fw_rb_start, one fw_e_* call per
 * match or statement, then fw_rb_put or fw_rb_end, which queue it in a
 * batch, or report the allocation failure any fw_e_* call met: -1,
 * ENOMEM). v4only: in the chain of a sandbox without an IPv6 address,
 * fw_e_nfproto emits nothing (anti-spoofing let no IPv6 packet through,
 * and every rule there costs each later rule-adding batch its
 * validation).
 */
struct fw_rb {
	struct nftnl_rule	*r;
	int			 oom;
	int			 v4only;	/* fw_e_nfproto emits nothing */
};

/* Registers: ifname fills NFT_REG32_00..03, the address starts at 04. */
#define FW_REG_IF	NFT_REG32_00
#define FW_REG_ADDR	NFT_REG32_04
#define FW_REG_PROTO4	(NFT_REG32_04 + 1)
#define FW_REG_PORT4	(NFT_REG32_04 + 2)
#define FW_REG_PROTO6	(NFT_REG32_04 + 4)
#define FW_REG_PORT6	(NFT_REG32_04 + 5)
#define FW_REG_TMP	NFT_REG32_00

int		 fw_rb_start(struct fw_rb *rb, const char *table,
		    const char *chain);
int		 fw_rb_put(struct fw_batch *b, struct fw_rb *rb, int insert);
int		 fw_rb_end(struct fw_batch *b, struct fw_rb *rb);
struct nftnl_expr *fw_ex(struct fw_rb *rb, const char *name);
void		 fw_ex_add(struct fw_rb *rb, struct nftnl_expr *e);
void		 fw_e_meta(struct fw_rb *rb, uint32_t key, uint32_t dreg);
void		 fw_e_cmp(struct fw_rb *rb, uint32_t sreg, uint32_t op,
		    const void *data, uint32_t len);
void		 fw_e_payload(struct fw_rb *rb, uint32_t base, uint32_t off,
		    uint32_t len, uint32_t dreg);
void		 fw_e_lookup(struct fw_rb *rb, uint32_t sreg, const char *set,
		    int inv);
void		 fw_e_vmap(struct fw_rb *rb, uint32_t sreg, const char *set);
void		 fw_e_verdict(struct fw_rb *rb, int verdict);
void		 fw_e_imm(struct fw_rb *rb, uint32_t dreg, const void *data,
		    uint32_t len);
void		 fw_e_log(struct fw_rb *rb, uint16_t group, const char *prefix);
void		 fw_e_reject(struct fw_rb *rb, uint32_t type, uint8_t code);
void		 fw_e_reject_admin(struct fw_rb *rb);
void		 fw_e_ct_established(struct fw_rb *rb);
void		 fw_e_ct(struct fw_rb *rb, uint32_t key, uint32_t reg, int set);
void		 fw_e_map(struct fw_rb *rb, uint32_t sreg, const char *set,
		    uint32_t dreg);
void		 fw_e_goto(struct fw_rb *rb, const char *chain);
void		 fw_e_log_budget(struct fw_rb *rb);
void		 fw_e_unlogged(struct fw_rb *rb);
void		 fw_e_sbx_if(struct fw_rb *rb, uint32_t key, int eq);
void		 fw_e_nfproto(struct fw_rb *rb, uint8_t proto);
void		 fw_e_l4proto(struct fw_rb *rb, uint8_t proto);
void		 fw_e_dport(struct fw_rb *rb, uint16_t port);
void		 fw_e_if_addr(struct fw_rb *rb, int six, int dst);
void		 fw_e_tuple(struct fw_rb *rb, int six);
void		 fw_e_daddr_in(struct fw_rb *rb, int six, const char *set);

/*
 * fw_elem.c: checks and encodings. A struct fw_eq collects the elements of
 * one set (fw_eq_init, fw_eq_add) into messages of FW_ELEMS_PER_MSG in the
 * caller's batch; fw_eq_done flushes them, -1 (ENOMEM, the batch marked
 * failed) if any allocation failed. With rec set, every element is also
 * noted there (struct fw_rawvec) for the index. fw_cidr_range: the first
 * and last address of a CIDR. fw_rules_normalize, fw_rules_split: rules
 * without the overlaps the kernel refuses (malloc'ed, caller frees; split:
 * the public ones first, *npub of them, then those inside a private
 * range). fw_rule_private: does the rule lie wholly inside a private
 * range?
 */
struct fw_rawvec {
	struct fw_raw		*v;
	size_t			 n, cap;
	int			 oom;
};

struct fw_eq {
	struct fw_batch		*b;
	const char		*table, *set;
	struct nftnl_set	*s;
	struct fw_rawvec	*rec;	/* also note each element here */
	const void		*data;	/* a data map's value for each element */
	uint32_t		 dlen;
	uint16_t		 type, flags;
	int			 n, oom, setidx;
};

struct fw_key {
	uint8_t	b[FW_KEYMAX];
	size_t	len;
};

int		 fw_cidr_range(uint8_t family, const uint8_t *addr,
		    uint8_t prefix, uint8_t lo[16], uint8_t hi[16]);
void		 fw_rawvec_add(struct fw_rawvec *rv, int set, const void *key,
		    size_t klen, const void *kend);
void		 fw_eq_init(struct fw_eq *q, struct fw_batch *b,
		    const char *table, const char *set, uint16_t type,
		    uint16_t flags);
void		 fw_eq_add(struct fw_eq *q, const void *key, size_t klen,
		    const void *keyend, uint32_t eflags, uint64_t timeout_ms,
		    const char *objref);
int		 fw_eq_done(struct fw_eq *q);
int		 fw_add_intervals(struct fw_batch *b, const char *table,
		    const char *set, size_t alen, struct fw_range *r, size_t n);
int		 fw_valid_ifname(const char *ifname);
int		 fw_valid_rule(const struct fw_rule *r, int allow_icmp);
int		 fw_valid_elem(const struct fw_elem *e);
void		 fw_key_init(struct fw_key *k, const char *ifname);
void		 fw_key_put(struct fw_key *k, const void *p, size_t n);
void		 fw_key_sbx(struct fw_key *k, uint32_t role,
		    const uint8_t *addr, size_t alen, uint8_t proto,
		    uint16_t port);
void		 fw_elem_keys(const struct fw_elem *e, struct fw_key *lo,
		    struct fw_key *hi);
void		 fw_add_rule_tuple(struct fw_eq *q, uint32_t role,
		    const struct fw_rule *r);
void		 fw_add_rule_cidr(struct fw_eq *q, uint32_t role,
		    const struct fw_rule *r);
int		 fw_rule_private(const struct fw *fw, const struct fw_rule *r);
struct fw_rule	*fw_rules_normalize(const struct fw_rule *in, size_t n,
		    size_t *outn);
struct fw_rule	*fw_rules_split(const struct fw *fw, const struct fw_rule *in,
		    size_t n, size_t *nout, size_t *npub);

/*
 * fw_index.c: the per-ifname index (struct fw_sbx). fw_idx_find: the
 * record of ifname, NULL if none. fw_idx_commit, fw_idx_learned: after a
 * committed batch, note what it added (or, unlearn, removed); on failure
 * the index is cleared and marked invalid. fw_idx_rebuild: after adopting
 * a table, from one dump of each per-sandbox set; 0, or -1 (errno) with
 * the index cleared. fw_mono_ms: CLOCK_MONOTONIC in ms, the clock of
 * fw_lkey.expires_ms.
 */
int64_t		 fw_mono_ms(void);
struct fw_sbx	*fw_idx_find(struct fw *fw, const char *ifname);
void		 fw_idx_drop(struct fw *fw, const char *ifname);
void		 fw_idx_clear(struct fw *fw);
int		 fw_idx_rebuild(struct fw *fw);
void		 fw_idx_commit(struct fw *fw, const char *ifname,
		    struct fw_rawvec *rv, int quota);
void		 fw_idx_learned(struct fw *fw, const struct fw_elem *e,
		    size_t n, int unlearn);
int		 fw_sbx_has_set(const struct fw_sbx *x, const char *name);
void		 fw_sbx_raw_forget(struct fw_sbx *x, const char *const *names);
struct fw_lkey	*fw_lk_find(struct fw_sbx *x, const struct fw_lkey *k);
int		 fw_lk_rehash(struct fw_sbx *x, size_t cap, int64_t before);
void		 fw_lk_of_elem(const struct fw_elem *e, struct fw_lkey *k,
		    int64_t now);

/* fw_gate.c: the gate's rules. fw_gate_forward: the forward chain's
 * rules before the dispatch (the gate's marks into labels, the reset of
 * denied flows, the queue of undecided ones). fw_gate_learned: in a
 * sandbox chain, the TCP flows a learned lookup (set, or role of the
 * sandbox's set when set is NULL) accepts are labelled and queued
 * instead (insert: at the chain's head, as the restriction is). -1 (ENOMEM) on failure. */
int		 fw_gate_forward(struct fw_batch *b, const char *table,
		    uint16_t queue);
int		 fw_gate_learned(struct fw_batch *b, const char *table,
		    const char *chain, const char *set, int six,
		    uint32_t role, int v6, int insert);
void		 fw_e_role(struct fw_rb *rb, const char *set, int six,
		    uint32_t role, int ports);
void		 fw_e_role_key(struct fw_rb *rb, int six, uint32_t role,
		    int ports);
/* fw_e_gate_unmarked: matches a packet that carries none of the gate's
 * verdict marks, i.e. one on its first pass through the forward hook
 * (not reinjected by the gate with NF_REPEAT), so that byte counters
 * count each packet once. Uses NFT_REG32_04. */
void		 fw_e_gate_unmarked(struct fw_rb *rb);

/*
 * fw_budget.c: the byte budgets of single rules (see there). Per sandbox
 * with budgets: map b_<ifname> (its set's key : the flow's budget label)
 * and objref map bq_<ifname> (label : quota object b<k>_<ifname>), and
 * the taint budget's object t_<ifname>. fw_budget_queue_sets: the maps,
 * objects and bq elements of sb (before its chain's rules);
 * fw_budget_queue_rules: the two rules that label a new flow and count
 * its packets (insert: at the chain's head); fw_budget_queue_statics:
 * the b elements of the budgeted allows; fw_budget_learn_queue: those of
 * learned elements with a budget (NEW, DEL or DESTROY as type);
 * fw_budget_queue_del: every budget object of ifname, after its chain
 * (destroy: DESTROY*, which nothing missing fails; else DEL of what
 * fw_budget_probe found: a bit per object, FW_BUDGET_P_*). -1 (ENOMEM).
 */
#define FW_BUDGET_LABEL0	104	/* budget k is ct label bit 104 + k */
#define FW_BUDGET_P_MAPS	(1u << 31)
#define FW_BUDGET_P_TAINT	(1u << 30)
extern const struct fw_setdef fw_budget_mapdef, fw_budget_qmapdef;
int		 fw_budget_queue_sets(struct fw_batch *b, struct fw *fw,
		    const struct fw_sandbox *sb, int create);
int		 fw_budget_queue_rules(struct fw_batch *b, const char *table,
		    const char *ifname, int v6, int insert);
int		 fw_budget_queue_statics(struct fw_batch *b, struct fw *fw,
		    const char *ifname, const struct fw_rule *r, size_t n,
		    uint16_t type);
int		 fw_budget_learn_queue(struct fw_batch *b, struct fw *fw,
		    const struct fw_elem *e, size_t n, uint16_t type);
int		 fw_budget_queue_del(struct fw_batch *b, struct fw *fw,
		    const char *ifname, int destroy, uint32_t found);
uint32_t	 fw_budget_probe(struct fw *fw, const char *ifname);
/* fw_quota_obj_del: queues the DELOBJ or DESTROYOBJ (type) of quota
 * object name. -1 (ENOMEM). */
int		 fw_quota_obj_del(struct fw_batch *b, const char *table,
		    const char *name, uint16_t type);
int		 fw_budget_queue_taint(struct fw_batch *b, struct fw *fw,
		    const char *ifname, uint64_t bytes, int has_maps, int v6);
/* fw_budget_dump: ifname's b map (NULL with errno, ENOENT: it has none);
 * fw_budget_queue_update: in fw_sandbox_update's batch, the budgeted
 * statics of old (that dump, NULL: none) replaced by allow's and the
 * objects sized as sb says (made, with the maps and rules, if old is
 * NULL and sb has budgets). */
struct nftnl_set *fw_budget_dump(struct fw *fw, const char *ifname);
int		 fw_budget_queue_update(struct fw_batch *b, struct fw *fw,
		    const struct fw_sandbox *sb, const struct fw_rule *allow,
		    size_t nallow, struct nftnl_set *old, int v6);
int		 fw_budget_check_rules(const struct fw_sandbox *sb,
		    const struct fw_rule *r, size_t n);

/* fw_learn.c: fw_learn_queue queues the learned elements e[0..n) as
 * messages of type (see there); the probes find out, once per handle,
 * fw->refresh and fw->destroy. */
int		 fw_learn_queue(struct fw_batch *b, struct fw *fw,
		    const struct fw_elem *e, size_t n, uint16_t type,
		    int keep_all);
void		 fw_probe_refresh(struct fw *fw);
void		 fw_probe_destroy(struct fw *fw);

/*
 * fw_dump.c: fw_dump_set dumps the elements of a set of the handle's
 * table into a new nftnl_set (caller frees; NULL with errno), which
 * fw_each_elem walks (until fn returns non-zero). fw_key_has_ifname: does
 * the element's key start with ifname (NULL: any)? fw_elem_role: the role
 * of a per-sandbox set element (0 if the key is not ours). fw_del_roles:
 * an fw_each_elem callback queuing into ctx->q the deletion of the
 * interval elements whose role ctx->want takes.
 */
struct fw_rdel_ctx {
	struct fw_eq	*q;
	int		(*want)(uint32_t);
};

struct nftnl_set	*fw_dump_set(struct fw *fw, const char *set);
void		 fw_each_elem(struct nftnl_set *s,
		    int (*fn)(struct nftnl_set_elem *, void *), void *arg);
int		 fw_key_has_ifname(struct nftnl_set_elem *e,
		    const char *ifname);
uint32_t	 fw_elem_role(struct nftnl_set_elem *e);
int		 fw_del_roles(struct nftnl_set_elem *e, void *arg);

#endif /* SLUICE_NETNS_FW_INT_H */
