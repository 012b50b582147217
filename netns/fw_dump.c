/*
 * fw_dump.c: reading the table back from the kernel.
 *
 * Why this file exists: some answers only the kernel has: which sandboxes
 * a table holds after a restart (fw_list_sandboxes), how many elements a
 * set holds for a sandbox (fw_count_elems, for reconciliation and tests),
 * how long a learned element has left (fw_elem_expiration), and what a
 * sandbox's own set holds when its statics or keep rules are replaced.
 * This file holds those requests and the dump helpers the other files
 * build on (fw_dump_set, fw_each_elem, fw_del_roles); the handle's own
 * record of what it added is fw_index.c's.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/set.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

/* ---------------------------------------------------------------- dumps */

static int
dump_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nftnl_set	*s = arg;

	if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0)
		return MNL_CB_ERROR;
	return MNL_CB_OK;
}

/* Dumps the elements of set into a new nftnl_set (caller frees), NULL with
 * errno on failure. */
struct nftnl_set *
fw_dump_set(struct fw *fw, const char *set)
{
	struct nftnl_set	*s, *q;
	struct nlmsghdr		*nlh;

	if ((q = nftnl_set_alloc()) == NULL)
		return NULL;
	nftnl_set_set_str(q, NFTNL_SET_TABLE, fw->table);
	nftnl_set_set_str(q, NFTNL_SET_NAME, set);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETSETELEM, NFPROTO_INET,
	    NLM_F_DUMP, fw->seq++);
	nftnl_set_elems_nlmsg_build_payload(nlh, q);
	nftnl_set_free(q);
	if ((s = nftnl_set_alloc()) == NULL)
		return NULL;
	if (fw_request(fw, nlh, dump_cb, s) == -1) {
		int saved = errno;

		nftnl_set_free(s);
		errno = saved;
		return NULL;
	}
	return s;
}

/* Calls fn for every element of s; stops when fn returns non-zero. */
void
fw_each_elem(struct nftnl_set *s, int (*fn)(struct nftnl_set_elem *, void *),
    void *arg)
{
	struct nftnl_set_elems_iter	*it;
	struct nftnl_set_elem		*e;

	if ((it = nftnl_set_elems_iter_create(s)) == NULL)
		return;
	while ((e = nftnl_set_elems_iter_next(it)) != NULL)
		if (fn(e, arg) != 0)
			break;
	nftnl_set_elems_iter_destroy(it);
}

int
fw_key_has_ifname(struct nftnl_set_elem *e, const char *ifname)
{
	const uint8_t	*key;
	uint32_t	 klen = 0;
	char		 name[FW_IFNAMSIZ] = { 0 };

	if (ifname == NULL)
		return 1;
	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	if (key == NULL || klen < FW_IFNAMSIZ)
		return 0;
	memcpy(name, ifname, strnlen(ifname, FW_IFNAMSIZ - 1));
	return memcmp(key, name, FW_IFNAMSIZ) == 0;
}

/* The role of a per-sandbox set element (0 if the key is not ours). */
uint32_t
fw_elem_role(struct nftnl_set_elem *e)
{
	const uint8_t	*key;
	uint32_t	 klen = 0, role;

	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	if (key == NULL || klen != FW_SBX_KEYLEN)
		return 0;
	memcpy(&role, key, 4);
	return ntohl(role);
}

/* fw_each_elem callback: queues the deletion of an element whose role the
 * context wants (interval elements only: a sandbox's set holds no other). */
int
fw_del_roles(struct nftnl_set_elem *e, void *arg)
{
	struct fw_rdel_ctx	*c = arg;
	const void	*key, *kend;
	uint32_t	 klen = 0, elen = 0;

	if (!c->want(fw_elem_role(e)))
		return 0;
	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	kend = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END) ?
	    nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &elen) : NULL;
	if (kend == NULL || elen != klen)
		return 0;
	fw_eq_add(c->q, key, klen, kend, 0, 0, NULL);
	return 0;
}

/* ------------------------------------------------------- reconciliation */

struct list_ctx {
	void	(*cb)(const char *, const uint8_t [4], void *);
	void	 *arg;
	int	  n;
};

static int
list_one(struct nftnl_set_elem *e, void *arg)
{
	struct list_ctx	*c = arg;
	const uint8_t	*key;
	uint32_t	 klen = 0;
	char		 name[FW_IFNAMSIZ];

	key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &klen);
	if (key == NULL || klen != FW_IFNAMSIZ + 4)
		return 0;
	memcpy(name, key, FW_IFNAMSIZ);
	name[FW_IFNAMSIZ - 1] = '\0';
	if (c->cb != NULL)
		c->cb(name, key + FW_IFNAMSIZ, c->arg);
	c->n++;
	return 0;
}

