/* tests/unit/test_agent_env.c - a task's environment (agent/env.c): set,
 * replace, unset by name and prefix, and the removal of the agents' own
 * step variables (issue 12: a task took itself for rank 1 of 2) */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "agent/env.h"
#include "tests/unit/tap.h"

static bool has(struct pl_env *e, const char *key)
{
    return pl_env_get(e, key) != NULL;
}

static void test_basics(void)
{
    char a[] = "A=1", b[] = "B=two", c[] = "noequals", d[] = "=nokey";
    char *base[] = { a, b, c, d, NULL };
    struct pl_env *e = pl_env_new(base);

    ok(e != NULL, "pl_env_new of a vector");
    is_str(pl_env_get(e, "A"), "1", "a copied entry");
    ok(!has(e, "noequals") && pl_env_vector(e)[2] == NULL,
       "entries without '=' or without a key are dropped");
    ok(pl_env_set(e, "A", "3") == 0 && !strcmp(pl_env_get(e, "A"), "3"),
       "set replaces");
    ok(pl_env_put(e, "C=x=y") == 0 && !strcmp(pl_env_get(e, "C"), "x=y"),
       "put keeps the value's own '='");
    errno = 0;
    ok(pl_env_put(e, "novalue") < 0 && errno == EINVAL, "put without '=': EINVAL");
    errno = 0;
    ok(pl_env_set(e, "K=V", "1") < 0 && errno == EINVAL,
       "set of a key holding '=': EINVAL");
    ok(pl_env_setf(e, "N", "%d-%s", 4, "z") == 0
           && !strcmp(pl_env_get(e, "N"), "4-z"),
       "setf formats");
    pl_env_put(e, "PRE_ONE=1");
    pl_env_put(e, "PRE_TWO=2");
    pl_env_put(e, "PREFIX=3");
    pl_env_unset(e, "PRE_*");
    ok(!has(e, "PRE_ONE") && !has(e, "PRE_TWO") && has(e, "PREFIX"),
       "unset PRE_* removes that prefix only");
    pl_env_unset(e, "B");
    pl_env_unset(e, "nothere");
    ok(!has(e, "B") && has(e, "A"), "unset of a name, and of one not there");
    pl_env_free(e);
    pl_env_free(NULL);
}

/* What 'srun --overlap' gives the agents' step (Slurm 22.05, pmix), with
 * the job's variables and the user's own. */
static const char *const step_env[] = {
    /* the job's: kept */
    "SLURM_JOB_ID=42", "SLURM_JOBID=42", "SLURM_JOB_NODELIST=n[1-4]",
    "SLURM_JOB_NUM_NODES=4", "SLURM_JOB_CPUS_PER_NODE=4(x4)",
    "SLURM_CONF=/etc/slurm/slurm.conf", "SLURM_CLUSTER_NAME=dev",
    "SLURM_SUBMIT_DIR=/home/u", "SLURM_SUBMIT_HOST=login",
    "SLURM_ARRAY_TASK_ID=3", "SLURM_HET_SIZE=1", "SLURMD_NODENAME=n2",
    /* the user's: kept */
    "HOME=/root", "PATH=/usr/bin", "OMPI_MCA_btl=self,tcp",
    "OMPI_ALLOW_RUN_AS_ROOT=1", "PMIXLIKE=keep",
    /* the agents' step: removed */
    "SLURM_PROCID=1", "SLURM_LOCALID=0", "SLURM_NODEID=1", "SLURM_NTASKS=2",
    "SLURM_NPROCS=2", "SLURM_NTASKS_PER_NODE=1", "SLURM_STEP_ID=0",
    "SLURM_STEPID=0", "SLURM_STEP_NODELIST=n[1-2]", "SLURM_STEP_NUM_TASKS=2",
    "SLURM_STEP_TASKS_PER_NODE=1(x2)", "SLURM_CPUS_PER_TASK=4",
    "SLURM_CPU_BIND=quiet,none", "SLURM_CPU_BIND_TYPE=none",
    "SLURM_NODELIST=n[1-2]", "SLURM_NNODES=2", "SLURM_TASKS_PER_NODE=1(x2)",
    "SLURM_TASK_PID=99", "SLURM_GTIDS=1", "SLURM_SRUN_COMM_PORT=4000",
    "SLURM_LAUNCH_NODE_IPADDR=10.0.0.1", "SLURM_MEM_PER_NODE=0",
    "SLURM_CPUS_ON_NODE=4", "SLURM_GPUS_ON_NODE=4", "SLURM_STEP_GPUS=0,1",
    "SLURM_TOPOLOGY_ADDR=n2", "SLURM_MPI_TYPE=pmix", "SLURM_JOBIDX=7",
    "PMIX_RANK=1", "PMIX_NAMESPACE=slurm.pmix.42.0", "PMI_FD=5",
    "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
    "OMPI_MCA_orte_ess_jobid=1", "OMPI_MCA_ess_base_vpid=1",
    "OMPI_MCA_pmix=pmix3x", "OMPI_UNIVERSE_SIZE=2", NULL
};

