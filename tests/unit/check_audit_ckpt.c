/*
 * check_audit_ckpt: keys and C2SP signed notes. The key ID and vkey are
 * checked against the published signed-note vectors (example.com/foo from
 * c2sp.org/signed-note, PeterNeumann from golang.org/x/mod/sumdb/note, whose
 * signature Ed25519 determinism lets us reproduce byte for byte); checkpoints
 * round-trip, and altered, extended, unsigned or malformed notes are refused.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "audit/audit.h"

#define GO_VKEY "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
#define GO_TEXT "If you think cryptography is the answer to your problem,\n" \
	"then you don't know what your problem is.\n"
#define GO_NOTE GO_TEXT "\n\xe2\x80\x94 PeterNeumann " \
	"x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
/* base64(0x01 || seed) of the Go signer key "PRIVATE+KEY+PeterNeumann+...". */
static const uint8_t go_seed[32] = {
	0x81, 0x0a, 0x14, 0x02, 0xd5, 0x14, 0x6c, 0x8d, 0x84, 0xf2, 0x44,
	0x33, 0x30, 0xf5, 0x40, 0x80, 0xeb, 0xf9, 0x8e, 0xe1, 0x7d, 0x9c,
	0x74, 0xf6, 0x25, 0x2f, 0xc5, 0xd5, 0xc7, 0x28, 0x31, 0x73,
};
#define FOO_VKEY "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"

