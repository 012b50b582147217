/*
 * sandbox_int.h: what the files of the sandbox manager share and nobody else
 * sees: the record kept per sandbox in the state database, the database
 * calls (gateway/sandbox_db.c), the manager's state (struct sbx, struct
 * sandbox) and the calls one of its files makes into another. The netlink
 * question reconciliation asks (is a pinned namespace ours?) is netns/'s
 * ns_nsid: gateway/ never speaks netlink itself. Public API:
 * gateway/sandbox.h.
 */
#ifndef SLUICE_GATEWAY_SANDBOX_INT_H
#define SLUICE_GATEWAY_SANDBOX_INT_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gateway/cgroup.h"
#include "gateway/gw.h"
#include "gateway/sandbox.h"
#include "netns/fw.h"
#include "netns/netns.h"

/* One row of the sandboxes table. */
struct sbx_rec {
	char		id[SBX_ID_MAX + 1];
	char		policy[SBX_POLICY_MAX + 1];
	char		subject[SBX_SUBJECT_MAX + 1];
	/* Compact JSON object: room for the most sbx_labels_check allows
	 * (16 members of 63 + 128 characters, none needing an escape). */
	char		labels[4096];
	uint32_t	index;
	char		addr[16];		/* dotted quad of the sandbox */
	char		host_addr[16];		/* dotted quad of the host side */
	char		token[SBX_TOKEN_HEX + 1];
	int64_t		created, expires;	/* unix time; expires 0 = never */
	int		tainted;
	/* Generation (netns/fw.h, fw_sandbox.gen): nonzero, drawn from the
	 * database's counter (sbx_db_gen_reserve) and never drawn again;
	 * 0 only in a row written before generations existed. */
	uint32_t	gen;
	/* Attach mode (sandbox_attach.c): the namespace is a provider's,
	 * known by its identity; prior is what ns_attach changed in it
	 * (NS_PRIOR_*), for the removal to set back, after a restart too. */
	int		attached;
	uint32_t	prior;
	uint64_t	ns_dev, ns_ino;
	char		attach_src[SBX_ATTACH_MAX + 1];
};

/* sbx_policy_name_valid: 1 if s is a name a loaded policy can have
 * ([a-z0-9][a-z0-9_-]{0,63}), else 0. */
int		 sbx_policy_name_valid(const char *s);
/* sbx_rec_valid: 0 if every field of r that does not depend on the pool
 * is one a create can write: id, policy name, subject, labels (a JSON
 * object sbx_labels_check accepts), token (64 lowercase hex digits),
 * created (> 0), expires (0, or after created by at most a TTL's
 * 2^32 - 1 seconds), tainted (0 or 1). Else -1 with errno EINVAL and the
 * first problem in err (which quotes no field of r), or ENOMEM when the
 * labels could not be parsed for lack of memory (nothing is known of the
 * row then). The slot and addresses are the caller's to check against its
 * pool. */
int		 sbx_rec_valid(const struct sbx_rec *r, char *err,
		    size_t errlen);

struct sqlite3;

/* sbx_db_open: opens (creating it mode 0600) the state database at path
 * and its table. NULL with err on failure. */
struct sqlite3	*sbx_db_open(const char *path, char *err, size_t errlen);
/* sbx_db_close: NULL is a no-op. */
void		 sbx_db_close(struct sqlite3 *db);
/* sbx_db_insert: one row, durable on return. -1 with err (EEXIST for a
 * duplicate id or index). */
int		 sbx_db_insert(struct sqlite3 *db, const struct sbx_rec *r,
		    char *err, size_t errlen);
/* sbx_db_purge: deletes the rows holding id or slot index (stale rows a
 * failed delete left behind; the caller knows both free). 0, or -1 with
 * err. */
int		 sbx_db_purge(struct sqlite3 *db, const char *id,
		    uint32_t index, char *err, size_t errlen);
/* sbx_db_delete: the row of id; a missing row is not an error. */
int		 sbx_db_delete(struct sqlite3 *db, const char *id, char *err,
		    size_t errlen);
/* sbx_db_set_tainted: marks id tainted. */
int		 sbx_db_set_tainted(struct sqlite3 *db, const char *id,
		    char *err, size_t errlen);
/* sbx_db_gen_reserve: takes up to n generations for this process, durably
 * before any is used: [*first, *first + *got). The counter only grows,
 * and starts above every generation a row holds, so no generation is ever
 * given twice, across restarts too. 0, or -1 with err (ERANGE once the
 * 32-bit space is spent). */
