/*
 * sandbox: the sandboxes of sluiced, from their creation to their removal.
 * It exists to keep three things in step that live in different
 * places: the kernel (a pinned network namespace and veth pair from
 * netns/netns.h, set elements from netns/fw.h), the state database
 * (<state_dir>/state.db, so a restart finds what it made) and the daemon's
 * memory (an index by id and by pool slot, so the DNS proxy and the bridge
 * find the sandbox of a packet in O(1)). Every change to a sandbox goes
 * through here and is all or nothing across the three. It speaks no
 * HTTP: requests and answers are flat structs (struct sbx_spec, struct
 * sbx_info) and failures a closed enum (enum sbx_err), which the control
 * API (gateway/ctl/sandboxes.c) turns into JSON and statuses.
 *
 * The pure parts (validation of ids, labels, subjects and TTLs; the slot
 * allocator) are exposed for the unit tests; they never log. The manager
 * (struct sbx) runs in the daemon's one event loop. No action without a
 * record (DESIGN §7): each lifecycle event (sandbox.create, delete, expire,
 * adopt; orphan removal and policy re-application as findings) is committed
 * to the audit log (gateway/record.h, rec_commit: blocking, one group
 * commit) before the kernel is touched, and a record that cannot be
 * committed stops the action.
 */
#ifndef SLUICE_GATEWAY_SANDBOX_H
#define SLUICE_GATEWAY_SANDBOX_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "gateway/ev.h"
#include "gateway/gw.h"
#include "policy/policy.h"

#define SBX_ID_MAX		32	/* characters in an id */
#define SBX_SUBJECT_MAX		128	/* characters in a subject */
#define SBX_LABELS_MAX		16	/* labels per sandbox */
#define SBX_LABEL_KEY_MAX	63	/* characters in a label key */
#define SBX_LABEL_VALUE_MAX	128	/* characters in a label value */
#define SBX_POLICY_MAX		64	/* characters in a policy name */
#define SBX_TTL_MAX_S		(30u * 86400u)	/* 30 days */
#define SBX_TOKEN_HEX		64	/* 32 random bytes, hex */
#define SBX_SLOTS_MAX		(1u << 20)	/* pool slots we index */
#define SBX_ATTACH_MAX		127	/* characters in a namespace path */

/* ------------------------------------------------- pure: validation */

/* sbx_id_valid: 1 if id matches [a-z0-9][a-z0-9-]{0,31}, else 0. */
int	sbx_id_valid(const char *id);
/* sbx_subject_valid: 1 if s matches [A-Za-z0-9][A-Za-z0-9._@+:/-]{0,127}
 * (no spaces, no control or non-ASCII bytes, no glob characters), else 0. */
int	sbx_subject_valid(const char *s);
/* sbx_label_key_valid: 1 if k matches [a-z0-9][a-z0-9._/-]{0,62}. */
int	sbx_label_key_valid(const char *k);
/* sbx_label_value_valid: 1 if v is at most 128 characters of
 * [A-Za-z0-9._:/@+=-] (empty is allowed). */
int	sbx_label_value_valid(const char *v);

/* What a create refuses, word for word in both places that check it (the
 * control API's parser and sbx_spec_check). */
#define SBX_ID_WANT	 "id: want [a-z0-9][a-z0-9-]{0,31}"
#define SBX_SUBJECT_WANT "subject: required, want " \
			 "[A-Za-z0-9][A-Za-z0-9._@+:/-]{0,127}"
#define SBX_POLICY_WANT	 "policy: required (a policy name)"
#define SBX_ATTACH_WANT	 "attach: want the absolute path of a network " \
			 "namespace (at most 127 printable characters)"

/* sbx_labels_check: 0 if labels (borrowed; NULL or JSON null means none)
 * is an object of at most SBX_LABELS_MAX string members whose keys and
 * values are valid; else -1 with the first problem in err. */
