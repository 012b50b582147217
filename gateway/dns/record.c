/*
 * record.c: the DNS proxy's events as audit records (dns.decision and the
 * findings that go with it). The proxy hands the daemon flat struct
 * dns_event values; what they mean in the log (field names, the decision
 * vocabulary OCSF and the SOC read, which parts are attacker text) is the
 * proxy's knowledge, so the conversion lives in its room rather than in the
 * recorder, which only submits. The blocks every kind shares (a sandbox
 * {id}, addresses, protocol names, always-accepted strings) come from
 * gateway/record.h.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns_rec.h"
#include "gateway/record.h"

static const char *
rcode_name(uint8_t rc)
{
	switch (rc) {
	case 0:
		return "NOERROR";
	case 1:
		return "FORMERR";
	case 2:
		return "SERVFAIL";
	case 3:
		return "NXDOMAIN";
	case 4:
		return "NOTIMP";
	case 5:
		return "REFUSED";
	case 255:
		return "none";
	default:
		return "other";
	}
}

static const char *
outcome_name(enum dns_decision d)
{
	switch (d) {
	case DNS_DEC_ALLOW:
		return "allow";
	case DNS_DEC_DENY:
		return "deny";
	case DNS_DEC_NODATA:
		return "nodata";
	case DNS_DEC_SYNTHETIC:
		return "synthetic";
	case DNS_DEC_REFUSED:
		return "refused";
	case DNS_DEC_ERROR:
		return "error";
	case DNS_DEC_MALFORMED:
		return "malformed";
	}
	return "unknown";
}

/* The query type as DNS people write it ("A", "HTTPS"), else "TYPEn"
 * written into buf (len bytes; 16 is enough). */
static const char *
qtype_name(uint16_t t, char *buf, size_t len)
{
	const ldns_rr_descriptor *d = ldns_rr_descript(t);

	if (d != NULL && d->_name != NULL && d->_name[0] != '\0')
		return d->_name;
	snprintf(buf, len, "TYPE%u", (unsigned)t);
	return buf;
}

static json_t *
qtype_json(uint16_t t)
{
	char buf[16];

	return json_string(qtype_name(t, buf, sizeof(buf)));
}

/*
 * The dns.decision record is written once per query, on the loop thread, so
 * its construction is on the proxy's hot path. A jansson tree costs an
 * allocation per value and per key, and most of a DNS record is the same
 * from one query to the next: the transport, the class, the decision and
 * rcode words, the answer classes, the protocol names, small counts, and
 * (while one sandbox is busy) its {id} and {id, sha256, rule}. Those are
 * kept here as shared, never-modified values and handed out with an extra
 * reference: the audit writer serialises a record in the submitting thread
 * and then only drops its references, so sharing is invisible in the log.
 * Loop thread only, like every converter.
 */
static json_t *
shared(json_t **slot, const char *s)
{
	if (*slot == NULL)
		*slot = json_string_nocheck(s);
	return json_incref(*slot);
}

/* Small counts (naddrs, nkept, ...) are nearly always within the stored
 * arrays' size. */
#define REC_SMALL_INTS	(DNS_EV_MAX_ADDRS + DNS_EV_MAX_ELEMS + 1)

static json_t *
small_int(uint64_t v)
{
	static json_t *ints[REC_SMALL_INTS];

	if (v >= REC_SMALL_INTS)
		return json_integer((json_int_t)(v > (uint64_t)AUD_INT_MAX ?
		    (uint64_t)AUD_INT_MAX : v));
	if (ints[v] == NULL)
		ints[v] = json_integer((json_int_t)v);
	return json_incref(ints[v]);
}

static json_t *
rcode_json(uint8_t rc)
{
	static json_t *names[8];
	unsigned i = rc <= 5 ? rc : rc == 255 ? 6 : 7;

	return shared(&names[i], rcode_name(rc));
}

static json_t *
outcome_json(enum dns_decision d)
{
	static json_t *names[DNS_DEC_MALFORMED + 2];
	unsigned i = (unsigned)d <= DNS_DEC_MALFORMED ? (unsigned)d :
	    DNS_DEC_MALFORMED + 1;

	return shared(&names[i], outcome_name(d));
}

