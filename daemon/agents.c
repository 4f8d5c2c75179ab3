/* daemon/agents.c - the agent socket: who the agents are, what they say
 *
 * Each node's agent has a link here (its routing id, pid, last word);
 * the scheduler knows nodes by their resources only.  An agent
 * REGISTERs (again after a reconnect or a pilotd restart) with what it
 * runs and what ended meanwhile, PULLs when it has room, sends EVENTS
 * (acknowledged once committed) and HEARTBEATs when it has said nothing
 * else for a while; any message is a sign of life.  A HEARTBEAT is
 * answered with a PING, so that an idle agent hears from us.  A silent
 * agent is lost and its tasks' ranks there end.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_private.h"
#include "daemon/keymap.h"
#include "proto/log.h"
#include "proto/strv.h"
#include "proto/zwatch.h"

/* N.B. both lookups are made per message: no scan of the links (issue
 * 16: one pilotd, 1,000 agents) */
struct pl_link *pl_agents_link(struct pl_daemon *d, const struct pl_node *n)
{
    /* the links are in the scheduler's node order */
    if (n && n->pidx && n->pidx_at < d->nlinks
        && d->links[n->pidx_at]->node == n)
        return d->links[n->pidx_at];
    for (size_t i = 0; i < d->nlinks; i++)
        if (d->links[i]->node == n)
            return d->links[i];
    return NULL;
}

struct pl_link *pl_agents_link_by_rid(struct pl_daemon *d, const void *rid,
                                      size_t len)
{
    struct pl_link *l = pl_keymap_get(d->rids, rid, len);

    /* not there: an agent that did not register (rare), or links made
     * without the table (the unit tests) */
    for (size_t i = 0; !l && i < d->nlinks; i++)
        if (d->links[i]->ridlen == len && !memcmp(d->links[i]->rid, rid, len))
            l = d->links[i];
    return l;
}

/* ------------------------------------------------------------ liveness */

static void live_remove(struct pl_daemon *d, struct pl_link *l)
{
    if (!l->live)
        return;
    if (l->live_prev)
        l->live_prev->live_next = l->live_next;
    else
        d->live_first = l->live_next;
    if (l->live_next)
        l->live_next->live_prev = l->live_prev;
    else
        d->live_last = l->live_prev;
    l->live_prev = l->live_next = NULL;
    l->live = false;
}

/* 'l' spoke now: to the tail of d->live, which stays in the order of
 * 'seen' (the monotonic clock only goes forward). */
static void live_seen(struct pl_daemon *d, struct pl_link *l)
{
    l->last_seen = pl_now();
    l->seen = pl_mono();
    if (d->live_last == l)
        return;
    live_remove(d, l);
    l->live_prev = d->live_last;
    if (d->live_last)
        d->live_last->live_next = l;
    else
        d->live_first = l;
    d->live_last = l;
    l->live = true;
}

void pl_agents_free(struct pl_daemon *d)
{
    for (size_t i = 0; i < d->nlinks; i++) {
        pl_orders_free(d->links[i]);
        free(d->links[i]);
    }
    free(d->links);
    d->links = NULL;
    d->nlinks = 0;
    d->live_first = d->live_last = NULL;
    pl_keymap_free(d->rids);
    d->rids = NULL;
}

/* A bare message (EXIT, REREGISTER, PING) to routing id 'rid'. */
static void send_bare(struct pl_daemon *d, const void *rid, size_t ridlen,
                      int type)
{
    struct pl_out *o = pl_out_new(d->asock, rid, ridlen);

    if (!o)
        return;
    pl_bare_encode(&o->w, type, 0);
    pl_out_push(d, o);
}

