/*
 * fw.c: the fw handle and the nftables table it owns.
 *
 * Why this file exists: the table's shape (which sets it has, with what key
 * and of what size, and which chains) is decided here once, and so are the
 * handle's life (fw_new, fw_free) and the table's: fw_init creates the
 * table, or adopts one an earlier daemon left once it has checked that the
 * layout is this one and the sets are big enough, and fw_destroy removes
 * it. The rules that fill the chains are fw_rules.c's, whose opening
 * comment shows the whole ruleset and says why each set is as big as it
 * is; what a sandbox adds to the table is fw_sandbox.c's, fw_learn.c's and
 * fw_restrict.c's, encoded by fw_elem.c.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netlink.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

/* nft's datatype ids, only so that `nft list` prints our sets readably. */
#define DT_IPADDR	7
#define DT_IP6ADDR	8
#define DT_PROTO	12
#define DT_SERVICE	13
#define DT_IFNAME	41
#define DT_MARK		19

#define FW_GC_INTERVAL_MS	10000

/* ---------------------------------------------------------------- handle */

struct fw *
fw_new(char *err, size_t errlen)
{
	struct fw	*fw;
	int		 one = 1, rcv = 4 << 20;

	if ((fw = calloc(1, sizeof(*fw))) == NULL) {
		fw_seterr(err, errlen, "fw_new: %s", strerror(errno));
		return NULL;
	}
	/* Zeroed: libmnl sends attribute padding as it finds it. */
	if ((fw->buf = calloc(1, FW_BUFSZ)) == NULL)
		goto fail;
	if ((fw->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC)) == NULL)
		goto fail;
	if (mnl_socket_bind(fw->nl, 0, MNL_SOCKET_AUTOPID) == -1)
		goto fail;
	fw->portid = mnl_socket_get_portid(fw->nl);
	/* Short error messages (no echo of our batch), and room for them. */
	(void)mnl_socket_setsockopt(fw->nl, NETLINK_CAP_ACK, &one, sizeof(one));
	(void)mnl_socket_setsockopt(fw->nl, NETLINK_EXT_ACK, &one, sizeof(one));
	if (setsockopt(mnl_socket_get_fd(fw->nl), SOL_SOCKET, SO_RCVBUFFORCE,
	    &rcv, sizeof(rcv)) == -1)
		(void)setsockopt(mnl_socket_get_fd(fw->nl), SOL_SOCKET,
		    SO_RCVBUF, &rcv, sizeof(rcv));
	fw->seq = 1;
	snprintf(fw->table, sizeof(fw->table), "%s", "sluice");
	return fw;
fail:
	fw_seterr(err, errlen, "fw_new: netfilter socket: %s", strerror(errno));
	fw_free(fw);
	return NULL;
}

void
fw_free(struct fw *fw)
{
	int	saved = errno;

	if (fw == NULL)
		return;
	if (fw->nl != NULL)
		mnl_socket_close(fw->nl);
	fw_idx_clear(fw);
	free(fw->buf);
	free(fw->priv);
	free(fw);
	errno = saved;
}

/* ------------------------------------------------------------- the table */

/* Field lengths (unpadded) of each set's key. */
static const uint8_t	K_IF[] = { 16 };
static const uint8_t	K_V4[] = { 4 };
static const uint8_t	K_V6[] = { 16 };
static const uint8_t	K_IF_V4[] = { 16, 4 };
static const uint8_t	K_IF_V6[] = { 16, 16 };
static const uint8_t	K_T4[] = { 16, 4, 1, 2 };
static const uint8_t	K_T6[] = { 16, 16, 1, 2 };
static const uint8_t	DT_IF[] = { DT_IFNAME };
static const uint8_t	DT_V4[] = { DT_IPADDR };
static const uint8_t	DT_V6[] = { DT_IP6ADDR };
static const uint8_t	DT_IF_V4[] = { DT_IFNAME, DT_IPADDR };
static const uint8_t	DT_IF_V6[] = { DT_IFNAME, DT_IP6ADDR };
static const uint8_t	DT_T4[] = { DT_IFNAME, DT_IPADDR, DT_PROTO, DT_SERVICE };
static const uint8_t	DT_T6[] = { DT_IFNAME, DT_IP6ADDR, DT_PROTO, DT_SERVICE };

