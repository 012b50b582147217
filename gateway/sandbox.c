/*
 * sandbox.c: the sandbox manager of sluiced, and how a sandbox comes and
 * goes. A sandbox is three things that must agree: a namespace and veth
 * pair in the kernel (netns/netns.h), its set elements in the `inet sluice`
 * table (netns/fw.h), and a row in the state database (sandbox_db.c).
 * Creating makes all three or none; removing (a delete, or its TTL
 * running out) takes all three away; both commit their audit record before
 * they touch the kernel (sb_commit). This file is that pair and the
 * manager's start and stop; the rest of the manager is apart by concern:
 * the table and its watchers (sandbox_table.c), the records
 * (sandbox_rec.c), the kernel's form of a policy (sandbox_fw.c), what a
 * reload or a taint changes (sandbox_reapply.c) and the agreement made
 * again at start (sandbox_reconcile.c). The control API's half (JSON,
 * statuses) is gateway/ctl/sandboxes.c.
 */
#include <sys/random.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"
#include "gateway/sandbox_int.h"
#include "netns/ct.h"
#include "netns/fw.h"
#include "netns/netns.h"

#define SBX_DB_NAME	"state.db"

/* Generations reserved per database write: one durable write per so many
 * creates. A restart forgoes what its predecessor left unused, so the
 * block taken at start is small: a daemon restarted every second for two
 * years still has generations left. */
#define SBX_GEN_BLOCK	1024
#define SBX_GEN_FIRST	64

/*
 * What a create's rollback could not remove (its link sl-<slot>, pin or
 * elements). Its slot stays taken in m->slots, so later creates draw
 * other slots instead of failing on the name; each create first tries
 * to remove what is left (recorded before), and frees the slot once it
 * is gone. A restart removes them as orphans in any case.
 */
struct leftover {
	struct ns_spec	spec;
	uint32_t	slot;
	int		fw;		/* its elements may be left too */
	int		attached;	/* the namespace is a provider's */
	int		recorded;	/* its removal's record is durable */
};

/*
 * A generation never given before (sandbox_int.h, sbx_rec.gen), from the
 * block reserved in the database, reserving the next block when it is
 * spent: the reservation is durable before any of it is used. -1 with err.
 */
int
sb_gen_alloc(struct sbx *m, uint32_t *gen, char *err, size_t errlen)
{
	if (m->gen_left == 0 && sbx_db_gen_reserve(m->db, SBX_GEN_BLOCK,
	    &m->gen_next, &m->gen_left, err, errlen) == -1)
		return -1;
	*gen = m->gen_next++;
	m->gen_left--;
	return 0;
}

