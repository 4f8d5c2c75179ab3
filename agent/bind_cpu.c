/* agent/bind_cpu.c - bind a task to its cores (CPU affinity mask)
 *
 * The task's mask is handed to pl_spawn() (pl_spawn_set_mask()) just
 * before the spawn (pl_task_start()) and taken back right after: the
 * vfork() child sets it on itself before its exec.  (It was set on the
 * loop thread around the spawn, for the child to inherit: two
 * sched_setaffinity() calls a task, each moving the agent's thread to
 * the task's cores and back.)  A mask that is the agent's own is not set
 * at all: the child inherits it.  A core outside the agent's own mask
 * is refused here, with the error sched_setaffinity() would give.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "agent/bind_cpu.h"
#include "agent/spawn.h"

_Static_assert(PL_CPU_MAX <= CPU_SETSIZE, "a core id must fit a cpu_set_t");
_Static_assert(PL_RUN_MAX_CPU <= PL_CPU_MAX,
               "pl_run_decode() lets no core id past a cpu_set_t through");

struct pl_bind_cpu {
    cpu_set_t own;  /* the loop thread's mask at start */
    cpu_set_t task; /* the task's, handed to pl_spawn() */
    int entered;    /* 'task' handed: leave() must take it back */
};

struct pl_bind_cpu *pl_bind_cpu_new(const struct pl_resources *r,
                                    struct pl_error *errp)
{
    struct pl_bind_cpu *b;

    (void)r;
    if (!(b = calloc(1, sizeof(*b)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    CPU_ZERO(&b->own);
    if (sched_getaffinity(0, sizeof(b->own), &b->own) < 0) {
        pl_errprintf(errp, "sched_getaffinity: %s", strerror(errno));
        goto error;
    }
    return b;
error:
    pl_bind_cpu_free(b);
    return NULL;
}

void pl_bind_cpu_free(struct pl_bind_cpu *b)
{
    if (b) {
        int saved = errno;
        pl_bind_cpu_leave(b);
        free(b);
        errno = saved;
    }
}

int pl_bind_cpu_env(struct pl_bind_cpu *b, const struct pl_run *r,
                    struct pl_env *env, struct pl_error *errp)
{
    (void)b;
    if (pl_env_setf(env, "OMP_NUM_THREADS", "%u", (unsigned)r->ncores) < 0)
        return pl_errprintf(errp, "out of memory");
    return 0;
}

int pl_bind_cpu_enter(struct pl_bind_cpu *b, const struct pl_run *r,
                      struct pl_error *errp)
{
    cpu_set_t *mask = &b->task, in;

    CPU_ZERO(mask);
    for (uint32_t i = 0; i < r->ncores; i++)
        if (r->cores[i] < PL_CPU_MAX) /* checked at decode: no-op test */
            CPU_SET((int)r->cores[i], mask);
    /* what sched_setaffinity() refuses, in its words: no core, or none
     * we may use (the kernel takes the mask's part inside ours) */
    CPU_AND(&in, mask, &b->own);
    if (CPU_COUNT(&in) == 0) {
        errno = EINVAL;
        return pl_errprintf(errp, "sched_setaffinity: %s", strerror(errno));
    }
    if (CPU_EQUAL(mask, &b->own))
        return 0; /* inherited as it is */
    pl_spawn_set_mask(mask);
    b->entered = 1;
    return 0;
}

void pl_bind_cpu_leave(struct pl_bind_cpu *b)
{
    if (b->entered) {
        pl_spawn_set_mask(NULL);
        b->entered = 0;
    }
}
