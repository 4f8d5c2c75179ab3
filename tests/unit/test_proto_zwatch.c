/* tests/unit/test_proto_zwatch.c - ZeroMQ sockets inside the libuv loop */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>
#include <zmq.h>

#include "proto/zsock.h"
#include "proto/zwatch.h"
#include "tests/unit/tap.h"

/* One test's state: a ROUTER and a DEALER on the shared loop. */
struct t {
    uv_loop_t *loop;
    void *router, *dealer;
    struct pl_zwatch *zw;      /* on the router, unless said otherwise */
    uv_timer_t *guard;         /* fails the test if it fires */
    int want;                  /* stop once this many have arrived */
    int n_cb;                  /* received by the watcher */
    int n_timer;               /* received by the timer */
    int calls, maxbatch;
    int next;                  /* expected sequence number */
    int bad;                   /* out of order, bad frames, wrong revents */
    int sent;
    int edges;                 /* timer recv left messages pending */
    bool timed_out;
    bool free_in_cb;           /* pl_zwatch_free() from the callback */
    int ticks;
    /* pl_zsock_recv results, for the framing test */
    int rc[4], err[4];
    char body[4][16];
    int nres;
};

static void *sock(void *ctx, int type)
{
    struct pl_error e;
    void *s = pl_zsock_new(ctx, type, &e);
    int zero = 0;

    if (!s) {
        diag("pl_zsock_new: %s", e.text);
        exit(1);
    }
    /* tests leave messages behind: don't linger on them at close */
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    return s;
}

static void pair(struct t *t, void *ctx, const char *ep)
{
    t->router = sock(ctx, ZMQ_ROUTER);
    t->dealer = sock(ctx, ZMQ_DEALER);
    zmq_setsockopt(t->dealer, ZMQ_ROUTING_ID, "dealer", 6);
    if (zmq_bind(t->router, ep) < 0 || zmq_connect(t->dealer, ep) < 0) {
        diag("bind/connect %s: %s", ep, zmq_strerror(errno));
        exit(1);
    }
}

static void unpair(struct t *t)
{
    zmq_close(t->dealer);
    zmq_close(t->router);
}

static void send_seq(struct t *t)
{
    char buf[16];
    int len = snprintf(buf, sizeof(buf), "%d", t->sent);

    if (pl_zsock_send(t->dealer, NULL, 0, buf, (size_t)len) < 0)
        t->bad++;
    else
        t->sent++;
}

/* Receive one numbered message on the router: 1, or 0 when none. */
static int recv_seq(struct t *t, int *count)
{
    zmq_msg_t id, body;
    int rc;

    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if ((rc = pl_zsock_recv(t->router, &id, &body)) == 0) {
        char buf[16];
        size_t len = zmq_msg_size(&body);
        if (len >= sizeof(buf) || zmq_msg_size(&id) != 6
            || memcmp(zmq_msg_data(&id), "dealer", 6) != 0)
            t->bad++;
        else {
            memcpy(buf, zmq_msg_data(&body), len);
            buf[len] = '\0';
            if (atoi(buf) != t->next)
                t->bad++;
            t->next++;
        }
        (*count)++;
    }
    else if (errno != EAGAIN)
        t->bad++;
    zmq_msg_close(&id);
    zmq_msg_close(&body);
    return rc == 0;
}

static void check_done(struct t *t)
{
    if (t->n_cb + t->n_timer >= t->want) {
        if (t->zw)
            pl_zwatch_stop(t->zw);
        uv_timer_stop(t->guard);
    }
}

static void batch_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct t *t = arg;
    int k = 0;

    t->calls++;
    if (!(revents & ZMQ_POLLIN) || zw != t->zw)
        t->bad++;
    while (k < PL_ZBATCH && recv_seq(t, &t->n_cb))
        k++;
    if (k > t->maxbatch)
        t->maxbatch = k;
    if (t->free_in_cb) {
        pl_zwatch_free(zw); /* the watcher frees itself: touch it no more */
        t->zw = NULL;
        uv_timer_stop(t->guard);
        return;
    }
    check_done(t);
}

