/*
 * policy: what Sluice allows, decided purely.
 *
 * This module turns YAML files (the daemon config and the policy files) into
 * validated in-memory objects, classifies addresses, and answers questions:
 * may this sandbox reach that host:port, resolve that name, call that tool
 * with these arguments? Apart from the loaders reading their files it does no
 * I/O, reads no clock and keeps no globals: the same input gives the same
 * decision, which is what makes every decision unit-testable with tables.
 * Callers that need time (budget windows, TTLs) pass it in.
 *
 * Conventions: every type has x_new/x_free (or a loader and x_free), and
 * x_free(NULL) is a no-op. Loaders return NULL on failure and put every error
 * (up to a cap) into a struct pol_errors as "FILE:LINE:COL: message".
 *
 * The header is organised in sections; each is owned by one file:
 *   errors      policy/errors.c
 *   addresses   policy/classify.c   (the address classifier)
 *   config      policy/config.c     (the daemon config, examples/sluice.yaml)
 *   policies    policy/load.c       (policy files, examples/policies/)
 *               policy/resources.c  (their resources: section)
 *   decisions   policy/decide.c     (egress, DNS, tool calls, prompts)
 *               policy/mcpres.c     (MCP resources and prompts rules)
 *   pins        policy/pin.c        (tool definition hashes)
 *   results     policy/redact.c     (result limits, redaction, taint level)
 */
#ifndef SLUICE_POLICY_POLICY_H
#define SLUICE_POLICY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- errors */

struct pol_errors;

/* pol_errors_new: an empty list that keeps at most cap messages (further
 * ones are counted, not stored). NULL on allocation failure. */
struct pol_errors	*pol_errors_new(size_t cap);
void			 pol_errors_free(struct pol_errors *e);
/* pol_errors_add: appends "FILE:LINE:COL: message" (line/col 1-based; 0
 * means unknown and is printed as such). The message is always one line:
 * control characters in it (quoted file contents) become C escapes ("\n",
 * "\x1b"). Never fails visibly: on allocation failure the error is counted
 * but its text is lost. */
void			 pol_errors_add(struct pol_errors *e, const char *file,
			    unsigned line, unsigned col, const char *fmt, ...)
			    __attribute__((format(printf, 5, 6)));
/* pol_errors_count: total errors seen, including those over the cap. */
size_t			 pol_errors_count(const struct pol_errors *e);
/* pol_errors_get: the i-th stored message (owned by e), NULL past the end. */
const char		*pol_errors_get(const struct pol_errors *e, size_t i);
/* pol_errors_clear: forget all messages. */
void			 pol_errors_clear(struct pol_errors *e);

/* ------------------------------------------------------------- addresses */

/* An IPv4 or IPv6 address in network byte order. For AF_INET only the first
 * four bytes of a[] are used and the rest are zero. */
struct pol_addr {
	uint8_t		family;		/* AF_INET or AF_INET6 */
	uint8_t		a[16];
};

/* A CIDR block; addr has its host bits cleared. */
struct pol_cidr {
	struct pol_addr	addr;
	uint8_t		prefix;		/* 0..32 or 0..128 */
};

enum pol_addr_class {
	POL_ADDR_PUBLIC = 0,
	POL_ADDR_METADATA,	/* cloud metadata endpoints (egress.md §8) */
	POL_ADDR_LOOPBACK,
	POL_ADDR_UNSPECIFIED,	/* 0.0.0.0/8, :: */
	POL_ADDR_LINK_LOCAL,	/* 169.254/16, fe80::/10 */
	POL_ADDR_PRIVATE,	/* 10/8, 172.16/12, 192.168/16 */
	POL_ADDR_CGNAT,		/* 100.64/10 */
	POL_ADDR_DOCUMENTATION,	/* 192.0.2/24, 198.51.100/24, 203.0.113/24,
				   2001:db8::/32, 3fff::/20 */
	POL_ADDR_BENCHMARKING,	/* 198.18/15, 2001:2::/48 */
	POL_ADDR_MULTICAST,	/* 224/4, ff00::/8 */
	POL_ADDR_RESERVED,	/* 240/4, broadcast, 192.0.0/24, 192.88.99/24,
				   100::/64, fec0::/10, IPv6 outside 2000::/3
				   (unallocated), and every IPv4-in-IPv6 form
				   below: the kernel cannot unwrap them */
	POL_ADDR_ULA,		/* fc00::/7 (not metadata) */
	POL_ADDR__COUNT
};

/* How an address was reached: directly, or unwrapped from an IPv6 form that
 * embeds an IPv4 address. */
enum pol_addr_embed {
	POL_EMBED_NONE = 0,
	POL_EMBED_MAPPED,	/* ::ffff:0:0/96 */
	POL_EMBED_COMPAT,	/* ::/96 */
	POL_EMBED_NAT64,	/* 64:ff9b::/96 */
	POL_EMBED_NAT64_LOCAL,	/* 64:ff9b:1::/48 */
	POL_EMBED_6TO4,		/* 2002::/16 */
	POL_EMBED_TEREDO,	/* 2001::/32 (client address, xor 0xffffffff) */
};

struct pol_addr_info {
	enum pol_addr_class	cls;	/* the verdict (worst of outer/inner) */
	enum pol_addr_embed	embed;
	struct pol_addr		inner;	/* the embedded IPv4 when embed != NONE,
					   all zero otherwise */
	bool			treated_public; /* treat_as_public made it PUBLIC */
};

/* pol_addr_parse: strict text form, at most 45 characters. IPv4 only as
 * four decimal octets with no leading zeros (so "0251.0376.0251.0376",
 * "0xA9FEA9FE", "2852039166", "127.1" and
 * "425.510.425.510" are refused, egress.md §9 item 10); IPv6 as inet_pton
 * accepts, including "::ffff:169.254.169.254". Brackets are not accepted.
 * Returns 0, or -1 with errno EINVAL for anything else (out untouched).
 * Pure (inet_pton only). */
int	pol_addr_parse(const char *s, struct pol_addr *out);
/* pol_addr_format: text form into buf (INET6_ADDRSTRLEN is enough); the
 * result parses back to the same address. Returns buf, or NULL with errno
 * ENOSPC (buf too small) or EAFNOSUPPORT (bad family, NULL pointers). */
const char *pol_addr_format(const struct pol_addr *a, char *buf, size_t len);
/* pol_ipv4_format: the dotted quad of the 4 bytes at a (network order)
 * into buf, which holds at least 16 bytes, NUL-terminated; returns its
 * length. The form pol_addr_format gives, without inet_ntop's sprintf: the
 * DNS proxy formats addresses at the rate of queries. */
