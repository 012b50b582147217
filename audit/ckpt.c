/*
 * ckpt: Ed25519 keys and C2SP signed notes. A checkpoint ("origin\nsize\n
 * base64(root)\n" signed as a note, c2sp.org/tlog-checkpoint) is the one
 * thing that leaves the host and pins the log; it must be byte-exact so that
 * any C2SP verifier (Go's sumdb/note, witnesses) reads what we write, and key
 * IDs and vkeys follow c2sp.org/signed-note so reviewers can pin our key.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "audit/audit.h"
#include "audit/priv.h"

#define SIGTYPE_ED25519	0x01
#define MAXSIGS		16
static const char emdash[] = "\xe2\x80\x94";

struct aud_key {
	char		*name;
	EVP_PKEY	*pkey;
	int		 priv;
	uint8_t		 pub[32];
	uint32_t	 id;
};

/* ---- base64 (RFC 4648 §4, strict: padding required, no whitespace) ---- */

size_t
aud_b64_encode(const uint8_t *in, size_t n, char *out)
{
	return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

static int
b64val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

ssize_t
aud_b64_decode(const char *in, size_t n, uint8_t *out, size_t outcap)
{
	size_t i, o = 0, pad = 0;
	int v[4], j;

	if (n % 4 != 0)
		return -1;
	for (i = 0; i < n; i += 4) {
		for (j = 0; j < 4; j++) {
			if (in[i + j] == '=' && i + 4 == n && j >= 2) {
				v[j] = 0;
				pad++;
				continue;
			}
			if (pad > 0 || (v[j] = b64val(in[i + j])) < 0)
				return -1;
		}
		if (pad == 1 && in[i + 2] == '=')
			return -1;
		if (o + 3 - pad > outcap)
			return -1;
		out[o++] = (uint8_t)(v[0] << 2 | v[1] >> 4);
		if (pad < 2)
			out[o++] = (uint8_t)((v[1] & 15) << 4 | v[2] >> 2);
		if (pad < 1)
			out[o++] = (uint8_t)((v[2] & 3) << 6 | v[3]);
		/* Non-zero bits hidden under padding make two encodings of
		 * the same bytes; refuse them. */
		if ((pad == 2 && (v[1] & 15)) || (pad == 1 && (v[2] & 3)))
			return -1;
	}
	return (ssize_t)o;
}

/* ---- keys ---- */

uint32_t
aud_keyid(const char *name, const uint8_t pub[32])
{
	uint8_t h[AUD_HASH_LEN], *buf;
	size_t nl = strlen(name);

	if ((buf = malloc(nl + 2 + 32)) == NULL)
		return 0;
	memcpy(buf, name, nl);
	buf[nl] = '\n';
	buf[nl + 1] = SIGTYPE_ED25519;
	memcpy(buf + nl + 2, pub, 32);
	aud_sha256(buf, nl + 34, h);
	free(buf);
	return (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
	    (uint32_t)h[2] << 8 | h[3];
}

static int
name_ok(const char *name)
{
	const unsigned char *p;

	if (name == NULL || *name == '\0' || strlen(name) > 255)
		return 0;
	for (p = (const unsigned char *)name; *p; p++)
		if (*p <= 0x20 || *p == '+' || *p == 0x7f)
			return 0;
	/* U+2014 is the signature line marker; keep it out of names too. */
	return strstr(name, emdash) == NULL;
}

static struct aud_key *
key_wrap(const char *name, EVP_PKEY *pk, int priv, char *err, size_t errlen)
{
	struct aud_key *k;
	size_t pl = 32;

	if (!name_ok(name)) {
		aud_seterr(err, errlen, "bad key name (empty, space or '+')");
		EVP_PKEY_free(pk);
		errno = EINVAL;
		return NULL;
	}
	if (EVP_PKEY_get_base_id(pk) != EVP_PKEY_ED25519) {
		aud_seterr(err, errlen, "not an Ed25519 key");
		EVP_PKEY_free(pk);
		errno = EINVAL;
		return NULL;
	}
	if ((k = calloc(1, sizeof(*k))) == NULL ||
	    (k->name = strdup(name)) == NULL) {
		free(k);
		EVP_PKEY_free(pk);
		aud_seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	k->pkey = pk;
	k->priv = priv;
	if (EVP_PKEY_get_raw_public_key(pk, k->pub, &pl) != 1 || pl != 32) {
		aud_seterr(err, errlen, "cannot read the public key");
		aud_key_free(k);
		errno = EINVAL;
		return NULL;
	}
	k->id = aud_keyid(name, k->pub);
	return k;
}

struct aud_key *
aud_key_new(const char *name, char *err, size_t errlen)
{
	EVP_PKEY *pk = NULL;
	EVP_PKEY_CTX *c;

	if ((c = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL)) == NULL ||
	    EVP_PKEY_keygen_init(c) != 1 || EVP_PKEY_keygen(c, &pk) != 1) {
		EVP_PKEY_CTX_free(c);
		aud_seterr(err, errlen, "Ed25519 key generation failed");
		errno = EIO;
		return NULL;
	}
	EVP_PKEY_CTX_free(c);
	return key_wrap(name, pk, 1, err, errlen);
}

struct aud_key *
aud_key_from_seed(const char *name, const uint8_t seed[32], char *err,
    size_t errlen)
{
	EVP_PKEY *pk;

	if ((pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed,
	    32)) == NULL) {
		aud_seterr(err, errlen, "bad Ed25519 seed");
		errno = EINVAL;
		return NULL;
	}
	return key_wrap(name, pk, 1, err, errlen);
}

/* OpenSSL's password callback: with none given it would prompt on the
 * terminal, and a daemon must never wait for a person. An encrypted key is
 * refused instead, by name. */
static int
no_password(char *buf, int size, int rwflag, void *arg)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	*(int *)arg = 1;
	return -1;
}