static void test_drop_step(void)
{
    struct pl_env *e = pl_env_new(NULL);
    size_t n = 0, kept = 0, wrong = 0;

    for (const char *const *v = step_env; *v; v++)
        pl_env_put(e, *v);
    pl_env_drop_step(e);
    for (const char *const *v = step_env; *v; v++, n++) {
        char key[64];
        snprintf(key, sizeof(key), "%.*s", (int)strcspn(*v, "="), *v);
        bool want = !strcmp(key, "PMIXLIKE") || !strncmp(key, "SLURMD_", 7)
                    || !strncmp(key, "SLURM_JOB_", 10)
                    || !strcmp(key, "SLURM_JOBID")
                    || !strcmp(key, "SLURM_CONF")
                    || !strcmp(key, "SLURM_CLUSTER_NAME")
                    || !strncmp(key, "SLURM_SUBMIT_", 13)
                    || !strncmp(key, "SLURM_ARRAY_", 12)
                    || !strncmp(key, "SLURM_HET_", 10)
                    || !strcmp(key, "HOME") || !strcmp(key, "PATH")
                    || !strcmp(key, "OMPI_MCA_btl")
                    || !strcmp(key, "OMPI_ALLOW_RUN_AS_ROOT");
        kept += want;
        if (has(e, key) != want) {
            wrong++;
            diag("%s: %s, expected %s", key, has(e, key) ? "kept" : "removed",
                 want ? "kept" : "removed");
        }
    }
    ok(wrong == 0, "drop_step: each of %zu variables kept or removed as the "
       "job's, the user's or the step's", n);
    ok(!has(e, "SLURM_PROCID") && !has(e, "SLURM_NTASKS")
           && !has(e, "SLURM_STEP_ID") && !has(e, "SLURM_LOCALID"),
       "the step's rank, size, id and local rank are gone");
    ok(has(e, "SLURM_JOB_ID") && has(e, "SLURM_CONF")
           && has(e, "SLURMD_NODENAME"),
       "the job's id, Slurm's configuration and the node's name stay");
    ok(!has(e, "SLURM_JOBIDX"), "SLURM_JOBID is kept by name, not as a prefix");
    ok(has(e, "OMPI_MCA_btl") && !has(e, "OMPI_MCA_orte_ess_jobid"),
       "Open MPI's settings stay, a launched process's identity goes");
    size_t left = 0;
    for (char **v = pl_env_vector(e); *v; v++)
        left++;
    is(left, kept, "the vector holds exactly the %zu kept", kept);
    pl_env_drop_step(e);
    left = 0;
    for (char **v = pl_env_vector(e); *v; v++)
        left++;
    is(left, kept, "dropping again changes nothing");
    pl_env_free(e);
    e = pl_env_new(NULL);
    pl_env_drop_step(e);
    ok(pl_env_vector(e)[0] == NULL, "drop_step of an empty environment");
    pl_env_free(e);
}

/* A vector of literals as the API takes it (it does not write them). */
#define V(a) ((char *const *)(a))

