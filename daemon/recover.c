/* daemon/recover.c - a pilotd started on an existing state: the queue
 * rebuilt, and the tasks its predecessor's agents still run taken back
 *
 * In the same Slurm job as the pilotd before (it crashed, or was
 * killed), the agents of that one still run their tasks and will come
 * back: until they do (or a few heartbeats pass) the tasks the database
 * says are on agents are 'orphans' holding their placement, adopted as
 * their agent registers with what it runs.  In a new job (--resume),
 * those tasks go back to the queue.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_private.h"
#include "daemon/pool.h"
#include "daemon/queue.h"
#include "daemon/slurmjob.h"
#include "proto/log.h"
#include "proto/query.h"
#include "proto/strv.h"

/* a restarted pilotd waits this many agent heartbeats for the agents */
#define RECOVER_HEARTBEATS 5
/* rows of a run rebuilt from the database read back at once, as its
 * elements reach the head of the queue */
#define FILL_BATCH 256

static void orphan_place_cb(uint32_t rank, const char *node,
                            const char *cores, const char *gpus, void *arg)
{
    struct pl_dtask *t = arg;
    struct pl_rank *k = &t->rank[rank];

    if (k->orphan)
        return;
    if (asprintf(&k->orphan, "%s\t%s\t%s", node, cores ? cores : "",
                 gpus ? gpus : "") < 0)
        k->orphan = NULL;
    else
        t->orphans++;
}

/* 't', assigned or running when the pilotd before us died: it stays so,
 * its ranks 'orphans' where the database put them, until their agents
 * report (pl_recover_adopt()) or the recovery ends.  Returns -1 if its
 * placement is not known: then it is requeued. */
static int orphan_load(struct pl_daemon *d, struct pl_dtask *t)
{
    struct pl_error err;

    if (!(t->rank = calloc(t->ranks, sizeof(*t->rank))))
        return -1;
    for (uint32_t r = 0; r < t->ranks; r++)
        t->rank[r].state = PL_ST_ASSIGNED;
    if (pl_db_placement(d->db, t->id, t->attempt, t->ranks, orphan_place_cb,
                        t, &err) < 0)
        pl_log(LOG_ERR, "task %llu: %s", (unsigned long long)t->id,
               err.text);
    if (t->orphans != t->ranks) {
        pl_log(LOG_WARNING, "task %llu: placement of %u of its %u ranks "
               "unknown: requeued", (unsigned long long)t->id,
               t->ranks - t->orphans, t->ranks);
        for (uint32_t r = 0; r < t->ranks; r++)
            free(t->rank[r].orphan);
        free(t->rank);
        t->rank = NULL;
        t->orphans = 0;
        return -1;
    }
    return 0;
}

/* A waiting task from the database: its dependencies are loaded before
 * it (smaller ids); it waits for those still live, fails if one failed,
 * is queued if none is left. */
static int load_waiting(struct pl_daemon *d, struct pl_dtask *t,
                        const struct pl_db_row *row)
{
    struct pl_deps dp = { 0 };
    struct pl_error err;
    int rc = -1;

    for (uint32_t i = 0; i < row->nafter; i++)
        if (pl_deps_add(d, &dp, row->after[i].id, row->after[i].any,
                        row->after[i].one, false, &err) < 0) {
            pl_log(LOG_ERR, "task %llu: %s", (unsigned long long)t->id,
                   err.text);
            goto done;
        }
    rc = pl_deps_apply(d, t, &dp);
done:
    pl_deps_clear(&dp);
    return rc;
}

/* One live task of the database into the queue: tasks that were on
 * agents of an earlier pilotd go back to the queue, unless their agents
 * may come back (orphans). */
