/*
 * audit: the tamper-evident audit log (reference/audit.md §3, DESIGN §7).
 *
 * Every decision the gateway takes becomes one record: a JSON object in a
 * restricted canonical form (RFC 8785 subset), chained by `prev`, numbered by
 * a contiguous `seq`, and hashed into an RFC 6962 Merkle tree whose roots are
 * signed as C2SP tlog checkpoints with Ed25519. Records live in SQLite (WAL,
 * synchronous=FULL) written by one writer thread with group commit; a
 * checkpoint is signed only after the FULL commit of the rows it covers.
 *
 * This is a leaf module: functions return 0/-1 with errno (or NULL) and fill a
 * caller buffer `err, errlen` with a message; nothing here logs or exits.
 *
 * The header is organised in sections; each is owned by one file:
 *   canonical JSON   audit/canon.c
 *   merkle           audit/merkle.c
 *   keys, notes      audit/ckpt.c
 *   the writer       audit/writer.c (+ audit/store.c, private)
 *   verification     audit/verify.c (+ proofs)
 *   shipping         audit/ship.c (a wrapper over the sinks)
 *   OCSF             audit/ocsf.c
 *   SOC sinks        audit/sink.c
 */
#ifndef SLUICE_AUDIT_AUDIT_H
#define SLUICE_AUDIT_AUDIT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define AUD_HASH_LEN	32
#define AUD_FORMAT	"sluice-audit/1"
/* Integers in records stay within what every JSON consumer reads exactly. */
#define AUD_INT_MAX	9007199254740991LL
/* Nesting deeper than this is refused by the writer and the parser. */
#define AUD_MAX_DEPTH	32
/* A canonical record larger than this is refused (and flagged by verify). */
#define AUD_MAX_RECORD	(1024 * 1024)

/* ---- canonical JSON (audit/canon.c) ---- */

/*
 * aud_canon_dump: serialise v in the canonical subset. Returns a malloc'd
 * NUL-terminated buffer (caller frees) and its length in *lenp, or NULL with
 * errno EINVAL and a message when v holds a real, a key outside [a-z0-9_],
 * a string with NUL or invalid UTF-8, an integer beyond ±(2^53-1), or nesting
 * deeper than AUD_MAX_DEPTH.
 */
char	*aud_canon_dump(const json_t *v, size_t *lenp, char *err, size_t errlen);
/*
 * aud_canon_parse: strict parser. Accepts buf only if it is exactly the
 * canonical serialisation of the value it denotes (it re-serialises and
 * compares byte for byte). Returns a new reference or NULL, errno EINVAL.
 */
json_t	*aud_canon_parse(const char *buf, size_t len, char *err, size_t errlen);

/*
 * aud_cw: canonical bytes written value by value into the caller's fixed
 * buffer, for producers that make records at the rate of packets or
 * queries (the DNS proxy) and cannot afford a JSON tree per record. The
 * caller writes structure and keys itself, keys in bytewise order;
 * aud_submit_canon checks the whole result before it is logged, so a
 * mistake is refused, never logged. A write that does not fit sets
 * overflow and writes nothing more.
 */
struct aud_cw {
	char	*p;
	size_t	 len, cap;
	int	 overflow;
};
void	aud_cw_init(struct aud_cw *w, char *mem, size_t cap);
/* Bytes as they are: punctuation and keys ("{\"key\":"). */
void	aud_cw_raw(struct aud_cw *w, const char *s, size_t n);
/* A string value with its quotes and minimal escapes. -1 (w unchanged)
 * when s[0..n) holds NUL or invalid UTF-8, which no canonical string can
 * carry. */
int	aud_cw_str(struct aud_cw *w, const char *s, size_t n);
/* An integer value; -1 (w unchanged) beyond ±(2^53-1). */
int	aud_cw_int(struct aud_cw *w, long long v);

/* ---- merkle (audit/merkle.c): RFC 6962 / RFC 9162 hashing ---- */

/* SHA-256(data) */
void	aud_sha256(const void *data, size_t len, uint8_t out[AUD_HASH_LEN]);
/* SHA-256(0x00 || data) */
void	aud_leaf_hash(const void *data, size_t len, uint8_t out[AUD_HASH_LEN]);
/* SHA-256(0x01 || l || r) */
void	aud_node_hash(const uint8_t l[AUD_HASH_LEN], const uint8_t r[AUD_HASH_LEN],
	    uint8_t out[AUD_HASH_LEN]);

