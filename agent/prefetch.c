/* agent/prefetch.c - the prefetched RUN entries, in order, and the cores
 * the ends of one flush freed (agent/prefetch.h) */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/prefetch.h"
#include "proto/strv.h"

struct pl_prefetch {
    struct pl_run *v;      /* owned entries, v[0] first */
    size_t n, cap;
    uint64_t *freed;       /* CPU ids freed since the last reset */
    size_t nfreed, capfreed;
};

struct pl_prefetch *pl_prefetch_new(void)
{
    return calloc(1, sizeof(struct pl_prefetch));
}

void pl_prefetch_clear(struct pl_prefetch *p)
{
    for (size_t i = 0; i < p->n; i++)
        pl_run_clear(&p->v[i]);
    p->n = 0;
    p->nfreed = 0;
}

void pl_prefetch_free(struct pl_prefetch *p)
{
    int saved = errno;

    if (!p)
        return;
    pl_prefetch_clear(p);
    free(p->v);
    free(p->freed);
    free(p);
    errno = saved;
}

int pl_prefetch_add(struct pl_prefetch *p, struct pl_run *r)
{
    if (pl_grow(&p->v, &p->cap, p->n, 1, sizeof(*p->v)) < 0)
        return -1;
    p->v[p->n++] = *r;
    memset(r, 0, sizeof(*r));
    return 0;
}

int pl_prefetch_unget(struct pl_prefetch *p, struct pl_run *r)
{
    if (pl_grow(&p->v, &p->cap, p->n, 1, sizeof(*p->v)) < 0)
        return -1;
    free(r->cores);
    r->cores = NULL;
    r->ncores = 0;
    memmove(&p->v[1], &p->v[0], p->n * sizeof(*p->v));
    p->v[0] = *r;
    p->n++;
    memset(r, 0, sizeof(*r));
    return 0;
}

static bool match(const struct pl_run *e, uint64_t id, uint64_t attempt,
                  bool one, uint64_t rank)
{
    return e->id == id && e->attempt == attempt && (!one || e->rank == rank);
}

bool pl_prefetch_holds(const struct pl_prefetch *p, uint64_t id,
                       uint64_t attempt, uint64_t rank)
{
    for (size_t i = 0; i < p->n; i++)
        if (match(&p->v[i], id, attempt, true, rank))
            return true;
    return false;
}

/* Entry i out into *r. */
static void take_at(struct pl_prefetch *p, size_t i, struct pl_run *r)
{
    *r = p->v[i];
    memmove(&p->v[i], &p->v[i + 1], (p->n - i - 1) * sizeof(*p->v));
    p->n--;
}

bool pl_prefetch_take(struct pl_prefetch *p, uint64_t id, uint64_t attempt,
                      bool one, uint64_t rank, struct pl_run *r)
{
    for (size_t i = 0; i < p->n; i++)
        if (match(&p->v[i], id, attempt, one, rank)) {
            take_at(p, i, r);
            return true;
        }
    return false;
}

size_t pl_prefetch_len(const struct pl_prefetch *p)
{
    return p->n;
}

int pl_prefetch_freed(struct pl_prefetch *p, const uint64_t *cores,
                      uint32_t n)
{
    if (!p->n || !n)
        return 0;
    if (pl_grow(&p->freed, &p->capfreed, p->nfreed, n, sizeof(*p->freed))
        < 0)
        return -1;
    memcpy(p->freed + p->nfreed, cores, n * sizeof(*cores));
    p->nfreed += n;
    return 0;
}

bool pl_prefetch_next(struct pl_prefetch *p, struct pl_run *r)
{
    uint64_t *c;

    if (!p->n || p->v[0].prefetch == 0 || p->v[0].prefetch > p->nfreed)
        return false;
    uint32_t k = p->v[0].prefetch;
    if (!(c = malloc(k * sizeof(*c))))
        return false;
    /* the last freed first: a task's cores stay together */
    p->nfreed -= k;
    memcpy(c, p->freed + p->nfreed, k * sizeof(*c));
    take_at(p, 0, r);
    r->cores = c;
    r->ncores = k;
    return true;
}

void pl_prefetch_reset(struct pl_prefetch *p)
{
    p->nfreed = 0;
}
