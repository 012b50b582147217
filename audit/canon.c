/*
 * canon: the byte form of a record. A record is evidence only if everyone
 * derives the same bytes from it, so the writer emits a restricted RFC 8785
 * (JCS) subset -- objects, arrays, strings, integers within ±(2^53-1),
 * true/false/null, keys [a-z0-9_] sorted bytewise, no whitespace, minimal
 * escapes -- and the verifier's parser accepts a buffer only if re-serialising
 * what it denotes gives the very same bytes (reference/audit.md §3.3).
 *
 * This file is the writing side: the serialiser of JSON trees and the
 * canonical writer that producers use without a tree. The verifier's side
 * is canon_parse.c (the strict parser) and canon_check.c (the one-pass
 * check and the lookups over checked bytes).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/priv.h"

int
aud_buf_grow(struct aud_buf *b, size_t n)
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

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
size_t
aud_utf8_len(const unsigned char *s, size_t avail)
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

/* A key of the canonical subset: [a-z0-9_]+. */
int
aud_key_ok(const char *k, size_t n)
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
const unsigned char aud_plain[256] = {
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
dump_string(struct aud_buf *b, const char *s, size_t n, char *err,
    size_t errlen)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run, l;
	char esc[7];

	while (i < n) {
		/* Plain ASCII runs are the common case: copy them whole. */
		for (run = i; run < n && aud_plain[u[run]]; run++)
			;
		if (run > i) {
			aud_buf_add(b, s + i, run - i);
			i = run;
			if (i == n)
				break;
		}
		if (u[i] == 0) {
			aud_seterr(err, errlen, "string contains NUL");
			return -1;
		}
		if (u[i] < 0x20) {
			switch (u[i]) {
			case '\b': aud_buf_add(b, "\\b", 2); break;
			case '\f': aud_buf_add(b, "\\f", 2); break;
			case '\n': aud_buf_add(b, "\\n", 2); break;
			case '\r': aud_buf_add(b, "\\r", 2); break;
			case '\t': aud_buf_add(b, "\\t", 2); break;
			default:
				memcpy(esc, "\\u00", 4);
				esc[4] = hex[u[i] >> 4];
				esc[5] = hex[u[i] & 15];
				aud_buf_add(b, esc, 6);
			}
			i++;
			continue;
		}
		if (u[i] == '"' || u[i] == '\\') {
			esc[0] = '\\';
			esc[1] = (char)u[i];
			aud_buf_add(b, esc, 2);
			i++;
			continue;
		}
		if ((l = aud_utf8_len(u + i, n - i)) == 0) {
			aud_seterr(err, errlen, "string is not valid UTF-8");
			return -1;
		}
		aud_buf_add(b, s + i, l);
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

static int dump_value(struct aud_buf *, const json_t *, int, char *, size_t);

static int
dump_object(struct aud_buf *b, const json_t *v, int depth, struct mrec *mr,
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
		aud_seterr(err, errlen, "out of memory");
		return -1;
	}
	i = 0;
	/* The value comes with the key: no second hash lookup per member;
	 * key lengths catch keys with an embedded NUL. */
	json_object_keylen_foreach((json_t *)v, k, kl, m) {
		if (i == n)
			break;
		if (!aud_key_ok(k, kl)) {
			aud_seterr(err, errlen, "key \"%.40s\" outside "
			    "[a-z0-9_]", k);
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
	aud_buf_c(b, '{');
	for (i = 0; i < n; i++) {
		if (i > 0)
			aud_buf_c(b, ',');
		if (mr != NULL)
			mr->start[mr->n++] = b->len;
		aud_buf_c(b, '"');
		aud_buf_add(b, kv[i].k, kv[i].kl);
		aud_buf_add(b, "\":", 2);
		if (dump_value(b, kv[i].v, depth + 1, err, errlen) == -1)
			goto out;
	}
	aud_buf_c(b, '}');
	rc = 0;
out:
	if (kv != small)
		free(kv);
	return rc;
}

static int
dump_value(struct aud_buf *b, const json_t *v, int depth, char *err,
    size_t errlen)
{
	size_t i, n;
	json_int_t iv;
	char num[32];
	int len;

	if (depth > AUD_MAX_DEPTH) {
		aud_seterr(err, errlen, "nesting deeper than %d",
		    AUD_MAX_DEPTH);
		return -1;
	}
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return dump_object(b, v, depth, NULL, err, errlen);
	case JSON_ARRAY:
		aud_buf_c(b, '[');
		n = json_array_size(v);
		for (i = 0; i < n; i++) {
			if (i > 0)
				aud_buf_c(b, ',');
			if (dump_value(b, json_array_get(v, i), depth + 1, err,
			    errlen) == -1)
				return -1;
		}
		aud_buf_c(b, ']');
		return 0;
	case JSON_STRING:
		aud_buf_c(b, '"');
		if (dump_string(b, json_string_value(v), json_string_length(v),
		    err, errlen) == -1)
			return -1;
		aud_buf_c(b, '"');
		return 0;
	case JSON_INTEGER:
		iv = json_integer_value(v);
		if (iv > AUD_INT_MAX || iv < -AUD_INT_MAX) {
			aud_seterr(err, errlen, "integer beyond ±(2^53-1)");
			return -1;
		}
		len = snprintf(num, sizeof(num), "%lld", (long long)iv);
		aud_buf_add(b, num, (size_t)len);
		return 0;
	case JSON_REAL:
		aud_seterr(err, errlen, "floating-point numbers are not "
		    "allowed");
		return -1;
	case JSON_TRUE:
		aud_buf_add(b, "true", 4);
		return 0;
	case JSON_FALSE:
		aud_buf_add(b, "false", 5);
		return 0;
	case JSON_NULL:
		aud_buf_add(b, "null", 4);
		return 0;
	}
	aud_seterr(err, errlen, "unknown JSON type");
	return -1;
}

char *
aud_canon_dump(const json_t *v, size_t *lenp, char *err, size_t errlen)
{
	struct aud_buf b = { 0 };

	if (v == NULL) {
		aud_seterr(err, errlen, "no value");
		errno = EINVAL;
		return NULL;
	}
	if (dump_value(&b, v, 0, err, errlen) == -1 || b.oom) {
		if (b.oom) {
			aud_seterr(err, errlen, "out of memory");
			errno = ENOMEM;
		} else
			errno = EINVAL;
		free(b.p);
		return NULL;
	}
	aud_buf_nul(&b);
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
	struct aud_buf b = { 0 };
	struct mrec mr;
	size_t n;

	m->buf = NULL;
	m->start = NULL;
	m->len = m->n = 0;
	if (!json_is_object(obj)) {
		aud_seterr(err, errlen, "not an object");
		errno = EINVAL;
		return -1;
	}
	/* The caller's storage first: the common record needs no malloc. */
	n = json_object_size(obj);
	if (n <= AUD_MEMBERS_INLINE)
		mr.start = m->istart;
	else if ((mr.start = malloc(n * sizeof(*mr.start))) == NULL) {
		aud_seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	mr.n = 0;
	b.p = m->ibuf;
	b.cap = sizeof(m->ibuf);
	b.borrowed = 1;
	if (dump_object(&b, obj, 0, &mr, err, errlen) == 0) {
		aud_buf_nul(&b);
		if (!b.oom) {
			m->buf = b.p;
			m->len = b.len;
			m->start = mr.start;
			m->n = mr.n;
			return 0;
		}
	}
	if (b.oom) {
		aud_seterr(err, errlen, "out of memory");
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
	 * struct aud_buf whose growth is treated as overflow. */
	struct aud_buf b = { w->p + w->len, 0, w->cap - w->len, 0, 1 };

	if (w->overflow)
		return 0;
	aud_buf_c(&b, '"');
	if (dump_string(&b, s, n, NULL, 0) == -1) {
		if (!b.borrowed)
			free(b.p);
		return -1;
	}
	aud_buf_c(&b, '"');
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
