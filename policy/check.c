/*
 * check.c: which name check the gate applies to a TCP flow (policy.h,
 * pol_egress_check). Apart from decide.c because the question is the
 * gate's, asked per flow: the egress decision itself is decide.c's, and
 * this file only reads which rule made it.
 */
#include <netinet/in.h>

#include <string.h>

#include "policy/internal.h"

const char *
pol_check_name(enum pol_check c)
{
	switch (c) {
	case POL_CHECK_NONE:
		return "none";
	case POL_CHECK_TLS:
		return "tls";
	case POL_CHECK_HTTP:
		return "http";
	}
	return "unknown_check";
}

static enum pol_check
by_port(uint16_t port)
{
	return port == 443 ? POL_CHECK_TLS : port == 80 ? POL_CHECK_HTTP :
	    POL_CHECK_NONE;
}

void
pol_egress_check(const struct pol_policy *p, const char *name, uint16_t port,
    bool tainted, struct pol_decision *out, enum pol_check *check)
{
	struct pol_egress_q	 q;
	const struct erule	*rules;
	size_t			 n, i;

	*check = POL_CHECK_NONE;
	memset(&q, 0, sizeof(q));
	q.host = name;
	q.proto = IPPROTO_TCP;
	q.port = port;
	q.tainted = tainted;
	pol_egress_decide(p, &q, out);
	if (out->verdict != POL_ALLOW)
		return;
	rules = tainted ? p->keep : p->allow;
	n = tainted ? p->nkeep : p->nallow;
	/* The decision names its rule by the rule's own string. */
	for (i = 0; i < n; i++)
		if (out->rule == rules[i].name) {
			if (rules[i].kind == ER_HOST)
				*check = rules[i].check >= 0 ?
				    (enum pol_check)rules[i].check :
				    by_port(port);
			return;
		}
}
