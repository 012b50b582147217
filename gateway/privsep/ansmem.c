/*
 * ansmem.c: the parent's copy of the name gate's answers (ansmem.h).
 * One hash of answers by their whole key, for the refresh of one answer
 * on every learn (the parent's hot path: one lookup per element), and per
 * sandbox a list in the order answers were learned or refreshed, which
 * is the order the bound drops them in and a sandbox's removal walks.
 */
#include <sys/queue.h>
#include <sys/socket.h>

#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/privsep/ansmem.h"

#define AM_SBX_BUCKETS	1024u
#define AM_MIN_BUCKETS	1024u

struct am_sbx;

struct am_ent {
	struct am_ent		*hnext;		/* hash chain */
	TAILQ_ENTRY(am_ent)	 q;		/* its sandbox's, oldest first */
	struct am_sbx		*sbx;
	uint32_t		 hash;
	uint8_t			 family, proto;
	uint16_t		 lo, hi;
	uint8_t			 addr[16];
	uint64_t		 expires_ms;
	char			 name[];	/* NUL-terminated */
};

TAILQ_HEAD(am_q, am_ent);

struct am_sbx {
	struct am_sbx	*next;
	char		 ifname[FW_IFNAMSIZ];
	struct am_q	 ents;
	size_t		 n;
	uint64_t	 min_exp;	/* no answer expires before */
};

struct ansmem {
	uint32_t	 per_sbx;
	struct am_ent	**tab;
	size_t		 nbuckets;	/* a power of two */
	size_t		 n;
	struct am_sbx	*sbx[AM_SBX_BUCKETS];
	struct msg_answers *batch;	/* the replay's buffer */
};

static uint32_t
fnv(const void *p, size_t n, uint32_t h)
{
	const uint8_t *b = p;

	while (n-- > 0)
		h = (h ^ *b++) * 16777619u;
	return h;
}

static void
ifkey(char key[FW_IFNAMSIZ], const char *ifname)
{
	memset(key, 0, FW_IFNAMSIZ);
	memcpy(key, ifname, strnlen(ifname, FW_IFNAMSIZ - 1));
}

static struct am_sbx **
sbx_slot(struct ansmem *m, const char key[FW_IFNAMSIZ])
{
	struct am_sbx **pp;

	pp = &m->sbx[fnv(key, FW_IFNAMSIZ, 2166136261u) % AM_SBX_BUCKETS];
	for (; *pp != NULL; pp = &(*pp)->next)
		if (memcmp((*pp)->ifname, key, FW_IFNAMSIZ) == 0)
			break;
	return pp;
}

struct ansmem *
ansmem_new(uint32_t per_sbx)
{
	struct ansmem *m;

	if (per_sbx == 0) {
		errno = EINVAL;
		return NULL;
	}
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return NULL;
	if ((m->tab = calloc(AM_MIN_BUCKETS, sizeof(*m->tab))) == NULL ||
	    (m->batch = malloc(sizeof(*m->batch) + MSG_ANSWERS_MAX *
	    sizeof(struct msg_answer))) == NULL) {
		free(m->tab);
		free(m);
		return NULL;
	}
	m->nbuckets = AM_MIN_BUCKETS;
	m->per_sbx = per_sbx;
	return m;
}

/* The key of an answer: its sandbox (by identity: a sandbox is one
 * struct for as long as it has answers) and everything gate_learn
 * compares. */
static uint32_t
ent_hash(const struct am_sbx *s, uint8_t family, uint8_t proto, uint16_t lo,
    uint16_t hi, const uint8_t addr[16], const char *name)
{
	uint32_t h = fnv(&s, sizeof(s), 2166136261u);
	uint8_t k[6];

	k[0] = family;
	k[1] = proto;
	memcpy(k + 2, &lo, 2);
	memcpy(k + 4, &hi, 2);
	h = fnv(k, sizeof(k), h);
	h = fnv(addr, 16, h);
	return fnv(name, strlen(name), h);
}

