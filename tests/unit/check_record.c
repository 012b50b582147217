/*
 * check_record: the dns.decision record layout (gateway/dns/record.c) and the
 * DNS proxy's config mapping (gateway/dnswire.c dnsw_config).
 *
 * The record converter shares its constant parts between records for speed
 * (the proxy writes one per query), so these tests pin the exact canonical
 * bytes of records built back to back with changing sandboxes, policies and
 * rules: a shared value that leaked from one record into the next would
 * show here. Hostile events (bytes that are not UTF-8, counts past the
 * stored arrays, out-of-range codes) must still give a record the audit
 * log accepts, and nothing in this suite touches the network.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ldns/ldns.h>
#include <sqlite3.h>

#include "audit/audit.h"
#include "gateway/ev.h"
#include "gateway/dns/dns_rec.h"
#include "gateway/dnswire.h"
#include "gateway/record.h"
#include "policy/policy.h"

static const char pol_text[] =
    "version: 1\nname: dnsbench\negress:\n  allow:\n"
    "    - host: \"*.wild.example.com\"\n      ports: [80]\n";
/* The same name after a reload with other content: another digest. */
static const char pol_text2[] =
    "version: 1\nname: dnsbench\negress:\n  allow:\n"
    "    - host: \"*.wild.example.com\"\n      ports: [443]\n";

static struct pol_policy *
load_policy(const char *text)
{
	struct pol_errors *e = pol_errors_new(10);
	struct pol_policy *p;

	p = pol_policy_load_buf("dnsbench.yaml", text, strlen(text), NULL, e);
	ck_assert_msg(p != NULL, "%s", pol_errors_get(e, 0));
	pol_errors_free(e);
	return p;
}

static void
v4(uint8_t *dst, const char *s)
{
	ck_assert_int_eq(inet_pton(AF_INET, s, dst), 1);
}

/* A typical allowed A query of sandbox id with one kept answer and its
 * element. */
static void
typical(struct dns_event *ev, const char *id, const char *qname)
{
	memset(ev, 0, sizeof(*ev));
	snprintf(ev->sandbox, sizeof(ev->sandbox), "%s", id);
	snprintf(ev->client, sizeof(ev->client), "10.231.0.2#40123");
	snprintf(ev->qname, sizeof(ev->qname), "%s", qname);
	ev->qtype = 1;
	ev->decision = DNS_DEC_ALLOW;
	ev->reason = POL_REASON_ALLOWED;
	snprintf(ev->rule, sizeof(ev->rule), "egress.allow[0]");
	ev->naddrs = ev->nkept = 1;
	ev->addrs[0].family = AF_INET;
	v4(ev->addrs[0].addr, "192.0.2.10");
	ev->addrs[0].ttl = 300;
	snprintf(ev->addrs[0].cls, sizeof(ev->addrs[0].cls), "public");
	ev->addrs[0].kept = true;
	ev->nelems = 1;
	snprintf(ev->elems[0].ifname, sizeof(ev->elems[0].ifname), "sl-x");
	ev->elems[0].family = AF_INET;
	memcpy(ev->elems[0].addr, ev->addrs[0].addr, 4);
	ev->elems[0].proto = IPPROTO_TCP;
	ev->elems[0].port_lo = ev->elems[0].port_hi = 80;
	ev->elems[0].timeout_ms = 300000;
	snprintf(ev->upstream, sizeof(ev->upstream), "192.0.2.53#53");
	ev->latency_us = 812;
}

/* The canonical bytes of the record of ev (what the log stores). */
static char *
canon_of(const struct dns_event *ev, const struct pol_policy *p)
{
	char err[256], *s;
	json_t *f;
	size_t len;

	f = dns_rec_fields(ev, p);
	ck_assert_ptr_nonnull(f);
	s = aud_canon_dump(f, &len, err, sizeof(err));
	ck_assert_msg(s != NULL, "not canonical: %s", err);
	ck_assert_uint_eq(strlen(s), len);
	json_decref(f);
	/* The proxy writes the same record without a tree (dns_rec_canon):
	 * every record of this suite must come out byte for byte the same,
	 * and also through a buffer that is too small for it (then it says
	 * so and the proxy falls back to the tree). */
	{
		static char cb[1 << 20];
		struct aud_cw w;

		aud_cw_init(&w, cb, sizeof(cb));
		ck_assert_int_eq(dns_rec_canon(ev, p, &w), 0);
		ck_assert_uint_eq(w.len, len);
		ck_assert(memcmp(cb, s, len) == 0);
		aud_cw_init(&w, cb, len / 2);
		ck_assert_int_eq(dns_rec_canon(ev, p, &w), -1);
		ck_assert(w.overflow);
	}
	return s;
}