void pl_agents_record(struct pl_daemon *d, struct pl_node *n,
                      const char *state)
{
    char cores[4096], gpus[1024];
    uint32_t idx[4096];
    uint32_t nc = n->ncores < 4096 ? n->ncores : 4096;
    uint32_t ng = n->ngpus < 4096 ? n->ngpus : 4096;
    struct pl_error err;

    for (uint32_t i = 0; i < 4096; i++)
        idx[i] = i;
    pl_node_cpu_str(n, idx, nc, cores, sizeof(cores));
    pl_node_gpu_str(n, idx, ng, gpus, sizeof(gpus));
    if (pl_db_node_set(d->db, n->name, cores, gpus, state, pl_now(), &err)
        < 0)
        pl_log(LOG_ERR, "node %s: %s", n->name, err.text);
}

/* ------------------------------------------------------------ kills */

void pl_agents_kill_task(struct pl_daemon *d, struct pl_dtask *t)
{
    for (uint32_t r = 0; t->rank && r < pl_dtask_launched(t); r++) {
        struct pl_node *n = t->rank[r].node;
        bool first = true;
        if (!n || pl_state_final(t->rank[r].state) || n->state != PL_NODE_UP)
            continue;
        for (uint32_t q = 0; q < r; q++)
            if (t->rank[q].node == n && !pl_state_final(t->rank[q].state))
                first = false;
        if (!first)
            continue;
        struct pl_kill k = { .id = t->id, .attempt = t->attempt,
                             .grace = KILL_GRACE };
        pl_orders_kill(d, n, &k);
    }
}

/* ------------------------------------------------------------ loss */

struct lost {
    struct pl_daemon *d;
    struct pl_node *n;
    const char *reason;
    bool spare;              /* the node left (its allocation ends): the
                                task runs again, not charged to --retries */
};

/* A task's agent is gone: its ranks there have ended; the task runs
 * again once its other ranks are stopped, while it has retries left. */
static void lost_task_cb(struct pl_dtask *t, void *arg)
{
    struct lost *l = arg;
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = l->reason };
    /* an MPI job dies with its launcher on rank 0's node */
    bool all = t->comm == PL_COMM_MPI && t->rank[0].node == l->n;

    /* once an attempt, if it spans several such nodes; a prefetched
     * task that never started is not charged either */
    if ((l->spare || pl_dtask_held(t)) && !t->lost)
        t->spared++;
    t->lost = true;
    for (uint32_t r = 0; r < t->ranks; r++) {
        if (!all && t->rank[r].node != l->n)
            continue;
        if (pl_dtask_rank_ended(l->d, t, r, PL_ST_FAILED, &c))
            return; /* the task ended and may be gone */
    }
}

void pl_agents_lost(struct pl_daemon *d, struct pl_node *n, const char *why)
{
    struct lost l = { d, n, "node-lost", false };

    pl_log(LOG_WARNING, "agent on %s lost: %s", n->name, why);
    pl_node_set_state(n, PL_NODE_LOST);
    pl_agents_record(d, n, "lost");
    pl_sched_node_tasks(d->sched, n, lost_task_cb, &l);
    pl_launch_node(d, n);
}

void pl_agents_leave(struct pl_daemon *d, struct pl_node *n, const char *why)
{
    struct lost l = { d, n, "node-left", true };
    struct pl_link *k = pl_agents_link(d, n);

    pl_log(LOG_NOTICE, "agent on %s leaves: %s", n->name, why);
    if (k && n->state == PL_NODE_UP)
        send_bare(d, k->rid, k->ridlen, PL_MSG_EXIT);
    pl_node_set_state(n, PL_NODE_GONE);
    pl_agents_record(d, n, "gone");
    pl_sched_node_tasks(d->sched, n, lost_task_cb, &l);
}

/* s between two ticks (1 s apart) that make a stall of the loop */
#define STALL 3.0

