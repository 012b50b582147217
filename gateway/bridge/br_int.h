/*
 * br_int: the bridge's private types, shared by its files and nobody else.
 * bridge.h is the module's public face; this header exists so that the
 * server, its HTTP front, the sessions, the JSON-RPC methods, the upstream
 * transports, the tool cache, the call pipeline and the budget store can be
 * separate files without exposing their structs.
 */
#ifndef SLUICE_GATEWAY_BRIDGE_BR_INT_H
#define SLUICE_GATEWAY_BRIDGE_BR_INT_H

#include <sys/queue.h>
#include <sys/types.h>

#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <sqlite3.h>

#include "gateway/bridge/bridge.h"
#include "gateway/bridge/fleetq.h"
#include "gateway/bridge/shared.h"

/* glibc's sys/queue.h lacks the _SAFE forms. */
#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	    (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);	\
	    (var) = (tvar))
#endif

#define BR_PROTO_LATEST		"2025-11-25"	/* by initialize */
#define BR_PROTO_MODERN		"2026-07-28"	/* stateless (modern.c) */
#define BR_PROTO_BATCHED	"2025-03-26"	/* with batches (batch.c) */
#define BR_SERVER_VERSION	"0.1.0"
#define BR_INSTRUCTIONS		"Tools offered through Sluice; every call " \
				"is checked against the sandbox's policy."
#define BR_LINE_MAX		(16u * 1024 * 1024)	/* upstream message cap */
#define BR_MAX_PAGES		50	/* upstream tools/list pages */
#define BR_SESSIONS_MAX		4096
#define BR_SESSIONS_PER_SB	64
#define BR_SESSION_IDLE_MS	(60u * 60 * 1000) /* unused this long: gone */
#define BR_APPROVALS_MAX	1024
#define BR_APPROVALS_PER_SB	64
#define BR_TOOLS_MAX		2000	/* definitions per upstream */
#define BR_NOTES_MAX		32	/* notifications a session holds */
#define BR_SUBS_MAX		64	/* subscriptions of a session */
#define BR_STREAMS_PER_SB	32	/* GET streams of a sandbox, and
					   half its connections at most */
#define BR_KEEPALIVE_MS		15000	/* comment on an idle stream */
#define BR_LIST_TTL_MS		30000	/* a listing older than this is
					   refreshed before a call */

struct br;
struct br_up;
struct br_call;
struct br_stream;
struct br_req;
struct hx;

/* ------------------------------------------------------------ upstreams */

/* A reply to one upstream request: msg is the JSON-RPC response object
 * (borrowed) or NULL with err set (timeout, transport failure). */
typedef void br_up_cb(void *arg, json_t *msg, const char *err);

struct br_up_req {
	TAILQ_ENTRY(br_up_req)	 entry;
	struct br_up		*up;
	json_int_t		 id;
	json_t			*msg;		/* queued until the upstream
						   is ready */
	br_up_cb		*cb;
	void			*arg;
	struct ev_timer		*timer;
	bool			 sent;
	bool			 internal;	/* initialize: not queued */
};
TAILQ_HEAD(br_up_reqs, br_up_req);

enum br_up_state { UP_DOWN = 0, UP_STARTING, UP_READY };

struct br_tool_waiter {
	void	(*fn)(void *arg, int ok);
	void	*arg;
};

struct br_up {
	struct br			*br;
	const struct pol_mcp_server	*srv;
	char				*secret;	/* credential or NULL */
	enum br_up_state		 state;
	struct br_up_reqs		 reqs;		/* pending + queued */
	json_int_t			 next_id;
	char				 version[16];	/* negotiated */
	unsigned			 failures;	/* for backoff */
	struct ev_timer			*restart;
	/* srvreq.c: the session whose roots/list_changed was relayed
	 * last, which owns the roots/list that answers it */
	char				 roots_session[65];

	/* stdio */
	pid_t				 pid;		/* forked here */
	int				 pidfd;		/* or started by
							   c.spawn */
	bool				 has_pidfd;
	int				 in_fd, out_fd;
	char				*rbuf;
	size_t				 rlen, rcap;
	char				*wbuf;
	size_t				 wlen, wcap;

	/* HTTP */
	char				*session;	/* upstream Mcp-Session-Id */
	struct curl_slist		*cred_hdr;	/* kept apart: never logged */
	struct br_get			*get;		/* its GET stream, or NULL */
	bool				 no_get;	/* it answered 405: none */

	/* tools (tools.c) */
	json_t				*tools;		/* current definitions */
	json_t				*pins;		/* name -> current pin */
	json_t				*baseline;	/* name -> first pin */
	json_t				*drifted;	/* name -> detail */
	json_t				*acc;		/* listing in progress */
	unsigned			 pages;
	bool				 listing;
	uint64_t			 listed_ms;
	bool				 stale;
	bool				 listed;
	bool				 relist;	/* list_changed while
							   listing */
	struct br_tool_waiter		*waiters;
	size_t				 nwaiters;

	/* what its initialize answer offered (resources.c) */
	bool				 caps_known;
	bool				 has_resources, has_prompts;
	bool				 res_subscribe, res_list_changed;
	bool				 prompts_list_changed;
	bool				 has_logging;
	bool				 has_completions;
};

int	br_up_start(struct br_up *u);
void	br_up_stop(struct br_up *u);
/* br_up_request: send method(params) (params stolen, may be NULL); cb runs
 * exactly once, from the loop (never before this returns: a down upstream
 * is started from the loop too), unless br_up_cancel is called first. NULL
 * when the request could not be made; cb then never runs. */
struct br_up_req *br_up_request(struct br_up *u, const char *method,
	    json_t *params, br_up_cb *cb, void *arg);
void	br_up_cancel(struct br_up_req *r);
/* br_up_send: msg (borrowed) to u now, outside any request: an answer
 * to one of the upstream's own requests. 0, or -1 when it could not be
 * written. */
