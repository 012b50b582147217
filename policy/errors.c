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

void
pol_errors_add(struct pol_errors *e, const char *file, unsigned line,
    unsigned col, const char *fmt, ...)
{
	char	 body[512];
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
	if (asprintf(&m, "%s:%u:%u: %s", file ? file : "-", line, col,
	    body) == -1)
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
