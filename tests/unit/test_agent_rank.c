/* tests/unit/test_agent_rank.c - ranks of one task on one agent: identity,
 * environment, shared output, KILL of all ranks or one, bad entries, and
 * a real torch.distributed all_reduce over env://
 *
 * A real pl_agent talks to a fake pilotd (a ROUTER over ipc:// in its own
 * ZeroMQ context, watched on the agent's loop) and spawns real processes.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zmq.h>

#include "agent/agent.h"
#include "agent/resources.h"
#include "proto/keys.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "proto/zsock.h"
#include "proto/zwatch.h"
#include "tests/mpw.h"
#include "tests/unit/helpers.h"
#include "tests/unit/tap.h"

#define EV_MAX 256
#define TORCH_WAIT_MS 90000 /* two torch imports on a busy 2-CPU box */
#define WAIT_MS 10000

struct ev {
    uint64_t id;
    uint64_t attempt;
    uint64_t rank;
    int has_rank;
    char state[16];
    int64_t exit_code;
    char error[160];
};

struct fixture {
    struct pl_agent *agent;
    uv_loop_t *loop;
    uv_timer_t timer;      /* bounds each wait */
    int timed_out;
    void *zctx;
    void *router;
    struct pl_zwatch *zw;
    char rid[256];         /* the agent's routing id */
    size_t ridlen;
    int nregister;
    int npull;
    struct ev ev[EV_MAX];
    int nev;
    uint64_t seq;
    uint64_t cores[2];
    /* the last REGISTER: its seq, what it says ended, its last RUN */
    uint64_t reg_seq;
    uint64_t reg_ended[EV_MAX];
    int nreg_ended;
    uint64_t reg_last_run;
    uint64_t ev_seq;       /* the last EVENTS message */
    char dir[64];
    char log[128];
};

/* One RUN entry; negative numbers and NULL pointers leave a field out. */
struct entry {
    uint64_t id;
    int rank;
    int size;
    int local_rank;
    int local_size;
    int node_rank;
    const char *const *nodelist;
    const char *comm;
    const char *master_addr;
    int master_port;
    const char *const *argv;
    uint64_t core;
    const char *out;       /* file names in the test's directory */
    const char *err;
};

static void got_events(struct fixture *f, const msgpack_object *body)
{
    const msgpack_object *evs;
    struct pl_error e;

    if (pl_mp_array(body, "events", true, 100000, &evs, &e) < 0) {
        diag("bad events: %s", e.text);
        return;
    }
    for (uint32_t i = 0; i < evs->via.array.size && f->nev < EV_MAX; i++) {
        const msgpack_object *o = &evs->via.array.ptr[i];
        struct ev *v = &f->ev[f->nev++];
        char *state = NULL;
        char *error = NULL;

        memset(v, 0, sizeof(*v));
        v->exit_code = -1;
        if (pl_mp_uint(o, "id", true, UINT64_MAX, &v->id, &e) < 0
            || pl_mp_uint(o, "attempt", true, UINT64_MAX, &v->attempt, &e)
                   < 0
            || (v->has_rank = pl_mp_uint(o, "rank", false, UINT64_MAX,
                                         &v->rank, &e)) < 0
            || pl_mp_str(o, "state", true, 15, &state, &e) < 0
            || pl_mp_int(o, "exit_code", false, &v->exit_code, &e) < 0
            || pl_mp_str(o, "error", false, 1024, &error, &e) < 0)
            diag("bad event: %s", e.text);
        snprintf(v->state, sizeof(v->state), "%s", state ? state : "");
        snprintf(v->error, sizeof(v->error), "%s", error ? error : "");
        free(state);
        free(error);
    }
}

