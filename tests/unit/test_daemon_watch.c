/* tests/unit/test_daemon_watch.c - pilotd's watches: an end is pushed only
 * after the commit that stored it (kept over a failed one), once, in seq
 * order; a resume replays from the database; a live queue past its bound
 * catches up from the database in order; a submit's 'watch' takes its
 * tasks before anything ends them; an undone submission leaves no end;
 * the limits and the key's ownership
 *
 * A pilotd of its parts: a real state database in a temporary directory,
 * a scheduler with one node, its client ROUTER on an inproc endpoint and
 * a DEALER as the client; requests go through the handlers and each batch
 * ends with pl_daemon_flush(), as in the loop.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "daemon/daemon_private.h"
#include "proto/strv.h"
#include "proto/watchmsg.h"
#include "proto/zsock.h"
#include "tests/unit/helpers.h"

static char dir[128];

struct rig {
    struct pl_daemon *d;
    uv_loop_t loop;
    void *ctx, *router, *dealer;
    struct pl_allow_key key, other;
    uint64_t seq;
};

static void rig_make(struct rig *g)
{
    struct pl_error e;
    char path[256];
    uint64_t cpu[2] = { 0, 1 };
    int ms = 2000;

    memset(g, 0, sizeof(*g));
    struct pl_daemon *d = g->d = calloc(1, sizeof(*d));
    snprintf(path, sizeof(path), "%s/state.db", dir);
    snprintf(d->dir, sizeof(d->dir), "%s", dir);
    d->outtail = &d->outq;
    d->stopping = true; /* no scheduling: the tasks stay queued */
    if (!(d->db = pl_db_open(path, &e)) || !(d->sched = pl_sched_new())
        || pl_db_max_end_seq(d->db, &d->end_seq, &e) < 0) {
        diag("daemon: %s", e.text);
        exit(1);
    }
    d->end_seq_stored = d->end_seq;
    struct pl_node *n = pl_node_new("n1", cpu, 2, NULL);
    if (!n || pl_sched_node_add(d->sched, n) < 0)
        exit(1);
    uv_loop_init(&g->loop);
    d->loop = &g->loop;
    uv_idle_init(&g->loop, &d->watch_idle);
    d->watch_idle.data = d;
    g->ctx = zmq_ctx_new();
    if (!(d->csock = g->router = pl_zsock_new(g->ctx, ZMQ_ROUTER, &e))
        || !(g->dealer = pl_zsock_new(g->ctx, ZMQ_DEALER, &e))
        || zmq_bind(g->router, "inproc://watch") < 0
        || zmq_connect(g->dealer, "inproc://watch") < 0) {
        diag("sockets: %s", e.text);
        exit(1);
    }
    zmq_setsockopt(g->dealer, ZMQ_RCVTIMEO, &ms, sizeof(ms));
    snprintf(g->key.name, sizeof(g->key.name), "client");
    g->key.role = PL_ROLE_ADMIN;
    snprintf(g->other.name, sizeof(g->other.name), "alice");
    g->other.role = PL_ROLE_READ;
}

static void rig_drop(struct rig *g)
{
    struct pl_daemon *d = g->d;

    pl_outq_free(d);
    pl_watch_free_all(d);
    pl_sched_free(d->sched);
    pl_db_close(d->db);
    free(d->unsent);
    free(d->depfail);
    free(d);
    zmq_close(g->dealer);
    zmq_close(g->router);
    zmq_ctx_term(g->ctx);
    uv_close((uv_handle_t *)&g->d->watch_idle, NULL);
}

/* The request in 'w' (destroyed) from the client with 'key', handled by
 * 'fn' as clients.c does, then the batch's end. */
