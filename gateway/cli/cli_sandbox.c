/*
 * cli_sandbox.c: `sluice sandbox create|ls|show|rm`, `sluice exec` and
 * `sluice run`, the commands that make, enter and remove sandboxes. The
 * daemon does the privileged work of making a sandbox; entering one is done
 * here, in the CLI's own process, so the command runs as a child of the
 * user's shell (its exit status, signals and terminal are the user's)
 * rather than of the daemon.
 */
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/securebits.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/cli/cli.h"
#include "netns/netns.h"

/* The bridge token of a sandbox, as the daemon hands it to exec: 32 random
 * bytes in hex. The CLI does not link the sandbox manager, so the length is
 * restated here; a daemon that changed it would make exec refuse the reply
 * ("unexpected reply"), never pass on a token of another shape. */
#define TOKEN_HEX	64

static int
usage_sandbox(void)
{
	return cli_usage("sandbox");
}

static int
usage_exec(void)
{
	return cli_usage("exec");
}

static int
usage_run(void)
{
	return cli_usage("run");
}

/* How the command runs once inside: which uid and gids, and whether it
 * keeps the capabilities that act only on its own network namespace. */
struct exec_opts {
	int	 set_user;		/* --user given */
	uid_t	 uid;
	gid_t	 gid;
	gid_t	 groups[64];		/* supplementary groups of USER */
	int	 ngroups;
	int	 net_raw;		/* --net-raw */
};

static int
parse_id(const char *s, unsigned long *v)
{
	char *end;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	*v = strtoul(s, &end, 10);
	return errno != 0 || *end != '\0' || *v >= (unsigned long)UINT32_MAX ?
	    -1 : 0;
}

/* --user USER[:GROUP], names or numbers: the uid, the gid (GROUP, else
 * USER's primary group, else the number of USER) and, for a USER the
 * host knows, its supplementary groups. -1 after printing why. */
static int
parse_user(const char *arg, struct exec_opts *xo)
{
	char buf[256], gbuf[4096];
	struct passwd pwd, *pw = NULL;
	struct group grp, *gr = NULL;
	const char *gname = NULL;
	unsigned long v;
	char *colon;
	int n;

	if (snprintf(buf, sizeof(buf), "%s", arg) >= (int)sizeof(buf) ||
	    *buf == '\0')
		goto bad;
	if ((colon = strchr(buf, ':')) != NULL) {
		*colon = '\0';
		gname = colon + 1;
		if (*gname == '\0' || *buf == '\0')
			goto bad;
	}
	if (parse_id(buf, &v) == 0) {
		xo->uid = (uid_t)v;
		(void)getpwuid_r(xo->uid, &pwd, gbuf, sizeof(gbuf), &pw);
	} else {
		if (getpwnam_r(buf, &pwd, gbuf, sizeof(gbuf), &pw) != 0 ||
		    pw == NULL) {
			fprintf(stderr, "sluice: --user: no user '%s'\n", buf);
			return -1;
		}
		xo->uid = pw->pw_uid;
	}
	xo->gid = pw != NULL ? pw->pw_gid : (gid_t)xo->uid;
	xo->ngroups = 0;
	if (pw != NULL) {
		n = (int)(sizeof(xo->groups) / sizeof(xo->groups[0]));
		if (getgrouplist(pw->pw_name, pw->pw_gid, xo->groups, &n) == -1) {
			fprintf(stderr, "sluice: --user: %s is in too many "
			    "groups\n", pw->pw_name);
			return -1;
		}
		xo->ngroups = n;
	}
	if (gname != NULL) {
		if (parse_id(gname, &v) == 0)
			xo->gid = (gid_t)v;
		else if (getgrnam_r(gname, &grp, gbuf, sizeof(gbuf), &gr) !=
		    0 || gr == NULL) {
			fprintf(stderr, "sluice: --user: no group '%s'\n",
			    gname);
			return -1;
		} else
			xo->gid = gr->gr_gid;
		/* An explicit group is the only one. */
		xo->groups[0] = xo->gid;
		xo->ngroups = 1;
	}
	xo->set_user = 1;
	return 0;
bad:
	fprintf(stderr, "sluice: --user: want USER[:GROUP]\n");
	return -1;
}

