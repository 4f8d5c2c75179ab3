/* daemon/daemon.c - pilotd: sockets, request handlers, agents, shutdown
 *
 * All work happens on the loop thread.  Messages are handled in bounded
 * batches; after each batch flush() runs the scheduler, commits the one
 * open transaction (group commit), and only then sends the replies and
 * the work queued during the batch, so an acknowledged submission is
 * always committed.  When the commit fails (the state directory is full
 * or read-only) pilotd keeps going on its journal (daemon/db.h) without
 * acknowledging or starting anything, and retries (docs/state.md).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <zmq.h>

#include "daemon/auth.h"
#include "daemon/daemon.h"
#include "daemon/db.h"
#include "daemon/decode.h"
#include "daemon/launch.h"
#include "daemon/sched.h"
#include "daemon/slurmjob.h"
#include "proto/log.h"
#include "proto/mpjson.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/query.h"
#include "proto/state.h"
#include "proto/zsock.h"
#include "proto/zwatch.h"

#define MAX_SUBMIT 100000      /* tasks in one submit request */
#define LIST_MAX 100000        /* tasks in one list reply */
/* ids in one list, counts or cancel request: a lookup each, 7 us here,
 * so 0.7 s at most (a million held pilotd for 7.5 s) */
#define MAX_IDS 100000
#define KILL_GRACE 5.0         /* s between SIGTERM and SIGKILL */
#define STOP_GRACE 15000       /* ms to wait for agents at shutdown */
#define RESTART_DELAY 5000     /* ms before restarting the agents' step */
#define MAX_RESTARTS 5
#define RECOVER_HEARTBEATS 5   /* a restarted pilotd waits this many agent
                                  heartbeats for the agents to come back */
#define ORPHAN_TIMEOUT 600     /* s an agent outlives a silent pilotd */
#define NODE_RESTARTS 3        /* agents started on a node that lost its */
/* Lines about what a peer sent wrong: at most BAD_LOG_BURST in each
 * BAD_LOG_WINDOW, then one line says how many were left out.  A peer
 * sending garbage as fast as it can would otherwise write a line per
 * frame (10,000 frames a second is about 1 MB of log a second). */
#define BAD_LOG_BURST 20
#define BAD_LOG_WINDOW 10.0    /* s */
/* A batch of messages ends after PL_ZBATCH of them or BATCH_NS of work:
 * flush() sends the batch's replies only at its end, and a peer's run of
 * slow but valid requests (4 Mi values to decode, 100,000 ids to look
 * up: 0.3-0.7 s each) held another client's status reply for as long as
 * all of them took (7 s for 10).  Now a quick request waits for at most
 * two slow ones.  The watcher calls us again at once if more is queued. */
#define BATCH_NS (20 * 1000 * 1000ULL)
/* After a failed commit: retry at most this often (s) from the loop
 * (the 1 s tick makes it every second), and from a submit or cancel.  A
 * retry replays the journal, one statement per write kept: what changed
 * since the failure, which is little, as no task starts meanwhile. */
#define STORE_RETRY 0.5
#define STORE_RETRY_REQ 0.1
/* The WAL is copied into the database at most this often (s) after a
 * commit, and at the 1 s tick: it stays about 0.25 s of writes long
 * (SQLite's own checkpoint at 1000 pages, 4 MiB, bounds a burst).  A
 * copy costs two fsyncs (8 ms here for 100 pages): SQLite's own alone,
 * every 1000 pages, would let the WAL grow to 4 MiB; every 100 pages, it
 * made a commit 3 times as slow (1.0 ms, not 0.34 ms, 8 writes each). */
#define CHECKPOINT 0.25
/* run_seq of a rank placed whose RUN waits for the commit: for
 * agent_register() it is on its way */
#define RUN_UNSENT UINT64_MAX

/* A message to send after the batch's commit. */
struct out {
    struct out *next;
    void *sock;
    unsigned char rid[256];
    size_t ridlen;
    struct pl_wbuf w;
    uint64_t seq;            /* the request answered, for an error reply */
    uint64_t *undo;          /* tasks this reply acknowledges */
    size_t nundo;
    bool needs_commit;       /* acknowledges what the batch stores: if
                                its commit fails, an agent's is not sent
                                and a client's becomes an error */
    bool cancel;             /* the reply to a cancel */
};

/* A task placed whose RUN waits for the commit of its assignment. */
struct unsent {
    uint64_t id;
    uint32_t attempt;
};

/* A task whose dependency failed: it fails too, after the one that
 * ended (a list, not a recursion: a chain may be long). */
struct depfail {
    uint64_t id, serial, dep;
    int state;                   /* the dependency's */
};

struct pl_daemon {
    uv_loop_t *loop;
    uint64_t serial;             /* tasks made (pl_dtask.serial) */
    struct depfail *depfail;     /* to fail, 'ndepfail' of them */
    size_t ndepfail, capdepfail;
    bool in_depfail;
    struct pl_daemon_config cfg;
    char dir[PL_PATH_MAX];
    char keydir[PL_PATH_MAX];
    char id[PL_ID_MAX];
    char host[256];
    char bindir[PL_PATH_MAX];
    struct pl_db *db;
    struct pl_sched *sched;
    void *zctx;
    struct pl_auth *auth;        /* ZAP: judges the peers of both ROUTERs */
    void *csock, *asock;         /* ROUTERs: clients, agents (CURVE) */
    struct pl_zwatch *czw, *azw;
    char cep[256], aep[256];
    uv_signal_t sigterm, sigint;
    uv_timer_t tick, stop_timer, restart_timer;
    struct pl_launch *launch;
    int restarts;
    struct out *outq, **outtail;
    bool want_sched;
    bool stopping, stopped;
    int exit_code;
    double started;
    time_t end_time;
    double end_time_checked;
    long long count[PL_ST_COUNT];
    long long total;
    int handles;                 /* uv handles still to close */
    /* A pilotd restarted in its allocation: the agents of the one before
     * still run its tasks.  Until they are back (or recover_until), the
     * tasks the database says are on agents are 'orphans' (pl_rank). */
    bool recovering;
    double recover_until;
    bool agents_deferred;        /* start the agents that did not return */
    char instance[96];           /* this pilotd, told apart from the last */
    struct node_launch **node_launch; /* agents started on one node */
    size_t nnode_launch;
    bool draining;               /* stopping for the walltime (SIGTERM):
                                  interrupted tasks go back to the queue */
    double bad_since;            /* start of the bad-input log window */
    unsigned bad_logged;         /* lines logged in it */
    unsigned long long bad_dropped; /* lines left out in it */
    struct unsent *unsent;       /* placed, RUN not sent (send_runs()) */
    size_t nunsent, capunsent;
    /* A commit failed: until a retry stores the journal, nothing is
     * acknowledged and no task is started (store_failed()). */
    double store_failed_since;   /* 0: everything is stored */
    double store_retry_at;       /* the last retry */
    double ckpt_at;              /* the last checkpoint */
    int store_errno;             /* the reason last logged */
};

static double now(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

/* ------------------------------------------------------------ bad input */

/* End the window of bad-input lines once it is over, saying how many it
 * left out.  Called for each such line and every second (tick_cb). */
static void bad_log_window(struct pl_daemon *d, double t)
{
    if (t - d->bad_since < BAD_LOG_WINDOW)
        return;
    if (d->bad_dropped)
        pl_log(LOG_WARNING, "%llu more bad messages suppressed in the last "
               "%.0f s", d->bad_dropped, t - d->bad_since);
    d->bad_since = t;
    d->bad_logged = 0;
    d->bad_dropped = 0;
}

/* pl_log() for a line about bad input from a peer, within the limit. */
__attribute__((format(printf, 3, 4)))
static void bad_log(struct pl_daemon *d, int level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (level > pl_log_level)
        return;
    bad_log_window(d, now());
    if (d->bad_logged >= BAD_LOG_BURST) {
        d->bad_dropped++;
        return;
    }
    d->bad_logged++;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pl_log(level, "%s", msg);
}

/* Whether a batch begun at 't0' (uv_hrtime()) has done enough, after
 * 'i' messages. */
static bool batch_over(uint64_t t0, int i)
{
    return i >= PL_ZBATCH || (i > 0 && uv_hrtime() - t0 > BATCH_NS);
}

/* ------------------------------------------------------------ out queue */

static struct out *out_new(void *sock, const void *rid, size_t ridlen)
{
    struct out *o = calloc(1, sizeof(*o));

    if (!o)
        return NULL;
    o->sock = sock;
    if (ridlen > sizeof(o->rid))
        ridlen = sizeof(o->rid);
    memcpy(o->rid, rid, ridlen);
    o->ridlen = ridlen;
    return o;
}

static void out_push(struct pl_daemon *d, struct out *o)
{
    *d->outtail = o;
    d->outtail = &o->next;
}

static void out_free(struct out *o)
{
    pl_wbuf_destroy(&o->w);
    free(o->undo);
    free(o);
}

static void reply_err(struct pl_daemon *d, const void *rid, size_t ridlen,
                      uint64_t seq, int errnum, const char *text)
{
    struct out *o = out_new(d->csock, rid, ridlen);

    if (!o)
        return;
    o->seq = seq;
    pl_wbuf_reply(&o->w, seq, errnum ? errnum : EIO, text);
    out_push(d, o);
}

/* Queue a reply holding 'data' (taken).  Returns it (borrowed: the out
 * queue owns it), or NULL if out of memory. */
static struct out *reply_json(struct pl_daemon *d, const void *rid,
                              size_t ridlen, uint64_t seq, json_t *data)
{
    struct out *o = out_new(d->csock, rid, ridlen);

    if (!o)
        goto done;
    o->seq = seq;
    pl_wbuf_reply(&o->w, seq, 0, NULL);
    pl_mpjson_pack(&o->w.pk, data);
    out_push(d, o);
done:
    json_decref(data);
    return o;
}

static void count_move(struct pl_daemon *d, int from, int to)
{
    if (from > 0 && from < PL_ST_COUNT)
        d->count[from]--;
    if (to > 0 && to < PL_ST_COUNT)
        d->count[to]++;
}

/* Forget the tasks of a reply whose commit failed: they were never
 * stored, so they must not run. */
static void undo_reply(struct pl_daemon *d, struct out *o, const char *why,
                       int errnum)
{
    for (size_t i = 0; i < o->nundo; i++) {
        struct pl_dtask *t = pl_sched_task_get(d->sched, o->undo[i]);
        if (t) {
            count_move(d, t->state, 0);
            d->total--;
            pl_sched_task_remove(d->sched, t);
        }
    }
    pl_wbuf_destroy(&o->w);
    pl_wbuf_reply(&o->w, o->seq, errnum, why);
}

static void schedule(struct pl_daemon *d);
static void send_runs(struct pl_daemon *d);

/* "ENOSPC": the name of the errno values a state directory fails with. */
static const char *errno_name(int errnum)
{
    switch (errnum) {
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case EFBIG: return "EFBIG";
    case EROFS: return "EROFS";
    case EACCES: return "EACCES";
    case EBUSY: return "EBUSY";
    case ENOMEM: return "ENOMEM";
    default: return "EIO";
    }
}

/* What the status object says of the state directory: "ok", "full",
 * "read-only" or "error". */
static const char *store_state(int errnum)
{
    if (errnum == 0)
        return "ok";
    if (errnum == ENOSPC || errnum == EDQUOT || errnum == EFBIG)
        return "full";
    if (errnum == EROFS || errnum == EACCES)
        return "read-only";
    return "error";
}

/* "the state directory /p/pilots/p1 is full (ENOSPC)" */
static void store_why(const struct pl_daemon *d, int errnum, char *buf,
                      size_t len)
{
    const char *st = store_state(errnum);

    snprintf(buf, len, "the state directory %s %s (%s)", d->dir,
             !strcmp(st, "full")        ? "is full"
             : !strcmp(st, "read-only") ? "is read-only"
                                        : "cannot be written",
             errno_name(errnum));
}

/* The batch ends with writes not stored (its commit failed, or one of
 * its writes did, or an earlier commit): log it once (and when the
 * reason changes), and turn the batch's acknowledgements into errors:
 * its submissions are forgotten (they were not stored), its cancels may
 * not be stored. */
static void store_failed(struct pl_daemon *d)
{
    const char *text;
    int errnum = pl_db_failed(d->db, &text);
    char why[PL_PATH_MAX + 64], reply[PL_PATH_MAX + 160];

    store_why(d, errnum, why, sizeof(why));
    if (!d->store_failed_since) {
        d->store_failed_since = now();
        pl_log(LOG_ERR, "%s: %s; until it can be written again, nothing "
               "is stored, submissions and cancels are refused, no task "
               "starts, reads are served (retrying every second)", why,
               text);
    }
    else if (errnum != d->store_errno)
        pl_log(LOG_WARNING, "%s now: %s", why, text);
    d->store_errno = errnum;
    for (struct out *o = d->outq; o; o = o->next) {
        if (!o->needs_commit || o->sock != d->csock)
            continue;
        snprintf(reply, sizeof(reply), "%s: %s", o->cancel
                 ? "the cancel may not be stored" : "not stored", why);
        undo_reply(d, o, reply, errnum);
        o->needs_commit = false; /* the error goes */
    }
}

/* Try to store the journal again, if the last try is 'interval' s old.
 * On success: log it, send the RUNs that waited, schedule again. */
static void store_retry(struct pl_daemon *d, double interval)
{
    struct pl_error err;
    double t = now();
    size_t n = pl_db_unstored(d->db);

    if (!pl_db_failed(d->db, NULL) || t - d->store_retry_at < interval)
        return;
    d->store_retry_at = t;
    if (pl_db_commit(d->db, &err) < 0)
        return; /* flush() says it if the reason changed */
    pl_log(LOG_NOTICE, "the state directory %s can be written again after "
           "%.1f s: %zu changes stored", d->dir, t - d->store_failed_since,
           n);
    d->store_failed_since = 0;
    d->store_errno = 0;
    send_runs(d);
    d->want_sched = true;
}

/* Copy the WAL into the database if the last copy is 'interval' s old
 * (db.h: the WAL stays about that many seconds of writes long). */
static void checkpoint(struct pl_daemon *d, double interval)
{
    struct pl_error err;
    double t = now();

    if (pl_db_failed(d->db, NULL) || t - d->ckpt_at < interval)
        return;
    d->ckpt_at = t;
    if (pl_db_checkpoint(d->db, &err) < 0)
        pl_log(LOG_DEBUG, "checkpoint: %s", err.text);
}

/* End of a batch: schedule, commit, then send what the batch produced. */
static void flush(struct pl_daemon *d)
{
    struct out *o, *next;

    store_retry(d, STORE_RETRY);
    if (d->want_sched && !d->stopping && !pl_db_failed(d->db, NULL))
        schedule(d);
    bool wrote = pl_db_in_txn(d->db);
    if (wrote)
        pl_db_commit(d->db, NULL); /* a failure is kept in d->db */
    bool stored = !pl_db_failed(d->db, NULL);
    if (stored)
        send_runs(d);
    else
        store_failed(d);
    if (wrote)
        checkpoint(d, CHECKPOINT);
    for (o = d->outq; o; o = next) {
        next = o->next;
        if (!stored && o->needs_commit)
            ; /* not stored: the agent sends it again */
        else if (pl_zsock_send(o->sock, o->rid, o->ridlen, o->w.sb.data,
                               o->w.sb.size) < 0) {
            /* a client that left, or does not read its replies */
            if (o->sock == d->csock)
                bad_log(d, LOG_WARNING, "send to client: %s (message "
                        "dropped)", zmq_strerror(errno));
            else
                pl_log(LOG_WARNING, "send to agent: %s (message dropped)",
                       zmq_strerror(errno));
        }
        out_free(o);
    }
    d->outq = NULL;
    d->outtail = &d->outq;
}

/* ------------------------------------------------------------ helpers */

/* 'v' as a JSON array, or NULL (ENOMEM, or a string that is not UTF-8:
 * never a shorter array). */
static char *json_strv(char *const *v)
{
    json_t *a = json_array();
    char *s = NULL;

    for (size_t i = 0; a && v && v[i]; i++)
        if (json_array_append_new(a, json_string(v[i])) < 0)
            goto done;
    s = a ? json_dumps(a, JSON_COMPACT) : NULL;
done:
    json_decref(a);
    return s;
}

/* Tags "KEY=VALUE" as a JSON object's text, or NULL (none, or ENOMEM:
 * errno says). */
static char *json_tags(char *const *tags)
{
    json_t *o;
    char *s;

    errno = 0;
    if (!tags || !tags[0])
        return NULL;
    if (!(o = json_object())) {
        errno = ENOMEM;
        return NULL;
    }
    for (size_t i = 0; tags[i]; i++) {
        const char *eq = strchr(tags[i], '=');
        char key[72];
        snprintf(key, sizeof(key), "%.*s", (int)(eq - tags[i]), tags[i]);
        if (json_object_set_new(o, key, json_string(eq + 1)) < 0) {
            json_decref(o);
            errno = ENOMEM;
            return NULL;
        }
    }
    s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s)
        errno = ENOMEM;
    return s;
}

