/*
 * pchild.c: a child's command line (see pchild.h). Strict: a child
 * started with anything else than what proc.c passes is not one of ours.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>

#include "gateway/log.h"
#include "gateway/privsep/pchild.h"

static int
parse_id(const char *s, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	return errno != 0 || end == s || *end != '\0' || *out == 0 ||
	    *out > 0x7fffffffUL ? -1 : 0;
}

int
pchild_start(int argc, char **argv, const char *role, uid_t *uid, gid_t *gid)
{
	static const struct option opts[] = {
		{ "room", required_argument, NULL, 'r' },
		{ "uid", required_argument, NULL, 'u' },
		{ "gid", required_argument, NULL, 'g' },
		{ "foreground", no_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 }
	};
	unsigned long u = 0, g = 0;
	int c, foreground = 0, verbose = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:u:g:dv", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			break;
		case 'u':
			if (parse_id(optarg, &u) == -1)
				return 2;
			break;
		case 'g':
			if (parse_id(optarg, &g) == -1)
				return 2;
			break;
		case 'd':
			foreground = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			return 2;
		}
	}
	log_init(foreground, "sluiced");
	log_setverbose(verbose);
	log_procinit(role);
	if (u == 0 || g == 0) {
		log_warnx("--uid and --gid are required and not 0");
		return 2;
	}
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}
