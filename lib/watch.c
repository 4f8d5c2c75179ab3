/* lib/watch.c - libpilot: pilot_watch_*(), the ends pilotd pushes
 *
 * A struct pilot_watch is a client/sub.c subscription over a connection
 * of its own (a pl_conn: its own DEALER, ZeroMQ context and libuv loop),
 * so a thread may block in pilot_watch_next() while others send requests
 * on the struct pilot it came from: nothing of that struct is held
 * while it waits.  One call at a time works the watch's connection (its
 * 'turn'); a pilot_watch_next() that waits gives the turn up between
 * slices of WAIT_SLICE_MS when another call wants it.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/sub.h"
#include "lib/pilot_private.h"
#include "proto/pilotdir.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "proto/watchmsg.h"

/* How long pilot_watch_next() waits before it looks whether another
 * call (pilot_watch_add(), a submit's ids) wants the watch: at most the
 * delay such a call sees.  A push ends a slice at once. */
#define WAIT_SLICE_MS 100

struct pilot_watch {
    struct pilot_watch *next;   /* in 'watches', under 'watches_lock' */
    struct pl_find find;        /* p's, with our copies of its strings */
    char home[PL_PATH_MAX];
    char id[PL_ID_MAX];
    char keys[PL_PATH_MAX];
    struct pl_conn *conn;       /* our own connection to pilotd */
    struct pl_sub *sub;
    char token[PL_WATCH_TOKEN_MAX + 1];
    pthread_mutex_t lock;       /* guards busy, want, inbox */
    pthread_cond_t cond;
    bool busy;                  /* a call has the turn */
    unsigned want;              /* calls waiting for it */
    unsigned users;             /* calls in progress (enter()) */
    bool closing;               /* pilot_watch_close() waits for them */
    uint64_t *inbox;            /* ids submits added (pl_lib_watch_noted),
                                   for the sub at the next turn */
    size_t ninbox, capinbox;
    bool lost_inbox;            /* one could not be kept (ENOMEM) */
    bool stale;                 /* a submit added tasks: 'pending' may not
                                   count them until pilotd is asked */
    json_t *ends;               /* from the sub, not given out yet */
    bool lost_end;              /* one could not be kept (ENOMEM) */
    _Atomic uint64_t last_seq;  /* the last end given out */
    _Atomic uint64_t pending;   /* pl_sub_pending() at the last turn */
};

/* The open watches of the process, for pilot_submit_opts() to tell the
 * ids its submits added to one (pl_lib_watch_noted()): a submit may go
 * through any struct pilot, and a watch needs no struct pilot once it
 * is open.  Never held across a request. */
static pthread_mutex_t watches_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pilot_watch *watches;

/* Called with w->lock held: the ids submits added go to the sub. */
static void absorb(struct pilot_watch *w)
{
    if (w->ninbox && pl_sub_note(w->sub, w->inbox, w->ninbox) < 0)
        w->lost_inbox = true;
    w->ninbox = 0;
}

/* A call begins: 0, or -1 (ECANCELED, errp) when pilot_watch_close()
 * has begun: a thread may block in pilot_watch_next() while another
 * closes the watch, and the close waits until such calls have left. */
static int enter(struct pilot_watch *w, struct pl_error *errp)
{
    bool closing;

    pthread_mutex_lock(&w->lock);
    closing = w->closing;
    if (!closing)
        w->users++;
    pthread_mutex_unlock(&w->lock);
    return closing ? pl_errset(errp, ECANCELED, "the watch was closed") : 0;
}

