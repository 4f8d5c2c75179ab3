/* tests/unit/test_agent_run.c - from a RUN entry to a process (agent/run.c):
 * the environment, refusals (another attempt, busy or foreign cores,
 * shutting down), a failed spawn, an MPI entry's launcher, the REGISTER
 * of what runs, KILL of another attempt, and bench mode
 *
 * A real pl_agent talks to a fake pilotd (a ROUTER over ipc:// in its own
 * ZeroMQ context, watched on the agent's loop) that speaks through
 * proto/'s encoders and decoders, and spawns real processes.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.h>

#include "agent/agent.h"
#include "agent/resources.h"
#include "proto/agentmsg.h"
#include "proto/keys.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "proto/run.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/zsock.h"
#include "proto/zwatch.h"
#include "tests/unit/helpers.h"
#include "tests/unit/tap.h"

#define EV_MAX 128
#define WAIT_MS 10000

static char true_s[] = "true";
static char *argv_true[] = { true_s, NULL };

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
    uint64_t seq;
    int nregister;
    struct pl_register reg; /* the last REGISTER */
    uint64_t reg_seq;
    int npull;
    uint64_t got;          /* the last GOT */
    struct pl_event ev[EV_MAX];
    int nev;
    uint64_t cores[2];
    char dir[64];
    char log[128];
};

