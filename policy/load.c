/*
 * load: policy files (examples/policies/) into validated struct pol_policy.
 *
 * The walker checks the whole file against the schema and keeps going after
 * an error so the user sees every problem at once; the policy is returned
 * only if there was none, so nothing is ever half-loaded. Everything a
 * decision needs later (compiled regexes, lower-cased host patterns, the
 * flattened kernel rules) is prepared here, once, so decide.c stays cheap.
 */
#include <netinet/in.h>
#include <sys/socket.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"

const char *const pol_class_names[] = {
	"public", "internal", "confidential", "secret", NULL
};

int
pol_class_index(const char *s)
{
	int	i;

	for (i = 0; pol_class_names[i] != NULL; i++)
		if (strcmp(pol_class_names[i], s) == 0)
			return i;
	return -1;
}

static const struct { const char *name; uint16_t type; } dns_types[] = {
	{ "A", 1 }, { "NS", 2 }, { "CNAME", 5 }, { "SOA", 6 }, { "PTR", 12 },
	{ "MX", 15 }, { "TXT", 16 }, { "AAAA", 28 }, { "SRV", 33 },
	{ "SVCB", 64 }, { "HTTPS", 65 }, { "CAA", 257 },
};

static const char *const redact_names[] = {
	"aws_keys", "private_keys", "bearer_tokens", "github_tokens",
	"upstream_credentials", NULL
};

/* ------------------------------------------------------------ egress */

static int
parse_port(const char *s, uint16_t *out)
{
	uint64_t	v;

	if (pol_parse_uint(s, 65535, &v) == -1 || v == 0)
		return -1;
	*out = (uint16_t)v;
	return 0;
}

static int
yports(struct lctx *c, const struct ynode *n, struct erule *r)
{
	struct portrange pr;
	const struct ynode *it;
	const char	*dash;
	char		 lo[8];
	size_t		 i;
	int		 rc = 0;

	if (!yis(&c->w, n, Y_SEQ, "ports"))
		return -1;
	if (n->n == 0) {
		yerr(&c->w, n, "ports must not be empty");
		return -1;
	}
	if ((r->ports = calloc(n->n, sizeof(*r->ports))) == NULL)
		return ynomem(&c->w, n);
	for (i = 0; i < n->n; i++) {
		it = n->vals[i];
		if (it->kind != Y_SCALAR) {
			yerr(&c->w, it, "a port must be a number or a "
			    "\"LOW-HIGH\" range, not a %s",
			    ykind_name(it->kind));
			rc = -1;
			continue;
		}
		dash = strchr(it->str, '-');
		if (dash == NULL) {
			if (parse_port(it->str, &pr.lo) == -1) {
				yerr(&c->w, it, "invalid port \"%s\" "
				    "(1-65535)", it->str);
				rc = -1;
				continue;
			}
			pr.hi = pr.lo;
		} else {
			if ((size_t)(dash - it->str) >= sizeof(lo) ||
			    (memcpy(lo, it->str, (size_t)(dash - it->str)),
			    lo[dash - it->str] = '\0',
			    parse_port(lo, &pr.lo) == -1) ||
			    parse_port(dash + 1, &pr.hi) == -1 ||
			    pr.lo > pr.hi) {
				yerr(&c->w, it, "invalid port range \"%s\" "
				    "(LOW-HIGH, 1-65535, LOW <= HIGH)",
				    it->str);
				rc = -1;
				continue;
			}
		}
		r->ports[r->nports++] = pr;
	}
	return rc;
}

static const char *const rule_keys[] = { "host", "cidr", "ports", "protocol",
    "check", "budget", "window", NULL };

/* ycheck_key: a rule's `check:` (tls, http or none), for host allow
 * rules over TCP only: a CIDR rule is address-only, and a deny checks
 * nothing. Without it the check follows the port (pol_egress_check). */
static void
ycheck_key(struct lctx *c, const struct ynode *ck, struct erule *r,
    bool allow)
{
	r->check = -1;
	if (ck == NULL || !yis(&c->w, ck, Y_SCALAR, "check"))
		return;
	if (!allow || r->kind != ER_HOST || r->proto != IPPROTO_TCP) {
		yerr(&c->w, ck, "check applies to host allow rules over tcp "
		    "only");
		return;
	}
	if (strcmp(ck->str, "tls") == 0)
		r->check = POL_CHECK_TLS;
	else if (strcmp(ck->str, "http") == 0)
		r->check = POL_CHECK_HTTP;
	else if (strcmp(ck->str, "none") == 0)
		r->check = POL_CHECK_NONE;
	else
		yerr(&c->w, ck, "invalid check \"%s\" (tls, http or none)",
		    ck->str);
}

/* yerule: one egress rule; allow rules need a protocol (tcp by default)
 * and ports, deny rules without them cover every protocol and port. */
static int
yerule(struct lctx *c, const struct ynode *n, const char *where, bool allow,
    bool budgets, struct erule *r)
{
	const struct ynode *h, *cd, *pt, *pr, *ck;
	const char	*why;
	char		 why_buf[128];
	size_t		 before = c->w.nerr;

	r->budget = -1;
	if (!ycheck_map(&c->w, n, where, rule_keys))
		return -1;
	h = yget(n, "host");
	cd = yget(n, "cidr");
	pt = yget(n, "ports");
	pr = yget(n, "protocol");
	ck = yget(n, "check");
	if ((h == NULL) == (cd == NULL))
		yerr(&c->w, n, "%s needs exactly one of host or cidr", where);
	if (h != NULL && yis(&c->w, h, Y_SCALAR, "host")) {
		r->kind = ER_HOST;
		if (hostpat_parse(h->str, &r->host, &why) == -1)
			yerr(&c->w, h, "invalid host \"%s\": %s", h->str, why);
	}
	if (cd != NULL && yis(&c->w, cd, Y_SCALAR, "cidr")) {
		r->kind = ER_CIDR;
		if (pol_cidr_parse_err(cd->str, &r->cidr, why_buf,
		    sizeof(why_buf)) == -1)
			yerr(&c->w, cd, "invalid CIDR \"%s\": %s", cd->str,
			    why_buf);
	}
	r->proto = allow ? IPPROTO_TCP : 0;
	if (pr != NULL && yis(&c->w, pr, Y_SCALAR, "protocol")) {
		if (strcmp(pr->str, "tcp") == 0)
			r->proto = IPPROTO_TCP;
		else if (strcmp(pr->str, "udp") == 0)
			r->proto = IPPROTO_UDP;
		else if (strcmp(pr->str, "icmp") == 0)
			r->proto = IPPROTO_ICMP;
		else
			yerr(&c->w, pr, "invalid protocol \"%s\" (tcp, udp "
			    "or icmp)", pr->str);
	}
	if (pt != NULL) {
		if (r->proto == IPPROTO_ICMP)
			yerr(&c->w, pt, "icmp rules take no ports");
		else
			yports(c, pt, r);
	} else if (allow && r->proto != IPPROTO_ICMP)
		yerr(&c->w, n, "missing required key \"ports\" in %s", where);
	ycheck_key(c, ck, r, allow);
	ybudget_key(&c->w, c->p, n, r, budgets);
	return c->w.nerr == before ? 0 : -1;
}

