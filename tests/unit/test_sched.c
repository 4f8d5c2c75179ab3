/* tests/unit/test_sched.c - nodes' cores and GPUs, the queue, placement */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/node.h"
#include "daemon/sched.h"
#include "proto/msg.h"
#include "proto/state.h"
#include "tests/unit/tap.h"

#define MAXC 64 /* cores per node in these tests, at most */
#define MAXG 8

/* A node whose CPU ids are 100 + index and GPU ids "g0", "g1", ... */
static struct pl_node *mknode(const char *name, uint32_t ncores,
                              uint32_t ngpus)
{
    uint64_t cpu[MAXC];
    char gbuf[MAXG][16];
    char *g[MAXG + 1];

    for (uint32_t i = 0; i < ncores; i++)
        cpu[i] = 100 + i;
    for (uint32_t i = 0; i < ngpus; i++) {
        snprintf(gbuf[i], sizeof(gbuf[i]), "g%u", i);
        g[i] = gbuf[i];
    }
    g[ngpus] = NULL;
    struct pl_node *n = pl_node_new(name, cpu, ncores, ngpus ? g : NULL);
    if (n)
        n->want = true;
    return n;
}

static struct pl_node *addnode(struct pl_sched *s, const char *name,
                               uint32_t ncores, uint32_t ngpus)
{
    struct pl_node *n = mknode(name, ncores, ngpus);

    if (!n || pl_sched_node_add(s, n) < 0) {
        diag("cannot add node %s", name);
        exit(1);
    }
    return n;
}

static struct pl_dtask *addtask(struct pl_sched *s, uint64_t id,
                                uint32_t cores, uint32_t gpus)
{
    char a0[] = "true";
    char *v[] = { a0, NULL };
    char **argv = pl_strv_dup(v), **env = NULL, *cwd = strdup("/tmp");
    struct pl_dtask *t = pl_sched_task_add(s, id, PL_ST_QUEUED, &argv, &env,
                                           &cwd);

    if (!t) {
        pl_strv_free(argv);
        free(cwd);
        return NULL;
    }
    t->cores_per_rank = cores;
    t->gpus_per_rank = gpus;
    t->retries = 1;
    return t;
}

/* What pl_sched_run() placed, in order. */
struct placed {
    int n;
    uint64_t id[64];
    const struct pl_node *node[64];
    int bad;
};

static void place_cb(struct pl_dtask *t, struct pl_node *n, void *arg)
{
    struct placed *p = arg;

    if (t->node != n || t->state != PL_ST_ASSIGNED)
        p->bad++;
    for (uint32_t i = 0; i < t->cores_per_rank; i++)
        if (n->core_task[t->core_idx[i]] != t->id)
            p->bad++;
    if (p->n < 64) {
        p->id[p->n] = t->id;
        p->node[p->n] = n;
    }
    p->n++;
}

static bool placed_are(const struct placed *p, const uint64_t *ids, int n)
{
    if (p->n != n || p->bad)
        return false;
    for (int i = 0; i < n; i++)
        if (p->id[i] != ids[i])
            return false;
    return true;
}

