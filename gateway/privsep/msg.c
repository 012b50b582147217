/*
 * msg.c: the one table of what may cross between sluiced's processes
 * (msg.h), and the checks a receiver runs on a payload before it uses it.
 * Sizes are decided here and nowhere else, so that a receiver never reads a
 * payload whose length it has not compared with the table.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

#include "gateway/bridge/bridge.h"
#include "gateway/privsep/msg.h"

struct msg_spec {
	const char	*name;
	enum msg_dir	 dir;
	size_t		 min, max;	/* payload bytes */
};

#define FIXED(t, d, s)	[t] = { #t, d, sizeof(s), sizeof(s) }
#define EMPTY(t, d)	[t] = { #t, d, 0, 0 }

static const struct msg_spec specs[MSG_TYPE_MAX] = {
	FIXED(MSG_DNS_CONFIG, MSG_TO_CHILD, struct msg_dns_config),
	FIXED(MSG_POLICY_BEGIN, MSG_TO_CHILD, struct msg_policy_begin),
	FIXED(MSG_POLICY_FILE, MSG_TO_CHILD, struct msg_policy_file),
	[MSG_POLICY_DATA] = { "MSG_POLICY_DATA", MSG_TO_CHILD, 1,
	    MSG_DATA_MAX },
	EMPTY(MSG_POLICY_END, MSG_TO_CHILD),
	FIXED(MSG_SBX_ADD, MSG_TO_CHILD, struct msg_sbx),
	FIXED(MSG_SBX_DEL, MSG_TO_CHILD, struct msg_sbx),
	FIXED(MSG_SBX_CHANGE, MSG_TO_CHILD, struct msg_sbx),
	EMPTY(MSG_SYNC, MSG_TO_CHILD),
	FIXED(MSG_LEARN_ACK, MSG_TO_CHILD, struct msg_learn_ack),
	[MSG_GATE_ANSWERS] = { "MSG_GATE_ANSWERS", MSG_TO_CHILD,
	    sizeof(struct msg_answers) + sizeof(struct msg_answer),
	    sizeof(struct msg_answers) +
	    MSG_ANSWERS_MAX * sizeof(struct msg_answer) },
	FIXED(MSG_READY, MSG_TO_PARENT, struct msg_ready),
	[MSG_LEARN] = { "MSG_LEARN", MSG_TO_PARENT, sizeof(struct msg_learn) +
	    sizeof(struct msg_elem), sizeof(struct msg_learn) +
	    MSG_LEARN_MAX * sizeof(struct msg_elem) },
	/* At least one record, each at least its fixed part. */
	[MSG_DNS_EVENTS] = { "MSG_DNS_EVENTS", MSG_TO_PARENT,
	    sizeof(struct msg_dns_events) + sizeof(struct msg_dns_ev),
	    sizeof(struct msg_dns_events) + MSG_EVENTS_BYTES },
	FIXED(MSG_LOST, MSG_TO_PARENT, struct msg_lost),
	FIXED(MSG_BR_CONFIG, MSG_TO_CHILD, struct msg_br_config),
	[MSG_BR_CONFIG_DATA] = { "MSG_BR_CONFIG_DATA", MSG_TO_CHILD, 1,
	    MSG_DATA_MAX },
	FIXED(MSG_BR_SBX_ADD, MSG_TO_CHILD, struct msg_br_sbx),
	FIXED(MSG_BR_SBX_DEL, MSG_TO_CHILD, struct msg_br_sbx),
	FIXED(MSG_BR_SBX_CHANGE, MSG_TO_CHILD, struct msg_br_sbx),
	FIXED(MSG_BR_RECORD_DONE, MSG_TO_CHILD, struct msg_br_done),
	FIXED(MSG_BR_TAINT_DONE, MSG_TO_CHILD, struct msg_br_done),
	FIXED(MSG_BR_CTL, MSG_TO_CHILD, struct msg_br_ctl),
	EMPTY(MSG_BR_STOP, MSG_TO_CHILD),
	FIXED(MSG_BR_FAIL, MSG_TO_PARENT, struct msg_br_fail),
	[MSG_BR_RECORD] = { "MSG_BR_RECORD", MSG_TO_PARENT,
	    sizeof(struct msg_br_event), sizeof(struct msg_br_event) +
	    MSG_BR_STR_MAX },
	[MSG_BR_FINDING] = { "MSG_BR_FINDING", MSG_TO_PARENT,
	    sizeof(struct msg_br_event), sizeof(struct msg_br_event) +
	    MSG_BR_STR_MAX },
	FIXED(MSG_BR_TAINT, MSG_TO_PARENT, struct msg_br_taint),
	[MSG_BR_CTL_REPLY] = { "MSG_BR_CTL_REPLY", MSG_TO_PARENT,
	    sizeof(struct msg_br_ctl_reply), sizeof(struct msg_br_ctl_reply) +
	    MSG_BR_BODY_MAX },
	FIXED(MSG_BR_STATS, MSG_TO_PARENT, struct msg_br_stats),
	FIXED(MSG_BR_ACTIVE, MSG_TO_PARENT, struct msg_br_active),
	FIXED(MSG_BR_SREQ, MSG_TO_PARENT, struct msg_br_sreq),
	/* name gate */
	FIXED(MSG_GATE_EVENT, MSG_TO_PARENT, struct msg_gate_event),
	FIXED(MSG_GATE_VERDICT, MSG_TO_PARENT, struct msg_gate_verdict),
	FIXED(MSG_GATE_PASS, MSG_TO_PARENT, struct msg_gate_pass),
};

