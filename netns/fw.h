/*
 * fw: kernel enforcement of sandbox egress with nftables.
 *
 * Sluice decides in user space but enforces in the kernel, so that a sandbox
 * that ignores proxies, opens raw sockets or outlives a crashed daemon still
 * meets the same rules. This module owns one table (`inet sluice` by
 * default): the shared rules are written once by fw_init; each sandbox has
 * its own small set and chain, reached through one hash lookup (a verdict
 * map keyed on its link), and DNS answers are set elements; everything is
 * added and removed in single netlink batches, so packet cost does not
 * grow with sandboxes or destinations. Denied packets come back through nflog (fw_nflog_*).
 *
 * The module is a leaf: it never logs or exits and never calls policy/ or
 * gateway/. Everything comes in as flat structs; functions return 0 (or a
 * pointer) on success and -1 (or NULL) with errno and a message in the
 * caller's err buffer on failure. Every operation works in the network
 * namespace the fw handle was created in. A handle is not thread-safe: use
 * it from one thread (the privileged process), or serialise calls.
 */
#ifndef SLUICE_NETNS_FW_H
#define SLUICE_NETNS_FW_H

#include <stddef.h>
#include <stdint.h>

#define FW_IFNAMSIZ	16	/* IFNAMSIZ, including the NUL */
#define FW_TABLE_MAX	32	/* table name, including the NUL */
#define FW_PREFIX_MAX	32	/* nflog prefix, including the NUL */

/* A CIDR list entry for fw_config. addr is in network byte order; for
 * AF_INET only addr[0..3] are used. Host bits beyond prefix are ignored. */
struct fw_cidr {
	uint8_t		family;		/* AF_INET or AF_INET6 */
	uint8_t		addr[16];
	uint8_t		prefix;		/* 0..32 or 0..128 */
};

/* Static configuration of the table; copied by fw_init. */
struct fw_config {
	char		table[FW_TABLE_MAX];	/* "" means "sluice" */
	uint8_t		svc4[4];		/* service address (required) */
	int		has_svc6;
	uint8_t		svc6[16];		/* optional IPv6 service address */
	uint16_t	dns_port;		/* 0 means 53 */
	uint16_t	bridge_port;		/* capability bridge (tcp) */
	char		uplink[FW_IFNAMSIZ];	/* "" = masquerade out of any
						 * non-sandbox link */
	uint16_t	nflog_group;
	struct fw_cidr	pool;			/* sandbox pool (AF_INET) */
	const struct fw_cidr *deny;		/* always-deny ranges, v4 and v6 */
	size_t		ndeny;
	const struct fw_cidr *private;		/* private ranges, v4 and v6 */
	size_t		nprivate;
	/* Bounds of the table's sets (the `size` of each set, see fw_rules.c):
	 * sandboxes at once (0 = FW_MAX_SANDBOXES_DEFAULT, at most
	 * FW_MAX_SANDBOXES_LIMIT) and learned destinations one sandbox may
	 * hold (the gateway's own cap; 0 = FW_MAX_LEARNED_DEFAULT, at most
	 * FW_MAX_LEARNED_LIMIT). A learned set holds max_sandboxes *
	 * max_learned, so no sandbox at its cap is refused for another's. */
	uint32_t	max_sandboxes;
	uint32_t	max_learned;
	/* The name gate (fw_gate.c): TCP flows to learned destinations
	 * are queued to gate_queue until a verdict marks them. */
	int		gate;
	uint16_t	gate_queue;
};

#define FW_MAX_SANDBOXES_DEFAULT	4096
#define FW_MAX_SANDBOXES_LIMIT		65536
#define FW_MAX_LEARNED_DEFAULT		8192
#define FW_MAX_LEARNED_LIMIT		1000000

/* fw_init flags. */
#define FW_ADOPT	0x1	/* keep an existing table's per-sandbox state */

/* Rule budgets per sandbox (quota objects b0_<ifname>..), plus the taint
 * budget t_<ifname>: at most FW_MAX_BUDGETS + 1 quota objects and one
 * budget map per sandbox. */
#define FW_MAX_BUDGETS	16

