/* tests/unit/test_daemon_sched.c - nodes' cores and GPUs, the queue, placement */
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
#include "tests/unit/sched_fixture.h"
#include "tests/unit/tap.h"

#define MAXC T_SCHED_MAXC
#define MAXG T_SCHED_MAXG
#define NTESTS 160

static struct pl_dtask *addtask(struct pl_sched *s, uint64_t id,
                                uint32_t cores, uint32_t gpus)
{
    char a0[] = "true";
    char *v[] = { a0, NULL };
    char **argv = pl_strv_dup(v), **env = NULL, *cwd = strdup("/tmp");
    struct pl_dtask *t = pl_sched_task_add(s, id, true, 0, &argv, &env, &cwd);

    if (!t) {
        pl_strv_free(argv);
        free(cwd);
        return NULL;
    }
    t->state = PL_ST_QUEUED; /* as pilotd records it (daemon/task.c) */
    t->cores_per_rank = cores;
    t->gpus_per_rank = gpus;
    t->retries = 1;
    return t;
}

/* A multi-rank task: 'ranks' x ('cores', 'gpus'), --nodes 'nodes',
 * --ranks-per-node 'rpn', --exclusive 'excl'. */
static struct pl_dtask *addgang(struct pl_sched *s, uint64_t id,
                                uint32_t ranks, uint32_t cores, uint32_t gpus,
                                uint32_t nodes, uint32_t rpn, bool excl)
{
    struct pl_dtask *t = addtask(s, id, cores, gpus);

    if (t) {
        t->ranks = ranks;
        t->nodes_req = nodes;
        t->ranks_per_node = rpn;
        t->exclusive = excl;
    }
    return t;
}

/* Whether every rank of 't' is placed and holds the cores and GPUs it
 * lists, no index twice. */
static bool ranks_hold(const struct pl_dtask *t)
{
    if (!t->rank)
        return false;
    for (uint32_t r = 0; r < t->ranks; r++) {
        const struct pl_rank *k = &t->rank[r];
        if (!k->node)
            return false;
        for (uint32_t i = 0; i < k->ncores; i++)
            if (k->core_idx[i] >= k->node->ncores
                || k->node->core_task[k->core_idx[i]] != t->id)
                return false;
        for (uint32_t i = 0; i < k->ngpus; i++)
            if (k->gpu_idx[i] >= k->node->ngpus
                || k->node->gpu_task[k->gpu_idx[i]] != t->id)
                return false;
        /* no core or GPU index also listed by another rank on the node */
        for (uint32_t q = 0; q < r; q++) {
            const struct pl_rank *o = &t->rank[q];
            if (o->node != k->node)
                continue;
            for (uint32_t i = 0; i < k->ncores; i++)
                for (uint32_t j = 0; j < o->ncores; j++)
                    if (k->core_idx[i] == o->core_idx[j])
                        return false;
            for (uint32_t i = 0; i < k->ngpus; i++)
                for (uint32_t j = 0; j < o->ngpus; j++)
                    if (k->gpu_idx[i] == o->gpu_idx[j])
                        return false;
        }
    }
    return true;
}

/* The node of a single-rank task, NULL if not placed. */
static struct pl_node *node_of(const struct pl_dtask *t)
{
    return t && t->rank ? t->rank[0].node : NULL;
}

/* What pl_sched_run() placed, in order (the node of rank 0). */
struct placed {
    int n;
    uint64_t id[128];
    const struct pl_node *node[128];
    int bad;
};

/* What pilotd records when the scheduler placed 't' (the scheduler
 * writes no state: daemon/task.c does).  Returns false if 't' was not a
 * queued task with fresh ranks. */
static bool daemon_placed(struct pl_dtask *t)
{
    bool fresh = t->state == PL_ST_QUEUED && t->rank;

    for (uint32_t r = 0; t->rank && r < t->ranks; r++) {
        fresh = fresh && t->rank[r].state == 0;
        t->rank[r].state = PL_ST_ASSIGNED;
    }
    t->state = PL_ST_ASSIGNED;
    t->attempt++;
    return fresh;
}

/* pl_sched_requeue(), and the state pilotd records with it. */
static void requeue(struct pl_sched *s, struct pl_dtask *t, bool head)
{
    pl_sched_requeue(s, t, head);
    t->state = PL_ST_QUEUED;
}

static void place_cb(struct pl_dtask *t, void *arg)
{
    struct placed *p = arg;

    if (!daemon_placed(t) || t->inq || !ranks_hold(t))
        p->bad++;
    if (p->n < 128) {
        p->id[p->n] = t->id;
        p->node[p->n] = node_of(t);
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
    struct pl_node *n = t_node_make("a", 4, 2);
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
    is_str(small, "102", "pl_node_cpu_str truncates safely, at a whole id");

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

    n = t_node_make("b", 2, 0);
    ok(n && n->ngpus == 0 && n->gpu && n->gpu[0] == NULL,
       "node without GPUs: empty GPU list");
    pl_node_free(n);
    pl_node_free(NULL);
}

static void test_fifo_rr(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n1 = t_sched_node(s, "n1", 4, 0);
    struct pl_node *n2 = t_sched_node(s, "n2", 4, 0);
    struct pl_node *n3 = t_sched_node(s, "n3", 4, 0);
    struct placed p = { 0 };

    for (uint64_t id = 1; id <= 6; id++)
        addtask(s, id, 1, 0);
    is(pl_sched_queued(s), 6, "6 tasks queued");
    is(pl_sched_run(s, place_cb, &p), 6, "run places all 6");
    const uint64_t fifo[] = { 1, 2, 3, 4, 5, 6 };
    ok(placed_are(&p, fifo, 6), "... in FIFO order, each rank holding its "
       "cores");
    ok(p.node[0] == n1 && p.node[1] == n2 && p.node[2] == n3 && p.node[3] == n1
           && p.node[4] == n2 && p.node[5] == n3,
       "... spread round-robin: n1 n2 n3 n1 n2 n3");
    ok(n1->free_cores == 2 && n2->free_cores == 2 && n3->free_cores == 2
           && n1->running == 2,
       "... 2 cores used on each node");
    struct pl_dtask *t = pl_sched_task_get(s, 4);
    ok(t && t->state == PL_ST_ASSIGNED && t->attempt == 1 && t->ranks == 1
           && node_of(t) == n1 && t->rank[0].ncores == 1
           && t->rank[0].node_rank == 0 && t->rank[0].local_rank == 0
           && t->rank[0].local_size == 1 && t->nnodes == 1,
       "task 4 assigned on n1, attempt 1, one rank of 1 core");
    is(pl_sched_queued(s), 0, "queue empty");

    /* only nodes that are up (whether they 'want' work no longer matters) */
    pl_node_set_state(n2, PL_NODE_GONE);
    pl_node_set_state(n3, PL_NODE_LOST);
    addtask(s, 7, 1, 0);
    addtask(s, 8, 1, 0);
    addtask(s, 9, 1, 0);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 2, "n2 gone, n3 lost: 2 placed");
    ok(p.n == 2 && p.node[0] == n1 && p.node[1] == n1 && !p.bad,
       "... both on n1");
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

    /* a node that is up again is eligible */
    pl_node_set_state(n2, PL_NODE_UP);
    addtask(s, 10, 1, 0);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "n2 up again: 1 placed");
    ok(p.n == 1 && p.node[0] == n2, "... on n2");

    /* nodes */
    uint32_t mc, mg;
    pl_sched_max(s, &mc, &mg);
    ok(mc == 4 && mg == 0, "pl_sched_max: 4 cores, 0 GPUs");
    struct pl_node *n4 = t_sched_node(s, "n4", 16, 2);
    pl_node_set_state(n4, PL_NODE_LOST);
    pl_sched_max(s, &mc, &mg);
    ok(mc == 16 && mg == 2, "with n4 (lost): 16 cores, 2 GPUs");
    /* N.B. routing ids are the agents' links now (daemon/agents.c,
     * tests/unit/test_daemon_task.c) */
    ok(pl_sched_nnodes(s) == 4 && pl_sched_node_at(s, 3) == n4
           && pl_sched_node_at(s, 4) == NULL
           && pl_sched_node_find(s, "n3") == n3
           && pl_sched_node_find(s, "n5") == NULL,
       "nnodes, node_at, node_find");
    pl_sched_free(s);
}

