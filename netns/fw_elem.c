/*
 * fw_elem.c: per-sandbox state as set elements.
 *
 * Why this file exists: the shared rules written by fw.c never change while
 * the daemon runs; what a sandbox may reach is in its own set and chain
 * (made here with fw.c's builders) and in set elements, and this file is
 * the only place that encodes them. Every public call here is one
 * netlink batch, so a sandbox appears, learns, narrows or disappears
 * atomically, and the DNS proxy's fw_learn returns only once the kernel has
 * committed the elements (the answer is released after that, never before).
 *
 * Key layout of the shared sets (each field padded to 4 bytes, as nft
 * registers are): ifname[16] . addr[4|16] . l4proto[1+3] . port[2+2]
 * (network order); of the per-sandbox sets, see fw_int.h.
 *
 * The handle also keeps an index of what it put in the shared sets per
 * ifname (rebuilt from one dump per set when fw_init adopts a table), so
 * that fw_sandbox_del removes a sandbox by key without dumping every set;
 * its own set and chain go by name.
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
#include <time.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
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
struct rawvec {
	struct fw_raw		*v;
	size_t			 n, cap;
	int			 oom;
};

struct eq {
	struct fw_batch		*b;
	const char		*table, *set;
	struct nftnl_set	*s;
	struct rawvec		*rec;	/* also note each element here */
	uint16_t		 type, flags;
	int			 n, oom, setidx;
};

static int
set_index(const char *name)
{
	const struct fw_setdef	*d = fw_setdef(name);

	return d == NULL ? -1 : (int)(d - fw_sets);
}

static void
rawvec_add(struct rawvec *rv, int set, const void *key, size_t klen,
    const void *kend)
{
	struct fw_raw	*r;
	size_t		 ncap;

	if (set < 0 || klen > FW_RAWKEY) {
		rv->oom = 1;
		return;
	}
	if (rv->n == rv->cap) {
		ncap = rv->cap ? rv->cap * 2 : 16;
		if ((r = reallocarray(rv->v, ncap, sizeof(*r))) == NULL) {
			rv->oom = 1;
			return;
		}
		rv->v = r;
		rv->cap = ncap;
	}
	r = &rv->v[rv->n++];
	memset(r, 0, sizeof(*r));
	r->set = (uint8_t)set;
	memcpy(r->key, key, klen);
	if (kend != NULL) {
		r->has_end = 1;
		memcpy(r->kend, kend, klen);
	}
}

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
	q->setidx = set_index(set);
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
	if (q->rec != NULL)
		rawvec_add(q->rec, q->setidx, key, klen, keyend);
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

/* A key of the per-sandbox set (layout in fw_int.h). */
static void
key_sbx(struct key *k, uint32_t role, const uint8_t *addr, size_t alen,
    uint8_t proto, uint16_t port)
{
	uint16_t	be = htons(port);

	memset(k, 0, sizeof(*k));
	role = htonl(role);
	memcpy(k->b, &role, 4);
	if (alen == 4) {
		k->b[4 + 10] = k->b[4 + 11] = 0xff;
		memcpy(k->b + 4 + 12, addr, 4);
	} else
		memcpy(k->b + 4, addr, 16);
	k->b[20] = proto;
	memcpy(k->b + 24, &be, 2);
	k->len = FW_SBX_KEYLEN;
}

/* Queues the interval element of a TCP/UDP rule into q (a per-sandbox set)
 * under role. */
static void
add_rule_tuple(struct eq *q, uint32_t role, const struct fw_rule *r)
{
	struct key	klo, khi;
	uint8_t		lo[16], hi[16];
	size_t		alen = r->family == AF_INET ? 4 : 16;

	(void)fw_cidr_range(r->family, r->addr, r->prefix, lo, hi);
	key_sbx(&klo, role, lo, alen, r->proto, r->port_lo);
	key_sbx(&khi, role, hi, alen, r->proto, r->port_hi);
	eq_add(q, klo.b, klo.len, khi.b, 0, 0, NULL);
}

/* The same for a CIDR without ports (denies, ICMP): proto and port 0. */
static void
add_rule_cidr(struct eq *q, uint32_t role, const struct fw_rule *r)
{
	struct key	klo, khi;
	uint8_t		lo[16], hi[16];
	size_t		alen = r->family == AF_INET ? 4 : 16;

	(void)fw_cidr_range(r->family, r->addr, r->prefix, lo, hi);
	key_sbx(&klo, role, lo, alen, 0, 0);
	key_sbx(&khi, role, hi, alen, 0, 0);
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
	/*
	 * A rule that goes is replaced by the last one, which is examined in
	 * its place, and the scan goes on: one pass removes every rule that
	 * can go at that point (restarting after each removal made nested
	 * lists cubic: 2,048 rules took half a minute). Joining port ranges
	 * widens a rule already passed over, so passes repeat until one
	 * changes nothing; each removes at least one rule, so n + 1 bound
	 * them.
	 */
	for (guard = 0, changed = 1; changed && guard <= n; guard++) {
		changed = 0;
		for (i = 0; i < m; ) {
			int gone = 0;

			for (j = 0; j < m && !gone; j++) {
				if (i == j)
					continue;
				if (rule_within(&r[i], &r[j])) {
					gone = 1;
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
					gone = 1;
				}
			}
			if (gone) {
				r[i] = r[--m];
				changed = 1;
			} else
				i++;
		}
	}
	*outn = m;
	return r;
}

/*
 * rules_split: in[0..n) normalised in two groups, in one malloc'ed array
 * (caller frees; *nout rules): first the public ones (*npub of them), then
 * those lying wholly inside a private range (ICMP counts as public). A
 * private one opens its range (roles PALLOW, PKEEP) and so must not be
 * folded into a broader public rule, hence the groups are normalised
 * apart. NULL (ENOMEM) on failure.
 */
