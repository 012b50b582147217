/*
 * config: the daemon config (examples/sluice.yaml) into struct pol_config.
 *
 * It shares the YAML reader and the error style of the policy loader, so a
 * typo in the daemon config is reported the same way as one in a policy,
 * and every field gets its documented default here, in one place, rather
 * than in each daemon part that reads it.
 */
#include <netinet/in.h>
#include <sys/socket.h>

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "policy/internal.h"

void
pol_config_free(struct pol_config *c)
{
	size_t			 i;
	struct pol_mcp_server	*s;

	if (c == NULL)
		return;
	free(c->path);
	free(c->src);
	free(c->state_dir);
	free(c->run_dir);
	free(c->cgroup_root);
	free(c->socket_path);
	free(c->policy_dir);
	free(c->uplink);
	free(c->dns_upstreams);
	free(c->dns_upstream_ports);
	free(c->treat_as_public);
	free(c->audit_db);
	free(c->audit_key);
	free(c->audit_origin);
	free(c->privsep_dns_user);
	free(c->privsep_bridge_user);
	free(c->fleet_conninfo);
	free(c->fleet_host);
	free(c->fleet_password_file);
	for (i = 0; i < c->nsinks; i++) {
		free(c->sinks[i].name);
		free(c->sinks[i].target);
		free(c->sinks[i].token_file);
	}
	free(c->sinks);
	for (i = 0; i < c->nservers; i++) {
		s = &c->servers[i];
		free(s->name);
		free(s->url);
		strv_free(s->argv, s->argc);
		strv_free(s->env, s->nenv);
		free(s->cred_file);
		free(s->cred_env);
		free(s->cred_header);
		free(s->cred_prefix);
		free(s->cred_child_env);
	}
	free(c->servers);
	free(c);
}

const struct pol_mcp_server *
pol_config_server(const struct pol_config *c, const char *name)
{
	size_t	i;

	for (i = 0; c != NULL && name != NULL && i < c->nservers; i++)
		if (strcmp(c->servers[i].name, name) == 0)
			return &c->servers[i];
	return NULL;
}

/* ypath: an absolute path (relative ones would depend on the daemon's
 * working directory). */
static void
ypath(struct ywalk *w, const struct ynode *n, char **out)
{
	char	*s;

	if (ystr(w, n, &s) == -1)
		return;
	if (s[0] != '/') {
		yerr(w, n, "\"%s\" is not an absolute path", s);
		free(s);
		return;
	}
	free(*out);
	*out = s;
}

static bool
is_url(const char *s)
{
	return (strncmp(s, "http://", 7) == 0 && s[7] != '\0') ||
	    (strncmp(s, "https://", 8) == 0 && s[8] != '\0');
}