int
fw_list_sandboxes(struct fw *fw, void (*cb)(const char *ifname,
    const uint8_t addr4[4], void *arg), void *arg, char *err, size_t errlen)
{
	struct nftnl_set	*s;
	struct list_ctx		 c = { cb, arg, 0 };

	if (fw == NULL) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_list_sandboxes: invalid arguments");
		return -1;
	}
	if ((s = fw_dump_set(fw, "sbx4")) == NULL) {
		fw_seterr(err, errlen, "fw_list_sandboxes: %s",
		    strerror(errno));
		return -1;
	}
	fw_each_elem(s, list_one, &c);
	nftnl_set_free(s);
	return c.n;
}

struct count_ctx {
	const char	*ifname;
	int		 n;
};

static int
count_one(struct nftnl_set_elem *e, void *arg)
{
	struct count_ctx	*c = arg;

	if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS) &&
	    (nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS) &
	    NFT_SET_ELEM_INTERVAL_END))
		return 0;
	if (fw_key_has_ifname(e, c->ifname))
		c->n++;
	return 0;
}

/* What fw_count_elems calls the roles of the per-sandbox sets (the names
 * the shared sets had before they moved there). */
static const struct {
	const char	*name;
	uint32_t	 role;
} role_names[] = {
	{ "allow4", FW_R_ALLOW4 }, { "allow6", FW_R_ALLOW6 },
	{ "pallow4", FW_R_PALLOW4 }, { "pallow6", FW_R_PALLOW6 },
	{ "sbx_deny4", FW_R_DENY4 }, { "sbx_deny6", FW_R_DENY6 },
	{ "icmp4", FW_R_ICMP4 }, { "keep4", FW_R_KEEP4 },
	{ "keep6", FW_R_KEEP6 }, { "lrange4", FW_R_LRANGE4 },
	{ "lrange6", FW_R_LRANGE6 }, { "lkrange4", FW_R_LKRANGE4 },
	{ "lkrange6", FW_R_LKRANGE6 }, { "pkeep4", FW_R_PKEEP4 },
	{ "pkeep6", FW_R_PKEEP6 }, { NULL, 0 }
};

static uint32_t
role_of(const char *name)
{
	size_t	i;

	for (i = 0; name != NULL && role_names[i].name != NULL; i++)
		if (strcmp(role_names[i].name, name) == 0)
			return role_names[i].role;
	return 0;
}

struct role_ctx {
	uint32_t	role;
	int		n;
};

static int
role_one(struct nftnl_set_elem *e, void *arg)
{
	struct role_ctx	*c = arg;

	if (fw_elem_role(e) == c->role)
		c->n++;
	return 0;
}

/* Elements of role in sandbox ifname's set (0 if it has none), or -1. */
static int
count_role(struct fw *fw, const char *ifname, uint32_t role)
{
	struct nftnl_set	*s;
	struct role_ctx		 c = { role, 0 };
	char			 set[FW_NAMEMAX];

	if (!fw_valid_ifname(ifname))
		return 0;
	fw_sbx_names(ifname, set, NULL);
	if ((s = fw_dump_set(fw, set)) == NULL)
		return errno == ENOENT ? 0 : -1;
	fw_each_elem(s, role_one, &c);
	nftnl_set_free(s);
	return c.n;
}

struct names_ctx {
	char	(*v)[FW_IFNAMSIZ];
	size_t	  n, cap;
	int	  oom;
};

static void
names_add(const char *ifname, const uint8_t addr4[4], void *arg)
{
	struct names_ctx	*c = arg;
	char			(*v)[FW_IFNAMSIZ];

	(void)addr4;
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 64;
		if ((v = reallocarray(c->v, c->cap, sizeof(*v))) == NULL) {
			c->oom = 1;
			return;
		}
		c->v = v;
	}
	snprintf(c->v[c->n++], FW_IFNAMSIZ, "%s", ifname);
}

/* count_role over ifname, or over every registered sandbox when NULL. */
static int
count_role_all(struct fw *fw, const char *ifname, uint32_t role)
{
	struct names_ctx	c = { NULL, 0, 0, 0 };
	size_t			i;
	int			n, total = 0;

	if (ifname != NULL)
		return count_role(fw, ifname, role);
	if (fw_list_sandboxes(fw, names_add, &c, NULL, 0) == -1)
		return -1;
	for (i = 0; i < c.n && !c.oom; i++) {
		if ((n = count_role(fw, c.v[i], role)) == -1) {
			free(c.v);
			return -1;
		}
		total += n;
	}
	free(c.v);
	if (c.oom) {
		errno = ENOMEM;
		return -1;
	}
	return total;
}