/* One sandbox. ifname must start with "sl-" (the rules match that prefix). */
struct fw_sandbox {
	char		ifname[FW_IFNAMSIZ];	/* host side link, e.g. "sl-12" */
	uint8_t		addr4[4];		/* the sandbox's own address */
	int		has_addr6;
	uint8_t		addr6[16];
	int		icmp;			/* echo-request to @icmp4 rules */
	uint64_t	quota_bytes;		/* egress byte budget, 0 = none */
	/* Byte budgets of single allow rules (fw_budget.c): budget k is
	 * quota object b<k>_<ifname>, reached by the static allows and
	 * learned elements whose budget is k + 1. At most FW_MAX_BUDGETS,
	 * each >= 1; their number is fixed for the sandbox's life
	 * (fw_sandbox_update changes their sizes, not how many). */
	uint64_t	budget_bytes[FW_MAX_BUDGETS];
	uint8_t		nbudgets;
	/* The sandbox's generation: nonzero, and never given to another
	 * sandbox (the gateway keeps the counter). Every flow the sandbox
	 * opens carries it as its conntrack mark, and only flows with its
	 * own generation pass as established or related: not another
	 * sandbox's, not an earlier sandbox's on the same link and address. */
	uint32_t	gen;
};

/* A static rule: destination CIDR, protocol and port range. For ICMP rules
 * (proto IPPROTO_ICMP) ports are ignored and the CIDR goes to @icmp4. */
struct fw_rule {
	uint8_t		family;		/* AF_INET or AF_INET6 */
	uint8_t		addr[16];	/* network byte order */
	uint8_t		prefix;
	uint8_t		proto;		/* IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP */
	uint16_t	port_lo, port_hi;	/* host byte order, inclusive */
	uint8_t		budget;		/* allows only: 0 = none, else 1 + the
					 * sandbox's budget id */
};

/* A DNS-learned destination (exact address, port range). */
struct fw_elem {
	char		ifname[FW_IFNAMSIZ];	/* sandbox host-side link */
	uint8_t		family;			/* AF_INET or AF_INET6 */
	uint8_t		addr[16];		/* network byte order */
	uint8_t		proto;			/* IPPROTO_TCP or IPPROTO_UDP */
	uint16_t	port_lo, port_hi;	/* host byte order */
	uint32_t	timeout_ms;		/* lifetime; refreshed if present */
	uint8_t		flags;			/* FW_ELEM_* */
	uint8_t		budget;			/* 0 = none, else 1 + the
						 * sandbox's budget id */
	/* The name it was learned for (borrowed for the call; NULL: not
	 * said). Not part of the key: the handle notes it beside the
	 * element (fw_learned_list), so a reload can decide it again. */
	const char	*name;
};

/* A learned element as the handle's index knows it (fw_learned_list):
 * e.timeout_ms is what is left of its life; names holds the nnames
 * (at most FW_LEARNED_NAMES) names it was learned for, each
 * NUL-terminated, one after the other ("" and 0 when none is known: it
 * was found in a table adopted after a restart). */
#define FW_LEARNED_NAMES	4
struct fw_learned {
	struct fw_elem	 e;
	const char	*names;
	size_t		 nnames;
};

/* fw_elem.flags: the destination is also on the sandbox's taint keep-list
 * (a `host:` keep rule), so it stays reachable once fw_restrict narrowed
 * the sandbox. */
#define FW_ELEM_KEEP	0x01

/* A denied packet as reported by nflog. Addresses in network byte order,
 * ports in host byte order (0 when the protocol has none). */
struct fw_denied {
	char		ifname[FW_IFNAMSIZ];	/* input link ("" if unknown) */
	char		prefix[FW_PREFIX_MAX];	/* e.g. "deny:default" */
	uint8_t		family, proto;
	uint8_t		src[16], dst[16];
	uint16_t	sport, dport;
};

struct fw;
struct fw_nflog;

/* ------------------------------------------------------------ fw.c */

/* fw_new: opens one NETLINK_NETFILTER socket in the caller's current network
 * namespace. NULL with errno and err set on failure. Free with fw_free. */
struct fw	*fw_new(char *err, size_t errlen);
/* fw_free: closes the socket; the table stays in the kernel. NULL is a no-op. */
void		 fw_free(struct fw *fw);

