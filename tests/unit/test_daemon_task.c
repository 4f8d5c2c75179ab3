/* tests/unit/test_daemon_task.c - pilotd's task state module: every change
 * recorded in the database and the counters together, ends that release
 * or fail their dependents, requeues, cancels, forgotten submissions
 *
 * A pilotd of its parts: a real state database in a temporary directory
 * and a real scheduler with one node, no sockets (no agent is linked, so
 * no message leaves).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_private.h"
#include "proto/query.h"
#include "proto/run.h"
#include "proto/strv.h"
#include "tests/unit/helpers.h"

static char dir[128];

/* A pilotd with a database and one node of 'cores' cores. */
static struct pl_daemon *daemon_make(uint32_t cores)
{
    struct pl_daemon *d = calloc(1, sizeof(*d));
    struct pl_error e;
    char path[256];
    uint64_t cpu[64];

    for (uint32_t i = 0; i < cores; i++)
        cpu[i] = i;
    snprintf(path, sizeof(path), "%s/state.db", dir);
    d->outtail = &d->outq;
    if (!(d->db = pl_db_open(path, &e)) || !(d->sched = pl_sched_new())) {
        diag("daemon: %s", e.text);
        exit(1);
    }
    struct pl_node *n = pl_node_new("n1", cpu, cores, NULL);
    if (!n || pl_sched_node_add(d->sched, n) < 0)
        exit(1);
    return d;
}

static void daemon_drop(struct pl_daemon *d)
{
    pl_outq_free(d);
    pl_agents_free(d);
    pl_sched_free(d->sched);
    pl_db_close(d->db);
    free(d->unsent);
    free(d->depfail);
    free(d);
}

/* A task stored and queued as submit.c does it: 'ranks' ranks of one
 * core, after 'after' (0: none; 'any' end).  Its id (it may have ended
 * already: its dependency failed), or 0. */
static uint64_t task_id(struct pl_daemon *d, uint32_t ranks, uint64_t after,
                        bool any)
{
    char *argv[] = { (char *)"true", NULL };
    struct pl_spec s = { .argv = argv, .ranks = ranks, .cpr = 1,
                         .retries = 1 };
    struct pl_deps dp = { 0 };
    struct pl_error e;
    uint64_t id;

    if (after && pl_deps_add(d, &dp, after, any, false, true, &e) < 0) {
        diag("deps: %s", e.text);
        return 0;
    }
    int state = dp.nlive || dp.why[0] ? PL_ST_WAITING : PL_ST_QUEUED;
    struct pl_db_task row = { .spec = &s, .after = dp.stored,
                              .nafter = (uint32_t)dp.nstored };
    if (pl_db_task_insert(d->db, &row, state, pl_now(), &id, &e) < 0) {
        diag("insert: %s", e.text);
        pl_deps_clear(&dp);
        return 0;
    }
    char **av = pl_strv_dup(argv), **env = NULL, *cwd = NULL;
    struct pl_dtask *t = pl_sched_task_add(d->sched, id,
                                           state == PL_ST_QUEUED, 0, &av,
                                           &env, &cwd);
    t->state = state;
    pl_dtask_shape(t, &s);
    t->serial = ++d->serial;
    pl_dtask_counted(d, t);
    if (pl_deps_apply(d, t, &dp) < 0)
        diag("deps apply failed");
    pl_deps_clear(&dp);
    return id;
}

/* The same, for a task that is live: the task. */
static struct pl_dtask *task_new(struct pl_daemon *d, uint32_t ranks,
                                 uint64_t after, bool any)
{
    return pl_sched_task_get(d->sched, task_id(d, ranks, after, any));
}

static void place_cb(struct pl_dtask *t, void *arg)
{
    struct pl_daemon *d = arg;

    pl_dtask_placed(d, t);
}

/* The state the database holds for task 'id', or "". */
static const char *db_state(struct pl_daemon *d, uint64_t id)
{
    struct pl_error e;
    int st = pl_db_task_state(d->db, id, &e);

    return st > 0 ? pl_state_name(st) : "";
}

/* Whether the counters say exactly what the database says, state by
 * state (after the batch's writes: they are in the open transaction,
 * which the writer connection reads). */