size_t	pol_ipv4_format(const uint8_t *a, char *buf);
/* pol_cidr_parse: "ADDR/PREFIX" or a bare address (full-length prefix).
 * ADDR as pol_addr_parse; PREFIX plain decimal 0..32 or 0..128 with no sign,
 * space or leading zero ("/08", "/+8", "/-1", "/33" are refused). Host bits
 * set ("10.0.0.1/8") are an error. 0, or -1 with errno EINVAL (out
 * untouched). */
int	pol_cidr_parse(const char *s, struct pol_cidr *out);
/* pol_cidr_parse_err: the same, and on failure a one-line reason (without
 * the input) in err (may be NULL/0), for file:line:col messages. */
int	pol_cidr_parse_err(const char *s, struct pol_cidr *out, char *err,
	    size_t errlen);
/* pol_cidr_contains: a is inside c. Families must match: an IPv4 block never
 * contains ::ffff:a.b.c.d (classify unwraps that form instead). */
bool	pol_cidr_contains(const struct pol_cidr *c, const struct pol_addr *a);

/* pol_addr_classify: the class of a, unwrapping IPv4-in-IPv6 forms and
 * classifying the embedded address too (the worse class wins: every
 * always-denied class is worse than every private class, which is worse than
 * PUBLIC). Ranges in treat_as_public (may be NULL/0) make an address PUBLIC,
 * except that they never override METADATA, LOOPBACK, LINK_LOCAL or
 * UNSPECIFIED; for an embedded form the outer address and the inner IPv4 are
 * lifted separately, each by the ranges that contain it. treated_public is
 * true when such a range turned a non-public verdict into PUBLIC. A NULL a or
 * an unknown family gives RESERVED (denied). Never fails; pure. */
void	pol_addr_classify(const struct pol_addr *a,
	    const struct pol_cidr *treat_as_public, size_t ntreat,
	    struct pol_addr_info *out);
/* pol_addr_class_name: "public", "metadata", "loopback", "unspecified",
 * "link-local", "private", "cgnat", "documentation", "benchmarking",
 * "multicast", "reserved", "ula"; "invalid" outside the enum (static). */
const char *pol_addr_class_name(enum pol_addr_class c);
/* pol_addr_class_always_denied: classes no policy can allow (metadata,
 * loopback, unspecified, link-local, multicast, reserved); also true for a
 * value outside the enum (fail closed). */
bool	pol_addr_class_always_denied(enum pol_addr_class c);
/* pol_addr_class_private: classes denied unless an explicit CIDR rule of the
 * policy allows them (private, CGNAT, ULA, documentation, benchmarking).
 * Documentation is here so that the test internet (192.0.2/24, ...) needs
 * treat_as_public or a CIDR allow. Exactly one of always_denied, private and
 * (c == PUBLIC) holds for every class. */
bool	pol_addr_class_private(enum pol_addr_class c);

/* pol_deny_ranges / pol_private_ranges: the ranges behind the classes above,
 * for the kernel's interval sets (netns/fw). An address is in a deny range
 * iff it classifies always-denied, and in a private range but no deny range
 * iff it classifies private (without treat_as_public). Each table is sorted
 * and free of overlaps (interval sets refuse overlapping elements); the two
 * tables overlap on metadata hosts inside private ranges (100.100.100.200,
 * fd00:ec2::254, ...), so the deny set must be evaluated first. Static
 * tables, never freed; *n (may be NULL) gets the count. NULL and *n = 0 with
 * errno EAFNOSUPPORT if family is not AF_INET or AF_INET6. */
const struct pol_cidr *pol_deny_ranges(int family, size_t *n);
const struct pol_cidr *pol_private_ranges(int family, size_t *n);

/* ---------------------------------------------------------------- config */

enum pol_mcp_transport { POL_MCP_HTTP = 1, POL_MCP_STDIO = 2 };

/* An upstream MCP server. The credential is a reference (a file or an
 * environment variable of the daemon), never the secret itself. */
struct pol_mcp_server {
	char			*name;		/* [a-z0-9][a-z0-9_-]{0,31} */
	enum pol_mcp_transport	 transport;
	char			*url;		/* HTTP: http(s)://... */
	char			**argv;		/* stdio: command and arguments */
	size_t			 argc;
	char			**env;		/* stdio: "K=V" the child gets */
	size_t			 nenv;
	/* Credential injection, upstream side only. */
	char			*cred_file;	/* read the secret from this file */
	char			*cred_env;	/* or from this daemon variable */
	char			*cred_header;	/* HTTP: header name, e.g. Authorization */
	char			*cred_prefix;	/* HTTP: e.g. "Bearer " */
	char			*cred_child_env; /* stdio: variable set in the child */
};

enum pol_sink_type { POL_SINK_FILE = 1, POL_SINK_SYSLOG, POL_SINK_WEBHOOK };
enum pol_sink_format { POL_FMT_JSON = 1, POL_FMT_OCSF };

struct pol_sink {
	char			*name;
	enum pol_sink_type	 type;
	enum pol_sink_format	 format;
	char			*target;	/* path, syslog address, or URL */
	bool			 splunk_hec;	/* webhook in Splunk HEC mode */
	char			*token_file;	/* webhook auth token (file) */
	uint64_t		 lag_alert;	/* records behind before a finding */
};

