/*
 * redact: take secrets out of tool results before the sandbox sees them.
 *
 * The capability bridge holds upstream credentials and forwards results
 * written by upstream servers, which can echo anything: a cloud key read
 * from a file, a PEM block, the Authorization header the bridge itself
 * injected. A policy's mcp.results.redact names built-in classes and
 * mcp.results.redact_patterns adds PCRE2 patterns; redaction finds every
 * match and replaces it with a fixed marker. It is pure (no I/O, no clock,
 * no globals) and scans each class in one linear pass, so redaction costs
 * the same on every call and can be tested with tables. Patterns were
 * compiled by the loader; only their matching happens here, under the
 * policy's match limits, and any matching error fails the whole call:
 * the caller must then withhold the result rather than pass it unredacted.
 *
 * This file holds the entry points: which finders a call runs, then the
 * merge of the spans they found and the writing of the markers. The
 * finders are in the other redact_*.c files (redact_int.h lists them), so
 * that what a call does can be read here in one place.
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

/* Every form of the held credentials in in, by each finder in turn: raw
 * and encoded, behind escapes, wrapped, in hex dumps. -1 with errno or 0. */
static int
scan_held(const char *const *secrets, size_t nsecrets,
    const unsigned char *in, size_t n, struct rd_spans *s)
{
	if (rd_scan_secrets(secrets, nsecrets, in, n, s) == -1 ||
	    rd_scan_unescaped(secrets, nsecrets, in, n, s) == -1 ||
	    rd_scan_joined(secrets, nsecrets, in, n, s) == -1 ||
	    rd_scan_dumps(secrets, nsecrets, in, n, s) == -1)
		return -1;
	return 0;
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
	if (scan_held(secrets, nsecrets, in, len, &s) == -1)
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

/* The spans of the matches in in[0..n) of the classes of mask, and of p's
 * patterns when p is given, into s (the caller frees s->v whatever the
 * result). 0, or -1 with errno and the reason in err. */
static int
find_spans(const struct pol_policy *p, unsigned mask,
    const char *const *secrets, size_t nsecrets, const unsigned char *in,
    size_t n, struct rd_spans *s, char *err, size_t errlen)
{
	if (mask & RB_AWS) {
		rd_scan_aws_ids(in, n, s);
		rd_scan_aws_secrets(in, n, s);
	}
	if (mask & RB_PRIVATE)
		rd_scan_pem(in, n, s);
	if (mask & RB_BEARER)
		rd_scan_bearer(in, n, s);
	if (mask & RB_GITHUB)
		rd_scan_github(in, n, s);
	if ((mask & RB_UPSTREAM) &&
	    scan_held(secrets, nsecrets, in, n, s) == -1)
		s->oom = true;
	if (!s->oom && p != NULL &&
	    rd_scan_patterns(p, in, n, s, err, errlen) == -1)
		return -1;
	if (s->oom) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* Sorts s and merges overlapping spans in place; the first (widest) names
 * the merged one. */
static void
merge_spans(struct rd_spans *s)
{
	size_t	i, k;

	if (s->n > 1)
		qsort(s->v, s->n, sizeof(*s->v), span_cmp);
	for (i = 0, k = 0; i < s->n; i++) {
		if (k > 0 && s->v[i].lo < s->v[k - 1].hi) {
			if (s->v[i].hi > s->v[k - 1].hi)
				s->v[k - 1].hi = s->v[i].hi;
		} else
			s->v[k++] = s->v[i];
	}
	s->n = k;
}

/* in[0..inlen) with each span of s (sorted, disjoint) replaced by the
 * marker of its class, as pol_redact returns it in *out, *outlen and
 * *count. 0, or -1 with errno and the reason in err. */
static int
write_markers(const unsigned char *in, size_t inlen,
    const struct rd_spans *s, char **out, size_t *outlen, unsigned *count,
    char *err, size_t errlen)
{
	char		*o;
	size_t		 i, k, total, prev, mlen;
	unsigned	 c = 0;

	/* Markers can be longer than what they replace: size it first. */
	total = inlen;
	for (i = 0; i < s->n; i++) {
		mlen = strlen(markers[s->v[i].cls]);
		total -= s->v[i].hi - s->v[i].lo;
		if (total > SIZE_MAX - 1 - mlen) {
			snprintf(err, errlen, "result too large");
			errno = EOVERFLOW;
			return -1;
		}
		total += mlen;
	}
	if ((o = malloc(total + 1)) == NULL) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	for (i = 0, prev = 0, k = 0; i < s->n; i++) {
		memcpy(o + k, in + prev, s->v[i].lo - prev);
		k += s->v[i].lo - prev;
		mlen = strlen(markers[s->v[i].cls]);
		memcpy(o + k, markers[s->v[i].cls], mlen);
		k += mlen;
		prev = s->v[i].hi;
		if (c < UINT_MAX)
			c++;
	}
	memcpy(o + k, in + prev, inlen - prev);
	k += inlen - prev;
	o[k] = '\0';
	*out = o;
	if (outlen != NULL)
		*outlen = k;
	if (count != NULL)
		*count = c;
	return 0;
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
	char		 dummy[1];
	int		 rc = -1;

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
	if (find_spans(p, mask, secrets, nsecrets, in, inlen, &s, err,
	    errlen) == 0) {
		merge_spans(&s);
		rc = write_markers(in, inlen, &s, out, outlen, count, err,
		    errlen);
	}
	/* free keeps errno (POSIX.1-2024; glibc since 2.33). */
	free(s.v);
	return rc;
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
