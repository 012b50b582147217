/*
 * log: the daemon's four verbs and two fatals (OpenBSD's log.c interface).
 * Messages go to stderr in the foreground and to syslog otherwise. Only
 * gateway/ code logs; leaf modules (policy/, audit/, netns/) return errors
 * and leave the decision to log or die to the daemon. The audit trail is data
 * handed to audit/, never logging.
 */
#ifndef SLUICE_GATEWAY_LOG_H
#define SLUICE_GATEWAY_LOG_H

#include <stdarg.h>

/* log_init: foreground != 0 logs to stderr, else to syslog with facility
 * LOG_DAEMON under ident. Safe to call again (e.g. after daemonising). */
void	log_init(int foreground, const char *ident);
/* log_setverbose: 0 hides log_debug, 1 shows it. */
void	log_setverbose(int verbose);
int	log_getverbose(void);
/* log_getforeground: what log_init was given (children log the same way). */
int	log_getforeground(void);
/* log_procinit: tag following messages with a process role ("dns", ...). */
void	log_procinit(const char *role);

/* The plain forms append ": strerror(errno)"; the -x forms do not. All of
 * them preserve errno. */
void	log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* SLUICE_GATEWAY_LOG_H */
