/*
 * fw_sandbox.c: a sandbox's place in the table, made, changed and removed.
 *
 * Why this file exists: registering a sandbox writes many things at once:
 * its anti-spoofing entries, its generation, its own set and chain (with
 * the rules of fw_rules.c), its static rules as elements (encoded by
 * fw_elem.c), its quota object and, last, the dispatch entry that makes
 * the chain live; removing it must take all of that away again, with what
 * it learned. Each public call here is one netlink batch (fw_sandbox_del
 * of a sandbox with many learned destinations excepted, see there), so a
 * sandbox appears, changes or disappears atomically. Removal goes by key
 * through the per-ifname index (fw_index.c) where it can, and through
 * dumps of the shared sets (fw_dump.c) where it cannot.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnftnl/chain.h>
#include <libnftnl/object.h>
#include <libnftnl/set.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

/* ------------------------------------------------------------------ add */

/*
 * Checks a sandbox's static rules and brings them to the form the kernel
 * takes: allows split into public (first) and private groups, each
 * normalised alone; denies as bare CIDRs. *al and *dn are malloc'ed (the
 * caller frees both, also on failure). -1 with errno and err.
 */
static int
statics_prepare(struct fw *fw, const char *what, const struct fw_rule *allow,
    size_t nallow, const struct fw_rule *deny, size_t ndeny,
    struct fw_rule **al, size_t *nal, struct fw_rule **dn, size_t *ndn,
    char *err, size_t errlen)
{
	struct fw_rule	*tmp;
	size_t		 i, npub;
	uint8_t		 lo[16], hi[16];

	*al = *dn = NULL;
	*nal = *ndn = 0;
	if ((nallow > 0 && allow == NULL) || (ndeny > 0 && deny == NULL) ||
	    nallow > FW_MAX_RULES || ndeny > FW_MAX_RULES) {
		errno = EINVAL;
		fw_seterr(err, errlen, "%s: invalid arguments", what);
		return -1;
	}
	for (i = 0; i < nallow; i++)
		if (!fw_valid_rule(&allow[i], 1)) {
			errno = EINVAL;
			fw_seterr(err, errlen, "%s: allow rule %zu invalid",
			    what, i);
			return -1;
		}
	for (i = 0; i < ndeny; i++)
		if (fw_cidr_range(deny[i].family, deny[i].addr,
		    deny[i].prefix, lo, hi) == -1) {
			errno = EINVAL;
			fw_seterr(err, errlen, "%s: deny rule %zu invalid",
			    what, i);
			return -1;
		}
	if ((*al = fw_rules_split(fw, allow, nallow, nal, &npub)) == NULL)
		goto oom;
	/* Denies are CIDRs only: drop proto/ports before normalizing. */
	if ((tmp = calloc(ndeny + 1, sizeof(*tmp))) == NULL)
		goto oom;
	for (i = 0; i < ndeny; i++) {
		tmp[i] = deny[i];
		tmp[i].proto = IPPROTO_TCP;
		tmp[i].port_lo = 0;
		tmp[i].port_hi = 65535;
	}
	*dn = fw_rules_normalize(tmp, ndeny, ndn);
	free(tmp);
	if (*dn == NULL)
		goto oom;
	return 0;
oom:
	errno = ENOMEM;
	fw_seterr(err, errlen, "%s: out of memory", what);
	return -1;
}

/* Queues the adds of a sandbox's static allow, private-allow, deny and ICMP
 * elements (from statics_prepare) into its set s_<ifname>, in b. -1
 * (ENOMEM) on failure; the caller aborts the batch. */