struct pol_config {
	char			*path;		/* the file it came from */
	char			*src;		/* its bytes (src_len of them) */
	size_t			 src_len;
	char			*state_dir;	/* default /var/lib/sluice */
	char			*run_dir;	/* default /run/sluice */
	char			*socket_path;	/* default <run_dir>/sluice.sock */
	char			*policy_dir;	/* default /etc/sluice/policies */
	struct pol_cidr		 pool;		/* default 10.231.0.0/16 */
	struct pol_addr		 service_addr;	/* default 10.231.255.254 */
	uint16_t		 bridge_port;	/* default 8080 */
	char			*uplink;	/* interface name, NULL = any */
	bool			 ipv6;		/* per-sandbox ULA; default false */
	struct pol_addr		*dns_upstreams;	/* at least one */
	uint16_t		*dns_upstream_ports; /* parallel, default 53 */
	size_t			 ndns_upstreams;
	uint32_t		 dns_timeout_ms; /* default 2000 */
	/* Upstream answers the DNS proxy keeps for reuse: 0 disables the
	 * cache (every query goes upstream), default 16384, at most
	 * 1,000,000. */
	uint32_t		 dns_cache_entries;
#define POL_DNS_CACHE_DEFAULT	16384
#define POL_DNS_CACHE_MAX	1000000
	/* Destinations one sandbox may have learned at once (kernel set
	 * elements from DNS answers): past it an answer that would add
	 * more is SERVFAIL and a finding. Default 8192, 1..1,000,000. */
	uint32_t		 dns_max_learned;
#define POL_DNS_LEARNED_DEFAULT	8192
#define POL_DNS_LEARNED_MAX	1000000
	struct pol_cidr		*treat_as_public;
	size_t			 ntreat_as_public;
	uint32_t		 max_sandboxes;	/* default 4096 */
	uint32_t		 default_ttl_s;	/* sandbox TTL, 0 = none */
	/* sandboxes.on_end: what becomes of the processes in a sandbox's
	 * network namespace when it is removed or expires (kill: SIGTERM,
	 * then SIGKILL after sandboxes.kill_grace, default 5s, 1..300s;
	 * isolate: they stay, the namespace without its link). */
	enum pol_on_end { POL_ON_END_KILL = 0, POL_ON_END_ISOLATE }
				 on_end;
	uint32_t		 kill_grace_s;
	/* sandboxes.cgroup_root: where the host's cgroup trees are mounted
	 * (default /sys/fs/cgroup); a directory that holds none leaves
	 * sandboxes without cgroups, and so policies without limits. */
	char			*cgroup_root;
#define POL_KILL_GRACE_DEFAULT	5
#define POL_KILL_GRACE_MAX	300
	uint32_t		 nflog_group;	/* default 7 */
	/* network.gate_queue: the NFQUEUE number the name gate's rules
	 * queue to and its reader binds (0-65535, default 7741). Another
	 * program on the host that binds the same number takes the gate's
	 * packets or keeps the daemon from starting: it is a setting so
	 * that an operator can move out of its way. */
	uint32_t		 gate_queue;
#define POL_GATE_QUEUE_DEFAULT	7741
	char			*audit_db;	/* default <state_dir>/audit.db */
	char			*audit_key;	/* PKCS#8 Ed25519, optional */
	char			*audit_origin;
	/* Space held back on the log's volume for removal and expiry
	 * records (audit.reserve_kib, default 4096, 0 = none), and the
	 * free space under which the volume is reported low (a finding and
	 * sluice_audit_volume_low): audit.min_free_percent of its size
	 * (default 10) or audit.min_free_mib (default 0), the larger. */
	uint32_t		 audit_reserve_kib;
#define POL_AUDIT_RESERVE_DEFAULT	4096
	/* audit.flow_interval: a flow alive longer than this gets an
	 * interim net.flow record every interval (the bytes since its
	 * previous record), so a long upload shows before it ends.
	 * Default 5m, 1s..1d. */
	uint32_t		 audit_flow_interval_s;
#define POL_FLOW_INTERVAL_DEFAULT	300
#define POL_FLOW_INTERVAL_MAX		86400
	uint32_t		 audit_min_free_percent;
	uint32_t		 audit_min_free_mib;
	struct pol_sink		*sinks;
	size_t			 nsinks;
	struct pol_mcp_server	*servers;
	size_t			 nservers;
	/* limits: (examples/sluice.yaml) what one sandbox may hold of the
	 * daemon's connections, and how long a request may take to come
	 * in. Per-sandbox caps are below the global ones (the loader makes
	 * sure), so that no one sandbox can take all; sluiced may lower the
	 * global ones to fit its descriptor limit (and says so). */
	uint32_t		 lim_bridge_conns;	/* default 1024 */
	uint32_t		 lim_bridge_conns_sbx;	/* default 96 */
	uint32_t		 lim_bridge_request_s;	/* default 10 */
	uint32_t		 lim_dns_tcp_conns;	/* default 256 */
	uint32_t		 lim_dns_tcp_conns_sbx;	/* default 8 */
	uint32_t		 lim_dns_tcp_query_s;	/* default 10 */
	/* What upstreams may have waiting on the agents' clients at once
	 * (mcp.server_requests): per session and per sandbox (session <=
	 * sandbox < POL_LIM_SREQ_TOTAL, the bridge's own bound for all),
	 * and how long a client has to answer one before it is refused
	 * to the upstream and recorded no_answer. */
	uint32_t		 lim_sreq_session;	/* default 4 */
	uint32_t		 lim_sreq_sandbox;	/* default 16 */
	uint32_t		 lim_sreq_deadline_s;	/* default 120 */
	/* Tasks of the 2026-07-28 revision's tasks extension (the bridge's
	 * tasks.c): how many one sandbox holds, open and finished together
	 * (below POL_LIM_TASKS_TOTAL, the bridge's own bound for all), and
	 * how long a finished one is kept for its client to read before it
	 * is forgotten. POL_LIM_TASK_BYTES bounds the result a task keeps:
	 * a larger one is replaced by an error, before it is recorded. */
	uint32_t		 lim_tasks_sandbox;	/* default 16 */
	uint32_t		 lim_task_keep_s;	/* default 300 */
#define POL_LIM_BRIDGE_CONNS		1024
/* A sandbox may hold 32 event streams (a session each) and still have
 * 64 connections for the requests of those sessions. */
#define POL_LIM_BRIDGE_CONNS_SBX	96
#define POL_LIM_BRIDGE_REQUEST_S	10
#define POL_LIM_DNS_TCP_CONNS		256
#define POL_LIM_DNS_TCP_CONNS_SBX	8
#define POL_LIM_DNS_TCP_QUERY_S		10
#define POL_LIM_SREQ_SESSION		4
#define POL_LIM_SREQ_SANDBOX		16
#define POL_LIM_SREQ_DEADLINE_S		120
#define POL_LIM_SREQ_TOTAL		1024
#define POL_LIM_TASKS_SANDBOX		16
#define POL_LIM_TASK_KEEP_S		300
#define POL_LIM_TASKS_TOTAL		256
#define POL_LIM_TASK_BYTES		(1024u * 1024)
	/* privsep: the users the DNS and bridge processes run as (default
	 * "sluice-dns" and "sluice-bridge"; each must exist and not be
	 * root). */
	char			*privsep_dns_user;
	char			*privsep_bridge_user;
	/*
	 * fleet: the PostgreSQL database hosts of a fleet share. Absent
	 * (fleet_conninfo NULL): nothing is shared, the embedded SQLite
	 * stores hold everything. fleet.postgresql is a libpq conninfo
	 * (key=value or URI) without a password: the password comes from
	 * fleet.password_file or the daemon's SLUICE_PG_PASSWORD. fleet.host
	 * names this host in the shared tables (NULL: the machine's host
	 * name, taken at start). fleet.deadline_ms bounds every round trip
	 * (connect, statement), default 2000, 1..60000.
	 */
	char			*fleet_conninfo;
	char			*fleet_host;
	char			*fleet_password_file;
	uint32_t		 fleet_deadline_ms;
#define POL_FLEET_DEADLINE_DEFAULT	2000
#define POL_FLEET_DEADLINE_MAX		60000
#define POL_FLEET_HOST_MAX		63
};

