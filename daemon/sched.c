/* daemon/sched.c - the live tasks, the queue, and the scheduling pass
 * (placement on the nodes: place.c) */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/keymap.h"
#include "daemon/placeidx.h"
#include "daemon/pool.h"
#include "daemon/queue.h"
#include "daemon/sched.h"
#include "daemon/sched_private.h"
#include "proto/strv.h"
#include "proto/msg.h"
#include "proto/state.h"

/* How far one pass looks past tasks that fit nowhere: bounds the cost of
 * a pass when the head of a long queue is blocked (1,000 skips cost
 * about 10 us). */
#define SCAN_MAX 1000

struct pl_sched *pl_sched_new(void)
{
    struct pl_sched *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    if (!(s->idx = pl_placeidx_new()) || !(s->names = pl_keymap_new())) {
        pl_placeidx_free(s->idx);
        free(s);
        errno = ENOMEM;
        return NULL;
    }
    return s;
}

/* The level of 'prio', or NULL if there is none yet. */
static struct level *level_find(const struct pl_sched *s, int32_t prio)
{
    size_t lo = 0, hi = s->nlv;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->lv[mid]->prio == prio)
            return s->lv[mid];
        if (s->lv[mid]->prio > prio)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The level of 'prio', made if needed.  NULL: ENOMEM. */
static struct level *level_get(struct pl_sched *s, int32_t prio)
{
    struct level *l = level_find(s, prio), **nlv;
    size_t at = 0;

    if (l)
        return l;
    if (!(nlv = realloc(s->lv, (s->nlv + 1) * sizeof(*nlv))))
        return NULL;
    s->lv = nlv;
    if (!(l = malloc(sizeof(*l))))
        return NULL;
    l->prio = prio;
    TAILQ_INIT(&l->q);
    while (at < s->nlv && s->lv[at]->prio > prio)
        at++;
    memmove(&s->lv[at + 1], &s->lv[at], (s->nlv - at) * sizeof(*s->lv));
    s->lv[at] = l;
    s->nlv++;
    return l;
}

/* Into its priority's FIFO (whose level exists: made by task_add). */
static void enqueue(struct pl_sched *s, struct pl_dtask *t, bool head)
{
    struct level *l = level_find(s, t->priority);

    if (head)
        TAILQ_INSERT_HEAD(&l->q, t, qent);
    else
        TAILQ_INSERT_TAIL(&l->q, t, qent);
    t->inq = true;
    s->nqueued++;
}

static void ranks_free(struct pl_dtask *t)
{
    for (uint32_t r = 0; t->rank && r < t->ranks; r++) {
        free(t->rank[r].core_idx);
        free(t->rank[r].gpu_idx);
        free(t->rank[r].orphan);
    }
    t->orphans = 0;
    free(t->rank);
    t->rank = NULL;
    t->nnodes = 0;
    free(t->nodelist);
    t->nodelist = NULL;
}

static void task_free(struct pl_dtask *t)
{
    pl_strv_free(t->argv);
    pl_strv_free(t->env);
    free(t->cwd);
    ranks_free(t);
    free(t->waiters);
    free(t->deps);
    free(t->watches);
    free(t);
}

void pl_sched_free(struct pl_sched *s)
{
    if (!s)
        return;
    int saved = errno;
    for (size_t i = 0; i < s->tab_hi; i++)
        if (s->tab[i])
            task_free(s->tab[i]);
    free(s->tab);
    for (size_t i = 0; i < s->nnodes; i++)
        pl_node_free(s->nodes[i]);
    free(s->nodes);
    free(s->resv_node);
    pl_placeidx_free(s->idx);
    pl_keymap_free(s->names);
    for (size_t i = 0; i < s->nlv; i++)
        free(s->lv[i]);
    free(s->lv);
    for (size_t i = 0; i < s->runs.n; i++)
        pl_qrun_free(s->runs.v[i]);
    free(s->runs.v);
    if (s->fill_free)
        s->fill_free(s->fill_arg);
    free(s);
    errno = saved;
}

/* Room in the table for ids up to 'id'.  0, or -1 (ENOMEM).  A new
 * table is calloc'd (a large one is fresh zero pages) and only the part
 * ever written is copied: the ids of millions of queued run elements
 * cost no memory until they are tasks. */
