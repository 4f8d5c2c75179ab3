/* agent/pool.h - the pool workers of this node: their socket, the calls
 * the agent gives them, and what becomes of those calls
 *
 * The agent listens on an abstract unix socket (proto/poolmsg.h) for the
 * workers of the pools' MPI jobs running on its node.  A pool task's
 * rank (a RUN entry with 'pool') goes to the worker of its world rank
 * as a CALL; the worker's ENTERED and RETURN become the rank's running
 * and end events.  A worker that goes away in a call ends the rank: of
 * its signal (CRASH), of our kill (a timeout, a cancel: both take the
 * pool's job down), or, with no word from it, lost (its job went down
 * under it: the task runs again).  docs/pool.md.
 */
#ifndef PL_AGENT_POOL_H
#define PL_AGENT_POOL_H

#include <stddef.h>

#include "proto/agentmsg.h"
#include "proto/error.h"
#include "proto/run.h"

struct pl_agent;
struct pl_wpool;

/* Listen for the workers of node 'node' of the pilot whose keys are in
 * 'keydir', on the agent's loop.  NULL with errp (the socket's name is
 * taken: another agent of this pilot on this node?). */
struct pl_wpool *pl_wpool_new(struct pl_agent *a, const char *keydir,
                              const char *node, struct pl_error *errp);
/* Close the socket and every worker connection (the workers see EOF and
 * exit); the memory goes with the loop's last run. */
void pl_wpool_close(struct pl_wpool *p);

/* Give entry 'r' (a pool task's rank, decoded) to its worker; if there
 * is none, or it is busy, the rank ends lost (the task runs again). */
void pl_wpool_call(struct pl_wpool *p, const struct pl_run *r);
/* KILL: the workers running the ranks 'k' names are killed (their job
 * goes down); their ranks end canceled.  How many. */
size_t pl_wpool_kill(struct pl_wpool *p, const struct pl_kill *k);
/* The ranks in calls now, for REGISTER: into 'out' (room for 'max'),
 * returns how many there are. */
size_t pl_wpool_held(const struct pl_wpool *p, struct pl_held *out,
                     size_t max);
/* Send POOL_READY for the workers not yet reported to this pilotd; with
 * 'again', for every worker (a new pilotd welcomed us). */
void pl_wpool_report(struct pl_wpool *p, bool again);

#endif /* !PL_AGENT_POOL_H */
