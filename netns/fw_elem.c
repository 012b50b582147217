/*
 * fw_elem.c: per-sandbox state as set elements.
 *
 * Why this file exists: the rules written by fw.c never change while the
 * daemon runs; what a sandbox may reach is entirely in set elements, and this
 * file is the only place that encodes them. Every public call here is one
 * netlink batch, so a sandbox appears, learns, narrows or disappears
 * atomically, and the DNS proxy's fw_learn returns only once the kernel has
 * committed the elements (the answer is released after that, never before).
 *
 * Key layout (each field padded to 4 bytes, as nft registers are):
 * ifname[16] . addr[4|16] . l4proto[1+3] . port[2+2] (network order).
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/object.h>
#include <libnftnl/set.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

/* ----------------------------------------------------------- addresses */

int
fw_cidr_range(uint8_t family, const uint8_t *addr, uint8_t prefix,
    uint8_t lo[16], uint8_t hi[16])
{
	size_t	alen, i;
	int	bits;

	if (family == AF_INET)
		alen = 4;
	else if (family == AF_INET6)
		alen = 16;
	else {
		errno = EINVAL;
		return -1;
	}
	if (prefix > alen * 8) {
		errno = EINVAL;
		return -1;
	}
	memset(lo, 0, 16);
	memset(hi, 0, 16);
	for (i = 0; i < alen; i++) {
		bits = (int)prefix - (int)(i * 8);
		uint8_t m = bits >= 8 ? 0xff : bits <= 0 ? 0 :
		    (uint8_t)(0xff << (8 - bits));
		lo[i] = addr[i] & m;
		hi[i] = addr[i] | (uint8_t)~m;
	}
	return 0;
}

/* a + 1 over alen big-endian bytes; returns 1 on overflow (a was ~0). */
static int
addr_inc(uint8_t *a, size_t alen)
{
	size_t	i = alen;

	while (i-- > 0)
		if (++a[i] != 0)
			return 0;
	return 1;
}

static int
range_cmp(const void *x, const void *y, void *alen)
{
	return memcmp(((const struct fw_range *)x)->lo,
	    ((const struct fw_range *)y)->lo, *(size_t *)alen);
}

/* ------------------------------------------------------- element queue */

/* Collects elements for one set and cuts them into messages of
 * FW_ELEMS_PER_MSG, all in the caller's batch. */
struct eq {
	struct fw_batch		*b;
	const char		*table, *set;
	struct nftnl_set	*s;
	uint16_t		 type, flags;
	int			 n, oom;
};

static void
eq_flush(struct eq *q)
{
	if (q->s == NULL)
		return;
	if (q->n > 0) {
		nftnl_set_elems_nlmsg_build_payload(fw_batch_hdr(q->b,
		    q->type, q->flags), q->s);
		fw_batch_next(q->b);
	}
	nftnl_set_free(q->s);
	q->s = NULL;
	q->n = 0;
}

static void
eq_init(struct eq *q, struct fw_batch *b, const char *table, const char *set,
    uint16_t type, uint16_t flags)
{
	memset(q, 0, sizeof(*q));
	q->b = b;
	q->table = table;
	q->set = set;
	q->type = type;
	q->flags = flags;
}

/* Adds one element; keyend may be NULL. timeout_ms 0 = none. */
static void
eq_add(struct eq *q, const void *key, size_t klen, const void *keyend,
    uint32_t eflags, uint64_t timeout_ms, const char *objref)
{
	struct nftnl_set_elem	*e;

	if (q->s == NULL) {
		if ((q->s = nftnl_set_alloc()) == NULL) {
			q->oom = 1;
			return;
		}
		nftnl_set_set_str(q->s, NFTNL_SET_TABLE, q->table);
		nftnl_set_set_str(q->s, NFTNL_SET_NAME, q->set);
	}
	if ((e = nftnl_set_elem_alloc()) == NULL) {
		q->oom = 1;
		return;
	}
	nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, (uint32_t)klen);
	if (keyend != NULL)
		nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY_END, keyend,
		    (uint32_t)klen);
	if (eflags != 0)
		nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_FLAGS, eflags);
	if (timeout_ms != 0)
		nftnl_set_elem_set_u64(e, NFTNL_SET_ELEM_TIMEOUT, timeout_ms);
	if (objref != NULL)
		nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_OBJREF, objref);
	/* From here the set owns e. */
	nftnl_set_elem_add(q->s, e);
	if (++q->n >= FW_ELEMS_PER_MSG)
		eq_flush(q);
}

