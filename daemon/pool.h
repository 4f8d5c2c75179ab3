/* daemon/pool.h - a pool of workers: its slots and its queue, and the
 * placement of its tasks on them
 *
 * A pool is one MPI job of workers (a task of fn pool, placed and run
 * as any --comm mpi task), whose world rank i is slot i.  A pool task's
 * ranks run in the workers, one rank a worker, and hold no cores of
 * their own: the job holds them.  Pool tasks never join the scheduler's
 * queue: each pool has its own, highest priority first, FIFO within a
 * priority, and pl_pool_place() starts them on the free workers of a
 * ready pool, in order, all of a task's ranks or none, packed on as few
 * nodes as fit (or as --nodes / --ranks-per-node say).  A task that
 * does not fit now holds back those behind it: no backfill, so a large
 * task cannot starve.  No state written, no transport (daemon/poolctl.c
 * runs the pool's life; docs/pool.md).
 */
#ifndef PL_DAEMON_POOL_H
#define PL_DAEMON_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "daemon/sched.h"
#include "proto/spec.h"

enum pl_pool_state {
    PL_POOL_STARTING = 1, /* its job queued or starting: not all workers
                             have said HELLO */
    PL_POOL_READY,        /* every worker is there: tasks start */
    PL_POOL_RESTARTING,   /* its job went down: started again */
    PL_POOL_STOPPING,     /* pilot pool stop: its job is being stopped */
    PL_POOL_FAILED,       /* its job could not start, time after time */
};

/* "starting", ... */
const char *pl_pool_state_name(int st);

/* One worker: world rank i of the pool's job. */
struct pl_pslot {
    struct pl_node *node;     /* borrowed: where the job placed it */
    uint64_t task;            /* the task whose rank it runs, 0: free */
    uint32_t rank;            /* that rank */
    bool ready;               /* it said HELLO in this attempt */
};

TAILQ_HEAD(pl_pqueue, pl_dtask);

struct pl_pool {
    char name[PL_POOL_NAME_MAX + 1];
    uint32_t nodes_req;       /* nodes asked for; 0: all */
    uint32_t rpn, cpr, gpr;   /* workers per node, their cores and GPUs */
    int launcher;             /* enum pl_launcher */
    char **env;               /* owned: KEY=VALUE for its workers, or NULL */
    int state;                /* enum pl_pool_state */
    uint64_t job;             /* its MPI job's task id */
    uint32_t attempt;         /* the job's attempt the slots are of */
    struct pl_pslot *slot;    /* 'nslots', by world rank */
    uint32_t nslots, nready, nbusy;
    uint32_t fails;           /* attempts in a row that never got ready */
    uint32_t restarts;        /* attempts after the first */
    double created;           /* pl_now() */
    double down_at;           /* pl_mono() its job last went down; 0 */
    double placed_at;         /* pl_mono() its job was last placed */
    double ready_at;          /* pl_mono() it was last ready */
    double last_restart;      /* s from down to ready, the last time;
                                 < 0: none yet */
    double last_start;        /* s from placed to ready, the last time */
    char reason[200];         /* why it went down, or failed */
    bool job_seen;            /* at a restart: its job is live */
    /* HELLOs reported before the job's placement was known (a restarted
     * pilotd takes its job back as the agents register) */
    struct pl_early {
        const struct pl_node *node;
        uint32_t attempt, wr;
    } *early;
    size_t nearly, capearly;
    struct pl_pqueue queue;   /* its tasks queued */
    uint32_t nqueued;
};

/* A new pool (state starting, no job yet), or NULL (ENOMEM). */
struct pl_pool *pl_pool_new(const char *name, uint32_t nodes_req,
                            uint32_t rpn, uint32_t cpr, uint32_t gpr,
                            int launcher);
/* Free 'p': its queue must be empty and no task may point to it. */
void pl_pool_free(struct pl_pool *p);

/* The job 'job' was placed (attempt 'job->attempt'): its ranks are the
 * slots now, none ready. */
int pl_pool_job_placed(struct pl_pool *p, const struct pl_dtask *job);
/* The worker of world rank 'wr' on node 'n' said HELLO in attempt
 * 'attempt'.  Returns 1 when that made the pool ready, 0 if not, -1
 * (EINVAL) if the slot is not that node's or the attempt not the
 * slots'. */
int pl_pool_slot_ready(struct pl_pool *p, uint32_t attempt, uint32_t wr,
                       const struct pl_node *n);

/* Task 't' (of this pool) joins its queue; 'head': first of its
 * priority. */
void pl_pool_enqueue(struct pl_pool *p, struct pl_dtask *t, bool head);
void pl_pool_dequeue(struct pl_pool *p, struct pl_dtask *t);
/* Rank 'r' of 't' gives back its worker. */
void pl_pool_rank_release(struct pl_pool *p, struct pl_dtask *t, uint32_t r);

/* Whether 't' could run in 'p' if its workers were all free; if not,
 * 'why' says so. */
bool pl_pool_fits(const struct pl_pool *p, const struct pl_dtask *t,
                  char *why, size_t len);

/* Place what fits of a ready pool's queue, in order; 'place' is called
 * for each task placed (out of the queue, its ranks on their workers).
 * The number placed. */
size_t pl_pool_place(struct pl_pool *p, pl_sched_place_f place, void *arg);

#endif /* !PL_DAEMON_POOL_H */
