/* tests/unit/test_daemon_placeidx.c - the placement index against a scan */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/keymap.h"
#include "daemon/node.h"
#include "daemon/placeidx.h"
#include "daemon/sched.h"
#include "proto/msg.h"
#include "proto/state.h"
#include "tests/unit/tap.h"

#define NTESTS 12
#define MAXC 32
#define MAXG 4

static uint32_t seed = 12345;

static uint32_t rnd(uint32_t n)
{
    seed = seed * 1103515245u + 12345u;
    return (seed >> 8) % n;
}

static struct pl_node *mknode(const char *name, uint32_t ncores,
                              uint32_t ngpus)
{
    uint64_t cpu[MAXC];
    char gbuf[MAXG][16];
    char *g[MAXG + 1];

    for (uint32_t i = 0; i < ncores; i++)
        cpu[i] = i;
    for (uint32_t i = 0; i < ngpus; i++) {
        snprintf(gbuf[i], sizeof(gbuf[i]), "g%u", i);
        g[i] = gbuf[i];
    }
    g[ngpus] = NULL;
    return pl_node_new(name, cpu, ncores, ngpus ? g : NULL);
}

/* What the index promises, node by node: the scan it replaces. */
static bool takes(const struct pl_node *n, bool resv,
                  const struct pl_placeidx_want *w)
{
    if (w->as_idle)
        return n->state == PL_NODE_UP && n->ncores >= w->cores
               && n->ngpus >= w->gpus && !(w->skip_resv && resv);
    return n->state == PL_NODE_UP && !n->cordon && n->free_cores >= w->cores
           && n->free_gpus >= w->gpus
           && (!w->idle || (n->free_cores == n->ncores
                            && n->free_gpus == n->ngpus))
           && !(w->skip_resv && resv);
}

static bool odd_ok(size_t k, void *arg)
{
    (void)arg;
    return k % 2 == 1;
}

/* Nodes n0 .. n<count-1> of 1..maxc cores and 0..maxg GPUs, at random,
 * in 'node' and added to 'x'. */
static void add_nodes(struct pl_placeidx *x, struct pl_node **node,
                      int count, uint32_t maxc, uint32_t maxg)
{
    for (int k = 0; k < count; k++) {
        char name[16];
        snprintf(name, sizeof(name), "n%d", k);
        node[k] = mknode(name, 1 + rnd(maxc), maxg ? rnd(maxg + 1) : 0);
        if (!node[k] || pl_placeidx_add(x, node[k]) < 0)
            exit(1);
    }
}

/* One of the marks both random tests change on node k: its state (up,
 * or lost or gone), its cordon, or its reserved mark in 'resv' and the
 * index. */
enum flip { FLIP_STATE, FLIP_CORDON, FLIP_RESV };

static void flip(struct pl_placeidx *x, struct pl_node **node, bool *resv,
                 size_t k, enum flip what)
{
    struct pl_node *n = node[k];

    switch (what) {
    case FLIP_STATE:
        pl_node_set_state(n, n->state == PL_NODE_UP
                                 ? (rnd(2) ? PL_NODE_LOST : PL_NODE_GONE)
                                 : PL_NODE_UP);
        break;
    case FLIP_CORDON:
        free(n->cordon);
        n->cordon = n->cordon ? NULL : strdup("by hand");
        pl_node_changed(n);
        break;
    case FLIP_RESV:
        resv[k] = !resv[k];
        pl_placeidx_set_resv(x, k, resv[k]);
        break;
    }
}

/* Random nodes, random holds, states, cordons and reserved marks; after
 * each change, random questions to the index and to a scan. */
