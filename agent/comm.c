/* agent/comm.c - a rank's identity and how the ranks of a task meet
 *
 * Every rank learns who it is from PILOT_* variables.  For torch the agent
 * also sets what torchrun would (torch/distributed/run.py), so that
 * init_process_group(init_method="env://") works with no launcher: each
 * agent spawns its local ranks itself, and rank 0 listens on
 * MASTER_ADDR:MASTER_PORT, which pilotd chose.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/comm.h"
#include "agent/task.h"

static const char *const names[] = {
    [PL_COMM_NONE] = "none",
    [PL_COMM_TORCH] = "torch",
    [PL_COMM_MPI] = "mpi",
};

#define NCOMM (sizeof(names) / sizeof(names[0]))

int pl_comm_parse(const char *s)
{
    for (size_t i = 0; i < NCOMM; i++)
        if (!strcmp(s, names[i]))
            return (int)i;
    return -1;
}

const char *pl_comm_name(int comm)
{
    if (comm < 0 || (size_t)comm >= NCOMM)
        return "unknown";
    return names[comm];
}

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

static int torch_env(const struct pl_task_spec *s, struct pl_env *env)
{
    if (pl_env_set(env, "MASTER_ADDR", s->master_addr) < 0
        || pl_env_setf(env, "MASTER_PORT", "%llu",
                       (unsigned long long)s->master_port) < 0
        || pl_env_setf(env, "WORLD_SIZE", "%llu",
                       (unsigned long long)s->size) < 0
        || pl_env_setf(env, "RANK", "%llu", (unsigned long long)s->rank) < 0
        || pl_env_setf(env, "LOCAL_RANK", "%llu",
                       (unsigned long long)s->local_rank) < 0
        || pl_env_setf(env, "LOCAL_WORLD_SIZE", "%llu",
                       (unsigned long long)s->local_size) < 0
        || pl_env_setf(env, "GROUP_RANK", "%llu",
                       (unsigned long long)s->node_rank) < 0)
        return -1;
    return 0;
}

int pl_comm_env(const struct pl_task_spec *s, const char *node,
                struct pl_env *env, struct pl_error *errp)
{
    char *nodes = NULL;

    if (s->nodelist && !(nodes = join(s->nodelist)))
        goto nomem;
    if (pl_env_setf(env, "PILOT_RANK", "%llu", (unsigned long long)s->rank)
            < 0
        || pl_env_setf(env, "PILOT_SIZE", "%llu",
                       (unsigned long long)s->size) < 0
        || pl_env_setf(env, "PILOT_LOCAL_RANK", "%llu",
                       (unsigned long long)s->local_rank) < 0
        || pl_env_setf(env, "PILOT_LOCAL_SIZE", "%llu",
                       (unsigned long long)s->local_size) < 0
        || pl_env_setf(env, "PILOT_NODE_RANK", "%llu",
                       (unsigned long long)s->node_rank) < 0
        || pl_env_set(env, "PILOT_NODELIST", nodes ? nodes : node) < 0
        || pl_env_set(env, "PILOT_COMM", pl_comm_name(s->comm)) < 0
        || (s->comm == PL_COMM_TORCH && torch_env(s, env) < 0))
        goto nomem;
    free(nodes);
    return 0;
nomem:
    free(nodes);
    errno = ENOMEM;
    return pl_errprintf(errp, "out of memory");
}