static char **strv_json(const char *text)
{
    json_t *a;
    char **v = NULL;
    size_t i;
    json_t *e;

    if (!text || !(a = json_loads(text, 0, NULL)))
        return NULL;
    if (!json_is_array(a) || !(v = calloc(json_array_size(a) + 1, sizeof(*v))))
        goto done;
    json_array_foreach(a, i, e) {
        if (!json_is_string(e) || !(v[i] = strdup(json_string_value(e)))) {
            pl_strv_free(v);
            v = NULL;
            goto done;
        }
    }
done:
    json_decref(a);
    return v;
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
        snprintf(node, nlen, "%s", k->node->name);
        pl_node_cpu_str(k->node, k->core_idx, k->ncores, cores, clen);
        pl_node_gpu_str(k->node, k->gpu_idx, k->ngpus, gpus, glen);
    }
    else
        pl_sched_nodelist(t, node, nlen);
}

/* Record a state change of 't' in the database and the counters. */
static int change(struct pl_daemon *d, struct pl_dtask *t, int state,
                  const struct pl_db_change *extra)
{
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1 };
    struct pl_error err;
    char node[1024], cores[1024], gpus[512];

    if (extra)
        c = *extra;
    c.id = t->id;
    c.state = state;
    c.attempt = t->attempt;
    if (!c.time)
        c.time = now();
    if (t->rank && !c.node) {
        where(t, node, sizeof(node), cores, sizeof(cores), gpus,
              sizeof(gpus));
        c.node = node[0] ? node : NULL;
        c.cores = cores[0] ? cores : NULL;
        c.gpus = gpus[0] ? gpus : NULL;
    }
    count_move(d, t->state, state);
    t->state = state;
    if (pl_db_task_change(d->db, &c, &err) < 0) {
        pl_log(LOG_ERR, "task %llu: %s", (unsigned long long)t->id, err.text);
        return -1;
    }
    return 0;
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
        .time = time ? time : now(), .node = k->node ? k->node->name : NULL,
        .cores = cores[0] ? cores : NULL, .gpus = gpus[0] ? gpus : NULL,
        .reason = detail, .exit_code = -1, .signal = -1, .maxrss_kb = -1,
    };
    if (pl_db_rank_event(d->db, &c, r, &err) < 0)
        pl_log(LOG_ERR, "task %llu rank %u: %s", (unsigned long long)t->id,
               r, err.text);
}

/* ------------------------------------------------------ dependencies */

/* Task 'w' (serial 'serial') waits for 'dep' to end. */
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
    t->state = PL_ST_WAITING; /* for the counters */
    change(d, t, PL_ST_QUEUED, NULL);
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
        if (d->ndepfail == d->capdepfail) {
            size_t ncap = d->capdepfail ? d->capdepfail * 2 : 64;
            struct depfail *nf = realloc(d->depfail, ncap * sizeof(*nf));
            if (!nf) {
                pl_log(LOG_ERR, "task %llu: out of memory: it waits on",
                       (unsigned long long)t->id);
                continue;
            }
            d->depfail = nf;
            d->capdepfail = ncap;
        }
        d->depfail[d->ndepfail++] = (struct depfail){ t->id, t->serial,
                                                      dep->id, state };
    }
    free(w);
}

static void finish(struct pl_daemon *d, struct pl_dtask *t, int state,
                   const struct pl_db_change *extra);

/* Fail the waiters of failed dependencies, down the graph. */
static void deps_fail_all(struct pl_daemon *d)
{
    if (d->in_depfail)
        return; /* the outer call goes on with the list */
    d->in_depfail = true;
    while (d->ndepfail > 0) {
        struct depfail f = d->depfail[--d->ndepfail];
        struct pl_dtask *t = waiter_get(d, f.id, f.serial);
        char why[96];
        if (!t)
            continue;
        snprintf(why, sizeof(why), "dependency: task %llu %s",
                 (unsigned long long)f.dep, pl_state_name(f.state));
        struct pl_db_change c = { .exit_code = -1, .signal = -1,
                                  .maxrss_kb = -1, .reason = why };
        finish(d, t, PL_ST_FAILED, &c);
    }
    d->in_depfail = false;
}

/* 't' reached a final state: record it and forget it; what waited for it
 * goes on, or fails with it. */
static void finish(struct pl_daemon *d, struct pl_dtask *t, int state,
                   const struct pl_db_change *extra)
{
    change(d, t, state, extra);
    pl_log(LOG_INFO, "task %llu: %s", (unsigned long long)t->id,
           pl_state_name(state));
    if (t->nwaiters)
        deps_release(d, t, state);
    pl_sched_task_remove(d->sched, t);
    d->want_sched = true;
    deps_fail_all(d);
}

/* ------------------------------------------------------------ agents */

static void send_agent(struct pl_daemon *d, struct pl_node *n, struct out *o)
{
    (void)n;
    out_push(d, o);
}

static struct out *agent_out(struct pl_daemon *d, struct pl_node *n)
{
    return out_new(d->asock, n->rid, n->ridlen);
}

/* The ranks an agent starts itself: all, but for MPI only rank 0, whose
 * agent launches the whole job (the other ranks' cores are held). */
static uint32_t launched(const struct pl_dtask *t)
{
    return t->comm == PL_COMM_MPI ? 1 : t->ranks;
}

/* Kill every rank of 't' still running: one kill per node it is on. */
static void send_kill(struct pl_daemon *d, struct pl_dtask *t)
{
    for (uint32_t r = 0; t->rank && r < launched(t); r++) {
        struct pl_node *n = t->rank[r].node;
        bool first = true;
        struct out *o;
        if (!n || pl_state_final(t->rank[r].state) || n->state != PL_NODE_UP)
            continue;
        for (uint32_t q = 0; q < r; q++)
            if (t->rank[q].node == n && !pl_state_final(t->rank[q].state))
                first = false;
        if (!first || !(o = agent_out(d, n)))
            continue;
        pl_wbuf_init(&o->w, PL_MSG_KILL, 0, 3);
        pl_w_kuint(&o->w.pk, "id", t->id);
        pl_w_kuint(&o->w.pk, "attempt", t->attempt);
        pl_w_kdouble(&o->w.pk, "grace", KILL_GRACE);
        send_agent(d, n, o);
    }
}

/* 't' goes back to the head of the queue, its attempt over ('reason');
 * 'spare': not charged to its --retries. */
static void requeue(struct pl_daemon *d, struct pl_dtask *t,
                    const char *reason, bool spare)
{
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = reason };
    int old = t->state;

    if (spare)
        t->spared++;
    pl_sched_requeue(d->sched, t, true);
    t->state = old; /* for the counters */
    change(d, t, PL_ST_QUEUED, &c);
    d->want_sched = true;
}

/* Every rank of 't' has ended: end the task, or run it again when an
 * agent was lost under it and retries are left. */
static void task_ended(struct pl_daemon *d, struct pl_dtask *t,
                       int64_t maxrss_kb)
{
    struct pl_db_change c = {
        .exit_code = t->exit_code, .signal = t->signal,
        .maxrss_kb = maxrss_kb, .reason = t->reason[0] ? t->reason : NULL,
    };
    int st = t->fail ? t->fail : PL_ST_DONE;

    /* stopped by the drain, not by anyone's cancel: it runs again in the
     * next allocation (pilot up --resume), not charged to --retries */
    if (d->draining && !t->cancel && st == PL_ST_CANCELED) {
        requeue(d, t, "interrupted by the walltime drain", true);
        return;
    }
    if (t->cancel && st != PL_ST_DONE) {
        st = PL_ST_CANCELED;
        if (!t->reason[0])
            c.reason = "canceled";
    }
    if (t->lost && !t->cancel && t->attempt <= t->retries + t->spared) {
        requeue(d, t, c.reason, false);
        return;
    }
    if (st == PL_ST_DONE)
        c.exit_code = c.signal = 0;
    finish(d, t, st, &c);
}

/* Rank 'r' of 't' ended in 'st' (details in 'c'): give back its cores;
 * the first failure fails the task and stops its other ranks.  Returns
 * true when that ended the task (it may be freed). */
static bool rank_ended(struct pl_daemon *d, struct pl_dtask *t, uint32_t r,
                       int st, const struct pl_db_change *c)
{
    struct pl_rank *k = &t->rank[r];

    if (pl_state_final(k->state))
        return false;
    rank_event(d, t, r, st, c->time, c->reason);
    k->state = st;
    pl_sched_rank_release(t, r);
    t->ended++;
    if (st != PL_ST_DONE && !t->fail) {
        t->fail = st;
        t->exit_code = c->exit_code;
        t->signal = c->signal;
        if (t->ranks > 1)
            snprintf(t->reason, sizeof(t->reason), "rank %u: %s", r,
                     c->reason ? c->reason : pl_state_name(st));
        else
            snprintf(t->reason, sizeof(t->reason), "%s",
                     c->reason ? c->reason : "");
        send_kill(d, t); /* the rest of its ranks cannot go on alone */
    }
    if (t->ended < t->ranks)
        return false;
    task_ended(d, t, c->maxrss_kb);
    return true;
}

struct placed {
    struct pl_dtask **t;
    size_t n, cap;
};

static void place_cb(struct pl_dtask *t, void *arg)
{
    struct placed *p = arg;

    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        struct pl_dtask **nt = realloc(p->t, cap * sizeof(*nt));
        if (!nt)
            return; /* N.B. the task stays assigned; see below */
        p->t = nt;
        p->cap = cap;
    }
    p->t[p->n++] = t;
}

static const char *comm_name(int comm)
{
    return comm == PL_COMM_TORCH ? "torch" : comm == PL_COMM_MPI ? "mpi"
                                                                 : "none";
}

/* The run entry of rank 'r' of 't' (docs/protocol.md). */
static void pack_run_rank(struct pl_daemon *d, msgpack_packer *pk,
                          struct pl_dtask *t, uint32_t r)
{
    const struct pl_rank *k = &t->rank[r];
    char out[PL_PATH_MAX + 64], err[PL_PATH_MAX + 64];
    uint64_t cores[k->ncores + 1], gpus[k->ngpus + 1];
    bool multi = t->ranks > 1 || t->comm != PL_COMM_NONE;
    uint32_t nf = 7 + (t->env || t->array_id ? 1 : 0) + (t->cwd ? 1 : 0)
                  + (t->timeout > 0 ? 1 : 0) + (multi ? 7 : 0)
                  + (t->comm == PL_COMM_TORCH ? 2 : 0)
                  + (t->comm == PL_COMM_MPI ? 3 + !!t->gpus_per_rank : 0);

    pl_path_task_log(d->dir, t->id, false, false, out, sizeof(out));
    pl_path_task_log(d->dir, t->id, true, false, err, sizeof(err));
    for (uint32_t i = 0; i < k->ncores; i++)
        cores[i] = k->node->cpu[k->core_idx[i]];
    for (uint32_t i = 0; i < k->ngpus; i++)
        gpus[i] = k->gpu_idx[i];
    msgpack_pack_map(pk, nf);
    pl_w_kuint(pk, "id", t->id);
    pl_w_kuint(pk, "attempt", t->attempt);
    pl_w_kstrv(pk, "argv", t->argv);
    if (t->array_id) {
        /* an array element: its index and array, after the spec's env */
        char aidx[48], aid[48];
        uint32_t ne = 0;
        while (t->env && t->env[ne])
            ne++;
        snprintf(aidx, sizeof(aidx), "PILOT_ARRAY_INDEX=%llu",
                 (unsigned long long)t->array_index);
        snprintf(aid, sizeof(aid), "PILOT_ARRAY_ID=%llu",
                 (unsigned long long)t->array_id);
        pl_w_key(pk, "env");
        msgpack_pack_array(pk, ne + 2);
        for (uint32_t i = 0; i < ne; i++)
            pl_w_str(pk, t->env[i]);
        pl_w_str(pk, aidx);
        pl_w_str(pk, aid);
    }
    else if (t->env)
        pl_w_kstrv(pk, "env", t->env);
    if (t->cwd)
        pl_w_kstr(pk, "cwd", t->cwd);
    pl_w_kuintv(pk, "cores", cores, k->ncores);
    pl_w_kuintv(pk, "gpus", gpus, k->ngpus);
    pl_w_kstr(pk, "stdout", out);
    pl_w_kstr(pk, "stderr", err);
    if (t->timeout > 0)
        pl_w_kdouble(pk, "timeout", t->timeout);
    if (multi) {
        pl_w_kuint(pk, "rank", r);
        pl_w_kuint(pk, "size", t->ranks);
        pl_w_kuint(pk, "local_rank", k->local_rank);
        pl_w_kuint(pk, "local_size", k->local_size);
        pl_w_kuint(pk, "node_rank", k->node_rank);
        pl_w_key(pk, "nodelist");
        msgpack_pack_array(pk, t->nnodes);
        const struct pl_node *last = NULL;
        for (uint32_t q = 0; q < t->ranks; q++)
            if (t->rank[q].node != last) {
                last = t->rank[q].node;
                pl_w_str(pk, last->name);
            }
        pl_w_kstr(pk, "comm", comm_name(t->comm));
    }
    if (t->comm == PL_COMM_TORCH) {
        pl_w_kstr(pk, "master_addr", t->rank[0].node->name);
        pl_w_kuint(pk, "master_port", t->port);
    }
    if (t->comm == PL_COMM_MPI) {
        /* rank 0's agent launches them all, where they were placed */
        pl_w_kstr(pk, "launcher", t->mpirun ? "mpirun" : "srun");
        pl_w_key(pk, "hosts");
        msgpack_pack_array(pk, t->ranks);
        for (uint32_t q = 0; q < t->ranks; q++)
            pl_w_str(pk, t->rank[q].node->name);
        pl_w_key(pk, "rank_cores");
        msgpack_pack_array(pk, t->ranks);
        for (uint32_t q = 0; q < t->ranks; q++) {
            const struct pl_rank *kq = &t->rank[q];
            msgpack_pack_array(pk, kq->ncores);
            for (uint32_t i = 0; i < kq->ncores; i++)
                msgpack_pack_uint64(pk, kq->node->cpu[kq->core_idx[i]]);
        }
        if (t->gpus_per_rank) {
            /* by Slurm id: each rank finds them in its own step's list */
            pl_w_key(pk, "rank_gpus");
            msgpack_pack_array(pk, t->ranks);
            for (uint32_t q = 0; q < t->ranks; q++) {
                const struct pl_rank *kq = &t->rank[q];
                msgpack_pack_array(pk, kq->ngpus);
                for (uint32_t i = 0; i < kq->ngpus; i++)
                    pl_w_str(pk, kq->node->gpu[kq->gpu_idx[i]]);
            }
        }
    }
}

