/*
 * bridge: the capability bridge (DESIGN §6). Code inside a sandbox calls MCP
 * tools only through this module: it serves MCP Streamable HTTP (revisions
 * 2025-06-18 and 2025-11-25) at http://<service address>:<port>/mcp/<server>,
 * terminates the protocol, and acts as the MCP client of the upstream servers
 * the daemon config declares (Streamable HTTP through libcurl's multi
 * interface, or stdio child processes). Between the two sides every call is
 * decided by policy/ (listing is not authorization), budgets are reserved in
 * SQLite before forwarding, `ask` calls wait for a person, results are capped
 * and redacted, tainting results narrow the sandbox's egress before they are
 * released, and nothing is released before its record is durable.
 *
 * The bridge runs in the daemon's single ev loop (gateway/ev.h): its HTTP
 * server (libmicrohttpd's epoll fd), libcurl's sockets and timers, and the
 * children's pipes are all fds of that loop; nothing here starts a thread.
 * Call every br_* function from the thread that runs the loop.
 *
 * The bridge never decides who a sandbox is, never writes audit records and
 * never touches the firewall itself: the daemon hands it hooks (struct
 * br_hooks) made of flat structs, so that the bridge can later run as an
 * unprivileged process with the hooks turned into messages.
 *
 * SIGPIPE: the daemon must ignore SIGPIPE (a stdio upstream that dies while
 * we write to it would otherwise kill the process).
 */
#ifndef SLUICE_GATEWAY_BRIDGE_BRIDGE_H
#define SLUICE_GATEWAY_BRIDGE_BRIDGE_H

#include <sys/socket.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "gateway/ev.h"
#include "policy/policy.h"

#define BR_MAX_LABELS	16

/* Who a request is, as the daemon's identify hook fills it. Flat on purpose
 * (it crosses the future privilege-separation seam). */
struct br_client {
	char			 id[64];	/* sandbox id */
	char			 subject[128];
	char			 label_keys[BR_MAX_LABELS][64];
	char			 label_values[BR_MAX_LABELS][128];
	size_t			 nlabels;
	/* The sandbox's policy. Borrowed: it must stay valid until the
	 * bridge calls hooks->release(ctx, policy_ref) (once per successful
	 * identify), which it does when the request and every call it
	 * started are finished. */
	const struct pol_policy	*policy;
	void			*policy_ref;
	bool			 tainted;	/* egress already narrowed */
};

enum br_event_kind {
	BR_EV_CALL = 1,		/* "mcp.call": one per tools/call */
	BR_EV_TOOL_DRIFT,	/* "mcp.tool_drift": a definition changed,
				   appeared or disappeared after the first
				   listing (finding) */
	BR_EV_AUTH_FAILED,	/* "mcp.auth_failed": a 401 (finding) */
	BR_EV_TAINT,		/* "mcp.taint": egress narrowed (finding) */
	BR_EV_UPSTREAM,		/* "mcp.upstream": an upstream died or failed
				   to start (finding) */
	BR_EV_RESOURCE,		/* "mcp.resource": one per resources/read
				   (tool is its URI) */
	BR_EV_PROMPT,		/* "mcp.prompt": one per prompts/get (tool
				   is the prompt's name) */
	BR_EV_INTENT,		/* "mcp.intent": a call about to be forwarded;
				   durable before it leaves for the upstream */
	BR_EV_SERVER_REQUEST,	/* "mcp.server_request": one per request an
				   upstream made of the client (tool is its
				   method, args what it asked) */
	BR_EV_APPROVAL,		/* "mcp.approval": this host decided a call
				   another host of the fleet holds (held_by);
				   call_id is the approval's id */
};
#define BR_EV__LAST	BR_EV_APPROVAL

/* br_kind_is_record: k is a durable record of an action (a call, a
 * read, a prompt), not a finding. */
bool		 br_kind_is_record(enum br_event_kind k);

/* br_kind_name: "mcp.call", "mcp.tool_drift"... for k; "mcp.unknown"
 * outside the enum. Never NULL. */
