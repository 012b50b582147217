/*
 * gate_ech.c: the name gate's store of the ECH configs names publish (see
 * gate_ech.h). A chained hash by name, and per sandbox link the counts
 * that bound what its answers make.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/dns/gate_ech.h"

#define GECH_BUCKETS	4096u
#define GECH_OWNERS	256u

struct gech_owner {
	struct gech_owner	*next;
	char			 ifname[16];
	uint32_t		 entries, pending;
};

struct gech_ent {
	struct gech_ent		*next;
	char			*name;
	char			 owner[16];	/* charged with the entry */
	char			 powner[16];	/* charged with the lookup */
	enum gech_state		 state;
	uint64_t		 expires_ms;	/* KNOWN, FAILED */
	struct ech_set		*set;		/* NULL: publishes none */
};

struct gech {
	struct gech_ent		*b[GECH_BUCKETS];
	struct gech_owner	*o[GECH_OWNERS];
	size_t			 n, pending;
};

static uint32_t
hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

struct gech *
gech_new(void)
{
	return calloc(1, sizeof(struct gech));
}

void
gech_free(struct gech *e)
{
	struct gech_ent *x, *nx;
	struct gech_owner *o, *no;
	size_t i;

	if (e == NULL)
		return;
	for (i = 0; i < GECH_BUCKETS; i++)
		for (x = e->b[i]; x != NULL; x = nx) {
			nx = x->next;
			free(x->name);
			free(x->set);
			free(x);
		}
	for (i = 0; i < GECH_OWNERS; i++)
		for (o = e->o[i]; o != NULL; o = no) {
			no = o->next;
			free(o);
		}
	free(e);
}

static struct gech_owner *
owner(struct gech *e, const char *ifname, bool make)
{
	struct gech_owner **pp = &e->o[hash(ifname) % GECH_OWNERS], *o;

	for (o = *pp; o != NULL; o = o->next)
		if (strncmp(o->ifname, ifname, sizeof(o->ifname)) == 0)
			return o;
	if (!make || (o = calloc(1, sizeof(*o))) == NULL)
		return NULL;
	strncpy(o->ifname, ifname, sizeof(o->ifname) - 1);
	o->next = *pp;
	*pp = o;
	return o;
}

/* An owner with nothing charged to it goes: links come and go with
 * sandboxes. */
static void
owner_release(struct gech *e, struct gech_owner *o)
{
	struct gech_owner **pp;

	if (o == NULL || o->entries > 0 || o->pending > 0)
		return;
	for (pp = &e->o[hash(o->ifname) % GECH_OWNERS]; *pp != NULL;
	    pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			free(o);
			return;
		}
}

static struct gech_ent *
find(struct gech *e, const char *name)
{
	struct gech_ent *x;

	for (x = e->b[hash(name) % GECH_BUCKETS]; x != NULL; x = x->next)
		if (strcmp(x->name, name) == 0)
			return x;
	return NULL;
}

static void
set_pending(struct gech *e, struct gech_ent *x, struct gech_owner *o)
{
	x->state = GECH_PENDING;
	memcpy(x->powner, o->ifname, sizeof(x->powner));
	o->pending++;
	e->pending++;
}

bool
gech_want(struct gech *e, const char *own, const char *name, uint64_t now)
{
	struct gech_owner *o;
	struct gech_ent *x;
	uint32_t h;

	if (e == NULL || own == NULL || name == NULL || name[0] == '\0')
		return false;
	x = find(e, name);
	if (x != NULL && (x->state == GECH_PENDING || x->expires_ms > now))
		return false;
	if (e->pending >= GECH_PENDING_MAX ||
	    (o = owner(e, own, true)) == NULL)
		return false;
	if (o->pending >= GECH_PENDING_OWNER) {
		owner_release(e, o);
		return false;
	}
	if (x != NULL) {
		/* A refresh: the entry stays charged to whoever made it,
		 * the lookup to whoever asks now. */
		set_pending(e, x, o);
		return true;
	}
	if (e->n >= GECH_MAX || o->entries >= GECH_PER_OWNER) {
		owner_release(e, o);
		return false;
	}
	if ((x = calloc(1, sizeof(*x))) == NULL ||
	    (x->name = strdup(name)) == NULL) {
		free(x);
		owner_release(e, o);
		return false;
	}
	h = hash(name) % GECH_BUCKETS;
	x->next = e->b[h];
	e->b[h] = x;
	e->n++;
	memcpy(x->owner, o->ifname, sizeof(x->owner));
	o->entries++;
	set_pending(e, x, o);
	return true;
}

int
gech_done(struct gech *e, const char *name, int status,
    const struct ech_set *set, uint32_t ttl_s, uint64_t now)
{
	struct gech_ent *x;
	struct gech_owner *o;
	struct ech_set *copy = NULL;

	if (e == NULL || name == NULL || (x = find(e, name)) == NULL ||
	    x->state != GECH_PENDING)
		return 0;
	if ((o = owner(e, x->powner, false)) != NULL && o->pending > 0) {
		o->pending--;
		owner_release(e, o);
	}
	e->pending--;
	free(x->set);
	x->set = NULL;
	/* No memory for the configs is a failure: unknown, so refused. */
	if (status == 0 && set != NULL && set->n > 0) {
		if ((copy = malloc(sizeof(*copy))) == NULL)
			status = -1;
		else {
			*copy = *set;
			x->set = copy;
		}
	}
	if (status == 0) {
		if (ttl_s < GECH_TTL_MIN_S)
			ttl_s = GECH_TTL_MIN_S;
		if (ttl_s > GECH_TTL_MAX_S)
			ttl_s = GECH_TTL_MAX_S;
		x->state = GECH_KNOWN;
		x->expires_ms = now + (uint64_t)ttl_s * 1000u;
	} else {
		x->state = GECH_FAILED;
		x->expires_ms = now + GECH_FAIL_S * 1000u;
	}
	return 1;
}

enum gech_state
gech_get(struct gech *e, const char *name, uint64_t now,
    const struct ech_set **set)
{
	struct gech_ent *x;

	*set = NULL;
	if (e == NULL || (x = find(e, name)) == NULL)
		return GECH_UNKNOWN;
	/* A failure is not remembered past its retry time; a known set is
	 * used until the sweep takes it (a refresh replaces it sooner). */
	if (x->state == GECH_FAILED && x->expires_ms <= now)
		return GECH_UNKNOWN;
	*set = x->set;
	return x->state;
}

void
gech_sweep(struct gech *e, uint64_t now)
{
	struct gech_ent **pp, *x;
	struct gech_owner *o;
	size_t i;

	if (e == NULL)
		return;
	for (i = 0; i < GECH_BUCKETS; i++) {
		pp = &e->b[i];
		while ((x = *pp) != NULL) {
			if (x->state == GECH_PENDING ||
			    x->expires_ms + GECH_STALE_MS > now) {
				pp = &x->next;
				continue;
			}
			*pp = x->next;
			e->n--;
			if ((o = owner(e, x->owner, false)) != NULL) {
				if (o->entries > 0)
					o->entries--;
				owner_release(e, o);
			}
			free(x->name);
			free(x->set);
			free(x);
		}
	}
}
