/*
 * fuzz_dns_answer: the DNS proxy's answer filter (gateway/dns/filter.c,
 * dns_filter_answer) under hostile upstream answers.
 *
 * An answer that matches the query's id and question is still attacker
 * input: a malicious or spoofed resolver chooses every record in it. This
 * filter is what stands between such an answer and the kernel's learned
 * sets (DNS rebinding, metadata, private ranges, addresses for other
 * names). The input's first byte picks the question (A, AAAA, CNAME or
 * HTTPS, tainted or not); the rest is the upstream message. Beyond "does
 * not crash", every run holds the invariants the proxy relies on:
 *   - every kept A/AAAA record is of the asked type, class IN, and its
 *     address is never in an always-denied class, never private outside
 *     the policy's one private allow (10.9.0.0/16), never in its denied
 *     range (203.0.113.0/25);
 *   - every kept record's owner is the queried name or the target of a
 *     kept CNAME, and every kept CNAME's owner is too (the chain);
 *   - every element names the sandbox's link, is an address of a kept
 *     record, and has a timeout within [min_ttl, max_ttl]; no kept record
 *     leaves with a TTL above max_ttl;
 *   - the event's counts agree: nkept + nremoved == naddrs.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns.h"
#include "policy/policy.h"
#include "tests/fuzz/fuzz.h"

static const char policy_text[] =
    "version: 1\n"
    "name: fuzz-answer\n"
    "egress:\n"
    "  allow:\n"
    "    - host: \"*.example.com\"\n"
    "      ports: [443, \"8000-8010\"]\n"
    "    - cidr: 10.9.0.0/16\n"
    "      ports: [443]\n"
    "  deny:\n"
    "    - cidr: 203.0.113.0/25\n"
    "dns:\n"
    "  types: [A, AAAA, CNAME, HTTPS]\n"
    "  min_ttl: 30s\n"
    "  max_ttl: 1h\n";

static struct pol_policy *policy;

/* The question www.example.com, as the query parser would leave it. */
static void
question(struct dns_query *q, uint16_t qtype)
{
	static const uint8_t w[] = "\3www\7example\3com";

	memset(q, 0, sizeof(*q));
	q->qtype = qtype;
	q->qclass = LDNS_RR_CLASS_IN;
	snprintf(q->qname, sizeof(q->qname), "www.example.com");
	memcpy(q->qwire, w, sizeof(w));		/* with the root label */
	q->qwire_len = sizeof(w);
}

/* Is rdf one of the names the chain may hold: the question, or the target
 * of a kept CNAME? */
static bool
on_chain(const ldns_rdf *owner, const ldns_rdf *qn, ldns_rr_list *an,
    const bool *keep)
{
	size_t i;

	if (ldns_dname_compare(owner, qn) == 0)
		return true;
	for (i = 0; i < ldns_rr_list_rr_count(an); i++) {
		ldns_rr *rr = ldns_rr_list_rr(an, i);

		if (keep[i] && ldns_rr_get_type(rr) == LDNS_RR_TYPE_CNAME &&
		    ldns_rr_rd_count(rr) == 1 &&
		    ldns_dname_compare(ldns_rr_rdf(rr, 0), owner) == 0)
			return true;
	}
	return false;
}

