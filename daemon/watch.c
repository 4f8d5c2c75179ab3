/* daemon/watch.c - watches: task ends pushed to clients, resumable
 *
 * A watch (proto/watchmsg.h) holds tasks, or all the pilot's, and the
 * connection its pushes go to.  Each task's end takes the next number of
 * pilotd's end sequence (task.c, stored as tasks.end_seq in the same
 * statement as the final state), and a watch pushes its ends in that
 * order, only after the commit that stored them (pl_watch_flush() runs
 * in pl_daemon_flush() just before the out queue is sent, when the
 * commit succeeded).
 *
 * A watch is live or replaying.  Live, it keeps the ends of its tasks in
 * memory until they are pushed.  Replaying, it reads them back from the
 * database, from 'cursor' on, WATCH_TURN rows a turn of the loop (an idle
 * handle runs the next turn, as cancel.c does), and the live ends meanwhile
 * are left to the replay, which reads them too; once it has read every
 * stored end it is live again.  A watch replays when its client resumes
 * with 'after', when it comes back after its connection was lost, and
 * when it has more than WATCH_QUEUE ends waiting (its client reads too
 * slowly): memory stays bounded, and the order stays that of the
 * sequence.  pilotd's memory is a cache of the database: a restarted
 * pilotd has no watch, and a client makes its watch again with 'after'.
 *
 * Each live task lists the watches it is in (pl_dtask.watches), so an
 * end finds them without a search; a watch that goes takes itself off
 * its live tasks first.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/auth.h"
#include "daemon/daemon_private.h"
#include "proto/log.h"
#include "proto/query.h"
#include "proto/strv.h"

#define WATCH_MAX 1024         /* watches of a pilotd */
#define WATCH_KEY_MAX 64       /* ... of one client key */
/* Ends a live watch keeps for its client (about 170 bytes each, so 1.7
 * MB); past that it reads them back from the database. */
#define WATCH_QUEUE 10000
/* Rows a replay reads in one turn of the loop, all replays together:
 * about 2 us a row here, so a few ms a turn. */
#define WATCH_TURN 2000
#define WATCH_EXPIRE 600.0     /* s a watch with no client is kept */
/* An attached watch that pushed nothing for this long (s) gets an empty
 * push: a client that is gone shows as a failed send, and a client
 * that hears nothing for 5 s knows something is wrong (client/sub.c). */
#define WATCH_BEAT 3.0

/* An end waiting to be pushed (its reason copied: pilotd keeps 127
 * bytes of one); 'call': a Python call's, which may have a result. */
struct qend {
    struct pl_end e;
    bool call;
    char reason[128];
};

struct pl_watch {
    char token[PL_WATCH_TOKEN_MAX + 1];
    char key[64];              /* the name of the key that made it */
    unsigned char rid[256];    /* the connection its pushes go to */
    size_t ridlen;
    bool attached;
    double since;              /* pl_mono(): detached since */
    double last_push;          /* pl_mono() of its last push or request */
    bool all;                  /* every task of the pilot */
    uint64_t *ids;             /* its tasks, sorted, 'nids' */
    size_t nids, capids;
    uint64_t live;             /* of those, not ended */
    uint64_t owed;             /* ends of its tasks not pushed yet */
    uint64_t n;                /* pushes made */
    uint64_t pushed;           /* the largest end seq pushed (or known to
                                  need no push) */
    bool replay;               /* reading its ends from the database ... */
    uint64_t cursor;           /* ... after this end seq */
    struct qend *q;            /* live: ends to push, in seq order */
    size_t nq, capq;
};

/* ------------------------------------------------------------ helpers */

static struct pl_watch *find(struct pl_daemon *d, const char *token)
{
    for (size_t i = 0; i < d->nwatches; i++)
        if (!strcmp(d->watches[i]->token, token))
            return d->watches[i];
    return NULL;
}

/* The index of 'id' in w->ids, or where it would go (*found false). */
static size_t id_pos(const struct pl_watch *w, uint64_t id, bool *found)
{
    size_t lo = 0, hi = w->nids;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < w->nids && w->ids[lo] == id;
    return lo;
}