static void
assert_canon(const struct dns_event *ev, const struct pol_policy *p,
    const char *want)
{
	char *got = canon_of(ev, p);

	ck_assert_str_eq(got, want);
	free(got);
}

#define TYPICAL_TAIL \
	"\"latency_us\":812,\"naddrs\":1,\"nelems\":1,\"nkept\":1," \
	"\"nremoved\":0,\"outcome\":\"allow\","

/* ----------------------------------------------------------------- Core */

START_TEST(dns_record_layout)
{
	struct pol_policy *p = load_policy(pol_text);
	struct dns_event ev;
	char want[2048];

	typical(&ev, "sbx-a", "n1.wild.example.com");
	snprintf(want, sizeof(want),
	    "{\"answers\":[{\"class\":\"public\",\"ip\":\"192.0.2.10\","
	    "\"ttl\":300}],\"client\":\"10.231.0.2#40123\","
	    "\"decision\":\"allow\",\"elements\":[{\"ip\":\"192.0.2.10\","
	    "\"port_hi\":80,\"port_lo\":80,\"proto\":\"tcp\","
	    "\"timeout_ms\":300000}]," TYPICAL_TAIL
	    "\"policy\":{\"id\":\"dnsbench\",\"rule\":\"egress.allow[0]\","
	    "\"sha256\":\"%s\"},\"q\":{\"class\":\"IN\","
	    "\"name\":\"n1.wild.example.com\",\"type\":\"A\"},"
	    "\"rcode\":\"NOERROR\",\"reason\":\"allowed\",\"removed\":[],"
	    "\"resolver\":\"192.0.2.53#53\",\"sandbox\":{\"id\":\"sbx-a\"},"
	    "\"transport\":\"udp\"}", pol_policy_digest(p));
	assert_canon(&ev, p, want);
	/* Built again from the shared parts: the same bytes. */
	assert_canon(&ev, p, want);
	pol_policy_free(p);
}
END_TEST

/* Kept and removed answers, several elements, the keep flag on exactly
 * the elements that carry FW_ELEM_KEEP, IPv6, UDP and a port range. */
START_TEST(dns_record_answers_elements_keep)
{
	struct dns_event ev;

	typical(&ev, "sbx-b", "mix.example.com");
	ev.qtype = 28;
	ev.tcp = true;
	ev.naddrs = 3;
	ev.nkept = 2;
	ev.nremoved = 1;
	ev.addrs[1].family = AF_INET6;
	ck_assert_int_eq(inet_pton(AF_INET6, "2001:db8::1", ev.addrs[1].addr),
	    1);
	ev.addrs[1].ttl = 60;
	snprintf(ev.addrs[1].cls, sizeof(ev.addrs[1].cls), "documentation");
	ev.addrs[1].kept = true;
	ev.addrs[2].family = AF_INET;
	v4(ev.addrs[2].addr, "10.0.100.9");
	ev.addrs[2].ttl = 5;
	snprintf(ev.addrs[2].cls, sizeof(ev.addrs[2].cls), "private");
	ev.addrs[2].kept = false;
	ev.nelems = 3;
	ev.elems[0].flags = FW_ELEM_KEEP;
	ev.elems[1] = ev.elems[0];
	ev.elems[1].family = AF_INET6;
	memcpy(ev.elems[1].addr, ev.addrs[1].addr, 16);
	ev.elems[1].proto = IPPROTO_UDP;
	ev.elems[1].port_lo = 1000;
	ev.elems[1].port_hi = 2000;
	ev.elems[1].flags = 0;
	ev.elems[2] = ev.elems[0];
	v4(ev.elems[2].addr, "255.255.255.255");
	ev.elems[2].proto = 132;
	ev.elems[2].flags = FW_ELEM_KEEP | 0x80;
	ev.upstream[0] = '\0';
	ev.rule[0] = '\0';
	assert_canon(&ev, NULL,
	    "{\"answers\":[{\"class\":\"public\",\"ip\":\"192.0.2.10\","
	    "\"ttl\":300},{\"class\":\"documentation\",\"ip\":\"2001:db8::1\","
	    "\"ttl\":60}],\"client\":\"10.231.0.2#40123\","
	    "\"decision\":\"allow\",\"elements\":[{\"ip\":\"192.0.2.10\","
	    "\"keep\":true,\"port_hi\":80,\"port_lo\":80,\"proto\":\"tcp\","
	    "\"timeout_ms\":300000},{\"ip\":\"2001:db8::1\",\"port_hi\":2000,"
	    "\"port_lo\":1000,\"proto\":\"udp\",\"timeout_ms\":300000},"
	    "{\"ip\":\"255.255.255.255\",\"keep\":true,\"port_hi\":80,"
	    "\"port_lo\":80,\"proto\":\"132\",\"timeout_ms\":300000}],"
	    "\"latency_us\":812,\"naddrs\":3,\"nelems\":3,\"nkept\":2,"
	    "\"nremoved\":1,\"outcome\":\"allow\",\"q\":{\"class\":\"IN\","
	    "\"name\":\"mix.example.com\",\"type\":\"AAAA\"},"
	    "\"rcode\":\"NOERROR\",\"reason\":\"allowed\",\"removed\":"
	    "[{\"class\":\"private\",\"ip\":\"10.0.100.9\",\"ttl\":5}],"
	    "\"sandbox\":{\"id\":\"sbx-b\"},\"transport\":\"tcp\"}");
}
END_TEST

