/*
 * record: the daemon's one path to the audit log (DESIGN §7, audit.md §3).
 *
 * Every part of sluiced that takes a decision (sandbox lifecycle, policy
 * reload, denied packets, the DNS proxy, the bridge) hands its record here
 * rather than to audit/ directly, so that the log is opened once from the
 * config and its completion eventfd and heartbeat live in the one event
 * loop. Each producer converts its own events to fields, next to the code
 * that knows what they mean, out of the shared blocks declared below (a
 * sandbox {id}, addresses, protocol names, always-accepted strings), so
 * that the OCSF mapping and `sluice audit tail` see the same shapes from
 * every producer.
 *
 * The recorder is process-wide: rec_open installs it and rec_async /
 * rec_durable / rec_commit reach it without a handle, so that a call site
 * deep in another module needs one line, not a pointer threaded through
 * every constructor. Loop thread only, like the rest of gateway/.
 */
#ifndef SLUICE_GATEWAY_RECORD_H
#define SLUICE_GATEWAY_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "audit/audit.h"
#include "gateway/ev.h"
#include "policy/policy.h"

#define REC_HEARTBEAT_MS	60000	/* idle heartbeat + checkpoint */

struct rec;

/*
 * rec_open: opens (or creates, recovering after a crash) the audit log named
 * by cfg (audit_db, default <state_dir>/audit.db; audit_key optional: without
 * it records are chained and treed but no checkpoint is signed;
 * audit_origin), registers its completion fd on loop, arms the heartbeat,
 * and installs it as the process-wide recorder. cfg and loop are borrowed
 * and must outlive the recorder. NULL with errno and a message in err on
 * failure (the daemon must not serve then: no action without a record), or
 * EBUSY if a recorder is already installed.
 */
struct rec	*rec_open(const struct pol_config *cfg, struct ev_loop *loop,
		    char *err, size_t errlen);
/* rec_close: writes log.close and the final checkpoint, runs every pending
 * done callback, unregisters from the loop and uninstalls. NULL is a no-op. */
void		 rec_close(struct rec *r);
/* rec_db_path: the database path in use (borrowed, lives as long as r). */
const char	*rec_db_path(const struct rec *r);

/*
 * rec_async: queue one record of kind with fields (a JSON object; always
 * stolen; NULL, a converter's allocation failure, is refused with ENOMEM
 * and counted by the log as a lost record, written as log.gap). Never
 * blocks. 0, or -1 with errno:
 * EPIPE when no recorder is open, else aud_submit_async's (EAGAIN: the
 * queue was full, the loss is counted and later written as log.gap). A
 * failure is also counted for rec_metrics_print.
 */
int	rec_async(const char *kind, json_t *fields);
/*
 * rec_durable: as rec_async, but done(arg, ok, seq) runs on the loop thread
 * after the FULL commit (ok = 1) or once the record is known lost (ok = 0).
 * On -1 (EPIPE, EAGAIN for a full queue, EINVAL) done is never called and
 * the caller must not act.
 */
int	rec_durable(const char *kind, json_t *fields, aud_done_fn done,
	    void *arg);
/*
 * rec_commit: the synchronous form of rec_durable for rare events whose
 * caller cannot be suspended (sandbox lifecycle in a control handler):
 * submits, waits for the FULL commit (a group-commit window plus an fsync)
 * and returns 0 with *seq (may be NULL) set, or -1 with errno and err: the
 * record is not known durable and the caller must not act (or must undo).
 * Blocks the loop; do not use on a per-packet path.
 */
int	rec_commit(const char *kind, json_t *fields, uint64_t *seq, char *err,
	    size_t errlen);
/*
 * rec_commit_after: the record of an action already done (a removal or an
 * expiry that went ahead although its record could not be committed
 * first). fields is stolen (NULL: out of memory, counted as a lost record
 * in a log.gap). It is submitted durably now and, until a commit takes
 * it, kept in memory and submitted again every REC_LATER_MS; at close, or
 * with REC_LATER_MAX already kept, it goes as an async record, which the
 * log writes or counts in a log.gap. Never refuses: the caller has acted.
 */
void	rec_commit_after(const char *kind, json_t *fields);

