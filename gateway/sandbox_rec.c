/*
 * sandbox_rec.c: the audit records of the sandbox manager. No action
 * without a record: every lifecycle event is committed (rec_commit,
 * blocking) before the kernel is touched, and what the records say of a
 * sandbox (who, under which policy and digest, where, until when) is
 * written once, here, for create, delete, expiry, adoption and policy
 * updates alike. Refusals, which do nothing, go async.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gateway/log.h"
#include "gateway/record.h"
#include "gateway/sandbox.h"
#include "gateway/sandbox_int.h"

/*
 * The record of an event that has no fuller form below (orphan removal,
 * taint), committed durably (rec_sandbox_event), and its log line. -1 when
 * the record is not known durable: a caller about to act must not.
 */
static int
sb_eventv(struct sbx *m, const char *kind, const char *id,
    const struct sandbox *s, const char *fmt, va_list ap)
{
	char detail[512];

	vsnprintf(detail, sizeof(detail), fmt, ap);
	/* Durable: committed before the caller goes on (and acts). */
	if (rec_sandbox_event(m->rec, kind, id, s != NULL ? s->rec.policy : NULL,
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

int
sb_event(struct sbx *m, const char *kind, const char *id,
    const struct sandbox *s, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = sb_eventv(m, kind, id, s, fmt, ap);
	va_end(ap);
	return rc;
}

int
sbx_note(struct sbx *m, const char *kind, const char *id, const char *fmt,
    ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = sb_eventv(m, kind, id, sb_find(m, id), fmt, ap);
	va_end(ap);
	return rc;
}

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

/* Labels as [{key, value}]: their keys may hold '.', '/' and '-'
 * (app.kubernetes.io/name), which a record's own keys may not. NULL on
 * allocation failure (the record is then refused, never written without
 * them). */
static json_t *
labels_pairs(const json_t *labels)
{
	json_t *a, *v;
	const char *k;

	if ((a = json_array()) == NULL)
		return NULL;
	json_object_foreach((json_t *)(uintptr_t)labels, k, v) {
		if (json_array_append_new(a, json_pack("{s:s,s:O}", "key", k,
		    "value", v)) == -1) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/*
 * The fields of a sandbox.* record about s: who (subject, labels), under
 * which policy (name and the SHA-256 of its file), where (address, link)
 * and until when. decision and result say what the record is (see
 * sbx_create). NULL on allocation failure: the caller must not act then.
 */
json_t *
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
	bad |= json_object_set_new(o, "labels", labels_pairs(s->labels));
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
int
sb_commit(struct sbx *m, const struct sandbox *s, const char *kind, const char *decision,
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
	if (rec_commit(m->rec, kind, f, NULL, e, sizeof(e)) == -1) {
		snprintf(err, errlen, "audit log: %s", e);
		errno = EPIPE;
		return -1;
	}
	return 0;
}

/*
 * What is recorded of a refusal is what is known of the request, all of
 * it untrusted (through rec_string): nothing was done on its account, so
 * the record is async.
 */
void
sbx_create_refused(struct sbx *m, const struct sbx_spec *spec,
    const char *reason, unsigned status, const char *msg)
{
	char id[SBX_ID_MAX + 1] = "", pol[SBX_POLICY_MAX + 1] = "",
	    subj[SBX_SUBJECT_MAX + 1] = "";
	json_t *o;
	int bad = 0;

	/* Bounded: spec's strings need not be terminated. */
	if (spec != NULL) {
		snprintf(id, sizeof(id), "%.*s", SBX_ID_MAX, spec->id);
		snprintf(pol, sizeof(pol), "%.*s", SBX_POLICY_MAX,
		    spec->policy);
		snprintf(subj, sizeof(subj), "%.*s", SBX_SUBJECT_MAX,
		    spec->subject);
	}
	if ((o = json_object()) == NULL)
		return;
	if (id[0] != '\0')
		bad |= json_object_set_new(o, "sandbox", rec_sandbox_json(id));
	if (pol[0] != '\0')
		bad |= json_object_set_new(o, "policy", json_pack("{s:o}",
		    "id", rec_string(pol)));
	if (subj[0] != '\0')
		bad |= json_object_set_new(o, "subject", rec_string(subj));
	bad |= json_object_set_new(o, "decision", json_string("deny"));
	bad |= json_object_set_new(o, "result", json_string("refused"));
	bad |= json_object_set_new(o, "reason", rec_string(reason));
	if (status != 0)
		bad |= json_object_set_new(o, "status", json_integer(status));
	bad |= json_object_set_new(o, "detail", rec_string(msg));
	if (bad) {
		json_decref(o);
		log_warnx("sandbox.create refusal: record: out of memory");
		return;
	}
	if (rec_async(m != NULL ? m->rec : NULL, "sandbox.create", o) == -1)
		log_warn("sandbox.create refusal: record");
}
