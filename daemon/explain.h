/* daemon/explain.h - why a task does not run yet, in words and as data
 *
 * 'pilot explain ID' (EXPLAIN, docs/protocol.md): the scheduler's own
 * view of one task, read and never written: the dependencies it still
 * waits for, each node it cannot go on and why (down, cordoned, too few
 * free cores or GPUs, not idle for an exclusive task, reserved for
 * another task against starvation), a timeout longer than the walltime
 * left, a gang that needs more nodes than have room; or that it is next.
 * For a task that has started or ended: where it runs or ran, and how it
 * ended.
 */
#ifndef PL_DAEMON_EXPLAIN_H
#define PL_DAEMON_EXPLAIN_H

#include <jansson.h>

#include "daemon/sched.h"

/* What the scheduler 's' makes of live task 't' (waiting, queued or
 * assigned), as a new object:
 *   {"id", "state", "code", "summary", "needs": {...}, "ahead",
 *    "reserved_for", "walltime_left", "deps": [{"id", "state"}],
 *    "nodes": [{"name", "state", "cores", "free_cores", "gpus",
 *               "free_gpus", "room", "reasons": [{"code", "text"}]}]}
 * "code" is one word for the summary: deps, walltime, never, nodes,
 * room, reserved, holds, next, pool, assigned, running.  NULL: ENOMEM. */
json_t *pl_explain_live(struct pl_sched *s, const struct pl_dtask *t);

/* What task row 'task' (pl_query_task()'s object) says of a task that
 * is not live (it ended) or that runs: where and how it ran, as the same
 * shape ("code": "running" or "ended"; "nodes" absent).  NULL: ENOMEM. */
json_t *pl_explain_row(const json_t *task);

#endif /* !PL_DAEMON_EXPLAIN_H */
