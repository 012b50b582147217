/*
 * msg.h: every message that crosses between sluiced's processes.
 *
 * sluiced is a privileged parent (sandboxes, namespaces, nftables, the
 * audit log, the state database, the control socket) and unprivileged
 * children that parse what sandboxes send (the DNS process). They talk over
 * one SOCK_SEQPACKET socket pair each, one message per packet: a struct
 * msg_hdr and a payload whose size the table in msg.c fixes (or bounds, for
 * the messages that end in an array or in records of their own length). Payloads are flat: fixed arrays,
 * integers, NUL-terminated strings inside their arrays, never a pointer, so
 * a message means the same in both processes and a receiver can check it
 * completely before it uses a byte of it (msg_check, then the payload's own
 * msg_*_ok). A child is not trusted by the parent: whatever a child sends
 * is checked as if a sandbox had written it, and a child that sends
 * something malformed is killed and restarted.
 *
 * The closed enum below is the whole protocol. Adding a message means a
 * row in msg.c's table; nothing else decides what may cross.
 */
#ifndef SLUICE_GATEWAY_PRIVSEP_MSG_H
#define SLUICE_GATEWAY_PRIVSEP_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/dns/dns.h"
#include "gateway/dns/gate.h"
#include "netns/fw.h"
#include "policy/policy.h"

/* Who may send a message. */
enum msg_dir {
	MSG_TO_CHILD = 1,	/* parent -> child */
	MSG_TO_PARENT,		/* child -> parent */
};

enum msg_type {
	MSG_NONE = 0,
	/* parent -> DNS child, at start (in this order, then MSG_SYNC) */
	MSG_DNS_CONFIG,		/* struct msg_dns_config */
	MSG_POLICY_BEGIN,	/* struct msg_policy_begin: a new set follows */
	MSG_POLICY_FILE,	/* struct msg_policy_file: one file's header */
	MSG_POLICY_DATA,	/* bytes of the current file, <= MSG_DATA_MAX */
	MSG_POLICY_END,		/* (empty) the set is whole: swap it in */
	MSG_SBX_ADD,		/* struct msg_sbx: a sandbox exists */
	MSG_SBX_DEL,		/* struct msg_sbx: it is gone */
	MSG_SBX_CHANGE,		/* struct msg_sbx: its taint or policy changed */
	MSG_SYNC,		/* (empty) the initial state is complete */
	MSG_LEARN_ACK,		/* struct msg_learn_ack */
	MSG_GATE_ANSWERS,	/* struct msg_answers + n struct msg_answer:
				   before MSG_SYNC, what an earlier DNS
				   process answered (gateway/privsep/ansmem.h) */
	/* DNS child -> parent */
	MSG_READY,		/* struct msg_ready: serving */
	MSG_LEARN,		/* struct msg_learn + n struct msg_elem */
	MSG_DNS_EVENTS,		/* struct msg_dns_events + records */
	MSG_LOST,		/* struct msg_lost: events the child could not send */
	/* parent -> bridge child (the policy messages, MSG_SYNC as above) */
	MSG_BR_CONFIG,		/* struct msg_br_config: the daemon config */
	MSG_BR_CONFIG_DATA,	/* its bytes, <= MSG_DATA_MAX per message */
	MSG_BR_SBX_ADD,		/* struct msg_br_sbx: a sandbox exists */
	MSG_BR_SBX_DEL,		/* struct msg_br_sbx: it is gone */
	MSG_BR_SBX_CHANGE,	/* struct msg_br_sbx: taint or policy changed */
	MSG_BR_RECORD_DONE,	/* struct msg_br_done: a record is durable (or not) */
	MSG_BR_TAINT_DONE,	/* struct msg_br_done: egress narrowed (or not) */
	MSG_BR_CTL,		/* struct msg_br_ctl: a control API request */
	MSG_BR_STOP,		/* (empty) deny what waits, record it, exit */
	/* bridge child -> parent (and MSG_READY) */
	MSG_BR_FAIL,		/* struct msg_br_fail: it cannot serve, and why */
	MSG_BR_RECORD,		/* struct msg_br_event + strings: durable record */
	MSG_BR_FINDING,		/* struct msg_br_event + strings: a finding */
	MSG_BR_TAINT,		/* struct msg_br_taint: narrow this sandbox */
	MSG_BR_CTL_REPLY,	/* struct msg_br_ctl_reply + body */
	MSG_BR_STATS,		/* struct msg_br_stats */
	MSG_BR_ACTIVE,		/* struct msg_br_active: a sandbox used the bridge */
	MSG_BR_SREQ,		/* struct msg_br_sreq: a server request carried */
	/* name gate (gateway/dns/gate.c), DNS child -> parent */
	MSG_GATE_EVENT,		/* struct msg_gate_event: a flow refused */
	MSG_GATE_VERDICT,	/* struct msg_gate_verdict: for the parent to send */
	MSG_GATE_PASS,		/* struct msg_gate_pass: a flow passed, its name */
	MSG_TYPE_MAX
};

