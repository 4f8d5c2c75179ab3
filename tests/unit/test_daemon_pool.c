/* tests/unit/test_daemon_pool.c - a pool's workers and the placement of
 * its tasks: packing, --nodes, --ranks-per-node, all or none, FIFO,
 * release, readiness, and what does not fit */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/node.h"
#include "daemon/pool.h"
#include "daemon/sched.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "tests/unit/tap.h"

static struct pl_node *nodes[4];

static struct pl_node *mknode(const char *name)
{
    uint64_t cpu[4] = { 0, 1, 2, 3 };
    struct pl_node *n = pl_node_new(name, cpu, 4, NULL);

    if (!n)
        exit(1);
    pl_node_set_state(n, PL_NODE_UP);
    return n;
}

/* The pool's job as placed: 'rpn' workers on each of 'nn' nodes, in
 * node order (as the scheduler places an MPI task's ranks). */
static struct pl_pool *mkpool(uint32_t nn, uint32_t rpn)
{
    struct pl_pool *p = pl_pool_new("etl", nn, rpn, 1, 0, 0);
    struct pl_dtask job = { .id = 1, .attempt = 1, .ranks = nn * rpn };
    struct pl_rank rk[16];

    memset(rk, 0, sizeof(rk));
    for (uint32_t i = 0; i < nn * rpn; i++)
        rk[i].node = nodes[i / rpn];
    job.rank = rk;
    if (!p || pl_pool_job_placed(p, &job) < 0)
        exit(1);
    for (uint32_t i = 0; i < nn * rpn; i++)
        if (pl_pool_slot_ready(p, 1, i, nodes[i / rpn]) < 0)
            exit(1);
    p->state = PL_POOL_READY;
    return p;
}

static struct pl_dtask *mktask(struct pl_pool *p, uint64_t id, uint32_t ranks,
                               uint32_t nn, uint32_t rpn, int32_t prio)
{
    struct pl_dtask *t = calloc(1, sizeof(*t));

    if (!t)
        exit(1);
    t->id = id;
    t->ranks = ranks;
    t->nodes_req = nn;
    t->ranks_per_node = rpn;
    t->priority = prio;
    t->fn = PL_FN_C;
    t->pool = p;
    pl_pool_enqueue(p, t, false);
    return t;
}

static void dropt(struct pl_pool *p, struct pl_dtask *t)
{
    for (uint32_t r = 0; t->rank && r < t->ranks; r++)
        pl_pool_rank_release(p, t, r);
    pl_pool_dequeue(p, t);
    free(t->rank);
    free(t->nodelist);
    free(t);
}

static struct pl_dtask *placed[16];
static size_t nplaced;

static void place_cb(struct pl_dtask *t, void *arg)
{
    (void)arg;
    placed[nplaced++] = t;
}

static size_t run(struct pl_pool *p)
{
    nplaced = 0;
    return pl_pool_place(p, place_cb, NULL);
}

/* The distinct nodes of 't', and whether its workers are distinct. */
static uint32_t nodes_of(const struct pl_dtask *t, bool *distinct)
{
    uint32_t n = 0;

    *distinct = true;
    for (uint32_t r = 0; r < t->ranks; r++) {
        bool seen = false;
        for (uint32_t q = 0; q < r; q++) {
            seen |= t->rank[q].node == t->rank[r].node;
            if (t->rank[q].slot == t->rank[r].slot)
                *distinct = false;
        }
        n += !seen;
    }
    return n;
}

