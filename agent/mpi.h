/* agent/mpi.h - one MPI job per task: the launcher rank 0's agent runs,
 * and the --exec-rank shim that binds each rank */
#ifndef PL_AGENT_MPI_H
#define PL_AGENT_MPI_H

#include <stdbool.h>

#include "agent/env.h"
#include "proto/error.h"
#include "proto/run.h"

/* Every function taking a RUN entry 'r' wants one of comm mpi, checked
 * by pl_run_decode(); its launcher PL_LAUNCHER_UNSET is srun. */

/* Turn 'r' into its launcher: write the hostfile (srun) or rankfile
 * (mpirun) next to the task's stdout (OUT.hosts, OUT.ranks: 0600, its
 * directory made 0700), adapt 'env' (pl_mpi_env()) and replace r->argv
 * with the launcher's (pl_mpi_argv(), with --rankfile for mpirun), which
 * runs this program (/proc/self/exe) --exec-rank -- the task's argv on
 * every rank's host.  Returns 0, or -1 with errp set (errno from the
 * file, ENOMEM); then r->argv is unchanged ('env' may not be). */
int pl_mpi_launcher(struct pl_run *r, struct pl_env *env,
                    struct pl_error *errp);

/* The argv that launches every rank of 'r': srun or mpirun, running
 * 'self' (the agent's binary) --exec-rank -- the task's argv on each
 * rank's host.  NULL-terminated, owned by the caller (pl_strv_free()).
 * Returns NULL (ENOMEM). */
char **pl_mpi_argv(const struct pl_run *r, const char *self);

/* The SLURM_HOSTFILE for 'r': its hosts, one a line, in rank order.  The
 * caller frees it.  Returns NULL (ENOMEM). */
char *pl_mpi_hostfile(const struct pl_run *r);

/* Open MPI's rankfile for 'r': "rank I=HOST slot=CPUS" per rank, so that
 * mpirun puts each rank where pilotd placed it (its own mapping follows
 * the allocation's node order, not --host's).  New string, or NULL. */
char *pl_mpi_rankfile(const struct pl_run *r);

/* Adapt the task environment 'env' for the launcher of 'r': drop the
 * SLURM_* variables of the agent's own step (they would make srun size
 * the new step like the agent's), set PILOT_RANK_CORES, PILOT_RANK_GPUS
 * (removed when 'r' has no GPUs), SLURM_HOSTFILE ('hostfile' if not
 * NULL, for srun), for mpirun SLURM_NODELIST and SLURM_TASKS_PER_NODE of
 * the task's hosts (its Slurm allocator reads them) and SLURM_OVERLAP,
 * and when 'root' OMPI_ALLOW_RUN_AS_ROOT and
 * OMPI_ALLOW_RUN_AS_ROOT_CONFIRM.  Returns 0 or -1 (ENOMEM, errp). */
int pl_mpi_env(const struct pl_run *r, const char *hostfile, bool root,
               struct pl_env *env, struct pl_error *errp);

/* pilot-agent --exec-rank -- CMD ARGS: find this process's rank (from
 * OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMIX_RANK), bind it to its
 * entry of PILOT_RANK_CORES, set PILOT_RANK, PILOT_SIZE,
 * PILOT_LOCAL_RANK, PILOT_NODE, OMP_NUM_THREADS and exec CMD.  'argv'
 * is CMD ARGS, NULL-terminated.  Returns only on failure, after one line
 * on stderr: the exit status to use (127). */
int pl_mpi_exec_rank(char **argv);

#endif /* !PL_AGENT_MPI_H */