static int load_cb(struct pl_db_row *row, void *arg)
{
    struct pl_daemon *d = arg;
    struct pl_spec *s = &row->spec;
    bool orphan = d->recovering && (row->state == PL_ST_ASSIGNED
                                    || row->state == PL_ST_RUNNING);
    bool waits = row->state == PL_ST_WAITING;
    struct pl_dtask *t;

    if (!(t = pl_sched_task_add(d->sched, row->id, !orphan && !waits,
                                (int32_t)s->priority, &s->argv, &s->env,
                                &s->cwd)))
        return -1;
    pl_dtask_shape(t, s);
    t->serial = ++d->serial;
    t->array_id = row->array_id;
    t->array_index = row->array_index;
    t->attempt = row->attempts;
    t->state = row->state;
    if (s->fn == PL_FN_PYCALL) {
        t->fn = s->fn; /* its input is read at dispatch */
        t->nrefs = (uint8_t)row->nrefs;
    }
    if (s->pool) {
        /* a pool restarts with its pilotd: its job and its tasks go back
         * to their queues (a running one's worker is killed as a stray
         * when its agent registers) */
        t->fn = s->fn;
        if (!pl_poolctl_adopt(d, t, s->pool)) {
            pl_sched_dequeue(d->sched, t);
            pl_dtask_end(d, t, s->fn == PL_FN_POOL ? PL_ST_CANCELED
                                                    : PL_ST_FAILED,
                         "its pool is gone (pilot pool start it again, "
                         "and submit again)");
            return 0;
        }
        /* its job is an MPI task as any: taken back if its agents are;
         * a task that ran in the workers runs again */
        if (s->fn != PL_FN_POOL) {
            pl_sched_dequeue(d->sched, t); /* the pool's queue, not ours */
            if (orphan && !t->inpq)
                pl_sched_requeue(d->sched, t, false);
            else if (!waits)
                pl_pool_enqueue(t->pool, t, false);
            orphan = false;
        }
    }
    if (waits)
        return load_waiting(d, t, row);
    if (orphan) {
        if (orphan_load(d, t) == 0)
            return 0;
        pl_sched_requeue(d->sched, t, false);
    }
    if (row->state != PL_ST_QUEUED) {
        struct pl_db_change c = { .exit_code = -1, .signal = -1,
                                  .maxrss_kb = -1,
                                  .reason = "requeued at pilot start" };
        pl_dtask_change(d, t, PL_ST_QUEUED, &c);
    }
    return 0;
}

/* ------------------------------------------------------------ runs */

/* The queued tasks of the database are read back as compact runs
 * (daemon/queue.h) from the index alone: a restart with millions queued
 * reads their ids, not their rows.  A run's element is filled from its
 * row when it leaves the run, FILL_BATCH rows at a time. */
struct fill {
    struct pl_daemon *d;
    uint64_t lo;                    /* id of ent[0] */
    struct pl_dtask ent[FILL_BATCH]; /* id 0: no row loaded */
};

static void fill_clear(struct fill *f)
{
    for (size_t i = 0; i < FILL_BATCH; i++) {
        pl_strv_free(f->ent[i].argv);
        pl_strv_free(f->ent[i].env);
        free(f->ent[i].cwd);
        memset(&f->ent[i], 0, sizeof(f->ent[i]));
    }
}

static void fill_free(void *arg)
{
    fill_clear(arg);
    free(arg);
}

static int fill_row_cb(struct pl_db_row *row, void *arg)
{
    struct fill *f = arg;
    struct pl_spec *s = &row->spec;
    struct pl_dtask *e;

    if (row->id < f->lo || row->id - f->lo >= FILL_BATCH)
        return 0;
    e = &f->ent[row->id - f->lo];
    pl_dtask_shape(e, s);
    e->id = row->id;
    e->attempt = row->attempts;
    e->array_id = row->array_id;
    e->array_index = row->array_index;
    e->argv = s->argv;
    e->env = s->env;
    e->cwd = s->cwd;
    s->argv = s->env = NULL;
    s->cwd = NULL;
    return 0;
}

