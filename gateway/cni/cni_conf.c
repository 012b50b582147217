/*
 * cni_conf.c: the pure half of sluice-cni: what the runtime hands the
 * plugin (environment and network config), checked into a struct
 * cni_req, and the JSON the plugin answers with. Every byte here can come
 * from a pod's spec (names, annotations passed as CNI_ARGS), so input is
 * bounded, typed and refused with a CNI error code that says which field
 * is wrong; nothing is read from the process environment or the network,
 * which is what lets the unit tests and the fuzz target drive it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gateway/cni/cni.h"

static int
fail(struct cni_err *e, enum cni_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail(struct cni_err *e, enum cni_code code, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	e->details[0] = '\0';
	return -1;
}

enum cni_cmd
cni_cmd_parse(const char *s)
{
	static const struct {
		const char	*name;
		enum cni_cmd	 cmd;
	} cmds[] = {
		{ "ADD", CNI_CMD_ADD }, { "DEL", CNI_CMD_DEL },
		{ "CHECK", CNI_CMD_CHECK }, { "VERSION", CNI_CMD_VERSION },
		{ "STATUS", CNI_CMD_STATUS }, { "GC", CNI_CMD_GC },
	};
	size_t i;

	for (i = 0; s != NULL && i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(s, cmds[i].name) == 0)
			return cmds[i].cmd;
	return CNI_CMD_NONE;
}

int
cni_version_ok(const char *v)
{
	return v != NULL && (strcmp(v, "1.0.0") == 0 ||
	    strcmp(v, "1.1.0") == 0);
}

/* s of at most max characters of [A-Za-z0-9] then [A-Za-z0-9_.-]: what the
 * spec allows in a network name and a container id. */
static int
name_ok(const char *s, size_t max)
{
	size_t i;

	if (s == NULL || s[0] == '\0' || strlen(s) > max)
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || (i > 0 && (c == '_' ||
		    c == '.' || c == '-'))))
			return 0;
	}
	return 1;
}

/* A policy name as sluiced has them: [a-z0-9][a-z0-9_-]{0,63}. */
static int
policy_ok(const char *s)
{
	size_t i;

	if (s == NULL || s[0] == '\0' || strlen(s) > 64 || s[0] == '_' ||
	    s[0] == '-')
		return 0;
	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

/* A subject as sluiced takes it: [A-Za-z0-9][A-Za-z0-9._@+:/-]{0,127}. */
static int
subject_ok(const char *s)
{
	size_t i;

	if (s == NULL || s[0] == '\0' || strlen(s) > 128)
		return 0;
	for (i = 0; s[i] != '\0'; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || (i > 0 &&
		    strchr("._@+:/-", c) != NULL)))
			return 0;
	}
	return 1;
}