/* {"error": CODE, "message": TEXT} from the daemon, for humans. */
static void
print_error_reply(const char *what, long status, json_t *reply)
{
	const char *code = json_string_value(json_object_get(reply, "error"));
	const char *msg = json_string_value(json_object_get(reply, "message"));

	fprintf(stderr, "sluice: %s: %s (%ld): %s\n", what,
	    code != NULL ? code : "error", status, msg != NULL ? msg : "");
}

/* One request; 0 with *reply when the daemon answered `want`, else 1
 * after printing why. */
static int
request(const char *what, const char *method, const char *path,
    json_t *body, long want, json_t **reply)
{
	char err[512];
	long status = 0;

	if (cli_request(method, path, body, &status, reply, NULL, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "sluice: %s: %s\n", what, err);
		return 1;
	}
	if (status != want) {
		print_error_reply(what, status, *reply);
		json_decref(*reply);
		*reply = NULL;
		return 1;
	}
	return 0;
}

static void
print_json(json_t *o)
{
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

	if (s != NULL) {
		printf("%s\n", s);
		free(s);
	}
}

/* A login name as a default subject: alphanumeric first, then the POSIX
 * portable set [A-Za-z0-9._-] and '@' (directory accounts, user@realm), at
 * most 64 characters. A strict subset of what the daemon accepts as a
 * subject, so a default never makes the create fail; a name outside it
 * falls back to the next candidate instead of being sent. */
static int
login_name_ok(const char *s)
{
	size_t i;

	if (s == NULL || !isalnum((unsigned char)s[0]))
		return 0;
	for (i = 1; s[i] != '\0'; i++)
		if (i >= 64 || !(isalnum((unsigned char)s[i]) ||
		    strchr("._@-", s[i]) != NULL))
			return 0;
	return 1;
}

/* The subject when none is given: who asked, as the login name (through
 * sudo, the user behind it). */
static const char *
default_subject(void)
{
	static char	 buf[1024];
	static struct passwd pwd;
	const char	*u = getenv("SUDO_USER");
	struct passwd	*pw = NULL;

	if (login_name_ok(u))
		return u;
	/* The reentrant form: nothing else can overwrite the result. */
	if (getpwuid_r(getuid(), &pwd, buf, sizeof(buf), &pw) == 0 &&
	    pw != NULL && login_name_ok(pw->pw_name))
		return pw->pw_name;
	return "unknown";
}

/* --attach PATH or --attach-pid PID into body (the daemon checks what
 * the path names; here its shape, and that only one is given). */
static int
attach_opt(json_t *body, int ch, const char *arg)
{
	unsigned long pid;

	if (json_object_get(body, "attach") != NULL ||
	    json_object_get(body, "attach_pid") != NULL) {
		fprintf(stderr, "sluice: give --attach or --attach-pid once\n");
		return -1;
	}
	if (ch == 'A') {
		if (arg[0] != '/') {
			fprintf(stderr, "sluice: --attach: want an absolute "
			    "path\n");
			return -1;
		}
		return json_object_set_new(body, "attach", json_string(arg));
	}
	if (parse_id(arg, &pid) == -1 || pid == 0 || pid > 4194304) {
		fprintf(stderr, "sluice: --attach-pid: want a process id\n");
		return -1;
	}
	return json_object_set_new(body, "attach_pid",
	    json_integer((json_int_t)pid));
}

/* Options shared by `sandbox create` and `run`: fills *body, and *xo
 * with the options of how the command runs (`run` only: xo NULL refuses
 * them). -1 on a usage error (message printed). */
static int
create_opts(int argc, char **argv, int allow_id, json_t *body,
    struct exec_opts *xo)
{
	static const struct option longopts[] = {
		{ "policy",	required_argument,	NULL, 'p' },
		{ "subject",	required_argument,	NULL, 'S' },
		{ "id",		required_argument,	NULL, 'i' },
		{ "label",	required_argument,	NULL, 'l' },
		{ "ttl",	required_argument,	NULL, 't' },
		{ "user",	required_argument,	NULL, 'u' },
		{ "net-raw",	no_argument,		NULL, 'N' },
		{ "attach",	required_argument,	NULL, 'A' },
		{ "attach-pid",	required_argument,	NULL, 'P' },
		{ NULL,		0,			NULL, 0 }
	};
	json_t *labels = json_object();
	const char *subject = NULL;
	char *eq;
	size_t klen;
	int ch;

