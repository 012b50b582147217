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
#include <string.h>

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

/* fuzz_check_message: m is one loader error about file name, in the form
 * editors and CI jump to: "NAME:LINE:COL: text" on one line, LINE and
 * COL decimal, text not empty. */
static __attribute__((unused)) void
fuzz_check_message(const char *name, const char *m)
{
	const char *s;
	size_t nl = strlen(name);

	REQUIRE(m != NULL);
	REQUIRE(strncmp(m, name, nl) == 0 && m[nl] == ':');
	s = m + nl + 1;
	REQUIRE(*s >= '0' && *s <= '9');
	while (*s >= '0' && *s <= '9')
		s++;
	REQUIRE(*s++ == ':');
	REQUIRE(*s >= '0' && *s <= '9');
	while (*s >= '0' && *s <= '9')
		s++;
	REQUIRE(s[0] == ':' && s[1] == ' ' && s[2] != '\0');
	REQUIRE(strchr(m, '\n') == NULL);
}

#endif