static void request(struct rig *g, struct pl_wbuf *w,
                    const struct pl_allow_key *key,
                    void (*fn)(struct pl_daemon *, const struct pl_req *,
                               const struct pl_msg *))
{
    zmq_msg_t rid, body;
    struct pl_msg m;
    struct pl_error e;

    zmq_send(g->dealer, w->sb.data, w->sb.size, 0);
    pl_wbuf_destroy(w);
    zmq_msg_init(&rid);
    zmq_msg_init(&body);
    int ms = 2000;
    zmq_setsockopt(g->router, ZMQ_RCVTIMEO, &ms, sizeof(ms));
    if (zmq_msg_recv(&rid, g->router, 0) < 0
        || zmq_msg_recv(&body, g->router, 0) < 0
        || pl_msg_decode(zmq_msg_data(&body), zmq_msg_size(&body), &m, &e)
               < 0) {
        diag("request lost");
        exit(1);
    }
    struct pl_req r = { zmq_msg_data(&rid), zmq_msg_size(&rid), m.seq, key };
    fn(g->d, &r, &m);
    pl_msg_release(&m);
    zmq_msg_close(&rid);
    zmq_msg_close(&body);
    pl_daemon_flush(g->d);
}

/* The next frame the client gets into 'm' (which owns its buffer), or
 * -1 when none comes within 'ms'. */
static int next(struct rig *g, struct pl_msg *m, int ms)
{
    struct pl_error e;
    char *buf;
    int n;

    zmq_setsockopt(g->dealer, ZMQ_RCVTIMEO, &ms, sizeof(ms));
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if ((n = zmq_msg_recv(&msg, g->dealer, 0)) < 0) {
        zmq_msg_close(&msg);
        return -1;
    }
    buf = malloc((size_t)n + 1);
    memcpy(buf, zmq_msg_data(&msg), (size_t)n);
    zmq_msg_close(&msg);
    if (pl_msg_decode(buf, (size_t)n, m, &e) < 0) {
        diag("frame: %s", e.text);
        free(buf);
        return -1;
    }
    m->own = buf;
    return 0;
}

/* WATCH 'q'; its reply into 'rep'.  The reply's errno (0: ok); 'text'
 * gets the error. */
static int watch(struct rig *g, struct pl_watch_req *q,
                 const struct pl_allow_key *key, struct pl_watch_reply *rep,
                 char *text, size_t len)
{
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    int64_t errnum = -1;
    char *t = NULL;
    const msgpack_object *data;

    pl_watch_req_encode(&w, ++g->seq, q);
    request(g, &w, key, pl_watch_req);
    /* a push of an earlier watch may still be on its way on a loaded
     * machine (drain() stops at a quiet spell): the reply is the frame
     * after it */
    for (;;) {
        if (next(g, &m, 2000) < 0)
            return -1;
        if (m.type != PL_MSG_ENDS)
            break;
        diag("a late ENDS push before WATCH's reply: skipped");
        pl_msg_release(&m);
    }
    if (m.type == PL_MSG_REPLY
        && pl_reply_decode(m.body, &errnum, &t, &data, &e) == 0 && !errnum
        && pl_watch_reply_decode(data, rep, &e) < 0)
        errnum = -2;
    if (text)
        snprintf(text, len, "%s", t ? t : e.text);
    free(t);
    pl_msg_release(&m);
    return (int)errnum;
}

/* A queued task, stored and counted as submit.c does it (committed). */
/* A queued task of kind 'fn' (enum pl_fn). */
static struct pl_dtask *task_new_fn(struct pl_daemon *d, int fn)
{
    char *argv[] = { (char *)"true", NULL };
    struct pl_spec s = { .argv = argv, .ranks = 1, .cpr = 1, .fn = fn };
    struct pl_db_task row = { .spec = &s };
    struct pl_error e;
    uint64_t id;

    if (pl_db_task_insert(d->db, &row, PL_ST_QUEUED, pl_now(), &id, &e) < 0) {
        diag("insert: %s", e.text);
        exit(1);
    }
    char **av = pl_strv_dup(argv), **env = NULL, *cwd = NULL;
    struct pl_dtask *t = pl_sched_task_add(d->sched, id, true, 0, &av, &env,
                                           &cwd);
    t->state = PL_ST_QUEUED;
    t->fn = fn;
    pl_dtask_shape(t, &s);
    t->serial = ++d->serial;
    pl_dtask_counted(d, t);
    return t;
}

