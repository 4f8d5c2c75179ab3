/* daemon/task.c - the only writer of task state and of the counters
 *
 * Every state change of a task and of its ranks goes through here: it
 * is recorded in the database (in the batch's transaction) and in the
 * counters status and counts read, in the same call.  A task's end
 * releases what waited for it (its dependents), or fails them after it.
 * The scheduler (daemon/sched.h) only places tasks and holds their
 * cores; it writes no state.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_private.h"
#include "daemon/metrics.h"
#include "daemon/pool.h"
#include "proto/log.h"
#include "proto/query.h"
#include "proto/strv.h"

/* Requeues of a pool task whose workers went down under it (by no doing
 * of its own, as far as its agent could tell): a task that kills its
 * worker without a word (SIGKILL, the OOM killer) looks the same, and
 * must not take the pool down for ever. */
#define POOL_LOSSES_MAX 3

uint32_t pl_dtask_launched(const struct pl_dtask *t)
{
    return t->comm == PL_COMM_MPI ? 1 : t->ranks;
}

static void count_move(struct pl_daemon *d, int from, int to)
{
    if (from > 0 && from < PL_ST_COUNT)
        d->count[from]--;
    if (to > 0 && to < PL_ST_COUNT)
        d->count[to]++;
}

void pl_dtask_counted(struct pl_daemon *d, struct pl_dtask *t)
{
    count_move(d, 0, t->state);
    d->total++;
    pl_metrics_task(d, t, 0, t->state, pl_now());
}

void pl_dtask_shape(struct pl_dtask *t, const struct pl_spec *s)
{
    t->ranks = s->ranks ? (uint32_t)s->ranks : 1;
    t->cores_per_rank = s->cpr ? (uint32_t)s->cpr : 1;
    t->gpus_per_rank = (uint32_t)s->gpr;
    t->nodes_req = (uint32_t)s->nodes;
    t->ranks_per_node = (uint32_t)s->rpn;
    t->exclusive = s->exclusive;
    t->vetted = (uint32_t)s->vetted;
    t->comm = s->comm;
    t->mpirun = s->launcher == PL_LAUNCHER_MPIRUN;
    t->retries = (uint32_t)s->retries;
    t->timeout = s->timeout;
    t->output_limit = s->output_limit;
}

/* Where 't' runs, for its task row: one node and its cores for a
 * single-rank task, the node list for a multi-rank one. */
static void where(const struct pl_dtask *t, char *node, size_t nlen,
                  char *cores, size_t clen, char *gpus, size_t glen)
{
    node[0] = cores[0] = gpus[0] = '\0';
    if (!t->rank)
        return;
    if (t->ranks == 1 && t->rank[0].node) {
        const struct pl_rank *k = &t->rank[0];
        size_t l = strlen(k->node->name);

        l = l < nlen ? l : nlen - 1;
        memcpy(node, k->node->name, l);
        node[l] = '\0';
        pl_node_cpu_str(k->node, k->core_idx, k->ncores, cores, clen);
        pl_node_gpu_str(k->node, k->gpu_idx, k->ngpus, gpus, glen);
    }
    else
        pl_sched_nodelist(t, node, nlen);
}

void pl_dtask_change(struct pl_daemon *d, struct pl_dtask *t, int state,
                     const struct pl_db_change *extra)
{
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1 };
    struct pl_error err;
    char node[1024], cores[1024], gpus[512];

    if (extra)
        c = *extra;
    assert(!pl_state_final(state) || c.end_seq);
    c.id = t->id;
    c.state = state;
    c.attempt = t->attempt;
    if (!c.time)
        c.time = pl_now();
    if (t->rank && !c.node) {
        where(t, node, sizeof(node), cores, sizeof(cores), gpus,
              sizeof(gpus));
        c.node = node[0] ? node : NULL;
        c.cores = cores[0] ? cores : NULL;
        c.gpus = gpus[0] ? gpus : NULL;
    }
    if (t->fn != PL_FN_POOL) /* a pool's job is counted nowhere */
        count_move(d, t->state, state);
    pl_metrics_task(d, t, t->state, state, c.time);
    t->state = state;
    /* N.B. a failed write is in the journal (or the task's submission
     * was undone): the store retries, nothing to undo here */
    if (pl_db_task_change(d->db, &c, &err) < 0)
        pl_log(LOG_ERR, "task %llu: %s", (unsigned long long)t->id, err.text);
}

