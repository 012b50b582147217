/*
 * record.c: the process-wide recorder of sluiced and the field layout of
 * each record kind the daemon writes. audit/ knows how to store, chain and
 * sign records but not what a DNS decision or a denied packet looks like;
 * the producers know their events but should not each invent a layout. The
 * converters here are that one layout, kept next to the single place that
 * submits, so `sluice audit tail`, the OCSF mapping (audit/ocsf.c reads
 * sandbox, decision, q, answers, src, dst, count) and the SOC see the same
 * shape from every producer.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/record_int.h"

struct rec {
	struct aud_log		*log;
	struct aud_sink		**sinks;	/* the SOC feed, one per sink */
	size_t			 nsinks;
	struct ev_loop		*loop;
	struct ev_timer		*hb;
	char			*db_path;
	uint64_t		 async_ok, durable_ok, failures;
	struct rec_space	*space;		/* the volume, late records */
};

/* The one recorder; see record.h for why it is process-wide. */
static struct rec *cur;

static void	arm_heartbeat(struct rec *r);

/* Durable commits and heartbeats wake the shippers; async records are
 * picked up by their slow poll. */
static void
kick_sinks(struct rec *r)
{
	size_t i;

	for (i = 0; i < r->nsinks; i++)
		aud_sink_kick(r->sinks[i]);
}

/* Runs in a shipper thread: aud_submit_async is thread-safe, the rec
 * counters are not, so this goes to the log directly. */
static void
on_sink_finding(void *arg, json_t *fields)
{
	struct rec *r = arg;

	log_warn("audit sink %s: lag %lld past its alert threshold",
	    json_string_value(json_object_get(fields, "sink")),
	    (long long)json_integer_value(json_object_get(fields, "lag")));
	if (aud_submit_async(r->log, "finding", fields) == -1)
		log_warn("audit: finding not recorded");
}

static void
close_sinks(struct rec *r)
{
	size_t i;

	for (i = 0; i < r->nsinks; i++)
		aud_sink_free(r->sinks[i]);
	free(r->sinks);
	r->sinks = NULL;
	r->nsinks = 0;
}

static int
open_sinks(struct rec *r, const struct pol_config *cfg, char *err,
    size_t errlen)
{
	struct aud_sink_hooks hk = { on_sink_finding, r };
	struct aud_sink_conf c;
	const struct pol_sink *ps;
	char serr[512];
	size_t i;

	if (cfg->nsinks == 0)
		return 0;
	if ((r->sinks = calloc(cfg->nsinks, sizeof(*r->sinks))) == NULL) {
		snprintf(err, errlen, "audit sinks: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < cfg->nsinks; i++) {
		ps = &cfg->sinks[i];
		memset(&c, 0, sizeof(c));
		c.name = ps->name;
		c.type = ps->type == POL_SINK_FILE ? AUD_SINK_FILE :
		    ps->type == POL_SINK_SYSLOG ? AUD_SINK_SYSLOG :
		    AUD_SINK_WEBHOOK;
		c.format = ps->format == POL_FMT_OCSF ? AUD_SINK_OCSF :
		    AUD_SINK_JSON;
		c.target = ps->target;
		c.splunk_hec = ps->splunk_hec;
		c.token_file = ps->token_file;
		c.lag_alert = ps->lag_alert;
		if ((r->sinks[i] = aud_sink_new(r->db_path, &c, &hk, serr,
		    sizeof(serr))) == NULL ||
		    aud_sink_start(r->sinks[i], serr, sizeof(serr)) == -1) {
			snprintf(err, errlen, "audit sink %s: %s", ps->name,
			    serr);
			r->nsinks = i + 1;
			close_sinks(r);
			return -1;
		}
		r->nsinks = i + 1;
	}
	return 0;
}

static void
on_notify(struct ev_loop *loop, int fd, unsigned events, void *arg)
{
	struct rec *r = arg;

	(void)loop;
	(void)fd;
	(void)events;
	aud_dispatch(r->log);
	kick_sinks(r);
}

static void
on_heartbeat(struct ev_loop *loop, void *arg)
{
	struct rec *r = arg;

	(void)loop;
	r->hb = NULL;
	kick_sinks(r);
	/* A heartbeat also forces a signed checkpoint, so an idle log still
	 * proves every minute that nothing was cut from its tail. */
	if (aud_heartbeat(r->log) == -1)
		log_warn("audit: heartbeat");
	arm_heartbeat(r);
}

static void
arm_heartbeat(struct rec *r)
{
	if ((r->hb = ev_timer_add(r->loop, REC_HEARTBEAT_MS, on_heartbeat,
	    r)) == NULL)
		log_warn("audit: heartbeat timer");
}

/* mkdir -p of the directory holding path, new directories mode 0750: a
 * fresh install has no state directory yet, and the log is the first thing
 * the daemon writes there. 0 or -1 with errno. */
static int
mkdir_parent(const char *path)
{
	char *buf, *p, *slash;
	int rc = 0;

	if ((buf = strdup(path)) == NULL)
		return -1;
	if ((slash = strrchr(buf, '/')) == NULL || slash == buf) {
		free(buf);
		return 0;
	}
	*slash = '\0';
	for (p = buf + 1; rc == 0; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;

			*p = '\0';
			if (mkdir(buf, 0750) == -1 && errno != EEXIST)
				rc = -1;
			if ((*p = c) == '\0')
				break;
		}
	}
	free(buf);
	return rc;
}

