/*
 * ech: the Encrypted Client Hello configurations a name publishes, read
 * from its HTTPS (or SVCB) records: the `ech` SvcParam (key 5) holds an
 * ECHConfigList, and each ECHConfig in it a config id, a KEM, the HPKE
 * cipher suites a client may use with it and the public_name its outer
 * ClientHello names. The name gate (gateway/dns/gate.c) tells a
 * ClientHello that uses one of these configs (a real ECH: the name the
 * server reads is encrypted, the gate cannot see it) from GREASE ECH (a
 * random extension a client sends when it has no config, with the real
 * name in the outer server_name).
 *
 * Pure: no allocation, no state, no I/O; every length is checked against
 * what is left before a byte is read. Upstream answers are not trusted
 * more than what a sandbox sends: the bytes may be anything.
 */
#ifndef SLUICE_GATEWAY_DNS_ECH_H
#define SLUICE_GATEWAY_DNS_ECH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ECH_CONFIGS_MAX	8	/* configs kept per name */
#define ECH_SUITES_MAX	8	/* cipher suites kept per config */
#define ECH_VERSION	0xfe0du	/* the ECHConfig version read; others skip */
#define ECH_PARAM_KEY	5u	/* SvcParamKey "ech" */

/* One HPKE cipher suite: the KDF and AEAD ids, as a ClientHello names
 * them. */
struct ech_suite {
	uint16_t	kdf, aead;
};

struct ech_config {
	uint8_t		 config_id;
	uint16_t	 kem;
	uint8_t		 nsuites;
	bool		 more_suites;	/* it listed more than ECH_SUITES_MAX */
	struct ech_suite suites[ECH_SUITES_MAX];
	char		 public_name[256];	/* as published, NUL-ended */
};

/* What one name publishes, from all its records together. */
struct ech_set {
	uint8_t			n;
	bool			more;	/* more than ECH_CONFIGS_MAX configs */
	struct ech_config	c[ECH_CONFIGS_MAX];
};

/*
 * ech_config_list: appends the configs of version ECH_VERSION in the
 * ECHConfigList b[0..len) (its 2-byte length first) to out; configs of
 * other versions are skipped by their length. 0, or -1 when the list is
 * malformed (a length past what is left, a list whose length is not the
 * whole of b, a public_name that is empty or holds a NUL, an empty suite
 * list or one of odd size); out then holds what came before.
 */
int	ech_config_list(const uint8_t *b, size_t len, struct ech_set *out);

/*
 * ech_svcb_rdata: the RDATA of one HTTPS/SVCB record, b[0..len): its
 * priority, its target name (uncompressed, as RFC 9460 requires) and its
 * SvcParams in strictly increasing key order. The ech param's configs are
 * appended to out. 0 (with or without an ech param; AliasMode records
 * have none), or -1 when the RDATA is malformed.
 */
int	ech_svcb_rdata(const uint8_t *b, size_t len, struct ech_set *out);

/*
 * ech_match: whether a ClientHello's outer ECH extension that names
 * config_id with cipher suite (kdf, aead) uses one of s's configs: a
 * config with that id offers that suite (or listed more suites than were
 * kept, when the id alone decides).
 */
bool	ech_match(const struct ech_set *s, uint8_t config_id, uint16_t kdf,
	    uint16_t aead);

#endif /* SLUICE_GATEWAY_DNS_ECH_H */