/* An event of one rank of a multi-rank task (its own row in events). */
static void rank_event(struct pl_daemon *d, struct pl_dtask *t, uint32_t r,
                       int state, double time, const char *detail)
{
    const struct pl_rank *k = &t->rank[r];
    char cores[1024] = "", gpus[512] = "";
    struct pl_error err;

    if (t->ranks == 1)
        return; /* the task's own events say it all */
    if (k->node) {
        pl_node_cpu_str(k->node, k->core_idx, k->ncores, cores,
                        sizeof(cores));
        pl_node_gpu_str(k->node, k->gpu_idx, k->ngpus, gpus, sizeof(gpus));
    }
    struct pl_db_change c = {
        .id = t->id, .state = state, .attempt = t->attempt,
        .time = time ? time : pl_now(),
        .node = k->node ? k->node->name : NULL,
        .cores = cores[0] ? cores : NULL, .gpus = gpus[0] ? gpus : NULL,
        .reason = detail, .exit_code = -1, .signal = -1, .maxrss_kb = -1,
    };
    if (pl_db_rank_event(d->db, &c, r, &err) < 0)
        pl_log(LOG_ERR, "task %llu rank %u: %s", (unsigned long long)t->id,
               r, err.text);
}

void pl_dtask_placed(struct pl_daemon *d, struct pl_dtask *t)
{
    t->attempt++;
    t->pool_lost = false;
    for (uint32_t r = 0; r < t->ranks; r++)
        t->rank[r].state = PL_ST_ASSIGNED;
    if (t->fn == PL_FN_POOL && t->pool)
        pl_poolctl_placed(d, t);
    pl_dtask_change(d, t, PL_ST_ASSIGNED, NULL);
    for (uint32_t r = 0; r < t->ranks; r++)
        rank_event(d, t, r, PL_ST_ASSIGNED, 0, NULL);
}

/* Rank 'r' runs (an event at 'time' when 'record'); the task runs once
 * all its ranks do. */
static void rank_runs(struct pl_daemon *d, struct pl_dtask *t, uint32_t r,
                      bool record, double time, const struct pl_db_change *c)
{
    struct pl_rank *k = &t->rank[r];

    if (k->state != PL_ST_ASSIGNED)
        return;
    k->state = PL_ST_RUNNING;
    if (record)
        rank_event(d, t, r, PL_ST_RUNNING, time, NULL);
    if (++t->running == t->ranks && t->state == PL_ST_ASSIGNED)
        pl_dtask_change(d, t, PL_ST_RUNNING, c);
}

void pl_dtask_rank_running(struct pl_daemon *d, struct pl_dtask *t,
                           uint32_t r, double time,
                           const struct pl_db_change *c)
{
    rank_runs(d, t, r, true, time, c);
}

void pl_dtask_rank_adopted(struct pl_daemon *d, struct pl_dtask *t,
                           uint32_t r)
{
    rank_runs(d, t, r, false, 0, NULL);
}

/* ------------------------------------------------------------ ends */

/* The task a waiter entry names, if it is still that one and waits. */
static struct pl_dtask *waiter_get(struct pl_daemon *d, uint64_t id,
                                   uint64_t serial)
{
    struct pl_dtask *t = pl_sched_task_get(d->sched, id);

    return t && t->serial == serial && t->state == PL_ST_WAITING ? t : NULL;
}

/* A waiting task whose dependencies all ended well joins the queue. */
static void deps_met(struct pl_daemon *d, struct pl_dtask *t)
{
    pl_sched_requeue(d->sched, t, false);
    pl_dtask_change(d, t, PL_ST_QUEUED, NULL);
    d->want_sched = true;
}

