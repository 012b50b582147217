/*
 * sink_syslog: the syslog transport (RFC 5424 messages over a unix socket,
 * UDP, or TCP with octet counting, RFC 6587). Syslog has no application
 * acknowledgement; over TCP the peer's stack acknowledging every byte is
 * taken as receipt, over datagrams the send itself.
 */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/sink.h"

/* Datagrams larger than this carry a stub instead of the event (the
 * structured data still names seq and hash). */
#define SINK_DGRAM_MAX		60000
#define SINK_PEN		"sluice@32473"
#define SYSLOG_FACILITY		13	/* log audit (RFC 5424 §6.2.1) */

/*
 * Syslog targets: "unix:/path" or "/path", "udp://host[:port]",
 * "tcp://host[:port]", host a name, an IPv4 address or [IPv6].
 */
int
aud_sk_parse_syslog(struct aud_sink *s, const char *t, char *err, size_t errlen)
{
	const char *p, *h, *e;
	size_t hl;
	char *end;
	long port;

	if (strncmp(t, "unix:", 5) == 0 || t[0] == '/') {
		p = t[0] == '/' ? t : t + 5;
		if (p[0] != '/' || strlen(p) >= sizeof(((struct sockaddr_un *)
		    0)->sun_path)) {
			aud_seterr(err, errlen, "syslog target %s: the socket "
			    "path must be absolute and short", t);
			return -1;
		}
		s->tr = TR_UNIX;
		snprintf(s->addr, sizeof(s->addr), "%s", p);
		return 0;
	}
	if (strncmp(t, "udp://", 6) == 0) {
		s->tr = TR_UDP;
		snprintf(s->port, sizeof(s->port), "514");
	} else if (strncmp(t, "tcp://", 6) == 0) {
		s->tr = TR_TCP;
		snprintf(s->port, sizeof(s->port), "601");
	} else {
		aud_seterr(err, errlen, "syslog target %s: want unix:/PATH, "
		    "udp://HOST[:PORT] or tcp://HOST[:PORT]", t);
		return -1;
	}
	h = t + 6;
	if (h[0] == '[') {
		if ((e = strchr(h, ']')) == NULL)
			goto bad;
		hl = (size_t)(e - h - 1);
		h++;
		e++;
	} else {
		e = strchr(h, ':');
		if (e == NULL)
			e = h + strlen(h);
		hl = (size_t)(e - h);
	}
	if (hl == 0 || hl >= sizeof(s->addr) || memchr(h, '/', hl) != NULL ||
	    memchr(h, '@', hl) != NULL)
		goto bad;
	memcpy(s->addr, h, hl);
	s->addr[hl] = '\0';
	if (*e == ':') {
		errno = 0;
		port = strtol(e + 1, &end, 10);
		if (errno != 0 || end == e + 1 || *end != '\0' || port < 1 ||
		    port > 65535)
			goto bad;
		snprintf(s->port, sizeof(s->port), "%ld", port);
	} else if (*e != '\0')
		goto bad;
	return 0;
bad:
	aud_seterr(err, errlen, "syslog target %s: bad host or port", t);
	return -1;
}

static void
sd_escape(char *out, size_t cap, const char *in)
{
	size_t o = 0;

	/* RFC 5424 §6.3.3: '"', '\' and ']' are escaped in PARAM-VALUE. */
	for (; *in != '\0' && o + 3 < cap; in++) {
		if (*in == '"' || *in == '\\' || *in == ']')
			out[o++] = '\\';
		out[o++] = *in;
	}
	out[o] = '\0';
}

/* One RFC 5424 message (no framing) into a malloc'd buffer. */
static char *
syslog_msg(struct aud_sink *s, const struct aud_sk_item *it, size_t *lenp)
{
	char ts[40], org[520], sd[700], stub[400];
	const char *body = it->body;
	size_t blen = it->blen, hl;
	struct tm tm;
	time_t t;
	char *m;
	int n;

	t = (time_t)(it->ts_ns / 1000000000);
	gmtime_r(&t, &tm);
	n = (int)strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - (size_t)n, ".%06lldZ",
	    (long long)(it->ts_ns % 1000000000 / 1000));
	sd_escape(org, sizeof(org), it->origin);
	if (it->ckpt)
		snprintf(sd, sizeof(sd), "[" SINK_PEN " size=\"%llu\" "
		    "origin=\"%s\"]", (unsigned long long)it->seq, org);
	else
		snprintf(sd, sizeof(sd), "[" SINK_PEN " seq=\"%llu\" "
		    "origin=\"%s\" hash=\"%s\"]", (unsigned long long)it->seq,
		    org, it->hash);
	hl = strlen(ts) + strlen(s->hostname) + strlen(it->msgid) +
	    strlen(sd) + 64;
	if (s->tr != TR_TCP && hl + blen > SINK_DGRAM_MAX) {
		/* Too big for one datagram: the SD still names seq and hash,
		 * so the receiver knows exactly what to fetch from the log. */
		json_t *o = json_pack("{s:s,s:I,s:b,s:I}", "origin",
		    it->origin, it->ckpt ? "size" : "seq", (json_int_t)it->seq,
		    "truncated", 1, "bytes", (json_int_t)it->blen);

		m = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(o);
		if (m == NULL)
			return NULL;
		snprintf(stub, sizeof(stub), "%s", m);
		free(m);
		body = stub;
		blen = strlen(stub);
	}
	if ((m = malloc(hl + blen + 1)) == NULL)
		return NULL;
	n = snprintf(m, hl + 1, "<%d>1 %s %s sluiced %d %s %s ",
	    SYSLOG_FACILITY * 8 + it->sev, ts, s->hostname, (int)getpid(),
	    it->msgid, sd);
	if (n < 0 || (size_t)n >= hl + 1) {
		free(m);
		return NULL;
	}
	memcpy(m + n, body, blen);
	m[(size_t)n + blen] = '\0';
	*lenp = (size_t)n + blen;
	return m;
}

