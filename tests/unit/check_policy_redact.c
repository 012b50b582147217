/*
 * check_policy_redact: what pol_redact takes out of tool results, and what
 * it must leave alone.
 *
 * The bridge runs every result through pol_redact before the sandbox sees
 * it, so a missed class leaks a credential and a sloppy match corrupts
 * data the agent relies on. The table pins each built-in class, the
 * custom patterns and the upstream credentials (raw, base64, URL-encoded)
 * with their exact output: matches at the buffer edges, overlapping and
 * adjacent matches, UTF-8 around matches, look-alikes that must survive.
 * The Limits case covers huge input, embedded NULs, invalid UTF-8, a
 * pattern that hits the match limit (the call fails: fail closed) and bad
 * arguments.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

#define P_ALL_TEXT							\
	"version: 1\n"							\
	"name: all\n"							\
	"mcp:\n"							\
	"  taint: {level: internal}\n"					\
	"  results:\n"							\
	"    max_bytes: 256KiB\n"					\
	"    redact: [aws_keys, private_keys, bearer_tokens, github_tokens,\n" \
	"             upstream_credentials]\n"				\
	"    redact_patterns: [\"(?i)secret-[a-z0-9]+\"]\n"

#define P_AWS_TEXT							\
	"version: 1\n"							\
	"name: aws-only\n"						\
	"mcp:\n"							\
	"  results:\n"							\
	"    redact: [aws_keys]\n"

#define P_NONE_TEXT	"version: 1\nname: none\n"

/* Catastrophic backtracking on purpose: the match limit must stop it. */
#define P_BAD_TEXT							\
	"version: 1\n"							\
	"name: bad\n"							\
	"mcp:\n"							\
	"  results:\n"							\
	"    redact: [bearer_tokens]\n"					\
	"    redact_patterns: [\"ok-[0-9]+\", \"(a|aa)+$\", \"q{0}\"]\n"

static const char *const secrets[] = {
	"s3cr3t-upstream-token-XYZ",
	"pa$$ w/rd:9?>>",
	"",			/* ignored, never matches everywhere */
	"ab",			/* short: raw form only */
	"qu\"ot\\e\tk\x01""ey-9",	/* JSON escapes it */
	"esc\x1b""key-7",	/* \u001b, or \u001B as jansson writes it */
	"p\xc3\xa4ssw\xc3\xb6rd-1",	/* json.dumps writes \u00e4 */
	"key\xf0\x9f\x98\x80-xyz",	/* ... and a surrogate pair */
	"del\x7f""key-3",	/* json.dumps writes \u007f */
	"ab'cd\"ef-12",		/* Python's repr writes \' */
	"pa%41ss-wd-9",		/* holds what a level undoes: %41 */
	"a&lt;b-secret",	/* ... and &lt; */
};
#define NSECRETS (sizeof(secrets) / sizeof(secrets[0]))

static struct pol_policy *
load(const char *name, const char *text)
{
	struct pol_errors	*e = pol_errors_new(10);
	struct pol_policy	*p;

	ck_assert_ptr_nonnull(e);
	p = pol_policy_load_buf(name, text, strlen(text), NULL, e);
	if (p == NULL && pol_errors_get(e, 0) != NULL)
		fprintf(stderr, "%s\n", pol_errors_get(e, 0));
	ck_assert_ptr_nonnull(p);
	pol_errors_free(e);
	return p;
}

#define AK	"AKIAIOSFODNN7EXAMPLE"
#define SK	"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define JWT	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl_-x"
#define GHP	"ghp_0123456789abcdefghijABCDEFGHIJ012345"
#define PEMB	"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAAB\n" \
		"-----END RSA PRIVATE KEY-----"
#define R_AK	"[REDACTED:aws_key]"
#define R_SK	"[REDACTED:aws_secret]"
#define R_PK	"[REDACTED:private_key]"
#define R_BT	"[REDACTED:bearer_token]"
#define R_JWT	"[REDACTED:jwt]"
#define R_GH	"[REDACTED:github_token]"
#define R_PAT	"[REDACTED:pattern]"
#define R_CR	"[REDACTED:credential]"

enum pol_which { W_ALL, W_AWS, W_NONE };