/* 'dep' ended in 'state': its waiters go on, or fail after it. */
static void deps_release(struct pl_daemon *d, struct pl_dtask *dep, int state)
{
    struct pl_waiter *w = dep->waiters;
    uint32_t n = dep->nwaiters;

    dep->waiters = NULL;
    dep->nwaiters = dep->capwaiters = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct pl_dtask *t = waiter_get(d, w[i].id, w[i].serial);
        if (!t)
            continue; /* canceled meanwhile */
        if (state == PL_ST_DONE || w[i].any) {
            if (t->ndeps > 0 && --t->ndeps == 0)
                deps_met(d, t);
            continue;
        }
        if (pl_grow(&d->depfail, &d->capdepfail, d->ndepfail, 1,
                    sizeof(*d->depfail)) < 0) {
            pl_log(LOG_ERR, "task %llu: out of memory: it waits on",
                   (unsigned long long)t->id);
            continue;
        }
        d->depfail[d->ndepfail++] = (struct pl_depfail){ t->id, t->serial,
                                                         dep->id, state };
    }
    free(w);
}

/* Fail the waiters of failed dependencies, down the graph. */
static void deps_fail_all(struct pl_daemon *d)
{
    if (d->in_depfail)
        return; /* the outer call goes on with the list */
    d->in_depfail = true;
    while (d->ndepfail > 0) {
        struct pl_depfail f = d->depfail[--d->ndepfail];
        struct pl_dtask *t = waiter_get(d, f.id, f.serial);
        char why[96];
        if (!t)
            continue;
        snprintf(why, sizeof(why), "dependency: task %llu %s",
                 (unsigned long long)f.dep, pl_state_name(f.state));
        struct pl_db_change c = { .exit_code = -1, .signal = -1,
                                  .maxrss_kb = -1, .reason = why };
        pl_dtask_finish(d, t, PL_ST_FAILED, &c);
    }
    d->in_depfail = false;
}

void pl_dtask_finish(struct pl_daemon *d, struct pl_dtask *t, int state,
                     const struct pl_db_change *extra)
{
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1 };

    if (extra)
        c = *extra;
    /* the end's place in the sequence the watches push in, stored by the
     * statement that stores the final state (N.B. every final state comes
     * here: pl_dtask_change() asserts it) */
    c.end_seq = ++d->end_seq;
    if (!c.time)
        c.time = pl_now();
    c.state = state;
    pl_dtask_change(d, t, state, &c);
    pl_watch_ended(d, t, &c);
    pl_log(LOG_INFO, "task %llu: %s", (unsigned long long)t->id,
           pl_state_name(state));
    if (t->nwaiters)
        deps_release(d, t, state);
    pl_sched_task_remove(d->sched, t);
    d->want_sched = true;
    deps_fail_all(d);
}

void pl_dtask_end(struct pl_daemon *d, struct pl_dtask *t, int state,
                  const char *reason)
{
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = reason };

    pl_dtask_finish(d, t, state, &c);
}

void pl_dtask_requeue(struct pl_daemon *d, struct pl_dtask *t,
                      const char *reason, bool spare)
{
    char why[sizeof(t->reason)];
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = why };

    /* a copy: 'reason' may be t->reason, which the requeue clears */
    snprintf(why, sizeof(why), "%s", reason ? reason : "");
    if (!why[0])
        c.reason = NULL;
    if (spare)
        t->spared++;
    pl_sched_requeue(d->sched, t, true);
    pl_dtask_change(d, t, PL_ST_QUEUED, &c);
    d->want_sched = true;
}

/* Every rank of 't' has ended: end the task, or run it again when an
 * agent was lost under it and retries are left. */
/* What the ranks of 't' used, from their end events, into *u: CPU
 * seconds summed (over the ranks that reported them), GPU utilisation
 * and power averaged over the GPUs of the ranks that had samples, the
 * most memory any GPU held; and the largest peak RSS of a rank (-1:
 * none). */
