/*
 * redact: take secrets out of tool results before the sandbox sees them.
 *
 * The capability bridge holds upstream credentials and forwards results
 * written by upstream servers, which can echo anything: a cloud key read
 * from a file, a PEM block, the Authorization header the bridge itself
 * injected. A policy's mcp.results.redact names built-in classes and
 * mcp.results.redact_patterns adds PCRE2 patterns; this file finds every
 * match and replaces it with a fixed marker. It is pure (no I/O, no clock,
 * no globals) and scans each class in one linear pass, so redaction costs
 * the same on every call and can be tested with tables. Patterns were
 * compiled by the loader; only their matching happens here, under the
 * policy's match limits, and any matching error fails the whole call:
 * the caller must then withhold the result rather than pass it unredacted.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/redact_int.h"

/* By enum rd_class. */
static const char *const markers[] = {
	"[REDACTED:aws_key]",
	"[REDACTED:aws_secret]",
	"[REDACTED:private_key]",
	"[REDACTED:bearer_token]",
	"[REDACTED:jwt]",
	"[REDACTED:github_token]",
	"[REDACTED:pattern]",
	"[REDACTED:credential]",
};

/* Which built-in classes a policy turned on (bits by name). */
#define RB_AWS		0x01u
#define RB_PRIVATE	0x02u
#define RB_BEARER	0x04u
#define RB_GITHUB	0x08u
#define RB_UPSTREAM	0x10u

void
rd_span_add(struct rd_spans *s, size_t lo, size_t hi, int cls)
{
	struct rd_span	*t;
	size_t		 cap;

	if (s->oom || hi <= lo)
		return;
	if (s->n == s->cap) {
		cap = s->cap ? s->cap * 2 : 16;
		if ((t = reallocarray(s->v, cap, sizeof(*t))) == NULL) {
			s->oom = true;
			return;
		}
		s->v = t;
		s->cap = cap;
	}
	s->v[s->n].lo = lo;
	s->v[s->n].hi = hi;
	s->v[s->n].cls = cls;
	s->n++;
}

static unsigned
enabled(const struct pol_policy *p)
{
	static const struct { const char *name; unsigned bit; } map[] = {
		{ "aws_keys", RB_AWS }, { "private_keys", RB_PRIVATE },
		{ "bearer_tokens", RB_BEARER }, { "github_tokens", RB_GITHUB },
		{ "upstream_credentials", RB_UPSTREAM },
	};
	unsigned	 m = 0;
	size_t		 i, j;

	for (i = 0; i < p->nredact; i++)
		for (j = 0; j < sizeof(map) / sizeof(map[0]); j++)
			if (strcmp(p->redact[i], map[j].name) == 0)
				m |= map[j].bit;
	return m;
}

/*
 * The escapes of writers outside jwriters, and text escaped more than
 * twice, are found by undoing them instead: the text is unescaped level by
 * level and each level searched as the original is (raw, base64,
 * %-encoded, hex, jwriters' forms). One level undoes what writers of JSON,
 * C, Python and JavaScript strings emit (unesc1), HTML character
 * references (unent1) and percent-encoding of any byte (unpct1), so a
 * credential escaped one character at a time, in any mix of forms, is
 * found as long as it was escaped at most DEC_LEVELS times. Every byte
 * of a level keeps the span of the original text it came from, so a match
 * redacts the escaped form where it stands. A literal backslash, '&' or
 * '%' just before a match may be read with it as one escape a level
 * deeper and go with it: redaction errs towards taking a character too
 * many.
 */
#define DEC_LEVELS	4

/* The value of the n (at most 8) hex digits at s, or -1; long long so
 * that eight digits fit where long has 32 bits. */