static void test_index_random(void)
{
    enum { N = 300, OPS = 20000 };
    static struct pl_node *node[N];
    static bool resv[N];
    static uint32_t held[N][MAXC + 1][2]; /* a hold's cores, GPUs */
    static uint32_t nheld[N];
    struct pl_placeidx *x = pl_placeidx_new();
    int wrong = 0, nfree_wrong = 0, asked = 0, found = 0;
    uint64_t id = 1;

    add_nodes(x, node, N, MAXC, MAXG);
    for (int op = 0; op < OPS; op++) {
        size_t k = rnd(N);
        struct pl_node *n = node[k];
        uint32_t r = rnd(100);
        if (r < 60) {
            uint32_t c = 1 + rnd(4), g = rnd(2);
            uint32_t ci[MAXC], gi[MAXG];
            if (nheld[k] < MAXC && pl_node_alloc(n, id, c, g, ci, gi) == 0) {
                held[k][nheld[k]][0] = (uint32_t)id;
                held[k][nheld[k]][1] = c * 100 + g;
                nheld[k]++;
            }
            id++;
        }
        else if (r < 85 && nheld[k]) {
            /* release the last hold: its cores and GPUs are found by id */
            uint32_t hid = held[k][--nheld[k]][0];
            uint32_t ci[MAXC], gi[MAXG], nc = 0, ng = 0;
            for (uint32_t i = 0; i < n->ncores; i++)
                if (n->core_task[i] == hid)
                    ci[nc++] = i;
            for (uint32_t i = 0; i < n->ngpus; i++)
                if (n->gpu_task[i] == hid)
                    gi[ng++] = i;
            pl_node_release(n, hid, ci, nc, gi, ng);
        }
        else
            flip(x, node, resv, k, r < 91 ? FLIP_STATE : r < 96 ? FLIP_CORDON
                                                               : FLIP_RESV);
        size_t nfree = 0;
        for (size_t j = 0; j < N; j++)
            nfree += node[j]->state == PL_NODE_UP && node[j]->free_cores > 0
                     && !resv[j];
        nfree_wrong += nfree != pl_placeidx_nfree(x);
        for (int q = 0; q < 4; q++) {
            struct pl_placeidx_want w = {
                .cores = 1 + rnd(24), .gpus = rnd(3), .idle = rnd(6) == 0,
                .skip_resv = rnd(2), .as_idle = rnd(4) == 0,
            };
            bool odd = rnd(5) == 0;
            if (odd)
                w.ok = odd_ok;
            size_t from = rnd(N);
            long want = -1;
            for (size_t i = 0; i < N && want < 0; i++) {
                size_t j = (from + i) % N;
                if (takes(node[j], resv[j], &w) && (!odd || j % 2 == 1))
                    want = (long)j;
            }
            long got = pl_placeidx_first(x, from, &w);
            asked++;
            found += got >= 0;
            if (got != want && wrong++ < 5)
                diag("op %d: from %zu, %u cores %u GPUs%s%s%s%s: index "
                     "%ld, scan %ld", op, from, w.cores, w.gpus,
                     w.idle ? " idle" : "", w.skip_resv ? " unreserved" : "",
                     odd ? " odd" : "", w.as_idle ? " as if idle" : "", got,
                     want);
        }
    }
    ok(wrong == 0, "%d questions (%d found a node) after %d random changes "
       "on %d nodes: the index answers as the scan (%d differ)", asked, found,
       OPS, N, wrong);
    ok(nfree_wrong == 0, "free, up, unreserved nodes counted as a scan "
       "counts them (%d differ)", nfree_wrong);
    for (int k = 0; k < N; k++)
        pl_node_free(node[k]);
    pl_placeidx_free(x);
}

/* What the index promises of the prefetch questions, node by node: the
 * scans daemon/prefetch.c made before it asked the index. */
static bool pref_takes(const struct pl_node *n, bool resv,
                       const struct pl_placeidx_want *w)
{
    bool open = n->state == PL_NODE_UP && !n->cordon;

    if (w->skip_resv && resv)
        return false;
    switch (w->pref) {
    case PL_PIDX_ROOM:
        return open && n->npref < w->room && n->ncores >= w->cores;
    case PL_PIDX_BIND:
        return open && n->npref && n->free_cores > 0;
    case PL_PIDX_HELD:
        return n->npref > 0;
    case PL_PIDX_BACK:
        return n->npref
               && (n->cordon || n->pref_inv || (w->resv_back && resv)
                   || (w->top_set && w->top > n->pref_lo));
    }
    return false;
}

