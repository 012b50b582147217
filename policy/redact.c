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