static int
yerules(struct lctx *c, const struct ynode *n, const char *where, bool allow,
    bool budgets, struct erule **out, size_t *nout)
{
	char	wbuf[40];
	size_t	i;

	if (!yis(&c->w, n, Y_SEQ, where))
		return -1;
	if (n->n == 0)
		return 0;
	if ((*out = calloc(n->n, sizeof(**out))) == NULL)
		return ynomem(&c->w, n);
	for (i = 0; i < n->n; i++) {
		snprintf(wbuf, sizeof(wbuf), "%s[%zu]", where, i);
		snprintf((*out)[i].name, sizeof((*out)[i].name), "%s", wbuf);
		(*nout)++;
		yerule(c, n->vals[i], wbuf, allow, budgets, &(*out)[i]);
		if ((*out)[i].budget >= 0)
			c->p->rbudgets[(*out)[i].budget].rule_index =
			    (uint32_t)i;
	}
	return 0;
}

/* flatten: the CIDR rules as kernel entries (one per port range). */
static int
flatten(const struct erule *r, size_t n, struct pol_net_rule **out,
    size_t *nout)
{
	struct pol_net_rule	*v = NULL, *t;
	size_t			 i, j, k, cnt = 0;

	for (i = 0; i < n; i++) {
		if (r[i].kind != ER_CIDR)
			continue;
		k = r[i].nports ? r[i].nports : 1;
		if ((t = reallocarray(v, cnt + k, sizeof(*v))) == NULL) {
			free(v);
			return -1;
		}
		v = t;
		for (j = 0; j < k; j++) {
			memset(&v[cnt], 0, sizeof(v[cnt]));
			v[cnt].cidr = r[i].cidr;
			v[cnt].proto = r[i].proto;
			if (r[i].proto == IPPROTO_ICMP &&
			    r[i].cidr.addr.family == AF_INET6)
				v[cnt].proto = IPPROTO_ICMPV6;
			if (r[i].nports) {
				v[cnt].port_lo = r[i].ports[j].lo;
				v[cnt].port_hi = r[i].ports[j].hi;
			}
			v[cnt].rule_index = (uint32_t)i;
			v[cnt].budget = r[i].budget >= 0 ?
			    (uint8_t)(r[i].budget + 1) : 0;
			cnt++;
		}
	}
	*out = v;
	*nout = cnt;
	return 0;
}

static void
yegress(struct lctx *c, const struct ynode *n)
{
	static const char *const keys[] = { "allow", "deny", "budget", NULL };
	const struct ynode *v;

	if (!ycheck_map(&c->w, n, "egress", keys))
		return;
	if ((v = yget(n, "allow")) != NULL)
		yerules(c, v, "egress.allow", true, true, &c->p->allow,
		    &c->p->nallow);
	if ((v = yget(n, "deny")) != NULL)
		yerules(c, v, "egress.deny", false, false, &c->p->deny,
		    &c->p->ndeny);
	if ((v = yget(n, "budget")) != NULL)
		ysize(&c->w, v, &c->p->budget_bytes);
}

/* ------------------------------------------------------------ dns */