/* Random prefetch counts, priorities, marks and cores taken back beside
 * random holds, states, cordons and reserved marks: the prefetch
 * questions and totals answered as a scan answers them. */
static void test_index_prefetch_random(void)
{
    enum { N = 200, OPS = 20000 };
    static struct pl_node *node[N];
    static bool resv[N];
    struct pl_placeidx *x = pl_placeidx_new();
    int wrong = 0, sum_wrong = 0, asked = 0, found = 0;
    uint64_t id = 1;

    add_nodes(x, node, N, 8, 0);
    for (int op = 0; op < OPS; op++) {
        size_t k = rnd(N);
        struct pl_node *n = node[k];
        uint32_t r = rnd(100), ci[MAXC], gi[1];
        if (r < 25) {
            if (pl_node_alloc(n, id, 1, 0, ci, gi) == 0)
                id++;
        }
        else if (r < 45) {
            for (uint32_t i = 0; i < n->ncores; i++)
                if (n->core_task[i]) {
                    ci[0] = i;
                    pl_node_release(n, n->core_task[i], ci, 1, gi, 0);
                    break;
                }
        }
        else if (r < 75) {
            /* as sched_pref_place() and sched_pref_drop() change them */
            if (n->npref && rnd(2)) {
                if (--n->npref == 0) {
                    n->pref_inv = false;
                    n->pref_taking = 0;
                }
                else if (n->pref_taking)
                    n->pref_taking--;
            }
            else {
                int32_t prio = (int32_t)rnd(5) - 2;
                if (!n->npref || prio < n->pref_lo)
                    n->pref_lo = prio;
                n->pref_inv |= n->npref && rnd(4) == 0;
                n->npref++;
            }
            pl_node_changed(n);
        }
        else if (r < 82 && n->npref) {
            n->pref_taking += 1 + rnd(2);
            pl_node_changed(n);
        }
        else
            flip(x, node, resv, k, r < 88 ? FLIP_STATE : r < 94 ? FLIP_CORDON
                                                               : FLIP_RESV);
        uint64_t spare = 0, taking = 0, gs, gt;
        uint32_t widest = 0, gw;
        for (size_t j = 0; j < N; j++) {
            const struct pl_node *m = node[j];
            if (m->state == PL_NODE_UP && !m->cordon && !m->npref
                && !resv[j]) {
                spare += m->free_cores;
                widest = m->free_cores > widest ? m->free_cores : widest;
            }
            taking += m->pref_taking;
        }
        pl_placeidx_spare(x, &gs, &gw);
        gt = pl_placeidx_taking(x);
        if ((gs != spare || gw != widest || gt != taking) && sum_wrong++ < 5)
            diag("op %d: spare %llu/%llu widest %u/%u taking %llu/%llu", op,
                 (unsigned long long)gs, (unsigned long long)spare, gw,
                 widest, (unsigned long long)gt,
                 (unsigned long long)taking);
        for (int q = 0; q < 4; q++) {
            struct pl_placeidx_want w = {
                .pref = PL_PIDX_ROOM + (int)rnd(4), .cores = 1 + rnd(8),
                .room = 1 + rnd(4), .skip_resv = rnd(2),
                .top = (int32_t)rnd(5) - 2, .top_set = rnd(2),
                .resv_back = rnd(2),
            };
            size_t from = rnd(N);
            long want = -1;
            for (size_t j = from; j < N && want < 0; j++)
                if (pref_takes(node[j], resv[j], &w))
                    want = (long)j;
            long got = pl_placeidx_next(x, from, &w);
            asked++;
            found += got >= 0;
            if (got != want && wrong++ < 5)
                diag("op %d: question %d from %zu: index %ld, scan %ld", op,
                     w.pref, from, got, want);
            /* and wrapping, as sched_pref_place() asks */
            if (w.pref == PL_PIDX_ROOM) {
                want = -1;
                for (size_t i = 0; i < N && want < 0; i++)
                    if (pref_takes(node[(from + i) % N], resv[(from + i) % N],
                                   &w))
                        want = (long)((from + i) % N);
                got = pl_placeidx_first(x, from, &w);
                asked++;
                if (got != want && wrong++ < 5)
                    diag("op %d: a slot from %zu, wrapping: index %ld, scan "
                         "%ld", op, from, got, want);
            }
        }
    }
    ok(wrong == 0, "%d prefetch questions (%d found a node) after %d random "
       "changes on %d nodes: the index answers as the scan (%d differ)",
       asked, found, OPS, N, wrong);
    ok(sum_wrong == 0, "spare cores on nodes holding nothing, the widest, "
       "and cores being taken back summed as a scan sums them (%d differ)",
       sum_wrong);
    ok(pl_placeidx_next(x, N, &(struct pl_placeidx_want){
                                  .pref = PL_PIDX_HELD }) == -1,
       "no wrapping past the last node");
    for (int k = 0; k < N; k++)
        pl_node_free(node[k]);
    pl_placeidx_free(x);
}