static struct pl_dtask *task_new(struct pl_daemon *d)
{
    return task_new_fn(d, PL_FN_NONE);
}

/* Every push the client gets within 'ms' of each other, their ends
 * appended to 'got' (ids and seqs); false if one is not an ENDS of
 * 'token' or its counter skips (*n: the last). */
struct got {
    uint64_t id[20000], seq[20000];
    size_t rsize[20000];         /* each end's result's bytes, 0: none */
    unsigned char r0[20000];     /* ... and its first byte */
    char reason[64][48];         /* the first 64 ends' reasons ("": none) */
    size_t n;
    uint64_t pushes, last_n, pending;
    bool bad;
};

static void drain(struct rig *g, const char *token, struct got *gt, int ms)
{
    struct pl_msg m;

    while (next(g, &m, ms) == 0) {
        struct pl_ends e;
        struct pl_error err;
        if (m.type != PL_MSG_ENDS || pl_ends_decode(m.body, &e, &err) < 0) {
            diag("unexpected frame: type %d", m.type);
            gt->bad = true;
            pl_msg_release(&m);
            continue;
        }
        if (strcmp(e.token, token)) {
            pl_ends_clear(&e); /* another watch's, on the same client */
            pl_msg_release(&m);
            continue;
        }
        if (e.n != gt->last_n + 1) {
            diag("a push out of order: n %llu after %llu",
                 (unsigned long long)e.n, (unsigned long long)gt->last_n);
            gt->bad = true;
            pl_ends_clear(&e);
            pl_msg_release(&m);
            continue;
        }
        gt->pushes++;
        gt->last_n = e.n;
        gt->pending = e.pending;
        for (uint32_t i = 0; i < e.nends && gt->n < 20000; i++) {
            gt->id[gt->n] = e.ends[i].id;
            gt->rsize[gt->n] = e.ends[i].result ? e.ends[i].result_size : 0;
            gt->r0[gt->n] = e.ends[i].result
                                ? *(const unsigned char *)e.ends[i].result
                                : 0;
            if (gt->n < 64)
                snprintf(gt->reason[gt->n], sizeof(gt->reason[0]), "%s",
                         e.ends[i].reason ? e.ends[i].reason : "");
            gt->seq[gt->n++] = e.ends[i].seq;
        }
        pl_ends_clear(&e);
        pl_msg_release(&m);
    }
}

/* Ends with reasons queued in one turn, so that the watch's queue grows
 * (realloc) under the reasons it holds: each pushed as it was (under
 * ASan, a reason read from the queue's old place is a use after free). */
static void test_queued_reasons(struct rig *g)
{
    struct pl_daemon *d = g->d;
    enum { N = 40 };
    struct pl_dtask *t[N];
    uint64_t ids[N];
    struct got *gt = calloc(1, sizeof(*gt));
    struct pl_watch_reply rep;
    char text[200], why[48];
    const char *tok = "unit-test-watch-reasons";

    for (int i = 0; i < N; i++) {
        t[i] = task_new(d);
        ids[i] = t[i]->id;
    }
    pl_daemon_flush(d);
    struct pl_watch_req q = { .attach = true, .sel = { ids, N, NULL, 0 } };
    snprintf(q.token, sizeof(q.token), "%s", tok);
    is(watch(g, &q, &g->key, &rep, text, sizeof(text)), 0,
       "a watch of %d tasks (%s)", N, text);
    for (int i = 0; i < N; i++) {
        snprintf(why, sizeof(why), "reason number %d", i);
        pl_dtask_end(d, t[i], PL_ST_FAILED, why);
    }
    pl_daemon_flush(d);
    drain(g, tok, gt, 300);
    bool same = gt->n == N && !gt->bad;
    for (size_t i = 0; same && i < gt->n; i++) {
        snprintf(why, sizeof(why), "reason number %zu", i);
        same = gt->id[i] == ids[i] && !strcmp(gt->reason[i], why);
    }
    ok(same, "%d ends queued in one turn: pushed in order, each with its "
       "own reason (%zu)", N, gt->n);
    free(gt);
}

