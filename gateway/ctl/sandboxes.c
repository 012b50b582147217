/*
 * ctl/sandboxes.c: the /v1/sandboxes endpoints of the control API. The
 * sandbox manager takes and gives flat structs and says why it refused in
 * an enum; this file is the translation, so that the manager never sees
 * JSON nor a status: a request's body is checked into a struct sbx_spec
 * (its members, their types and the rules of gateway/sandbox.h, in the
 * order the API has always reported them), enum sbx_err becomes a status
 * and an error code through one table, and a struct sbx_info becomes the
 * JSON the CLI reads. What ctl refuses by itself before a handler runs is
 * recorded here too, where the endpoints are.
 */
#include <sys/types.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "gateway/ctl/sandboxes.h"
#include "gateway/record.h"
#include "netns/netns.h"

/* What the API answers for each enum sbx_err. */
static const struct {
	unsigned	 status;
	const char	*code;
} answers[SBX_ERR_COUNT] = {
	/* A failure that names no cause is still one: fail closed. */
	[SBX_ERR_NONE]			= { 500, "internal" },
	[SBX_ERR_INVALID]		= { 400, "bad_request" },
	[SBX_ERR_LIMIT]			= { 400, "bad_request" },
	[SBX_ERR_NO_POLICY]		= { 422, "unknown_policy" },
	[SBX_ERR_EXISTS]		= { 409, "exists" },
	[SBX_ERR_NOT_FOUND]		= { 404, "not_found" },
	[SBX_ERR_NETNS_BUSY]		= { 409, "netns_busy" },
	[SBX_ERR_POOL_FULL]		= { 503, "pool_exhausted" },
	[SBX_ERR_AUDIT_UNAVAILABLE]	= { 503, "audit_unavailable" },
	[SBX_ERR_KERNEL]		= { 500, "kernel" },
	[SBX_ERR_STATE_DB]		= { 500, "state_db" },
	[SBX_ERR_INTERNAL]		= { 500, "internal" },
};

unsigned
ctl_sbx_status(enum sbx_err why, const char **code)
{
	if ((unsigned)why >= SBX_ERR_COUNT || answers[why].code == NULL)
		why = SBX_ERR_NONE;
	*code = answers[why].code;
	return answers[why].status;
}

/* An error answer for why: {error, message}. */
static enum ctl_rc
reply_why(struct ctl_req *req, enum sbx_err why, const char *msg)
{
	const char *code;
	unsigned status = ctl_sbx_status(why, &code);

	return ctl_reply_error(req, status, code, "%s", msg);
}

/* ------------------------------------------------------------ JSON */

/* A unix time as the API writes it; JSON null for 0 (never). */
static json_t *
time_json(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	char buf[32];

	if (t <= 0)
		return json_null();
	if (gmtime_r(&tt, &tm) == NULL)
		return json_string("?");
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_string(buf);
}