static int
statics_queue(struct fw *fw, struct fw_batch *b, const struct fw_sandbox *sb,
    const struct fw_rule *al, size_t nal, const struct fw_rule *dn,
    size_t ndn)
{
	struct fw_eq	 q;
	size_t		 i;
	int		 any_icmp = 0;
	char		 set[FW_NAMEMAX];

	fw_sbx_names(sb->ifname, set, NULL);
	fw_eq_init(&q, b, fw->table, set, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
	for (int six = 0; six <= 1; six++) {
		uint8_t fam = six ? AF_INET6 : AF_INET;

		for (i = 0; i < nal; i++)
			if (al[i].family == fam &&
			    al[i].proto != IPPROTO_ICMP)
				fw_add_rule_tuple(&q,
				    fw_rule_private(fw, &al[i]) ?
				    (six ? FW_R_PALLOW6 : FW_R_PALLOW4) :
				    (six ? FW_R_ALLOW6 : FW_R_ALLOW4), &al[i]);
		for (i = 0; i < ndn; i++)
			if (dn[i].family == fam)
				fw_add_rule_cidr(&q, six ? FW_R_DENY6 :
				    FW_R_DENY4, &dn[i]);
	}
	if (sb->icmp) {
		for (i = 0; i < nal; i++)
			if (al[i].proto == IPPROTO_ICMP) {
				fw_add_rule_cidr(&q, FW_R_ICMP4, &al[i]);
				any_icmp = 1;
			}
		/* ICMP allowed without a destination list: any address
		 * that the deny and private rules let through. */
		if (!any_icmp) {
			struct fw_rule all = { .family = AF_INET,
			    .prefix = 0, .proto = IPPROTO_ICMP };

			fw_add_rule_cidr(&q, FW_R_ICMP4, &all);
		}
	}
	return fw_eq_done(&q);
}

/* A message of one element of set, keyed k, for the caller to fill (*e)
 * and send with one_elem_send. NULL (ENOMEM) on failure. */
static struct nftnl_set *
one_elem(struct fw *fw, const char *set, const struct fw_key *k,
    struct nftnl_set_elem **e)
{
	struct nftnl_set	*s;

	if ((s = nftnl_set_alloc()) == NULL)
		return NULL;
	if ((*e = nftnl_set_elem_alloc()) == NULL) {
		nftnl_set_free(s);
		return NULL;
	}
	nftnl_set_set_str(s, NFTNL_SET_TABLE, fw->table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nftnl_set_elem_set(*e, NFTNL_SET_ELEM_KEY, k->b, (uint32_t)k->len);
	/* From here s owns *e. */
	nftnl_set_elem_add(s, *e);
	return s;
}

static void
one_elem_send(struct fw_batch *b, struct nftnl_set *s, uint16_t type,
    uint16_t flags)
{
	nftnl_set_elems_nlmsg_build_payload(fw_batch_hdr(b, type, flags), s);
	nftnl_set_free(s);
	fw_batch_next(b);
}

/* Queues the @sbx_dispatch entry "ifname : jump sb_<ifname>" (NEWSETELEM
 * with EXCL) or its removal (DESTROYSETELEM/DELSETELEM, key only). */
static int
dispatch_queue(struct fw *fw, struct fw_batch *b, const char *ifname,
    uint16_t type, struct fw_rawvec *rv)
{
	struct nftnl_set	*s;
	struct nftnl_set_elem	*e;
	struct fw_key		 k;
	char			 chain[FW_NAMEMAX];

	fw_sbx_names(ifname, NULL, chain);
	fw_key_init(&k, ifname);
	if ((s = one_elem(fw, "sbx_dispatch", &k, &e)) == NULL)
		return -1;
	if (type == NFT_MSG_NEWSETELEM) {
		nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, NFT_JUMP);
		nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain);
	}
	one_elem_send(b, s, type, type == NFT_MSG_NEWSETELEM ?
	    NLM_F_CREATE | NLM_F_EXCL : 0);
	if (rv != NULL)
		fw_rawvec_add(rv, fw_set_index("sbx_dispatch"), k.b, k.len,
		    NULL);
	return rv != NULL && rv->oom ? -1 : 0;
}

/* Queues sb's generation: "ifname : gen" in @sbx_gen (the mark its new
 * flows get) and "ifname . gen" in @sbx_own (what its established input
 * must carry), EXCL both, and notes them (and its @logmeter key) in rv.
 * The mark is a host-order u32, as ct mark is loaded. -1 (ENOMEM) on
 * failure. */
static int
gen_queue(struct fw *fw, struct fw_batch *b, const struct fw_sandbox *sb,
    struct fw_rawvec *rv)
{
	struct nftnl_set	*s;
	struct nftnl_set_elem	*e;
	struct fw_eq		 q;
	struct fw_key		 k;