int	sbx_labels_check(const json_t *labels, char *err, size_t errlen);

/* sbx_labels_json: the object of the n labels keys[i] = values[i], as a
 * spec or a view holds them, in that order. New reference, or NULL on
 * allocation failure or a value that is not UTF-8. */
json_t	*sbx_labels_json(size_t n, const char keys[][SBX_LABEL_KEY_MAX + 1],
	    const char values[][SBX_LABEL_VALUE_MAX + 1]);

/* sbx_ttl_parse: a TTL as a JSON integer of seconds or a string "<n>s",
 * "<n>m", "<n>h", "<n>d" or plain "<n>" (decimal, no sign or leading
 * zero). 1 .. SBX_TTL_MAX_S seconds. 0 and *secs set, or -1 with err. */
int	sbx_ttl_parse(const json_t *v, uint32_t *secs, char *err,
	    size_t errlen);
/* sbx_ttl_parse_str: the string form of sbx_ttl_parse. */
int	sbx_ttl_parse_str(const char *s, uint32_t *secs, char *err,
	    size_t errlen);

/* A create request: flat (no pointers), so that it can cross a process
 * boundary as it is. Strings are NUL-terminated within their arrays. */
struct sbx_spec {
	char		id[SBX_ID_MAX + 1];	/* "" draws one ("sb-<hex>") */
	char		policy[SBX_POLICY_MAX + 1];
	char		subject[SBX_SUBJECT_MAX + 1];
	size_t		nlabels;
	char		label_keys[SBX_LABELS_MAX][SBX_LABEL_KEY_MAX + 1];
	char		label_values[SBX_LABELS_MAX][SBX_LABEL_VALUE_MAX + 1];
	uint32_t	ttl_s;			/* 0: the config's default */
	/* "" makes a namespace; else the path of an existing one to wire
	 * (attach mode: the namespace is the provider's and stays). */
	char		attach[SBX_ATTACH_MAX + 1];
};

/* sbx_spec_check: 0 if spec is one a create can take as far as it alone
 * tells (every string terminated; id empty or valid; subject valid; at
 * most SBX_LABELS_MAX labels of valid keys, none twice, and values; ttl_s
 * at most SBX_TTL_MAX_S; a policy named), checked in that order; else -1
 * with the first problem in err. Whether the policy is loaded and the id
 * free is the manager's to say. */
int	sbx_spec_check(const struct sbx_spec *spec, char *err, size_t errlen);

/* ------------------------------------------------- pure: slot allocator */

/* A bitmap of pool slots. x_new/x_free; sbx_slots_free(NULL) is a no-op. */
struct sbx_slots;

/* sbx_slots_new: n slots (1..SBX_SLOTS_MAX), all free. NULL with errno. */
struct sbx_slots *sbx_slots_new(uint32_t n);
void		 sbx_slots_free(struct sbx_slots *s);
/* sbx_slots_alloc: takes the lowest free slot; -1 with ENOSPC when full. */
int64_t		 sbx_slots_alloc(struct sbx_slots *s);
/* sbx_slots_take: takes slot i (reserved, or adopted after a restart). 0, or
 * -1 with EINVAL (out of range) or EEXIST (already taken). */
int		 sbx_slots_take(struct sbx_slots *s, uint32_t i);
/* sbx_slots_put: frees slot i; freeing a free or out-of-range slot is a
 * no-op. */
void		 sbx_slots_put(struct sbx_slots *s, uint32_t i);
/* sbx_slots_used: 1 if slot i is taken, 0 otherwise (also out of range). */
int		 sbx_slots_used(const struct sbx_slots *s, uint32_t i);
uint32_t	 sbx_slots_count(const struct sbx_slots *s);

/* sbx_pool_slot: the slot whose sandbox address (.2 of the /30, see
 * ns_pool_addrs) is addr4 in the pool pool4/prefix, or -1 if addr4 is not a
 * sandbox address of that pool. Pure arithmetic; addresses in network byte
 * order. */
