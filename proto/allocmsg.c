/* proto/allocmsg.c - GROW, SHRINK, ALLOCS and the auto-grow settings */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/allocmsg.h"

static bool chars_ok(const char *s, size_t max, const char *extra)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > max)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || strchr(extra, *p)))
            return false;
    return true;
}

bool pl_alloc_time_ok(const char *s)
{
    return chars_ok(s, PL_ALLOC_TIME_MAX, ":-") && pl_alloc_time_secs(s) > 0;
}

bool pl_alloc_part_ok(const char *s)
{
    return chars_ok(s, PL_ALLOC_PART_MAX,
                    "_.-,abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ");
}

/* sbatch(1) --time: "minutes", "minutes:seconds", "hours:minutes:seconds",
 * "days-hours", "days-hours:minutes", "days-hours:minutes:seconds" */
double pl_alloc_time_secs(const char *s)
{
    long v[4] = { 0 };
    int n = 0;
    long days = -1;
    const char *p = s;
    char *end;

    if (!s || !*s)
        return -1;
    const char *dash = strchr(s, '-');
    if (dash) {
        days = strtol(s, &end, 10);
        if (end != dash || days < 0)
            return -1;
        p = dash + 1;
    }
    for (;;) {
        if (*p < '0' || *p > '9' || n == 3)
            return -1;
        v[n++] = strtol(p, &end, 10);
        if (!*end)
            break;
        if (*end != ':')
            return -1;
        p = end + 1;
    }
    if (days >= 0) /* D-H, D-H:M, D-H:M:S */
        return days * 86400.0 + v[0] * 3600.0 + (n > 1 ? v[1] * 60.0 : 0)
               + (n > 2 ? v[2] : 0);
    if (n == 1)
        return v[0] * 60.0;
    if (n == 2)
        return v[0] * 60.0 + v[1];
    return v[0] * 3600.0 + v[1] * 60.0 + v[2];
}

static int bad(struct pl_error *errp, const char *what)
{
    errno = EPROTO;
    return pl_errprintf(errp, "%s", what);
}

/* ------------------------------------------------------------ grow */

void pl_grow_req_encode(struct pl_wbuf *w, uint64_t seq,
                        const struct pl_grow_req *q)
{
    pl_wbuf_init(w, PL_MSG_GROW, seq);
    pl_wm_uint(&w->body, "nodes", q->nodes);
    if (q->time)
        pl_wm_str(&w->body, "time", q->time);
    if (q->partition)
        pl_wm_str(&w->body, "partition", q->partition);
    if (q->drain >= 0)
        pl_wm_double(&w->body, "drain", q->drain);
}

int pl_grow_req_decode(const msgpack_object *body, struct pl_grow_req *q,
                       struct pl_error *errp)
{
    uint64_t nodes = 0;

    memset(q, 0, sizeof(*q));
    q->drain = -1;
    if (pl_mp_uint(body, "nodes", true, PL_ALLOC_MAX_NODES, &nodes, errp) < 0
        || pl_mp_str(body, "time", false, PL_ALLOC_TIME_MAX, &q->time, errp)
               < 0
        || pl_mp_str(body, "partition", false, PL_ALLOC_PART_MAX,
                     &q->partition, errp) < 0
        || pl_mp_double(body, "drain", false, &q->drain, errp) < 0)
        goto error;
    q->nodes = (uint32_t)nodes;
    if (q->nodes < 1) {
        bad(errp, "'nodes': at least 1");
        goto error;
    }
    /* they go into a batch script: nothing a shell would read */
    if (q->time && !pl_alloc_time_ok(q->time)) {
        bad(errp, "'time': not a Slurm time limit");
        goto error;
    }
    if (q->partition && !pl_alloc_part_ok(q->partition)) {
        bad(errp, "'partition': not a partition name");
        goto error;
    }
    if (!isfinite(q->drain) || q->drain > 1e7) {
        bad(errp, "'drain': not a duration");
        goto error;
    }
    return 0;
error:
    pl_grow_req_clear(q);
    return -1;
}

void pl_grow_req_clear(struct pl_grow_req *q)
{
    int saved = errno;

    free(q->time);
    free(q->partition);
    q->time = q->partition = NULL;
    errno = saved;
}

/* ------------------------------------------------------------ shrink */

void pl_shrink_req_encode(struct pl_wbuf *w, uint64_t seq,
                          const struct pl_shrink_req *q)
{
    pl_wbuf_init(w, PL_MSG_SHRINK, seq);
    if (q->idle >= 0)
        pl_wm_double(&w->body, "idle", q->idle);
    if (q->alloc)
        pl_wm_uint(&w->body, "alloc", q->alloc);
}

