/*
 * redact_unescape: held credentials behind escapes, undone level by level.
 *
 * redact_held.c searches the escapings of the JSON writers it knows; a
 * server can escape a credential any other way a string syntax allows (C
 * octal, \x, \u{...}, an HTML reference, a %-encoded letter) and one
 * character at a time, and escape the result again. Such forms cannot
 * all be listed, so here the text is decoded instead, a level at a time,
 * every decoded byte keeping the span of the original it came from, and
 * each level is searched for everything redact_held.c searches for.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/redact_int.h"

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

	if (rd_scan_secrets(secrets, nsecrets, d->b, d->n, &t) == -1)
		t.oom = true;
	else
		for (i = 0; i < nsecrets; i++)
			for (m = 1; m <= l; m++) {
				f = form_at(fs, i, m);
				if (f->b != NULL && f->n >= RD_FORM_MIN)
					rd_find_all(d->b, d->n,
					    (const char *)f->b, f->n, f->n,
					    NULL, &t);
			}
	return rd_map_spans(d, &t, s);
}

/* Could b hold an escape unesc1, unent1 or unpct1 undoes? */
static int
escapable(const unsigned char *b, size_t n)
{
	return memchr(b, '\\', n) != NULL || memchr(b, '&', n) != NULL ||
	    memchr(b, '%', n) != NULL;
}

int
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
