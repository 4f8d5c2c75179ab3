/* tests/fuzz/fuzz_agentseq.c - libFuzzer target: sequences of agent
 * messages, handled by pilotd's own code
 *
 * A pilotd of its parts (as tests/unit/test_daemon_task.c makes one: a
 * real SQLite state database in a temporary directory, the real
 * scheduler) with its agent socket, a ROUTER bound to an inproc
 * endpoint, and NAGENTS fake agents, DEALERs with routing ids of their
 * own.  Per input the daemon is made afresh with TASKS queued, then the
 * input is read as pieces [agent byte][length, 2 bytes LE][frame]: each
 * frame is sent by that agent's DEALER and taken by pl_agents_cb(), the
 * handler the loop calls for the socket (decode, register, events,
 * pull, got, then the batch's schedule, commit and sends), so register,
 * re-register, adopt, events and acknowledgements come in any order from
 * several agents.  What pilotd sends back is read and dropped.  After
 * each frame: each node's cores and running count agree with the live
 * tasks' ranks (no core counted twice, no count negative), and its
 * prefetched tasks with its list of them (pilotd --prefetch 2); after the
 * input: the counters equal what the database holds, and no task left a
 * final state.  A broken promise aborts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "daemon/daemon_private.h"
#include "daemon/node.h"
#include "proto/log.h"
#include "proto/query.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "tests/fuzz/check.h"

#define NAGENTS 3
#define MAX_PIECES 64
#define TASKS 7

static char dir[64];
static void *zctx, *router, *dealer[NAGENTS];

static void setup(void)
{
    static const char ep[] = "inproc://agentseq";
    int zero = 0;

    /* every bad frame would log a line; PL_FUZZ_LOG=7 shows them, to
     * follow a replay */
    pl_log_level = getenv("PL_FUZZ_LOG") ? atoi(getenv("PL_FUZZ_LOG")) : -1;
    /* N.B. tmpfs when there is one: a commit's fsync costs nothing */
    snprintf(dir, sizeof(dir), "%s/pl-fuzz-agentseq-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir) || !(zctx = zmq_ctx_new())
        || !(router = zmq_socket(zctx, ZMQ_ROUTER))
        || zmq_setsockopt(router, ZMQ_SNDHWM, &zero, sizeof(zero)) < 0
        || zmq_setsockopt(router, ZMQ_RCVHWM, &zero, sizeof(zero)) < 0
        || zmq_bind(router, ep) < 0)
        abort();
    for (int i = 0; i < NAGENTS; i++) {
        char rid[8];
        snprintf(rid, sizeof(rid), "agent%d", i);
        if (!(dealer[i] = zmq_socket(zctx, ZMQ_DEALER))
            || zmq_setsockopt(dealer[i], ZMQ_ROUTING_ID, rid, strlen(rid))
                   < 0
            || zmq_setsockopt(dealer[i], ZMQ_SNDHWM, &zero, sizeof(zero)) < 0
            || zmq_setsockopt(dealer[i], ZMQ_RCVHWM, &zero, sizeof(zero)) < 0
            || zmq_connect(dealer[i], ep) < 0)
            abort();
    }
}

/* Task 'id' queued as submit.c queues one: 'ranks' ranks of one core
 * ('mpi': one MPI job), after task 'after' (0: none).  With 'store',
 * its row is written (the template database), else it is taken as
 * stored and made live in the scheduler and the counters. */
static void task_add(struct pl_daemon *d, bool store, uint64_t id,
                     uint32_t ranks, bool mpi, uint64_t after,
                     uint32_t retries)
{
    char *argv[] = { (char *)"true", NULL };
    struct pl_spec s = { .argv = argv, .ranks = ranks, .cpr = 1,
                         .retries = retries,
                         .comm = mpi ? PL_COMM_MPI : PL_COMM_NONE };
    struct pl_deps dp = { 0 };
    struct pl_error e;
    uint64_t got;

    if (after && pl_deps_add(d, &dp, after, false, false, true, &e) < 0)
        abort();
    int state = dp.nlive || dp.why[0] ? PL_ST_WAITING : PL_ST_QUEUED;
    if (store) {
        struct pl_db_task row = { .spec = &s, .after = dp.stored,
                                  .nafter = (uint32_t)dp.nstored };
        if (pl_db_task_insert(d->db, &row, state, pl_now(), &got, &e) < 0
            || got != id)
            abort();
        pl_deps_clear(&dp);
        return;
    }
    char **av = pl_strv_dup(argv), **env = NULL, *cwd = NULL;
    struct pl_dtask *t = pl_sched_task_add(d->sched, id,
                                           state == PL_ST_QUEUED, 0, &av,
                                           &env, &cwd);
    if (!t)
        abort();
    t->state = state;
    pl_dtask_shape(t, &s);
    t->serial = ++d->serial;
    pl_dtask_counted(d, t);
    if (pl_deps_apply(d, t, &dp) < 0)
        abort();
    pl_deps_clear(&dp);
}