/* The replay's turns, as the idle handle runs them. */
static void turns(struct rig *g)
{
    for (int i = 0; i < 1000 && uv_is_active((uv_handle_t *)&g->d->watch_idle);
         i++)
        pl_daemon_flush(g->d);
}

#define TOK "unit-test-watch-token-1"

static void test_commit_order(struct rig *g)
{
    struct pl_daemon *d = g->d;
    struct pl_dtask *t[3];
    struct pl_watch_reply rep;
    struct got *gt = calloc(1, sizeof(*gt));
    char text[200];
    uint64_t ids[3];

    for (int i = 0; i < 3; i++) {
        t[i] = task_new(d);
        ids[i] = t[i]->id;
    }
    pl_daemon_flush(d);
    struct pl_watch_req q = { .token = TOK, .attach = true,
                              .sel = { ids, 3, NULL, 0 } };
    is(watch(g, &q, &g->key, &rep, text, sizeof(text)), 0,
       "a watch of 3 queued tasks is made (%s)", text);
    ok(rep.pending == 3 && rep.watching == 3 && rep.n == 0
           && rep.seq == d->end_seq,
       "... pending 3, no push yet, seq = pilotd's end seq");

    /* an end in a batch whose commit fails is not pushed */
    sqlite3_exec(pl_db_handle(d->db), "PRAGMA query_only = 1", NULL, NULL,
                 NULL);
    pl_dtask_cancel(d, t[0]);
    d->store_retry_at = pl_mono(); /* no retry in this flush */
    pl_daemon_flush(d);
    ok(pl_db_failed(d->db, NULL) == EROFS, "the commit failed (EROFS)");
    drain(g, TOK, gt, 200);
    is(gt->n + gt->pushes, 0, "... and its end is not pushed");
    /* the retry stores it: pushed then */
    sqlite3_exec(pl_db_handle(d->db), "PRAGMA query_only = 0", NULL, NULL,
                 NULL);
    d->store_retry_at = 0;
    pl_daemon_flush(d);
    drain(g, TOK, gt, 200);
    ok(gt->n == 1 && gt->id[0] == ids[0] && gt->pending == 2
           && gt->seq[0] == d->end_seq && !gt->bad,
       "once the retry stored it, it is pushed (seq %llu, pending 2)",
       (unsigned long long)gt->seq[0]);
    uint64_t first = gt->seq[0];
    sqlite3_stmt *st;
    sqlite3_prepare_v2(pl_db_handle(d->db), "SELECT end_seq FROM tasks WHERE "
                       "id = ?1", -1, &st, NULL);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)ids[0]);
    ok(sqlite3_step(st) == SQLITE_ROW
           && (uint64_t)sqlite3_column_int64(st, 0) == first,
       "... the seq pushed is the one stored with its final state");
    sqlite3_finalize(st);

    /* two more, in order, then the same again from the database */
    pl_dtask_cancel(d, t[2]);
    pl_dtask_cancel(d, t[1]);
    pl_daemon_flush(d);
    drain(g, TOK, gt, 200);
    ok(gt->n == 3 && gt->id[1] == ids[2] && gt->id[2] == ids[1]
           && gt->seq[1] < gt->seq[2] && gt->pending == 0,
       "the next two ends are pushed in the order they ended, pending 0");
    struct pl_watch_req res = { .token = TOK, .attach = true,
                                .has_after = true, .after = first };
    is(watch(g, &res, &g->key, &rep, text, sizeof(text)), 0,
       "a resume after the first end's seq (%s)", text);
    ok(rep.n == gt->last_n, "... the reply says the pushes made so far");
    ok(rep.pending >= 1, "... and pending >= 1 while it replays, though every "
       "task has ended (a resuming client waits for its replay)");
    turns(g);
    size_t before = gt->n;
    drain(g, TOK, gt, 200);
    ok(gt->n == before + 2 && gt->id[before] == ids[2]
           && gt->id[before + 1] == ids[1]
           && gt->seq[before] == gt->seq[1] && !gt->bad,
       "... replays the two ends after it, in order, from the database");
    is(gt->pending, 0, "... its last push says pending 0");
    free(gt);
}