#define MSG_DATA_MAX		(32u * 1024u)	/* policy bytes per message */
#define MSG_POLICY_FILE_MAX	(1024u * 1024u)	/* as pol_policy_load */
#define MSG_POLICIES_MAX	4096u		/* as pol_set_load_dir */
#define MSG_TAP_MAX		256u		/* treat_as_public CIDRs */
#define MSG_LEARN_MAX		1024u		/* elements per learn batch */
#define MSG_ANSWERS_MAX		1024u		/* answers per replay message */
#define MSG_EVENTS_MAX		256u		/* dns events per batch */
#define MSG_EVENTS_BYTES	(256u * 1024u)	/* a batch's records, at most */
#define MSG_NAME_MAX		256u		/* a DNS name, with its NUL */
#define MSG_ID_MAX		33u		/* a sandbox id, with its NUL */
#define MSG_POLNAME_MAX		65u		/* a policy name, with its NUL */
#define MSG_ERR_MAX		128u
#define MSG_CONFIG_MAX		(1024u * 1024u)	/* as pol_config_load */
#define MSG_BR_LABELS		16u		/* as BR_MAX_LABELS */
#define MSG_BR_NSTR		22u		/* strings of an event */
#define MSG_BR_STR_MAX		(2u * 1024u * 1024u)	/* an event's strings */
#define MSG_BR_BODY_MAX		(4u * 1024u * 1024u)	/* a control reply */

struct msg_hdr {
	uint32_t	type;		/* enum msg_type */
	uint32_t	len;		/* payload bytes after the header */
};

/* The proxy's configuration (struct dns_config without its pointer and
 * its listen fields: the parent binds the listeners and hands them over at
 * exec). */
struct msg_dns_config {
	struct pol_addr		service_addr;
	struct sockaddr_storage	upstreams[DNS_MAX_UPSTREAMS];
	uint32_t		upstream_lens[DNS_MAX_UPSTREAMS];
	uint32_t		nupstreams;
	uint32_t		timeout_ms;
	uint32_t		tcp_idle_ms;
	uint32_t		max_tcp_conns;
	uint32_t		tcp_per_sandbox;
	uint32_t		max_answer_addrs;
	uint32_t		max_pending;
	uint32_t		cache_max;
	uint16_t		max_udp_size;
	uint8_t			no_cache;
	uint8_t			gate;		/* the gate's queue is fd 6 */
	uint16_t		gate_queue;	/* its NFQUEUE number */
	uint32_t		ntap;
	struct pol_cidr		tap[MSG_TAP_MAX];	/* treat_as_public */
};

struct msg_policy_begin {
	uint32_t	nfiles;		/* <= MSG_POLICIES_MAX */
};

struct msg_policy_file {
	char		path[256];	/* names the text in messages */
	uint32_t	len;		/* bytes in the MSG_POLICY_DATA that follow */
	char		digest[65];	/* pol_policy_digest, checked by the child */
};

struct msg_sbx {
	char		id[MSG_ID_MAX];
	char		ifname[FW_IFNAMSIZ];
	char		policy[MSG_POLNAME_MAX];
	uint8_t		addr4[4];	/* network byte order */
	uint8_t		tainted;
};

/* One learned element: struct fw_elem with the name inline. */
struct msg_elem {
	char		ifname[FW_IFNAMSIZ];
	char		name[MSG_NAME_MAX];	/* "" when not said */
	uint8_t		family;
	uint8_t		addr[16];
	uint8_t		proto;
	uint8_t		flags;
	uint8_t		budget;		/* fw_elem.budget, <= FW_MAX_BUDGETS */
	uint16_t	port_lo, port_hi;
	uint32_t	timeout_ms;
};

struct msg_learn {
	uint64_t	ticket;
	uint32_t	n;		/* struct msg_elem that follow, 1..MSG_LEARN_MAX */
};

struct msg_learn_ack {
	uint64_t	ticket;
	int32_t		err_no;		/* 0: the kernel has them */
	char		err[MSG_ERR_MAX];
};