	fw_key_init(&k, sb->ifname);
	if ((s = one_elem(fw, "sbx_gen", &k, &e)) == NULL)
		return -1;
	nftnl_set_elem_set(e, NFTNL_SET_ELEM_DATA, &sb->gen, 4);
	one_elem_send(b, s, NFT_MSG_NEWSETELEM, NLM_F_CREATE | NLM_F_EXCL);
	fw_rawvec_add(rv, fw_set_index("sbx_gen"), k.b, k.len, NULL);
	/* Its log meter entry is made by its first logged denial, not
	 * here; noted all the same, so that removal destroys it. */
	fw_rawvec_add(rv, fw_set_index("logmeter"), k.b, k.len, NULL);
	fw_eq_init(&q, b, fw->table, "sbx_own", NFT_MSG_NEWSETELEM,
	    NLM_F_CREATE | NLM_F_EXCL);
	q.rec = rv;
	fw_key_put(&k, &sb->gen, 4);
	fw_eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
	return fw_eq_done(&q);
}

/* Queues the quota object of sb (NEWOBJ with flags: NLM_F_EXCL to create,
 * plain NLM_F_CREATE to update one that exists, which keeps what it has
 * consumed) and, when elem, its map element. -1 (ENOMEM) on failure. */
static int
quota_queue(struct fw *fw, struct fw_batch *b, const struct fw_sandbox *sb,
    uint16_t flags, int elem, struct fw_rawvec *rv)
{
	struct nftnl_obj	*o;
	struct fw_eq		 q;
	struct fw_key		 k;
	char			 qname[32];

	snprintf(qname, sizeof(qname), "q_%s", sb->ifname);
	if ((o = nftnl_obj_alloc()) == NULL)
		return -1;
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, fw->table);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, qname);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_QUOTA);
	nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_INET);
	nftnl_obj_set_u64(o, NFTNL_OBJ_QUOTA_BYTES, sb->quota_bytes);
	nftnl_obj_set_u32(o, NFTNL_OBJ_QUOTA_FLAGS, NFT_QUOTA_F_INV);
	nftnl_obj_nlmsg_build_payload(fw_batch_hdr(b, NFT_MSG_NEWOBJ, flags),
	    o);
	nftnl_obj_free(o);
	fw_batch_next(b);
	if (!elem)
		return 0;
	fw_eq_init(&q, b, fw->table, "quota", NFT_MSG_NEWSETELEM,
	    NLM_F_CREATE | NLM_F_EXCL);
	q.rec = rv;
	fw_key_init(&k, sb->ifname);
	fw_eq_add(&q, k.b, k.len, NULL, 0, 0, qname);
	return fw_eq_done(&q);
}

