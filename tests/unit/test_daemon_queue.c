/* tests/unit/test_daemon_queue.c - compact runs of queued array elements */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/node.h"
#include "daemon/queue.h"
#include "daemon/sched.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "tests/unit/tap.h"

#define NTESTS 55

static struct pl_node *addnode(struct pl_sched *s, const char *name,
                               uint32_t ncores)
{
    uint64_t cpu[64];

    for (uint32_t i = 0; i < ncores; i++)
        cpu[i] = i;
    struct pl_node *n = pl_node_new(name, cpu, ncores, NULL);
    if (!n || pl_sched_node_add(s, n) < 0) {
        diag("cannot add node %s", name);
        exit(1);
    }
    return n;
}

/* A run of 'n' elements from id0, index 10 * k ("echo {}"), serials from
 * 100; 'cores' a rank. */
static struct pl_dtask *addrun(struct pl_sched *s, uint64_t id0, uint64_t n,
                               int32_t prio, uint32_t cores)
{
    char a0[] = "echo", a1[] = "i={}";
    char *v[] = { a0, a1, NULL };
    char **argv = pl_strv_dup(v), **env = NULL, *cwd = strdup("/tmp");
    struct pl_dtask *p = pl_sched_run_add(s, id0, n, 0, 10, prio, &argv, &env,
                                          &cwd);

    pl_strv_free(argv);
    free(cwd);
    if (p) {
        p->cores_per_rank = cores;
        p->serial = 100;
        p->array_id = id0;
    }
    return p;
}

static struct pl_dtask *addtask(struct pl_sched *s, uint64_t id, int32_t prio)
{
    char a0[] = "true";
    char *v[] = { a0, NULL };
    char **argv = pl_strv_dup(v), **env = NULL, *cwd = NULL;
    struct pl_dtask *t = pl_sched_task_add(s, id, true, prio, &argv, &env,
                                           &cwd);

    pl_strv_free(argv);
    if (t)
        t->state = PL_ST_QUEUED;
    return t;
}

struct placed {
    uint64_t id[64];
    size_t n;
};

static void place_cb(struct pl_dtask *t, void *arg)
{
    struct placed *p = arg;

    if (p->n < 64)
        p->id[p->n] = t->id;
    p->n++;
    t->state = PL_ST_ASSIGNED;
}

static bool ids_are(const struct placed *p, const uint64_t *ids, size_t n)
{
    if (p->n != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p->id[i] != ids[i])
            return false;
    return true;
}

static void test_helpers(void)
{
    char *s = pl_queue_subst("a{}b{}", 42);
    is_str(s, "a42b42", "subst: every {} is the index");
    free(s);
    s = pl_queue_subst("none", 7);
    is_str(s, "none", "subst: no {} stays as it is");
    free(s);
    ok(!pl_queue_subst(NULL, 1) && errno == 0, "subst: NULL stays NULL");

    struct pl_qruns rs = { 0 };
    char **a = NULL, **e = NULL, *c = NULL;
    struct pl_qrun *r1 = pl_qrun_new(10, 5, 0, 1, &a, &e, &c);
    struct pl_qrun *r2 = pl_qrun_new(20, 5, 0, 1, &a, &e, &c);
    struct pl_qrun *r3 = pl_qrun_new(15, 2, 0, 1, &a, &e, &c);
    ok(pl_qruns_add(&rs, r1) == 0 && pl_qruns_add(&rs, r2) == 0
       && pl_qruns_add(&rs, r3) == 0 && rs.n == 3 && rs.v[1] == r3,
       "runs stay sorted by id (one added between two)");
    ok(pl_qruns_find(&rs, 10) == r1 && pl_qruns_find(&rs, 14) == r1
       && pl_qruns_find(&rs, 16) == r3 && pl_qruns_find(&rs, 24) == r2,
       "find: the run holding an id, at either end");
    ok(!pl_qruns_find(&rs, 9) && !pl_qruns_find(&rs, 17)
       && !pl_qruns_find(&rs, 25), "find: NULL between and around runs");
    pl_qruns_del(&rs, r3);
    ok(rs.n == 2 && !pl_qruns_find(&rs, 15) && pl_qruns_find(&rs, 20) == r2,
       "del: the run is gone, the others found");
    pl_qrun_free(r1);
    pl_qrun_free(r2);
    pl_qrun_free(r3);
    free(rs.v);
}

struct each {
    size_t entries;
    uint64_t tasks, first_n;
    uint32_t first_cores;
};

static void each_cb(const struct pl_dtask *t, uint64_t n, void *arg)
{
    struct each *e = arg;

    if (!e->entries++) {
        e->first_n = n;
        e->first_cores = t->cores_per_rank;
    }
    e->tasks += n;
}

