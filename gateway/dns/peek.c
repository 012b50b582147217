/*
 * peek.c: the server_name of a TLS ClientHello and the Host of an HTTP/1.x
 * request, for the name gate (see peek.h).
 *
 * Why a parser of its own rather than a TLS library's: the gate must read
 * a hostile client's first bytes without being a TLS endpoint, bounded
 * and without allocating, and refuse what a server might read another
 * way. Every length is checked against what encloses it before it is
 * used; nothing here reads past len.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gateway/dns/cur.h"
#include "gateway/dns/peek.h"

#define TLS_HANDSHAKE	22
#define TLS_CLIENT_HELLO 1
#define TLS_RECORD_MAX	(16384u + 256u)	/* plaintext bound, some slack */
#define EXT_SNI		0x0000u
#define EXT_ECH		0xfe0du		/* encrypted_client_hello */
#define EXT_ESNI	0xffceu		/* its predecessor */

static enum peek_result
bad(struct peek_out *o, enum peek_result r, const char *why)
{
	o->why = why;
	return r;
}

/* A DNS host name as a server would take it: letters, digits, '-', '_',
 * labels of 1..63, at most 253 in all; copied in lower case. One trailing
 * dot is dropped when trail_ok. */
static bool
name_copy(struct peek_out *o, const uint8_t *s, size_t n, bool trail_ok)
{
	size_t	i, label = 0;

	if (trail_ok && n > 1 && s[n - 1] == '.')
		n--;
	if (n == 0 || n > 253)
		return false;
	for (i = 0; i < n; i++) {
		uint8_t c = s[i];

		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_') {
			label++;
		} else if (c >= 'A' && c <= 'Z') {
			c = (uint8_t)(c - 'A' + 'a');
			label++;
		} else
			return false;
		if (label > 63)
			return false;
		o->name[i] = (char)c;
	}
	if (label == 0)
		return false;
	o->name[n] = '\0';
	return true;
}

/* --------------------------------------------------------------- TLS */

/* The server_name extension's body: exactly one host_name entry. */
static enum peek_result
sni(struct cur e, struct peek_out *o)
{
	unsigned	 list, type, nlen;
	const uint8_t	*name;

	if (!cur_u16(&e, &list) || list != e.n || list == 0)
		return bad(o, PEEK_MALFORMED, "server_name list length");
	if (!cur_u8(&e, &type) || type != 0 || !cur_u16(&e, &nlen) ||
	    !cur_take(&e, nlen, &name))
		return bad(o, PEEK_MALFORMED, "server_name entry");
	if (e.n != 0)
		return bad(o, PEEK_MALFORMED, "more than one server_name");
	if (!name_copy(o, name, nlen, false))
		return bad(o, PEEK_MALFORMED, "server_name not a host name");
	return PEEK_NAME;
}

/* An encrypted_client_hello extension's body: of type outer (0), it is
 * cipher_suite(kdf 2, aead 2), config_id(1), enc<0..2^16-1> and
 * payload<1..2^16-1>, and nothing after. Anything else leaves ech_outer
 * false (the gate refuses it as a real ECH). */
static void
ech_outer(struct cur c, struct peek_out *o)
{
	unsigned type, kdf, aead, id, n;

	if (!cur_u8(&c, &type) || type != 0 || !cur_u16(&c, &kdf) ||
	    !cur_u16(&c, &aead) || !cur_u8(&c, &id) || !cur_u16(&c, &n) ||
	    !cur_take(&c, n, NULL) || !cur_u16(&c, &n) || n == 0 ||
	    !cur_take(&c, n, NULL) || c.n != 0)
		return;
	o->ech_outer = true;
	o->ech_config_id = (uint8_t)id;
	o->ech_kdf = (uint16_t)kdf;
	o->ech_aead = (uint16_t)aead;
}

/* The ClientHello body (after its 4-byte handshake header), whole. */
static enum peek_result
client_hello(struct cur c, struct peek_out *o)
{
	static uint8_t	 seen[65536 / 8];
	const uint8_t	*ep;
	unsigned	 k, elen, type, len;
	bool		 have_name = false, ech = false, old_ech = false;
	enum peek_result r;
	struct cur	 ext;

	if (!cur_take(&c, 2 + 32, NULL) || !cur_u8(&c, &k) || k > 32 ||
	    !cur_take(&c, k, NULL))
		return bad(o, PEEK_MALFORMED, "ClientHello header");
	if (!cur_u16(&c, &k) || k < 2 || k % 2 != 0 || !cur_take(&c, k, NULL))
		return bad(o, PEEK_MALFORMED, "cipher suites");
	if (!cur_u8(&c, &k) || k < 1 || !cur_take(&c, k, NULL))
		return bad(o, PEEK_MALFORMED, "compression methods");
	if (c.n == 0)
		return bad(o, PEEK_NO_NAME, "no extensions");
	if (!cur_u16(&c, &elen) || elen != c.n)
		return bad(o, PEEK_MALFORMED, "extensions length");
	memset(seen, 0, sizeof(seen));
	while (c.n > 0) {
		if (!cur_u16(&c, &type) || !cur_u16(&c, &len) ||
		    !cur_take(&c, len, &ep))
			return bad(o, PEEK_MALFORMED, "extension length");
		/* A server takes one of each; which one is its choice. */
		if (seen[type / 8] & (1u << (type % 8)))
			return bad(o, PEEK_MALFORMED, "duplicate extension");
		seen[type / 8] |= (uint8_t)(1u << (type % 8));
		if (type == EXT_SNI) {
			ext.p = ep;
			ext.n = len;
			if ((r = sni(ext, o)) != PEEK_NAME)
				return r;
			have_name = true;
		} else if (type == EXT_ECH) {
			ext.p = ep;
			ext.n = len;
			ech_outer(ext, o);
			ech = true;
		} else if (type == EXT_ESNI ||
		    (type >= 0xfe08u && type < EXT_ECH))
			ech = old_ech = true;
	}
	/* Beside a predecessor, an outer extension proves nothing. */
	if (old_ech)
		o->ech_outer = false;
	if (ech) {
		if (!have_name)
			o->name[0] = '\0';
		return bad(o, PEEK_ECH, "encrypted_client_hello");
	}
	return have_name ? PEEK_NAME : bad(o, PEEK_NO_NAME, "no server_name");
}