int
fw_sandbox_add(struct fw *fw, const struct fw_sandbox *sb,
    const struct fw_rule *allow, size_t nallow, const struct fw_rule *deny,
    size_t ndeny, char *err, size_t errlen)
{
	struct fw_batch		 b;
	struct fw_eq		 q;
	struct fw_key		 k;
	struct fw_rawvec	 rv = { NULL, 0, 0, 0 };
	struct fw_rule		*al = NULL, *dn = NULL;
	size_t			 nal = 0, ndn = 0;
	int			 ret = -1;

	if (fw == NULL || sb == NULL || !fw_valid_ifname(sb->ifname) ||
	    sb->gen == 0) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_sandbox_add: invalid arguments");
		return -1;
	}
	if (fw_budget_check_rules(sb, allow, nallow) == -1) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_sandbox_add: bad budgets (more than "
		    "%d, an empty one, a rule naming none, an icmp rule, or "
		    "two budgeted rules on one destination)", FW_MAX_BUDGETS);
		return -1;
	}
	if (statics_prepare(fw, "fw_sandbox_add", allow, nallow, deny, ndeny,
	    &al, &nal, &dn, &ndn, err, errlen) == -1) {
		free(al);
		free(dn);
		return -1;
	}
	if (fw_batch_begin(fw, &b) == -1)
		goto oom;

	/* EXCL on the anti-spoofing entry: registering twice is an error. */
	fw_eq_init(&q, &b, fw->table, "sbx4", NFT_MSG_NEWSETELEM,
	    NLM_F_CREATE | NLM_F_EXCL);
	q.rec = &rv;
	fw_key_init(&k, sb->ifname);
	fw_key_put(&k, sb->addr4, 4);
	fw_eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
	if (fw_eq_done(&q) == -1)
		goto oomb;
	if (sb->has_addr6) {
		fw_eq_init(&q, &b, fw->table, "sbx6", NFT_MSG_NEWSETELEM,
		    NLM_F_CREATE | NLM_F_EXCL);
		q.rec = &rv;
		fw_key_init(&k, sb->ifname);
		fw_key_put(&k, sb->addr6, 16);
		fw_eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
		if (fw_eq_done(&q) == -1)
			goto oomb;
	}
	if (gen_queue(fw, &b, sb, &rv) == -1)
		goto oomb;
	/* Its set, chain and rules, the elements, the quota, and last the
	 * dispatch entry: the chain is reachable only once complete (and
	 * the whole batch commits or nothing does anyway). */
	if ((sb->nbudgets > 0 && fw_budget_queue_sets(&b, fw, sb, 1) == -1) ||
	    fw_sbx_queue_objects(&b, fw->table, sb->ifname, sb->gen,
	    sb->has_addr6 != 0, sb->nbudgets > 0) == -1 ||
	    statics_queue(fw, &b, sb, al, nal, dn, ndn) == -1 ||
	    (sb->nbudgets > 0 && fw_budget_queue_statics(&b, fw, sb->ifname,
	    allow, nallow, NFT_MSG_NEWSETELEM) == -1))
		goto oomb;
	if (sb->quota_bytes > 0 && quota_queue(fw, &b, sb, NLM_F_CREATE |
	    NLM_F_EXCL, 1, &rv) == -1)
		goto oomb;
	if (dispatch_queue(fw, &b, sb->ifname, NFT_MSG_NEWSETELEM, &rv) == -1)
		goto oomb;
	ret = fw_batch_commit(&b, "fw_sandbox_add", err, errlen);
	if (ret == 0)
		fw_idx_commit(fw, sb->ifname, &rv, sb->quota_bytes > 0);
	free(rv.v);
	free(al);
	free(dn);
	return ret;
oomb:
	fw_batch_abort(&b);
oom:
	free(rv.v);
	free(al);
	free(dn);
	errno = ENOMEM;
	fw_seterr(err, errlen, "fw_sandbox_add: out of memory");
	return -1;
}

/* -------------------------------------------------------------- removal */

struct del_ctx {
	const char	*ifname;
	struct fw_eq	*q;
	int		 found;
};

static int
del_one(struct nftnl_set_elem *e, void *arg)
{
	struct del_ctx	*c = arg;
	const void	*key, *kend;
	uint32_t	 klen = 0, elen = 0;

	if (!fw_key_has_ifname(e, c->ifname))
		return 0;
	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	kend = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END) ?
	    nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &elen) : NULL;
	if (key == NULL || klen > FW_KEYMAX || (kend != NULL && elen != klen))
		return 0;
	fw_eq_add(c->q, key, klen, kend, 0, 0, NULL);
	c->found++;
	return 0;
}

/* 1 if sandbox ifname's chain exists, 0 if not, -1 on error. */
static int
chain_exists(struct fw *fw, const char *ifname)
{
	struct nftnl_chain	*c;
	struct nlmsghdr		*nlh;
	char			 chain[FW_NAMEMAX];

	fw_sbx_names(ifname, NULL, chain);
	if ((c = nftnl_chain_alloc()) == NULL)
		return -1;
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, fw->table);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, chain);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETCHAIN, NFPROTO_INET,
	    NLM_F_ACK, fw->seq++);
	nftnl_chain_nlmsg_build_payload(nlh, c);
	nftnl_chain_free(c);
	if (fw_request(fw, nlh, NULL, NULL) == 0)
		return 1;
	return errno == ENOENT ? 0 : -1;
}

/* Queues the removal of ifname's chain (its rules with it) and set (its
 * elements with it), after the dispatch entry that jumps to the chain:
 * DESTROY, which no missing object fails, when destroy, else DEL. */