/*
 * Events anyone can cause at packet rate, recorded within a budget per
 * source and interval (REC_TALLY_MS) and summarised beyond it: one record
 * per source and interval with a count (gateway/rec_tally.c).
 */
#define REC_TALLY_MS	5000
enum rec_tally_what {
	REC_TALLY_DNS_UNKNOWN,		/* DNS from no sandbox; key: address */
	REC_TALLY_DNS_MALFORMED,	/* DNS junk; key: address */
	REC_TALLY_DNS_RATE,		/* over a sandbox's rate; key: its id */
	REC_TALLY_MCP_AUTH,		/* bridge 401; key: address */
	REC_TALLY_N
};
/* rec_tally: one event of what from key (sandbox: the sandbox it came
 * from, or NULL). 1: within the budget, the caller records it as before
 * (always so while no recorder is open); 0: counted into the summary. */
int	rec_tally(enum rec_tally_what what, const char *key,
	    const char *sandbox);

/* rec_metrics_print: sluice_audit_records_total{mode}, failures, dropped
 * and next seq, the volume (free and size in bytes, low, constrained,
 * reserve), records held for retry and summarised events, Prometheus
 * text. Prints nothing when no recorder is open. */
void	rec_metrics_print(FILE *fp);

/* rec_canon: as rec_async, for canonical bytes (aud_submit_canon). */
int	rec_canon(const char *kind, const char *body, size_t len);

/* ---- what every kind's fields share (gateway/rec_fields.c). Each
 * producer converts its own events (gateway/dns/dns_rec.h,
 * nd_rec_fields in gateway/netdeny.h, gateway/brwire.c) out of these. ---- */

/* rec_string: a JSON string of s (NULL is ""), with every byte outside
 * printable ASCII shown as '?' when s is not valid UTF-8, so that a record
 * quoting untrusted bytes is still written. New reference, NULL on
 * allocation failure. */
json_t	*rec_string(const char *s);
/* rec_put: sets key (a literal of the caller: not checked as UTF-8) of o to
 * v, stolen. -1 when v is NULL or the set fails, so that callers OR the
 * results and drop the whole object: a half-built record never reaches the
 * log. */
int	 rec_put(json_t *o, const char *key, json_t *v);
/* rec_sandbox_json: {id} of a sandbox (id through rec_string). New
 * reference, NULL on allocation failure. */
json_t	*rec_sandbox_json(const char *id);
/* rec_addr_json: the text form of the address a (4 bytes, or 16 when
 * family is AF_INET6); "?" if it cannot be formatted. New reference. */
json_t	*rec_addr_json(uint8_t family, const uint8_t *a);
/* rec_proto_name: "tcp", "udp", "icmp", "icmpv6", else the number written
 * into buf (len bytes; 8 is enough). */
const char *rec_proto_name(uint8_t p, char *buf, size_t len);

/* ---- the kinds of the daemon's core (new references, NULL on
 * allocation failure; pass the result straight to rec_*). ---- */

/* rec_reload_fields: a policy.reload record: decision "allow" (ok) or
 * "deny" (failed), result, policy_dir, policies [{name, digest}] (stolen,
 * may be NULL), errors (the messages of errs, may be NULL). */
json_t	*rec_reload_fields(bool ok, const char *policy_dir, json_t *policies,
	    const struct pol_errors *errs);
/* rec_finding_fields: a generic finding: sandbox {id} (may be NULL), type,
 * severity ("low"|"medium"|"high"), detail. */
json_t	*rec_finding_fields(const char *sandbox, const char *type,
	    const char *severity, const char *detail);

/*
 * rec_sandbox_event: the record of one sandbox lifecycle event, committed
 * synchronously (rec_commit). kind is sandbox.create, sandbox.delete,
 * sandbox.expire or sandbox.adopt; sandbox.taint and sandbox.orphan, which
 * are not record kinds of their own, become a finding of that type. policy,
 * subject, iface, addr and detail may be NULL. Fields: sandbox {id},
 * policy {id}, subject, iface, address, detail, decision "log". 0 once the
 * record is durable, or -1 with errno: the event is not known recorded.
 */
int	rec_sandbox_event(const char *kind, const char *id, const char *policy,
	    const char *subject, const char *iface, const char *addr,
	    const char *detail);

#endif /* SLUICE_GATEWAY_RECORD_H */
