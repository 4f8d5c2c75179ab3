/* agent/benchmany.c - many bench agents in one process, on one loop
 *
 * 'pilot-agent --bench --bench-agents N': N agents as pilotd sees them
 * (each its DEALER, its routing id, its node NODE-i), for measuring one
 * pilotd under many nodes without N processes.  What each says on the
 * wire is what a --bench agent says (agent/run.c: each RUN entry is
 * reported running, then done with exit 0, in the next EVENTS); the
 * rest is kept to what that needs: no tasks, no output, no pools, no
 * following of a moved pilotd, no resending of unacknowledged ends (a
 * bench run that loses one sees a task not done).
 *
 * One ZeroMQ context and one loop for all: each socket's ZMQ_FD is
 * watched by a uv_poll of its own (no per-socket prepare/check handle,
 * which would cost every iteration N calls); the agents that received
 * something are flushed once per iteration from a zero timer, as
 * agent.c's flush timer does for one agent; one timer repeats REGISTER
 * for those not welcomed, one sends the HEARTBEAT of every welcomed
 * agent that needs one (as agent/link.c: none while it talks).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <uv.h>
#include <zmq.h>

#include "agent/benchmany.h"
#include "agent/resources.h"
#include "proto/agentmsg.h"
#include "proto/keys.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "proto/run.h"
#include "proto/state.h"
#include "proto/vetmsg.h"
#include "proto/zsock.h"

/* REGISTER again until WELCOME: 1,000 CURVE handshakes on one loaded
 * machine take seconds, and the REGISTERs a DEALER queues meanwhile all
 * reach pilotd once it is connected, each a registration to handle (an
 * agent of its own says it again after 2 s) */
#define REGISTER_MS 10000
/* pilotd answers every HEARTBEAT with a PING: with no word to any of
 * us for this long it is gone (killed, or down before they all
 * registered, so that some never got EXIT), and so are we */
#define SILENT_MS 30000

struct outmsg {
    struct outmsg *next;
    char *data;
    size_t size;
};

struct many;

struct bagent {
    struct many *m;
    void *zsock;
    uv_poll_t poll;
    char node[64];
    uint64_t seq;          /* of our next message */
    uint64_t last_run;     /* the last RUN or KILL read */
    struct pl_event *events; /* for the next EVENTS */
    size_t nevents, capevents;
    struct outmsg *outq, **outq_tail;
    uint64_t heard;        /* uv_now() of pilotd's last message to us */
    uint64_t spoke;        /* uv_now() of our last message */
    bool welcomed, pulled, got_due, dirty, done, polling;
};

struct many {
    uv_loop_t *loop;
    void *zctx;
    struct bagent *a;
    uint32_t n, ndone;
    uint64_t *cpu;
    uint32_t ncpu;
    uint32_t *dirty;       /* agents to flush */
    uint32_t *spare;       /* the list a flush walks (marks go on the
                              other) */
    size_t ndirty;
    uv_timer_t flush, reg, heartbeat, watch;
    uint64_t heard;        /* uv_now() of pilotd's last message */
    uv_signal_t sigterm, sigint;
    uint64_t hb_ms;        /* the heartbeat timer's period; 0: not set */
};

/* ---- sending ---- */

static void send_buf(struct bagent *b, struct pl_wbuf *w)
{
    struct outmsg *o;

    b->spoke = uv_now(b->m->loop);
    if (!b->outq
        && pl_zsock_send(b->zsock, NULL, 0, w->sb.data, w->sb.size) == 0) {
        pl_wbuf_destroy(w);
        return;
    }
    if (!(o = calloc(1, sizeof(*o)))) {
        pl_log(LOG_WARNING, "%s: a message dropped: out of memory", b->node);
        pl_wbuf_destroy(w);
        return;
    }
    o->size = w->sb.size;
    o->data = msgpack_sbuffer_release(&w->sb);
    *b->outq_tail = o;
    b->outq_tail = &o->next;
}

