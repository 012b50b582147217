/*
 * canon_check: the verifier's hot path over canonical bytes -- a one-pass
 * check that accepts exactly what aud_canon_parse accepts without building
 * a tree, and lookups of members, strings and integers in bytes it checked.
 * Apart from the parser because the two must stay two independent
 * implementations that the tests hold against each other.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/priv.h"

/*
 * aud_canon_parse builds a tree and re-serialises it; for a log of millions
 * of records that costs more than the hashing. The checker below accepts
 * exactly the same buffers without building anything: every rule of the
 * serialiser is checked at the byte where it applies (sorted unique keys,
 * only the escapes the writer emits, minimal integers, raw UTF-8). The unit
 * suite check_audit_perf holds the two against each other on mutated
 * records, so a divergence is a test failure, not a silent hole.
 */

/* 1 for the bytes a key may hold: [a-z0-9_]. */
static const unsigned char keych[256] = {
	['0'] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	['_'] = 1,
	['a'] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1,
};

struct scanner {
	const unsigned char	*s;
	size_t			 n, i;
	char			*err;
	size_t			 errlen;
};

static int
sc_err(struct scanner *p, const char *what)
{
	aud_seterr(p->err, p->errlen, "offset %zu: %s", p->i, what);
	return -1;
}

static int
sc_string(struct scanner *p)
{
	const unsigned char *s = p->s;
	unsigned v;
	size_t l, i = p->i + 1, n = p->n;
	uint64_t w, q, b, t;
	int k;

	for (;;) {
		/* Eight bytes at a time while none is special: a quote, a
		 * backslash, a control byte or a non-ASCII byte. The lowest
		 * flagged byte is exact (borrows only run upwards), so the
		 * scan jumps straight to it. */
		while (n - i >= 8) {
			memcpy(&w, s + i, 8);
			q = w ^ 0x2222222222222222ULL;
			b = w ^ 0x5c5c5c5c5c5c5c5cULL;
			t = ((w - 0x2020202020202020ULL) | w |
			    (q - 0x0101010101010101ULL) |
			    (b - 0x0101010101010101ULL)) &
			    0x8080808080808080ULL;
			if (t != 0) {
				i += (size_t)__builtin_ctzll(t) >> 3;
				break;
			}
			i += 8;
		}
		while (i < n && aud_plain[s[i]])
			i++;
		p->i = i;
		if (p->i >= p->n)
			return sc_err(p, "unterminated string");
		if (s[p->i] == '"') {
			p->i++;
			return 0;
		}
		if (s[p->i] == '\\') {
			if (p->i + 1 >= p->n)
				return sc_err(p, "unterminated escape");
			switch (s[p->i + 1]) {
			case '"': case '\\': case 'b': case 'f': case 'n':
			case 'r': case 't':
				i = p->i += 2;
				continue;
			case 'u':
				break;
			default:
				return sc_err(p, "escape not in canonical form");
			}
			/* Only \u00xx, lowercase, for a C0 control with no
			 * short form; anything else is written raw. */
			if (p->n - p->i < 6 || s[p->i + 2] != '0' ||
			    s[p->i + 3] != '0')
				return sc_err(p, "\\u escape not in canonical form");
			for (v = 0, k = 4; k < 6; k++) {
				v <<= 4;
				if (s[p->i + k] >= '0' && s[p->i + k] <= '9')
					v |= (unsigned)(s[p->i + k] - '0');
				else if (s[p->i + k] >= 'a' && s[p->i + k] <= 'f')
					v |= (unsigned)(s[p->i + k] - 'a' + 10);
				else
					return sc_err(p, "\\u escape not in "
					    "canonical form");
			}
			if (v == 0 || v >= 0x20 || v == '\b' || v == '\f' ||
			    v == '\n' || v == '\r' || v == '\t')
				return sc_err(p, "\\u escape not in canonical "
				    "form");
			i = p->i += 6;
			continue;
		}
		if (s[p->i] < 0x20)
			return sc_err(p, "raw control character in string");
		if ((l = aud_utf8_len(s + p->i, p->n - p->i)) == 0)
			return sc_err(p, "invalid UTF-8");
		i = p->i += l;
	}
}

static int
sc_number(struct scanner *p)
{
	const unsigned char *s = p->s;
	long long v = 0;
	int neg = 0, digits = 0;

	if (s[p->i] == '-') {
		neg = 1;
		p->i++;
	}
	if (p->i >= p->n || s[p->i] < '0' || s[p->i] > '9')
		return sc_err(p, "bad number");
	if (s[p->i] == '0') {
		p->i++;
		if (neg)
			return sc_err(p, "-0 is not canonical");
		if (p->i < p->n && s[p->i] >= '0' && s[p->i] <= '9')
			return sc_err(p, "leading zero");
	} else {
		while (p->i < p->n && s[p->i] >= '0' && s[p->i] <= '9') {
			if (++digits > 16)
				return sc_err(p, "integer beyond ±(2^53-1)");
			v = v * 10 + (s[p->i] - '0');
			p->i++;
		}
		if (v > AUD_INT_MAX)
			return sc_err(p, "integer beyond ±(2^53-1)");
	}
	if (p->i < p->n && (s[p->i] == '.' || s[p->i] == 'e' ||
	    s[p->i] == 'E'))
		return sc_err(p, "floating-point numbers are not allowed");
	return 0;
}

