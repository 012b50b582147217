/*
 * fuzz_addr: the address parsers and the classifier (policy/classify.c)
 * under hostile input.
 *
 * Addresses arrive from policy files, DNS answers and control calls, so the
 * parsers see attacker text. Beyond "does not crash", every input is held to
 * invariants a user relies on:
 *   - the parsers agree with inet_pton(3) (IPv4: byte for byte, since the
 *     strict dotted quad is exactly what glibc's inet_pton accepts; IPv6:
 *     within the 45-character limit), and refuse every alternate literal;
 *   - parse -> format -> parse gives the same bytes, and formatting the
 *     result again gives the same text (an IPv4 literal is its own
 *     canonical form);
 *   - a parsed CIDR has no host bits, contains its own address, and
 *     round-trips through "addr/prefix";
 *   - the classifier puts every address in exactly one of always-denied,
 *     private and public, agrees with the kernel tables
 *     (pol_deny_ranges/pol_private_ranges), and treat_as_public never lifts
 *     metadata, loopback, link-local or unspecified.
 * Inputs of 17 bytes and more are also read as a raw address (plus up to
 * four treat_as_public blocks), which covers the whole address space rather
 * than what happens to parse.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "tests/fuzz/fuzz.h"

static int
alen(int family)
{
	return family == AF_INET ? 4 : 16;
}

static bool
in_table(const struct pol_cidr *t, size_t n, const struct pol_addr *a)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		if (pol_cidr_contains(&t[i], a))
			return true;
	return false;
}

static void
check_class(const struct pol_addr *a)
{
	const struct pol_cidr	*d, *p;
	struct pol_addr_info	 info;
	size_t			 nd, np;
	bool			 denied, priv, ind, inp;

	pol_addr_classify(a, NULL, 0, &info);
	REQUIRE((unsigned)info.cls < POL_ADDR__COUNT);
	REQUIRE(strcmp(pol_addr_class_name(info.cls), "invalid") != 0);
	REQUIRE(!info.treated_public);
	denied = pol_addr_class_always_denied(info.cls);
	priv = pol_addr_class_private(info.cls);
	REQUIRE(denied + priv + (info.cls == POL_ADDR_PUBLIC) == 1);
	if (info.embed != POL_EMBED_NONE) {
		REQUIRE(a->family == AF_INET6);
		REQUIRE(info.inner.family == AF_INET);
		/* The kernel cannot unwrap: an embedded form is denied. */
		REQUIRE(denied);
	} else
		REQUIRE(info.inner.family == 0);
	d = pol_deny_ranges(a->family, &nd);
	p = pol_private_ranges(a->family, &np);
	REQUIRE(d != NULL && p != NULL);
	ind = in_table(d, nd, a);
	inp = in_table(p, np, a);
	REQUIRE(denied == ind);
	if (!ind)
		REQUIRE(priv == inp);
}

/* treat_as_public only ever lifts, and never the four protected classes. */
static void
check_treat(const struct pol_addr *a, const struct pol_cidr *t, size_t nt)
{
	struct pol_addr_info	 plain, lifted;

	pol_addr_classify(a, NULL, 0, &plain);
	pol_addr_classify(a, t, nt, &lifted);
	REQUIRE(lifted.embed == plain.embed);
	REQUIRE(memcmp(&lifted.inner, &plain.inner, sizeof(plain.inner)) == 0);
	if (lifted.treated_public)
		REQUIRE(lifted.cls == POL_ADDR_PUBLIC &&
		    plain.cls != POL_ADDR_PUBLIC);
	switch (plain.cls) {
	case POL_ADDR_METADATA:
	case POL_ADDR_LOOPBACK:
	case POL_ADDR_LINK_LOCAL:
	case POL_ADDR_UNSPECIFIED:
		REQUIRE(lifted.cls == plain.cls);
		break;
	default:
		/*
		 * A change is a lift to public or private, or, for an
		 * embedded form whose inner address was lifted, back to the
		 * outer form's own RESERVED: never to another denial.
		 */
		if (lifted.cls != plain.cls)
			REQUIRE(lifted.cls == POL_ADDR_PUBLIC ||
			    pol_addr_class_private(lifted.cls) ||
			    (plain.embed != POL_EMBED_NONE &&
			    lifted.cls == POL_ADDR_RESERVED));
		break;
	}
}

static void
check_roundtrip(const struct pol_addr *a, const char *orig)
{
	char		 t1[INET6_ADDRSTRLEN], t2[INET6_ADDRSTRLEN];
	struct pol_addr	 b;

	REQUIRE(pol_addr_format(a, t1, sizeof(t1)) == t1);
	REQUIRE(pol_addr_parse(t1, &b) == 0);
	REQUIRE(b.family == a->family);
	REQUIRE(memcmp(a->a, b.a, (size_t)alen(a->family)) == 0);
	REQUIRE(pol_addr_format(&b, t2, sizeof(t2)) == t2);
	REQUIRE(strcmp(t1, t2) == 0);
	if (orig != NULL && a->family == AF_INET)
		REQUIRE(strcmp(orig, t1) == 0);
}