	if (labels == NULL)
		return -1;
	while ((ch = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			json_object_set_new(body, "policy", json_string(optarg));
			break;
		case 'S':
			subject = optarg;
			break;
		case 'i':
			if (!allow_id)
				goto bad;
			json_object_set_new(body, "id", json_string(optarg));
			break;
		case 'l':
			/* The daemon judges keys and values; here only
			 * the shape and no key twice. */
			if ((eq = strchr(optarg, '=')) == NULL) {
				fprintf(stderr, "sluice: --label: want "
				    "KEY=VALUE\n");
				goto bad;
			}
			klen = (size_t)(eq - optarg);
			if (json_object_getn(labels, optarg, klen) != NULL) {
				fprintf(stderr, "sluice: --label %.*s given "
				    "twice\n", (int)klen, optarg);
				goto bad;
			}
			json_object_setn_new(labels, optarg, klen,
			    json_string(eq + 1));
			break;
		case 't':
			json_object_set_new(body, "ttl", json_string(optarg));
			break;
		case 'u':
			if (xo == NULL || parse_user(optarg, xo) == -1)
				goto bad;
			break;
		case 'N':
			if (xo == NULL)
				goto bad;
			xo->net_raw = 1;
			break;
		case 'A':
		case 'P':
			/* `sandbox create` only: `run` makes its own. */
			if (!allow_id || attach_opt(body, ch, optarg) == -1)
				goto bad;
			break;
		default:
			goto bad;
		}
	}
	if (json_object_get(body, "policy") == NULL) {
		fprintf(stderr, "sluice: --policy is required\n");
		goto bad;
	}
	json_object_set_new(body, "subject", json_string(subject != NULL ?
	    subject : default_subject()));
	if (json_object_size(labels) > 0)
		json_object_set(body, "labels", labels);
	json_decref(labels);
	return 0;
bad:
	json_decref(labels);
	return -1;
}

static int
sandbox_create(int argc, char **argv)
{
	json_t *body = json_object(), *reply = NULL;
	int rc;

	if (body == NULL)
		return 1;
	if (create_opts(argc, argv, 1, body, NULL) == -1 || optind != argc) {
		json_decref(body);
		return usage_sandbox();
	}
	rc = request("sandbox create", "POST", "/v1/sandboxes", body, 201,
	    &reply);
	json_decref(body);
	if (rc == 0)
		print_json(reply);
	json_decref(reply);
	return rc;
}

static const char *
jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s != NULL ? s : "-";
}

static int
sandbox_ls(int argc, char **argv)
{
	static const char *const cols[] = {
		"ID", "POLICY", "SUBJECT", "ADDRESS", "IFACE", "EXPIRES",
		"TAINTED",
	};
	enum { NCOL = sizeof(cols) / sizeof(cols[0]) };
	json_t *reply = NULL, *list, *s;
	size_t i, c, w[NCOL];
	int json = 0;

	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		json = 1;
	else if (argc != 1)
		return usage_sandbox();
	if (request("sandbox ls", "GET", "/v1/sandboxes", NULL, 200,
	    &reply) != 0)
		return 1;
	if (json) {
		print_json(reply);
		json_decref(reply);
		return 0;
	}
	list = json_object_get(reply, "sandboxes");
	for (c = 0; c < NCOL; c++)
		w[c] = strlen(cols[c]);
	/* Two passes: widths first, so the columns line up whatever the
	 * ids and subjects are. */
	json_array_foreach(list, i, s) {
		const char *v[NCOL] = {
			jstr(s, "id"), jstr(s, "policy"), jstr(s, "subject"),
			jstr(s, "address"), jstr(s, "interface"),
			jstr(s, "expires_at"),
			json_is_true(json_object_get(s, "tainted")) ? "yes" :
			"no",
		};
		for (c = 0; c < NCOL; c++)
			if (strlen(v[c]) > w[c])
				w[c] = strlen(v[c]);
	}
	for (c = 0; c < NCOL; c++)
		printf("%-*s%s", c + 1 < NCOL ? (int)w[c] : 0, cols[c],
		    c + 1 < NCOL ? "  " : "\n");
	json_array_foreach(list, i, s) {
		const char *v[NCOL] = {
			jstr(s, "id"), jstr(s, "policy"), jstr(s, "subject"),
			jstr(s, "address"), jstr(s, "interface"),
			jstr(s, "expires_at"),
			json_is_true(json_object_get(s, "tainted")) ? "yes" :
			"no",
		};
		for (c = 0; c < NCOL; c++)
			printf("%-*s%s", c + 1 < NCOL ? (int)w[c] : 0, v[c],
			    c + 1 < NCOL ? "  " : "\n");
	}
	json_decref(reply);
	return 0;
}

