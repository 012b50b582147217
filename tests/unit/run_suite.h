/*
 * run_suite: the end of every suite's main, once: run s (forking per test
 * unless CK_FORK says otherwise), free it, and give the exit status a test
 * runner reads (0 when every test passed).
 */
#ifndef SLUICE_TESTS_UNIT_RUN_SUITE_H
#define SLUICE_TESTS_UNIT_RUN_SUITE_H

#include <check.h>
#include <stdlib.h>

static inline int
run_suite(Suite *s)
{
	SRunner	*sr = srunner_create(s);
	int	 failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