static void router_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct fixture *f = arg;

    (void)zw;
    (void)revents;
    for (int i = 0; i < 64; i++) {
        zmq_msg_t id, body;
        struct pl_msg m;
        struct pl_error e;

        zmq_msg_init(&id);
        zmq_msg_init(&body);
        if (pl_zsock_recv(f->router, &id, &body) < 0) {
            zmq_msg_close(&id);
            zmq_msg_close(&body);
            break;
        }
        if (zmq_msg_size(&id) <= sizeof(f->rid)) {
            f->ridlen = zmq_msg_size(&id);
            memcpy(f->rid, zmq_msg_data(&id), f->ridlen);
        }
        if (pl_msg_decode(zmq_msg_data(&body), zmq_msg_size(&body), &m, &e)
            == 0) {
            if (m.type == PL_MSG_REGISTER) {
                const msgpack_object *arr = NULL;
                f->nregister++;
                f->reg_seq = m.seq;
                f->nreg_ended = 0;
                f->reg_last_run = 0;
                (void)pl_mp_uint(m.body, "last_run", false, UINT64_MAX,
                                 &f->reg_last_run, &e);
                if (pl_mp_array(m.body, "ended", false, EV_MAX, &arr, &e)
                    == 1)
                    for (uint32_t j = 0; j < arr->via.array.size; j++)
                        (void)pl_mp_uint(&arr->via.array.ptr[j], "id", true,
                                         UINT64_MAX,
                                         &f->reg_ended[f->nreg_ended++],
                                         &e);
            }
            else if (m.type == PL_MSG_PULL)
                f->npull++;
            else if (m.type == PL_MSG_EVENTS) {
                f->ev_seq = m.seq;
                got_events(f, m.body);
            }
            pl_msg_release(&m);
        }
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
}

static void timer_cb(uv_timer_t *h)
{
    struct fixture *f = h->data;

    f->timed_out = 1;
}

/* Run the loop until pred(f, arg) holds or 'ms' pass; returns pred. */
static int wait_for(struct fixture *f, int (*pred)(struct fixture *, void *),
                    void *arg, uint64_t ms)
{
    f->timed_out = 0;
    uv_timer_start(&f->timer, timer_cb, ms, 0);
    while (!pred(f, arg) && !f->timed_out)
        uv_run(f->loop, UV_RUN_ONCE);
    uv_timer_stop(&f->timer);
    return pred(f, arg);
}

/* The events of task 'id' with 'state' ("" any), and the rank mask. */
static int count(struct fixture *f, uint64_t id, const char *state,
                 unsigned *ranks)
{
    int n = 0;

    if (ranks)
        *ranks = 0;
    for (int i = 0; i < f->nev; i++) {
        if (f->ev[i].id != id || (*state && strcmp(f->ev[i].state, state)))
            continue;
        n++;
        if (ranks && f->ev[i].rank < 32)
            *ranks |= 1u << f->ev[i].rank;
    }
    return n;
}

static const struct ev *find_ev(struct fixture *f, uint64_t id,
                                const char *state)
{
    for (int i = 0; i < f->nev; i++)
        if (f->ev[i].id == id && !strcmp(f->ev[i].state, state))
            return &f->ev[i];
    return NULL;
}

struct want {
    uint64_t id;
    int n;          /* events that ended a rank (not "running") */
};

static int ended(struct fixture *f, void *arg)
{
    struct want *w = arg;

    return count(f, w->id, "", NULL) - count(f, w->id, "running", NULL)
           >= w->n;
}

static int running(struct fixture *f, void *arg)
{
    struct want *w = arg;

    return count(f, w->id, "running", NULL) >= w->n;
}

static int registered(struct fixture *f, void *arg)
{
    (void)arg;
    return f->nregister > 0;
}

static int pulled(struct fixture *f, void *arg)
{
    (void)arg;
    return f->npull > 0;
}

static void send_wbuf(struct fixture *f, struct pl_wbuf *w)
{
    if (pl_zsock_send(f->router, f->rid, f->ridlen, w->sb.data, w->sb.size)
        < 0)
        diag("send: %s", zmq_strerror(errno));
    pl_wbuf_destroy(w);
}