/* Records of different sandboxes, rules and policies interleaved: the
 * shared {id} and {id, sha256, rule} must follow each record, including a
 * reloaded policy that kept its name but changed its digest. */
START_TEST(dns_record_sharing_follows_each_record)
{
	struct pol_policy *p1 = load_policy(pol_text);
	struct pol_policy *p2 = load_policy(pol_text2);
	struct dns_event a, b;
	json_t *fa, *fb, *fa2;
	int i;

	ck_assert_str_ne(pol_policy_digest(p1), pol_policy_digest(p2));
	typical(&a, "sbx-a", "a.example.com");
	typical(&b, "sbx-b", "b.example.com");
	snprintf(b.rule, sizeof(b.rule), "egress.allow[1]");
	for (i = 0; i < 3; i++) {
		fa = dns_rec_fields(&a, p1);
		fb = dns_rec_fields(&b, p2);
		fa2 = dns_rec_fields(&a, p1);
		ck_assert_ptr_nonnull(fa);
		ck_assert_ptr_nonnull(fb);
		ck_assert_ptr_nonnull(fa2);
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_object_get(fa, "sandbox"), "id")), "sbx-a");
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_object_get(fb, "sandbox"), "id")), "sbx-b");
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_object_get(fa, "policy"), "sha256")),
		    pol_policy_digest(p1));
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_object_get(fb, "policy"), "sha256")),
		    pol_policy_digest(p2));
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_object_get(fb, "policy"), "rule")), "egress.allow[1]");
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_object_get(fa2, "policy"), "rule")), "egress.allow[0]");
		ck_assert(json_equal(fa, fa2));
		json_decref(fa);
		json_decref(fb);
		json_decref(fa2);
	}
	pol_policy_free(p1);
	/* A policy freed after its records were built: the next record of
	 * another policy must not read the old one. */
	fb = dns_rec_fields(&b, p2);
	ck_assert_str_eq(json_string_value(json_object_get(
	    json_object_get(fb, "policy"), "id")), "dnsbench");
	json_decref(fb);
	pol_policy_free(p2);
}
END_TEST

/* The decision words of every outcome: only allow and synthetic are
 * "allow"; everything else, including a value outside the enum, is
 * "deny" (fail closed). */
static const struct {
	int		 dec;
	const char	*decision, *outcome;
} outcomes[] = {
	{ DNS_DEC_ALLOW, "allow", "allow" },
	{ DNS_DEC_DENY, "deny", "deny" },
	{ DNS_DEC_NODATA, "deny", "nodata" },
	{ DNS_DEC_SYNTHETIC, "allow", "synthetic" },
	{ DNS_DEC_REFUSED, "deny", "refused" },
	{ DNS_DEC_ERROR, "deny", "error" },
	{ DNS_DEC_MALFORMED, "deny", "malformed" },
	{ 77, "deny", "unknown" },
};

/* Over-rate queries the proxy dropped travel on the sandbox's next record
 * as "suppressed", in both forms (the tree and the in-place bytes), and
 * only when there were some: other records keep their layout. */
