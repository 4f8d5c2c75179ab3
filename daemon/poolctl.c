/* daemon/poolctl.c - the pools' life: start, stop, list, their workers'
 * HELLOs, and their MPI job's end (a restart, or the pool's end)
 *
 * A pool's job is a task of fn pool (argv: pilot-worker), comm mpi, at
 * the highest priority, placed and launched as any MPI task; it counts
 * in no counter and no listing (docs/pool.md).  When it ends while the
 * pool is not being stopped it is queued again at once, not charged to
 * any retry: the pool restarts.  The pool's tasks wait meanwhile; those
 * that were running end through their agents (a worker gone: run again;
 * a crash, a timeout: their end).  A job that ends three times in a row
 * without its workers all saying HELLO fails the pool.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_private.h"
#include "daemon/pool.h"
#include "proto/clientmsg.h"
#include "proto/log.h"
#include "proto/poolmsg.h"
#include "proto/strv.h"

#define START_FAILS_MAX 3   /* attempts in a row that never got ready */

struct pl_pool *pl_poolctl_find(struct pl_daemon *d, const char *name)
{
    for (size_t i = 0; i < d->npools; i++)
        if (!strcmp(d->pools[i]->name, name))
            return d->pools[i];
    return NULL;
}

static struct pl_pool *by_job(struct pl_daemon *d, uint64_t job)
{
    for (size_t i = 0; i < d->npools; i++)
        if (d->pools[i]->job == job)
            return d->pools[i];
    return NULL;
}

/* The pool's definition, kept in meta as "pool:NAME" (JSON), so that a
 * restarted pilotd takes it back; NULL once stopped. */
static void record(struct pl_daemon *d, const struct pl_pool *p, bool gone)
{
    char key[PL_POOL_NAME_MAX + 8];
    char *text = NULL;
    struct pl_error err;

    snprintf(key, sizeof(key), "pool:%s", p->name);
    if (!gone) {
        json_t *o = json_pack("{s:I,s:I,s:I,s:I,s:s,s:I,s:f,s:I}", "nodes",
                              (json_int_t)p->nodes_req, "ranks_per_node",
                              (json_int_t)p->rpn, "cores_per_rank",
                              (json_int_t)p->cpr, "gpus_per_rank",
                              (json_int_t)p->gpr, "launcher",
                              pl_launcher_name(p->launcher), "job",
                              (json_int_t)p->job, "created", p->created,
                              "restarts", (json_int_t)p->restarts);
        json_t *env = json_array();
        for (char **e = p->env; o && env && e && *e; e++)
            json_array_append_new(env, json_string(*e));
        if (o && env)
            json_object_set_new(o, "env", env);
        else
            json_decref(env);
        text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!text) {
            pl_log(LOG_ERR, "pool %s: out of memory", p->name);
            return;
        }
    }
    if (pl_db_meta_set(d->db, key, text, &err) < 0)
        pl_log(LOG_ERR, "pool %s: %s", p->name, err.text);
    free(text);
}

/* Forget pool 'p' (no task points to it any more). */
static void pool_remove(struct pl_daemon *d, struct pl_pool *p)
{
    for (size_t i = 0; i < d->npools; i++)
        if (d->pools[i] == p) {
            d->pools[i] = d->pools[--d->npools];
            break;
        }
    pl_pool_free(p);
}

/* End every task of 'p' now ('state', 'why'): queued ones, and running
 * ones whose workers are going (what their agents say later is of an
 * attempt that is over). */
struct end_arg {
    struct pl_daemon *d;
    struct pl_pool *p;
    int state;
    const char *why;
};

static void end_cb(struct pl_dtask *t, void *arg)
{
    struct end_arg *a = arg;

    if (t->pool != a->p || t->fn == PL_FN_POOL)
        return;
    if (t->state == PL_ST_QUEUED || t->state == PL_ST_WAITING) {
        pl_sched_dequeue(a->d->sched, t);
        pl_dtask_end(a->d, t, a->state, a->why);
        return;
    }
    t->cancel = a->state == PL_ST_CANCELED;
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = a->why };
    for (uint32_t r = 0; t->rank && r < t->ranks; r++)
        if (!pl_state_final(t->rank[r].state)
            && pl_dtask_rank_ended(a->d, t, r, a->state, &c))
            return; /* it ended and is gone */
}

