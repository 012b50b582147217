/*
 * redact_dump: held credentials in hex dumps.
 *
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
 *
 * A dump's layout (offsets, groups, a text column, runs of lines) is a
 * grammar of its own, read here apart from the encodings redact_held.c
 * searches, and the bytes it gives back are searched for all of them
 * (rd_scan_mapped).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/redact_int.h"

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

/* How many bytes line cur gave, as the offset of the line after it, nxt,
 * says (read as hex, else as octal): -1 when neither says a count of
 * bytes cur holds. */
static long long
dump_gave(const struct dump_line *cur, const struct dump_line *nxt)
{
	long long	 dx, d8;

	dx = cur->off >= 0 && nxt->off > cur->off ?
	    nxt->off - cur->off : -1;
	d8 = cur->off8 >= 0 && nxt->off8 > cur->off8 ?
	    nxt->off8 - cur->off8 : -1;
	return dx > 0 && dx <= (long long)cur->nbytes ? dx :
	    d8 > 0 && d8 <= (long long)cur->nbytes ? d8 : -1;
}

/* Groups of four digits may be 16-bit words in the host's order (hexdump
 * without -C, od -x): appends the run (d's bytes from start on) again,
 * after a NUL, each pair of bytes swapped, both spanning from their
 * group. -1 (ENOMEM, b and d freed) or 0. */
static int
dump_words(unsigned char **b, struct rd_declevel *d, size_t *cap,
    size_t start)
{
	size_t	 len = d->n - start, k;

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
	return 0;
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
	size_t		 i = 0, e, ni, prev, start;
	long long	 want;
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
				want = dump_gave(&cur, &nxt);
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
		if (words && dump_words(b, d, cap, start) == -1)
			return -1;
		(*b)[d->n] = '\0';
		d->lo[d->n] = d->hi[d->n] = 0;
		d->n++;
	}
	return 0;
}

int
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
