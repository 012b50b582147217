/*
 * cli_daemon.c: `sluice status` and `sluice reload`, the commands about the
 * daemon itself. They print for humans by default; `status --json` prints
 * the daemon's own JSON so scripts need no second format.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "gateway/cli/cli.h"

/* The daemon's error reply: {"error": CODE, "message": TEXT}. */
static void
print_error_reply(const char *what, long status, json_t *reply)
{
	const char *code = json_string_value(json_object_get(reply, "error"));
	const char *msg = json_string_value(json_object_get(reply, "message"));

	fprintf(stderr, "sluice: %s: %s (%ld): %s\n", what,
	    code != NULL ? code : "error", status, msg != NULL ? msg : "");
}

static void
print_duration(long long s)
{
	if (s >= 86400)
		printf("%lldd%lldh", s / 86400, s % 86400 / 3600);
	else if (s >= 3600)
		printf("%lldh%lldm", s / 3600, s % 3600 / 60);
	else if (s >= 60)
		printf("%lldm%llds", s / 60, s % 60);
	else
		printf("%llds", s);
}

static void
print_policies(json_t *pols)
{
	size_t i;
	json_t *p;

	json_array_foreach(pols, i, p) {
		printf("  %-24s %s\n",
		    json_string_value(json_object_get(p, "name")),
		    json_string_value(json_object_get(p, "digest")));
	}
}

static void
print_errors(json_t *errs)
{
	size_t i;
	json_t *e;

	json_array_foreach(errs, i, e)
		fprintf(stderr, "%s\n", json_string_value(e));
}

/* The fleet's shared store, when the daemon has one: whether the witness
 * reaches it and how far behind it is, which an operator must see. */
static void
print_fleet(const json_t *f)
{
	const json_t *w = json_object_get(f, "witness");
	const char *e;

	if (!json_is_object(f))
		return;
	printf("fleet: host %s, database %s\n",
	    json_string_value(json_object_get(f, "host")),
	    json_is_true(json_object_get(f, "up")) ? "up" : "DOWN");
	printf("  witness: %lld checkpoints pending, witnessed to size "
	    "%lld of %lld, %lld failures, %lld reconnects\n",
	    json_integer_value(json_object_get(w, "pending")),
	    json_integer_value(json_object_get(w, "witnessed")),
	    json_integer_value(json_object_get(w, "local")),
	    json_integer_value(json_object_get(w, "failures")),
	    json_integer_value(json_object_get(w, "reconnects")));
	if (json_integer_value(json_object_get(w, "conflicts")) > 0)
		printf("  witness: %lld sizes held with another root: this "
		    "log was rewritten\n",
		    json_integer_value(json_object_get(w, "conflicts")));
	if (!json_is_true(json_object_get(f, "up")) &&
	    (e = json_string_value(json_object_get(w, "last_error"))) != NULL)
		printf("  last error: %s\n", e);
}

/* What the bridge shares with the fleet: its budgets and its approval
 * queue, each with whether the database answers it now. */
static void
print_fleet_mcp(const json_t *mcp)
{
	const json_t *b = json_object_get(mcp, "shared_budgets");
	const json_t *q = json_object_get(mcp, "approval_queue");

	if (json_is_object(b))
		printf("  shared budgets: database %s, %lld reserved, %lld "
		    "exhausted, %lld unavailable, %lld failures, %lld "
		    "reconnects\n",
		    json_is_true(json_object_get(b, "up")) ? "up" : "DOWN",
		    json_integer_value(json_object_get(b, "reserved")),
		    json_integer_value(json_object_get(b, "exhausted")),
		    json_integer_value(json_object_get(b, "unavailable")),
		    json_integer_value(json_object_get(b, "failures")),
		    json_integer_value(json_object_get(b, "reconnects")));
	if (json_is_object(q))
		printf("  approval queue: database %s, %lld posted, %lld "
		    "decided here, %lld delivered here, %lld failures, %lld "
		    "reconnects\n",
		    json_is_true(json_object_get(q, "up")) ? "up" : "DOWN",
		    json_integer_value(json_object_get(q, "posted")),
		    json_integer_value(json_object_get(q, "decided_here")),
		    json_integer_value(json_object_get(q, "delivered")),
		    json_integer_value(json_object_get(q, "failures")),
		    json_integer_value(json_object_get(q, "reconnects")));
}

int
cli_status(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json",	no_argument,	NULL, 'j' },
		{ NULL,		0,		NULL, 0 }
	};
	int ch, as_json = 0;
	long status = 0;
	json_t *r, *le;
	char err[512];

	optind = 0;
	while ((ch = getopt_long(argc, argv, "+j", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			as_json = 1;
			break;
		default:
			return cli_usage("status");
		}
	}
	if (optind != argc)
		return cli_usage("status");
	if (cli_request("GET", "/v1/status", NULL, &status, &r, NULL, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "sluice: %s\n", err);
		return 1;
	}
	if (status != 200) {
		print_error_reply("status", status, r);
		json_decref(r);
		return 1;
	}
	if (as_json) {
		json_dumpf(r, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(r);
		return 0;
	}
	printf("sluiced %s, pid %lld, up ",
	    json_string_value(json_object_get(r, "version")),
	    json_integer_value(json_object_get(r, "pid")));
	print_duration(json_integer_value(json_object_get(r, "uptime_s")));
	printf("\nsocket: %s\n", cli_socket());
	printf("policies: %zu from %s\n",
	    json_array_size(json_object_get(r, "policies")),
	    json_string_value(json_object_get(r, "policy_dir")));
	print_policies(json_object_get(r, "policies"));
	printf("reloads: %lld ok, %lld failed\n",
	    json_integer_value(json_object_get(r, "reloads_ok")),
	    json_integer_value(json_object_get(r, "reload_failures")));
	le = json_object_get(r, "last_reload_error");
	if (json_is_array(le)) {
		size_t i;
		json_t *e;

		printf("last reload failed; the policies above stay in "
		    "force:\n");
		json_array_foreach(le, i, e)
			printf("  %s\n", json_string_value(e));
	}
	printf("sandboxes: %lld\n",
	    json_integer_value(json_object_get(r, "sandboxes")));
	print_fleet(json_object_get(r, "fleet"));
	if (json_is_object(json_object_get(r, "fleet")))
		print_fleet_mcp(json_object_get(r, "mcp"));
	json_decref(r);
	return 0;
}

int
cli_reload(int argc, char **argv)
{
	long status = 0;
	json_t *r;
	char err[512];

	(void)argv;
	if (argc != 1)
		return cli_usage("reload");
	if (cli_request("POST", "/v1/reload", NULL, &status, &r, NULL, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "sluice: %s\n", err);
		return 1;
	}
	if (status == 200) {
		json_int_t nu = json_integer_value(json_object_get(r,
		    "sandboxes_not_updated"));

		printf("reloaded: %zu policies\n",
		    json_array_size(json_object_get(r, "policies")));
		print_policies(json_object_get(r, "policies"));
		json_decref(r);
		if (nu > 0) {
			fprintf(stderr, "sluice: %lld sandboxes stay on their "
			    "old rules (their update failed: see the "
			    "sandbox.reapply_failed findings); the next reload "
			    "tries again\n", (long long)nu);
			return 1;
		}
		return 0;
	}
	if (status == 422) {
		print_errors(json_object_get(r, "errors"));
		fprintf(stderr, "sluice: reload failed; the previous %zu "
		    "policies stay in force\n",
		    json_array_size(json_object_get(r, "policies")));
	} else
		print_error_reply("reload", status, r);
	json_decref(r);
	return 1;
}
