/* tests/unit/agent_fixture.h - a real pl_agent and a fake pilotd, for the
 * agent's tests (test_agent_run.c, test_agent_pyw.c)
 *
 * A real pl_agent talks to a fake pilotd (a ROUTER over ipc:// in its own
 * ZeroMQ context, watched on the agent's loop) that speaks through
 * proto/'s encoders and decoders; the agent spawns real processes.
 */
#ifndef PL_TESTS_UNIT_AGENT_FIXTURE_H
#define PL_TESTS_UNIT_AGENT_FIXTURE_H

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
    int evmsg[EV_MAX];     /* the EVENTS message (1, 2, ...) of each */
    int nevmsg;
    uint64_t cores[2];
    char dir[64];
    char log[128];
};

static inline void router_cb(struct pl_zwatch *zw, int revents, void *arg)
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
                f->nevmsg++;
                for (uint32_t j = 0; j < evs->via.array.size; j++) {
                    if (f->nev == EV_MAX)
                        break;
                    if (pl_event_decode(&evs->via.array.ptr[j],
                                        &f->ev[f->nev], &e) < 0)
                        diag("bad event: %s", e.text);
                    else
                        f->evmsg[f->nev++] = f->nevmsg;
                }
            }
            pl_msg_release(&m);
        }
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
}

static inline void timer_cb(uv_timer_t *h)
{
    struct fixture *f = h->data;

    f->timed_out = 1;
}

/* Run the loop until pred(f, arg) holds or 'ms' pass; returns pred. */
static inline int wait_for(struct fixture *f, int (*pred)(struct fixture *, void *),
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
static inline const struct pl_event *find_ev(struct fixture *f, uint64_t id,
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

static inline int has_ev(struct fixture *f, void *arg)
{
    struct want *w = arg;

    for (int i = 0; i < f->nev; i++)
        if (f->ev[i].id == w->id && f->ev[i].attempt == w->attempt
            && (w->state ? f->ev[i].state == w->state
                         : pl_state_final(f->ev[i].state)))
            return 1;
    return 0;
}

static inline int registered(struct fixture *f, void *arg)
{
    return f->nregister > *(int *)arg;
}

static inline int got_seq(struct fixture *f, void *arg)
{
    return f->got >= *(uint64_t *)arg;
}

static inline int pulled(struct fixture *f, void *arg)
{
    (void)arg;
    return f->npull > 0;
}

static inline void send_wbuf(struct fixture *f, struct pl_wbuf *w)
{
    if (pl_zsock_send(f->router, f->rid, f->ridlen, w->sb.data, w->sb.size)
        < 0)
        diag("send: %s", zmq_strerror(errno));
    pl_wbuf_destroy(w);
}

static inline void send_welcome(struct fixture *f)
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
static inline struct pl_run entry(struct fixture *f, uint64_t id, uint64_t attempt,
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

static inline void send_run(struct fixture *f, const struct pl_run *r, uint32_t n)
{
    struct pl_wbuf w;

    pl_run_msg_begin(&w, f->seq++, n);
    for (uint32_t i = 0; i < n; i++)
        pl_run_encode(&w, &r[i]);
    send_wbuf(f, &w);
}

static inline void send_kill(struct fixture *f, uint64_t id, uint64_t attempt)
{
    struct pl_kill k = { .id = id, .attempt = attempt, .grace = 0 };
    struct pl_wbuf w;

    pl_kill_encode(&w, f->seq++, &k);
    send_wbuf(f, &w);
}

static inline char *slurp(const char *path)
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

static inline char *slurp_task(struct fixture *f, uint64_t id)
{
    char p[256];

    snprintf(p, sizeof(p), "%s/t%llu.out", f->dir, (unsigned long long)id);
    return slurp(p);
}

/* A fake pilotd and an agent ('bench': in bench mode), welcomed and
 * pulled.  Returns 0, or -1 after a diag line. */
static inline int fixture_up(struct fixture *f, bool bench)
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

static inline void stop_cb(uv_timer_t *h)
{
    uv_stop(h->loop);
}

/* Shut the agent down and run the loop until it stops (or WAIT_MS pass),
 * then until the events it sent last have come. */
static inline void fixture_stop(struct fixture *f)
{
    pl_agent_shutdown(f->agent, "test over");
    uv_timer_start(&f->timer, stop_cb, WAIT_MS, 0);
    uv_run(f->loop, UV_RUN_DEFAULT); /* until the agent calls uv_stop() */
    uv_timer_stop(&f->timer);
}

/* Every (task, attempt) that ran has ended: what the agent owes pilotd. */
static inline int all_ended(struct fixture *f, void *arg)
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
static inline bool fixture_free(struct fixture *f)
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

#endif /* !PL_TESTS_UNIT_AGENT_FIXTURE_H */
