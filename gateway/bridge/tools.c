/*
 * tools: each upstream's tool definitions, their pins and their drift. It
 * exists because a tool list is an attack surface (a "rug pull" changes a
 * description or schema after people approved it): every definition is
 * hashed whole (pol_tool_pin), the first listing of a server is kept as its
 * baseline in bridge.db, and any later change — a changed definition, a new
 * name, a vanished name (a rename is both) — withholds the tool and raises
 * an mcp.tool_drift finding, once per change, until the baseline is accepted
 * again (br_pins_accept) or the policy pins the new definition. Policy pins
 * (pol_tool_visible_q / pol_tool_decide) are checked on top by the callers.
 * A definition that carries a credential Sluice holds is never offered at
 * all (a finding says why): no pin or acceptance can make a sandbox see it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"

int
br_tools_load_baseline(struct br_up *u)
{
	u->tools = json_array();
	u->pins = json_object();
	u->drifted = json_object();
	u->baseline = br_pin_load(u->br, u->srv->name);
	if (u->tools == NULL || u->pins == NULL || u->drifted == NULL ||
	    u->baseline == NULL)
		return -1;
	return 0;
}

void
br_tools_free(struct br_up *u)
{
	json_decref(u->tools);
	json_decref(u->pins);
	json_decref(u->drifted);
	json_decref(u->baseline);
	json_decref(u->acc);
	free(u->waiters);
	u->tools = u->pins = u->drifted = u->baseline = u->acc = NULL;
	u->waiters = NULL;
	u->nwaiters = 0;
}

static void
drift(struct br_up *u, const char *name, const char *pin, const char *what)
{
	json_t *d = json_object_get(u->drifted, name);
	const char *old = json_string_value(json_object_get(d, "pin"));
	char detail[320];

	/* One finding per change, not one per listing. */
	if (old != NULL && pin != NULL && strcmp(old, pin) == 0)
		return;
	json_object_set_new(u->drifted, name, json_pack("{s:s?, s:s}", "pin",
	    pin, "what", what));
	snprintf(detail, sizeof(detail), "tool %s/%.128s %s; withheld until "
	    "re-approved (now %s, approved %s)", u->srv->name, name, what,
	    pin != NULL ? pin : "absent",
	    json_string_value(json_object_get(u->baseline, name)) ?
	    json_string_value(json_object_get(u->baseline, name)) : "never");
	log_warnx("bridge: %s", detail);
	br_finding(u->br, BR_EV_TOOL_DRIFT, NULL, u->srv->name, name, detail);
}

static void
finalize(struct br_up *u, int ok)
{
	struct br_tool_waiter *w;
	json_t *tools, *pins, *t, *refused = NULL;
	const char *name, *base, *key;
	char pin[80], *s;
	size_t i, n;
	bool first;

	if (ok) {
		tools = json_array();
		pins = json_object();
		refused = json_object();
		if (tools == NULL || pins == NULL || refused == NULL) {
			json_decref(tools);
			json_decref(pins);
			ok = 0;
			goto done;
		}
		first = json_object_size(u->baseline) == 0;
		json_array_foreach(u->acc, i, t) {
			name = json_string_value(json_object_get(t, "name"));
			/* Unnamed or duplicate definitions are not offered. */
			if (name == NULL || json_object_get(pins, name) != NULL)
				continue;
			s = json_dumps(t, JSON_COMPACT);
			if (s == NULL || pol_tool_pin(s, pin, sizeof(pin)) ==
			    -1) {
				free(s);
				continue;
			}
			if (br_def_holds_credential(u->br, t)) {
				/* Through drift() for its one finding per
				 * change; kept out of tools and pins, so it
				 * is unknown to listing and calling alike.
				 * The finding and the log name the tool
				 * unless the name is where the credential
				 * is. */
				drift(u, br_holds_credential(u->br, name) ?
				    "(a name carrying the credential)" : name,
				    pin, "carries a credential Sluice holds "
				    "for this server");
				json_object_set_new(refused, name,
				    json_true());
				free(s);
				continue;
			}
			free(s);
			json_array_append(tools, t);
			json_object_set_new(pins, name, json_string(pin));
			if (first) {
				json_object_set_new(u->baseline, name,
				    json_string(pin));
				(void)br_pin_store(u->br, u->srv->name, name,
				    pin);
				continue;
			}
			base = json_string_value(json_object_get(u->baseline,
			    name));
			if (base == NULL)
				drift(u, name, pin, "appeared after the first "
				    "listing");
			else if (strcmp(base, pin) != 0)
				drift(u, name, pin, "changed its definition");
			else
				json_object_del(u->drifted, name);
		}
		json_object_foreach(u->baseline, key, t)
			if (json_object_get(pins, key) == NULL &&
			    json_object_get(refused, key) == NULL)
				drift(u, key, NULL, "disappeared");
		json_decref(u->tools);
		json_decref(u->pins);
		u->tools = tools;
		u->pins = pins;
		u->listed = true;
		u->listed_ms = ev_now_ms();
		u->stale = false;
	}
done:
	json_decref(refused);
	json_decref(u->acc);
	u->acc = NULL;
	u->listing = false;
	/* Waiters may start another refresh: run a detached copy. */
	w = u->waiters;
	n = u->nwaiters;
	u->waiters = NULL;
	u->nwaiters = 0;
	for (i = 0; i < n; i++)
		w[i].fn(w[i].arg, ok);
	free(w);
}