static json_t *
info_json(const struct sbx_info *in, int with_token)
{
	const struct sbx_view *v = &in->view;
	char url[64];
	json_t *o;

	snprintf(url, sizeof(url), "http://%s:%u", in->service_addr,
	    (unsigned)in->bridge_port);
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, "
	    "s:s, s:I, s:b, s:o, s:s, s:o}",
	    "id", v->id,
	    "netns", in->netns,
	    "netns_path", in->netns_path,
	    "address", in->addr,
	    "service_address", in->service_addr,
	    "dns", in->service_addr,
	    "bridge_url", url,
	    "policy", v->policy,
	    "subject", v->subject,
	    "labels", sbx_labels_json(v->nlabels, v->label_keys,
	    v->label_values),
	    "interface", v->ifname,
	    "index", (json_int_t)v->index,
	    "tainted", v->tainted,
	    "created_at", time_json(in->created),
	    "host_address", in->host_addr,
	    "expires_at", time_json(v->expires));
	if (o != NULL && (json_object_set_new(o, "generation",
	    json_integer((json_int_t)in->gen)) == -1 ||
	    json_object_set_new(o, "idle_ms",
	    json_integer((json_int_t)in->idle_ms)) == -1)) {
		json_decref(o);
		return NULL;
	}
	/* Attach mode: where the namespace came from, and the identity
	 * (device:inode) the daemon holds it by. */
	if (o != NULL && (json_object_set_new(o, "attached",
	    json_boolean(v->attached)) == -1 || (v->attached &&
	    json_object_set_new(o, "attached_from",
	    rec_string(in->attached_from)) == -1))) {
		json_decref(o);
		return NULL;
	}
	if (o != NULL && in->netns_ino != 0) {
		char ident[48];

		snprintf(ident, sizeof(ident), "%llu:%llu",
		    (unsigned long long)in->netns_dev,
		    (unsigned long long)in->netns_ino);
		if (json_object_set_new(o, "netns_id", json_string(ident)) ==
		    -1) {
			json_decref(o);
			return NULL;
		}
	}
	if (o != NULL && with_token &&
	    json_object_set_new(o, "token", json_string(in->token)) == -1) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ------------------------------------------------------------ create */

static const char *const create_keys[] = {
	"id", "policy", "subject", "labels", "ttl", "attach", "attach_pid",
};

/* Copies the JSON string v into dst (size bytes) whole: 0, or -1 when v
 * is not a string, holds a NUL (it would be another string than the one
 * the client sent) or does not fit. */
static int
take_string(const json_t *v, char *dst, size_t size)
{
	const char *s = json_string_value(v);
	size_t n;

	if (s == NULL || (n = strlen(s)) != json_string_length(v) ||
	    n >= size)
		return -1;
	memcpy(dst, s, n + 1);
	return 0;
}

/* The labels object v (checked by sbx_labels_check; NULL or null: none)
 * into spec. */
static void
take_labels(json_t *v, struct sbx_spec *spec)
{
	const char *k;
	json_t *val;

	if (!json_is_object(v))
		return;
	json_object_foreach(v, k, val) {
		snprintf(spec->label_keys[spec->nlabels],
		    sizeof(spec->label_keys[0]), "%s", k);
		snprintf(spec->label_values[spec->nlabels],
		    sizeof(spec->label_values[0]), "%s",
		    json_string_value(val));
		spec->nlabels++;
	}
}

/* "attach" (a path) or "attach_pid" (a process whose network namespace
 * it is; the daemon reads /proc/<pid>/ns/net once, and holds the
 * namespace from then on), at most one of them, into spec->attach. */
static int
parse_attach(json_t *body, struct sbx_spec *spec, char *msg, size_t msglen)
{
	json_t *path = json_object_get(body, "attach"),
	    *pid = json_object_get(body, "attach_pid");
	json_int_t p;

	if (path != NULL && json_is_null(path))
		path = NULL;
	if (pid != NULL && json_is_null(pid))
		pid = NULL;
	if (path != NULL && pid != NULL) {
		snprintf(msg, msglen, "attach, attach_pid: give one of them");
		return -1;
	}
	if (path != NULL && (take_string(path, spec->attach,
	    sizeof(spec->attach)) == -1 ||
	    !ns_attach_path_valid(spec->attach))) {
		spec->attach[0] = '\0';
		snprintf(msg, msglen, SBX_ATTACH_WANT);
		return -1;
	}
	if (pid != NULL) {
		if (!json_is_integer(pid) || (p = json_integer_value(pid)) <
		    1 || p > 4194304) {
			snprintf(msg, msglen, "attach_pid: want a process id "
			    "(1..4194304)");
			return -1;
		}
		snprintf(spec->attach, sizeof(spec->attach), "/proc/%lld/ns/net",
		    (long long)p);
	}
	return 0;
}

/*
 * The body, checked into spec: 0, or -1 with the first problem in msg.
 * What passed is in spec either way, for the refusal's record; so is the
 * policy asked for (cut to a name's length), whatever comes of it.
 */