static struct fw_rule *
rules_split(const struct fw *fw, const struct fw_rule *in, size_t n,
    size_t *nout, size_t *npub)
{
	struct fw_rule	*tmp, *pub, *prv, *out = NULL;
	size_t		 i, k = 0, npubin, nprv;

	if ((tmp = calloc(n + 1, sizeof(*tmp))) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if (in[i].proto == IPPROTO_ICMP || !rule_private(fw, &in[i]))
			tmp[k++] = in[i];
	npubin = k;
	for (i = 0; i < n; i++)
		if (in[i].proto != IPPROTO_ICMP && rule_private(fw, &in[i]))
			tmp[k++] = in[i];
	pub = rules_normalize(tmp, npubin, npub);
	prv = rules_normalize(tmp + npubin, k - npubin, &nprv);
	free(tmp);
	if (pub != NULL && prv != NULL &&
	    (out = calloc(*npub + nprv + 1, sizeof(*out))) != NULL) {
		if (*npub > 0)
			memcpy(out, pub, *npub * sizeof(*out));
		if (nprv > 0)
			memcpy(out + *npub, prv, nprv * sizeof(*out));
		*nout = *npub + nprv;
	}
	free(pub);
	free(prv);
	return out;
}

/* --------------------------------------------------------------- index */

/*
 * The per-ifname index: what this handle put in the kernel for each
 * sandbox, so fw_sandbox_del deletes by key in one batch instead of
 * dumping every set (whose cost grows with every other sandbox). Learned
 * elements sit in a small open-addressing table per sandbox, so refreshing
 * one does not add a duplicate; entries that expired in the kernel long
 * ago are pruned from time to time so the table tracks what can still be
 * there. Deleting a pruned one that the kernel still had is harmless: it
 * has expired, no packet matches it, and the kernel collects it.
 */

#define FW_PRUNE_SLACK_MS	(10 * 60 * 1000)

static int64_t
mono_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint32_t
fnv(const void *p, size_t n, uint32_t h)
{
	const uint8_t	*b = p;

	while (n-- > 0)
		h = (h ^ *b++) * 16777619u;
	return h;
}

static struct fw_sbx **
idx_slot(struct fw *fw, const char *ifname)
{
	char		 name[FW_IFNAMSIZ] = { 0 };
	struct fw_sbx	**pp;

	memcpy(name, ifname, strnlen(ifname, FW_IFNAMSIZ - 1));
	pp = &fw->idx[fnv(name, sizeof(name), 2166136261u) %
	    FW_IDX_BUCKETS];
	while (*pp != NULL && strcmp((*pp)->ifname, name) != 0)
		pp = &(*pp)->next;
	return pp;
}

static struct fw_sbx *
idx_find(struct fw *fw, const char *ifname)
{
	return *idx_slot(fw, ifname);
}

/* Finds or makes the record of ifname; NULL on ENOMEM. */
static struct fw_sbx *
idx_get(struct fw *fw, const char *ifname)
{
	struct fw_sbx	**pp = idx_slot(fw, ifname), *x;

	if (*pp != NULL)
		return *pp;
	if ((x = calloc(1, sizeof(*x))) == NULL)
		return NULL;
	memcpy(x->ifname, ifname, strnlen(ifname, FW_IFNAMSIZ - 1));
	*pp = x;
	return x;
}

static void
sbx_free(struct fw_sbx *x)
{
	size_t	i;

	for (i = 0; i < x->lkcap; i++)
		if (x->lk[i].used)
			free(x->lk[i].names);
	free(x->raw);
	free(x->lk);
	free(x);
}

static void
idx_drop(struct fw *fw, const char *ifname)
{
	struct fw_sbx	**pp = idx_slot(fw, ifname), *x;

	if ((x = *pp) == NULL)
		return;
	*pp = x->next;
	sbx_free(x);
}

void
fw_idx_clear(struct fw *fw)
{
	struct fw_sbx	*x, *next;
	size_t		 i;

	for (i = 0; i < FW_IDX_BUCKETS; i++) {
		for (x = fw->idx[i]; x != NULL; x = next) {
			next = x->next;
			sbx_free(x);
		}
		fw->idx[i] = NULL;
	}
}

static int
raw_eq(const struct fw_raw *a, const struct fw_raw *b)
{
	return a->set == b->set && a->has_end == b->has_end &&
	    memcmp(a->key, b->key, sizeof(a->key)) == 0 &&
	    memcmp(a->kend, b->kend, sizeof(a->kend)) == 0;
}

/* Adds r unless it is there already: -1 on ENOMEM. */
static int
sbx_raw_add(struct fw_sbx *x, const struct fw_raw *r)
{
	struct fw_raw	*v;
	size_t		 i, ncap;

	for (i = 0; i < x->nraw; i++)
		if (raw_eq(&x->raw[i], r))
			return 0;
	if (x->nraw == x->rawcap) {
		ncap = x->rawcap ? x->rawcap * 2 : 8;
		if ((v = reallocarray(x->raw, ncap, sizeof(*v))) == NULL)
			return -1;
		x->raw = v;
		x->rawcap = ncap;
	}
	x->raw[x->nraw++] = *r;
	return 0;
}

static int
set_in(int set, const char *const *names)
{
	for (; *names != NULL; names++)
		if (set == set_index(*names))
			return 1;
	return 0;
}

/* Forgets the raw elements of x that are in one of the sets names. */
static void
sbx_raw_forget(struct fw_sbx *x, const char *const *names)
{
	size_t	i, m = 0;

	for (i = 0; i < x->nraw; i++)
		if (!set_in(x->raw[i].set, names))
			x->raw[m++] = x->raw[i];
	x->nraw = m;
}

static int
sbx_has_set(const struct fw_sbx *x, const char *name)
{
	int	set = set_index(name);
	size_t	i;

	for (i = 0; x != NULL && i < x->nraw; i++)
		if (x->raw[i].set == set)
			return 1;
	return 0;
}

static uint32_t
lk_hash(const struct fw_lkey *k)
{
	uint32_t	h = 2166136261u;

	h = fnv(&k->family, 1, h);
	h = fnv(&k->proto, 1, h);
	h = fnv(&k->port_lo, 2, h);
	h = fnv(&k->port_hi, 2, h);
	return fnv(k->addr, sizeof(k->addr), h);
}

static int
lk_same(const struct fw_lkey *a, const struct fw_lkey *b)
{
	return a->family == b->family && a->proto == b->proto &&
	    a->port_lo == b->port_lo && a->port_hi == b->port_hi &&
	    memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

static struct fw_lkey *
lk_find(struct fw_sbx *x, const struct fw_lkey *k)
{
	size_t	i, mask;

	if (x->lkcap == 0)
		return NULL;
	mask = x->lkcap - 1;
	for (i = lk_hash(k) & mask; x->lk[i].used; i = (i + 1) & mask)
		if (lk_same(&x->lk[i], k))
			return &x->lk[i];
	return NULL;
}

/* Places k in a table known to have room and not to hold it. */
static void
lk_place(struct fw_lkey *t, size_t cap, const struct fw_lkey *k)
{
	size_t	i, mask = cap - 1;

	for (i = lk_hash(k) & mask; t[i].used; i = (i + 1) & mask)
		;
	t[i] = *k;
	t[i].used = 1;
}

/* Rebuilds x's table with capacity cap, dropping entries that expired
 * before `before` (0: none). -1 on ENOMEM (x unchanged). */
static int
lk_rehash(struct fw_sbx *x, size_t cap, int64_t before)
{
	struct fw_lkey	*t;
	size_t		 i, n = 0;

	if ((t = calloc(cap, sizeof(*t))) == NULL)
		return -1;
	for (i = 0; i < x->lkcap; i++) {
		if (!x->lk[i].used)
			continue;
		if (before != 0 && x->lk[i].expires_ms < before) {
			free(x->lk[i].names);
			continue;
		}
		lk_place(t, cap, &x->lk[i]);
		n++;
	}
	free(x->lk);
	x->lk = t;
	x->lkcap = cap;
	x->nlk = n;
	return 0;
}

/* Adds name (NULL: none) to the names of o, unless it is there or o has
 * FW_LEARNED_NAMES already (a destination many names share is decided
 * by those it keeps: at worst a reload removes it for want of the
 * others, and the next answer brings it back). -1 on ENOMEM. */
static int
lk_name_add(struct fw_lkey *o, const char *name)
{
	const char	*p = o->names;
	size_t		 i, used = 0, len;
	char		*nv;

	if (name == NULL || name[0] == '\0')
		return 0;
	len = strnlen(name, 255);
	for (i = 0; i < o->nnames; i++) {
		if (strlen(p) == len && memcmp(p, name, len) == 0)
			return 0;
		used += strlen(p) + 1;
		p += strlen(p) + 1;
	}
	if (o->nnames >= FW_LEARNED_NAMES)
		return 0;
	if ((nv = realloc(o->names, used + len + 1)) == NULL)
		return -1;
	memcpy(nv + used, name, len);
	nv[used + len] = '\0';
	o->names = nv;
	o->nnames++;
	return 0;
}

/* Notes learned element k (refreshing its expiry, keeping its keep mark),
 * learned for name (NULL: not said). -1 on ENOMEM. */
static int
sbx_lk_put(struct fw_sbx *x, const struct fw_lkey *k, const char *name)
{
	struct fw_lkey	*o;
	size_t		 cap;

	if ((o = lk_find(x, k)) != NULL) {
		o->keep |= k->keep;
		if (k->expires_ms > o->expires_ms)
			o->expires_ms = k->expires_ms;
		return lk_name_add(o, name);
	}
	/* Amortised pruning: only when the table doubled since the last. */
	if (x->nlk >= x->lkprune && x->nlk >= 64) {
		if (lk_rehash(x, x->lkcap, mono_ms() - FW_PRUNE_SLACK_MS) ==
		    -1)
			return -1;
		x->lkprune = x->nlk * 2;
	}
	if ((x->nlk + 1) * 2 > x->lkcap) {
		cap = x->lkcap ? x->lkcap * 2 : 16;
		if (lk_rehash(x, cap, 0) == -1)
			return -1;
	}
	lk_place(x->lk, x->lkcap, k);
	x->nlk++;
	return lk_name_add(lk_find(x, k), name);
}

static void
sbx_lk_del(struct fw_sbx *x, const struct fw_lkey *k)
{
	struct fw_lkey	*o, tmp;
	size_t		 i, mask;

	if ((o = lk_find(x, k)) == NULL)
		return;
	/* Linear probing: empty the slot, then re-place the rest of its
	 * cluster so that no later entry becomes unreachable. */
	free(o->names);
	o->names = NULL;
	o->nnames = 0;
	o->used = 0;
	x->nlk--;
	mask = x->lkcap - 1;
	for (i = ((size_t)(o - x->lk) + 1) & mask; x->lk[i].used;
	    i = (i + 1) & mask) {
		tmp = x->lk[i];
		x->lk[i].used = 0;
		lk_place(x->lk, x->lkcap, &tmp);
	}
}

static void
lk_of_elem(const struct fw_elem *e, struct fw_lkey *k, int64_t now)
{
	memset(k, 0, sizeof(*k));
	k->family = e->family;
	k->proto = e->proto;
	k->keep = (e->flags & FW_ELEM_KEEP) != 0;
	k->port_lo = e->port_lo;
	k->port_hi = e->port_hi;
	memcpy(k->addr, e->addr, e->family == AF_INET ? 4 : 16);
	k->expires_ms = now + e->timeout_ms;
}

static int	learn_queue(struct fw_batch *, struct fw *,
		    const struct fw_elem *, size_t, uint16_t, int);
static void	fw_probe_destroy(struct fw *);

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
	if ((*al = rules_split(fw, allow, nallow, nal, &npub)) == NULL)
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
 * elements (from statics_prepare) into its set s_<ifname>, in b. -1
 * (ENOMEM) on failure; the caller aborts the batch. */
static int
statics_queue(struct fw *fw, struct fw_batch *b, const struct fw_sandbox *sb,
    const struct fw_rule *al, size_t nal, const struct fw_rule *dn,
    size_t ndn)
{
	struct eq	 q;
	size_t		 i;
	int		 any_icmp = 0;
	char		 set[FW_NAMEMAX];

	fw_sbx_names(sb->ifname, set, NULL);
	eq_init(&q, b, fw->table, set, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
	for (int six = 0; six <= 1; six++) {
		uint8_t fam = six ? AF_INET6 : AF_INET;

		for (i = 0; i < nal; i++)
			if (al[i].family == fam &&
			    al[i].proto != IPPROTO_ICMP)
				add_rule_tuple(&q, rule_private(fw, &al[i]) ?
				    (six ? FW_R_PALLOW6 : FW_R_PALLOW4) :
				    (six ? FW_R_ALLOW6 : FW_R_ALLOW4), &al[i]);
		for (i = 0; i < ndn; i++)
			if (dn[i].family == fam)
				add_rule_cidr(&q, six ? FW_R_DENY6 :
				    FW_R_DENY4, &dn[i]);
	}
	if (sb->icmp) {
		for (i = 0; i < nal; i++)
			if (al[i].proto == IPPROTO_ICMP) {
				add_rule_cidr(&q, FW_R_ICMP4, &al[i]);
				any_icmp = 1;
			}
		/* ICMP allowed without a destination list: any address
		 * that the deny and private rules let through. */
		if (!any_icmp) {
			struct fw_rule all = { .family = AF_INET,
			    .prefix = 0, .proto = IPPROTO_ICMP };

			add_rule_cidr(&q, FW_R_ICMP4, &all);
		}
	}
	return eq_done(&q);
}

/* A message of one element of set, keyed k, for the caller to fill (*e)
 * and send with one_elem_send. NULL (ENOMEM) on failure. */
static struct nftnl_set *
one_elem(struct fw *fw, const char *set, const struct key *k,
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
    uint16_t type, struct rawvec *rv)
{
	struct nftnl_set	*s;
	struct nftnl_set_elem	*e;
	struct key		 k;
	char			 chain[FW_NAMEMAX];

	fw_sbx_names(ifname, NULL, chain);
	key_init(&k, ifname);
	if ((s = one_elem(fw, "sbx_dispatch", &k, &e)) == NULL)
		return -1;
	if (type == NFT_MSG_NEWSETELEM) {
		nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, NFT_JUMP);
		nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain);
	}
	one_elem_send(b, s, type, type == NFT_MSG_NEWSETELEM ?
	    NLM_F_CREATE | NLM_F_EXCL : 0);
	if (rv != NULL)
		rawvec_add(rv, set_index("sbx_dispatch"), k.b, k.len, NULL);
	return rv != NULL && rv->oom ? -1 : 0;
}

/* Queues sb's generation: "ifname : gen" in @sbx_gen (the mark its new
 * flows get) and "ifname . gen" in @sbx_own (what its established input
 * must carry), EXCL both, and notes them (and its @logmeter key) in rv.
 * The mark is a host-order u32, as ct mark is loaded. -1 (ENOMEM) on
 * failure. */
static int
gen_queue(struct fw *fw, struct fw_batch *b, const struct fw_sandbox *sb,
    struct rawvec *rv)
{
	struct nftnl_set	*s;
	struct nftnl_set_elem	*e;
	struct eq		 q;
	struct key		 k;

	key_init(&k, sb->ifname);
	if ((s = one_elem(fw, "sbx_gen", &k, &e)) == NULL)
		return -1;
	nftnl_set_elem_set(e, NFTNL_SET_ELEM_DATA, &sb->gen, 4);
	one_elem_send(b, s, NFT_MSG_NEWSETELEM, NLM_F_CREATE | NLM_F_EXCL);
	rawvec_add(rv, set_index("sbx_gen"), k.b, k.len, NULL);
	/* Its log meter entry is made by its first logged denial, not
	 * here; noted all the same, so that removal destroys it. */
	rawvec_add(rv, set_index("logmeter"), k.b, k.len, NULL);
	eq_init(&q, b, fw->table, "sbx_own", NFT_MSG_NEWSETELEM,
	    NLM_F_CREATE | NLM_F_EXCL);
	q.rec = rv;
	key_put(&k, &sb->gen, 4);
	eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
	return eq_done(&q);
}

/* Queues the removal of ifname's chain (its rules with it) and set (its
 * elements with it), after the dispatch entry that jumps to the chain:
 * DESTROY, which no missing object fails, when destroy, else DEL. */
static int
objects_del_queue(struct fw *fw, struct fw_batch *b, const char *ifname,
    int destroy)
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
	return 0;
}