static void
ydns(struct lctx *c, const struct ynode *n)
{
	static const char *const keys[] = { "types", "deny_answer", "min_ttl",
	    "max_ttl", "rate", "max_name_length", "max_label_length",
	    "entropy", NULL };
	static const char *const rkeys[] = { "qps", "burst", NULL };
	static const char *const ekeys[] = { "min_length",
	    "max_bits_per_char", NULL };
	struct pol_dns_limits *l = &c->p->limits;
	const struct ynode *v, *x, *it;
	uint64_t	 u;
	size_t		 i, j;
	char		*end;
	double		 d;

	if (!ycheck_map(&c->w, n, "dns", keys))
		return;
	if ((v = yget(n, "types")) != NULL && yis(&c->w, v, Y_SEQ, "types")) {
		free(c->p->dns_types);
		c->p->ndns_types = 0;
		if ((c->p->dns_types = calloc(v->n + 1,
		    sizeof(uint16_t))) == NULL) {
			ynomem(&c->w, v);
			return;
		}
		for (i = 0; i < v->n; i++) {
			it = v->vals[i];
			for (j = 0; it->kind == Y_SCALAR &&
			    j < sizeof(dns_types) / sizeof(dns_types[0]); j++)
				if (strcmp(it->str, dns_types[j].name) == 0)
					break;
			if (it->kind != Y_SCALAR ||
			    j == sizeof(dns_types) / sizeof(dns_types[0])) {
				yerr(&c->w, it, "unknown DNS type \"%s\"",
				    it->kind == Y_SCALAR ? it->str :
				    ykind_name(it->kind));
				continue;
			}
			c->p->dns_types[c->p->ndns_types++] =
			    dns_types[j].type;
		}
	}
	if ((v = yget(n, "deny_answer")) != NULL &&
	    yis(&c->w, v, Y_SCALAR, "deny_answer")) {
		if (strcmp(v->str, "nxdomain") == 0)
			l->deny_refused = false;
		else if (strcmp(v->str, "refused") == 0)
			l->deny_refused = true;
		else
			yerr(&c->w, v, "invalid deny_answer \"%s\" (nxdomain "
			    "or refused)", v->str);
	}
	if ((v = yget(n, "min_ttl")) != NULL && yduration(&c->w, v, &u) == 0)
		l->min_ttl_s = (uint32_t)(u > UINT32_MAX ? UINT32_MAX : u);
	if ((v = yget(n, "max_ttl")) != NULL && yduration(&c->w, v, &u) == 0)
		l->max_ttl_s = (uint32_t)(u > UINT32_MAX ? UINT32_MAX : u);
	if (l->min_ttl_s > l->max_ttl_s)
		yerr(&c->w, yget(n, "min_ttl") ? yget(n, "min_ttl") : n,
		    "dns.min_ttl is greater than dns.max_ttl");
	if ((v = yget(n, "rate")) != NULL &&
	    ycheck_map(&c->w, v, "dns.rate", rkeys)) {
		if ((x = yget(v, "qps")) != NULL &&
		    yuint(&c->w, x, 100000, &u) == 0)
			l->qps = (uint32_t)u;
		if ((x = yget(v, "burst")) != NULL &&
		    yuint(&c->w, x, 100000, &u) == 0)
			l->burst = (uint32_t)u;
	}
	if ((v = yget(n, "max_name_length")) != NULL &&
	    yuint(&c->w, v, 253, &u) == 0)
		l->max_name_len = (uint32_t)u;
	if ((v = yget(n, "max_label_length")) != NULL &&
	    yuint(&c->w, v, 63, &u) == 0)
		l->max_label_len = (uint32_t)u;
	if ((v = yget(n, "entropy")) != NULL &&
	    ycheck_map(&c->w, v, "dns.entropy", ekeys)) {
		if ((x = yget(v, "min_length")) != NULL &&
		    yuint(&c->w, x, 63, &u) == 0)
			l->entropy_min_len = (uint32_t)u;
		if ((x = yget(v, "max_bits_per_char")) != NULL) {
			errno = 0;
			d = x->kind == Y_SCALAR ? strtod(x->str, &end) : -1;
			if (x->kind != Y_SCALAR || !x->plain || errno ||
			    *end != '\0' || end == x->str || !isfinite(d) ||
			    d <= 0 || d > 8)
				yerr(&c->w, x, "max_bits_per_char must be a "
				    "number above 0 and at most 8");
			else
				l->entropy_millibits =
				    (uint32_t)(d * 1000 + 0.5);
		}
	}
}

/* ------------------------------------------------------------ mcp */

static int
budget_index(const struct pol_policy *p, const char *name)
{
	size_t	i;

	for (i = 0; i < p->nbudgets; i++)
		if (strcmp(p->budgets[i].name, name) == 0)
			return (int)i;
	return -1;
}

static void
ybudgets(struct lctx *c, const struct ynode *n)
{
	static const char *const keys[] = { "name", "scope", "calls", "cost",
	    "result_bytes", "window", NULL };
	const struct ynode *it, *v;
	struct budget	*b;
	char		 where[40];
	size_t		 i;

	if (!yis(&c->w, n, Y_SEQ, "mcp.budgets") || n->n == 0)
		return;
	if ((c->p->budgets = calloc(n->n, sizeof(*b))) == NULL) {
		ynomem(&c->w, n);
		return;
	}
	for (i = 0; i < n->n; i++) {
		it = n->vals[i];
		snprintf(where, sizeof(where), "mcp.budgets[%zu]", i);
		if (!ycheck_map(&c->w, it, where, keys))
			continue;
		b = &c->p->budgets[c->p->nbudgets];
		b->scope = POL_SCOPE_SANDBOX;
		if ((v = yget(it, "name")) == NULL)
			yerr(&c->w, it, "missing required key \"name\" in %s",
			    where);
		else if (v->kind != Y_SCALAR || !name_ok(v->str, 32))
			yerr(&c->w, v, "invalid budget name (use "
			    "[a-z0-9][a-z0-9_-]{0,31})");
		else if (budget_index(c->p, v->str) != -1)
			yerr(&c->w, v, "duplicate budget name \"%s\"", v->str);
		else if ((b->name = strdup(v->str)) == NULL)
			ynomem(&c->w, v);
		if ((v = yget(it, "scope")) != NULL &&
		    yis(&c->w, v, Y_SCALAR, "scope")) {
			if (strcmp(v->str, "sandbox") == 0)
				b->scope = POL_SCOPE_SANDBOX;
			else if (strcmp(v->str, "subject") == 0)
				b->scope = POL_SCOPE_SUBJECT;
			else if (strcmp(v->str, "policy") == 0)
				b->scope = POL_SCOPE_POLICY;
			else
				yerr(&c->w, v, "invalid scope \"%s\" (sandbox, "
				    "subject or policy)", v->str);
		}
		/* A stored 0 means "no limit", so a written 0 (which reads
		 * as "none allowed") is refused rather than enforcing
		 * nothing. */
		if ((v = yget(it, "calls")) != NULL &&
		    yuint(&c->w, v, UINT32_MAX, &b->calls) == 0 &&
		    b->calls == 0)
			yerr(&c->w, v, "calls must be at least 1 (leave it out "
			    "for no limit)");
		if ((v = yget(it, "cost")) != NULL &&
		    yuint(&c->w, v, UINT32_MAX, &b->cost) == 0 &&
		    b->cost == 0)
			yerr(&c->w, v, "cost must be at least 1 (leave it out "
			    "for no limit)");
		if ((v = yget(it, "result_bytes")) != NULL &&
		    ysize(&c->w, v, &b->result_bytes) == 0 &&
		    b->result_bytes == 0)
			yerr(&c->w, v, "result_bytes must be at least 1 (leave "
			    "it out for no limit)");
		if ((v = yget(it, "window")) != NULL)
			yduration(&c->w, v, &b->window_s);
		if (yget(it, "calls") == NULL && yget(it, "cost") == NULL &&
		    yget(it, "result_bytes") == NULL)
			yerr(&c->w, it, "%s sets no limit (calls, cost or "
			    "result_bytes)", where);
		/* Count it even when unnamed so pol_policy_free frees it. */
		c->p->nbudgets++;
		if (b->name == NULL && (b->name = strdup("")) == NULL)
			ynomem(&c->w, it);
	}
}

