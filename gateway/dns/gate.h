/*
 * gate: the name gate, in the DNS process (DESIGN: names, not addresses).
 * A TCP flow a sandbox opens to an address it learned from a DNS answer
 * is held in the kernel's queue (netns/fw_gate.c) until this module has
 * read the name its first bytes ask for (gateway/dns/peek.h) and found
 * that (1) the sandbox's policy allows that name on that port, with the
 * check the port has (tls, http or none), and (2) this sandbox was
 * answered for that name with that address, and the answer has not
 * expired. Then the flow is marked and never queued again; otherwise it
 * is reset and a denial reported. It lives here because this process
 * gave the answers: it knows which sandbox was told which address for
 * which name without asking anyone.
 *
 * Everything a sandbox can make it hold is bounded: flows waiting per
 * sandbox and in all, bytes per flow (PEEK_MAX), time per flow (2 s from
 * its first data), remembered answers per sandbox, and the denials
 * reported per sandbox per second (the rest counted, reported with the
 * next). Over a bound a flow is refused, never let through.
 */
#ifndef SLUICE_GATEWAY_DNS_GATE_H
#define SLUICE_GATEWAY_DNS_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/ev.h"
#include "policy/policy.h"

#define GATE_FLOWS_PER_SBX	256	/* flows between SYN and verdict */
#define GATE_FLOWS_MAX		8192
#define GATE_DECIDED_PER_SBX	256	/* decided, kept for late packets */
#define GATE_DECIDED_MAX	8192
#define GATE_ANSWERS_PER_SBX	16384	/* remembered (name, address) */
#define GATE_HOLD_MS		2000	/* from a flow's first data */
#define GATE_IDLE_MS		30000	/* from its SYN, before data */
#define GATE_EVENTS_PER_S	20	/* denials reported per sandbox */

/* The sandbox a packet came from, as the DNS process knows it. */
struct gate_sbx {
	char			 id[33];
	char			 ifname[16];
	const struct pol_policy	*policy;	/* until the hook's caller returns */
	bool			 tainted;
};

/* One refused flow. Flat: it crosses to the parent as it is. */
struct gate_event {
	char		sandbox[33];
	char		name[256];	/* the name seen, "" if none */
	uint8_t		saddr[4], daddr[4];	/* network order */
	uint16_t	sport, dport;		/* host order */
	uint32_t	reason;		/* enum pol_reason */
	uint32_t	check;		/* enum pol_check the port had */
	uint32_t	suppressed;	/* this sandbox's denials not reported
					 * since its previous event */
};

/* What becomes of one queued packet. The kernel takes verdicts only from
 * a process with CAP_NET_ADMIN, so the gate decides and the parent sends
 * (gateway/dnswire.c): a packet mark of the gate's and NF_REPEAT for the
 * first two, the bare verdict for the others. */
enum gate_action {
	GATE_PASS = 1,		/* the flow is allowed: FW_GATE_M_OK */
	GATE_REFUSE,		/* the flow is reset: FW_GATE_M_DENY */
	GATE_ACCEPT,		/* this packet only (a bare SYN or ACK) */
	GATE_DROP,		/* this packet only */
};

struct gate_hooks {
	/* The packet id of queue gets action (required). */
	void	(*verdict)(void *ctx, uint16_t queue, uint32_t id,
		    enum gate_action action);
	/* The sandbox whose address is addr4: 0 and *out, or -1. */
	int	(*lookup)(void *ctx, const uint8_t addr4[4],
		    struct gate_sbx *out);
	/* A flow was passed for name (may be NULL: for its flow records). */
	void	(*pass)(void *ctx, const uint8_t saddr[4],
		    const uint8_t daddr[4], uint16_t sport, uint16_t dport,
		    const char *name);
	/* A flow was refused (within the per-sandbox rate). */
	void	(*deny)(void *ctx, const struct gate_event *ev);
	/* Look up the ECH configs name publishes (its HTTPS records) and
	 * tell gate_ech_done; asked for the first ECH ClientHello to an
	 * address answered for name. NULL: never asked, such ClientHellos
	 * are refused. */
	void	(*ech_lookup)(void *ctx, const char *name);
	void	*ctx;
};

struct gate;

/* gate_new: serves the queue socket fd (bound by the parent to NFQUEUE
 * queue, fw_gate_open; the gate's now, closed by gate_free) on loop.
 * Packets that say another queue are not the gate's: they get no
 * verdict (and so never pass). NULL with errno. */
struct gate	*gate_new(struct ev_loop *loop, int fd, uint16_t queue,
		    const struct gate_hooks *hooks);
/* gate_free: NULL is a no-op. Held packets die with the socket. */
void		 gate_free(struct gate *g);
/* gate_learn: the sandbox of link ifname was answered address addr
 * (family AF_INET or AF_INET6, 16 bytes, IPv4 in the first 4) for name,
 * usable over proto on [lo, hi] for timeout_ms from now. Remembered
 * until then (refreshed by a later answer); 0, or -1 (ENOSPC: the
 * sandbox's bound, ENOMEM). */
int		 gate_learn(struct gate *g, const char *ifname, const char *name,
		    uint8_t family, const uint8_t addr[16], uint8_t proto,
		    uint16_t lo, uint16_t hi, uint32_t timeout_ms);
/* gate_restore: as gate_learn, for an answer an earlier DNS process gave
 * (the parent keeps them: gateway/privsep/ansmem.h) that lives until
 * expires_ms on ev_now_ms's clock, not for a timeout from now. One that
 * has expired is not kept (0). */
int		 gate_restore(struct gate *g, const char *ifname,
		    const char *name, uint8_t family, const uint8_t addr[16],
		    uint8_t proto, uint16_t lo, uint16_t hi,
		    uint64_t expires_ms);
/* gate_forget: everything remembered for link ifname (its sandbox went). */
void		 gate_forget(struct gate *g, const char *ifname);

struct ech_set;
/* gate_ech_done: the lookup the ech_lookup hook was asked for ended:
 * status 0 with
 * set (what name publishes; NULL or empty for none) and ttl_s, or -1
 * when it failed or the records were malformed. The flows whose ECH
 * ClientHello waited for it are judged now. */
void		 gate_ech_done(struct gate *g, const char *name, int status,
		    const struct ech_set *set, uint32_t ttl_s);

#endif /* SLUICE_GATEWAY_DNS_GATE_H */
