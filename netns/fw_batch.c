/*
 * fw_batch.c: the fw handle's conversation with nfnetlink.
 *
 * Why this file exists: every change fw makes to its table is one netlink
 * batch, committed whole or not at all, and every question it asks the
 * kernel (does this table, set, chain or element exist; what does a set
 * hold) is one request. Both go over the handle's socket (opened by fw_new
 * in fw.c) and through its one buffer, and this file holds both paths:
 * building a batch, sending it and reading back the errors and the final
 * ACK (fw_batch_*), and sending a request and running a callback over its
 * replies (fw_request). fw_seterr, the error message helper of every fw
 * file, is here too.
 */
#include <sys/socket.h>

#include <linux/netfilter.h>
#include <linux/netlink.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/common.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

void
fw_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	errno = saved;
}


int
fw_batch_begin(struct fw *fw, struct fw_batch *b)
{
	memset(b, 0, sizeof(*b));
	b->fw = fw;
	b->b = mnl_nlmsg_batch_start(fw->buf, FW_BATCH_LIMIT);
	if (b->b == NULL)
		return -1;
	nftnl_batch_begin(mnl_nlmsg_batch_current(b->b), fw->seq++);
	mnl_nlmsg_batch_next(b->b);
	return 0;
}

struct nlmsghdr *
fw_batch_hdr(struct fw_batch *b, uint16_t type, uint16_t flags)
{
	b->last = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(b->b), type,
	    NFPROTO_INET, flags, b->fw->seq++);
	return b->last;
}

void
fw_batch_next(struct fw_batch *b)
{
	/* The buffer is twice the limit, so one message past it is safe; we
	 * refuse the batch rather than split it, which would lose atomicity. */
	if (!mnl_nlmsg_batch_next(b->b))
		b->overflow = 1;
	b->nmsg++;
}

void
fw_batch_abort(struct fw_batch *b)
{
	if (b->b != NULL)
		mnl_nlmsg_batch_stop(b->b);
	b->b = NULL;
}

/* Drains every reply queued on the socket. nfnetlink processes a batch
 * synchronously inside sendmsg, so all errors and the final ACK are already
 * queued when sendto returns. */
static int
fw_drain(struct fw *fw, int *acks, int *kerr, uint32_t *kseq)
{
	char			 rbuf[8192];
	ssize_t			 n;
	struct nlmsghdr		*nlh;
	struct nlmsgerr		*e;

	for (;;) {
		n = recv(mnl_socket_get_fd(fw->nl), rbuf, sizeof(rbuf),
		    MSG_DONTWAIT);
		if (n == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EINTR)
				continue;
			return -1;
		}
		for (nlh = (struct nlmsghdr *)rbuf; mnl_nlmsg_ok(nlh, (int)n);
		    nlh = mnl_nlmsg_next(nlh, (int *)&n)) {
			if (nlh->nlmsg_type != NLMSG_ERROR)
				continue;
			if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*e)))
				continue;
			e = mnl_nlmsg_get_payload(nlh);
			if (e->error == 0)
				(*acks)++;
			else if (*kerr == 0) {
				*kerr = -e->error;
				*kseq = e->msg.nlmsg_seq;
			}
		}
	}
}

int
fw_batch_commit(struct fw_batch *b, const char *what, char *err,
    size_t errlen)
{
	struct fw	*fw = b->fw;
	int		 acks = 0, kerr = 0;
	uint32_t	 kseq = 0, seq0;
	ssize_t		 n;

	if (b->overflow) {
		fw_batch_abort(b);
		errno = E2BIG;
		fw_seterr(err, errlen, "%s: batch too large", what);
		return -1;
	}
	if (b->nmsg == 0) {
		fw_batch_abort(b);
		return 0;
	}
	/* Only the last message asks for an ACK: errors are always reported,
	 * so "no error and the ACK" means the whole batch committed. */
	b->last->nlmsg_flags |= NLM_F_ACK;
	nftnl_batch_end(mnl_nlmsg_batch_current(b->b), fw->seq++);
	if (!mnl_nlmsg_batch_next(b->b)) {
		/* The END did not fit under the limit and libmnl left it out.
		 * The kernel aborts a batch without END yet still sends the
		 * ACK its last message asked for, which would read as a
		 * commit: refuse it here instead. */
		fw_batch_abort(b);
		errno = E2BIG;
		fw_seterr(err, errlen, "%s: batch too large", what);
		return -1;
	}
	/* Replies left over from an earlier failed call must not be counted. */
	(void)fw_drain(fw, &acks, &kerr, &kseq);
	acks = kerr = 0;
	seq0 = ((struct nlmsghdr *)mnl_nlmsg_batch_head(b->b))->nlmsg_seq;
	n = mnl_socket_sendto(fw->nl, mnl_nlmsg_batch_head(b->b),
	    mnl_nlmsg_batch_size(b->b));
	fw_batch_abort(b);
	if (n == -1) {
		fw_seterr(err, errlen, "%s: send: %s", what, strerror(errno));
		return -1;
	}
	if (fw_drain(fw, &acks, &kerr, &kseq) == -1) {
		fw_seterr(err, errlen, "%s: receive: %s", what,
		    strerror(errno));
		return -1;
	}
	if (kerr != 0) {
		errno = kerr;
		fw_seterr(err, errlen, "%s: kernel: message %u of %u: %s",
		    what, kseq - seq0, b->nmsg, strerror(kerr));
		return -1;
	}
	if (acks < 1) {
		errno = EPROTO;
		fw_seterr(err, errlen, "%s: no acknowledgement", what);
		return -1;
	}
	return 0;
}

/* Sends one request and runs cb over the replies until the ACK or the end of
 * a dump. Returns 0, or -1 with errno (the kernel's error for ENOENT etc.). */
int
fw_request(struct fw *fw, struct nlmsghdr *nlh, mnl_cb_t cb, void *arg)
{
	char		*rbuf = fw->buf + FW_BATCH_LIMIT * 2;
	uint32_t	 seq = nlh->nlmsg_seq;
	ssize_t		 n;
	int		 ret, acks = 0, kerr = 0;
	uint32_t	 kseq;

	(void)fw_drain(fw, &acks, &kerr, &kseq);
	if (mnl_socket_sendto(fw->nl, nlh, nlh->nlmsg_len) == -1)
		return -1;
	for (;;) {
		n = mnl_socket_recvfrom(fw->nl, rbuf, FW_RBUFSZ);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		ret = mnl_cb_run(rbuf, n, seq, fw->portid, cb, arg);
		if (ret == MNL_CB_ERROR)
			return -1;
		if (ret == MNL_CB_STOP)
			return 0;
	}
}