static void router_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct fixture *f = arg;

    (void)zw;
    (void)revents;
    for (int i = 0; i < 64; i++) {
        zmq_msg_t id, body;
        struct pl_msg m;
        struct pl_error e;
        const msgpack_object *evs;

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
                pl_register_clear(&f->reg);
                if (pl_register_decode(m.body, &f->reg, &e) < 0)
                    diag("bad register: %s", e.text);
                f->nregister++;
                f->reg_seq = m.seq;
            }
            else if (m.type == PL_MSG_PULL)
                f->npull++;
            else if (m.type == PL_MSG_GOT) {
                uint64_t got;
                if (pl_got_decode(m.body, &got, &e) < 0)
                    diag("bad got: %s", e.text);
                else
                    f->got = got;
            }
            else if (m.type == PL_MSG_EVENTS
                     && pl_events_decode(m.body, &evs, &e) == 0) {
                for (uint32_t j = 0; j < evs->via.array.size; j++) {
                    if (f->nev == EV_MAX)
                        break;
                    if (pl_event_decode(&evs->via.array.ptr[j],
                                        &f->ev[f->nev], &e) < 0)
                        diag("bad event: %s", e.text);
                    else
                        f->nev++;
                }
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

/* The first event of task 'id', attempt 'attempt', in 'state'. */
static const struct pl_event *find_ev(struct fixture *f, uint64_t id,
                                      uint64_t attempt, int state)
{
    for (int i = 0; i < f->nev; i++)
        if (f->ev[i].id == id && f->ev[i].attempt == attempt
            && f->ev[i].state == state)
            return &f->ev[i];
    return NULL;
}

/* What wait_for() waits for: an event of (id, attempt) in 'state', or
 * (state 0) any final one. */
struct want {
    uint64_t id;
    uint64_t attempt;
    int state;
};

static int has_ev(struct fixture *f, void *arg)
{
    struct want *w = arg;

    for (int i = 0; i < f->nev; i++)
        if (f->ev[i].id == w->id && f->ev[i].attempt == w->attempt
            && (w->state ? f->ev[i].state == w->state
                         : pl_state_final(f->ev[i].state)))
            return 1;
    return 0;
}

static int registered(struct fixture *f, void *arg)
{
    return f->nregister > *(int *)arg;
}

static int got_seq(struct fixture *f, void *arg)
{
    return f->got >= *(uint64_t *)arg;
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

static void send_welcome(struct fixture *f)
{
    char node[] = "n1", instance[] = "test";
    struct pl_welcome wl = { .node = node, .instance = instance,
                             .heartbeat = 60 };
    struct pl_wbuf w;

    pl_welcome_encode(&w, f->reg_seq, &wl);
    send_wbuf(f, &w);
}

/* An entry of task 'id' (attempt 'attempt', one rank on 'core') running
 * 'argv', its output to DIR/tID.out; every pointer borrowed. */
static struct pl_run entry(struct fixture *f, uint64_t id, uint64_t attempt,
                           uint64_t *core, char **argv)
{
    static char out[8][256];
    static int n;
    char *o = out[n++ % 8];

    snprintf(o, sizeof(out[0]), "%s/t%llu.out", f->dir,
             (unsigned long long)id);
    return (struct pl_run){ .id = id, .attempt = attempt, .size = 1,
                            .local_size = 1, .argv = argv, .cores = core,
                            .ncores = 1, .out = o, .err = o };
}

static void send_run(struct fixture *f, const struct pl_run *r, uint32_t n)
{
    struct pl_wbuf w;

    pl_run_msg_begin(&w, f->seq++, n);
    for (uint32_t i = 0; i < n; i++)
        pl_run_encode(&w, &r[i]);
    send_wbuf(f, &w);
}

static void send_kill(struct fixture *f, uint64_t id, uint64_t attempt)
{
    struct pl_kill k = { .id = id, .attempt = attempt, .grace = 0 };
    struct pl_wbuf w;

    pl_kill_encode(&w, f->seq++, &k);
    send_wbuf(f, &w);
}

static char *slurp(const char *path)
{
    static char buf[8192];
    FILE *fp;
    size_t n;

    if (!(fp = fopen(path, "r")))
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

static char *slurp_task(struct fixture *f, uint64_t id)
{
    char p[256];

    snprintf(p, sizeof(p), "%s/t%llu.out", f->dir, (unsigned long long)id);
    return slurp(p);
}

/* A fake pilotd and an agent ('bench': in bench mode), welcomed and
 * pulled.  Returns 0, or -1 after a diag line. */
static int fixture_up(struct fixture *f, bool bench)
{
    struct pl_resources_spec rs = { .node = "n1" };
    struct pl_resources *res;
    struct pl_error err;
    const uint64_t *cores;
    uint32_t ncores;
    char ep[128];
    char kdir[PL_PATH_MAX], path[PL_PATH_MAX + 16];
    struct pl_keys_peer keys;
    struct pl_keypair server;
    int none = 0;

    memset(f, 0, sizeof(*f));
    if (!t_tmpdir("agent-run", f->dir, sizeof(f->dir)))
        return -1;
    snprintf(f->log, sizeof(f->log), "%s/agent.log", f->dir);
    pl_log_init("pilot-agent", "n1", f->log);
    pl_log_level = LOG_DEBUG;
    if (!(res = pl_resources_new(&rs, &err))) {
        diag("resources: %s", err.text);
        return -1;
    }
    cores = pl_resources_cores(res, &ncores);
    f->cores[0] = cores[0];
    f->cores[1] = cores[ncores > 1 ? 1 : 0];
    /* CURVE as in a pilot, without the ZAP handler (pilotd's) */
    snprintf(kdir, sizeof(kdir), "%s/keys", f->dir);
    snprintf(path, sizeof(path), "%s/server.key", kdir);
    if (pl_keys_create(kdir, &err) < 0
        || pl_keys_read_pair(path, &server, &err) < 0
        || pl_keys_load_peer(kdir, "agent", &keys, &err) < 0) {
        diag("keys: %s", err.text);
        pl_resources_free(res);
        return -1;
    }
    f->zctx = zmq_ctx_new();
    snprintf(ep, sizeof(ep), "ipc://%s/agents", f->dir);
    if (!(f->router = pl_zsock_new(f->zctx, ZMQ_ROUTER, &err))
        || pl_zsock_curve_server(f->router, &server, "agents", &err) < 0
        || zmq_bind(f->router, ep) < 0
        || !(f->agent = pl_agent_new(ep, &keys, &res, &err))) {
        diag("pilotd or agent: %s", err.text);
        pl_resources_free(res);
        return -1;
    }
    pl_agent_set_bench(f->agent, bench);
    f->loop = pl_agent_loop(f->agent);
    uv_timer_init(f->loop, &f->timer);
    f->timer.data = f;
    f->zw = pl_zwatch_new(f->loop, f->router, ZMQ_POLLIN, router_cb, f);
    if (!f->zw || pl_zwatch_start(f->zw) < 0
        || pl_agent_start(f->agent, &err) < 0) {
        diag("start: %s", err.text);
        return -1;
    }
    if (!wait_for(f, registered, &none, WAIT_MS)) {
        diag("no REGISTER");
        return -1;
    }
    send_welcome(f);
    if (!wait_for(f, pulled, NULL, WAIT_MS)) {
        diag("no PULL");
        return -1;
    }
    return 0;
}

static void stop_cb(uv_timer_t *h)
{
    uv_stop(h->loop);
}

/* Shut the agent down and run the loop until it stops (or WAIT_MS pass),
 * then until the events it sent last have come. */
static void fixture_stop(struct fixture *f)
{
    pl_agent_shutdown(f->agent, "test over");
    uv_timer_start(&f->timer, stop_cb, WAIT_MS, 0);
    uv_run(f->loop, UV_RUN_DEFAULT); /* until the agent calls uv_stop() */
    uv_timer_stop(&f->timer);
}

/* Every (task, attempt) that ran has ended: what the agent owes pilotd. */
static int all_ended(struct fixture *f, void *arg)
{
    (void)arg;
    for (int i = 0; i < f->nev; i++) {
        struct want w = { f->ev[i].id, f->ev[i].attempt, 0 };
        if (f->ev[i].state == PL_ST_RUNNING && !has_ev(f, &w))
            return 0;
    }
    return 1;
}

/* Free it all; whether every handle was closed (pl_agent_free() logs
 * those still open). */
static bool fixture_free(struct fixture *f)
{
    char line[1024];
    int lingering = 0;

    pl_zwatch_free(f->zw);
    uv_close((uv_handle_t *)&f->timer, NULL);
    pl_agent_free(f->agent);
    zmq_close(f->router);
    zmq_ctx_term(f->zctx);
    FILE *fp = fopen(f->log, "r");
    while (fp && fgets(line, sizeof(line), fp))
        if (strstr(line, "uv_loop_close") || strstr(line, "still open"))
            lingering++;
    if (fp)
        fclose(fp);
    for (int i = 0; i < f->nev; i++)
        pl_event_clear(&f->ev[i]);
    pl_register_clear(&f->reg);
    if (tap_failed)
        diag("kept %s (agent.log)", f->dir);
    else
        t_rmtree(f->dir);
    return fp && lingering == 0;
}

/* What the task's environment holds beyond its rank's identity. */
static void test_env(struct fixture *f)
{
    char a0[] = "sh", a1[] = "-c",
         a2[] = "echo \"id=$PILOT_TASK_ID node=$PILOT_NODE "
                "omp=$OMP_NUM_THREADS cuda=[$CUDA_VISIBLE_DEVICES] "
                "foo=$FOO inh=$PL_TEST_INHERITED\"";
    char *argv[] = { a0, a1, a2, NULL };
    char e0[] = "FOO=bar";
    char *env[] = { e0, NULL };
    struct pl_run r = entry(f, 30, 1, &f->cores[0], argv);
    struct want w = { 30, 1, PL_ST_DONE };

    r.env = env;
    send_run(f, &r, 1);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "env: task 30 done");
    is_str(slurp_task(f, 30),
           "id=30 node=n1 omp=1 cuda=[] foo=bar inh=yes\n",
           "env: task id, node, threads, no GPU, the entry's env over ours");
    const struct pl_event *v = find_ev(f, 30, 1, PL_ST_RUNNING);
    ok(v && v->pid > 0, "env: running event with its pid");
    v = find_ev(f, 30, 1, PL_ST_DONE);
    ok(v && v->exit_code == 0 && v->signal == 0 && v->maxrss_kb > 0,
       "env: done event with exit 0, no signal, its maxrss");
}

/* A running attempt: what REGISTER says, another attempt refused, a
 * busy core, a KILL of another attempt. */
static void test_running(struct fixture *f)
{
    char a0[] = "sleep", a1[] = "30";
    char *argv[] = { a0, a1, NULL };
    uint64_t foreign = PL_CPU_MAX - 1;
    struct pl_run r[4];
    struct want w = { 40, 1, PL_ST_RUNNING };
    const struct pl_event *v;
    int before;

    r[0] = entry(f, 40, 1, &f->cores[0], argv);
    send_run(f, r, 1);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: task 40 runs");

    /* a restarted pilotd learns what runs here */
    struct pl_wbuf b;
    before = f->nregister;
    pl_bare_encode(&b, PL_MSG_REREGISTER, f->seq++);
    send_wbuf(f, &b);
    ok(wait_for(f, registered, &before, WAIT_MS) && f->reg.nrunning == 1
           && f->reg.running[0].id == 40 && f->reg.running[0].attempt == 1
           && f->reg.running[0].rank == 0,
       "running: REGISTER lists task 40 attempt 1 rank 0 as running");
    ok(f->reg.node && !strcmp(f->reg.node, "n1") && f->reg.ncpu >= 1
           && f->reg.pid == (uint64_t)getpid(),
       "running: REGISTER names the node, its cores and the agent's pid");
    send_welcome(f);

    r[0] = entry(f, 40, 2, &f->cores[1], argv); /* another attempt */
    r[1] = entry(f, 41, 1, &f->cores[0], argv); /* task 40's core */
    r[2] = entry(f, 42, 1, &foreign, argv);     /* not ours */
    r[3] = entry(f, 40, 1, &f->cores[0], argv); /* the same rank again */
    send_run(f, r, 4);
    w = (struct want){ 40, 2, PL_ST_FAILED };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: attempt 2 failed");
    v = find_ev(f, 40, 2, PL_ST_FAILED);
    is_str(v ? v->error : NULL,
           "attempt 1 of this task is still running on this node",
           "running: attempt 2 refused while attempt 1 runs");
    w = (struct want){ 41, 1, PL_ST_FAILED };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: task 41 failed");
    v = find_ev(f, 41, 1, PL_ST_FAILED);
    ok(v && v->error && strstr(v->error, "is busy"),
       "running: a busy core refused (%s)", v && v->error ? v->error : "");
    w = (struct want){ 42, 1, PL_ST_FAILED };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: task 42 failed");
    v = find_ev(f, 42, 1, PL_ST_FAILED);
    ok(v && v->error && strstr(v->error, "is not on this agent"),
       "running: a core not ours refused (%s)",
       v && v->error ? v->error : "");

    /* KILL of attempt 2 does not touch attempt 1 */
    send_kill(f, 40, 2);
    w = (struct want){ 40, 1, 0 };
    ok(!wait_for(f, has_ev, &w, 300), "running: KILL of attempt 2: attempt "
       "1 still runs");
    int n = 0;
    for (int i = 0; i < f->nev; i++)
        n += f->ev[i].id == 40 && f->ev[i].attempt == 1
             && f->ev[i].state == PL_ST_RUNNING;
    is(n, 1, "running: the same rank again started nothing");
    send_kill(f, 40, 1);
    w.state = PL_ST_CANCELED;
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: KILL of attempt 1 "
       "cancels it");

    /* its core is free again */
    r[0] = entry(f, 43, 1, &f->cores[0], argv_true);
    send_run(f, r, 1);
    w = (struct want){ 43, 1, PL_ST_DONE };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: its core runs the next");

    /* the same RUN again (pilotd had no GOT for it): its end is not
     * acknowledged yet, so it does not run twice; GOT says what was read */
    uint64_t seq = f->seq;
    send_run(f, r, 1);
    ok(wait_for(f, got_seq, &seq, WAIT_MS), "running: GOT %llu: the RUN "
       "was read", (unsigned long long)seq);
    /* 300 ms for a second start to show (state -1 never comes) */
    (void)wait_for(f, has_ev, &(struct want){ 43, 1, -1 }, 300);
    n = 0;
    for (int i = 0; i < f->nev; i++)
        n += f->ev[i].id == 43 && f->ev[i].state == PL_ST_RUNNING;
    is(n, 1, "running: a RUN of a task that ended here (end not acknowledged) "
       "starts nothing");
    seq = f->seq;
    send_kill(f, 43, 1);
    ok(wait_for(f, got_seq, &seq, WAIT_MS), "running: a KILL is numbered "
       "with the RUNs: GOT %llu", (unsigned long long)seq);
}

/* A spawn that fails reports the task's own failure and frees its core. */
static void test_spawn_failed(struct fixture *f)
{
    char a0[] = "/nonexistent/cmd";
    char *argv[] = { a0, NULL };
    struct pl_run r = entry(f, 50, 1, &f->cores[0], argv);
    struct want w = { 50, 1, PL_ST_FAILED };
    const struct pl_event *v;

    send_run(f, &r, 1);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "spawn: task 50 failed");
    v = find_ev(f, 50, 1, PL_ST_FAILED);
    ok(v && v->exit_code == 127 && v->error
           && !strcmp(v->error, "spawn /nonexistent/cmd: no such file or "
                        "directory"),
       "spawn: exit code 127 and the error (%s)",
       v && v->error ? v->error : "");
    ok(find_ev(f, 50, 1, PL_ST_RUNNING) == NULL, "spawn: never running");
    r = entry(f, 51, 1, &f->cores[0], argv_true);
    send_run(f, &r, 1);
    w = (struct want){ 51, 1, PL_ST_DONE };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "spawn: its core runs the next");
}

