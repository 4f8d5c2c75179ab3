/* agent/run.c - the agent's tasks: from a RUN entry to a process, to its end
 *
 * Each entry of a RUN is one rank of a task (a task is known by id,
 * attempt and rank, and several ranks of one task may run here).  An
 * entry claims its cores and GPUs, gets its environment and binding
 * (for an MPI task, the launcher takes its place: agent/mpi.h) and
 * becomes a pl_task, which spawns the process; the task sits in
 * 'running' until it exits, then in 'dead' until the flush timer frees
 * it.  Whatever goes wrong, an entry with a valid id gets an event.  KILL
 * stops the ranks of an attempt.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent_private.h"
#include "agent/pool.h"
#include "agent/pyw.h"
#include "agent/comm.h"
#include "agent/env.h"
#include "agent/mpi.h"
#include "agent/prefetch.h"
#include "proto/log.h"
#include "proto/run.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/strv.h"

/* ---- events ---- */

/* A failure of a task that never ran. */
static void event_failed(struct pl_agent *a, const struct pl_run *r,
                         const char *error)
{
    struct pl_event *e = pl_agent_event_add(a, r->id, r->attempt, r->rank,
                                            PL_ST_FAILED);

    if (e)
        e->error = strdup(error);
}

/* The event for 't' in its current state. */
static void event_task(struct pl_agent *a, const struct pl_task *t)
{
    const struct pl_run *r = pl_task_entry(t);
    struct pl_event *e = pl_agent_event_add(a, r->id, r->attempt, r->rank,
                                            pl_task_state(t));

    if (!e)
        return;
    if (pl_task_running(t)) {
        e->pid = pl_task_pid(t);
        /* started from the prefetched ones: pilotd learns its cores */
        if (r->prefetch && (e->cores = malloc(r->ncores * sizeof(*e->cores)))) {
            memcpy(e->cores, r->cores, r->ncores * sizeof(*e->cores));
            e->ncores = r->ncores;
        }
        return;
    }
    e->exit_code = pl_task_exit_code(t);
    if (pl_task_pid(t) > 0)
        e->signal = pl_task_signal(t);
    e->maxrss_kb = pl_task_maxrss_kb(t);
    if (pl_task_cpu(t, &e->use.cpu_user, &e->use.cpu_sys))
        e->use.has |= PL_USE_CPU;
    pl_gpusample_take(a->gsample, r->id, r->attempt, r->rank, &e->use);
    if (pl_task_error(t))
        e->error = strdup(pl_task_error(t));
}

/* ---- the running and the dead ---- */

/* A running rank of task 'id': the one of 'rank' if it runs here, else
 * any other of an attempt other than 'attempt', else NULL.  (Ranks of one
 * attempt may share the node; two attempts of a task may not.) */
static struct pl_task *find_task(struct pl_agent *a, uint64_t id,
                                 uint64_t attempt, uint64_t rank)
{
    struct pl_task *other = NULL;

    for (size_t i = 0; i < a->nrunning; i++) {
        const struct pl_run *r = pl_task_entry(a->running[i]);
        if (r->id != id)
            continue;
        if (r->attempt == attempt && r->rank == rank)
            return a->running[i];
        if (r->attempt != attempt && !other)
            other = a->running[i];
    }
    return other;
}

