/*
 * rec_fields.c: what the field layouts of every record kind share, and the
 * kinds the daemon's core produces. Each producer converts its own events
 * (gateway/dns/record.c the proxy's, gateway/netdeny.c denied packets,
 * gateway/brwire.c the bridge's), but they all write the same building
 * blocks: a sandbox as {id}, an address as text, a protocol by name, and
 * strings the canonical form always accepts even when their bytes came from
 * a kernel link name or a policy file. Keeping those here gives the log one
 * shape for them, whichever room wrote the record. The generic finding, the
 * policy.reload record and the sandbox lifecycle records stay here until
 * their producers become rooms of their own.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/record.h"

json_t *
rec_addr_json(uint8_t family, const uint8_t *a)
{
	char buf[INET6_ADDRSTRLEN];
	int af = family == AF_INET6 ? AF_INET6 : AF_INET;

	if (inet_ntop(af, a, buf, sizeof(buf)) == NULL)
		return json_string("?");
	return json_string(buf);
}

const char *
rec_proto_name(uint8_t p, char *buf, size_t len)
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
json_t *
rec_string(const char *s)
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

/* Sets key to a new value, dropping the whole object on failure so that a
 * half-built record never reaches the log. */
int
rec_put(json_t *o, const char *key, json_t *v)
{
	/* Keys are the callers' literals: no UTF-8 check needed. */
	if (v == NULL || json_object_set_new_nocheck(o, key, v) == -1)
		return -1;
	return 0;
}

json_t *
rec_sandbox_json(const char *id)
{
	return json_pack("{s:o}", "id", rec_string(id));
}

/* ------------------------------------------- kinds of the daemon's core */

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
	bad |= rec_put(o, "decision", json_string(ok ? "allow" : "deny"));
	bad |= rec_put(o, "result", json_string(ok ? "ok" : "failed"));
	bad |= rec_put(o, "policy_dir", rec_string(policy_dir));
	if (policies != NULL)
		bad |= rec_put(o, "policies", policies);
	if (errs != NULL) {
		if ((a = json_array()) == NULL)
			bad = 1;
		for (i = 0; a != NULL && (m = pol_errors_get(errs, i)) != NULL;
		    i++) {
			/* Messages quote file content (see rec_string). */
			if (json_array_append_new(a, rec_string(m)) == -1)
				bad = 1;
		}
		n = pol_errors_count(errs);
		if (a != NULL)
			bad |= rec_put(o, "errors", a);
		bad |= rec_put(o, "nerrors", json_integer((json_int_t)n));
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
		bad |= rec_put(o, "sandbox", rec_sandbox_json(sandbox));
	bad |= rec_put(o, "type", rec_string(type));
	bad |= rec_put(o, "severity", rec_string(severity));
	bad |= rec_put(o, "decision", json_string("log"));
	bad |= rec_put(o, "detail", rec_string(detail));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int
rec_sandbox_event(struct rec *r, const char *kind, const char *id,
    const char *policy, const char *subject, const char *iface,
    const char *addr, const char *detail)
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
		bad |= rec_put(o, "type", rec_string(kind));
		bad |= rec_put(o, "severity", json_string("medium"));
	}
	/* An orphan has no valid id ("-"); the canonical form and the index
	 * want either a real one or none. */
	if (strcmp(id, "-") != 0)
		bad |= rec_put(o, "sandbox", rec_sandbox_json(id));
	if (policy != NULL)
		bad |= rec_put(o, "policy", json_pack("{s:o}", "id",
		    rec_string(policy)));
	if (subject != NULL)
		bad |= rec_put(o, "subject", rec_string(subject));
	if (iface != NULL)
		bad |= rec_put(o, "iface", rec_string(iface));
	if (addr != NULL)
		bad |= rec_put(o, "address", rec_string(addr));
	if (detail != NULL && detail[0] != '\0')
		bad |= rec_put(o, "detail", rec_string(detail));
	bad |= rec_put(o, "decision", json_string("log"));
	if (bad) {
		json_decref(o);
		errno = ENOMEM;
		return -1;
	}
	if (rec_commit(r, rkind, o, NULL, err, sizeof(err)) == -1)
		return -1;
	return 0;
}