static void requeue_cb(struct pl_dtask *t, void *arg)
{
    struct pl_sched *s = arg;

    requeue(s, t, true);
}

/* Backfill behind one reservation (sched.h): the oldest task that does
 * not fit now reserves the nodes it needs; smaller tasks behind it run
 * only on the other nodes. */
static void test_backfill(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n1 = t_sched_node(s, "n1", 4, 0);
    struct pl_node *n2 = t_sched_node(s, "n2", 4, 0);
    struct placed p = { 0 };

    addtask(s, 1, 3, 0);
    addtask(s, 2, 3, 0);
    addtask(s, 3, 3, 0); /* fits nowhere now: reserves a node */
    addtask(s, 4, 1, 0);
    addtask(s, 5, 8, 0); /* larger than any node: never reserves */
    addtask(s, 6, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 3, "backfill: 3 placed");
    const uint64_t first[] = { 1, 2, 4 };
    ok(placed_are(&p, first, 3), "... 1, 2, then 4 past 3 and 5");
    is(pl_sched_reserved_for(s), 3, "... task 3 holds the reservation");
    struct pl_node *t1node = node_of(pl_sched_task_get(s, 1));
    ok(t1node == n1 && p.node[2] == n2 && n1->free_cores == 1
           && n2->free_cores == 0,
       "... 4 backfilled on n2; n1 (reserved for 3) keeps its free core");
    is(pl_sched_queued(s), 3, "... 3, 5 and 6 wait (6 may not use n1)");
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 0, "again: 0 placed, n1 still held");

    /* a requeued task goes first */
    struct pl_dtask *t2 = pl_sched_task_get(s, 2);
    struct pl_node *was = node_of(t2);
    requeue(s, t2, true);
    ok(t2->state == PL_ST_QUEUED && t2->rank == NULL && was == n2
           && was->free_cores == 3,
       "requeue task 2: queued, no ranks, its 3 cores free");
    is(pl_sched_queued(s), 4, "... 4 queued");
    requeue(s, t2, true);
    is(pl_sched_queued(s), 4, "requeue of a queued task: no change");
    pl_sched_task_remove(s, pl_sched_task_get(s, 1));
    ok(n1->free_cores == 4, "remove task 1: n1 idle");
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 3, "after removing 1: 3 placed");
    const uint64_t second[] = { 2, 3, 6 };
    ok(placed_are(&p, second, 3),
       "... 2 (requeued at head), 3 (its reservation), then 6");
    ok(p.node[0] == n2 && p.node[1] == n1 && p.node[2] == n1,
       "... 2 on n2, 3 and 6 on n1");
    is(pl_sched_reserved_for(s), 0, "... no reservation left (5 never fits)");
    is(t2->attempt, 2, "task 2 attempt 2");
    pl_sched_task_remove(s, pl_sched_task_get(s, 5));
    is(pl_sched_queued(s), 0, "removing queued task 5 empties the queue");

    /* requeue at the tail */
    struct pl_sched *s2 = pl_sched_new();
    t_sched_node(s2, "one", 1, 0);
    for (uint64_t id = 1; id <= 3; id++)
        addtask(s2, id, 1, 0);
    memset(&p, 0, sizeof(p));
    pl_sched_run(s2, place_cb, &p);
    requeue(s2, pl_sched_task_get(s2, 1), false);
    for (int i = 0; i < 3; i++) {
        pl_sched_run(s2, place_cb, &p);
        requeue(s2, pl_sched_task_get(s2, p.id[p.n - 1]), false);
    }
    const uint64_t tail[] = { 1, 2, 3, 1 };
    ok(placed_are(&p, tail, 4), "requeue at the tail: 1, 2, 3, 1");
    pl_sched_free(s2);

    /* every task on a node, e.g. when its agent is lost */
    int on1 = 0, total = 0;
    for (uint64_t id = 1; id <= 6; id++) {
        struct pl_dtask *t = pl_sched_task_get(s, id);
        if (t && node_of(t) == n1)
            on1++;
        if (t && node_of(t))
            total++;
    }
    pl_node_set_state(n1, PL_NODE_LOST);
    pl_sched_node_tasks(s, n1, requeue_cb, s);
    ok(on1 == 2 && pl_sched_queued(s) == (size_t)on1 && n1->free_cores == 4
           && n1->running == 0,
       "node_tasks requeues the %d tasks on n1 only", on1);
    pl_sched_node_tasks(s, NULL, requeue_cb, s);
    is(pl_sched_queued(s), total, "node_tasks(NULL) visits every task");
    pl_sched_free(s); /* with tasks queued: ASan checks nothing leaks */
}