/* An environment as a string "K=V;K=V;...", in its order. */
static const char *flat(struct pl_env *e)
{
    static char buf[1024];
    size_t off = 0;

    buf[0] = '\0';
    for (char **v = pl_env_vector(e); *v; v++)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s",
                                off ? ";" : "", *v);
    return buf;
}

/* The env cache against what it replaces (a copy of base, then each of
 * the spec's variables put): the same environment, built once a spec. */
static void test_cache(void)
{
    const char *const base_v[] = { "A=1", "B=2", "PILOT_X=base", NULL };
    const char *const spec1[] = { "B=spec", "C=3", "PILOT_ARRAY_INDEX=1",
                            "PILOT_ARRAY_ID=7", NULL };
    const char *const spec2[] = { "B=spec", "C=3", "PILOT_ARRAY_INDEX=2",
                            "PILOT_ARRAY_ID=7", NULL };
    const char *const spec3[] = { "B=other", NULL };
    const char *const bad[] = { "NOEQUALS", NULL };
    struct pl_env *base = pl_env_new(V(base_v));
    struct pl_env_cache *c = pl_env_cache_new(base);
    uint64_t hits, misses;
    char want[1024];

    /* what pl_agent_task_env() built before the cache */
    struct pl_env *old = pl_env_new(pl_env_vector(base));
    for (const char *const *v = spec1; *v; v++)
        pl_env_put(old, *v);
    snprintf(want, sizeof(want), "%s", flat(old));
    pl_env_free(old);

    struct pl_env *e = pl_env_cache_task(c, V(spec1));
    is_str(flat(e), want, "cache: first task of a spec: as a copy with "
           "the spec's variables put");
    /* the task's own variables go on it, not on the cache's */
    pl_env_set(e, "PILOT_TASK_ID", "1");
    pl_env_set(e, "A", "changed");
    pl_env_unset(e, "C");
    pl_env_free(e);
    e = pl_env_cache_task(c, V(spec2));
    ok(strstr(flat(e), "PILOT_ARRAY_INDEX=2") && strstr(flat(e), "A=1;")
       && strstr(flat(e), "C=3") && !strstr(flat(e), "PILOT_TASK_ID"),
       "cache: the next element: its own index, none of the last task's "
       "changes: %s", flat(e));
    pl_env_cache_stats(c, &hits, &misses);
    ok(hits == 1 && misses == 1, "cache: an array's next element is a hit "
       "(%llu hits, %llu misses)", (unsigned long long)hits,
       (unsigned long long)misses);
    pl_env_free(e);
    e = pl_env_cache_task(c, V(spec3));
    is_str(flat(e), "A=1;B=other;PILOT_X=base", "cache: another spec, "
           "another environment");
    pl_env_free(e);
    e = pl_env_cache_task(c, NULL);
    is_str(flat(e), "A=1;B=2;PILOT_X=base", "cache: no spec variables: "
           "ours");
    pl_env_free(e);
    /* more specs than slots: the first is built again, still right */
    for (int i = 0; i < PL_ENV_CACHE_SLOTS + 2; i++) {
        char kv[32];
        char *const spec[] = { kv, NULL };
        snprintf(kv, sizeof(kv), "S=%d", i);
        pl_env_free(pl_env_cache_task(c, spec));
    }
    e = pl_env_cache_task(c, V(spec1));
    is_str(flat(e), want, "cache: evicted and built again: the same");
    pl_env_free(e);
    pl_env_cache_stats(c, &hits, &misses);
    ok(misses == 3 + PL_ENV_CACHE_SLOTS + 2 + 1, "cache: %llu misses",
       (unsigned long long)misses);
    errno = 0;
    ok(pl_env_cache_task(c, V(bad)) == NULL && errno == EINVAL,
       "cache: a spec variable without '=' is refused (EINVAL)");
    is_str(flat(base), "A=1;B=2;PILOT_X=base", "cache: base untouched");
    pl_env_cache_free(c);
    pl_env_free(base);
}

int main(void)
{
    plan(18 + 9);
    test_basics();
    test_drop_step();
    test_cache();
    return done_testing();
}
