/*
 * wire: the DNS messages the proxy reads from and writes to a sandbox. It
 * is apart from the socket code so that what every byte a sandbox sends
 * first meets, the strict query parser (dns_parse_query, also the fuzz
 * target's), and the pieces every local answer is built from are pure: no
 * I/O, no proxy state, nothing that outlives the call.
 *
 * Answers are written by hand (header, the client's question bytes, RRs
 * serialised uncompressed by ldns) so that every denied name gets the same
 * bytes apart from id and question: there is no existence oracle.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <ldns/ldns.h>

#include "gateway/dns/dns_int.h"

#define DNS_OPT_LEN		11	/* our OPT record (dns_put_opt) */

/* Presentation form of a wire name: lower case, no trailing dot. Bytes that
 * cannot appear in a host name become '?' and flag the name, so the policy
 * never sees an escape sequence it could mis-match. */
static void
wire_to_name(const uint8_t *w, size_t wl, char *out, size_t outlen, bool *bad)
{
	size_t i = 0, o = 0;

	*bad = false;
	while (i < wl && w[i] != 0) {
		size_t ll = w[i++], k;

		if (o != 0 && o + 1 < outlen)
			out[o++] = '.';
		for (k = 0; k < ll && i < wl; k++, i++) {
			uint8_t ch = w[i];

			if (ch >= 'A' && ch <= 'Z')
				ch = ch - 'A' + 'a';
			if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' &&
			    ch <= '9') || ch == '-' || ch == '_')) {
				ch = '?';
				*bad = true;
			}
			if (o + 1 < outlen)
				out[o++] = (char)ch;
		}
	}
	out[o] = '\0';
}

enum dns_parse_result
dns_parse_query(const uint8_t *buf, size_t len, struct dns_query *q)
{
	ldns_pkt *pkt = NULL;
	ldns_rr_list *ql;
	ldns_rr *rr;
	ldns_rdf *owner;
	uint16_t flags;
	enum dns_parse_result res = DNS_PARSE_FORMERR;

	memset(q, 0, sizeof(*q));
	if (buf == NULL || len < DNS_HDR)
		return DNS_PARSE_DROP;
	q->id = (uint16_t)(buf[0] << 8 | buf[1]);
	flags = (uint16_t)(buf[2] << 8 | buf[3]);
	q->rd = (flags & 0x0100) != 0;
	/* A response sent to us is never answered: answering would let two
	 * resolvers bounce packets between each other forever. */
	if (flags & 0x8000)
		return DNS_PARSE_DROP;
	if (((flags >> 11) & 0xf) != 0)
		return DNS_PARSE_NOTIMP;
	if (len > DNS_MAX_QUERY)
		return DNS_PARSE_FORMERR;
	if ((buf[4] << 8 | buf[5]) != 1 || (buf[6] | buf[7]) != 0 ||
	    (buf[8] | buf[9]) != 0 || (buf[10] << 8 | buf[11]) > 1)
		return DNS_PARSE_FORMERR;
	if (ldns_wire2pkt(&pkt, buf, len) != LDNS_STATUS_OK || pkt == NULL)
		return DNS_PARSE_FORMERR;
	/* The only additional record a query may carry is OPT, which ldns
	 * moves into the packet's EDNS fields. */
	if (ldns_rr_list_rr_count(ldns_pkt_additional(pkt)) != 0 ||
	    ldns_pkt_tsig(pkt) != NULL)
		goto out;
	ql = ldns_pkt_question(pkt);
	if (ql == NULL || ldns_rr_list_rr_count(ql) != 1)
		goto out;
	rr = ldns_rr_list_rr(ql, 0);
	owner = ldns_rr_owner(rr);
	if (owner == NULL || ldns_rdf_size(owner) == 0 ||
	    ldns_rdf_size(owner) > sizeof(q->qwire))
		goto out;
	q->qwire_len = ldns_rdf_size(owner);
	memcpy(q->qwire, ldns_rdf_data(owner), q->qwire_len);
	wire_to_name(q->qwire, q->qwire_len, q->qname, sizeof(q->qname),
	    &q->bad_name);
	q->qtype = (uint16_t)ldns_rr_get_type(rr);
	q->qclass = (uint16_t)ldns_rr_get_class(rr);
	q->edns = ldns_pkt_edns(pkt);
	q->edns_size = ldns_pkt_edns_udp_size(pkt);
	res = DNS_PARSE_OK;
out:
	ldns_pkt_free(pkt);
	return res;
}

/*
 * Makes room for n more bytes at b's position. ldns_buffer_write_* never
 * grow a buffer (they only assert that there is room, and write past the
 * end when asserts are compiled out), while ldns_rr2buffer_wire grows it
 * just enough for each record, so an answer can end anywhere up to its
 * capacity: every ldns_buffer_write_* here comes after this. false when
 * an earlier write failed or the memory cannot be had; b's status then
 * says so (ldns_buffer_reserve sets it), and every sender checks the
 * status before anything leaves.
 */
bool
dns_buf_room(ldns_buffer *b, size_t n)
{
	return ldns_buffer_status_ok(b) && ldns_buffer_reserve(b, n);
}

/* Header + the client's question (+ OPT when the client used EDNS). Every
 * locally generated answer starts here. On failure writes nothing and
 * leaves b's status an error (dns_buf_room). */
void
dns_put_head(ldns_buffer *b, const struct dns_query *q, bool has_q,
    uint8_t rcode, bool tc, uint16_t ancount)
{
	uint16_t flags = 0x8000 | 0x0080 | (q->rd ? 0x0100 : 0) |
	    (tc ? 0x0200 : 0) | (rcode & 0xf);

	if (!dns_buf_room(b, DNS_HDR + (has_q ? q->qwire_len + 4 : 0)))
		return;
	ldns_buffer_write_u16(b, q->id);
	ldns_buffer_write_u16(b, flags);
	ldns_buffer_write_u16(b, has_q ? 1 : 0);
	ldns_buffer_write_u16(b, ancount);
	ldns_buffer_write_u16(b, 0);
	ldns_buffer_write_u16(b, has_q && q->edns ? 1 : 0);
	if (has_q) {
		ldns_buffer_write(b, q->qwire, q->qwire_len);
		ldns_buffer_write_u16(b, q->qtype);
		ldns_buffer_write_u16(b, q->qclass);
	}
}

/* Our OPT record advertising size. On failure writes nothing and leaves
 * b's status an error (dns_buf_room). */
void
dns_put_opt(ldns_buffer *b, uint16_t size)
{
	if (!dns_buf_room(b, DNS_OPT_LEN))
		return;
	ldns_buffer_write_u8(b, 0);		/* root owner */
	ldns_buffer_write_u16(b, LDNS_RR_TYPE_OPT);
	ldns_buffer_write_u16(b, size);
	ldns_buffer_write_u32(b, 0);
	ldns_buffer_write_u16(b, 0);
}