static json_t *
qtype_shared(uint16_t t)
{
	static json_t *a, *aaaa;

	/* The types a sandbox asks for nearly always. */
	if (t == LDNS_RR_TYPE_A)
		return shared(&a, "A");
	if (t == LDNS_RR_TYPE_AAAA)
		return shared(&aaaa, "AAAA");
	return qtype_json(t);
}

static json_t *
proto_json(uint8_t p)
{
	static json_t *tcp, *udp;
	char pb[8];

	if (p == IPPROTO_TCP)
		return shared(&tcp, "tcp");
	if (p == IPPROTO_UDP)
		return shared(&udp, "udp");
	return json_string(rec_proto_name(p, pb, sizeof(pb)));
}

/* The address class words of pol_addr_class_name, a dozen of them; an
 * unexpected one is still written, only not shared. */
static json_t *
class_json(const char *cls, size_t len)
{
	static struct {
		char	 name[16];
		json_t	*v;
	} tab[16];
	size_t i;

	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		if (tab[i].v == NULL) {
			if (len >= sizeof(tab[i].name) ||
			    (tab[i].v = json_stringn(cls, len)) == NULL)
				break;
			memcpy(tab[i].name, cls, len);
			tab[i].name[len] = '\0';
			return json_incref(tab[i].v);
		}
		if (strncmp(tab[i].name, cls, len) == 0 &&
		    tab[i].name[len] == '\0')
			return json_incref(tab[i].v);
	}
	return json_stringn(cls, len);
}

/* inet_ntop formats IPv4 through stdio; an answer's address is one of the
 * few values of a record that is new every time. */
static json_t *
addr_fast(uint8_t family, const uint8_t *a)
{
	char buf[16];

	if (family == AF_INET6)
		return rec_addr_json(family, a);
	return json_stringn_nocheck(buf, pol_ipv4_format(a, buf));
}

/* Builds {k1: v1, ...} from n pairs, stealing every value (also on
 * failure); NULL if any value or the object is missing. */