int		 sbx_db_gen_reserve(struct sqlite3 *db, uint32_t n,
		    uint32_t *first, uint32_t *got, char *err, size_t errlen);
/* sbx_db_set_gen: stores gen in the row of id (a row written before
 * generations gets one when it is adopted). */
int		 sbx_db_set_gen(struct sqlite3 *db, const char *id,
		    uint32_t gen, char *err, size_t errlen);
/* sbx_db_load: calls cb for each row (in index order). A row whose columns
 * do not fit a struct sbx_rec is still reported, with bad = 1, so the
 * caller can remove what it names. Returns rows seen, or -1 with err. */
int		 sbx_db_load(struct sqlite3 *db,
		    void (*cb)(const struct sbx_rec *r, int bad, void *arg),
		    void *arg, char *err, size_t errlen);

/* ------------------------------------------------- the manager's state
 * What the files of the manager share: the table (sandbox_table.c), its
 * entries, and the functions one file calls in another. */

#define SBX_HASH	1024		/* id hash buckets */

struct leftover;

struct sandbox {
	struct sbx_rec	 rec;
	struct ns_spec	 spec;
	struct fw_sandbox fsb;
	json_t		*labels;	/* object, never NULL */
	struct ev_timer	*timer;		/* TTL, or NULL */
	struct gw_pset	*ps;		/* the set its statics came from */
	int		 orphaned;	/* its policy left the set in force */
	int		 taint_logged;	/* its sandbox.taint is durable */
	/* Its network namespace's identity, taken when it was made or
	 * adopted: what sbx_pid_sandbox compares callers against, so that
	 * the check needs no file and holds while the namespace lives, even
	 * when its name under netns_dir is gone. */
	int		 ns_known;
	dev_t		 ns_dev;
	ino_t		 ns_ino;
	/* Attached: the namespace held open while the sandbox lives, so
	 * that removal acts on that namespace and no other. -1 otherwise. */
	int		 att_fd;
	struct sbx	*m;
	struct sandbox	*hnext;		/* id hash chain */
	/* resources (sandbox_limits.c): its cgroup exists, the kernel's
	 * counters at the last look, its last activity (ev_now_ms) and
	 * the idle timer. */
	int		 cg;
	struct cg_events ev_seen;
	uint64_t	 active_ms;
	struct ev_timer	*idle_timer;
	/* byte budgets (sandbox_budget.c): when each windowed budget
	 * starts again (ev_now_ms, 0 = no window), which are spent in
	 * this window (bit k, FW_BUDGET_TAINT as bit 31: recorded once),
	 * the last look after a budget denial, and the window timer. */
	uint64_t	 budget_next_ms[FW_MAX_BUDGETS];
	uint32_t	 budget_spent;
	uint64_t	 budget_look_ms;
	struct ev_timer	*budget_timer;
};

struct sbx {
	struct gw		*gw;
	struct rec		*rec;		/* borrowed, may be NULL */
	struct ev_loop		*loop;
	const struct pol_config	*cfg;
	struct fw		*fw;
	struct ct		*ct;		/* conntrack, host namespace */
	struct sqlite3		*db;
	struct sbx_slots	*slots;
	uint32_t		 nslots;
	struct sandbox		**by_slot;	/* nslots entries */
	struct sandbox		*by_id[SBX_HASH];
	size_t			 count;
	struct in_addr		 pool_net, svc;
	uint8_t			 pool4[4], prefix;
	uint64_t		 creates, deletes, failures, expires;
	uint64_t		 reapplied;
	struct leftover		*left;		/* slots held (sandbox.c) */
	size_t			 nleft, capleft;
	/* Generations reserved in the database and not yet given out:
	 * [gen_next, gen_next + gen_left). */
	uint32_t		 gen_next, gen_left;
	struct sbx_watch	 watch[SBX_WATCHERS];	/* sbx_watch_add */
	size_t			 nwatch;
	struct cg		*cg;		/* NULL: no cgroups */
	struct ev_timer		*events_timer;	/* cgroup counters */
	struct sb_end		*ends;		/* terminations under way */
};

/* sandbox_budget.c: the windows of s's rule budgets armed (when its
 * kernel objects exist: after fw_sandbox_add, adoption or a reload), and
 * the timer cancelled (removal). */
void		 sb_budget_arm(struct sbx *m, struct sandbox *s);
void		 sb_budget_cancel(struct sandbox *s);

/* Which call of the watchers a change of the table makes. */
enum sb_change {
	SB_ADDED,
	SB_REMOVED,
	SB_CHANGED,
};