/* An absolute path of printable ASCII without spaces, shorter than max. */
static int
path_ok(const char *s, size_t max)
{
	size_t i;

	if (s == NULL || s[0] != '/' || strlen(s) >= max)
		return 0;
	for (i = 0; s[i] != '\0'; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return 0;
	return 1;
}

/* Copies the string member key of o into dst (size bytes): 0 when it is
 * absent (dst untouched), 1 when copied, -1 when it is not a string, holds
 * a NUL or does not fit. */
static int
member(json_t *o, const char *key, char *dst, size_t size)
{
	json_t *v = json_object_get(o, key);
	const char *s;
	size_t n;

	if (v == NULL || json_is_null(v))
		return 0;
	if ((s = json_string_value(v)) == NULL ||
	    (n = json_string_length(v)) != strlen(s) || n >= size)
		return -1;
	memcpy(dst, s, n + 1);
	return 1;
}

/*
 * CNI_ARGS: "K=V;K=V". The keys used are K8S_POD_NAMESPACE, K8S_POD_NAME
 * and SLUICE_POLICY; others (IgnoreUnknown, K8S_POD_UID, ...) are passed
 * over, as runtimes send several. Each value must be printable; a pair
 * without '=' or a value too long for its field is an error.
 */
static int
parse_args(const char *args, struct cni_req *req, struct cni_err *e)
{
	const char *p = args, *end, *eq;
	size_t klen, vlen;
	char *dst;
	size_t cap;

	if (args == NULL || args[0] == '\0')
		return 0;
	if (strlen(args) > CNI_ARGS_MAX)
		return fail(e, CNI_E_ENV, "CNI_ARGS: longer than %d bytes",
		    CNI_ARGS_MAX);
	while (*p != '\0') {
		if ((end = strchr(p, ';')) == NULL)
			end = p + strlen(p);
		if (end == p) {
			p++;
			continue;
		}
		if ((eq = memchr(p, '=', (size_t)(end - p))) == NULL ||
		    eq == p)
			return fail(e, CNI_E_ENV, "CNI_ARGS: want KEY=VALUE "
			    "pairs separated by ';'");
		klen = (size_t)(eq - p);
		vlen = (size_t)(end - eq - 1);
		dst = NULL;
		cap = 0;
		if (klen == 17 && memcmp(p, "K8S_POD_NAMESPACE", 17) == 0)
			dst = req->pod_ns, cap = sizeof(req->pod_ns);
		else if (klen == 12 && memcmp(p, "K8S_POD_NAME", 12) == 0)
			dst = req->pod_name, cap = sizeof(req->pod_name);
		else if (klen == 13 && memcmp(p, "SLUICE_POLICY", 13) == 0)
			dst = req->policy, cap = sizeof(req->policy);
		if (dst != NULL) {
			size_t i;

			if (vlen >= cap)
				return fail(e, CNI_E_ENV, "CNI_ARGS: %.*s: "
				    "longer than %zu characters", (int)klen,
				    p, cap - 1);
			for (i = 0; i < vlen; i++)
				if ((unsigned char)eq[1 + i] < 0x21 ||
				    (unsigned char)eq[1 + i] > 0x7e)
					return fail(e, CNI_E_ENV, "CNI_ARGS: "
					    "%.*s: not printable", (int)klen,
					    p);
			memcpy(dst, eq + 1, vlen);
			dst[vlen] = '\0';
		}
		p = *end == ';' ? end + 1 : end;
	}
	return 0;
}

/* The policy of args.cni["sluice.policy"], where runtimes pass pod
 * annotations to plugins, unless CNI_ARGS named one. */
static int
conf_policy(json_t *conf, struct cni_req *req, struct cni_err *e)
{
	json_t *cni = json_object_get(json_object_get(conf, "args"), "cni");

	if (req->policy[0] != '\0')
		return 0;
	if (cni != NULL && member(cni, "sluice.policy", req->policy,
	    sizeof(req->policy)) == -1)
		return fail(e, CNI_E_CONFIG, "args.cni[\"sluice.policy\"]: "
		    "want a policy name");
	if (req->policy[0] == '\0' && member(conf, "policy", req->policy,
	    sizeof(req->policy)) == -1)
		return fail(e, CNI_E_CONFIG, "policy: want a policy name");
	return 0;
}

void
cni_sandbox_id(const char *containerid, const char *ifname, char out[33])
{
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a, 64 bits */
	const char *p;

	for (p = containerid; p != NULL && *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	h = (h ^ 0) * 0x100000001b3ull;		/* the separator */
	for (p = ifname; p != NULL && *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	snprintf(out, 33, "cni-%016llx", (unsigned long long)h);
}

/* The environment's part of a request for cmd. */
static int
parse_env(const struct cni_env *env, struct cni_req *req, struct cni_err *e)
{
	int needs_ns = req->cmd == CNI_CMD_ADD || req->cmd == CNI_CMD_CHECK;

	if (!name_ok(env->containerid, sizeof(req->containerid) - 1))
		return fail(e, CNI_E_ENV, "CNI_CONTAINERID: want "
		    "[A-Za-z0-9][A-Za-z0-9_.-]{0,126}");
	snprintf(req->containerid, sizeof(req->containerid), "%s",
	    env->containerid);
	if (env->ifname == NULL || env->ifname[0] == '\0' ||
	    strlen(env->ifname) >= sizeof(req->ifname))
		return fail(e, CNI_E_ENV, "CNI_IFNAME: want an interface name");
	snprintf(req->ifname, sizeof(req->ifname), "%s", env->ifname);
	/* Sluice's end inside is always eth0, as in its own namespaces. */
	if (strcmp(req->ifname, "eth0") != 0)
		return fail(e, CNI_E_CONFIG, "CNI_IFNAME: sluice-cni makes "
		    "eth0 only, not %s", req->ifname);
	if (env->netns != NULL && env->netns[0] != '\0') {
		if (!path_ok(env->netns, sizeof(req->netns)))
			return fail(e, CNI_E_ENV, "CNI_NETNS: want an absolute "
			    "path of at most %zu printable characters",
			    sizeof(req->netns) - 1);
		snprintf(req->netns, sizeof(req->netns), "%s", env->netns);
	} else if (needs_ns)
		return fail(e, CNI_E_ENV, "CNI_NETNS: required for ADD and "
		    "CHECK");
	cni_sandbox_id(req->containerid, req->ifname, req->id);
	return parse_args(env->args, req, e);
}

int
cni_parse(const struct cni_env *env, const char *buf, size_t len,
    struct cni_req *req, struct cni_err *e)
{
	json_error_t je;
	json_t *v;
	int r;

	memset(req, 0, sizeof(*req));
	memset(e, 0, sizeof(*e));
	snprintf(req->version, sizeof(req->version), CNI_DEFAULT_VERSION);
	if ((req->cmd = cni_cmd_parse(env->command)) == CNI_CMD_NONE)
		return fail(e, CNI_E_ENV, "CNI_COMMAND: want ADD, DEL, CHECK, "
		    "VERSION, STATUS or GC");
	if (req->cmd == CNI_CMD_VERSION)
		return 0;
	if (len > CNI_CONF_MAX)
		return fail(e, CNI_E_DECODE, "network config: more than %d "
		    "bytes", CNI_CONF_MAX);
	if ((req->conf = json_loadb(buf, len, JSON_REJECT_DUPLICATES,
	    &je)) == NULL) {
		fail(e, CNI_E_DECODE, "network config: not JSON");
		snprintf(e->details, sizeof(e->details), "line %d: %s",
		    je.line, je.text);
		return -1;
	}
	if (!json_is_object(req->conf))
		return fail(e, CNI_E_DECODE, "network config: not a JSON "
		    "object");
	if ((r = member(req->conf, "cniVersion", req->version,
	    sizeof(req->version))) != 1 || !cni_version_ok(req->version)) {
		if (r != 1)
			snprintf(req->version, sizeof(req->version),
			    CNI_DEFAULT_VERSION);
		return fail(e, CNI_E_VERSION, "cniVersion: want 1.0.0 or "
		    "1.1.0");
	}
	if (member(req->conf, "name", req->name, sizeof(req->name)) != 1 ||
	    !name_ok(req->name, sizeof(req->name) - 1))
		return fail(e, CNI_E_CONFIG, "name: want the network's name "
		    "([A-Za-z0-9][A-Za-z0-9_.-]*)");
	if ((v = json_object_get(req->conf, "type")) == NULL ||
	    !json_is_string(v))
		return fail(e, CNI_E_CONFIG, "type: required");
	snprintf(req->socket, sizeof(req->socket), CNI_DEFAULT_SOCKET);
	if (member(req->conf, "socket", req->socket, sizeof(req->socket)) ==
	    -1 || !path_ok(req->socket, sizeof(req->socket)))
		return fail(e, CNI_E_CONFIG, "socket: want the absolute path "
		    "of sluiced's control socket");
	if ((v = json_object_get(req->conf, "prevResult")) != NULL &&
	    !json_is_null(v)) {
		if (!json_is_object(v))
			return fail(e, CNI_E_CONFIG, "prevResult: not an "
			    "object");
		req->prev = v;
	}
	/* STATUS and GC name no container. */
	if (req->cmd == CNI_CMD_STATUS || req->cmd == CNI_CMD_GC)
		return 0;
	if (parse_env(env, req, e) == -1 || conf_policy(req->conf, req, e) ==
	    -1)
		return -1;
	if (req->cmd == CNI_CMD_CHECK && req->prev == NULL)
		return fail(e, CNI_E_CONFIG, "prevResult: required for CHECK");
	if (req->cmd != CNI_CMD_ADD)
		return 0;
	if (!policy_ok(req->policy))
		return fail(e, CNI_E_CONFIG, "no policy: name one in the "
		    "network config (\"policy\"), in args.cni[\"sluice.policy\"] "
		    "or as CNI_ARGS SLUICE_POLICY=NAME ([a-z0-9][a-z0-9_-]"
		    "{0,63})");
	if ((r = member(req->conf, "subject", req->subject,
	    sizeof(req->subject))) == -1)
		return fail(e, CNI_E_CONFIG, "subject: not a string");
	if (r == 0) {
		/* Made whole or not at all: a cut name is another subject. */
		char made[sizeof(req->pod_ns) + sizeof(req->pod_name) + 8];

		if (req->pod_ns[0] != '\0' && req->pod_name[0] != '\0')
			snprintf(made, sizeof(made), "k8s:%s/%s", req->pod_ns,
			    req->pod_name);
		else
			snprintf(made, sizeof(made), "cni:%s", req->name);
		if (strlen(made) >= sizeof(req->subject))
			return fail(e, CNI_E_CONFIG, "subject: the pod's "
			    "namespace and name make more than %zu characters; "
			    "set \"subject\"", sizeof(req->subject) - 1);
		memcpy(req->subject, made, strlen(made) + 1);
	}
	if (!subject_ok(req->subject))
		return fail(e, CNI_E_CONFIG, "subject: want [A-Za-z0-9]"
		    "[A-Za-z0-9._@+:/-]{0,127} (set \"subject\", or the pod's "
		    "namespace and name make it)");
	return 0;
}

void
cni_req_clear(struct cni_req *req)
{
	if (req == NULL)
		return;
	json_decref(req->conf);
	req->conf = NULL;
	req->prev = NULL;
}

json_t *
cni_error_json(const char *v, const struct cni_err *e)
{
	json_t *o;

	o = json_pack("{s:s, s:i, s:s}", "cniVersion", cni_version_ok(v) ? v :
	    CNI_DEFAULT_VERSION, "code", (int)e->code, "msg", e->msg);
	if (o != NULL && e->details[0] != '\0')
		json_object_set_new(o, "details", json_string(e->details));
	return o;
}

/* A copy of prev's array key (or a new empty one). */
static json_t *
prev_array(const json_t *prev, const char *key)
{
	json_t *a = json_object_get(prev, key);

	return json_is_array(a) ? json_deep_copy(a) : json_array();
}

json_t *
cni_result(const struct cni_req *req, json_t *sb, struct cni_err *e)
{
	const char *ifname = json_string_value(json_object_get(sb,
	    "interface")), *addr = json_string_value(json_object_get(sb,
	    "address")), *gw = json_string_value(json_object_get(sb,
	    "host_address")), *dns = json_string_value(json_object_get(sb,
	    "dns"));
	json_t *r = NULL, *ifs, *ips, *routes;
	char cidr[32];
	size_t eth0;

	if (ifname == NULL || addr == NULL || gw == NULL || dns == NULL) {
		fail(e, CNI_E_IO, "sluiced's answer lacks the sandbox's "
		    "interface or addresses");
		return NULL;
	}
	ifs = prev_array(req->prev, "interfaces");
	ips = prev_array(req->prev, "ips");
	routes = prev_array(req->prev, "routes");
	if (ifs == NULL || ips == NULL || routes == NULL)
		goto nomem;
	/* Every sandbox address is the .2 of its pool slot's /30
	 * (ns_pool_addrs), with the host side at .1. */
	snprintf(cidr, sizeof(cidr), "%s/30", addr);
	if (json_array_append_new(ifs, json_pack("{s:s}", "name", ifname)) ==
	    -1 || json_array_append_new(ifs, json_pack("{s:s, s:s}", "name",
	    req->ifname, "sandbox", req->netns)) == -1)
		goto nomem;
	eth0 = json_array_size(ifs) - 1;
	if (json_array_append_new(ips, json_pack("{s:s, s:s, s:I}",
	    "address", cidr, "gateway", gw, "interface", (json_int_t)eth0)) ==
	    -1 || json_array_append_new(routes, json_pack("{s:s, s:s}", "dst",
	    "0.0.0.0/0", "gw", gw)) == -1)
		goto nomem;
	r = json_pack("{s:s, s:o, s:o, s:o, s:{s:[s]}}", "cniVersion",
	    req->version, "interfaces", ifs, "ips", ips, "routes", routes,
	    "dns", "nameservers", dns);
	if (r == NULL) {
		fail(e, CNI_E_IO, "out of memory");
		return NULL;
	}
	return r;
nomem:
	json_decref(ifs);
	json_decref(ips);
	json_decref(routes);
	fail(e, CNI_E_IO, "out of memory");
	return NULL;
}