/*
 * One answer a DNS process gave and the kernel acknowledged (a named
 * element of a learn batch), as the parent keeps it to give it back to
 * the next DNS process (gateway/privsep/ansmem.h): the name gate's memory
 * is the child's, and a child started again would otherwise refuse every
 * flow to what the kernel still lets the sandbox reach. The expiry is
 * absolute on CLOCK_MONOTONIC (ev_now_ms), which both processes read, so
 * an answer lives exactly as long after the replay as it would have.
 */
struct msg_answer {
	uint64_t	expires_ms;
	char		ifname[FW_IFNAMSIZ];
	char		name[MSG_NAME_MAX];	/* never "" */
	uint8_t		family;
	uint8_t		addr[16];
	uint8_t		proto;
	uint16_t	port_lo, port_hi;
	uint16_t	pad;		/* 0: no hole in the struct */
};

struct msg_answers {
	uint32_t	n;		/* struct msg_answer that follow,
					   1..MSG_ANSWERS_MAX */
	uint32_t	pad;
};

struct msg_ready {
	uint32_t	pid;
};

/*
 * The dns.decision events of one loop turn of the DNS process, in one
 * message: struct msg_dns_events, then n records back to back, each a
 * struct msg_dns_ev followed by exactly min(naddrs, DNS_EV_MAX_ADDRS)
 * struct dns_ev_addr and min(nelems, DNS_EV_MAX_ELEMS) struct dns_ev_elem
 * (the slots the event used, never the empty ones). A record's length
 * follows from its own counts, and the records must fill the payload
 * exactly. Records start at any offset: a receiver copies them out
 * (msg_dns_ev_get), it never points into them.
 */
struct msg_dns_events {
	uint32_t	n;		/* records, 1..MSG_EVENTS_MAX */
	uint32_t	pad;
};

/* struct dns_event's fields before its arrays, in fixed-width types. */
struct msg_dns_ev {
	uint64_t	latency_us;
	uint32_t	naddrs, nkept, nremoved, nelems;	/* as counted */
	uint32_t	suppressed;
	uint32_t	decision;	/* enum dns_decision */
	uint32_t	reason;		/* enum pol_reason */
	uint16_t	qtype;
	uint8_t		tcp, finding, rcode;
	char		sandbox[33];
	char		client[INET6_ADDRSTRLEN + 8];
	char		qname[256];
	char		rule[48];
	char		upstream[INET6_ADDRSTRLEN + 8];
};

struct msg_lost {
	uint64_t	events;		/* dns.decision records never sent */
};

/* The daemon config for the bridge process, whose bytes follow in
 * MSG_BR_CONFIG_DATA: loaded there again from the same text, with the
 * limits the parent fitted to its descriptors. */
struct msg_br_config {
	char		path[256];	/* names the text in messages */
	uint32_t	len;		/* bytes that follow, <= MSG_CONFIG_MAX */
	char		digest[65];	/* msg_digest of them */
	uint32_t	lim_conns, lim_conns_sbx, lim_request_s;
	/* The password for the fleet's database, which the parent reads
	 * (its file is root's; the bridge can read nothing of root's):
	 * NUL-terminated, has_pg_password 0 when there is none. */
	uint8_t		has_pg_password;
	char		pg_password[1025];
	/* This host's name in the fleet's tables ("" without a fleet). */
	char		fleet_host[128];
};

/* A sandbox as the bridge needs it: who it is (subject and labels, which
 * the policy matches) and the digest of its bearer token, never the token. */
struct msg_br_sbx {
	char		id[MSG_ID_MAX];
	char		policy[MSG_POLNAME_MAX];
	char		subject[128];
	char		label_keys[MSG_BR_LABELS][64];
	char		label_values[MSG_BR_LABELS][128];
	uint8_t		token_sha256[32];
	uint8_t		addr4[4];	/* network byte order */
	uint8_t		nlabels;
	uint8_t		tainted;
	uint8_t		usable;		/* 0: its identity does not fit the
					   bridge's fields: it calls nothing */
};

struct msg_br_done {
	uint64_t	ticket;
	int32_t		ok;		/* 1 done, 0 not */
};

struct msg_br_taint {
	uint64_t	ticket;
	char		id[MSG_ID_MAX];
};

/* What a control request asks of the bridge. */
enum msg_br_op {
	MSG_BR_OP_APPROVALS = 1,	/* list pending calls (JSON) */
	MSG_BR_OP_DECIDE,		/* approve or deny one */
	MSG_BR_OP_PINS,			/* a server's pins (YAML) */
	MSG_BR_OP_ACCEPT,		/* accept a tool's definition */
	MSG_BR_OP_MAX
};

