/* daemon/auth.h - pilotd's ZAP handler: CURVE peers judged by allow-list */
#ifndef PL_DAEMON_AUTH_H
#define PL_DAEMON_AUTH_H

#include <stdbool.h>

#include <uv.h>

#include "proto/allow.h"
#include "proto/error.h"

struct pl_auth;

/* Load pilotd's keypair (kdir/server.key) and the allow-list
 * (kdir/allow/), bind the ZAP handler (RFC 27: a REP socket on
 * inproc://zeromq.zap.01) in 'zctx' and answer it on 'loop'.
 * N.B. before any server socket of 'zctx' binds: libzmq admits every
 * CURVE client of a context that has no handler.  Returns NULL with
 * errp set. */
struct pl_auth *pl_auth_new(uv_loop_t *loop, void *zctx, const char *kdir,
                            struct pl_error *errp);

/* Make 'sock' (of the same context) a CURVE server with pilotd's key,
 * its peers judged in ZAP domain 'domain' ("clients", "agents"): only
 * keys of the allow-list whose role is in 'roles' (a mask of 1 << enum
 * pl_role) get in.  Logs the handshakes it breaks off before ZAP sees
 * them (a peer without CURVE, or with another server's key).  Before
 * zmq_bind().  Returns 0, or -1 with errp set. */
int pl_auth_server(struct pl_auth *au, void *sock, const char *domain,
                   unsigned roles, struct pl_error *errp);

/* Read the allow-list again: new handshakes are judged by it, and so is
 * pl_auth_peer().  If it cannot be read, the list stays as it was (the
 * error is logged).  Returns 0, or -1 with errp set. */
int pl_auth_reload(struct pl_auth *au, struct pl_error *errp);

/* Keys in the allow-list now. */
size_t pl_auth_count(const struct pl_auth *au);

/* The allowed key of the peer whose message carried 'user' (its
 * "User-Id" property, as our ZAP handler set it at the handshake), or
 * NULL if that key is no longer allowed (or 'user' is NULL).  Borrowed:
 * valid until the next pl_auth_reload(). */
const struct pl_allow_key *pl_auth_peer(const struct pl_auth *au,
                                        const char *user);

/* Whether a key named 'name' is in the allow-list now. */
bool pl_auth_has_name(const struct pl_auth *au, const char *name);

/* Stop answering and close the loop handles (they are released by the
 * next loop iteration).  Later calls do nothing. */
void pl_auth_stop(struct pl_auth *au);

/* Stop, then close the handler's sockets and free 'au'.  N.B. only after
 * the server sockets it judges are closed: with no handler, a CURVE
 * server admits anyone.  NULL is ok. */
void pl_auth_free(struct pl_auth *au);

#endif /* !PL_DAEMON_AUTH_H */
