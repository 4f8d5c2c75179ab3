/* client/parse.c - numbers, durations, sizes and task ids from text */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/parse.h"
#include "proto/spec.h"

int pl_parse_size(const char *what, const char *s, uint64_t max,
                  uint64_t *v, struct pl_error *errp)
{
    static const char units[] = "KMGT";
    char *end;
    uintmax_t n;
    int shift = 0;

    errno = 0;
    if (*s < '0' || *s > '9')
        goto bad;
    n = strtoumax(s, &end, 10);
    if (errno)
        goto bad;
    if (*end) {
        const char *u = strchr(units, toupper((unsigned char)*end));
        if (!u)
            goto bad;
        shift = 10 * (int)(u - units + 1);
        end++;
        if (!strcasecmp(end, "iB") || !strcasecmp(end, "B"))
            end += strlen(end);
        if (*end)
            goto bad;
    }
    if (n == 0 || n > (max >> shift)) {
        errno = ERANGE;
        return pl_errprintf(errp, "%s: '%s' is not between 1 byte and %"
                            PRIu64 " GiB", what, s, max >> 30);
    }
    *v = (uint64_t)n << shift;
    return 0;
bad:
    errno = EINVAL;
    return pl_errprintf(errp, "%s: '%s' is not a size (bytes, or with K, M, "
                        "G or T: 500M, 10G)", what, s);
}

int pl_parse_uint(const char *what, const char *s, uint64_t min,
                  uint64_t max, uint64_t *v, struct pl_error *errp)
{
    char *end;
    uintmax_t n;

    errno = 0;
    if (*s < '0' || *s > '9')
        goto bad;
    n = strtoumax(s, &end, 10);
    if (errno || *end)
        goto bad;
    if (n < min || n > max) {
        errno = ERANGE;
        if (max == UINT64_MAX)
            return pl_errprintf(errp, "%s: '%s' is below %" PRIu64, what, s,
                                min);
        return pl_errprintf(errp, "%s: '%s' is not between %" PRIu64
                            " and %" PRIu64, what, s, min, max);
    }
    *v = n;
    return 0;
bad:
    errno = EINVAL;
    if (min > 0)
        return pl_errprintf(errp, "%s: '%s' is not a positive integer", what,
                            s);
    return pl_errprintf(errp, "%s: '%s' is not a non-negative integer",
                        what, s);
}

int pl_parse_secs(const char *what, const char *s, double *v,
                  struct pl_error *errp)
{
    char *end;
    double x, unit = 1;

    errno = 0;
    if ((*s < '0' || *s > '9') && *s != '.')
        goto bad;
    x = strtod(s, &end);
    if (errno || end == s)
        goto bad;
    if (*end && !end[1]) {
        switch (*end) {
        case 's':
            unit = 1;
            break;
        case 'm':
            unit = 60;
            break;
        case 'h':
            unit = 3600;
            break;
        case 'd':
            unit = 86400;
            break;
        default:
            goto bad;
        }
    }
    else if (*end)
        goto bad;
    x *= unit;
    if (!isfinite(x) || x > 1e9)
        goto bad;
    *v = x;
    return 0;
bad:
    errno = EINVAL;
    return pl_errprintf(errp, "%s: '%s' is not a duration (seconds, or a "
                        "number with s, m, h or d)", what, s);
}

int pl_parse_id(const char *s, uint64_t *id, struct pl_error *errp)
{
    return pl_parse_uint("task id", s, 1, INT64_MAX, id, errp);
}

/* 'arg' is neither ID nor ID.N. */
static int not_id(const char *arg, struct pl_error *errp)
{
    return pl_errset(errp, EINVAL, "'%.40s' is not a task id (ID, or ID.N: "
                     "element N of array ID)", arg);
}

int pl_parse_sel(int argc, char *const *argv, struct pl_sel_req *sel,
                 struct pl_error *errp)
{
    size_t n = argc > 0 ? (size_t)argc : 1;

    memset(sel, 0, sizeof(*sel));
    if (argc > PL_REQ_MAX_IDS) {
        errno = E2BIG;
        return pl_errprintf(errp, "more than %d ids at once",
                            PL_REQ_MAX_IDS);
    }
    if (!(sel->ids = calloc(n, sizeof(*sel->ids)))
        || !(sel->elems = calloc(n * 2, sizeof(*sel->elems)))) {
        pl_sel_req_clear(sel);
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    for (int i = 0; i < argc; i++) {
        const char *dot = strchr(argv[i], '.');
        char head[32];
        uint64_t a, idx;
        if (!dot) {
            if (pl_parse_id(argv[i], &sel->ids[sel->nids], errp) < 0)
                goto error;
            sel->nids++;
            continue;
        }
        /* ID.N: element N of array ID */
        if ((size_t)(dot - argv[i]) >= sizeof(head) || dot == argv[i]
            || !dot[1]) {
            not_id(argv[i], errp);
            goto error;
        }
        snprintf(head, sizeof(head), "%.*s", (int)(dot - argv[i]), argv[i]);
        if (pl_parse_uint("task id", head, 1, INT64_MAX, &a, errp) < 0
            || pl_parse_uint("array index", dot + 1, 0, PL_SPEC_MAX_INDEX,
                             &idx, errp) < 0) {
            not_id(argv[i], errp);
            goto error;
        }
        sel->elems[2 * sel->nelems] = a;
        sel->elems[2 * sel->nelems + 1] = idx;
        sel->nelems++;
    }
    return 0;
error:
    pl_sel_req_clear(sel);
    return -1;
}
