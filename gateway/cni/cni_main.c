/*
 * cni_main.c: sluice-cni's main: reads what the runtime gives (the
 * environment, the network config on stdin, bounded), runs the command
 * against sluiced's control API, and answers as the CNI spec says: a
 * result or nothing on stdout and exit 0, or a CNI error object on stdout
 * and exit 1. The sandbox of a container is found again by its id alone
 * (cni_sandbox_id), so ADD is safe to repeat, and DEL succeeds when there
 * is nothing left to delete.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/cli/cli.h"
#include "gateway/cni/cni.h"

/* Prints o (a new reference, taken) on stdout. */
static void
emit(json_t *o)
{
	char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

	if (s != NULL) {
		printf("%s\n", s);
		free(s);
	}
	json_decref(o);
}

static int
error_out(const char *version, const struct cni_err *e)
{
	emit(cni_error_json(version, e));
	return 1;
}

static int
set_err(struct cni_err *e, enum cni_code code, const char *msg,
    const char *details)
{
	e->code = code;
	snprintf(e->msg, sizeof(e->msg), "%s", msg);
	snprintf(e->details, sizeof(e->details), "%s", details != NULL ?
	    details : "");
	return -1;
}

/* The daemon, asked: 0 with *status and *reply, or -1 with e (it cannot
 * be reached: the runtime should try again later). */
static int
ask(const char *method, const char *path, json_t *body, long *status,
    json_t **reply, struct cni_err *e)
{
	char err[512];

	*status = 0;
	if (cli_request(method, path, body, status, reply, NULL, err,
	    sizeof(err)) == -1)
		return set_err(e, CNI_E_AGAIN, "sluiced cannot be reached",
		    err);
	return 0;
}

/* A daemon's refusal as a CNI error: its code and message as details. */
static int
refused(struct cni_err *e, long status, json_t *reply, const char *what)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "sluiced refused to %s (%ld %s)", what,
	    status, json_string_value(json_object_get(reply, "error")) ?
	    json_string_value(json_object_get(reply, "error")) : "?");
	return set_err(e, status >= 500 ? CNI_E_AGAIN : CNI_E_REFUSED, msg,
	    json_string_value(json_object_get(reply, "message")));
}

/* Is sandbox sb (the daemon's JSON) attached to the namespace at path? */
static int
same_netns(json_t *sb, const char *path)
{
	const char *id = json_string_value(json_object_get(sb, "netns_id"));
	struct stat st;
	char want[48];

	if (id == NULL || !json_is_true(json_object_get(sb, "attached")) ||
	    stat(path, &st) == -1)
		return 0;
	snprintf(want, sizeof(want), "%llu:%llu", (unsigned long long)st.st_dev,
	    (unsigned long long)st.st_ino);
	return strcmp(id, want) == 0;
}

/* GET the container's sandbox: 1 with *sb, 0 for none, -1 with e. */
static int
get_sandbox(const struct cni_req *req, json_t **sb, struct cni_err *e)
{
	char path[64];
	long status;

	snprintf(path, sizeof(path), "/v1/sandboxes/%s", req->id);
	if (ask("GET", path, NULL, &status, sb, e) == -1)
		return -1;
	if (status == 404) {
		json_decref(*sb);
		*sb = NULL;
		return 0;
	}
	if (status != 200) {
		refused(e, status, *sb, "show the sandbox");
		json_decref(*sb);
		*sb = NULL;
		return -1;
	}
	return 1;
}