int	br_up_send(struct br_up *u, json_t *msg);
/* br_call_cancel: the client of session sid cancelled its request id
 * (notifications/cancelled). A call waiting for approval is refused as
 * cancelled (it reserved nothing yet); one in flight upstream is
 * cancelled there under the upstream's id and recorded as cancelled (its
 * reservation stays spent); any other, or an unknown id, is left alone. */
void	br_call_cancel(struct br *br, const char *sid, const json_t *id);
/* br_srvreq_take: msg, a request of upstream u (a method and an id), is
 * decided and recorded (srvreq.c): refused at once, or carried to the
 * client of the call it came in, on that call's stream, and answered
 * when the client answers. */
void	br_srvreq_take(struct br_up *u, json_t *msg);
/* br_srvreq_answer: POST rq of session sid carries rpc, a JSON-RPC
 * response: the client's answer to a request carried to it, relayed to
 * its upstream under the upstream's id (202); 400 for an id that names
 * no request of sid waiting for it, 413 for one too big. Answers rq. */
void	br_srvreq_answer(struct br_req *rq, const char *sid,
	    const struct br_rpc *rpc);
/* br_srvreq_cancelled: upstream u's notifications/cancelled msg: the
 * request of u it names, carried to a client, is withdrawn (the client
 * is told under the bridge's id) or, waiting for approval, leaves the
 * queue; recorded as cancelled. Any other is dropped. */
void	br_srvreq_cancelled(struct br_up *u, const json_t *msg);
/* br_srvreq_client_cancelled: the client of session sid cancelled rid:
 * when it names a request carried to it, the upstream is told under its
 * own id, it is recorded as cancelled, and true; false otherwise (a call
 * of the client's, perhaps). */
bool	br_srvreq_client_cancelled(struct br *br, const char *sid,
	    const json_t *rid);
/* br_srvreq_stream_gone: stream st ends (a call's: answered, or its
 * client left; a GET's: closed): what waits on it is refused to its
 * upstream and recorded. br_srvreq_call_gone: likewise for call c, which
 * is being freed. */
void	br_srvreq_stream_gone(struct br *br, struct br_stream *st);
void	br_srvreq_call_gone(struct br *br, struct br_call *c);
/* br_srvreq_retry: stateless request rq (rpc) carries a requestState:
 * the retry of a call held for its client's input (tools/call,
 * prompts/get, resources/read). The answers it brings go to the
 * upstream, and rq waits for the call's result or what is asked next;
 * a state that is no call's, or not this sandbox's and request's, is
 * refused (400, -32602). false when rq is no retry (no requestState):
 * rq is untouched. */
bool	br_srvreq_retry(struct br_req *rq, const struct br_rpc *rpc);
/* br_srvreq_roots_changed: the client of session s (of POST rq) said
 * notifications/roots/list_changed: relayed to s's upstream, without
 * anything the client put in it, when rq's policy may let roots/list of
 * that server through and no roots/list of s waits for its client. */
struct br_session;
void	br_srvreq_roots_changed(struct br_req *rq,
	    const struct br_session *s);
/* br_srvreq_abort_all: the bridge stops: every request waiting is
 * refused and recorded while the hooks still work. */
void	br_srvreq_abort_all(struct br *br);
/* br_srvreq_approvals: append the server requests waiting for a person
 * to a (the approvals listing); -1 without memory. */
int	br_srvreq_approvals(struct br *br, json_t *a);
/* br_srvreq_decide: approval id of a server request decided by name
 * (uid -1: Sluice); -1 with ENOENT when no server request has it. */
int	br_srvreq_decide(struct br *br, const char *id, bool approve,
	    const char *name, int64_t uid, const char *note,
	    const char *reason);
/* Called by the transports with one message from the upstream. */
void	br_up_deliver(struct br_up *u, json_t *msg);
/* The transport failed: fail every request, schedule a restart. */
void	br_up_failed(struct br_up *u, const char *why);

/* stdio transport (upstream_stdio.c) */
int	br_stdio_spawn(struct br_up *u);
int	br_stdio_send(struct br_up *u, json_t *msg);
void	br_stdio_close(struct br_up *u);

/* HTTP transport (upstream_http.c) */
int	br_http_init(struct br *br);
void	br_http_fini(struct br *br);
int	br_http_send(struct br_up *u, json_t *msg, bool is_init);
void	br_http_close(struct br_up *u);

/* SSE stream reader (sse.c). br_sse_new: a reader for one stream of at
 * most max bytes; NULL without memory. br_sse_free(NULL) is a no-op. */
struct br_sse;
struct br_sse	*br_sse_new(size_t max);
void		 br_sse_free(struct br_sse *s);
/* br_sse_feed: the next len bytes of the stream (split anywhere). Every
 * event they complete whose data is one JSON value is appended to out (an
 * array) as that value, in stream order. -1 when the stream would exceed
 * its max or memory ran out: nothing of data is taken, the reader stays
 * usable for br_sse_end. */
int		 br_sse_feed(struct br_sse *s, const char *data, size_t len,
		    json_t *out);
/* br_sse_end: the stream ended; an event it left unterminated counts. */
void		 br_sse_end(struct br_sse *s, json_t *out);
/* br_sse_new_stream: a reader for a stream that stays open, of any length,
 * whose unfinished event may not exceed event_max bytes (br_sse_feed is
 * -1 past it, and the stream is to be dropped). br_sse_last_id: the last
 * id: field the stream carried ("" for none), at most BR_SSE_ID_MAX - 1
 * bytes with no NUL. */
#define BR_SSE_ID_MAX	256
struct br_sse	*br_sse_new_stream(size_t event_max);
const char	*br_sse_last_id(const struct br_sse *s);