struct rec *
rec_open(const struct pol_config *cfg, struct ev_loop *loop, char *err,
    size_t errlen)
{
	struct aud_opts o;
	struct rec *r;
	char aerr[512];

	if (cur != NULL) {
		snprintf(err, errlen, "audit log already open");
		errno = EBUSY;
		return NULL;
	}
	if (cfg == NULL || loop == NULL) {
		snprintf(err, errlen, "audit: no config");
		errno = EINVAL;
		return NULL;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		snprintf(err, errlen, "audit: %s", strerror(errno));
		return NULL;
	}
	r->loop = loop;
	if (cfg->audit_db != NULL && cfg->audit_db[0] != '\0')
		r->db_path = strdup(cfg->audit_db);
	else if (asprintf(&r->db_path, "%s/audit.db", cfg->state_dir) == -1)
		r->db_path = NULL;
	if (r->db_path == NULL) {
		snprintf(err, errlen, "audit: %s", strerror(errno));
		free(r);
		return NULL;
	}
	if (mkdir_parent(r->db_path) == -1) {
		int e = errno;

		snprintf(err, errlen, "audit log %s: %s", r->db_path,
		    strerror(e));
		free(r->db_path);
		free(r);
		errno = e;
		return NULL;
	}
	memset(&o, 0, sizeof(o));
	o.db_path = r->db_path;
	o.origin = cfg->audit_origin;
	o.key_path = cfg->audit_key;
	o.reserve_bytes = (uint64_t)cfg->audit_reserve_kib * 1024;
	if ((r->log = aud_open(&o, aerr, sizeof(aerr))) == NULL) {
		int e = errno;

		snprintf(err, errlen, "audit log %s: %s", r->db_path, aerr);
		free(r->db_path);
		free(r);
		errno = e;
		return NULL;
	}
	if (ev_add(loop, aud_notify_fd(r->log), EV_READ, on_notify, r) == -1) {
		int e = errno;

		snprintf(err, errlen, "audit: event loop: %s", strerror(e));
		aud_close(r->log);
		free(r->db_path);
		free(r);
		errno = e;
		return NULL;
	}
	if (open_sinks(r, cfg, err, errlen) == -1) {
		ev_del(loop, aud_notify_fd(r->log));
		aud_close(r->log);
		free(r->db_path);
		free(r);
		errno = EINVAL;
		return NULL;
	}
	arm_heartbeat(r);
	cur = r;
	rec_tally_start(loop);
	/* Without it the log still works; only the volume goes unwatched
	 * and a late record goes async. */
	if ((r->space = rec_space_new(loop, r->log, cfg, r->db_path)) == NULL)
		log_warn("audit: volume watch");
	return r;
}

void
rec_close(struct rec *r)
{
	uint64_t lost;

	if (r == NULL)
		return;
	/* Summaries and held records still go in, while r is the recorder. */
	if (cur == r)
		rec_tally_stop();
	rec_space_free(r->space);
	if (cur == r)
		cur = NULL;
	ev_timer_cancel(r->loop, r->hb);
	ev_del(r->loop, aud_notify_fd(r->log));
	/* The shippers stop first: what they had not delivered is still in
	 * the log, and their cursors say where to resume. */
	close_sinks(r);
	/* aud_close runs the pending done callbacks itself. */
	if ((lost = aud_close(r->log)) > 0)
		log_warnx("audit: %llu records could not be written at "
		    "shutdown, not even as a gap (database locked, full or "
		    "failing)", (unsigned long long)lost);
	free(r->db_path);
	free(r);
}

const char *
rec_db_path(const struct rec *r)
{
	return r->db_path;
}

static int
refuse(json_t *fields, int e)
{
	json_decref(fields);
	if (cur != NULL)
		cur->failures++;
	errno = e;
	return -1;
}

int
rec_async(const char *kind, json_t *fields)
{
	if (cur == NULL)
		return refuse(fields, EPIPE);
	/* fields NULL (the converter ran out of memory) goes on: the log
	 * counts the lost record and writes it as a log.gap. */
	if (aud_submit_async(cur->log, kind, fields) == -1) {
		cur->failures++;
		return -1;
	}
	cur->async_ok++;
	return 0;
}

int
rec_canon(const char *kind, const char *body, size_t len)
{
	if (cur == NULL) {
		errno = EPIPE;
		return -1;
	}
	if (aud_submit_canon(cur->log, kind, body, len) == -1) {
		cur->failures++;
		return -1;
	}
	cur->async_ok++;
	return 0;
}

int
rec_durable(const char *kind, json_t *fields, aud_done_fn done, void *arg)
{
	if (cur == NULL)
		return refuse(fields, EPIPE);
	if (fields == NULL)
		return refuse(NULL, ENOMEM);
	if (aud_submit_durable(cur->log, kind, fields, done, arg) == -1) {
		cur->failures++;
		return -1;
	}
	cur->durable_ok++;
	return 0;
}

struct commit_wait {
	int		fired, ok, abandoned;
	uint64_t	seq;
};

static void
commit_done(void *arg, int ok, uint64_t seq)
{
	struct commit_wait *w = arg;

	if (w->abandoned) {
		free(w);
		return;
	}
	w->fired = 1;
	w->ok = ok;
	w->seq = seq;
}

