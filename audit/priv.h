/*
 * priv: helpers shared by the files of audit/ and by nobody else (the
 * module's public interface is audit/audit.h). Storage access lives here so
 * that the writer, the verifier and the proof maker read the schema the same
 * way.
 */
#ifndef SLUICE_AUDIT_PRIV_H
#define SLUICE_AUDIT_PRIV_H

#include <sys/types.h>

#include <string.h>

#include <sqlite3.h>

#include "audit/audit.h"

/* aud_seterr: formats a message into err (nothing when err is NULL or
 * errlen 0): how every file of audit/ reports an error without logging. */
void	aud_seterr(char *err, size_t errlen, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

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
/* aud_decision_code: records.decision for the n bytes at s ("allow" 1,
 * "deny" 2, "ask" 3, "log" 4), 0 (NULL) for anything else. */
int	aud_decision_code(const char *s, size_t n);
void	aud_cols_from(const json_t *rec, struct aud_cols *c);

/* Nanosecond times as canonical decimal strings (they exceed 2^53). */
json_t	*aud_ns_json(int64_t ns);
int	aud_ns_parse(const json_t *v, int64_t *ns);

/*
 * A growing output buffer for the serialiser and the parser's string
 * decoding (audit/canon.c). Inline appends: the serialiser's hot path.
 */
struct aud_buf {
	char	*p;
	size_t	 len, cap;
	int	 oom;
	int	 borrowed;	/* p is the caller's storage, not malloc'd */
};

/* aud_buf_grow: room for n more bytes and a NUL. 0, or -1 (oom set). */
int	aud_buf_grow(struct aud_buf *b, size_t n);

/* Appends without terminating: callers NUL-terminate once at the end. */
static inline void
aud_buf_add(struct aud_buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap && aud_buf_grow(b, n) == -1)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static inline void
aud_buf_c(struct aud_buf *b, char c)
{
	if (b->len + 2 > b->cap && aud_buf_grow(b, 1) == -1)
		return;
	b->p[b->len++] = c;
}

static inline void
aud_buf_nul(struct aud_buf *b)
{
	if (b->len + 1 > b->cap && aud_buf_grow(b, 0) == -1)
		return;
	b->p[b->len] = '\0';
}

/* The canonical subset's rules that the serialiser, the parser and the
 * one-pass check share (audit/canon.c). aud_utf8_len: the length of the
 * valid UTF-8 sequence at s (1..4), 0 if invalid (overlong forms and
 * surrogates included). aud_key_ok: a key of [a-z0-9_]+. */
size_t	aud_utf8_len(const unsigned char *s, size_t avail);
int	aud_key_ok(const char *k, size_t n);
/* aud_plain: 1 for the bytes a canonical string carries raw (printable
 * ASCII but '"' and '\\'). */
extern const unsigned char aud_plain[256];

/*
 * Canonical bytes of a fields object cut at its top-level members, so that
 * the writer can merge the common fields in by copying bytes, without a
 * JSON tree on its thread (audit/canon.c).
 */
#define AUD_MEMBERS_INLINE	64
struct aud_members {
	char	*buf;		/* "{...}", NUL-terminated */
	size_t	 len;
	size_t	 n;
	size_t	*start;		/* member i begins at buf[start[i]] ('"') */
	/* Storage used when the record fits, so that the common case
	 * allocates nothing; buf and start may point here. */
	size_t	 istart[AUD_MEMBERS_INLINE];
	char	 ibuf[4096];
};
/* aud_canon_members: as aud_canon_dump for an object, into m (which must
 * not move while buf/start are used). 0, or -1 (EINVAL, ENOMEM) with a
 * message; on success release with aud_members_free. */
int	aud_canon_members(const json_t *obj, struct aud_members *m, char *err,
	    size_t errlen);
void	aud_members_free(struct aud_members *m);

/* A top-level member of a checked canonical object: spans into the buffer. */
struct aud_member {
	const char	*key, *val;
	size_t		 klen, vlen;
};
struct aud_scan {
	struct aud_member	*m;
	size_t			 n, cap;
};
/*
 * aud_canon_check: accepts buf exactly when aud_canon_parse would, in one
 * pass and without allocating a tree. 0, or -1 (EINVAL) with a message. If
 * sc is not NULL and the value is an object, sc receives its members in
 * order (sc grows as needed; free with aud_scan_free).
 */
int	aud_canon_check(const char *buf, size_t len, struct aud_scan *sc,
	    char *err, size_t errlen);
void	aud_scan_free(struct aud_scan *sc);
/* Lookups over checked bytes only (nothing here re-validates). */
const struct aud_member *aud_scan_get(const struct aud_scan *sc,
	    const char *key);
/* aud_cv_member: the value of key in the object span obj. 0 or -1. */
int	aud_cv_member(const char *obj, size_t len, const char *key,
	    const char **val, size_t *vlen);
/* A scratch buffer that string decoding reuses. */
struct aud_strbuf {
	char	*p;
	size_t	 cap;
};
/* aud_cv_str: the decoded bytes of a string span, pointing into the span
 * when it has no escape, else into sb. 0, or -1 if not a string. */
int	aud_cv_str(const char *val, size_t vlen, struct aud_strbuf *sb,
	    const char **out, size_t *olen);
/* aud_cv_int: an integer span. 0, or -1 if not an integer. */
int	aud_cv_int(const char *val, size_t vlen, long long *out);
/* aud_ns_parse_str: aud_ns_parse on decoded string bytes. */
int	aud_ns_parse_str(const char *s, size_t n, int64_t *ns);

/* aud_store_open: read-write (creating the schema) or read-only. */
int	aud_store_open(const char *path, int rw, sqlite3 **db, char *err,
	    size_t errlen);
/* aud_store_open_vfs: the same through the named SQLite VFS (NULL: the
 * default one). */
int	aud_store_open_vfs(const char *path, int rw, const char *vfs,
	    sqlite3 **db, char *err, size_t errlen);
/* aud_store_subtree: an aud_subtree_fn over merkle_nodes and rec_hash. */
int	aud_store_subtree(void *db, unsigned level, uint64_t idx,
	    uint8_t out[AUD_HASH_LEN]);
/* aud_store_size: number of records (max(seq)+1, 0 if empty). */
int	aud_store_size(sqlite3 *db, uint64_t *n);
int	aud_store_meta(sqlite3 *db, const char *k, char *buf, size_t len);

/* ---- the space reserve (audit/reserve.c), the writer's only ---- */
struct aud_reserve;
/* aud_reserve_new: the reserve of bytes beside db_path (<db>.reserve);
 * nothing is made yet. NULL with ENOMEM. */
struct aud_reserve *aud_reserve_new(const char *db_path, uint64_t bytes);
/* aud_reserve_free: the file stays (a restart takes it again). */
void	aud_reserve_free(struct aud_reserve *r);
/* aud_reserve_make: allocate the file at full size. 0, or -1 with errno
 * (ENOSPC: the volume has not that much room). */
int	aud_reserve_make(struct aud_reserve *r);
/* aud_reserve_release: delete it, giving its space back. 1 when that
 * freed space, 0 when nothing was held (NULL included). */
int	aud_reserve_release(struct aud_reserve *r);
/* aud_reserve_restore: make it again if the volume has twice its size
 * free. 0 when held, -1 with errno otherwise. */
int	aud_reserve_restore(struct aud_reserve *r);

#endif /* SLUICE_AUDIT_PRIV_H */
