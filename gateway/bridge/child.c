/*
 * child.c: the bridge process. sluiced's parent starts it (gateway/privsep/
 * proc.c) with the bridge's listener, bound on the service address, and
 * one end of a socket pair. Everything a sandbox sends to the bridge port
 * (HTTP, JSON-RPC, SSE) is parsed here, and the upstream credentials live
 * here and nowhere else: the parent never reads them.
 *
 * It starts as root, because what it needs at the start is root's: the
 * config the parent streams (loaded again from the same bytes), the
 * credential files, bridge.db in the state directory. Once they are open,
 * and before the first byte of a sandbox is read, it forks the starter of
 * the stdio servers (spawn.h), becomes the bridge's own user with no
 * capabilities and no_new_privs, and installs its seccomp filter
 * (gateway/privsep/priv.h). It holds no signing key, no state database, no
 * netlink socket that changes anything.
 *
 * What it knows of sandboxes it was told (the table as add/remove/change
 * messages, with a digest of each bearer token, never the token); what it
 * decides goes back as messages: each call's mcp.intent record, whose
 * durability the parent acknowledges before the call is forwarded, and
 * its mcp.call record, acknowledged before the result is released;
 * findings; a taint,
 * which the parent applies to the kernel and acknowledges before a
 * tainting result is released. Control requests (approvals, pins) come in
 * as messages and their answers go back as text the parent passes on.
 *
 * It fails closed: until the first MSG_SYNC it serves nothing, and when
 * the parent goes away it exits (nothing could be recorded any more).
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "gateway/bridge/br_int.h"
#include "gateway/bridge/bridge.h"
#include "gateway/bridge/spawn.h"
#include "gateway/ev.h"
#include "gateway/log.h"
#include "gateway/privsep/chan.h"
#include "gateway/privsep/msg.h"
#include "gateway/privsep/pchild.h"
#include "gateway/privsep/polrx.h"
#include "gateway/privsep/priv.h"
#include "gateway/privsep/proc.h"
#include "gateway/privsep/sbxtab.h"

#define BRC_QUEUE_MAX	(64u * 1024u * 1024u)	/* to the parent */
#define BRC_STATS_MS	1000u

/* An entry of the sandbox table: the parent's message and when the
 * parent last heard of its activity. */
struct brc_sbx {
	struct msg_br_sbx s;
	uint64_t	 active_ms;	/* last MSG_BR_ACTIVE for it */
};

/* The policy set in force, counted: a call holds the set it started
 * under until it is finished, whatever reloads come meanwhile. */
struct brc_pset {
	unsigned	 refs;
	struct pol_set	*set;
};

/* A record or a taint the parent has yet to acknowledge. */
enum brc_wait_kind { BRC_W_RECORD = 1, BRC_W_TAINT };
struct brc_wait {
	struct brc_wait		*next, **prevp;
	uint64_t		 ticket;
	enum brc_wait_kind	 kind;
	void			(*done)(void *, int);
	void			*arg;
};

struct brc {
	struct ev_loop		*loop;
	struct chan		*ch;
	struct br		*br;
	struct pol_config	*cfg;
	/* the config on its way in */
	struct msg_br_config	 chdr;
	char			*cbuf;
	size_t			 cgot;
	bool			 chave;
	struct polrx		*rx;
	struct brc_pset		*pset;
	struct sbxtab		*tab;		/* struct brc_sbx by address */
	struct brc_wait		*waits;
	uint64_t		 next_ticket;
	int			 lfd;
	int			 spawn_fd;
	pid_t			 spawn_pid;
	uid_t			 uid;
	gid_t			 gid;
	struct ev_timer		*stats;
	struct msg_br_stats	 last;
	int			 status;
};

/* ------------------------------------------------------------- table */

static void
pset_unref(struct brc_pset *ps)
{
	if (ps == NULL || --ps->refs > 0)
		return;
	pol_set_free(ps->set);
	free(ps);
}

