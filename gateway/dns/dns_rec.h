/*
 * dns_rec: the DNS proxy's events as audit record fields (gateway/dns/
 * record.c). Apart from dns.h because the proxy itself never records: the
 * daemon's side of the seam (gateway/dnswire.c) converts what the proxy
 * reports and submits it, so only that side needs jansson and audit/, and
 * a proxy running on its own would not link this file.
 */
#ifndef SLUICE_GATEWAY_DNS_DNS_REC_H
#define SLUICE_GATEWAY_DNS_DNS_REC_H

#include <jansson.h>

#include "audit/audit.h"
#include "gateway/dns/dns.h"
#include "policy/policy.h"

/* dns_rec_fields: a dns.decision record: sandbox {id}, client, transport,
 * q {name, type, class}, decision, reason, rule, rcode, answers (kept
 * addresses), removed, elements {ip, proto, port_lo, port_hi, timeout_ms,
 * keep: true when the element carries FW_ELEM_KEEP}, resolver, latency_us;
 * policy {id, sha256, rule} when policy is not NULL. Constant parts are
 * shared between records (extra references to immutable values): do not
 * modify the result. New reference, NULL on allocation failure. Loop
 * thread only. */
json_t	*dns_rec_fields(const struct dns_event *ev,
	    const struct pol_policy *policy);
/*
 * dns_rec_canon: the same record as dns_rec_fields, written straight as
 * canonical bytes into w (no JSON tree: the proxy writes one per query).
 * The bytes are those aud_canon_dump gives for dns_rec_fields' object;
 * tests/unit/check_record.c holds the two together. 0, or -1 when w
 * overflowed (use dns_rec_fields then).
 */
int	dns_rec_canon(const struct dns_event *ev,
	    const struct pol_policy *policy, struct aud_cw *w);
/* dns_rec_finding: the finding record that accompanies a dns.decision with
 * ev->finding (suspected tunnel, rebinding, flood, learn cap). New
 * reference, NULL on allocation failure. */
json_t	*dns_rec_finding(const struct dns_event *ev);

#endif /* SLUICE_GATEWAY_DNS_DNS_REC_H */
