/*
 * canon: the byte form of a record. A record is evidence only if everyone
 * derives the same bytes from it, so the writer emits a restricted RFC 8785
 * (JCS) subset -- objects, arrays, strings, integers within ±(2^53-1),
 * true/false/null, keys [a-z0-9_] sorted bytewise, no whitespace, minimal
 * escapes -- and the verifier's parser accepts a buffer only if re-serialising
 * what it denotes gives the very same bytes (reference/audit.md §3.3).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/priv.h"

struct buf {
	char	*p;
	size_t	 len, cap;
	int	 oom;
	int	 borrowed;	/* p is the caller's storage, not malloc'd */
};

static void
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int
buf_grow(struct buf *b, size_t n)
{
	size_t ncap;
	char *np;

	if (b->oom)
		return -1;
	ncap = b->cap ? b->cap : 512;
	while (ncap < b->len + n + 1)
		ncap *= 2;
	if (b->borrowed) {
		if ((np = malloc(ncap)) == NULL) {
			b->oom = 1;
			return -1;
		}
		memcpy(np, b->p, b->len);
		b->borrowed = 0;
	} else if ((np = realloc(b->p, ncap)) == NULL) {
		b->oom = 1;
		return -1;
	}
	b->p = np;
	b->cap = ncap;
	return 0;
}

/* Appends without terminating: callers NUL-terminate once at the end. */
static inline void
buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap && buf_grow(b, n) == -1)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static inline void
buf_c(struct buf *b, char c)
{
	if (b->len + 2 > b->cap && buf_grow(b, 1) == -1)
		return;
	b->p[b->len++] = c;
}

