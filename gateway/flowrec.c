/*
 * flowrec.c: net.flow records from conntrack destroy events (see
 * flowrec.h). The sandbox of a flow is the one whose address is the
 * flow's original source (anti-spoofing holds every sandbox to its own);
 * the name is the one the gate passed the flow for, held here from the
 * gate's verdict until the flow ends.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/flowrec.h"
#include "gateway/log.h"
#include "netns/ct.h"

#define FR_SBX_BUCKETS	4096u
#define FR_NAME_BUCKETS	16384u

struct fr_sbx {
	struct fr_sbx	*next;
	uint8_t		 addr[4];
	char		 id[SBX_ID_MAX + 1];
	uint64_t	 sec;		/* the second counted in n */
	uint32_t	 n;
	/* The second's flows past FLOWREC_PER_S. */
	uint64_t	 over, obytes[2], opackets[2];
};

struct fr_name {
	struct fr_name	*next;
	uint8_t		 key[12];	/* saddr daddr sport dport */
	uint32_t	 slot;
	char		 name[256];
};

struct flowrec {
	struct ev_loop	*loop;
	struct sbx	*sbx;
	struct rec	*rec;
	uint8_t		 svc4[4];
	int		 fd;
	struct ev_timer	*tick;
	uint64_t	 lost;
	struct fr_sbx	*s[FR_SBX_BUCKETS];
	struct fr_name	*nb[FR_NAME_BUCKETS];
	struct fr_name	**ring;		/* FLOWREC_NAMES, oldest at head */
	uint32_t	 head, count;
};

static uint32_t
h(const uint8_t *p, size_t n)
{
	uint32_t v = 2166136261u;

	while (n-- > 0)
		v = (v ^ *p++) * 16777619u;
	return v;
}

static struct fr_sbx **
sbx_find(struct flowrec *fr, const uint8_t a[4])
{
	struct fr_sbx **pp = &fr->s[h(a, 4) % FR_SBX_BUCKETS];

	while (*pp != NULL && memcmp((*pp)->addr, a, 4) != 0)
		pp = &(*pp)->next;
	return pp;
}

static void
w_added(void *ctx, const struct sbx_view *v)
{
	struct flowrec *fr = ctx;
	struct fr_sbx **pp = sbx_find(fr, v->addr4), *s = *pp;

	if (s == NULL) {
		if ((s = calloc(1, sizeof(*s))) == NULL) {
			log_warn("flow records: sandbox %s", v->id);
			return;
		}
		memcpy(s->addr, v->addr4, 4);
		*pp = s;
	}
	snprintf(s->id, sizeof(s->id), "%s", v->id);
}

static void
w_added_each(void *ctx, const struct sbx_view *v)
{
	w_added(ctx, v);
}

static void
summary(struct flowrec *fr, struct fr_sbx *s)
{
	json_t *o;

	if (s->over == 0)
		return;
	o = json_pack("{s:o,s:b,s:I,s:I,s:I,s:I,s:I}", "sandbox",
	    rec_sandbox_json(s->id), "summary", 1, "flows", (json_int_t)s->over,
	    "bytes_out", (json_int_t)s->obytes[0], "bytes_in",
	    (json_int_t)s->obytes[1], "packets_out", (json_int_t)s->opackets[0],
	    "packets_in", (json_int_t)s->opackets[1]);
	if (rec_async(fr->rec, "net.flow", o) == -1)
		log_debug("net.flow record: %s", strerror(errno));
	s->over = 0;
	memset(s->obytes, 0, sizeof(s->obytes));
	memset(s->opackets, 0, sizeof(s->opackets));
}

static void
w_removed(void *ctx, const struct sbx_view *v)
{
	struct flowrec *fr = ctx;
	struct fr_sbx **pp = sbx_find(fr, v->addr4), *s = *pp;

	/* Its flows end after it (the removal deletes their entries): the
	 * entry stays until the next sandbox on the address replaces it,
	 * so that they are still its own. */
	if (s != NULL)
		summary(fr, s);
}

/* ---------------------------------------------------------------- names */