/* ------------------------------------------------------------ waits */

static struct brc_wait *
wait_add(struct brc *d, enum brc_wait_kind kind, void (*done)(void *, int),
    void *arg)
{
	struct brc_wait *w;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		return NULL;
	w->ticket = ++d->next_ticket;
	w->kind = kind;
	w->done = done;
	w->arg = arg;
	if ((w->next = d->waits) != NULL)
		w->next->prevp = &w->next;
	w->prevp = &d->waits;
	d->waits = w;
	return w;
}

static void
wait_unlink(struct brc_wait *w)
{
	if ((*w->prevp = w->next) != NULL)
		w->next->prevp = w->prevp;
}

/* The acknowledgement of ticket, of the kind it must be: anything else is
 * a parent we do not understand, and answers nothing. */
static void
wait_done(struct brc *d, enum brc_wait_kind kind, const struct msg_br_done *m)
{
	struct brc_wait *w;

	for (w = d->waits; w != NULL; w = w->next)
		if (w->ticket == m->ticket && w->kind == kind)
			break;
	if (w == NULL)
		return;
	wait_unlink(w);
	w->done(w->arg, m->ok == 1);
	free(w);
}

/* Every wait fails: the parent is gone, or the bridge is stopping. */
static void
waits_fail(struct brc *d)
{
	struct brc_wait *w;

	while ((w = d->waits) != NULL) {
		wait_unlink(w);
		w->done(w->arg, 0);
		free(w);
	}
}

/* ------------------------------------------------------------- hooks */

static const uint32_t table_types[] = { MSG_BR_SBX_ADD, MSG_BR_SBX_DEL,
    MSG_BR_SBX_CHANGE };

static int
h_identify(void *ctx, const struct sockaddr *src, socklen_t len,
    const char *token, struct br_client *out)
{
	struct brc *d = ctx;
	const struct sockaddr_in *sin;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	struct brc_sbx *e;
	size_t i;

	if (src == NULL || src->sa_family != AF_INET ||
	    len < (socklen_t)sizeof(*sin) || token == NULL ||
	    d->pset == NULL)
		return -1;
	sin = (const struct sockaddr_in *)(const void *)src;
	/* A sandbox is in the table before its creation returns. */
	if ((e = sbxtab_lookup(d->tab, (const uint8_t *)&sin->sin_addr, d->ch,
	    table_types, sizeof(table_types) / sizeof(table_types[0]))) ==
	    NULL)
		return -1;
	/* The address alone is not enough: the token must be this
	 * sandbox's too. Only its digest is here to compare with. */
	if (!e->s.usable || EVP_Digest(token, strlen(token), md, &mdlen,
	    EVP_sha256(), NULL) != 1 || mdlen != sizeof(e->s.token_sha256) ||
	    CRYPTO_memcmp(md, e->s.token_sha256, mdlen) != 0)
		return -1;
	memset(out, 0, sizeof(*out));
	memcpy(out->id, e->s.id, strnlen(e->s.id, sizeof(e->s.id) - 1));
	memcpy(out->subject, e->s.subject, strnlen(e->s.subject,
	    sizeof(out->subject) - 1));
	for (i = 0; i < e->s.nlabels && i < BR_MAX_LABELS; i++) {
		memcpy(out->label_keys[i], e->s.label_keys[i],
		    strnlen(e->s.label_keys[i], sizeof(out->label_keys[i]) -
		    1));
		memcpy(out->label_values[i], e->s.label_values[i],
		    strnlen(e->s.label_values[i],
		    sizeof(out->label_values[i]) - 1));
	}
	out->nlabels = i;
	out->tainted = e->s.tainted != 0;
	/* A request is activity (resources.idle): the parent hears of it,
	 * once a second at most. */
	if (ev_now_ms() - e->active_ms >= 1000) {
		struct msg_br_active a;

		memset(&a, 0, sizeof(a));
		memcpy(a.id, e->s.id, strnlen(e->s.id, sizeof(a.id) - 1));
		if (chan_send1(d->ch, MSG_BR_ACTIVE, &a, sizeof(a)) == 0)
			e->active_ms = ev_now_ms();
	}
	/* A sandbox whose policy vanished in a reload calls nothing. */
	if ((out->policy = pol_set_get(d->pset->set, e->s.policy)) == NULL)
		return -1;
	d->pset->refs++;
	out->policy_ref = d->pset;
	return 0;
}

