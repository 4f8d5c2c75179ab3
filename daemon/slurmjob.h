/* daemon/slurmjob.h - facts about the pilot's Slurm jobs (libslurm) */
#ifndef PL_DAEMON_SLURMJOB_H
#define PL_DAEMON_SLURMJOB_H

#include <time.h>

#include "proto/error.h"

/* The job's end time (its walltime limit).  0 or -1 with errp. */
int pl_slurmjob_end_time(long job, time_t *end, struct pl_error *errp);

/* Number of hosts in a Slurm hostlist expression ("n[1-3],n7" -> 4), or
 * -1 with errp. */
int pl_slurmjob_hostlist_count(const char *hostlist, struct pl_error *errp);

/* The hosts of a Slurm hostlist expression, in its order: a new
 * NULL-terminated vector (pl_strv_free()), or NULL with errp. */
char **pl_slurmjob_hostlist_expand(const char *hostlist,
                                   struct pl_error *errp);

/* A job's state as pilot grow sees it. */
enum pl_slurmjob_state {
    PL_SJ_PENDING = 1,
    PL_SJ_RUNNING,           /* or suspended */
    PL_SJ_ENDED,             /* completing, ended, or purged */
};
/* The state (enum pl_slurmjob_state) and end time (0: none) of 'job'.
 * 0, or -1 with errp (EIO: the controller did not answer). */
int pl_slurmjob_state(long job, int *state, time_t *end,
                      struct pl_error *errp);
/* Cancel 'job' (SIGKILL to all its steps; one that ended is fine).  0,
 * or -1 with errp (EIO). */
int pl_slurmjob_cancel(long job, struct pl_error *errp);

#endif /* !PL_DAEMON_SLURMJOB_H */