int
rec_commit(const char *kind, json_t *fields, uint64_t *seq, char *err,
    size_t errlen)
{
	struct commit_wait *w;
	int ok;

	if ((w = calloc(1, sizeof(*w))) == NULL) {
		json_decref(fields);
		snprintf(err, errlen, "audit record %s: %s", kind,
		    strerror(errno));
		return -1;
	}
	if (rec_durable(kind, fields, commit_done, w) == -1) {
		snprintf(err, errlen, "audit record %s: %s", kind,
		    strerror(errno));
		free(w);
		return -1;
	}
	/* aud_sync returns once the writer has finished everything queued so
	 * far, ours included; its completion is then on the list that
	 * aud_dispatch runs (with any others, all on this thread). */
	(void)aud_sync(cur->log);
	aud_dispatch(cur->log);
	kick_sinks(cur);
	if (!w->fired) {
		/* Only if the writer stopped: the completion comes later
		 * (aud_close runs it) and frees w then. */
		w->abandoned = 1;
		cur->failures++;
		snprintf(err, errlen, "audit record %s: not committed", kind);
		errno = EIO;
		return -1;
	}
	ok = w->ok;
	if (seq != NULL)
		*seq = w->seq;
	free(w);
	if (!ok) {
		cur->failures++;
		snprintf(err, errlen, "audit record %s: not committed", kind);
		errno = EIO;
		return -1;
	}
	return 0;
}

void
rec_metrics_print(FILE *fp)
{
	if (cur == NULL)
		return;
	fprintf(fp,
	    "# HELP sluice_audit_records_total Records handed to the audit "
	    "log.\n"
	    "# TYPE sluice_audit_records_total counter\n"
	    "sluice_audit_records_total{mode=\"async\"} %" PRIu64 "\n"
	    "sluice_audit_records_total{mode=\"durable\"} %" PRIu64 "\n"
	    "# HELP sluice_audit_submit_failures_total Records the log "
	    "refused.\n"
	    "# TYPE sluice_audit_submit_failures_total counter\n"
	    "sluice_audit_submit_failures_total %" PRIu64 "\n"
	    "# HELP sluice_audit_dropped_total Records lost to a full queue "
	    "(written as log.gap).\n"
	    "# TYPE sluice_audit_dropped_total counter\n"
	    "sluice_audit_dropped_total %" PRIu64 "\n"
	    "# HELP sluice_audit_next_seq The next record's seq.\n"
	    "# TYPE sluice_audit_next_seq gauge\n"
	    "sluice_audit_next_seq %" PRIu64 "\n",
	    cur->async_ok, cur->durable_ok, cur->failures,
	    aud_dropped(cur->log), aud_next_seq(cur->log));
	if (cur->space != NULL)
		rec_space_metrics_print(cur->space, fp);
	rec_tally_metrics_print(fp);
	if (cur->nsinks > 0) {
		struct aud_sink_stats st;
		size_t i;

		fprintf(fp, "# HELP sluice_audit_sink_lag Records in the log "
		    "not yet acknowledged by the sink.\n"
		    "# TYPE sluice_audit_sink_lag gauge\n");
		for (i = 0; i < cur->nsinks; i++)
			fprintf(fp, "sluice_audit_sink_lag{sink=\"%s\"} %"
			    PRIu64 "\n", aud_sink_name(cur->sinks[i]),
			    aud_sink_lag(cur->sinks[i]));
		fprintf(fp, "# HELP sluice_audit_sink_next_seq The sink's "
		    "durable cursor.\n"
		    "# TYPE sluice_audit_sink_next_seq gauge\n");
		for (i = 0; i < cur->nsinks; i++) {
			aud_sink_stats(cur->sinks[i], &st);
			fprintf(fp, "sluice_audit_sink_next_seq{sink=\"%s\"} %"
			    PRIu64 "\n", aud_sink_name(cur->sinks[i]),
			    st.next_seq);
		}
		fprintf(fp, "# HELP sluice_audit_sink_failures_total "
		    "Deliveries that were not acknowledged.\n"
		    "# TYPE sluice_audit_sink_failures_total counter\n");
		for (i = 0; i < cur->nsinks; i++) {
			aud_sink_stats(cur->sinks[i], &st);
			fprintf(fp, "sluice_audit_sink_failures_total{sink="
			    "\"%s\"} %" PRIu64 "\n",
			    aud_sink_name(cur->sinks[i]), st.failures);
		}
	}
}

/* ------------------------------------------------------------ converters */

static const char *
rcode_name(uint8_t rc)
{
	switch (rc) {
	case 0:
		return "NOERROR";
	case 1:
		return "FORMERR";
	case 2:
		return "SERVFAIL";
	case 3:
		return "NXDOMAIN";
	case 4:
		return "NOTIMP";
	case 5:
		return "REFUSED";
	case 255:
		return "none";
	default:
		return "other";
	}
}

static const char *
outcome_name(enum dns_decision d)
{
	switch (d) {
	case DNS_DEC_ALLOW:
		return "allow";
	case DNS_DEC_DENY:
		return "deny";
	case DNS_DEC_NODATA:
		return "nodata";
	case DNS_DEC_SYNTHETIC:
		return "synthetic";
	case DNS_DEC_REFUSED:
		return "refused";
	case DNS_DEC_ERROR:
		return "error";
	case DNS_DEC_MALFORMED:
		return "malformed";
	}
	return "unknown";
}

/* The query type as DNS people write it ("A", "HTTPS"), else "TYPEn"
 * written into buf (len bytes; 16 is enough). */
static const char *
qtype_name(uint16_t t, char *buf, size_t len)
{
	const ldns_rr_descriptor *d = ldns_rr_descript(t);

	if (d != NULL && d->_name != NULL && d->_name[0] != '\0')
		return d->_name;
	snprintf(buf, len, "TYPE%u", (unsigned)t);
	return buf;
}