/* fw_init: installs the whole table (sets, chains, rules, always-deny and
 * private ranges) in one batch and remembers cfg->table for later calls.
 * Without FW_ADOPT, an existing table of that name is replaced atomically
 * (delete + create in the same batch; on failure the old table is intact).
 * With FW_ADOPT and an existing table, its per-sandbox sets, chains,
 * elements and quota objects are kept, while the shared rules (the logging
 * chains d_* with them, so the nflog group is cfg's) and the static range
 * sets are rewritten from cfg, still in one batch. A table of another
 * layout (one without @sbx_dispatch, from before per-sandbox chains, or
 * without the generation set @sbx_own, whose sandbox chains accept any
 * flow as established) or whose sets are smaller than cfg asks is not adopted: -1
 * with EPROTO, the table untouched; call again without FW_ADOPT to replace
 * it. Returns 1 if a table was adopted, 0 if it was created, -1 on error
 * (EINVAL for bad cfg). cfg is not retained. */
int		 fw_init(struct fw *fw, const struct fw_config *cfg, int flags,
		    char *err, size_t errlen);

/* fw_destroy: deletes table `table` ("" or NULL = the one given to fw_init,
 * else "sluice"). ENOENT if it does not exist. */
int		 fw_destroy(struct fw *fw, const char *table, char *err,
		    size_t errlen);

/* -------------------------------------------------------------- fw_gate.c */

/*
 * The name gate's kernel half. A TCP flow accepted through a learned
 * element gets the conntrack label FW_GATE_L_REQ and is queued (NFQUEUE,
 * never with bypass: with nobody reading, its packets are dropped) until
 * the gate's verdict. The gate answers NF_REPEAT with the packet mark
 * FW_GATE_M_OK or FW_GATE_M_DENY (the mark cannot come from a sandbox:
 * crossing into the host's namespace clears it); the forward chain turns
 * that into the label FW_GATE_L_DONE (the flow passes on, never queued
 * again) or FW_GATE_L_DENY (it and every later packet are reset).
 */
#define FW_GATE_M_OK	0x10000000u	/* packet mark bits the gate sets */
#define FW_GATE_M_DENY	0x20000000u
#define FW_GATE_M_MASK	(FW_GATE_M_OK | FW_GATE_M_DENY)
#define FW_GATE_L_REQ	96		/* conntrack label bits */
#define FW_GATE_L_DONE	97
#define FW_GATE_L_DENY	98
#define FW_GATE_QUEUE_DEFAULT	7741

/* fw_gate_open: a netlink socket bound to NFQUEUE queue (copy of the whole
 * packet up to 64 KiB, no fail-open), non-blocking and close-on-exec, for
 * the gate to read and answer on. The queue is released when every copy
 * of the descriptor is closed. The fd, or -1 with errno and err. */
int		 fw_gate_open(uint16_t queue, char *err, size_t errlen);

/* ------------------------------------------------------------ fw_sandbox.c */

/* fw_sandbox_add: registers a sandbox in one batch: anti-spoofing entry,
 * its generation (@sbx_gen, @sbx_own), its set s_<ifname> and chain
 * sb_<ifname> (IPv6 rules only when sb->has_addr6), static allows (CIDR +
 * proto + port range; ICMP rules only when sb->icmp), explicit denies
 * (CIDR; proto/ports ignored: a deny covers the whole range), its quota
 * object, its rule budgets (sb->nbudgets quota objects, the budgeted
 * allows' elements: fw_budget.c) and, last, its @sbx_dispatch entry. All
 * or nothing. EINVAL on a bad ifname or rule, bad budgets (more than
 * FW_MAX_BUDGETS, one of 0 bytes, a rule naming a budget the sandbox
 * lacks, an ICMP rule with one, two budgeted rules on one destination)
 * or a zero sb->gen, EEXIST if the sandbox is already
 * registered, ENFILE when the table holds the most sandboxes fw_init was
 * told of. */
int		 fw_sandbox_add(struct fw *fw, const struct fw_sandbox *sb,
		    const struct fw_rule *allow, size_t nallow,
		    const struct fw_rule *deny, size_t ndeny,
		    char *err, size_t errlen);