/* The frontier of an append-only tree: at most 64 perfect-subtree roots. */
struct aud_tree;
/* aud_tree_new: an empty tree (caller frees), NULL if out of memory. */
struct aud_tree	*aud_tree_new(void);
/* aud_tree_free: NULL is a no-op. */
void		 aud_tree_free(struct aud_tree *t);
/* aud_tree_dup: an independent copy (caller frees), NULL if out of memory. */
struct aud_tree	*aud_tree_dup(const struct aud_tree *t);
/* aud_tree_size: the number of leaves. */
uint64_t	 aud_tree_size(const struct aud_tree *t);
/* Root of the tree (SHA-256("") when empty). */
void		 aud_tree_root(const struct aud_tree *t, uint8_t out[AUD_HASH_LEN]);
/*
 * aud_tree_append: add one leaf hash. cb (may be NULL) is called for every
 * perfect subtree root of level >= 1 that becomes complete, with the level
 * and the index of that subtree within its level.
 */
typedef void (*aud_node_cb)(void *arg, unsigned level, uint64_t idx,
    const uint8_t hash[AUD_HASH_LEN]);
int	aud_tree_append(struct aud_tree *t, const uint8_t leaf[AUD_HASH_LEN],
	    aud_node_cb cb, void *arg);
/*
 * The hash source used to rebuild state and make proofs: returns in out the
 * root of the perfect subtree (level, idx) (level 0 = leaf hash), 0 or -1.
 */
typedef int (*aud_subtree_fn)(void *arg, unsigned level, uint64_t idx,
    uint8_t out[AUD_HASH_LEN]);
/* aud_tree_load: set t to the tree of `size` leaves using fn. 0 or -1. */
int	aud_tree_load(struct aud_tree *t, uint64_t size, aud_subtree_fn fn,
	    void *arg);
/* aud_root_at: root of the first `size` leaves. 0 or -1. */
int	aud_root_at(uint64_t size, aud_subtree_fn fn, void *arg,
	    uint8_t out[AUD_HASH_LEN]);
/* Proofs hold at most 64 hashes; *n receives the count. 0 or -1 (EINVAL). */
int	aud_inclusion_proof(uint64_t idx, uint64_t size, aud_subtree_fn fn,
	    void *arg, uint8_t proof[][AUD_HASH_LEN], size_t *n);
int	aud_inclusion_verify(uint64_t idx, uint64_t size,
	    const uint8_t leaf[AUD_HASH_LEN], const uint8_t proof[][AUD_HASH_LEN],
	    size_t n, const uint8_t root[AUD_HASH_LEN]);
int	aud_consistency_proof(uint64_t m, uint64_t size, aud_subtree_fn fn,
	    void *arg, uint8_t proof[][AUD_HASH_LEN], size_t *n);
int	aud_consistency_verify(uint64_t m, uint64_t size,
	    const uint8_t root_m[AUD_HASH_LEN], const uint8_t root_n[AUD_HASH_LEN],
	    const uint8_t proof[][AUD_HASH_LEN], size_t n);

/* ---- keys and signed notes (audit/ckpt.c) ---- */

/* An Ed25519 key with its name (the log origin); private part optional. */
struct aud_key;
/* aud_key_new: a fresh private key named name. NULL on failure. */
struct aud_key	*aud_key_new(const char *name, char *err, size_t errlen);
/* aud_key_from_seed: a private key from a 32-byte RFC 8032 seed. */
struct aud_key	*aud_key_from_seed(const char *name, const uint8_t seed[32],
		    char *err, size_t errlen);
/* aud_key_load: PKCS#8 PEM private key from path, named name. Refused
 * (EACCES, with the reason) unless the file is regular, owned by the
 * effective uid and without any group or other permission bits. */
struct aud_key	*aud_key_load(const char *path, const char *name, char *err,
		    size_t errlen);
/* aud_key_from_vkey: public key from "name+hexid+base64(0x01||pub)"; the
 * key ID must match the name and key. */
struct aud_key	*aud_key_from_vkey(const char *vkey, char *err, size_t errlen);
void		 aud_key_free(struct aud_key *k);
/* aud_key_save: write the private key as PKCS#8 PEM, mode 0600, O_EXCL. */
int		 aud_key_save(const struct aud_key *k, const char *path, char *err,
		    size_t errlen);
