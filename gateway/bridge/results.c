/*
 * results: what an upstream's answer may carry back into a sandbox. It
 * exists to remove secrets from tool results before anyone sees them, in
 * text content, embedded resources, structuredContent and anything else
 * that is a string or a number (a credential made of digits comes back as
 * one): the credentials Sluice itself holds for its upstreams always, raw
 * and in every encoded or escaped form redaction knows (pol_redact_held,
 * whatever the policy says: they must never reach a sandbox), and what the
 * sandbox's policy asks for through pol_redact (cloud keys, private keys,
 * bearer tokens, its own patterns). A redaction that cannot be completed
 * fails the call: the result is withheld, never passed on unredacted.
 * Replacement happens only inside JSON strings, so the structure stays,
 * except that a number that matched becomes the string of its redacted
 * text; for structuredContent the tool's outputSchema is consulted, and
 * when a replaced string sits under a schema that constrains it (pattern,
 * format, enum, length...) or under one we cannot follow, or a number was
 * replaced, structuredContent is dropped and the result becomes isError, so
 * that the official SDK (which validates structuredContent against
 * outputSchema, and demands it unless isError) never receives an invalid or
 * half-redacted object. Two places cannot be rewritten without breaking
 * what they mean: object keys, and the binary payloads and type tags of
 * content (data, blob, type, mimeType). They are still searched, and a
 * secret found there withholds the whole result: an upstream must not be
 * able to carry a credential out by putting it where redaction does not
 * look.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/bridge/br_int.h"

#define REDACTED	"[REDACTED]"
/* Too short a secret would shred every text: shorter ones are not used. */
#define SECRET_MIN	4

/* The held credentials long enough to search (SECRET_MIN), in a new
 * array (*out, caller frees; NULL when there are none). -1 (ENOMEM). */
static int
held_long(const struct br *br, const char ***out, size_t *n)
{
	size_t i;

	*out = NULL;
	*n = 0;
	if (br->nsecrets == 0)
		return 0;
	if ((*out = calloc(br->nsecrets, sizeof(**out))) == NULL)
		return -1;
	for (i = 0; i < br->nsecrets; i++)
		if (br->secrets[i] != NULL &&
		    strlen(br->secrets[i]) >= SECRET_MIN)
			(*out)[(*n)++] = br->secrets[i];
	return 0;
}

bool
br_holds_credential(const struct br *br, const char *s)
{
	const char **use;
	size_t n;
	int rc;

	/* In every form redaction finds in results (base64, %-encoded,
	 * escaped): a definition or an answer's text is the sandbox's to
	 * read as much as a result's strings are. */
	if (held_long(br, &use, &n) == -1)
		return true;	/* cannot tell */
	rc = n == 0 ? 0 : pol_holds_secret(use, n, s, strlen(s));
	free(use);
	return rc != 0;		/* also when it cannot tell */
}

/*
 * js: the text JavaScript prints of a real whose shortest digits and
 * exponent are those of e ("%.*e" of it, d.ddde+XX): fixed notation
 * whenever its decimal exponent n (the digits before the point) is in
 * (-6, 21], where C and Python use an exponent; empty otherwise (then JS
 * writes an exponent too, d.ddde+X, which holds no more digits in a row).
 */
static void
js_text(const char *e, char js[40])
{
	char digits[20];
	const char *m = e;
	size_t k = 0, o = 0;
	long n;

	js[0] = '\0';
	if (*m == '-')
		js[o++] = *m++;
	for (; *m != '\0' && *m != 'e' && k < sizeof(digits); m++)
		if (*m >= '0' && *m <= '9')
			digits[k++] = *m;
	if (*m != 'e' || k == 0)
		return;
	n = strtol(m + 1, NULL, 10) + 1;
	while (k > 1 && digits[k - 1] == '0')
		k--;
	if (n <= -6 || n > 21)
		return;
	if (n <= 0) {
		/* 0.000ddd: at most 7 + 17 characters. */
		js[o++] = '0';
		js[o++] = '.';
		for (; n < 0; n++)
			js[o++] = '0';
		memcpy(js + o, digits, k);
		o += k;
	} else if ((size_t)n >= k) {
		/* ddd000: at most 21 characters. */
		memcpy(js + o, digits, k);
		o += k;
		for (; (size_t)n > k; n--)
			js[o++] = '0';
	} else {
		memcpy(js + o, digits, (size_t)n);
		o += (size_t)n;
		js[o++] = '.';
		memcpy(js + o, digits + n, k - (size_t)n);
		o += k - (size_t)n;
	}
	js[o] = '\0';
}

