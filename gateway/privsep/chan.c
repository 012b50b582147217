/*
 * chan.c: message framing over a SOCK_SEQPACKET socket on the event loop
 * (see chan.h). One packet is one message, so a receiver never has to put
 * a message together from pieces, and a truncated packet (larger than any
 * message may be) is a protocol error rather than something to resync.
 */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/privsep/chan.h"

#define CHAN_RECV_BATCH	64	/* messages per wakeup, so others get a turn */
#define CHAN_SOCKBUF	(8 * 1024 * 1024)

struct chan_out {
	struct chan_out	*next;
	size_t		 len;
	unsigned char	 buf[];		/* header and payload */
};

struct chan {
	struct ev_loop	*loop;
	int		 fd;
	enum msg_dir	 from;
	size_t		 queue_max, queued;
	struct chan_out	*head, **tail;
	chan_msg_fn	*msg;
	chan_gone_fn	*gone;
	void		*ctx;
	bool		 writing;	/* EV_WRITE is on */
	bool		 in_cb, freed, dead;
	size_t		 rbuf_len;
	union {
		struct msg_hdr	h;
		uint64_t	align;
	}		*rbuf;
};

static void	chan_cb(struct ev_loop *, int, unsigned, void *);

int
chan_pair(int sv[2])
{
	int sz = CHAN_SOCKBUF, i;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		return -1;
	for (i = 0; i < 2; i++) {
		/* FORCE passes the system's maximum, for root only; the
		 * plain call is the fallback (and may cap the value). */
		if (setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &sz,
		    sizeof(sz)) == -1)
			(void)setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &sz,
			    sizeof(sz));
		if (setsockopt(sv[i], SOL_SOCKET, SO_RCVBUFFORCE, &sz,
		    sizeof(sz)) == -1)
			(void)setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &sz,
			    sizeof(sz));
	}
	return 0;
}