/* aud_key_vkey: the verifier key string into buf. 0, or -1 (ERANGE). */
int		 aud_key_vkey(const struct aud_key *k, char *buf, size_t len);
/* aud_key_name: the key name (borrowed, lives as long as k). */
const char	*aud_key_name(const struct aud_key *k);
/* aud_key_id: the signed-note key ID. */
uint32_t	 aud_key_id(const struct aud_key *k);
/* SHA-256(name || 0x0A || 0x01 || pub)[:4], big-endian. */
uint32_t	 aud_keyid(const char *name, const uint8_t pub[32]);

/*
 * aud_note_sign: sign text (which must end in "\n") with k (private). Returns
 * a malloc'd signed note: text, "\n", "— name base64(id||sig)\n".
 */
char	*aud_note_sign(const struct aud_key *k, const char *text, char *err,
	    size_t errlen);
/* aud_ckpt_body: "origin\nsize\nbase64(root)\n" into a malloc'd string. */
char	*aud_ckpt_body(const char *origin, uint64_t size,
	    const uint8_t root[AUD_HASH_LEN]);

struct aud_ckpt {
	char		origin[256];
	uint64_t	size;
	uint8_t		root[AUD_HASH_LEN];
	int		nverified;	/* signatures verified by the given keys */
	uint32_t	signer_ids[16];	/* key IDs that verified */
};
/*
 * aud_ckpt_parse: parse a signed checkpoint byte-exact (no extension lines)
 * and check its signatures against keys[0..nkeys). Signatures by unknown keys
 * are ignored; a signature by a known key that fails makes the whole note
 * fail. Returns 0 with out filled; -1 with errno EINVAL (malformed) or
 * EBADMSG (a known key's signature is bad). With nkeys > 0 and no valid
 * signature, returns -1 with errno EPERM.
 */
int	aud_ckpt_parse(const char *note, size_t len, struct aud_key *const *keys,
	    size_t nkeys, struct aud_ckpt *out, char *err, size_t errlen);

/* ---- the writer (audit/writer.c) ----
 *
 * Every record carries v (1), origin, seq (= Merkle leaf index), prev (hex
 * rec_hash of seq-1, 64 zeros for seq 0), ts and mono (nanoseconds as
 * decimal strings: they exceed the ±(2^53-1) integers of the canonical
 * subset) and kind, plus the producer's fields. Kinds: sandbox.create,
 * sandbox.delete, sandbox.expire, sandbox.adopt, policy.reload,
 * egress.decision, net.deny, net.flow (its fields: gateway/flowrec.h),
 * dns.decision, mcp.intent (a tool call about to be forwarded, durable
 * before it is), mcp.call (its outcome, or a call refused before
 * forwarding; call_id pairs the two), mcp.outcome_unknown (an intent whose
 * outcome was never recorded, closed by the daemon when the bridge process
 * or the daemon itself went away first), mcp.resource, mcp.prompt,
 * mcp.server_request (an upstream's request of the client: its method,
 * what it asked, the decision), mcp.approval (a person on this host
 * decided a call another host of the fleet holds), finding, log.open,
 * log.gap, log.key, log.heartbeat, log.close. Conventional fields, which the
 * index columns and OCSF read: sandbox {id, run}, policy {id, version,
 * sha256, rule}, decision ("allow"|"deny"|"ask"|"log"), reason, dst {host,
 * ip, port}, server, tool (a resource record's uri, a prompt record's
 * prompt) (reference/audit.md §3.3).
 */

#define AUD_LINGER_NONE	UINT_MAX

struct aud_opts {
	const char	*db_path;
	const char	*origin;	/* NULL: take it from an existing DB */
	const char	*key_path;	/* NULL: no checkpoints are signed */
	unsigned	 batch_max;	/* records per commit; 0 = 4096 */
	unsigned	 batch_usec;	/* extra wait to fill a batch; 0 = none:
					 * a batch is what queued during the
					 * previous commit */
	unsigned	 async_linger_usec;	/* how long a batch of async
					 * records only waits to grow;
					 * 0 = 10000, AUD_LINGER_NONE = none */
	unsigned	 queue_max;	/* pending records; 0 = 65536 */
	unsigned	 ckpt_ms;	/* min interval between checkpoints; 0 = 1000 */
	unsigned	 ckpt_every;	/* records that force one; 0 = 4096 */
	/*
	 * Bytes held back on the database's volume (a file <db>.reserve)
	 * for the records that must never be refused; 0 = none. When the
	 * volume is full the reserve is given back and the log is
	 * constrained (aud_space): until there is room for the reserve
	 * again, only durable records other than sandbox.create and the
	 * log's own (log.*) are written; async records are counted and
	 * written as one log.gap, reason disk_full.
	 */
	uint64_t	 reserve_bytes;
};

