/* proto/log.c - leveled logging to stderr or a file (syslog levels) */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "proto/log.h"

int pl_log_level = LOG_NOTICE;

static struct {
    char ident[32];
    char node[64];
    FILE *fp;
} logcfg = { "pilot", "", NULL };

int pl_log_init(const char *ident, const char *node, const char *path)
{
    snprintf(logcfg.ident, sizeof(logcfg.ident), "%s", ident);
    snprintf(logcfg.node, sizeof(logcfg.node), "%s", node ? node : "");
    if (path) {
        FILE *fp = fopen(path, "ae"); /* not inherited by tasks */
        if (!fp)
            return -1;
        setvbuf(fp, NULL, _IOLBF, 0);
        if (logcfg.fp)
            fclose(logcfg.fp);
        logcfg.fp = fp;
    }
    return 0;
}

const char *pl_log_ident(void)
{
    return logcfg.ident;
}

__attribute__((format(printf, 2, 0)))
static void vlog(int level, const char *fmt, va_list ap, int errnum)
{
    static const char *names[] = { "emerg", "alert", "crit", "error",
                                   "warning", "notice", "info", "debug" };
    FILE *fp = logcfg.fp ? logcfg.fp : stderr;
    struct timeval tv;
    struct tm tm;
    char ts[32];
    char msg[1024];

    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (level < 0 || level > LOG_DEBUG)
        level = LOG_ERR;
    fprintf(fp, "%s.%03ld %s%s%s%s %s: %s%s%s\n", ts, (long)tv.tv_usec / 1000,
            logcfg.ident, logcfg.node[0] ? "[" : "", logcfg.node,
            logcfg.node[0] ? "]" : "", names[level], msg,
            errnum ? ": " : "", errnum ? strerror(errnum) : "");
}

void pl_log_write(int level, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;

    va_start(ap, fmt);
    vlog(level, fmt, ap, 0);
    va_end(ap);
    errno = saved;
}

void pl_log_error(const char *fmt, ...)
{
    int saved = errno;
    va_list ap;

    if (LOG_ERR > pl_log_level)
        return;
    va_start(ap, fmt);
    vlog(LOG_ERR, fmt, ap, saved ? saved : EIO);
    va_end(ap);
    errno = saved;
}

int pl_log_level_parse(const char *s)
{
    static const struct { const char *name; int level; } tab[] = {
        { "err", LOG_ERR },   { "error", LOG_ERR },   { "warning", LOG_WARNING },
        { "notice", LOG_NOTICE }, { "info", LOG_INFO }, { "debug", LOG_DEBUG },
    };

    if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
        return s[0] - '0';
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (!strcmp(s, tab[i].name))
            return tab[i].level;
    return -1;
}