static int tab_grow(struct pl_sched *s, uint64_t id)
{
    if (id < s->cap)
        return 0;
    size_t ncap = s->cap ? s->cap : 1024;
    while (ncap <= id)
        ncap *= 2;
    struct pl_dtask **ntab = calloc(ncap, sizeof(*ntab));
    if (!ntab)
        return -1;
    if (s->tab_hi)
        memcpy(ntab, s->tab, s->tab_hi * sizeof(*ntab));
    free(s->tab);
    s->tab = ntab;
    s->cap = ncap;
    return 0;
}

/* tab[id] = t, and the part of the table ever written grows. */
static void tab_set(struct pl_sched *s, uint64_t id, struct pl_dtask *t)
{
    s->tab[id] = t;
    if (id >= s->tab_hi)
        s->tab_hi = id + 1;
}

struct pl_dtask *pl_sched_task_add(struct pl_sched *s, uint64_t id,
                                   bool queue, int32_t priority, char ***argv,
                                   char ***env, char **cwd)
{
    struct pl_dtask *t;

    if (id == 0 || id > PL_SCHED_ID_MAX) {
        errno = EOVERFLOW;
        return NULL;
    }
    if (!level_get(s, priority) || tab_grow(s, id) < 0)
        return NULL;
    if (s->tab[id] || pl_qruns_find(&s->runs, id)) {
        errno = EEXIST;
        return NULL;
    }
    if (!(t = calloc(1, sizeof(*t))))
        return NULL;
    t->id = id;
    t->priority = priority;
    t->ranks = 1;
    t->cores_per_rank = 1;
    t->fail = 0;
    t->exit_code = t->signal = -1;
    t->argv = *argv;
    t->env = *env;
    t->cwd = *cwd;
    *argv = NULL;
    *env = NULL;
    *cwd = NULL;
    tab_set(s, id, t);
    if (queue)
        enqueue(s, t, false);
    return t;
}

void pl_sched_set_time_left(struct pl_sched *s, double secs)
{
    s->time_left = secs;
}

double pl_sched_time_left(const struct pl_sched *s)
{
    return s->time_left;
}

uint64_t pl_sched_max_id(const struct pl_sched *s)
{
    return s->cap ? s->cap - 1 : 0;
}

struct pl_dtask *pl_sched_run_add(struct pl_sched *s, uint64_t id0,
                                  uint64_t n, uint64_t idx0, uint64_t step,
                                  int32_t priority, char ***argv, char ***env,
                                  char **cwd)
{
    struct pl_qrun *r;
    struct level *l;

    if (id0 == 0 || n == 0 || id0 + n - 1 > PL_SCHED_ID_MAX) {
        errno = EOVERFLOW;
        return NULL;
    }
    /* ids are handed out in order: a new run's are above every live one
     * (the table is only grown: its entries stay NULL) */
    if (id0 < s->cap && (s->tab[id0] || pl_qruns_find(&s->runs, id0)
                         || pl_qruns_find(&s->runs, id0 + n - 1))) {
        errno = EEXIST;
        return NULL;
    }
    if (!(l = level_get(s, priority)) || tab_grow(s, id0 + n - 1) < 0
        || !(r = pl_qrun_new(id0, n, idx0, step, argv, env, cwd)))
        return NULL;
    if (pl_qruns_add(&s->runs, r) < 0) {
        pl_qrun_free(r);
        return NULL;
    }
    r->proto.priority = priority;
    r->proto.state = PL_ST_QUEUED;
    TAILQ_INSERT_TAIL(&l->q, &r->proto, qent);
    r->proto.inq = true;
    s->nqueued += n;
    s->run_elems += n;
    return &r->proto;
}

void pl_sched_set_fill(struct pl_sched *s, pl_sched_fill_f fill, void *arg,
                       void (*free_arg)(void *arg))
{
    if (s->fill_free)
        s->fill_free(s->fill_arg);
    s->fill = fill;
    s->fill_arg = arg;
    s->fill_free = free_arg;
}

size_t pl_sched_runs(const struct pl_sched *s, uint64_t *elems)
{
    if (elems)
        *elems = s->run_elems;
    return s->runs.n;
}

/* A run is out of the queue and freed. */
static void run_drop(struct pl_sched *s, struct pl_qrun *r)
{
    TAILQ_REMOVE(&level_find(s, r->proto.priority)->q, &r->proto, qent);
    pl_qruns_del(&s->runs, r);
    pl_qrun_free(r);
}

