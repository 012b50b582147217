/*
 * sandbox_reconcile.c: the agreement made again at start. A crash can
 * leave the kernel, the state database and the table out of step: a
 * recorded sandbox whose namespace is gone, a namespace or link nobody
 * recorded, a row no create could have written. Before the daemon serves,
 * what is whole is adopted, what lost a piece is removed, what expired
 * meanwhile goes, and what no record claims is removed as an orphan, each
 * step recorded before it is taken; what cannot be told stops the start
 * with nothing removed.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/log.h"
#include "gateway/sandbox.h"
#include "gateway/sandbox_int.h"
#include "netns/fw.h"
#include "netns/netns.h"

#define SBX_EXISTS_TRIES 5		/* ns_exists asked at restart */

struct recs {
	struct sbx_rec	*v;
	int		*bad;
	size_t		 n, cap;
	int		 oom;
};

static void
collect_rec(const struct sbx_rec *r, int bad, void *arg)
{
	struct recs *rs = arg;
	struct sbx_rec *nv;
	int *nb;

	if (rs->n == rs->cap) {
		size_t cap = rs->cap * 2 + 16;

		if ((nv = reallocarray(rs->v, cap, sizeof(*nv))) == NULL) {
			rs->oom = 1;
			return;
		}
		rs->v = nv;
		if ((nb = reallocarray(rs->bad, cap, sizeof(*nb))) == NULL) {
			rs->oom = 1;
			return;
		}
		rs->bad = nb;
		rs->cap = cap;
	}
	rs->v[rs->n] = *r;
	rs->bad[rs->n] = bad;
	rs->n++;
}

struct fwent {
	char	ifname[16];
	uint8_t	addr4[4];
};
struct fwlist {
	struct fwent	*v;
	size_t		 n, cap;
	int		 oom;
};

static void
collect_fw(const char *ifname, const uint8_t addr4[4], void *arg)
{
	struct fwlist *l = arg;
	struct fwent *nv;

	if (l->n == l->cap) {
		if ((nv = reallocarray(l->v, l->cap * 2 + 16,
		    sizeof(*nv))) == NULL) {
			l->oom = 1;
			return;
		}
		l->v = nv;
		l->cap = l->cap * 2 + 16;
	}
	snprintf(l->v[l->n].ifname, sizeof(l->v[l->n].ifname), "%s", ifname);
	memcpy(l->v[l->n].addr4, addr4, 4);
	l->n++;
}

/* A spec for removing pieces that belong to no record: id and host_if as
 * given, a slot that the pool has. */
static int
orphan_spec(struct sbx *m, struct ns_spec *sp, const char *id,
    const char *host_if)
{
	uint32_t i;

	for (i = 0; i < 4 && i < m->nslots; i++) {
		if (ns_spec_init(sp, id, i, &m->pool_net, m->prefix, &m->svc,
		    NULL, NULL, NULL, 0) == 0) {
			snprintf(sp->host_if, sizeof(sp->host_if), "%s",
			    host_if);
			return ns_spec_valid(sp, NULL, 0);
		}
	}
	return -1;
}

static int
name_in(char **names, const char *n)
{
	for (; names != NULL && *names != NULL; names++)
		if (strcmp(*names, n) == 0)
			return 1;
	return 0;
}

/* Removes what no record claims, each removal recorded (a sandbox.orphan
 * finding) before it is made. -1 with err when a record cannot be
 * committed: the start stops there (no action without a record). */
