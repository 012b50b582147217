/*
 * merkle: RFC 6962 hashing over record hashes. The tree is what lets one
 * signed checkpoint vouch for every record before it and lets a reviewer check
 * one record (inclusion) or that a log only grew (consistency) with O(log n)
 * hashes. The writer keeps only the frontier; proofs and past roots are
 * computed from a caller-supplied source of perfect-subtree hashes (the DB's
 * merkle_nodes and rec_hash rows, or an array in tests).
 */
/* The one-shot SHA256_* calls are the fastest path for the 33- and 65-byte
 * inputs here; OpenSSL 3 only marks them deprecated. */
#define OPENSSL_API_COMPAT 0x10100000L

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "audit/audit.h"

#define MAXPROOF 64

struct aud_tree {
	uint64_t	size;
	uint8_t		f[64][AUD_HASH_LEN];	/* f[l] valid iff bit l of size */
};

void
aud_sha256(const void *data, size_t len, uint8_t out[AUD_HASH_LEN])
{
	SHA256_CTX c;

	/* Not SHA256(): in OpenSSL 3 the one-shot call fetches the EVP
	 * method (a locked lookup) on every record, which cost the verifier
	 * more than the hashing itself. */
	SHA256_Init(&c);
	SHA256_Update(&c, data, len);
	SHA256_Final(out, &c);
}

/*
 * Tree hashes have fixed sizes: a leaf over a record hash is 33 bytes (one
 * padded block), a node 65 bytes (two). Padding them here and running the
 * compression function directly skips the buffering, length bookkeeping
 * and cleansing of the streaming calls, which cost as much as the
 * compression itself at these sizes (verification makes two or three of
 * them per record).
 */