void
aud_sk_sock_close(struct aud_sink *s)
{
	if (s->fd != -1)
		close(s->fd);
	s->fd = -1;
}

static int
sock_open(struct aud_sink *s, char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL, *ai;
	struct sockaddr_un sun;
	struct timeval tv;
	struct pollfd pfd;
	int fd = -1, rc, soerr, one = 1;
	socklen_t sl;

	tv.tv_sec = s->timeout_ms / 1000;
	tv.tv_usec = (s->timeout_ms % 1000) * 1000;
	if (s->tr == TR_UNIX) {
		if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
			goto syserr;
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		/* aud_sk_aud_sk_parse_syslog checked that the path fits. */
		memcpy(sun.sun_path, s->addr, strnlen(s->addr,
		    sizeof(sun.sun_path) - 1));
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
			goto syserr;
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		s->fd = fd;
		return 0;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = s->tr == TR_TCP ? SOCK_STREAM : SOCK_DGRAM;
	if ((rc = getaddrinfo(s->addr, s->port, &hints, &res)) != 0) {
		aud_seterr(err, errlen, "%s: %s", s->addr, gai_strerror(rc));
		errno = EHOSTUNREACH;
		return -1;
	}
	errno = ECONNREFUSED;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol);
		if (fd == -1)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (errno == EINPROGRESS) {
			/* Bounded: a blackholed receiver costs one timeout. */
			pfd.fd = fd;
			pfd.events = POLLOUT;
			sl = sizeof(soerr);
			if (poll(&pfd, 1, (int)s->timeout_ms) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr,
			    &sl) == 0) {
				if (soerr == 0)
					break;
				errno = soerr;
			} else
				errno = ETIMEDOUT;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1)
		goto syserr;
	/* Back to blocking sends, each bounded by the timeout. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == -1)
		goto syserr;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (s->tr == TR_TCP)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->fd = fd;
	return 0;
syserr:
	rc = errno;
	aud_seterr(err, errlen, "syslog %s: %s", s->target, strerror(rc));
	if (fd != -1)
		close(fd);
	errno = rc;
	return -1;
}

/*
 * TCP syslog has no application acknowledgement (RFC 6587). The best proof
 * of receipt it offers is the peer's TCP stack acknowledging every byte:
 * wait (bounded) until nothing is left unacknowledged in the send queue.
 */
static int
tcp_drained(struct aud_sink *s)
{
	int64_t deadline = aud_sk_now_ms() + s->timeout_ms;
	struct pollfd pfd;
	char junk[512];
	int outq;

	for (;;) {
		if (ioctl(s->fd, SIOCOUTQ, &outq) == -1)
			return -1;
		if (outq == 0)
			return 0;
		if (aud_sk_now_ms() >= deadline || atomic_load(&s->stopping)) {
			errno = ETIMEDOUT;
			return -1;
		}
		pfd.fd = s->fd;
		pfd.events = POLLIN | POLLRDHUP;
		if (poll(&pfd, 1, 5) == 1) {
			/* The peer closed or reset before acknowledging. */
			if (pfd.revents & (POLLERR | POLLHUP | POLLRDHUP)) {
				errno = ECONNRESET;
				return -1;
			}
			if (recv(s->fd, junk, sizeof(junk), MSG_DONTWAIT) == 0) {
				errno = ECONNRESET;
				return -1;
			}
		}
	}
}

int
aud_sk_send_syslog(struct aud_sink *s, struct aud_sk_batch *b, char *err,
    size_t errlen)
{
	char pre[24];
	size_t i, len, off;
	ssize_t w;
	char *m;
	int e, n;

	if (s->fd == -1 && sock_open(s, err, errlen) == -1)
		return -1;
	for (i = 0; i < b->n; i++) {
		if ((m = syslog_msg(s, &b->it[i], &len)) == NULL) {
			aud_seterr(err, errlen, "out of memory");
			errno = ENOMEM;
			return -1;
		}
		if (s->tr == TR_TCP) {
			/* RFC 6587 octet counting: "LEN SP MSG". */
			n = snprintf(pre, sizeof(pre), "%zu ", len);
			if (send(s->fd, pre, (size_t)n, MSG_NOSIGNAL) != n)
				goto fail;
			for (off = 0; off < len; off += (size_t)w) {
				w = send(s->fd, m + off, len - off,
				    MSG_NOSIGNAL);
				if (w == -1 && errno == EINTR) {
					w = 0;
					continue;
				}
				if (w <= 0)
					goto fail;
			}
		} else if (send(s->fd, m, len, MSG_NOSIGNAL) != (ssize_t)len)
			goto fail;
		free(m);
		continue;
fail:
		e = errno ? errno : EIO;
		free(m);
		aud_seterr(err, errlen, "syslog %s: %s", s->target,
		    strerror(e));
		aud_sk_sock_close(s);
		errno = e;
		return -1;
	}
	if (s->tr == TR_TCP && tcp_drained(s) == -1) {
		e = errno;
		aud_seterr(err, errlen, "syslog %s: not acknowledged: %s",
		    s->target, strerror(e));
		aud_sk_sock_close(s);
		errno = e;
		return -1;
	}
	return 0;
}

