/*
 * brwire_intent.c: the tool calls whose outcome the log does not hold yet.
 * A call is forwarded to its upstream only once its mcp.intent record is
 * durable, and answered only once its outcome (mcp.call, same call_id) is;
 * between the two, the upstream may have acted and nothing says how it
 * ended. This file keeps those open intents and closes the ones that
 * cannot end any more with an mcp.outcome_unknown record: when the bridge
 * process that sent them dies, when the daemon stops, and at the next
 * start for the ones a crash of the parent left open.
 *
 * Finding them after a crash: the log is the truth, so they are read back
 * from it (every mcp.intent without a later record of the same call_id),
 * but not from its beginning, which would make a start cost the size of
 * the log. The parent keeps a mark in the state database: a seq at or
 * below every intent open when it was written. It is the lowest lower
 * bound of the open intents (the log's committed seq, read before each
 * one is submitted, so that an intent the log commits later can never sit
 * below it) or, with none open, the committed seq itself. That value never
 * goes down (a new intent's bound is the committed seq of its time, which
 * only grows), so a mark written at any moment stays below every intent
 * open at any later moment: a crash at any point, even between an intent's
 * commit and its entry here or between two writes of the mark, leaves a
 * mark from which the scan finds every open intent. It is written once
 * every BRW_MARK_MS and only when it moved, so it costs no call a write of
 * its own; what the scan reads is bounded by the records written while the
 * oldest call was open plus that interval. A record of the previous run
 * that closes an intent (its outcome, or an mcp.outcome_unknown written
 * at a start that crashed before it moved the mark) is found by the same
 * scan, so nothing is closed twice.
 *
 * The table is bounded (BRW_INTENTS_MAX intents of the running bridge
 * process): beyond it an intent is refused and its call denied, never
 * forwarded unrecorded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "gateway/bridge/bridge.h"
#include "gateway/brwire.h"
#include "gateway/brwire_int.h"
#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"

#define BRW_INTENTS_MAX	4096u
#define BRW_MARK_MS	2000u
#define BRW_MARK_NAME	"mcp_intent_mark"

/* An mcp.outcome_unknown record being committed for call id. */
struct unk_wait {
	struct unk_wait	*next, **prevp;	/* on w->unks while w lives */
	struct brw	*w;		/* NULL once brw_intents_stop ran */
	char		 id[33];
};