/* fw_sandbox_del: removes the sandbox's dispatch entry, chain and set (its
 * static, keep and learned port-range elements with it), its elements in
 * the shared sets (learned, learned keep, restricted, anti-spoofing,
 * generation) and
 * its quota object, in one batch (learned destinations beyond a few
 * hundred go first in batches of their own). Only sb->ifname is used. A
 * sandbox with nothing left is not an error. A handle that ran fw_init
 * deletes by key from what it added or found when it adopted the table
 * (no dumps; what is gone meanwhile is no error: NFT_MSG_DESTROY*, Linux
 * 6.3); on older kernels, or a handle that never ran fw_init, it dumps the
 * shared per-sandbox sets instead. Elements another handle added to the
 * table after this one's fw_init are not known to it. */
int		 fw_sandbox_del(struct fw *fw, const struct fw_sandbox *sb,
		    char *err, size_t errlen);

/* fw_sandbox_update: replaces the static elements of registered sandbox
 * sb->ifname (allows, private allows, explicit denies, ICMP per sb->icmp)
 * in its set with those of the new rules (found by one dump of that set), and sets its quota to sb->quota_bytes (an
 * existing quota object is updated in place and keeps what it consumed;
 * 0 removes it), all in one batch: a packet sees the old statics or the
 * new ones, never neither. Learned, keep/restricted and anti-spoofing
 * elements stay. Rules as for fw_sandbox_add. ENOENT if the sandbox is not
 * registered, EINVAL on a bad ifname or rule; on any error nothing
 * changed. */
int		 fw_sandbox_update(struct fw *fw, const struct fw_sandbox *sb,
		    const struct fw_rule *allow, size_t nallow,
		    const struct fw_rule *deny, size_t ndeny,
		    char *err, size_t errlen);

/* ------------------------------------------------------------ fw_learn.c */

/* fw_learn: adds or refreshes all n elements in one batch and returns only
 * after the kernel acknowledged the whole batch: 0, or -1 with errno and err
 * set (nothing added). An element that already exists gets its timeout
 * reset. One-port elements go to hash sets (constant cost at any number
 * of learned elements), port ranges to interval sets; elements with
 * FW_ELEM_KEEP also go to the learned keep sets, which a restricted
 * sandbox still reaches. Every element needs a registered sandbox: one
 * for a link with no sandbox (deleted while its DNS answer was on the
 * way) fails the whole batch with ENOENT, so the next sandbox given that
 * link name never inherits it. A sandbox this handle registered (or found
 * when it adopted the table) is taken as registered; any other is checked
 * by the kernel in the same batch. EINVAL for a bad element (family,
 * proto, ports, zero timeout). */
int		 fw_learn(struct fw *fw, const struct fw_elem *e, size_t n,
		    char *err, size_t errlen);
/* fw_unlearn: removes the n elements in one batch, from the learned and
 * the learned keep sets whatever their flags; elements already gone
 * (expired) are not an error. */
int		 fw_unlearn(struct fw *fw, const struct fw_elem *e, size_t n,
		    char *err, size_t errlen);

/* fw_set_learn_cap: from now on fw_learn refuses (ENOSPC, nothing
 * added) a batch that would give one sandbox more than cap learned
 * destinations alive at once (refreshing one it has does not count);
 * 0 = no cap. Counted in the handle's index, so only on a handle that
 * ran fw_init (and while that index holds). */
void		 fw_set_learn_cap(struct fw *fw, uint32_t cap);

/* fw_learned_list: the learned destinations of sandbox ifname that have
 * not expired, as a malloc'ed array in *out (caller frees; *n entries;
 * NULL and 0 for none). The names point into the handle and stay valid
 * until its next call. -1 with ENOTSUP when the handle has no index (it
 * never ran fw_init, or lost it), EINVAL on bad arguments, ENOMEM. */
int		 fw_learned_list(struct fw *fw, const char *ifname,
		    struct fw_learned **out, size_t *n, char *err,
		    size_t errlen);

/* ------------------------------------------------------------ fw_restrict.c */

/* fw_restrict: narrows a registered sandbox at once (tainted data): adds
 * the keep rules to its set and, the first time, the narrowing rules at
 * the head of its chain and ifname to @restricted, in one batch. From then
 * on only keep destinations (still subject to the always-deny ranges)
 * pass: these keep rules, and destinations learned with FW_ELEM_KEEP
 * (before or after the taint) while they live. Calling it again replaces
 * the keep rules (old ones out, new ones in, one batch; a reload that
 * changed the keep list). Undone only by fw_sandbox_del. ENOENT if the
 * sandbox is not registered. */