/* pl_sched_fill_f: element 't' of a run from its row. */
static int fill_cb(struct pl_dtask *t, void *arg)
{
    struct fill *f = arg;
    struct pl_error err;
    struct pl_dtask *e;

    if (t->id < f->lo || t->id - f->lo >= FILL_BATCH
        || !f->ent[t->id - f->lo].id) {
        fill_clear(f);
        f->lo = t->id;
        if (pl_db_load_range(f->d->db, t->id, t->id + FILL_BATCH - 1,
                             fill_row_cb, f, &err) < 0) {
            pl_log(LOG_ERR, "task %llu: %s", (unsigned long long)t->id,
                   err.text);
            errno = EIO;
            return -1;
        }
        if (!f->ent[0].id) {
            /* its command could not be read (logged): left as it is */
            errno = ENOENT;
            return -1;
        }
    }
    e = &f->ent[t->id - f->lo];
    t->argv = e->argv;
    t->env = e->env;
    t->cwd = e->cwd;
    t->ranks = e->ranks;
    t->cores_per_rank = e->cores_per_rank;
    t->gpus_per_rank = e->gpus_per_rank;
    t->nodes_req = e->nodes_req;
    t->ranks_per_node = e->ranks_per_node;
    t->exclusive = e->exclusive;
    t->vetted = e->vetted;
    t->comm = e->comm;
    t->mpirun = e->mpirun;
    t->retries = e->retries;
    t->timeout = e->timeout;
    t->output_limit = e->output_limit;
    t->attempt = e->attempt;
    t->array_id = e->array_id;
    t->array_index = e->array_index;
    memset(e, 0, sizeof(*e)); /* its strings are the task's now */
    return 0;
}

struct scan {
    struct pl_daemon *d;
    uint64_t *skip;             /* queued ids that are not in runs */
    size_t nskip, at;
    int64_t prio;
    uint64_t id0, n;            /* the run being read */
    uint64_t seen;              /* queued ids read, and those queued
                                   after the scan (waiting no more) */
};

/* load_cb() after the scan: a waiting task whose dependencies all ended
 * is queued now, and counted. */
static int load_after_cb(struct pl_db_row *row, void *arg)
{
    struct scan *sc = arg;
    uint64_t id = row->id;
    bool waited = row->state == PL_ST_WAITING;

    /* a call an older pilotd had placed was requeued by the first pass
     * (its row says queued now): it is live, and counted by the scan */
    if (pl_sched_task_peek(sc->d->sched, id))
        return 0;
    if (load_cb(row, sc->d) < 0)
        return -1;
    const struct pl_dtask *t = pl_sched_task_peek(sc->d->sched, id);
    if (waited && t && t->state == PL_ST_QUEUED)
        sc->seen++;
    return 0;
}

static int scan_flush(struct scan *sc)
{
    char **argv = NULL, **env = NULL, *cwd = NULL;
    struct pl_dtask *p;

    if (!sc->n)
        return 0;
    if (!(p = pl_sched_run_add(sc->d->sched, sc->id0, sc->n, 0, 0,
                               (int32_t)sc->prio, &argv, &env, &cwd)))
        return -1;
    p->serial = sc->d->serial + 1;
    sc->d->serial += sc->n;
    sc->n = 0;
    return 0;
}

static int scan_cb(int64_t prio, uint64_t id, void *arg)
{
    struct scan *sc = arg;
    bool skip = false;

    sc->seen++;
    /* 'skip' is sorted, and so are the ids; a task requeued by this load
     * (an older pilotd had placed it) is live already */
    while (sc->at < sc->nskip && sc->skip[sc->at] < id)
        sc->at++;
    skip = (sc->at < sc->nskip && sc->skip[sc->at] == id)
           || pl_sched_task_peek(sc->d->sched, id);
    if (sc->n && (prio != sc->prio || id != sc->id0 + sc->n || skip)
        && scan_flush(sc) < 0)
        return -1;
    if (skip)
        return 0;
    if (!sc->n) {
        sc->prio = prio;
        sc->id0 = id;
    }
    sc->n++;
    return 0;
}

/* The live tasks with the plain queued ones as runs (load_order()).
 * *done false: the database has pools, and nothing was loaded. */
static int load_runs(struct pl_daemon *d, bool *done, uint64_t *queued,
                     struct pl_error *errp)
{
    sqlite3 *h = pl_db_handle(d->db);
    sqlite3_stmt *st = NULL;
    struct scan sc = { .d = d };
    struct fill *f = NULL;
    size_t cap = 0;
    int rc;