static const uint8_t	K_IF_MARK[] = { 16, 4 };
static const uint8_t	DT_IF_MARK[] = { DT_IFNAME, DT_MARK };

#define SD(n, k, dt, fl, pers, sz) \
	{ n, NULL, k, dt, sizeof(k), fl, pers, sz, 0, 0 }
#define SA(n, also, k, dt, fl) \
	{ n, also, k, dt, sizeof(k), fl, 1, FW_SZ_LEARNED, 0, 0 }
#define SM(n, k, dt, dtype) \
	{ n, NULL, k, dt, sizeof(k), NFT_SET_MAP, 1, FW_SZ_SBX, dtype, 0 }
#define CI	NFT_SET_INTERVAL
#define TO	NFT_SET_TIMEOUT

/*
 * pers: per-sandbox state, kept across FW_ADOPT; the others are rewritten.
 * Learned destinations with one port (the common `ports: [443]`) live in
 * hash sets: inserting one costs the same at 10 or 100,000 elements,
 * whereas a pipapo (interval) set rebuilds its lookup tables on every
 * change. Only port ranges go to the interval sets. "also" makes
 * fw_count_elems("learned4") count both halves of the learned state.
 * The last column is what the set's size counts (FW_SZ_*, fw_setsize).
 */
const struct fw_setdef fw_sets[] = {
	SD("sbx4", K_IF_V4, DT_IF_V4, 0, 1, FW_SZ_SBX),
	SD("sbx6", K_IF_V6, DT_IF_V6, 0, 1, FW_SZ_SBX),
	SD("deny4", K_V4, DT_V4, NFT_SET_INTERVAL, 0, FW_SZ_RANGES),
	SD("deny6", K_V6, DT_V6, NFT_SET_INTERVAL, 0, FW_SZ_RANGES),
	SD("private4", K_V4, DT_V4, NFT_SET_INTERVAL, 0, FW_SZ_RANGES),
	SD("private6", K_V6, DT_V6, NFT_SET_INTERVAL, 0, FW_SZ_RANGES),
	SD("restricted", K_IF, DT_IF, 0, 1, FW_SZ_SBX),
	SA("learned4", "lrange4", K_T4, DT_T4, TO),
	SA("learned6", "lrange6", K_T6, DT_T6, TO),
	SA("lkeep4", "lkrange4", K_T4, DT_T4, TO),
	SA("lkeep6", "lkrange6", K_T6, DT_T6, TO),
	SD("quota", K_IF, DT_IF, NFT_SET_OBJECT, 1, FW_SZ_SBX),
	SD("sbx_dispatch", K_IF, DT_IF, NFT_SET_MAP, 1, FW_SZ_SBX),
	/* A sandbox's generation: the conntrack mark its new flows get
	 * (prerouting), and the pair its established input must carry. */
	SM("sbx_gen", K_IF, DT_IF, DT_MARK),
	SD("sbx_own", K_IF_MARK, DT_IF_MARK, 0, 1, FW_SZ_SBX),
	/* Per-link log meter (dynamic: the d_* chains add to it; kept
	 * across FW_ADOPT, so a restart resets no budget, and removed with
	 * the sandbox, so the next one on its link starts afresh). */
	SD("logmeter", K_IF, DT_IF, NFT_SET_EVAL | TO, 1, FW_SZ_METER),
	{ NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0 }
};