int		 fw_restrict(struct fw *fw, const char *ifname,
		    const struct fw_rule *keep, size_t n, char *err,
		    size_t errlen);

/* ------------------------------------------------------------ fw_budget.c */

/* fw_budget_reset: budget k of sandbox ifname (0..nbudgets-1), or its
 * taint budget (k = FW_BUDGET_TAINT), starts again from zero (a window
 * ended): one request, atomic in the kernel; *used (may be NULL) gets
 * what it had consumed. ENOENT if the sandbox has no such budget. */
#define FW_BUDGET_TAINT	255
int		 fw_budget_reset(struct fw *fw, const char *ifname, unsigned k,
		    uint64_t *used, char *err, size_t errlen);
/* fw_budget_used: what budget k (or FW_BUDGET_TAINT) of ifname consumed
 * and its size, without changing it. ENOENT if there is none. */
int		 fw_budget_used(struct fw *fw, const char *ifname, unsigned k,
		    uint64_t *used, uint64_t *bytes, char *err, size_t errlen);
/* fw_restrict_budget: as fw_restrict, and from the call that first
 * narrows the sandbox on, every byte it sends is also counted against a
 * taint budget of bytes (0 = none), whose exhaustion denies as a rule
 * budget's does. Later calls leave the taint budget as it is. */
int		 fw_restrict_budget(struct fw *fw, const char *ifname,
		    const struct fw_rule *keep, size_t n, uint64_t bytes,
		    char *err, size_t errlen);

/* ------------------------------------------------------------ fw_dump.c */

/* fw_list_sandboxes: calls cb once per sandbox registered in @sbx4 (for
 * reconciliation after a restart); addr4 is the sandbox's address. Returns
 * the number of sandboxes, or -1. */
int		 fw_list_sandboxes(struct fw *fw,
		    void (*cb)(const char *ifname, const uint8_t addr4[4],
		    void *arg), void *arg, char *err, size_t errlen);

/* fw_count_elems: number of elements in set `set` whose key starts with
 * ifname (NULL: all elements). Interval sets count each range once. Names
 * of what now lives in the sandboxes' own sets count there: "allow4",
 * "pallow4", "sbx_deny4", "icmp4", "keep4", "lrange4", "lkrange4" (v6
 * alike). "learned4" counts all learned IPv4 destinations (its one-port
 * hash set and the port ranges, "lrange4"), "lkeep4" those learned as keep
 * ("lkrange4" included); v6 alike. For reconciliation and tests; -1 on
 * error. */
int		 fw_count_elems(struct fw *fw, const char *set,
		    const char *ifname, char *err, size_t errlen);

/* fw_elem_expiration: remaining lifetime in ms of learned element e (as the
 * kernel reports it), or -1 with ENOENT if it is not present. */
int64_t		 fw_elem_expiration(struct fw *fw, const struct fw_elem *e,
		    char *err, size_t errlen);

/* ------------------------------------------------------------ fw_nflog.c */

/* fw_nflog_open: a non-blocking NETLINK_NETFILTER socket bound to nflog
 * group `group` in the current namespace, copying the first bytes of each
 * packet (enough for the 5-tuple). NULL with errno and err on failure. */
struct fw_nflog	*fw_nflog_open(uint16_t group, char *err, size_t errlen);
void		 fw_nflog_close(struct fw_nflog *nl);
/* fw_nflog_free: same as fw_nflog_close (x_free naming); NULL is a no-op. */
void		 fw_nflog_free(struct fw_nflog *nl);
/* fw_nflog_fd: the descriptor to poll for reading. */
int		 fw_nflog_fd(const struct fw_nflog *nl);
/* fw_nflog_read: drains what is queued without blocking (at most 1024
 * packets per call, so a flood cannot starve the caller's loop) and calls
 * cb once per logged packet. Returns the number of packets reported, or -1
 * with errno. When the socket's queue overflows the kernel drops log
 * messages silently (NETLINK_NO_ENOBUFS): denials are still enforced, only
 * their records are lost. Malformed messages are skipped. */
int		 fw_nflog_read(struct fw_nflog *nl,
		    void (*cb)(const struct fw_denied *d, void *arg), void *arg);

#endif /* SLUICE_NETNS_FW_H */