int pl_shrink_req_decode(const msgpack_object *body, struct pl_shrink_req *q,
                         struct pl_error *errp)
{
    int hi, ha;

    memset(q, 0, sizeof(*q));
    q->idle = -1;
    if ((hi = pl_mp_double(body, "idle", false, &q->idle, errp)) < 0
        || (ha = pl_mp_uint(body, "alloc", false, UINT32_MAX, &q->alloc,
                            errp)) < 0)
        return -1;
    if ((hi == 1) == (ha == 1))
        return bad(errp, "want exactly one of 'idle' and 'alloc'");
    if (hi == 1 && (!isfinite(q->idle) || q->idle < 0 || q->idle > 1e9))
        return bad(errp, "'idle': not a duration");
    if (ha == 1 && q->alloc == 0)
        return bad(errp, "'alloc': allocations count from 1");
    return 0;
}

/* ------------------------------------------------------------ conf */

/* Seconds of "90", "90s", "5m", "1h" (-1: not one). */
static double secs(const char *s)
{
    char *end;
    double x;

    if (*s < '0' || *s > '9')
        return -1;
    x = strtod(s, &end);
    if (!strcmp(end, "m"))
        x *= 60;
    else if (!strcmp(end, "h"))
        x *= 3600;
    else if (*end && strcmp(end, "s"))
        return -1;
    return isfinite(x) && x <= 1e9 ? x : -1;
}

int pl_grow_conf_parse(const char *s, struct pl_grow_conf *c,
                       struct pl_error *errp)
{
    static const char form[] = "max=K[,idle=D][,nodes=N][,time=T]"
                               "[,partition=P][,pending=M][,drain=D]";
    char buf[256], nodes[64], *save = NULL;
    bool has_max = false;
    int saved = errno;

    memset(c, 0, sizeof(*c));
    c->idle = PL_GROW_IDLE;
    c->pending = PL_GROW_PENDING;
    c->drain = PL_GROW_DRAIN;
    errno = EINVAL; /* what every error below returns with */
    if (strlen(s) >= sizeof(buf))
        return pl_errprintf(errp, "--grow: longer than %zu bytes",
                            sizeof(buf) - 1);
    snprintf(buf, sizeof(buf), "%s", s);
    snprintf(nodes, sizeof(nodes), "a number of nodes from 1 to %u",
             PL_ALLOC_MAX_NODES);
    for (char *kv = strtok_r(buf, ",", &save); kv;
         kv = strtok_r(NULL, ",", &save)) {
        char *v = strchr(kv, '='), *end;
        const char *want = NULL;
        if (!v)
            return pl_errprintf(errp, "--grow: '%s' is not KEY=VALUE; want "
                                "%s", kv, form);
        *v++ = '\0';
        unsigned long n = strtoul(v, &end, 10);
        bool num = *v >= '0' && *v <= '9' && !*end;
        if (!strcmp(kv, "max") || !strcmp(kv, "nodes")) {
            if (!num || n < 1 || n > PL_ALLOC_MAX_NODES)
                want = nodes;
            else if (*kv == 'm') {
                c->max = (uint32_t)n;
                has_max = true;
            }
            else
                c->nodes = (uint32_t)n;
        }
        else if (!strcmp(kv, "pending")) {
            if (!num || n < 1 || n > 100)
                want = "a number from 1 to 100";
            else
                c->pending = (uint32_t)n;
        }
        else if (!strcmp(kv, "idle") || !strcmp(kv, "drain")) {
            if (secs(v) < 0)
                want = "a duration: seconds, or a number with s, m or h";
            else
                *(*kv == 'i' ? &c->idle : &c->drain) = secs(v);
        }
        else if (!strcmp(kv, "time")) {
            if (!pl_alloc_time_ok(v))
                want = "a Slurm time limit (M, M:S, H:M:S, D-H[:M[:S]])";
            else
                snprintf(c->time, sizeof(c->time), "%s", v);
        }
        else if (!strcmp(kv, "partition")) {
            if (!pl_alloc_part_ok(v))
                want = "a Slurm partition name";
            else
                snprintf(c->partition, sizeof(c->partition), "%s", v);
        }
        else
            return pl_errprintf(errp, "--grow: no key '%s'; want %s", kv,
                                form);
        if (want)
            return pl_errprintf(errp, "--grow: %s='%s': want %s", kv, v,
                                want);
    }
    if (!has_max)
        return pl_errprintf(errp, "--grow: no max=K (the most nodes it "
                            "adds); want %s", form);
    if (c->nodes > c->max)
        c->nodes = c->max;
    errno = saved;
    return 0;
}
