/* daemon/placeidx.c - the nodes indexed by free capacity, for placement */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "daemon/node.h"
#include "daemon/placeidx.h"

/* A leaf (one node), or the largest of the leaves below. */
struct ent {
    uint32_t cores, gpus;  /* free, while up and not cordoned */
    uint32_t tcores, tgpus; /* all it has, while up (cordoned or not):
                               the question of a fit on idle nodes */
    bool idle;             /* up, not cordoned, nothing held */
    bool resv;             /* leaf: reserved; inner: all below are */
    /* prefetch (daemon/prefetch.c): inner entries hold the least, the
     * largest, the sum or any of the leaves below */
    uint32_t pmin;         /* npref while up and not cordoned, else
                              UINT32_MAX (least) */
    bool bind;             /* up, not cordoned, holds prefetched tasks
                              and has a free core (any) */
    bool held;             /* holds prefetched tasks (any) */
    bool back;             /* ... and cordoned or held out of priority
                              order (any) */
    bool held_resv;        /* ... and reserved (any) */
    int32_t lo;            /* pref_lo while it holds some, else
                              INT32_MAX (least) */
    uint32_t spare_max;    /* free cores while up, not cordoned, not
                              reserved and holding nothing (largest) */
    uint64_t spare;        /* the same (sum) */
    uint64_t taking;       /* pref_taking (sum) */
};

struct pl_placeidx {
    struct ent *t;         /* t[1] the root, t[size + k] node k's leaf */
    size_t size;           /* leaves: a power of 2 */
    size_t n;              /* nodes */
    bool *free_up;         /* per node: up with a free core */
    size_t nfree;          /* nodes free_up and not reserved */
    const struct pl_node **node; /* per node: it (not owned) */
};

struct pl_placeidx *pl_placeidx_new(void)
{
    return calloc(1, sizeof(struct pl_placeidx));
}

void pl_placeidx_free(struct pl_placeidx *x)
{
    if (!x)
        return;
    int saved = errno;
    free(x->t);
    free(x->free_up);
    free(x->node);
    free(x);
    errno = saved;
}

static bool ent_eq(const struct ent *a, const struct ent *b)
{
    return a->cores == b->cores && a->gpus == b->gpus && a->idle == b->idle
           && a->resv == b->resv && a->tcores == b->tcores
           && a->tgpus == b->tgpus && a->pmin == b->pmin
           && a->bind == b->bind && a->held == b->held && a->back == b->back
           && a->held_resv == b->held_resv && a->lo == b->lo
           && a->spare_max == b->spare_max && a->spare == b->spare
           && a->taking == b->taking;
}

/* Entry i from its two children. */
static struct ent merge(const struct ent *t, size_t i)
{
    const struct ent *a = &t[2 * i], *b = &t[2 * i + 1];

    return (struct ent){
        .cores = a->cores > b->cores ? a->cores : b->cores,
        .gpus = a->gpus > b->gpus ? a->gpus : b->gpus,
        .tcores = a->tcores > b->tcores ? a->tcores : b->tcores,
        .tgpus = a->tgpus > b->tgpus ? a->tgpus : b->tgpus,
        .idle = a->idle || b->idle,
        .resv = a->resv && b->resv,
        .pmin = a->pmin < b->pmin ? a->pmin : b->pmin,
        .bind = a->bind || b->bind,
        .held = a->held || b->held,
        .back = a->back || b->back,
        .held_resv = a->held_resv || b->held_resv,
        .lo = a->lo < b->lo ? a->lo : b->lo,
        .spare_max = a->spare_max > b->spare_max ? a->spare_max
                                                 : b->spare_max,
        .spare = a->spare + b->spare,
        .taking = a->taking + b->taking,
    };
}

/* Node 'n''s leaf, reserved or not. */
static struct ent leaf(const struct pl_node *n, bool resv)
{
    bool up = n->state == PL_NODE_UP, open = up && !n->cordon;
    bool held = n->npref > 0, spare = open && !held && !resv;

    return (struct ent){
        .cores = open ? n->free_cores : 0,
        .gpus = open ? n->free_gpus : 0,
        .tcores = up ? n->ncores : 0,
        .tgpus = up ? n->ngpus : 0,
        .idle = open && n->free_cores == n->ncores
                && n->free_gpus == n->ngpus,
        .resv = resv,
        .pmin = open ? n->npref : UINT32_MAX,
        .bind = open && held && n->free_cores > 0,
        .held = held,
        .back = held && (n->cordon || n->pref_inv),
        .held_resv = held && resv,
        .lo = held ? n->pref_lo : INT32_MAX,
        .spare_max = spare ? n->free_cores : 0,
        .spare = spare ? n->free_cores : 0,
        .taking = n->pref_taking,
    };
}

static void pull_up(struct pl_placeidx *x, size_t i)
{
    for (i /= 2; i >= 1; i /= 2) {
        struct ent e = merge(x->t, i);
        if (ent_eq(&e, &x->t[i]))
            break; /* nothing above changes either */
        x->t[i] = e;
    }
}