static void
h_release(void *ctx, void *policy_ref)
{
	(void)ctx;
	pset_unref(policy_ref);
}

/* An event, flat: the numbers, then each string with its NUL. */
static int
send_event(struct brc *d, uint32_t type, const struct br_event *ev,
    uint64_t ticket)
{
	const char *strs[MSG_BR_NSTR] = {
		[MSG_BRS_SANDBOX] = ev->sandbox,
		[MSG_BRS_SUBJECT] = ev->subject,
		[MSG_BRS_POLICY] = ev->policy,
		[MSG_BRS_SRC] = ev->src,
		[MSG_BRS_SESSION] = ev->session,
		[MSG_BRS_SERVER] = ev->server,
		[MSG_BRS_TOOL] = ev->tool,
		[MSG_BRS_ARGS] = ev->args,
		[MSG_BRS_ARGS_DIGEST] = ev->args_digest,
		[MSG_BRS_DECISION] = ev->decision,
		[MSG_BRS_RULE] = ev->rule,
		[MSG_BRS_MESSAGE] = ev->message,
		[MSG_BRS_BUDGET] = ev->budget,
		[MSG_BRS_APPROVER] = ev->approver,
		[MSG_BRS_APPROVER_NOTE] = ev->approver_note,
		[MSG_BRS_APPROVAL] = ev->approval,
		[MSG_BRS_CLASSIFICATION] = ev->classification,
		[MSG_BRS_RESULT_DIGEST] = ev->result_digest,
		[MSG_BRS_DETAIL] = ev->detail,
		[MSG_BRS_CALL_ID] = ev->call_id,
		[MSG_BRS_APPROVER_HOST] = ev->approver_host,
		[MSG_BRS_HELD_BY] = ev->held_by,
	};
	struct iovec v[1 + MSG_BR_NSTR];
	struct msg_br_event m;
	size_t i, total = 0;
	int n = 1;

	memset(&m, 0, sizeof(m));
	m.ticket = ticket;
	m.sreq_key = ev->sreq_key;
	m.kind = (uint32_t)ev->kind;
	m.reason = (int32_t)ev->reason;
	m.approver_uid = ev->approver_uid;
	m.upstream_latency_us = ev->upstream_latency_us;
	m.result_bytes = ev->result_bytes;
	m.redactions = ev->redactions;
	m.taints = ev->taints ? 1 : 0;
	v[0].iov_base = &m;
	v[0].iov_len = sizeof(m);
	for (i = 0; i < MSG_BR_NSTR; i++) {
		if (strs[i] == NULL) {
			m.lens[i] = MSG_BR_NULL;
			continue;
		}
		m.lens[i] = (uint32_t)strlen(strs[i]);
		total += (size_t)m.lens[i] + 1;
		if (total > MSG_BR_STR_MAX) {
			errno = EMSGSIZE;
			return -1;
		}
		v[n].iov_base = (void *)(uintptr_t)strs[i];
		v[n++].iov_len = (size_t)m.lens[i] + 1;
	}
	return chan_send(d->ch, type, v, n);
}

static int
h_record(void *ctx, const struct br_event *ev, br_record_done *done,
    void *arg)
{
	struct brc *d = ctx;
	struct brc_wait *w;

	if (d->ch == NULL || (w = wait_add(d, BRC_W_RECORD, done, arg)) ==
	    NULL)
		return -1;
	if (send_event(d, MSG_BR_RECORD, ev, w->ticket) == -1) {
		log_warn("%s record to the parent", ev->kind_name);
		wait_unlink(w);
		free(w);
		return -1;
	}
	return 0;
}

