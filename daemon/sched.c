/* daemon/sched.c - the live tasks, the queue, and placement on nodes */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/keymap.h"
#include "daemon/placeidx.h"
#include "daemon/pool.h"
#include "daemon/queue.h"
#include "daemon/sched.h"
#include "proto/strv.h"
#include "proto/msg.h"
#include "proto/state.h"

/* How far one pass looks past tasks that fit nowhere: bounds the cost of
 * a pass when the head of a long queue is blocked (1,000 skips cost
 * about 10 us). */
#define SCAN_MAX 1000

TAILQ_HEAD(pl_dqueue, pl_dtask);

/* The queue is one FIFO per priority.  A level, once made, stays until
 * the scheduler is freed (there are few: the priorities users give), so
 * putting a task back in the queue cannot fail. */
struct level {
    int32_t prio;
    struct pl_dqueue q;
};

struct pl_sched {
    struct pl_dtask **tab; /* by id: ids are dense, from 1 */
    size_t cap;
    size_t tab_hi;         /* entries past this were never written */
    struct level **lv;     /* owned, highest priority first */
    size_t nlv;
    size_t nqueued;
    struct pl_node **nodes;
    size_t nnodes;
    struct pl_placeidx *idx; /* the nodes by free capacity (placeidx.h) */
    struct pl_keymap *names; /* the nodes by name */
    size_t rr;             /* node to try first, rotating */
    uint64_t resv;         /* task holding the reservation, 0: none */
    bool *resv_node;       /* per node: reserved for 'resv' (kept false
                              while 'resv' is 0: resv_drop()); the index
                              holds the same marks */
    double time_left;      /* s before the pilot drains; 0: no limit */
    struct pl_qruns runs;  /* compact runs of queued elements (queue.c) */
    uint64_t run_elems;    /* elements in them */
    pl_sched_fill_f fill;  /* fills an element of a run of the database */
    void *fill_arg;
    void (*fill_free)(void *arg);
};

/* A placement: 'c' ranks on node 'k'. */
struct pick {
    uint32_t k, c;
};

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

struct pl_dtask *pl_sched_task_get_bare(struct pl_sched *s, uint64_t id)
{
    struct pl_qrun *r;

    if (id < s->cap && s->tab[id])
        return s->tab[id];
    errno = 0;
    if (!s->runs.n || !(r = pl_qruns_find(&s->runs, id)))
        return NULL;
    return materialize_as(s, r, id, true);
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
    struct pl_qrun *r;

    if (id < s->cap && s->tab[id])
        return s->tab[id];
    errno = 0;
    if (!s->runs.n || !(r = pl_qruns_find(&s->runs, id)))
        return NULL;
    return materialize(s, r, id);
}

