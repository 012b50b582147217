/*
 * log.c: stderr or syslog, nothing more. Kept deliberately small so that every
 * daemon process (and later the unprivileged children) share one behaviour:
 * errno is saved around every call, and the fatals exit with status 1.
 * Messages carry text from outside (an upstream's tool names, a sandbox's
 * request path), so control characters are shown as '?': one call is one
 * line, and nobody can forge a log line or a terminal escape through us.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "gateway/log.h"

static int log_foreground = 1;
static int log_verbose;
static const char *log_role;

void
log_init(int foreground, const char *ident)
{
	log_foreground = foreground;
	if (!foreground)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void
log_setverbose(int verbose)
{
	log_verbose = verbose;
}

int
log_getforeground(void)
{
	return log_foreground;
}

int
log_getverbose(void)
{
	return log_verbose;
}

void
log_procinit(const char *role)
{
	log_role = role;
}

static void
vlog(int pri, const char *fmt, va_list ap, int with_errno)
{
	int saved = errno;
	char msg[2048], *c;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (with_errno) {
		size_t n = strlen(msg);
		snprintf(msg + n, sizeof(msg) - n, ": %s", strerror(saved));
	}
	for (c = msg; *c != '\0'; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	if (log_foreground) {
		struct timespec ts;
		struct tm tm;
		char when[32];

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof(when), "%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ld %s%s%s\n", when, ts.tv_nsec / 1000000,
		    log_role ? log_role : "", log_role ? ": " : "", msg);
	} else {
		syslog(pri, "%s%s%s", log_role ? log_role : "",
		    log_role ? ": " : "", msg);
	}
	errno = saved;
}

#define LOG_VERB(name, pri, err)			\
void							\
name(const char *fmt, ...)				\
{							\
	va_list ap;					\
	va_start(ap, fmt);				\
	vlog(pri, fmt, ap, err);			\
	va_end(ap);					\
}

LOG_VERB(log_warn, LOG_WARNING, 1)
LOG_VERB(log_warnx, LOG_WARNING, 0)
LOG_VERB(log_info, LOG_INFO, 0)

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!log_verbose)
		return;
	va_start(ap, fmt);
	vlog(LOG_DEBUG, fmt, ap, 0);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_CRIT, fmt, ap, errno != 0);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_CRIT, fmt, ap, 0);
	va_end(ap);
	exit(1);
}
