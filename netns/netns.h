/*
 * netns: the lifecycle of a sandbox's network namespace.
 *
 * A sandbox lives in a network namespace `sluice-<id>` pinned, as iproute2
 * does, by a bind mount at <netns_dir>/sluice-<id>, so that `ip netns exec`,
 * runc and Firecracker jailers can use it. Its only link to the world is a
 * veth pair: `sl-<n>` on the host, where the nftables rules of
 * netns/fw_rules.c apply, and `eth0` inside, whose default route points at
 * the host side. IPv6 is disabled inside so that no IPv6 path bypasses those
 * rules, and <etc_dir>/sluice-<id>/resolv.conf names the service address.
 *
 * Everything here runs in the privileged parent (CAP_NET_ADMIN and
 * CAP_SYS_ADMIN). The functions that switch namespaces (ns_create,
 * ns_enter) change only the calling thread's network namespace and restore
 * it before they return (ns_enter excepted: its point is to stay).
 *
 * Conventions: 0 on success, -1 on failure with errno set and, where the
 * function takes one, a message in the caller's buffer `err` (errlen bytes,
 * always NUL-terminated when errlen > 0; err may be NULL). Nothing here
 * logs or exits.
 */
#ifndef SLUICE_NETNS_NETNS_H
#define SLUICE_NETNS_NETNS_H

#include <sys/types.h>
#include <netinet/in.h>

#include <stddef.h>
#include <stdint.h>

#define NS_NETNS_DIR_DEFAULT	"/run/netns"
#define NS_ETC_DIR_DEFAULT	"/etc/netns"
#define NS_NETNS_PREFIX		"sluice-"
#define NS_LINK_PREFIX		"sl-"
#define NS_RETIRED_PREFIX	"sg-"	/* host links on their way out */
#define NS_ID_MAX		32	/* characters in a sandbox id */
#define NS_SANDBOX_IF		"eth0"

/*
 * What ns_create needs to build one sandbox's namespace. It is flat (no
 * pointers) because it will cross a privilege boundary: ns_create and
 * ns_delete re-validate every field (ns_spec_valid) and refuse a spec that
 * is not exactly what ns_spec_init would make, apart from host_if, which
 * may be any "sl-[a-z0-9-]{1,12}" so that tests can pick unique names.
 * Addresses are in network byte order.
 */
struct ns_spec {
	char		id[NS_ID_MAX + 1];	/* [a-z0-9][a-z0-9-]{0,31} */
	char		netns[48];		/* "sluice-<id>" */
	char		host_if[16];		/* "sl-<index>" (IFNAMSIZ) */
	uint32_t	index;			/* slot in the address pool */
	struct in_addr	host_addr;		/* host side of the veth */
	struct in_addr	sandbox_addr;		/* eth0 inside */
	struct in_addr	service_addr;		/* DNS proxy and bridge */
	uint8_t		prefixlen;		/* 30 or 31 */
	char		netns_dir[64];		/* absolute; /run/netns */
	char		etc_dir[64];		/* absolute; /etc/netns */
};

/* --------------------------------------------------------- ns.c: specs */

/* ns_id_valid: 1 if id matches [a-z0-9][a-z0-9-]{0,31}, else 0 (NULL,
 * empty, too long, uppercase, '/', '.', anything else). */
int	ns_id_valid(const char *id);

/*
 * ns_pool_addrs: the addresses of pool slot `index`. The pool
 * pool_net/pool_prefix is cut into /30s; slot i is pool + 4*i with the host
 * side at .1 and the sandbox at .2 of that /30. The pool's last /30 is
 * reserved for the service address and never handed out. Sets *host,
 * *sandbox and *prefixlen (30) only on success. -1/EINVAL when the pool is
 * malformed (prefix outside 1..29, host bits set) or index is outside it.
 */
int	ns_pool_addrs(const struct in_addr *pool_net, uint8_t pool_prefix,
	    uint32_t index, struct in_addr *host, struct in_addr *sandbox,
	    uint8_t *prefixlen);