void pl_agents_tick(struct pl_daemon *d)
{
    /* Durations on the monotonic clock: a step of the wall clock marked
     * every agent lost.  A stall of our own loop (a long request, the
     * process stopped or starved) leaves the agents' heartbeats unread
     * on the socket, and judged them silent: after one, nobody is
     * judged until two heartbeats have had the time to be read. */
    double t = pl_mono();

    if (t - d->tick_at > STALL) {
        d->judge_after = t + 2 * d->cfg.heartbeat + 1;
        pl_log(LOG_WARNING, "the loop stalled for %.1f s: no agent is "
               "judged lost for %.0f s", t - d->tick_at,
               2 * d->cfg.heartbeat + 1);
    }
    d->tick_at = t;
    /* oldest word first: the first agent that spoke in time ends the
     * look (N.B. no PING here: an agent's HEARTBEAT is answered, so an
     * agent that sends us anything hears from us) */
    struct pl_link *l;
    while ((l = d->live_first)) {
        char why[64];
        if (l->node->state != PL_NODE_UP) {
            live_remove(d, l); /* lost or gone meanwhile */
            continue;
        }
        if (t < d->judge_after || t - l->seen <= d->cfg.lost_after)
            break;
        live_remove(d, l);
        snprintf(why, sizeof(why), "silent for %.0f s", t - l->seen);
        pl_agents_lost(d, l->node, why);
    }
}

void pl_agents_exit(struct pl_daemon *d)
{
    for (size_t k = 0; k < d->nlinks; k++)
        if (d->links[k]->node->state == PL_NODE_UP)
            send_bare(d, d->links[k]->rid, d->links[k]->ridlen, PL_MSG_EXIT);
}

/* ------------------------------------------------------------ events */

/* Tasks queued before the agents registered could not be checked at
 * submit: once every expected agent is here, fail those no node fits.
 * The answer depends on the task's shape only, and an array's tasks
 * share theirs: the last one's is kept (a fit on 1,000 nodes looks at
 * each of them, for each of 10 million queued tasks it was 10^10). */
struct fit {
    struct pl_daemon *d;
    bool grow;              /* it grows itself: what could never fit */
    bool known, fits;
    uint32_t ranks, cpr, gpr, nodes, rpn;
    bool excl;
    char why[160];
};

static void too_big_cb(struct pl_dtask *t, void *arg)
{
    struct fit *f = arg;
    char reason[200];

    if (t->state != PL_ST_QUEUED || t->pool)
        return;
    if (!f->known || f->ranks != t->ranks || f->cpr != t->cores_per_rank
        || f->gpr != t->gpus_per_rank || f->nodes != t->nodes_req
        || f->rpn != t->ranks_per_node || f->excl != t->exclusive) {
        f->fits = f->grow ? !pl_alloc_never_fits(f->d, t, f->why,
                                                 sizeof(f->why))
                          : pl_sched_fits(f->d->sched, t, f->why,
                                          sizeof(f->why));
        f->known = true;
        f->ranks = t->ranks;
        f->cpr = t->cores_per_rank;
        f->gpr = t->gpus_per_rank;
        f->nodes = t->nodes_req;
        f->rpn = t->ranks_per_node;
        f->excl = t->exclusive;
    }
    if (f->fits)
        return;
    snprintf(reason, sizeof(reason), "too large for this pilot: %s", f->why);
    pl_sched_dequeue(f->d->sched, t);
    pl_dtask_end(f->d, t, PL_ST_FAILED, reason);
}

/* 'rejoin': the agent of a node that was up registered again (it
 * reconnected): the nodes up are what they were, nothing to check. */
static void check_fit(struct pl_daemon *d, bool rejoin)
{
    struct fit f = { .d = d, .grow = pl_alloc_may_grow(d) };
    size_t up = 0;

    /* N.B. a look at every live task: not at each of 1,000 registrations
     * while nothing is queued, nor at a reconnection, nor once it was
     * made (a task submitted since was checked at its submit, and more
     * nodes fit more: issue 16, 1,000 agents joining a queue) */
    if (rejoin || d->fit_checked || pl_sched_queued(d->sched) == 0)
        return;
    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++)
        if (pl_sched_node_at(d->sched, k)->state == PL_NODE_UP)
            up++;
    /* a pilot that grows itself may yet fit them: only those no node
     * like its own could ever run fail (pl_alloc_never_fits()) */
    if ((int)up >= d->cfg.expected_agents) {
        pl_sched_node_tasks(d->sched, NULL, too_big_cb, &f);
        d->fit_checked = true;
    }
}

