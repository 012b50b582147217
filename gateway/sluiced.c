/*
 * sluiced.c: main() of the daemon. It reads the config and the policies
 * (refusing to start on any error, printed as FILE:LINE:COL: message), opens
 * the control socket, daemonises unless told not to, and runs the one event
 * loop until SIGTERM or SIGINT. Signals arrive through a signalfd in that
 * loop, so no work ever happens in a signal handler: SIGHUP is an ordinary
 * event that reloads the policies.
 */
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/bridge/bridge.h"
#include "gateway/brwire.h"
#include "gateway/ctl/ctl.h"
#include "gateway/ctl/sandboxes.h"
#include "gateway/dns/dns.h"
#include "gateway/dnswire.h"
#include "gateway/flowrec.h"
#include "gateway/ev.h"
#include "gateway/fleet/fleetd.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/netdeny.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"
#include "policy/policy.h"

#define MAX_ERRORS	64

/*
 * Descriptors besides the connection caps (see fit_nofile): the listeners,
 * epoll, signalfd, netlink (nftables, rtnetlink, nflog), the audit, sandbox
 * and bridge databases (with their -wal and -shm files), audit sinks, the
 * control API's 64 connections and libcurl's own: FD_FIXED, and three
 * pipes per stdio MCP upstream. FD_RESERVE is kept free for work that
 * comes and goes, above all `sandbox create` (namespace and /proc files,
 * netlink sockets, the resolv.conf it writes), so that it always finds
 * descriptors however many connections the sandboxes hold.
 */
#define FD_FIXED	192
#define FD_RESERVE	256
#define FD_BRIDGE_SLACK	64	/* gateway/mhd.c MHD_EVICT_SLACK */

struct daemon_ctx {
	struct gw	*gw;
	int		 sigfd;
};

static _Noreturn void
usage(void)
{
	fprintf(stderr, "usage: sluiced --config FILE [--foreground] [-v]\n");
	exit(2);
}

static void
print_errors(const struct pol_errors *errs)
{
	size_t i, n = pol_errors_count(errs);
	const char *m;

	for (i = 0; (m = pol_errors_get(errs, i)) != NULL; i++)
		fprintf(stderr, "%s\n", m);
	if (n > i)
		fprintf(stderr, "sluiced: ... and %zu more errors\n", n - i);
}

static void
on_signal(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct daemon_ctx *dc = arg;
	struct signalfd_siginfo si;
	ssize_t n;

	(void)events;
	/* Drain every pending signal: several may be queued at once. */
	while ((n = read(fd, &si, sizeof(si))) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGTERM:
		case SIGINT:
			log_info("signal %u: shutting down", si.ssi_signo);
			ev_stop(loop);
			break;
		case SIGHUP:
			log_info("SIGHUP: reloading policies");
			(void)gw_reload(dc->gw, NULL);
			break;
		default:
			break;
		}
	}
	if (n == -1 && errno != EAGAIN && errno != EINTR)
		fatal("signalfd read");
}

/* The pid file helps init scripts and operators; it is written after the
 * fork so it names the process that stays. Not being able to write it is
 * worth a warning, not a refusal to serve. Returns its path, or NULL. */
static char *
write_pidfile(const char *run_dir)
{
	char *path;
	FILE *fp;

	if (asprintf(&path, "%s/sluiced.pid", run_dir) == -1) {
		log_warn("pid file");
		return NULL;
	}
	if ((fp = fopen(path, "we")) == NULL) {
		log_warn("%s", path);
		free(path);
		return NULL;
	}
	fprintf(fp, "%ld\n", (long)getpid());
	if (fclose(fp) != 0) {
		log_warn("%s", path);
		(void)unlink(path);
		free(path);
		return NULL;
	}
	return path;
}

/* mkdir -p; new directories get mode. 0 or -1 with errno. */
static int
mkdir_p(const char *dir, mode_t mode)
{
	char *buf, *p;
	int rc = 0;

	if ((buf = strdup(dir)) == NULL)
		return -1;
	for (p = buf + 1; rc == 0; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;

			*p = '\0';
			if (mkdir(buf, mode) == -1 && errno != EEXIST)
				rc = -1;
			if ((*p = c) == '\0')
				break;
		}
	}
	free(buf);
	return rc;
}

/* The descriptors the caps of cfg let the daemon hold at once: every
 * bridge connection (and those being closed to make room) may have an
 * upstream HTTP connection beside it, every DNS TCP client one socket, the
 * proxy's upstreams DNS_UPSTREAM_FDS. */
