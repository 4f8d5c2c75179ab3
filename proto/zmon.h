/* proto/zmon.h - a ZeroMQ socket's monitor events inside the libuv loop */
#ifndef PL_PROTO_ZMON_H
#define PL_PROTO_ZMON_H

#include <stdint.h>

#include <uv.h>

#include "proto/error.h"

struct pl_zmon;

/* Called on the loop thread for each event: 'event' is one ZMQ_EVENT_*,
 * 'value' its value (an errno, a ZAP status code, a
 * ZMQ_PROTOCOL_ERROR_*: see zmq_socket_monitor(3)).  May free 'm'. */
typedef void (*pl_zmon_f)(struct pl_zmon *m, int event, uint32_t value,
                          void *arg);

/* Deliver the 'events' (a mask of ZMQ_EVENT_*) of 'sock' (borrowed)
 * through a PAIR socket in 'ctx' (the context of 'sock'), watched on
 * 'loop'.  Set it up before 'sock' binds or connects to see every
 * event.  Returns NULL with errp set. */
struct pl_zmon *pl_zmon_new(uv_loop_t *loop, void *ctx, void *sock,
                            int events, pl_zmon_f cb, void *arg,
                            struct pl_error *errp);

/* Close the PAIR socket and the watcher (whose handles close on the
 * next loop iteration, as with pl_zwatch_free()).  'sock' is not
 * touched: it may be closed before or after.  NULL is ok. */
void pl_zmon_free(struct pl_zmon *m);

#endif /* !PL_PROTO_ZMON_H */
