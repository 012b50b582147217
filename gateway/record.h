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
 * The recorder is a handle, not a process-wide singleton: sluiced opens
 * it and hands it to whoever records (gw, the sandbox manager, netdeny,
 * the DNS and bridge wirings), and their parts take it from their owner's
 * struct. A recorder survives the fork of daemon(3) as the same handle:
 * rec_suspend closes its log (a writer thread does not cross fork) and
 * rec_reopen opens it again, so no owner has to be told of a new one.
 * Every function that records takes r first and accepts NULL as "no
 * recorder" (a module tested alone), refusing as it does while r is
 * suspended. Loop thread only, like the rest of gateway/.
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
 * and returns it. cfg and loop are borrowed and must outlive the
 * recorder. NULL with errno and a message in err on failure (the daemon
 * must not serve then: no action without a record).
 */
struct rec	*rec_open(const struct pol_config *cfg, struct ev_loop *loop,
		    char *err, size_t errlen);
/* rec_close: writes log.close and the final checkpoint (unless r is
 * suspended), runs every pending done callback, unregisters from the loop
 * and frees r. NULL is a no-op. */
void		 rec_close(struct rec *r);
/* rec_suspend: closes the log of r as rec_close does (summaries and held
 * records go in first) but keeps r: until rec_reopen every rec_* call
 * on r refuses as for no recorder, except rec_commit_after, which holds
 * its record for the reopened log. For daemon(3): the writer is a
 * thread. A suspended r or NULL is a no-op. */
void		 rec_suspend(struct rec *r);
/* rec_reopen: opens the log of a suspended r again, from the same config
 * and loop. 0, or -1 with errno and err (EBUSY: r is open); r stays
 * suspended then. */
int		 rec_reopen(struct rec *r, char *err, size_t errlen);
/* rec_db_path: the database path in use (borrowed, lives as long as r). */
const char	*rec_db_path(const struct rec *r);
/* rec_next_seq: a lower bound of the seq of any record submitted from now
 * on (the log's next seq as of its last commit); 0 when r is NULL or
 * suspended. */
uint64_t	 rec_next_seq(const struct rec *r);

/*
 * rec_async: queue one record of kind with fields (a JSON object; always
 * stolen; NULL, a converter's allocation failure, is refused with ENOMEM
 * and counted by the log as a lost record, written as log.gap) to r.
 * Never blocks. 0, or -1 with errno:
 * EPIPE when r is NULL or suspended, else aud_submit_async's (EAGAIN: the
 * queue was full, the loss is counted and later written as log.gap). A
 * failure is also counted for rec_metrics_print.
 */
int	rec_async(struct rec *r, const char *kind, json_t *fields);
/*
 * rec_durable: as rec_async, but done(arg, ok, seq) runs on the loop thread
 * after the FULL commit (ok = 1) or once the record is known lost (ok = 0).
 * On -1 (EPIPE, EAGAIN for a full queue, EINVAL) done is never called and
 * the caller must not act.
 */
int	rec_durable(struct rec *r, const char *kind, json_t *fields,
	    aud_done_fn done, void *arg);
/*
 * rec_commit: the synchronous form of rec_durable for rare events whose
 * caller cannot be suspended (sandbox lifecycle in a control handler):
 * submits, waits for the FULL commit (a group-commit window plus an fsync)
 * and returns 0 with *seq (may be NULL) set, or -1 with errno and err: the
 * record is not known durable and the caller must not act (or must undo).
 * Blocks the loop; do not use on a per-packet path.
 */
int	rec_commit(struct rec *r, const char *kind, json_t *fields,
	    uint64_t *seq, char *err, size_t errlen);
/*
 * rec_commit_after: the record of an action already done (a removal or an
 * expiry that went ahead although its record could not be committed
 * first). fields is stolen (NULL: out of memory, counted as a lost record
 * in a log.gap). It is submitted durably now and, until a commit takes
 * it, kept in memory and submitted again every REC_LATER_MS; at close, or
 * with REC_LATER_MAX already kept, it goes as an async record, which the
 * log writes or counts in a log.gap. While r is suspended it is held for
 * the reopened log. Never refuses: the caller has acted. With r NULL (no
 * recorder) the record is dropped, and said in the daemon's log.
 */
void	rec_commit_after(struct rec *r, const char *kind, json_t *fields);

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
 * from, or NULL) to r's summaries. 1: within the budget, the caller
 * records it as before (always so while r is NULL or suspended); 0:
 * counted into the summary. */
int	rec_tally(struct rec *r, enum rec_tally_what what, const char *key,
	    const char *sandbox);

/* rec_metrics_print: sluice_audit_records_total{mode}, failures, dropped
 * and next seq, the volume (free and size in bytes, low, constrained,
 * reserve), records held for retry and summarised events of r,
 * Prometheus text. Prints nothing when r is NULL or suspended. */
void	rec_metrics_print(const struct rec *r, FILE *fp);

/* rec_canon: as rec_async, for canonical bytes (aud_submit_canon). */
int	rec_canon(struct rec *r, const char *kind, const char *body,
	    size_t len);

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
 * synchronously (rec_commit) to r. kind is sandbox.create, sandbox.delete,
 * sandbox.expire or sandbox.adopt; sandbox.taint and sandbox.orphan, which
 * are not record kinds of their own, become a finding of that type. policy,
 * subject, iface, addr and detail may be NULL. Fields: sandbox {id},
 * policy {id}, subject, iface, address, detail, decision "log". 0 once the
 * record is durable, or -1 with errno: the event is not known recorded.
 */
int	rec_sandbox_event(struct rec *r, const char *kind, const char *id,
	    const char *policy, const char *subject, const char *iface,
	    const char *addr, const char *detail);

#endif /* SLUICE_GATEWAY_RECORD_H */