static int
objects_del_queue(struct fw *fw, struct fw_batch *b, const char *ifname,
    int destroy, uint32_t budgets)
{
	struct nftnl_chain	*c;
	struct nftnl_set	*s;
	char			 set[FW_NAMEMAX], chain[FW_NAMEMAX];

	fw_sbx_names(ifname, set, chain);
	if ((c = nftnl_chain_alloc()) == NULL)
		return -1;
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, fw->table);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, chain);
	nftnl_chain_nlmsg_build_payload(fw_batch_hdr(b, destroy ?
	    NFT_MSG_DESTROYCHAIN : NFT_MSG_DELCHAIN, 0), c);
	nftnl_chain_free(c);
	fw_batch_next(b);
	if ((s = nftnl_set_alloc()) == NULL)
		return -1;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, fw->table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nftnl_set_nlmsg_build_payload(fw_batch_hdr(b, destroy ?
	    NFT_MSG_DESTROYSET : NFT_MSG_DELSET, 0), s);
	nftnl_set_free(s);
	fw_batch_next(b);
	/* Then the budgets' maps and objects, which the chain's rules
	 * referenced: all of them by name with DESTROY (a fixed, small
	 * number), else what fw_budget_probe found. */
	return fw_budget_queue_del(b, fw, ifname, destroy, budgets);
}

/* Queues a DESTROYOBJ (or DELOBJ) of ifname's quota object. */
static int
quota_obj_del(struct fw *fw, struct fw_batch *b, const char *ifname,
    uint16_t type)
{
	char			 qname[32];

	snprintf(qname, sizeof(qname), "q_%s", ifname);
	return fw_quota_obj_del(b, fw->table, qname, type);
}

/* fw_sandbox_del the old way: dump every per-sandbox set and delete what
 * is keyed on the name. For handles without a valid index and kernels
 * without DESTROYSETELEM; its cost grows with everything in the table. */
