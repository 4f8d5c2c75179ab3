/* daemon/pool.c - a pool of workers: its slots and its queue, and the
 * placement of its tasks on them (daemon/pool.h) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/node.h"
#include "daemon/pool.h"
#include "proto/strv.h"

const char *pl_pool_state_name(int st)
{
    switch (st) {
    case PL_POOL_STARTING: return "starting";
    case PL_POOL_READY: return "ready";
    case PL_POOL_RESTARTING: return "restarting";
    case PL_POOL_STOPPING: return "stopping";
    case PL_POOL_FAILED: return "failed";
    }
    return "unknown";
}

struct pl_pool *pl_pool_new(const char *name, uint32_t nodes_req,
                            uint32_t rpn, uint32_t cpr, uint32_t gpr,
                            int launcher)
{
    struct pl_pool *p = calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->nodes_req = nodes_req;
    p->rpn = rpn;
    p->cpr = cpr;
    p->gpr = gpr;
    p->launcher = launcher;
    p->state = PL_POOL_STARTING;
    p->last_restart = p->last_start = -1;
    TAILQ_INIT(&p->queue);
    return p;
}

void pl_pool_free(struct pl_pool *p)
{
    if (!p)
        return;
    int saved = errno;
    free(p->slot);
    free(p->early);
    pl_strv_free(p->env);
    free(p);
    errno = saved;
}

int pl_pool_job_placed(struct pl_pool *p, const struct pl_dtask *job)
{
    struct pl_pslot *s = calloc(job->ranks, sizeof(*s));

    if (!s)
        return -1;
    for (uint32_t i = 0; i < job->ranks; i++)
        s[i].node = job->rank[i].node;
    free(p->slot);
    p->slot = s;
    p->nslots = job->ranks;
    p->nready = p->nbusy = 0;
    p->attempt = job->attempt;
    return 0;
}

int pl_pool_slot_ready(struct pl_pool *p, uint32_t attempt, uint32_t wr,
                       const struct pl_node *n)
{
    if (attempt != p->attempt || wr >= p->nslots || p->slot[wr].node != n) {
        errno = EINVAL;
        return -1;
    }
    if (p->slot[wr].ready)
        return 0;
    p->slot[wr].ready = true;
    p->nready++;
    return p->nready == p->nslots && (p->state == PL_POOL_STARTING
                                      || p->state == PL_POOL_RESTARTING);
}

void pl_pool_enqueue(struct pl_pool *p, struct pl_dtask *t, bool head)
{
    struct pl_dtask *q;

    if (t->inpq)
        return;
    /* highest priority first; 'head' goes before its equals, else after
     * them.  From the tail: a stream of one priority appends in O(1) */
    TAILQ_FOREACH_REVERSE(q, &p->queue, pl_pqueue, pent)
        if (head ? q->priority > t->priority : q->priority >= t->priority)
            break;
    if (q)
        TAILQ_INSERT_AFTER(&p->queue, q, t, pent);
    else
        TAILQ_INSERT_HEAD(&p->queue, t, pent);
    t->inpq = true;
    p->nqueued++;
}

void pl_pool_dequeue(struct pl_pool *p, struct pl_dtask *t)
{
    if (!t->inpq)
        return;
    TAILQ_REMOVE(&p->queue, t, pent);
    t->inpq = false;
    p->nqueued--;
}

void pl_pool_rank_release(struct pl_pool *p, struct pl_dtask *t, uint32_t r)
{
    uint32_t w = t->rank[r].slot;

    /* N.B. a slot of an earlier attempt of the job is another worker:
     * it was made anew, free, when the job was placed again */
    if (w < p->nslots && p->slot[w].task == t->id && p->slot[w].rank == r) {
        p->slot[w].task = 0;
        p->nbusy--;
    }
}

/* The nodes of the pool: runs of slots on one node (the job's ranks are
 * in node order), with their free workers now or, 'idle', all. */
struct run {
    uint32_t first, n, free;
};

static uint32_t runs_of(const struct pl_pool *p, struct run *run, bool idle)
{
    uint32_t nr = 0;

    for (uint32_t i = 0; i < p->nslots; i++) {
        const struct pl_pslot *s = &p->slot[i];
        if (!nr || p->slot[run[nr - 1].first].node != s->node)
            run[nr++] = (struct run){ i, 0, 0 };
        run[nr - 1].n++;
        if (idle || (s->ready && !s->task && s->node
                     && s->node->state == PL_NODE_UP))
            run[nr - 1].free++;
    }
    return nr;
}

/* Most free first; the pool's node order among equals. */
static int by_free(const void *a, const void *b)
{
    const struct run *x = a, *y = b;

    if (x->free != y->free)
        return x->free > y->free ? -1 : 1;
    return (x->first > y->first) - (x->first < y->first);
}

/* How many ranks of 't' each of the first runs (sorted) takes: into
 * take[], the number of nodes used; 0 if it does not fit. */