/* Queues the quota object of sb (NEWOBJ with flags: NLM_F_EXCL to create,
 * plain NLM_F_CREATE to update one that exists, which keeps what it has
 * consumed) and, when elem, its map element. -1 (ENOMEM) on failure. */
static int
quota_queue(struct fw *fw, struct fw_batch *b, const struct fw_sandbox *sb,
    uint16_t flags, int elem, struct rawvec *rv)
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
	q.rec = rv;
	key_init(&k, sb->ifname);
	eq_add(&q, k.b, k.len, NULL, 0, 0, qname);
	return eq_done(&q);
}

/* Notes in the index what a committed batch added for ifname: the raw
 * elements in rv and, when quota >= 0, whether the quota object exists.
 * If the index cannot hold it, the handle stops trusting its index and
 * deletes through dumps from then on (correct, only slower). */
static void
idx_commit(struct fw *fw, const char *ifname, struct rawvec *rv, int quota)
{
	struct fw_sbx	*x;
	size_t		 i;

	if (!fw->idx_valid)
		return;
	if (rv->oom || (x = idx_get(fw, ifname)) == NULL) {
		fw->idx_valid = 0;
		fw_idx_clear(fw);
		return;
	}
	for (i = 0; i < rv->n; i++)
		if (sbx_raw_add(x, &rv->v[i]) == -1) {
			fw->idx_valid = 0;
			fw_idx_clear(fw);
			return;
		}
	if (quota >= 0)
		x->quota = quota;
}

