/*
 * cli_mcp.c: the CLI side of the capability bridge. `sluice approvals`
 * shows the tool calls waiting for a person (with the arguments the sandbox
 * sent, since that is what the person approves), `sluice approve` and
 * `sluice deny` answer one, and `sluice mcp pins|accept` serve the security
 * team's review of upstream tool definitions. All of them are thin clients
 * of the control API (gateway/brwire.c). Who approves is not ours to say:
 * the daemon takes the caller's uid from the control socket (SO_PEERCRED).
 * Through sudo, the user behind it is sent as a note, which the record keeps
 * beside the identity, never instead of it.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/cli/cli.h"

#define CLI_ARGS_SHOWN	120	/* argument text shown per row */

static void
print_error_reply(const char *what, long status, json_t *reply)
{
	const char *code = json_string_value(json_object_get(reply, "error"));
	const char *msg = json_string_value(json_object_get(reply, "message"));

	fprintf(stderr, "sluice: %s: %s (%ld): %s\n", what,
	    code != NULL ? code : "error", status, msg != NULL ? msg : "");
}

/* Names that go into a URL path unescaped: a conservative alphabet, so
 * that nothing the user types can change which endpoint is asked. */
static int
path_safe(const char *s, size_t max)
{
	size_t n;

	if (s[0] == '\0' || s[0] == '.')
		return 0;
	for (n = 0; s[n] != '\0'; n++) {
		if (n >= max)
			return 0;
		if (!((s[n] >= 'a' && s[n] <= 'z') ||
		    (s[n] >= 'A' && s[n] <= 'Z') ||
		    (s[n] >= '0' && s[n] <= '9') ||
		    s[n] == '-' || s[n] == '_' || s[n] == '.'))
			return 0;
	}
	return 1;
}

/* Arguments as one line: the compact JSON, with control characters shown
 * as '?' (a hostile sandbox must not drive the approver's terminal), cut
 * at max bytes with "..." appended. Caller frees. Non-ASCII is escaped
 * (\uXXXX): raw, U+009B is a CSI to terminals that take C1 controls in
 * UTF-8, and bidi overrides (U+202E) make the row read other than it is. */
static char *
args_line(json_t *args, size_t max)
{
	char *s, *p;

	if (args == NULL)
		return strdup("-");
	if ((s = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY |
	    JSON_SORT_KEYS | JSON_ENSURE_ASCII)) == NULL)
		return strdup("?");
	for (p = s; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (strlen(s) > max && max > 3)
		memcpy(s + max - 3, "...", 4);
	return s;
}

/* A JSON string member for a table cell: printable or "-". */
static const char *
cell(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	const char *p;

	if (s == NULL || s[0] == '\0')
		return "-";
	for (p = s; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return "?";
	return s;
}

int
cli_approvals(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json",	no_argument,	NULL, 'j' },
		{ NULL,		0,		NULL, 0 }
	};
	int ch, json = 0, wid = 2, wsb = 7, wsub = 7, wtool = 4, whost = 0;
	json_t *r = NULL, *e;
	char err[512], tool[160];
	long status;
	size_t i;
	time_t now = time(NULL);

	while ((ch = getopt_long(argc, argv, "j", longopts, NULL)) != -1) {
		if (ch != 'j')
			return cli_usage("approvals");
		json = 1;
	}
	if (optind != argc)
		return cli_usage("approvals");
	if (cli_request("GET", "/v1/approvals", NULL, &status, &r, NULL, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "sluice: approvals: %s\n", err);
		return 1;
	}
	if (status != 200 || !json_is_array(r)) {
		print_error_reply("approvals", status, r);
		json_decref(r);
		return 1;
	}
	if (json) {
		if (json_dumpf(r, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) ==
		    -1) {
			json_decref(r);
			return 1;
		}
		putchar('\n');
		json_decref(r);
		return 0;
	}
	if (json_array_size(r) == 0) {
		printf("no pending approvals\n");
		json_decref(r);
		return 0;
	}
	/* Two passes: column widths first, so the table lines up. */
	json_array_foreach(r, i, e) {
		int n;

		if ((n = (int)strlen(cell(e, "id"))) > wid)
			wid = n;
		/* A fleet names the host that holds each call. */
		if (json_object_get(e, "host") != NULL &&
		    (n = (int)strlen(cell(e, "host"))) > whost)
			whost = n < 4 ? 4 : n;
		if ((n = (int)strlen(cell(e, "sandbox"))) > wsb)
			wsb = n;
		if ((n = (int)strlen(cell(e, "subject"))) > wsub)
			wsub = n;
		n = snprintf(tool, sizeof(tool), "%s/%s", cell(e, "server"),
		    cell(e, "tool"));
		if (n > wtool)
			wtool = n < (int)sizeof(tool) ? n : (int)sizeof(tool) - 1;
	}
	if (whost > 0)
		printf("%-*s  ", whost, "HOST");
	printf("%-*s  %-*s  %-*s  %-*s  %7s  %s\n", wid, "ID", wsb, "SANDBOX",
	    wsub, "SUBJECT", wtool, "TOOL", "EXPIRES", "ARGUMENTS");
	json_array_foreach(r, i, e) {
		json_int_t exp = json_integer_value(json_object_get(e,
		    "expires_ms"));
		long long left = exp / 1000 - (long long)now;
		char expires[32], *a;

		snprintf(tool, sizeof(tool), "%s/%s", cell(e, "server"),
		    cell(e, "tool"));
		snprintf(expires, sizeof(expires), "%llds",
		    left > 0 ? left : 0);
		a = args_line(json_object_get(e, "arguments"), CLI_ARGS_SHOWN);
		if (whost > 0)
			printf("%-*s  ", whost, cell(e, "host"));
		printf("%-*s  %-*s  %-*s  %-*s  %7s  %s\n", wid, cell(e, "id"),
		    wsb, cell(e, "sandbox"), wsub, cell(e, "subject"), wtool,
		    tool, expires, a != NULL ? a : "?");
		free(a);
	}
	json_decref(r);
	return 0;
}

