/* proto/poolmsg.c - a pool's workers and their node's agent: the local
 * socket, its frames, and the messages (401-405) */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/poolmsg.h"
#include "proto/run.h"
#include "proto/spec.h"
#include "proto/strv.h"

static int bad(struct pl_error *errp, const char *what)
{
    errno = EPROTO;
    return pl_errprintf(errp, "%s", what);
}

void pl_pool_sock_prefix(const char *keydir, char buf[PL_POOL_PREFIX_MAX])
{
    /* FNV-1a, 64 bits: the name only has to differ between the pilots
     * of one node, and be the same for pilotd and every agent */
    uint64_t h = UINT64_C(14695981039346656037);

    for (const unsigned char *p = (const unsigned char *)keydir; *p; p++) {
        h ^= *p;
        h *= UINT64_C(1099511628211);
    }
    snprintf(buf, PL_POOL_PREFIX_MAX, "pilot-pool-%016llx",
             (unsigned long long)h);
}

int pl_pool_sock_addr(const char *prefix, const char *node,
                      struct sockaddr_un *sa, socklen_t *len)
{
    int n;

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    /* abstract: a NUL, then the name (no NUL counted) */
    n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "%s.%s", prefix,
                 node);
    if (n < 0 || (size_t)n >= sizeof(sa->sun_path) - 1) {
        errno = ENAMETOOLONG;
        return -1;
    }
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1
                       + (size_t)n);
    return 0;
}

void pl_wframe_header(unsigned char hdr[4], size_t len)
{
    hdr[0] = (unsigned char)(len >> 24);
    hdr[1] = (unsigned char)(len >> 16);
    hdr[2] = (unsigned char)(len >> 8);
    hdr[3] = (unsigned char)len;
}

size_t pl_wframe_len(const unsigned char hdr[4])
{
    return ((size_t)hdr[0] << 24) | ((size_t)hdr[1] << 16)
           | ((size_t)hdr[2] << 8) | hdr[3];
}

int pl_wcall_tag(uint64_t id, uint64_t attempt)
{
    /* MPI_TAG_UB is at least 32767; the ranks of one task are disjoint
     * from every other task's, so tags need not differ between tasks,
     * but a distinct one makes a mix-up fail rather than match */
    return (int)((id * 31 + attempt) % 32767);
}

void pl_whello_encode(struct pl_wbuf *w, const struct pl_whello *h)
{
    pl_wbuf_init(w, PL_MSG_W_HELLO, 0);
    pl_wm_str(&w->body, "pool", h->pool);
    pl_wm_uint(&w->body, "job", h->job);
    pl_wm_uint(&w->body, "attempt", h->attempt);
    pl_wm_uint(&w->body, "world_rank", h->world_rank);
    pl_wm_uint(&w->body, "world_size", h->world_size);
    pl_wm_int(&w->body, "pid", h->pid);
    pl_wm_bool(&w->body, "python", h->python);
    if (h->nccl)
        pl_wm_str(&w->body, "nccl", h->nccl);
}

int pl_whello_decode(const msgpack_object *body, struct pl_whello *h,
                     struct pl_error *errp)
{
    memset(h, 0, sizeof(*h));
    if (pl_mp_str(body, "pool", true, PL_POOL_NAME_MAX, &h->pool, errp) < 0
        || pl_mp_uint(body, "job", true, UINT64_MAX, &h->job, errp) < 0
        || pl_mp_uint(body, "attempt", true, UINT32_MAX, &h->attempt, errp)
               < 0
        || pl_mp_uint(body, "world_size", true, PL_POOL_MAX_WORKERS,
                      &h->world_size, errp) < 0
        || pl_mp_uint(body, "world_rank", true, PL_POOL_MAX_WORKERS - 1,
                      &h->world_rank, errp) < 0
        || pl_mp_int(body, "pid", true, &h->pid, errp) < 0
        || pl_mp_bool(body, "python", false, &h->python, errp) < 0
        || pl_mp_str(body, "nccl", false, 1024, &h->nccl, errp) < 0)
        goto error;
    if (!pl_pool_name_ok(h->pool)) {
        bad(errp, "hello: bad pool name");
        goto error;
    }
    if (h->world_size == 0 || h->world_rank >= h->world_size) {
        bad(errp, "hello: world_rank out of range");
        goto error;
    }
    if (h->pid <= 0 || h->pid > INT32_MAX) {
        bad(errp, "hello: pid out of range");
        goto error;
    }
    return 0;
error:
    pl_whello_clear(h);
    return -1;
}

