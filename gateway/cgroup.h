/*
 * cgroup: the control groups of sandboxes, so that what `sluice exec` and
 * `sluice run` start is held to the policy's `resources:` (processes,
 * memory, CPU) by the kernel, and can be ended as a whole. It exists
 * apart from the sandbox manager because the kernel offers two shapes of
 * it: cgroup v2 (one tree, pids.max, memory.max, memory.swap.max, cpu.max,
 * cgroup.kill) and v1, where each controller (pids, memory, cpu) is a tree
 * of its own, as on hosts in hybrid mode. Which one is chosen at runtime
 * (cg_detect), and everything else is written once for both.
 *
 * Where: under the daemon's own cgroup of each tree (its delegated
 * subtree under systemd, Delegate=yes), in <own>/sluice-<h>/<id>, where
 * <h> is drawn from the daemon's state directory (cg_base_name): two
 * daemons on one host never take each other's groups for orphans. On v2 the
 * daemon moves itself to the leaf <own>/sluiced first, since a cgroup
 * that hands controllers down may hold no process. A restarted daemon
 * finds the same paths (from its own, the leaf stripped), so it adopts
 * what its predecessor made: the groups, their limits and their members.
 *
 * The pure parts (parsing /proc/self/cgroup, the paths, the files and
 * values a limit becomes, event counters) are exposed for unit tests.
 * Runs in the privileged parent only; errors are returned, never fatal.
 */
#ifndef SLUICE_GATEWAY_CGROUP_H
#define SLUICE_GATEWAY_CGROUP_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

enum cg_mode {
	CG_NONE = 0,		/* no usable cgroup tree */
	CG_V1,			/* pids, memory and cpu each their own tree */
	CG_V2,			/* the unified tree */
};

#define CG_TREES_MAX	3	/* v1: pids, memory, cpu; v2: one */
#define CG_PATH_MAX	512
#define CG_NAME_MAX	32	/* "sluice-" and 8 hex digits, and more */
#define CG_LEAF_NAME	"sluiced"	/* v2: where the daemon itself lives */

/* ------------------------------------------------- pure */

/* cg_self_path: the path of controller ctl ("pids", "memory", "cpu"; NULL
 * for the v2 line "0::") in text, the contents of /proc/<pid>/cgroup,
 * into out; on v2 a last component CG_LEAF_NAME is dropped (the daemon's
 * own leaf, so a restart finds the same base). 0, or -1 when text has no
 * such line or the path does not fit or is not absolute. */
int	cg_self_path(const char *text, const char *ctl, char *out,
	    size_t outlen);

/* One file a limit is written to, and what. */
struct cg_write {
	size_t		tree;		/* index of the tree (v1), 0 on v2 */
	const char	*file;		/* e.g. "pids.max" */
	char		value[32];
};
#define CG_WRITES_MAX	6

/* cg_limit_writes: the files and values r gives on mode (trees on v1:
 * 0 pids, 1 memory, 2 cpu), in the order they must be written (v1: the
 * memory limit before memory+swap). A limit of 0 writes "max" (v2) or
 * its unlimited value (v1), so that a group adopted with other limits
 * gets the policy's. Returns how many (at most CG_WRITES_MAX). */
size_t	cg_limit_writes(enum cg_mode mode, const struct pol_resources *r,
	    struct cg_write *out);

/* cg_base_name: "sluice-" and 8 hex digits of a hash of state_dir, the
 * name of the directory that holds a daemon's sandbox groups. */
void	cg_base_name(const char *state_dir, char *out, size_t outlen);
/* cg_base_name_ok: 1 when name is one cg_base_name gives, else 0. */
int	cg_base_name_ok(const char *name);

/* cg_event_count: the value of key ("oom_kill", "max") in text, the
 * contents of memory.events, memory.oom_control or pids.events (lines of
 * "key value"). 0 when absent. */
uint64_t cg_event_count(const char *text, const char *key);

/* cg_id_ok: 1 when id may name a group (a sandbox id: [a-z0-9-], 1..32,
 * not starting with '-'), else 0. */
int	cg_id_ok(const char *id);

/* ------------------------------------------------- the hierarchy */

struct cg;

/* cg_detect: the mode the host's tree under root ("/sys/fs/cgroup")
 * offers: v2 when root is a cgroup2 mount with the pids, memory and cpu
 * controllers available; v1 when root holds the three v1 trees; else
 * CG_NONE. */
enum cg_mode cg_detect(const char *root);

/* cg_new: the daemon's place in the trees under root for mode, from
 * self_text (its /proc/self/cgroup), its groups in the directory name
 * (cg_base_name). On v2 it moves the processes of its
 * own cgroup into the leaf CG_LEAF_NAME and enables pids, memory and cpu
 * below it. NULL with err when mode is CG_NONE or a tree cannot be used. */
struct cg	*cg_new(const char *root, enum cg_mode mode,
		    const char *self_text, const char *name, char *err,
		    size_t errlen);
/* cg_release: removes the directories that hold the groups where they
 * are empty (a daemon that stops with no sandbox leaves nothing); ones
 * with groups stay, for the next start to adopt. NULL is a no-op. */
void		 cg_release(struct cg *g);
/* cg_free: the handle only; groups stay. NULL is a no-op. */
void		 cg_free(struct cg *g);
enum cg_mode	 cg_get_mode(const struct cg *g);
/* cg_ntrees: how many groups one sandbox has (v1: 3, v2: 1). */
size_t		 cg_ntrees(const struct cg *g);
/* cg_base: the directory that holds the groups in tree i. 0, or -1. */
int		 cg_base(const struct cg *g, size_t i, char *out, size_t outlen);
/* cg_dir: the directory of sandbox id's group in tree i. 0, or -1 when
 * id is not cg_id_ok, i is out of range or the path does not fit. */
int		 cg_dir(const struct cg *g, size_t i, const char *id,
		    char *out, size_t outlen);

/* cg_create: makes (or adopts, when it exists) id's groups and writes r's
 * limits (cg_limit_writes). All or nothing: -1 with err, the groups made
 * removed again. */
int		 cg_create(struct cg *g, const char *id,
		    const struct pol_resources *r, char *err, size_t errlen);
/* cg_exists: 1 when every group of id exists, else 0. */
int		 cg_exists(const struct cg *g, const char *id);
/* cg_kill: SIGKILL to every member of id's groups (v2: cgroup.kill, one
 * write; v1: cgroup.procs read and signalled, at most 64 passes). Returns
 * how many were signalled (v2: members seen before), or -1. */
int		 cg_kill(struct cg *g, const char *id);
/* cg_members: processes in id's groups now (the first tree), -1 on error. */
int		 cg_members(const struct cg *g, const char *id);
/* cg_remove: removes id's groups (a missing one is gone already). -1 with
 * err (EBUSY: members remain). */
int		 cg_remove(struct cg *g, const char *id, char *err,
		    size_t errlen);

/* cg_foreach: fn for the id of every group under the base (the first
 * tree), in no order; names that are not cg_id_ok are skipped. */
void		 cg_foreach(const struct cg *g,
		    void (*fn)(const char *id, void *arg), void *arg);

/* Counters the kernel keeps for a group. */
struct cg_events {
	uint64_t	oom_kills;	/* processes the OOM killer took */
	uint64_t	pids_max;	/* forks refused at pids.max */
};
/* cg_read_events: id's counters. 0, or -1 when its groups are gone. */
int		 cg_read_events(const struct cg *g, const char *id,
		    struct cg_events *ev);

#endif /* SLUICE_GATEWAY_CGROUP_H */