static void guard_cb(uv_timer_t *h)
{
    struct t *t = h->data;

    t->timed_out = true;
    uv_stop(h->loop);
}

static void start_guard(struct t *t, uint64_t ms)
{
    t->guard->data = t;
    t->timed_out = false;
    uv_timer_start(t->guard, guard_cb, ms, 0);
}

/* Messages queued before the loop runs, far more than one batch: the fd
 * fires once at most, so the watcher must come back on its own. */
static void test_batches(uv_loop_t *loop, uv_timer_t *guard, void *ctx)
{
    struct t t = { .loop = loop, .guard = guard, .want = 1000 };

    pair(&t, ctx, "inproc://batches");
    t.zw = pl_zwatch_new(loop, t.router, ZMQ_POLLIN, batch_cb, &t);
    ok(t.zw && pl_zwatch_start(t.zw) == 0, "watcher on a ROUTER started");
    is(pl_zwatch_start(t.zw), 0, "pl_zwatch_start again is a no-op");
    while (t.sent < t.want)
        send_seq(&t);
    start_guard(&t, 2000);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(!t.timed_out, "loop ended without the guard timer");
    is(t.n_cb, 1000, "all 1000 messages arrived, in order");
    ok(t.bad == 0, "no bad message, order kept");
    ok(t.maxbatch <= PL_ZBATCH && t.calls >= 1000 / PL_ZBATCH,
       "at most PL_ZBATCH per callback (max %d in %d calls)", t.maxbatch,
       t.calls);
    pl_zwatch_free(t.zw);
    uv_run(loop, UV_RUN_DEFAULT); /* close callbacks */
    unpair(&t);
}

/* A timer sends and receives on the same sockets, consuming the edge of
 * ZMQ_FD while messages stay queued. */
static void edge_tick_cb(uv_timer_t *h)
{
    struct t *t = h->data;

    for (int i = 0; i < 3; i++)
        send_seq(t);
    if (recv_seq(t, &t->n_timer)
        && (pl_zsock_events(t->router) & ZMQ_POLLIN))
        t->edges++;
    if (++t->ticks == 20)
        uv_timer_stop(h);
    check_done(t);
}

static void later_cb(uv_timer_t *h)
{
    struct t *t = h->data;

    for (int i = 0; i < 5; i++)
        send_seq(t);
}