/* pol_config_load: read and strictly validate a daemon config. NULL on any
 * error, with every error in errs. The result is owned by the caller. */
struct pol_config	*pol_config_load(const char *path, struct pol_errors *errs);
/* pol_config_load_buf: the same over len bytes of buf (need not be
 * NUL-terminated); path names the text in messages. */
struct pol_config	*pol_config_load_buf(const char *path, const char *buf,
			    size_t len, struct pol_errors *errs);
/* pol_config_source: the bytes the config was loaded from (*len of them),
 * owned by c: pol_config_load_buf of them gives the same config. */
const char		*pol_config_source(const struct pol_config *c,
			    size_t *len);
void			 pol_config_free(struct pol_config *c);
/* pol_config_server: the upstream called name, or NULL. */
const struct pol_mcp_server *pol_config_server(const struct pol_config *c,
			    const char *name);

/* -------------------------------------------------------------- policies */

struct pol_policy;	/* one validated policy file (opaque) */
struct pol_set;		/* the policies of a directory, by name (opaque) */

/* pol_policy_load: read and strictly validate one policy file. cfg (may be
 * NULL) lets the validator check MCP server names against the config. NULL on
 * any error, with all errors in errs; nothing is half-loaded. */
struct pol_policy	*pol_policy_load(const char *path,
			    const struct pol_config *cfg, struct pol_errors *errs);
/* pol_policy_load_buf: the same over len bytes of buf (need not be
 * NUL-terminated; not kept). path names the text in messages
 * ("PATH:LINE:COL: ...") and gives the default policy name; the digest is
 * over buf. pol_policy_load reads the file (at most 1 MiB) and calls this. */
struct pol_policy	*pol_policy_load_buf(const char *path, const char *buf,
			    size_t len, const struct pol_config *cfg,
			    struct pol_errors *errs);
void			 pol_policy_free(struct pol_policy *p);
/* pol_policy_name: the policy's name (its `name:` or the file's basename). */
const char		*pol_policy_name(const struct pol_policy *p);
/* pol_policy_digest: hex SHA-256 of the file's bytes (for audit records). */
const char		*pol_policy_digest(const struct pol_policy *p);

/* pol_policy_source: the bytes the policy was loaded from (len of them,
 * not NUL-terminated) and the path it was given, both owned by p. Feeding
 * them to pol_policy_load_buf gives the same policy (and digest). */
const char		*pol_policy_source(const struct pol_policy *p,
			    const char **path, size_t *len);

/* pol_set_build: a set of the n policies of v, which it takes (freed on
 * failure too; v itself stays the caller's). All or nothing, as
 * pol_set_load_dir: two policies with one name are an error in errs. */
struct pol_set		*pol_set_build(struct pol_policy **v, size_t n,
			    struct pol_errors *errs);
/* pol_set_load_dir: every *.yaml / *.yml file of dir. All or nothing: NULL if
 * any file fails (errors in errs) or two files share a name. */
struct pol_set		*pol_set_load_dir(const char *dir,
			    const struct pol_config *cfg, struct pol_errors *errs);
void			 pol_set_free(struct pol_set *s);
const struct pol_policy	*pol_set_get(const struct pol_set *s, const char *name);
size_t			 pol_set_count(const struct pol_set *s);
const struct pol_policy	*pol_set_at(const struct pol_set *s, size_t i);

/* Static egress rules of a policy, flattened for the kernel (netns/fw): one
 * entry per (CIDR, protocol, port range). Host-name rules are not here: they
 * become kernel elements only when the DNS proxy answers them. */
struct pol_net_rule {
	struct pol_cidr	cidr;
	uint8_t		proto;		/* IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP(V6);
					 * 0 = every protocol (deny rules only) */
	uint16_t	port_lo, port_hi; /* 0,0 = every port (and for ICMP) */
	uint32_t	rule_index;	/* position in the policy, for records */
	uint8_t		budget;		/* 0 = none, else 1 + the id of the
					 * rule's byte budget (pol_egress_budgets) */
};

/* pol_egress_static: the policy's CIDR allows (allow=true) or denies
 * (allow=false). The array is owned by p; *n gets the count. */
const struct pol_net_rule *pol_egress_static(const struct pol_policy *p,
			    bool allow, size_t *n);
/* pol_egress_quota: the egress byte budget, 0 = none. */
uint64_t		 pol_egress_quota(const struct pol_policy *p);
/*
 * Byte budgets of single allow rules (`budget:` and `window:` on an
 * egress.allow rule): the egress bytes a sandbox may send to what that
 * rule allows, for the sandbox's life or per window, enforced in the
 * kernel by one quota object per budgeted rule and sandbox. Budget ids are
 * 0.. in the order of the rules; at most POL_MAX_RULE_BUDGETS per policy
 * (each is a kernel object per sandbox, so the bound is per sandbox too).
 * A window is at least POL_BUDGET_WINDOW_MIN_S long.
 */
#define POL_MAX_RULE_BUDGETS	16
#define POL_BUDGET_WINDOW_MIN_S	1
struct pol_rule_budget {
	uint64_t	bytes;		/* >= 1 */
	uint64_t	window_s;	/* 0 = the sandbox's life */
	uint32_t	rule_index;	/* egress.allow[rule_index] */
};
/* pol_egress_budgets: p's rule budgets, by id (owned by p; *n of them). */
const struct pol_rule_budget *pol_egress_budgets(const struct pol_policy *p,
			    size_t *n);
/* pol_egress_budget_id: decides q as pol_egress_decide does and, when an
 * egress.allow rule with a budget allows it, returns that budget's id;
 * -1 otherwise (denied, a rule without a budget, or q tainted: the taint
 * has its own budget, pol_taint_budget). Never allocates. */
struct pol_egress_q;
int			 pol_egress_budget_id(const struct pol_policy *p,
			    const struct pol_egress_q *q);
/* pol_taint_budget: mcp.taint.budget, the egress bytes a tainted sandbox
 * may send from the moment of taint on (to its keep-list, the only
 * destinations left), 0 = none. */
uint64_t		 pol_taint_budget(const struct pol_policy *p);
/* pol_taint_keep: the CIDR rules that stay allowed once the sandbox is
 * tainted (may be empty); host rules that stay allowed are matched by
 * pol_egress_decide with tainted=true. */
const struct pol_net_rule *pol_taint_keep(const struct pol_policy *p, size_t *n);

/* What one sandbox may hold of the machine (the policy's `resources:`
 * section, policy/resources.c): the limits sluiced gives the cgroup of
 * what `sluice exec` and `sluice run` start, the wall clock of one such
 * command, and how long a sandbox may stay quiet. 0 in any field: no
 * limit of that kind. */