void pl_whello_clear(struct pl_whello *h)
{
    int e = errno;

    free(h->pool);
    free(h->nccl);
    memset(h, 0, sizeof(*h));
    errno = e;
}

void pl_wcall_encode(struct pl_wbuf *w, const struct pl_wcall *c)
{
    pl_wbuf_init(w, PL_MSG_W_CALL, 0);
    pl_wm_uint(&w->body, "id", c->id);
    pl_wm_uint(&w->body, "attempt", c->attempt);
    pl_wm_uint(&w->body, "rank", c->rank);
    pl_wm_uint(&w->body, "size", c->size);
    pl_wm_uintv(&w->body, "group", c->group, (uint32_t)c->size);
    pl_wm_str(&w->body, "fn", pl_fn_name(c->fn));
    pl_wm_strv(&w->body, "argv", c->argv);
    if (c->env)
        pl_wm_strv(&w->body, "env", c->env);
    if (c->cwd)
        pl_wm_str(&w->body, "cwd", c->cwd);
    pl_wm_str(&w->body, "stdout", c->out);
    pl_wm_str(&w->body, "stderr", c->err);
    if (c->array_index >= 0)
        pl_wm_int(&w->body, "array_index", c->array_index);
}

int pl_wcall_decode(const msgpack_object *body, struct pl_wcall *c,
                    struct pl_error *errp)
{
    char *fn = NULL;
    uint32_t ng = 0;
    int has;

    memset(c, 0, sizeof(*c));
    c->array_index = -1;
    if (pl_mp_uint(body, "id", true, UINT64_MAX, &c->id, errp) < 0
        || pl_mp_uint(body, "attempt", true, UINT32_MAX, &c->attempt, errp)
               < 0
        || pl_mp_uint(body, "size", true, PL_POOL_MAX_WORKERS, &c->size,
                      errp) < 0
        || pl_mp_uint(body, "rank", true, PL_POOL_MAX_WORKERS - 1, &c->rank,
                      errp) < 0
        || pl_mp_uintv(body, "group", true, PL_POOL_MAX_WORKERS,
                       PL_POOL_MAX_WORKERS - 1, &c->group, &ng, errp) < 0
        || pl_mp_str(body, "fn", true, 8, &fn, errp) < 0
        || pl_mp_strv(body, "argv", true, 1, PL_SPEC_MAX_ARGV,
                      PL_SPEC_MAX_ARG, &c->argv, errp) < 0
        || pl_mp_strv(body, "env", false, 0, PL_RUN_MAX_ENV, PL_SPEC_MAX_ARG,
                      &c->env, errp) < 0
        || pl_mp_str(body, "cwd", false, PL_SPEC_MAX_CWD, &c->cwd, errp) < 0
        || pl_mp_str(body, "stdout", true, PL_RUN_MAX_PATH, &c->out, errp)
               < 0
        || pl_mp_str(body, "stderr", true, PL_RUN_MAX_PATH, &c->err, errp)
               < 0
        || (has = pl_mp_int(body, "array_index", false, &c->array_index,
                            errp)) < 0)
        goto error;
    c->fn = pl_fn_parse(fn);
    free(fn);
    fn = NULL;
    if (c->fn != PL_FN_C && c->fn != PL_FN_PY) {
        bad(errp, "call: field 'fn': want c or py");
        goto error;
    }
    if (c->size == 0 || c->rank >= c->size || ng != c->size) {
        bad(errp, "call: rank, size and group do not agree");
        goto error;
    }
    /* a bitmap of the world ranks seen (8 KiB): pairwise comparison
     * would be 2^31 steps for a group of PL_POOL_MAX_WORKERS, seconds in
     * every worker of a large task */
    {
        unsigned char seen[PL_POOL_MAX_WORKERS / 8] = { 0 };
        for (uint32_t i = 0; i < ng; i++) {
            uint64_t g = c->group[i]; /* < PL_POOL_MAX_WORKERS: decoded */
            if (seen[g / 8] & (1u << (g % 8))) {
                bad(errp, "call: a world rank twice in 'group'");
                goto error;
            }
            seen[g / 8] |= (unsigned char)(1u << (g % 8));
        }
    }
    if (!c->argv[0][0] || !strchr(c->argv[0], ':')) {
        bad(errp, "call: argv[0] is not FILE:SYMBOL");
        goto error;
    }
    for (char **e = c->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e) {
            bad(errp, "call: field 'env': want KEY=VALUE entries");
            goto error;
        }
    }
    if ((c->cwd && !*c->cwd) || !*c->out || !*c->err) {
        bad(errp, "call: an empty path");
        goto error;
    }
    if (has == 1 && c->array_index < 0) {
        bad(errp, "call: array_index out of range");
        goto error;
    }
    return 0;