struct chan *
chan_new(struct ev_loop *loop, int fd, enum msg_dir from, size_t queue_max,
    chan_msg_fn *msg, chan_gone_fn *gone, void *ctx)
{
	struct chan *c;
	int fl;

	if (loop == NULL || fd < 0 || msg == NULL || gone == NULL) {
		if (fd >= 0)
			close(fd);
		errno = EINVAL;
		return NULL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		goto fail;
	c->rbuf_len = sizeof(struct msg_hdr) + msg_max_payload();
	if ((c->rbuf = malloc(c->rbuf_len)) == NULL)
		goto fail;
	c->loop = loop;
	c->fd = fd;
	c->from = from;
	c->queue_max = queue_max;
	c->tail = &c->head;
	c->msg = msg;
	c->gone = gone;
	c->ctx = ctx;
	if ((fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1 ||
	    ev_add(loop, fd, EV_READ, chan_cb, c) == -1)
		goto fail;
	return c;
fail:
	fl = errno;
	if (c != NULL)
		free(c->rbuf);
	free(c);
	close(fd);
	errno = fl;
	return NULL;
}

static void
drop_queue(struct chan *c)
{
	struct chan_out *o;

	while ((o = c->head) != NULL) {
		c->head = o->next;
		free(o);
	}
	c->tail = &c->head;
	c->queued = 0;
}

void
chan_free(struct chan *c)
{
	if (c == NULL)
		return;
	if (c->in_cb) {
		/* The callback that called us returns into chan_cb, which
		 * frees once it sees this. */
		c->freed = true;
		return;
	}
	if (!c->dead)
		ev_del(c->loop, c->fd);
	close(c->fd);
	drop_queue(c);
	free(c->rbuf);
	free(c);
}

/* The channel is done for: the owner hears it once. */
static void
chan_die(struct chan *c, const char *why)
{
	if (c->dead)
		return;
	c->dead = true;
	ev_del(c->loop, c->fd);
	drop_queue(c);
	c->gone(c->ctx, why);
}

static void
want_write(struct chan *c, bool on)
{
	if (c->writing == on)
		return;
	if (ev_mod(c->loop, c->fd, EV_READ | (on ? EV_WRITE : 0)) == 0)
		c->writing = on;
}

/* Sends what waits, in order, until the socket is full. -1 when the
 * socket failed (not for EAGAIN). */
static int
flush(struct chan *c)
{
	struct chan_out *o;
	ssize_t n;

	while ((o = c->head) != NULL) {
		n = send(c->fd, o->buf, o->len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n == -1)
			return -1;
		c->head = o->next;
		if (c->head == NULL)
			c->tail = &c->head;
		c->queued -= o->len;
		free(o);
	}
	want_write(c, c->head != NULL);
	return 0;
}

int
chan_send(struct chan *c, uint32_t type, const struct iovec *iov, int iovcnt)
{
	struct iovec v[CHAN_IOV_MAX + 1];
	struct msg_hdr h;
	struct msghdr mh;
	struct chan_out *o;
	size_t len = 0, off;
	ssize_t n;
	int i;

	if (c == NULL || c->dead || iovcnt < 0 || iovcnt > CHAN_IOV_MAX) {
		errno = c != NULL && c->dead ? EPIPE : EINVAL;
		return -1;
	}
	for (i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > UINT32_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	memset(&h, 0, sizeof(h));
	h.type = type;
	h.len = (uint32_t)len;
	v[0].iov_base = &h;
	v[0].iov_len = sizeof(h);
	for (i = 0; i < iovcnt; i++)
		v[i + 1] = iov[i];
	if (c->head == NULL) {
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = v;
		mh.msg_iovlen = (size_t)iovcnt + 1;
		do
			n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		while (n == -1 && errno == EINTR);
		if (n >= 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
	}
	if (c->queued + sizeof(h) + len > c->queue_max) {
		errno = ENOBUFS;
		return -1;
	}
	if ((o = malloc(sizeof(*o) + sizeof(h) + len)) == NULL)
		return -1;
	o->next = NULL;
	o->len = sizeof(h) + len;
	for (i = 0, off = 0; i <= iovcnt; i++) {
		memcpy(o->buf + off, v[i].iov_base, v[i].iov_len);
		off += v[i].iov_len;
	}
	*c->tail = o;
	c->tail = &o->next;
	c->queued += o->len;
	want_write(c, true);
	return 0;
}

int
chan_send1(struct chan *c, uint32_t type, const void *p, size_t len)
{
	struct iovec v;

	v.iov_base = (void *)(uintptr_t)p;
	v.iov_len = len;
	return chan_send(c, type, &v, len > 0 ? 1 : 0);
}

size_t
chan_queued(const struct chan *c)
{
	return c != NULL ? c->queued : 0;
}

/* Receives up to CHAN_RECV_BATCH messages. 1 to go on, 0 when the socket
 * is drained, -1 when the channel died. */
static int
recv_one(struct chan *c)
{
	struct msghdr mh;
	struct iovec v;
	ssize_t n;
	size_t plen;

	memset(&mh, 0, sizeof(mh));
	v.iov_base = c->rbuf;
	v.iov_len = c->rbuf_len;
	mh.msg_iov = &v;
	mh.msg_iovlen = 1;
	do
		n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n == -1 && errno == EINTR);
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n == -1) {
		chan_die(c, "receive failed");
		return -1;
	}
	if (n == 0) {
		chan_die(c, "closed by the peer");
		return -1;
	}
	/* Descriptors are never part of the protocol: one sent would have
	 * been closed by the truncation of its control data. */
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
	    (size_t)n < sizeof(struct msg_hdr)) {
		chan_die(c, "a message of the wrong size");
		return -1;
	}
	plen = (size_t)n - sizeof(struct msg_hdr);
	if (c->rbuf->h.len != plen || msg_check(c->rbuf->h.type, plen,
	    c->from) == -1) {
		chan_die(c, "a message the protocol does not allow");
		return -1;
	}
	c->in_cb = true;
	c->msg(c->ctx, c->rbuf->h.type, (unsigned char *)c->rbuf +
	    sizeof(struct msg_hdr), plen);
	c->in_cb = false;
	if (c->freed) {
		c->freed = false;
		chan_free(c);
		return -1;
	}
	return c->dead ? -1 : 1;
}

size_t
chan_take(struct chan *c, const uint32_t *types, size_t ntypes)
{
	struct msg_hdr h;
	size_t i, n = 0;
	ssize_t r;

	while (c != NULL && !c->dead && !c->in_cb) {
		do
			r = recv(c->fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);
		while (r == -1 && errno == EINTR);
		if (r != (ssize_t)sizeof(h))
			break;	/* nothing, or a short packet recv_one judges */
		for (i = 0; i < ntypes && types[i] != h.type; i++)
			;
		if (i == ntypes || recv_one(c) <= 0)
			break;
		n++;
	}
	return n;
}

static void
chan_cb(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct chan *c = arg;
	int i, r = 0;

	(void)loop;
	(void)fd;
	if ((events & EV_WRITE) != 0 && flush(c) == -1) {
		chan_die(c, "send failed");
		return;
	}
	if ((events & (EV_READ | EV_ERROR)) == 0)
		return;
	for (i = 0; i < CHAN_RECV_BATCH; i++) {
		if ((r = recv_one(c)) <= 0)
			break;
	}
	/* A hang-up with nothing left to read. */
	if (r == 0 && (events & EV_ERROR) != 0)
		chan_die(c, "closed by the peer");
}