/* upstream: "ADDR", "V4ADDR:PORT" or "[V6ADDR]:PORT". */
static int
parse_upstream(const char *s, struct pol_addr *a, uint16_t *port)
{
	char		 buf[64];
	const char	*p = NULL;
	char		*rb;
	uint64_t	 v;

	*port = 53;
	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	if (buf[0] == '[') {
		if ((rb = strchr(buf, ']')) == NULL || rb[1] != ':')
			return -1;
		*rb = '\0';
		p = rb + 2;
		if (pol_addr_parse(buf + 1, a) == -1 || a->family != AF_INET6)
			return -1;
	} else if (pol_addr_parse(buf, a) == 0) {
		return 0;
	} else {
		if ((rb = strrchr(buf, ':')) == NULL)
			return -1;
		*rb = '\0';
		p = rb + 1;
		if (pol_addr_parse(buf, a) == -1 || a->family != AF_INET)
			return -1;
	}
	if (pol_parse_uint(p, 65535, &v) == -1 || v == 0)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

static void
ynetwork(struct ywalk *w, const struct ynode *n, struct pol_config *c)
{
	static const char *const keys[] = { "pool", "service_address",
	    "bridge_port", "uplink", "ipv6", "treat_as_public", "nflog_group",
	    "gate_queue", NULL };
	const struct ynode *v, *it;
	char		 why[128];
	uint64_t	 u;
	size_t		 i;

	if (!ycheck_map(w, n, "network", keys))
		return;
	if ((v = yget(n, "pool")) != NULL && yis(w, v, Y_SCALAR, "pool")) {
		if (pol_cidr_parse(v->str, &c->pool) == -1 ||
		    c->pool.addr.family != AF_INET || c->pool.prefix < 8 ||
		    c->pool.prefix > 28)
			yerr(w, v, "invalid pool \"%s\" (an IPv4 CIDR from /8 "
			    "to /28, host bits clear)", v->str);
	}
	if ((v = yget(n, "service_address")) != NULL &&
	    yis(w, v, Y_SCALAR, "service_address")) {
		if (pol_addr_parse(v->str, &c->service_addr) == -1 ||
		    c->service_addr.family != AF_INET)
			yerr(w, v, "invalid service_address \"%s\"", v->str);
		else if (!pol_cidr_contains(&c->pool, &c->service_addr))
			yerr(w, v, "service_address %s is not inside the pool",
			    v->str);
	} else if (yget(n, "pool") != NULL) {
		/* A moved pool moves the default service address with it:
		 * the last usable address but one. */
		u = c->pool.prefix == 32 ? 0 : (1ULL << (32 - c->pool.prefix)) - 2;
		c->service_addr = c->pool.addr;
		c->service_addr.a[0] |= (uint8_t)(u >> 24);
		c->service_addr.a[1] |= (uint8_t)(u >> 16);
		c->service_addr.a[2] |= (uint8_t)(u >> 8);
		c->service_addr.a[3] |= (uint8_t)u;
	}
	if ((v = yget(n, "bridge_port")) != NULL) {
		if (yuint(w, v, 65535, &u) == 0 && u == 0)
			yerr(w, v, "bridge_port must be 1-65535");
		else
			c->bridge_port = (uint16_t)u;
	}
	if ((v = yget(n, "uplink")) != NULL && ystr(w, v, &c->uplink) == 0 &&
	    (strlen(c->uplink) >= 16 || strchr(c->uplink, '/') ||
	    strchr(c->uplink, ' ')))
		yerr(w, v, "invalid interface name \"%s\"", c->uplink);
	if ((v = yget(n, "ipv6")) != NULL)
		ybool(w, v, &c->ipv6);
	if ((v = yget(n, "nflog_group")) != NULL && yuint(w, v, 65535, &u) == 0)
		c->nflog_group = (uint32_t)u;
	if ((v = yget(n, "gate_queue")) != NULL) {
		/* An NFQUEUE number is 16 bits on the wire: a larger one
		 * would be cut to another queue, not refused. */
		if (v->kind != Y_SCALAR)
			yerr(w, v, "invalid gate_queue (an NFQUEUE number "
			    "from 0 to 65535)");
		else if (!v->plain || pol_parse_uint(v->str, 65535, &u) == -1)
			yerr(w, v, "invalid gate_queue \"%s\" (an NFQUEUE "
			    "number from 0 to 65535)", v->str);
		else
			c->gate_queue = (uint32_t)u;
	}
	if ((v = yget(n, "treat_as_public")) != NULL &&
	    yis(w, v, Y_SEQ, "treat_as_public") && v->n > 0 &&
	    ((c->treat_as_public = calloc(v->n, sizeof(struct pol_cidr))) !=
	    NULL || ynomem(w, v) == 0)) {
		for (i = 0; i < v->n; i++) {
			it = v->vals[i];
			if (!yis(w, it, Y_SCALAR, "a CIDR"))
				continue;
			if (pol_cidr_parse_err(it->str,
			    &c->treat_as_public[c->ntreat_as_public], why,
			    sizeof(why)) == -1)
				yerr(w, it, "invalid CIDR \"%s\": %s", it->str,
				    why);
			else
				c->ntreat_as_public++;
		}
	}
}

static void
ydnscfg(struct ywalk *w, const struct ynode *n, struct pol_config *c)
{
	static const char *const keys[] = { "upstreams", "timeout_ms",
	    "cache_entries", "max_learned", NULL };
	const struct ynode *v, *it;
	uint64_t	 u;
	size_t		 i;

	if (!ycheck_map(w, n, "dns", keys))
		return;
	if ((v = yget(n, "upstreams")) != NULL &&
	    yis(w, v, Y_SEQ, "upstreams") && v->n > 0) {
		if (v->n > 16) {
			yerr(w, v, "at most 16 DNS upstreams");
			return;
		}
		c->dns_upstreams = calloc(v->n, sizeof(struct pol_addr));
		c->dns_upstream_ports = calloc(v->n, sizeof(uint16_t));
		if (c->dns_upstreams == NULL || c->dns_upstream_ports == NULL)
			ynomem(w, v);
		for (i = 0; c->dns_upstreams && c->dns_upstream_ports &&
		    i < v->n; i++) {
			it = v->vals[i];
			if (!yis(w, it, Y_SCALAR, "an upstream"))
				continue;
			if (parse_upstream(it->str,
			    &c->dns_upstreams[c->ndns_upstreams],
			    &c->dns_upstream_ports[c->ndns_upstreams]) == -1)
				yerr(w, it, "invalid DNS upstream \"%s\" (ADDR, "
				    "ADDR:PORT or [V6ADDR]:PORT)", it->str);
			else
				c->ndns_upstreams++;
		}
	}
	if ((v = yget(n, "timeout_ms")) != NULL &&
	    yuint(w, v, 60000, &u) == 0) {
		if (u == 0)
			yerr(w, v, "timeout_ms must be at least 1");
		c->dns_timeout_ms = (uint32_t)u;
	}
	/* 0 is meaningful (no cache); the cap bounds what a typo could make
	 * the daemon hold (the proxy also caps the cache's bytes). */
	if ((v = yget(n, "cache_entries")) != NULL &&
	    yuint(w, v, POL_DNS_CACHE_MAX, &u) == 0)
		c->dns_cache_entries = (uint32_t)u;
	/* At least one: a sandbox that may learn nothing cannot use any
	 * name, which no operator means by a cap. */
	if ((v = yget(n, "max_learned")) != NULL &&
	    yuint(w, v, POL_DNS_LEARNED_MAX, &u) == 0) {
		if (u == 0)
			yerr(w, v, "max_learned must be at least 1");
		c->dns_max_learned = (uint32_t)u;
	}
}

static void
yaudit(struct ywalk *w, const struct ynode *n, struct pol_config *c)
{
	static const char *const keys[] = { "db", "key", "origin",
	    "reserve_kib", "min_free_percent", "min_free_mib",
	    "flow_interval", NULL };
	const struct ynode *v;
	uint64_t u;

	if (!ycheck_map(w, n, "audit", keys))
		return;
	if ((v = yget(n, "db")) != NULL)
		ypath(w, v, &c->audit_db);
	if ((v = yget(n, "key")) != NULL)
		ypath(w, v, &c->audit_key);
	if ((v = yget(n, "origin")) != NULL) {
		free(c->audit_origin);
		c->audit_origin = NULL;
		if (ystr(w, v, &c->audit_origin) == 0 &&
		    (c->audit_origin[0] == '\0' ||
		    strpbrk(c->audit_origin, " \t\n") != NULL))
			yerr(w, v, "origin must be non-empty without spaces");
	}
	/* Caps: a reserve of a GiB, and thresholds a volume can meet. */
	if ((v = yget(n, "reserve_kib")) != NULL &&
	    yuint(w, v, 1024 * 1024, &u) == 0)
		c->audit_reserve_kib = (uint32_t)u;
	if ((v = yget(n, "min_free_percent")) != NULL &&
	    yuint(w, v, 99, &u) == 0)
		c->audit_min_free_percent = (uint32_t)u;
	if ((v = yget(n, "min_free_mib")) != NULL &&
	    yuint(w, v, 1024 * 1024, &u) == 0)
		c->audit_min_free_mib = (uint32_t)u;
	/* Interim flow records cost a kernel query and a record per long
	 * flow and interval (bounded per sandbox either way): a second is
	 * the finest, a day the coarsest that still shows a flow. */
	if ((v = yget(n, "flow_interval")) != NULL &&
	    yduration(w, v, &u) == 0) {
		if (u < 1 || u > POL_FLOW_INTERVAL_MAX)
			yerr(w, v, "flow_interval must be from 1s to 1d");
		else
			c->audit_flow_interval_s = (uint32_t)u;
	}
}

static void
ysinks(struct ywalk *w, const struct ynode *n, struct pol_config *c)
{
	static const char *const keys[] = { "name", "type", "format", "target",
	    "splunk_hec", "token_file", "lag_alert", NULL };
	const struct ynode *it, *v;
	struct pol_sink	*s;
	char		 where[40];
	size_t		 i, j;

	if (!yis(w, n, Y_SEQ, "audit_sinks") || n->n == 0)
		return;
	if ((c->sinks = calloc(n->n, sizeof(*c->sinks))) == NULL) {
		ynomem(w, n);
		return;
	}
	for (i = 0; i < n->n; i++) {
		it = n->vals[i];
		snprintf(where, sizeof(where), "audit_sinks[%zu]", i);
		if (!ycheck_map(w, it, where, keys))
			continue;
		s = &c->sinks[c->nsinks++];
		s->format = POL_FMT_JSON;
		s->lag_alert = 10000;
		if ((v = yget(it, "name")) == NULL)
			yerr(w, it, "missing required key \"name\" in %s",
			    where);
		else if (ystr(w, v, &s->name) == 0) {
			if (!name_ok(s->name, 32))
				yerr(w, v, "invalid sink name \"%s\"", s->name);
			for (j = 0; j + 1 < c->nsinks; j++)
				if (c->sinks[j].name != NULL &&
				    strcmp(c->sinks[j].name, s->name) == 0)
					yerr(w, v, "duplicate sink name \"%s\"",
					    s->name);
		}
		if ((v = yget(it, "type")) == NULL)
			yerr(w, it, "missing required key \"type\" in %s",
			    where);
		else if (yis(w, v, Y_SCALAR, "type")) {
			if (strcmp(v->str, "file") == 0)
				s->type = POL_SINK_FILE;
			else if (strcmp(v->str, "syslog") == 0)
				s->type = POL_SINK_SYSLOG;
			else if (strcmp(v->str, "webhook") == 0)
				s->type = POL_SINK_WEBHOOK;
			else
				yerr(w, v, "invalid sink type \"%s\" (file, "
				    "syslog or webhook)", v->str);
		}
		if ((v = yget(it, "format")) != NULL &&
		    yis(w, v, Y_SCALAR, "format")) {
			if (strcmp(v->str, "json") == 0)
				s->format = POL_FMT_JSON;
			else if (strcmp(v->str, "ocsf") == 0)
				s->format = POL_FMT_OCSF;
			else
				yerr(w, v, "invalid format \"%s\" (json or "
				    "ocsf)", v->str);
		}
		if ((v = yget(it, "target")) == NULL)
			yerr(w, it, "missing required key \"target\" in %s",
			    where);
		else if (ystr(w, v, &s->target) == 0) {
			if (s->type == POL_SINK_FILE && s->target[0] != '/')
				yerr(w, v, "a file sink needs an absolute "
				    "path");
			if (s->type == POL_SINK_WEBHOOK && !is_url(s->target))
				yerr(w, v, "a webhook sink needs an http(s) "
				    "URL");
		}
		if ((v = yget(it, "splunk_hec")) != NULL &&
		    ybool(w, v, &s->splunk_hec) == 0 && s->splunk_hec &&
		    s->type != POL_SINK_WEBHOOK)
			yerr(w, v, "splunk_hec needs type webhook");
		if ((v = yget(it, "token_file")) != NULL)
			ypath(w, v, &s->token_file);
		if ((v = yget(it, "lag_alert")) != NULL)
			yuint(w, v, UINT32_MAX, &s->lag_alert);
	}
}

static void
ycred(struct ywalk *w, const struct ynode *n, struct pol_mcp_server *s)
{
	static const char *const keys[] = { "file", "env", "header", "prefix",
	    "child_env", NULL };
	const struct ynode *v;

	if (!ycheck_map(w, n, "credential", keys))
		return;
	if ((v = yget(n, "file")) != NULL)
		ypath(w, v, &s->cred_file);
	if ((v = yget(n, "env")) != NULL)
		ystr(w, v, &s->cred_env);
	if ((v = yget(n, "header")) != NULL)
		ystr(w, v, &s->cred_header);
	if ((v = yget(n, "prefix")) != NULL)
		ystr(w, v, &s->cred_prefix);
	if ((v = yget(n, "child_env")) != NULL)
		ystr(w, v, &s->cred_child_env);
	if ((yget(n, "file") != NULL) == (yget(n, "env") != NULL))
		yerr(w, n, "a credential needs exactly one of file or env");
	if (s->transport == POL_MCP_HTTP && (yget(n, "child_env") ||
	    yget(n, "header") == NULL))
		yerr(w, n, "an http credential needs header (and no "
		    "child_env)");
	if (s->transport == POL_MCP_STDIO && (yget(n, "header") ||
	    yget(n, "prefix") || yget(n, "child_env") == NULL))
		yerr(w, n, "a stdio credential needs child_env (and no "
		    "header or prefix)");
}

static void
yservers(struct ywalk *w, const struct ynode *n, struct pol_config *c)
{
	static const char *const keys[] = { "name", "transport", "url",
	    "command", "env", "credential", NULL };
	const struct ynode *it, *v, *x;
	struct pol_mcp_server *s;
	char		 where[40];
	size_t		 i, j;

	if (!yis(w, n, Y_SEQ, "servers") || n->n == 0)
		return;
	if ((c->servers = calloc(n->n, sizeof(*c->servers))) == NULL) {
		ynomem(w, n);
		return;
	}
	for (i = 0; i < n->n; i++) {
		it = n->vals[i];
		snprintf(where, sizeof(where), "servers[%zu]", i);
		if (!ycheck_map(w, it, where, keys))
			continue;
		s = &c->servers[c->nservers++];
		if ((v = yget(it, "name")) == NULL)
			yerr(w, it, "missing required key \"name\" in %s",
			    where);
		else if (ystr(w, v, &s->name) == 0) {
			if (!name_ok(s->name, 32))
				yerr(w, v, "invalid server name \"%s\" (use "
				    "[a-z0-9][a-z0-9_-]{0,31})", s->name);
			for (j = 0; j + 1 < c->nservers; j++)
				if (c->servers[j].name != NULL &&
				    strcmp(c->servers[j].name, s->name) == 0)
					yerr(w, v, "duplicate server name "
					    "\"%s\"", s->name);
		}
		if ((v = yget(it, "transport")) == NULL)
			yerr(w, it, "missing required key \"transport\" in %s",
			    where);
		else if (yis(w, v, Y_SCALAR, "transport")) {
			if (strcmp(v->str, "http") == 0)
				s->transport = POL_MCP_HTTP;
			else if (strcmp(v->str, "stdio") == 0)
				s->transport = POL_MCP_STDIO;
			else
				yerr(w, v, "invalid transport \"%s\" (http or "
				    "stdio)", v->str);
		}
		if ((v = yget(it, "url")) != NULL && ystr(w, v, &s->url) == 0 &&
		    !is_url(s->url))
			yerr(w, v, "invalid url \"%s\" (http:// or https://)",
			    s->url);
		if ((v = yget(it, "command")) != NULL &&
		    yis(w, v, Y_SEQ, "command") && v->n > 0 &&
		    ((s->argv = calloc(v->n + 1, sizeof(char *))) != NULL ||
		    ynomem(w, v) == 0)) {
			for (j = 0; j < v->n; j++)
				if (ystr(w, v->vals[j], &s->argv[s->argc]) == 0)
					s->argc++;
		}
		if ((v = yget(it, "env")) != NULL && yis(w, v, Y_MAP, "env") &&
		    v->n > 0 && ((s->env = calloc(v->n + 1, sizeof(char *))) !=
		    NULL || ynomem(w, v) == 0)) {
			for (j = 0; j < v->n; j++) {
				x = v->vals[j];
				if (!yis(w, x, Y_SCALAR, "an env value"))
					continue;
				if (strchr(v->keys[j]->str, '=') ||
				    v->keys[j]->str[0] == '\0')
					yerr(w, v->keys[j], "invalid variable "
					    "name \"%s\"", v->keys[j]->str);
				else if (asprintf(&s->env[s->nenv], "%s=%s",
				    v->keys[j]->str, x->str) != -1)
					s->nenv++;
				else
					ynomem(w, x);
			}
		}
		if (s->transport == POL_MCP_HTTP && (s->url == NULL ||
		    yget(it, "command") || yget(it, "env")))
			yerr(w, it, "an http server needs url (and no command "
			    "or env)");
		if (s->transport == POL_MCP_STDIO && (s->argc == 0 ||
		    yget(it, "url")))
			yerr(w, it, "a stdio server needs a non-empty command "
			    "(and no url)");
		if ((v = yget(it, "credential")) != NULL)
			ycred(w, v, s);
		if (s->name == NULL && (s->name = strdup("")) == NULL)
			ynomem(w, it);
	}
}

/*
 * limits: connection caps and request deadlines (examples/sluice.yaml).
 * A per-sandbox cap must be below its global cap, or one sandbox could
 * take every connection; the bounds keep a typo from asking for more
 * descriptors than any system gives (sluiced fits the caps to its own
 * limit at start).
 */
static void
ylim_count(struct ywalk *w, const struct ynode *n, const char *key,
    uint64_t lo, uint64_t hi, uint32_t *out)
{
	const struct ynode *v;
	uint64_t u;

	if ((v = yget(n, key)) == NULL || yuint(w, v, hi, &u) == -1)
		return;
	if (u < lo) {
		yerr(w, v, "%s must be at least %" PRIu64, key, lo);
		return;
	}
	*out = (uint32_t)u;
}

static void
ylim_deadline(struct ywalk *w, const struct ynode *n, const char *key,
    uint32_t *out)
{
	const struct ynode *v;
	uint64_t u;

	if ((v = yget(n, key)) == NULL || yduration(w, v, &u) == -1)
		return;
	if (u < 1 || u > 600) {
		yerr(w, v, "%s must be from 1s to 10m", key);
		return;
	}
	*out = (uint32_t)u;
}

static void
ylimits(struct ywalk *w, const struct ynode *n, struct pol_config *c)
{
	static const char *const keys[] = { "bridge_connections",
	    "bridge_connections_per_sandbox", "bridge_request_deadline",
	    "dns_tcp_connections", "dns_tcp_connections_per_sandbox",
	    "dns_tcp_query_deadline", "server_requests_per_session",
	    "server_requests_per_sandbox", "server_request_deadline",
	    "tasks_per_sandbox", "task_keep", NULL };

	if (!ycheck_map(w, n, "limits", keys))
		return;
	ylim_count(w, n, "bridge_connections", 2, 65536, &c->lim_bridge_conns);
	ylim_count(w, n, "bridge_connections_per_sandbox", 1, 65535,
	    &c->lim_bridge_conns_sbx);
	ylim_deadline(w, n, "bridge_request_deadline",
	    &c->lim_bridge_request_s);
	ylim_count(w, n, "dns_tcp_connections", 2, 65536,
	    &c->lim_dns_tcp_conns);
	ylim_count(w, n, "dns_tcp_connections_per_sandbox", 1, 65535,
	    &c->lim_dns_tcp_conns_sbx);
	ylim_deadline(w, n, "dns_tcp_query_deadline",
	    &c->lim_dns_tcp_query_s);
	ylim_count(w, n, "server_requests_per_session", 1,
	    POL_LIM_SREQ_TOTAL - 1, &c->lim_sreq_session);
	ylim_count(w, n, "server_requests_per_sandbox", 1,
	    POL_LIM_SREQ_TOTAL - 1, &c->lim_sreq_sandbox);
	ylim_deadline(w, n, "server_request_deadline",
	    &c->lim_sreq_deadline_s);
	ylim_count(w, n, "tasks_per_sandbox", 1, POL_LIM_TASKS_TOTAL - 1,
	    &c->lim_tasks_sandbox);
	ylim_deadline(w, n, "task_keep", &c->lim_task_keep_s);
	/* A session is in one sandbox: a larger session bound would only
	 * hide the sandbox's. */
	if (c->lim_sreq_session > c->lim_sreq_sandbox)
		yerr(w, n, "server_requests_per_session (%" PRIu32 ") must "
		    "not be above server_requests_per_sandbox (%" PRIu32 ")",
		    c->lim_sreq_session, c->lim_sreq_sandbox);
	if (c->lim_bridge_conns_sbx >= c->lim_bridge_conns)
		yerr(w, n, "bridge_connections_per_sandbox (%" PRIu32 ") must "
		    "be below bridge_connections (%" PRIu32 ")",
		    c->lim_bridge_conns_sbx, c->lim_bridge_conns);
	if (c->lim_dns_tcp_conns_sbx >= c->lim_dns_tcp_conns)
		yerr(w, n, "dns_tcp_connections_per_sandbox (%" PRIu32 ") "
		    "must be below dns_tcp_connections (%" PRIu32 ")",
		    c->lim_dns_tcp_conns_sbx, c->lim_dns_tcp_conns);
}

static int
dupdef(char **dst, const char *a, const char *b)
{
	if (*dst != NULL)
		return 0;
	return asprintf(dst, "%s%s", a, b) == -1 ? -1 : 0;
}

/*
 * privsep: which users the unprivileged processes run as. A name must be
 * a plain user name (the daemon looks it up at start and refuses root).
 */
static void
yprivsep(struct ywalk *w, const struct ynode *n, struct pol_config *c)
{
	static const char *const keys[] = { "dns_user", "bridge_user", NULL };
	const struct ynode *v;

	if (!ycheck_map(w, n, "privsep", keys))
		return;
	if ((v = yget(n, "dns_user")) != NULL)
		(void)ystr(w, v, &c->privsep_dns_user);
	if ((v = yget(n, "bridge_user")) != NULL)
		(void)ystr(w, v, &c->privsep_bridge_user);
}

/* A host name in the shared tables: what hostnames are made of, so that
 * `sluice approvals` and the witness rows print it as it is. */
static bool
fleet_host_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > POL_FLEET_HOST_MAX || !isalnum((unsigned char)s[0]))
		return false;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' &&
		    s[i] != '-' && s[i] != '_')
			return false;
	return true;
}

