/*
 * sandbox.c: the sandbox manager of sluiced. A sandbox is three things
 * that must agree: a namespace and veth pair in the kernel (netns/netns.h),
 * its set elements in the `inet sluice` table (netns/fw.h), and a row in
 * the state database (sandbox_db.c). Creating makes all three or none;
 * deleting removes all three; at start, reconcile() makes the three agree
 * again after a crash, keeping what is whole and removing the rest. The
 * control API endpoints of /v1/sandboxes are here too, so that every way a
 * sandbox comes or goes passes through the same few functions.
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
#include "netns/fw.h"
#include "netns/netns.h"

#define SBX_HASH	1024		/* id hash buckets */
#define SBX_DB_NAME	"state.db"

struct sandbox {
	struct sbx_rec	 rec;
	struct ns_spec	 spec;
	struct fw_sandbox fsb;
	json_t		*labels;	/* object, never NULL */
	struct ev_timer	*timer;		/* TTL, or NULL */
	struct sbx	*m;
	struct sandbox	*hnext;		/* id hash chain */
};

struct sbx {
	struct gw		*gw;
	struct ev_loop		*loop;
	const struct pol_config	*cfg;
	struct fw		*fw;
	struct sqlite3		*db;
	struct sbx_slots	*slots;
	uint32_t		 nslots;
	struct sandbox		**by_slot;	/* nslots entries */
	struct sandbox		*by_id[SBX_HASH];
	size_t			 count;
	struct in_addr		 pool_net, svc;
	uint8_t			 pool4[4], prefix;
	uint64_t		 creates, deletes, failures, expires;
};

static void	sb_free(struct sandbox *s);

/* ------------------------------------------------------------ events */

/*
 * One call site per lifecycle event (sandbox.create, sandbox.delete,
 * sandbox.expire, sandbox.adopt, sandbox.orphan): today a log line; the
 * audit record is handed to audit/ here once the audit wiring lands.
 */
static void
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
	/* Durable: committed before the caller goes on (and replies). */
	if (rec_sandbox_event(kind, id, s != NULL ? s->rec.policy : NULL,
	    s != NULL ? s->rec.subject : NULL, s != NULL ? s->spec.host_if :
	    NULL, s != NULL ? s->rec.addr : NULL, detail) == -1)
		log_warn("%s %s: audit record not committed", kind, id);
	if (s != NULL)
		log_info("%s id=%s policy=%s subject=%s if=%s addr=%s%s%s",
		    kind, id, s->rec.policy, s->rec.subject, s->spec.host_if,
		    s->rec.addr, detail[0] != '\0' ? " " : "", detail);
	else
		log_info("%s id=%s%s%s", kind, id, detail[0] != '\0' ? " " :
		    "", detail);
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

/*
 * Puts s's static elements in the kernel from its policy as it is now
 * (and its taint restriction, if any). A policy that no longer exists
 * gives a sandbox with no allows: fail closed.
 */
