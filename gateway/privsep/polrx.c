/*
 * polrx.c: receiving the policy set in a child (see polrx.h). The parent
 * is trusted to send a set it loaded itself, but not to send it in order:
 * every count and length is checked before it is used, so that a bug on
 * either side ends in a clear error rather than in a set nobody loaded.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/privsep/msg.h"
#include "gateway/privsep/polrx.h"

#define POLRX_MAX_ERRORS	16

struct polrx {
	bool			 on;		/* between BEGIN and END */
	uint32_t		 nfiles;
	struct pol_policy	**v;
	size_t			 n;
	struct msg_policy_file	 file;
	bool			 in_file;
	char			*buf;
	size_t			 got;
	bool			 bad;
	char			 why[640];	/* the first bad file's error */
};

struct polrx *
polrx_new(void)
{
	return calloc(1, sizeof(struct polrx));
}

static void
reset(struct polrx *rx)
{
	size_t i;

	for (i = 0; i < rx->n; i++)
		pol_policy_free(rx->v[i]);
	free(rx->v);
	free(rx->buf);
	memset(rx, 0, sizeof(*rx));
}

void
polrx_free(struct polrx *rx)
{
	if (rx == NULL)
		return;
	reset(rx);
	free(rx);
}

/* The file whose bytes are all in: loaded exactly as the parent did. */
static void
file_done(struct polrx *rx, const struct pol_config *cfg)
{
	struct pol_errors *errs = pol_errors_new(POLRX_MAX_ERRORS);
	struct pol_policy *p;

	rx->in_file = false;
	p = errs != NULL ? pol_policy_load_buf(rx->file.path, rx->buf,
	    rx->got, cfg, errs) : NULL;
	free(rx->buf);
	rx->buf = NULL;
	if (p == NULL || strcmp(pol_policy_digest(p), rx->file.digest) != 0) {
		const char *m = errs != NULL ? pol_errors_get(errs, 0) : NULL;

		if (!rx->bad)
			snprintf(rx->why, sizeof(rx->why), "policy %s: %s",
			    rx->file.path, m != NULL ? m :
			    "not the text the parent loaded");
		pol_policy_free(p);
		rx->bad = true;
	} else
		rx->v[rx->n++] = p;
	pol_errors_free(errs);
}

static int
fail(struct polrx *rx, const char *why, char *err, size_t errlen)
{
	snprintf(err, errlen, "policy set: %s", why);
	reset(rx);
	return -1;
}

int
polrx_msg(struct polrx *rx, uint32_t type, const void *pl, size_t len,
    const struct pol_config *cfg, struct pol_set **out, char *err,
    size_t errlen)
{
	struct pol_errors *errs;
	struct pol_set *s;

	*out = NULL;
	switch (type) {
	case MSG_POLICY_BEGIN: {
		const struct msg_policy_begin *b = pl;

		reset(rx);
		if (len != sizeof(*b) || b->nfiles > MSG_POLICIES_MAX ||
		    (b->nfiles > 0 && (rx->v = calloc(b->nfiles,
		    sizeof(*rx->v))) == NULL))
			return fail(rx, "too many files or no memory", err,
			    errlen);
		rx->on = true;
		rx->nfiles = b->nfiles;
		return 0;
	}
	case MSG_POLICY_FILE:
		if (len != sizeof(rx->file))
			return fail(rx, "a file header of the wrong size", err,
			    errlen);
		memcpy(&rx->file, pl, sizeof(rx->file));
		if (!rx->on || rx->in_file || rx->n >= rx->nfiles ||
		    !msg_str_ok(rx->file.path, sizeof(rx->file.path)) ||
		    !msg_str_ok(rx->file.digest, sizeof(rx->file.digest)) ||
		    rx->file.len > MSG_POLICY_FILE_MAX ||
		    (rx->buf = malloc(rx->file.len + 1)) == NULL)
			return fail(rx, "a file out of order", err, errlen);
		rx->got = 0;
		rx->in_file = true;
		if (rx->file.len == 0)
			file_done(rx, cfg);
		return 0;
	case MSG_POLICY_DATA:
		if (!rx->in_file || len > rx->file.len - rx->got)
			return fail(rx, "bytes out of order", err, errlen);
		memcpy(rx->buf + rx->got, pl, len);
		rx->got += len;
		if (rx->got == rx->file.len)
			file_done(rx, cfg);
		return 0;
	case MSG_POLICY_END:
		break;
	default:
		return fail(rx, "not a policy message", err, errlen);
	}
	/* A set the parent loaded and this process cannot is a bug of one
	 * of the two; serving with an older set would be worse. */
	if (rx->bad) {
		snprintf(err, errlen, "%s", rx->why);
		reset(rx);
		return -1;
	}
	if (!rx->on || rx->in_file || rx->n < rx->nfiles)
		return fail(rx, "incomplete", err, errlen);
	if ((errs = pol_errors_new(POLRX_MAX_ERRORS)) == NULL)
		return fail(rx, "no memory", err, errlen);
	s = pol_set_build(rx->v, rx->n, errs);
	rx->n = 0;		/* the set's now, or freed by pol_set_build */
	if (s == NULL) {
		const char *m = pol_errors_get(errs, 0);

		snprintf(err, errlen, "policy set: %s", m != NULL ? m :
		    "not loaded");
		pol_errors_free(errs);
		reset(rx);
		return -1;
	}
	pol_errors_free(errs);
	reset(rx);
	*out = s;
	return 1;
}

int
polrx_send(struct chan *c, const struct pol_set *set)
{
	struct msg_policy_begin b;
	struct msg_policy_file f;
	size_t i, off, len, n;
	const char *src, *path;

	memset(&b, 0, sizeof(b));
	b.nfiles = (uint32_t)pol_set_count(set);
	if (chan_send1(c, MSG_POLICY_BEGIN, &b, sizeof(b)) == -1)
		return -1;
	for (i = 0; i < pol_set_count(set); i++) {
		const struct pol_policy *p = pol_set_at(set, i);

		src = pol_policy_source(p, &path, &len);
		memset(&f, 0, sizeof(f));
		snprintf(f.path, sizeof(f.path), "%s", path);
		snprintf(f.digest, sizeof(f.digest), "%s",
		    pol_policy_digest(p));
		f.len = (uint32_t)len;
		if (chan_send1(c, MSG_POLICY_FILE, &f, sizeof(f)) == -1)
			return -1;
		for (off = 0; off < len; off += n) {
			n = len - off < MSG_DATA_MAX ? len - off : MSG_DATA_MAX;
			if (chan_send1(c, MSG_POLICY_DATA, src + off, n) == -1)
				return -1;
		}
	}
	return chan_send1(c, MSG_POLICY_END, NULL, 0);
}
