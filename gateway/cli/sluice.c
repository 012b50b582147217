/*
 * sluice.c: main() of the CLI. It only parses the global options, picks the
 * control socket and hands argv to the command group's function (cli.h), so
 * each group lives in its own file. The usage text of the whole CLI is the
 * table below, one entry per command: `sluice --help` prints every entry,
 * `sluice COMMAND --help` and a usage error print the command's own, so the
 * overview cannot leave out a command the CLI has, nor disagree with it.
 * Exit status: 0 success, 1 failure or denial, 2 usage.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/cli/cli.h"

/* What exec and run do to the command; in both their help and the
 * overview, since it is what a reader must know before running code. */
#define EXEC_NOTES \
"exec and run start CMD with no capabilities (empty bounding set, locked\n" \
"securebits, no_new_privs), unable to trace or signal processes outside it.\n" \
"  --user U[:G]  run as user U (name or number) and group G; use it for\n" \
"                untrusted code: uid 0 without capabilities still owns\n" \
"                root's files\n" \
"  --net-raw     keep CAP_NET_RAW and CAP_NET_BIND_SERVICE, which act only\n" \
"                on the sandbox's own network namespace\n" \
"CMD joins the sandbox's cgroup (its policy's resources: pids, memory,\n" \
"cpu). Past resources.timeout it, and all in that cgroup, is killed and\n" \
"the exit status is 124.\n"

/*
 * One command: its synopsis (lines without the leading "sluice"; a line
 * that starts with a space continues the one before), whether it talks to
 * the daemon (then its usage shows -s SOCKET), and notes for its --help.
 */
struct cmd {
	const char	*name;
	int		(*fn)(int, char **);
	bool		 daemon;
	const char	*synopsis;
	const char	*notes;
};

static const struct cmd cmds[] = {
	{ "policy", cli_policy, false,
	  "policy check [--config CFG] FILE...\n"
	  "policy explain FILE (--egress HOST:PORT[/PROTO] |\n"
	  "  --tool SERVER/TOOL --args JSON) [--subject S] [--label K=V]...\n"
	  "  [--pin sha256:HEX] [--tainted] [--config CFG]\n",
	  "check validates each FILE against the schema and prints its errors\n"
	  "as FILE:LINE:COL: message; explain prints what the policy decides\n"
	  "for one egress or one tool call, and which rule decides it.\n"
	  "CFG is the daemon's configuration (its limits and MCP servers).\n"
	  "check without --config uses /etc/sluice/sluice.yaml if it exists,\n"
	  "so a tool naming a server the daemon does not declare is an error;\n"
	  "it says on its first line which config, if any, it checked against.\n" },
	{ "audit", cli_audit, false,
	  "audit verify [--db F] [--key PUB]... [--checkpoint F]...\n"
	  "  [--witness CONNINFO [--host NAME]] [--json]\n"
	  "audit keygen --origin O --out FILE\n"
	  "audit checkpoint [--db F] [--out FILE]\n"
	  "audit proof [--db F] --seq N [--out FILE]\n"
	  "audit check-proof --key PUB FILE\n"
	  "audit tail [-f] [--db F] [--format json|ocsf] [--sandbox ID]\n"
	  "  [--kind K] [-n N]\n",
	  "All of them work offline on the log or on files a reviewer was\n"
	  "handed. The database defaults to $SLUICE_AUDIT_DB, else\n"
	  CLI_DEFAULT_AUDIT_DB ". PUB is a verifier key (name+id+key) or a\n"
	  "file holding one.\n"
	  "--witness takes the checkpoints a fleet's PostgreSQL database holds\n"
	  "for host NAME (default: this host's name) as external checkpoints;\n"
	  "the password comes from $SLUICE_PG_PASSWORD or libpq's own sources.\n"
	  "keygen writes the new signing key to FILE only, a new file of mode\n"
	  "0600 (an existing FILE is never overwritten), and prints its\n"
	  "verifier key (PUB) on stdout.\n"
	  "checkpoint and proof write to FILE, or to stdout without --out.\n"
	  "Exit status of verify: 0 verified, 1 tampered, 2 usage or I/O\n"
	  "error, 3 verified with warnings.\n" },
	{ "fleet", cli_fleet, false,
	  "fleet migrate CONNINFO\n",
	  "Creates the fleet database's schema, or brings it up to this\n"
	  "version, as the role CONNINFO names (the schema's owner; the\n"
	  "password from $SLUICE_PG_PASSWORD or libpq's own sources). A\n"
	  "daemon whose role may not migrate refuses to start until this ran.\n" },
	{ "sandbox", cli_sandbox, true,
	  "sandbox create --policy NAME [--subject S] [--id ID]\n"
	  "  [--label K=V]... [--ttl DUR] [--attach NETNS | --attach-pid PID]\n"
	  "sandbox ls [--json]\n"
	  "sandbox show ID\n"
	  "sandbox rm ID\n",
	  "The subject defaults to the login name (through sudo, the user\n"
	  "behind it). DUR is N[s|m|h|d], at most 30d; without --ttl the\n"
	  "daemon's default applies.\n"
	  "--attach wires an existing network namespace (a path such as\n"
	  "/run/docker/netns/X or /proc/PID/ns/net; --attach-pid PID is the\n"
	  "latter) instead of making one: it must have no interface but lo.\n"
	  "rm then removes only what Sluice added; the namespace and its\n"
	  "processes stay.\n" },
	{ "exec", cli_exec, true,
	  "exec [--user U[:G]] [--net-raw] ID -- CMD [ARG...]\n",
	  "Runs CMD inside sandbox ID, as a child of this shell: its exit\n"
	  "status is CMD's.\n" EXEC_NOTES },
	{ "run", cli_run, true,
	  "run --policy NAME [--subject S] [--label K=V]...\n"
	  "  [--ttl DUR] [--user U[:G]] [--net-raw]\n"
	  "  -- CMD [ARG...]\n",
	  "Creates a sandbox, runs CMD inside it, removes it: the exit status\n"
	  "is CMD's.\n" EXEC_NOTES },
	{ "approvals", cli_approvals, true,
	  "approvals [--json]\n",
	  "The tool calls waiting for a person, with the arguments the sandbox\n"
	  "sent.\n" },
	{ "approve", cli_approve, true,
	  "approve ID [--reason R]\n",
	  "Lets the waiting tool call ID go ahead; the record names the caller.\n" },
	{ "deny", cli_approve, true,
	  "deny ID [--reason R]\n",
	  "Refuses the waiting tool call ID; the record names the caller.\n" },
	{ "mcp", cli_mcp, true,
	  "mcp pins SERVER\n"
	  "mcp accept SERVER TOOL\n",
	  "pins prints the current tool definitions of SERVER as a policy\n"
	  "snippet; accept accepts a changed definition of TOOL.\n" },
	{ "status", cli_status, true,
	  "status [--json]\n",
	  "The daemon's state.\n" },
	{ "reload", cli_reload, true,
	  "reload\n",
	  "Reloads the daemon's policies.\n" },
};

