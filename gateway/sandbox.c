/*
 * sandbox.c: the sandbox manager of sluiced. A sandbox is three things
 * that must agree: a namespace and veth pair in the kernel (netns/netns.h),
 * its set elements in the `inet sluice` table (netns/fw.h), and a row in
 * the state database (sandbox_db.c). Creating makes all three or none;
 * deleting removes all three; at start, reconcile() makes the three agree
 * again after a crash, keeping what is whole and removing the rest. The
 * control API endpoints of /v1/sandboxes are here too, so that every way a
 * sandbox comes or goes passes through the same few functions, and each of
 * them commits its audit record before it touches the kernel (sb_commit).
 */
#include <sys/random.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
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

#define SBX_HASH	1024		/* id hash buckets */
#define SBX_DB_NAME	"state.db"
#define SBX_EXISTS_TRIES 5		/* ns_exists asked at restart */

struct sandbox {
	struct sbx_rec	 rec;
	struct ns_spec	 spec;
	struct fw_sandbox fsb;
	json_t		*labels;	/* object, never NULL */
	struct ev_timer	*timer;		/* TTL, or NULL */
	struct gw_pset	*ps;		/* the set its statics came from */
	int		 orphaned;	/* its policy left the set in force */
	int		 taint_logged;	/* its sandbox.taint is durable */
	/* Its network namespace's identity, taken when it was made or
	 * adopted: what pid_sandbox compares callers against, so that the
	 * check needs no file and holds while the namespace lives, even
	 * when its name under netns_dir is gone. */
	int		 ns_known;
	dev_t		 ns_dev;
	ino_t		 ns_ino;
	struct sbx	*m;
	struct sandbox	*hnext;		/* id hash chain */
};

struct sbx {
	struct gw		*gw;
	struct ev_loop		*loop;
	const struct pol_config	*cfg;
	struct fw		*fw;
	struct ct		*ct;		/* conntrack, host namespace */
	struct sqlite3		*db;
	struct sbx_slots	*slots;
	uint32_t		 nslots;
	struct sandbox		**by_slot;	/* nslots entries */
	struct sandbox		*by_id[SBX_HASH];
	size_t			 count;
	struct in_addr		 pool_net, svc;
	uint8_t			 pool4[4], prefix;
	uint64_t		 creates, deletes, failures, expires;
	uint64_t		 reapplied;
	struct leftover		*left;		/* slots held, see below */
	size_t			 nleft, capleft;
	/* Generations reserved in the database and not yet given out:
	 * [gen_next, gen_next + gen_left). */
	uint32_t		 gen_next, gen_left;
	struct sbx_watch	 watch[SBX_WATCHERS];	/* sbx_watch_add */
	size_t			 nwatch;
};

/* Which call of the watchers a change of the table makes. */
enum sb_change {
	SB_ADDED,
	SB_REMOVED,
	SB_CHANGED,
};

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
	int		recorded;	/* its removal's record is durable */
};

static void	sb_free(struct sandbox *s);
static void	fill_view(const struct sandbox *s, struct sbx_view *v);

/*
 * A generation never given before (sandbox_int.h, sbx_rec.gen), from the
 * block reserved in the database, reserving the next block when it is
 * spent: the reservation is durable before any of it is used. -1 with err.
 */
static int
gen_alloc(struct sbx *m, uint32_t *gen, char *err, size_t errlen)
{
	if (m->gen_left == 0 && sbx_db_gen_reserve(m->db, SBX_GEN_BLOCK,
	    &m->gen_next, &m->gen_left, err, errlen) == -1)
		return -1;
	*gen = m->gen_next++;
	m->gen_left--;
	return 0;
}

/* ------------------------------------------------------------ events */

/*
 * The record of an event that has no fuller form below (orphan removal,
 * taint), committed durably (rec_sandbox_event), and its log line. -1 when
 * the record is not known durable: a caller about to act must not.
 */
static int
sbx_event(const char *kind, const char *id, const struct sandbox *s,
    const char *fmt, ...)
{
	char detail[512] = "";
	va_list ap;

	if (fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(detail, sizeof(detail), fmt, ap);
		va_end(ap);
	}
	/* Durable: committed before the caller goes on (and acts). */
	if (rec_sandbox_event(kind, id, s != NULL ? s->rec.policy : NULL,
	    s != NULL ? s->rec.subject : NULL, s != NULL ? s->spec.host_if :
	    NULL, s != NULL ? s->rec.addr : NULL, detail) == -1) {
		log_warn("%s %s: audit record not committed", kind, id);
		return -1;
	}
	if (s != NULL)
		log_info("%s id=%s policy=%s subject=%s if=%s addr=%s%s%s",
		    kind, id, s->rec.policy, s->rec.subject, s->spec.host_if,
		    s->rec.addr, detail[0] != '\0' ? " " : "", detail);
	else
		log_info("%s id=%s%s%s", kind, id, detail[0] != '\0' ? " " :
		    "", detail);
	return 0;
}

/* ------------------------------------------------------------ indexes */

static unsigned
id_hash(const char *id)
{
	uint32_t h = 2166136261u;

	while (*id != '\0')
		h = (h ^ (unsigned char)*id++) * 16777619u;
	return h % SBX_HASH;
}

static struct sandbox *
find_id(const struct sbx *m, const char *id)
{
	struct sandbox *s;

	if (id == NULL)
		return NULL;
	for (s = m->by_id[id_hash(id)]; s != NULL; s = s->hnext)
		if (strcmp(s->rec.id, id) == 0)
			return s;
	return NULL;
}

/* Takes the slot and enters s in both indexes. -1 if either is taken. */
static int
sb_link(struct sbx *m, struct sandbox *s)
{
	unsigned h = id_hash(s->rec.id);

	if (find_id(m, s->rec.id) != NULL) {
		errno = EEXIST;
		return -1;
	}
	if (sbx_slots_take(m->slots, s->rec.index) == -1)
		return -1;
	m->by_slot[s->rec.index] = s;
	s->hnext = m->by_id[h];
	m->by_id[h] = s;
	m->count++;
	return 0;
}

static void
sb_unlink(struct sbx *m, struct sandbox *s)
{
	struct sandbox **pp;

	for (pp = &m->by_id[id_hash(s->rec.id)]; *pp != NULL;
	    pp = &(*pp)->hnext) {
		if (*pp == s) {
			*pp = s->hnext;
			m->by_slot[s->rec.index] = NULL;
			sbx_slots_put(m->slots, s->rec.index);
			m->count--;
			return;
		}
	}
}

/* ------------------------------------------------------------ watchers */

/* Tells every watcher, in registration order, of a change already made
 * in the kernel and the table; v is the sandbox as it is now (or was, for
 * SB_REMOVED). */
static void
notify_view(const struct sbx *m, enum sb_change what,
    const struct sbx_view *v)
{
	const struct sbx_watch *w;
	size_t i;

	for (i = 0; i < m->nwatch; i++) {
		w = &m->watch[i];
		switch (what) {
		case SB_ADDED:
			if (w->added != NULL)
				w->added(w->ctx, v);
			break;
		case SB_REMOVED:
			if (w->removed != NULL)
				w->removed(w->ctx, v);
			break;
		case SB_CHANGED:
			if (w->changed != NULL)
				w->changed(w->ctx, v);
			break;
		}
	}
}

static void
notify(const struct sbx *m, enum sb_change what, const struct sandbox *s)
{
	struct sbx_view v;

	if (m->nwatch == 0)
		return;
	fill_view(s, &v);
	notify_view(m, what, &v);
}

int
sbx_watch_add(struct sbx *m, const struct sbx_watch *w)
{
	if (m->nwatch >= SBX_WATCHERS) {
		errno = ENOSPC;
		return -1;
	}
	m->watch[m->nwatch++] = *w;
	return 0;
}

void
sbx_foreach(const struct sbx *m, void (*fn)(void *ctx,
    const struct sbx_view *v), void *ctx)
{
	struct sbx_view v;
	uint32_t i;

	for (i = 0; i < m->nslots; i++) {
		if (m->by_slot[i] == NULL)
			continue;
		fill_view(m->by_slot[i], &v);
		fn(ctx, &v);
	}
}

/* ------------------------------------------------------------ helpers */

static void
iso_time(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL)
		snprintf(buf, len, "?");
	else
		strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
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

static void
pol_to_fw_cidr(const struct pol_cidr *p, struct fw_cidr *f)
{
	memset(f, 0, sizeof(*f));
	f->family = p->addr.family;
	memcpy(f->addr, p->addr.a, sizeof(f->addr));
	f->prefix = p->prefix;
}

/*
 * The kernel's form of a policy's static rules. ICMPv6 is dropped (IPv6 is
 * off inside sandboxes, so nothing could use it); an allow without ports
 * means every port. *icmp is set when an ICMP allow exists.
 */