static int
sc_add(struct aud_scan *sc, const char *k, size_t kl, const char *v,
    size_t vl)
{
	struct aud_member *nm;
	size_t ncap;

	if (sc->n == sc->cap) {
		ncap = sc->cap ? sc->cap * 2 : 32;
		if ((nm = realloc(sc->m, ncap * sizeof(*nm))) == NULL)
			return -1;
		sc->m = nm;
		sc->cap = ncap;
	}
	sc->m[sc->n].key = k;
	sc->m[sc->n].klen = kl;
	sc->m[sc->n].val = v;
	sc->m[sc->n].vlen = vl;
	sc->n++;
	return 0;
}

static int
sc_value(struct scanner *p, int depth, struct aud_scan *top)
{
	const unsigned char *s = p->s;
	size_t k0, kl, pk0 = 0, pkl = 0, v0, m, j;
	int c, first;

	if (depth > AUD_MAX_DEPTH)
		return sc_err(p, "nesting too deep");
	if (p->i >= p->n)
		return sc_err(p, "unexpected end");
	switch (s[p->i]) {
	case '{':
		p->i++;
		if (p->i < p->n && s[p->i] == '}') {
			p->i++;
			return 0;
		}
		for (first = 1;; first = 0) {
			if (p->i >= p->n || s[p->i] != '"')
				return sc_err(p, "expected key");
			k0 = ++p->i;
			while (p->i < p->n && keych[s[p->i]])
				p->i++;
			kl = p->i - k0;
			if (p->i >= p->n || s[p->i] != '"' || kl == 0)
				return sc_err(p, "key outside [a-z0-9_]");
			/* Strictly increasing bytewise: sorted, no dups. */
			if (!first) {
				/* Keys are short: a loop beats a call. */
				m = kl < pkl ? kl : pkl;
				for (j = 0; j < m && s[pk0 + j] == s[k0 + j];
				    j++)
					;
				c = j < m ? (int)s[pk0 + j] - (int)s[k0 + j] :
				    0;
				if (c > 0 || (c == 0 && pkl >= kl))
					return sc_err(p, "keys not sorted or "
					    "duplicated");
			}
			pk0 = k0;
			pkl = kl;
			p->i++;
			if (p->i >= p->n || s[p->i] != ':')
				return sc_err(p, "expected ':'");
			p->i++;
			v0 = p->i;
			if (sc_value(p, depth + 1, NULL) == -1)
				return -1;
			if (top != NULL && sc_add(top, (const char *)s + k0, kl,
			    (const char *)s + v0, p->i - v0) == -1)
				return sc_err(p, "out of memory");
			if (p->i < p->n && s[p->i] == ',') {
				p->i++;
				continue;
			}
			if (p->i < p->n && s[p->i] == '}') {
				p->i++;
				return 0;
			}
			return sc_err(p, "expected ',' or '}'");
		}
	case '[':
		p->i++;
		if (p->i < p->n && s[p->i] == ']') {
			p->i++;
			return 0;
		}
		for (;;) {
			if (sc_value(p, depth + 1, NULL) == -1)
				return -1;
			if (p->i < p->n && s[p->i] == ',') {
				p->i++;
				continue;
			}
			if (p->i < p->n && s[p->i] == ']') {
				p->i++;
				return 0;
			}
			return sc_err(p, "expected ',' or ']'");
		}
	case '"':
		return sc_string(p);
	case 't':
		if (p->n - p->i >= 4 && memcmp(s + p->i, "true", 4) == 0) {
			p->i += 4;
			return 0;
		}
		break;
	case 'f':
		if (p->n - p->i >= 5 && memcmp(s + p->i, "false", 5) == 0) {
			p->i += 5;
			return 0;
		}
		break;
	case 'n':
		if (p->n - p->i >= 4 && memcmp(s + p->i, "null", 4) == 0) {
			p->i += 4;
			return 0;
		}
		break;
	default:
		if (s[p->i] == '-' || (s[p->i] >= '0' && s[p->i] <= '9'))
			return sc_number(p);
	}
	return sc_err(p, "unexpected character");
}

