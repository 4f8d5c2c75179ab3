/* agent/bind_cpu.c - bind a task to its cores (CPU affinity mask)
 *
 * The loop thread takes the task's mask just before posix_spawn()
 * (pl_task_start()) and gets its own back right after: the child, a
 * clone() of the calling thread, inherits that thread's mask, so the
 * task starts bound without any code running in the child.  Only the
 * loop thread changes (sched_setaffinity(0) is per thread); ZeroMQ's I/O
 * thread keeps the mask it was created with.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "agent/bind_cpu.h"

_Static_assert(PL_CPU_MAX <= CPU_SETSIZE, "a core id must fit a cpu_set_t");
_Static_assert(PL_RUN_MAX_CPU <= PL_CPU_MAX,
               "pl_run_decode() lets no core id past a cpu_set_t through");

struct pl_bind_cpu {
    cpu_set_t own;  /* the loop thread's mask at start */
    int entered;    /* the task's mask is on: leave() must restore */
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
    cpu_set_t mask;

    CPU_ZERO(&mask);
    for (uint32_t i = 0; i < r->ncores; i++)
        if (r->cores[i] < PL_CPU_MAX) /* checked at decode: no-op test */
            CPU_SET((int)r->cores[i], &mask);
    if (sched_setaffinity(0, sizeof(mask), &mask) < 0)
        return pl_errprintf(errp, "sched_setaffinity: %s", strerror(errno));
    b->entered = 1;
    return 0;
}

void pl_bind_cpu_leave(struct pl_bind_cpu *b)
{
    if (b->entered) {
        int saved = errno;
        /* N.B. cannot fail: 'own' was accepted for this thread before. */
        (void)sched_setaffinity(0, sizeof(b->own), &b->own);
        b->entered = 0;
        errno = saved;
    }
}