static int
parse_int64(const struct ynode *n, int64_t *out)
{
	const char	*s;
	uint64_t	 u;
	bool		 neg = false;

	if (n->kind != Y_SCALAR || !n->plain)
		return -1;
	s = n->str;
	if (*s == '-') {
		neg = true;
		s++;
	}
	if (pol_parse_uint(s, neg ? (uint64_t)INT64_MAX + 1 :
	    (uint64_t)INT64_MAX, &u) == -1)
		return -1;
	*out = neg ? (int64_t)(0 - u) : (int64_t)u;
	return 0;
}

static void
yargc(struct lctx *c, const struct ynode *n, const char *where,
    struct argc_rule *a)
{
	static const char *const keys[] = { "type", "max_length", "pattern",
	    "path_prefix", "url_hosts", "min", "max", "enum", NULL };
	static const char *const tnames[] = { "any", "string", "integer",
	    "number", "boolean", "array", "object", NULL };
	const struct ynode *v, *it;
	const char	*why;
	char		 err[200];
	size_t		 i;
	bool		 strish = false, numish = false;

	if (!ycheck_map(&c->w, n, where, keys))
		return;
	if ((v = yget(n, "type")) != NULL && yis(&c->w, v, Y_SCALAR, "type")) {
		for (i = 0; tnames[i]; i++)
			if (strcmp(tnames[i], v->str) == 0)
				break;
		if (tnames[i] == NULL)
			yerr(&c->w, v, "invalid type \"%s\" (string, integer, "
			    "number, boolean, array, object or any)", v->str);
		else
			a->type = (enum arg_type)i;
	}
	if ((v = yget(n, "max_length")) != NULL) {
		strish = true;
		if (yuint(&c->w, v, UINT32_MAX, &a->max_length) == 0)
			a->has_max_length = true;
	}
	if ((v = yget(n, "pattern")) != NULL) {
		strish = true;
		if (yis(&c->w, v, Y_SCALAR, "pattern") &&
		    (a->re = pol_arg_regex_compile(v->str, err,
		    sizeof(err))) == NULL)
			yerr(&c->w, v, "invalid regex \"%s\": %s", v->str, err);
	}
	if ((v = yget(n, "path_prefix")) != NULL) {
		strish = true;
		if (yis(&c->w, v, Y_SCALAR, "path_prefix")) {
			if (v->str[0] != '/' || strstr(v->str, "/../") ||
			    strstr(v->str, "/./") || strstr(v->str, "//") ||
			    (strlen(v->str) >= 3 &&
			    strcmp(v->str + strlen(v->str) - 3, "/..") == 0))
				yerr(&c->w, v, "path_prefix must be an absolute "
				    "normalised path");
			else if (asprintf(&a->path_prefix, "%s%s", v->str,
			    v->str[strlen(v->str) - 1] == '/' ? "" : "/") == -1) {
				a->path_prefix = NULL;
				ynomem(&c->w, v);
			}
		}
	}
	if ((v = yget(n, "url_hosts")) != NULL) {
		strish = true;
		if (yis(&c->w, v, Y_SEQ, "url_hosts") && v->n > 0 &&
		    ((a->url_hosts = calloc(v->n, sizeof(*a->url_hosts))) !=
		    NULL || ynomem(&c->w, v) == 0)) {
			for (i = 0; i < v->n; i++) {
				it = v->vals[i];
				if (!yis(&c->w, it, Y_SCALAR, "a url host"))
					continue;
				if (hostpat_parse(it->str,
				    &a->url_hosts[a->nurl_hosts], &why) == -1)
					yerr(&c->w, it, "invalid host \"%s\": "
					    "%s", it->str, why);
				else
					a->nurl_hosts++;
			}
		}
	}
	if ((v = yget(n, "min")) != NULL) {
		numish = true;
		if (parse_int64(v, &a->min) == -1)
			yerr(&c->w, v, "min must be an integer");
		else
			a->has_min = true;
	}
	if ((v = yget(n, "max")) != NULL) {
		numish = true;
		if (parse_int64(v, &a->max) == -1)
			yerr(&c->w, v, "max must be an integer");
		else
			a->has_max = true;
	}
	if (a->has_min && a->has_max && a->min > a->max)
		yerr(&c->w, n, "min is greater than max in %s", where);
	if ((v = yget(n, "enum")) != NULL) {
		ystrlist(&c->w, v, "enum", &a->enumv, &a->nenum);
		if (v->kind == Y_SEQ && v->n == 0)
			yerr(&c->w, v, "enum must not be empty");
	}
	/* Without a type, both kinds together would make it a string and
	 * drop min/max unseen. */
	if (strish && numish && a->type == AT_ANY)
		yerr(&c->w, n, "%s: string constraints and min/max cannot be "
		    "combined", where);
	if (strish && a->type != AT_ANY && a->type != AT_STRING)
		yerr(&c->w, n, "%s: string constraints need type string",
		    where);
	if (numish && a->type != AT_ANY && a->type != AT_INTEGER &&
	    a->type != AT_NUMBER)
		yerr(&c->w, n, "%s: min/max need type integer or number",
		    where);
	if (strish && a->type == AT_ANY)
		a->type = AT_STRING;
	if (numish && a->type == AT_ANY)
		a->type = AT_NUMBER;
}

static bool
tool_name_ok(const char *s)
{
	size_t	i;

	if (strcmp(s, "*") == 0)
		return true;
	for (i = 0; s[i]; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' ||
		    s[i] == '-' || s[i] == '.'))
			return false;
	return i >= 1 && i <= 128;
}

static bool
pin_ok(const char *s)
{
	size_t	i;

	if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
		return false;
	for (i = 7; s[i]; i++)
		if (!isdigit((unsigned char)s[i]) &&
		    !(s[i] >= 'a' && s[i] <= 'f'))
			return false;
	return true;
}

