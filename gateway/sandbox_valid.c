/*
 * sandbox_valid.c: the pure half of the sandbox manager: what a create
 * request may contain (ids, subjects, labels, TTLs) and which pool slot a
 * sandbox gets. It is apart from sandbox.c so that the unit tests exercise
 * exactly the code the daemon runs, without a kernel or a database, and so
 * that every rule about hostile input is in one short file.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>

#include "gateway/sandbox.h"
#include "gateway/sandbox_int.h"

static int
is_lower_alnum(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int
is_alnum(int c)
{
	return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* A word of the request's identifiers: a first character alphanumeric
 * (upper case only when upper), then fewer than max in all of those or
 * of extra. */
static int
word_valid(const char *s, int upper, size_t max, const char *extra)
{
	int (*cls)(int) = upper ? is_alnum : is_lower_alnum;
	size_t i;

	if (s == NULL || !cls((unsigned char)s[0]))
		return 0;
	for (i = 1; s[i] != '\0'; i++) {
		if (i >= max)
			return 0;
		if (!cls((unsigned char)s[i]) && strchr(extra, s[i]) == NULL)
			return 0;
	}
	return 1;
}

int
sbx_id_valid(const char *id)
{
	return word_valid(id, 0, SBX_ID_MAX, "-");
}

int
sbx_subject_valid(const char *s)
{
	/* No glob characters: policies match subjects with globs, and a
	 * subject must never be a pattern itself. */
	return word_valid(s, 1, SBX_SUBJECT_MAX, "._@+:/-");
}

int
sbx_label_key_valid(const char *k)
{
	return word_valid(k, 0, SBX_LABEL_KEY_MAX, "._/-");
}

int
sbx_label_value_valid(const char *v)
{
	size_t i;

	if (v == NULL)
		return 0;
	for (i = 0; v[i] != '\0'; i++) {
		if (i >= SBX_LABEL_VALUE_MAX)
			return 0;
		if (!is_alnum((unsigned char)v[i]) &&
		    strchr("._:/@+=-", v[i]) == NULL)
			return 0;
	}
	return 1;
}

/*
 * flat_strings: s is a JSON object whose members are all strings of
 * printable ASCII without escapes, as json_dumps writes every label set a
 * create accepts. Strictly less than jansson parses, so that a row it calls
 * well-formed is never one jansson would refuse for its syntax.
 */
static int
flat_strings(const char *s)
{
	int i, members = 0;

#define WS()	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++
	WS();
	if (*s++ != '{')
		return 0;
	WS();
	if (*s == '}')
		goto end;
	for (;;) {
		/* A key, then its value: two plain strings. */
		for (i = 0; i < 2; i++) {
			if (*s++ != '"')
				return 0;
			while (*s != '"') {
				if (*s < 0x20 || *s > 0x7e || *s == '\\')
					return 0;
				s++;
			}
			s++;
			WS();
			if (i == 0) {
				if (*s++ != ':')
					return 0;
				WS();
			}
		}
		members++;
		if (*s == '}')
			break;
		if (*s++ != ',')
			return 0;
		WS();
	}
end:
	s++;
	WS();
#undef WS
	return *s == '\0' && members <= SBX_LABELS_MAX;
}

/* The rules of a label set of n members, and of one member (v NULL: the
 * value is not a string): -1 with the problem in err. */
static int
labels_count_bad(size_t n, char *err, size_t errlen)
{
	if (n <= SBX_LABELS_MAX)
		return 0;
	snprintf(err, errlen, "labels: more than %d", SBX_LABELS_MAX);
	return -1;
}

static int
label_bad(const char *k, const char *v, char *err, size_t errlen)
{
	if (!sbx_label_key_valid(k)) {
		snprintf(err, errlen, "labels: bad key (want "
		    "[a-z0-9][a-z0-9._/-]{0,62})");
		return -1;
	}
	if (!sbx_label_value_valid(v)) {
		snprintf(err, errlen, "labels.%s: bad value (want a string of "
		    "at most %d of [A-Za-z0-9._:/@+=-])", k,
		    SBX_LABEL_VALUE_MAX);
		return -1;
	}
	return 0;
}

int
sbx_labels_check(const json_t *labels, char *err, size_t errlen)
{
	const char *k, *val;
	json_t *v;

	if (labels == NULL || json_is_null(labels))
		return 0;
	if (!json_is_object(labels)) {
		snprintf(err, errlen, "labels: must be an object");
		return -1;
	}
	if (labels_count_bad(json_object_size(labels), err, errlen) == -1)
		return -1;
	/* jansson's iteration macro takes a non-const object. */
	json_object_foreach((json_t *)labels, k, v) {
		/* An embedded NUL would make the value another string
		 * than the one the client sent: refuse it. */
		val = json_is_string(v) && strlen(json_string_value(v)) ==
		    json_string_length(v) ? json_string_value(v) : NULL;
		if (label_bad(k, val, err, errlen) == -1)
			return -1;
	}
	return 0;
}

