/*
 * filter.c: the system calls each unprivileged room of sluiced may make,
 * as data. A child that parses sandbox input gets a seccomp filter that
 * kills it on anything else, so a parser bug cannot reach the kernel's
 * wider surface (no open, no exec, no ptrace, no namespaces, no bpf in
 * the DNS process). The lists are tables of rules grouped by what needs
 * them, so that a review reads what a room may do, and why, without
 * following code; a room is the list of its groups.
 *
 * Where an argument narrows a call cheaply it is checked: socket only for
 * AF_INET, AF_INET6 and AF_UNIX (no netlink, no packet sockets), ioctl
 * only for FIONREAD and TCGETS, prctl only for PR_SET_NAME, tgkill only
 * at this process (so abort() still shows as SIGABRT), and in the DNS
 * room no mapping or protection change that makes memory executable.
 */
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <linux/netlink.h>

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/privsep/priv.h"

/* How an argument is compared. */
enum priv_op {
	PRIV_EQ,	/* arg == val */
	PRIV_NOBITS,	/* (arg & val) == 0 */
	PRIV_HASBITS,	/* (arg & val) == val */
	PRIV_SELF	/* arg == this process's pid, at install */
};

struct priv_cmp {
	unsigned	arg;	/* 0..5 */
	enum priv_op	op;
	uint64_t	val;
};

/* One allowed system call, with at most two argument conditions (all
 * must hold). Several rules for one call are alternatives. */
struct priv_rule {
	int		nr;	/* SCMP_SYS(name) */
	unsigned	ncmp;
	struct priv_cmp	cmp[2];
};

#define ANY(name)		{ SCMP_SYS(name), 0, { { 0 } } }
#define EQ(name, a, v)		{ SCMP_SYS(name), 1, { { a, PRIV_EQ, v } } }
#define EQ2(name, a, v, b, w)	{ SCMP_SYS(name), 2, \
				  { { a, PRIV_EQ, v }, { b, PRIV_EQ, w } } }
#define NOBITS(name, a, m)	{ SCMP_SYS(name), 1, { { a, PRIV_NOBITS, m } } }
#define HASBITS(name, a, m)	{ SCMP_SYS(name), 1, { { a, PRIV_HASBITS, m } } }
#define SELF(name, a)		{ SCMP_SYS(name), 1, { { a, PRIV_SELF, 0 } } }

/* Every room: an epoll loop over sockets, timers and eventfds, memory,
 * time, signals, and logging to stderr or syslog (socket AF_UNIX,
 * connect, sendto). */
static const struct priv_rule base[] = {
	/* the event loop */
	ANY(epoll_create1), ANY(epoll_ctl), ANY(epoll_wait), ANY(epoll_pwait),
	ANY(timerfd_create), ANY(timerfd_settime), ANY(timerfd_gettime),
	ANY(eventfd2), ANY(signalfd4),
	/* descriptors */
	ANY(read), ANY(write), ANY(readv), ANY(writev), ANY(close),
	ANY(fcntl), ANY(lseek), ANY(fstat), ANY(newfstatat),
	EQ(ioctl, 1, FIONREAD),
	EQ(ioctl, 1, TCGETS),		/* isatty(), stdio's first write */
	/* sockets */
	EQ(socket, 0, AF_INET), EQ(socket, 0, AF_INET6), EQ(socket, 0, AF_UNIX),
	ANY(connect), ANY(accept4), ANY(shutdown),
	ANY(getsockname), ANY(getpeername), ANY(setsockopt), ANY(getsockopt),
	ANY(recvfrom), ANY(sendto), ANY(recvmsg), ANY(sendmsg),
	ANY(recvmmsg), ANY(sendmmsg),
	/* time */
	ANY(clock_gettime), ANY(gettimeofday), ANY(clock_nanosleep),
	ANY(nanosleep),
	/* memory (mmap and mprotect: per room) */
	ANY(brk), ANY(munmap), ANY(mremap), ANY(madvise), ANY(futex),
	ANY(getrandom),
	ANY(sysinfo),			/* glibc qsort sizes its buffer by it */
	/* the process itself */
	ANY(exit), ANY(exit_group), ANY(restart_syscall),
	ANY(rt_sigreturn), ANY(rt_sigprocmask), ANY(rt_sigaction),
	ANY(sigaltstack), SELF(tgkill, 0),
	ANY(getpid), ANY(gettid), ANY(getuid), ANY(geteuid), ANY(getgid),
	ANY(getegid), ANY(sched_yield), ANY(uname),
	EQ(prctl, 0, PR_SET_NAME),
};