    *done = false;
    if (sqlite3_prepare_v2(h, "SELECT 1 FROM tasks WHERE fn = 'pool' LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        goto dberr;
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW)
        return 0;
    /* calls (fn) need their inputs at dispatch: loaded one by one */
    if (sqlite3_prepare_v2(h, "SELECT id FROM tasks INDEXED BY tasks_fn WHERE "
                           "fn IS NOT NULL AND state = 'queued' ORDER BY id",
                           -1, &st, NULL)
        != SQLITE_OK)
        goto dberr;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (pl_grow(&sc.skip, &cap, sc.nskip, 1, sizeof(*sc.skip)) < 0) {
            sqlite3_finalize(st);
            goto nomem;
        }
        sc.skip[sc.nskip++] = (uint64_t)sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        goto dberr;
    if (!(f = calloc(1, sizeof(*f))))
        goto nomem;
    f->d = d;
    pl_sched_set_fill(d->sched, fill_cb, f, fill_free);
    *done = true;
    if (pl_db_load_unqueued(d->db, true, load_cb, d, errp) < 0
        || pl_db_queue_scan(d->db, scan_cb, &sc, errp) < 0
        || scan_flush(&sc) < 0
        || pl_db_load_unqueued(d->db, false, load_after_cb, &sc, errp)
               < 0) {
        free(sc.skip);
        return -1;
    }
    free(sc.skip);
    *queued = sc.seen;
    return 0;
dberr:
    free(sc.skip);
    return pl_errprintf(errp, "rebuild the queue: %s", sqlite3_errmsg(h));
nomem:
    free(sc.skip);
    return pl_errprintf(errp, "cannot rebuild the queue: out of memory");
}

/* The live tasks of the database, in the order of their ids as far as
 * the queue goes: those an older pilotd had placed (requeued, unless
 * orphans) before the runs of the queued, then the queued calls and the
 * waiting.  A database with pools: row by row, in id order. */
static int load_order(struct pl_daemon *d, bool *runs, uint64_t *queued,
                      struct pl_error *errp)
{
    if (load_runs(d, runs, queued, errp) < 0)
        return -1;
    if (!*runs)
        return pl_db_load_live(d->db, load_cb, d, errp);
    return 0;
}

/* The counters from the database (what was loaded moved them already:
 * this sets them right).  With 'queued' known (the scan of the runs read
 * every queued id), each other state is counted on its own: a queue of
 * millions is not read a second time. */
static int init_counts(struct pl_daemon *d, bool runs, uint64_t queued,
                       struct pl_error *errp)
{
    sqlite3 *h = pl_db_handle(d->db);
    sqlite3_stmt *st = NULL;
    json_t *c;

