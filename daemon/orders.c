/* daemon/orders.c - RUN and KILL to the agents: numbered, acknowledged,
 * sent again until they are
 *
 * A RUN or KILL can be lost on its way: the agent's connection breaks
 * (a reconnect, a TCP reset, a frame its socket refused), and ZeroMQ
 * drops what was queued on it.  A lost RUN left its tasks assigned for
 * ever, their cores held and `pilot wait` waiting; a lost KILL made an
 * acknowledged cancel do nothing (issue 12).  So both are numbered
 * together per agent (the seq of their message), remembered here until
 * the agent's GOT (or a REGISTER's last_run) says it read them, and sent
 * again: at once to an agent that registers again saying it did not
 * read them, and after ORDER_RESEND seconds without a GOT.  A RUN goes
 * again as a new RUN of the ranks still assigned that it carried (the
 * agent ignores a rank it runs or has ended: its events tell); a KILL
 * goes again as it was.
 *
 * And the bound: a task assigned for cfg.start_timeout seconds and not
 * running (its agent never started it, whatever the reason) is stopped
 * there and queued again, as a task of a lost node is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_private.h"
#include "proto/log.h"

/* s without a GOT before a RUN or KILL goes again */
#define ORDER_RESEND 5.0

/* A RUN (kill false) or KILL sent and not acknowledged. */
struct pl_order {
    uint64_t seq;
    double sent;             /* pl_mono() */
    bool kill;
    struct pl_kill k;        /* a KILL's */
};

/* A task placed, for the bound on 'assigned'. */
struct pl_placed {
    uint64_t id;
    uint32_t attempt;
    double at;               /* pl_mono() */
};

uint64_t pl_orders_add(struct pl_link *l, const struct pl_kill *k)
{
    uint64_t seq = ++l->run_seq;

    /* N.B. out of memory it is not remembered: not sent again */
    if (pl_grow(&l->orders, &l->caporders, l->norders, 1,
                sizeof(*l->orders)) < 0) {
        pl_log(LOG_ERR, "%s %llu to %s: out of memory: it will not be sent "
               "again if lost", k ? "kill" : "run", (unsigned long long)seq,
               l->node->name);
        return seq;
    }
    l->orders[l->norders++] = (struct pl_order){
        .seq = seq, .sent = pl_mono(), .kill = k != NULL,
        .k = k ? *k : (struct pl_kill){ 0 },
    };
    return seq;
}

void pl_orders_kill(struct pl_daemon *d, struct pl_node *n,
                    const struct pl_kill *k)
{
    struct pl_link *l = pl_agents_link(d, n);
    struct pl_out *o;

    if (!l || !(o = pl_out_agent(d, n)))
        return;
    pl_kill_encode(&o->w, pl_orders_add(l, k), k);
    pl_out_push(d, o);
}

void pl_orders_got(struct pl_link *l, uint64_t got)
{
    size_t k = 0;

    if (got > l->run_seq)
        got = l->run_seq; /* a seq we never sent acknowledges nothing */
    if (got > l->got)
        l->got = got;
    for (size_t i = 0; i < l->norders; i++)
        if (l->orders[i].seq > l->got)
            l->orders[k++] = l->orders[i];
    l->norders = k;
}

void pl_orders_forget(struct pl_link *l)
{
    l->norders = 0;
    l->got = l->run_seq; /* a new agent process: nothing is on its way */
}

void pl_orders_free(struct pl_link *l)
{
    free(l->orders);
    l->orders = NULL;
    l->norders = l->caporders = 0;
}

struct again {
    struct pl_daemon *d;
    struct pl_node *n;
    uint64_t seq;
    uint32_t ranks;          /* marked to go again */
};

/* The ranks of 't' the RUN a->seq carried to a->n that still wait for
 * their start: they go in the next RUN (pl_dispatch_send()). */
static void again_cb(struct pl_dtask *t, void *arg)
{
    struct again *a = arg;
    bool marked = false;

    if (t->state != PL_ST_ASSIGNED || !t->rank)
        return;
    for (uint32_t r = 0; r < pl_dtask_launched(t); r++) {
        struct pl_rank *k = &t->rank[r];
        if (k->node != a->n || k->state != PL_ST_ASSIGNED
            || k->run_seq != a->seq)
            continue;
        k->run_seq = RUN_UNSENT;
        marked = true;
        a->ranks++;
    }
    /* once: pl_dispatch_send() packs each task's waiting ranks */
    if (marked && pl_dispatch_unsent(a->d, t) < 0)
        pl_log(LOG_ERR, "task %llu: run again: out of memory",
               (unsigned long long)t->id);
}

/* Send order 'i' of 'l' again ('why' for the log); it leaves the list
 * (a KILL comes back under a new seq). */
