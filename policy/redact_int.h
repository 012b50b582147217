/*
 * redact_int: what the policy/redact*.c files share and nobody else sees.
 *
 * Redaction is one module (pol_redact and its kin in policy.h) split into
 * files by concern: the entry points and the span merge (redact.c), the
 * built-in classes and patterns (redact_classes.c), the held credentials
 * and their encoded forms (redact_held.c), escapes undone level by level
 * (redact_unescape.c), wrapped base64 (redact_wrap.c) and hex dumps
 * (redact_dump.c). Every finder reports what it found the same way, as
 * spans of the original text with the class that names their marker;
 * this header is that common language.
 */
#ifndef SLUICE_POLICY_REDACT_INT_H
#define SLUICE_POLICY_REDACT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/internal.h"

/* What a match is, which names its marker (redact.c's markers[]). */
enum rd_class {
	RC_AWS_KEY = 0,
	RC_AWS_SECRET,
	RC_PRIVATE_KEY,
	RC_BEARER,
	RC_JWT,
	RC_GITHUB,
	RC_PATTERN,
	RC_CREDENTIAL,
};

/* A match: in[lo..hi) of the text searched. */
struct rd_span {
	size_t	lo, hi;
	int	cls;
};

struct rd_spans {
	struct rd_span	*v;
	size_t		 n, cap;
	bool		 oom;
};

/* rd_span_add: [lo, hi) of class cls onto s; an empty span is dropped. A
 * failed allocation sets s->oom, and every later add is then a no-op: the
 * finders carry on and the caller fails the whole call once, at the end. */
void	 rd_span_add(struct rd_spans *s, size_t lo, size_t hi, int cls);

/* Character classes, ASCII only: a match never starts or ends inside a
 * multi-byte UTF-8 sequence, so redacting cannot break the encoding.
 * Every finder tests bytes against them, most byte by byte over a whole
 * result: static inline, so that each file gets them without a call. */
static inline bool
rd_is_upper_digit(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static inline bool
rd_is_alnum(unsigned char c)
{
	return rd_is_upper_digit(c) || (c >= 'a' && c <= 'z');
}

static inline bool
rd_is_b64(unsigned char c)
{
	return rd_is_alnum(c) || c == '+' || c == '/';
}

static inline bool
rd_is_b64url(unsigned char c)
{
	return rd_is_alnum(c) || c == '-' || c == '_';
}

static inline unsigned char
rd_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* The value of hex digit c (either case), or -1. */
static inline int
rd_hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = rd_lower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* --------------------------------------------- redact_classes.c */

/* The built-in classes, each one linear pass over in[0..n) adding the
 * spans it finds to s (see pol_redact's table in policy.h). */
void	 rd_scan_aws_ids(const unsigned char *in, size_t n,
	    struct rd_spans *s);
void	 rd_scan_aws_secrets(const unsigned char *in, size_t n,
	    struct rd_spans *s);
void	 rd_scan_pem(const unsigned char *in, size_t n, struct rd_spans *s);
void	 rd_scan_bearer(const unsigned char *in, size_t n,
	    struct rd_spans *s);
void	 rd_scan_github(const unsigned char *in, size_t n,
	    struct rd_spans *s);
/* rd_scan_patterns: every non-empty match of p's redact_patterns, under
 * p's match limits. -1 with errno (ENOMEM, or EINVAL for a matching
 * error: a hit limit, in not UTF-8) and the reason in err, or 0. */
int	 rd_scan_patterns(const struct pol_policy *p,
	    const unsigned char *in, size_t n, struct rd_spans *s, char *err,
	    size_t errlen);

/* ------------------------------------------------ redact_held.c */

/* Encoded forms shorter than this would match where no secret is. */
#define RD_FORM_MIN	6

/* A text decoded from the one searched (escapes undone, wrapped lines
 * joined, a hex dump's bytes), each byte with its span in that original,
 * so that a match in it redacts the original where it stands. lo NULL:
 * b is the original itself, not owned. */
struct rd_declevel {
	const unsigned char *b;		/* the unescaped bytes */
	uint32_t	*lo, *hi;	/* each one's span in the original */
	size_t		 n;
};

/* rd_scan_secrets: every non-empty secret raw, and those of 6 bytes or
 * more in each encoded form (redact_held.c), as RC_CREDENTIAL spans of
 * in. -1 (ENOMEM) or 0. */
int	 rd_scan_secrets(const char *const *secrets, size_t nsecrets,
	    const unsigned char *in, size_t n, struct rd_spans *s);
/* rd_find_all: every occurrence of f in in as an RC_CREDENTIAL span, the
 * first fixed bytes of f searched; alpha (NULL for none) the base64
 * alphabet a match extends over, up to flen bytes and '=' padding. */
void	 rd_find_all(const unsigned char *in, size_t n, const char *f,
	    size_t flen, size_t fixed, const char *alpha, struct rd_spans *s);
/* rd_scan_mapped: rd_scan_secrets over d's bytes, each match added to s
 * as the span of the original it came from. -1 (ENOMEM) or 0; d stays
 * the caller's. */
int	 rd_scan_mapped(const char *const *secrets, size_t nsecrets,
	    const struct rd_declevel *d, struct rd_spans *s);
/* rd_map_spans: adds each span of t (found in d's bytes) to s as the span
 * of the original it came from, and frees t's. -1 (ENOMEM) when t ran
 * out of memory, else 0. */
int	 rd_map_spans(const struct rd_declevel *d, struct rd_spans *t,
	    struct rd_spans *s);
/* rd_declevel_free: frees what d owns (not d; not b when lo is NULL). */
void	 rd_declevel_free(struct rd_declevel *d);

/* -------------------------------------------- redact_unescape.c */

/* rd_scan_unescaped: the held credentials in every level of in unescaped
 * (up to DEC_LEVELS deep), as spans of in. -1 (ENOMEM, EOVERFLOW for a
 * text too long for the 32-bit spans of a level) or 0. */
int	 rd_scan_unescaped(const char *const *secrets, size_t nsecrets,
	    const unsigned char *in, size_t n, struct rd_spans *s);

/* ------------------------------------------------ redact_wrap.c */

/* rd_scan_joined: the held credentials in in with the line breaks that
 * wrap base64 read through, as spans of in. -1 (ENOMEM, EOVERFLOW) or 0. */
int	 rd_scan_joined(const char *const *secrets, size_t nsecrets,
	    const unsigned char *in, size_t n, struct rd_spans *s);

/* ------------------------------------------------ redact_dump.c */

/* rd_scan_dumps: the held credentials in the bytes of every hex dump in
 * in, each match as a span from its first hex digit to the end of the
 * line of its last byte. -1 (ENOMEM, EOVERFLOW) or 0. */
int	 rd_scan_dumps(const char *const *secrets, size_t nsecrets,
	    const unsigned char *in, size_t n, struct rd_spans *s);

#endif /* SLUICE_POLICY_REDACT_INT_H */
