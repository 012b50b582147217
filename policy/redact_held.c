/*
 * redact_held: the credentials the daemon holds, raw and encoded.
 *
 * The bridge injects upstream credentials, so an upstream server can echo
 * one back in a result, and an encoding is the cheapest way to carry it
 * past an exact search: base64, percent-encoding, hex, a JSON writer's
 * escapes. The upstream_credentials class knows the exact bytes, so
 * rather than decode every text it encodes each secret in each of those
 * forms and searches for the forms, a fixed cost per secret and linear in
 * the text. The other finders of held credentials (escapes undone,
 * wrapped base64, hex dumps) decode the text instead and hand what they
 * decoded back here (rd_scan_mapped), so every decoding is searched for
 * every one of these forms.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/redact_int.h"

static const char b64std[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* b64: base64 of s without padding into out (4 * ceil(n / 3) + 1 bytes);
 * returns its length. *fixed gets how many leading characters depend on s
 * alone (the last partial group also carries bits of whatever follows
 * when s is part of a longer encoded blob). */
static size_t
b64(const unsigned char *s, size_t n, const char *alpha, char *out,
    size_t *fixed)
{
	size_t		 i, o = 0;
	uint32_t	 v;

	for (i = 0; i + 3 <= n; i += 3) {
		v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
		out[o++] = alpha[v >> 18 & 63];
		out[o++] = alpha[v >> 12 & 63];
		out[o++] = alpha[v >> 6 & 63];
		out[o++] = alpha[v & 63];
	}
	*fixed = o + (n - i);
	if (n - i == 1) {
		v = (uint32_t)s[i] << 16;
		out[o++] = alpha[v >> 18 & 63];
		out[o++] = alpha[v >> 12 & 63];
	} else if (n - i == 2) {
		v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
		out[o++] = alpha[v >> 18 & 63];
		out[o++] = alpha[v >> 12 & 63];
		out[o++] = alpha[v >> 6 & 63];
	}
	out[o] = '\0';
	return o;
}

/* urlenc: percent-encode every byte but RFC 3986 unreserved ones (a blank
 * as '+' when plus: a form's encoding). */
static size_t
urlenc(const unsigned char *s, size_t n, bool upper, bool plus, char *out)
{
	const char	*hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	size_t		 i, o = 0;

	for (i = 0; i < n; i++) {
		if (rd_is_alnum(s[i]) || s[i] == '-' || s[i] == '.' ||
		    s[i] == '_' || s[i] == '~')
			out[o++] = (char)s[i];
		else if (plus && s[i] == ' ')
			out[o++] = '+';
		else {
			out[o++] = '%';
			out[o++] = hex[s[i] >> 4];
			out[o++] = hex[s[i] & 15];
		}
	}
	out[o] = '\0';
	return o;
}

/* hexenc: every byte as two hex digits (a hex dump, Python's bytes.hex(),
 * xxd -p); out holds 2 * n + 1 bytes. */
static size_t
hexenc(const unsigned char *s, size_t n, bool upper, char *out)
{
	const char	*hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	size_t		 i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hex[s[i] >> 4];
		out[2 * i + 1] = hex[s[i] & 15];
	}
	out[2 * n] = '\0';
	return 2 * n;
}

/*
 * What JSON writers escape beyond the quote, the backslash and control
 * characters, which all of them do (the short escapes where JSON has
 * them, else \u00xx): the case of the hex digits, non-ASCII characters (as
 * \uxxxx, a surrogate pair above U+FFFF), DEL, '/' and Go's HTML-safe
 * '<', '>' and '&'.
 */
#define JE_UPPER	0x01
#define JE_ASCII	0x02
#define JE_DEL		0x04
#define JE_SLASH	0x08
#define JE_HTML		0x10

/* The writers whose output is searched, each by its defaults. */
#define NJWRITERS	8
static const unsigned jwriters[NJWRITERS] = {
	0,				/* JSON.stringify */
	JE_ASCII | JE_DEL,		/* Python json.dumps */
	JE_UPPER,			/* jansson */
	JE_UPPER | JE_ASCII,		/* jansson, JSON_ENSURE_ASCII */
	JE_UPPER | JE_SLASH,		/* jansson, JSON_ESCAPE_SLASH */
	JE_UPPER | JE_ASCII | JE_SLASH,	/* jansson, both */
	JE_ASCII | JE_SLASH,		/* PHP json_encode */
	JE_HTML,			/* Go encoding/json */
};