/* Element 'id' of run 'r' becomes a task of its own, in the run's place
 * in the queue (the run splits around it); 'r' is freed once empty.
 * NULL: ENOMEM (or the fill's error), and nothing changed; or ENOENT:
 * the fill found no row for it, and it left the queue (a row that cannot
 * be read stays in the database as it is, as before runs). */
static struct pl_dtask *materialize_as(struct pl_sched *s,
                                       struct pl_qrun *r, uint64_t id,
                                       bool bare)
{
    struct pl_dqueue *q = &level_find(s, r->proto.priority)->q;
    struct pl_qrun *tail = NULL;
    struct pl_dtask *t = bare ? pl_qrun_elem_bare(r, id)
                              : pl_qrun_elem(r, id);

    if (!t)
        return NULL;
    if (!bare && !r->proto.argv && s->fill
        && s->fill(t, s->fill_arg) < 0) {
        int e = errno;
        task_free(t);
        t = NULL;
        if (e != ENOENT) {
            errno = e;
            return NULL;
        }
    }
    if (id != r->first && id != r->end - 1) {
        uint64_t end = r->end;
        if ((tail = pl_qrun_tail(r, id + 1)))
            r->end = id; /* before the tail joins the sorted runs */
        if (!tail || pl_qruns_add(&s->runs, tail) < 0) {
            r->end = end;
            pl_qrun_free(tail);
            task_free(t);
            errno = ENOMEM;
            return NULL;
        }
    }
    if (t) {
        tab_set(s, id, t);
        t->inq = true;
    }
    else
        s->nqueued--;
    s->run_elems--;
    if (id == r->first) {
        if (t)
            TAILQ_INSERT_BEFORE(&r->proto, t, qent);
        r->first++;
    }
    else if (!tail) {
        if (t)
            TAILQ_INSERT_AFTER(q, &r->proto, t, qent);
        r->end--;
    }
    else {
        TAILQ_INSERT_AFTER(q, &r->proto, &tail->proto, qent);
        if (t)
            TAILQ_INSERT_AFTER(q, &r->proto, t, qent);
        tail->proto.inq = true;
    }
    if (r->first == r->end)
        run_drop(s, r);
    if (!t)
        errno = ENOENT;
    return t;
}

static struct pl_dtask *materialize(struct pl_sched *s, struct pl_qrun *r,
                                    uint64_t id)
{
    return materialize_as(s, r, id, false);
}

/* Task 'id', an element of a run made a task (without its strings when
 * 'bare'), or NULL (errno 0: not live). */
static struct pl_dtask *task_get(struct pl_sched *s, uint64_t id, bool bare)
{
    struct pl_qrun *r;

    if (id < s->cap && s->tab[id])
        return s->tab[id];
    errno = 0;
    if (!s->runs.n || !(r = pl_qruns_find(&s->runs, id)))
        return NULL;
    return materialize_as(s, r, id, bare);
}

struct pl_dtask *pl_sched_task_get_bare(struct pl_sched *s, uint64_t id)
{
    return task_get(s, id, true);
}

struct pl_dtask *pl_sched_task_peek(const struct pl_sched *s, uint64_t id)
{
    return id < s->cap ? s->tab[id] : NULL;
}

bool pl_sched_live(const struct pl_sched *s, uint64_t id)
{
    return pl_sched_task_peek(s, id)
           || (s->runs.n && pl_qruns_find(&s->runs, id));
}

struct pl_dtask *pl_sched_task_get(struct pl_sched *s, uint64_t id)
{
    return task_get(s, id, false);
}

static void rank_release(struct pl_dtask *t, uint32_t r)
{
    struct pl_rank *k = &t->rank[r];

    if (k->pref)
        sched_pref_drop(t, r); /* it held no cores */
    if (k->node && t->pool && t->fn != PL_FN_POOL) {
        /* a pool task's rank holds a worker, no cores */
        pl_pool_rank_release(t->pool, t, r);
        k->node = NULL;
        return;
    }
    if (k->node) {
        if (r == 0 && t->port) {
            pl_node_port_free(k->node, t->port);
            t->port = 0;
        }
        pl_node_release(k->node, t->id, k->core_idx, k->ncores, k->gpu_idx,
                        k->ngpus);
        k->node = NULL;
    }
}

