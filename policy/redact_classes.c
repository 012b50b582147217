/*
 * redact_classes: the built-in redaction classes and the policy's patterns.
 *
 * Each class a policy can name in mcp.results.redact (aws_keys,
 * private_keys, bearer_tokens, github_tokens) is a hand-written scanner,
 * one linear pass over the result that knows the shape of its secret and
 * the contexts it is written in; mcp.results.redact_patterns adds the
 * policy's PCRE2 patterns, compiled by the loader and only matched here.
 * They live apart from the search for held credentials, which knows
 * exact bytes and looks for their encodings instead.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "policy/redact_int.h"

/* RFC 6750 b64token characters, plus '=' padding. */
static bool
is_token(unsigned char c)
{
	return rd_is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
	    c == '+' || c == '/' || c == '=';
}

/* ci_at: the lower-case ASCII word w at in[i], any case. */
static bool
ci_at(const unsigned char *in, size_t n, size_t i, const char *w)
{
	size_t	k;

	for (k = 0; w[k] != '\0'; k++)
		if (i + k >= n || rd_lower(in[i + k]) != (unsigned char)w[k])
			return false;
	return true;
}

static size_t
run(const unsigned char *in, size_t n, size_t i, bool (*cls)(unsigned char))
{
	size_t	j = i;

	while (j < n && cls(in[j]))
		j++;
	return j - i;
}

/* AWS access key ids: AKIA/ASIA and 16 of [A-Z0-9]. */
void
rd_scan_aws_ids(const unsigned char *in, size_t n, struct rd_spans *s)
{
	size_t	i = 0;

	while (i + 20 <= n) {
		if (in[i] == 'A' && (in[i + 1] == 'K' || in[i + 1] == 'S') &&
		    in[i + 2] == 'I' && in[i + 3] == 'A' &&
		    run(in, i + 20, i + 4, rd_is_upper_digit) == 16) {
			rd_span_add(s, i, i + 20, RC_AWS_KEY);
			i += 20;
		} else
			i++;
	}
}

/* sep: an optional '_' or '-' between the words of a key name. */
static size_t
sep(const unsigned char *in, size_t n, size_t j)
{
	return j < n && (in[j] == '_' || in[j] == '-') ? j + 1 : j;
}

/* aws_secret_kw: the end of "secret[_-]access[_-]key" or
 * "aws[_-]secret[_-]key" (any case) at i, or 0. */
static size_t
aws_secret_kw(const unsigned char *in, size_t n, size_t i)
{
	size_t	j = i;

	if (ci_at(in, n, j, "aws")) {
		j = sep(in, n, j + 3);
		if (!ci_at(in, n, j, "secret"))
			return 0;
		j = sep(in, n, j + 6);
		if (ci_at(in, n, j, "key"))
			return j + 3;
	} else if (ci_at(in, n, j, "secret"))
		j = sep(in, n, j + 6);
	else
		return 0;
	if (!ci_at(in, n, j, "access"))
		return 0;
	j = sep(in, n, j + 6);
	return ci_at(in, n, j, "key") ? j + 3 : 0;
}

static bool
is_quote_blank(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '"' || c == '\'' || c == '\\';
}

/* assign_value: after a key name at j, skip quotes, blanks and escapes
 * around one ':' or '=' (also "=>"), the forms of env files, INI, JSON,
 * YAML and code. The value's start, or 0 if there is no assignment. */
static size_t
assign_value(const unsigned char *in, size_t n, size_t j)
{
	size_t	k;

	for (k = 0; j < n && k < 8 && is_quote_blank(in[j]); k++)
		j++;
	if (j >= n || (in[j] != ':' && in[j] != '='))
		return 0;
	j++;
	if (j < n && ((in[j - 1] == ':' && in[j] == '=') ||
	    (in[j - 1] == '=' && in[j] == '>')))
		j++;
	for (k = 0; j < n && k < 8 && is_quote_blank(in[j]); k++)
		j++;
	return j < n ? j : 0;
}