/* The DNS process maps data only: nothing it receives can become code. */
static const struct priv_rule dns_mem[] = {
	NOBITS(mmap, 2, PROT_EXEC), NOBITS(mprotect, 2, PROT_EXEC),
};

/* The bridge: libcurl's clients (its resolver runs getaddrinfo on a
 * thread of its own, which opens /etc files, loads NSS modules, so
 * executable mappings, and asks a netlink route socket for address
 * sorting), TLS's CA files, and SQLite on the database it opened before
 * its rights went (pread/pwrite, fsync, locks through fcntl). Threads
 * only: clone must carry CLONE_THREAD (a fork would start a process the
 * filter was not written for), and clone3, whose flags a filter cannot
 * read, fails with ENOSYS so that glibc falls back to clone. Its stdio
 * servers are started by another process (gateway/bridge/spawn.h): no
 * exec, no wait, no kill here; a server is signalled through its pidfd. */
static const struct priv_rule bridge_more[] = {
	/* memory, threads */
	ANY(mmap), ANY(mprotect),
	HASBITS(clone, 0, CLONE_THREAD), ANY(set_robust_list), ANY(rseq),
	ANY(sched_getaffinity), ANY(prlimit64), ANY(getrlimit),
	/* files: reading (resolver, TLS), and the database opened before */
	ANY(open), ANY(openat), ANY(statx), ANY(access), ANY(faccessat),
	ANY(faccessat2), ANY(readlink), ANY(readlinkat), ANY(getcwd),
	ANY(getdents64),
	ANY(pread64), ANY(pwrite64), ANY(fsync), ANY(fdatasync),
	ANY(ftruncate),
	/* descriptors and waiting */
	ANY(pipe2), ANY(dup), ANY(dup2), ANY(dup3), ANY(poll), ANY(ppoll),
	ANY(select), ANY(pselect6),
	/* getaddrinfo asks the kernel's routes (reading needs no
	 * capability); libcurl wakes its multi handle through a local
	 * socket pair */
	EQ2(socket, 0, AF_NETLINK, 2, NETLINK_ROUTE), ANY(bind),
	EQ(socketpair, 0, AF_UNIX),
	/* stdio servers, through their pidfds */
	ANY(pidfd_send_signal),
	EQ(prctl, 0, PR_GET_NAME),
};

/* Calls that fail with ENOSYS instead of killing: clone3 (see above). */
static const int bridge_enosys[] = { SCMP_SYS(clone3) };

/*
 * The sanitizers' own calls (PRIV_SANITIZED builds only, in every room),
 * found by running children under the filter in the ASan+UBSan build and
 * taking calls out one at a time. LeakSanitizer stops the world at exit:
 * it clones a tracer sharing the address space (exactly these flags; a
 * fork still dies), which checks getppid, lists /proc/self/task (open,
 * getdents: gcc 12's runtime makes the old calls), ptraces every thread,
 * and is waited for; prctl makes the process dumpable for that and names
 * the tracer. A report (a leak, an ASan or UBSan error) reads
 * /proc/self/maps and the binary to symbolise (openat, readlink); UBSan
 * probes whether memory it shows is readable by writing it to a pipe.
 */
#define PRIV_LSAN_CLONE	(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_UNTRACED)
static const struct priv_rule sanitizer[] = {
	EQ(clone, 0, PRIV_LSAN_CLONE), ANY(getppid), ANY(open), ANY(getdents),
	ANY(ptrace), ANY(wait4), ANY(prctl),
	ANY(openat), ANY(readlink), ANY(pipe2),
};

struct priv_group {
	const struct priv_rule	*rules;
	size_t			 n;
};

#define GROUP(g)	{ g, sizeof(g) / sizeof(g[0]) }

static const struct priv_group dns_room[] = { GROUP(base), GROUP(dns_mem) };
static const struct priv_group bridge_room[] = {
	GROUP(base), GROUP(bridge_more)
};
static const struct priv_group sanitizer_room[] = { GROUP(sanitizer) };

static const struct {
	const struct priv_group	*groups;
	size_t			 n;
} rooms[] = {
	[PRIV_ROOM_DNS] = GROUP(dns_room),
	[PRIV_ROOM_BRIDGE] = GROUP(bridge_room),
};