struct pol_resources {
	uint32_t	pids;		/* processes and threads, 1..4194304 */
	uint64_t	memory;		/* bytes, at least 1 MiB */
	uint32_t	cpu_milli;	/* thousandths of a core, 10..1024000 */
	uint64_t	timeout_s;	/* one exec or run command */
	uint64_t	idle_s;		/* no DNS query, flow or bridge request */
};
#define POL_RES_PIDS_MAX	4194304u
#define POL_RES_MEMORY_MIN	(1ULL << 20)
#define POL_RES_CPU_MIN		10u
#define POL_RES_CPU_MAX		1024000u

/* pol_policy_resources: p's limits (all 0 without a resources section).
 * Owned by p. */
const struct pol_resources *pol_policy_resources(const struct pol_policy *p);
/* pol_parse_cpu: "1", "1.5", "0.25" (cores, at most three decimals, no
 * sign or exponent) into thousandths of a core, POL_RES_CPU_MIN..
 * POL_RES_CPU_MAX. 0, or -1 for anything else. */
int			 pol_parse_cpu(const char *s, uint32_t *milli);

/* ------------------------------------------------------------- decisions */

enum pol_verdict { POL_DENY = 0, POL_ALLOW = 1, POL_ASK = 2, POL_SYNTHETIC = 3 };

/*
 * Reason codes: why a decision came out as it did. Code compares these;
 * the text is only for records and messages (pol_reason_name), so that
 * renaming a code can change what a record says but never what is
 * enforced. One vocabulary for the policy's decisions and for the
 * gateway's own refusals that land in the same records (the DNS proxy's
 * and the bridge's), so a SOC sees one set of names. The wire names in
 * the comments are stable: records, their OCSF export and tests hold them.
 */
enum pol_reason {
	POL_REASON_NONE = 0,		/* "none": nothing decided yet */
	/* policy/: every decider */
	POL_REASON_ALLOWED,		/* "allowed" */
	POL_REASON_NO_MATCHING_RULE,	/* "no_matching_rule" */
	POL_REASON_TAINTED,		/* "tainted" */
	POL_REASON_BAD_REQUEST,		/* "bad_request" */
	/* policy/: egress */
	POL_REASON_BAD_HOST,		/* "bad_host" */
	POL_REASON_BAD_PORT,		/* "bad_port" */
	POL_REASON_BAD_PROTOCOL,	/* "bad_protocol" */
	POL_REASON_ALWAYS_DENIED_CLASS,	/* "always_denied_class" */
	POL_REASON_EXPLICIT_DENY,	/* "explicit_deny" */
	POL_REASON_PRIVATE_RANGE,	/* "private_range" */
	/* policy/: DNS */
	POL_REASON_SYNTHETIC,		/* "synthetic" */
	POL_REASON_BAD_NAME,		/* "bad_name" */
	POL_REASON_NODATA,		/* "nodata" */
	POL_REASON_TYPE_NOT_ALLOWED,	/* "type_not_allowed" */
	POL_REASON_NAME_TOO_LONG,	/* "name_too_long" */
	POL_REASON_LABEL_TOO_LONG,	/* "label_too_long" */
	POL_REASON_HIGH_ENTROPY,	/* "high_entropy" */
	/* policy/: tool calls and visibility */
	POL_REASON_RULE_DENY,		/* "rule_deny" */
	POL_REASON_PIN_MISMATCH,	/* "pin_mismatch" */
	POL_REASON_BAD_ARGUMENTS,	/* "bad_arguments" */
	POL_REASON_UNKNOWN_ARGUMENT,	/* "unknown_argument" */
	POL_REASON_ARGUMENT_CONSTRAINT,	/* "argument_constraint" */
	POL_REASON_MISSING_ARGUMENT,	/* "missing_argument" */
	POL_REASON_BUDGET_EXHAUSTED,	/* "budget_exhausted" */
	POL_REASON_APPROVAL_REQUIRED,	/* "approval_required" */
	POL_REASON_VISIBLE,		/* "visible" */
	/* gateway/dns/: the proxy's own */
	POL_REASON_DROPPED,		/* "dropped" */
	POL_REASON_FORMERR,		/* "formerr" */
	POL_REASON_NOTIMP,		/* "notimp" */
	POL_REASON_RATE_LIMITED,	/* "rate_limited" */
	POL_REASON_UNKNOWN_SOURCE,	/* "unknown_source" */
	POL_REASON_SUSPECT_NAME,	/* "suspect_name" */
	POL_REASON_OVERLOAD,		/* "overload" */
	POL_REASON_NO_MEMORY,		/* "no_memory" */
	POL_REASON_UPSTREAM_FAILED,	/* "upstream_failed" */
	POL_REASON_LEARNED_CAP,		/* "learned_cap" */
	POL_REASON_LEARN_FAILED,	/* "learn_failed" */
	POL_REASON_SANDBOX_GONE,	/* "sandbox_gone" */
	POL_REASON_REBINDING,		/* "rebinding" */
	POL_REASON_INTERNAL,		/* "internal" */
	/* gateway/bridge/: the bridge's own */
	POL_REASON_DENIED,		/* "denied" */
	POL_REASON_UNKNOWN_TOOL,	/* "unknown_tool" */
	POL_REASON_TOOL_DRIFT,		/* "tool_drift" */
	POL_REASON_INVALID_PARAMS,	/* "invalid_params" */
	POL_REASON_INTERNAL_ERROR,	/* "internal_error" */
	POL_REASON_UPSTREAM_ERROR,	/* "upstream_error" */
	POL_REASON_RESULT_TOO_LARGE,	/* "result_too_large" */
	POL_REASON_REDACTION_FAILED,	/* "redaction_failed" */
	POL_REASON_TAINT_FAILED,	/* "taint_failed" */
	POL_REASON_APPROVAL_TIMEOUT,	/* "approval_timeout" */
	POL_REASON_APPROVAL_UNAVAILABLE, /* "approval_unavailable" */
	POL_REASON_APPROVAL_DENIED,	/* "approval_denied" */
	POL_REASON_SHUTDOWN,		/* "shutdown" */
	POL_REASON_RECORD_FAILED,	/* "record_failed": the intent of a
					   call could not be made durable */
	/* the name gate (gateway/dns/gate.c) */
	POL_REASON_NAME_MISMATCH,	/* "name_mismatch" */
	POL_REASON_NO_NAME,		/* "no_name" */
	POL_REASON_ECH,			/* "ech" */
	POL_REASON_NOT_TLS,		/* "not_tls" */
	POL_REASON_NOT_HTTP,		/* "not_http" */
	/* policy/: resources and prompts */
	POL_REASON_BAD_URI,		/* "bad_uri" */
	/* a fleet's shared store (gateway/fleet/): the database that holds a shared
	 * budget or approval did not answer in time, so the call is denied */
	POL_REASON_SHARED_STATE_UNAVAILABLE, /* "shared_state_unavailable" */
	POL_REASON_NOT_IN_CALL,		/* "not_in_call": a server request no
					   single call in flight could own */
	POL_REASON_NOT_FORWARDED,	/* "not_forwarded": a server request
					   the policy lets through that the
					   bridge could not carry to the
					   client */
	POL_REASON_CANCELLED,		/* "cancelled": the client cancelled
					   the call (notifications/cancelled) */
	POL_REASON_NO_ANSWER,		/* "no_answer": a server request the
					   client did not answer in time, or
					   whose call ended first */
	POL_REASON_NO_STREAM,		/* "no_stream": a server request
					   with no event stream to carry it
					   to the client */
	POL_REASON_OUTCOME_UNKNOWN,	/* "outcome_unknown": a server request
					   carried to a client when the bridge
					   process ended */
	POL_REASON__COUNT		/* not a reason: the table's size */
};