static bool counters_true(struct pl_daemon *d)
{
    struct pl_error e;
    json_t *c = pl_query_counts(pl_db_handle(d->db), NULL, 0, &e);
    bool same = c != NULL;

    for (int s = 1; c && s < PL_ST_COUNT; s++)
        if (json_integer_value(json_object_get(c, pl_state_name(s)))
            != d->count[s]) {
            diag("%s: counted %lld, stored %lld", pl_state_name(s),
                 d->count[s],
                 (long long)json_integer_value(json_object_get(
                     c, pl_state_name(s))));
            same = false;
        }
    if (c && json_integer_value(json_object_get(c, "total")) != d->total)
        same = false;
    json_decref(c);
    return same;
}

static const struct pl_db_change done_c = { .exit_code = 0, .signal = 0,
                                            .maxrss_kb = 100 };

static void test_life(void)
{
    struct pl_daemon *d = daemon_make(4);
    struct pl_dtask *t = task_new(d, 1, 0, false);
    uint64_t id = t->id;

    ok(t->state == PL_ST_QUEUED && d->count[PL_ST_QUEUED] == 1
           && d->total == 1 && counters_true(d),
       "a new task: queued, counted once");
    ok(pl_sched_run(d->sched, place_cb, d) == 1 && t->state == PL_ST_ASSIGNED
           && t->attempt == 1 && t->rank[0].state == PL_ST_ASSIGNED
           && !strcmp(db_state(d, id), "assigned") && counters_true(d),
       "placed: assigned, attempt 1, stored, counted");
    pl_dtask_rank_running(d, t, 0, 0, NULL);
    ok(t->state == PL_ST_RUNNING && !strcmp(db_state(d, id), "running")
           && d->count[PL_ST_RUNNING] == 1 && counters_true(d),
       "its rank started: running");
    ok(pl_dtask_rank_ended(d, t, 0, PL_ST_DONE, &done_c)
           && !pl_sched_task_get(d->sched, id)
           && !strcmp(db_state(d, id), "done") && d->count[PL_ST_DONE] == 1
           && d->count[PL_ST_RUNNING] == 0 && counters_true(d),
       "its rank ended done: the task is done, forgotten, counted");

    /* two ranks: the first failure fails the task once both ended */
    t = task_new(d, 2, 0, false);
    id = t->id;
    pl_sched_run(d->sched, place_cb, d);
    pl_dtask_rank_running(d, t, 0, 0, NULL);
    ok(t->state == PL_ST_ASSIGNED, "2 ranks, one started: still assigned");
    pl_dtask_rank_running(d, t, 1, 0, NULL);
    ok(t->state == PL_ST_RUNNING, "... both started: running");
    struct pl_db_change f = { .exit_code = 3, .signal = -1, .maxrss_kb = -1,
                              .reason = "exit code 3" };
    ok(!pl_dtask_rank_ended(d, t, 1, PL_ST_FAILED, &f)
           && t->fail == PL_ST_FAILED
           && !strcmp(t->reason, "rank 1: exit code 3"),
       "rank 1 failed: the task waits for rank 0, the reason kept");
    ok(pl_dtask_rank_ended(d, t, 0, PL_ST_CANCELED, &done_c)
           && !strcmp(db_state(d, id), "failed") && counters_true(d),
       "... rank 0 ended: the task failed");

    /* lost with retries left: back to the head of the queue */
    t = task_new(d, 1, 0, false);
    id = t->id;
    pl_sched_run(d->sched, place_cb, d);
    struct pl_db_change lost = { .exit_code = -1, .signal = -1,
                                 .maxrss_kb = -1, .reason = "node-lost" };
    t->lost = true;
    ok(pl_dtask_rank_ended(d, t, 0, PL_ST_FAILED, &lost)
           && t->state == PL_ST_QUEUED && t->inq && !t->rank
           && !strcmp(db_state(d, id), "queued") && counters_true(d),
       "lost with a retry left: queued again");
    pl_sched_run(d->sched, place_cb, d);
    ok(t->attempt == 2 && t->state == PL_ST_ASSIGNED,
       "... placed again: attempt 2");
    t->lost = true;
    ok(pl_dtask_rank_ended(d, t, 0, PL_ST_FAILED, &lost)
           && !strcmp(db_state(d, id), "failed") && counters_true(d),
       "... lost again, no retry left: failed");

    /* cancel: queued ends at once; a forgotten submission leaves no
     * trace in the counters */
    t = task_new(d, 1, 0, false);
    id = t->id;
    pl_dtask_cancel(d, t);
    ok(!pl_sched_task_get(d->sched, id)
           && !strcmp(db_state(d, id), "canceled") && counters_true(d),
       "a queued task canceled: canceled, forgotten");
    long long total = d->total;
    t = task_new(d, 1, 0, false);
    pl_dtask_forget(d, t->id);
    ok(d->total == total && d->count[PL_ST_QUEUED] == 0,
       "a submission forgotten: the counters as before it");
    daemon_drop(d);
}