static void ranks_usage(const struct pl_dtask *t, struct pl_usage *u,
                        int64_t *maxrss_kb)
{
    double ngu = 0, ngp = 0;

    *u = (struct pl_usage){ 0 };
    *maxrss_kb = -1;
    for (uint32_t r = 0; t->rank && r < t->ranks; r++) {
        const struct pl_rank *k = &t->rank[r];
        const struct pl_usage *v = &k->use;
        /* a rank's GPU figures are its GPUs' mean: weigh them so */
        double w = k->ngpus ? k->ngpus : 1;
        if (k->maxrss_kb > 0 && k->maxrss_kb > *maxrss_kb)
            *maxrss_kb = k->maxrss_kb;
        if (v->has & PL_USE_CPU) {
            u->cpu_user += v->cpu_user;
            u->cpu_sys += v->cpu_sys;
        }
        if (v->has & PL_USE_GPU_UTIL) {
            u->gpu_util += v->gpu_util * w;
            ngu += w;
        }
        if ((v->has & PL_USE_GPU_MEM) && v->gpu_mem_mb > u->gpu_mem_mb)
            u->gpu_mem_mb = v->gpu_mem_mb;
        if (v->has & PL_USE_GPU_POWER) {
            u->gpu_power_w += v->gpu_power_w * w;
            ngp += w;
        }
        u->has |= v->has;
    }
    if (ngu > 0)
        u->gpu_util /= ngu;
    if (ngp > 0)
        u->gpu_power_w /= ngp;
}

static void task_ended(struct pl_daemon *d, struct pl_dtask *t)
{
    struct pl_usage use;
    int64_t maxrss_kb;

    ranks_usage(t, &use, &maxrss_kb);
    /* an MPI task's one "rank" here is its launcher: with srun its
     * ranks are slurmstepd's children, with mpirun those on other nodes
     * are orted's, so its CPU is not the task's and no efficiency is
     * drawn from it (it read 1% for a busy 4-node prep) */
    if (t->comm == PL_COMM_MPI)
        use.has &= ~PL_USE_CPU;
    /* its end is its last rank's, as that rank's agent stamped it (a
     * task its agent started on the cores this one freed, before this
     * end reached us, started after it: not our time of reading it) */
    struct pl_db_change c = {
        .time = t->ended_at,
        .exit_code = t->exit_code, .signal = t->signal,
        .maxrss_kb = maxrss_kb, .reason = t->reason[0] ? t->reason : NULL,
        .use = use.has ? &use : NULL,
    };
    int st = t->fail ? t->fail : PL_ST_DONE;

    /* stopped by the drain, not by anyone's cancel: it runs again in the
     * next allocation (pilot up --resume), not charged to --retries */
    if (d->draining && !t->cancel && st == PL_ST_CANCELED) {
        pl_dtask_requeue(d, t, "interrupted by the walltime drain", true);
        return;
    }
    if (t->cancel && st != PL_ST_DONE) {
        st = PL_ST_CANCELED;
        if (!t->reason[0])
            c.reason = "canceled";
    }
    if (t->fn == PL_FN_POOL && t->pool
        && pl_poolctl_job_ended(d, t, st, c.reason))
        return; /* the pool restarts */
    if (t->lost && !t->cancel && t->attempt <= t->retries + t->spared) {
        pl_dtask_requeue(d, t, c.reason, false);
        return;
    }
    /* a pool task whose workers went down under it (a crash of another
     * task's, a node lost): again, not charged, a few times */
    if (t->pool_lost && !t->fail && !t->cancel) {
        if (++t->pool_losses <= POOL_LOSSES_MAX) {
            pl_dtask_requeue(d, t, "its pool's workers went down under it",
                             true);
            return;
        }
        st = PL_ST_FAILED;
        snprintf(t->reason, sizeof(t->reason), "its pool's workers went "
                 "down under it %u times", t->pool_losses);
        c.reason = t->reason;
    }
    if (st == PL_ST_DONE)
        c.exit_code = c.signal = 0;
    pl_dtask_finish(d, t, st, &c);
}