static uint64_t
fds_needed(const struct pol_config *cfg, uint64_t bridge, uint64_t dnstcp)
{
	return 2 * bridge + FD_BRIDGE_SLACK + dnstcp + DNS_UPSTREAM_FDS +
	    FD_FIXED + 3 * (uint64_t)cfg->nservers + FD_RESERVE;
}

/*
 * RLIMIT_NOFILE: the soft limit goes up to the hard one (systemd's default
 * soft limit is 1024, and under it a few sandboxes holding connections
 * took the daemon's last descriptor: `sandbox create` failed), and the
 * global connection caps are fitted under it. With the defaults the daemon
 * holds at most 2 x 1024 (bridge connections and their upstream
 * connections) + 64 + 256 (DNS TCP clients) + 192 (DNS upstream sockets) +
 * 192 (everything else) + 3 per stdio upstream, and keeps 256 free:
 * 3008 + 3n, which examples/systemd/sluiced.service's LimitNOFILE=65536
 * covers twenty times. Under a smaller hard limit both caps shrink in
 * proportion (the per-sandbox caps with them, to stay below), and we say
 * so; below what even 16 connections each need we start anyway and warn.
 */
static void
fit_nofile(struct pol_config *cfg)
{
	struct rlimit rl;
	uint64_t old, have, need, fixed, room;
	uint32_t b = cfg->lim_bridge_conns, t = cfg->lim_dns_tcp_conns;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1) {
		log_warn("getrlimit RLIMIT_NOFILE");
		return;
	}
	old = rl.rlim_cur;
	if (rl.rlim_cur != rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1) {
			log_warn("setrlimit RLIMIT_NOFILE %llu",
			    (unsigned long long)rl.rlim_max);
			rl.rlim_cur = old;
		}
	}
	have = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
	need = fds_needed(cfg, b, t);
	if (need > have) {
		fixed = fds_needed(cfg, 0, 0);
		room = have > fixed ? have - fixed : 0;
		/* 2b + t <= room, b : t kept. */
		b = (uint32_t)(room * b / (2 * (uint64_t)b + t));
		t = (uint32_t)(room * t / (2 * (uint64_t)cfg->lim_bridge_conns +
		    t));
		if (b < 16)
			b = 16;
		if (t < 16)
			t = 16;
		log_warnx("descriptor limit %llu is below the %llu the "
		    "connection caps need: bridge_connections %u -> %u, "
		    "dns_tcp_connections %u -> %u (raise LimitNOFILE)",
		    (unsigned long long)have, (unsigned long long)need,
		    cfg->lim_bridge_conns, b, cfg->lim_dns_tcp_conns, t);
		if (fds_needed(cfg, b, t) > have)
			log_warnx("descriptor limit %llu: even these caps may "
			    "exhaust it", (unsigned long long)have);
		cfg->lim_bridge_conns = b;
		cfg->lim_dns_tcp_conns = t;
		if (cfg->lim_bridge_conns_sbx >= b)
			cfg->lim_bridge_conns_sbx = b / 2;
		if (cfg->lim_dns_tcp_conns_sbx >= t)
			cfg->lim_dns_tcp_conns_sbx = t / 2;
	}
	log_info("descriptors: limit %llu (was %llu), at most %llu in use; "
	    "bridge %u connections (%u a sandbox), DNS TCP %u (%u a sandbox)",
	    (unsigned long long)have, (unsigned long long)old,
	    (unsigned long long)(fds_needed(cfg, cfg->lim_bridge_conns,
	    cfg->lim_dns_tcp_conns) - FD_RESERVE), cfg->lim_bridge_conns,
	    cfg->lim_bridge_conns_sbx, cfg->lim_dns_tcp_conns,
	    cfg->lim_dns_tcp_conns_sbx);
}

/* Relative paths would change meaning once the daemon leaves its working
 * directory; keep the directory then (and say so) rather than break reload. */
