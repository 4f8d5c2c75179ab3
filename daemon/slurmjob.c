/* daemon/slurmjob.c - facts about the pilot's Slurm jobs (libslurm) */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

#include <slurm/slurm.h>

#include "daemon/slurmjob.h"
#include "proto/msg.h"

static void init_once(void)
{
    static int done;

    if (!done) {
        slurm_init(NULL); /* 22.05+: before any other libslurm call */
        done = 1;
    }
}

int pl_slurmjob_end_time(long job, time_t *end, struct pl_error *errp)
{
    job_info_msg_t *msg = NULL;

    init_once();
    if (slurm_load_job(&msg, (uint32_t)job, SHOW_DETAIL) != SLURM_SUCCESS) {
        errno = EIO;
        return pl_errprintf(errp, "slurm_load_job %ld: %s", job,
                            slurm_strerror(slurm_get_errno()));
    }
    if (msg->record_count < 1) {
        slurm_free_job_info_msg(msg);
        errno = ENOENT;
        return pl_errprintf(errp, "Slurm job %ld not found", job);
    }
    *end = msg->job_array[0].end_time;
    slurm_free_job_info_msg(msg);
    return 0;
}

int pl_slurmjob_hostlist_count(const char *hostlist, struct pl_error *errp)
{
    hostlist_t hl;
    char *h;
    int n = 0;

    init_once();
    if (!(hl = slurm_hostlist_create(hostlist))) {
        errno = EINVAL;
        return pl_errprintf(errp, "bad Slurm hostlist '%s'", hostlist);
    }
    while ((h = slurm_hostlist_shift(hl))) {
        n++;
        free(h);
    }
    slurm_hostlist_destroy(hl);
    return n;
}

char **pl_slurmjob_hostlist_expand(const char *hostlist, struct pl_error *errp)
{
    hostlist_t hl;
    char *h;
    char **v = calloc(1, sizeof(*v));
    size_t n = 0, cap = 1;

    init_once();
    if (!v)
        goto nomem;
    if (!(hl = slurm_hostlist_create(hostlist))) {
        free(v);
        errno = EINVAL;
        pl_errprintf(errp, "bad Slurm hostlist '%s'", hostlist);
        return NULL;
    }
    /* N.B. libslurm's strings are malloc()ed: ours to keep */
    while ((h = slurm_hostlist_shift(hl))) {
        if (n + 1 == cap) {
            char **nv = realloc(v, cap * 2 * sizeof(*nv));
            if (!nv) {
                free(h);
                slurm_hostlist_destroy(hl);
                pl_strv_free(v);
                goto nomem;
            }
            v = nv;
            cap *= 2;
        }
        v[n++] = h;
        v[n] = NULL;
    }
    slurm_hostlist_destroy(hl);
    return v;
nomem:
    errno = ENOMEM;
    pl_errprintf(errp, "out of memory");
    return NULL;
}

int pl_slurmjob_state(long job, int *state, time_t *end,
                      struct pl_error *errp)
{
    job_info_msg_t *msg = NULL;

    init_once();
    if (slurm_load_job(&msg, (uint32_t)job, SHOW_DETAIL) != SLURM_SUCCESS) {
        int e = slurm_get_errno();
        /* a job that ended long ago is purged from the controller */
        if (e == ESLURM_INVALID_JOB_ID) {
            *state = PL_SJ_ENDED;
            *end = 0;
            return 0;
        }
        errno = EIO;
        return pl_errprintf(errp, "slurm_load_job %ld: %s", job,
                            slurm_strerror(e));
    }
    if (msg->record_count < 1) {
        slurm_free_job_info_msg(msg);
        *state = PL_SJ_ENDED;
        *end = 0;
        return 0;
    }
    uint32_t st = msg->job_array[0].job_state;
    *end = msg->job_array[0].end_time;
    /* COMPLETING: its processes are being killed, it runs nothing */
    if (st & JOB_COMPLETING)
        *state = PL_SJ_ENDED;
    else if ((st & JOB_STATE_BASE) == JOB_PENDING)
        *state = PL_SJ_PENDING;
    else if ((st & JOB_STATE_BASE) == JOB_RUNNING
             || (st & JOB_STATE_BASE) == JOB_SUSPENDED)
        *state = PL_SJ_RUNNING;
    else
        *state = PL_SJ_ENDED;
    slurm_free_job_info_msg(msg);
    return 0;
}

int pl_slurmjob_cancel(long job, struct pl_error *errp)
{
    init_once();
    if (slurm_kill_job((uint32_t)job, SIGKILL, 0) != SLURM_SUCCESS) {
        int e = slurm_get_errno();
        if (e == ESLURM_ALREADY_DONE || e == ESLURM_INVALID_JOB_ID)
            return 0;
        errno = EIO;
        return pl_errprintf(errp, "scancel %ld: %s", job, slurm_strerror(e));
    }
    return 0;
}