/* The GET stream of an HTTP upstream (upstream_get.c). br_get_start:
 * open it for u, which just became ready (a no-op when it has one, or
 * said it offers none). br_get_stop: close it, and forget it (u's session
 * ends). br_get_done: easy, a finished transfer, was a GET stream's:
 * handled (true), or not one (false). br_get_deliver: hand on what the
 * GET streams read, outside libcurl. */
struct br_get;
void	br_get_start(struct br_up *u);
void	br_get_stop(struct br_up *u);
bool	br_get_done(struct br *br, CURL *easy, CURLcode rc);
void	br_get_deliver(struct br *br);
/* br_http_hdrs: the headers every request to u carries: Accept (accept),
 * its session id and protocol version once known, its credential. NULL
 * without memory. */
struct curl_slist *br_http_hdrs(const struct br_up *u, const char *accept);
/* br_http_easy_base: what every transfer to u is: its URL, HTTP(S) only,
 * no redirect followed (one could take the credential elsewhere), no
 * signal, a bounded connect, headers hdrs (borrowed: kept until the
 * transfer ends). */
void	br_http_easy_base(const struct br_up *u, CURL *e,
	    struct curl_slist *hdrs);

/* ------------------------------------------------------------ tools */

/* br_tools_refresh: list the upstream's tools again (all pages), update pins
 * and drift, then fn(arg, ok). */
void	br_tools_refresh(struct br_up *u, void (*fn)(void *, int), void *arg);
/* br_tools_changed: the upstream said its tools changed: list them again
 * now, so pins are checked (and drift recorded) at once. At most one
 * listing runs and one more is owed, however often it is said. */
void	br_tools_changed(struct br_up *u);
/* br_tools_get: the current definition of tool (borrowed) or NULL;
 * *pin gets its pin, *drift a reason when it drifted (else NULL). */
json_t	*br_tools_get(struct br_up *u, const char *tool, const char **pin,
	    const char **drift);
void	br_tools_free(struct br_up *u);
int	br_tools_load_baseline(struct br_up *u);

/* ------------------------------------------------------------ sessions */

struct br_session {
	TAILQ_ENTRY(br_session)	 entry;		/* least recently used
						   first */
	char			 id[65];
	char			 sandbox[64];
	char			 server[40];
	char			 version[16];
	bool			 initialized;
	uint64_t		 used_ms;	/* ev_now_ms of the last use */
	unsigned		 inflight;	/* its requests waiting for an
						   answer: never evicted
						   while > 0 */
	/* notify.c: what the upstream said that this session gets with
	 * its next answer, and what it may be told */
	json_t			*notes;		/* array, at most BR_NOTES_MAX */
	json_t			*subs;		/* uri -> true */
	bool			 res_ok, prompts_ok;
	int			 log_level;	/* logging.c: -1 = never set */
	struct br_stream	*stream;	/* its GET stream, or NULL */
	/* modern.c: a subscriptions/listen stream's own session, named
	 * to no one and ended with its stream; listen_id tags its notes */
	bool			 listen;
	json_t			*listen_id;
	bool			 want_res, want_prompts; /* its filter, as
						   the policy allows it */
};
TAILQ_HEAD(br_sessions, br_session);

/* ------------------------------------------------------------ requests */

enum br_req_state { RQ_RECEIVING = 0, RQ_PARKED, RQ_RESUMING, RQ_QUEUED };

struct br_req {
	TAILQ_ENTRY(br_req)	 entry;		/* parked list */
	struct br		*br;
	struct MHD_Connection	*conn;
	enum br_req_state	 state;
	char			*method;
	char			*path;
	char			*body;
	size_t			 len, cap;
	bool			 too_big;
	bool			 identified;
	struct br_client	 client;
	char			 src[64];
	char			 server[40];
	char			 session[65];
	struct br_call		*call;		/* in flight */
	struct br_up		*up;
	json_t			*rpc_id;	/* tools/list in flight */
	char			*cursor;
	struct br_up_req	*ureq;		/* a list or subscription
						   forwarded (resources.c) */
	const struct br_list_kind *list;
	char			 init_version[16]; /* initialize waiting for
						   the upstream's offer */
	struct MHD_Response	*resp;
	unsigned		 status;
	struct br_stream	*stream;	/* a GET stream (stream.c) */
	bool			 modern;	/* 2026-07-28: answers adapted
						   by br_modern_result */
	bool			 cacheable;	/* its result is a
						   CacheableResult */
	unsigned		 sreq_caps;	/* modern: the server requests
						   its client declared, 1 <<
						   enum pol_sreq_kind */
	bool			 tasks;		/* modern: its client declared
						   the tasks extension */
	struct br_batch		*batch;		/* one message of this batch:
						   answered into it, no
						   connection of its own */
	struct br_batch		*batch_own;	/* the batch this POST holds */
};
TAILQ_HEAD(br_reqs, br_req);

/* ------------------------------------------------------------ calls */

/*
 * What is not a tool call but takes its path (decision, approval,
 * forwarding, result processing, taint, record): resources/read
 * (resources.c) and prompts/get (prompts.c). A call with no kind is a
 * tools/call. name_key names the member of params that says what is
 * called (c->tool holds it: a URI, a prompt name); has_args: params may
 * hold an "arguments" object.
 */
struct br_call;
struct br_call_kind {
	const char	*method;	/* upstream method */
	const char	*name_key;	/* "uri", "name" */
	size_t		 name_max;
	bool		 has_args;
	enum br_event_kind ev;		/* its record kind */
	int		 deny_code;	/* JSON-RPC code of a refusal */
	/* the pure decision, q carrying the client, name, arguments and
	 * budget use */
	void	(*decide)(const struct br_call *c, const struct pol_tool_q *q,
		    struct pol_tool_decision *out);
	/* result processing of c's result: br_result_process's contract */
	int	(*process)(struct br_call *c, json_t *result, char **text);
};

