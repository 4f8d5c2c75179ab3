/* tests/unit/tap.h - a tiny Test Anything Protocol writer for unit tests */
#ifndef PL_TESTS_TAP_H
#define PL_TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* State of the one test program being run: the only globals in a test. */
static int tap_n;
static int tap_failed;
static int tap_planned = -1;

static inline void plan(int n)
{
    tap_planned = n;
    printf("1..%d\n", n);
    fflush(stdout);
}

/* Print "ok N - desc" or "not ok N - desc"; returns 'cond'. */
__attribute__((format(printf, 2, 3)))
static inline int ok(int cond, const char *fmt, ...)
{
    va_list ap;

    printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (!cond)
        tap_failed++;
    return cond;
}

/* A comment line, "# ...". */
__attribute__((format(printf, 1, 2)))
static inline void diag(const char *fmt, ...)
{
    va_list ap;

    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* Integer and string comparisons that show both sides on failure. */
#define is(got, want, ...)                                                     \
    do {                                                                       \
        long long tap_g_ = (long long)(got), tap_w_ = (long long)(want);       \
        if (!ok(tap_g_ == tap_w_, __VA_ARGS__))                                \
            diag("got %lld, want %lld", tap_g_, tap_w_);                       \
    } while (0)

#define is_str(got, want, ...)                                                 \
    do {                                                                       \
        const char *tap_g_ = (got), *tap_w_ = (want);                          \
        if (!ok(tap_g_ && tap_w_ && !strcmp(tap_g_, tap_w_), __VA_ARGS__))     \
            diag("got '%s', want '%s'", tap_g_ ? tap_g_ : "(null)",            \
                 tap_w_ ? tap_w_ : "(null)");                                  \
    } while (0)

/* Exit status for main(): 0 if all passed. */
/* The exit status: 1 if a test failed or the count is not the plan's
 * (a program run alone must say so, not only prove). */
static inline int done_testing(void)
{
    if (tap_planned >= 0 && tap_n != tap_planned) {
        printf("# planned %d tests, ran %d\n", tap_planned, tap_n);
        return 1;
    }
    return tap_failed ? 1 : 0;
}

#endif /* !PL_TESTS_TAP_H */