static void drain_outq(struct bagent *b)
{
    struct outmsg *o;

    while ((o = b->outq)) {
        if (pl_zsock_send(b->zsock, NULL, 0, o->data, o->size) < 0
            && (errno == EAGAIN || errno == EINTR))
            return;
        if (!(b->outq = o->next))
            b->outq_tail = &b->outq;
        free(o->data);
        free(o);
    }
}

static void send_register(struct bagent *b)
{
    struct pl_register r = {
        .node = b->node, .pid = (uint64_t)getpid(), .cpu = b->m->cpu,
        .ncpu = b->m->ncpu, .last_run = b->last_run,
    };
    struct pl_wbuf w;

    pl_register_encode(&w, b->seq++, &r);
    send_buf(b, &w);
}

/* ---- the flush: what a loop iteration's messages made due ---- */

static void flush_cb(uv_timer_t *h);

static void mark(struct bagent *b)
{
    struct many *m = b->m;

    if (!b->dirty) {
        b->dirty = true;
        m->dirty[m->ndirty++] = (uint32_t)(b - m->a);
    }
    if (!uv_is_active((uv_handle_t *)&m->flush))
        uv_timer_start(&m->flush, flush_cb, 0, 0);
}

static void event_add(struct bagent *b, const struct pl_run *r, int state)
{
    struct pl_event *e;

    if (pl_grow(&b->events, &b->capevents, b->nevents, 1, sizeof(*e)) < 0) {
        pl_log(LOG_WARNING, "%s: task %llu: event lost: out of memory",
               b->node, (unsigned long long)r->id);
        return;
    }
    e = &b->events[b->nevents++];
    pl_event_init(e, r->id, r->attempt, r->rank, state, pl_now());
    if (state == PL_ST_DONE)
        e->exit_code = 0;
}

static void recv_all(struct bagent *b);

static void flush_one(struct bagent *b)
{
    struct pl_wbuf w;

    b->dirty = false;
    if (b->done)
        return;
    if (b->nevents) {
        pl_events_begin(&w, b->seq++, (uint32_t)b->nevents);
        for (size_t i = 0; i < b->nevents; i++) {
            pl_event_encode(&w, &b->events[i]);
            pl_event_clear(&b->events[i]);
        }
        b->nevents = 0;
        send_buf(b, &w);
    }
    if (b->got_due && b->welcomed) {
        b->got_due = false;
        pl_got_encode(&w, b->seq++, b->last_run);
        send_buf(b, &w);
    }
    if (b->welcomed && !b->pulled) {
        struct pl_pull p = { .free_cores = b->m->ncpu };
        pl_pull_encode(&w, b->seq++, &p);
        send_buf(b, &w);
        b->pulled = true;
    }
    /* N.B. ZMQ_FD is edge-triggered: after our sends, read what came
     * meanwhile, or its signal may have been taken */
    recv_all(b);
}

static void flush_cb(uv_timer_t *h)
{
    struct many *m = h->data;

    uint32_t *list = m->dirty;
    size_t n = m->ndirty;

    /* an agent marked again while this runs (what it read after its
     * sends) goes on the other list, for the next pass */
    m->dirty = m->spare;
    m->spare = list;
    m->ndirty = 0;
    for (size_t i = 0; i < n; i++)
        flush_one(&m->a[list[i]]);
}

/* ---- pilotd's messages ---- */

/* As agent/link.c: a HEARTBEAT from an agent that sent nothing for a
 * period, or heard nothing from pilotd for one.  The timer ticks every
 * HB_TICKS-th of a period (one timer for all: a gap is at most a
 * period and a tick). */
#define HB_TICKS 16

static void heartbeat_cb(uv_timer_t *h)
{
    struct many *m = h->data;
    uint64_t now = uv_now(m->loop);
    struct pl_wbuf w;

    for (uint32_t i = 0; i < m->n; i++) {
        struct bagent *b = &m->a[i];
        uint64_t older = b->spoke < b->heard ? b->spoke : b->heard;
        if (!b->welcomed || b->done || now - older < m->hb_ms)
            continue;
        pl_bare_encode(&w, PL_MSG_HEARTBEAT, b->seq++);
        send_buf(b, &w);
        mark(b);
    }
}

