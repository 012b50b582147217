/*
 * fw_learn.c: the destinations a sandbox learned from DNS answers.
 *
 * Why this file exists: the DNS proxy opens a destination for a sandbox by
 * learning it, and releases the answer only once fw_learn has returned,
 * that is once the kernel has committed the elements, never before;
 * fw_unlearn takes them back. Each call is one netlink batch, in which the
 * kernel also checks that the sandbox is still registered, and the learn
 * cap is counted in the per-ifname index (fw_index.c). One-port
 * destinations go to the shared learned hash sets, port ranges to the
 * sandbox's own set, and those marked keep also to the keep-list sets,
 * which a tainted sandbox still reaches (fw_restrict.c). This file also
 * finds out once what the running kernel can do (refreshing a timeout on
 * re-add, NFT_MSG_DESTROYSETELEM), which decides how learn and delete
 * batches are written.
 */
#include <sys/socket.h>

#include <netinet/in.h>
#include <linux/netfilter/nf_tables.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnftnl/set.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

/* ---------------------------------------------------------------- learn */

/* Queues messages of type (NEWSETELEM with each element's timeout,
 * DELSETELEM or DESTROYSETELEM) for e[0..n): one-port elements to the
 * shared hash sets, and those marked FW_ELEM_KEEP (every one when
 * keep_all) also to the learned keep hash sets; port ranges to the
 * sandbox's own set, under the learned range roles (and the keep range
 * roles alike). */
int
fw_learn_queue(struct fw_batch *b, struct fw *fw, const struct fw_elem *e,
    size_t n, uint16_t type, int keep_all)
{
	static const char *const sets[2][2] = {
		{ "learned4", "lkeep4" },
		{ "learned6", "lkeep6" },
	};
	struct fw_eq	 q;
	struct fw_key	 lo, hi;
	size_t		 i, alen;
	int		 six, keep;
	uint16_t	 flags = type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0;
	char		 set[FW_NAMEMAX];

	for (six = 0; six <= 1; six++)
		for (keep = 0; keep <= 1; keep++) {
			fw_eq_init(&q, b, fw->table, sets[six][keep], type,
			    flags);
			for (i = 0; i < n; i++) {
				if (e[i].family != (six ? AF_INET6 : AF_INET) ||
				    e[i].port_lo != e[i].port_hi ||
				    (keep && !keep_all &&
				    !(e[i].flags & FW_ELEM_KEEP)))
					continue;
				fw_elem_keys(&e[i], &lo, &hi);
				fw_eq_add(&q, lo.b, lo.len, NULL, 0,
				    type == NFT_MSG_NEWSETELEM ?
				    e[i].timeout_ms : 0, NULL);
			}
			if (fw_eq_done(&q) == -1)
				return -1;
		}
	/* Ranges are rare (a policy's port range): one message each. */
	for (i = 0; i < n; i++) {
		if (e[i].port_lo == e[i].port_hi)
			continue;
		six = e[i].family == AF_INET6;
		alen = six ? 16 : 4;
		fw_sbx_names(e[i].ifname, set, NULL);
		for (keep = 0; keep <= 1; keep++) {
			if (keep && !keep_all && !(e[i].flags & FW_ELEM_KEEP))
				continue;
			fw_eq_init(&q, b, fw->table, set, type, flags);
			fw_key_sbx(&lo, keep ? (six ? FW_R_LKRANGE6 :
			    FW_R_LKRANGE4) : (six ? FW_R_LRANGE6 :
			    FW_R_LRANGE4), e[i].addr, alen, e[i].proto,
			    e[i].port_lo);
			fw_key_sbx(&hi, keep ? (six ? FW_R_LKRANGE6 :
			    FW_R_LKRANGE4) : (six ? FW_R_LRANGE6 :
			    FW_R_LRANGE4), e[i].addr, alen, e[i].proto,
			    e[i].port_hi);
			fw_eq_add(&q, lo.b, lo.len, hi.b, 0,
			    type == NFT_MSG_NEWSETELEM ? e[i].timeout_ms : 0,
			    NULL);
			if (fw_eq_done(&q) == -1)
				return -1;
		}
	}
	/* Budgeted destinations also label the flows they begin. */
	return fw_budget_learn_queue(b, fw, e, n, type);
}