/* The result a Python call's end 'e' carries, in the transaction of its
 * final state (a file named must be the one its RUN gave). */
static void result_store(struct pl_daemon *d, const struct pl_dtask *t,
                         const struct pl_event *e)
{
    char path[PL_PATH_MAX + 64];
    struct pl_error err;
    struct pl_db_result r = {
        .id = t->id, .attempt = t->attempt, .status = e->result_status,
        .size = e->result_size, .data = e->result, .ndata = e->nresult,
        .file = e->result_file, .repr = e->result_repr,
    };

    if (e->result_file
        && (pl_path_task_result(d->dir, t->id, t->attempt, path,
                                sizeof(path)) < 0
            || strcmp(path, e->result_file))) {
        pl_daemon_bad_log(d, LOG_WARNING, "task %llu: a result file that is "
                          "not its own (ignored)", (unsigned long long)t->id);
        return;
    }
    if (pl_db_result_set(d->db, &r, &err) < 0)
        pl_log(LOG_ERR, "task %llu: its result: %s",
               (unsigned long long)t->id, err.text);
}

/* One state change of a rank on 'n' (an EVENTS entry, or an end a
 * REGISTER carries). */
static void agent_event(struct pl_daemon *d, struct pl_node *n,
                        const struct pl_event *e)
{
    struct pl_dtask *t = pl_sched_task_get(d->sched, e->id);
    char why[64];

    if ((!t || t->attempt != e->attempt) && e->lost)
        return; /* a pool task's rank, ended already (its pool stopped) */
    if (!t || !t->rank || t->attempt != e->attempt || e->rank >= t->ranks
        || t->rank[e->rank].node != n) {
        pl_daemon_bad_log(d, LOG_WARNING, "agent %s: event '%s' for task "
                          "%llu rank %llu attempt %llu that is not running "
                          "there (ignored)", n->name,
                          pl_state_name(e->state),
                          (unsigned long long)e->id,
                          (unsigned long long)e->rank,
                          (unsigned long long)e->attempt);
        return;
    }
    struct pl_db_change c = {
        .time = e->time ? e->time : pl_now(),
        .exit_code = (int)e->exit_code, .signal = (int)e->signal,
        .maxrss_kb = e->maxrss_kb, .reason = e->error,
    };
    /* an MPI launcher's events stand for all the job's ranks */
    uint32_t r0 = (uint32_t)e->rank, r1 = t->comm == PL_COMM_MPI ? t->ranks
                                                                : r0 + 1;
    switch (e->state) {
    case PL_ST_RUNNING:
        /* a prefetched rank its agent started on cores an end freed (the
         * end came first, in this message): it holds those now */
        if (e->ncores && t->ranks == 1 && t->rank[0].state == PL_ST_ASSIGNED) {
            if (pl_sched_pref_started(t, n, e->cores, e->ncores) < 0)
                pl_log(LOG_WARNING, "agent %s: task %llu started on cores "
                       "not all free here: %s", n->name,
                       (unsigned long long)t->id, strerror(errno));
            d->want_sched = true; /* room for another prefetch */
        }
        for (uint32_t r = r0; r < r1; r++)
            pl_dtask_rank_running(d, t, r, c.time, &c);
        break;
    case PL_ST_DONE:
    case PL_ST_FAILED:
    case PL_ST_CANCELED:
    case PL_ST_TIMEOUT:
        if (e->state == PL_ST_CANCELED && !c.reason)
            c.reason = "canceled";
        if (e->state == PL_ST_TIMEOUT && !c.reason)
            c.reason = "timeout";
        /* a rank that died by a signal: the node may be sick */
        if (e->state == PL_ST_FAILED && c.signal > 0)
            pl_vet_rank_signal(d, n);
        if (e->state == PL_ST_FAILED && !c.reason) {
            if (c.signal > 0)
                snprintf(why, sizeof(why), "killed by signal %d", c.signal);
            else
                snprintf(why, sizeof(why), "exit code %d", c.exit_code);
            c.reason = why;
        }
        /* a prefetched task its agent gave back unstarted (pilotd took
         * it back: daemon/prefetch.c): it runs again, not charged */
        if (e->lost && !t->pool && pl_dtask_held(t)
            && e->state == PL_ST_CANCELED) {
            if (!t->lost)
                t->spared++;
            t->lost = true;
            c.reason = "prefetched: taken back " PL_REASON_UNSTARTED;
            pl_dtask_rank_ended(d, t, 0, PL_ST_FAILED, &c);
            break;
        }
        if (e->lost && t->pool && t->fn != PL_FN_POOL) {
            pl_dtask_rank_lost(d, t, r0, &c);
            break;
        }
        if (t->fn == PL_FN_PYCALL && e->result_status != PL_PYR_NONE)
            result_store(d, t, e);
        if (e->use.has)
            c.use = &e->use;
        for (uint32_t r = r0; r < r1; r++) {
            if (pl_dtask_rank_ended(d, t, r, e->state, &c))
                break; /* the task ended and may be gone */
            c.use = NULL; /* an MPI launcher's figures: counted once */
        }
        break;
    default:
        pl_daemon_bad_log(d, LOG_WARNING, "agent %s: event with bad state "
                          "'%s'", n->name, pl_state_name(e->state));
        break;
    }
}

