/*
 * fuzz_results: what the bridge lets back into a sandbox from a tool result
 * (gateway/bridge/results.c, br_result_process) under hostile results.
 *
 * A tool result is written by the upstream MCP server, which the security
 * team does not control: it may try to carry out the credential Sluice
 * holds for it, or secrets the policy redacts, by placing them anywhere a
 * JSON value can go. The input is a JSON result object; the first byte
 * picks the tool's outputSchema (none, plain, constrained). Beyond "does
 * not crash", whenever the result is passed on (return >= 0):
 *   - the held credentials appear nowhere in its serialisation, raw or as
 *     JSON escapes them (one holds a quote, a backslash, a control
 *     character and non-ASCII), as a hex dump, as base64 (either
 *     alphabet, at any offset of a 3-byte group, encoded here with
 *     OpenSSL's encoder, also wrapped over lines), percent-encoded (also
 *     as a form writes a blank) and that base64-encoded, nor in any
 *     string or key as decoded (also unescaped up to four more times),
 *     nor in the text of any number (one is all digits);
 *   - nor does any decoded string, key or number text hold what the
 *     policy's patterns match (the AWS key pattern and the policy's own
 *     pattern are checked independently here);
 *   - structuredContent, when still present, is an object;
 *   - when the tool has an outputSchema and structuredContent was dropped,
 *     the result is marked isError (the SDK demands one or the other).
 * The input's bytes are also redacted as a resource's decoded blob
 * (br_redact_bytes, binary, NULs included): what passes holds no held
 * credential and no AWS key id.
 */
#include <ctype.h>
#include <limits.h>
#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "gateway/bridge/br_int.h"
#include "policy/policy.h"
#include "tests/fuzz/fuzz.h"

static const char policy_text[] =
    "version: 1\n"
    "name: fuzz-results\n"
    "mcp:\n"
    "  results:\n"
    "    redact: [aws_keys, private_keys, bearer_tokens, "
    "upstream_credentials]\n"
    "    redact_patterns: [\"payroll-[0-9]{4}\"]\n";

static char *secrets[] = { "up-cred-7f3a9c2e51", "sk_live_0123456789ab",
    "q\"u\\o\t\xc3\xa9/t<e>", "48151623", "open sesame:42" };

static const char *const schemas[] = {
	NULL,
	"{\"outputSchema\":{\"type\":\"object\",\"properties\":"
	"{\"note\":{\"type\":\"string\"}}}}",
	"{\"outputSchema\":{\"type\":\"object\",\"properties\":"
	"{\"code\":{\"type\":\"string\",\"pattern\":\"^[A-Z0-9]+$\"},"
	"\"list\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}}",
	"{\"outputSchema\":{\"type\":\"object\",\"additionalProperties\":"
	"{\"type\":\"string\",\"maxLength\":64}}}",
};

static struct pol_policy *policy;
static regex_t aws, own;

/* One level of unescaping, in place (written apart from policy/redact.c,
 * so the invariant does not rest on the code it checks): JSON's short
 * escapes, \uXXXX with surrogate pairs, \xHH, octal \NNN up to \377 and
 * %HH; anything else stays. */