struct aud_log;
/*
 * aud_open: open or create the log, recover after a crash (rebuild the
 * frontier, check the newest checkpoint against it) and append log.open.
 * Starts the writer thread. NULL with errno and a message on failure,
 * including a log whose stored tree or checkpoint disagrees with its records.
 */
struct aud_log	*aud_open(const struct aud_opts *o, char *err, size_t errlen);
/* aud_close: writes log.close and a final checkpoint, stops the writer and
 * runs every pending callback. Returns the number of accepted records that
 * are neither in the log nor counted in a log.gap (0 unless the database
 * refused even the final gap, e.g. locked or full at shutdown), for the
 * caller to report. NULL is a no-op (0). Every thread that submits must
 * have returned from its last submit first (a submit touches l after its
 * record is queued). */
uint64_t	 aud_close(struct aud_log *l);
/*
 * aud_submit_async: queue one record; never blocks on I/O. fields (a JSON
 * object, always stolen) holds kind-specific fields; the writer adds v,
 * origin, seq, prev, ts, mono and kind. -1 with EINVAL for an unknown kind or
 * fields outside the canonical subset, EAGAIN when the queue is full (the
 * drop is counted and later written as one log.gap), ENOMEM when memory ran
 * out (fields NULL included: a converter's allocation failure; counted the
 * same way, and written as a log.gap with reason out_of_memory with the
 * next batch or at close), EPIPE after close.
 */
int	aud_submit_async(struct aud_log *l, const char *kind, json_t *fields);
/*
 * aud_submit_canon: as aud_submit_async, with fields given as the canonical
 * bytes of an object (len bytes at body, copied; see aud_cw). They are
 * checked in one pass, as the verifier checks them: -1 with EINVAL when
 * they are not canonical, not an object or name a reserved member (not
 * counted: the caller still holds the record), ENOMEM (counted) as above.
 */
int	aud_submit_canon(struct aud_log *l, const char *kind, const char *body,
	    size_t len);
/*
 * aud_submit_durable: as aud_submit_async, but done(arg, ok, seq) runs in the
 * thread that calls aud_dispatch() after the FULL commit holding the record
 * (ok = 1) or once it is known that it could not be written (ok = 0). On -1
 * done is never called. A full queue (EAGAIN) or a lack of memory (ENOMEM;
 * EINVAL for fields NULL) is refused, not counted as gap: the caller must
 * then not act.
 */
typedef void (*aud_done_fn)(void *arg, int ok, uint64_t seq);
int	aud_submit_durable(struct aud_log *l, const char *kind, json_t *fields,
	    aud_done_fn done, void *arg);
/* aud_notify_fd: an eventfd readable while completions are pending. */
int	aud_notify_fd(const struct aud_log *l);
/* aud_dispatch: run the pending done callbacks in the calling thread. */
void	aud_dispatch(struct aud_log *l);
/* aud_heartbeat: append log.heartbeat and force a checkpoint after it. As
 * aud_submit_async: a heartbeat refused for a full queue or memory is
 * counted in a log.gap. */
int	aud_heartbeat(struct aud_log *l);
/* aud_sync: block until everything queued so far is committed (tests, CLI). */
int	aud_sync(struct aud_log *l);
/* Counters: records dropped for a full queue so far, and the next seq. */
uint64_t aud_dropped(const struct aud_log *l);
uint64_t aud_next_seq(const struct aud_log *l);
/* The state of the log's volume as the writer sees it (aud_space). */
struct aud_space_info {
	int		constrained;	/* the reserve was used: only what
					 * must be written is */
	int		reserve_held;	/* the reserve file is in place */
	uint64_t	reserve_bytes;	/* its configured size */
	uint64_t	skipped;	/* async records not written for
					 * want of space, ever */
	uint64_t	released;	/* times the reserve was given up */
};
/* aud_space: a snapshot into out; any thread. */
void	aud_space(const struct aud_log *l, struct aud_space_info *out);
/* aud_volume_space: free bytes (what an unprivileged writer may use) and
 * size of the volume holding path (a file or directory that exists, e.g.
 * the database). 0, or -1 with errno (statvfs). */