static uint32_t plan(const struct pl_dtask *t, struct run *run, uint32_t nr,
                     uint32_t *take)
{
    uint32_t want = t->ranks, per = t->ranks_per_node, nn = t->nodes_req;
    uint32_t used = 0, left = want;

    qsort(run, nr, sizeof(*run), by_free);
    if (per) {
        /* 'per' on each node, fewer on the last ones if the ranks run
         * out (at least one each) */
        uint32_t k = nn ? nn : (want + per - 1) / per;
        uint32_t over = k * per > want ? k * per - want : 0;
        if (k == 0 || k > nr)
            return 0;
        for (uint32_t i = k; i-- > 0;) {
            uint32_t cut = per - 1 < over ? per - 1 : over;
            take[i] = per - cut;
            over -= cut;
            if (run[i].free < take[i])
                return 0;
        }
        return over ? 0 : k;
    }
    if (nn) {
        /* exactly 'nn' nodes: one each, then fill in order */
        if (nn > nr || run[nn - 1].free < 1)
            return 0;
        for (uint32_t i = 0; i < nn; i++)
            take[i] = 1;
        left = want - nn;
        for (uint32_t i = 0; i < nn && left; i++) {
            uint32_t more = run[i].free - 1 < left ? run[i].free - 1 : left;
            take[i] += more;
            left -= more;
        }
        return left ? 0 : nn;
    }
    /* as few nodes as fit: the fullest first */
    for (uint32_t i = 0; i < nr && left; i++) {
        if (!run[i].free)
            break;
        take[i] = run[i].free < left ? run[i].free : left;
        left -= take[i];
        used++;
    }
    return left ? 0 : used;
}

bool pl_pool_fits(const struct pl_pool *p, const struct pl_dtask *t,
                  char *why, size_t len)
{
    uint32_t nodes = p->nodes_req, workers = p->nslots;

    if (!workers) {
        /* the job not placed yet: its shape as asked (all nodes: unknown,
         * leave it to placement) */
        if (!nodes) {
            if (t->ranks_per_node > p->rpn && why)
                snprintf(why, len, "pool %s has %u workers per node, the "
                         "task wants %u", p->name, p->rpn,
                         t->ranks_per_node);
            return t->ranks_per_node <= p->rpn;
        }
        workers = nodes * p->rpn;
    }
    else {
        struct run run[p->nslots];
        uint32_t take[p->nslots];
        uint32_t nr = runs_of(p, run, true);
        if (plan(t, run, nr, take))
            return true;
        nodes = nr;
    }
    if (t->ranks > workers) {
        if (why)
            snprintf(why, len, "pool %s has %u workers (%u node%s x %u), "
                     "the task wants %u ranks", p->name, workers, nodes,
                     nodes == 1 ? "" : "s", p->rpn, t->ranks);
        return false;
    }
    if (t->ranks_per_node > p->rpn || t->nodes_req > nodes) {
        if (why)
            snprintf(why, len, "pool %s has %u node%s of %u workers, the "
                     "task wants %u ranks on %u node%s (%u a node at most)",
                     p->name, nodes, nodes == 1 ? "" : "s", p->rpn, t->ranks,
                     t->nodes_req ? t->nodes_req : 1,
                     t->nodes_req == 1 ? "" : "s",
                     t->ranks_per_node ? t->ranks_per_node : t->ranks);
        return false;
    }
    return true;
}

/* Put the ranks of 't' on the workers 'take' says of the sorted runs:
 * node by node, the lowest free world ranks first.  0, or -1 (ENOMEM). */
static int take_slots(struct pl_pool *p, struct pl_dtask *t,
                      const struct run *run, const uint32_t *take,
                      uint32_t used)
{
    uint32_t r = 0;
    size_t len = 1, off = 0;

    if (!(t->rank = calloc(t->ranks, sizeof(*t->rank))))
        return -1;
    for (uint32_t i = 0; i < used; i++)
        len += strlen(p->slot[run[i].first].node->name) + 1;
    if (!(t->nodelist = malloc(len))) {
        free(t->rank);
        t->rank = NULL;
        return -1;
    }
    t->nodelist[0] = '\0';
    for (uint32_t i = 0; i < used; i++) {
        struct pl_node *n = p->slot[run[i].first].node;
        uint32_t l = 0;
        for (uint32_t w = run[i].first; w < run[i].first + run[i].n
                                        && l < take[i]; w++) {
            struct pl_pslot *s = &p->slot[w];
            if (!s->ready || s->task)
                continue;
            struct pl_rank *k = &t->rank[r];
            k->node = n;
            k->slot = w;
            k->node_rank = i;
            k->local_rank = l++;
            k->local_size = take[i];
            s->task = t->id;
            s->rank = r++;
            p->nbusy++;
        }
        off += (size_t)snprintf(t->nodelist + off, len - off, "%s%s",
                                off ? "," : "", n->name);
    }
    t->nnodes = used;
    t->pool_attempt = p->attempt;
    return 0;
}

size_t pl_pool_place(struct pl_pool *p, pl_sched_place_f place, void *arg)
{
    size_t placed = 0;
    struct pl_dtask *t;

    if (p->state != PL_POOL_READY || !p->nslots)
        return 0;
    struct run run[p->nslots];
    uint32_t take[p->nslots];
    while ((t = TAILQ_FIRST(&p->queue)) && p->nbusy < p->nslots) {
        uint32_t nr = runs_of(p, run, false);
        uint32_t used = plan(t, run, nr, take);
        if (!used || take_slots(p, t, run, take, used) < 0)
            break; /* it waits, and those behind it too */
        pl_pool_dequeue(p, t);
        place(t, arg);
        placed++;
    }
    return placed;
}
