/* agent/comm.c - a rank's identity and how the ranks of a task meet
 *
 * Every rank learns who it is from PILOT_* variables.  For torch the agent
 * also sets what torchrun would (torch/distributed/run.py), so that
 * init_process_group(init_method="env://") works with no launcher: each
 * agent spawns its local ranks itself, and rank 0 listens on
 * MASTER_ADDR:MASTER_PORT, which pilotd chose.  The ranks of an MPI task
 * are started by one launcher instead (agent/mpi.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/comm.h"
#include "proto/spec.h"

/* "a,b,c", or NULL (ENOMEM).  The caller frees it. */
static char *join(char *const *v)
{
    size_t len = 1;
    char *buf;
    char *p;

    for (size_t i = 0; v[i]; i++)
        len += strlen(v[i]) + 1;
    if (!(p = buf = malloc(len)))
        return NULL;
    *p = '\0';
    for (size_t i = 0; v[i]; i++) {
        size_t n = strlen(v[i]);
        if (i)
            *p++ = ',';
        memcpy(p, v[i], n + 1);
        p += n;
    }
    return buf;
}

static int torch_env(const struct pl_run *r, struct pl_env *env)
{
    if (pl_env_set(env, "MASTER_ADDR", r->master_addr) < 0
        || pl_env_setf(env, "MASTER_PORT", "%llu",
                       (unsigned long long)r->master_port) < 0
        || pl_env_setf(env, "WORLD_SIZE", "%llu",
                       (unsigned long long)r->size) < 0
        || pl_env_setf(env, "RANK", "%llu", (unsigned long long)r->rank) < 0
        || pl_env_setf(env, "LOCAL_RANK", "%llu",
                       (unsigned long long)r->local_rank) < 0
        || pl_env_setf(env, "LOCAL_WORLD_SIZE", "%llu",
                       (unsigned long long)r->local_size) < 0
        || pl_env_setf(env, "GROUP_RANK", "%llu",
                       (unsigned long long)r->node_rank) < 0)
        return -1;
    return 0;
}

int pl_comm_env(const struct pl_run *r, const char *node,
                struct pl_env *env, struct pl_error *errp)
{
    char *nodes = NULL;

    if (r->nodelist && !(nodes = join(r->nodelist)))
        goto nomem;
    if (pl_env_setf(env, "PILOT_RANK", "%llu", (unsigned long long)r->rank)
            < 0
        || pl_env_setf(env, "PILOT_SIZE", "%llu",
                       (unsigned long long)r->size) < 0
        || pl_env_setf(env, "PILOT_LOCAL_RANK", "%llu",
                       (unsigned long long)r->local_rank) < 0
        || pl_env_setf(env, "PILOT_LOCAL_SIZE", "%llu",
                       (unsigned long long)r->local_size) < 0
        || pl_env_setf(env, "PILOT_NODE_RANK", "%llu",
                       (unsigned long long)r->node_rank) < 0
        || pl_env_set(env, "PILOT_NODELIST", nodes ? nodes : node) < 0
        || pl_env_set(env, "PILOT_COMM", pl_comm_name(r->comm)) < 0
        || (r->comm == PL_COMM_TORCH && torch_env(r, env) < 0))
        goto nomem;
    free(nodes);
    return 0;
nomem:
    free(nodes);
    errno = ENOMEM;
    return pl_errprintf(errp, "out of memory");
}