enum peek_result
peek_tls(const uint8_t *b, size_t len, struct peek_out *o)
{
	static uint8_t	hs[PEEK_MAX];	/* scratch; the gate has one thread */
	size_t		off = 0, nhs = 0, hlen;
	struct cur	c;

	memset(o, 0, sizeof(*o));
	if (b == NULL)
		len = 0;
	if (len > PEEK_MAX)
		len = PEEK_MAX;
	if (len >= 1 && b[0] != TLS_HANDSHAKE)
		return bad(o, PEEK_NOT_TLS, "not a handshake record");
	if (len >= 2 && b[1] != 3)
		return bad(o, PEEK_NOT_TLS, "not a TLS record version");
	/* The handshake message may span records (a ClientHello with
	 * post-quantum key shares is larger than one): gather their
	 * fragments, the last possibly in part. */
	while (off + 5 <= len) {
		size_t rlen = (size_t)b[off + 3] << 8 | b[off + 4], have;

		if (b[off] != TLS_HANDSHAKE || b[off + 1] != 3)
			return bad(o, PEEK_MALFORMED, "another record type "
			    "inside the ClientHello");
		if (rlen == 0 || rlen > TLS_RECORD_MAX)
			return bad(o, PEEK_MALFORMED, "record length");
		have = len - off - 5 < rlen ? len - off - 5 : rlen;
		memcpy(hs + nhs, b + off + 5, have);
		nhs += have;
		off += 5 + have;
		if (nhs >= 4) {
			if (hs[0] != TLS_CLIENT_HELLO)
				return bad(o, PEEK_NOT_TLS,
				    "first handshake not a ClientHello");
			hlen = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
			if (hlen + 4 > PEEK_MAX)
				return bad(o, PEEK_MALFORMED,
				    "ClientHello over the bound");
			if (nhs >= hlen + 4) {
				c.p = hs + 4;
				c.n = hlen;
				return client_hello(c, o);
			}
		}
		if (have < rlen)
			break;
	}
	if (len >= PEEK_MAX)
		return bad(o, PEEK_MALFORMED, "ClientHello over the bound");
	return PEEK_MORE;
}

/* -------------------------------------------------------------- HTTP */

static bool
tchar(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || (c != 0 && strchr("!#$%&'*+-.^_`|~",
	    c) != NULL);
}

/* host[:port] (an authority without userinfo) into o->name. */
static bool
authority(struct peek_out *o, const uint8_t *s, size_t n)
{
	size_t i, colon = n;

	for (i = 0; i < n; i++)
		if (s[i] == ':') {
			colon = i;
			break;
		}
	if (colon < n) {
		size_t digits = n - colon - 1;
		unsigned long port = 0;

		if (digits == 0 || digits > 5)
			return false;
		for (i = colon + 1; i < n; i++) {
			if (s[i] < '0' || s[i] > '9')
				return false;
			port = port * 10 + (unsigned long)(s[i] - '0');
		}
		if (port > 65535)
			return false;
	}
	return name_copy(o, s, colon, true);
}

static bool
ieq(const uint8_t *a, size_t n, const char *lit)
{
	size_t i;

	if (strlen(lit) != n)
		return false;
	for (i = 0; i < n; i++) {
		uint8_t c = a[i];

		if (c >= 'A' && c <= 'Z')
			c = (uint8_t)(c - 'A' + 'a');
		if (c != (uint8_t)lit[i])
			return false;
	}
	return true;
}