enum br_call_state { CALL_NEW = 0, CALL_LISTING, CALL_ASKING, CALL_RESERVING,
	CALL_INTENDING, CALL_FORWARDED, CALL_TAINTING, CALL_RECORDING, CALL_DONE };

/* A call waiting for its egress to be narrowed; detached (c = NULL) when
 * the call goes first, so that the late completion touches nothing. */
struct br_taint_wait {
	struct br_call		*c;
};

struct br_call {
	TAILQ_ENTRY(br_call)	 entry;		/* approvals */
	TAILQ_ENTRY(br_call)	 all;		/* every call */
	struct br		*br;		/* NULL once orphaned */
	void			(*release)(void *, void *);
	void			*hctx;
	struct br_req		*req;		/* NULL once the client left */
	struct br_up		*up;
	const struct br_call_kind *kind;	/* NULL: tools/call */
	enum br_call_state	 state;
	char			 call_id[33];	/* pairs its intent and outcome
						   records */
	json_t			*rpc_id;
	char			*tool;
	json_t			*args;
	char			*args_json;
	/* progress.c: the client's progressToken (NULL: none), the one the
	 * upstream is given, and the last progress passed on */
	json_t			*ptoken;
	char			 ptoken_up[33];
	double			 plast;
	bool			 psent;
	char			 args_digest[72];
	struct br_client	 client;	/* copy; policy ref held */
	char			 session[65];
	char			 src[64];
	struct pol_tool_decision dec;
	char			 rule[64];	/* dec.d.rule may point into the
						   policy; copied for records */
	char			 budget_json[512];
	/* approval */
	char			 approval_id[33];
	struct ev_timer		*atimer;
	uint64_t		 created_ms, expires_ms;
	char			*approver;
	int64_t			 approver_uid;	/* -1: Sluice itself */
	char			*approver_note;
	char			*approver_host;	/* fleet: where it was decided */
	const char		*approval;
	bool			 approved;
	struct br_fq_job	*fqjob;		/* its row on its way */
	bool			 fq_posted;	/* its row is in the fleet's
						   queue, to be closed */	/* a person said yes: decide
						   again without asking */
	/* upstream */
	struct br_up_req	*ureq;
	uint64_t		 sent_us;
	int64_t			 latency_us;
	json_t			*result;	/* what the sandbox will get */
	char			*rtext;		/* result, serialized once */
	char			*result_text;	/* serialized JSON-RPC answer */
	int			 rpc_code;	/* non-zero: answer with this
						   JSON-RPC error, not a result */
	unsigned		 redactions;
	struct br_taint_wait	*twait;		/* CALL_TAINTING */
	bool			 taint_done;	/* the answer went out under
						   narrowed egress (the
						   record's taints) */
	char			 result_digest[72];
	uint64_t		 result_bytes;
	const char		*decision;	/* "allow" | "deny" */
	enum pol_reason		 reason;
	char			 message[256];
	unsigned		 sreqs;		/* server requests it owned */
	/* srvreq.c, multi round-trip requests of the stateless revision:
	 * held for its client's input (mrtr), what that client declared
	 * it serves (1 << enum pol_sreq_kind), and the requestState its
	 * next retry must bring ("" when none may come) */
	bool			 mrtr;
	unsigned		 mrtr_caps;
	char			 mrtr_state[48];
	/* Budgets shared with the fleet (scope subject or policy), reserved
	 * in its database before the local ones (CALL_RESERVING): sjob the
	 * reservation on its way, sres what it reserves, held once it did
	 * (given back by call_free unless forwarded), exhausted + 1 the
	 * used-up one's index in sres. */
	struct br_shared_job	*sjob;
	struct fleet_resv	 sres[POL_MAX_RESERVATIONS];
	size_t			 nsres;
	bool			 sheld;
	size_t			 sexhausted;
	bool			 forwarded;	/* the upstream has the request */
	/* tasks.c: the task that answers for it (NULL: none, or detached),
	 * and that task's id for its records ("" when it never was one) */
	struct br_task		*task;
	char			 task_detail[64];
};
TAILQ_HEAD(br_calls, br_call);

void	br_call_start(struct br_req *rq, json_t *rpc_id, json_t *params,
	    struct br_up *up);
/* call.c for callshare.c: deny c (as the state machine does), decide it
 * again from the start of its reservation, the owner of its budget of
 * scope s. */
void	br_call_deny(struct br_call *c, const char *rule, enum pol_reason reason,
	    const char *message);
void	br_call_redecide(struct br_call *c);
const char *br_call_owner(struct br_call *c, enum pol_budget_scope s);
/* callshare.c: whether a budget of scope s is the fleet's (a fleet is
 * configured and s is not sandbox); br_call_shared_pending takes c into
 * CALL_RESERVING when first names such budgets and none is reserved yet
 * (true: c is in other hands), br_call_shared_use gives the k-th one's use
 * as reserved, br_call_shared_drop gives back what c holds. */
bool	br_call_is_shared(const struct br_call *c, enum pol_budget_scope s);
bool	br_call_shared_pending(struct br_call *c,
	    const struct pol_tool_decision *first, uint64_t now_s);
void	br_call_shared_use(const struct br_call *c, size_t k, const char *name,
	    struct pol_budget_use *use);
void	br_call_shared_drop(struct br_call *c);
/* br_call_start_kind: the same for a call of kind k (NULL: tools/call). */
void	br_call_start_kind(struct br_req *rq, json_t *rpc_id, json_t *params,
	    struct br_up *up, const struct br_call_kind *k);
/* The client went away: the call goes on (and is recorded), the answer is
 * dropped. */
void	br_call_detach(struct br_call *c);
void	br_call_abort_all(struct br *br);
/* br_call_decide: decide c from the start (its tool's definition
 * first), as a new call is. */
void	br_call_decide(struct br_call *c);