/* Rank 'r' ended in 'st'; 'lost': a pool task's, whose worker went down
 * by no doing of its own (no failure: the task runs again). */
static bool rank_end(struct pl_daemon *d, struct pl_dtask *t, uint32_t r,
                     int st, const struct pl_db_change *c, bool lost)
{
    struct pl_rank *k = &t->rank[r];

    if (pl_state_final(k->state))
        return false;
    rank_event(d, t, r, st, c->time, c->reason);
    k->state = st;
    if (c->time > t->ended_at)
        t->ended_at = c->time;
    if (c->use)
        k->use = *c->use;
    if (c->maxrss_kb > 0)
        k->maxrss_kb = c->maxrss_kb;
    pl_sched_rank_release(t, r);
    t->ended++;
    /* a worker died under a pool task (its crash, our kill, or lost):
     * the pool's MPI job cannot go on without it */
    if (t->pool && t->fn != PL_FN_POOL
        && t->pool_attempt == t->pool->attempt
        && (lost || c->signal > 0 || st == PL_ST_TIMEOUT
            || (st == PL_ST_CANCELED && t->cancel)))
        pl_poolctl_down(d, t->pool, c->reason ? c->reason : "a worker died");
    if (lost)
        t->pool_lost = true;
    else if (st != PL_ST_DONE && !t->fail) {
        t->fail = st;
        t->exit_code = c->exit_code;
        t->signal = c->signal;
        if (t->ranks > 1)
            snprintf(t->reason, sizeof(t->reason), "rank %u: %s", r,
                     c->reason ? c->reason : pl_state_name(st));
        else
            snprintf(t->reason, sizeof(t->reason), "%s",
                     c->reason ? c->reason : "");
        /* its other ranks cannot go on alone; a pool task's run on in
         * their workers (stopping them takes the pool down) */
        if (!t->pool || t->fn == PL_FN_POOL)
            pl_agents_kill_task(d, t);
    }
    else if (st == PL_ST_FAILED && t->pool && t->signal <= 0
             && c->exit_code > t->exit_code)
        t->exit_code = c->exit_code; /* a pool task's: the largest */
    if (t->ended < t->ranks)
        return false;
    task_ended(d, t);
    return true;
}

bool pl_dtask_rank_ended(struct pl_daemon *d, struct pl_dtask *t, uint32_t r,
                         int st, const struct pl_db_change *c)
{
    return rank_end(d, t, r, st, c, false);
}

bool pl_dtask_rank_lost(struct pl_daemon *d, struct pl_dtask *t, uint32_t r,
                        const struct pl_db_change *c)
{
    return rank_end(d, t, r, PL_ST_FAILED, c, true);
}

void pl_dtask_cancel(struct pl_daemon *d, struct pl_dtask *t)
{
    if (t->state == PL_ST_QUEUED || t->state == PL_ST_WAITING) {
        pl_sched_dequeue(d->sched, t);
        pl_dtask_end(d, t, PL_ST_CANCELED, "canceled by user");
    }
    else if (!t->cancel) {
        t->cancel = true;
        pl_agents_kill_task(d, t);
    }
}

void pl_dtask_forget(struct pl_daemon *d, uint64_t id)
{
    struct pl_dtask *t;

    pl_watch_forgot(d, id);
    t = pl_sched_task_get(d->sched, id);
    if (!t)
        return;
    count_move(d, t->state, 0);
    d->total--;
    pl_sched_task_remove(d->sched, t);
}

/* ------------------------------------------------------------ dependencies */

/* Task 'w' waits for 'dep' to end ('any' end). */
static int waiter_add(struct pl_dtask *dep, const struct pl_dtask *w,
                      bool any)
{
    if (dep->nwaiters == dep->capwaiters) {
        uint32_t ncap = dep->capwaiters ? dep->capwaiters * 2 : 4;
        struct pl_waiter *nw = realloc(dep->waiters, ncap * sizeof(*nw));
        if (!nw)
            return -1;
        dep->waiters = nw;
        dep->capwaiters = ncap;
    }
    dep->waiters[dep->nwaiters++] = (struct pl_waiter){ w->id, w->serial,
                                                        any };
    return 0;
}