static void rank_release(struct pl_dtask *t, uint32_t r)
{
    struct pl_rank *k = &t->rank[r];

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
static void release(struct pl_dtask *t)
{
    for (uint32_t r = 0; t->rank && r < t->ranks; r++)
        rank_release(t, r);
    ranks_free(t);
    t->running = t->ended = 0;
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
    release(t);
    s->tab[t->id] = NULL;
    task_free(t);
}

void pl_sched_requeue(struct pl_sched *s, struct pl_dtask *t, bool head)
{
    release(t);
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

int pl_sched_node_add(struct pl_sched *s, struct pl_node *n)
{
    struct pl_node **nn = realloc(s->nodes, (s->nnodes + 1) * sizeof(*nn));
    bool *nr;

    if (!nn)
        return -1;
    s->nodes = nn;
    if (!(nr = realloc(s->resv_node, (s->nnodes + 1) * sizeof(*nr))))
        return -1;
    s->resv_node = nr;
    s->resv_node[s->nnodes] = false;
    if (pl_keymap_put(s->names, n->name, strlen(n->name), n) < 0)
        return -1;
    if (pl_placeidx_add(s->idx, n) < 0) {
        pl_keymap_del(s->names, n->name, strlen(n->name));
        return -1;
    }
    s->nodes[s->nnodes++] = n;
    return 0;
}

struct pl_node *pl_sched_node_find(struct pl_sched *s, const char *name)
{
    return pl_keymap_get(s->names, name, strlen(name));
}

size_t pl_sched_nnodes(const struct pl_sched *s)
{
    return s->nnodes;
}

struct pl_node *pl_sched_node_at(struct pl_sched *s, size_t i)
{
    return i < s->nnodes ? s->nodes[i] : NULL;
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

void pl_sched_max(const struct pl_sched *s, uint32_t *cores, uint32_t *gpus)
{
    *cores = *gpus = 0;
    for (size_t i = 0; i < s->nnodes; i++) {
        if (s->nodes[i]->ncores > *cores)
            *cores = s->nodes[i]->ncores;
        if (s->nodes[i]->ngpus > *gpus)
            *gpus = s->nodes[i]->ngpus;
    }
}

/* How many ranks of 't' node 'n' can take: now (its free cores and GPUs),
 * or 'idle' (all of them). */
/* --vetted: whether 'n' lacks a vetting that passed within the task's
 * minutes (one that passed longer ago is to be vetted again:
 * daemon/vet.c) */
static bool unvetted(const struct pl_dtask *t, const struct pl_node *n)
{
    return t->vetted
           && !(n->vet_ok_time > 0
                && pl_now() - n->vet_ok_time <= t->vetted * 60.0);
}

static uint32_t capacity(const struct pl_dtask *t, const struct pl_node *n,
                         bool idle)
{
    uint32_t cores = idle ? n->ncores : n->free_cores;
    uint32_t gpus = idle ? n->ngpus : n->free_gpus;
    uint32_t cap;

    if (n->state != PL_NODE_UP)
        return 0;
    /* a cordoned node takes nothing new, but a task that would fit it
     * once uncordoned is not refused as too large */
    if (n->cordon && !idle)
        return 0;
    if (!idle && unvetted(t, n))
        return 0;
    if (t->exclusive && !idle
        && (n->free_cores != n->ncores || n->free_gpus != n->ngpus))
        return 0;
    cap = cores / t->cores_per_rank;
    if (t->gpus_per_rank && gpus / t->gpus_per_rank < cap)
        cap = gpus / t->gpus_per_rank;
    return cap;
}

/* A node to sort by room, most first; among equals, in rotation order. */
struct room {
    uint32_t cap;
    uint32_t pos;   /* its place in the rotation from s->rr */
    uint32_t k;
};

static int room_cmp(const void *a, const void *b)
{
    const struct room *x = a, *y = b;

    if (x->cap != y->cap)
        return x->cap > y->cap ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int pick_cmp(const void *a, const void *b)
{
    const struct pick *x = a, *y = b;

    return x->k < y->k ? -1 : x->k > y->k;
}

/* The index's last word on a node it yields: all of capacity(). */
struct fast {
    const struct pl_sched *s;
    const struct pl_dtask *t;
};

static bool fast_ok(size_t k, void *arg)
{
    const struct fast *f = arg;

    return capacity(f->t, f->s->nodes[k], false) >= 1;
}

static bool fast_idle_ok(size_t k, void *arg)
{
    const struct fast *f = arg;

    return capacity(f->t, f->s->nodes[k], true) >= 1;
}

/* Choose nodes and rank counts for 't': pick[0..*np) (node order).
 * 'mask': not on the nodes reserved for another task.  0 or -1.
 *
 * One rank (the stream of small tasks, and the check of each at submit)
 * asks the index for the first node in rotation order with room, in
 * O(log N); the others (several ranks, --nodes, --vetted placed now:
 * rare, or costly anyway) look at every node, in O(N log N). */
static int plan(const struct pl_sched *s, const struct pl_dtask *t,
                bool mask, bool idle, struct pick *pick, size_t *np)
{
    size_t nn = s->nnodes;
    uint32_t left = t->ranks, need = 0, per = 0;

    *np = 0;
    if (nn == 0)
        return -1;
    /* (as if idle, --vetted is moot: capacity() ignores it) */
    if (t->ranks == 1 && !t->nodes_req && (!t->vetted || idle)) {
        struct fast f = { s, t };
        struct pl_placeidx_want w = {
            .cores = t->cores_per_rank ? t->cores_per_rank : 1,
            .gpus = t->gpus_per_rank, .idle = t->exclusive && !idle,
            .as_idle = idle, .skip_resv = mask,
            .ok = idle ? fast_idle_ok : fast_ok, .arg = &f,
        };
        long k = pl_placeidx_first(s->idx, s->rr % nn, &w);
        if (k < 0)
            return -1;
        pick[0] = (struct pick){ (uint32_t)k, 1 };
        *np = 1;
        return 0;
    }
    struct room *room = malloc(nn * sizeof(*room));
    if (!room)
        return -1;
    for (size_t k = 0; k < nn; k++) {
        size_t o = (s->rr + k) % nn; /* the k-th in rotation order */
        struct pl_node *n = s->nodes[o];
        room[k] = (struct room){ 0, (uint32_t)k, (uint32_t)o };
        room[k].cap = mask && s->resv_node[o] ? 0 : capacity(t, n, idle);
        /* a node passed over only for a vetting grown old: vet it again
         * (the one mark placement leaves; daemon/vet.c reads it) */
        if (!room[k].cap && !idle && n->vet_ok_time > 0 && unvetted(t, n))
            n->vet_wanted = true;
    }
    if (t->ranks == 1 && !t->nodes_req) {
        for (size_t k = 0; k < nn; k++)
            if (room[k].cap >= 1) {
                pick[(*np)++] = (struct pick){ room[k].k, 1 };
                free(room);
                return 0;
            }
        goto fail;
    }
    /* most room first (stable: rotation order among equals) */
    qsort(room, nn, sizeof(*room), room_cmp);
    if (t->ranks_per_node || t->nodes_req) {
        need = t->nodes_req ? t->nodes_req
                            : (t->ranks + t->ranks_per_node - 1)
                                  / t->ranks_per_node;
        per = t->ranks_per_node ? t->ranks_per_node
                                : (t->ranks + need - 1) / need;
        if (need > nn || need > t->ranks || (uint64_t)per * need < t->ranks)
            goto fail;
        for (size_t i = 0; i < need; i++) {
            uint32_t want = left < per ? left : per;
            /* spread evenly over exactly 'need' nodes */
            if (!t->ranks_per_node)
                want = t->ranks / need + (i < t->ranks % need ? 1 : 0);
            if (want == 0 || room[i].cap < want)
                goto fail;
            pick[(*np)++] = (struct pick){ room[i].k, want };
            left -= want;
        }
    }
    else
        for (size_t i = 0; i < nn && left > 0 && room[i].cap > 0; i++) {
            uint32_t take = room[i].cap < left ? room[i].cap : left;
            pick[(*np)++] = (struct pick){ room[i].k, take };
            left -= take;
        }
    free(room);
    if (left != 0)
        return -1;
    qsort(pick, *np, sizeof(*pick), pick_cmp);
    return 0;
fail:
    free(room);
    return -1;
}

bool pl_sched_fits(const struct pl_sched *s, const struct pl_dtask *t,
                   char *why, size_t len)
{
    struct pick pick[s->nnodes ? s->nnodes : 1];
    uint32_t maxc, maxg, up = 0;
    size_t np;

    if (plan(s, t, false, true, pick, &np) == 0)
        return true;
    if (!why)
        return false;
    pl_sched_max(s, &maxc, &maxg);
    for (size_t k = 0; k < s->nnodes; k++)
        if (s->nodes[k]->state == PL_NODE_UP)
            up++;
    if (t->cores_per_rank > maxc)
        snprintf(why, len, "task needs %u cores per rank but the largest "
                 "node has %u", t->cores_per_rank, maxc);
    else if (t->gpus_per_rank > maxg)
        snprintf(why, len, "task needs %u GPUs per rank but the largest node "
                 "has %u", t->gpus_per_rank, maxg);
    else if (t->nodes_req > up)
        snprintf(why, len, "task asks for %u nodes but the pilot has %u",
                 t->nodes_req, up);
    else if (t->ranks_per_node
             && (uint64_t)t->ranks_per_node * t->cores_per_rank > maxc)
        snprintf(why, len, "%u ranks per node x %u cores need %u cores on a "
                 "node; the largest has %u", t->ranks_per_node,
                 t->cores_per_rank, t->ranks_per_node * t->cores_per_rank,
                 maxc);
    else if (t->ranks_per_node && t->gpus_per_rank
             && (uint64_t)t->ranks_per_node * t->gpus_per_rank > maxg)
        snprintf(why, len, "%u ranks per node x %u GPUs need %u GPUs on a "
                 "node; the largest has %u", t->ranks_per_node,
                 t->gpus_per_rank, t->ranks_per_node * t->gpus_per_rank,
                 maxg);
    else
        snprintf(why, len, "task does not fit this pilot: %u ranks x %u "
                 "cores and %u GPUs%s on %u nodes", t->ranks,
                 t->cores_per_rank, t->gpus_per_rank,
                 t->exclusive ? ", whole nodes," : "", up);
    return false;
}

/* Take the cores of the ranks planned in pick[]: all or nothing. */
static int take(struct pl_sched *s, struct pl_dtask *t,
                const struct pick *pick, size_t np)
{
    uint32_t r = 0, node_rank = 0;

    if (!(t->rank = calloc(t->ranks, sizeof(*t->rank))))
        return -1;
    for (size_t i = 0; i < np; i++) {
        struct pl_node *n = s->nodes[pick[i].k];
        uint32_t c = pick[i].c;
        for (uint32_t l = 0; l < c; l++, r++) {
            struct pl_rank *rk = &t->rank[r];
            rk->ncores = t->cores_per_rank;
            rk->ngpus = t->gpus_per_rank;
            if (t->exclusive) {
                /* the node is the task's: its ranks share out all of it */
                rk->ncores = n->ncores / c + (l == c - 1 ? n->ncores % c : 0);
                rk->ngpus = n->ngpus / c + (l == c - 1 ? n->ngpus % c : 0);
            }
            rk->node_rank = node_rank;
            rk->local_rank = l;
            rk->local_size = c;
            if (!(rk->core_idx = calloc(rk->ncores + 1, sizeof(uint32_t)))
                || !(rk->gpu_idx = calloc(rk->ngpus + 1, sizeof(uint32_t)))
                || pl_node_alloc(n, t->id, rk->ncores, rk->ngpus,
                                 rk->core_idx, rk->gpu_idx) < 0)
                goto undo;
            rk->node = n;
        }
        node_rank++;
    }
    t->nnodes = node_rank;
    /* torch's rendezvous: a port no other task of ours holds on rank 0's
     * node; with all of them held, the task waits like one without cores */
    if (t->comm == PL_COMM_TORCH
        && !(t->port = pl_node_port_take(t->rank[0].node, t->id)))
        goto undo;
    /* the node list, kept: ranks that end give their node back */
    size_t len = 1, off = 0;
    for (size_t i = 0; i < np; i++)
        len += strlen(s->nodes[pick[i].k]->name) + 1;
    if (!(t->nodelist = malloc(len)))
        goto undo;
    t->nodelist[0] = '\0';
    for (size_t i = 0; i < np; i++)
        off += (size_t)snprintf(t->nodelist + off, len - off, "%s%s",
                                off ? "," : "", s->nodes[pick[i].k]->name);
    return 0;
undo:
    release(t);
    return -1;
}

/* Reserve for 't' the nodes it would use if they were idle, choosing
 * those with the most free cores now. */
static void reserve(struct pl_sched *s, const struct pl_dtask *t)
{
    struct pick pick[s->nnodes ? s->nnodes : 1];
    size_t saved = s->rr;
    size_t best = 0, np;

    /* start the plan's rotation at the freest node, so ties go there */
    for (size_t k = 1; k < s->nnodes; k++)
        if (s->nodes[k]->free_cores > s->nodes[best]->free_cores)
            best = k;
    s->rr = best;
    if (plan(s, t, false, true, pick, &np) == 0) {
        s->resv = t->id;
        for (size_t i = 0; i < np; i++) {
            s->resv_node[pick[i].k] = true;
            pl_placeidx_set_resv(s->idx, pick[i].k, true);
        }
    }
    s->rr = saved;
}

/* No reservation any more: its nodes take any task again. */
static void resv_drop(struct pl_sched *s)
{
    s->resv = 0;
    for (size_t k = 0; k < s->nnodes; k++)
        if (s->resv_node[k]) {
            s->resv_node[k] = false;
            pl_placeidx_set_resv(s->idx, k, false);
        }
}

uint64_t pl_sched_reserved_for(const struct pl_sched *s)
{
    return s->resv;
}

void pl_sched_nodelist(const struct pl_dtask *t, char *buf, size_t len)
{
    snprintf(buf, len, "%s", t->nodelist ? t->nodelist : "");
}

double pl_sched_time_left(const struct pl_sched *s)
{
    return s->time_left;
}

bool pl_sched_node_reserved(const struct pl_sched *s, size_t k)
{
    return s->resv && k < s->nnodes && s->resv_node[k];
}

uint32_t pl_sched_room(const struct pl_dtask *t, const struct pl_node *n,
                       bool idle)
{
    return capacity(t, n, idle);
}

bool pl_sched_fits_now(const struct pl_sched *s, const struct pl_dtask *t,
                       bool resv)
{
    struct pick pick[s->nnodes ? s->nnodes : 1];
    bool mask = resv && s->resv && s->resv != t->id;
    size_t np;

    if (s->nnodes == 0)
        return false;
    return plan(s, t, mask, false, pick, &np) == 0;
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
        resv_drop(s);
        held = NULL;
    }
    for (size_t k = 0; s->resv && k < s->nnodes; k++) {
        if (s->resv_node[k] && s->nodes[k]->state != PL_NODE_UP)
            resv_drop(s); /* a reserved node is gone: choose again */
    }
    /* the FIFOs from the highest priority down, as one queue */
    for (size_t li = 0; li < s->nlv && skipped < SCAN_MAX; li++) {
        struct pl_dqueue *q = &s->lv[li]->q;
        for (t = TAILQ_FIRST(q); t && skipped < SCAN_MAX; t = next) {
            next = TAILQ_NEXT(t, qent);
            /* a node up, not reserved, with a free core (the index
             * counts them) */
            bool any = pl_placeidx_nfree(s->idx) > 0;
            if (!any && !s->resv)
                goto full; /* no node can take anything */
            if (!any && t->id != s->resv) {
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
                    resv_drop(s); /* it holds no nodes back any more */
                if (after)
                    next = TAILQ_NEXT(after, qent);
                passed = t;
                skipped++;
                continue;
            }
            if (plan(s, t, s->resv && t->id != s->resv, false, pick, &np) < 0
                || take(s, t, pick, np) < 0) {
                if (after)
                    next = TAILQ_NEXT(after, qent);
                if (!s->resv && pl_sched_fits(s, t, NULL, 0))
                    reserve(s, t);
                passed = t;
                skipped++;
                continue;
            }
            if (t->ranks == 1 && !t->nodes_req)
                s->rr = (pick[0].k + 1) % s->nnodes;
            if (t->id == s->resv)
                resv_drop(s);
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
