/*
 * fw_index.c: what this handle put in the table, per ifname.
 *
 * Why this file exists: a record of what the handle added for each
 * sandbox lets it work without asking the kernel: fw_sandbox.c removes a
 * sandbox by key, fw_learn.c spares the sandboxes the handle registered
 * the kernel's check on learning, counts their learn cap and lists what
 * they learned. The index follows each committed batch (fw_idx_commit,
 * fw_idx_learned) and, when fw_init adopts a table, is rebuilt from one
 * dump per set (fw_idx_rebuild); a handle whose index could not keep up
 * (out of memory, an element it cannot read) stops trusting it
 * (fw->idx_valid), and its callers go through dumps instead. A sandbox's
 * own set and chain go by name and are not in it.
 */
#include <arpa/inet.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libnftnl/set.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

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

int64_t
fw_mono_ms(void)
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

struct fw_sbx *
fw_idx_find(struct fw *fw, const char *ifname)
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

void
fw_idx_drop(struct fw *fw, const char *ifname)
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
		if (set == fw_set_index(*names))
			return 1;
	return 0;
}

/* Forgets the raw elements of x that are in one of the sets names. */
void
fw_sbx_raw_forget(struct fw_sbx *x, const char *const *names)
{
	size_t	i, m = 0;

	for (i = 0; i < x->nraw; i++)
		if (!set_in(x->raw[i].set, names))
			x->raw[m++] = x->raw[i];
	x->nraw = m;
}

int
fw_sbx_has_set(const struct fw_sbx *x, const char *name)
{
	int	set = fw_set_index(name);
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

struct fw_lkey *
fw_lk_find(struct fw_sbx *x, const struct fw_lkey *k)
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
int
fw_lk_rehash(struct fw_sbx *x, size_t cap, int64_t before)
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

	if ((o = fw_lk_find(x, k)) != NULL) {
		o->keep |= k->keep;
		if (k->expires_ms > o->expires_ms)
			o->expires_ms = k->expires_ms;
		return lk_name_add(o, name);
	}
	/* Amortised pruning: only when the table doubled since the last. */
	if (x->nlk >= x->lkprune && x->nlk >= 64) {
		if (fw_lk_rehash(x, x->lkcap,
		    fw_mono_ms() - FW_PRUNE_SLACK_MS) == -1)
			return -1;
		x->lkprune = x->nlk * 2;
	}
	if ((x->nlk + 1) * 2 > x->lkcap) {
		cap = x->lkcap ? x->lkcap * 2 : 16;
		if (fw_lk_rehash(x, cap, 0) == -1)
			return -1;
	}
	lk_place(x->lk, x->lkcap, k);
	x->nlk++;
	return lk_name_add(fw_lk_find(x, k), name);
}

static void
sbx_lk_del(struct fw_sbx *x, const struct fw_lkey *k)
{
	struct fw_lkey	*o, tmp;
	size_t		 i, mask;

	if ((o = fw_lk_find(x, k)) == NULL)
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

void
fw_lk_of_elem(const struct fw_elem *e, struct fw_lkey *k, int64_t now)
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

/* Notes in the index what a committed batch added for ifname: the raw
 * elements in rv and, when quota >= 0, whether the quota object exists.
 * If the index cannot hold it, the handle stops trusting its index and
 * deletes through dumps from then on (correct, only slower). */
void
fw_idx_commit(struct fw *fw, const char *ifname, struct fw_rawvec *rv,
    int quota)
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

/* After a committed learn or unlearn: the index follows the kernel. */
void
fw_idx_learned(struct fw *fw, const struct fw_elem *e, size_t n, int unlearn)
{
	struct fw_sbx	*x;
	struct fw_lkey	 k;
	int64_t		 now = fw_mono_ms();
	size_t		 i;

	if (!fw->idx_valid)
		return;
	for (i = 0; i < n; i++) {
		fw_lk_of_elem(&e[i], &k, now);
		if (unlearn) {
			if ((x = fw_idx_find(fw, e[i].ifname)) != NULL)
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
		c.now = fw_mono_ms();
		if ((s = fw_dump_set(fw, d->name)) == NULL) {
			fw_idx_clear(fw);
			return -1;
		}
		fw_each_elem(s, rebuild_one, &c);
		nftnl_set_free(s);
		if (c.fail) {
			fw_idx_clear(fw);
			errno = EPROTO;
			return -1;
		}
	}
	return 0;
}
