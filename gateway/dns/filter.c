/*
 * filter: what the proxy keeps of an upstream answer and which kernel
 * elements it makes of it: the CNAME chain of the question, the address
 * cap, every address classified (no rebinding to metadata, loopback or
 * private ranges), one element per port range the name is allowed on,
 * and the taint keep-list flag. It is pure apart from allocation (no I/O,
 * no clock, no proxy state), so that the fuzz target and the unit tests
 * drive it alone (dns_filter_answer in dns.h).
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns_int.h"

#define DNS_MAX_CHAIN		16	/* CNAMEs followed */
#define DNS_MAX_PORTS		16
#define DNS_MAX_SEGS		(DNS_MAX_PORTS * 4)

/* A port range of a learned element and whether it is on the taint
 * keep-list (FW_ELEM_KEEP). */
struct dns_seg {
	uint8_t		proto;
	uint16_t	lo, hi;
	uint8_t		flags;
	uint8_t		budget;		/* pol_net_rule.budget of its rule */
};

/*
 * dns_port_segments: the port ranges one answered address is learned with.
 * ports are what the sandbox may use the name with now; keep are the
 * name's taint keep-list entries. Each range of ports is cut where keep
 * ranges of the same protocol begin and end, and the pieces inside one
 * get FW_ELEM_KEEP, confirmed by the pure decision for a tainted sandbox
 * (pol_egress_decide with tainted=true on both ends), so the piece stays
 * usable after a taint and nothing outside the keep-list does. Pieces are
 * disjoint and cover exactly the ranges of ports. ports and keep hold TCP
 * and UDP rules only (the caller filters them with ports_learnable).
 * Returns the count (at most max; ranges past it are left out, which only
 * narrows).
 */
static size_t
dns_port_segments(const struct pol_policy *pol, const char *name,
    const struct pol_net_rule *ports, size_t nports,
    const struct pol_net_rule *keep, size_t nkeep, struct dns_seg *out,
    size_t max)
{
	size_t i, k, n = 0;

	for (i = 0; i < nports && n < max; i++) {
		uint32_t cur = ports[i].port_lo, hi = ports[i].port_hi;

		while (cur <= hi && n < max) {
			uint32_t end = hi, next = hi + 1;
			bool in = false;

			for (k = 0; k < nkeep; k++) {
				if (keep[k].proto != ports[i].proto)
					continue;
				if (keep[k].port_lo <= cur &&
				    cur <= keep[k].port_hi) {
					/* Inside: up to this keep range's end
					 * (overlapping keep ranges extend it on
					 * the next turn). */
					if (!in || keep[k].port_hi > end)
						end = keep[k].port_hi < hi ?
						    keep[k].port_hi : hi;
					in = true;
				} else if (!in && keep[k].port_lo > cur &&
				    keep[k].port_lo <= hi &&
				    keep[k].port_lo < next)
					next = keep[k].port_lo;
			}
			if (!in)
				end = next - 1;
			out[n].proto = ports[i].proto;
			out[n].budget = ports[i].budget;
			out[n].lo = (uint16_t)cur;
			out[n].hi = (uint16_t)end;
			out[n].flags = in && pol_egress_range_allowed(pol, name,
			    ports[i].proto, (uint16_t)cur, (uint16_t)end,
			    true) ?
			    FW_ELEM_KEEP : 0;
			n++;
			cur = end + 1;
		}
	}
	return n;
}

/*
 * ports_learnable: keeps, in order, only the TCP and UDP rules of
 * r[0..n) and returns their count. A learned element is an address with
 * a protocol and a port range, and the firewall takes TCP and UDP ones
 * only (fw_learn refuses any other, failing the whole answer). ICMP to a
 * name is not opened by learning: the firewall's ICMP allowance is by
 * address (CIDR rules). So a name's ICMP rule neither reaches learn nor
 * stops the name resolving and its TCP/UDP rules being learned.
 */
static size_t
ports_learnable(struct pol_net_rule *r, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		if (r[i].proto == IPPROTO_TCP || r[i].proto == IPPROTO_UDP)
			r[k++] = r[i];
	return k;
}

static bool
chain_has(ldns_rdf **chain, size_t n, const ldns_rdf *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ldns_dname_compare(chain[i], name) == 0)
			return true;
	return false;
}

static uint32_t
clamp_ttl(const struct pol_dns_limits *l, uint32_t ttl)
{
	if (ttl < l->min_ttl_s)
		return l->min_ttl_s;
	if (l->max_ttl_s != 0 && ttl > l->max_ttl_s)
		return l->max_ttl_s;
	return ttl;
}

/* Decide whether an answered address may be used by this sandbox. The
 * precedence is the policy's: pol_egress_decide over the address literal
 * (with the first protocol/port the name is allowed on). Host rules are
 * names, so a public address of an allowed name comes back "no matching
 * rule" and is kept; an explicit deny (e.g. a CIDR deny covering it), a
 * private class without an explicit CIDR allow and the always-denied
 * classes are removed. */
