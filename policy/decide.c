/*
 * decide: the pure decisions — egress, DNS and tool calls — over a loaded
 * policy.
 *
 * These run per DNS query, per new connection a caller explains and per
 * tool call, so the egress and DNS paths do not allocate; everything they
 * compare against was prepared by load.c. Every path that cannot decide
 * cleanly (bad input, an internal error) denies, with a reason code.
 */
#include <netinet/in.h>
#include <sys/socket.h>

#include <ctype.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy/internal.h"

static void
set(struct pol_decision *d, enum pol_verdict v, const char *rule,
    enum pol_reason reason)
{
	d->verdict = v;
	d->rule = rule;
	d->reason = reason;
}

/* ------------------------------------------------------------ egress */

static bool
proto_port_match(const struct erule *r, uint8_t proto, uint16_t port)
{
	size_t	i;

	if (r->proto != 0) {
		if (r->proto == IPPROTO_ICMP)
			return proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6;
		if (r->proto != proto)
			return false;
	}
	if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6 || r->nports == 0)
		return true;
	for (i = 0; i < r->nports; i++)
		if (port >= r->ports[i].lo && port <= r->ports[i].hi)
			return true;
	return false;
}

static bool
erule_match(const struct erule *r, const char *name, size_t len,
    const struct pol_addr *a, uint8_t proto, uint16_t port)
{
	if (r->kind == ER_HOST) {
		if (a != NULL || !hostpat_match(&r->host, name, len))
			return false;
	} else if (a == NULL || !pol_cidr_contains(&r->cidr, a))
		return false;
	return proto_port_match(r, proto, port);
}

static enum pol_addr_class
cidr_class(const struct pol_cidr *c, const struct pol_egress_q *q)
{
	struct pol_addr_info	info;

	pol_addr_classify(&c->addr, q->treat_as_public, q->ntreat_as_public,
	    &info);
	return info.cls;
}

void
pol_egress_decide(const struct pol_policy *p, const struct pol_egress_q *q,
    struct pol_decision *out)
{
	struct pol_addr_info	 info;
	struct pol_addr		 addr, *a = NULL;
	const struct erule	*rules;
	size_t			 len, n, i;

	memset(out, 0, sizeof(*out));
	set(out, POL_DENY, "default", POL_REASON_NO_MATCHING_RULE);
	if (p == NULL || q == NULL || q->host == NULL) {
		set(out, POL_DENY, "input", POL_REASON_BAD_REQUEST);
		return;
	}
	if (q->proto != IPPROTO_TCP && q->proto != IPPROTO_UDP &&
	    q->proto != IPPROTO_ICMP && q->proto != IPPROTO_ICMPV6) {
		set(out, POL_DENY, "input", POL_REASON_BAD_PROTOCOL);
		return;
	}
	if ((q->proto == IPPROTO_TCP || q->proto == IPPROTO_UDP) &&
	    q->port == 0) {
		set(out, POL_DENY, "input", POL_REASON_BAD_PORT);
		return;
	}
	len = strlen(q->host);
	if (pol_addr_parse(q->host, &addr) == 0) {
		a = &addr;
		pol_addr_classify(a, q->treat_as_public, q->ntreat_as_public,
		    &info);
		if (pol_addr_class_always_denied(info.cls)) {
			snprintf(out->rule_buf, sizeof(out->rule_buf),
			    "class:%s", pol_addr_class_name(info.cls));
			set(out, POL_DENY, out->rule_buf,
			    POL_REASON_ALWAYS_DENIED_CLASS);
			return;
		}
	} else {
		/* One trailing dot is the absolute form of the same name. */
		if (len > 0 && q->host[len - 1] == '.')
			len--;
		if (!dns_name_valid(q->host, len)) {
			set(out, POL_DENY, "input", POL_REASON_BAD_HOST);
			return;
		}
	}
	for (i = 0; i < p->ndeny; i++) {
		if (erule_match(&p->deny[i], q->host, len, a, q->proto,
		    q->port)) {
			set(out, POL_DENY, p->deny[i].name,
			    POL_REASON_EXPLICIT_DENY);
			return;
		}
	}
	rules = q->tainted ? p->keep : p->allow;
	n = q->tainted ? p->nkeep : p->nallow;
	if (a != NULL && pol_addr_class_private(info.cls)) {
		/* Only a CIDR rule naming the range opens a private one: the
		 * rule's own network must be of the same class, so a broad
		 * "0.0.0.0/0" meant for the internet does not open 10/8. */
		for (i = 0; i < n; i++) {
			if (rules[i].kind == ER_CIDR &&
			    cidr_class(&rules[i].cidr, q) == info.cls &&
			    erule_match(&rules[i], NULL, 0, a, q->proto,
			    q->port)) {
				set(out, POL_ALLOW, rules[i].name,
				    POL_REASON_ALLOWED);
				return;
			}
		}
		snprintf(out->rule_buf, sizeof(out->rule_buf), "class:%s",
		    pol_addr_class_name(info.cls));
		set(out, POL_DENY, out->rule_buf, POL_REASON_PRIVATE_RANGE);
		return;
	}
	for (i = 0; i < n; i++) {
		if (erule_match(&rules[i], q->host, len, a, q->proto,
		    q->port)) {
			set(out, POL_ALLOW, rules[i].name, POL_REASON_ALLOWED);
			return;
		}
	}
	if (q->tainted)
		set(out, POL_DENY, "mcp.taint", POL_REASON_TAINTED);
}

