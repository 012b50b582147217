/*
 * wload.c: a host's witnessed checkpoints, read back for `sluice audit
 * verify --witness`. The reviewer's side: it only reads, and what it
 * returns are the signed notes as the host sent them, which the verifier
 * checks against the pinned key and the log like any other external
 * checkpoint (a witness row is evidence only through its signature).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/fleet/fleet.h"

void
fleet_notes_free(char **notes, size_t n)
{
	size_t i;

	if (notes == NULL)
		return;
	for (i = 0; i < n; i++)
		free(notes[i]);
	free(notes);
}

char **
fleet_witness_load(PGconn *c, const char *host, size_t max,
    unsigned deadline_ms, size_t *n, char *err, size_t errlen)
{
	char lim[24], **out;
	const char *p[2];
	PGresult *r;
	int i, rows;

	*n = 0;
	snprintf(lim, sizeof(lim), "%zu", max);
	p[0] = host;
	p[1] = lim;
	/* Newest first: the newest decides how much of a cut tail is
	 * missing, and every one is a prefix check of its own. */
	if ((r = fleet_pg_exec(c, "SELECT note FROM checkpoints WHERE host = "
	    "$1 ORDER BY size DESC LIMIT $2", 2, p, deadline_ms, err,
	    errlen)) == NULL)
		return NULL;
	rows = PQntuples(r);
	if ((out = calloc((size_t)rows + 1, sizeof(*out))) == NULL) {
		PQclear(r);
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	for (i = 0; i < rows; i++) {
		if ((out[i] = strdup(PQgetvalue(r, i, 0))) == NULL) {
			fleet_notes_free(out, (size_t)i);
			PQclear(r);
			snprintf(err, errlen, "out of memory");
			errno = ENOMEM;
			return NULL;
		}
	}
	PQclear(r);
	*n = (size_t)rows;
	return out;
}