static bool
addr_keep(const struct dns_filter_in *in, const struct pol_addr *a,
    const struct pol_net_rule *ports, size_t nports, struct dns_ev_addr *ea)
{
	struct pol_addr_info info;
	struct pol_egress_q eq;
	struct pol_decision d;
	char lit[INET6_ADDRSTRLEN];

	pol_addr_classify(a, in->treat_as_public, in->ntreat_as_public,
	    &info);
	if (ea != NULL)
		dns_copystr(ea->cls, sizeof(ea->cls),
		    pol_addr_class_name(info.cls));
	if (pol_addr_class_always_denied(info.cls))
		return false;
	if (pol_addr_format(a, lit, sizeof(lit)) == NULL)
		return false;
	memset(&eq, 0, sizeof(eq));
	eq.host = lit;
	eq.proto = nports > 0 ? ports[0].proto : IPPROTO_TCP;
	eq.port = nports > 0 ? ports[0].port_lo : 443;
	eq.tainted = in->c->tainted;
	eq.treat_as_public = in->treat_as_public;
	eq.ntreat_as_public = in->ntreat_as_public;
	memset(&d, 0, sizeof(d));
	d.verdict = POL_DENY;
	pol_egress_decide(in->c->policy, &eq, &d);
	if (d.verdict == POL_ALLOW)
		return true;
	if (info.cls != POL_ADDR_PUBLIC)
		return false;
	/* Only "nothing about this address" keeps it (the name already
	 * decided, including a tainted sandbox's keep-list); any other
	 * reason, known or not, removes it. */
	return d.reason == POL_REASON_NO_MATCHING_RULE ||
	    d.reason == POL_REASON_TAINTED;
}

void
dns_filter_out_free(struct dns_filter_out *out)
{
	if (out == NULL)
		return;
	free(out->keep);
	free(out->ttls);
	free(out->el);
	memset(out, 0, sizeof(*out));
}

int
dns_filter_answer(const struct dns_filter_in *in, struct ldns_struct_pkt *pkt,
    struct dns_event *ev, struct dns_filter_out *out)
{
	const struct pol_dns_limits *lim = in->lim;
	const struct dns_query *q = in->q;
	ldns_rr_list *an = ldns_pkt_answer(pkt);
	size_t nan = ldns_rr_list_rr_count(an), i, k, nports, nel = 0;
	ldns_rdf *chain[DNS_MAX_CHAIN + 1];
	size_t nchain = 0;
	struct pol_net_rule ports[DNS_MAX_PORTS], kports[DNS_MAX_PORTS];
	struct dns_seg segs[DNS_MAX_SEGS];
	size_t nkports, nsegs, elcap, naddr = 0;
	size_t max_addrs = in->max_addrs != 0 ? in->max_addrs :
	    DNS_MAX_ANSWER_ADDRS;
	uint64_t tmo;
	bool grew;
	ldns_rdf *qn;