json_t *
sbx_labels_json(size_t n, const char keys[][SBX_LABEL_KEY_MAX + 1],
    const char values[][SBX_LABEL_VALUE_MAX + 1])
{
	json_t *o;
	size_t i;

	if ((o = json_object()) == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		if (json_object_set_new(o, keys[i], json_string(values[i])) ==
		    -1) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* A string field of a spec: terminated within its array. */
#define TERMINATED(a)	(memchr((a), '\0', sizeof(a)) != NULL)

static void
ttl_range(char *err, size_t errlen)
{
	snprintf(err, errlen, "ttl: must be between 1s and %ud",
	    SBX_TTL_MAX_S / 86400);
}

int
sbx_spec_check(const struct sbx_spec *spec, char *err, size_t errlen)
{
	size_t i, j;

	if (!TERMINATED(spec->id) ||
	    (spec->id[0] != '\0' && !sbx_id_valid(spec->id))) {
		snprintf(err, errlen, SBX_ID_WANT);
		return -1;
	}
	if (!TERMINATED(spec->subject) || !sbx_subject_valid(spec->subject)) {
		snprintf(err, errlen, SBX_SUBJECT_WANT);
		return -1;
	}
	if (labels_count_bad(spec->nlabels, err, errlen) == -1)
		return -1;
	for (i = 0; i < spec->nlabels; i++) {
		if (!TERMINATED(spec->label_keys[i]) ||
		    !TERMINATED(spec->label_values[i])) {
			snprintf(err, errlen, "labels: a key or value is not "
			    "terminated");
			return -1;
		}
		if (label_bad(spec->label_keys[i], spec->label_values[i], err,
		    errlen) == -1)
			return -1;
		for (j = 0; j < i; j++) {
			if (strcmp(spec->label_keys[i],
			    spec->label_keys[j]) == 0) {
				snprintf(err, errlen, "labels.%s: given twice",
				    spec->label_keys[i]);
				return -1;
			}
		}
	}
	if (spec->ttl_s > SBX_TTL_MAX_S) {
		ttl_range(err, errlen);
		return -1;
	}
	if (!TERMINATED(spec->policy) || spec->policy[0] == '\0') {
		snprintf(err, errlen, SBX_POLICY_WANT);
		return -1;
	}
	if (!TERMINATED(spec->attach) || (spec->attach[0] != '\0' &&
	    !ns_attach_path_valid(spec->attach))) {
		snprintf(err, errlen, SBX_ATTACH_WANT);
		return -1;
	}
	return 0;
}

int
sbx_ttl_parse_str(const char *s, uint32_t *secs, char *err, size_t errlen)
{
	unsigned long long n = 0, mul = 1;
	size_t i, len;

	if (s == NULL || (len = strlen(s)) == 0 || len > 16) {
		snprintf(err, errlen, "ttl: empty or too long");
		return -1;
	}
	switch (s[len - 1]) {
	case 's': mul = 1; len--; break;
	case 'm': mul = 60; len--; break;
	case 'h': mul = 3600; len--; break;
	case 'd': mul = 86400; len--; break;
	default: break;
	}
	if (len == 0 || (s[0] == '0' && len > 1)) {
		snprintf(err, errlen, "ttl: want <n>[s|m|h|d]");
		return -1;
	}
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			snprintf(err, errlen, "ttl: want <n>[s|m|h|d]");
			return -1;
		}
		n = n * 10 + (unsigned)(s[i] - '0');
		/* 15 digits cannot overflow; stop as soon as it is too big. */
		if (n > SBX_TTL_MAX_S)
			break;
	}
	if (n == 0 || n > SBX_TTL_MAX_S / mul) {
		ttl_range(err, errlen);
		return -1;
	}
	*secs = (uint32_t)(n * mul);
	return 0;
}

int
sbx_ttl_parse(const json_t *v, uint32_t *secs, char *err, size_t errlen)
{
	json_int_t n;

	if (json_is_string(v)) {
		if (strlen(json_string_value(v)) != json_string_length(v)) {
			snprintf(err, errlen, "ttl: want <n>[s|m|h|d]");
			return -1;
		}
		return sbx_ttl_parse_str(json_string_value(v), secs, err,
		    errlen);
	}
	if (!json_is_integer(v)) {
		snprintf(err, errlen, "ttl: want seconds or a duration string");
		return -1;
	}
	n = json_integer_value(v);
	if (n < 1 || n > (json_int_t)SBX_TTL_MAX_S) {
		ttl_range(err, errlen);
		return -1;
	}
	*secs = (uint32_t)n;
	return 0;
}