static void agent_events(struct pl_daemon *d, struct pl_link *l,
                         const struct pl_msg *m)
{
    const msgpack_object *arr;
    struct pl_error err;
    struct pl_out *o;

    if (pl_events_decode(m->body, &arr, &err) < 0) {
        pl_daemon_bad_log(d, LOG_WARNING, "agent %s: bad events: %s",
                          l->node->name, err.text);
        return;
    }
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        struct pl_event e;
        if (pl_event_decode(&arr->via.array.ptr[i], &e, &err) < 0) {
            pl_daemon_bad_log(d, LOG_WARNING, "agent %s: bad event: %s",
                              l->node->name, err.text);
            continue;
        }
        agent_event(d, l->node, &e);
        pl_event_clear(&e);
    }
    /* once committed, the agent may forget these ends */
    if ((o = pl_out_agent(d, l->node))) {
        o->needs_commit = true;
        o->ack = true;
        pl_ack_encode(&o->w, m->seq);
        pl_out_push(d, o);
    }
}

/* ------------------------------------------------------------ register */

/* A registering agent's tasks that pilotd does not know there: stop
 * them (pilotd ran them elsewhere, or gave them up). */
static void kill_strays(struct pl_daemon *d, struct pl_node *n,
                        const struct pl_register *reg)
{
    for (uint32_t i = 0; i < reg->nrunning; i++) {
        const struct pl_held *h = &reg->running[i];
        struct pl_dtask *t = pl_sched_task_get(d->sched, h->id);
        if (t && t->rank && t->attempt == h->attempt && h->rank < t->ranks
            && t->rank[h->rank].node == n
            && !pl_state_final(t->rank[h->rank].state))
            continue;
        pl_log(LOG_WARNING, "agent %s runs task %llu attempt %llu rank %llu, "
               "which is not its: stopping it", n->name,
               (unsigned long long)h->id, (unsigned long long)h->attempt,
               (unsigned long long)h->rank);
        struct pl_kill k = { .id = h->id, .attempt = h->attempt, .one = true,
                             .rank = h->rank, .grace = KILL_GRACE };
        pl_orders_kill(d, n, &k);
    }
}