static void end_tasks(struct pl_daemon *d, struct pl_pool *p, int state,
                      const char *why)
{
    struct end_arg a = { d, p, state, why };

    pl_sched_node_tasks(d->sched, NULL, end_cb, &a);
}

/* ------------------------------------------------------------ requests */

static void start(struct pl_daemon *d, const struct pl_req *r,
                  const struct pl_pool_req *pr);

/* The nodes of a pool's job: those asked for, else all the pilot's. */
static uint32_t job_nodes(const struct pl_daemon *d, uint32_t asked)
{
    if (asked)
        return asked;
    return d->cfg.expected_agents > 0 ? (uint32_t)d->cfg.expected_agents : 1;
}

/* The pool job's spec: its workers as one MPI task. */
static int job_spec(struct pl_daemon *d, const struct pl_pool *p,
                    uint32_t nodes, char *const *env, struct pl_spec *s,
                    struct pl_error *errp)
{
    char prefix[PL_POOL_PREFIX_MAX], name[PL_POOL_NAME_MAX + 8];
    size_t ne = pl_strv_len(env);

    pl_spec_init(s);
    pl_pool_sock_prefix(d->keydir, prefix);
    snprintf(name, sizeof(name), "pool:%s", p->name);
    if (!(s->argv = calloc(2, sizeof(*s->argv)))
        || asprintf(&s->argv[0], "%s/pilot-worker", d->bindir) < 0
        || !(s->env = calloc(ne + 5, sizeof(*s->env)))
        || asprintf(&s->env[0], "PILOT_POOL=%s", p->name) < 0
        || asprintf(&s->env[1], "PILOT_POOL_SOCKET=%s", prefix) < 0
        || asprintf(&s->env[2], "PILOT_POOL_GPUS=%u", p->gpr) < 0
        /* a worker waiting in MPI gives up its core rather than spin:
         * a rank that spins on a core another rank needs (more ranks
         * than cores, as on a small machine) made a 4-rank task's
         * communicator take 60-100 ms to make, not 6-10 (docs/pool.md);
         * --env OMPI_MCA_mpi_yield_when_idle=0 spins */
        || !(s->env[3] = strdup("OMPI_MCA_mpi_yield_when_idle=1"))
        || !(s->name = strdup(name)) || !(s->pool = strdup(p->name)))
        goto nomem;
    /* the user's after ours: theirs win (pl_env_put() in the agent) */
    for (size_t i = 0; i < ne; i++)
        if (!(s->env[4 + i] = strdup(env[i])))
            goto nomem;
    s->fn = PL_FN_POOL;
    s->comm = PL_COMM_MPI;
    s->launcher = p->launcher;
    s->nodes = nodes;
    s->rpn = p->rpn;
    s->cpr = p->cpr;
    s->gpr = p->gpr;
    s->retries = 0;
    s->has_retries = true;
    s->priority = PL_SPEC_MAX_PRIORITY;
    return pl_spec_check(s, errp);
nomem:
    pl_spec_clear(s);
    errno = ENOMEM;
    return pl_errprintf(errp, "out of memory");
}

/* Make the job of 'p' (stored, queued).  0, or -1 with errp. */
static int job_make(struct pl_daemon *d, struct pl_pool *p, uint32_t nodes,
                    char *const *env, struct pl_error *errp)
{
    struct pl_spec s;
    struct pl_dtask *t;
    uint64_t id;

    if (job_spec(d, p, nodes, env, &s, errp) < 0)
        return -1;
    struct pl_db_task row = { .spec = &s };
    if (pl_db_task_insert(d->db, &row, PL_ST_QUEUED, pl_now(), &id, errp)
        < 0)
        goto error;
    if (!(t = pl_sched_task_add(d->sched, id, true, (int32_t)s.priority,
                                &s.argv, &s.env, &s.cwd))) {
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        goto error;
    }
    t->state = PL_ST_QUEUED;
    pl_dtask_shape(t, &s);
    t->serial = ++d->serial;
    t->fn = PL_FN_POOL;
    t->pool = p;
    p->job = id;
    pl_spec_clear(&s);
    return 0;
error:
    pl_spec_clear(&s);
    return -1;
}

