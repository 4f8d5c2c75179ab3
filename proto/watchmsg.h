/* proto/watchmsg.h - watches: a client's subscription to task ends
 *
 * A client names a watch with a token of its own choosing, puts tasks in
 * it (WATCH 112, or a submit's 'watch' field) and attaches a connection
 * to it; pilotd then pushes ENDS (2) to that connection, after the
 * commit that stored them, each end numbered by pilotd's end sequence
 * (tasks.end_seq).  A client that lost pushes (a reconnect, a restarted
 * pilotd, a gap in the push counter) sends WATCH again with 'after', the
 * last end seq it has, and gets what came after, in order.  UNWATCH
 * (113) drops a watch.  docs/protocol.md, "Watches".
 */
#ifndef PL_PROTO_WATCHMSG_H
#define PL_PROTO_WATCHMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "proto/clientmsg.h"
#include "proto/error.h"
#include "proto/msg.h"

#define PL_WATCH_TOKEN_MIN 16
#define PL_WATCH_TOKEN_MAX 64
/* Tasks one watch holds: 8 MB of sorted ids in pilotd, and a pointer on
 * each live task. */
#define PL_WATCH_MAX_IDS 1000000
/* Ends in one push: at most about 250 KB of frame (a reason is at most
 * 127 bytes in pilotd), so a push never holds a client's loop long. */
#define PL_ENDS_MAX 1000
#define PL_END_REASON_MAX 1024      /* bytes of an end's reason, decoded */
/* A decoder takes an end's 'result' bin of at most this many bytes;
 * pilotd sends a Python call's result with its end when it is stored
 * inline and is at most PL_END_RESULT_INLINE (1,000 of them, 4 MB, in
 * one push): an Executor needs no request for a small value. */
#define PL_END_RESULT_MAX (64 * 1024)
#define PL_END_RESULT_INLINE 4096

/* Whether 's' is a token: 16 to 64 of [A-Za-z0-9_-]. */
bool pl_watch_token_ok(const char *s);

/* WATCH (112): make the watch 'token' (or find it: it belongs to the key
 * that made it), add the tasks of 'sel' or make it 'all' (every task of
 * the pilot, those submitted later too), or with 'make' alone make it
 * empty (tasks join it later: a submit's 'watch'), attach this connection as the
 * one its pushes go to ('attach'), and with 'has_after' resume: what it
 * pushes next are the ends of its tasks whose end seq is above 'after',
 * read from the database, then the live ones.  'sel' is owned once
 * decoded (pl_watch_req_clear()). */
struct pl_watch_req {
    char token[PL_WATCH_TOKEN_MAX + 1];
    bool attach;
    bool all;
    bool make;             /* make it even with no tasks (an empty one) */
    bool has_after;
    uint64_t after;
    struct pl_sel_req sel;
};
void pl_watch_req_encode(struct pl_wbuf *w, uint64_t seq,
                         const struct pl_watch_req *r);
/* 0, or -1 with errp (EPROTO: a field of the wrong type; EINVAL: a bad
 * token, 'all' with a selection) and nothing held. */
int pl_watch_req_decode(const msgpack_object *body, struct pl_watch_req *r,
                        struct pl_error *errp);
void pl_watch_req_clear(struct pl_watch_req *r);

/* UNWATCH (113): the token alone. */
void pl_unwatch_encode(struct pl_wbuf *w, uint64_t seq, const char *token);
int pl_unwatch_decode(const msgpack_object *body,
                      char token[PL_WATCH_TOKEN_MAX + 1],
                      struct pl_error *errp);

/* A submit's 'watch' (proto/clientmsg.h) into 'token': 1, 0 if absent
 * (token ""), or -1 with errp (EPROTO, EINVAL: not a token). */
int pl_submit_watch_decode(const msgpack_object *body,
                           char token[PL_WATCH_TOKEN_MAX + 1],
                           struct pl_error *errp);

/* The data of WATCH's reply. */
struct pl_watch_reply {
    char token[PL_WATCH_TOKEN_MAX + 1];
    uint64_t seq;          /* pilotd's last end seq when it answered */
    uint64_t n;            /* pushes sent so far: the next is n + 1 */
    uint64_t watching;     /* tasks it holds ('all': the pilot's) */
    uint64_t pending;      /* of those, not ended (or their end not
                              pushed yet) */
};
/* The whole reply to request 'seq' in 'w'. */
void pl_watch_reply_encode(struct pl_wbuf *w, uint64_t seq,
                           const struct pl_watch_reply *r);
/* From a reply's data (pl_reply_decode()).  0, or -1 with errp (EPROTO). */
int pl_watch_reply_decode(const msgpack_object *data,
                          struct pl_watch_reply *r, struct pl_error *errp);

/* One task's end. */
struct pl_end {
    uint64_t seq;          /* its end seq (>= 1) */
    uint64_t id;
    int state;             /* a final state (proto/state.h) */
    int exit_code;         /* -1: none */
    int signal;            /* -1: none */
    double end_time;       /* s since the epoch */
    char *reason;          /* NULL: none.  Owned when decoded */
    const void *result;    /* a Python call's result (the pickle: its
                              value if 'state' is done, (exception,
                              traceback) if failed), or NULL: none, or
                              not small (ask with RESULTS).  Borrowed:
                              from the message when decoded */
    size_t result_size;
};

/* ENDS (2), pushed: the watch, its push counter 'n' (1, 2, ...: a gap
 * means pushes were lost), 'pending' (as in the reply, after these) and
 * up to PL_ENDS_MAX ends in ascending seq. */
struct pl_ends {
    char token[PL_WATCH_TOKEN_MAX + 1];
    uint64_t n;
    uint64_t pending;
    struct pl_end *ends;   /* owned when decoded */
    uint32_t nends;
};
void pl_ends_encode(struct pl_wbuf *w, const char *token, uint64_t n,
                    uint64_t pending, const struct pl_end *ends,
                    uint32_t nends);
/* 0, or -1 with errp (EPROTO, ENOMEM) and nothing held; on success
 * pl_ends_clear() it (a result borrows from 'body'). */
int pl_ends_decode(const msgpack_object *body, struct pl_ends *e,
                   struct pl_error *errp);
void pl_ends_clear(struct pl_ends *e);

#endif /* !PL_PROTO_WATCHMSG_H */