static size_t
rules_to_fw(const struct pol_net_rule *r, size_t n, int allow,
    struct fw_rule *out, int *icmp)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		if (allow && r[i].proto != IPPROTO_TCP &&
		    r[i].proto != IPPROTO_UDP && r[i].proto != IPPROTO_ICMP)
			continue;
		if (allow && r[i].proto == IPPROTO_ICMP &&
		    r[i].cidr.addr.family != AF_INET)
			continue;
		memset(&out[k], 0, sizeof(out[k]));
		out[k].family = r[i].cidr.addr.family;
		memcpy(out[k].addr, r[i].cidr.addr.a, sizeof(out[k].addr));
		out[k].prefix = r[i].cidr.prefix;
		out[k].proto = r[i].proto;
		out[k].port_lo = r[i].port_lo;
		out[k].port_hi = r[i].port_hi;
		if (allow && r[i].proto != IPPROTO_ICMP &&
		    r[i].port_lo == 0 && r[i].port_hi == 0) {
			out[k].port_lo = 1;
			out[k].port_hi = 65535;
		}
		if (allow && r[i].proto == IPPROTO_ICMP && icmp != NULL)
			*icmp = 1;
		k++;
	}
	return k;
}

/* The policy sandbox s runs under: its name in the set its statics came
 * from (s->ps), which a reload that dropped the policy leaves in place.
 * NULL when that set has no such policy either. */
static const struct pol_policy *
sb_policy(const struct sandbox *s)
{
	if (s->ps == NULL)
		return NULL;
	return pol_set_get(gw_pset_set(s->ps), s->rec.policy);
}

/* The kernel's form of a policy's static rules (all empty for p NULL). */
struct statics {
	struct fw_rule	*fa, *fd, *fk;
	size_t		 na, nd, nk;
	int		 icmp;
	uint64_t	 quota;
};

static void
statics_free(struct statics *st)
{
	free(st->fa);
	free(st->fd);
	free(st->fk);
	memset(st, 0, sizeof(*st));
}