struct aud_key *
aud_key_load(const char *path, const char *name, char *err, size_t errlen)
{
	EVP_PKEY *pk;
	struct stat sb;
	FILE *f;
	int asked = 0, fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		aud_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	/* Whoever else can read the key can sign a rewritten log, and
	 * whoever owns it can make it readable: refuse both, on the file
	 * actually opened. */
	if (fstat(fd, &sb) == -1) {
		aud_seterr(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
	    (sb.st_mode & 077) != 0) {
		if (sb.st_uid != geteuid())
			aud_seterr(err, errlen, "%s: the audit key must be "
			    "owned by uid %ld (it is owned by uid %ld)", path,
			    (long)geteuid(), (long)sb.st_uid);
		else
			aud_seterr(err, errlen, "%s: the audit key must be a "
			    "regular file readable by its owner only (mode "
			    "0600, not %04o)", path,
			    (unsigned)(sb.st_mode & 07777));
		close(fd);
		errno = EACCES;
		return NULL;
	}
	if ((f = fdopen(fd, "r")) == NULL) {
		aud_seterr(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	pk = PEM_read_PrivateKey(f, NULL, no_password, &asked);
	fclose(f);
	if (pk == NULL && asked) {
		aud_seterr(err, errlen, "%s: the key is encrypted; the audit "
		    "key must be an unencrypted PKCS#8 file (mode 0600)", path);
		errno = EINVAL;
		return NULL;
	}
	if (pk == NULL) {
		aud_seterr(err, errlen, "%s: not a PEM private key", path);
		errno = EINVAL;
		return NULL;
	}
	return key_wrap(name, pk, 1, err, errlen);
}

struct aud_key *
aud_key_from_vkey(const char *vkey, char *err, size_t errlen)
{
	const char *p1, *p2;
	char name[256], hex[9], *end;
	uint8_t raw[64];
	unsigned long id;
	ssize_t n;
	EVP_PKEY *pk;
	struct aud_key *k;

	/* The base64 part may itself hold '+': split at the first two. */
	if (vkey == NULL || (p1 = strchr(vkey, '+')) == NULL ||
	    (p2 = strchr(p1 + 1, '+')) == NULL || p2 - p1 != 9 ||
	    (size_t)(p1 - vkey) >= sizeof(name) || p1 == vkey)
		goto bad;
	memcpy(name, vkey, (size_t)(p1 - vkey));
	name[p1 - vkey] = '\0';
	memcpy(hex, p1 + 1, 8);
	hex[8] = '\0';
	if (strspn(hex, "0123456789abcdef") != 8)
		goto bad;
	id = strtoul(hex, &end, 16);
	n = aud_b64_decode(p2 + 1, strlen(p2 + 1), raw, sizeof(raw));
	if (n != 33 || raw[0] != SIGTYPE_ED25519)
		goto bad;
	if ((pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw + 1,
	    32)) == NULL)
		goto bad;
	if ((k = key_wrap(name, pk, 0, err, errlen)) == NULL)
		return NULL;
	if (k->id != (uint32_t)id) {
		aud_seterr(err, errlen, "vkey: key ID does not match name and "
		    "key");
		aud_key_free(k);
		errno = EINVAL;
		return NULL;
	}
	return k;
bad:
	aud_seterr(err, errlen, "malformed vkey (want name+hexid+base64)");
	errno = EINVAL;
	return NULL;
}

void
aud_key_free(struct aud_key *k)
{
	if (k == NULL)
		return;
	EVP_PKEY_free(k->pkey);
	free(k->name);
	OPENSSL_cleanse(k, sizeof(*k));
	free(k);
}

int
aud_key_save(const struct aud_key *k, const char *path, char *err,
    size_t errlen)
{
	FILE *f;
	int fd, ok;

	if (!k->priv) {
		aud_seterr(err, errlen, "no private key to save");
		errno = EINVAL;
		return -1;
	}
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) ==
	    -1) {
		aud_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if ((f = fdopen(fd, "w")) == NULL) {
		close(fd);
		aud_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	ok = PEM_write_PrivateKey(f, k->pkey, NULL, NULL, 0, NULL, NULL) == 1;
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		ok = 0;
	if (fclose(f) != 0)
		ok = 0;
	if (!ok) {
		aud_seterr(err, errlen, "%s: cannot write the key", path);
		unlink(path);
		errno = EIO;
		return -1;
	}
	return 0;
}

int
aud_key_vkey(const struct aud_key *k, char *buf, size_t len)
{
	uint8_t raw[33];
	char b64[64];
	int n;

	raw[0] = SIGTYPE_ED25519;
	memcpy(raw + 1, k->pub, 32);
	aud_b64_encode(raw, 33, b64);
	n = snprintf(buf, len, "%s+%08x+%s", k->name, k->id, b64);
	if (n < 0 || (size_t)n >= len) {
		errno = ERANGE;
		return -1;
	}
	return 0;
}

const char *
aud_key_name(const struct aud_key *k)
{
	return k->name;
}

uint32_t
aud_key_id(const struct aud_key *k)
{
	return k->id;
}

/* ---- notes ---- */

static int
text_ok(const char *t, size_t n)
{
	size_t i;

	if (n == 0 || t[n - 1] != '\n')
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)t[i] < 0x20 && t[i] != '\n')
			return 0;
	return 1;
}