/* Place what fits and record it (in the open transaction); the RUNs
 * leave after the commit (send_runs()). */
static void schedule(struct pl_daemon *d)
{
    struct placed p = { 0 };

    d->want_sched = false;
    pl_sched_run(d->sched, place_cb, &p);
    if (p.n > d->capunsent - d->nunsent) {
        size_t cap = d->nunsent + p.n;
        struct unsent *u = realloc(d->unsent, cap * sizeof(*u));
        if (u) {
            d->unsent = u;
            d->capunsent = cap;
        }
    }
    for (size_t i = 0; i < p.n; i++) {
        struct pl_dtask *t = p.t[i];
        t->state = PL_ST_QUEUED; /* what the counters last saw */
        change(d, t, PL_ST_ASSIGNED, NULL);
        for (uint32_t r = 0; r < t->ranks; r++) {
            rank_event(d, t, r, PL_ST_ASSIGNED, 0, NULL);
            if (r < launched(t))
                t->rank[r].run_seq = RUN_UNSENT;
        }
        /* N.B. out of memory: the task stays assigned, as in place_cb */
        if (d->nunsent < d->capunsent)
            d->unsent[d->nunsent++] = (struct unsent){ t->id, t->attempt };
    }
    free(p.t);
}

/* The ranks of 't' whose RUN waits, on 'n': still assigned there, in
 * the attempt that was placed. */
static bool run_waits(const struct pl_dtask *t, uint32_t r,
                      const struct pl_node *n)
{
    const struct pl_rank *k = &t->rank[r];

    return k->node == n && k->state == PL_ST_ASSIGNED
           && k->run_seq == RUN_UNSENT;
}

/* The assignments of the tasks placed are stored: send their RUNs, one
 * per node, ranks in placement order.  A task that changed meanwhile
 * (while a failed commit was retried: its node lost, it requeued) is
 * skipped. */
static void send_runs(struct pl_daemon *d)
{
    size_t m = 0;

    /* the tasks still as they were placed */
    for (size_t i = 0; i < d->nunsent; i++) {
        struct pl_dtask *t = pl_sched_task_get(d->sched, d->unsent[i].id);
        if (t && t->rank && t->state == PL_ST_ASSIGNED
            && t->attempt == d->unsent[i].attempt)
            d->unsent[m++] = d->unsent[i];
    }
    for (size_t k = 0; m && k < pl_sched_nnodes(d->sched); k++) {
        struct pl_node *n = pl_sched_node_at(d->sched, k);
        uint32_t cnt = 0;
        struct out *o;
        for (size_t i = 0; i < m; i++) {
            struct pl_dtask *t = pl_sched_task_get(d->sched,
                                                   d->unsent[i].id);
            for (uint32_t r = 0; r < launched(t); r++)
                cnt += run_waits(t, r, n);
        }
        if (cnt == 0 || n->state != PL_NODE_UP || !(o = agent_out(d, n)))
            continue;
        /* numbered per node: a REGISTER says up to which RUN it knows */
        uint64_t seq = ++n->run_seq;
        pl_wbuf_init(&o->w, PL_MSG_RUN, seq, 1);
        pl_w_key(&o->w.pk, "tasks");
        msgpack_pack_array(&o->w.pk, cnt);
        for (size_t i = 0; i < m; i++) {
            struct pl_dtask *t = pl_sched_task_get(d->sched,
                                                   d->unsent[i].id);
            for (uint32_t r = 0; r < launched(t); r++)
                if (run_waits(t, r, n)) {
                    pack_run_rank(d, &o->w.pk, t, r);
                    t->rank[r].run_seq = seq;
                }
        }
        n->want = false; /* it pulls again if it still has room */
        send_agent(d, n, o);
        pl_log(LOG_DEBUG, "run %u ranks on %s", cnt, n->name);
    }
    d->nunsent = 0;
}

static void node_record(struct pl_daemon *d, struct pl_node *n,
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
    if (pl_db_node_set(d->db, n->name, cores, gpus, state, now(), &err) < 0)
        pl_log(LOG_ERR, "node %s: %s", n->name, err.text);
}

struct lost {
    struct pl_daemon *d;
    struct pl_node *n;
    const char *why;
};

/* A task's agent is gone: its ranks there have ended; the task runs
 * again once its other ranks are stopped, while it has retries left. */
static void lost_task_cb(struct pl_dtask *t, void *arg)
{
    struct lost *l = arg;
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = "node-lost" };

    /* an MPI job dies with its launcher on rank 0's node */
    bool all = t->comm == PL_COMM_MPI && t->rank[0].node == l->n;

    t->lost = true;
    for (uint32_t r = 0; r < t->ranks; r++) {
        if (!all && t->rank[r].node != l->n)
            continue;
        if (rank_ended(l->d, t, r, PL_ST_FAILED, &c))
            return; /* the task ended and may be gone */
    }
}

/* One agent started on one node, where the agents' step lost its own. */
struct node_launch {
    struct pl_daemon *d;
    struct pl_launch *launch;
    char node[64];
    int starts;
};

static void node_launch_exit_cb(struct pl_launch *l, int64_t status,
                                int signum, void *arg)
{
    struct node_launch *nl = arg;
    (void)l;

    pl_log(LOG_NOTICE, "agent step on %s ended (status %lld, signal %d)",
           nl->node, (long long)status, signum);
}

static int agent_argv(struct pl_daemon *d, const char *nodelist, int count,
                      const char **argv, char *bufs, size_t buflen);

/* The agent of 'n' is lost: start another there (Slurm pilots; at most
 * NODE_RESTARTS times per node).  If the old one was only cut off, it is
 * told to exit when it comes back. */
static void restart_node_agent(struct pl_daemon *d, struct pl_node *n)
{
    struct node_launch *nl = NULL;
    struct pl_error err = { .text = "agent's command too long" };
    const char *argv[48];
    char bufs[PL_PATH_MAX + 512], logpath[PL_PATH_MAX + 96];

    if (d->cfg.local || d->stopping)
        return;
    for (size_t i = 0; i < d->nnode_launch; i++)
        if (!strcmp(d->node_launch[i]->node, n->name))
            nl = d->node_launch[i];
    if (!nl) {
        struct node_launch **v = realloc(d->node_launch,
                                         (d->nnode_launch + 1) * sizeof(*v));
        if (!v || !(nl = calloc(1, sizeof(*nl)))) {
            if (v)
                d->node_launch = v;
            pl_log(LOG_ERR, "restart agent on %s: out of memory", n->name);
            return;
        }
        d->node_launch = v;
        d->node_launch[d->nnode_launch++] = nl;
        nl->d = d;
        snprintf(nl->node, sizeof(nl->node), "%s", n->name);
    }
    if (nl->launch && pl_launch_running(nl->launch))
        return;
    if (nl->starts >= NODE_RESTARTS) {
        pl_log(LOG_WARNING, "not starting another agent on %s: %d tried "
               "already", n->name, nl->starts);
        return;
    }
    pl_launch_free(nl->launch);
    nl->launch = NULL;
    nl->starts++;
    snprintf(logpath, sizeof(logpath), "%s/logs/srun-agent-%s.log", d->dir,
             n->name);
    if (agent_argv(d, n->name, 1, argv, bufs, sizeof(bufs)) < 0
        || !(nl->launch = pl_launch_new(d->loop, (char *const *)argv,
                                        logpath, node_launch_exit_cb, nl,
                                        &err))
        || pl_launch_start(nl->launch, &err) < 0) {
        pl_log(LOG_ERR, "restart agent on %s: %s", n->name, err.text);
        return;
    }
    pl_log(LOG_NOTICE, "started another agent on %s (%d of %d)", n->name,
           nl->starts, NODE_RESTARTS);
}

static void node_lost(struct pl_daemon *d, struct pl_node *n, const char *why)
{
    struct lost l = { d, n, why };

    pl_log(LOG_WARNING, "agent on %s lost: %s", n->name, why);
    n->state = PL_NODE_LOST;
    n->want = false;
    node_record(d, n, "lost");
    pl_sched_node_tasks(d->sched, n, lost_task_cb, &l);
    restart_node_agent(d, n);
}

/* Tasks queued before the agents registered could not be checked at
 * submit: once every expected agent is here, fail those no node fits. */
static void too_big_cb(struct pl_dtask *t, void *arg)
{
    struct pl_daemon *d = arg;
    char why[160], reason[200];
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = reason };

    if (t->state != PL_ST_QUEUED || pl_sched_fits(d->sched, t, why,
                                                  sizeof(why)))
        return;
    snprintf(reason, sizeof(reason), "too large for this pilot: %s", why);
    pl_sched_dequeue(d->sched, t);
    finish(d, t, PL_ST_FAILED, &c);
}

static void check_fit(struct pl_daemon *d)
{
    size_t up = 0;

    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++)
        if (pl_sched_node_at(d->sched, k)->state == PL_NODE_UP)
            up++;
    if ((int)up >= d->cfg.expected_agents)
        pl_sched_node_tasks(d->sched, NULL, too_big_cb, d);
}

/* WELCOME answers register 'seq': the agent then forgets the ends that
 * register carried, so it leaves only once they are committed. */
static void send_welcome(struct pl_daemon *d, struct pl_node *n, uint64_t seq)
{
    struct out *o = agent_out(d, n);

    if (!o)
        return;
    o->needs_commit = true;
    pl_wbuf_init(&o->w, PL_MSG_WELCOME, seq, 3);
    pl_w_kstr(&o->w.pk, "node", n->name);
    pl_w_kstr(&o->w.pk, "instance", d->instance);
    pl_w_kdouble(&o->w.pk, "heartbeat", d->cfg.heartbeat);
    send_agent(d, n, o);
}

static void agent_event(struct pl_daemon *d, struct pl_node *n,
                        const msgpack_object *ev);

/* What an agent says runs on it, from its REGISTER. */
struct held {
    uint64_t id, attempt, rank;
};

static bool held_has(const struct held *h, size_t n, uint64_t id,
                     uint64_t attempt, uint64_t rank)
{
    for (size_t i = 0; i < n; i++)
        if (h[i].id == id && h[i].attempt == attempt && h[i].rank == rank)
            return true;
    return false;
}

/* Decode the 'running' or 'ended' list of a REGISTER into a new array
 * (*out, the caller frees it).  Returns the count, or -1 (errp). */
static long held_decode(const msgpack_object *body, const char *key,
                        struct held **out, struct pl_error *errp)
{
    const msgpack_object *arr = NULL;
    struct held *h;

    *out = NULL;
    if (pl_mp_array(body, key, false, 1 << 20, &arr, errp) < 0)
        return -1;
    if (!arr || arr->via.array.size == 0)
        return 0;
    if (!(h = calloc(arr->via.array.size, sizeof(*h)))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_MAP
            || pl_mp_uint(e, "id", true, UINT64_MAX, &h[i].id, errp) < 0
            || pl_mp_uint(e, "attempt", true, UINT32_MAX, &h[i].attempt,
                          errp) < 0
            || pl_mp_uint(e, "rank", false, UINT32_MAX, &h[i].rank, errp)
                   < 0) {
            if (e->type != MSGPACK_OBJECT_MAP)
                pl_errprintf(errp, "'%s': entries must be maps", key);
            free(h);
            return -1;
        }
    }
    *out = h;
    return (long)arr->via.array.size;
}

struct adopt {
    struct pl_daemon *d;
    struct pl_node *n;
    const struct held *run, *ended;
    size_t nrun, nended;
};

/* Rank 'r' of 't' is where the database says, on the agent of a.n that
 * just registered: take it back as it reports it. */
static bool adopt_rank(struct adopt *a, struct pl_dtask *t, uint32_t r)
{
    struct pl_rank *k = &t->rank[r];

    free(k->orphan);
    k->orphan = NULL;
    t->orphans--;
    bool runs = held_has(a->run, a->nrun, t->id, t->attempt, r);
    bool ended = held_has(a->ended, a->nended, t->id, t->attempt, r);
    /* an MPI job's ranks past 0 live and die with rank 0's launcher */
    bool follows = t->comm == PL_COMM_MPI && r > 0;
    k->node = a->n;
    if (!runs && !ended && !follows) {
        /* never got there (its RUN left with the old pilotd), or its
         * agent is a new one: it runs again, not charged to --retries */
        struct pl_db_change c = { .exit_code = -1, .signal = -1,
                                  .maxrss_kb = -1,
                                  .reason = "not on its agent after pilotd "
                                            "restarted" };
        t->lost = true;
        t->spared++;
        return rank_ended(a->d, t, r, PL_ST_FAILED, &c);
    }
    if (runs && k->state == PL_ST_ASSIGNED) {
        k->state = PL_ST_RUNNING;
        if (++t->running == t->ranks && t->state == PL_ST_ASSIGNED)
            change(a->d, t, PL_ST_RUNNING, NULL);
    }
    return false;
}

static void adopt_cb(struct pl_dtask *t, void *arg)
{
    struct adopt *a = arg;
    size_t len = strlen(a->n->name);

    for (uint32_t r = 0; t->rank && r < t->ranks && t->orphans; r++) {
        struct pl_rank *k = &t->rank[r];
        if (!k->orphan || strncmp(k->orphan, a->n->name, len)
            || k->orphan[len] != '\t')
            continue;
        /* its cores and GPUs first: they are held until it ends */
        char *cpus = k->orphan + len + 1;
        char *tab = strchr(cpus, '\t');
        char *gpus = tab ? tab + 1 : NULL;
        if (tab)
            *tab = '\0';
        free(k->core_idx);
        free(k->gpu_idx);
        k->core_idx = k->gpu_idx = NULL;
        k->ncores = k->ngpus = 0;
        if (pl_node_claim(a->n, t->id, cpus, gpus && *gpus ? gpus : NULL,
                          &k->core_idx, &k->ncores, &k->gpu_idx, &k->ngpus)
            < 0)
            pl_log(LOG_ERR, "task %llu rank %u: out of memory",
                   (unsigned long long)t->id, r);
        if (adopt_rank(a, t, r))
            return; /* the task ended and may be gone */
    }
}

