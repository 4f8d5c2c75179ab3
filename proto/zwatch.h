/* proto/zwatch.h - a ZeroMQ socket inside the libuv loop, edge-trigger safe */
#ifndef PL_PROTO_ZWATCH_H
#define PL_PROTO_ZWATCH_H

#include <uv.h>

struct pl_zwatch;

/* Called on the loop thread with the ZMQ_POLLIN/ZMQ_POLLOUT events that
 * are both pending and wanted.  Handle a bounded batch (PL_ZBATCH) with
 * ZMQ_DONTWAIT; if more is pending the watcher keeps the loop from
 * sleeping.  May stop or free the watcher. */
typedef void (*pl_zwatch_f)(struct pl_zwatch *zw, int revents, void *arg);

#define PL_ZBATCH 64

/* Watch 'zsock' (borrowed; free the watcher before zmq_close()) for
 * 'events'.  Returns NULL with errno set. */
struct pl_zwatch *pl_zwatch_new(uv_loop_t *loop, void *zsock, int events,
                                pl_zwatch_f cb, void *arg);

/* Start or stop watching; start is idempotent. */
int pl_zwatch_start(struct pl_zwatch *zw);
void pl_zwatch_stop(struct pl_zwatch *zw);

/* Change the events wanted (e.g. add ZMQ_POLLOUT while output is queued). */
void pl_zwatch_set_events(struct pl_zwatch *zw, int events);

/* The owner promises that nothing but the watcher's callback sends,
 * receives or reads options on the socket: then the read of ZMQ_EVENTS
 * before a block is left out unless the callback ran (or the fd fired)
 * since the last read, and an idle socket costs nothing a loop
 * iteration (pilotd's ZAP socket: two system calls each). */
void pl_zwatch_set_exclusive(struct pl_zwatch *zw);

/* Close the handles; the memory is released in the last close callback,
 * so this may be called from the watcher's own callback.  NULL is ok. */
void pl_zwatch_free(struct pl_zwatch *zw);

/* ZMQ_EVENTS of 'zsock', or all events if the query fails (EINTR), so that
 * the caller's ZMQ_DONTWAIT call sees the error. */
int pl_zsock_events(void *zsock);

#endif /* !PL_PROTO_ZWATCH_H */
