/*
 * check_audit_merkle: RFC 6962 hashing against the published vectors
 * (transparency-dev/merkle testonly/constants.go: leaves, every perfect node
 * and the roots of sizes 0-8), and inclusion and consistency proofs made and
 * checked for every index and size pair up to 64, plus their refusal of
 * altered hashes, indexes and sizes.
 */
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <openssl/evp.h>

#include "audit/audit.h"

static const char *const leaves_hex[] = {
	"", "00", "10", "2021", "3031", "40414243", "5051525354555657",
	"606162636465666768696a6b6c6d6e6f",
};
static const char *const roots_hex[] = {
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
	"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
	"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
	"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
	"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
	"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
	"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
};
/* NodeHashes(): level 1, 2, 3 perfect subtrees of the 8-leaf tree. */
static const char *const nodes_hex[][4] = {
	{ "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
	  "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
	  "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
	  "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0" },
	{ "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	  "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4" },
	{ "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328" },
};

static size_t
unhex(const char *h, uint8_t *out)
{
	size_t i, n = strlen(h) / 2;
	unsigned v;

	for (i = 0; i < n; i++) {
		sscanf(h + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
	return n;
}

struct arr {
	uint8_t	(*leaf)[AUD_HASH_LEN];
	uint64_t n;
};

/* Subtree roots recomputed from the leaf array: an independent source. */
static int
arr_fn(void *arg, unsigned level, uint64_t idx, uint8_t out[AUD_HASH_LEN])
{
	struct arr *a = arg;
	uint8_t l[AUD_HASH_LEN], r[AUD_HASH_LEN];

	if (level > 63 || ((idx + 1) << level) > a->n)
		return -1;
	if (level == 0) {
		memcpy(out, a->leaf[idx], AUD_HASH_LEN);
		return 0;
	}
	if (arr_fn(a, level - 1, 2 * idx, l) == -1 ||
	    arr_fn(a, level - 1, 2 * idx + 1, r) == -1)
		return -1;
	aud_node_hash(l, r, out);
	return 0;
}

struct seen {
	int	 n;
	unsigned level[16];
	uint64_t idx[16];
	uint8_t	 h[16][AUD_HASH_LEN];
};

static void
collect(void *arg, unsigned level, uint64_t idx, const uint8_t h[AUD_HASH_LEN])
{
	struct seen *s = arg;

	ck_assert_int_lt(s->n, 16);
	s->level[s->n] = level;
	s->idx[s->n] = idx;
	memcpy(s->h[s->n], h, AUD_HASH_LEN);
	s->n++;
}

START_TEST(test_vector_roots)
{
	struct aud_tree *t = aud_tree_new();
	uint8_t buf[32], leaf[AUD_HASH_LEN], root[AUD_HASH_LEN];
	uint8_t want[AUD_HASH_LEN];
	struct seen s = { 0 };
	size_t i, n;
	int k;

	ck_assert_ptr_nonnull(t);
	aud_tree_root(t, root);
	unhex(roots_hex[0], want);
	ck_assert(memcmp(root, want, AUD_HASH_LEN) == 0);
	for (i = 0; i < 8; i++) {
		n = unhex(leaves_hex[i], buf);
		aud_leaf_hash(buf, n, leaf);
		ck_assert_int_eq(aud_tree_append(t, leaf, collect, &s), 0);
		aud_tree_root(t, root);
		unhex(roots_hex[i + 1], want);
		ck_assert_msg(memcmp(root, want, AUD_HASH_LEN) == 0,
		    "root of size %zu", i + 1);
	}
	/* Every perfect node of levels 1..3, in the published order. */
	ck_assert_int_eq(s.n, 7);
	for (k = 0; k < s.n; k++) {
		unhex(nodes_hex[s.level[k] - 1][s.idx[k]], want);
		ck_assert_msg(memcmp(s.h[k], want, AUD_HASH_LEN) == 0,
		    "node (%u,%llu)", s.level[k], (unsigned long long)s.idx[k]);
	}
	aud_tree_free(t);
	aud_tree_free(NULL);
}
END_TEST

static struct arr
make_leaves(uint64_t n)
{
	struct arr a;
	uint64_t i;
	uint8_t b[8];

	a.n = n;
	a.leaf = calloc(n ? n : 1, AUD_HASH_LEN);
	for (i = 0; i < n; i++) {
		memcpy(b, &i, sizeof(b));
		aud_leaf_hash(b, sizeof(b), a.leaf[i]);
	}
	return a;
}

START_TEST(test_load_and_root_at)
{
	struct arr a = make_leaves(64);
	struct aud_tree *t = aud_tree_new(), *u = aud_tree_new();
	uint8_t r1[AUD_HASH_LEN], r2[AUD_HASH_LEN], r3[AUD_HASH_LEN];
	uint64_t n;

	for (n = 0; n <= 64; n++) {
		if (n > 0)
			aud_tree_append(t, a.leaf[n - 1], NULL, NULL);
		ck_assert_int_eq(aud_tree_load(u, n, arr_fn, &a), 0);
		ck_assert_uint_eq(aud_tree_size(u), n);
		aud_tree_root(t, r1);
		aud_tree_root(u, r2);
		ck_assert_int_eq(aud_root_at(n, arr_fn, &a, r3), 0);
		ck_assert(memcmp(r1, r2, AUD_HASH_LEN) == 0);
		ck_assert(memcmp(r1, r3, AUD_HASH_LEN) == 0);
	}
	/* A source that lacks a node makes loading fail, not guess. */
	a.n = 10;
	ck_assert_int_eq(aud_tree_load(u, 12, arr_fn, &a), -1);
	aud_tree_free(t);
	aud_tree_free(u);
	free(a.leaf);
}
END_TEST

START_TEST(test_inclusion_all)
{
	struct arr a = make_leaves(64);
	uint8_t proof[64][AUD_HASH_LEN], root[AUD_HASH_LEN];
	uint64_t n, i;
	size_t np;

	for (n = 1; n <= 64; n++) {
		a.n = n;
		ck_assert_int_eq(aud_root_at(n, arr_fn, &a, root), 0);
		for (i = 0; i < n; i++) {
			ck_assert_int_eq(aud_inclusion_proof(i, n, arr_fn, &a,
			    proof, &np), 0);
			ck_assert_int_eq(aud_inclusion_verify(i, n, a.leaf[i],
			    (const uint8_t (*)[AUD_HASH_LEN])proof, np, root), 0);
			/* The wrong leaf, index or size must not verify. */
			ck_assert_int_eq(aud_inclusion_verify(i, n,
			    a.leaf[(i + 1) % 64],
			    (const uint8_t (*)[AUD_HASH_LEN])proof, np, root), -1);
			if (n > 1)
				ck_assert_int_eq(aud_inclusion_verify((i + 1) % n,
				    n, a.leaf[i],
				    (const uint8_t (*)[AUD_HASH_LEN])proof, np,
				    root), -1);
			if (np > 0) {
				proof[np - 1][0] ^= 1;
				ck_assert_int_eq(aud_inclusion_verify(i, n,
				    a.leaf[i],
				    (const uint8_t (*)[AUD_HASH_LEN])proof, np,
				    root), -1);
				/* A truncated proof fails too. */
				proof[np - 1][0] ^= 1;
				ck_assert_int_eq(aud_inclusion_verify(i, n,
				    a.leaf[i],
				    (const uint8_t (*)[AUD_HASH_LEN])proof,
				    np - 1, root), -1);
			}
		}
	}
	ck_assert_int_eq(aud_inclusion_proof(5, 5, arr_fn, &a, proof, &np), -1);
	free(a.leaf);
}
END_TEST

START_TEST(test_consistency_all)
{
	struct arr a = make_leaves(64);
	uint8_t proof[64][AUD_HASH_LEN], rm[AUD_HASH_LEN], rn[AUD_HASH_LEN];
	uint8_t other[AUD_HASH_LEN];
	uint64_t m, n;
	size_t np;

	for (n = 1; n <= 64; n++) {
		ck_assert_int_eq(aud_root_at(n, arr_fn, &a, rn), 0);
		for (m = 1; m <= n; m++) {
			ck_assert_int_eq(aud_root_at(m, arr_fn, &a, rm), 0);
			ck_assert_int_eq(aud_consistency_proof(m, n, arr_fn, &a,
			    proof, &np), 0);
			ck_assert_msg(aud_consistency_verify(m, n, rm, rn,
			    (const uint8_t (*)[AUD_HASH_LEN])proof, np) == 0,
			    "consistency %llu -> %llu", (unsigned long long)m,
			    (unsigned long long)n);
			if (m == n)
				continue;
			/* A forked old root must not be consistent. */
			memcpy(other, rm, AUD_HASH_LEN);
			other[5] ^= 0x40;
			ck_assert_int_eq(aud_consistency_verify(m, n, other, rn,
			    (const uint8_t (*)[AUD_HASH_LEN])proof, np), -1);
			ck_assert_int_eq(aud_consistency_verify(m, n, rm, other,
			    (const uint8_t (*)[AUD_HASH_LEN])proof, np), -1);
			proof[0][0] ^= 1;
			ck_assert_int_eq(aud_consistency_verify(m, n, rm, rn,
			    (const uint8_t (*)[AUD_HASH_LEN])proof, np), -1);
		}
	}
	ck_assert_int_eq(aud_consistency_proof(9, 8, arr_fn, &a, proof, &np),
	    -1);
	free(a.leaf);
}
END_TEST

/* SHA-256 over the concatenation, through the streaming EVP interface. */
static void
evp_sha(const uint8_t *a, size_t an, const uint8_t *b, size_t bn,
    const uint8_t *c, size_t cn, uint8_t out[AUD_HASH_LEN])
{
	EVP_MD_CTX *x = EVP_MD_CTX_new();
	unsigned int n = 0;

	ck_assert_ptr_nonnull(x);
	ck_assert_int_eq(EVP_DigestInit_ex(x, EVP_sha256(), NULL), 1);
	EVP_DigestUpdate(x, a, an);
	EVP_DigestUpdate(x, b, bn);
	EVP_DigestUpdate(x, c, cn);
	ck_assert_int_eq(EVP_DigestFinal_ex(x, out, &n), 1);
	ck_assert_uint_eq(n, AUD_HASH_LEN);
	EVP_MD_CTX_free(x);
}

/*
 * The leaf hash of a 32-byte record hash and the node hash pad their single
 * or double block by hand: they must equal the streaming computation for
 * every byte pattern (zeros, ones, and bytes that look like padding), also
 * when the output overwrites an input, as the tree's fold does.
 */
START_TEST(test_fixed_size_hashes)
{
	static const uint8_t fill[] = { 0x00, 0xff, 0x80, 0x01 };
	uint8_t l[AUD_HASH_LEN], r[AUD_HASH_LEN], got[AUD_HASH_LEN];
	uint8_t want[AUD_HASH_LEN], z = 0, one = 1;
	size_t i;

	for (i = 0; i < AUD_HASH_LEN; i++) {
		l[i] = _i < 4 ? fill[_i] : (uint8_t)(i * 37 + (unsigned)_i);
		r[i] = _i < 4 ? (uint8_t)~fill[_i] : (uint8_t)(i * 11 + 5);
	}
	evp_sha(&z, 1, l, AUD_HASH_LEN, NULL, 0, want);
	aud_leaf_hash(l, AUD_HASH_LEN, got);
	ck_assert_mem_eq(got, want, AUD_HASH_LEN);
	/* Not 32 bytes: the streaming path, same definition. */
	evp_sha(&z, 1, l, AUD_HASH_LEN - 1, NULL, 0, want);
	aud_leaf_hash(l, AUD_HASH_LEN - 1, got);
	ck_assert_mem_eq(got, want, AUD_HASH_LEN);
	evp_sha(&one, 1, l, AUD_HASH_LEN, r, AUD_HASH_LEN, want);
	aud_node_hash(l, r, got);
	ck_assert_mem_eq(got, want, AUD_HASH_LEN);
	memcpy(got, l, AUD_HASH_LEN);
	aud_node_hash(got, r, got);
	ck_assert_mem_eq(got, want, AUD_HASH_LEN);
	memcpy(got, r, AUD_HASH_LEN);
	aud_node_hash(l, got, got);
	ck_assert_mem_eq(got, want, AUD_HASH_LEN);
	/* The order of the children matters. */
	aud_node_hash(r, l, got);
	ck_assert_mem_ne(got, want, AUD_HASH_LEN);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("audit_merkle");
	TCase *core = tcase_create("Core"), *lim = tcase_create("Limits");
	SRunner *sr;
	int nf;

	tcase_add_test(core, test_vector_roots);
	tcase_add_test(core, test_load_and_root_at);
	tcase_add_test(core, test_inclusion_all);
	tcase_add_test(core, test_consistency_all);
	tcase_add_loop_test(core, test_fixed_size_hashes, 0, 8);
	tcase_set_timeout(core, 120);
	suite_add_tcase(s, core);
	suite_add_tcase(s, lim);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
