/*
 * nlsock: one step that every netlink socket handed to the event loop
 * takes (the gate's queue, the conntrack events): libmnl's handle is set
 * up blocking, then only its descriptor is kept, non-blocking.
 */
#ifndef SLUICE_NETNS_NLSOCK_H
#define SLUICE_NETNS_NLSOCK_H

#include <libmnl/libmnl.h>

/* nlsock_keep: a close-on-exec, non-blocking copy of nl's descriptor (the
 * same socket), and nl closed, whatever happens. The fd, or -1 with
 * errno. */
int	nlsock_keep(struct mnl_socket *nl);

#endif /* SLUICE_NETNS_NLSOCK_H */