/* Unlinks e from the hash (not from its sandbox's list) and frees it. */
static void
ent_drop(struct ansmem *m, struct am_ent *e)
{
	struct am_ent **pp = &m->tab[e->hash & (m->nbuckets - 1)];

	for (; *pp != NULL; pp = &(*pp)->hnext)
		if (*pp == e) {
			*pp = e->hnext;
			break;
		}
	TAILQ_REMOVE(&e->sbx->ents, e, q);
	e->sbx->n--;
	m->n--;
	free(e);
}

/* Twice the buckets once the answers outnumber them; without memory the
 * chains only grow longer. */
static void
grow(struct ansmem *m)
{
	struct am_ent **t, *e, *nx;
	size_t i, nb = m->nbuckets * 2;

	if (m->n < m->nbuckets || nb > SIZE_MAX / sizeof(*t) ||
	    (t = calloc(nb, sizeof(*t))) == NULL)
		return;
	for (i = 0; i < m->nbuckets; i++)
		for (e = m->tab[i]; e != NULL; e = nx) {
			nx = e->hnext;
			e->hnext = t[e->hash & (nb - 1)];
			t[e->hash & (nb - 1)] = e;
		}
	free(m->tab);
	m->tab = t;
	m->nbuckets = nb;
}

int
ansmem_put(struct ansmem *m, const struct msg_answer *a, uint64_t now)
{
	char key[FW_IFNAMSIZ];
	struct am_sbx **sp, *s;
	struct am_ent *e;
	uint32_t h;
	size_t len;

	if (m == NULL || a == NULL || !msg_answer_ok(a)) {
		errno = EINVAL;
		return -1;
	}
	ifkey(key, a->ifname);
	if ((s = *(sp = sbx_slot(m, key))) == NULL) {
		if ((s = calloc(1, sizeof(*s))) == NULL)
			return -1;
		memcpy(s->ifname, key, sizeof(key));
		TAILQ_INIT(&s->ents);
		*sp = s;
	}
	h = ent_hash(s, a->family, a->proto, a->port_lo, a->port_hi, a->addr,
	    a->name);
	for (e = m->tab[h & (m->nbuckets - 1)]; e != NULL; e = e->hnext)
		if (e->hash == h && e->sbx == s && e->family == a->family &&
		    e->proto == a->proto && e->lo == a->port_lo &&
		    e->hi == a->port_hi && memcmp(e->addr, a->addr, 16) == 0 &&
		    strcmp(e->name, a->name) == 0) {
			e->expires_ms = a->expires_ms;
			if (e->expires_ms < s->min_exp)
				s->min_exp = e->expires_ms;
			TAILQ_REMOVE(&s->ents, e, q);
			TAILQ_INSERT_TAIL(&s->ents, e, q);
			return 0;
		}
	/* At the bound: what expired goes first, then the answer the
	 * sandbox was given longest ago. A sandbox at its bound with
	 * nothing expired would walk all its answers for each new one:
	 * the walk waits for the earliest expiry it saw. */
	if (s->n >= m->per_sbx && s->min_exp <= now) {
		struct am_ent *x, *nx;
		uint64_t min = UINT64_MAX;

		for (x = TAILQ_FIRST(&s->ents); x != NULL; x = nx) {
			nx = TAILQ_NEXT(x, q);
			if (x->expires_ms <= now)
				ent_drop(m, x);
			else if (x->expires_ms < min)
				min = x->expires_ms;
		}
		s->min_exp = min;
	}
	while (s->n >= m->per_sbx)
		ent_drop(m, TAILQ_FIRST(&s->ents));
	len = strlen(a->name);
	if ((e = calloc(1, sizeof(*e) + len + 1)) == NULL) {
		if (s->n == 0) {
			*sbx_slot(m, key) = s->next;
			free(s);
		}
		return -1;
	}
	e->sbx = s;
	e->hash = h;
	e->family = a->family;
	e->proto = a->proto;
	e->lo = a->port_lo;
	e->hi = a->port_hi;
	memcpy(e->addr, a->addr, 16);
	e->expires_ms = a->expires_ms;
	memcpy(e->name, a->name, len + 1);
	if (s->n == 0 || e->expires_ms < s->min_exp)
		s->min_exp = e->expires_ms;
	grow(m);
	e->hnext = m->tab[h & (m->nbuckets - 1)];
	m->tab[h & (m->nbuckets - 1)] = e;
	TAILQ_INSERT_TAIL(&s->ents, e, q);
	s->n++;
	m->n++;
	return 0;
}