START_TEST(dns_record_suppressed)
{
	struct dns_event ev;
	json_t *f;
	char *s;

	typical(&ev, "sbx-a", "o.example.com");
	s = canon_of(&ev, NULL);
	ck_assert_ptr_null(strstr(s, "suppressed"));
	free(s);
	ev.suppressed = 4242;
	s = canon_of(&ev, NULL);
	ck_assert_ptr_nonnull(strstr(s, "\"suppressed\":4242,"));
	free(s);
	f = dns_rec_fields(&ev, NULL);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(json_integer_value(json_object_get(f, "suppressed")),
	    4242);
	json_decref(f);
}
END_TEST

START_TEST(dns_record_outcomes)
{
	struct dns_event ev;
	json_t *f;

	typical(&ev, "sbx-a", "o.example.com");
	ev.decision = (enum dns_decision)outcomes[_i].dec;
	f = dns_rec_fields(&ev, NULL);
	free(canon_of(&ev, NULL));	/* and dns_rec_canon agrees */
	ck_assert_ptr_nonnull(f);
	ck_assert_str_eq(json_string_value(json_object_get(f, "decision")),
	    outcomes[_i].decision);
	ck_assert_str_eq(json_string_value(json_object_get(f, "outcome")),
	    outcomes[_i].outcome);
	json_decref(f);
}
END_TEST

/* Unknown source: no sandbox object at all (the index and OCSF want a
 * real id or none), the rule at top level without a policy. */
START_TEST(dns_record_unknown_source)
{
	struct dns_event ev;
	json_t *f;

	typical(&ev, "", "x.example.com");
	ev.decision = DNS_DEC_REFUSED;
	ev.rcode = 5;
	ev.naddrs = ev.nkept = ev.nelems = 0;
	f = dns_rec_fields(&ev, NULL);
	free(canon_of(&ev, NULL));	/* and dns_rec_canon agrees */
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_null(json_object_get(f, "sandbox"));
	ck_assert_ptr_null(json_object_get(f, "policy"));
	ck_assert_str_eq(json_string_value(json_object_get(f, "rule")),
	    "egress.allow[0]");
	ck_assert_str_eq(json_string_value(json_object_get(f, "rcode")),
	    "REFUSED");
	ck_assert_uint_eq(json_array_size(json_object_get(f, "answers")), 0);
	ck_assert_uint_eq(json_array_size(json_object_get(f, "elements")), 0);
	json_decref(f);
}
END_TEST

static struct pol_config *
config_text(const char *dns_extra)
{
	char dir[] = "/tmp/check_record.XXXXXX", path[128], text[512];
	struct pol_errors *e = pol_errors_new(10);
	struct pol_config *c;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sluice.yaml", dir);
	snprintf(text, sizeof(text), "version: 1\ndns:\n  upstreams: "
	    "[\"192.0.2.53:5353\", 198.51.100.53]\n%s", dns_extra);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
	c = pol_config_load(path, e);
	ck_assert_msg(c != NULL, "%s", pol_errors_get(e, 0));
	unlink(path);
	rmdir(dir);
	pol_errors_free(e);
	return c;
}

/* dns.cache_entries reaches the proxy: 0 turns the cache off (no_cache;
 * cache_max 0 would mean "the default" to the proxy), any other value is the
 * entry bound, and the default is 16384. */
static const struct {
	const char	*extra;
	bool		 no_cache;
	uint32_t	 cache_max;
} cachecfg[] = {
	{ "", false, 16384 },
	{ "  cache_entries: 0\n", true, 0 },
	{ "  cache_entries: 1\n", false, 1 },
	{ "  cache_entries: 1000000\n", false, 1000000 },
};

START_TEST(dns_config_cache_entries)
{
	struct pol_config *c = config_text(cachecfg[_i].extra);
	struct dns_config dc;
	char err[256];

	ck_assert_int_eq(dnsw_config(c, 5353, &dc, err, sizeof(err)), 0);
	ck_assert(dc.no_cache == cachecfg[_i].no_cache);
	ck_assert_uint_eq(dc.cache_max, cachecfg[_i].cache_max);
	/* The rest of the mapping still holds. */
	ck_assert_uint_eq(dc.nupstreams, 2);
	ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&dc.upstreams[0])->
	    sin_port), 5353);
	ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&dc.upstreams[1])->
	    sin_port), 53);
	ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&dc.listen)->sin_port),
	    5353);
	ck_assert_uint_eq(dc.timeout_ms, 2000);
	pol_config_free(c);
}
END_TEST

/* --------------------------------------------------------------- Limits */