static void test_gpus(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *c = t_sched_node(s, "cpu", 8, 0);
    struct pl_node *g = t_sched_node(s, "gpu", 8, 2);
    struct placed p = { 0 };
    char buf[32];

    addtask(s, 1, 1, 1);
    addtask(s, 2, 1, 2);
    addtask(s, 3, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 2, "GPUs: 2 placed");
    struct pl_dtask *t1 = pl_sched_task_get(s, 1);
    struct pl_dtask *t3 = pl_sched_task_get(s, 3);
    ok(node_of(t1) == g && node_of(t3) == c && p.id[0] == 1 && p.id[1] == 3,
       "... the 1-GPU task on the GPU node, task 2 (2 GPUs) waits, "
       "3 on the CPU node");
    pl_sched_task_remove(s, t1);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "after task 1: task 2 placed");
    struct pl_dtask *t2 = pl_sched_task_get(s, 2);
    pl_node_gpu_str(g, t2->rank[0].gpu_idx, t2->rank[0].ngpus, buf,
                    sizeof(buf));
    /* GPUs rotate: task 1 had g0, so the search starts at g1 */
    ok(node_of(t2) == g && !strcmp(buf, "g1,g0") && g->free_gpus == 0,
       "... on the GPU node with both GPUs, g1 first (GPUs rotate)");
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
    ok(pl_sched_task_add(s, 1, true, 0, &argv, &env, &cwd) == NULL
           && errno == EEXIST,
       "add task 1 again: EEXIST");
    ok(argv != NULL, "... the caller still owns argv");
    struct pl_dtask *t = pl_sched_task_add(s, 5000, false, 0, &argv, &env,
                                           &cwd);
    ok(t && argv == NULL && pl_sched_task_get(s, 5000) == t
           && !strcmp(t->argv[0], "x"),
       "add task 5000 (grows the table): it owns argv now");
    ok(pl_sched_queued(s) == 1, "a task not queued (one running, say) does "
       "not join the queue");
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
    struct pl_node *n = t_sched_node(s, "n", 4, 0);
    struct placed p = { 0 };

    pl_node_set_state(n, PL_NODE_LOST);
    for (uint64_t id = 1; id <= 3; id++)
        addtask(s, id, 1, 0);
    struct pl_dtask *t2 = pl_sched_task_get(s, 2);
    pl_sched_dequeue(s, t2);
    is(pl_sched_queued(s), 2, "dequeue task 2: 2 queued");
    pl_sched_task_remove(s, t2);
    is(pl_sched_queued(s), 2, "dequeue then remove: still 2 queued");

    struct pl_dtask *t3 = pl_sched_task_get(s, 3);
    pl_sched_dequeue(s, t3);
    requeue(s, t3, true);
    pl_node_set_state(n, PL_NODE_UP);
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
#define NNODES 6

