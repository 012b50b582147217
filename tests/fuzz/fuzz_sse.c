/*
 * fuzz_sse: the bridge's reader of an upstream's SSE answer stream
 * (gateway/bridge/sse.c) under hostile streams and hostile splits.
 *
 * The stream is written by an upstream MCP server and split by the network
 * wherever it likes; the bridge delivers each message as soon as its event
 * is complete. The first two bytes seed the split; the rest is the stream.
 * Beyond "does not crash" (ASan, UBSan):
 *   - the messages are the same however the stream is split: fed whole,
 *     fed in the chunks the seed picks, and fed one byte at a time;
 *   - what one feed yields is only what the bytes so far complete: feeding
 *     a prefix never yields more messages than the whole stream does;
 *   - every message is one JSON value;
 *   - the last id: kept (for a Last-Event-ID) is the same however the
 *     stream is split, shorter than BR_SSE_ID_MAX;
 *   - a reader of a stream that stays open (br_sse_new_stream, fed a byte
 *     at a time here) yields what the bounded one does;
 *   - a stream over the reader's bound is refused, not taken in part.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/bridge/br_int.h"
#include "tests/fuzz/fuzz.h"

/* Feeds s[0..n) in chunks from the PRNG state *seed (0: one chunk; 1: one
 * byte at a time), then ends the stream. */
static json_t *
read_stream(const uint8_t *s, size_t n, uint32_t seed, size_t *after_feeds,
    char id[BR_SSE_ID_MAX])
{
	struct br_sse *rd = seed == 1 ? br_sse_new_stream(n + 1) :
	    br_sse_new(n + 1);
	json_t *out = json_array();
	size_t at = 0, len;

	REQUIRE(rd != NULL && out != NULL);
	while (at < n) {
		if (seed == 0)
			len = n - at;
		else if (seed == 1)
			len = 1;
		else {
			seed = seed * 1103515245u + 12345u;
			len = 1 + (seed >> 16) % 17;
			if (len > n - at)
				len = n - at;
		}
		REQUIRE(br_sse_feed(rd, (const char *)s + at, len, out) == 0);
		at += len;
	}
	*after_feeds = json_array_size(out);
	br_sse_end(rd, out);
	REQUIRE(strlen(br_sse_last_id(rd)) < BR_SSE_ID_MAX);
	strcpy(id, br_sse_last_id(rd));
	br_sse_free(rd);
	return out;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *whole, *chunked, *bytes, *msg;
	char idw[BR_SSE_ID_MAX], idc[BR_SSE_ID_MAX], idb[BR_SSE_ID_MAX];
	struct br_sse *rd;
	size_t i, nw, nc, nb;
	uint32_t seed;

	if (size < 2)
		return 0;
	seed = (uint32_t)data[0] << 8 | data[1];
	data += 2;
	size -= 2;

	whole = read_stream(data, size, 0, &nw, idw);
	chunked = read_stream(data, size, seed | 2, &nc, idc);
	bytes = read_stream(data, size, 1, &nb, idb);
	REQUIRE(strcmp(idw, idc) == 0 && strcmp(idw, idb) == 0);
	REQUIRE(json_equal(whole, chunked));
	REQUIRE(json_equal(whole, bytes));
	/* Before the end too, every split has seen the same complete events:
	 * nothing waits for a byte that may never come. */
	REQUIRE(nc == nw && nb == nw);
	REQUIRE(nw <= json_array_size(whole));
	json_array_foreach(whole, i, msg)
		REQUIRE(msg != NULL);

	/* One byte over the bound: refused whole, nothing appended. */
	if (size > 0) {
		json_t *out = json_array();

		REQUIRE((rd = br_sse_new(size - 1)) != NULL && out != NULL);
		REQUIRE(br_sse_feed(rd, (const char *)data, size, out) == -1);
		REQUIRE(json_array_size(out) == 0);
		br_sse_end(rd, out);
		REQUIRE(json_array_size(out) == 0);
		br_sse_free(rd);
		json_decref(out);
	}
	json_decref(whole);
	json_decref(chunked);
	json_decref(bytes);
	return 0;
}
