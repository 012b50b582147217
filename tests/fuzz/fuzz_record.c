/*
 * fuzz_record: the DNS proxy's two writers of a dns.decision record
 * (gateway/dns/record.c) against each other, under hostile event contents.
 *
 * The proxy writes one record per query straight as canonical bytes
 * (dns_rec_canon); the JSON tree (dns_rec_fields, then aud_canon_dump) is
 * the reference and the fallback. Most of an event is attacker text: the
 * query name is whatever a sandbox sent (any bytes, also invalid UTF-8 and
 * control characters), the addresses and TTLs whatever an upstream
 * answered, and counts may exceed the stored arrays. The input fills every
 * field of one event (strings as length-prefixed chunks of raw bytes,
 * numbers as raw bytes, a flag byte choosing the policy or none). Each run
 * holds what the audit log relies on:
 *   - the tree path always yields a canonical record (a decision is never
 *     lost for want of a loggable form);
 *   - the canonical writer gives exactly the same bytes, and the strict
 *     parser (aud_canon_parse, the verifier's view) accepts them;
 *   - written into a buffer one byte too small, the canonical writer says
 *     so (-1, overflow) instead of leaving a truncated record.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "audit/audit.h"
#include "gateway/dns/dns.h"
#include "gateway/dns/dns_rec.h"
#include "gateway/record.h"
#include "policy/policy.h"
#include "tests/fuzz/fuzz.h"

static const char policy_text[] =
    "version: 1\n"
    "name: fuzz-record\n"
    "egress:\n"
    "  allow:\n"
    "    - host: \"*.example.com\"\n"
    "      ports: [443]\n";

static struct pol_policy *policy;

/* The input, read front to back; reads past its end give zeros. */
struct in {
	const uint8_t	*p;
	size_t		 n;
};

static uint8_t
u8(struct in *in)
{
	uint8_t v = 0;

	if (in->n > 0) {
		v = *in->p++;
		in->n--;
	}
	return v;
}

static uint64_t
un(struct in *in, int bytes)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < bytes; i++)
		v = v << 8 | u8(in);
	return v;
}

/* A length byte, then that many bytes into dst (cap bytes with the NUL,
 * so longer chunks are cut: the event's fields are C strings). raw: the
 * bytes as they are, for text a sandbox or an upstream chose (the query
 * name); otherwise printable ASCII (quotes and backslashes included), for
 * what Sluice itself fills in (ids, links, rule names, formatted
 * addresses). */
static void
str(struct in *in, char *dst, size_t cap, bool raw)
{
	size_t len = u8(in), i;

	for (i = 0; i < len; i++) {
		uint8_t c = u8(in);

		if (i + 1 < cap)
			dst[i] = raw ? (char)c : (char)(0x20 + c % 95);
	}
	dst[len < cap ? len : cap - 1] = '\0';
}

/* One of the names pol_addr_class_name() gives, as the filter fills in. */
static void
cls(struct in *in, char *dst, size_t cap)
{
	snprintf(dst, cap, "%s", pol_addr_class_name((enum pol_addr_class)
	    (u8(in) % POL_ADDR__COUNT)));
}

/* A count that is usually small, sometimes beyond the stored array, and
 * sometimes huge (the record clamps what cannot be a canonical integer). */
static size_t
count(struct in *in, size_t max)
{
	uint8_t sel = u8(in);

	if (sel < 200)
		return sel % (max + 1);
	if (sel < 250)
		return max + sel % 7;
	return (size_t)un(in, 8);
}

static uint8_t
family(struct in *in)
{
	uint8_t f = u8(in);

	return f < 120 ? AF_INET : f < 240 ? AF_INET6 : f;
}

static void
fill(struct in *in, struct dns_event *ev)
{
	size_t i;

	memset(ev, 0, sizeof(*ev));
	str(in, ev->sandbox, sizeof(ev->sandbox), false);
	str(in, ev->client, sizeof(ev->client), false);
	ev->tcp = u8(in) & 1;
	str(in, ev->qname, sizeof(ev->qname), true);
	ev->qtype = (uint16_t)un(in, 2);
	ev->decision = (enum dns_decision)(u8(in) % (DNS_DEC_MALFORMED + 2));
	/* Any code, and past the table (its fallback name). */
	ev->reason = (enum pol_reason)(u8(in) % (POL_REASON__COUNT + 2));
	str(in, ev->rule, sizeof(ev->rule), false);
	ev->rcode = u8(in);
	ev->naddrs = count(in, DNS_EV_MAX_ADDRS);
	for (i = 0; i < ev->naddrs && i < DNS_EV_MAX_ADDRS; i++) {
		struct dns_ev_addr *a = &ev->addrs[i];
		size_t k;

		a->family = family(in);
		for (k = 0; k < sizeof(a->addr); k++)
			a->addr[k] = u8(in);
		a->ttl = (uint32_t)un(in, 4);
		cls(in, a->cls, sizeof(a->cls));
		a->kept = u8(in) & 1;
	}
	ev->nkept = count(in, DNS_EV_MAX_ADDRS);
	ev->nremoved = count(in, DNS_EV_MAX_ADDRS);
	ev->nelems = count(in, DNS_EV_MAX_ELEMS);
	for (i = 0; i < ev->nelems && i < DNS_EV_MAX_ELEMS; i++) {
		struct dns_ev_elem *e = &ev->elems[i];
		size_t k;

		str(in, e->ifname, sizeof(e->ifname), false);
		e->family = family(in);
		for (k = 0; k < sizeof(e->addr); k++)
			e->addr[k] = u8(in);
		e->proto = u8(in);
		e->port_lo = (uint16_t)un(in, 2);
		e->port_hi = (uint16_t)un(in, 2);
		e->timeout_ms = (uint32_t)un(in, 4);
		e->flags = u8(in);
	}
	str(in, ev->upstream, sizeof(ev->upstream), false);
	ev->latency_us = un(in, 8);
	ev->finding = u8(in) & 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char cb[1 << 20];
	struct in in = { data, size };
	const struct pol_policy *p;
	struct dns_event ev;
	struct aud_cw w;
	char err[256];
	json_t *f, *back;
	size_t len;
	char *s;

	if (policy == NULL)
		policy = fuzz_policy_text("fuzz-record.yaml", policy_text,
		    sizeof(policy_text) - 1);
	p = u8(&in) & 1 ? policy : NULL;
	fill(&in, &ev);

	f = dns_rec_fields(&ev, p);
	REQUIRE(f != NULL);
	s = aud_canon_dump(f, &len, err, sizeof(err));
	if (s == NULL)
		fprintf(stderr, "fuzz_record: tree not canonical: %s\n", err);
	REQUIRE(s != NULL);
	json_decref(f);

	aud_cw_init(&w, cb, sizeof(cb));
	REQUIRE(dns_rec_canon(&ev, p, &w) == 0);
	REQUIRE(!w.overflow);
	REQUIRE(w.len == len);
	REQUIRE(memcmp(cb, s, len) == 0);
	back = aud_canon_parse(cb, w.len, err, sizeof(err));
	REQUIRE(back != NULL);
	json_decref(back);

	aud_cw_init(&w, cb, len - 1);
	REQUIRE(dns_rec_canon(&ev, p, &w) == -1);
	REQUIRE(w.overflow);

	free(s);
	return 0;
}