/* One task 'id' in state 'st' that a task waits for ('any' end): live
 * (in pilotd's memory), or ended, well or not. */
static int dep_one(struct pl_daemon *d, struct pl_deps *dp, uint64_t id,
                   int st, bool any)
{
    if (pl_sched_task_get(d->sched, id)) {
        if (dp->nlive == dp->cap) {
            uint32_t ncap = dp->cap ? dp->cap * 2 : 8;
            uint64_t *nl = realloc(dp->live, ncap * sizeof(*nl));
            bool *na = nl ? realloc(dp->any, ncap * sizeof(*na)) : NULL;
            if (nl)
                dp->live = nl;
            if (!na)
                return -1;
            dp->any = na;
            dp->cap = ncap;
        }
        dp->live[dp->nlive] = id;
        dp->any[dp->nlive++] = any;
    }
    else if (st != PL_ST_DONE && !any && !dp->why[0])
        snprintf(dp->why, sizeof(dp->why), "dependency: task %llu %s",
                 (unsigned long long)id, pl_state_name(st));
    return 0;
}

struct member_arg {
    struct pl_daemon *d;
    struct pl_deps *dp;
    bool any;
};

static int member_cb(uint64_t id, int state, void *arg)
{
    struct member_arg *a = arg;

    return dep_one(a->d, a->dp, id, state, a->any);
}

int pl_deps_add(struct pl_daemon *d, struct pl_deps *dp, uint64_t id,
                bool any, bool one, bool must_exist, struct pl_error *errp)
{
    struct member_arg ma = { d, dp, any };
    long nm = one ? 0 : pl_db_array_members(d->db, id, member_cb, &ma, errp);
    int st = 1;

    if (nm < 0)
        return -1;
    if (nm == 0 && (st = pl_db_task_state(d->db, id, errp)) <= 0) {
        if (st < 0)
            return -1;
        if (must_exist) {
            errno = EINVAL;
            return pl_errprintf(errp, "after: no task %llu",
                                (unsigned long long)id);
        }
        /* it was, before a restart: a wait for done cannot be met */
        if (!any && !dp->why[0])
            snprintf(dp->why, sizeof(dp->why), "dependency: task %llu is "
                     "gone", (unsigned long long)id);
    }
    if (pl_grow(&dp->stored, &dp->capstored, dp->nstored, 1,
                sizeof(*dp->stored)) < 0) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    dp->stored[dp->nstored++] = (struct pl_db_dep){ id, any, one };
    if (nm > 0 || st == 0)
        return 0; /* an array's elements are in; a task gone */
    if (dep_one(d, dp, id, st, any) < 0) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    return 0;
}

int pl_deps_apply(struct pl_daemon *d, struct pl_dtask *t,
                  const struct pl_deps *dp)
{
    if (dp->why[0]) {
        pl_dtask_end(d, t, PL_ST_FAILED, dp->why);
        return 0;
    }
    if (dp->nlive == 0) {
        if (t->state == PL_ST_WAITING)
            deps_met(d, t);
        return 0;
    }
    /* 't' keeps the ids it waits for, each of them lists 't' among its
     * waiters */
    if (!(t->deps = malloc(dp->nlive * sizeof(*t->deps))))
        return -1;
    memcpy(t->deps, dp->live, dp->nlive * sizeof(*t->deps));
    t->ndeps = t->ndeps_live = dp->nlive;
    for (uint32_t i = 0; i < dp->nlive; i++)
        if (waiter_add(pl_sched_task_get(d->sched, dp->live[i]), t,
                       dp->any[i]) < 0)
            return -1;
    return 0;
}

void pl_deps_clear(struct pl_deps *dp)
{
    free(dp->live);
    free(dp->any);
    free(dp->stored);
    memset(dp, 0, sizeof(*dp));
}