/* More ends in a batch than a live watch keeps: it reads them back from
 * the database, in order, none lost, none twice; ends meanwhile come
 * after. */
static void test_overflow(struct rig *g)
{
    struct pl_daemon *d = g->d;
    enum { N = 12000 };
    static uint64_t ids[N];
    struct pl_dtask **t = calloc(N, sizeof(*t));
    struct got *gt = calloc(1, sizeof(*gt));
    struct pl_watch_reply rep;
    char text[200];
    const char *tok = "unit-test-watch-overflow";

    for (int i = 0; i < N; i++) {
        t[i] = task_new(d);
        ids[i] = t[i]->id;
    }
    pl_daemon_flush(d);
    /* every third first, then all of them (merged: each once) */
    static uint64_t third[N / 3 + 1];
    uint32_t nt = 0;
    for (int i = N - 1; i >= 0; i -= 3)
        third[nt++] = ids[i];
    struct pl_watch_req q0 = { .sel = { third, nt, NULL, 0 } };
    snprintf(q0.token, sizeof(q0.token), "%s", tok);
    watch(g, &q0, &g->key, &rep, text, sizeof(text));
    struct pl_watch_req q = { .attach = true, .sel = { ids, N, NULL, 0 } };
    snprintf(q.token, sizeof(q.token), "%s", tok);
    is(watch(g, &q, &g->key, &rep, text, sizeof(text)), 0,
       "a watch of %d tasks (%s)", N, text);
    ok(rep.watching == N && rep.pending == N,
       "... made of a third, then all: each held once (%llu)",
       (unsigned long long)rep.watching);
    /* all end in one batch, in reverse order of their ids */
    for (int i = N - 1; i >= 1; i--)
        pl_dtask_cancel(d, t[i]);
    pl_daemon_flush(d);
    /* a live end while the replay reads: it comes after */
    pl_dtask_cancel(d, t[0]);
    turns(g);
    drain(g, tok, gt, 300);
    bool order = true, once = true;
    for (size_t i = 1; i < gt->n; i++)
        order = order && gt->seq[i] > gt->seq[i - 1];
    uint8_t *seen = calloc(N, 1);
    for (size_t i = 0; i < gt->n; i++) {
        uint64_t k = gt->id[i] - ids[0];
        if (k >= N || seen[k]++)
            once = false;
    }
    ok(gt->n == N && once && order && !gt->bad,
       "%d ends past the queue's bound: %zu pushed in %llu pushes, in seq "
       "order, each once, no push lost", N, gt->n,
       (unsigned long long)gt->pushes);
    ok(gt->n == N && gt->id[N - 1] == ids[0] && gt->pending == 0,
       "... the end that came during the replay is last; pending 0");
    free(seen);
    free(t);
    free(gt);
}

/* pl_submit() on a pilotd that is not stopping, but schedules nothing:
 * its tasks stay queued. */
static void submit_h(struct pl_daemon *d, const struct pl_req *r,
                     const struct pl_msg *m)
{
    d->stopping = false;
    pl_submit(d, r, m);
    d->stopping = true;
}

/* submit with 'watch': its tasks are in the watch before the reply; a
 * task that fails at submit is pushed; an undone submission's is not. */