static const struct cmd *
cmd_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(name, cmds[i].name) == 0)
			return &cmds[i];
	return NULL;
}

/* The synopsis of c, a line at a time: the first after lead, the next
 * ones after cont; each after prog ("" in the overview), continuations
 * indented under it. */
static void
synopsis(FILE *fp, const struct cmd *c, const char *lead, const char *cont,
    const char *prog)
{
	const char *s = c->synopsis, *nl;
	bool first = true;

	for (; *s != '\0'; s = nl + 1) {
		nl = strchr(s, '\n');
		if (*s == ' ')
			fprintf(fp, "%s%*s%.*s\n", cont, (int)strlen(prog), "",
			    (int)(nl - s), s);
		else
			fprintf(fp, "%s%s%.*s\n", first ? lead : cont, prog,
			    (int)(nl - s), s);
		first = false;
	}
}

static void
cmd_usage(FILE *fp, const struct cmd *c)
{
	synopsis(fp, c, "usage: ", "       ",
	    c->daemon ? "sluice [-s SOCKET] " : "sluice ");
	fprintf(fp, "\n%s", c->notes);
}

int
cli_usage(const char *name)
{
	const struct cmd *c = cmd_find(name);

	if (c != NULL)
		cmd_usage(stderr, c);
	return 2;
}

static int
usage(FILE *fp, int status)
{
	size_t i;

	fputs("usage: sluice [-s SOCKET] COMMAND [ARGS]\n"
	    "       sluice COMMAND --help | sluice help [COMMAND]\n"
	    "\n", fp);
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		synopsis(fp, &cmds[i], "  ", "  ", "");
	fputs("\n"
	    "  -s SOCKET  the daemon's control socket (default: $SLUICE_SOCKET, "
	    "else\n"
	    "             " CLI_DEFAULT_SOCKET ")\n"
	    "\n" EXEC_NOTES
	    "\n"
	    "Exit status: 0 success, 1 failure or denial, 2 usage error.\n", fp);
	return status;
}

/* A request for help among a command's arguments: -h or --help before the
 * first "--" (after it, the arguments are CMD's). It wins over the rest,
 * so a --help is never taken as a file, an id or a value. */
static bool
help_asked(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "-h") == 0 ||
		    strcmp(argv[i], "--help") == 0)
			return true;
	return false;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help",	no_argument,		NULL, 'h' },
		{ NULL,		0,			NULL, 0 }
	};
	const struct cmd *c;
	const char *sock;
	int ch;

	sock = getenv("SLUICE_SOCKET");
	if (sock == NULL || *sock == '\0')
		sock = CLI_DEFAULT_SOCKET;
	/* '+': options after the command belong to the command. */
	while ((ch = getopt_long(argc, argv, "+hs:", longopts, NULL)) != -1) {
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
	if (strcmp(argv[0], "help") == 0) {
		if (argc == 1)
			return usage(stdout, 0);
		if (argc > 2)
			return usage(stderr, 2);
		if ((c = cmd_find(argv[1])) == NULL) {
			fprintf(stderr, "sluice: help: unknown command '%s'\n",
			    argv[1]);
			return usage(stderr, 2);
		}
		cmd_usage(stdout, c);
		return 0;
	}
	if ((c = cmd_find(argv[0])) == NULL) {
		fprintf(stderr, "sluice: unknown command '%s'\n", argv[0]);
		return usage(stderr, 2);
	}
	if (help_asked(argc, argv)) {
		cmd_usage(stdout, c);
		return 0;
	}
	cli_set_socket(sock);
	/* Each group parses its own options from index 1; 0 makes glibc
	 * forget the '+' (stop at the first operand) of our own option
	 * string as well. */
	optind = 0;
	return c->fn(argc, argv);
}