/* An empty index, one node, and the wrap from 'from' back to 0. */
static void test_index_edges(void)
{
    struct pl_placeidx *x = pl_placeidx_new();
    struct pl_placeidx_want w = { .cores = 1 };
    struct pl_node *a = mknode("a", 2, 0), *b = mknode("b", 2, 0);
    uint32_t ci[2], gi[1];

    ok(pl_placeidx_first(x, 0, &w) == -1 && pl_placeidx_nfree(x) == 0,
       "an empty index has no node");
    pl_placeidx_add(x, a);
    pl_placeidx_add(x, b);
    ok(pl_placeidx_first(x, 1, &w) == 1 && pl_placeidx_first(x, 7, &w) == 0,
       "first from 1 is b; from past the end, from 0");
    pl_node_alloc(b, 1, 2, 0, ci, gi);
    ok(pl_placeidx_first(x, 1, &w) == 0 && pl_placeidx_nfree(x) == 1,
       "b full: the search wraps to a");
    pl_node_release(b, 1, ci, 2, gi, 0);
    w.idle = true;
    ok(pl_placeidx_first(x, 1, &w) == 1, "b released: idle again");
    pl_node_free(a);
    pl_node_free(b);
    pl_placeidx_free(x);
}

/* The table of names and routing ids, with deletes and regrowth. */
static void test_keymap(void)
{
    enum { N = 5000 };
    struct pl_keymap *m = pl_keymap_new();
    static char key[N][16];
    int wrong = 0;

    for (int i = 0; i < N; i++) {
        snprintf(key[i], sizeof(key[i]), "b-%d", i);
        pl_keymap_put(m, key[i], strlen(key[i]), key[i]);
    }
    for (int i = 0; i < N; i += 2)
        pl_keymap_del(m, key[i], strlen(key[i]));
    for (int i = 0; i < N; i += 4) /* again: after tombstones */
        pl_keymap_put(m, key[i], strlen(key[i]), key[i]);
    for (int i = 0; i < N; i++) {
        void *v = pl_keymap_get(m, key[i], strlen(key[i]));
        bool in = i % 2 == 1 || i % 4 == 0;
        wrong += in ? v != key[i] : v != NULL;
    }
    ok(wrong == 0 && !pl_keymap_get(m, "b-", 2), "%d keys put, half taken "
       "out, a quarter put back: each found or not as it should (%d wrong)",
       N, wrong);
    pl_keymap_free(m);
}

/* The scheduler's choices for one-rank tasks: first fit in rotation order,
 * as the scan of every node chose (the node after the last one placed on
 * first; no node before the chosen one, in that order, had room). */