int
sbx_policy_name_valid(const char *s)
{
	/* policy/'s rule for a policy's name: only a loaded policy can be
	 * named in a create. */
	return word_valid(s, 0, SBX_POLICY_MAX, "_-");
}

static int
is_token(const char *t)
{
	size_t i;

	for (i = 0; i < SBX_TOKEN_HEX; i++)
		if (!((t[i] >= '0' && t[i] <= '9') ||
		    (t[i] >= 'a' && t[i] <= 'f')))
			return 0;
	return t[i] == '\0';
}

int
sbx_rec_valid(const struct sbx_rec *r, char *err, size_t errlen)
{
	json_error_t je;
	json_t *l;
	char e[256];
	int rc;

	/* Nothing of r is quoted: a row that fails here was not written
	 * by us, and its text goes nowhere. */
	if (memchr(r->id, '\0', sizeof(r->id)) == NULL ||
	    !sbx_id_valid(r->id)) {
		snprintf(err, errlen, "bad id");
		errno = EINVAL;
		return -1;
	}
	if (memchr(r->policy, '\0', sizeof(r->policy)) == NULL ||
	    !sbx_policy_name_valid(r->policy)) {
		snprintf(err, errlen, "bad policy name");
		errno = EINVAL;
		return -1;
	}
	if (memchr(r->subject, '\0', sizeof(r->subject)) == NULL ||
	    !sbx_subject_valid(r->subject)) {
		snprintf(err, errlen, "bad subject");
		errno = EINVAL;
		return -1;
	}
	if (memchr(r->token, '\0', sizeof(r->token)) == NULL ||
	    !is_token(r->token)) {
		snprintf(err, errlen, "bad token");
		errno = EINVAL;
		return -1;
	}
	if (r->created <= 0 || r->expires < 0 || (r->expires > 0 &&
	    (r->expires <= r->created ||
	    r->expires - r->created > (int64_t)UINT32_MAX))) {
		snprintf(err, errlen, "bad created or expires time");
		errno = EINVAL;
		return -1;
	}
	if (r->tainted != 0 && r->tainted != 1) {
		snprintf(err, errlen, "bad taint mark");
		errno = EINVAL;
		return -1;
	}
	/* Attached: a path and an identity, and only bits ns_attach sets;
	 * not attached: none of it. */
	if (memchr(r->attach_src, '\0', sizeof(r->attach_src)) == NULL ||
	    (r->attached != 0 && r->attached != 1) ||
	    (r->attached && (!ns_attach_path_valid(r->attach_src) ||
	    r->ns_ino == 0 || (r->prior & ~NS_PRIOR_MASK) != 0)) ||
	    (!r->attached && (r->attach_src[0] != '\0' || r->prior != 0 ||
	    r->ns_dev != 0 || r->ns_ino != 0))) {
		snprintf(err, errlen, "bad attach columns");
		errno = EINVAL;
		return -1;
	}
	if (memchr(r->labels, '\0', sizeof(r->labels)) == NULL) {
		snprintf(err, errlen, "labels: not JSON");
		errno = EINVAL;
		return -1;
	}
	if ((l = json_loads(r->labels, JSON_REJECT_DUPLICATES, &je)) == NULL) {
		/* A parse that fails for lack of memory says nothing of the
		 * row, which a restart must then not drop as bad. jansson
		 * does not always say so: its lexer reports a string it
		 * could not allocate as "invalid token". Text of the shape
		 * every row is written in parses, given memory. */
		if (je.text[0] == '\0' ||
		    json_error_code(&je) == json_error_out_of_memory ||
		    (json_error_code(&je) != json_error_duplicate_key &&
		    flat_strings(r->labels))) {
			snprintf(err, errlen, "labels: out of memory");
			errno = ENOMEM;
			return -1;
		}
		snprintf(err, errlen, "labels: not JSON");
		errno = EINVAL;
		return -1;
	}
	rc = json_is_object(l) ? sbx_labels_check(l, e, sizeof(e)) : -1;
	json_decref(l);
	if (rc == -1) {
		snprintf(err, errlen, "labels: not what a create accepts");
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ slots */

struct sbx_slots {
	uint32_t	 n;
	uint32_t	 used;
	uint32_t	 hint;		/* no free slot below this one */
	uint64_t	*bits;
};

struct sbx_slots *
sbx_slots_new(uint32_t n)
{
	struct sbx_slots *s;

	if (n == 0 || n > SBX_SLOTS_MAX) {
		errno = EINVAL;
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	if ((s->bits = calloc((n + 63) / 64, sizeof(*s->bits))) == NULL) {
		free(s);
		return NULL;
	}
	s->n = n;
	return s;
}

void
sbx_slots_free(struct sbx_slots *s)
{
	if (s == NULL)
		return;
	free(s->bits);
	free(s);
}

int
sbx_slots_used(const struct sbx_slots *s, uint32_t i)
{
	if (i >= s->n)
		return 0;
	return (s->bits[i / 64] >> (i % 64)) & 1;
}

int64_t
sbx_slots_alloc(struct sbx_slots *s)
{
	uint32_t w, i;

	/* Word at a time from the hint: lowest free slot without a scan
	 * of the whole map each time. */
	for (w = s->hint / 64; w < (s->n + 63) / 64; w++) {
		if (s->bits[w] == UINT64_MAX)
			continue;
		i = w * 64 + (uint32_t)__builtin_ctzll(~s->bits[w]);
		if (i >= s->n)
			break;
		s->bits[w] |= 1ULL << (i % 64);
		s->used++;
		s->hint = i + 1;
		return i;
	}
	errno = ENOSPC;
	return -1;
}

int
sbx_slots_take(struct sbx_slots *s, uint32_t i)
{
	if (i >= s->n) {
		errno = EINVAL;
		return -1;
	}
	if (sbx_slots_used(s, i)) {
		errno = EEXIST;
		return -1;
	}
	s->bits[i / 64] |= 1ULL << (i % 64);
	s->used++;
	return 0;
}

void
sbx_slots_put(struct sbx_slots *s, uint32_t i)
{
	if (i >= s->n || !sbx_slots_used(s, i))
		return;
	s->bits[i / 64] &= ~(1ULL << (i % 64));
	s->used--;
	if (i < s->hint)
		s->hint = i;
}

uint32_t
sbx_slots_count(const struct sbx_slots *s)
{
	return s->used;
}

uint32_t
sbx_pool_nslots(uint8_t prefix)
{
	uint64_t n;

	/* ns_pool_addrs accepts 1..29; the last /30 is the service's. */
	if (prefix < 1 || prefix > 29)
		return 0;
	n = (1ULL << (32 - prefix)) / 4 - 1;
	return n > SBX_SLOTS_MAX ? SBX_SLOTS_MAX : (uint32_t)n;
}

static uint32_t
be32(const uint8_t a[4])
{
	return (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 |
	    (uint32_t)a[2] << 8 | a[3];
}

int64_t
sbx_pool_slot(const uint8_t pool4[4], uint8_t prefix, const uint8_t addr4[4])
{
	uint32_t net = be32(pool4), a = be32(addr4), mask, off;

	if (prefix < 1 || prefix > 29)
		return -1;
	mask = UINT32_MAX << (32 - prefix);
	if ((a & mask) != (net & mask))
		return -1;
	off = a - (net & mask);
	/* The sandbox is .2 of its /30 (ns_pool_addrs). */
	if (off % 4 != 2 || off / 4 >= sbx_pool_nslots(prefix))
		return -1;
	return off / 4;
}

int
sbx_cidr_subtract(const struct pol_cidr *c, const struct pol_cidr *t,
    size_t nt, struct pol_cidr **out, size_t *n, size_t *cap)
{
	struct pol_cidr half, *nv;
	size_t i, alen = c->addr.family == AF_INET ? 4 : 16;
	int partial = 0;

	for (i = 0; i < nt; i++) {
		if (t[i].addr.family != c->addr.family)
			continue;
		if (t[i].prefix <= c->prefix &&
		    pol_cidr_contains(&t[i], &c->addr))
			return 0;
		if (t[i].prefix > c->prefix &&
		    pol_cidr_contains(c, &t[i].addr))
			partial = 1;
	}
	if (!partial) {
		if (*n == *cap) {
			if ((nv = reallocarray(*out, *cap * 2 + 16,
			    sizeof(*nv))) == NULL)
				return -1;
			*out = nv;
			*cap = *cap * 2 + 16;
		}
		(*out)[(*n)++] = *c;
		return 0;
	}
	/* Partly covered: split in halves until each half is in or out. */
	if (c->prefix >= alen * 8)
		return 0;
	half = *c;
	half.prefix = c->prefix + 1;
	if (sbx_cidr_subtract(&half, t, nt, out, n, cap) == -1)
		return -1;
	half.addr.a[c->prefix / 8] |= (uint8_t)(0x80 >> (c->prefix % 8));
	return sbx_cidr_subtract(&half, t, nt, out, n, cap);
}
