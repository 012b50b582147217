/*
 * priv: helpers shared by the files of audit/ and by nobody else (the
 * module's public interface is audit/audit.h). Storage access lives here so
 * that the writer, the verifier and the proof maker read the schema the same
 * way.
 */
#ifndef SLUICE_AUDIT_PRIV_H
#define SLUICE_AUDIT_PRIV_H

#include <sys/types.h>

#include <sqlite3.h>

#include "audit/audit.h"

/* base64, RFC 4648 §4; decode is strict (padding, no whitespace). */
size_t	aud_b64_encode(const uint8_t *in, size_t n, char *out);
ssize_t	aud_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap);
void	aud_hex(const uint8_t *in, size_t n, char *out);

/* The denormalised, untrusted query columns derived from a record. */
struct aud_cols {
	int		 kind;		/* records.kind code */
	int		 decision;	/* 0 = NULL */
	const char	*sandbox, *dst_host, *dst_ip, *rule_id;
	const char	*mcp_server, *mcp_tool;
	long long	 dst_port;
	int		 has_port;
};
int	aud_kind_code(const char *kind);
void	aud_cols_from(const json_t *rec, struct aud_cols *c);

/* Nanosecond times as canonical decimal strings (they exceed 2^53). */
json_t	*aud_ns_json(int64_t ns);
int	aud_ns_parse(const json_t *v, int64_t *ns);

/* aud_store_open: read-write (creating the schema) or read-only. */
int	aud_store_open(const char *path, int rw, sqlite3 **db, char *err,
	    size_t errlen);
/* aud_store_subtree: an aud_subtree_fn over merkle_nodes and rec_hash. */
int	aud_store_subtree(void *db, unsigned level, uint64_t idx,
	    uint8_t out[AUD_HASH_LEN]);
/* aud_store_size: number of records (max(seq)+1, 0 if empty). */
int	aud_store_size(sqlite3 *db, uint64_t *n);
int	aud_store_meta(sqlite3 *db, const char *k, char *buf, size_t len);

#endif /* SLUICE_AUDIT_PRIV_H */