static void test_runs(void)
{
    struct pl_sched *s = pl_sched_new();
    struct placed pl = { 0 };
    uint64_t elems = 0;
    struct pl_dtask *t;

    ok(addrun(s, 1, 10, 0, 1) != NULL, "a run of ids 1-10");
    ok(addtask(s, 11, 0) != NULL, "task 11 behind it");
    ok(addrun(s, 12, 4, 5, 1) != NULL, "a run of ids 12-15, priority 5");
    is(pl_sched_queued(s), 15, "15 queued");
    ok(pl_sched_runs(s, &elems) == 2 && elems == 14,
       "2 runs hold 14 elements");
    ok(!pl_sched_task_peek(s, 3) && pl_sched_live(s, 3)
       && !pl_sched_live(s, 16), "an element is live, no task (peek)");
    ok(addrun(s, 10, 3, 0, 1) == NULL && errno == EEXIST,
       "a run over live ids: EEXIST");
    char **a = NULL, **e = NULL, *c = NULL;
    ok(!pl_sched_task_add(s, 5, true, 0, &a, &e, &c) && errno == EEXIST,
       "a task of an element's id: EEXIST");

    t = pl_sched_task_get(s, 5);
    ok(t && t->id == 5 && t->array_index == 40 && t->serial == 104
       && t->inq && !t->run && t->state == PL_ST_QUEUED,
       "get(5): element 5 made a task (index 40, serial 104, queued)");
    ok(t && t->argv && !strcmp(t->argv[1], "i=40") && t->cwd
       && !strcmp(t->cwd, "/tmp"), "... its argv filled in, its cwd");
    ok(pl_sched_task_get(s, 5) == t, "get(5) again: the same task");
    ok(pl_sched_runs(s, &elems) == 3 && elems == 13
       && pl_sched_queued(s) == 15, "the run split around it: 3 runs");
    is(pl_sched_ahead(s, t), 4 + 4, "4 of priority 5 and 4 elements before it");
    struct each ea = { 0 };
    pl_sched_queue_each(s, each_cb, &ea);
    ok(ea.entries == 5 && ea.tasks == 15 && ea.first_n == 4
       && ea.first_cores == 1, "queue_each: 5 entries (3 runs, 2 tasks) "
       "stand for the 15, the first a run of 4 of priority 5");
    ok(pl_sched_runs(s, &elems) == 3 && elems == 13,
       "... and changed no run");

    addnode(s, "a", 64);
    is(pl_sched_run(s, place_cb, &pl), 15, "a pass places all 15");
    uint64_t want[] = { 12, 13, 14, 15, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 };
    ok(ids_are(&pl, want, 15), "in queue order: priority 5, then FIFO");
    ok(pl_sched_runs(s, &elems) == 0 && elems == 0
       && pl_sched_queued(s) == 0, "no run is left");
    t = pl_sched_task_peek(s, 7);
    ok(t && t->rank && t->rank[0].node && !strcmp(t->argv[1], "i=60"),
       "element 7 placed with its own argv");
    pl_sched_free(s);
}

/* A head that cannot start: the pass goes on after its run. */
static void test_blocked(void)
{
    struct pl_sched *s = pl_sched_new();
    struct placed pl = { 0 };
    uint64_t elems = 0;

    addnode(s, "a", 2);
    ok(addrun(s, 1, 5, 0, 4) != NULL, "a run of 5 elements of 4 cores");
    ok(addtask(s, 6, 0) != NULL, "task 6 of 1 core behind it");
    is(pl_sched_run(s, place_cb, &pl), 1, "a pass places one");
    ok(pl.n == 1 && pl.id[0] == 6, "... task 6: the run was passed");
    ok(pl_sched_runs(s, &elems) == 1 && elems == 4 && pl_sched_queued(s) == 5,
       "one element was made a task, 4 stay in the run");
    pl.n = 0;
    is(pl_sched_run(s, place_cb, &pl), 0, "a second pass places none");
    ok(pl_sched_runs(s, &elems) == 1 && elems == 4,
       "... and makes no more tasks of the run");

    /* cancel: one element, then the rest (as cancel.c: get, dequeue,
     * remove) */
    struct pl_dtask *t = pl_sched_task_get(s, 3);
    ok(t != NULL, "element 3 made a task");
    pl_sched_dequeue(s, t);
    pl_sched_task_remove(s, t);
    ok(!pl_sched_live(s, 3) && pl_sched_live(s, 4) && pl_sched_live(s, 2)
       && pl_sched_queued(s) == 4, "element 3 canceled, 2 and 4 live");
    t = pl_sched_task_get_bare(s, 5);
    ok(t && t->id == 5 && !t->argv && !t->cwd && t->inq
       && t->cores_per_rank == 4, "get_bare(5): a task without its command");
    for (uint64_t id = 1; id <= 5; id++)
        if ((t = pl_sched_task_get_bare(s, id))) {
            pl_sched_dequeue(s, t);
            pl_sched_task_remove(s, t);
        }
    ok(pl_sched_queued(s) == 0 && pl_sched_runs(s, &elems) == 0,
       "the whole array canceled: the queue is empty");
    pl_sched_free(s);
}

