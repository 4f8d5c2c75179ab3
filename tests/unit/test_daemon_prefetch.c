/* tests/unit/test_daemon_prefetch.c - tasks placed beyond the free
 * cores (daemon/prefetch.c): placement, start, binding, taking back */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/node.h"
#include "daemon/sched.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "tests/unit/sched_fixture.h"
#include "tests/unit/tap.h"

struct seen {
    int n, pref;
    uint64_t id[64];
};

static void place_cb(struct pl_dtask *t, void *arg)
{
    struct seen *p = arg;

    t->state = PL_ST_ASSIGNED;
    t->attempt++;
    t->rank[0].state = PL_ST_ASSIGNED;
    t->rank[0].run_seq = 1; /* its RUN left */
    if (p->n < 64)
        p->id[p->n] = t->id;
    p->n++;
    p->pref += t->rank[0].pref;
}

static bool recall_cb(struct pl_dtask *t, void *arg)
{
    struct seen *p = arg;

    if (p->n < 64)
        p->id[p->n] = t->id;
    p->n++;
    return true;
}

/* Whether node 'n' holds 'free' free cores and the prefetched 'ids' in
 * that order. */
static bool pref_are(const struct pl_node *n, uint32_t free,
                     const uint64_t *ids, uint32_t k)
{
    const struct pl_dtask *t;
    uint32_t i = 0;

    if (n->free_cores != free || n->npref != k)
        return false;
    TAILQ_FOREACH(t, &n->pref, prefent) {
        if (i >= k || t->id != ids[i] || !t->rank[0].pref
            || t->rank[0].ncores != 0 || t->rank[0].node != n)
            return false;
        i++;
    }
    return i == k;
}

/* End task 'id' (pilotd forgets it: its cores go back). */
static void end(struct pl_sched *s, uint64_t id)
{
    struct pl_dtask *t = pl_sched_task_get(s, id);

    if (t)
        pl_sched_task_remove(s, t);
}

static void test_place(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n1 = t_sched_node(s, "n1", 2, 0);
    struct pl_node *n2 = t_sched_node(s, "n2", 2, 0);
    struct seen p = { 0 };

    pl_sched_set_prefetch(s, 2);
    for (uint64_t id = 1; id <= 10; id++)
        t_sched_task(s, id, 0, 1, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 8, "4 cores, prefetch 2: 8 of 10 "
       "tasks placed");
    is(p.pref, 4, "... 4 of them prefetched");
    const uint64_t a[] = { 5, 7 }, b[] = { 6, 8 };
    ok(pref_are(n1, 0, a, 2) && pref_are(n2, 0, b, 2),
       "... 2 a node, in order, no cores held, the nodes' cores all busy");
    is(pl_sched_queued(s), 2, "... 2 still queued");
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 0, "a pass again: nothing more");

    /* an end, and its agent starts the first held task on its core */
    struct pl_dtask *t1 = pl_sched_task_get(s, 1);
    uint64_t cpu = n1->cpu[t1->rank[0].core_idx[0]];
    end(s, 1);
    struct pl_dtask *t5 = pl_sched_task_get(s, 5);
    is(pl_sched_pref_started(t5, n1, &cpu, 1), 0, "task 5 started on the "
       "core task 1 freed");
    ok(!t5->rank[0].pref && t5->rank[0].ncores == 1
           && n1->core_task[t5->rank[0].core_idx[0]] == 5
           && n1->free_cores == 0 && n1->npref == 1,
       "... holds it; n1 has one prefetched left and no free core");
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "the next pass prefetches one more");
    const uint64_t a2[] = { 7, 9 };
    ok(p.pref == 1 && pref_are(n1, 0, a2, 2), "... task 9, on n1");

    /* a core held by another task is not taken twice */
    struct pl_dtask *t7 = pl_sched_task_get(s, 7);
    uint64_t busy = cpu;
    ok(pl_sched_pref_started(t7, n1, &busy, 1) < 0 && errno == EBUSY
           && t7->rank[0].ncores == 0 && !t7->rank[0].pref
           && n1->npref == 1 && n1->core_task[0] != 7
           && n1->core_task[1] != 7,
       "started on a core task 5 holds: EBUSY, no core taken, no longer "
       "held");

    /* cores free with a task held: it is bound to one */
    end(s, 3);
    end(s, 5);
    memset(&p, 0, sizeof(p));
    struct pl_dtask *t9 = pl_sched_task_get(s, 9);
    ok(pl_sched_pref_bind(s, place_cb, &p) == 1 && p.id[0] == 9
           && !t9->rank[0].pref && t9->rank[0].ncores == 1
           && n1->free_cores == 1 && n1->npref == 0,
       "2 cores free on n1: task 9 held there is bound to one");
    /* its agent had started it on the other one: it moves there */
    uint64_t c9 = n1->cpu[t9->rank[0].core_idx[0]];
    uint64_t other = n1->cpu[n1->core_task[0] ? 1 : 0];
    is(pl_sched_pref_started(t9, n1, &other, 1), 0, "task 9 reports the "
       "other core (an end started it before its RUN with cores came)");
    ok(t9->rank[0].ncores == 1 && n1->cpu[t9->rank[0].core_idx[0]] == other
           && n1->free_cores == 1 && c9 != other,
       "... it holds that one; the one it was bound to is free");
    pl_sched_free(s);
}