int64_t		 sbx_pool_slot(const uint8_t pool4[4], uint8_t prefix,
		    const uint8_t addr4[4]);
/* sbx_pool_nslots: slots the pool has for sandboxes (its last /30 is kept
 * for the service address), capped at SBX_SLOTS_MAX; 0 for a bad pool. */
uint32_t	 sbx_pool_nslots(uint8_t prefix);

/* sbx_cidr_subtract: appends to the growable array *out (*n used, *cap
 * allocated; start with NULL, 0, 0; the caller frees) the parts of c that
 * no range of t (nt entries; other families are ignored) covers, as CIDR
 * blocks, in address order. This is how treat_as_public reaches the
 * kernel's private sets. 0, or -1 with errno ENOMEM. */
int		 sbx_cidr_subtract(const struct pol_cidr *c,
		    const struct pol_cidr *t, size_t nt, struct pol_cidr **out,
		    size_t *n, size_t *cap);

/* ------------------------------------------------- the manager */

struct sbx;
struct fw;

/* Why the manager did not do what was asked. Closed: a caller maps every
 * value (gateway/ctl/sandboxes.c to statuses and error codes). From
 * SBX_ERR_POOL_FULL on, the fault is the daemon's, not the request's
 * (the manager counts those as failures). */
enum sbx_err {
	SBX_ERR_NONE = 0,
	SBX_ERR_INVALID,		/* the request breaks a rule */
	SBX_ERR_LIMIT,			/* the request is too large */
	SBX_ERR_NO_POLICY,		/* no policy of that name is loaded */
	SBX_ERR_EXISTS,			/* the id, or its namespace, is taken */
	SBX_ERR_NOT_FOUND,		/* no sandbox of that id */
	SBX_ERR_NETNS_BUSY,		/* the namespace to attach has a way
					 * out already */
	SBX_ERR_POOL_FULL,		/* max_sandboxes, or no free slot */
	SBX_ERR_AUDIT_UNAVAILABLE,	/* its record cannot be committed */
	SBX_ERR_KERNEL,			/* the kernel refused */
	SBX_ERR_STATE_DB,		/* the state database failed */
	SBX_ERR_INTERNAL,		/* no memory, no randomness, ... */
};
#define SBX_ERR_COUNT	(SBX_ERR_INTERNAL + 1)

/* sbx_err_name: the word the audit records give why (a refusal's reason,
 * the cause of a failed create), "?" outside the enum. The control API
 * answers with the same words (a unit test holds them together). */
const char	*sbx_err_name(enum sbx_err why);

/* A flat copy of what the DNS proxy and the bridge need to know about a
 * sandbox; no pointers into the manager, so it stays valid after the
 * sandbox is gone. */
struct sbx_view {
	char		id[SBX_ID_MAX + 1];
	char		ifname[16];		/* host side, "sl-<n>" */
	char		subject[SBX_SUBJECT_MAX + 1];
	char		policy[SBX_POLICY_MAX + 1];
	uint8_t		addr4[4];		/* network byte order */
	uint32_t	index;			/* pool slot */
	size_t		nlabels;
	char		label_keys[SBX_LABELS_MAX][SBX_LABEL_KEY_MAX + 1];
	char		label_values[SBX_LABELS_MAX][SBX_LABEL_VALUE_MAX + 1];
	bool		tainted;
	bool		attached;		/* the namespace is not ours */
	int64_t		expires;		/* unix time, 0 = never */
};

/* ------------------------------------------------- watchers
 *
 * A copy of the table kept elsewhere (the bridge's sessions, a DNS child's
 * own index) follows the manager through these calls instead of the
 * manager calling into it: the manager knows no module that watches it. */

#define SBX_WATCHERS	4	/* watchers per manager */

