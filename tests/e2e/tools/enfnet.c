/*
 * enfnet.c: the hostile sender and the plain listener of the enforcement
 * scenarios (tests/e2e/t_enforce*.sh).
 *
 * Why it exists: a sandbox is root in its own network namespace, so the
 * rules must hold against packets that no ordinary client would send: a
 * datagram from an address that belongs to another sandbox, a hand-made
 * IPv4 packet from a raw socket (IP_HDRINCL, which skips the socket layer),
 * and a whole Ethernet frame from a packet socket (AF_PACKET, which skips
 * the sandbox's own IP stack and netfilter entirely). The listener proves
 * that something did not arrive: it records every accepted peer. Debian's
 * base image has none of nc, socat, hping3 or nping, and python3 is not
 * guaranteed, so the scenario compiles this file with cc.
 *
 *   enfnet udp SRC DST PORT DATA           datagram from SRC (bound)
 *   enfnet raw SRC DST tcp|udp PORT DATA   IPv4 packet via IP_HDRINCL
 *   enfnet pkt IFNAME DSTMAC SRC DST tcp|udp PORT DATA
 *                                          the same in an Ethernet frame
 *   enfnet listen ADDR PORT FILE SECONDS   TCP listener: one line per
 *                                          accepted peer; FILE.ready when
 *                                          listening; exits after SECONDS
 *
 * IPv4 only; a TCP packet is a lone SYN carrying DATA. Exit status 0 when
 * the kernel took the packet (not that it arrived), 1 on error, 2 on usage.
 */
#include <sys/socket.h>
#include <sys/ioctl.h>

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PKTMAX	1500

static void
usage(void)
{
	fprintf(stderr, "usage: enfnet udp SRC DST PORT DATA\n"
	    "       enfnet raw SRC DST tcp|udp PORT DATA\n"
	    "       enfnet pkt IFNAME DSTMAC SRC DST tcp|udp PORT DATA\n"
	    "       enfnet listen ADDR PORT FILE SECONDS\n");
	exit(2);
}

static in_addr_t
addr(const char *s)
{
	struct in_addr	a;

	if (inet_pton(AF_INET, s, &a) != 1)
		usage();
	return a.s_addr;
}

static uint16_t
port(const char *s)
{
	char	*end;
	long	 v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < 1 || v > 65535)
		usage();
	return (uint16_t)v;
}

