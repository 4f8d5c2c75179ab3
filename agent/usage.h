/* agent/usage.h - the CPU time of a live process, for the calls that run
 * in a worker that outlives them (warm Python workers, pool workers) */
#ifndef PL_AGENT_USAGE_H
#define PL_AGENT_USAGE_H

#include <stdbool.h>
#include <sys/types.h>

#include "proto/usage.h"

/* Where a process's CPU time stood when a call began. */
struct pl_cpu_mark {
    bool ok;            /* read; false: /proc/PID/stat was not readable */
    double user, sys;   /* s: its own and its waited-for children's */
};

/* Read the user and system CPU seconds of process 'pid' from
 * /proc/PID/stat (utime + cutime, stime + cstime: its threads and the
 * children it reaped) into *m.  m->ok tells whether it could. */
void pl_cpu_mark(pid_t pid, struct pl_cpu_mark *m);

/* What 'pid' used since mark 'm' into u's CPU figures (PL_USE_CPU set),
 * or nothing when either reading failed (the process is gone: its call
 * ends with no CPU figures).  A worker runs one call at a time, so the
 * difference is the call's (and the worker's own idle work, which is
 * next to none). */
void pl_cpu_since(pid_t pid, const struct pl_cpu_mark *m, struct pl_usage *u);

#endif /* !PL_AGENT_USAGE_H */