static void test_node(void)
{
    struct pl_node *n = mknode("a", 4, 2);
    uint32_t ci[8], gi[8], ci2[8], gi2[8];
    char buf[64];

    ok(n && !strcmp(n->name, "a") && n->ncores == 4 && n->free_cores == 4
           && n->ngpus == 2 && n->free_gpus == 2 && n->state == PL_NODE_UP
           && n->running == 0,
       "pl_node_new: 4 cores, 2 GPUs, up, nothing running");

    is(pl_node_alloc(n, 1, 2, 1, ci, gi), 0, "alloc 2 cores 1 GPU for task 1");
    ok(ci[0] == 0 && ci[1] == 1 && gi[0] == 0, "... lowest indexes: 0, 1; g0");
    ok(n->free_cores == 2 && n->free_gpus == 1 && n->core_task[0] == 1
           && n->core_task[1] == 1 && n->gpu_task[0] == 1 && n->running == 1,
       "... held by task 1, counts updated");

    /* refusals change nothing */
    uint64_t ct[4], gt[2];
    memcpy(ct, n->core_task, sizeof(ct));
    memcpy(gt, n->gpu_task, sizeof(gt));
    for (int i = 0; i < 8; i++)
        ci2[i] = gi2[i] = 77;
    errno = 0;
    is(pl_node_alloc(n, 2, 3, 0, ci2, gi2), -1, "alloc 3 cores: too many");
    is(errno, EAGAIN, "... EAGAIN");
    errno = 0;
    ok(pl_node_alloc(n, 2, 1, 2, ci2, gi2) == -1 && errno == EAGAIN,
       "alloc 2 GPUs: too many (EAGAIN)");
    ok(!memcmp(ct, n->core_task, sizeof(ct))
           && !memcmp(gt, n->gpu_task, sizeof(gt)) && n->free_cores == 2
           && n->free_gpus == 1 && n->running == 1 && ci2[0] == 77
           && gi2[0] == 77,
       "... refusals left the node and the outputs as they were");

    is(pl_node_alloc(n, 2, 2, 1, ci2, gi2), 0, "alloc 2 cores 1 GPU for 2");
    ok(ci2[0] == 2 && ci2[1] == 3 && gi2[0] == 1, "... cores 2, 3; g1");
    ok(pl_node_alloc(n, 3, 1, 0, ci, gi) == -1 && n->free_cores == 0,
       "full node: alloc 1 core refused");
    pl_node_cpu_str(n, ci2, 2, buf, sizeof(buf));
    is_str(buf, "102,103", "pl_node_cpu_str of task 2: CPU ids 102,103");
    pl_node_gpu_str(n, gi2, 1, buf, sizeof(buf));
    is_str(buf, "g1", "pl_node_gpu_str of task 2: g1");
    pl_node_cpu_str(n, ci2, 0, buf, sizeof(buf));
    is_str(buf, "", "pl_node_cpu_str of nothing: ''");
    char small[5];
    pl_node_cpu_str(n, ci2, 2, small, sizeof(small));
    ok(strlen(small) < sizeof(small), "pl_node_cpu_str truncates safely ('%s')",
       small);

    /* release: only what the task holds */
    uint32_t other[] = { 2 };
    pl_node_release(n, 99, other, 1, NULL, 0);
    ok(n->core_task[2] == 2 && n->free_cores == 0,
       "release by the wrong task frees nothing");
    pl_node_release(n, 1, ci, 2, gi, 1);
    ok(n->free_cores == 2 && n->free_gpus == 1 && n->core_task[0] == 0
           && n->core_task[1] == 0 && n->gpu_task[0] == 0,
       "release task 1: its cores and GPU are free");
    pl_node_release(n, 1, ci, 2, gi, 1);
    ok(n->free_cores == 2 && n->free_gpus == 1,
       "releasing twice does not count twice");
    is(pl_node_alloc(n, 3, 1, 0, ci, gi), 0, "alloc 1 core for 3");
    is(ci[0], 0, "... the lowest free core, 0");
    pl_node_free(n);

    n = mknode("b", 2, 0);
    ok(n && n->ngpus == 0 && n->gpu && n->gpu[0] == NULL,
       "node without GPUs: empty GPU list");
    pl_node_free(n);
    pl_node_free(NULL);
}