error:
    free(fn);
    pl_wcall_clear(c);
    return -1;
}

void pl_wcall_clear(struct pl_wcall *c)
{
    int e = errno;

    free(c->group);
    pl_strv_free(c->argv);
    pl_strv_free(c->env);
    free(c->cwd);
    free(c->out);
    free(c->err);
    memset(c, 0, sizeof(*c));
    c->array_index = -1;
    errno = e;
}

void pl_wentered_encode(struct pl_wbuf *w, const struct pl_wentered *e)
{
    pl_wbuf_init(w, PL_MSG_W_ENTERED, 0);
    pl_wm_uint(&w->body, "id", e->id);
    pl_wm_uint(&w->body, "attempt", e->attempt);
    pl_wm_double(&w->body, "time", e->time);
}

int pl_wentered_decode(const msgpack_object *body, struct pl_wentered *e,
                       struct pl_error *errp)
{
    memset(e, 0, sizeof(*e));
    if (pl_mp_uint(body, "id", true, UINT64_MAX, &e->id, errp) < 0
        || pl_mp_uint(body, "attempt", true, UINT32_MAX, &e->attempt, errp)
               < 0
        || pl_mp_double(body, "time", true, &e->time, errp) < 0)
        return -1;
    if (!isfinite(e->time) || e->time <= 0)
        e->time = 0; /* the agent's clock stands in */
    return 0;
}

void pl_wreturn_encode(struct pl_wbuf *w, const struct pl_wreturn *r)
{
    pl_wbuf_init(w, PL_MSG_W_RETURN, 0);
    pl_wm_uint(&w->body, "id", r->id);
    pl_wm_uint(&w->body, "attempt", r->attempt);
    pl_wm_int(&w->body, "code", r->code);
    if (r->error)
        pl_wm_str(&w->body, "error", r->error);
    pl_wm_double(&w->body, "time", r->time);
}

int pl_wreturn_decode(const msgpack_object *body, struct pl_wreturn *r,
                      struct pl_error *errp)
{
    memset(r, 0, sizeof(*r));
    if (pl_mp_uint(body, "id", true, UINT64_MAX, &r->id, errp) < 0
        || pl_mp_uint(body, "attempt", true, UINT32_MAX, &r->attempt, errp)
               < 0
        || pl_mp_int(body, "code", true, &r->code, errp) < 0
        || pl_mp_str(body, "error", false, 4096, &r->error, errp) < 0
        || pl_mp_double(body, "time", true, &r->time, errp) < 0) {
        pl_wreturn_clear(r);
        return -1;
    }
    if (r->code < 0 || r->code > 255) {
        pl_wreturn_clear(r);
        return bad(errp, "return: code out of 0..255");
    }
    if (r->error)
        pl_utf8_repair(r->error);
    if (!isfinite(r->time) || r->time <= 0)
        r->time = 0;
    return 0;
}

void pl_wreturn_clear(struct pl_wreturn *r)
{
    int e = errno;

    free(r->error);
    memset(r, 0, sizeof(*r));
    errno = e;
}

void pl_wcrash_encode(struct pl_wbuf *w, int64_t signal)
{
    pl_wbuf_init(w, PL_MSG_W_CRASH, 0);
    pl_wm_int(&w->body, "signal", signal);
}

int pl_wcrash_decode(const msgpack_object *body, int64_t *signal,
                     struct pl_error *errp)
{
    int64_t s;

    if (pl_mp_int(body, "signal", true, &s, errp) < 0)
        return -1;
    if (s < 0 || s > 64)
        return bad(errp, "crash: signal out of range");
    *signal = s;
    return 0;
}
