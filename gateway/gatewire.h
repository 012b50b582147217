/*
 * gatewire: the parent's side of the name gate. The gate runs in the DNS
 * process (gateway/dns/gate.c); what the parent does for it is open the
 * queue socket, send the verdicts the gate decides (the kernel takes both
 * only from a process with CAP_NET_ADMIN), and record the flows the gate
 * refused as net.deny, each with its reason and the name seen. The child
 * can ask for a verdict only: what mark a verdict carries is fixed here.
 */
#ifndef SLUICE_GATEWAY_GATEWIRE_H
#define SLUICE_GATEWAY_GATEWIRE_H

#include <jansson.h>

#include "gateway/dns/gate.h"

/* gatew_fields: the net.deny record fields of a refused flow (a new
 * object, NULL on allocation failure). ev was checked (msg_gate_event_ok). */
json_t	*gatew_fields(const struct gate_event *ev);

/* gatew_verdict: sends the verdict a checked MSG_GATE_VERDICT asks for on
 * the queue socket fd, bound to NFQUEUE queue. 0, or -1 with errno
 * (EINVAL: not an action; the child broke the protocol). */
int	 gatew_verdict(int fd, uint16_t queue, uint32_t id, uint32_t action);

#endif /* SLUICE_GATEWAY_GATEWIRE_H */
