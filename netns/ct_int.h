/*
 * ct_int.h: what ct.c (deletions, the counters of one flow) and
 * ct_events.c (the end of flows) share of the ctnetlink message format,
 * and nobody else.
 */
#ifndef SLUICE_NETNS_CT_INT_H
#define SLUICE_NETNS_CT_INT_H

#include <stdint.h>

#include <libmnl/libmnl.h>

/* ct_parse_tuple: a CTA_TUPLE_ORIG or _REPLY nest: addresses (4 or 16
 * bytes into src and dst), protocol, ports in host order (sport, dport
 * may be NULL). Fields absent from the nest are left as they were. */
void	ct_parse_tuple(const struct nlattr *nest, uint8_t *src, uint8_t *dst,
	    uint8_t *proto, uint16_t *sport, uint16_t *dport);

struct ct_end;
/* ct_parse_end: the tuple, counters, timestamps and mark of one
 * ctnetlink entry message (an event or an answer to a get; at least the
 * nfgenmsg header long) into e, which the caller zeroed. */
void	ct_parse_end(const struct nlmsghdr *nlh, struct ct_end *e);

#endif /* SLUICE_NETNS_CT_INT_H */