const char	*br_kind_name(enum br_event_kind k);

/* One event. Every pointer is borrowed for the duration of the hook call
 * only (copy what you keep); any may be NULL when it does not apply. No
 * field ever holds an upstream credential or a sandbox token. */
struct br_event {
	enum br_event_kind	 kind;
	const char		*kind_name;	/* "mcp.call", ... as above */
	const char		*sandbox, *subject, *policy;
	const char		*src;		/* client address, text */
	const char		*session;	/* Mcp-Session-Id */
	const char		*server, *tool;
	const char		*args;		/* compact JSON, or NULL when the
						   policy wants the digest only */
	const char		*args_digest;	/* "sha256:<hex>" */
	const char		*decision;	/* "allow" | "deny" */
	const char		*rule;		/* policy rule */
	enum pol_reason		 reason;	/* POL_REASON_NONE: none */
	const char		*message;	/* the neutral text the agent got */
	const char		*budget;	/* JSON object: state of each budget
						   after the reservation */
	const char		*approver;	/* ask: who decided (a user
						   name, or "sluice"), or NULL */
	int64_t			 approver_uid;	/* ask: their uid from the
						   control socket; -1 for
						   Sluice itself or no ask */
	const char		*approver_note;	/* ask: text the approving
						   client supplied (never an
						   identity), or NULL */
	const char		*approver_host;	/* ask, in a fleet: the host the
						   decision was made on */
	const char		*held_by;	/* mcp.approval: the host that
						   holds the call */
	const char		*approval;	/* ask: "approved" | "denied" |
						   "timeout" | "cancelled",
						   NULL otherwise */
	const char		*classification;
	bool			 taints;	/* the result taints the sandbox */
	int64_t			 upstream_latency_us; /* -1: not forwarded */
	uint64_t		 result_bytes;	/* bytes sent to the sandbox */
	const char		*result_digest;	/* "sha256:<hex>" of them */
	unsigned		 redactions;	/* secrets replaced */
	const char		*detail;	/* findings: what happened */
	const char		*call_id;	/* mcp.intent and mcp.call: the
						   call's id (32 hex), which
						   pairs an intent with its
						   outcome */
	uint64_t		 sreq_key;	/* mcp.server_request: the
						   announcement (sreq_carried)
						   this record ends, or 0 */
};

/* Completion of a durable record: ok != 0 once it is committed, 0 if it
 * could not be. May run inside record() itself or later from the loop. */
typedef void br_record_done(void *arg, int ok);
/* Completion of an egress narrowing: ok != 0 once it is in force. */
typedef void br_taint_done(void *arg, int ok);
/* Starts the stdio server srv (an entry of the config's servers) in a
 * process that is not the bridge's (a bridge under a seccomp filter
 * cannot exec, and an MCP server must not inherit the filter): that
 * starter builds the server's environment and credential itself, so the
 * bridge cannot ask for anything but a server of the config. 0 with
 * *in_fd (its stdin, write end), *out_fd (its stdout, read end) and
 * *pidfd (a pidfd of the server, for signals) filled, all close-on-exec;
 * -1 with errno. */
typedef int br_spawn_fn(void *ctx, const struct pol_mcp_server *srv,
	    int *in_fd, int *out_fd, int *pidfd);

