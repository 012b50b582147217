/*
 * pchild: the start every child of sluiced shares. The parent execs
 * `sluiced --room ROOM --uid U --gid G [--foreground] [--verbose]`
 * (gateway/privsep/proc.c); each child reads those the same way and logs
 * under its room's name.
 */
#ifndef SLUICE_GATEWAY_PRIVSEP_PCHILD_H
#define SLUICE_GATEWAY_PRIVSEP_PCHILD_H

#include <sys/types.h>

/*
 * pchild_start: parses argv as above, starts the log (foreground or
 * syslog, verbose or not, tagged role), and gives the uid and gid the
 * child will drop to. 0, or 2 (a usage error: a missing, malformed or
 * zero uid or gid, an unknown option), the child's exit status then.
 */
int	pchild_start(int argc, char **argv, const char *role, uid_t *uid,
	    gid_t *gid);

#endif /* SLUICE_GATEWAY_PRIVSEP_PCHILD_H */