/* The per-sandbox set s_<ifname> (see fw_int.h for the key layout).
 * Interval because rules are CIDRs and port ranges, timeout because
 * learned port ranges expire; static elements carry no timeout. Small:
 * one sandbox's rules, so its pipapo tables rebuild in microseconds. */
static const uint8_t	K_S[] = { 4, 16, 1, 2 };
static const uint8_t	DT_S[] = { DT_MARK, DT_IP6ADDR, DT_PROTO, DT_SERVICE };
const struct fw_setdef fw_sbx_setdef = {
	FW_SBX_SET, NULL, K_S, DT_S, sizeof(K_S), CI | TO, 1, FW_SZ_OWN, 0, 0
};

/* The bounds of a table made with max sandboxes s and learned cap l. */
static uint32_t
setsize(uint32_t s, uint32_t l, int bound)
{
	uint64_t	n;

	switch (bound) {
	case FW_SZ_SBX:
		return s;
	case FW_SZ_LEARNED:
		n = (uint64_t)s * l;
		return n > (1u << 31) ? 1u << 31 : (uint32_t)n;
	case FW_SZ_RANGES:
		return FW_RANGE_ELEMS;
	case FW_SZ_METER:
		return 2 * s;
	case FW_SZ_OWN:
		return FW_SBX_ELEMS(l);
	}
	return 0;
}

uint32_t
fw_setsize(const struct fw *fw, const struct fw_setdef *d)
{
	return setsize(fw->max_sbx ? fw->max_sbx : FW_MAX_SANDBOXES_DEFAULT,
	    fw->max_learned ? fw->max_learned : FW_MAX_LEARNED_DEFAULT,
	    d->bound);
}

const struct fw_setdef *
fw_setdef(const char *name)
{
	const struct fw_setdef	*d;

	for (d = fw_sets; d->name != NULL; d++)
		if (strcmp(d->name, name) == 0)
			return d;
	return NULL;
}

int
fw_set_index(const char *name)
{
	const struct fw_setdef	*d = fw_setdef(name);

	return d == NULL ? -1 : (int)(d - fw_sets);
}

size_t
fw_keylen(const struct fw_setdef *d)
{
	size_t	i, len = 0;

	for (i = 0; i < d->nfields; i++)
		len += (d->fields[i] + 3u) & ~3u;
	return len;
}

/* Queues the creation of set d, named name (NULL: d->name). Without
 * NLM_F_CREATE in flags it creates nothing: the kernel refuses the batch
 * (ENOENT) unless the set exists (see fw_sbx_queue_check). */
