/*
 * rec_tally.c: events that anyone may cause at the rate of packets, counted
 * and summarised instead of recorded one by one. A DNS packet from an
 * address that is no sandbox (an unprivileged host user, a peer on the
 * uplink), junk that does not parse, queries over a sandbox's rate, and
 * bridge requests that fail authentication would each be a record; a flood
 * of them would fill the log's volume, and a full volume must never be a
 * way to stop the daemon recording (or removing) anything else. So each
 * source gets a small budget of records of its own per interval, and what
 * is over it becomes one summary record per source and interval with a
 * count. The table of sources is fixed in size: sources beyond it share one
 * summary, so an interval writes a bounded number of records whatever the
 * number of sources (spoofed ones included).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/record_int.h"

#define TALLY_SLOTS	128	/* open addressing, at most half used */
#define TALLY_KEYS	64	/* sources per kind and interval */
#define TALLY_KEY_MAX	48	/* an IPv6 address or a sandbox id */

struct tally_slot {
	char		key[TALLY_KEY_MAX];
	char		sandbox[33];
	uint32_t	seen;		/* this interval, itemised included */
	uint64_t	summed;		/* over the budget: in the summary */
	int64_t		first_ms, last_ms;
	int		used;
};

struct tally {
	struct tally_slot slots[TALLY_SLOTS];
	struct tally_slot other;	/* sources beyond TALLY_KEYS */
	size_t		  n;
	uint64_t	  total;	/* summarised, ever */
};

/* What each kind of event becomes; budget: records of its own per source
 * and interval before the rest is counted. */
static const struct {
	const char	*name;		/* the metric label */
	const char	*kind;		/* the record kind of the summary */
	unsigned	 budget;
	int		 key_is_sandbox;
} what_info[REC_TALLY_N] = {
	[REC_TALLY_DNS_UNKNOWN] = { "dns_unknown_source", "dns.decision", 0,
	    0 },
	[REC_TALLY_DNS_MALFORMED] = { "dns_malformed", "dns.decision", 0, 0 },
	[REC_TALLY_DNS_RATE] = { "dns_rate_limited", "dns.decision", 1, 1 },
	[REC_TALLY_MCP_AUTH] = { "mcp_auth_failed", "finding", 1, 0 },
};

/* One recorder's, while its log is open (rec_tally_new). */
struct rec_tally {
	struct rec	*r;
	struct ev_loop	*loop;
	struct ev_timer	*timer;
	struct tally	 t[REC_TALLY_N];
};

static void	tally_flush(struct rec_tally *tl);

static int64_t
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t
key_hash(const char *k)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *k != '\0'; k++)
		h = (h ^ (unsigned char)*k) * 1099511628211ULL;
	return h;
}

/* The slot of key, a new one if there is room, else the shared one. */
static struct tally_slot *
slot_of(struct tally *t, const char *key)
{
	struct tally_slot *s;
	size_t i;

	for (i = key_hash(key) % TALLY_SLOTS;; i = (i + 1) % TALLY_SLOTS) {
		s = &t->slots[i];
		if (!s->used)
			break;
		if (strcmp(s->key, key) == 0)
			return s;
	}
	if (t->n >= TALLY_KEYS)
		return &t->other;
	s->used = 1;
	snprintf(s->key, sizeof(s->key), "%s", key);
	t->n++;
	return s;
}

static void
on_timer(struct ev_loop *loop, void *arg)
{
	struct rec_tally *tl = arg;

	(void)loop;
	tl->timer = NULL;
	tally_flush(tl);
}

int
rec_tally(struct rec *r, enum rec_tally_what what, const char *key,
    const char *sandbox)
{
	struct rec_tally *tl = rec_tally_of(r);
	struct tally_slot *s;
	int64_t now;

	/* No recorder (a module tested alone, a suspended one): every
	 * event is the caller's to record, as it always was. */
	if (tl == NULL || (unsigned)what >= REC_TALLY_N)
		return 1;
	s = slot_of(&tl->t[what], key != NULL ? key : "?");
	if (s->seen < UINT32_MAX)
		s->seen++;
	if (s != &tl->t[what].other && s->seen <= what_info[what].budget)
		return 1;
	now = wall_ms();
	if (s->summed++ == 0)
		s->first_ms = now;
	s->last_ms = now;
	if (sandbox != NULL && sandbox[0] != '\0' && s->sandbox[0] == '\0')
		snprintf(s->sandbox, sizeof(s->sandbox), "%s", sandbox);
	tl->t[what].total++;
	/* One timer per interval, armed by its first summarised event: an
	 * idle daemon wakes for nothing. */
	if (tl->timer == NULL && (tl->timer = ev_timer_add(tl->loop,
	    REC_TALLY_MS, on_timer, tl)) == NULL)
		log_warn("audit: summary timer");
	return 0;
}