    if (!runs) {
        if (!(c = pl_query_counts(h, NULL, 0, errp)))
            return -1;
        for (int s = 1; s < PL_ST_COUNT; s++)
            d->count[s] = json_integer_value(
                json_object_get(c, pl_state_name(s)));
        d->total = json_integer_value(json_object_get(c, "total"));
        json_decref(c);
        return 0;
    }
    /* no pools (load_runs()): no pool's job to leave out */
    if (sqlite3_prepare_v2(h, "SELECT count(*) FROM tasks WHERE state = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return pl_errprintf(errp, "count tasks: %s", sqlite3_errmsg(h));
    d->total = 0;
    for (int s = 1; s < PL_ST_COUNT; s++) {
        if (s == PL_ST_QUEUED) {
            d->count[s] = (int64_t)queued;
            d->total += d->count[s];
            continue;
        }
        sqlite3_bind_text(st, 1, pl_state_name(s), -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_ROW) {
            pl_errprintf(errp, "count tasks: %s", sqlite3_errmsg(h));
            sqlite3_finalize(st);
            return -1;
        }
        d->count[s] = sqlite3_column_int64(st, 0);
        d->total += d->count[s];
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return 0;
}

int pl_recover_load(struct pl_daemon *d, struct pl_error *errp)
{
    const struct pl_daemon_config *cfg = &d->cfg;
    struct pl_endpoint ep = { 0 };
    char jobstr[32], *job = NULL;
    bool runs = false;
    uint64_t queued = 0;

    /* the same Slurm job as the pilotd before us: its agents may still
     * run its tasks (a pilotd restarted after a crash) */
    snprintf(jobstr, sizeof(jobstr), "%ld", cfg->job);
    if (pl_db_meta_get(d->db, "job", &job, errp) < 0)
        return -1;
    d->recovering = !cfg->local && cfg->job > 0 && job && !strcmp(job, jobstr);
    free(job);
    if (d->recovering) {
        d->recover_until = pl_mono() + RECOVER_HEARTBEATS * cfg->heartbeat;
        d->agents_deferred = true;
        /* where the agents look for us: the same ports, if still free */
        if (pl_endpoint_read(d->dir, &ep, NULL) == 0) {
            snprintf(d->cep, sizeof(d->cep), "%s", ep.client);
            snprintf(d->aep, sizeof(d->aep), "%s", ep.agent);
        }
        pl_log(LOG_NOTICE, "restarted in job %ld: waiting up to %.0f s for "
               "the agents of the pilotd before", cfg->job,
               RECOVER_HEARTBEATS * cfg->heartbeat);
    }
    /* the end sequence goes on from the last stored (before any task is
     * loaded: a load may end one) */
    if (pl_db_max_end_seq(d->db, &d->end_seq, errp) < 0)
        return -1;
    d->end_seq_stored = d->end_seq;
    if (pl_db_meta_set(d->db, "pilot", d->id, errp) < 0
        || pl_db_meta_set(d->db, "job", jobstr, errp) < 0
        || pl_poolctl_load(d, errp) < 0
        || load_order(d, &runs, &queued, errp) < 0
        || pl_poolctl_loaded(d, errp) < 0
        || pl_db_commit(d->db, errp) < 0
        || init_counts(d, runs, queued, errp) < 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------ adoption */

struct adopt {
    struct pl_daemon *d;
    struct pl_node *n;
    const struct pl_register *reg;
};

/* Rank 'r' of 't' is where the database says, on the agent of a->n that
 * just registered: take it back as it reports it.  Returns true when
 * that ended the task (it may be freed). */
static bool adopt_rank(struct adopt *a, struct pl_dtask *t, uint32_t r)
{
    struct pl_rank *k = &t->rank[r];

    free(k->orphan);
    k->orphan = NULL;
    t->orphans--;
    bool runs = pl_register_runs(a->reg, t->id, t->attempt, r);
    bool ended = pl_register_ended(a->reg, t->id, t->attempt, r);
    /* an MPI job's ranks past 0 live and die with rank 0's launcher */
    bool follows = t->comm == PL_COMM_MPI && r > 0;
    k->node = a->n;
    if (!runs && !ended && !follows) {
        /* never got there (its RUN left with the old pilotd), or its
         * agent is a new one: it runs again, not charged to --retries */
        struct pl_db_change c = { .exit_code = -1, .signal = -1,
                                  .maxrss_kb = -1,
                                  .reason = "not on its agent after pilotd "
                                            "restarted" };
        t->lost = true;
        t->spared++;
        return pl_dtask_rank_ended(a->d, t, r, PL_ST_FAILED, &c);
    }
    if (runs)
        pl_dtask_rank_adopted(a->d, t, r);
    return false;
}

static void adopt_cb(struct pl_dtask *t, void *arg)
{
    struct adopt *a = arg;
    size_t len = strlen(a->n->name);

    for (uint32_t r = 0; t->rank && r < t->ranks && t->orphans; r++) {
        struct pl_rank *k = &t->rank[r];
        if (!k->orphan || strncmp(k->orphan, a->n->name, len)
            || k->orphan[len] != '\t')
            continue;
        /* its cores and GPUs first: they are held until it ends */
        char *cpus = k->orphan + len + 1;
        char *tab = strchr(cpus, '\t');
        char *gpus = tab ? tab + 1 : NULL;
        if (tab)
            *tab = '\0';
        free(k->core_idx);
        free(k->gpu_idx);
        k->core_idx = k->gpu_idx = NULL;
        k->ncores = k->ngpus = 0;
        if (pl_node_claim(a->n, t->id, cpus, gpus && *gpus ? gpus : NULL,
                          &k->core_idx, &k->ncores, &k->gpu_idx, &k->ngpus)
            < 0)
            pl_log(LOG_ERR, "task %llu rank %u: out of memory",
                   (unsigned long long)t->id, r);
        if (adopt_rank(a, t, r))
            return; /* the task ended and may be gone */
    }
    /* a pool's job taken back whole: its workers are the slots again */
    if (t->fn == PL_FN_POOL && t->pool && t->rank && !t->orphans)
        pl_poolctl_placed(a->d, t);
}

/* Every orphan task visits 'cb' (which may remove it). */
static void each_orphan(struct pl_daemon *d,
                        void (*cb)(struct pl_dtask *t, void *arg), void *arg)
{
    for (uint64_t id = 1; id <= pl_sched_max_id(d->sched); id++) {
        struct pl_dtask *t = pl_sched_task_peek(d->sched, id);
        if (t && t->orphans)
            cb(t, arg);
    }
}

void pl_recover_adopt(struct pl_daemon *d, struct pl_node *n,
                      const struct pl_register *reg)
{
    struct adopt a = { d, n, reg };

    /* N.B. a walk of every task id: only while there are orphans, not
     * at every registration of a pilot's life (issue 16: 1,000 agents,
     * 10 million tasks); pl_recover_end() ended them all */
    if (!d->recovering)
        return;
    each_orphan(d, adopt_cb, &a);
}

/* Ranks whose agents did not come back are lost. */
static void lost_orphan_cb(struct pl_dtask *t, void *arg)
{
    struct pl_daemon *d = arg;
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = "node-lost" };

    t->lost = true;
    for (uint32_t r = 0; t->rank && r < t->ranks; r++) {
        struct pl_rank *k = &t->rank[r];
        if (!k->orphan)
            continue;
        free(k->orphan);
        k->orphan = NULL;
        t->orphans--;
        if (pl_dtask_rank_ended(d, t, r, PL_ST_FAILED, &c))
            return; /* the task ended and may be gone */
    }
}

void pl_recover_end(struct pl_daemon *d)
{
    struct pl_error err;
    size_t n = 0;

    for (uint64_t id = 1; id <= pl_sched_max_id(d->sched); id++) {
        struct pl_dtask *t = pl_sched_task_peek(d->sched, id);
        n += t && t->orphans;
    }
    d->recovering = false;
    pl_log(LOG_NOTICE, "recovery over: %zu agents back, %zu tasks lost with "
           "agents that did not return", pl_sched_nnodes(d->sched), n);
    each_orphan(d, lost_orphan_cb, d);
    if (!d->agents_deferred)
        return;
    d->agents_deferred = false;
    /* agents where none came back: this allocation's nodes but theirs */
    char missing[4096] = "";
    int count = 0;
    size_t off = 0;
    const char *nl = getenv("SLURM_JOB_NODELIST");
    char **hosts = nl ? pl_slurmjob_hostlist_expand(nl, &err) : NULL;
    for (char **h = hosts; h && *h; h++) {
        if (pl_sched_node_find(d->sched, *h))
            continue;
        int w = snprintf(missing + off, sizeof(missing) - off, "%s%s",
                         off ? "," : "", *h);
        if (w < 0 || (size_t)w >= sizeof(missing) - off)
            break;
        off += (size_t)w;
        count++;
    }
    pl_strv_free(hosts);
    if (count > 0) {
        pl_log(LOG_NOTICE, "starting agents on %s (%d nodes)", missing,
               count);
        if (pl_launch_agents(d, missing, count, &err) < 0)
            pl_log(LOG_ERR, "start agents: %s", err.text);
    }
}