static const struct row {
	enum pol_which	 pol;
	const char	*in;
	const char	*want;
	unsigned	 count;
} rows[] = {
	/* nothing to do */
	{ W_ALL, "", "", 0 },
	{ W_ALL, "hello, world", "hello, world", 0 },
	{ W_NONE, "key " AK " Bearer abc", "key " AK " Bearer abc", 0 },
	/* aws_keys: ids */
	{ W_ALL, "key " AK " end", "key " R_AK " end", 1 },
	{ W_ALL, AK, R_AK, 1 },
	{ W_ALL, "ASIAY34FZKBOKMUTVV7A", R_AK, 1 },
	{ W_ALL, AK AK, R_AK R_AK, 2 },
	{ W_ALL, "id=" AK "\n" "id2=" AK, "id=" R_AK "\nid2=" R_AK, 2 },
	{ W_ALL, "AKIAIOSFODNN7EXAMPL", "AKIAIOSFODNN7EXAMPL", 0 },
	{ W_ALL, "akiaiosfodnn7example", "akiaiosfodnn7example", 0 },
	{ W_ALL, "AKIAiosfodnn7example", "AKIAiosfodnn7example", 0 },
	{ W_ALL, "ABIAIOSFODNN7EXAMPLE", "ABIAIOSFODNN7EXAMPLE", 0 },
	/* aws_keys: secret keys in their contexts */
	{ W_ALL, "aws_secret_access_key = " SK "\n",
	    "aws_secret_access_key = " R_SK "\n", 1 },
	{ W_ALL, "AWS_SECRET_ACCESS_KEY=" SK, "AWS_SECRET_ACCESS_KEY=" R_SK, 1 },
	{ W_ALL, "{\"SecretAccessKey\": \"" SK "\"}",
	    "{\"SecretAccessKey\": \"" R_SK "\"}", 1 },
	{ W_ALL, "AWS_Secret_Key: '" SK "'", "AWS_Secret_Key: '" R_SK "'", 1 },
	{ W_ALL, "aws_secret_access_key = short", "aws_secret_access_key = short",
	    0 },
	{ W_ALL, "the secret access key is " SK,
	    "the secret access key is " SK, 0 },
	{ W_AWS, "aws_secret_access_key=" SK " id " AK,
	    "aws_secret_access_key=" R_SK " id " R_AK, 2 },
	/* private_keys */
	{ W_ALL, "a\n" PEMB "\nb", "a\n" R_PK "\nb", 1 },
	{ W_ALL, PEMB, R_PK, 1 },
	{ W_ALL, PEMB PEMB, R_PK R_PK, 2 },
	{ W_ALL, "-----BEGIN PRIVATE KEY-----\\nMIIE\\n-----END PRIVATE KEY-----",
	    R_PK, 1 },
	{ W_ALL, "x -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r",
	    "x " R_PK, 1 },
	{ W_ALL, "-----BEGIN ENCRYPTED PRIVATE KEY-----\nQ\n"
	    "-----END ENCRYPTED PRIVATE KEY-----!", R_PK "!", 1 },
	{ W_ALL, "-----BEGIN PGP PRIVATE KEY BLOCK-----\nQ\n"
	    "-----END PGP PRIVATE KEY BLOCK-----", R_PK, 1 },
	{ W_ALL, "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
	    "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----", 0 },
	{ W_ALL, "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n"
	    PEMB, "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n"
	    R_PK, 1 },
	/* a footer of another kind does not end the block */
	{ W_ALL, "-----BEGIN EC PRIVATE KEY-----\nQ\n-----END RSA PRIVATE KEY-----"
	    "\ntail", R_PK, 1 },
	/* bearer_tokens */
	{ W_ALL, "Authorization: Bearer abc.def-ghi\r\nHost: x",
	    "Authorization: " R_BT "\r\nHost: x", 1 },
	{ W_ALL, "curl -H 'Authorization: Basic dXNlcjpwYXNz' http://x",
	    "curl -H 'Authorization: " R_BT "' http://x", 1 },
	{ W_ALL, "{\"authorization\":\"token 123\",\"a\":1}",
	    "{\"authorization\":\"" R_BT "\",\"a\":1}", 1 },
	{ W_ALL, "Proxy-Authorization: Digest x\nok", "Proxy-Authorization: "
	    R_BT "\nok", 1 },
	{ W_ALL, "use bearer xyz", "use bearer " R_BT, 1 },
	{ W_ALL, "BEARER\tq+/=~._-Z rest", "BEARER\t" R_BT " rest", 1 },
	{ W_ALL, "forbearer tokens", "forbearer tokens", 0 },
	{ W_ALL, "Bearer", "Bearer", 0 },
	{ W_ALL, "Bearer  ", "Bearer  ", 0 },
	{ W_ALL, "no authorization here", "no authorization here", 0 },
	{ W_ALL, "t=" JWT ";", "t=" R_JWT ";", 1 },
	{ W_ALL, "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", R_JWT, 1 },
	{ W_ALL, "eyJhbGciOiJub25lIn0.eyJ.YQ.YQ.YQ end", R_JWT " end", 1 },
	{ W_ALL, "eyJonly and eyJxyz.def", "eyJonly and eyJxyz.def", 0 },
	{ W_ALL, "xeyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.",
	    "xeyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", 0 },
	{ W_AWS, "Authorization: Bearer " JWT, "Authorization: Bearer " JWT, 0 },
	/* github_tokens */
	{ W_ALL, "token " GHP "\n", "token " R_GH "\n", 1 },
	{ W_ALL, "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
	    R_GH, 1 },
	{ W_ALL, "ghp_short123", "ghp_short123", 0 },
	/* redact_patterns */
	{ W_ALL, "my Secret-ABC123 here", "my " R_PAT " here", 1 },
	{ W_ALL, "secret-a secret-b", R_PAT " " R_PAT, 2 },
	{ W_ALL, "secret-", "secret-", 0 },
	/* upstream credentials, raw and encoded, at both edges */
	{ W_ALL, "s3cr3t-upstream-token-XYZ", R_CR, 1 },
	{ W_ALL, "s3cr3t-upstream-token-XYZ mid s3cr3t-upstream-token-XYZ",
	    R_CR " mid " R_CR, 2 },
	{ W_ALL, "b64: czNjcjN0LXVwc3RyZWFtLXRva2VuLVhZWg==.", "b64: " R_CR ".",
	    1 },
	{ W_ALL, "czNjcjN0LXVwc3RyZWFtLXRva2VuLVhZWg", R_CR, 1 },
	{ W_ALL, "cGEkJCB3L3JkOjk/Pj4=", R_CR, 1 },
	{ W_ALL, "u=cGEkJCB3L3JkOjk_Pj4&", "u=" R_CR "&", 1 },
	{ W_ALL, "pa$$ w/rd:9?>>", R_CR, 1 },
	{ W_ALL, "?p=pa%24%24%20w%2Frd%3A9%3F%3E%3E&q", "?p=" R_CR "&q", 1 },
	{ W_ALL, "?p=pa%24%24%20w%2frd%3a9%3f%3e%3e", "?p=" R_CR, 1 },
	/* a credential JSON escapes: raw, escaped once (a JSON text) and
	 * twice (that text in a JSON string) */
	{ W_ALL, "x " "qu\"ot\\e\tk\x01""ey-9" " y", "x " R_CR " y", 1 },
	{ W_ALL, "{\"k\":\"" "qu\\\"ot\\\\e\\tk\\u0001ey-9" "\"}",
	    "{\"k\":\"" R_CR "\"}", 1 },
	{ W_ALL, "\"{\\\"k\\\":\\\""
	    "qu\\\\\\\"ot\\\\\\\\e\\\\tk\\\\u0001ey-9" "\\\"}\"",
	    "\"{\\\"k\\\":\\\"" R_CR "\\\"}\"", 1 },
	/* the escapes of other common writers: jansson's uppercase hex
	 * (also with JSON_ENSURE_ASCII, JSON_ESCAPE_SLASH), json.dumps's
	 * ASCII-only output, PHP's escaped slash, Go's HTML-safe escapes */
	{ W_ALL, "{\"k\":\"esc\\u001bkey-7\"}", "{\"k\":\"" R_CR "\"}", 1 },
	{ W_ALL, "{\"k\":\"esc\\u001Bkey-7\"}", "{\"k\":\"" R_CR "\"}", 1 },
	{ W_ALL, "\"esc\\\\u001Bkey-7\"", "\"" R_CR "\"", 1 },
	{ W_ALL, "{\"k\": \"p\\u00e4ssw\\u00f6rd-1\"}", "{\"k\": \"" R_CR "\"}",
	    1 },
	{ W_ALL, "{\"k\":\"p\\u00E4ssw\\u00F6rd-1\"}", "{\"k\":\"" R_CR "\"}",
	    1 },
	{ W_ALL, "\"p\\\\u00e4ssw\\\\u00f6rd-1\"", "\"" R_CR "\"", 1 },
	{ W_ALL, "[\"key\\ud83d\\ude00-xyz\"]", "[\"" R_CR "\"]", 1 },
	{ W_ALL, "[\"key\\uD83D\\uDE00-xyz\"]", "[\"" R_CR "\"]", 1 },
	{ W_ALL, "[\"del\\u007fkey-3\"]", "[\"" R_CR "\"]", 1 },
	{ W_ALL, "{\"p\":\"pa$$ w\\/rd:9?>>\"}", "{\"p\":\"" R_CR "\"}", 1 },
	{ W_ALL, "{\"p\":\"pa$$ w/rd:9?\\u003e\\u003e\"}",
	    "{\"p\":\"" R_CR "\"}", 1 },
	/* escapes no writer of jwriters makes, and more than two levels,
	 * found by undoing them: every character as \u in mixed case,
	 * \x (Python reprs), a surrogate pair in upper case beside short
	 * escapes, three and four levels deep */
	{ W_ALL, "[\"\\u0073\\u0033\\u0063\\u0072\\u0033\\u0074-upstream-"
	    "token-X\\u0059\\u005a\"]", "[\"" R_CR "\"]", 1 },
	{ W_ALL, "'\\x73\\x33cr3t-upstream-token-XYZ'", "'" R_CR "'", 1 },
	{ W_ALL, "b'esc\\x1bkey-7'", "b'" R_CR "'", 1 },
	{ W_ALL, "key\\uD83D\\uDE00\\u002dxyz", R_CR, 1 },
	{ W_ALL, "\"pa$$ w\\\\\\\\\\\\\\/rd:9?>>\"", "\"" R_CR "\"", 1 },
	{ W_ALL, "{\"v\":\"esc\\\\\\\\\\\\\\\\u001bkey-7\"}",
	    "{\"v\":\"" R_CR "\"}", 1 },
	/* a quote as \' (Python's repr), \x above 0x7f as a character
	 * (Python's ascii()), \U and \u{} (Python, JavaScript), and base64
	 * whose '/' a writer escaped (PHP, JSON_ESCAPE_SLASH) */
	{ W_ALL, "x = 'ab\\'cd\"ef-12'", "x = '" R_CR "'", 1 },
	{ W_ALL, "'p\\xe4ssw\\xf6rd-1'", "'" R_CR "'", 1 },
	{ W_ALL, "'key\\U0001f600-xyz'", "'" R_CR "'", 1 },
	{ W_ALL, "`key\\u{1F600}-xyz`", "`" R_CR "`", 1 },
	{ W_ALL, "{\"b\":\"cGEkJCB3L3JkOjk\\/Pj4=\"}", "{\"b\":\"" R_CR "\"}",
	    1 },
	/* HTML character references (an HTML page, an attribute value),
	 * also escaped again as &amp; */
	{ W_ALL, "<a title=\"pa$$ w&#x2F;rd:9?&gt;&gt;\">",
	    "<a title=\"" R_CR "\">", 1 },
	{ W_ALL, "&#115;3cr3t-upstream-token-&#88;YZ", R_CR, 1 },
	{ W_ALL, "v=&amp;#x73;3cr3t-upstream-token-XYZ", "v=" R_CR, 1 },
	{ W_ALL, "a & b &amp c &#; &#x110000; &#0; &#xD800; &bogus;",
	    "a & b &amp c &#; &#x110000; &#0; &#xD800; &bogus;", 0 },
	/* octal escapes (C, Python) as bytes and as characters, HTML
	 * references without their ';' and named punctuation, every byte
	 * percent-encoded, hex dumps */
	{ W_ALL, "'\\163\\063cr3t-upstream-token-XYZ'", "'" R_CR "'", 1 },
	{ W_ALL, "b'p\\303\\244ssw\\303\\266rd-1'", "b'" R_CR "'", 1 },
	{ W_ALL, "'p\\344ssw\\366rd-1'", "'" R_CR "'", 1 },
	{ W_ALL, "&#115&#51cr3t-upstream-token-XYZ", R_CR, 1 },
	{ W_ALL, "<p>pa$$ w/rd:9?&gt&GT</p>", "<p>" R_CR "</p>", 1 },
	{ W_ALL, "pa&dollar;&dollar;&#32;w&sol;rd&colon;9&quest;&gt;>",
	    R_CR, 1 },
	{ W_ALL, "?t=%73%33%63%72%33%74%2d%75pstream-token-%58%59%5a&x=1",
	    "?t=" R_CR "&x=1", 1 },
	{ W_ALL, "7333637233742d757073747265616d2d746f6b656e2d58595a\n",
	    R_CR "\n", 1 },
	{ W_ALL, "0x7333637233742D757073747265616D2D746F6B656E2D58595A",
	    "0x" R_CR, 1 },
	/* hex dumps: the credential split over lines in both columns,
	 * taken from its first digit to the end of its last line (xxd,
	 * xxd -g1 -u, xxd -c 8, hexdump -C, od -A x -t x1z, xxd's output
	 * as a JSON string writes it) */
	{ W_ALL, "00000000: 6964 3d73 3363 7233 742d 7570 7374 7265  "
	    "id=s3cr3t-upstre\n00000010: 616d 2d74 6f6b 656e 2d58 595a 0a"
	    "         am-token-XYZ.\n", "00000000: 6964 3d" R_CR "\n", 1 },
	{ W_ALL, "00000000: 69 64 3D 73 33 63 72 33 74 2D 75 70 73 74 72 65  "
	    "id=s3cr3t-upstre\n00000010: 61 6D 2D 74 6F 6B 65 6E 2D 58 59 5A "
	    "0A           am-token-XYZ.\n", "00000000: 69 64 3D " R_CR "\n",
	    1 },
	{ W_ALL, "00000000: 783a 2070 6124 2420  x: pa$$ \n"
	    "00000008: 772f 7264 3a39 3f3e  w/rd:9?>\n"
	    "00000010: 3e0a                 >.\n",
	    "00000000: 783a 20" R_CR "\n", 1 },
	{ W_ALL, "00000000  69 64 3d 73 33 63 72 33  74 2d 75 70 73 74 72 65  "
	    "|id=s3cr3t-upstre|\n00000010  61 6d 2d 74 6f 6b 65 6e  2d 58 59 5a"
	    " 0a           |am-token-XYZ.|\n0000001d\n",
	    "00000000  69 64 3d " R_CR "\n0000001d\n", 1 },
	{ W_ALL, "000000 69 64 3d 73 33 63 72 33 74 2d 75 70 73 74 72 65  "
	    ">id=s3cr3t-upstre<\n000010 61 6d 2d 74 6f 6b 65 6e 2d 58 59 5a 0a"
	    "           >am-token-XYZ.<\n00001d\n",
	    "000000 69 64 3d " R_CR "\n00001d\n", 1 },
	{ W_ALL, "{\"out\":\"00000000: 6964 3d73 3363 7233 742d 7570 7374 7265"
	    "  id=s3cr3t-upstre\\n00000010: 616d 2d74 6f6b 656e 2d58 595a 0a"
	    "         am-token-XYZ.\\n\"}",
	    "{\"out\":\"00000000: 6964 3d" R_CR "\\n\"}", 1 },
	/* ... and as 16-bit little-endian words (hexdump, od -x) */
	{ W_ALL, "0000000 6469 733d 6333 3372 2d74 7075 7473 6572\n"
	    "0000010 6d61 742d 6b6f 6e65 582d 5a59 000a     \n000001d\n",
	    "0000000 6469 " R_CR "\n000001d\n", 1 },
	{ W_ALL, "0000000 6469 733d 6333 3372 2d74 7075 7473 6572\n"
	    "0000020 6d61 742d 6b6f 6e65 582d 5a59 000a\n0000035\n",
	    "0000000 6469 " R_CR "\n0000035\n", 1 },
	/* ... not: one byte short, lines out of order, the gap hexdump
	 * writes as '*', prose that starts like an offset */
	{ W_ALL, "00000000: 6964 3d73 3363 7233 742d 7570 7374 7265  "
	    "id=s3cr3t-upstre\n00000010: 616d 2d74 6f6b 656e 2d58 59  "
	    "am-token-XY\n", "00000000: 6964 3d73 3363 7233 742d 7570 7374 "
	    "7265  id=s3cr3t-upstre\n00000010: 616d 2d74 6f6b 656e 2d58 59  "
	    "am-token-XY\n", 0 },
	{ W_ALL, "00000010: 616d 2d74 6f6b 656e 2d58 595a 0a         am-token-"
	    "XYZ.\n00000000: 6964 3d73 3363 7233 742d 7570 7374 7265  id=s3cr"
	    "3t-upstre\n", "00000010: 616d 2d74 6f6b 656e 2d58 595a 0a       "
	    "  am-token-XYZ.\n00000000: 6964 3d73 3363 7233 742d 7570 7374 "
	    "7265  id=s3cr3t-upstre\n", 0 },
	{ W_ALL, "2024 was a year\n1999 42 cd ef\nbeef 00\n",
	    "2024 was a year\n1999 42 cd ef\nbeef 00\n", 0 },
	/* a secret holding what a level undoes, behind escapes of
	 * another kind, and raw */
	{ W_ALL, "\"\\u0070a%41ss-wd-9\"", "\"" R_CR "\"", 1 },
	{ W_ALL, "\"\\u0061&lt;b-secret\"", "\"" R_CR "\"", 1 },
	{ W_ALL, "%5Cu0070a%2541ss-wd-9", R_CR, 1 },
	{ W_ALL, "pa%41ss-wd-9 a&lt;b-secret", R_CR " " R_CR, 2 },
	/* base64 of a longer text holding the secret at any offset of a
	 * group (a Basic authorization, an encoded config file): what
	 * encodes only the bytes around it stays */
	{ W_ALL, "{\"auth\":\"Ym90OnMzY3IzdC11cHN0cmVhbS10b2tlbi1YWVo=\"}",
	    "{\"auth\":\"Ym90O" R_CR "\"}", 1 },
	{ W_ALL, "eyJrIjogInMzY3IzdC11cHN0cmVhbS10b2tlbi1YWVoifQ==",
	    "eyJrIjogI" R_CR "ifQ==", 1 },
	{ W_ALL, "eHlzM2NyM3QtdXBzdHJlYW0tdG9rZW4tWFla", "eH" R_CR, 1 },
	/* base64 of JSON that holds the secret escaped (PHP's '\/', Go's
	 * \u003e) */
	{ W_ALL, "eyJwIjoicGEkJCB3XC9yZDo5Pz4+In0=", "eyJwIjoi" R_CR "In0=",
	    1 },
	{ W_ALL, "eyJwdyI6InBhJCQgdy9yZDo5P1x1MDAzZVx1MDAzZSJ9",
	    "eyJwdyI6I" R_CR "J9", 1 },
	/* percent-encoded as a form does (a blank as '+'), and URLs and
	 * forms holding the secret base64-encoded */
	{ W_ALL, "password=pa%24%24+w%2Frd%3A9%3F%3E%3E&x=1",
	    "password=" R_CR "&x=1", 1 },
	{ W_ALL, "aHR0cHM6Ly9ib3Q6cGElMjQlMjQlMjB3JTJGcmQlM0E5JTNGJTNFJTNF"
	    "QGdpdC5leGFtcGxlLmNvbQ==",
	    "aHR0cHM6Ly9ib3Q6" R_CR "QGdpdC5leGFtcGxlLmNvbQ==", 1 },
	{ W_ALL, "dXNlcj1ib3QmcGFzc3dvcmQ9cGElMjQlMjQrdyUyRnJkJTNBOSUzRiUzRSUzRQ==",
	    "dXNlcj1ib3QmcGFzc3dvcmQ9" R_CR, 1 },
	/* wrapped base64 (the base64 tool, PEM, MIME): line breaks inside
	 * an encoded credential are read through; a break after anything
	 * but the alphabet is not */
	{ W_ALL, "IyEvYmluL3NoCmV4cG9ydCBUT0tFTj\n"
	    "1zM2NyM3QtdXBzdHJlYW0tdG9rZW4tWFlaCg==",
	    "IyEvYmluL3NoCmV4cG9ydCBUT0tFTj\n" R_CR "Cg==", 1 },
	{ W_ALL, "x\r\nczNjcjN0LXVwc3RyZWFt\r\nLXRva2VuLVhZWg==\r\ny",
	    "x\r\n" R_CR "\r\ny", 1 },
	{ W_ALL, "czNjcjN0LXVwc3RyZWFt.\nLXRva2VuLVhZWg==",
	    "czNjcjN0LXVwc3RyZWFt.\nLXRva2VuLVhZWg==", 0 },
	/* ... and so are the blanks and quoting around a line break (YAML
	 * indentation, MIME folding, a mail's "> "), and line breaks
	 * written as escapes (a JSON document returned as text); blanks
	 * alone are no line break */
	{ W_ALL, "key: |\n  czNjcjN0LXVwc3RyZWFt \n  LXRva2VuLVhZWg==\n",
	    "key: |\n  " R_CR "\n", 1 },
	{ W_ALL, "x czNjcjN0LXVwc3RyZWFt\r\n\tLXRva2VuLVhZWg==",
	    "x " R_CR, 1 },
	{ W_ALL, "> czNjcjN0LXVwc3RyZWFt\n> > LXRva2VuLVhZWg==",
	    "> " R_CR, 1 },
	{ W_ALL, "{\"pem\":\"czNjcjN0LXVwc3RyZWFt\\r\\n\\tLXRva2VuLVhZWg==\"}",
	    "{\"pem\":\"" R_CR "\"}", 1 },
	{ W_ALL, "czNjcjN0LXVwc3RyZWFt LXRva2VuLVhZWg==",
	    "czNjcjN0LXVwc3RyZWFt LXRva2VuLVhZWg==", 0 },
	{ W_ALL, "czNjcjN0LXVwc3RyZWFt\\t> LXRva2VuLVhZWg==",
	    "czNjcjN0LXVwc3RyZWFt\\t> LXRva2VuLVhZWg==", 0 },
	{ W_ALL, "czNjcjN0LXVwc3RyZWFt\\\\nLXRva2VuLVhZWg==",
	    "czNjcjN0LXVwc3RyZWFt\\\\nLXRva2VuLVhZWg==", 0 },
	/* what looks like those escapes but holds nothing stays */
	{ W_ALL, "100% sure, 50%off %zz %4 \\400 \\8 &#115x &lt &#999999999;",
	    "100% sure, 50%off %zz %4 \\400 \\8 &#115x &lt &#999999999;", 0 },
	/* a lone surrogate escape stays whole: not a backslash that joins
	 * what follows into another escape */
	{ W_ALL, "\\n x\\ud800u00733cr3t-upstream-token-XYZ",
	    "\\n x\\ud800u00733cr3t-upstream-token-XYZ", 0 },
	/* escapes around a match stay; escapes that undo to nothing held
	 * change nothing, a lone surrogate and a bad \x included */
	{ W_ALL, "x\\ny s3cr3t-upstream-token-X\\u0059Z\\n",
	    "x\\ny " R_CR "\\n", 1 },
	{ W_ALL, "a\\n\\t\\u0041\\\\ \\ud800 \\xZZ \\",
	    "a\\n\\t\\u0041\\\\ \\ud800 \\xZZ \\", 0 },
	/* the short secret "ab": raw only, and overlapping runs are one */
	{ W_ALL, "cab aab abab", "c" R_CR " a" R_CR " " R_CR R_CR, 4 },
	{ W_ALL, "YWI=", "YWI=", 0 },
	{ W_AWS, "s3cr3t-upstream-token-XYZ", "s3cr3t-upstream-token-XYZ", 0 },
	/* overlaps become one marker, named by the first match */
	{ W_ALL, "Authorization: Bearer " JWT, "Authorization: " R_BT, 1 },
	{ W_ALL, "SECRET-" AK " x", R_PAT " x", 1 },
	/* the pattern stops at '-', the credential match overlaps it */
	{ W_ALL, "secret-s3cr3t-upstream-token-XYZ", R_PAT, 1 },
	{ W_ALL, "Bearer s3cr3t-upstream-token-XYZ", "Bearer " R_BT, 1 },
	/* UTF-8 around matches stays intact */
	{ W_ALL, "é→" AK "←ü", "é→" R_AK "←ü", 1 },
	{ W_ALL, "日本 secret-x1 語", "日本 " R_PAT " 語", 1 },
	{ W_ALL, "😀s3cr3t-upstream-token-XYZ😀", "😀" R_CR "😀", 1 },
};

