/* agent/pyw.h - warm Python workers: the calls of fn pycall tasks
 *
 * A Python call (a RUN entry with fn pycall) runs in a worker process of
 * this agent that outlives it: the interpreter running
 * python/pilot/_pyworker.py, bound to the call's cores and GPUs as a
 * task would be, one end of a socketpair as its fd 3 (proto/pywmsg.h).
 * Workers are keyed by (interpreter, prelude, environment, cores, GPUs);
 * a worker runs one call at a time, an idle one of the right key is
 * used again, and there are at most as many as the node has cores (the
 * least recently used idle one makes room).  An idle worker exits after
 * 10 minutes.  A worker that dies fails only its call; a timeout or a
 * cancel interrupts the call (SIGINT: KeyboardInterrupt, the worker
 * stays), then kills the worker 2 s later.  docs/python-reference.md.
 */
#ifndef PL_AGENT_PYW_H
#define PL_AGENT_PYW_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "proto/agentmsg.h"
#include "proto/run.h"

struct pl_agent;
struct pl_pyw;

/* The workers of agent 'a' (none yet).  The worker's script is found as
 * $PILOT_PYWORKER, else beside the agent's program (BIN/../python/pilot/
 * or BIN/../share/pilot/python/pilot/_pyworker.py); where it is not, calls
 * fail saying so.  NULL when out of memory. */
struct pl_pyw *pl_pyw_new(struct pl_agent *a);
/* Kill every worker (SIGKILL to its process group) and close the
 * handles; the memory goes with the loop's last run.  NULL is ok. */
void pl_pyw_close(struct pl_pyw *p);

/* Run entry 'r' (a decoded pycall, its cores and GPUs claimed: they are
 * released when the call ends): its contents move in (*r is zeroed).
 * Whatever goes wrong, it ends with an event. */
void pl_pyw_call(struct pl_pyw *p, struct pl_run *r);
/* Whether rank 'rank' of attempt 'attempt' of task 'id' is in a call. */
bool pl_pyw_runs(const struct pl_pyw *p, uint64_t id, uint64_t attempt,
                 uint64_t rank);
/* KILL: interrupt the calls 'k' names (SIGINT, SIGKILL after at most
 * 2 s); they end canceled.  How many. */
size_t pl_pyw_kill(struct pl_pyw *p, const struct pl_kill *k);
/* The calls now, for REGISTER: into 'out' (room for 'max'); returns how
 * many there are. */
size_t pl_pyw_held(const struct pl_pyw *p, struct pl_held *out, size_t max);
/* The calls running. */
size_t pl_pyw_busy(const struct pl_pyw *p);
/* The agent stops: its calls are killed (they end canceled once their
 * workers are reaped), the idle workers told to go. */
void pl_pyw_shutdown(struct pl_pyw *p);

/* From the SIGCHLD watcher: reap the workers that exited; a call that
 * was running in one ends failed. */
void pl_pyw_reap(struct pl_pyw *p);
/* Whether 'pid' is a worker not yet reaped (not an orphan to reap). */
bool pl_pyw_child(const struct pl_pyw *p, pid_t pid);
/* How many workers there are (idle, busy, going), and the pids of the
 * first 'max' of them in 'pids' (may be NULL): for the tests. */
size_t pl_pyw_workers(const struct pl_pyw *p, pid_t *pids, size_t max);

#endif /* !PL_AGENT_PYW_H */