/* The id as a path segment: only the id syntax, so it cannot escape. */
static int
check_id(const char *id)
{
	if (!ns_id_valid(id)) {
		fprintf(stderr, "sluice: bad sandbox id '%s' (want "
		    "[a-z0-9][a-z0-9-]{0,31})\n", id);
		return -1;
	}
	return 0;
}

static int
sandbox_show_rm(int argc, char **argv, int rm)
{
	json_t *reply = NULL;
	char path[128];
	int rc;

	if (argc != 2)
		return usage_sandbox();
	if (check_id(argv[1]) == -1)
		return 2;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", argv[1]);
	rc = request(rm ? "sandbox rm" : "sandbox show", rm ? "DELETE" : "GET",
	    path, NULL, 200, &reply);
	if (rc == 0) {
		if (rm)
			printf("removed %s\n", argv[1]);
		else
			print_json(reply);
	}
	json_decref(reply);
	return rc;
}

int
cli_sandbox(int argc, char **argv)
{
	if (argc < 2)
		return usage_sandbox();
	optind = 0;
	if (strcmp(argv[1], "create") == 0)
		return sandbox_create(argc - 1, argv + 1);
	if (strcmp(argv[1], "ls") == 0 || strcmp(argv[1], "list") == 0)
		return sandbox_ls(argc - 1, argv + 1);
	if (strcmp(argv[1], "show") == 0)
		return sandbox_show_rm(argc - 1, argv + 1, 0);
	if (strcmp(argv[1], "rm") == 0)
		return sandbox_show_rm(argc - 1, argv + 1, 1);
	return usage_sandbox();
}

/* ------------------------------------------------------------ exec */

struct target {
	char	netns[64];
	char	id[NS_ID_MAX + 1];
	char	url[128];
	char	token[TOKEN_HEX + 1];
	struct cli_limits lim;
};

/* Asks the daemon how to enter sandbox id. 0, or 1 (printed). */
static int
exec_info(const char *id, struct target *t)
{
	json_t *reply = NULL, *env;
	const char *ns, *url, *tok, *rid;
	char path[128], want[64];

	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	if (request("exec", "POST", path, NULL, 200, &reply) != 0)
		return 1;
	env = json_object_get(reply, "env");
	ns = json_string_value(json_object_get(reply, "netns"));
	rid = json_string_value(json_object_get(env, "SLUICE_SANDBOX_ID"));
	url = json_string_value(json_object_get(env, "SLUICE_BRIDGE_URL"));
	tok = json_string_value(json_object_get(env, "SLUICE_TOKEN"));
	snprintf(want, sizeof(want), "%s%s", NS_NETNS_PREFIX, id);
	/* The namespace name becomes a path: accept only the one this id
	 * must have, whatever the daemon says. */
	if (ns == NULL || strcmp(ns, want) != 0 || rid == NULL ||
	    strcmp(rid, id) != 0 || url == NULL || strlen(url) >=
	    sizeof(t->url) || tok == NULL || strlen(tok) != TOKEN_HEX ||
	    cli_limits_parse(reply, id, &t->lim) == -1) {
		fprintf(stderr, "sluice: exec: unexpected reply from the "
		    "daemon\n");
		json_decref(reply);
		return 1;
	}
	snprintf(t->netns, sizeof(t->netns), "%s", ns);
	snprintf(t->id, sizeof(t->id), "%s", id);
	snprintf(t->url, sizeof(t->url), "%s", url);
	snprintf(t->token, sizeof(t->token), "%s", tok);
	json_decref(reply);
	return 0;
}