static int
all_absolute(const struct pol_config *cfg)
{
	return cfg->policy_dir[0] == '/' && cfg->run_dir[0] == '/' &&
	    cfg->socket_path[0] == '/';
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config",	required_argument,	NULL, 'c' },
		{ "foreground",	no_argument,		NULL, 'f' },
		{ "help",	no_argument,		NULL, 'h' },
		{ "verbose",	no_argument,		NULL, 'v' },
		{ NULL,		0,			NULL, 0 }
	};
	const char *config = NULL;
	int ch, foreground = 0, verbose = 0;
	struct pol_errors *errs;
	struct pol_config *cfg;
	struct pol_set *set;
	struct daemon_ctx dc;
	struct ev_loop *loop;
	struct ctl *ctl;
	struct sbx *sbx;
	struct nd *nd;
	struct rec *rec;
	struct dnsw *dns;
	struct flowrec *fr;
	struct brw *brw;
	struct fleetd *fleet;
	char err[512], *pidfile;
	sigset_t mask;
	size_t npol;

	/* The parent starts its children as itself in a role (proc.c): a
	 * fresh image that shares nothing with the parent's memory. */
	if (argc > 2 && strcmp(argv[1], "--room") == 0 &&
	    strcmp(argv[2], "dns") == 0)
		return dns_child_main(argc, argv);
	if (argc > 2 && strcmp(argv[1], "--room") == 0 &&
	    strcmp(argv[2], "bridge") == 0)
		return bridge_child_main(argc, argv);
	while ((ch = getopt_long(argc, argv, "c:fhv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			config = optarg;
			break;
		case 'f':
			foreground = 1;
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
		default:
			usage();
		}
	}
	if (optind != argc || config == NULL)
		usage();

	log_init(1, "sluiced");
	log_setverbose(verbose);

	if ((errs = pol_errors_new(MAX_ERRORS)) == NULL) {
		perror("sluiced");
		return 1;
	}
	if ((cfg = pol_config_load(config, errs)) == NULL) {
		if (pol_errors_count(errs) == 0)
			fprintf(stderr, "%s:0:0: %s\n", config,
			    strerror(errno));
		print_errors(errs);
		pol_errors_free(errs);
		return 2;
	}
	if ((set = pol_set_load_dir(cfg->policy_dir, cfg, errs)) == NULL) {
		if (pol_errors_count(errs) == 0)
			fprintf(stderr, "%s:0:0: %s\n", cfg->policy_dir,
			    strerror(errno));
		print_errors(errs);
		pol_errors_free(errs);
		pol_config_free(cfg);
		return 2;
	}
	pol_errors_free(errs);
	/* The fleet's database is part of the config: one that cannot be
	 * reached, refuses our password or holds a schema from a newer
	 * sluiced stops the start here, before anything is set up. */
	if ((fleet = fleetd_open(cfg, err, sizeof(err))) == NULL &&
	    errno != 0) {
		fprintf(stderr, "sluiced: %s\n", err);
		pol_set_free(set);
		pol_config_free(cfg);
		return 1;
	}
	fit_nofile(cfg);

	if (mkdir_p(cfg->run_dir, 0750) == -1) {
		fprintf(stderr, "sluiced: %s: %s\n", cfg->run_dir,
		    strerror(errno));
		fleetd_free(fleet);
		pol_set_free(set);
		pol_config_free(cfg);
		return 1;
	}

	/* Blocked before anything else exists, so none is lost and none
	 * kills us half-initialised; the signalfd picks them up. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) == -1)
		fatal("sigprocmask");
	/* A client that hangs up mid-answer must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);

	memset(&dc, 0, sizeof(dc));
	if ((dc.gw = gw_new(cfg, set)) == NULL)
		fatal("gw_new");
	if ((loop = ev_new()) == NULL)
		fatal("ev_new");
	if ((ctl = ctl_new(loop)) == NULL || gw_routes(dc.gw, ctl) == -1)
		fatal("control API");
	/* Bind before daemonising so that "already running" and permission
	 * errors reach the terminal. */
	if (ctl_listen(ctl, gw_config(dc.gw)->socket_path, err,
	    sizeof(err)) == -1) {
		/* An expected refusal (another daemon running): leave as
		 * cleanly as at shutdown. */
		log_warnx("control socket: %s", err);
		ctl_free(ctl);
		fleetd_free(fleet);
		gw_free(dc.gw);
		ev_free(loop);
		return 1;
	}
	/* No action without a record: the log is open before the first
	 * sandbox is adopted or removed, and without it we do not serve. */
	if ((rec = rec_open(gw_config(dc.gw), loop, err, sizeof(err))) ==
	    NULL)
		fatalx("%s", err);
	gw_set_rec(dc.gw, rec);
	/* Only once the socket is ours: a second daemon stops above, before
	 * it reconciles (and removes) the first one's sandboxes. */
	if ((sbx = sbx_new(dc.gw, rec, loop, err, sizeof(err))) == NULL) {
		log_warnx("sandboxes: %s", err);
		gw_set_rec(dc.gw, NULL);
		rec_close(rec);
		ctl_free(ctl);
		fleetd_free(fleet);
		gw_free(dc.gw);
		ev_free(loop);
		return 1;
	}
	if (ctl_sbx_routes(ctl, sbx) == -1)
		fatal("control API: sandboxes");
	/* Packets are denied by the kernel either way; only their records
	 * are at stake, so a busy nflog group is a warning. */
	if ((nd = nd_new(loop, sbx, rec, gw_config(dc.gw), err,
	    sizeof(err))) == NULL)
		log_warnx("net.deny: %s: denied packets are not reported", err);
	gw_set_sandboxes(dc.gw, sbx, nd);
	/* sbx_new put the service address on lo: the proxy can bind it. */
	if ((dns = dnsw_start(loop, dc.gw, sbx, rec, 0, err, sizeof(err))) ==
	    NULL)
		fatalx("dns proxy: %s", err);
	/* Allowed flows' records: without them the log is short of what
	 * was sent where, which an operator must hear of, not a reason to
	 * refuse to serve. */
	if ((fr = flowrec_new(loop, dc.gw, sbx, rec, err, sizeof(err))) ==
	    NULL)
		log_warnx("net.flow: %s: allowed flows are not recorded", err);
	dnsw_set_flowrec(dns, fr);
	/* Its listener and its credentials are checked here, so that a
	 * bridge that cannot start stops the daemon before it detaches. */
	if ((brw = brw_start(loop, dc.gw, sbx, rec, 0, err,
	    sizeof(err))) == NULL)
		fatalx("capability bridge: %s", err);

	if (!foreground) {
		int nochdir = !all_absolute(gw_config(dc.gw));

		if (nochdir)
			log_warnx("relative paths in %s: staying in the "
			    "current directory", config);
		/* The audit writer is a thread, and threads do not survive
		 * fork: close the log (everything so far is committed) and
		 * open it again in the process that stays. The handle is
		 * the same, so its holders need not hear of it. */
		rec_suspend(rec);
		if (daemon(nochdir, 0) == -1)
			fatal("daemon");
		log_init(0, "sluiced");
		if (rec_reopen(rec, err, sizeof(err)) == -1)
			fatalx("%s", err);
		if (sbx_reopen(sbx, err, sizeof(err)) == -1)
			fatalx("sandboxes: %s", err);
	}
	/* The DNS process too: it dies with its parent, so it is started
	 * by the one that stays. */
	if (dnsw_run(dns, err, sizeof(err)) == -1)
		fatalx("dns process: %s", err);
	gw_set_dns(dc.gw, dns);
	/* The control socket answers while the bridge process starts: the
	 * pid file is there first, as it is whenever the socket answers. */
	pidfile = write_pidfile(gw_config(dc.gw)->run_dir);
	/* The bridge process too. Without it no tool call can be checked,
	 * so we do not serve. */
	/* Counted now: while the bridge process starts the control socket
	 * answers, and a reload there frees this set. */
	npol = pol_set_count(set);
	if (brw_routes(brw, ctl) == -1)
		fatal("control API: approvals");
	gw_set_brw(dc.gw, brw);
	if (brw_run(brw, err, sizeof(err)) == -1) {
		if (pidfile != NULL)
			(void)unlink(pidfile);
		fatalx("capability bridge: %s", err);
	}

	/* A thread, so in the process that stays; the log it reads is
	 * open again by now. */
	if (fleet != NULL) {
		if (fleetd_witness_start(fleet, rec_db_path(rec), err,
		    sizeof(err)) == -1)
			fatalx("%s", err);
		gw_set_fleet(dc.gw, fleet);
	}

	if ((dc.sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) ==
	    -1)
		fatal("signalfd");
	if (ev_add(loop, dc.sigfd, EV_READ, on_signal, &dc) == -1)
		fatal("ev_add signalfd");

	log_info("sluiced %s started: %zu policies, control socket %s",
	    SLUICE_VERSION, npol, ctl_socket_path(ctl));
	set = NULL;	/* owned by gw, and replaced on reload */
	if (ev_run(loop) == -1)
		fatal("event loop");

	/* Clean shutdown: the socket file goes with ctl, the rest is freed
	 * so that LeakSanitizer sees a clean exit. */
	ctl_free(ctl);
	/* Before the recorder: the approvals it denies are recorded. */
	gw_set_brw(dc.gw, NULL);
	brw_stop(brw);
	gw_set_dns(dc.gw, NULL);
	dnsw_set_flowrec(dns, NULL);
	flowrec_free(fr);
	dnsw_stop(dns);
	gw_set_sandboxes(dc.gw, NULL, NULL);
	nd_free(nd);
	sbx_free(sbx);
	gw_set_rec(dc.gw, NULL);
	rec_close(rec);
	/* After the log's close, so that its final checkpoint is sent in
	 * the witness's last round (or at the next start, which resumes
	 * from the newest size held). */
	gw_set_fleet(dc.gw, NULL);
	fleetd_free(fleet);
	ev_del(loop, dc.sigfd);
	close(dc.sigfd);
	if (pidfile != NULL)
		(void)unlink(pidfile);
	free(pidfile);
	gw_free(dc.gw);
	ev_free(loop);
	log_info("stopped");
	return 0;
}
