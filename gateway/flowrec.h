/*
 * flowrec: a net.flow record for every allowed flow of a sandbox, when it
 * ends: the 5-tuple, the name the name gate read for it, bytes and packets
 * each way, start and end, from the conntrack entry's destroy event
 * (netns/ct.h, ct_events_*). A reviewer can then answer "how much did the
 * agent send to which name" from the audit log alone.
 *
 * Bounded like every record a sandbox drives: at most FLOWREC_PER_S flows
 * of one sandbox are itemised a second; the rest of that second go into
 * one summary record of the sandbox (flows, bytes and packets each way).
 * Flows to the service address (DNS, the bridge) are recorded by those.
 */
#ifndef SLUICE_GATEWAY_FLOWREC_H
#define SLUICE_GATEWAY_FLOWREC_H

#include <stdint.h>

#include "gateway/ev.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"

#define FLOWREC_PER_S	50	/* itemised flows per sandbox per second */
#define FLOWREC_NAMES	16384	/* names of gated flows still open */

struct flowrec;

/* flowrec_new: follows the sandbox table of sbx and the destroy events of
 * the caller's network namespace, recording into rec (all borrowed).
 * svc4 is the service address. NULL with err. */
struct flowrec	*flowrec_new(struct ev_loop *loop, struct sbx *sbx,
		    struct rec *rec, const uint8_t svc4[4], char *err,
		    size_t errlen);
/* flowrec_free: NULL is a no-op. */
void		 flowrec_free(struct flowrec *fr);
/* flowrec_name: the name gate passed the TCP flow saddr:sport ->
 * daddr:dport (IPv4, network order addresses, host order ports) for
 * name; its record will carry it. At most FLOWREC_NAMES are held; the
 * oldest goes first. */
void		 flowrec_name(struct flowrec *fr, const uint8_t saddr[4],
		    const uint8_t daddr[4], uint16_t sport, uint16_t dport,
		    const char *name);

#endif /* SLUICE_GATEWAY_FLOWREC_H */
