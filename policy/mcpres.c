/*
 * mcpres: what a policy says about MCP resources and prompts, loaded and
 * decided. It exists because a resource is data an agent reads without
 * calling any tool, and a prompt is text an upstream puts into the agent's
 * context: both carry the same risks as a tool result (secrets, classified
 * data that must taint) and get the same treatment. Prompt rules are tool
 * rules keyed by prompt name (the argument constraint language is one);
 * resource rules match the URI instead of a name: a glob over the whole
 * URI after its scheme is lower-cased, and an optional scheme allowlist.
 * URIs a glob could be fooled by (dot segments, percent-encoded dots or
 * slashes, control characters, backslashes) are refused before any rule
 * is read. Like decide.c: no I/O, no clocks, no globals.
 */
#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"

#define URI_MAX		2048

/* ------------------------------------------------------------ loading */

static bool
scheme_ok(const char *s)
{
	size_t	i;

	if (!isalpha((unsigned char)s[0]))
		return false;
	for (i = 1; s[i]; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '+' &&
		    s[i] != '-' && s[i] != '.')
			return false;
	return i <= 32;
}

static void
yrrule(struct lctx *c, const struct ynode *n, const char *where,
    struct rrule *r)
{
	static const char *const keys[] = { "server", "uri", "schemes",
	    "decision", "classification", "cost", "budgets", "max_bytes",
	    NULL };
	const struct ynode *v;
	size_t	 i, j;

	r->decision = TD_DENY;
	r->cost = 1;
	if (!ycheck_map(&c->w, n, where, keys))
		return;
	if ((v = yget(n, "server")) == NULL)
		yerr(&c->w, n, "missing required key \"server\" in %s", where);
	else if (yis(&c->w, v, Y_SCALAR, "server")) {
		if (!name_ok(v->str, 32))
			yerr(&c->w, v, "invalid server name \"%s\"", v->str);
		else if (c->cfg != NULL &&
		    pol_config_server(c->cfg, v->str) == NULL)
			yerr(&c->w, v, "unknown MCP server \"%s\"", v->str);
		else if ((r->server = strdup(v->str)) == NULL)
			ynomem(&c->w, v);
	}
	if ((v = yget(n, "uri")) != NULL) {
		if (yis(&c->w, v, Y_SCALAR, "uri")) {
			if (v->str[0] == '\0' || strlen(v->str) > URI_MAX)
				yerr(&c->w, v, "uri must be a glob of 1 to %d "
				    "bytes", URI_MAX);
			else if ((r->uri = strdup(v->str)) == NULL)
				ynomem(&c->w, v);
		}
	} else if ((r->uri = strdup("*")) == NULL)
		ynomem(&c->w, n);
	if ((v = yget(n, "schemes")) != NULL &&
	    ystrlist(&c->w, v, "schemes", &r->schemes, &r->nschemes) == 0) {
		if (r->nschemes == 0)
			yerr(&c->w, v, "schemes must not be empty (leave it "
			    "out for any scheme)");
		for (i = 0; i < r->nschemes; i++) {
			if (!scheme_ok(r->schemes[i])) {
				yerr(&c->w, v->vals[i], "invalid URI scheme "
				    "\"%s\"", r->schemes[i]);
				continue;
			}
			for (j = 0; r->schemes[i][j]; j++)
				r->schemes[i][j] = (char)tolower(
				    (unsigned char)r->schemes[i][j]);
		}
	}
	ydecision(c, n, where, &r->decision);
	yclassification(c, n, &r->classification);
	if ((v = yget(n, "cost")) != NULL)
		yuint(&c->w, v, UINT32_MAX, &r->cost);
	if ((v = yget(n, "budgets")) != NULL)
		ybudget_refs(c, v, &r->budgets, &r->nbudgets);
	if ((v = yget(n, "max_bytes")) != NULL &&
	    ysize(&c->w, v, &r->max_bytes) == 0 && r->max_bytes == 0)
		yerr(&c->w, v, "max_bytes must be at least 1 (leave it out "
		    "for mcp.results.max_bytes)");
}

