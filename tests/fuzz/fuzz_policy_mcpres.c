/*
 * fuzz_policy_mcpres: hostile resource URIs and prompt arguments against
 * the pure decisions of policy/mcpres.c and decide.c, as a sandbox sends
 * them in resources/read, resources/subscribe and prompts/get.
 *
 * The first line of the input is a URI, the rest a prompt's arguments (any
 * bytes). Beyond "does not crash", each input is held to what a policy
 * author relies on:
 *   - a URI with a "." or ".." path segment, %2e or %2f (either case), a
 *     control character, blank, backslash or brace is refused "bad_uri"
 *     before any rule is read, whatever its scheme;
 *   - a URI under the denied tree is never allowed, whatever case its
 *     scheme is written in;
 *   - a read is allowed or asked only when the URI is shown in listings,
 *     and decided the same way twice (no hidden state);
 *   - a prompt's decision has a rule and a message, and an allow passes
 *     the declared constraint (a topic of [a-z ]{0,20}, nothing else).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy/policy.h"
#include "tests/fuzz/fuzz.h"

static const char text[] =
"version: 1\n"
"name: fz\n"
"mcp:\n"
"  resources:\n"
"    - {server: s, uri: \"note://private/*\", decision: deny}\n"
"    - {server: s, uri: \"note://*\", decision: allow}\n"
"    - {server: s, uri: \"file:///srv/*\", schemes: [file], decision: ask}\n"
"  prompts:\n"
"    - prompt: s/p\n"
"      decision: allow\n"
"      args:\n"
"        topic: {type: string, max_length: 20, pattern: \"^[a-z ]*$\"}\n";

static bool
tricky(const char *u)
{
	const char *p, *e, *path;
	size_t i;

	for (i = 0; u[i]; i++) {
		unsigned char c = (unsigned char)u[i];

		if (c <= 0x20 || c == 0x7f || c == '\\' || c == '{' || c == '}')
			return true;
		if (c == '%' && u[i + 1] == '2' && u[i + 2] != '\0' &&
		    strchr("eEfF", u[i + 2]) != NULL)
			return true;
	}
	if ((path = strchr(u, ':')) == NULL)
		return false;
	/* A "." or ".." segment of the path (up to a query or fragment). */
	for (p = path + 1; *p != '\0' && *p != '?' && *p != '#'; p = e) {
		e = p + strcspn(p, "/?#");
		if ((e - p == 1 && p[0] == '.') ||
		    (e - p == 2 && p[0] == '.' && p[1] == '.'))
			return true;
		if (*e == '/')
			e++;
	}
	return false;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pol_policy *p;
	struct pol_resource_q q;
	struct pol_tool_decision d, d2;
	struct pol_tool_q tq;
	enum pol_reason why;
	char *buf, *nl, *args;
	json_t *a;
	bool shown;

	if (p == NULL) {
		struct pol_errors *e = pol_errors_new(4);

		p = pol_policy_load_buf("fz.yaml", text, sizeof(text) - 1,
		    NULL, e);
		pol_errors_free(e);
		REQUIRE(p != NULL);
	}
	if ((buf = malloc(size + 1)) == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	args = "";
	if ((nl = strchr(buf, '\n')) != NULL) {
		*nl = '\0';
		args = nl + 1;
	}
	memset(&q, 0, sizeof(q));
	q.server = "s";
	q.uri = buf;
	pol_resource_decide(p, &q, &d);
	REQUIRE(d.d.rule != NULL && (d.message[0] != '\0' ||
	    d.d.verdict == POL_ALLOW));
	pol_resource_decide(p, &q, &d2);
	REQUIRE(d.d.verdict == d2.d.verdict && d.d.reason == d2.d.reason);
	/* The decider reads the URI as a C string, as this does. */
	if (tricky(buf))
		REQUIRE(d.d.verdict == POL_DENY &&
		    d.d.reason == POL_REASON_BAD_URI);
	/* Only the scheme is case-insensitive. */
	if (strncasecmp(buf, "note:", 5) == 0 &&
	    strncmp(buf + 5, "//private/", 10) == 0)
		REQUIRE(d.d.verdict == POL_DENY);
	shown = pol_resource_visible(p, "s", buf, false, &why);
	REQUIRE(shown == (d.d.verdict == POL_ALLOW ||
	    d.d.verdict == POL_ASK));
	(void)pol_resource_visible(p, "s", buf, true, &why);

	memset(&tq, 0, sizeof(tq));
	tq.server = "s";
	tq.tool = "p";
	tq.args_json = args;
	pol_prompt_decide(p, &tq, &d);
	REQUIRE(d.d.rule != NULL);
	if (d.d.verdict == POL_ALLOW) {
		const char *key, *s;
		json_t *v;

		a = json_loads(args, JSON_REJECT_DUPLICATES, NULL);
		REQUIRE(json_is_object(a));
		json_object_foreach(a, key, v) {
			REQUIRE(strcmp(key, "topic") == 0 && json_is_string(v));
			s = json_string_value(v);
			REQUIRE(strspn(s, "abcdefghijklmnopqrstuvwxyz ") ==
			    json_string_length(v));
			REQUIRE(json_string_length(v) <= 20);
		}
		json_decref(a);
	} else
		REQUIRE(d.message[0] != '\0');
	free(buf);
	return 0;
}