bool
pol_egress_range_allowed(const struct pol_policy *p, const char *name,
    uint8_t proto, uint16_t lo, uint16_t hi, bool tainted)
{
	struct pol_egress_q q;
	struct pol_decision d;
	uint16_t port[2] = { lo, hi };
	int i;

	for (i = 0; i < 2; i++) {
		memset(&q, 0, sizeof(q));
		q.host = name;
		q.proto = proto;
		q.port = port[i];
		q.tainted = tainted;
		memset(&d, 0, sizeof(d));
		d.verdict = POL_DENY;
		pol_egress_decide(p, &q, &d);
		if (d.verdict != POL_ALLOW)
			return false;
	}
	return true;
}

size_t
pol_egress_ports_for_name(const struct pol_policy *p, const char *name,
    bool tainted, struct pol_net_rule *out, size_t max)
{
	const struct erule	*rules;
	size_t			 len, n, i, j, k, cnt = 0;

	if (p == NULL || name == NULL)
		return 0;
	len = strlen(name);
	if (len > 0 && name[len - 1] == '.')
		len--;
	if (!dns_name_valid(name, len))
		return 0;
	/* A name an explicit deny covers gets nothing, whatever the port. */
	for (i = 0; i < p->ndeny; i++)
		if (p->deny[i].kind == ER_HOST && p->deny[i].nports == 0 &&
		    p->deny[i].proto == 0 &&
		    hostpat_match(&p->deny[i].host, name, len))
			return 0;
	rules = tainted ? p->keep : p->allow;
	n = tainted ? p->nkeep : p->nallow;
	for (i = 0; i < n && cnt < max; i++) {
		if (rules[i].kind != ER_HOST ||
		    !hostpat_match(&rules[i].host, name, len))
			continue;
		k = rules[i].nports ? rules[i].nports : 1;
		for (j = 0; j < k && cnt < max; j++) {
			memset(&out[cnt], 0, sizeof(out[cnt]));
			out[cnt].proto = rules[i].proto;
			if (rules[i].nports) {
				out[cnt].port_lo = rules[i].ports[j].lo;
				out[cnt].port_hi = rules[i].ports[j].hi;
			}
			out[cnt].rule_index = (uint32_t)i;
			cnt++;
		}
	}
	return cnt;
}

/* ------------------------------------------------------------ dns */

static bool
name_eq(const char *a, size_t alen, const char *b)
{
	return strlen(b) == alen && strncasecmp(a, b, alen) == 0;
}

void
pol_dns_decide(const struct pol_policy *p, const struct pol_dns_q *q,
    struct pol_decision *out)
{
	const struct erule	*rules;
	enum pol_reason		 why;
	size_t			 len, n, i;

