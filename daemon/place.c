/* daemon/place.c - placement on the nodes: the node table, a task's
 * plan (which nodes, how many ranks on each), taking its cores, and the
 * reservation (the queue and the pass: sched.c) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/keymap.h"
#include "daemon/placeidx.h"
#include "daemon/sched.h"
#include "daemon/sched_private.h"
#include "proto/strv.h"

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

/* --vetted: whether 'n' lacks a vetting that passed within the task's
 * minutes (one that passed longer ago is to be vetted again:
 * daemon/vet.c) */
static bool unvetted(const struct pl_dtask *t, const struct pl_node *n)
{
    return t->vetted
           && !(n->vet_ok_time > 0
                && pl_now() - n->vet_ok_time <= t->vetted * 60.0);
}

/* Whether 'n' leaves before 't' could end: a task whose --timeout
 * outlasts the node's allocation does not start there (docs/grow.md).
 * N.B. the clock only for those. */
static bool ends_first(const struct pl_dtask *t, const struct pl_node *n)
{
    return n->ends > 0 && t->timeout > 0 && pl_now() + t->timeout > n->ends;
}

/* How many ranks of 't' node 'n' can take: now (its free cores and GPUs),
 * or 'idle' (all of them). */
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
    if (!idle && ends_first(t, n))
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
int sched_plan(const struct pl_sched *s, const struct pl_dtask *t,
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

    if (sched_plan(s, t, false, true, pick, &np) == 0)
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
int sched_take(struct pl_sched *s, struct pl_dtask *t,
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
    sched_release(t);
    return -1;
}

/* Reserve for 't' the nodes it would use if they were idle, choosing
 * those with the most free cores now. */
void sched_reserve(struct pl_sched *s, const struct pl_dtask *t)
{
    struct pick pick[s->nnodes ? s->nnodes : 1];
    size_t saved = s->rr;
    size_t best = 0, np;

    /* start the plan's rotation at the freest node, so ties go there */
    for (size_t k = 1; k < s->nnodes; k++)
        if (s->nodes[k]->free_cores > s->nodes[best]->free_cores)
            best = k;
    s->rr = best;
    if (sched_plan(s, t, false, true, pick, &np) == 0) {
        /* nodes it could not start on would be held back for nothing */
        for (size_t i = 0; i < np; i++)
            if (ends_first(t, s->nodes[pick[i].k])) {
                s->rr = saved;
                return;
            }
        s->resv = t->id;
        for (size_t i = 0; i < np; i++) {
            s->resv_node[pick[i].k] = true;
            pl_placeidx_set_resv(s->idx, pick[i].k, true);
        }
    }
    s->rr = saved;
}

/* No reservation any more: its nodes take any task again. */
void sched_resv_drop(struct pl_sched *s)
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
    return sched_plan(s, t, mask, false, pick, &np) == 0;
}