/* AWS secret access keys in their named contexts: the key is 40 base64
 * characters with no marker of its own, so it is only found after its
 * name. Shorter runs (down to 16) are taken too: fail towards redacting. */
void
rd_scan_aws_secrets(const unsigned char *in, size_t n, struct rd_spans *s)
{
	size_t	i = 0, k, v, len;

	while (i < n) {
		unsigned char c = rd_lower(in[i]);

		if ((c != 'a' && c != 's') || (k = aws_secret_kw(in, n, i)) == 0 ||
		    (v = assign_value(in, n, k)) == 0) {
			i++;
			continue;
		}
		len = 0;
		while (v + len < n && (rd_is_b64(in[v + len]) ||
		    in[v + len] == '='))
			len++;
		if (len >= 16)
			rd_span_add(s, v, v + len, RC_AWS_SECRET);
		i = v + len > i ? v + len : i + 1;
	}
}

/* Whole PEM private key blocks, header to footer. A block without its
 * footer (a truncated result) is redacted to the end of the input; that
 * also keeps the scan linear, as no footer search runs twice over the
 * same bytes. */
void
rd_scan_pem(const unsigned char *in, size_t n, struct rd_spans *s)
{
	static const char begin[] = "-----BEGIN ";
	char		 foot[96], label[72];
	const unsigned char *h, *f;
	size_t		 pos = 0, l, ll, hend;

	while (pos < n && (h = memmem(in + pos, n - pos, begin,
	    sizeof(begin) - 1)) != NULL) {
		l = (size_t)(h - in) + sizeof(begin) - 1;
		ll = 0;
		while (l + ll < n && ll < 64 &&
		    (rd_is_upper_digit(in[l + ll]) || in[l + ll] == ' '))
			ll++;
		pos = l;
		if (ll == 0 || l + ll + 5 > n ||
		    memcmp(in + l + ll, "-----", 5) != 0)
			continue;
		memcpy(label, in + l, ll);
		label[ll] = '\0';
		if (strstr(label, "PRIVATE KEY") == NULL)
			continue;
		hend = l + ll + 5;
		snprintf(foot, sizeof(foot), "-----END %s-----", label);
		f = memmem(in + hend, n - hend, foot, strlen(foot));
		if (f == NULL) {
			rd_span_add(s, (size_t)(h - in), n, RC_PRIVATE_KEY);
			return;
		}
		pos = (size_t)(f - in) + strlen(foot);
		rd_span_add(s, (size_t)(h - in), pos, RC_PRIVATE_KEY);
	}
}

/* "Bearer <token>", "Authorization: <value>" (also Proxy-Authorization,
 * header or JSON or env form), and JWT-looking eyJ... tokens. */
void
rd_scan_bearer(const unsigned char *in, size_t n, struct rd_spans *s)
{
	size_t	i, j, v, len;

	for (i = 0; i < n; i++) {
		unsigned char c = rd_lower(in[i]);

		if (c == 'b' && (i == 0 || !rd_is_alnum(in[i - 1])) &&
		    ci_at(in, n, i, "bearer")) {
			j = i + 6;
			while (j < n && j < i + 14 && (in[j] == ' ' ||
			    in[j] == '\t'))
				j++;
			if (j > i + 6 && (len = run(in, n, j, is_token)) > 0) {
				rd_span_add(s, j, j + len, RC_BEARER);
				i = j + len - 1;
			}
		} else if (c == 'a' && (i == 0 || !rd_is_alnum(in[i - 1])) &&
		    ci_at(in, n, i, "authorization") &&
		    (v = assign_value(in, n, i + 13)) != 0) {
			/* The value runs to the end of the line or string. */
			for (j = v; j < n && in[j] != '"' && in[j] != '\'' &&
			    in[j] != '\r' && in[j] != '\n' && in[j] != '\\';
			    j++)
				;
			rd_span_add(s, v, j, RC_BEARER);
			/* Past the value: a long line is scanned once. */
			if (j > i + 1)
				i = j - 1;
		} else if (in[i] == 'e' && i + 3 < n && in[i + 1] == 'y' &&
		    in[i + 2] == 'J' && (i == 0 || !rd_is_b64url(in[i - 1]))) {
			/* header.payload.signature, the signature may be empty
			 * (alg none); JWE has more parts. */
			j = i + run(in, n, i, rd_is_b64url);
			if (j - i < 4 || j >= n || in[j] != '.' ||
			    (len = run(in, n, j + 1, rd_is_b64url)) == 0 ||
			    j + 1 + len >= n || in[j + 1 + len] != '.')
				continue;
			j += 1 + len;
			while (j < n && in[j] == '.')
				j += 1 + run(in, n, j + 1, rd_is_b64url);
			rd_span_add(s, i, j, RC_JWT);
			i = j - 1;
		}
	}
}