static void task_exit_cb(struct pl_task *t, void *arg)
{
    struct pl_agent *a = arg;
    const struct pl_run *r = pl_task_entry(t);
    char rss[32] = "";

    pl_resources_release(a->res, r->cores, r->ncores, r->gpus, r->ngpus);
    /* pilotd frees a one-rank task's cores with its end: a prefetched
     * entry may take them before its EVENTS leave (pl_agent_prefetch_start()) */
    if (r->size <= 1 && !r->pool
        && pl_prefetch_freed(a->pref, r->cores, r->ncores) < 0)
        pl_log(LOG_WARNING, "task %llu: its cores not reused at once: out "
               "of memory", (unsigned long long)r->id);
    if (pl_task_maxrss_kb(t) >= 0)
        snprintf(rss, sizeof(rss), ", maxrss %ld kB", pl_task_maxrss_kb(t));
    if (pl_task_signal(t))
        pl_log(LOG_INFO, "task %llu rank %llu: %s (signal %d, %.3f s%s)",
               (unsigned long long)r->id, (unsigned long long)r->rank,
               pl_state_name(pl_task_state(t)), pl_task_signal(t),
               pl_task_runtime(t), rss);
    else
        pl_log(LOG_INFO, "task %llu rank %llu: %s (exit %d, %.3f s%s)",
               (unsigned long long)r->id, (unsigned long long)r->rank,
               pl_state_name(pl_task_state(t)), pl_task_exit_code(t),
               pl_task_runtime(t), rss);
    event_task(a, t);
    /* pilotd schedules the cores of an ended task at once: no PULL */
    if (r->size <= 1)
        a->end_freed = true;
    for (size_t i = 0; i < a->nrunning; i++) {
        if (a->running[i] == t) {
            a->running[i] = a->running[--a->nrunning];
            break;
        }
    }
    /* N.B. not freed here, inside its own callback: the flush timer does
     * it.  'dead' has room: see make_room(). */
    a->dead[a->ndead++] = t;
    pl_agent_kick(a);
}

/* Room for one more task in 'running', and in 'dead' for all of them:
 * exits move tasks from one to the other, so ndead + nrunning never
 * exceeds what 'dead' was sized for at the last spawn. */
static int make_room(struct pl_agent *a)
{
    if (pl_grow(&a->running, &a->cap_running, a->nrunning, 1,
                sizeof(*a->running)) < 0
        || pl_grow(&a->dead, &a->cap_dead, a->nrunning + a->ndead, 1,
                   sizeof(*a->dead)) < 0)
        return -1;
    return 0;
}

void pl_agent_free_dead(struct pl_agent *a)
{
    for (size_t i = 0; i < a->ndead; i++)
        pl_task_free(a->dead[i]);
    a->ndead = 0;
}

void pl_agent_free_tasks(struct pl_agent *a)
{
    for (size_t i = 0; i < a->nrunning; i++)
        pl_task_free(a->running[i]);
    pl_agent_free_dead(a);
    free(a->running);
    free(a->dead);
}

/* ---- from an entry to a process ---- */

struct pl_env *pl_agent_task_env(struct pl_agent *a, const struct pl_run *r,
                                 struct pl_error *errp)
{
    struct pl_env *env;

    /* ours and the spec's, built once per spec (agent/env.h) */
    if (!(env = pl_env_cache_task(a->envcache, r->env))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    if (pl_env_setf(env, "PILOT_TASK_ID", "%llu",
                    (unsigned long long)r->id) < 0
        || pl_env_setf(env, "PILOT_ATTEMPT", "%llu",
                       (unsigned long long)r->attempt) < 0
        || pl_env_set(env, "PILOT_NODE", a->node) < 0)
        goto nomem;
    if (pl_comm_env(r, a->node, env, errp) < 0
        || pl_bind_cpu_env(a->cpu, r, env, errp) < 0
        /* an MPI launcher keeps the node's GPU lists: each rank picks
         * its own GPUs from them (pl_mpi_exec_rank()) */
        || (r->comm != PL_COMM_MPI
            && pl_bind_cuda_env(a->cuda, r, env, errp) < 0))
        goto error;
    return env;
nomem:
    pl_errprintf(errp, "out of memory");
error:
    pl_env_free(env);
    return NULL;
}

/* Bind and spawn; returns 0 or -1 with errp set. */
static int spawn(struct pl_agent *a, struct pl_task *t, struct pl_env *env,
                 struct pl_error *errp)
{
    const struct pl_run *r = pl_task_entry(t);
    int rc;