/* What a watcher hears: every change of the table a copy elsewhere must follow. */
struct sbx_watch {
	void	(*added)(void *ctx, const struct sbx_view *v);	/* created or adopted at start */
	void	(*removed)(void *ctx, const struct sbx_view *v);	/* deleted or expired; v is the last view */
	void	(*changed)(void *ctx, const struct sbx_view *v);	/* taint, policy (reapply), expiry changed */
	void	*ctx;
};

/* What the control API shows of a sandbox: its view and where it lives.
 * Flat, like the view. */
struct sbx_info {
	struct sbx_view	view;
	char		netns[48];		/* "sluice-<id>" */
	char		netns_path[128];	/* its pin */
	char		addr[16];		/* dotted quad of the sandbox */
	char		host_addr[16];		/* and of the host side */
	char		service_addr[16];	/* its DNS and bridge */
	uint16_t	bridge_port;
	int64_t		created;		/* unix time */
	uint32_t	gen;			/* fw_sandbox.gen */
	char		attached_from[SBX_ATTACH_MAX + 1]; /* "" unless attached */
	uint64_t	netns_dev, netns_ino;	/* the namespace's identity */
	uint64_t	idle_ms;		/* since its last activity (a DNS
						   query, a new flow, a bridge
						   request) */
	char		token[SBX_TOKEN_HEX + 1]; /* "" unless asked for */
};

/*
 * sbx_new: the sandbox manager, run at daemon start after the config and
 * the policies are loaded. In the caller's (host) network namespace it
 * prepares the host (ns_host_setup), installs or adopts the nftables table
 * (replacing it, with a warning, when the old one cannot be adopted), opens
 * <state_dir>/state.db (mode 0600) and reconciles: recorded sandboxes that
 * are whole are adopted, recorded ones that lost a piece are removed,
 * sandbox namespaces, links and table entries nobody recorded are removed
 * as orphans, expired ones are removed, and TTL timers are armed on loop.
 * Its records go to rec (NULL: none; every lifecycle event then fails
 * closed, as with the log down). gw, rec and loop are borrowed and must
 * outlive the manager. NULL with a message in err on failure (the daemon
 * should not serve then).
 */
struct rec;
struct sbx	*sbx_new(struct gw *gw, struct rec *rec, struct ev_loop *loop,
		    char *err, size_t errlen);
/* sbx_free: cancels timers, closes the database and the netlink socket.
 * The sandboxes stay (a restart adopts them). NULL is a no-op. */
void		 sbx_free(struct sbx *m);

/* sbx_reopen: opens the state database again, for the process that stays
 * after daemon(3) (SQLite connections must not cross a fork). -1 with err;
 * the manager must not be used then. */
int		 sbx_reopen(struct sbx *m, char *err, size_t errlen);

/*
 * sbx_create: makes the sandbox spec asks for (checked again here, see
 * sbx_spec_check). 0 and *out filled, with its token; or -1 with *why and
 * a message in err (which may quote the request: not necessarily UTF-8).
 * All or nothing: on any error nothing of the sandbox is left. A durable
 * sandbox.create record precedes any kernel change; when it cannot be
 * committed *why is SBX_ERR_AUDIT_UNAVAILABLE and nothing is made. A
 * refusal before that is recorded too (sbx_create_refused, no status),
 * and a failure after it by a second record (see sandbox.c). Blocks the
 * loop for one group commit.
 */
int		 sbx_create(struct sbx *m, const struct sbx_spec *spec,
		    struct sbx_info *out, enum sbx_err *why, char *err,
		    size_t errlen);
/* sbx_create_refused: the record (async: nothing was done on its account)
 * of a create refused before it was authorized, for the manager's own
 * refusals and for a caller that refused one before asking the manager.
 * spec holds what is known of the request (empty strings: nothing; NULL:
 * none of it), all of it untrusted; reason is the refusal's word
 * (sbx_err_name, or the caller's own), status what the caller answered,
 * 0 for none; msg the refusal's message. Recorded to m's recorder (m
 * NULL: none, the refusal goes unrecorded). */