static void reg_cb(uv_timer_t *h)
{
    struct many *m = h->data;

    for (uint32_t i = 0; i < m->n; i++)
        if (!m->a[i].welcomed && !m->a[i].done) {
            send_register(&m->a[i]);
            mark(&m->a[i]);
        }
}

static void stop_all(struct many *m)
{
    uv_timer_stop(&m->flush);
    uv_timer_stop(&m->reg);
    uv_timer_stop(&m->heartbeat);
    uv_timer_stop(&m->watch);
    uv_stop(m->loop);
}

static void watch_cb(uv_timer_t *h)
{
    struct many *m = h->data;

    if (uv_now(m->loop) - m->heard < SILENT_MS)
        return;
    pl_log(LOG_WARNING, "no word from pilotd for %d s: stopping",
           SILENT_MS / 1000);
    stop_all(m);
}

static int welcome(struct bagent *b, const struct pl_msg *msg,
                   struct pl_error *err)
{
    struct pl_welcome wl;
    struct many *m = b->m;

    if (pl_welcome_decode(msg->body, &wl, err) < 0)
        return -1;
    uint64_t ms = (uint64_t)ceil(wl.heartbeat * 1000.0);
    if (!m->hb_ms || ms < m->hb_ms) {
        uint64_t tick = ms / HB_TICKS ? ms / HB_TICKS : 1;
        m->hb_ms = ms;
        uv_timer_start(&m->heartbeat, heartbeat_cb, tick, tick);
    }
    if (!b->welcomed)
        pl_log(LOG_DEBUG, "%s registered", b->node);
    b->welcomed = true;
    b->pulled = false;
    pl_welcome_clear(&wl);
    return 0;
}

static int run(struct bagent *b, const struct pl_msg *msg,
               struct pl_error *err)
{
    const msgpack_object *tasks;

    if (pl_run_msg_decode(msg->body, &tasks, err) < 0)
        return -1;
    if (msg->seq > b->last_run)
        b->last_run = msg->seq;
    b->got_due = true;
    b->pulled = false;
    for (uint32_t i = 0; i < tasks->via.array.size; i++) {
        struct pl_run r;
        bool have_id;
        if (pl_run_decode(&tasks->via.array.ptr[i], &r, &have_id, err) == 0
            || have_id) {
            /* no process, no files, no cores held: pilotd's cost alone */
            event_add(b, &r, PL_ST_RUNNING);
            event_add(b, &r, PL_ST_DONE);
        }
        pl_run_clear(&r);
    }
    return 0;
}

static int vet(struct bagent *b, const struct pl_msg *msg,
               struct pl_error *err)
{
    struct pl_vetconf c;
    struct pl_wbuf w;
    uint64_t token;

    if (pl_vet_decode(msg->body, &token, &c, err) < 0)
        return -1;
    pl_vetconf_clear(&c);
    /* a bench agent checks nothing: its node is fit */
    struct pl_vet_result r = { .node = b->node, .token = token,
                               .time = pl_now(), .ok = true };
    pl_vet_result_encode(&w, b->seq++, &r);
    send_buf(b, &w);
    return 0;
}

