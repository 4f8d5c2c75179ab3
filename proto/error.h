/* proto/error.h - error text for people, and fatal exits for main() */
#ifndef PL_PROTO_ERROR_H
#define PL_PROTO_ERROR_H

#include <stdarg.h>

struct pl_error {
    char text[160];
};

/* Format a message into 'errp' (which may be NULL) and return -1.
 * errno is preserved, so callers may set it before or after. */
int pl_errprintf(struct pl_error *errp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* pl_errprintf() that sets errno to 'errnum': a refusal in one call,
 * `return pl_errset(errp, EINVAL, "ranks must be at least 1");`. */
int pl_errset(struct pl_error *errp, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Print "prog: error: MSG" to stderr and exit(code). main() only. */
void pl_fatal(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

#endif /* !PL_PROTO_ERROR_H */
