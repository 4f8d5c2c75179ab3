/* daemon/sched.h - the live tasks, the queue, and gang placement on nodes
 *
 * Policy: priority, FIFO within a priority, with backfill behind one
 * reservation.  Each pass walks the queue (highest priority first) from
 * its head and starts every task whose ranks all fit now (all
 * ranks start together, or none).  The first task that does not fit now,
 * but would on this pilot's nodes if they were idle, reserves the nodes it
 * needs (those with the most free cores); no other task starts on a
 * reserved node until it has started, so large tasks cannot starve behind
 * a stream of small ones, while the other nodes keep backfilling.
 * Placement: single-rank tasks go first-fit, rotating over the nodes so
 * work spreads; multi-rank tasks go on the nodes with the most room, or
 * exactly as --nodes / --ranks-per-node say; lowest free core ids first.
 * Exclusive tasks take idle nodes whole: their ranks share out all of a
 * node's cores and GPUs. */
#ifndef PL_DAEMON_SCHED_H
#define PL_DAEMON_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "daemon/node.h"
#include "proto/spec.h"
#include "proto/usage.h"

/* One rank's place: its node, cores and GPUs (indexes into the node's
 * lists), its position among the task's nodes and on its node. */
struct pl_rank {
    struct pl_node *node;      /* borrowed */
    uint32_t *core_idx;        /* owned, ncores entries */
    uint32_t ncores;
    uint32_t *gpu_idx;         /* owned, ngpus entries */
    uint32_t ngpus;
    uint32_t node_rank, local_rank, local_size;
    int state;                 /* assigned, running, or a final state
                                  (daemon/task.c writes it) */
    uint64_t run_seq;          /* the RUN that carried it to its agent */
    bool pref;                 /* placed as a prefetch (node->pref): no
                                  cores held yet (ncores 0) */
    bool recalled;             /* ... and taken back: its KILL (queued
                                  only) is on its way */
    uint32_t slot;             /* a pool task's: its worker's world rank */
    struct pl_usage use;       /* what its end event measured (task.c);
                                  zeroed: nothing */
    int64_t maxrss_kb;         /* the same; 0: none */
    char *orphan;              /* owned: "NODE\tCPUS\tGPUS" where a
                                  restarted pilotd's database placed it,
                                  until its agent reports; else NULL */
};

/* A task pilotd still has to act on (not final).  Final tasks live only
 * in the database. */
/* A task that waits for another to end ('any': not only done). */
struct pl_waiter {
    uint64_t id;
    uint64_t serial;           /* that task's: an id may be used again */
    bool any;
};