static void pack_entry(struct fixture *f, msgpack_packer *pk,
                       const struct entry *e)
{
    char out[256];
    char err[256];
    uint32_t n = 6 + (e->rank >= 0) + (e->size >= 0) + (e->local_rank >= 0)
                 + (e->local_size >= 0) + (e->node_rank >= 0)
                 + (e->nodelist != NULL) + (e->comm != NULL)
                 + (e->master_addr != NULL) + (e->master_port >= 0);

    snprintf(out, sizeof(out), "%s/%s", f->dir, e->out);
    snprintf(err, sizeof(err), "%s/%s", f->dir, e->err ? e->err : e->out);
    msgpack_pack_map(pk, n);
    raw_kuint(pk, "id", e->id);
    raw_kuint(pk, "attempt", 1);
    raw_kstrv(pk, "argv", (char *const *)e->argv);
    raw_kuintv(pk, "cores", &e->core, 1);
    raw_kstr(pk, "stdout", out);
    raw_kstr(pk, "stderr", err);
    if (e->rank >= 0)
        raw_kuint(pk, "rank", (uint64_t)e->rank);
    if (e->size >= 0)
        raw_kuint(pk, "size", (uint64_t)e->size);
    if (e->local_rank >= 0)
        raw_kuint(pk, "local_rank", (uint64_t)e->local_rank);
    if (e->local_size >= 0)
        raw_kuint(pk, "local_size", (uint64_t)e->local_size);
    if (e->node_rank >= 0)
        raw_kuint(pk, "node_rank", (uint64_t)e->node_rank);
    if (e->nodelist)
        raw_kstrv(pk, "nodelist", (char *const *)e->nodelist);
    if (e->comm)
        raw_kstr(pk, "comm", e->comm);
    if (e->master_addr)
        raw_kstr(pk, "master_addr", e->master_addr);
    if (e->master_port >= 0)
        raw_kuint(pk, "master_port", (uint64_t)e->master_port);
}

static void send_run(struct fixture *f, const struct entry *e, int n)
{
    struct pl_wbuf w;

    raw_wbuf_init(&w, PL_MSG_RUN, f->seq++, 1);
    raw_key(&w.pk, "tasks");
    msgpack_pack_array(&w.pk, (uint32_t)n);
    for (int i = 0; i < n; i++)
        pack_entry(f, &w.pk, &e[i]);
    send_wbuf(f, &w);
}

static void send_kill(struct fixture *f, uint64_t id, int rank)
{
    struct pl_wbuf w;

    raw_wbuf_init(&w, PL_MSG_KILL, f->seq++, rank >= 0 ? 4 : 3);
    raw_kuint(&w.pk, "id", id);
    raw_kuint(&w.pk, "attempt", 1);
    if (rank >= 0)
        raw_kuint(&w.pk, "rank", (uint64_t)rank);
    raw_kdouble(&w.pk, "grace", 0);
    send_wbuf(f, &w);
}