static int
cmd_add(const struct cni_req *req, struct cni_err *e)
{
	json_t *body, *reply = NULL, *res, *labels;
	long status;
	int r;

	/* Keys of [a-z0-9_] only: the audit record carries the labels as
	 * they are, and its canonical form allows no other key. */
	labels = json_pack("{s:s, s:s}", "cni_network", req->name,
	    "cni_container", req->containerid);
	if (labels != NULL && req->pod_ns[0] != '\0' && req->pod_name[0] !=
	    '\0') {
		char pod[320];

		snprintf(pod, sizeof(pod), "%s/%s", req->pod_ns, req->pod_name);
		/* A label value has at most 128 characters: a longer pod
		 * name is in the subject, not here. */
		if (strlen(pod) <= 128)
			json_object_set_new(labels, "k8s_pod", json_string(pod));
	}
	body = json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", req->id, "policy",
	    req->policy, "subject", req->subject, "attach", req->netns,
	    "labels", labels);
	if (body == NULL)
		return set_err(e, CNI_E_IO, "out of memory", NULL);
	r = ask("POST", "/v1/sandboxes", body, &status, &reply, e);
	json_decref(body);
	if (r == -1)
		return -1;
	/* ADD again for a container already attached (a runtime's retry):
	 * the same answer, if it is the same namespace. */
	if (status == 409 && json_is_string(json_object_get(reply, "error")) &&
	    strcmp(json_string_value(json_object_get(reply, "error")),
	    "exists") == 0) {
		json_t *sb = NULL;

		if ((r = get_sandbox(req, &sb, e)) == 1 &&
		    same_netns(sb, req->netns)) {
			json_decref(reply);
			reply = sb;
			status = 201;
		} else
			json_decref(sb);
		if (r == -1) {
			json_decref(reply);
			return -1;
		}
	}
	if (status != 201) {
		refused(e, status, reply, "attach the namespace");
		json_decref(reply);
		return -1;
	}
	res = cni_result(req, reply, e);
	json_decref(reply);
	if (res == NULL)
		return -1;
	emit(res);
	return 0;
}

static int
cmd_del(const struct cni_req *req, struct cni_err *e)
{
	json_t *reply = NULL;
	char path[64];
	long status;

	snprintf(path, sizeof(path), "/v1/sandboxes/%s", req->id);
	if (ask("DELETE", path, NULL, &status, &reply, e) == -1)
		return -1;
	/* Gone already is done: DEL may come twice, or after a failed ADD. */
	if (status != 200 && status != 404) {
		refused(e, status, reply, "remove the sandbox");
		json_decref(reply);
		return -1;
	}
	json_decref(reply);
	return 0;
}

static int
cmd_check(const struct cni_req *req, struct cni_err *e)
{
	json_t *sb = NULL, *ips, *ip;
	const char *addr;
	char want[32];
	size_t i;
	int r, found = 0;

	if ((r = get_sandbox(req, &sb, e)) == -1)
		return -1;
	if (r == 0)
		return set_err(e, CNI_E_UNKNOWN, "no sandbox for this container",
		    req->id);
	if (!same_netns(sb, req->netns)) {
		json_decref(sb);
		return set_err(e, CNI_E_UNKNOWN, "the sandbox is not attached "
		    "to CNI_NETNS", req->netns);
	}
	addr = json_string_value(json_object_get(sb, "address"));
	snprintf(want, sizeof(want), "%s/30", addr != NULL ? addr : "?");
	ips = json_object_get(req->prev, "ips");
	json_array_foreach(ips, i, ip)
		if (json_is_string(json_object_get(ip, "address")) &&
		    strcmp(json_string_value(json_object_get(ip, "address")),
		    want) == 0)
			found = 1;
	json_decref(sb);
	if (!found)
		return set_err(e, CNI_E_CONFIG, "prevResult does not list the "
		    "sandbox's address", want);
	return 0;
}

static int
cmd_status(struct cni_err *e)
{
	json_t *reply = NULL;
	long status;

	if (ask("GET", "/v1/status", NULL, &status, &reply, e) == -1) {
		e->code = CNI_E_STATUS;
		return -1;
	}
	json_decref(reply);
	if (status != 200)
		return set_err(e, CNI_E_STATUS, "sluiced is not ready", NULL);
	return 0;
}

/* Is sandbox id one of the attachments the runtime says are valid? */
static int
valid_attachment(json_t *valid, const char *id)
{
	const char *cid, *ifn;
	char want[33];
	json_t *a;
	size_t i;

	json_array_foreach(valid, i, a) {
		cid = json_string_value(json_object_get(a, "containerID"));
		ifn = json_string_value(json_object_get(a, "ifname"));
		if (cid == NULL || ifn == NULL)
			continue;
		cni_sandbox_id(cid, ifn, want);
		if (strcmp(want, id) == 0)
			return 1;
	}
	return 0;
}