/*
 * libpq's parse errors quote the text they stumbled on, and a mistyped
 * URI scheme ("postgrsql://u:secret@...") is taken for an option name
 * that holds the password. A quote in the config's text would end such a
 * fragment early, so no fragment is trusted: only libpq's words before
 * its first quote are kept, and the error names the problem without ever
 * repeating the config's text.
 */
static void
unquote(const char *m, char *out, size_t len)
{
	size_t o = 0;

	for (; *m != '\0' && *m != '"' && *m != '\n' && o + 6 < len; m++)
		out[o++] = *m;
	while (o > 0 && (out[o - 1] == ' ' || out[o - 1] == ':'))
		o--;
	if (*m == '"') {
		memcpy(out + o, " \"...\"", 6);
		o += 6;
	}
	out[o] = '\0';
}

/*
 * The conninfo is parsed by libpq itself (PQconninfoParse, no I/O), so
 * that what is refused here is exactly what libpq would have taken: a
 * password in any of its spellings (password=..., user:pass@ in a URI,
 * ?password= in one) is a secret in the config, which stays readable by
 * whoever reads the config.
 */
static void
fleet_conninfo_check(struct ywalk *w, const struct ynode *v, const char *ci)
{
	PQconninfoOption *opts, *o;
	char	*perr = NULL, msg[256];

	if ((opts = PQconninfoParse(ci, &perr)) == NULL) {
		if (perr == NULL) {
			ynomem(w, v);
			return;
		}
		unquote(perr, msg, sizeof(msg));
		PQfreemem(perr);
		yerr(w, v, "invalid fleet.postgresql conninfo: %s", msg);
		return;
	}
	for (o = opts; o->keyword != NULL; o++)
		if (strcmp(o->keyword, "password") == 0 && o->val != NULL)
			yerr(w, v, "fleet.postgresql must not hold a password "
			    "(use fleet.password_file or SLUICE_PG_PASSWORD)");
	PQconninfoFree(opts);
}

