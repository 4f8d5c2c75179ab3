/* daemon/placeidx.c - the nodes indexed by free capacity, for placement */
#include <errno.h>
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
};

struct pl_placeidx {
    struct ent *t;         /* t[1] the root, t[size + k] node k's leaf */
    size_t size;           /* leaves: a power of 2 */
    size_t n;              /* nodes */
    bool *free_up;         /* per node: up with a free core */
    size_t nfree;          /* nodes free_up and not reserved */
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
    free(x);
    errno = saved;
}

static bool ent_eq(const struct ent *a, const struct ent *b)
{
    return a->cores == b->cores && a->gpus == b->gpus && a->idle == b->idle
           && a->resv == b->resv && a->tcores == b->tcores
           && a->tgpus == b->tgpus;
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

    if (!t || !fu) {
        free(t);
        if (fu)
            x->free_up = fu;
        errno = ENOMEM;
        return -1;
    }
    x->free_up = fu;
    for (size_t k = 0; k < x->n; k++)
        t[size + k] = x->t[x->size + k];
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
    x->n++;
    pl_placeidx_update(x, n);
    return 0;
}

void pl_placeidx_update(struct pl_placeidx *x, const struct pl_node *n)
{
    size_t k = n->pidx_at, i = x->size + k;
    bool up = n->state == PL_NODE_UP, open = up && !n->cordon;
    bool fu = up && n->free_cores > 0;
    struct ent *e = &x->t[i];

    if (fu != x->free_up[k]) {
        x->free_up[k] = fu;
        if (!e->resv)
            x->nfree += fu ? 1 : -1;
    }
    struct ent v = {
        .cores = open ? n->free_cores : 0,
        .gpus = open ? n->free_gpus : 0,
        .tcores = up ? n->ncores : 0,
        .tgpus = up ? n->ngpus : 0,
        .idle = open && n->free_cores == n->ncores
                && n->free_gpus == n->ngpus,
        .resv = e->resv,
    };
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

    e->resv = on;
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
    if (w->as_idle ? e->tcores < w->cores || e->tgpus < w->gpus
                   : e->cores < w->cores || e->gpus < w->gpus
                         || (w->idle && !e->idle))
        return -1;
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
