/*
 * priv: makes a child of sluiced unprivileged (privilege separation in the
 * shape of OpenBSD's unwind). sluiced runs as root; the processes that
 * parse what a sandbox sends (the DNS process, the bridge process) must
 * not: a bug in a parser should give the attacker an unprivileged process
 * with no capabilities, no way back to root, and only the system calls
 * its job needs. The parent forks the child, the child opens what it
 * needs, then calls, in this order:
 *
 *	priv_user()	(before the fork or in the child: it reads NSS)
 *	priv_drop()	chroot, uid/gid, capabilities, no_new_privs
 *	priv_seccomp()	the room's system call allowlist
 *
 * Leaf module: errors are returned with a message in err, never logged
 * and never fatal; the caller decides to exit.
 *
 * Environment: SLUICE_SECCOMP=log makes priv_seccomp log a system call
 * outside the allowlist instead of killing the process (SCMP_ACT_LOG:
 * the kernel log gets an audit record "type=1326 ... syscall=N" and the
 * call runs). For an operator looking for a missing system call, never
 * for production. Unset, empty or "kill" is the default: the process is
 * killed by SIGSYS.
 */
#ifndef SLUICE_GATEWAY_PRIVSEP_PRIV_H
#define SLUICE_GATEWAY_PRIVSEP_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * PRIV_SANITIZED is 1 in an AddressSanitizer build (gcc defines
 * __SANITIZE_ADDRESS__, clang answers __has_feature). Such a build
 * allows the sanitizers' own system calls in every room (LeakSanitizer's
 * stop-the-world at exit: clone, ptrace, prctl, /proc; see filter.c).
 * A process that priv_drop chrooted skips LeakSanitizer's check at exit
 * there (it needs /proc; drop.c). Tests use it to know which calls are
 * forbidden in the build they run.
 */
#if defined(__SANITIZE_ADDRESS__)
#define PRIV_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define PRIV_SANITIZED 1
#endif
#endif
#ifndef PRIV_SANITIZED
#define PRIV_SANITIZED 0
#endif

/* Which unprivileged process a filter is for: each has its own allowlist
 * (filter.c). */
enum priv_room {
	PRIV_ROOM_DNS,		/* the DNS proxy: one epoll loop, sockets */
	PRIV_ROOM_BRIDGE	/* the MCP bridge: threads, reading files, its database */
};

/* priv_room_name: "dns" or "bridge" (for messages); "?" for a value
 * outside the enum. Never NULL. */
const char	*priv_room_name(enum priv_room room);

/*
 * priv_user: the uid and gid of the user name (getpwnam_r). 0 on success.
 * -1 with a message in err when the user does not exist (the message says
 * how to create it), when its uid or primary gid is 0 (a child that stays
 * root is no separation), or on a lookup error. Call it while NSS still
 * works: before priv_drop's chroot and before priv_seccomp.
 */
int		 priv_user(const char *name, uid_t *uid, gid_t *gid,
		    char *err, size_t errlen);

/*
 * priv_drop: called as root in the child once it has everything open it
 * will ever need. When root_dir is not NULL: chroot(root_dir) and chdir
 * ("/"); root_dir must be an existing directory owned by root and not
 * writable by group or others (it is not created; an empty one is meant).
 * Then: every capability out of the bounding set and the ambient set,
 * securebits locked (root gets no capabilities at exec, no ambient
 * raise), supplementary groups = { gid }, real/effective/saved gid and
 * uid set to gid and uid, the inheritable set emptied, no_new_privs set,
 * and the process made non-dumpable (the kernel does that at the uid
 * change too unless fs.suid_dumpable says otherwise; setting it makes it
 * so everywhere: no other process of the same uid may ptrace the child
 * or read its memory, and no core file keeps what it parsed;
 * /proc/<pid>/status stays readable, by root and by others).
 * Before returning it checks what it did without /proc (which a chroot
 * hides): the ids are what was asked, setuid(0) and setgid(0) fail, the
 * effective, permitted, inheritable, ambient and bounding sets are
 * empty, no_new_privs is 1. 0 when all hold; -1 with a message in err on
 * any failure, after which the process may be half dropped and must
 * exit. uid 0 or gid 0 is refused.
 */
int		 priv_drop(uid_t uid, gid_t gid, const char *root_dir,
		    char *err, size_t errlen);

/*
 * priv_seccomp: installs room's allowlist as a seccomp filter on every
 * thread of the process (TSYNC), with no_new_privs. A system call outside
 * the list kills the whole process with SIGSYS (SCMP_ACT_KILL_PROCESS;
 * /proc/<pid>/status then says "Seccomp: 2"), or is logged and allowed
 * when SLUICE_SECCOMP=log (see the top of this file). A call made with
 * another ABI (i386, x32) kills in both modes. Before loading, glibc's
 * lazily read state that the allowlist would forbid later is read now
 * (the time zone, for syslog's timestamps). Open the syslog connection
 * before priv_drop (openlog with LOG_NDELAY): the filter lets syslog
 * reconnect, but a chroot hides /dev/log. 0 on success; -1 with a
 * message in err (an unknown SLUICE_SECCOMP value, a libseccomp error),
 * with no filter installed. Filters stack: a second call narrows.
 */
int		 priv_seccomp(enum priv_room room, char *err, size_t errlen);

/* What /proc/<pid>/status says about a process's privileges: a plain
 * value, for tests and for the daemon's status of its children. */
struct priv_state {
	uid_t		uid_real, uid_eff;	/* Uid: */
	gid_t		gid_real, gid_eff;	/* Gid: */
	uint64_t	cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
	int		no_new_privs;		/* 0 or 1 */
	int		seccomp;		/* 0 off, 1 strict, 2 filter */
};

/*
 * priv_status: fills *out from /proc/<pid>/status (pid 0: this process).
 * Reads at most 1 MiB, in lines of at most 4 KiB (a longer line, such as
 * a huge Groups:, is skipped; none of the fields read is ever that long).
 * 0 when every field of struct priv_state was found and well formed; -1
 * with errno otherwise: that of open or read (ENOENT: no such process),
 * EPROTO for a field missing or malformed. *out is zeroed first.
 */
int		 priv_status(pid_t pid, struct priv_state *out);

#endif /* SLUICE_GATEWAY_PRIVSEP_PRIV_H */
