/*
 * sandbox_int.h: what the files of the sandbox manager share and nobody else
 * sees: the record kept per sandbox in the state database, the database
 * calls (gateway/sandbox_db.c). The netlink question reconciliation asks
 * (is a pinned namespace ours?) is netns/'s ns_nsid: gateway/ never speaks
 * netlink itself. Public API: gateway/sandbox.h.
 */
#ifndef SLUICE_GATEWAY_SANDBOX_INT_H
#define SLUICE_GATEWAY_SANDBOX_INT_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/sandbox.h"

/* One row of the sandboxes table. */
struct sbx_rec {
	char		id[SBX_ID_MAX + 1];
	char		policy[SBX_POLICY_MAX + 1];
	char		subject[SBX_SUBJECT_MAX + 1];
	/* Compact JSON object: room for the most sbx_labels_check allows
	 * (16 members of 63 + 128 characters, none needing an escape). */
	char		labels[4096];
	uint32_t	index;
	char		addr[16];		/* dotted quad of the sandbox */
	char		host_addr[16];		/* dotted quad of the host side */
	char		token[SBX_TOKEN_HEX + 1];
	int64_t		created, expires;	/* unix time; expires 0 = never */
	int		tainted;
	/* Generation (netns/fw.h, fw_sandbox.gen): nonzero, drawn from the
	 * database's counter (sbx_db_gen_reserve) and never drawn again;
	 * 0 only in a row written before generations existed. */
	uint32_t	gen;
};

/* sbx_policy_name_valid: 1 if s is a name a loaded policy can have
 * ([a-z0-9][a-z0-9_-]{0,63}), else 0. */
int		 sbx_policy_name_valid(const char *s);
/* sbx_rec_valid: 0 if every field of r that does not depend on the pool
 * is one a create can write: id, policy name, subject, labels (a JSON
 * object sbx_labels_check accepts), token (64 lowercase hex digits),
 * created (> 0), expires (0, or after created by at most a TTL's
 * 2^32 - 1 seconds), tainted (0 or 1). Else -1 with errno EINVAL and the
 * first problem in err (which quotes no field of r), or ENOMEM when the
 * labels could not be parsed for lack of memory (nothing is known of the
 * row then). The slot and addresses are the caller's to check against its
 * pool. */
int		 sbx_rec_valid(const struct sbx_rec *r, char *err,
		    size_t errlen);

struct sqlite3;

/* sbx_db_open: opens (creating it mode 0600) the state database at path
 * and its table. NULL with err on failure. */
struct sqlite3	*sbx_db_open(const char *path, char *err, size_t errlen);
/* sbx_db_close: NULL is a no-op. */
void		 sbx_db_close(struct sqlite3 *db);
/* sbx_db_insert: one row, durable on return. -1 with err (EEXIST for a
 * duplicate id or index). */
int		 sbx_db_insert(struct sqlite3 *db, const struct sbx_rec *r,
		    char *err, size_t errlen);
/* sbx_db_purge: deletes the rows holding id or slot index (stale rows a
 * failed delete left behind; the caller knows both free). 0, or -1 with
 * err. */
int		 sbx_db_purge(struct sqlite3 *db, const char *id,
		    uint32_t index, char *err, size_t errlen);
/* sbx_db_delete: the row of id; a missing row is not an error. */
int		 sbx_db_delete(struct sqlite3 *db, const char *id, char *err,
		    size_t errlen);
/* sbx_db_set_tainted: marks id tainted. */
int		 sbx_db_set_tainted(struct sqlite3 *db, const char *id,
		    char *err, size_t errlen);
/* sbx_db_gen_reserve: takes up to n generations for this process, durably
 * before any is used: [*first, *first + *got). The counter only grows,
 * and starts above every generation a row holds, so no generation is ever
 * given twice, across restarts too. 0, or -1 with err (ERANGE once the
 * 32-bit space is spent). */
int		 sbx_db_gen_reserve(struct sqlite3 *db, uint32_t n,
		    uint32_t *first, uint32_t *got, char *err, size_t errlen);
/* sbx_db_set_gen: stores gen in the row of id (a row written before
 * generations gets one when it is adopted). */
int		 sbx_db_set_gen(struct sqlite3 *db, const char *id,
		    uint32_t gen, char *err, size_t errlen);
/* sbx_db_load: calls cb for each row (in index order). A row whose columns
 * do not fit a struct sbx_rec is still reported, with bad = 1, so the
 * caller can remove what it names. Returns rows seen, or -1 with err. */
int		 sbx_db_load(struct sqlite3 *db,
		    void (*cb)(const struct sbx_rec *r, int bad, void *arg),
		    void *arg, char *err, size_t errlen);

#endif /* SLUICE_GATEWAY_SANDBOX_INT_H */