static int
sandbox_del_dump(struct fw *fw, const struct fw_sandbox *sb, char *err,
    size_t errlen)
{
	struct fw_batch		 b;
	const struct fw_setdef	*d;
	struct nftnl_set	*dumps[32];
	struct fw_eq		 q;
	struct del_ctx		 c;
	size_t			 nd = 0, i;
	int			 quota_found = 0, ret = -1, has_chain;
	uint32_t		 budgets;

	if (fw == NULL || sb == NULL || !fw_valid_ifname(sb->ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_sandbox_del: invalid arguments");
		return -1;
	}
	/* Read every per-sandbox set (and whether its chain exists) first,
	 * then delete in one batch. */
	has_chain = fw->destroy == FW_DESTROY_YES ||
	    chain_exists(fw, sb->ifname) != 0;
	budgets = fw->destroy == FW_DESTROY_YES ? 0 :
	    fw_budget_probe(fw, sb->ifname);
	for (d = fw_sets; d->name != NULL && nd < 32; d++) {
		if (!d->persistent)
			continue;
		if ((dumps[nd] = fw_dump_set(fw, d->name)) == NULL) {
			fw_seterr(err, errlen, "fw_sandbox_del: dump %s: %s",
			    d->name, strerror(errno));
			goto out;
		}
		nd++;
	}
	if (fw_batch_begin(fw, &b) == -1) {
		fw_seterr(err, errlen, "fw_sandbox_del: %s", strerror(errno));
		goto out;
	}
	for (d = fw_sets, i = 0; d->name != NULL && i < nd; d++) {
		if (!d->persistent)
			continue;
		fw_eq_init(&q, &b, fw->table, d->name, NFT_MSG_DELSETELEM, 0);
		c.ifname = sb->ifname;
		c.q = &q;
		c.found = 0;
		fw_each_elem(dumps[i], del_one, &c);
		if (fw_eq_done(&q) == -1) {
			fw_batch_abort(&b);
			fw_seterr(err, errlen, "fw_sandbox_del: out of memory");
			goto out;
		}
		if (strcmp(d->name, "quota") == 0)
			quota_found = c.found;
		i++;
	}
	/* The object goes after the map element that references it. */
	if (quota_found &&
	    quota_obj_del(fw, &b, sb->ifname, NFT_MSG_DELOBJ) == -1) {
		fw_batch_abort(&b);
		errno = ENOMEM;
		fw_seterr(err, errlen, "fw_sandbox_del: out of memory");
		goto out;
	}
	/* Its chain and set: DESTROY where the kernel has it; else DEL,
	 * only if the chain is there (both are made in one batch). */
	if ((has_chain || budgets != 0) && objects_del_queue(fw, &b,
	    sb->ifname, fw->destroy == FW_DESTROY_YES, budgets) == -1) {
		fw_batch_abort(&b);
		errno = ENOMEM;
		fw_seterr(err, errlen, "fw_sandbox_del: out of memory");
		goto out;
	}
	ret = fw_batch_commit(&b, "fw_sandbox_del", err, errlen);
	if (ret == 0 && fw->idx_valid)
		fw_idx_drop(fw, sb->ifname);
out:
	for (i = 0; i < nd; i++)
		nftnl_set_free(dumps[i]);
	return ret;
}

/* Queues DESTROYSETELEM for x's raw elements of every set but the quota
 * map, then the quota map element and object (the object goes after the
 * element that references it). */
static int
raw_queue_destroy(struct fw *fw, struct fw_batch *b, const struct fw_sbx *x)
{
	const struct fw_setdef	*d;
	struct fw_eq		 q;
	size_t			 i, klen;
	int			 set, quota = fw_set_index("quota");

	for (d = fw_sets; d->name != NULL; d++) {
		set = (int)(d - fw_sets);
		if (set == quota)
			continue;
		klen = fw_keylen(d);
		fw_eq_init(&q, b, fw->table, d->name, NFT_MSG_DESTROYSETELEM,
		    0);
		for (i = 0; i < x->nraw; i++)
			if (x->raw[i].set == set)
				fw_eq_add(&q, x->raw[i].key, klen,
				    x->raw[i].has_end ? x->raw[i].kend : NULL,
				    0, 0, NULL);
		if (fw_eq_done(&q) == -1)
			return -1;
	}
	for (i = 0; i < x->nraw; i++)
		if (x->raw[i].set == quota)
			break;
	if (i < x->nraw || x->quota) {
		struct fw_key k;

		fw_eq_init(&q, b, fw->table, "quota", NFT_MSG_DESTROYSETELEM,
		    0);
		fw_key_init(&k, x->ifname);
		fw_eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
		if (fw_eq_done(&q) == -1 ||
		    quota_obj_del(fw, b, x->ifname, NFT_MSG_DESTROYOBJ) == -1)
			return -1;
	}
	return 0;
}

/* fw_sandbox_del through the index: every key this handle knows for the
 * sandbox, destroyed by key (a learned element that expired meanwhile is
 * no error). One batch, unless the sandbox learned more than
 * FW_LEARN_CHUNK destinations: those go first in batches of their own
 * (removing allows only narrows), the rest last. */
static int
sandbox_del_idx(struct fw *fw, struct fw_sbx *x, char *err, size_t errlen)
{
	struct fw_batch	 b;
	struct fw_elem	*el = NULL;
	size_t		 n = 0, i, off;

	if (x->nlk > 0) {
		if ((el = calloc(x->nlk, sizeof(*el))) == NULL)
			goto oom;
		for (i = 0; i < x->lkcap; i++) {
			const struct fw_lkey *k = &x->lk[i];

			/* Learned port ranges live in the sandbox's own set
			 * and go with it. */
			if (!k->used || k->port_lo != k->port_hi)
				continue;
			memcpy(el[n].ifname, x->ifname, sizeof(el[n].ifname));
			el[n].family = k->family;
			memcpy(el[n].addr, k->addr, sizeof(el[n].addr));
			el[n].proto = k->proto;
			el[n].port_lo = k->port_lo;
			el[n].port_hi = k->port_hi;
			el[n].flags = k->keep ? FW_ELEM_KEEP : 0;
			n++;
		}
	}
	for (off = 0; ; off += FW_LEARN_CHUNK) {
		size_t m = n - off > FW_LEARN_CHUNK ? FW_LEARN_CHUNK : n - off;
		int last = off + m == n;

		if (fw_batch_begin(fw, &b) == -1) {
			fw_seterr(err, errlen, "fw_sandbox_del: %s",
			    strerror(errno));
			free(el);
			return -1;
		}
		if ((m > 0 && fw_learn_queue(&b, fw, el + off, m,
		    NFT_MSG_DESTROYSETELEM, 0) == -1) ||
		    (last && (raw_queue_destroy(fw, &b, x) == -1 ||
		    objects_del_queue(fw, &b, x->ifname, 1, 0) == -1))) {
			fw_batch_abort(&b);
			goto oom;
		}
		if (fw_batch_commit(&b, "fw_sandbox_del", err, errlen) == -1) {
			free(el);
			return -1;
		}
		if (last)
			break;
	}
	free(el);
	return 0;
oom:
	free(el);
	errno = ENOMEM;
	fw_seterr(err, errlen, "fw_sandbox_del: out of memory");
	return -1;
}

int
fw_sandbox_del(struct fw *fw, const struct fw_sandbox *sb, char *err,
    size_t errlen)
{
	struct fw_sbx	*x;

	if (fw == NULL || sb == NULL || !fw_valid_ifname(sb->ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_sandbox_del: invalid arguments");
		return -1;
	}
	if (fw->destroy == FW_DESTROY_UNKNOWN)
		fw_probe_destroy(fw);
	if (!fw->idx_valid || fw->destroy != FW_DESTROY_YES)
		return sandbox_del_dump(fw, sb, err, errlen);
	/* Nothing known for this name: nothing of it is in the table (the
	 * index holds everything added since fw_init, and what adoption
	 * found), which is not an error. */
	if ((x = fw_idx_find(fw, sb->ifname)) == NULL)
		return 0;
	if (sandbox_del_idx(fw, x, err, errlen) == -1)
		return -1;
	fw_idx_drop(fw, sb->ifname);
	return 0;
}

/* --------------------------------------------------------------- update */

static int
keyed_one(struct nftnl_set_elem *e, void *arg)
{
	struct del_ctx	*c = arg;

	if (fw_key_has_ifname(e, c->ifname))
		c->found++;
	return 0;
}

/* Elements of set keyed on ifname, or -1 with errno. */
static int
count_keyed(struct fw *fw, const char *set, const char *ifname)
{
	struct nftnl_set	*s;
	struct del_ctx		 c = { .ifname = ifname };

	if ((s = fw_dump_set(fw, set)) == NULL)
		return -1;
	fw_each_elem(s, keyed_one, &c);
	nftnl_set_free(s);
	return c.found;
}

/* The roles a policy's static rules give a sandbox, as opposed to what it
 * learned or was narrowed to. */
static int
role_static(uint32_t role)
{
	return role == FW_R_ALLOW4 || role == FW_R_ALLOW6 ||
	    role == FW_R_PALLOW4 || role == FW_R_PALLOW6 ||
	    role == FW_R_DENY4 || role == FW_R_DENY6 || role == FW_R_ICMP4;
}

int
fw_sandbox_update(struct fw *fw, const struct fw_sandbox *sb,
    const struct fw_rule *allow, size_t nallow, const struct fw_rule *deny,
    size_t ndeny, char *err, size_t errlen)
{
	struct fw_batch		 b;
	struct nftnl_set	*old = NULL, *bold = NULL;
	struct fw_rule		*al = NULL, *dn = NULL;
	struct fw_eq		 q;
	struct fw_rdel_ctx	 dc;
	struct fw_key		 k;
	struct fw_rawvec	 rv = { NULL, 0, 0, 0 };
	struct fw_sbx		*x = NULL;
	size_t			 nal = 0, ndn = 0;
	int			 nreg, nquota, ret = -1, byidx;
	char			 set[FW_NAMEMAX];

	if (fw == NULL || sb == NULL || !fw_valid_ifname(sb->ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_sandbox_update: invalid arguments");
		return -1;
	}
	if (statics_prepare(fw, "fw_sandbox_update", allow, nallow, deny,
	    ndeny, &al, &nal, &dn, &ndn, err, errlen) == -1)
		goto out;
	/* With the index, registration and quota are known without dumps
	 * of the shared sets, whose cost grows with the other sandboxes. */
	byidx = fw->idx_valid;
	if (byidx) {
		x = fw_idx_find(fw, sb->ifname);
		nreg = fw_sbx_has_set(x, "sbx4");
		nquota = x != NULL && x->quota;
	}
	/* Only a registered sandbox: statics for a link nobody registered
	 * would be allows without the anti-spoofing entry they rely on. */
	if (byidx)
		;
	else if ((nreg = count_keyed(fw, "sbx4", sb->ifname)) == -1 ||
	    (nquota = count_keyed(fw, "quota", sb->ifname)) == -1) {
		fw_seterr(err, errlen, "fw_sandbox_update: dump: %s",
		    strerror(errno));
		goto out;
	}
	if (nreg == 0) {
		errno = ENOENT;
		fw_seterr(err, errlen, "fw_sandbox_update: %s is not "
		    "registered", sb->ifname);
		goto out;
	}
	if (fw_budget_check_rules(sb, allow, nallow) == -1) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_sandbox_update: bad budgets");
		goto out;
	}
	/* The budgeted statics, when the sandbox has budgets already. */
	if ((bold = fw_budget_dump(fw, sb->ifname)) == NULL &&
	    errno != ENOENT) {
		fw_seterr(err, errlen, "fw_sandbox_update: dump budgets: %s",
		    strerror(errno));
		goto out;
	}
	/* The old statics: one dump of the sandbox's own small set. */
	fw_sbx_names(sb->ifname, set, NULL);
	if ((old = fw_dump_set(fw, set)) == NULL) {
		fw_seterr(err, errlen, "fw_sandbox_update: dump %s: %s", set,
		    strerror(errno));
		goto out;
	}
	if (fw_batch_begin(fw, &b) == -1) {
		fw_seterr(err, errlen, "fw_sandbox_update: %s",
		    strerror(errno));
		goto out;
	}
	/* Old statics out and new ones in, in one batch: no packet ever
	 * sees the sandbox with neither (or with both). Learned ranges and
	 * keep elements in the same set, and everything in the shared
	 * sets, are not touched. */
	fw_eq_init(&q, &b, fw->table, set, NFT_MSG_DELSETELEM, 0);
	dc.q = &q;
	dc.want = role_static;
	fw_each_elem(old, fw_del_roles, &dc);
	if (fw_eq_done(&q) == -1)
		goto oomb;
	if (statics_queue(fw, &b, sb, al, nal, dn, ndn) == -1 ||
	    fw_budget_queue_update(&b, fw, sb, allow, nallow, bold,
	    sb->has_addr6 != 0) == -1)
		goto oomb;
	if (sb->quota_bytes > 0) {
		/* An existing quota is updated in place, so a new budget
		 * does not forget the bytes already spent. */
		if (quota_queue(fw, &b, sb, nquota > 0 ? NLM_F_CREATE :
		    NLM_F_CREATE | NLM_F_EXCL, nquota == 0, &rv) == -1)
			goto oomb;
	} else if (nquota > 0) {
		fw_eq_init(&q, &b, fw->table, "quota", NFT_MSG_DELSETELEM, 0);
		fw_key_init(&k, sb->ifname);
		fw_eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
		if (fw_eq_done(&q) == -1)
			goto oomb;
		if (quota_obj_del(fw, &b, sb->ifname, NFT_MSG_DELOBJ) == -1)
			goto oomb;
	}
	ret = fw_batch_commit(&b, "fw_sandbox_update", err, errlen);
	if (ret == 0 && byidx && fw->idx_valid) {
		static const char *const gone[] = { "quota", NULL };

		if (sb->quota_bytes == 0)
			fw_sbx_raw_forget(x, gone);
		fw_idx_commit(fw, sb->ifname, &rv, sb->quota_bytes > 0);
	}
	goto out;
oomb:
	fw_batch_abort(&b);
	errno = ENOMEM;
	fw_seterr(err, errlen, "fw_sandbox_update: out of memory");
out:
	free(rv.v);
	if (old != NULL)
		nftnl_set_free(old);
	if (bold != NULL)
		nftnl_set_free(bold);
	free(al);
	free(dn);
	return ret;
}
