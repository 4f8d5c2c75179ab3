/* agent/comm.h - a rank's identity and how the ranks of a task meet */
#ifndef PL_AGENT_COMM_H
#define PL_AGENT_COMM_H

#include "agent/env.h"
#include "proto/error.h"
#include "proto/run.h"

/* Set the identity of the rank of 'r' in 'env': PILOT_RANK, PILOT_SIZE,
 * PILOT_LOCAL_RANK, PILOT_LOCAL_SIZE, PILOT_NODE_RANK, PILOT_NODELIST
 * ('node' when 'r' has no nodelist), PILOT_COMM, and for comm torch
 * MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, GROUP_RANK.  For comm mpi this is the environment
 * of the launcher, which every rank inherits, and pl_mpi_exec_rank()
 * (agent/mpi.h) sets each rank's own.  'r' must have been checked
 * (pl_run_decode()).  Returns 0 or -1 (ENOMEM, errp). */
int pl_comm_env(const struct pl_run *r, const char *node,
                struct pl_env *env, struct pl_error *errp);

#endif /* !PL_AGENT_COMM_H */