struct world {
    struct pl_sched *s;
    uint64_t live[NLIVE];
    size_t nlive;
    uint64_t next_id;
    size_t placements, gangs, excl;
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

static void rplace_cb(struct pl_dtask *t, void *arg)
{
    struct world *w = arg;

    w->placements++;
    w->gangs += t->ranks > 1;
    w->excl += t->exclusive;
    if (!daemon_placed(t) || t->inq || !ranks_hold(t) || t->running
        || t->ended)
        w->bad_place++;
}

static void lost_cb(struct pl_dtask *t, void *arg)
{
    struct world *w = arg;

    if (t->attempt <= t->retries)
        requeue(w->s, t, true);
    else {
        forget(w, t->id);
        pl_sched_task_remove(w->s, t);
    }
}

static size_t node_index(struct pl_sched *s, const struct pl_node *n)
{
    size_t k = 0, nn = pl_sched_nnodes(s);

    while (k < nn && pl_sched_node_at(s, k) != n)
        k++;
    return k;
}

/* The invariants: each core and GPU is held by at most one rank, exactly
 * the ones its ranks list; free counts match; free cores add up to the
 * total less the cores of placed ranks; a placed task has all its ranks
 * placed (but those that ended); --nodes and --ranks-per-node are
 * honoured; an exclusive task's nodes hold no other task and its ranks
 * share out all of them; the queue count is right; removed tasks are
 * gone.  Returns the number of violations. */
static int check(struct world *w, int op)
{
    static uint32_t holders[NNODES][MAXC], gholders[NNODES][MAXG],
        running[NNODES], ranks_on[NNODES];
    static uint64_t excl_on[NNODES];
    size_t nn = pl_sched_nnodes(w->s), queued = 0;
    uint64_t total = 0, free_total = 0, held = 0;
    int bad = 0;
    const char *what = "";

#define BAD(why)                                                               \
    do {                                                                       \
        bad++;                                                                 \
        what = why;                                                            \
    } while (0)
    memset(holders, 0, sizeof(holders));
    memset(gholders, 0, sizeof(gholders));
    memset(running, 0, sizeof(running));
    memset(excl_on, 0, sizeof(excl_on));
    for (size_t i = 0; i < w->nlive; i++) {
        struct pl_dtask *t = pl_sched_task_get(w->s, w->live[i]);
        if (!t) {
            BAD("live task missing");
            continue;
        }
        if (t->state == PL_ST_QUEUED) {
            queued++;
            if (t->rank || !t->inq)
                BAD("queued task placed or not in the queue");
            continue;
        }
        if (!t->rank) {
            BAD("placed task without ranks");
            continue;
        }
        memset(ranks_on, 0, sizeof(ranks_on));
        uint32_t nodes = 0, ended = 0;
        for (uint32_t r = 0; r < t->ranks; r++) {
            struct pl_rank *rk = &t->rank[r];
            if (pl_state_final(rk->state)) {
                ended++;
                if (rk->node)
                    BAD("ended rank still placed");
                continue;
            }
            if (!rk->node) {
                BAD("rank of a placed task not placed (gang)");
                continue;
            }
            size_t k = node_index(w->s, rk->node);
            if (k == nn) {
                BAD("rank on an unknown node");
                continue;
            }
            if (ranks_on[k]++ == 0)
                nodes++;
            running[k]++;
            held += rk->ncores;
            if (!t->exclusive && (rk->ncores != t->cores_per_rank
                                  || rk->ngpus != t->gpus_per_rank))
                BAD("rank size differs from the task's");
            if (t->exclusive && rk->ncores < t->cores_per_rank)
                BAD("exclusive rank smaller than asked");
            if (t->exclusive)
                excl_on[k] = t->id;
            for (uint32_t c = 0; c < rk->ncores; c++) {
                uint32_t ci = rk->core_idx[c];
                if (ci >= rk->node->ncores || rk->node->core_task[ci] != t->id)
                    BAD("rank core not held by its task");
                else
                    holders[k][ci]++;
            }
            for (uint32_t g = 0; g < rk->ngpus; g++) {
                uint32_t gi = rk->gpu_idx[g];
                if (gi >= rk->node->ngpus || rk->node->gpu_task[gi] != t->id)
                    BAD("rank GPU not held by its task");
                else
                    gholders[k][gi]++;
            }
        }
        if (ended != t->ended)
            BAD("ended count");
        if (ended == 0) { /* the whole placement is there */
            if (nodes != t->nnodes)
                BAD("nnodes");
            if (t->nodes_req && nodes != t->nodes_req)
                BAD("--nodes not honoured");
            for (size_t k = 0; k < nn; k++) {
                struct pl_node *n = pl_sched_node_at(w->s, k);
                if (t->ranks_per_node && ranks_on[k] > t->ranks_per_node)
                    BAD("--ranks-per-node exceeded");
                if (t->exclusive && ranks_on[k]) {
                    uint32_t c = 0, g = 0;
                    for (uint32_t r = 0; r < t->ranks; r++)
                        if (t->rank[r].node == n) {
                            c += t->rank[r].ncores;
                            g += t->rank[r].ngpus;
                        }
                    if (c != n->ncores || g != n->ngpus)
                        BAD("exclusive ranks do not share out the node");
                }
            }
            for (uint32_t r = 0; r < t->ranks; r++) {
                struct pl_rank *rk = &t->rank[r];
                size_t k = node_index(w->s, rk->node);
                if (k < nn && (rk->local_size != ranks_on[k]
                               || rk->local_rank >= rk->local_size
                               || rk->node_rank >= nodes))
                    BAD("node_rank / local_rank / local_size");
            }
        }
    }
    for (size_t k = 0; k < nn; k++) {
        struct pl_node *n = pl_sched_node_at(w->s, k);
        uint32_t used = 0, gused = 0;
        for (uint32_t c = 0; c < n->ncores; c++) {
            if (holders[k][c] > 1)
                BAD("core held by two ranks");
            if ((holders[k][c] == 1) != (n->core_task[c] != 0))
                BAD("core held by no rank");
            if (excl_on[k] && n->core_task[c] && n->core_task[c] != excl_on[k])
                BAD("exclusive task shares a node");
            used += n->core_task[c] != 0;
        }
        for (uint32_t g = 0; g < n->ngpus; g++) {
            if (gholders[k][g] > 1)
                BAD("GPU held by two ranks");
            if ((gholders[k][g] == 1) != (n->gpu_task[g] != 0))
                BAD("GPU held by no rank");
            if (excl_on[k] && n->gpu_task[g] && n->gpu_task[g] != excl_on[k])
                BAD("exclusive task shares a node's GPU");
            gused += n->gpu_task[g] != 0;
        }
        if (n->free_cores != n->ncores - used
            || n->free_gpus != n->ngpus - gused || n->running != running[k])
            BAD("node counts");
        total += n->ncores;
        free_total += n->free_cores;
    }
    if (free_total != total - held)
        BAD("free cores != total - held");
    if (queued != pl_sched_queued(w->s))
        BAD("queued count");
    for (uint64_t id = 1; id < w->next_id; id++) {
        bool live = false;
        struct pl_dtask *t = pl_sched_task_get(w->s, id);
        for (size_t i = 0; t && !live && i < w->nlive; i++)
            live = w->live[i] == id;
        if (t && !live)
            BAD("removed task still there");
    }
#undef BAD
    if (bad)
        diag("op %d: %d invariant violations, last: %s (free %llu, total "
             "%llu, held %llu, queued %zu/%zu)", op, bad, what,
             (unsigned long long)free_total, (unsigned long long)total,
             (unsigned long long)held, queued, pl_sched_queued(w->s));
    return bad;
}

static void test_random(void)
{
    static struct world w;
    int violations = 0, first = -1;
    size_t rank_ends = 0;

    w.s = pl_sched_new();
    w.next_id = 1;
    for (int k = 0; k < NNODES; k++) {
        char name[16];
        snprintf(name, sizeof(name), "r%d", k);
        t_sched_node(w.s, name, 1 + rnd(16), rnd(4));
    }
    for (int op = 0; op < 10000; op++) {
        uint32_t r = rnd(100);
        struct pl_dtask *t = w.nlive ? pl_sched_task_get(w.s,
                                           w.live[rnd((uint32_t)w.nlive)])
                                     : NULL;
        if (r < 30 && w.nlive < NLIVE) {
            uint64_t id = w.next_id++;
            uint32_t ranks = 1 + rnd(4);
            uint32_t cores = 1 + rnd(rnd(4) == 0 ? 18 : 6);
            uint32_t gpus = rnd(5) == 0 ? 1 + rnd(2) : 0;
            uint32_t nodes = rnd(3) == 0 ? 1 + rnd(ranks) : 0;
            uint32_t rpn = rnd(3) == 0 ? 1 + rnd(ranks) : 0;
            bool excl = rnd(8) == 0;
            if (addgang(w.s, id, ranks, cores, gpus, nodes, rpn, excl))
                w.live[w.nlive++] = id;
        }
        else if (r < 50)
            pl_sched_run(w.s, rplace_cb, &w);
        else if (r < 60 && t) { /* ended */
            forget(&w, t->id);
            pl_sched_task_remove(w.s, t);
        }
        else if (r < 68 && t && t->rank && !t->exclusive) {
            /* one rank ended (exclusive tasks: see test_exclusive_end) */
            uint32_t k = rnd(t->ranks);
            if (!pl_state_final(t->rank[k].state)) {
                t->rank[k].state = PL_ST_DONE;
                pl_sched_rank_release(t, k);
                pl_sched_rank_release(t, k); /* idempotent */
                t->ended++;
                rank_ends++;
            }
            if (t->ended == t->ranks) {
                forget(&w, t->id);
                pl_sched_task_remove(w.s, t);
            }
        }
        else if (r < 75 && t && t->state != PL_ST_QUEUED)
            requeue(w.s, t, rnd(2));
        else if (r < 80 && t && t->state == PL_ST_QUEUED) { /* canceled */
            pl_sched_dequeue(w.s, t);
            t->state = PL_ST_CANCELED;
            forget(&w, t->id);
            pl_sched_task_remove(w.s, t);
        }
        else if (r < 85) {
            /* the draw of a step that toggled a field nodes no longer
             * have: kept, so that the sequence of operations stays */
            (void)rnd(NNODES);
        }
        else if (r < 93) {
            struct pl_node *n = pl_sched_node_at(w.s, rnd(NNODES));
            if (n->state == PL_NODE_UP) {
                pl_node_set_state(n, PL_NODE_LOST);
                pl_sched_node_tasks(w.s, n, lost_cb, &w);
            }
            else
                pl_node_set_state(n, PL_NODE_UP);
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
       "10000 random operations, gangs of 1..4 ranks: invariants hold "
       "(first violation at op %d, %d bad placements)", first, w.bad_place);
    ok(w.placements > 500 && w.gangs > 100 && w.excl > 10 && rank_ends > 50,
       "... with %zu placements (%zu multi-rank, %zu exclusive), %zu rank "
       "ends, %zu tasks live at the end", w.placements, w.gangs, w.excl,
       rank_ends, w.nlive);
    pl_sched_free(w.s);
}

/* ------------------------------------------------------------ gangs */

static void test_gang(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *a = t_sched_node(s, "a", 2, 0);
    struct pl_node *b = t_sched_node(s, "b", 2, 0);
    struct placed p = { 0 };
    char buf[64];

    /* 4 ranks over nodes of 2 cores: 2 + 2 */
    struct pl_dtask *t = addgang(s, 1, 4, 1, 0, 0, 0, false);
    is(pl_sched_run(s, place_cb, &p), 1, "4 ranks x 1 core on 2 x 2 cores: "
       "placed");
    ok(!p.bad && ranks_hold(t) && t->nnodes == 2 && a->free_cores == 0
           && b->free_cores == 0 && a->running == 2 && b->running == 2,
       "... on both nodes, every rank holding its own core");
    ok(t->rank[0].node == a && t->rank[1].node == a && t->rank[2].node == b
           && t->rank[3].node == b,
       "... ranks 0, 1 on a; 2, 3 on b");
    ok(t->rank[0].node_rank == 0 && t->rank[1].node_rank == 0
           && t->rank[2].node_rank == 1 && t->rank[3].node_rank == 1,
       "... node_rank 0 0 1 1");
    ok(t->rank[0].local_rank == 0 && t->rank[1].local_rank == 1
           && t->rank[2].local_rank == 0 && t->rank[3].local_rank == 1
           && t->rank[0].local_size == 2 && t->rank[1].local_size == 2
           && t->rank[2].local_size == 2 && t->rank[3].local_size == 2,
       "... local_rank 0 1 0 1, local_size 2");
    ok(t->rank[0].core_idx[0] == 0 && t->rank[1].core_idx[0] == 1
           && t->rank[2].core_idx[0] == 0 && t->rank[3].core_idx[0] == 1,
       "... lowest free cores: 0, 1 on each node");
    pl_sched_nodelist(t, buf, sizeof(buf));
    is_str(buf, "a,b", "pl_sched_nodelist: a,b");
    char tiny[3];
    pl_sched_nodelist(t, tiny, sizeof(tiny));
    ok(strlen(tiny) < sizeof(tiny), "pl_sched_nodelist truncates safely "
       "('%s')", tiny);

    /* a rank that ends gives back its cores, once */
    pl_sched_rank_release(t, 1);
    pl_sched_rank_release(t, 1);
    pl_sched_rank_release(t, 99);
    ok(t->rank[1].node == NULL && a->free_cores == 1 && a->core_task[1] == 0
           && a->core_task[0] == 1 && a->running == 1 && b->free_cores == 0,
       "pl_sched_rank_release: rank 1's core free, once; others held");
    pl_sched_nodelist(t, buf, sizeof(buf));
    is_str(buf, "a,b", "... nodelist still a,b (rank 0 on a)");
    pl_sched_task_remove(s, t);
    ok(a->free_cores == 2 && b->free_cores == 2 && a->running == 0
           && b->running == 0,
       "remove the task: all cores free");

    /* all ranks or none */
    addtask(s, 2, 1, 0); /* one core taken */
    t = addgang(s, 3, 4, 1, 0, 0, 0, false);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "4 ranks with 3 cores free: only "
       "the single-core task placed");
    ok(t->state == PL_ST_QUEUED && t->rank == NULL && a->free_cores
           + b->free_cores == 3,
       "... the 4-rank task holds nothing (gang: all or none)");
    is(pl_sched_reserved_for(s), 3, "... and reserves for itself");
    pl_sched_free(s);
}

static void test_shape(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n[3];
    struct placed p = { 0 };

    n[0] = t_sched_node(s, "x0", 4, 0);
    n[1] = t_sched_node(s, "x1", 4, 0);
    n[2] = t_sched_node(s, "x2", 4, 0);

    /* --nodes 2 --ranks-per-node 2 */
    struct pl_dtask *t = addgang(s, 1, 4, 1, 0, 2, 2, false);
    is(pl_sched_run(s, place_cb, &p), 1, "--ranks 4 --nodes 2 "
       "--ranks-per-node 2: placed");
    int per[3] = { 0 };
    for (uint32_t r = 0; r < 4; r++)
        for (int k = 0; k < 3; k++)
            per[k] += t->rank[r].node == n[k];
    ok(!p.bad && t->nnodes == 2
           && ((per[0] == 2) + (per[1] == 2) + (per[2] == 2)) == 2
           && per[0] + per[1] + per[2] == 4,
       "... 2 nodes, 2 ranks on each (%d %d %d)", per[0], per[1], per[2]);
    ok(t->rank[0].local_size == 2 && t->rank[3].local_size == 2
           && t->rank[3].node_rank == 1 && t->rank[1].local_rank == 1,
       "... local_size 2, node_rank of rank 3 is 1");
    pl_sched_task_remove(s, t);

    /* --ranks-per-node 2 alone: would fit on one node, must use two */
    t = addgang(s, 2, 4, 1, 0, 0, 2, false);
    memset(&p, 0, sizeof(p));
    pl_sched_run(s, place_cb, &p);
    ok(p.n == 1 && !p.bad && t->nnodes == 2 && t->rank[0].local_size == 2
           && t->rank[2].local_size == 2,
       "--ranks 4 --ranks-per-node 2 on 4-core nodes: 2 nodes x 2");
    pl_sched_task_remove(s, t);

    /* no shape: the node with most room takes them all */
    t = addgang(s, 3, 4, 1, 0, 0, 0, false);
    memset(&p, 0, sizeof(p));
    pl_sched_run(s, place_cb, &p);
    ok(p.n == 1 && t->nnodes == 1 && t->rank[0].local_size == 4,
       "--ranks 4 with no shape on 4-core nodes: one node");
    pl_sched_task_remove(s, t);

    /* --nodes 3 with 3 ranks: one per node */
    t = addgang(s, 4, 3, 1, 0, 3, 0, false);
    memset(&p, 0, sizeof(p));
    pl_sched_run(s, place_cb, &p);
    ok(p.n == 1 && !p.bad && t->nnodes == 3 && t->rank[0].node
           && t->rank[0].node != t->rank[1].node
           && t->rank[1].node != t->rank[2].node
           && t->rank[0].node != t->rank[2].node,
       "--ranks 3 --nodes 3: one rank per node");
    ok(t->rank[0].local_size == 1 && t->rank[1].local_size == 1
           && t->rank[2].local_size == 1 && t->rank[0].node_rank == 0
           && t->rank[1].node_rank == 1 && t->rank[2].node_rank == 2
           && t->rank[2].local_rank == 0,
       "... node_rank 0 1 2, local_rank 0, local_size 1");
    pl_sched_task_remove(s, t);
    pl_sched_free(s);
}

static void test_exclusive(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *e0 = t_sched_node(s, "e0", 4, 2);
    struct pl_node *e1 = t_sched_node(s, "e1", 4, 2);
    struct pl_node *e2 = t_sched_node(s, "e2", 4, 2);
    struct placed p = { 0 };
    char buf[32];

    addtask(s, 1, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 1, "a single-core task on e0");
    ok(p.node[0] == e0, "... on e0");
    struct pl_dtask *x = addgang(s, 2, 2, 1, 0, 2, 0, true);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "exclusive --ranks 2 --nodes 2: "
       "placed");
    ok(!p.bad && x->nnodes == 2 && x->rank[0].node != e0
           && x->rank[1].node != e0 && x->rank[0].node != x->rank[1].node,
       "... on the idle nodes e1, e2 only");
    ok(x->rank[0].ncores == 4 && x->rank[0].ngpus == 2
           && x->rank[1].ncores == 4 && x->rank[1].ngpus == 2
           && e1->free_cores == 0 && e1->free_gpus == 0
           && e2->free_cores == 0 && e2->free_gpus == 0,
       "... each rank holds all 4 cores and both GPUs of its node");
    pl_node_gpu_str(e1, x->rank[0].gpu_idx, x->rank[0].ngpus, buf,
                    sizeof(buf));
    is_str(buf, "g0,g1", "... GPUs g0,g1");