void
ymcpres(struct lctx *c, const struct ynode *n)
{
	struct pol_policy *p = c->p;
	const struct ynode *v;
	size_t	 i;

	if ((v = yget(n, "resources")) != NULL && yis(&c->w, v, Y_SEQ,
	    "mcp.resources") && v->n > 0 &&
	    ((p->rres = calloc(v->n, sizeof(*p->rres))) != NULL ||
	    ynomem(&c->w, v) == 0)) {
		for (i = 0; i < v->n; i++) {
			snprintf(p->rres[i].name, sizeof(p->rres[i].name),
			    "mcp.resources[%zu]", i);
			p->nrres++;
			yrrule(c, v->vals[i], p->rres[i].name, &p->rres[i]);
		}
	}
	if ((v = yget(n, "prompts")) != NULL && yis(&c->w, v, Y_SEQ,
	    "mcp.prompts") && v->n > 0 &&
	    ((p->prompts = calloc(v->n, sizeof(*p->prompts))) != NULL ||
	    ynomem(&c->w, v) == 0)) {
		for (i = 0; i < v->n; i++) {
			snprintf(p->prompts[i].name,
			    sizeof(p->prompts[i].name), "mcp.prompts[%zu]", i);
			p->nprompts++;
			ytool(c, v->vals[i], p->prompts[i].name,
			    &p->prompts[i], true);
		}
	}
}

void
mcpres_free(struct pol_policy *p)
{
	size_t	i;

	for (i = 0; i < p->nrres; i++) {
		free(p->rres[i].server);
		free(p->rres[i].uri);
		strv_free(p->rres[i].schemes, p->rres[i].nschemes);
		free(p->rres[i].budgets);
	}
	free(p->rres);
	for (i = 0; i < p->nprompts; i++)
		trule_free(&p->prompts[i]);
	free(p->prompts);
}

/* ------------------------------------------------------------ deciding */

/*
 * uri_norm: uri into out (URI_MAX + 1 bytes) with its scheme lower-cased,
 * and the scheme's length in *slen; -1 when uri is not one a glob can be
 * trusted with. A template (RFC 6570) may hold its {expressions}; a URI
 * may not hold braces at all.
 */
static int
uri_norm(const char *uri, bool tmpl, char *out, size_t *slen)
{
	size_t	 len, i, seg;
	const char *s, *e, *path, *end;

	if (uri == NULL || (len = strlen(uri)) == 0 || len > URI_MAX)
		return -1;
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)uri[i];

		if (ch <= 0x20 || ch == 0x7f || ch == '\\' ||
		    (!tmpl && (ch == '{' || ch == '}')))
			return -1;
		/* %2e is a dot and %2f a slash a reader would decode
		 * after the glob said yes. */
		if (ch == '%' && i + 2 < len && uri[i + 1] == '2' &&
		    (uri[i + 2] == 'e' || uri[i + 2] == 'E' ||
		    uri[i + 2] == 'f' || uri[i + 2] == 'F'))
			return -1;
	}
	for (i = 0; i < len && uri[i] != ':'; i++)
		;
	if (i == 0 || i == len || i > 32)
		return -1;
	memcpy(out, uri, len + 1);
	out[i] = '\0';
	if (!scheme_ok(out))
		return -1;
	out[i] = ':';
	*slen = i;
	for (i = 0; i < *slen; i++)
		out[i] = (char)tolower((unsigned char)out[i]);
	/* No "." or ".." segment in the path (before any query or
	 * fragment). */
	path = out + *slen + 1;
	end = path + strcspn(path, "?#");
	for (s = path; ; s = e + 1) {
		for (e = s; e < end && *e != '/'; e++)
			;
		seg = (size_t)(e - s);
		if ((seg == 1 && s[0] == '.') ||
		    (seg == 2 && s[0] == '.' && s[1] == '.'))
			return -1;
		if (e == end)
			break;
	}
	return 0;
}