static void dispatch(struct bagent *b, const void *buf, size_t len)
{
    struct pl_msg msg;
    struct pl_error err;
    int rc = 0;

    b->heard = b->m->heard = uv_now(b->m->loop);
    if (pl_msg_decode(buf, len, &msg, &err) < 0) {
        pl_log(LOG_WARNING, "%s: dropped a message: %s", b->node, err.text);
        return;
    }
    switch (msg.type) {
    case PL_MSG_WELCOME:
        rc = welcome(b, &msg, &err);
        break;
    case PL_MSG_RUN:
        rc = run(b, &msg, &err);
        break;
    case PL_MSG_KILL:
        /* nothing runs here: only say it was read */
        if (msg.seq > b->last_run)
            b->last_run = msg.seq;
        b->got_due = true;
        break;
    case PL_MSG_VET:
        rc = vet(b, &msg, &err);
        break;
    case PL_MSG_REREGISTER:
        if (b->welcomed) {
            b->welcomed = false;
            send_register(b);
        }
        break;
    case PL_MSG_EXIT:
        b->done = true;
        if (++b->m->ndone == b->m->n)
            stop_all(b->m);
        break;
    default: /* ACK, PING, REPLY: nothing to do */
        break;
    }
    if (rc < 0)
        pl_log(LOG_WARNING, "%s: dropped a %s message: %s", b->node,
               pl_msg_type_name(msg.type), err.text);
    pl_msg_release(&msg);
    mark(b);
}

static void recv_all(struct bagent *b)
{
    for (;;) {
        zmq_msg_t body;
        zmq_msg_init(&body);
        if (pl_zsock_recv(b->zsock, NULL, &body) < 0) {
            int e = errno;
            zmq_msg_close(&body);
            if (e == EAGAIN || e == EINTR)
                return;
            continue; /* a malformed message, dropped */
        }
        dispatch(b, zmq_msg_data(&body), zmq_msg_size(&body));
        zmq_msg_close(&body);
        if (b->done)
            return;
    }
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    struct bagent *b = h->data;

    (void)status;
    (void)events;
    if (b->done)
        return;
    drain_outq(b);
    recv_all(b);
}

static void signal_cb(uv_signal_t *h, int signum)
{
    pl_log(LOG_NOTICE, "%s: stopping", signum == SIGTERM ? "SIGTERM"
                                                         : "SIGINT");
    stop_all(h->data);
}

/* ---- life cycle ---- */

static int agent_open(struct many *m, struct bagent *b, uint32_t i,
                      const struct pl_benchmany_opts *o,
                      const struct pl_keys_peer *keys, struct pl_error *err)
{
    uv_os_sock_t fd;
    size_t len = sizeof(fd);
    int rc;

    b->m = m;
    b->outq_tail = &b->outq;
    b->poll.data = b;
    snprintf(b->node, sizeof(b->node), "%s-%u", o->node, i);
    if (!(b->zsock = pl_zsock_new(m->zctx, ZMQ_DEALER, err))
        || pl_zsock_curve_client(b->zsock, keys->server, &keys->own, err) < 0)
        return -1;
    if (zmq_connect(b->zsock, o->connect) < 0
        || zmq_getsockopt(b->zsock, ZMQ_FD, &fd, &len) < 0)
        return pl_errprintf(err, "%s: %s", o->connect, zmq_strerror(errno));
    if ((rc = uv_poll_init_socket(m->loop, &b->poll, fd)) < 0
        || (rc = uv_poll_start(&b->poll, UV_READABLE, poll_cb)) < 0)
        return pl_errprintf(err, "uv_poll: %s", uv_strerror(rc));
    b->polling = true;
    send_register(b);
    mark(b); /* read after the send (ZMQ_FD is edge-triggered) */
    return 0;
}

/* Room for N sockets: ZeroMQ's own limit, and the descriptors (a socket
 * has its ZMQ_FD, its connection one). */