/* The summary record of one source (s->key; the shared slot has none). */
static json_t *
summary_fields(enum rec_tally_what what, const struct tally_slot *s,
    int other)
{
	json_t *o;
	int bad = 0;

	switch (what) {
	case REC_TALLY_DNS_UNKNOWN:
		o = json_pack("{s:s,s:s,s:s,s:s}", "decision", "deny",
		    "outcome", "refused", "reason", "unknown_source", "rcode",
		    "REFUSED");
		break;
	case REC_TALLY_DNS_MALFORMED:
		o = json_pack("{s:s,s:s,s:s}", "decision", "deny", "outcome",
		    "malformed", "reason", "malformed");
		break;
	case REC_TALLY_DNS_RATE:
		o = json_pack("{s:s,s:s,s:s}", "decision", "deny", "outcome",
		    "deny", "reason", "rate_limited");
		break;
	case REC_TALLY_MCP_AUTH:
		o = json_pack("{s:s,s:s,s:s,s:s}", "type", "mcp.auth_failed",
		    "severity", "high", "decision", "log", "detail",
		    "bridge requests refused: no bearer token, or address "
		    "and token do not agree");
		break;
	default:
		return NULL;
	}
	if (o == NULL)
		return NULL;
	if (other)
		bad |= json_object_set_new(o, "other_sources", json_true());
	else if (what_info[what].key_is_sandbox)
		bad |= json_object_set_new(o, "sandbox", json_pack("{s:o}",
		    "id", rec_string(s->key)));
	else
		bad |= json_object_set_new(o, "client", rec_string(s->key));
	if (!what_info[what].key_is_sandbox && s->sandbox[0] != '\0')
		bad |= json_object_set_new(o, "sandbox", json_pack("{s:o}",
		    "id", rec_string(s->sandbox)));
	bad |= json_object_set_new(o, "summary", json_true());
	bad |= json_object_set_new(o, "count", json_integer((json_int_t)
	    (s->summed > (uint64_t)AUD_INT_MAX ? (uint64_t)AUD_INT_MAX :
	    s->summed)));
	bad |= json_object_set_new(o, "first_ts", json_integer(s->first_ms));
	bad |= json_object_set_new(o, "last_ts", json_integer(s->last_ms));
	bad |= json_object_set_new(o, "interval_ms",
	    json_integer(REC_TALLY_MS));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static void
emit(struct rec *r, enum rec_tally_what what, const struct tally_slot *s, int other)
{
	if (s->summed == 0)
		return;
	log_info("%s: %" PRIu64 " events from %s summarised",
	    what_info[what].name, s->summed, other ? "other sources" : s->key);
	/* Async, like the records it stands for; a loss is a log.gap. */
	(void)rec_async(r, what_info[what].kind, summary_fields(what, s, other));
}

static void
tally_flush(struct rec_tally *tl)
{
	struct tally *t;
	unsigned w;
	size_t i;

	for (w = 0; w < REC_TALLY_N; w++) {
		t = &tl->t[w];
		for (i = 0; i < TALLY_SLOTS && t->n > 0; i++)
			if (t->slots[i].used)
				emit(tl->r, w, &t->slots[i], 0);
		emit(tl->r, w, &t->other, 1);
		memset(t->slots, 0, sizeof(t->slots));
		memset(&t->other, 0, sizeof(t->other));
		t->n = 0;
	}
}

struct rec_tally *
rec_tally_new(struct rec *r, struct ev_loop *loop)
{
	struct rec_tally *tl;

	if ((tl = calloc(1, sizeof(*tl))) == NULL)
		return NULL;
	tl->r = r;
	tl->loop = loop;
	return tl;
}

void
rec_tally_free(struct rec_tally *tl)
{
	if (tl == NULL)
		return;
	if (tl->timer != NULL)
		ev_timer_cancel(tl->loop, tl->timer);
	tl->timer = NULL;
	/* What was counted is still summarised, while the log is open. */
	tally_flush(tl);
	free(tl);
}

void
rec_tally_metrics_print(const struct rec_tally *tl, FILE *fp)
{
	unsigned w;

	fprintf(fp, "# HELP sluice_audit_summarised_total Events counted into "
	    "a summary record instead of recorded one by one.\n"
	    "# TYPE sluice_audit_summarised_total counter\n");
	for (w = 0; w < REC_TALLY_N; w++)
		fprintf(fp, "sluice_audit_summarised_total{what=\"%s\"} %"
		    PRIu64 "\n", what_info[w].name, tl->t[w].total);
}
