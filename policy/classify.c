/*
 * classify.c: the address classifier, the one place that says what kind of
 * address an IPv4/IPv6 address is (metadata service, loopback, private, ...).
 *
 * It exists so that every path that lets a sandbox reach an address (the DNS
 * proxy checking answers, the policy deciding an egress literal, the firewall
 * loading its interval sets) agrees on one answer, taken from egress.md §8-9.
 * The parsers are deliberately stricter than inet_aton(3): alternate IPv4
 * literals ("2852039166", "0xA9FEA9FE", "0251.0376.0251.0376") are the classic
 * way past name-based deny rules, so anything but four plain decimal octets
 * is refused rather than canonicalised.
 *
 * IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4,
 * Teredo) are RESERVED in themselves: the kernel cannot look inside them
 * (Teredo's client is not even a prefix), so DESIGN §4 denies them all, and
 * the classifier agrees with the kernel. The embedded IPv4 is still unwrapped
 * and classified, and the worse class wins, so ::ffff:169.254.169.254 is
 * reported as METADATA, which is what an audit reader needs to see.
 *
 * Pure: no I/O, no clock, no state; the only globals are const tables.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"

/* Longest text pol_addr_parse accepts: INET6_ADDRSTRLEN less the NUL, e.g.
 * "0000:0000:0000:0000:0000:ffff:255.255.255.255". */
#define ADDR_TEXT_MAX	(INET6_ADDRSTRLEN - 1)
/* ADDR_TEXT_MAX plus "/128". */
#define CIDR_TEXT_MAX	(ADDR_TEXT_MAX + 4)

struct class_range {
	struct pol_cidr		c;
	enum pol_addr_class	cls;
};

#define V4(a, b, c, d, p)	{ .addr = { AF_INET, { a, b, c, d } }, .prefix = p }
#define V6(p, ...)		{ .addr = { AF_INET6, { __VA_ARGS__ } }, .prefix = p }
#define R(cidr, k)		{ cidr, POL_ADDR_##k }

/*
 * IPv4, first match wins, so metadata endpoints come before the link-local,
 * CGNAT and reserved ranges they sit in: metadata must be what is reported.
 */
static const struct class_range v4_classes[] = {
	R(V4(169, 254, 169, 254, 32), METADATA),	/* AWS, GCP, Azure, OCI, ... */
	R(V4(169, 254, 169, 253, 32), METADATA),	/* AWS Route 53 resolver */
	R(V4(169, 254, 169, 123, 32), METADATA),	/* AWS time sync */
	R(V4(169, 254, 170, 2, 32), METADATA),		/* AWS ECS credentials */
	R(V4(169, 254, 170, 23, 32), METADATA),	/* AWS EKS pod identity */
	R(V4(169, 254, 42, 42, 32), METADATA),		/* Scaleway */
	R(V4(100, 100, 100, 200, 32), METADATA),	/* Alibaba Cloud */
	R(V4(168, 63, 129, 16, 32), METADATA),		/* Azure WireServer (public IP) */
	R(V4(192, 0, 0, 192, 32), METADATA),		/* Oracle Cloud Classic */
	R(V4(0, 0, 0, 0, 8), UNSPECIFIED),
	R(V4(127, 0, 0, 0, 8), LOOPBACK),
	R(V4(169, 254, 0, 0, 16), LINK_LOCAL),
	R(V4(10, 0, 0, 0, 8), PRIVATE),
	R(V4(172, 16, 0, 0, 12), PRIVATE),
	R(V4(192, 168, 0, 0, 16), PRIVATE),
	R(V4(100, 64, 0, 0, 10), CGNAT),
	R(V4(192, 0, 2, 0, 24), DOCUMENTATION),
	R(V4(198, 51, 100, 0, 24), DOCUMENTATION),
	R(V4(203, 0, 113, 0, 24), DOCUMENTATION),
	R(V4(198, 18, 0, 0, 15), BENCHMARKING),
	R(V4(224, 0, 0, 0, 4), MULTICAST),
	R(V4(240, 0, 0, 0, 4), RESERVED),		/* includes 255.255.255.255 */
	R(V4(192, 0, 0, 0, 24), RESERVED),		/* IETF protocol assignments */
	R(V4(192, 88, 99, 0, 24), RESERVED),		/* 6to4 relay anycast */
};

