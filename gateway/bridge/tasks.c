/*
 * tasks: the tasks extension of the 2026-07-28 revision
 * (io.modelcontextprotocol/tasks), served by the bridge itself: the
 * upstreams never hear of it. It exists so that a client that declared
 * the extension in a request's capabilities is not kept waiting on that
 * request while a call of it waits for something that may take long:
 *
 *  - a person (`decision: ask`, approval.c): the call becomes a task,
 *    status working with a message saying it awaits approval;
 *  - the client itself (an upstream asks for sampling, elicitation or
 *    roots during the call, srvreq.c): the call becomes a task, status
 *    input_required, what is asked shown by tasks/get and answered by
 *    tasks/update under the rules of a multi round-trip retry.
 *
 * No other call becomes a task: an allowed one goes straight upstream
 * and is answered on its own request as before (making every call a
 * task would cost each a poll, and tasks are bounded per sandbox); a
 * slow upstream holds that request as it holds any other, under the
 * bounds on connections. A client that did not declare the extension
 * is served as before, and its tasks/... are refused -32021 as the text
 * wants.
 *
 * A task is only a view of its call: the call takes the path every call
 * takes (decision, reservation, intent record, forwarding, result
 * processing, taint, outcome record), detached from the request that
 * started it, and the task keeps, once the outcome is durable, exactly
 * what that request would have been answered: the processed result
 * (completed, also a refusal: an isError result), a JSON-RPC error
 * (failed) or, for a call the client cancelled, cancelled. The intent
 * and outcome records name the task in their detail ("task ID").
 *
 * A task id is 128 random bits, bound to the sandbox that made it (its
 * identity as front.c decides it from the bearer token and the source
 * address) and to the server of its path: any other sandbox's request
 * naming it, like a request naming an unknown or forgotten id, gets the
 * -32602 of a task that does not exist, logged and never recorded (a
 * sandbox could send any number).
 *
 * Bounds: the daemon config's limits tasks_per_sandbox (open and
 * finished together; one more is refused, overload) and task_keep (how
 * long a finished task is kept, then forgotten: the ttlMs it shows);
 * POL_LIM_TASKS_TOTAL in all and POL_LIM_TASK_BYTES of a result kept
 * (call.c replaces a larger one by an error before it is recorded).
 * A removed sandbox's tasks go at once, their calls cancelled.
 * Not implemented: notifications/tasks on subscriptions/listen (taskIds
 * are not acknowledged, clients poll; a listen asking for them without
 * the extension declared is refused -32021, modern.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"

#define EXT_NAME	"io.modelcontextprotocol/tasks"
#define ID_PREFIX	"sluice-task-"
#define ID_LEN		(sizeof(ID_PREFIX) - 1 + 32)
#define POLL_MS		1000	/* the pollIntervalMs suggested */

enum task_status { TS_WORKING = 0, TS_INPUT, TS_COMPLETED, TS_FAILED,
	TS_CANCELLED };

struct br_task {
	TAILQ_ENTRY(br_task)	 entry;
	struct br		*br;
	struct br_call		*call;		/* NULL once it ended */
	char			 id[ID_LEN + 1];
	char			 sandbox[64];
	char			 server[40];
	enum task_status	 status;	/* last seen, or how it ended */
	char			 message[256];	/* ended: its statusMessage */
	char			*result;	/* completed: the JSON text */
	int			 code;		/* failed: the error's code */
	uint64_t		 created_ms, updated_ms, ended_ms; /* wall */
	struct ev_timer		*timer;		/* ended: forgotten then */
};

/* ------------------------------------------------------------ pure */

bool
br_task_declared(const json_t *caps)
{
	return json_is_object(json_object_get(json_object_get(caps,
	    "extensions"), EXT_NAME));
}

bool
br_task_method(const char *m)
{
	return m != NULL && (strcmp(m, "tasks/get") == 0 ||
	    strcmp(m, "tasks/update") == 0 || strcmp(m, "tasks/cancel") == 0);
}

const char *
br_task_id_param(const json_t *params)
{
	const json_t *v = json_object_get(params, "taskId");

	/* Any string of a sane length: one that is no task's is unknown,
	 * not malformed (the text's -32602 either way). */
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > 128 ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return NULL;
	return json_string_value(v);
}

int
br_task_iso(uint64_t ms, char *out, size_t outlen)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[24];

	if (outlen < 32 || gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
		return -1;
	snprintf(out, outlen, "%s.%03uZ", buf, (unsigned)(ms % 1000));
	return 0;
}