/* Twice the leaves, the old ones copied and the tree rebuilt. */
static int grow(struct pl_placeidx *x)
{
    size_t size = x->size ? 2 * x->size : 16;
    struct ent *t = calloc(2 * size, sizeof(*t));
    bool *fu = realloc(x->free_up, size * sizeof(*fu));
    const struct pl_node **nd = NULL;

    if (fu)
        x->free_up = fu;
    if (fu && (nd = realloc(x->node, size * sizeof(*nd))))
        x->node = nd;
    if (!t || !fu || !nd) {
        free(t);
        errno = ENOMEM;
        return -1;
    }
    for (size_t k = 0; k < size; k++)
        t[size + k] = k < x->n ? x->t[x->size + k]
                               : (struct ent){ .pmin = UINT32_MAX,
                                               .lo = INT32_MAX };
    for (size_t i = size; i-- > 1;)
        t[i] = merge(t, i);
    free(x->t);
    x->t = t;
    x->size = size;
    return 0;
}

int pl_placeidx_add(struct pl_placeidx *x, struct pl_node *n)
{
    if (x->n == x->size && grow(x) < 0)
        return -1;
    n->pidx = x;
    n->pidx_at = (uint32_t)x->n;
    x->free_up[x->n] = false;
    x->node[x->n] = n;
    x->n++;
    pl_placeidx_update(x, n);
    return 0;
}

void pl_placeidx_update(struct pl_placeidx *x, const struct pl_node *n)
{
    size_t k = n->pidx_at, i = x->size + k;
    bool fu = n->state == PL_NODE_UP && n->free_cores > 0;
    struct ent *e = &x->t[i];

    if (fu != x->free_up[k]) {
        x->free_up[k] = fu;
        if (!e->resv)
            x->nfree += fu ? 1 : -1;
    }
    struct ent v = leaf(n, e->resv);
    if (!ent_eq(&v, e)) {
        *e = v;
        pull_up(x, i);
    }
}

void pl_placeidx_set_resv(struct pl_placeidx *x, size_t k, bool on)
{
    if (k >= x->n || x->t[x->size + k].resv == on)
        return;
    struct ent *e = &x->t[x->size + k];

    *e = leaf(x->node[k], on);
    if (x->free_up[k])
        x->nfree += on ? -1 : 1;
    pull_up(x, x->size + k);
}

size_t pl_placeidx_nfree(const struct pl_placeidx *x)
{
    return x->nfree;
}

/* The first leaf in [lo, hi) under entry i (covering [l, r)) that 'w'
 * takes, or -1: subtrees whose largest free cores or GPUs are too few,
 * with no idle node for an exclusive rank, or all reserved, are passed
 * over whole. */
static long find(const struct pl_placeidx *x, size_t i, size_t l, size_t r,
                 size_t lo, size_t hi, const struct pl_placeidx_want *w)
{
    const struct ent *e = &x->t[i];

    if (r <= lo || l >= hi)
        return -1;
    switch (w->pref) {
    case PL_PIDX_CAP:
        if (w->as_idle ? e->tcores < w->cores || e->tgpus < w->gpus
                       : e->cores < w->cores || e->gpus < w->gpus
                             || (w->idle && !e->idle))
            return -1;
        break;
    case PL_PIDX_ROOM:
        if (e->tcores < w->cores || e->pmin >= w->room)
            return -1;
        break;
    case PL_PIDX_BIND:
        if (!e->bind)
            return -1;
        break;
    case PL_PIDX_HELD:
        if (!e->held)
            return -1;
        break;
    case PL_PIDX_BACK:
        if (!e->back && !(w->top_set && w->top > e->lo)
            && !(w->resv_back && e->held_resv))
            return -1;
        break;
    }
    if (w->skip_resv && e->resv)
        return -1;
    if (r - l == 1)
        return !w->ok || w->ok(l, w->arg) ? (long)l : -1;
    size_t m = l + (r - l) / 2;
    long k = find(x, 2 * i, l, m, lo, hi, w);
    return k >= 0 ? k : find(x, 2 * i + 1, m, r, lo, hi, w);
}

long pl_placeidx_first(const struct pl_placeidx *x, size_t from,
                       const struct pl_placeidx_want *w)
{
    long k;

    if (x->n == 0)
        return -1;
    if (from >= x->n)
        from = 0;
    if ((k = find(x, 1, 0, x->size, from, x->n, w)) >= 0 || from == 0)
        return k;
    return find(x, 1, 0, x->size, 0, from, w);
}

void pl_placeidx_spare(const struct pl_placeidx *x, uint64_t *sum,
                       uint32_t *widest)
{
    *sum = x->n ? x->t[1].spare : 0;
    *widest = x->n ? x->t[1].spare_max : 0;
}

uint64_t pl_placeidx_taking(const struct pl_placeidx *x)
{
    return x->n ? x->t[1].taking : 0;
}

long pl_placeidx_next(const struct pl_placeidx *x, size_t from,
                      const struct pl_placeidx_want *w)
{
    if (from >= x->n)
        return -1;
    return find(x, 1, 0, x->size, from, x->n, w);
}