static void
sha256_blocks(const uint8_t *blocks, size_t n, uint8_t out[AUD_HASH_LEN])
{
	SHA256_CTX c;
	size_t i;

	SHA256_Init(&c);
	for (i = 0; i < n; i++)
		SHA256_Transform(&c, blocks + 64 * i);
	for (i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(c.h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c.h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c.h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c.h[i];
	}
}

void
aud_leaf_hash(const void *data, size_t len, uint8_t out[AUD_HASH_LEN])
{
	SHA256_CTX c;
	uint8_t z = 0, b[64];

	if (len == AUD_HASH_LEN) {
		/* 0x00 || 32 bytes || 0x80 || zeros || bit length 264 */
		memset(b, 0, sizeof(b));
		memcpy(b + 1, data, AUD_HASH_LEN);
		b[33] = 0x80;
		b[62] = (264 >> 8) & 0xff;
		b[63] = 264 & 0xff;
		sha256_blocks(b, 1, out);
		return;
	}
	SHA256_Init(&c);
	SHA256_Update(&c, &z, 1);
	SHA256_Update(&c, data, len);
	SHA256_Final(out, &c);
}

void
aud_node_hash(const uint8_t l[AUD_HASH_LEN], const uint8_t r[AUD_HASH_LEN],
    uint8_t out[AUD_HASH_LEN])
{
	uint8_t b[128];

	/* 0x01 || l || r || 0x80 || zeros || bit length 520; l or r may be
	 * out itself, so both are copied before anything is written. */
	b[0] = 1;
	memcpy(b + 1, l, AUD_HASH_LEN);
	memcpy(b + 1 + AUD_HASH_LEN, r, AUD_HASH_LEN);
	b[65] = 0x80;
	memset(b + 66, 0, sizeof(b) - 66);
	b[126] = (520 >> 8) & 0xff;
	b[127] = 520 & 0xff;
	sha256_blocks(b, 2, out);
}

struct aud_tree *
aud_tree_new(void)
{
	return calloc(1, sizeof(struct aud_tree));
}

void
aud_tree_free(struct aud_tree *t)
{
	free(t);
}

struct aud_tree *
aud_tree_dup(const struct aud_tree *t)
{
	struct aud_tree *n;

	if ((n = malloc(sizeof(*n))) != NULL)
		memcpy(n, t, sizeof(*n));
	return n;
}

uint64_t
aud_tree_size(const struct aud_tree *t)
{
	return t->size;
}

void
aud_tree_root(const struct aud_tree *t, uint8_t out[AUD_HASH_LEN])
{
	uint8_t r[AUD_HASH_LEN];
	int have = 0;
	unsigned l;

	/* Fold right to left: the smallest subtree is the rightmost. */
	for (l = 0; l < 64; l++) {
		if (!(t->size & (1ULL << l)))
			continue;
		if (have)
			aud_node_hash(t->f[l], r, r);
		else
			memcpy(r, t->f[l], AUD_HASH_LEN);
		have = 1;
	}
	if (!have)
		aud_sha256("", 0, r);
	memcpy(out, r, AUD_HASH_LEN);
}

int
aud_tree_append(struct aud_tree *t, const uint8_t leaf[AUD_HASH_LEN],
    aud_node_cb cb, void *arg)
{
	uint8_t h[AUD_HASH_LEN];
	uint64_t i = t->size;
	unsigned l = 0;

	if (t->size == UINT64_MAX) {
		errno = EOVERFLOW;
		return -1;
	}
	memcpy(h, leaf, AUD_HASH_LEN);
	while (t->size & (1ULL << l)) {
		aud_node_hash(t->f[l], h, h);
		l++;
		if (cb != NULL)
			cb(arg, l, i >> l, h);
	}
	memcpy(t->f[l], h, AUD_HASH_LEN);
	t->size++;
	return 0;
}

static uint64_t
split(uint64_t n)
{
	uint64_t k = 1;

	/* Largest power of two strictly smaller than n (n >= 2). */
	while (k < n - k)
		k <<= 1;
	return k;
}

/* MTH(D[a:b]) from perfect subtrees where possible. */
static int
mth(uint64_t a, uint64_t b, aud_subtree_fn fn, void *arg,
    uint8_t out[AUD_HASH_LEN])
{
	uint8_t l[AUD_HASH_LEN], r[AUD_HASH_LEN];
	uint64_t n = b - a, k;
	unsigned lvl;

	if (n == 0) {
		aud_sha256("", 0, out);
		return 0;
	}
	if ((n & (n - 1)) == 0 && (a & (n - 1)) == 0) {
		lvl = (unsigned)__builtin_ctzll(n);
		return fn(arg, lvl, a >> lvl, out);
	}
	k = split(n);
	if (mth(a, a + k, fn, arg, l) == -1 || mth(a + k, b, fn, arg, r) == -1)
		return -1;
	aud_node_hash(l, r, out);
	return 0;
}

int
aud_root_at(uint64_t size, aud_subtree_fn fn, void *arg,
    uint8_t out[AUD_HASH_LEN])
{
	return mth(0, size, fn, arg, out);
}

int
aud_tree_load(struct aud_tree *t, uint64_t size, aud_subtree_fn fn, void *arg)
{
	uint64_t start = 0;
	int l;

	memset(t, 0, sizeof(*t));
	for (l = 63; l >= 0; l--) {
		if (!(size & (1ULL << l)))
			continue;
		if (fn(arg, (unsigned)l, start >> l, t->f[l]) == -1)
			return -1;
		start += 1ULL << l;
	}
	t->size = size;
	return 0;
}

static int
push(uint8_t proof[][AUD_HASH_LEN], size_t *n, const uint8_t h[AUD_HASH_LEN])
{
	if (*n >= MAXPROOF) {
		errno = EOVERFLOW;
		return -1;
	}
	memcpy(proof[(*n)++], h, AUD_HASH_LEN);
	return 0;
}

/* RFC 6962 §2.1.1 PATH(m, D[a:b]); hashes are appended leaf to root. */
static int
path(uint64_t m, uint64_t a, uint64_t b, aud_subtree_fn fn, void *arg,
    uint8_t proof[][AUD_HASH_LEN], size_t *n)
{
	uint8_t h[AUD_HASH_LEN];
	uint64_t k;

	if (b - a <= 1)
		return 0;
	k = split(b - a);
	if (m < k) {
		if (path(m, a, a + k, fn, arg, proof, n) == -1 ||
		    mth(a + k, b, fn, arg, h) == -1)
			return -1;
	} else {
		if (path(m - k, a + k, b, fn, arg, proof, n) == -1 ||
		    mth(a, a + k, fn, arg, h) == -1)
			return -1;
	}
	return push(proof, n, h);
}

int
aud_inclusion_proof(uint64_t idx, uint64_t size, aud_subtree_fn fn, void *arg,
    uint8_t proof[][AUD_HASH_LEN], size_t *n)
{
	*n = 0;
	if (idx >= size) {
		errno = EINVAL;
		return -1;
	}
	return path(idx, 0, size, fn, arg, proof, n);
}

/* RFC 6962 §2.1.2 SUBPROOF(m, D[a:b], b). */
static int
subproof(uint64_t m, uint64_t a, uint64_t b, int whole, aud_subtree_fn fn,
    void *arg, uint8_t proof[][AUD_HASH_LEN], size_t *n)
{
	uint8_t h[AUD_HASH_LEN];
	uint64_t k;

	if (m == b - a) {
		if (whole)
			return 0;
		if (mth(a, b, fn, arg, h) == -1)
			return -1;
		return push(proof, n, h);
	}
	k = split(b - a);
	if (m <= k) {
		if (subproof(m, a, a + k, whole, fn, arg, proof, n) == -1 ||
		    mth(a + k, b, fn, arg, h) == -1)
			return -1;
	} else {
		if (subproof(m - k, a + k, b, 0, fn, arg, proof, n) == -1 ||
		    mth(a, a + k, fn, arg, h) == -1)
			return -1;
	}
	return push(proof, n, h);
}

int
aud_consistency_proof(uint64_t m, uint64_t size, aud_subtree_fn fn, void *arg,
    uint8_t proof[][AUD_HASH_LEN], size_t *n)
{
	*n = 0;
	if (m > size) {
		errno = EINVAL;
		return -1;
	}
	if (m == 0 || m == size)
		return 0;
	return subproof(m, 0, size, 1, fn, arg, proof, n);
}

/* RFC 9162 §2.1.3.2 */
int
aud_inclusion_verify(uint64_t idx, uint64_t size,
    const uint8_t leaf[AUD_HASH_LEN], const uint8_t proof[][AUD_HASH_LEN],
    size_t n, const uint8_t root[AUD_HASH_LEN])
{
	uint8_t r[AUD_HASH_LEN];
	uint64_t fn, sn;
	size_t i;

	if (idx >= size || n > MAXPROOF)
		goto bad;
	fn = idx;
	sn = size - 1;
	memcpy(r, leaf, AUD_HASH_LEN);
	for (i = 0; i < n; i++) {
		if (sn == 0)
			goto bad;
		if ((fn & 1) || fn == sn) {
			aud_node_hash(proof[i], r, r);
			while (!(fn & 1) && fn != 0) {
				fn >>= 1;
				sn >>= 1;
			}
		} else
			aud_node_hash(r, proof[i], r);
		fn >>= 1;
		sn >>= 1;
	}
	if (sn != 0 || memcmp(r, root, AUD_HASH_LEN) != 0)
		goto bad;
	return 0;
bad:
	errno = EBADMSG;
	return -1;
}

/* RFC 9162 §2.1.4.2 */
int
aud_consistency_verify(uint64_t m, uint64_t size,
    const uint8_t root_m[AUD_HASH_LEN], const uint8_t root_n[AUD_HASH_LEN],
    const uint8_t proof[][AUD_HASH_LEN], size_t n)
{
	uint8_t fr[AUD_HASH_LEN], sr[AUD_HASH_LEN];
	const uint8_t *c;
	uint64_t fn, sn;
	size_t i, start;

	if (m > size || n > MAXPROOF)
		goto bad;
	if (m == size)
		return (n == 0 && memcmp(root_m, root_n, AUD_HASH_LEN) == 0) ?
		    0 : (errno = EBADMSG, -1);
	if (m == 0)
		return n == 0 ? 0 : (errno = EBADMSG, -1);
	if (n == 0)
		goto bad;
	/* A power-of-two old tree is itself a node of the new one. */
	if ((m & (m - 1)) == 0) {
		c = root_m;
		start = 0;
	} else {
		c = proof[0];
		start = 1;
	}
	fn = m - 1;
	sn = size - 1;
	while (fn & 1) {
		fn >>= 1;
		sn >>= 1;
	}
	memcpy(fr, c, AUD_HASH_LEN);
	memcpy(sr, c, AUD_HASH_LEN);
	for (i = start; i < n; i++) {
		if (sn == 0)
			goto bad;
		if ((fn & 1) || fn == sn) {
			aud_node_hash(proof[i], fr, fr);
			aud_node_hash(proof[i], sr, sr);
			while (!(fn & 1) && fn != 0) {
				fn >>= 1;
				sn >>= 1;
			}
		} else
			aud_node_hash(sr, proof[i], sr);
		fn >>= 1;
		sn >>= 1;
	}
	if (sn != 0 || memcmp(fr, root_m, AUD_HASH_LEN) != 0 ||
	    memcmp(sr, root_n, AUD_HASH_LEN) != 0)
		goto bad;
	return 0;
bad:
	errno = EBADMSG;
	return -1;
}