/* Queues the learn (or unlearn) messages for e[0..n). */
static int
learn_batch(struct fw_batch *b, struct fw *fw, const struct fw_elem *e,
    size_t n, int unlearn)
{
	static const uint16_t types[3] = { NFT_MSG_NEWSETELEM,
	    NFT_MSG_DELSETELEM, NFT_MSG_NEWSETELEM };
	int	pass, npass;

	/* Unlearn removes from the keep sets too, whatever the flag says,
	 * so nothing of a forgotten destination stays reachable. Without
	 * DESTROY (kernels before 6.3): add then delete, so a missing
	 * (expired) element is no error. Learn with a kernel that does not
	 * refresh timeouts on re-add: add, delete, add, so the last add
	 * starts a fresh timeout. */
	if (unlearn && fw->destroy == FW_DESTROY_YES)
		return fw_learn_queue(b, fw, e, n, NFT_MSG_DESTROYSETELEM, 1);
	if (unlearn)
		npass = 2;
	else
		npass = fw->refresh == FW_REFRESH_READD ? 1 : 3;
	for (pass = 0; pass < npass; pass++)
		if (fw_learn_queue(b, fw, e, n, types[pass], unlearn) == -1)
			return -1;
	return 0;
}

/* Queues, once per sandbox named in e[0..n) that this handle's index does
 * not know as registered, the kernel's check that it is
 * (fw_sbx_queue_check). The index spares the common case that check,
 * whose cost (a set found by name) grows with the number of sandboxes; a
 * sandbox this handle deleted is gone from it. -1 (ENOMEM) on failure. */
static int
learn_queue_checks(struct fw_batch *b, struct fw *fw, const struct fw_elem *e,
    size_t n)
{
	size_t	i, j;

	for (i = 0; i < n; i++) {
		/* Answers come in runs of one sandbox: try the last first. */
		if (i > 0 && strncmp(e[i].ifname, e[i - 1].ifname,
		    FW_IFNAMSIZ) == 0)
			continue;
		if (fw->idx_valid &&
		    fw_sbx_has_set(fw_idx_find(fw, e[i].ifname), "sbx4"))
			continue;
		for (j = 0; j < i; j++)
			if (strncmp(e[i].ifname, e[j].ifname,
			    FW_IFNAMSIZ) == 0)
				break;
		if (j < i)
			continue;
		if (fw_sbx_queue_check(b, fw->table, e[i].ifname) == -1)
			return -1;
	}
	return 0;
}

/* A sandbox's learned destinations alive at least until `after`. */
static size_t
lk_live(const struct fw_sbx *x, int64_t after)
{
	size_t	i, n = 0;

	for (i = 0; i < x->lkcap; i++)
		if (x->lk[i].used && x->lk[i].expires_ms >= after)
			n++;
	return n;
}

#define FW_CAP_PRUNE_MS	1000	/* pruning at the cap, at most this often */

/*
 * The learn cap: for each sandbox named in e[0..n), the destinations it
 * would have learned after this batch. Those it has that expired go
 * first (pruned from the index at most once a second, so a sandbox
 * flooding at the cap costs a count, not a rebuild, per batch). 0 when
 * every sandbox stays within fw->learn_cap, else -1 with ENOSPC and err
 * naming the first one over it.
 */