static void
check_addr_text(const char *s)
{
	struct pol_addr	 a;
	uint8_t		 ref[16];
	bool		 v6 = strchr(s, ':') != NULL;
	int		 r, i, ok;

	errno = 0;
	r = pol_addr_parse(s, &a);
	/* Differential: inet_pton is the reference for what is an address. */
	ok = inet_pton(v6 ? AF_INET6 : AF_INET, s, ref) == 1 &&
	    strlen(s) <= INET6_ADDRSTRLEN - 1;
	REQUIRE((r == 0) == ok);
	if (r == -1) {
		REQUIRE(errno == EINVAL);
		return;
	}
	REQUIRE(a.family == (v6 ? AF_INET6 : AF_INET));
	REQUIRE(memcmp(a.a, ref, (size_t)alen(a.family)) == 0);
	if (a.family == AF_INET)
		for (i = 4; i < 16; i++)
			REQUIRE(a.a[i] == 0);
	check_roundtrip(&a, s);
	check_class(&a);
}

static void
check_cidr_text(const char *s)
{
	char		 t[INET6_ADDRSTRLEN + 8], abuf[INET6_ADDRSTRLEN];
	char		 err[64];
	struct pol_cidr	 c, d;
	struct pol_addr	 a;
	int		 r, r2, max;

	r = pol_cidr_parse(s, &c);
	memset(err, 'x', sizeof(err));
	r2 = pol_cidr_parse_err(s, &d, err, sizeof(err));
	REQUIRE(r == r2);
	if (r == -1) {
		/* A reason is always given, and it fits. */
		REQUIRE(memchr(err, '\0', sizeof(err)) != NULL);
		REQUIRE(err[0] != '\0');
		return;
	}
	REQUIRE(memcmp(&c, &d, sizeof(c)) == 0);
	max = alen(c.addr.family) * 8;
	REQUIRE(c.prefix <= max);
	REQUIRE(pol_cidr_contains(&c, &c.addr));
	if (strchr(s, '/') == NULL) {
		REQUIRE(c.prefix == max);
		REQUIRE(pol_addr_parse(s, &a) == 0);
		REQUIRE(memcmp(&a, &c.addr, sizeof(a)) == 0);
	}
	REQUIRE(pol_addr_format(&c.addr, abuf, sizeof(abuf)) != NULL);
	snprintf(t, sizeof(t), "%s/%u", abuf, c.prefix);
	REQUIRE(pol_cidr_parse(t, &d) == 0);
	REQUIRE(memcmp(&c, &d, sizeof(c)) == 0);
	if (c.prefix < max) {
		/* Setting the last host bit must be refused. */
		a = c.addr;
		a.a[alen(a.family) - 1] |= 1;
		REQUIRE(pol_addr_format(&a, abuf, sizeof(abuf)) != NULL);
		snprintf(t, sizeof(t), "%s/%u", abuf, c.prefix);
		REQUIRE(pol_cidr_parse(t, &d) == -1);
	}
	check_class(&c.addr);
}

/* A CIDR from raw bytes: family, prefix, then the address masked. */
static size_t
raw_cidr(const uint8_t *p, size_t n, struct pol_cidr *c)
{
	int	 len, i, max;

	if (n < 2)
		return 0;
	memset(c, 0, sizeof(*c));
	c->addr.family = (p[0] & 1) ? AF_INET6 : AF_INET;
	len = alen(c->addr.family);
	if (n < (size_t)(2 + len))
		return 0;
	max = len * 8;
	c->prefix = (uint8_t)(p[1] % (max + 1));
	memcpy(c->addr.a, p + 2, (size_t)len);
	for (i = 0; i < len; i++) {
		if (i * 8 >= c->prefix)
			c->addr.a[i] = 0;
		else if (i * 8 + 8 > c->prefix)
			c->addr.a[i] &= (uint8_t)(0xff << (8 - (c->prefix - i * 8)));
	}
	return (size_t)(2 + len);
}

static void
check_raw(const uint8_t *data, size_t size)
{
	struct pol_cidr	 treat[4];
	struct pol_addr	 a;
	size_t		 nt = 0, used;

	memset(&a, 0, sizeof(a));
	a.family = (data[0] & 1) ? AF_INET6 : AF_INET;
	memcpy(a.a, data + 1, (size_t)alen(a.family));
	check_roundtrip(&a, NULL);
	check_class(&a);
	data += 17;
	size -= 17;
	while (nt < 4 && (used = raw_cidr(data, size, &treat[nt])) > 0) {
		REQUIRE(pol_cidr_contains(&treat[nt], &treat[nt].addr));
		data += used;
		size -= used;
		nt++;
	}
	check_treat(&a, treat, nt);
	/* Wrapping the address in itself: the worst class still wins. */
	if (a.family == AF_INET) {
		struct pol_addr	 m = { .family = AF_INET6 };

		m.a[10] = m.a[11] = 0xff;
		memcpy(m.a + 12, a.a, 4);
		check_class(&m);
		check_treat(&m, treat, nt);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	*s;

	if ((s = malloc(size + 1)) == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	check_addr_text(s);
	check_cidr_text(s);
	free(s);
	if (size >= 17)
		check_raw(data, size);
	/* The class helpers take any value without reading out of bounds. */
	if (size > 0) {
		enum pol_addr_class c = (enum pol_addr_class)data[0];

		REQUIRE(pol_addr_class_name(c) != NULL);
		REQUIRE(!(pol_addr_class_always_denied(c) &&
		    pol_addr_class_private(c)));
	}
	return 0;
}
