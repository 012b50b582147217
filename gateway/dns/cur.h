/*
 * cur: a cursor over bytes a peer wrote, for the DNS process's readers
 * of wire formats (gateway/dns/peek.c, gateway/dns/ech.c): every read is
 * checked against what is left first, so a length field can never take
 * a reader past its input.
 */
#ifndef SLUICE_GATEWAY_DNS_CUR_H
#define SLUICE_GATEWAY_DNS_CUR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cur {
	const uint8_t	*p;
	size_t		 n;	/* bytes left */
};

/* cur_take: k bytes (at *out unless NULL) and past them; false, with
 * nothing taken, when fewer are left. */
static inline bool
cur_take(struct cur *c, size_t k, const uint8_t **out)
{
	if (c->n < k)
		return false;
	if (out != NULL)
		*out = c->p;
	c->p += k;
	c->n -= k;
	return true;
}

/* cur_u8 / cur_u16: one byte, or two in network order. */
static inline bool
cur_u8(struct cur *c, unsigned *v)
{
	const uint8_t *p;

	if (!cur_take(c, 1, &p))
		return false;
	*v = p[0];
	return true;
}

static inline bool
cur_u16(struct cur *c, unsigned *v)
{
	const uint8_t *p;

	if (!cur_take(c, 2, &p))
		return false;
	*v = (unsigned)p[0] << 8 | p[1];
	return true;
}

#endif /* SLUICE_GATEWAY_DNS_CUR_H */
