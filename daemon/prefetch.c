/* daemon/prefetch.c - tasks placed beyond a node's free cores (pilotd
 * --prefetch N), so that its agent starts the next one on the cores an
 * end frees without waiting for pilotd (docs/placement.md, "Prefetch")
 *
 * A prefetched rank holds no cores: its node lists it in 'pref' (placing
 * order, the order its agent holds it in) and its RUN entry carries
 * 'prefetch' (the cores it takes) instead of cores.  The agent starts it
 * only on cores freed by an end it reports in the same EVENTS message,
 * before the 'running' that names them: pilotd has freed them by then,
 * and pl_sched_pref_started() gives them to it.  When a node has free
 * cores and still prefetched tasks (their RUN arrived after the ends
 * that freed them), a pass binds the first to free cores and its RUN
 * goes again with them (pl_sched_pref_bind()); if an end started it on
 * other cores meanwhile, its 'running' moves it there.
 *
 * N.B. the passes ask the placement index (daemon/placeidx.h) which
 * nodes to look at: it follows each node's npref, pref_lo, pref_inv and
 * pref_taking (so whoever changes them calls pl_node_changed()), and a
 * pass costs O(log N) for each node it acts on, not O(N) for N nodes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/node.h"
#include "daemon/placeidx.h"
#include "daemon/sched.h"
#include "daemon/sched_private.h"

void pl_sched_set_prefetch(struct pl_sched *s, uint32_t n)
{
    s->prefetch = n;
}

/* Whether 't' may be prefetched: one rank of cores only, nothing that
 * needs pilotd's choice of a node or a worker. */
static bool eligible(const struct pl_dtask *t)
{
    return t->ranks == 1 && !t->nodes_req && !t->ranks_per_node
           && t->gpus_per_rank == 0 && t->cores_per_rank >= 1
           && !t->exclusive && !t->vetted && t->comm == PL_COMM_NONE
           && !t->pool && t->fn == PL_FN_NONE && !t->run && !t->rank;
}

int sched_pref_place(struct pl_sched *s, struct pl_dtask *t)
{
    size_t nn = s->nnodes;

    if (!s->prefetch || s->resv || !eligible(t) || nn == 0)
        return -1;
    /* the first node from 'rr' on, wrapping, up, not cordoned, not
     * reserved, with a slot left and cores enough */
    struct pl_placeidx_want w = { .pref = PL_PIDX_ROOM,
                                  .cores = t->cores_per_rank,
                                  .room = s->prefetch, .skip_resv = true };
    long found = pl_placeidx_first(s->idx, s->rr % nn, &w);
    if (found >= 0) {
        size_t k = (size_t)found;
        struct pl_node *n = s->nodes[k];
        struct pl_rank *rk;
        if (!(t->rank = calloc(1, sizeof(*t->rank)))
            || !(t->nodelist = strdup(n->name)))
            goto nomem;
        rk = t->rank;
        if (!(rk->core_idx = calloc(1, sizeof(uint32_t)))
            || !(rk->gpu_idx = calloc(1, sizeof(uint32_t))))
            goto nomem;
        rk->node = n;
        rk->local_size = 1;
        rk->pref = true;
        t->nnodes = 1;
        struct pl_dtask *last = TAILQ_LAST(&n->pref, pl_prefq);
        if (!last || t->priority < n->pref_lo)
            n->pref_lo = t->priority;
        if (last && t->priority > last->priority)
            n->pref_inv = true;
        TAILQ_INSERT_TAIL(&n->pref, t, prefent);
        n->npref++;
        pl_node_changed(n); /* the placement index */
        s->rr = (k + 1) % nn;
        return 0;
    }
    return -1;
nomem:
    sched_release(t);
    return -1;
}

void sched_pref_drop(struct pl_dtask *t, uint32_t r)
{
    struct pl_rank *k = &t->rank[r];

    if (!k->pref)
        return;
    TAILQ_REMOVE(&k->node->pref, t, prefent);
    if (--k->node->npref == 0)
        k->node->pref_inv = false;
    if (k->recalled && k->node->pref_taking >= t->cores_per_rank)
        k->node->pref_taking -= t->cores_per_rank;
    k->pref = false;
    pl_node_changed(k->node); /* the placement index */
}

int pl_sched_pref_started(struct pl_dtask *t, struct pl_node *n,
                          const uint64_t *cpu, uint32_t ncpu)
{
    struct pl_rank *k;
    char list[PL_SPEC_MAX_CPR * 8 + 1];
    size_t off = 0;
    uint32_t *c, *g, nc, ng;

    if (!t->rank || t->ranks != 1 || (k = t->rank)->node != n || !ncpu) {
        errno = EINVAL;
        return -1;
    }
    for (uint32_t i = 0; i < ncpu && off < sizeof(list) - 24; i++)
        off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%llu",
                                i ? "," : "", (unsigned long long)cpu[i]);
    /* what it held: nothing (a prefetch), or the cores a pass bound it
     * to (an end started it on others first), or nothing while counted
     * on the node (a restarted pilotd took it back with no cores) */
    bool counted = !k->pref && k->ncores == 0;
    if (k->pref)
        sched_pref_drop(t, 0);
    else
        pl_node_release(n, t->id, k->core_idx, k->ncores, k->gpu_idx,
                        k->ngpus);
    free(k->core_idx);
    k->core_idx = NULL;
    k->ncores = 0;
    if (pl_node_claim(n, t->id, list, NULL, &c, &nc, &g, &ng) < 0)
        return -1;
    if (counted && n->running > 0)
        n->running--; /* the claim counted it again */
    free(k->gpu_idx);
    k->core_idx = c;
    k->ncores = nc;
    k->gpu_idx = g;
    k->ngpus = ng;
    if (nc != ncpu) {
        errno = EBUSY;
        return -1;
    }
    return 0;
}

