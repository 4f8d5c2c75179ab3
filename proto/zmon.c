/* proto/zmon.c - a ZeroMQ socket's monitor events inside the libuv loop
 *
 * zmq_socket_monitor() makes the monitored socket publish its events on
 * an inproc PAIR endpoint; we connect our own PAIR there and watch it
 * with pl_zwatch like any socket.  Each event is two frames: 6 bytes
 * (a 16-bit event and a 32-bit value, host order) and an endpoint (for
 * a bound socket, its own address, never the peer's: libzmq 4.3).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "proto/zmon.h"
#include "proto/zwatch.h"

struct pl_zmon {
    void *pair;
    struct pl_zwatch *zw;
    pl_zmon_f cb;
    void *arg;
    bool in_cb;  /* inside cb: a free waits until it returns */
    bool dead;   /* freed from inside cb */
};

static void destroy(struct pl_zmon *m)
{
    pl_zwatch_free(m->zw); /* before zmq_close(), as it asks */
    if (m->pair)
        zmq_close(m->pair);
    free(m);
}

/* The rest of a message whose first frame was not an event: dropped. */
static void drain(void *pair)
{
    int more = 1;
    size_t len = sizeof(more);
    zmq_msg_t junk;

    zmq_msg_init(&junk);
    while (zmq_getsockopt(pair, ZMQ_RCVMORE, &more, &len) == 0 && more
           && zmq_msg_recv(&junk, pair, 0) >= 0)
        ;
    zmq_msg_close(&junk);
}

static void pair_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct pl_zmon *m = arg;
    (void)zw;
    (void)revents;

    m->in_cb = true;
    for (int i = 0; i < PL_ZBATCH && !m->dead; i++) {
        zmq_msg_t msg;
        uint16_t event;
        uint32_t value;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, m->pair, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            break; /* EAGAIN: all read */
        }
        bool good = zmq_msg_size(&msg) == 6 && zmq_msg_more(&msg);
        if (good) {
            memcpy(&event, zmq_msg_data(&msg), sizeof(event));
            memcpy(&value, (char *)zmq_msg_data(&msg) + 2, sizeof(value));
        }
        zmq_msg_close(&msg);
        drain(m->pair); /* the endpoint frame */
        if (good)
            m->cb(m, event, value, m->arg);
    }
    m->in_cb = false;
    if (m->dead)
        destroy(m);
}

struct pl_zmon *pl_zmon_new(uv_loop_t *loop, void *ctx, void *sock,
                            int events, pl_zmon_f cb, void *arg,
                            struct pl_error *errp)
{
    struct pl_zmon *m;
    char ep[64];
    int linger = 0;

    if (!(m = calloc(1, sizeof(*m)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    m->cb = cb;
    m->arg = arg;
    /* unique in the context while 'm' lives */
    snprintf(ep, sizeof(ep), "inproc://pl-zmon-%p", (void *)m);
    if (zmq_socket_monitor(sock, ep, events) < 0) {
        pl_errprintf(errp, "zmq_socket_monitor: %s", zmq_strerror(errno));
        pl_zmon_free(m);
        return NULL;
    }
    if (!(m->pair = zmq_socket(ctx, ZMQ_PAIR))
        || zmq_setsockopt(m->pair, ZMQ_LINGER, &linger, sizeof(linger)) < 0
        || zmq_connect(m->pair, ep) < 0) {
        pl_errprintf(errp, "monitor socket: %s", zmq_strerror(errno));
        goto error;
    }
    if (!(m->zw = pl_zwatch_new(loop, m->pair, ZMQ_POLLIN, pair_cb, m))
        || pl_zwatch_start(m->zw) < 0) {
        pl_errprintf(errp, "watch monitor socket: %s", strerror(errno));
        goto error;
    }
    return m;
error:
    zmq_socket_monitor(sock, NULL, 0); /* stop publishing to nobody */
    pl_zmon_free(m);
    return NULL;
}

void pl_zmon_free(struct pl_zmon *m)
{
    if (!m)
        return;
    int saved = errno;
    if (m->in_cb)
        m->dead = true;
    else
        destroy(m);
    errno = saved;
}
