/*
 * sbxtab.c: the children's sandbox table (see sbxtab.h): fixed buckets of
 * chains, an entry a small allocation holding the address and the
 * caller's bytes. Thousands of sandboxes make short chains; the table is
 * bounded by the parent's own table, which the messages follow.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/privsep/sbxtab.h"

#define SBXTAB_BUCKETS	4096u

struct sbxtab_ent {
	struct sbxtab_ent	*next;
	uint8_t			 addr4[4];
	_Alignas(max_align_t) unsigned char data[];
};

struct sbxtab {
	size_t			 size;
	struct sbxtab_ent	*b[SBXTAB_BUCKETS];
};

static uint32_t
hash(const uint8_t a[4])
{
	uint32_t h;

	memcpy(&h, a, 4);
	h ^= h >> 16;
	h *= 0x45d9f3bu;
	h ^= h >> 16;
	return h % SBXTAB_BUCKETS;
}

static struct sbxtab_ent **
find(const struct sbxtab *t, const uint8_t a[4])
{
	struct sbxtab_ent **pp = (struct sbxtab_ent **)&t->b[hash(a)];

	for (; *pp != NULL; pp = &(*pp)->next)
		if (memcmp((*pp)->addr4, a, 4) == 0)
			return pp;
	return pp;
}

struct sbxtab *
sbxtab_new(size_t entry_size)
{
	struct sbxtab *t;

	if ((t = calloc(1, sizeof(*t))) != NULL)
		t->size = entry_size;
	return t;
}

void
sbxtab_free(struct sbxtab *t)
{
	struct sbxtab_ent *e;
	size_t i;

	if (t == NULL)
		return;
	for (i = 0; i < SBXTAB_BUCKETS; i++)
		while ((e = t->b[i]) != NULL) {
			t->b[i] = e->next;
			free(e);
		}
	free(t);
}

void *
sbxtab_get(const struct sbxtab *t, const uint8_t addr4[4])
{
	struct sbxtab_ent *e = *find(t, addr4);

	return e != NULL ? e->data : NULL;
}

void *
sbxtab_put(struct sbxtab *t, const uint8_t addr4[4], int *made)
{
	struct sbxtab_ent **pp = find(t, addr4), *e;

	*made = 0;
	if ((e = *pp) == NULL) {
		if ((e = calloc(1, sizeof(*e) + t->size)) == NULL) {
			errno = ENOMEM;
			return NULL;
		}
		memcpy(e->addr4, addr4, 4);
		*pp = e;
		*made = 1;
	}
	return e->data;
}

void
sbxtab_del(struct sbxtab *t, const uint8_t addr4[4])
{
	struct sbxtab_ent **pp = find(t, addr4), *e;

	if ((e = *pp) == NULL)
		return;
	*pp = e->next;
	free(e);
}

void *
sbxtab_lookup(const struct sbxtab *t, const uint8_t addr4[4], struct chan *ch,
    const uint32_t *types, size_t ntypes)
{
	void *p;

	if ((p = sbxtab_get(t, addr4)) != NULL)
		return p;
	if (ch == NULL || chan_take(ch, types, ntypes) == 0)
		return NULL;
	return sbxtab_get(t, addr4);
}