static int
random_hex(char *out, size_t nbytes)
{
	unsigned char b[64];
	size_t i, got = 0;
	ssize_t n;

	if (nbytes > sizeof(b)) {
		errno = EINVAL;
		return -1;
	}
	while (got < nbytes) {
		if ((n = getrandom(b + got, nbytes - got, 0)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got += (size_t)n;
	}
	for (i = 0; i < nbytes; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	OPENSSL_cleanse(b, sizeof(b));
	return 0;
}

/* ------------------------------------------------------------ sandboxes */

/* Builds the in-memory sandbox of a record: spec, fw view, labels.
 * Create and adoption run the same checks (sbx_rec_valid, the slot in
 * this pool); a row to adopt must also carry the addresses of its slot,
 * which a create's record gets here. NULL with err when the record does
 * not describe a sandbox of this pool. */
struct sandbox *
sb_from_rec(struct sbx *m, const struct sbx_rec *r, int adopt, char *err,
    size_t errlen)
{
	struct sandbox *s;
	char a[INET_ADDRSTRLEN], h[INET_ADDRSTRLEN];

	/* errno as sbx_rec_valid left it: ENOMEM is no verdict on r. */
	if (sbx_rec_valid(r, err, errlen) == -1)
		return NULL;
	if (r->index >= m->nslots) {
		snprintf(err, errlen, "slot %u is not in the pool", r->index);
		errno = EINVAL;
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->m = m;
	s->rec = *r;
	s->att_fd = -1;
	/* A row marked tainted had its taint recorded right after it was
	 * written (sbx_taint retries a record that failed, in that run). */
	s->taint_logged = r->tainted != 0;
	/* The policy it runs under is the one in force now, until a reload
	 * changes it (sbx_reapply). */
	s->ps = gw_pset_ref(m->gw);
	/* Checked by sbx_rec_valid: a parse that fails now ran out of
	 * memory. */
	if ((s->labels = json_loads(r->labels, JSON_REJECT_DUPLICATES,
	    NULL)) == NULL) {
		snprintf(err, errlen, "labels: out of memory");
		sb_free(s);
		errno = ENOMEM;
		return NULL;
	}
	if (!json_is_object(s->labels) ||
	    sbx_labels_check(s->labels, err, errlen) == -1) {
		if (!json_is_object(s->labels))
			snprintf(err, errlen, "labels: not a JSON object");
		sb_free(s);
		errno = EINVAL;
		return NULL;
	}
	if (ns_spec_init(&s->spec, r->id, r->index, &m->pool_net, m->prefix,
	    &m->svc, NULL, NULL, err, errlen) == -1) {
		sb_free(s);
		return NULL;
	}
	inet_ntop(AF_INET, &s->spec.sandbox_addr, a, sizeof(a));
	inet_ntop(AF_INET, &s->spec.host_addr, h, sizeof(h));
	/* A record whose addresses are not what its slot gives was not
	 * written by us for this pool (config changed, or tampering). The
	 * row's own text is not quoted: it may be anything. */
	if ((adopt || r->addr[0] != '\0' || r->host_addr[0] != '\0') &&
	    (strcmp(a, r->addr) != 0 || strcmp(h, r->host_addr) != 0)) {
		snprintf(err, errlen, "addresses do not match slot %u "
		    "(%s/%s)", r->index, a, h);
		errno = EINVAL;
		sb_free(s);
		return NULL;
	}
	snprintf(s->rec.addr, sizeof(s->rec.addr), "%s", a);
	snprintf(s->rec.host_addr, sizeof(s->rec.host_addr), "%s", h);
	snprintf(s->fsb.ifname, sizeof(s->fsb.ifname), "%s", s->spec.host_if);
	memcpy(s->fsb.addr4, &s->spec.sandbox_addr, 4);
	s->fsb.gen = r->gen;
	return s;
}

/* Takes s's namespace identity from its name. -1 with errno if it
 * cannot be read; s is then compared by name (sbx_pid_sandbox). */
int
sb_ns_ident(struct sandbox *s)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", s->spec.netns_dir,
	    s->spec.netns);
	if (stat(path, &st) == -1)
		return -1;
	s->ns_dev = st.st_dev;
	s->ns_ino = st.st_ino;
	s->ns_known = 1;
	return 0;
}

void
sb_free(struct sandbox *s)
{
	if (s == NULL)
		return;
	if (s->timer != NULL)
		ev_timer_cancel(s->m->loop, s->timer);
	if (s->att_fd != -1)
		close(s->att_fd);
	if (s->idle_timer != NULL)
		ev_timer_cancel(s->m->loop, s->idle_timer);
	sb_budget_cancel(s);
	json_decref(s->labels);
	gw_pset_unref(s->ps);
	OPENSSL_cleanse(s->rec.token, sizeof(s->rec.token));
	free(s);
}

/* ------------------------------------------------------------ removal */

/*
 * Deletes every conntrack entry whose original source is addr4 (a
 * sandbox's address): a flow a gone sandbox opened must not carry the
 * next one on that address, which conntrack would call established. id
 * names the sandbox in the finding that says when entries stay. -1 then.
 */
int
sb_ct_flush(struct sbx *m, const uint8_t addr4[4], const char *id)
{
	char err[256];
	int n;

	if ((n = ct_del_src(m->ct, AF_INET, addr4, err, sizeof(err))) ==
	    -1) {
		log_warnx("sandbox %s: conntrack: %s", id, err);
		if (rec_async(m->rec, "finding", rec_finding_fields(id,
		    "sandbox.flows_kept", "high", err)) == -1)
			log_warn("sandbox %s: finding", id);
		return -1;
	}
	if (n > 0)
		log_debug("sandbox %s: %d conntrack entries deleted", id, n);
	return 0;
}

/* Removes s's kernel state (elements first, so nothing is reachable
 * through a half-removed sandbox). Tries both; -1 with the first error. */
int
sb_kernel_remove(struct sbx *m, const struct sandbox *s, char *err,
    size_t errlen)
{
	char e2[256] = "";
	int rc = 0;

	if (fw_sandbox_del(m->fw, &s->fsb, err, errlen) == -1)
		rc = -1;
	/* Its flows after its elements, so nothing re-creates one in
	 * between. One that stays is no reason to keep the sandbox: the
	 * next sandbox on this address starts with the same sweep. */
	else
		(void)sb_ct_flush(m, s->fsb.addr4, s->rec.id);
	if (sb_ns_remove(s, rc == 0 ? err : e2, rc == 0 ? errlen :
	    sizeof(e2)) == -1)
		rc = -1;
	return rc;
}

/* ------------------------------------------------------------ leftovers */

/* Holds the slot of what a rollback left (spec), until
 * leftovers_remove removes it. The slot stays taken even when the entry
 * cannot be kept (no memory): a restart frees it. */
static void
leftover_hold(struct sbx *m, const struct ns_spec *spec, uint32_t slot,
    int fw, int attached)
{
	struct leftover *nv;

	(void)sbx_slots_take(m->slots, slot);
	if (m->nleft == m->capleft) {
		if ((nv = reallocarray(m->left, m->capleft * 2 + 4,
		    sizeof(*nv))) == NULL) {
			log_warn("slot %u: held until restart", slot);
			return;
		}
		m->left = nv;
		m->capleft = m->capleft * 2 + 4;
	}
	m->left[m->nleft].spec = *spec;
	m->left[m->nleft].slot = slot;
	m->left[m->nleft].fw = fw;
	m->left[m->nleft].attached = attached;
	m->left[m->nleft].recorded = 0;
	m->nleft++;
}

/* Is id a live sandbox's, a leftover's, or one whose processes are still
 * being ended? A leftover's pin is removed by its id, and an ending
 * sandbox's cgroup has its name: no new sandbox may have that id until
 * they are gone. */
static int
id_taken(const struct sbx *m, const char *id)
{
	size_t i;

	if (sb_find(m, id) != NULL || sb_end_pending(m, id))
		return 1;
	for (i = 0; i < m->nleft; i++)
		if (strcmp(m->left[i].spec.id, id) == 0)
			return 1;
	return 0;
}

/* Tries to remove each leftover, its removal recorded (a sandbox.orphan
 * finding) before the first try; one gone gives its slot back. With the
 * audit log down a leftover not yet recorded is not tried (its slot stays
 * held); one recorded before is retried, its record already durable. */
static void
leftovers_remove(struct sbx *m)
{
	struct fw_sandbox fsb;
	struct leftover *l;
	char err[256];
	size_t i = 0;
	int rc;

	while (i < m->nleft) {
		l = &m->left[i];
		/* Recorded once, before the first try: every later create
		 * retries the same removal, and a removal that keeps failing
		 * must not write a durable record per create. */
		if (!l->recorded && sb_event(m, "sandbox.orphan",
		    ns_id_valid(l->spec.id) ? l->spec.id : "-", NULL,
		    "link=%s netns=%s removing (left by a failed create)",
		    l->spec.host_if, l->spec.netns) == -1)
			return;
		l->recorded = 1;
		rc = 0;
		if (l->fw) {
			memset(&fsb, 0, sizeof(fsb));
			snprintf(fsb.ifname, sizeof(fsb.ifname), "%s",
			    l->spec.host_if);
			if (fw_sandbox_del(m->fw, &fsb, err, sizeof(err)) ==
			    -1)
				rc = -1;
			else {
				l->fw = 0;
				(void)sb_ct_flush(m, (const uint8_t *)
				    &l->spec.sandbox_addr, "-");
			}
		}
		/* An attached namespace lives on: its link is deleted, not
		 * retired with it (what ns_attach set inside is not known
		 * any more, so it stays). */
		if (rc == 0 && (l->attached ? ns_detach(&l->spec, -1, 0, err,
		    sizeof(err)) : ns_delete(&l->spec, err, sizeof(err))) ==
		    -1)
			rc = -1;
		if (rc == -1) {
			log_warnx("slot %u: %s stays: %s", l->slot,
			    l->spec.host_if, err);
			i++;
			continue;
		}
		log_info("sandbox.orphan link=%s netns=%s removed",
		    l->spec.host_if, l->spec.netns);
		sbx_slots_put(m->slots, l->slot);
		m->left[i] = m->left[--m->nleft];
	}
}

/* -------------------------------------------------------- delete, expiry */

/*
 * Removes s everywhere (kernel, row, memory) under the record `kind`
 * (sandbox.delete or sandbox.expire). The record is committed first when
 * the log takes it; when it does not (the log's volume full, the database
 * failing), the removal goes ahead all the same -- a log that cannot write
 * must never keep a sandbox alive -- and its record, saying the teardown
 * was done first, follows when the log takes it (rec_commit_after). -1
 * with errno EIO when the kernel refuses: the row and the entry then stay,
 * so that a later delete or the next start tries again, and a finding says
 * the sandbox outlived its record.
 */
int
sb_remove(struct sbx *m, struct sandbox *s, const char *kind,
    const char *reason, char *err, size_t errlen)
{
	struct sbx_view last;
	struct sb_end *end = NULL;
	char detail[200], why[128];
	int recorded, nproc;

	/* Its processes are counted, and its namespace held, before the
	 * record that says how many there are (sandbox_procs.c). An
	 * attached namespace's processes are the provider's: they stay,
	 * and only what Sluice added goes. */
	if (s->rec.attached) {
		snprintf(why, sizeof(why), "%s on_end=provider", reason);
		if (m->cg != NULL && cg_members(m->cg, s->rec.id) == 0)
			(void)cg_remove(m->cg, s->rec.id, NULL, 0);
	} else {
		nproc = sb_end_begin(m, s, &end);
		snprintf(why, sizeof(why), "%s processes=%d on_end=%s", reason,
		    nproc < 0 ? 0 : nproc, m->cfg->on_end ==
		    POL_ON_END_ISOLATE ? "isolate" : "kill");
	}
	reason = why;
	/* The last counters of its limits, before it is gone. */
	sb_cg_check(m, s);
	if (!(recorded = sb_commit(m, s, kind, "log", NULL, reason, err,
	    errlen) == 0)) {
		log_warnx("sandbox %s: removing before its record: %s",
		    s->rec.id, err);
		m->failures++;
	}
	/* SIGTERM before the link and the pin go; the rest of the end
	 * (grace, SIGKILL, its cgroup) runs from the loop's timers. Even
	 * when the kernel keeps the sandbox below: it was asked to end. */
	sb_end_go(m, end);
	if (sb_kernel_remove(m, s, err, errlen) == -1) {
		if (!recorded) {
			snprintf(detail, sizeof(detail), "%s; removal failed, "
			    "recorded after the attempt", reason);
			rec_commit_after(m->rec, kind, sb_fields(s, "log", "failed",
			    detail));
		}
		log_warnx("sandbox %s: remove: %s", s->rec.id, err);
		if (rec_async(m->rec, "finding", rec_finding_fields(s->rec.id,
		    "sandbox.remove_failed", "high", err)) == -1)
			log_warn("sandbox %s: finding", s->rec.id);
		m->failures++;
		errno = EIO;
		return -1;
	}
	if (!recorded) {
		/* result "done": this record comes after the teardown. */
		snprintf(detail, sizeof(detail), "%s; recorded after the "
		    "teardown", reason);
		rec_commit_after(m->rec, kind, sb_fields(s, "log", "done", detail));
	}
	if (sbx_db_delete(m->db, s->rec.id, err, errlen) == -1) {
		/* The kernel part is gone; the next start sees a record
		 * that lost its pieces and drops it. */
		log_warnx("sandbox %s: %s", s->rec.id, err);
	}
	log_info("%s id=%s policy=%s subject=%s if=%s addr=%s%s%s", kind,
	    s->rec.id, s->rec.policy, s->rec.subject, s->spec.host_if,
	    s->rec.addr, reason != NULL ? " " : "", reason != NULL ? reason :
	    "");
	sb_fill_view(s, &last);
	sb_unlink(m, s);
	sb_free(s);
	m->deletes++;
	/* What follows the table elsewhere (the bridge's sessions and
	 * pending approvals, among others) lets it go now. */
	sb_notify_view(m, SB_REMOVED, &last);
	return 0;
}

static void
on_expire(struct ev_loop *loop, void *arg)
{
	struct sandbox *s = arg;
	struct sbx *m = s->m;
	char err[256];

	(void)loop;
	s->timer = NULL;
	if (sb_remove(m, s, "sandbox.expire", "ttl", err, sizeof(err)) ==
	    0) {
		m->expires++;
		return;
	}
	/* Only the kernel refuses an expiry (the log never does): retry
	 * later rather than keep a sandbox past its TTL silently. */
	if ((s->timer = ev_timer_add(s->m->loop, 10000, on_expire, s)) ==
	    NULL)
		log_warn("sandbox %s: expiry timer", s->rec.id);
}

void
sb_arm_timer(struct sbx *m, struct sandbox *s)
{
	int64_t now = (int64_t)time(NULL), left;

	if (s->rec.expires <= 0)
		return;
	left = s->rec.expires > now ? s->rec.expires - now : 0;
	if ((s->timer = ev_timer_add(m->loop, (uint64_t)left * 1000,
	    on_expire, s)) == NULL)
		log_warn("sandbox %s: expiry timer", s->rec.id);
}

int
sbx_delete(struct sbx *m, const char *id, char *err, size_t errlen)
{
	struct sandbox *s;

	if ((s = sb_find(m, id)) == NULL) {
		snprintf(err, errlen, "no such sandbox");
		errno = ENOENT;
		return -1;
	}
	return sb_remove(m, s, "sandbox.delete", "request", err, errlen);
}

/* ------------------------------------------------------------ create */

static const char *const err_names[SBX_ERR_COUNT] = {
	[SBX_ERR_NONE] = "none",
	[SBX_ERR_INVALID] = "bad_request",
	[SBX_ERR_LIMIT] = "bad_request",
	[SBX_ERR_NO_POLICY] = "unknown_policy",
	[SBX_ERR_EXISTS] = "exists",
	[SBX_ERR_NOT_FOUND] = "not_found",
	[SBX_ERR_NETNS_BUSY] = "netns_busy",
	[SBX_ERR_POOL_FULL] = "pool_exhausted",
	[SBX_ERR_AUDIT_UNAVAILABLE] = "audit_unavailable",
	[SBX_ERR_KERNEL] = "kernel",
	[SBX_ERR_STATE_DB] = "state_db",
	[SBX_ERR_INTERNAL] = "internal",
};

const char *
sbx_err_name(enum sbx_err why)
{
	if ((unsigned)why >= SBX_ERR_COUNT || err_names[why] == NULL)
		return "?";
	return err_names[why];
}

/* The request, checked: what it says alone (sbx_spec_check), then what
 * only the manager knows (the policy loaded, the id free). 0, or -1 with
 * *why and msg. */
static int
create_check(struct sbx *m, const struct sbx_spec *spec, enum sbx_err *why,
    char *msg, size_t msglen)
{
	struct gw_pset *ps;
	int found;

	if (sbx_spec_check(spec, msg, msglen) == -1) {
		*why = SBX_ERR_INVALID;
		return -1;
	}
	ps = gw_pset_ref(m->gw);
	found = pol_set_get(gw_pset_set(ps), spec->policy) != NULL;
	gw_pset_unref(ps);
	if (!found) {
		*why = SBX_ERR_NO_POLICY;
		snprintf(msg, msglen, "no policy named '%s' is loaded",
		    spec->policy);
		return -1;
	}
	if (spec->id[0] != '\0' && id_taken(m, spec->id)) {
		*why = SBX_ERR_EXISTS;
		snprintf(msg, msglen, "sandbox %s already exists", spec->id);
		return -1;
	}
	return 0;
}

/*
 * The audit trail of one create is:
 *  - refused before anything is authorized: one sandbox.create with
 *    decision "deny", result "refused" (async, sbx_create_refused);
 *  - authorized: sandbox.create, decision "allow", result "authorized",
 *    committed durably BEFORE the kernel is touched; if it cannot be
 *    committed the answer is SBX_ERR_AUDIT_UNAVAILABLE and nothing is
 *    made;
 *  - authorized but the kernel (or the state database) then fails: a second
 *    sandbox.create with decision "deny", result "failed" and the cause,
 *    after everything made was rolled back.
 */
int
sbx_create(struct sbx *m, const struct sbx_spec *spec, struct sbx_info *out,
    enum sbx_err *why, char *err, size_t errlen)
{
	struct sandbox *s = NULL;
	struct sbx_rec r;
	json_t *labels = NULL;
	char msg[512], *lj, detail[256];
	uint32_t ttl = 0;
	int64_t slot = -1;
	int made_ns = 0, made_fw = 0, authorized = 0, tries, attfd = -1;

	memset(&r, 0, sizeof(r));
	*why = SBX_ERR_NONE;
	/* First what failed creates left: their slots and ids serve again
	 * once it is gone. */
	if (m->nleft > 0)
		leftovers_remove(m);
	if (create_check(m, spec, why, msg, sizeof(msg)) == -1)
		goto fail;
	/* Attach mode: the namespace is opened, and refused if it is not
	 * one a sandbox can be, before anything is authorized. */
	if (spec->attach[0] != '\0' && sb_attach_open(m, spec, &r, &attfd,
	    why, msg, sizeof(msg)) == -1)
		goto fail;
	snprintf(r.id, sizeof(r.id), "%s", spec->id);
	snprintf(r.policy, sizeof(r.policy), "%s", spec->policy);
	snprintf(r.subject, sizeof(r.subject), "%s", spec->subject);
	ttl = spec->ttl_s != 0 ? spec->ttl_s : m->cfg->default_ttl_s;
	for (tries = 0; r.id[0] == '\0' && tries < 8; tries++) {
		char hex[13];

		if (random_hex(hex, 6) == -1)
			break;
		snprintf(r.id, sizeof(r.id), "sb-%s", hex);
		if (id_taken(m, r.id))
			r.id[0] = '\0';
	}
	if (r.id[0] == '\0') {
		*why = SBX_ERR_INTERNAL;
		snprintf(msg, sizeof(msg), "cannot generate an id");
		goto fail;
	}
	if (m->count >= m->cfg->max_sandboxes ||
	    (slot = sbx_slots_alloc(m->slots)) == -1) {
		*why = SBX_ERR_POOL_FULL;
		snprintf(msg, sizeof(msg), "no free sandbox slot (%zu "
		    "sandboxes, max_sandboxes %u, pool /%u)", m->count,
		    m->cfg->max_sandboxes, (unsigned)m->prefix);
		goto fail;
	}
	/* sb_link takes the slot again when the sandbox is complete. */
	sbx_slots_put(m->slots, (uint32_t)slot);
	r.index = (uint32_t)slot;
	if ((labels = sbx_labels_json(spec->nlabels, spec->label_keys,
	    spec->label_values)) == NULL) {
		*why = SBX_ERR_INTERNAL;
		snprintf(msg, sizeof(msg), "out of memory");
		goto fail;
	}
	if ((lj = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS)) == NULL ||
	    strlen(lj) >= sizeof(r.labels)) {
		free(lj);
		*why = SBX_ERR_LIMIT;
		snprintf(msg, sizeof(msg), "labels: too large");
		goto fail;
	}
	snprintf(r.labels, sizeof(r.labels), "%s", lj);
	free(lj);
	if (random_hex(r.token, 32) == -1) {
		*why = SBX_ERR_INTERNAL;
		snprintf(msg, sizeof(msg), "getrandom: %s", strerror(errno));
		goto fail;
	}
	r.created = (int64_t)time(NULL);
	r.expires = ttl > 0 ? r.created + ttl : 0;
	/* Its own generation, durable before the kernel sees it: a flow
	 * left by an earlier sandbox on this slot never passes for its. */
	if (sb_gen_alloc(m, &r.gen, msg, sizeof(msg)) == -1) {
		*why = SBX_ERR_STATE_DB;
		goto fail;
	}
	if ((s = sb_from_rec(m, &r, 0, msg, sizeof(msg))) == NULL) {
		*why = SBX_ERR_INTERNAL;
		goto fail;
	}
	s->att_fd = attfd;
	attfd = -1;
	/* No action without a record: the decision is durable before the
	 * kernel sees the sandbox. Blocking (rec_commit) is a group-commit
	 * window plus an fsync; creates are rare next to packets. */
	if (s->rec.attached)
		snprintf(detail, sizeof(detail), "ttl=%u attach=%s netns=%llu:%llu",
		    ttl, s->rec.attach_src, (unsigned long long)s->rec.ns_dev,
		    (unsigned long long)s->rec.ns_ino);
	else
		snprintf(detail, sizeof(detail), "ttl=%u", ttl);
	if (sb_commit(m, s, "sandbox.create", "allow", "authorized", detail, msg,
	    sizeof(msg)) == -1) {
		*why = SBX_ERR_AUDIT_UNAVAILABLE;
		goto fail;
	}
	authorized = 1;
	/* The kernel first, the row last: a crash in between leaves pieces
	 * with no record, which the next start removes as orphans. */
	if ((s->rec.attached ? sb_attach_make(s, msg, sizeof(msg)) :
	    ns_create(&s->spec, msg, sizeof(msg))) == -1) {
		/* A namespace of that name that is not ours (/run/netns is
		 * machine-wide) is a conflict, not a kernel failure; so is
		 * an attached one that gained a way out since the check. */
		*why = errno == EEXIST ? SBX_ERR_EXISTS : errno == EBUSY ?
		    SBX_ERR_NETNS_BUSY : SBX_ERR_KERNEL;
		goto fail;
	}
	made_ns = 1;
	if (sb_ns_ident(s) == -1) {
		*why = SBX_ERR_KERNEL;
		snprintf(msg, sizeof(msg), "%s/%s: %s", s->spec.netns_dir,
		    s->spec.netns, strerror(errno));
		goto fail;
	}
	if (sb_cg_make(m, s, msg, sizeof(msg)) == -1) {
		*why = SBX_ERR_KERNEL;
		goto fail;
	}
	/* An address comes back with its slot: whatever conntrack still
	 * holds from it (a removal whose sweep failed, a crash before it)
	 * goes before the sandbox is reachable, or the new one would ride
	 * the old one's flows. */
	if (sb_ct_flush(m, s->fsb.addr4, s->rec.id) == -1) {
		*why = SBX_ERR_KERNEL;
		snprintf(msg, sizeof(msg), "conntrack entries of %s stay",
		    s->rec.addr);
		goto fail;
	}
	if (sb_fw_apply(m, s, 0, msg, sizeof(msg)) == -1) {
		*why = SBX_ERR_KERNEL;
		goto fail;
	}
	made_fw = 1;
	/* The id and the slot are free in memory, so a row holding either
	 * is stale: one whose delete failed (the database was locked or
	 * full then). Left in place it would refuse every later create
	 * that draws the same lowest free slot. */
	if (sbx_db_insert(m->db, &s->rec, msg, sizeof(msg)) == -1 &&
	    (errno != EEXIST ||
	    sbx_db_purge(m->db, s->rec.id, s->rec.index, msg,
	    sizeof(msg)) == -1 ||
	    sbx_db_insert(m->db, &s->rec, msg, sizeof(msg)) == -1)) {
		*why = SBX_ERR_STATE_DB;
		goto fail;
	}
	if (sb_link(m, s) == -1) {
		(void)sbx_db_delete(m->db, s->rec.id, NULL, 0);
		*why = SBX_ERR_INTERNAL;
		snprintf(msg, sizeof(msg), "index: %s", strerror(errno));
		goto fail;
	}
	sb_arm_timer(m, s);
	sb_idle_arm(m, s);
	sb_budget_arm(m, s);
	m->creates++;
	log_info("sandbox.create id=%s policy=%s subject=%s if=%s addr=%s "
	    "ttl=%u%s%s", s->rec.id, s->rec.policy, s->rec.subject,
	    s->spec.host_if, s->rec.addr, ttl, s->rec.attached ?
	    " attach=" : "", s->rec.attach_src);
	sb_notify(m, SB_ADDED, s);
	json_decref(labels);
	sb_fill_info(m, s, 1, out);
	return 0;

fail:
	if (s != NULL) {
		char e2[256] = "", left[320] = "";
		int left_fw = 0, left_ns = 0;

		if (made_fw && fw_sandbox_del(m->fw, &s->fsb, e2,
		    sizeof(e2)) == -1) {
			log_warnx("sandbox %s: rollback: %s", s->rec.id, e2);
			left_fw = 1;
		}
		if (made_ns && sb_ns_remove(s, left_fw ? NULL : e2,
		    left_fw ? 0 : sizeof(e2)) == -1) {
			log_warnx("sandbox %s: rollback: %.200s", s->rec.id,
			    left_fw ? "namespace or link" : e2);
			left_ns = 1;
		}
		sb_cg_drop(m, s);
		if (left_fw || left_ns) {
			/* Its slot is held until what is left is removed:
			 * a later create must not draw it and fail on the
			 * name. */
			snprintf(left, sizeof(left), "; left behind: %s "
			    "(%.200s); slot %u held until it is removed",
			    s->spec.host_if, e2, s->rec.index);
			leftover_hold(m, &s->spec, s->rec.index, left_fw,
			    s->rec.attached);
		}
		/* The log holds an "allow" for this id: say it did not
		 * happen, durably too, so a reader never takes it for a
		 * sandbox that existed. */
		if (authorized) {
			char cause[900];

			snprintf(cause, sizeof(cause), "%s: %s%s",
			    sbx_err_name(*why), msg, left);
			if (sb_commit(m, s, "sandbox.create", "deny", "failed",
			    cause, e2, sizeof(e2)) == -1)
				log_warnx("sandbox %s: failure not recorded: "
				    "%s", s->rec.id, e2);
		}
		sb_free(s);
	}
	if (attfd != -1)
		close(attfd);
	if (!authorized) {
		struct sbx_spec said = *spec;

		/* With the id it drew, if it got that far. */
		if (r.id[0] != '\0')
			memcpy(said.id, r.id, sizeof(said.id));
		sbx_create_refused(m, &said, sbx_err_name(*why), 0, msg);
	}
	json_decref(labels);
	/* The daemon's own failures, not the request's: counted, and
	 * logged with a conflict on a name (which is not the client's
	 * fault either when the name is a foreign namespace's). */
	if (*why >= SBX_ERR_POOL_FULL)
		m->failures++;
	if (*why >= SBX_ERR_POOL_FULL || *why == SBX_ERR_EXISTS)
		log_warnx("sandbox create%s%s: %s: %s", r.id[0] ? " " : "",
		    r.id, sbx_err_name(*why), msg);
	snprintf(err, errlen, "%s", msg);
	return -1;
}

/* ------------------------------------------------------------ lifecycle */

struct sbx *
sbx_new(struct gw *gw, struct rec *rec, struct ev_loop *loop, char *err,
    size_t errlen)
{
	const struct pol_config *c = gw_config(gw);
	struct sbx *m;
	char path[PATH_MAX];
	int64_t svcslot;

	if ((m = calloc(1, sizeof(*m))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	m->gw = gw;
	m->rec = rec;
	m->loop = loop;
	m->cfg = c;
	if (c->pool.addr.family != AF_INET || c->service_addr.family !=
	    AF_INET || (m->nslots = sbx_pool_nslots(c->pool.prefix)) == 0) {
		snprintf(err, errlen, "network.pool must be an IPv4 /1../29 "
		    "and service_address IPv4");
		goto fail;
	}
	memcpy(m->pool4, c->pool.addr.a, 4);
	memcpy(&m->pool_net, c->pool.addr.a, 4);
	memcpy(&m->svc, c->service_addr.a, 4);
	m->prefix = c->pool.prefix;
	if ((m->slots = sbx_slots_new(m->nslots)) == NULL ||
	    (m->by_slot = calloc(m->nslots, sizeof(*m->by_slot))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	/* A service address inside the pool takes its slot out of use. */
	{
		uint8_t a[4];
		uint32_t net = ntohl(m->pool_net.s_addr), sv;

		sv = ntohl(m->svc.s_addr);
		sv = net + ((sv - net) & ~3u) + 2;
		a[0] = sv >> 24, a[1] = sv >> 16, a[2] = sv >> 8, a[3] = sv;
		if ((svcslot = sbx_pool_slot(m->pool4, m->prefix, a)) >= 0)
			(void)sbx_slots_take(m->slots, (uint32_t)svcslot);
	}
	if (ns_host_setup(&m->svc, err, errlen) == -1)
		goto fail;
	if (sb_fw_setup(m, err, errlen) == -1)
		goto fail;
	fw_set_learn_cap(m->fw, c->dns_max_learned);
	if ((m->ct = ct_new(err, errlen)) == NULL)
		goto fail;
	if (mkdir(c->state_dir, 0700) == -1 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", c->state_dir, strerror(errno));
		goto fail;
	}
	if (snprintf(path, sizeof(path), "%s/%s", c->state_dir,
	    SBX_DB_NAME) >= (int)sizeof(path)) {
		snprintf(err, errlen, "state_dir: path too long");
		goto fail;
	}
	if ((m->db = sbx_db_open(path, err, errlen)) == NULL)
		goto fail;
	/* The first block of generations now, so that a create does not
	 * wait for a database write of its own (nor fail on one). */
	if (sbx_db_gen_reserve(m->db, SBX_GEN_FIRST, &m->gen_next,
	    &m->gen_left, err, errlen) == -1)
		goto fail;
	sb_limits_init(m);
	if (sb_reconcile(m, err, errlen) == -1)
		goto fail;
	sb_cg_orphans(m);
	log_info("sandboxes: %zu adopted, state %s", m->count, path);
	return m;
fail:
	sbx_free(m);
	return NULL;
}

int
sbx_reopen(struct sbx *m, char *err, size_t errlen)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", m->cfg->state_dir, SBX_DB_NAME);
	/* The inherited connection is dropped without a word to SQLite's
	 * locks: nothing was in flight at fork, and the parent is gone. */
	sbx_db_close(m->db);
	if ((m->db = sbx_db_open(path, err, errlen)) == NULL)
		return -1;
	return 0;
}

void
sbx_free(struct sbx *m)
{
	struct sandbox *s, *n;
	size_t i;

	if (m == NULL)
		return;
	sb_ends_stop(m);
	sb_limits_stop(m);
	for (i = 0; i < SBX_HASH; i++) {
		for (s = m->by_id[i]; s != NULL; s = n) {
			n = s->hnext;
			sb_free(s);
		}
	}
	free(m->by_slot);
	free(m->left);
	sbx_slots_free(m->slots);
	sbx_db_close(m->db);
	fw_free(m->fw);
	ct_free(m->ct);
	free(m);
}