static uint64_t live_all(const struct pl_daemon *d)
{
    return (uint64_t)(d->count[PL_ST_WAITING] + d->count[PL_ST_QUEUED]
                      + d->count[PL_ST_ASSIGNED] + d->count[PL_ST_RUNNING]);
}

/* What the client is told is pending: tasks not ended, and ends not
 * pushed yet. */
static uint64_t pending(const struct pl_daemon *d, const struct pl_watch *w)
{
    uint64_t owed = w->owed;

    /* reading back from the database, it cannot tell how many ends are
     * left to push: at least one, until the replay has caught up (a
     * client that resumes must not take 0 for the end of its replay) */
    if (w->replay && owed == 0)
        owed = 1;
    return (w->all ? live_all(d) : w->live) + owed;
}

/* Take 'w' off the watch list of live task 't'. */
static void task_unlist(struct pl_dtask *t, const struct pl_watch *w)
{
    for (uint32_t i = 0; i < t->nwatches; i++)
        if (t->watches[i] == w) {
            t->watches[i] = t->watches[--t->nwatches];
            return;
        }
}

static void watch_free(struct pl_daemon *d, struct pl_watch *w)
{
    for (size_t i = 0; i < w->nids; i++) {
        struct pl_dtask *t = pl_sched_task_get(d->sched, w->ids[i]);
        if (t)
            task_unlist(t, w);
    }
    free(w->ids);
    free(w->q);
    free(w);
}

/* Take 'w' out of the daemon's list and free it. */
static void watch_drop(struct pl_daemon *d, struct pl_watch *w)
{
    for (size_t i = 0; i < d->nwatches; i++)
        if (d->watches[i] == w) {
            d->watches[i] = d->watches[--d->nwatches];
            break;
        }
    if (w->all)
        d->nwatch_all--;
    watch_free(d, w);
}

static void idle_cb(uv_idle_t *h);

/* 'w' reads its ends back from the database, after 'after'. */
static void start_replay(struct pl_daemon *d, struct pl_watch *w,
                         uint64_t after)
{
    w->replay = true;
    w->cursor = after;
    w->nq = 0; /* the replay reads those too */
    if (w->attached)
        uv_idle_start(&d->watch_idle, idle_cb);
}

/* ------------------------------------------------------------ members */

/* Task 'id' (live: 't', else NULL) joins 'w' at position 'pos'. */
static int member_add(struct pl_watch *w, uint64_t id, size_t pos,
                      struct pl_dtask *t)
{
    if (pl_grow(&w->ids, &w->capids, w->nids, 1, sizeof(*w->ids)) < 0)
        return -1;
    if (t && pl_grow(&t->watches, &t->capwatches, t->nwatches, 1,
                     sizeof(*t->watches)) < 0)
        return -1;
    memmove(w->ids + pos + 1, w->ids + pos, (w->nids - pos) * sizeof(*w->ids));
    w->ids[pos] = id;
    w->nids++;
    if (t) {
        t->watches[t->nwatches++] = w;
        w->live++;
    }
    return 0;
}

int pl_watch_add_task(struct pl_daemon *d, struct pl_watch *w,
                      struct pl_dtask *t)
{
    bool found;
    size_t pos;
    (void)d;

    if (w->all)
        return 0; /* it holds every task already */
    /* a new task's id is above every id a watch holds: the end */
    if (w->nids == 0 || w->ids[w->nids - 1] < t->id) {
        pos = w->nids;
        found = false;
    }
    else
        pos = id_pos(w, t->id, &found);
    if (found)
        return 0;
    return member_add(w, t->id, pos, t);
}

/* The tasks 'ids' (sorted, maybe repeated) join 'w': merged, in one
 * pass (a request of 100,000 into a watch of 1,000,000 would otherwise
 * move its array 100,000 times).  0, or -1 with errp (E2BIG, ENOMEM)
 * and 'w' as it was. */