/*
 * Confinement, in the process about to exec the command, after it entered
 * the sandbox's namespaces: the CLI runs as root with every capability
 * (it must, to enter), and none of that may reach the command, which could
 * otherwise setns(2) back into the host's namespaces (CAP_SYS_ADMIN), move
 * links or make veths into them (CAP_NET_ADMIN applies to every network
 * namespace of the initial user namespace, not only its own), load
 * modules, or read any file. So:
 *
 * - the bounding set is emptied (--net-raw: all but NET_RAW and
 *   NET_BIND_SERVICE, which act only on sockets of the caller's own
 *   namespace), and the securebits are locked so that uid 0 regains
 *   nothing at exec (NOROOT) nor through setuid (NO_SETUID_FIXUP) and no
 *   ambient capability can be raised later (KEEP_CAPS stays unlocked:
 *   with NO_SETUID_FIXUP it changes nothing, and tools such as ping set
 *   it and give up when they cannot);
 * - --user switches gids, groups and uid; caps survive the switch only
 *   because NO_SETUID_FIXUP is set first, and only for --net-raw;
 * - permitted, effective and inheritable become the kept set, which is
 *   also raised ambient so that it survives exec; otherwise all empty;
 * - no_new_privs, so setuid binaries and file capabilities give nothing;
 * - a Landlock domain of its own: a process outside it (sluiced, another
 *   sandbox's command, any root process) cannot be ptraced or have its
 *   /proc files (environ, mem, ns/) opened from inside, and from ABI 6
 *   (Linux 6.12) not signalled either. Where Landlock is missing, this
 *   part is skipped: the rest still holds.
 *
 * 0, or -1 with a message in err.
 */
#define CAP_MAX		63

#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL	(1ULL << 1)
#endif

/* The ruleset attribute of Landlock ABI 6; the kernel takes its size. */
struct ll_attr {
	uint64_t	handled_access_fs;
	uint64_t	handled_access_net;
	uint64_t	scoped;
};

static int
confine_landlock(char *err, size_t errlen)
{
	struct ll_attr a;
	long abi;
	int fd;

	abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 1)
		return 0;	/* not built or not enabled: skipped */
	memset(&a, 0, sizeof(a));
	/* A domain needs something handled; making block devices needs
	 * CAP_MKNOD, which is gone anyway, so handling it costs nothing. */
	a.handled_access_fs = LANDLOCK_ACCESS_FS_MAKE_BLOCK;
	if (abi >= 6)
		a.scoped = LANDLOCK_SCOPE_SIGNAL;
	fd = (int)syscall(SYS_landlock_create_ruleset, &a,
	    abi >= 6 ? sizeof(a) : sizeof(a.handled_access_fs), 0);
	if (fd == -1 || syscall(SYS_landlock_restrict_self, fd, 0) == -1) {
		snprintf(err, errlen, "landlock: %s", strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int
caps_set(uint64_t keep, uint64_t extra_eff)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	uint64_t eff = keep | extra_eff;

	memset(d, 0, sizeof(d));
	d[0].permitted = d[0].effective = (uint32_t)eff;
	d[1].permitted = d[1].effective = (uint32_t)(eff >> 32);
	d[0].inheritable = (uint32_t)keep;
	d[1].inheritable = (uint32_t)(keep >> 32);
	return (int)syscall(SYS_capset, &h, d);
}

static int
confine(const struct exec_opts *xo, char *err, size_t errlen)
{
	const uint64_t keep = xo->net_raw ? (1ULL << CAP_NET_RAW) |
	    (1ULL << CAP_NET_BIND_SERVICE) : 0;
	const uint64_t setpcap = 1ULL << CAP_SETPCAP;
	int c;

	for (c = 0; c <= CAP_MAX; c++) {
		if ((keep >> c) & 1 || prctl(PR_CAPBSET_READ, c, 0, 0, 0) != 1)
			continue;	/* kept, or past the kernel's last */
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == -1) {
			snprintf(err, errlen, "drop capability %d from the "
			    "bounding set: %s", c, strerror(errno));
			return -1;
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1 ||
	    prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
	    SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED, 0, 0,
	    0) == -1) {
		snprintf(err, errlen, "securebits: %s", strerror(errno));
		return -1;
	}
	if (xo->set_user && (setgroups((size_t)xo->ngroups, xo->groups) ==
	    -1 || setresgid(xo->gid, xo->gid, xo->gid) == -1 ||
	    setresuid(xo->uid, xo->uid, xo->uid) == -1)) {
		snprintf(err, errlen, "switch to uid %ld gid %ld: %s",
		    (long)xo->uid, (long)xo->gid, strerror(errno));
		return -1;
	}
	/* CAP_SETPCAP stays effective for the last securebits call. */
	if (caps_set(keep, setpcap) == -1) {
		snprintf(err, errlen, "capset: %s", strerror(errno));
		return -1;
	}
	for (c = 0; c <= CAP_MAX; c++)
		if ((keep >> c) & 1 && prctl(PR_CAP_AMBIENT,
		    PR_CAP_AMBIENT_RAISE, c, 0, 0) == -1) {
			snprintf(err, errlen, "ambient capability %d: %s", c,
			    strerror(errno));
			return -1;
		}
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
	    SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
	    SECBIT_NO_CAP_AMBIENT_RAISE |
	    SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED, 0, 0, 0) == -1 ||
	    caps_set(keep, 0) == -1) {
		snprintf(err, errlen, "securebits: %s", strerror(errno));
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		snprintf(err, errlen, "no_new_privs: %s", strerror(errno));
		return -1;
	}
	return confine_landlock(err, errlen);
}