char *
aud_note_sign(const struct aud_key *k, const char *text, char *err,
    size_t errlen)
{
	EVP_MD_CTX *c;
	uint8_t sig[4 + 64];
	size_t sl = 64, tl = strlen(text), ol;
	char b64[128], *out;

	if (!k->priv || !text_ok(text, tl)) {
		aud_seterr(err, errlen, "cannot sign: no private key or bad "
		    "text");
		errno = EINVAL;
		return NULL;
	}
	sig[0] = (uint8_t)(k->id >> 24);
	sig[1] = (uint8_t)(k->id >> 16);
	sig[2] = (uint8_t)(k->id >> 8);
	sig[3] = (uint8_t)k->id;
	if ((c = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestSignInit(c, NULL, NULL, NULL, k->pkey) != 1 ||
	    EVP_DigestSign(c, sig + 4, &sl, (const uint8_t *)text, tl) != 1 ||
	    sl != 64) {
		EVP_MD_CTX_free(c);
		aud_seterr(err, errlen, "Ed25519 signing failed");
		errno = EIO;
		return NULL;
	}
	EVP_MD_CTX_free(c);
	aud_b64_encode(sig, sizeof(sig), b64);
	ol = tl + 1 + 3 + 1 + strlen(k->name) + 1 + strlen(b64) + 2;
	if ((out = malloc(ol)) == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	snprintf(out, ol, "%s\n%s %s %s\n", text, emdash, k->name, b64);
	return out;
}

char *
aud_ckpt_body(const char *origin, uint64_t size,
    const uint8_t root[AUD_HASH_LEN])
{
	char b64[64], *out;
	size_t ol;

	aud_b64_encode(root, AUD_HASH_LEN, b64);
	ol = strlen(origin) + 24 + strlen(b64) + 4;
	if ((out = malloc(ol)) == NULL)
		return NULL;
	snprintf(out, ol, "%s\n%llu\n%s\n", origin, (unsigned long long)size,
	    b64);
	return out;
}

static int
sig_verify(const struct aud_key *k, const char *text, size_t tl,
    const uint8_t *sig, size_t sl)
{
	EVP_MD_CTX *c;
	int ok;

	if (sl != 64)
		return 0;
	if ((c = EVP_MD_CTX_new()) == NULL)
		return 0;
	ok = EVP_DigestVerifyInit(c, NULL, NULL, NULL, k->pkey) == 1 &&
	    EVP_DigestVerify(c, sig, sl, (const uint8_t *)text, tl) == 1;
	EVP_MD_CTX_free(c);
	return ok;
}

/* Parses one decimal u64 without sign, leading zeros or overflow. */
static int
parse_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

int
aud_ckpt_parse(const char *note, size_t len, struct aud_key *const *keys,
    size_t nkeys, struct aud_ckpt *out, char *err, size_t errlen)
{
	const char *p, *e, *l1, *l2, *l3, *sp;
	size_t tl, i, nsig = 0, nl;
	uint8_t sig[4 + 4096];
	ssize_t sl;
	uint32_t id;

	memset(out, 0, sizeof(*out));
	if (note == NULL || len == 0 || len > 64 * 1024 ||
	    memchr(note, '\0', len) != NULL)
		goto malformed;
	for (i = 0; i < len; i++)
		if ((unsigned char)note[i] < 0x20 && note[i] != '\n')
			goto malformed;
	/* The text ends at the last blank line. */
	for (p = NULL, i = len; i >= 2; i--)
		if (note[i - 1] == '\n' && note[i - 2] == '\n') {
			p = note + i - 1;
			break;
		}
	if (p == NULL)
		goto malformed;
	tl = (size_t)(p - note);
	/* Exactly three body lines: origin, size, root. */
	l1 = note;
	if ((l2 = memchr(l1, '\n', tl)) == NULL)
		goto malformed;
	l2++;
	if ((l3 = memchr(l2, '\n', tl - (size_t)(l2 - note))) == NULL)
		goto malformed;
	l3++;
	if ((e = memchr(l3, '\n', tl - (size_t)(l3 - note))) == NULL ||
	    (size_t)(e + 1 - note) != tl) {
		aud_seterr(err, errlen, "checkpoint must have exactly three "
		    "lines");
		errno = EINVAL;
		return -1;
	}
	nl = (size_t)(l2 - 1 - l1);
	if (nl == 0 || nl >= sizeof(out->origin))
		goto malformed;
	memcpy(out->origin, l1, nl);
	out->origin[nl] = '\0';
	if (parse_u64(l2, (size_t)(l3 - 1 - l2), &out->size) == -1)
		goto malformed;
	if (aud_b64_decode(l3, (size_t)(e - l3), out->root, AUD_HASH_LEN) !=
	    AUD_HASH_LEN)
		goto malformed;
	/* Signature lines. */
	p++;
	if (p >= note + len)
		goto malformed;
	while (p < note + len) {
		if ((e = memchr(p, '\n', (size_t)(note + len - p))) == NULL)
			goto malformed;
		if (++nsig > MAXSIGS) {
			aud_seterr(err, errlen, "more than %d signatures",
			    MAXSIGS);
			errno = EINVAL;
			return -1;
		}
		if (e - p < 5 || memcmp(p, emdash, 3) != 0 || p[3] != ' ')
			goto malformed;
		sp = memchr(p + 4, ' ', (size_t)(e - p - 4));
		if (sp == NULL || sp == p + 4)
			goto malformed;
		sl = aud_b64_decode(sp + 1, (size_t)(e - sp - 1), sig,
		    sizeof(sig));
		if (sl < 5)
			goto malformed;
		id = (uint32_t)sig[0] << 24 | (uint32_t)sig[1] << 16 |
		    (uint32_t)sig[2] << 8 | sig[3];
		for (i = 0; i < nkeys; i++) {
			const struct aud_key *k = keys[i];

			if (k == NULL || k->id != id ||
			    strlen(k->name) != (size_t)(sp - p - 4) ||
			    memcmp(k->name, p + 4, (size_t)(sp - p - 4)) != 0)
				continue;
			if (!sig_verify(k, note, tl, sig + 4, (size_t)sl - 4)) {
				aud_seterr(err, errlen, "bad signature by "
				    "%s+%08x", k->name, id);
				errno = EBADMSG;
				return -1;
			}
			if (out->nverified < MAXSIGS)
				out->signer_ids[out->nverified] = id;
			out->nverified++;
		}
		p = e + 1;
	}
	if (nkeys > 0 && out->nverified == 0) {
		aud_seterr(err, errlen, "no signature by a known key");
		errno = EPERM;
		return -1;
	}
	return 0;
malformed:
	aud_seterr(err, errlen, "malformed checkpoint note");
	errno = EINVAL;
	return -1;
}