/* sandbox.c: sandboxes and their removal */
/* sb_gen_alloc: a generation never given before (sbx_rec.gen), reserving
 * the next block in the database when the reserved one is spent. */
int		 sb_gen_alloc(struct sbx *m, uint32_t *gen, char *err,
		    size_t errlen);
/* sb_from_rec: the in-memory sandbox of record r (adopt: a row read at
 * start, which must carry its slot's addresses). NULL with err and errno
 * (ENOMEM says nothing of r). */
struct sandbox	*sb_from_rec(struct sbx *m, const struct sbx_rec *r, int adopt,
		    char *err, size_t errlen);
/* sb_ns_ident: takes s's namespace identity from its pin. -1 with errno. */
int		 sb_ns_ident(struct sandbox *s);
/* sb_free: s and its timer; NULL is a no-op. */
void		 sb_free(struct sandbox *s);
/* sb_ct_flush: deletes the conntrack entries whose source is addr4; a
 * finding on id when some stay (-1). */
int		 sb_ct_flush(struct sbx *m, const uint8_t addr4[4],
		    const char *id);
/* sb_kernel_remove: s's elements, then its namespace and link. -1 with
 * the first error. */
int		 sb_kernel_remove(struct sbx *m, const struct sandbox *s,
		    char *err, size_t errlen);
/* sb_remove: s everywhere under record kind (sandbox.delete or
 * sandbox.expire), freeing it; -1 with EIO when the kernel refuses (s
 * stays). */
int		 sb_remove(struct sbx *m, struct sandbox *s, const char *kind,
		    const char *reason, char *err, size_t errlen);
/* sb_arm_timer: s's TTL timer, if it has a TTL. */
void		 sb_arm_timer(struct sbx *m, struct sandbox *s);

/* sandbox_table.c: the table */
/* sb_find: the sandbox of id (NULL for none, or a NULL id). */
struct sandbox	*sb_find(const struct sbx *m, const char *id);
/* sb_link: takes s's slot and enters it in both indexes; -1 with EEXIST
 * or as sbx_slots_take. sb_unlink: the reverse. */
int		 sb_link(struct sbx *m, struct sandbox *s);
void		 sb_unlink(struct sbx *m, struct sandbox *s);
/* sb_fill_view, sb_fill_info: the flat copies of s the API hands out. */
void		 sb_fill_view(const struct sandbox *s, struct sbx_view *v);
void		 sb_fill_info(const struct sbx *m, const struct sandbox *s,
		    int with_token, struct sbx_info *out);
/* sb_notify: tells the watchers of a change of s made already (the
 * kernel and the table); sb_notify_view the same with a view (the last
 * one of a sandbox that is gone). */
void		 sb_notify(const struct sbx *m, enum sb_change what,
		    const struct sandbox *s);
void		 sb_notify_view(const struct sbx *m, enum sb_change what,
		    const struct sbx_view *v);

/* sandbox_rec.c: records */
/* sb_event: the durable record of an event about id (s, if known, gives
 * its fields) with detail printf(fmt, ...), and its log line. -1 when
 * not known durable: the caller must not act. */
int		 sb_event(struct sbx *m, const char *kind, const char *id,
		    const struct sandbox *s, const char *fmt, ...)
		    __attribute__((format(printf, 5, 6)));
/* sb_fields: the fields of a sandbox.* record about s. NULL on
 * allocation failure. */
json_t		*sb_fields(const struct sandbox *s, const char *decision,
		    const char *result, const char *detail);
/* sb_commit: commits the record of kind about s; 0 once durable, else -1
 * with errno EPIPE and err. */
int		 sb_commit(struct sbx *m, const struct sandbox *s,
		    const char *kind,
		    const char *decision, const char *result,
		    const char *detail, char *err, size_t errlen);

/* sandbox_fw.c: policies in the kernel's form */
/* sb_policy: the policy s runs under (NULL: none at all). */
const struct pol_policy *sb_policy(const struct sandbox *s);
/* sb_rules_to_fw: n rules of a policy as the kernel's (ICMPv6 dropped,
 * an allow without ports is every port; *icmp set for an ICMP allow).
 * Returns how many were written to out (n at most). */
size_t		 sb_rules_to_fw(const struct pol_net_rule *r, size_t n,
		    int allow, struct fw_rule *out, int *icmp);
/* sb_fw_apply: s's static elements (and taint restriction) from its
 * policy; with update only its statics are replaced. -1 with err. */
int		 sb_fw_apply(struct sbx *m, struct sandbox *s, int update,
		    char *err, size_t errlen);
