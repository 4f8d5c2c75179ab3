/* tests/unit/sched_fixture.h - nodes and queued tasks for the unit tests
 * of the scheduler's parts (test_daemon_explain, _prefetch, _sched): made as
 * pilotd makes them, with no agent and no database */
#ifndef PL_TESTS_SCHED_FIXTURE_H
#define PL_TESTS_SCHED_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/node.h"
#include "daemon/sched.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "tests/unit/tap.h"

#define T_SCHED_MAXC 64 /* cores a node, at most */
#define T_SCHED_MAXG 8

/* A node whose CPU ids are 100 + index and GPU ids "g0", "g1", ...
 * (NULL: out of memory, or more than T_SCHED_MAXC cores or
 * T_SCHED_MAXG GPUs). */
static inline struct pl_node *t_node_make(const char *name, uint32_t ncores,
                                          uint32_t ngpus)
{
    uint64_t cpu[T_SCHED_MAXC];
    char gbuf[T_SCHED_MAXG][16];
    char *g[T_SCHED_MAXG + 1];

    if (ncores > T_SCHED_MAXC || ngpus > T_SCHED_MAXG)
        return NULL;
    for (uint32_t i = 0; i < ncores; i++)
        cpu[i] = 100 + i;
    for (uint32_t i = 0; i < ngpus; i++) {
        snprintf(gbuf[i], sizeof(gbuf[i]), "g%u", i);
        g[i] = gbuf[i];
    }
    g[ngpus] = NULL;
    return pl_node_new(name, cpu, ncores, ngpus ? g : NULL);
}

/* The same, added to 's'; exits the test if it cannot be made. */
static inline struct pl_node *t_sched_node(struct pl_sched *s,
                                           const char *name,
                                           uint32_t ncores, uint32_t ngpus)
{
    struct pl_node *n = t_node_make(name, ncores, ngpus);

    if (!n || pl_sched_node_add(s, n) < 0) {
        diag("cannot add node %s", name);
        exit(1);
    }
    return n;
}

/* A queued task of 's': 'ranks' x ('cores', 'gpus') at priority 'prio',
 * running 'sleep' in /tmp; exits the test if it cannot be made. */
static inline struct pl_dtask *t_sched_task(struct pl_sched *s, uint64_t id,
                                            int32_t prio, uint32_t ranks,
                                            uint32_t cores, uint32_t gpus)
{
    char a0[] = "sleep";
    char *v[] = { a0, NULL };
    char **argv = pl_strv_dup(v), **env = NULL, *cwd = strdup("/tmp");
    struct pl_dtask *t = pl_sched_task_add(s, id, true, prio, &argv, &env,
                                           &cwd);

    if (!t) {
        diag("cannot add task %llu", (unsigned long long)id);
        exit(1);
    }
    t->state = PL_ST_QUEUED;
    t->ranks = ranks;
    t->cores_per_rank = cores;
    t->gpus_per_rank = gpus;
    return t;
}

#endif