int
msg_check(uint32_t type, size_t len, enum msg_dir dir)
{
	const struct msg_spec *s;

	if (type == MSG_NONE || type >= MSG_TYPE_MAX)
		goto bad;
	s = &specs[type];
	if (s->dir != dir || len < s->min || len > s->max)
		goto bad;
	return 0;
bad:
	errno = EPROTO;
	return -1;
}

const char *
msg_name(uint32_t type)
{
	if (type == MSG_NONE || type >= MSG_TYPE_MAX)
		return "?";
	/* Past the "MSG_" every name shares. */
	return specs[type].name + 4;
}

size_t
msg_max_payload(void)
{
	size_t i, m = 0;

	for (i = 1; i < MSG_TYPE_MAX; i++)
		if (specs[i].max > m)
			m = specs[i].max;
	return m;
}

bool
msg_str_ok(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}

bool
msg_sbx_ok(const struct msg_sbx *s)
{
	return msg_str_ok(s->id, sizeof(s->id)) && s->id[0] != '\0' &&
	    msg_str_ok(s->ifname, sizeof(s->ifname)) &&
	    msg_str_ok(s->policy, sizeof(s->policy)) && s->tainted <= 1;
}

bool
msg_learn_ok(const struct msg_learn *m, size_t len)
{
	const struct msg_elem *e = (const struct msg_elem *)(m + 1);
	uint32_t i;

	if (len < sizeof(*m) || m->n == 0 || m->n > MSG_LEARN_MAX ||
	    len != sizeof(*m) + (size_t)m->n * sizeof(*e))
		return false;
	for (i = 0; i < m->n; i++, e++) {
		if (!msg_str_ok(e->ifname, sizeof(e->ifname)) ||
		    e->ifname[0] == '\0' ||
		    !msg_str_ok(e->name, sizeof(e->name)) ||
		    (e->family != AF_INET && e->family != AF_INET6) ||
		    (e->proto != IPPROTO_TCP && e->proto != IPPROTO_UDP) ||
		    e->port_hi < e->port_lo || e->budget > FW_MAX_BUDGETS ||
		    (e->flags & ~FW_ELEM_KEEP) != 0)
			return false;
	}
	return true;
}

bool
msg_answer_ok(const struct msg_answer *a)
{
	return msg_str_ok(a->ifname, sizeof(a->ifname)) &&
	    a->ifname[0] != '\0' && msg_str_ok(a->name, sizeof(a->name)) &&
	    a->name[0] != '\0' &&
	    (a->family == AF_INET || a->family == AF_INET6) &&
	    (a->proto == IPPROTO_TCP || a->proto == IPPROTO_UDP) &&
	    a->port_hi >= a->port_lo;
}