void pl_sched_rank_release(struct pl_dtask *t, uint32_t r)
{
    /* an exclusive task keeps its nodes whole until it ends */
    if (t->rank && r < t->ranks && !t->exclusive)
        rank_release(t, r);
}

/* Give back every rank's cores and forget the placement. */
void sched_release(struct pl_dtask *t)
{
    for (uint32_t r = 0; t->rank && r < t->ranks; r++)
        rank_release(t, r);
    ranks_free(t);
    t->running = t->ended = 0;
    t->ended_at = 0;
    t->fail = 0;
    t->lost = false;
    t->exit_code = t->signal = -1;
    t->reason[0] = '\0';
}

void pl_sched_dequeue(struct pl_sched *s, struct pl_dtask *t)
{
    if (t->inpq)
        pl_pool_dequeue(t->pool, t);
    if (t->inq) {
        TAILQ_REMOVE(&level_find(s, t->priority)->q, t, qent);
        t->inq = false;
        s->nqueued--;
    }
}

void pl_sched_task_remove(struct pl_sched *s, struct pl_dtask *t)
{
    pl_sched_dequeue(s, t);
    sched_release(t);
    s->tab[t->id] = NULL;
    task_free(t);
}

void pl_sched_requeue(struct pl_sched *s, struct pl_dtask *t, bool head)
{
    sched_release(t);
    t->cancel = false;
    t->pool_lost = false;
    if (t->pool && t->fn != PL_FN_POOL) {
        if (!t->inpq)
            pl_pool_enqueue(t->pool, t, head);
    }
    else if (!t->inq)
        enqueue(s, t, head);
}

size_t pl_sched_queued(const struct pl_sched *s)
{
    return s->nqueued;
}


void pl_sched_queue_each(struct pl_sched *s,
                         void (*cb)(const struct pl_dtask *t, uint64_t n,
                                    void *arg),
                         void *arg)
{
    for (size_t li = 0; li < s->nlv; li++) {
        struct pl_dqueue *q = &s->lv[li]->q;
        struct pl_dtask *t, *next;
        for (t = TAILQ_FIRST(q); t; t = next) {
            next = TAILQ_NEXT(t, qent);
            if (!t->run) {
                cb(t, 1, arg);
                continue;
            }
            struct pl_qrun *r = t->run;
            uint64_t n = r->end - r->first;
            if (r->proto.argv) {
                cb(&r->proto, n, arg); /* the shape its elements share */
                continue;
            }
            /* made before 'next': the run's place, not visited again */
            struct pl_dtask *h = materialize(s, r, r->first);
            if (h)
                cb(h, n, arg);
        }
    }
}

void pl_sched_node_tasks(struct pl_sched *s, struct pl_node *n,
                         void (*cb)(struct pl_dtask *t, void *arg), void *arg)
{
    for (size_t i = 0; i < s->tab_hi; i++) {
        struct pl_dtask *t = s->tab[i];
        bool on = !n;
        for (uint32_t r = 0; t && !on && t->rank && r < t->ranks; r++)
            on = t->rank[r].node == n;
        if (t && on)
            cb(t, arg); /* may requeue or remove t */
    }
    /* a run's elements share what a callback for all tasks judges: the
     * head stands for them, unless it went */
    for (size_t i = 0; !n && i < s->runs.n;) {
        struct pl_qrun *r = s->runs.v[i];
        uint64_t id = r->first, end = r->end;
        bool gone = true;
        while (gone && r && id < end) {
            struct pl_dtask *t = materialize(s, r, id);
            if (!t && errno != ENOENT)
                return;
            if (t)
                cb(t, arg);
            gone = !pl_sched_task_peek(s, id);
            if (++id < end)
                r = pl_qruns_find(&s->runs, id);
        }
        if (!gone)
            i++;
    }
}


size_t pl_sched_ahead(const struct pl_sched *s, const struct pl_dtask *t)
{
    size_t n = 0;

    for (size_t li = 0; li < s->nlv; li++) {
        const struct pl_dtask *u;
        TAILQ_FOREACH(u, &s->lv[li]->q, qent) {
            if (u == t)
                return n;
            n += u->run ? u->run->end - u->run->first : 1;
        }
    }
    return n;
}

/* Whether 'a' and 'b' ask for the same: one cannot start where the other
 * could not. */
