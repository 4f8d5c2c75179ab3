/* agent/mpi.c - one MPI job per task: the launcher rank 0's agent runs,
 * and the --exec-rank shim that binds each rank
 *
 * pilotd places every rank of an MPI task, as for any task, but sends one
 * RUN entry, to rank 0's agent, with 'hosts' and 'rank_cores'.  That
 * agent spawns the launcher in place of the task: srun --overlap
 * --mpi=pmix (rank i on hosts[i] through SLURM_HOSTFILE and
 * --distribution=arbitrary) or mpirun --host.  Each rank runs
 * "pilot-agent --exec-rank -- ARGV", which binds it to its cores
 * (PILOT_RANK_CORES) and execs ARGV: the step itself binds nothing.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/mpi.h"
#include "agent/resources.h"
#include "agent/task.h"
#include "proto/msg.h"

/* Variables of the agent's own srun step that the launcher's srun would
 * read as options (SLURM_NTASKS_PER_NODE=1, SLURM_CPUS_PER_TASK,
 * SLURM_MEM_PER_*...) or that describe that step rather than the job.
 * The job's (SLURM_JOB_ID, SLURM_CONF...) stay: srun needs them. */
static const char *const step_vars[] = {
    "SLURM_STEP_*", "SLURM_STEPID", "SLURM_CPU_BIND*", "SLURM_DISTRIBUTION",
    "SLURM_NTASKS*", "SLURM_NPROCS", "SLURM_NNODES", "SLURM_NODELIST",
    "SLURM_TASKS_PER_NODE", "SLURM_TASK_PID", "SLURM_PROCID",
    "SLURM_LOCALID", "SLURM_NODEID", "SLURM_GTIDS", "SLURM_CPUS_PER_TASK",
    "SLURM_MEM_PER_*", "SLURM_SRUN_COMM_*", "SLURM_LAUNCH_NODE_IPADDR",
    "SLURM_HOSTFILE",
};

int pl_launcher_parse(const char *s)
{
    if (!strcmp(s, "srun"))
        return PL_LAUNCHER_SRUN;
    if (!strcmp(s, "mpirun"))
        return PL_LAUNCHER_MPIRUN;
    return -1;
}

/* A growing string; 'failed' sticks after a failed allocation. */
struct buf {
    char *s;
    size_t len;
    size_t cap;
    int failed;
};