/* ids 1..TASKS: one rank, one rank, two ranks, an MPI job of three, one
 * after task 1, one with retries, one of four ranks */
static void tasks(struct pl_daemon *d, bool store)
{
    task_add(d, store, 1, 1, false, 0, 0);
    task_add(d, store, 2, 1, false, 0, 0);
    task_add(d, store, 3, 2, false, 0, 0);
    task_add(d, store, 4, 3, true, 0, 0);
    task_add(d, store, 5, 1, false, 1, 0);
    task_add(d, store, 6, 1, false, 0, 2);
    task_add(d, store, 7, 4, false, 0, 0);
}

/* The database with the tasks stored, made once ("template.db"), and
 * the one the daemon uses ("state.db"), opened once: each input starts
 * with the template's pages copied over it (SQLite's backup API).
 * Opening a database anew (its schema, its statements) took 10 ms, 80%
 * of an input. */
static sqlite3 *tmpl;
static struct pl_db *db;

static void db_path(char *buf, size_t len, const char *name,
                    const char *suffix)
{
    snprintf(buf, len, "%s/%s.db%s", dir, name, suffix);
}

static void db_clean(const char *name)
{
    static const char *const suffix[] = { "", "-wal", "-shm", "-journal" };
    char path[128];

    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        db_path(path, sizeof(path), name, suffix[i]);
        unlink(path);
    }
}

static void template(void)
{
    struct pl_daemon d = { 0 };
    struct pl_error e;
    char path[128];

    db_clean("template");
    db_clean("state");
    db_path(path, sizeof(path), "template", "");
    if (!(d.db = pl_db_open(path, &e)) || !(d.sched = pl_sched_new()))
        abort();
    tasks(&d, true);
    pl_sched_free(d.sched);
    if (pl_db_commit(d.db, &e) < 0)
        abort();
    pl_db_close(d.db);
    if (sqlite3_open_v2(path, &tmpl, SQLITE_OPEN_READONLY, NULL)
        != SQLITE_OK)
        abort();
    db_path(path, sizeof(path), "state", "");
    if (!(db = pl_db_open(path, &e)))
        abort();
}

static void cleanup(void)
{
    pl_db_close(db);
    sqlite3_close(tmpl);
    db_clean("template");
    db_clean("state");
    rmdir(dir);
}

static struct pl_daemon *daemon_make(void)
{
    struct pl_daemon *d = calloc(1, sizeof(*d));
    sqlite3_backup *b;

    if (!d)
        abort();
    if (pl_db_in_txn(db))
        pl_db_rollback(db);
    if (!(b = sqlite3_backup_init(pl_db_handle(db), "main", tmpl, "main"))
        || sqlite3_backup_step(b, -1) != SQLITE_DONE
        || sqlite3_backup_finish(b) != SQLITE_OK)
        abort();
    d->db = db;
    d->outtail = &d->outq;
    d->asock = router;
    d->cfg.heartbeat = 2;
    d->cfg.lost_after = 1e9;
    d->cfg.expected_agents = 2;
    d->cfg.ack_nosync = true;
    snprintf(d->instance, sizeof(d->instance), "fuzz");
    if (!(d->sched = pl_sched_new()))
        abort();
    /* tasks held beyond the free cores too (daemon/prefetch.c) */
    pl_sched_set_prefetch(d->sched, 2);
    tasks(d, false);
    d->want_sched = true;
    return d;
}

static void daemon_drop(struct pl_daemon *d)
{
    pl_outq_free(d);
    pl_agents_free(d);
    pl_orders_free_all(d);
    pl_sched_free(d->sched);
    free(d->unsent);
    free(d->depfail);
    free(d);
}

/* What pilotd sent the fake agents: read and dropped. */
static void drain(void)
{
    char buf[64];

    for (int i = 0; i < NAGENTS; i++)
        while (zmq_recv(dealer[i], buf, sizeof(buf), ZMQ_DONTWAIT) >= 0)
            ;
}

/* ---- the promises ---- */

struct held {
    const struct pl_node *n;
    uint32_t ranks, cores, pref;
};