static void test_fifo_rr(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n1 = addnode(s, "n1", 4, 0);
    struct pl_node *n2 = addnode(s, "n2", 4, 0);
    struct pl_node *n3 = addnode(s, "n3", 4, 0);
    struct placed p = { 0 };

    for (uint64_t id = 1; id <= 6; id++)
        addtask(s, id, 1, 0);
    is(pl_sched_queued(s), 6, "6 tasks queued");
    is(pl_sched_run(s, place_cb, &p), 6, "run places all 6");
    const uint64_t fifo[] = { 1, 2, 3, 4, 5, 6 };
    ok(placed_are(&p, fifo, 6), "... in FIFO order");
    ok(p.node[0] == n1 && p.node[1] == n2 && p.node[2] == n3 && p.node[3] == n1
           && p.node[4] == n2 && p.node[5] == n3,
       "... spread round-robin: n1 n2 n3 n1 n2 n3");
    ok(n1->free_cores == 2 && n2->free_cores == 2 && n3->free_cores == 2
           && n1->running == 2,
       "... 2 cores used on each node");
    struct pl_dtask *t = pl_sched_task_get(s, 4);
    ok(t && t->state == PL_ST_ASSIGNED && t->attempt == 1 && t->node == n1,
       "task 4 assigned on n1, attempt 1");
    is(pl_sched_queued(s), 0, "queue empty");

    /* only up nodes that want work */
    n2->want = false;
    n3->state = PL_NODE_LOST;
    addtask(s, 7, 1, 0);
    addtask(s, 8, 1, 0);
    addtask(s, 9, 1, 0);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 2, "n2 not wanting, n3 lost: 2 placed");
    ok(p.n == 2 && p.node[0] == n1 && p.node[1] == n1, "... both on n1");
    is(pl_sched_queued(s), 1, "... task 9 still queued");
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 0, "nothing fits: 0 placed");

    /* removing a task frees its cores */
    t = pl_sched_task_get(s, 1);
    pl_sched_task_remove(s, t);
    ok(pl_sched_task_get(s, 1) == NULL && n1->free_cores == 1,
       "remove task 1: forgotten, its core free");
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "then task 9 runs");
    ok(p.n == 1 && p.id[0] == 9 && p.node[0] == n1, "... on n1");

    /* nodes */
    uint32_t mc, mg;
    pl_sched_max(s, &mc, &mg);
    ok(mc == 4 && mg == 0, "pl_sched_max: 4 cores, 0 GPUs");
    struct pl_node *n4 = addnode(s, "n4", 16, 2);
    n4->want = false;
    pl_sched_max(s, &mc, &mg);
    ok(mc == 16 && mg == 2, "with n4 (not wanting work): 16 cores, 2 GPUs");
    memcpy(n2->rid, "rid-2", 5);
    n2->ridlen = 5;
    ok(pl_sched_nnodes(s) == 4 && pl_sched_node_at(s, 3) == n4
           && pl_sched_node_at(s, 4) == NULL
           && pl_sched_node_find(s, "n3") == n3
           && pl_sched_node_find(s, "n5") == NULL
           && pl_sched_node_by_rid(s, "rid-2", 5) == n2
           && pl_sched_node_by_rid(s, "rid-", 4) == NULL,
       "nnodes, node_at, node_find, node_by_rid");
    pl_sched_free(s);
}

static void requeue_cb(struct pl_dtask *t, void *arg)
{
    struct pl_sched *s = arg;

    pl_sched_requeue(s, t, true);
}

static void test_backfill(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n1 = addnode(s, "n1", 4, 0);
    struct pl_node *n2 = addnode(s, "n2", 4, 0);
    struct placed p = { 0 };

    addtask(s, 1, 3, 0);
    addtask(s, 2, 3, 0);
    addtask(s, 3, 3, 0); /* fits nowhere now */
    addtask(s, 4, 1, 0);
    addtask(s, 5, 8, 0); /* larger than any node */
    addtask(s, 6, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 4, "backfill: 4 placed");
    const uint64_t first[] = { 1, 2, 4, 6 };
    ok(placed_are(&p, first, 4), "... 1, 2, then 4 and 6 past 3 and 5");
    ok(n1->free_cores == 0 && n2->free_cores == 0, "... both nodes full");
    is(pl_sched_queued(s), 2, "... 3 and 5 wait");

    /* a requeued task goes first */
    struct pl_dtask *t2 = pl_sched_task_get(s, 2);
    struct pl_node *was = t2->node;
    pl_sched_requeue(s, t2, true);
    ok(t2->state == PL_ST_QUEUED && t2->node == NULL && was->free_cores == 3,
       "requeue task 2: queued, its 3 cores free");
    is(pl_sched_queued(s), 3, "... 3 queued");
    pl_sched_requeue(s, t2, true);
    is(pl_sched_queued(s), 3, "requeue of a queued task: no change");
    pl_sched_task_remove(s, pl_sched_task_get(s, 1));
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 2, "after removing 1: 2 placed");
    const uint64_t second[] = { 2, 3 };
    ok(placed_are(&p, second, 2), "... 2 (requeued at head) before 3");
    is(t2->attempt, 2, "task 2 attempt 2");
    pl_sched_task_remove(s, pl_sched_task_get(s, 5));
    is(pl_sched_queued(s), 0, "removing queued task 5 empties the queue");

    /* requeue at the tail */
    struct pl_sched *s2 = pl_sched_new();
    addnode(s2, "one", 1, 0);
    for (uint64_t id = 1; id <= 3; id++)
        addtask(s2, id, 1, 0);
    memset(&p, 0, sizeof(p));
    pl_sched_run(s2, place_cb, &p);
    pl_sched_requeue(s2, pl_sched_task_get(s2, 1), false);
    for (int i = 0; i < 3; i++) {
        pl_sched_run(s2, place_cb, &p);
        pl_sched_requeue(s2, pl_sched_task_get(s2, p.id[p.n - 1]), false);
    }
    const uint64_t tail[] = { 1, 2, 3, 1 };
    ok(placed_are(&p, tail, 4), "requeue at the tail: 1, 2, 3, 1");
    pl_sched_free(s2);

    /* every task on a node, e.g. when its agent is lost */
    int on1 = 0, total = 0;
    for (uint64_t id = 1; id <= 6; id++) {
        struct pl_dtask *t = pl_sched_task_get(s, id);
        if (t && t->node == n1)
            on1++;
        if (t && t->node)
            total++;
    }
    n1->state = PL_NODE_LOST;
    pl_sched_node_tasks(s, n1, requeue_cb, s);
    ok(pl_sched_queued(s) == (size_t)on1 && n1->free_cores == 4
           && n1->running == 0,
       "node_tasks requeues the %d tasks on n1 only", on1);
    pl_sched_node_tasks(s, NULL, requeue_cb, s);
    is(pl_sched_queued(s), total, "node_tasks(NULL) visits every task");
    pl_sched_free(s); /* with tasks queued: ASan checks nothing leaks */
}