static size_t
unescape(char *b, size_t n)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	unsigned long cp, lo;
	size_t i, k, o = 0;
	char h[5], *end, *q;

	for (i = 0; i < n;) {
		if (b[i] == '%' && i + 2 < n && isxdigit((unsigned char)
		    b[i + 1]) && isxdigit((unsigned char)b[i + 2])) {
			memcpy(h, b + i + 1, 2);
			h[2] = '\0';
			b[o++] = (char)strtoul(h, NULL, 16);
			i += 3;
			continue;
		}
		if (b[i] != '\\' || i + 1 >= n) {
			b[o++] = b[i++];
			continue;
		}
		if (b[i + 1] >= '0' && b[i + 1] <= '7') {
			for (k = 1, cp = 0; k <= 3 && i + k < n &&
			    b[i + k] >= '0' && b[i + k] <= '7' &&
			    cp * 8 + (unsigned long)(b[i + k] - '0') <= 255; k++)
				cp = cp * 8 + (unsigned long)(b[i + k] - '0');
			b[o++] = (char)cp;
			i += k;
			continue;
		}
		if (b[i + 1] != '\0' && (q = strchr(from, b[i + 1])) != NULL) {
			b[o++] = to[q - from];
			i += 2;
			continue;
		}
		cp = ULONG_MAX;
		if (b[i + 1] == 'x' && i + 4 <= n && isxdigit((unsigned char)
		    b[i + 2]) && isxdigit((unsigned char)b[i + 3])) {
			memcpy(h, b + i + 2, 2);
			h[2] = '\0';
			b[o++] = (char)strtoul(h, NULL, 16);
			i += 4;
			continue;
		}
		if (b[i + 1] == 'u' && i + 6 <= n) {
			memcpy(h, b + i + 2, 4);
			h[4] = '\0';
			cp = strtoul(h, &end, 16);
			/* Four hex digits: strtoul alone would take "0x75". */
			if (*end != '\0' || !isxdigit((unsigned char)h[0]) ||
			    !isxdigit((unsigned char)h[1]))
				cp = ULONG_MAX;
		}
		if (cp >= 0xd800 && cp <= 0xdbff && i + 12 <= n &&
		    b[i + 6] == '\\' && b[i + 7] == 'u') {
			memcpy(h, b + i + 8, 4);
			lo = strtoul(h, &end, 16);
			if (*end == '\0' && isxdigit((unsigned char)h[0]) &&
			    isxdigit((unsigned char)h[1]) &&
			    lo >= 0xdc00 && lo <= 0xdfff) {
				cp = 0x10000 + ((cp - 0xd800) << 10) +
				    (lo - 0xdc00);
				i += 6;
			} else
				cp = ULONG_MAX;
		} else if (cp >= 0xd800 && cp <= 0xdfff)
			cp = ULONG_MAX;
		if (cp == ULONG_MAX) {
			b[o++] = b[i++];
			continue;
		}
		i += 6;
		if (cp < 0x80)
			b[o++] = (char)cp;
		else if (cp < 0x800) {
			b[o++] = (char)(0xc0 | cp >> 6);
			b[o++] = (char)(0x80 | (cp & 0x3f));
		} else if (cp < 0x10000) {
			b[o++] = (char)(0xe0 | cp >> 12);
			b[o++] = (char)(0x80 | (cp >> 6 & 0x3f));
			b[o++] = (char)(0x80 | (cp & 0x3f));
		} else {
			b[o++] = (char)(0xf0 | cp >> 18);
			b[o++] = (char)(0x80 | (cp >> 12 & 0x3f));
			b[o++] = (char)(0x80 | (cp >> 6 & 0x3f));
			b[o++] = (char)(0x80 | (cp & 0x3f));
		}
	}
	return o;
}

/* Does base64 of sec stand in text, at any offset of a 3-byte group and
 * in either alphabet? Only the characters that encode sec alone count
 * (those at its ends mix in bits of the bytes around it). */
static bool
b64_stands(const char *text, const char *sec)
{
	size_t len = strlen(sec), a, t, end, skip, j;
	unsigned char *in, *out;
	bool r = false;

	REQUIRE((in = calloc(1, len + 3)) != NULL);
	REQUIRE((out = malloc(4 * (len + 5) / 3 + 8)) != NULL);
	for (a = 0; a < 3 && !r; a++) {
		memset(in, 0, a);
		memcpy(in + a, sec, len);
		t = a + len;
		EVP_EncodeBlock(out, in, (int)t);
		skip = a == 0 ? 0 : a == 1 ? 2 : 3;
		end = 4 * (t / 3) + t % 3;
		if (end < skip + 6)
			continue;
		out[end] = '\0';
		r = strstr(text, (char *)out + skip) != NULL;
		for (j = skip; j < end; j++)
			out[j] = out[j] == '+' ? '-' : out[j] == '/' ? '_' :
			    out[j];
		r = r || strstr(text, (char *)out + skip) != NULL;
	}
	free(in);
	free(out);
	return r;
}

/* sec percent-encoded as RFC 3986 keeps its unreserved characters, in
 * either case of hex (upper), a blank as '+' (plus, a form's encoding);
 * malloc'd. */