/* The ranks on 'n' its agent no longer reports (a restarted agent, or
 * ones it ended and whose end was lost): they ended, the task runs
 * again.  Those whose RUN it had not read go again (pl_orders_again()). */
struct gone {
    struct pl_daemon *d;
    struct pl_node *n;
    const struct pl_register *reg;
    uint64_t last_run;       /* the last RUN the agent had read */
};

static void gone_cb(struct pl_dtask *t, void *arg)
{
    struct gone *g = arg;
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = "node-lost" };

    for (uint32_t r = 0; t->rank && r < pl_dtask_launched(t); r++) {
        struct pl_rank *k = &t->rank[r];
        /* N.B. a RUN the agent had not read when it registered goes
         * again (or is on its way: the agent ignores a second one) */
        if (k->node != g->n || pl_state_final(k->state)
            || k->run_seq > g->last_run
            || pl_register_runs(g->reg, t->id, t->attempt, r)
            || pl_register_ended(g->reg, t->id, t->attempt, r))
            continue;
        /* a prefetched rank: the same agent holds it still (it drops
         * them only with an event, or for another pilotd); a new agent
         * never started it, so it is not charged to --retries */
        if (k->pref && g->last_run != UINT64_MAX)
            continue;
        if (k->pref && !t->lost)
            t->spared++;
        t->lost = true;
        bool all = t->comm == PL_COMM_MPI && r == 0;
        for (uint32_t q = all ? 0 : r; q < (all ? t->ranks : r + 1); q++)
            if (pl_dtask_rank_ended(g->d, t, q, PL_ST_FAILED, &c))
                return; /* the task ended and may be gone */
    }
}

/* A new node and its link, or NULL (logged). */
static struct pl_link *node_join(struct pl_daemon *d,
                                 const struct pl_register *reg)
{
    struct pl_node *n = NULL;
    struct pl_link *l = NULL;

    if (pl_grow(&d->links, &d->caplinks, d->nlinks, 1, sizeof(*d->links))
            < 0
        || (!d->rids && !(d->rids = pl_keymap_new()))
        || !(l = calloc(1, sizeof(*l)))
        || !(n = pl_node_new(reg->node, reg->cpu, reg->ncpu, reg->gpus))
        || pl_sched_node_add(d->sched, n) < 0) {
        pl_log_error("node %s", reg->node);
        pl_node_free(n);
        free(l);
        return NULL;
    }
    l->node = n;
    d->links[d->nlinks++] = l;
    return l;
}