enum peek_result
peek_http(const uint8_t *b, size_t len, struct peek_out *o)
{
	const uint8_t	*end = NULL, *p, *line, *eol, *tgt, *sp;
	struct peek_out	 abs;
	size_t		 i, tlen, nhost = 0;
	bool		 v11, have_abs = false;

	memset(o, 0, sizeof(*o));
	memset(&abs, 0, sizeof(abs));
	if (b == NULL)
		len = 0;
	if (len > PEEK_MAX)
		len = PEEK_MAX;
	/* The method, as far as it goes: upper-case letters then a space. */
	for (i = 0; i < len && b[i] != ' '; i++)
		if (b[i] < 'A' || b[i] > 'Z' || i >= 16)
			return bad(o, PEEK_NOT_HTTP, "not a request method");
	if (i < len && i == 0)
		return bad(o, PEEK_NOT_HTTP, "not a request method");
	for (i = 0; i + 3 < len; i++)
		if (b[i] == '\r' && b[i + 1] == '\n' && b[i + 2] == '\r' &&
		    b[i + 3] == '\n') {
			end = b + i + 2;	/* after the last header's CRLF */
			break;
		}
	if (end == NULL)
		return len >= PEEK_MAX ? bad(o, PEEK_MALFORMED,
		    "request head over the bound") : PEEK_MORE;
	/* Request line: METHOD SP target SP HTTP/1.x CRLF. */
	if ((eol = memchr(b, '\r', (size_t)(end - b))) == NULL ||
	    eol[1] != '\n' || memchr(b, '\n', (size_t)(eol - b)) != NULL ||
	    (sp = memchr(b, ' ', (size_t)(eol - b))) == NULL)
		return bad(o, PEEK_MALFORMED, "request line");
	tgt = sp + 1;
	if ((sp = memchr(tgt, ' ', (size_t)(eol - tgt))) == NULL ||
	    (size_t)(eol - sp - 1) != 8)
		return bad(o, PEEK_MALFORMED, "request line");
	if (memcmp(sp + 1, "HTTP/1.1", 8) == 0)
		v11 = true;
	else if (memcmp(sp + 1, "HTTP/1.0", 8) == 0)
		v11 = false;
	else
		return bad(o, PEEK_NOT_HTTP, "not HTTP/1.0 or 1.1");
	tlen = (size_t)(sp - tgt);
	if (tlen == 0)
		return bad(o, PEEK_MALFORMED, "empty target");
	for (i = 0; i < tlen; i++)
		if (tgt[i] <= ' ' || tgt[i] >= 0x7f)
			return bad(o, PEEK_MALFORMED, "target");
	if ((size_t)(tgt - b) == 8 && memcmp(b, "CONNECT ", 8) == 0)
		return bad(o, PEEK_MALFORMED, "CONNECT");
	if (tlen > 7 && ieq(tgt, 7, "http://")) {
		const uint8_t *a = tgt + 7, *ae = a;

		while (ae < tgt + tlen && *ae != '/' && *ae != '?' &&
		    *ae != '#')
			ae++;
		if (memchr(a, '@', (size_t)(ae - a)) != NULL ||
		    !authority(&abs, a, (size_t)(ae - a)))
			return bad(o, PEEK_MALFORMED, "absolute target");
		have_abs = true;
	} else if (tgt[0] != '/' && !(tlen == 1 && tgt[0] == '*'))
		return bad(o, PEEK_MALFORMED, "target form");
	/* Header lines: name ":" OWS value OWS CRLF; no folding. */
	for (line = eol + 2; line < end; line = eol + 2) {
		const uint8_t *colon, *v, *ve;

		eol = memchr(line, '\r', (size_t)(end - line));
		if (eol == NULL || eol[1] != '\n')
			return bad(o, PEEK_MALFORMED, "header line end");
		if (memchr(line, '\n', (size_t)(eol - line)) != NULL)
			return bad(o, PEEK_MALFORMED, "bare LF");
		colon = memchr(line, ':', (size_t)(eol - line));
		if (colon == NULL || colon == line)
			return bad(o, PEEK_MALFORMED, "header without a name");
		for (p = line; p < colon; p++)
			if (!tchar(*p))
				return bad(o, PEEK_MALFORMED, "header name");
		if (!ieq(line, (size_t)(colon - line), "host"))
			continue;
		if (++nhost > 1)
			return bad(o, PEEK_MALFORMED, "two Host headers");
		for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
			;
		for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t');
		    ve--)
			;
		if (!authority(o, v, (size_t)(ve - v)))
			return bad(o, PEEK_MALFORMED, "Host not a host name");
	}
	if (have_abs) {
		/* The server takes the target's authority (RFC 9112 3.2.2):
		 * a Host that says otherwise is a disagreement. */
		if (nhost == 1 && strcmp(o->name, abs.name) != 0)
			return bad(o, PEEK_MALFORMED, "Host and target differ");
		memcpy(o->name, abs.name, sizeof(o->name));
		return PEEK_NAME;
	}
	if (nhost == 1)
		return PEEK_NAME;
	return v11 ? bad(o, PEEK_MALFORMED, "HTTP/1.1 without Host") :
	    bad(o, PEEK_NO_NAME, "no Host");
}

const char *
peek_result_name(enum peek_result r)
{
	static const char *const names[] = { "more", "name", "no_name",
	    "ech", "not_tls", "not_http", "malformed" };

	return (unsigned)r < sizeof(names) / sizeof(names[0]) ?
	    names[r] : "?";
}