/* In the process that becomes the command: enter, confine, set SLUICE_*,
 * exec. Returns only on failure, with the exit status to use (127 when
 * the command is not found, 126 when it cannot run, 1 when the sandbox
 * cannot be entered or the command not confined). */
static int
enter_and_exec(const struct target *t, const struct exec_opts *xo,
    char **cmd)
{
	char err[512];

	/* Into its cgroups first, while it may still write there. */
	if (cli_limits_join(&t->lim, err, sizeof(err)) == -1) {
		fprintf(stderr, "sluice: exec: cannot join the sandbox's "
		    "cgroup: %s\n", err);
		return 1;
	}
	if (ns_enter(NULL, NULL, t->netns, err, sizeof(err)) == -1) {
		fprintf(stderr, "sluice: exec: cannot enter %s: %s\n",
		    t->netns, err);
		return 1;
	}
	if (confine(xo, err, sizeof(err)) == -1) {
		fprintf(stderr, "sluice: exec: cannot confine the command: "
		    "%s\n", err);
		return 1;
	}
	if (setenv("SLUICE_SANDBOX_ID", t->id, 1) == -1 ||
	    setenv("SLUICE_BRIDGE_URL", t->url, 1) == -1 ||
	    setenv("SLUICE_TOKEN", t->token, 1) == -1) {
		fprintf(stderr, "sluice: exec: setenv: %s\n", strerror(errno));
		return 1;
	}
	execvp(cmd[0], cmd);
	fprintf(stderr, "sluice: exec: %s: %s\n", cmd[0], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* The finding of a command killed at its timeout; the daemon knows the
 * timeout and records it. */
static void
note_timeout(const struct target *t)
{
	json_t *reply = NULL;
	char path[128];

	snprintf(path, sizeof(path), "/v1/sandboxes/%s/timeout", t->id);
	(void)request("timeout", "POST", path, NULL, 200, &reply);
	json_decref(reply);
	fprintf(stderr, "sluice: %s: timed out after %lus\n", t->id,
	    t->lim.timeout_s);
}

/* Exit status as a shell gives it, 124 for a command killed at its
 * timeout (as timeout(1)). */
static int
exit_status(int st, int timed_out)
{
	if (timed_out)
		return 124;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
}

/* exec with a timeout: the command is a child this process waits for. */
static int
exec_timed(const struct target *t, const struct exec_opts *xo, char **cmd)
{
	pid_t pid;
	int st = 0, timed_out;

	fflush(NULL);
	if ((pid = fork()) == -1) {
		fprintf(stderr, "sluice: exec: fork: %s\n", strerror(errno));
		return 1;
	}
	if (pid == 0)
		_exit(enter_and_exec(t, xo, cmd));
	cli_limits_wait(pid, &t->lim, &st, &timed_out);
	if (timed_out)
		note_timeout(t);
	return exit_status(st, timed_out);
}

int
cli_exec(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "user",	required_argument,	NULL, 'u' },
		{ "net-raw",	no_argument,		NULL, 'N' },
		{ NULL,		0,			NULL, 0 }
	};
	struct exec_opts xo;
	struct target t;
	int i, dash = -1, ch, rc;

	/* exec [OPTS] ID -- CMD...: the "--" is required so that options
	 * of CMD can never be taken for ours; ours come before it. */
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			dash = i;
			break;
		}
	if (dash == -1 || dash + 1 >= argc)
		return usage_exec();
	memset(&xo, 0, sizeof(xo));
	optind = 0;
	while ((ch = getopt_long(dash, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'u':
			if (parse_user(optarg, &xo) == -1)
				return usage_exec();
			break;
		case 'N':
			xo.net_raw = 1;
			break;
		default:
			return usage_exec();
		}
	}
	if (optind != dash - 1)
		return usage_exec();
	if (check_id(argv[optind]) == -1)
		return 2;
	if ((rc = exec_info(argv[optind], &t)) != 0)
		return rc;
	if (t.lim.timeout_s == 0)
		return enter_and_exec(&t, &xo, argv + dash + 1);
	return exec_timed(&t, &xo, argv + dash + 1);
}