/* Bytes that are not UTF-8 in the name (a hostile resolver or client) and
 * in the reason: the record is still written, those bytes as '?'. */
START_TEST(dns_record_not_utf8)
{
	struct dns_event ev;
	json_t *f;
	char *s;

	typical(&ev, "sbx-a", "x");
	snprintf(ev.qname, sizeof(ev.qname), "%s", "a\xff\xfe.b\x80.example.com");
	snprintf(ev.client, sizeof(ev.client), "%s", "10.0.0.1#\xc3");
	f = dns_rec_fields(&ev, NULL);
	free(canon_of(&ev, NULL));	/* and dns_rec_canon agrees */
	ck_assert_ptr_nonnull(f);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(f,
	    "q"), "name")), "a??.b?.example.com");
	ck_assert_str_eq(json_string_value(json_object_get(f, "client")),
	    "10.0.0.1#?");
	ck_assert_ptr_nonnull(s = aud_canon_dump(f, NULL, NULL, 0));
	free(s);
	json_decref(f);
}
END_TEST

/* Counts past the stored arrays (and absurd ones): the arrays hold what was
 * stored, the counts say how many there were, clamped to the integers the
 * canonical form allows; so is the latency. Unknown type, rcode and
 * protocol keep a readable word. */
START_TEST(dns_record_counts_and_codes)
{
	struct dns_event ev;
	json_t *f;
	size_t i;
	char *s;

	typical(&ev, "sbx-a", "many.example.com");
	for (i = 0; i < DNS_EV_MAX_ADDRS; i++)
		ev.addrs[i] = ev.addrs[0];
	for (i = 0; i < DNS_EV_MAX_ELEMS; i++)
		ev.elems[i] = ev.elems[0];
	ev.naddrs = SIZE_MAX;
	ev.nkept = 1000;
	ev.nremoved = 65;
	ev.nelems = DNS_EV_MAX_ELEMS + 1;
	ev.latency_us = UINT64_MAX;
	ev.qtype = 65280;
	ev.rcode = 200;
	f = dns_rec_fields(&ev, NULL);
	free(canon_of(&ev, NULL));	/* and dns_rec_canon agrees */
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(json_array_size(json_object_get(f, "answers")),
	    DNS_EV_MAX_ADDRS);
	ck_assert_uint_eq(json_array_size(json_object_get(f, "elements")),
	    DNS_EV_MAX_ELEMS);
	ck_assert(json_integer_value(json_object_get(f, "naddrs")) ==
	    AUD_INT_MAX);
	ck_assert_int_eq(json_integer_value(json_object_get(f, "nkept")), 1000);
	ck_assert_int_eq(json_integer_value(json_object_get(f, "nremoved")),
	    65);
	ck_assert_int_eq(json_integer_value(json_object_get(f, "nelems")),
	    DNS_EV_MAX_ELEMS + 1);
	ck_assert(json_integer_value(json_object_get(f, "latency_us")) ==
	    AUD_INT_MAX);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(f,
	    "q"), "type")), "TYPE65280");
	ck_assert_str_eq(json_string_value(json_object_get(f, "rcode")),
	    "other");
	ck_assert_ptr_nonnull(s = aud_canon_dump(f, NULL, NULL, 0));
	free(s);
	json_decref(f);
}
END_TEST

/* Every IPv4 digit shape through the fast formatter, against inet_ntop. */
START_TEST(dns_record_ipv4_format)
{
	static const uint8_t octets[] = { 0, 1, 9, 10, 99, 100, 199, 200,
	    255 };
	struct dns_event ev;
	char want[INET_ADDRSTRLEN];
	size_t i;
	json_t *f;

	typical(&ev, "sbx-a", "v4.example.com");
	for (i = 0; i < sizeof(octets); i++) {
		uint8_t a[4] = { octets[i], octets[(i + 3) % sizeof(octets)],
		    octets[(i + 5) % sizeof(octets)], octets[i] };

		memcpy(ev.addrs[0].addr, a, 4);
		memcpy(ev.elems[0].addr, a, 4);
		ck_assert_ptr_nonnull(inet_ntop(AF_INET, a, want,
		    sizeof(want)));
		f = dns_rec_fields(&ev, NULL);
		free(canon_of(&ev, NULL));	/* and dns_rec_canon agrees */
		ck_assert_ptr_nonnull(f);
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_array_get(json_object_get(f, "answers"), 0), "ip")),
		    want);
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_array_get(json_object_get(f, "elements"), 0), "ip")),
		    want);
		json_decref(f);
	}
}
END_TEST