    /* nothing else lands there, though e0 is busy */
    addtask(s, 3, 1, 0);
    addtask(s, 4, 1, 0);
    addtask(s, 5, 1, 0);
    addtask(s, 6, 1, 0);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 3, "4 single-core tasks: 3 placed");
    ok(p.node[0] == e0 && p.node[1] == e0 && p.node[2] == e0,
       "... all on e0");
    pl_sched_task_remove(s, x);
    for (uint64_t id = 1; id <= 6; id++)
        if (pl_sched_task_get(s, id))
            pl_sched_task_remove(s, pl_sched_task_get(s, id));

    /* 3 ranks on one node of 4 cores, 2 GPUs: they share it out */
    x = addgang(s, 7, 3, 1, 0, 1, 0, true);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "exclusive --ranks 3 --nodes 1: "
       "placed");
    uint32_t c = 0, g = 0;
    for (uint32_t r = 0; r < 3; r++) {
        c += x->rank[r].ncores;
        g += x->rank[r].ngpus;
    }
    ok(!p.bad && x->nnodes == 1 && c == 4 && g == 2
           && x->rank[0].node->free_cores == 0
           && x->rank[0].node->free_gpus == 0 && x->rank[0].ncores >= 1
           && x->rank[1].ncores >= 1 && x->rank[2].ncores >= 1,
       "... its 3 ranks share out all 4 cores and 2 GPUs (%u, %u)", c, g);
    pl_sched_free(s);
}

