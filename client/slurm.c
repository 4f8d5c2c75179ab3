/* client/slurm.c - what the CLI asks of Slurm: a job's state, cancel */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "client/slurm.h"

/* libslurm keeps its state in globals; this object only marks that
 * slurm_init() ran, so that slurm_fini() runs once too. */
struct pl_slurm {
    int calls;
};

/* Names as squeue prints them; job_state_string() is not in the public
 * header of 22.05. */
static const char *state_names[] = {
    [JOB_PENDING] = "PENDING",     [JOB_RUNNING] = "RUNNING",
    [JOB_SUSPENDED] = "SUSPENDED", [JOB_COMPLETE] = "COMPLETED",
    [JOB_CANCELLED] = "CANCELLED", [JOB_FAILED] = "FAILED",
    [JOB_TIMEOUT] = "TIMEOUT",     [JOB_NODE_FAIL] = "NODE_FAIL",
    [JOB_PREEMPTED] = "PREEMPTED", [JOB_BOOT_FAIL] = "BOOT_FAIL",
    [JOB_DEADLINE] = "DEADLINE",   [JOB_OOM] = "OUT_OF_MEMORY",
};

struct pl_slurm *pl_slurm_new(struct pl_error *errp)
{
    struct pl_slurm *s;

    if (!(s = calloc(1, sizeof(*s)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    slurm_init(NULL);
    return s;
}

void pl_slurm_free(struct pl_slurm *s)
{
    if (!s)
        return;
    int saved = errno;
    slurm_fini();
    free(s);
    errno = saved;
}

/* Names as squeue shows them, for the reasons a pilot meets; libslurm
 * 22.05 does not export its own table. */
static const char *reason_name(unsigned r)
{
    switch (r) {
    case WAIT_NO_REASON: return "";
    case WAIT_PRIORITY: return "Priority";
    case WAIT_DEPENDENCY: return "Dependency";
    case WAIT_RESOURCES: return "Resources";
    case WAIT_PART_NODE_LIMIT: return "PartitionNodeLimit";
    case WAIT_PART_TIME_LIMIT: return "PartitionTimeLimit";
    case WAIT_PART_DOWN: return "PartitionDown";
    case WAIT_PART_INACTIVE: return "PartitionInactive";
    case WAIT_HELD: return "JobHeldAdmin";
    case WAIT_HELD_USER: return "JobHeldUser";
    case WAIT_TIME: return "BeginTime";
    case WAIT_NODE_NOT_AVAIL: return "ReqNodeNotAvail";
    case WAIT_PART_CONFIG: return "PartitionConfig";
    case FAIL_BAD_CONSTRAINTS: return "BadConstraints";
    case FAIL_ACCOUNT: return "InvalidAccount";
    case FAIL_QOS: return "InvalidQOS";
    default: return "other";
    }
}

bool pl_slurm_job_hopeless(const struct pl_slurm_job *j)
{
    if (j->state != JOB_PENDING)
        return false;
    switch (j->reason) {
    case WAIT_PART_NODE_LIMIT:
    case WAIT_PART_TIME_LIMIT:
    case FAIL_BAD_CONSTRAINTS:
    case FAIL_ACCOUNT:
    case FAIL_QOS:
        return true;
    default:
        return false;
    }
}

int pl_slurm_job(struct pl_slurm *s, long id, struct pl_slurm_job *j,
                 struct pl_error *errp)
{
    job_info_msg_t *msg = NULL;

    memset(j, 0, sizeof(*j));
    j->id = id;
    s->calls++;
    if (slurm_load_job(&msg, (uint32_t)id, SHOW_DETAIL) != SLURM_SUCCESS) {
        int e = slurm_get_errno();
        if (e == ESLURM_INVALID_JOB_ID) {
            /* purged after MinJobAge: it ended a while ago */
            j->state = JOB_COMPLETE;
            snprintf(j->state_name, sizeof(j->state_name), "gone");
            return 0;
        }
        errno = EIO;
        return pl_errprintf(errp, "cannot ask Slurm about job %ld: %s", id,
                            slurm_strerror(e));
    }
    if (msg->record_count < 1) {
        slurm_free_job_info_msg(msg);
        j->state = JOB_COMPLETE;
        snprintf(j->state_name, sizeof(j->state_name), "gone");
        return 0;
    }
    slurm_job_info_t *ji = &msg->job_array[0];
    unsigned base = ji->job_state & JOB_STATE_BASE;
    j->known = true;
    j->state = (int)base;
    snprintf(j->state_name, sizeof(j->state_name), "%s",
             base < sizeof(state_names) / sizeof(state_names[0])
                     && state_names[base]
                 ? state_names[base]
                 : "UNKNOWN");
    j->end_time = ji->end_time;
    j->reason = ji->state_reason;
    snprintf(j->reason_name, sizeof(j->reason_name), "%s",
             reason_name(ji->state_reason));
    if (ji->batch_host)
        snprintf(j->host, sizeof(j->host), "%s", ji->batch_host);
    slurm_free_job_info_msg(msg);
    return 0;
}

bool pl_slurm_job_alive(const struct pl_slurm_job *j)
{
    return j->known
           && (j->state == JOB_PENDING || j->state == JOB_RUNNING
               || j->state == JOB_SUSPENDED);
}

int pl_slurm_cancel(struct pl_slurm *s, long id, struct pl_error *errp)
{
    s->calls++;
    if (slurm_kill_job((uint32_t)id, SIGKILL, 0) != SLURM_SUCCESS) {
        int e = slurm_get_errno();
        if (e == ESLURM_ALREADY_DONE || e == ESLURM_INVALID_JOB_ID)
            return 0;
        errno = EIO;
        return pl_errprintf(errp, "cannot cancel Slurm job %ld: %s", id,
                            slurm_strerror(e));
    }
    return 0;
}