int
fw_sandbox_add(struct fw *fw, const struct fw_sandbox *sb,
    const struct fw_rule *allow, size_t nallow, const struct fw_rule *deny,
    size_t ndeny, char *err, size_t errlen)
{
	struct fw_batch		 b;
	struct eq		 q;
	struct key		 k;
	struct rawvec		 rv = { NULL, 0, 0, 0 };
	struct fw_rule		*al = NULL, *dn = NULL;
	size_t			 nal = 0, ndn = 0;
	int			 ret = -1;

	if (fw == NULL || sb == NULL || !valid_ifname(sb->ifname) ||
	    sb->gen == 0) {
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
	q.rec = &rv;
	key_init(&k, sb->ifname);
	key_put(&k, sb->addr4, 4);
	eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
	if (eq_done(&q) == -1)
		goto oomb;
	if (sb->has_addr6) {
		eq_init(&q, &b, fw->table, "sbx6", NFT_MSG_NEWSETELEM,
		    NLM_F_CREATE | NLM_F_EXCL);
		q.rec = &rv;
		key_init(&k, sb->ifname);
		key_put(&k, sb->addr6, 16);
		eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
		if (eq_done(&q) == -1)
			goto oomb;
	}
	if (gen_queue(fw, &b, sb, &rv) == -1)
		goto oomb;
	/* Its set, chain and rules, the elements, the quota, and last the
	 * dispatch entry: the chain is reachable only once complete (and
	 * the whole batch commits or nothing does anyway). */
	if (fw_sbx_queue_objects(&b, fw->table, sb->ifname, sb->gen,
	    sb->has_addr6 != 0) == -1 ||
	    statics_queue(fw, &b, sb, al, nal, dn, ndn) == -1)
		goto oomb;
	if (sb->quota_bytes > 0 && quota_queue(fw, &b, sb, NLM_F_CREATE |
	    NLM_F_EXCL, 1, &rv) == -1)
		goto oomb;
	if (dispatch_queue(fw, &b, sb->ifname, NFT_MSG_NEWSETELEM, &rv) == -1)
		goto oomb;
	ret = fw_batch_commit(&b, "fw_sandbox_add", err, errlen);
	if (ret == 0)
		idx_commit(fw, sb->ifname, &rv, sb->quota_bytes > 0);
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

/* Queues a DESTROYOBJ (or DELOBJ) of ifname's quota object. */
static int
quota_obj_del(struct fw *fw, struct fw_batch *b, const char *ifname,
    uint16_t type)
{
	struct nftnl_obj	*o;
	char			 qname[32];

	snprintf(qname, sizeof(qname), "q_%s", ifname);
	if ((o = nftnl_obj_alloc()) == NULL)
		return -1;
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, fw->table);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, qname);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_QUOTA);
	nftnl_obj_nlmsg_build_payload(fw_batch_hdr(b, type, 0), o);
	nftnl_obj_free(o);
	fw_batch_next(b);
	return 0;
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
	struct eq		 q;
	struct del_ctx		 c;
	size_t			 nd = 0, i;
	int			 quota_found = 0, ret = -1, has_chain;

	if (fw == NULL || sb == NULL || !valid_ifname(sb->ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_sandbox_del: invalid arguments");
		return -1;
	}
	/* Read every per-sandbox set (and whether its chain exists) first,
	 * then delete in one batch. */
	has_chain = fw->destroy == FW_DESTROY_YES ||
	    chain_exists(fw, sb->ifname) != 0;
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
	if (quota_found &&
	    quota_obj_del(fw, &b, sb->ifname, NFT_MSG_DELOBJ) == -1) {
		fw_batch_abort(&b);
		errno = ENOMEM;
		fw_seterr(err, errlen, "fw_sandbox_del: out of memory");
		goto out;
	}
	/* Its chain and set: DESTROY where the kernel has it; else DEL,
	 * only if the chain is there (both are made in one batch). */
	if (has_chain && objects_del_queue(fw, &b, sb->ifname,
	    fw->destroy == FW_DESTROY_YES) == -1) {
		fw_batch_abort(&b);
		errno = ENOMEM;
		fw_seterr(err, errlen, "fw_sandbox_del: out of memory");
		goto out;
	}
	ret = fw_batch_commit(&b, "fw_sandbox_del", err, errlen);
	if (ret == 0 && fw->idx_valid)
		idx_drop(fw, sb->ifname);
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
	struct eq		 q;
	size_t			 i, klen;
	int			 set, quota = set_index("quota");

	for (d = fw_sets; d->name != NULL; d++) {
		set = (int)(d - fw_sets);
		if (set == quota)
			continue;
		klen = fw_keylen(d);
		eq_init(&q, b, fw->table, d->name, NFT_MSG_DESTROYSETELEM, 0);
		for (i = 0; i < x->nraw; i++)
			if (x->raw[i].set == set)
				eq_add(&q, x->raw[i].key, klen,
				    x->raw[i].has_end ? x->raw[i].kend : NULL,
				    0, 0, NULL);
		if (eq_done(&q) == -1)
			return -1;
	}
	for (i = 0; i < x->nraw; i++)
		if (x->raw[i].set == quota)
			break;
	if (i < x->nraw || x->quota) {
		struct key k;

		eq_init(&q, b, fw->table, "quota", NFT_MSG_DESTROYSETELEM, 0);
		key_init(&k, x->ifname);
		eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
		if (eq_done(&q) == -1 ||
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
		if ((m > 0 && learn_queue(&b, fw, el + off, m,
		    NFT_MSG_DESTROYSETELEM, 0) == -1) ||
		    (last && (raw_queue_destroy(fw, &b, x) == -1 ||
		    objects_del_queue(fw, &b, x->ifname, 1) == -1))) {
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

	if (fw == NULL || sb == NULL || !valid_ifname(sb->ifname)) {
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
	if ((x = idx_find(fw, sb->ifname)) == NULL)
		return 0;
	if (sandbox_del_idx(fw, x, err, errlen) == -1)
		return -1;
	idx_drop(fw, sb->ifname);
	return 0;
}

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

/* The role of a per-sandbox set element (0 if the key is not ours). */
static uint32_t
elem_role(struct nftnl_set_elem *e)
{
	const uint8_t	*key;
	uint32_t	 klen = 0, role;

	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	if (key == NULL || klen != FW_SBX_KEYLEN)
		return 0;
	memcpy(&role, key, 4);
	return ntohl(role);
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

/* The roles of the static keep rules fw_restrict writes. */
static int
role_keep(uint32_t role)
{
	return role == FW_R_KEEP4 || role == FW_R_KEEP6 ||
	    role == FW_R_PKEEP4 || role == FW_R_PKEEP6;
}

/* each_elem's argument for del_roles: where to queue, which roles. */
struct rdel_ctx {
	struct eq	*q;
	int		(*want)(uint32_t);
};

/* each_elem callback: queues the deletion of an element whose role the
 * context wants (interval elements only: a sandbox's set holds no other). */
static int
del_roles(struct nftnl_set_elem *e, void *arg)
{
	struct rdel_ctx	*c = arg;
	const void	*key, *kend;
	uint32_t	 klen = 0, elen = 0;

	if (!c->want(elem_role(e)))
		return 0;
	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	kend = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END) ?
	    nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &elen) : NULL;
	if (kend == NULL || elen != klen)
		return 0;
	eq_add(c->q, key, klen, kend, 0, 0, NULL);
	return 0;
}

int
fw_sandbox_update(struct fw *fw, const struct fw_sandbox *sb,
    const struct fw_rule *allow, size_t nallow, const struct fw_rule *deny,
    size_t ndeny, char *err, size_t errlen)
{
	struct fw_batch		 b;
	struct nftnl_set	*old = NULL;
	struct fw_rule		*al = NULL, *dn = NULL;
	struct eq		 q;
	struct rdel_ctx		 dc;
	struct key		 k;
	struct rawvec		 rv = { NULL, 0, 0, 0 };
	struct fw_sbx		*x = NULL;
	size_t			 nal = 0, ndn = 0;
	int			 nreg, nquota, ret = -1, byidx;
	char			 set[FW_NAMEMAX];

	if (fw == NULL || sb == NULL || !valid_ifname(sb->ifname)) {
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
		x = idx_find(fw, sb->ifname);
		nreg = sbx_has_set(x, "sbx4");
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
	/* The old statics: one dump of the sandbox's own small set. */
	fw_sbx_names(sb->ifname, set, NULL);
	if ((old = dump_set(fw, set)) == NULL) {
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
	eq_init(&q, &b, fw->table, set, NFT_MSG_DELSETELEM, 0);
	dc.q = &q;
	dc.want = role_static;
	each_elem(old, del_roles, &dc);
	if (eq_done(&q) == -1)
		goto oomb;
	if (statics_queue(fw, &b, sb, al, nal, dn, ndn) == -1)
		goto oomb;
	if (sb->quota_bytes > 0) {
		/* An existing quota is updated in place, so a new budget
		 * does not forget the bytes already spent. */
		if (quota_queue(fw, &b, sb, nquota > 0 ? NLM_F_CREATE :
		    NLM_F_CREATE | NLM_F_EXCL, nquota == 0, &rv) == -1)
			goto oomb;
	} else if (nquota > 0) {
		eq_init(&q, &b, fw->table, "quota", NFT_MSG_DELSETELEM, 0);
		key_init(&k, sb->ifname);
		eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
		if (eq_done(&q) == -1)
			goto oomb;
		if (quota_obj_del(fw, &b, sb->ifname, NFT_MSG_DELOBJ) == -1)
			goto oomb;
	}
	ret = fw_batch_commit(&b, "fw_sandbox_update", err, errlen);
	if (ret == 0 && byidx && fw->idx_valid) {
		static const char *const gone[] = { "quota", NULL };

		if (sb->quota_bytes == 0)
			sbx_raw_forget(x, gone);
		idx_commit(fw, sb->ifname, &rv, sb->quota_bytes > 0);
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

/* Queues messages of type (NEWSETELEM with each element's timeout,
 * DELSETELEM or DESTROYSETELEM) for e[0..n): one-port elements to the
 * shared hash sets, and those marked FW_ELEM_KEEP (every one when
 * keep_all) also to the learned keep hash sets; port ranges to the
 * sandbox's own set, under the learned range roles (and the keep range
 * roles alike). */
static int
learn_queue(struct fw_batch *b, struct fw *fw, const struct fw_elem *e,
    size_t n, uint16_t type, int keep_all)
{
	static const char *const sets[2][2] = {
		{ "learned4", "lkeep4" },
		{ "learned6", "lkeep6" },
	};
	struct eq	 q;
	struct key	 lo, hi;
	size_t		 i, alen;
	int		 six, keep;
	uint16_t	 flags = type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0;
	char		 set[FW_NAMEMAX];

	for (six = 0; six <= 1; six++)
		for (keep = 0; keep <= 1; keep++) {
			eq_init(&q, b, fw->table, sets[six][keep], type,
			    flags);
			for (i = 0; i < n; i++) {
				if (e[i].family != (six ? AF_INET6 : AF_INET) ||
				    e[i].port_lo != e[i].port_hi ||
				    (keep && !keep_all &&
				    !(e[i].flags & FW_ELEM_KEEP)))
					continue;
				elem_keys(&e[i], &lo, &hi);
				eq_add(&q, lo.b, lo.len, NULL, 0,
				    type == NFT_MSG_NEWSETELEM ?
				    e[i].timeout_ms : 0, NULL);
			}
			if (eq_done(&q) == -1)
				return -1;
		}
	/* Ranges are rare (a policy's port range): one message each. */
	for (i = 0; i < n; i++) {
		if (e[i].port_lo == e[i].port_hi)
			continue;
		six = e[i].family == AF_INET6;
		alen = six ? 16 : 4;
		fw_sbx_names(e[i].ifname, set, NULL);
		for (keep = 0; keep <= 1; keep++) {
			if (keep && !keep_all && !(e[i].flags & FW_ELEM_KEEP))
				continue;
			eq_init(&q, b, fw->table, set, type, flags);
			key_sbx(&lo, keep ? (six ? FW_R_LKRANGE6 :
			    FW_R_LKRANGE4) : (six ? FW_R_LRANGE6 :
			    FW_R_LRANGE4), e[i].addr, alen, e[i].proto,
			    e[i].port_lo);
			key_sbx(&hi, keep ? (six ? FW_R_LKRANGE6 :
			    FW_R_LKRANGE4) : (six ? FW_R_LRANGE6 :
			    FW_R_LRANGE4), e[i].addr, alen, e[i].proto,
			    e[i].port_hi);
			eq_add(&q, lo.b, lo.len, hi.b, 0,
			    type == NFT_MSG_NEWSETELEM ? e[i].timeout_ms : 0,
			    NULL);
			if (eq_done(&q) == -1)
				return -1;
		}
	}
	return 0;
}

/* Queues the learn (or unlearn) messages for e[0..n). */
static int
learn_batch(struct fw_batch *b, struct fw *fw, const struct fw_elem *e,
    size_t n, int unlearn)
{
	static const uint16_t types[3] = { NFT_MSG_NEWSETELEM,
	    NFT_MSG_DELSETELEM, NFT_MSG_NEWSETELEM };
	int	pass, npass;

	/* Unlearn removes from the keep sets too, whatever the flag says,
	 * so nothing of a forgotten destination stays reachable. Without
	 * DESTROY (kernels before 6.3): add then delete, so a missing
	 * (expired) element is no error. Learn with a kernel that does not
	 * refresh timeouts on re-add: add, delete, add, so the last add
	 * starts a fresh timeout. */
	if (unlearn && fw->destroy == FW_DESTROY_YES)
		return learn_queue(b, fw, e, n, NFT_MSG_DESTROYSETELEM, 1);
	if (unlearn)
		npass = 2;
	else
		npass = fw->refresh == FW_REFRESH_READD ? 1 : 3;
	for (pass = 0; pass < npass; pass++)
		if (learn_queue(b, fw, e, n, types[pass], unlearn) == -1)
			return -1;
	return 0;
}

/* After a committed learn or unlearn: the index follows the kernel. */
static void
idx_learned(struct fw *fw, const struct fw_elem *e, size_t n, int unlearn)
{
	struct fw_sbx	*x;
	struct fw_lkey	 k;
	int64_t		 now = mono_ms();
	size_t		 i;

	if (!fw->idx_valid)
		return;
	for (i = 0; i < n; i++) {
		lk_of_elem(&e[i], &k, now);
		if (unlearn) {
			if ((x = idx_find(fw, e[i].ifname)) != NULL)
				sbx_lk_del(x, &k);
			continue;
		}
		if ((x = idx_get(fw, e[i].ifname)) == NULL ||
		    sbx_lk_put(x, &k, e[i].name) == -1) {
			/* Unknown from now on: deletion goes by dumps. */
			fw->idx_valid = 0;
			fw_idx_clear(fw);
			return;
		}
	}
}

/* Queues, once per sandbox named in e[0..n) that this handle's index does
 * not know as registered, the kernel's check that it is
 * (fw_sbx_queue_check). The index spares the common case that check,
 * whose cost (a set found by name) grows with the number of sandboxes; a
 * sandbox this handle deleted is gone from it. -1 (ENOMEM) on failure. */
static int
learn_queue_checks(struct fw_batch *b, struct fw *fw, const struct fw_elem *e,
    size_t n)
{
	size_t	i, j;

	for (i = 0; i < n; i++) {
		/* Answers come in runs of one sandbox: try the last first. */
		if (i > 0 && strncmp(e[i].ifname, e[i - 1].ifname,
		    FW_IFNAMSIZ) == 0)
			continue;
		if (fw->idx_valid &&
		    sbx_has_set(idx_find(fw, e[i].ifname), "sbx4"))
			continue;
		for (j = 0; j < i; j++)
			if (strncmp(e[i].ifname, e[j].ifname,
			    FW_IFNAMSIZ) == 0)
				break;
		if (j < i)
			continue;
		if (fw_sbx_queue_check(b, fw->table, e[i].ifname) == -1)
			return -1;
	}
	return 0;
}

/* A sandbox's learned destinations alive at least until `after`. */
static size_t
lk_live(const struct fw_sbx *x, int64_t after)
{
	size_t	i, n = 0;

	for (i = 0; i < x->lkcap; i++)
		if (x->lk[i].used && x->lk[i].expires_ms >= after)
			n++;
	return n;
}

#define FW_CAP_PRUNE_MS	1000	/* pruning at the cap, at most this often */

/*
 * The learn cap: for each sandbox named in e[0..n), the destinations it
 * would have learned after this batch. Those it has that expired go
 * first (pruned from the index at most once a second, so a sandbox
 * flooding at the cap costs a count, not a rebuild, per batch). 0 when
 * every sandbox stays within fw->learn_cap, else -1 with ENOSPC and err
 * naming the first one over it.
 */
static int
learn_cap_check(struct fw *fw, const struct fw_elem *e, size_t n,
    const char *what, char *err, size_t errlen)
{
	struct fw_sbx	*x;
	struct fw_lkey	 k;
	int64_t		 now = mono_ms();
	size_t		 i, j, add;

	if (fw->learn_cap == 0 || !fw->idx_valid)
		return 0;
	for (i = 0; i < n; i++) {
		/* Once per sandbox: its first element in the batch. */
		for (j = 0; j < i; j++)
			if (strncmp(e[i].ifname, e[j].ifname, FW_IFNAMSIZ) ==
			    0)
				break;
		if (j < i)
			continue;
		x = idx_find(fw, e[i].ifname);
		for (add = 0, j = i; j < n; j++) {
			if (strncmp(e[i].ifname, e[j].ifname, FW_IFNAMSIZ) !=
			    0)
				continue;
			lk_of_elem(&e[j], &k, now);
			if (x == NULL || lk_find(x, &k) == NULL)
				add++;
		}
		if ((x != NULL ? x->nlk : 0) + add <= fw->learn_cap)
			continue;
		if (x == NULL) {
			errno = ENOSPC;
			fw_seterr(err, errlen, "%s: %s would have more than "
			    "%u learned destinations", what, e[i].ifname,
			    fw->learn_cap);
			return -1;
		}
		if (x->lkcapped_ms + FW_CAP_PRUNE_MS <= now) {
			x->lkcapped_ms = now;
			if (lk_rehash(x, x->lkcap, now) == -1) {
				errno = ENOMEM;
				fw_seterr(err, errlen, "%s: out of memory",
				    what);
				return -1;
			}
		}
		if (lk_live(x, now) + add > fw->learn_cap) {
			errno = ENOSPC;
			fw_seterr(err, errlen, "%s: %s would have more than "
			    "%u learned destinations", what, x->ifname,
			    fw->learn_cap);
			return -1;
		}
	}
	return 0;
}

/*
 * check: learn only for registered sandboxes, checked by the kernel in the
 * same batch. A DNS answer can arrive after its sandbox was deleted; its
 * elements, keyed on a link name the next sandbox in that pool slot gets,
 * would open that sandbox to what the old one's policy allowed until they
 * expire. Only the refresh probe, for a name no sandbox has, goes without.
 */
static int
learn_common(struct fw *fw, const struct fw_elem *e, size_t n, int unlearn,
    int check, const char *what, char *err, size_t errlen)
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
	if (check && !unlearn && learn_cap_check(fw, e, n, what, err,
	    errlen) == -1)
		return -1;
	if (fw->refresh == FW_REFRESH_UNKNOWN)
		fw_probe_refresh(fw);
	if (unlearn && fw->destroy == FW_DESTROY_UNKNOWN)
		fw_probe_destroy(fw);
	if (fw_batch_begin(fw, &b) == -1) {
		fw_seterr(err, errlen, "%s: %s", what, strerror(errno));
		return -1;
	}
	if ((check && learn_queue_checks(&b, fw, e, n) == -1) ||
	    learn_batch(&b, fw, e, n, unlearn) == -1) {
		fw_batch_abort(&b);
		errno = ENOMEM;
		fw_seterr(err, errlen, "%s: out of memory", what);
		return -1;
	}
	if (fw_batch_commit(&b, what, err, errlen) == -1)
		return -1;
	idx_learned(fw, e, n, unlearn);
	return 0;
}

int
fw_learn(struct fw *fw, const struct fw_elem *e, size_t n, char *err,
    size_t errlen)
{
	return learn_common(fw, e, n, 0, 1, "fw_learn", err, errlen);
}

int
fw_unlearn(struct fw *fw, const struct fw_elem *e, size_t n, char *err,
    size_t errlen)
{
	return learn_common(fw, e, n, 1, 0, "fw_unlearn", err, errlen);
}

void
fw_set_learn_cap(struct fw *fw, uint32_t cap)
{
	if (fw != NULL)
		fw->learn_cap = cap;
}

int
fw_learned_list(struct fw *fw, const char *ifname, struct fw_learned **out,
    size_t *n, char *err, size_t errlen)
{
	struct fw_learned	*v;
	struct fw_sbx		*x;
	int64_t			 now = mono_ms(), left;
	size_t			 i, k = 0;

	if (fw == NULL || out == NULL || n == NULL || !valid_ifname(ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_learned_list: invalid arguments");
		return -1;
	}
	*out = NULL;
	*n = 0;
	if (!fw->idx_valid) {
		errno = ENOTSUP;
		fw_seterr(err, errlen, "fw_learned_list: no index");
		return -1;
	}
	if ((x = idx_find(fw, ifname)) == NULL || x->nlk == 0)
		return 0;
	if ((v = calloc(x->nlk, sizeof(*v))) == NULL) {
		fw_seterr(err, errlen, "fw_learned_list: out of memory");
		return -1;
	}
	for (i = 0; i < x->lkcap && k < x->nlk; i++) {
		const struct fw_lkey *l = &x->lk[i];

		if (!l->used || (left = l->expires_ms - now) <= 0)
			continue;
		memcpy(v[k].e.ifname, x->ifname, sizeof(v[k].e.ifname));
		v[k].e.family = l->family;
		memcpy(v[k].e.addr, l->addr, sizeof(v[k].e.addr));
		v[k].e.proto = l->proto;
		v[k].e.port_lo = l->port_lo;
		v[k].e.port_hi = l->port_hi;
		v[k].e.flags = l->keep ? FW_ELEM_KEEP : 0;
		v[k].e.timeout_ms = left > UINT32_MAX ? UINT32_MAX :
		    (uint32_t)left;
		v[k].names = l->names != NULL ? l->names : "";
		v[k].nnames = l->nnames;
		k++;
	}
	*out = v;
	*n = k;
	return 0;
}

static int
exp_cb(const struct nlmsghdr *nlh, void *arg)
{
	int64_t			*exp = arg;
	struct nftnl_set	*s;
	struct nftnl_set_elem	*e;
	struct nftnl_set_elems_iter *it;

	if ((s = nftnl_set_alloc()) == NULL)
		return MNL_CB_ERROR;
	if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0) {
		nftnl_set_free(s);
		return MNL_CB_ERROR;
	}
	if ((it = nftnl_set_elems_iter_create(s)) != NULL) {
		if ((e = nftnl_set_elems_iter_next(it)) != NULL)
			*exp = nftnl_set_elem_is_set(e,
			    NFTNL_SET_ELEM_EXPIRATION) ?
			    (int64_t)nftnl_set_elem_get_u64(e,
			    NFTNL_SET_ELEM_EXPIRATION) : 0;
		nftnl_set_elems_iter_destroy(it);
	}
	nftnl_set_free(s);
	return MNL_CB_OK;
}

int64_t
fw_elem_expiration(struct fw *fw, const struct fw_elem *e, char *err,
    size_t errlen)
{
	struct nftnl_set	*s;
	struct nftnl_set_elem	*el;
	struct nlmsghdr		*nlh;
	struct key		 lo, hi;
	int64_t			 exp = -1;
	int			 range;
	char			 set[FW_NAMEMAX];

	if (fw == NULL || e == NULL || (e->family != AF_INET &&
	    e->family != AF_INET6) || !valid_ifname(e->ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_elem_expiration: invalid arguments");
		return -1;
	}
	/* One GETSETELEM for this key (no dump): the cost does not grow
	 * with the set. */
	range = e->port_lo != e->port_hi;
	if (range) {
		size_t alen = e->family == AF_INET ? 4 : 16;
		uint32_t role = e->family == AF_INET ? FW_R_LRANGE4 :
		    FW_R_LRANGE6;

		key_sbx(&lo, role, e->addr, alen, e->proto, e->port_lo);
		key_sbx(&hi, role, e->addr, alen, e->proto, e->port_hi);
		fw_sbx_names(e->ifname, set, NULL);
	} else {
		elem_keys(e, &lo, &hi);
		snprintf(set, sizeof(set), "%s", e->family == AF_INET ?
		    "learned4" : "learned6");
	}
	if ((s = nftnl_set_alloc()) == NULL ||
	    (el = nftnl_set_elem_alloc()) == NULL) {
		nftnl_set_free(s);
		errno = ENOMEM;
		fw_seterr(err, errlen, "fw_elem_expiration: out of memory");
		return -1;
	}
	nftnl_set_set_str(s, NFTNL_SET_TABLE, fw->table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, lo.b, (uint32_t)lo.len);
	if (range)
		nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY_END, hi.b,
		    (uint32_t)hi.len);
	nftnl_set_elem_add(s, el);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETSETELEM, NFPROTO_INET,
	    NLM_F_ACK, fw->seq++);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	if (fw_request(fw, nlh, exp_cb, &exp) == -1) {
		if (errno == ENOENT)
			fw_seterr(err, errlen, "fw_elem_expiration: no such "
			    "element");
		else
			fw_seterr(err, errlen, "fw_elem_expiration: %s",
			    strerror(errno));
		return -1;
	}
	if (exp < 0) {
		errno = ENOENT;
		fw_seterr(err, errlen, "fw_elem_expiration: no such element");
	}
	return exp;
}

/* The probe element: keyed on an interface name no sandbox can have
 * (FW_IFPREFIX + "~probe" is never handed out: the gateway names links
 * sl-<number>). */
static void
probe_elem(struct fw_elem *e, uint32_t timeout_ms)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->ifname, sizeof(e->ifname), "%s~probe", FW_IFPREFIX);
	e->family = AF_INET;
	e->proto = IPPROTO_TCP;
	e->port_lo = e->port_hi = 9;
	e->timeout_ms = timeout_ms;
}

/* Finds out once whether re-adding an element resets its timeout (kernels
 * with element timeout updates, 6.10 and later, do; the update is generic
 * in nf_tables, so probing the hash set answers for the interval sets
 * too). Any failure leaves the safe choice, add + delete + add. */
void
fw_probe_refresh(struct fw *fw)
{
	struct fw_elem	e;
	int64_t		exp;

	probe_elem(&e, 60000);
	fw->refresh = FW_REFRESH_READD;	/* one plain add per call below */
	if (learn_common(fw, &e, 1, 0, 0, "probe", NULL, 0) == -1)
		goto safe;
	e.timeout_ms = 3600000;
	if (learn_common(fw, &e, 1, 0, 0, "probe", NULL, 0) == -1)
		goto safe;
	exp = fw_elem_expiration(fw, &e, NULL, 0);
	(void)learn_common(fw, &e, 1, 1, 0, "probe", NULL, 0);
	if (exp > 600000)
		return;
safe:
	fw->refresh = FW_REFRESH_DELADD;
}

/* Finds out once whether the kernel takes NFT_MSG_DESTROYSETELEM (Linux
 * 6.3): a delete that is no error when the element is gone. Older kernels
 * refuse the unknown message type with EINVAL (or EOPNOTSUPP); any other
 * failure leaves the question open and this call uses the old path. */
static void
fw_probe_destroy(struct fw *fw)
{
	struct fw_batch	b;
	struct fw_elem	e;

	probe_elem(&e, 1000);
	if (fw_batch_begin(fw, &b) == -1)
		return;
	if (learn_queue(&b, fw, &e, 1, NFT_MSG_DESTROYSETELEM, 0) == -1) {
		fw_batch_abort(&b);
		return;
	}
	if (fw_batch_commit(&b, "probe", NULL, 0) == 0)
		fw->destroy = FW_DESTROY_YES;
	else if (errno == EINVAL || errno == EOPNOTSUPP)
		fw->destroy = FW_DESTROY_NO;
}

/* ------------------------------------------------------------ restrict */

/* 1 if the shared one-field set `set` holds ifname, 0 if not, -1 on
 * error (one GETSETELEM, no dump). */
static int
elem_exists(struct fw *fw, const char *set, const char *ifname)
{
	struct nftnl_set	*s;
	struct nftnl_set_elem	*el;
	struct nlmsghdr		*nlh;
	struct key		 k;

	if ((s = nftnl_set_alloc()) == NULL ||
	    (el = nftnl_set_elem_alloc()) == NULL) {
		nftnl_set_free(s);
		errno = ENOMEM;
		return -1;
	}
	key_init(&k, ifname);
	nftnl_set_set_str(s, NFTNL_SET_TABLE, fw->table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, k.b, (uint32_t)k.len);
	nftnl_set_elem_add(s, el);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETSETELEM, NFPROTO_INET,
	    NLM_F_ACK, fw->seq++);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	if (fw_request(fw, nlh, NULL, NULL) == 0)
		return 1;
	return errno == ENOENT ? 0 : -1;
}

int
fw_restrict(struct fw *fw, const char *ifname, const struct fw_rule *keep,
    size_t n, char *err, size_t errlen)
{
	struct fw_batch	 b;
	struct eq	 q;
	struct rdel_ctx	 dc;
	struct key	 k;
	struct fw_rule	*kp;
	struct nftnl_set *old;
	struct rawvec	 rv = { NULL, 0, 0, 0 };
	size_t		 i, nk, npub;
	int		 ret, restricted, v6;
	struct fw_sbx	*sx;
	char		 set[FW_NAMEMAX];

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
	/* As for allows: a keep rule inside a private range opens it
	 * (role PKEEP); kp holds the public ones first. */
	if ((kp = rules_split(fw, keep, n, &nk, &npub)) == NULL) {
		errno = ENOMEM;
		fw_seterr(err, errlen, "fw_restrict: out of memory");
		return -1;
	}
	/* IPv6 rules only for a sandbox with an IPv6 address (unknown
	 * without the index, or for a sandbox another handle registered:
	 * then with them, which only costs; without them the IPv4 rules,
	 * which test no family there, would judge IPv6 packets). */
	sx = fw->idx_valid ? idx_find(fw, ifname) : NULL;
	v6 = sx == NULL || sbx_has_set(sx, "sbx6");
	/* Narrowed already: the rules are in; the keep list is replaced. */
	if ((restricted = elem_exists(fw, "restricted", ifname)) == -1) {
		free(kp);
		fw_seterr(err, errlen, "fw_restrict: %s", strerror(errno));
		return -1;
	}
	/* The old keep rules, to replace (dumped before the batch: a dump
	 * is a request of its own on the same socket). */
	fw_sbx_names(ifname, set, NULL);
	old = NULL;
	if (restricted && (old = dump_set(fw, set)) == NULL) {
		free(kp);
		fw_seterr(err, errlen, "fw_restrict: dump %s: %s", set,
		    strerror(errno));
		return -1;
	}
	if (fw_batch_begin(fw, &b) == -1) {
		free(kp);
		if (old != NULL)
			nftnl_set_free(old);
		fw_seterr(err, errlen, "fw_restrict: %s", strerror(errno));
		return -1;
	}
	/* Keep elements first, then the rules that narrow (at the head of
	 * the sandbox's chain), in one batch: the moment they apply, the
	 * keep list is there. Narrowed already (a reload changed the keep
	 * list): the old keep rules go in the same batch, so no moment has
	 * neither list, and a rule the policy dropped stops at once. */
	if (old != NULL) {
		eq_init(&q, &b, fw->table, set, NFT_MSG_DELSETELEM, 0);
		dc.q = &q;
		dc.want = role_keep;
		each_elem(old, del_roles, &dc);
		nftnl_set_free(old);
		old = NULL;
		if (eq_done(&q) == -1)
			goto oom;
	}
	eq_init(&q, &b, fw->table, set, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
	for (i = 0; i < nk; i++)
		add_rule_tuple(&q, i >= npub ?
		    (kp[i].family == AF_INET6 ? FW_R_PKEEP6 : FW_R_PKEEP4) :
		    (kp[i].family == AF_INET6 ? FW_R_KEEP6 : FW_R_KEEP4),
		    &kp[i]);
	if (eq_done(&q) == -1)
		goto oom;
	if (!restricted && fw_sbx_queue_restrict(&b, fw->table, ifname,
	    v6) == -1)
		goto oom;
	/* @restricted records the narrowing (for this check and for
	 * adoption); no packet looks it up. */
	eq_init(&q, &b, fw->table, "restricted", NFT_MSG_NEWSETELEM,
	    NLM_F_CREATE);
	q.rec = &rv;
	key_init(&k, ifname);
	eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
	if (eq_done(&q) == -1)
		goto oom;
	free(kp);
	if ((ret = fw_batch_commit(&b, "fw_restrict", err, errlen)) == 0)
		idx_commit(fw, ifname, &rv, -1);
	free(rv.v);
	return ret;
oom:
	fw_batch_abort(&b);
	free(rv.v);
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

/* What fw_count_elems calls the roles of the per-sandbox sets (the names
 * the shared sets had before they moved there). */
static const struct {
	const char	*name;
	uint32_t	 role;
} role_names[] = {
	{ "allow4", FW_R_ALLOW4 }, { "allow6", FW_R_ALLOW6 },
	{ "pallow4", FW_R_PALLOW4 }, { "pallow6", FW_R_PALLOW6 },
	{ "sbx_deny4", FW_R_DENY4 }, { "sbx_deny6", FW_R_DENY6 },
	{ "icmp4", FW_R_ICMP4 }, { "keep4", FW_R_KEEP4 },
	{ "keep6", FW_R_KEEP6 }, { "lrange4", FW_R_LRANGE4 },
	{ "lrange6", FW_R_LRANGE6 }, { "lkrange4", FW_R_LKRANGE4 },
	{ "lkrange6", FW_R_LKRANGE6 }, { "pkeep4", FW_R_PKEEP4 },
	{ "pkeep6", FW_R_PKEEP6 }, { NULL, 0 }
};

static uint32_t
role_of(const char *name)
{
	size_t	i;

	for (i = 0; name != NULL && role_names[i].name != NULL; i++)
		if (strcmp(role_names[i].name, name) == 0)
			return role_names[i].role;
	return 0;
}

struct role_ctx {
	uint32_t	role;
	int		n;
};

static int
role_one(struct nftnl_set_elem *e, void *arg)
{
	struct role_ctx	*c = arg;

	if (elem_role(e) == c->role)
		c->n++;
	return 0;
}

/* Elements of role in sandbox ifname's set (0 if it has none), or -1. */
static int
count_role(struct fw *fw, const char *ifname, uint32_t role)
{
	struct nftnl_set	*s;
	struct role_ctx		 c = { role, 0 };
	char			 set[FW_NAMEMAX];

	if (!valid_ifname(ifname))
		return 0;
	fw_sbx_names(ifname, set, NULL);
	if ((s = dump_set(fw, set)) == NULL)
		return errno == ENOENT ? 0 : -1;
	each_elem(s, role_one, &c);
	nftnl_set_free(s);
	return c.n;
}

struct names_ctx {
	char	(*v)[FW_IFNAMSIZ];
	size_t	  n, cap;
	int	  oom;
};

static void
names_add(const char *ifname, const uint8_t addr4[4], void *arg)
{
	struct names_ctx	*c = arg;
	char			(*v)[FW_IFNAMSIZ];

	(void)addr4;
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 64;
		if ((v = reallocarray(c->v, c->cap, sizeof(*v))) == NULL) {
			c->oom = 1;
			return;
		}
		c->v = v;
	}
	snprintf(c->v[c->n++], FW_IFNAMSIZ, "%s", ifname);
}

/* count_role over ifname, or over every registered sandbox when NULL. */
static int
count_role_all(struct fw *fw, const char *ifname, uint32_t role)
{
	struct names_ctx	c = { NULL, 0, 0, 0 };
	size_t			i;
	int			n, total = 0;

	if (ifname != NULL)
		return count_role(fw, ifname, role);
	if (fw_list_sandboxes(fw, names_add, &c, NULL, 0) == -1)
		return -1;
	for (i = 0; i < c.n && !c.oom; i++) {
		if ((n = count_role(fw, c.v[i], role)) == -1) {
			free(c.v);
			return -1;
		}
		total += n;
	}
	free(c.v);
	if (c.oom) {
		errno = ENOMEM;
		return -1;
	}
	return total;
}

int
fw_count_elems(struct fw *fw, const char *set, const char *ifname, char *err,
    size_t errlen)
{
	const struct fw_setdef	*d;
	struct nftnl_set	*s;
	struct count_ctx	 c = { ifname, 0 };
	uint32_t		 role;
	int			 n;

	if (fw == NULL || set == NULL) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_count_elems: invalid arguments");
		return -1;
	}
	d = fw_setdef(set);
	role = role_of(d != NULL ? d->also : set);
	if (d == NULL && role == 0) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_count_elems: invalid arguments");
		return -1;
	}
	if (d != NULL) {
		if ((s = dump_set(fw, d->name)) == NULL) {
			fw_seterr(err, errlen, "fw_count_elems: %s",
			    strerror(errno));
			return -1;
		}
		each_elem(s, count_one, &c);
		nftnl_set_free(s);
	}
	/* A learned hash set and its ranges in the sandboxes' sets count
	 * as one, as do the names of the roles there. */
	if (role != 0) {
		if ((n = count_role_all(fw, ifname, role)) == -1) {
			fw_seterr(err, errlen, "fw_count_elems: %s",
			    strerror(errno));
			return -1;
		}
		c.n += n;
	}
	return c.n;
}

/* -------------------------------------------------------- index rebuild */

struct rebuild_ctx {
	struct fw	*fw;
	int		 set, learned, keep, six, fail;
	int64_t		 now;
};

static int
rebuild_one(struct nftnl_set_elem *e, void *arg)
{
	struct rebuild_ctx	*c = arg;
	const uint8_t		*key, *kend = NULL;
	uint32_t		 klen = 0, elen = 0;
	size_t			 want = fw_keylen(&fw_sets[c->set]);
	size_t			 alen = c->six ? 16 : 4;
	struct fw_sbx		*x;
	struct fw_raw		 r;
	struct fw_lkey		 k;
	char			 name[FW_IFNAMSIZ];
	uint16_t		 port;

	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END))
		kend = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &elen);
	/* Not one of ours (or an interval end of a layout we do not
	 * write): it cannot be deleted by key, so the index would lie. */
	if (key == NULL || klen != want || klen > FW_RAWKEY ||
	    (kend != NULL && elen != klen)) {
		c->fail = 1;
		return 1;
	}
	memcpy(name, key, FW_IFNAMSIZ);
	name[FW_IFNAMSIZ - 1] = '\0';
	if ((x = idx_get(c->fw, name)) == NULL) {
		c->fail = 1;
		return 1;
	}
	if (c->learned) {
		memset(&k, 0, sizeof(k));
		k.family = c->six ? AF_INET6 : AF_INET;
		memcpy(k.addr, key + FW_IFNAMSIZ, alen);
		k.proto = key[FW_IFNAMSIZ + alen];
		memcpy(&port, key + FW_IFNAMSIZ + alen + 4, 2);
		k.port_lo = k.port_hi = ntohs(port);
		if (kend != NULL) {
			memcpy(&port, kend + FW_IFNAMSIZ + alen + 4, 2);
			k.port_hi = ntohs(port);
		}
		k.keep = (uint8_t)c->keep;
		k.expires_ms = c->now;
		if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_EXPIRATION))
			k.expires_ms += (int64_t)nftnl_set_elem_get_u64(e,
			    NFTNL_SET_ELEM_EXPIRATION);
		if (sbx_lk_put(x, &k, NULL) == -1)
			c->fail = 1;
		return c->fail;
	}
	memset(&r, 0, sizeof(r));
	r.set = (uint8_t)c->set;
	memcpy(r.key, key, klen);
	if (kend != NULL) {
		r.has_end = 1;
		memcpy(r.kend, kend, klen);
	}
	if (sbx_raw_add(x, &r) == -1)
		c->fail = 1;
	else if (strcmp(fw_sets[c->set].name, "quota") == 0)
		x->quota = 1;
	return c->fail;
}

