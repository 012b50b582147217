/*
 * flowrec_tab.c: the tables flow records keep between a flow's events
 * (see flowrec_int.h): the open flows (what their records carried so far,
 * their name) and the names DNS answers opened destinations for. Apart
 * from flowrec.c so that the bounds and the chains are read in one place:
 * each table is counted per sandbox and in all, and an entry past a bound
 * is refused and counted, never taken from another sandbox.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/flowrec_int.h"

static uint32_t
hkey(uint32_t seed, const uint8_t *p, size_t n)
{
	uint32_t v = seed ^ 2166136261u;

	while (n-- > 0)
		v = (v ^ *p++) * 16777619u;
	v ^= v >> 15;
	v *= 0x2c1b3c6du;
	v ^= v >> 12;
	return v;
}

void
frt_key(uint8_t k[FR_KEYLEN], const struct ct_flow *f)
{
	memcpy(k, f->src, 4);
	memcpy(k + 4, f->dst, 4);
	memcpy(k + 8, &f->sport, 2);
	memcpy(k + 10, &f->dport, 2);
	k[12] = f->proto;
}

/* ---------------------------------------------------------------- flows */

static struct fr_flow **
flow_slot(struct flowrec *fr, const uint8_t k[FR_KEYLEN])
{
	struct fr_flow **pp;

	pp = &fr->fh[hkey(fr->seed, k, FR_KEYLEN) % FR_FLOW_BUCKETS];
	while (*pp != NULL && memcmp((*pp)->key, k, FR_KEYLEN) != 0)
		pp = &(*pp)->hnext;
	return pp;
}

struct fr_flow *
frt_flow(struct flowrec *fr, const uint8_t k[FR_KEYLEN])
{
	return *flow_slot(fr, k);
}

static void
due_unlink(struct fr_flow *f)
{
	struct fr_sbx *s = f->s;

	if (f->prev != NULL)
		f->prev->next = f->next;
	else
		s->due = f->next;
	if (f->next != NULL)
		f->next->prev = f->prev;
	else
		s->due_tail = f->prev;
	f->prev = f->next = NULL;
}

static void
due_append(struct fr_flow *f)
{
	struct fr_sbx *s = f->s;

	f->next = NULL;
	f->prev = s->due_tail;
	if (s->due_tail != NULL)
		s->due_tail->next = f;
	else
		s->due = f;
	s->due_tail = f;
}

struct fr_flow *
frt_flow_add(struct flowrec *fr, struct fr_sbx *s, const uint8_t k[FR_KEYLEN],
    uint64_t due_ms)
{
	struct fr_flow **pp = flow_slot(fr, k), *f;

	if (*pp != NULL)
		return *pp;
	if (s->nflows >= FLOWREC_FLOWS || fr->nflows >= FLOWREC_FLOWS_ALL ||
	    (f = calloc(1, sizeof(*f))) == NULL) {
		s->untracked++;
		return NULL;
	}
	memcpy(f->key, k, FR_KEYLEN);
	f->s = s;
	f->due_ms = due_ms;
	*pp = f;
	due_append(f);
	s->nflows++;
	fr->nflows++;
	return f;
}

void
frt_flow_due(struct fr_flow *f, uint64_t due_ms)
{
	due_unlink(f);
	f->due_ms = due_ms;
	due_append(f);
}

void
frt_flow_set_name(struct fr_flow *f, const char *name, enum fr_src src)
{
	char *n = NULL;

	if (name != NULL && name[0] != '\0' &&
	    (n = strndup(name, 255)) == NULL)
		return;		/* the old name stays: better than none */
	free(f->name);
	f->name = n;
	f->src = n != NULL ? (uint8_t)src : FR_SRC_NONE;
}

void
frt_flow_del(struct flowrec *fr, struct fr_flow *f)
{
	struct fr_flow **pp = flow_slot(fr, f->key);

	if (*pp == f)
		*pp = f->hnext;
	due_unlink(f);
	f->s->nflows--;
	fr->nflows--;
	free(f->name);
	free(f);
}

/* ---------------------------------------------------------------- names */

