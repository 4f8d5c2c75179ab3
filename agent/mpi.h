/* agent/mpi.h - one MPI job per task: the launcher rank 0's agent runs,
 * and the --exec-rank shim that binds each rank */
#ifndef PL_AGENT_MPI_H
#define PL_AGENT_MPI_H

#include <stdbool.h>

#include "agent/env.h"
#include "proto/error.h"

struct pl_task_spec;

/* The RUN entry's 'launcher' (docs/protocol.md). */
enum pl_launcher {
    PL_LAUNCHER_SRUN = 0, /* one srun --overlap --mpi=pmix step */
    PL_LAUNCHER_MPIRUN,   /* Open MPI's mpirun --rankfile */
};

/* The launcher named 's' ("srun", "mpirun"), or -1 (unknown). */
int pl_launcher_parse(const char *s);

/* The argv that launches every rank of the MPI task of 's' (checked by
 * pl_task_spec_decode(), comm mpi): srun or mpirun, running 'self' (the
 * agent's binary) --exec-rank -- the task's argv on each rank's host.
 * NULL-terminated, owned by the caller (pl_strv_free()).  Returns NULL
 * (ENOMEM). */
char **pl_mpi_argv(const struct pl_task_spec *s, const char *self);

/* The SLURM_HOSTFILE for 's': its hosts, one a line, in rank order.  The
 * caller frees it.  Returns NULL (ENOMEM). */
char *pl_mpi_hostfile(const struct pl_task_spec *s);

/* Open MPI's rankfile for 's': "rank I=HOST slot=CPUS" per rank, so that
 * mpirun puts each rank where pilotd placed it (its own mapping follows
 * the allocation's node order, not --host's).  New string, or NULL. */
char *pl_mpi_rankfile(const struct pl_task_spec *s);

/* Adapt the task environment 'env' for the launcher of 's': drop the
 * SLURM_* variables of the agent's own step (they would make srun size
 * the new step like the agent's), set PILOT_RANK_CORES, SLURM_HOSTFILE
 * ('hostfile', for srun), for mpirun SLURM_NODELIST and
 * SLURM_TASKS_PER_NODE of the task's hosts (its Slurm allocator reads
 * them), and when 'root' OMPI_ALLOW_RUN_AS_ROOT and
 * OMPI_ALLOW_RUN_AS_ROOT_CONFIRM.  Returns 0 or -1 (ENOMEM, errp). */
int pl_mpi_env(const struct pl_task_spec *s, const char *hostfile, bool root,
               struct pl_env *env, struct pl_error *errp);

/* pilot-agent --exec-rank -- CMD ARGS: find this process's rank (from
 * OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMIX_RANK), bind it to its
 * entry of PILOT_RANK_CORES, set PILOT_RANK, PILOT_SIZE,
 * PILOT_LOCAL_RANK, PILOT_NODE, OMP_NUM_THREADS and exec CMD.  'argv'
 * is CMD ARGS, NULL-terminated.  Returns only on failure, after one line
 * on stderr: the exit status to use (127). */
int pl_mpi_exec_rank(char **argv);

#endif /* !PL_AGENT_MPI_H */