/* pol_reason_name: the stable wire name of r (as in the comments above).
 * Never NULL: a value outside the enum gives "unknown_reason", a name no
 * reason has. */
const char	*pol_reason_name(enum pol_reason r);

/* Every decision names the rule that decided ("egress.allow[2]",
 * "class:metadata", "default") and a reason (POL_REASON_ALLOWED,
 * POL_REASON_ALWAYS_DENIED_CLASS, POL_REASON_EXPLICIT_DENY, ...). Rule
 * strings are static or owned by the policy. */
struct pol_decision {
	enum pol_verdict verdict;
	const char	*rule;
	enum pol_reason	 reason;
	char		 rule_buf[48];	/* backing store for generated rule names */
};

/* Egress: host is a DNS name (one trailing dot allowed, any case) or an
 * address literal (pol_addr_parse form); proto is IPPROTO_TCP/UDP/ICMP(V6);
 * port 0 is refused for TCP/UDP. Precedence (DESIGN §4): always-deny classes
 * ("class:<name>", "always_denied_class") -> explicit denies
 * ("egress.deny[i]", "explicit_deny") -> private ranges unless a CIDR allow
 * whose own network is of the same class covers the address
 * ("class:<name>", "private_range") -> allows ("egress.allow[i]",
 * "allowed") -> "default", "no_matching_rule". tainted=true applies the
 * taint keep-list instead of the allows ("mcp.taint.keep[i]"; no match:
 * "mcp.taint", "tainted"). Bad input: rule "input", reason "bad_host",
 * "bad_port", "bad_protocol" or "bad_request". Never allocates. */
struct pol_egress_q {
	const char	*host;
	uint8_t		 proto;
	uint16_t	 port;
	bool		 tainted;
	const struct pol_cidr *treat_as_public;
	size_t		 ntreat_as_public;
};
void	pol_egress_decide(const struct pol_policy *p,
	    const struct pol_egress_q *q, struct pol_decision *out);

/* Does p allow host name over proto on both ends of [lo, hi] (tainted: by
 * its taint keep-list)? The ends are what the DNS proxy checks when it cuts
 * an answer's ports into learned ranges, so an explicit deny with ports
 * still wins; a reload re-decides learned elements the same way. */
bool	pol_egress_range_allowed(const struct pol_policy *p, const char *name,
	    uint8_t proto, uint16_t lo, uint16_t hi, bool tainted);

/*
 * The name gate: how a TCP flow to a DNS-learned destination is checked
 * before it opens. A host allow rule (or taint keep rule) may say
 * `check: tls | http | none`; without it port 443 is tls, 80 http, any
 * other none (address only, the weaker check, for SSH and the like).
 * CIDR rules are address-only and take no check.
 */
enum pol_check { POL_CHECK_NONE = 0, POL_CHECK_TLS, POL_CHECK_HTTP };
/* pol_check_name: "none", "tls", "http"; "unknown_check" outside. */
const char	*pol_check_name(enum pol_check c);
/* pol_egress_check: decides host name (a DNS name) over TCP to port as
 * pol_egress_decide does, into *out, and when that allows through a host
 * rule, the check that rule applies on port into *check (POL_CHECK_NONE
 * otherwise). Never allocates. */
void	pol_egress_check(const struct pol_policy *p, const char *name,
	    uint16_t port, bool tainted, struct pol_decision *out,
	    enum pol_check *check);

/* For an allowed DNS name, the protocol/port pairs its answers may be used
 * with (from the host rules that match it). Returns how many were written
 * (at most max). */
size_t	pol_egress_ports_for_name(const struct pol_policy *p, const char *name,
	    bool tainted, struct pol_net_rule *out, size_t max);

/* DNS: name in presentation form (a trailing dot is accepted), any case;
 * qtype is the numeric RR type. Synthetic names (sluice.internal,
 * bridge.sluice.internal) give POL_SYNTHETIC. Then: invalid name ("input",
 * "bad_name"), pol_dns_name_suspect ("dns.limits", its reason), explicit
 * host denies, the host allow rules (or taint keep rules) as the allowlist
 * ("default"/"no_matching_rule" or "mcp.taint"/"tainted"), and the type:
 * listed -> POL_ALLOW "allowed"; HTTPS/SVCB not listed -> POL_ALLOW with
 * reason "nodata" (the proxy answers NODATA); others -> "dns.types",
 * "type_not_allowed". Never allocates. */
struct pol_dns_q {
	const char	*name;
	uint16_t	 qtype;
	bool		 tainted;
};
struct pol_dns_limits {
	uint32_t	min_ttl_s, max_ttl_s;
	uint32_t	qps, burst;
	uint32_t	max_name_len, max_label_len;
	uint32_t	entropy_min_len;	/* labels shorter are never scored */
	uint32_t	entropy_millibits;	/* Shannon bits/char x1000 over which a label is suspect */
	bool		deny_refused;		/* true: REFUSED, false: NXDOMAIN */
};
void	pol_dns_decide(const struct pol_policy *p, const struct pol_dns_q *q,
	    struct pol_decision *out);
void	pol_dns_limits(const struct pol_policy *p, struct pol_dns_limits *out);
/* pol_dns_label_suspect: the entropy/length heuristic for tunnelling, pure.
 * Returns true and a reason code ("label_too_long", "name_too_long",
 * "high_entropy") when the name should be refused as a suspected tunnel. */
bool	pol_dns_name_suspect(const struct pol_dns_limits *l, const char *name,
	    enum pol_reason *reason);

/* Tool calls. Budget state is supplied by the caller (it lives in the state
 * database); the decision says which reservations to make. */
enum pol_budget_scope { POL_SCOPE_SANDBOX = 1, POL_SCOPE_SUBJECT, POL_SCOPE_POLICY };

