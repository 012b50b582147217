/*
 * ship: the one-shot form of the file sink. aud_ship_file predates the SOC
 * sinks of audit/sink.c and once had its own copy of the reader, the
 * formatter and the cursor update; it is now a thin wrapper that builds a
 * file sink for one call and drives its synchronous delivery
 * (aud_sink_ship), so there is a single implementation of the feed: the
 * same durable cursor (the ship_cursor row named after the sink, plus its
 * "<sink>#ckpt" row), the same NDJSON, the same fsync before the cursor
 * moves, the same refusal to ship past a hole. A file written here and one
 * written by a running sink of the same name are one stream.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/priv.h"

/* The sink caps its own batches at this many records. */
#define SHIP_BATCH_MAX	65536u

/*
 * The file sink takes only absolute paths (a daemon's working directory is
 * no place to resolve a feed against); this call always took relative ones
 * too, so it anchors them at the caller's working directory.
 */
static char *
abs_path(const char *path, char *err, size_t errlen)
{
	char cwd[PATH_MAX], *p;
	size_t n;

	if (path[0] == '/')
		return strdup(path);
	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		aud_seterr(err, errlen, "%s: working directory: %s", path,
		    strerror(errno));
		return NULL;
	}
	n = strlen(cwd) + 1 + strlen(path) + 1;
	if ((p = malloc(n)) == NULL)
		return NULL;
	snprintf(p, n, "%s/%s", cwd, path);
	return p;
}

int64_t
aud_ship_file(const char *db_path, const char *sink, const char *path,
    int ocsf, size_t max, char *err, size_t errlen)
{
	struct aud_sink_conf c = { 0 };
	struct aud_sink *s = NULL;
	int64_t shipped = 0, r;
	size_t left;
	char *target;
	int e;

	if (db_path == NULL || sink == NULL || path == NULL ||
	    path[0] == '\0' || max == 0) {
		aud_seterr(err, errlen, "bad database, sink name, path or batch "
		    "size");
		errno = EINVAL;
		return -1;
	}
	if ((target = abs_path(path, err, errlen)) == NULL) {
		if (errno == ENOMEM)
			aud_seterr(err, errlen, "out of memory");
		return -1;
	}
	c.name = sink;
	c.type = AUD_SINK_FILE;
	c.format = ocsf ? AUD_SINK_OCSF : AUD_SINK_JSON;
	c.target = target;
	/*
	 * One delivery carries at most batch_max records and may carry fewer
	 * (the sink also bounds a batch in bytes), so go on until max or the
	 * head of the log; a batch size fixed when the sink is made means a
	 * fresh sink for a remainder smaller than it, so max is never
	 * overrun.
	 */
	while ((left = max - (size_t)shipped) > 0) {
		if (s == NULL || left < c.batch_max) {
			aud_sink_free(s);
			c.batch_max = left < SHIP_BATCH_MAX ? (unsigned)left :
			    SHIP_BATCH_MAX;
			if ((s = aud_sink_new(db_path, &c, NULL, err,
			    errlen)) == NULL)
				goto fail;
		}
		if ((r = aud_sink_ship(s, err, errlen)) == -1)
			goto fail;
		if (r == 0)
			break;
		shipped += r;
	}
	aud_sink_free(s);
	free(target);
	return shipped;
fail:
	e = errno ? errno : EIO;
	aud_sink_free(s);
	free(target);
	errno = e;
	return -1;
}
