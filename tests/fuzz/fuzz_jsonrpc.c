/*
 * fuzz_jsonrpc: the bridge's JSON-RPC framing check (gateway/bridge,
 * br_rpc_parse) under hostile input.
 *
 * Every POST body a sandbox sends to the bridge goes through this function
 * before anything else reads it, so beyond "does not crash" each input is
 * held to the invariants the server relies on:
 *   - the kind is one of the four, and INVALID always carries HTTP 400 with
 *     -32700 (not JSON) or -32600 (JSON, but not one valid message) and a
 *     message;
 *   - a JSON array (a batch) is never accepted;
 *   - REQUEST has a non-empty method without NUL and a string or integer
 *     id; NOTIFICATION has a method and no id; RESPONSE has an id and
 *     exactly one of result and error; all three have jsonrpc "2.0" and
 *     object params when params are present;
 *   - re-serializing an accepted message and parsing it again gives the
 *     same kind (what the bridge forwards means what it checked).
 * The same input as a batch (br_batch_parse, 2025-03-26 sessions): refused
 * whole only with -32700 or -32600 and nothing split; else 1..16 messages,
 * each classified as it would be alone in a body (re-serialized and
 * parsed again: the same kind, held to the same invariants), the
 * requests counted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/bridge/bridge.h"
#include "tests/fuzz/fuzz.h"

static void
check(const struct br_rpc *r, const char *buf, size_t len)
{
	json_t *v, *id, *params;
	json_error_t jerr;

	REQUIRE(r->kind >= BR_RPC_REQUEST && r->kind <= BR_RPC_INVALID);
	if (r->kind == BR_RPC_INVALID) {
		REQUIRE(r->http_status == 400);
		REQUIRE(r->code == -32700 || r->code == -32600);
		REQUIRE(r->error != NULL && *r->error != '\0');
		return;
	}
	REQUIRE(json_is_object(r->msg));
	REQUIRE(strcmp(json_string_value(json_object_get(r->msg, "jsonrpc")),
	    "2.0") == 0);
	/* The same bytes, parsed independently, were not a batch. */
	v = json_loadb(buf, len, JSON_DECODE_ANY, &jerr);
	REQUIRE(v != NULL && json_is_object(v));
	json_decref(v);
	id = json_object_get(r->msg, "id");
	params = json_object_get(r->msg, "params");
	switch (r->kind) {
	case BR_RPC_REQUEST:
		REQUIRE(r->id == id && id != NULL);
		REQUIRE(json_is_string(id) || json_is_integer(id));
		/* fall through */
	case BR_RPC_NOTIFICATION:
		REQUIRE(r->method != NULL && *r->method != '\0');
		REQUIRE(strlen(r->method) == json_string_length(
		    json_object_get(r->msg, "method")));
		REQUIRE(params == NULL || json_is_object(params));
		if (r->kind == BR_RPC_NOTIFICATION)
			REQUIRE(id == NULL && r->id == NULL);
		break;
	case BR_RPC_RESPONSE:
		REQUIRE(id != NULL && r->id == id);
		REQUIRE((json_object_get(r->msg, "result") != NULL) !=
		    (json_object_get(r->msg, "error") != NULL));
		break;
	default:
		REQUIRE(0);
	}
}

static void
batch_check(const char *buf, size_t len)
{
	struct br_batch_parts p;
	struct br_rpc one;
	size_t i, nreq = 0;
	char *ser;

	if (br_batch_parse(buf, len, BR_BATCH_MAX, &p) == -1)
		return;
	if (p.code != 0) {
		REQUIRE(p.code == -32700 || p.code == -32600);
		REQUIRE(p.msgs == NULL && p.n == 0 && p.error != NULL);
		return;
	}
	REQUIRE(p.n >= 1 && p.n <= BR_BATCH_MAX);
	REQUIRE(br_batch_looks(buf, len));
	for (i = 0; i < p.n; i++) {
		if (p.msgs[i].kind == BR_RPC_REQUEST)
			nreq++;
		if (p.msgs[i].kind == BR_RPC_INVALID) {
			REQUIRE(p.msgs[i].code == -32600);
			REQUIRE(p.msgs[i].http_status == 400);
			continue;
		}
		ser = json_dumps(p.msgs[i].msg, JSON_COMPACT);
		REQUIRE(ser != NULL);
		br_rpc_parse(ser, strlen(ser), &one);
		REQUIRE(one.kind == p.msgs[i].kind);
		check(&one, ser, strlen(ser));
		br_rpc_clear(&one);
		free(ser);
	}
	REQUIRE(nreq == p.nrequests);
	br_batch_parts_clear(&p);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct br_rpc r, again;
	char *copy, *ser;

	/* Not NUL-terminated: the parser gets an exact length. */
	if ((copy = malloc(size + 1)) == NULL)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	br_rpc_parse(copy, size, &r);
	check(&r, copy, size);
	if (r.kind != BR_RPC_INVALID) {
		ser = json_dumps(r.msg, JSON_COMPACT);
		REQUIRE(ser != NULL);
		br_rpc_parse(ser, strlen(ser), &again);
		REQUIRE(again.kind == r.kind);
		check(&again, ser, strlen(ser));
		br_rpc_clear(&again);
		free(ser);
	}
	br_rpc_clear(&r);
	REQUIRE(r.msg == NULL);
	batch_check(copy, size);
	free(copy);
	return 0;
}