static int
add_set_flags(struct fw_batch *b, const char *table,
    const struct fw_setdef *d, const char *name, uint16_t nlflags,
    uint32_t size)
{
	struct nftnl_set	*s;
	uint32_t		 type = 0;
	size_t			 i;
	int			 concat;

	if ((s = nftnl_set_alloc()) == NULL)
		return -1;
	for (i = 0; i < d->nfields; i++)
		type = type << 6 | d->types[i];
	nftnl_set_set_str(s, NFTNL_SET_TABLE, table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, name != NULL ? name : d->name);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, (uint32_t)fw_keylen(d));
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, type);
	/* As nft does: a concatenation is described (and flagged CONCAT)
	 * only for interval sets, where the kernel needs the field lengths
	 * to pick pipapo; the kernel refuses CONCAT on a hash. */
	concat = d->nfields > 1 && (d->flags & NFT_SET_INTERVAL);
	nftnl_set_set_u32(s, NFTNL_SET_FLAGS, d->flags |
	    (concat ? NFT_SET_CONCAT : 0));
	nftnl_set_set_u32(s, NFTNL_SET_ID, b->nmsg + 1);	/* unique here */
	if (concat)
		nftnl_set_set_data(s, NFTNL_SET_DESC_CONCAT, d->fields,
		    (uint32_t)d->nfields);
	if (d->flags & NFT_SET_OBJECT)
		nftnl_set_set_u32(s, NFTNL_SET_OBJ_TYPE, NFT_OBJECT_QUOTA);
	if ((d->flags & NFT_SET_MAP) && d->dtype != 0) {
		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, d->dtype);
		nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, d->dlen ? d->dlen : 4);
	} else if (d->flags & NFT_SET_MAP)
		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
	/* Every set is bounded (the ruleset comment says by what): a full
	 * set refuses the element (ENFILE), which only ever denies. */
	if (size != 0)
		nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, size);
	/* A timeout hash set is swept by a timer that walks every element
	 * (once a second by default): with 100,000 learned elements that
	 * walk cost more CPU than all the lookups (perf: nft_rhash_gc).
	 * Expired elements never match, so sweeping less often only keeps
	 * their memory a little longer. Interval sets collect at commit. */
	if ((d->flags & NFT_SET_TIMEOUT) && !(d->flags & NFT_SET_INTERVAL))
		nftnl_set_set_u32(s, NFTNL_SET_GC_INTERVAL, FW_GC_INTERVAL_MS);
	if (d->nfields == 1 && d->types[0] == DT_IFNAME) {
		/* nft's user data "key byte order: host", without which
		 * `nft list` prints the interface names as "" (and "data
		 * byte order: host" for a mark map). Display only; the
		 * kernel ignores it. */
		static const uint8_t ud[] = { 0, 4, 1, 0, 0, 0,
		    1, 4, 1, 0, 0, 0 };

		nftnl_set_set_data(s, NFTNL_SET_USERDATA, ud,
		    d->dtype != 0 ? sizeof(ud) : sizeof(ud) / 2);
	}
	nftnl_set_nlmsg_build_payload(fw_batch_hdr(b, NFT_MSG_NEWSET,
	    nlflags), s);
	nftnl_set_free(s);
	fw_batch_next(b);
	return 0;
}

int
fw_add_set(struct fw_batch *b, const char *table, const struct fw_setdef *d,
    const char *name, uint32_t size)
{
	return add_set_flags(b, table, d, name, NLM_F_CREATE, size);
}

/*
 * fw_sbx_queue_check: queues into b a message that changes nothing but
 * fails the whole batch with ENOENT when sandbox ifname is not registered
 * (its set s_<ifname> is absent, in the kernel's view at commit time): a
 * NEWSET of that set, as fw_sbx_queue_objects made it, without
 * NLM_F_CREATE. -1 (ENOMEM) on failure.
 */
int
fw_sbx_queue_check(struct fw_batch *b, const char *table, const char *ifname)
{
	char	set[FW_NAMEMAX];

	fw_sbx_names(ifname, set, NULL);
	/* No size: this message must change nothing of the set. */
	return add_set_flags(b, table, &fw_sbx_setdef, set, 0, 0);
}

int
fw_add_chain(struct fw_batch *b, const char *table, const char *name,
    const char *type, uint32_t hook, int prio)
{
	struct nftnl_chain	*c;

	if ((c = nftnl_chain_alloc()) == NULL)
		return -1;
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, table);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	/* type NULL: a regular chain, entered only by a jump. */
	if (type != NULL) {
		nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, hook);
		nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	}
	nftnl_chain_nlmsg_build_payload(fw_batch_hdr(b, NFT_MSG_NEWCHAIN,
	    NLM_F_CREATE), c);
	nftnl_chain_free(c);
	fw_batch_next(b);
	return 0;
}

void
fw_sbx_names(const char *ifname, char set[FW_NAMEMAX],
    char chain[FW_NAMEMAX])
{
	int	n = (int)strnlen(ifname, FW_IFNAMSIZ - 1);

	if (set != NULL)
		snprintf(set, FW_NAMEMAX, "%s%.*s", FW_SBX_SET, n, ifname);
	if (chain != NULL)
		snprintf(chain, FW_NAMEMAX, "%s%.*s", FW_SBX_CHAIN, n, ifname);
}


