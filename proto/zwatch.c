/* proto/zwatch.c - a ZeroMQ socket inside the libuv loop, edge-trigger safe
 *
 * ZMQ_FD is edge-triggered and only says that ZMQ_EVENTS may have changed;
 * a send or recv anywhere on the loop thread can consume the edge.  So we
 * re-read ZMQ_EVENTS before every block (prepare) and after every wake-up
 * (check), and keep an idle handle running while events are pending so the
 * loop does not sleep on an fd that will not fire again.  The poll handle
 * stays on from start to stop: toggling it costs epoll_ctl() calls.
 *
 * Each read of ZMQ_EVENTS is two system calls (libzmq's getpid() fork
 * check and a poll() of its mailbox), and the loop wakes several times a
 * task (SIGCHLD, timers): the check after a wake-up reads it only when
 * the fd fired or events were pending before the block.  Skipping it
 * otherwise is safe: the prepare of the next iteration reads it before
 * any block, so at worst the callback runs one iteration later, never
 * after a sleep.
 */
#include <errno.h>
#include <stdlib.h>

#include <zmq.h>

#include "proto/zwatch.h"

struct pl_zwatch {
    uv_poll_t poll;       /* on ZMQ_FD, no-op callback: only wakes the loop */
    uv_prepare_t prepare; /* before blocking: re-read ZMQ_EVENTS */
    uv_check_t check;     /* after waking: re-read, then call the user */
    uv_idle_t idle;       /* active while events pending => no sleep */
    void *zsock;
    int events;
    int closing;          /* handles whose close callback is still due */
    int started;
    int woke;             /* the poll fd fired since the last check */
    int pending;          /* idle started: events were pending */
    int exclusive;        /* pl_zwatch_set_exclusive() */
    int touched;          /* exclusive: the socket was used (or may have
                             changed) since ZMQ_EVENTS was last read */
    pl_zwatch_f cb;
    void *arg;
};

int pl_zsock_events(void *zsock)
{
    int ev = 0;
    size_t len = sizeof(ev);

    if (zmq_getsockopt(zsock, ZMQ_EVENTS, &ev, &len) < 0)
        return ZMQ_POLLIN | ZMQ_POLLOUT;
    return ev;
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    struct pl_zwatch *zw = h->data;

    (void)status;
    (void)events;
    zw->woke = 1;
}

static void noop_idle_cb(uv_idle_t *h)
{
    (void)h;
}

static void prepare_cb(uv_prepare_t *h)
{
    struct pl_zwatch *zw = h->data;

    /* N.B. exclusive and untouched: the last read found nothing and
     * nothing consumed the fd's signal since, so a new message makes
     * the fd readable and the poll wakes the loop */
    if (zw->exclusive && !zw->touched)
        return;
    zw->touched = 0;
    if (pl_zsock_events(zw->zsock) & zw->events) {
        uv_idle_start(&zw->idle, noop_idle_cb);
        zw->pending = 1;
    }
}

static void check_cb(uv_check_t *h)
{
    struct pl_zwatch *zw = h->data;
    int revents;

    if (!zw->woke && !zw->pending)
        return; /* nothing since the prepare's read: see the top */
    zw->woke = 0;
    zw->pending = 0;
    uv_idle_stop(&zw->idle);
    zw->touched = 0;
    if ((revents = pl_zsock_events(zw->zsock) & zw->events)) {
        zw->touched = 1; /* before: the callback may free zw */
        zw->cb(zw, revents, zw->arg); /* may stop or free zw */
    }
}

struct pl_zwatch *pl_zwatch_new(uv_loop_t *loop, void *zsock, int events,
                                pl_zwatch_f cb, void *arg)
{
    struct pl_zwatch *zw;
    uv_os_sock_t fd;
    size_t len = sizeof(fd);
    int rc;

    if (zmq_getsockopt(zsock, ZMQ_FD, &fd, &len) < 0)
        return NULL;
    if (!(zw = calloc(1, sizeof(*zw))))
        return NULL;
    zw->zsock = zsock;
    zw->events = events;
    zw->cb = cb;
    zw->arg = arg;
    if ((rc = uv_poll_init_socket(loop, &zw->poll, fd)) < 0) {
        free(zw);
        errno = -rc;
        return NULL;
    }
    uv_prepare_init(loop, &zw->prepare);
    uv_check_init(loop, &zw->check);
    uv_idle_init(loop, &zw->idle);
    zw->poll.data = zw->prepare.data = zw->check.data = zw->idle.data = zw;
    return zw;
}

int pl_zwatch_start(struct pl_zwatch *zw)
{
    int rc;

    if (zw->started)
        return 0;
    if ((rc = uv_poll_start(&zw->poll, UV_READABLE, poll_cb)) < 0) {
        errno = -rc;
        return -1;
    }
    uv_prepare_start(&zw->prepare, prepare_cb);
    uv_check_start(&zw->check, check_cb);
    zw->started = 1;
    zw->woke = 1; /* the first check reads ZMQ_EVENTS */
    zw->touched = 1;
    return 0;
}

void pl_zwatch_stop(struct pl_zwatch *zw)
{
    uv_poll_stop(&zw->poll);
    uv_prepare_stop(&zw->prepare);
    uv_check_stop(&zw->check);
    uv_idle_stop(&zw->idle);
    zw->pending = 0;
    zw->started = 0;
}

void pl_zwatch_set_events(struct pl_zwatch *zw, int events)
{
    zw->events = events;
    zw->touched = 1;
}

void pl_zwatch_set_exclusive(struct pl_zwatch *zw)
{
    zw->exclusive = 1;
    zw->touched = 1;
}

static void close_cb(uv_handle_t *h)
{
    struct pl_zwatch *zw = h->data;

    if (--zw->closing == 0)
        free(zw);
}

void pl_zwatch_free(struct pl_zwatch *zw)
{
    if (!zw || zw->closing)
        return;
    int saved = errno;
    pl_zwatch_stop(zw);
    zw->closing = 4;
    uv_close((uv_handle_t *)&zw->poll, close_cb);
    uv_close((uv_handle_t *)&zw->prepare, close_cb);
    uv_close((uv_handle_t *)&zw->check, close_cb);
    uv_close((uv_handle_t *)&zw->idle, close_cb);
    errno = saved;
}
