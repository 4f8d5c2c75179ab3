/* agent/task.h - one launched process: spawn, kill, exit, resource use */
#ifndef PL_AGENT_TASK_H
#define PL_AGENT_TASK_H

#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>
#include <uv.h>

#include "proto/error.h"

/* One entry of a RUN message (docs/protocol.md), decoded and checked: one
 * rank of a task.  Every pointer is owned by the spec. */
struct pl_task_spec {
    uint64_t id;
    uint64_t attempt;
    uint64_t rank;        /* 0 <= rank < size */
    uint64_t size;        /* ranks in the task, >= 1 */
    uint64_t local_rank;  /* among the task's ranks on this node */
    uint64_t local_size;
    uint64_t node_rank;   /* this node's index in 'nodelist' */
    char **nodelist;      /* NULL-terminated, or NULL: [this node] */
    int comm;             /* enum pl_comm (agent/comm.h) */
    char *master_addr;    /* PL_COMM_TORCH: rank 0's address, else NULL */
    uint64_t master_port; /* PL_COMM_TORCH: 1..65535, else 0 */
    int launcher;         /* PL_COMM_MPI: enum pl_launcher (agent/mpi.h) */
    char **hosts;         /* PL_COMM_MPI: each rank's node, 'size' names */
    char *rank_cores;     /* PL_COMM_MPI: each rank's CPU ids, "0,1;0;.." */
    char *rank_gpus;      /* PL_COMM_MPI: each rank's GPU ids (Slurm's),
                             "0,1;2;..", or NULL: no GPUs */
    char **argv;        /* NULL-terminated, at least one element */
    char **env;         /* "KEY=VALUE" overrides, NULL-terminated, or NULL */
    char *cwd;          /* NULL: the agent's */
    uint64_t *cores;    /* CPU ids, at least one */
    uint32_t ncores;
    uint64_t *gpus;     /* positions in the agent's GPU list, or NULL */
    uint32_t ngpus;
    char *out;          /* stdout path */
    char *err;          /* stderr path */
    double timeout;     /* seconds; 0: none */
};

/* Decode RUN entry 'o' into 'spec' (zeroed first; the rank fields absent
 * from 'o' get their defaults: rank 0 of 1, comm none).  *have_id is set
 * when 'id' and 'attempt' were valid, even if something else was not, so
 * that the failure can be reported for that task (spec->rank is then the
 * entry's rank if it was valid, else 0).  Release 'spec' with
 * pl_task_spec_release() whatever this returns.  Returns 0, or -1 with
 * errp set (errno EPROTO or ENOMEM). */
int pl_task_spec_decode(const msgpack_object *o, struct pl_task_spec *spec,
                        bool *have_id, struct pl_error *errp);
void pl_task_spec_release(struct pl_task_spec *spec);

struct pl_task;

/* Called once the process has exited and pl_task_state() is final.  Do
 * not free 't' from here: mark it and free it from a later callback. */
typedef void (*pl_task_exit_f)(struct pl_task *t, void *arg);

/* A task for 'spec', whose contents move into the task (*spec is zeroed).
 * Returns NULL (ENOMEM), and then 'spec' is unchanged. */
struct pl_task *pl_task_new(uv_loop_t *loop, struct pl_task_spec *spec,
                            pl_task_exit_f cb, void *arg);

/* Close the task's handles; the memory goes in the last close callback.
 * A task still running is left running (not killed).  NULL is ok. */
void pl_task_free(struct pl_task *t);

/* Open the output files (creating their directory, 0700; truncated for a
 * task of one rank, appended to when several ranks may share them), then
 * spawn the
 * process with environment 'env' (borrowed) and stdin from 'stdin_fd',
 * as the leader of its own process group, and start its timeout.  On
 * failure the task's state is PL_ST_FAILED with an error text (and exit
 * code 127 when the exec failed); returns -1 with errno and errp set. */
int pl_task_start(struct pl_task *t, char **env, int stdin_fd,
                  struct pl_error *errp);

/* Stop a running task because of 'reason' (PL_ST_CANCELED or
 * PL_ST_TIMEOUT; the first reason given is kept): SIGTERM to its process
 * group, then SIGKILL 'grace' seconds later (at once if grace <= 0).  A
 * second call may only shorten the grace.  No-op if not running. */
void pl_task_kill(struct pl_task *t, int reason, double grace);

/* If the task's process has exited: reap it (its peak RSS with it) and
 * end the task (its callback runs).  Call from a SIGCHLD watcher for
 * every running task.  No-op if not running or still running. */
void pl_task_reap(struct pl_task *t);

/* Borrowed views of 't'. */
const struct pl_task_spec *pl_task_spec(const struct pl_task *t);
bool pl_task_running(const struct pl_task *t);
int pl_task_state(const struct pl_task *t);    /* enum pl_state */
int pl_task_pid(const struct pl_task *t);      /* 0 before the spawn */
int pl_task_exit_code(const struct pl_task *t); /* -1: none */
int pl_task_signal(const struct pl_task *t);   /* 0: none */
long pl_task_maxrss_kb(const struct pl_task *t); /* -1: unknown */
const char *pl_task_error(const struct pl_task *t); /* NULL: none */
double pl_task_runtime(const struct pl_task *t); /* s, spawn to exit */

#endif /* !PL_AGENT_TASK_H */