static void test_deps(void)
{
    struct pl_daemon *d = daemon_make(1);

    /* a chain a <- b <- c: a fails, b and c fail after it */
    struct pl_dtask *a = task_new(d, 1, 0, false);
    uint64_t ida = a->id;
    struct pl_dtask *b = task_new(d, 1, ida, false);
    uint64_t idb = b->id;
    struct pl_dtask *c = task_new(d, 1, idb, false);
    uint64_t idc = c->id;
    struct pl_dtask *x = task_new(d, 1, ida, true); /* any end */
    uint64_t idx = x->id;
    ok(b->state == PL_ST_WAITING && c->state == PL_ST_WAITING
           && x->state == PL_ST_WAITING && d->count[PL_ST_WAITING] == 3
           && counters_true(d),
       "deps: b after a, c after b, x after a (any): all waiting");
    pl_sched_run(d->sched, place_cb, d);
    struct pl_db_change f = { .exit_code = 1, .signal = -1, .maxrss_kb = -1,
                              .reason = "exit code 1" };
    pl_dtask_rank_ended(d, a, 0, PL_ST_FAILED, &f);
    ok(!pl_sched_task_get(d->sched, idb) && !pl_sched_task_get(d->sched, idc)
           && !strcmp(db_state(d, idb), "failed")
           && !strcmp(db_state(d, idc), "failed"),
       "a failed: b and c failed after it, down the chain");
    struct pl_dtask *xx = pl_sched_task_get(d->sched, idx);
    ok(xx && xx->state == PL_ST_QUEUED && xx->inq
           && !strcmp(db_state(d, idx), "queued") && counters_true(d),
       "... x (any end) is queued");
    json_t *jb = pl_query_task(pl_db_handle(d->db), idb, NULL);
    const char *why = json_string_value(json_object_get(jb, "reason"));
    ok(why && strstr(why, "dependency: task") && strstr(why, "failed"),
       "... b's reason names its dependency (%s)", why ? why : "none");
    json_decref(jb);

    /* after a task that ended well already: queued at once; after one
     * that failed already: failed at once */
    struct pl_dtask *y = task_new(d, 1, idx, false);
    ok(y->state == PL_ST_WAITING, "y after x (live): waiting");
    pl_sched_run(d->sched, place_cb, d);
    pl_dtask_rank_ended(d, xx, 0, PL_ST_DONE, &done_c);
    ok(y->state == PL_ST_QUEUED && counters_true(d),
       "x done: y queued");
    uint64_t idz = task_id(d, 1, ida, false);
    struct pl_error e;
    int st = pl_db_task_state(d->db, idz, &e);
    ok(idz && !pl_sched_task_get(d->sched, idz) && st == PL_ST_FAILED,
       "z after a (failed already): failed at once, not waiting (%s)",
       st > 0 ? pl_state_name(st) : "none");
    struct pl_deps dp = { 0 };
    errno = 0;
    ok(pl_deps_add(d, &dp, 999, false, false, true, &e) == -1
           && errno == EINVAL && strstr(e.text, "no task 999"),
       "deps: an unknown task refused at submit (%s)", e.text);
    ok(pl_deps_add(d, &dp, 999, false, false, false, &e) == 0
           && strstr(dp.why, "is gone"),
       "deps: ... after a restart it is a failed dependency (%s)", dp.why);
    pl_deps_clear(&dp);
    ok(counters_true(d), "the counters agree with the database at the end");
    daemon_drop(d);
}