	memset(out, 0, sizeof(*out));
	set(out, POL_DENY, "default", POL_REASON_NO_MATCHING_RULE);
	if (p == NULL || q == NULL || q->name == NULL) {
		set(out, POL_DENY, "input", POL_REASON_BAD_REQUEST);
		return;
	}
	len = strlen(q->name);
	if (len > 0 && q->name[len - 1] == '.')
		len--;
	if (name_eq(q->name, len, "sluice.internal") ||
	    name_eq(q->name, len, "bridge.sluice.internal")) {
		set(out, POL_SYNTHETIC, "synthetic", POL_REASON_SYNTHETIC);
		return;
	}
	if (!dns_name_valid(q->name, len)) {
		set(out, POL_DENY, "input", POL_REASON_BAD_NAME);
		return;
	}
	/* pol_dns_name_suspect takes the absolute form too: a trailing dot
	 * must not skip the tunnelling checks. */
	if (pol_dns_name_suspect(&p->limits, q->name, &why)) {
		set(out, POL_DENY, "dns.limits", why);
		return;
	}
	for (i = 0; i < p->ndeny; i++) {
		if (p->deny[i].kind == ER_HOST &&
		    hostpat_match(&p->deny[i].host, q->name, len)) {
			set(out, POL_DENY, p->deny[i].name,
			    POL_REASON_EXPLICIT_DENY);
			return;
		}
	}
	rules = q->tainted ? p->keep : p->allow;
	n = q->tainted ? p->nkeep : p->nallow;
	for (i = 0; i < n; i++)
		if (rules[i].kind == ER_HOST &&
		    hostpat_match(&rules[i].host, q->name, len))
			break;
	if (i == n) {
		if (q->tainted)
			set(out, POL_DENY, "mcp.taint", POL_REASON_TAINTED);
		return;
	}
	for (n = 0; n < p->ndns_types; n++) {
		if (p->dns_types[n] == q->qtype) {
			set(out, POL_ALLOW, rules[i].name, POL_REASON_ALLOWED);
			return;
		}
	}
	if (q->qtype == 64 || q->qtype == 65)
		set(out, POL_ALLOW, rules[i].name, POL_REASON_NODATA);
	else
		set(out, POL_DENY, "dns.types", POL_REASON_TYPE_NOT_ALLOWED);
}

void
pol_dns_limits(const struct pol_policy *p, struct pol_dns_limits *out)
{
	*out = p->limits;
}

/* log2u: log2 of a positive integer without libm (the daemon does not
 * link it): split off the power of two, then the atanh series for the
 * mantissa in [1, 2), which converges fast there. */
static double
log2u(size_t x)
{
	double	m = (double)x, y, y2, term, sum = 0;
	int	k = 0, i;

	while (m >= 2) {
		m /= 2;
		k++;
	}
	y = (m - 1) / (m + 1);
	y2 = y * y;
	term = y;
	for (i = 0; i < 30; i++) {
		sum += term / (2 * i + 1);
		term *= y2;
	}
	return k + 2 * sum / 0.69314718055994530942;
}

/* entropy_millibits: Shannon entropy of s[0..len) in bits/char x1000,
 * as log2(n) - (1/n) sum(c log2 c) over the character counts c. */
static uint32_t
entropy_millibits(const char *s, size_t len)
{
	unsigned	cnt[256] = { 0 };
	double		h, acc = 0;
	size_t		i;

	for (i = 0; i < len; i++)
		cnt[(unsigned char)tolower((unsigned char)s[i])]++;
	for (i = 0; i < 256; i++)
		if (cnt[i] > 1)
			acc += cnt[i] * log2u(cnt[i]);
	h = log2u(len) - acc / (double)len;
	return h <= 0 ? 0 : (uint32_t)(h * 1000 + 0.5);
}

bool
pol_dns_name_suspect(const struct pol_dns_limits *l, const char *name,
    enum pol_reason *reason)
{
	const char	*s, *dot;
	size_t		 len, lab;