/* Every orphan task visits 'cb' (which may remove it). */
static void each_orphan(struct pl_daemon *d,
                        void (*cb)(struct pl_dtask *t, void *arg), void *arg)
{
    for (uint64_t id = 1; id <= pl_sched_max_id(d->sched); id++) {
        struct pl_dtask *t = pl_sched_task_get(d->sched, id);
        if (t && t->orphans)
            cb(t, arg);
    }
}

static size_t count_orphans(struct pl_daemon *d)
{
    size_t n = 0;

    for (uint64_t id = 1; id <= pl_sched_max_id(d->sched); id++) {
        struct pl_dtask *t = pl_sched_task_get(d->sched, id);
        n += t && t->orphans;
    }
    return n;
}

/* A registering agent's tasks that pilotd does not know there: stop
 * them (pilotd ran them elsewhere, or gave them up). */
static void kill_strays(struct pl_daemon *d, struct pl_node *n,
                        const struct held *run, size_t nrun)
{
    for (size_t i = 0; i < nrun; i++) {
        struct pl_dtask *t = pl_sched_task_get(d->sched, run[i].id);
        struct out *o;
        if (t && t->rank && t->attempt == run[i].attempt
            && run[i].rank < t->ranks && t->rank[run[i].rank].node == n
            && !pl_state_final(t->rank[run[i].rank].state))
            continue;
        pl_log(LOG_WARNING, "agent %s runs task %llu attempt %llu rank %llu, "
               "which is not its: stopping it", n->name,
               (unsigned long long)run[i].id,
               (unsigned long long)run[i].attempt,
               (unsigned long long)run[i].rank);
        if (!(o = agent_out(d, n)))
            continue;
        pl_wbuf_init(&o->w, PL_MSG_KILL, 0, 4);
        pl_w_kuint(&o->w.pk, "id", run[i].id);
        pl_w_kuint(&o->w.pk, "attempt", run[i].attempt);
        pl_w_kuint(&o->w.pk, "rank", run[i].rank);
        pl_w_kdouble(&o->w.pk, "grace", KILL_GRACE);
        send_agent(d, n, o);
    }
}

/* The ranks on 'n' its agent no longer reports (a restarted agent, or
 * ones whose RUN it never got): they ended, the task runs again. */
struct gone {
    struct pl_daemon *d;
    struct pl_node *n;
    const struct held *run, *ended;
    size_t nrun, nended;
    uint64_t last_run;       /* the last RUN the agent had read */
};

static void gone_cb(struct pl_dtask *t, void *arg)
{
    struct gone *g = arg;
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = "node-lost" };

    for (uint32_t r = 0; t->rank && r < launched(t); r++) {
        struct pl_rank *k = &t->rank[r];
        /* N.B. a RUN the agent had not read when it registered is on
         * its way, not lost */
        if (k->node != g->n || pl_state_final(k->state)
            || k->run_seq > g->last_run
            || held_has(g->run, g->nrun, t->id, t->attempt, r)
            || held_has(g->ended, g->nended, t->id, t->attempt, r))
            continue;
        t->lost = true;
        bool all = t->comm == PL_COMM_MPI && r == 0;
        for (uint32_t q = all ? 0 : r; q < (all ? t->ranks : r + 1); q++)
            if (rank_ended(g->d, t, q, PL_ST_FAILED, &c))
                return; /* the task ended and may be gone */
    }
}

static void agent_register(struct pl_daemon *d, const void *rid, size_t ridlen,
                           const struct pl_msg *m)
{
    struct pl_error err;
    struct pl_agent_reg reg;
    struct pl_node *n;
    struct held *run = NULL, *ended = NULL;
    long nrun = 0, nended = 0;
    const msgpack_object *evs = NULL;
    uint64_t last_run = 0;

    if (pl_agent_reg_decode(m->body, &reg, &err) < 0) {
        bad_log(d, LOG_WARNING, "bad register from an agent: %s", err.text);
        return;
    }
    if ((nrun = held_decode(m->body, "running", &run, &err)) < 0
        || (nended = held_decode(m->body, "ended", &ended, &err)) < 0
        || pl_mp_array(m->body, "ended", false, 1 << 20, &evs, &err) < 0
        || pl_mp_uint(m->body, "last_run", false, UINT64_MAX, &last_run,
                      &err) < 0) {
        bad_log(d, LOG_WARNING, "bad register from an agent: %s", err.text);
        goto done;
    }
    if (ridlen > sizeof(n->rid)) {
        bad_log(d, LOG_WARNING, "bad register from an agent: routing id of "
                "%zu bytes", ridlen);
        goto done;
    }
    if (d->stopping)
        goto done;
    if ((n = pl_sched_node_find(d->sched, reg.node)) && n->state == PL_NODE_UP
        && (n->ridlen != ridlen || memcmp(n->rid, rid, ridlen))
        && (long)reg.pid != n->pid && now() - n->last_seen < d->cfg.lost_after) {
        /* one agent per node: the one that holds it lives (an agent of
         * a healed network cut, after a replacement started) */
        struct out *o = out_new(d->asock, rid, ridlen);
        pl_log(LOG_WARNING, "a second agent on %s (pid %llu) while pid %ld "
               "serves it: telling it to exit", reg.node,
               (unsigned long long)reg.pid, n->pid);
        if (o) {
            pl_wbuf_init(&o->w, PL_MSG_EXIT, 0, 0);
            out_push(d, o);
        }
        goto done;
    }
    if (n) {
        /* it reconnected, or restarted: what it no longer runs ended */
        /* a new agent process knew none of our RUNs */
        struct gone g = { d, n, run, ended, (size_t)nrun, (size_t)nended,
                          (long)reg.pid == n->pid ? last_run : UINT64_MAX };
        pl_sched_node_tasks(d->sched, n, gone_cb, &g);
        if (n->ncores != reg.ncpu || n->ngpus != pl_strv_len(reg.gpus)) {
            pl_log(LOG_WARNING, "agent on %s came back with other resources "
                   "(%u cores); keeping %u", reg.node, reg.ncpu, n->ncores);
        }
        pl_log(LOG_NOTICE, "agent on %s rejoined (pid %llu, %ld running, "
               "%ld ended meanwhile)", reg.node, (unsigned long long)reg.pid, nrun,
               nended);
    }
    else {
        if (!(n = pl_node_new(reg.node, reg.cpu, reg.ncpu, reg.gpus))
            || pl_sched_node_add(d->sched, n) < 0) {
            pl_log_error("node %s", reg.node);
            pl_node_free(n);
            goto done;
        }
        n->joined = now();
        pl_log(LOG_NOTICE, "agent on %s joined: %u cores, %u gpus (pid %llu, "
               "%ld running, %ld ended)", reg.node, reg.ncpu, n->ngpus,
               (unsigned long long)reg.pid, nrun, nended);
    }
    memcpy(n->rid, rid, ridlen);
    n->ridlen = ridlen;
    n->state = PL_NODE_UP;
    n->pid = (long)reg.pid;
    n->want = false;
    n->last_seen = now();
    node_record(d, n, "up");
    /* a restarted pilotd: take back the ranks the database put here */
    struct adopt a = { d, n, run, ended, (size_t)nrun, (size_t)nended };
    each_orphan(d, adopt_cb, &a);
    kill_strays(d, n, run, (size_t)nrun);
    /* what ended while no pilotd could store it */
    for (uint32_t i = 0; evs && i < evs->via.array.size; i++)
        agent_event(d, n, &evs->via.array.ptr[i]);
    send_welcome(d, n, m->seq);
    check_fit(d);
done:
    free(run);
    free(ended);
    pl_agent_reg_clear(&reg);
}

static void agent_event(struct pl_daemon *d, struct pl_node *n,
                        const msgpack_object *ev)
{
    struct pl_error err;
    struct pl_agent_event e;
    struct pl_dtask *t;
    int st;
    char why[64];

    if (pl_agent_event_decode(ev, &e, &err) < 0) {
        bad_log(d, LOG_WARNING, "agent %s: bad event: %s", n->name,
                err.text);
        return;
    }
    uint64_t id = e.id, attempt = e.attempt, rank = e.rank;
    const char *state = e.state;
    double t_ev = e.time;
    st = pl_state_parse(state);
    t = pl_sched_task_get(d->sched, id);
    if (!t || !t->rank || t->attempt != attempt || rank >= t->ranks
        || t->rank[rank].node != n) {
        bad_log(d, LOG_WARNING, "agent %s: event '%s' for task %llu rank %llu "
                "attempt %llu that is not running there (ignored)", n->name,
                state, (unsigned long long)id, (unsigned long long)rank,
                (unsigned long long)attempt);
        goto done;
    }
    if (!isfinite(t_ev) || t_ev <= 0)
        t_ev = now();
    struct pl_db_change c = {
        .time = t_ev,
        .exit_code = e.exit_code >= INT32_MIN && e.exit_code <= INT32_MAX
                         ? (int)e.exit_code : -1,
        .signal = e.signal >= 0 && e.signal < 256 ? (int)e.signal : -1,
        .maxrss_kb = e.has_rss ? (int64_t)e.maxrss_kb : -1,
        .reason = e.error,
    };
    /* an MPI launcher's events stand for all the job's ranks */
    uint32_t r0 = (uint32_t)rank, r1 = t->comm == PL_COMM_MPI ? t->ranks
                                                             : r0 + 1;
    switch (st) {
    case PL_ST_RUNNING:
        for (uint32_t r = r0; r < r1; r++) {
            struct pl_rank *k = &t->rank[r];
            if (k->state != PL_ST_ASSIGNED)
                continue;
            k->state = PL_ST_RUNNING;
            rank_event(d, t, r, PL_ST_RUNNING, t_ev, NULL);
            /* the task runs once all its ranks do */
            if (++t->running == t->ranks && t->state == PL_ST_ASSIGNED)
                change(d, t, PL_ST_RUNNING, &c);
        }
        break;
    case PL_ST_DONE:
    case PL_ST_FAILED:
    case PL_ST_CANCELED:
    case PL_ST_TIMEOUT:
        if (st == PL_ST_CANCELED && !c.reason)
            c.reason = "canceled";
        if (st == PL_ST_TIMEOUT && !c.reason)
            c.reason = "timeout";
        if (st == PL_ST_FAILED && !c.reason) {
            if (c.signal > 0)
                snprintf(why, sizeof(why), "killed by signal %d", c.signal);
            else
                snprintf(why, sizeof(why), "exit code %d", c.exit_code);
            c.reason = why;
        }
        for (uint32_t r = r0; r < r1; r++)
            if (rank_ended(d, t, r, st, &c))
                break; /* the task ended and may be gone */
        break;
    default:
        bad_log(d, LOG_WARNING, "agent %s: event with bad state '%s'", n->name,
                state);
        break;
    }
done:
    pl_agent_event_clear(&e);
}

static void agent_events(struct pl_daemon *d, struct pl_node *n,
                         const struct pl_msg *m)
{
    const msgpack_object *arr;
    struct pl_error err;

    if (pl_mp_array(m->body, "events", true, 1000000, &arr, &err) < 0) {
        bad_log(d, LOG_WARNING, "agent %s: bad events: %s", n->name,
                err.text);
        return;
    }
    for (uint32_t i = 0; i < arr->via.array.size; i++)
        agent_event(d, n, &arr->via.array.ptr[i]);
    /* once committed, the agent may forget these ends */
    struct out *o = agent_out(d, n);
    if (o) {
        o->needs_commit = true;
        pl_wbuf_init(&o->w, PL_MSG_ACK, 0, 1);
        pl_w_kuint(&o->w.pk, "seq", m->seq);
        send_agent(d, n, o);
    }
}

static void agent_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct pl_daemon *d = arg;
    uint64_t t0 = uv_hrtime();
    (void)zw;
    (void)revents;

    for (int i = 0; !batch_over(t0, i); i++) {
        zmq_msg_t rid, body;
        struct pl_msg m;
        struct pl_error err;
        struct pl_node *n;

        zmq_msg_init(&rid);
        zmq_msg_init(&body);
        if (pl_zsock_recv(d->asock, &rid, &body) < 0) {
            int e = errno;
            zmq_msg_close(&rid);
            zmq_msg_close(&body);
            if (e == EAGAIN)
                break;
            bad_log(d, LOG_WARNING, "agent socket: %s", zmq_strerror(e));
            continue;
        }
        if (pl_msg_decode(zmq_msg_data(&body), zmq_msg_size(&body), &m,
                          &err) < 0) {
            bad_log(d, LOG_WARNING, "bad message on the agent socket: %s",
                    err.text);
            goto next;
        }
        n = pl_sched_node_by_rid(d->sched, zmq_msg_data(&rid),
                                 zmq_msg_size(&rid));
        if (m.type == PL_MSG_REGISTER)
            agent_register(d, zmq_msg_data(&rid), zmq_msg_size(&rid), &m);
        else if (!n) {
            /* an agent of the pilotd before us, or one we forgot: it
             * registers again, with what it runs */
            struct out *o = out_new(d->asock, zmq_msg_data(&rid),
                                    zmq_msg_size(&rid));
            bad_log(d, LOG_INFO, "%s from an agent that did not register: "
                    "asking it to", pl_msg_type_name(m.type));
            if (o) {
                pl_wbuf_init(&o->w, PL_MSG_REREGISTER, 0, 0);
                out_push(d, o);
            }
        }
        else if (n->state != PL_NODE_UP) {
            /* a lost agent is back (a network cut healed): its tasks
             * were given up; it registers again, and what it still runs
             * of them is stopped */
            struct out *o = agent_out(d, n);
            bad_log(d, LOG_NOTICE, "agent on %s is back: asking it to "
                    "register", n->name);
            if (o) {
                pl_wbuf_init(&o->w, PL_MSG_REREGISTER, 0, 0);
                send_agent(d, n, o);
            }
        }
        else {
            n->last_seen = now();
            switch (m.type) {
            case PL_MSG_PULL:
                n->want = true;
                d->want_sched = true;
                break;
            case PL_MSG_EVENTS:
                agent_events(d, n, &m);
                break;
            case PL_MSG_HEARTBEAT:
                break;
            default:
                bad_log(d, LOG_WARNING, "agent %s sent unexpected %s", n->name,
                        pl_msg_type_name(m.type));
                break;
            }
        }
        pl_msg_release(&m);
    next:
        zmq_msg_close(&rid);
        zmq_msg_close(&body);
    }
    flush(d);
}

/* ------------------------------------------------------------ clients */