void		 sbx_create_refused(struct sbx *m,
		    const struct sbx_spec *spec, const char *reason,
		    unsigned status, const char *msg);
/* sbx_delete: removes sandbox id everywhere (elements, namespace, row),
 * after its sandbox.delete record is durable, or, when the log cannot take
 * it, before it (the record follows, see rec_commit_after: the log never
 * keeps a sandbox alive). -1 with errno ENOENT for an unknown id, or EIO
 * with err when the kernel refuses (the sandbox is then kept, to be
 * retried, and a finding records it). */
int		 sbx_delete(struct sbx *m, const char *id, char *err,
		    size_t errlen);

/* sbx_watch_add: w is copied; at most SBX_WATCHERS (4). Called in registration order, on the loop thread, after the change is in the kernel and the table. -1 with ENOSPC. */
int	sbx_watch_add(struct sbx *m, const struct sbx_watch *w);
/* sbx_watch_del: removes the watchers added with ctx, so that a module
 * freed before the manager is not called any more. None is a no-op. */
void	sbx_watch_del(struct sbx *m, const void *ctx);
/* sbx_foreach: fn for every sandbox now, in slot order (to seed a copy). */
void	sbx_foreach(const struct sbx *m, void (*fn)(void *ctx, const struct sbx_view *v), void *ctx);

/* sbx_get: what the control API shows of sandbox id, its token only
 * with with_token. 0, or -1 with ENOENT. */
int		 sbx_get(const struct sbx *m, const char *id, int with_token,
		    struct sbx_info *out);

/* sbx_pid_sandbox: 1 when process pid must not use the control API: it
 * is in a sandbox's network namespace (*out, if given, names it; else
 * out->id is empty), in a network namespace of a user namespace other
 * than the daemon's (one sandboxed code can make itself without any
 * privilege), or its namespaces cannot be read (it exited). 0 when it is
 * in the daemon's network namespace, or in none of the sandboxes' and in
 * the daemon's user namespace. */
int		 sbx_pid_sandbox(const struct sbx *m, pid_t pid,
		    struct sbx_view *out);

/* sbx_note: commits the record of an event of kind (a finding type such
 * as sandbox.control_refused) about sandbox id, with its fields (none
 * when no such sandbox exists) and detail printf(fmt, ...), and logs it.
 * 0 once it is durable, else -1. */
