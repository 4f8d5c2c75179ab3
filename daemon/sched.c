/* daemon/sched.c - the live tasks, the queue, and placement on nodes */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/sched.h"
#include "proto/msg.h"
#include "proto/state.h"

/* How far one pass looks past tasks that fit nowhere: bounds the cost of
 * a pass when the head of a long queue is blocked (1,000 skips cost
 * about 10 us). */
#define SCAN_MAX 1000

TAILQ_HEAD(pl_dqueue, pl_dtask);

struct pl_sched {
    struct pl_dtask **tab; /* by id: ids are dense, from 1 */
    size_t cap;
    struct pl_dqueue queue;
    size_t nqueued;
    struct pl_node **nodes;
    size_t nnodes;
    size_t rr;             /* node to try first, rotating */
};

struct pl_sched *pl_sched_new(void)
{
    struct pl_sched *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    TAILQ_INIT(&s->queue);
    return s;
}

static void task_free(struct pl_dtask *t)
{
    pl_strv_free(t->argv);
    pl_strv_free(t->env);
    free(t->cwd);
    free(t->core_idx);
    free(t->gpu_idx);
    free(t);
}

void pl_sched_free(struct pl_sched *s)
{
    if (!s)
        return;
    int saved = errno;
    for (size_t i = 0; i < s->cap; i++)
        if (s->tab[i])
            task_free(s->tab[i]);
    free(s->tab);
    for (size_t i = 0; i < s->nnodes; i++)
        pl_node_free(s->nodes[i]);
    free(s->nodes);
    free(s);
    errno = saved;
}

struct pl_dtask *pl_sched_task_add(struct pl_sched *s, uint64_t id, int state,
                                   char ***argv, char ***env, char **cwd)
{
    struct pl_dtask *t;

    if (id == 0 || id > PL_SCHED_ID_MAX) {
        errno = EOVERFLOW;
        return NULL;
    }
    if (id >= s->cap) {
        size_t ncap = s->cap ? s->cap : 1024;
        while (ncap <= id)
            ncap *= 2;
        struct pl_dtask **ntab = realloc(s->tab, ncap * sizeof(*ntab));
        if (!ntab)
            return NULL;
        memset(ntab + s->cap, 0, (ncap - s->cap) * sizeof(*ntab));
        s->tab = ntab;
        s->cap = ncap;
    }
    if (s->tab[id]) {
        errno = EEXIST;
        return NULL;
    }
    if (!(t = calloc(1, sizeof(*t))))
        return NULL;
    t->id = id;
    t->state = state;
    t->argv = *argv;
    t->env = *env;
    t->cwd = *cwd;
    *argv = NULL;
    *env = NULL;
    *cwd = NULL;
    s->tab[id] = t;
    if (state == PL_ST_QUEUED) {
        TAILQ_INSERT_TAIL(&s->queue, t, qent);
        t->inq = true;
        s->nqueued++;
    }
    return t;
}

struct pl_dtask *pl_sched_task_get(struct pl_sched *s, uint64_t id)
{
    return id < s->cap ? s->tab[id] : NULL;
}

static void release(struct pl_dtask *t)
{
    if (t->node) {
        pl_node_release(t->node, t->id, t->core_idx, t->cores_per_rank,
                        t->gpu_idx, t->gpus_per_rank);
        t->node = NULL;
    }
}

void pl_sched_dequeue(struct pl_sched *s, struct pl_dtask *t)
{
    if (t->inq) {
        TAILQ_REMOVE(&s->queue, t, qent);
        t->inq = false;
        s->nqueued--;
    }
}

void pl_sched_task_remove(struct pl_sched *s, struct pl_dtask *t)
{
    pl_sched_dequeue(s, t);
    release(t);
    s->tab[t->id] = NULL;
    task_free(t);
}

void pl_sched_requeue(struct pl_sched *s, struct pl_dtask *t, bool head)
{
    release(t);
    t->state = PL_ST_QUEUED;
    t->cancel = false;
    if (t->inq)
        return;
    t->inq = true;
    if (head)
        TAILQ_INSERT_HEAD(&s->queue, t, qent);
    else
        TAILQ_INSERT_TAIL(&s->queue, t, qent);
    s->nqueued++;
}