/*
 * IPv6 ranges other than the embedded-IPv4 forms (handled in code, since
 * they need unwrapping). Anything matching none of these is PUBLIC inside
 * 2000::/3 and RESERVED outside it: the rest of the space is unallocated
 * (RFC 4291 §2.4), and failing closed there costs nothing real.
 */
static const struct class_range v6_classes[] = {
	R(V6(128, 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54), METADATA),
	R(V6(128, 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x53), METADATA),
	R(V6(128, 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x23), METADATA),
	R(V6(128, 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x23), METADATA),
	R(V6(128, 0xfd, 0x20, 0x00, 0xce, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54), METADATA),
	R(V6(128, 0xfd, 0x00, 0x00, 0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x42), METADATA),
	R(V6(128, 0), UNSPECIFIED),
	R(V6(128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1), LOOPBACK),
	R(V6(64, 0x01, 0x00), RESERVED),		/* discard-only 100::/64 */
	R(V6(32, 0x20, 0x01, 0x0d, 0xb8), DOCUMENTATION),
	R(V6(20, 0x3f, 0xff), DOCUMENTATION),		/* RFC 9637 */
	R(V6(48, 0x20, 0x01, 0x00, 0x02), BENCHMARKING),
	R(V6(7, 0xfc), ULA),
	R(V6(10, 0xfe, 0x80), LINK_LOCAL),
	R(V6(10, 0xfe, 0xc0), RESERVED),		/* deprecated site-local */
	R(V6(8, 0xff), MULTICAST),
};

/*
 * The kernel's view (DESIGN §4): sorted, and non-overlapping within each
 * table, because libnftnl interval sets refuse overlapping elements. A
 * metadata host inside a denied range is covered by that range; one inside a
 * private range (100.100.100.200, the fd00:.. hosts) or public space
 * (168.63.129.16) is listed itself, and the deny chain runs first.
 */
static const struct pol_cidr v4_deny[] = {
	V4(0, 0, 0, 0, 8),
	V4(100, 100, 100, 200, 32),
	V4(127, 0, 0, 0, 8),
	V4(168, 63, 129, 16, 32),
	V4(169, 254, 0, 0, 16),
	V4(192, 0, 0, 0, 24),
	V4(192, 88, 99, 0, 24),
	V4(224, 0, 0, 0, 4),
	V4(240, 0, 0, 0, 4),
};

static const struct pol_cidr v4_private[] = {
	V4(10, 0, 0, 0, 8),
	V4(100, 64, 0, 0, 10),
	V4(172, 16, 0, 0, 12),
	V4(192, 0, 2, 0, 24),
	V4(192, 168, 0, 0, 16),
	V4(198, 18, 0, 0, 15),
	V4(198, 51, 100, 0, 24),
	V4(203, 0, 113, 0, 24),
};

static const struct pol_cidr v6_deny[] = {
	V6(3, 0x00),		/* ::, ::1, mapped, compatible, NAT64, 100::/64 */
	V6(32, 0x20, 0x01, 0x00, 0x00),		/* Teredo */
	V6(16, 0x20, 0x02),			/* 6to4 */
	V6(2, 0x40),
	V6(2, 0x80),
	V6(3, 0xc0),
	V6(4, 0xe0),
	V6(5, 0xf0),
	V6(6, 0xf8),
	V6(128, 0xfd, 0x00, 0x00, 0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x42),
	V6(128, 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x23),
	V6(128, 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x23),
	V6(128, 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x53),
	V6(128, 0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54),
	V6(128, 0xfd, 0x20, 0x00, 0xce, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54),
	V6(9, 0xfe, 0x00),
	V6(10, 0xfe, 0x80),			/* link-local */
	V6(10, 0xfe, 0xc0),			/* site-local */
	V6(8, 0xff),				/* multicast */
};

static const struct pol_cidr v6_private[] = {
	V6(48, 0x20, 0x01, 0x00, 0x02),		/* benchmarking */
	V6(32, 0x20, 0x01, 0x0d, 0xb8),		/* documentation */
	V6(20, 0x3f, 0xff),			/* documentation */
	V6(7, 0xfc),				/* ULA */
};

#undef R
#undef V6
#undef V4