static char *
pct(const char *sec, bool upper, bool plus)
{
	const char *hd = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	size_t i, o = 0;
	char *p;

	REQUIRE((p = malloc(3 * strlen(sec) + 1)) != NULL);
	for (i = 0; sec[i] != '\0'; i++) {
		unsigned char c = (unsigned char)sec[i];

		if (isalnum(c) || strchr("-._~", c) != NULL)
			p[o++] = (char)c;
		else if (plus && c == ' ')
			p[o++] = '+';
		else {
			p[o++] = '%';
			p[o++] = hd[c >> 4];
			p[o++] = hd[c & 15];
		}
	}
	p[o] = '\0';
	return p;
}

static int
hexv(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ?
	    c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Does a held credential stand, raw, in a hex dump in t (xxd, hexdump
 * -C, od -t x1)? Read strictly, apart from redact.c: a line is an offset
 * (4 to 8 hex digits, maybe ':') and groups of hex digits one or two
 * blanks apart; a line belongs to the dump before it when its offset is
 * the previous one plus the bytes that line gave, and only such dumps are
 * decoded (a last line no longer than the line before it). */
static bool
dump_stands(const char *t, size_t len, char *const *sec, size_t n)
{
	unsigned char *b;
	size_t i = 0, o = 0, k, j, gl, glen, got, prevgot = 0, nlines = 0;
	unsigned long off, prevoff = 0;
	bool r = false;

	REQUIRE((b = malloc(len + 1)) != NULL);
	while (i < len && !r) {
		size_t e = i, save = o;
		int blanks;

		while (e < len && t[e] != '\n')
			e++;
		for (k = i, off = 0; k < e && k - i < 8 && hexv(t[k]) >= 0; k++)
			off = off << 4 | (unsigned long)hexv(t[k]);
		got = 0;
		glen = 0;
		if (k - i >= 4 && k < e && (hexv(t[k]) < 0)) {
			if (t[k] == ':')
				k++;
			for (;;) {
				for (blanks = 0; k < e && t[k] == ' '; k++)
					blanks++;
				if (blanks < 1 || blanks > 2)
					break;
				for (j = k; j < e && hexv(t[j]) >= 0; j++)
					;
				if (j == k || (j - k) % 2 || (j < e &&
				    t[j] != ' ') || (glen && j - k > glen))
					break;
				gl = j - k;
				if (glen == 0)
					glen = gl;
				for (; k < j; k += 2)
					b[o++] = (unsigned char)(hexv(t[k]) <<
					    4 | hexv(t[k + 1]));
				if (gl < glen)
					break;	/* a short group ends it */
			}
			got = o - save;
			if (got > 64) {
				o = save;
				got = 0;
			}
		}
		if (got == 0 || (nlines > 0 && off != prevoff + prevgot) ||
		    (nlines > 0 && got > prevgot)) {
			/* not this dump's next line: what came before is one
			 * dump; this line may start the next */
			for (k = 0; k < n && !r; k++)
				r = memmem(b, save, sec[k], strlen(sec[k])) !=
				    NULL;
			memmove(b, b + save, o - save);
			o -= save;
			nlines = 0;
		}
		if (got > 0) {
			nlines++;
			prevoff = off;
			prevgot = got;
		} else
			o = 0;
		i = e + 1;
	}
	for (k = 0; k < n && !r; k++)
		r = memmem(b, o, sec[k], strlen(sec[k])) != NULL;
	free(b);
	return r;
}

/* Does a held credential stand in t (len bytes), also once unescaped up
 * to four times (what redaction promises to find), or as base64 wrapped
 * over lines (indented, quoted, the line breaks escaped)? */
static bool
stands(const char *t, size_t len, char *const *sec, size_t n)
{
	char *b;
	size_t i, k;
	bool r = false;

	REQUIRE((b = malloc(len + 1)) != NULL);
	memcpy(b, t, len);
	for (k = 0; k <= 4 && !r; k++) {
		if (k > 0)
			len = unescape(b, len);
		for (i = 0; i < n && !r; i++)
			r = memmem(b, len, sec[i], strlen(sec[i])) != NULL;
	}
	/* Nor as base64 wrapped over several lines: every run of blanks,
	 * '>' and line breaks, also written as escapes, that holds a line
	 * break is taken out. */
	for (i = 0, k = 0; t[i] != '\0' && !r; ) {
		size_t j = i;
		bool nl = false;

		for (;;) {
			if (t[j] == '\\' && (t[j + 1] == 'n' ||
			    t[j + 1] == 'r' || t[j + 1] == 't')) {
				nl = nl || t[j + 1] != 't';
				j += 2;
			} else if (t[j] != '\0' && strchr(" \t>\r\n", t[j])) {
				nl = nl || t[j] == '\r' || t[j] == '\n';
				j++;
			} else
				break;
		}
		if (j == i)
			b[k++] = t[i++];
		else if (nl)
			i = j;
		else
			while (i < j)
				b[k++] = t[i++];
	}
	b[k] = '\0';
	for (i = 0; i < n && !r; i++)
		r = b64_stands(b, sec[i]);
	free(b);
	return r || dump_stands(t, len, sec, n);
}

/* Does a held credential stand in v, as a reader decodes it: a string, a
 * key, or the text jansson writes of a number? */
static bool
holds(const json_t *v, char *const *sec, size_t n)
{
	const char *key, *t = NULL;
	json_t *x;
	char *num = NULL;
	size_t i;
	bool r = false;

	if (json_is_object(v)) {
		json_object_foreach((json_t *)(uintptr_t)v, key, x) {
			for (i = 0; i < n; i++)
				if (strstr(key, sec[i]) != NULL)
					return true;
			if (holds(x, sec, n))
				return true;
		}
		return false;
	}
	if (json_is_array(v)) {
		json_array_foreach((json_t *)(uintptr_t)v, i, x)
			if (holds(x, sec, n))
				return true;
		return false;
	}
	if (json_is_string(v))
		return stands(json_string_value(v), json_string_length(v),
		    sec, n);
	if (json_is_number(v))
		t = num = json_dumps(v, JSON_ENCODE_ANY);
	for (i = 0; t != NULL && i < n && !r; i++)
		r = strstr(t, sec[i]) != NULL;
	free(num);
	return r;
}

/* Does re match in v as a reader decodes it (a string, a key, a number's
 * text)? Not in the serialization: jansson writes U+001A as \u001A, and
 * "\u001AKIA..." holds an AWS key pattern no decoded string holds. */
static bool
re_holds(const json_t *v, const regex_t *re)
{
	const char *key;
	json_t *x;
	char *num;
	size_t i;
	bool r;

	if (json_is_object(v)) {
		json_object_foreach((json_t *)(uintptr_t)v, key, x)
			if (regexec(re, key, 0, NULL, 0) == 0 ||
			    re_holds(x, re))
				return true;
		return false;
	}
	if (json_is_array(v)) {
		json_array_foreach((json_t *)(uintptr_t)v, i, x)
			if (re_holds(x, re))
				return true;
		return false;
	}
	if (json_is_string(v)) {
		/* The whole string, NULs included. */
		regmatch_t m[1] = { { 0, (regoff_t)json_string_length(v) } };

		return regexec(re, json_string_value(v), 1, m,
		    REG_STARTEND) == 0;
	}
	if (!json_is_number(v))
		return false;
	REQUIRE((num = json_dumps(v, JSON_ENCODE_ANY)) != NULL);
	r = regexec(re, num, 0, NULL, 0) == 0;
	free(num);
	return r;
}

/* An AWS key id ("AKIA" and 16 of [0-9A-Z]) anywhere in b[0..n). */
static bool
aws_in(const char *b, size_t n)
{
	size_t i, j;

	for (i = 0; i + 20 <= n; i++) {
		if (memcmp(b + i, "AKIA", 4) != 0)
			continue;
		for (j = 4; j < 20 && (isdigit((unsigned char)b[i + j]) ||
		    isupper((unsigned char)b[i + j])); j++)
			;
		if (j == 20)
			return true;
	}
	return false;
}

static void
blob_check(const struct pol_policy *p, const uint8_t *data, size_t size)
{
	struct br br;
	char *out;
	const char *b;
	size_t olen, n, i;
	int k;

	memset(&br, 0, sizeof(br));
	br.secrets = secrets;
	br.nsecrets = sizeof(secrets) / sizeof(secrets[0]);
	k = br_redact_bytes(&br, p, (const char *)data, size, &out, &olen);
	if (k < 0)
		return;
	REQUIRE((k == 0) == (out == NULL));
	b = k > 0 ? out : (const char *)data;
	n = k > 0 ? olen : size;
	for (i = 0; i < br.nsecrets; i++)
		REQUIRE(memmem(b, n, secrets[i], strlen(secrets[i])) == NULL);
	REQUIRE(!aws_in(b, n));
	free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct br br;
	json_t *result, *tool = NULL, *sc;
	const char *schema;
	char *text;
	size_t i, k;
	int n;
	bool had_sc;

	if (policy == NULL) {
		policy = fuzz_policy_text("fuzz-results.yaml", policy_text,
		    sizeof(policy_text) - 1);
		REQUIRE(regcomp(&aws, "AKIA[0-9A-Z]{16}", REG_EXTENDED) == 0);
		REQUIRE(regcomp(&own, "payroll-[0-9]{4}", REG_EXTENDED) == 0);
	}
	if (size < 1)
		return 0;
	blob_check(policy, data, size);
	/* As the bridge parses upstream messages. */
	result = json_loadb((const char *)data + 1, size - 1,
	    JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(result)) {
		json_decref(result);
		return 0;
	}
	schema = schemas[data[0] % (sizeof(schemas) / sizeof(schemas[0]))];
	if (schema != NULL)
		REQUIRE((tool = json_loads(schema, 0, NULL)) != NULL);
	had_sc = json_object_get(result, "structuredContent") != NULL;
	memset(&br, 0, sizeof(br));
	br.secrets = secrets;
	br.nsecrets = sizeof(secrets) / sizeof(secrets[0]);
	n = br_result_process(&br, policy, result, tool, &text);
	if (n >= 0) {
		/* The text the bridge sends, as it handed it out. */
		REQUIRE(text != NULL);
		for (i = 0; i < br.nsecrets; i++) {
			json_t *js = json_string(secrets[i]);
			char *esc = json_dumps(js, JSON_ENCODE_ANY);

			REQUIRE(esc != NULL);
			/* Without its quotes: the credential as escaped. */
			esc[strlen(esc) - 1] = '\0';
			REQUIRE(strstr(text, secrets[i]) == NULL);
			REQUIRE(strstr(text, esc + 1) == NULL);
			/* Nor a JSON file holding it, base64-encoded. */
			REQUIRE(!b64_stands(text, esc + 1));
			free(esc);
			json_decref(js);
			REQUIRE(!b64_stands(text, secrets[i]));
			/* Nor percent-encoded, nor that base64-encoded. */
			for (k = 0; k < 4; k++) {
				char *pe = pct(secrets[i], k % 2, k >= 2);

				REQUIRE(strstr(text, pe) == NULL);
				REQUIRE(!b64_stands(text, pe));
				free(pe);
			}
			/* Nor as a hex dump, in either case. */
			for (k = 0; k < 2; k++) {
				const char *hd = k ? "0123456789ABCDEF" :
				    "0123456789abcdef";
				const unsigned char *sb =
				    (const unsigned char *)secrets[i];
				size_t sl = strlen(secrets[i]), j;
				char *hex = malloc(2 * sl + 1);

				REQUIRE(hex != NULL);
				for (j = 0; j < sl; j++) {
					hex[2 * j] = hd[sb[j] >> 4];
					hex[2 * j + 1] = hd[sb[j] & 15];
				}
				hex[2 * sl] = '\0';
				REQUIRE(strstr(text, hex) == NULL);
				free(hex);
			}
		}
		REQUIRE(!holds(result, secrets, br.nsecrets));
		REQUIRE(!re_holds(result, &aws));
		REQUIRE(!re_holds(result, &own));
		free(text);
		sc = json_object_get(result, "structuredContent");
		REQUIRE(sc == NULL || json_is_object(sc));
		if (tool != NULL && sc == NULL && had_sc)
			REQUIRE(json_is_true(json_object_get(result,
			    "isError")));
	}
	json_decref(tool);
	json_decref(result);
	return 0;
}