static int
fw_apply(struct sbx *m, struct sandbox *s, char *err, size_t errlen)
{
	const struct pol_net_rule *ra = NULL, *rd = NULL, *rk = NULL;
	struct fw_rule *fa = NULL, *fd = NULL, *fk = NULL;
	const struct pol_policy *p;
	struct gw_pset *ps;
	size_t na = 0, nd = 0, nk = 0;
	int icmp = 0, rc = -1;

	ps = gw_pset_ref(m->gw);
	p = pol_set_get(gw_pset_set(ps), s->rec.policy);
	if (p != NULL) {
		ra = pol_egress_static(p, true, &na);
		rd = pol_egress_static(p, false, &nd);
		rk = pol_taint_keep(p, &nk);
		s->fsb.quota_bytes = pol_egress_quota(p);
	} else
		log_warnx("sandbox %s: policy %s is not loaded: no static "
		    "allows", s->rec.id, s->rec.policy);
	if ((fa = calloc(na + 1, sizeof(*fa))) == NULL ||
	    (fd = calloc(nd + 1, sizeof(*fd))) == NULL ||
	    (fk = calloc(nk + 1, sizeof(*fk))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	na = rules_to_fw(ra, na, 1, fa, &icmp);
	nd = rules_to_fw(rd, nd, 0, fd, NULL);
	nk = rules_to_fw(rk, nk, 1, fk, NULL);
	s->fsb.icmp = icmp;
	if (fw_sandbox_add(m->fw, &s->fsb, fa, na, fd, nd, err, errlen) == -1)
		goto out;
	if (s->rec.tainted && fw_restrict(m->fw, s->fsb.ifname, fk, nk, err,
	    errlen) == -1) {
		(void)fw_sandbox_del(m->fw, &s->fsb, NULL, 0);
		goto out;
	}
	rc = 0;
out:
	free(fa);
	free(fd);
	free(fk);
	gw_pset_unref(ps);
	return rc;
}

/* Builds the in-memory sandbox of a record: spec, fw view, labels.
 * NULL with err when the record does not describe a sandbox of this
 * pool. */
static struct sandbox *
sb_from_rec(struct sbx *m, const struct sbx_rec *r, char *err,
    size_t errlen)
{
	struct sandbox *s;
	char a[INET_ADDRSTRLEN], h[INET_ADDRSTRLEN];

	if (!sbx_id_valid(r->id) || r->index >= m->nslots) {
		snprintf(err, errlen, "bad id or slot");
		errno = EINVAL;
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->m = m;
	s->rec = *r;
	if ((s->labels = json_loads(r->labels, JSON_REJECT_DUPLICATES,
	    NULL)) == NULL || !json_is_object(s->labels) ||
	    sbx_labels_check(s->labels, err, errlen) == -1) {
		if (s->labels == NULL || !json_is_object(s->labels))
			snprintf(err, errlen, "labels: not a JSON object");
		errno = EINVAL;
		sb_free(s);
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
	 * written by us for this pool (config changed, or tampering). */
	if (r->addr[0] != '\0' && (strcmp(a, r->addr) != 0 ||
	    strcmp(h, r->host_addr) != 0)) {
		snprintf(err, errlen, "addresses %s/%s do not match slot %u "
		    "(%s/%s)", r->addr, r->host_addr, r->index, a, h);
		errno = EINVAL;
		sb_free(s);
		return NULL;
	}
	snprintf(s->rec.addr, sizeof(s->rec.addr), "%s", a);
	snprintf(s->rec.host_addr, sizeof(s->rec.host_addr), "%s", h);
	snprintf(s->fsb.ifname, sizeof(s->fsb.ifname), "%s", s->spec.host_if);
	memcpy(s->fsb.addr4, &s->spec.sandbox_addr, 4);
	return s;
}

static void
sb_free(struct sandbox *s)
{
	if (s == NULL)
		return;
	if (s->timer != NULL)
		ev_timer_cancel(s->m->loop, s->timer);
	json_decref(s->labels);
	OPENSSL_cleanse(s->rec.token, sizeof(s->rec.token));
	free(s);
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
	if (ns_delete(&s->spec, rc == 0 ? err : e2, rc == 0 ? errlen :
	    sizeof(e2)) == -1)
		rc = -1;
	return rc;
}

static void	arm_timer(struct sbx *m, struct sandbox *s);

/* Removes s everywhere (kernel, row, memory) and logs `kind`. On a kernel
 * failure the row and the entry stay, so that a later delete or the next
 * start tries again. */
static int
sb_remove(struct sbx *m, struct sandbox *s, const char *kind, char *err,
    size_t errlen)
{
	char id[SBX_ID_MAX + 1];

	if (sb_kernel_remove(m, s, err, errlen) == -1) {
		log_warnx("sandbox %s: remove: %s", s->rec.id, err);
		m->failures++;
		return -1;
	}
	if (sbx_db_delete(m->db, s->rec.id, err, errlen) == -1) {
		/* The kernel part is gone; the next start sees a record
		 * that lost its pieces and drops it. */
		log_warnx("sandbox %s: %s", s->rec.id, err);
	}
	snprintf(id, sizeof(id), "%s", s->rec.id);
	sbx_event(kind, id, s, NULL);
	sb_unlink(m, s);
	sb_free(s);
	m->deletes++;
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
	if (sb_remove(m, s, "sandbox.expire", err, sizeof(err)) == 0) {
		m->expires++;
		return;
	}
	/* Retry later rather than keep a sandbox past its TTL silently. */
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
	snprintf(v->id, sizeof(v->id), "%s", s->rec.id);
	snprintf(v->ifname, sizeof(v->ifname), "%s", s->spec.host_if);
	snprintf(v->subject, sizeof(v->subject), "%s", s->rec.subject);
	snprintf(v->policy, sizeof(v->policy), "%s", s->rec.policy);
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
	struct gw_pset *ps;
	struct sandbox *s;
	size_t nk = 0;
	int rc;

	if ((s = find_id(m, id)) == NULL) {
		snprintf(err, errlen, "no sandbox %s", id);
		errno = ENOENT;
		return -1;
	}
	if (s->rec.tainted)
		return 0;
	ps = gw_pset_ref(m->gw);
	/* A policy gone since creation keeps nothing: fail closed. */
	if ((p = pol_set_get(gw_pset_set(ps), s->rec.policy)) != NULL)
		rk = pol_taint_keep(p, &nk);
	if ((fk = calloc(nk + 1, sizeof(*fk))) == NULL) {
		gw_pset_unref(ps);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	nk = rules_to_fw(rk, nk, 1, fk, NULL);
	rc = fw_restrict(m->fw, s->fsb.ifname, fk, nk, err, errlen);
	free(fk);
	gw_pset_unref(ps);
	if (rc == -1)
		return -1;
	s->rec.tainted = 1;
	if (sbx_db_set_tainted(m->db, id, err, errlen) == -1)
		log_warnx("sandbox %s: taint not persisted: %s", id, err);
	sbx_event("sandbox.taint", id, s, "keep=%zu", nk);
	return 0;
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
	    "sluice_sandbox_failures_total %" PRIu64 "\n",
	    m->count, m->creates, m->deletes, m->failures);
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
	if (r->id[0] != '\0' && find_id(m, r->id) != NULL) {
		*code = "exists";
		snprintf(msg, msglen, "sandbox %s already exists", r->id);
		return 409;
	}
	return 0;
}

unsigned
sbx_create(struct sbx *m, json_t *body, json_t **reply)
{
	struct sandbox *s = NULL;
	struct sbx_rec r;
	json_t *labels = NULL;
	const char *code;
	char msg[512], *lj;
	unsigned status;
	uint32_t ttl = 0;
	int64_t slot = -1;
	int made_ns = 0, made_fw = 0, tries;

	memset(&r, 0, sizeof(r));
	*reply = NULL;
	status = parse_create(m, body, &r, &labels, &ttl, &code, msg,
	    sizeof(msg));
	if (status != 0)
		goto fail;
	for (tries = 0; r.id[0] == '\0' && tries < 8; tries++) {
		char hex[13];

		if (random_hex(hex, 6) == -1)
			break;
		snprintf(r.id, sizeof(r.id), "sb-%s", hex);
		if (find_id(m, r.id) != NULL)
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
	if ((s = sb_from_rec(m, &r, msg, sizeof(msg))) == NULL) {
		status = 500, code = "internal";
		goto fail;
	}
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
	if (fw_apply(m, s, msg, sizeof(msg)) == -1) {
		status = 500, code = "kernel";
		goto fail;
	}
	made_fw = 1;
	if (sbx_db_insert(m->db, &s->rec, msg, sizeof(msg)) == -1) {
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
	sbx_event("sandbox.create", s->rec.id, s, "ttl=%u", ttl);
	json_decref(labels);
	/* The sandbox exists now; an answer that cannot be built is still
	 * a 201 the caller can follow with GET. */
	if ((*reply = sb_json(m, s, 1)) == NULL)
		*reply = json_pack("{s:s}", "id", s->rec.id);
	return 201;

fail:
	if (s != NULL) {
		char e2[256] = "";

		if (made_fw && fw_sandbox_del(m->fw, &s->fsb, e2,
		    sizeof(e2)) == -1)
			log_warnx("sandbox %s: rollback: %s", s->rec.id, e2);
		if (made_ns && ns_delete(&s->spec, e2, sizeof(e2)) == -1)
			log_warnx("sandbox %s: rollback: %s", s->rec.id, e2);
		sb_free(s);
	}
	json_decref(labels);
	if (status >= 500)
		m->failures++;
	if (status >= 500 || status == 409)
		log_warnx("sandbox create%s%s: %s: %s", r.id[0] ? " " : "",
		    r.id, code, msg);
	*reply = json_pack("{s:s, s:s}", "error", code, "message", msg);
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
	return sb_remove(m, s, "sandbox.delete", err, errlen);
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

int
sbx_routes(struct sbx *m, struct ctl *ctl)
{
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

static void
remove_orphans(struct sbx *m, const struct fwlist *fl)
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
		return;
	}
	/* Links first: they are in our own namespace, so certainly ours. A
	 * spec with an id that has no pin removes only the link. */
	snprintf(tmpid, sizeof(tmpid), "reconcile-%ld", (long)getpid());
	snprintf(tmppin, sizeof(tmppin), "%s%s", NS_NETNS_PREFIX, tmpid);
	for (i = 0; links[i] != NULL; i++) {
		if (sbx_lookup_ifname(m, links[i], &(struct sbx_view){0}) == 0)
			continue;
		memset(&fsb, 0, sizeof(fsb));
		snprintf(fsb.ifname, sizeof(fsb.ifname), "%s", links[i]);
		(void)fw_sandbox_del(m->fw, &fsb, NULL, 0);
		if (name_in(pins, tmppin) ||
		    orphan_spec(m, &sp, tmpid, links[i]) == -1 ||
		    ns_delete(&sp, err, sizeof(err)) == -1) {
			log_warnx("reconcile: orphan link %s stays", links[i]);
			continue;
		}
		sbx_event("sandbox.orphan", "-", NULL, "link=%s removed",
		    links[i]);
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
		if ((nsid = sbx_nl_nsid(path)) < 0) {
			if (nsid == -2)
				log_debug("reconcile: %s: not a namespace or "
				    "unreadable: left alone", pins[i]);
			continue;
		}
		if (orphan_spec(m, &sp, id, none) == -1 ||
		    ns_delete(&sp, err, sizeof(err)) == -1) {
			log_warnx("reconcile: orphan namespace %s stays: %s",
			    pins[i], err);
			continue;
		}
		sbx_event("sandbox.orphan", id, NULL, "netns=%s removed",
		    pins[i]);
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
		if (fw_sandbox_del(m->fw, &fsb, err, sizeof(err)) == -1) {
			log_warnx("reconcile: orphan elements of %s: %s",
			    fsb.ifname, err);
			continue;
		}
		sbx_event("sandbox.orphan", "-", NULL, "elements=%s removed",
		    fsb.ifname);
	}
	ns_names_free(pins);
	ns_names_free(links);
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

static int
reconcile(struct sbx *m, char *err, size_t errlen)
{
	struct recs rs = { 0 };
	struct fwlist fl = { 0 };
	struct sandbox *s;
	char e[512];
	int64_t now = (int64_t)time(NULL);
	size_t i;
	int whole;

	if (sbx_db_load(m->db, collect_rec, &rs, err, errlen) == -1 ||
	    fw_list_sandboxes(m->fw, collect_fw, &fl, err, errlen) == -1)
		goto fail;
	if (rs.oom || fl.oom) {
		snprintf(err, errlen, "reconcile: out of memory");
		goto fail;
	}
	for (i = 0; i < rs.n; i++) {
		const struct sbx_rec *r = &rs.v[i];

		s = rs.bad[i] ? NULL : sb_from_rec(m, r, e, sizeof(e));
		if (s == NULL) {
			/* A row we cannot read names nothing we can remove
			 * safely but itself; its pieces become orphans. */
			log_warnx("reconcile: record %s: %s: dropped", r->id,
			    rs.bad[i] ? "unreadable" : e);
			(void)sbx_db_delete(m->db, r->id, NULL, 0);
			continue;
		}
		if (find_id(m, s->rec.id) != NULL ||
		    sbx_slots_used(m->slots, s->rec.index)) {
			log_warnx("reconcile: record %s: slot %u taken twice: "
			    "dropped", r->id, r->index);
			(void)sbx_db_delete(m->db, r->id, NULL, 0);
			sb_free(s);
			continue;
		}
		whole = ns_exists(&s->spec);
		if (whole == 1 && s->rec.expires > 0 && s->rec.expires <= now) {
			(void)sb_link(m, s);
			if (sb_remove(m, s, "sandbox.expire", e,
			    sizeof(e)) == -1)
				arm_timer(m, s);
			continue;
		}
		if (whole != 1) {
			if (sb_kernel_remove(m, s, e, sizeof(e)) == -1)
				log_warnx("reconcile: %s: %s", r->id, e);
			(void)sbx_db_delete(m->db, r->id, NULL, 0);
			sbx_event("sandbox.delete", r->id, s, "reason=%s",
			    whole == 0 ? "incomplete" : "unreadable");
			sb_free(s);
			continue;
		}
		if (!fw_has(&fl, s) && fw_apply(m, s, e, sizeof(e)) == -1) {
			log_warnx("reconcile: %s: %s", r->id, e);
			(void)sb_kernel_remove(m, s, e, sizeof(e));
			(void)sbx_db_delete(m->db, r->id, NULL, 0);
			sbx_event("sandbox.delete", r->id, s,
			    "reason=fw_failed");
			sb_free(s);
			continue;
		}
		if (sb_link(m, s) == -1) {
			log_warn("reconcile: %s", r->id);
			sb_free(s);
			continue;
		}
		arm_timer(m, s);
		sbx_event("sandbox.adopt", s->rec.id, s, NULL);
	}
	remove_orphans(m, &fl);
	free(rs.v);
	free(rs.bad);
	free(fl.v);
	return 0;
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
	sbx_slots_free(m->slots);
	sbx_db_close(m->db);
	fw_free(m->fw);
	free(m);
}