static long long
hexn(const unsigned char *s, size_t n)
{
	long long v = 0;
	size_t i;
	int h;

	for (i = 0; i < n; i++) {
		if ((h = rd_hexval(s[i])) == -1)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

/* cp as UTF-8 at out (at most 4 bytes); the count. */
static size_t
utf8_enc(unsigned long cp, unsigned char *out)
{
	if (cp < 0x80) {
		out[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (unsigned char)(0xc0 | cp >> 6);
		out[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (unsigned char)(0xe0 | cp >> 12);
		out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (unsigned char)(0xf0 | cp >> 18);
	out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/* How \xHH above 0x7f is read: as that byte (C, Python bytes) or as that
 * code point (Python str, JavaScript). */
#define X_BYTE		0
#define X_CHAR		1

/* An escape of one byte's value v (\xHH, octal) into out, as xmode reads
 * one above 0x7f (setting *high); the count. */
static size_t
byte_esc(long long v, int xmode, unsigned char *out, int *high)
{
	if (v >= 0x80)
		*high = 1;
	if (v < 0x80 || xmode == X_BYTE) {
		out[0] = (unsigned char)v;
		return 1;
	}
	return utf8_enc((unsigned long)v, out);
}

/*
 * One escape at in[i] (a backslash, n bytes in all): its bytes in out (at
 * most 4) and their count, the escape's length in *used; 0 when it is none
 * (the backslash then stands for itself). *high is set by a \x or an octal
 * escape above 0x7f. What the writers of JSON, C, Python and JavaScript
 * strings emit: the short escapes, octal \NNN, \xHH, \uXXXX (surrogate
 * pairs joined), \UXXXXXXXX and \u{X...}. Never more bytes than the
 * escape.
 */
static size_t
unesc1(const unsigned char *in, size_t n, size_t i, int xmode,
    unsigned char *out, size_t *used, int *high)
{
	static const char from[] = "\"\\/bfnrt'va", to[] =
	    "\"\\/\b\f\n\r\t'\v\a";
	const char *q;
	long long cp, lo;
	size_t k;

	if (i + 1 >= n)
		return 0;
	if (in[i + 1] != '\0' && (q = strchr(from, in[i + 1])) != NULL) {
		out[0] = (unsigned char)to[q - from];
		*used = 2;
		return 1;
	}
	if (in[i + 1] >= '0' && in[i + 1] <= '7') {
		/* C's and Python's octal escapes: up to three digits, at
		 * most \377 (one more digit would pass it: it is text). */
		for (k = 0, cp = 0; k < 3 && i + 1 + k < n &&
		    in[i + 1 + k] >= '0' && in[i + 1 + k] <= '7' &&
		    cp * 8 + (in[i + 1 + k] - '0') <= 0xff; k++)
			cp = cp * 8 + (in[i + 1 + k] - '0');
		*used = k + 1;
		return byte_esc(cp, xmode, out, high);
	}
	if (in[i + 1] == 'x') {
		if (i + 4 > n || (cp = hexn(in + i + 2, 2)) == -1)
			return 0;
		*used = 4;
		return byte_esc(cp, xmode, out, high);
	}
	if (in[i + 1] == 'U') {
		if (i + 10 > n || (cp = hexn(in + i + 2, 8)) == -1 ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		*used = 10;
		return utf8_enc((unsigned long)cp, out);
	}
	if (in[i + 1] != 'u')
		return 0;
	if (i + 2 < n && in[i + 2] == '{') {
		/* JavaScript's \u{X...}: 1 to 6 digits. */
		for (k = 0; k < 6 && i + 3 + k < n &&
		    rd_hexval(in[i + 3 + k]) != -1; k++)
			;
		if (k == 0 || i + 3 + k >= n || in[i + 3 + k] != '}' ||
		    (cp = hexn(in + i + 3, k)) > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		*used = k + 4;
		return utf8_enc((unsigned long)cp, out);
	}
	if (i + 6 > n || (cp = hexn(in + i + 2, 4)) == -1)
		return 0;
	*used = 6;
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (i + 12 > n || in[i + 6] != '\\' || in[i + 7] != 'u' ||
		    (lo = hexn(in + i + 8, 4)) < 0xdc00 || lo > 0xdfff)
			return 0;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		*used = 12;
	} else if (cp >= 0xdc00 && cp <= 0xdfff)
		return 0;
	return utf8_enc((unsigned long)cp, out);
}

/*
 * One HTML character reference at in[i] ('&', n bytes in all), as unesc1:
 * &#DDD; and &#xHHH; (any code point but NUL and surrogates) and the named
 * references of ASCII punctuation, what a credential gets from HTML
 * encoders (an HTML page a fetch tool returns, an attribute value). As
 * HTML parsers do, a numeric reference may end without its ';' (at the
 * first byte that is no digit) and the four legacy names (amp, lt, gt,
 * quot, either case) may go without it.
 */
static const struct { const char *name; char c; } html_named[] = {
	{ "quot;", '"' }, { "QUOT;", '"' }, { "amp;", '&' }, { "AMP;", '&' },
	{ "lt;", '<' }, { "LT;", '<' }, { "gt;", '>' }, { "GT;", '>' },
	{ "apos;", '\'' }, { "sol;", '/' }, { "plus;", '+' },
	{ "equals;", '=' }, { "excl;", '!' }, { "num;", '#' },
	{ "dollar;", '$' }, { "percnt;", '%' }, { "lpar;", '(' },
	{ "rpar;", ')' }, { "ast;", '*' }, { "midast;", '*' },
	{ "comma;", ',' }, { "period;", '.' }, { "colon;", ':' },
	{ "semi;", ';' }, { "quest;", '?' }, { "commat;", '@' },
	{ "lsqb;", '[' }, { "lbrack;", '[' }, { "bsol;", '\\' },
	{ "rsqb;", ']' }, { "rbrack;", ']' }, { "Hat;", '^' },
	{ "lowbar;", '_' }, { "UnderBar;", '_' }, { "grave;", '`' },
	{ "DiacriticalGrave;", '`' }, { "lcub;", '{' }, { "lbrace;", '{' },
	{ "verbar;", '|' }, { "vert;", '|' }, { "VerticalLine;", '|' },
	{ "rcub;", '}' }, { "rbrace;", '}' }, { "Tab;", '\t' },
	{ "NewLine;", '\n' },
	/* Legacy: after every form with the ';', which is longer. */
	{ "quot", '"' }, { "QUOT", '"' }, { "amp", '&' }, { "AMP", '&' },
	{ "lt", '<' }, { "LT", '<' }, { "gt", '>' }, { "GT", '>' },
};

static size_t
unent1(const unsigned char *in, size_t n, size_t i, unsigned char *out,
    size_t *used)
{
	long long cp = 0;
	size_t k, d, len;
	int hex, h;

	if (i + 2 >= n)
		return 0;
	if (in[i + 1] != '#') {
		for (k = 0; k < sizeof(html_named) / sizeof(html_named[0]);
		    k++) {
			if ((unsigned char)html_named[k].name[0] != in[i + 1])
				continue;
			len = strlen(html_named[k].name);
			if (i + 1 + len <= n && memcmp(in + i + 1,
			    html_named[k].name, len) == 0) {
				out[0] = (unsigned char)html_named[k].c;
				*used = len + 1;
				return 1;
			}
		}
		return 0;
	}
	hex = in[i + 2] == 'x' || in[i + 2] == 'X';
	for (k = i + 2 + hex, d = 0; k < n && d < 8; k++, d++) {
		h = hex ? rd_hexval(in[k]) : in[k] >= '0' && in[k] <= '9' ?
		    in[k] - '0' : -1;
		if (h == -1)
			break;
		cp = cp * (hex ? 16 : 10) + h;
	}
	/* More than eight digits is no reference anyone writes. */
	if (d == 0 || cp == 0 || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff) || (k < n &&
	    (hex ? rd_hexval(in[k]) : in[k] >= '0' && in[k] <= '9' ? 0 : -1) !=
	    -1))
		return 0;
	*used = k - i + (k < n && in[k] == ';');
	return utf8_enc((unsigned long)cp, out);
}

/* One %HH at in[i] ('%', n bytes in all), as unesc1: the byte, whatever
 * it is (a writer may percent-encode every byte, in either case). */
static size_t
unpct1(const unsigned char *in, size_t n, size_t i, unsigned char *out,
    size_t *used)
{
	long long v;

	if (i + 3 > n || (v = hexn(in + i + 1, 2)) == -1)
		return 0;
	out[0] = (unsigned char)v;
	*used = 3;
	return 1;
}

/* Unescapes prev into d (never longer), \x read as xmode says: bit 0 of
 * the result set when some escape was undone (else d is prev's copy), bit
 * 1 when a \x above 0x7f was seen; -1 (ENOMEM). d owns its arrays after
 * a result other than -1 (rd_declevel_free). */
static int
unesc_level(const struct rd_declevel *prev, struct rd_declevel *d, int xmode)
{
	unsigned char	 u[4], *b;
	size_t		 i, j, k, r, o = 0, used;
	int		 changed = 0, high = 0;

	b = malloc(prev->n + 1);
	d->lo = malloc((prev->n + 1) * sizeof(*d->lo));
	d->hi = malloc((prev->n + 1) * sizeof(*d->hi));
	if (b == NULL || d->lo == NULL || d->hi == NULL) {
		free(b);
		free(d->lo);
		free(d->hi);
		d->lo = d->hi = NULL;
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < prev->n; i += used) {
		/* Bytes no escape starts at stand for themselves: copied
		 * a run at a time, most of any text. */
		for (r = i; r < prev->n && prev->b[r] != '\\' &&
		    prev->b[r] != '&' && prev->b[r] != '%'; r++)
			;
		if (r > i) {
			memcpy(b + o, prev->b + i, r - i);
			if (prev->lo != NULL) {
				memcpy(d->lo + o, prev->lo + i,
				    (r - i) * sizeof(*d->lo));
				memcpy(d->hi + o, prev->hi + i,
				    (r - i) * sizeof(*d->hi));
			} else
				for (j = 0; j < r - i; j++) {
					d->lo[o + j] = (uint32_t)(i + j);
					d->hi[o + j] = (uint32_t)(i + j + 1);
				}
			o += r - i;
			used = r - i;
			continue;
		}
		switch (prev->b[i]) {
		case '\\':
			k = unesc1(prev->b, prev->n, i, xmode, u, &used,
			    &high);
			break;
		case '&':
			k = unent1(prev->b, prev->n, i, u, &used);
			break;
		case '%':
			k = unpct1(prev->b, prev->n, i, u, &used);
			break;
		default:
			k = 0;
		}
		/* A refused escape may have set used: it stands for its
		 * first byte only. */
		if (k == 0) {
			used = 1;
			u[0] = prev->b[i];
			k = 1;
		} else
			changed = 1;
		/* Each byte an escape gives spans the whole escape. */
		for (j = 0; j < k; j++, o++) {
			b[o] = u[j];
			d->lo[o] = prev->lo != NULL ? prev->lo[i] : (uint32_t)i;
			d->hi[o] = prev->lo != NULL ? prev->hi[i + used - 1] :
			    (uint32_t)(i + used);
		}
	}
	d->b = b;
	d->n = o;
	return changed | high << 1;
}

/*
 * A secret can hold what a level undoes itself ("pa%41ss", "a&lt;b"): a
 * level that takes off an outer escape of another kind also reads the
 * secret's own bytes, and the secret stands in it as that reading. So
 * each level is also searched for the secrets as the levels before read
 * them (form m: m passes of the same unescaping), raw only, and only
 * forms of at least RD_FORM_MIN bytes. Where the secret's last bytes
 * join what follows it into one escape, the form is not found.
 */
struct forms {
	struct rd_declevel *f;	/* nsecrets rows of DEC_LEVELS + 1 */
	size_t		 nsecrets;
};

static struct rd_declevel *
form_at(const struct forms *fs, size_t i, size_t m)
{
	return &fs->f[i * (DEC_LEVELS + 1) + m];
}

static void
forms_free(struct forms *fs)
{
	size_t i, m;

	if (fs->f == NULL)
		return;
	/* Form 0 is the caller's secret (lo NULL, as rd_declevel_free
	 * expects); an unmade form is all NULL. */
	for (i = 0; i < fs->nsecrets; i++)
		for (m = 1; m <= DEC_LEVELS; m++)
			rd_declevel_free(form_at(fs, i, m));
	free(fs->f);
	fs->f = NULL;
}

/* Makes form m of every secret (from form m - 1, \x read as xmode);
 * a form that is its predecessor's copy gets n = 0, which is never
 * searched and stays so. -1 (ENOMEM). */
static int
forms_next(struct forms *fs, size_t m, int xmode)
{
	struct rd_declevel *prev, *d;
	size_t i;
	int rc;

	for (i = 0; i < fs->nsecrets; i++) {
		prev = form_at(fs, i, m - 1);
		d = form_at(fs, i, m);
		if (prev->b == NULL || (m > 1 && prev->n == 0))
			continue;
		if ((rc = unesc_level(prev, d, xmode)) == -1)
			return -1;
		if (!(rc & 1))
			d->n = 0;
	}
	return 0;
}

/* Searches the level d (the l-th) as the original is searched (every
 * form of every secret), and for the secrets' forms 1 to l, each match
 * moved back onto the span of the original it came from. -1 (ENOMEM). */
static int
search_level(const char *const *secrets, size_t nsecrets,
    const struct forms *fs, size_t l, const struct rd_declevel *d,
    struct rd_spans *s)
{
	const struct rd_declevel *f;
	struct rd_spans	 t = { 0 };
	size_t		 i, m;

	if (rd_scan_secrets(secrets, nsecrets, d->b, d->n, &t) == -1) {
		free(t.v);
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < nsecrets; i++)
		for (m = 1; m <= l; m++) {
			f = form_at(fs, i, m);
			if (f->b != NULL && f->n >= RD_FORM_MIN)
				rd_find_all(d->b, d->n, (const char *)f->b,
				    f->n, f->n, NULL, &t);
		}
	if (t.oom) {
		free(t.v);
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < t.n; i++)
		rd_span_add(s, d->lo[t.v[i].lo], d->hi[t.v[i].hi - 1],
		    t.v[i].cls);
	free(t.v);
	return 0;
}

/* Could b hold an escape unesc1, unent1 or unpct1 undoes? */
static int
escapable(const unsigned char *b, size_t n)
{
	return memchr(b, '\\', n) != NULL || memchr(b, '&', n) != NULL ||
	    memchr(b, '%', n) != NULL;
}

static int
rd_scan_unescaped(const char *const *secrets, size_t nsecrets,
    const unsigned char *in, size_t n, struct rd_spans *s)
{
	struct rd_declevel cur, next;
	struct forms	 fs = { NULL, nsecrets };
	size_t		 i, l;
	int		 rc, xmode, high = 0;

	if (n == 0 || !escapable(in, n))
		return 0;
	/* Spans are kept in 32 bits; a longer text is refused, which
	 * withholds the result (results are capped far below this). */
	if (n >= UINT32_MAX || n >= SIZE_MAX / sizeof(uint32_t) - 1) {
		errno = EOVERFLOW;
		return -1;
	}
	/* \x above 0x7f is read as a byte, then, if there was one, as a
	 * character: the text does not say which its writer meant. */
	for (xmode = X_BYTE; xmode <= X_CHAR; xmode++) {
		if (xmode == X_CHAR && !high)
			break;
		if (nsecrets > 0 && (fs.f = calloc(nsecrets * (DEC_LEVELS + 1),
		    sizeof(*fs.f))) == NULL) {
			errno = ENOMEM;
			return -1;
		}
		for (i = 0; i < nsecrets; i++)
			if (secrets[i] != NULL && secrets[i][0] != '\0') {
				form_at(&fs, i, 0)->b =
				    (const unsigned char *)secrets[i];
				form_at(&fs, i, 0)->n = strlen(secrets[i]);
			}
		cur.b = in;
		cur.lo = cur.hi = NULL;
		cur.n = n;
		for (l = 0; l < DEC_LEVELS; l++) {
			rc = unesc_level(&cur, &next, xmode);
			rd_declevel_free(&cur);
			if (rc == -1 || forms_next(&fs, l + 1, xmode) == -1) {
				if (rc != -1)
					rd_declevel_free(&next);
				forms_free(&fs);
				return -1;
			}
			cur = next;
			high |= rc & 2;
			/* Nothing undone: the same text as the level
			 * searched before, and so would every further
			 * level be. */
			if (!(rc & 1))
				break;
			if (search_level(secrets, nsecrets, &fs, l + 1, &cur,
			    s) == -1) {
				rd_declevel_free(&cur);
				forms_free(&fs);
				return -1;
			}
			if (!escapable(cur.b, cur.n))
				break;
		}
		rd_declevel_free(&cur);
		forms_free(&fs);
	}
	return 0;
}

/*
 * Base64 is often wrapped (the base64 tool at 76 characters a line, PEM
 * and MIME at 64 and 76), and a credential's encoded form then spans a
 * line break two times out of three. A break is read through when it
 * lies between two characters of a base64 alphabet, holds a line break,
 * and holds nothing but line breaks, blanks and '>' -- so also a YAML
 * block's indentation, a MIME header's folding and a mail's quoting --
 * where each line break, blank may also be written as a JSON or C escape
 * (a JSON document returned as text). The joined text is searched as the
 * original is (so a credential a terminal wrapped is found too); a break
 * after or before anything else stays, and so does one without a line
 * break (prose would otherwise pay for a second search of every text).
 */
static bool
b64_char(unsigned char c)
{
	return rd_is_b64(c) || c == '-' || c == '_' || c == '=';
}

/* The break starting at in[i] (after a base64 character), which ends
 * before *end: the index just past it when it holds a line break and a
 * base64 character follows, else i. A break that does not join holds
 * none that does (each one starting inside it ends where it ends, with
 * fewer line breaks), so the callers step over all of it: that keeps a
 * long break of escaped blanks, whose 't's are base64 characters, one
 * linear pass. */
static size_t
join_break(const unsigned char *in, size_t n, size_t i, size_t *end)
{
	size_t	j = i;
	bool	nl = false;

	while (j < n) {
		if (in[j] == '\n' || in[j] == '\r') {
			nl = true;
			j++;
		} else if (in[j] == ' ' || in[j] == '\t' || in[j] == '>')
			j++;
		else if (in[j] == '\\' && j + 1 < n && (in[j + 1] == 'n' ||
		    in[j + 1] == 'r' || in[j + 1] == 't')) {
			nl = nl || in[j + 1] != 't';
			j += 2;
		} else
			break;
	}
	*end = j;
	return nl && j < n && b64_char(in[j]) ? j : i;
}

static int
rd_scan_joined(const char *const *secrets, size_t nsecrets,
    const unsigned char *in, size_t n, struct rd_spans *s)
{
	struct rd_declevel d;
	size_t		 i, j, end, o = 0;
	unsigned char	*b;
	int		 joins = 0, rc;

	for (i = 1; i + 1 < n && !joins; i++)
		if (b64_char(in[i - 1])) {
			joins = join_break(in, n, i, &end) != i;
			if (end > i)
				i = end - 1;
		}
	if (!joins)
		return 0;
	if (n >= UINT32_MAX) {
		errno = EOVERFLOW;
		return -1;
	}
	b = malloc(n);
	d.lo = malloc(n * sizeof(*d.lo));
	d.hi = malloc(n * sizeof(*d.hi));
	if (b == NULL || d.lo == NULL || d.hi == NULL) {
		free(b);
		free(d.lo);
		free(d.hi);
		errno = ENOMEM;
		return -1;
	}
	for (i = 0, end = 0; i < n; i++) {
		if (i >= end && o > 0 && b64_char(b[o - 1]) &&
		    (j = join_break(in, n, i, &end)) != i) {
			i = j - 1;
			continue;
		}
		b[o] = in[i];
		d.lo[o] = (uint32_t)i;
		d.hi[o] = (uint32_t)(i + 1);
		o++;
	}
	d.b = b;
	d.n = o;
	rc = rd_scan_mapped(secrets, nsecrets, &d, s);
	rd_declevel_free(&d);
	return rc;
}

/*
 * Hex dumps. `xxd`, `hexdump -C` and `od -A x -t x1z` print bytes as hex
 * groups after an offset, sixteen to a line, with the bytes again as
 * text at the end of the line: a credential longer than what is left of
 * its line is split in both columns, with the next line's offset in
 * between, so neither the hex search nor the raw one sees it. Each run of
 * dump lines is decoded back into its bytes (every byte keeping the span
 * of its two hex digits) and the bytes are searched as the original is;
 * a match is redacted from its first hex digit to the end of the line of
 * its last byte, which takes its text column too. Lines end at line
 * breaks; a second reading ends them at escaped ones instead (a dump
 * inside a JSON string returned as text), since a text column may hold
 * either as text.
 * What a line holds: an offset of 4 to 16 hex digits, maybe a ':', a
 * blank, then groups of an even number of hex digits (all as long as the
 * first, the last maybe shorter) one or two blanks apart. The next line's
 * offset bounds how many bytes a line gave (so a text column that looks
 * like hex is not read as bytes), and a line whose bytes fall short of
 * the next offset ends its run (hexdump's '*' for repeated lines). Groups
 * of four digits are also read as 16-bit words in little-endian order
 * (`hexdump` without -C, `od -x` on the machines Sluice runs on). Not
 * read: octal dumps and other word sizes.
 */
#define DUMP_MAXLINE	64	/* bytes a dump line may give */

/* The length of the line break at in[i], or 0: a real one, or when esc
 * its escape (and then a real one is text, as an escape is otherwise: a
 * text column may hold either). */
static size_t
dump_eol(const unsigned char *in, size_t n, size_t i, bool esc)
{
	if (!esc)
		return in[i] == '\n' ? 1 : in[i] == '\r' && i + 1 < n &&
		    in[i + 1] == '\n' ? 2 : 0;
	if (in[i] == '\\' && i + 1 < n && in[i + 1] == 'n')
		return 2;
	if (in[i] == '\\' && i + 3 < n && in[i + 1] == 'r' &&
	    in[i + 2] == '\\' && in[i + 3] == 'n')
		return 4;
	return 0;
}

/* Where the line starting at i ends (its break, or n). */
static size_t
dump_line_end(const unsigned char *in, size_t n, size_t i, bool esc)
{
	const unsigned char *p;

	if (!esc) {
		/* A break is a '\n', maybe after a '\r' that goes with it. */
		p = i < n ? memchr(in + i, '\n', n - i) : NULL;
		if (p == NULL)
			return n;
		i = (size_t)(p - in);
		return i > 0 && in[i - 1] == '\r' ? i - 1 : i;
	}
	while (i < n && dump_eol(in, n, i, esc) == 0)
		i++;
	return i;
}

struct dump_line {
	long long	 off;		/* the offset read as hex */
	long long	 off8;		/* ... as octal, -1 if it is not */
	size_t		 data;		/* where its first group starts */
	size_t		 nbytes;	/* bytes its groups give */
	size_t		 glen;		/* digits in its first group */
	size_t		 end;		/* its end (its break, or n) */
};

/*
 * Reads the line in[i..end) as a dump line giving at most max bytes: 0
 * and *l filled when it is one (an offset and at least one group), else
 * -1.
 */
static int
dump_line(const unsigned char *in, size_t i, size_t end, size_t max,
    struct dump_line *l)
{
	size_t	j = i, k, glen = 0, blanks;
	bool	shortg = false;

	while (j < end && j - i < 8 && (in[j] == ' ' || in[j] == '\t'))
		j++;
	l->off = 0;
	l->off8 = 0;
	for (k = j; k < end && rd_hexval(in[k]) != -1 && k - j < 16; k++) {
		if (k - j == 15)
			continue;	/* a 16th digit: not compared (below) */
		l->off = l->off << 4 | rd_hexval(in[k]);
		l->off8 = l->off8 >= 0 && in[k] <= '7' ?
		    l->off8 << 3 | (in[k] - '0') : -1;
	}
	/* 16 digits may overflow: such offsets are not compared. */
	if (k - j < 4 || (k < end && rd_hexval(in[k]) != -1))
		return -1;
	if (k - j == 16)
		l->off = l->off8 = -1;
	if (k < end && in[k] == ':')
		k++;
	l->data = 0;
	l->nbytes = 0;
	l->glen = 0;
	l->end = end;
	while (k < end && l->nbytes < max && !shortg) {
		for (blanks = 0; k < end && in[k] == ' '; k++)
			blanks++;
		if (blanks == 0 || blanks > 2)
			break;
		for (j = k; j < end && rd_hexval(in[j]) != -1; j++)
			;
		/* A group has an even number of digits, no more than the
		 * first, and ends at a blank or the line's end; a shorter
		 * one is the line's last. */
		if (j == k || (j - k) % 2 != 0 || (glen && j - k > glen) ||
		    (j < end && in[j] != ' ') ||
		    l->nbytes + (j - k) / 2 > max)
			break;
		if (glen == 0) {
			glen = l->glen = j - k;
			l->data = k;
		}
		shortg = j - k < glen;
		l->nbytes += (j - k) / 2;
		k = j;
	}
	return l->nbytes > 0 ? 0 : -1;
}

/* Appends the first l->nbytes bytes of line l to d (room is made), each
 * with the span of its digits as lo and its line's end as hi. */
static void
dump_decode(const unsigned char *in, const struct dump_line *l,
    struct rd_declevel *d, unsigned char *b)
{
	size_t	k = l->data, got;

	for (got = 0; got < l->nbytes; got++) {
		while (in[k] == ' ')
			k++;
		b[d->n] = (unsigned char)(rd_hexval(in[k]) << 4 |
		    rd_hexval(in[k + 1]));
		d->lo[d->n] = (uint32_t)k;
		d->hi[d->n] = (uint32_t)l->end;
		d->n++;
		k += 2;
	}
}

/* Makes room for need bytes in b and d: -1 (ENOMEM, all freed) or 0. */
static int
dump_room(unsigned char **b, struct rd_declevel *d, size_t *cap, size_t need)
{
	size_t		 nc = *cap ? *cap : 256;
	unsigned char	*nb;
	uint32_t	*nl, *nh;

	if (need <= *cap)
		return 0;
	while (nc < need)
		nc *= 2;
	if ((nb = realloc(*b, nc)) != NULL)
		*b = nb;
	if ((nl = realloc(d->lo, nc * sizeof(*nl))) != NULL)
		d->lo = nl;
	if ((nh = realloc(d->hi, nc * sizeof(*nh))) != NULL)
		d->hi = nh;
	if (nb == NULL || nl == NULL || nh == NULL) {
		free(*b);
		*b = NULL;
		free(d->lo);
		free(d->hi);
		d->lo = d->hi = NULL;
		errno = ENOMEM;
		return -1;
	}
	*cap = nc;
	return 0;
}

/* Reads the first line of a run, in[i..end): its offset at the line's
 * start, or just after one of the line's first quotes (a dump printed
 * into a JSON or Python string: {"out":"00000000: ...). */
static int
dump_first(const unsigned char *in, size_t i, size_t end,
    struct dump_line *l)
{
	size_t	j, lim, quotes = 0;

	if (dump_line(in, i, end, DUMP_MAXLINE, l) == 0)
		return 0;
	/* Only quotes near the line's start. */
	lim = end - i > 80 ? i + 80 : end;
	for (j = i; j < lim && quotes < 4; j++) {
		const unsigned char *q = memchr(in + j, '"', lim - j);
		const unsigned char *a = memchr(in + j, '\'', lim - j);

		if (q == NULL && a == NULL)
			break;
		if (q == NULL || (a != NULL && a < q))
			q = a;
		j = (size_t)(q - in);
		quotes++;
		if (dump_line(in, j + 1, end, DUMP_MAXLINE, l) == 0)
			return 0;
	}
	return -1;
}

/* The start of the line after the one ending at e. */
static size_t
dump_next(const unsigned char *in, size_t n, size_t e, bool esc)
{
	return e < n ? e + dump_eol(in, n, e, esc) : n;
}

/* Decodes the runs of dump lines of in (lines ending at real breaks, or
 * when esc at escaped ones) into b and d, each run followed by a NUL,
 * which no secret (a C string) and none of its forms holds. -1 (ENOMEM,
 * b and d freed) or 0. */
static int
dump_runs(const unsigned char *in, size_t n, bool esc, unsigned char **b,
    struct rd_declevel *d, size_t *cap)
{
	struct dump_line cur, nxt;
	size_t		 i = 0, e, ni, prev, start, k;
	long long	 dx, d8, want;
	bool		 have, first, words;

	while (i < n) {
		e = dump_line_end(in, n, i, esc);
		if (dump_first(in, i, e, &cur) == -1) {
			i = dump_next(in, n, e, esc);
			continue;
		}
		/* A run: this line and those after it while each next
		 * offset says how many bytes the line before gave. */
		prev = DUMP_MAXLINE;
		first = true;
		start = d->n;
		words = true;
		for (;;) {
			ni = dump_next(in, n, e, esc);
			have = false;
			if (ni < n) {
				e = dump_line_end(in, n, ni, esc);
				have = dump_line(in, ni, e, DUMP_MAXLINE,
				    &nxt) == 0;
			}
			if (have) {
				dx = cur.off >= 0 && nxt.off > cur.off ?
				    nxt.off - cur.off : -1;
				d8 = cur.off8 >= 0 && nxt.off8 > cur.off8 ?
				    nxt.off8 - cur.off8 : -1;
				want = dx > 0 && dx <= (long long)cur.nbytes ?
				    dx : d8 > 0 && d8 <= (long long)cur.nbytes ?
				    d8 : -1;
				if (want > 0)
					cur.nbytes = (size_t)want;
				else
					have = false;
			} else if (!first && cur.nbytes > prev)
				cur.nbytes = prev;
			if (dump_room(b, d, cap, d->n + cur.nbytes + 1) == -1)
				return -1;
			dump_decode(in, &cur, d, *b);
			words = words && cur.glen == 4 && cur.nbytes % 2 == 0;
			prev = cur.nbytes;
			first = false;
			if (!have) {
				/* The next line starts a run of its own if
				 * it can. */
				i = ni;
				break;
			}
			cur = nxt;
		}
		/* Groups of four digits may be 16-bit words in the host's
		 * order (hexdump without -C, od -x): the run again, each
		 * pair of bytes swapped, both spanning from their group. */
		if (words) {
			size_t	 len = d->n - start;

			if (dump_room(b, d, cap, d->n + len + 2) == -1)
				return -1;
			(*b)[d->n] = '\0';
			d->lo[d->n] = d->hi[d->n] = 0;
			d->n++;
			for (k = start; k + 1 < start + len; k += 2) {
				(*b)[d->n] = (*b)[k + 1];
				(*b)[d->n + 1] = (*b)[k];
				d->lo[d->n] = d->lo[d->n + 1] = d->lo[k];
				d->hi[d->n] = d->hi[d->n + 1] = d->hi[k];
				d->n += 2;
			}
		}
		(*b)[d->n] = '\0';
		d->lo[d->n] = d->hi[d->n] = 0;
		d->n++;
	}
	return 0;
}

static int
rd_scan_dumps(const char *const *secrets, size_t nsecrets,
    const unsigned char *in, size_t n, struct rd_spans *s)
{
	struct rd_declevel d = { NULL, NULL, NULL, 0 };
	unsigned char	*b = NULL;
	size_t		 cap = 0;
	int		 rc;

	if (n >= UINT32_MAX) {
		errno = EOVERFLOW;
		return -1;
	}
	/* Real line breaks, then escaped ones when there are any: a dump
	 * printed into a JSON string returned as text. */
	if (dump_runs(in, n, false, &b, &d, &cap) == -1 ||
	    (memmem(in, n, "\\n", 2) != NULL &&
	    dump_runs(in, n, true, &b, &d, &cap) == -1))
		return -1;
	if (d.n == 0)
		return 0;
	d.b = b;
	rc = rd_scan_mapped(secrets, nsecrets, &d, s);
	rd_declevel_free(&d);
	return rc;
}

static int
span_cmp(const void *a, const void *b)
{
	const struct rd_span *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	if (x->hi != y->hi)
		return x->hi > y->hi ? -1 : 1;
	return x->cls - y->cls;
}

int
pol_holds_secret(const char *const *secrets, size_t nsecrets,
    const char *text, size_t len)
{
	const unsigned char *in = (const unsigned char *)text;
	struct rd_spans s = { 0 };
	int rc;

	if ((text == NULL && len > 0) || (secrets == NULL && nsecrets > 0)) {
		errno = EINVAL;
		return -1;
	}
	if (text == NULL)
		in = (const unsigned char *)"";
	if (rd_scan_secrets(secrets, nsecrets, in, len, &s) == -1 ||
	    rd_scan_unescaped(secrets, nsecrets, in, len, &s) == -1 ||
	    rd_scan_joined(secrets, nsecrets, in, len, &s) == -1 ||
	    rd_scan_dumps(secrets, nsecrets, in, len, &s) == -1)
		rc = -1;
	else if (s.oom) {
		errno = ENOMEM;
		rc = -1;
	} else
		rc = s.n > 0;
	free(s.v);
	return rc;
}

bool
pol_redact_enabled(const struct pol_policy *p)
{
	return p != NULL && (p->nredact > 0 || p->nredact_re > 0);
}

/* What pol_redact_err and pol_redact_held share: the classes of mask,
 * and p's patterns when p is given. */
static int
redact(const struct pol_policy *p, unsigned mask, const char *const *secrets,
    size_t nsecrets, const char *text, size_t inlen, char **out,
    size_t *outlen, unsigned *count, char *err, size_t errlen)
{
	const unsigned char *in = (const unsigned char *)text;
	struct rd_spans	 s = { 0 };
	char		 dummy[1], *o;
	size_t		 i, k, total, prev, mlen;
	unsigned	 c = 0;

	if (err == NULL || errlen == 0) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (out != NULL)
		*out = NULL;
	if (out == NULL || (text == NULL && inlen > 0) ||
	    (secrets == NULL && nsecrets > 0)) {
		snprintf(err, errlen, "bad arguments");
		errno = EINVAL;
		return -1;
	}
	if (text == NULL)
		in = (const unsigned char *)"";
	if (mask & RB_AWS) {
		rd_scan_aws_ids(in, inlen, &s);
		rd_scan_aws_secrets(in, inlen, &s);
	}
	if (mask & RB_PRIVATE)
		rd_scan_pem(in, inlen, &s);
	if (mask & RB_BEARER)
		rd_scan_bearer(in, inlen, &s);
	if (mask & RB_GITHUB)
		rd_scan_github(in, inlen, &s);
	if ((mask & RB_UPSTREAM) &&
	    (rd_scan_secrets(secrets, nsecrets, in, inlen, &s) == -1 ||
	    rd_scan_unescaped(secrets, nsecrets, in, inlen, &s) == -1 ||
	    rd_scan_joined(secrets, nsecrets, in, inlen, &s) == -1 ||
	    rd_scan_dumps(secrets, nsecrets, in, inlen, &s) == -1))
		s.oom = true;
	if (!s.oom && p != NULL &&
	    rd_scan_patterns(p, in, inlen, &s, err, errlen) == -1) {
		free(s.v);
		return -1;
	}
	if (s.oom) {
		free(s.v);
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	if (s.n > 1)
		qsort(s.v, s.n, sizeof(*s.v), span_cmp);
	/* Merge overlapping spans in place; the first (widest) names it. */
	for (i = 0, k = 0; i < s.n; i++) {
		if (k > 0 && s.v[i].lo < s.v[k - 1].hi) {
			if (s.v[i].hi > s.v[k - 1].hi)
				s.v[k - 1].hi = s.v[i].hi;
		} else
			s.v[k++] = s.v[i];
	}
	s.n = k;
	/* Markers can be longer than what they replace: size it first. */
	total = inlen;
	for (i = 0; i < s.n; i++) {
		mlen = strlen(markers[s.v[i].cls]);
		total -= s.v[i].hi - s.v[i].lo;
		if (total > SIZE_MAX - 1 - mlen) {
			free(s.v);
			snprintf(err, errlen, "result too large");
			errno = EOVERFLOW;
			return -1;
		}
		total += mlen;
	}
	if ((o = malloc(total + 1)) == NULL) {
		free(s.v);
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	for (i = 0, prev = 0, k = 0; i < s.n; i++) {
		memcpy(o + k, in + prev, s.v[i].lo - prev);
		k += s.v[i].lo - prev;
		mlen = strlen(markers[s.v[i].cls]);
		memcpy(o + k, markers[s.v[i].cls], mlen);
		k += mlen;
		prev = s.v[i].hi;
		if (c < UINT_MAX)
			c++;
	}
	memcpy(o + k, in + prev, inlen - prev);
	k += inlen - prev;
	o[k] = '\0';
	free(s.v);
	*out = o;
	if (outlen != NULL)
		*outlen = k;
	if (count != NULL)
		*count = c;
	return 0;
}

int
pol_redact_err(const struct pol_policy *p, const char *const *secrets,
    size_t nsecrets, const char *text, size_t inlen, char **out,
    size_t *outlen, unsigned *count, char *err, size_t errlen)
{
	if (p == NULL) {
		if (out != NULL)
			*out = NULL;
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "bad arguments");
		errno = EINVAL;
		return -1;
	}
	return redact(p, enabled(p), secrets, nsecrets, text, inlen, out,
	    outlen, count, err, errlen);
}

int
pol_redact_held(const char *const *secrets, size_t nsecrets,
    const char *text, size_t inlen, char **out, size_t *outlen,
    unsigned *count)
{
	return redact(NULL, RB_UPSTREAM, secrets, nsecrets, text, inlen, out,
	    outlen, count, NULL, 0);
}

bool
pol_redacts_held(const struct pol_policy *p)
{
	return p != NULL && (enabled(p) & RB_UPSTREAM) != 0;
}

int
pol_redact(const struct pol_policy *p, const char *const *secrets,
    size_t nsecrets, const char *in, size_t inlen, char **out,
    size_t *outlen, unsigned *count)
{
	return pol_redact_err(p, secrets, nsecrets, in, inlen, out, outlen,
	    count, NULL, 0);
}

uint64_t
pol_result_max_bytes(const struct pol_policy *p)
{
	return p != NULL ? p->result_max_bytes : 0;
}

const char *
pol_taint_level(const struct pol_policy *p)
{
	/* No policy: the lowest level, so that every result taints. */
	if (p == NULL)
		return pol_class_names[0];
	return p->taint_level >= 0 ? pol_class_names[p->taint_level] : NULL;
}
