/* agent/bind_cuda.c - bind a task to its GPUs (CUDA_VISIBLE_DEVICES)
 *
 * A GPU is told apart by its Slurm id (SLURM_STEP_GPUS) and addressed by
 * its entry in the agent's own CUDA_VISIBLE_DEVICES: with device cgroups
 * Slurm renumbers a step's GPUs from 0, so the ids are not CUDA ordinals.
 * The task gets those entries, which the CUDA runtime resolves the same
 * way for it as for us.  Slurm's own per-step variables, which the task
 * would otherwise inherit from the agent's step (all of the node's GPUs),
 * are narrowed the same way: SLURM_STEP_GPUS to the task's ids and
 * GPU_DEVICE_ORDINAL (which Slurm sets equal to CUDA_VISIBLE_DEVICES, for
 * ROCm) to its entries.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/bind_cuda.h"

struct pl_bind_cuda {
    const struct pl_resources *r;
};

struct pl_bind_cuda *pl_bind_cuda_new(const struct pl_resources *r,
                                      struct pl_error *errp)
{
    struct pl_bind_cuda *b;

    if (!(b = calloc(1, sizeof(*b)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    b->r = r;
    return b;
}

void pl_bind_cuda_free(struct pl_bind_cuda *b)
{
    if (b) {
        int saved = errno;
        free(b);
        errno = saved;
    }
}

/* "a,b,c" from name(r, pos) for each of the task's positions, or NULL
 * (ENOMEM).  The caller frees it. */
static char *join(const struct pl_resources *r, const struct pl_run *run,
                  const char *(*name)(const struct pl_resources *, size_t))
{
    size_t len = 1;
    char *buf;
    char *p;

    for (uint32_t i = 0; i < run->ngpus; i++)
        len += strlen(name(r, run->gpus[i])) + 1;
    if (!(p = buf = malloc(len)))
        return NULL;
    *p = '\0';
    for (uint32_t i = 0; i < run->ngpus; i++) {
        const char *n = name(r, run->gpus[i]);
        size_t nlen = strlen(n);
        if (i)
            *p++ = ',';
        memcpy(p, n, nlen + 1);
        p += nlen;
    }
    return buf;
}

int pl_bind_cuda_env(struct pl_bind_cuda *b, const struct pl_run *run,
                     struct pl_env *env, struct pl_error *errp)
{
    char *visible = NULL;
    char *ids = NULL;

    for (uint32_t i = 0; i < run->ngpus; i++) {
        if (run->gpus[i] >= pl_resources_ngpus(b->r)) {
            errno = EINVAL;
            return pl_errprintf(errp, "GPU position %llu out of range",
                                (unsigned long long)run->gpus[i]);
        }
    }
    if (!(visible = join(b->r, run, pl_resources_gpu_visible))
        || !(ids = join(b->r, run, pl_resources_gpu_id))
        || pl_env_set(env, "CUDA_VISIBLE_DEVICES", visible) < 0
        || pl_env_set(env, "GPU_DEVICE_ORDINAL", visible) < 0
        || pl_env_set(env, "PILOT_GPUS", ids) < 0
        || pl_env_set(env, "SLURM_STEP_GPUS", ids) < 0)
        goto error;
    free(visible);
    free(ids);
    return 0;
error:
    free(visible);
    free(ids);
    errno = ENOMEM;
    return pl_errprintf(errp, "out of memory");
}

int pl_bind_cuda_enter(struct pl_bind_cuda *b, const struct pl_run *run,
                       struct pl_error *errp)
{
    (void)b;
    (void)run;
    (void)errp;
    return 0;
}

void pl_bind_cuda_leave(struct pl_bind_cuda *b)
{
    (void)b;
}
