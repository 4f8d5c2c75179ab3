/* daemon/sched.h - the live tasks, the queue, and placement on nodes
 *
 * Policy (issue 2): FIFO with backfill.  Each pass walks the queue from
 * its head and places every task that fits on a node whose agent asked
 * for work, rotating over the nodes (first fit from the node after the
 * last one used), lowest free core ids first on that node.  A task that fits nowhere now is
 * skipped, so small tasks behind it may run (no reservation yet). */
#ifndef PL_DAEMON_SCHED_H
#define PL_DAEMON_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "daemon/node.h"

/* A task pilotd still has to act on (not final).  Final tasks live only
 * in the database. */
struct pl_dtask {
    uint64_t id;
    int state;                 /* enum pl_state */
    uint32_t attempt;          /* attempts started so far */
    uint32_t retries;
    uint32_t cores_per_rank, gpus_per_rank;
    double timeout;
    char **argv, **env;        /* owned */
    char *cwd;                 /* owned, may be NULL */
    struct pl_node *node;      /* borrowed, while assigned or running */
    uint32_t *core_idx;        /* owned, cores_per_rank entries */
    uint32_t *gpu_idx;         /* owned, gpus_per_rank entries */
    bool cancel;               /* cancel asked while on an agent */
    bool inq;                  /* linked in the queue (qent valid) */
    TAILQ_ENTRY(pl_dtask) qent; /* in the queue while queued */
};

struct pl_sched;

struct pl_sched *pl_sched_new(void);
void pl_sched_free(struct pl_sched *s);

/* A new task (argv/env/cwd are taken over: on success the task owns them
 * and the pointers are set to NULL).  Queued tasks join the queue tail.
 * NULL with errno: EEXIST (id taken), EOVERFLOW (id above PL_SCHED_ID_MAX),
 * ENOMEM. */
#define PL_SCHED_ID_MAX (UINT64_C(1) << 40)
struct pl_dtask *pl_sched_task_add(struct pl_sched *s, uint64_t id, int state,
                                   char ***argv, char ***env, char **cwd);
struct pl_dtask *pl_sched_task_get(struct pl_sched *s, uint64_t id);
/* Forget a task (it reached a final state): leaves the queue, releases
 * its node resources, and is freed. */
void pl_sched_task_remove(struct pl_sched *s, struct pl_dtask *t);
/* Back to the queue (its node's resources are released). 'head' puts it
 * first. */
void pl_sched_requeue(struct pl_sched *s, struct pl_dtask *t, bool head);
/* Out of the queue, e.g. canceled while queued (the state is left for
 * the caller to set). */
void pl_sched_dequeue(struct pl_sched *s, struct pl_dtask *t);
size_t pl_sched_queued(const struct pl_sched *s);

/* Nodes.  Added nodes are owned by the scheduler. */
int pl_sched_node_add(struct pl_sched *s, struct pl_node *n);
struct pl_node *pl_sched_node_find(struct pl_sched *s, const char *name);
struct pl_node *pl_sched_node_by_rid(struct pl_sched *s, const void *rid,
                                     size_t len);
size_t pl_sched_nnodes(const struct pl_sched *s);
struct pl_node *pl_sched_node_at(struct pl_sched *s, size_t i);
/* Call 'cb' for each live task placed on 'n' (every live task when 'n'
 * is NULL); 'cb' may requeue or remove the task. */
void pl_sched_node_tasks(struct pl_sched *s, struct pl_node *n,
                         void (*cb)(struct pl_dtask *t, void *arg), void *arg);

/* Largest cores and GPUs of any node that has registered. */
void pl_sched_max(const struct pl_sched *s, uint32_t *cores, uint32_t *gpus);

/* Place queued tasks on nodes that want work; 'place' is called for each
 * (the task is out of the queue, holds its cores, is in state assigned
 * with its attempt counted: the caller records that).  Returns the number
 * placed. */
typedef void (*pl_sched_place_f)(struct pl_dtask *t, struct pl_node *n,
                                 void *arg);
size_t pl_sched_run(struct pl_sched *s, pl_sched_place_f place, void *arg);

#endif /* !PL_DAEMON_SCHED_H */
