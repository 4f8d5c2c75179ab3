/* proto/zsock.h - ZeroMQ socket set-up, framing and endpoints */
#ifndef PL_PROTO_ZSOCK_H
#define PL_PROTO_ZSOCK_H

#include <stddef.h>

#include <zmq.h>

#include "proto/error.h"
#include "proto/keys.h"

/* A new socket of 'type' with our options: ZMQ_LINGER, ZMQ_MAXMSGSIZE
 * (PL_MSG_MAX), high-water marks sized for bursts; ROUTERs get
 * ZMQ_ROUTER_MANDATORY.  Returns NULL with errp set. */
void *pl_zsock_new(void *ctx, int type, struct pl_error *errp);

/* Make 'sock' a CURVE server with keypair 'kp' (only peers that know
 * its public key can connect) whose peers are judged by the process's
 * ZAP handler in 'domain' (docs/protocol.md, "Authentication").  Call
 * before zmq_bind().  Returns 0 or -1 (errp). */
int pl_zsock_curve_server(void *sock, const struct pl_keypair *kp,
                          const char *domain, struct pl_error *errp);

/* Make 'sock' a CURVE client of the server whose public key is
 * 'serverkey' (Z85), as 'kp'.  Call before zmq_connect().  Returns 0 or
 * -1 (errp). */
int pl_zsock_curve_client(void *sock, const char *serverkey,
                          const struct pl_keypair *kp,
                          struct pl_error *errp);

/* Bind 'sock' to tcp://ADDR:* (an ephemeral port on ADDR, never 0.0.0.0)
 * and store the resulting endpoint in 'ep'.  Returns 0 or -1 (errp). */
int pl_zsock_bind_any(void *sock, const char *addr, char *ep, size_t eplen,
                      struct pl_error *errp);

/* Send 'len' bytes, preceded by a routing-id frame when 'id' is not NULL
 * (ROUTER).  Never blocks: -1 with errno EAGAIN or EHOSTUNREACH. */
int pl_zsock_send(void *sock, const void *id, size_t idlen, const void *buf,
                  size_t len);

/* Receive one message: on a ROUTER 'id' (may be NULL for a DEALER) gets
 * the routing id; 'body' gets the single payload frame.  Messages with
 * a different frame count are read whole and dropped (EPROTO).  Both
 * zmq_msg_t must be initialised by the caller and closed afterwards.
 * Returns 0, or -1 with errno (EAGAIN when nothing is queued). */
int pl_zsock_recv(void *sock, zmq_msg_t *id, zmq_msg_t *body);

/* The IPv4 address pilotd binds on, into 'addr' ('len' >= 16 bytes).
 * 'spec' is an address of this host ("10.1.2.3") or the name of one of
 * its interfaces ("ib0": its first IPv4 address).  NULL: the first
 * address of this host's name, unless that is a loopback one (127.0.1.1
 * on many Debian hosts, which no other node reaches): then the first
 * address of an interface that is up and not loopback, and *why (if not
 * NULL) says so.  0, or -1 with errp naming the interfaces and their
 * addresses (errno EADDRNOTAVAIL, or getifaddrs()'s). */
int pl_bind_addr(const char *spec, char *addr, size_t len, const char **why,
                 struct pl_error *errp);

#endif /* !PL_PROTO_ZSOCK_H */