/* The user behind sudo, for the record's note (the daemon knows the uid
 * that asks; sudo hides the person), or NULL. */
static const char *
approver_note(void)
{
	const char *u = getenv("SUDO_USER");

	return u != NULL && u[0] != '\0' ? u : NULL;
}

int
cli_approve(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "reason",	required_argument,	NULL, 'r' },
		{ NULL,		0,			NULL, 0 }
	};
	int approve = strcmp(argv[0], "approve") == 0;
	const char *reason = NULL, *id;
	json_t *body, *r = NULL;
	char err[512], path[256];
	long status;
	int ch;

	while ((ch = getopt_long(argc, argv, "r:", longopts, NULL)) != -1) {
		if (ch != 'r')
			goto usage;
		reason = optarg;
	}
	if (optind != argc - 1)
		goto usage;
	id = argv[optind];
	if (!path_safe(id, 128)) {
		fprintf(stderr, "sluice: %s: bad approval id '%s'\n", argv[0],
		    id);
		return 2;
	}
	snprintf(path, sizeof(path), "/v1/approvals/%s", id);
	body = json_pack("{s:s}", "decision", approve ? "approve" : "deny");
	if (body != NULL && ((reason != NULL && json_object_set_new(body,
	    "reason", json_string(reason)) == -1) || (approver_note() != NULL &&
	    json_object_set_new(body, "note", json_string(approver_note())) ==
	    -1))) {
		json_decref(body);
		body = NULL;
	}
	if (body == NULL) {
		fprintf(stderr, "sluice: %s: %s\n", argv[0], strerror(ENOMEM));
		return 1;
	}
	if (cli_request("POST", path, body, &status, &r, NULL, err,
	    sizeof(err)) == -1) {
		json_decref(body);
		fprintf(stderr, "sluice: %s: %s\n", argv[0], err);
		return 1;
	}
	json_decref(body);
	if (status != 200) {
		print_error_reply(argv[0], status, r);
		json_decref(r);
		return 1;
	}
	printf("%s %s\n", id, approve ? "approved" : "denied");
	json_decref(r);
	return 0;
usage:
	return cli_usage(argv[0]);
}

static int
usage_mcp(void)
{
	return cli_usage("mcp");
}

int
cli_mcp(int argc, char **argv)
{
	json_t *r = NULL;
	char err[512], path[512], *text = NULL;
	long status;

	if (argc == 3 && strcmp(argv[1], "pins") == 0) {
		if (!path_safe(argv[2], 64))
			return usage_mcp();
		snprintf(path, sizeof(path), "/v1/mcp/%s/pins", argv[2]);
		if (cli_request("GET", path, NULL, &status, &r, &text, err,
		    sizeof(err)) == -1) {
			fprintf(stderr, "sluice: mcp pins: %s\n", err);
			return 1;
		}
		if (status != 200 || text == NULL) {
			print_error_reply("mcp pins", status, r);
			json_decref(r);
			free(text);
			return 1;
		}
		fputs(text, stdout);
		free(text);
		json_decref(r);
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "accept") == 0) {
		if (!path_safe(argv[2], 64) || !path_safe(argv[3], 128))
			return usage_mcp();
		snprintf(path, sizeof(path), "/v1/mcp/%s/tools/%s/accept",
		    argv[2], argv[3]);
		if (cli_request("POST", path, NULL, &status, &r, NULL, err,
		    sizeof(err)) == -1) {
			fprintf(stderr, "sluice: mcp accept: %s\n", err);
			return 1;
		}
		if (status != 200) {
			print_error_reply("mcp accept", status, r);
			json_decref(r);
			return 1;
		}
		printf("%s/%s: current definition accepted\n", argv[2],
		    argv[3]);
		json_decref(r);
		return 0;
	}
	return usage_mcp();
}