struct req {
    const void *rid;
    size_t ridlen;
    uint64_t seq;
};

/* The task a spec describes, as stored: its shape and strings
 * (borrowed from 's'); argv and env JSON are left for the caller. */
static void spec_db(const struct pl_spec *s, struct pl_db_spec *ds)
{
    *ds = (struct pl_db_spec){
        .name = s->name, .cwd = s->cwd, .ranks = (uint32_t)s->ranks,
        .cores_per_rank = (uint32_t)s->cpr, .gpus_per_rank = (uint32_t)s->gpr,
        .retries = (uint32_t)s->retries, .timeout = s->timeout,
        .nodes = (uint32_t)s->nodes, .ranks_per_node = (uint32_t)s->rpn,
        .exclusive = s->exclusive, .comm = s->comm, .launcher = s->launcher,
        .priority = (int32_t)s->priority,
    };
}

/* The scheduling shape of a stored spec, into 't': one place for a new
 * submission, its fit check, and a queue rebuilt from the database. */
static void shape(const struct pl_db_spec *ds, struct pl_dtask *t)
{
    t->ranks = ds->ranks ? ds->ranks : 1;
    t->cores_per_rank = ds->cores_per_rank ? ds->cores_per_rank : 1;
    t->gpus_per_rank = ds->gpus_per_rank;
    t->nodes_req = ds->nodes;
    t->ranks_per_node = ds->ranks_per_node;
    t->exclusive = ds->exclusive;
    t->comm = !ds->comm || !strcmp(ds->comm, "none") ? PL_COMM_NONE
              : !strcmp(ds->comm, "torch")           ? PL_COMM_TORCH
                                                     : PL_COMM_MPI;
    t->mpirun = ds->launcher && !strcmp(ds->launcher, "mpirun");
    t->retries = ds->retries;
    t->timeout = ds->timeout;
}

/* Decode spec 'o' and check that some node of the pilot can hold it. */
static int spec_parse(struct pl_daemon *d, const msgpack_object *o,
                      struct pl_spec *s, struct pl_error *errp)
{
    if (pl_spec_decode(o, s, errp) < 0)
        return -1;
    if (pl_sched_nnodes(d->sched) > 0) {
        struct pl_dtask t = { 0 };
        struct pl_db_spec ds;
        char why[160];
        spec_db(s, &ds);
        shape(&ds, &t);
        if (!pl_sched_fits(d->sched, &t, why, sizeof(why))) {
            pl_spec_clear(s);
            errno = EINVAL;
            return pl_errprintf(errp, "%s", why);
        }
    }
    return 0;
}

/* While the state directory cannot be written, a request that would
 * change state is refused with one line and no acknowledgement, after
 * one more try (the space may be back).  Returns true if it was. */
static bool store_refused(struct pl_daemon *d, const struct req *r)
{
    char why[PL_PATH_MAX + 64], text[PL_PATH_MAX + 160];
    int errnum;

    store_retry(d, STORE_RETRY_REQ);
    if (!(errnum = pl_db_failed(d->db, NULL)))
        return false;
    store_why(d, errnum, why, sizeof(why));
    snprintf(text, sizeof(text), "%s: pilotd stores nothing new until it "
             "can write there again", why);
    reply_err(d, r->rid, r->ridlen, r->seq, errnum, text);
    return true;
}

/* A write of a request failed (errno) with the state directory: say so
 * in the words of store_refused(). */
static void store_text(const struct pl_daemon *d, struct pl_error *errp)
{
    int saved = errno, errnum = pl_db_failed(d->db, NULL);
    char why[PL_PATH_MAX + 64];

    if (!errnum && (saved == ENOSPC || saved == EDQUOT || saved == EROFS))
        errnum = saved; /* this write only: SQLite kept the transaction */
    if (!errnum)
        return;
    store_why(d, errnum, why, sizeof(why));
    pl_errprintf(errp, "not stored: %s", why);
    errno = saved;
}

/* The dependencies of a spec, resolved at submit. */
struct deps {
    uint64_t *live;              /* tasks that have not ended: wait */
    bool *any;                   /* ... for any end, not only done */
    uint32_t nlive, cap;
    char *json;                  /* what is stored: [[id, any]...], or NULL */
    char why[96];                /* a dependency that failed: fail too */
};

static void deps_clear(struct deps *dp)
{
    free(dp->live);
    free(dp->any);
    free(dp->json);
    memset(dp, 0, sizeof(*dp));
}

/* 't' waits for the live tasks of 'dp': it keeps their ids, each of them
 * lists 't' among its waiters.  0, or -1 (ENOMEM). */
static int deps_wait(struct pl_daemon *d, struct pl_dtask *t,
                     const struct deps *dp)
{
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

/* One task 'id' in state 'st' that a spec waits for ('any' end). */
static int dep_add(struct pl_daemon *d, struct deps *dp, uint64_t id, int st,
                   bool any)
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
    struct deps *dp;
    bool any;
};

static int member_cb(uint64_t id, int state, void *arg)
{
    struct member_arg *a = arg;

    return dep_add(a->d, a->dp, id, state, a->any);
}

/* Resolve the 'after' of 's': ids and names (the latest task of that
 * name, this request's earlier ones included) to the tasks still live,
 * and the first that failed; an array's id stands for all its tasks.
 * 0, or -1 with errp (EINVAL: no such task). */
static int deps_resolve(struct pl_daemon *d, const struct pl_spec *s,
                        struct deps *dp, struct pl_error *errp)
{
    size_t len = 0, cap = (size_t)s->nafter * 30 + 3;

    memset(dp, 0, sizeof(*dp));
    if (!s->nafter)
        return 0;
    if (!(dp->json = malloc(cap))) {
        deps_clear(dp);
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    dp->json[len++] = '[';
    for (uint32_t i = 0; i < s->nafter; i++) {
        const struct pl_dep *e = &s->after[i];
        uint64_t id = e->id;
        int st;
        if (e->name) {
            if ((id = pl_db_task_by_name(d->db, e->name, errp)) == UINT64_MAX)
                goto error;
            if (id == 0) {
                errno = EINVAL;
                pl_errprintf(errp, "after: no task is named '%.64s'",
                             e->name);
                goto error;
            }
        }
        if (e->elem) {
            /* ID.N: that element alone (element 0's id is the array's) */
            uint64_t pair[2] = { id, e->index }, *one = NULL;
            size_t n1;
            if (pl_query_resolve(pl_db_handle(d->db), NULL, 0, pair, 1, true,
                                 &one, &n1, errp) < 0) {
                errno = EINVAL;
                goto error;
            }
            id = one[0];
            free(one);
        }
        struct member_arg ma = { d, dp, e->any };
        long nm = e->elem ? 0 : pl_db_array_members(d->db, id, member_cb,
                                                    &ma, errp);
        if (nm < 0)
            goto error;
        if (nm == 0) {
            if ((st = pl_db_task_state(d->db, id, errp)) <= 0) {
                if (st == 0) {
                    errno = EINVAL;
                    pl_errprintf(errp, "after: no task %llu",
                                 (unsigned long long)id);
                }
                goto error;
            }
            if (dep_add(d, dp, id, st, e->any) < 0) {
                errno = ENOMEM;
                pl_errprintf(errp, "out of memory");
                goto error;
            }
        }
        /* [id, any] or, for one element, [id, any, 1] */
        len += (size_t)snprintf(dp->json + len, cap - len, "%s[%llu,%d%s]",
                                i ? "," : "", (unsigned long long)id,
                                e->any ? 1 : 0, e->elem ? ",1" : "");
    }
    dp->json[len++] = ']';
    dp->json[len] = '\0';
    return 0;
error:
    deps_clear(dp);
    return -1;
}

/* 's' with every "{}" replaced by 'idx'; NULL stays NULL (errno 0). */
static char *subst(const char *s, uint64_t idx)
{
    char num[24], *out, *o;
    size_t n = 0;

    errno = 0;
    if (!s)
        return NULL;
    int nl = snprintf(num, sizeof(num), "%llu", (unsigned long long)idx);
    for (const char *p = s; (p = strstr(p, "{}")); p += 2)
        n++;
    if (!(out = malloc(strlen(s) + n * (size_t)nl + 1)))
        return NULL;
    for (o = out; *s;) {
        if (s[0] == '{' && s[1] == '}') {
            memcpy(o, num, (size_t)nl);
            o += nl;
            s += 2;
        }
        else
            *o++ = *s++;
    }
    *o = '\0';
    return out;
}

static char **subst_strv(char *const *v, uint64_t idx)
{
    size_t n = 0;
    char **out;

    while (v[n])
        n++;
    if (!(out = calloc(n + 1, sizeof(*out))))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!(out[i] = subst(v[i], idx))) {
            pl_strv_free(out);
            return NULL;
        }
    }
    return out;
}

/* Store and queue element 'k' of spec 's' (its only one if not an
 * array); '*first' is the array's id once element 0 is in.  The task,
 * or NULL with errp set. */
static struct pl_dtask *submit_one(struct pl_daemon *d, struct pl_spec *s,
                                   uint64_t k, const struct deps *dp,
                                   double t_now, uint64_t *first,
                                   struct out *o, struct pl_error *errp)
{
    uint64_t idx = s->retry ? s->index[k] : s->astart + k * s->astep;
    bool last = k + 1 == pl_spec_count(s);
    char **argv = NULL, **env = NULL, *cwd = NULL, *name = NULL;
    char *argv_json = NULL, *env_json = NULL, *tags_json = NULL;
    struct pl_dtask *t = NULL;
    struct pl_db_spec ds;
    uint64_t id;
    int state = dp->nlive || dp->why[0] ? PL_ST_WAITING : PL_ST_QUEUED;

    /* the last element takes the spec's strings, the others copies */
    if (s->array) {
        if (!(argv = subst_strv(s->argv, idx))
            || (s->name && !(name = subst(s->name, idx))))
            goto nomem;
    }
    else {
        argv = s->argv;
        s->argv = NULL;
    }
    if (last) {
        env = s->env;
        cwd = s->cwd;
        s->env = NULL;
        s->cwd = NULL;
    }
    else if ((s->env && !(env = pl_strv_dup(s->env)))
             || (s->cwd && !(cwd = strdup(s->cwd))))
        goto nomem;
    if (!(argv_json = json_strv(argv)) || (env && !(env_json = json_strv(env)))
        || (!(tags_json = json_tags(s->tags)) && errno))
        goto nomem;
    spec_db(s, &ds);
    ds.tags_json = tags_json;
    if (name)
        ds.name = name;
    ds.argv_json = argv_json;
    ds.env_json = env_json;
    ds.after_json = dp->json;
    ds.array_id = s->array && k > 0 ? *first : 0;
    ds.array_index = idx;
    if (pl_db_task_insert(d->db, &ds, state, t_now, &id, errp) < 0
        || (s->array && k == 0
            && pl_db_task_array(d->db, id, idx, errp) < 0))
        goto error;
    if (s->array && k == 0)
        *first = id;
    if (!(t = pl_sched_task_add(d->sched, id, state, ds.priority, &argv, &env,
                                &cwd)))
        goto nomem;
    o->undo[o->nundo++] = id; /* from here the request's undo takes it */
    shape(&ds, t);
    t->serial = ++d->serial;
    t->array_id = s->array ? *first : 0;
    t->array_index = s->array ? idx : 0;
    d->count[state]++;
    d->total++;
    if (dp->nlive && !dp->why[0] && deps_wait(d, t, dp) < 0)
        goto nomem;
    goto done;
nomem:
    errno = ENOMEM;
    pl_errprintf(errp, "out of memory");
error:
    t = NULL;
done:
    pl_strv_free(argv);
    pl_strv_free(env);
    free(cwd);
    free(name);
    free(argv_json);
    free(env_json);
    free(tags_json);
    return t;
}

/* retry_failed: the indexes of array s->retry that failed (within the
 * spec's range, when it gives one) become the spec's.  The array must
 * have ended.  0, or -1 with errp set. */
static int retry_resolve(struct pl_daemon *d, struct pl_spec *s,
                         struct pl_error *errp)
{
    uint64_t *idx = NULL, n = 0, live = 0, k = 0;
    long count = pl_db_array_failed(d->db, s->retry, &idx, &n, &live, errp);
    unsigned long long id = (unsigned long long)s->retry;
    char range[96] = "";

    if (count < 0)
        return -1;
    if (s->array)
        snprintf(range, sizeof(range), " in %llu-%llu:%llu",
                 (unsigned long long)s->astart, (unsigned long long)s->aend,
                 (unsigned long long)s->astep);
    for (uint64_t i = 0; i < n; i++)
        if (!s->array || (idx[i] >= s->astart && idx[i] <= s->aend
                          && (idx[i] - s->astart) % s->astep == 0))
            idx[k++] = idx[i];
    if (count == 0) {
        errno = ENOENT;
        pl_errprintf(errp, "retry_failed: %llu is not an array's id", id);
    }
    else if (live > 0) {
        errno = EBUSY;
        pl_errprintf(errp, "retry_failed: array %llu has %llu tasks that "
                     "have not ended; wait for them first", id,
                     (unsigned long long)live);
    }
    else if (k == 0) {
        errno = ENOENT;
        pl_errprintf(errp, "retry_failed: no task of array %llu failed%s",
                     id, range);
    }
    else {
        s->index = idx;
        s->nindex = k;
        s->array = true;
        return 0;
    }
    free(idx);
    return -1;
}

/* Say which spec of a request of 'n' an error is about (1-based, as the
 * CLI's --file maps it back to a line). */
static void name_spec(struct pl_error *err, uint32_t i, uint32_t n)
{
    int saved = errno;
    struct pl_error e2;

    if (n > 1) {
        pl_errprintf(&e2, "task %u: %s", i + 1, err->text);
        *err = e2;
    }
    errno = saved;
}