static void send_again(struct pl_daemon *d, struct pl_link *l, size_t i,
                       const char *why)
{
    struct pl_order o = l->orders[i];

    memmove(&l->orders[i], &l->orders[i + 1],
            (l->norders - i - 1) * sizeof(*l->orders));
    l->norders--;
    if (o.kill) {
        pl_log(LOG_NOTICE, "kill %llu of task %llu to %s %s: sending it "
               "again", (unsigned long long)o.seq,
               (unsigned long long)o.k.id, l->node->name, why);
        pl_orders_kill(d, l->node, &o.k);
        return;
    }
    struct again a = { d, l->node, o.seq, 0 };
    /* N.B. a walk of every task: a lost RUN is rare */
    pl_sched_node_tasks(d->sched, l->node, again_cb, &a);
    if (a.ranks)
        pl_log(LOG_NOTICE, "run %llu to %s %s: sending its %u ranks that "
               "have not started again", (unsigned long long)o.seq,
               l->node->name, why, a.ranks);
}

void pl_orders_again(struct pl_daemon *d, struct pl_link *l, uint64_t after)
{
    pl_orders_got(l, after);
    /* the KILLs sent again join the end of the list */
    for (size_t n = l->norders; n > 0; n--)
        send_again(d, l, 0, "was not read before the agent registered");
}

void pl_orders_placed(struct pl_daemon *d, const struct pl_dtask *t)
{
    /* N.B. out of memory the task has no bound */
    if (pl_grow(&d->placed, &d->capplaced, d->nplaced, 1,
                sizeof(*d->placed)) == 0)
        d->placed[d->nplaced++] = (struct pl_placed){ t->id, t->attempt,
                                                      pl_mono() };
}

/* 't' was sent to its agents start_timeout ago and has not started: its
 * ranks that did not are stopped and end as lost; the task runs again
 * (if it has retries left), as after the loss of a node. */
static void not_started(struct pl_daemon *d, struct pl_dtask *t)
{
    char why[160];
    const char *node = NULL;

    for (uint32_t r = 0; r < pl_dtask_launched(t) && !node; r++)
        if (t->rank[r].state == PL_ST_ASSIGNED)
            node = t->rank[r].node->name;
    snprintf(why, sizeof(why), "not started within %.0f s of its run to %s",
             d->cfg.start_timeout, node ? node : "its agents");
    pl_log(LOG_WARNING, "task %llu attempt %u: %s: queued again",
           (unsigned long long)t->id, t->attempt, why);
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = why };
    t->lost = true;
    for (uint32_t r = 0; r < pl_dtask_launched(t); r++) {
        struct pl_rank *k = &t->rank[r];
        if (k->state != PL_ST_ASSIGNED)
            continue;
        /* in case the RUN reaches it yet: nothing of it may run beside
         * the next attempt */
        if (k->node->state == PL_NODE_UP) {
            struct pl_kill kill = { .id = t->id, .attempt = t->attempt,
                                    .one = true, .rank = r,
                                    .grace = 0 };
            pl_orders_kill(d, k->node, &kill);
        }
        bool all = t->comm == PL_COMM_MPI && r == 0;
        for (uint32_t q = all ? 0 : r; q < (all ? t->ranks : r + 1); q++)
            if (pl_dtask_rank_ended(d, t, q, PL_ST_FAILED, &c))
                return; /* the task ended and may be gone */
    }
}

void pl_orders_tick(struct pl_daemon *d)
{
    double now = pl_mono();
    size_t m = 0;

    for (size_t k = 0; k < d->nlinks; k++) {
        struct pl_link *l = d->links[k];
        if (l->node->state != PL_NODE_UP)
            continue;
        for (size_t i = 0; i < l->norders;) {
            if (now - l->orders[i].sent < ORDER_RESEND)
                i++;
            else
                send_again(d, l, i, "not acknowledged in 5 s");
        }
    }
    /* the bound on 'assigned'; the list keeps the tasks still assigned */
    for (size_t i = 0; i < d->nplaced; i++) {
        struct pl_placed p = d->placed[i];
        struct pl_dtask *t = pl_sched_task_get(d->sched, p.id);
        if (!t || t->attempt != p.attempt || t->state != PL_ST_ASSIGNED
            || !t->rank)
            continue;
        /* prefetched: it waits for an end on its node, not for its RUN;
         * the bound runs from when a pass gives it cores, or takes it
         * back (its agent's answer may be lost with the RUN) */
        if (t->rank[0].pref && !t->rank[0].recalled)
            p.at = now;
        if (d->cfg.start_timeout > 0 && now - p.at > d->cfg.start_timeout
            && !d->stopping && !t->orphans) {
            not_started(d, t);
            continue;
        }
        d->placed[m++] = p;
    }
    d->nplaced = m;
}

void pl_orders_free_all(struct pl_daemon *d)
{
    free(d->placed);
    d->placed = NULL;
    d->nplaced = d->capplaced = 0;
}
