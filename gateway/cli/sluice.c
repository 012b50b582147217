/*
 * sluice.c: main() of the CLI. It only parses the global options, picks the
 * control socket and hands argv to the command group's function (cli.h), so
 * each group lives in its own file and the usage text of the whole CLI
 * stays in one place. Exit status: 0 success, 1 failure or denial, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/cli/cli.h"

static const char usage_text[] =
"usage: sluice [-s SOCKET] COMMAND [ARGS]\n"
"\n"
"  policy check FILE...                       validate; errors as FILE:LINE:COL: message\n"
"  policy explain FILE (--egress HOST:PORT[/PROTO] | --tool SERVER/TOOL --args JSON)\n"
"                 [--subject S]\n"
"  sandbox create --policy NAME [--subject S] [--id ID] [--label K=V]... [--ttl DUR]\n"
"  sandbox ls [--json] | sandbox show ID | sandbox rm ID\n"
"  exec [--user U[:G]] [--net-raw] ID -- CMD...\n"
"                                             run CMD inside the sandbox\n"
"  run --policy NAME [--subject S] [--user U[:G]] [--net-raw] -- CMD...\n"
"                                             create, exec, remove; exit status of CMD\n"
"  approvals [--json]                         tool calls waiting for a person\n"
"  approve ID [--reason R] | deny ID [--reason R]\n"
"  mcp pins SERVER                            tool pins as a policy snippet\n"
"  mcp accept SERVER TOOL                     accept a changed tool definition\n"
"  audit verify [--db F] [--key PUB] [--checkpoint F]... [--json]\n"
"  audit tail [-f] [--format json|ocsf] [--sandbox ID] [--kind K]\n"
"  audit keygen --origin O\n"
"  status [--json]                            the daemon's state\n"
"  reload                                     reload the daemon's policies\n"
"\n"
"  -s SOCKET  the daemon's control socket (default: $SLUICE_SOCKET, else\n"
"             " CLI_DEFAULT_SOCKET ")\n"
"\n"
"  exec and run start CMD with no capabilities (empty bounding set, locked\n"
"  securebits, no_new_privs), unable to trace or signal processes outside it.\n"
"  --user U[:G]  run as user U (name or number) and group G; use it for\n"
"                untrusted code: uid 0 without capabilities still owns\n"
"                root's files\n"
"  --net-raw     keep CAP_NET_RAW and CAP_NET_BIND_SERVICE, which act only\n"
"                on the sandbox's own network namespace\n"
"\n"
"Exit status: 0 success, 1 failure or denial, 2 usage error.\n";

static int
usage(FILE *fp, int status)
{
	fputs(usage_text, fp);
	return status;
}

struct cmd {
	const char	*name;
	int		(*fn)(int, char **);
};

int
main(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{ "policy",	cli_policy },
		{ "audit",	cli_audit },
		{ "status",	cli_status },
		{ "reload",	cli_reload },
		{ "sandbox",	cli_sandbox },
		{ "exec",	cli_exec },
		{ "run",	cli_run },
		{ "approvals",	cli_approvals },
		{ "approve",	cli_approve },
		{ "deny",	cli_approve },
		{ "mcp",	cli_mcp },
	};
	const char *sock;
	size_t i;
	int ch;

	sock = getenv("SLUICE_SOCKET");
	if (sock == NULL || *sock == '\0')
		sock = CLI_DEFAULT_SOCKET;
	/* '+': options after the command belong to the command. */
	while ((ch = getopt(argc, argv, "+hs:")) != -1) {
		switch (ch) {
		case 's':
			if (*optarg == '\0')
				return usage(stderr, 2);
			sock = optarg;
			break;
		case 'h':
			return usage(stdout, 0);
		default:
			return usage(stderr, 2);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0)
		return usage(stderr, 2);
	if (strcmp(argv[0], "help") == 0)
		return usage(stdout, 0);
	cli_set_socket(sock);
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[0], cmds[i].name) == 0) {
			/* Each group parses its own options from index 1;
			 * 0 makes glibc forget the '+' (stop at the first
			 * operand) of our own option string as well. */
			optind = 0;
			return cmds[i].fn(argc, argv);
		}
	}
	fprintf(stderr, "sluice: unknown command '%s'\n", argv[0]);
	return usage(stderr, 2);
}