static void h_submit(struct pl_daemon *d, const struct req *r,
                     const struct pl_msg *m)
{
    const msgpack_object *arr;
    struct pl_error err;
    struct pl_spec *specs = NULL;
    uint32_t n = 0, i;
    uint64_t total = 0;
    struct out *o = NULL;
    double t_now = now();

    if (d->stopping) {
        reply_err(d, r->rid, r->ridlen, r->seq, ESHUTDOWN,
                  "the pilot is shutting down");
        return;
    }
    if (store_refused(d, r))
        return;
    if (pl_mp_array(m->body, "tasks", true, MAX_SUBMIT, &arr, &err) < 0)
        goto bad;
    n = arr->via.array.size;
    if (n == 0) {
        errno = EINVAL;
        pl_errprintf(&err, "no tasks in the request");
        goto bad;
    }
    if (!(specs = calloc(n, sizeof(*specs))))
        goto nomem;
    /* check every spec before storing any: bad input changes nothing */
    for (i = 0; i < n; i++) {
        if (spec_parse(d, &arr->via.array.ptr[i], &specs[i], &err) < 0
            || (specs[i].retry && retry_resolve(d, &specs[i], &err) < 0)) {
            name_spec(&err, i, n);
            goto bad;
        }
        total += pl_spec_count(&specs[i]);
    }
    if (total > PL_MAX_ARRAY) {
        errno = E2BIG;
        pl_errprintf(&err, "%llu tasks in one request; at most %d",
                     (unsigned long long)total, PL_MAX_ARRAY);
        goto bad;
    }
    if (!(o = out_new(d->csock, r->rid, r->ridlen))
        || !(o->undo = calloc(total, sizeof(*o->undo))))
        goto nomem;
    o->seq = r->seq;
    if (pl_db_savepoint(d->db, &err) < 0) {
        store_text(d, &err);
        goto bad;
    }
    for (i = 0; i < n; i++) {
        struct pl_spec *s = &specs[i];
        struct deps dp;
        uint64_t first = 0, cnt = pl_spec_count(s);
        int rc = deps_resolve(d, s, &dp, &err);
        for (uint64_t k = 0; rc == 0 && k < cnt; k++) {
            struct pl_dtask *t = submit_one(d, s, k, &dp, t_now, &first, o,
                                            &err);
            if (!t)
                rc = -1;
            else if (dp.why[0]) {
                /* a dependency failed already: so does this task */
                struct pl_db_change c = { .exit_code = -1, .signal = -1,
                                          .maxrss_kb = -1, .reason = dp.why };
                finish(d, t, PL_ST_FAILED, &c);
            }
        }
        deps_clear(&dp);
        if (rc < 0) {
            /* undo this request's tasks: the whole submit fails */
            int errnum = errno ? errno : EIO;
            name_spec(&err, i, n);
            pl_db_savepoint_end(d->db, false, NULL);
            store_text(d, &err);
            undo_reply(d, o, err.text, errnum);
            out_push(d, o);
            goto done;
        }
    }
    if (pl_db_savepoint_end(d->db, true, &err) < 0) {
        int errnum = errno;
        store_text(d, &err);
        undo_reply(d, o, err.text, errnum);
        out_push(d, o);
        goto done;
    }
    pl_wbuf_reply(&o->w, r->seq, 0, NULL);
    msgpack_pack_map(&o->w.pk, 1);
    pl_w_kuintv(&o->w.pk, "ids", o->undo, (uint32_t)o->nundo);
    o->needs_commit = true;
    out_push(d, o);
    d->want_sched = true;
    pl_log(LOG_INFO, "submitted %zu tasks (%llu..%llu)", o->nundo,
           (unsigned long long)o->undo[0],
           (unsigned long long)o->undo[o->nundo - 1]);
    goto done;
nomem:
    errno = ENOMEM;
    pl_errprintf(&err, "out of memory");
bad:
    reply_err(d, r->rid, r->ridlen, r->seq, errno ? errno : EINVAL, err.text);
    if (o)
        out_free(o);
done:
    for (i = 0; specs && i < n; i++)
        pl_spec_clear(&specs[i]);
    free(specs);
}

/* The tasks a request names: "ids" (tasks, or arrays: all their
 * elements; with 'expand' false an array stays its id, for
 * pl_query_counts) and "elems" (pairs: array id, index), resolved into
 * *ids (owned) and *n; *given: either key was there.  0, or -1 with
 * errp. */
static int req_ids(struct pl_daemon *d, const struct pl_msg *m, bool expand,
                   uint64_t **ids, size_t *n, bool *given,
                   struct pl_error *errp)
{
    uint64_t *v = NULL, *el = NULL;
    uint32_t nv = 0, nel = 0;
    int rc = -1;

    *ids = NULL;
    *n = 0;
    if (pl_mp_uintv(m->body, "ids", false, MAX_IDS, UINT64_MAX, &v, &nv,
                    errp) < 0
        || pl_mp_uintv(m->body, "elems", false, MAX_IDS * 2, UINT64_MAX, &el,
                       &nel, errp) < 0)
        goto done;
    if (nel % 2) {
        errno = EPROTO;
        pl_errprintf(errp, "elems: want pairs of array id and index");
        goto done;
    }
    *given = nv + nel > 0;
    rc = pl_query_resolve(pl_db_handle(d->db), v, nv, el, nel / 2, expand,
                          ids, n, errp);
done:
    free(v);
    free(el);
    return rc;
}

static void h_list(struct pl_daemon *d, const struct req *r,
                   const struct pl_msg *m)
{
    struct pl_error err;
    char *state = NULL, **tags = NULL;
    uint64_t *ids = NULL, limit = 0;
    size_t nids = 0;
    bool given = false;
    json_t *res;

    if (pl_mp_str(m->body, "state", false, 16, &state, &err) < 0
        || pl_mp_strv(m->body, "tags", false, 0, PL_QUERY_MAX_TAGS, 512,
                      &tags, &err) < 0
        || pl_mp_uint(m->body, "limit", false, UINT64_MAX, &limit, &err) < 0
        || req_ids(d, m, true, &ids, &nids, &given, &err) < 0)
        goto bad;
    if (state && pl_state_parse(state) < 0) {
        errno = EINVAL;
        pl_errprintf(&err, "unknown state '%s'", state);
        goto bad;
    }
    if (given && nids == 0) {
        reply_json(d, r->rid, r->ridlen, r->seq, json_array());
        goto done;
    }
    /* a listing must fit in one message (64 MiB, about 500 bytes a
     * task): past LIST_MAX the client has to narrow it */
    if (!(res = pl_query_tasks(pl_db_handle(d->db), state,
                               (const char *const *)tags, ids, nids,
                               limit && limit <= LIST_MAX ? limit
                                                          : LIST_MAX + 1,
                               &err)))
        goto bad;
    if (json_array_size(res) > LIST_MAX) {
        json_decref(res);
        errno = E2BIG;
        pl_errprintf(&err, "more than %d tasks match: narrow the listing "
                     "with --state, --tag or --limit", LIST_MAX);
        goto bad;
    }
    reply_json(d, r->rid, r->ridlen, r->seq, res);
    goto done;
bad:
    reply_err(d, r->rid, r->ridlen, r->seq, errno, err.text);
done:
    free(state);
    pl_strv_free(tags);
    free(ids);
}

static void h_show(struct pl_daemon *d, const struct req *r,
                   const struct pl_msg *m)
{
    struct pl_error err;
    uint64_t id = 0, *el = NULL, *res_ids = NULL;
    uint32_t nel = 0;
    size_t n = 0;
    int has_id;
    json_t *res = NULL;

    if ((has_id = pl_mp_uint(m->body, "id", false, UINT64_MAX, &id, &err)) < 0
        || pl_mp_uintv(m->body, "elem", false, 2, UINT64_MAX, &el, &nel,
                       &err) < 0)
        goto bad;
    if (!has_id && nel != 2) {
        errno = EPROTO;
        pl_errprintf(&err, "show: want id, or elem: [array id, index]");
        goto bad;
    }
    if (!has_id) {
        if (pl_query_resolve(pl_db_handle(d->db), NULL, 0, el, 1, true,
                             &res_ids, &n, &err) < 0)
            goto bad;
        id = res_ids[0];
    }
    if (!(res = pl_query_task(pl_db_handle(d->db), id, &err)))
        goto bad;
    reply_json(d, r->rid, r->ridlen, r->seq, res);
    goto done;
bad:
    reply_err(d, r->rid, r->ridlen, r->seq, errno, err.text);
done:
    free(el);
    free(res_ids);
}

static void h_counts(struct pl_daemon *d, const struct req *r,
                     const struct pl_msg *m)
{
    struct pl_error err;
    uint64_t *ids = NULL;
    size_t nids = 0;
    bool given = false;
    json_t *res = NULL;

    if (req_ids(d, m, false, &ids, &nids, &given, &err) < 0) {
        reply_err(d, r->rid, r->ridlen, r->seq, errno, err.text);
        return;
    }
    if (given) {
        if (!(res = pl_query_counts(pl_db_handle(d->db), ids, nids, &err))) {
            reply_err(d, r->rid, r->ridlen, r->seq, errno, err.text);
            free(ids);
            return;
        }
    }
    else {
        /* all tasks: from the counters, not a scan of the table */
        res = json_object();
        for (int s = 1; s < PL_ST_COUNT; s++)
            json_object_set_new(res, pl_state_name(s),
                                json_integer(d->count[s]));
        json_object_set_new(res, "total", json_integer(d->total));
        json_object_set_new(res, "unknown", json_array());
    }
    free(ids);
    reply_json(d, r->rid, r->ridlen, r->seq, res);
}

static void h_cancel(struct pl_daemon *d, const struct req *r,
                     const struct pl_msg *m)
{
    struct pl_error err;
    uint64_t *ids = NULL;
    size_t nids = 0;
    bool given = false;
    json_t *canceled = NULL, *final = NULL, *res;

    if (req_ids(d, m, true, &ids, &nids, &given, &err) < 0)
        goto bad;
    if (!given) {
        errno = EINVAL;
        pl_errprintf(&err, "no task ids given");
        goto bad;
    }
    if (store_refused(d, r)) {
        free(ids);
        return;
    }
    /* all ids must exist before anything changes */
    for (size_t i = 0; i < nids; i++) {
        if (pl_sched_task_get(d->sched, ids[i]))
            continue;
        int st = pl_db_task_state(d->db, ids[i], &err);
        if (st < 0)
            goto bad;
        if (st == 0) {
            errno = ENOENT;
            pl_errprintf(&err, "no task %llu", (unsigned long long)ids[i]);
            goto bad;
        }
    }
    canceled = json_array();
    final = json_array();
    for (size_t i = 0; i < nids; i++) {
        struct pl_dtask *t = pl_sched_task_get(d->sched, ids[i]);
        if (!t) {
            json_array_append_new(final, json_integer((json_int_t)ids[i]));
            continue;
        }
        json_array_append_new(canceled, json_integer((json_int_t)ids[i]));
        if (t->state == PL_ST_QUEUED || t->state == PL_ST_WAITING) {
            struct pl_db_change c = { .exit_code = -1, .signal = -1,
                                      .maxrss_kb = -1,
                                      .reason = "canceled by user" };
            pl_sched_dequeue(d->sched, t);
            finish(d, t, PL_ST_CANCELED, &c);
        }
        else if (!t->cancel) {
            t->cancel = true;
            send_kill(d, t);
        }
    }
    res = json_object();
    json_object_set_new(res, "canceled", canceled);
    json_object_set_new(res, "final", final);
    struct out *o = reply_json(d, r->rid, r->ridlen, r->seq, res);
    if (o) {
        /* the cancel of a queued task is a write: acknowledged once
         * stored */
        o->needs_commit = true;
        o->cancel = true;
    }
    free(ids);
    return;
bad:
    reply_err(d, r->rid, r->ridlen, r->seq, errno ? errno : EINVAL, err.text);
    free(ids);
}

static void refresh_end_time(struct pl_daemon *d)
{
    struct pl_error err;
    time_t end;

    if (d->cfg.local || d->cfg.job <= 0 || now() - d->end_time_checked < 10)
        return;
    d->end_time_checked = now();
    if (pl_slurmjob_end_time(d->cfg.job, &end, &err) < 0)
        pl_log(LOG_WARNING, "%s", err.text);
    else
        d->end_time = end;
}

static void h_status(struct pl_daemon *d, const struct req *r,
                     const struct pl_msg *m)
{
    json_t *s = json_object(), *nodes = json_array(), *tasks = json_object();
    long long cb = 0, ct = 0, gb = 0, gt = 0, up = 0;
    (void)m;

    refresh_end_time(d);
    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++) {
        struct pl_node *n = pl_sched_node_at(d->sched, k);
        const char *st = n->state == PL_NODE_UP     ? "up"
                         : n->state == PL_NODE_LOST ? "lost"
                                                    : "gone";
        json_t *o = json_object();
        json_t *gpus = json_array();
        json_t *cores = json_array();
        for (uint32_t i = 0; i < n->ncores; i++)
            json_array_append_new(cores, json_integer((json_int_t)n->cpu[i]));
        for (uint32_t i = 0; i < n->ngpus; i++)
            json_array_append_new(gpus, json_string(n->gpu[i]));
        json_object_set_new(o, "name", json_string(n->name));
        json_object_set_new(o, "state", json_string(st));
        json_object_set_new(o, "cores", cores);
        json_object_set_new(o, "gpus", gpus);
        json_object_set_new(o, "cores_busy",
                            json_integer(n->ncores - n->free_cores));
        json_object_set_new(o, "gpus_busy",
                            json_integer(n->ngpus - n->free_gpus));
        json_object_set_new(o, "running", json_integer(n->running));
        json_object_set_new(o, "pid", json_integer(n->pid));
        json_object_set_new(o, "last_seen", json_real(n->last_seen));
        json_array_append_new(nodes, o);
        if (n->state == PL_NODE_UP) {
            up++;
            ct += n->ncores;
            cb += n->ncores - n->free_cores;
            gt += n->ngpus;
            gb += n->ngpus - n->free_gpus;
        }
    }
    for (int st = 1; st < PL_ST_COUNT; st++)
        json_object_set_new(tasks, pl_state_name(st),
                            json_integer(d->count[st]));
    json_object_set_new(tasks, "total", json_integer(d->total));
    json_object_set_new(s, "pilot", json_string(d->id));
    json_object_set_new(s, "mode", json_string(d->cfg.local ? "local"
                                                            : "slurm"));
    json_object_set_new(s, "state", json_string(d->stopping ? "stopping"
                                                            : "running"));
    /* the state directory: "ok", or why nothing new is stored */
    const char *text;
    int fe = pl_db_failed(d->db, &text);
    char why[PL_PATH_MAX + 240] = "";
    if (fe) {
        store_why(d, fe, why, sizeof(why));
        snprintf(why + strlen(why), sizeof(why) - strlen(why), ": %s", text);
    }
    json_object_set_new(s, "state_store", json_string(store_state(fe)));
    json_object_set_new(s, "state_store_error",
                        fe ? json_string(why) : json_null());
    json_object_set_new(s, "state_store_since",
                        fe && d->store_failed_since
                            ? json_real(d->store_failed_since)
                            : json_null());
    json_object_set_new(s, "unstored",
                        json_integer((json_int_t)pl_db_unstored(d->db)));
    json_object_set_new(s, "job", d->cfg.job > 0 ? json_integer(d->cfg.job)
                                                 : json_null());
    json_object_set_new(s, "host", json_string(d->host));
    json_object_set_new(s, "pid", json_integer(getpid()));
    json_object_set_new(s, "started", json_real(d->started));
    json_object_set_new(s, "end_time", d->end_time > 0
                                           ? json_integer(d->end_time)
                                           : json_null());
    json_object_set_new(s, "walltime_left",
                        d->end_time > 0
                            ? json_real(fmax(0, (double)d->end_time - now()))
                            : json_null());
    json_object_set_new(s, "agents_expected",
                        json_integer(d->cfg.expected_agents));
    json_object_set_new(s, "agents_up", json_integer(up));
    json_object_set_new(s, "nodes", nodes);
    json_t *c = json_object();
    json_object_set_new(c, "busy", json_integer(cb));
    json_object_set_new(c, "total", json_integer(ct));
    json_object_set_new(s, "cores", c);
    json_t *g = json_object();
    json_object_set_new(g, "busy", json_integer(gb));
    json_object_set_new(g, "total", json_integer(gt));
    json_object_set_new(s, "gpus", g);
    json_object_set_new(s, "tasks", tasks);
    reply_json(d, r->rid, r->ridlen, r->seq, s);
}

