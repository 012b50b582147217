/*
 * check_ns_attach: attach mode of netns/ (ns_attach.c) against the real
 * kernel: what a path must be, what is refused before anything is made,
 * and that ns_detach takes back exactly what ns_attach added. Needs root.
 *
 * Like check_ns, main() moves the run into a private network and mount
 * namespace first, so the "host" here is a throwaway; the namespaces to
 * attach are made by the test itself (unshare in a thread, held by fd) and
 * die with the process.
 */
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "netns/netns.h"

static char	g_tmp[64], g_netns_dir[96], g_etc_dir[96], g_id[32], g_if[16];
static struct in_addr g_pool, g_service;

/* A new, empty network namespace held by an fd (the thread returns to
 * its own). */
static int
new_netns(void)
{
	int self, fd;

	ck_assert_int_ne(self = open("/proc/thread-self/ns/net", O_RDONLY |
	    O_CLOEXEC), -1);
	ck_assert_int_eq(unshare(CLONE_NEWNET), 0);
	ck_assert_int_ne(fd = open("/proc/thread-self/ns/net", O_RDONLY |
	    O_CLOEXEC), -1);
	ck_assert_int_eq(setns(self, CLONE_NEWNET), 0);
	close(self);
	return fd;
}

/* Runs sh -c cmd inside the namespace of fd, its output into out. */
static void
run_in(int fd, const char *cmd, char *out, size_t len)
{
	char line[512];
	FILE *p;
	size_t n;

	snprintf(line, sizeof(line), "nsenter --net=/proc/%ld/fd/%d sh -c '%s'",
	    (long)getpid(), fd, cmd);
	ck_assert_ptr_nonnull(p = popen(line, "r"));
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	pclose(p);
}

static void
mkspec(struct ns_spec *s)
{
	char err[256];

	ck_assert_msg(ns_spec_init(s, g_id, 1, &g_pool, 16, &g_service,
	    g_netns_dir, g_etc_dir, err, sizeof(err)) == 0, "%s", err);
	snprintf(s->host_if, sizeof(s->host_if), "%s", g_if);
}

START_TEST(test_path_valid)
{
	char long_path[200];

	ck_assert_int_eq(ns_attach_path_valid("/proc/1/ns/net"), 1);
	ck_assert_int_eq(ns_attach_path_valid("/run/docker/netns/abc"), 1);
	ck_assert_int_eq(ns_attach_path_valid(NULL), 0);
	ck_assert_int_eq(ns_attach_path_valid(""), 0);
	ck_assert_int_eq(ns_attach_path_valid("proc/1/ns/net"), 0);
	ck_assert_int_eq(ns_attach_path_valid("/a b"), 0);
	ck_assert_int_eq(ns_attach_path_valid("/a\nb"), 0);
	ck_assert_int_eq(ns_attach_path_valid("/a\x80"), 0);
	memset(long_path, 'a', sizeof(long_path));
	long_path[0] = '/';
	long_path[NS_ATTACH_PATH_MAX] = '\0';
	ck_assert_int_eq(ns_attach_path_valid(long_path), 1);
	long_path[NS_ATTACH_PATH_MAX] = 'a';
	long_path[NS_ATTACH_PATH_MAX + 1] = '\0';
	ck_assert_int_eq(ns_attach_path_valid(long_path), 0);
}
END_TEST