/* --------------------------------------------------- the table's life */

/* Adds the deny/private ranges of one family, merged (the kernel's rbtree
 * refuses overlapping intervals, and callers' lists overlap: the pool lies
 * inside 10/8). */
static int
add_ranges(struct fw_batch *b, const char *t, const char *set, int fam,
    const struct fw_cidr *c, size_t n, const struct fw_cidr *extra)
{
	struct fw_range	*r;
	size_t		 nr = 0, i;
	int		 ret = -1;

	if ((r = calloc(n + 1, sizeof(*r))) == NULL)
		return -1;
	for (i = 0; i < n; i++) {
		if (c[i].family != fam)
			continue;
		if (fw_cidr_range(c[i].family, c[i].addr, c[i].prefix,
		    r[nr].lo, r[nr].hi) == -1)
			goto out;
		nr++;
	}
	if (extra != NULL && extra->family == fam) {
		if (fw_cidr_range(extra->family, extra->addr, extra->prefix,
		    r[nr].lo, r[nr].hi) == -1)
			goto out;
		nr++;
	}
	ret = fw_add_intervals(b, t, set, fam == AF_INET ? 4 : 16, r, nr);
out:
	free(r);
	return ret;
}

static int
table_exists(struct fw *fw, const char *t)
{
	struct nftnl_table	*tb;
	struct nlmsghdr		*nlh;

	if ((tb = nftnl_table_alloc()) == NULL)
		return -1;
	nftnl_table_set_str(tb, NFTNL_TABLE_NAME, t);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETTABLE, NFPROTO_INET,
	    NLM_F_ACK, fw->seq++);
	nftnl_table_nlmsg_build_payload(nlh, tb);
	nftnl_table_free(tb);
	if (fw_request(fw, nlh, NULL, NULL) == 0)
		return 1;
	return errno == ENOENT ? 0 : -1;
}

static int
set_size_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nftnl_set	*s;
	uint32_t		*size = arg;

	if ((s = nftnl_set_alloc()) == NULL)
		return MNL_CB_ERROR;
	if (nftnl_set_nlmsg_parse(nlh, s) == 0 &&
	    nftnl_set_is_set(s, NFTNL_SET_DESC_SIZE))
		*size = nftnl_set_get_u32(s, NFTNL_SET_DESC_SIZE);
	nftnl_set_free(s);
	return MNL_CB_OK;
}

/* 1 if set exists in table t, 0 if not, -1 on error. With size, also its
 * declared size (0: none, unbounded). */
static int
set_exists(struct fw *fw, const char *t, const char *set, uint32_t *size)
{
	struct nftnl_set	*s;
	struct nlmsghdr		*nlh;
	uint32_t		 sz = 0;

	if ((s = nftnl_set_alloc()) == NULL)
		return -1;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, t);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETSET, NFPROTO_INET,
	    NLM_F_ACK, fw->seq++);
	nftnl_set_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	if (fw_request(fw, nlh, size != NULL ? set_size_cb : NULL, &sz) == 0) {
		if (size != NULL)
			*size = sz;
		return 1;
	}
	return errno == ENOENT ? 0 : -1;
}

/* Queues the named counter obj (kept, with its count, if it exists). */
static int
add_counter(struct fw_batch *b, const char *t, const char *name)
{
	struct nftnl_obj	*o;

	if ((o = nftnl_obj_alloc()) == NULL)
		return -1;
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, t);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
	nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_INET);
	nftnl_obj_nlmsg_build_payload(fw_batch_hdr(b, NFT_MSG_NEWOBJ,
	    NLM_F_CREATE), o);
	nftnl_obj_free(o);
	fw_batch_next(b);
	return 0;
}