/* An MPI entry runs its launcher, found on the entry's PATH: here a
 * fake srun that shows what it was given. */
static void test_mpi(struct fixture *f)
{
    char bin[128], srun[160], pathvar[256], self[PATH_MAX], want[PATH_MAX
                                                                  + 512];
    char a0[] = "true";
    char *argv[] = { a0, NULL };
    char *env[] = { pathvar, NULL };
    char h0[] = "n1";
    char *hosts[] = { h0, NULL };
    char rc[] = "0";
    struct want w = { 60, 1, PL_ST_DONE };
    FILE *fp;
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    self[n > 0 ? n : 0] = '\0';
    snprintf(bin, sizeof(bin), "%s/bin", f->dir);
    snprintf(srun, sizeof(srun), "%s/srun", bin);
    snprintf(pathvar, sizeof(pathvar), "PATH=%s:/usr/bin:/bin", bin);
    mkdir(bin, 0700);
    if ((fp = fopen(srun, "w"))) {
        fputs("#!/bin/sh\n"
              "echo \"srun $*\"\n"
              "echo \"hosts $(cat \"$SLURM_HOSTFILE\")\"\n"
              "echo \"cores $PILOT_RANK_CORES rank $PILOT_RANK\"\n"
              "echo \"cuda ${CUDA_VISIBLE_DEVICES-unset}\"\n", fp);
        fclose(fp);
    }
    chmod(srun, 0700);
    struct pl_run r = entry(f, 60, 1, &f->cores[0], argv);
    r.env = env;
    r.comm = PL_COMM_MPI;
    r.launcher = PL_LAUNCHER_SRUN;
    r.hosts = hosts;
    r.rank_cores = rc;
    send_run(f, &r, 1);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "mpi: the launcher ran");
    snprintf(want, sizeof(want),
             "srun --overlap --mpi=pmix --nodes=1 --ntasks=1 "
             "--distribution=arbitrary --cpu-bind=none --kill-on-bad-exit=1 "
             "--job-name=pilot-60 %s --exec-rank -- true\n"
             "hosts n1\n"
             "cores 0 rank 0\n"
             "cuda 7,8\n", self);
    is_str(slurp_task(f, 60), want, "mpi: srun with its hostfile, in the "
           "agent's GPU lists");
}

