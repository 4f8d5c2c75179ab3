/* agent/bind_cpu.h - bind a task to its cores (CPU affinity mask) */
#ifndef PL_AGENT_BIND_CPU_H
#define PL_AGENT_BIND_CPU_H

#include "agent/env.h"
#include "agent/resources.h"
#include "proto/error.h"
#include "proto/run.h"

/* Every bind_*.c has this shape: _new/_free, _env() adds the task's
 * variables to its environment, _enter() runs on the loop thread just
 * before the spawn (pl_task_start(): posix_spawn()) and _leave() just
 * after, whatever the spawn gave. */
struct pl_bind_cpu;

/* Save the loop thread's own affinity mask ('r' is borrowed and must
 * outlive the binder).  Returns NULL with errp set. */
struct pl_bind_cpu *pl_bind_cpu_new(const struct pl_resources *r,
                                    struct pl_error *errp);
void pl_bind_cpu_free(struct pl_bind_cpu *b);

/* OMP_NUM_THREADS = the number of the task's cores.  Returns 0 or -1
 * (errno ENOMEM, errp). */
int pl_bind_cpu_env(struct pl_bind_cpu *b, const struct pl_run *r,
                    struct pl_env *env, struct pl_error *errp);

/* Give the calling (loop) thread the task's cores, so that the child
 * inherits them.  Returns 0 or -1 (errno from sched_setaffinity, errp). */
int pl_bind_cpu_enter(struct pl_bind_cpu *b, const struct pl_run *r,
                      struct pl_error *errp);

/* Give the loop thread back its own mask. */
void pl_bind_cpu_leave(struct pl_bind_cpu *b);

#endif /* !PL_AGENT_BIND_CPU_H */