struct msg_br_ctl {
	uint64_t	ticket;
	uint32_t	op;		/* enum msg_br_op */
	uint8_t		approve;	/* DECIDE: 1 approve, 0 deny */
	uint8_t		has_note, has_reason;
	uint8_t		pad;
	int64_t		uid;		/* DECIDE: the caller, from the socket */
	char		id[64];		/* DECIDE: the pending call */
	char		server[128];	/* PINS, ACCEPT */
	char		tool[128];	/* ACCEPT */
	char		name[160];	/* DECIDE: the caller's user name */
	char		note[129];
	char		reason[1025];
};

struct msg_br_ctl_reply {
	uint64_t	ticket;
	int32_t		err_no;		/* 0, or the bridge function's errno */
	uint32_t	len;		/* body bytes that follow */
};

struct msg_br_fail {
	char		err[256];
};

/* A request from the sandbox passed identification (resources.idle);
 * sent at most once a second per sandbox. */
struct msg_br_active {
	char		id[MSG_ID_MAX];
};

/* A server request (sampling, elicitation, roots) carried to a client,
 * announced before the client can answer it: the parent records it as
 * of unknown outcome if the bridge process dies before its
 * mcp.server_request record, which names the same key (msg_br_event's
 * sreq_key), arrives. What the record would say of it. */
struct msg_br_sreq {
	uint64_t	key;		/* never 0, unique in the process */
	char		sandbox[MSG_ID_MAX];
	char		subject[128];
	char		policy[MSG_POLNAME_MAX];
	char		src[64];
	char		session[65];
	char		server[128];
	char		method[32];	/* one of the three */
	char		args_digest[72];
	char		detail[192];	/* how it was carried */
};

struct msg_br_stats {
	uint32_t	pending_approvals;
	uint32_t	calls;		/* tool calls in flight */
	/* the budgets the fleet shares (gateway/bridge/shared.h) */
	uint8_t		shared;		/* 1: a fleet is configured */
	uint8_t		shared_up;	/* its database answers */
	/* the approval queue the fleet shares (gateway/bridge/fleetq.h) */
	uint8_t		aq_up;
	uint8_t		pad[5];
	uint64_t	shared_reserved, shared_exhausted, shared_unavailable;
	uint64_t	shared_failures, shared_reconnects;
	uint64_t	aq_posted, aq_decided, aq_delivered, aq_failures;
	uint64_t	aq_reconnects;
};

/* One bridge event (struct br_event) flat: numbers here, and the
 * MSG_BR_NSTR strings after it in this order, each NUL-terminated, with
 * lens[i] its length or MSG_BR_NULL when the field is absent. */
#define MSG_BR_NULL	UINT32_MAX
enum msg_br_str {
	MSG_BRS_SANDBOX, MSG_BRS_SUBJECT, MSG_BRS_POLICY, MSG_BRS_SRC,
	MSG_BRS_SESSION, MSG_BRS_SERVER, MSG_BRS_TOOL, MSG_BRS_ARGS,
	MSG_BRS_ARGS_DIGEST, MSG_BRS_DECISION, MSG_BRS_RULE, MSG_BRS_MESSAGE,
	MSG_BRS_BUDGET, MSG_BRS_APPROVER, MSG_BRS_APPROVER_NOTE,
	MSG_BRS_APPROVAL, MSG_BRS_CLASSIFICATION, MSG_BRS_RESULT_DIGEST,
	MSG_BRS_DETAIL, MSG_BRS_CALL_ID, MSG_BRS_APPROVER_HOST, MSG_BRS_HELD_BY
};
struct msg_br_event {
	uint64_t	ticket;		/* MSG_BR_RECORD: for the done */
	uint64_t	sreq_key;	/* mcp.server_request: the msg_br_sreq
					   it ends, or 0 */
	uint32_t	kind;		/* enum br_event_kind */
	int32_t		reason;		/* enum pol_reason */
	int64_t		approver_uid;
	int64_t		upstream_latency_us;
	uint64_t	result_bytes;
	uint32_t	redactions;
	uint8_t		taints;
	uint8_t		pad[3];
	uint32_t	lens[MSG_BR_NSTR];
};

/* name gate: one refused flow (gateway/dns/gate.h, flat). */
struct msg_gate_event {
	struct gate_event ev;
};

/* name gate: a queued packet's verdict (the kernel takes it only from a
 * process with CAP_NET_ADMIN). */
struct msg_gate_verdict {
	uint32_t	id;		/* the packet's id in the queue */
	uint32_t	action;		/* enum gate_action */
};