struct watch {
    struct pl_sched *s;
    size_t rr;          /* where the scan would have started */
    int placed, notfirst, fitwrong;
};

static void place_cb(struct pl_dtask *t, void *arg)
{
    struct watch *w = arg;
    size_t nn = pl_sched_nnodes(w->s), k = 0;
    bool mask = pl_sched_reserved_for(w->s) != 0;

    while (k < nn && pl_sched_node_at(w->s, k) != t->rank[0].node)
        k++;
    for (size_t i = w->rr; i != k; i = (i + 1) % nn) {
        const struct pl_node *n = pl_sched_node_at(w->s, i);
        if (pl_sched_room(t, n, false) > 0
            && !(mask && pl_sched_node_reserved(w->s, i)) && w->notfirst++ < 5)
            diag("task %llu on node %zu, but node %zu had room first",
                 (unsigned long long)t->id, k, i);
    }
    w->rr = (k + 1) % nn;
    w->placed++;
    t->state = PL_ST_ASSIGNED;
}

static void test_sched_first_fit(void)
{
    enum { N = 200, TASKS = 6000 };
    struct watch w = { .s = pl_sched_new() };
    uint64_t id = 1, live[TASKS];
    size_t nlive = 0;

    for (int k = 0; k < N; k++) {
        char name[16];
        snprintf(name, sizeof(name), "s%d", k);
        struct pl_node *n = mknode(name, 1 + rnd(16), rnd(3));
        if (!n || pl_sched_node_add(w.s, n) < 0)
            exit(1);
    }
    while (id <= TASKS) {
        for (int i = 0; i < 20 && id <= TASKS; i++, id++) {
            char a0[] = "true";
            char *v[] = { a0, NULL };
            char **argv = pl_strv_dup(v), **env = NULL, *cwd = NULL;
            struct pl_dtask *t = pl_sched_task_add(w.s, id, true, 0, &argv,
                                                   &env, &cwd);
            t->state = PL_ST_QUEUED;
            t->cores_per_rank = 1 + (rnd(4) == 0 ? rnd(18) : 0);
            t->gpus_per_rank = rnd(6) == 0 ? 1 : 0;
            t->exclusive = rnd(40) == 0;
            live[nlive++] = id;
            /* the fit on idle nodes (at submit): the index's answer and
             * every node's, which capacity() gives */
            bool any = false;
            for (size_t k = 0; k < N && !any; k++)
                any = pl_sched_room(t, pl_sched_node_at(w.s, k), true) > 0;
            if (pl_sched_fits(w.s, t, NULL, 0) != any && w.fitwrong++ < 5)
                diag("task %llu: fits %d, but a node by node look says %d",
                     (unsigned long long)id, !any, any);
        }
        pl_sched_run(w.s, place_cb, &w);
        /* some end, some nodes go and come back */
        for (size_t i = 0; i < nlive;) {
            struct pl_dtask *t = pl_sched_task_get(w.s, live[i]);
            if (t->rank && rnd(3) == 0) {
                pl_sched_task_remove(w.s, t);
                live[i] = live[--nlive];
            }
            else
                i++;
        }
        struct pl_node *n = pl_sched_node_at(w.s, rnd(N));
        if (rnd(4) == 0)
            pl_node_set_state(n, n->state == PL_NODE_UP ? PL_NODE_LOST
                                                        : PL_NODE_UP);
    }
    ok(w.placed > TASKS / 2 && w.notfirst == 0, "%d of %d one-rank tasks "
       "placed on %d nodes, each on the first node with room in rotation "
       "order (%d not)", w.placed, TASKS, N, w.notfirst);
    ok(w.fitwrong == 0, "... each one's fit on idle nodes as every node's "
       "room says (%d not)", w.fitwrong);
    pl_sched_free(w.s);
}

int main(void)
{
    plan(NTESTS);
    test_index_random();
    test_index_edges();
    test_index_prefetch_random();
    test_keymap();
    test_sched_first_fit();
    return done_testing();
}