START_TEST(test_published_vkeys)
{
	struct aud_key *k;
	char buf[256];

	k = aud_key_from_vkey(FOO_VKEY, NULL, 0);
	ck_assert_ptr_nonnull(k);
	ck_assert_uint_eq(aud_key_id(k), 0x530d903a);
	ck_assert_str_eq(aud_key_name(k), "example.com/foo");
	ck_assert_int_eq(aud_key_vkey(k, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, FOO_VKEY);
	aud_key_free(k);
	k = aud_key_from_vkey(GO_VKEY, NULL, 0);
	ck_assert_ptr_nonnull(k);
	ck_assert_uint_eq(aud_key_id(k), 0xc74f20a3);
	aud_key_free(k);
	aud_key_free(NULL);
}
END_TEST

START_TEST(test_go_signature_exact)
{
	struct aud_key *k;
	char buf[256], *note;

	k = aud_key_from_seed("PeterNeumann", go_seed, NULL, 0);
	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(aud_key_vkey(k, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, GO_VKEY);
	note = aud_note_sign(k, GO_TEXT, NULL, 0);
	ck_assert_ptr_nonnull(note);
	ck_assert_str_eq(note, GO_NOTE);
	free(note);
	/* Text without a final newline is not a note. */
	ck_assert_ptr_null(aud_note_sign(k, "no newline", NULL, 0));
	aud_key_free(k);
}
END_TEST

START_TEST(test_vkey_mangled)
{
	char v[] = GO_VKEY, w[sizeof(v)];
	size_t i, j, n = strlen(v);
	struct aud_key *k;

	/* Every substring but the whole, and every single-byte change. */
	for (i = 0; i <= n; i++)
		for (j = i + 1; j <= n; j++) {
			if (i == 0 && j == n)
				continue;
			memcpy(w, v + i, j - i);
			w[j - i] = '\0';
			k = aud_key_from_vkey(w, NULL, 0);
			ck_assert_msg(k == NULL, "accepted %s", w);
		}
	for (i = 0; i < n; i++) {
		memcpy(w, v, sizeof(v));
		w[i]++;
		k = aud_key_from_vkey(w, NULL, 0);
		ck_assert_msg(k == NULL, "accepted %s", w);
	}
	ck_assert_ptr_null(aud_key_from_vkey(NULL, NULL, 0));
	ck_assert_ptr_null(aud_key_from_vkey("a b+c74f20a3+ARpc", NULL, 0));
}
END_TEST

static char *
make_ckpt(struct aud_key *k, uint64_t size)
{
	uint8_t root[AUD_HASH_LEN];
	char *body, *note;

	memset(root, (int)size, sizeof(root));
	body = aud_ckpt_body(aud_key_name(k), size, root);
	note = aud_note_sign(k, body, NULL, 0);
	free(body);
	return note;
}

START_TEST(test_ckpt_roundtrip)
{
	struct aud_key *k = aud_key_new("audit.test.example/seg/0", NULL, 0);
	struct aud_key *other = aud_key_new("audit.test.example/seg/0", NULL, 0);
	struct aud_key *ks[2];
	struct aud_ckpt ck;
	char *note, err[128];
	uint8_t root[AUD_HASH_LEN];

	ck_assert_ptr_nonnull(k);
	note = make_ckpt(k, 42);
	ck_assert_ptr_nonnull(note);
	ck_assert_int_eq(strncmp(note, "audit.test.example/seg/0\n42\n", 28), 0);
	ks[0] = k;
	ck_assert_int_eq(aud_ckpt_parse(note, strlen(note), ks, 1, &ck, err,
	    sizeof(err)), 0);
	ck_assert_str_eq(ck.origin, "audit.test.example/seg/0");
	ck_assert_uint_eq(ck.size, 42);
	memset(root, 42, sizeof(root));
	ck_assert(memcmp(ck.root, root, AUD_HASH_LEN) == 0);
	ck_assert_int_eq(ck.nverified, 1);
	/* Unknown keys are ignored; with no known signature: refused. */
	ks[0] = other;
	ck_assert_int_eq(aud_ckpt_parse(note, strlen(note), ks, 1, &ck, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, EPERM);
	ks[1] = k;
	ck_assert_int_eq(aud_ckpt_parse(note, strlen(note), ks, 2, &ck, err,
	    sizeof(err)), 0);
	/* A changed size breaks the known key's signature. */
	note[strlen("audit.test.example/seg/0\n")] = '3';
	ks[0] = k;
	ck_assert_int_eq(aud_ckpt_parse(note, strlen(note), ks, 1, &ck, err,
	    sizeof(err)), -1);
	ck_assert_int_eq(errno, EBADMSG);
	free(note);
	aud_key_free(k);
	aud_key_free(other);
}
END_TEST

static const char *const bad_notes[] = {
	"",
	"o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",	/* no sigs */
	"o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n",
	"o\n01\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n\xe2\x80\x94 o AAAAAAAA\n",
	"o\n-1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n\xe2\x80\x94 o AAAAAAAA\n",
	"o\n1\nAAAA\n\n\xe2\x80\x94 o AAAAAAAA\n",		/* short root */
	"o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\next\n\n\xe2\x80\x94 o AAAAAAAA\n",
	"o\n1\n\n\xe2\x80\x94 o AAAAAAAA\n",
	"o\n99999999999999999999999\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n\xe2\x80\x94 o AAAAAAAA\n",
	"o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n- o AAAAAAAA\n",
	"o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n\xe2\x80\x94 o AAA\n",
	"o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n\xe2\x80\x94 o AAAAAAAA",
	"o\t\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n\xe2\x80\x94 o AAAAAAAA\n",
	"o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=\n\n\xe2\x80\x94 o AAAAAAAA\n",
};

START_TEST(test_ckpt_malformed)
{
	struct aud_ckpt ck;
	char err[128];

	ck_assert_int_eq(aud_ckpt_parse(bad_notes[_i], strlen(bad_notes[_i]),
	    NULL, 0, &ck, err, sizeof(err)), -1);
}
END_TEST

START_TEST(test_ckpt_too_many_sigs)
{
	char buf[4096];
	struct aud_ckpt ck;
	int i;

	strcpy(buf, "o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n");
	for (i = 0; i < 17; i++)
		strcat(buf, "\xe2\x80\x94 o AAAAAAAA\n");
	ck_assert_int_eq(aud_ckpt_parse(buf, strlen(buf), NULL, 0, &ck, NULL,
	    0), -1);
	/* Sixteen unknown signatures are fine (and verify nothing). */
	strcpy(buf, "o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n");
	for (i = 0; i < 16; i++)
		strcat(buf, "\xe2\x80\x94 o AAAAAAAA\n");
	ck_assert_int_eq(aud_ckpt_parse(buf, strlen(buf), NULL, 0, &ck, NULL,
	    0), 0);
	ck_assert_int_eq(ck.nverified, 0);
}
END_TEST

START_TEST(test_key_files)
{
	char dir[] = "/tmp/check_audit_ckpt.XXXXXX", path[128], v1[256], v2[256];
	struct aud_key *k, *l;
	struct stat sb;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/k.pem", dir);
	k = aud_key_new("audit.test.example", NULL, 0);
	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(aud_key_save(k, path, NULL, 0), 0);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	/* Never overwrite an existing key. */
	ck_assert_int_eq(aud_key_save(k, path, NULL, 0), -1);
	l = aud_key_load(path, "audit.test.example", NULL, 0);
	ck_assert_ptr_nonnull(l);
	aud_key_vkey(k, v1, sizeof(v1));
	aud_key_vkey(l, v2, sizeof(v2));
	ck_assert_str_eq(v1, v2);
	aud_key_free(l);
	/* Readable by the group or others, or owned by another uid: the
	 * key is refused, saying why, before it is read. */
	{
		char msg[512];

		ck_assert_int_eq(chmod(path, 0640), 0);
		ck_assert_ptr_null(aud_key_load(path, "x", msg, sizeof(msg)));
		ck_assert_msg(strstr(msg, "0640") != NULL, "%s", msg);
		ck_assert_int_eq(chmod(path, 0604), 0);
		ck_assert_ptr_null(aud_key_load(path, "x", NULL, 0));
		ck_assert_int_eq(chmod(path, 0600), 0);
		if (geteuid() == 0) {	/* only root can give a file away */
			ck_assert_int_eq(chown(path, 1, (gid_t)-1), 0);
			ck_assert_ptr_null(aud_key_load(path, "x", msg,
			    sizeof(msg)));
			ck_assert_msg(strstr(msg, "owned by") != NULL, "%s",
			    msg);
			ck_assert_int_eq(chown(path, 0, (gid_t)-1), 0);
		}
		ck_assert_ptr_nonnull(l = aud_key_load(path, "x", NULL, 0));
		aud_key_free(l);
	}
	unlink(path);
	/* Not a key: refused with a message. */
	f = fopen(path, "w");
	fputs("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n", f);
	fclose(f);
	ck_assert_ptr_null(aud_key_load(path, "x", NULL, 0));
	unlink(path);
	ck_assert_ptr_null(aud_key_load(path, "x", NULL, 0));
	/* An encrypted key is refused by name, never prompted for. */
	{
		EVP_PKEY *pk = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
		char msg[512];

		ck_assert_ptr_nonnull(pk);
		ck_assert_ptr_nonnull(f = fopen(path, "w"));
		ck_assert_int_eq(PEM_write_PKCS8PrivateKey(f, pk,
		    EVP_aes_256_cbc(), "secret", 6, NULL, NULL), 1);
		fclose(f);
		ck_assert_int_eq(chmod(path, 0600), 0);
		EVP_PKEY_free(pk);
		ck_assert_ptr_null(aud_key_load(path, "x", msg, sizeof(msg)));
		ck_assert_msg(strstr(msg, "encrypted") != NULL, "%s", msg);
		unlink(path);
	}
	/* Names with spaces or '+' cannot be key names. */
	ck_assert_ptr_null(aud_key_new("a+b", NULL, 0));
	ck_assert_ptr_null(aud_key_new("a b", NULL, 0));
	ck_assert_ptr_null(aud_key_new("", NULL, 0));
	aud_key_free(k);
	rmdir(dir);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("audit_ckpt");
	TCase *core = tcase_create("Core"), *lim = tcase_create("Limits");
	SRunner *sr;
	int nf;

	tcase_add_test(core, test_published_vkeys);
	tcase_add_test(core, test_go_signature_exact);
	tcase_add_test(core, test_ckpt_roundtrip);
	tcase_add_test(core, test_key_files);
	tcase_add_test(lim, test_vkey_mangled);
	tcase_add_loop_test(lim, test_ckpt_malformed, 0,
	    sizeof(bad_notes) / sizeof(bad_notes[0]));
	tcase_add_test(lim, test_ckpt_too_many_sigs);
	suite_add_tcase(s, core);
	suite_add_tcase(s, lim);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