static json_t *
qtype_json(uint16_t t)
{
	char buf[16];

	return json_string(qtype_name(t, buf, sizeof(buf)));
}

static json_t *
addr_json(uint8_t family, const uint8_t *a)
{
	char buf[INET6_ADDRSTRLEN];
	int af = family == AF_INET6 ? AF_INET6 : AF_INET;

	if (inet_ntop(af, a, buf, sizeof(buf)) == NULL)
		return json_string("?");
	return json_string(buf);
}

static const char *
proto_name(uint8_t p, char *buf, size_t len)
{
	switch (p) {
	case IPPROTO_TCP:
		return "tcp";
	case IPPROTO_UDP:
		return "udp";
	case IPPROTO_ICMP:
		return "icmp";
	case IPPROTO_ICMPV6:
		return "icmpv6";
	default:
		snprintf(buf, len, "%u", (unsigned)p);
		return buf;
	}
}

/* A string value that is always accepted: the canonical form refuses
 * invalid UTF-8, and some of our inputs (kernel link names, quoted policy
 * text) are only bytes. Such a string is kept with every byte outside
 * printable ASCII shown as '?', rather than losing the whole record. */
static json_t *
str(const char *s)
{
	json_t *v;
	char *c;
	size_t i;

	if (s == NULL)
		s = "";
	if ((v = json_string(s)) != NULL)
		return v;
	if ((c = strdup(s)) == NULL)
		return NULL;
	for (i = 0; c[i] != '\0'; i++)
		if ((unsigned char)c[i] < 0x20 || (unsigned char)c[i] >= 0x7f)
			c[i] = '?';
	v = json_string(c);
	free(c);
	return v;
}

json_t *
rec_string(const char *s)
{
	return str(s);
}

/* Sets key to a new value, dropping the whole object on failure so that a
 * half-built record never reaches the log. */
static int
put(json_t *o, const char *key, json_t *v)
{
	/* Keys are this file's literals: no UTF-8 check needed. */
	if (v == NULL || json_object_set_new_nocheck(o, key, v) == -1)
		return -1;
	return 0;
}

static json_t *
sandbox_json(const char *id)
{
	return json_pack("{s:o}", "id", str(id));
}

/*
 * The dns.decision record is written once per query, on the loop thread, so
 * its construction is on the proxy's hot path. A jansson tree costs an
 * allocation per value and per key, and most of a DNS record is the same
 * from one query to the next: the transport, the class, the decision and
 * rcode words, the answer classes, the protocol names, small counts, and
 * (while one sandbox is busy) its {id} and {id, sha256, rule}. Those are
 * kept here as shared, never-modified values and handed out with an extra
 * reference: the audit writer serialises a record in the submitting thread
 * and then only drops its references, so sharing is invisible in the log.
 * Loop thread only, like every converter.
 */
static json_t *
shared(json_t **slot, const char *s)
{
	if (*slot == NULL)
		*slot = json_string_nocheck(s);
	return json_incref(*slot);
}

/* Small counts (naddrs, nkept, ...) are nearly always within the stored
 * arrays' size. */
#define REC_SMALL_INTS	(DNS_EV_MAX_ADDRS + DNS_EV_MAX_ELEMS + 1)

static json_t *
small_int(uint64_t v)
{
	static json_t *ints[REC_SMALL_INTS];

	if (v >= REC_SMALL_INTS)
		return json_integer((json_int_t)(v > (uint64_t)AUD_INT_MAX ?
		    (uint64_t)AUD_INT_MAX : v));
	if (ints[v] == NULL)
		ints[v] = json_integer((json_int_t)v);
	return json_incref(ints[v]);
}

static json_t *
rcode_json(uint8_t rc)
{
	static json_t *names[8];
	unsigned i = rc <= 5 ? rc : rc == 255 ? 6 : 7;

	return shared(&names[i], rcode_name(rc));
}

static json_t *
outcome_json(enum dns_decision d)
{
	static json_t *names[DNS_DEC_MALFORMED + 2];
	unsigned i = (unsigned)d <= DNS_DEC_MALFORMED ? (unsigned)d :
	    DNS_DEC_MALFORMED + 1;

	return shared(&names[i], outcome_name(d));
}

static json_t *
qtype_shared(uint16_t t)
{
	static json_t *a, *aaaa;

	/* The types a sandbox asks for nearly always. */
	if (t == LDNS_RR_TYPE_A)
		return shared(&a, "A");
	if (t == LDNS_RR_TYPE_AAAA)
		return shared(&aaaa, "AAAA");
	return qtype_json(t);
}

static json_t *
proto_json(uint8_t p)
{
	static json_t *tcp, *udp;
	char pb[8];

	if (p == IPPROTO_TCP)
		return shared(&tcp, "tcp");
	if (p == IPPROTO_UDP)
		return shared(&udp, "udp");
	return json_string(proto_name(p, pb, sizeof(pb)));
}

/* The address class words of pol_addr_class_name, a dozen of them; an
 * unexpected one is still written, only not shared. */
static json_t *
class_json(const char *cls, size_t len)
{
	static struct {
		char	 name[16];
		json_t	*v;
	} tab[16];
	size_t i;

	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		if (tab[i].v == NULL) {
			if (len >= sizeof(tab[i].name) ||
			    (tab[i].v = json_stringn(cls, len)) == NULL)
				break;
			memcpy(tab[i].name, cls, len);
			tab[i].name[len] = '\0';
			return json_incref(tab[i].v);
		}
		if (strncmp(tab[i].name, cls, len) == 0 &&
		    tab[i].name[len] == '\0')
			return json_incref(tab[i].v);
	}
	return json_stringn(cls, len);
}