static json_t *
obj_of(size_t n, const char *const *keys, json_t **vals)
{
	json_t *o = json_object();
	size_t i;
	int bad = o == NULL;

	for (i = 0; i < n; i++) {
		if (bad || vals[i] == NULL ||
		    json_object_set_new_nocheck(o, keys[i], vals[i]) == -1) {
			json_decref(vals[i]);
			bad = 1;
		}
	}
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* {id} of the sandbox of the last record: a busy sandbox asks many
 * queries in a row. */
static json_t *
sandbox_shared(const char *id)
{
	static char last[sizeof(((struct dns_event *)0)->sandbox)];
	static json_t *v;

	if (v != NULL && strcmp(last, id) == 0)
		return json_incref(v);
	json_decref(v);
	v = NULL;
	if (strlen(id) >= sizeof(last))
		return rec_sandbox_json(id);
	if ((v = rec_sandbox_json(id)) == NULL)
		return NULL;
	snprintf(last, sizeof(last), "%s", id);
	return json_incref(v);
}

/* {id, sha256, rule} for the last (policy, rule) seen. Compared by the
 * name and digest, not the pointer: a reload may free a policy and a new
 * one may take its address. */
static json_t *
policy_shared(const struct pol_policy *policy, const char *rule)
{
	static char name[128], digest[72], lrule[sizeof(((struct dns_event *)
	    0)->rule)];
	static json_t *v;
	static const char *const keys[] = { "id", "sha256", "rule" };
	const char *n = pol_policy_name(policy);
	const char *d = pol_policy_digest(policy);
	json_t *vals[3];
	int fits;

	if (v != NULL && strcmp(name, n) == 0 && strcmp(digest, d) == 0 &&
	    strcmp(lrule, rule) == 0)
		return json_incref(v);
	vals[0] = rec_string(n);
	vals[1] = rec_string(d);
	vals[2] = rec_string(rule);
	json_decref(v);
	v = NULL;
	fits = strlen(n) < sizeof(name) && strlen(d) < sizeof(digest) &&
	    strlen(rule) < sizeof(lrule);
	if (!fits)
		return obj_of(3, keys, vals);
	if ((v = obj_of(3, keys, vals)) == NULL)
		return NULL;
	snprintf(name, sizeof(name), "%s", n);
	snprintf(digest, sizeof(digest), "%s", d);
	snprintf(lrule, sizeof(lrule), "%s", rule);
	return json_incref(v);
}

static json_t *
dns_answers(const struct dns_event *ev, bool kept)
{
	static const char *const keys[] = { "ip", "ttl", "class" };
	static json_t *empty;
	json_t *arr = NULL, *vals[3];
	size_t i;

	for (i = 0; i < ev->naddrs && i < DNS_EV_MAX_ADDRS; i++) {
		const struct dns_ev_addr *a = &ev->addrs[i];

		if (a->kept != kept)
			continue;
		if (arr == NULL && (arr = json_array()) == NULL)
			return NULL;
		vals[0] = addr_fast(a->family, a->addr);
		vals[1] = json_integer((json_int_t)a->ttl);
		vals[2] = class_json(a->cls, strnlen(a->cls, sizeof(a->cls)));
		if (json_array_append_new(arr, obj_of(3, keys, vals)) == -1) {
			json_decref(arr);
			return NULL;
		}
	}
	/* Most records have nothing removed (or nothing kept): one shared
	 * empty array, never appended to once built. */
	if (arr == NULL) {
		if (empty == NULL)
			empty = json_array();
		return json_incref(empty);
	}
	return arr;
}

static json_t *
dns_elements(const struct dns_event *ev)
{
	static const char *const keys[] = { "ip", "proto", "port_lo",
	    "port_hi", "timeout_ms", "keep" };
	json_t *arr, *vals[6];
	size_t i, n;

	if ((arr = json_array()) == NULL)
		return NULL;
	for (i = 0; i < ev->nelems && i < DNS_EV_MAX_ELEMS; i++) {
		const struct dns_ev_elem *e = &ev->elems[i];

		vals[0] = addr_fast(e->family, e->addr);
		vals[1] = proto_json(e->proto);
		vals[2] = json_integer((json_int_t)e->port_lo);
		vals[3] = e->port_hi == e->port_lo ? json_incref(vals[2]) :
		    json_integer((json_int_t)e->port_hi);
		vals[4] = json_integer((json_int_t)e->timeout_ms);
		/* Kept through a taint (a keep-listed host); absent, not
		 * false, otherwise so that the common record stays short. */
		n = 5;
		if (e->flags & FW_ELEM_KEEP)
			vals[n++] = json_true();
		if (json_array_append_new(arr, obj_of(n, keys, vals)) == -1) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/* ------------------------------------------------- dns.decision as bytes */

#define CW_K(w, lit)	aud_cw_raw((w), (lit), sizeof(lit) - 1)

/* rec_string()'s rules as bytes: the string if it can be canonical, else the
 * same with every byte outside printable ASCII shown as '?'. */
static void
cw_s(struct aud_cw *w, const char *s, size_t n)
{
	char tmp[512];
	size_t i;

	if (aud_cw_str(w, s, n) == 0)
		return;
	if (n > sizeof(tmp)) {
		w->overflow = 1;	/* the tree path handles it */
		return;
	}
	for (i = 0; i < n; i++)
		tmp[i] = (unsigned char)s[i] < 0x20 ||
		    (unsigned char)s[i] >= 0x7f ? '?' : s[i];
	(void)aud_cw_str(w, tmp, n);
}

static void
cw_cs(struct aud_cw *w, const char *s)
{
	cw_s(w, s, strlen(s));
}

static void
cw_u(struct aud_cw *w, uint64_t v)
{
	(void)aud_cw_int(w, (long long)(v > (uint64_t)AUD_INT_MAX ?
	    (uint64_t)AUD_INT_MAX : v));
}

static void
cw_addr(struct aud_cw *w, uint8_t family, const uint8_t *a)
{
	char buf[INET6_ADDRSTRLEN];

	/* addr_fast's forms: IPv4 by hand, IPv6 through inet_ntop. */
	if (family == AF_INET6) {
		if (inet_ntop(AF_INET6, a, buf, sizeof(buf)) == NULL)
			CW_K(w, "\"?\"");
		else
			cw_cs(w, buf);
		return;
	}
	cw_s(w, buf, pol_ipv4_format(a, buf));
}

static void
cw_answers(struct aud_cw *w, const struct dns_event *ev, bool kept)
{
	size_t i;
	int first = 1;

	CW_K(w, "[");
	for (i = 0; i < ev->naddrs && i < DNS_EV_MAX_ADDRS; i++) {
		const struct dns_ev_addr *a = &ev->addrs[i];

		if (a->kept != kept)
			continue;
		if (!first)
			CW_K(w, ",");
		first = 0;
		CW_K(w, "{\"class\":");
		if (aud_cw_str(w, a->cls, strnlen(a->cls, sizeof(a->cls))) ==
		    -1)
			w->overflow = 1;	/* the tree path refuses it */
		CW_K(w, ",\"ip\":");
		cw_addr(w, a->family, a->addr);
		CW_K(w, ",\"ttl\":");
		cw_u(w, a->ttl);
		CW_K(w, "}");
	}
	CW_K(w, "]");
}

static void
cw_elements(struct aud_cw *w, const struct dns_event *ev)
{
	char pb[8];
	size_t i;

	CW_K(w, "[");
	for (i = 0; i < ev->nelems && i < DNS_EV_MAX_ELEMS; i++) {
		const struct dns_ev_elem *e = &ev->elems[i];

		if (i > 0)
			CW_K(w, ",");
		CW_K(w, "{\"ip\":");
		cw_addr(w, e->family, e->addr);
		if (e->flags & FW_ELEM_KEEP)
			CW_K(w, ",\"keep\":true");
		CW_K(w, ",\"port_hi\":");
		cw_u(w, e->port_hi);
		CW_K(w, ",\"port_lo\":");
		cw_u(w, e->port_lo);
		CW_K(w, ",\"proto\":");
		cw_cs(w, rec_proto_name(e->proto, pb, sizeof(pb)));
		CW_K(w, ",\"timeout_ms\":");
		cw_u(w, e->timeout_ms);
		CW_K(w, "}");
	}
	CW_K(w, "]");
}

/* The members in bytewise key order, as the canonical form sorts them. */
int
dns_rec_canon(const struct dns_event *ev, const struct pol_policy *policy,
    struct aud_cw *w)
{
	char tb[16];

	CW_K(w, "{\"answers\":");
	cw_answers(w, ev, true);
	CW_K(w, ",\"client\":");
	cw_cs(w, ev->client);
	CW_K(w, ",\"decision\":");
	if (ev->decision == DNS_DEC_ALLOW || ev->decision == DNS_DEC_SYNTHETIC)
		CW_K(w, "\"allow\"");
	else
		CW_K(w, "\"deny\"");
	CW_K(w, ",\"elements\":");
	cw_elements(w, ev);
	if (ev->finding)
		CW_K(w, ",\"finding\":true");
	CW_K(w, ",\"latency_us\":");
	cw_u(w, ev->latency_us);
	CW_K(w, ",\"naddrs\":");
	cw_u(w, ev->naddrs);
	CW_K(w, ",\"nelems\":");
	cw_u(w, ev->nelems);
	CW_K(w, ",\"nkept\":");
	cw_u(w, ev->nkept);
	CW_K(w, ",\"nremoved\":");
	cw_u(w, ev->nremoved);
	CW_K(w, ",\"outcome\":");
	cw_cs(w, outcome_name(ev->decision));
	if (policy != NULL) {
		CW_K(w, ",\"policy\":{\"id\":");
		cw_cs(w, pol_policy_name(policy));
		CW_K(w, ",\"rule\":");
		cw_cs(w, ev->rule);
		CW_K(w, ",\"sha256\":");
		cw_cs(w, pol_policy_digest(policy));
		CW_K(w, "}");
	}
	CW_K(w, ",\"q\":{\"class\":\"IN\",\"name\":");
	cw_cs(w, ev->qname);
	CW_K(w, ",\"type\":");
	cw_cs(w, qtype_name(ev->qtype, tb, sizeof(tb)));
	CW_K(w, "},\"rcode\":");
	cw_cs(w, rcode_name(ev->rcode));
	CW_K(w, ",\"reason\":");
	cw_cs(w, pol_reason_name(ev->reason));
	CW_K(w, ",\"removed\":");
	cw_answers(w, ev, false);
	if (ev->upstream[0] != '\0') {
		CW_K(w, ",\"resolver\":");
		cw_cs(w, ev->upstream);
	}
	if (policy == NULL && ev->rule[0] != '\0') {
		CW_K(w, ",\"rule\":");
		cw_cs(w, ev->rule);
	}
	if (ev->sandbox[0] != '\0') {
		CW_K(w, ",\"sandbox\":{\"id\":");
		cw_cs(w, ev->sandbox);
		CW_K(w, "}");
	}
	if (ev->suppressed > 0) {
		CW_K(w, ",\"suppressed\":");
		cw_u(w, ev->suppressed);
	}
	CW_K(w, ",\"transport\":");
	if (ev->tcp)
		CW_K(w, "\"tcp\"");
	else
		CW_K(w, "\"udp\"");
	CW_K(w, "}");
	return w->overflow ? -1 : 0;
}

json_t *
dns_rec_fields(const struct dns_event *ev, const struct pol_policy *policy)
{
	static json_t *k_udp, *k_tcp, *k_allow, *k_deny, *k_in;
	static const char *const qkeys[] = { "name", "type", "class" };
	json_t *o, *q[3];
	int bad = 0;

	if ((o = json_object()) == NULL)
		return NULL;
	if (ev->sandbox[0] != '\0')
		bad |= rec_put(o, "sandbox", sandbox_shared(ev->sandbox));
	bad |= rec_put(o, "client", rec_string(ev->client));
	bad |= rec_put(o, "transport", ev->tcp ? shared(&k_tcp, "tcp") :
	    shared(&k_udp, "udp"));
	q[0] = rec_string(ev->qname);
	q[1] = qtype_shared(ev->qtype);
	q[2] = shared(&k_in, "IN");
	bad |= rec_put(o, "q", obj_of(3, qkeys, q));
	/* decision keeps to the common vocabulary (allow/deny) that OCSF and
	 * the SOC read; outcome says which kind of answer it was. */
	bad |= rec_put(o, "decision", ev->decision == DNS_DEC_ALLOW ||
	    ev->decision == DNS_DEC_SYNTHETIC ? shared(&k_allow, "allow") :
	    shared(&k_deny, "deny"));
	bad |= rec_put(o, "outcome", outcome_json(ev->decision));
	bad |= rec_put(o, "reason", rec_string(pol_reason_name(ev->reason)));
	bad |= rec_put(o, "rcode", rcode_json(ev->rcode));
	bad |= rec_put(o, "answers", dns_answers(ev, true));
	bad |= rec_put(o, "removed", dns_answers(ev, false));
	bad |= rec_put(o, "elements", dns_elements(ev));
	bad |= rec_put(o, "naddrs", small_int(ev->naddrs));
	bad |= rec_put(o, "nkept", small_int(ev->nkept));
	bad |= rec_put(o, "nremoved", small_int(ev->nremoved));
	bad |= rec_put(o, "nelems", small_int(ev->nelems));
	if (ev->upstream[0] != '\0')
		bad |= rec_put(o, "resolver", rec_string(ev->upstream));
	bad |= rec_put(o, "latency_us", json_integer((json_int_t)
	    (ev->latency_us > (uint64_t)AUD_INT_MAX ? (uint64_t)AUD_INT_MAX :
	    ev->latency_us)));
	if (ev->finding)
		bad |= rec_put(o, "finding", json_true());
	/* Over-rate queries dropped since this sandbox's previous record:
	 * the count the log keeps of what it was not told one by one. */
	if (ev->suppressed > 0)
		bad |= rec_put(o, "suppressed", json_integer(ev->suppressed));
	if (policy != NULL)
		bad |= rec_put(o, "policy", policy_shared(policy, ev->rule));
	else if (ev->rule[0] != '\0')
		bad |= rec_put(o, "rule", rec_string(ev->rule));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *
dns_rec_finding(const struct dns_event *ev)
{
	char detail[512];
	const char *type;

	/* The proxy raises findings for answers that pointed somewhere no
	 * public name may (rebinding; some addresses removed), for floods
	 * over the rate limit, for a sandbox at its learn cap, and for names
	 * that look like a tunnel. */
	if (ev->nremoved > 0 || ev->reason == POL_REASON_REBINDING)
		type = "dns_rebinding";
	else if (ev->reason == POL_REASON_RATE_LIMITED)
		type = "dns_flood";
	else if (ev->reason == POL_REASON_LEARNED_CAP)
		type = "dns_learned_cap";
	else
		type = "dns_tunnel";
	snprintf(detail, sizeof(detail), "%s: %s (client %s)",
	    pol_reason_name(ev->reason), ev->qname, ev->client);
	return rec_finding_fields(ev->sandbox[0] != '\0' ? ev->sandbox : NULL,
	    type, "high", detail);
}