/* \u and the 4 hex digits of c at out; returns 6. */
static size_t
juesc(unsigned c, unsigned flags, char *out)
{
	const char *hex = flags & JE_UPPER ? "0123456789ABCDEF" :
	    "0123456789abcdef";

	out[0] = '\\';
	out[1] = 'u';
	out[2] = hex[c >> 12 & 15];
	out[3] = hex[c >> 8 & 15];
	out[4] = hex[c >> 4 & 15];
	out[5] = hex[c & 15];
	return 6;
}

/* The code point of the UTF-8 sequence at s (n bytes left) in *cp and its
 * length, or 0 when it is not one (such a byte is written as it is). */
static size_t
utf8_dec(const unsigned char *s, size_t n, unsigned *cp)
{
	size_t k, i;

	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		k = 2;
		*cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		k = 3;
		*cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		k = 4;
		*cp = s[0] & 0x07;
	} else
		return 0;
	if (k > n)
		return 0;
	for (i = 1; i < k; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (s[i] & 0x3f);
	}
	return *cp > 0x10ffff ? 0 : k;
}

/* jsonesc: s as it stands inside a JSON string written by a writer that
 * escapes as flags say (JE_*). out holds 6 * n + 1 bytes (no byte grows
 * more: a 4-byte sequence becomes 12); returns its length. */
static size_t
jsonesc(const unsigned char *s, size_t n, unsigned flags, char *out)
{
	size_t			 i, o = 0, k;
	unsigned		 cp;

	for (i = 0; i < n; i++) {
		const char *e = NULL;

		switch (s[i]) {
		case '"':	e = "\\\""; break;
		case '\\':	e = "\\\\"; break;
		case '\b':	e = "\\b"; break;
		case '\f':	e = "\\f"; break;
		case '\n':	e = "\\n"; break;
		case '\r':	e = "\\r"; break;
		case '\t':	e = "\\t"; break;
		case '/':	e = flags & JE_SLASH ? "\\/" : NULL; break;
		}
		if (e != NULL) {
			out[o++] = e[0];
			out[o++] = e[1];
		} else if (s[i] < 0x20 || (s[i] == 0x7f && flags & JE_DEL) ||
		    ((s[i] == '<' || s[i] == '>' || s[i] == '&') &&
		    flags & JE_HTML))
			o += juesc(s[i], flags, out + o);
		else if (s[i] >= 0x80 && flags & JE_ASCII &&
		    (k = utf8_dec(s + i, n - i, &cp)) != 0) {
			if (cp >= 0x10000) {
				cp -= 0x10000;
				o += juesc(0xd800 | cp >> 10, flags, out + o);
				o += juesc(0xdc00 | (cp & 0x3ff), flags,
				    out + o);
			} else
				o += juesc(cp, flags, out + o);
			i += k - 1;
		} else
			out[o++] = (char)s[i];
	}
	out[o] = '\0';
	return o;
}


/* rd_find_all: every occurrence of f (flen bytes) in in. For base64 forms
 * the match is f's first fixed bytes, extended over up to flen - fixed
 * more alphabet characters and '=' padding, and back over up to `back`
 * alphabet characters (those that carry bits of the secret mixed with
 * bits of what precedes it). */
static void
find_all_back(const unsigned char *in, size_t n, const char *f, size_t flen,
    size_t fixed, const char *alpha, size_t back, struct rd_spans *s)
{
	const unsigned char *m;
	size_t		 pos = 0, end, k, lo;

	if (fixed == 0)
		return;
	while (pos < n && (m = memmem(in + pos, n - pos, f, fixed)) != NULL) {
		lo = (size_t)(m - in);
		for (k = 0; k < back && lo > 0 && in[lo - 1] != '\0' &&
		    strchr(alpha, in[lo - 1]) != NULL; k++)
			lo--;
		end = (size_t)(m - in) + fixed;
		for (k = fixed; alpha != NULL && k < flen && end < n &&
		    in[end] != '\0' && strchr(alpha, in[end]) != NULL; k++)
			end++;
		for (k = 0; alpha != NULL && k < 2 && end < n &&
		    in[end] == '='; k++)
			end++;
		rd_span_add(s, lo, end, RC_CREDENTIAL);
		/* Overlapping occurrences ("aa" in "aaa") are one span. */
		pos = (size_t)(m - in) + 1;
	}
}