/* approval.c: br_call_ask puts c (decided ask) into the approval queue,
 * the fleet's too (or denies it); br_approval_unqueue takes a waiting c
 * out (no-op for any other), closing its shared row for why;
 * br_approval_delivered carries out a decision the fleet's queue
 * delivered (br_fq_deliver, arg the bridge). */
void	br_call_ask(struct br_call *c);
void	br_approval_unqueue(struct br_call *c, enum fleet_aq_close why);
void	br_approval_delivered(void *arg, const struct fleet_aq_decision *d);
/* br_call_sluice_denies: deny pending call id in Sluice's own name
 * (sandbox removed): recorded with approver "sluice", no uid. */
int	br_call_sluice_denies(struct br *br, const char *id,
	    const char *reason);

/* br_call_cancel_one: cancel c as br_call_cancel does for a call its
 * client names; false when c is in no state to be cancelled. */
bool	br_call_cancel_one(struct br_call *c);

/* ------------------------------------------------------------ tasks.c */

/* br_task_offer: call c, whose request waits (c->req), would keep its
 * client waiting (for a person: input false; for the client's own input:
 * true): when that client declared the tasks extension, c becomes a task,
 * its request is answered with the task's handle and c goes on detached
 * from it; 0. 1: not a task (no request, or no extension); c untouched.
 * -1: the sandbox's or the bridge's bound on tasks is reached (or no
 * memory); c untouched, *why says so. */
int	br_task_offer(struct br_call *c, bool input, char *why, size_t whylen);
/* br_task_done: call c of a task has its outcome recorded (ok) or not:
 * the task ends with what the request would have been answered. */
void	br_task_done(struct br_call *c, int ok);
/* br_task_call_gone: c, still a task's, is freed otherwise: the task ends
 * failed. */
void	br_task_call_gone(struct br_call *c);
/* br_task_method: is m one of tasks/get, tasks/update, tasks/cancel? */
bool	br_task_method(const char *m);
/* br_task_request: answer modern request rq's tasks/... rpc. */
void	br_task_request(struct br_req *rq, const struct br_rpc *rpc);
/* br_task_undeclared: answer rq (its id) with -32021 naming the
 * extension its client did not declare. */
void	br_task_undeclared(struct br_req *rq, json_t *id);
/* br_tasks_sandbox_gone: the sandbox's tasks are dropped now, their
 * calls cancelled (or detached). br_tasks_free_all: every task goes (the
 * bridge stops, after its calls were ended). */
void	br_tasks_sandbox_gone(struct br *br, const char *sandbox_id);
void	br_tasks_free_all(struct br *br);
/* Pure parts, for the unit suite. br_task_declared: do per-request
 * capabilities caps declare the extension? br_task_id_param: params'
 * taskId when it is a string a task id can be, else NULL. br_task_iso:
 * wall time ms as ISO 8601 UTC into out (at least 32 bytes); -1 if not. */
bool	br_task_declared(const json_t *caps);
const char *br_task_id_param(const json_t *params);
int	br_task_iso(uint64_t ms, char *out, size_t outlen);
/* srvreq.c for tasks.c: br_srvreq_inputs: what call c asks of its client
 * now (id -> {method, params}), a new object (maybe empty), NULL without
 * memory; br_srvreq_task_answers: the answers in resp (id -> result) to
 * those go to the upstream as a retry's would; -1 when a body of len
 * bytes is too big to be taken (nothing relayed). */
json_t	*br_srvreq_inputs(struct br *br, const struct br_call *c);
int	br_srvreq_task_answers(struct br *br, const struct br_call *c,
	    const json_t *resp, size_t len);

/* ------------------------------------------------------------ results */

/* br_result_process: redact every string of result in place (the held
 * credentials always, the rest as policy p says), and every number whose
 * text holds a match (it becomes a string of the redacted text), and keep
 * structuredContent valid against the tool's outputSchema (tool may be
 * NULL) or drop it. The count of redactions, or -1 when redaction failed,
 * a match sits where it cannot be replaced (an object key, a binary
 * payload) or the result's JSON text spells a held credential: withhold
 * the result. On success *text, if text is given, is that JSON text
 * (JSON_COMPACT; caller frees), the answer's text already checked. */
int	br_result_process(struct br *br, const struct pol_policy *p,
	    json_t *result, const json_t *tool, char **text);
/* br_holds_credential: does s contain a credential Sluice holds for an
 * upstream, in any form redaction finds (raw, escaped, hex, base64...)?
 * Also true when it cannot tell (no memory). Used on definitions and on
 * answers' JSON text, which can spell one that no string holds: an
 * escape's last hex digits may begin it ("\u0004" then "8151623"). */
bool	br_holds_credential(const struct br *br, const char *s);
/* br_def_holds_credential: does JSON value v (a tool definition) carry a
 * credential Sluice holds anywhere a reader of it would find one: in a
 * string, an object key or the text of a number, whatever JSON escaping
 * its serialized form uses? Also true when that cannot be decided (no
 * memory): such a definition is refused, never offered. */
bool	br_def_holds_credential(const struct br *br, const json_t *v);
/* br_redact_string: *out a new redacted copy and the count (> 0), 0 and
 * *out NULL when nothing matched, -1 on failure. */
int	br_redact_string(struct br *br, const struct pol_policy *p,
	    const char *in, char **out);

/* br_redact_bytes: the len bytes at in (binary, a resource's decoded
 * blob) redacted as br_redact_string does: *out a new buffer of *outlen
 * bytes and the count (> 0), 0 and *out NULL when nothing matched, -1
 * on failure (withhold). */
int	br_redact_bytes(struct br *br, const struct pol_policy *p,
	    const char *in, size_t len, char **out, size_t *outlen);

/* ------------------------------------------------------------ resources,
 * prompts and notifications (resources.c, prompts.c, notify.c) */