static const char *
status_name(enum task_status s)
{
	switch (s) {
	case TS_WORKING:
		return "working";
	case TS_INPUT:
		return "input_required";
	case TS_COMPLETED:
		return "completed";
	case TS_FAILED:
		return "failed";
	case TS_CANCELLED:
		return "cancelled";
	}
	return "failed";
}

/* ------------------------------------------------------------ table */

static uint32_t
lim_sandbox(const struct br *br)
{
	const struct pol_config *c = br->c.cfg;

	return c != NULL && c->lim_tasks_sandbox != 0 ? c->lim_tasks_sandbox :
	    POL_LIM_TASKS_SANDBOX;
}

static uint64_t
keep_ms(const struct br *br)
{
	const struct pol_config *c = br->c.cfg;

	return (uint64_t)(c != NULL && c->lim_task_keep_s != 0 ?
	    c->lim_task_keep_s : POL_LIM_TASK_KEEP_S) * 1000u;
}

static void
task_free(struct br_task *t)
{
	TAILQ_REMOVE(&t->br->tasks, t, entry);
	t->br->ntasks--;
	ev_timer_cancel(t->br->loop, t->timer);
	if (t->call != NULL)
		t->call->task = NULL;
	free(t->result);
	free(t);
}

static void
on_forget(struct ev_loop *loop, void *arg)
{
	struct br_task *t = arg;

	(void)loop;
	t->timer = NULL;
	log_info("bridge: task %s of %s forgotten", t->id, t->sandbox);
	task_free(t);
}

/* t ends as status (message: its statusMessage) and is kept keep_ms. */
static void
task_end(struct br_task *t, enum task_status status, const char *message)
{
	if (t->call != NULL)
		t->call->task = NULL;
	t->call = NULL;
	t->status = status;
	snprintf(t->message, sizeof(t->message), "%s", message);
	t->ended_ms = t->updated_ms = br_wall_ms();
	log_info("bridge: task %s of %s %s", t->id, t->sandbox,
	    status_name(status));
	/* Without a timer it cannot be kept: forgotten at once. */
	if ((t->timer = ev_timer_add(t->br->loop, keep_ms(t->br), on_forget,
	    t)) == NULL)
		task_free(t);
}

/* The handle of t as a CreateTaskResult or the Task part of a
 * GetTaskResult (a new object; NULL without memory). */
static json_t *
task_json(struct br_task *t, enum task_status st, const char *msg)
{
	char created[32], updated[32];
	json_t *o;

	if (br_task_iso(t->created_ms, created, sizeof(created)) == -1 ||
	    br_task_iso(t->updated_ms, updated, sizeof(updated)) == -1)
		return NULL;
	o = json_pack("{s:s, s:s, s:s, s:s, s:I}", "taskId", t->id, "status",
	    status_name(st), "createdAt", created, "lastUpdatedAt", updated,
	    "pollIntervalMs", (json_int_t)POLL_MS);
	if (o == NULL)
		return NULL;
	/* From creation: known once it ended (kept keep_ms from then). */
	json_object_set_new(o, "ttlMs", t->call == NULL ? json_integer(
	    (json_int_t)(t->ended_ms - t->created_ms + keep_ms(t->br))) :
	    json_null());
	if (msg != NULL && *msg != '\0')
		json_object_set_new(o, "statusMessage", json_string(msg));
	return o;
}

/* What an open t's call is doing now, and the message that says so. */
static enum task_status
task_now(struct br_task *t, const char **msg)
{
	struct br_call *c = t->call;
	enum task_status st;
	json_t *in;

	in = br_srvreq_inputs(t->br, c);
	st = in != NULL && json_object_size(in) > 0 ? TS_INPUT : TS_WORKING;
	json_decref(in);
	if (st == TS_INPUT)
		*msg = "The tool asks the client for input.";
	else if (c->state == CALL_ASKING)
		*msg = "The call awaits a person's approval.";
	else
		*msg = "The call is in progress.";
	if (st != t->status) {
		t->status = st;
		t->updated_ms = br_wall_ms();
	}
	return st;
}