#define NELEM(x)	(sizeof(x) / sizeof((x)[0]))

static const char *const class_names[POL_ADDR__COUNT] = {
	[POL_ADDR_PUBLIC] = "public",
	[POL_ADDR_METADATA] = "metadata",
	[POL_ADDR_LOOPBACK] = "loopback",
	[POL_ADDR_UNSPECIFIED] = "unspecified",
	[POL_ADDR_LINK_LOCAL] = "link-local",
	[POL_ADDR_PRIVATE] = "private",
	[POL_ADDR_CGNAT] = "cgnat",
	[POL_ADDR_DOCUMENTATION] = "documentation",
	[POL_ADDR_BENCHMARKING] = "benchmarking",
	[POL_ADDR_MULTICAST] = "multicast",
	[POL_ADDR_RESERVED] = "reserved",
	[POL_ADDR_ULA] = "ula",
};

/*
 * How bad a class is, for "the worse of outer and inner wins". Every
 * always-denied class outranks every private class, which outranks public,
 * so combining never turns a denial into something a policy could allow.
 */
static const unsigned char class_rank[POL_ADDR__COUNT] = {
	[POL_ADDR_PUBLIC] = 0,
	[POL_ADDR_DOCUMENTATION] = 1,
	[POL_ADDR_BENCHMARKING] = 2,
	[POL_ADDR_ULA] = 3,
	[POL_ADDR_CGNAT] = 4,
	[POL_ADDR_PRIVATE] = 5,
	[POL_ADDR_RESERVED] = 6,
	[POL_ADDR_MULTICAST] = 7,
	[POL_ADDR_LINK_LOCAL] = 8,
	[POL_ADDR_UNSPECIFIED] = 9,
	[POL_ADDR_LOOPBACK] = 10,
	[POL_ADDR_METADATA] = 11,
};

static int
addr_len(int family)
{
	if (family == AF_INET)
		return 4;
	if (family == AF_INET6)
		return 16;
	return 0;
}

static bool
is_digit(char c)
{
	/* Not isdigit(3): its answer depends on the locale. */
	return c >= '0' && c <= '9';
}

/* Four decimal octets, each 0..255 without leading zeros, nothing else. */
static int
parse_v4(const char *s, uint8_t out[4])
{
	unsigned int	 v, ndig;
	int		 i;

	for (i = 0; i < 4; i++) {
		if (!is_digit(*s))
			return -1;
		/* A leading zero is octal to inet_aton(3); refuse, never guess. */
		if (s[0] == '0' && is_digit(s[1]))
			return -1;
		for (v = 0, ndig = 0; is_digit(*s); s++) {
			if (++ndig > 3)
				return -1;
			v = v * 10 + (unsigned int)(*s - '0');
		}
		if (v > 255)
			return -1;
		out[i] = (uint8_t)v;
		if (i < 3) {
			if (*s != '.')
				return -1;
			s++;
		}
	}
	return *s == '\0' ? 0 : -1;
}

