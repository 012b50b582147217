/*
 * ech.c: the ECHConfigList of an HTTPS record's `ech` SvcParam, read with
 * every length checked (see ech.h). The layouts (RFC 9460 for the
 * record, the TLS ECH specification for the list):
 *
 *   RDATA       priority(2) target(name) { key(2) len(2) value(len) }*
 *   list        len(2) { version(2) len(2) contents(len) }*
 *   contents    config_id(1) kem(2) public_key<2> suites<2>
 *               maximum_name_length(1) public_name<1> extensions<2>
 */
#include <string.h>

#include "gateway/dns/cur.h"
#include "gateway/dns/ech.h"

/* A length-prefixed field (prefix of w bytes) as its own cursor. */
static bool
vec(struct cur *c, unsigned w, struct cur *out)
{
	unsigned n;

	if (!(w == 1 ? cur_u8(c, &n) : cur_u16(c, &n)))
		return false;
	out->n = n;
	return cur_take(c, n, &out->p);
}

/* One ECHConfigContents, whole. */
static int
contents(struct cur c, struct ech_set *out)
{
	struct ech_config cf;
	struct cur key, suites, name, exts;
	unsigned id, kem, kdf = 0, aead = 0, maxlen;

	memset(&cf, 0, sizeof(cf));
	if (!cur_u8(&c, &id) || !cur_u16(&c, &kem) || !vec(&c, 2, &key) ||
	    key.n == 0 || !vec(&c, 2, &suites) || suites.n == 0 ||
	    suites.n % 4 != 0 || !cur_u8(&c, &maxlen) || !vec(&c, 1, &name) ||
	    name.n == 0 || memchr(name.p, '\0', name.n) != NULL ||
	    !vec(&c, 2, &exts) || c.n != 0)
		return -1;
	(void)maxlen;
	cf.config_id = (uint8_t)id;
	cf.kem = (uint16_t)kem;
	while (suites.n > 0) {
		(void)cur_u16(&suites, &kdf);
		(void)cur_u16(&suites, &aead);
		if (cf.nsuites == ECH_SUITES_MAX) {
			cf.more_suites = true;
			continue;
		}
		cf.suites[cf.nsuites].kdf = (uint16_t)kdf;
		cf.suites[cf.nsuites++].aead = (uint16_t)aead;
	}
	memcpy(cf.public_name, name.p, name.n);	/* < 256: a u8 length */
	cf.public_name[name.n] = '\0';
	if (out->n == ECH_CONFIGS_MAX) {
		out->more = true;
		return 0;
	}
	out->c[out->n++] = cf;
	return 0;
}

int
ech_config_list(const uint8_t *b, size_t len, struct ech_set *out)
{
	struct cur c = { b, len }, list, body;
	unsigned version;

	if (b == NULL || !vec(&c, 2, &list) || c.n != 0 || list.n == 0)
		return -1;
	while (list.n > 0) {
		if (!cur_u16(&list, &version) || !vec(&list, 2, &body))
			return -1;
		/* Another version is another layout: a client that knows it
		 * may use it, so the list is read on, the config skipped. */
		if (version != ECH_VERSION)
			continue;
		if (contents(body, out) == -1)
			return -1;
	}
	return 0;
}

/* A domain name in wire form, uncompressed, within its 255 bytes. */
static bool
dname(struct cur *c)
{
	unsigned l;
	size_t total = 0;

	for (;;) {
		if (!cur_u8(c, &l) || (l & 0xc0) != 0 || !cur_take(c, l, NULL))
			return false;
		total += l + 1;
		if (total > 255)
			return false;
		if (l == 0)
			return true;
	}
}

int
ech_svcb_rdata(const uint8_t *b, size_t len, struct ech_set *out)
{
	struct cur c = { b, len }, val;
	unsigned prio, key;
	long last = -1;

	if (b == NULL || !cur_u16(&c, &prio) || !dname(&c))
		return -1;
	/* AliasMode: the name points elsewhere, and carries no params. */
	if (prio == 0)
		return c.n == 0 ? 0 : -1;
	while (c.n > 0) {
		if (!cur_u16(&c, &key) || !vec(&c, 2, &val) ||
		    (long)key <= last)
			return -1;
		last = (long)key;
		if (key == ECH_PARAM_KEY &&
		    ech_config_list(val.p, val.n, out) == -1)
			return -1;
	}
	return 0;
}

bool
ech_match(const struct ech_set *s, uint8_t config_id, uint16_t kdf,
    uint16_t aead)
{
	size_t i, j;

	for (i = 0; i < s->n; i++) {
		const struct ech_config *c = &s->c[i];

		if (c->config_id != config_id)
			continue;
		if (c->more_suites)
			return true;
		for (j = 0; j < c->nsuites; j++)
			if (c->suites[j].kdf == kdf &&
			    c->suites[j].aead == aead)
				return true;
	}
	return false;
}