int
fw_count_elems(struct fw *fw, const char *set, const char *ifname, char *err,
    size_t errlen)
{
	const struct fw_setdef	*d;
	struct nftnl_set	*s;
	struct count_ctx	 c = { ifname, 0 };
	uint32_t		 role;
	int			 n;

	if (fw == NULL || set == NULL) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_count_elems: invalid arguments");
		return -1;
	}
	d = fw_setdef(set);
	role = role_of(d != NULL ? d->also : set);
	if (d == NULL && role == 0) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_count_elems: invalid arguments");
		return -1;
	}
	if (d != NULL) {
		if ((s = fw_dump_set(fw, d->name)) == NULL) {
			fw_seterr(err, errlen, "fw_count_elems: %s",
			    strerror(errno));
			return -1;
		}
		fw_each_elem(s, count_one, &c);
		nftnl_set_free(s);
	}
	/* A learned hash set and its ranges in the sandboxes' sets count
	 * as one, as do the names of the roles there. */
	if (role != 0) {
		if ((n = count_role_all(fw, ifname, role)) == -1) {
			fw_seterr(err, errlen, "fw_count_elems: %s",
			    strerror(errno));
			return -1;
		}
		c.n += n;
	}
	return c.n;
}

/* ---------------------------------------------------------- one element */

static int
exp_cb(const struct nlmsghdr *nlh, void *arg)
{
	int64_t			*exp = arg;
	struct nftnl_set	*s;
	struct nftnl_set_elem	*e;
	struct nftnl_set_elems_iter *it;

	if ((s = nftnl_set_alloc()) == NULL)
		return MNL_CB_ERROR;
	if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0) {
		nftnl_set_free(s);
		return MNL_CB_ERROR;
	}
	if ((it = nftnl_set_elems_iter_create(s)) != NULL) {
		if ((e = nftnl_set_elems_iter_next(it)) != NULL)
			*exp = nftnl_set_elem_is_set(e,
			    NFTNL_SET_ELEM_EXPIRATION) ?
			    (int64_t)nftnl_set_elem_get_u64(e,
			    NFTNL_SET_ELEM_EXPIRATION) : 0;
		nftnl_set_elems_iter_destroy(it);
	}
	nftnl_set_free(s);
	return MNL_CB_OK;
}

int64_t
fw_elem_expiration(struct fw *fw, const struct fw_elem *e, char *err,
    size_t errlen)
{
	struct nftnl_set	*s;
	struct nftnl_set_elem	*el;
	struct nlmsghdr		*nlh;
	struct fw_key		 lo, hi;
	int64_t			 exp = -1;
	int			 range;
	char			 set[FW_NAMEMAX];

	if (fw == NULL || e == NULL || (e->family != AF_INET &&
	    e->family != AF_INET6) || !fw_valid_ifname(e->ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_elem_expiration: invalid arguments");
		return -1;
	}
	/* One GETSETELEM for this key (no dump): the cost does not grow
	 * with the set. */
	range = e->port_lo != e->port_hi;
	if (range) {
		size_t alen = e->family == AF_INET ? 4 : 16;
		uint32_t role = e->family == AF_INET ? FW_R_LRANGE4 :
		    FW_R_LRANGE6;

		fw_key_sbx(&lo, role, e->addr, alen, e->proto, e->port_lo);
		fw_key_sbx(&hi, role, e->addr, alen, e->proto, e->port_hi);
		fw_sbx_names(e->ifname, set, NULL);
	} else {
		fw_elem_keys(e, &lo, &hi);
		snprintf(set, sizeof(set), "%s", e->family == AF_INET ?
		    "learned4" : "learned6");
	}
	if ((s = nftnl_set_alloc()) == NULL ||
	    (el = nftnl_set_elem_alloc()) == NULL) {
		nftnl_set_free(s);
		errno = ENOMEM;
		fw_seterr(err, errlen, "fw_elem_expiration: out of memory");
		return -1;
	}
	nftnl_set_set_str(s, NFTNL_SET_TABLE, fw->table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, lo.b, (uint32_t)lo.len);
	if (range)
		nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY_END, hi.b,
		    (uint32_t)hi.len);
	nftnl_set_elem_add(s, el);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETSETELEM, NFPROTO_INET,
	    NLM_F_ACK, fw->seq++);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	if (fw_request(fw, nlh, exp_cb, &exp) == -1) {
		if (errno == ENOENT)
			fw_seterr(err, errlen, "fw_elem_expiration: no such "
			    "element");
		else
			fw_seterr(err, errlen, "fw_elem_expiration: %s",
			    strerror(errno));
		return -1;
	}
	if (exp < 0) {
		errno = ENOENT;
		fw_seterr(err, errlen, "fw_elem_expiration: no such element");
	}
	return exp;
}