static int
remove_orphans(struct sbx *m, const struct fwlist *fl, char *errout,
    size_t errlen)
{
	char **pins = NULL, **links = NULL, path[PATH_MAX], err[256],
	    none[16], tmpid[SBX_ID_MAX + 1], tmppin[48];
	struct fw_sandbox fsb;
	struct ns_spec sp;
	struct sandbox *s;
	size_t i;
	int nsid;

	if (ns_list(NULL, &pins, NULL, &links, NULL, err, sizeof(err)) ==
	    -1) {
		log_warnx("reconcile: %s: orphans stay", err);
		return 0;
	}
	/* Links first: they are in our own namespace, so certainly ours. A
	 * spec with an id that has no pin removes only the link. */
	snprintf(tmpid, sizeof(tmpid), "reconcile-%ld", (long)getpid());
	snprintf(tmppin, sizeof(tmppin), "%s%s", NS_NETNS_PREFIX, tmpid);
	for (i = 0; links[i] != NULL; i++) {
		if (sbx_lookup_ifname(m, links[i], &(struct sbx_view){0}) == 0)
			continue;
		if (name_in(pins, tmppin) ||
		    orphan_spec(m, &sp, tmpid, links[i]) == -1) {
			log_warnx("reconcile: orphan link %s stays", links[i]);
			continue;
		}
		if (sb_event(m, "sandbox.orphan", "-", NULL, "link=%s removing",
		    links[i]) == -1)
			goto norecord;
		memset(&fsb, 0, sizeof(fsb));
		snprintf(fsb.ifname, sizeof(fsb.ifname), "%s", links[i]);
		(void)fw_sandbox_del(m->fw, &fsb, NULL, 0);
		if (ns_delete(&sp, err, sizeof(err)) == -1)
			log_warnx("reconcile: orphan link %s stays: %s",
			    links[i], err);
	}
	/* A name no link has, for removing a namespace alone. */
	for (i = 0; i < 1000; i++) {
		snprintf(none, sizeof(none), "sl-none%zu", i);
		if (!name_in(links, none))
			break;
	}
	for (i = 0; pins[i] != NULL; i++) {
		const char *id = pins[i] + strlen(NS_NETNS_PREFIX);

		if ((s = sb_find(m, id)) != NULL)
			continue;
		snprintf(path, sizeof(path), "%s/%s", NS_NETNS_DIR_DEFAULT,
		    pins[i]);
		/* Only a namespace ever linked to ours: /run/netns is
		 * shared with every other namespace on the machine. */
		if (ns_nsid(path, &nsid, err, sizeof(err)) == -1) {
			log_debug("reconcile: %s: left alone", err);
			continue;
		}
		if (nsid < 0)
			continue;
		if (orphan_spec(m, &sp, id, none) == -1) {
			log_warnx("reconcile: orphan namespace %s stays",
			    pins[i]);
			continue;
		}
		if (sb_event(m, "sandbox.orphan", id, NULL, "netns=%s removing",
		    pins[i]) == -1)
			goto norecord;
		if (ns_delete(&sp, err, sizeof(err)) == -1)
			log_warnx("reconcile: orphan namespace %s stays: %s",
			    pins[i], err);
	}
	/* Table entries no sandbox of ours claims. */
	for (i = 0; i < fl->n; i++) {
		struct sbx_view v;

		if (sbx_lookup_ifname(m, fl->v[i].ifname, &v) == 0 &&
		    memcmp(v.addr4, fl->v[i].addr4, 4) == 0)
			continue;
		memset(&fsb, 0, sizeof(fsb));
		snprintf(fsb.ifname, sizeof(fsb.ifname), "%s",
		    fl->v[i].ifname);
		if (sb_event(m, "sandbox.orphan", "-", NULL, "elements=%s "
		    "removing", fsb.ifname) == -1)
			goto norecord;
		if (fw_sandbox_del(m->fw, &fsb, err, sizeof(err)) == -1)
			log_warnx("reconcile: orphan elements of %s: %s",
			    fsb.ifname, err);
		else
			(void)sb_ct_flush(m, fl->v[i].addr4, "-");
	}
	ns_names_free(pins);
	ns_names_free(links);
	return 0;
norecord:
	snprintf(errout, errlen, "reconcile: audit log: orphan removal not "
	    "recorded");
	ns_names_free(pins);
	ns_names_free(links);
	return -1;
}

/* In the table with this very address? Then its elements were kept by
 * FW_ADOPT and stay as they are (learned ones included). */
static int
fw_has(const struct fwlist *fl, const struct sandbox *s)
{
	size_t i;

	for (i = 0; i < fl->n; i++)
		if (strcmp(fl->v[i].ifname, s->fsb.ifname) == 0 &&
		    memcmp(fl->v[i].addr4, s->fsb.addr4, 4) == 0)
			return 1;
	return 0;
}

/*
 * ns_exists, asked again a few times (10 + 20 + 40 + 80 ms at most) when
 * it cannot tell: a passing rtnetlink error, ENOMEM or a full fd table
 * must not make a live sandbox look gone. -1 with errno of the last try.
 */