/* A field of an announcement: too long, and it is cut (the record that
 * ends it, or says it is unknown, is what matters). */
static void
sreq_cp(char *dst, size_t size, const char *s)
{
	snprintf(dst, size, "%s", s != NULL ? s : "");
}

static void
h_sreq_carried(void *ctx, uint64_t key, const struct br_event *ev)
{
	struct brc *d = ctx;
	struct msg_br_sreq m;

	if (d->ch == NULL)
		return;
	memset(&m, 0, sizeof(m));
	m.key = key;
	sreq_cp(m.sandbox, sizeof(m.sandbox), ev->sandbox);
	sreq_cp(m.subject, sizeof(m.subject), ev->subject);
	sreq_cp(m.policy, sizeof(m.policy), ev->policy);
	sreq_cp(m.src, sizeof(m.src), ev->src);
	sreq_cp(m.session, sizeof(m.session), ev->session);
	sreq_cp(m.server, sizeof(m.server), ev->server);
	sreq_cp(m.method, sizeof(m.method), ev->tool);
	sreq_cp(m.args_digest, sizeof(m.args_digest), ev->args_digest);
	sreq_cp(m.detail, sizeof(m.detail), ev->detail);
	if (chan_send1(d->ch, MSG_BR_SREQ, &m, sizeof(m)) == -1)
		log_warn("%s of %s: announcement to the parent", m.method,
		    m.server);
}

static void
h_finding(void *ctx, const struct br_event *ev)
{
	struct brc *d = ctx;

	if (d->ch != NULL && send_event(d, MSG_BR_FINDING, ev, 0) == -1)
		log_warn("finding to the parent");
}

static int
h_restrict(void *ctx, const char *sandbox_id, br_taint_done *done, void *arg)
{
	struct brc *d = ctx;
	struct msg_br_taint m;
	struct brc_wait *w;

	if (d->ch == NULL || strlen(sandbox_id) >= sizeof(m.id) ||
	    (w = wait_add(d, BRC_W_TAINT, done, arg)) == NULL)
		return -1;
	memset(&m, 0, sizeof(m));
	m.ticket = w->ticket;
	memcpy(m.id, sandbox_id, strlen(sandbox_id));
	if (chan_send1(d->ch, MSG_BR_TAINT, &m, sizeof(m)) == -1) {
		wait_unlink(w);
		free(w);
		return -1;
	}
	return 0;
}

/* Every failed authentication goes to the parent as a finding; the
 * parent's recorder keeps its budget per source. */
static int
h_auth_tally(void *ctx, const char *src)
{
	(void)ctx;
	(void)src;
	return 1;
}

static int
h_spawn(void *ctx, const struct pol_mcp_server *srv, int *in_fd, int *out_fd,
    int *pidfd)
{
	struct brc *d = ctx;

	if (srv < d->cfg->servers || srv >= d->cfg->servers +
	    d->cfg->nservers) {
		errno = EINVAL;
		return -1;
	}
	return brsp_spawn(d->spawn_fd, (size_t)(srv - d->cfg->servers), in_fd,
	    out_fd, pidfd);
}

/* --------------------------------------------------------- messages */

static void
quit(struct brc *d, int status, const char *why)
{
	if (why != NULL)
		log_warnx("%s", why);
	d->status = status;
	ev_stop(d->loop);
}

/* The parent hears why before we go (its log and its finding). */
static void
fail(struct brc *d, const char *why)
{
	struct msg_br_fail f;

	memset(&f, 0, sizeof(f));
	snprintf(f.err, sizeof(f.err), "%s", why);
	if (d->ch != NULL)
		(void)chan_send1(d->ch, MSG_BR_FAIL, &f, sizeof(f));
	quit(d, 1, why);
}