static void test_gpus(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *c = addnode(s, "cpu", 8, 0);
    struct pl_node *g = addnode(s, "gpu", 8, 2);
    struct placed p = { 0 };
    char buf[32];

    addtask(s, 1, 1, 1);
    addtask(s, 2, 1, 2);
    addtask(s, 3, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 2, "GPUs: 2 placed");
    struct pl_dtask *t1 = pl_sched_task_get(s, 1);
    struct pl_dtask *t3 = pl_sched_task_get(s, 3);
    ok(t1->node == g && t3->node && p.id[0] == 1 && p.id[1] == 3,
       "... the 1-GPU task on the GPU node, task 2 (2 GPUs) waits");
    pl_sched_task_remove(s, t1);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "after task 1: task 2 placed");
    struct pl_dtask *t2 = pl_sched_task_get(s, 2);
    pl_node_gpu_str(g, t2->gpu_idx, 2, buf, sizeof(buf));
    ok(t2->node == g && !strcmp(buf, "g0,g1") && g->free_gpus == 0,
       "... on the GPU node with g0,g1");
    (void)c;
    pl_sched_free(s);
}

static void test_tasks(void)
{
    struct pl_sched *s = pl_sched_new();
    char a0[] = "x";
    char *v[] = { a0, NULL };
    char **argv = pl_strv_dup(v), **env = NULL, *cwd = NULL;

    ok(addtask(s, 1, 1, 0) != NULL, "add task 1");
    errno = 0;
    ok(pl_sched_task_add(s, 1, PL_ST_QUEUED, &argv, &env, &cwd) == NULL
           && errno == EEXIST,
       "add task 1 again: EEXIST");
    ok(argv != NULL, "... the caller still owns argv");
    struct pl_dtask *t = pl_sched_task_add(s, 5000, PL_ST_RUNNING, &argv,
                                           &env, &cwd);
    ok(t && argv == NULL && pl_sched_task_get(s, 5000) == t
           && !strcmp(t->argv[0], "x"),
       "add task 5000 (grows the table): it owns argv now");
    ok(pl_sched_queued(s) == 1, "a running task does not join the queue");
    ok(pl_sched_task_get(s, 4999) == NULL && pl_sched_task_get(s, 1 << 30)
           == NULL,
       "unknown ids: NULL");
    pl_strv_free(argv);
    pl_sched_free(s);
    pl_sched_free(NULL);
}

/* Cancel while queued: out of the queue, then forgotten.  pl_sched.h
 * allows both calls in this order (the daemon changes the state in
 * between, but nothing in the interface asks for that). */
static void test_dequeue(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n = addnode(s, "n", 4, 0);
    struct placed p = { 0 };

    n->want = false;
    for (uint64_t id = 1; id <= 3; id++)
        addtask(s, id, 1, 0);
    struct pl_dtask *t2 = pl_sched_task_get(s, 2);
    pl_sched_dequeue(s, t2);
    is(pl_sched_queued(s), 2, "dequeue task 2: 2 queued");
    pl_sched_task_remove(s, t2);
    is(pl_sched_queued(s), 2, "dequeue then remove: still 2 queued");

    struct pl_dtask *t3 = pl_sched_task_get(s, 3);
    pl_sched_dequeue(s, t3);
    pl_sched_requeue(s, t3, true);
    n->want = true;
    pl_sched_run(s, place_cb, &p);
    ok(p.n >= 1 && p.id[0] == 3,
       "dequeue then requeue at head: task 3 is placed first (%d placed)",
       p.n);
    pl_sched_free(s);
}