	*reason = POL_REASON_NONE;
	len = strlen(name);
	if (len > 0 && name[len - 1] == '.')
		len--;
	if (len > l->max_name_len) {
		*reason = POL_REASON_NAME_TOO_LONG;
		return true;
	}
	for (s = name; s < name + len; s = dot + 1) {
		dot = memchr(s, '.', (size_t)(name + len - s));
		if (dot == NULL)
			dot = name + len;
		lab = (size_t)(dot - s);
		if (lab > l->max_label_len) {
			*reason = POL_REASON_LABEL_TOO_LONG;
			return true;
		}
		if (l->entropy_min_len > 0 && lab >= l->entropy_min_len &&
		    entropy_millibits(s, lab) > l->entropy_millibits) {
			*reason = POL_REASON_HIGH_ENTROPY;
			return true;
		}
	}
	return false;
}

/* ------------------------------------------------------------ tools */

static bool
trule_match(const struct trule *t, const struct pol_tool_q *q,
    bool conditions)
{
	size_t	i, j;

	if (t->server == NULL || t->tool == NULL ||
	    strcmp(t->server, q->server) != 0 ||
	    (strcmp(t->tool, "*") != 0 && strcmp(t->tool, q->tool) != 0))
		return false;
	if (!conditions)
		return true;
	if (t->nsubjects > 0) {
		if (q->subject == NULL)
			return false;
		for (i = 0; i < t->nsubjects; i++)
			if (fnmatch(t->subjects[i], q->subject, 0) == 0)
				break;
		if (i == t->nsubjects)
			return false;
	}
	for (i = 0; i < t->nlabels; i++) {
		for (j = 0; j < q->nlabels; j++)
			if (q->label_keys[j] != NULL &&
			    q->label_values[j] != NULL &&
			    strcmp(q->label_keys[j], t->label_keys[i]) == 0 &&
			    strcmp(q->label_values[j], t->label_values[i]) == 0)
				break;
		if (j == q->nlabels)
			return false;
	}
	return true;
}

/* path_norm: resolve ".", ".." and "//" lexically; -1 if ".." would climb
 * above "/" or the path is not absolute. */
static int
path_norm(const char *in, char *out, size_t outlen)
{
	size_t		 o = 0, seg;
	const char	*s = in, *e;

	if (*in != '/' || outlen < 2)
		return -1;
	out[o++] = '/';
	while (*s) {
		while (*s == '/')
			s++;
		if (*s == '\0')
			break;
		e = strchr(s, '/');
		seg = e ? (size_t)(e - s) : strlen(s);
		if (seg == 1 && s[0] == '.') {
			/* nothing */
		} else if (seg == 2 && s[0] == '.' && s[1] == '.') {
			if (o == 1)
				return -1;
			o--;	/* drop the trailing '/' */
			while (o > 1 && out[o - 1] != '/')
				o--;
		} else {
			if (o + seg + 1 >= outlen)
				return -1;
			memcpy(out + o, s, seg);
			o += seg;
			out[o++] = '/';
		}
		s += seg;
	}
	/* Keep a trailing '/' only for the root, as the input had none. */
	if (o > 1 && in[strlen(in) - 1] != '/')
		o--;
	out[o] = '\0';
	return 0;
}

static bool
path_ok(const char *prefix, const char *path)
{
	char	buf[4096];
	size_t	plen = strlen(prefix);

	if (path_norm(path, buf, sizeof(buf)) == -1)
		return false;
	/* The prefix ends in '/': the directory itself is inside too. */
	return strncmp(buf, prefix, plen) == 0 ||
	    (strlen(buf) == plen - 1 && strncmp(buf, prefix, plen - 1) == 0);
}

/* url_ok: http(s)://host[:port][/...] with host a DNS name in hosts.
 * Userinfo, backslashes, percent-escapes and numeric hosts are refused:
 * they are how "https://example.com@evil.net" tricks readers. */
static bool
url_ok(const struct argc_rule *a, const char *url)
{
	const char	*h, *end, *colon;
	size_t		 i, hlen;

	if (strncasecmp(url, "https://", 8) == 0)
		h = url + 8;
	else if (strncasecmp(url, "http://", 7) == 0)
		h = url + 7;
	else
		return false;
	end = h + strcspn(h, "/?#");
	for (i = 0; url[i]; i++)
		if ((unsigned char)url[i] <= ' ' || url[i] == '\\' ||
		    (unsigned char)url[i] >= 0x7f)
			return false;
	if (memchr(h, '@', (size_t)(end - h)) ||
	    memchr(h, '%', (size_t)(end - h)) || *h == '[')
		return false;
	colon = memchr(h, ':', (size_t)(end - h));
	hlen = (size_t)((colon ? colon : end) - h);
	if (colon != NULL) {
		if (colon + 1 == end || end - colon > 6)
			return false;
		for (i = 1; colon + i < end; i++)
			if (!isdigit((unsigned char)colon[i]))
				return false;
	}
	if (hlen > 0 && h[hlen - 1] == '.')
		hlen--;
	if (!dns_name_valid(h, hlen))
		return false;
	for (i = 0; i < a->nurl_hosts; i++)
		if (hostpat_match(&a->url_hosts[i], h, hlen))
			return true;
	return false;
}