int
br_task_offer(struct br_call *c, bool input, char *why, size_t whylen)
{
	struct br *br = c->br;
	struct br_req *rq = c->req;
	struct br_task *t, *o;
	const char *msg;
	json_t *res;
	size_t mine = 0;

	if (rq == NULL || !rq->modern || !rq->tasks || c->kind != NULL ||
	    c->task != NULL)
		return 1;
	TAILQ_FOREACH(o, &br->tasks, entry)
		if (strcmp(o->sandbox, c->client.id) == 0)
			mine++;
	if (mine >= lim_sandbox(br) || br->ntasks >= POL_LIM_TASKS_TOTAL) {
		if (why != NULL)
			snprintf(why, whylen, "Too many tasks: this sandbox "
			    "holds %zu, open or finished (at most %u); read "
			    "or cancel one, or try again later.", mine,
			    (unsigned)lim_sandbox(br));
		log_warnx("bridge: call %s of %s not made a task: %zu tasks "
		    "held", c->call_id, c->client.id, mine);
		return -1;
	}
	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    br_random_hex(t->id + sizeof(ID_PREFIX) - 1, 16) == -1) {
		free(t);
		if (why != NULL)
			snprintf(why, whylen, "The call could not be made a "
			    "task; try again later.");
		return -1;
	}
	memcpy(t->id, ID_PREFIX, sizeof(ID_PREFIX) - 1);
	t->br = br;
	t->call = c;
	snprintf(t->sandbox, sizeof(t->sandbox), "%s", c->client.id);
	snprintf(t->server, sizeof(t->server), "%s", c->up->srv->name);
	t->created_ms = t->updated_ms = br_wall_ms();
	t->status = input ? TS_INPUT : TS_WORKING;
	msg = input ? "The tool asks the client for input." :
	    "The call awaits a person's approval.";
	if ((res = task_json(t, t->status, msg)) == NULL) {
		free(t);
		if (why != NULL)
			snprintf(why, whylen, "The call could not be made a "
			    "task; try again later.");
		return -1;
	}
	json_object_set_new(res, "resultType", json_string("task"));
	TAILQ_INSERT_TAIL(&br->tasks, t, entry);
	br->ntasks++;
	c->task = t;
	snprintf(c->task_detail, sizeof(c->task_detail), "task %s", t->id);
	/* What the upstream asks later is asked the same way, of what this
	 * client declared; no retry ever resumes it (no requestState). */
	c->mrtr = true;
	c->mrtr_caps = rq->sreq_caps;
	c->mrtr_state[0] = '\0';
	/* The task is in the table before its handle goes out. */
	c->req = NULL;
	rq->call = NULL;
	log_info("bridge: call %s of %s is task %s (%s)", c->call_id,
	    c->client.id, t->id, status_name(t->status));
	br_reply_rpc_result(rq, c->rpc_id, res);
	return 0;
}

void
br_task_done(struct br_call *c, int ok)
{
	static const char withheld[] = "{\"content\":[{\"type\":\"text\","
	    "\"text\":\"The call could not be recorded, so its result is "
	    "withheld.\"}],\"isError\":true}";
	struct br_task *t = c->task;

	if (t == NULL)
		return;
	if (!ok || c->rtext == NULL) {
		t->result = strdup(withheld);
		task_end(t, t->result != NULL ? TS_COMPLETED : TS_FAILED,
		    "The call could not be recorded.");
		return;
	}
	if (c->reason == POL_REASON_CANCELLED) {
		task_end(t, TS_CANCELLED, c->message);
		return;
	}
	if (c->rpc_code != 0) {
		t->code = c->rpc_code;
		task_end(t, TS_FAILED, c->message);
		return;
	}
	if ((t->result = strdup(c->rtext)) == NULL) {
		t->code = -32603;
		task_end(t, TS_FAILED, "Internal error");
		return;
	}
	task_end(t, TS_COMPLETED, c->message);
}

void
br_task_call_gone(struct br_call *c)
{
	struct br_task *t = c->task;

	c->task = NULL;
	t->call = NULL;
	t->code = -32603;
	task_end(t, TS_FAILED, "The call ended inside Sluice.");
}

void
br_tasks_sandbox_gone(struct br *br, const char *sandbox_id)
{
	struct br_task *t, *n;
	struct br_call *c;

	TAILQ_FOREACH_SAFE(t, &br->tasks, entry, n) {
		if (strcmp(t->sandbox, sandbox_id) != 0)
			continue;
		/* A call waiting for a person was denied in Sluice's name
		 * already; one upstream is cancelled there, and recorded.
		 * Either way nobody reads its task any more. */
		if ((c = t->call) != NULL) {
			c->task = NULL;
			t->call = NULL;
			(void)br_call_cancel_one(c);
		}
		task_free(t);
	}
}

void
br_tasks_free_all(struct br *br)
{
	struct br_task *t;

	while ((t = TAILQ_FIRST(&br->tasks)) != NULL)
		task_free(t);
}

