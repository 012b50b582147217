/*
 * fleetd: the daemon's side of a fleet (gateway/fleet/wit.c): the handle
 * made from the config's fleet section at start, and the checkpoint
 * witness, a thread of the parent that copies every signed checkpoint of
 * the local audit log into the fleet database's append-only table
 * checkpoints (fleet/fleet.h speaks to the database).
 *
 * Nothing here blocks the audit writer: the witness reads checkpoints from
 * the log's own database (the log is the queue, so it is bounded by the log
 * and survives a restart) on a connection of its own, and a database that
 * is down or slow costs the writer nothing; it is retried with backoff and
 * its lag is reported (fleetd_status_json, fleetd_metrics_print).
 */
#ifndef SLUICE_GATEWAY_FLEET_FLEETD_H
#define SLUICE_GATEWAY_FLEET_FLEETD_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "gateway/fleet/fleet.h"
#include "policy/policy.h"

struct fleetd;
/*
 * fleetd_open: for cfg's fleet section (NULL with errno 0 when there is
 * none): the password read, the host name resolved, a connection made and
 * the schema brought up to date (fleet_schema_ensure), within the
 * deadline. The connection is closed again: the threads that use the
 * database make their own. NULL with errno and err on any failure; the
 * daemon must not start then. cfg must outlive the handle.
 */
struct fleetd	*fleetd_open(const struct pol_config *cfg, char *err,
		    size_t errlen);
/* fleetd_free: stops the witness (fleetd_witness_stop), frees. NULL: no-op. */
void		 fleetd_free(struct fleetd *f);
/* fleetd_host: this host's name in the shared tables (borrowed). */
const char	*fleetd_host(const struct fleetd *f);

/*
 * fleetd_witness_start: start the thread that copies the checkpoints of the
 * audit log at audit_db into the table checkpoints, from the newest size
 * the database already holds for this host. Call after daemon(3) (a thread
 * does not cross fork). 0, or -1 with errno and err.
 */
int		 fleetd_witness_start(struct fleetd *f, const char *audit_db,
		    char *err, size_t errlen);
/* fleetd_witness_kick: new checkpoints may be there; cheap, never blocks on
 * I/O, any thread. NULL or not started: no-op. */
void		 fleetd_witness_kick(struct fleetd *f);
/* fleetd_witness_stop: stop and join the thread after one last round while
 * the database answers (call it after the log's close: its final
 * checkpoint goes too); each statement ends within the deadline. No-op if
 * not started. */
void		 fleetd_witness_stop(struct fleetd *f);

struct fleetd_stats {
	int		 up;		/* connected, and the last round worked */
	uint64_t	 witnessed;	/* newest size the database holds */
	uint64_t	 local;		/* newest size the local log holds */
	uint64_t	 pending;	/* local checkpoints not yet witnessed */
	uint64_t	 inserted;	/* rows inserted since start */
	uint64_t	 failures;	/* connects and rounds that failed */
	uint64_t	 reconnects;	/* connections made after the first */
	uint64_t	 conflicts;	/* sizes the witness holds with another
					 * root: this log was rewritten */
	char		 last_error[320];
};
/* fleetd_witness_stats: a consistent snapshot (zeroed for NULL); any thread. */
void		 fleetd_witness_stats(const struct fleetd *f,
		    struct fleetd_stats *st);
/* fleetd_status_json: {host, up, witness: {...}} for GET /v1/status; new
 * reference or NULL. */
json_t		*fleetd_status_json(const struct fleetd *f);
/* fleetd_metrics_print: the sluice_fleet_* lines of /metrics (none for NULL). */
void		 fleetd_metrics_print(const struct fleetd *f, FILE *fp);

#endif /* SLUICE_GATEWAY_FLEET_FLEETD_H */