/* Runs whose rows are in the database: a fill callback. */
static int fills;
static int fill(struct pl_dtask *t, void *arg)
{
    char num[24], a0[] = "run", *v[] = { a0, num, NULL };

    (void)arg;
    fills++;
    if (t->id == 4) {
        errno = ENOENT; /* its row cannot be read */
        return -1;
    }
    snprintf(num, sizeof(num), "%llu", (unsigned long long)t->id);
    t->argv = pl_strv_dup(v);
    t->cores_per_rank = t->id == 2 ? 8 : 1; /* not the same shape */
    return 0;
}

static void test_fill(void)
{
    struct pl_sched *s = pl_sched_new();
    struct placed pl = { 0 };
    char **a = NULL, **e = NULL, *c = NULL;
    struct pl_dtask *p = pl_sched_run_add(s, 1, 6, 0, 0, 0, &a, &e, &c);

    ok(p && !p->argv, "a run of the database (no argv) of ids 1-6");
    pl_sched_set_fill(s, fill, NULL, NULL);
    addnode(s, "a", 4);
    is(pl_sched_run(s, place_cb, &pl), 4, "a pass places 4");
    uint64_t want[] = { 1, 3, 5, 6 };
    ok(ids_are(&pl, want, 4), "1, 3, 5, 6: 2 is too large, 4 unreadable");
    is(fills, 6, "each element filled once");
    struct pl_dtask *t = pl_sched_task_peek(s, 5);
    ok(t && !strcmp(t->argv[1], "5"), "element 5's argv from its fill");
    ok(pl_sched_queued(s) == 1 && pl_sched_task_peek(s, 2)
       && !pl_sched_live(s, 4), "2 waits, 4 left the queue");
    pl_sched_free(s);
}

/* pl_sched_node_tasks(NULL): a run's head stands for it */
static int visits;
static void visit_keep(struct pl_dtask *t, void *arg)
{
    (void)t;
    (void)arg;
    visits++;
}

static void visit_remove(struct pl_dtask *t, void *arg)
{
    struct pl_sched *s = arg;

    visits++;
    pl_sched_dequeue(s, t);
    pl_sched_task_remove(s, t);
}

static void test_all(void)
{
    struct pl_sched *s = pl_sched_new();
    uint64_t elems = 0;

    addrun(s, 1, 100, 0, 1);
    addrun(s, 101, 50, 3, 1);
    addtask(s, 151, 0);
    pl_sched_node_tasks(s, NULL, visit_keep, NULL);
    is(visits, 3, "all tasks: the task and the head of each run");
    ok(pl_sched_runs(s, &elems) == 2 && elems == 148,
       "... the heads were made tasks, nothing else");
    visits = 0;
    pl_sched_node_tasks(s, NULL, visit_remove, s);
    is(visits, 151, "a callback that removes them visits every element");
    ok(pl_sched_queued(s) == 0 && pl_sched_runs(s, &elems) == 0,
       "... and the queue is empty");
    pl_sched_free(s);
}

/* Millions: one run, no task until needed. */
static void test_large(void)
{
    struct pl_sched *s = pl_sched_new();
    struct placed pl = { 0 };
    uint64_t elems = 0, n = 3000000;

    ok(addrun(s, 1, n, 0, 1) != NULL, "a run of 3,000,000 elements");
    ok(pl_sched_queued(s) == n && pl_sched_runs(s, &elems) == 1
       && elems == n, "one run holds them");
    struct pl_dtask *t = pl_sched_task_get(s, 2000000);
    ok(t && t->array_index == 19999990, "get(2,000,000): its index");
    ok(pl_sched_runs(s, &elems) == 2 && elems == n - 1,
       "... 2 runs around it");
    is(pl_sched_ahead(s, t), 1999999, "1,999,999 ahead of it");
    addnode(s, "a", 3);
    is(pl_sched_run(s, place_cb, &pl), 3, "a pass on 3 cores places 3");
    ok(pl.id[0] == 1 && pl.id[2] == 3 && pl_sched_queued(s) == n - 3,
       "... the first 3");
    ok(pl_sched_max_id(s) >= n, "the table covers the run's ids");
    pl_sched_free(s);
}

int main(void)
{
    plan(NTESTS);
    test_helpers();
    test_runs();
    test_blocked();
    test_fill();
    test_all();
    test_large();
    return done_testing();
}