/* The table by id grows to the next power of two past the id: for an id of
 * 2^61 or more, ncap * sizeof(ptr) wraps to 0 and realloc(tab, 0) frees the
 * table; past 2^63 ncap itself wraps to 0 and the doubling loop never ends.
 * Such an id must be refused (ENOMEM) with the scheduler intact.  In a
 * child, as it may crash or hang. */
static void huge_id(uint64_t big, const char *what)
{
    pid_t pid;
    int status = 0;

    fflush(stdout);
    if ((pid = fork()) < 0) {
        ok(0, "fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        alarm(1);
        struct pl_sched *s = pl_sched_new();
        int good = addtask(s, 1, 1, 0) != NULL;
        good += addtask(s, big, 1, 0) == NULL;
        good += addtask(s, 2, 1, 0) != NULL && pl_sched_task_get(s, 1)
                && pl_sched_queued(s) == 2;
        pl_sched_free(s);
        _exit(good == 3 ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    if (!ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "task id %s refused, the scheduler intact", what))
        diag("child %s %d%s", WIFEXITED(status) ? "exited" : "killed by signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
             WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? " (hung)"
                                                                 : "");
}

static void test_huge_id(void)
{
    huge_id((uint64_t)1 << 61, "2^61");
    huge_id(((uint64_t)1 << 63) + 1, "2^63+1");
}

/* ------------------------------------------------------------ random */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 32) % n);
}

#define NLIVE 4096

struct world {
    struct pl_sched *s;
    uint64_t live[NLIVE];
    size_t nlive;
    uint64_t next_id;
    size_t placements;
    int bad_place;
};

static void forget(struct world *w, uint64_t id)
{
    for (size_t i = 0; i < w->nlive; i++) {
        if (w->live[i] == id) {
            w->live[i] = w->live[--w->nlive];
            return;
        }
    }
}

static void rplace_cb(struct pl_dtask *t, struct pl_node *n, void *arg)
{
    struct world *w = arg;

    w->placements++;
    if (t->node != n || t->state != PL_ST_ASSIGNED
        || t->cores_per_rank > n->ncores || t->gpus_per_rank > n->ngpus)
        w->bad_place++;
}

static void lost_cb(struct pl_dtask *t, void *arg)
{
    struct world *w = arg;

    if (t->attempt <= t->retries)
        pl_sched_requeue(w->s, t, true);
    else {
        forget(w, t->id);
        pl_sched_task_remove(w->s, t);
    }
}

/* The invariants: each core and GPU is held by at most one task, exactly
 * the ones its tasks list; free counts match; free cores add up to the
 * total less the cores of placed tasks; the queue count is right; removed
 * tasks are gone.  Returns the number of violations. */
