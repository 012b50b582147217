/*
 * fuzz_dns: the DNS proxy's query parser (gateway/dns/wire.c,
 * dns_parse_query) under hostile input.
 *
 * Every datagram and TCP frame a sandbox sends reaches this parser before
 * anything else looks at it, so beyond "does not crash" each input is held
 * to the invariants the proxy relies on:
 *   - the verdict is one of OK, DROP, FORMERR, NOTIMP, and agrees with the
 *     header: short input and responses (QR=1) are dropped, opcodes other
 *     than QUERY are NOTIMP, QDCOUNT != 1 or answer/authority records or
 *     more than one additional record are never OK, oversized input is
 *     never OK;
 *   - on OK the name the policy sees is lower case, has no trailing dot,
 *     holds only [a-z0-9_-] and dots (anything else is '?' and flags
 *     bad_name), and matches the wire name label for label; the wire name
 *     is at most 255 bytes and ends with the root label;
 *   - re-encoding the parsed question as a minimal query parses back to the
 *     same question (the proxy forwards exactly these bytes upstream).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/dns/dns.h"
#include "tests/fuzz/fuzz.h"

/* The wire name, rendered the way the parser promises to. */
static void
render(const uint8_t *w, size_t wl, char *out, size_t outlen)
{
	size_t i = 0, o = 0;

	while (i < wl && w[i] != 0) {
		size_t ll = w[i++];

		REQUIRE(ll <= 63 && i + ll < wl);
		if (o != 0)
			out[o++] = '.';
		for (size_t k = 0; k < ll; k++, i++) {
			int ch = tolower(w[i]);

			if (!(isdigit(ch) || (ch >= 'a' && ch <= 'z') ||
			    ch == '-' || ch == '_'))
				ch = '?';
			REQUIRE(o + 1 < outlen);
			out[o++] = (char)ch;
		}
	}
	REQUIRE(i + 1 == wl);	/* the root label ends the name */
	out[o] = '\0';
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_query q, q2;
	enum dns_parse_result r;
	uint8_t m[12 + 256 + 4];
	char name[256];
	size_t n;

	r = dns_parse_query(data, size, &q);
	REQUIRE(r == DNS_PARSE_OK || r == DNS_PARSE_DROP ||
	    r == DNS_PARSE_FORMERR || r == DNS_PARSE_NOTIMP);
	if (size < 12) {
		REQUIRE(r == DNS_PARSE_DROP);
		return 0;
	}
	if (data[2] & 0x80) {
		REQUIRE(r == DNS_PARSE_DROP);
		return 0;
	}
	REQUIRE(q.id == (uint16_t)(data[0] << 8 | data[1]));
	if (((data[2] >> 3) & 0xf) != 0) {
		REQUIRE(r == DNS_PARSE_NOTIMP);
		return 0;
	}
	if (r != DNS_PARSE_OK)
		return 0;
	REQUIRE(size <= 4096);
	REQUIRE(data[4] == 0 && data[5] == 1);
	REQUIRE((data[6] | data[7] | data[8] | data[9]) == 0);
	REQUIRE(data[10] == 0 && data[11] <= 1);
	REQUIRE(q.qwire_len >= 1 && q.qwire_len <= 255);
	render(q.qwire, q.qwire_len, name, sizeof(name));
	REQUIRE(strcmp(name, q.qname) == 0);
	REQUIRE(q.bad_name == (strchr(q.qname, '?') != NULL));
	n = strlen(q.qname);
	REQUIRE(n == 0 || q.qname[n - 1] != '.');

	/* Round trip: the question as the proxy would forward it. */
	memset(m, 0, sizeof(m));
	m[0] = 0x12;
	m[1] = 0x34;
	m[5] = 1;
	memcpy(m + 12, q.qwire, q.qwire_len);
	n = 12 + q.qwire_len;
	m[n++] = (uint8_t)(q.qtype >> 8);
	m[n++] = (uint8_t)q.qtype;
	m[n++] = (uint8_t)(q.qclass >> 8);
	m[n++] = (uint8_t)q.qclass;
	REQUIRE(dns_parse_query(m, n, &q2) == DNS_PARSE_OK);
	REQUIRE(q2.qtype == q.qtype && q2.qclass == q.qclass);
	REQUIRE(q2.qwire_len == q.qwire_len &&
	    memcmp(q2.qwire, q.qwire, q.qwire_len) == 0);
	REQUIRE(strcmp(q2.qname, q.qname) == 0 && !q2.edns);
	return 0;
}