static void test_edge(uv_loop_t *loop, uv_timer_t *guard, void *ctx)
{
    struct t t = { .loop = loop, .guard = guard, .want = 20 * 3 + 5 };
    uv_timer_t tick, later;

    pair(&t, ctx, "inproc://edge");
    t.zw = pl_zwatch_new(loop, t.router, ZMQ_POLLIN, batch_cb, &t);
    pl_zwatch_start(t.zw);
    uv_timer_init(loop, &tick);
    uv_timer_init(loop, &later);
    tick.data = later.data = &t;
    uv_timer_start(&tick, edge_tick_cb, 1, 1);
    uv_timer_start(&later, later_cb, 60, 0);
    start_guard(&t, 1500);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(!t.timed_out, "edge: loop ended without the guard timer");
    is(t.n_cb + t.n_timer, 65, "edge: all 65 messages arrived (%d by the "
       "timer, %d by the watcher)", t.n_timer, t.n_cb);
    ok(t.bad == 0, "edge: no bad message, order kept");
    ok(t.edges > 0, "edge: the timer consumed the edge with messages left "
       "(%d times)", t.edges);
    ok(t.n_cb > 5, "edge: the watcher got messages after the timer's recv");
    pl_zwatch_free(t.zw);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_close((uv_handle_t *)&later, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    unpair(&t);
}

/* An exclusive watcher (only its callback touches the socket) reads
 * ZMQ_EVENTS before a block only after its callback ran: bursts larger
 * than a batch, each after the loop slept, all arrive. */
static void burst_cb(uv_timer_t *h)
{
    struct t *t = h->data;

    for (int i = 0; i < 150; i++)
        send_seq(t);
    if (++t->ticks == 4)
        uv_timer_stop(h);
}

static void test_exclusive(uv_loop_t *loop, uv_timer_t *guard, void *ctx)
{
    struct t t = { .loop = loop, .guard = guard, .want = 4 * 150 };
    uv_timer_t tick;

    pair(&t, ctx, "inproc://exclusive");
    t.zw = pl_zwatch_new(loop, t.router, ZMQ_POLLIN, batch_cb, &t);
    pl_zwatch_set_exclusive(t.zw);
    ok(t.zw && pl_zwatch_start(t.zw) == 0, "exclusive: started");
    uv_timer_init(loop, &tick);
    tick.data = &t;
    uv_timer_start(&tick, burst_cb, 20, 20); /* the loop sleeps between */
    start_guard(&t, 2000);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(!t.timed_out, "exclusive: loop ended without the guard timer");
    is(t.n_cb, 600, "exclusive: all 600 messages of 4 bursts arrived");
    ok(t.bad == 0 && t.calls >= 600 / PL_ZBATCH,
       "exclusive: in order, in batches (%d calls)", t.calls);
    pl_zwatch_free(t.zw);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    unpair(&t);
}

/* The watcher frees itself from its callback with messages pending: no
 * use after free, and nothing keeps the loop alive or spinning. */
static void test_free_in_cb(uv_loop_t *loop, uv_timer_t *guard, void *ctx)
{
    struct t t = { .loop = loop, .guard = guard, .want = 1000,
                   .free_in_cb = true };

    pair(&t, ctx, "inproc://free");
    t.zw = pl_zwatch_new(loop, t.router, ZMQ_POLLIN, batch_cb, &t);
    pl_zwatch_start(t.zw);
    while (t.sent < 10 + PL_ZBATCH)
        send_seq(&t);
    start_guard(&t, 2000);
    int rc = uv_run(loop, UV_RUN_DEFAULT);
    ok(!t.timed_out && rc == 0, "free in callback: the loop ran out of work");
    is(t.calls, 1, "free in callback: one call");
    is(t.n_cb, PL_ZBATCH, "free in callback: one batch received");
    ok(t.zw == NULL && !uv_loop_alive(loop),
       "free in callback: no handle left on the loop");
    unpair(&t);

    /* freeing twice before the close callbacks run is harmless, and so is
     * NULL */
    pair(&t, ctx, "inproc://free2");
    struct pl_zwatch *zw = pl_zwatch_new(loop, t.router, ZMQ_POLLIN,
                                         batch_cb, &t);
    pl_zwatch_start(zw);
    pl_zwatch_free(zw);
    pl_zwatch_free(zw);
    pl_zwatch_free(NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(!uv_loop_alive(loop), "pl_zwatch_free twice, then NULL");
    unpair(&t);
}

static void count_cb(uv_check_t *h)
{
    (*(int *)h->data)++;
}

/* With nothing wanted, or stopped, the watcher calls nobody and the loop
 * sleeps: it does not spin on the idle handle. */
static void test_quiet(uv_loop_t *loop, uv_timer_t *guard, void *ctx)
{
    struct t t = { .loop = loop, .guard = guard, .want = 20 };
    uv_check_t spin;
    int iters = 0;

    uv_check_init(loop, &spin);
    spin.data = &iters;
    uv_check_start(&spin, count_cb);
    uv_unref((uv_handle_t *)&spin);

    pair(&t, ctx, "inproc://quiet");
    t.zw = pl_zwatch_new(loop, t.router, 0, batch_cb, &t);
    pl_zwatch_start(t.zw);
    while (t.sent < 10)
        send_seq(&t);
    start_guard(&t, 50);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(t.timed_out && t.calls == 0, "events 0: no callback");
    ok(iters < 50, "events 0: the loop slept (%d iterations in 50 ms)",
       iters);

    pl_zwatch_set_events(t.zw, ZMQ_POLLIN);
    t.want = 10;
    start_guard(&t, 2000);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(!t.timed_out && t.n_cb == 10, "set_events(POLLIN): the 10 arrive");

    /* stopped with messages pending */
    pl_zwatch_start(t.zw); /* check_done() stopped it */
    pl_zwatch_stop(t.zw);
    while (t.sent < 20)
        send_seq(&t);
    iters = 0;
    int calls = t.calls;
    start_guard(&t, 50);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(t.timed_out && t.calls == calls, "stopped: no callback");
    ok(iters < 50, "stopped: the loop slept (%d iterations in 50 ms)", iters);
    t.want = 20;
    pl_zwatch_start(t.zw);
    start_guard(&t, 2000);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(!t.timed_out && t.n_cb == 20 && t.bad == 0,
       "started again: the other 10 arrive");

    pl_zwatch_free(t.zw);
    uv_close((uv_handle_t *)&spin, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    unpair(&t);
}

/* POLLOUT wanted on a DEALER: the callback sends, then asks for nothing. */
static void out_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct t *t = arg;

    if (!(revents & ZMQ_POLLOUT) || (revents & ZMQ_POLLIN))
        t->bad++;
    send_seq(t);
    pl_zwatch_set_events(zw, 0);
}

static void test_pollout(uv_loop_t *loop, uv_timer_t *guard, void *ctx)
{
    struct t t = { .loop = loop, .guard = guard, .want = 1 };
    struct pl_zwatch *dw;

    pair(&t, ctx, "inproc://pollout");
    t.zw = pl_zwatch_new(loop, t.router, ZMQ_POLLIN, batch_cb, &t);
    dw = pl_zwatch_new(loop, t.dealer, ZMQ_POLLOUT, out_cb, &t);
    pl_zwatch_start(t.zw);
    pl_zwatch_start(dw);
    start_guard(&t, 2000);
    /* the dealer's watcher keeps the loop alive: stop it once received */
    while (uv_run(loop, UV_RUN_ONCE) && !t.timed_out && t.n_cb < 1)
        ;
    ok(!t.timed_out && t.sent == 1 && t.n_cb == 1 && t.bad == 0,
       "POLLOUT: the dealer's callback sent once, the router got it");
    pl_zwatch_free(dw);
    pl_zwatch_free(t.zw);
    uv_timer_stop(guard);
    uv_run(loop, UV_RUN_DEFAULT);
    unpair(&t);
}

/* Record pl_zsock_recv() results until EAGAIN. */
static void frames_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct t *t = arg;
    void *s = zw == t->zw ? t->router : t->dealer;

    (void)revents;
    while (t->nres < 4) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        int rc = pl_zsock_recv(s, s == t->router ? &id : NULL, &body);
        if (rc < 0 && errno == EAGAIN) {
            zmq_msg_close(&id);
            zmq_msg_close(&body);
            break;
        }
        t->rc[t->nres] = rc;
        t->err[t->nres] = rc < 0 ? errno : 0;
        snprintf(t->body[t->nres], sizeof(t->body[0]), "%.*s",
                 (int)zmq_msg_size(&body), (const char *)zmq_msg_data(&body));
        t->nres++;
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    if (t->nres >= t->want) {
        pl_zwatch_stop(zw);
        uv_timer_stop(t->guard);
    }
}

static void test_frames(uv_loop_t *loop, uv_timer_t *guard, void *ctx)
{
    struct t t = { .loop = loop, .guard = guard, .want = 2 };

    pair(&t, ctx, "inproc://frames");
    /* DEALER -> ROUTER: routing id + 2 frames = 3 frames */
    zmq_send(t.dealer, "a", 1, ZMQ_SNDMORE);
    zmq_send(t.dealer, "b", 1, 0);
    zmq_send(t.dealer, "good", 4, 0);
    t.zw = pl_zwatch_new(loop, t.router, ZMQ_POLLIN, frames_cb, &t);
    pl_zwatch_start(t.zw);
    start_guard(&t, 2000);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(!t.timed_out && t.nres == 2, "ROUTER: two messages seen");
    ok(t.rc[0] == -1 && t.err[0] == EPROTO,
       "ROUTER: a 3-frame message gives EPROTO (rc %d, errno %d)", t.rc[0],
       t.err[0]);
    ok(t.rc[1] == 0 && !strcmp(t.body[1], "good"),
       "ROUTER: the next message is received whole ('%s')", t.body[1]);
    pl_zwatch_free(t.zw);
    t.zw = NULL;

    /* ROUTER -> DEALER: 3 payload frames, then a good one */
    struct t u = { .loop = loop, .guard = guard, .want = 2,
                   .router = t.router, .dealer = t.dealer };
    zmq_send(t.router, "dealer", 6, ZMQ_SNDMORE);
    zmq_send(t.router, "x", 1, ZMQ_SNDMORE);
    zmq_send(t.router, "y", 1, ZMQ_SNDMORE);
    zmq_send(t.router, "z", 1, 0);
    is(pl_zsock_send(t.router, "dealer", 6, "good2", 5), 0,
       "pl_zsock_send with a routing id");
    struct pl_zwatch *dw = pl_zwatch_new(loop, t.dealer, ZMQ_POLLIN,
                                         frames_cb, &u);
    pl_zwatch_start(dw);
    start_guard(&u, 2000);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(!u.timed_out && u.nres == 2, "DEALER: two messages seen");
    ok(u.rc[0] == -1 && u.err[0] == EPROTO,
       "DEALER: a 3-frame message gives EPROTO (rc %d, errno %d)", u.rc[0],
       u.err[0]);
    ok(u.rc[1] == 0 && !strcmp(u.body[1], "good2"),
       "DEALER: the next message is received whole ('%s')", u.body[1]);
    pl_zwatch_free(dw);

    errno = 0;
    ok(pl_zsock_send(t.router, "nobody", 6, "x", 1) == -1
           && errno == EHOSTUNREACH,
       "ROUTER_MANDATORY: unknown peer gives EHOSTUNREACH");
    uv_run(loop, UV_RUN_DEFAULT);
    unpair(&t);
}

/* A real TCP round trip through pl_zsock_bind_any(). */
static void echo_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct t *t = arg;
    zmq_msg_t id, body;

    (void)revents;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if (zw == t->zw) { /* router: echo */
        while (pl_zsock_recv(t->router, &id, &body) == 0) {
            if (pl_zsock_send(t->router, zmq_msg_data(&id), zmq_msg_size(&id),
                              zmq_msg_data(&body), zmq_msg_size(&body)) < 0)
                t->bad++;
            t->n_cb++;
        }
    }
    else {
        while (pl_zsock_recv(t->dealer, NULL, &body) == 0) {
            if (zmq_msg_size(&body) != 5 || memcmp(zmq_msg_data(&body),
                                                   "hello", 5))
                t->bad++;
            t->n_timer++;
        }
        if (t->n_timer == 1) {
            pl_zwatch_stop(t->zw);
            pl_zwatch_stop(zw);
            uv_timer_stop(t->guard);
        }
    }
    zmq_msg_close(&id);
    zmq_msg_close(&body);
}