/* ------------------------------------------------------------ run */

static volatile sig_atomic_t child_pid;

static void
forward_signal(int sig)
{
	if (child_pid > 0)
		(void)kill((pid_t)child_pid, sig);
}

int
cli_run(int argc, char **argv)
{
	json_t *body = json_object(), *reply = NULL;
	struct sigaction sa, old_int, old_term, old_hup, old_quit;
	sigset_t block, oldmask;
	struct exec_opts xo;
	struct target t;
	const char *id;
	char path[128];
	pid_t pid;
	int i, dash = -1, rc, st = 0, timed_out = 0;

	if (body == NULL)
		return 1;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			dash = i;
			break;
		}
	if (dash == -1 || dash + 1 >= argc) {
		json_decref(body);
		return usage_run();
	}
	memset(&xo, 0, sizeof(xo));
	optind = 0;
	if (create_opts(dash, argv, 0, body, &xo) == -1 || optind != dash) {
		json_decref(body);
		return usage_run();
	}
	/* From before the sandbox exists until the child runs, SIGINT,
	 * SIGTERM, SIGHUP (the terminal or ssh session gone) and SIGQUIT
	 * wait: whichever comes, the sandbox is removed. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGQUIT);
	sigprocmask(SIG_BLOCK, &block, &oldmask);
	rc = request("run", "POST", "/v1/sandboxes", body, 201, &reply);
	json_decref(body);
	if (rc != 0) {
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		return 1;
	}
	id = json_string_value(json_object_get(reply, "id"));
	if (id == NULL || !ns_id_valid(id)) {
		fprintf(stderr, "sluice: run: unexpected reply from the "
		    "daemon\n");
		json_decref(reply);
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		return 1;
	}
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	json_decref(reply);
	reply = NULL;
	if ((rc = exec_info(path + strlen("/v1/sandboxes/"), &t)) != 0)
		goto remove;
	fflush(NULL);
	if ((pid = fork()) == -1) {
		fprintf(stderr, "sluice: run: fork: %s\n", strerror(errno));
		rc = 1;
		goto remove;
	}
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		_exit(enter_and_exec(&t, &xo, argv + dash + 1));
	}
	child_pid = pid;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	sigaction(SIGQUIT, &sa, &old_quit);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	cli_limits_wait(pid, &t.lim, &st, &timed_out);
	child_pid = 0;
	sigprocmask(SIG_BLOCK, &block, NULL);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	if (timed_out)
		note_timeout(&t);
	rc = exit_status(st, timed_out);
remove:
	if (request("run: remove sandbox", "DELETE", path, NULL, 200,
	    &reply) != 0) {
		fprintf(stderr, "sluice: run: sandbox %s was not removed\n",
		    path + strlen("/v1/sandboxes/"));
		if (rc == 0)
			rc = 1;
	}
	json_decref(reply);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	return rc;
}
