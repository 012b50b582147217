/*
 * fw_restrict.c: narrowing a tainted sandbox to its keep-list.
 *
 * Why this file exists: once a sandbox has read tainted data only the
 * destinations on its keep-list may still be reached, and flows already
 * open to any other must stop at once. fw_restrict does that in one batch:
 * the keep rules as elements of the sandbox's own set (encoded by
 * fw_elem.c), the first time the narrowing rules at the head of its chain
 * (fw_sbx_queue_restrict in fw_rules.c) and its entry in @restricted;
 * called again, it replaces the keep rules. Destinations learned as keep
 * are fw_learn.c's.
 */
#include <sys/socket.h>

#include <netinet/in.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/set.h>

#include "netns/fw.h"
#include "netns/fw_int.h"

/* ------------------------------------------------------------- restrict */

/* The roles of the static keep rules fw_restrict writes. */
static int
role_keep(uint32_t role)
{
	return role == FW_R_KEEP4 || role == FW_R_KEEP6 ||
	    role == FW_R_PKEEP4 || role == FW_R_PKEEP6;
}

/* 1 if the shared one-field set `set` holds ifname, 0 if not, -1 on
 * error (one GETSETELEM, no dump). */
static int
elem_exists(struct fw *fw, const char *set, const char *ifname)
{
	struct nftnl_set	*s;
	struct nftnl_set_elem	*el;
	struct nlmsghdr		*nlh;
	struct fw_key		 k;

	if ((s = nftnl_set_alloc()) == NULL ||
	    (el = nftnl_set_elem_alloc()) == NULL) {
		nftnl_set_free(s);
		errno = ENOMEM;
		return -1;
	}
	fw_key_init(&k, ifname);
	nftnl_set_set_str(s, NFTNL_SET_TABLE, fw->table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, k.b, (uint32_t)k.len);
	nftnl_set_elem_add(s, el);
	nlh = nftnl_nlmsg_build_hdr(fw->buf, NFT_MSG_GETSETELEM, NFPROTO_INET,
	    NLM_F_ACK, fw->seq++);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	if (fw_request(fw, nlh, NULL, NULL) == 0)
		return 1;
	return errno == ENOENT ? 0 : -1;
}

int
fw_restrict(struct fw *fw, const char *ifname, const struct fw_rule *keep,
    size_t n, char *err, size_t errlen)
{
	return fw_restrict_budget(fw, ifname, keep, n, 0, err, errlen);
}