static void
table_msg(struct fw_batch *b, const char *t, uint16_t type, uint16_t flags)
{
	struct nftnl_table	*tb;

	if ((tb = nftnl_table_alloc()) == NULL) {
		b->overflow = 1;	/* reported as a failure at commit */
		return;
	}
	nftnl_table_set_str(tb, NFTNL_TABLE_NAME, t);
	nftnl_table_set_u32(tb, NFTNL_TABLE_FAMILY, NFPROTO_INET);
	nftnl_table_nlmsg_build_payload(fw_batch_hdr(b, type, flags), tb);
	nftnl_table_free(tb);
	fw_batch_next(b);
}

static int
check_config(const struct fw_config *cfg, char *err, size_t errlen)
{
	size_t	i;
	uint8_t	lo[16], hi[16];

	if (cfg->table[0] != '\0' &&
	    strnlen(cfg->table, sizeof(cfg->table)) >= sizeof(cfg->table)) {
		fw_seterr(err, errlen, "fw_init: table name too long");
		return -1;
	}
	if (cfg->pool.family != AF_INET || cfg->pool.prefix > 32) {
		fw_seterr(err, errlen, "fw_init: bad sandbox pool");
		return -1;
	}
	if (cfg->max_sandboxes > FW_MAX_SANDBOXES_LIMIT ||
	    cfg->max_learned > FW_MAX_LEARNED_LIMIT) {
		fw_seterr(err, errlen, "fw_init: set bounds out of range");
		return -1;
	}
	if (cfg->bridge_port == 0) {
		fw_seterr(err, errlen, "fw_init: bridge port missing");
		return -1;
	}
	if (cfg->uplink[0] != '\0' &&
	    strnlen(cfg->uplink, FW_IFNAMSIZ) >= FW_IFNAMSIZ) {
		fw_seterr(err, errlen, "fw_init: uplink name too long");
		return -1;
	}
	if ((cfg->ndeny > 0 && cfg->deny == NULL) ||
	    (cfg->nprivate > 0 && cfg->private == NULL) ||
	    cfg->ndeny > FW_MAX_RANGES || cfg->nprivate > FW_MAX_RANGES) {
		fw_seterr(err, errlen, "fw_init: bad range list");
		return -1;
	}
	for (i = 0; i < cfg->ndeny; i++)
		if (fw_cidr_range(cfg->deny[i].family, cfg->deny[i].addr,
		    cfg->deny[i].prefix, lo, hi) == -1) {
			fw_seterr(err, errlen, "fw_init: bad deny range %zu", i);
			return -1;
		}
	for (i = 0; i < cfg->nprivate; i++)
		if (fw_cidr_range(cfg->private[i].family, cfg->private[i].addr,
		    cfg->private[i].prefix, lo, hi) == -1) {
			fw_seterr(err, errlen, "fw_init: bad private range %zu",
			    i);
			return -1;
		}
	return 0;
}