/*
 * fw_idx_rebuild: after adopting a table, learns what it holds per
 * sandbox from one dump of each per-sandbox set, so that a restarted
 * daemon still deletes everything. 0, or -1 (errno) with the index
 * cleared; the caller then marks it invalid.
 */
int
fw_idx_rebuild(struct fw *fw)
{
	const struct fw_setdef	*d;
	struct nftnl_set	*s;
	struct rebuild_ctx	 c;

	fw_idx_clear(fw);
	for (d = fw_sets; d->name != NULL; d++) {
		if (!d->persistent)
			continue;
		memset(&c, 0, sizeof(c));
		c.fw = fw;
		c.set = (int)(d - fw_sets);
		c.learned = strncmp(d->name, "learned", 7) == 0 ||
		    strncmp(d->name, "lkeep", 5) == 0;
		c.keep = d->name[0] == 'l' && d->name[1] == 'k';
		c.six = d->name[strlen(d->name) - 1] == '6';
		c.now = mono_ms();
		if ((s = dump_set(fw, d->name)) == NULL) {
			fw_idx_clear(fw);
			return -1;
		}
		each_elem(s, rebuild_one, &c);
		nftnl_set_free(s);
		if (c.fail) {
			fw_idx_clear(fw);
			errno = EPROTO;
			return -1;
		}
	}
	return 0;
}