static void test_submit(struct rig *g)
{
    struct pl_daemon *d = g->d;
    struct got *gt = calloc(1, sizeof(*gt));
    struct pl_watch_reply rep;
    struct pl_wbuf w;
    struct pl_msg m;
    char text[200];
    const char *tok = "unit-test-watch-submit";
    char *argv[] = { (char *)"true", NULL };

    struct pl_watch_req q = { .attach = true, .all = true };
    snprintf(q.token, sizeof(q.token), "%s", tok);
    is(watch(g, &q, &g->key, &rep, text, sizeof(text)), 0,
       "an 'all' watch (%s)", text);
    uint64_t live0 = rep.pending;

    /* a task whose dependency failed ends at submit; the second spec is
     * refused: the request is undone, and so is the first's end */
    struct pl_dtask *f = task_new(d);
    uint64_t fid = f->id;
    pl_dtask_end(d, f, PL_ST_FAILED, "exit code 1");
    pl_daemon_flush(d);
    drain(g, tok, gt, 200);
    size_t n0 = gt->n;
    struct pl_dep dep1 = { .id = fid }, dep2 = { .name = (char *)"nope" };
    struct pl_spec s[2] = {
        { .argv = argv, .ranks = 1, .cpr = 1, .after = &dep1, .nafter = 1 },
        { .argv = argv, .ranks = 1, .cpr = 1, .after = &dep2, .nafter = 1 },
    };
    pl_submit_begin_watch(&w, ++g->seq, 2, tok);
    pl_spec_encode(&w, &s[0]);
    pl_spec_encode(&w, &s[1]);
    request(g, &w, &g->key, submit_h);
    int64_t errnum = 0;
    char *t = NULL;
    const msgpack_object *data;
    struct pl_error e;
    if (next(g, &m, 2000) == 0) {
        pl_reply_decode(m.body, &errnum, &t, &data, &e);
        pl_msg_release(&m);
    }
    ok(errnum == EINVAL && t && strstr(t, "nope"),
       "a submit whose 2nd spec is refused fails whole (%s)", t ? t : "");
    free(t);
    turns(g);
    drain(g, tok, gt, 200);
    ok(gt->n == n0 && !gt->bad,
       "... the end its 1st task had at submit is not pushed (not stored)");

    /* a good one: its tasks are in an ids watch before the reply */
    const char *tok2 = "unit-test-watch-submit2";
    uint64_t one = fid;
    struct pl_watch_req q2 = { .sel = { &one, 1, NULL, 0 } };
    snprintf(q2.token, sizeof(q2.token), "%s", tok2);
    is(watch(g, &q2, &g->key, &rep, text, sizeof(text)), 0,
       "a second watch, of an ended task, not attached (%s)", text);
    pl_submit_begin_watch(&w, ++g->seq, 1, tok2);
    struct pl_spec s1 = { .argv = argv, .ranks = 1, .cpr = 1,
                          .array = true, .astart = 0, .aend = 2,
                          .astep = 1 };
    pl_spec_encode(&w, &s1);
    request(g, &w, &g->key, submit_h);
    uint64_t *sid = NULL;
    uint32_t ns = 0;
    if (next(g, &m, 2000) == 0) {
        t = NULL;
        pl_reply_decode(m.body, &errnum, &t, &data, &e);
        if (data && data->type == MSGPACK_OBJECT_MAP)
            pl_mp_uintv(data, "ids", false, 10, UINT64_MAX, &sid, &ns, &e);
        free(t);
        pl_msg_release(&m);
    }
    ok(errnum == 0 && ns == 3, "a submit of 3 with 'watch' is stored");
    struct pl_watch_req a2 = { .attach = true };
    snprintf(a2.token, sizeof(a2.token), "%s", tok2);
    memset(gt, 0, sizeof(*gt));
    is(watch(g, &a2, &g->key, &rep, text, sizeof(text)), 0, "attached");
    ok(rep.watching == 4 && rep.pending == 3,
       "... it holds the 3 new tasks, pending (watching %llu, pending %llu)",
       (unsigned long long)rep.watching, (unsigned long long)rep.pending);
    for (uint32_t i = 0; i < ns; i++)
        pl_dtask_cancel(d, pl_sched_task_get(d->sched, sid[i]));
    pl_daemon_flush(d);
    gt->last_n = rep.n;
    drain(g, tok2, gt, 200);
    ok(gt->n == 3 && gt->id[0] == sid[0] && gt->pending == 0,
       "... their ends are pushed, pending 0");
    free(sid);
    /* the all watch got them too; its pending counts the pilot's */
    (void)live0;
    free(gt);
}

/* 'make' alone: an empty watch, which a submit's 'watch' then fills
 * (what libpilot's pilot_watch_open(p, "{}") sends) */