static void	list_page(struct br_up *u, const char *cursor);

static void
on_page(void *arg, json_t *msg, const char *err)
{
	struct br_up *u = arg;
	json_t *res, *tools, *next;

	(void)err;
	res = json_object_get(msg, "result");
	tools = json_object_get(res, "tools");
	if (!json_is_array(tools) || json_array_extend(u->acc, tools) == -1 ||
	    json_array_size(u->acc) > BR_TOOLS_MAX) {
		/* A hostile or broken list is refused whole. */
		finalize(u, 0);
		return;
	}
	next = json_object_get(res, "nextCursor");
	if (json_is_string(next) && json_string_length(next) > 0) {
		if (++u->pages >= BR_MAX_PAGES) {
			/* A server that pages forever is broken: fail. */
			finalize(u, 0);
			return;
		}
		list_page(u, json_string_value(next));
		return;
	}
	finalize(u, 1);
}

static void
list_page(struct br_up *u, const char *cursor)
{
	json_t *params = NULL;

	if (cursor != NULL)
		params = json_pack("{s:s}", "cursor", cursor);
	if (br_up_request(u, "tools/list", params, on_page, u) == NULL)
		finalize(u, 0);
}

void
br_tools_refresh(struct br_up *u, void (*fn)(void *, int), void *arg)
{
	struct br_tool_waiter *w;

	w = realloc(u->waiters, (u->nwaiters + 1) * sizeof(*w));
	if (w == NULL) {
		fn(arg, 0);
		return;
	}
	u->waiters = w;
	w[u->nwaiters].fn = fn;
	w[u->nwaiters].arg = arg;
	u->nwaiters++;
	if (u->listing)
		return;
	u->listing = true;
	u->pages = 0;
	if ((u->acc = json_array()) == NULL) {
		finalize(u, 0);
		return;
	}
	list_page(u, NULL);
}

json_t *
br_tools_get(struct br_up *u, const char *tool, const char **pin,
    const char **driftp)
{
	json_t *t, *d;
	size_t i;

	*pin = NULL;
	*driftp = NULL;
	json_array_foreach(u->tools, i, t) {
		if (json_is_string(json_object_get(t, "name")) &&
		    strcmp(json_string_value(json_object_get(t, "name")),
		    tool) == 0) {
			*pin = json_string_value(json_object_get(u->pins,
			    tool));
			if ((d = json_object_get(u->drifted, tool)) != NULL)
				*driftp = json_string_value(json_object_get(d,
				    "what"));
			return t;
		}
	}
	return NULL;
}

int
br_pins_accept(struct br *br, const char *server, const char *tool)
{
	struct br_up *u;
	const char *pin;

	if (server == NULL || tool == NULL ||
	    (u = br_up_find(br, server)) == NULL) {
		errno = ENOENT;
		return -1;
	}
	pin = json_string_value(json_object_get(u->pins, tool));
	if (pin == NULL) {
		/* Accepting a vanished tool forgets it. */
		if (json_object_get(u->baseline, tool) == NULL) {
			errno = ENOENT;
			return -1;
		}
		if (br_pin_delete(br, server, tool) == -1)
			return -1;
		json_object_del(u->baseline, tool);
		json_object_del(u->drifted, tool);
		return 0;
	}
	if (br_pin_store(br, server, tool, pin) == -1)
		return -1;
	json_object_set_new(u->baseline, tool, json_string(pin));
	json_object_del(u->drifted, tool);
	return 0;
}

int
br_pins_snippet(struct br *br, const char *server, FILE *out)
{
	struct br_up *u;
	json_t *t;
	const char *name, *pin;
	size_t i;

	if (server == NULL || (u = br_up_find(br, server)) == NULL ||
	    !u->listed) {
		errno = ENOENT;
		return -1;
	}
	fprintf(out, "# Pins of the current tool definitions of %s.\n"
	    "# Review each definition before you allow it.\n"
	    "mcp:\n  tools:\n", server);
	json_array_foreach(u->tools, i, t) {
		name = json_string_value(json_object_get(t, "name"));
		pin = json_string_value(json_object_get(u->pins, name));
		if (name == NULL || pin == NULL)
			continue;
		/* Upstream text goes into YAML: only spec-shaped names. */
		if (strspn(name, "abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
		    strlen(name) || strlen(name) > 128) {
			fprintf(out, "    # a tool with an invalid name is "
			    "left out\n");
			continue;
		}
		fprintf(out, "    - tool: \"%s/%s\"\n      decision: deny\n"
		    "      pin: \"%s\"\n", server, name, pin);
	}
	return 0;
}

static void
relisted(void *arg, int ok)
{
	struct br_up *u = arg;

	(void)ok;
	if (u->relist) {
		u->relist = false;
		br_tools_changed(u);
	}
}

void
br_tools_changed(struct br_up *u)
{
	u->stale = true;
	if (u->listing) {
		u->relist = true;
		return;
	}
	br_tools_refresh(u, relisted, u);
}
