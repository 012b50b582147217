/*
 * redact_wrap: held credentials in base64 wrapped over lines.
 *
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
 *
 * It is a finder of its own, apart from redact_held.c's forms: the join
 * is a decoding of the text's layout, not of the secret, and its result
 * is searched for all of those forms (rd_scan_mapped).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "policy/redact_int.h"

/* A character of either base64 alphabet, or padding. */
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

int
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
