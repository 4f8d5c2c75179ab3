/* agent/journal.h - a task's output into its node's journal, through pipes
 *
 * With --output journal (the task's environment, or the agent's, says
 * PILOT_OUTPUT=journal: docs/output.md) a rank's stdout and stderr are
 * pipes that the agent reads on its loop and appends, framed, to the
 * node's journal (proto/journal.h): no file per task.  One writer per
 * agent, opened at the first such task, in the pilot directory the
 * task's output paths name.
 */
#ifndef PL_AGENT_JOURNAL_H
#define PL_AGENT_JOURNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "proto/error.h"
#include "proto/run.h"

struct pl_tout;

/* Whether environment 'env' (NULL-terminated) asks for the journal. */
bool pl_tout_wanted(char *const *env);

/* The capture of rank 'r' (borrowed for the call) whose environment is
 * 'env' (PILOT_NODE names the node's journal): two pipes (one if its
 * stderr goes to its stdout), whose write ends go into child_out and
 * child_err for the spawn; close them with pl_tout_spawned().  NULL with
 * errp set. */
struct pl_tout *pl_tout_new(uv_loop_t *loop, const struct pl_run *r,
                            char *const *env, int *child_out, int *child_err,
                            struct pl_error *errp);

/* The spawn is done (or failed): close the child's ends here, and read
 * the pipes from now on. */
void pl_tout_spawned(struct pl_tout *o);

/* Bytes read so far from its stdout and its stderr. */
void pl_tout_sizes(const struct pl_tout *o, uint64_t *out, uint64_t *err);

/* The task has ended: read what is left in the pipes, end its streams in
 * the journal and free 'o' (once its handles are closed).  What a
 * process it left behind writes later is lost.  NULL is ok. */
void pl_tout_finish(struct pl_tout *o);

#endif /* !PL_AGENT_JOURNAL_H */