/* An answer class longer than any known one (not NUL-terminated in its
 * field) is written whole, once, and does not disturb the shared ones. */
START_TEST(dns_record_odd_class)
{
	struct dns_event ev;
	json_t *f;
	int i;

	typical(&ev, "sbx-a", "c.example.com");
	for (i = 0; i < 3; i++) {
		memset(ev.addrs[0].cls, 'z', sizeof(ev.addrs[0].cls));
		f = dns_rec_fields(&ev, NULL);
		free(canon_of(&ev, NULL));	/* and dns_rec_canon agrees */
		ck_assert_ptr_nonnull(f);
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_array_get(json_object_get(f, "answers"), 0),
		    "class")), "zzzzzzzzzzzzzzzz");
		json_decref(f);
		snprintf(ev.addrs[0].cls, sizeof(ev.addrs[0].cls), "public");
		f = dns_rec_fields(&ev, NULL);
		free(canon_of(&ev, NULL));	/* and dns_rec_canon agrees */
		ck_assert_str_eq(json_string_value(json_object_get(
		    json_array_get(json_object_get(f, "answers"), 0),
		    "class")), "public");
		json_decref(f);
	}
}
END_TEST

/* dns_rec_canon against the tree for what the other tests do not reach:
 * IPv6 answers and elements, keep-listed elements, TCP, control
 * characters, quotes and backslashes that need escapes, a finding, and a
 * policy whose rule needs escaping. canon_of asserts the bytes agree. */
START_TEST(dns_record_canon_escapes)
{
	struct pol_policy *p = load_policy(pol_text);
	struct dns_event ev;

	typical(&ev, "sbx-6", "six.example.com");
	ev.addrs[1] = ev.addrs[0];
	ev.addrs[1].family = AF_INET6;
	ck_assert_int_eq(inet_pton(AF_INET6, "2001:db8::1", ev.addrs[1].addr),
	    1);
	ev.addrs[1].kept = false;
	snprintf(ev.addrs[1].cls, sizeof(ev.addrs[1].cls), "private");
	ev.naddrs = 2;
	ev.nremoved = 1;
	ev.elems[1] = ev.elems[0];
	ev.elems[1].family = AF_INET6;
	memcpy(ev.elems[1].addr, ev.addrs[1].addr, 16);
	ev.elems[1].flags |= FW_ELEM_KEEP;
	ev.elems[1].proto = IPPROTO_UDP;
	ev.elems[1].port_hi = 65535;
	ev.nelems = 2;
	ev.tcp = true;
	ev.finding = true;
	ev.qtype = LDNS_RR_TYPE_HTTPS;
	/* The reason is a code, its name from the table: the hostile bytes
	 * go into the name asked about. */
	ev.reason = POL_REASON_REBINDING;
	snprintf(ev.qname, sizeof(ev.qname), "tab\there \"q\" back\\slash\x01");
	snprintf(ev.rule, sizeof(ev.rule), "egress.allow[\"0\"]");
	free(canon_of(&ev, p));
	free(canon_of(&ev, NULL));
	ev.elems[0].proto = 47;		/* a number, not a name */
	ev.qtype = LDNS_RR_TYPE_AAAA;
	ev.upstream[0] = '\0';
	free(canon_of(&ev, NULL));
	pol_policy_free(p);
}
END_TEST

/* Without a recorder a record is refused (EPIPE) and freed; ASan's leak
 * check would see it otherwise. NULL (a converter out of memory) is
 * refused too, never dereferenced. */
START_TEST(rec_async_without_recorder)
{
	struct dns_event ev;

	typical(&ev, "sbx-a", "n.example.com");
	errno = 0;
	ck_assert_int_eq(rec_async(NULL, "dns.decision",
	    dns_rec_fields(&ev, NULL)), -1);
	ck_assert_int_eq(errno, EPIPE);
	errno = 0;
	ck_assert_int_eq(rec_async(NULL, "dns.decision", NULL), -1);
	ck_assert_int_eq(errno, EPIPE);
	/* What needs no log is harmless without one. */
	rec_metrics_print(NULL, stderr);
	rec_commit_after(NULL, "sandbox.delete", json_object());
}
END_TEST

/* A recorder on a temp dir (*dir: its path, for rm -rf). */
static struct rec *
open_rec(char *dir, struct pol_config **cfgp, struct ev_loop **loopp,
    struct pol_errors **errsp)
{
	char path[128], yaml[512], err[256];
	struct rec *r;
	FILE *fp;

