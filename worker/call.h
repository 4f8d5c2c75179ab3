/* worker/call.h - one call of a pool function on one rank: its
 * communicator, output files, directory and environment */
#ifndef PL_WORKER_CALL_H
#define PL_WORKER_CALL_H

#include "proto/poolmsg.h"
#include "worker/fn.h"
#include "worker/nccl.h"
#include "worker/py.h"

/* What every call of one worker shares.  Owned by main(). */
struct pl_worker {
    int fd;                     /* the agent's socket; -1: --once */
    const char *pool;           /* "" with --once */
    int world_rank, world_size;
    struct pl_fns *fns;
    struct pl_py *py;
    struct pl_nccl *nccl;       /* NULL: the pool has no GPUs */
};

/* Run this rank's part of call 'c' (c->group[c->rank] is this worker):
 * open its directory and output files, resolve its function, make the
 * communicator of its ranks (MPI_Comm_create_group over MPI_COMM_WORLD
 * with pl_wcall_tag(); with --once, a dup of MPI_COMM_WORLD), agree with
 * the other ranks that all of them can call it (one MPI_Allreduce, which
 * also settles NCCL), then with stdout and stderr on the rank's files,
 * the call's directory current and its environment set, send ENTERED,
 * call the function, put everything back, and send RETURN.
 * A rank that cannot call it returns 127 (no function) or 126 (no
 * files or directory) with the error also written to its err file; the
 * others return 127, "rank N of the task could not ...".
 * With --once (w->fd < 0) nothing is sent, c->out and c->err are NULL
 * (no redirection) and errors go to stderr.
 * Returns the code (0..255) in *code; 0, or -1 with errno when the agent
 * could not be written to (the pool is going down). */
int pl_call_run(struct pl_worker *w, const struct pl_wcall *c, int *code);

#endif /* !PL_WORKER_CALL_H */