static uint32_t
learn_bucket(const struct flowrec *fr, const uint8_t sbx[4],
    const uint8_t dst[4])
{
	uint8_t k[8];

	memcpy(k, sbx, 4);
	memcpy(k + 4, dst, 4);
	return hkey(fr->seed, k, sizeof(k)) % FR_LEARN_BUCKETS;
}

static void
learn_free(struct flowrec *fr, struct fr_sbx *s, struct fr_learn *l)
{
	struct fr_learn **pp = &fr->lh[learn_bucket(fr, l->sbx, l->dst)];

	while (*pp != NULL && *pp != l)
		pp = &(*pp)->hnext;
	if (*pp == l)
		*pp = l->hnext;
	s->nlearned--;
	fr->nlearned--;
	free(l->name);
	free(l);
}

/* Drops what expired of s's learned names. */
static void
learn_prune(struct flowrec *fr, struct fr_sbx *s, uint64_t now_ms)
{
	struct fr_learn **pp = &s->learned, *l;

	while ((l = *pp) != NULL) {
		if (l->expires_ms > now_ms) {
			pp = &l->snext;
			continue;
		}
		*pp = l->snext;
		learn_free(fr, s, l);
	}
	s->lpruned_ms = now_ms;
}

void
frt_learn_put(struct flowrec *fr, struct fr_sbx *s, const uint8_t dst[4],
    uint8_t proto, uint16_t lo, uint16_t hi, uint64_t expires_ms,
    const char *name, uint64_t now_ms)
{
	uint32_t b = learn_bucket(fr, s->addr, dst);
	struct fr_learn *l;
	char *n;

	if (name == NULL || name[0] == '\0')
		return;
	for (l = fr->lh[b]; l != NULL; l = l->hnext)
		if (memcmp(l->sbx, s->addr, 4) == 0 &&
		    memcmp(l->dst, dst, 4) == 0 && l->proto == proto &&
		    l->lo == lo && l->hi == hi)
			break;
	if (l != NULL) {
		/* The answer that came last is the one the sandbox uses. */
		if (strcmp(l->name, name) != 0) {
			if ((n = strndup(name, 255)) == NULL)
				return;
			free(l->name);
			l->name = n;
		}
		l->expires_ms = expires_ms;
		return;
	}
	/* A full table is looked through for the expired at most once a
	 * second, so a sandbox at its bound costs no walk per answer. */
	if (s->nlearned >= FLOWREC_LEARNED && now_ms - s->lpruned_ms >= 1000)
		learn_prune(fr, s, now_ms);
	if (s->nlearned >= FLOWREC_LEARNED ||
	    fr->nlearned >= FLOWREC_LEARNED_ALL ||
	    (l = calloc(1, sizeof(*l))) == NULL) {
		s->unlearned++;
		return;
	}
	if ((l->name = strndup(name, 255)) == NULL) {
		free(l);
		s->unlearned++;
		return;
	}
	memcpy(l->sbx, s->addr, 4);
	memcpy(l->dst, dst, 4);
	l->proto = proto;
	l->lo = lo;
	l->hi = hi;
	l->expires_ms = expires_ms;
	l->hnext = fr->lh[b];
	fr->lh[b] = l;
	l->snext = s->learned;
	s->learned = l;
	s->nlearned++;
	fr->nlearned++;
}

const char *
frt_learn_name(struct flowrec *fr, const struct fr_sbx *s,
    const uint8_t dst[4], uint8_t proto, uint16_t port, uint64_t now_ms)
{
	const struct fr_learn *l, *best = NULL;

	for (l = fr->lh[learn_bucket(fr, s->addr, dst)]; l != NULL;
	    l = l->hnext)
		if (memcmp(l->sbx, s->addr, 4) == 0 &&
		    memcmp(l->dst, dst, 4) == 0 && l->proto == proto &&
		    port >= l->lo && port <= l->hi && l->expires_ms > now_ms &&
		    (best == NULL || l->expires_ms > best->expires_ms))
			best = l;
	return best != NULL ? best->name : NULL;
}

void
frt_sbx_clear(struct flowrec *fr, struct fr_sbx *s)
{
	struct fr_learn *l;

	while (s->due != NULL)
		frt_flow_del(fr, s->due);
	while ((l = s->learned) != NULL) {
		s->learned = l->snext;
		learn_free(fr, s, l);
	}
}
