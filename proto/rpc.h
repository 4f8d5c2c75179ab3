/* proto/rpc.h - a client's request/reply calls to pilotd over a DEALER */
#ifndef PL_PROTO_RPC_H
#define PL_PROTO_RPC_H

#include <stdint.h>

#include "proto/error.h"
#include "proto/keys.h"
#include "proto/msg.h"

struct pl_rpc;

/* Connect to pilotd's client endpoint with CURVE, as 'keys' (copied;
 * see pl_keys_load_peer()).  The process's one libuv loop is owned by
 * the rpc object.  Returns NULL with errp set. */
struct pl_rpc *pl_rpc_new(const char *endpoint,
                          const struct pl_keys_peer *keys,
                          struct pl_error *errp);
void pl_rpc_free(struct pl_rpc *r);

/* The sequence number to build the next request with. */
uint64_t pl_rpc_seq(struct pl_rpc *r);

/* Send the request in 'w' and wait up to 'timeout_ms' for its reply.
 * On success 'reply' holds the reply (pl_msg_release() it) and *data is
 * its data object (borrowed from 'reply').  On failure returns -1 with
 * errno and errp: ETIMEDOUT if pilotd did not answer (the text says
 * when no CURVE handshake completed), EACCES if pilotd refused our key
 * (at once, not at the timeout), EPROTO if the handshake failed three
 * times (another server key?) or pilotd speaks another protocol
 * version, or the errno and text pilotd replied with. */
int pl_rpc_call(struct pl_rpc *r, struct pl_wbuf *w, int timeout_ms,
                struct pl_msg *reply, const msgpack_object **data,
                struct pl_error *errp);

/* What is not a reply: a frame pilotd pushes (its type is not REPLY:
 * ENDS, proto/watchmsg.h), borrowed for the call; and the connection's
 * events ZMQ_EVENT_DISCONNECTED and ZMQ_EVENT_HANDSHAKE_SUCCEEDED (a
 * DEALER connects again by itself: what was queued on the old
 * connection is lost).  Both are called on the loop of 'r', from
 * pl_rpc_call() and pl_rpc_wait(): they must not call 'r'. */
typedef void (*pl_rpc_push_f)(struct pl_rpc *r, const struct pl_msg *m,
                              void *arg);
typedef void (*pl_rpc_event_f)(struct pl_rpc *r, int event, void *arg);
/* Give pushes and events to 'push' and 'event' (either may be NULL:
 * pushes are then dropped, as before any is set). */
void pl_rpc_set_push(struct pl_rpc *r, pl_rpc_push_f push,
                     pl_rpc_event_f event, void *arg);

/* Run the loop of 'r' for up to 'timeout_ms' (0: only what is there
 * now), until a push or an event has been given to its callback.
 * Returns 1 if one was, 0 if the time passed. */
int pl_rpc_wait(struct pl_rpc *r, int timeout_ms);

#endif /* !PL_PROTO_RPC_H */