    if (pl_bind_cpu_enter(a->cpu, r, errp) < 0)
        return -1;
    if (pl_bind_cuda_enter(a->cuda, r, errp) < 0) {
        pl_bind_cpu_leave(a->cpu);
        return -1;
    }
    rc = pl_task_start(t, pl_env_vector(env), a->devnull, &a->outdir, errp);
    pl_bind_cuda_leave(a->cuda);
    pl_bind_cpu_leave(a->cpu);
    return rc;
}

/* Whether entry 'r' may not start because a rank of its task runs here:
 * the same rank of the same attempt (its events will come), or another
 * attempt (refused rather than leave pilotd waiting for it). */
static bool already_running(struct pl_agent *a, const struct pl_run *r)
{
    struct pl_task *t = find_task(a, r->id, r->attempt, r->rank);
    struct pl_error err;

    if (!t)
        return false;
    uint64_t old = pl_task_entry(t)->attempt;
    /* pilotd gave cores to a prefetched entry an end had just started:
     * the usual race, nothing to say */
    if (old == r->attempt && pl_task_entry(t)->prefetch)
        return true;
    pl_log(LOG_WARNING, "task %llu: attempt %llu still running here: run of "
           "attempt %llu rank %llu %s", (unsigned long long)r->id,
           (unsigned long long)old, (unsigned long long)r->attempt,
           (unsigned long long)r->rank,
           old == r->attempt ? "ignored" : "refused");
    if (old != r->attempt) {
        pl_errprintf(&err, "attempt %llu of this task is still running on "
                     "this node", (unsigned long long)old);
        event_failed(a, r, err.text);
    }
    return true;
}

/* Start entry 'r' (checked; its contents move into the task it makes),
 * its cores and GPUs claimed.  On failure they are released and the
 * failure reported. */
static void start(struct pl_agent *a, struct pl_run *r)
{
    struct pl_error err;
    struct pl_env *env;
    struct pl_task *t = NULL;
    unsigned long long id = r->id, rank = r->rank;
    bool prepared = false;
    char cores[128];

    if (!(env = pl_agent_task_env(a, r, &err))
        || (r->comm == PL_COMM_MPI && pl_mpi_launcher(r, env, &err) < 0)
        || !(prepared = true) || make_room(a) < 0
        || !(t = pl_task_new(&a->loop, r, a->owner, task_exit_cb, a))) {
        if (prepared)
            pl_errprintf(&err, "out of memory");
        pl_log(LOG_WARNING, "task %llu rank %llu: %s", id, rank, err.text);
        pl_resources_release(a->res, r->cores, r->ncores, r->gpus, r->ngpus);
        event_failed(a, r, err.text);
        goto done;
    }
    /* 'r' moved into the task: its entry from here on */
    const struct pl_run *s = pl_task_entry(t);
    pl_idlist_format(cores, sizeof(cores), s->cores, s->ncores);
    if (spawn(a, t, env, &err) < 0) {
        pl_log(LOG_WARNING, "task %llu rank %llu: %s", id, rank, err.text);
        pl_resources_release(a->res, s->cores, s->ncores, s->gpus, s->ngpus);
        if (pl_task_state(t) == PL_ST_FAILED)
            event_task(a, t);
        else
            event_failed(a, s, err.text);
        pl_task_free(t);
        goto done;
    }
    a->running[a->nrunning++] = t;
    pl_gpusample_watch(a->gsample, s->id, s->attempt, s->rank, s->gpus,
                       s->ngpus);
    pl_log(LOG_INFO, "task %llu rank %llu: spawned pid %d on cores %s", id,
           rank, pl_task_pid(t), cores);
    event_task(a, t);
done:
    pl_env_free(env);
}

/* Run one entry of a RUN message: one rank of a task.  Whatever goes
 * wrong, an entry with a valid id gets an event. */
static void run_one(struct pl_agent *a, const msgpack_object *o)
{
    struct pl_run r;
    struct pl_error err;
    bool have_id;

    if (pl_run_decode(o, &r, &have_id, &err) < 0) {
        if (have_id) {
            pl_log(LOG_WARNING, "task %llu rank %llu: bad run entry: %s",
                   (unsigned long long)r.id, (unsigned long long)r.rank,
                   err.text);
            event_failed(a, &r, err.text);
        }
        else
            pl_log(LOG_WARNING, "run: bad task entry: %s", err.text);
        goto done;
    }
    if (a->exiting) {
        pl_log(LOG_WARNING, "task %llu rank %llu: not started: shutting down",
               (unsigned long long)r.id, (unsigned long long)r.rank);
        event_failed(a, &r, "agent is shutting down");
        goto done;
    }
    if (a->bench) {
        /* no process, no files, no cores held: what pilotd costs alone */
        (void)pl_agent_event_add(a, r.id, r.attempt, r.rank, PL_ST_RUNNING);
        struct pl_event *e = pl_agent_event_add(a, r.id, r.attempt, r.rank,
                                                PL_ST_DONE);
        if (e)
            e->exit_code = 0;
        if (r.size <= 1)
            a->end_freed = true; /* as task_exit_cb() */
        goto done;
    }
    if (r.pool) {
        /* a pool task's rank: a call in its worker */
        if (!a->wpool)
            event_failed(a, &r, "this agent has no pool socket");
        else if (!pl_agent_ended(a, r.id, r.attempt, r.rank))
            pl_wpool_call(a->wpool, &r);
        goto done;
    }
    if (r.fn == PL_FN_PYCALL && pl_pyw_runs(a->pyw, r.id, r.attempt, r.rank))
        goto done; /* a RUN sent again: it runs */
    if (already_running(a, &r))
        goto done;
    if (pl_agent_ended(a, r.id, r.attempt, r.rank)) {
        /* a RUN sent again (pilotd had no GOT for it): it ran here */
        pl_log(LOG_INFO, "task %llu rank %llu: ran here already: run again "
               "ignored", (unsigned long long)r.id,
               (unsigned long long)r.rank);
        goto done;
    }
    if (r.prefetch) {
        /* held until an end frees cores (agent/prefetch.h); a RUN sent
         * again is not held twice */
        if (!pl_prefetch_holds(a->pref, r.id, r.attempt, r.rank)
            && pl_prefetch_add(a->pref, &r) < 0)
            event_failed(a, &r, "out of memory");
        goto done;
    }
    /* a prefetched entry pilotd gave cores: this one replaces it */
    struct pl_run held;
    if (pl_prefetch_take(a->pref, r.id, r.attempt, true, r.rank, &held))
        pl_run_clear(&held);
    if (pl_resources_claim(a->res, r.cores, r.ncores, r.gpus, r.ngpus, &err)
        < 0) {
        pl_log(LOG_WARNING, "task %llu rank %llu: %s",
               (unsigned long long)r.id, (unsigned long long)r.rank,
               err.text);
        event_failed(a, &r, err.text);
        goto done;
    }
    if (r.fn == PL_FN_PYCALL)
        pl_pyw_call(a->pyw, &r); /* a call in a warm worker */
    else
        start(a, &r);
done:
    pl_run_clear(&r);
}

/* ---- output limits ---- */

void pl_agent_check_output(struct pl_agent *a)
{
    for (size_t i = 0; i < a->nrunning; i++) {
        struct pl_task *t = a->running[i];
        const struct pl_run *r = pl_task_entry(t);
        uint64_t limit = r->output_limit ? r->output_limit
                                         : PL_OUTPUT_LIMIT_DEFAULT;
        uint64_t out, err;
        char why[160];
        if (!pl_task_running(t))
            continue;
        pl_task_output_sizes(t, &out, &err);
        if (out <= limit && err <= limit)
            continue;
        snprintf(why, sizeof(why), "output-limit: %s is over %llu bytes "
                 "(--output-limit)", out > limit ? "stdout" : "stderr",
                 (unsigned long long)limit);
        pl_log(LOG_WARNING, "task %llu rank %llu: %s: stopping it",
               (unsigned long long)r->id, (unsigned long long)r->rank, why);
        pl_task_fail(t, why);
    }
}

/* ---- messages from pilotd ---- */

int pl_agent_run_cb(struct pl_agent *a, const struct pl_msg *m,
                    struct pl_error *errp)
{
    const msgpack_object *tasks;