static void agent_register(struct pl_daemon *d, const void *rid, size_t ridlen,
                           const struct pl_msg *m)
{
    struct pl_error err;
    struct pl_register reg;
    struct pl_node *n;
    struct pl_link *l = NULL;

    if (pl_register_decode(m->body, &reg, &err) < 0) {
        pl_daemon_bad_log(d, LOG_WARNING, "bad register from an agent: %s",
                          err.text);
        return;
    }
    if (ridlen > sizeof(l->rid)) {
        pl_daemon_bad_log(d, LOG_WARNING, "bad register from an agent: "
                          "routing id of %zu bytes", ridlen);
        goto done;
    }
    if (d->stopping)
        goto done;
    if ((n = pl_sched_node_find(d->sched, reg.node))
        && !(l = pl_agents_link(d, n)))
        goto done; /* cannot be: a node joins with its link */
    if (n && n->state == PL_NODE_UP
        && (l->ridlen != ridlen || memcmp(l->rid, rid, ridlen))
        && (long)reg.pid != l->pid
        && pl_mono() - l->seen < d->cfg.lost_after) {
        /* one agent per node: the one that holds it lives (an agent of
         * a healed network cut, after a replacement started) */
        pl_log(LOG_WARNING, "a second agent on %s (pid %llu) while pid %ld "
               "serves it: telling it to exit", reg.node,
               (unsigned long long)reg.pid, l->pid);
        send_bare(d, rid, ridlen, PL_MSG_EXIT);
        goto done;
    }
    bool first = !n;
    bool was_up = n && n->state == PL_NODE_UP;
    if (n) {
        /* it reconnected, or restarted: what it no longer runs ended; a
         * new agent process knew none of our RUNs */
        struct gone g = { d, n, &reg,
                          (long)reg.pid == l->pid ? reg.last_run
                                                  : UINT64_MAX };
        pl_sched_node_tasks(d->sched, n, gone_cb, &g);
        if (n->ncores != reg.ncpu || n->ngpus != pl_strv_len(reg.gpus))
            pl_log(LOG_WARNING, "agent on %s came back with other resources "
                   "(%u cores); keeping %u", reg.node, reg.ncpu, n->ncores);
        pl_log(LOG_NOTICE, "agent on %s rejoined (pid %llu, %u running, %u "
               "ended meanwhile)", reg.node, (unsigned long long)reg.pid,
               reg.nrunning, reg.nended);
    }
    else {
        if (!(l = node_join(d, &reg)))
            goto done;
        n = l->node;
        pl_log(LOG_NOTICE, "agent on %s joined: %u cores, %u gpus (pid %llu, "
               "%u running, %u ended)", reg.node, reg.ncpu, n->ngpus,
               (unsigned long long)reg.pid, reg.nrunning, reg.nended);
    }
    bool same = (long)reg.pid == l->pid;
    /* the link by its new routing id: a key it holds, so that a rid it
     * cannot hold leaves it known by its old one */
    pl_keymap_del(d->rids, l->rid, l->ridlen);
    memcpy(l->rid, rid, ridlen);
    l->ridlen = ridlen;
    if (pl_keymap_put(d->rids, l->rid, l->ridlen, l) < 0)
        pl_log(LOG_ERR, "node %s: out of memory: its messages are taken "
               "as from an agent that did not register", n->name);
    l->pid = (long)reg.pid;
    live_seen(d, l);
    pl_node_set_state(n, PL_NODE_UP);
    pl_agents_record(d, n, "up");
    /* what it did not read of our RUNs and KILLs goes again; a new
     * agent process read none, and what the old one ran has ended */
    if (same)
        pl_orders_again(d, l, reg.last_run);
    else
        pl_orders_forget(l);
    /* a restarted pilotd: take back the ranks the database put here */
    pl_recover_adopt(d, n, &reg);
    kill_strays(d, n, &reg);
    /* what ended while no pilotd could store it */
    for (uint32_t i = 0; i < reg.nended; i++)
        agent_event(d, n, &reg.ended[i]);
    /* prefetched tasks it started on the cores of those ends, whose
     * 'running' may not have reached us (or a pilotd before us) */
    for (uint32_t i = 0; i < reg.nrunning; i++) {
        const struct pl_held *h = &reg.running[i];
        struct pl_dtask *t = h->ncores ? pl_sched_task_get(d->sched, h->id)
                                       : NULL;
        if (!t || !t->rank || t->ranks != 1 || t->attempt != h->attempt
            || t->rank[0].node != n || t->rank[0].ncores
            || pl_state_final(t->rank[0].state))
            continue;
        if (pl_sched_pref_started(t, n, h->cores, h->ncores) < 0)
            pl_log(LOG_WARNING, "agent %s: task %llu runs on cores not all "
                   "free here: %s", n->name, (unsigned long long)t->id,
                   strerror(errno));
        pl_dtask_rank_running(d, t, 0, pl_now(), NULL);
        d->want_sched = true;
    }
    /* WELCOME answers register 'seq': the agent then forgets the ends
     * that register carried, so it leaves only once they are committed */
    struct pl_out *o = pl_out_agent(d, n);
    if (o) {
        struct pl_welcome wl = { .node = n->name, .instance = d->instance,
                                 .heartbeat = d->cfg.heartbeat };
        o->needs_commit = true;
        pl_welcome_encode(&o->w, m->seq, &wl);
        pl_out_push(d, o);
    }
    /* a node of a grown allocation: its job and end (docs/grow.md) */
    pl_alloc_joined(d, n, &reg);
    /* after WELCOME: a VET before it would be dropped */
    pl_vet_joined(d, n, first);
    check_fit(d, was_up);
done:
    pl_register_clear(&reg);
}

