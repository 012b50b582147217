/*
 * check_privsep: gateway/privsep/ makes a child of sluiced unprivileged,
 * and the child stays so. Each test forks a child (the suite runs as
 * root) that drops to a test user, optionally installs a room's seccomp
 * filter, reports through a pipe what it saw from the inside, and then
 * waits while the parent looks at it from the outside (/proc/<pid>/status
 * through priv_status): the drop is judged by the kernel's word, not the
 * child's. A forbidden system call must kill the child with SIGSYS, an
 * allowed one must work, and a child that exits normally after the
 * filter must exit 0 (in the ASan build that includes LeakSanitizer's
 * work at exit, which runs under the filter).
 *
 * The test user sluice-test-priv is created when missing and deleted at
 * the end by the last run that uses it: suites of several builds may run
 * at once, so a lock file (shared while in use) says who is last; the
 * last also removes the lock file.
 *
 * Every wait is bounded (WAIT_MS): a child that hangs fails the test.
 */
#include <sys/file.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

#include <linux/netlink.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "gateway/privsep/priv.h"

#define TEST_USER	"sluice-test-priv"
#define USER_LOCK	"/run/lock/sluice-test-priv.lock"
#define WAIT_MS		30000	/* a bound on a broken child, not a timing */

static uid_t t_uid;
static gid_t t_gid;
static int lock_fd = -1;

/* Memcheck (3.19, Debian 12) does not implement seccomp(2): under it
 * libseccomp's seccomp_init fails, so the tests that install a filter
 * would fail for valgrind's sake, not sluice's; and a filter would judge
 * valgrind's own system calls as well. They run only outside it
 * (tests/lint/valgrind.sh runs the rest: the drop and the status
 * reader, children included). Memcheck says so in LD_PRELOAD. */
static int
under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	return p != NULL && strstr(p, "vgpreload") != NULL;
}

/* The passwd entry of name into *pw (strings in buf), or 0: none. */
static int
user_entry(const char *name, struct passwd *pw, char *buf, size_t len)
{
	struct passwd *res = NULL;

	return getpwnam_r(name, pw, buf, len, &res) == 0 && res != NULL;
}