void
ybudget_refs(struct lctx *c, const struct ynode *v, size_t **out,
    size_t *nout)
{
	const struct ynode *it;
	size_t		 i, j;
	int		 bi;

	if (!yis(&c->w, v, Y_SEQ, "budgets") || v->n == 0 ||
	    ((*out = calloc(v->n, sizeof(size_t))) == NULL &&
	    ynomem(&c->w, v) == -1))
		return;
	if (v->n > POL_MAX_RESERVATIONS)
		yerr(&c->w, v, "at most %d budgets per rule",
		    POL_MAX_RESERVATIONS);
	for (i = 0; i < v->n; i++) {
		it = v->vals[i];
		if (!yis(&c->w, it, Y_SCALAR, "a budget name"))
			continue;
		if ((bi = budget_index(c->p, it->str)) == -1) {
			yerr(&c->w, it, "unknown budget \"%s\"", it->str);
			continue;
		}
		/* Listed twice it would be reserved twice per call but
		 * checked for one. */
		for (j = 0; j < *nout; j++)
			if ((*out)[j] == (size_t)bi)
				break;
		if (j < *nout)
			yerr(&c->w, it, "budget \"%s\" is listed twice",
			    it->str);
		else if (*nout < POL_MAX_RESERVATIONS)
			(*out)[(*nout)++] = (size_t)bi;
	}
}

void
ydecision(struct lctx *c, const struct ynode *n, const char *where,
    enum tool_decision *out)
{
	static const char *const names[] = { "allow", "deny", "ask", NULL };
	static const enum tool_decision vals[] = { TD_ALLOW, TD_DENY,
	    TD_ASK };
	const struct ynode *v;
	size_t	i;

	if ((v = yget(n, "decision")) == NULL) {
		yerr(&c->w, n, "missing required key \"decision\" in %s",
		    where);
		return;
	}
	if (!yis(&c->w, v, Y_SCALAR, "decision"))
		return;
	for (i = 0; names[i] != NULL; i++)
		if (strcmp(v->str, names[i]) == 0) {
			*out = vals[i];
			return;
		}
	yerr(&c->w, v, "invalid decision \"%s\" (allow, deny or ask)",
	    v->str);
}

void
yclassification(struct lctx *c, const struct ynode *n, int *out)
{
	const struct ynode *v = yget(n, "classification");

	*out = 0;
	if (v != NULL && yis(&c->w, v, Y_SCALAR, "classification") &&
	    (*out = pol_class_index(v->str)) == -1) {
		yerr(&c->w, v, "invalid classification \"%s\" (public, "
		    "internal, confidential or secret)", v->str);
		*out = 0;
	}
}

void
ytool(struct lctx *c, const struct ynode *n, const char *where,
    struct trule *t, bool prompt)
{
	static const char *const keys[] = { "tool", "decision", "subjects",
	    "labels", "pin", "classification", "cost", "budgets", "args",
	    "required", "allow_other_args", NULL };
	static const char *const pkeys[] = { "prompt", "decision",
	    "subjects", "labels", "classification", "cost", "budgets",
	    "args", "required", "allow_other_args", NULL };
	const char	*ref = prompt ? "prompt" : "tool";
	const char	*big = prompt ? "PROMPT" : "TOOL";
	const struct ynode *v;
	const char	*slash;
	char		 w2[96];
	size_t		 i, j;

	t->decision = TD_DENY;
	t->cost = 1;
	if (!ycheck_map(&c->w, n, where, prompt ? pkeys : keys))
		return;
	if ((v = yget(n, ref)) == NULL)
		yerr(&c->w, n, "missing required key \"%s\" in %s", ref,
		    where);
	else if (yis(&c->w, v, Y_SCALAR, ref)) {
		slash = strchr(v->str, '/');
		if (slash == NULL || slash == v->str ||
		    (size_t)(slash - v->str) > 32 ||
		    !tool_name_ok(slash + 1)) {
			yerr(&c->w, v, "invalid %s reference \"%s\" (use "
			    "SERVER/%s, %s may be \"*\")", ref, v->str, big,
			    big);
		} else if ((t->server = strndup(v->str,
		    (size_t)(slash - v->str))) == NULL ||
		    (t->tool = strdup(slash + 1)) == NULL) {
			ynomem(&c->w, v);
		} else if (!name_ok(t->server, 32)) {
			yerr(&c->w, v, "invalid %s reference \"%s\" (use "
			    "SERVER/%s, %s may be \"*\")", ref, v->str, big,
			    big);
		} else {
			if (c->cfg != NULL &&
			    pol_config_server(c->cfg, t->server) == NULL)
				yerr(&c->w, v, "unknown MCP server \"%s\"",
				    t->server);
		}
	}
	ydecision(c, n, where, &t->decision);
	if ((v = yget(n, "subjects")) != NULL)
		ystrlist(&c->w, v, "subjects", &t->subjects, &t->nsubjects);
	if ((v = yget(n, "labels")) != NULL && yis(&c->w, v, Y_MAP, "labels")
	    && v->n > 0) {
		t->label_keys = calloc(v->n, sizeof(char *));
		t->label_values = calloc(v->n, sizeof(char *));
		if (t->label_keys == NULL || t->label_values == NULL)
			ynomem(&c->w, v);
		/* A key and its value are counted together, so that a label
		 * is matched whole or the policy is refused. */
		for (i = 0; t->label_keys && t->label_values && i < v->n; i++)
			if (ystr(&c->w, v->vals[i],
			    &t->label_values[t->nlabels]) == 0 &&
			    (t->label_keys[t->nlabels++] =
			    strdup(v->keys[i]->str)) == NULL)
				ynomem(&c->w, v->keys[i]);
	}
	if ((v = yget(n, "pin")) != NULL && yis(&c->w, v, Y_SCALAR, "pin")) {
		if (!pin_ok(v->str))
			yerr(&c->w, v, "invalid pin (use \"sha256:\" and 64 "
			    "lower-case hex digits)");
		else if ((t->pin = strdup(v->str)) == NULL)
			ynomem(&c->w, v);
	}
	yclassification(c, n, &t->classification);
	if ((v = yget(n, "cost")) != NULL)
		yuint(&c->w, v, UINT32_MAX, &t->cost);
	if ((v = yget(n, "budgets")) != NULL)
		ybudget_refs(c, v, &t->budgets, &t->nbudgets);
	if ((v = yget(n, "args")) != NULL && yis(&c->w, v, Y_MAP, "args") &&
	    v->n > 0 && ((t->args = calloc(v->n, sizeof(*t->args))) != NULL ||
	    ynomem(&c->w, v) == 0)) {
		for (i = 0; i < v->n; i++) {
			snprintf(w2, sizeof(w2), "%s.args.%s", where,
			    v->keys[i]->str);
			if ((t->args[i].name = strdup(v->keys[i]->str)) ==
			    NULL) {
				ynomem(&c->w, v->keys[i]);
				break;
			}
			t->nargs++;
			yargc(c, v->vals[i], w2, &t->args[i]);
		}
	}
	if ((v = yget(n, "required")) != NULL &&
	    ystrlist(&c->w, v, "required", &t->required,
	    &t->nrequired) == 0) {
		for (i = 0; i < t->nrequired; i++) {
			for (j = 0; j < t->nargs; j++)
				if (strcmp(t->args[j].name,
				    t->required[i]) == 0)
					break;
			if (j == t->nargs)
				yerr(&c->w, v->vals[i], "required argument "
				    "\"%s\" is not declared in args",
				    t->required[i]);
		}
	}
	if ((v = yget(n, "allow_other_args")) != NULL)
		ybool(&c->w, v, &t->allow_other_args);
}