    if (pl_run_msg_decode(m->body, &tasks, errp) < 0)
        return -1;
    pl_log(LOG_DEBUG, "run: %u tasks", tasks->via.array.size);
    if (m->seq > a->last_run)
        a->last_run = m->seq;
    a->got_due = true;
    a->pulled = false;
    for (uint32_t i = 0; i < tasks->via.array.size; i++)
        run_one(a, &tasks->via.array.ptr[i]);
    /* the GOT and a PULL for cores still free can wait for the starts'
     * flush (pl_agent_kick_soon()); a failure kicked it already */
    pl_agent_kick_soon(a);
    return 0;
}

int pl_agent_kill_cb(struct pl_agent *a, const struct pl_msg *m,
                     struct pl_error *errp)
{
    struct pl_kill k;
    size_t n = 0;

    if (pl_kill_decode(m->body, &k, errp) < 0)
        return -1;
    /* numbered with the RUNs: GOT tells pilotd to stop sending it */
    if (m->seq > a->last_run)
        a->last_run = m->seq;
    a->got_due = true;
    pl_agent_kick(a);
    /* held, not started: it ends canceled without a process ('lost'
     * when pilotd takes it back to run it elsewhere) */
    struct pl_run held;
    while (pl_prefetch_take(a->pref, k.id, k.attempt, k.one, k.rank, &held)) {
        pl_log(LOG_INFO, "task %llu rank %llu: prefetched, not started: %s",
               (unsigned long long)k.id, (unsigned long long)held.rank,
               k.queued_only ? "taken back" : "killed");
        struct pl_event *e = pl_agent_event_add(a, held.id, held.attempt,
                                                held.rank, PL_ST_CANCELED);
        if (e)
            e->lost = k.queued_only;
        pl_run_clear(&held);
        n++;
    }
    if (k.queued_only)
        return 0; /* it started (its events are on their way): it runs */
    /* Every rank of the attempt running here, or only 'rank' if given. */
    for (size_t i = 0; i < a->nrunning; i++) {
        const struct pl_run *r = pl_task_entry(a->running[i]);
        if (r->id != k.id || r->attempt != k.attempt
            || (k.one && r->rank != k.rank))
            continue;
        pl_log(LOG_INFO, "task %llu rank %llu: kill (grace %.3g s)",
               (unsigned long long)k.id, (unsigned long long)r->rank,
               k.grace);
        pl_task_kill(a->running[i], PL_ST_CANCELED, k.grace);
        n++;
    }
    if (a->wpool)
        n += pl_wpool_kill(a->wpool, &k);
    n += pl_pyw_kill(a->pyw, &k);
    if (n == 0)
        pl_log(LOG_DEBUG, "kill: task %llu attempt %llu%s is not running "
               "here", (unsigned long long)k.id,
               (unsigned long long)k.attempt, k.one ? " (that rank)" : "");
    return 0;
}

/* ---- prefetched entries ---- */

void pl_agent_prefetch_start(struct pl_agent *a)
{
    struct pl_run r;
    struct pl_error err;

    /* N.B. only for the pilotd that sent them, and only while it hears
     * us: a 'running' it never reads would leave the cores unaccounted */
    while (a->welcomed && !a->exiting && pl_prefetch_next(a->pref, &r)) {
        if (pl_resources_claim(a->res, r.cores, r.ncores, NULL, 0, &err)
            < 0) {
            /* not free after all (cannot be): it waits for pilotd */
            pl_log(LOG_WARNING, "task %llu: prefetched: %s",
                   (unsigned long long)r.id, err.text);
            if (pl_prefetch_unget(a->pref, &r) < 0)
                event_failed(a, &r, "out of memory");
            pl_run_clear(&r);
            break;
        }
        start(a, &r);
        pl_run_clear(&r);
    }
}