/*
 * ns_spec_init: fills *s for sandbox `id` at pool slot `index`: netns
 * "sluice-<id>", host_if "sl-<index>", addresses from ns_pool_addrs,
 * service_addr, and the directories (NULL means the defaults above).
 * -1/EINVAL (message in err) on a bad id, slot, service address (inside
 * the slot's /30) or a directory that is not absolute or too long; *s is
 * zeroed in that case.
 */
int	ns_spec_init(struct ns_spec *s, const char *id, uint32_t index,
	    const struct in_addr *pool_net, uint8_t pool_prefix,
	    const struct in_addr *service_addr, const char *netns_dir,
	    const char *etc_dir, char *err, size_t errlen);

/*
 * ns_spec_valid: 0 if every field of *s is well formed and consistent
 * (NUL-terminated strings, valid id, netns == "sluice-<id>", host_if
 * "sl-[a-z0-9-]{1,12}", addresses in one /30 or /31 and distinct from the
 * service address, absolute directories without "." or ".." components),
 * else -1/EINVAL with the first problem in err.
 */
int	ns_spec_valid(const struct ns_spec *s, char *err, size_t errlen);

/* --------------------------------------------------- ns.c: host setup */

/*
 * ns_dirs_setup: makes netns_dir exist and be a shared mount point
 * (bind-mounting it onto itself first if it is not a mount point), as
 * `ip netns add` does, so that unmounting a pin in one mount namespace
 * unmounts it everywhere; creates etc_dir if missing. Idempotent. Call it
 * once per directory pair before ns_create (ns_host_setup does it for the
 * defaults): ns_create does no mount-propagation work itself.
 */
int	ns_dirs_setup(const char *netns_dir, const char *etc_dir, char *err,
	    size_t errlen);

/*
 * ns_host_setup: once at daemon start, in the daemon's (host) network
 * namespace: puts service_addr/32 on `lo` and brings lo up, enables IPv4
 * forwarding, and calls ns_dirs_setup(NS_NETNS_DIR_DEFAULT,
 * NS_ETC_DIR_DEFAULT). Idempotent.
 */
int	ns_host_setup(const struct in_addr *service_addr, char *err,
	    size_t errlen);

/* ---------------------------------------------------- ns.c: lifecycle */

/*
 * ns_create: builds the sandbox described by *s (validated first), all or
 * nothing: the pinned namespace <netns_dir>/<netns>, the veth pair (host_if
 * on the host with host_addr/prefixlen, up, IPv6 off, proxy_arp off,
 * rp_filter strict; eth0 inside with sandbox_addr/prefixlen, up, default
 * route via host_addr), lo up inside, IPv6 and forwarding off inside, and
 * <etc_dir>/<netns>/resolv.conf. On any failure everything made so far is
 * removed and the calling thread is back in its own namespace. errno:
 * EEXIST if the pin or host_if already exists (the existing one is left
 * untouched), EINVAL for a bad spec, ENOENT if netns_dir is missing
 * (see ns_dirs_setup), else the failing call's errno.
 *
 * The cost does not grow with the number of sandboxes. For that the
 * sysctls are reached through a procfs instance private to the process (a
 * detached mount: no path leads to it), which ns_create keeps open, as one
 * close-on-exec fd, from its first call to the end of the process and
 * replaces now and then (ns.c says why). Thread-safe, as before: calls
 * from several threads share it under a lock.
 */
int	ns_create(const struct ns_spec *s, char *err, size_t errlen);

