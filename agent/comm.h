/* agent/comm.h - a rank's identity and how the ranks of a task meet */
#ifndef PL_AGENT_COMM_H
#define PL_AGENT_COMM_H

#include "agent/env.h"
#include "proto/error.h"

struct pl_task_spec;

/* The RUN entry's 'comm' (docs/protocol.md). */
enum pl_comm {
    PL_COMM_NONE = 0, /* independent ranks */
    PL_COMM_TORCH,    /* torch.distributed init_method="env://" */
    PL_COMM_MPI,      /* accepted; the MPI launch comes later (issue 3) */
};

/* The comm named 's' ("none", "torch", "mpi"), or -1 (unknown). */
int pl_comm_parse(const char *s);

/* The name of 'comm', or "unknown". */
const char *pl_comm_name(int comm);

/* Set the identity of the rank of 's' in 'env': PILOT_RANK, PILOT_SIZE,
 * PILOT_LOCAL_RANK, PILOT_LOCAL_SIZE, PILOT_NODE_RANK, PILOT_NODELIST
 * ('node' when 's' has no nodelist), PILOT_COMM, and for torch
 * MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, GROUP_RANK.  's' must have been checked
 * (pl_task_spec_decode()).  Returns 0 or -1 (ENOMEM, errp). */
int pl_comm_env(const struct pl_task_spec *s, const char *node,
                struct pl_env *env, struct pl_error *errp);

#endif /* !PL_AGENT_COMM_H */
