/*
 * server: the sandbox-facing MCP endpoint as a whole: br_new builds it
 * (the budget store, the upstreams and their credentials, the listening
 * socket and its connection limits), br_free takes it down in the order
 * its parts point at each other, and the helpers every file of the bridge
 * shares (digests, random ids, event kinds, findings) live here. The
 * request path is front.c (HTTP and its checks), batch.c (a 2025-03-26
 * session's JSON-RPC batches, one message at a time), session.c (MCP
 * sessions), rpc.c (JSON-RPC and the methods the bridge answers itself)
 * and call.c (tools/call).
 */
/* SHA256_Init and friends (see br_sha256_hex): fast, stable, only marked
 * deprecated by OpenSSL 3, as in audit/merkle.c. */
#define OPENSSL_API_COMPAT 0x10100000L
#include <sys/random.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/sha.h>

#include "gateway/bridge/br_int.h"
#include "gateway/log.h"
#include "gateway/mhd.h"

/* ------------------------------------------------------------ utilities */

/* Lower-case hex of n bytes and a NUL: 2n + 1 bytes of out. Every call
 * digests its arguments and its result, so no printf per byte here. */
static void
hex(char *out, const unsigned char *b, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 0xf];
	}
	out[2 * n] = '\0';
}

void
br_sha256_hex(const void *data, size_t len, char out[72])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX c;

	/* Not SHA256(): in OpenSSL 3 the one-shot call fetches the method (a
	 * locked provider lookup) each time, about 5 % of the loop's CPU per
	 * tools/call (two digests each) in perf. */
	SHA256_Init(&c);
	SHA256_Update(&c, data, len);
	SHA256_Final(md, &c);
	memcpy(out, "sha256:", 7);
	hex(out + 7, md, sizeof(md));
}

int
br_random_hex(char *out, size_t nbytes)
{
	unsigned char b[64];

	if (nbytes > sizeof(b) ||
	    getrandom(b, nbytes, 0) != (ssize_t)nbytes)
		return -1;
	hex(out, b, nbytes);
	return 0;
}

uint64_t
br_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

const char *
br_kind_name(enum br_event_kind k)
{
	switch (k) {
	case BR_EV_CALL:
		return "mcp.call";
	case BR_EV_TOOL_DRIFT:
		return "mcp.tool_drift";
	case BR_EV_AUTH_FAILED:
		return "mcp.auth_failed";
	case BR_EV_TAINT:
		return "mcp.taint";
	case BR_EV_UPSTREAM:
		return "mcp.upstream";
	case BR_EV_RESOURCE:
		return "mcp.resource";
	case BR_EV_PROMPT:
		return "mcp.prompt";
	case BR_EV_INTENT:
		return "mcp.intent";
	case BR_EV_SERVER_REQUEST:
		return "mcp.server_request";
	case BR_EV_APPROVAL:
		return "mcp.approval";
	}
	return "mcp.unknown";
}

bool
br_kind_is_record(enum br_event_kind k)
{
	return k == BR_EV_CALL || k == BR_EV_RESOURCE || k == BR_EV_PROMPT ||
	    k == BR_EV_SERVER_REQUEST;
}

