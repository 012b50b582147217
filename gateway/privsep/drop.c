/*
 * drop.c: the one-way trip from root to an unprivileged user, for the
 * children of sluiced that parse sandbox input. Every step is checked
 * after the fact as well as by its return value, because a drop that
 * silently half-worked (a capability left in the bounding set, a saved
 * uid still 0) looks exactly like one that worked until someone uses it.
 * The checks use system calls, not /proc, so they hold inside a chroot.
 */
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <linux/capability.h>
#include <linux/securebits.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/privsep/priv.h"

/* getpwnam_r's buffer: what sysconf suggests, doubled on ERANGE up to
 * this (a passwd entry is a few hundred bytes; NSS modules vary). */
#define PRIV_PWBUF_MAX	(1024 * 1024)

const char *
priv_room_name(enum priv_room room)
{
	switch (room) {
	case PRIV_ROOM_DNS:
		return "dns";
	case PRIV_ROOM_BRIDGE:
		return "bridge";
	}
	return "?";
}

int
priv_user(const char *name, uid_t *uid, gid_t *gid, char *err,
    size_t errlen)
{
	struct passwd pw, *res = NULL;
	long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
	size_t len = hint > 0 ? (size_t)hint : 4096;
	char *buf = NULL, *nbuf;
	int rc;

	if (name == NULL || *name == '\0') {
		snprintf(err, errlen, "no user name given");
		return -1;
	}
	for (;;) {
		if ((nbuf = realloc(buf, len)) == NULL) {
			free(buf);
			snprintf(err, errlen, "user %s: out of memory", name);
			return -1;
		}
		buf = nbuf;
		rc = getpwnam_r(name, &pw, buf, len, &res);
		if (rc != ERANGE || len >= PRIV_PWBUF_MAX)
			break;
		len *= 2;
	}
	if (rc != 0) {
		snprintf(err, errlen, "user %s: lookup failed: %s", name,
		    strerror(rc));
		free(buf);
		return -1;
	}
	if (res == NULL) {
		snprintf(err, errlen, "user %s does not exist; create it with: "
		    "useradd --system --no-create-home --shell /usr/sbin/nologin "
		    "%s", name, name);
		free(buf);
		return -1;
	}
	if (pw.pw_uid == 0 || pw.pw_gid == 0) {
		snprintf(err, errlen, "user %s has uid %ld and gid %ld: an "
		    "unprivileged child needs a user that is neither uid 0 nor "
		    "in group 0", name, (long)pw.pw_uid, (long)pw.pw_gid);
		free(buf);
		return -1;
	}
	*uid = pw.pw_uid;
	*gid = pw.pw_gid;
	free(buf);
	return 0;
}

#if PRIV_SANITIZED
/*
 * LeakSanitizer's check at exit lists /proc/<pid>/task, which a chroot
 * hides: it then fails the process ("LeakSanitizer has encountered a
 * fatal error", exit 1). A sanitizer build chroots like any other (so
 * that tests see what production does), and a chrooted process turns the
 * leak check off through LeakSanitizer's hook instead; other processes
 * keep it. See priv.h.
 */
static volatile int priv_chrooted;

int	__lsan_is_turned_off(void);

int
__lsan_is_turned_off(void)
{
	return priv_chrooted;
}
#endif

/* The empty directory the child is locked into: root's, and nobody else
 * may write there (the child could otherwise plant files, or another user
 * swap the directory for a link before the chroot). */