static void
on_gone(void *ctx, const char *why)
{
	struct brc *d = ctx;

	(void)why;
	chan_free(d->ch);
	d->ch = NULL;
	quit(d, 0, NULL);
}

static void
send_stats(struct brc *d)
{
	struct msg_br_stats s;

	if (d->br == NULL || d->ch == NULL)
		return;
	memset(&s, 0, sizeof(s));
	/* Counted where they are kept: this runs after every control
	 * request and once a second. */
	s.pending_approvals = (uint32_t)d->br->napprovals;
	if (d->br->shared != NULL) {
		struct br_shared_stats st;

		br_shared_stats(d->br->shared, &st);
		s.shared = 1;
		s.shared_up = st.up ? 1 : 0;
		s.shared_reserved = st.reserved;
		s.shared_exhausted = st.exhausted;
		s.shared_unavailable = st.unavailable;
		s.shared_failures = st.failures;
		s.shared_reconnects = st.reconnects;
	}
	if (d->br->fq != NULL) {
		struct br_fq_stats st;

		br_fq_stats(d->br->fq, &st);
		s.aq_up = st.up ? 1 : 0;
		s.aq_posted = st.posted;
		s.aq_decided = st.decided;
		s.aq_delivered = st.delivered;
		s.aq_failures = st.failures;
		s.aq_reconnects = st.reconnects;
	}
	if (memcmp(&s, &d->last, sizeof(s)) == 0)
		return;
	if (chan_send1(d->ch, MSG_BR_STATS, &s, sizeof(s)) == 0)
		d->last = s;
}

static void
on_stats(struct ev_loop *loop, void *arg)
{
	struct brc *d = arg;

	d->stats = ev_timer_add(loop, BRC_STATS_MS, on_stats, d);
	send_stats(d);
}

static void
on_config(struct brc *d, uint32_t type, const void *pl, size_t len)
{
	struct pol_errors *errs;
	char digest[65];

	if (d->cfg != NULL) {
		fail(d, "a second configuration");
		return;
	}
	if (type == MSG_BR_CONFIG) {
		memcpy(&d->chdr, pl, sizeof(d->chdr));
		free(d->cbuf);
		if (!msg_str_ok(d->chdr.path, sizeof(d->chdr.path)) ||
		    !msg_str_ok(d->chdr.digest, sizeof(d->chdr.digest)) ||
		    d->chdr.len == 0 || d->chdr.len > MSG_CONFIG_MAX ||
		    (d->cbuf = malloc(d->chdr.len)) == NULL) {
			fail(d, "configuration: a header it cannot use");
			return;
		}
		d->cgot = 0;
		d->chave = true;
		return;
	}
	if (!d->chave || len > d->chdr.len - d->cgot) {
		fail(d, "configuration: bytes out of order");
		return;
	}
	memcpy(d->cbuf + d->cgot, pl, len);
	if ((d->cgot += len) < d->chdr.len)
		return;
	msg_digest(d->cbuf, d->cgot, digest);
	if (strcmp(digest, d->chdr.digest) != 0 ||
	    (errs = pol_errors_new(8)) == NULL) {
		fail(d, "configuration: not the text the parent loaded");
		return;
	}
	d->cfg = pol_config_load_buf(d->chdr.path, d->cbuf, d->cgot, errs);
	if (d->cfg == NULL) {
		const char *m = pol_errors_get(errs, 0);
		char why[300];

		snprintf(why, sizeof(why), "configuration: %s", m != NULL ? m :
		    "not loaded");
		pol_errors_free(errs);
		fail(d, why);
		return;
	}
	pol_errors_free(errs);
	free(d->cbuf);
	d->cbuf = NULL;
	/* The limits the parent fitted to the descriptors it has. */
	if (d->chdr.lim_conns != 0)
		d->cfg->lim_bridge_conns = d->chdr.lim_conns;
	if (d->chdr.lim_conns_sbx != 0)
		d->cfg->lim_bridge_conns_sbx = d->chdr.lim_conns_sbx;
	if (d->chdr.lim_request_s != 0)
		d->cfg->lim_bridge_request_s = d->chdr.lim_request_s;
}

