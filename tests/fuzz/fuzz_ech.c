/*
 * fuzz_ech: the reader of the ECH configs an HTTPS record publishes
 * (gateway/dns/ech.c), under hostile upstream answers. The first byte
 * picks the reader (even: a whole HTTPS RDATA, odd: an ECHConfigList
 * alone); the rest is the bytes. Beyond "does not crash" (ASan, UBSan):
 *   - no more configs than ECH_CONFIGS_MAX, nor suites than
 *     ECH_SUITES_MAX, are kept, and a public_name is a non-empty string
 *     inside its array;
 *   - a list that reads is refused one byte shorter (its lengths fill it
 *     exactly), so a truncated answer never reads as a whole one;
 *   - every config kept matches itself (ech_match with its first suite).
 */
#include <stdint.h>
#include <string.h>

#include "gateway/dns/ech.h"
#include "tests/fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ech_set s, t;
	const uint8_t *b = data + 1;
	size_t n, i;
	int rc;

	if (size < 1)
		return 0;
	n = size - 1;
	memset(&s, 0, sizeof(s));
	rc = (data[0] & 1) ? ech_config_list(b, n, &s) :
	    ech_svcb_rdata(b, n, &s);
	REQUIRE(rc == 0 || rc == -1);
	REQUIRE(s.n <= ECH_CONFIGS_MAX);
	for (i = 0; i < s.n; i++) {
		const struct ech_config *c = &s.c[i];
		size_t pl = strnlen(c->public_name, sizeof(c->public_name));

		REQUIRE(pl > 0 && pl < sizeof(c->public_name));
		REQUIRE(c->nsuites >= 1 && c->nsuites <= ECH_SUITES_MAX);
		REQUIRE(ech_match(&s, c->config_id, c->suites[0].kdf,
		    c->suites[0].aead));
	}
	if ((data[0] & 1) && rc == 0 && n > 0) {
		memset(&t, 0, sizeof(t));
		REQUIRE(ech_config_list(b, n - 1, &t) == -1);
	}
	return 0;
}