int
aud_canon_check(const char *buf, size_t len, struct aud_scan *sc, char *err,
    size_t errlen)
{
	struct scanner p = { (const unsigned char *)buf, len, 0, err, errlen };
	int top;

	if (sc != NULL)
		sc->n = 0;
	if (buf == NULL || len > AUD_MAX_RECORD) {
		aud_seterr(err, errlen, "record missing or larger than %d "
		    "bytes", AUD_MAX_RECORD);
		errno = EINVAL;
		return -1;
	}
	top = len > 0 && buf[0] == '{';
	if (sc_value(&p, 0, top ? sc : NULL) == -1) {
		errno = EINVAL;
		return -1;
	}
	if (p.i != len) {
		aud_seterr(err, errlen, "offset %zu: trailing bytes", p.i);
		errno = EINVAL;
		return -1;
	}
	return 0;
}

void
aud_scan_free(struct aud_scan *sc)
{
	if (sc == NULL)
		return;
	free(sc->m);
	memset(sc, 0, sizeof(*sc));
}

/* Compares a key span with a C string bytewise. */
static int
keycmp(const char *k, size_t kl, const char *want)
{
	size_t wl = strlen(want), m = kl < wl ? kl : wl;
	int c = memcmp(k, want, m);

	return c != 0 ? c : (kl > wl) - (kl < wl);
}

const struct aud_member *
aud_scan_get(const struct aud_scan *sc, const char *key)
{
	size_t lo = 0, hi = sc->n, mid;
	int c;

	/* The checker guarantees the members are sorted. */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		c = keycmp(sc->m[mid].key, sc->m[mid].klen, key);
		if (c == 0)
			return &sc->m[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* End of the checked value starting at s[i]. */
static size_t
skip_value(const char *s, size_t n, size_t i)
{
	int depth = 0;

	do {
		switch (s[i]) {
		case '"':
			for (i++; i < n && s[i] != '"'; i++)
				if (s[i] == '\\')
					i++;
			i++;
			break;
		case '{': case '[':
			depth++;
			i++;
			break;
		case '}': case ']':
			depth--;
			i++;
			break;
		case ',': case ':':
			i++;
			break;
		default:
			while (i < n && s[i] != ',' && s[i] != '}' &&
			    s[i] != ']' && s[i] != ':')
				i++;
		}
	} while (depth > 0 && i < n);
	return i;
}

int
aud_cv_member(const char *obj, size_t len, const char *key,
    const char **val, size_t *vlen)
{
	size_t i = 1, k0, v0;
	int c;

	if (len < 2 || obj[0] != '{')
		return -1;
	while (i < len && obj[i] == '"') {
		k0 = ++i;
		while (obj[i] != '"')
			i++;
		c = keycmp(obj + k0, i - k0, key);
		v0 = i + 2;
		i = skip_value(obj, len, v0);
		if (c == 0) {
			*val = obj + v0;
			*vlen = i - v0;
			return 0;
		}
		if (c > 0 || i >= len || obj[i] != ',')
			break;
		i++;
	}
	return -1;
}

int
aud_cv_str(const char *val, size_t vlen, struct aud_strbuf *sb,
    const char **out, size_t *olen)
{
	static const char *const esc = "\"\\bfnrt", *const raw = "\"\\\b\f\n\r\t";
	const char *in, *e;
	size_t n, i, j;
	char *np;

	if (vlen < 2 || val[0] != '"')
		return -1;
	in = val + 1;
	n = vlen - 2;
	if (memchr(in, '\\', n) == NULL) {
		*out = in;
		*olen = n;
		return 0;
	}
	if (sb->cap < n + 1) {
		if ((np = realloc(sb->p, n + 1)) == NULL)
			return -1;
		sb->p = np;
		sb->cap = n + 1;
	}
	for (i = j = 0; i < n; i++) {
		if (in[i] != '\\') {
			sb->p[j++] = in[i];
			continue;
		}
		i++;
		if (in[i] == 'u') {
			/* Checked: \u00xx with lowercase hex. */
			sb->p[j++] = (char)(((in[i + 3] <= '9' ? in[i + 3] - '0' :
			    in[i + 3] - 'a' + 10) << 4) | (in[i + 4] <= '9' ?
			    in[i + 4] - '0' : in[i + 4] - 'a' + 10));
			i += 4;
		} else if ((e = strchr(esc, in[i])) != NULL)
			sb->p[j++] = raw[e - esc];
		else
			return -1;
	}
	sb->p[j] = '\0';
	*out = sb->p;
	*olen = j;
	return 0;
}

int
aud_cv_int(const char *val, size_t vlen, long long *out)
{
	long long v = 0;
	size_t i = 0;
	int neg = 0;

	if (vlen == 0)
		return -1;
	if (val[0] == '-') {
		neg = 1;
		i = 1;
	}
	if (i >= vlen || vlen - i > 16)
		return -1;
	for (; i < vlen; i++) {
		if (val[i] < '0' || val[i] > '9')
			return -1;
		v = v * 10 + (val[i] - '0');
	}
	*out = neg ? -v : v;
	return 0;
}