struct pl_dtask {
    uint64_t id;
    int state;                 /* enum pl_state (daemon/task.c writes it) */
    int32_t priority;          /* higher is started first */
    uint32_t attempt;          /* attempts started so far (task.c) */
    uint32_t retries;
    uint32_t cores_per_rank, gpus_per_rank;
    uint32_t ranks;            /* >= 1 */
    uint32_t nodes_req;        /* exactly this many nodes, 0: any */
    uint32_t ranks_per_node;   /* 0: any */
    bool exclusive;            /* whole nodes, shared with no other task */
    uint32_t vetted;           /* minutes: only nodes whose vetting passed
                                  within them (daemon/vet.c); 0: any */
    int comm;                  /* enum pl_comm (proto/spec.h) */
    bool mpirun;               /* comm mpi: launch with mpirun, not srun */
    uint32_t orphans;          /* ranks with 'orphan' set */
    uint32_t spared;           /* requeues not charged to 'retries' */
    uint32_t port;             /* comm torch: MASTER_PORT, held on rank
                                  0's node while placed; 0: none */
    double timeout;
    uint64_t output_limit;     /* bytes; 0: the default */
    char **argv, **env;        /* owned */
    char *cwd;                 /* owned, may be NULL */
    struct pl_rank *rank;      /* owned, 'ranks' entries while placed */
    uint32_t nnodes;           /* distinct nodes of the placement */
    char *nodelist;            /* owned: their names, "n1,n2" */
    uint32_t running, ended;   /* ranks that started / ended (attempt) */
    double ended_at;           /* the latest rank end, its agent's clock
                                * (attempt); 0: none */
    int fail;                  /* first failure of a rank: enum pl_state */
    int exit_code, signal;     /* of that failure, -1 if none */
    char reason[128];          /* of that failure */
    bool cancel;               /* cancel asked while on an agent */
    bool lost;                 /* an agent under it was lost (attempt) */
    bool inq;                  /* linked in the queue (qent valid) */
    struct pl_qrun *run;       /* not a task but a run of queued array
                                  elements: its entry in the queue
                                  (daemon/queue.h); NULL for a task */
    bool unsent;               /* listed in the daemon's 'unsent' (its
                                  RUN waits: daemon/dispatch.c) */
    uint8_t nrefs;             /* a Python call's refs: their results go
                                  in its RUN entry (<= PL_SPEC_MAX_REFS) */
    TAILQ_ENTRY(pl_dtask) qent; /* in the queue while queued */
    TAILQ_ENTRY(pl_dtask) prefent; /* in its node's 'pref' while rank 0
                                  is a prefetch */
    uint32_t ndeps;            /* waiting: dependencies not ended yet */
    uint64_t *deps;            /* owned: the live tasks it waits for (as
                                  submitted; 'ndeps' of them still run) */
    uint32_t ndeps_live;       /* entries of 'deps' */
    struct pl_waiter *waiters; /* owned: the tasks waiting for this one */
    uint32_t nwaiters, capwaiters;
    uint64_t serial;           /* pilotd's count of tasks it has made */
    uint64_t array_id;         /* its array's first element; 0: none */
    uint64_t array_index;
    /* a pool's task, or the pool's own job (docs/pool.md) */
    int fn;                    /* enum pl_fn */
    struct pl_pool *pool;      /* borrowed: its pool (daemon/pool.h) */
    bool inpq;                 /* linked in its pool's queue (pent) */
    TAILQ_ENTRY(pl_dtask) pent;
    bool pool_lost;            /* this attempt's workers went down under
                                  it, by no doing of its own */
    uint32_t pool_losses;      /* attempts that ended so */
    uint32_t pool_attempt;     /* the pool's job attempt it was placed in */
    /* the watches it is in (daemon/watch.c), borrowed: each takes
     * itself off its live tasks when it goes */
    struct pl_watch **watches;
    uint32_t nwatches;
    size_t capwatches;
    /* daemon/metrics.c: when it was last queued and started (pl_now()),
     * for the histograms; 0: not seen by this pilotd */
    double queued_at, started_at;
};

struct pl_sched;
struct pl_pool;

struct pl_sched *pl_sched_new(void);
void pl_sched_free(struct pl_sched *s);

/* A new task (argv/env/cwd are taken over: on success the task owns them
 * and the pointers are set to NULL), its state 0 for the caller to set.
 * With 'queue' it joins the tail of its priority's FIFO (the queue runs
 * higher priorities first).  NULL with errno: EEXIST (id taken),
 * EOVERFLOW (id above PL_SCHED_ID_MAX), ENOMEM. */
#define PL_SCHED_ID_MAX (UINT64_C(1) << 40)
struct pl_dtask *pl_sched_task_add(struct pl_sched *s, uint64_t id,
                                   bool queue, int32_t priority, char ***argv,
                                   char ***env, char **cwd);
/* The live task 'id', or NULL.  An element of a compact run becomes a
 * task of its own here (in its place in the queue); NULL with errno
 * ENOMEM if it cannot (and errno 0 for no such task). */
struct pl_dtask *pl_sched_task_get(struct pl_sched *s, uint64_t id);
/* As pl_sched_task_get(), but an element of a run is made without its
 * command (argv, env, cwd NULL; its row is not read back): only for a
 * caller that ends it at once, as a cancel of queued tasks does. */
struct pl_dtask *pl_sched_task_get_bare(struct pl_sched *s, uint64_t id);
/* The same without making one: NULL for an element still in a run. */
struct pl_dtask *pl_sched_task_peek(const struct pl_sched *s, uint64_t id);
/* Whether 'id' is live: a task, or an element of a run. */
bool pl_sched_live(const struct pl_sched *s, uint64_t id);

