/*
 * fuzz_policy_config: arbitrary bytes as the daemon config (policy/config.c
 * over policy/yaml.c), the file an operator edits and every host of a fleet
 * carries.
 *
 * Beyond "does not crash", every input is held to what operators rely on:
 *   - the loader returns a config and no error, or NULL and at least one
 *     error, each "fuzz.yaml:LINE:COL: text" on one line;
 *   - the same bytes give the same outcome and the same messages;
 *   - a loaded config has every default filled (directories, the audit
 *     database, the privsep users) and at least one DNS upstream;
 *   - a loaded fleet section never carries a password in its conninfo, in
 *     any spelling libpq takes (parsed again here by libpq itself), its
 *     deadline is within bounds, and a password given anyway is in no
 *     error message.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "policy/policy.h"
#include "tests/fuzz/fuzz.h"

#define NAME	"fuzz.yaml"

static void
check_fleet(const struct pol_config *c)
{
	PQconninfoOption *opts, *o;

	if (c->fleet_conninfo == NULL) {
		REQUIRE(c->fleet_host == NULL);
		REQUIRE(c->fleet_password_file == NULL);
		return;
	}
	REQUIRE(c->fleet_conninfo[0] != '\0');
	REQUIRE(c->fleet_deadline_ms >= 1 &&
	    c->fleet_deadline_ms <= POL_FLEET_DEADLINE_MAX);
	REQUIRE(c->fleet_host == NULL || (strlen(c->fleet_host) >= 1 &&
	    strlen(c->fleet_host) <= POL_FLEET_HOST_MAX));
	REQUIRE(c->fleet_password_file == NULL ||
	    c->fleet_password_file[0] == '/');
	REQUIRE((opts = PQconninfoParse(c->fleet_conninfo, NULL)) != NULL);
	for (o = opts; o->keyword != NULL; o++)
		REQUIRE(strcmp(o->keyword, "password") != 0 || o->val == NULL);
	PQconninfoFree(opts);
}

/* The password a refused conninfo held: no message about the conninfo
 * may repeat it (a config's errors reach terminals and logs). Other keys
 * quote their own bad values, which may hold any text. */
static void
check_no_echo(const char *text, const struct pol_errors *e)
{
	const char *p = strstr(text, "password=");
	char pw[64];
	size_t i, n;

	if (p == NULL)
		return;
	p += strlen("password=");
	for (n = 0; n + 1 < sizeof(pw) && p[n] != '\0' && p[n] != ' ' &&
	    p[n] != '"' && p[n] != '\n' && p[n] != '&'; n++)
		pw[n] = p[n];
	pw[n] = '\0';
	if (n < 8)	/* short ones occur in any message by chance */
		return;
	for (i = 0; pol_errors_get(e, i) != NULL; i++)
		if (strstr(pol_errors_get(e, i), "fleet.postgresql") != NULL)
			REQUIRE(strstr(pol_errors_get(e, i), pw) == NULL);
}

static size_t
outcome(const char *text, size_t len, char **msgs)
{
	struct pol_errors *e = pol_errors_new(64);
	struct pol_config *c;
	size_t i, n, total = 0;
	FILE *f;
	char *buf = NULL;
	size_t blen = 0;

	REQUIRE(e != NULL);
	c = pol_config_load_buf(NAME, text, len, e);
	n = pol_errors_count(e);
	REQUIRE((c != NULL) == (n == 0));
	REQUIRE((f = open_memstream(&buf, &blen)) != NULL);
	for (i = 0; pol_errors_get(e, i) != NULL; i++) {
		fuzz_check_message(NAME, pol_errors_get(e, i));
		fprintf(f, "%s\n", pol_errors_get(e, i));
	}
	fclose(f);
	check_no_echo(text, e);
	if (c != NULL) {
		REQUIRE(c->state_dir != NULL && c->run_dir != NULL &&
		    c->socket_path != NULL && c->policy_dir != NULL &&
		    c->audit_db != NULL && c->audit_origin != NULL &&
		    c->privsep_dns_user != NULL &&
		    c->privsep_bridge_user != NULL);
		REQUIRE(c->ndns_upstreams >= 1);
		check_fleet(c);
		total = 1;
		pol_config_free(c);
	}
	pol_errors_free(e);
	*msgs = buf;
	return total + n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text, *m1, *m2;
	size_t a, b;

	if (size > 64 * 1024)
		return 0;
	if ((text = malloc(size + 1)) == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	a = outcome(text, size, &m1);
	b = outcome(text, size, &m2);
	REQUIRE(a == b);
	REQUIRE(strcmp(m1, m2) == 0);
	free(m1);
	free(m2);
	free(text);
	return 0;
}