/* name gate: a flow passed for name (for its net.flow record). */
struct msg_gate_pass {
	uint8_t		saddr[4], daddr[4];	/* network order */
	uint16_t	sport, dport;		/* host order */
	char		name[256];
};

/*
 * msg_check: whether a payload of len bytes may be a message of type going
 * in direction dir (the type is in the enum, flows that way, and len is
 * its size, or within its bounds for the messages of variable length:
 * MSG_LEARN, MSG_DNS_EVENTS, MSG_POLICY_DATA...). 0, or -1 with errno
 * EPROTO. It looks at sizes only; the payload's own checks
 * follow (msg_sbx_ok, msg_learn_ok, msg_dns_events_ok).
 */
int		 msg_check(uint32_t type, size_t len, enum msg_dir dir);
/* msg_name: a message type's name for logs ("?" when out of range). */
const char	*msg_name(uint32_t type);
/* msg_max_payload: the largest payload any message may carry (for
 * receive buffers). */
size_t		 msg_max_payload(void);

/* msg_str_ok: s holds a NUL within its size bytes (a string that stays
 * inside its array). */
bool		 msg_str_ok(const char *s, size_t size);
/* msg_sbx_ok: every string of s is terminated inside its array. */
bool		 msg_sbx_ok(const struct msg_sbx *s);
/* msg_learn_ok: a learn message of len payload bytes is whole: n within
 * bounds and matching len, each element's strings terminated, its family,
 * protocol and port range ones fw_learn can take. */
bool		 msg_learn_ok(const struct msg_learn *m, size_t len);
/* msg_answers_ok: a replay message of len payload bytes is whole: n
 * within bounds and matching len, each answer's strings terminated and
 * not empty, its family, protocol and port range ones gate_learn takes. */
bool		 msg_answers_ok(const struct msg_answers *m, size_t len);
/* msg_answer_ok: one answer of such a message is (as above). */
bool		 msg_answer_ok(const struct msg_answer *a);
/* msg_dns_ev_size: the bytes of the record ev makes (its used slots). */
size_t		 msg_dns_ev_size(const struct dns_event *ev);
/* msg_dns_ev_put: writes ev's record at p, which has room for
 * msg_dns_ev_size(ev) bytes; returns that size. */
size_t		 msg_dns_ev_put(void *p, const struct dns_event *ev);
/*
 * msg_dns_ev_get: reads the record at *off of a batch payload of len bytes
 * into ev and moves *off past it. false, with ev unspecified, when the
 * record does not fit in what is left, or a string is not terminated
 * inside its array, or an enum, a bool or an address family is out of
 * range. Only the used slots of ev's arrays are written.
 */
bool		 msg_dns_ev_get(const void *pl, size_t len, size_t *off,
		    struct dns_event *ev);
/* msg_dns_events_ok: a batch of len payload bytes is whole: n within
 * bounds, every record valid (msg_dns_ev_get, into scratch), and the
 * records exactly fill len. */
bool		 msg_dns_events_ok(const void *pl, size_t len,
		    struct dns_event *scratch);
/* msg_gate_event_ok: the event's strings are terminated, its reason one
 * of the gate's and its check an enum pol_check. */
bool		 msg_gate_event_ok(const struct msg_gate_event *m);

/* msg_br_sbx_ok: its strings terminated, counts and flags in range. */
bool		 msg_br_sbx_ok(const struct msg_br_sbx *s);
/* msg_br_ctl_ok: op known, strings terminated, flags 0 or 1. */
bool		 msg_br_ctl_ok(const struct msg_br_ctl *m);
/* msg_br_event_ok: an event of len payload bytes is whole: kind and
 * reason within their enums, taints 0 or 1, and the strings exactly fill
 * the rest, each ending where its length says and holding no other NUL.
 * On success strs[i] points at string i inside m (NULL when absent). */
bool		 msg_br_event_ok(const struct msg_br_event *m, size_t len,
		    const char *strs[MSG_BR_NSTR]);
/* msg_br_sreq_ok: key not 0, strings terminated, sandbox and server
 * named, method one a server may ask of a client. */
bool		 msg_br_sreq_ok(const struct msg_br_sreq *m);
/* msg_digest: lower-case hex SHA-256 of len bytes of buf into out. */
void		 msg_digest(const void *buf, size_t len, char out[65]);

/* msg_elem_from / msg_elem_to: between fw_elem and its flat form; to's
 * e->name points into m (valid as long as m). */
void		 msg_elem_from(struct msg_elem *m, const struct fw_elem *e);
void		 msg_elem_to(struct fw_elem *e, const struct msg_elem *m);

#endif /* SLUICE_GATEWAY_PRIVSEP_MSG_H */