int	aud_volume_space(const char *path, uint64_t *avail, uint64_t *total);
/* aud_kind_valid: 1 if kind is a record kind this log accepts. */
int	aud_kind_valid(const char *kind);

/* ---- verification and proofs (audit/verify.c) ---- */

enum {
	AUD_VERIFIED = 0,
	AUD_TAMPERED = 1,
	AUD_ERROR = 2,
	AUD_WARNINGS = 3,
};

struct aud_verify_opts {
	const char	 *db_path;
	const char	**vkeys;	/* pinned verifier keys */
	size_t		  nvkeys;
	const char	**ext_ckpts;	/* external checkpoint notes (text) */
	size_t		  next_ckpts;
};
/*
 * aud_verify: every check of reference §3.8, in order, on the DB opened
 * read-only. Returns AUD_VERIFIED, AUD_TAMPERED, AUD_ERROR or AUD_WARNINGS
 * and sets *report (caller owns) to {result, assurance, size, root, checks[],
 * first_failure{seq,check,detail}, unsealed_tail, gaps, claims, warnings[]}.
 */
int	aud_verify(const struct aud_verify_opts *o, json_t **report);

/* aud_latest_checkpoint: the newest stored note (malloc'd) or NULL. */
char	*aud_latest_checkpoint(const char *db_path, char *err, size_t errlen);
/*
 * aud_proof: a c2sp.org/tlog-proof@v1 for record seq against the newest
 * stored checkpoint, with extra = base64(canon). malloc'd text or NULL.
 */
char	*aud_proof(const char *db_path, uint64_t seq, char *err, size_t errlen);
/*
 * aud_check_proof: check a tlog-proof with key: checkpoint signature, the
 * canonical form of extra, its seq == index, inclusion in the root. On
 * success returns 0 and, if canon is not NULL, a new reference to the record.
 */
int	aud_check_proof(const char *proof, size_t len, struct aud_key *key,
	    json_t **canon, char *err, size_t errlen);

/* ---- shipping (audit/ship.c) ---- */

/*
 * aud_ship_file: one-shot file sink, a wrapper over aud_sink_new (type
 * AUD_SINK_FILE) and aud_sink_ship, sharing the sink's cursor rows: append
 * up to max records from sink's cursor to path (created 0600, a regular
 * file; a relative path is taken from the working directory) as NDJSON --
 * the canon bytes, or OCSF events if ocsf -- each checkpoint right after
 * record size-1 ({"checkpoint":note,"size":N}, or an OCSF event; one signed
 * after its record went out comes first in a later call); fsync,
 * then advance the cursor, batch by batch. At-least-once: a crash before
 * the cursor moves re-sends (dedupe on origin#seq). sink is a sink name,
 * [a-z0-9][a-z0-9_-]{0,31}. Returns the number of records shipped, or -1
 * with errno and a message (batches acknowledged before the failure stay
 * acknowledged).
 */
int64_t	aud_ship_file(const char *db_path, const char *sink, const char *path,
	    int ocsf, size_t max, char *err, size_t errlen);

/* ---- OCSF (audit/ocsf.c) ---- */

/*
 * aud_ocsf: the OCSF 1.8.0 event for one canonical record (new reference)
 * or NULL (EINVAL) if canon is not a valid record.
 */
json_t	*aud_ocsf(const char *canon, size_t len, char *err, size_t errlen);

/* ---- SOC sinks (audit/sink.c) ----
 *
 * One shipper thread per sink delivers the log from its own durable cursor
 * (the ship_cursor row named after the sink) to a file, a syslog receiver or
 * an HTTP webhook, in plain canonical JSON or OCSF 1.8, and advances the
 * cursor only after a positive acknowledgement: at-least-once, receivers
 * dedupe on origin#seq. Checkpoints ride the stream right after the record
 * they cover. The database is the buffer: a sink that is down costs the
 * writer nothing; its lag is exposed and, past lag_alert, reported once
 * through hooks.finding. The daemon translates its struct pol_sink into
 * struct aud_sink_conf.
 */
enum aud_sink_type { AUD_SINK_FILE = 1, AUD_SINK_SYSLOG, AUD_SINK_WEBHOOK };
enum aud_sink_fmt { AUD_SINK_JSON = 1, AUD_SINK_OCSF };