int main(void)
{
    char why[200];
    bool distinct;

    plan(27);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof(name), "n%d", i + 1);
        nodes[i] = mknode(name);
    }

    /* 4 nodes x 2 workers */
    struct pl_pool *p = mkpool(4, 2);
    ok(p->nslots == 8 && p->nready == 8, "8 workers, all ready");

    struct pl_dtask *a = mktask(p, 10, 4, 0, 0, 0);
    ok(run(p) == 1 && placed[0] == a, "a 4-rank task is placed");
    ok(nodes_of(a, &distinct) == 2 && distinct,
       "packed on as few nodes as fit (2), on distinct workers");
    ok(a->rank[0].node_rank == 0 && a->rank[2].node_rank == 1
       && a->rank[1].local_rank == 1 && a->rank[1].local_size == 2,
       "node and local ranks in node order");
    ok(p->nbusy == 4 && !a->inpq, "its workers are busy, it left the queue");

    struct pl_dtask *b = mktask(p, 11, 3, 3, 0, 0);
    ok(run(p) == 0, "3 ranks on exactly 3 nodes do not fit 2 free nodes");
    ok(b->inpq && !b->rank, "it stays queued, unplaced");
    struct pl_dtask *c = mktask(p, 12, 1, 0, 0, 0);
    ok(run(p) == 0 && c->inpq, "no backfill: the task behind it waits too");

    dropt(p, a);
    ok(p->nbusy == 0, "the first task's end frees its workers");
    ok(run(p) == 2, "then both queued tasks are placed");
    ok(nodes_of(b, &distinct) == 3 && distinct, "--nodes 3: on 3 nodes");
    ok(c->rank[0].node && p->nbusy == 4, "the 1-rank task beside it");
    dropt(p, b);
    dropt(p, c);

    struct pl_dtask *d = mktask(p, 13, 4, 0, 1, 0);
    ok(run(p) == 1 && nodes_of(d, &distinct) == 4,
       "--ranks-per-node 1: one worker on each of 4 nodes");
    dropt(p, d);
    struct pl_dtask *e = mktask(p, 14, 3, 0, 2, 0);
    ok(run(p) == 1 && nodes_of(e, &distinct) == 2
       && e->rank[2].local_size == 1,
       "3 ranks, 2 per node: 2 nodes, the second with 1");
    dropt(p, e);

    /* priorities, head */
    struct pl_dtask *lo = mktask(p, 20, 8, 0, 0, 0);
    struct pl_dtask *hi = mktask(p, 21, 8, 0, 0, 5);
    ok(TAILQ_FIRST(&p->queue) == hi, "a higher priority goes first");
    struct pl_dtask *hd = calloc(1, sizeof(*hd));
    hd->id = 22;
    hd->ranks = 1;
    hd->priority = 5;
    hd->pool = p;
    pl_pool_enqueue(p, hd, true);
    ok(TAILQ_FIRST(&p->queue) == hd, "'head' goes before its equals");
    ok(run(p) == 1 && placed[0] == hd && p->nbusy == 1,
       "one placed: the 8-rank task behind waits for all 8");
    dropt(p, hd);
    ok(run(p) == 1 && placed[0] == hi && p->nbusy == 8,
       "then the 8-rank task, all workers");
    dropt(p, hi);
    dropt(p, lo);
    ok(p->nqueued == 0 && p->nbusy == 0, "queue empty, workers free");

    /* what does not fit */
    struct pl_dtask big = { .ranks = 9 };
    ok(!pl_pool_fits(p, &big, why, sizeof(why)) && strstr(why, "8 workers"),
       "9 ranks in 8 workers: refused, saying why");
    struct pl_dtask wide = { .ranks = 6, .ranks_per_node = 3 };
    ok(!pl_pool_fits(p, &wide, why, sizeof(why)),
       "3 ranks a node in a pool of 2 a node: refused");
    struct pl_dtask fits = { .ranks = 8, .nodes_req = 4 };
    ok(pl_pool_fits(p, &fits, why, sizeof(why)), "8 ranks on 4 nodes fit");

    /* not ready: nothing placed; a lost node's workers are not used */
    p->state = PL_POOL_RESTARTING;
    struct pl_dtask *f = mktask(p, 30, 1, 0, 0, 0);
    ok(run(p) == 0 && f->inpq, "a pool not ready places nothing");
    p->state = PL_POOL_READY;
    pl_node_set_state(nodes[0], PL_NODE_LOST);
    pl_node_set_state(nodes[1], PL_NODE_LOST);
    pl_node_set_state(nodes[2], PL_NODE_LOST);
    struct pl_dtask *g = mktask(p, 31, 3, 0, 0, 0);
    ok(run(p) == 1 && placed[0] == f && f->rank[0].node == nodes[3],
       "the 1-rank task goes to the node still up");
    ok(g->inpq, "3 ranks do not fit the one node up");
    dropt(p, f);
    dropt(p, g);

    /* a new attempt of the job: the slots anew; an old rank's release
     * frees nothing of it */
    for (int i = 0; i < 3; i++)
        pl_node_set_state(nodes[i], PL_NODE_UP);
    struct pl_dtask *h = mktask(p, 40, 2, 0, 0, 0);
    run(p);
    struct pl_dtask job2 = { .id = 1, .attempt = 2, .ranks = 8 };
    struct pl_rank rk2[8];
    memset(rk2, 0, sizeof(rk2));
    for (int i = 0; i < 8; i++)
        rk2[i].node = nodes[i / 2];
    job2.rank = rk2;
    pl_pool_job_placed(p, &job2);
    ok(p->nready == 0 && p->nbusy == 0 && p->attempt == 2,
       "a new attempt: no worker ready, none busy");
    ok(pl_pool_slot_ready(p, 1, 0, nodes[0]) < 0
       && pl_pool_slot_ready(p, 2, 0, nodes[1]) < 0,
       "a HELLO of the old attempt, or from another node, is refused");
    dropt(p, h);

    pl_pool_free(p);
    for (int i = 0; i < 4; i++)
        pl_node_free(nodes[i]);
    return done_testing();
}