struct br_hooks {
	/* src/len (the TCP peer) plus the bearer token (NULL when the
	 * request had none) -> the sandbox; both must agree. 0 and *out
	 * filled, or -1 (the bridge answers 401 and reports a finding).
	 * Required. */
	int	(*identify)(void *ctx, const struct sockaddr *src,
		    socklen_t len, const char *token, struct br_client *out);
	/* Drops the reference identify put in out->policy_ref. Optional. */
	void	(*release)(void *ctx, void *policy_ref);
	/* A durable record of one call: its intent (kind BR_EV_INTENT)
	 * before it is forwarded, its outcome (BR_EV_CALL) before the
	 * answer is released. done(arg, ok) must be called exactly once if
	 * this returns 0; -1 means it will not be (recording failed). The
	 * bridge forwards a call only after done(arg, 1) of its intent and
	 * releases the result only after done(arg, 1) of its outcome:
	 * otherwise the sandbox gets an error. Required. */
	int	(*record)(void *ctx, const struct br_event *ev,
		    br_record_done *done, void *arg);
	/* A finding (drift, 401, taint, upstream trouble); fire and forget.
	 * Optional. */
	void	(*finding)(void *ctx, const struct br_event *ev);
	/* Narrow the sandbox's egress to its policy's taint keep-list.
	 * done(arg, 1) once it is in force, done(arg, 0) if it could not
	 * be: called exactly once if this returns 0 (possibly inside it);
	 * -1 means it will not be (failed now). Until done(arg, 1) the
	 * tainting result is withheld; after a failure it is never
	 * released (fail closed). Required when a policy can taint. */
	int	(*restrict_egress)(void *ctx, const char *sandbox_id,
		    br_taint_done *done, void *arg);
	/* A request from src that failed authentication, which anyone who
	 * reaches the port can send at packet rate: 1 when it is to be
	 * reported on its own (a finding), 0 when it was only counted into
	 * a summary within the daemon's budget. Optional: without it every
	 * one is reported. */
	int	(*auth_tally)(void *ctx, const char *src);
	/* Whether some policy may let a roots/list of server through
	 * (mcp.server_requests roots not deny): the upstream's initialize
	 * offers roots only then. Asked at each handshake. Optional:
	 * without it, never. */
	bool	(*roots_offered)(void *ctx, const char *server);
	/* A server request is carried to a client, and key (never 0)
	 * names it until its mcp.server_request record, whose sreq_key is
	 * key, ends it: ev is what that record says of it so far (sandbox,
	 * session, server, method, digest, detail). Whoever keeps the
	 * records records it as of unknown outcome if the bridge goes
	 * before that record. Fire and forget. Optional. */
	void	(*sreq_carried)(void *ctx, uint64_t key,
		    const struct br_event *ev);
	void	*ctx;
};

struct br_config {
	/* Upstream servers and their credential references. Borrowed: it
	 * must outlive the bridge. */
	const struct pol_config	*cfg;
	/* Where bridge.db (budgets, pins) lives; created 0700 if missing.
	 * NULL: cfg->state_dir. */
	const char		*state_dir;
	/* Listening address (numeric IPv4 or IPv6) and port; port 0 picks
	 * an ephemeral one (br_port tells which). NULL address: the
	 * config's service address. */
	const char		*listen_addr;
	uint16_t		 port;
	/* Origin values accepted besides "http://<listen addr>:<port>".
	 * A request with any other Origin gets 403. */
	const char *const	*origins;
	size_t			 norigins;
	size_t			 body_max;	/* request body cap; 0 = 1 MiB */
	size_t			 page_size;	/* tools/list page; 0 = 100 */
	uint32_t		 upstream_timeout_ms; /* 0 = 30000 */
	/* Lookup of credential variables (cred_env); NULL = getenv. */
	const char		*(*getenv)(const char *name);
	/* A listening socket made by someone else (the parent of the
	 * bridge process, which binds for it): used instead of binding
	 * listen_addr and port when prebound. */
	bool			 prebound;
	int			 listen_fd;
	/* Where stdio servers are started; NULL: forked here. */
	br_spawn_fn		*spawn;
	void			*spawn_ctx;
	/* The database is this process's alone: WAL in exclusive locking
	 * mode, opened and written once by br_new, so that no later access
	 * creates a file (a process that gave up its rights to the state
	 * directory keeps using what it opened). */
	bool			 db_exclusive;
	/* The password for the fleet's database (cfg's fleet section), as
	 * the parent read it; NULL: libpq's own sources. Copied by br_new. */
	const char		*fleet_password;
	/* This host's name in the fleet's tables (the parent resolved it);
	 * NULL: no fleet. */
	const char		*fleet_host;
};

struct br;

/* br_new: open <state_dir>/bridge.db, read every upstream credential, start
 * the upstreams (stdio children are spawned, HTTP ones initialized) and
 * listen. loop, c->cfg and the hooks' ctx are borrowed. NULL with errno and
 * a message in err on failure (a credential that cannot be read, a port in
 * use, a database that does not open); the message never holds a secret. */