static void
yfleet(struct ywalk *w, const struct ynode *n, struct pol_config *c)
{
	static const char *const keys[] = { "postgresql", "host",
	    "password_file", "deadline_ms", NULL };
	const struct ynode *v;
	uint64_t u;

	if (!ycheck_map(w, n, "fleet", keys))
		return;
	if ((v = yget(n, "postgresql")) == NULL)
		yerr(w, n, "missing required key \"postgresql\" in fleet");
	else if (ystr(w, v, &c->fleet_conninfo) == 0) {
		if (c->fleet_conninfo[0] == '\0')
			yerr(w, v, "fleet.postgresql must not be empty");
		else
			fleet_conninfo_check(w, v, c->fleet_conninfo);
	}
	if ((v = yget(n, "host")) != NULL &&
	    ystr(w, v, &c->fleet_host) == 0 && !fleet_host_ok(c->fleet_host))
		yerr(w, v, "invalid fleet.host \"%s\" (letters, digits, '.', "
		    "'-', '_', at most %d)", c->fleet_host, POL_FLEET_HOST_MAX);
	if ((v = yget(n, "password_file")) != NULL)
		ypath(w, v, &c->fleet_password_file);
	if ((v = yget(n, "deadline_ms")) != NULL &&
	    yuint(w, v, POL_FLEET_DEADLINE_MAX, &u) == 0) {
		if (u == 0)
			yerr(w, v, "deadline_ms must be at least 1");
		c->fleet_deadline_ms = (uint32_t)u;
	}
}