/* A listing the bridge forwards page by page: the upstream's cursor goes
 * through, each page is filtered by visible (key: the member holding the
 * array, what: the member of an item naming it). */
struct br_list_kind {
	const char	*method;	/* "resources/list" */
	const char	*key;		/* "resources" */
	const char	*what;		/* "uri" */
	bool		 prompts;	/* needs the upstream's prompts */
	bool	(*visible)(const struct br_req *rq, const char *name);
};
extern const struct br_call_kind br_kind_resource, br_kind_prompt;
extern const struct br_list_kind br_list_resources, br_list_templates,
	    br_list_prompts;
/* br_list_forward: answer rq's listing of kind k (params: its params). */
void	br_list_forward(struct br_req *rq, const struct br_rpc *rpc,
	    const struct br_list_kind *k);
/* br_subscribe: resources/subscribe (on) or unsubscribe for rq. */
void	br_subscribe(struct br_req *rq, const struct br_rpc *rpc, bool on);
/* br_rpc_caps: the capabilities object of rq's initialize answer, from
 * what its upstream offered (a new object). */
json_t	*br_rpc_caps(const struct br_up *u);
/* br_tool_q: q for the client of c (subject, labels into keys/vals). */
void	br_client_q(const struct br_client *cl, const char **keys,
	    const char **vals, struct pol_tool_q *q);
/* br_up_caps: what upstream u's initialize answer offered (caps: its
 * capabilities object, may be NULL). */
void	br_up_caps(struct br_up *u, const json_t *caps);
/* br_notify_upstream: notification msg of upstream u, queued for the
 * sessions that may get it. */
void	br_notify_upstream(struct br_up *u, const char *method, json_t *msg);
/* br_subs_drop: session s goes; the upstream subscriptions only it held
 * are ended. */
void	br_subs_drop(struct br *br, struct br_session *s);
/* br_session_take_notes: the session sid's queued notifications before
 * body as one text/event-stream body (a new string), or NULL when there
 * are none (or no memory: they wait for the next answer). */
char	*br_session_take_notes(struct br *br, const char *sid,
	    const struct pol_policy *p, const char *body);
/* br_notes_events: s's queued notifications, redacted under p, as
 * text/event-stream events (a new string), the queue emptied; NULL when
 * none is left to send (or no memory). */
char	*br_notes_events(struct br *br, struct br_session *s,
	    const struct pol_policy *p);

/* ------------------------------------------------------------ stream.c */

/* br_stream_open: answer GET rq, of established session s (checked), with
 * an event stream that carries s's notifications from now on; an older
 * stream of s ends, and so does the sandbox's oldest when it holds
 * br->streams_max. MHD_NO: no memory (the connection is closed). */
enum MHD_Result br_stream_open(struct br_req *rq, struct br_session *s);
/* br_stream_free: rq's stream goes with its request (connection closed).
 * br_stream_free(NULL) is a no-op. */
void	br_stream_free(struct br_stream *st);
/* br_callstream: parked POST rq (a call in flight) is answered with an
 * event stream from now on (once: a second call gives the same stream);
 * NULL when it cannot be (not parked, answered, no memory). */
struct br_stream *br_callstream(struct br_req *rq);
/* br_stream_req: the request st answers (its GET, or its call's POST).
 * br_stream_live: st is a session's and not ending. */
struct br_req *br_stream_req(const struct br_stream *st);
bool	br_stream_live(const struct br_stream *st);
/* br_stream_push: text (whole events) goes out on st next; -1 when st is
 * ending or without memory. */
int	br_stream_push(struct br_stream *st, const char *text);
/* br_callstream_finish: rq's final answer body is the last event of its
 * call stream, which then ends; -1 when rq has no call stream (answer it
 * as usual). */
int	br_callstream_finish(struct br_req *rq, const char *body);
/* br_stream_wake: s got a note: its stream, if any, sends it now. */
void	br_stream_wake(struct br_session *s);
/* br_stream_end: st's session ends: st ends after what it has pending.
 * NULL is a no-op. */
void	br_stream_end(struct br_stream *st);
/* br_streams_close: close the streams of sandbox_id (NULL: all) now,
 * sockets shut, waiting for no client. */
void	br_streams_close(struct br *br, const char *sandbox_id);

/* ------------------------------------------------------------ logging */

/* br_logging_level: the index of level name v (0 = debug .. 7 =
 * emergency), or -1 when v is not one of the eight names. */
int	br_logging_level(const json_t *v);
/* br_logging_set: answer rq's logging/setLevel: the session's level is
 * kept and the upstream is asked for the most verbose level of its
 * sessions; -32602 for a bad level, -32601 when the upstream offers no
 * logging. */
void	br_logging_set(struct br_req *rq, const struct br_rpc *rpc);
/* br_logging_note: upstream notifications/message msg rebuilt from its
 * level, logger and data (a new object, *level its level), or NULL when
 * it is malformed or too big. */
json_t	*br_logging_note(const json_t *msg, int *level);
/* br_str_bounded: v's text when v is a string of at most max bytes with
 * no NUL inside (empty allowed), else NULL. */
const char *br_str_bounded(const json_t *v, size_t max);
/* br_complete: answer rq's completion/complete: forwarded, rebuilt and
 * bounded both ways, only for a prompt or resource template the policy
 * shows; -32602 for a malformed or refused one, -32601 when the upstream
 * offers no completions. */
void	br_complete(struct br_req *rq, const struct br_rpc *rpc);
/* br_progress_take: keep the progressToken of call c's params (a string
 * of at most 128 bytes or an integer), and make the upstream's. */
void	br_progress_take(struct br_call *c, const json_t *params);
/* br_progress_forward: put the upstream's token in params of c, if any. */
void	br_progress_forward(const struct br_call *c, json_t *params);
/* br_progress_note: upstream u's notifications/progress msg rebuilt for
 * the in-flight call it names (a new object; *sid that call's session),
 * or NULL: malformed, no such call, or progress that did not increase. */