bool
msg_answers_ok(const struct msg_answers *m, size_t len)
{
	const struct msg_answer *a = (const struct msg_answer *)(m + 1);
	uint32_t i;

	if (len < sizeof(*m) || m->n == 0 || m->n > MSG_ANSWERS_MAX ||
	    len != sizeof(*m) + (size_t)m->n * sizeof(*a))
		return false;
	for (i = 0; i < m->n; i++, a++)
		if (!msg_answer_ok(a))
			return false;
	return true;
}

static size_t
n_addrs(size_t n)
{
	return n < DNS_EV_MAX_ADDRS ? n : DNS_EV_MAX_ADDRS;
}

static size_t
n_elems(size_t n)
{
	return n < DNS_EV_MAX_ELEMS ? n : DNS_EV_MAX_ELEMS;
}

size_t
msg_dns_ev_size(const struct dns_event *ev)
{
	return sizeof(struct msg_dns_ev) + n_addrs(ev->naddrs) *
	    sizeof(struct dns_ev_addr) + n_elems(ev->nelems) *
	    sizeof(struct dns_ev_elem);
}

/* A count that does not fit the wire's field is capped: it is a figure
 * for the record, and the arrays hold the first DNS_EV_MAX_* anyway. */
static uint32_t
u32(size_t n)
{
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

size_t
msg_dns_ev_put(void *p, const struct dns_event *ev)
{
	unsigned char *o = p;
	struct msg_dns_ev h;
	size_t na = n_addrs(ev->naddrs), ne = n_elems(ev->nelems);

	memset(&h, 0, sizeof(h));
	h.latency_us = ev->latency_us;
	h.naddrs = u32(ev->naddrs);
	h.nkept = u32(ev->nkept);
	h.nremoved = u32(ev->nremoved);
	h.nelems = u32(ev->nelems);
	h.suppressed = ev->suppressed;
	h.decision = (uint32_t)ev->decision;
	h.reason = (uint32_t)ev->reason;
	h.qtype = ev->qtype;
	h.tcp = ev->tcp ? 1 : 0;
	h.finding = ev->finding ? 1 : 0;
	h.rcode = ev->rcode;
	/* Each string's bytes up to its NUL; the rest stays zero. */
	memcpy(h.sandbox, ev->sandbox, strnlen(ev->sandbox,
	    sizeof(h.sandbox) - 1));
	memcpy(h.client, ev->client, strnlen(ev->client, sizeof(h.client) -
	    1));
	memcpy(h.qname, ev->qname, strnlen(ev->qname, sizeof(h.qname) - 1));
	memcpy(h.rule, ev->rule, strnlen(ev->rule, sizeof(h.rule) - 1));
	memcpy(h.upstream, ev->upstream, strnlen(ev->upstream,
	    sizeof(h.upstream) - 1));
	memcpy(o, &h, sizeof(h));
	o += sizeof(h);
	memcpy(o, ev->addrs, na * sizeof(ev->addrs[0]));
	o += na * sizeof(ev->addrs[0]);
	memcpy(o, ev->elems, ne * sizeof(ev->elems[0]));
	o += ne * sizeof(ev->elems[0]);
	return (size_t)(o - (unsigned char *)p);
}

/* A bool that crossed a process boundary may hold any byte, and loading
 * one that is not 0 or 1 is undefined: look at it as a byte. */
static bool
bool_ok(const bool *b)
{
	uint8_t v;

	memcpy(&v, b, 1);
	return v <= 1;
}

bool
msg_dns_ev_get(const void *pl, size_t len, size_t *off, struct dns_event *ev)
{
	const unsigned char *p = pl;
	struct msg_dns_ev h;
	size_t i, na, ne, need;

	if (*off > len || len - *off < sizeof(h))
		return false;
	memcpy(&h, p + *off, sizeof(h));
	na = n_addrs(h.naddrs);
	ne = n_elems(h.nelems);
	need = sizeof(h) + na * sizeof(ev->addrs[0]) + ne *
	    sizeof(ev->elems[0]);
	if (len - *off < need ||
	    !msg_str_ok(h.sandbox, sizeof(h.sandbox)) ||
	    !msg_str_ok(h.client, sizeof(h.client)) ||
	    !msg_str_ok(h.qname, sizeof(h.qname)) ||
	    !msg_str_ok(h.rule, sizeof(h.rule)) ||
	    !msg_str_ok(h.upstream, sizeof(h.upstream)) ||
	    h.decision > DNS_DEC_MALFORMED || h.reason >= POL_REASON__COUNT ||
	    h.tcp > 1 || h.finding > 1)
		return false;
	ev->latency_us = h.latency_us;
	ev->naddrs = h.naddrs;
	ev->nkept = h.nkept;
	ev->nremoved = h.nremoved;
	ev->nelems = h.nelems;
	ev->suppressed = h.suppressed;
	ev->decision = (enum dns_decision)h.decision;
	ev->reason = (enum pol_reason)h.reason;
	ev->qtype = h.qtype;
	ev->tcp = h.tcp != 0;
	ev->finding = h.finding != 0;
	ev->rcode = h.rcode;
	memcpy(ev->sandbox, h.sandbox, sizeof(ev->sandbox));
	memcpy(ev->client, h.client, sizeof(ev->client));
	memcpy(ev->qname, h.qname, sizeof(ev->qname));
	memcpy(ev->rule, h.rule, sizeof(ev->rule));
	memcpy(ev->upstream, h.upstream, sizeof(ev->upstream));
	memcpy(ev->addrs, p + *off + sizeof(h), na * sizeof(ev->addrs[0]));
	memcpy(ev->elems, p + *off + sizeof(h) + na * sizeof(ev->addrs[0]),
	    ne * sizeof(ev->elems[0]));
	for (i = 0; i < na; i++) {
		const struct dns_ev_addr *a = &ev->addrs[i];

		if ((a->family != AF_INET && a->family != AF_INET6) ||
		    !msg_str_ok(a->cls, sizeof(a->cls)) || !bool_ok(&a->kept))
			return false;
	}
	for (i = 0; i < ne; i++) {
		const struct dns_ev_elem *e = &ev->elems[i];

		if (!msg_str_ok(e->ifname, sizeof(e->ifname)) ||
		    (e->family != AF_INET && e->family != AF_INET6))
			return false;
	}
	*off += need;
	return true;
}

bool
msg_dns_events_ok(const void *pl, size_t len, struct dns_event *scratch)
{
	struct msg_dns_events h;
	size_t off = sizeof(h);
	uint32_t i;

	if (len < sizeof(h))
		return false;
	memcpy(&h, pl, sizeof(h));
	if (h.n == 0 || h.n > MSG_EVENTS_MAX || h.pad != 0)
		return false;
	for (i = 0; i < h.n; i++)
		if (!msg_dns_ev_get(pl, len, &off, scratch))
			return false;
	return off == len;
}

bool
msg_br_sbx_ok(const struct msg_br_sbx *s)
{
	size_t i;

	if (!msg_str_ok(s->id, sizeof(s->id)) || s->id[0] == '\0' ||
	    !msg_str_ok(s->policy, sizeof(s->policy)) ||
	    !msg_str_ok(s->subject, sizeof(s->subject)) ||
	    s->nlabels > MSG_BR_LABELS || s->tainted > 1 || s->usable > 1)
		return false;
	for (i = 0; i < s->nlabels; i++)
		if (!msg_str_ok(s->label_keys[i], sizeof(s->label_keys[i])) ||
		    !msg_str_ok(s->label_values[i],
		    sizeof(s->label_values[i])))
			return false;
	return true;
}

bool
msg_br_ctl_ok(const struct msg_br_ctl *m)
{
	return m->op >= MSG_BR_OP_APPROVALS && m->op < MSG_BR_OP_MAX &&
	    m->approve <= 1 && m->has_note <= 1 && m->has_reason <= 1 &&
	    msg_str_ok(m->id, sizeof(m->id)) &&
	    msg_str_ok(m->server, sizeof(m->server)) &&
	    msg_str_ok(m->tool, sizeof(m->tool)) &&
	    msg_str_ok(m->name, sizeof(m->name)) &&
	    msg_str_ok(m->note, sizeof(m->note)) &&
	    msg_str_ok(m->reason, sizeof(m->reason));
}

bool
msg_br_event_ok(const struct msg_br_event *m, size_t len,
    const char *strs[MSG_BR_NSTR])
{
	const char *p = (const char *)(m + 1);
	size_t i, left;

	if (len < sizeof(*m) || m->kind < BR_EV_CALL ||
	    m->kind > BR_EV__LAST || m->reason < 0 ||
	    m->reason >= POL_REASON__COUNT || m->taints > 1)
		return false;
	left = len - sizeof(*m);
	for (i = 0; i < MSG_BR_NSTR; i++) {
		strs[i] = NULL;
		if (m->lens[i] == MSG_BR_NULL)
			continue;
		/* Its bytes, then its NUL, within what is left. */
		if (m->lens[i] >= left || p[m->lens[i]] != '\0' ||
		    memchr(p, '\0', m->lens[i]) != NULL)
			return false;
		strs[i] = p;
		p += m->lens[i] + 1;
		left -= m->lens[i] + 1;
	}
	return left == 0;
}

bool
msg_br_sreq_ok(const struct msg_br_sreq *m)
{
	return m->key != 0 && msg_str_ok(m->sandbox, sizeof(m->sandbox)) &&
	    m->sandbox[0] != '\0' && msg_str_ok(m->subject,
	    sizeof(m->subject)) && msg_str_ok(m->policy, sizeof(m->policy)) &&
	    msg_str_ok(m->src, sizeof(m->src)) &&
	    msg_str_ok(m->session, sizeof(m->session)) &&
	    msg_str_ok(m->server, sizeof(m->server)) && m->server[0] != '\0' &&
	    msg_str_ok(m->args_digest, sizeof(m->args_digest)) &&
	    msg_str_ok(m->detail, sizeof(m->detail)) &&
	    (strcmp(m->method, "sampling/createMessage") == 0 ||
	    strcmp(m->method, "elicitation/create") == 0 ||
	    strcmp(m->method, "roots/list") == 0);
}

void
msg_digest(const void *buf, size_t len, char out[65])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;

	if (EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL) != 1)
		mdlen = 0;
	for (i = 0; i < mdlen && i < 32; i++) {
		out[2 * i] = digits[md[i] >> 4];
		out[2 * i + 1] = digits[md[i] & 0xf];
	}
	out[2 * i] = '\0';
}