static int check(struct world *w, int op)
{
    static uint32_t holders[8][MAXC], gholders[8][MAXG], running[8];
    size_t nn = pl_sched_nnodes(w->s), queued = 0;
    uint64_t total = 0, free_total = 0, held = 0;
    int bad = 0;

    memset(holders, 0, sizeof(holders));
    memset(gholders, 0, sizeof(gholders));
    memset(running, 0, sizeof(running));
    for (size_t i = 0; i < w->nlive; i++) {
        struct pl_dtask *t = pl_sched_task_get(w->s, w->live[i]);
        if (!t) {
            bad++;
            continue;
        }
        if (t->state == PL_ST_QUEUED) {
            queued++;
            if (t->node)
                bad++;
            continue;
        }
        if (!t->node) {
            bad++;
            continue;
        }
        size_t k = 0;
        while (k < nn && pl_sched_node_at(w->s, k) != t->node)
            k++;
        if (k == nn) {
            bad++;
            continue;
        }
        running[k]++;
        held += t->cores_per_rank;
        for (uint32_t c = 0; c < t->cores_per_rank; c++) {
            uint32_t ci = t->core_idx[c];
            if (ci >= t->node->ncores || t->node->core_task[ci] != t->id)
                bad++;
            else
                holders[k][ci]++;
        }
        for (uint32_t g = 0; g < t->gpus_per_rank; g++) {
            uint32_t gi = t->gpu_idx[g];
            if (gi >= t->node->ngpus || t->node->gpu_task[gi] != t->id)
                bad++;
            else
                gholders[k][gi]++;
        }
    }
    for (size_t k = 0; k < nn; k++) {
        struct pl_node *n = pl_sched_node_at(w->s, k);
        uint32_t used = 0, gused = 0;
        for (uint32_t c = 0; c < n->ncores; c++) {
            if (holders[k][c] > 1
                || (holders[k][c] == 1) != (n->core_task[c] != 0))
                bad++;
            used += n->core_task[c] != 0;
        }
        for (uint32_t g = 0; g < n->ngpus; g++) {
            if (gholders[k][g] > 1
                || (gholders[k][g] == 1) != (n->gpu_task[g] != 0))
                bad++;
            gused += n->gpu_task[g] != 0;
        }
        if (n->free_cores != n->ncores - used
            || n->free_gpus != n->ngpus - gused
            || n->running != running[k])
            bad++;
        total += n->ncores;
        free_total += n->free_cores;
    }
    if (free_total != total - held)
        bad++;
    if (queued != pl_sched_queued(w->s))
        bad++;
    for (uint64_t id = 1; id < w->next_id; id++) {
        bool live = false;
        struct pl_dtask *t = pl_sched_task_get(w->s, id);
        for (size_t i = 0; t && !live && i < w->nlive; i++)
            live = w->live[i] == id;
        if (t && !live)
            bad++;
    }
    if (bad)
        diag("op %d: %d invariant violations (free %llu, total %llu, held "
             "%llu, queued %zu/%zu)", op, bad, (unsigned long long)free_total,
             (unsigned long long)total, (unsigned long long)held, queued,
             pl_sched_queued(w->s));
    return bad;
}

static void test_random(void)
{
    static struct world w;
    int violations = 0, first = -1;

    w.s = pl_sched_new();
    w.next_id = 1;
    for (int k = 0; k < 6; k++) {
        char name[16];
        snprintf(name, sizeof(name), "r%d", k);
        struct pl_node *n = addnode(w.s, name, 1 + rnd(16), rnd(4));
        n->want = rnd(4) != 0;
    }
    for (int op = 0; op < 10000; op++) {
        uint32_t r = rnd(100);
        struct pl_dtask *t = w.nlive ? pl_sched_task_get(w.s,
                                           w.live[rnd((uint32_t)w.nlive)])
                                     : NULL;
        if (r < 30 && w.nlive < NLIVE) {
            uint64_t id = w.next_id++;
            if (addtask(w.s, id, 1 + rnd(18), rnd(5) == 0 ? 1 + rnd(2) : 0))
                w.live[w.nlive++] = id;
        }
        else if (r < 50)
            pl_sched_run(w.s, rplace_cb, &w);
        else if (r < 65 && t) { /* ended */
            forget(&w, t->id);
            pl_sched_task_remove(w.s, t);
        }
        else if (r < 75 && t && t->state != PL_ST_QUEUED)
            pl_sched_requeue(w.s, t, rnd(2));
        else if (r < 80 && t && t->state == PL_ST_QUEUED) { /* canceled */
            pl_sched_dequeue(w.s, t);
            t->state = PL_ST_CANCELED;
            forget(&w, t->id);
            pl_sched_task_remove(w.s, t);
        }
        else if (r < 90) {
            struct pl_node *n = pl_sched_node_at(w.s, rnd(6));
            n->want = !n->want;
        }
        else if (r < 95) {
            struct pl_node *n = pl_sched_node_at(w.s, rnd(6));
            if (n->state == PL_NODE_UP) {
                n->state = PL_NODE_LOST;
                pl_sched_node_tasks(w.s, n, lost_cb, &w);
            }
            else
                n->state = PL_NODE_UP;
        }
        else if (t && t->state == PL_ST_ASSIGNED)
            t->state = PL_ST_RUNNING;
        int b = check(&w, op);
        if (b && first < 0)
            first = op;
        violations += b;
        if (violations > 20)
            break;
    }
    ok(violations == 0 && w.bad_place == 0,
       "10000 random operations: invariants hold (first violation at op %d)",
       first);
    ok(w.placements > 500, "... with %zu placements, %zu tasks live at the "
       "end", w.placements, w.nlive);
    pl_sched_free(w.s);
}

int main(void)
{
    plan(69);
    test_node();
    test_fifo_rr();
    test_backfill();
    test_gpus();
    test_tasks();
    test_dequeue();
    test_huge_id();
    test_random();
    return done_testing();
}