json_t	*br_progress_note(struct br_up *u, const json_t *msg,
	    const char **sid);
/* br_logging_redact: redact queued note in place under policy p when it
 * is a log message or progress with a message (others are left as they
 * are); -1: drop it. */
int	br_logging_redact(struct br *br, const struct pol_policy *p,
	    json_t *note);

/* ------------------------------------------------------------ budgets */

int	br_db_open(struct br *br, const char *dir, char *err, size_t errlen);
void	br_db_close(struct br *br);
int	br_db_begin(struct br *br);
int	br_db_commit(struct br *br);
void	br_db_rollback(struct br *br);
int	br_budget_get(struct br *br, int scope, const char *owner,
	    const char *name, uint64_t window_s, uint64_t now_s,
	    struct pol_budget_use *use);
int	br_budget_add(struct br *br, int scope, const char *owner,
	    const char *name, uint64_t window_s, uint64_t now_s,
	    uint64_t calls, uint64_t cost, uint64_t bytes);
int	br_pin_store(struct br *br, const char *server, const char *tool,
	    const char *pin);
int	br_pin_delete(struct br *br, const char *server, const char *tool);
/* br_pin_load: name -> pin for server, a new object (maybe empty), or
 * NULL on error. */
json_t	*br_pin_load(struct br *br, const char *server);

/* ------------------------------------------------------------ the bridge */

#define BR_EASY_POOL	64
#define BR_CONN_CACHE	128	/* idle upstream connections kept */

struct br {
	struct ev_loop		*loop;
	struct br_config	 c;
	struct br_hooks		 h;
	char			 origin_self[96];
	uint16_t		 port;
	struct mhd		*mhd;		/* gateway/mhd.c driver */
	struct br_reqs		 parked;
	struct br_sessions	 sessions;
	size_t			 nsessions;
	struct br_calls		 approvals;
	size_t			 napprovals;
	struct br_calls		 calls;
	TAILQ_HEAD(br_streams, br_stream) streams;	/* GET streams */
	size_t			 nstreams;
	size_t			 streams_max;	/* per sandbox */
	TAILQ_HEAD(br_sreqs, br_sreq) sreqs;	/* server requests carried
						   to clients (srvreq.c) */
	size_t			 nsreqs;
	TAILQ_HEAD(br_tasks, br_task) tasks;	/* tasks.c */
	size_t			 ntasks;
	uint64_t		 sreq_seq;	/* the last key announced */
	struct ev_timer		*keepalive;
	struct br_up		**ups;
	size_t			 nups;
	sqlite3			*db;
	struct br_shared	*shared;	/* NULL: no fleet, all local */
	struct br_fq		*fq;		/* the fleet's approval queue */
	CURLM			*multi;
	struct hx		*hx_list;	/* transfers in flight */
	struct ev_timer		*curl_timer;
	/* Easy handles of finished transfers, reset, for the next ones:
	 * making one costs more than the rest of a request's setup. */
	CURL			*easy_pool[BR_EASY_POOL];
	size_t			 neasy_pool;
	/* call ids: a random prefix per process and a counter, unique
	 * without a system call per call */
	char			 call_prefix[17];
	uint64_t		 call_seq;
	/* redaction */
	char			**secrets;
	size_t			 nsecrets;
	bool			 closing;
};

/* ------------------------------------------------------------ front.c */

/* The HTTP side: libmicrohttpd's access and completion handlers (cls is
 * the struct br), and the listening socket of br->c (also sets br->port
 * and br->origin_self); -1 with err. */
enum MHD_Result br_front_request(void *cls, struct MHD_Connection *conn,
	    const char *url, const char *method, const char *version,
	    const char *upload, size_t *upload_size, void **con_cls);
void	br_front_completed(void *cls, struct MHD_Connection *conn,
	    void **con_cls, enum MHD_RequestTerminationCode toe);
/* br_secret_read: the credential of s (its file's first line, or its
 * variable through get, NULL = getenv), a new string; NULL with a message
 * in err (never the secret). */
char	*br_secret_read(const struct pol_mcp_server *s,
	    const char *(*get)(const char *), char *err, size_t errlen);
/* br_stdio_env: the environment of stdio server s: its declared K=V
 * entries and the credential secret (may be NULL) in its variable;
 * NULL-terminated, free with br_stdio_env_free (which wipes it). */
char	**br_stdio_env(const struct pol_mcp_server *s, const char *secret);
void	 br_stdio_env_free(char **env);
/* br_stdio_fork: pipes, fork and exec of stdio server srv with env, in a
 * child that holds no capability, no descriptor but its three and its own
 * session. 0 with *in_w (its stdin), *out_r (its stdout), close-on-exec,
 * and *pidp; -1 with errno. For the bridge itself and for a starter
 * process working for it. */
int	br_stdio_fork(const struct pol_mcp_server *srv, char *const *env,
	    int *in_w, int *out_r, pid_t *pidp);
int	br_front_listen(struct br *br, char *err, size_t errlen);
/* Answers rq once (later answers are ignored), resuming it if parked. */
void	br_req_reply(struct br_req *rq, unsigned status, const char *body,
	    const char *session_hdr);
void	br_reply_rpc_result(struct br_req *rq, json_t *id, json_t *result);
void	br_reply_rpc_error(struct br_req *rq, unsigned status, json_t *id,
	    int code, const char *msg);

/* ------------------------------------------------------------ session.c */

struct br_session *br_session_find(struct br *br, const char *id);
void	br_session_free(struct br *br, struct br_session *s);
/* A request of rq's session starts (delta 1) or stops (-1) waiting. */
void	br_session_hold(struct br *br, const struct br_req *rq, int delta);
/* A new session of rq's sandbox and server speaking version, making room
 * by the rules of session.c; NULL (ENOSPC: every candidate is busy). */
