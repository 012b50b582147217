/*
 * check_log: gateway/log.c keeps one call to one line.
 *
 * Log messages carry text from outside the daemon (an upstream's tool
 * names, a sandbox's request path). A newline or a terminal escape in that
 * text must not forge a second log line or reach the operator's terminal:
 * every control character is written as '?', and each call ends in exactly
 * one newline. The foreground (stderr) form is checked by capturing fd 2.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/log.h"

/* Runs one log call with stderr captured; the bytes written, NUL-ended. */
static char *
captured(void (*fn)(const char *, ...), const char *fmt, const char *arg)
{
	char path[] = "/tmp/check_log.XXXXXX";
	int fd = mkstemp(path), saved;
	char *buf = calloc(1, 4096);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(buf);
	unlink(path);
	fflush(stderr);
	ck_assert_int_ge(saved = dup(2), 0);
	ck_assert_int_eq(dup2(fd, 2), 2);
	errno = ENOENT;
	fn(fmt, arg);
	fflush(stderr);
	ck_assert_int_eq(dup2(saved, 2), 2);
	close(saved);
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	n = read(fd, buf, 4095);
	ck_assert_int_gt(n, 0);
	close(fd);
	return buf;
}

static void
one_line(const char *out)
{
	const char *c;

	ck_assert_ptr_nonnull(strchr(out, '\n'));
	ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1);
	for (c = out; c < out + strlen(out) - 1; c++)
		ck_assert_msg((unsigned char)*c >= 0x20 && *c != 0x7f,
		    "control byte 0x%02x in %s", (unsigned char)*c, out);
}

START_TEST(newline_and_escapes_neutralised)
{
	char *out;

	log_init(1, "check_log");
	out = captured(log_warnx, "bridge: tool %s drifted",
	    "evil\n12:00:00.000 sluiced: forged\r\x1b[31mred\x7f\t.");
	one_line(out);
	ck_assert_ptr_nonnull(strstr(out, "bridge: tool evil?12:00:00.000 "
	    "sluiced: forged??[31mred??. drifted"));
	free(out);
}
END_TEST

START_TEST(errno_form_one_line)
{
	char *out;

	log_init(1, "check_log");
	out = captured(log_warn, "open %s", "a\nb");
	one_line(out);
	ck_assert_ptr_nonnull(strstr(out, "open a?b: No such file or "
	    "directory"));
	free(out);
}
END_TEST

START_TEST(plain_text_unchanged)
{
	char *out;

	log_init(1, "check_log");
	out = captured(log_info, "upstream %s ready", "ev (protocol ünï)");
	one_line(out);
	ck_assert_ptr_nonnull(strstr(out, "upstream ev (protocol ünï) ready"));
	free(out);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("Core");
	SRunner *sr;
	int nf;

	tcase_add_test(tc, newline_and_escapes_neutralised);
	tcase_add_test(tc, errno_form_one_line);
	tcase_add_test(tc, plain_text_unchanged);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