static int
eq_done(struct eq *q)
{
	eq_flush(q);
	if (q->oom) {
		q->b->overflow = 1;
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* -------------------------------------------------------------- ranges */

int
fw_add_intervals(struct fw_batch *b, const char *table, const char *set,
    size_t alen, struct fw_range *r, size_t n)
{
	struct eq	 q;
	size_t		 i, m = 0;
	uint8_t		 next[16];

	if (n == 0)
		return 0;
	qsort_r(r, n, sizeof(*r), range_cmp, &alen);
	/* Merge overlapping and adjacent ranges in place. */
	for (i = 1; i < n; i++) {
		memcpy(next, r[m].hi, alen);
		if (addr_inc(next, alen) ||
		    memcmp(r[i].lo, next, alen) <= 0) {
			if (memcmp(r[i].hi, r[m].hi, alen) > 0)
				memcpy(r[m].hi, r[i].hi, alen);
		} else
			r[++m] = r[i];
	}
	eq_init(&q, b, table, set, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
	for (i = 0; i <= m; i++) {
		/* The rbtree encoding: a start element, and an end element
		 * one past the range (none when the range reaches the top). */
		eq_add(&q, r[i].lo, alen, NULL, 0, 0, NULL);
		memcpy(next, r[i].hi, alen);
		if (!addr_inc(next, alen))
			eq_add(&q, next, alen, NULL, NFT_SET_ELEM_INTERVAL_END,
			    0, NULL);
	}
	return eq_done(&q);
}

/* ----------------------------------------------------------------- keys */

static int
valid_ifname(const char *ifname)
{
	size_t	len;

	if (ifname == NULL)
		return 0;
	len = strnlen(ifname, FW_IFNAMSIZ);
	if (len >= FW_IFNAMSIZ || len <= sizeof(FW_IFPREFIX) - 1)
		return 0;
	return strncmp(ifname, FW_IFPREFIX, sizeof(FW_IFPREFIX) - 1) == 0;
}

struct key {
	uint8_t	b[FW_KEYMAX];
	size_t	len;
};

static void
key_init(struct key *k, const char *ifname)
{
	memset(k, 0, sizeof(*k));
	memcpy(k->b, ifname, strnlen(ifname, FW_IFNAMSIZ - 1));
	k->len = FW_IFNAMSIZ;
}

static void
key_put(struct key *k, const void *p, size_t n)
{
	memcpy(k->b + k->len, p, n);
	k->len += (n + 3) & ~(size_t)3;
}

static void
key_tuple(struct key *k, const char *ifname, const uint8_t *addr,
    size_t alen, uint8_t proto, uint16_t port)
{
	uint16_t	be = htons(port);

	key_init(k, ifname);
	key_put(k, addr, alen);
	key_put(k, &proto, 1);
	key_put(k, &be, 2);
}

static int
valid_rule(const struct fw_rule *r, int allow_icmp)
{
	uint8_t	lo[16], hi[16];

	if (fw_cidr_range(r->family, r->addr, r->prefix, lo, hi) == -1)
		return 0;
	if (r->proto == IPPROTO_ICMP)
		return allow_icmp && r->family == AF_INET;
	if (r->proto != IPPROTO_TCP && r->proto != IPPROTO_UDP)
		return 0;
	return r->port_lo <= r->port_hi;
}

/* Queues the interval element of a TCP/UDP rule into q (allow/keep sets). */
static void
add_rule_tuple(struct eq *q, const char *ifname, const struct fw_rule *r)
{
	struct key	klo, khi;
	uint8_t		lo[16], hi[16];
	size_t		alen = r->family == AF_INET ? 4 : 16;

	(void)fw_cidr_range(r->family, r->addr, r->prefix, lo, hi);
	key_tuple(&klo, ifname, lo, alen, r->proto, r->port_lo);
	key_tuple(&khi, ifname, hi, alen, r->proto, r->port_hi);
	eq_add(q, klo.b, klo.len, khi.b, 0, 0, NULL);
}

static void
add_rule_cidr(struct eq *q, const char *ifname, const struct fw_rule *r)
{
	struct key	klo, khi;
	uint8_t		lo[16], hi[16];
	size_t		alen = r->family == AF_INET ? 4 : 16;

	(void)fw_cidr_range(r->family, r->addr, r->prefix, lo, hi);
	key_init(&klo, ifname);
	key_put(&klo, lo, alen);
	key_init(&khi, ifname);
	key_put(&khi, hi, alen);
	eq_add(q, klo.b, klo.len, khi.b, 0, 0, NULL);
}

/* Is rule a inside rule b (same family and proto, CIDR and ports)? CIDRs
 * are nested or disjoint, which is what makes this test enough. */
static int
rule_within(const struct fw_rule *a, const struct fw_rule *b)
{
	uint8_t	alo[16], ahi[16], blo[16], bhi[16];
	size_t	alen = a->family == AF_INET ? 4 : 16;

	if (a->family != b->family || a->proto != b->proto ||
	    a->prefix < b->prefix)
		return 0;
	(void)fw_cidr_range(a->family, a->addr, a->prefix, alo, ahi);
	(void)fw_cidr_range(b->family, b->addr, b->prefix, blo, bhi);
	if (memcmp(alo, blo, alen) < 0 || memcmp(ahi, bhi, alen) > 0)
		return 0;
	if (a->proto == IPPROTO_ICMP)
		return 1;
	return a->port_lo >= b->port_lo && a->port_hi <= b->port_hi;
}

static int
same_cidr(const struct fw_rule *a, const struct fw_rule *b)
{
	uint8_t	alo[16], ahi[16], blo[16], bhi[16];

	if (a->family != b->family || a->proto != b->proto ||
	    a->prefix != b->prefix)
		return 0;
	(void)fw_cidr_range(a->family, a->addr, a->prefix, alo, ahi);
	(void)fw_cidr_range(b->family, b->addr, b->prefix, blo, bhi);
	return memcmp(alo, blo, 16) == 0;
}

/* Does rule r lie wholly inside one of the private ranges? */
static int
rule_private(const struct fw *fw, const struct fw_rule *r)
{
	struct fw_rule	p;
	size_t		i;

	for (i = 0; i < fw->npriv; i++) {
		memset(&p, 0, sizeof(p));
		p.family = fw->priv[i].family;
		memcpy(p.addr, fw->priv[i].addr, 16);
		p.prefix = fw->priv[i].prefix;
		p.proto = r->proto;
		p.port_lo = 0;
		p.port_hi = 65535;
		if (rule_within(r, &p))
			return 1;
	}
	return 0;
}

/* The kernel's pipapo sets refuse overlapping intervals, so rules covered by
 * another are dropped, and touching port ranges of the same CIDR are joined.
 * Partial overlaps across nested CIDRs remain and the kernel refuses them.
 * Returns a malloc'ed copy (caller frees) and its length in *outn. */
static struct fw_rule *
rules_normalize(const struct fw_rule *in, size_t n, size_t *outn)
{
	struct fw_rule	*r;
	size_t		 i, j, m, guard;
	int		 changed;

	if ((r = calloc(n + 1, sizeof(*r))) == NULL)
		return NULL;
	if (n > 0)
		memcpy(r, in, n * sizeof(*r));
	m = n;
	/* Each pass removes one rule, so n + 1 passes bound the loop. */
	for (guard = 0, changed = 1; changed && guard <= n; guard++) {
		changed = 0;
		for (i = 0; i < m && !changed; i++)
			for (j = 0; j < m && !changed; j++) {
				if (i == j)
					continue;
				if (rule_within(&r[i], &r[j])) {
					r[i] = r[--m];
					changed = 1;
				} else if (same_cidr(&r[i], &r[j]) &&
				    r[i].proto != IPPROTO_ICMP &&
				    (uint32_t)r[i].port_lo <=
				    (uint32_t)r[j].port_hi + 1 &&
				    (uint32_t)r[j].port_lo <=
				    (uint32_t)r[i].port_hi + 1) {
					if (r[i].port_lo < r[j].port_lo)
						r[j].port_lo = r[i].port_lo;
					if (r[i].port_hi > r[j].port_hi)
						r[j].port_hi = r[i].port_hi;
					r[i] = r[--m];
					changed = 1;
				}
			}
	}
	*outn = m;
	return r;
}

/* ------------------------------------------------------------- sandbox */

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
	struct fw_rule	*tmp, *pub, *prv;
	size_t		 i, n = 0, npubin, npub, nprv;
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
		if (!valid_rule(&allow[i], 1)) {
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
	/* Rules inside private ranges go to @pallow and must not be folded
	 * into a broader public rule, so each group is normalised alone:
	 * partition into tmp (public first, npubin of them), then normalise. */
	if ((tmp = calloc(nallow + 1, sizeof(*tmp))) == NULL)
		goto oom;
	for (i = 0; i < nallow; i++)
		if (allow[i].proto == IPPROTO_ICMP || !rule_private(fw,
		    &allow[i]))
			tmp[n++] = allow[i];
	npubin = n;
	for (i = 0; i < nallow; i++)
		if (allow[i].proto != IPPROTO_ICMP && rule_private(fw,
		    &allow[i]))
			tmp[n++] = allow[i];
	pub = rules_normalize(tmp, npubin, &npub);
	prv = rules_normalize(tmp + npubin, n - npubin, &nprv);
	free(tmp);
	if (pub == NULL || prv == NULL ||
	    (*al = calloc(npub + nprv + 1, sizeof(**al))) == NULL) {
		free(pub);
		free(prv);
		goto oom;
	}
	if (npub > 0)
		memcpy(*al, pub, npub * sizeof(**al));
	if (nprv > 0)
		memcpy(*al + npub, prv, nprv * sizeof(**al));
	*nal = npub + nprv;
	free(pub);
	free(prv);
	/* Denies are CIDRs only: drop proto/ports before normalizing. */
	if ((tmp = calloc(ndeny + 1, sizeof(*tmp))) == NULL)
		goto oom;
	for (i = 0; i < ndeny; i++) {
		tmp[i] = deny[i];
		tmp[i].proto = IPPROTO_TCP;
		tmp[i].port_lo = 0;
		tmp[i].port_hi = 65535;
	}
	*dn = rules_normalize(tmp, ndeny, ndn);
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
 * elements (from statics_prepare) into b. -1 (ENOMEM) on failure; the
 * caller aborts the batch. */
static int
statics_queue(struct fw *fw, struct fw_batch *b, const struct fw_sandbox *sb,
    const struct fw_rule *al, size_t nal, const struct fw_rule *dn,
    size_t ndn)
{
	struct eq	 q;
	size_t		 i;
	int		 any_icmp = 0;

	for (int six = 0; six <= 1; six++) {
		uint8_t fam = six ? AF_INET6 : AF_INET;

		eq_init(&q, b, fw->table, six ? "allow6" : "allow4",
		    NFT_MSG_NEWSETELEM, NLM_F_CREATE);
		for (i = 0; i < nal; i++)
			if (al[i].family == fam &&
			    al[i].proto != IPPROTO_ICMP &&
			    !rule_private(fw, &al[i]))
				add_rule_tuple(&q, sb->ifname, &al[i]);
		if (eq_done(&q) == -1)
			return -1;
		eq_init(&q, b, fw->table, six ? "pallow6" : "pallow4",
		    NFT_MSG_NEWSETELEM, NLM_F_CREATE);
		for (i = 0; i < nal; i++)
			if (al[i].family == fam &&
			    al[i].proto != IPPROTO_ICMP &&
			    rule_private(fw, &al[i]))
				add_rule_tuple(&q, sb->ifname, &al[i]);
		if (eq_done(&q) == -1)
			return -1;
		eq_init(&q, b, fw->table, six ? "sbx_deny6" : "sbx_deny4",
		    NFT_MSG_NEWSETELEM, NLM_F_CREATE);
		for (i = 0; i < ndn; i++)
			if (dn[i].family == fam)
				add_rule_cidr(&q, sb->ifname, &dn[i]);
		if (eq_done(&q) == -1)
			return -1;
	}
	if (sb->icmp) {
		eq_init(&q, b, fw->table, "icmp4", NFT_MSG_NEWSETELEM,
		    NLM_F_CREATE);
		for (i = 0; i < nal; i++)
			if (al[i].proto == IPPROTO_ICMP) {
				add_rule_cidr(&q, sb->ifname, &al[i]);
				any_icmp = 1;
			}
		/* ICMP allowed without a destination list: any address
		 * that the deny and private rules let through. */
		if (!any_icmp) {
			struct fw_rule all = { .family = AF_INET,
			    .prefix = 0, .proto = IPPROTO_ICMP };

			add_rule_cidr(&q, sb->ifname, &all);
		}
		if (eq_done(&q) == -1)
			return -1;
	}
	return 0;
}

/* Queues the quota object of sb (NEWOBJ with flags: NLM_F_EXCL to create,
 * plain NLM_F_CREATE to update one that exists, which keeps what it has
 * consumed) and, when elem, its map element. -1 (ENOMEM) on failure. */
static int
quota_queue(struct fw *fw, struct fw_batch *b, const struct fw_sandbox *sb,
    uint16_t flags, int elem)
{
	struct nftnl_obj	*o;
	struct eq		 q;
	struct key		 k;
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
	eq_init(&q, b, fw->table, "quota", NFT_MSG_NEWSETELEM,
	    NLM_F_CREATE | NLM_F_EXCL);
	key_init(&k, sb->ifname);
	eq_add(&q, k.b, k.len, NULL, 0, 0, qname);
	return eq_done(&q);
}

int
fw_sandbox_add(struct fw *fw, const struct fw_sandbox *sb,
    const struct fw_rule *allow, size_t nallow, const struct fw_rule *deny,
    size_t ndeny, char *err, size_t errlen)
{
	struct fw_batch		 b;
	struct eq		 q;
	struct key		 k;
	struct fw_rule		*al = NULL, *dn = NULL;
	size_t			 nal = 0, ndn = 0;
	int			 ret = -1;

	if (fw == NULL || sb == NULL || !valid_ifname(sb->ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_sandbox_add: invalid arguments");
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
	eq_init(&q, &b, fw->table, "sbx4", NFT_MSG_NEWSETELEM,
	    NLM_F_CREATE | NLM_F_EXCL);
	key_init(&k, sb->ifname);
	key_put(&k, sb->addr4, 4);
	eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
	if (eq_done(&q) == -1)
		goto oomb;
	if (sb->has_addr6) {
		eq_init(&q, &b, fw->table, "sbx6", NFT_MSG_NEWSETELEM,
		    NLM_F_CREATE | NLM_F_EXCL);
		key_init(&k, sb->ifname);
		key_put(&k, sb->addr6, 16);
		eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
		if (eq_done(&q) == -1)
			goto oomb;
	}
	if (statics_queue(fw, &b, sb, al, nal, dn, ndn) == -1)
		goto oomb;
	if (sb->quota_bytes > 0 && quota_queue(fw, &b, sb, NLM_F_CREATE |
	    NLM_F_EXCL, 1) == -1)
		goto oomb;
	ret = fw_batch_commit(&b, "fw_sandbox_add", err, errlen);
	free(al);
	free(dn);
	return ret;
oomb:
	fw_batch_abort(&b);
oom:
	free(al);
	free(dn);
	errno = ENOMEM;
	fw_seterr(err, errlen, "fw_sandbox_add: out of memory");
	return -1;
}

/* ---------------------------------------------------------------- dumps */

static int
dump_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nftnl_set	*s = arg;

	if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0)
		return MNL_CB_ERROR;
	return MNL_CB_OK;
}

/* Dumps the elements of set into a new nftnl_set (caller frees), NULL with
 * errno on failure. */
static struct nftnl_set *
dump_set(struct fw *fw, const char *set)
{
	struct nftnl_set	*s, *q;
	struct nlmsghdr		*nlh;

	if ((q = nftnl_set_alloc()) == NULL)
		return NULL;
	nftnl_set_set_str(q, NFTNL_SET_TABLE, fw->table);
	nftnl_set_set_str(q, NFTNL_SET_NAME, set);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETSETELEM, NFPROTO_INET,
	    NLM_F_DUMP, fw->seq++);
	nftnl_set_elems_nlmsg_build_payload(nlh, q);
	nftnl_set_free(q);
	if ((s = nftnl_set_alloc()) == NULL)
		return NULL;
	if (fw_request(fw, nlh, dump_cb, s) == -1) {
		int saved = errno;

		nftnl_set_free(s);
		errno = saved;
		return NULL;
	}
	return s;
}

/* Calls fn for every element of s; stops when fn returns non-zero. */
static void
each_elem(struct nftnl_set *s, int (*fn)(struct nftnl_set_elem *, void *),
    void *arg)
{
	struct nftnl_set_elems_iter	*it;
	struct nftnl_set_elem		*e;

	if ((it = nftnl_set_elems_iter_create(s)) == NULL)
		return;
	while ((e = nftnl_set_elems_iter_next(it)) != NULL)
		if (fn(e, arg) != 0)
			break;
	nftnl_set_elems_iter_destroy(it);
}

static int
key_has_ifname(struct nftnl_set_elem *e, const char *ifname)
{
	const uint8_t	*key;
	uint32_t	 klen = 0;
	char		 name[FW_IFNAMSIZ] = { 0 };

	if (ifname == NULL)
		return 1;
	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	if (key == NULL || klen < FW_IFNAMSIZ)
		return 0;
	memcpy(name, ifname, strnlen(ifname, FW_IFNAMSIZ - 1));
	return memcmp(key, name, FW_IFNAMSIZ) == 0;
}

struct del_ctx {
	const char	*ifname;
	struct eq	*q;
	int		 found;
};

static int
del_one(struct nftnl_set_elem *e, void *arg)
{
	struct del_ctx	*c = arg;
	const void	*key, *kend;
	uint32_t	 klen = 0, elen = 0;

	if (!key_has_ifname(e, c->ifname))
		return 0;
	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	kend = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END) ?
	    nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &elen) : NULL;
	if (key == NULL || klen > FW_KEYMAX || (kend != NULL && elen != klen))
		return 0;
	eq_add(c->q, key, klen, kend, 0, 0, NULL);
	c->found++;
	return 0;
}

int
fw_sandbox_del(struct fw *fw, const struct fw_sandbox *sb, char *err,
    size_t errlen)
{
	struct fw_batch		 b;
	const struct fw_setdef	*d;
	struct nftnl_set	*dumps[32];
	struct nftnl_obj	*o;
	struct eq		 q;
	struct del_ctx		 c;
	size_t			 nd = 0, i;
	int			 quota_found = 0, ret = -1;
	char			 qname[32];

	if (fw == NULL || sb == NULL || !valid_ifname(sb->ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_sandbox_del: invalid arguments");
		return -1;
	}
	/* Read every per-sandbox set first, then delete in one batch. */
	for (d = fw_sets; d->name != NULL && nd < 32; d++) {
		if (!d->persistent)
			continue;
		if ((dumps[nd] = dump_set(fw, d->name)) == NULL) {
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
		eq_init(&q, &b, fw->table, d->name, NFT_MSG_DELSETELEM, 0);
		c.ifname = sb->ifname;
		c.q = &q;
		c.found = 0;
		each_elem(dumps[i], del_one, &c);
		if (eq_done(&q) == -1) {
			fw_batch_abort(&b);
			fw_seterr(err, errlen, "fw_sandbox_del: out of memory");
			goto out;
		}
		if (strcmp(d->name, "quota") == 0)
			quota_found = c.found;
		i++;
	}
	/* The object goes after the map element that references it. */
	if (quota_found) {
		snprintf(qname, sizeof(qname), "q_%s", sb->ifname);
		if ((o = nftnl_obj_alloc()) == NULL) {
			fw_batch_abort(&b);
			errno = ENOMEM;
			fw_seterr(err, errlen, "fw_sandbox_del: out of memory");
			goto out;
		}
		nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, fw->table);
		nftnl_obj_set_str(o, NFTNL_OBJ_NAME, qname);
		nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_QUOTA);
		nftnl_obj_nlmsg_build_payload(fw_batch_hdr(&b, NFT_MSG_DELOBJ,
		    0), o);
		nftnl_obj_free(o);
		fw_batch_next(&b);
	}
	ret = fw_batch_commit(&b, "fw_sandbox_del", err, errlen);
out:
	for (i = 0; i < nd; i++)
		nftnl_set_free(dumps[i]);
	return ret;
}

/* The sets that hold what a policy's static rules give a sandbox, as
 * opposed to what it learned, was narrowed to, or is (anti-spoofing). */
static const char *const static_sets[] = {
	"allow4", "allow6", "pallow4", "pallow6", "sbx_deny4", "sbx_deny6",
	"icmp4", NULL,
};

static int
keyed_one(struct nftnl_set_elem *e, void *arg)
{
	struct del_ctx	*c = arg;

	if (key_has_ifname(e, c->ifname))
		c->found++;
	return 0;
}

/* Elements of set keyed on ifname, or -1 with errno. */
static int
count_keyed(struct fw *fw, const char *set, const char *ifname)
{
	struct nftnl_set	*s;
	struct del_ctx		 c = { .ifname = ifname };

	if ((s = dump_set(fw, set)) == NULL)
		return -1;
	each_elem(s, keyed_one, &c);
	nftnl_set_free(s);
	return c.found;
}

int
fw_sandbox_update(struct fw *fw, const struct fw_sandbox *sb,
    const struct fw_rule *allow, size_t nallow, const struct fw_rule *deny,
    size_t ndeny, char *err, size_t errlen)
{
	struct fw_batch		 b;
	struct nftnl_set	*dumps[8] = { NULL };
	struct nftnl_obj	*o;
	struct fw_rule		*al = NULL, *dn = NULL;
	struct del_ctx		 c;
	struct eq		 q;
	struct key		 k;
	size_t			 nal = 0, ndn = 0, i;
	int			 nreg, nquota, ret = -1;
	char			 qname[32];

	if (fw == NULL || sb == NULL || !valid_ifname(sb->ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_sandbox_update: invalid arguments");
		return -1;
	}
	if (statics_prepare(fw, "fw_sandbox_update", allow, nallow, deny,
	    ndeny, &al, &nal, &dn, &ndn, err, errlen) == -1)
		goto out;
	/* Only a registered sandbox: statics for a link nobody registered
	 * would be allows without the anti-spoofing entry they rely on. */
	if ((nreg = count_keyed(fw, "sbx4", sb->ifname)) == -1 ||
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
	for (i = 0; static_sets[i] != NULL; i++)
		if ((dumps[i] = dump_set(fw, static_sets[i])) == NULL) {
			fw_seterr(err, errlen, "fw_sandbox_update: dump %s: %s",
			    static_sets[i], strerror(errno));
			goto out;
		}
	if (fw_batch_begin(fw, &b) == -1) {
		fw_seterr(err, errlen, "fw_sandbox_update: %s",
		    strerror(errno));
		goto out;
	}
	/* Old statics out and new ones in, in one batch: no packet ever
	 * sees the sandbox with neither (or with both). Learned, keep,
	 * restricted and anti-spoofing elements are not touched. */
	for (i = 0; static_sets[i] != NULL; i++) {
		eq_init(&q, &b, fw->table, static_sets[i], NFT_MSG_DELSETELEM,
		    0);
		c.ifname = sb->ifname;
		c.q = &q;
		c.found = 0;
		each_elem(dumps[i], del_one, &c);
		if (eq_done(&q) == -1)
			goto oomb;
	}
	if (statics_queue(fw, &b, sb, al, nal, dn, ndn) == -1)
		goto oomb;
	if (sb->quota_bytes > 0) {
		/* An existing quota is updated in place, so a new budget
		 * does not forget the bytes already spent. */
		if (quota_queue(fw, &b, sb, nquota > 0 ? NLM_F_CREATE :
		    NLM_F_CREATE | NLM_F_EXCL, nquota == 0) == -1)
			goto oomb;
	} else if (nquota > 0) {
		eq_init(&q, &b, fw->table, "quota", NFT_MSG_DELSETELEM, 0);
		key_init(&k, sb->ifname);
		eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
		if (eq_done(&q) == -1)
			goto oomb;
		snprintf(qname, sizeof(qname), "q_%s", sb->ifname);
		if ((o = nftnl_obj_alloc()) == NULL)
			goto oomb;
		nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, fw->table);
		nftnl_obj_set_str(o, NFTNL_OBJ_NAME, qname);
		nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_QUOTA);
		nftnl_obj_nlmsg_build_payload(fw_batch_hdr(&b, NFT_MSG_DELOBJ,
		    0), o);
		nftnl_obj_free(o);
		fw_batch_next(&b);
	}
	ret = fw_batch_commit(&b, "fw_sandbox_update", err, errlen);
	goto out;
oomb:
	fw_batch_abort(&b);
	errno = ENOMEM;
	fw_seterr(err, errlen, "fw_sandbox_update: out of memory");
out:
	for (i = 0; i < sizeof(dumps) / sizeof(dumps[0]); i++)
		if (dumps[i] != NULL)
			nftnl_set_free(dumps[i]);
	free(al);
	free(dn);
	return ret;
}

/* --------------------------------------------------------------- learn */

static int
valid_elem(const struct fw_elem *e)
{
	if (!valid_ifname(e->ifname))
		return 0;
	if (e->family != AF_INET && e->family != AF_INET6)
		return 0;
	if (e->proto != IPPROTO_TCP && e->proto != IPPROTO_UDP)
		return 0;
	return e->port_lo <= e->port_hi && e->timeout_ms > 0;
}

static void
elem_keys(const struct fw_elem *e, struct key *lo, struct key *hi)
{
	size_t	alen = e->family == AF_INET ? 4 : 16;

	key_tuple(lo, e->ifname, e->addr, alen, e->proto, e->port_lo);
	key_tuple(hi, e->ifname, e->addr, alen, e->proto, e->port_hi);
}

/* Queues the learn (or unlearn) messages for e[0..n) of one family. */
static int
learn_batch(struct fw_batch *b, struct fw *fw, const struct fw_elem *e,
    size_t n, int six, int unlearn)
{
	struct eq	 q;
	struct key	 lo, hi;
	size_t		 i;
	int		 pass, npass;
	uint8_t		 fam = six ? AF_INET6 : AF_INET;
	const char	*set = six ? "learned6" : "learned4";
	static const uint16_t types[3] = { NFT_MSG_NEWSETELEM,
	    NFT_MSG_DELSETELEM, NFT_MSG_NEWSETELEM };

	/* Unlearn: add then delete, so a missing (expired) element is no
	 * error. Learn with a kernel that does not refresh timeouts on
	 * re-add: add, delete, add, so the last add starts a fresh timeout. */
	if (unlearn)
		npass = 2;
	else
		npass = fw->refresh == FW_REFRESH_READD ? 1 : 3;
	for (pass = 0; pass < npass; pass++) {
		eq_init(&q, b, fw->table, set, types[pass],
		    types[pass] == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0);
		for (i = 0; i < n; i++) {
			if (e[i].family != fam)
				continue;
			elem_keys(&e[i], &lo, &hi);
			eq_add(&q, lo.b, lo.len, hi.b, 0,
			    types[pass] == NFT_MSG_NEWSETELEM ?
			    e[i].timeout_ms : 0, NULL);
		}
		if (eq_done(&q) == -1)
			return -1;
	}
	return 0;
}

static int
learn_common(struct fw *fw, const struct fw_elem *e, size_t n, int unlearn,
    const char *what, char *err, size_t errlen)
{
	struct fw_batch	b;
	size_t		i;

	if (fw == NULL || (n > 0 && e == NULL) || n > FW_MAX_LEARN) {
		errno = EINVAL;
		fw_seterr(err, errlen, "%s: invalid arguments", what);
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!valid_elem(&e[i])) {
			errno = EINVAL;
			fw_seterr(err, errlen, "%s: element %zu invalid", what,
			    i);
			return -1;
		}
	if (n == 0)
		return 0;
	if (fw->refresh == FW_REFRESH_UNKNOWN)
		fw_probe_refresh(fw);
	if (fw_batch_begin(fw, &b) == -1) {
		fw_seterr(err, errlen, "%s: %s", what, strerror(errno));
		return -1;
	}
	if (learn_batch(&b, fw, e, n, 0, unlearn) == -1 ||
	    learn_batch(&b, fw, e, n, 1, unlearn) == -1) {
		fw_batch_abort(&b);
		errno = ENOMEM;
		fw_seterr(err, errlen, "%s: out of memory", what);
		return -1;
	}
	return fw_batch_commit(&b, what, err, errlen);
}

int
fw_learn(struct fw *fw, const struct fw_elem *e, size_t n, char *err,
    size_t errlen)
{
	return learn_common(fw, e, n, 0, "fw_learn", err, errlen);
}

int
fw_unlearn(struct fw *fw, const struct fw_elem *e, size_t n, char *err,
    size_t errlen)
{
	return learn_common(fw, e, n, 1, "fw_unlearn", err, errlen);
}

struct exp_ctx {
	struct key	lo;
	int64_t		expiration;
};

static int
exp_one(struct nftnl_set_elem *e, void *arg)
{
	struct exp_ctx	*c = arg;
	const void	*key;
	uint32_t	 klen = 0;

	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	if (key == NULL || klen != c->lo.len || memcmp(key, c->lo.b, klen) != 0)
		return 0;
	if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_EXPIRATION))
		c->expiration = (int64_t)nftnl_set_elem_get_u64(e,
		    NFTNL_SET_ELEM_EXPIRATION);
	else
		c->expiration = 0;
	return 1;
}

