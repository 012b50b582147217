/*
 * canon_parse: the strict parser, the reader's half of audit/canon.c. It
 * builds a JSON tree leniently and then accepts the buffer only if
 * re-serialising the tree gives the very same bytes, so that one byte
 * comparison is the rule and no special case can be forgotten. Where no
 * tree is needed, canon_check.c accepts exactly the same buffers in one
 * pass.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/priv.h"

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
	aud_seterr(p->err, p->errlen, "offset %zu: %s", p->i, what);
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
	struct aud_buf b = { 0 };
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
			l = aud_utf8_len((const unsigned char *)p->s + p->i,
			    p->n - p->i);
			if (l == 0) {
				perr(p, "invalid UTF-8");
				goto fail;
			}
			aud_buf_add(&b, p->s + p->i, l);
			p->i += l;
			continue;
		}
		if (++p->i >= p->n) {
			perr(p, "unterminated escape");
			goto fail;
		}
		c = p->s[p->i++];
		switch (c) {
		case '"': aud_buf_add(&b, "\"", 1); continue;
		case '\\': aud_buf_add(&b, "\\", 1); continue;
		case '/': aud_buf_add(&b, "/", 1); continue;
		case 'b': aud_buf_add(&b, "\b", 1); continue;
		case 'f': aud_buf_add(&b, "\f", 1); continue;
		case 'n': aud_buf_add(&b, "\n", 1); continue;
		case 'r': aud_buf_add(&b, "\r", 1); continue;
		case 't': aud_buf_add(&b, "\t", 1); continue;
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
		aud_buf_add(&b, enc, l);
	}
	aud_buf_nul(&b);
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
			if (!aud_key_ok(k, kl)) {
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
		aud_seterr(err, errlen, "record missing or larger than %d "
		    "bytes", AUD_MAX_RECORD);
		errno = EINVAL;
		return NULL;
	}
	if ((v = parse_value(&p, 0)) == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (p.i != len) {
		aud_seterr(err, errlen, "offset %zu: trailing bytes", p.i);
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
		aud_seterr(err, errlen, "offset %zu: not in canonical form", i);
		free(re);
		json_decref(v);
		errno = EINVAL;
		return NULL;
	}
	free(re);
	return v;
}