struct br	*br_new(struct ev_loop *loop, const struct br_config *c,
		    const struct br_hooks *h, char *err, size_t errlen);
/* br_free: denies pending approvals and the calls in flight (forwarded
 * ones too: the upstream may have acted), each recorded, answers the other
 * parked requests with 503, stops the children (SIGTERM, then SIGKILL) and
 * closes everything. br_free(NULL) is a no-op. */
void		 br_free(struct br *br);
/* br_check_credentials: whether every upstream credential of cfg is
 * there (a credential file that opens and is not empty, a variable that is
 * set, through get or getenv when NULL), without reading one: for a daemon
 * that starts its bridge in another process and must refuse to start when
 * that process could not. 0, or -1 with errno and the message br_new would
 * give in err. */
int		 br_check_credentials(const struct pol_config *cfg,
		    const char *(*get)(const char *), char *err,
		    size_t errlen);
/* br_port: the TCP port listened on. */
uint16_t	 br_port(const struct br *br);

/* br_approvals_list: a new JSON array of the pending `ask` calls:
 * [{"id", "sandbox", "subject", "server", "tool", "arguments", "rule",
 *   "created_ms", "expires_ms"}] (arguments as the sandbox sent them). NULL
 * on allocation failure. */
json_t		*br_approvals_list(struct br *br);
/* Who decides an `ask`. The identity is what the caller's transport proves
 * (the control socket's SO_PEERCRED uid and its user name), never what the
 * client writes; a client-supplied name is only a note beside it. */
struct br_approver {
	const char	*name;		/* user name for uid (or the uid in
					   decimal when it has none) */
	int64_t		 uid;		/* >= 0 */
	const char	*note;		/* client-supplied text, or NULL */
};

/* br_approval_decide: approve or deny pending call id as who (copied into
 * the record with reason, which may be NULL). An approval re-checks budgets
 * (they may have run out while it waited) and the tool's definition (listed
 * again first when the listing is stale, as for any call). 0, or -1 with
 * errno ENOENT (no such pending call: unknown, already decided or timed
 * out) or EINVAL (NULL id, who or who->name, or a negative uid). */
int		 br_approval_decide(struct br *br, const char *id,
		    bool approve, const struct br_approver *who,
		    const char *reason);

/*
 * br_approval_answer: the answer to an asynchronous listing or decision:
 * err 0 (list: the listing, borrowed for the call) or an errno: ENOENT
 * (nothing to decide), ENOTCONN (the fleet's queue does not answer), EIO
 * (decided, but this host's record of it failed), ENOMEM.
 */
typedef void br_approval_answer(void *arg, int err, json_t *list);
/*
 * br_approvals_list_async, br_approval_decide_async: br_approvals_list and
 * br_approval_decide as a fleet needs them: with one, the listing is every
 * host's pending calls (each with its "host") and a decision is made in
 * the shared queue, for a call any host holds (recorded here as
 * mcp.approval when another host holds it). Without one, answered at once.
 * cb comes exactly once, maybe inside the call, when 0 is returned; -1
 * with errno (EINVAL, ENOMEM, ENOTCONN) and no cb otherwise.
 */
int		 br_approvals_list_async(struct br *br,
		    br_approval_answer *cb, void *arg);
int		 br_approval_decide_async(struct br *br, const char *id,
		    bool approve, const struct br_approver *who,
		    const char *reason, br_approval_answer *cb, void *arg);

/* br_sandbox_gone: forget the sandbox's sessions, close its GET streams
 * (at once, waiting for no client) and deny its pending approvals (a
 * deleted sandbox). */
void		 br_sandbox_gone(struct br *br, const char *sandbox_id);
/* br_sandbox_changed: the sandbox's identity changed (taint, policy):
 * what was opened under the old one and outlives a request (its GET
 * streams) ends, for the client to open again under the new one. */
void		 br_sandbox_changed(struct br *br, const char *sandbox_id);

