/* daemon/alloc.h - sizing allocations that join a pilot, and their
 * back-off: pure functions of the queue's shape (daemon/alloc.c) */
#ifndef PL_DAEMON_ALLOC_H
#define PL_DAEMON_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "proto/allocmsg.h"

/* One queued task, as far as its size goes. */
struct pl_alloc_want {
    uint32_t ranks;          /* >= 1 */
    uint32_t cores, gpus;    /* per rank */
    uint32_t nodes_req;      /* exactly this many nodes; 0: any */
    uint32_t rpn;            /* ranks per node at most; 0: any */
    int exclusive;           /* whole nodes */
    uint64_t count;          /* tasks of this shape (a compact run's
                                elements); 0 counts as 1 */
};

/* What the pilot has, and has asked for. */
struct pl_alloc_have {
    uint32_t nodes;          /* up and taking work */
    uint32_t pending;        /* asked in allocations, not joined yet */
    uint32_t held;           /* in live allocations (joined or not) */
    uint32_t cores, gpus;    /* of one node (a grown one is alike) */
};

/* Nodes one task needs on nodes of 'cores' and 'gpus' (0: it cannot run
 * on such nodes at all). */
uint32_t pl_alloc_task_nodes(const struct pl_alloc_want *w, uint32_t cores,
                             uint32_t gpus);

/* Nodes the next allocation should ask for, given the 'n' queued tasks
 * at 'q' (all waiting: the scheduler placed what fit), what 'h' the
 * pilot has and the settings 'c' (max, nodes): 0 for none.
 *  - a gang (a task on more nodes than up and pending) asks for the
 *    nodes it lacks;
 *  - other waiting work, when nothing is pending, asks for the nodes it
 *    fills (at least 1);
 *  - nodes=N asks N each time; never more than max minus those held. */
uint32_t pl_alloc_size(const struct pl_alloc_want *q, size_t n,
                       const struct pl_alloc_have *h,
                       const struct pl_grow_conf *c);

/* Seconds to wait before the next sbatch after 'failures' failures in a
 * row: 0 for none, then 10, 20, 40 ... at most PL_ALLOC_BACKOFF_MAX. */
#define PL_ALLOC_BACKOFF_BASE 10.0
#define PL_ALLOC_BACKOFF_MAX 600.0
double pl_alloc_backoff(unsigned failures);

#endif /* !PL_DAEMON_ALLOC_H */