static void test_shapes(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n1 = t_sched_node(s, "n1", 2, 2);
    struct seen p = { 0 };

    pl_sched_set_prefetch(s, 4);
    t_sched_task(s, 1, 0, 1, 2, 0);
    t_sched_task(s, 2, 0, 1, 1, 1);  /* a GPU: not prefetched */
    t_sched_task(s, 3, 0, 1, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 1, "a GPU task first in the queue: "
       "nothing prefetched behind it");
    ok(n1->npref == 0 && pl_sched_queued(s) == 2, "... 2 queued");
    end(s, 1);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 2, "its end: 2 and 3 placed");
    struct pl_dtask *t = t_sched_task(s, 4, 0, 1, 1, 0);
    t->ranks = 2;
    t_sched_task(s, 5, 0, 1, 1, 0);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 0, "two ranks first: none");
    pl_sched_dequeue(s, t);
    pl_sched_task_remove(s, t);
    t = t_sched_task(s, 6, 0, 1, 3, 0);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "task 5 prefetched");
    is(pl_sched_run(s, place_cb, &p), 0, "task 6 needs more cores than the "
       "node has: not prefetched");
    pl_sched_free(s);

    /* --prefetch 0 */
    s = pl_sched_new();
    n1 = t_sched_node(s, "n1", 1, 0);
    t_sched_task(s, 1, 0, 1, 1, 0);
    t_sched_task(s, 2, 0, 1, 1, 0);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "prefetch 0: one task on one core");
    ok(n1->npref == 0 && pl_sched_queued(s) == 1, "... none held beyond");
    pl_sched_free(s);
}

static void test_recall(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n1 = t_sched_node(s, "n1", 1, 0);
    struct pl_node *n2 = t_sched_node(s, "n2", 1, 0);
    struct seen p = { 0 }, r = { 0 };

    pl_sched_set_prefetch(s, 2);
    for (uint64_t id = 1; id <= 6; id++)
        t_sched_task(s, id, 0, 1, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 6, "2 cores + 4 prefetched");
    is(pl_sched_pref_recall(s, recall_cb, &r), 0, "nothing to take back");
    n1->cordon = strdup("test");
    pl_node_changed(n1);
    ok(pl_sched_pref_recall(s, recall_cb, &r) == 2
           && r.id[0] + r.id[1] == 8 && r.id[0] * r.id[1] == 15,
       "n1 cordoned: its 2 held tasks are taken back");
    ok(pl_sched_task_get(s, 3)->rank[0].recalled, "... marked");
    is(pl_sched_pref_recall(s, recall_cb, &r), 0, "... once");
    end(s, 1);
    memset(&p, 0, sizeof(p));
    is(pl_sched_pref_bind(s, place_cb, &p), 0, "a core free on cordoned n1: "
       "nothing bound there");
    /* what its agent answers: the task goes back to the queue */
    struct pl_dtask *t3 = pl_sched_task_get(s, 3);
    pl_sched_requeue(s, t3, true);
    ok(n1->npref == 1 && t3->inq && !t3->rank, "task 3 given back: queued, "
       "off n1's list");
    free(n1->cordon);
    n1->cordon = NULL;
    pl_node_changed(n1);

    /* a higher priority queued: the lower ones held are taken back */
    memset(&r, 0, sizeof(r));
    t_sched_task(s, 7, 5, 1, 1, 1); /* a GPU: it waits, nothing prefetched */
    ok(pl_sched_pref_recall(s, recall_cb, &r) == 2
           && r.id[0] + r.id[1] == 10 && r.id[0] * r.id[1] == 24,
       "a task of priority 5 queued: n2's held tasks of priority 0 are "
       "taken back (n1's was already)");
    (void)n2;
    pl_sched_free(s);

    /* held after a task of a lower priority: that one makes way */
    s = pl_sched_new();
    n1 = t_sched_node(s, "n1", 1, 0);
    pl_sched_set_prefetch(s, 3);
    t_sched_task(s, 1, 0, 1, 1, 0);
    t_sched_task(s, 2, 0, 1, 1, 0);
    t_sched_task(s, 3, 0, 1, 1, 0);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 3, "1 core + 2 held");
    t_sched_task(s, 4, 7, 1, 1, 0);
    memset(&p, 0, sizeof(p));
    is(pl_sched_run(s, place_cb, &p), 1, "task 4 of priority 7 is held too");
    memset(&r, 0, sizeof(r));
    ok(pl_sched_pref_recall(s, recall_cb, &r) == 2
           && r.id[0] + r.id[1] == 5 && r.id[0] * r.id[1] == 6
           && !pl_sched_task_get(s, 4)->rank[0].recalled,
       "... tasks 2 and 3, held before it, are taken back; it is not");
    pl_sched_free(s);
}

