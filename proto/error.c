/* proto/error.c - error text for people, and fatal exits for main() */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "proto/error.h"
#include "proto/log.h"

int pl_errprintf(struct pl_error *errp, const char *fmt, ...)
{
    int saved = errno;

    if (errp) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errp->text, sizeof(errp->text), fmt, ap);
        va_end(ap);
    }
    errno = saved;
    return -1;
}

int pl_errset(struct pl_error *errp, int errnum, const char *fmt, ...)
{
    if (errp) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errp->text, sizeof(errp->text), fmt, ap);
        va_end(ap);
    }
    errno = errnum;
    return -1;
}

void pl_fatal(int code, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: error: ", pl_log_ident());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(code);
}