static void
ymcp(struct lctx *c, const struct ynode *n)
{
	static const char *const keys[] = { "approval_timeout", "audit_args",
	    "taint", "results", "budgets", "tools", "resources", "prompts",
	    "server_requests", NULL };
	static const char *const tkeys[] = { "level", "keep", "budget",
	    NULL };
	static const char *const rkeys[] = { "max_bytes", "redact",
	    "redact_patterns", NULL };
	const struct ynode *v, *x, *it;
	struct pol_policy *p = c->p;
	char		 where[40], err[200];
	size_t		 i, j;

	if (!ycheck_map(&c->w, n, "mcp", keys))
		return;
	if ((v = yget(n, "approval_timeout")) != NULL)
		yduration(&c->w, v, &p->approval_timeout_s);
	if ((v = yget(n, "audit_args")) != NULL &&
	    yis(&c->w, v, Y_SCALAR, "audit_args")) {
		if (strcmp(v->str, "full") == 0)
			p->audit_digest = false;
		else if (strcmp(v->str, "digest") == 0)
			p->audit_digest = true;
		else
			yerr(&c->w, v, "invalid audit_args \"%s\" (full or "
			    "digest)", v->str);
	}
	if ((v = yget(n, "taint")) != NULL &&
	    ycheck_map(&c->w, v, "mcp.taint", tkeys)) {
		p->taint_level = 2;	/* confidential */
		if ((x = yget(v, "level")) != NULL &&
		    yis(&c->w, x, Y_SCALAR, "level") &&
		    (p->taint_level = pol_class_index(x->str)) == -1)
			yerr(&c->w, x, "invalid taint level \"%s\" (public, "
			    "internal, confidential or secret)", x->str);
		/* From the taint on, what the sandbox may still send (to
		 * its keep list): at least one byte, like a rule budget. */
		if ((x = yget(v, "budget")) != NULL &&
		    ysize(&c->w, x, &p->taint_budget) == 0 &&
		    p->taint_budget == 0)
			yerr(&c->w, x, "mcp.taint.budget must be at least one "
			    "byte (omit it for none)");
		if ((x = yget(v, "keep")) != NULL &&
		    yerules(c, x, "mcp.taint.keep", true, false, &p->keep,
		    &p->nkeep) == 0) {
			size_t i;

			/* The kernel keeps TCP and UDP destinations only
			 * (fw_restrict); an ICMP rule here would make every
			 * taint fail, so it is refused where it is written. */
			for (i = 0; i < p->nkeep && i < x->n; i++)
				if (p->keep[i].proto == IPPROTO_ICMP)
					yerr(&c->w, x->vals[i], "mcp.taint.keep"
					    "[%zu]: the keep list takes tcp and "
					    "udp rules only", i);
		}
	}
	if ((v = yget(n, "results")) != NULL &&
	    ycheck_map(&c->w, v, "mcp.results", rkeys)) {
		if ((x = yget(v, "max_bytes")) != NULL)
			ysize(&c->w, x, &p->result_max_bytes);
		if ((x = yget(v, "redact")) != NULL &&
		    ystrlist(&c->w, x, "redact", &p->redact,
		    &p->nredact) == 0) {
			for (i = 0; i < p->nredact; i++) {
				for (j = 0; redact_names[j]; j++)
					if (strcmp(redact_names[j],
					    p->redact[i]) == 0)
						break;
				if (redact_names[j] == NULL)
					yerr(&c->w, x->vals[i], "unknown "
					    "redaction \"%s\"", p->redact[i]);
			}
		}
		if ((x = yget(v, "redact_patterns")) != NULL &&
		    yis(&c->w, x, Y_SEQ, "redact_patterns") && x->n > 0 &&
		    ((p->redact_re = calloc(x->n, sizeof(pcre2_code *))) !=
		    NULL || ynomem(&c->w, x) == 0)) {
			for (i = 0; i < x->n; i++) {
				it = x->vals[i];
				if (!yis(&c->w, it, Y_SCALAR, "a pattern"))
					continue;
				if ((p->redact_re[p->nredact_re] =
				    pol_regex_compile(it->str, err,
				    sizeof(err))) == NULL)
					yerr(&c->w, it, "invalid regex \"%s\": "
					    "%s", it->str, err);
				else
					p->nredact_re++;
			}
		}
	}
	/* Budgets first: tool rules refer to them by name. */
	if ((v = yget(n, "budgets")) != NULL)
		ybudgets(c, v);
	if ((v = yget(n, "tools")) != NULL && yis(&c->w, v, Y_SEQ,
	    "mcp.tools") && v->n > 0 &&
	    ((p->tools = calloc(v->n, sizeof(*p->tools))) != NULL ||
	    ynomem(&c->w, v) == 0)) {
		for (i = 0; i < v->n; i++) {
			snprintf(where, sizeof(where), "mcp.tools[%zu]", i);
			snprintf(p->tools[i].name, sizeof(p->tools[i].name),
			    "%s", where);
			p->ntools++;
			ytool(c, v->vals[i], where, &p->tools[i], false);
		}
	}
	ymcpres(c, n);
	ysrvreq(c, n);
}

/* ------------------------------------------------------------ top */

static void
erules_free(struct erule *r, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		free(r[i].host.name);
		free(r[i].ports);
	}
	free(r);
}