/* An entry that comes while the agent stops is refused. */
static void test_shutdown(struct fixture *f)
{
    /* a task that takes half a second to go: the agent waits for it */
    char a0[] = "sh", a1[] = "-c",
         a2[] = "trap 'sleep 0.5; exit 0' TERM; sleep 30 & wait";
    char *argv[] = { a0, a1, a2, NULL };
    struct pl_run r = entry(f, 70, 1, &f->cores[0], argv);
    struct want w = { 70, 1, PL_ST_RUNNING };
    const struct pl_event *v;

    send_run(f, &r, 1);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "shutdown: task 70 runs");
    uv_sleep(100); /* the shell sets its trap */
    pl_agent_shutdown(f->agent, "test");
    r = entry(f, 71, 1, &f->cores[1], argv_true);
    send_run(f, &r, 1);
    w = (struct want){ 71, 1, PL_ST_FAILED };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "shutdown: task 71 failed");
    v = find_ev(f, 71, 1, PL_ST_FAILED);
    is_str(v ? v->error : NULL, "agent is shutting down",
           "shutdown: a new entry refused");
    fixture_stop(f); /* the agent waits for task 70 */
    ok(wait_for(f, all_ended, NULL, WAIT_MS), "shutdown: every task that "
       "ran has ended");
    ok(find_ev(f, 70, 1, PL_ST_CANCELED) != NULL, "shutdown: task 70 canceled");
}