void
rd_find_all(const unsigned char *in, size_t n, const char *f, size_t flen,
    size_t fixed, const char *alpha, struct rd_spans *s)
{
	find_all_back(in, n, f, flen, fixed, alpha, 0, s);
}

/*
 * A secret inside a longer base64 blob (a Basic authorization, a config
 * file a tool returns encoded) starts at any offset of a 3-byte group,
 * and each offset encodes it differently. At offset a (1 or 2) the first
 * characters encode the bytes before it, the last of them mixed with the
 * secret's first bits: the form searched starts after them (skip: 2, 3),
 * and the match takes the mixed one too. tmp holds len + 2 bytes; out as
 * b64's.
 */
static void
find_b64_shifted(const unsigned char *in, size_t n, const unsigned char *sec,
    size_t len, const char *alpha, unsigned char *tmp, char *out,
    struct rd_spans *s)
{
	size_t a, flen, fixed, skip;

	for (a = 1; a <= 2; a++) {
		memset(tmp, 0, a);
		memcpy(tmp + a, sec, len);
		flen = b64(tmp, len + a, alpha, out, &fixed);
		skip = a == 1 ? 2 : 3;
		if (fixed < skip + RD_FORM_MIN)
			continue;
		find_all_back(in, n, out + skip, flen - skip, fixed - skip,
		    alpha, 1, s);
	}
}

/*
 * Every base64 form of sec (len bytes): both alphabets, at each offset of
 * a 3-byte group. tmp holds len + 2 bytes, out 4 * (len + 4) / 3 + 1.
 */
static void
find_b64_all(const unsigned char *in, size_t n, const unsigned char *sec,
    size_t len, unsigned char *tmp, char *out, struct rd_spans *s)
{
	size_t flen, fixed;

	flen = b64(sec, len, b64std, out, &fixed);
	rd_find_all(in, n, out, flen, fixed, b64std, s);
	find_b64_shifted(in, n, sec, len, b64std, tmp, out, s);
	flen = b64(sec, len, b64url, out, &fixed);
	rd_find_all(in, n, out, flen, fixed, b64url, s);
	find_b64_shifted(in, n, sec, len, b64url, tmp, out, s);
}

/* The JSON forms of sec (len bytes) as each writer of jwriters escapes
 * it, once and twice, and the base64 of each once escaped one. buf holds
 * the NJWRITERS once escaped forms, step bytes apart, two a second
 * escaping; tmp and out are find_b64_all's (rd_scan_secrets lays them
 * out). */
static void
find_json_forms(const unsigned char *in, size_t n, const unsigned char *sec,
    size_t len, char *buf, size_t step, char *two, unsigned char *tmp,
    char *out, struct rd_spans *s)
{
	char	*form[NJWRITERS];
	size_t	 j, w, flen, fl[NJWRITERS];

	for (w = 0; w < NJWRITERS; w++) {
		form[w] = buf + w * step;
		fl[w] = jsonesc(sec, len, jwriters[w], form[w]);
		/* Most writers agree on most credentials: a form
		 * already searched (or the raw one) is not again. */
		if (fl[w] == len && memcmp(form[w], sec, len) == 0)
			continue;
		for (j = 0; j < w; j++)
			if (fl[j] == fl[w] &&
			    memcmp(form[j], form[w], fl[w]) == 0)
				break;
		if (j < w)
			continue;
		rd_find_all(in, n, form[w], fl[w], fl[w], NULL, s);
		/* A JSON file holding it, base64-encoded. */
		find_b64_all(in, n, (const unsigned char *)form[w],
		    fl[w], tmp, out, s);
		/* Its second escaping, by the same writer. */
		flen = jsonesc((const unsigned char *)form[w], fl[w],
		    jwriters[w], two);
		rd_find_all(in, n, two, flen, flen, NULL, s);
	}
}