static int
sb_exists(const struct sandbox *s)
{
	struct timespec ts;
	int i, r, e = EIO;

	for (i = 0; i < SBX_EXISTS_TRIES; i++) {
		if (i > 0) {
			ts.tv_sec = 0;
			ts.tv_nsec = 10000000L << (i - 1);
			(void)nanosleep(&ts, NULL);
		}
		if ((r = ns_exists(&s->spec)) != -1)
			return r;
		e = errno;
	}
	errno = e;
	return -1;
}

/*
 * Drops row r, which cannot be adopted (why), recorded first: a finding
 * sandbox.invalid_row. What the row named in the kernel is no sandbox's
 * any more, so remove_orphans removes it (recorded too). -1 when the
 * record is not durable: the start stops, the row stays.
 */
static int
drop_row(struct sbx *m, const struct sbx_rec *r, const char *why)
{
	char w[256];
	size_t i;

	/* why may quote text of the row: printable ASCII only. */
	for (i = 0; i < sizeof(w) - 1 && why[i] != '\0'; i++)
		w[i] = why[i] >= 0x20 && why[i] < 0x7f ? why[i] : '?';
	w[i] = '\0';
	log_warnx("reconcile: record %s: %s: dropped", sbx_id_valid(r->id) ?
	    r->id : "(bad id)", w);
	if (sb_event(m, "sandbox.invalid_row", sbx_id_valid(r->id) ? r->id :
	    "-", NULL, "state row dropped: %s", w) == -1)
		return -1;
	(void)sbx_db_delete(m->db, r->id, NULL, 0);
	return 0;
}