static void begin_stop(struct pl_daemon *d, const char *why);

static void h_shutdown(struct pl_daemon *d, const struct req *r,
                       const struct pl_msg *m)
{
    (void)m;
    reply_json(d, r->rid, r->ridlen, r->seq, json_object());
    begin_stop(d, "shutdown requested");
}

static const struct {
    int type;
    void (*fn)(struct pl_daemon *d, const struct req *r,
               const struct pl_msg *m);
} htab[] = {
    { PL_MSG_SUBMIT, h_submit },     { PL_MSG_LIST, h_list },
    { PL_MSG_SHOW, h_show },         { PL_MSG_CANCEL, h_cancel },
    { PL_MSG_STATUS, h_status },     { PL_MSG_SHUTDOWN, h_shutdown },
    { PL_MSG_COUNTS, h_counts },     { 0, NULL },
};

static void client_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct pl_daemon *d = arg;
    uint64_t t0 = uv_hrtime();
    (void)zw;
    (void)revents;

    for (int i = 0; !batch_over(t0, i); i++) {
        zmq_msg_t rid, body;
        struct pl_msg m;
        struct pl_error err;
        int k;

        zmq_msg_init(&rid);
        zmq_msg_init(&body);
        if (pl_zsock_recv(d->csock, &rid, &body) < 0) {
            int e = errno;
            zmq_msg_close(&rid);
            zmq_msg_close(&body);
            if (e == EAGAIN)
                break;
            continue; /* a malformed multipart message: dropped */
        }
        struct req r = { zmq_msg_data(&rid), zmq_msg_size(&rid), 0 };
        if (pl_msg_decode(zmq_msg_data(&body), zmq_msg_size(&body), &m,
                          &err) < 0) {
            uint64_t v, seq = 0;
            if (pl_msg_peek(zmq_msg_data(&body), zmq_msg_size(&body), &v,
                            &seq) == 0 && v != PL_PROTO_VERSION)
                pl_errprintf(&err, "this pilotd speaks protocol %d, the "
                             "client %llu: use the pilot commands of the "
                             "same version", PL_PROTO_VERSION,
                             (unsigned long long)v);
            bad_log(d, LOG_INFO, "bad client message: %s", err.text);
            reply_err(d, r.rid, r.ridlen, seq, EPROTO, err.text);
            goto next;
        }
        r.seq = m.seq;
        for (k = 0; htab[k].fn; k++)
            if (htab[k].type == m.type)
                break;
        errno = 0;
        if (htab[k].fn)
            htab[k].fn(d, &r, &m);
        else
            reply_err(d, r.rid, r.ridlen, r.seq, EPROTO,
                      "not a client request");
        pl_msg_release(&m);
    next:
        zmq_msg_close(&rid);
        zmq_msg_close(&body);
    }
    flush(d);
}

/* ------------------------------------------------------------ lifecycle */

static void close_cb(uv_handle_t *h)
{
    struct pl_daemon *d = h->data;

    d->handles--;
}

static void stop_task_cb(struct pl_dtask *t, void *arg)
{
    struct pl_daemon *d = arg;
    struct pl_db_change c = { .exit_code = -1, .signal = -1, .maxrss_kb = -1,
                              .reason = "pilot down" };

    if (t->state != PL_ST_ASSIGNED && t->state != PL_ST_RUNNING)
        return;
    if (d->draining && !t->cancel) {
        /* no end came back in time: queued for the next allocation */
        requeue(d, t, "interrupted by the walltime drain", true);
        return;
    }
    finish(d, t, PL_ST_CANCELED, &c);
}

static void finish_stop(struct pl_daemon *d)
{
    struct pl_error err;

    if (d->stopped)
        return;
    d->stopped = true;
    /* tasks whose agents did not report in time */
    pl_sched_node_tasks(d->sched, NULL, stop_task_cb, d);
    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++) {
        struct pl_node *n = pl_sched_node_at(d->sched, k);
        node_record(d, n, "down");
    }
    if (pl_db_commit(d->db, &err) < 0)
        pl_log(LOG_ERR, "final commit: %s: %zu changes are lost",
               err.text, pl_db_unstored(d->db));
    flush(d);
    pl_endpoint_remove(d->dir);
    pl_zwatch_free(d->czw);
    pl_zwatch_free(d->azw);
    d->czw = d->azw = NULL;
    pl_auth_stop(d->auth);
    uv_close((uv_handle_t *)&d->sigterm, close_cb);
    uv_close((uv_handle_t *)&d->sigint, close_cb);
    uv_close((uv_handle_t *)&d->tick, close_cb);
    uv_close((uv_handle_t *)&d->stop_timer, close_cb);
    uv_close((uv_handle_t *)&d->restart_timer, close_cb);
    pl_launch_free(d->launch);
    d->launch = NULL;
    for (size_t i = 0; i < d->nnode_launch; i++) {
        pl_launch_free(d->node_launch[i]->launch);
        free(d->node_launch[i]);
    }
    free(d->node_launch);
    d->node_launch = NULL;
    d->nnode_launch = 0;
    pl_log(LOG_NOTICE, "pilot %s stopped", d->id);
}

static void stop_timer_cb(uv_timer_t *h)
{
    struct pl_daemon *d = h->data;

    if (d->launch && pl_launch_running(d->launch))
        pl_log(LOG_WARNING, "agents did not finish within %d s; stopping "
               "anyway", STOP_GRACE / 1000);
    finish_stop(d);
}

static void begin_stop(struct pl_daemon *d, const char *why)
{
    if (d->stopping)
        return;
    d->stopping = true;
    pl_log(LOG_NOTICE, "pilot %s stopping: %s", d->id, why);
    uv_timer_stop(&d->restart_timer);
    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++) {
        struct pl_node *n = pl_sched_node_at(d->sched, k);
        struct out *o;
        if (n->state != PL_NODE_UP || !(o = agent_out(d, n)))
            continue;
        pl_wbuf_init(&o->w, PL_MSG_EXIT, 0, 0);
        send_agent(d, n, o);
    }
    flush(d);
    if ((!d->launch || !pl_launch_running(d->launch))
        && d->count[PL_ST_ASSIGNED] + d->count[PL_ST_RUNNING] == 0) {
        /* nothing to wait for: the agents' process already ended */
        uv_timer_start(&d->stop_timer, stop_timer_cb, 0, 0);
        return;
    }
    uv_timer_start(&d->stop_timer, stop_timer_cb, STOP_GRACE, 0);
}

static void signal_cb(uv_signal_t *h, int signum)
{
    struct pl_daemon *d = h->data;

    /* Slurm's signal before the walltime (or scancel): keep the work */
    d->draining = true;
    begin_stop(d, signum == SIGTERM ? "SIGTERM: draining, interrupted tasks "
                                      "stay queued"
                                    : "SIGINT: draining");
}

static int start_agents(struct pl_daemon *d, const char *nodelist, int count,
                        struct pl_error *errp);

/* The recovery of a restarted pilotd is over: ranks whose agents did not
 * come back are lost; agents start where none came back. */
static void lost_orphan_cb(struct pl_dtask *t, void *arg)
{
    struct pl_daemon *d = arg;
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .reason = "node-lost" };

    t->lost = true;
    for (uint32_t r = 0; t->rank && r < t->ranks; r++) {
        struct pl_rank *k = &t->rank[r];
        if (!k->orphan)
            continue;
        free(k->orphan);
        k->orphan = NULL;
        t->orphans--;
        if (rank_ended(d, t, r, PL_ST_FAILED, &c))
            return; /* the task ended and may be gone */
    }
}

static void end_recovery(struct pl_daemon *d)
{
    struct pl_error err;
    size_t n = count_orphans(d);

    d->recovering = false;
    pl_log(LOG_NOTICE, "recovery over: %zu agents back, %zu tasks lost with "
           "agents that did not return", pl_sched_nnodes(d->sched), n);
    each_orphan(d, lost_orphan_cb, d);
    if (!d->agents_deferred)
        return;
    d->agents_deferred = false;
    /* agents where none came back: this allocation's nodes but theirs */
    char missing[4096] = "";
    int count = 0;
    size_t off = 0;
    const char *nl = getenv("SLURM_JOB_NODELIST");
    char **hosts = nl ? pl_slurmjob_hostlist_expand(nl, &err) : NULL;
    for (char **h = hosts; h && *h; h++) {
        if (pl_sched_node_find(d->sched, *h))
            continue;
        int w = snprintf(missing + off, sizeof(missing) - off, "%s%s",
                         off ? "," : "", *h);
        if (w < 0 || (size_t)w >= sizeof(missing) - off)
            break;
        off += (size_t)w;
        count++;
    }
    pl_strv_free(hosts);
    if (count > 0) {
        pl_log(LOG_NOTICE, "starting agents on %s (%d nodes)", missing,
               count);
        if (start_agents(d, missing, count, &err) < 0)
            pl_log(LOG_ERR, "start agents: %s", err.text);
    }
}

static void refresh_end_time(struct pl_daemon *d);

static void tick_cb(uv_timer_t *h)
{
    struct pl_daemon *d = h->data;
    double t = now();

    refresh_end_time(d);
    if (d->end_time > 0) {
        double left = (double)d->end_time - t - d->cfg.drain_before;
        pl_sched_set_time_left(d->sched, left > 1 ? left : 1);
    }
    if (d->stopping && !d->stopped
        && (!d->launch || !pl_launch_running(d->launch))
        && d->count[PL_ST_ASSIGNED] + d->count[PL_ST_RUNNING] == 0) {
        /* agents of an earlier pilotd: their tasks have ended */
        uv_timer_stop(&d->stop_timer);
        uv_timer_start(&d->stop_timer, stop_timer_cb, 0, 0);
    }
    if (d->recovering
        && (t >= d->recover_until
            || (int)pl_sched_nnodes(d->sched) >= d->cfg.expected_agents))
        end_recovery(d);
    bad_log_window(d, t);
    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++) {
        struct pl_node *n = pl_sched_node_at(d->sched, k);
        if (n->state == PL_NODE_UP && t - n->last_seen > d->cfg.lost_after) {
            char why[64];
            snprintf(why, sizeof(why), "silent for %.0f s", t - n->last_seen);
            node_lost(d, n, why);
        }
        /* our heartbeat: an agent that hears nothing follows the endpoint
         * file, and at last gives up */
        struct out *o;
        if (n->state == PL_NODE_UP && (o = agent_out(d, n))) {
            pl_wbuf_init(&o->w, PL_MSG_PING, 0, 0);
            send_agent(d, n, o);
        }
    }
    flush(d);
    checkpoint(d, 0); /* the last writes of a burst */
}

static void restart_cb(uv_timer_t *h)
{
    struct pl_daemon *d = h->data;
    struct pl_error err;

    if (d->stopping)
        return;
    if (start_agents(d, NULL, 0, &err) < 0)
        pl_log(LOG_ERR, "restart agents: %s", err.text);
}

static void launch_exit_cb(struct pl_launch *l, int64_t status, int signum,
                           void *arg)
{
    struct pl_daemon *d = arg;
    (void)l;

    if (d->stopping) {
        pl_log(LOG_NOTICE, "agents' process ended (status %lld, signal %d)",
               (long long)status, signum);
        uv_timer_stop(&d->stop_timer);
        uv_timer_start(&d->stop_timer, stop_timer_cb, 0, 0);
        return;
    }
    pl_log(LOG_WARNING, "agents' process ended unexpectedly (status %lld, "
           "signal %d)", (long long)status, signum);
    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++) {
        struct pl_node *n = pl_sched_node_at(d->sched, k);
        if (n->state == PL_NODE_UP)
            node_lost(d, n, "agents' process ended");
    }
    flush(d);
    if (d->restarts++ < MAX_RESTARTS) {
        pl_log(LOG_NOTICE, "restarting the agents in %d s (%d of %d)",
               RESTART_DELAY / 1000, d->restarts, MAX_RESTARTS);
        uv_timer_start(&d->restart_timer, restart_cb, RESTART_DELAY, 0);
    }
    else
        pl_log(LOG_ERR, "agents failed %d times; not restarting them",
               d->restarts);
}

/* The agents' process: one srun step over the job's nodes, or over
 * 'nodelist' ('count' nodes) if given; with --local, one child. */
/* The srun command of agents on 'nodelist' ('count' nodes), or on the
 * job's nodes if NULL, into argv[] (room for 48); its formatted strings
 * go to 'bufs' (buflen >= 512 + the paths). */
static int agent_argv(struct pl_daemon *d, const char *nodelist, int count,
                      const char **argv, char *bufs, size_t buflen)
{
    const char *cpn = getenv("SLURM_CPUS_ON_NODE");
    const char *gpn = getenv("SLURM_GPUS_ON_NODE");
    int want = nodelist ? count : d->cfg.expected_agents;
    size_t off = 0;
    int n = 0;

#define FMT(...)                                                             \
    do {                                                                     \
        int w_ = snprintf(bufs + off, buflen - off, __VA_ARGS__);            \
        if (w_ < 0 || (size_t)w_ >= buflen - off)                            \
            return -1;                                                       \
        argv[n++] = bufs + off;                                              \
        off += (size_t)w_ + 1;                                               \
    } while (0)
    argv[n++] = "srun";
    argv[n++] = "--overlap";
    FMT("--nodes=%d", want);
    FMT("--ntasks=%d", want);
    argv[n++] = "--ntasks-per-node=1";
    argv[n++] = "--kill-on-bad-exit=0";
    argv[n++] = "--cpu-bind=none";
    argv[n++] = "--mem=0";
    argv[n++] = "--job-name=pilot-agents";
    if (nodelist) {
        argv[n++] = "--nodelist";
        argv[n++] = nodelist;
    }
    /* the agent's affinity mask must cover the whole node */
    if (cpn && atoi(cpn) > 0)
        FMT("--cpus-per-task=%d", atoi(cpn));
    if (gpn && atoi(gpn) > 0)
        FMT("--gres=gpu:%d", atoi(gpn));
    FMT("%s/pilot-agent", d->bindir);
    argv[n++] = "--connect";
    argv[n++] = d->aep;
    /* agents outlive a pilotd that dies and follow the next */
    argv[n++] = "--dir";
    argv[n++] = d->dir;
    argv[n++] = "--orphan-timeout";
    FMT("%d", ORPHAN_TIMEOUT);
    /* the pilot directory is on a filesystem every node sees */
    argv[n++] = "--keys";
    argv[n++] = d->keydir;
    argv[n] = NULL;
#undef FMT
    return 0;
}

static int start_agents(struct pl_daemon *d, const char *nodelist, int count,
                        struct pl_error *errp)
{
    char agent[PL_PATH_MAX + 32], logpath[PL_PATH_MAX + 64];
    char bufs[PL_PATH_MAX + 512];
    const char *argv[48];
    int n = 0;