static bool same_shape(const struct pl_dtask *a, const struct pl_dtask *b)
{
    return a->ranks == b->ranks && a->cores_per_rank == b->cores_per_rank
           && a->gpus_per_rank == b->gpus_per_rank
           && a->nodes_req == b->nodes_req
           && a->ranks_per_node == b->ranks_per_node
           && a->exclusive == b->exclusive && a->vetted == b->vetted
           && a->comm == b->comm && a->timeout == b->timeout;
}

size_t pl_sched_run(struct pl_sched *s, pl_sched_place_f place, void *arg)
{
    size_t placed = 0, skipped = 0, np;
    struct pl_dtask *t, *next, *held = NULL;
    struct pl_dtask *passed = NULL; /* the last task that could not start */
    struct pick pick[s->nnodes ? s->nnodes : 1];

    if (s->nnodes == 0)
        return 0;
    /* a reservation lasts until its task leaves the queue */
    if (s->resv && (!(held = pl_sched_task_get(s, s->resv)) || !held->inq)) {
        sched_resv_drop(s);
        held = NULL;
    }
    for (size_t k = 0; s->resv && k < s->nnodes; k++) {
        if (s->resv_node[k] && s->nodes[k]->state != PL_NODE_UP)
            sched_resv_drop(s); /* a reserved node is gone: choose again */
    }
    /* the FIFOs from the highest priority down, as one queue */
    for (size_t li = 0; li < s->nlv && skipped < SCAN_MAX; li++) {
        struct pl_dqueue *q = &s->lv[li]->q;
        for (t = TAILQ_FIRST(q); t && skipped < SCAN_MAX; t = next) {
            next = TAILQ_NEXT(t, qent);
            /* a node up, not reserved, with a free core (the index
             * counts them) */
            bool any = pl_placeidx_nfree(s->idx) > 0;
            /* no node can take anything: only what the agents may hold
             * beyond their free cores (daemon/prefetch.c), in queue
             * order: the pass stops at the first task that may not */
            bool pref = !any && !s->resv;
            if (pref && !s->prefetch)
                goto full;
            if (!any && s->resv && t->id != s->resv) {
                skipped++; /* only the reserved task may start now */
                continue;
            }
            /* a run's head becomes a task; if it cannot start now, no
             * element of the run can (they share their shape): the pass
             * goes on after the run.  A run rebuilt from the database
             * (its argv NULL) may join several submits: each element is
             * looked at. */
            struct pl_dtask *after = NULL;
            if (t->run && t->argv && passed
                && TAILQ_PREV(t, pl_dqueue, qent) == passed
                && same_shape(passed, t)) {
                skipped++; /* its element just before could not start */
                continue;
            }
            if (t->run) {
                struct pl_qrun *r = t->run;
                if (r->end - r->first > 1 && r->proto.argv)
                    after = &r->proto;
                bool last = r->end - r->first == 1;
                struct pl_dtask *u = materialize(s, r, r->first);
                if (!u && errno == ENOENT) {
                    next = last ? next : t; /* the run's next element */
                    continue;
                }
                if (!(t = u))
                    goto full;
                next = TAILQ_NEXT(t, qent);
            }
            /* a task that could not end before the drain waits for the next
             * allocation (--resume) */
            if (s->time_left > 0 && t->timeout > s->time_left) {
                if (t->id == s->resv)
                    sched_resv_drop(s); /* it holds no nodes back any more */
                if (after)
                    next = TAILQ_NEXT(after, qent);
                passed = t;
                skipped++;
                continue;
            }
            if (pref) {
                if (sched_pref_place(s, t) < 0)
                    goto full;
            }
            else if (sched_plan(s, t, s->resv && t->id != s->resv, false,
                                pick, &np) < 0
                || sched_take(s, t, pick, np) < 0) {
                if (after)
                    next = TAILQ_NEXT(after, qent);
                if (!s->resv && pl_sched_fits(s, t, NULL, 0))
                    sched_reserve(s, t);
                passed = t;
                skipped++;
                continue;
            }
            if (t->ranks == 1 && !t->nodes_req && !pref)
                s->rr = (pick[0].k + 1) % s->nnodes;
            if (t->id == s->resv)
                sched_resv_drop(s);
            TAILQ_REMOVE(q, t, qent);
            t->inq = false;
            s->nqueued--;
            place(t, arg);
            placed++;
        }
    }
full:
    return placed;
}
