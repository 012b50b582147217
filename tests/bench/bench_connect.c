/*
 * bench_connect: TCP connections per second, a server and a client.
 *
 * iperf3 measures bulk throughput, where only a flow's first packet meets
 * Sluice's set lookups and the rest take the established fast path. New
 * connections are where the per-sandbox and learned sets are actually
 * searched, so the data-path benchmark also counts connect/close cycles
 * from a sandbox through the gateway. No tool on this machine does that
 * simply (socat is not installed), hence this program.
 *
 *   bench_connect serve ADDR PORT READYFILE
 *        accept and close until killed; writes READYFILE once listening
 *   bench_connect client ADDR PORT MAXCONN MAXSECS
 *        connect, close, repeat; stops after MAXCONN connections or
 *        MAXSECS seconds, whichever comes first, and prints
 *        "conns N fails F secs S rate R"
 *
 * The client closes with an RST (SO_LINGER 0) so that thousands of cycles
 * do not pile up TIME_WAIT sockets and run out of local ports; each connect
 * still makes a new conntrack entry and a full pass through the forward
 * chain. A connect that fails or takes over a second counts as a failure
 * and makes the client exit 1: a rate measured over refused connections
 * would be meaningless.
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_MS	1000

static int64_t
now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static unsigned long
num(const char *s, unsigned long max)
{
	char		*end;
	unsigned long	 v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v > max) {
		fprintf(stderr, "bench_connect: bad number '%s'\n", s);
		exit(2);
	}
	return v;
}

static void
sockaddr(struct sockaddr_in *sin, const char *addr, const char *port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)num(port, 65535));
	if (inet_pton(AF_INET, addr, &sin->sin_addr) != 1) {
		fprintf(stderr, "bench_connect: bad address '%s'\n", addr);
		exit(2);
	}
}

static int
serve(const struct sockaddr_in *sin, const char *ready)
{
	FILE	*f;
	int	 s, c, one = 1;

	if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(s, (const struct sockaddr *)sin, sizeof(*sin)) == -1 ||
	    listen(s, 4096) == -1) {
		perror("bench_connect: listen");
		if (s != -1)
			close(s);
		return 1;
	}
	if ((f = fopen(ready, "w")) == NULL || fclose(f) == EOF) {
		perror(ready);
		close(s);
		return 1;
	}
	for (;;) {
		c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		if (c == -1) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("bench_connect: accept");
			return 1;
		}
		close(c);
	}
}

/* one: a connect with a bounded wait, then an abortive close. 0 or -1. */
static int
one(const struct sockaddr_in *sin)
{
	struct linger	lg = { 1, 0 };
	struct pollfd	pfd;
	socklen_t	len = sizeof(int);
	int		s, e = 0, rc = -1;

	if ((s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		return -1;
	if (connect(s, (const struct sockaddr *)sin, sizeof(*sin)) == 0)
		rc = 0;
	else if (errno == EINPROGRESS) {
		pfd.fd = s;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, CONNECT_TIMEOUT_MS) == 1 &&
		    getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &len) == 0 &&
		    e == 0)
			rc = 0;
	}
	(void)setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(s);
	return rc;
}

static int
client(const struct sockaddr_in *sin, unsigned long maxconn,
    unsigned long maxsecs)
{
	unsigned long	n = 0, fails = 0;
	int64_t		t0, t, end;
	double		secs;

	t0 = now_ns();
	end = t0 + (int64_t)maxsecs * 1000000000;
	t = t0;
	while (n < maxconn && t < end) {
		if (one(sin) == 0)
			n++;
		else {
			if (++fails > 10)
				break;
			t = now_ns();
		}
		/* The clock is read every 64 cycles: cheap, still bounded. */
		if (((n + fails) & 63) == 0)
			t = now_ns();
	}
	secs = (double)(now_ns() - t0) / 1e9;
	printf("conns %lu fails %lu secs %.3f rate %.0f\n", n, fails, secs,
	    secs > 0 ? (double)n / secs : 0.0);
	return fails > 10 || n == 0 ? 1 : 0;
}

int
main(int argc, char *argv[])
{
	struct sockaddr_in	sin;

	if (argc == 5 && strcmp(argv[1], "serve") == 0) {
		sockaddr(&sin, argv[2], argv[3]);
		return serve(&sin, argv[4]);
	}
	if (argc == 6 && strcmp(argv[1], "client") == 0) {
		sockaddr(&sin, argv[2], argv[3]);
		return client(&sin, num(argv[4], 10000000),
		    num(argv[5], 3600));
	}
	fprintf(stderr, "usage: bench_connect serve ADDR PORT READYFILE\n"
	    "       bench_connect client ADDR PORT MAXCONN MAXSECS\n");
	return 2;
}