    snprintf(agent, sizeof(agent), "%s/pilot-agent", d->bindir);
    if (d->cfg.local && d->cfg.no_agent)
        return 0;
    if (!d->launch) {
        if (d->cfg.local) {
            snprintf(logpath, sizeof(logpath), "%s/logs/agent-local.log",
                     d->dir);
            argv[n++] = agent;
            argv[n++] = "--local";
            argv[n++] = "--connect";
            argv[n++] = d->aep;
            argv[n++] = "--keys";
            argv[n++] = d->keydir;
            if (d->cfg.agent_cores) {
                argv[n++] = "--cores";
                argv[n++] = d->cfg.agent_cores;
            }
            argv[n] = NULL;
        }
        else {
            snprintf(logpath, sizeof(logpath), "%s/logs/srun-agents.log",
                     d->dir);
            if (agent_argv(d, nodelist, count, argv, bufs, sizeof(bufs))
                < 0)
                return pl_errprintf(errp, "agents' command too long");
        }
        if (!(d->launch = pl_launch_new(d->loop, (char *const *)argv, logpath,
                                        launch_exit_cb, d, errp)))
            return -1;
    }
    return pl_launch_start(d->launch, errp);
}

static int init_counts(struct pl_daemon *d, struct pl_error *errp)
{
    json_t *c = pl_query_counts(pl_db_handle(d->db), NULL, 0, errp);

    if (!c)
        return -1;
    for (int s = 1; s < PL_ST_COUNT; s++)
        d->count[s] = json_integer_value(json_object_get(c, pl_state_name(s)));
    d->total = json_integer_value(json_object_get(c, "total"));
    json_decref(c);
    return 0;
}

static void orphan_place_cb(uint32_t rank, const char *node,
                            const char *cores, const char *gpus, void *arg)
{
    struct pl_dtask *t = arg;
    struct pl_rank *k = &t->rank[rank];

    if (k->orphan)
        return;
    if (asprintf(&k->orphan, "%s\t%s\t%s", node, cores ? cores : "",
                 gpus ? gpus : "") < 0)
        k->orphan = NULL;
    else
        t->orphans++;
}

/* 't', assigned or running when the pilotd before us died: it stays so,
 * its ranks 'orphans' where the database put them, until their agents
 * report (agent_register()) or the recovery ends.  Returns -1 if its
 * placement is not known: then it is requeued. */
static int orphan_load(struct pl_daemon *d, struct pl_dtask *t)
{
    struct pl_error err;

    if (!(t->rank = calloc(t->ranks, sizeof(*t->rank))))
        return -1;
    for (uint32_t r = 0; r < t->ranks; r++)
        t->rank[r].state = PL_ST_ASSIGNED;
    if (pl_db_placement(d->db, t->id, t->attempt, t->ranks, orphan_place_cb,
                        t, &err) < 0)
        pl_log(LOG_ERR, "task %llu: %s", (unsigned long long)t->id,
               err.text);
    if (t->orphans != t->ranks) {
        pl_log(LOG_WARNING, "task %llu: placement of %u of its %u ranks "
               "unknown: requeued", (unsigned long long)t->id,
               t->ranks - t->orphans, t->ranks);
        for (uint32_t r = 0; r < t->ranks; r++)
            free(t->rank[r].orphan);
        free(t->rank);
        t->rank = NULL;
        t->orphans = 0;
        return -1;
    }
    return 0;
}

/* A waiting task from the database: its dependencies are loaded before
 * it (smaller ids); wait for those still live, fail if one failed, queue
 * it if none is left.  Takes argv, env, cwd. */
static int load_waiting(struct pl_daemon *d, uint64_t id,
                        const struct pl_db_spec *s, char ***argv, char ***env,
                        char **cwd)
{
    json_t *after = s->after_json ? json_loads(s->after_json, 0, NULL) : NULL;
    struct pl_dtask *t = pl_sched_task_add(d->sched, id, PL_ST_WAITING,
                                           s->priority, argv, env, cwd);
    struct deps dp = { 0 };
    struct pl_error err;
    int rc = -1;
    size_t i;
    json_t *e;

    if (!t) {
        pl_strv_free(*argv);
        pl_strv_free(*env);
        free(*cwd);
        goto done;
    }
    shape(s, t);
    t->serial = ++d->serial;
    t->array_id = s->array_id;
    t->array_index = s->array_index;
    json_array_foreach(after, i, e) {
        uint64_t dep = (uint64_t)json_integer_value(json_array_get(e, 0));
        struct member_arg ma = { d, &dp, json_integer_value(
                                             json_array_get(e, 1)) != 0 };
        bool one = json_integer_value(json_array_get(e, 2)) != 0;
        long nm = one ? 0 : pl_db_array_members(d->db, dep, member_cb, &ma,
                                                &err);
        int st;
        if (nm < 0)
            goto done;
        if (nm == 0) {
            st = pl_db_task_state(d->db, dep, &err);
            if (st == 0 && !ma.any && !dp.why[0])
                snprintf(dp.why, sizeof(dp.why), "dependency: task %llu is "
                         "gone", (unsigned long long)dep);
            else if (st > 0 && dep_add(d, &dp, dep, st, ma.any) < 0)
                goto done;
        }
    }
    if (dp.why[0]) {
        struct pl_db_change c = { .exit_code = -1, .signal = -1,
                                  .maxrss_kb = -1, .reason = dp.why };
        finish(d, t, PL_ST_FAILED, &c);
    }
    else if (dp.nlive == 0)
        deps_met(d, t);
    else if (deps_wait(d, t, &dp) < 0)
        goto done;
    rc = 0;
done:
    json_decref(after);
    deps_clear(&dp);
    return rc;
}

/* Rebuild the queue from the database (a restarted pilotd, or --resume):
 * tasks that were on agents of an earlier daemon go back to the queue. */
static int load_cb(uint64_t id, int state, const struct pl_db_spec *s,
                   uint32_t attempts, void *arg)
{
    struct pl_daemon *d = arg;
    char **argv = strv_json(s->argv_json);
    char **env = s->env_json ? strv_json(s->env_json) : NULL;
    char *cwd = s->cwd ? strdup(s->cwd) : NULL;
    struct pl_dtask *t;

    if (!argv)
        return 0; /* cannot happen: submit stored a valid array */
    bool orphan = d->recovering
                  && (state == PL_ST_ASSIGNED || state == PL_ST_RUNNING);
    if (state == PL_ST_WAITING)
        return load_waiting(d, id, s, &argv, &env, &cwd);
    if (!(t = pl_sched_task_add(d->sched, id, orphan ? state : PL_ST_QUEUED,
                                s->priority, &argv, &env, &cwd))) {
        pl_strv_free(argv);
        pl_strv_free(env);
        free(cwd);
        return -1;
    }
    shape(s, t);
    t->serial = ++d->serial;
    t->array_id = s->array_id;
    t->array_index = s->array_index;
    t->attempt = attempts;
    if (orphan) {
        if (orphan_load(d, t) == 0)
            return 0;
        pl_sched_requeue(d->sched, t, false);
    }
    if (state != PL_ST_QUEUED) {
        struct pl_db_change c = { .exit_code = -1, .signal = -1,
                                  .maxrss_kb = -1,
                                  .reason = "requeued at pilot start" };
        t->state = state;
        change(d, t, PL_ST_QUEUED, &c);
        t->state = PL_ST_QUEUED;
    }
    return 0;
}

/* Bind 'sock' to 'ep' if it holds an address (the one the pilotd before
 * us had, on this host), else to any port of 'addr'; 'ep' gets it. */
static int bind_again(void *sock, const char *addr, char *ep, size_t eplen,
                      struct pl_error *errp)
{
    if (ep[0] && zmq_bind(sock, ep) == 0)
        return 0;
    if (ep[0])
        pl_log(LOG_WARNING, "cannot bind %s again (%s): agents will find the "
               "new port in the endpoint file", ep, zmq_strerror(errno));
    return pl_zsock_bind_any(sock, addr, ep, eplen, errp);
}

struct pl_daemon *pl_daemon_new(uv_loop_t *loop,
                                const struct pl_daemon_config *cfg,
                                struct pl_error *errp)
{
    struct pl_daemon *d;
    char dbpath[PL_PATH_MAX + 16];
    struct pl_endpoint ep = { 0 };

    if (!(d = calloc(1, sizeof(*d)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    d->loop = loop;
    d->cfg = *cfg;
    snprintf(d->dir, sizeof(d->dir), "%s", cfg->dir);
    snprintf(d->keydir, sizeof(d->keydir), "%s", cfg->keydir);
    snprintf(d->id, sizeof(d->id), "%s", cfg->id);
    snprintf(d->bindir, sizeof(d->bindir), "%s", cfg->bindir);
    d->cfg.dir = d->dir;
    d->cfg.keydir = d->keydir;
    d->cfg.id = d->id;
    d->cfg.bindir = d->bindir;
    d->cfg.agent_cores = NULL;
    d->outtail = &d->outq;
    d->started = now();
    snprintf(d->instance, sizeof(d->instance), "%s/%ld/%.6f", cfg->id,
             (long)getpid(), d->started);
    gethostname(d->host, sizeof(d->host));
    d->host[sizeof(d->host) - 1] = '\0';
    d->exit_code = 1;

    uv_signal_init(loop, &d->sigterm);
    uv_signal_init(loop, &d->sigint);
    uv_timer_init(loop, &d->tick);
    uv_timer_init(loop, &d->stop_timer);
    uv_timer_init(loop, &d->restart_timer);
    d->sigterm.data = d->sigint.data = d->tick.data = d->stop_timer.data =
        d->restart_timer.data = d;
    d->handles = 5;

    pl_path_db(d->dir, dbpath, sizeof(dbpath));
    if (!(d->db = pl_db_open(dbpath, errp))
        || !(d->sched = pl_sched_new()))
        goto error;
    /* the same Slurm job as the pilotd before us: its agents may still
     * run its tasks (a pilotd restarted after a crash) */
    char *job = NULL;
    char jobstr[32];
    snprintf(jobstr, sizeof(jobstr), "%ld", cfg->job);
    if (pl_db_meta_get(d->db, "job", &job, errp) < 0)
        goto error;
    d->recovering = !cfg->local && cfg->job > 0 && job && !strcmp(job, jobstr);
    free(job);
    if (d->recovering) {
        d->recover_until = now() + RECOVER_HEARTBEATS * cfg->heartbeat;
        d->agents_deferred = true;
        /* where the agents look for us: the same ports, if still free */
        if (pl_endpoint_read(d->dir, &ep, NULL) == 0) {
            snprintf(d->cep, sizeof(d->cep), "%s", ep.client);
            snprintf(d->aep, sizeof(d->aep), "%s", ep.agent);
        }
        pl_log(LOG_NOTICE, "restarted in job %ld: waiting up to %.0f s for "
               "the agents of the pilotd before", cfg->job,
               RECOVER_HEARTBEATS * cfg->heartbeat);
    }
    if (pl_db_meta_set(d->db, "pilot", d->id, errp) < 0
        || pl_db_meta_set(d->db, "job", jobstr, errp) < 0
        || pl_db_load_live(d->db, load_cb, d, errp) < 0
        || pl_db_commit(d->db, errp) < 0
        || init_counts(d, errp) < 0)
        goto error;
    if (!(d->zctx = zmq_ctx_new())) {
        pl_errprintf(errp, "zmq_ctx_new: %s", zmq_strerror(errno));
        goto error;
    }
    /* the ZAP handler first: a CURVE server without one admits anyone */
    if (!(d->auth = pl_auth_new(loop, d->zctx, d->keydir, errp))
        || !(d->csock = pl_zsock_new(d->zctx, ZMQ_ROUTER, errp))
        || !(d->asock = pl_zsock_new(d->zctx, ZMQ_ROUTER, errp))
        || pl_auth_server(d->auth, d->csock, "clients", errp) < 0
        || pl_auth_server(d->auth, d->asock, "agents", errp) < 0
        || bind_again(d->csock, cfg->bind_addr, d->cep, sizeof(d->cep),
                      errp) < 0
        || bind_again(d->asock, cfg->bind_addr, d->aep, sizeof(d->aep),
                      errp) < 0)
        goto error;
    if (!(d->czw = pl_zwatch_new(loop, d->csock, ZMQ_POLLIN, client_cb, d))
        || !(d->azw = pl_zwatch_new(loop, d->asock, ZMQ_POLLIN, agent_cb, d))
        || pl_zwatch_start(d->czw) < 0 || pl_zwatch_start(d->azw) < 0) {
        pl_errprintf(errp, "watch sockets: %s", strerror(errno));
        goto error;
    }
    uv_signal_start(&d->sigterm, signal_cb, SIGTERM);
    uv_signal_start(&d->sigint, signal_cb, SIGINT);
    uv_timer_start(&d->tick, tick_cb, 1000, 1000);
    refresh_end_time(d);
    if (!d->agents_deferred && start_agents(d, NULL, 0, errp) < 0)
        goto error;
    memset(&ep, 0, sizeof(ep));
    snprintf(ep.client, sizeof(ep.client), "%s", d->cep);
    snprintf(ep.agent, sizeof(ep.agent), "%s", d->aep);
    snprintf(ep.host, sizeof(ep.host), "%s", d->host);
    ep.pid = (long)getpid();
    ep.job = cfg->job;
    if (pl_endpoint_write(d->dir, &ep, errp) < 0)
        goto error;
    pl_log(LOG_NOTICE, "pilot %s up: clients %s, agents %s, %lld tasks "
           "(%zu queued), expecting %d agents", d->id, d->cep, d->aep,
           d->total, pl_sched_queued(d->sched), cfg->expected_agents);
    return d;
error:
    if (d->launch) {
        pl_launch_free(d->launch);
        d->launch = NULL;
    }
    d->stopping = d->stopped = true;
    pl_zwatch_free(d->czw);
    pl_zwatch_free(d->azw);
    d->czw = d->azw = NULL;
    pl_auth_stop(d->auth);
    uv_close((uv_handle_t *)&d->sigterm, close_cb);
    uv_close((uv_handle_t *)&d->sigint, close_cb);
    uv_close((uv_handle_t *)&d->tick, close_cb);
    uv_close((uv_handle_t *)&d->stop_timer, close_cb);
    uv_close((uv_handle_t *)&d->restart_timer, close_cb);
    uv_run(loop, UV_RUN_DEFAULT);
    pl_daemon_free(d);
    return NULL;
}

int pl_daemon_exit_code(const struct pl_daemon *d)
{
    return d->stopped ? 0 : 1;
}

void pl_daemon_free(struct pl_daemon *d)
{
    if (!d)
        return;
    int saved = errno;
    struct out *o, *next;
    for (o = d->outq; o; o = next) {
        next = o->next;
        out_free(o);
    }
    if (d->csock)
        zmq_close(d->csock);
    if (d->asock)
        zmq_close(d->asock);
    pl_auth_free(d->auth); /* N.B. after the sockets it guards */
    if (d->zctx)
        zmq_ctx_term(d->zctx);
    pl_sched_free(d->sched);
    pl_db_close(d->db);
    free(d->unsent);
    free(d->depfail);
    free(d);
    errno = saved;
}