static int
parse_create(json_t *body, struct sbx_spec *spec, char *msg, size_t msglen)
{
	const char *k, *pol;
	json_t *v;
	size_t i;
	int found;

	memset(spec, 0, sizeof(*spec));
	if ((pol = json_string_value(json_object_get(body, "policy"))) != NULL)
		snprintf(spec->policy, sizeof(spec->policy), "%s", pol);
	if (!json_is_object(body)) {
		snprintf(msg, msglen, "the body must be a JSON object");
		return -1;
	}
	/* Unknown members are refused: a misspelt "ttl" must not silently
	 * give a sandbox that never expires. */
	json_object_foreach(body, k, v) {
		for (i = 0, found = 0; i < sizeof(create_keys) /
		    sizeof(create_keys[0]); i++)
			found |= strcmp(k, create_keys[i]) == 0;
		if (!found) {
			snprintf(msg, msglen, "unknown member '%.64s'", k);
			return -1;
		}
	}
	v = json_object_get(body, "id");
	if (v != NULL && !json_is_null(v) && (take_string(v, spec->id,
	    sizeof(spec->id)) == -1 || !sbx_id_valid(spec->id))) {
		spec->id[0] = '\0';
		snprintf(msg, msglen, SBX_ID_WANT);
		return -1;
	}
	if (take_string(json_object_get(body, "subject"), spec->subject,
	    sizeof(spec->subject)) == -1 || !sbx_subject_valid(spec->subject)) {
		spec->subject[0] = '\0';
		snprintf(msg, msglen, SBX_SUBJECT_WANT);
		return -1;
	}
	v = json_object_get(body, "labels");
	if (sbx_labels_check(v, msg, msglen) == -1)
		return -1;
	take_labels(v, spec);
	v = json_object_get(body, "ttl");
	if (v != NULL && !json_is_null(v) &&
	    sbx_ttl_parse(v, &spec->ttl_s, msg, msglen) == -1)
		return -1;
	if (take_string(json_object_get(body, "policy"), spec->policy,
	    sizeof(spec->policy)) == -1 || spec->policy[0] == '\0') {
		snprintf(msg, msglen, SBX_POLICY_WANT);
		return -1;
	}
	return parse_attach(body, spec, msg, msglen);
}

/* {error, message} for why. rec_string: msg may quote input cut inside a
 * UTF-8 character, which a plain "s" would refuse, turning a 4xx into a
 * 500. */
static unsigned
create_failed(enum sbx_err why, const char *msg, json_t **reply)
{
	const char *code;
	unsigned status = ctl_sbx_status(why, &code);

	*reply = json_pack("{s:s, s:o}", "error", code, "message",
	    rec_string(msg));
	return status;
}

unsigned
ctl_sbx_create(struct sbx *m, json_t *body, json_t **reply)
{
	struct sbx_spec spec;
	struct sbx_info info;
	enum sbx_err why;
	const char *code;
	char msg[512];
	unsigned status;

	if (parse_create(body, &spec, msg, sizeof(msg)) == -1) {
		/* Refused before the manager was asked: recorded here,
		 * like a refusal of the manager's. */
		status = ctl_sbx_status(SBX_ERR_INVALID, &code);
		sbx_create_refused(m, &spec, code, status, msg);
		return create_failed(SBX_ERR_INVALID, msg, reply);
	}
	if (sbx_create(m, &spec, &info, &why, msg, sizeof(msg)) == -1)
		return create_failed(why, msg, reply);
	/* The sandbox exists now; an answer that cannot be built is still
	 * a 201 the caller can follow with GET. */
	if ((*reply = info_json(&info, 1)) == NULL)
		*reply = json_pack("{s:s}", "id", info.view.id);
	OPENSSL_cleanse(info.token, sizeof(info.token));
	return 201;
}