static void test_tcp(uv_loop_t *loop, uv_timer_t *guard, void *ctx)
{
    struct t t = { .loop = loop, .guard = guard };
    struct pl_error e = { "" };
    char ep[256] = "";
    struct pl_zwatch *dw;
    unsigned port = 0;
    char tail = 0;

    t.router = sock(ctx, ZMQ_ROUTER);
    t.dealer = sock(ctx, ZMQ_DEALER);
    is(pl_zsock_bind_any(t.router, "127.0.0.1", ep, sizeof(ep), &e), 0,
       "pl_zsock_bind_any 127.0.0.1");
    ok(sscanf(ep, "tcp://127.0.0.1:%u%c", &port, &tail) == 1 && port > 0
           && port < 65536,
       "endpoint is tcp://127.0.0.1:PORT (%s)", ep);
    e.text[0] = '\0';
    char ep2[256];
    ok(pl_zsock_bind_any(t.dealer, "256.0.0.1", ep2, sizeof(ep2), &e) == -1
           && e.text[0],
       "pl_zsock_bind_any on a bad address fails: %s", e.text);
    zmq_connect(t.dealer, ep);
    t.zw = pl_zwatch_new(loop, t.router, ZMQ_POLLIN, echo_cb, &t);
    dw = pl_zwatch_new(loop, t.dealer, ZMQ_POLLIN, echo_cb, &t);
    pl_zwatch_start(t.zw);
    pl_zwatch_start(dw);
    pl_zsock_send(t.dealer, NULL, 0, "hello", 5);
    start_guard(&t, 2000);
    uv_run(loop, UV_RUN_DEFAULT);
    ok(!t.timed_out && t.n_cb == 1 && t.n_timer == 1 && t.bad == 0,
       "TCP: echo through the ROUTER came back");
    pl_zwatch_free(dw);
    pl_zwatch_free(t.zw);
    uv_run(loop, UV_RUN_DEFAULT);
    unpair(&t);
}