static size_t
utf8_chars(const char *s, size_t len)
{
	size_t	i, n = 0;

	for (i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			n++;
	return n;
}

/* arg_check: NULL if v satisfies a, else what is wrong (for the message). */
static const char *
arg_check(const struct pol_policy *p, const struct argc_rule *a, json_t *v)
{
	const char		*s = NULL;
	char			 num[32];
	size_t			 slen = 0, i;
	pcre2_match_data	*md;
	int			 rc;

	switch (a->type) {
	case AT_ANY:
		break;
	case AT_STRING:
		if (!json_is_string(v))
			return "must be a string";
		break;
	case AT_INTEGER:
		if (!json_is_integer(v))
			return "must be an integer";
		break;
	case AT_NUMBER:
		if (!json_is_number(v))
			return "must be a number";
		break;
	case AT_BOOLEAN:
		if (!json_is_boolean(v))
			return "must be true or false";
		break;
	case AT_ARRAY:
		if (!json_is_array(v))
			return "must be an array";
		break;
	case AT_OBJECT:
		if (!json_is_object(v))
			return "must be an object";
		break;
	}
	if (json_is_string(v)) {
		s = json_string_value(v);
		slen = json_string_length(v);
		/* An embedded NUL would hide the rest from C string checks. */
		if (strlen(s) != slen)
			return "contains a NUL character";
	}
	if (a->has_max_length && utf8_chars(s, slen) > a->max_length)
		return "is too long";
	if (a->has_min || a->has_max) {
		if (json_is_integer(v)) {
			if ((a->has_min && json_integer_value(v) < a->min) ||
			    (a->has_max && json_integer_value(v) > a->max))
				return "is out of range";
		} else if (json_is_real(v)) {
			if (!isfinite(json_real_value(v)) ||
			    (a->has_min &&
			    json_real_value(v) < (double)a->min) ||
			    (a->has_max &&
			    json_real_value(v) > (double)a->max))
				return "is out of range";
		}
	}
	if (a->nenum > 0) {
		if (json_is_integer(v)) {
			snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
			    json_integer_value(v));
			s = num;
		} else if (!json_is_string(v))
			return "is not one of the allowed values";
		for (i = 0; i < a->nenum; i++)
			if (strcmp(a->enumv[i], s) == 0)
				break;
		if (i == a->nenum)
			return "is not one of the allowed values";
		s = json_is_string(v) ? json_string_value(v) : NULL;
	}
	if (a->re != NULL) {
		if ((md = pcre2_match_data_create_from_pattern(a->re,
		    NULL)) == NULL)
			return "could not be checked";
		rc = pcre2_match(a->re, (PCRE2_SPTR)s, slen, 0, 0, md,
		    p->mctx);
		pcre2_match_data_free(md);
		/* No match, a bad UTF-8 subject or a hit limit: all deny. */
		if (rc < 0)
			return "does not match the allowed pattern";
	}
	if (a->path_prefix != NULL && !path_ok(a->path_prefix, s))
		return "is outside the allowed paths";
	if (a->nurl_hosts > 0 && !url_ok(a, s))
		return "is not a URL on an allowed host";
	return NULL;
}

static void
tdeny(struct pol_tool_decision *out, const char *rule, enum pol_reason reason,
    const char *fmt, const char *a1, const char *a2)
{
	out->d.verdict = POL_DENY;
	out->d.rule = rule;
	out->d.reason = reason;
	out->nres = 0;
	snprintf(out->message, sizeof(out->message), fmt, a1 ? a1 : "",
	    a2 ? a2 : "");
}