static void
on_policy(struct brc *d, uint32_t type, const void *pl, size_t len)
{
	struct brc_pset *ps;
	struct pol_set *s;
	char err[320];
	int rc;

	if ((rc = polrx_msg(d->rx, type, pl, len, d->cfg, &s, err,
	    sizeof(err))) == -1) {
		fail(d, err);
		return;
	}
	if (rc == 0)
		return;
	if ((ps = calloc(1, sizeof(*ps))) == NULL) {
		pol_set_free(s);
		fail(d, "policy set: no memory");
		return;
	}
	ps->refs = 1;
	ps->set = s;
	pset_unref(d->pset);
	d->pset = ps;
}

/* Whether a policy of the current set may let server's roots/list
 * through: the upstream is offered roots then. */
static bool
h_roots(void *ctx, const char *server)
{
	struct brc *d = ctx;
	size_t i, n;

	if (d->pset == NULL)
		return false;
	n = pol_set_count(d->pset->set);
	for (i = 0; i < n; i++)
		if (pol_server_request(pol_set_at(d->pset->set, i), server,
		    POL_SREQ_ROOTS) != POL_DENY)
			return true;
	return false;
}

/*
 * The first MSG_SYNC: everything is in. Still as root: open the database,
 * read the credentials, start the stdio starter and the upstreams; then
 * drop every privilege and install the filter, and only then serve.
 */
static void
start_bridge(struct brc *d)
{
	struct br_config bc;
	struct br_hooks h;
	struct msg_ready r;
	char err[320];

	if (d->cfg == NULL || d->pset == NULL) {
		fail(d, "sync before configuration and policies");
		return;
	}
	if ((d->spawn_fd = brsp_start(d->cfg, NULL, d->uid, d->gid,
	    &d->spawn_pid, err, sizeof(err))) == -1) {
		fail(d, err);
		return;
	}
	memset(&bc, 0, sizeof(bc));
	bc.cfg = d->cfg;
	bc.port = 0;
	bc.prebound = true;
	bc.listen_fd = d->lfd;
	bc.spawn = h_spawn;
	bc.spawn_ctx = d;
	bc.db_exclusive = true;
	if (d->chdr.has_pg_password &&
	    msg_str_ok(d->chdr.pg_password, sizeof(d->chdr.pg_password)))
		bc.fleet_password = d->chdr.pg_password;
	if (msg_str_ok(d->chdr.fleet_host, sizeof(d->chdr.fleet_host)) &&
	    d->chdr.fleet_host[0] != '\0')
		bc.fleet_host = d->chdr.fleet_host;
	memset(&h, 0, sizeof(h));
	h.identify = h_identify;
	h.release = h_release;
	h.record = h_record;
	h.finding = h_finding;
	h.restrict_egress = h_restrict;
	h.auth_tally = h_auth_tally;
	h.roots_offered = h_roots;
	h.sreq_carried = h_sreq_carried;
	h.ctx = d;
	d->lfd = -1;		/* the bridge's now, whatever happens */
	d->br = br_new(d->loop, &bc, &h, err, sizeof(err));
	explicit_bzero(d->chdr.pg_password, sizeof(d->chdr.pg_password));
	if (d->br == NULL) {
		fail(d, err);
		return;
	}
	/* Nothing of a sandbox's has been read yet, and nothing will be
	 * before this: every later syscall is the filter's to allow. */
	if (priv_drop(d->uid, d->gid, NULL, err, sizeof(err)) == -1 ||
	    priv_seccomp(PRIV_ROOM_BRIDGE, err, sizeof(err)) == -1) {
		fail(d, err);
		return;
	}
	d->stats = ev_timer_add(d->loop, BRC_STATS_MS, on_stats, d);
	r.pid = (uint32_t)getpid();
	(void)chan_send1(d->ch, MSG_READY, &r, sizeof(r));
	log_info("serving on port %u", br_port(d->br));
}