static void
name_key(uint8_t k[12], const uint8_t s[4], const uint8_t d[4], uint16_t sp,
    uint16_t dp)
{
	memcpy(k, s, 4);
	memcpy(k + 4, d, 4);
	memcpy(k + 8, &sp, 2);
	memcpy(k + 10, &dp, 2);
}

static void
name_unlink(struct flowrec *fr, struct fr_name *n)
{
	struct fr_name **pp = &fr->nb[h(n->key, 12) % FR_NAME_BUCKETS];

	while (*pp != NULL && *pp != n)
		pp = &(*pp)->next;
	if (*pp == n)
		*pp = n->next;
	fr->ring[n->slot] = NULL;
}

void
flowrec_name(struct flowrec *fr, const uint8_t saddr[4],
    const uint8_t daddr[4], uint16_t sport, uint16_t dport, const char *name)
{
	struct fr_name *n;
	uint32_t slot;

	if (fr == NULL || name == NULL)
		return;
	slot = (fr->head + fr->count) % FLOWREC_NAMES;
	if (fr->count == FLOWREC_NAMES) {
		/* Full: the oldest flow's name goes (its record has none). */
		if ((n = fr->ring[fr->head]) != NULL) {
			name_unlink(fr, n);
			free(n);
		}
		fr->head = (fr->head + 1) % FLOWREC_NAMES;
		fr->count--;
	}
	if ((n = calloc(1, sizeof(*n))) == NULL)
		return;
	name_key(n->key, saddr, daddr, sport, dport);
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->slot = slot;
	n->next = fr->nb[h(n->key, 12) % FR_NAME_BUCKETS];
	fr->nb[h(n->key, 12) % FR_NAME_BUCKETS] = n;
	fr->ring[slot] = n;
	fr->count++;
}

/* The name of the flow, taken (it ends now), into buf ("" if none). */
static void
name_take(struct flowrec *fr, const struct ct_flow *f, char *buf, size_t len)
{
	uint8_t k[12];
	struct fr_name *n;

	buf[0] = '\0';
	name_key(k, f->src, f->dst, f->sport, f->dport);
	for (n = fr->nb[h(k, 12) % FR_NAME_BUCKETS]; n != NULL; n = n->next)
		if (memcmp(n->key, k, 12) == 0)
			break;
	if (n == NULL)
		return;
	snprintf(buf, len, "%s", n->name);
	name_unlink(fr, n);
	free(n);
	/* Its ring slot stays empty until the head passes it. */
	while (fr->count > 0 && fr->ring[fr->head] == NULL) {
		fr->head = (fr->head + 1) % FLOWREC_NAMES;
		fr->count--;
	}
}

/* ---------------------------------------------------------------- events */

static void
on_end(void *arg, const struct ct_end *e)
{
	struct flowrec *fr = arg;
	struct fr_sbx *s;
	char name[256], pb[8];
	uint64_t sec = ev_now_ms() / 1000;
	json_t *o;
	int bad = 0;

	if (e->f.family != AF_INET || (s = *sbx_find(fr, e->f.src)) == NULL ||
	    memcmp(e->f.dst, fr->svc4, 4) == 0)
		return;
	/* A new flow the kernel let through is activity (resources.idle);
	 * it is recorded when it ends. */
	if (e->created) {
		sbx_touch_addr4(fr->sbx, e->f.src);
		return;
	}
	name_take(fr, &e->f, name, sizeof(name));
	if (s->sec != sec) {
		summary(fr, s);
		s->sec = sec;
		s->n = 0;
	}
	if (s->n >= FLOWREC_PER_S) {
		s->over++;
		s->obytes[0] += e->bytes[0];
		s->obytes[1] += e->bytes[1];
		s->opackets[0] += e->packets[0];
		s->opackets[1] += e->packets[1];
		return;
	}
	s->n++;
	if ((o = json_object()) == NULL)
		return;
	bad |= rec_put(o, "sandbox", rec_sandbox_json(s->id));
	bad |= rec_put(o, "proto", json_string(rec_proto_name(e->f.proto, pb,
	    sizeof(pb))));
	bad |= rec_put(o, "src", json_pack("{s:o, s:I}", "ip",
	    rec_addr_json(AF_INET, e->f.src), "port", (json_int_t)e->f.sport));
	bad |= rec_put(o, "dst", json_pack("{s:o, s:I}", "ip",
	    rec_addr_json(AF_INET, e->f.dst), "port", (json_int_t)e->f.dport));
	if (name[0] != '\0')
		bad |= rec_put(o, "name", rec_string(name));
	bad |= rec_put(o, "bytes_out", json_integer((json_int_t)e->bytes[0]));
	bad |= rec_put(o, "bytes_in", json_integer((json_int_t)e->bytes[1]));
	bad |= rec_put(o, "packets_out", json_integer((json_int_t)
	    e->packets[0]));
	bad |= rec_put(o, "packets_in", json_integer((json_int_t)
	    e->packets[1]));
	if (e->start_ns != 0)
		bad |= rec_put(o, "start_ms", json_integer((json_int_t)
		    (e->start_ns / 1000000)));
	if (e->stop_ns != 0)
		bad |= rec_put(o, "end_ms", json_integer((json_int_t)
		    (e->stop_ns / 1000000)));
	if (bad) {
		json_decref(o);
		return;
	}
	if (rec_async(fr->rec, "net.flow", o) == -1)
		log_debug("net.flow record: %s", strerror(errno));
}