static void test_make(struct rig *g)
{
    struct pl_daemon *d = g->d;
    struct got *gt = calloc(1, sizeof(*gt));
    struct pl_watch_reply rep;
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e;
    const msgpack_object *data;
    char text[200], *t = NULL;
    char *argv[] = { (char *)"true", NULL };
    const char *tok = "unit-test-watch-make";
    int64_t errnum = -1;
    uint64_t *sid = NULL;
    uint32_t ns = 0;

    struct pl_watch_req q = { .attach = true };
    snprintf(q.token, sizeof(q.token), "%s", tok);
    is(watch(g, &q, &g->key, &rep, text, sizeof(text)), ENOENT,
       "a WATCH of no tasks without 'make' makes nothing: ENOENT (%s)", text);
    q.make = true;
    is(watch(g, &q, &g->key, &rep, text, sizeof(text)), 0,
       "with 'make': an empty watch (%s)", text);
    ok(rep.watching == 0 && rep.pending == 0, "... of no task, none pending");
    pl_submit_begin_watch(&w, ++g->seq, 1, tok);
    struct pl_spec s1 = { .argv = argv, .ranks = 1, .cpr = 1 };
    pl_spec_encode(&w, &s1);
    request(g, &w, &g->key, submit_h);
    if (next(g, &m, 2000) == 0) {
        pl_reply_decode(m.body, &errnum, &t, &data, &e);
        if (data && data->type == MSGPACK_OBJECT_MAP)
            pl_mp_uintv(data, "ids", false, 10, UINT64_MAX, &sid, &ns, &e);
        pl_msg_release(&m);
    }
    free(t);
    ok(errnum == 0 && ns == 1, "a submit with its token is stored");
    gt->last_n = rep.n;
    if (ns == 1)
        pl_dtask_cancel(d, pl_sched_task_get(d->sched, sid[0]));
    pl_daemon_flush(d);
    drain(g, tok, gt, 200);
    ok(ns == 1 && gt->n == 1 && gt->id[0] == sid[0] && gt->pending == 0,
       "... its end is pushed to the watch made empty, pending 0");
    free(sid);
    free(gt);
}

static void test_limits(struct rig *g)
{
    struct pl_daemon *d = g->d;
    struct pl_watch_reply rep;
    struct pl_error e;
    char text[200];

    struct pl_watch_req q = { .token = TOK, .attach = true };
    is(watch(g, &q, &g->other, &rep, text, sizeof(text)), EACCES,
       "another key's watch: EACCES (%s)", text);
    struct pl_watch_req r = { .token = "no-such-watch-token", .attach = true,
                              .has_after = true };
    is(watch(g, &r, &g->key, &rep, text, sizeof(text)), ENOENT,
       "a resume of a watch pilotd does not have: ENOENT (%s)", text);
    struct pl_watch_req far = { .token = TOK, .attach = true,
                                .has_after = true,
                                .after = d->end_seq + 1000 };
    is(watch(g, &far, &g->key, &rep, text, sizeof(text)), EINVAL,
       "a resume after an end seq pilotd never gave: EINVAL (%s)", text);
    struct pl_req req = { "x", 1, 1, &g->key };
    errno = 0;
    ok(!pl_watch_for_submit(d, &req, TOK, PL_WATCH_MAX_IDS, &e)
           && errno == E2BIG,
       "a submit that would pass %d tasks in a watch: E2BIG (%s)",
       PL_WATCH_MAX_IDS, e.text);
    int made = 0, rc = 0;
    for (int i = 0; i < 70 && rc == 0; i++) {
        struct pl_watch_req k = { .all = true };
        snprintf(k.token, sizeof(k.token), "unit-test-limit-%04d", i);
        if ((rc = watch(g, &k, &g->other, &rep, text, sizeof(text))) == 0)
            made++;
    }
    ok(made == 64 && rc == EMFILE && strstr(text, "64"),
       "a key makes 64 watches, the 65th: EMFILE (%s)", text);
    struct pl_wbuf w;
    struct pl_msg m;
    pl_unwatch_encode(&w, ++g->seq, "unit-test-limit-0000");
    request(g, &w, &g->other, pl_unwatch_req);
    int64_t errnum = -1;
    char *t = NULL;
    const msgpack_object *data;
    if (next(g, &m, 2000) == 0) {
        pl_reply_decode(m.body, &errnum, &t, &data, &e);
        pl_msg_release(&m);
    }
    free(t);
    struct pl_watch_req k = { .token = "unit-test-limit-0099", .all = true };
    ok(errnum == 0 && watch(g, &k, &g->other, &rep, text, sizeof(text)) == 0,
       "after an unwatch there is room again");
}