/* 'n' queued array elements of one spec, ids id0.. (consecutive), index
 * idx0 + k * step, at the tail of their priority's FIFO as one compact
 * run (daemon/queue.h); argv (the template, "{}" the index; NULL: each
 * element is filled by the fill callback), env and cwd taken over as by
 * pl_sched_task_add().  Returns the run's shared part for the caller to
 * shape (state, limits, array_id, serial of id0 in 'serial', queued_at:
 * every element is made from it), or NULL (EEXIST, EOVERFLOW, ENOMEM). */
struct pl_dtask *pl_sched_run_add(struct pl_sched *s, uint64_t id0,
                                  uint64_t n, uint64_t idx0, uint64_t step,
                                  int32_t priority, char ***argv, char ***env,
                                  char **cwd);
/* How an element of a run whose argv is NULL is filled (its argv, env,
 * cwd and anything else its stored row says); 0, or -1.  'free' frees
 * 'arg' with the scheduler. */
typedef int (*pl_sched_fill_f)(struct pl_dtask *t, void *arg);
void pl_sched_set_fill(struct pl_sched *s, pl_sched_fill_f fill, void *arg,
                       void (*free_arg)(void *arg));
/* Runs in the queue, and the elements in them (for tests and status). */
size_t pl_sched_runs(const struct pl_sched *s, uint64_t *elems);
/* Seconds before the pilot drains (0: no limit): a queued task whose
 * timeout is longer is not started (it stays queued). */
void pl_sched_set_time_left(struct pl_sched *s, double secs);

/* Ids of live tasks are at most this. */
uint64_t pl_sched_max_id(const struct pl_sched *s);
/* Forget a task (it reached a final state): leaves the queue, releases
 * its node resources, and is freed. */
void pl_sched_task_remove(struct pl_sched *s, struct pl_dtask *t);
/* Back to the queue (its node's resources are released, its attempt's
 * results forgotten; the state is the caller's). 'head' puts it first. */
void pl_sched_requeue(struct pl_sched *s, struct pl_dtask *t, bool head);
/* Out of the queue, e.g. canceled while queued (the state is left for
 * the caller to set). */
void pl_sched_dequeue(struct pl_sched *s, struct pl_dtask *t);
size_t pl_sched_queued(const struct pl_sched *s);

/* Nodes.  Added nodes are owned by the scheduler. */
int pl_sched_node_add(struct pl_sched *s, struct pl_node *n);
struct pl_node *pl_sched_node_find(struct pl_sched *s, const char *name);
size_t pl_sched_nnodes(const struct pl_sched *s);
struct pl_node *pl_sched_node_at(struct pl_sched *s, size_t i);
/* Call 'cb' for each live task with a rank on 'n' (every live task when
 * 'n' is NULL); 'cb' may requeue or remove the task.  With 'n' NULL, a
 * compact run's head element is made a task and visited; the rest of the
 * run only if 'cb' removed it (its elements share what 'cb' judges by:
 * their shape and state). */
void pl_sched_node_tasks(struct pl_sched *s, struct pl_node *n,
                         void (*cb)(struct pl_dtask *t, void *arg), void *arg);
/* Call 'cb' for each entry of the queue (tasks that wait on nothing but
 * room), from the highest priority down, with how many queued tasks it
 * stands for: 1, or a compact run's elements, given as its first (made a
 * task when the run is one of the database's, whose shape only its rows
 * hold).  'cb' must not change the queue. */
void pl_sched_queue_each(struct pl_sched *s,
                         void (*cb)(const struct pl_dtask *t, uint64_t n,
                                    void *arg),
                         void *arg);

/* Largest cores and GPUs of any node that has registered. */
void pl_sched_max(const struct pl_sched *s, uint32_t *cores, uint32_t *gpus);

/* Whether 't' could run on the registered nodes if they were all idle;
 * if not, 'why' (may be NULL) says what does not fit. */
bool pl_sched_fits(const struct pl_sched *s, const struct pl_dtask *t,
                   char *why, size_t len);

/* Release one rank's cores and GPUs (it ended); idempotent.  No-op for an
 * exclusive task: its nodes stay whole until the task ends. */
void pl_sched_rank_release(struct pl_dtask *t, uint32_t r);

/* Names of the task's nodes in node_rank order, comma-separated, as
 * placed (ranks that ended still count). */
void pl_sched_nodelist(const struct pl_dtask *t, char *buf, size_t len);