static int
run_cmd(char *const argv[])
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		if (fd != -1)
			dup2(fd, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid == -1 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void
user_setup(void)
{
	char *add[] = { "/usr/sbin/useradd", "--system", "--no-create-home",
	    "--shell", "/usr/sbin/nologin", TEST_USER, NULL };
	char err[256], buf[4096];
	struct passwd pw;

	if (getuid() != 0)
		return;
	/* The last run out removes the lock file: one that locked a file
	 * since removed tries again on the new one. */
	for (;;) {
		struct stat a, b;

		lock_fd = open(USER_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
		ck_assert_int_ge(lock_fd, 0);
		ck_assert_int_eq(flock(lock_fd, LOCK_EX), 0);
		if (fstat(lock_fd, &a) == 0 && stat(USER_LOCK, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			break;
		close(lock_fd);
	}
	if (!user_entry(TEST_USER, &pw, buf, sizeof(buf)))
		ck_assert_int_eq(run_cmd(add), 0);
	ck_assert_int_eq(flock(lock_fd, LOCK_SH), 0);
	ck_assert_msg(priv_user(TEST_USER, &t_uid, &t_gid, err,
	    sizeof(err)) == 0, "%s", err);
}

static void
user_teardown(void)
{
	char *del[] = { "/usr/sbin/userdel", TEST_USER, NULL };
	char buf[4096];
	struct passwd pw;

	if (lock_fd == -1)
		return;
	/* Last one out: no other run holds the lock shared. */
	if (flock(lock_fd, LOCK_EX | LOCK_NB) == 0) {
		if (user_entry(TEST_USER, &pw, buf, sizeof(buf)))
			(void)run_cmd(del);
		unlink(USER_LOCK);
	}
	close(lock_fd);
	lock_fd = -1;
}

/* What a child does: where it locks itself, which filter, under which
 * SLUICE_SECCOMP, and what it tries once the parent has looked. */
struct plan {
	const char	*root;		/* chroot, or NULL */
	int		 room;		/* enum priv_room, or -1: no filter */
	const char	*mode;		/* SLUICE_SECCOMP, or NULL: unset */
	int		(*after)(void);	/* exit status; NULL: exit 0 */
	int		 groups;	/* > 0: setgroups that many, no drop */
};

/* What the child saw from the inside. */
struct report {
	int		 drop_rc;
	int		 status_rc;	/* priv_status(0), without chroot */
	int		 setuid_rc, setuid_errno;
	int		 seccomp_rc;
	char		 msg[256];
	struct priv_state st;
};

struct child {
	pid_t	pid;
	int	from;	/* the child's report */
	int	to;	/* closed: the child goes on */
};

static void
child_main(const struct plan *pl, int wfd, int rfd)
{
	struct report r;
	char c;

	memset(&r, 0, sizeof(r));
	r.status_rc = r.seccomp_rc = -2;
	if (pl->mode != NULL)
		setenv("SLUICE_SECCOMP", pl->mode, 1);
	else
		unsetenv("SLUICE_SECCOMP");
	if (pl->groups > 0) {
		gid_t *g = calloc((size_t)pl->groups, sizeof(*g));
		int i;

		for (i = 0; g != NULL && i < pl->groups; i++)
			g[i] = (gid_t)(100000 + i);
		r.drop_rc = g == NULL ? -1 : setgroups((size_t)pl->groups, g);
		free(g);
	} else {
		r.drop_rc = priv_drop(t_uid, t_gid, pl->root, r.msg,
		    sizeof(r.msg));
	}
	if (r.drop_rc == 0 && pl->root == NULL)
		r.status_rc = priv_status(0, &r.st);
	if (pl->groups == 0) {
		errno = 0;
		r.setuid_rc = setuid(0);
		r.setuid_errno = errno;
	}
	if (r.drop_rc == 0 && pl->room >= 0)
		r.seccomp_rc = priv_seccomp((enum priv_room)pl->room, r.msg,
		    sizeof(r.msg));
	if (write(wfd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(90);
	while (read(rfd, &c, 1) == -1 && errno == EINTR)
		;
	if (r.drop_rc != 0)
		_exit(91);	/* still root: try nothing */
	/* exit, not _exit: the ASan build's LeakSanitizer runs here, under
	 * the filter, as it will in sluiced's children. */
	exit(pl->after != NULL ? pl->after() : 0);
}

static void
start(const struct plan *pl, struct child *ch, struct report *r)
{
	int up[2], down[2];
	struct pollfd p;
	ssize_t n;

	ck_assert_int_eq(pipe2(up, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(down, O_CLOEXEC), 0);
	fflush(NULL);
	ck_assert_int_ge(ch->pid = fork(), 0);
	if (ch->pid == 0) {
		close(up[0]);
		close(down[1]);
		child_main(pl, up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	ch->from = up[0];
	ch->to = down[1];
	p.fd = ch->from;
	p.events = POLLIN;
	n = poll(&p, 1, WAIT_MS) == 1 ? read(ch->from, r, sizeof(*r)) : -1;
	if (n != (ssize_t)sizeof(*r)) {
		kill(ch->pid, SIGKILL);
		waitpid(ch->pid, NULL, 0);
		ck_abort_msg("no report from child %ld", (long)ch->pid);
	}
}

/* Lets the child go on, and its wait status. Bounded: the report pipe
 * (close-on-exec) reaches its end when the child is gone; a child still
 * there after WAIT_MS is killed and the test fails. (Not a pidfd:
 * valgrind 3.19 does not know pidfd_open.) */
static int
finish(struct child *ch)
{
	struct pollfd p = { .fd = ch->from, .events = POLLIN };
	int status = 0, n;
	char c;

	close(ch->to);
	while ((n = poll(&p, 1, WAIT_MS)) == 1 && read(ch->from, &c, 1) > 0)
		;
	close(ch->from);
	if (n != 1) {
		kill(ch->pid, SIGKILL);
		waitpid(ch->pid, &status, 0);
		ck_abort_msg("child %ld did not end", (long)ch->pid);
	}
	ck_assert_int_eq(waitpid(ch->pid, &status, 0), ch->pid);
	return status;
}

static void
assert_exit0(const char *what, int status)
{
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "%s: child %s %d", what, WIFEXITED(status) ? "exited" :
	    "killed by signal", WIFEXITED(status) ? WEXITSTATUS(status) :
	    WTERMSIG(status));
}

/* The drop as seen from inside or outside: the test user, nothing left. */
static void
assert_dropped(const struct priv_state *st)
{
	ck_assert_int_eq(st->uid_real, t_uid);
	ck_assert_int_eq(st->uid_eff, t_uid);
	ck_assert_int_eq(st->gid_real, t_gid);
	ck_assert_int_eq(st->gid_eff, t_gid);
	ck_assert_uint_ne(st->uid_eff, 0);
	ck_assert_uint_eq(st->cap_eff, 0);
	ck_assert_uint_eq(st->cap_prm, 0);
	ck_assert_uint_eq(st->cap_inh, 0);
	ck_assert_uint_eq(st->cap_bnd, 0);
	ck_assert_uint_eq(st->cap_amb, 0);
	ck_assert_int_eq(st->no_new_privs, 1);
}

/* A child under pl's filter: dropped and filtered as seen from outside
 * (Seccomp: 2), and it ends with exit status 0 once it has done
 * pl->after. */
static void
run_filtered(const char *name, const struct plan *pl)
{
	struct priv_state out;
	struct report r;
	struct child ch;

	start(pl, &ch, &r);
	ck_assert_msg(r.drop_rc == 0 && r.seccomp_rc == 0, "%s: %s", name,
	    r.msg);
	ck_assert_int_eq(priv_status(ch.pid, &out), 0);
	assert_dropped(&out);
	ck_assert_msg(out.seccomp == 2, "%s: Seccomp %d", name, out.seccomp);
	assert_exit0(name, finish(&ch));
}

#define NEED_ROOT()	do { if (getuid() != 0) return; } while (0)
#define NO_VALGRIND()	do { if (under_valgrind()) return; } while (0)

START_TEST(room_names)
{
	ck_assert_str_eq(priv_room_name(PRIV_ROOM_DNS), "dns");
	ck_assert_str_eq(priv_room_name(PRIV_ROOM_BRIDGE), "bridge");
	ck_assert_str_eq(priv_room_name((enum priv_room)42), "?");
}
END_TEST

START_TEST(user_refuses_root)
{
	char err[256] = "";
	uid_t u = 7;
	gid_t g = 7;

	ck_assert_int_eq(priv_user("root", &u, &g, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "uid 0") != NULL, "%s", err);
	ck_assert_int_eq(u, 7);
	ck_assert_int_eq(priv_user("", &u, &g, err, sizeof(err)), -1);
	ck_assert_int_eq(priv_user(NULL, &u, &g, err, sizeof(err)), -1);
}
END_TEST

START_TEST(user_refuses_missing)
{
	char err[256] = "";
	uid_t u;
	gid_t g;

	ck_assert_int_eq(priv_user("sluice-no-such-user", &u, &g, err,
	    sizeof(err)), -1);
	ck_assert_msg(strstr(err, "does not exist") != NULL, "%s", err);
	ck_assert_msg(strstr(err, "useradd --system --no-create-home "
	    "--shell /usr/sbin/nologin sluice-no-such-user") != NULL, "%s",
	    err);
}
END_TEST

START_TEST(user_resolves)
{
	struct passwd pw;
	char err[256], buf[4096];
	uid_t u;
	gid_t g;

	NEED_ROOT();
	ck_assert(user_entry(TEST_USER, &pw, buf, sizeof(buf)));
	ck_assert_msg(priv_user(TEST_USER, &u, &g, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_int_eq(u, pw.pw_uid);
	ck_assert_int_eq(g, pw.pw_gid);
	ck_assert_uint_ne(u, 0);
}
END_TEST

/* Refused before anything changes, so safe in the suite's process. */
START_TEST(drop_refuses_root_ids)
{
	struct priv_state before, after;
	char err[256] = "";

	ck_assert_int_eq(priv_status(0, &before), 0);
	ck_assert_int_eq(priv_drop(0, 1000, NULL, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "refusing") != NULL, "%s", err);
	ck_assert_int_eq(priv_drop(1000, 0, NULL, err, sizeof(err)), -1);
	ck_assert_int_eq(priv_status(0, &after), 0);
	ck_assert(memcmp(&before, &after, sizeof(before)) == 0);
}
END_TEST

START_TEST(drop_unprivileged)
{
	const struct plan pl = { NULL, -1, NULL, NULL, 0 };
	struct priv_state out;
	struct report r;
	struct child ch;

	NEED_ROOT();
	start(&pl, &ch, &r);
	ck_assert_msg(r.drop_rc == 0, "%s", r.msg);
	ck_assert_int_eq(r.status_rc, 0);
	assert_dropped(&r.st);
	ck_assert_int_eq(r.st.seccomp, 0);
	ck_assert_int_eq(r.setuid_rc, -1);
	ck_assert_int_eq(r.setuid_errno, EPERM);
	ck_assert_int_eq(priv_status(ch.pid, &out), 0);
	assert_dropped(&out);
	assert_exit0("child", finish(&ch));
}
END_TEST

static int
after_chroot(void)
{
	char cwd[64];

	if (access("/etc/hostname", F_OK) == 0 || errno != ENOENT)
		return 10;
	if (getcwd(cwd, sizeof(cwd)) == NULL || strcmp(cwd, "/") != 0)
		return 11;
	return 0;
}

START_TEST(drop_chroot)
{
	char dir[] = "/tmp/check_privsep.XXXXXX";
	struct plan pl = { dir, -1, NULL, after_chroot, 0 };
	struct priv_state out;
	struct report r;
	struct child ch;
	int status;

	NEED_ROOT();
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
	start(&pl, &ch, &r);
	ck_assert_msg(r.drop_rc == 0, "%s", r.msg);
	ck_assert_int_eq(r.setuid_rc, -1);
	ck_assert_int_eq(priv_status(ch.pid, &out), 0);
	assert_dropped(&out);
	status = finish(&ch);
	/* Refused: a directory others may write, and one that is not. */
	ck_assert_int_eq(chmod(dir, 0777), 0);
	start(&pl, &ch, &r);
	ck_assert_int_eq(r.drop_rc, -1);
	ck_assert_msg(strstr(r.msg, "writable by no one else") != NULL, "%s",
	    r.msg);
	finish(&ch);
	ck_assert_int_eq(rmdir(dir), 0);
	start(&pl, &ch, &r);
	ck_assert_int_eq(r.drop_rc, -1);
	ck_assert_msg(strstr(r.msg, strerror(ENOENT)) != NULL, "%s", r.msg);
	finish(&ch);
	assert_exit0("chrooted child", status);
}
END_TEST

static int
cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* What the DNS process does, under its filter: its loop's descriptors,
 * UDP over loopback between two sockets of its own, memory, time. */
static int
after_dns_allowed(void)
{
	struct sockaddr_in a4, b4;
	socklen_t al = sizeof(a4), bl = sizeof(b4);
	struct itimerspec its = { { 0, 0 }, { 1000, 0 } };
	struct epoll_event ev = { .events = EPOLLIN };
	int ep, efd, tfd, a, b, u6, ux, avail = 0, i;
	uint64_t one = 1;
	char buf[16];
	int *v;
	struct timespec ts;

	if ((ep = epoll_create1(EPOLL_CLOEXEC)) == -1 ||
	    (efd = eventfd(0, EFD_CLOEXEC)) == -1 ||
	    (tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC)) == -1)
		return 20;
	ev.data.fd = efd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) == -1 ||
	    timerfd_settime(tfd, 0, &its, NULL) == -1 ||
	    write(efd, &one, sizeof(one)) != sizeof(one) ||
	    epoll_wait(ep, &ev, 1, WAIT_MS) != 1 ||
	    read(efd, &one, sizeof(one)) != sizeof(one))
		return 21;
	memset(&a4, 0, sizeof(a4));
	a4.sin_family = AF_INET;
	a4.sin_port = htons(9);
	a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* connect binds a port; then the two sockets face each other. */
	if ((a = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1 ||
	    (b = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(a, (struct sockaddr *)&a4, sizeof(a4)) == -1 ||
	    getsockname(a, (struct sockaddr *)&a4, &al) == -1 ||
	    connect(b, (struct sockaddr *)&a4, sizeof(a4)) == -1 ||
	    getsockname(b, (struct sockaddr *)&b4, &bl) == -1 ||
	    connect(a, (struct sockaddr *)&b4, sizeof(b4)) == -1)
		return 22;
	if (send(b, "ping", 4, 0) != 4 || ioctl(a, FIONREAD, &avail) == -1 ||
	    recv(a, buf, sizeof(buf), 0) != 4 || memcmp(buf, "ping", 4) != 0)
		return 23;
	if ((u6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return 24;
	close(u6);
	if ((ux = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return 24;
	close(ux);
	/* Big enough that malloc maps it, and that glibc's qsort asks
	 * sysinfo how much memory there is. */
	if ((v = malloc(1 << 20)) == NULL)
		return 25;
	for (i = 0; i < 4096; i++)
		v[i] = 4096 - i;
	qsort(v, 4096, sizeof(*v), cmp_int);
	if (v[0] != 1)
		return 26;
	free(v);
	if (getrandom(buf, sizeof(buf), 0) != sizeof(buf) ||
	    clock_gettime(CLOCK_MONOTONIC, &ts) == -1 ||
	    prctl(PR_SET_NAME, "sluice-dns", 0, 0, 0) == -1)
		return 27;
	close(a);
	close(b);
	close(tfd);
	close(efd);
	close(ep);
	return 0;
}

/* Calls a room forbids (the table below says which); each returns 0
 * only if it survived. */
static int
f_execve(void)
{
	char *argv[] = { "/bin/true", NULL };

	execv(argv[0], argv);
	return 0;
}

static int
f_fork(void)
{
	pid_t p = fork();

	if (p == 0)
		_exit(0);
	return 0;
}

/* One line each: the call, then "survived" (a descriptor it gave is
 * closed). */
#define SURVIVES(name, call) \
	static int name(void) { (void)(call); return 0; }
#define SURVIVES_FD(name, call) \
	static int name(void) { int fd = (call); if (fd != -1) close(fd); \
	    return 0; }
SURVIVES_FD(f_netlink_audit, socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT))
SURVIVES_FD(f_packet, socket(AF_PACKET, SOCK_RAW, 0))
SURVIVES(f_unshare, unshare(CLONE_NEWNET))
SURVIVES(f_mount, mount("none", "/mnt", "tmpfs", 0, NULL))
SURVIVES(f_bpf, syscall(SYS_bpf, 0, NULL, 0))
SURVIVES(f_setuid, syscall(SYS_setuid, 0))
SURVIVES(f_umask, syscall(SYS_umask, 022))
SURVIVES(f_ptrace, ptrace(PTRACE_TRACEME, 0, 0, 0))
SURVIVES_FD(f_openat, open("/etc/hostname", O_RDONLY | O_CLOEXEC))
SURVIVES(f_kill, kill(getpid(), 0))
SURVIVES(f_ioctl, ioctl(0, FIONBIO, &(int){ 1 }))
SURVIVES(f_dumpable, prctl(PR_SET_DUMPABLE, 1, 0, 0, 0))
SURVIVES(f_mmap_exec, syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_EXEC,
    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))

/* A page of data made executable. */
static char exec_page[4096] __attribute__((aligned(4096)));
SURVIVES(f_mprotect_exec, mprotect(exec_page, sizeof(exec_page),
    PROT_READ | PROT_EXEC))

struct forbidden {
	const char	*name;
	int		(*fn)(void);
	int		 rooms;		/* bit per room it is forbidden in */
	int		 plain_only;	/* a sanitizer build allows it */
};

#define DNS	(1 << PRIV_ROOM_DNS)
#define BRIDGE	(1 << PRIV_ROOM_BRIDGE)

static const struct forbidden forbidden[] = {
	{ "execve", f_execve, DNS | BRIDGE, 0 },
	{ "fork", f_fork, DNS | BRIDGE, 0 },
	{ "socket(AF_NETLINK, NETLINK_AUDIT)", f_netlink_audit, DNS | BRIDGE,
	  0 },
	{ "socket(AF_PACKET)", f_packet, DNS | BRIDGE, 0 },
	{ "unshare", f_unshare, DNS | BRIDGE, 0 },
	{ "mount", f_mount, DNS | BRIDGE, 0 },
	{ "bpf", f_bpf, DNS | BRIDGE, 0 },
	{ "setuid", f_setuid, DNS | BRIDGE, 0 },
	{ "umask", f_umask, DNS | BRIDGE, 0 },
	{ "ptrace", f_ptrace, DNS | BRIDGE, 1 },
	{ "openat", f_openat, DNS, 1 },
	{ "kill", f_kill, DNS | BRIDGE, 0 },
	{ "ioctl(FIONBIO)", f_ioctl, DNS | BRIDGE, 0 },
	{ "prctl(PR_SET_DUMPABLE)", f_dumpable, DNS | BRIDGE, 1 },
	{ "mmap(PROT_EXEC)", f_mmap_exec, DNS, 0 },
	{ "mprotect(PROT_EXEC)", f_mprotect_exec, DNS, 0 },
};

#define NFORBIDDEN	(int)(sizeof(forbidden) / sizeof(forbidden[0]))

static void
expect_sigsys(int room, int i)
{
	struct plan pl = { NULL, room, NULL, forbidden[i].fn, 0 };
	struct report r;
	struct child ch;
	int status;

	if (!(forbidden[i].rooms & (1 << room)) ||
	    (forbidden[i].plain_only && PRIV_SANITIZED))
		return;
	start(&pl, &ch, &r);
	ck_assert_msg(r.drop_rc == 0 && r.seccomp_rc == 0, "%s", r.msg);
	status = finish(&ch);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS,
	    "%s in room %s: not killed by SIGSYS (%s %d)", forbidden[i].name,
	    priv_room_name(room), WIFEXITED(status) ? "exit" : "signal",
	    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

START_TEST(seccomp_forbidden_dns)
{
	NEED_ROOT();
	NO_VALGRIND();
	expect_sigsys(PRIV_ROOM_DNS, _i);
}
END_TEST

START_TEST(seccomp_forbidden_bridge)
{
	NEED_ROOT();
	NO_VALGRIND();
	expect_sigsys(PRIV_ROOM_BRIDGE, _i);
}
END_TEST

/* In log mode what would kill runs: the calls the DNS room forbids work. */
static int
after_log_mode(void)
{
	char buf[64];
	ssize_t n;
	int fd;

	(void)syscall(SYS_umask, 022);
	if ((fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC)) == -1)
		return 30;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return 31;
	if ((fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC,
	    NETLINK_ROUTE)) == -1)
		return 32;
	close(fd);
	return 0;
}

static int
after_abort(void)
{
	abort();
}

/* abort() signals this process (tgkill at itself is allowed): a crash
 * in a filtered child shows as what it is, not as a missing call. */
START_TEST(seccomp_abort_is_sigabrt)
{
	const struct plan pl = { NULL, PRIV_ROOM_DNS, NULL, after_abort, 0 };
	struct report r;
	struct child ch;
	int status;

	NEED_ROOT();
	NO_VALGRIND();
	start(&pl, &ch, &r);
	ck_assert_msg(r.drop_rc == 0 && r.seccomp_rc == 0, "%s", r.msg);
	status = finish(&ch);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
	    "status %#x", status);
}
END_TEST

START_TEST(seccomp_bad_mode)
{
	const struct plan pl = { NULL, PRIV_ROOM_DNS, "klil", after_log_mode,
	    0 };
	struct priv_state out;
	struct report r;
	struct child ch;

	NEED_ROOT();
	start(&pl, &ch, &r);
	ck_assert_int_eq(r.drop_rc, 0);
	ck_assert_int_eq(r.seccomp_rc, -1);
	ck_assert_msg(strstr(r.msg, "SLUICE_SECCOMP=klil") != NULL, "%s",
	    r.msg);
	ck_assert_int_eq(priv_status(ch.pid, &out), 0);
	ck_assert_int_eq(out.seccomp, 0);
	assert_exit0("child", finish(&ch));
}
END_TEST

static void *
thread_fn(void *arg)
{
	return arg;
}

/* What the bridge does: threads, reading files (the resolver's, TLS's),
 * the route socket getaddrinfo asks, pipes and its database's calls. Its
 * listener is bound by the parent and its stdio servers are started by a
 * starter: no listen, fork or exec (the forbidden table). */
static int
after_bridge_allowed(void)
{
	struct sockaddr_nl nl;
	pthread_t t;
	void *ret = NULL;
	char buf[64];
	int fd, p[2];

	if (pthread_create(&t, NULL, thread_fn, buf) != 0 ||
	    pthread_join(t, &ret) != 0 || ret != buf)
		return 40;
	if ((fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC)) == -1 ||
	    read(fd, buf, sizeof(buf)) < 0 || pread(fd, buf, 1, 0) < 0)
		return 41;
	close(fd);
	memset(&nl, 0, sizeof(nl));
	nl.nl_family = AF_NETLINK;
	if ((fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC,
	    NETLINK_ROUTE)) == -1 ||
	    bind(fd, (struct sockaddr *)&nl, sizeof(nl)) == -1)
		return 47;
	close(fd);
	if (pipe2(p, O_CLOEXEC) == -1)
		return 42;
	close(p[0]);
	close(p[1]);
	return 0;
}

/* Children that run under a filter and must end well: what each room's
 * process does works, and log mode kills nothing (after_log_mode makes
 * calls the DNS room forbids). A normal exit includes, in the ASan
 * build, LeakSanitizer's check under the filter. */
static const struct {
	const char	*name;
	struct plan	 pl;
} filtered[] = {
	{ "dns, exit at once", { NULL, PRIV_ROOM_DNS, NULL, NULL, 0 } },
	{ "dns, its calls", { NULL, PRIV_ROOM_DNS, NULL, after_dns_allowed,
	  0 } },
	{ "dns, log mode", { NULL, PRIV_ROOM_DNS, "log", after_log_mode, 0 } },
	{ "bridge, its calls", { NULL, PRIV_ROOM_BRIDGE, NULL,
	  after_bridge_allowed, 0 } },
};

START_TEST(seccomp_runs)
{
	NEED_ROOT();
	NO_VALGRIND();
	run_filtered(filtered[_i].name, &filtered[_i].pl);
}
END_TEST

START_TEST(status_self)
{
	struct priv_state st;

	ck_assert_int_eq(priv_status(0, &st), 0);
	ck_assert_int_eq(st.uid_real, getuid());
	ck_assert_int_eq(st.uid_eff, geteuid());
	ck_assert_int_eq(st.gid_real, getgid());
	if (geteuid() == 0)
		ck_assert_uint_ne(st.cap_bnd, 0);
	ck_assert_int_eq(priv_status(getpid(), &st), 0);
	ck_assert_int_eq(st.uid_real, getuid());
}
END_TEST

START_TEST(status_no_process)
{
	struct priv_state st;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
	long max = 0;

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%ld", &max), 1);
	fclose(f);
	memset(&st, 0xff, sizeof(st));
	errno = 0;
	ck_assert_int_eq(priv_status((pid_t)(max + 1), &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(st.uid_real, 0);	/* zeroed, not left */
}
END_TEST

/* A Groups: line longer than the reader's line buffer (here ~450 KiB)
 * is skipped, and the fields after it are still read. */
START_TEST(status_long_groups)
{
	const struct plan pl = { NULL, -1, NULL, NULL, 65536 };
	struct priv_state out;
	struct report r;
	struct child ch;

	NEED_ROOT();
	start(&pl, &ch, &r);
	ck_assert_int_eq(r.drop_rc, 0);
	ck_assert_int_eq(r.status_rc, 0);
	ck_assert_int_eq(r.st.uid_eff, 0);
	ck_assert_uint_ne(r.st.cap_bnd, 0);
	ck_assert_int_eq(priv_status(ch.pid, &out), 0);
	ck_assert_int_eq(out.seccomp, 0);
	ck_assert_uint_eq(out.cap_eff, r.st.cap_eff);
	assert_exit0("child", finish(&ch));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("privsep");
	TCase *tc = tcase_create("Core");
	SRunner *sr;
	int nf;

	tcase_add_unchecked_fixture(tc, user_setup, user_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, room_names);
	tcase_add_test(tc, user_refuses_root);
	tcase_add_test(tc, user_refuses_missing);
	tcase_add_test(tc, user_resolves);
	tcase_add_test(tc, drop_refuses_root_ids);
	tcase_add_test(tc, drop_unprivileged);
	tcase_add_test(tc, drop_chroot);
	tcase_add_loop_test(tc, seccomp_forbidden_dns, 0, NFORBIDDEN);
	tcase_add_loop_test(tc, seccomp_forbidden_bridge, 0, NFORBIDDEN);
	tcase_add_loop_test(tc, seccomp_runs, 0,
	    (int)(sizeof(filtered) / sizeof(filtered[0])));
	tcase_add_test(tc, seccomp_abort_is_sigabrt);
	tcase_add_test(tc, seccomp_bad_mode);
	tcase_add_test(tc, status_self);
	tcase_add_test(tc, status_no_process);
	tcase_add_test(tc, status_long_groups);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