/* sb_fw_setup: the nftables table for the config, adopted or made. */
int		 sb_fw_setup(struct sbx *m, char *err, size_t errlen);

/* sandbox_attach.c: attach mode */
/* sb_attach_open: the namespace spec->attach names, opened and checked
 * before the create is authorized: a network namespace, not the daemon's
 * nor any sandbox's, with no way out. The fd (*fd) and identity go to r.
 * -1 with *why and msg. */
int		 sb_attach_open(struct sbx *m, const struct sbx_spec *spec,
		    struct sbx_rec *r, int *fd, enum sbx_err *why, char *msg,
		    size_t msglen);
/* sb_attach_make: ns_attach for s (its att_fd), prior into s->rec. */
int		 sb_attach_make(struct sandbox *s, char *err, size_t errlen);
/* sb_attach_adopt: at start, the pin of attached s opened and compared
 * with its recorded identity: 1 the same (s->att_fd held), 0 another
 * namespace or none (removal must not touch it), -1 with errno. */
int		 sb_attach_adopt(struct sandbox *s);
/* sb_ns_remove: s's namespace side: ns_detach when attached, else
 * ns_delete. */
int		 sb_ns_remove(const struct sandbox *s, char *err,
		    size_t errlen);

/* sandbox_reconcile.c */
/* sb_reconcile: the kernel, the state database and the table made to
 * agree at start (see that file). -1 with err: do not serve. */
int		 sb_reconcile(struct sbx *m, char *err, size_t errlen);

/* sandbox_procs.c: a sandbox's processes and their end */
struct sb_end;
/* sb_procs_scan: the processes in the network namespace dev/ino (the
 * daemon excepted), each sent sig (0: counted only). How many, or -1
 * when /proc cannot be read. Bounded by the host's process count. */
int		 sb_procs_scan(dev_t dev, ino_t ino, int sig);
/* sb_end_begin: the end of s prepared before its record: the namespace
 * held open, its processes counted (returned; *out NULL and 0 when its
 * namespace is not known at all, -1 without memory). */
int		 sb_end_begin(struct sbx *m, struct sandbox *s,
		    struct sb_end **out);
/* sb_end_go: after the record: on_end kill sends SIGTERM now and SIGKILL
 * after the grace from the loop's timers (a sandbox.terminated finding
 * says how it went, and the cgroup is removed then); isolate lets them
 * be. Takes e (NULL is a no-op). */
void		 sb_end_go(struct sbx *m, struct sb_end *e);
/* sb_end_pending: 1 while the end of a sandbox id is under way: its id
 * (and so its cgroup's name) is not free before it is over. */
int		 sb_end_pending(const struct sbx *m, const char *id);
/* sb_ends_stop: at daemon stop, what still waits for its grace is
 * killed at once. */
void		 sb_ends_stop(struct sbx *m);

/* sandbox_limits.c: resources */
/* sb_limits_init: the host's cgroup tree, if usable (m->cg; a warning
 * otherwise), and the counters' timer. sb_limits_stop: the reverse. */
void		 sb_limits_init(struct sbx *m);
void		 sb_limits_stop(struct sbx *m);
/* sb_cg_make: s's cgroup with its policy's limits. -1 with err when it
 * cannot be made, or when the policy sets limits and there is no tree. */
int		 sb_cg_make(struct sbx *m, struct sandbox *s, char *err,
		    size_t errlen);
/* sb_cg_adopt: at start, s's existing cgroup taken as it is. */
void		 sb_cg_adopt(struct sbx *m, struct sandbox *s);
/* sb_cg_drop: s's cgroup removed (a create's rollback). */
void		 sb_cg_drop(struct sbx *m, struct sandbox *s);
/* sb_cg_check: findings for limits s hit since the last check. */
void		 sb_cg_check(struct sbx *m, struct sandbox *s);
/* sb_limits_reapply: after s moved to a changed policy, its cgroup's
 * limits and its idle timer follow (a finding when the kernel refuses). */
void		 sb_limits_reapply(struct sbx *m, struct sandbox *s);
/* sb_cg_orphans: at start, after reconciliation: groups under the base
 * that no sandbox has (a crash between a group and its row, a removal
 * whose group could not go) are emptied and removed, each after its
 * sandbox.orphan record. */
void		 sb_cg_orphans(struct sbx *m);
/* sb_idle_arm: s active now, and its idle timer armed if it has one. */
void		 sb_idle_arm(struct sbx *m, struct sandbox *s);

#endif /* SLUICE_GATEWAY_SANDBOX_INT_H */