static char *slurp(struct fixture *f, const char *name)
{
    static char buf[8192];
    char p[256];
    FILE *fp;
    size_t n;

    snprintf(p, sizeof(p), "%s/%s", f->dir, name);
    if (!(fp = fopen(p, "r")))
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

static const char *const show_env[] = {
    "sh", "-c",
    "echo \"r=$PILOT_RANK s=$PILOT_SIZE lr=$PILOT_LOCAL_RANK "
    "ls=$PILOT_LOCAL_SIZE nr=$PILOT_NODE_RANK nl=$PILOT_NODELIST "
    "c=$PILOT_COMM node=$PILOT_NODE ma=${MASTER_ADDR-unset} "
    "mp=${MASTER_PORT-unset} ws=${WORLD_SIZE-unset} rk=${RANK-unset} "
    "lrk=${LOCAL_RANK-unset} lws=${LOCAL_WORLD_SIZE-unset} "
    "gr=${GROUP_RANK-unset} "
    "sg=${SLURM_STEP_GPUS-unset} go=${GPU_DEVICE_ORDINAL-unset}\"",
    NULL,
};

static int registered_again(struct fixture *f, void *arg)
{
    return f->nregister > *(int *)arg;
}

/* REREGISTER, as a restarted pilotd sends, and the REGISTER it gets;
 * then WELCOME (answering it, from 'instance'). */
static int reregister(struct fixture *f, const char *instance)
{
    struct pl_wbuf w;
    int before = f->nregister;

    raw_wbuf_init(&w, PL_MSG_REREGISTER, f->seq++, 0);
    send_wbuf(f, &w);
    int got = wait_for(f, registered_again, &before, WAIT_MS);
    raw_wbuf_init(&w, PL_MSG_WELCOME, f->reg_seq, 3);
    raw_kstr(&w.pk, "node", "n1");
    raw_kdouble(&w.pk, "heartbeat", 60);
    raw_kstr(&w.pk, "instance", instance);
    send_wbuf(f, &w);
    return got;
}

static bool reg_has(struct fixture *f, uint64_t id)
{
    for (int i = 0; i < f->nreg_ended; i++)
        if (f->reg_ended[i] == id)
            return true;
    return false;
}

/* An end stays with the agent until pilotd commits it: an ACK of its
 * EVENTS message, or the WELCOME to a REGISTER that carried it. */
static void test_unacked(struct fixture *f)
{
    static const char *const argv_true[] = { "true", NULL };
    struct entry e = { .id = 50, .rank = -1, .size = -1, .local_rank = -1,
                       .local_size = -1, .node_rank = -1, .master_port = -1,
                       .argv = argv_true, .core = f->cores[0],
                       .out = "u50.out" };
    struct want w = { .id = 50, .n = 1 };

    send_run(f, &e, 1);
    uint64_t run_seq = f->seq - 1;
    ok(wait_for(f, ended, &w, WAIT_MS), "unacked: task 50 ended");
    ok(reregister(f, "test") && reg_has(f, 50)
           && f->reg_last_run == run_seq,
       "unacked: REREGISTER gets a REGISTER with task 50 in 'ended' and "
       "last_run %llu", (unsigned long long)run_seq);
    ok(reregister(f, "test") && !reg_has(f, 50),
       "unacked: the WELCOME to it committed task 50: the next has not");

    e.id = w.id = 51;
    send_run(f, &e, 1);
    ok(wait_for(f, ended, &w, WAIT_MS), "unacked: task 51 ended");
    struct pl_wbuf b;
    raw_wbuf_init(&b, PL_MSG_ACK, f->seq++, 1);
    raw_kuint(&b.pk, "seq", f->ev_seq);
    send_wbuf(f, &b);
    e.id = w.id = 52;
    send_run(f, &e, 1);
    ok(wait_for(f, ended, &w, WAIT_MS), "unacked: task 52 ended");
    ok(reregister(f, "another pilotd") && !reg_has(f, 51) && reg_has(f, 52),
       "unacked: ACK of its EVENTS forgot task 51; 52, not acked, is kept");
    ok(reregister(f, "another pilotd") && f->reg_last_run == 0,
       "unacked: a new pilotd's WELCOME restarts last_run");
}

static void test_two_ranks(struct fixture *f)
{
    static const char *const nodes[] = { "n1", "n2", NULL };
    struct entry e[2];
    struct want w = { .id = 1, .n = 2 };
    unsigned ranks;
    char *out;
    FILE *fp;
    char p[256];

    /* what an earlier attempt left: the ranks write files of their own */
    snprintf(p, sizeof(p), "%s/t1.out", f->dir);
    if ((fp = fopen(p, "w"))) {
        fputs("old\n", fp);
        fclose(fp);
    }
    for (int i = 0; i < 2; i++) {
        e[i] = (struct entry){
            .id = 1, .rank = 2 + i, .size = 4, .local_rank = i,
            .local_size = 2, .node_rank = 1, .nodelist = nodes,
            .comm = "torch", .master_addr = "10.0.0.1", .master_port = 29500,
            .argv = show_env, .core = f->cores[i], .out = "t1.out",
        };
    }
    send_run(f, e, 2);
    ok(wait_for(f, ended, &w, WAIT_MS), "two ranks: both ended");
    is(count(f, 1, "running", &ranks), 2, "two ranks: two running events");
    is(ranks, 0xc, "two ranks: running events carry ranks 2 and 3");
    is(count(f, 1, "done", &ranks), 2, "two ranks: both done");
    is(ranks, 0xc, "two ranks: done events carry ranks 2 and 3");
    /* each rank its own file (issue 16: ranks sharing one interleaved
     * inside lines); what was there is left alone */
    out = slurp(f, "t1.out");
    ok(out && !strcmp(out, "old\n"),
       "two ranks: the task's own file untouched");
    out = slurp(f, "t1.r2.out");
    ok(out && !strcmp(out, "r=2 s=4 lr=0 ls=2 nr=1 nl=n1,n2 c=torch node=n1 "
                           "ma=10.0.0.1 mp=29500 ws=4 rk=2 lrk=0 lws=2 gr=1 "
                           "sg= go=\n"),
       "two ranks: rank 2 sees its env, in t1.r2.out");
    if (out && !strstr(out, "rk=2 "))
        diag("t1.r2.out: %s", out);
    out = slurp(f, "t1.r3.out");
    ok(out && !strcmp(out, "r=3 s=4 lr=1 ls=2 nr=1 nl=n1,n2 c=torch node=n1 "
                           "ma=10.0.0.1 mp=29500 ws=4 rk=3 lrk=1 lws=2 gr=1 "
                           "sg= go=\n"),
       "two ranks: rank 3 sees its env, in t1.r3.out");
    ok(slurp(f, "t1.r2.err") == NULL && slurp(f, "t1.r3.err") == NULL,
       "two ranks: stderr into the same file as stdout, as the entry says");
}

static void test_defaults(struct fixture *f)
{
    struct entry e = {
        .id = 2, .rank = -1, .size = -1, .local_rank = -1,
        .local_size = -1, .node_rank = -1, .master_port = -1,
        .argv = show_env, .core = f->cores[0], .out = "t2.out",
    };
    struct want w = { .id = 2, .n = 1 };
    const struct ev *v;

    send_run(f, &e, 1);
    ok(wait_for(f, ended, &w, WAIT_MS), "defaults: ended");
    v = find_ev(f, 2, "done");
    ok(v && v->has_rank && v->rank == 0, "defaults: event has rank 0");
    v = find_ev(f, 2, "running");
    ok(v && v->has_rank && v->rank == 0, "defaults: running has rank 0");
    is_str(slurp(f, "t2.out"),
           "r=0 s=1 lr=0 ls=1 nr=0 nl=n1 c=none node=n1 ma=unset "
           "mp=unset ws=unset rk=unset lrk=unset lws=unset gr=unset "
           "sg= go=\n",
           "defaults: env of a single rank");
}

/* An output file that is there before the task (left by someone, or a
 * link planted to read or overwrite another file): the task fails and
 * says why, and nothing is written into it or through it. */
static void test_leftover(struct fixture *f)
{
    static const char *const echo[] = { "echo", "task output", NULL };
    struct entry e[2] = {
        { .id = 5, .rank = -1, .size = -1, .local_rank = -1,
          .local_size = -1, .node_rank = -1, .master_port = -1,
          .argv = echo, .core = f->cores[0], .out = "t5.out" },
    };
    const char *why[2] = { "t5.out exists already (uid ",
                           "t6.out is a symbolic link: not followed" };
    char p[256], target[256];
    FILE *fp;

    e[1] = e[0];
    e[1].id = 6;
    e[1].core = f->cores[1];
    e[1].out = "t6.out";
    snprintf(p, sizeof(p), "%s/t5.out", f->dir);
    if ((fp = fopen(p, "w"))) {
        fputs("someone's\n", fp);
        fclose(fp);
    }
    snprintf(target, sizeof(target), "%s/target", f->dir);
    if ((fp = fopen(target, "w"))) {
        fputs("target\n", fp);
        fclose(fp);
    }
    snprintf(p, sizeof(p), "%s/t6.out", f->dir);
    if (symlink(target, p) < 0)
        diag("symlink %s: %s", p, strerror(errno));
    send_run(f, e, 2);
    for (int i = 0; i < 2; i++) {
        struct want w = { .id = e[i].id, .n = 1 };
        int done = wait_for(f, ended, &w, WAIT_MS);
        const struct ev *v = find_ev(f, w.id, "failed");
        ok(done && v && strstr(v->error, why[i]),
           "leftover: task %d fails, naming what is there (%s)", (int)w.id,
           v ? v->error : "no event");
    }
    is_str(slurp(f, "t5.out"), "someone's\n",
           "leftover: the file that was there is not written into");
    is_str(slurp(f, "target"), "target\n",
           "leftover: nor is the target of the link");
}

static void test_kill(struct fixture *f)
{
    static const char *const sleep30[] = { "sleep", "30", NULL };
    struct entry e[3];
    struct want w = { .id = 3, .n = 2 };
    const struct ev *v;
    unsigned ranks;

    for (int i = 0; i < 3; i++)
        e[i] = (struct entry){
            .id = 3, .rank = i == 2 ? 1 : 0, .size = 2,
            .local_rank = i == 2 ? 1 : 0, .local_size = 2, .node_rank = -1,
            .comm = "none", .master_port = -1, .argv = sleep30,
            .core = f->cores[i == 2 ? 1 : 0], .out = "t3.out",
        };
    send_run(f, e, 3); /* rank 0, rank 0 again (ignored), rank 1 */
    ok(wait_for(f, running, &w, WAIT_MS), "kill: both ranks running");
    is(count(f, 3, "running", &ranks), 2, "kill: duplicate rank ignored");
    is(count(f, 3, "failed", NULL), 0, "kill: duplicate not failed");

    send_kill(f, 3, 1);
    w.n = 1;
    ok(wait_for(f, ended, &w, WAIT_MS), "kill rank 1: one ended");
    v = find_ev(f, 3, "canceled");
    ok(v && v->rank == 1, "kill rank 1: rank 1 canceled");
    w.n = 2;
    ok(!wait_for(f, ended, &w, 300), "kill rank 1: rank 0 still runs");

    send_kill(f, 3, -1);
    ok(wait_for(f, ended, &w, WAIT_MS), "kill: the other rank ended");
    is(count(f, 3, "canceled", &ranks), 2, "kill: both canceled");
    is(ranks, 3, "kill: ranks 0 and 1 canceled");

    /* KILL without rank: every rank of the attempt */
    for (int i = 0; i < 2; i++)
        e[i] = (struct entry){
            .id = 4, .rank = i, .size = 2, .local_rank = i, .local_size = 2,
            .node_rank = -1, .master_port = -1, .argv = sleep30,
            .core = f->cores[i], .out = "t4.out",
        };
    send_run(f, e, 2);
    w.id = 4;
    ok(wait_for(f, running, &w, WAIT_MS), "kill all: both ranks running");
    send_kill(f, 4, -1);
    ok(wait_for(f, ended, &w, WAIT_MS), "kill all: both ended");
    is(count(f, 4, "canceled", &ranks), 2, "kill all: both canceled");
    is(ranks, 3, "kill all: ranks 0 and 1");
}

static void test_bad(struct fixture *f)
{
    static const char *const tru[] = { "true", NULL };
    static const char *const one[] = { "n1", NULL };
    static const char *const bad_names[] = { "n1", "", NULL };
    struct entry base = {
        .rank = -1, .size = -1, .local_rank = -1, .local_size = -1,
        .node_rank = -1, .master_port = -1, .argv = tru,
        .core = f->cores[0], .out = "bad.out",
    };
    struct entry e[9];
    struct {
        const char *text; /* in the error */
        const char *name;
    } want[9] = {
        { "want rank < size", "rank >= size" },
        { "master_addr' and 'master_port", "torch without master_port" },
        { "unknown comm 'nccl'", "unknown comm" },
        { "node_rank", "node_rank >= len(nodelist)" },
        { "node_rank", "node_rank 1 without nodelist" },
        { "local_rank < local_size", "local_rank >= local_size" },
        { "size", "size 0" },
        { "master_port", "master_port 0" },
        { "nodelist", "empty node name" },
    };

    for (int i = 0; i < 9; i++) {
        e[i] = base;
        e[i].id = 10 + (uint64_t)i;
    }
    e[0].rank = 2, e[0].size = 2; /* its event carries that rank */
    e[1].comm = "torch", e[1].master_addr = "127.0.0.1";
    e[2].comm = "nccl";
    e[3].nodelist = one, e[3].node_rank = 1;
    e[4].node_rank = 1;
    e[5].local_rank = 1, e[5].local_size = 1;
    e[6].size = 0, e[6].rank = 0;
    e[7].comm = "torch", e[7].master_addr = "127.0.0.1", e[7].master_port = 0;
    e[8].nodelist = bad_names;
    send_run(f, e, 9);
    for (int i = 0; i < 9; i++) {
        struct want w = { .id = 10 + (uint64_t)i, .n = 1 };
        int done = wait_for(f, ended, &w, WAIT_MS);
        const struct ev *v = find_ev(f, w.id, "failed");
        ok(done && v && strstr(v->error, want[i].text),
           "bad entry: %s fails (%s)", want[i].name,
           v ? v->error : "no event");
    }
    const struct ev *v = find_ev(f, 10, "failed");
    ok(v && v->rank == 2, "bad entry: event carries the entry's rank");
}

/* A free TCP port on 127.0.0.1 (bind port 0, read it back). */
static int free_port(void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = -1;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0
        && getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static void test_torch(struct fixture *f)
{
    static const char *const py[] = {
        "/usr/bin/python3", "-c",
        "import torch, torch.distributed as d; "
        "d.init_process_group(\"gloo\", init_method=\"env://\"); "
        "t=torch.tensor([d.get_rank()+1.0]); d.all_reduce(t); "
        "print(int(t.item()))",
        NULL,
    };
    /* one path for the task, as pilotd sends: a file each rank
     * (pl_path_rank_log()) */
    static const char *const outs[] = { "torch.r0.out", "torch.r1.out" };
    static const char *const errs[] = { "torch.r0.err", "torch.r1.err" };
    struct entry e[2];
    struct want w = { .id = 20, .n = 2 };
    unsigned ranks;
    int port = free_port();

    ok(port > 0, "torch: free port %d", port);
    for (int i = 0; i < 2; i++)
        e[i] = (struct entry){
            .id = 20, .rank = i, .size = 2, .local_rank = i,
            .local_size = 2, .node_rank = 0, .comm = "torch",
            .master_addr = "127.0.0.1", .master_port = port, .argv = py,
            .core = f->cores[i], .out = "torch.out", .err = "torch.err",
        };
    send_run(f, e, 2);
    ok(wait_for(f, ended, &w, TORCH_WAIT_MS), "torch: both ranks ended");
    is(count(f, 20, "done", &ranks), 2, "torch: both ranks done");
    for (int i = 0; i < 2; i++) {
        is_str(slurp(f, outs[i]), "3\n", "torch: rank %d all_reduce = 3", i);
        const char *err = slurp(f, errs[i]);
        if (err && *err)
            diag("rank %d stderr: %.2000s", i, err);
    }
    if (count(f, 20, "done", NULL) < 2)
        send_kill(f, 20, -1);
}

int main(void)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct pl_resources_spec rs = { .node = "n1" };
    struct pl_resources *res;
    struct pl_error err;
    const uint64_t *cores;
    uint32_t ncores;
    char ep[128];
    int lingering = 0;

    plan(56);
    if (!t_tmpdir("agent-rank", f->dir, sizeof(f->dir)))
        abort();
    snprintf(f->log, sizeof(f->log), "%s/agent.log", f->dir);
    pl_log_init("pilot-agent", "n1", f->log);
    pl_log_level = LOG_DEBUG;
    if (!(res = pl_resources_new(&rs, &err)))
        abort();
    cores = pl_resources_cores(res, &ncores);
    ok(ncores >= 2, "at least 2 cores to run 2 ranks (%u)", ncores);
    f->cores[0] = cores[0];
    f->cores[1] = cores[ncores > 1 ? 1 : 0];

    /* CURVE as in a pilot, without the ZAP handler (pilotd's) */
    char kdir[PL_PATH_MAX], path[PL_PATH_MAX + 16];
    struct pl_keys_peer keys;
    struct pl_keypair server;
    snprintf(kdir, sizeof(kdir), "%s/keys", f->dir);
    snprintf(path, sizeof(path), "%s/server.key", kdir);
    if (pl_keys_create(kdir, &err) < 0
        || pl_keys_read_pair(path, &server, &err) < 0
        || pl_keys_load_peer(kdir, "agent", &keys, &err) < 0) {
        diag("keys: %s", err.text);
        abort();
    }
    f->zctx = zmq_ctx_new();
    if (!(f->router = pl_zsock_new(f->zctx, ZMQ_ROUTER, &err))
        || pl_zsock_curve_server(f->router, &server, "agents", &err) < 0)
        abort();
    snprintf(ep, sizeof(ep), "ipc://%s/agents", f->dir);
    if (zmq_bind(f->router, ep) < 0)
        abort();
    if (!(f->agent = pl_agent_new(ep, &keys, &res, &err))) {
        diag("pl_agent_new: %s", err.text);
        abort();
    }
    f->loop = pl_agent_loop(f->agent);
    uv_timer_init(f->loop, &f->timer);
    f->timer.data = f;
    f->zw = pl_zwatch_new(f->loop, f->router, ZMQ_POLLIN, router_cb, f);
    if (!f->zw || pl_zwatch_start(f->zw) < 0
        || pl_agent_start(f->agent, &err) < 0)
        abort();

    ok(wait_for(f, registered, NULL, WAIT_MS), "agent registered");
    struct pl_wbuf w;
    raw_wbuf_init(&w, PL_MSG_WELCOME, f->reg_seq, 3);
    raw_kstr(&w.pk, "node", "n1");
    raw_kdouble(&w.pk, "heartbeat", 60);
    raw_kstr(&w.pk, "instance", "test");
    send_wbuf(f, &w);
    ok(wait_for(f, pulled, NULL, WAIT_MS), "agent pulled");

    test_two_ranks(f);
    test_unacked(f);
    test_defaults(f);
    test_leftover(f);
    test_kill(f);
    test_bad(f);
    test_torch(f);

    pl_agent_shutdown(f->agent, "test over");
    uv_run(f->loop, UV_RUN_DEFAULT); /* until the agent calls uv_stop() */
    pl_zwatch_free(f->zw);
    uv_close((uv_handle_t *)&f->timer, NULL);
    pl_agent_free(f->agent);
    zmq_close(f->router);
    zmq_ctx_term(f->zctx);

    /* pl_agent_free() closes the loop and logs any handle left open */
    FILE *fp = fopen(f->log, "r");
    char line[1024];
    while (fp && fgets(line, sizeof(line), fp))
        if (strstr(line, "uv_loop_close") || strstr(line, "still open"))
            lingering++;
    if (fp)
        fclose(fp);
    ok(fp && lingering == 0, "uv_loop_close: every handle closed");
    if (tap_failed)
        diag("kept %s (agent.log)", f->dir);
    else
        t_rmtree(f->dir);
    free(f);
    return done_testing();
}
