/*
 * verify.h: the verifier's state, shared by the files that make up `audit
 * verify` (audit/verify*.c) and by nobody else. One verification is one
 * struct aud_vctx: the scan of the records (verify_scan.c) fills in the
 * roots, keys and gaps that the checkpoint checks (verify_ckpt.c) and the
 * report (verify.c) then read.
 */
#ifndef SLUICE_AUDIT_VERIFY_H
#define SLUICE_AUDIT_VERIFY_H

#include <pthread.h>

#include "audit/priv.h"

#define AUD_VF_MAXKEYS	32

struct aud_vctx {
	sqlite3		*db;
	json_t		*rep, *checks, *warnings, *gaps;
	int		 failed, error;
	char		 origin[256];
	struct aud_key	*pinned[AUD_VF_MAXKEYS], *declared[AUD_VF_MAXKEYS];
	size_t		 npinned, ndeclared;
	uint64_t	 retire_last[AUD_VF_MAXKEYS];	/* per declared key */
	int		 retired[AUD_VF_MAXKEYS];
	/* Roots wanted at these sizes (stored and external checkpoints). */
	uint64_t	*sizes;
	uint8_t		(*roots)[AUD_HASH_LEN];
	size_t		 nsizes, nextsz;
	/* One ascending cursor per tree level: the scan produces the nodes
	 * of each level in idx order, so the reader copies the rows a batch
	 * will produce with sequential steps instead of B-tree lookups. */
	sqlite3_stmt	*lvl_st[64];
	int		 node_bad;
	uint64_t	 node_bad_level, node_bad_idx, nodes_made;
};

/* ---- the report (audit/verify.c) ---- */
/* aud_vf_ok: a passed check, with its detail (NULL: none). */
void	aud_vf_ok(struct aud_vctx *v, const char *name, const char *detail);
/* aud_vf_fail: a failed check; the first one is the report's
 * first_failure (seq < 0: no record). The log is then tampered with. */
void	aud_vf_fail(struct aud_vctx *v, int64_t seq, const char *check,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* aud_vf_error: verification could not be done (not a verdict on the
 * log); the first message is kept. */
void	aud_vf_error(struct aud_vctx *v, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* aud_vf_warn: a warning; the log verifies with warnings. */
void	aud_vf_warn(struct aud_vctx *v, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/* ---- steps 1-3: the records and the tree (audit/verify_scan.c) ---- */
/* aud_vf_scan: checks contiguity, every record and every stored node, and
 * records the roots at v->sizes. Returns the records that passed. */
uint64_t aud_vf_scan(struct aud_vctx *v);

/* ---- steps 4-5: checkpoints (audit/verify_ckpt.c) ---- */
/* aud_vf_root_for: the root the scan computed at size, or NULL. */
const uint8_t *aud_vf_root_for(struct aud_vctx *v, uint64_t size);
/* aud_vf_stored_ckpts: step 4, every stored checkpoint against the tree of
 * n records; nck stored ones were counted before the scan. Sets
 * *last_signed and *local_ok. 0, or -1 when the verdict is made (failed). */
int	aud_vf_stored_ckpts(struct aud_vctx *v, uint64_t n, uint64_t nck,
	    struct aud_key **keys, size_t nkeys, uint64_t *last_signed,
	    int *local_ok);
/* aud_vf_external: step 5, the external checkpoints of o. Sets *ext_ok.
 * 0, or -1 when the verdict is made (failed or error). */
int	aud_vf_external(struct aud_vctx *v, const struct aud_verify_opts *o,
	    uint64_t n, struct aud_key **keys, size_t nkeys, int *ext_ok);

/* ---- the read-ahead VFS (audit/verify_ra.c) ---- */
/* aud_vf_ra_name: the name of the read-ahead VFS, or NULL (the default)
 * if unavailable. */
const char *aud_vf_ra_name(void);
/* The toucher: one read per page of the mapping, in file order. */
struct aud_vf_toucher {
	const unsigned char	*map;
	size_t			 len;
	int			 stop;		/* atomic */
	pthread_t		 th;
	int			 started;
};
/* aud_vf_toucher_start: starts the toucher on the main database's
 * mapping, if it has one (t is zeroed either way). */
void	aud_vf_toucher_start(sqlite3 *db, struct aud_vf_toucher *t);
/* aud_vf_toucher_stop: stops it; a no-op if it never started. */
void	aud_vf_toucher_stop(struct aud_vf_toucher *t);

#endif /* SLUICE_AUDIT_VERIFY_H */