/* An exclusive task's node is its own until the task ends: one of its
 * ranks ending early must not let another task in beside the others. */
static void test_exclusive_end(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n = t_sched_node(s, "solo", 2, 0);
    struct placed p = { 0 };

    struct pl_dtask *x = addgang(s, 1, 2, 1, 0, 1, 0, true);
    pl_sched_run(s, place_cb, &p);
    ok(p.n == 1 && x->nnodes == 1 && n->free_cores == 0,
       "exclusive 2 ranks on a 2-core node");
    x->rank[0].state = PL_ST_DONE;
    pl_sched_rank_release(x, 0);
    x->ended++;
    addtask(s, 2, 1, 0);
    memset(&p, 0, sizeof(p));
    pl_sched_run(s, place_cb, &p);
    if (!ok(p.n == 0, "rank 0 ended, rank 1 runs: no other task on the "
            "exclusive task's node"))
        diag("task 2 placed on %s beside exclusive task 1's rank 1",
             p.node[0] ? p.node[0]->name : "?");
    pl_sched_free(s);
}

static void test_gpus_per_rank(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *g = t_sched_node(s, "g", 8, 4);
    struct placed p = { 0 };

    struct pl_dtask *t = addgang(s, 1, 2, 1, 2, 0, 0, false);
    addtask(s, 2, 1, 1);
    is(pl_sched_run(s, place_cb, &p), 1, "2 ranks x 2 GPUs on a 4-GPU "
       "node: placed, then a 1-GPU task waits");
    ok(!p.bad && ranks_hold(t) && t->rank[0].ngpus == 2
           && t->rank[1].ngpus == 2 && g->free_gpus == 0,
       "... 2 GPUs each");
    bool distinct = true;
    for (uint32_t i = 0; i < 2; i++)
        for (uint32_t j = 0; j < 2; j++)
            if (t->rank[0].gpu_idx[i] == t->rank[1].gpu_idx[j])
                distinct = false;
    ok(distinct, "... no GPU shared by the two ranks");
    is(pl_sched_task_get(s, 2)->state, PL_ST_QUEUED, "... task 2 queued");
    pl_sched_rank_release(t, 0);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "rank 0 ended: task 2 placed");
    struct pl_dtask *t2 = pl_sched_task_get(s, 2);
    ok(t2->rank[0].gpu_idx[0] != t->rank[1].gpu_idx[0]
           && t2->rank[0].gpu_idx[0] != t->rank[1].gpu_idx[1]
           && g->gpu_task[t2->rank[0].gpu_idx[0]] == 2,
       "... on one of rank 0's GPUs, none of rank 1's");
    pl_sched_free(s);
}

static void test_fits(void)
{
    struct pl_sched *s = pl_sched_new();
    char why[160];

    for (int k = 0; k < 4; k++) {
        char name[16];
        snprintf(name, sizeof(name), "f%d", k);
        t_sched_node(s, name, 2, 4);
    }
    struct pl_dtask *t = addgang(s, 1, 8, 1, 0, 0, 0, false);
    why[0] = '\0';
    ok(pl_sched_fits(s, t, why, sizeof(why)) && why[0] == '\0',
       "fits: 8 ranks x 1 core on 4 x 2 cores");
    t->gpus_per_rank = 9;
    t->ranks = 1;
    ok(!pl_sched_fits(s, t, why, sizeof(why)), "9 GPUs per rank on 4-GPU "
       "nodes: refused");
    is_str(why, "task needs 9 GPUs per rank but the largest node has 4",
           "... why");
    ok(!pl_sched_fits(s, t, NULL, 0), "... refused with why NULL too");
    t->gpus_per_rank = 0;
    t->ranks = 5;
    t->nodes_req = 5;
    ok(!pl_sched_fits(s, t, why, sizeof(why)), "--ranks 5 --nodes 5 on 4 "
       "nodes: refused");
    is_str(why, "task asks for 5 nodes but the pilot has 4", "... why");
    t->ranks = 3;
    t->nodes_req = 0;
    t->ranks_per_node = 3;
    ok(!pl_sched_fits(s, t, why, sizeof(why)), "--ranks 3 --ranks-per-node "
       "3 on 2-core nodes: refused");
    is_str(why, "3 ranks per node x 1 cores need 3 cores on a node; the "
           "largest has 2", "... why");
    t->ranks = 9;
    t->ranks_per_node = 0;
    ok(!pl_sched_fits(s, t, why, sizeof(why))
           && !strncmp(why, "task does not fit this pilot", 28),
       "9 ranks on 8 cores: refused ('%s')", why);
    t->ranks = 2;
    t->nodes_req = 2;
    t->exclusive = true;
    pl_node_set_state(pl_sched_node_at(s, 0), PL_NODE_LOST);
    ok(pl_sched_fits(s, t, NULL, 0), "exclusive --nodes 2 with 3 of 4 "
       "nodes up: fits");
    t->nodes_req = 4;
    t->ranks = 4;
    ok(!pl_sched_fits(s, t, why, sizeof(why)), "--nodes 4 with 3 up: "
       "refused ('%s')", why);
    pl_sched_free(s);
}