/*
 * ns_delete: removes what ns_create made: the host link, the pin (detached
 * unmount and unlink) and <etc_dir>/<netns>/ with its files. Idempotent:
 * parts already gone are not errors. Tries every part and reports the
 * first real error. EINVAL for a bad spec (nothing touched).
 *
 * The host link is removed from service at once: when its peer is in the
 * pinned namespace (checked through the kernel's namespace ids) it is
 * stripped of its address, set down and renamed "sg-<ifindex>" (address
 * first: that order spares the kernel a sweep of the whole FIB, which
 * grows with the number of sandboxes; call fw_sandbox_del before, so the
 * firewall drops what the sandbox sends meanwhile), and the kernel
 * destroys the pair together with the namespace, when the last reference
 * to it (a process inside, an open fd or socket) goes. Unregistering a
 * veth synchronously waits for an RCU grace period (tens of ms here); this
 * way ns_delete does not, and host_if is free for reuse on return. Any
 * other host link named host_if is deleted synchronously.
 */
int	ns_delete(const struct ns_spec *s, char *err, size_t errlen);

/*
 * ns_exists: 1 if the sandbox is whole (the pin is a mounted namespace and
 * host_if exists), 0 if it is absent or only partly there (reconciliation
 * should ns_delete it), -1 on error (EINVAL for a bad spec).
 */
int	ns_exists(const struct ns_spec *s);

/*
 * ns_netns_fd: opens the pinned namespace (O_RDONLY | O_CLOEXEC) for
 * setns(2). The caller owns and closes the fd. -1 with errno ENOENT if
 * there is no pin, EINVAL if the spec is bad or the file is not a
 * namespace (a reservation left by a crash).
 */
int	ns_netns_fd(const struct ns_spec *s);

/*
 * ns_list: what is there now, for reconciliation after a restart. *netns
 * gets the names in netns_dir of the form "sluice-<valid id>" (NULL means
 * NS_NETNS_DIR_DEFAULT) and *links the host links (in the calling thread's
 * namespace) whose names start with "sl-". Both are NULL-terminated arrays,
 * sorted, owned by the caller and freed with ns_names_free; the counts go
 * to *nnetns and *nlinks when those are not NULL. Out-parameters are set
 * only on success. A missing netns_dir is an empty list.
 */
int	ns_list(const char *netns_dir, char ***netns, size_t *nnetns,
	    char ***links, size_t *nlinks, char *err, size_t errlen);
/* ns_names_free: frees an array from ns_list; NULL is a no-op. */
void	ns_names_free(char **names);

/*
 * ns_nsid: the id the calling thread's network namespace gives the
 * namespace pinned at path: 0 with *nsid >= 0, or 0 with *nsid = -1 when
 * it has none (the two were never joined by a link, so the namespace is
 * not one this namespace made). -1 with errno on failure: EINVAL if path
 * is not a namespace (a plain file, a symlink), else open's or the
 * kernel's errno. Read-only; needs no privilege.
 */
int	ns_nsid(const char *path, int *nsid, char *err, size_t errlen);

/* ------------------------------------------- ns_attach.c: attaching
 *
 * A namespace made by someone else (a container's) wired like one of
 * ns_create's and pinned at <netns_dir>/<netns> the same way; see
 * ns_attach.c. */

#define NS_ATTACH_PATH_MAX	127	/* characters in a path to attach */

/* What an attach changed and a detach sets back (ns_attach's *prior). */
#define NS_PRIOR_KNOWN		0x01u	/* the bits below are a record */
#define NS_PRIOR_LO_DOWN	0x02u	/* lo was down */
#define NS_PRIOR_FORWARD	0x04u	/* ip_forward was 1 */
#define NS_PRIOR_V6_DEFAULT	0x08u	/* default/disable_ipv6 was 0 */
#define NS_PRIOR_MASK		0x0fu

/* ns_attach_path_valid: 1 if path is absolute, at most
 * NS_ATTACH_PATH_MAX characters, printable ASCII without spaces. */
int	ns_attach_path_valid(const char *path);

/*
 * ns_attach_open: opens the network namespace at path (a bind mount such
 * as /run/docker/netns/<x>, or /proc/<pid>/ns/net) for ns_attach: *fd
 * (O_RDONLY | O_CLOEXEC, the caller's to close) and its identity, the
 * device and inode every later check compares (never the path again).
 * -1/EINVAL with a message for a path that is malformed, not a namespace,
 * not a network namespace, or the calling thread's own namespace; else
 * open's errno (ENOENT: nothing there).
 */