static bool
rrule_match(const struct rrule *r, const char *server, const char *norm,
    size_t slen)
{
	size_t	i;

	if (r->server == NULL || r->uri == NULL ||
	    strcmp(r->server, server) != 0)
		return false;
	if (r->nschemes > 0) {
		for (i = 0; i < r->nschemes; i++)
			if (strlen(r->schemes[i]) == slen &&
			    strncmp(r->schemes[i], norm, slen) == 0)
				break;
		if (i == r->nschemes)
			return false;
	}
	return fnmatch(r->uri, norm, 0) == 0;
}

/* The first rule of p for server matching uri (a template when tmpl);
 * NULL with *reason when none does or the URI is refused. */
static const struct rrule *
rrule_find(const struct pol_policy *p, const char *server, const char *uri,
    bool tmpl, enum pol_reason *reason)
{
	char	 norm[URI_MAX + 1];
	size_t	 slen, i;

	*reason = POL_REASON_BAD_REQUEST;
	if (p == NULL || server == NULL || uri == NULL)
		return NULL;
	*reason = POL_REASON_BAD_URI;
	if (uri_norm(uri, tmpl, norm, &slen) == -1)
		return NULL;
	*reason = POL_REASON_NO_MATCHING_RULE;
	for (i = 0; i < p->nrres; i++)
		if (rrule_match(&p->rres[i], server, norm, slen))
			return &p->rres[i];
	return NULL;
}

static void
rdeny(struct pol_tool_decision *out, const char *rule, enum pol_reason r,
    const char *msg)
{
	out->d.verdict = POL_DENY;
	out->d.rule = rule;
	out->d.reason = r;
	out->nres = 0;
	snprintf(out->message, sizeof(out->message), "%s", msg);
}

void
pol_resource_decide(const struct pol_policy *p,
    const struct pol_resource_q *q, struct pol_tool_decision *out)
{
	const struct rrule *r;
	enum pol_reason why;

	memset(out, 0, sizeof(*out));
	out->classification = pol_class_names[0];
	if (p == NULL || q == NULL) {
		rdeny(out, "input", POL_REASON_BAD_REQUEST,
		    "The request could not be evaluated.");
		return;
	}
	r = rrule_find(p, q->server, q->uri, false, &why);
	if (r == NULL) {
		if (why == POL_REASON_NO_MATCHING_RULE)
			rdeny(out, "default", why, "The policy does not allow "
			    "this resource.");
		else
			rdeny(out, "input", why, "The resource URI is not one "
			    "Sluice accepts.");
		return;
	}
	out->max_result_bytes = p->result_max_bytes;
	if (r->max_bytes != 0 && r->max_bytes < out->max_result_bytes)
		out->max_result_bytes = r->max_bytes;
	out->args_digest_only = p->audit_digest;
	out->classification = pol_class_names[r->classification];
	out->taints = p->taint_level >= 0 &&
	    r->classification >= p->taint_level;
	if (r->decision == TD_DENY) {
		rdeny(out, r->name, POL_REASON_RULE_DENY, "The policy does not "
		    "allow this resource.");
		return;
	}
	if (pol_budgets_reserve(p, r->budgets, r->nbudgets, r->cost,
	    q->budgets, q->nbudgets, out, r->name, "resource") == -1)
		return;
	pol_verdict_set(out, r->name, r->decision == TD_ASK);
}

bool
pol_resource_visible(const struct pol_policy *p, const char *server,
    const char *uri, bool tmpl, enum pol_reason *reason)
{
	const struct rrule *r;

	r = rrule_find(p, server, uri, tmpl, reason);
	if (r == NULL)
		return false;
	if (r->decision == TD_DENY) {
		*reason = POL_REASON_RULE_DENY;
		return false;
	}
	*reason = POL_REASON_VISIBLE;
	return true;
}

bool
pol_mcp_offers(const struct pol_policy *p, const char *server,
    bool prompts)
{
	size_t	i;

	const char *srv;
	enum tool_decision dec;

	if (p == NULL || server == NULL)
		return false;
	for (i = 0; i < (prompts ? p->nprompts : p->nrres); i++) {
		srv = prompts ? p->prompts[i].server : p->rres[i].server;
		dec = prompts ? p->prompts[i].decision : p->rres[i].decision;
		if (dec != TD_DENY && srv != NULL && strcmp(srv, server) == 0)
			return true;
	}
	return false;
}