int64_t
fw_elem_expiration(struct fw *fw, const struct fw_elem *e, char *err,
    size_t errlen)
{
	struct nftnl_set	*s;
	struct exp_ctx		 c;
	struct key		 hi;

	if (fw == NULL || e == NULL || (e->family != AF_INET &&
	    e->family != AF_INET6) || !valid_ifname(e->ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_elem_expiration: invalid arguments");
		return -1;
	}
	if ((s = dump_set(fw, e->family == AF_INET ? "learned4" :
	    "learned6")) == NULL) {
		fw_seterr(err, errlen, "fw_elem_expiration: %s",
		    strerror(errno));
		return -1;
	}
	elem_keys(e, &c.lo, &hi);
	c.expiration = -1;
	each_elem(s, exp_one, &c);
	nftnl_set_free(s);
	if (c.expiration < 0) {
		errno = ENOENT;
		fw_seterr(err, errlen, "fw_elem_expiration: no such element");
	}
	return c.expiration;
}

/* Finds out once whether re-adding an element resets its timeout (kernels
 * with element timeout updates, 6.10 and later, do). The probe element is
 * keyed on an interface name no sandbox can have (FW_IFPREFIX + "~probe"
 * is never handed out: the gateway names links sl-<number>). Any failure
 * leaves the safe choice, add + delete + add. */
void
fw_probe_refresh(struct fw *fw)
{
	struct fw_elem	e;
	int64_t		exp;

	fw->refresh = FW_REFRESH_DELADD;
	memset(&e, 0, sizeof(e));
	snprintf(e.ifname, sizeof(e.ifname), "%s~probe", FW_IFPREFIX);
	e.family = AF_INET;
	e.proto = IPPROTO_TCP;
	e.port_lo = e.port_hi = 9;
	e.timeout_ms = 60000;
	fw->refresh = FW_REFRESH_READD;	/* one plain add per call below */
	if (fw_learn(fw, &e, 1, NULL, 0) == -1)
		goto safe;
	e.timeout_ms = 3600000;
	if (fw_learn(fw, &e, 1, NULL, 0) == -1)
		goto safe;
	exp = fw_elem_expiration(fw, &e, NULL, 0);
	(void)learn_common(fw, &e, 1, 1, "probe", NULL, 0);
	if (exp > 600000)
		return;
safe:
	fw->refresh = FW_REFRESH_DELADD;
}

/* ------------------------------------------------------------ restrict */

int
fw_restrict(struct fw *fw, const char *ifname, const struct fw_rule *keep,
    size_t n, char *err, size_t errlen)
{
	struct fw_batch	 b;
	struct eq	 q;
	struct key	 k;
	struct fw_rule	*kp;
	size_t		 i, nk;

	if (fw == NULL || !valid_ifname(ifname) || (n > 0 && keep == NULL) ||
	    n > FW_MAX_RULES) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_restrict: invalid arguments");
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!valid_rule(&keep[i], 0)) {
			errno = EINVAL;
			fw_seterr(err, errlen, "fw_restrict: keep rule %zu "
			    "invalid", i);
			return -1;
		}
	if ((kp = rules_normalize(keep, n, &nk)) == NULL) {
		errno = ENOMEM;
		fw_seterr(err, errlen, "fw_restrict: out of memory");
		return -1;
	}
	if (fw_batch_begin(fw, &b) == -1) {
		free(kp);
		fw_seterr(err, errlen, "fw_restrict: %s", strerror(errno));
		return -1;
	}
	/* Keep elements first: the moment @restricted holds the name, the
	 * rules narrow, and the keep list must already be there. (Both are
	 * in one batch anyway; the order costs nothing.) */
	for (int six = 0; six <= 1; six++) {
		eq_init(&q, &b, fw->table, six ? "keep6" : "keep4",
		    NFT_MSG_NEWSETELEM, NLM_F_CREATE);
		for (i = 0; i < nk; i++)
			if (kp[i].family == (six ? AF_INET6 : AF_INET))
				add_rule_tuple(&q, ifname, &kp[i]);
		if (eq_done(&q) == -1)
			goto oom;
	}
	eq_init(&q, &b, fw->table, "restricted", NFT_MSG_NEWSETELEM,
	    NLM_F_CREATE);
	key_init(&k, ifname);
	eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
	if (eq_done(&q) == -1)
		goto oom;
	free(kp);
	return fw_batch_commit(&b, "fw_restrict", err, errlen);
oom:
	fw_batch_abort(&b);
	free(kp);
	errno = ENOMEM;
	fw_seterr(err, errlen, "fw_restrict: out of memory");
	return -1;
}