/* The task reserving nodes now, 0 if none (for status and tests). */
uint64_t pl_sched_reserved_for(const struct pl_sched *s);

/* For 'pilot explain' (daemon/explain.c); none of these changes 's'. */
/* Seconds before the drain, as last set (0: no limit). */
double pl_sched_time_left(const struct pl_sched *s);
/* Whether node 'k' (pl_sched_node_at()'s index) is among those reserved
 * for pl_sched_reserved_for()'s task. */
bool pl_sched_node_reserved(const struct pl_sched *s, size_t k);
/* Ranks of 't' that node 'n' could take now (its state, cordon, free
 * cores and GPUs, an exclusive task's need of an idle node), or, with
 * 'idle', if nothing ran on it. */
uint32_t pl_sched_room(const struct pl_dtask *t, const struct pl_node *n,
                       bool idle);
/* Whether queued 't' could be placed now: on every node (!resv), or
 * only on those not reserved for another task, as a pass would. */
bool pl_sched_fits_now(const struct pl_sched *s, const struct pl_dtask *t,
                       bool resv);
/* Queued tasks a pass looks at before 't' (in the queue). */
size_t pl_sched_ahead(const struct pl_sched *s, const struct pl_dtask *t);

/* Place queued tasks on the nodes that are up; 'place' is called for
 * each (the task is out of the queue and each rank holds its cores; its
 * state and attempt are left for the caller to record).  Returns the
 * number placed. */
typedef void (*pl_sched_place_f)(struct pl_dtask *t, void *arg);
size_t pl_sched_run(struct pl_sched *s, pl_sched_place_f place, void *arg);

/* Prefetch (pilotd --prefetch N): once no node has a free core, a pass
 * places up to N one-rank tasks of cores only (no GPUs, comm, pool,
 * Python call, exclusive or --vetted) on each node that is up, not
 * cordoned and not reserved, beyond its free cores; their rank has
 * 'pref' set and holds no cores, and its agent starts it on the cores
 * an end frees.  0 (the default): none. */
void pl_sched_set_prefetch(struct pl_sched *s, uint32_t n);
/* Whether 't' is held by its agent as a prefetch, not started as far as
 * pilotd knows (a prefetched task has one rank). */
static inline bool pl_dtask_held(const struct pl_dtask *t)
{
    return t->ranks == 1 && t->rank && t->rank[0].pref;
}
/* Its agent started prefetched (or bound) rank 0 of 't' on node 'n' on
 * the CPU ids 'cpu' (its 'running' says so): it holds those cores now,
 * and no others.  0, or -1 (ENOMEM; EBUSY: some of them were held by
 * another task, the rest are taken). */
int pl_sched_pref_started(struct pl_dtask *t, struct pl_node *n,
                          const uint64_t *cpu, uint32_t ncpu);
/* Bind prefetched tasks to cores found free: on each node with both,
 * the first of its prefetched tasks takes free cores as any placement
 * does, and 'bound' is called for it (its RUN is to go again, now with
 * cores: its agent starts it there unless an end started it first).
 * Returns the number bound. */
size_t pl_sched_pref_bind(struct pl_sched *s, pl_sched_place_f bound,
                          void *arg);
/* Prefetched tasks to take back from their agents (not started yet, as
 * far as pilotd knows): those on a node cordoned or reserved for another
 * task, those of a lower priority than a queued task or one held after
 * them, and, while nodes that hold none have free cores after the pass,
 * as many as those cores take (the last held first).  'recall' is
 * called for each not yet recalled, and says whether it sent the KILL
 * (then the rank is marked 'recalled').  Returns how many. */
typedef bool (*pl_sched_recall_f)(struct pl_dtask *t, void *arg);
size_t pl_sched_pref_recall(struct pl_sched *s, pl_sched_recall_f recall,
                            void *arg);
/* Every prefetched task not recalled yet, on every node: what pilotd
 * cannot store (its state directory failed) must not start by its
 * agent's choice.  As pl_sched_pref_recall(); O(nodes), a rare event. */
size_t pl_sched_pref_recall_all(struct pl_sched *s, pl_sched_recall_f recall,
                                void *arg);

#endif /* !PL_DAEMON_SCHED_H */
