/* client/slurm.h - what the CLI asks of Slurm: a job's state, cancel */
#ifndef PL_CLIENT_SLURM_H
#define PL_CLIENT_SLURM_H

#include <stdbool.h>
#include <time.h>

#include "proto/error.h"

struct pl_slurm;

/* A job as the controller sees it. */
struct pl_slurm_job {
    long id;
    bool known;         /* false: the controller has forgotten the job */
    int state;          /* enum job_states (base state, flags removed) */
    char state_name[16];/* "PENDING", "COMPLETED", ... or "UNKNOWN" */
    time_t end_time;    /* actual or expected end, 0 if not known */
    char host[64];      /* the batch host, "" while pending */
    int reason;         /* enum job_state_reason: why it is pending */
    char reason_name[32];/* "Resources", "PartitionNodeLimit", ... or "" */
};

/* Start a libslurm session (reads the Slurm configuration).  NULL with
 * errp set.  N.B. libslurm exits the process if there is no Slurm
 * configuration at all: call only when a Slurm pilot is involved. */
struct pl_slurm *pl_slurm_new(struct pl_error *errp);
void pl_slurm_free(struct pl_slurm *s);

/* Look up job 'id'.  A job the controller no longer knows is not an
 * error: j->known is false and j->state_name "gone".  Returns 0, or -1
 * with errp set when the controller cannot be asked. */
int pl_slurm_job(struct pl_slurm *s, long id, struct pl_slurm_job *j,
                 struct pl_error *errp);

/* Whether a job in base state 'state' may still run (PENDING, RUNNING,
 * SUSPENDED). */
bool pl_slurm_job_alive(const struct pl_slurm_job *j);

/* Whether a pending job waits for something that will not come without an
 * administrator: more nodes or time than its partition allows, or
 * constraints, account or QOS that cannot be met. */
bool pl_slurm_job_hopeless(const struct pl_slurm_job *j);

/* Cancel job 'id' (SIGKILL to all its steps and the batch script, as
 * scancel does).  An already finished job is not an error.  0 or -1
 * with errp set. */
int pl_slurm_cancel(struct pl_slurm *s, long id, struct pl_error *errp);

#endif /* !PL_CLIENT_SLURM_H */