static int
statics_build(const struct pol_policy *p, struct statics *st, char *err,
    size_t errlen)
{
	const struct pol_net_rule *ra = NULL, *rd = NULL, *rk = NULL;

	memset(st, 0, sizeof(*st));
	if (p != NULL) {
		ra = pol_egress_static(p, true, &st->na);
		rd = pol_egress_static(p, false, &st->nd);
		rk = pol_taint_keep(p, &st->nk);
		st->quota = pol_egress_quota(p);
	}
	if ((st->fa = calloc(st->na + 1, sizeof(*st->fa))) == NULL ||
	    (st->fd = calloc(st->nd + 1, sizeof(*st->fd))) == NULL ||
	    (st->fk = calloc(st->nk + 1, sizeof(*st->fk))) == NULL) {
		statics_free(st);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	st->na = rules_to_fw(ra, st->na, 1, st->fa, &st->icmp);
	st->nd = rules_to_fw(rd, st->nd, 0, st->fd, NULL);
	st->nk = rules_to_fw(rk, st->nk, 1, st->fk, NULL);
	return 0;
}

/*
 * Puts s's static elements in the kernel from the policy it runs under
 * (and its taint restriction, if any). A policy that does not exist gives
 * a sandbox with no allows: fail closed. With update, s is registered
 * already (adopted after a restart) and only its statics are replaced,
 * keeping what it learned.
 */
static int
fw_apply(struct sbx *m, struct sandbox *s, int update, char *err,
    size_t errlen)
{
	const struct pol_policy *p = sb_policy(s);
	struct statics st;
	int rc = -1;

	if (p == NULL)
		log_warnx("sandbox %s: policy %s is not loaded: no static "
		    "allows", s->rec.id, s->rec.policy);
	if (statics_build(p, &st, err, errlen) == -1)
		return -1;
	s->fsb.quota_bytes = st.quota;
	s->fsb.icmp = st.icmp;
	if (update) {
		rc = fw_sandbox_update(m->fw, &s->fsb, st.fa, st.na, st.fd,
		    st.nd, err, errlen);
		/* A tainted sandbox follows the new keep list too: one the
		 * reload narrowed must not stay reachable. */
		if (rc == 0 && s->rec.tainted)
			rc = fw_restrict(m->fw, s->fsb.ifname, st.fk, st.nk,
			    err, errlen);
		statics_free(&st);
		return rc;
	}
	if (fw_sandbox_add(m->fw, &s->fsb, st.fa, st.na, st.fd, st.nd, err,
	    errlen) == -1)
		goto out;
	if (s->rec.tainted && fw_restrict(m->fw, s->fsb.ifname, st.fk, st.nk,
	    err, errlen) == -1) {
		(void)fw_sandbox_del(m->fw, &s->fsb, NULL, 0);
		goto out;
	}
	rc = 0;
out:
	statics_free(&st);
	return rc;
}

/* ------------------------------------------------------------ records */

/*
 * The fields of a sandbox.* record about s: who (subject, labels), under
 * which policy (name and the SHA-256 of its file), where (address, link)
 * and until when. decision and result say what the record is (see
 * sbx_create). NULL on allocation failure: the caller must not act then.
 */
static json_t *
sb_fields(const struct sandbox *s, const char *decision, const char *result,
    const char *detail)
{
	const struct pol_policy *p = sb_policy(s);
	char exp[32];
	json_t *o, *pol;
	int bad = 0;

	if ((o = json_object()) == NULL)
		return NULL;
	if ((pol = json_pack("{s:s}", "id", s->rec.policy)) == NULL ||
	    (p != NULL && json_object_set_new(pol, "sha256",
	    json_string(pol_policy_digest(p))) == -1))
		bad = 1;
	bad |= json_object_set_new(o, "sandbox", json_pack("{s:s}", "id",
	    s->rec.id));
	bad |= json_object_set_new(o, "decision", json_string(decision));
	if (result != NULL)
		bad |= json_object_set_new(o, "result", json_string(result));
	bad |= json_object_set_new(o, "policy", pol);
	bad |= json_object_set_new(o, "subject", json_string(s->rec.subject));
	bad |= json_object_set_new(o, "labels", json_incref(s->labels));
	bad |= json_object_set_new(o, "address", json_string(s->rec.addr));
	bad |= json_object_set_new(o, "iface", json_string(s->spec.host_if));
	/* The conntrack mark of its flows: tells it from every other
	 * sandbox that had (or will have) this address and link. */
	if (s->rec.gen != 0)
		bad |= json_object_set_new(o, "generation",
		    json_integer((json_int_t)s->rec.gen));
	/* ns_create turns IPv6 off at both ends of every sandbox's link; the
	 * record says so, since an IPv6 attempt leaves no packet to deny. */
	bad |= json_object_set_new(o, "ipv6", json_string("disabled"));
	if (s->rec.expires > 0) {
		iso_time(s->rec.expires, exp, sizeof(exp));
		bad |= json_object_set_new(o, "expires_at", json_string(exp));
	}
	if (detail != NULL && detail[0] != '\0')
		bad |= json_object_set_new(o, "detail", rec_string(detail));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Commits the record of kind about s before the caller acts. 0 once it is
 * durable, -1 with errno EPIPE and err otherwise. */
static int
sb_commit(const struct sandbox *s, const char *kind, const char *decision,
    const char *result, const char *detail, char *err, size_t errlen)
{
	json_t *f;
	char e[256];

	if ((f = sb_fields(s, decision, result, detail)) == NULL) {
		snprintf(err, errlen, "audit log: %s record: out of memory",
		    kind);
		errno = EPIPE;
		return -1;
	}
	if (rec_commit(kind, f, NULL, e, sizeof(e)) == -1) {
		snprintf(err, errlen, "audit log: %s", e);
		errno = EPIPE;
		return -1;
	}
	return 0;
}

/* Builds the in-memory sandbox of a record: spec, fw view, labels.
 * Create and adoption run the same checks (sbx_rec_valid, the slot in
 * this pool); a row to adopt must also carry the addresses of its slot,
 * which a create's record gets here. NULL with err when the record does
 * not describe a sandbox of this pool. */
static struct sandbox *
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
 * cannot be read; s is then compared by name (pid_sandbox). */
static int
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

static void
sb_free(struct sandbox *s)
{
	if (s == NULL)
		return;
	if (s->timer != NULL)
		ev_timer_cancel(s->m->loop, s->timer);
	json_decref(s->labels);
	gw_pset_unref(s->ps);
	OPENSSL_cleanse(s->rec.token, sizeof(s->rec.token));
	free(s);
}

/*
 * Deletes every conntrack entry whose original source is addr4 (a
 * sandbox's address): a flow a gone sandbox opened must not carry the
 * next one on that address, which conntrack would call established. id
 * names the sandbox in the finding that says when entries stay. -1 then.
 */
static int
sb_ct_flush(struct sbx *m, const uint8_t addr4[4], const char *id)
{
	char err[256];
	int n;

	if ((n = ct_del_src(m->ct, AF_INET, addr4, err, sizeof(err))) ==
	    -1) {
		log_warnx("sandbox %s: conntrack: %s", id, err);
		if (rec_async("finding", rec_finding_fields(id,
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
static int
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
	if (ns_delete(&s->spec, rc == 0 ? err : e2, rc == 0 ? errlen :
	    sizeof(e2)) == -1)
		rc = -1;
	return rc;
}

/* Holds the slot of what a rollback left (spec), until
 * leftovers_remove removes it. The slot stays taken even when the entry
 * cannot be kept (no memory): a restart frees it. */
static void
leftover_hold(struct sbx *m, const struct ns_spec *spec, uint32_t slot,
    int fw)
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
	m->left[m->nleft].recorded = 0;
	m->nleft++;
}

/* Is id a live sandbox's, or a leftover's? A leftover's pin is removed
 * by its id: no new sandbox may have that id until it is gone. */
static int
id_taken(const struct sbx *m, const char *id)
{
	size_t i;

	if (find_id(m, id) != NULL)
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
		if (!l->recorded && sbx_event("sandbox.orphan",
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
		if (rc == 0 && ns_delete(&l->spec, err, sizeof(err)) == -1)
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

static void	arm_timer(struct sbx *m, struct sandbox *s);

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
static int
sb_remove(struct sbx *m, struct sandbox *s, const char *kind,
    const char *reason, char *err, size_t errlen)
{
	struct sbx_view last;
	char detail[160];
	int recorded;

	if (!(recorded = sb_commit(s, kind, "log", NULL, reason, err,
	    errlen) == 0)) {
		log_warnx("sandbox %s: removing before its record: %s",
		    s->rec.id, err);
		m->failures++;
	}
	if (sb_kernel_remove(m, s, err, errlen) == -1) {
		if (!recorded) {
			snprintf(detail, sizeof(detail), "%s; removal failed, "
			    "recorded after the attempt", reason);
			rec_commit_after(kind, sb_fields(s, "log", "failed",
			    detail));
		}
		log_warnx("sandbox %s: remove: %s", s->rec.id, err);
		if (rec_async("finding", rec_finding_fields(s->rec.id,
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
		rec_commit_after(kind, sb_fields(s, "log", "done", detail));
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
	fill_view(s, &last);
	sb_unlink(m, s);
	sb_free(s);
	m->deletes++;
	/* What follows the table elsewhere (the bridge's sessions and
	 * pending approvals, among others) lets it go now. */
	notify_view(m, SB_REMOVED, &last);
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

static void
arm_timer(struct sbx *m, struct sandbox *s)
{
	int64_t now = (int64_t)time(NULL), left;

	if (s->rec.expires <= 0)
		return;
	left = s->rec.expires > now ? s->rec.expires - now : 0;
	if ((s->timer = ev_timer_add(m->loop, (uint64_t)left * 1000,
	    on_expire, s)) == NULL)
		log_warn("sandbox %s: expiry timer", s->rec.id);
}

/* ------------------------------------------------------------ views */

static void
fill_view(const struct sandbox *s, struct sbx_view *v)
{
	const char *k;
	json_t *val;
	size_t i = 0;

	memset(v, 0, sizeof(*v));
	/* The DNS proxy takes a view two or three times per query: copies,
	 * not snprintf. v is zeroed, so a cut copy stays terminated. */
	memcpy(v->id, s->rec.id, strnlen(s->rec.id, sizeof(v->id) - 1));
	memcpy(v->ifname, s->spec.host_if, strnlen(s->spec.host_if,
	    sizeof(v->ifname) - 1));
	memcpy(v->subject, s->rec.subject, strnlen(s->rec.subject,
	    sizeof(v->subject) - 1));
	memcpy(v->policy, s->rec.policy, strnlen(s->rec.policy,
	    sizeof(v->policy) - 1));
	memcpy(v->addr4, &s->spec.sandbox_addr, 4);
	v->index = s->rec.index;
	v->tainted = s->rec.tainted != 0;
	v->expires = s->rec.expires;
	json_object_foreach(s->labels, k, val) {
		if (i >= SBX_LABELS_MAX)
			break;
		snprintf(v->label_keys[i], sizeof(v->label_keys[i]), "%s", k);
		snprintf(v->label_values[i], sizeof(v->label_values[i]), "%s",
		    json_string_value(val));
		i++;
	}
	v->nlabels = i;
}

int
sbx_lookup_addr4(const struct sbx *m, const uint8_t addr4[4],
    struct sbx_view *out)
{
	const struct sandbox *s;
	int64_t slot;

	slot = sbx_pool_slot(m->pool4, m->prefix, addr4);
	/* The slot is derived from the address; the entry must still say
	 * it owns that address (a stale slot is never trusted). */
	if (slot < 0 || (uint64_t)slot >= m->nslots ||
	    (s = m->by_slot[slot]) == NULL ||
	    memcmp(&s->spec.sandbox_addr, addr4, 4) != 0) {
		errno = ENOENT;
		return -1;
	}
	fill_view(s, out);
	return 0;
}

int
sbx_lookup_id(const struct sbx *m, const char *id, struct sbx_view *out)
{
	const struct sandbox *s;

	if ((s = find_id(m, id)) == NULL) {
		errno = ENOENT;
		return -1;
	}
	fill_view(s, out);
	return 0;
}

int
sbx_lookup_ifname(const struct sbx *m, const char *ifname,
    struct sbx_view *out)
{
	const struct sandbox *s;
	unsigned long n;
	char *end;

	/* sl-<slot>: the slot is in the name; the entry must agree. */
	if (ifname == NULL || strncmp(ifname, NS_LINK_PREFIX, 3) != 0 ||
	    ifname[3] < '0' || ifname[3] > '9' ||
	    (errno = 0, n = strtoul(ifname + 3, &end, 10), *end != '\0') ||
	    errno != 0 || n >= m->nslots || (s = m->by_slot[n]) == NULL ||
	    strcmp(s->spec.host_if, ifname) != 0) {
		errno = ENOENT;
		return -1;
	}
	fill_view(s, out);
	return 0;
}

int
sbx_token_ok(const struct sbx *m, const char *id, const char *token)
{
	const struct sandbox *s;

	if (token == NULL || (s = find_id(m, id)) == NULL ||
	    strlen(token) != SBX_TOKEN_HEX)
		return 0;
	return CRYPTO_memcmp(token, s->rec.token, SBX_TOKEN_HEX) == 0;
}

int
sbx_taint(struct sbx *m, const char *id, char *err, size_t errlen)
{
	const struct pol_net_rule *rk = NULL;
	const struct pol_policy *p;
	struct fw_rule *fk;
	struct sandbox *s;
	size_t nk = 0;
	int rc;

	if ((s = find_id(m, id)) == NULL) {
		snprintf(err, errlen, "no sandbox %s", id);
		errno = ENOENT;
		return -1;
	}
	if (s->rec.tainted && s->taint_logged)
		return 0;
	/* The policy it runs under (kept on its snapshot if a reload dropped
	 * it); none at all keeps nothing: fail closed. */
	if ((p = sb_policy(s)) != NULL)
		rk = pol_taint_keep(p, &nk);
	if ((fk = calloc(nk + 1, sizeof(*fk))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	nk = rules_to_fw(rk, nk, 1, fk, NULL);
	/* Narrowed and saved already, but its record was not committed:
	 * only the record is left to do, or the log would never say that
	 * this sandbox was tainted once the caller goes on. */
	if (s->rec.tainted) {
		free(fk);
		goto record;
	}
	rc = fw_restrict(m->fw, s->fsb.ifname, fk, nk, err, errlen);
	free(fk);
	if (rc == -1)
		return -1;
	/* Tainted only once the row says so: a taint the state database
	 * lost would hand a restart that cannot adopt the table the full
	 * egress back. On failure the kernel stays narrowed (fw_restrict is
	 * idempotent), the caller withholds what tainted, and the next
	 * taint tries the row again. */
	if (sbx_db_set_tainted(m->db, id, err, errlen) == -1) {
		log_warnx("sandbox %s: taint not persisted: %s", id, err);
		errno = EIO;
		return -1;
	}
	s->rec.tainted = 1;
	/* Narrowed in the kernel and saved: copies follow now, whether or
	 * not the record below goes in. */
	notify(m, SB_CHANGED, s);
record:
	if (sbx_event("sandbox.taint", id, s, "keep=%zu", nk) == -1) {
		snprintf(err, errlen, "the taint's audit record was not "
		    "committed");
		errno = EIO;
		return -1;
	}
	s->taint_logged = 1;
	return 0;
}

/* The durable record of a change of s's statics: a finding of type
 * sandbox.policy_update carrying the sandbox fields (policy and digest as
 * they are about to be applied). 0, or -1 with err. */
static int
policy_update_commit(const struct sandbox *s, const char *detail, char *err,
    size_t errlen)
{
	json_t *f;
	char e[256];

	if ((f = sb_fields(s, "log", "policy_update", detail)) == NULL ||
	    json_object_set_new(f, "type",
	    json_string("sandbox.policy_update")) == -1 ||
	    json_object_set_new(f, "severity", json_string("low")) == -1) {
		json_decref(f);
		snprintf(err, errlen, "audit log: out of memory");
		return -1;
	}
	if (rec_commit("finding", f, NULL, e, sizeof(e)) == -1) {
		snprintf(err, errlen, "audit log: %s", e);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ narrowing */

/* Does one of the names l was learned for still give it under p? With
 * no name known (an element found in a table adopted after a restart),
 * nothing can say so: no. */
static int
learned_allowed(const struct pol_policy *p, const struct fw_learned *l,
    bool tainted)
{
	const char *n = l->names;
	size_t i;

	for (i = 0; i < l->nnames; i++, n += strlen(n) + 1)
		if (pol_egress_range_allowed(p, n, l->e.proto,
		    l->e.port_lo, l->e.port_hi, tainted))
			return 1;
	return 0;
}

/* What a narrowing keeps, for deciding which flows stay. */
struct narrow {
	const struct pol_policy	*p;
	const struct pol_config	*cfg;
	const struct fw_elem	*kept;		/* learned elements that stay */
	size_t			 nkept;
	bool			 tainted;
	uint8_t			 svc[4];
};

/* ct_del_if's predicate: 1 for a flow of the sandbox that nothing in force
 * allows any more. Flows with the service address (DNS, the bridge: the
 * input path, not egress) stay. The policy decides the address (always-
 * denied classes, explicit denies, private ranges, static CIDR allows);
 * what it leaves to names stays only while a learned element covers it. */
static int
flow_gone(const struct ct_flow *f, void *arg)
{
	const struct narrow *nw = arg;
	struct pol_egress_q q;
	struct pol_decision d;
	char lit[INET6_ADDRSTRLEN];
	size_t i;

	if (f->family == AF_INET && (memcmp(f->dst, nw->svc, 4) == 0 ||
	    memcmp(f->rsrc, nw->svc, 4) == 0))
		return 0;
	if (f->proto != IPPROTO_TCP && f->proto != IPPROTO_UDP &&
	    f->proto != IPPROTO_ICMP)
		return 1;
	if (inet_ntop(f->family, f->dst, lit, sizeof(lit)) == NULL)
		return 1;
	memset(&q, 0, sizeof(q));
	q.host = lit;
	q.proto = f->proto;
	q.port = f->dport;
	q.tainted = nw->tainted;
	q.treat_as_public = nw->cfg->treat_as_public;
	q.ntreat_as_public = nw->cfg->ntreat_as_public;
	memset(&d, 0, sizeof(d));
	d.verdict = POL_DENY;
	pol_egress_decide(nw->p, &q, &d);
	if (d.verdict == POL_ALLOW)
		return 0;
	if (d.reason != POL_REASON_NO_MATCHING_RULE &&
	    d.reason != POL_REASON_TAINTED)
		return 1;
	for (i = 0; i < nw->nkept; i++) {
		const struct fw_elem *e = &nw->kept[i];

		if (e->family == f->family && e->proto == f->proto &&
		    memcmp(e->addr, f->dst, f->family == AF_INET ? 4 : 16) ==
		    0 && f->dport >= e->port_lo && f->dport <= e->port_hi &&
		    (!nw->tainted || (e->flags & FW_ELEM_KEEP)))
			return 0;
	}
	return 1;
}

/* fw_learn or fw_unlearn over e[0..n) in batches the handle takes. */
static int
learn_chunks(struct fw *fw, const struct fw_elem *e, size_t n, int unlearn,
    char *err, size_t errlen)
{
	size_t off, k;

	for (off = 0; off < n; off += k) {
		k = n - off > 1024 ? 1024 : n - off;
		if ((unlearn ? fw_unlearn(fw, e + off, k, err, errlen) :
		    fw_learn(fw, e + off, k, err, errlen)) == -1)
			return -1;
	}
	return 0;
}

/*
 * sb_narrow: after s's statics were replaced by those of the policy it now
 * runs under, what it learned is decided again by the names it was
 * learned for: an element no name of it is allowed any more goes, one
 * whose name left the taint keep-list loses its keep mark (it is learned
 * again without it, for what is left of its life), and then every
 * conntrack entry of the sandbox that nothing in force allows any more
 * is deleted, so a narrowing holds for open flows too, not only new ones.
 * Returns how many elements went, or -1 with err.
 */
static int
sb_narrow(struct sbx *m, struct sandbox *s, char *err, size_t errlen)
{
	const struct pol_policy *p = sb_policy(s);
	struct fw_learned *l = NULL;
	struct fw_elem *drop = NULL, *kept = NULL, *re;
	struct narrow nw;
	size_t n = 0, i, nd = 0, nk = 0, nr = 0;
	int rc = -1;

	if (p == NULL) {
		snprintf(err, errlen, "no policy");
		return -1;
	}
	if (fw_learned_list(m->fw, s->fsb.ifname, &l, &n, err, errlen) == -1)
		return -1;
	/* drop: first what goes, then (from the end) what loses its mark. */
	if ((drop = calloc(n + 1, sizeof(*drop))) == NULL ||
	    (kept = calloc(n + 1, sizeof(*kept))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		l[i].e.name = NULL;
		if (!learned_allowed(p, &l[i], false))
			drop[nd++] = l[i].e;
		else if ((l[i].e.flags & FW_ELEM_KEEP) &&
		    !learned_allowed(p, &l[i], true)) {
			drop[n - ++nr] = l[i].e;
			l[i].e.flags &= (uint8_t)~FW_ELEM_KEEP;
			kept[nk++] = l[i].e;
		} else
			kept[nk++] = l[i].e;
	}
	re = drop + n - nr;
	/* The names point into the handle: done with them before it
	 * changes. Re-learned elements lose theirs (a later reload
	 * removes them, and the next answer brings them back named). */
	free(l);
	l = NULL;
	if (learn_chunks(m->fw, drop, nd, 1, err, errlen) == -1 ||
	    learn_chunks(m->fw, re, nr, 1, err, errlen) == -1)
		goto out;
	for (i = 0; i < nr; i++)
		re[i].flags &= (uint8_t)~FW_ELEM_KEEP;
	if (learn_chunks(m->fw, re, nr, 0, err, errlen) == -1)
		goto out;
	memset(&nw, 0, sizeof(nw));
	nw.p = p;
	nw.cfg = m->cfg;
	nw.kept = kept;
	nw.nkept = nk;
	nw.tainted = s->rec.tainted != 0;
	memcpy(nw.svc, &m->svc, 4);
	if (ct_del_if(m->ct, AF_INET, s->fsb.addr4, flow_gone, &nw, err,
	    errlen) == -1)
		goto out;
	rc = (int)nd;
out:
	free(l);
	free(drop);
	free(kept);
	return rc;
}

/*
 * One sandbox after a reload. Its policy is looked up in the set now in
 * force: gone, it stays on the snapshot it runs under (s->ps) and a
 * finding says so, once; the same file (digest), it simply moves to the
 * new set; changed, its statics are replaced in the kernel in one batch
 * (fw_sandbox_update keeps learned elements and a taint restriction),
 * after a record of the change is durable.
 */
static int
sb_reapply(struct sbx *m, struct sandbox *s, struct gw_pset *ps)
{
	const struct pol_policy *np, *op;
	struct gw_pset *old;
	char detail[256], e[512];
	const char *od;
	int nd;

	np = pol_set_get(gw_pset_set(ps), s->rec.policy);
	op = sb_policy(s);
	if (np == NULL) {
		if (s->orphaned)
			return 0;
		s->orphaned = 1;
		snprintf(detail, sizeof(detail), "policy %s is no longer "
		    "loaded: the sandbox keeps the rules it was created with",
		    s->rec.policy);
		log_warnx("sandbox %s: %s", s->rec.id, detail);
		if (rec_async("finding", rec_finding_fields(s->rec.id,
		    "sandbox.policy_removed", "medium", detail)) == -1)
			log_warn("sandbox %s: finding", s->rec.id);
		/* Its policy now lives only in the snapshot it runs under. */
		notify(m, SB_CHANGED, s);
		return 0;
	}
	od = op != NULL ? pol_policy_digest(op) : "";
	if (op == NULL || strcmp(od, pol_policy_digest(np)) != 0) {
		/* The sandbox moves to np for the record and fw_apply. */
		old = s->ps;
		s->ps = gw_pset_ref(m->gw);
		snprintf(detail, sizeof(detail), "statics re-applied: "
		    "sha256 %.64s -> %.64s", od[0] != '\0' ? od : "none",
		    pol_policy_digest(np));
		if (policy_update_commit(s, detail, e, sizeof(e)) == -1 ||
		    fw_apply(m, s, 1, e, sizeof(e)) == -1) {
			/* Still on the old rules, in the kernel and here;
			 * the next reload tries again. */
			gw_pset_unref(s->ps);
			s->ps = old;
			log_warnx("sandbox %s: policy %s not re-applied: %s",
			    s->rec.id, s->rec.policy, e);
			if (rec_async("finding", rec_finding_fields(s->rec.id,
			    "sandbox.reapply_failed", "high", e)) == -1)
				log_warn("sandbox %s: finding", s->rec.id);
			m->failures++;
			return 1;
		}
		gw_pset_unref(old);
		s->orphaned = 0;
		m->reapplied++;
		log_info("sandbox %s: policy %s re-applied", s->rec.id,
		    s->rec.policy);
		notify(m, SB_CHANGED, s);
		/* In the same step: what it learned and the flows it holds
		 * follow the new rules at once, not when they expire. */
		if ((nd = sb_narrow(m, s, e, sizeof(e))) == -1) {
			log_warnx("sandbox %s: narrowing: %s", s->rec.id, e);
			if (rec_async("finding", rec_finding_fields(s->rec.id,
			    "sandbox.narrow_failed", "high", e)) == -1)
				log_warn("sandbox %s: finding", s->rec.id);
			m->failures++;
			return 1;
		}
		if (nd > 0)
			log_info("sandbox %s: %d learned destinations removed",
			    s->rec.id, nd);
		return 0;
	}
	/* Same policy file: only the set it lives in changes, so the old
	 * set can be freed once no sandbox is left on it. */
	old = s->ps;
	s->ps = gw_pset_ref(m->gw);
	gw_pset_unref(old);
	s->orphaned = 0;
	return 0;
}

size_t
sbx_reapply(struct sbx *m)
{
	struct gw_pset *ps;
	uint32_t i;
	size_t failed = 0;

	if (m == NULL)
		return 0;
	ps = gw_pset_ref(m->gw);
	for (i = 0; i < m->nslots; i++)
		if (m->by_slot[i] != NULL)
			failed += (size_t)sb_reapply(m, m->by_slot[i], ps);
	gw_pset_unref(ps);
	return failed;
}

struct fw *
sbx_fw(struct sbx *m)
{
	return m->fw;
}

size_t
sbx_count(const struct sbx *m)
{
	return m->count;
}

void
sbx_metrics_print(const struct sbx *m, FILE *fp)
{
	fprintf(fp,
	    "# HELP sluice_sandboxes Sandboxes that exist.\n"
	    "# TYPE sluice_sandboxes gauge\n"
	    "sluice_sandboxes %zu\n"
	    "# HELP sluice_sandbox_creates_total Sandboxes created.\n"
	    "# TYPE sluice_sandbox_creates_total counter\n"
	    "sluice_sandbox_creates_total %" PRIu64 "\n"
	    "# HELP sluice_sandbox_deletes_total Sandboxes removed (deleted "
	    "or expired).\n"
	    "# TYPE sluice_sandbox_deletes_total counter\n"
	    "sluice_sandbox_deletes_total %" PRIu64 "\n"
	    "# HELP sluice_sandbox_failures_total Sandbox creates or removals "
	    "that failed.\n"
	    "# TYPE sluice_sandbox_failures_total counter\n"
	    "sluice_sandbox_failures_total %" PRIu64 "\n"
	    "# HELP sluice_sandbox_policy_updates_total Sandboxes whose "
	    "static rules a reload re-applied.\n"
	    "# TYPE sluice_sandbox_policy_updates_total counter\n"
	    "sluice_sandbox_policy_updates_total %" PRIu64 "\n",
	    m->count, m->creates, m->deletes, m->failures, m->reapplied);
}

/* ------------------------------------------------------------ JSON */

static json_t *
sb_json(const struct sbx *m, const struct sandbox *s, int with_token)
{
	char svc[INET_ADDRSTRLEN], url[64], created[32], expires[32];
	json_t *o;

	inet_ntop(AF_INET, &m->svc, svc, sizeof(svc));
	snprintf(url, sizeof(url), "http://%s:%u", svc,
	    (unsigned)m->cfg->bridge_port);
	iso_time(s->rec.created, created, sizeof(created));
	if (s->rec.expires > 0)
		iso_time(s->rec.expires, expires, sizeof(expires));
	o = json_pack("{s:s, s:s, s:s++, s:s, s:s, s:s, s:s, s:s, s:s, s:O, "
	    "s:s, s:I, s:b, s:s, s:s, s:o}",
	    "id", s->rec.id,
	    "netns", s->spec.netns,
	    "netns_path", s->spec.netns_dir, "/", s->spec.netns,
	    "address", s->rec.addr,
	    "service_address", svc,
	    "dns", svc,
	    "bridge_url", url,
	    "policy", s->rec.policy,
	    "subject", s->rec.subject,
	    "labels", s->labels,
	    "interface", s->spec.host_if,
	    "index", (json_int_t)s->rec.index,
	    "tainted", s->rec.tainted != 0,
	    "created_at", created,
	    "host_address", s->rec.host_addr,
	    "expires_at", s->rec.expires > 0 ? json_string(expires) :
	    json_null());
	if (o != NULL && json_object_set_new(o, "generation",
	    json_integer((json_int_t)s->rec.gen)) == -1) {
		json_decref(o);
		return NULL;
	}
	if (o != NULL && with_token &&
	    json_object_set_new(o, "token", json_string(s->rec.token)) == -1) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ------------------------------------------------------------ create */

static const char *const create_keys[] = {
	"id", "policy", "subject", "labels", "ttl",
};

/* The request, checked. Returns 0, or an HTTP status with code and
 * message set. */
static unsigned
parse_create(struct sbx *m, json_t *body, struct sbx_rec *r, json_t **labels,
    uint32_t *ttl, const char **code, char *msg, size_t msglen)
{
	const char *k, *id, *pol, *subj;
	struct gw_pset *ps;
	json_t *v;
	size_t i;
	int found;

	*code = "bad_request";
	if (!json_is_object(body)) {
		snprintf(msg, msglen, "the body must be a JSON object");
		return 400;
	}
	/* Unknown members are refused: a misspelt "ttl" must not silently
	 * give a sandbox that never expires. */
	json_object_foreach(body, k, v) {
		for (i = 0, found = 0; i < sizeof(create_keys) /
		    sizeof(create_keys[0]); i++)
			found |= strcmp(k, create_keys[i]) == 0;
		if (!found) {
			snprintf(msg, msglen, "unknown member '%.64s'", k);
			return 400;
		}
	}
	v = json_object_get(body, "id");
	if (v != NULL && !json_is_null(v)) {
		id = json_string_value(v);
		if (id == NULL || strlen(id) != json_string_length(v) ||
		    !sbx_id_valid(id)) {
			snprintf(msg, msglen, "id: want [a-z0-9][a-z0-9-]{0,31}");
			return 400;
		}
		snprintf(r->id, sizeof(r->id), "%s", id);
	}
	v = json_object_get(body, "subject");
	subj = json_string_value(v);
	if (subj == NULL || strlen(subj) != json_string_length(v) ||
	    !sbx_subject_valid(subj)) {
		snprintf(msg, msglen, "subject: required, want "
		    "[A-Za-z0-9][A-Za-z0-9._@+:/-]{0,127}");
		return 400;
	}
	snprintf(r->subject, sizeof(r->subject), "%s", subj);
	v = json_object_get(body, "labels");
	if (sbx_labels_check(v, msg, msglen) == -1)
		return 400;
	*labels = (v != NULL && json_is_object(v)) ? json_incref(v) :
	    json_object();
	if (*labels == NULL) {
		*code = "internal";
		snprintf(msg, msglen, "out of memory");
		return 500;
	}
	*ttl = m->cfg->default_ttl_s;
	v = json_object_get(body, "ttl");
	if (v != NULL && !json_is_null(v) &&
	    sbx_ttl_parse(v, ttl, msg, msglen) == -1)
		return 400;
	v = json_object_get(body, "policy");
	pol = json_string_value(v);
	if (pol == NULL || strlen(pol) != json_string_length(v) ||
	    strlen(pol) > SBX_POLICY_MAX || pol[0] == '\0') {
		snprintf(msg, msglen, "policy: required (a policy name)");
		return 400;
	}
	ps = gw_pset_ref(m->gw);
	found = pol_set_get(gw_pset_set(ps), pol) != NULL;
	gw_pset_unref(ps);
	if (!found) {
		*code = "unknown_policy";
		snprintf(msg, msglen, "no policy named '%s' is loaded", pol);
		return 422;
	}
	snprintf(r->policy, sizeof(r->policy), "%s", pol);
	if (r->id[0] != '\0' && id_taken(m, r->id)) {
		*code = "exists";
		snprintf(msg, msglen, "sandbox %s already exists", r->id);
		return 409;
	}
	return 0;
}

/*
 * The record of a create request refused before anything was authorized
 * (bad input, unknown policy, pool exhausted, audit log down): async, as
 * nothing is done on its account. The request's own strings are untrusted
 * and go through rec_string.
 */
static void
create_refused(const struct sbx_rec *r, json_t *body, unsigned status,
    const char *code, const char *msg)
{
	const char *pol = json_string_value(json_object_get(body, "policy"));
	char pb[SBX_POLICY_MAX + 1];
	json_t *o;
	int bad = 0;

	if ((o = json_object()) == NULL)
		return;
	if (r->id[0] != '\0')
		bad |= json_object_set_new(o, "sandbox", json_pack("{s:s}",
		    "id", r->id));
	if (pol != NULL) {
		snprintf(pb, sizeof(pb), "%s", pol);
		bad |= json_object_set_new(o, "policy", json_pack("{s:o}",
		    "id", rec_string(pb)));
	}
	if (r->subject[0] != '\0')
		bad |= json_object_set_new(o, "subject",
		    json_string(r->subject));
	bad |= json_object_set_new(o, "decision", json_string("deny"));
	bad |= json_object_set_new(o, "result", json_string("refused"));
	bad |= json_object_set_new(o, "reason", json_string(code));
	bad |= json_object_set_new(o, "status", json_integer(status));
	bad |= json_object_set_new(o, "detail", rec_string(msg));
	if (bad) {
		json_decref(o);
		log_warnx("sandbox.create refusal: record: out of memory");
		return;
	}
	if (rec_async("sandbox.create", o) == -1)
		log_warn("sandbox.create refusal: record");
}

/*
 * POST /v1/sandboxes. The audit trail of one create is:
 *  - refused before anything is authorized: one sandbox.create with
 *    decision "deny", result "refused" (async);
 *  - authorized: sandbox.create, decision "allow", result "authorized",
 *    committed durably BEFORE the kernel is touched; if it cannot be
 *    committed the answer is 503 audit_unavailable and nothing is made;
 *  - authorized but the kernel (or the state database) then fails: a second
 *    sandbox.create with decision "deny", result "failed" and the cause,
 *    after everything made was rolled back.
 */
unsigned
sbx_create(struct sbx *m, json_t *body, json_t **reply)
{
	struct sandbox *s = NULL;
	struct sbx_rec r;
	json_t *labels = NULL;
	const char *code;
	char msg[512], *lj, detail[32];
	unsigned status;
	uint32_t ttl = 0;
	int64_t slot = -1;
	int made_ns = 0, made_fw = 0, authorized = 0, tries;

	memset(&r, 0, sizeof(r));
	*reply = NULL;
	/* First what failed creates left: their slots and ids serve again
	 * once it is gone. */
	if (m->nleft > 0)
		leftovers_remove(m);
	status = parse_create(m, body, &r, &labels, &ttl, &code, msg,
	    sizeof(msg));
	if (status != 0)
		goto fail;
	for (tries = 0; r.id[0] == '\0' && tries < 8; tries++) {
		char hex[13];

		if (random_hex(hex, 6) == -1)
			break;
		snprintf(r.id, sizeof(r.id), "sb-%s", hex);
		if (id_taken(m, r.id))
			r.id[0] = '\0';
	}
	if (r.id[0] == '\0') {
		status = 500, code = "internal";
		snprintf(msg, sizeof(msg), "cannot generate an id");
		goto fail;
	}
	if (m->count >= m->cfg->max_sandboxes ||
	    (slot = sbx_slots_alloc(m->slots)) == -1) {
		status = 503, code = "pool_exhausted";
		snprintf(msg, sizeof(msg), "no free sandbox slot (%zu "
		    "sandboxes, max_sandboxes %u, pool /%u)", m->count,
		    m->cfg->max_sandboxes, (unsigned)m->prefix);
		goto fail;
	}
	/* sb_link takes the slot again when the sandbox is complete. */
	sbx_slots_put(m->slots, (uint32_t)slot);
	r.index = (uint32_t)slot;
	if ((lj = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS)) == NULL ||
	    strlen(lj) >= sizeof(r.labels)) {
		free(lj);
		status = 400, code = "bad_request";
		snprintf(msg, sizeof(msg), "labels: too large");
		goto fail;
	}
	snprintf(r.labels, sizeof(r.labels), "%s", lj);
	free(lj);
	if (random_hex(r.token, 32) == -1) {
		status = 500, code = "internal";
		snprintf(msg, sizeof(msg), "getrandom: %s", strerror(errno));
		goto fail;
	}
	r.created = (int64_t)time(NULL);
	r.expires = ttl > 0 ? r.created + ttl : 0;
	/* Its own generation, durable before the kernel sees it: a flow
	 * left by an earlier sandbox on this slot never passes for its. */
	if (gen_alloc(m, &r.gen, msg, sizeof(msg)) == -1) {
		status = 500, code = "state_db";
		goto fail;
	}
	if ((s = sb_from_rec(m, &r, 0, msg, sizeof(msg))) == NULL) {
		status = 500, code = "internal";
		goto fail;
	}
	/* No action without a record: the decision is durable before the
	 * kernel sees the sandbox. Blocking (rec_commit) is a group-commit
	 * window plus an fsync; creates are rare next to packets. */
	snprintf(detail, sizeof(detail), "ttl=%u", ttl);
	if (sb_commit(s, "sandbox.create", "allow", "authorized", detail, msg,
	    sizeof(msg)) == -1) {
		status = 503, code = "audit_unavailable";
		goto fail;
	}
	authorized = 1;
	/* The kernel first, the row last: a crash in between leaves pieces
	 * with no record, which the next start removes as orphans. */
	if (ns_create(&s->spec, msg, sizeof(msg)) == -1) {
		/* A namespace of that name that is not ours (/run/netns is
		 * machine-wide) is a conflict, not a kernel failure. */
		if (errno == EEXIST)
			status = 409, code = "exists";
		else
			status = 500, code = "kernel";
		goto fail;
	}
	made_ns = 1;
	if (sb_ns_ident(s) == -1) {
		status = 500, code = "kernel";
		snprintf(msg, sizeof(msg), "%s/%s: %s", s->spec.netns_dir,
		    s->spec.netns, strerror(errno));
		goto fail;
	}
	/* An address comes back with its slot: whatever conntrack still
	 * holds from it (a removal whose sweep failed, a crash before it)
	 * goes before the sandbox is reachable, or the new one would ride
	 * the old one's flows. */
	if (sb_ct_flush(m, s->fsb.addr4, s->rec.id) == -1) {
		status = 500, code = "kernel";
		snprintf(msg, sizeof(msg), "conntrack entries of %s stay",
		    s->rec.addr);
		goto fail;
	}
	if (fw_apply(m, s, 0, msg, sizeof(msg)) == -1) {
		status = 500, code = "kernel";
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
		status = 500, code = "state_db";
		goto fail;
	}
	if (sb_link(m, s) == -1) {
		(void)sbx_db_delete(m->db, s->rec.id, NULL, 0);
		status = 500, code = "internal";
		snprintf(msg, sizeof(msg), "index: %s", strerror(errno));
		goto fail;
	}
	arm_timer(m, s);
	m->creates++;
	notify(m, SB_ADDED, s);
	log_info("sandbox.create id=%s policy=%s subject=%s if=%s addr=%s "
	    "ttl=%u", s->rec.id, s->rec.policy, s->rec.subject,
	    s->spec.host_if, s->rec.addr, ttl);
	json_decref(labels);
	/* The sandbox exists now; an answer that cannot be built is still
	 * a 201 the caller can follow with GET. */
	if ((*reply = sb_json(m, s, 1)) == NULL)
		*reply = json_pack("{s:s}", "id", s->rec.id);
	return 201;

fail:
	if (s != NULL) {
		char e2[256] = "", left[320] = "";
		int left_fw = 0, left_ns = 0;

		if (made_fw && fw_sandbox_del(m->fw, &s->fsb, e2,
		    sizeof(e2)) == -1) {
			log_warnx("sandbox %s: rollback: %s", s->rec.id, e2);
			left_fw = 1;
		}
		if (made_ns && ns_delete(&s->spec, left_fw ? NULL : e2,
		    left_fw ? 0 : sizeof(e2)) == -1) {
			log_warnx("sandbox %s: rollback: %.200s", s->rec.id,
			    left_fw ? "namespace or link" : e2);
			left_ns = 1;
		}
		if (left_fw || left_ns) {
			/* Its slot is held until what is left is removed:
			 * a later create must not draw it and fail on the
			 * name. */
			snprintf(left, sizeof(left), "; left behind: %s "
			    "(%.200s); slot %u held until it is removed",
			    s->spec.host_if, e2, s->rec.index);
			leftover_hold(m, &s->spec, s->rec.index, left_fw);
		}
		/* The log holds an "allow" for this id: say it did not
		 * happen, durably too, so a reader never takes it for a
		 * sandbox that existed. */
		if (authorized) {
			char why[900];

			snprintf(why, sizeof(why), "%s: %s%s", code, msg,
			    left);
			if (sb_commit(s, "sandbox.create", "deny", "failed",
			    why, e2, sizeof(e2)) == -1)
				log_warnx("sandbox %s: failure not recorded: "
				    "%s", s->rec.id, e2);
		}
		sb_free(s);
	}
	if (!authorized)
		create_refused(&r, body, status, code, msg);
	json_decref(labels);
	if (status >= 500)
		m->failures++;
	if (status >= 500 || status == 409)
		log_warnx("sandbox create%s%s: %s: %s", r.id[0] ? " " : "",
		    r.id, code, msg);
	/* rec_string: msg may quote input cut inside a UTF-8 character,
	 * which a plain "s" would refuse, turning this 4xx into a 500. */
	*reply = json_pack("{s:s, s:o}", "error", code, "message",
	    rec_string(msg));
	return status;
}

static enum ctl_rc
h_create(struct ctl_req *req, void *arg)
{
	json_t *reply;
	unsigned status;

	status = sbx_create(arg, ctl_req_body(req), &reply);
	return ctl_reply_json(req, status, reply);
}

/* ------------------------------------------------------------ others */

static enum ctl_rc
h_list(struct ctl_req *req, void *arg)
{
	struct sbx *m = arg;
	json_t *a, *o;
	uint32_t i;

	if ((a = json_array()) == NULL)
		return ctl_reply_error(req, 500, "internal", "out of memory");
	/* Slot order: stable, and the order they were made in for a
	 * daemon that never deleted one. */
	for (i = 0; i < m->nslots; i++) {
		if (m->by_slot[i] == NULL)
			continue;
		if (json_array_append_new(a, sb_json(m, m->by_slot[i], 0)) ==
		    -1) {
			json_decref(a);
			return ctl_reply_error(req, 500, "internal",
			    "out of memory");
		}
	}
	o = json_pack("{s:o, s:I}", "sandboxes", a, "count",
	    (json_int_t)m->count);
	return ctl_reply_json(req, 200, o);
}

static struct sandbox *
req_sandbox(struct sbx *m, struct ctl_req *req)
{
	return find_id(m, ctl_req_param(req, "id"));
}

static enum ctl_rc
h_get(struct ctl_req *req, void *arg)
{
	struct sbx *m = arg;
	struct sandbox *s;

	if ((s = req_sandbox(m, req)) == NULL)
		return ctl_reply_error(req, 404, "not_found",
		    "no such sandbox");
	return ctl_reply_json(req, 200, sb_json(m, s, 0));
}

int
sbx_delete(struct sbx *m, const char *id, char *err, size_t errlen)
{
	struct sandbox *s;

	if ((s = find_id(m, id)) == NULL) {
		snprintf(err, errlen, "no such sandbox");
		errno = ENOENT;
		return -1;
	}
	return sb_remove(m, s, "sandbox.delete", "request", err, errlen);
}

static enum ctl_rc
h_delete(struct ctl_req *req, void *arg)
{
	struct sbx *m = arg;
	const char *id = ctl_req_param(req, "id");
	char err[512];

	/* id is the request's own string (never truncated: a prefix of a
	 * long id must not name another sandbox). */
	if (sbx_delete(m, id, err, sizeof(err)) == -1) {
		if (errno == ENOENT)
			return ctl_reply_error(req, 404, "not_found",
			    "no such sandbox");
		/* The log never refuses a removal (sb_remove): what is
		 * left is the kernel's refusal. */
		return ctl_reply_error(req, 500, "kernel", "%s", err);
	}
	return ctl_reply_json(req, 200, json_pack("{s:s, s:b}", "id", id,
	    "deleted", 1));
}

static enum ctl_rc
h_exec(struct ctl_req *req, void *arg)
{
	struct sbx *m = arg;
	struct sandbox *s;
	char svc[INET_ADDRSTRLEN], url[64];

	if ((s = req_sandbox(m, req)) == NULL)
		return ctl_reply_error(req, 404, "not_found",
		    "no such sandbox");
	inet_ntop(AF_INET, &m->svc, svc, sizeof(svc));
	snprintf(url, sizeof(url), "http://%s:%u", svc,
	    (unsigned)m->cfg->bridge_port);
	return ctl_reply_json(req, 200, json_pack("{s:s, s:s, s:s++, "
	    "s:{s:s, s:s, s:s}}",
	    "id", s->rec.id,
	    "netns", s->spec.netns,
	    "netns_path", s->spec.netns_dir, "/", s->spec.netns,
	    "env",
	    "SLUICE_SANDBOX_ID", s->rec.id,
	    "SLUICE_BRIDGE_URL", url,
	    "SLUICE_TOKEN", s->rec.token));
}

/*
 * The control socket is a path, so a process in a sandbox that still sees
 * the host's files (`sluice exec` keeps them, and so does a provider that
 * shares the host's filesystem) could reach it, and approve its own calls
 * or make itself a laxer sandbox. A caller whose network namespace is one
 * of the sandboxes' is refused, and so is one whose namespace cannot be
 * read (it exited). Only callers outside the daemon's own namespace pay
 * for the walk over the sandboxes, which compares the identities taken
 * when each namespace was made (no file per sandbox, and a namespace
 * whose name was unmounted while code still runs in it is still known).
 *
 * Code in a sandbox can leave the sandbox's namespace for one of its own
 * without any privilege (a new user namespace, and a network namespace in
 * it: `unshare -Urn`), and then is in none of the sandboxes'. An
 * unprivileged process can be in a network namespace other than the one
 * it was put in only that way, so a caller outside the daemon's network
 * namespace that is also outside its user namespace is refused too.
 * (Code that is root on the host can rejoin the host's namespaces
 * anyway: this check is no boundary against it.)
 *
 * pid_sandbox: 0 when pid is in the daemon's namespace, or in none of the
 * sandboxes' and in the daemon's user namespace; 1 when it is in a
 * sandbox's (*out, if given, names it), in a network namespace of another
 * user namespace, or its namespaces cannot be read (*out NULL).
 */
static int
pid_sandbox(const struct sbx *m, pid_t pid, const struct sandbox **out)
{
	const struct sandbox *s;
	struct stat ps, st;
	char path[PATH_MAX];
	size_t i;

	if (out != NULL)
		*out = NULL;
	snprintf(path, sizeof(path), "/proc/%ld/ns/net", (long)pid);
	if (stat(path, &ps) == -1)
		return 1;
	if (stat("/proc/self/ns/net", &st) == 0 && st.st_dev == ps.st_dev &&
	    st.st_ino == ps.st_ino)
		return 0;
	for (i = 0; i < SBX_HASH; i++) {
		for (s = m->by_id[i]; s != NULL; s = s->hnext) {
			if (s->ns_known) {
				st.st_dev = s->ns_dev;
				st.st_ino = s->ns_ino;
			} else {
				snprintf(path, sizeof(path), "%s/%s",
				    s->spec.netns_dir, s->spec.netns);
				if (stat(path, &st) == -1)
					continue;
			}
			if (st.st_dev == ps.st_dev && st.st_ino == ps.st_ino) {
				if (out != NULL)
					*out = s;
				return 1;
			}
		}
	}
	snprintf(path, sizeof(path), "/proc/%ld/ns/user", (long)pid);
	if (stat(path, &ps) == -1 || stat("/proc/self/ns/user", &st) == -1 ||
	    st.st_dev != ps.st_dev || st.st_ino != ps.st_ino)
		return 1;
	return 0;
}

static int
peer_in_sandbox(pid_t pid, void *arg)
{
	return pid_sandbox(arg, pid, NULL);
}

/*
 * What the control server refused before a handler ran is recorded here,
 * where the endpoints are: a create refused for its body (400, 413, 415)
 * is a sandbox.create refusal like one sbx_create refuses; a request from
 * inside a sandbox is a finding on that sandbox, whatever it asked.
 */
static void
on_refused(const char *method, const char *path, unsigned status,
    const char *code, const char *message, pid_t pid, void *arg)
{
	struct sbx *m = arg;
	const struct sandbox *s;
	struct sbx_rec r;
	char shown[129];
	size_t i;

	if (strcmp(code, "from_sandbox") == 0 && pid > 0 &&
	    pid_sandbox(m, pid, &s) == 1 && s != NULL) {
		/* The path is the caller's: shown as printable ASCII only. */
		for (i = 0; i < sizeof(shown) - 1 && path[i] != '\0'; i++)
			shown[i] = path[i] >= 0x20 && path[i] < 0x7f ?
			    path[i] : '?';
		shown[i] = '\0';
		(void)sbx_event("sandbox.control_refused", s->rec.id, s,
		    "%s %s from pid %ld inside the sandbox",
		    strcmp(method, "POST") == 0 || strcmp(method, "GET") ==
		    0 || strcmp(method, "DELETE") == 0 ? method : "?", shown,
		    (long)pid);
		return;
	}
	if (strcmp(method, "POST") == 0 && strcmp(path, "/v1/sandboxes") == 0) {
		memset(&r, 0, sizeof(r));
		create_refused(&r, NULL, status, code, message);
	}
}

int
sbx_routes(struct sbx *m, struct ctl *ctl)
{
	ctl_set_peer_check(ctl, peer_in_sandbox, m);
	ctl_set_refused_hook(ctl, on_refused, m);
	if (ctl_route(ctl, "POST", "/v1/sandboxes", h_create, m) == -1 ||
	    ctl_route(ctl, "GET", "/v1/sandboxes", h_list, m) == -1 ||
	    ctl_route(ctl, "GET", "/v1/sandboxes/{id}", h_get, m) == -1 ||
	    ctl_route(ctl, "DELETE", "/v1/sandboxes/{id}", h_delete, m) ==
	    -1 ||
	    ctl_route(ctl, "POST", "/v1/sandboxes/{id}/exec", h_exec, m) ==
	    -1)
		return -1;
	return 0;
}

/* ------------------------------------------------------------ reconcile */

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
		if (sbx_event("sandbox.orphan", "-", NULL, "link=%s removing",
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

		if ((s = find_id(m, id)) != NULL)
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
		if (sbx_event("sandbox.orphan", id, NULL, "netns=%s removing",
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
		if (sbx_event("sandbox.orphan", "-", NULL, "elements=%s "
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
	if (sbx_event("sandbox.invalid_row", sbx_id_valid(r->id) ? r->id :
	    "-", NULL, "state row dropped: %s", w) == -1)
		return -1;
	(void)sbx_db_delete(m->db, r->id, NULL, 0);
	return 0;
}

static int
reconcile(struct sbx *m, char *err, size_t errlen)
{
	struct recs rs = { 0 };
	struct fwlist fl = { 0 };
	struct sandbox *s;
	char e[512];
	int64_t now = (int64_t)time(NULL);
	size_t i;
	int whole, kept;

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
		if (find_id(m, s->rec.id) != NULL ||
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
		if ((whole = sb_exists(s)) == -1) {
			snprintf(err, errlen, "reconcile: sandbox %s (%s): "
			    "cannot tell whether it is whole: %s; nothing "
			    "removed, not starting", r->id, s->spec.host_if,
			    strerror(errno));
			sb_free(s);
			goto fail;
		}
		if (whole == 1 && s->rec.expires > 0 && s->rec.expires <= now) {
			(void)sb_link(m, s);
			if (sb_remove(m, s, "sandbox.expire", "ttl", e,
			    sizeof(e)) == -1) {
				if (errno == EPIPE) {
					snprintf(err, errlen, "reconcile: %s: "
					    "%s", r->id, e);
					goto fail;
				}
				arm_timer(m, s);
				/* Kept, to be retried: it is in the table. */
				notify(m, SB_ADDED, s);
			}
			continue;
		}
		/* Every removal and adoption below is recorded before it is
		 * made; a log that cannot commit stops the start (the
		 * daemon must not serve then anyway). */
		if (whole == 0) {
			if (sb_commit(s, "sandbox.delete", "log", NULL,
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
			if (gen_alloc(m, &s->rec.gen, e, sizeof(e)) == -1 ||
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
		if (sb_commit(s, "sandbox.adopt", "log", NULL, kept ?
		    "elements=kept" : "elements=restored", e, sizeof(e)) == -1)
			goto norecord;
		/* Adopted elements are refreshed from the policy in force
		 * (it may have changed while we were down), keeping what the
		 * sandbox learned and its generation (so its open flows go
		 * on); missing ones are added afresh. */
		if (fw_apply(m, s, kept, e, sizeof(e)) == -1) {
			log_warnx("reconcile: %s: %s", r->id, e);
			if (sb_commit(s, "sandbox.delete", "log", NULL,
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
		arm_timer(m, s);
		log_info("sandbox.adopt id=%s policy=%s if=%s addr=%s",
		    s->rec.id, s->rec.policy, s->spec.host_if, s->rec.addr);
		notify(m, SB_ADDED, s);
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

/* ------------------------------------------------------------ lifecycle */

static int
fw_setup(struct sbx *m, char *err, size_t errlen)
{
	const struct pol_config *c = m->cfg;
	struct fw_cidr *deny = NULL, *priv = NULL;
	struct pol_cidr *pv = NULL;
	size_t npv = 0, cap = 0;
	const struct pol_cidr *d4, *d6, *p4, *p6;
	struct fw_config fc;
	size_t nd4, nd6, np4, np6, i, k;
	char e[512];
	int rc = -1, r;

	d4 = pol_deny_ranges(AF_INET, &nd4);
	d6 = pol_deny_ranges(AF_INET6, &nd6);
	p4 = pol_private_ranges(AF_INET, &np4);
	p6 = pol_private_ranges(AF_INET6, &np6);
	if ((deny = calloc(nd4 + nd6 + 1, sizeof(*deny))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* The always-deny ranges go in whole: treat_as_public never lifts
	 * metadata, loopback, link-local or unspecified, and for the other
	 * always-denied classes the kernel errs on the closed side. */
	for (i = 0, k = 0; i < nd4; i++)
		pol_to_fw_cidr(&d4[i], &deny[k++]);
	for (i = 0; i < nd6; i++)
		pol_to_fw_cidr(&d6[i], &deny[k++]);
	/* treat_as_public reaches the kernel here: the classifier calls
	 * those addresses public, so the private sets must not hold them,
	 * or an allow the policy grants would still be refused. */
	for (i = 0; i < np4 + np6; i++) {
		if (sbx_cidr_subtract(i < np4 ? &p4[i] : &p6[i - np4],
		    c->treat_as_public, c->ntreat_as_public, &pv, &npv,
		    &cap) == -1) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	if ((priv = calloc(npv + 1, sizeof(*priv))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (i = 0; i < npv; i++)
		pol_to_fw_cidr(&pv[i], &priv[i]);

	memset(&fc, 0, sizeof(fc));
	memcpy(fc.svc4, &m->svc, 4);
	fc.dns_port = 53;
	fc.bridge_port = c->bridge_port;
	if (c->uplink != NULL) {
		if (strlen(c->uplink) >= sizeof(fc.uplink)) {
			snprintf(err, errlen, "uplink %s: name too long",
			    c->uplink);
			goto out;
		}
		snprintf(fc.uplink, sizeof(fc.uplink), "%s", c->uplink);
	}
	if (c->nflog_group > UINT16_MAX) {
		snprintf(err, errlen, "nflog_group %u out of range",
		    c->nflog_group);
		goto out;
	}
	fc.nflog_group = (uint16_t)c->nflog_group;
	pol_to_fw_cidr(&c->pool, &fc.pool);
	fc.deny = deny;
	fc.ndeny = nd4 + nd6;
	fc.private = priv;
	fc.nprivate = npv;
	/* The table's sets are sized for the most sandboxes the daemon
	 * runs; the learned sets for each at its learned cap. */
	fc.max_sandboxes = c->max_sandboxes;
	fc.max_learned = c->dns_max_learned;
	if ((m->fw = fw_new(err, errlen)) == NULL)
		goto out;
	if ((r = fw_init(m->fw, &fc, FW_ADOPT, e, sizeof(e))) == -1) {
		/* The old table cannot be adopted (another layout, another
		 * pool): start afresh; reconcile re-adds the sandboxes. */
		log_warnx("nftables: cannot adopt the existing table (%s): "
		    "replacing it", e);
		r = fw_init(m->fw, &fc, 0, err, errlen);
	}
	if (r == -1)
		goto out;
	log_info("nftables: table %s", r == 1 ? "adopted" : "created");
	rc = 0;
out:
	free(deny);
	free(priv);
	free(pv);
	return rc;
}

struct sbx *
sbx_new(struct gw *gw, struct ev_loop *loop, char *err, size_t errlen)
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
	if (fw_setup(m, err, errlen) == -1)
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
	if (reconcile(m, err, errlen) == -1)
		goto fail;
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