/* Sends a control reply (body may be NULL; not taken) and fresh stats. */
static void
ctl_reply(struct brc *d, uint64_t ticket, int err_no, const char *body)
{
	struct msg_br_ctl_reply r;
	struct iovec v[2];

	memset(&r, 0, sizeof(r));
	r.ticket = ticket;
	r.err_no = err_no;
	if (r.err_no != 0 || body == NULL || strlen(body) > MSG_BR_BODY_MAX) {
		if (r.err_no == 0 && body != NULL)
			r.err_no = EMSGSIZE;
		body = NULL;
	}
	r.len = body != NULL ? (uint32_t)strlen(body) : 0;
	v[0].iov_base = &r;
	v[0].iov_len = sizeof(r);
	v[1].iov_base = (void *)body;
	v[1].iov_len = r.len;
	if (d->ch != NULL && chan_send(d->ch, MSG_BR_CTL_REPLY, v,
	    r.len > 0 ? 2 : 1) == -1)
		log_warn("control reply to the parent");
	if (d->ch != NULL)
		send_stats(d);
}

/* A listing or decision the fleet's database answers later. */
struct brc_ctl_wait {
	struct brc	*d;
	uint64_t	 ticket;
};

static void
on_ctl_answer(void *arg, int err, json_t *list)
{
	struct brc_ctl_wait *w = arg;
	char *body = NULL;

	if (err == 0 && list != NULL && (body = json_dumps(list,
	    JSON_COMPACT)) == NULL)
		err = ENOMEM;
	ctl_reply(w->d, w->ticket, err, body);
	free(body);
	free(w);
}

static void
on_ctl(struct brc *d, const struct msg_br_ctl *m)
{
	struct brc_ctl_wait *w;
	struct br_approver who;
	char *body = NULL;
	size_t blen = 0;
	int e = 0, rc;
	FILE *fp;

	switch (m->op) {
	case MSG_BR_OP_APPROVALS:
	case MSG_BR_OP_DECIDE:
		if ((w = calloc(1, sizeof(*w))) == NULL) {
			e = ENOMEM;
			break;
		}
		w->d = d;
		w->ticket = m->ticket;
		who.name = m->name;
		who.uid = m->uid;
		who.note = m->has_note ? m->note : NULL;
		rc = m->op == MSG_BR_OP_APPROVALS ?
		    br_approvals_list_async(d->br, on_ctl_answer, w) :
		    br_approval_decide_async(d->br, m->id, m->approve != 0,
		    &who, m->has_reason ? m->reason : NULL, on_ctl_answer, w);
		if (rc == 0)
			return;		/* on_ctl_answer replies */
		e = errno != 0 ? errno : EIO;
		free(w);
		break;
	case MSG_BR_OP_PINS:
		if ((fp = open_memstream(&body, &blen)) == NULL) {
			e = ENOMEM;
			break;
		}
		if (br_pins_snippet(d->br, m->server, fp) == -1)
			e = errno != 0 ? errno : EIO;
		if (fclose(fp) != 0 && e == 0)
			e = ENOMEM;
		break;
	case MSG_BR_OP_ACCEPT:
		if (br_pins_accept(d->br, m->server, m->tool) == -1)
			e = errno != 0 ? errno : EIO;
		break;
	default:
		e = EINVAL;
		break;
	}
	ctl_reply(d, m->ticket, e, body);
	free(body);
}