static void test_steal(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n1 = t_sched_node(s, "n1", 1, 0);
    struct pl_node *n2 = t_sched_node(s, "n2", 1, 0);
    struct seen p = { 0 }, r = { 0 };

    pl_sched_set_prefetch(s, 2);
    for (uint64_t id = 1; id <= 5; id++)
        t_sched_task(s, id, 0, 1, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 5, "2 cores: 2 placed, 3 held");
    end(s, 4); /* held on n2 (canceled) */
    end(s, 2);
    ok(n2->npref == 0 && n2->free_cores == 1 && n1->npref == 2,
       "n2 idle, holding nothing; n1 busy, holding 2");
    ok(pl_sched_pref_recall(s, recall_cb, &r) == 1 && r.id[0] == 5,
       "one of n1's held tasks (the last) is taken back for n2's free "
       "core");
    is(pl_sched_pref_recall(s, recall_cb, &r), 0, "... and no other while "
       "its answer is on its way");
    pl_sched_free(s);
}

/* A larger task reserves a node: what that node holds is taken back and
 * waits behind it, what the other node holds stays. */
static void test_resv(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n1 = t_sched_node(s, "n1", 2, 0);
    struct pl_node *n2 = t_sched_node(s, "n2", 2, 0);
    struct seen p = { 0 }, r = { 0 };

    pl_sched_set_prefetch(s, 2);
    for (uint64_t id = 1; id <= 8; id++)
        t_sched_task(s, id, 0, 1, 1, 0);
    is(pl_sched_run(s, place_cb, &p), 8, "4 cores, prefetch 2: 4 run, "
       "4 held");
    end(s, 1); /* n1: one core free, its held tasks not started */
    t_sched_task(s, 9, 0, 1, 2, 0);
    memset(&p, 0, sizeof(p));
    ok(pl_sched_run(s, place_cb, &p) == 0 && pl_sched_reserved_for(s) == 9,
       "task 9 of 2 cores does not fit the free core: n1, the freest, is "
       "reserved for it");
    ok(pl_sched_pref_recall(s, recall_cb, &r) == 2
           && r.id[0] + r.id[1] == 12 && r.id[0] * r.id[1] == 35,
       "... n1's held tasks 5 and 7 are taken back");
    const uint64_t b[] = { 6, 8 };
    ok(pref_are(n2, 0, b, 2) && !pl_sched_task_get(s, 6)->rank[0].recalled
           && !pl_sched_task_get(s, 8)->rank[0].recalled,
       "... n2 keeps its own");
    /* what n1's agent answers: they go back to the head of the queue */
    pl_sched_requeue(s, pl_sched_task_get(s, 7), true);
    pl_sched_requeue(s, pl_sched_task_get(s, 5), true);
    memset(&p, 0, sizeof(p));
    ok(pl_sched_run(s, place_cb, &p) == 0 && n1->npref == 0
           && n1->free_cores == 1 && pl_sched_queued(s) == 3,
       "while n1 is reserved nothing is placed or held there: 5, 7 and 9 "
       "wait");
    end(s, 3); /* n1 idle */
    memset(&p, 0, sizeof(p));
    struct pl_dtask *t9 = pl_sched_task_get(s, 9);
    ok(pl_sched_run(s, place_cb, &p) >= 1 && p.id[0] == 9
           && t9->rank[0].node == n1 && t9->rank[0].ncores == 2
           && pl_sched_reserved_for(s) == 0,
       "n1 idle: task 9 starts there first, ahead of 5 and 7 queued before "
       "it; the reservation ends");
    pl_sched_free(s);
}

int main(void)
{
    plan(42);
    test_place();
    test_shapes();
    test_recall();
    test_steal();
    test_resv();
    return done_testing();
}
