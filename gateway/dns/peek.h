/*
 * peek: the name a TCP flow's first bytes ask for, read the way the server
 * at the other end will read it: the server_name of a TLS ClientHello, or
 * the Host of an HTTP/1.x request. The name gate (gateway/dns/gate.c)
 * compares it with the names the sandbox was answered for.
 *
 * Pure: no allocation, no state, no I/O. The caller accumulates the
 * flow's bytes (a ClientHello is often larger than one segment) and calls
 * again with more until the result is not PEEK_MORE; the bound on how
 * much it accumulates is the caller's (PEEK_MAX), and reaching it
 * without a decision is the caller's to refuse.
 *
 * Anything the parser is not sure the server reads the same way is
 * refused (PEEK_MALFORMED): two server_name extensions, two Host
 * headers, an absolute-form target naming another host, folded headers,
 * a handshake message split across records of other types. The code in
 * the sandbox knows this source; ambiguity is what it would use.
 */
#ifndef SLUICE_GATEWAY_DNS_PEEK_H
#define SLUICE_GATEWAY_DNS_PEEK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PEEK_MAX	(16u * 1024u)	/* bytes of a flow the gate reads */
#define PEEK_NAME_MAX	256u		/* a DNS name with its NUL */

enum peek_result {
	PEEK_MORE = 0,		/* a valid prefix: more bytes decide */
	PEEK_NAME,		/* out->name holds the (lower case) name */
	PEEK_NO_NAME,		/* complete and valid, but names nothing */
	PEEK_ECH,		/* a ClientHello with encrypted_client_hello */
	PEEK_NOT_TLS,		/* not a TLS handshake */
	PEEK_NOT_HTTP,		/* not an HTTP/1.x request */
	PEEK_MALFORMED,		/* looks like it, but broken or ambiguous */
};

struct peek_out {
	char		 name[PEEK_NAME_MAX];
	const char	*why;		/* static text for PEEK_MALFORMED etc. */
	/* PEEK_ECH: ech_outer when the extension is encrypted_client_hello
	 * of type outer, whole, with the config id and HPKE cipher suite it
	 * names (the client's claim: real with a config the name
	 * publishes, GREASE with made-up values); false for anything else
	 * (its predecessors, an inner type in the clear). */
	bool		 ech_outer;
	uint8_t		 ech_config_id;
	uint16_t	 ech_kdf, ech_aead;
};

/* peek_tls: b[0..len) as the start of a TLS client stream. PEEK_NAME,
 * PEEK_NO_NAME (no server_name), PEEK_ECH (the extension present, with
 * out->name the outer server_name if any, "" if none, and the ech_
 * fields), PEEK_NOT_TLS, PEEK_MALFORMED or PEEK_MORE. A ClientHello
 * longer than PEEK_MAX is PEEK_MALFORMED. */
enum peek_result	peek_tls(const uint8_t *b, size_t len,
			    struct peek_out *out);
/* peek_http: b[0..len) as the start of an HTTP/1.x request. PEEK_NAME
 * (the Host without its port), PEEK_NO_NAME (HTTP/1.0 without Host),
 * PEEK_NOT_HTTP (e.g. a TLS record, HTTP/2's preface), PEEK_MALFORMED or
 * PEEK_MORE. A request head longer than PEEK_MAX is PEEK_MALFORMED. */
enum peek_result	peek_http(const uint8_t *b, size_t len,
			    struct peek_out *out);
/* peek_result_name: "more", "name", ... for logs and tests (static). */
const char		*peek_result_name(enum peek_result r);

#endif /* SLUICE_GATEWAY_DNS_PEEK_H */