int
pol_addr_parse(const char *s, struct pol_addr *out)
{
	struct pol_addr	 a;
	size_t		 len;

	if (s == NULL || out == NULL)
		goto bad;
	len = strnlen(s, ADDR_TEXT_MAX + 1);
	if (len == 0 || len > ADDR_TEXT_MAX)
		goto bad;
	memset(&a, 0, sizeof(a));
	if (strchr(s, ':') != NULL) {
		/*
		 * inet_pton(3) for IPv6 is strict already: no zone, no
		 * brackets, no spaces, and its embedded IPv4 tail refuses
		 * leading zeros. Pure: no resolver, no locale.
		 */
		if (inet_pton(AF_INET6, s, a.a) != 1)
			goto bad;
		a.family = AF_INET6;
	} else {
		if (parse_v4(s, a.a) == -1)
			goto bad;
		a.family = AF_INET;
	}
	*out = a;
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

size_t
pol_ipv4_format(const uint8_t *a, char *buf)
{
	char *p = buf;
	int i;

	for (i = 0; i < 4; i++) {
		unsigned v = a[i];

		if (v >= 100)
			*p++ = (char)('0' + v / 100);
		if (v >= 10)
			*p++ = (char)('0' + v / 10 % 10);
		*p++ = (char)('0' + v % 10);
		if (i < 3)
			*p++ = '.';
	}
	*p = '\0';
	return (size_t)(p - buf);
}

const char *
pol_addr_format(const struct pol_addr *a, char *buf, size_t len)
{
	if (a == NULL || buf == NULL || addr_len(a->family) == 0) {
		errno = EAFNOSUPPORT;
		return NULL;
	}
	if (a->family == AF_INET) {
		char tmp[16];
		size_t n = pol_ipv4_format(a->a, tmp);

		if (n >= len) {
			errno = ENOSPC;
			return NULL;
		}
		memcpy(buf, tmp, n + 1);
		return buf;
	}
	if (len > (size_t)INT32_MAX)
		len = INT32_MAX;
	/* inet_ntop sets ENOSPC itself when buf is too small. */
	return inet_ntop(a->family, a->a, buf, (socklen_t)len);
}

static bool
host_bits_clear(const struct pol_addr *a, unsigned int prefix)
{
	int	 n = addr_len(a->family), i;
	uint8_t	 mask;

	for (i = 0; i < n; i++) {
		if ((unsigned int)i * 8 >= prefix)
			mask = 0xff;
		else if ((unsigned int)i * 8 + 8 <= prefix)
			mask = 0;
		else
			mask = (uint8_t)(0xff >> (prefix - (unsigned int)i * 8));
		if (a->a[i] & mask)
			return false;
	}
	return true;
}

static void
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list	 ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int
pol_cidr_parse_err(const char *s, struct pol_cidr *out, char *err,
    size_t errlen)
{
	char		 abuf[CIDR_TEXT_MAX + 1];
	struct pol_cidr	 c;
	const char	*slash, *p;
	size_t		 len;
	unsigned int	 prefix, max;

	if (s == NULL || out == NULL) {
		set_err(err, errlen, "no CIDR given");
		goto bad;
	}
	len = strnlen(s, CIDR_TEXT_MAX + 1);
	if (len == 0 || len > CIDR_TEXT_MAX) {
		set_err(err, errlen, len == 0 ? "empty CIDR" :
		    "CIDR longer than %d characters", CIDR_TEXT_MAX);
		goto bad;
	}
	memcpy(abuf, s, len + 1);
	memset(&c, 0, sizeof(c));
	slash = strchr(abuf, '/');
	if (slash != NULL)
		abuf[slash - abuf] = '\0';
	if (pol_addr_parse(abuf, &c.addr) == -1) {
		set_err(err, errlen, "not an address in strict form: "
		    "four decimal octets or an IPv6 address");
		goto bad;
	}
	max = c.addr.family == AF_INET ? 32 : 128;
	if (slash == NULL) {
		c.prefix = (uint8_t)max;
		*out = c;
		return 0;
	}
	/*
	 * Decimal digits only, no sign, no leading zero ("/08" would be
	 * octal to some readers, and "/+8" or "/ 8" are sloppy input that
	 * strtoul would take): the same strictness as the octets.
	 */
	p = s + (slash - abuf) + 1;
	if (!is_digit(*p) || (p[0] == '0' && is_digit(p[1]))) {
		set_err(err, errlen, "prefix length must be a decimal number "
		    "without sign or leading zero");
		goto bad;
	}
	for (prefix = 0; is_digit(*p) && prefix <= 128; p++)
		prefix = prefix * 10 + (unsigned int)(*p - '0');
	if (*p != '\0' && !is_digit(*p)) {
		set_err(err, errlen, "trailing characters after the prefix "
		    "length");
		goto bad;
	}
	if (*p != '\0' || prefix > max) {
		set_err(err, errlen, "prefix length out of range 0..%u", max);
		goto bad;
	}
	if (!host_bits_clear(&c.addr, prefix)) {
		set_err(err, errlen, "host bits set after /%u", prefix);
		goto bad;
	}
	c.prefix = (uint8_t)prefix;
	*out = c;
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

int
pol_cidr_parse(const char *s, struct pol_cidr *out)
{
	return pol_cidr_parse_err(s, out, NULL, 0);
}

bool
pol_cidr_contains(const struct pol_cidr *c, const struct pol_addr *a)
{
	int		 n, full, rest;

	if (c == NULL || a == NULL || c->addr.family != a->family)
		return false;
	n = addr_len(a->family);
	if (n == 0 || c->prefix > n * 8)
		return false;
	full = c->prefix / 8;
	rest = c->prefix % 8;
	if (memcmp(c->addr.a, a->a, (size_t)full) != 0)
		return false;
	if (rest != 0 && ((c->addr.a[full] ^ a->a[full]) &
	    (uint8_t)(0xff << (8 - rest))) != 0)
		return false;
	return true;
}

static enum pol_addr_class
lookup(const struct class_range *t, size_t n, const struct pol_addr *a,
    enum pol_addr_class dflt)
{
	size_t	 i;

	for (i = 0; i < n; i++)
		if (pol_cidr_contains(&t[i].c, a))
			return t[i].cls;
	return dflt;
}

static enum pol_addr_class
class_v4(const struct pol_addr *a)
{
	return lookup(v4_classes, NELEM(v4_classes), a, POL_ADDR_PUBLIC);
}

static bool
all_zero(const uint8_t *p, size_t n)
{
	while (n-- > 0)
		if (*p++ != 0)
			return false;
	return true;
}

/*
 * Which IPv4-in-IPv6 form, if any, a is, and the IPv4 it carries. :: and
 * ::1 are not "compatible" addresses: they have classes of their own.
 */
static enum pol_addr_embed
unwrap(const struct pol_addr *a, struct pol_addr *inner)
{
	static const uint8_t	 nat64[] = { 0x00, 0x64, 0xff, 0x9b };
	const uint8_t		*b = a->a;
	enum pol_addr_embed	 e = POL_EMBED_NONE;
	int			 i, off = 12;

	if (all_zero(b, 10) && b[10] == 0xff && b[11] == 0xff)
		e = POL_EMBED_MAPPED;
	else if (all_zero(b, 12) && !(all_zero(b + 12, 3) && b[15] <= 1))
		e = POL_EMBED_COMPAT;
	else if (memcmp(b, nat64, 4) == 0 && all_zero(b + 4, 8))
		e = POL_EMBED_NAT64;
	/*
	 * 64:ff9b:1::/48 (RFC 8215) may be cut into longer prefixes; /96,
	 * the IPv4 in the last 32 bits, is the common use. Whatever is
	 * inside, the outer class is RESERVED, so a different cut only
	 * changes the reported class, never the verdict.
	 */
	else if (memcmp(b, nat64, 4) == 0 && b[4] == 0x00 && b[5] == 0x01)
		e = POL_EMBED_NAT64_LOCAL;
	else if (b[0] == 0x20 && b[1] == 0x02) {
		e = POL_EMBED_6TO4;
		off = 2;
	} else if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0)
		e = POL_EMBED_TEREDO;
	if (e == POL_EMBED_NONE)
		return e;
	memset(inner, 0, sizeof(*inner));
	inner->family = AF_INET;
	for (i = 0; i < 4; i++)
		inner->a[i] = e == POL_EMBED_TEREDO ? (uint8_t)~b[off + i] :
		    b[off + i];
	return e;
}

static enum pol_addr_class
class_v6(const struct pol_addr *a)
{
	enum pol_addr_class	 c;

	c = lookup(v6_classes, NELEM(v6_classes), a, POL_ADDR__COUNT);
	if (c != POL_ADDR__COUNT)
		return c;
	/* Global unicast is 2000::/3; the rest is unallocated. */
	return (a->a[0] & 0xe0) == 0x20 ? POL_ADDR_PUBLIC : POL_ADDR_RESERVED;
}

/* treat_as_public may lift every class but these four. */
static bool
overridable(enum pol_addr_class c)
{
	return c != POL_ADDR_METADATA && c != POL_ADDR_LOOPBACK &&
	    c != POL_ADDR_LINK_LOCAL && c != POL_ADDR_UNSPECIFIED &&
	    c < POL_ADDR__COUNT;
}

static bool
in_any(const struct pol_cidr *t, size_t n, const struct pol_addr *a)
{
	size_t	 i;

	for (i = 0; i < n && t != NULL; i++)
		if (pol_cidr_contains(&t[i], a))
			return true;
	return false;
}

/* Applies treat_as_public to one component; *lifted says it did. */
static enum pol_addr_class
lift(enum pol_addr_class c, const struct pol_addr *a,
    const struct pol_cidr *treat, size_t ntreat, bool *lifted)
{
	if (c == POL_ADDR_PUBLIC || !overridable(c) ||
	    !in_any(treat, ntreat, a))
		return c;
	*lifted = true;
	return POL_ADDR_PUBLIC;
}

void
pol_addr_classify(const struct pol_addr *a,
    const struct pol_cidr *treat_as_public, size_t ntreat,
    struct pol_addr_info *out)
{
	enum pol_addr_class	 outer, in;
	bool			 lifted = false;

	if (out == NULL)
		return;
	memset(out, 0, sizeof(*out));
	/* An address we cannot read is denied, never guessed at. */
	out->cls = POL_ADDR_RESERVED;
	if (a == NULL || addr_len(a->family) == 0)
		return;
	if (a->family == AF_INET) {
		out->cls = lift(class_v4(a), a, treat_as_public, ntreat,
		    &lifted);
	} else {
		outer = class_v6(a);
		out->embed = unwrap(a, &out->inner);
		if (out->embed != POL_EMBED_NONE && outer == POL_ADDR_PUBLIC)
			outer = POL_ADDR_RESERVED;
		/*
		 * Each part is lifted by the ranges that contain it: lifting
		 * 64:ff9b::/96 as a whole must not make 64:ff9b::a00:1 (an
		 * IPv4 private address) public unless 10/8 is lifted too.
		 */
		outer = lift(outer, a, treat_as_public, ntreat, &lifted);
		out->cls = outer;
		if (out->embed != POL_EMBED_NONE) {
			in = lift(class_v4(&out->inner), &out->inner,
			    treat_as_public, ntreat, &lifted);
			if (class_rank[in] > class_rank[outer])
				out->cls = in;
		}
	}
	out->treated_public = lifted && out->cls == POL_ADDR_PUBLIC;
}

const char *
pol_addr_class_name(enum pol_addr_class c)
{
	if ((unsigned int)c >= POL_ADDR__COUNT)
		return "invalid";
	return class_names[c];
}

bool
pol_addr_class_always_denied(enum pol_addr_class c)
{
	switch (c) {
	case POL_ADDR_METADATA:
	case POL_ADDR_LOOPBACK:
	case POL_ADDR_UNSPECIFIED:
	case POL_ADDR_LINK_LOCAL:
	case POL_ADDR_MULTICAST:
	case POL_ADDR_RESERVED:
		return true;
	case POL_ADDR_PUBLIC:
	case POL_ADDR_PRIVATE:
	case POL_ADDR_CGNAT:
	case POL_ADDR_DOCUMENTATION:
	case POL_ADDR_BENCHMARKING:
	case POL_ADDR_ULA:
		return false;
	default:
		/* A value outside the enum is a bug upstream: deny. */
		return true;
	}
}

bool
pol_addr_class_private(enum pol_addr_class c)
{
	switch (c) {
	case POL_ADDR_PRIVATE:
	case POL_ADDR_CGNAT:
	case POL_ADDR_DOCUMENTATION:
	case POL_ADDR_BENCHMARKING:
	case POL_ADDR_ULA:
		return true;
	default:
		return false;
	}
}

/* The v4 or v6 table of a family, its length in *n (n may be NULL). */
static const struct pol_cidr *
ranges_of(int family, const struct pol_cidr *v4, size_t n4,
    const struct pol_cidr *v6, size_t n6, size_t *n)
{
	size_t	 dummy;

	if (n == NULL)
		n = &dummy;
	if (family == AF_INET) {
		*n = n4;
		return v4;
	}
	if (family == AF_INET6) {
		*n = n6;
		return v6;
	}
	*n = 0;
	errno = EAFNOSUPPORT;
	return NULL;
}

const struct pol_cidr *
pol_deny_ranges(int family, size_t *n)
{
	return ranges_of(family, v4_deny, NELEM(v4_deny), v6_deny,
	    NELEM(v6_deny), n);
}

const struct pol_cidr *
pol_private_ranges(int family, size_t *n)
{
	return ranges_of(family, v4_private, NELEM(v4_private), v6_private,
	    NELEM(v6_private), n);
}