/* 4 nodes x 2 cores busy with single-core tasks; a 4-node exclusive task,
 * then 100 single-core tasks.  As the running tasks end one by one, the
 * exclusive task must start before more than a few of the 100. */
static void test_starvation(void)
{
    struct pl_sched *s = pl_sched_new();
    struct placed p = { 0 };
    uint64_t running[256];
    size_t nrun = 0, before = 0, steps = 0;
    bool named = true, started = false;
    const uint64_t X = 9;

    for (int k = 0; k < 4; k++) {
        char name[16];
        snprintf(name, sizeof(name), "s%d", k);
        t_sched_node(s, name, 2, 0);
    }
    for (uint64_t id = 1; id <= 8; id++)
        addtask(s, id, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 8, "8 single-core tasks fill 4 x 2 "
       "cores");
    for (uint64_t id = 1; id <= 8; id++)
        running[nrun++] = id;
    addgang(s, X, 4, 1, 0, 4, 0, true);
    for (uint64_t id = 10; id < 110; id++)
        addtask(s, id, 1, 0);
    while (!started && nrun > 0 && steps < 300) {
        /* the oldest running task ends */
        struct pl_dtask *t = pl_sched_task_get(s, running[0]);
        memmove(running, running + 1, (nrun - 1) * sizeof(*running));
        nrun--;
        pl_sched_task_remove(s, t);
        memset(&p, 0, sizeof(p));
        pl_sched_run(s, place_cb, &p);
        for (int i = 0; i < p.n && i < 128; i++) {
            if (p.id[i] == X)
                started = true;
            else {
                if (!started)
                    before++;
                running[nrun++] = p.id[i];
            }
        }
        if (!started && pl_sched_reserved_for(s) != X)
            named = false;
        steps++;
    }
    struct pl_dtask *x = pl_sched_task_get(s, X);
    ok(started && x->state == PL_ST_ASSIGNED && x->nnodes == 4,
       "the 4-node exclusive task started (after %zu ends)", steps);
    ok(before <= 8, "... before more than 8 of the 100 single-core tasks "
       "(%zu started before it)", before);
    ok(named, "... pl_sched_reserved_for() named it while it waited");
    is(pl_sched_reserved_for(s), 0, "... no reservation once it started");
    pl_sched_free(s);
}

/* The reservation must not block its own task: a task queued ahead of
 * the reserved one (requeued at head, or one that fits nowhere) must not
 * stop the pass before it reaches the reserved task. */
static void test_resv_behind(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *a = t_sched_node(s, "a", 1, 0);
    struct pl_node *b = t_sched_node(s, "b", 1, 0);
    struct placed p = { 0 };

    addtask(s, 1, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 1, "task 1 on a");
    struct pl_dtask *r = addgang(s, 2, 2, 1, 0, 0, 0, false);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 0, "task 2 (2 ranks) does not fit");
    is(pl_sched_reserved_for(s), 2, "... and reserves a, b");
    requeue(s, pl_sched_task_get(s, 1), true); /* e.g. lost */
    ok(a->free_cores == 1 && b->free_cores == 1 && pl_sched_queued(s) == 2,
       "1 requeued at head: both nodes idle, queue [1, 2]");
    memset(&p, 0, sizeof(p));
    size_t n = pl_sched_run(s, place_cb, &p);
    if (!ok(n >= 1 && r->state == PL_ST_ASSIGNED,
            "run places the reserved task 2 on the idle nodes"))
        diag("placed %zu; task 2 %s; the pass stopped at task 1 (no "
             "unreserved node) and never reached task 2", n,
             pl_state_name(r->state));
    memset(&p, 0, sizeof(p));
    n = pl_sched_run(s, place_cb, &p);
    ok(n >= 1 || r->state == PL_ST_ASSIGNED, "... nor on a second run "
       "(placed %zu: a deadlock, both nodes idle forever)", n);
    pl_sched_free(s);

    /* the same with a never-fitting task ahead */
    s = pl_sched_new();
    a = t_sched_node(s, "a", 1, 0);
    b = t_sched_node(s, "b", 1, 0);
    addtask(s, 1, 1, 0);
    memset(&p, 0, sizeof(p));
    pl_sched_run(s, place_cb, &p);
    addtask(s, 3, 4, 0); /* 4 cores: fits nowhere, ever */
    r = addgang(s, 4, 2, 1, 0, 0, 0, false);
    memset(&p, 0, sizeof(p));
    pl_sched_run(s, place_cb, &p);
    is(pl_sched_reserved_for(s), 4, "task 4 (2 ranks) reserves a, b behind "
       "task 3 that fits nowhere");
    pl_sched_task_remove(s, pl_sched_task_get(s, 1));
    memset(&p, 0, sizeof(p));
    n = pl_sched_run(s, place_cb, &p);
    if (!ok(n == 1 && r->state == PL_ST_ASSIGNED,
            "a, b idle: run places the reserved task 4"))
        diag("placed %zu; task 4 %s, queued %zu", n, pl_state_name(r->state),
             pl_sched_queued(s));
    (void)a;
    (void)b;
    pl_sched_free(s);
}

/* torch's rendezvous ports: one per task on rank 0's node, never two
 * running tasks on one port, given back when rank 0 ends. */
static void test_ports(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n = t_sched_node(s, "solo", 4, 0);
    struct placed p = { 0 };
    uint64_t clash = 7 + PL_NODE_PORTS; /* the same first choice as 7 */

    struct pl_dtask *a = addgang(s, 7, 1, 1, 0, 0, 0, false);
    struct pl_dtask *b = addgang(s, clash, 1, 1, 0, 0, 0, false);
    struct pl_dtask *c = addgang(s, 8, 1, 1, 0, 0, 0, false);
    a->comm = b->comm = PL_COMM_TORCH;
    pl_sched_run(s, place_cb, &p);
    ok(p.n == 3 && a->port == PL_NODE_PORT_BASE + 7
           && b->port == PL_NODE_PORT_BASE + 8 && c->port == 0,
       "torch ports: %u for task 7, the next free (%u) for task %llu whose "
       "first choice it was, none for comm none", a->port, b->port,
       (unsigned long long)clash);
    pl_sched_rank_release(a, 0);
    ok(a->port == 0 && !(n->ports[0] & (UINT64_C(1) << 7))
           && (n->ports[0] & (UINT64_C(1) << 8)),
       "torch ports: rank 0's end gives its port back, the other stays");
    uint32_t all = 0;
    for (uint32_t i = 0; i < PL_NODE_PORTS; i++)
        all += pl_node_port_take(n, i) != 0;
    ok(all == PL_NODE_PORTS - 1 && pl_node_port_take(n, 0) == 0,
       "torch ports: %u ports, then none left", all + 1);
    pl_node_port_free(n, PL_NODE_PORT_BASE + 3);
    ok(pl_node_port_take(n, 0) == PL_NODE_PORT_BASE + 3,
       "torch ports: a freed port is found from any hint");
    pl_sched_free(s);
}