/* The pool as the list and start replies show it. */
static json_t *pool_json(struct pl_daemon *d, const struct pl_pool *p)
{
    uint32_t nodes = 0, running = 0;
    const struct pl_dtask *job = pl_sched_task_get(d->sched, p->job);

    for (uint32_t i = 0; i < p->nslots; i++)
        if (!i || p->slot[i].node != p->slot[i - 1].node)
            nodes++;
    for (uint32_t i = 0; i < p->nslots; i++)
        if (p->slot[i].task
            && (!i || p->slot[i].task != p->slot[i - 1].task))
            running++;
    json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,"
                          "s:I,s:I,s:I,s:f}",
                          "name", p->name, "state",
                          pl_pool_state_name(p->state), "workers",
                          (json_int_t)(p->nslots ? p->nslots
                                                 : p->rpn * p->nodes_req),
                          "nodes", (json_int_t)nodes, "ranks_per_node",
                          (json_int_t)p->rpn, "cores_per_rank",
                          (json_int_t)p->cpr, "gpus_per_rank",
                          (json_int_t)p->gpr, "ready", (json_int_t)p->nready,
                          "busy", (json_int_t)p->nbusy, "queued",
                          (json_int_t)p->nqueued, "launcher",
                          pl_launcher_name(p->launcher), "job",
                          (json_int_t)p->job, "attempt",
                          (json_int_t)(job ? job->attempt : p->attempt),
                          "restarts", (json_int_t)p->restarts, "created",
                          p->created);
    if (!o)
        return NULL;
    json_object_set_new(o, "running", json_integer(running));
    if (p->nodes_req)
        json_object_set_new(o, "nodes_asked", json_integer(p->nodes_req));
    if (p->last_start >= 0)
        json_object_set_new(o, "last_start_s", json_real(p->last_start));
    if (p->last_restart >= 0)
        json_object_set_new(o, "last_restart_s", json_real(p->last_restart));
    if (p->reason[0])
        json_object_set_new(o, "reason", json_string(p->reason));
    if (job && job->nodelist)
        json_object_set_new(o, "nodelist", json_string(job->nodelist));
    return o;
}

void pl_poolctl_start(struct pl_daemon *d, const struct pl_req *r,
                      const struct pl_msg *m)
{
    struct pl_pool_req pr;
    struct pl_error err;

    if (d->stopping || d->draining) {
        pl_out_err(d, r, ESHUTDOWN, "the pilot is shutting down");
        return;
    }
    if (pl_store_refused(d, r))
        return;
    if (pl_pool_req_decode(m->body, m->type, &pr, &err) < 0) {
        pl_out_err(d, r, errno ? errno : EINVAL, err.text);
        return;
    }
    start(d, r, &pr);
    pl_pool_req_clear(&pr);
}

/* A new pool of shape 'pr' (its job stored and queued), or NULL with
 * errp (EEXIST, EINVAL: it cannot fit, ENOMEM...). */
static struct pl_pool *create(struct pl_daemon *d,
                              const struct pl_pool_req *pr,
                              struct pl_error *errp)
{
    struct pl_pool *p = NULL, *old;
    char why[200];