/* GitHub tokens: gh[pousr]_ and 36+ alphanumerics, github_pat_ and 22+. */
void
rd_scan_github(const unsigned char *in, size_t n, struct rd_spans *s)
{
	size_t	i = 0, len;

	while (i + 4 <= n) {
		if (in[i] == 'g' && in[i + 1] == 'h' && in[i + 3] == '_' &&
		    strchr("pousr", in[i + 2]) != NULL && in[i + 2] != '\0' &&
		    (len = run(in, n, i + 4, rd_is_alnum)) >= 36) {
			rd_span_add(s, i, i + 4 + len, RC_GITHUB);
			i += 4 + len;
		} else if (in[i] == 'g' && i + 11 <= n &&
		    memcmp(in + i, "github_pat_", 11) == 0 &&
		    (len = run(in, n, i + 11, rd_is_b64url)) >= 22) {
			rd_span_add(s, i, i + 11 + len, RC_GITHUB);
			i += 11 + len;
		} else
			i++;
	}
}

int
rd_scan_patterns(const struct pol_policy *p, const unsigned char *in, size_t n,
    struct rd_spans *s, char *err, size_t errlen)
{
	pcre2_match_data *md;
	PCRE2_SIZE	*ov;
	PCRE2_UCHAR	 msg[120];
	size_t		 i, off, lo, hi;
	uint32_t	 opts;
	int		 rc;

	for (i = 0; i < p->nredact_re; i++) {
		if ((md = pcre2_match_data_create_from_pattern(p->redact_re[i],
		    NULL)) == NULL) {
			snprintf(err, errlen, "out of memory");
			errno = ENOMEM;
			return -1;
		}
		/* The first match validates the whole subject as UTF-8; later
		 * ones skip that, or a result with many matches would be
		 * checked again per match (quadratic). */
		opts = 0;
		off = 0;
		for (;;) {
			rc = pcre2_match(p->redact_re[i], in, n, off, opts, md,
			    p->mctx);
			if (rc == PCRE2_ERROR_NOMATCH)
				break;
			if (rc < 0) {
				pcre2_get_error_message(rc, msg, sizeof(msg));
				snprintf(err, errlen, "mcp.results.redact_"
				    "patterns[%zu]: %s", i, (char *)msg);
				pcre2_match_data_free(md);
				errno = EINVAL;
				return -1;
			}
			opts = PCRE2_NO_UTF_CHECK;
			ov = pcre2_get_ovector_pointer(md);
			lo = ov[0];
			hi = ov[1];
			if (hi > lo)
				rd_span_add(s, lo, hi, RC_PATTERN);
			if (hi > off && hi > lo)
				off = hi;
			else {
				/* Empty match: step one character, never into
				 * the middle of a UTF-8 sequence. */
				off = (hi > off ? hi : off) + 1;
				while (off < n && (in[off] & 0xc0) == 0x80)
					off++;
			}
			if (off > n)
				break;
		}
		pcre2_match_data_free(md);
	}
	return 0;
}
