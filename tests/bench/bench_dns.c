/*
 * bench_dns.c: the DNS load tool of `make bench` (its speed targets).
 *
 * The same tool drives Sluice's DNS proxy, the upstream dnsmasq directly and
 * the dnsmasq --nftset anchor, so the three differ only in the server. Each
 * query asks the A record of a different name (n<i>.<suffix>, cycling over
 * NAMES names) so no cache along the way can hide the per-answer work (for
 * Sluice and the anchor: inserting the answered address into a set).
 * Raw UDP, one socket, bounded in count and time.
 *
 *   bench_dns lat SERVER SUFFIX NAMES COUNT SECS
 *	COUNT sequential queries; prints the microseconds of each answered
 *	one, one a line; "lost N" at the end when some timed out (1 s each).
 *   bench_dns qps SERVER SUFFIX NAMES WINDOW SECS
 *	WINDOW queries outstanding for SECS seconds; prints
 *	"qps <answered per second> sent <n> answered <n> errors <n>".
 *
 *   bench_dns serve ADDRESS SECS
 *	A minimal authoritative upstream on ADDRESS:53 (UDP) for SECS
 *	seconds: every A question gets one answer, 192.0.2.10 with TTL
 *	300; any other type gets NOERROR without answers. It exists so
 *	the queries/s comparison measures the proxies (Sluice, dnsmasq
 *	--nftset), not the upstream: the world's dnsmasq logs every
 *	query and caps both proxies at its own rate.
 *
 * Only NOERROR answers with at least one answer record count; anything
 * else counts as an error, so a refusing server can never look fast.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE		/* recvmmsg, sendmmsg */
#endif
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXPKT	1500

static void __attribute__((noreturn))
fail(const char *m)
{
	fprintf(stderr, "bench_dns: %s: %s\n", m, strerror(errno));
	exit(1);
}

static int64_t
now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* build: the query for name n<idx>.<suffix>, id ID, into buf; its length. */
static size_t
build(uint8_t *buf, uint16_t id, unsigned idx, const char *suffix)
{
	char	 name[300], *lab, *save = NULL;
	size_t	 o = 12, l;

	memset(buf, 0, 12);
	buf[0] = id >> 8;
	buf[1] = id & 0xff;
	buf[2] = 0x01;		/* RD */
	buf[5] = 1;		/* QDCOUNT */
	snprintf(name, sizeof(name), "n%u.%s", idx, suffix);
	for (lab = strtok_r(name, ".", &save); lab != NULL;
	    lab = strtok_r(NULL, ".", &save)) {
		l = strlen(lab);
		if (l > 63 || o + l + 6 > MAXPKT)
			return 0;
		buf[o++] = (uint8_t)l;
		memcpy(buf + o, lab, l);
		o += l;
	}
	buf[o++] = 0;
	buf[o++] = 0; buf[o++] = 1;	/* A */
	buf[o++] = 0; buf[o++] = 1;	/* IN */
	return o;
}

/* ask: builds that query in buf and sends it on connected socket s (a
 * lost send shows up as an unanswered query, counted by the caller). */
static void
ask(int s, uint8_t *buf, uint16_t id, unsigned idx, const char *suffix)
{
	size_t	len = build(buf, id, idx, suffix);

	(void)send(s, buf, len, 0);
}

/* good: a NOERROR response with an answer. */
static int
good(const uint8_t *p, ssize_t n)
{
	return n >= 12 && (p[2] & 0x80) && (p[3] & 0x0f) == 0 &&
	    (p[6] << 8 | p[7]) > 0;
}

/*
 * answer: turn the query in p (n bytes, room for MAXPKT) into its answer in
 * place; its length, or 0 to drop it (not a plain one-question query).
 */
static size_t
answer(uint8_t *p, size_t n)
{
	static const uint8_t	rr[] = { 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x01,
				    0x2c, 0, 4, 192, 0, 2, 10 };
	size_t			o = 12;

	if (n < 12 || (p[2] & 0x80) || p[4] != 0 || p[5] != 1)
		return 0;
	while (o < n && p[o] != 0) {
		if (p[o] > 63)
			return 0;
		o += (size_t)p[o] + 1;
	}
	if (o + 5 > n)
		return 0;
	o += 5;			/* root label, type, class */
	p[2] = (uint8_t)(0x84 | (p[2] & 0x01));	/* QR AA, RD echoed */
	p[3] = 0;				/* NOERROR */
	p[6] = p[7] = p[8] = p[9] = p[10] = p[11] = 0;
	if (p[o - 4] == 0 && p[o - 3] == 1 && o + sizeof(rr) <= MAXPKT) {
		memcpy(p + o, rr, sizeof(rr));
		o += sizeof(rr);
		p[7] = 1;
	}
	return o;
}

