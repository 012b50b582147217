/*
 * fuzz_lognote: an upstream's notifications/message as the bridge rebuilds
 * it (gateway/bridge/logging.c, br_logging_note) and redacts it for a
 * session (br_logging_redact). The upstream is not trusted: its message
 * reaches sandboxes, so beyond "does not crash" each accepted one holds:
 *   - the rebuilt params have only level, data and (a string) logger, and
 *     the level is one of the eight names, the one reported;
 *   - data's JSON text is at most 16 KiB, a logger at most 128 bytes;
 *   - after redaction the note's text never holds the held credential.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/bridge/br_int.h"
#include "tests/fuzz/fuzz.h"

static char held[] = "sk-fuzz-held-0123456789";

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *secrets[] = { held };
	struct br br;
	json_t *msg, *note, *p, *lg;
	json_error_t jerr;
	const char *key;
	char *t;
	int level = -2;

	msg = json_loadb((const char *)data, size, JSON_DECODE_ANY, &jerr);
	if (msg == NULL)
		return 0;
	note = br_logging_note(msg, &level);
	json_decref(msg);
	if (note == NULL)
		return 0;
	p = json_object_get(note, "params");
	REQUIRE(json_is_object(p));
	REQUIRE(level >= 0 && level <= 7);
	REQUIRE(br_logging_level(json_object_get(p, "level")) == level);
	REQUIRE(json_object_get(p, "data") != NULL);
	json_object_foreach(p, key, lg)
		REQUIRE(strcmp(key, "level") == 0 || strcmp(key, "data") == 0 ||
		    strcmp(key, "logger") == 0);
	lg = json_object_get(p, "logger");
	REQUIRE(lg == NULL || (json_is_string(lg) &&
	    json_string_length(lg) <= 128));
	t = json_dumps(json_object_get(p, "data"), JSON_COMPACT |
	    JSON_ENCODE_ANY);
	REQUIRE(t != NULL && strlen(t) <= 16 * 1024);
	free(t);
	memset(&br, 0, sizeof(br));
	TAILQ_INIT(&br.sessions);
	br.secrets = secrets;
	br.nsecrets = 1;
	if (br_logging_redact(&br, NULL, note) == 0) {
		t = json_dumps(note, JSON_COMPACT);
		REQUIRE(t != NULL);
		REQUIRE(strstr(t, held) == NULL);
		free(t);
	}
	json_decref(note);
	return 0;
}