static void count_cb(struct pl_dtask *t, void *arg)
{
    struct held *h = arg;

    for (uint32_t r = 0; t->rank && r < t->ranks; r++) {
        const struct pl_rank *k = &t->rank[r];
        if (k->node != h->n || pl_state_final(k->state))
            continue;
        /* a prefetched rank holds nothing, and is on its node's list */
        if (k->pref) {
            const struct pl_dtask *u;
            bool listed = false;
            CHECK(k->ncores == 0 && r == 0 && t->ranks == 1);
            TAILQ_FOREACH(u, &h->n->pref, prefent)
                listed = listed || u == t;
            CHECK(listed);
            h->pref++;
            continue;
        }
        h->ranks++;
        h->cores += k->ncores;
        /* each of its cores is held by it, and by nothing else */
        for (uint32_t c = 0; c < k->ncores; c++)
            CHECK(k->core_idx[c] < h->n->ncores
                  && h->n->core_task[k->core_idx[c]] == t->id);
    }
}

static void check_nodes(struct pl_daemon *d)
{
    for (size_t i = 0; i < pl_sched_nnodes(d->sched); i++) {
        struct pl_node *n = pl_sched_node_at(d->sched, i);
        struct held h = { .n = n };
        uint32_t busy = 0;
        CHECK(n->free_cores <= n->ncores && n->free_gpus <= n->ngpus);
        for (uint32_t c = 0; c < n->ncores; c++)
            if (n->core_task[c]) {
                busy++;
                CHECK(pl_sched_task_get(d->sched, n->core_task[c]));
            }
        CHECK(busy == n->ncores - n->free_cores);
        pl_sched_node_tasks(d->sched, n, count_cb, &h);
        CHECK(h.cores == busy);
        CHECK(h.ranks == n->running);
        CHECK(h.pref == n->npref);
    }
}

/* A final state, once stored, is the task's for good; attempts only
 * grow. */
static int seen[TASKS + 1];
static uint32_t attempts[TASKS + 1];

static void check_states(struct pl_daemon *d)
{
    struct pl_error e;

    for (uint64_t id = 1; id <= TASKS; id++) {
        int st = pl_db_task_state(d->db, id, &e);
        CHECK(st > 0);
        if (seen[id] && pl_state_final(seen[id]))
            CHECK(st == seen[id]);
        seen[id] = st;
        struct pl_dtask *t = pl_sched_task_get(d->sched, id);
        /* live in the scheduler exactly while not final */
        CHECK(!t == pl_state_final(st));
        if (t) {
            CHECK(t->state == st && t->attempt >= attempts[id]);
            attempts[id] = t->attempt;
            /* a running task is placed; its ranks started and ended
             * are within its ranks */
            if (st == PL_ST_RUNNING)
                CHECK(t->rank && t->running <= t->ranks
                      && t->ended <= t->ranks);
        }
    }
}

static void check_counts(struct pl_daemon *d)
{
    struct pl_error e;
    json_t *c = pl_query_counts(pl_db_handle(d->db), NULL, 0, &e);
    long long sum = 0;

    CHECK(c);
    for (int s = 1; s < PL_ST_COUNT; s++) {
        CHECK(d->count[s] >= 0);
        CHECK(json_integer_value(json_object_get(c, pl_state_name(s)))
              == d->count[s]);
        sum += d->count[s];
    }
    CHECK(json_integer_value(json_object_get(c, "total")) == d->total
          && sum == d->total);
    json_decref(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    struct pl_daemon *d;
    zmq_pollitem_t pi;
    int pieces = 0;

    if (!ready) {
        setup();
        template();
        atexit(cleanup);
        ready = true;
    }
    d = daemon_make();
    memset(seen, 0, sizeof(seen));
    memset(attempts, 0, sizeof(attempts));
    pl_daemon_flush(d); /* the first placement, before any agent */
    drain();
    check_states(d);
    while (size >= 3 && pieces++ < MAX_PIECES) {
        int a = data[0] % NAGENTS;
        size_t len = (size_t)data[1] | (size_t)data[2] << 8;
        data += 3;
        size -= 3;
        if (len > size)
            len = size;
        if (zmq_send(dealer[a], data, len, 0) < 0)
            abort();
        data += len;
        size -= len;
        /* N.B. inproc: sent is not yet readable; wait for it */
        pi = (zmq_pollitem_t){ .socket = router, .events = ZMQ_POLLIN };
        if (zmq_poll(&pi, 1, 5000) != 1)
            abort();
        pl_agents_cb(NULL, 0, d);
        drain();
        check_nodes(d);
        check_states(d);
    }
    check_counts(d);
    daemon_drop(d);
    return 0;
}
