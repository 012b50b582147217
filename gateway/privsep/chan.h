/*
 * chan: one end of the socket pair between sluiced's parent and a child,
 * on the event loop. It frames messages (gateway/privsep/msg.h: one
 * SOCK_SEQPACKET packet each), checks every one it receives against the
 * message table before the owner sees it, and never blocks: what the peer
 * is not reading now waits in a bounded queue. Bounded, because the peer
 * may be the process that was compromised: a child that stops reading can
 * cost the parent at most queue_max bytes, then chan_send fails and the
 * parent kills it.
 */
#ifndef SLUICE_GATEWAY_PRIVSEP_CHAN_H
#define SLUICE_GATEWAY_PRIVSEP_CHAN_H

#include <sys/uio.h>

#include <stddef.h>
#include <stdint.h>

#include "gateway/ev.h"
#include "gateway/privsep/msg.h"

struct chan;

#define CHAN_IOV_MAX	24	/* pieces of one chan_send */

/* A message that passed msg_check: payload (len bytes, aligned for any
 * payload struct) is valid until the callback returns. */
typedef void	chan_msg_fn(void *ctx, uint32_t type, void *payload, size_t len);
/* The channel is unusable: the peer closed it, sent what the table does
 * not allow (why says which), or a socket call failed. Called once; the
 * owner should chan_free it (also from inside this callback). */
typedef void	chan_gone_fn(void *ctx, const char *why);

/*
 * chan_new: takes fd (a SOCK_SEQPACKET socket; made non-blocking, closed by
 * chan_free) and watches it on loop. Messages received must flow in
 * direction from (msg_check); anything else ends the channel. queue_max
 * bounds the bytes waiting to be sent. NULL with errno (fd is then
 * closed).
 */
struct chan	*chan_new(struct ev_loop *loop, int fd, enum msg_dir from,
		    size_t queue_max, chan_msg_fn *msg, chan_gone_fn *gone,
		    void *ctx);
/* chan_free: stops watching and closes the socket; queued messages are
 * dropped. Safe from inside the channel's own callbacks. NULL is a no-op. */
void		 chan_free(struct chan *c);

/*
 * chan_send: one message of type with the payload of the iovcnt pieces of
 * iov (together its whole payload). Sent now when nothing waits before
 * it, else queued (in order). 0, or -1 with errno: ENOBUFS when the queue
 * would pass queue_max (nothing was queued), EPIPE/ECONNRESET when the
 * peer is gone, EMSGSIZE for a payload larger than the socket takes.
 */
int		 chan_send(struct chan *c, uint32_t type, const struct iovec *iov,
		    int iovcnt);
/* chan_send1: chan_send of one buffer (NULL and 0 for an empty payload). */
int		 chan_send1(struct chan *c, uint32_t type, const void *p,
		    size_t len);
/*
 * chan_take: receives now, outside the loop's turn, the messages at the
 * head of the socket whose types are among types[0..ntypes), stopping at
 * the first other one (so order is kept), and hands each to the message
 * callback as usual. For a receiver that must see what the peer sent
 * before something it is handling now (a query from a sandbox whose
 * MSG_SBX_ADD was sent before the sandbox could run). Returns how many it
 * took. Not from inside the channel's own callbacks (takes none then).
 */
size_t		 chan_take(struct chan *c, const uint32_t *types,
		    size_t ntypes);
/* chan_queued: bytes waiting to be sent. */
size_t		 chan_queued(const struct chan *c);
/* chan_pair: a SOCK_SEQPACKET socket pair (close-on-exec) whose buffers
 * are raised so that the largest message fits (SO_SNDBUFFORCE when
 * privileged, else as far as the system allows). 0 or -1 with errno. */
int		 chan_pair(int sv[2]);

#endif /* SLUICE_GATEWAY_PRIVSEP_CHAN_H */