static void leave(struct pilot_watch *w)
{
    pthread_mutex_lock(&w->lock);
    w->users--;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Take the turn.  'yield': the caller had it and gave it up for those
 * waiting: let them go first.  -1 (ECANCELED, errp): the watch is being
 * closed, and the turn is not taken. */
static int take(struct pilot_watch *w, bool yield, struct pl_error *errp)
{
    pthread_mutex_lock(&w->lock);
    if (!yield)
        w->want++;
    while (!w->closing && (w->busy || (yield && w->want > 0)))
        pthread_cond_wait(&w->cond, &w->lock);
    if (!yield)
        w->want--;
    if (w->closing) {
        pthread_mutex_unlock(&w->lock);
        return pl_errset(errp, ECANCELED, "the watch was closed");
    }
    w->busy = true;
    absorb(w);
    pthread_mutex_unlock(&w->lock);
    return 0;
}

/* Called with the turn: the tasks not ended or whose end was not given
 * out, as pilotd last said (its count leaves out the ends it pushed,
 * and some of those may not have been given out yet). */
static uint64_t pending_now(struct pilot_watch *w)
{
    uint64_t n = pl_sub_pending(w->sub);

    return n == UINT64_MAX ? n : n + json_array_size(w->ends);
}

static void give(struct pilot_watch *w)
{
    pthread_mutex_lock(&w->lock);
    w->pending = pending_now(w);
    w->busy = false;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Whether another call waits for the turn; the ids of submits are
 * taken meanwhile. */
static bool wanted(struct pilot_watch *w)
{
    bool want;

    pthread_mutex_lock(&w->lock);
    want = w->want > 0;
    absorb(w);
    pthread_mutex_unlock(&w->lock);
    return want;
}

static void end_cb(struct pl_sub *s, const struct pl_end *e, void *arg)
{
    struct pilot_watch *w = arg;
    char *b64 = NULL;
    json_t *o;
    (void)s;

    /* a Python call's small result, pushed with its end: the caller
     * needs no "results" request for it (out of memory: it asks) */
    if (e->result && e->result_size)
        b64 = pl_b64_encode(e->result, e->result_size);
    o = json_pack("{s:I, s:I, s:s, s:o, s:o, s:f, s:o, s:o}", "seq",
                  (json_int_t)e->seq, "id", (json_int_t)e->id, "state",
                  pl_state_name(e->state), "exit_code",
                  e->exit_code >= 0 ? json_integer(e->exit_code)
                                    : json_null(),
                  "signal", e->signal >= 0 ? json_integer(e->signal)
                                           : json_null(),
                  "end_time", e->end_time, "reason",
                  e->reason ? json_string(e->reason) : json_null(),
                  "result", b64 ? json_string(b64) : json_null());
    free(b64);
    if (!o || json_array_append_new(w->ends, o) < 0)
        w->lost_end = true;
}

/* Our copy of p's way of finding its pilot: the watch looks at it again
 * (pl_pilot_probe()) with no lock of p's held. */
static int copy_find(struct pilot_watch *w, const struct pl_find *f,
                     struct pl_error *errp)
{
    struct { const char *s; char *buf; size_t len; const char **dst; } c[] = {
        { f->home, w->home, sizeof(w->home), &w->find.home },
        { f->pilot, w->id, sizeof(w->id), &w->find.pilot },
        { f->keys, w->keys, sizeof(w->keys), &w->find.keys },
    };

    w->find = *f;
    w->find.note = NULL; /* nothing to say it to */
    w->find.slurm = NULL;
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        if (!c[i].s)
            continue;
        if (strlen(c[i].s) >= c[i].len)
            return pl_errset(errp, ENAMETOOLONG, "watch: '%.64s' is too "
                             "long", c[i].s);
        memcpy(c[i].buf, c[i].s, strlen(c[i].s) + 1);
        *c[i].dst = c[i].buf;
    }
    return 0;
}

/* The arguments of pilot_watch_open(). */
struct open_args {
    struct pl_sel_req sel;
    bool all;
    const char *token;          /* borrowed from the JSON */
    bool has_after;
    uint64_t after;
};

static int bad(const char *key, const char *want, struct pl_error *errp)
{
    return pl_errset(errp, EINVAL, "watch: '%s' must be %s", key, want);
}

static int open_args(const json_t *args, struct open_args *a,
                     struct pl_error *errp)
{
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)args, k, v) {
        if (json_is_null(v))
            continue;
        if (!strcmp(k, "ids")) {
            if (!json_is_array(v))
                return bad(k, "an array of task ids (ID, or \"ID.N\")", errp);
            if (json_array_size(v) > 0
                && pl_lib_sel("watch", v, &a->sel, errp) < 0)
                return -1;
        }
        else if (!strcmp(k, "all")) {
            if (!json_is_boolean(v))
                return bad(k, "true or false", errp);
            a->all = json_is_true(v);
        }
        else if (!strcmp(k, "token")) {
            if (!json_is_string(v) || !pl_watch_token_ok(json_string_value(v)))
                return bad(k, "a watch's token (16 to 64 of A-Z a-z 0-9 _ "
                           "-)", errp);
            a->token = json_string_value(v);
        }
        else if (!strcmp(k, "after")) {
            if (!json_is_integer(v) || json_integer_value(v) < 0)
                return bad(k, "an end seq (an integer >= 0)", errp);
            a->has_after = true;
            a->after = (uint64_t)json_integer_value(v);
        }
        else
            return pl_errset(errp, EINVAL, "watch: unknown field '%.40s' "
                             "(ids, all, token, after)", k);
    }
    if (a->all && pl_sel_req_given(&a->sel))
        return pl_errset(errp, EINVAL, "watch: 'ids' or 'all', not both");
    if (a->has_after && !a->token)
        return pl_errset(errp, EINVAL, "watch: 'after' resumes a watch: "
                         "give its 'token' too");
    return 0;
}

