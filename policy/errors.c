/*
 * errors: the list loaders fill with "FILE:LINE:COL: message" lines.
 *
 * A policy file can be wrong in many places at once and a user fixing it
 * wants all of them, not one per run; the list is capped so a hostile file
 * cannot make the loader allocate without bound.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

struct pol_errors {
	char	**msg;
	size_t	  nmsg;
	size_t	  cap;
	size_t	  count;
};

struct pol_errors *
pol_errors_new(size_t cap)
{
	struct pol_errors *e;

	if ((e = calloc(1, sizeof(*e))) == NULL)
		return NULL;
	e->cap = cap;
	if (cap > 0 && (e->msg = calloc(cap, sizeof(*e->msg))) == NULL) {
		free(e);
		return NULL;
	}
	return e;
}

void
pol_errors_free(struct pol_errors *e)
{
	if (e == NULL)
		return;
	pol_errors_clear(e);
	free(e->msg);
	free(e);
}

/*
 * escape: messages quote file contents, and a YAML scalar can hold line
 * breaks and other control characters. One error must stay one line (a
 * quoted "\nFILE:1:1: ok" must not forge another error in CI logs or
 * terminals), so controls become C escapes. A message cut by the fixed
 * buffer loses its trailing partial UTF-8 sequence too.
 */
static void
escape(const char *in, char *out, size_t outlen)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t		 o = 0, len = strlen(in), k;

	/* Drop a multi-byte sequence that vsnprintf cut short. */
	for (k = 0; k < len && k < 4 && (s[len - 1 - k] & 0xc0) == 0x80; k++)
		;
	if (k < len && s[len - 1 - k] >= 0xc0) {
		unsigned char	lead = s[len - 1 - k];
		size_t		need = lead >= 0xf0 ? 3 : lead >= 0xe0 ? 2 : 1;

		if (k < need)
			len -= k + 1;
	}
	for (; len > 0 && o + 5 < outlen; s++, len--) {
		if (*s == '\n')
			o += (size_t)snprintf(out + o, outlen - o, "\\n");
		else if (*s == '\r')
			o += (size_t)snprintf(out + o, outlen - o, "\\r");
		else if (*s == '\t')
			o += (size_t)snprintf(out + o, outlen - o, "\\t");
		else if (*s < 0x20 || *s == 0x7f)
			o += (size_t)snprintf(out + o, outlen - o, "\\x%02x",
			    *s);
		else
			out[o++] = (char)*s;
	}
	out[o] = '\0';
}

void
pol_errors_add(struct pol_errors *e, const char *file, unsigned line,
    unsigned col, const char *fmt, ...)
{
	char	 body[512], safe[4 * sizeof(body)];
	char	*m;
	va_list	 ap;

	if (e == NULL)
		return;
	e->count++;
	if (e->nmsg >= e->cap)
		return;
	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	escape(body, safe, sizeof(safe));
	if (asprintf(&m, "%s:%u:%u: %s", file ? file : "-", line, col,
	    safe) == -1)
		return;
	e->msg[e->nmsg++] = m;
}

size_t
pol_errors_count(const struct pol_errors *e)
{
	return e ? e->count : 0;
}

const char *
pol_errors_get(const struct pol_errors *e, size_t i)
{
	if (e == NULL || i >= e->nmsg)
		return NULL;
	return e->msg[i];
}

void
pol_errors_clear(struct pol_errors *e)
{
	size_t	i;

	if (e == NULL)
		return;
	for (i = 0; i < e->nmsg; i++)
		free(e->msg[i]);
	e->nmsg = 0;
	e->count = 0;
}