    if ((old = pl_poolctl_find(d, pr->name))
        && old->state != PL_POOL_FAILED) {
        errno = EEXIST;
        pl_errprintf(errp, "pool %s exists (%s); pilot pool stop %s first",
                     pr->name, pl_pool_state_name(old->state), pr->name);
        return NULL;
    }
    uint32_t nodes = job_nodes(d, (uint32_t)pr->nodes);
    /* the job's shape must fit the pilot's nodes (idle) */
    struct pl_dtask shape = { .ranks = nodes * (uint32_t)pr->rpn,
                              .cores_per_rank = (uint32_t)pr->cpr,
                              .gpus_per_rank = (uint32_t)pr->gpr,
                              .nodes_req = nodes,
                              .ranks_per_node = (uint32_t)pr->rpn,
                              .comm = PL_COMM_MPI };
    if (pl_sched_nnodes(d->sched) > 0
        && !pl_sched_fits(d->sched, &shape, why, sizeof(why))) {
        errno = EINVAL;
        pl_errprintf(errp, "%s", why);
        return NULL;
    }
    if (pl_grow(&d->pools, &d->cappools, d->npools, 1, sizeof(*d->pools)) < 0
        || !(p = pl_pool_new(pr->name, (uint32_t)pr->nodes,
                             (uint32_t)pr->rpn, (uint32_t)pr->cpr,
                             (uint32_t)pr->gpr,
                             /* no Slurm allocation to srun in */
                             pr->launcher == PL_LAUNCHER_UNSET
                                     && d->cfg.local
                                 ? PL_LAUNCHER_MPIRUN
                                 : pr->launcher))
        || (pr->env && !(p->env = pl_strv_dup(pr->env)))) {
        if (p)
            pl_pool_free(p);
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    p->created = pl_now();
    if (job_make(d, p, nodes, pr->env, errp) < 0) {
        pl_pool_free(p);
        return NULL;
    }
    if (old)
        pool_remove(d, old); /* a failed pool of that name: replaced */
    d->pools[d->npools++] = p;
    record(d, p, false);
    d->want_sched = true;
    pl_log(LOG_NOTICE, "pool %s: %u workers on %u nodes (job %llu)",
           p->name, nodes * p->rpn, nodes, (unsigned long long)p->job);
    return p;
}

static void start(struct pl_daemon *d, const struct pl_req *r,
                  const struct pl_pool_req *pr)
{
    struct pl_pool *p;
    struct pl_error err;

    if (!(p = create(d, pr, &err))) {
        pl_out_err(d, r, errno ? errno : EIO, err.text);
        return;
    }
    struct pl_out *o = pl_out_json(d, r, pool_json(d, p));
    if (o)
        o->needs_commit = true;
}

int pl_poolctl_boot(struct pl_daemon *d, struct pl_error *errp)
{
    for (int i = 0; i < d->cfg.npools; i++) {
        struct pl_pool_req pr;
        struct pl_pool *p;
        if (pl_pool_spec_parse(d->cfg.pools[i], &pr, errp) < 0)
            return -1;
        if ((p = pl_poolctl_find(d, pr.name)) && p->state != PL_POOL_FAILED)
            continue; /* taken back from the database */
        if (!create(d, &pr, errp))
            return -1;
    }
    return d->cfg.npools ? pl_db_commit(d->db, errp) : 0;
}

void pl_poolctl_stop(struct pl_daemon *d, const struct pl_req *r,
                     const struct pl_msg *m)
{
    struct pl_pool_req pr;
    struct pl_pool *p;
    struct pl_error err;
    char why[PL_POOL_NAME_MAX + 32];

    if (pl_store_refused(d, r))
        return;
    if (pl_pool_req_decode(m->body, m->type, &pr, &err) < 0) {
        pl_out_err(d, r, errno ? errno : EINVAL, err.text);
        return;
    }
    pl_pool_req_clear(&pr);
    if (!(p = pl_poolctl_find(d, pr.name))) {
        snprintf(why, sizeof(why), "no pool is named '%s'", pr.name);
        pl_out_err(d, r, ENOENT, why);
        return;
    }
    json_t *o = pool_json(d, p);
    pl_poolctl_stop_one(d, p, "pool stopped");
    json_object_set_new(o, "state", json_string("stopping"));
    pl_out_json(d, r, o);
}

void pl_poolctl_stop_one(struct pl_daemon *d, struct pl_pool *p,
                         const char *why)
{
    struct pl_dtask *job = pl_sched_task_get(d->sched, p->job);
    char text[PL_POOL_NAME_MAX + 64];

    snprintf(text, sizeof(text), "pool %s: %s", p->name, why);
    p->state = PL_POOL_STOPPING;
    end_tasks(d, p, PL_ST_CANCELED, text);
    record(d, p, true);
    pl_log(LOG_NOTICE, "%s", text);
    if (job && (job->state == PL_ST_QUEUED || job->state == PL_ST_WAITING)) {
        job->pool = NULL;
        pl_dtask_cancel(d, job); /* it ends now */
    }
    else if (job && !pl_state_final(job->state)) {
        pl_dtask_cancel(d, job); /* its end removes the pool */
        return;
    }
    pool_remove(d, p);
}

void pl_poolctl_list(struct pl_daemon *d, const struct pl_req *r,
                     const struct pl_msg *m)
{
    json_t *a = json_array();
    (void)m;

    for (size_t i = 0; a && i < d->npools; i++)
        json_array_append_new(a, pool_json(d, d->pools[i]));
    pl_out_json(d, r, a);
}

/* ------------------------------------------------------------ the job */

void pl_poolctl_down(struct pl_daemon *d, struct pl_pool *p, const char *why)
{
    struct pl_dtask *job = pl_sched_task_get(d->sched, p->job);
    struct pl_node *seen[p->nslots ? p->nslots : 1];
    uint32_t nseen = 0;

    if (!job || !job->rank || pl_state_final(job->state) || p->down_at > 0)
        return;
    if (p->state == PL_POOL_READY || p->state == PL_POOL_STARTING
        || p->state == PL_POOL_RESTARTING)
        pl_log(LOG_WARNING, "pool %s: %s: its job goes down", p->name, why);
    p->down_at = pl_mono();
    if (p->state != PL_POOL_STOPPING)
        p->state = PL_POOL_RESTARTING; /* no task is placed in it now */
    /* every agent under it kills its workers of this attempt (SIGKILL:
     * an MPI job's ranks may take their time over a SIGTERM, as long as
     * Slurm's KillWait, 30 s by default) */
    struct pl_kill k = { .id = job->id, .attempt = job->attempt,
                         .grace = 0 };
    for (uint32_t i = 0; i < p->nslots; i++) {
        struct pl_node *n = p->slot[i].node;
        bool dup = false;
        for (uint32_t j = 0; j < nseen && !dup; j++)
            dup = seen[j] == n;
        if (!n || dup || n->state != PL_NODE_UP)
            continue;
        seen[nseen++] = n;
        pl_orders_kill(d, n, &k);
    }
}

/* Worker 'wr' of attempt 'attempt' on 'n' said HELLO. */
static void ready_one(struct pl_daemon *d, struct pl_pool *p,
                      uint32_t attempt, uint32_t wr, const struct pl_node *n)
{
    int rc = pl_pool_slot_ready(p, attempt, wr, n);

    if (rc < 0)
        pl_daemon_bad_log(d, LOG_INFO, "agent %s: pool %s: worker %u of "
                          "attempt %u is not one of its job's there "
                          "(ignored)", n->name, p->name, wr, attempt);
    if (rc != 1)
        return;
    double now = pl_mono();
    p->ready_at = now;
    p->last_start = now - p->placed_at;
    if (p->down_at > 0)
        p->last_restart = now - p->down_at;
    p->down_at = 0;
    p->fails = 0;
    p->state = PL_POOL_READY;
    d->want_sched = true;
    pl_log(LOG_NOTICE, "pool %s: %u workers ready in %.3f s%s", p->name,
           p->nslots, p->last_start, p->restarts ? " (a restart)" : "");
}

void pl_poolctl_placed(struct pl_daemon *d, struct pl_dtask *job)
{
    struct pl_pool *p = job->pool;
    size_t keep = 0;

    if (pl_pool_job_placed(p, job) < 0) {
        pl_log(LOG_ERR, "pool %s: out of memory", p->name);
        return;
    }
    p->placed_at = pl_mono();
    pl_log(LOG_INFO, "pool %s: job %llu attempt %u placed on %s", p->name,
           (unsigned long long)job->id, job->attempt,
           job->nodelist ? job->nodelist : "?");
    /* what was said before we knew where its workers are */
    for (size_t i = 0; i < p->nearly; i++) {
        struct pl_early e = p->early[i];
        if (e.attempt == p->attempt)
            ready_one(d, p, e.attempt, e.wr, e.node);
        else if (e.attempt > p->attempt)
            p->early[keep++] = e;
    }
    p->nearly = keep;
}

void pl_poolctl_ready(struct pl_daemon *d, struct pl_node *n,
                      const struct pl_msg *m)
{
    struct pl_pool_ready pr;
    struct pl_error err;
    struct pl_pool *p;
    const struct pl_dtask *job;

    if (pl_pool_ready_decode(m->body, &pr, &err) < 0) {
        pl_daemon_bad_log(d, LOG_WARNING, "agent %s: bad pool-ready: %s",
                          n->name, err.text);
        return;
    }
    if (!(p = by_job(d, pr.job)) || p->state == PL_POOL_STOPPING
        || !(job = pl_sched_task_get(d->sched, p->job))) {
        pl_pool_ready_clear(&pr);
        return; /* a job of a pool gone or going: its workers go too */
    }
    for (uint32_t i = 0; i < pr.nranks; i++) {
        /* its placement not known yet (taken back after a restart, its
         * agent not registered yet): kept until it is */
        if (pr.attempt == job->attempt
            && (!p->nslots || p->attempt != job->attempt)) {
            if (pl_grow(&p->early, &p->capearly, p->nearly, 1,
                        sizeof(*p->early)) == 0)
                p->early[p->nearly++] = (struct pl_early){
                    n, (uint32_t)pr.attempt, (uint32_t)pr.ranks[i] };
            continue;
        }
        ready_one(d, p, (uint32_t)pr.attempt, (uint32_t)pr.ranks[i], n);
    }
    pl_pool_ready_clear(&pr);
}

bool pl_poolctl_job_ended(struct pl_daemon *d, struct pl_dtask *job,
                          int state, const char *reason)
{
    struct pl_pool *p = job->pool;
    bool was_ready = p->nready == p->nslots && p->nslots > 0;

    snprintf(p->reason, sizeof(p->reason), "its job ended (%s%s%s)",
             pl_state_name(state), reason ? ": " : "", reason ? reason : "");
    p->nready = 0;
    for (uint32_t i = 0; i < p->nslots; i++)
        p->slot[i].ready = false;
    if (p->state == PL_POOL_STOPPING) {
        job->pool = NULL;
        pool_remove(d, p);
        return false;
    }
    if (d->draining || d->stopping) {
        /* the next allocation (--resume) starts it again */
        p->state = PL_POOL_RESTARTING;
        return false;
    }
    if (!was_ready && ++p->fails >= START_FAILS_MAX) {
        char why[sizeof(p->reason) + PL_POOL_NAME_MAX + 100];
        snprintf(why, sizeof(why), "pool %s failed: its job ended %u times "
                 "before its workers were all ready, the last: %s", p->name,
                 p->fails, p->reason);
        p->state = PL_POOL_FAILED;
        memcpy(p->reason, why, sizeof(p->reason) - 1);
        p->reason[sizeof(p->reason) - 1] = '\0';
        pl_log(LOG_ERR, "%s", why);
        end_tasks(d, p, PL_ST_FAILED, why);
        job->pool = NULL;
        p->job = 0;
        return false;
    }
    p->state = PL_POOL_RESTARTING;
    p->restarts++;
    record(d, p, false);
    if (!p->down_at)
        p->down_at = pl_mono();
    pl_log(LOG_WARNING, "pool %s: %s: restarting", p->name, p->reason);
    pl_dtask_requeue(d, job, p->reason, true);
    return true;
}

void pl_poolctl_schedule(struct pl_daemon *d, pl_sched_place_f place,
                         void *arg)
{
    for (size_t i = 0; i < d->npools; i++)
        pl_pool_place(d->pools[i], place, arg);
}

void pl_poolctl_free(struct pl_daemon *d)
{
    for (size_t i = 0; i < d->npools; i++)
        pl_pool_free(d->pools[i]);
    free(d->pools);
    d->pools = NULL;
    d->npools = d->cappools = 0;
}

/* ------------------------------------------------------------ restart */

/* One pool of the database's meta rows ("pool:NAME", JSON). */
static int load_one(const char *key, const char *val, void *arg)
{
    struct pl_daemon *d = arg;
    json_error_t jerr;
    json_t *o = json_loads(val, 0, &jerr), *env;
    json_int_t nodes = 0, rpn = 1, cpr = 1, gpr = 0, job = 0, restarts = 0;
    const char *launcher = "srun", *name = key + 5;
    double created = 0;
    struct pl_pool *p;

    if (!o || json_unpack(o, "{s?I,s?I,s?I,s?I,s?s,s?I,s?F,s?I}", "nodes",
                          &nodes, "ranks_per_node", &rpn, "cores_per_rank",
                          &cpr, "gpus_per_rank", &gpr, "launcher", &launcher,
                          "job", &job, "created", &created, "restarts",
                          &restarts) < 0
        || !pl_pool_name_ok(name) || rpn < 1 || cpr < 1 || gpr < 0
        || nodes < 0 || job < 0) {
        pl_log(LOG_ERR, "pool %s: its stored definition cannot be read: "
               "left out", name);
        json_decref(o);
        return 0;
    }
    if (pl_grow(&d->pools, &d->cappools, d->npools, 1, sizeof(*d->pools)) < 0
        || !(p = pl_pool_new(name, (uint32_t)nodes, (uint32_t)rpn,
                             (uint32_t)cpr, (uint32_t)gpr,
                             pl_launcher_parse(launcher) > 0
                                 ? pl_launcher_parse(launcher)
                                 : PL_LAUNCHER_UNSET))) {
        json_decref(o);
        return -1;
    }
    if ((env = json_object_get(o, "env")) && json_is_array(env)) {
        size_t i;
        json_t *e;
        if (!(p->env = calloc(json_array_size(env) + 1, sizeof(*p->env)))) {
            json_decref(o);
            pl_pool_free(p);
            return -1;
        }
        json_array_foreach(env, i, e)
            if (json_is_string(e) && !(p->env[i] = strdup(json_string_value(e)))) {
                json_decref(o);
                pl_pool_free(p);
                return -1;
            }
    }
    json_decref(o);
    p->job = (uint64_t)job;
    p->created = created;
    p->restarts = restarts > 0 ? (uint32_t)restarts : 0;
    p->state = PL_POOL_RESTARTING;
    p->job_seen = false;
    d->pools[d->npools++] = p;
    return 0;
}

int pl_poolctl_load(struct pl_daemon *d, struct pl_error *errp)
{
    return pl_db_meta_list(d->db, "pool:", load_one, d, errp);
}

struct pl_pool *pl_poolctl_adopt(struct pl_daemon *d, struct pl_dtask *t,
                                 const char *name)
{
    struct pl_pool *p = pl_poolctl_find(d, name);

    if (!p)
        return NULL;
    if (t->fn == PL_FN_POOL) {
        if (p->job != t->id)
            return NULL; /* an older job of the pool */
        p->job_seen = true;
    }
    t->pool = p;
    return p;
}

int pl_poolctl_loaded(struct pl_daemon *d, struct pl_error *errp)
{
    for (size_t i = 0; i < d->npools; i++) {
        struct pl_pool *p = d->pools[i];
        uint32_t nodes = job_nodes(d, p->nodes_req);
        if (p->job_seen)
            continue;
        /* its job ended with the pilotd before (or never was): a new one */
        if (job_make(d, p, nodes, p->env, errp) < 0)
            return -1;
        record(d, p, false);
        pl_log(LOG_NOTICE, "pool %s: a new job %llu", p->name,
               (unsigned long long)p->job);
    }
    if (d->npools)
        pl_log(LOG_NOTICE, "%zu pools taken back: they start again",
               d->npools);
    return 0;
}