static bool
in_v4(const uint8_t *a, const char *net, unsigned bits)
{
	uint32_t x, n, m = bits ? ~0u << (32 - bits) : 0;

	inet_pton(AF_INET, net, &n);
	memcpy(&x, a, 4);
	return (ntohl(x) & m) == (ntohl(n) & m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t types[] = { LDNS_RR_TYPE_A, LDNS_RR_TYPE_AAAA,
	    LDNS_RR_TYPE_CNAME, 65 };
	struct dns_client c;
	struct dns_query q;
	struct dns_filter_in in;
	struct dns_filter_out out;
	struct pol_dns_limits lim;
	struct dns_event *ev;
	ldns_pkt *pkt = NULL;
	ldns_rr_list *an;
	ldns_rdf *qn;
	size_t i, j, nan;

	if (policy == NULL) {
		policy = fuzz_policy_text("fuzz-answer.yaml", policy_text,
		    sizeof(policy_text) - 1);
	}
	if (size < 1 + 12)
		return 0;
	if (ldns_wire2pkt(&pkt, data + 1, size - 1) != LDNS_STATUS_OK ||
	    pkt == NULL)
		return 0;
	question(&q, types[data[0] & 3]);
	memset(&c, 0, sizeof(c));
	snprintf(c.id, sizeof(c.id), "fuzz");
	snprintf(c.ifname, sizeof(c.ifname), "sl-fuzz");
	c.policy = policy;
	c.tainted = (data[0] & 4) != 0;
	pol_dns_limits(policy, &lim);
	REQUIRE(lim.min_ttl_s == 30 && lim.max_ttl_s == 3600);
	memset(&in, 0, sizeof(in));
	in.q = &q;
	in.c = &c;
	in.lim = &lim;
	ev = calloc(1, sizeof(*ev));
	REQUIRE(ev != NULL);
	if (dns_filter_answer(&in, pkt, ev, &out) == -1) {
		/* Only allocation fails; out is empty then. */
		REQUIRE(out.keep == NULL && out.el == NULL && out.nel == 0);
		goto done;
	}
	REQUIRE(ev->nkept + ev->nremoved == ev->naddrs);
	an = ldns_pkt_answer(pkt);
	nan = ldns_rr_list_rr_count(an);
	qn = ldns_rdf_new_frm_data(LDNS_RDF_TYPE_DNAME, q.qwire_len, q.qwire);
	REQUIRE(qn != NULL);
	for (i = 0; i < nan; i++) {
		ldns_rr *rr = ldns_rr_list_rr(an, i);
		ldns_rr_type t = ldns_rr_get_type(rr);
		struct pol_addr a;
		struct pol_addr_info info;
		ldns_rdf *rd;

		if (!out.keep[i])
			continue;
		REQUIRE(ldns_rr_get_class(rr) == LDNS_RR_CLASS_IN);
		REQUIRE(on_chain(ldns_rr_owner(rr), qn, an, out.keep));
		REQUIRE(out.ttls[i] <= lim.max_ttl_s);
		if (t != LDNS_RR_TYPE_A && t != LDNS_RR_TYPE_AAAA)
			continue;
		REQUIRE((uint16_t)t == q.qtype);
		rd = ldns_rr_rdf(rr, 0);
		REQUIRE(rd != NULL);
		memset(&a, 0, sizeof(a));
		a.family = t == LDNS_RR_TYPE_A ? AF_INET : AF_INET6;
		REQUIRE(ldns_rdf_size(rd) == (a.family == AF_INET ? 4u : 16u));
		memcpy(a.a, ldns_rdf_data(rd), ldns_rdf_size(rd));
		pol_addr_classify(&a, NULL, 0, &info);
		REQUIRE(!pol_addr_class_always_denied(info.cls));
		if (a.family == AF_INET) {
			REQUIRE(!in_v4(a.a, "203.0.113.0", 25));
			REQUIRE(info.cls == POL_ADDR_PUBLIC ||
			    in_v4(a.a, "10.9.0.0", 16));
		} else if (info.embed != POL_EMBED_NONE) {
			/* An IPv4 inside IPv6 is held to the IPv4 rules. */
			REQUIRE(!in_v4(info.inner.a, "203.0.113.0", 25));
			REQUIRE(info.cls == POL_ADDR_PUBLIC ||
			    in_v4(info.inner.a, "10.9.0.0", 16));
		} else
			REQUIRE(info.cls == POL_ADDR_PUBLIC);
	}
	for (j = 0; j < out.nel; j++) {
		const struct fw_elem *e = &out.el[j];
		bool found = false;

		REQUIRE(strcmp(e->ifname, c.ifname) == 0);
		REQUIRE(e->timeout_ms >= lim.min_ttl_s * 1000u &&
		    e->timeout_ms <= lim.max_ttl_s * 1000u);
		REQUIRE(e->port_lo <= e->port_hi);
		for (i = 0; i < nan && !found; i++) {
			ldns_rr *rr = ldns_rr_list_rr(an, i);
			ldns_rdf *rd;

			if (!out.keep[i] || (ldns_rr_get_type(rr) !=
			    LDNS_RR_TYPE_A && ldns_rr_get_type(rr) !=
			    LDNS_RR_TYPE_AAAA))
				continue;
			rd = ldns_rr_rdf(rr, 0);
			found = (e->family == AF_INET ? 4u : 16u) ==
			    ldns_rdf_size(rd) && memcmp(e->addr,
			    ldns_rdf_data(rd), ldns_rdf_size(rd)) == 0;
		}
		REQUIRE(found);
	}
	ldns_rdf_deep_free(qn);
	dns_filter_out_free(&out);
done:
	free(ev);
	ldns_pkt_free(pkt);
	return 0;
}