static enum ctl_rc
h_create(struct ctl_req *req, void *arg)
{
	json_t *reply;
	unsigned status;

	status = ctl_sbx_create(arg, ctl_req_body(req), &reply);
	return ctl_reply_json(req, status, reply);
}

/* ------------------------------------------------------------ others */

struct listing {
	const struct sbx	*m;
	json_t			*a;
	int			 bad;
};

static void
list_one(void *ctx, const struct sbx_view *v)
{
	struct listing *l = ctx;
	struct sbx_info info;

	if (l->bad || sbx_get(l->m, v->id, 0, &info) == -1 ||
	    json_array_append_new(l->a, info_json(&info, 0)) == -1)
		l->bad = 1;
}

static enum ctl_rc
h_list(struct ctl_req *req, void *arg)
{
	struct listing l = { arg, NULL, 0 };

	if ((l.a = json_array()) == NULL)
		return reply_why(req, SBX_ERR_INTERNAL, "out of memory");
	/* Slot order: stable, and the order they were made in for a
	 * daemon that never deleted one. */
	sbx_foreach(l.m, list_one, &l);
	if (l.bad) {
		json_decref(l.a);
		return reply_why(req, SBX_ERR_INTERNAL, "out of memory");
	}
	return ctl_reply_json(req, 200, json_pack("{s:o, s:I}", "sandboxes",
	    l.a, "count", (json_int_t)sbx_count(l.m)));
}

static enum ctl_rc
h_get(struct ctl_req *req, void *arg)
{
	struct sbx_info info;

	if (sbx_get(arg, ctl_req_param(req, "id"), 0, &info) == -1)
		return reply_why(req, SBX_ERR_NOT_FOUND, "no such sandbox");
	return ctl_reply_json(req, 200, info_json(&info, 0));
}

static enum ctl_rc
h_delete(struct ctl_req *req, void *arg)
{
	const char *id = ctl_req_param(req, "id");
	char err[512];

	/* id is the request's own string (never truncated: a prefix of a
	 * long id must not name another sandbox). The log never refuses a
	 * removal: what is left besides an unknown id is the kernel's
	 * refusal. */
	if (sbx_delete(arg, id, err, sizeof(err)) == -1)
		return reply_why(req, errno == ENOENT ? SBX_ERR_NOT_FOUND :
		    SBX_ERR_KERNEL, err);
	return ctl_reply_json(req, 200, json_pack("{s:s, s:b}", "id", id,
	    "deleted", 1));
}

/* What `sluice exec` needs to run a command in the sandbox: where its
 * namespace is, and the environment that names it to the bridge. */
static enum ctl_rc
h_exec(struct ctl_req *req, void *arg)
{
	struct sbx_info info;
	struct sbx_limits lim;
	json_t *cgs;
	char url[64];
	enum ctl_rc rc;
	size_t i;

	if (sbx_get(arg, ctl_req_param(req, "id"), 1, &info) == -1)
		return reply_why(req, SBX_ERR_NOT_FOUND, "no such sandbox");
	if (sbx_exec_limits(arg, info.view.id, &lim) == -1) {
		OPENSSL_cleanse(info.token, sizeof(info.token));
		return reply_why(req, errno == EIO ? SBX_ERR_KERNEL :
		    SBX_ERR_NOT_FOUND, errno == EIO ? "the sandbox's cgroup "
		    "is missing: its resources limits cannot be applied" :
		    "no such sandbox");
	}
	snprintf(url, sizeof(url), "http://%s:%u", info.service_addr,
	    (unsigned)info.bridge_port);
	/* The command joins these groups and keeps to the timeout
	 * (gateway/cli/cli_limits.c). */
	if ((cgs = json_array()) != NULL)
		for (i = 0; i < lim.ncgroups; i++)
			(void)json_array_append_new(cgs,
			    json_string(lim.cgroup[i]));
	rc = ctl_reply_json(req, 200, json_pack("{s:s, s:s, s:s, "
	    "s:{s:s, s:s, s:s}, s:{s:o, s:I}}",
	    "id", info.view.id,
	    "netns", info.netns,
	    "netns_path", info.netns_path,
	    "env",
	    "SLUICE_SANDBOX_ID", info.view.id,
	    "SLUICE_BRIDGE_URL", url,
	    "SLUICE_TOKEN", info.token,
	    "limits",
	    "cgroups", cgs,
	    "timeout_s", (json_int_t)lim.timeout_s));
	OPENSSL_cleanse(info.token, sizeof(info.token));
	return rc;
}