void
trule_free(struct trule *t)
{
	size_t	j;

	free(t->server);
	free(t->tool);
	strv_free(t->subjects, t->nsubjects);
	strv_free(t->label_keys, t->nlabels);
	strv_free(t->label_values, t->nlabels);
	free(t->pin);
	free(t->budgets);
	for (j = 0; j < t->nargs; j++) {
		free(t->args[j].name);
		strv_free(t->args[j].enumv, t->args[j].nenum);
		pcre2_code_free(t->args[j].re);
		free(t->args[j].path_prefix);
		while (t->args[j].nurl_hosts > 0)
			free(t->args[j].url_hosts[
			    --t->args[j].nurl_hosts].name);
		free(t->args[j].url_hosts);
	}
	free(t->args);
	strv_free(t->required, t->nrequired);
}

void
pol_policy_free(struct pol_policy *p)
{
	size_t		 i;

	if (p == NULL)
		return;
	free(p->name);
	free(p->description);
	free(p->path);
	free(p->src);
	erules_free(p->allow, p->nallow);
	erules_free(p->deny, p->ndeny);
	erules_free(p->keep, p->nkeep);
	free(p->net_allow);
	free(p->net_deny);
	free(p->net_keep);
	free(p->dns_types);
	strv_free(p->redact, p->nredact);
	for (i = 0; i < p->nredact_re; i++)
		pcre2_code_free(p->redact_re[i]);
	free(p->redact_re);
	for (i = 0; i < p->nbudgets; i++)
		free(p->budgets[i].name);
	free(p->budgets);
	for (i = 0; i < p->ntools; i++)
		trule_free(&p->tools[i]);
	free(p->tools);
	mcpres_free(p);
	srvreq_free(p);
	pcre2_match_context_free(p->mctx);
	free(p);
}

static void
defaults(struct pol_policy *p)
{
	p->limits.min_ttl_s = 5;
	p->limits.max_ttl_s = 3600;
	p->limits.qps = 50;
	p->limits.burst = 100;
	p->limits.max_name_len = 253;
	p->limits.max_label_len = 63;
	p->limits.entropy_min_len = 24;
	p->limits.entropy_millibits = 4000;
	p->limits.deny_refused = false;
	p->approval_timeout_s = 300;
	p->taint_level = -1;		/* no taint section: never taints */
	p->result_max_bytes = 1024 * 1024;
}

static char *
basename_name(const char *path)
{
	const char	*b = strrchr(path, '/');
	size_t		 len;

	b = b ? b + 1 : path;
	len = strlen(b);
	if (len > 5 && strcmp(b + len - 5, ".yaml") == 0)
		len -= 5;
	else if (len > 4 && strcmp(b + len - 4, ".yml") == 0)
		len -= 4;
	return strndup(b, len);
}

struct pol_policy *
pol_policy_load(const char *path, const struct pol_config *cfg,
    struct pol_errors *errs)
{
	struct pol_policy *p;
	unsigned char	*buf;
	size_t		 len;

	if (yaml_read_file(path, &buf, &len, errs) == -1)
		return NULL;
	p = pol_policy_load_buf(path, (const char *)buf, len, cfg, errs);
	free(buf);
	return p;
}

struct pol_policy *
pol_policy_load_buf(const char *path, const char *buf, size_t len,
    const struct pol_config *cfg, struct pol_errors *errs)
{
	static const uint16_t deftypes[] = { 1, 28, 5 };
	static const char *const keys[] = { "version", "name", "description",
	    "egress", "dns", "mcp", "resources", NULL };
	struct lctx	 c;
	struct ynode	*root;
	const struct ynode *v;
	struct pol_policy *p;
	char		 digest[65];

	if (path == NULL || (buf == NULL && len > 0)) {
		pol_errors_add(errs, path ? path : "(null)", 0, 0,
		    "no policy text");
		return NULL;
	}
	if (buf == NULL)
		buf = "";
	if ((root = yaml_load_buf(path, (const unsigned char *)buf, len,
	    errs)) == NULL)
		return NULL;
	yaml_digest((const unsigned char *)buf, len, digest);
	memset(&c, 0, sizeof(c));
	c.w.file = path;
	c.w.errs = errs;
	c.cfg = cfg;
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		ynode_free(root);
		pol_errors_add(errs, path, 0, 0, "out of memory");
		return NULL;
	}
	c.p = p;
	defaults(p);
	memcpy(p->digest, digest, sizeof(digest));
	if (ycheck_map(&c.w, root, "the policy", keys)) {
		if ((v = yget(root, "version")) == NULL)
			yerr(&c.w, root, "missing required key \"version\"");
		else if (v->kind != Y_SCALAR || !v->plain)
			yerr(&c.w, v, "version must be the number 1");
		else if (strcmp(v->str, "1") != 0)
			yerr(&c.w, v, "unsupported version %s (expected 1)",
			    v->str);
		if ((v = yget(root, "name")) != NULL &&
		    ystr(&c.w, v, &p->name) == 0 && !name_ok(p->name, 64))
			yerr(&c.w, v, "invalid policy name \"%s\" (use "
			    "[a-z0-9][a-z0-9_-]{0,63})", p->name);
		if ((v = yget(root, "description")) != NULL)
			ystr(&c.w, v, &p->description);
		if ((v = yget(root, "egress")) != NULL)
			yegress(&c, v);
		if ((v = yget(root, "dns")) != NULL)
			ydns(&c, v);
		if ((v = yget(root, "mcp")) != NULL)
			ymcp(&c, v);
		if ((v = yget(root, "resources")) != NULL)
			yresources(&c.w, v, &p->resources);
		if (p->name == NULL && c.w.nerr == 0) {
			p->name = basename_name(path);
			if (p->name == NULL || !name_ok(p->name, 64))
				yerr(&c.w, root, "the file name does not make "
				    "a valid policy name; set name:");
		}
	}
	ynode_free(root);
	if (c.w.nerr == 0 && p->dns_types == NULL) {
		if ((p->dns_types = malloc(sizeof(deftypes))) != NULL) {
			memcpy(p->dns_types, deftypes, sizeof(deftypes));
			p->ndns_types = 3;
		}
	}
	if (c.w.nerr == 0 && (p->dns_types == NULL ||
	    flatten(p->allow, p->nallow, &p->net_allow, &p->nnet_allow) ||
	    flatten(p->deny, p->ndeny, &p->net_deny, &p->nnet_deny) ||
	    flatten(p->keep, p->nkeep, &p->net_keep, &p->nnet_keep) ||
	    (p->mctx = pol_match_context()) == NULL))
		yerr(&c.w, NULL, "out of memory");
	/* The bytes stay with the policy: the daemon hands the set in
	 * force to its DNS process as text (the file may have changed on
	 * disk since). */
	if (c.w.nerr == 0 && ((p->path = strdup(path)) == NULL ||
	    (p->src = malloc(len > 0 ? len : 1)) == NULL))
		yerr(&c.w, NULL, "out of memory");
	if (c.w.nerr != 0) {
		pol_policy_free(p);
		return NULL;
	}
	memcpy(p->src, buf, len);
	p->srclen = len;
	return p;
}