void
msg_elem_from(struct msg_elem *m, const struct fw_elem *e)
{
	size_t n;

	memset(m, 0, sizeof(*m));
	memcpy(m->ifname, e->ifname, strnlen(e->ifname, sizeof(m->ifname) -
	    1));
	if (e->name != NULL) {
		n = strnlen(e->name, sizeof(m->name) - 1);
		memcpy(m->name, e->name, n);
	}
	m->family = e->family;
	memcpy(m->addr, e->addr, sizeof(m->addr));
	m->proto = e->proto;
	m->flags = e->flags;
	m->budget = e->budget;
	m->port_lo = e->port_lo;
	m->port_hi = e->port_hi;
	m->timeout_ms = e->timeout_ms;
}

void
msg_elem_to(struct fw_elem *e, const struct msg_elem *m)
{
	memset(e, 0, sizeof(*e));
	memcpy(e->ifname, m->ifname, sizeof(e->ifname));
	e->family = m->family;
	memcpy(e->addr, m->addr, sizeof(e->addr));
	e->proto = m->proto;
	e->flags = m->flags;
	e->budget = m->budget;
	e->port_lo = m->port_lo;
	e->port_hi = m->port_hi;
	e->timeout_ms = m->timeout_ms;
	e->name = m->name[0] != '\0' ? m->name : NULL;
}

/* ------------------------------------------------------------ name gate */

bool
msg_gate_event_ok(const struct msg_gate_event *m)
{
	const struct gate_event *e = &m->ev;

	switch (e->reason) {
	case POL_REASON_NAME_MISMATCH:
	case POL_REASON_NO_NAME:
	case POL_REASON_ECH:
	case POL_REASON_NOT_TLS:
	case POL_REASON_NOT_HTTP:
	case POL_REASON_SANDBOX_GONE:
		break;
	default:
		return false;
	}
	return msg_str_ok(e->sandbox, sizeof(e->sandbox)) &&
	    msg_str_ok(e->name, sizeof(e->name)) &&
	    e->check <= POL_CHECK_HTTP;
}
