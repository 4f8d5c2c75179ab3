/* daemon/queue.h - runs of queued array elements kept compact
 *
 * An array of millions of elements would cost a struct pl_dtask each
 * (600 B with its strings) while it waits.  Its queued elements are kept
 * instead as runs: consecutive ids that share one spec, one entry in
 * their priority's FIFO (daemon/sched.c).  An element becomes a task of
 * its own only when it is needed: at the head of the queue, or named by
 * id (cancel, a dependency, explain, a watch).  A run's argv is the
 * array's template ("{}" is the element's index), or, for a run rebuilt
 * from the database after a restart, NULL: each element's row is read
 * back then (pl_sched_set_fill()).
 */
#ifndef PL_DAEMON_QUEUE_H
#define PL_DAEMON_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/sched.h"

struct pl_qrun {
    /* Its entry in the FIFO: 'run' points back here, 'id' is 0, the rest
     * is what every element shares (argv the template, or NULL);
     * 'serial' is id0's. */
    struct pl_dtask proto;
    uint64_t id0;        /* the id its index and serial count from */
    uint64_t first, end; /* the ids still in it: [first, end) */
    uint64_t idx0, step; /* index of id0, and from one id to the next */
};

/* The runs, sorted by id (they never overlap). */
struct pl_qruns {
    struct pl_qrun **v;
    size_t n, cap;
};

/* A run of ids [id0, id0+n) (argv, env, cwd taken over as by
 * pl_sched_task_add(); argv may be NULL), or NULL (ENOMEM). */
struct pl_qrun *pl_qrun_new(uint64_t id0, uint64_t n, uint64_t idx0,
                            uint64_t step, char ***argv, char ***env,
                            char **cwd);
void pl_qrun_free(struct pl_qrun *r);
/* A copy of 'r' holding [from, r->end) (its own strings), or NULL. */
struct pl_qrun *pl_qrun_tail(const struct pl_qrun *r, uint64_t from);
/* The task of element 'id' of 'r' (first <= id < end), not linked
 * anywhere: the run's spec, its own argv (the template filled in, or
 * NULL for a run of the database), env and cwd.  NULL: ENOMEM. */
struct pl_dtask *pl_qrun_elem(const struct pl_qrun *r, uint64_t id);
/* The same without its strings (argv, env, cwd NULL). */
struct pl_dtask *pl_qrun_elem_bare(const struct pl_qrun *r, uint64_t id);

/* 0, or -1 (ENOMEM). */
int pl_qruns_add(struct pl_qruns *rs, struct pl_qrun *r);
void pl_qruns_del(struct pl_qruns *rs, const struct pl_qrun *r);
/* The run holding 'id', or NULL. */
struct pl_qrun *pl_qruns_find(const struct pl_qruns *rs, uint64_t id);

/* 's' with every "{}" replaced by 'idx'; NULL stays NULL (errno 0);
 * else NULL: ENOMEM. */
char *pl_queue_subst(const char *s, uint64_t idx);
char **pl_queue_subst_strv(char *const *v, uint64_t idx);

#endif /* !PL_DAEMON_QUEUE_H */
