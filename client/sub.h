/* client/sub.h - a client's watch of task ends (proto/watchmsg.h)
 *
 * A subscription owns a watch in pilotd (a token it makes) and is given
 * the ends pilotd pushes, each once, in the order of pilotd's end
 * sequence.  It keeps the token, the last end seq and push counter it
 * had, and the selections it was given, and sends WATCH again with
 * 'after' (the last seq) after its connection came back, on a gap in
 * the push counter, or after 5 s without a word from pilotd; a watch
 * pilotd no longer has (expired, or pilotd restarted) is made again
 * from the selections.  No printing, no exit: 0/-1 with errno and a
 * struct pl_error, for the CLI and the shared library to come.
 */
#ifndef PL_CLIENT_SUB_H
#define PL_CLIENT_SUB_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/clientmsg.h"
#include "proto/error.h"
#include "proto/rpc.h"
#include "proto/watchmsg.h"

/* Seconds without a push or a reply after which a subscription asks
 * pilotd again (pilotd pushes at least every 3 s to an attached watch). */
#define PL_SUB_SILENCE 5.0

struct pl_sub;

/* Called once for each task's end, in seq order; 'e' is borrowed for
 * the call.  It must not call the subscription. */
typedef void (*pl_sub_end_f)(struct pl_sub *s, const struct pl_end *e,
                             void *arg);

/* A subscription over 'rpc' (borrowed: it must outlive the subscription
 * or be replaced with pl_sub_set_rpc()), whose requests wait up to
 * 'timeout_ms'.  'token' NULL: a new random one.  It takes the pushes of
 * 'rpc' (pl_rpc_set_push()).  NULL with errp (EINVAL: a bad token;
 * ENOMEM; EIO: no random bytes). */
struct pl_sub *pl_sub_new(struct pl_rpc *rpc, const char *token,
                          int timeout_ms, pl_sub_end_f cb, void *arg,
                          struct pl_error *errp);
/* Leaves the watch in pilotd (pl_sub_unwatch() drops it); NULL ok. */
void pl_sub_free(struct pl_sub *s);
/* Borrowed, valid until pl_sub_free(). */
const char *pl_sub_token(const struct pl_sub *s);

/* Add the tasks of 'sel' (copied), or every task of the pilot ('all'),
 * to the watch, making it if new, with this connection attached; with
 * neither ('sel' NULL or empty, 'all' false), make it empty if new, for
 * tasks a submit's 'watch' adds (pl_sub_note() them).  Ends of tasks
 * that had ended before are not pushed.  0, or -1 with errno and errp:
 * pilotd's answer (ENOENT: no such task; E2BIG, EMFILE: a limit),
 * ETIMEDOUT, ENOMEM. */
int pl_sub_add(struct pl_sub *s, const struct pl_sel_req *sel, bool all,
               struct pl_error *errp);

/* Remember that the tasks 'ids' ('n' of them, copied) joined the watch
 * in pilotd by a submit's 'watch' field: a watch made again (pilotd
 * restarted) holds them too.  Nothing is sent.  0, or -1 (ENOMEM). */
int pl_sub_note(struct pl_sub *s, const uint64_t *ids, size_t n);

/* A client that comes back (it was killed, say) to its watch 'token'
 * (given to pl_sub_new()) with the last end seq it had, 'after': the
 * ends after it are pushed again, in order; if pilotd no longer has the
 * watch it is made again with 'sel' or 'all' (what the client had given
 * it), then resumed.  0, or -1 with errno and errp as pl_sub_add(). */
int pl_sub_resume(struct pl_sub *s, uint64_t after,
                  const struct pl_sel_req *sel, bool all,
                  struct pl_error *errp);

/* Wait up to 'timeout_ms' (0: only what has come) for pushes, giving
 * their ends to the callback, and ask pilotd again when a push was
 * lost, the connection came back, or pilotd said nothing for
 * PL_SUB_SILENCE.  Returns 1 if something came (ends, or a new
 * 'pending'), 0 if the time passed, -1 with errp when asking pilotd
 * failed (ETIMEDOUT: it did not answer; the subscription asks again at
 * the next call). */
int pl_sub_wait(struct pl_sub *s, int timeout_ms, struct pl_error *errp);

/* Ask pilotd how many of the watch's tasks are pending (a submit with
 * its token added some, and no push since may have counted them): the
 * pushes that came before the reply are read first, so what it says
 * is exact after them.  0, or -1 with errno and errp (ENOENT: pilotd
 * lost the watch; it is made again at the next pl_sub_wait()). */
int pl_sub_refresh(struct pl_sub *s, struct pl_error *errp);

/* The tasks of the watch that pilotd last said were not ended (or whose
 * end it had not pushed yet); UINT64_MAX before its first answer. */
uint64_t pl_sub_pending(const struct pl_sub *s);
/* The last end seq given to the callback. */
uint64_t pl_sub_last_seq(const struct pl_sub *s);

/* Go on over 'rpc' (another connection: the pilot's endpoint changed);
 * the watch is asked for again at the next pl_sub_wait().  NULL: the
 * old one is gone (freed), and nothing may be asked until another. */
void pl_sub_set_rpc(struct pl_sub *s, struct pl_rpc *rpc);

/* Drop the watch in pilotd.  0, or -1 with errno and errp. */
int pl_sub_unwatch(struct pl_sub *s, struct pl_error *errp);

#endif /* !PL_CLIENT_SUB_H */