int		 sbx_note(struct sbx *m, const char *kind, const char *id,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* sbx_count: sandboxes that exist now. */
size_t		 sbx_count(const struct sbx *m);
/* sbx_metrics_print: the sluice_sandboxes gauge and the
 * sluice_sandbox_{creates,deletes,failures}_total counters, Prometheus
 * text with HELP and TYPE lines. */
void		 sbx_metrics_print(const struct sbx *m, FILE *fp);

/* sbx_lookup_addr4: the sandbox whose own address is addr4 (network byte
 * order), O(1). 0 and *out filled, or -1 with ENOENT. */
int		 sbx_lookup_addr4(const struct sbx *m, const uint8_t addr4[4],
		    struct sbx_view *out);
/* sbx_lookup_id: the same by id. */
int		 sbx_lookup_id(const struct sbx *m, const char *id,
		    struct sbx_view *out);
/* sbx_lookup_ifname: the same by host link name ("sl-<n>"). */
int		 sbx_lookup_ifname(const struct sbx *m, const char *ifname,
		    struct sbx_view *out);
/* sbx_token_ok: 1 if token is the bearer token of sandbox id (compared in
 * constant time), else 0 (also for an unknown id or a NULL token). */
/* sbx_token_digest: SHA-256 of sandbox id's bearer token into out, for a
 * process that checks tokens without holding them. 0, or -1 with errno
 * ENOENT (no such sandbox). */
int		 sbx_token_digest(const struct sbx *m, const char *id,
		    uint8_t out[32]);
int		 sbx_token_ok(const struct sbx *m, const char *id,
		    const char *token);
/* sbx_counter_get / sbx_counter_set: a named counter of the state
 * database, kept for other parts of the daemon (durable once set returns,
 * as every write of that database). get gives 0 for one never set. 0, or
 * -1 with errno EIO. */
int		 sbx_counter_get(struct sbx *m, const char *name,
		    uint64_t *v);
int		 sbx_counter_set(struct sbx *m, const char *name,
		    uint64_t v);

/* sbx_taint: narrows sandbox id to its policy's taint keep-list at once
 * (fw_restrict) and records the taint in the state database, so a restart
 * keeps it. Idempotent. -1 with errno (ENOENT unknown id) and err. */
int		 sbx_taint(struct sbx *m, const char *id, char *err,
		    size_t errlen);

/*
 * sbx_reapply: after a successful reload (gw_reload calls it once the new
 * set is in force), brings every sandbox to its policy in that set: a
 * policy whose file changed (pol_policy_digest) has its static egress
 * elements replaced in the kernel in one batch (learned elements and a
 * taint restriction stay), after a durable finding of type
 * sandbox.policy_update (old and new digest); a policy gone from the set leaves the sandbox on
 * the snapshot it was running under (its rules unchanged) with a
 * sandbox.policy_removed finding. A sandbox that cannot be updated (the
 * record or the kernel refused) stays on its old rules, with a finding,
 * and the next reload tries again. Returns how many sandboxes stay on
 * their old rules so (0 for NULL), for the reload to report.
 */
size_t		 sbx_reapply(struct sbx *m);

/* ------------------------------------------------- resources
 * (gateway/sandbox_limits.c) */

#define SBX_CGROUPS_MAX	3	/* groups of one sandbox (cgroup v1: 3) */

/* What `sluice exec` and `sluice run` need to hold a command to the
 * sandbox's resources: the directories of its cgroups (the command joins
 * each; none when the host has no usable tree) and its timeout. */
struct sbx_limits {
	size_t		ncgroups;
	char		cgroup[SBX_CGROUPS_MAX][512];
	uint64_t	timeout_s;	/* 0: none */
};
/* sbx_exec_limits: those of sandbox id. 0, or -1 with ENOENT, or EIO
 * when its policy sets cgroup limits and it has no cgroup (the command
 * must not run then). */
int		 sbx_exec_limits(const struct sbx *m, const char *id,
		    struct sbx_limits *out);
/* sbx_touch_addr4, sbx_touch_id: the sandbox of addr4 (its own address,
 * network byte order) or id was active now (a DNS query, a new flow, a
 * bridge request): its idle expiry starts again. O(1); an unknown one is
 * ignored. */
void		 sbx_touch_addr4(const struct sbx *m, const uint8_t addr4[4]);
void		 sbx_touch_id(const struct sbx *m, const char *id);
/* sbx_budget_denied: the kernel denied a packet of sandbox id for a spent
 * byte budget: at most once a second per sandbox, the budgets it spent
 * are looked up and each newly spent one recorded once per window (a
 * finding "egress.budget_exhausted"). */
void		 sbx_budget_denied(const struct sbx *m, const char *id);
/* sbx_learn_budget: sets e->budget from the policy of e's sandbox (the
 * first host rule for e->name whose ports hold e's), whatever the DNS
 * process said: which budget a destination is charged to is the
 * parent's decision. 0; -1 (EPERM) when that budget has no kernel object
 * in the sandbox (the learn is refused). */
struct fw_elem;
int		 sbx_learn_budget(const struct sbx *m, struct fw_elem *e);

/* sbx_fw: the nftables handle (borrowed), for the DNS proxy's fw_learn. */
struct fw	*sbx_fw(struct sbx *m);

#endif /* SLUICE_GATEWAY_SANDBOX_H */