	*errsp = pol_errors_new(8);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sluice.yaml", dir);
	snprintf(yaml, sizeof(yaml), "version: 1\nstate_dir: %s\n"
	    "run_dir: %s\npolicy_dir: %s\ndns:\n  upstreams: [192.0.2.53]\n"
	    "audit:\n  reserve_kib: 256\n", dir, dir, dir);
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	fputs(yaml, fp);
	ck_assert_int_eq(fclose(fp), 0);
	*cfgp = pol_config_load(path, *errsp);
	ck_assert_msg(*cfgp != NULL, "config: %s", pol_errors_get(*errsp, 0));
	ck_assert_ptr_nonnull(*loopp = ev_new());
	r = rec_open(*cfgp, *loopp, err, sizeof(err));
	ck_assert_msg(r != NULL, "rec_open: %s", err);
	return r;
}

/* Frees what open_rec made, its directory included. */
static void
open_rec_done(const char *dir, struct pol_config *cfg, struct ev_loop *loop,
    struct pol_errors *errs)
{
	char cmd[160];

	ev_free(loop);
	pol_config_free(cfg);
	pol_errors_free(errs);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Records of the log at dbpath whose canon holds every needle (NULL
 * ended); *sum: the sum of their "count" members. */
static int
records_with(const char *dbpath, const char *const *needles, long long *sum)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int n = 0, i, all;