int
pol_budgets_reserve(const struct pol_policy *p, const size_t *idx, size_t n,
    uint64_t cost, const struct pol_budget_use *uses, size_t nuses,
    struct pol_tool_decision *out, const char *rule, const char *noun)
{
	const struct budget	*b;
	const struct pol_budget_use *use;
	struct pol_reservation	*r;
	size_t			 i, j;
	uint64_t		 uc, ucost, ub;

	for (i = 0; i < n; i++) {
		b = &p->budgets[idx[i]];
		uc = ucost = ub = 0;
		for (j = 0; j < nuses; j++) {
			use = &uses[j];
			if (use->name != NULL && strcmp(use->name, b->name) == 0) {
				uc = use->calls;
				ucost = use->cost;
				ub = use->result_bytes;
				break;
			}
		}
		if ((b->calls && (uc >= b->calls)) ||
		    (b->cost && (ucost > b->cost || cost > b->cost - ucost)) ||
		    (b->result_bytes && ub >= b->result_bytes)) {
			tdeny(out, rule, POL_REASON_BUDGET_EXHAUSTED,
			    "The budget \"%.64s\" for this %s is used up.",
			    b->name, noun);
			return -1;
		}
		r = &out->res[out->nres++];
		r->budget = b->name;
		r->scope = b->scope;
		r->window_s = b->window_s;
		r->calls = 1;
		r->cost = cost;
		r->limit_calls = b->calls;
		r->limit_cost = b->cost;
		r->limit_result_bytes = b->result_bytes;
	}
	return 0;
}

void
pol_verdict_set(struct pol_tool_decision *out, const char *rule, bool ask)
{
	out->d.rule = rule;
	out->message[0] = '\0';
	if (ask) {
		out->d.verdict = POL_ASK;
		out->d.reason = POL_REASON_APPROVAL_REQUIRED;
		snprintf(out->message, sizeof(out->message),
		    "This call waits for a person to approve it.");
	} else {
		out->d.verdict = POL_ALLOW;
		out->d.reason = POL_REASON_ALLOWED;
	}
}

/* The decision of pol_tool_decide over rules[0..nrules) (a policy's tool
 * rules or its prompt rules); noun names the thing in messages. */
static void
trules_decide(const struct pol_policy *p, const struct trule *rules,
    size_t nrules, const struct pol_tool_q *q, struct pol_tool_decision *out,
    const char *noun)
{
	const struct trule	*t = NULL;
	json_t			*args = NULL, *v;
	json_error_t		 jerr;
	const char		*key, *what;
	size_t			 i, j;

	memset(out, 0, sizeof(*out));
	out->classification = pol_class_names[0];
	tdeny(out, "default", POL_REASON_NO_MATCHING_RULE,
	    "The policy does not allow this %s.%s", noun, NULL);
	if (p == NULL || q == NULL || q->server == NULL || q->tool == NULL) {
		tdeny(out, "input", POL_REASON_BAD_REQUEST,
		    "The request could not be evaluated.%s%s", NULL, NULL);
		return;
	}
	out->max_result_bytes = p->result_max_bytes;
	out->args_digest_only = p->audit_digest;
	for (i = 0; i < nrules; i++) {
		if (trule_match(&rules[i], q, true)) {
			t = &rules[i];
			break;
		}
	}
	if (t == NULL)
		return;
	out->classification = pol_class_names[t->classification];
	out->taints = p->taint_level >= 0 &&
	    t->classification >= p->taint_level;
	if (t->decision == TD_DENY) {
		tdeny(out, t->name, POL_REASON_RULE_DENY,
		    "The policy does not allow this %s.%s", noun, NULL);
		return;
	}
	if (t->pin != NULL && (q->pin_hex == NULL ||
	    strcmp(t->pin, q->pin_hex) != 0)) {
		tdeny(out, t->name, POL_REASON_PIN_MISMATCH,
		    "The %s's definition "
		    "changed since it was approved.%s", noun, NULL);
		return;
	}
	args = json_loads(q->args_json ? q->args_json : "{}",
	    JSON_REJECT_DUPLICATES, &jerr);
	if (args == NULL || !json_is_object(args)) {
		tdeny(out, t->name, POL_REASON_BAD_ARGUMENTS,
		    "The arguments are not a "
		    "valid JSON object.%s%s", NULL, NULL);
		goto out;
	}
	json_object_foreach(args, key, v) {
		for (j = 0; j < t->nargs; j++)
			if (strcmp(t->args[j].name, key) == 0)
				break;
		if (j == t->nargs) {
			if (t->allow_other_args)
				continue;
			tdeny(out, t->name, POL_REASON_UNKNOWN_ARGUMENT,
			    "Argument "
			    "\"%.64s\" is not allowed for this %s.", key,
			    noun);
			goto out;
		}
		if ((what = arg_check(p, &t->args[j], v)) != NULL) {
			tdeny(out, t->name, POL_REASON_ARGUMENT_CONSTRAINT,
			    "Argument \"%.64s\" %s.", key, what);
			goto out;
		}
	}
	for (j = 0; j < t->nrequired; j++) {
		if (json_object_get(args, t->required[j]) == NULL) {
			tdeny(out, t->name, POL_REASON_MISSING_ARGUMENT,
			    "Argument "
			    "\"%.64s\" is required.%s", t->required[j], NULL);
			goto out;
		}
	}
	if (pol_budgets_reserve(p, t->budgets, t->nbudgets, t->cost,
	    q->budgets, q->nbudgets, out, t->name, noun) == -1)
		goto out;
	pol_verdict_set(out, t->name, t->decision == TD_ASK);
out:
	json_decref(args);
}