int
fw_init(struct fw *fw, const struct fw_config *cfg, int flags, char *err,
    size_t errlen)
{
	struct fw_batch		 b;
	const struct fw_setdef	*d;
	const char		*t;
	int			 exists = 0, adopt;
	uint32_t		 nsbx, nlearned, have;
	size_t			 i;

	if (fw == NULL || cfg == NULL || (flags & ~FW_ADOPT) != 0) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_init: invalid arguments");
		return -1;
	}
	if (check_config(cfg, err, errlen) == -1) {
		errno = EINVAL;
		return -1;
	}
	t = cfg->table[0] != '\0' ? cfg->table : "sluice";
	nsbx = cfg->max_sandboxes ? cfg->max_sandboxes :
	    FW_MAX_SANDBOXES_DEFAULT;
	nlearned = cfg->max_learned ? cfg->max_learned :
	    FW_MAX_LEARNED_DEFAULT;
	if (flags & FW_ADOPT) {
		if ((exists = table_exists(fw, t)) == -1) {
			fw_seterr(err, errlen, "fw_init: table lookup: %s",
			    strerror(errno));
			return -1;
		}
	}
	adopt = exists == 1;
	/* A table of another layout (shared static sets, no dispatch map)
	 * cannot be adopted: its sandboxes have no chains of their own.
	 * Refuse, and let the caller replace it and re-add its sandboxes. */
	if (adopt && set_exists(fw, t, "sbx_dispatch", NULL) != 1) {
		errno = EPROTO;
		fw_seterr(err, errlen, "fw_init: table %s has another layout",
		    t);
		return -1;
	}
	/* Nor one whose sandbox chains take any flow as established (made
	 * before generations), or whose sets cannot hold what cfg allows
	 * (a kernel may keep a set's size when it is declared again). */
	if (adopt && (set_exists(fw, t, "sbx_own", &have) != 1 ||
	    have < nsbx || set_exists(fw, t, "learned4", &have) != 1 ||
	    have < setsize(nsbx, nlearned, FW_SZ_LEARNED))) {
		errno = EPROTO;
		fw_seterr(err, errlen, "fw_init: table %s has another layout "
		    "(no generations, or smaller sets)", t);
		return -1;
	}
	if (fw_batch_begin(fw, &b) == -1) {
		fw_seterr(err, errlen, "fw_init: %s", strerror(errno));
		return -1;
	}
	if (!adopt) {
		/* add + delete + add: replaces the table whether or not it
		 * existed, atomically, with no ENOENT to tolerate. */
		table_msg(&b, t, NFT_MSG_NEWTABLE, NLM_F_CREATE);
		table_msg(&b, t, NFT_MSG_DELTABLE, 0);
	}
	table_msg(&b, t, NFT_MSG_NEWTABLE, NLM_F_CREATE);
	for (d = fw_sets; d->name != NULL; d++)
		if (fw_add_set(&b, t, d, NULL, setsize(nsbx, nlearned,
		    d->bound)) == -1)
			goto oom;
	/* The regular chains first: the base chains' rules go to them. */
	for (i = 0; i < fw_ntails; i++)
		if (fw_add_chain(&b, t, fw_tails[i].chain, NULL, 0, 0) == -1)
			goto oom;
	if (fw_add_chain(&b, t, "forward", "filter", NF_INET_FORWARD,
	    NF_IP_PRI_FILTER) == -1 ||
	    fw_add_chain(&b, t, "input", "filter", NF_INET_LOCAL_IN,
	    NF_IP_PRI_FILTER) == -1 ||
	    fw_add_chain(&b, t, "prerouting", "nat", NF_INET_PRE_ROUTING,
	    NF_IP_PRI_NAT_DST) == -1 ||
	    fw_add_chain(&b, t, "postrouting", "nat", NF_INET_POST_ROUTING,
	    NF_IP_PRI_NAT_SRC) == -1 ||
	    add_counter(&b, t, FW_UNLOGGED) == -1)
		goto oom;
	if (adopt) {
		/* Rewrite what comes from cfg; keep per-sandbox sets. A
		 * DELRULE naming only the chain flushes it, a DELSETELEM
		 * without elements flushes the set. */
		static const char *chains[] = { "forward", "input",
		    "prerouting", "postrouting" };
		const size_t		 nbase = sizeof(chains) /
		    sizeof(chains[0]);
		struct nftnl_rule	*r;
		struct nftnl_set	*s;

		/* The base chains and the d_* chains (cfg's nflog group). */
		for (i = 0; i < nbase + fw_ntails; i++) {
			if ((r = nftnl_rule_alloc()) == NULL)
				goto oom;
			nftnl_rule_set_str(r, NFTNL_RULE_TABLE, t);
			nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, i < nbase ?
			    chains[i] : fw_tails[i - nbase].chain);
			nftnl_rule_nlmsg_build_payload(fw_batch_hdr(&b,
			    NFT_MSG_DELRULE, 0), r);
			nftnl_rule_free(r);
			fw_batch_next(&b);
		}
		for (d = fw_sets; d->name != NULL; d++) {
			if (d->persistent)
				continue;
			if ((s = nftnl_set_alloc()) == NULL)
				goto oom;
			nftnl_set_set_str(s, NFTNL_SET_TABLE, t);
			nftnl_set_set_str(s, NFTNL_SET_NAME, d->name);
			nftnl_set_elems_nlmsg_build_payload(fw_batch_hdr(&b,
			    NFT_MSG_DELSETELEM, 0), s);
			nftnl_set_free(s);
			fw_batch_next(&b);
		}
	}
	/* Before the rules: the sandbox chains it may adopt are judged
	 * by the same handle. */
	fw->gate = cfg->gate;
	fw->gate_queue = cfg->gate_queue;
	if (fw_add_rules(&b, t, cfg) == -1)
		goto oom;
	/* The pool is always denied as a destination: no sandbox-to-sandbox. */
	if (add_ranges(&b, t, "deny4", AF_INET, cfg->deny, cfg->ndeny,
	    &cfg->pool) == -1 ||
	    add_ranges(&b, t, "deny6", AF_INET6, cfg->deny, cfg->ndeny,
	    NULL) == -1 ||
	    add_ranges(&b, t, "private4", AF_INET, cfg->private,
	    cfg->nprivate, NULL) == -1 ||
	    add_ranges(&b, t, "private6", AF_INET6, cfg->private,
	    cfg->nprivate, NULL) == -1)
		goto oom;
	if (fw_batch_commit(&b, "fw_init", err, errlen) == -1)
		return -1;
	snprintf(fw->table, sizeof(fw->table), "%s", t);
	fw->group = cfg->nflog_group;
	fw->max_sbx = nsbx;
	fw->max_learned = nlearned;
	/* From here this handle knows what the table holds per sandbox:
	 * nothing (new table) or what one dump per set finds (adopted). If
	 * that dump fails, deletion falls back to dumping each time. */
	fw_idx_clear(fw);
	fw->idx_valid = adopt ? fw_idx_rebuild(fw) == 0 : 1;
	free(fw->priv);
	fw->priv = NULL;
	fw->npriv = 0;
	if (cfg->nprivate > 0 &&
	    (fw->priv = calloc(cfg->nprivate, sizeof(*fw->priv))) != NULL) {
		memcpy(fw->priv, cfg->private,
		    cfg->nprivate * sizeof(*fw->priv));
		fw->npriv = cfg->nprivate;
	} else if (cfg->nprivate > 0) {
		/* The table is in place; without the list every rule would
		 * count as public, which only ever denies more. */
		errno = ENOMEM;
		fw_seterr(err, errlen, "fw_init: out of memory");
		return -1;
	}
	return adopt;
oom:
	fw_batch_abort(&b);
	errno = ENOMEM;
	fw_seterr(err, errlen, "fw_init: out of memory");
	return -1;
}

int
fw_destroy(struct fw *fw, const char *table, char *err, size_t errlen)
{
	struct fw_batch	 b;
	const char	*t;

	if (fw == NULL) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_destroy: invalid arguments");
		return -1;
	}
	t = table != NULL && table[0] != '\0' ? table : fw->table;
	if (strnlen(t, FW_TABLE_MAX) >= FW_TABLE_MAX) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_destroy: table name too long");
		return -1;
	}
	if (fw_batch_begin(fw, &b) == -1) {
		fw_seterr(err, errlen, "fw_destroy: %s", strerror(errno));
		return -1;
	}
	table_msg(&b, t, NFT_MSG_DELTABLE, 0);
	if (fw_batch_commit(&b, "fw_destroy", err, errlen) == -1)
		return -1;
	if (strcmp(t, fw->table) == 0) {
		fw_idx_clear(fw);
		fw->idx_valid = 0;
	}
	return 0;
}
