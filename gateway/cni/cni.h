/*
 * cni: build/sluice-cni, a CNI plugin (container network interface, spec
 * 1.0 and 1.1) that puts a pod's network namespace behind Sluice. The
 * runtime (containerd, CRI-O, a Kubernetes node) runs it with the command
 * and the container in environment variables and the network config on
 * stdin; the plugin asks sluiced, over its control socket, to attach the
 * namespace (CNI_NETNS) as a sandbox with a policy, and prints the CNI
 * result (the interface and its address) or a CNI error.
 *
 * It is a binary of its own, with its own link set (gateway/cni/ and the
 * CLI's HTTP client, gateway/cli/cli_http.c): the runtime runs it as
 * root, on untrusted input (pod names and annotations reach CNI_ARGS), so
 * it carries nothing of the daemon. The parser (cni_conf.c) is pure, for
 * the unit tests and the fuzz target; cni_main.c is the part that talks.
 */
#ifndef SLUICE_GATEWAY_CNI_CNI_H
#define SLUICE_GATEWAY_CNI_CNI_H

#include <stddef.h>

#include <jansson.h>

#define CNI_CONF_MAX		(1024 * 1024)	/* bytes of stdin read */
#define CNI_ARGS_MAX		4096		/* bytes of CNI_ARGS */
#define CNI_DEFAULT_SOCKET	"/run/sluice/sluice.sock"
#define CNI_DEFAULT_VERSION	"1.1.0"

/* The commands of the spec. */
enum cni_cmd {
	CNI_CMD_NONE = 0,
	CNI_CMD_ADD,
	CNI_CMD_DEL,
	CNI_CMD_CHECK,
	CNI_CMD_VERSION,
	CNI_CMD_STATUS,		/* 1.1 */
	CNI_CMD_GC,		/* 1.1 */
};

/* The error codes of the spec (section "Error"); 100 and above are the
 * plugin's own. */
enum cni_code {
	CNI_OK = 0,
	CNI_E_VERSION = 1,	/* incompatible CNI version */
	CNI_E_FIELD = 2,	/* unsupported field in the network config */
	CNI_E_UNKNOWN = 3,	/* container unknown or does not exist */
	CNI_E_ENV = 4,		/* invalid necessary environment variables */
	CNI_E_IO = 5,		/* I/O failure */
	CNI_E_DECODE = 6,	/* failed to decode content */
	CNI_E_CONFIG = 7,	/* invalid network config */
	CNI_E_AGAIN = 11,	/* try again later */
	CNI_E_STATUS = 50,	/* the plugin is not available */
	CNI_E_REFUSED = 100,	/* sluiced refused the sandbox */
};

/* What the runtime put in the environment (NULL: not set). */
struct cni_env {
	const char	*command, *containerid, *netns, *ifname, *args, *path;
};

/* A request, checked: everything the plugin needs, flat, plus the parsed
 * config (conf, a new reference; prev borrowed from it). */
struct cni_req {
	enum cni_cmd	 cmd;
	char		 version[16];		/* the config's cniVersion */
	char		 name[128];		/* the network's name */
	char		 containerid[128];
	char		 netns[128];		/* CNI_NETNS */
	char		 ifname[16];
	char		 policy[65];
	char		 subject[129];
	char		 socket[108];
	char		 id[33];		/* the sandbox's, from the container */
	char		 pod_ns[64], pod_name[254];
	json_t		*conf;
	json_t		*prev;			/* prevResult, or NULL */
};

/* A failure: a CNI error code and its message and details. */
struct cni_err {
	enum cni_code	code;
	char		msg[256];
	char		details[512];
};

/* cni_cmd_parse: the command named s ("ADD", ...), CNI_CMD_NONE for
 * anything else (NULL too). */
enum cni_cmd	cni_cmd_parse(const char *s);

/* cni_version_ok: 1 if v is a version this plugin speaks (1.0.0, 1.1.0). */
int		cni_version_ok(const char *v);

/*
 * cni_parse: the request of env and the network config buf (len bytes,
 * not necessarily terminated), checked, into *req, which the caller
 * releases with cni_req_clear. VERSION needs no config. -1 with *e set:
 * CNI_E_ENV (a variable missing or malformed), CNI_E_DECODE (not JSON,
 * more than CNI_CONF_MAX bytes), CNI_E_VERSION, CNI_E_CONFIG (a field of
 * the wrong type or value; no policy named anywhere for ADD). The policy
 * is CNI_ARGS SLUICE_POLICY, else the config's args.cni["sluice.policy"]
 * (where runtimes put pod annotations), else its "policy". Never reads
 * the environment itself.
 */
int		cni_parse(const struct cni_env *env, const char *buf,
		    size_t len, struct cni_req *req, struct cni_err *e);

/* cni_req_clear: releases what cni_parse took; NULL is a no-op. */
void		cni_req_clear(struct cni_req *req);

/* cni_sandbox_id: the sandbox id of a container and interface, the same
 * for ADD, CHECK and DEL: "cni-" and 16 hex digits of a hash of both
 * (container ids are 64 characters, sandbox ids at most 32). */
void		cni_sandbox_id(const char *containerid, const char *ifname,
		    char out[33]);

/* cni_error_json: the CNI error object for e in version v. New
 * reference, NULL without memory. */
json_t		*cni_error_json(const char *v, const struct cni_err *e);

/*
 * cni_result: the CNI result of an attached sandbox (the daemon's JSON,
 * borrowed) for req: the host link and eth0 (in req->netns) as
 * interfaces, eth0's address with the host side as gateway, the default
 * route and the sandbox's DNS server; merged after req->prev's
 * interfaces and IPs when chained. New reference, or NULL with *e.
 */
json_t		*cni_result(const struct cni_req *req, json_t *sandbox,
		    struct cni_err *e);

#endif /* SLUICE_GATEWAY_CNI_CNI_H */