/* The first prefetched task of 'n' not being taken back. */
static struct pl_dtask *first_kept(struct pl_node *n)
{
    struct pl_dtask *t;

    TAILQ_FOREACH(t, &n->pref, prefent)
        if (!t->rank->recalled)
            return t;
    return NULL;
}

size_t pl_sched_pref_bind(struct pl_sched *s, pl_sched_place_f bound,
                          void *arg)
{
    size_t nb = 0;
    /* nodes up, not cordoned and not reserved (not where it is being
     * taken back from) that hold prefetched tasks and have a free core */
    struct pl_placeidx_want w = { .pref = PL_PIDX_BIND,
                                  .skip_resv = s->resv != 0 };

    for (long i = s->prefetch ? pl_placeidx_next(s->idx, 0, &w) : -1; i >= 0;
         i = pl_placeidx_next(s->idx, (size_t)i + 1, &w)) {
        struct pl_node *n = s->nodes[i];
        struct pl_dtask *t;
        while (n->npref && n->free_cores && n->state == PL_NODE_UP
               && (t = first_kept(n))
               && t->cores_per_rank <= n->free_cores) {
            struct pl_rank *k = t->rank;
            uint32_t *c = calloc(t->cores_per_rank + 1, sizeof(*c));
            if (!c || pl_node_alloc(n, t->id, t->cores_per_rank, 0, c,
                                    k->gpu_idx) < 0) {
                free(c);
                break;
            }
            sched_pref_drop(t, 0);
            free(k->core_idx);
            k->core_idx = c;
            k->ncores = t->cores_per_rank;
            bound(t, arg);
            nb++;
        }
    }
    return nb;
}

size_t pl_sched_pref_recall(struct pl_sched *s, pl_sched_recall_f recall,
                            void *arg)
{
    size_t nr = 0;
    bool top_set = false;
    int32_t top = 0;

    if (!s->prefetch)
        return 0;
    /* the highest priority that waits in the queue */
    for (size_t li = 0; li < s->nlv && !top_set; li++)
        if (!TAILQ_EMPTY(&s->lv[li]->q)) {
            top = s->lv[li]->prio;
            top_set = true;
        }
    /* cores free after the pass on nodes that hold nothing: the queue
     * had nothing for them, while other nodes hold tasks that wait for
     * an end there (a stream's last tasks behind long ones): those go
     * back to the queue, the last held first, to start where cores are
     * free */
    uint64_t spare, taking;
    uint32_t widest;
    pl_placeidx_spare(s->idx, &spare, &widest);
    /* less what is being taken back already (its answer on its way) */
    taking = pl_placeidx_taking(s->idx);
    spare = spare > taking ? spare - taking : 0;
    /* the nodes that hold prefetched tasks: all of them while there are
     * spare cores, else those with a reason to give some back */
    struct pl_placeidx_want held = { .pref = PL_PIDX_HELD };
    struct pl_placeidx_want back = { .pref = PL_PIDX_BACK, .top = top,
                                     .top_set = top_set,
                                     .resv_back = s->resv != 0 };
    for (long k = pl_placeidx_next(s->idx, 0, spare ? &held : &back); k >= 0;
         k = pl_placeidx_next(s->idx, (size_t)k + 1, spare ? &held : &back)) {
        struct pl_node *n = s->nodes[k];
        bool all = n->cordon || (s->resv && s->resv_node[k]);
        struct pl_dtask *t, *prev;
        /* N.B. per pass: nothing more than this for a node with no
         * reason to give anything back */
        if (!n->npref
            || !(all || spare || n->pref_inv
                 || (top_set && top > n->pref_lo)))
            continue;
        /* from the last: one held before a task of a higher priority
         * held after it makes way (its agent starts them in order) */
        bool after_set = false;
        int32_t after = 0;
        for (t = TAILQ_LAST(&n->pref, pl_prefq); t; t = prev) {
            prev = TAILQ_PREV(t, pl_prefq, prefent);
            struct pl_rank *r = t->rank;
            bool behind = after_set && t->priority < after;
            if (!r->recalled && (!after_set || t->priority > after)) {
                after = t->priority;
                after_set = true;
            }
            /* N.B. only what one node can take: else it would come
             * back here at once, and go again */
            bool steal = spare >= t->cores_per_rank
                         && widest >= t->cores_per_rank;
            if (r->recalled || !(all || behind || steal
                                 || (top_set && t->priority < top)))
                continue;
            if (recall(t, arg)) {
                r->recalled = true;
                n->pref_taking += t->cores_per_rank;
                pl_node_changed(n); /* the placement index */
                nr++;
                if (steal && !all && !behind
                    && !(top_set && t->priority < top))
                    spare -= t->cores_per_rank;
            }
        }
    }
    return nr;
}

size_t pl_sched_pref_recall_all(struct pl_sched *s, pl_sched_recall_f recall,
                                void *arg)
{
    size_t nr = 0;

    for (size_t k = 0; k < s->nnodes; k++) {
        struct pl_node *n = s->nodes[k];
        struct pl_dtask *t;
        TAILQ_FOREACH(t, &n->pref, prefent) {
            struct pl_rank *r = t->rank;
            if (r->recalled || !recall(t, arg))
                continue;
            r->recalled = true;
            n->pref_taking += t->cores_per_rank;
            pl_node_changed(n); /* the placement index */
            nr++;
        }
    }
    return nr;
}