static void
on_read(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct flowrec *fr = arg;
	int lost = 0;

	(void)loop;
	(void)events;
	if (ct_events_read(fd, on_end, fr, &lost) == -1 && errno != EAGAIN)
		log_warn("flow records: conntrack events");
	if (lost && fr->lost++ % 1000 == 0)
		log_warnx("flow records: the kernel dropped conntrack events "
		    "(%" PRIu64 " times)", fr->lost);
}

/* Once a second: the summaries of the second that ended. */
static void
on_tick(struct ev_loop *loop, void *arg)
{
	struct flowrec *fr = arg;
	uint64_t sec = ev_now_ms() / 1000;
	struct fr_sbx *s;
	size_t i;

	for (i = 0; i < FR_SBX_BUCKETS; i++)
		for (s = fr->s[i]; s != NULL; s = s->next)
			if (s->sec != sec)
				summary(fr, s);
	fr->tick = ev_timer_add(loop, 1000, on_tick, fr);
}

struct flowrec *
flowrec_new(struct ev_loop *loop, struct sbx *sbx, struct rec *rec,
    const uint8_t svc4[4], char *err, size_t errlen)
{
	struct flowrec *fr;
	struct sbx_watch w;

	if ((fr = calloc(1, sizeof(*fr))) == NULL ||
	    (fr->ring = calloc(FLOWREC_NAMES, sizeof(*fr->ring))) == NULL) {
		free(fr);
		snprintf(err, errlen, "flow records: %s", strerror(errno));
		return NULL;
	}
	fr->loop = loop;
	fr->sbx = sbx;
	fr->rec = rec;
	memcpy(fr->svc4, svc4, 4);
	if ((fr->fd = ct_events_open(err, errlen)) == -1)
		goto fail;
	memset(&w, 0, sizeof(w));
	w.added = w_added;
	w.removed = w_removed;
	w.ctx = fr;
	if (ev_add(loop, fr->fd, EV_READ, on_read, fr) == -1 ||
	    sbx_watch_add(sbx, &w) == -1 ||
	    (fr->tick = ev_timer_add(loop, 1000, on_tick, fr)) == NULL) {
		snprintf(err, errlen, "flow records: %s", strerror(errno));
		goto fail;
	}
	sbx_foreach(sbx, w_added_each, fr);
	return fr;
fail:
	flowrec_free(fr);
	return NULL;
}

void
flowrec_free(struct flowrec *fr)
{
	struct fr_sbx *s;
	size_t i;

	if (fr == NULL)
		return;
	sbx_watch_del(fr->sbx, fr);
	ev_timer_cancel(fr->loop, fr->tick);
	if (fr->fd > 0) {
		ev_del(fr->loop, fr->fd);
		close(fr->fd);
	}
	for (i = 0; i < FR_SBX_BUCKETS; i++)
		while ((s = fr->s[i]) != NULL) {
			fr->s[i] = s->next;
			free(s);
		}
	for (i = 0; fr->ring != NULL && i < FLOWREC_NAMES; i++)
		free(fr->ring[i]);
	free(fr->ring);
	free(fr);
}