/* serve: the upstream of "bench_dns serve"; 0, or exits on a setup error. */
static int
serve(const char *addr, long secs)
{
	enum { BATCH = 64 };
	static uint8_t		buf[BATCH][MAXPKT];
	struct sockaddr_in	sa, from[BATCH];
	struct mmsghdr		in[BATCH], out[BATCH];
	struct iovec		iv[BATCH], ov[BATCH];
	int64_t			end = now_us() + secs * 1000000;
	int			s, one = 1, i, n, k;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(53);
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "bench_dns: bad address %s\n", addr);
		return 2;
	}
	if ((s = socket(AF_INET, SOCK_DGRAM, 0)) == -1)
		fail("socket");
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) == -1)
		fail("bind");
	while (now_us() < end) {
		struct pollfd	pfd = { s, POLLIN, 0 };

		if (poll(&pfd, 1, 200) <= 0)
			continue;
		memset(in, 0, sizeof(in));
		for (i = 0; i < BATCH; i++) {
			iv[i].iov_base = buf[i];
			iv[i].iov_len = MAXPKT;
			in[i].msg_hdr.msg_iov = &iv[i];
			in[i].msg_hdr.msg_iovlen = 1;
			in[i].msg_hdr.msg_name = &from[i];
			in[i].msg_hdr.msg_namelen = sizeof(from[i]);
		}
		n = recvmmsg(s, in, BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			continue;
		memset(out, 0, sizeof(out));
		for (i = 0, k = 0; i < n; i++) {
			size_t	l = answer(buf[i], in[i].msg_len);

			if (l == 0)
				continue;
			ov[k].iov_base = buf[i];
			ov[k].iov_len = l;
			out[k].msg_hdr.msg_iov = &ov[k];
			out[k].msg_hdr.msg_iovlen = 1;
			out[k].msg_hdr.msg_name = &from[i];
			out[k].msg_hdr.msg_namelen = in[i].msg_hdr.msg_namelen;
			k++;
		}
		if (k > 0)
			(void)sendmmsg(s, out, (unsigned)k, 0);
	}
	close(s);
	return 0;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in	 sa;
	uint8_t			 q[MAXPKT], r[MAXPKT];
	const char		*suffix;
	unsigned		 names, idx = 0;
	long			 count, secs;
	int			 s;
	int64_t			 end;

	if (argc == 4 && strcmp(argv[1], "serve") == 0) {
		secs = strtol(argv[3], NULL, 10);
		if (secs <= 0 || secs > 3600) {
			fprintf(stderr, "bench_dns: bad arguments\n");
			return 2;
		}
		return serve(argv[2], secs);
	}
	if (argc != 7 || (strcmp(argv[1], "lat") && strcmp(argv[1], "qps"))) {
		fprintf(stderr, "usage: bench_dns lat|qps SERVER SUFFIX NAMES "
		    "COUNT|WINDOW SECS\n       bench_dns serve ADDRESS SECS\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(53);
	if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1) {
		fprintf(stderr, "bench_dns: bad address %s\n", argv[2]);
		return 2;
	}
	suffix = argv[3];
	names = (unsigned)strtoul(argv[4], NULL, 10);
	count = strtol(argv[5], NULL, 10);
	secs = strtol(argv[6], NULL, 10);
	if (names == 0 || names > 1000000 || count <= 0 || count > 10000000 ||
	    secs <= 0 || secs > 600 || strlen(suffix) > 200) {
		fprintf(stderr, "bench_dns: bad arguments\n");
		return 2;
	}
	if ((s = socket(AF_INET, SOCK_DGRAM, 0)) == -1)
		fail("socket");
	/* connect: only the server's answers reach us. */
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == -1)
		fail("connect");
	end = now_us() + secs * 1000000;

	if (argv[1][0] == 'l') {
		long	i, lost = 0;

		for (i = 0; i < count && now_us() < end; i++) {
			uint16_t	 id = (uint16_t)(i & 0xffff);
			size_t		 ql = build(q, id, idx++ % names, suffix);
			int64_t		 t0 = now_us(), t1;
			struct pollfd	 pfd = { s, POLLIN, 0 };
			ssize_t		 n;

			if (ql == 0 || send(s, q, ql, 0) != (ssize_t)ql)
				fail("send");
			for (;;) {
				if (poll(&pfd, 1, 1000) <= 0) {
					lost++;
					break;
				}
				n = recv(s, r, sizeof(r), 0);
				if (n < 2 || r[0] != q[0] || r[1] != q[1])
					continue;	/* a late answer */
				t1 = now_us();
				if (good(r, n))
					printf("%lld\n", (long long)(t1 - t0));
				else
					lost++;
				break;
			}
		}
		if (lost)
			printf("lost %ld\n", lost);
		return 0;
	} else {
		/* Outstanding slots: the id's low bits are the slot. */
		long		 win = count, sent = 0, ans = 0, err = 0, k;
		int64_t		*t0, start;
		uint16_t	*ids;
		uint16_t	 seq = 0;

		if (win > 1024)
			win = 1024;
		t0 = calloc((size_t)win, sizeof(*t0));
		ids = calloc((size_t)win, sizeof(*ids));
		if (t0 == NULL || ids == NULL)
			fail("calloc");
		start = now_us();
		for (k = 0; k < win; k++) {
			ids[k] = (uint16_t)((seq++ << 10) | k);
			ask(s, q, ids[k], idx++ % names, suffix);
			t0[k] = now_us();
			sent++;
		}
		while (now_us() < end) {
			struct pollfd	pfd = { s, POLLIN, 0 };
			ssize_t		n;
			int64_t		t = now_us();

			/* A query lost for 1 s counts as an error; resend. */
			for (k = 0; k < win; k++) {
				if (t - t0[k] < 1000000)
					continue;
				err++;
				ids[k] = (uint16_t)((seq++ << 10) | k);
				ask(s, q, ids[k], idx++ % names, suffix);
				t0[k] = t;
				sent++;
			}
			if (poll(&pfd, 1, 100) <= 0)
				continue;
			n = recv(s, r, sizeof(r), 0);
			if (n < 12)
				continue;
			k = ((r[0] << 8) | r[1]) & 0x3ff;
			if (k >= win || ids[k] != (uint16_t)(r[0] << 8 | r[1]))
				continue;
			if (good(r, n))
				ans++;
			else
				err++;
			ids[k] = (uint16_t)((seq++ << 10) | k);
			ask(s, q, ids[k], idx++ % names, suffix);
			t0[k] = now_us();
			sent++;
		}
		printf("qps %.0f sent %ld answered %ld errors %ld\n",
		    ans * 1e6 / (double)(now_us() - start), sent, ans, err);
		free(t0);
		free(ids);
	}
	close(s);
	return 0;
}
