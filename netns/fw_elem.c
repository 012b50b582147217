/*
 * fw_elem.c: how per-sandbox state is written as set elements.
 *
 * Why this file exists: the rules of fw_rules.c never change while the
 * daemon runs; what a sandbox may reach is in set elements (of its own set
 * s_<ifname> and of the shared sets), and this file is the only place that
 * encodes them. It checks the flat rules and elements callers pass, builds
 * their keys, merges rules and ranges into the non-overlapping intervals
 * the kernel takes, and queues elements into a batch in messages of
 * bounded size (struct fw_eq), noting what it queued for the per-ifname
 * index (fw_index.c) when asked. Which elements a sandbox gets is decided
 * by fw_sandbox.c, fw_learn.c and fw_restrict.c; fw_dump.c reads them back.
 *
 * Key layout of the shared sets (each field padded to 4 bytes, as nft
 * registers are): ifname[16] . addr[4|16] . l4proto[1+3] . port[2+2]
 * (network order); of the per-sandbox sets, see fw_int.h.
 */
#include <arpa/inet.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void
fw_rawvec_add(struct fw_rawvec *rv, int set, const void *key, size_t klen,
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
eq_flush(struct fw_eq *q)
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

void
fw_eq_init(struct fw_eq *q, struct fw_batch *b, const char *table,
    const char *set, uint16_t type, uint16_t flags)
{
	memset(q, 0, sizeof(*q));
	q->b = b;
	q->table = table;
	q->set = set;
	q->type = type;
	q->flags = flags;
	q->setidx = fw_set_index(set);
}

/* Adds one element; keyend may be NULL. timeout_ms 0 = none. */
void
fw_eq_add(struct fw_eq *q, const void *key, size_t klen, const void *keyend,
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
	if (q->data != NULL)
		nftnl_set_elem_set(e, NFTNL_SET_ELEM_DATA, q->data, q->dlen);
	if (q->rec != NULL)
		fw_rawvec_add(q->rec, q->setidx, key, klen, keyend);
	/* From here the set owns e. */
	nftnl_set_elem_add(q->s, e);
	if (++q->n >= FW_ELEMS_PER_MSG)
		eq_flush(q);
}

int
fw_eq_done(struct fw_eq *q)
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
	struct fw_eq	 q;
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
	fw_eq_init(&q, b, table, set, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
	for (i = 0; i <= m; i++) {
		/* The rbtree encoding: a start element, and an end element
		 * one past the range (none when the range reaches the top). */
		fw_eq_add(&q, r[i].lo, alen, NULL, 0, 0, NULL);
		memcpy(next, r[i].hi, alen);
		if (!addr_inc(next, alen))
			fw_eq_add(&q, next, alen, NULL,
			    NFT_SET_ELEM_INTERVAL_END, 0, NULL);
	}
	return fw_eq_done(&q);
}

/* ----------------------------------------------------------------- keys */

int
fw_valid_ifname(const char *ifname)
{
	size_t	len;

	if (ifname == NULL)
		return 0;
	len = strnlen(ifname, FW_IFNAMSIZ);
	if (len >= FW_IFNAMSIZ || len <= sizeof(FW_IFPREFIX) - 1)
		return 0;
	return strncmp(ifname, FW_IFPREFIX, sizeof(FW_IFPREFIX) - 1) == 0;
}

void
fw_key_init(struct fw_key *k, const char *ifname)
{
	memset(k, 0, sizeof(*k));
	memcpy(k->b, ifname, strnlen(ifname, FW_IFNAMSIZ - 1));
	k->len = FW_IFNAMSIZ;
}

void
fw_key_put(struct fw_key *k, const void *p, size_t n)
{
	memcpy(k->b + k->len, p, n);
	k->len += (n + 3) & ~(size_t)3;
}

static void
key_tuple(struct fw_key *k, const char *ifname, const uint8_t *addr,
    size_t alen, uint8_t proto, uint16_t port)
{
	uint16_t	be = htons(port);

	fw_key_init(k, ifname);
	fw_key_put(k, addr, alen);
	fw_key_put(k, &proto, 1);
	fw_key_put(k, &be, 2);
}

void
fw_elem_keys(const struct fw_elem *e, struct fw_key *lo, struct fw_key *hi)
{
	size_t	alen = e->family == AF_INET ? 4 : 16;

	key_tuple(lo, e->ifname, e->addr, alen, e->proto, e->port_lo);
	key_tuple(hi, e->ifname, e->addr, alen, e->proto, e->port_hi);
}

int
fw_valid_rule(const struct fw_rule *r, int allow_icmp)
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

int
fw_valid_elem(const struct fw_elem *e)
{
	if (!fw_valid_ifname(e->ifname))
		return 0;
	if (e->family != AF_INET && e->family != AF_INET6)
		return 0;
	if (e->proto != IPPROTO_TCP && e->proto != IPPROTO_UDP)
		return 0;
	if (e->budget > FW_MAX_BUDGETS)
		return 0;
	return e->port_lo <= e->port_hi && e->timeout_ms > 0;
}

/* A key of the per-sandbox set (layout in fw_int.h). */
void
fw_key_sbx(struct fw_key *k, uint32_t role, const uint8_t *addr, size_t alen,
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
void
fw_add_rule_tuple(struct fw_eq *q, uint32_t role, const struct fw_rule *r)
{
	struct fw_key	klo, khi;
	uint8_t		lo[16], hi[16];
	size_t		alen = r->family == AF_INET ? 4 : 16;

	(void)fw_cidr_range(r->family, r->addr, r->prefix, lo, hi);
	fw_key_sbx(&klo, role, lo, alen, r->proto, r->port_lo);
	fw_key_sbx(&khi, role, hi, alen, r->proto, r->port_hi);
	fw_eq_add(q, klo.b, klo.len, khi.b, 0, 0, NULL);
}

/* The same for a CIDR without ports (denies, ICMP): proto and port 0. */
void
fw_add_rule_cidr(struct fw_eq *q, uint32_t role, const struct fw_rule *r)
{
	struct fw_key	klo, khi;
	uint8_t		lo[16], hi[16];
	size_t		alen = r->family == AF_INET ? 4 : 16;

	(void)fw_cidr_range(r->family, r->addr, r->prefix, lo, hi);
	fw_key_sbx(&klo, role, lo, alen, 0, 0);
	fw_key_sbx(&khi, role, hi, alen, 0, 0);
	fw_eq_add(q, klo.b, klo.len, khi.b, 0, 0, NULL);
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
int
fw_rule_private(const struct fw *fw, const struct fw_rule *r)
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
struct fw_rule *
fw_rules_normalize(const struct fw_rule *in, size_t n, size_t *outn)
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
 * fw_rules_split: in[0..n) normalised in two groups, in one malloc'ed array
 * (caller frees; *nout rules): first the public ones (*npub of them), then
 * those lying wholly inside a private range (ICMP counts as public). A
 * private one opens its range (roles PALLOW, PKEEP) and so must not be
 * folded into a broader public rule, hence the groups are normalised
 * apart. NULL (ENOMEM) on failure.
 */
struct fw_rule *
fw_rules_split(const struct fw *fw, const struct fw_rule *in, size_t n,
    size_t *nout, size_t *npub)
{
	struct fw_rule	*tmp, *pub, *prv, *out = NULL;
	size_t		 i, k = 0, npubin, nprv;

	if ((tmp = calloc(n + 1, sizeof(*tmp))) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if (in[i].proto == IPPROTO_ICMP || !fw_rule_private(fw, &in[i]))
			tmp[k++] = in[i];
	npubin = k;
	for (i = 0; i < n; i++)
		if (in[i].proto != IPPROTO_ICMP && fw_rule_private(fw, &in[i]))
			tmp[k++] = in[i];
	pub = fw_rules_normalize(tmp, npubin, npub);
	prv = fw_rules_normalize(tmp + npubin, k - npubin, &nprv);
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