/* Bench mode: each entry running then done at once, with no process. */
static void test_bench(struct fixture *f)
{
    char a0[] = "/nonexistent/cmd";
    char *argv[] = { a0, NULL };
    struct pl_run r[2];
    struct want w = { 81, 1, PL_ST_DONE };
    const struct pl_event *v;
    struct stat st;
    char p[256];

    r[0] = entry(f, 80, 1, &f->cores[0], argv);
    r[1] = entry(f, 81, 1, &f->cores[0], argv); /* the same core */
    send_run(f, r, 2);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "bench: task 81 done");
    v = find_ev(f, 80, 1, PL_ST_RUNNING);
    ok(v && v->pid == -1, "bench: task 80 running, with no pid");
    v = find_ev(f, 80, 1, PL_ST_DONE);
    ok(v && v->exit_code == 0 && !v->error, "bench: task 80 done, exit 0");
    ok(find_ev(f, 81, 1, PL_ST_RUNNING) != NULL
           && !find_ev(f, 81, 1, PL_ST_FAILED),
       "bench: no cores held: task 81 on the same core ran too");
    snprintf(p, sizeof(p), "%s/t80.out", f->dir);
    ok(stat(p, &st) < 0 && errno == ENOENT, "bench: no output file");
}

int main(void)
{
    struct fixture *f = calloc(1, sizeof(*f));

    plan(38);
    /* what the agent's own step would have: an MPI launcher keeps it */
    setenv("CUDA_VISIBLE_DEVICES", "7,8", 1);
    setenv("PL_TEST_INHERITED", "yes", 1);
    if (!f || fixture_up(f, false) < 0)
        abort();
    test_env(f);
    test_running(f);
    test_spawn_failed(f);
    test_mpi(f);
    test_shutdown(f);
    ok(fixture_free(f), "uv_loop_close: every handle closed");

    if (fixture_up(f, true) < 0)
        abort();
    test_bench(f);
    fixture_stop(f);
    ok(fixture_free(f), "bench: uv_loop_close: every handle closed");
    free(f);
    return done_testing();
}