static void
buf_nul(struct buf *b)
{
	if (b->len + 1 > b->cap && buf_grow(b, 0) == -1)
		return;
	b->p[b->len] = '\0';
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t
utf8_len(const unsigned char *s, size_t avail)
{
	unsigned c = s[0];
	size_t n, i;
	unsigned cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else
		return 0;
	if (avail < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and beyond U+10FFFF are not text. */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

static int
key_ok(const char *k, size_t n)
{
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (!((k[i] >= 'a' && k[i] <= 'z') ||
		    (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
			return 0;
	return 1;
}

/* 1 for the bytes a string may carry raw: printable ASCII but '"', '\'. */
static const unsigned char plain[256] = {
#define P4	1, 1, 1, 1
#define P16	P4, P4, P4, P4
	[0x20] = 1, 1, 0, 1, P4, P4, P4,	/* '"' */
	[0x30] = P16, P16,
	[0x50] = P4, P4, P4, 0, 1, 1, 1,	/* '\\' */
	[0x60] = P16, P16,
#undef P16
#undef P4
};

static int
dump_string(struct buf *b, const char *s, size_t n, char *err, size_t errlen)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run, l;
	char esc[7];

	while (i < n) {
		/* Plain ASCII runs are the common case: copy them whole. */
		for (run = i; run < n && plain[u[run]]; run++)
			;
		if (run > i) {
			buf_add(b, s + i, run - i);
			i = run;
			if (i == n)
				break;
		}
		if (u[i] == 0) {
			seterr(err, errlen, "string contains NUL");
			return -1;
		}
		if (u[i] < 0x20) {
			switch (u[i]) {
			case '\b': buf_add(b, "\\b", 2); break;
			case '\f': buf_add(b, "\\f", 2); break;
			case '\n': buf_add(b, "\\n", 2); break;
			case '\r': buf_add(b, "\\r", 2); break;
			case '\t': buf_add(b, "\\t", 2); break;
			default:
				memcpy(esc, "\\u00", 4);
				esc[4] = hex[u[i] >> 4];
				esc[5] = hex[u[i] & 15];
				buf_add(b, esc, 6);
			}
			i++;
			continue;
		}
		if (u[i] == '"' || u[i] == '\\') {
			esc[0] = '\\';
			esc[1] = (char)u[i];
			buf_add(b, esc, 2);
			i++;
			continue;
		}
		if ((l = utf8_len(u + i, n - i)) == 0) {
			seterr(err, errlen, "string is not valid UTF-8");
			return -1;
		}
		buf_add(b, s + i, l);
		i += l;
	}
	return 0;
}

struct kv {
	const char	*k;
	size_t		 kl;
	json_t		*v;
};

static int
cmpkv(const void *a, const void *b)
{
	return strcmp(((const struct kv *)a)->k, ((const struct kv *)b)->k);
}

/* Records kept for aud_canon_members: where each top-level member starts. */
struct mrec {
	size_t	*start;
	size_t	 n;
};

static int dump_value(struct buf *, const json_t *, int, char *, size_t);

static int
dump_object(struct buf *b, const json_t *v, int depth, struct mrec *mr,
    char *err, size_t errlen)
{
	struct kv small[16], *kv, t;
	const char *k;
	size_t kl, i, j, n;
	json_t *m;
	int rc = -1;

	n = json_object_size(v);
	kv = small;
	if (n > sizeof(small) / sizeof(small[0]) &&
	    (kv = malloc(n * sizeof(*kv))) == NULL) {
		b->oom = 1;
		seterr(err, errlen, "out of memory");
		return -1;
	}
	i = 0;
	/* The value comes with the key: no second hash lookup per member;
	 * key lengths catch keys with an embedded NUL. */
	json_object_keylen_foreach((json_t *)v, k, kl, m) {
		if (i == n)
			break;
		if (!key_ok(k, kl)) {
			seterr(err, errlen, "key \"%.40s\" outside [a-z0-9_]", k);
			goto out;
		}
		kv[i].k = k;
		kv[i].kl = kl;
		kv[i].v = m;
		i++;
	}
	n = i;
	if (n <= 16) {
		for (i = 1; i < n; i++) {
			t = kv[i];
			for (j = i; j > 0 && strcmp(kv[j - 1].k, t.k) > 0; j--)
				kv[j] = kv[j - 1];
			kv[j] = t;
		}
	} else
		qsort(kv, n, sizeof(*kv), cmpkv);
	buf_c(b, '{');
	for (i = 0; i < n; i++) {
		if (i > 0)
			buf_c(b, ',');
		if (mr != NULL)
			mr->start[mr->n++] = b->len;
		buf_c(b, '"');
		buf_add(b, kv[i].k, kv[i].kl);
		buf_add(b, "\":", 2);
		if (dump_value(b, kv[i].v, depth + 1, err, errlen) == -1)
			goto out;
	}
	buf_c(b, '}');
	rc = 0;
out:
	if (kv != small)
		free(kv);
	return rc;
}

static int
dump_value(struct buf *b, const json_t *v, int depth, char *err, size_t errlen)
{
	size_t i, n;
	json_int_t iv;
	char num[32];
	int len;

	if (depth > AUD_MAX_DEPTH) {
		seterr(err, errlen, "nesting deeper than %d", AUD_MAX_DEPTH);
		return -1;
	}
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return dump_object(b, v, depth, NULL, err, errlen);
	case JSON_ARRAY:
		buf_c(b, '[');
		n = json_array_size(v);
		for (i = 0; i < n; i++) {
			if (i > 0)
				buf_c(b, ',');
			if (dump_value(b, json_array_get(v, i), depth + 1, err,
			    errlen) == -1)
				return -1;
		}
		buf_c(b, ']');
		return 0;
	case JSON_STRING:
		buf_c(b, '"');
		if (dump_string(b, json_string_value(v), json_string_length(v),
		    err, errlen) == -1)
			return -1;
		buf_c(b, '"');
		return 0;
	case JSON_INTEGER:
		iv = json_integer_value(v);
		if (iv > AUD_INT_MAX || iv < -AUD_INT_MAX) {
			seterr(err, errlen, "integer beyond ±(2^53-1)");
			return -1;
		}
		len = snprintf(num, sizeof(num), "%lld", (long long)iv);
		buf_add(b, num, (size_t)len);
		return 0;
	case JSON_REAL:
		seterr(err, errlen, "floating-point numbers are not allowed");
		return -1;
	case JSON_TRUE:
		buf_add(b, "true", 4);
		return 0;
	case JSON_FALSE:
		buf_add(b, "false", 5);
		return 0;
	case JSON_NULL:
		buf_add(b, "null", 4);
		return 0;
	}
	seterr(err, errlen, "unknown JSON type");
	return -1;
}

char *
aud_canon_dump(const json_t *v, size_t *lenp, char *err, size_t errlen)
{
	struct buf b = { 0 };

	if (v == NULL) {
		seterr(err, errlen, "no value");
		errno = EINVAL;
		return NULL;
	}
	if (dump_value(&b, v, 0, err, errlen) == -1 || b.oom) {
		if (b.oom) {
			seterr(err, errlen, "out of memory");
			errno = ENOMEM;
		} else
			errno = EINVAL;
		free(b.p);
		return NULL;
	}
	buf_nul(&b);
	if (b.oom) {
		free(b.p);
		errno = ENOMEM;
		return NULL;
	}
	if (lenp != NULL)
		*lenp = b.len;
	return b.p;
}

int
aud_canon_members(const json_t *obj, struct aud_members *m, char *err,
    size_t errlen)
{
	struct buf b = { 0 };
	struct mrec mr;
	size_t n;

	m->buf = NULL;
	m->start = NULL;
	m->len = m->n = 0;
	if (!json_is_object(obj)) {
		seterr(err, errlen, "not an object");
		errno = EINVAL;
		return -1;
	}
	/* The caller's storage first: the common record needs no malloc. */
	n = json_object_size(obj);
	if (n <= AUD_MEMBERS_INLINE)
		mr.start = m->istart;
	else if ((mr.start = malloc(n * sizeof(*mr.start))) == NULL) {
		seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	mr.n = 0;
	b.p = m->ibuf;
	b.cap = sizeof(m->ibuf);
	b.borrowed = 1;
	if (dump_object(&b, obj, 0, &mr, err, errlen) == 0) {
		buf_nul(&b);
		if (!b.oom) {
			m->buf = b.p;
			m->len = b.len;
			m->start = mr.start;
			m->n = mr.n;
			return 0;
		}
	}
	if (b.oom) {
		seterr(err, errlen, "out of memory");
		errno = ENOMEM;
	} else
		errno = EINVAL;
	if (!b.borrowed)
		free(b.p);
	if (mr.start != m->istart)
		free(mr.start);
	return -1;
}

void
aud_members_free(struct aud_members *m)
{
	if (m == NULL)
		return;
	if (m->buf != m->ibuf)
		free(m->buf);
	if (m->start != m->istart)
		free(m->start);
	m->buf = NULL;
	m->start = NULL;
}

/* ---- strict parser ---- */

struct parser {
	const char	*s;
	size_t		 n, i;
	char		*err;
	size_t		 errlen;
};

static json_t *parse_value(struct parser *p, int depth);

static int
perr(struct parser *p, const char *what)
{
	seterr(p->err, p->errlen, "offset %zu: %s", p->i, what);
	return -1;
}

static int
hex4(struct parser *p, unsigned *out)
{
	unsigned v = 0;
	int i;
	char c;

	if (p->n - p->i < 4)
		return perr(p, "short \\u escape");
	for (i = 0; i < 4; i++) {
		c = p->s[p->i++];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return perr(p, "bad hex digit in \\u escape");
	}
	*out = v;
	return 0;
}

/* Parses a string at p->i (after the quote) into a malloc'd buffer. */
static char *
parse_string(struct parser *p, size_t *outlen)
{
	struct buf b = { 0 };
	unsigned cp, lo;
	size_t l;
	char enc[4], c;

	for (;;) {
		if (p->i >= p->n) {
			perr(p, "unterminated string");
			goto fail;
		}
		c = p->s[p->i];
		if (c == '"') {
			p->i++;
			break;
		}
		if ((unsigned char)c < 0x20) {
			perr(p, "raw control character in string");
			goto fail;
		}
		if (c != '\\') {
			l = utf8_len((const unsigned char *)p->s + p->i,
			    p->n - p->i);
			if (l == 0) {
				perr(p, "invalid UTF-8");
				goto fail;
			}
			buf_add(&b, p->s + p->i, l);
			p->i += l;
			continue;
		}
		if (++p->i >= p->n) {
			perr(p, "unterminated escape");
			goto fail;
		}
		c = p->s[p->i++];
		switch (c) {
		case '"': buf_add(&b, "\"", 1); continue;
		case '\\': buf_add(&b, "\\", 1); continue;
		case '/': buf_add(&b, "/", 1); continue;
		case 'b': buf_add(&b, "\b", 1); continue;
		case 'f': buf_add(&b, "\f", 1); continue;
		case 'n': buf_add(&b, "\n", 1); continue;
		case 'r': buf_add(&b, "\r", 1); continue;
		case 't': buf_add(&b, "\t", 1); continue;
		case 'u': break;
		default:
			perr(p, "bad escape");
			goto fail;
		}
		if (hex4(p, &cp) == -1)
			goto fail;
		if (cp >= 0xdc00 && cp <= 0xdfff) {
			perr(p, "lone low surrogate");
			goto fail;
		}
		if (cp >= 0xd800 && cp <= 0xdbff) {
			if (p->n - p->i < 6 || p->s[p->i] != '\\' ||
			    p->s[p->i + 1] != 'u') {
				perr(p, "lone high surrogate");
				goto fail;
			}
			p->i += 2;
			if (hex4(p, &lo) == -1)
				goto fail;
			if (lo < 0xdc00 || lo > 0xdfff) {
				perr(p, "lone high surrogate");
				goto fail;
			}
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		}
		if (cp == 0) {
			perr(p, "NUL in string");
			goto fail;
		}
		if (cp < 0x80) {
			enc[0] = (char)cp;
			l = 1;
		} else if (cp < 0x800) {
			enc[0] = (char)(0xc0 | (cp >> 6));
			enc[1] = (char)(0x80 | (cp & 0x3f));
			l = 2;
		} else if (cp < 0x10000) {
			enc[0] = (char)(0xe0 | (cp >> 12));
			enc[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
			enc[2] = (char)(0x80 | (cp & 0x3f));
			l = 3;
		} else {
			enc[0] = (char)(0xf0 | (cp >> 18));
			enc[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
			enc[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
			enc[3] = (char)(0x80 | (cp & 0x3f));
			l = 4;
		}
		buf_add(&b, enc, l);
	}
	buf_nul(&b);
	if (b.oom) {
		perr(p, "out of memory");
		goto fail;
	}
	*outlen = b.len;
	return b.p;
fail:
	free(b.p);
	return NULL;
}

static json_t *
parse_number(struct parser *p)
{
	long long v = 0;
	int neg = 0, digits = 0;

	if (p->s[p->i] == '-') {
		neg = 1;
		p->i++;
	}
	while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
		/* Stop before overflow: anything past 2^53-1 is refused. */
		if (v > AUD_INT_MAX / 10 + 1) {
			perr(p, "integer beyond ±(2^53-1)");
			return NULL;
		}
		v = v * 10 + (p->s[p->i] - '0');
		p->i++;
		digits++;
	}
	if (digits == 0) {
		perr(p, "bad number");
		return NULL;
	}
	if (p->i < p->n && (p->s[p->i] == '.' || p->s[p->i] == 'e' ||
	    p->s[p->i] == 'E')) {
		perr(p, "floating-point numbers are not allowed");
		return NULL;
	}
	if (v > AUD_INT_MAX) {
		perr(p, "integer beyond ±(2^53-1)");
		return NULL;
	}
	return json_integer(neg ? -v : v);
}

static int
lit(struct parser *p, const char *w)
{
	size_t l = strlen(w);

	if (p->n - p->i < l || memcmp(p->s + p->i, w, l) != 0)
		return 0;
	p->i += l;
	return 1;
}

static json_t *
parse_value(struct parser *p, int depth)
{
	json_t *v, *m;
	char *k, *s;
	size_t kl, sl;
	char c;

	if (depth > AUD_MAX_DEPTH) {
		perr(p, "nesting too deep");
		return NULL;
	}
	if (p->i >= p->n) {
		perr(p, "unexpected end");
		return NULL;
	}
	c = p->s[p->i];
	if (c == '{') {
		p->i++;
		if ((v = json_object()) == NULL)
			return NULL;
		if (p->i < p->n && p->s[p->i] == '}') {
			p->i++;
			return v;
		}
		for (;;) {
			if (p->i >= p->n || p->s[p->i] != '"') {
				perr(p, "expected key");
				goto fail;
			}
			p->i++;
			if ((k = parse_string(p, &kl)) == NULL)
				goto fail;
			if (!key_ok(k, kl)) {
				free(k);
				perr(p, "key outside [a-z0-9_]");
				goto fail;
			}
			if (json_object_get(v, k) != NULL) {
				free(k);
				perr(p, "duplicate key");
				goto fail;
			}
			if (p->i >= p->n || p->s[p->i] != ':') {
				free(k);
				perr(p, "expected ':'");
				goto fail;
			}
			p->i++;
			if ((m = parse_value(p, depth + 1)) == NULL) {
				free(k);
				goto fail;
			}
			if (json_object_set_new(v, k, m) == -1) {
				free(k);
				goto fail;
			}
			free(k);
			if (p->i < p->n && p->s[p->i] == ',') {
				p->i++;
				continue;
			}
			if (p->i < p->n && p->s[p->i] == '}') {
				p->i++;
				return v;
			}
			perr(p, "expected ',' or '}'");
			goto fail;
		}
	}
	if (c == '[') {
		p->i++;
		if ((v = json_array()) == NULL)
			return NULL;
		if (p->i < p->n && p->s[p->i] == ']') {
			p->i++;
			return v;
		}
		for (;;) {
			if ((m = parse_value(p, depth + 1)) == NULL)
				goto fail;
			if (json_array_append_new(v, m) == -1)
				goto fail;
			if (p->i < p->n && p->s[p->i] == ',') {
				p->i++;
				continue;
			}
			if (p->i < p->n && p->s[p->i] == ']') {
				p->i++;
				return v;
			}
			perr(p, "expected ',' or ']'");
			goto fail;
		}
	}
	if (c == '"') {
		p->i++;
		if ((s = parse_string(p, &sl)) == NULL)
			return NULL;
		v = json_stringn(s, sl);
		free(s);
		if (v == NULL)
			perr(p, "bad string");
		return v;
	}
	if (c == '-' || (c >= '0' && c <= '9'))
		return parse_number(p);
	if (lit(p, "true"))
		return json_true();
	if (lit(p, "false"))
		return json_false();
	if (lit(p, "null"))
		return json_null();
	perr(p, "unexpected character");
	return NULL;
fail:
	json_decref(v);
	return NULL;
}

json_t *
aud_canon_parse(const char *buf, size_t len, char *err, size_t errlen)
{
	struct parser p = { buf, len, 0, err, errlen };
	json_t *v;
	char *re;
	size_t rl;

	if (buf == NULL || len > AUD_MAX_RECORD) {
		seterr(err, errlen, "record missing or larger than %d bytes",
		    AUD_MAX_RECORD);
		errno = EINVAL;
		return NULL;
	}
	if ((v = parse_value(&p, 0)) == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (p.i != len) {
		seterr(err, errlen, "offset %zu: trailing bytes", p.i);
		json_decref(v);
		errno = EINVAL;
		return NULL;
	}
	/* The parser is lenient about order, escapes and -0 on purpose: the
	 * byte comparison below is the one rule, so no case can slip through
	 * a forgotten special case. */
	if ((re = aud_canon_dump(v, &rl, err, errlen)) == NULL) {
		json_decref(v);
		errno = EINVAL;
		return NULL;
	}
	if (rl != len || memcmp(re, buf, len) != 0) {
		size_t i;

		for (i = 0; i < len && i < rl && re[i] == buf[i]; i++)
			;
		seterr(err, errlen, "offset %zu: not in canonical form", i);
		free(re);
		json_decref(v);
		errno = EINVAL;
		return NULL;
	}
	free(re);
	return v;
}

/* ---- one-pass strict check (the verifier's hot path) ----
 *
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
	seterr(p->err, p->errlen, "offset %zu: %s", p->i, what);
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
		while (i < n && plain[s[i]])
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
		if ((l = utf8_len(s + p->i, p->n - p->i)) == 0)
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
		seterr(err, errlen, "record missing or larger than %d bytes",
		    AUD_MAX_RECORD);
		errno = EINVAL;
		return -1;
	}
	top = len > 0 && buf[0] == '{';
	if (sc_value(&p, 0, top ? sc : NULL) == -1) {
		errno = EINVAL;
		return -1;
	}
	if (p.i != len) {
		seterr(err, errlen, "offset %zu: trailing bytes", p.i);
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

/* ------------------------------------------------------- canonical writer */

void
aud_cw_init(struct aud_cw *w, char *mem, size_t cap)
{
	w->p = mem;
	w->len = 0;
	w->cap = cap;
	w->overflow = 0;
}

void
aud_cw_raw(struct aud_cw *w, const char *s, size_t n)
{
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = 1;
		return;
	}
	memcpy(w->p + w->len, s, n);
	w->len += n;
}

int
aud_cw_str(struct aud_cw *w, const char *s, size_t n)
{
	/* dump_string's rules, into a buffer that never grows: a borrowed
	 * struct buf whose growth is treated as overflow. */
	struct buf b = { w->p + w->len, 0, w->cap - w->len, 0, 1 };

	if (w->overflow)
		return 0;
	buf_c(&b, '"');
	if (dump_string(&b, s, n, NULL, 0) == -1) {
		if (!b.borrowed)
			free(b.p);
		return -1;
	}
	buf_c(&b, '"');
	if (!b.borrowed || b.oom) {
		/* It grew: the value does not fit the caller's buffer. */
		if (!b.borrowed)
			free(b.p);
		w->overflow = 1;
		return 0;
	}
	w->len += b.len;
	return 0;
}

int
aud_cw_int(struct aud_cw *w, long long v)
{
	char t[24], *e = t + sizeof(t), *p = e;
	unsigned long long u;

	if (v > AUD_INT_MAX || v < -AUD_INT_MAX)
		return -1;
	/* By hand: stdio formatting was a visible cost at this rate. */
	u = v < 0 ? (unsigned long long)-v : (unsigned long long)v;
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		*--p = '-';
	aud_cw_raw(w, p, (size_t)(e - p));
	return 0;
}