int	ns_attach_open(const char *path, int *fd, uint64_t *dev,
	    uint64_t *ino, char *err, size_t errlen);

/*
 * ns_attach_probe: 1 if the namespace of nsfd has no way out (no
 * interface but lo, no address on lo beyond loopback, no route in a
 * table other than local except through lo), 0 if it has, with what was
 * found in found ("interface eth0 (up); address 172.17.0.2/16 on eth0;
 * route default/0 via 172.17.0.1 dev eth0"), -1 with errno on failure.
 * Enters the namespace in the calling thread for a moment.
 */
int	ns_attach_probe(int nsfd, char *found, size_t foundlen);

/*
 * ns_attach: wires the namespace of nsfd as ns_create wires its own, all
 * or nothing: refuses (EBUSY, what was found in err) a namespace
 * ns_attach_probe does not pass, pins it at <netns_dir>/<netns> (EEXIST
 * if taken), sets "default" IPv6 off and forwarding off inside, lo up,
 * the veth pair with eth0 inside (IPv6 off, sandbox_addr, up, default
 * route) and host_if as ns_create makes it, and the resolv.conf. *prior
 * gets what was changed inside (NS_PRIOR_*), for ns_detach; the caller
 * keeps it (it is needed after a restart too). On failure all of it is
 * undone and *prior is 0.
 */
int	ns_attach(const struct ns_spec *s, int nsfd, uint32_t *prior,
	    char *err, size_t errlen);

/*
 * ns_detach: takes back what ns_attach added, and only that: deletes
 * host_if (and with it eth0 inside; synchronously, the namespace lives
 * on), sets the sysctls and lo of prior back inside nsfd (skipped when
 * nsfd is -1: a namespace whose identity is no longer known is not
 * touched), drops the pin and the etc directory. The namespace and its
 * processes stay. Idempotent; tries every part, reports the first error.
 */
int	ns_detach(const struct ns_spec *s, int nsfd, uint32_t prior,
	    char *err, size_t errlen);

/* ------------------------------------------------ ns_enter.c: entering */

/*
 * ns_enter: for `sluice exec`, in the process about to exec the sandboxed
 * command (single-threaded): joins <netns_dir>/<netns>, unshares the mount
 * namespace, makes / a recursive slave (nothing propagates back), remounts
 * /sys for the new namespace and bind-mounts each regular file of
 * <etc_dir>/<netns>/ over /etc/<file>, as `ip netns exec` does. NULL
 * directories mean the defaults. Unlike iproute2, a failed /etc bind is an
 * error (fail closed): the caller must not exec. On failure the process
 * may be half-switched and should exit.
 */
int	ns_enter(const char *netns_dir, const char *etc_dir, const char *netns,
	    char *err, size_t errlen);

/* ns_isolate: deletes the sandbox link (NS_SANDBOX_IF, and so its host
 * peer) inside the namespace nsfd refers to, for a namespace its
 * processes keep alive after its pin is gone (netns/ns_isolate.c). 0, or
 * -1 with err. */
int	ns_isolate(int nsfd, char *err, size_t errlen);

/* --------------------------------------------------- ns_cgroup.c */

/* ns_cg_write: value into dir/file, an existing file of a cgroup (no
 * symlink followed). 0, or -1 with errno. */
int	ns_cg_write(const char *dir, const char *file, const char *value);
/* ns_cg_read: the first len - 1 bytes of dir/file (a cgroup's), NUL-
 * terminated. How many, or -1 with errno. */
ssize_t	ns_cg_read(const char *dir, const char *file, char *buf, size_t len);
/* ns_cg_kill: SIGKILL to every member of the cgroup dir: cgroup.kill
 * where there is one (v2, atomic against forks), else the members it
 * lists, at most 64 passes. How many were signalled (0 after
 * cgroup.kill), or -1. */
int	ns_cg_kill(const char *dir);

#endif /* SLUICE_NETNS_NETNS_H */