static int
enter_root(const char *dir, char *err, size_t errlen)
{
	struct stat st;

	if (stat(dir, &st) == -1) {
		snprintf(err, errlen, "chroot %s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
		snprintf(err, errlen, "chroot %s: must be a directory owned by "
		    "root and writable by no one else", dir);
		return -1;
	}
	if (chroot(dir) == -1 || chdir("/") == -1) {
		snprintf(err, errlen, "chroot %s: %s", dir, strerror(errno));
		return -1;
	}
#if PRIV_SANITIZED
	priv_chrooted = 1;
#endif
	return 0;
}

/* Empties the bounding set: what any later exec could regain. Needs
 * CAP_SETPCAP, so it runs while the process is still root. The kernel's
 * last capability is where PR_CAPBSET_READ says EINVAL. */
static int
drop_bounding(char *err, size_t errlen)
{
	int c, in;

	for (c = 0; (in = prctl(PR_CAPBSET_READ, c, 0, 0, 0)) >= 0; c++) {
		if (in == 1 && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == -1) {
			snprintf(err, errlen, "bounding set: drop capability "
			    "%d: %s", c, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* The capability sets of this process, through the raw system calls
 * (sluice links no libcap). get != 0 reads into d, else writes d. */
static int
caps_io(struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3], int get)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };

	return (int)syscall(get ? SYS_capget : SYS_capset, &h, d);
}

/* After the fact: what an attacker in this process could use to get
 * back. Each check names what it found. */
static int
verify(uid_t uid, gid_t gid, char *err, size_t errlen)
{
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	uid_t ru, eu, su;
	gid_t rg, eg, sg, groups[2];
	int i, n;

	if (getresuid(&ru, &eu, &su) == -1 || ru != uid || eu != uid ||
	    su != uid || getresgid(&rg, &eg, &sg) == -1 || rg != gid ||
	    eg != gid || sg != gid) {
		snprintf(err, errlen, "ids not all %ld/%ld after the drop",
		    (long)uid, (long)gid);
		return -1;
	}
	n = getgroups(2, groups);
	if (n != 1 || groups[0] != gid) {
		snprintf(err, errlen, "supplementary groups are not just %ld",
		    (long)gid);
		return -1;
	}
	if (setuid(0) != -1 || setgid(0) != -1) {
		snprintf(err, errlen, "setuid(0) or setgid(0) still works");
		return -1;
	}
	/* Zeroed first: memcheck counts only the first word as written by
	 * capget (the kernel writes both). */
	memset(d, 0, sizeof(d));
	if (caps_io(d, 1) == -1) {
		snprintf(err, errlen, "capget: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (d[i].effective != 0 || d[i].permitted != 0 ||
		    d[i].inheritable != 0) {
			snprintf(err, errlen, "capabilities left: effective "
			    "%#x permitted %#x inheritable %#x (word %d)",
			    d[i].effective, d[i].permitted, d[i].inheritable,
			    i);
			return -1;
		}
	for (i = 0; (n = prctl(PR_CAPBSET_READ, i, 0, 0, 0)) >= 0; i++)
		if (n != 0 || prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, i,
		    0, 0) != 0) {
			snprintf(err, errlen, "capability %d left in the "
			    "bounding or ambient set", i);
			return -1;
		}
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
		snprintf(err, errlen, "no_new_privs is not set");
		return -1;
	}
	return 0;
}

int
priv_drop(uid_t uid, gid_t gid, const char *root_dir, char *err,
    size_t errlen)
{
	struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3];

	if (uid == 0 || gid == 0) {
		snprintf(err, errlen, "refusing to drop to uid %ld gid %ld",
		    (long)uid, (long)gid);
		return -1;
	}
	if (geteuid() != 0) {
		snprintf(err, errlen, "priv_drop must run as root (euid %ld)",
		    (long)geteuid());
		return -1;
	}
	if (root_dir != NULL && enter_root(root_dir, err, errlen) == -1)
		return -1;
	if (drop_bounding(err, errlen) == -1)
		return -1;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1) {
		snprintf(err, errlen, "ambient set: %s", strerror(errno));
		return -1;
	}
	/* Should uid 0 ever come back, it brings no capabilities (NOROOT),
	 * and nothing can be raised into the ambient set. KEEP_CAPS stays
	 * off and locked: the uid change below must clear the permitted and
	 * effective sets (NO_SETUID_FIXUP is left off for the same reason).
	 * CAP_SETPCAP is needed, so this too comes before the uid change. */
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
	    SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED |
	    SECBIT_KEEP_CAPS_LOCKED, 0, 0, 0) == -1) {
		snprintf(err, errlen, "securebits: %s", strerror(errno));
		return -1;
	}
	if (setgroups(1, &gid) == -1 || setresgid(gid, gid, gid) == -1 ||
	    setresuid(uid, uid, uid) == -1) {
		snprintf(err, errlen, "switch to uid %ld gid %ld: %s",
		    (long)uid, (long)gid, strerror(errno));
		return -1;
	}
	/* The uid change emptied permitted and effective; inheritable is
	 * not touched by it, so all three are written empty. */
	memset(none, 0, sizeof(none));
	if (caps_io(none, 0) == -1) {
		snprintf(err, errlen, "capset: %s", strerror(errno));
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		snprintf(err, errlen, "no_new_privs: %s", strerror(errno));
		return -1;
	}
	/* See priv.h. LeakSanitizer, which ptraces the process at exit,
	 * makes it dumpable for that itself (a prctl its filter group
	 * allows). */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1) {
		snprintf(err, errlen, "dumpable: %s", strerror(errno));
		return -1;
	}
	return verify(uid, gid, err, errlen);
}
