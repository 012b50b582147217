/*
 * nlsock.c: keeping a netlink socket's descriptor past its libmnl handle
 * (see nlsock.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "netns/nlsock.h"

int
nlsock_keep(struct mnl_socket *nl)
{
	int fd, fl, e;

	if ((fd = fcntl(mnl_socket_get_fd(nl), F_DUPFD_CLOEXEC, 0)) == -1 ||
	    (fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1) {
		e = errno;
		if (fd != -1)
			close(fd);
		mnl_socket_close(nl);
		errno = e;
		return -1;
	}
	mnl_socket_close(nl);
	return fd;
}
