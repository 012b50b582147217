/*
 * check_privsep_msg: the protocol between sluiced's processes. The parent
 * treats what a child sends as hostile, so these tests are about refusal:
 * every message type is taken only in its size and direction, a learn
 * batch or a DNS event with one bad field is refused whole, and a channel
 * ends (once, with a reason) on a packet the table does not allow, on a
 * peer that hangs up, and stops queueing at its bound when the peer does
 * not read. Everything runs on one event loop over socket pairs.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/ev.h"
#include "gateway/privsep/chan.h"
#include "gateway/bridge/bridge.h"
#include "gateway/privsep/msg.h"

/* ------------------------------------------------------------ msg_check */

START_TEST(test_check_sizes_and_directions)
{
	ck_assert_int_eq(msg_check(MSG_SBX_ADD, sizeof(struct msg_sbx),
	    MSG_TO_CHILD), 0);
	ck_assert_int_eq(msg_check(MSG_SBX_ADD, sizeof(struct msg_sbx),
	    MSG_TO_PARENT), -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_int_eq(msg_check(MSG_SBX_ADD, sizeof(struct msg_sbx) - 1,
	    MSG_TO_CHILD), -1);
	ck_assert_int_eq(msg_check(MSG_SBX_ADD, sizeof(struct msg_sbx) + 1,
	    MSG_TO_CHILD), -1);
	ck_assert_int_eq(msg_check(MSG_SYNC, 0, MSG_TO_CHILD), 0);
	ck_assert_int_eq(msg_check(MSG_SYNC, 1, MSG_TO_CHILD), -1);
	ck_assert_int_eq(msg_check(MSG_DNS_EVENTS, sizeof(struct msg_dns_events)
	    + sizeof(struct msg_dns_ev), MSG_TO_PARENT), 0);
	ck_assert_int_eq(msg_check(MSG_DNS_EVENTS, sizeof(struct msg_dns_events)
	    + sizeof(struct msg_dns_ev), MSG_TO_CHILD), -1);
	ck_assert_int_eq(msg_check(MSG_DNS_EVENTS, sizeof(struct msg_dns_events)
	    + sizeof(struct msg_dns_ev) - 1, MSG_TO_PARENT), -1);
	ck_assert_int_eq(msg_check(MSG_DNS_EVENTS, sizeof(struct msg_dns_events)
	    + MSG_EVENTS_BYTES, MSG_TO_PARENT), 0);
	ck_assert_int_eq(msg_check(MSG_DNS_EVENTS, sizeof(struct msg_dns_events)
	    + MSG_EVENTS_BYTES + 1, MSG_TO_PARENT), -1);
	/* Bounded ones: at least one element, at most the batch. */
	ck_assert_int_eq(msg_check(MSG_LEARN, sizeof(struct msg_learn),
	    MSG_TO_PARENT), -1);
	ck_assert_int_eq(msg_check(MSG_LEARN, sizeof(struct msg_learn) +
	    sizeof(struct msg_elem), MSG_TO_PARENT), 0);
	ck_assert_int_eq(msg_check(MSG_LEARN, sizeof(struct msg_learn) +
	    MSG_LEARN_MAX * sizeof(struct msg_elem), MSG_TO_PARENT), 0);
	ck_assert_int_eq(msg_check(MSG_LEARN, sizeof(struct msg_learn) +
	    (MSG_LEARN_MAX + 1) * sizeof(struct msg_elem), MSG_TO_PARENT), -1);
	ck_assert_int_eq(msg_check(MSG_POLICY_DATA, 0, MSG_TO_CHILD), -1);
	ck_assert_int_eq(msg_check(MSG_POLICY_DATA, MSG_DATA_MAX,
	    MSG_TO_CHILD), 0);
	ck_assert_int_eq(msg_check(MSG_POLICY_DATA, MSG_DATA_MAX + 1,
	    MSG_TO_CHILD), -1);
	/* Outside the enum. */
	ck_assert_int_eq(msg_check(MSG_NONE, 0, MSG_TO_CHILD), -1);
	ck_assert_int_eq(msg_check(MSG_TYPE_MAX, 0, MSG_TO_CHILD), -1);
	ck_assert_int_eq(msg_check(0xffffffffu, 0, MSG_TO_PARENT), -1);
	ck_assert_str_eq(msg_name(MSG_LEARN), "LEARN");
	ck_assert_str_eq(msg_name(12345), "?");
	ck_assert_uint_ge(msg_max_payload(), sizeof(struct msg_learn) +
	    MSG_LEARN_MAX * sizeof(struct msg_elem));
}
END_TEST

/* Every type in the enum has a row: a type added without one would be
 * refused in both directions. */
START_TEST(test_check_every_type_has_a_row)
{
	uint32_t t;

	for (t = MSG_NONE + 1; t < MSG_TYPE_MAX; t++)
		ck_assert_msg(strcmp(msg_name(t), "?") != 0, "type %u", t);
}
END_TEST

/* ------------------------------------------------------- payload checks */

static struct msg_learn *
learn_new(uint32_t n)
{
	struct msg_learn *m = calloc(1, sizeof(*m) + n * sizeof(struct msg_elem));
	struct msg_elem *e = (struct msg_elem *)(m + 1);
	uint32_t i;

	ck_assert_ptr_nonnull(m);
	m->ticket = 7;
	m->n = n;
	for (i = 0; i < n; i++) {
		strcpy(e[i].ifname, "sl-3");
		strcpy(e[i].name, "pkg.example.com");
		e[i].family = AF_INET;
		e[i].addr[0] = 192;
		e[i].addr[2] = 2;
		e[i].addr[3] = 10;
		e[i].proto = IPPROTO_TCP;
		e[i].port_lo = e[i].port_hi = 443;
		e[i].timeout_ms = 60000;
	}
	return m;
}

START_TEST(test_learn_ok)
{
	size_t len = sizeof(struct msg_learn) + 3 * sizeof(struct msg_elem);
	struct msg_learn *m = learn_new(3);
	struct msg_elem *e = (struct msg_elem *)(m + 1);

	ck_assert(msg_learn_ok(m, len));
	/* n that does not match the bytes */
	m->n = 2;
	ck_assert(!msg_learn_ok(m, len));
	m->n = 4;
	ck_assert(!msg_learn_ok(m, len));
	m->n = 0;
	ck_assert(!msg_learn_ok(m, sizeof(*m)));
	m->n = 3;
	/* one bad field in the last element refuses the batch */
	memset(e[2].ifname, 'a', sizeof(e[2].ifname));
	ck_assert(!msg_learn_ok(m, len));
	strcpy(e[2].ifname, "");
	ck_assert(!msg_learn_ok(m, len));
	strcpy(e[2].ifname, "sl-3");
	memset(e[2].name, 'a', sizeof(e[2].name));
	ck_assert(!msg_learn_ok(m, len));
	e[2].name[0] = '\0';
	ck_assert(msg_learn_ok(m, len));
	e[2].family = 99;
	ck_assert(!msg_learn_ok(m, len));
	e[2].family = AF_INET6;
	e[2].proto = IPPROTO_ICMP;
	ck_assert(!msg_learn_ok(m, len));
	e[2].proto = IPPROTO_UDP;
	e[2].port_lo = 500;
	e[2].port_hi = 400;
	ck_assert(!msg_learn_ok(m, len));
	e[2].port_hi = 600;
	e[2].flags = 0x80;
	ck_assert(!msg_learn_ok(m, len));
	e[2].flags = FW_ELEM_KEEP;
	ck_assert(msg_learn_ok(m, len));
	free(m);
}
END_TEST

START_TEST(test_elem_roundtrip)
{
	struct fw_elem e, back;
	struct msg_elem m;

	memset(&e, 0, sizeof(e));
	strcpy(e.ifname, "sl-12");
	e.family = AF_INET6;
	e.addr[0] = 0x20;
	e.addr[1] = 0x01;
	e.addr[15] = 9;
	e.proto = IPPROTO_UDP;
	e.port_lo = 5000;
	e.port_hi = 5010;
	e.timeout_ms = 1234;
	e.flags = FW_ELEM_KEEP;
	e.name = "web.example.org";
	msg_elem_from(&m, &e);
	msg_elem_to(&back, &m);
	ck_assert_str_eq(back.ifname, "sl-12");
	ck_assert_int_eq(memcmp(back.addr, e.addr, 16), 0);
	ck_assert_uint_eq(back.port_lo, 5000);
	ck_assert_uint_eq(back.port_hi, 5010);
	ck_assert_uint_eq(back.timeout_ms, 1234);
	ck_assert_uint_eq(back.flags, FW_ELEM_KEEP);
	ck_assert_str_eq(back.name, "web.example.org");
	ck_assert_ptr_eq(back.name, m.name);	/* into the message, not e's */
	e.name = NULL;
	msg_elem_from(&m, &e);
	msg_elem_to(&back, &m);
	ck_assert_ptr_null(back.name);
}
END_TEST

static void
one_event(struct dns_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	strcpy(ev->sandbox, "s1");
	strcpy(ev->qname, "pkg.example.com");
	ev->decision = DNS_DEC_ALLOW;
	ev->reason = POL_REASON_ALLOWED;
	ev->nelems = 1;
	strcpy(ev->elems[0].ifname, "sl-1");
	ev->elems[0].family = AF_INET;
	ev->naddrs = 1;
	ev->addrs[0].family = AF_INET;
	strcpy(ev->addrs[0].cls, "public");
}

/* A batch of the n events evs into buf (room for all); its length. */
static size_t
batch(unsigned char *buf, const struct dns_event *evs, uint32_t n)
{
	struct msg_dns_events h = { .n = n };
	size_t off = sizeof(h);
	uint32_t i;

	memcpy(buf, &h, sizeof(h));
	for (i = 0; i < n; i++)
		off += msg_dns_ev_put(buf + off, &evs[i]);
	return off;
}

/* The record of ev alone, in a batch of one: whether it is taken. */
static bool
one_ok(const struct dns_event *ev)
{
	static unsigned char buf[sizeof(struct msg_dns_events) +
	    MSG_EVENTS_BYTES];
	static struct dns_event scratch;

	return msg_dns_events_ok(buf, batch(buf, ev, 1), &scratch);
}

START_TEST(test_dns_event_ok)
{
	struct dns_event *ev = calloc(1, sizeof(*ev));
	unsigned char *buf;
	size_t len, off;

	ck_assert_ptr_nonnull(ev);
	one_event(ev);
	ck_assert(one_ok(ev));
	/* Only the used slots cross. */
	ck_assert_uint_eq(msg_dns_ev_size(ev), sizeof(struct msg_dns_ev) +
	    sizeof(struct dns_ev_addr) + sizeof(struct dns_ev_elem));
	memset(ev->elems[0].ifname, 'i', sizeof(ev->elems[0].ifname));
	ck_assert(!one_ok(ev));
	strcpy(ev->elems[0].ifname, "sl-1");
	ev->decision = (enum dns_decision)77;
	ck_assert(!one_ok(ev));
	ev->decision = DNS_DEC_DENY;
	ev->reason = POL_REASON__COUNT;
	ck_assert(!one_ok(ev));
	ev->reason = POL_REASON_ALLOWED;
	memset(ev->addrs[0].cls, 'c', sizeof(ev->addrs[0].cls));
	ck_assert(!one_ok(ev));
	strcpy(ev->addrs[0].cls, "public");
	ev->addrs[0].family = 0;
	ck_assert(!one_ok(ev));
	ev->addrs[0].family = AF_INET;
	ev->elems[0].family = 99;
	ck_assert(!one_ok(ev));
	ev->elems[0].family = AF_INET6;
	ck_assert(one_ok(ev));
	/* A bool holding another byte (undefined to load as a bool). */
	{
		uint8_t seven = 7, zero = 0;

		memcpy(&ev->addrs[0].kept, &seven, 1);
		ck_assert(!one_ok(ev));
		memcpy(&ev->addrs[0].kept, &zero, 1);
		ck_assert(one_ok(ev));
	}
	/* The put side terminates what it copies: a full array still
	 * crosses as a string, cut. */
	memset(ev->qname, 'x', sizeof(ev->qname));
	ck_assert(one_ok(ev));
	strcpy(ev->qname, "a");
	/* Counts over the arrays: the record holds the first slots. */
	ev->naddrs = 1000;
	ev->nelems = DNS_EV_MAX_ELEMS + 1;
	for (size_t i = 0; i < DNS_EV_MAX_ADDRS; i++) {
		ev->addrs[i].family = AF_INET;
		strcpy(ev->addrs[i].cls, "public");
	}
	for (size_t i = 0; i < DNS_EV_MAX_ELEMS; i++) {
		ev->elems[i].family = AF_INET;
		strcpy(ev->elems[i].ifname, "sl-1");
	}
	ck_assert_uint_eq(msg_dns_ev_size(ev), sizeof(struct msg_dns_ev) +
	    DNS_EV_MAX_ADDRS * sizeof(struct dns_ev_addr) +
	    DNS_EV_MAX_ELEMS * sizeof(struct dns_ev_elem));
	ck_assert(one_ok(ev));

	/* A round trip keeps every field. */
	buf = calloc(1, sizeof(struct msg_dns_events) + MSG_EVENTS_BYTES);
	ck_assert_ptr_nonnull(buf);
	one_event(ev);
	ev->latency_us = 1234;
	ev->qtype = 28;
	ev->tcp = true;
	ev->finding = true;
	ev->rcode = 3;
	ev->suppressed = 9;
	strcpy(ev->rule, "r1");
	strcpy(ev->upstream, "192.0.2.54#53");
	strcpy(ev->client, "10.231.0.2#5353");
	{
		struct dns_event *back = calloc(1, sizeof(*back));

		ck_assert_ptr_nonnull(back);
		len = batch(buf, ev, 1);
		off = sizeof(struct msg_dns_events);
		ck_assert(msg_dns_ev_get(buf, len, &off, back));
		ck_assert_uint_eq(off, len);
		ck_assert_uint_eq(back->latency_us, 1234);
		ck_assert_uint_eq(back->qtype, 28);
		ck_assert(back->tcp && back->finding);
		ck_assert_uint_eq(back->rcode, 3);
		ck_assert_uint_eq(back->suppressed, 9);
		ck_assert_str_eq(back->rule, "r1");
		ck_assert_str_eq(back->upstream, "192.0.2.54#53");
		ck_assert_str_eq(back->client, "10.231.0.2#5353");
		ck_assert_str_eq(back->qname, "pkg.example.com");
		ck_assert_uint_eq(back->naddrs, 1);
		ck_assert_str_eq(back->addrs[0].cls, "public");
		ck_assert_str_eq(back->elems[0].ifname, "sl-1");
		free(back);
	}
	free(buf);
	free(ev);
}
END_TEST

/* Batches whose lengths and counts do not agree are refused whole. */
START_TEST(test_dns_events_batch)
{
	static struct dns_event evs[3], scratch;
	unsigned char *buf = calloc(1, sizeof(struct msg_dns_events) +
	    MSG_EVENTS_BYTES + 64);
	struct msg_dns_events h;
	size_t len, one;
	uint32_t n;

	ck_assert_ptr_nonnull(buf);
	one_event(&evs[0]);
	one_event(&evs[1]);
	evs[1].naddrs = 0;	/* a deny: no addresses, no elements */
	evs[1].nelems = 0;
	one_event(&evs[2]);
	evs[2].naddrs = 2;
	evs[2].addrs[1].family = AF_INET6;
	strcpy(evs[2].addrs[1].cls, "public");
	len = batch(buf, evs, 3);
	ck_assert(msg_dns_events_ok(buf, len, &scratch));
	ck_assert_int_eq(msg_check(MSG_DNS_EVENTS, len, MSG_TO_PARENT), 0);
	/* Truncated: the last record is cut, or a whole one is missing. */
	ck_assert(!msg_dns_events_ok(buf, len - 1, &scratch));
	ck_assert(!msg_dns_events_ok(buf, len - msg_dns_ev_size(&evs[2]),
	    &scratch));
	/* Overlong: bytes after the last record. */
	buf[len] = 0;
	ck_assert(!msg_dns_events_ok(buf, len + 1, &scratch));
	/* A count that says more or fewer records than there are. */
	memcpy(&h, buf, sizeof(h));
	h.n = 4;
	memcpy(buf, &h, sizeof(h));
	ck_assert(!msg_dns_events_ok(buf, len, &scratch));
	h.n = 2;
	memcpy(buf, &h, sizeof(h));
	ck_assert(!msg_dns_events_ok(buf, len, &scratch));
	h.n = 0;
	memcpy(buf, &h, sizeof(h));
	ck_assert(!msg_dns_events_ok(buf, sizeof(h), &scratch));
	h.n = MSG_EVENTS_MAX + 1;
	memcpy(buf, &h, sizeof(h));
	ck_assert(!msg_dns_events_ok(buf, len, &scratch));
	h.n = 3;
	h.pad = 1;
	memcpy(buf, &h, sizeof(h));
	ck_assert(!msg_dns_events_ok(buf, len, &scratch));
	h.pad = 0;
	memcpy(buf, &h, sizeof(h));
	ck_assert(msg_dns_events_ok(buf, len, &scratch));
	/* A record whose address count claims a slot the bytes do not
	 * have: the record runs into the next one, which then does not fit. */
	{
		struct msg_dns_ev r;
		size_t at = sizeof(h);

		memcpy(&r, buf + at, sizeof(r));
		r.naddrs = 2;
		memcpy(buf + at, &r, sizeof(r));
		ck_assert(!msg_dns_events_ok(buf, len, &scratch));
		r.naddrs = 1;
		memcpy(buf + at, &r, sizeof(r));
		ck_assert(msg_dns_events_ok(buf, len, &scratch));
		/* An unterminated string in the second record. */
		at += msg_dns_ev_size(&evs[0]);
		memcpy(&r, buf + at, sizeof(r));
		memset(r.qname, 'q', sizeof(r.qname));
		memcpy(buf + at, &r, sizeof(r));
		ck_assert(!msg_dns_events_ok(buf, len, &scratch));
	}
	/* The largest batch the child makes: MSG_EVENTS_MAX records, each
	 * small, within the bytes; one more record is refused. */
	one = msg_dns_ev_size(&evs[1]);
	ck_assert(MSG_EVENTS_MAX * one <= MSG_EVENTS_BYTES);
	len = sizeof(h);
	for (n = 0; n < MSG_EVENTS_MAX + 1; n++)
		len += msg_dns_ev_put(buf + len, &evs[1]);
	h.n = MSG_EVENTS_MAX;
	memcpy(buf, &h, sizeof(h));
	ck_assert(msg_dns_events_ok(buf, len - one, &scratch));
	h.n = MSG_EVENTS_MAX + 1;
	memcpy(buf, &h, sizeof(h));
	ck_assert(!msg_dns_events_ok(buf, len, &scratch));
	free(buf);
}
END_TEST

/* A bridge event with strings a, (absent), b, then nothing. */
static size_t
br_event(uint8_t *buf, const char *a, const char *b)
{
	struct msg_br_event *m = (struct msg_br_event *)(void *)buf;
	size_t i, off = sizeof(*m);

	memset(m, 0, sizeof(*m));
	m->kind = BR_EV_CALL;
	m->reason = POL_REASON_ALLOWED;
	for (i = 0; i < MSG_BR_NSTR; i++)
		m->lens[i] = MSG_BR_NULL;
	m->lens[0] = (uint32_t)strlen(a);
	memcpy(buf + off, a, strlen(a) + 1);
	off += strlen(a) + 1;
	m->lens[2] = (uint32_t)strlen(b);
	memcpy(buf + off, b, strlen(b) + 1);
	return off + strlen(b) + 1;
}

START_TEST(test_br_event_ok)
{
	static uint8_t buf[sizeof(struct msg_br_event) + 64];
	struct msg_br_event *m = (struct msg_br_event *)(void *)buf;
	const char *s[MSG_BR_NSTR];
	size_t len;

	len = br_event(buf, "sbx1", "policy");
	ck_assert(msg_br_event_ok(m, len, s));
	ck_assert_str_eq(s[0], "sbx1");
	ck_assert_ptr_null(s[1]);
	ck_assert_str_eq(s[2], "policy");
	ck_assert_ptr_null(s[3]);
	/* Bytes left over, or missing. */
	ck_assert(!msg_br_event_ok(m, len + 1, s));
	ck_assert(!msg_br_event_ok(m, len - 1, s));
	/* A length that points past the payload, or short of its NUL. */
	m->lens[2] = 40;
	ck_assert(!msg_br_event_ok(m, len, s));
	len = br_event(buf, "sbx1", "policy");
	m->lens[0] = 3;
	ck_assert(!msg_br_event_ok(m, len, s));
	/* A NUL inside a string. */
	len = br_event(buf, "sbx1", "policy");
	buf[sizeof(*m) + 1] = '\0';
	ck_assert(!msg_br_event_ok(m, len, s));
	/* Kind, reason and taints out of their ranges. */
	len = br_event(buf, "sbx1", "policy");
	m->kind = 0;
	ck_assert(!msg_br_event_ok(m, len, s));
	m->kind = BR_EV__LAST + 1;
	ck_assert(!msg_br_event_ok(m, len, s));
	/* An intent is an event of its own kind. */
	m->kind = BR_EV_INTENT;
	ck_assert(msg_br_event_ok(m, len, s));
	/* So is an upstream's request of the client. */
	m->kind = BR_EV_SERVER_REQUEST;
	ck_assert(msg_br_event_ok(m, len, s));
	m->kind = BR_EV_CALL;
	m->reason = POL_REASON__COUNT;
	ck_assert(!msg_br_event_ok(m, len, s));
	m->reason = -1;
	ck_assert(!msg_br_event_ok(m, len, s));
	m->reason = POL_REASON_ALLOWED;
	m->taints = 2;
	ck_assert(!msg_br_event_ok(m, len, s));
	m->taints = 1;
	ck_assert(msg_br_event_ok(m, len, s));
	/* The table: the child sends it, within its bound. */
	ck_assert_int_eq(msg_check(MSG_BR_RECORD, len, MSG_TO_PARENT), 0);
	ck_assert_int_eq(msg_check(MSG_BR_RECORD, len, MSG_TO_CHILD), -1);
	ck_assert_int_eq(msg_check(MSG_BR_RECORD, sizeof(*m) - 1,
	    MSG_TO_PARENT), -1);
	ck_assert_int_eq(msg_check(MSG_BR_RECORD, sizeof(*m) + MSG_BR_STR_MAX +
	    1, MSG_TO_PARENT), -1);
}
END_TEST

START_TEST(test_br_sbx_ctl_ok)
{
	struct msg_br_sbx b;
	struct msg_br_ctl c;
	struct msg_br_sreq q;

	memset(&b, 0, sizeof(b));
	strcpy(b.id, "s1");
	strcpy(b.policy, "p");
	b.nlabels = 1;
	b.usable = 1;
	ck_assert(msg_br_sbx_ok(&b));
	memset(b.label_values[0], 'v', sizeof(b.label_values[0]));
	ck_assert(!msg_br_sbx_ok(&b));
	memset(b.label_values[0], 0, sizeof(b.label_values[0]));
	b.nlabels = MSG_BR_LABELS + 1;
	ck_assert(!msg_br_sbx_ok(&b));
	b.nlabels = 0;
	b.usable = 2;
	ck_assert(!msg_br_sbx_ok(&b));
	b.usable = 1;
	b.id[0] = '\0';
	ck_assert(!msg_br_sbx_ok(&b));

	/* A server request's announcement: a key, a sandbox, a server and
	 * one of the three methods, every string inside its array. */
	memset(&q, 0, sizeof(q));
	q.key = 1;
	strcpy(q.sandbox, "sb");
	strcpy(q.server, "srv");
	strcpy(q.method, "roots/list");
	ck_assert(msg_br_sreq_ok(&q));
	ck_assert_int_eq(msg_check(MSG_BR_SREQ, sizeof(q), MSG_TO_PARENT), 0);
	ck_assert_int_eq(msg_check(MSG_BR_SREQ, sizeof(q), MSG_TO_CHILD), -1);
	q.key = 0;
	ck_assert(!msg_br_sreq_ok(&q));
	q.key = 1;
	strcpy(q.method, "tools/call");
	ck_assert(!msg_br_sreq_ok(&q));
	strcpy(q.method, "sampling/createMessage");
	memset(q.detail, 'd', sizeof(q.detail));
	ck_assert(!msg_br_sreq_ok(&q));
	memset(q.detail, 0, sizeof(q.detail));
	q.sandbox[0] = '\0';
	ck_assert(!msg_br_sreq_ok(&q));

	memset(&c, 0, sizeof(c));
	c.op = MSG_BR_OP_DECIDE;
	ck_assert(msg_br_ctl_ok(&c));
	c.op = MSG_BR_OP_MAX;
	ck_assert(!msg_br_ctl_ok(&c));
	c.op = MSG_BR_OP_PINS;
	c.approve = 2;
	ck_assert(!msg_br_ctl_ok(&c));
	c.approve = 0;
	memset(c.reason, 'r', sizeof(c.reason));
	ck_assert(!msg_br_ctl_ok(&c));
	/* Only the parent asks; only the child answers. */
	ck_assert_int_eq(msg_check(MSG_BR_CTL, sizeof(c), MSG_TO_PARENT), -1);
	ck_assert_int_eq(msg_check(MSG_BR_CTL_REPLY,
	    sizeof(struct msg_br_ctl_reply), MSG_TO_CHILD), -1);
	ck_assert_int_eq(msg_check(MSG_BR_CTL_REPLY,
	    sizeof(struct msg_br_ctl_reply) + MSG_BR_BODY_MAX + 1,
	    MSG_TO_PARENT), -1);
}
END_TEST

START_TEST(test_sbx_ok)
{
	struct msg_sbx s;

	memset(&s, 0, sizeof(s));
	strcpy(s.id, "a");
	strcpy(s.ifname, "sl-1");
	strcpy(s.policy, "p");
	ck_assert(msg_sbx_ok(&s));
	s.tainted = 2;
	ck_assert(!msg_sbx_ok(&s));
	s.tainted = 1;
	memset(s.policy, 'p', sizeof(s.policy));
	ck_assert(!msg_sbx_ok(&s));
	strcpy(s.policy, "p");
	s.id[0] = '\0';
	ck_assert(!msg_sbx_ok(&s));
}
END_TEST

/* --------------------------------------------------------------- chan */

struct side {
	uint32_t	types[64];
	size_t		lens[64];
	unsigned char	last[256];
	size_t		n;
	int		gone;
	char		why[64];
	struct chan	*c;
	bool		free_on_gone;
};

static void
on_msg(void *ctx, uint32_t type, void *p, size_t len)
{
	struct side *s = ctx;

	if (s->n < 64) {
		s->types[s->n] = type;
		s->lens[s->n] = len;
	}
	s->n++;
	memcpy(s->last, p, len < sizeof(s->last) ? len : sizeof(s->last));
}

static void
on_gone(void *ctx, const char *why)
{
	struct side *s = ctx;

	s->gone++;
	strncpy(s->why, why, sizeof(s->why) - 1);
	if (s->free_on_gone) {
		chan_free(s->c);
		s->c = NULL;
	}
}

static void
stop_cb(struct ev_loop *loop, void *arg)
{
	(void)arg;
	ev_stop(loop);
}

static void
turns(struct ev_loop *loop, int n)
{
	while (n-- > 0) {
		ck_assert_ptr_nonnull(ev_timer_add(loop, 2, stop_cb, NULL));
		ck_assert_int_eq(ev_run(loop), 0);
	}
}

START_TEST(test_chan_roundtrip)
{
	struct ev_loop *loop = ev_new();
	struct side parent, child;
	struct msg_ready r = { .pid = 4242 };
	struct msg_sbx s;
	int sv[2];

	memset(&parent, 0, sizeof(parent));
	memset(&child, 0, sizeof(child));
	ck_assert_ptr_nonnull(loop);
	ck_assert_int_eq(chan_pair(sv), 0);
	parent.c = chan_new(loop, sv[0], MSG_TO_PARENT, 1 << 20, on_msg,
	    on_gone, &parent);
	child.c = chan_new(loop, sv[1], MSG_TO_CHILD, 1 << 20, on_msg,
	    on_gone, &child);
	ck_assert_ptr_nonnull(parent.c);
	ck_assert_ptr_nonnull(child.c);
	ck_assert_int_eq(chan_send1(child.c, MSG_READY, &r, sizeof(r)), 0);
	memset(&s, 0, sizeof(s));
	strcpy(s.id, "x1");
	ck_assert_int_eq(chan_send1(parent.c, MSG_SBX_ADD, &s, sizeof(s)), 0);
	ck_assert_int_eq(chan_send1(parent.c, MSG_SYNC, NULL, 0), 0);
	turns(loop, 5);
	ck_assert_uint_eq(parent.n, 1);
	ck_assert_uint_eq(parent.types[0], MSG_READY);
	ck_assert_uint_eq(((struct msg_ready *)parent.last)->pid, 4242);
	ck_assert_uint_eq(child.n, 2);
	ck_assert_uint_eq(child.types[0], MSG_SBX_ADD);
	ck_assert_uint_eq(child.lens[0], sizeof(s));
	ck_assert_uint_eq(child.types[1], MSG_SYNC);
	ck_assert_int_eq(parent.gone + child.gone, 0);
	chan_free(parent.c);
	turns(loop, 3);
	ck_assert_int_eq(child.gone, 1);
	ck_assert_str_eq(child.why, "closed by the peer");
	chan_free(child.c);
	chan_free(NULL);
	ev_free(loop);
}
END_TEST

/* A raw packet the table does not allow ends the channel: the parent's
 * side, fed by a child that is not the one it started. */
static void
hostile(const void *pkt, size_t len, const char *why)
{
	struct ev_loop *loop = ev_new();
	struct side parent;
	int sv[2];

	memset(&parent, 0, sizeof(parent));
	parent.free_on_gone = true;
	ck_assert_int_eq(chan_pair(sv), 0);
	parent.c = chan_new(loop, sv[0], MSG_TO_PARENT, 1 << 20, on_msg,
	    on_gone, &parent);
	ck_assert_int_eq(send(sv[1], pkt, len, 0), (ssize_t)len);
	turns(loop, 3);
	ck_assert_uint_eq(parent.n, 0);
	ck_assert_int_eq(parent.gone, 1);
	ck_assert_str_eq(parent.why, why);
	ck_assert_ptr_null(parent.c);
	close(sv[1]);
	ev_free(loop);
}

START_TEST(test_chan_refuses)
{
	struct {
		struct msg_hdr	h;
		unsigned char	p[sizeof(struct msg_sbx) + 8];
	} pkt;

	memset(&pkt, 0, sizeof(pkt));
	/* the parent's own message, coming from the child */
	pkt.h.type = MSG_SBX_ADD;
	pkt.h.len = sizeof(struct msg_sbx);
	hostile(&pkt, sizeof(pkt.h) + pkt.h.len,
	    "a message the protocol does not allow");
	/* a header that says more than the packet has */
	pkt.h.type = MSG_READY;
	pkt.h.len = 100;
	hostile(&pkt, sizeof(pkt.h) + sizeof(struct msg_ready),
	    "a message the protocol does not allow");
	/* the right header, the wrong size */
	pkt.h.len = sizeof(struct msg_ready) + 1;
	hostile(&pkt, sizeof(pkt.h) + pkt.h.len,
	    "a message the protocol does not allow");
	/* shorter than a header */
	hostile(&pkt, 3, "a message of the wrong size");
	/* a type outside the enum */
	pkt.h.type = 999;
	pkt.h.len = 0;
	hostile(&pkt, sizeof(pkt.h), "a message the protocol does not allow");
}
END_TEST

START_TEST(test_chan_oversized)
{
	size_t big = sizeof(struct msg_hdr) + msg_max_payload() + 64;
	unsigned char *pkt = calloc(1, big);

	ck_assert_ptr_nonnull(pkt);
	((struct msg_hdr *)pkt)->type = MSG_LEARN;
	((struct msg_hdr *)pkt)->len = (uint32_t)(big - sizeof(struct msg_hdr));
	hostile(pkt, big, "a message of the wrong size");
	free(pkt);
}
END_TEST

/* A peer that does not read costs at most the queue's bound. */
START_TEST(test_chan_bounded_queue)
{
	struct ev_loop *loop = ev_new();
	struct side parent;
	static unsigned char data[MSG_DATA_MAX];
	int sv[2], i, rc = 0;

	memset(&parent, 0, sizeof(parent));
	ck_assert_int_eq(chan_pair(sv), 0);
	parent.c = chan_new(loop, sv[0], MSG_TO_PARENT, 256 * 1024, on_msg,
	    on_gone, &parent);
	for (i = 0; i < 100000 && rc == 0; i++)
		rc = chan_send1(parent.c, MSG_POLICY_DATA, data, sizeof(data));
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(errno, ENOBUFS);
	ck_assert_uint_le(chan_queued(parent.c), 256 * 1024);
	ck_assert_int_lt(i, 100000);
	chan_free(parent.c);
	close(sv[1]);
	ev_free(loop);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("privsep_msg");
	TCase *t = tcase_create("msg");

	tcase_add_test(t, test_check_sizes_and_directions);
	tcase_add_test(t, test_check_every_type_has_a_row);
	tcase_add_test(t, test_learn_ok);
	tcase_add_test(t, test_elem_roundtrip);
	tcase_add_test(t, test_dns_event_ok);
	tcase_add_test(t, test_dns_events_batch);
	tcase_add_test(t, test_sbx_ok);
	tcase_add_test(t, test_br_event_ok);
	tcase_add_test(t, test_br_sbx_ctl_ok);
	suite_add_tcase(s, t);
	t = tcase_create("chan");
	tcase_add_test(t, test_chan_roundtrip);
	tcase_add_test(t, test_chan_refuses);
	tcase_add_test(t, test_chan_oversized);
	tcase_add_test(t, test_chan_bounded_queue);
	suite_add_tcase(s, t);
	return s;
}

int
main(void)
{
	SRunner *r = srunner_create(suite());
	int nf;

	srunner_run_all(r, CK_NORMAL);
	nf = srunner_ntests_failed(r);
	srunner_free(r);
	return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