/* inet_ntop formats IPv4 through stdio; an answer's address is one of the
 * few values of a record that is new every time. */
static json_t *
addr_fast(uint8_t family, const uint8_t *a)
{
	char buf[16];

	if (family == AF_INET6)
		return addr_json(family, a);
	return json_stringn_nocheck(buf, pol_ipv4_format(a, buf));
}

/* Builds {k1: v1, ...} from n pairs, stealing every value (also on
 * failure); NULL if any value or the object is missing. */
static json_t *
obj_of(size_t n, const char *const *keys, json_t **vals)
{
	json_t *o = json_object();
	size_t i;
	int bad = o == NULL;

	for (i = 0; i < n; i++) {
		if (bad || vals[i] == NULL ||
		    json_object_set_new_nocheck(o, keys[i], vals[i]) == -1) {
			json_decref(vals[i]);
			bad = 1;
		}
	}
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* {id} of the sandbox of the last record: a busy sandbox asks many
 * queries in a row. */
static json_t *
sandbox_shared(const char *id)
{
	static char last[sizeof(((struct dns_event *)0)->sandbox)];
	static json_t *v;

	if (v != NULL && strcmp(last, id) == 0)
		return json_incref(v);
	json_decref(v);
	v = NULL;
	if (strlen(id) >= sizeof(last))
		return sandbox_json(id);
	if ((v = sandbox_json(id)) == NULL)
		return NULL;
	snprintf(last, sizeof(last), "%s", id);
	return json_incref(v);
}

/* {id, sha256, rule} for the last (policy, rule) seen. Compared by the
 * name and digest, not the pointer: a reload may free a policy and a new
 * one may take its address. */
static json_t *
policy_shared(const struct pol_policy *policy, const char *rule)
{
	static char name[128], digest[72], lrule[sizeof(((struct dns_event *)
	    0)->rule)];
	static json_t *v;
	static const char *const keys[] = { "id", "sha256", "rule" };
	const char *n = pol_policy_name(policy);
	const char *d = pol_policy_digest(policy);
	json_t *vals[3];
	int fits;

	if (v != NULL && strcmp(name, n) == 0 && strcmp(digest, d) == 0 &&
	    strcmp(lrule, rule) == 0)
		return json_incref(v);
	vals[0] = str(n);
	vals[1] = str(d);
	vals[2] = str(rule);
	json_decref(v);
	v = NULL;
	fits = strlen(n) < sizeof(name) && strlen(d) < sizeof(digest) &&
	    strlen(rule) < sizeof(lrule);
	if (!fits)
		return obj_of(3, keys, vals);
	if ((v = obj_of(3, keys, vals)) == NULL)
		return NULL;
	snprintf(name, sizeof(name), "%s", n);
	snprintf(digest, sizeof(digest), "%s", d);
	snprintf(lrule, sizeof(lrule), "%s", rule);
	return json_incref(v);
}

static json_t *
dns_answers(const struct dns_event *ev, bool kept)
{
	static const char *const keys[] = { "ip", "ttl", "class" };
	static json_t *empty;
	json_t *arr = NULL, *vals[3];
	size_t i;

	for (i = 0; i < ev->naddrs && i < DNS_EV_MAX_ADDRS; i++) {
		const struct dns_ev_addr *a = &ev->addrs[i];

		if (a->kept != kept)
			continue;
		if (arr == NULL && (arr = json_array()) == NULL)
			return NULL;
		vals[0] = addr_fast(a->family, a->addr);
		vals[1] = json_integer((json_int_t)a->ttl);
		vals[2] = class_json(a->cls, strnlen(a->cls, sizeof(a->cls)));
		if (json_array_append_new(arr, obj_of(3, keys, vals)) == -1) {
			json_decref(arr);
			return NULL;
		}
	}
	/* Most records have nothing removed (or nothing kept): one shared
	 * empty array, never appended to once built. */
	if (arr == NULL) {
		if (empty == NULL)
			empty = json_array();
		return json_incref(empty);
	}
	return arr;
}

static json_t *
dns_elements(const struct dns_event *ev)
{
	static const char *const keys[] = { "ip", "proto", "port_lo",
	    "port_hi", "timeout_ms", "keep" };
	json_t *arr, *vals[6];
	size_t i, n;

	if ((arr = json_array()) == NULL)
		return NULL;
	for (i = 0; i < ev->nelems && i < DNS_EV_MAX_ELEMS; i++) {
		const struct fw_elem *e = &ev->elems[i];

		vals[0] = addr_fast(e->family, e->addr);
		vals[1] = proto_json(e->proto);
		vals[2] = json_integer((json_int_t)e->port_lo);
		vals[3] = e->port_hi == e->port_lo ? json_incref(vals[2]) :
		    json_integer((json_int_t)e->port_hi);
		vals[4] = json_integer((json_int_t)e->timeout_ms);
		/* Kept through a taint (a keep-listed host); absent, not
		 * false, otherwise so that the common record stays short. */
		n = 5;
		if (e->flags & FW_ELEM_KEEP)
			vals[n++] = json_true();
		if (json_array_append_new(arr, obj_of(n, keys, vals)) == -1) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/* ------------------------------------------------- dns.decision as bytes */

#define CW_K(w, lit)	aud_cw_raw((w), (lit), sizeof(lit) - 1)

/* str()'s rules as bytes: the string if it can be canonical, else the
 * same with every byte outside printable ASCII shown as '?'. */
static void
cw_s(struct aud_cw *w, const char *s, size_t n)
{
	char tmp[512];
	size_t i;

	if (aud_cw_str(w, s, n) == 0)
		return;
	if (n > sizeof(tmp)) {
		w->overflow = 1;	/* the tree path handles it */
		return;
	}
	for (i = 0; i < n; i++)
		tmp[i] = (unsigned char)s[i] < 0x20 ||
		    (unsigned char)s[i] >= 0x7f ? '?' : s[i];
	(void)aud_cw_str(w, tmp, n);
}

static void
cw_cs(struct aud_cw *w, const char *s)
{
	cw_s(w, s, strlen(s));
}

static void
cw_u(struct aud_cw *w, uint64_t v)
{
	(void)aud_cw_int(w, (long long)(v > (uint64_t)AUD_INT_MAX ?
	    (uint64_t)AUD_INT_MAX : v));
}

static void
cw_addr(struct aud_cw *w, uint8_t family, const uint8_t *a)
{
	char buf[INET6_ADDRSTRLEN];

	/* addr_fast's forms: IPv4 by hand, IPv6 through inet_ntop. */
	if (family == AF_INET6) {
		if (inet_ntop(AF_INET6, a, buf, sizeof(buf)) == NULL)
			CW_K(w, "\"?\"");
		else
			cw_cs(w, buf);
		return;
	}
	cw_s(w, buf, pol_ipv4_format(a, buf));
}

static void
cw_answers(struct aud_cw *w, const struct dns_event *ev, bool kept)
{
	size_t i;
	int first = 1;

	CW_K(w, "[");
	for (i = 0; i < ev->naddrs && i < DNS_EV_MAX_ADDRS; i++) {
		const struct dns_ev_addr *a = &ev->addrs[i];

		if (a->kept != kept)
			continue;
		if (!first)
			CW_K(w, ",");
		first = 0;
		CW_K(w, "{\"class\":");
		if (aud_cw_str(w, a->cls, strnlen(a->cls, sizeof(a->cls))) ==
		    -1)
			w->overflow = 1;	/* the tree path refuses it */
		CW_K(w, ",\"ip\":");
		cw_addr(w, a->family, a->addr);
		CW_K(w, ",\"ttl\":");
		cw_u(w, a->ttl);
		CW_K(w, "}");
	}
	CW_K(w, "]");
}

static void
cw_elements(struct aud_cw *w, const struct dns_event *ev)
{
	char pb[8];
	size_t i;

	CW_K(w, "[");
	for (i = 0; i < ev->nelems && i < DNS_EV_MAX_ELEMS; i++) {
		const struct fw_elem *e = &ev->elems[i];

		if (i > 0)
			CW_K(w, ",");
		CW_K(w, "{\"ip\":");
		cw_addr(w, e->family, e->addr);
		if (e->flags & FW_ELEM_KEEP)
			CW_K(w, ",\"keep\":true");
		CW_K(w, ",\"port_hi\":");
		cw_u(w, e->port_hi);
		CW_K(w, ",\"port_lo\":");
		cw_u(w, e->port_lo);
		CW_K(w, ",\"proto\":");
		cw_cs(w, proto_name(e->proto, pb, sizeof(pb)));
		CW_K(w, ",\"timeout_ms\":");
		cw_u(w, e->timeout_ms);
		CW_K(w, "}");
	}
	CW_K(w, "]");
}

/* The members in bytewise key order, as the canonical form sorts them. */
int
rec_dns_canon(const struct dns_event *ev, const struct pol_policy *policy,
    struct aud_cw *w)
{
	char tb[16];

	CW_K(w, "{\"answers\":");
	cw_answers(w, ev, true);
	CW_K(w, ",\"client\":");
	cw_cs(w, ev->client);
	CW_K(w, ",\"decision\":");
	if (ev->decision == DNS_DEC_ALLOW || ev->decision == DNS_DEC_SYNTHETIC)
		CW_K(w, "\"allow\"");
	else
		CW_K(w, "\"deny\"");
	CW_K(w, ",\"elements\":");
	cw_elements(w, ev);
	if (ev->finding)
		CW_K(w, ",\"finding\":true");
	CW_K(w, ",\"latency_us\":");
	cw_u(w, ev->latency_us);
	CW_K(w, ",\"naddrs\":");
	cw_u(w, ev->naddrs);
	CW_K(w, ",\"nelems\":");
	cw_u(w, ev->nelems);
	CW_K(w, ",\"nkept\":");
	cw_u(w, ev->nkept);
	CW_K(w, ",\"nremoved\":");
	cw_u(w, ev->nremoved);
	CW_K(w, ",\"outcome\":");
	cw_cs(w, outcome_name(ev->decision));
	if (policy != NULL) {
		CW_K(w, ",\"policy\":{\"id\":");
		cw_cs(w, pol_policy_name(policy));
		CW_K(w, ",\"rule\":");
		cw_cs(w, ev->rule);
		CW_K(w, ",\"sha256\":");
		cw_cs(w, pol_policy_digest(policy));
		CW_K(w, "}");
	}
	CW_K(w, ",\"q\":{\"class\":\"IN\",\"name\":");
	cw_cs(w, ev->qname);
	CW_K(w, ",\"type\":");
	cw_cs(w, qtype_name(ev->qtype, tb, sizeof(tb)));
	CW_K(w, "},\"rcode\":");
	cw_cs(w, rcode_name(ev->rcode));
	CW_K(w, ",\"reason\":");
	cw_cs(w, pol_reason_name(ev->reason));
	CW_K(w, ",\"removed\":");
	cw_answers(w, ev, false);
	if (ev->upstream[0] != '\0') {
		CW_K(w, ",\"resolver\":");
		cw_cs(w, ev->upstream);
	}
	if (policy == NULL && ev->rule[0] != '\0') {
		CW_K(w, ",\"rule\":");
		cw_cs(w, ev->rule);
	}
	if (ev->sandbox[0] != '\0') {
		CW_K(w, ",\"sandbox\":{\"id\":");
		cw_cs(w, ev->sandbox);
		CW_K(w, "}");
	}
	if (ev->suppressed > 0) {
		CW_K(w, ",\"suppressed\":");
		cw_u(w, ev->suppressed);
	}
	CW_K(w, ",\"transport\":");
	if (ev->tcp)
		CW_K(w, "\"tcp\"");
	else
		CW_K(w, "\"udp\"");
	CW_K(w, "}");
	return w->overflow ? -1 : 0;
}

json_t *
rec_dns_fields(const struct dns_event *ev, const struct pol_policy *policy)
{
	static json_t *k_udp, *k_tcp, *k_allow, *k_deny, *k_in;
	static const char *const qkeys[] = { "name", "type", "class" };
	json_t *o, *q[3];
	int bad = 0;

	if ((o = json_object()) == NULL)
		return NULL;
	if (ev->sandbox[0] != '\0')
		bad |= put(o, "sandbox", sandbox_shared(ev->sandbox));
	bad |= put(o, "client", str(ev->client));
	bad |= put(o, "transport", ev->tcp ? shared(&k_tcp, "tcp") :
	    shared(&k_udp, "udp"));
	q[0] = str(ev->qname);
	q[1] = qtype_shared(ev->qtype);
	q[2] = shared(&k_in, "IN");
	bad |= put(o, "q", obj_of(3, qkeys, q));
	/* decision keeps to the common vocabulary (allow/deny) that OCSF and
	 * the SOC read; outcome says which kind of answer it was. */
	bad |= put(o, "decision", ev->decision == DNS_DEC_ALLOW ||
	    ev->decision == DNS_DEC_SYNTHETIC ? shared(&k_allow, "allow") :
	    shared(&k_deny, "deny"));
	bad |= put(o, "outcome", outcome_json(ev->decision));
	bad |= put(o, "reason", str(pol_reason_name(ev->reason)));
	bad |= put(o, "rcode", rcode_json(ev->rcode));
	bad |= put(o, "answers", dns_answers(ev, true));
	bad |= put(o, "removed", dns_answers(ev, false));
	bad |= put(o, "elements", dns_elements(ev));
	bad |= put(o, "naddrs", small_int(ev->naddrs));
	bad |= put(o, "nkept", small_int(ev->nkept));
	bad |= put(o, "nremoved", small_int(ev->nremoved));
	bad |= put(o, "nelems", small_int(ev->nelems));
	if (ev->upstream[0] != '\0')
		bad |= put(o, "resolver", str(ev->upstream));
	bad |= put(o, "latency_us", json_integer((json_int_t)(ev->latency_us >
	    (uint64_t)AUD_INT_MAX ? (uint64_t)AUD_INT_MAX : ev->latency_us)));
	if (ev->finding)
		bad |= put(o, "finding", json_true());
	/* Over-rate queries dropped since this sandbox's previous record:
	 * the count the log keeps of what it was not told one by one. */
	if (ev->suppressed > 0)
		bad |= put(o, "suppressed", json_integer(ev->suppressed));
	if (policy != NULL)
		bad |= put(o, "policy", policy_shared(policy, ev->rule));
	else if (ev->rule[0] != '\0')
		bad |= put(o, "rule", str(ev->rule));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *
rec_dns_finding(const struct dns_event *ev)
{
	char detail[512];
	const char *type;

	/* The proxy raises findings for answers that pointed somewhere no
	 * public name may (rebinding; some addresses removed), for floods
	 * over the rate limit, for a sandbox at its learn cap, and for names
	 * that look like a tunnel. */
	if (ev->nremoved > 0 || ev->reason == POL_REASON_REBINDING)
		type = "dns_rebinding";
	else if (ev->reason == POL_REASON_RATE_LIMITED)
		type = "dns_flood";
	else if (ev->reason == POL_REASON_LEARNED_CAP)
		type = "dns_learned_cap";
	else
		type = "dns_tunnel";
	snprintf(detail, sizeof(detail), "%s: %s (client %s)",
	    pol_reason_name(ev->reason), ev->qname, ev->client);
	return rec_finding_fields(ev->sandbox[0] != '\0' ? ev->sandbox : NULL,
	    type, "high", detail);
}

json_t *
rec_netdeny_fields(const struct nd_entry *e, const char *sandbox,
    const char *reason)
{
	char ifname[FW_IFNAMSIZ + 1], pb[8];
	json_t *o;
	int bad = 0;

	if ((o = json_object()) == NULL)
		return NULL;
	memcpy(ifname, e->d.ifname, FW_IFNAMSIZ);
	ifname[FW_IFNAMSIZ] = '\0';
	if (sandbox != NULL && sandbox[0] != '\0' && strcmp(sandbox, "-") != 0)
		bad |= put(o, "sandbox", sandbox_json(sandbox));
	bad |= put(o, "iface", str(ifname));
	if (e->summary) {
		/* Packets of a link beyond its keys (or of no link, the
		 * table full): how many, and when; no one destination. */
		bad |= put(o, "summary", json_true());
		bad |= put(o, "decision", json_string("deny"));
		bad |= put(o, "reason", str(reason != NULL ? reason :
		    "not_itemised"));
		bad |= put(o, "count", json_integer((json_int_t)(e->count >
		    (uint64_t)AUD_INT_MAX ? (uint64_t)AUD_INT_MAX :
		    e->count)));
		if (e->nkeys > 0)
			bad |= put(o, "keys", json_integer(e->nkeys));
		bad |= put(o, "first_ts", json_integer((json_int_t)
		    e->first_ms));
		bad |= put(o, "last_ts", json_integer((json_int_t)
		    e->last_ms));
		if (bad) {
			json_decref(o);
			return NULL;
		}
		return o;
	}
	if (e->nports > 1 || e->other_ports > 0) {
		json_t *a = json_array();
		size_t i;

		for (i = 0; a != NULL && i < e->nports; i++)
			if (json_array_append_new(a,
			    json_integer(e->ports[i])) == -1)
				bad = 1;
		bad |= put(o, "dst_ports", a);
		bad |= put(o, "other_ports", json_integer((json_int_t)
		    (e->other_ports > (uint64_t)AUD_INT_MAX ?
		    (uint64_t)AUD_INT_MAX : e->other_ports)));
	}
	bad |= put(o, "proto", json_string(proto_name(e->d.proto, pb,
	    sizeof(pb))));
	bad |= put(o, "src", json_pack("{s:o, s:I}", "ip",
	    addr_json(e->d.family, e->d.src), "port", (json_int_t)e->d.sport));
	bad |= put(o, "dst", json_pack("{s:o, s:I}", "ip",
	    addr_json(e->d.family, e->d.dst), "port", (json_int_t)e->d.dport));
	bad |= put(o, "decision", json_string("deny"));
	bad |= put(o, "reason", str(reason != NULL ? reason :
	    "denied"));
	bad |= put(o, "count", json_integer((json_int_t)(e->count >
	    (uint64_t)AUD_INT_MAX ? (uint64_t)AUD_INT_MAX : e->count)));
	bad |= put(o, "first_ts", json_integer((json_int_t)e->first_ms));
	bad |= put(o, "last_ts", json_integer((json_int_t)e->last_ms));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *
rec_reload_fields(bool ok, const char *policy_dir, json_t *policies,
    const struct pol_errors *errs)
{
	json_t *o, *a;
	const char *m;
	size_t i, n;
	int bad = 0;

	if ((o = json_object()) == NULL) {
		json_decref(policies);
		return NULL;
	}
	bad |= put(o, "decision", json_string(ok ? "allow" : "deny"));
	bad |= put(o, "result", json_string(ok ? "ok" : "failed"));
	bad |= put(o, "policy_dir", str(policy_dir));
	if (policies != NULL)
		bad |= put(o, "policies", policies);
	if (errs != NULL) {
		if ((a = json_array()) == NULL)
			bad = 1;
		for (i = 0; a != NULL && (m = pol_errors_get(errs, i)) != NULL;
		    i++) {
			/* Messages quote file content (see str()). */
			if (json_array_append_new(a, str(m)) == -1)
				bad = 1;
		}
		n = pol_errors_count(errs);
		if (a != NULL)
			bad |= put(o, "errors", a);
		bad |= put(o, "nerrors", json_integer((json_int_t)n));
	}
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *
rec_finding_fields(const char *sandbox, const char *type, const char *severity,
    const char *detail)
{
	json_t *o;
	int bad = 0;

	if ((o = json_object()) == NULL)
		return NULL;
	if (sandbox != NULL && sandbox[0] != '\0')
		bad |= put(o, "sandbox", sandbox_json(sandbox));
	bad |= put(o, "type", str(type));
	bad |= put(o, "severity", str(severity));
	bad |= put(o, "decision", json_string("log"));
	bad |= put(o, "detail", str(detail));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int
rec_sandbox_event(const char *kind, const char *id, const char *policy,
    const char *subject, const char *iface, const char *addr,
    const char *detail)
{
	const char *rkind = kind;
	char err[256];
	json_t *o;
	int bad = 0;

	if (kind == NULL || id == NULL) {
		errno = EINVAL;
		return -1;
	}
	if ((o = json_object()) == NULL)
		return -1;
	/* Taint and orphan removal are worth a record but are not kinds the
	 * log defines: they are findings, typed by the event name. */
	if (strcmp(kind, "sandbox.create") != 0 &&
	    strcmp(kind, "sandbox.delete") != 0 &&
	    strcmp(kind, "sandbox.expire") != 0 &&
	    strcmp(kind, "sandbox.adopt") != 0) {
		rkind = "finding";
		bad |= put(o, "type", str(kind));
		bad |= put(o, "severity", json_string("medium"));
	}
	/* An orphan has no valid id ("-"); the canonical form and the index
	 * want either a real one or none. */
	if (strcmp(id, "-") != 0)
		bad |= put(o, "sandbox", sandbox_json(id));
	if (policy != NULL)
		bad |= put(o, "policy", json_pack("{s:o}", "id", str(policy)));
	if (subject != NULL)
		bad |= put(o, "subject", str(subject));
	if (iface != NULL)
		bad |= put(o, "iface", str(iface));
	if (addr != NULL)
		bad |= put(o, "address", str(addr));
	if (detail != NULL && detail[0] != '\0')
		bad |= put(o, "detail", str(detail));
	bad |= put(o, "decision", json_string("log"));
	if (bad) {
		json_decref(o);
		errno = ENOMEM;
		return -1;
	}
	if (rec_commit(rkind, o, NULL, err, sizeof(err)) == -1)
		return -1;
	return 0;
}