struct pol_budget_use {		/* current use of one named budget */
	const char	*name;
	uint64_t	 calls, cost, result_bytes;
};
struct pol_reservation {	/* what to add before forwarding */
	const char	*budget;	/* budget name (owned by the policy) */
	enum pol_budget_scope scope;
	uint64_t	 window_s;	/* 0 = lifetime */
	uint64_t	 calls, cost;
	uint64_t	 limit_calls, limit_cost, limit_result_bytes; /* 0 = none */
};
struct pol_tool_q {
	const char	*subject;
	const char	*const *label_keys;	/* sandbox labels, parallel arrays */
	const char	*const *label_values;
	size_t		 nlabels;
	const char	*server;
	const char	*tool;
	const char	*args_json;		/* the call's arguments object */
	const struct pol_budget_use *budgets;
	size_t		 nbudgets;
	const char	*pin_hex;		/* current definition's pol_tool_pin;
						 * a rule with a pin denies
						 * ("pin_mismatch") unless equal */
};
#define POL_MAX_RESERVATIONS 8
struct pol_tool_decision {
	struct pol_decision	d;
	char			message[256];	/* neutral text for the agent */
	const char		*classification; /* "public", "internal", ... */
	bool			taints;		/* result at or above taint level */
	struct pol_reservation	res[POL_MAX_RESERVATIONS];
	size_t			nres;
	uint64_t		max_result_bytes;
	bool			args_digest_only; /* audit: digest, not full args */
};
/* Fails closed: malformed args_json, an unknown server or tool, an internal
 * error all deny with a reason. The first rule matching server, tool,
 * subject (glob) and labels decides ("mcp.tools[i]"; none: "default",
 * "no_matching_rule"). Deny reasons: "rule_deny", "pin_mismatch",
 * "bad_arguments" (not a JSON object; args_json NULL means {}),
 * "unknown_argument", "argument_constraint", "missing_argument",
 * "budget_exhausted", "bad_request"; otherwise POL_ASK
 * "approval_required" or POL_ALLOW "allowed", with res[] filled (one per
 * budget of the rule: calls 1, cost = the rule's cost). A budget is
 * exhausted when use.calls + 1 > calls, use.cost + cost > cost, or
 * use.result_bytes >= result_bytes (a use missing from q->budgets is 0). */
void	pol_tool_decide(const struct pol_policy *p, const struct pol_tool_q *q,
	    struct pol_tool_decision *out);
/* pol_tool_visible: may the tool appear in tools/list for this subject and
 * labels, and does its definition match the pin? pin_hex is the current
 * definition's pin (pol_tool_pin). */
bool	pol_tool_visible(const struct pol_policy *p, const char *server,
	    const char *tool, const char *pin_hex, enum pol_reason *reason);
/* pol_tool_visible above ignores subject and labels (a rule that has them
 * and denies is skipped, as it may not apply). pol_tool_visible_q is the
 * exact form: first rule matching server, tool, subject and labels of q,
 * pin compared with q->pin_hex. reason: "visible", "no_matching_rule",
 * "rule_deny", "pin_mismatch" (q NULL: "bad_request"). */
bool	pol_tool_visible_q(const struct pol_policy *p,
	    const struct pol_tool_q *q, enum pol_reason *reason);
/* pol_tool_approval_timeout_ms: how long an `ask` is held. */
uint64_t pol_tool_approval_timeout_ms(const struct pol_policy *p);
/* pol_tool_audit_digest: does the policy's `mcp.audit_args: digest` keep
 * the arguments of every call out of its records (their digest only)? The
 * same for all of the policy's calls, decided or not, so that a call denied
 * before any rule is evaluated does not record what a decided one would
 * hide. NULL: true (nothing known, nothing revealed). */
bool	pol_tool_audit_digest(const struct pol_policy *p);

/*
 * MCP prompts (mcp.prompts): rules of the tool-rule form keyed `prompt:
 * SERVER/NAME`, with the same subjects, labels, classification, budgets,
 * cost and argument constraints (no pin). pol_prompt_decide is
 * pol_tool_decide over them (q->tool is the prompt's name, q->args_json
 * its arguments; messages say "prompt"); pol_prompt_visible_q is
 * pol_tool_visible_q over them ("visible", "no_matching_rule",
 * "rule_deny").
 */
void	pol_prompt_decide(const struct pol_policy *p,
	    const struct pol_tool_q *q, struct pol_tool_decision *out);
bool	pol_prompt_visible_q(const struct pol_policy *p,
	    const struct pol_tool_q *q, enum pol_reason *reason);

/*
 * MCP resources (mcp.resources, policy/mcpres.c). A URI is refused
 * ("input", "bad_uri") unless it has a scheme ([A-Za-z][A-Za-z0-9+.-]*,
 * at most 32) and at most 2048 bytes, no control character, blank,
 * backslash or brace, no %2e/%2f and no "." or ".." path segment. Its
 * scheme is lower-cased, then the first rule whose server is q->server,
 * whose schemes (if any) hold the scheme and whose uri glob (fnmatch, no
 * flags: '*' crosses '/') matches decides ("mcp.resources[i]"; none:
 * "default", "no_matching_rule"); deny: "rule_deny"; then its budgets as
 * for tools ("budget_exhausted"), then POL_ASK "approval_required" or
 * POL_ALLOW "allowed". max_result_bytes is the smaller of the rule's
 * max_bytes and mcp.results.max_bytes; classification and taints as for
 * tools. Never allocates.
 */
struct pol_resource_q {
	const char	*server;
	const char	*uri;
	const struct pol_budget_use *budgets;
	size_t		 nbudgets;
};
void	pol_resource_decide(const struct pol_policy *p,
	    const struct pol_resource_q *q, struct pol_tool_decision *out);
/* pol_resource_visible: may uri (a URI template of RFC 6570 when tmpl,
 * its {expressions} matched literally by the glob) of server appear in a
 * listing, and be subscribed to? The same rule lookup, ignoring budgets:
 * true for allow and ask. reason: "visible", "bad_uri",
 * "no_matching_rule", "rule_deny", "bad_request". */
bool	pol_resource_visible(const struct pol_policy *p, const char *server,
	    const char *uri, bool tmpl, enum pol_reason *reason);
/*
 * MCP server-to-client requests (mcp.server_requests, policy/srvreq.c):
 * may an upstream's sampling/createMessage, elicitation/create or
 * roots/list reach the sandbox's client? The first entry whose server is
 * server or "*" decides; a kind it leaves out, no entry, or NULL: POL_DENY.
 * POL_ASK means a person approves each one.
 */
enum pol_sreq_kind { POL_SREQ_SAMPLING = 0, POL_SREQ_ELICITATION,
	POL_SREQ_ROOTS, POL_SREQ_NKINDS };
enum pol_verdict pol_server_request(const struct pol_policy *p,
	    const char *server, enum pol_sreq_kind kind);