static int
learn_cap_check(struct fw *fw, const struct fw_elem *e, size_t n,
    const char *what, char *err, size_t errlen)
{
	struct fw_sbx	*x;
	struct fw_lkey	 k;
	int64_t		 now = fw_mono_ms();
	size_t		 i, j, add;

	if (fw->learn_cap == 0 || !fw->idx_valid)
		return 0;
	for (i = 0; i < n; i++) {
		/* Once per sandbox: its first element in the batch. */
		for (j = 0; j < i; j++)
			if (strncmp(e[i].ifname, e[j].ifname, FW_IFNAMSIZ) ==
			    0)
				break;
		if (j < i)
			continue;
		x = fw_idx_find(fw, e[i].ifname);
		for (add = 0, j = i; j < n; j++) {
			if (strncmp(e[i].ifname, e[j].ifname, FW_IFNAMSIZ) !=
			    0)
				continue;
			fw_lk_of_elem(&e[j], &k, now);
			if (x == NULL || fw_lk_find(x, &k) == NULL)
				add++;
		}
		if ((x != NULL ? x->nlk : 0) + add <= fw->learn_cap)
			continue;
		if (x == NULL) {
			errno = ENOSPC;
			fw_seterr(err, errlen, "%s: %s would have more than "
			    "%u learned destinations", what, e[i].ifname,
			    fw->learn_cap);
			return -1;
		}
		if (x->lkcapped_ms + FW_CAP_PRUNE_MS <= now) {
			x->lkcapped_ms = now;
			if (fw_lk_rehash(x, x->lkcap, now) == -1) {
				errno = ENOMEM;
				fw_seterr(err, errlen, "%s: out of memory",
				    what);
				return -1;
			}
		}
		if (lk_live(x, now) + add > fw->learn_cap) {
			errno = ENOSPC;
			fw_seterr(err, errlen, "%s: %s would have more than "
			    "%u learned destinations", what, x->ifname,
			    fw->learn_cap);
			return -1;
		}
	}
	return 0;
}

/*
 * check: learn only for registered sandboxes, checked by the kernel in the
 * same batch. A DNS answer can arrive after its sandbox was deleted; its
 * elements, keyed on a link name the next sandbox in that pool slot gets,
 * would open that sandbox to what the old one's policy allowed until they
 * expire. Only the refresh probe, for a name no sandbox has, goes without.
 */
static int
learn_common(struct fw *fw, const struct fw_elem *e, size_t n, int unlearn,
    int check, const char *what, char *err, size_t errlen)
{
	struct fw_batch	b;
	size_t		i;

	if (fw == NULL || (n > 0 && e == NULL) || n > FW_MAX_LEARN) {
		errno = EINVAL;
		fw_seterr(err, errlen, "%s: invalid arguments", what);
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!fw_valid_elem(&e[i])) {
			errno = EINVAL;
			fw_seterr(err, errlen, "%s: element %zu invalid", what,
			    i);
			return -1;
		}
	if (n == 0)
		return 0;
	if (check && !unlearn && learn_cap_check(fw, e, n, what, err,
	    errlen) == -1)
		return -1;
	if (fw->refresh == FW_REFRESH_UNKNOWN)
		fw_probe_refresh(fw);
	if (unlearn && fw->destroy == FW_DESTROY_UNKNOWN)
		fw_probe_destroy(fw);
	if (fw_batch_begin(fw, &b) == -1) {
		fw_seterr(err, errlen, "%s: %s", what, strerror(errno));
		return -1;
	}
	if ((check && learn_queue_checks(&b, fw, e, n) == -1) ||
	    learn_batch(&b, fw, e, n, unlearn) == -1) {
		fw_batch_abort(&b);
		errno = ENOMEM;
		fw_seterr(err, errlen, "%s: out of memory", what);
		return -1;
	}
	if (fw_batch_commit(&b, what, err, errlen) == -1)
		return -1;
	fw_idx_learned(fw, e, n, unlearn);
	return 0;
}

int
fw_learn(struct fw *fw, const struct fw_elem *e, size_t n, char *err,
    size_t errlen)
{
	return learn_common(fw, e, n, 0, 1, "fw_learn", err, errlen);
}

int
fw_unlearn(struct fw *fw, const struct fw_elem *e, size_t n, char *err,
    size_t errlen)
{
	return learn_common(fw, e, n, 1, 0, "fw_unlearn", err, errlen);
}

void
fw_set_learn_cap(struct fw *fw, uint32_t cap)
{
	if (fw != NULL)
		fw->learn_cap = cap;
}