static void test_links(void)
{
    struct pl_daemon *d = daemon_make(1);
    struct pl_link *l = calloc(1, sizeof(*l));

    l->node = pl_sched_node_at(d->sched, 0);
    memcpy(l->rid, "rid-2", 5);
    l->ridlen = 5;
    d->links = calloc(1, sizeof(*d->links));
    d->links[0] = l;
    d->nlinks = d->caplinks = 1;
    ok(pl_agents_link(d, l->node) == l
           && pl_agents_link_by_rid(d, "rid-2", 5) == l
           && pl_agents_link_by_rid(d, "rid-", 4) == NULL
           && pl_agents_link(d, NULL) == NULL,
       "links: by node and by routing id (the scheduler has none)");
    daemon_drop(d);
}

/* A link for node 'n' (routing id its name), as a register makes one. */
static void link_add(struct pl_daemon *d, struct pl_node *n)
{
    struct pl_link *l = calloc(1, sizeof(*l));

    l->node = n;
    l->ridlen = strlen(n->name);
    memcpy(l->rid, n->name, l->ridlen);
    n->state = PL_NODE_UP;
    d->links = realloc(d->links, (d->nlinks + 1) * sizeof(*d->links));
    d->links[d->nlinks++] = l;
    d->caplinks = d->nlinks;
}

/* A RUN sent again (its agent registered without having read it) for
 * a rank of a task whose other rank ended on another node meanwhile: that
 * rank's node is gone from the placement (tests/fuzz/fuzz_agentseq.c
 * found pack_rank() reading it: a NULL dereference). */
static void test_run_again(void)
{
    struct pl_daemon *d = daemon_make(1);
    uint64_t cpu[] = { 0 };
    struct pl_node *n2 = pl_node_new("n2", cpu, 1, NULL);
    struct pl_db_change failed = { .exit_code = 1, .signal = 0,
                                   .maxrss_kb = 100 };
    struct pl_error e;

    pl_sched_node_add(d->sched, n2);
    link_add(d, pl_sched_node_at(d->sched, 0));
    link_add(d, n2);
    struct pl_dtask *t = task_new(d, 2, 0, false);
    pl_sched_run(d->sched, place_cb, d);
    ok(t->state == PL_ST_ASSIGNED && t->rank[0].node && t->rank[1].node
           && t->rank[0].node != t->rank[1].node,
       "two ranks placed on two nodes");
    pl_dtask_rank_ended(d, t, 1, PL_ST_FAILED, &failed);
    pl_outq_free(d); /* the KILL to rank 0 */
    t->rank[0].run_seq = RUN_UNSENT;
    pl_dispatch_unsent(d, t);
    pl_dispatch_send(d);
    /* the RUN for rank 0 names the nodes still in the placement */
    struct pl_msg m = { 0 };
    const msgpack_object *tasks;
    struct pl_run run = { 0 };
    bool have_id;
    ok(d->outq && pl_msg_decode(d->outq->w.sb.data, d->outq->w.sb.size, &m,
                                &e) == 0
           && pl_run_msg_decode(m.body, &tasks, &e) == 0
           && tasks->via.array.size == 1
           && pl_run_decode(&tasks->via.array.ptr[0], &run, &have_id, &e)
                  == 0
           && run.rank == 0 && run.nodelist && !strcmp(run.nodelist[0], "n1")
           && !run.nodelist[1],
       "rank 0's RUN again, after rank 1 ended on n2: nodelist n1");
    pl_run_clear(&run);
    pl_msg_release(&m);
    daemon_drop(d);
}

/* The figures stored for task 'id' (NAN where NULL), by the writer's
 * connection (the batch's transaction is open). */