const char *
pol_policy_source(const struct pol_policy *p, const char **path,
    size_t *len)
{
	*path = p->path;
	*len = p->srclen;
	return p->src;
}

const char *
pol_policy_name(const struct pol_policy *p)
{
	return p->name;
}

const char *
pol_policy_digest(const struct pol_policy *p)
{
	return p->digest;
}

const struct pol_net_rule *
pol_egress_static(const struct pol_policy *p, bool allow, size_t *n)
{
	*n = allow ? p->nnet_allow : p->nnet_deny;
	return allow ? p->net_allow : p->net_deny;
}

uint64_t
pol_egress_quota(const struct pol_policy *p)
{
	return p->budget_bytes;
}

const struct pol_net_rule *
pol_taint_keep(const struct pol_policy *p, size_t *n)
{
	*n = p->nnet_keep;
	return p->net_keep;
}

uint64_t
pol_tool_approval_timeout_ms(const struct pol_policy *p)
{
	return p->approval_timeout_s * 1000;
}

bool
pol_tool_audit_digest(const struct pol_policy *p)
{
	return p == NULL || p->audit_digest;
}

/* ------------------------------------------------------------ sets */

struct pol_set {
	struct pol_policy	**v;
	size_t			  n;
};

void
pol_set_free(struct pol_set *s)
{
	size_t	i;

	if (s == NULL)
		return;
	for (i = 0; i < s->n; i++)
		pol_policy_free(s->v[i]);
	free(s->v);
	free(s);
}

static int
cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* v[n] has the name of one of v[0..n): each such is an error in errs,
 * against v[n]'s file. */
static bool
name_taken(struct pol_policy *const *v, size_t n, struct pol_errors *errs)
{
	bool taken = false;
	size_t j;

	for (j = 0; j < n; j++) {
		if (strcmp(v[j]->name, v[n]->name) == 0) {
			pol_errors_add(errs, v[n]->path, 0, 0, "duplicate "
			    "policy name \"%s\"", v[j]->name);
			taken = true;
		}
	}
	return taken;
}

struct pol_set *
pol_set_load_dir(const char *dir, const struct pol_config *cfg,
    struct pol_errors *errs)
{
	DIR		 *d;
	struct dirent	 *de;
	char		**names = NULL, **t, *path;
	size_t		  nnames = 0, i, len;
	struct pol_set	 *s;
	bool		  bad = false;

	if ((d = opendir(dir)) == NULL) {
		pol_errors_add(errs, dir, 0, 0, "cannot open directory: %s",
		    strerror(errno));
		return NULL;
	}
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (de->d_name[0] == '.' || !((len > 5 && strcmp(de->d_name +
		    len - 5, ".yaml") == 0) || (len > 4 &&
		    strcmp(de->d_name + len - 4, ".yml") == 0)))
			continue;
		if (nnames >= 4096 || (t = reallocarray(names, nnames + 1,
		    sizeof(*names))) == NULL) {
			pol_errors_add(errs, dir, 0, 0, nnames >= 4096 ?
			    "too many files" : "out of memory");
			bad = true;
			break;
		}
		names = t;
		if (asprintf(&names[nnames], "%s/%s", dir, de->d_name) == -1) {
			pol_errors_add(errs, dir, 0, 0, "out of memory");
			bad = true;
			break;
		}
		nnames++;
	}
	closedir(d);
	if (nnames > 0)
		qsort(names, nnames, sizeof(*names), cmpstr);
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (nnames > 0 && (s->v = calloc(nnames, sizeof(*s->v))) == NULL)) {
		pol_errors_add(errs, dir, 0, 0, "out of memory");
		bad = true;
	}
	for (i = 0; s != NULL && s->v != NULL && i < nnames; i++) {
		path = names[i];
		if ((s->v[s->n] = pol_policy_load(path, cfg, errs)) == NULL) {
			bad = true;
			continue;
		}
		bad |= name_taken(s->v, s->n, errs);
		s->n++;
	}
	strv_free(names, nnames);
	if (bad) {
		pol_set_free(s);
		return NULL;
	}
	return s;
}

struct pol_set *
pol_set_build(struct pol_policy **v, size_t n, struct pol_errors *errs)
{
	struct pol_set *s = NULL;
	size_t i;
	bool bad = false;

	for (i = 0; i < n; i++)
		bad |= name_taken(v, i, errs);
	if (!bad && ((s = calloc(1, sizeof(*s))) == NULL ||
	    (n > 0 && (s->v = calloc(n, sizeof(*s->v))) == NULL))) {
		if (s != NULL)
			free(s);
		pol_errors_add(errs, "policies", 0, 0, "out of memory");
		bad = true;
	}
	if (bad) {
		for (i = 0; i < n; i++)
			pol_policy_free(v[i]);
		return NULL;
	}
	for (i = 0; i < n; i++)
		s->v[i] = v[i];
	s->n = n;
	return s;
}

const struct pol_policy *
pol_set_get(const struct pol_set *s, const char *name)
{
	size_t	i;

	for (i = 0; s != NULL && i < s->n; i++)
		if (strcmp(s->v[i]->name, name) == 0)
			return s->v[i];
	return NULL;
}

size_t
pol_set_count(const struct pol_set *s)
{
	return s ? s->n : 0;
}

const struct pol_policy *
pol_set_at(const struct pol_set *s, size_t i)
{
	return s != NULL && i < s->n ? s->v[i] : NULL;
}