static int members_add(struct pl_daemon *d, struct pl_watch *w,
                       const uint64_t *ids, size_t n, struct pl_error *errp)
{
    size_t fresh = 0, i, j, k;
    uint64_t *merged;
    bool found;

    for (i = 0; i < n; i++) {
        if ((i > 0 && ids[i] == ids[i - 1])
            || (id_pos(w, ids[i], &found), found))
            continue;
        fresh++;
        /* room on each live task first: nothing can fail past here */
        struct pl_dtask *t = pl_sched_task_get(d->sched, ids[i]);
        if (t && pl_grow(&t->watches, &t->capwatches, t->nwatches, 1,
                         sizeof(*t->watches)) < 0)
            return pl_errset(errp, ENOMEM, "out of memory");
    }
    if (w->nids + fresh > PL_WATCH_MAX_IDS)
        return pl_errset(errp, E2BIG, "a watch holds at most %d tasks: "
                         "this one has %zu, the request adds %zu",
                         PL_WATCH_MAX_IDS, w->nids, fresh);
    if (fresh == 0)
        return 0;
    if (!(merged = malloc((w->nids + fresh) * sizeof(*merged))))
        return pl_errset(errp, ENOMEM, "out of memory");
    for (i = j = k = 0; i < w->nids || j < n;) {
        if (j == n || (i < w->nids && w->ids[i] < ids[j])) {
            merged[k++] = w->ids[i++];
            continue;
        }
        if (i < w->nids && w->ids[i] == ids[j]) {
            j++; /* held already */
            continue;
        }
        uint64_t id = ids[j++];
        if (k > 0 && merged[k - 1] == id)
            continue; /* named twice */
        merged[k++] = id;
        struct pl_dtask *t = pl_sched_task_get(d->sched, id);
        if (t) {
            t->watches[t->nwatches++] = w;
            w->live++;
        }
    }
    free(w->ids);
    w->ids = merged;
    w->nids = w->capids = k;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* ------------------------------------------------------------ ends */

/* End 'e' of one of the tasks of 'w'. */
static void end_to(struct pl_daemon *d, struct pl_watch *w,
                   const struct pl_end *e, bool call)
{
    w->owed++;
    if (!w->attached || w->replay)
        return; /* read back from the database when it is pushed */
    if (w->nq >= WATCH_QUEUE) {
        /* its client reads too slowly: memory stays bounded */
        start_replay(d, w, w->pushed);
        return;
    }
    if (pl_grow(&w->q, &w->capq, w->nq, 1, sizeof(*w->q)) < 0) {
        start_replay(d, w, w->pushed);
        return;
    }
    struct qend *q = &w->q[w->nq++];
    q->e = *e;
    q->call = call;
    q->e.reason = NULL;
    if (e->reason) {
        snprintf(q->reason, sizeof(q->reason), "%s", e->reason);
        q->e.reason = q->reason;
    }
}

void pl_watch_ended(struct pl_daemon *d, struct pl_dtask *t,
                    const struct pl_db_change *c)
{
    struct pl_end e = {
        .seq = c->end_seq, .id = t->id, .state = c->state,
        .exit_code = c->exit_code, .signal = c->signal,
        .end_time = c->time, .reason = (char *)c->reason,
    };

    for (uint32_t i = 0; i < t->nwatches; i++) {
        t->watches[i]->live--;
        end_to(d, t->watches[i], &e, t->fn == PL_FN_PYCALL);
    }
    free(t->watches);
    t->watches = NULL;
    t->nwatches = t->capwatches = 0;
    if (d->nwatch_all == 0 || t->fn == PL_FN_POOL)
        return;
    for (size_t i = 0; i < d->nwatches; i++)
        if (d->watches[i]->all)
            end_to(d, d->watches[i], &e, t->fn == PL_FN_PYCALL);
}

void pl_watch_forgot(struct pl_daemon *d, uint64_t id)
{
    struct pl_dtask *t = pl_sched_task_get(d->sched, id);

    for (size_t i = 0; i < d->nwatches; i++) {
        struct pl_watch *w = d->watches[i];
        bool found;
        size_t pos = id_pos(w, id, &found);
        if (!found && !w->all)
            continue;
        if (found) {
            memmove(w->ids + pos, w->ids + pos + 1,
                    (w->nids - pos - 1) * sizeof(*w->ids));
            w->nids--;
            if (t) {
                task_unlist(t, w);
                w->live--;
            }
        }
        /* an end it had (its dependency had failed) was never stored */
        for (size_t k = 0; k < w->nq; k++)
            if (w->q[k].e.id == id) {
                memmove(w->q + k, w->q + k + 1,
                        (w->nq - k - 1) * sizeof(*w->q));
                w->nq--;
                w->owed--;
                break;
            }
    }
}

/* ------------------------------------------------------------ pushes */

/* Push 'n' ends of 'w' ('n' may be 0: a heartbeat), with what is
 * pending after them (the caller has counted them off w->owed);
 * call[i]: ends[i] is a Python call's. */
static void push(struct pl_daemon *d, struct pl_watch *w,
                 const struct pl_end *ends, const bool *call, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (ends[i].seq > w->pushed)
            w->pushed = ends[i].seq;
    struct pl_out *o = pl_out_new(d->csock, w->rid, w->ridlen);
    if (!o)
        return; /* the client sees a gap in 'n' and resumes */
    /* a Python call's small result goes with its end (a primary-key
     * probe each, ~2 us: 2 ms a push of 1,000); out of memory, the ends
     * go without them and the client asks.  N.B. only a call's: a probe
     * for every end was 9% of pilotd's CPU under a stream of commands
     * watched by 'pilot wait --all' (docs/PERFORMANCE.md) */
    uint32_t calls = 0;
    for (uint32_t i = 0; i < n; i++)
        calls += call[i];
    struct pl_end *ex = calls ? malloc(n * sizeof(*ex)) : NULL;
    for (uint32_t i = 0; ex && i < n; i++) {
        ex[i] = ends[i];
        if (call[i])
            ex[i].result = pl_db_result_small(d->db, ends[i].id,
                                              PL_END_RESULT_INLINE,
                                              &ex[i].result_size);
    }
    pl_ends_encode(&o->w, w->token, ++w->n, pending(d, w), ex ? ex : ends,
                   n);
    for (uint32_t i = 0; ex && i < n; i++)
        free((void *)ex[i].result);
    free(ex);
    snprintf(o->watch, sizeof(o->watch), "%s", w->token);
    pl_out_push(d, o);
    w->last_push = pl_mono();
}

/* The live ends of 'w' that are stored, pushed. */
static void push_queue(struct pl_daemon *d, struct pl_watch *w)
{
    size_t k = 0;

    while (k < w->nq && w->q[k].e.seq <= d->end_seq_stored) {
        struct pl_end chunk[PL_ENDS_MAX];
        bool call[PL_ENDS_MAX];
        uint32_t n = 0;
        for (; k < w->nq && n < PL_ENDS_MAX
               && w->q[k].e.seq <= d->end_seq_stored; k++) {
            /* a queued end's reason is its own copy: pointed at again
             * here, as w->q moves (pl_grow()'s realloc, the memmove
             * below) and a pointer kept since would dangle */
            chunk[n] = w->q[k].e;
            call[n] = w->q[k].call;
            if (chunk[n].reason)
                chunk[n].reason = w->q[k].reason;
            n++;
        }
        w->owed = w->owed > n ? w->owed - n : 0;
        push(d, w, chunk, call, n);
    }
    if (k == 0)
        return; /* (w->q may be NULL: nothing queued yet) */
    memmove(w->q, w->q + k, (w->nq - k) * sizeof(*w->q));
    w->nq -= k;
}

/* What a replay turn read of one watch's ends. */
struct turn {
    struct pl_daemon *d;
    struct pl_watch *w;
    struct qend *got;          /* 'n' of them, at most WATCH_TURN */
    uint32_t n;
};

static int turn_cb(const struct pl_end *e, int fn, void *arg)
{
    struct turn *tn = arg;
    struct pl_watch *w = tn->w;
    bool found = false;

    if (w->all ? fn == PL_FN_POOL : (id_pos(w, e->id, &found), !found))
        return 0;
    struct qend *q = &tn->got[tn->n++];
    q->e = *e;
    q->call = fn == PL_FN_PYCALL;
    q->e.reason = NULL;
    if (e->reason) {
        snprintf(q->reason, sizeof(q->reason), "%s", e->reason);
        q->e.reason = q->reason;
    }
    return 0;
}

/* One turn of the replay of 'w': at most 'limit' rows.  The rows read. */
static long replay_turn(struct pl_daemon *d, struct pl_watch *w,
                        uint32_t limit, struct qend *buf)
{
    struct turn tn = { d, w, buf, 0 };
    struct pl_error err;
    uint64_t last = w->cursor;
    long rows = pl_db_ends(d->db, w->cursor, d->end_seq_stored, limit,
                           turn_cb, &tn, &last, &err);

    if (rows < 0) {
        pl_log(LOG_ERR, "watch %.12s: %s", w->token, err.text);
        return 0; /* tried again at the next flush */
    }
    w->cursor = last;
    /* everything stored is read, and nothing ended since the commit:
     * live again after this turn, its pushes owing only what follows
     * them in it */
    bool done = (uint32_t)rows < limit && d->end_seq == d->end_seq_stored;
    if (done) {
        w->replay = false;
        w->nq = 0;
    }
    for (uint32_t k = 0; k < tn.n;) {
        struct pl_end chunk[PL_ENDS_MAX];
        bool call[PL_ENDS_MAX];
        uint32_t n = 0;
        for (; k < tn.n && n < PL_ENDS_MAX; k++) {
            chunk[n] = tn.got[k].e;
            call[n] = tn.got[k].call;
            /* an end past what was pushed was owed (a live one) */
            if (!done && chunk[n].seq > w->pushed && w->owed)
                w->owed--;
            n++;
        }
        if (done)
            w->owed = tn.n - k;
        push(d, w, chunk, call, n);
    }
    if (done) {
        w->owed = 0;
        if (tn.n == 0)
            /* the client learns it has caught up */
            push(d, w, NULL, NULL, 0);
        if (w->pushed < d->end_seq_stored)
            w->pushed = d->end_seq_stored;
    }
    return rows;
}

static void idle_cb(uv_idle_t *h)
{
    struct pl_daemon *d = h->data;
    uint64_t t0 = uv_hrtime();

    /* nothing is pushed while nothing can be stored: the flush after the
     * retry that stores it starts the turns again */
    if (pl_db_failed(d->db, NULL)) {
        uv_idle_stop(h);
        return;
    }
    pl_daemon_flush(d); /* a turn of each replay (pl_watch_flush()) */
    pl_daemon_batch_time(d, t0);
}

void pl_watch_flush(struct pl_daemon *d)
{
    struct qend *buf = NULL;   /* a replay turn's ends, made once needed */
    uint32_t budget = WATCH_TURN;
    bool more = false;
    double now = pl_mono();
    size_t nw = d->nwatches;

    for (size_t k = 0; k < nw; k++) {
        /* the replays take turns at the budget */
        struct pl_watch *w = d->watches[(d->watch_rr + k) % nw];
        uint64_t n0 = w->n;
        if (!w->attached)
            continue;
        if (!w->replay)
            push_queue(d, w);
        else if (budget > 0
                 && (buf || (buf = malloc(WATCH_TURN * sizeof(*buf))))) {
            long rows = replay_turn(d, w, budget, buf);
            budget -= (uint32_t)rows;
            if (budget == 0)
                d->watch_rr = (d->watch_rr + k + 1) % nw;
        }
        more = more || w->replay;
        if (w->n == n0 && now - w->last_push >= WATCH_BEAT)
            push(d, w, NULL, NULL, 0);
    }
    free(buf);
    if (more)
        uv_idle_start(&d->watch_idle, idle_cb);
    else
        uv_idle_stop(&d->watch_idle);
}

void pl_watch_push_failed(struct pl_daemon *d, const char *token)
{
    struct pl_watch *w = find(d, token);

    if (!w || !w->attached)
        return;
    pl_log(LOG_INFO, "watch %.12s: its client is gone: kept %.0f s for it "
           "to come back", w->token, WATCH_EXPIRE);
    w->attached = false;
    w->since = pl_mono();
    /* the client resumes with its last seq; until then nothing is kept */
    w->replay = true;
    w->cursor = w->pushed;
    w->nq = 0;
}

void pl_watch_tick(struct pl_daemon *d)
{
    double now = pl_mono();

    for (size_t i = 0; i < d->nwatches;) {
        struct pl_watch *w = d->watches[i];
        if (!w->attached && now - w->since >= WATCH_EXPIRE) {
            pl_log(LOG_INFO, "watch %.12s: no client for %.0f s: dropped",
                   w->token, WATCH_EXPIRE);
            watch_drop(d, w);
            continue; /* the last one moved here */
        }
        i++;
    }
}

void pl_watch_revoked(struct pl_daemon *d)
{
    for (size_t i = 0; i < d->nwatches;) {
        struct pl_watch *w = d->watches[i];
        if (!pl_auth_has_name(d->auth, w->key)) {
            pl_log(LOG_NOTICE, "watch %.12s: key '%s' was revoked: dropped",
                   w->token, w->key);
            watch_drop(d, w);
            continue; /* the last one moved here */
        }
        i++;
    }
}

void pl_watch_free_all(struct pl_daemon *d)
{
    for (size_t i = 0; i < d->nwatches; i++)
        watch_free(d, d->watches[i]);
    free(d->watches);
    d->watches = NULL;
    d->nwatches = d->capwatches = d->nwatch_all = 0;
}

/* ------------------------------------------------------------ requests */

/* The watch 'token' for the key of 'r': NULL and errp when it belongs to
 * another key (EACCES) or, 'must', does not exist (ENOENT). */
static struct pl_watch *owned(struct pl_daemon *d, const struct pl_req *r,
                              const char *token, bool must,
                              struct pl_error *errp)
{
    struct pl_watch *w = find(d, token);

    errno = 0;
    if (!w) {
        if (must)
            pl_errset(errp, ENOENT, "no watch %s (it expired, or pilotd "
                      "restarted): make it again with its tasks", token);
        return NULL;
    }
    if (strcmp(w->key, r->key->name)) {
        pl_errset(errp, EACCES, "watch %s belongs to key '%s', not '%s'",
                  token, w->key, r->key->name);
        return NULL;
    }
    return w;
}

/* A new watch 'token' of the key of 'r', within the limits. */
static struct pl_watch *watch_new(struct pl_daemon *d, const struct pl_req *r,
                                  const char *token, struct pl_error *errp)
{
    struct pl_watch *w;
    size_t mine = 0;

    for (size_t i = 0; i < d->nwatches; i++)
        mine += !strcmp(d->watches[i]->key, r->key->name);
    if (d->nwatches >= WATCH_MAX) {
        pl_errset(errp, EMFILE, "pilotd holds %d watches, its most: wait "
                  "for some to end (pilot wait ends its own)", WATCH_MAX);
        return NULL;
    }
    if (mine >= WATCH_KEY_MAX) {
        pl_errset(errp, EMFILE, "key '%s' holds %d watches, the most one "
                  "key may", r->key->name, WATCH_KEY_MAX);
        return NULL;
    }
    if (!(w = calloc(1, sizeof(*w)))
        || pl_grow(&d->watches, &d->capwatches, d->nwatches, 1,
                   sizeof(*d->watches)) < 0) {
        free(w);
        pl_errset(errp, ENOMEM, "out of memory");
        return NULL;
    }
    snprintf(w->token, sizeof(w->token), "%s", token);
    snprintf(w->key, sizeof(w->key), "%s", r->key->name);
    /* nothing before now is its: it pushes the ends from here on */
    w->pushed = w->cursor = d->end_seq;
    w->since = w->last_push = pl_mono();
    d->watches[d->nwatches++] = w;
    return w;
}

void pl_watch_req(struct pl_daemon *d, const struct pl_req *r,
                  const struct pl_msg *m)
{
    struct pl_error err;
    struct pl_watch_req q;
    struct pl_watch *w;
    uint64_t *ids = NULL;
    size_t nids = 0;
    bool made = false;

    if (pl_watch_req_decode(m->body, &q, &err) < 0) {
        pl_out_err(d, r, errno, err.text);
        return;
    }
    /* ends are pushed only once stored, so a client cannot have seen one
     * past the last stored: an 'after' beyond it is another pilot's (or
     * a made-up) number, and a replay from it would skip every end up
     * to it without a word */
    if (q.has_after && q.after > d->end_seq) {
        pl_errprintf(&err, "after %llu: beyond this pilot's last end "
                     "(seq %llu)", (unsigned long long)q.after,
                     (unsigned long long)d->end_seq);
        errno = EINVAL;
        goto bad;
    }
    /* 'make' alone: an empty watch, for tasks a submit's 'watch' adds
     * (without it, a WATCH of no tasks only finds one: a client asks so
     * whether pilotd still has its watch) */
    bool adds = q.all || pl_sel_req_given(&q.sel) || q.make;
    if (!(w = owned(d, r, q.token, !adds, &err))) {
        if (errno)
            goto bad;
        if (!(w = watch_new(d, r, q.token, &err)))
            goto bad;
        made = true;
    }
    if (q.all && !w->all) {
        /* every task: its own list goes (an end would come twice) */
        for (size_t i = 0; i < w->nids; i++) {
            struct pl_dtask *t = pl_sched_task_get(d->sched, w->ids[i]);
            if (t)
                task_unlist(t, w);
        }
        w->nids = 0;
        w->live = 0;
        w->all = true;
        d->nwatch_all++;
    }
    if (pl_sel_req_given(&q.sel) && !w->all) {
        if (pl_query_resolve(pl_db_handle(d->db), q.sel.ids, q.sel.nids,
                             q.sel.elems, q.sel.nelems, true, &ids, &nids,
                             &err) < 0)
            goto bad;
        qsort(ids, nids, sizeof(*ids), cmp_u64);
        if (members_add(d, w, ids, nids, &err) < 0)
            goto bad;
    }
    if (q.attach) {
        memcpy(w->rid, r->rid, r->ridlen < sizeof(w->rid) ? r->ridlen
                                                          : sizeof(w->rid));
        w->ridlen = r->ridlen < sizeof(w->rid) ? r->ridlen : sizeof(w->rid);
        w->attached = true;
    }
    if (q.has_after)
        start_replay(d, w, q.after);
    if (w->attached && w->replay)
        uv_idle_start(&d->watch_idle, idle_cb); /* a detached one's too */
    w->last_push = pl_mono();
    struct pl_watch_reply rep = {
        .seq = d->end_seq, .n = w->n,
        .watching = w->all ? (uint64_t)d->total : w->nids,
        .pending = pending(d, w),
    };
    snprintf(rep.token, sizeof(rep.token), "%s", w->token);
    struct pl_out *o = pl_out_new(d->csock, r->rid, r->ridlen);
    if (o) {
        o->seq = r->seq;
        pl_watch_reply_encode(&o->w, r->seq, &rep);
        pl_out_push(d, o);
    }
    goto done;
bad:
    pl_out_err(d, r, errno ? errno : EINVAL, err.text);
    if (made)
        watch_drop(d, w);
done:
    free(ids);
    pl_watch_req_clear(&q);
}

void pl_unwatch_req(struct pl_daemon *d, const struct pl_req *r,
                    const struct pl_msg *m)
{
    char token[PL_WATCH_TOKEN_MAX + 1];
    struct pl_error err;
    struct pl_watch *w;

    if (pl_unwatch_decode(m->body, token, &err) < 0
        || !(w = owned(d, r, token, true, &err))) {
        pl_out_err(d, r, errno ? errno : EINVAL, err.text);
        return;
    }
    watch_drop(d, w);
    pl_out_json(d, r, json_object());
}

struct pl_watch *pl_watch_for_submit(struct pl_daemon *d,
                                     const struct pl_req *r,
                                     const char *token, uint64_t n,
                                     struct pl_error *errp)
{
    struct pl_watch *w = owned(d, r, token, true, errp);

    if (!w)
        return NULL;
    if (!w->all && w->nids + n > PL_WATCH_MAX_IDS) {
        pl_errset(errp, E2BIG, "watch %s holds %zu tasks: %llu more would "
                  "pass its most, %d", token, w->nids,
                  (unsigned long long)n, PL_WATCH_MAX_IDS);
        return NULL;
    }
    return w;
}