static void db_usage(struct pl_daemon *d, uint64_t id, double *v)
{
    sqlite3_stmt *st = NULL;

    for (int i = 0; i < 6; i++)
        v[i] = NAN;
    if (sqlite3_prepare_v2(pl_db_handle(d->db), "SELECT cpu_user, cpu_sys, "
                           "gpu_util, gpu_mem_mb, gpu_power_w, maxrss_kb "
                           "FROM tasks WHERE id = ?1", -1, &st, NULL)
        != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    if (sqlite3_step(st) == SQLITE_ROW)
        for (int i = 0; i < 6; i++)
            if (sqlite3_column_type(st, i) != SQLITE_NULL)
                v[i] = sqlite3_column_double(st, i);
    sqlite3_finalize(st);
}

/* The ranks' CPU is summed into the task's row with its end; GPU
 * figures averaged (power, utilisation) or the most (memory); the peak
 * RSS is the largest rank's; a task none measured keeps NULL. */
static void test_usage(void)
{
    struct pl_daemon *d = daemon_make(4);
    struct pl_dtask *t = task_new(d, 2, 0, false);
    uint64_t id = t->id;
    double v[6];

    pl_sched_run(d->sched, place_cb, d);
    pl_dtask_rank_running(d, t, 0, 0, NULL);
    pl_dtask_rank_running(d, t, 1, 0, NULL);
    struct pl_usage u0 = { .has = PL_USE_CPU | PL_USE_GPU_UTIL
                                  | PL_USE_GPU_MEM | PL_USE_GPU_POWER,
                           .cpu_user = 1.5, .cpu_sys = 0.25, .gpu_util = 80,
                           .gpu_mem_mb = 1000, .gpu_power_w = 300 };
    struct pl_usage u1 = { .has = PL_USE_CPU | PL_USE_GPU_UTIL
                                  | PL_USE_GPU_MEM | PL_USE_GPU_POWER,
                           .cpu_user = 0.5, .cpu_sys = 0.75, .gpu_util = 40,
                           .gpu_mem_mb = 3000, .gpu_power_w = 100 };
    struct pl_db_change c0 = { .exit_code = 0, .signal = 0,
                               .maxrss_kb = 2048, .use = &u0 };
    struct pl_db_change c1 = { .exit_code = 0, .signal = 0,
                               .maxrss_kb = 4096, .use = &u1 };
    ok(!pl_dtask_rank_ended(d, t, 1, PL_ST_DONE, &c1),
       "usage: rank 1 ended, the task waits for rank 0");
    db_usage(d, id, v);
    ok(isnan(v[0]) && isnan(v[5]), "usage: nothing stored before the end");
    ok(pl_dtask_rank_ended(d, t, 0, PL_ST_DONE, &c0), "usage: rank 0 ended");
    db_usage(d, id, v);
    ok(v[0] == 2.0 && v[1] == 1.0,
       "usage: CPU summed over the ranks: %g s user, %g s system", v[0],
       v[1]);
    ok(v[2] == 60 && v[3] == 3000 && v[4] == 200 && v[5] == 4096,
       "usage: GPU mean %g%%, most %g MB, mean %g W; maxrss %g kB", v[2],
       v[3], v[4], v[5]);
    /* an end without figures (a node lost, a Python worker's death) */
    t = task_new(d, 1, 0, false);
    id = t->id;
    pl_sched_run(d->sched, place_cb, d);
    pl_dtask_rank_running(d, t, 0, 0, NULL);
    struct pl_db_change none = { .exit_code = 0, .signal = 0,
                                 .maxrss_kb = -1 };
    ok(pl_dtask_rank_ended(d, t, 0, PL_ST_DONE, &none),
       "usage: a task with no figures ended");
    db_usage(d, id, v);
    ok(isnan(v[0]) && isnan(v[1]) && isnan(v[2]) && isnan(v[5]),
       "usage: ... its figures stay NULL (%g %g %g %g)", v[0], v[1], v[2],
       v[5]);
    /* an MPI task: its one entry is the launcher, whose reap is not
     * the ranks' CPU; the GPU figures stay */
    t = task_new(d, 1, 0, false);
    t->comm = PL_COMM_MPI;
    id = t->id;
    pl_sched_run(d->sched, place_cb, d);
    pl_dtask_rank_running(d, t, 0, 0, NULL);
    ok(pl_dtask_rank_ended(d, t, 0, PL_ST_DONE, &c0),
       "usage: an MPI task ended with its launcher's figures");
    db_usage(d, id, v);
    ok(isnan(v[0]) && isnan(v[1]) && v[2] == 80 && v[5] == 2048,
       "usage: ... no CPU kept for it (%g %g), its GPU's (%g%%) and peak "
       "RSS (%g kB) are", v[0], v[1], v[2], v[5]);
    daemon_drop(d);
}

int main(void)
{
    plan(26 + 9);
    if (!t_tmpdir("daemon-task", dir, sizeof(dir)))
        return 1;
    test_life();
    test_deps();
    test_links();
    test_run_again();
    test_usage();
    t_rmtree(dir);
    return done_testing();
}
