/*
 * fuzz.h: what every fuzz target shares -- the entry point's prototype, the
 * invariant check, and loading a fixed policy from text.
 *
 * Included by exactly one target per binary (it defines a static helper).
 * A failed invariant is a crash: the driver and libFuzzer save the input.
 */
#ifndef TESTS_FUZZ_FUZZ_H
#define TESTS_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "policy/policy.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: invariant failed: %s\n",	\
		    __FILE__, __LINE__, #cond);				\
		abort();						\
	}								\
} while (0)

/* fuzz_policy_text: the policy in text (len bytes, named path), which
 * must load: a target's fixed policy, loaded once and kept. */
static __attribute__((unused)) struct pol_policy *
fuzz_policy_text(const char *path, const char *text, size_t len)
{
	struct pol_errors *errs = pol_errors_new(5);
	struct pol_policy *p;

	REQUIRE(errs != NULL);
	p = pol_policy_load_buf(path, text, len, NULL, errs);
	pol_errors_free(errs);
	REQUIRE(p != NULL);
	return p;
}

#endif