static void add(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void add(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->failed)
        return;
    for (;;) {
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* The string built, or NULL (ENOMEM); 'b' is spent either way. */
static char *take(struct buf *b)
{
    if (b->failed || !b->s) {
        free(b->s);
        if (!b->failed && (b->s = strdup("")))
            return b->s;
        errno = ENOMEM;
        return NULL;
    }
    return b->s;
}

char *pl_mpi_hostfile(const struct pl_task_spec *s)
{
    struct buf b = { 0 };

    for (char **h = s->hosts; *h; h++)
        add(&b, "%s\n", *h);
    return take(&b);
}

char *pl_mpi_rankfile(const struct pl_task_spec *s)
{
    struct buf b = { 0 };
    const char *cores = s->rank_cores ? s->rank_cores : "";

    /* rank_cores is "0,1;2;..": one ';'-separated entry per rank */
    for (size_t i = 0; s->hosts[i]; i++) {
        size_t len = strcspn(cores, ";");
        add(&b, "rank %zu=%s slot=%.*s\n", i, s->hosts[i], (int)len, cores);
        cores += len + (cores[len] == ';');
    }
    return take(&b);
}

/* "h1:n1,h2:n2": each run of equal hosts (ranks of one node are
 * contiguous) with its count. */
static char *host_counts(const struct pl_task_spec *s)
{
    struct buf b = { 0 };
    size_t i = 0;

    while (s->hosts[i]) {
        size_t j = i;
        while (s->hosts[j] && !strcmp(s->hosts[j], s->hosts[i]))
            j++;
        add(&b, "%s%s:%zu", i ? "," : "", s->hosts[i], j - i);
        i = j;
    }
    return take(&b);
}

/* The runs of equal hosts as mpirun's Slurm allocator wants them:
 * SLURM_NODELIST "h1,h2" and SLURM_TASKS_PER_NODE "n1,n2". */
static int mpirun_alloc_env(const struct pl_task_spec *s, struct pl_env *env)
{
    struct buf nodes = { 0 };
    struct buf counts = { 0 };
    size_t i = 0;
    int rc = -1;

    while (s->hosts[i]) {
        size_t j = i;
        while (s->hosts[j] && !strcmp(s->hosts[j], s->hosts[i]))
            j++;
        add(&nodes, "%s%s", i ? "," : "", s->hosts[i]);
        add(&counts, "%s%zu", i ? "," : "", j - i);
        i = j;
    }
    char *n = take(&nodes);
    char *c = take(&counts);
    if (n && c && pl_env_set(env, "SLURM_NODELIST", n) == 0
        && pl_env_set(env, "SLURM_TASKS_PER_NODE", c) == 0)
        rc = 0;
    free(n);
    free(c);
    return rc;
}

/* The distinct hosts in their order of first appearance. */
static size_t count_nodes(const struct pl_task_spec *s)
{
    size_t n = 0;

    for (size_t i = 0; s->hosts[i]; i++) {
        size_t j = 0;
        while (j < i && strcmp(s->hosts[j], s->hosts[i]))
            j++;
        n += j == i;
    }
    return n;
}

char **pl_mpi_argv(const struct pl_task_spec *s, const char *self)
{
    size_t nargs = pl_strv_len(s->argv);
    char **v;
    size_t n = 0;
    char *hc = NULL;

    if (!(v = calloc(nargs + 16, sizeof(*v))))
        return NULL;
#define ARG(expr)                                                            \
    do {                                                                     \
        if (!(v[n++] = (expr)))                                              \
            goto error;                                                      \
    } while (0)
    if (s->launcher == PL_LAUNCHER_MPIRUN) {
        if (!(hc = host_counts(s)))
            goto error;
        ARG(strdup("mpirun"));
        ARG(strdup("--np"));
        if (asprintf(&v[n++], "%llu", (unsigned long long)s->size) < 0)
            v[n - 1] = NULL;
        if (!v[n - 1])
            goto error;
        ARG(strdup("--host"));
        ARG(hc);
        hc = NULL;
        ARG(strdup("--bind-to"));
        ARG(strdup("none"));
    }
    else {
        /* N.B. no --nodelist: with --distribution=arbitrary srun takes
         * the nodes, one per rank, from SLURM_HOSTFILE; a --nodelist of
         * the distinct nodes makes it refuse more ranks than nodes. */
        ARG(strdup("srun"));
        ARG(strdup("--overlap"));
        ARG(strdup("--mpi=pmix"));
        if (asprintf(&v[n++], "--nodes=%zu", count_nodes(s)) < 0)
            v[n - 1] = NULL;
        if (!v[n - 1])
            goto error;
        if (asprintf(&v[n++], "--ntasks=%llu", (unsigned long long)s->size)
            < 0)
            v[n - 1] = NULL;
        if (!v[n - 1])
            goto error;
        ARG(strdup("--distribution=arbitrary"));
        ARG(strdup("--cpu-bind=none"));
        ARG(strdup("--kill-on-bad-exit=1"));
        if (asprintf(&v[n++], "--job-name=pilot-%llu",
                     (unsigned long long)s->id) < 0)
            v[n - 1] = NULL;
        if (!v[n - 1])
            goto error;
    }
    ARG(strdup(self));
    ARG(strdup("--exec-rank"));
    ARG(strdup("--"));
    for (size_t i = 0; i < nargs; i++)
        ARG(strdup(s->argv[i]));
#undef ARG
    v[n] = NULL;
    return v;
error:
    free(hc);
    pl_strv_free(v);
    errno = ENOMEM;
    return NULL;
}

int pl_mpi_env(const struct pl_task_spec *s, const char *hostfile, bool root,
               struct pl_env *env, struct pl_error *errp)
{
    for (size_t i = 0; i < sizeof(step_vars) / sizeof(step_vars[0]); i++)
        pl_env_unset(env, step_vars[i]);
    if (pl_env_set(env, "PILOT_RANK_CORES", s->rank_cores) < 0
        || (s->launcher == PL_LAUNCHER_SRUN && hostfile
            && pl_env_set(env, "SLURM_HOSTFILE", hostfile) < 0)
        || (s->launcher == PL_LAUNCHER_MPIRUN && mpirun_alloc_env(s, env) < 0)
        || (root && (pl_env_set(env, "OMPI_ALLOW_RUN_AS_ROOT", "1") < 0
                     || pl_env_set(env, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
                                   "1") < 0))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    return 0;
}

/* ---- pilot-agent --exec-rank ---- */

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail(const char *fmt, ...)
{
    va_list ap;

    fputs("pilot-agent --exec-rank: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 127;
}

/* The first of the variables 'names' that is set, or NULL. */
static const char *first_env(const char *const *names, const char **which)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) {
            if (which)
                *which = *names;
            return v;
        }
    }
    return NULL;
}

/* Set 'key' to the first of 'names' that is set, if any. */
static int copy_env(const char *key, const char *const *names)
{
    const char *v = first_env(names, NULL);

    return v ? setenv(key, v, 1) : 0;
}

int pl_mpi_exec_rank(char **argv)
{
    /* N.B. Open MPI's first: under mpirun each rank also inherits the
     * SLURM_PROCID of the orted that srun started on its node. */
    static const char *const rank_vars[] = { "OMPI_COMM_WORLD_RANK",
        "SLURM_PROCID", "PMIX_RANK", NULL };
    static const char *const size_vars[] = { "OMPI_COMM_WORLD_SIZE",
        "SLURM_NTASKS", NULL };
    static const char *const local_vars[] = { "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_LOCALID", NULL };
    static const char *const node_vars[] = { "SLURMD_NODENAME", NULL };
    const char *which = NULL;
    const char *rs;
    const char *all;
    char *end;
    unsigned long rank;
    uint64_t *cores = NULL;
    uint32_t ncores = 0;
    struct pl_error err;
    char host[256];

    if (!argv || !argv[0])
        return fail("no command (usage: pilot-agent --exec-rank -- CMD)");
    if (!(rs = first_env(rank_vars, &which)))
        return fail("no rank: none of OMPI_COMM_WORLD_RANK, SLURM_PROCID, "
                    "PMIX_RANK is set");
    errno = 0;
    rank = strtoul(rs, &end, 10);
    if (errno || end == rs || *end)
        return fail("%s: not a rank: '%s'", which, rs);
    if (!(all = getenv("PILOT_RANK_CORES")))
        return fail("PILOT_RANK_CORES is not set");
    /* entry 'rank' of "0,1;2;3" */
    const char *p = all;
    for (unsigned long i = 0; i < rank && p; i++)
        if ((p = strchr(p, ';')))
            p++;
    if (!p)
        return fail("rank %lu: no entry in PILOT_RANK_CORES", rank);
    size_t len = strcspn(p, ";");
    char *list = strndup(p, len);
    if (!list)
        return fail("out of memory");
    if (pl_cpulist_parse(list, &cores, &ncores, &err) < 0 || ncores == 0) {
        fail("rank %lu: PILOT_RANK_CORES entry '%s': %s", rank, list,
             ncores ? err.text : "empty");
        free(list);
        free(cores);
        return 127;
    }
    free(list);
    cpu_set_t *set = CPU_ALLOC(PL_CPU_MAX);
    size_t setsize = CPU_ALLOC_SIZE(PL_CPU_MAX);
    if (!set) {
        free(cores);
        return fail("out of memory");
    }
    CPU_ZERO_S(setsize, set);
    for (uint32_t i = 0; i < ncores; i++)
        CPU_SET_S(cores[i], setsize, set);
    free(cores);
    if (sched_setaffinity(0, setsize, set) < 0) {
        int e = errno;
        CPU_FREE(set);
        return fail("rank %lu: bind to its cores: %s", rank, strerror(e));
    }
    CPU_FREE(set);
    const char *node = first_env(node_vars, NULL);
    if (!node) {
        if (gethostname(host, sizeof(host)) < 0)
            host[0] = '\0';
        host[sizeof(host) - 1] = '\0';
        node = host;
    }
    char num[32];
    snprintf(num, sizeof(num), "%lu", rank);
    char nthreads[16];
    snprintf(nthreads, sizeof(nthreads), "%u", ncores);
    if (setenv("PILOT_RANK", num, 1) < 0
        || copy_env("PILOT_SIZE", size_vars) < 0
        || copy_env("PILOT_LOCAL_RANK", local_vars) < 0
        || setenv("PILOT_NODE", node, 1) < 0
        || setenv("OMP_NUM_THREADS", nthreads, 1) < 0)
        return fail("out of memory");
    execvp(argv[0], argv);
    return fail("%s: %s", argv[0], strerror(errno));
}
