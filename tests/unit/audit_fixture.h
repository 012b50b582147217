/*
 * audit_fixture.h: the temporary directory, signing key and database paths
 * that the audit unit suites (check_audit_log, check_audit_perf,
 * check_audit_sink) each need, written once.
 *
 * Included by exactly one .c per suite binary: it defines static storage
 * and functions. af_setup(NAME, HOST) makes /tmp/NAME.XXXXXX with a fresh
 * key for origin "audit.<pid>.<HOST>/seg/0" at af_keypath, its verifier key
 * in af_vkey, and af_dbpath for the log; af_teardown removes the directory.
 * A failed assertion ends the test process with exit(), which skips
 * teardown but not atexit, so the directory goes either way.
 */
#ifndef TESTS_UNIT_AUDIT_FIXTURE_H
#define TESTS_UNIT_AUDIT_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include <check.h>

#include "audit/audit.h"

static char af_dir[64], af_keypath[128], af_dbpath[128], af_vkey[256],
    af_origin[128];

static void
af_remove_dir(void)
{
	char cmd[128];

	if (af_dir[0] == '\0')
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", af_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", af_dir);
	af_dir[0] = '\0';
}

static void __attribute__((unused))
af_setup(const char *name, const char *host)
{
	static int registered;
	struct aud_key *k;

	if (!registered++)
		atexit(af_remove_dir);
	snprintf(af_dir, sizeof(af_dir), "/tmp/%s.XXXXXX", name);
	ck_assert_ptr_nonnull(mkdtemp(af_dir));
	snprintf(af_origin, sizeof(af_origin), "audit.%d.%s/seg/0",
	    (int)getpid(), host);
	snprintf(af_keypath, sizeof(af_keypath), "%s/key.pem", af_dir);
	snprintf(af_dbpath, sizeof(af_dbpath), "%s/audit.db", af_dir);
	k = aud_key_new(af_origin, NULL, 0);
	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(aud_key_save(k, af_keypath, NULL, 0), 0);
	ck_assert_int_eq(aud_key_vkey(k, af_vkey, sizeof(af_vkey)), 0);
	aud_key_free(k);
}

static void __attribute__((unused))
af_teardown(void)
{
	af_remove_dir();
}

#endif