void
br_finding(struct br *br, enum br_event_kind kind, const char *sandbox,
    const char *server, const char *tool, const char *detail)
{
	struct br_event ev;

	if (br->h.finding == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	ev.kind_name = br_kind_name(kind);
	ev.sandbox = sandbox;
	ev.server = server;
	ev.tool = tool;
	ev.detail = detail;
	ev.upstream_latency_us = -1;
	br->h.finding(br->h.ctx, &ev);
}

void
br_client_release(struct br *br, struct br_client *c)
{
	if (c->policy_ref != NULL && br->h.release != NULL)
		br->h.release(br->h.ctx, c->policy_ref);
	c->policy_ref = NULL;
	c->policy = NULL;
}

struct br_up *
br_up_find(struct br *br, const char *name)
{
	size_t i;

	for (i = 0; i < br->nups; i++)
		if (strcmp(br->ups[i]->srv->name, name) == 0)
			return br->ups[i];
	return NULL;
}

/* ------------------------------------------------------------ secrets */

char *
br_secret_read(const struct pol_mcp_server *s,
    const char *(*get)(const char *), char *err, size_t errlen)
{
	char buf[8192], *p;
	const char *v;
	FILE *fp;
	size_t n;

	if (s->cred_file != NULL) {
		if ((fp = fopen(s->cred_file, "re")) == NULL) {
			snprintf(err, errlen, "upstream %s: credential file "
			    "%s: %s", s->name, s->cred_file, strerror(errno));
			return NULL;
		}
		n = fread(buf, 1, sizeof(buf) - 1, fp);
		fclose(fp);
		buf[n] = '\0';
		buf[strcspn(buf, "\r\n")] = '\0';
		if (buf[0] == '\0') {
			snprintf(err, errlen, "upstream %s: credential file "
			    "%s is empty", s->name, s->cred_file);
			errno = EINVAL;
			return NULL;
		}
		p = strdup(buf);
		explicit_bzero(buf, sizeof(buf));
		return p;
	}
	v = get != NULL ? get(s->cred_env) : getenv(s->cred_env);
	if (v == NULL || *v == '\0') {
		snprintf(err, errlen, "upstream %s: credential variable %s is "
		    "not set", s->name, s->cred_env);
		errno = ENOENT;
		return NULL;
	}
	return strdup(v);
}

int
br_check_credentials(const struct pol_config *cfg,
    const char *(*get)(const char *), char *err, size_t errlen)
{
	const struct pol_mcp_server *s;
	struct stat st;
	const char *v;
	size_t i;
	int fd;

	for (i = 0; i < cfg->nservers; i++) {
		s = &cfg->servers[i];
		if (s->cred_file != NULL) {
			/* Opened, never read: whether it is there for the
			 * bridge process, which reads it. */
			if ((fd = open(s->cred_file, O_RDONLY | O_CLOEXEC)) ==
			    -1) {
				snprintf(err, errlen, "upstream %s: credential "
				    "file %s: %s", s->name, s->cred_file,
				    strerror(errno));
				return -1;
			}
			if (fstat(fd, &st) == -1 || st.st_size == 0) {
				close(fd);
				snprintf(err, errlen, "upstream %s: credential "
				    "file %s is empty", s->name, s->cred_file);
				errno = EINVAL;
				return -1;
			}
			close(fd);
		} else if (s->cred_env != NULL) {
			v = get != NULL ? get(s->cred_env) : getenv(s->cred_env);
			if (v == NULL || *v == '\0') {
				snprintf(err, errlen, "upstream %s: credential "
				    "variable %s is not set", s->name,
				    s->cred_env);
				errno = ENOENT;
				return -1;
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------ lifetime */

struct br *
br_new(struct ev_loop *loop, const struct br_config *c,
    const struct br_hooks *h, char *err, size_t errlen)
{
	struct br *br;
	const struct pol_config *cfg;
	struct mhd_config mc;
	size_t i;
	int fd = -1, saved;

	if (loop == NULL || c == NULL || c->cfg == NULL || h == NULL ||
	    h->identify == NULL || h->record == NULL) {
		snprintf(err, errlen, "bridge: bad call");
		errno = EINVAL;
		return NULL;
	}
	if ((br = calloc(1, sizeof(*br))) == NULL) {
		snprintf(err, errlen, "bridge: out of memory");
		return NULL;
	}
	br->loop = loop;
	br->c = *c;
	br->h = *h;
	if (br->c.body_max == 0)
		br->c.body_max = 1024 * 1024;
	if (br->c.page_size == 0)
		br->c.page_size = 100;
	if (br->c.upstream_timeout_ms == 0)
		br->c.upstream_timeout_ms = 30000;
	TAILQ_INIT(&br->parked);
	TAILQ_INIT(&br->streams);
	TAILQ_INIT(&br->sreqs);
	TAILQ_INIT(&br->sessions);
	TAILQ_INIT(&br->approvals);
	TAILQ_INIT(&br->calls);
	TAILQ_INIT(&br->tasks);
	cfg = c->cfg;
	if (br_db_open(br, c->state_dir != NULL ? c->state_dir :
	    cfg->state_dir, err, errlen) == -1)
		goto fail;
	/* The budgets the fleet shares are reserved in its database, by a
	 * thread started now: the filter that comes later covers it too. */
	if (cfg->fleet_conninfo != NULL && (br->shared = br_shared_new(loop,
	    cfg->fleet_conninfo, c->fleet_password, cfg->fleet_deadline_ms,
	    err, errlen)) == NULL)
		goto fail;
	/* So is the approval queue they share, on a connection of its own
	 * (fleetq.h says why). */
	if (cfg->fleet_conninfo != NULL && (br->fq = br_fq_new(loop,
	    cfg->fleet_conninfo, c->fleet_password, c->fleet_host,
	    cfg->fleet_deadline_ms, br_approval_delivered, br, err,
	    errlen)) == NULL)
		goto fail;
	br->c.fleet_password = NULL;
	br->c.fleet_host = NULL;
	if (br_http_init(br) == -1) {
		snprintf(err, errlen, "bridge: cannot start libcurl");
		goto fail;
	}
	if (cfg->nservers > 0 &&
	    ((br->ups = calloc(cfg->nservers, sizeof(*br->ups))) == NULL ||
	    (br->secrets = calloc(cfg->nservers, sizeof(char *))) == NULL)) {
		snprintf(err, errlen, "bridge: out of memory");
		goto fail;
	}
	for (i = 0; i < cfg->nservers; i++) {
		struct br_up *u;

		if ((u = calloc(1, sizeof(*u))) == NULL) {
			snprintf(err, errlen, "bridge: out of memory");
			goto fail;
		}
		br->ups[br->nups++] = u;
		u->br = br;
		u->srv = &cfg->servers[i];
		u->in_fd = u->out_fd = -1;
		u->next_id = 1;
		TAILQ_INIT(&u->reqs);
		if (u->srv->cred_file != NULL || u->srv->cred_env != NULL) {
			if ((u->secret = br_secret_read(u->srv, br->c.getenv,
			    err, errlen)) == NULL)
				goto fail;
			br->secrets[br->nsecrets++] = u->secret;
		}
		if (br_tools_load_baseline(u) == -1) {
			snprintf(err, errlen, "bridge: cannot read the pins "
			    "of %s", u->srv->name);
			goto fail;
		}
	}
	if ((fd = br_front_listen(br, err, errlen)) == -1)
		goto fail;
	memset(&mc, 0, sizeof(mc));
	mc.name = "bridge";
	mc.listen_fd = fd;
	mc.on_request = br_front_request;
	mc.on_completed = br_front_completed;
	mc.arg = br;
	/*
	 * A sandbox is its source address. It may hold
	 * lim_bridge_conns_sbx connections (t_bridge.sh makes 50 calls at
	 * once from one sandbox), all of them lim_bridge_conns, and when
	 * they are all taken a sandbox holding fewer takes the slot of one
	 * waiting for its request in the sandbox holding the most
	 * (gateway/mhd.h): a few sandboxes holding half-sent requests no
	 * longer lock the others out. Each request must be all in within
	 * lim_bridge_request_s of the accept or of the previous answer,
	 * however slowly it trickles. 0 in a hand-made config: the
	 * defaults.
	 */
	mc.conn_timeout_s = 60;
	mc.conn_limit = cfg->lim_bridge_conns != 0 ? cfg->lim_bridge_conns :
	    POL_LIM_BRIDGE_CONNS;
	mc.per_ip_limit = cfg->lim_bridge_conns_sbx != 0 ?
	    cfg->lim_bridge_conns_sbx : POL_LIM_BRIDGE_CONNS_SBX;
	if (mc.per_ip_limit >= mc.conn_limit)
		mc.per_ip_limit = mc.conn_limit / 2 != 0 ? mc.conn_limit / 2 :
		    1;
	/* Streams take half a sandbox's connections at most: the rest are
	 * for its requests. */
	br->streams_max = mc.per_ip_limit / 2 < BR_STREAMS_PER_SB ?
	    mc.per_ip_limit / 2 : BR_STREAMS_PER_SB;
	if (br->streams_max == 0)
		br->streams_max = 1;
	mc.recv_deadline_ms = (cfg->lim_bridge_request_s != 0 ?
	    cfg->lim_bridge_request_s : POL_LIM_BRIDGE_REQUEST_S) * 1000u;
	if ((br->mhd = mhd_new(loop, &mc, err, errlen)) == NULL)
		goto fail;
	for (i = 0; i < br->nups; i++)
		if (br_up_start(br->ups[i]) == -1)
			log_warnx("bridge: upstream %s did not start; "
			    "retrying", br->ups[i]->srv->name);
	return br;
fail:
	saved = errno;
	br_free(br);
	errno = saved != 0 ? saved : EINVAL;
	return NULL;
}

void
br_free(struct br *br)
{
	struct br_req *rq;
	struct br_session *s;
	size_t i;

	if (br == NULL)
		return;
	br->closing = true;
	/* Listing waiters point at requests and calls freed below. */
	for (i = 0; i < br->nups; i++) {
		free(br->ups[i]->waiters);
		br->ups[i]->waiters = NULL;
		br->ups[i]->nwaiters = 0;
	}
	br_srvreq_abort_all(br);
	br_call_abort_all(br);
	br_tasks_free_all(br);
	while ((rq = TAILQ_FIRST(&br->parked)) != NULL)
		br_reply_rpc_error(rq, 503, NULL, -32603,
		    "The bridge is shutting down");
	/* MHD stops only with no connection suspended. */
	br_streams_close(br, NULL);
	mhd_free(br->mhd);
	for (i = 0; i < br->nups; i++) {
		br_up_stop(br->ups[i]);
		br_tools_free(br->ups[i]);
		if (br->ups[i]->secret != NULL)
			explicit_bzero(br->ups[i]->secret,
			    strlen(br->ups[i]->secret));
		free(br->ups[i]->secret);
		free(br->ups[i]);
	}
	free(br->ups);
	free(br->secrets);
	br_http_fini(br);
	while ((s = TAILQ_FIRST(&br->sessions)) != NULL)
		br_session_free(br, s);
	br_fq_free(br->fq);
	br_shared_free(br->shared);
	br_db_close(br);
	free(br);
}

uint16_t
br_port(const struct br *br)
{
	return br->port;
}