static struct pol_policy *pols[3];

static void
setup(void)
{
	pols[W_ALL] = load("all.yaml", P_ALL_TEXT);
	pols[W_AWS] = load("aws.yaml", P_AWS_TEXT);
	pols[W_NONE] = load("none.yaml", P_NONE_TEXT);
}

static void
teardown(void)
{
	size_t	i;

	for (i = 0; i < 3; i++) {
		pol_policy_free(pols[i]);
		pols[i] = NULL;
	}
}

START_TEST(table)
{
	const struct row *r = &rows[_i];
	char		*out = NULL, err[160];
	size_t		 outlen = 99;
	unsigned	 count = 99;
	int		 rc;

	rc = pol_redact_err(pols[r->pol], secrets, NSECRETS, r->in,
	    strlen(r->in), &out, &outlen, &count, err, sizeof(err));
	ck_assert_msg(rc == 0, "row %d: %s", _i, err);
	ck_assert_str_eq(out, r->want);
	ck_assert_uint_eq(outlen, strlen(r->want));
	ck_assert_uint_eq(count, r->count);
	free(out);
}
END_TEST

/* A secret that starts in the first byte and ends in the last one. */
/* pol_holds_secret finds what redaction finds, whatever a policy says. */
START_TEST(holds_secret)
{
	static const struct { const char *in; int want; } c[] = {
		{ "", 0 },
		{ "nothing held here", 0 },
		{ "s3cr3t-upstream-token-XYZ", 1 },
		{ "czNjcjN0LXVwc3RyZWFtLXRva2VuLVhZWg==", 1 },
		{ "pa%24%24%20w%2Frd%3A9%3F%3E%3E", 1 },
		{ "\\u0073\\x33cr3t-upstream-token-XYZ", 1 },
		{ "\\\\\\\\u0065sc\\\\\\\\u001bkey-7", 1 },
		{ "%73%33%63%72%33%74-upstream-token-XYZ", 1 },
		{ "7333637233742d757073747265616d2d746f6b656e2d58595a", 1 },
		{ "\\163\\063cr3t-upstream-token-XYZ", 1 },
		{ "eHMzY3IzdC11cHN0cmVhbS10b2tlbi1YWVoK", 1 },
		{ "s3cr3t-upstream-token-XY", 0 },
		{ "00000000  73 33 63 72 33 74 2d 75  70 73 74 72 65 61 6d 2d"
		    "  |s3cr3t-upstream-|\n00000010  74 6f 6b 65 6e 2d 58 59"
		    "  5a |token-XYZ|\n", 1 },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		ck_assert_msg(pol_holds_secret(secrets, NSECRETS, c[i].in,
		    strlen(c[i].in)) == c[i].want, "case %zu", i);
	errno = 0;
	ck_assert_int_eq(pol_holds_secret(secrets, NSECRETS, NULL, 1), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(pol_holds_secret(NULL, 1, "x", 1), -1);
	ck_assert_int_eq(pol_holds_secret(NULL, 0, "x", 1), 0);
	ck_assert_int_eq(pol_holds_secret(secrets, NSECRETS, NULL, 0), 0);
}
END_TEST

START_TEST(edges_and_nul)
{
	const char	 in[] = "AKIAIOSFODNN7EXAMPLE\0AKIAIOSFODNN7EXAMPLE";
	const char	 want[] = R_AK "\0" R_AK;
	char		*out;
	size_t		 outlen;
	unsigned	 count;

	ck_assert_int_eq(pol_redact(pols[W_AWS], NULL, 0, in, sizeof(in) - 1,
	    &out, &outlen, &count), 0);
	ck_assert_uint_eq(outlen, sizeof(want) - 1);
	ck_assert_mem_eq(out, want, outlen);
	ck_assert_uint_eq(out[outlen], '\0');
	ck_assert_uint_eq(count, 2);
	free(out);
	/* Not NUL-terminated: only inlen bytes are read. */
	ck_assert_int_eq(pol_redact(pols[W_ALL], secrets, NSECRETS,
	    "s3cr3t-upstream-token-XYZ!!!", 10, &out, &outlen, &count), 0);
	ck_assert_str_eq(out, "s3cr3t-ups");
	ck_assert_uint_eq(count, 0);
	free(out);
	/* NULL in with length 0 is the empty result; out/count optional. */
	ck_assert_int_eq(pol_redact(pols[W_ALL], NULL, 0, NULL, 0, &out, NULL,
	    NULL), 0);
	ck_assert_str_eq(out, "");
	free(out);
}
END_TEST

START_TEST(accessors)
{
	struct pol_policy *p;

	ck_assert(pol_redact_enabled(pols[W_ALL]));
	ck_assert(pol_redact_enabled(pols[W_AWS]));
	ck_assert(!pol_redact_enabled(pols[W_NONE]));
	ck_assert(!pol_redact_enabled(NULL));
	ck_assert_uint_eq(pol_result_max_bytes(pols[W_ALL]), 256 * 1024);
	ck_assert_uint_eq(pol_result_max_bytes(pols[W_NONE]), 1024 * 1024);
	ck_assert_str_eq(pol_taint_level(pols[W_ALL]), "internal");
	ck_assert_ptr_null(pol_taint_level(pols[W_NONE]));
	/* No policy fails closed: nothing fits, everything taints. */
	ck_assert_uint_eq(pol_result_max_bytes(NULL), 0);
	ck_assert_str_eq(pol_taint_level(NULL), "public");
	p = load("t.yaml", "version: 1\nmcp: {taint: {}}\n");
	ck_assert_str_eq(pol_taint_level(p), "confidential");
	pol_policy_free(p);
}
END_TEST

/* Every built-in class of the shipped example is active there. */
START_TEST(example_policy)
{
	struct pol_errors *e = pol_errors_new(10);
	struct pol_policy *p = pol_policy_load(
	    "examples/policies/coding-agent.yaml", NULL, e);
	const char	*sec[] = { "upstream-secret-1" };
	const char	 in[] = "k=" AK " " PEMB " Bearer t0k secret-q "
	    "upstream-secret-1";
	char		*out;
	unsigned	 count;

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(pol_redact(p, sec, 1, in, strlen(in), &out, NULL,
	    &count), 0);
	ck_assert_str_eq(out, "k=" R_AK " " R_PK " Bearer " R_BT " " R_PAT " "
	    R_CR);
	ck_assert_uint_eq(count, 5);
	free(out);
	pol_policy_free(p);
	pol_errors_free(e);
}
END_TEST

/* 8 MiB with a key every 4 KiB: all found, in one linear pass, and the
 * benign pattern stays under the match limit. */
START_TEST(huge_input)
{
	const size_t	 n = 8u << 20, step = 4096;
	char		*in = malloc(n), *out;
	size_t		 i, outlen, want = 0;
	unsigned	 count;

	ck_assert_ptr_nonnull(in);
	for (i = 0; i < n; i++)
		in[i] = "lorem ipsum secret\n"[i % 19];
	for (i = 100; i + 20 < n; i += step) {
		memcpy(in + i, AK, 20);
		want++;
	}
	ck_assert_int_eq(pol_redact(pols[W_ALL], secrets, NSECRETS, in, n,
	    &out, &outlen, &count), 0);
	ck_assert_uint_eq(count, want);
	ck_assert_uint_eq(outlen, n + want * (strlen(R_AK) - 20));
	ck_assert_ptr_null(memmem(out, outlen, "AKIA", 4));
	free(out);
	free(in);
}
END_TEST

/* A secret everywhere: the output grows, sized exactly. */
START_TEST(growth)
{
	const char	*sec[] = { "x" };
	const size_t	 n = 1u << 20;
	char		*in = malloc(n), *out;
	size_t		 outlen;
	unsigned	 count;

	ck_assert_ptr_nonnull(in);
	memset(in, 'x', n);
	ck_assert_int_eq(pol_redact(pols[W_ALL], sec, 1, in, n, &out, &outlen,
	    &count), 0);
	ck_assert_uint_eq(count, n);
	ck_assert_uint_eq(outlen, n * strlen(R_CR));
	ck_assert_mem_eq(out + outlen - strlen(R_CR), R_CR, strlen(R_CR));
	free(out);
	free(in);
}
END_TEST

START_TEST(match_limit_fails_closed)
{
	struct pol_policy *p = load("bad.yaml", P_BAD_TEXT);
	char		 in[80], err[160], *out = (char *)1;
	unsigned	 count = 7;

	memset(in, 'a', sizeof(in));
	in[sizeof(in) - 1] = 'b';
	errno = 0;
	ck_assert_int_eq(pol_redact_err(p, NULL, 0, in, sizeof(in), &out, NULL,
	    &count, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(out);
	ck_assert_msg(strstr(err, "mcp.results.redact_patterns[1]: ") == err,
	    "%s", err);
	ck_assert_ptr_nonnull(strstr(err, "limit"));
	/* The same pattern on input it handles is fine; the empty matches
	 * of "q{0}" replace nothing. */
	ck_assert_int_eq(pol_redact(p, NULL, 0, "é ok-12 aaa", 12, &out, NULL,
	    &count), 0);
	ck_assert_str_eq(out, "é " R_PAT " " R_PAT);
	ck_assert_uint_eq(count, 2);
	free(out);
	pol_policy_free(p);
}
END_TEST

START_TEST(invalid_utf8)
{
	const char	 in[] = "Bearer abc \xff\xfe " AK;
	char		*out = NULL, err[160];

	/* Patterns need UTF-8: fail closed. */
	ck_assert_int_eq(pol_redact_err(pols[W_ALL], NULL, 0, in,
	    sizeof(in) - 1, &out, NULL, NULL, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(out);
	ck_assert_ptr_nonnull(strstr(err, "redact_patterns[0]"));
	/* Built-in classes scan bytes: no pattern, no failure. */
	ck_assert_int_eq(pol_redact(pols[W_AWS], NULL, 0, in, sizeof(in) - 1,
	    &out, NULL, NULL), 0);
	ck_assert_str_eq(out, "Bearer abc \xff\xfe " R_AK);
	free(out);
	/* A truncated sequence right at the end. */
	ck_assert_int_eq(pol_redact(pols[W_ALL], NULL, 0, "ok \xc3", 4, &out,
	    NULL, NULL), -1);
	ck_assert_ptr_null(out);
}
END_TEST

START_TEST(bad_arguments)
{
	char	*out = (char *)1;

	ck_assert_int_eq(pol_redact(NULL, NULL, 0, "x", 1, &out, NULL, NULL),
	    -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(out);
	ck_assert_int_eq(pol_redact(pols[W_ALL], NULL, 0, "x", 1, NULL, NULL,
	    NULL), -1);
	ck_assert_int_eq(pol_redact(pols[W_ALL], NULL, 0, NULL, 1, &out, NULL,
	    NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(pol_redact(pols[W_ALL], NULL, 2, "x", 1, &out, NULL,
	    NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* NULL entries among secrets are skipped. */
	{
		const char *sec[] = { NULL, "abcdefgh" };

		ck_assert_int_eq(pol_redact(pols[W_ALL], sec, 2, "abcdefgh",
		    8, &out, NULL, NULL), 0);
		ck_assert_str_eq(out, R_CR);
		free(out);
	}
}
END_TEST

/* Many headers without a footer, many "Authorization:" on one line, a
 * break of escaped blanks or line breaks as long as the text after a
 * base64 character: each still one linear pass (a quadratic scan would
 * time out here). */
START_TEST(hostile_repetition)
{
	const size_t	 n = 2u << 20;
	const char	*unit[] = { "-----BEGIN RSA PRIVATE KEY", "Authorization:",
	    "Bearer ", "eyJa.", "aws_secret_access_key=", "AKIA", "ghp_",
	    "\\t", "\\r", "\\t \n",
	    "00000000: 6162 6364 6566 6768 696a 6b6c 6d6e 6f70  abcdefghijklmnop\n",
	    "0000 ", "0000 00\\n", "\"0000 00 ", "\"\"\"\"0000 0" };
	char		*in = malloc(n), *out;
	size_t		 i, k, len;
	unsigned	 count;

	ck_assert_ptr_nonnull(in);
	for (k = 0; k < sizeof(unit) / sizeof(unit[0]); k++) {
		len = strlen(unit[k]);
		for (i = 0; i < n; i++)
			in[i] = unit[k][i % len];
		ck_assert_int_eq(pol_redact(pols[W_ALL], secrets, NSECRETS,
		    in, n, &out, NULL, &count), 0);
		free(out);
	}
	free(in);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("policy_redact");
	TCase	*core = tcase_create("Core"), *lim = tcase_create("Limits");
	SRunner	*sr;
	int	 nf;

	tcase_add_checked_fixture(core, setup, teardown);
	tcase_add_loop_test(core, table, 0, sizeof(rows) / sizeof(rows[0]));
	tcase_add_test(core, holds_secret);
	tcase_add_test(core, edges_and_nul);
	tcase_add_test(core, accessors);
	tcase_add_test(core, example_policy);
	tcase_add_checked_fixture(lim, setup, teardown);
	tcase_set_timeout(lim, 60);
	tcase_add_test(lim, huge_input);
	tcase_add_test(lim, growth);
	tcase_add_test(lim, match_limit_fails_closed);
	tcase_add_test(lim, invalid_utf8);
	tcase_add_test(lim, bad_arguments);
	tcase_add_test(lim, hostile_repetition);
	suite_add_tcase(s, core);
	suite_add_tcase(s, lim);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? 0 : 1;
}
