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

#include "audit/audit.h"

struct buf {
	char	*p;
	size_t	 len, cap;
	int	 oom;
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

static void
buf_add(struct buf *b, const char *s, size_t n)
{
	size_t ncap;
	char *np;

	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		ncap = b->cap ? b->cap : 256;
		while (ncap < b->len + n + 1)
			ncap *= 2;
		if ((np = realloc(b->p, ncap)) == NULL) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = ncap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
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

static int
dump_string(struct buf *b, const char *s, size_t n, char *err, size_t errlen)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, l;
	char esc[7];

	while (i < n) {
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

static int
cmpkey(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int
dump_value(struct buf *b, const json_t *v, int depth, char *err, size_t errlen)
{
	const char **keys;
	const char *k;
	json_t *m;
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
		n = json_object_size(v);
		if ((keys = calloc(n ? n : 1, sizeof(*keys))) == NULL) {
			b->oom = 1;
			return -1;
		}
		i = 0;
		json_object_foreach((json_t *)v, k, m)
			keys[i++] = k;
		qsort(keys, n, sizeof(*keys), cmpkey);
		buf_add(b, "{", 1);
		for (i = 0; i < n; i++) {
			if (!key_ok(keys[i], strlen(keys[i]))) {
				seterr(err, errlen, "key \"%.40s\" outside [a-z0-9_]",
				    keys[i]);
				free(keys);
				return -1;
			}
			if (i > 0)
				buf_add(b, ",", 1);
			buf_add(b, "\"", 1);
			buf_add(b, keys[i], strlen(keys[i]));
			buf_add(b, "\":", 2);
			if (dump_value(b, json_object_get(v, keys[i]), depth + 1,
			    err, errlen) == -1) {
				free(keys);
				return -1;
			}
		}
		free(keys);
		buf_add(b, "}", 1);
		return 0;
	case JSON_ARRAY:
		buf_add(b, "[", 1);
		for (i = 0; i < json_array_size(v); i++) {
			if (i > 0)
				buf_add(b, ",", 1);
			if (dump_value(b, json_array_get(v, i), depth + 1, err,
			    errlen) == -1)
				return -1;
		}
		buf_add(b, "]", 1);
		return 0;
	case JSON_STRING:
		buf_add(b, "\"", 1);
		if (dump_string(b, json_string_value(v), json_string_length(v),
		    err, errlen) == -1)
			return -1;
		buf_add(b, "\"", 1);
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
	if (b.p == NULL)
		buf_add(&b, "", 0);
	if (lenp != NULL)
		*lenp = b.len;
	return b.p;
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
	if (b.oom) {
		perr(p, "out of memory");
		goto fail;
	}
	if (b.p == NULL)
		buf_add(&b, "", 0);
	if (b.oom)
		goto fail;
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