static void raise_limits(struct many *m)
{
    struct rlimit rl;

    (void)zmq_ctx_set(m->zctx, ZMQ_MAX_SOCKETS, (int)m->n + 64);
    /* the CURVE handshakes and the encryption of every message are the
     * I/O threads' work: more than one where there are many agents */
    if (m->n > 64)
        (void)zmq_ctx_set(m->zctx, ZMQ_IO_THREADS, 2);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void close_all(struct many *m)
{
    for (uint32_t i = 0; m->a && i < m->n; i++) {
        struct bagent *b = &m->a[i];
        if (b->polling)
            uv_close((uv_handle_t *)&b->poll, NULL);
    }
    uv_close((uv_handle_t *)&m->flush, NULL);
    uv_close((uv_handle_t *)&m->reg, NULL);
    uv_close((uv_handle_t *)&m->heartbeat, NULL);
    uv_close((uv_handle_t *)&m->watch, NULL);
    uv_close((uv_handle_t *)&m->sigterm, NULL);
    uv_close((uv_handle_t *)&m->sigint, NULL);
    uv_run(m->loop, UV_RUN_NOWAIT);
    for (uint32_t i = 0; m->a && i < m->n; i++) {
        struct bagent *b = &m->a[i];
        int linger = 100;
        if (b->zsock) {
            (void)zmq_setsockopt(b->zsock, ZMQ_LINGER, &linger,
                                 sizeof(linger));
            zmq_close(b->zsock);
        }
        for (size_t k = 0; k < b->nevents; k++)
            pl_event_clear(&b->events[k]);
        free(b->events);
        while (b->outq) {
            struct outmsg *o = b->outq;
            b->outq = o->next;
            free(o->data);
            free(o);
        }
    }
    if (m->zctx)
        zmq_ctx_term(m->zctx);
    free(m->a);
    free(m->dirty);
    free(m->spare);
    free(m->cpu);
    (void)uv_loop_close(m->loop);
}

int pl_benchmany_main(const struct pl_benchmany_opts *o)
{
    struct many m = { .n = o->agents };
    struct pl_keys_peer keys;
    struct pl_error err;
    uv_loop_t loop;
    int rc = 1;

    if (uv_loop_init(&loop) < 0) {
        pl_log(LOG_ERR, "uv_loop_init failed");
        return 1;
    }
    m.loop = &loop;
    uv_timer_init(&loop, &m.flush);
    uv_timer_init(&loop, &m.reg);
    uv_timer_init(&loop, &m.heartbeat);
    uv_timer_init(&loop, &m.watch);
    uv_signal_init(&loop, &m.sigterm);
    uv_signal_init(&loop, &m.sigint);
    m.flush.data = m.reg.data = m.heartbeat.data = m.watch.data = &m;
    m.sigterm.data = m.sigint.data = &m;
    if (pl_cpulist_parse(o->cores ? o->cores : "0-3", &m.cpu, &m.ncpu, &err)
        < 0) {
        pl_log(LOG_ERR, "--cores: %s", err.text);
        goto done;
    }
    if (pl_keys_load_peer(o->keys, "agent", &keys, &err) < 0) {
        pl_log(LOG_ERR, "%s", err.text);
        goto done;
    }
    if (!(m.zctx = zmq_ctx_new()) || !(m.a = calloc(m.n, sizeof(*m.a)))
        || !(m.dirty = calloc(m.n, sizeof(*m.dirty)))
        || !(m.spare = calloc(m.n, sizeof(*m.spare)))) {
        pl_log(LOG_ERR, "out of memory");
        goto done;
    }
    raise_limits(&m);
    for (uint32_t i = 0; i < m.n; i++)
        if (agent_open(&m, &m.a[i], i, o, &keys, &err) < 0) {
            pl_log(LOG_ERR, "bench agent %u: %s", i, err.text);
            goto done;
        }
    explicit_bzero(&keys, sizeof(keys));
    uv_signal_start(&m.sigterm, signal_cb, SIGTERM);
    uv_signal_start(&m.sigint, signal_cb, SIGINT);
    uv_timer_start(&m.reg, reg_cb, REGISTER_MS, REGISTER_MS);
    m.heard = uv_now(&loop);
    uv_timer_start(&m.watch, watch_cb, 1000, 1000);
    pl_log(LOG_NOTICE, "%u bench agents %s-0..%u, %u slots each, pilotd "
           "at %s", m.n, o->node, m.n - 1, m.ncpu, o->connect);
    uv_run(&loop, UV_RUN_DEFAULT);
    pl_log(LOG_NOTICE, "stopped: %u of %u agents told to exit", m.ndone,
           m.n);
    rc = 0;
done:
    explicit_bzero(&keys, sizeof(keys));
    close_all(&m);
    return rc;
}