/* `sluice exec` and `sluice run` killed a command at the sandbox's
 * resources.timeout: the finding, with the timeout the daemon knows. */
static enum ctl_rc
h_timeout(struct ctl_req *req, void *arg)
{
	struct sbx_limits lim;
	const char *id = ctl_req_param(req, "id");

	if (sbx_exec_limits(arg, id, &lim) == -1)
		return reply_why(req, SBX_ERR_NOT_FOUND, "no such sandbox");
	if (sbx_note(arg, "sandbox.timeout", id, "timeout=%llus command "
	    "killed", (unsigned long long)lim.timeout_s) == -1)
		return reply_why(req, SBX_ERR_AUDIT_UNAVAILABLE,
		    "the finding cannot be recorded");
	return ctl_reply_json(req, 200, json_pack("{s:b}", "recorded", 1));
}

/* ------------------------------------------------------------ callers */

static int
peer_in_sandbox(pid_t pid, void *arg)
{
	return sbx_pid_sandbox(arg, pid, NULL);
}

/*
 * What the control server refused before a handler ran: a create refused
 * for its body (400, 413, 415) is a sandbox.create refusal like one the
 * manager makes; a request from inside a sandbox is a finding on that
 * sandbox, whatever it asked.
 */
static void
on_refused(const char *method, const char *path, unsigned status,
    const char *code, const char *message, pid_t pid, void *arg)
{
	struct sbx *m = arg;
	struct sbx_view v;
	char shown[129];
	size_t i;

	if (strcmp(code, "from_sandbox") == 0 && pid > 0 &&
	    sbx_pid_sandbox(m, pid, &v) == 1 && v.id[0] != '\0') {
		/* The path is the caller's: shown as printable ASCII only. */
		for (i = 0; i < sizeof(shown) - 1 && path[i] != '\0'; i++)
			shown[i] = path[i] >= 0x20 && path[i] < 0x7f ?
			    path[i] : '?';
		shown[i] = '\0';
		(void)sbx_note(m, "sandbox.control_refused", v.id,
		    "%s %s from pid %ld inside the sandbox",
		    strcmp(method, "POST") == 0 || strcmp(method, "GET") ==
		    0 || strcmp(method, "DELETE") == 0 ? method : "?", shown,
		    (long)pid);
		return;
	}
	if (strcmp(method, "POST") == 0 && strcmp(path, "/v1/sandboxes") == 0)
		sbx_create_refused(m, NULL, code, status, message);
}

int
ctl_sbx_routes(struct ctl *ctl, struct sbx *m)
{
	ctl_set_peer_check(ctl, peer_in_sandbox, m);
	ctl_set_refused_hook(ctl, on_refused, m);
	if (ctl_route(ctl, "POST", "/v1/sandboxes", h_create, m) == -1 ||
	    ctl_route(ctl, "GET", "/v1/sandboxes", h_list, m) == -1 ||
	    ctl_route(ctl, "GET", "/v1/sandboxes/{id}", h_get, m) == -1 ||
	    ctl_route(ctl, "DELETE", "/v1/sandboxes/{id}", h_delete, m) ==
	    -1 ||
	    ctl_route(ctl, "POST", "/v1/sandboxes/{id}/timeout", h_timeout,
	    m) == -1 ||
	    ctl_route(ctl, "POST", "/v1/sandboxes/{id}/exec", h_exec, m) ==
	    -1)
		return -1;
	return 0;
}