static uint16_t
csum(const void *p, size_t len, uint32_t sum)
{
	const uint8_t	*b = p;

	for (; len > 1; b += 2, len -= 2)
		sum += (uint32_t)b[0] << 8 | b[1];
	if (len == 1)
		sum += (uint32_t)b[0] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

/*
 * build: an IPv4 packet SRC -> DST, a SYN or a UDP datagram carrying data,
 * with correct checksums so that nothing but the rules can drop it.
 */
static size_t
build(uint8_t *buf, in_addr_t src, in_addr_t dst, const char *proto,
    uint16_t dport, const char *data)
{
	struct iphdr	*ip = (struct iphdr *)buf;
	size_t		 dlen = strlen(data), l4len;
	uint8_t		 pseudo[12 + PKTMAX];
	uint8_t		*l4 = buf + sizeof(*ip);
	int		 tcp = strcmp(proto, "tcp") == 0;

	if (!tcp && strcmp(proto, "udp") != 0)
		usage();
	l4len = (tcp ? sizeof(struct tcphdr) : sizeof(struct udphdr)) + dlen;
	if (sizeof(*ip) + l4len > PKTMAX)
		usage();
	memset(buf, 0, sizeof(*ip) + l4len);
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = tcp ? IPPROTO_TCP : IPPROTO_UDP;
	ip->tot_len = htons((uint16_t)(sizeof(*ip) + l4len));
	ip->id = htons((uint16_t)getpid());
	ip->saddr = src;
	ip->daddr = dst;
	ip->check = csum(ip, sizeof(*ip), 0);
	if (tcp) {
		struct tcphdr	*t = (struct tcphdr *)l4;

		t->source = htons(40000 + (getpid() % 20000));
		t->dest = htons(dport);
		t->seq = htonl(0x5a5a0001);
		t->doff = 5;
		t->syn = 1;
		t->window = htons(65535);
		memcpy(t + 1, data, dlen);
	} else {
		struct udphdr	*u = (struct udphdr *)l4;

		u->source = htons(40000 + (getpid() % 20000));
		u->dest = htons(dport);
		u->len = htons((uint16_t)l4len);
		memcpy(u + 1, data, dlen);
	}
	memcpy(pseudo, &ip->saddr, 4);
	memcpy(pseudo + 4, &ip->daddr, 4);
	pseudo[8] = 0;
	pseudo[9] = ip->protocol;
	pseudo[10] = (uint8_t)(l4len >> 8);
	pseudo[11] = (uint8_t)l4len;
	memcpy(pseudo + 12, l4, l4len);
	if (tcp)
		((struct tcphdr *)l4)->check = csum(pseudo, 12 + l4len, 0);
	else
		((struct udphdr *)l4)->check = csum(pseudo, 12 + l4len, 0);
	return sizeof(*ip) + l4len;
}

static int
do_udp(char **av)
{
	struct sockaddr_in	s = { .sin_family = AF_INET }, d = s;
	int			fd;

	s.sin_addr.s_addr = addr(av[0]);
	d.sin_addr.s_addr = addr(av[1]);
	d.sin_port = htons(port(av[2]));
	if ((fd = socket(AF_INET, SOCK_DGRAM, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&s, sizeof(s)) == -1 ||
	    sendto(fd, av[3], strlen(av[3]), 0, (struct sockaddr *)&d,
	    sizeof(d)) == -1) {
		perror("enfnet udp");
		return 1;
	}
	close(fd);
	return 0;
}

static int
do_raw(char **av)
{
	uint8_t			buf[PKTMAX];
	struct sockaddr_in	d = { .sin_family = AF_INET };
	size_t			len;
	int			fd, one = 1;

	d.sin_addr.s_addr = addr(av[1]);
	len = build(buf, addr(av[0]), d.sin_addr.s_addr, av[2], port(av[3]),
	    av[4]);
	if ((fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW)) == -1 ||
	    setsockopt(fd, IPPROTO_IP, IP_HDRINCL, &one, sizeof(one)) == -1 ||
	    sendto(fd, buf, len, 0, (struct sockaddr *)&d, sizeof(d)) == -1) {
		perror("enfnet raw");
		return 1;
	}
	close(fd);
	return 0;
}

static int
do_pkt(char **av)
{
	uint8_t			frame[14 + PKTMAX];
	struct sockaddr_ll	ll = { .sll_family = AF_PACKET };
	unsigned int		m[6];
	size_t			len;
	int			fd, i;

	if (sscanf(av[1], "%2x:%2x:%2x:%2x:%2x:%2x", &m[0], &m[1], &m[2],
	    &m[3], &m[4], &m[5]) != 6)
		usage();
	if ((ll.sll_ifindex = (int)if_nametoindex(av[0])) == 0) {
		perror("enfnet pkt: interface");
		return 1;
	}
	len = build(frame + 14, addr(av[2]), addr(av[3]), av[4], port(av[5]),
	    av[6]);
	for (i = 0; i < 6; i++)
		frame[i] = ll.sll_addr[i] = (uint8_t)m[i];
	/* The source MAC is irrelevant to the rules; a fixed local one. */
	memcpy(frame + 6, "\x02\x00\x00\x5e\x00\x01", 6);
	frame[12] = 0x08;
	frame[13] = 0x00;
	ll.sll_halen = 6;
	ll.sll_protocol = htons(ETH_P_IP);
	if ((fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_IP))) == -1 ||
	    sendto(fd, frame, 14 + len, 0, (struct sockaddr *)&ll,
	    sizeof(ll)) == -1) {
		perror("enfnet pkt");
		return 1;
	}
	close(fd);
	return 0;
}

static int
do_listen(char **av)
{
	struct sockaddr_in	a = { .sin_family = AF_INET }, peer;
	socklen_t		plen;
	struct pollfd		pfd;
	char			ready[4096], ip[INET_ADDRSTRLEN];
	FILE			*out, *r;
	time_t			end = time(NULL) + atoi(av[3]);
	int			fd, c, one = 1;

	a.sin_addr.s_addr = addr(av[0]);
	a.sin_port = htons(port(av[1]));
	if ((out = fopen(av[2], "a")) == NULL ||
	    (fd = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) == -1 ||
	    listen(fd, 16) == -1) {
		perror("enfnet listen");
		return 1;
	}
	setvbuf(out, NULL, _IOLBF, 0);
	snprintf(ready, sizeof(ready), "%s.ready", av[2]);
	if ((r = fopen(ready, "w")) == NULL)
		return 1;
	fclose(r);
	pfd.fd = fd;
	pfd.events = POLLIN;
	/* Bounded in time: a listener must never outlive its scenario. */
	while (time(NULL) < end) {
		if (poll(&pfd, 1, 200) <= 0)
			continue;
		plen = sizeof(peer);
		if ((c = accept(fd, (struct sockaddr *)&peer, &plen)) == -1)
			continue;
		inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
		fprintf(out, "accept %s:%u\n", ip, ntohs(peer.sin_port));
		(void)write(c, "listener\n", 9);
		close(c);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "udp") == 0)
		return do_udp(argv + 2);
	if (argc == 7 && strcmp(argv[1], "raw") == 0)
		return do_raw(argv + 2);
	if (argc == 9 && strcmp(argv[1], "pkt") == 0)
		return do_pkt(argv + 2);
	if (argc == 6 && strcmp(argv[1], "listen") == 0)
		return do_listen(argv + 2);
	usage();
	return 2;
}