void
ansmem_forget(struct ansmem *m, const char *ifname)
{
	char key[FW_IFNAMSIZ];
	struct am_sbx **sp, *s;
	struct am_ent *e;

	if (m == NULL || ifname == NULL)
		return;
	ifkey(key, ifname);
	if ((s = *(sp = sbx_slot(m, key))) == NULL)
		return;
	while ((e = TAILQ_FIRST(&s->ents)) != NULL)
		ent_drop(m, e);
	*sp = s->next;
	free(s);
}

size_t
ansmem_count(const struct ansmem *m)
{
	return m != NULL ? m->n : 0;
}

size_t
ansmem_count_sbx(const struct ansmem *m, const char *ifname)
{
	char key[FW_IFNAMSIZ];
	struct am_sbx *s;

	if (m == NULL || ifname == NULL)
		return 0;
	ifkey(key, ifname);
	s = *sbx_slot((struct ansmem *)m, key);
	return s != NULL ? s->n : 0;
}

long
ansmem_replay(struct ansmem *m, uint64_t now,
    int (*fn)(void *ctx, const struct msg_answers *hdr, size_t len),
    void *ctx)
{
	struct msg_answer *out;
	struct am_sbx *s, *snx;
	struct am_ent *e, *nx;
	long total = 0;
	size_t i;
	uint32_t k = 0;

	if (m == NULL || fn == NULL) {
		errno = EINVAL;
		return -1;
	}
	out = (struct msg_answer *)(m->batch + 1);
	memset(m->batch, 0, sizeof(*m->batch));
	for (i = 0; i < AM_SBX_BUCKETS; i++)
		for (s = m->sbx[i]; s != NULL; s = snx) {
			snx = s->next;
			for (e = TAILQ_FIRST(&s->ents); e != NULL; e = nx) {
				nx = TAILQ_NEXT(e, q);
				if (e->expires_ms <= now) {
					ent_drop(m, e);
					continue;
				}
				memset(&out[k], 0, sizeof(out[k]));
				out[k].expires_ms = e->expires_ms;
				memcpy(out[k].ifname, s->ifname,
				    sizeof(out[k].ifname));
				memcpy(out[k].name, e->name, strlen(e->name));
				out[k].family = e->family;
				memcpy(out[k].addr, e->addr, 16);
				out[k].proto = e->proto;
				out[k].port_lo = e->lo;
				out[k].port_hi = e->hi;
				if (++k < MSG_ANSWERS_MAX)
					continue;
				m->batch->n = k;
				if (fn(ctx, m->batch, sizeof(*m->batch) +
				    k * sizeof(*out)) == -1)
					return -1;
				total += k;
				k = 0;
			}
			/* A sandbox all of whose answers expired goes too. */
			if (s->n == 0) {
				char key[FW_IFNAMSIZ];

				memcpy(key, s->ifname, sizeof(key));
				*sbx_slot(m, key) = s->next;
				free(s);
			}
		}
	if (k > 0) {
		m->batch->n = k;
		if (fn(ctx, m->batch, sizeof(*m->batch) + k * sizeof(*out)) ==
		    -1)
			return -1;
		total += k;
	}
	return total;
}

void
ansmem_free(struct ansmem *m)
{
	struct am_sbx *s, *snx;
	struct am_ent *e, *nx;
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < AM_SBX_BUCKETS; i++)
		for (s = m->sbx[i]; s != NULL; s = snx) {
			snx = s->next;
			for (e = TAILQ_FIRST(&s->ents); e != NULL; e = nx) {
				nx = TAILQ_NEXT(e, q);
				free(e);
			}
			free(s);
		}
	free(m->tab);
	free(m->batch);
	free(m);
}

/* ------------------------------------------------------------ the file */

#define AM_MAGIC	"SLGANS01"

