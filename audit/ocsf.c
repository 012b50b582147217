/*
 * ocsf: one canonical record as an OCSF 1.8.0 event (reference/audit.md
 * §3.9), so `sluice audit tail --format ocsf` and later the SOC sinks speak
 * what SIEMs ingest. The mapping is derived from `canon` alone and carries
 * rec_hash and the canon itself, so a SIEM copy can be re-checked against
 * the log's checkpoints.
 */
#include <errno.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>

#include "audit/priv.h"

static json_t *
get(const json_t *o, const char *a, const char *b)
{
	json_t *v = json_object_get(o, a);

	if (b != NULL)
		v = json_is_object(v) ? json_object_get(v, b) : NULL;
	return v;
}

static void
copy(json_t *dst, const char *k, json_t *v)
{
	if (v != NULL && !json_is_null(v))
		json_object_set(dst, k, v);
}

static json_t *
endpoint(const json_t *o)
{
	json_t *e = json_object();

	if (!json_is_object(o))
		return e;
	copy(e, "hostname", json_object_get(o, "host"));
	copy(e, "ip", json_object_get(o, "ip"));
	copy(e, "port", json_object_get(o, "port"));
	return e;
}

json_t *
aud_ocsf(const char *canon, size_t len, char *err, size_t errlen)
{
	json_t *r, *ev, *md, *pol, *sb;
	const char *kind, *dec;
	uint8_t h[AUD_HASH_LEN];
	char hex[2 * AUD_HASH_LEN + 1], uid[320];
	int cls, cat, act, deny;
	long long seq;
	int64_t ts;

	if ((r = aud_canon_parse(canon, len, err, errlen)) == NULL)
		return NULL;
	kind = json_string_value(json_object_get(r, "kind"));
	if (!aud_kind_valid(kind) ||
	    aud_ns_parse(json_object_get(r, "ts"), &ts) == -1 ||
	    !json_is_integer(json_object_get(r, "seq")) ||
	    !json_is_string(json_object_get(r, "origin"))) {
		if (err != NULL)
			snprintf(err, errlen, "not an audit record");
		json_decref(r);
		errno = EINVAL;
		return NULL;
	}
	seq = json_integer_value(json_object_get(r, "seq"));
	dec = json_string_value(json_object_get(r, "decision"));
	deny = dec != NULL && strcmp(dec, "deny") == 0;
	aud_sha256(canon, len, h);
	aud_hex(h, AUD_HASH_LEN, hex);

	/* Class per §3.9; lifecycle and log.* records have no better home
	 * than Application Lifecycle (6002) in 1.8. */
	if (strcmp(kind, "dns.decision") == 0) {
		cls = 4003; cat = 4; act = 1;
	} else if (strcmp(kind, "egress.decision") == 0 ||
	    strcmp(kind, "net.deny") == 0) {
		cls = 4001; cat = 4; act = 1;
	} else if (strcmp(kind, "net.flow") == 0) {
		cls = 4001; cat = 4; act = 6;	/* Network Activity: Traffic */
	} else if (strcmp(kind, "mcp.call") == 0 ||
	    strcmp(kind, "mcp.prompt") == 0 ||
	    strcmp(kind, "mcp.intent") == 0 ||
	    strcmp(kind, "mcp.outcome_unknown") == 0 ||
	    strcmp(kind, "mcp.approval") == 0) {
		/* A call's intent, its outcome and an outcome never known:
		 * the same API Activity, told apart by activity_name and
		 * status, and tied together by correlation_uid (call_id). */
		cls = 6003; cat = 6; act = 99;
	} else if (strcmp(kind, "mcp.resource") == 0) {
		cls = 6003; cat = 6; act = 2;	/* API Activity: Read */
	} else if (strcmp(kind, "mcp.server_request") == 0) {
		/* An upstream's request of the client: API Activity whose
		 * operation is the method it asked. */
		cls = 6003; cat = 6; act = 99;
	} else if (strcmp(kind, "finding") == 0) {
		cls = 2004; cat = 2; act = 1;
	} else {
		cls = 6002; cat = 6; act = 99;
	}
	ev = json_pack("{s:i,s:i,s:i,s:I,s:I,s:i,s:s}", "class_uid", cls,
	    "category_uid", cat, "activity_id", act, "type_uid",
	    (json_int_t)cls * 100 + act, "time", (json_int_t)(ts / 1000000),
	    "severity_id", strcmp(kind, "finding") == 0 ? 4 : deny ? 3 : 1,
	    "message", kind);
	/* An outcome never recorded is neither a success nor a failure. */
	json_object_set_new(ev, "status_id", json_integer(
	    strcmp(kind, "mcp.outcome_unknown") == 0 ? 0 : deny ? 2 : 1));
	if (dec != NULL) {
		json_object_set_new(ev, "action_id",
		    json_integer(strcmp(dec, "allow") == 0 ? 1 : deny ? 2 : 99));
		json_object_set_new(ev, "disposition_id", json_integer(
		    strcmp(dec, "allow") == 0 ? 1 : deny ?
		    (strcmp(kind, "net.deny") == 0 ? 6 : 2) :
		    strcmp(dec, "log") == 0 ? 17 : 99));
	}
	snprintf(uid, sizeof(uid), "%s#%lld",
	    json_string_value(json_object_get(r, "origin")), seq);
	md = json_pack("{s:s,s:{s:s,s:s},s:s,s:I,s:s}", "version", "1.8.0",
	    "product", "name", "sluice", "vendor_name", "sluice", "uid", uid,
	    "sequence", (json_int_t)seq, "log_name", "sluice-audit");
	copy(md, "correlation_uid", get(r, "sandbox", "run"));
	copy(md, "correlation_uid", json_object_get(r, "call_id"));
	json_object_set_new(ev, "metadata", md);
	sb = get(r, "sandbox", "id");
	if (sb == NULL && json_is_string(json_object_get(r, "sandbox")))
		sb = json_object_get(r, "sandbox");
	if (sb != NULL) {
		json_t *src = endpoint(json_object_get(r, "src"));

		copy(src, "uid", sb);
		json_object_set_new(ev, "src_endpoint", src);
	}
	if (json_is_object(json_object_get(r, "dst")))
		json_object_set_new(ev, "dst_endpoint",
		    endpoint(json_object_get(r, "dst")));
	if (strcmp(kind, "net.flow") == 0) {
		json_t *tr = json_object();

		/* OCSF traffic: out is the sandbox's (original) direction. */
		copy(tr, "bytes_out", json_object_get(r, "bytes_out"));
		copy(tr, "bytes_in", json_object_get(r, "bytes_in"));
		copy(tr, "packets_out", json_object_get(r, "packets_out"));
		copy(tr, "packets_in", json_object_get(r, "packets_in"));
		json_object_set_new(ev, "traffic", tr);
		copy(ev, "start_time", json_object_get(r, "start_ms"));
		copy(ev, "end_time", json_object_get(r, "end_ms"));
	}
	if (json_is_object(json_object_get(r, "policy"))) {
		pol = json_object();
		copy(pol, "uid", get(r, "policy", "id"));
		copy(pol, "name", get(r, "policy", "id"));
		copy(pol, "version", get(r, "policy", "version"));
		json_object_set_new(ev, "policy", pol);
		if (get(r, "policy", "rule") != NULL)
			json_object_set_new(ev, "firewall_rule", json_pack(
			    "{s:O}", "uid", get(r, "policy", "rule")));
	}
	if (cls == 4003 && json_is_object(json_object_get(r, "q"))) {
		json_t *q = json_object();

		copy(q, "hostname", get(r, "q", "name"));
		copy(q, "type", get(r, "q", "type"));
		copy(q, "class", get(r, "q", "class"));
		json_object_set_new(ev, "query", q);
		copy(ev, "rcode", json_object_get(r, "rcode"));
		copy(ev, "answers", json_object_get(r, "answers"));
	}
	if (cls == 6003) {
		/* What was done to which MCP object: the kind says. */
		bool sreq = strcmp(kind, "mcp.server_request") == 0;
		const char *op = strcmp(kind, "mcp.resource") == 0 ?
		    "resources/read" : strcmp(kind, "mcp.prompt") == 0 ?
		    "prompts/get" : sreq && json_is_string(json_object_get(r,
		    "method")) ? json_string_value(json_object_get(r,
		    "method")) : sreq ? "server_request" :
		    strcmp(kind, "mcp.approval") == 0 ? "approval" :
		    "tools/call";
		const char *key = strcmp(kind, "mcp.resource") == 0 ? "uri" :
		    strcmp(kind, "mcp.prompt") == 0 ? "prompt" : sreq ?
		    "server" : "tool";
		json_t *api = json_pack("{s:s}", "operation", op);

		if (json_object_get(r, "server") != NULL)
			json_object_set_new(api, "service", json_pack("{s:O}",
			    "name", json_object_get(r, "server")));
		if (json_object_get(r, "jsonrpc_id") != NULL)
			json_object_set_new(api, "request", json_pack("{s:O}",
			    "uid", json_object_get(r, "jsonrpc_id")));
		json_object_set_new(ev, "api", api);
		json_object_set_new(ev, "activity_name", json_string(
		    strcmp(kind, "mcp.intent") == 0 ? "tools/call intent" :
		    strcmp(kind, "mcp.outcome_unknown") == 0 ?
		    "tools/call outcome unknown" : op));
		if (json_is_string(json_object_get(r, key)))
			json_object_set_new(ev, "resources", json_pack(
			    "[{s:O,s:s}]", "name", json_object_get(r, key),
			    "type", strcmp(key, "uri") == 0 ? "mcp.resource" :
			    strcmp(key, "prompt") == 0 ? "mcp.prompt" : sreq ?
			    "mcp.server" : "mcp.tool"));
	}
	if (cls == 2004)
		json_object_set_new(ev, "is_alert", json_true());
	copy(ev, "count", json_object_get(r, "count"));
	json_object_set_new(ev, "raw_data_hash", json_pack("{s:i,s:s}",
	    "algorithm_id", 3, "value", hex));
	json_object_set_new(ev, "raw_data", json_stringn(canon, len));
	json_decref(r);
	return ev;
}