/* pl_bind_addr: what pilotd binds on (issue 12: --bind) */
static void test_bind_addr(void)
{
    char addr[64], name[256];
    const char *why = "unset";
    struct pl_error e = { "" };
    struct addrinfo hints = { .ai_family = AF_INET }, *res = NULL;

    ok(pl_bind_addr("lo", addr, sizeof(addr), NULL, &e) == 0
           && !strcmp(addr, "127.0.0.1"),
       "--bind lo: its address, 127.0.0.1 (%s)", e.text);
    ok(pl_bind_addr("127.0.0.1", addr, sizeof(addr), NULL, &e) == 0
           && !strcmp(addr, "127.0.0.1"),
       "--bind 127.0.0.1: an address of this host");
    errno = 0;
    ok(pl_bind_addr("203.0.113.77", addr, sizeof(addr), NULL, &e) < 0
           && errno == EADDRNOTAVAIL
           && strstr(e.text, "--bind 203.0.113.77: not an address or "
                     "interface of this host (it has: lo 127.0.0.1"),
       "--bind of an address not ours: refused, the host's named (%s)",
       e.text);
    ok(pl_bind_addr("nosuch0", addr, sizeof(addr), NULL, &e) < 0
           && strstr(e.text, "nosuch0: not an address or interface"),
       "--bind of an interface there is not: refused");
    /* no --bind: the host name's address, unless it is a loopback one */
    int rc = pl_bind_addr(NULL, addr, sizeof(addr), &why, &e);
    gethostname(name, sizeof(name));
    name[sizeof(name) - 1] = '\0';
    bool loop_name = getaddrinfo(name, NULL, &hints, &res) != 0
                     || (ntohl(((struct sockaddr_in *)res->ai_addr)
                                   ->sin_addr.s_addr) >> 24) == 127;
    char named[64] = "";
    if (res) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr,
                  named, sizeof(named));
        freeaddrinfo(res);
    }
    if (loop_name)
        ok(rc == 0 && strncmp(addr, "127.", 4) && why,
           "no --bind, %s resolving to a loopback address: an interface's, "
           "%s, and why", name, rc == 0 ? addr : e.text);
    else
        ok(rc == 0 && !strcmp(addr, named) && !why,
           "no --bind: %s's address, %s", name, named);
}