	memset(out, 0, sizeof(*out));
	if ((qn = ldns_rdf_new_frm_data(LDNS_RDF_TYPE_DNAME, q->qwire_len,
	    q->qwire)) == NULL)
		return -1;
	chain[nchain++] = qn;
	/* Follow the CNAME chain from the queried name; records whose owner
	 * is not on it are dropped, so an upstream cannot slip in
	 * addresses for other names. */
	do {
		grew = false;
		for (i = 0; i < nan && nchain <= DNS_MAX_CHAIN; i++) {
			ldns_rr *rr = ldns_rr_list_rr(an, i);
			ldns_rdf *t;

			/* Only links that are sent on: a CNAME of another
			 * class would lead to records whose way from the
			 * question the sandbox never sees. */
			if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_CNAME ||
			    ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN ||
			    ldns_rr_rd_count(rr) != 1 ||
			    !chain_has(chain, nchain, ldns_rr_owner(rr)))
				continue;
			t = ldns_rr_rdf(rr, 0);
			if (ldns_rdf_get_type(t) != LDNS_RDF_TYPE_DNAME ||
			    chain_has(chain, nchain, t))
				continue;
			if (nchain <= DNS_MAX_CHAIN) {
				chain[nchain++] = t;
				grew = true;
			}
		}
	} while (grew && nchain <= DNS_MAX_CHAIN);

	nports = pol_egress_ports_for_name(in->c->policy, q->qname,
	    in->c->tainted, ports, DNS_MAX_PORTS);
	if (nports > DNS_MAX_PORTS)
		nports = DNS_MAX_PORTS;
	/* Also before addr_keep, which decides with the first of them. */
	nports = ports_learnable(ports, nports);
	/* The taint keep-list is asked for also while the sandbox is not
	 * tainted: elements learned now must still work right after a
	 * taint narrows it (FW_ELEM_KEEP). */
	nkports = pol_egress_ports_for_name(in->c->policy, q->qname, true,
	    kports, DNS_MAX_PORTS);
	if (nkports > DNS_MAX_PORTS)
		nkports = DNS_MAX_PORTS;
	nkports = ports_learnable(kports, nkports);
	nsegs = dns_port_segments(in->c->policy, q->qname, ports, nports,
	    kports, nkports, segs, DNS_MAX_SEGS);
	out->keep = calloc(nan + 1, sizeof(*out->keep));
	out->ttls = calloc(nan + 1, sizeof(*out->ttls));
	/* Every address yields nsegs elements: size for that, not for the
	 * worst case, as this runs once per answer. */
	elcap = nan * nsegs < DNS_MAX_ELEMS ? nan * nsegs : DNS_MAX_ELEMS;
	out->el = calloc(elcap ? elcap : 1, sizeof(*out->el));
	if (out->keep == NULL || out->ttls == NULL || out->el == NULL) {
		ldns_rdf_deep_free(qn);
		dns_filter_out_free(out);
		return -1;
	}
	for (i = 0; i < nan; i++) {
		ldns_rr *rr = ldns_rr_list_rr(an, i);
		ldns_rr_type t = ldns_rr_get_type(rr);
		uint32_t ttl = ldns_rr_ttl(rr);
		struct pol_addr a;
		ldns_rdf *rd;
		struct dns_ev_addr *ea;

		if (ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN ||
		    !chain_has(chain, nchain, ldns_rr_owner(rr)))
			continue;
		if (t == LDNS_RR_TYPE_CNAME) {
			out->keep[i] = true;
			out->ttls[i] = lim->max_ttl_s && ttl > lim->max_ttl_s ?
			    lim->max_ttl_s : ttl;
			continue;
		}
		if (t != LDNS_RR_TYPE_A && t != LDNS_RR_TYPE_AAAA) {
			/* Other types only when they were asked for. */
			if ((uint16_t)t == q->qtype) {
				out->keep[i] = true;
				out->ttls[i] = lim->max_ttl_s &&
				    ttl > lim->max_ttl_s ? lim->max_ttl_s : ttl;
			}
			continue;
		}
		/* Addresses only for an A/AAAA question: an address that the
		 * kernel will not learn must not reach the sandbox either. */
		if ((uint16_t)t != q->qtype)
			continue;
		rd = ldns_rr_rdf(rr, 0);
		memset(&a, 0, sizeof(a));
		a.family = t == LDNS_RR_TYPE_A ? AF_INET : AF_INET6;
		if (ldns_rr_rd_count(rr) != 1 || rd == NULL ||
		    ldns_rdf_size(rd) != (a.family == AF_INET ? 4u : 16u))
			continue;
		memcpy(a.a, ldns_rdf_data(rd), ldns_rdf_size(rd));
		/*
		 * Past the address cap (a real answer has a handful; an
		 * upstream that a sandbox controls can send thousands, each
		 * costing the kernel an element per port range and the loop a
		 * policy decision) the address is dropped from the answer
		 * unexamined, and past the element cap it could not be
		 * learned: the sandbox does not get it either. Dropping
		 * rather than refusing the answer keeps a name of many
		 * addresses working with the first of them, which is all a
		 * client uses; refusing would give nothing more against an
		 * upstream that can as well send exactly the cap.
		 */
		if (naddr >= max_addrs || nel + nsegs > elcap)
			continue;
		naddr++;
		ea = ev->naddrs < DNS_EV_MAX_ADDRS ? &ev->addrs[ev->naddrs] :
		    NULL;
		ev->naddrs++;
		if (ea != NULL) {
			ea->family = a.family;
			memcpy(ea->addr, a.a, sizeof(ea->addr));
			ea->ttl = ttl;
		}
		if (!addr_keep(in, &a, ports, nports, ea)) {
			ev->nremoved++;
			continue;
		}
		if (ea != NULL)
			ea->kept = true;
		ev->nkept++;
		out->keep[i] = true;
		/* In milliseconds the clamped TTL may not fit 32 bits (max_ttl
		 * can be years), and 0 (min_ttl 0 and an upstream TTL 0) is
		 * an element fw_learn refuses: the element lives at least a
		 * second and at most UINT32_MAX ms, and the TTL the sandbox
		 * gets is cut to that below. */
		tmo = (uint64_t)clamp_ttl(lim, ttl) * 1000u;
		if (tmo < 1000)
			tmo = 1000;
		if (tmo > UINT32_MAX)
			tmo = UINT32_MAX;
		out->ttls[i] = (uint32_t)(tmo / 1000u);
		for (k = 0; k < nsegs; k++) {
			struct fw_elem *e = &out->el[nel++];

			dns_copystr(e->ifname, sizeof(e->ifname),
			    in->c->ifname);
			e->family = a.family;
			memcpy(e->addr, a.a, sizeof(e->addr));
			e->proto = segs[k].proto;
			e->port_lo = segs[k].lo;
			e->port_hi = segs[k].hi;
			e->flags = segs[k].flags;
			e->budget = segs[k].budget;
			e->timeout_ms = (uint32_t)tmo;
		}
		/* The sandbox's cache must not outlive the kernel element:
		 * no longer than it lives, nor than the upstream said. */
		if (ttl < out->ttls[i])
			out->ttls[i] = ttl;
	}
	if (ev->nremoved > 0)
		ev->finding = true;
	out->nel = nel;
	ldns_rdf_deep_free(qn);
	return 0;
}
