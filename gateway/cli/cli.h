/*
 * cli: the subcommands of `sluice`, one function per command group, so each
 * group lives in its own file and gateway/cli/sluice.c only dispatches.
 * Every function gets argv starting at the group's own name (argv[0] is
 * "policy", "audit", ...) and returns the process exit status: 0 success,
 * 1 failure or denial, 2 usage error (DESIGN §8).
 */
#ifndef SLUICE_GATEWAY_CLI_CLI_H
#define SLUICE_GATEWAY_CLI_CLI_H

#include <sys/types.h>

#include <stddef.h>

#include <jansson.h>

/* cli_usage: the usage of command `name` ("audit", "exec", ...) on stderr,
 * from gateway/cli/sluice.c, where the usage text of every command lives;
 * returns 2, the exit status of a usage error, for `return cli_usage(..)`.
 * A --help never reaches a command: sluice.c answers it first. */
int	cli_usage(const char *name);

/* gateway/cli/cli_policy.c: policy check FILE... | policy explain ... */
int	cli_policy(int argc, char **argv);
/* gateway/cli/cli_audit.c: audit verify|tail|keygen|proof ... */
int	cli_audit(int argc, char **argv);

/* gateway/cli/cli_fleet.c: fleet migrate CONNINFO (the shared schema). */
int	cli_fleet(int argc, char **argv);

/* gateway/cli/cli_sandbox.c: sandbox create|ls|show|rm, exec ID -- CMD,
 * run --policy P ... -- CMD (exit status of CMD). */
int	cli_sandbox(int argc, char **argv);
int	cli_exec(int argc, char **argv);
int	cli_run(int argc, char **argv);

/* gateway/cli/cli_daemon.c: status [--json] | reload (talk to sluiced). */
int	cli_status(int argc, char **argv);
int	cli_reload(int argc, char **argv);

/* gateway/cli/cli_mcp.c: approvals [--json] | approve ID [--reason R] |
 * deny ID [--reason R] (cli_approve tells the two by argv[0]) |
 * mcp pins SERVER | mcp accept SERVER TOOL. */
int	cli_approvals(int argc, char **argv);
int	cli_approve(int argc, char **argv);
int	cli_mcp(int argc, char **argv);

/* gateway/cli/cli_http.c: HTTP + JSON to sluiced's control socket, shared by
 * every command that talks to the daemon. */
#define CLI_DEFAULT_SOCKET	"/run/sluice/sluice.sock"
/* The audit log the offline `audit` commands read without --db and
 * $SLUICE_AUDIT_DB (gateway/cli/cli_audit.c). */
#define CLI_DEFAULT_AUDIT_DB	"/var/lib/sluice/audit.db"

/* cli_set_socket: the control socket for following requests (sluice.c sets
 * it from -s, SLUICE_SOCKET or CLI_DEFAULT_SOCKET). The string is
 * borrowed and must outlive the requests. */
void		 cli_set_socket(const char *path);
const char	*cli_socket(void);
/* cli_request: method path on the daemon, with body (borrowed, NULL for
 * none) sent as application/json. On 0, *status is the HTTP status and
 * *reply the parsed JSON reply (a new reference; NULL if the reply was not
 * JSON, e.g. /metrics — then *text, if not NULL, gets the raw reply, which
 * the caller frees). -1 when the daemon cannot be reached or answers
 * garbage, with a message in err. */
int		 cli_request(const char *method, const char *path,
		    json_t *body, long *status, json_t **reply, char **text,
		    char *err, size_t errlen);

/* gateway/cli/cli_limits.c: the sandbox's resources as exec and run keep
 * them: its cgroups joined by the command, its timeout kept by the CLI. */
#define CLI_CGROUPS_MAX	3
struct cli_limits {
	size_t		ncgroups;
	char		cgroup[CLI_CGROUPS_MAX][512];
	unsigned long	timeout_s;	/* 0: none */
};
/* cli_limits_parse: the "limits" member of an exec reply for sandbox id
 * into *out. Only directories under /sys/fs/cgroup/ that end in
 * /sluice-<8 hex digits>/<id>, without "." or ".." components, are taken: the daemon
 * names where the command goes, never what it may write elsewhere. An
 * absent member is no limits. 0, or -1 for a reply of another shape. */
int	cli_limits_parse(const json_t *reply, const char *id,
	    struct cli_limits *out);
/* cli_limits_join: the calling process into each group. 0, or -1 with
 * err. */
int	cli_limits_join(const struct cli_limits *l, char *err, size_t errlen);
/* cli_limits_wait: waits for child pid (its status in *st, as waitpid),
 * and past l's timeout kills it and everything in its groups; *timed_out
 * says so. Signals arriving meanwhile interrupt nothing but the wait,
 * which goes on. */
void	cli_limits_wait(pid_t pid, const struct cli_limits *l, int *st,
	    int *timed_out);

#endif /* SLUICE_GATEWAY_CLI_CLI_H */
