/*
 * srvreq: mcp.server_requests, what an upstream may ask of the agent's
 * client through the bridge. Sampling spends the agent's model, elicitation
 * asks its person, roots tells the upstream where the agent works: each is
 * an upstream reaching out of its box, so each is denied unless the policy
 * says otherwise for that server. Entries are ordered, `server` names one
 * upstream or "*" (every one), and the first entry for the server decides
 * all three kinds; a kind it leaves out is denied. Pure: the loader builds
 * the table, pol_server_request reads it.
 */
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"

static const char *const kind_keys[POL_SREQ_NKINDS] = {
	[POL_SREQ_SAMPLING] = "sampling",
	[POL_SREQ_ELICITATION] = "elicitation",
	[POL_SREQ_ROOTS] = "roots",
};

static void
yentry(struct lctx *c, const struct ynode *n, size_t idx, struct sreq *e)
{
	static const char *const keys[] = { "server", "sampling",
	    "elicitation", "roots", NULL };
	const struct ynode *v;
	size_t	 k;

	if (!ycheck_map(&c->w, n, "mcp.server_requests[]", keys))
		return;
	if ((v = yget(n, "server")) == NULL) {
		yerr(&c->w, n, "mcp.server_requests[%zu]: server is required",
		    idx);
		return;
	}
	if (ystr(&c->w, v, &e->server) == 0 && strcmp(e->server, "*") != 0 &&
	    !name_ok(e->server, 39))
		yerr(&c->w, v, "mcp.server_requests[%zu]: invalid server "
		    "\"%s\" (a server name or \"*\")", idx, e->server);
	for (k = 0; k < POL_SREQ_NKINDS; k++) {
		e->verdict[k] = POL_DENY;
		if ((v = yget(n, kind_keys[k])) == NULL ||
		    !yis(&c->w, v, Y_SCALAR, kind_keys[k]))
			continue;
		if (strcmp(v->str, "allow") == 0)
			e->verdict[k] = POL_ALLOW;
		else if (strcmp(v->str, "ask") == 0)
			e->verdict[k] = POL_ASK;
		else if (strcmp(v->str, "deny") != 0)
			yerr(&c->w, v, "mcp.server_requests[%zu].%s: invalid "
			    "\"%s\" (deny, ask or allow)", idx, kind_keys[k],
			    v->str);
	}
}

void
ysrvreq(struct lctx *c, const struct ynode *n)
{
	struct pol_policy *p = c->p;
	const struct ynode *v;
	size_t	 i, j;

	if ((v = yget(n, "server_requests")) == NULL || !yis(&c->w, v, Y_SEQ,
	    "mcp.server_requests") || v->n == 0)
		return;
	if ((p->sreqs = calloc(v->n, sizeof(*p->sreqs))) == NULL) {
		(void)ynomem(&c->w, v);
		return;
	}
	for (i = 0; i < v->n; i++) {
		p->nsreqs++;
		yentry(c, v->vals[i], i, &p->sreqs[i]);
		for (j = 0; j < i && p->sreqs[i].server != NULL; j++)
			if (p->sreqs[j].server != NULL && strcmp(
			    p->sreqs[j].server, p->sreqs[i].server) == 0)
				yerr(&c->w, v->vals[i], "mcp.server_requests"
				    "[%zu]: server \"%s\" is already in "
				    "mcp.server_requests[%zu]", i,
				    p->sreqs[i].server, j);
	}
}

void
srvreq_free(struct pol_policy *p)
{
	size_t	i;

	for (i = 0; i < p->nsreqs; i++)
		free(p->sreqs[i].server);
	free(p->sreqs);
}

enum pol_verdict
pol_server_request(const struct pol_policy *p, const char *server,
    enum pol_sreq_kind kind)
{
	size_t	i;

	if (p == NULL || server == NULL || (unsigned)kind >= POL_SREQ_NKINDS)
		return POL_DENY;
	for (i = 0; i < p->nsreqs; i++)
		if (p->sreqs[i].server != NULL &&
		    (strcmp(p->sreqs[i].server, "*") == 0 ||
		    strcmp(p->sreqs[i].server, server) == 0))
			return p->sreqs[i].verdict[kind];
	return POL_DENY;
}