void
pol_tool_decide(const struct pol_policy *p, const struct pol_tool_q *q,
    struct pol_tool_decision *out)
{
	trules_decide(p, p != NULL ? p->tools : NULL, p != NULL ? p->ntools :
	    0, q, out, "tool");
}

void
pol_prompt_decide(const struct pol_policy *p, const struct pol_tool_q *q,
    struct pol_tool_decision *out)
{
	trules_decide(p, p != NULL ? p->prompts : NULL, p != NULL ?
	    p->nprompts : 0, q, out, "prompt");
}

static bool
visible(const struct pol_policy *p, const struct pol_tool_q *q,
    bool conditions, const char *pin_hex, enum pol_reason *reason,
    bool prompts)
{
	const struct trule	*t;
	size_t			 i, n;

	*reason = POL_REASON_NO_MATCHING_RULE;
	if (p == NULL || q->server == NULL || q->tool == NULL)
		return false;
	n = prompts ? p->nprompts : p->ntools;
	for (i = 0; i < n; i++) {
		t = prompts ? &p->prompts[i] : &p->tools[i];
		if (!trule_match(t, q, conditions))
			continue;
		if (t->decision == TD_DENY) {
			/* Without a subject, a conditional deny may not
			 * apply: look further. */
			if (!conditions && (t->nsubjects || t->nlabels))
				continue;
			*reason = POL_REASON_RULE_DENY;
			return false;
		}
		if (t->pin != NULL && (pin_hex == NULL ||
		    strcmp(pin_hex, t->pin) != 0)) {
			*reason = POL_REASON_PIN_MISMATCH;
			return false;
		}
		*reason = POL_REASON_VISIBLE;
		return true;
	}
	return false;
}

bool
pol_tool_visible(const struct pol_policy *p, const char *server,
    const char *tool, const char *pin_hex, enum pol_reason *reason)
{
	struct pol_tool_q q;

	memset(&q, 0, sizeof(q));
	q.server = server;
	q.tool = tool;
	return visible(p, &q, false, pin_hex, reason, false);
}

bool
pol_tool_visible_q(const struct pol_policy *p, const struct pol_tool_q *q,
    enum pol_reason *reason)
{
	if (q == NULL) {
		*reason = POL_REASON_BAD_REQUEST;
		return false;
	}
	return visible(p, q, true, q->pin_hex, reason, false);
}

bool
pol_prompt_visible_q(const struct pol_policy *p, const struct pol_tool_q *q,
    enum pol_reason *reason)
{
	if (q == NULL) {
		*reason = POL_REASON_BAD_REQUEST;
		return false;
	}
	return visible(p, q, true, NULL, reason, true);
}