/* br_pins_snippet: the current definitions of server's tools as a policy
 * `mcp.tools` snippet with their pins (for `sluice mcp pins SERVER`), from
 * the last listing. 0, or -1 with errno ENOENT (unknown server, or not
 * listed yet). */
int		 br_pins_snippet(struct br *br, const char *server, FILE *out);

/* br_pins_accept: make the current definition of server/tool its approved
 * baseline (or forget a tool that disappeared), ending its drift. 0, or -1
 * with errno ENOENT (unknown server or tool) or EIO (database). */
int		 br_pins_accept(struct br *br, const char *server,
		    const char *tool);

/* bridge_child_main: main() of the bridge process (gateway/bridge/
 * child.c), which sluiced's parent starts as `sluiced --room bridge --uid
 * U --gid G` with its socket pair on fd 3 and the listener on fd 4. The
 * exit status. */
int		 bridge_child_main(int argc, char **argv);

/* ------------------------------------------------------------ parsing */

/* The JSON-RPC framing check every POST body goes through, exposed for the
 * fuzz target and the unit tests. Pure. */
enum br_rpc_kind {
	BR_RPC_REQUEST = 1,	/* method + id */
	BR_RPC_NOTIFICATION,	/* method, no id */
	BR_RPC_RESPONSE,	/* id + result or error (ignored: 202) */
	BR_RPC_INVALID,		/* answer http_status with JSON-RPC code */
};
struct br_rpc {
	enum br_rpc_kind kind;
	json_t		*msg;		/* owned; NULL unless the body parsed
					   as a JSON object */
	const char	*method;	/* inside msg */
	json_t		*id;		/* inside msg, NULL for notifications */
	int		 code;		/* BR_RPC_INVALID: -32700 / -32600 */
	unsigned	 http_status;	/* BR_RPC_INVALID: 400 */
	const char	*error;		/* BR_RPC_INVALID: static message */
};
/* br_rpc_parse: classify one POST body (len bytes, need not be
 * NUL-terminated). Malformed JSON -> -32700; an array (batch), a non-object,
 * a wrong "jsonrpc", a bad id (null, boolean, fractional, object) or method
 * -> -32600. Duplicate keys are malformed. Free with br_rpc_clear. */
void		 br_rpc_parse(const char *buf, size_t len, struct br_rpc *out);
/* br_rpc_from_value: classify one parsed JSON value v (its reference is
 * taken: it becomes out->msg, or is released) as br_rpc_parse classifies
 * a body, except that it never sees a batch: any non-object is -32600.
 * Free with br_rpc_clear. */
void		 br_rpc_from_value(json_t *v, struct br_rpc *out);
/* The most messages one JSON-RPC batch may hold (2025-03-26 sessions). */
#define BR_BATCH_MAX	16
/* What a batch body is, before any of its messages is handled. */
struct br_batch_parts {
	size_t		 n;		/* messages */
	struct br_rpc	*msgs;		/* n of them, each classified alone;
					   NULL when the batch is refused */
	size_t		 nrequests;	/* those that are requests */
	int		 code;		/* non-zero: the batch is refused */
	const char	*error;		/* with this static message */
};
/* br_batch_parse: body (len bytes) as a JSON-RPC batch of at most max
 * messages: malformed JSON -> code -32700; not an array, or an empty one,
 * or more than max -> -32600; else every element classified by
 * br_rpc_from_value (an invalid one is BR_RPC_INVALID, its neighbours
 * unaffected). Pure. 0, or -1 without memory. Free with
 * br_batch_parts_clear. */
int		 br_batch_parse(const char *buf, size_t len, size_t max,
		    struct br_batch_parts *out);
void		 br_batch_parts_clear(struct br_batch_parts *p);
/* br_batch_looks: is body (len bytes) a JSON array, judging by its first
 * character that is not white space? */
bool		 br_batch_looks(const char *buf, size_t len);
void		 br_rpc_clear(struct br_rpc *r);

#endif /* SLUICE_GATEWAY_BRIDGE_BRIDGE_H */
