/* proto/log.h - leveled logging to stderr or a file (syslog levels) */
#ifndef PL_PROTO_LOG_H
#define PL_PROTO_LOG_H

#include <syslog.h>

extern int pl_log_level; /* the only mutable global: the log setup */

/* Set the process name and node shown on each line ("pilotd[n1]").
 * 'path' (may be NULL: stderr) is opened for appending. Returns 0/-1. */
int pl_log_init(const char *ident, const char *node, const char *path);

/* Borrowed: the process name given to pl_log_init() ("pilot" before). */
const char *pl_log_ident(void);

void pl_log_write(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Tests the level first, so arguments cost nothing when filtered. */
#define pl_log(level, ...)                                                     \
    do {                                                                       \
        if ((level) <= pl_log_level)                                           \
            pl_log_write((level), __VA_ARGS__);                                \
    } while (0)

/* Like pl_log(LOG_ERR, ...) with ": strerror(errno)" appended. */
void pl_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse "err", "warning", "notice", "info", "debug" or a digit. -1 if bad. */
int pl_log_level_parse(const char *s);

#endif /* !PL_PROTO_LOG_H */