static bool
id_ok(const char *id)
{
	size_t i;

	if (id == NULL || strlen(id) != 32)
		return false;
	for (i = 0; i < 32; i++)
		if (!((id[i] >= '0' && id[i] <= '9') ||
		    (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

static struct brw_intent *
find(struct brw *w, const char *id)
{
	size_t i;

	if (id == NULL)
		return NULL;
	for (i = 0; i < w->nintents; i++)
		if (strcmp(w->intents[i].id, id) == 0)
			return &w->intents[i];
	return NULL;
}

static void
drop(struct brw *w, struct brw_intent *in)
{
	size_t i = (size_t)(in - w->intents);

	/* Order does not matter: the mark is a minimum. */
	w->intents[i] = w->intents[--w->nintents];
}

static void
cp(char *dst, size_t size, const char *s)
{
	snprintf(dst, size, "%s", s != NULL ? s : "");
}

static struct brw_intent *
add(struct brw *w, const char *id, uint64_t lb, uint64_t gen)
{
	struct brw_intent *in;
	size_t cap;

	if (w->nintents == w->capintents) {
		cap = w->capintents != 0 ? w->capintents * 2 : 64;
		if ((in = reallocarray(w->intents, cap, sizeof(*in))) == NULL)
			return NULL;
		w->intents = in;
		w->capintents = cap;
	}
	in = &w->intents[w->nintents++];
	memset(in, 0, sizeof(*in));
	cp(in->id, sizeof(in->id), id);
	in->lb = lb;
	in->gen = gen;
	return in;
}

/* ------------------------------------------------------------ closing */

static void
on_unknown_durable(void *arg, int ok, uint64_t seq)
{
	struct unk_wait *u = arg;
	struct brw_intent *in;

	(void)seq;
	if (u->w != NULL && (*u->prevp = u->next) != NULL)
		u->next->prevp = u->prevp;
	if (u->w != NULL && (in = find(u->w, u->id)) != NULL) {
		if (ok)
			drop(u->w, in);
		else
			in->closing = 0;	/* the next start closes it */
	}
	free(u);
}

static json_t *
unknown_fields(const struct brw_intent *in, const char *why)
{
	json_t *o = json_object();
	int bad = o == NULL;

	if (bad)
		return NULL;
	bad |= rec_put(o, "call_id", rec_string(in->id));
	bad |= rec_put(o, "intent_seq", json_integer((json_int_t)in->lb));
	if (in->sandbox[0] != '\0')
		bad |= rec_put(o, "sandbox", rec_sandbox_json(in->sandbox));
	if (in->server[0] != '\0')
		bad |= rec_put(o, "server", rec_string(in->server));
	if (in->tool[0] != '\0')
		bad |= rec_put(o, "tool", rec_string(in->tool));
	bad |= rec_put(o, "detail", rec_string(why));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Closes durable intent in as mcp.outcome_unknown; it leaves the table
 * once that record is durable. */
static void
close_unknown(struct brw *w, struct brw_intent *in, const char *why)
{
	struct unk_wait *u;

	if (in->closing || !in->durable)
		return;
	if ((u = calloc(1, sizeof(*u))) == NULL) {
		log_warn("mcp.outcome_unknown for call %s", in->id);
		return;
	}
	u->w = w;
	memcpy(u->id, in->id, sizeof(u->id));
	in->closing = 1;
	/* Linked first: the completion may run inside rec_durable. */
	if ((u->next = w->unks) != NULL)
		u->next->prevp = &u->next;
	u->prevp = &w->unks;
	w->unks = u;
	if (rec_durable(w->rec, "mcp.outcome_unknown", unknown_fields(in,
	    why), on_unknown_durable, u) == -1) {
		log_warn("mcp.outcome_unknown for call %s", in->id);
		if ((*u->prevp = u->next) != NULL)
			u->next->prevp = u->prevp;
		in->closing = 0;
		free(u);
	}
}

/* ------------------------------------------------------------ the calls */

int
brw_intent_open(struct brw *w, const struct br_event *ev)
{
	struct brw_intent *in;
	size_t mine = 0, i;

	if (!id_ok(ev->call_id) || find(w, ev->call_id) != NULL) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < w->nintents; i++)
		if (w->intents[i].gen == w->gen)
			mine++;
	if (mine >= BRW_INTENTS_MAX) {
		errno = ENOSPC;
		return -1;
	}
	/* The bound is read before the record is submitted: whatever seq
	 * the log gives it, it is not below this. */
	if ((in = add(w, ev->call_id, rec_next_seq(w->rec), w->gen)) == NULL)
		return -1;
	cp(in->sandbox, sizeof(in->sandbox), ev->sandbox);
	cp(in->server, sizeof(in->server), ev->server);
	cp(in->tool, sizeof(in->tool), ev->tool);
	return 0;
}

void
brw_intent_durable(struct brw *w, const char *id, int ok, uint64_t seq)
{
	struct brw_intent *in;

	if ((in = find(w, id)) == NULL)
		return;
	if (!ok) {
		drop(w, in);	/* not in the log: nothing to close */
		return;
	}
	in->durable = 1;
	in->lb = seq;
	/* Its bridge process went away meanwhile: nobody will answer it. */
	if (in->gen != w->gen || w->ch == NULL)
		close_unknown(w, in, "the bridge process ended before the "
		    "call's outcome was recorded");
}

void
brw_outcome_submitted(struct brw *w, const char *id)
{
	struct brw_intent *in;

	if ((in = find(w, id)) != NULL)
		in->closing = 1;
}

void
brw_outcome_durable(struct brw *w, const char *id, int ok)
{
	struct brw_intent *in;

	if ((in = find(w, id)) == NULL)
		return;
	if (ok) {
		drop(w, in);
		return;
	}
	in->closing = 0;
	close_unknown(w, in, "the call's outcome could not be recorded");
}

void
brw_intents_orphaned(struct brw *w, const char *why)
{
	size_t i;

	/* close_unknown only marks: the table does not change under us. */
	for (i = 0; i < w->nintents; i++)
		close_unknown(w, &w->intents[i], why);
}

/* ------------------------------------------------------------ the mark */

static uint64_t
mark_now(const struct brw *w)
{
	uint64_t m = rec_next_seq(w->rec);
	size_t i;

	for (i = 0; i < w->nintents; i++)
		if (w->intents[i].lb < m)
			m = w->intents[i].lb;
	return m;
}

static void
mark_save(struct brw *w)
{
	uint64_t m;

	/* A log that is not open tells no bound (0): keep the old mark. */
	if (rec_next_seq(w->rec) == 0 || (m = mark_now(w)) <= w->mark_saved)
		return;
	if (sbx_counter_set(w->sbx, BRW_MARK_NAME, m) == -1) {
		log_warn("state database: the open calls' mark");
		return;
	}
	w->mark_saved = m;
}

static void
on_mark(struct ev_loop *loop, void *arg)
{
	struct brw *w = arg;

	w->mark_timer = ev_timer_add(loop, BRW_MARK_MS, on_mark, w);
	mark_save(w);
}

/* ------------------------------------------------------------ the scan */

/* The string at o.a (or o.a.b), or NULL. */
static const char *
str_at(const json_t *o, const char *a, const char *b)
{
	json_t *v = json_object_get(o, a);

	if (b != NULL)
		v = json_is_object(v) ? json_object_get(v, b) : NULL;
	return json_string_value(v);
}

int
brw_intent_scan(const char *db_path, uint64_t from, json_t **open,
    uint64_t *scanned, char *err, size_t errlen)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	json_t *set, *r, *e;
	const char *kind, *id;
	int rc;

	*open = NULL;
	*scanned = 0;
	if ((set = json_object()) == NULL) {
		snprintf(err, errlen, "no memory");
		return -1;
	}
	/* The MCP records (kind column 4) from the mark on, in order. */
	if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK || sqlite3_busy_timeout(db, 5000) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT canon FROM records WHERE seq >= ? "
	    "AND kind = 4 ORDER BY seq", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", db_path, db != NULL ?
		    sqlite3_errmsg(db) : "cannot open");
		goto fail;
	}
	sqlite3_bind_int64(st, 1, (sqlite3_int64)(from > INT64_MAX ?
	    INT64_MAX : from));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		(*scanned)++;
		r = json_loadb(sqlite3_column_blob(st, 0),
		    (size_t)sqlite3_column_bytes(st, 0), 0, NULL);
		kind = str_at(r, "kind", NULL);
		id = str_at(r, "call_id", NULL);
		if (kind != NULL && id != NULL) {
			if (strcmp(kind, "mcp.intent") == 0) {
				e = json_pack("{s:O*,s:s?,s:s?,s:s?}", "seq",
				    json_object_get(r, "seq"), "sandbox",
				    str_at(r, "sandbox", "id"), "server",
				    str_at(r, "server", NULL), "tool",
				    str_at(r, "tool", NULL));
				if (e == NULL || json_object_set_new(set, id,
				    e) == -1) {
					json_decref(r);
					snprintf(err, errlen, "no memory");
					goto fail;
				}
			} else	/* mcp.call, mcp.outcome_unknown */
				json_object_del(set, id);
		}
		json_decref(r);
	}
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "%s: %s", db_path, sqlite3_errmsg(db));
		goto fail;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	*open = set;
	return 0;