void pl_lib_watch_noted(const char *token, const json_t *ids)
{
    int saved = errno;
    size_t n = json_array_size(ids);

    pthread_mutex_lock(&watches_lock);
    for (struct pilot_watch *w = watches; w; w = w->next) {
        if (strcmp(w->token, token))
            continue;
        pthread_mutex_lock(&w->lock);
        if (pl_grow(&w->inbox, &w->capinbox, w->ninbox, n,
                    sizeof(*w->inbox)) < 0)
            w->lost_inbox = true;
        else
            for (size_t i = 0; i < n; i++)
                w->inbox[w->ninbox++] =
                    (uint64_t)json_integer_value(json_array_get(ids, i));
        w->stale = true;
        pthread_mutex_unlock(&w->lock);
    }
    pthread_mutex_unlock(&watches_lock);
    errno = saved;
}

static void unlist(struct pilot_watch *w)
{
    pthread_mutex_lock(&watches_lock);
    for (struct pilot_watch **pp = &watches; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    pthread_mutex_unlock(&watches_lock);
}

/* Refuse a selection with a task pilotd does not have (WATCH takes an
 * unknown id as a task that never ends): ENOENT "no task 12", as the
 * other requests say it.  0, or -1 with errp. */
static int known(struct pilot_watch *w, const struct pl_sel_req *sel,
                 struct pl_error *errp)
{
    json_t *c = pl_conn_counts(w->conn, sel, errp), *unknown;
    int rc = -1;

    if (!c)
        return -1;
    unknown = json_object_get(c, "unknown");
    if (json_array_size(unknown) > 0)
        pl_errset(errp, ENOENT, "no task %lld%s",
                  (long long)json_integer_value(json_array_get(unknown, 0)),
                  json_array_size(unknown) > 1 ? " (and others)" : "");
    else
        rc = 0;
    json_decref(c);
    return rc;
}

/* Free what open made, without a word to pilotd; preserves errno. */
static void watch_free(struct pilot_watch *w)
{
    int saved = errno;

    unlist(w);
    pl_sub_free(w->sub);
    pl_conn_free(w->conn);
    json_decref(w->ends);
    free(w->inbox);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
    errno = saved;
}

struct pilot_watch *pilot_watch_open(struct pilot *p, const char *args_json,
                                     struct pilot_error *err)
{
    struct pl_error e = { { 0 } };
    struct open_args a = { 0 };
    struct pilot_watch *w = NULL;
    struct pl_pilot pilot;
    json_t *args = NULL;
    json_error_t jerr;
    bool live;
    int rc = -1;

    if (!p) {
        pl_errset(&e, EINVAL, "pilot_watch_open: a NULL argument");
        goto done;
    }
    if (!args_json || !*args_json)
        args = json_object();
    else if (!(args = json_loads(args_json, JSON_REJECT_DUPLICATES, &jerr))) {
        pl_errset(&e, EINVAL, "watch: arguments not JSON: %s", jerr.text);
        goto done;
    }
    if (!json_is_object(args)) {
        pl_errset(&e, EINVAL, "watch: arguments must be a JSON object");
        goto done;
    }
    if (open_args(args, &a, &e) < 0)
        goto done;
    if (!(w = calloc(1, sizeof(*w)))) {
        pl_errset(&e, ENOMEM, "out of memory");
        goto done;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->pending = UINT64_MAX;
    if (!(w->ends = json_array())) {
        pl_errset(&e, ENOMEM, "out of memory");
        goto done;
    }
    pthread_mutex_lock(&p->lock);
    live = p->conn->rpc != NULL;
    pilot = p->conn->pilot;
    rc = copy_find(w, &p->find, &e);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0)
        goto done;
    rc = -1;
    if (!live) {
        pl_errset(&e, ENOTCONN, "pilot %s is not running: a watch needs "
                  "its pilotd", pilot.id);
        goto done;
    }
    if (!(w->conn = pl_conn_attach(&w->find, &pilot, &e))
        || !(w->sub = pl_sub_new(w->conn->rpc, a.token, w->conn->timeout_ms,
                                 end_cb, w, &e)))
        goto done;
    snprintf(w->token, sizeof(w->token), "%s", pl_sub_token(w->sub));
    if (pl_sel_req_given(&a.sel) && known(w, &a.sel, &e) < 0)
        goto done;
    if ((a.has_after
             ? pl_sub_resume(w->sub, a.after, &a.sel, a.all, &e)
             : pl_sub_add(w->sub, &a.sel, a.all, &e)) < 0)
        goto done;
    w->pending = pl_sub_pending(w->sub);
    w->last_seq = a.has_after ? a.after : pl_sub_last_seq(w->sub);
    pthread_mutex_lock(&watches_lock);
    w->next = watches;
    watches = w;
    pthread_mutex_unlock(&watches_lock);
    rc = 0;
done:
    if (rc < 0) {
        pl_lib_fail(err, &e);
        if (w)
            watch_free(w); /* preserves errno */
        w = NULL;
    }
    pl_sel_req_clear(&a.sel);
    json_decref(args);
    return w;
}

int pilot_watch_add(struct pilot_watch *w, const char *ids_json,
                    struct pilot_error *err)
{
    struct pl_error e = { { 0 } };
    struct pl_sel_req sel = { 0 };
    json_t *ids = NULL;
    json_error_t jerr;
    int rc = -1;

    if (!w || !ids_json) {
        pl_errset(&e, EINVAL, "pilot_watch_add: a NULL argument");
        goto done;
    }
    if (!(ids = json_loads(ids_json, JSON_REJECT_DUPLICATES, &jerr))) {
        pl_errset(&e, EINVAL, "watch: ids not JSON: %s", jerr.text);
        goto done;
    }
    if (!json_is_array(ids) || json_array_size(ids) == 0) {
        pl_errset(&e, EINVAL, "watch: ids must be a non-empty JSON array "
                  "of task ids (ID, or \"ID.N\")");
        goto done;
    }
    if (pl_lib_sel("watch", ids, &sel, &e) < 0)
        goto done;
    if (enter(w, &e) < 0)
        goto done;
    if (take(w, false, &e) == 0) {
        if (!w->conn->rpc) {
            errno = ENOTCONN;
            pl_errprintf(&e, "pilot %s is not running", w->conn->pilot.id);
        }
        else if (known(w, &sel, &e) == 0)
            rc = pl_sub_add(w->sub, &sel, false, &e);
        give(w);
    }
    leave(w);
done:
    if (rc < 0)
        pl_lib_fail(err, &e);
    pl_sel_req_clear(&sel);
    json_decref(ids);
    return rc;
}

const char *pilot_watch_token(const struct pilot_watch *w)
{
    return w->token;
}

uint64_t pilot_watch_last_seq(const struct pilot_watch *w)
{
    return w->last_seq;
}

uint64_t pilot_watch_pending(const struct pilot_watch *cw)
{
    /* const to its caller, who sees no change; the watch itself is
     * never const (pilot_watch_open() allocates it) */
    struct pilot_watch *w = (struct pilot_watch *)cw;
    struct pl_error e;
    bool stale;
    int rc = -1;

    pthread_mutex_lock(&w->lock);
    stale = w->stale;
    w->stale = false; /* a submit noted from here on sets it again */
    pthread_mutex_unlock(&w->lock);
    if (!stale)
        return w->pending;
    /* pilotd counts a submit's tasks in the watch, but says so only in
     * its next push: ask it, or the caller's "while pending" loop ends
     * before the first of them ends */
    if (enter(w, &e) < 0)
        return w->pending;
    if (take(w, false, &e) == 0) {
        if (w->conn->rpc)
            rc = pl_sub_refresh(w->sub, &e);
        give(w);
    }
    leave(w);
    if (rc == 0)
        return w->pending;
    pthread_mutex_lock(&w->lock);
    w->stale = true;
    pthread_mutex_unlock(&w->lock);
    /* they have not been seen to end: pilot_watch_next() says why not */
    return w->pending == 0 ? 1 : w->pending;
}

/* After pl_sub_wait() failed with 'e': go on (0) while pilotd may still
 * answer, at its endpoint or at a new one (a local pilot's pilotd
 * started again listens on another port: the sub follows), else -1:
 * the pilot does not run, or pilotd refused (the sub asks again at the
 * next call either way). */
static int lost(struct pilot_watch *w, struct pl_error *e)
{
    int errnum = errno;

    if (errnum != ETIMEDOUT && errnum != EPROTO)
        return -1;
    pl_lib_slurm_lend(&w->find);
    pl_pilot_probe(&w->find, &w->conn->pilot);
    pl_lib_slurm_return(&w->find);
    if (w->conn->pilot.state != PL_PILOT_RUNNING) {
        errno = ENOTCONN;
        return pl_errprintf(e, "pilot %s is not running (%s): the ends "
                            "of its tasks come when it runs again",
                            w->conn->pilot.id, w->conn->pilot.why);
    }
    if (pl_conn_moved(w->conn)) {
        pl_sub_set_rpc(w->sub, w->conn->rpc);
        return 0;
    }
    /* a pilotd that is slow, or started again on the same endpoint (a
     * Slurm pilot's), answers a later request; EPROTO comes at once and
     * would come again at once (another server key, another version) */
    errno = errnum;
    return errnum == ETIMEDOUT ? 0 : -1;
}

/* The ends taken, as pilot_watch_next() gives them, into *out. */
static int give_out(struct pilot_watch *w, char **out, struct pl_error *e)
{
    size_t n = json_array_size(w->ends);
    json_t *last = json_object_get(json_array_get(w->ends, n - 1), "seq");
    uint64_t seq = (uint64_t)json_integer_value(last);
    uint64_t pending = pl_sub_pending(w->sub);
    json_t *o;

    o = json_pack("{s:O, s:o, s:I}", "ends", w->ends, "pending",
                  pending == UINT64_MAX ? json_null()
                                        : json_integer((json_int_t)pending),
                  "last_seq", (json_int_t)seq);
    if (!o || pl_lib_dump(o, out, e) < 0) {
        json_decref(o);
        return pl_errset(e, ENOMEM, "out of memory");
    }
    json_decref(o);
    json_array_clear(w->ends);
    w->last_seq = seq;
    return 1;
}

int pilot_watch_next(struct pilot_watch *w, int timeout_ms, char **ends_json,
                     struct pilot_error *err)
{
    struct pl_error e = { { 0 } };
    double end;
    int rc = 0;

    if (ends_json)
        *ends_json = NULL;
    if (!w || !ends_json) {
        pl_errset(&e, EINVAL, "pilot_watch_next: a NULL argument");
        return pl_lib_fail(err, &e);
    }
    end = timeout_ms < 0 ? INFINITY : pl_mono() + timeout_ms / 1000.0;
    if (enter(w, &e) < 0)
        return pl_lib_fail(err, &e);
    if (take(w, false, &e) < 0) {
        leave(w);
        return pl_lib_fail(err, &e);
    }
    for (;;) {
        if (w->lost_end || w->lost_inbox) {
            errno = ENOMEM;
            rc = pl_errprintf(&e, "out of memory: the watch lost track of "
                              "an end (open it again with 'after')");
            break;
        }
        if (json_array_size(w->ends) > 0) {
            rc = give_out(w, ends_json, &e);
            break;
        }
        double left = end - pl_mono();
        int slice = left >= WAIT_SLICE_MS / 1000.0 ? WAIT_SLICE_MS
                    : left > 0 ? (int)(left * 1000) + 1 : 0;
        if (!w->conn->rpc) {
            errno = ENOTCONN;
            rc = pl_errprintf(&e, "pilot %s is not running",
                              w->conn->pilot.id);
            break;
        }
        if (pl_sub_wait(w->sub, slice, &e) < 0 && lost(w, &e) < 0) {
            rc = -1; /* the ends taken so far stay for the next call */
            break;
        }
        if (json_array_size(w->ends) > 0)
            continue;
        if (left <= 0)
            break; /* 0: nothing came */
        if (wanted(w)) {
            give(w);
            if (take(w, true, &e) < 0) {
                leave(w); /* closing: the ends taken are dropped */
                return pl_lib_fail(err, &e);
            }
        }
    }
    give(w);
    leave(w);
    if (rc < 0)
        pl_lib_fail(err, &e);
    return rc;
}

void pilot_watch_close(struct pilot_watch *w, int unwatch)
{
    struct pl_error e;

    if (!w)
        return;
    int saved = errno;
    /* a call that waits in another thread gives the turn up within
     * WAIT_SLICE_MS (it sees 'want'), finds 'closing' and returns */
    pthread_mutex_lock(&w->lock);
    w->closing = true;
    w->want++;
    pthread_cond_broadcast(&w->cond);
    while (w->users > 0)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    unlist(w);
    if (unwatch && w->conn->rpc)
        (void)pl_sub_unwatch(w->sub, &e); /* else it expires in 10 min */
    watch_free(w);
    errno = saved;
}