/* pol_mcp_offers: has p a rule that is not deny for prompts (prompts
 * true) or resources of server? What a session of that server is told
 * about list changes. False for NULL. */
bool	pol_mcp_offers(const struct pol_policy *p, const char *server,
	    bool prompts);

/* ------------------------------------------------------------------ pins */

/* pol_tool_pin: "sha256:<64 hex>" over the canonical JSON (sorted keys, no
 * whitespace) of a tool definition's name, title, description, inputSchema,
 * outputSchema and annotations; other members are ignored and absent ones
 * are left out. Stable across key order and whitespace. 0, or -1 if
 * tool_json is not a JSON object with a string "name". out needs 72 bytes. */
int	pol_tool_pin(const char *tool_json, char *out, size_t outlen);

/* --------------------------------------------------------------- results */

/* pol_redact: take secrets out of a tool result before it reaches the
 * sandbox. Every match of the policy's mcp.results.redact classes and
 * mcp.results.redact_patterns in in[0..inlen) (need not be NUL-terminated;
 * may contain NULs) is replaced by a fixed marker:
 *   aws_keys      AKIA/ASIA + 16 [A-Z0-9]          "[REDACTED:aws_key]"
 *                 the value after aws_secret_access_key / SecretAccessKey /
 *                 aws_secret_key and ':' or '=' (16+ base64 characters)
 *                                                  "[REDACTED:aws_secret]"
 *   private_keys  a whole "-----BEGIN ...PRIVATE KEY...-----" block up to
 *                 its END line, or to the end of in if there is none
 *                                                  "[REDACTED:private_key]"
 *   bearer_tokens the token after "Bearer ", the value after
 *                 "Authorization:" / "Authorization=" (to the end of the
 *                 line or string)                  "[REDACTED:bearer_token]"
 *                 eyJ... JWT/JWE (two dots at least) "[REDACTED:jwt]"
 *   github_tokens gh[pousr]_ + 36 alnum, github_pat_ + 22
 *                                                  "[REDACTED:github_token]"
 *   redact_patterns  every non-empty match         "[REDACTED:pattern]"
 *   upstream_credentials  each non-empty string of secrets (the credentials
 *                 the daemon holds), exact bytes; for secrets of 6 bytes or
 *                 more also their base64 and base64url forms (with or
 *                 without padding, at any offset of a longer blob, read
 *                 through the line breaks that wrap it, with blanks, '>'
 *                 or escaped breaks around them), their %-encoding
 *                 (either hex case, a blank also as '+') and hex (either
 *                 case), and the base64 of their JSON escapings and of
 *                 their %-encodings; escaped, also in any mix of the string
 *                 escapes of JSON, C, Python and JavaScript (octal and \x
 *                 included), HTML character references and %-encoding of
 *                 any byte, up to four levels deep (an escape that is part
 *                 of a match is redacted whole); and in hex dumps (xxd,
 *                 hexdump -C, od -t x1: offset, hex groups, text column;
 *                 hexdump and od -x: little-endian 16-bit words; also
 *                 inside a JSON string), decoded across lines, the
 *                 match taken from its first hex digit to the end of the
 *                 line of its last byte
 *                                                  "[REDACTED:credential]"
 * secrets are ignored unless upstream_credentials is enabled. Overlapping
 * matches become one marker (named by the match that starts first, the
 * longest on a tie); adjacent ones stay two. Built-in classes match ASCII
 * only and patterns match whole characters, so valid UTF-8 stays valid.
 * Redact decoded strings (each JSON string value of a result), not raw
 * JSON text: a marker contains no quote or backslash, but a pattern can
 * end inside an escape sequence of raw JSON.
 *
 * On success returns 0, *out is a new NUL-terminated buffer (caller
 * frees; a copy of in when nothing matched), *outlen (may be NULL) its
 * length without the NUL and *count (may be NULL) the number of markers
 * (saturating). Scans are linear in inlen per class and per secret;
 * patterns run under the policy's PCRE2 match limits.
 * Fails closed: -1 with *out NULL and errno EINVAL (NULL p or out, NULL in
 * with inlen > 0, NULL secrets with nsecrets > 0, a pattern that hits its
 * match or depth limit, or in not valid UTF-8 while redact_patterns is
 * set), ENOMEM or EOVERFLOW. The caller must then withhold the result.
 * pol_redact_err also puts a one-line reason in err (may be NULL/0), e.g.
 * "mcp.results.redact_patterns[0]: match limit exceeded". Pure. */
int	pol_redact(const struct pol_policy *p, const char *const *secrets,
	    size_t nsecrets, const char *in, size_t inlen, char **out,
	    size_t *outlen, unsigned *count);
int	pol_redact_err(const struct pol_policy *p, const char *const *secrets,
	    size_t nsecrets, const char *in, size_t inlen, char **out,
	    size_t *outlen, unsigned *count, char *err, size_t errlen);
/* pol_redact_held: pol_redact with only the upstream_credentials class,
 * whatever a policy says: for the credentials a caller must never let
 * out in any form. Same contract (no err text). Pure. */
int	pol_redact_held(const char *const *secrets, size_t nsecrets,
	    const char *in, size_t inlen, char **out, size_t *outlen,
	    unsigned *count);
/* pol_redacts_held: p enables upstream_credentials (pol_redact then does
 * what pol_redact_held does). False for NULL. */
bool	pol_redacts_held(const struct pol_policy *p);
/* pol_holds_secret: text[0..len) carries one of secrets in a form the
 * upstream_credentials class of pol_redact finds (raw, base64, %-encoded,
 * escaped), whatever a policy enables. 1 yes, 0 no, -1 with errno (EINVAL
 * for NULL text with len > 0 or NULL secrets with nsecrets > 0; ENOMEM,
 * EOVERFLOW): the caller must then act as on yes. Pure. */
int	pol_holds_secret(const char *const *secrets, size_t nsecrets,
	    const char *text, size_t len);
/* pol_redact_enabled: the policy redacts anything at all (any class or
 * pattern); false lets the caller skip pol_redact. False for NULL. */
bool	pol_redact_enabled(const struct pol_policy *p);
/* pol_result_max_bytes: mcp.results.max_bytes (default 1 MiB), the same
 * value pol_tool_decide puts in max_result_bytes. 0 (nothing) for NULL. */
uint64_t pol_result_max_bytes(const struct pol_policy *p);
/* pol_taint_level: mcp.taint.level ("public", "internal", "confidential",
 * "secret"; static), or NULL when the policy has no taint section and never
 * taints; "public" (everything taints) for a NULL p. Whether one call
 * taints is pol_tool_decide's taints. */
const char *pol_taint_level(const struct pol_policy *p);

#endif /* SLUICE_POLICY_POLICY_H */