/*
 * The texts a reader may make of number x: *sent, what jansson writes (a
 * new string), and shortest[0] and [1], for a real the fewest digits that
 * read back as the same double, as C and Python print it (3.14159,
 * 1.2345678e+20) and as JavaScript does (123456780000000000000; empty when
 * the same); both empty for an integer. All count: jansson writes 3.14159
 * as 3.1415899999999999, and a reader prints it back as 3.14159. -1
 * without memory.
 */
static int
number_texts(const json_t *x, char **sent, char shortest[2][40])
{
	char e[40];
	double v;
	int prec;

	shortest[0][0] = shortest[1][0] = '\0';
	if ((*sent = json_dumps(x, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL)
		return -1;
	if (json_is_real(x)) {
		v = json_real_value(x);
		for (prec = 1; prec <= 17; prec++) {
			snprintf(shortest[0], 40, "%.*g", prec, v);
			if (strtod(shortest[0], NULL) == v)
				break;
		}
		snprintf(e, sizeof(e), "%.*e", prec > 17 ? 16 : prec - 1, v);
		js_text(e, shortest[1]);
		if (strcmp(shortest[1], shortest[0]) == 0)
			shortest[1][0] = '\0';
	}
	return 0;
}

/* The walk of br_def_holds_credential (v is only read). */
static bool
def_walk(const struct br *br, json_t *v)
{
	const char *key;
	json_t *x;
	size_t i;
	char *sent, shortest[2][40];
	bool r;

	if (json_is_string(v))
		return br_holds_credential(br, json_string_value(v));
	if (json_is_number(v)) {
		if (number_texts(v, &sent, shortest) == -1)
			return true;
		r = br_holds_credential(br, sent) ||
		    br_holds_credential(br, shortest[0]) ||
		    br_holds_credential(br, shortest[1]);
		free(sent);
		return r;
	}
	if (json_is_object(v)) {
		json_object_foreach(v, key, x)
			if (br_holds_credential(br, key) || def_walk(br, x))
				return true;
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if (def_walk(br, x))
				return true;
	}
	return false;
}

bool
br_def_holds_credential(const struct br *br, const json_t *v)
{
	char *s;
	bool r;

	/* The serialized text, and every key, string and number as a reader
	 * decodes it: JSON writes a quote, a backslash or a control
	 * character of a credential escaped, where a search of the text
	 * alone would miss it. */
	if ((s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL)
		return true;
	r = br_holds_credential(br, s);
	free(s);
	/* jansson's iterators take no const; the walk only reads. */
	return r || def_walk(br, (json_t *)(uintptr_t)v);
}

/* The first sec (slen bytes) in [p, end), or NULL. Bounded by end rather
 * than by a NUL: each search looks at what it passes and no further. */
static const char *
find(const char *p, const char *end, const char *sec, size_t slen)
{
	while ((size_t)(end - p) >= slen &&
	    (p = memchr(p, sec[0], (size_t)(end - p) - slen + 1)) != NULL) {
		if (memcmp(p, sec, slen) == 0)
			return p;
		p++;
	}
	return NULL;
}

/*
 * cur with every occurrence of sec (slen bytes) replaced, left to right, in
 * one pass: an upstream controls how often its own credential appears, and
 * rebuilding the string once per occurrence would make a result of a few
 * megabytes hold the loop for minutes. The scan resumes after each
 * replacement (what the marker itself may form with its neighbours is the
 * caller's concern). *hits gets the count; NULL without memory.
 */
static char *
replace_all(const char *cur, const char *sec, size_t slen, size_t *hits)
{
	const char *p, *hit, *end;
	char *out, *o;
	size_t count = 0, len = strlen(cur), rl = sizeof(REDACTED) - 1;

	end = cur + len;
	for (p = cur; (hit = find(p, end, sec, slen)) != NULL; p = hit + slen)
		count++;
	*hits = count;
	/* count <= len / slen and slen >= SECRET_MIN: at most 1.5 len. */
	if ((out = malloc(len + count * (rl > slen ? rl - slen : 0) + 1)) ==
	    NULL)
		return NULL;
	for (o = out, p = cur; (hit = find(p, end, sec, slen)) != NULL;
	    p = hit + slen) {
		memcpy(o, p, (size_t)(hit - p));
		o += hit - p;
		memcpy(o, REDACTED, rl);
		o += rl;
	}
	strcpy(o, p);
	return out;
}

/* pol_redact_held over *cur with the held credentials long enough to
 * search (SECRET_MIN); *cur replaced by the redacted text. The count of
 * markers, or UINT_MAX with *cur freed (the caller withholds). */
static unsigned
redact_held(const struct br *br, char **cur)
{
	const char **use;
	char *next;
	size_t n;
	unsigned k = 0;
	int rc = -1;

	if (held_long(br, &use, &n) == 0)
		rc = n == 0 ? 1 : pol_redact_held(use, n, *cur, strlen(*cur),
		    &next, NULL, &k);
	free(use);
	if (rc == 1)
		return 0;
	if (rc == -1) {
		free(*cur);
		*cur = NULL;
		return UINT_MAX;
	}
	free(*cur);
	*cur = next;
	return k == UINT_MAX ? UINT_MAX - 1 : k;
}

int
br_redact_string(struct br *br, const struct pol_policy *p, const char *in,
    char **out)
{
	char *cur, *next;
	const char *sec;
	size_t i, slen, hits;
	unsigned k = 0;
	int n = 0, round;

	*out = NULL;
	if ((cur = strdup(in)) == NULL)
		return -1;
	for (i = 0; i < br->nsecrets; i++) {
		sec = br->secrets[i];
		if (sec == NULL || (slen = strlen(sec)) < SECRET_MIN)
			continue;
		/* Again while the text still holds it: only a secret that
		 * overlaps the marker itself can survive a pass, and one that
		 * keeps doing so withholds the text rather than loop. */
		for (round = 0; strstr(cur, sec) != NULL; round++) {
			if (round == 4 || (next = replace_all(cur, sec, slen,
			    &hits)) == NULL) {
				free(cur);
				return -1;
			}
			free(cur);
			cur = next;
			n += (int)(hits > 1000000 ? 1000000 : hits);
		}
	}
	/* Encoded, escaped, inside base64: the held credentials go in any
	 * form, whether or not the policy lists upstream_credentials (when
	 * it does, pol_redact below finds them). */
	if (!pol_redacts_held(p) && (k = redact_held(br, &cur)) == UINT_MAX)
		return -1;
	n += (int)(k > 1000000 ? 1000000 : k);
	k = 0;
	if (p != NULL && pol_redact_enabled(p)) {
		if (pol_redact(p, (const char *const *)br->secrets,
		    br->nsecrets, cur, strlen(cur), &next, NULL, &k) == -1) {
			free(cur);
			return -1;
		}
		free(cur);
		cur = next;
		n += (int)(k > 1000000 ? 1000000 : k);
	}
	if (n == 0) {
		free(cur);
		return 0;
	}
	*out = cur;
	return n;
}

int
br_redact_bytes(struct br *br, const struct pol_policy *p, const char *in,
    size_t len, char **out, size_t *outlen)
{
	const char **use;
	char *cur = NULL, *next;
	size_t n, clen = 0, nlen;
	unsigned k = 0, total = 0;
	int rc = 0;

	*out = NULL;
	if (held_long(br, &use, &n) == -1)
		return -1;
	if (n > 0 && !pol_redacts_held(p)) {
		rc = pol_redact_held(use, n, in, len, &cur, &clen, &k);
		total += k;
	}
	free(use);
	if (rc == -1)
		return -1;
	if (p != NULL && pol_redact_enabled(p)) {
		k = 0;
		rc = pol_redact(p, (const char *const *)br->secrets,
		    br->nsecrets, cur != NULL ? cur : in, cur != NULL ? clen :
		    len, &next, &nlen, &k);
		free(cur);
		if (rc == -1)
			return -1;
		cur = next;
		clen = nlen;
		total += k;
	}
	if (total == 0) {
		free(cur);
		return 0;
	}
	*out = cur;
	*outlen = clen;
	return total > 1000000 ? 1000000 : (int)total;
}

/* The subschema for member key / array index of schema, NULL when it is
 * not plainly there. */
static const json_t *
sub_schema(const json_t *schema, const char *key, size_t index)
{
	const json_t *s, *p;

	if (schema == NULL)
		return NULL;
	if (key != NULL) {
		p = json_object_get(schema, "properties");
		if ((s = json_object_get(p, key)) != NULL)
			return s;
		s = json_object_get(schema, "additionalProperties");
		return json_is_object(s) ? s : NULL;
	}
	p = json_object_get(schema, "prefixItems");
	if (json_is_array(p) && index < json_array_size(p))
		return json_array_get(p, index);
	s = json_object_get(schema, "items");
	return json_is_object(s) ? s : NULL;
}

/* Would "[REDACTED]" inside a string still satisfy schema? Only when the
 * schema is plain: a type and annotations, nothing that looks at the text
 * and no combinators we would have to evaluate. */
static bool
schema_plain_string(const json_t *schema)
{
	static const char *const bad[] = { "pattern", "format", "enum",
	    "const", "minLength", "maxLength", "contentEncoding",
	    "contentMediaType", "$ref", "$dynamicRef", "anyOf", "oneOf",
	    "allOf", "not", "if", NULL };
	size_t i;

	if (!json_is_object(schema))
		return false;
	for (i = 0; bad[i] != NULL; i++)
		if (json_object_get(schema, bad[i]) != NULL)
			return false;
	return true;
}

/* Does s hold anything redaction would replace? 0 no, 1 yes, -1 failure
 * (both of the latter withhold the result). */
static int
holds_secret(struct br *br, const struct pol_policy *p, const char *s)
{
	char *red;
	int k;

	k = br_redact_string(br, p, s, &red);
	free(red);
	return k == 0 ? 0 : k > 0 ? 1 : -1;
}

/* A content member that is not text to rewrite: binary payloads and tags. */
static bool
opaque_key(const char *key)
{
	return strcmp(key, "data") == 0 || strcmp(key, "blob") == 0 ||
	    strcmp(key, "type") == 0 || strcmp(key, "mimeType") == 0;
}

/* How redact_tree treats what it walks. */
enum walk {
	W_CONTENT = 0,	/* skip binary payloads and type tags */
	W_SCHEMA,	/* every string; check against the schema */
	W_FREE,		/* every string; no schema to keep */
};

/*
 * Scalar x (a string or a number) redacted: *rep a new value to put in its
 * place, or NULL when nothing matched; the count, or -1 (withhold). A
 * number is redacted through its texts (number_texts) and becomes the
 * string of the redacted text: it must not reach the sandbox, even if
 * that changes its type. A replacement that cannot be built (no memory,
 * or a credential ending inside a UTF-8 sequence) fails: keeping the old
 * value would pass the credential on.
 */
static int
redact_scalar(struct br *br, const struct pol_policy *p, const json_t *x,
    json_t **rep)
{
	char *sent, shortest[2][40], *red = NULL;
	int k, i;

	*rep = NULL;
	if (json_is_string(x))
		k = br_redact_string(br, p, json_string_value(x), &red);
	else {
		if (number_texts(x, &sent, shortest) == -1)
			return -1;
		k = br_redact_string(br, p, sent, &red);
		for (i = 0; i < 2 && k == 0 && shortest[i][0] != '\0'; i++)
			k = br_redact_string(br, p, shortest[i], &red);
		free(sent);
	}
	if (k > 0 && (red == NULL || (*rep = json_string(red)) == NULL))
		k = -1;
	free(red);
	return k;
}

/* Would the replacement of x under schema (the subschema where x sits,
 * NULL when unknown) still satisfy it? A string only under a plain string
 * schema; a number turned string, never. */
static bool
replacement_valid(const json_t *x, const json_t *schema)
{
	return json_is_string(x) && schema_plain_string(schema);
}

/* Redact every string and number under v; in W_SCHEMA mode schema (may
 * be NULL) follows along and *unsafe records a replacement it may reject.
 * Binary payloads (image/audio data, resource blobs) are not text: left
 * alone. */
static int
redact_tree(struct br *br, const struct pol_policy *p, json_t *v,
    const json_t *schema, enum walk mode, bool *unsafe)
{
	bool track = mode == W_SCHEMA;
	const char *key;
	json_t *x, *rep;
	size_t i;
	int n = 0, k;

	if (json_is_object(v)) {
		json_object_foreach(v, key, x) {
			/* A key cannot be rewritten: a secret in one
			 * withholds the result. */
			if (holds_secret(br, p, key) != 0)
				return -1;
			if (mode == W_CONTENT && opaque_key(key) &&
			    json_is_string(x)) {
				if (holds_secret(br, p,
				    json_string_value(x)) != 0)
					return -1;
				continue;
			}
			if (json_is_string(x) || json_is_number(x)) {
				if ((k = redact_scalar(br, p, x, &rep)) == -1)
					return -1;
				if (rep != NULL) {
					if (track && !replacement_valid(x,
					    sub_schema(schema, key, 0)))
						*unsafe = true;
					/* Frees x. */
					if (json_object_set_new(v, key, rep) ==
					    -1)
						return -1;
				}
				n += k;
			} else {
				k = redact_tree(br, p, x, track ?
				    sub_schema(schema, key, 0) : NULL, mode,
				    unsafe);
				if (k == -1)
					return -1;
				n += k;
			}
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x) {
			if (json_is_string(x) || json_is_number(x)) {
				if ((k = redact_scalar(br, p, x, &rep)) == -1)
					return -1;
				if (rep != NULL) {
					if (track && !replacement_valid(x,
					    sub_schema(schema, NULL, i)))
						*unsafe = true;
					if (json_array_set_new(v, i, rep) == -1)
						return -1;
				}
				n += k;
			} else {
				k = redact_tree(br, p, x, track ?
				    sub_schema(schema, NULL, i) : NULL, mode,
				    unsafe);
				if (k == -1)
					return -1;
				n += k;
			}
		}
	}
	return n;
}

/*
 * A held credential can stand in the text jansson writes of a result
 * whose decoded strings do not hold it: an escape's last hex digits
 * followed by the rest ("\u0004" then "8151623" writes "48151623"). The
 * answer is that text, which a sandbox may read as it is: it is checked
 * as written, and withheld (false) when it spells one or cannot be
 * written. *text, if given, gets it (caller frees).
 */
static bool
checked_text(const struct br *br, const json_t *result, char **text)
{
	char *t;

	if ((t = json_dumps(result, JSON_COMPACT)) == NULL)
		return false;
	if (br_holds_credential(br, t)) {
		free(t);
		return false;
	}
	if (text != NULL)
		*text = t;
	else
		free(t);
	return true;
}

int
br_result_process(struct br *br, const struct pol_policy *p, json_t *result,
    const json_t *tool, char **text)
{
	const json_t *schema = json_object_get(tool, "outputSchema");
	json_t *sc = json_object_get(result, "structuredContent");
	const char *key;
	json_t *x, *rep;
	int n = 0, k;
	bool unsafe = false, dummy = false;

	if (text != NULL)
		*text = NULL;
	json_object_foreach(result, key, x) {
		if (holds_secret(br, p, key) != 0)
			return -1;
		if (strcmp(key, "structuredContent") == 0)
			continue;
		if (json_is_string(x) || json_is_number(x)) {
			if ((k = redact_scalar(br, p, x, &rep)) == -1)
				return -1;
			if (rep != NULL &&
			    json_object_set_new(result, key, rep) == -1)
				return -1;
		} else if ((k = redact_tree(br, p, x, NULL, W_CONTENT,
		    &dummy)) == -1)
			return -1;
		n += k;
	}
	if (sc != NULL) {
		/* structuredContent must be an object; anything else is
		 * dropped rather than repaired. */
		if (!json_is_object(sc)) {
			k = redact_tree(br, p, sc, NULL, W_FREE, &dummy);
			unsafe = true;
		} else
			k = redact_tree(br, p, sc, schema, schema != NULL ?
			    W_SCHEMA : W_FREE, &unsafe);
		if (k == -1)
			return -1;
		n += k;
		if (unsafe) {
			json_object_del(result, "structuredContent");
			if (schema != NULL)
				json_object_set_new(result, "isError",
				    json_true());
		}
	}
	return checked_text(br, result, text) ? n : -1;
}