static int
add_rule(scmp_filter_ctx ctx, const struct priv_rule *r, char *err,
    size_t errlen)
{
	struct scmp_arg_cmp c[2];
	unsigned i;
	int rc;

	for (i = 0; i < r->ncmp; i++) {
		c[i].arg = r->cmp[i].arg;
		c[i].datum_a = r->cmp[i].val;
		switch (r->cmp[i].op) {
		case PRIV_EQ:
			c[i].op = SCMP_CMP_EQ;
			break;
		case PRIV_NOBITS:
			c[i].op = SCMP_CMP_MASKED_EQ;
			c[i].datum_b = 0;
			continue;
		case PRIV_HASBITS:
			c[i].op = SCMP_CMP_MASKED_EQ;
			c[i].datum_b = r->cmp[i].val;
			continue;
		case PRIV_SELF:
			c[i].op = SCMP_CMP_EQ;
			c[i].datum_a = (scmp_datum_t)getpid();
			break;
		}
		c[i].datum_b = 0;
	}
	/* Not seccomp_rule_add_exact: a call this architecture lacks (a
	 * pseudo number from SCMP_SYS) is skipped, not an error. */
	if ((rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, r->nr, r->ncmp,
	    c)) < 0) {
		char *name = seccomp_syscall_resolve_num_arch(
		    SCMP_ARCH_NATIVE, r->nr);

		snprintf(err, errlen, "seccomp rule for %s: %s",
		    name != NULL ? name : "?", strerror(-rc));
		free(name);
		return -1;
	}
	return 0;
}

static int
add_groups(scmp_filter_ctx ctx, const struct priv_group *g, size_t n,
    char *err, size_t errlen)
{
	size_t i, j;

	for (i = 0; i < n; i++)
		for (j = 0; j < g[i].n; j++)
			if (add_rule(ctx, &g[i].rules[j], err, errlen) == -1)
				return -1;
	return 0;
}

/* SLUICE_SECCOMP: the default action, or -1 for a value we do not know
 * (an operator's typo must not silently mean "kill"). */
static int
mode(uint32_t *act, char *err, size_t errlen)
{
	const char *m = getenv("SLUICE_SECCOMP");

	if (m == NULL || *m == '\0' || strcmp(m, "kill") == 0)
		*act = SCMP_ACT_KILL_PROCESS;
	else if (strcmp(m, "log") == 0)
		*act = SCMP_ACT_LOG;
	else {
		snprintf(err, errlen, "SLUICE_SECCOMP=%s: expected kill or log",
		    m);
		return -1;
	}
	return 0;
}

int
priv_seccomp(enum priv_room room, char *err, size_t errlen)
{
	scmp_filter_ctx ctx;
	uint32_t act;
	int rc;

	if ((unsigned)room >= sizeof(rooms) / sizeof(rooms[0])) {
		snprintf(err, errlen, "seccomp: no room %d", (int)room);
		return -1;
	}
	if (mode(&act, err, errlen) == -1)
		return -1;
	/* glibc reads the time zone file at the first localtime (syslog's
	 * timestamp): read it now, while openat is allowed. */
	tzset();
	if ((ctx = seccomp_init(act)) == NULL) {
		snprintf(err, errlen, "seccomp_init failed: no seccomp "
		    "filters in this kernel, or out of memory");
		return -1;
	}
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	    SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1)) < 0 ||
	    (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) < 0) {
		snprintf(err, errlen, "seccomp attributes: %s", strerror(-rc));
		seccomp_release(ctx);
		return -1;
	}
	if (add_groups(ctx, rooms[room].groups, rooms[room].n, err,
	    errlen) == -1 || (PRIV_SANITIZED && add_groups(ctx,
	    sanitizer_room, 1, err, errlen) == -1)) {
		seccomp_release(ctx);
		return -1;
	}
	if (room == PRIV_ROOM_BRIDGE) {
		size_t i;

		for (i = 0; i < sizeof(bridge_enosys) / sizeof(int); i++)
			if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS),
			    bridge_enosys[i], 0)) < 0) {
				snprintf(err, errlen, "seccomp ENOSYS rule: %s",
				    strerror(-rc));
				seccomp_release(ctx);
				return -1;
			}
	}
	if ((rc = seccomp_load(ctx)) < 0) {
		snprintf(err, errlen, "seccomp_load (%s): %s",
		    priv_room_name(room), strerror(-rc));
		seccomp_release(ctx);
		return -1;
	}
	seccomp_release(ctx);
	return 0;
}