/* A queued single-core task of priority 'prio'. */
static struct pl_dtask *addprio(struct pl_sched *s, uint64_t id, int32_t prio)
{
    char a0[] = "true";
    char *v[] = { a0, NULL };
    char **argv = pl_strv_dup(v), **env = NULL, *cwd = NULL;
    struct pl_dtask *t = pl_sched_task_add(s, id, true, prio, &argv, &env,
                                           &cwd);

    if (!t)
        pl_strv_free(argv);
    else
        t->state = PL_ST_QUEUED; /* as pilotd records it */
    return t;
}

/* Run one pass on a one-core node, then free the core: the id placed. */
static uint64_t next_placed(struct pl_sched *s)
{
    struct placed p = { 0 };

    pl_sched_run(s, place_cb, &p);
    if (p.n != 1 || p.bad)
        return 0;
    pl_sched_task_remove(s, pl_sched_task_get(s, p.id[0]));
    return p.id[0];
}

/* --priority: higher first, FIFO within one; a requeue to the head stays
 * behind higher priorities. */
static void test_priority(void)
{
    struct pl_sched *s = pl_sched_new();
    uint64_t got[8] = { 0 };
    const int32_t prio[] = { 0, 0, -5, 10, 10, 0, 3 };

    t_sched_node(s, "n1", 1, 0);
    for (uint64_t id = 1; id <= 7; id++)
        addprio(s, id, prio[id - 1]);
    is(pl_sched_queued(s), 7, "priority: 7 queued");
    for (int i = 0; i < 7; i++)
        got[i] = next_placed(s);
    const uint64_t want[] = { 4, 5, 7, 1, 2, 6, 3 };
    ok(!memcmp(got, want, sizeof(want)),
       "priority: placed 4 5 (10), 7 (3), 1 2 6 (0), 3 (-5): got %llu %llu "
       "%llu %llu %llu %llu %llu", (unsigned long long)got[0],
       (unsigned long long)got[1], (unsigned long long)got[2],
       (unsigned long long)got[3], (unsigned long long)got[4],
       (unsigned long long)got[5], (unsigned long long)got[6]);
    /* requeue at the head of its priority, dequeue from the middle */
    addprio(s, 8, 0);
    addprio(s, 9, 10);
    addprio(s, 10, 0);
    struct placed p = { 0 };
    pl_sched_run(s, place_cb, &p);
    ok(p.n == 1 && p.id[0] == 9, "priority: 9 (10) goes before 8 (0)");
    addprio(s, 11, 10);
    requeue(s, pl_sched_task_get(s, 9), true);
    pl_sched_dequeue(s, pl_sched_task_get(s, 10));
    for (int i = 0; i < 3; i++)
        got[i] = next_placed(s);
    ok(got[0] == 9 && got[1] == 11 && got[2] == 8
           && pl_sched_queued(s) == 0,
       "priority: requeued 9 first, then 11, then 8; 10 dequeued");
    pl_sched_free(s);
}

/* --vetted: only nodes whose vetting passed within the task's minutes;
 * a cordoned node takes nothing (daemon/vet.c sets both) */
static void test_vetted(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *v0 = t_sched_node(s, "v0", 2, 0);
    struct pl_node *v1 = t_sched_node(s, "v1", 2, 0);
    struct pl_node *v2 = t_sched_node(s, "v2", 2, 0);
    struct placed p = { 0 };

    v0->vet_ok_time = pl_now() - 3600;  /* passed an hour ago */
    v1->vet_ok_time = 0;                /* never passed */
    v2->vet_ok_time = pl_now() - 30;    /* passed just now */
    struct pl_dtask *t = addgang(s, 1, 2, 1, 0, 1, 0, false);
    t->vetted = 10;
    is(pl_sched_run(s, place_cb, &p), 1, "--vetted=10 --nodes 1: placed");
    ok(!p.bad && t->rank[0].node == v2 && t->rank[1].node == v2,
       "... on v2 alone, vetted 30 s ago");
    ok(v0->vet_wanted && !v1->vet_wanted,
       "... v0 (passed an hour ago) is wanted for vetting again, v1 "
       "(never passed) is not");
    t = addgang(s, 2, 1, 1, 0, 0, 0, false);
    t->vetted = 10;
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 0, "a second one waits: v2 is full");
    v0->vet_ok_time = pl_now();
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "... until v0 is vetted again");
    ok(p.node[0] == v0, "... then on v0");
    /* a plain task goes anywhere not cordoned */
    v1->cordon = strdup("vet: cpu 1 Mop/s (limit 2 Mop/s)");
    pl_node_changed(v1);
    addtask(s, 3, 1, 0);
    memset(&p, 0, sizeof(p));
    pl_sched_run(s, place_cb, &p);
    ok(p.n == 1 && p.node[0] == v0, "a task without --vetted: on v0, not "
       "on cordoned v1");
    pl_sched_free(s);
}

/* A node of a grown allocation that drains soon (n->ends, alloc.c):
 * what has a longer --timeout goes elsewhere or waits, holding nothing
 * there; what has none, or a shorter one, runs there. */
static void test_ends(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *b = t_sched_node(s, "b", 2, 0); /* first in rotation */
    struct pl_node *a = t_sched_node(s, "a", 2, 0);
    struct placed p = { 0 };

    b->ends = pl_now() + 100;
    addtask(s, 1, 1, 0)->timeout = 3600;
    addtask(s, 2, 1, 0)->timeout = 3600;
    is(pl_sched_run(s, place_cb, &p), 2, "two tasks of --timeout 1h: placed");
    ok(p.n == 2 && p.node[0] == a && p.node[1] == a,
       "... both on a, not on b, whose allocation drains in 100 s");
    struct pl_dtask *gang = addgang(s, 3, 2, 1, 0, 0, 0, false);
    gang->timeout = 3600;
    addtask(s, 4, 1, 0);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "a full, b ends first: a 2-rank "
       "task of --timeout 1h waits, one without a timeout starts");
    ok(p.n == 1 && p.id[0] == 4 && p.node[0] == b && gang->inq,
       "... on b (the waiting task reserves nothing there)");
    addtask(s, 5, 1, 0)->timeout = 50;
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "--timeout 50 s: ends before b");
    ok(p.n == 1 && p.id[0] == 5 && p.node[0] == b, "... placed on b");
    pl_sched_free(s);
}

int main(void)
{
    plan(NTESTS);
    test_node();
    test_fifo_rr();
    test_backfill();
    test_gpus();
    test_tasks();
    test_dequeue();
    test_huge_id();
    test_random();
    test_gang();
    test_shape();
    test_exclusive();
    test_exclusive_end();
    test_gpus_per_rank();
    test_fits();
    test_starvation();
    test_resv_behind();
    test_ports();
    test_priority();
    test_vetted();
    test_ends();
    return done_testing();
}