struct pol_config *
pol_config_load(const char *path, struct pol_errors *errs)
{
	struct pol_config *c;
	unsigned char	*buf;
	size_t		 len;

	if (yaml_read_file(path, &buf, &len, errs) == -1)
		return NULL;
	c = pol_config_load_buf(path, (const char *)buf, len, errs);
	free(buf);
	return c;
}

const char *
pol_config_source(const struct pol_config *c, size_t *len)
{
	*len = c->src_len;
	return c->src;
}

struct pol_config *
pol_config_load_buf(const char *path, const char *buf, size_t len,
    struct pol_errors *errs)
{
	static const char *const keys[] = { "version", "state_dir", "run_dir",
	    "socket", "policy_dir", "network", "dns", "sandboxes", "audit",
	    "audit_sinks", "servers", "limits", "privsep", "fleet", NULL };
	static const char *const skeys[] = { "max", "default_ttl", "on_end",
	    "kill_grace", "cgroup_root", NULL };
	struct ywalk	 w;
	struct ynode	*root;
	const struct ynode *v, *x;
	struct pol_config *c;
	uint64_t	 u;

	if (path == NULL || (buf == NULL && len > 0)) {
		pol_errors_add(errs, path != NULL ? path : "(null)", 0, 0,
		    "no config text");
		return NULL;
	}
	if ((root = yaml_load_buf(path, (const unsigned char *)(buf != NULL ?
	    buf : ""), len, errs)) == NULL)
		return NULL;
	memset(&w, 0, sizeof(w));
	w.file = path;
	w.errs = errs;
	/* The text is kept: the bridge process loads the same bytes. */
	if ((c = calloc(1, sizeof(*c))) == NULL || (c->path =
	    strdup(path)) == NULL || (c->src = malloc(len + 1)) == NULL) {
		if (c != NULL) {
			free(c->path);
			free(c->src);
		}
		free(c);
		ynode_free(root);
		pol_errors_add(errs, path, 0, 0, "out of memory");
		return NULL;
	}
	if (len > 0)
		memcpy(c->src, buf, len);
	c->src[len] = '\0';
	c->src_len = len;
	pol_cidr_parse("10.231.0.0/16", &c->pool);
	pol_addr_parse("10.231.255.254", &c->service_addr);
	c->bridge_port = 8080;
	c->dns_timeout_ms = 2000;
	c->dns_cache_entries = POL_DNS_CACHE_DEFAULT;
	c->dns_max_learned = POL_DNS_LEARNED_DEFAULT;
	c->max_sandboxes = 4096;
	c->kill_grace_s = POL_KILL_GRACE_DEFAULT;
	c->nflog_group = 7;
	c->gate_queue = POL_GATE_QUEUE_DEFAULT;
	c->audit_reserve_kib = POL_AUDIT_RESERVE_DEFAULT;
	c->audit_flow_interval_s = POL_FLOW_INTERVAL_DEFAULT;
	c->audit_min_free_percent = 10;
	c->lim_bridge_conns = POL_LIM_BRIDGE_CONNS;
	c->lim_bridge_conns_sbx = POL_LIM_BRIDGE_CONNS_SBX;
	c->lim_bridge_request_s = POL_LIM_BRIDGE_REQUEST_S;
	c->lim_dns_tcp_conns = POL_LIM_DNS_TCP_CONNS;
	c->lim_dns_tcp_conns_sbx = POL_LIM_DNS_TCP_CONNS_SBX;
	c->lim_dns_tcp_query_s = POL_LIM_DNS_TCP_QUERY_S;
	c->lim_sreq_session = POL_LIM_SREQ_SESSION;
	c->lim_sreq_sandbox = POL_LIM_SREQ_SANDBOX;
	c->lim_sreq_deadline_s = POL_LIM_SREQ_DEADLINE_S;
	c->lim_tasks_sandbox = POL_LIM_TASKS_SANDBOX;
	c->lim_task_keep_s = POL_LIM_TASK_KEEP_S;
	c->fleet_deadline_ms = POL_FLEET_DEADLINE_DEFAULT;
	if (ycheck_map(&w, root, "the config", keys)) {
		if ((v = yget(root, "version")) == NULL)
			yerr(&w, root, "missing required key \"version\"");
		else if (v->kind != Y_SCALAR || !v->plain)
			yerr(&w, v, "version must be the number 1");
		else if (strcmp(v->str, "1") != 0)
			yerr(&w, v, "unsupported version %s (expected 1)",
			    v->str);
		if ((v = yget(root, "state_dir")) != NULL)
			ypath(&w, v, &c->state_dir);
		if ((v = yget(root, "run_dir")) != NULL)
			ypath(&w, v, &c->run_dir);
		if ((v = yget(root, "socket")) != NULL)
			ypath(&w, v, &c->socket_path);
		if ((v = yget(root, "policy_dir")) != NULL)
			ypath(&w, v, &c->policy_dir);
		if ((v = yget(root, "network")) != NULL)
			ynetwork(&w, v, c);
		if ((v = yget(root, "dns")) != NULL)
			ydnscfg(&w, v, c);
		/* Only when none was written: a bad one is reported as such. */
		x = v != NULL ? yget(v, "upstreams") : NULL;
		if (x == NULL || (x->kind == Y_SEQ && x->n == 0))
			yerr(&w, x ? x : v ? v : root, "at least one DNS "
			    "upstream is required (dns.upstreams)");
		if ((v = yget(root, "sandboxes")) != NULL &&
		    ycheck_map(&w, v, "sandboxes", skeys)) {
			if ((x = yget(v, "max")) != NULL &&
			    yuint(&w, x, 65536, &u) == 0) {
				if (u == 0)
					yerr(&w, x, "max must be at least 1");
				c->max_sandboxes = (uint32_t)u;
			}
			if ((x = yget(v, "default_ttl")) != NULL &&
			    yduration(&w, x, &u) == 0) {
				if (u > UINT32_MAX)
					yerr(&w, x, "default_ttl is too long");
				c->default_ttl_s = (uint32_t)u;
			}
			if ((x = yget(v, "on_end")) != NULL) {
				if (x->kind == Y_SCALAR &&
				    strcmp(x->str, "kill") == 0)
					c->on_end = POL_ON_END_KILL;
				else if (x->kind == Y_SCALAR &&
				    strcmp(x->str, "isolate") == 0)
					c->on_end = POL_ON_END_ISOLATE;
				else
					yerr(&w, x, "on_end must be kill or "
					    "isolate");
			}
			if ((x = yget(v, "cgroup_root")) != NULL)
				ypath(&w, x, &c->cgroup_root);
			if ((x = yget(v, "kill_grace")) != NULL &&
			    yduration(&w, x, &u) == 0) {
				if (u == 0 || u > POL_KILL_GRACE_MAX)
					yerr(&w, x, "kill_grace must be 1s "
					    "to 300s");
				c->kill_grace_s = (uint32_t)u;
			}
		}
		if ((v = yget(root, "audit")) != NULL)
			yaudit(&w, v, c);
		if ((v = yget(root, "audit_sinks")) != NULL)
			ysinks(&w, v, c);
		if ((v = yget(root, "servers")) != NULL)
			yservers(&w, v, c);
		if ((v = yget(root, "limits")) != NULL)
			ylimits(&w, v, c);
		if ((v = yget(root, "privsep")) != NULL)
			yprivsep(&w, v, c);
		if ((v = yget(root, "fleet")) != NULL)
			yfleet(&w, v, c);
	}
	ynode_free(root);
	if (w.nerr == 0) {
		if (dupdef(&c->state_dir, "/var/lib/sluice", "") == -1 ||
		    dupdef(&c->run_dir, "/run/sluice", "") == -1 ||
		    dupdef(&c->cgroup_root, "/sys/fs/cgroup", "") == -1 ||
		    dupdef(&c->socket_path, c->run_dir, "/sluice.sock") == -1 ||
		    dupdef(&c->policy_dir, "/etc/sluice/policies", "") == -1 ||
		    dupdef(&c->audit_db, c->state_dir, "/audit.db") == -1 ||
		    dupdef(&c->audit_origin, "sluice", "") == -1 ||
		    dupdef(&c->privsep_dns_user, "sluice-dns", "") == -1 ||
		    dupdef(&c->privsep_bridge_user, "sluice-bridge", "") == -1)
			yerr(&w, NULL, "out of memory");
	}
	if (w.nerr != 0) {
		pol_config_free(c);
		return NULL;
	}
	return c;
}