size_t pl_sched_queued(const struct pl_sched *s)
{
    return s->nqueued;
}

int pl_sched_node_add(struct pl_sched *s, struct pl_node *n)
{
    struct pl_node **nn = realloc(s->nodes, (s->nnodes + 1) * sizeof(*nn));

    if (!nn)
        return -1;
    s->nodes = nn;
    s->nodes[s->nnodes++] = n;
    return 0;
}

struct pl_node *pl_sched_node_find(struct pl_sched *s, const char *name)
{
    for (size_t i = 0; i < s->nnodes; i++)
        if (!strcmp(s->nodes[i]->name, name))
            return s->nodes[i];
    return NULL;
}

struct pl_node *pl_sched_node_by_rid(struct pl_sched *s, const void *rid,
                                     size_t len)
{
    for (size_t i = 0; i < s->nnodes; i++)
        if (s->nodes[i]->ridlen == len && !memcmp(s->nodes[i]->rid, rid, len))
            return s->nodes[i];
    return NULL;
}

size_t pl_sched_nnodes(const struct pl_sched *s)
{
    return s->nnodes;
}

struct pl_node *pl_sched_node_at(struct pl_sched *s, size_t i)
{
    return i < s->nnodes ? s->nodes[i] : NULL;
}

void pl_sched_node_tasks(struct pl_sched *s, struct pl_node *n,
                         void (*cb)(struct pl_dtask *t, void *arg), void *arg)
{
    for (size_t i = 0; i < s->cap; i++) {
        struct pl_dtask *t = s->tab[i];
        if (t && (!n || t->node == n))
            cb(t, arg); /* may requeue or remove t */
    }
}

void pl_sched_max(const struct pl_sched *s, uint32_t *cores, uint32_t *gpus)
{
    *cores = *gpus = 0;
    for (size_t i = 0; i < s->nnodes; i++) {
        if (s->nodes[i]->ncores > *cores)
            *cores = s->nodes[i]->ncores;
        if (s->nodes[i]->ngpus > *gpus)
            *gpus = s->nodes[i]->ngpus;
    }
}

static int ensure_idx(struct pl_dtask *t)
{
    if (!t->core_idx
        && !(t->core_idx = calloc(t->cores_per_rank + 1, sizeof(uint32_t))))
        return -1;
    if (!t->gpu_idx
        && !(t->gpu_idx = calloc(t->gpus_per_rank + 1, sizeof(uint32_t))))
        return -1;
    return 0;
}

size_t pl_sched_run(struct pl_sched *s, pl_sched_place_f place, void *arg)
{
    size_t placed = 0, skipped = 0;
    struct pl_dtask *t, *next;

    if (s->nnodes == 0)
        return 0;
    for (t = TAILQ_FIRST(&s->queue); t && skipped < SCAN_MAX; t = next) {
        struct pl_node *n = NULL;
        next = TAILQ_NEXT(t, qent);
        for (size_t k = 0; k < s->nnodes; k++) {
            struct pl_node *c = s->nodes[(s->rr + k) % s->nnodes];
            if (c->state == PL_NODE_UP && c->want
                && c->free_cores >= t->cores_per_rank
                && c->free_gpus >= t->gpus_per_rank) {
                n = c;
                s->rr = (s->rr + k + 1) % s->nnodes;
                break;
            }
        }
        if (!n) {
            bool any = false;
            for (size_t k = 0; k < s->nnodes; k++)
                if (s->nodes[k]->state == PL_NODE_UP && s->nodes[k]->want
                    && s->nodes[k]->free_cores > 0)
                    any = true;
            if (!any)
                break; /* no node can take anything */
            skipped++;
            continue;
        }
        if (ensure_idx(t) < 0
            || pl_node_alloc(n, t->id, t->cores_per_rank, t->gpus_per_rank,
                             t->core_idx, t->gpu_idx) < 0) {
            skipped++;
            continue;
        }
        TAILQ_REMOVE(&s->queue, t, qent);
        t->inq = false;
        s->nqueued--;
        t->node = n;
        t->state = PL_ST_ASSIGNED;
        t->attempt++;
        place(t, n, arg);
        placed++;
    }
    return placed;
}