struct aud_sink_conf {
	const char	*name;		/* [a-z0-9][a-z0-9_-]{0,31} */
	int		 type;		/* enum aud_sink_type */
	int		 format;	/* enum aud_sink_fmt; 0 = JSON */
	/*
	 * file: an absolute path (NDJSON, 0600, fsync'd before the cursor
	 * moves); syslog: "unix:/path" or "/path" (datagram), "udp://H:P" or
	 * "tcp://H:P" (RFC 6587 octet counting; H may be [v6]; P defaults to
	 * 514 / 601); webhook: an http:// or https:// URL (the HEC event
	 * endpoint, .../services/collector/event, when splunk_hec is set).
	 */
	const char	*target;
	int		 splunk_hec;	/* webhook: Splunk HEC events */
	const char	*token_file;	/* webhook: bearer or HEC token */
	uint64_t	 lag_alert;	/* records behind before a finding; 0 off */
	/* Tuning; 0 takes the default in brackets. */
	unsigned	 batch_max;	/* records per delivery [256] */
	unsigned	 timeout_ms;	/* per delivery, connect included [10000] */
	unsigned	 backoff_min_ms; /* first retry delay [200] */
	unsigned	 backoff_max_ms; /* retry delay cap [60000] */
	unsigned	 poll_ms;	/* wake without a kick [2000] */
};

/*
 * finding(arg, fields) runs in the shipper thread when the sink's lag first
 * exceeds lag_alert (once, re-armed when it falls to half of it). fields is
 * a new object (the callee owns it) meant for aud_submit_async(l, "finding",
 * fields): {finding:"sink.lag", sink, lag, threshold, head, next_seq,
 * reason}.
 */
struct aud_sink_hooks {
	void	(*finding)(void *arg, json_t *fields);
	void	 *arg;
};

struct aud_sink_stats {
	uint64_t	head;		/* records in the log when last looked */
	uint64_t	next_seq;	/* the durable cursor */
	uint64_t	lag;		/* head - next_seq */
	uint64_t	records;	/* records acknowledged since start */
	uint64_t	checkpoints;	/* checkpoints acknowledged */
	uint64_t	failures;	/* deliveries that failed */
	uint64_t	findings;	/* lag findings raised */
	int		up;		/* the last delivery succeeded */
	char		last_error[160];
};

struct aud_sink;
/*
 * aud_sink_new: check c, read the token file, open two connections to the
 * existing log at db_path (read-only for records and checkpoints; read-write
 * touching only ship_cursor) and load the cursor. No thread yet. hooks may
 * be NULL and is copied. NULL with errno (EINVAL for a bad conf, EIO for the
 * database) and a message.
 */
struct aud_sink	*aud_sink_new(const char *db_path, const struct aud_sink_conf *c,
		    const struct aud_sink_hooks *hooks, char *err, size_t errlen);
/* aud_sink_start: start the shipper thread. 0, or -1 with errno. */
int		 aud_sink_start(struct aud_sink *s, char *err, size_t errlen);
/* aud_sink_stop: stop and join the thread (an in-flight delivery ends
 * within timeout_ms, unacknowledged). No-op if not started. */
void		 aud_sink_stop(struct aud_sink *s);
/* aud_sink_free: stop, close and free. NULL is a no-op. */
void		 aud_sink_free(struct aud_sink *s);
/* aud_sink_kick: new records are committed; wake the shipper. Cheap, never
 * blocks on I/O, callable from any thread. */
void		 aud_sink_kick(struct aud_sink *s);
/*
 * aud_sink_ship: one delivery attempt in the calling thread (the sink must
 * not be started): up to batch_max records and their checkpoints. Returns
 * the number of records acknowledged (0: nothing to send), or -1 with errno
 * and a message; the lag finding is checked either way. For tests and a
 * one-shot CLI.
 */
int64_t		 aud_sink_ship(struct aud_sink *s, char *err, size_t errlen);
/* aud_sink_lag: head - cursor as last seen (for /metrics); any thread;
 * 0 for NULL. */
uint64_t	 aud_sink_lag(const struct aud_sink *s);
/* aud_sink_stats: a consistent snapshot into st (zeroed for NULL); any
 * thread. */
void		 aud_sink_stats(const struct aud_sink *s, struct aud_sink_stats *st);
/* aud_sink_name: the sink's name (borrowed, lives as long as s). */
const char	*aud_sink_name(const struct aud_sink *s);

#endif /* SLUICE_AUDIT_AUDIT_H */