/* ------------------------------------------------------------ the socket */

/* One decoded message from routing id 'rid'. */
static void agent_msg(struct pl_daemon *d, const void *rid, size_t ridlen,
                      const struct pl_msg *m)
{
    struct pl_link *l = pl_agents_link_by_rid(d, rid, ridlen);
    struct pl_error err;
    struct pl_pull p;
    uint64_t got;

    if (m->type == PL_MSG_REGISTER) {
        agent_register(d, rid, ridlen, m);
        return;
    }
    if (!l) {
        /* an agent of the pilotd before us, or one we forgot: it
         * registers again, with what it runs */
        pl_daemon_bad_log(d, LOG_INFO, "%s from an agent that did not "
                          "register: asking it to",
                          pl_msg_type_name(m->type));
        send_bare(d, rid, ridlen, PL_MSG_REREGISTER);
        return;
    }
    if (l->node->state != PL_NODE_UP) {
        /* a lost agent is back (a network cut healed): its tasks were
         * given up; it registers again, and what it still runs of them
         * is stopped */
        pl_daemon_bad_log(d, LOG_NOTICE, "agent on %s is back: asking it to "
                          "register", l->node->name);
        send_bare(d, l->rid, l->ridlen, PL_MSG_REREGISTER);
        return;
    }
    live_seen(d, l); /* any message is a sign of life */
    switch (m->type) {
    case PL_MSG_PULL:
        if (pl_pull_decode(m->body, &p, &err) < 0)
            pl_daemon_bad_log(d, LOG_WARNING, "agent %s: bad pull: %s",
                              l->node->name, err.text);
        else
            d->want_sched = true;
        break;
    case PL_MSG_EVENTS:
        agent_events(d, l, m);
        break;
    case PL_MSG_HEARTBEAT:
        /* the agent says it only when it has said nothing else for a
         * heartbeat, and has heard nothing from us: it hears us now */
        send_bare(d, l->rid, l->ridlen, PL_MSG_PING);
        break;
    case PL_MSG_POOL_READY:
        pl_poolctl_ready(d, l->node, m);
        break;
    case PL_MSG_VET_RESULT:
        pl_vet_result(d, l->node, m);
        break;
    case PL_MSG_GOT:
        if (pl_got_decode(m->body, &got, &err) < 0)
            pl_daemon_bad_log(d, LOG_WARNING, "agent %s: bad got: %s",
                              l->node->name, err.text);
        else
            pl_orders_got(l, got);
        break;
    default:
        pl_daemon_bad_log(d, LOG_WARNING, "agent %s sent unexpected %s",
                          l->node->name, pl_msg_type_name(m->type));
        break;
    }
}

/* One frame from routing id 'rid'. */
static void agent_frame(struct pl_daemon *d, const void *rid, size_t ridlen,
                        const void *buf, size_t len)
{
    struct pl_msg m;
    struct pl_error err;

    if (pl_msg_decode(buf, len, &m, &err) < 0) {
        pl_daemon_bad_log(d, LOG_WARNING, "bad message on the agent socket: "
                          "%s", err.text);
        return;
    }
    agent_msg(d, rid, ridlen, &m);
    pl_msg_release(&m);
}

void pl_agents_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct pl_daemon *d = arg;
    (void)zw;
    (void)revents;

    pl_daemon_recv(d, d->asock, agent_frame, "agent socket");
}
