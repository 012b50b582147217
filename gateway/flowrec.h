/*
 * flowrec: a net.flow record for every allowed flow of a sandbox: the
 * 5-tuple, the name it was for, the rule that allowed it, bytes and
 * packets each way, start and end, from the conntrack entry's events
 * (netns/ct.h, ct_events_*) and, for a flow alive longer than the
 * configured interval (audit.flow_interval), an interim record every
 * interval with what it carried since its previous record (ct_get; an
 * interval in which it carried nothing gives none). A
 * reviewer can then answer "how much did the agent send to which name"
 * from the audit log alone, also while a long upload is still going: the
 * parts of one flow (its interim records and its final one) add up to its
 * totals, which the records carry too.
 *
 * The name: the one the name gate read (TLS server_name, HTTP Host), or
 * for a flow the gate does not check (`check: none`, UDP) the name of the
 * DNS answer that opened its destination for that sandbox; flows through a
 * static CIDR rule have none, and carry the rule ("egress.allow[2]").
 *
 * Bounded like every record a sandbox drives, per sandbox:
 *  - at most FLOWREC_PER_S records of one sandbox are itemised a second
 *    (final and interim alike); the rest of that second go into one
 *    summary per name (flows, interim parts, bytes and packets each way,
 *    first and last time), at most FLOWREC_SUMMARIES names, the flows of
 *    further names into one "other" summary: FLOWREC_PER_S +
 *    FLOWREC_SUMMARIES + 1 records per sandbox per second at most;
 *  - a flow gets at most one interim record per interval, and the kernel
 *    is asked for at most FLOWREC_GETS_PER_SBX flows of one sandbox (and
 *    FLOWREC_GETS in all) a second, so the tick stays short at any number
 *    of flows and a sandbox with many long flows delays only its own;
 *  - at most FLOWREC_FLOWS open flows of a sandbox are followed (the
 *    rest, and flows that began before the daemon, get a final record
 *    with no interim and a name found at their end; past the bound the
 *    gate's name is lost too), and FLOWREC_LEARNED learned names kept (they
 *    expire with the
 *    kernel's element; past it new ones are not kept). Each refusal is
 *    counted, none takes another sandbox's entry.
 * Flows to the service address (DNS, the bridge) are recorded by those.
 *
 * The records (kind net.flow; OCSF 4001 Network Activity, Traffic):
 *  - one flow: sandbox {id}, proto, src and dst {ip, port}, name and
 *    name_from ("gate" or "dns", when a name is known), rule (the allow
 *    of the sandbox's policy in force that covers it, by name or else by
 *    address: "egress.allow[2]"), bytes_out, bytes_in, packets_out,
 *    packets_in (out: the sandbox's direction; this record's part of the
 *    flow), start_ms, and end_ms for its end;
 *  - a part of a flow recorded in parts: interim true and at_ms for the
 *    records while it lives, part (1, 2, ...; the final record is the
 *    last) and total {bytes_out, bytes_in, packets_out, packets_in} (the
 *    whole flow so far) on every part;
 *  - a summary: sandbox, summary true, name (absent: flows without one),
 *    or other true for names past FLOWREC_SUMMARIES, flows (final
 *    records folded in), interims (interim parts folded in), bytes and
 *    packets each way, first_ms and last_ms.
 */
#ifndef SLUICE_GATEWAY_FLOWREC_H
#define SLUICE_GATEWAY_FLOWREC_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/ev.h"
#include "gateway/gw.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"
#include "netns/fw.h"

#define FLOWREC_PER_S		50	/* itemised records per sandbox a second */
#define FLOWREC_SUMMARIES	16	/* names summarised per sandbox a second */
#define FLOWREC_FLOWS		4096	/* open flows followed per sandbox */
#define FLOWREC_FLOWS_ALL	262144	/* and in all */
#define FLOWREC_LEARNED		8192	/* learned names per sandbox */
#define FLOWREC_LEARNED_ALL	1048576	/* and in all */
#define FLOWREC_GETS_PER_SBX	32	/* kernel reads per sandbox a second */
#define FLOWREC_GETS		1024	/* and in all */

struct flowrec;

/* flowrec_new: follows the sandbox table of sbx and the flows of the
 * caller's network namespace, recording into rec; the policies of gw name
 * the rules, and its config the service address and the interval (all
 * borrowed). NULL with err. */
struct flowrec	*flowrec_new(struct ev_loop *loop, struct gw *gw,
		    struct sbx *sbx, struct rec *rec, char *err, size_t errlen);
/* flowrec_free: NULL is a no-op. */
void		 flowrec_free(struct flowrec *fr);
/* flowrec_name: the name gate passed the TCP flow saddr:sport ->
 * daddr:dport (IPv4, network order addresses, host order ports) for
 * name; its records will carry it. Bounded with the flow (FLOWREC_FLOWS). */
void		 flowrec_name(struct flowrec *fr, const uint8_t saddr[4],
		    const uint8_t daddr[4], uint16_t sport, uint16_t dport,
		    const char *name);
/* flowrec_learned: the kernel took the n learned elements e (a batch of
 * the DNS process, checked by the caller): the flows a sandbox opens to
 * one of them while it lives carry its name. Elements without a name or
 * of IPv6 are ignored. Bounded per sandbox (FLOWREC_LEARNED). */
void		 flowrec_learned(struct flowrec *fr, const struct fw_elem *e,
		    size_t n);

#endif /* SLUICE_GATEWAY_FLOWREC_H */
