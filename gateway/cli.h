/*
 * cli: the subcommands of `sluice`, one function per command group, so each
 * group lives in its own file and gateway/sluice.c only dispatches.
 * Every function gets argv starting at the group's own name (argv[0] is
 * "policy", "audit", ...) and returns the process exit status: 0 success,
 * 1 failure or denial, 2 usage error (DESIGN §8).
 */
#ifndef SLUICE_GATEWAY_CLI_H
#define SLUICE_GATEWAY_CLI_H

/* gateway/cli_policy.c: policy check FILE... | policy explain ... */
int	cli_policy(int argc, char **argv);
/* gateway/cli_audit.c: audit verify|tail|keygen|proof ... */
int	cli_audit(int argc, char **argv);

#endif /* SLUICE_GATEWAY_CLI_H */