int
fw_learned_list(struct fw *fw, const char *ifname, struct fw_learned **out,
    size_t *n, char *err, size_t errlen)
{
	struct fw_learned	*v;
	struct fw_sbx		*x;
	int64_t			 now = fw_mono_ms(), left;
	size_t			 i, k = 0;

	if (fw == NULL || out == NULL || n == NULL ||
	    !fw_valid_ifname(ifname)) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_learned_list: invalid arguments");
		return -1;
	}
	*out = NULL;
	*n = 0;
	if (!fw->idx_valid) {
		errno = ENOTSUP;
		fw_seterr(err, errlen, "fw_learned_list: no index");
		return -1;
	}
	if ((x = fw_idx_find(fw, ifname)) == NULL || x->nlk == 0)
		return 0;
	if ((v = calloc(x->nlk, sizeof(*v))) == NULL) {
		fw_seterr(err, errlen, "fw_learned_list: out of memory");
		return -1;
	}
	for (i = 0; i < x->lkcap && k < x->nlk; i++) {
		const struct fw_lkey *l = &x->lk[i];

		if (!l->used || (left = l->expires_ms - now) <= 0)
			continue;
		memcpy(v[k].e.ifname, x->ifname, sizeof(v[k].e.ifname));
		v[k].e.family = l->family;
		memcpy(v[k].e.addr, l->addr, sizeof(v[k].e.addr));
		v[k].e.proto = l->proto;
		v[k].e.port_lo = l->port_lo;
		v[k].e.port_hi = l->port_hi;
		v[k].e.flags = l->keep ? FW_ELEM_KEEP : 0;
		v[k].e.timeout_ms = left > UINT32_MAX ? UINT32_MAX :
		    (uint32_t)left;
		v[k].names = l->names != NULL ? l->names : "";
		v[k].nnames = l->nnames;
		k++;
	}
	*out = v;
	*n = k;
	return 0;
}

/* --------------------------------------------------------------- probes */

/* The probe element: keyed on an interface name no sandbox can have
 * (FW_IFPREFIX + "~probe" is never handed out: the gateway names links
 * sl-<number>). */
static void
probe_elem(struct fw_elem *e, uint32_t timeout_ms)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->ifname, sizeof(e->ifname), "%s~probe", FW_IFPREFIX);
	e->family = AF_INET;
	e->proto = IPPROTO_TCP;
	e->port_lo = e->port_hi = 9;
	e->timeout_ms = timeout_ms;
}

/* Finds out once whether re-adding an element resets its timeout (kernels
 * with element timeout updates, 6.10 and later, do; the update is generic
 * in nf_tables, so probing the hash set answers for the interval sets
 * too). Any failure leaves the safe choice, add + delete + add. */
void
fw_probe_refresh(struct fw *fw)
{
	struct fw_elem	e;
	int64_t		exp;

	probe_elem(&e, 60000);
	fw->refresh = FW_REFRESH_READD;	/* one plain add per call below */
	if (learn_common(fw, &e, 1, 0, 0, "probe", NULL, 0) == -1)
		goto safe;
	e.timeout_ms = 3600000;
	if (learn_common(fw, &e, 1, 0, 0, "probe", NULL, 0) == -1)
		goto safe;
	exp = fw_elem_expiration(fw, &e, NULL, 0);
	(void)learn_common(fw, &e, 1, 1, 0, "probe", NULL, 0);
	if (exp > 600000)
		return;
safe:
	fw->refresh = FW_REFRESH_DELADD;
}

/* Finds out once whether the kernel takes NFT_MSG_DESTROYSETELEM (Linux
 * 6.3): a delete that is no error when the element is gone. Older kernels
 * refuse the unknown message type with EINVAL (or EOPNOTSUPP); any other
 * failure leaves the question open and this call uses the old path. */
void
fw_probe_destroy(struct fw *fw)
{
	struct fw_batch	b;
	struct fw_elem	e;

	probe_elem(&e, 1000);
	if (fw_batch_begin(fw, &b) == -1)
		return;
	if (fw_learn_queue(&b, fw, &e, 1, NFT_MSG_DESTROYSETELEM, 0) == -1) {
		fw_batch_abort(&b);
		return;
	}
	if (fw_batch_commit(&b, "probe", NULL, 0) == 0)
		fw->destroy = FW_DESTROY_YES;
	else if (errno == EINVAL || errno == EOPNOTSUPP)
		fw->destroy = FW_DESTROY_NO;
}