	*sum = 0;
	ck_assert_int_eq(sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT canon FROM records",
	    -1, &st, NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *c = (const char *)sqlite3_column_text(st, 0), *k;

		for (all = 1, i = 0; needles[i] != NULL; i++)
			all &= strstr(c, needles[i]) != NULL;
		if (!all)
			continue;
		n++;
		if ((k = strstr(c, "\"count\":")) != NULL)
			*sum += atoll(k + 8);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

/* A converter that ran out of memory hands rec_async NULL: the record is
 * lost, so the log must say so (a log.gap out_of_memory), never be
 * silent about it. */
START_TEST(rec_async_null_is_a_gap)
{
	static const char *const gap[] = { "\"kind\":\"log.gap\"",
	    "\"out_of_memory\"", "\"lost\":1", NULL };
	struct pol_errors *errs;
	struct pol_config *cfg;
	struct ev_loop *loop;
	struct rec *r;
	char dir[] = "/tmp/check_record.XXXXXX", dbpath[160];
	long long sum;

	r = open_rec(dir, &cfg, &loop, &errs);
	snprintf(dbpath, sizeof(dbpath), "%s", rec_db_path(r));
	errno = 0;
	ck_assert_int_eq(rec_async(r, "dns.decision", NULL), -1);
	ck_assert_int_eq(errno, ENOMEM);
	rec_close(r);
	ck_assert_int_eq(records_with(dbpath, gap, &sum), 1);
	open_rec_done(dir, cfg, loop, errs);
}
END_TEST

/*
 * Events anyone can cause at packet rate are summarised per source: DNS
 * from 100 addresses that are no sandbox (budget 0) give one summary per
 * address for the first 64 and one shared summary for the rest, with every
 * event counted; a bridge 401 source gets its first event itemised and the
 * rest in one summary. Without a recorder every event is the caller's.
 */
START_TEST(tally_summarises_per_source)
{
	static const char *const dns_sum[] = { "\"kind\":\"dns.decision\"",
	    "\"summary\":true", "\"unknown_source\"", NULL };
	static const char *const dns_other[] = { "\"kind\":\"dns.decision\"",
	    "\"other_sources\":true", NULL };
	static const char *const mcp_sum[] = { "\"kind\":\"finding\"",
	    "\"summary\":true", "\"mcp.auth_failed\"",
	    "\"client\":\"192.0.2.7\"", NULL };
	struct pol_errors *errs;
	struct pol_config *cfg;
	struct ev_loop *loop;
	struct rec *r;
	char dir[] = "/tmp/check_record.XXXXXX", src[32], dbpath[160];
	long long sum;
	int i, own = 0;

	ck_assert_int_eq(rec_tally(NULL, REC_TALLY_DNS_UNKNOWN, "192.0.2.1",
	    NULL), 1);
	r = open_rec(dir, &cfg, &loop, &errs);
	snprintf(dbpath, sizeof(dbpath), "%s", rec_db_path(r));
	for (i = 0; i < 1000; i++) {
		snprintf(src, sizeof(src), "198.51.100.%d", i % 100);
		own += rec_tally(r, REC_TALLY_DNS_UNKNOWN, src, NULL);
	}
	ck_assert_int_eq(own, 0);
	for (i = 0; i < 10; i++)
		own += rec_tally(r, REC_TALLY_MCP_AUTH, "192.0.2.7", NULL);
	ck_assert_int_eq(own, 1);
	rec_close(r);		/* writes what is counted */
	ck_assert_int_eq(records_with(dbpath, dns_sum, &sum), 65);
	ck_assert_int_eq(sum, 1000);
	ck_assert_int_eq(records_with(dbpath, dns_other, &sum), 1);
	ck_assert_int_eq(sum, 36 * 10);
	ck_assert_int_eq(records_with(dbpath, mcp_sum, &sum), 1);
	ck_assert_int_eq(sum, 9);
	open_rec_done(dir, cfg, loop, errs);
}
END_TEST

/*
 * The record of an action done while the log is suspended is held, and
 * written once it is reopened; a suspended recorder refuses the rest as
 * if there were none; the recorder keeps its reserve beside the database.
 */
START_TEST(commit_after_is_held_until_a_log_takes_it)
{
	static const char *const del[] = { "\"kind\":\"sandbox.delete\"",
	    "\"id\":\"sbx-held\"", "\"result\":\"done\"", NULL };
	struct pol_errors *errs;
	struct pol_config *cfg;
	struct ev_loop *loop;
	struct rec *r;
	struct stat sb;
	char dir[] = "/tmp/check_record.XXXXXX", dbpath[160], res[200],
	    err[256];
	long long sum;

	r = open_rec(dir, &cfg, &loop, &errs);
	snprintf(dbpath, sizeof(dbpath), "%s", rec_db_path(r));
	snprintf(res, sizeof(res), "%s.reserve", dbpath);
	ck_assert_int_eq(stat(res, &sb), 0);
	ck_assert_int_gt(sb.st_size, 0);
	rec_suspend(r);
	rec_suspend(r);		/* a no-op */
	rec_commit_after(r, "sandbox.delete", json_pack("{s:{s:s},s:s,s:s}",
	    "sandbox", "id", "sbx-held", "decision", "log", "result",
	    "done"));
	errno = 0;
	ck_assert_int_eq(rec_async(r, "finding", json_object()), -1);
	ck_assert_int_eq(errno, EPIPE);
	ck_assert_int_eq(rec_tally(r, REC_TALLY_DNS_UNKNOWN, "192.0.2.9",
	    NULL), 1);
	ck_assert_int_eq(records_with(dbpath, del, &sum), 0);
	ck_assert_msg(rec_reopen(r, err, sizeof(err)) == 0, "rec_reopen: %s",
	    err);
	errno = 0;
	ck_assert_int_eq(rec_reopen(r, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EBUSY);
	rec_close(r);
	ck_assert_int_eq(records_with(dbpath, del, &sum), 1);
	open_rec_done(dir, cfg, loop, errs);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("record");
	TCase *core = tcase_create("Core");
	TCase *lim = tcase_create("Limits");
	SRunner *sr;
	int nfail;

	tcase_add_test(core, dns_record_layout);
	tcase_add_test(core, dns_record_answers_elements_keep);
	tcase_add_test(core, dns_record_sharing_follows_each_record);
	tcase_add_loop_test(core, dns_record_outcomes, 0,
	    sizeof(outcomes) / sizeof(outcomes[0]));
	tcase_add_test(core, dns_record_unknown_source);
	tcase_add_test(core, dns_record_suppressed);
	tcase_add_loop_test(core, dns_config_cache_entries, 0,
	    sizeof(cachecfg) / sizeof(cachecfg[0]));
	tcase_add_test(lim, dns_record_not_utf8);
	tcase_add_test(lim, dns_record_counts_and_codes);
	tcase_add_test(lim, dns_record_ipv4_format);
	tcase_add_test(lim, dns_record_odd_class);
	tcase_add_test(lim, dns_record_canon_escapes);
	tcase_add_test(lim, rec_async_without_recorder);
	tcase_add_test(lim, rec_async_null_is_a_gap);
	tcase_add_test(lim, tally_summarises_per_source);
	tcase_add_test(lim, commit_after_is_held_until_a_log_takes_it);
	suite_add_tcase(s, core);
	suite_add_tcase(s, lim);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nfail = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nfail == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