fail:
	sqlite3_finalize(st);
	sqlite3_close(db);
	json_decref(set);
	errno = EIO;
	return -1;
}

int
brw_intents_recover(struct brw *w, char *err, size_t errlen)
{
	struct brw_intent *in;
	const char *id;
	json_t *open, *e;
	uint64_t from, n;

	if (w->rec == NULL || rec_next_seq(w->rec) == 0)
		return 0;
	if (sbx_counter_get(w->sbx, BRW_MARK_NAME, &from) == -1) {
		snprintf(err, errlen, "state database: the open calls' mark");
		return -1;
	}
	w->mark_saved = from;
	if (brw_intent_scan(rec_db_path(w->rec), from, &open, &n, err,
	    errlen) == -1)
		return -1;
	if (json_object_size(open) > 0)
		log_warnx("%zu tool calls of the previous run have no recorded "
		    "outcome (%llu records read from seq %llu)",
		    json_object_size(open), (unsigned long long)n,
		    (unsigned long long)from);
	json_object_foreach(open, id, e) {
		if (!id_ok(id) || (in = add(w, id, (uint64_t)json_integer_value(
		    json_object_get(e, "seq")), 0)) == NULL)
			continue;
		cp(in->sandbox, sizeof(in->sandbox), str_at(e, "sandbox",
		    NULL));
		cp(in->server, sizeof(in->server), str_at(e, "server", NULL));
		cp(in->tool, sizeof(in->tool), str_at(e, "tool", NULL));
		in->durable = 1;
		close_unknown(w, in, "sluiced stopped before the call's "
		    "outcome was recorded");
	}
	json_decref(open);
	w->mark_timer = ev_timer_add(w->loop, BRW_MARK_MS, on_mark, w);
	return 0;
}

void
brw_intents_stop(struct brw *w)
{
	struct unk_wait *u;

	ev_timer_cancel(w->loop, w->mark_timer);
	w->mark_timer = NULL;
	brw_intents_orphaned(w, "sluiced stopped before the call's outcome "
	    "was recorded");
	/* Their completions still run (the log's close runs them), with
	 * nothing left here. */
	for (u = w->unks; u != NULL; u = u->next)
		u->w = NULL;
	w->unks = NULL;
	free(w->intents);
	w->intents = NULL;
	w->nintents = w->capintents = 0;
}