int
sb_reconcile(struct sbx *m, char *err, size_t errlen)
{
	struct recs rs = { 0 };
	struct fwlist fl = { 0 };
	struct sandbox *s;
	char e[512];
	int64_t now = (int64_t)time(NULL);
	size_t i;
	int whole, kept, same = 1;

	if (sbx_db_load(m->db, collect_rec, &rs, err, errlen) == -1 ||
	    fw_list_sandboxes(m->fw, collect_fw, &fl, err, errlen) == -1)
		goto fail;
	if (rs.oom || fl.oom) {
		snprintf(err, errlen, "reconcile: out of memory");
		goto fail;
	}
	for (i = 0; i < rs.n; i++) {
		const struct sbx_rec *r = &rs.v[i];

		/* A row we cannot read, or that a create could not have
		 * written, names nothing we can remove safely but itself;
		 * its pieces become orphans. */
		s = rs.bad[i] ? NULL : sb_from_rec(m, r, 1, e, sizeof(e));
		/* Out of memory says nothing of the row: dropping it would
		 * remove a live sandbox. Stop, as for an unreadable one. */
		if (s == NULL && !rs.bad[i] && errno == ENOMEM) {
			snprintf(err, errlen, "reconcile: record %s: %s; "
			    "nothing removed, not starting", r->id, e);
			goto fail;
		}
		if (s == NULL) {
			if (drop_row(m, r, rs.bad[i] ? "unreadable" : e) == -1)
				goto droprecord;
			continue;
		}
		if (sb_find(m, s->rec.id) != NULL ||
		    sbx_slots_used(m->slots, s->rec.index)) {
			snprintf(e, sizeof(e), "slot %u taken twice", r->index);
			sb_free(s);
			if (drop_row(m, r, e) == -1)
				goto droprecord;
			continue;
		}
		/* Only "not whole" removes it. A sandbox that cannot be read
		 * even after a few tries stops the start with nothing
		 * removed: a supervisor starts us again, and meanwhile
		 * nothing is served on a guess. */
		if ((whole = sb_exists(s)) == -1 || (s->rec.attached &&
		    (same = sb_attach_adopt(s)) == -1)) {
			snprintf(err, errlen, "reconcile: sandbox %s (%s): "
			    "cannot tell whether it is whole: %s; nothing "
			    "removed, not starting", r->id, s->spec.host_if,
			    strerror(errno));
			sb_free(s);
			goto fail;
		}
		/* An attached sandbox whose pin names another namespace now
		 * (or none) is not whole, and its removal sets nothing back
		 * in a namespace it cannot name (no att_fd). */
		if (s->rec.attached && same == 0 && whole == 1) {
			log_warnx("reconcile: %s: %s/%s is not the namespace "
			    "attached", r->id, s->spec.netns_dir,
			    s->spec.netns);
			whole = 0;
		}
		if (whole == 1 && s->rec.expires > 0 && s->rec.expires <= now) {
			(void)sb_link(m, s);
			(void)sb_ns_ident(s);
			sb_cg_adopt(m, s);
			if (sb_remove(m, s, "sandbox.expire", "ttl", e,
			    sizeof(e)) == -1) {
				if (errno == EPIPE) {
					snprintf(err, errlen, "reconcile: %s: "
					    "%s", r->id, e);
					goto fail;
				}
				sb_arm_timer(m, s);
				/* Kept, to be retried: it is in the table. */
				sb_notify(m, SB_ADDED, s);
			}
			continue;
		}
		/* Every removal and adoption below is recorded before it is
		 * made; a log that cannot commit stops the start (the
		 * daemon must not serve then anyway). */
		if (whole == 0) {
			if (sb_commit(m, s, "sandbox.delete", "log", NULL,
			    "incomplete", e, sizeof(e)) == -1)
				goto norecord;
			if (sb_kernel_remove(m, s, e, sizeof(e)) == -1)
				log_warnx("reconcile: %s: %s", r->id, e);
			(void)sbx_db_delete(m->db, r->id, NULL, 0);
			log_info("sandbox.delete id=%s reason=incomplete",
			    r->id);
			sb_free(s);
			continue;
		}
		kept = fw_has(&fl, s);
		/* A row from before generations gets one now (durably, or
		 * the start stops), and its kernel state is made afresh
		 * with it: chains made without one take any flow. */
		if (s->rec.gen == 0) {
			if (sb_gen_alloc(m, &s->rec.gen, e, sizeof(e)) == -1 ||
			    sbx_db_set_gen(m->db, s->rec.id, s->rec.gen, e,
			    sizeof(e)) == -1) {
				snprintf(err, errlen, "reconcile: %s: %s; not "
				    "starting", r->id, e);
				sb_free(s);
				goto fail;
			}
			s->fsb.gen = s->rec.gen;
			if (kept)
				(void)fw_sandbox_del(m->fw, &s->fsb, NULL, 0);
			kept = 0;
		}
		if (sb_commit(m, s, "sandbox.adopt", "log", NULL, kept ?
		    "elements=kept" : "elements=restored", e, sizeof(e)) == -1)
			goto norecord;
		/* Adopted elements are refreshed from the policy in force
		 * (it may have changed while we were down), keeping what the
		 * sandbox learned and its generation (so its open flows go
		 * on); missing ones are added afresh. */
		if (sb_fw_apply(m, s, kept, e, sizeof(e)) == -1) {
			log_warnx("reconcile: %s: %s", r->id, e);
			if (sb_commit(m, s, "sandbox.delete", "log", NULL,
			    "fw_failed", e, sizeof(e)) == -1)
				goto norecord;
			(void)sb_kernel_remove(m, s, e, sizeof(e));
			(void)sbx_db_delete(m->db, r->id, NULL, 0);
			sb_free(s);
			continue;
		}
		if (sb_ns_ident(s) == -1)
			log_warn("reconcile: %s: namespace identity", r->id);
		if (sb_link(m, s) == -1) {
			log_warn("reconcile: %s", r->id);
			sb_free(s);
			continue;
		}
		sb_cg_adopt(m, s);
		sb_arm_timer(m, s);
		sb_idle_arm(m, s);
		sb_budget_arm(m, s);
		log_info("sandbox.adopt id=%s policy=%s if=%s addr=%s",
		    s->rec.id, s->rec.policy, s->spec.host_if, s->rec.addr);
		sb_notify(m, SB_ADDED, s);
	}
	if (remove_orphans(m, &fl, err, errlen) == -1)
		goto fail;
	free(rs.v);
	free(rs.bad);
	free(fl.v);
	return 0;
norecord:
	snprintf(err, errlen, "reconcile: %s: %s", s->rec.id, e);
	sb_free(s);
	goto fail;
droprecord:
	snprintf(err, errlen, "reconcile: audit log: dropping a state row "
	    "not recorded");
fail:
	free(rs.v);
	free(rs.bad);
	free(fl.v);
	return -1;
}