/* The credentials the daemon holds, raw and in the encodings a server
 * might echo them in: base64 (both alphabets, any offset), percent-encoding,
 * hex (either case), and JSON string escaping once and twice (an
 * environment dumped as JSON text, and that text inside another JSON
 * string) as each writer of jwriters does it, which changes a credential
 * with a quote, a backslash, a control character, a non-ASCII character,
 * '/', '<', '>' or '&', and the base64 of each once escaped and each
 * percent-encoded form (a JSON file or a URL returned encoded). Short
 * secrets get no encoded forms: a 2-byte base64 prefix would match
 * everywhere. */
int
rd_scan_secrets(const char *const *secrets, size_t nsecrets,
    const unsigned char *in, size_t n, struct rd_spans *s)
{
	const unsigned char *sec;
	char		*buf, *two, *out;
	unsigned char	*tmp;
	size_t		 i, j, len, flen, step;

	for (i = 0; i < nsecrets; i++) {
		if (secrets[i] == NULL || secrets[i][0] == '\0')
			continue;
		sec = (const unsigned char *)secrets[i];
		len = strlen(secrets[i]);
		rd_find_all(in, n, secrets[i], len, len, NULL, s);
		if (len < 6)
			continue;
		/* The JSON forms are the longest: each writer's once
		 * escaped (at most 6 bytes a byte) kept side by side, then
		 * a second escaping of one of them (2 bytes at most a byte:
		 * the first left no control or, where escaped, non-ASCII
		 * byte) after them, then room to base64 a once escaped
		 * form (tmp: it and two bytes before it; out: its base64).
		 * The other forms fit in the first. */
		step = 6 * len + 1;
		if (len > (SIZE_MAX - 16) / (6 * NJWRITERS + 26) - 1 ||
		    (buf = malloc(NJWRITERS * step + 26 * len + 11)) == NULL) {
			errno = ENOMEM;
			return -1;
		}
		two = buf + NJWRITERS * step;
		tmp = (unsigned char *)two + 12 * len + 1;
		out = (char *)tmp + 6 * len + 2;
		find_b64_all(in, n, sec, len, tmp, out, s);
		/* Percent-encoded (as a URL, and as a form writes a blank:
		 * '+'), and that base64-encoded (a URL with the credential
		 * in it, stored encoded: .git-credentials in a Kubernetes
		 * secret). */
		for (j = 0; j < 4; j++) {
			if (j >= 2 && memchr(sec, ' ', len) == NULL)
				break;
			flen = urlenc(sec, len, j % 2 == 0, j >= 2, buf);
			if (flen == len && memcmp(buf, sec, len) == 0)
				break;
			rd_find_all(in, n, buf, flen, flen, NULL, s);
			find_b64_all(in, n, (const unsigned char *)buf, flen,
			    tmp, out, s);
		}
		flen = hexenc(sec, len, true, buf);
		rd_find_all(in, n, buf, flen, flen, NULL, s);
		hexenc(sec, len, false, buf);
		rd_find_all(in, n, buf, flen, flen, NULL, s);
		find_json_forms(in, n, sec, len, buf, step, two, tmp, out, s);
		free(buf);
	}
	return 0;
}

void
rd_declevel_free(struct rd_declevel *d)
{
	/* The original text (lo NULL) is the caller's. */
	if (d->lo != NULL)
		free((void *)(uintptr_t)d->b);
	free(d->lo);
	free(d->hi);
}

/* Searches the text of d as rd_scan_secrets searches an original and adds
 * each match to s as the span of the original text it came from. -1
 * (ENOMEM) or 0; d stays the caller's. */
int
rd_scan_mapped(const char *const *secrets, size_t nsecrets,
    const struct rd_declevel *d, struct rd_spans *s)
{
	struct rd_spans	t = { 0 };

	if (rd_scan_secrets(secrets, nsecrets, d->b, d->n, &t) == -1)
		t.oom = true;
	return rd_map_spans(d, &t, s);
}

int
rd_map_spans(const struct rd_declevel *d, struct rd_spans *t,
    struct rd_spans *s)
{
	size_t	i;

	if (t->oom) {
		free(t->v);
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < t->n; i++)
		rd_span_add(s, d->lo[t->v[i].lo], d->hi[t->v[i].hi - 1],
		    t->v[i].cls);
	free(t->v);
	return 0;
}
