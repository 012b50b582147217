/*
 * fuzz_msg: what the parent does with a message from a child
 * (gateway/privsep/msg.c), under payloads a taken-over child could send.
 *
 * A random payload almost never gets past the size check, so the input
 * edits a valid one instead: byte 0 picks the message (a learn batch, a
 * batch of DNS events, a sandbox entry, a bridge event), byte 1 the number of
 * elements of a learn batch or of events of a batch, bytes 2-3 an offset, byte 4 whether the length is cut or grown,
 * and the rest is written over the valid payload at the offset. Beyond
 * "does not crash" (ASan, UBSan):
 *   - msg_check takes exactly the sizes the table gives;
 *   - a payload the checks accept has every string inside its array, a
 *     count matching its length, and fields fw_learn can take;
 *   - an accepted batch of DNS events is walked to exactly its end, and
 *     each event becomes a dns.decision record (the conversion the
 *     parent runs) that is one JSON object.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "audit/audit.h"
#include "gateway/dns/dns_rec.h"
#include "gateway/privsep/msg.h"
#include "tests/fuzz/fuzz.h"

#define MAX_ELEMS	8

static void
edit(uint8_t *p, size_t len, const uint8_t *data, size_t size)
{
	size_t off, n;

	if (size <= 5 || len == 0)
		return;
	off = ((size_t)data[2] | (size_t)data[3] << 8) % len;
	n = size - 5;
	if (n > len - off)
		n = len - off;
	memcpy(p + off, data + 5, n);
}

/* The length the receiver sees: as built, a byte short, or a byte more. */
static size_t
cut(size_t len, uint8_t how)
{
	switch (how % 4) {
	case 1:
		return len > 0 ? len - 1 : 0;
	case 2:
		return len + 1;
	default:
		return len;
	}
}

static void
try_learn(const uint8_t *data, size_t size)
{
	static uint8_t buf[sizeof(struct msg_learn) + (MAX_ELEMS + 1) *
	    sizeof(struct msg_elem)];
	struct msg_learn *m = (struct msg_learn *)(void *)buf;
	struct msg_elem *e = (struct msg_elem *)(m + 1);
	uint32_t i, k = (uint32_t)(data[1] % MAX_ELEMS) + 1;
	size_t len = sizeof(*m) + k * sizeof(*e), got;
	struct fw_elem fe;

	memset(buf, 0, sizeof(buf));
	m->ticket = 1;
	m->n = k;
	for (i = 0; i < k; i++) {
		strcpy(e[i].ifname, "sl-1");
		strcpy(e[i].name, "pkg.example.com");
		e[i].family = AF_INET;
		e[i].addr[0] = 198;
		e[i].addr[1] = 51;
		e[i].addr[2] = 100;
		e[i].addr[3] = 7;
		e[i].proto = IPPROTO_TCP;
		e[i].port_lo = e[i].port_hi = 443;
		e[i].timeout_ms = 60000;
	}
	edit(buf, len, data, size);
	got = cut(len, data[4]);
	if (msg_check(MSG_LEARN, got, MSG_TO_PARENT) != 0 ||
	    !msg_learn_ok(m, got))
		return;
	REQUIRE(got == sizeof(*m) + (size_t)m->n * sizeof(*e));
	REQUIRE(m->n >= 1 && m->n <= MSG_LEARN_MAX);
	for (i = 0; i < m->n; i++) {
		REQUIRE(strnlen(e[i].ifname, sizeof(e[i].ifname)) <
		    sizeof(e[i].ifname));
		REQUIRE(strnlen(e[i].name, sizeof(e[i].name)) <
		    sizeof(e[i].name));
		msg_elem_to(&fe, &e[i]);
		REQUIRE(fe.family == AF_INET || fe.family == AF_INET6);
		REQUIRE(fe.proto == IPPROTO_TCP || fe.proto == IPPROTO_UDP);
		REQUIRE(fe.port_lo <= fe.port_hi);
		REQUIRE(fe.name == NULL || strlen(fe.name) < MSG_NAME_MAX);
	}
}

/* A batch of up to four events, edited: byte 1 picks how many and how
 * many addresses the second one has. Accepted, walking the records ends
 * exactly at the length, and each record becomes a dns.decision record
 * that is one JSON object. */
