/* daemon/alloc_size.c - how many nodes the next allocation asks for,
 * from the queue's shape, and the back-off after sbatch failures: pure
 * functions (tests/unit/test_daemon_alloc.c) */
#include <math.h>
#include <stdint.h>

#include "daemon/alloc.h"

uint32_t pl_alloc_task_nodes(const struct pl_alloc_want *w, uint32_t cores,
                             uint32_t gpus)
{
    uint32_t per = UINT32_MAX;

    if (w->cores > 0)
        per = cores / w->cores;
    if (w->gpus > 0 && gpus / w->gpus < per)
        per = gpus / w->gpus;
    if (w->rpn > 0 && w->rpn < per)
        per = w->rpn;
    if (w->exclusive && w->nodes_req == 0 && per == UINT32_MAX)
        per = 1;
    if (per == 0)
        return 0;
    if (w->nodes_req > 0) {
        /* its ranks spread over exactly that many nodes */
        uint64_t most = (uint64_t)per * w->nodes_req;
        return most >= w->ranks ? w->nodes_req : 0;
    }
    if (per == UINT32_MAX)
        return 1;
    return (w->ranks + per - 1) / per;
}

uint32_t pl_alloc_size(const struct pl_alloc_want *q, size_t n,
                       const struct pl_alloc_have *h,
                       const struct pl_grow_conf *c)
{
    uint64_t lack = 0;         /* nodes the largest gang lacks */
    double fill = 0;           /* node-equivalents of other waiting work */

    if (h->held >= c->max || h->cores == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = pl_alloc_task_nodes(&q[i], h->cores, h->gpus);
        if (k == 0)
            continue; /* no node like ours runs it: growing does not help */
        if (k > (uint64_t)h->nodes + h->pending) {
            uint64_t l = k - ((uint64_t)h->nodes + h->pending);
            lack = l > lack ? l : lack;
        }
        else if (q[i].exclusive || q[i].nodes_req > 0)
            fill += (double)k * (q[i].count ? q[i].count : 1);
        else {
            /* its share of a node: the tighter of cores and GPUs */
            double f = h->cores ? (double)q[i].ranks * q[i].cores / h->cores
                                : 0;
            if (q[i].gpus && h->gpus) {
                double g = (double)q[i].ranks * q[i].gpus / h->gpus;
                f = g > f ? g : f;
            }
            fill += (f > 0 ? f : 1.0 / (h->cores ? h->cores : 1))
                    * (q[i].count ? q[i].count : 1);
        }
    }
    uint64_t want = lack;
    /* waiting work beside the gangs: one allocation at a time */
    if (want == 0 && h->pending == 0 && fill > 0)
        want = (uint64_t)ceil(fill - 1e-9);
    if (want == 0)
        return 0;
    if (c->nodes > 0)
        want = want > c->nodes && lack > 0 ? want : c->nodes;
    if (want > c->max - h->held)
        want = c->max - h->held;
    return (uint32_t)want;
}

double pl_alloc_backoff(unsigned failures)
{
    if (failures == 0)
        return 0;
    double s = PL_ALLOC_BACKOFF_BASE;
    for (unsigned i = 1; i < failures && s < PL_ALLOC_BACKOFF_MAX; i++)
        s *= 2;
    return s < PL_ALLOC_BACKOFF_MAX ? s : PL_ALLOC_BACKOFF_MAX;
}

