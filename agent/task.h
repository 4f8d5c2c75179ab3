/* agent/task.h - one launched process: spawn, kill, reap, output files */
#ifndef PL_AGENT_TASK_H
#define PL_AGENT_TASK_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "proto/error.h"
#include "proto/pilotdir.h"
#include "proto/run.h"

struct pl_task;

/* Called once the process has exited and pl_task_state() is final.  Do
 * not free 't' from here: mark it and free it from a later callback. */
typedef void (*pl_task_exit_f)(struct pl_task *t, void *arg);

/* A task for RUN entry 'run' (decoded by pl_run_decode()), whose
 * contents move into the task (*run is zeroed); 'owner' (copied) is the
 * agent's part of its key (agent/leftover.h).  Returns NULL (ENOMEM,
 * EINVAL: 'owner' too long), and then 'run' is unchanged. */
struct pl_task *pl_task_new(uv_loop_t *loop, struct pl_run *run,
                            const char *owner, pl_task_exit_f cb, void *arg);

/* Close the task's handles; the memory goes in the last close callback.
 * A task still running is left running (not killed).  NULL is ok. */
void pl_task_free(struct pl_task *t);

/* Spawn the process with environment 'env' (borrowed) and stdin from
 * 'stdin_fd', as the leader of its own process group, and start its
 * timeout.  Its output files (their directory created, 0700) are made
 * by the child (pl_spawn_how()) in the directory 'outdir' keeps open
 * (NULL: one opened for this call), except those several ranks share
 * (appended to), which are opened here.  It inherits the calling
 * thread's CPU mask (pl_bind_cpu_enter()).  On failure the task's state
 * is PL_ST_FAILED with an error text (and exit code 127 when the exec
 * failed); returns -1 with errno and errp set. */
int pl_task_start(struct pl_task *t, char **env, int stdin_fd,
                  struct pl_outdir *outdir, struct pl_error *errp);

/* Stop a running task because of 'reason' (PL_ST_CANCELED or
 * PL_ST_TIMEOUT; the first reason given is kept): SIGTERM to its process
 * group, then SIGKILL 'grace' seconds later (at once if grace <= 0).  A
 * second call may only shorten the grace.  No-op if not running. */
void pl_task_kill(struct pl_task *t, int reason, double grace);

/* Stop a running task that broke a rule: it ends failed, with 'why' as
 * its error (SIGKILL to its group now).  No-op if not running or already
 * being stopped. */
void pl_task_fail(struct pl_task *t, const char *why);

/* The size of its stdout file and, if another, of its stderr file
 * (bytes; 0 when unreadable). */
void pl_task_output_sizes(const struct pl_task *t, uint64_t *out,
                          uint64_t *err);

/* If the task's process has exited: reap it (its peak RSS and CPU time
 * with it) and end the task (its callback runs).  Call from a SIGCHLD
 * watcher for every running task.  No-op if not running or still
 * running. */
void pl_task_reap(struct pl_task *t);

/* Borrowed views of 't'. */
const struct pl_run *pl_task_entry(const struct pl_task *t); /* its entry */
bool pl_task_running(const struct pl_task *t);
int pl_task_state(const struct pl_task *t);    /* enum pl_state */
int pl_task_pid(const struct pl_task *t);      /* 0 before the spawn */
int pl_task_exit_code(const struct pl_task *t); /* -1: none */
int pl_task_signal(const struct pl_task *t);   /* 0: none */
long pl_task_maxrss_kb(const struct pl_task *t); /* -1: unknown */
/* Its user and system CPU seconds (its reaped descendants' included)
 * into *user and *sys; false before it was reaped. */
bool pl_task_cpu(const struct pl_task *t, double *user, double *sys);
const char *pl_task_error(const struct pl_task *t); /* NULL: none */
double pl_task_runtime(const struct pl_task *t); /* s, spawn to exit */

#endif /* !PL_AGENT_TASK_H */