/* A Python call's result of at most 4 KiB stored inline goes with its
 * end, live and replayed; a larger one, or one in a file, does not. */
static void test_results(struct rig *g)
{
    static const char *tok = "unit-test-watch-results-1";
    static unsigned char small[PL_END_RESULT_INLINE], big[5000];
    struct pl_daemon *d = g->d;
    struct pl_dtask *t[3];
    struct pl_watch_reply rep;
    struct got *gt = calloc(1, sizeof(*gt));
    struct pl_error e;
    char text[200];
    uint64_t ids[3];

    memset(small, 's', sizeof(small));
    memset(big, 'b', sizeof(big));
    for (int i = 0; i < 3; i++) {
        t[i] = task_new_fn(d, PL_FN_PYCALL);
        ids[i] = t[i]->id;
    }
    struct pl_db_result r[3] = {
        { .id = ids[0], .attempt = 1, .status = PL_PYR_OK,
          .size = sizeof(small), .data = small, .ndata = sizeof(small) },
        { .id = ids[1], .attempt = 1, .status = PL_PYR_OK,
          .size = sizeof(big), .data = big, .ndata = sizeof(big) },
        { .id = ids[2], .attempt = 1, .status = PL_PYR_OK, .size = 70000,
          .file = "/p/tasks/0/3.result" },
    };
    for (int i = 0; i < 3; i++)
        pl_db_result_set(d->db, &r[i], &e);
    pl_daemon_flush(d);
    struct pl_watch_req q = { .token = "", .attach = true,
                              .sel = { ids, 3, NULL, 0 } };
    snprintf(q.token, sizeof(q.token), "%s", tok);
    is(watch(g, &q, &g->key, &rep, text, sizeof(text)), 0,
       "results: a watch of 3 calls (%s)", text);
    for (int i = 0; i < 3; i++)
        pl_dtask_cancel(d, t[i]);
    pl_daemon_flush(d);
    drain(g, tok, gt, 200);
    ok(gt->n == 3 && gt->rsize[0] == PL_END_RESULT_INLINE
           && gt->r0[0] == 's' && gt->rsize[1] == 0 && gt->rsize[2] == 0
           && !gt->bad,
       "results: a result of 4 KiB goes with its end; 5,000 bytes or a "
       "file do not");
    struct pl_watch_req res = { .attach = true, .has_after = true,
                                .after = 0 };
    snprintf(res.token, sizeof(res.token), "%s", tok);
    is(watch(g, &res, &g->key, &rep, text, sizeof(text)), 0,
       "results: a resume from the start (%s)", text);
    turns(g);
    size_t before = gt->n;
    drain(g, tok, gt, 200);
    ok(gt->n == before + 3 && gt->rsize[before] == PL_END_RESULT_INLINE
           && gt->rsize[before + 1] == 0 && !gt->bad,
       "results: ... replayed from the database, the same");
    free(gt);
}

int main(void)
{
    struct rig g;

    plan(42);
    if (!t_tmpdir("watch", dir, sizeof(dir)))
        return 1;
    rig_make(&g);
    test_commit_order(&g);
    test_overflow(&g);
    test_submit(&g);
    test_make(&g);
    test_limits(&g);
    test_results(&g);
    test_queued_reasons(&g);
    rig_drop(&g);
    uv_run(&g.loop, UV_RUN_DEFAULT);
    is(uv_loop_close(&g.loop), 0, "every handle closed");
    t_rmtree(dir);
    return tap_failed ? 1 : 0;
}