START_TEST(test_open_refusals)
{
	char err[256];
	uint64_t dev, ino;
	int fd = -1;

	ck_assert_int_eq(ns_attach_open("/etc/passwd", &fd, &dev, &ino, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_msg(strstr(err, "is not a namespace") != NULL, "%s", err);
	ck_assert_int_eq(ns_attach_open("/proc/self/ns/mnt", &fd, &dev, &ino,
	    err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "not a network namespace") != NULL, "%s",
	    err);
	ck_assert_int_eq(ns_attach_open("/proc/thread-self/ns/net", &fd, &dev,
	    &ino, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "daemon's own") != NULL, "%s", err);
	ck_assert_int_eq(ns_attach_open("/nonexistent/x", &fd, &dev, &ino,
	    err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(ns_attach_open("relative", &fd, &dev, &ino, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(fd, -1);
}
END_TEST

START_TEST(test_attach_detach)
{
	struct ns_spec s;
	struct stat a, b;
	char err[256], found[512], path[PATH_MAX], out[2048], before[64];
	uint64_t dev, ino;
	uint32_t prior, prior2 = 7;
	int held, fd;

	held = new_netns();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", held);
	ck_assert_msg(ns_attach_open(path, &fd, &dev, &ino, err,
	    sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(fstat(held, &a), 0);
	ck_assert_uint_eq(dev, (uint64_t)a.st_dev);
	ck_assert_uint_eq(ino, (uint64_t)a.st_ino);
	/* Its lo down and forwarding on, as a provider may leave them. */
	run_in(fd, "echo 1 > /proc/sys/net/ipv4/ip_forward; cat "
	    "/proc/sys/net/ipv4/ip_forward "
	    "/proc/sys/net/ipv6/conf/default/disable_ipv6", before,
	    sizeof(before));
	ck_assert_int_eq(ns_attach_probe(fd, found, sizeof(found)), 1);
	ck_assert_str_eq(found, "");

	mkspec(&s);
	ck_assert_msg(ns_attach(&s, fd, &prior, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert_uint_eq(prior & ~NS_PRIOR_MASK, 0);
	ck_assert(prior & NS_PRIOR_KNOWN);
	ck_assert(prior & NS_PRIOR_LO_DOWN);
	ck_assert(prior & NS_PRIOR_FORWARD);
	/* Pinned: the pin is that namespace. */
	snprintf(path, sizeof(path), "%s/%s", s.netns_dir, s.netns);
	ck_assert_int_eq(stat(path, &b), 0);
	ck_assert(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
	ck_assert_int_eq(ns_exists(&s), 1);
	run_in(fd, "ip -o -4 addr show dev eth0; ip -4 route show default; "
	    "cat /proc/sys/net/ipv4/ip_forward", out, sizeof(out));
	ck_assert_msg(strstr(out, "inet 10.231.0.6/30") != NULL &&
	    strstr(out, "default via 10.231.0.5 dev eth0") != NULL &&
	    strstr(out, "\n0\n") != NULL, "%s", out);
	/* Wired, it has a way out: a second attach would be refused. */
	ck_assert_int_eq(ns_attach_probe(fd, found, sizeof(found)), 0);
	ck_assert_msg(strstr(found, "interface eth0 (up)") != NULL &&
	    strstr(found, "address 10.231.0.6/30 on eth0") != NULL &&
	    strstr(found, "route default/0 via 10.231.0.5 dev eth0") != NULL,
	    "%s", found);
	ck_assert_int_eq(ns_attach(&s, fd, &prior2, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EBUSY);
	ck_assert_uint_eq(prior2, 0);

	ck_assert_msg(ns_detach(&s, fd, prior, err, sizeof(err)) == 0, "%s",
	    err);
	/* The namespace lives on (held), as it was. */
	ck_assert_int_eq(ns_attach_probe(held, found, sizeof(found)), 1);
	run_in(held, "cat /proc/sys/net/ipv4/ip_forward "
	    "/proc/sys/net/ipv6/conf/default/disable_ipv6", out, sizeof(out));
	ck_assert_str_eq(out, before);
	run_in(held, "ip -o link show lo", out, sizeof(out));
	ck_assert_msg(strstr(out, ",UP") == NULL, "lo up again: %s", out);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(ns_exists(&s), 0);
	/* Twice is no error. */
	ck_assert_int_eq(ns_detach(&s, fd, prior, err, sizeof(err)), 0);
	close(fd);
	close(held);
}
END_TEST

START_TEST(test_busy_untouched)
{
	struct ns_spec s;
	char err[512], found[512], out[2048];
	uint32_t prior = 7;
	int fd;

	fd = new_netns();
	run_in(fd, "ip link add d0 type veth peer name d1 && "
	    "ip addr add 192.0.2.9/24 dev d0 && ip link set d0 up", out,
	    sizeof(out));
	ck_assert_int_eq(ns_attach_probe(fd, found, sizeof(found)), 0);
	ck_assert_msg(strstr(found, "interface d0 (up)") != NULL &&
	    strstr(found, "address 192.0.2.9/24 on d0") != NULL &&
	    strstr(found, "route 192.0.2.0/24 dev d0") != NULL, "%s", found);
	mkspec(&s);
	ck_assert_int_eq(ns_attach(&s, fd, &prior, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EBUSY);
	ck_assert_uint_eq(prior, 0);
	ck_assert_msg(strstr(err, "way out") != NULL, "%s", err);
	ck_assert_int_eq(ns_exists(&s), 0);
	run_in(fd, "ip -o link show | wc -l", out, sizeof(out));
	ck_assert_str_eq(out, "3\n");
	close(fd);
}
END_TEST

static Suite *
attach_suite(void)
{
	Suite *s = suite_create("ns_attach");
	TCase *tc = tcase_create("attach");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_path_valid);
	tcase_add_test(tc, test_open_refusals);
	tcase_add_test(tc, test_attach_detach);
	tcase_add_test(tc, test_busy_untouched);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	char err[256];
	int failed;

	if (geteuid() != 0) {
		fprintf(stderr, "check_ns_attach: needs root\n");
		return 1;
	}
	if (unshare(CLONE_NEWNET | CLONE_NEWNS) == -1 ||
	    mount("", "/", "none", MS_REC | MS_SLAVE, NULL) == -1) {
		fprintf(stderr, "check_ns_attach: private namespaces: %s\n",
		    strerror(errno));
		return 1;
	}
	snprintf(g_tmp, sizeof(g_tmp), "/tmp/check_ns_attach.XXXXXX");
	if (mkdtemp(g_tmp) == NULL)
		return 1;
	snprintf(g_netns_dir, sizeof(g_netns_dir), "%s/netns", g_tmp);
	snprintf(g_etc_dir, sizeof(g_etc_dir), "%s/etc", g_tmp);
	snprintf(g_id, sizeof(g_id), "ta%ld", (long)getpid());
	snprintf(g_if, sizeof(g_if), "sl-ta%ld", (long)getpid() % 10000);
	inet_pton(AF_INET, "10.231.0.0", &g_pool);
	inet_pton(AF_INET, "10.231.255.254", &g_service);
	if (ns_dirs_setup(g_netns_dir, g_etc_dir, err, sizeof(err)) == -1) {
		fprintf(stderr, "check_ns_attach: %s\n", err);
		return 1;
	}
	sr = srunner_create(attach_suite());
	/* One process: the namespaces the tests make are held by fds. */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	(void)umount2(g_netns_dir, MNT_DETACH);
	(void)rmdir(g_netns_dir);
	(void)rmdir(g_etc_dir);
	(void)rmdir(g_tmp);
	return failed == 0 ? 0 : 1;
}