struct br_session *br_session_new(struct br *br, struct br_req *rq,
	    const char *version);
/* The session sid names if it is rq's (bound to its sandbox and path:
 * another's is unknown); NULL with 404 answered otherwise. */
struct br_session *br_session_owned(struct br_req *rq, const char *sid);
/* s is in use now: moved to the most recently used end. */
void	br_session_touch(struct br *br, struct br_session *s);
/* The session of rq (sid: its Mcp-Session-Id or NULL), moved to the most
 * recently used end; NULL with *fresh for an initialize, NULL and an
 * answer given when the request may not go on. */
struct br_session *br_session_check(struct br_req *rq, const char *sid,
	    const struct br_rpc *rpc, bool *fresh);

/* ------------------------------------------------------------ rpc.c */

/* Is v a protocol version the bridge speaks? */
bool	br_version_ok(const char *v);
/* initialize (a new session) and the other requests of an established
 * one; each answers rq now or later. */
void	br_rpc_initialize(struct br_req *rq, const struct br_rpc *rpc);
void	br_rpc_request(struct br_req *rq, const struct br_rpc *rpc);

/* ------------------------------------------------------------ batch.c */

/* br_front_identify: the sandbox rq comes from, by its connection's
 * address and bearer token (rq->client, rq->src); -1 when they do not
 * agree (reported as front.c says), rq to be answered 401. */
int	br_front_identify(struct br_req *rq);
/* br_front_message: one JSON-RPC message rpc of POST rq, its session s
 * (NULL with fresh for an initialize) checked: handled and answered now
 * or later, as front.c handles a body of one message. */
void	br_front_message(struct br_req *rq, struct br_session *s,
	    const struct br_rpc *rpc, bool fresh);
/* br_front_sub_free: a batch's message rq (no connection) goes, what it
 * waits for let go. */
void	br_front_sub_free(struct br_req *rq);
/* br_batch_dispatch: POST rq's body is a batch (br_batch_looks): refused
 * outside a 2025-03-26 session, else each message handled alone and the
 * answers gathered; answers rq now or later. sid: its Mcp-Session-Id. */
void	br_batch_dispatch(struct br_req *rq, const char *sid);
/* br_batch_answer: message rq of a batch is answered (status, body as
 * br_req_reply takes them). */
void	br_batch_answer(struct br_req *rq, unsigned status, const char *body);
/* br_batch_parked: POST rq, holding a batch, waits: what is answered
 * already goes out on an event stream now. */
void	br_batch_parked(struct br_req *rq);
/* br_batch_free: the batch goes with its POST (answered, or the client
 * left): its messages still waiting are let go. NULL is a no-op. */
void	br_batch_free(struct br_batch *b);
/* br_session_batched: does session sid (may be unknown) speak the
 * revision with batches and without elicitation? */
bool	br_session_batched(struct br *br, const char *sid);

/* ------------------------------------------------------------ modern.c */

/* The request headers the 2026-07-28 revision mirrors from the body, as
 * received (NULL: absent). */
struct br_meta_hdrs {
	const char	*version;	/* MCP-Protocol-Version */
	const char	*method;	/* Mcp-Method */
	const char	*name;		/* Mcp-Name */
};
/* Why a request is refused: HTTP status, JSON-RPC code and message, and
 * the version it asked for (for -32022's data). */
struct br_meta_verdict {
	unsigned	 status;
	int		 code;
	char		 msg[160];
	char		 requested[32];
};
/* br_modern_wanted: is msg (a parsed JSON-RPC message) one of the
 * stateless revision's? sid: its Mcp-Session-Id, vhdr: its
 * MCP-Protocol-Version (either NULL when absent). Never for an initialize
 * nor a request of a session. */
bool	br_modern_wanted(const char *sid, const char *vhdr, const json_t *msg);
/* br_modern_check: 0 when msg's _meta is complete, its version served
 * statelessly and headers h agree with its body; else -1 with *v saying
 * how to refuse it (pure: no I/O). */
int	br_modern_check(const struct br_meta_hdrs *h, const json_t *msg,
	    struct br_meta_verdict *v);
/* br_hdr_value_decode: header value hv as text into out (outlen bytes,
 * NUL-terminated): as is, or decoded from the "=?base64?...?=" form. Its
 * length, or -1 when hv holds a character a header value may not, the
 * encoding is bad, the text holds a NUL or does not fit. */
int	br_hdr_value_decode(const char *hv, char *out, size_t outlen);
/* br_modern_dispatch: check and answer stateless request rpc of rq (its
 * headers h), now or later; the access handler's result (a listen stream
 * is queued here). */
enum MHD_Result br_modern_dispatch(struct br_req *rq,
	    const struct br_rpc *rpc, const struct br_meta_hdrs *h);
/* br_modern_result: body, the answer of modern request rq, as this
 * revision wants it (resultType, serverInfo, cache fields): a new string,
 * or NULL to send body as is; *status becomes 404 for a -32601. */
char	*br_modern_result(const struct br_req *rq, const char *body,
	    unsigned *status);
/* br_modern_tag: note, about to go out on listen session s, carries its
 * subscription id in _meta; nothing for another session. */
void	br_modern_tag(const struct br_session *s, json_t *note);

/* ------------------------------------------------------------ server.c */

void	br_finding(struct br *br, enum br_event_kind kind, const char *sandbox,
	    const char *server, const char *tool, const char *detail);
void	br_client_release(struct br *br, struct br_client *c);
struct br_up *br_up_find(struct br *br, const char *name);
void	br_sha256_hex(const void *data, size_t len, char out[72]);
int	br_random_hex(char *out, size_t nbytes);
uint64_t br_wall_ms(void);

#endif /* SLUICE_GATEWAY_BRIDGE_BR_INT_H */