/* ------------------------------------------------------- reconciliation */

struct list_ctx {
	void	(*cb)(const char *, const uint8_t [4], void *);
	void	 *arg;
	int	  n;
};

static int
list_one(struct nftnl_set_elem *e, void *arg)
{
	struct list_ctx	*c = arg;
	const uint8_t	*key;
	uint32_t	 klen = 0;
	char		 name[FW_IFNAMSIZ];

	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	if (key == NULL || klen != FW_IFNAMSIZ + 4)
		return 0;
	memcpy(name, key, FW_IFNAMSIZ);
	name[FW_IFNAMSIZ - 1] = '\0';
	if (c->cb != NULL)
		c->cb(name, key + FW_IFNAMSIZ, c->arg);
	c->n++;
	return 0;
}

int
fw_list_sandboxes(struct fw *fw, void (*cb)(const char *ifname,
    const uint8_t addr4[4], void *arg), void *arg, char *err, size_t errlen)
{
	struct nftnl_set	*s;
	struct list_ctx		 c = { cb, arg, 0 };

	if (fw == NULL) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_list_sandboxes: invalid arguments");
		return -1;
	}
	if ((s = dump_set(fw, "sbx4")) == NULL) {
		fw_seterr(err, errlen, "fw_list_sandboxes: %s",
		    strerror(errno));
		return -1;
	}
	each_elem(s, list_one, &c);
	nftnl_set_free(s);
	return c.n;
}

struct count_ctx {
	const char	*ifname;
	int		 n;
};

static int
count_one(struct nftnl_set_elem *e, void *arg)
{
	struct count_ctx	*c = arg;

	if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS) &&
	    (nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS) &
	    NFT_SET_ELEM_INTERVAL_END))
		return 0;
	if (key_has_ifname(e, c->ifname))
		c->n++;
	return 0;
}

int
fw_count_elems(struct fw *fw, const char *set, const char *ifname, char *err,
    size_t errlen)
{
	struct nftnl_set	*s;
	struct count_ctx	 c = { ifname, 0 };

	if (fw == NULL || set == NULL || fw_setdef(set) == NULL) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_count_elems: invalid arguments");
		return -1;
	}
	if ((s = dump_set(fw, set)) == NULL) {
		fw_seterr(err, errlen, "fw_count_elems: %s", strerror(errno));
		return -1;
	}
	each_elem(s, count_one, &c);
	nftnl_set_free(s);
	return c.n;
}