int
fw_restrict_budget(struct fw *fw, const char *ifname,
    const struct fw_rule *keep, size_t n, uint64_t bytes, char *err,
    size_t errlen)
{
	struct fw_batch		 b;
	struct fw_eq		 q;
	struct fw_rdel_ctx	 dc;
	struct fw_key		 k;
	struct fw_rule		*kp;
	struct nftnl_set	*old;
	struct fw_rawvec	 rv = { NULL, 0, 0, 0 };
	size_t			 i, nk, npub;
	int			 ret, restricted, v6, has_maps;
	struct fw_sbx		*sx;
	char			 set[FW_NAMEMAX];

	if (fw == NULL || !fw_valid_ifname(ifname) || (n > 0 && keep == NULL) ||
	    n > FW_MAX_RULES) {
		errno = EINVAL;
		fw_seterr(err, errlen, "fw_restrict: invalid arguments");
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!fw_valid_rule(&keep[i], 0)) {
			errno = EINVAL;
			fw_seterr(err, errlen, "fw_restrict: keep rule %zu "
			    "invalid", i);
			return -1;
		}
	/* As for allows: a keep rule inside a private range opens it
	 * (role PKEEP); kp holds the public ones first. */
	if ((kp = fw_rules_split(fw, keep, n, &nk, &npub)) == NULL) {
		errno = ENOMEM;
		fw_seterr(err, errlen, "fw_restrict: out of memory");
		return -1;
	}
	/* IPv6 rules only for a sandbox with an IPv6 address (unknown
	 * without the index, or for a sandbox another handle registered:
	 * then with them, which only costs; without them the IPv4 rules,
	 * which test no family there, would judge IPv6 packets). */
	sx = fw->idx_valid ? fw_idx_find(fw, ifname) : NULL;
	v6 = sx == NULL || fw_sbx_has_set(sx, "sbx6");
	/* Narrowed already: the rules are in; the keep list is replaced. */
	if ((restricted = elem_exists(fw, "restricted", ifname)) == -1) {
		free(kp);
		fw_seterr(err, errlen, "fw_restrict: %s", strerror(errno));
		return -1;
	}
	has_maps = !restricted &&
	    (fw_budget_probe(fw, ifname) & FW_BUDGET_P_MAPS) != 0;
	/* The old keep rules, to replace (dumped before the batch: a dump
	 * is a request of its own on the same socket). */
	fw_sbx_names(ifname, set, NULL);
	old = NULL;
	if (restricted && (old = fw_dump_set(fw, set)) == NULL) {
		free(kp);
		fw_seterr(err, errlen, "fw_restrict: dump %s: %s", set,
		    strerror(errno));
		return -1;
	}
	if (fw_batch_begin(fw, &b) == -1) {
		free(kp);
		if (old != NULL)
			nftnl_set_free(old);
		fw_seterr(err, errlen, "fw_restrict: %s", strerror(errno));
		return -1;
	}
	/* Keep elements first, then the rules that narrow (at the head of
	 * the sandbox's chain), in one batch: the moment they apply, the
	 * keep list is there. Narrowed already (a reload changed the keep
	 * list): the old keep rules go in the same batch, so no moment has
	 * neither list, and a rule the policy dropped stops at once. */
	if (old != NULL) {
		fw_eq_init(&q, &b, fw->table, set, NFT_MSG_DELSETELEM, 0);
		dc.q = &q;
		dc.want = role_keep;
		fw_each_elem(old, fw_del_roles, &dc);
		nftnl_set_free(old);
		old = NULL;
		if (fw_eq_done(&q) == -1)
			goto oom;
	}
	fw_eq_init(&q, &b, fw->table, set, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
	for (i = 0; i < nk; i++)
		fw_add_rule_tuple(&q, i >= npub ?
		    (kp[i].family == AF_INET6 ? FW_R_PKEEP6 : FW_R_PKEEP4) :
		    (kp[i].family == AF_INET6 ? FW_R_KEEP6 : FW_R_KEEP4),
		    &kp[i]);
	if (fw_eq_done(&q) == -1)
		goto oom;
	/* The first narrowing also puts the budgets above it (fw_budget.c):
	 * the taint's from now on, and the rules' again. */
	if (!restricted && (fw_sbx_queue_restrict(&b, fw->table, ifname,
	    v6) == -1 || fw_budget_queue_taint(&b, fw, ifname, bytes,
	    has_maps, v6) == -1))
		goto oom;
	/* @restricted records the narrowing (for this check and for
	 * adoption); no packet looks it up. */
	fw_eq_init(&q, &b, fw->table, "restricted", NFT_MSG_NEWSETELEM,
	    NLM_F_CREATE);
	q.rec = &rv;
	fw_key_init(&k, ifname);
	fw_eq_add(&q, k.b, k.len, NULL, 0, 0, NULL);
	if (fw_eq_done(&q) == -1)
		goto oom;
	free(kp);
	if ((ret = fw_batch_commit(&b, "fw_restrict", err, errlen)) == 0)
		fw_idx_commit(fw, ifname, &rv, -1);
	free(rv.v);
	return ret;
oom:
	fw_batch_abort(&b);
	free(rv.v);
	free(kp);
	errno = ENOMEM;
	fw_seterr(err, errlen, "fw_restrict: out of memory");
	return -1;
}