int main(void)
{
    uv_loop_t loop;
    uv_timer_t guard;
    void *ctx = zmq_ctx_new();

    plan(48);
    test_bind_addr();
    alarm(20); /* a hang is a failure, not a stuck test run */
    uv_loop_init(&loop);
    uv_timer_init(&loop, &guard);

    errno = 0;
    ok(pl_zwatch_new(&loop, NULL, ZMQ_POLLIN, batch_cb, NULL) == NULL
           && errno == ENOTSOCK,
       "pl_zwatch_new on a non-socket fails (ENOTSOCK)");
    is(pl_zsock_events(NULL), ZMQ_POLLIN | ZMQ_POLLOUT,
       "pl_zsock_events gives all events when the query fails");

    test_batches(&loop, &guard, ctx);
    test_edge(&loop, &guard, ctx);
    test_free_in_cb(&loop, &guard, ctx);
    test_exclusive(&loop, &guard, ctx);
    test_quiet(&loop, &guard, ctx);
    test_pollout(&loop, &guard, ctx);
    test_frames(&loop, &guard, ctx);
    test_tcp(&loop, &guard, ctx);

    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    is(uv_loop_close(&loop), 0, "uv_loop_close: every handle closed");
    is(zmq_ctx_term(ctx), 0, "zmq_ctx_term: every socket closed");
    return done_testing();
}