/* GC (1.1): removes this network's sandboxes that no valid attachment
 * names. Without the list nothing is removed. */
static int
cmd_gc(const struct cni_req *req, struct cni_err *e)
{
	json_t *valid = json_object_get(req->conf, "cni.dev/valid-attachments"),
	    *reply = NULL, *sb, *del;
	const char *id, *net;
	char path[64];
	long status;
	size_t i;

	if (!json_is_array(valid))
		return 0;
	if (ask("GET", "/v1/sandboxes", NULL, &status, &reply, e) == -1)
		return -1;
	if (status != 200) {
		refused(e, status, reply, "list the sandboxes");
		json_decref(reply);
		return -1;
	}
	json_array_foreach(json_object_get(reply, "sandboxes"), i, sb) {
		id = json_string_value(json_object_get(sb, "id"));
		net = json_string_value(json_object_get(json_object_get(sb,
		    "labels"), "cni_network"));
		if (id == NULL || net == NULL || strcmp(net, req->name) != 0 ||
		    strncmp(id, "cni-", 4) != 0 || valid_attachment(valid, id))
			continue;
		snprintf(path, sizeof(path), "/v1/sandboxes/%.40s", id);
		del = NULL;
		if (ask("DELETE", path, NULL, &status, &del, e) == 0)
			json_decref(del);
	}
	json_decref(reply);
	return 0;
}

/* stdin, at most CNI_CONF_MAX + 1 bytes (one more says "too long"). */
static char *
read_stdin(size_t *len)
{
	size_t cap = 4096, n = 0;
	ssize_t got;
	char *b = malloc(cap), *nb;

	if (b == NULL)
		return NULL;
	for (;;) {
		if (n == cap) {
			if (cap > CNI_CONF_MAX)
				break;
			cap *= 2;
			if ((nb = realloc(b, cap)) == NULL) {
				free(b);
				return NULL;
			}
			b = nb;
		}
		got = read(STDIN_FILENO, b + n, cap - n);
		if (got == -1 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		n += (size_t)got;
	}
	*len = n;
	return b;
}

int
main(void)
{
	struct cni_env env = {
		getenv("CNI_COMMAND"), getenv("CNI_CONTAINERID"),
		getenv("CNI_NETNS"), getenv("CNI_IFNAME"), getenv("CNI_ARGS"),
		getenv("CNI_PATH"),
	};
	struct cni_req req;
	struct cni_err e;
	char *buf = NULL;
	size_t len = 0;
	int rc;

	if (cni_cmd_parse(env.command) != CNI_CMD_VERSION &&
	    (buf = read_stdin(&len)) == NULL) {
		memset(&e, 0, sizeof(e));
		set_err(&e, CNI_E_IO, "cannot read the network config", NULL);
		return error_out(NULL, &e);
	}
	rc = cni_parse(&env, buf != NULL ? buf : "", len, &req, &e);
	free(buf);
	if (rc == -1) {
		rc = error_out(req.version, &e);
		cni_req_clear(&req);
		return rc;
	}
	if (req.cmd == CNI_CMD_VERSION) {
		emit(json_pack("{s:s, s:[s, s]}", "cniVersion",
		    CNI_DEFAULT_VERSION, "supportedVersions", "1.0.0", "1.1.0"));
		return 0;
	}
	cli_set_socket(req.socket);
	switch (req.cmd) {
	case CNI_CMD_ADD: rc = cmd_add(&req, &e); break;
	case CNI_CMD_DEL: rc = cmd_del(&req, &e); break;
	case CNI_CMD_CHECK: rc = cmd_check(&req, &e); break;
	case CNI_CMD_STATUS: rc = cmd_status(&e); break;
	case CNI_CMD_GC: rc = cmd_gc(&req, &e); break;
	default: rc = set_err(&e, CNI_E_ENV, "CNI_COMMAND", NULL); break;
	}
	rc = rc == -1 ? error_out(req.version, &e) : 0;
	cni_req_clear(&req);
	return rc;
}
