/* daemon/sched_private.h - what sched.c (the queue and the pass) and
 * place.c (placement on the nodes) share (no other module includes this) */
#ifndef PL_DAEMON_SCHED_PRIVATE_H
#define PL_DAEMON_SCHED_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "daemon/queue.h"
#include "daemon/sched.h"

struct pl_placeidx;
struct pl_keymap;

TAILQ_HEAD(pl_dqueue, pl_dtask);

/* The queue is one FIFO per priority.  A level, once made, stays until
 * the scheduler is freed (there are few: the priorities users give), so
 * putting a task back in the queue cannot fail. */
struct level {
    int32_t prio;
    struct pl_dqueue q;
};

struct pl_sched {
    struct pl_dtask **tab; /* by id: ids are dense, from 1 */
    size_t cap;
    size_t tab_hi;         /* entries past this were never written */
    struct level **lv;     /* owned, highest priority first */
    size_t nlv;
    size_t nqueued;
    struct pl_node **nodes;
    size_t nnodes;
    struct pl_placeidx *idx; /* the nodes by free capacity (placeidx.h) */
    struct pl_keymap *names; /* the nodes by name */
    size_t rr;             /* node to try first, rotating */
    uint64_t resv;         /* task holding the reservation, 0: none */
    bool *resv_node;       /* per node: reserved for 'resv' (kept false
                              while 'resv' is 0: sched_resv_drop()); the index
                              holds the same marks */
    double time_left;      /* s before the pilot drains; 0: no limit */
    struct pl_qruns runs;  /* compact runs of queued elements (queue.c) */
    uint64_t run_elems;    /* elements in them */
    pl_sched_fill_f fill;  /* fills an element of a run of the database */
    void *fill_arg;
    void (*fill_free)(void *arg);
    uint32_t prefetch;     /* tasks a node may hold beyond its free
                              cores (pl_sched_set_prefetch()) */
};

/* A placement: 'c' ranks on node 'k'. */
struct pick {
    uint32_t k, c;
};

/* place.c: choose nodes and rank counts for 't' into pick[0..*np) (room
 * for s->nnodes entries); 'mask': not on the nodes reserved for another
 * task; 'idle': as if every node were idle.  0 or -1. */
int sched_plan(const struct pl_sched *s, const struct pl_dtask *t,
               bool mask, bool idle, struct pick *pick, size_t *np);

/* place.c: take the cores of the ranks planned in pick[]: all or
 * nothing.  0 or -1. */
int sched_take(struct pl_sched *s, struct pl_dtask *t,
               const struct pick *pick, size_t np);

/* place.c: reserve for 't' the nodes it would use if they were idle */
void sched_reserve(struct pl_sched *s, const struct pl_dtask *t);

/* place.c: no reservation any more */
void sched_resv_drop(struct pl_sched *s);

/* place.c: place 't' as a prefetch on a node with a prefetch slot left
 * (pl_sched_set_prefetch()); 0, or -1 when it may not be or no node
 * has room. */
int sched_pref_place(struct pl_sched *s, struct pl_dtask *t);
/* place.c: rank 'r' of 't' (a prefetch) leaves its node's list */
void sched_pref_drop(struct pl_dtask *t, uint32_t r);

/* sched.c: give back every rank's cores and forget the placement */
void sched_release(struct pl_dtask *t);

#endif