struct am_file_hdr {
	char		magic[8];
	char		boot[40];	/* NUL-terminated */
	uint32_t	recsize;	/* sizeof(struct msg_answer) */
	uint32_t	pad;
};

struct am_save {
	FILE	*fp;
	int	 err;
};

static int
save_batch(void *ctx, const struct msg_answers *h, size_t len)
{
	struct am_save *sv = ctx;

	if (fwrite(h + 1, 1, len - sizeof(*h), sv->fp) != len - sizeof(*h)) {
		sv->err = errno != 0 ? errno : EIO;
		return -1;
	}
	return 0;
}

int
ansmem_save(struct ansmem *m, const char *path, const char *boot,
    uint64_t now)
{
	struct am_file_hdr h;
	struct am_save sv = { NULL, 0 };
	char tmp[4096];
	int fd, e;

	if (m == NULL || path == NULL || boot == NULL ||
	    strlen(boot) >= sizeof(h.boot) ||
	    snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		errno = EINVAL;
		return -1;
	}
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) == -1)
		return -1;
	if ((sv.fp = fdopen(fd, "w")) == NULL) {
		e = errno;
		close(fd);
		goto fail;
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, AM_MAGIC, sizeof(h.magic));
	memcpy(h.boot, boot, strlen(boot));
	h.recsize = sizeof(struct msg_answer);
	if (fwrite(&h, 1, sizeof(h), sv.fp) != sizeof(h) ||
	    ansmem_replay(m, now, save_batch, &sv) == -1) {
		e = sv.err != 0 ? sv.err : (errno != 0 ? errno : EIO);
		fclose(sv.fp);
		goto fail;
	}
	if (fflush(sv.fp) == EOF || fsync(fileno(sv.fp)) == -1) {
		e = errno;
		fclose(sv.fp);
		goto fail;
	}
	if (fclose(sv.fp) == EOF) {
		e = errno;
		goto fail;
	}
	if (rename(tmp, path) == -1) {
		e = errno;
		goto fail;
	}
	return 0;
fail:
	(void)unlink(tmp);
	errno = e;
	return -1;
}

long
ansmem_load(struct ansmem *m, const char *path, const char *boot,
    uint64_t now, bool (*keep)(void *ctx, const char *ifname), void *ctx)
{
	struct am_file_hdr h;
	struct msg_answer a;
	FILE *fp;
	size_t r;
	long n = 0;
	int fd, e = 0;

	if (m == NULL || path == NULL || boot == NULL || keep == NULL) {
		errno = EINVAL;
		return -1;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return -1;
	/* Read once, whatever it holds. */
	(void)unlink(path);
	if ((fp = fdopen(fd, "r")) == NULL) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (fread(&h, 1, sizeof(h), fp) != sizeof(h) ||
	    memcmp(h.magic, AM_MAGIC, sizeof(h.magic)) != 0 ||
	    !msg_str_ok(h.boot, sizeof(h.boot)) || strcmp(h.boot, boot) != 0 ||
	    h.recsize != sizeof(struct msg_answer)) {
		fclose(fp);
		errno = EPROTO;
		return -1;
	}
	while ((r = fread(&a, 1, sizeof(a), fp)) == sizeof(a)) {
		if (!msg_answer_ok(&a)) {
			e = EPROTO;
			break;
		}
		if (a.expires_ms <= now || !keep(ctx, a.ifname))
			continue;
		if (ansmem_put(m, &a, now) == -1) {
			e = errno;
			break;
		}
		n++;
	}
	if (e == 0 && ferror(fp))
		e = EIO;
	else if (e == 0 && r != 0)
		e = EPROTO;	/* cut inside a record */
	fclose(fp);
	if (e != 0) {
		/* A file that does not read whole is not trusted in part. */
		struct am_sbx *s, *snx;
		size_t i;

		for (i = 0; i < AM_SBX_BUCKETS; i++)
			for (s = m->sbx[i]; s != NULL; s = snx) {
				snx = s->next;
				ansmem_forget(m, s->ifname);
			}
		errno = e;
		return -1;
	}
	return n;
}