static void
on_msg(void *ctx, uint32_t type, void *pl, size_t len)
{
	struct brc *d = ctx;

	switch (type) {
	case MSG_BR_CONFIG:
	case MSG_BR_CONFIG_DATA:
		on_config(d, type, pl, len);
		break;
	case MSG_POLICY_BEGIN:
	case MSG_POLICY_FILE:
	case MSG_POLICY_DATA:
	case MSG_POLICY_END:
		on_policy(d, type, pl, len);
		break;
	case MSG_BR_SBX_ADD:
	case MSG_BR_SBX_CHANGE: {
		const struct msg_br_sbx *m = pl;
		struct brc_sbx *e;
		int made;

		if (!msg_br_sbx_ok(m) ||
		    (e = sbxtab_put(d->tab, m->addr4, &made)) == NULL) {
			fail(d, "sandbox table: bad entry or no memory");
			return;
		}
		e->s = *m;	/* a change keeps active_ms */
		if (type == MSG_BR_SBX_CHANGE && d->br != NULL)
			br_sandbox_changed(d->br, m->id);
		break;
	}
	case MSG_BR_SBX_DEL: {
		const struct msg_br_sbx *m = pl;
		const struct brc_sbx *e;

		if (!msg_br_sbx_ok(m)) {
			fail(d, "sandbox table: bad entry");
			return;
		}
		/* Only the sandbox named: the address may be another's by
		 * now. */
		if ((e = sbxtab_get(d->tab, m->addr4)) != NULL &&
		    strcmp(e->s.id, m->id) == 0)
			sbxtab_del(d->tab, m->addr4);
		if (d->br != NULL)
			br_sandbox_gone(d->br, m->id);
		break;
	}
	case MSG_SYNC:
		if (d->br == NULL)
			start_bridge(d);
		break;
	case MSG_BR_RECORD_DONE:
		wait_done(d, BRC_W_RECORD, pl);
		break;
	case MSG_BR_TAINT_DONE:
		wait_done(d, BRC_W_TAINT, pl);
		break;
	case MSG_BR_STOP:
		/* The daemon stops: what waits for a person or an upstream
		 * is denied and recorded by br_free, the parent still
		 * listening, and then we go. */
		quit(d, 0, NULL);
		break;
	case MSG_BR_CTL:
		if (!msg_br_ctl_ok(pl) || d->br == NULL) {
			fail(d, "a control request it cannot take");
			return;
		}
		on_ctl(d, pl);
		break;
	default:	/* the DNS process's: not for this room */
		fail(d, "a message for another process");
		break;
	}
}

int
bridge_child_main(int argc, char **argv)
{
	uid_t uid;
	gid_t gid;
	struct brc *d;
	int c;

	if ((c = pchild_start(argc, argv, "bridge", &uid, &gid)) != 0)
		return c;
	if ((d = calloc(1, sizeof(*d))) == NULL ||
	    (d->rx = polrx_new()) == NULL || (d->loop = ev_new()) == NULL ||
	    (d->tab = sbxtab_new(sizeof(struct brc_sbx))) == NULL) {
		log_warn("start");
		return 1;
	}
	d->uid = uid;
	d->gid = gid;
	d->lfd = PROC_FIRST_FD;
	d->spawn_fd = -1;
	if ((d->ch = chan_new(d->loop, PROC_CHAN_FD, MSG_TO_CHILD,
	    BRC_QUEUE_MAX, on_msg, on_gone, d)) == NULL) {
		log_warn("channel");
		return 1;
	}
	if (ev_run(d->loop) == -1)
		log_warn("event loop");
	c = d->status;
	ev_timer_cancel(d->loop, d->stats);
	/* Pending approvals are denied and recorded while the channel is
	 * there to take the records (it goes when the parent is gone). */
	br_free(d->br);
	waits_fail(d);
	if (d->lfd != -1)
		close(d->lfd);
	if (d->spawn_fd != -1)
		close(d->spawn_fd);	/* the starter goes with it */
	chan_free(d->ch);
	pset_unref(d->pset);
	polrx_free(d->rx);
	pol_config_free(d->cfg);
	free(d->cbuf);
	sbxtab_free(d->tab);
	ev_free(d->loop);
	free(d);
	return c;
}