static void
try_events(const uint8_t *data, size_t size)
{
	static unsigned char buf[sizeof(struct msg_dns_events) +
	    MSG_EVENTS_BYTES];
	static struct dns_event ev, scratch;
	static char out[16384];
	struct msg_dns_events h;
	uint32_t i, k = (uint32_t)(data[1] % 4) + 1;
	size_t len, got, off;
	struct aud_cw w;
	json_t *j;

	memset(&ev, 0, sizeof(ev));
	strcpy(ev.sandbox, "s1");
	strcpy(ev.client, "10.231.0.2#5353");
	strcpy(ev.qname, "pkg.example.com");
	ev.qtype = 1;
	ev.decision = DNS_DEC_ALLOW;
	ev.reason = POL_REASON_ALLOWED;
	ev.naddrs = 1;
	ev.addrs[0].family = AF_INET;
	ev.addrs[0].addr[0] = 198;
	strcpy(ev.addrs[0].cls, "public");
	ev.addrs[0].kept = true;
	ev.nkept = 1;
	ev.nelems = 1;
	strcpy(ev.elems[0].ifname, "sl-1");
	ev.elems[0].family = AF_INET;
	ev.elems[0].proto = IPPROTO_TCP;
	ev.elems[0].port_lo = ev.elems[0].port_hi = 443;
	memset(buf, 0, sizeof(buf));
	memset(&h, 0, sizeof(h));
	h.n = k;
	memcpy(buf, &h, sizeof(h));
	len = sizeof(h);
	for (i = 0; i < k; i++) {
		ev.naddrs = i == 1 ? (size_t)(data[1] >> 2) % 4 : 1;
		len += msg_dns_ev_put(buf + len, &ev);
	}
	edit(buf, len, data, size);
	got = cut(len, data[4]);
	if (msg_check(MSG_DNS_EVENTS, got, MSG_TO_PARENT) != 0 ||
	    !msg_dns_events_ok(buf, got, &scratch))
		return;
	memcpy(&h, buf, sizeof(h));
	REQUIRE(h.n >= 1 && h.n <= MSG_EVENTS_MAX);
	off = sizeof(h);
	for (i = 0; i < h.n; i++) {
		REQUIRE(msg_dns_ev_get(buf, got, &off, &scratch));
		REQUIRE(strnlen(scratch.qname, sizeof(scratch.qname)) <
		    sizeof(scratch.qname));
		REQUIRE(strnlen(scratch.sandbox, sizeof(scratch.sandbox)) <
		    sizeof(scratch.sandbox));
		REQUIRE((unsigned)scratch.reason < POL_REASON__COUNT);
		aud_cw_init(&w, out, sizeof(out));
		if (dns_rec_canon(&scratch, NULL, &w) != 0 || w.overflow)
			continue;
		j = json_loadb(w.p, w.len, 0, NULL);
		REQUIRE(j != NULL && json_is_object(j));
		json_decref(j);
	}
	REQUIRE(off == got);
}

/* A bridge event: the numbers, then strings whose lengths the header
 * gives. Accepted, every string is where its length says, NUL-terminated
 * with no NUL inside, and together they fill the payload exactly. */
static void
try_br_event(const uint8_t *data, size_t size)
{
	static uint8_t buf[sizeof(struct msg_br_event) + 256];
	static const char *const vals[] = { "s1", "alice", "p", "10.231.0.2",
	    NULL, "ev", "echo", "{\"message\":\"hi\"}" };
	struct msg_br_event *m = (struct msg_br_event *)(void *)buf;
	const char *strs[MSG_BR_NSTR];
	size_t i, off = sizeof(*m), got, sum = 0;
	char *p = (char *)buf;

	memset(buf, 0, sizeof(buf));
	m->kind = 1;
	m->reason = POL_REASON_ALLOWED;
	for (i = 0; i < MSG_BR_NSTR; i++) {
		const char *v = i < sizeof(vals) / sizeof(vals[0]) ? vals[i] :
		    NULL;

		if (v == NULL) {
			m->lens[i] = MSG_BR_NULL;
			continue;
		}
		m->lens[i] = (uint32_t)strlen(v);
		memcpy(p + off, v, strlen(v) + 1);
		off += strlen(v) + 1;
	}
	edit(buf, off, data, size);
	got = cut(off, data[4]);
	if (msg_check(MSG_BR_RECORD, got, MSG_TO_PARENT) != 0 ||
	    !msg_br_event_ok(m, got, strs))
		return;
	REQUIRE(m->kind >= 1 && m->reason >= 0 &&
	    m->reason < POL_REASON__COUNT && m->taints <= 1);
	for (i = 0; i < MSG_BR_NSTR; i++) {
		if (strs[i] == NULL) {
			REQUIRE(m->lens[i] == MSG_BR_NULL);
			continue;
		}
		REQUIRE((const uint8_t *)strs[i] >= buf + sizeof(*m) &&
		    (const uint8_t *)strs[i] + m->lens[i] < buf + got);
		REQUIRE(strlen(strs[i]) == m->lens[i]);
		sum += (size_t)m->lens[i] + 1;
	}
	REQUIRE(sum == got - sizeof(*m));
}

static void
try_sbx(const uint8_t *data, size_t size)
{
	struct msg_sbx s;

	memset(&s, 0, sizeof(s));
	strcpy(s.id, "s1");
	strcpy(s.ifname, "sl-1");
	strcpy(s.policy, "p");
	edit((uint8_t *)&s, sizeof(s), data, size);
	/* The parent's own messages come back in the wrong direction. */
	REQUIRE(msg_check(MSG_SBX_ADD, sizeof(s), MSG_TO_PARENT) != 0);
	if (!msg_sbx_ok(&s))
		return;
	REQUIRE(strnlen(s.id, sizeof(s.id)) < sizeof(s.id) && s.id[0] != '\0');
	REQUIRE(strnlen(s.policy, sizeof(s.policy)) < sizeof(s.policy));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t t;

	if (size < 5)
		return 0;
	/* The table's own word on every type, whatever the payload. */
	t = (uint32_t)data[0] | (uint32_t)data[1] << 8;
	(void)msg_check(t, cut(size, data[4]), (data[2] & 1) ?
	    MSG_TO_PARENT : MSG_TO_CHILD);
	REQUIRE(msg_check(t, 0, MSG_TO_PARENT) != 0 ||
	    (t > MSG_NONE && t < MSG_TYPE_MAX));
	switch (data[0] % 4) {
	case 0:
		try_learn(data, size);
		break;
	case 1:
		try_events(data, size);
		break;
	case 3:
		try_br_event(data, size);
		break;
	default:
		try_sbx(data, size);
		break;
	}
	return 0;
}
