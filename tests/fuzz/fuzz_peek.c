/*
 * fuzz_peek: the name gate's reader of a flow's first bytes
 * (gateway/dns/peek.c) under hostile ClientHellos and requests.
 *
 * Every byte is a sandbox's choice, and the code there knows the parser.
 * The first byte picks the reader (even: TLS, odd: HTTP); the rest is the
 * flow. Beyond "does not crash" (ASan, UBSan):
 *   - the answer is one of the enum, and a name comes only with PEEK_NAME
 *     (and PEEK_ECH): lower case, a host name of at most 253 bytes;
 *   - a decision is final: once a prefix decides, every longer input
 *     decides the same (the gate holds nothing back after deciding, so a
 *     later byte must never have changed what an earlier one meant), and
 *     a prefix that decides nothing is PEEK_MORE;
 *   - nothing beyond PEEK_MAX is waited for.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/dns/peek.h"
#include "tests/fuzz/fuzz.h"

static enum peek_result
run(int http, const uint8_t *b, size_t n, struct peek_out *o)
{
	return http ? peek_http(b, n, o) : peek_tls(b, n, o);
}

static void
name_ok(const char *s)
{
	size_t n = strlen(s), i;

	REQUIRE(n > 0 && n <= 253);
	for (i = 0; i < n; i++)
		REQUIRE((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		    s[i] == '_' || s[i] == '.');
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct peek_out o, p;
	enum peek_result r, q;
	const uint8_t *b;
	uint8_t *copy;
	size_t n, k, step;
	int http;

	if (size == 0)
		return 0;
	http = data[0] & 1;
	n = size - 1;
	/* A copy the exact size of the input: ASan sees any read past it. */
	if ((copy = malloc(n > 0 ? n : 1)) == NULL)
		return 0;
	memcpy(copy, data + 1, n);
	b = copy;
	r = run(http, b, n, &o);
	REQUIRE(r >= PEEK_MORE && r <= PEEK_MALFORMED);
	if (r == PEEK_NAME)
		name_ok(o.name);
	else if (r == PEEK_ECH) {
		if (o.name[0] != '\0')
			name_ok(o.name);
	} else
		REQUIRE(o.name[0] == '\0' || r == PEEK_MALFORMED ||
		    r == PEEK_NO_NAME);
	if (n >= PEEK_MAX)
		REQUIRE(r != PEEK_MORE);
	/* Prefixes: none decides otherwise than the whole. */
	step = n / 64 + 1;
	for (k = 0; k < n; k += step) {
		q = run(http, b, k, &p);
		if (q == PEEK_MORE)
			continue;
		REQUIRE(q == r);
		if (q == PEEK_NAME)
			REQUIRE(strcmp(p.name, o.name) == 0);
	}
	free(copy);
	return 0;
}