/* ------------------------------------------------------------ methods */

static void
reply_json(struct br_req *rq, unsigned status, json_t *o)
{
	char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	if (s == NULL) {
		br_reply_rpc_error(rq, 500, NULL, -32603, "Internal error");
		return;
	}
	br_req_reply(rq, status, s, NULL);
	free(s);
}

void
br_task_undeclared(struct br_req *rq, json_t *id)
{
	reply_json(rq, 400, json_pack("{s:s, s:O, s:{s:i, s:s, s:{s:{s:{s:"
	    "{}}}}}}", "jsonrpc", "2.0", "id", id, "error", "code", -32021,
	    "message", "Missing required client capability", "data",
	    "requiredCapabilities", "extensions", EXT_NAME));
}

/* The task id names for rq, if it is rq's sandbox's and server's. */
static struct br_task *
find(struct br_req *rq, const char *id)
{
	struct br_task *t;

	TAILQ_FOREACH(t, &rq->br->tasks, entry)
		if (strcmp(t->id, id) == 0 &&
		    strcmp(t->sandbox, rq->client.id) == 0 &&
		    strcmp(t->server, rq->server) == 0)
			return t;
	return NULL;
}

static void
task_get(struct br_req *rq, const struct br_rpc *rpc, struct br_task *t)
{
	enum task_status st = t->status;
	const char *msg = t->message;
	json_t *o, *x = NULL;

	if (t->call != NULL)
		st = task_now(t, &msg);
	if ((o = task_json(t, st, msg)) == NULL) {
		br_reply_rpc_error(rq, 500, rpc->id, -32603, "Internal error");
		return;
	}
	if (st == TS_INPUT)
		x = br_srvreq_inputs(rq->br, t->call);
	else if (st == TS_COMPLETED)
		x = json_loads(t->result, 0, NULL);
	else if (st == TS_FAILED)
		x = json_pack("{s:i, s:s}", "code", t->code, "message",
		    t->message);
	if ((st == TS_INPUT || st == TS_COMPLETED || st == TS_FAILED) &&
	    (x == NULL || json_object_set_new(o, st == TS_INPUT ?
	    "inputRequests" : st == TS_COMPLETED ? "result" : "error", x) ==
	    -1)) {
		json_decref(o);
		br_reply_rpc_error(rq, 500, rpc->id, -32603, "Internal error");
		return;
	}
	br_reply_rpc_result(rq, rpc->id, o);
}

void
br_task_request(struct br_req *rq, const struct br_rpc *rpc)
{
	const json_t *params = json_object_get(rpc->msg, "params");
	const json_t *resp = json_object_get(params, "inputResponses");
	const char *id;
	struct br_task *t;

	if (!rq->tasks) {
		br_task_undeclared(rq, rpc->id);
		return;
	}
	if ((id = br_task_id_param(params)) == NULL) {
		br_reply_rpc_error(rq, 400, rpc->id, -32602, "Invalid params: "
		    "taskId must be a task id");
		return;
	}
	if (strcmp(rpc->method, "tasks/update") == 0 && !json_is_object(resp)) {
		br_reply_rpc_error(rq, 400, rpc->id, -32602, "Invalid params: "
		    "inputResponses must be an object");
		return;
	}
	if ((t = find(rq, id)) == NULL) {
		/* Unknown, forgotten or another's: the same answer. */
		log_warnx("bridge: %s named no task of its own", rq->client.id);
		br_reply_rpc_error(rq, 400, rpc->id, -32602, "Invalid params: "
		    "task not found");
		return;
	}
	if (strcmp(rpc->method, "tasks/get") == 0) {
		task_get(rq, rpc, t);
		return;
	}
	if (strcmp(rpc->method, "tasks/update") == 0) {
		/* Answers to nothing outstanding are ignored (the text):
		 * a task that ended takes none. */
		if (t->call != NULL && br_srvreq_task_answers(rq->br, t->call,
		    resp, rq->len) == -1) {
			br_reply_rpc_error(rq, 413, rpc->id, -32600,
			    "Answer too large");
			return;
		}
		br_reply_rpc_result(rq, rpc->id, json_object());
		return;
	}
	/* tasks/cancel: acknowledged whatever comes of it (cooperative);
	 * a call between states (being listed, recorded) ends as it
	 * would. */
	if (t->call != NULL && br_call_cancel_one(t->call))
		log_info("bridge: task %s of %s cancelled by its client", t->id,
		    t->sandbox);
	br_reply_rpc_result(rq, rpc->id, json_object());
}
