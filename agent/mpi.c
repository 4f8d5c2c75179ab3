/* agent/mpi.c - one MPI job per task: the launcher rank 0's agent runs,
 * and the --exec-rank shim that binds each rank
 *
 * pilotd places every rank of an MPI task, as for any task, but sends one
 * RUN entry, to rank 0's agent, with 'hosts' and 'rank_cores'.  That
 * agent spawns the launcher in place of the task (pl_mpi_launcher()):
 * srun --overlap --mpi=pmix (rank i on hosts[i] through SLURM_HOSTFILE
 * and --distribution=arbitrary) or mpirun --rankfile, with the hostfile
 * or rankfile written beside the task's stdout.  Each rank runs
 * "pilot-agent --exec-rank -- ARGV", which binds it to its cores
 * (PILOT_RANK_CORES) and execs ARGV: the step itself binds nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "agent/mpi.h"
#include "agent/resources.h"
#include "proto/pilotdir.h"
#include "proto/strv.h"

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
        b->s = NULL;
        if (!b->failed && (b->s = strdup("")))
            return b->s;
        errno = ENOMEM;
        return NULL;
    }
    return b->s;
}

char *pl_mpi_hostfile(const struct pl_run *r)
{
    struct buf b = { 0 };

    for (char **h = r->hosts; *h; h++)
        add(&b, "%s\n", *h);
    return take(&b);
}

char *pl_mpi_rankfile(const struct pl_run *r)
{
    struct buf b = { 0 };
    const char *cores = r->rank_cores ? r->rank_cores : "";

    /* rank_cores is "0,1;2;..": one ';'-separated entry per rank */
    for (size_t i = 0; r->hosts[i]; i++) {
        size_t len = strcspn(cores, ";");
        add(&b, "rank %zu=%s slot=%.*s\n", i, r->hosts[i], (int)len, cores);
        cores += len + (cores[len] == ';');
    }
    return take(&b);
}

/* One node of an mpirun task: its name, its rank count, and its index in
 * the job's node order. */
struct node_count {
    const char *host;
    size_t count;
    int order;
};

static int by_job_order(const void *a, const void *b)
{
    const struct node_count *x = a, *y = b;

    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    return strcmp(x->host, y->host);
}

/* What mpirun's Slurm allocator reads: SLURM_NODELIST "h1,h2" and
 * SLURM_TASKS_PER_NODE "n1,n2", the task's distinct hosts with their
 * rank counts, in the job's node order ('job_nodelist', a Slurm hostlist;
 * hosts not in it last, by name).
 * N.B. the order matters: mpirun starts its orteds with one srun over
 * those nodes and numbers them in the order it was given, while srun
 * numbers them in the job's order; any other order swaps nodes and
 * every rank of a swapped node runs on the wrong host.  The rankfile,
 * not this order, says where each rank goes. */
static int mpirun_alloc_env(const struct pl_run *r,
                            const char *job_nodelist, struct pl_env *env)
{
    struct buf nodes = { 0 };
    struct buf counts = { 0 };
    struct node_count *v;
    hostlist_t hl = NULL;
    size_t n = 0;
    int rc = -1;

    if (!(v = calloc(pl_strv_len(r->hosts) + 1, sizeof(*v))))
        return -1;
    for (size_t i = 0; r->hosts[i]; i++) {
        size_t j = 0;
        while (j < n && strcmp(v[j].host, r->hosts[i]))
            j++;
        if (j == n)
            v[n++] = (struct node_count){ r->hosts[i], 0, INT_MAX };
        v[j].count++;
    }
    if (job_nodelist && (hl = slurm_hostlist_create(job_nodelist))) {
        for (size_t i = 0; i < n; i++) {
            int k = slurm_hostlist_find(hl, v[i].host);
            if (k >= 0)
                v[i].order = k;
        }
        slurm_hostlist_destroy(hl);
    }
    qsort(v, n, sizeof(*v), by_job_order);
    for (size_t i = 0; i < n; i++) {
        add(&nodes, "%s%s", i ? "," : "", v[i].host);
        add(&counts, "%s%zu", i ? "," : "", v[i].count);
    }
    free(v);
    char *nl = take(&nodes);
    char *c = take(&counts);
    if (nl && c && pl_env_set(env, "SLURM_NODELIST", nl) == 0
        && pl_env_set(env, "SLURM_TASKS_PER_NODE", c) == 0)
        rc = 0;
    free(nl);
    free(c);
    return rc;
}

/* The distinct hosts in their order of first appearance. */
static size_t count_nodes(const struct pl_run *r)
{
    size_t n = 0;

    for (size_t i = 0; r->hosts[i]; i++) {
        size_t j = 0;
        while (j < i && strcmp(r->hosts[j], r->hosts[i]))
            j++;
        n += j == i;
    }
    return n;
}

char **pl_mpi_argv(const struct pl_run *r, const char *self)
{
    size_t nargs = pl_strv_len(r->argv);
    char **v;
    size_t n = 0;

    if (!(v = calloc(nargs + 16, sizeof(*v))))
        return NULL;
#define ARG(expr)                                                            \
    do {                                                                     \
        if (!(v[n++] = (expr)))                                              \
            goto error;                                                      \
    } while (0)
    if (r->launcher == PL_LAUNCHER_MPIRUN) {
        ARG(strdup("mpirun"));
        ARG(strdup("--np"));
        if (asprintf(&v[n++], "%llu", (unsigned long long)r->size) < 0)
            v[n - 1] = NULL;
        if (!v[n - 1])
            goto error;
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
        if (asprintf(&v[n++], "--nodes=%zu", count_nodes(r)) < 0)
            v[n - 1] = NULL;
        if (!v[n - 1])
            goto error;
        if (asprintf(&v[n++], "--ntasks=%llu", (unsigned long long)r->size)
            < 0)
            v[n - 1] = NULL;
        if (!v[n - 1])
            goto error;
        ARG(strdup("--distribution=arbitrary"));
        ARG(strdup("--cpu-bind=none"));
        ARG(strdup("--kill-on-bad-exit=1"));
        if (asprintf(&v[n++], "--job-name=pilot-%llu",
                     (unsigned long long)r->id) < 0)
            v[n - 1] = NULL;
        if (!v[n - 1])
            goto error;
    }
    ARG(strdup(self));
    ARG(strdup("--exec-rank"));
    ARG(strdup("--"));
    for (size_t i = 0; i < nargs; i++)
        ARG(strdup(r->argv[i]));
#undef ARG
    v[n] = NULL;
    return v;
error:
    pl_strv_free(v);
    errno = ENOMEM;
    return NULL;
}

int pl_mpi_env(const struct pl_run *r, const char *hostfile, bool root,
               struct pl_env *env, struct pl_error *errp)
{
    char *job_nodelist = NULL;
    const char *jn = pl_env_get(env, "SLURM_JOB_NODELIST");
    int rc = -1;

    if (jn && !(job_nodelist = strdup(jn)))
        goto nomem;
    /* what the task's --env may have added of a step's variables: srun
     * would read them as options (SLURM_NTASKS_PER_NODE, ...) */
    pl_env_drop_step(env);
    if (!r->rank_gpus)
        pl_env_unset(env, "PILOT_RANK_GPUS");
    if (pl_env_set(env, "PILOT_RANK_CORES", r->rank_cores) < 0
        || (r->rank_gpus
            && pl_env_set(env, "PILOT_RANK_GPUS", r->rank_gpus) < 0)
        || (r->launcher != PL_LAUNCHER_MPIRUN && hostfile
            && pl_env_set(env, "SLURM_HOSTFILE", hostfile) < 0)
        || (r->launcher == PL_LAUNCHER_MPIRUN
            && (mpirun_alloc_env(r, job_nodelist, env) < 0
                /* the srun that starts mpirun's orteds shares the CPUs
                 * the agents' step holds */
                || pl_env_set(env, "SLURM_OVERLAP", "1") < 0))
        || (root && (pl_env_set(env, "OMPI_ALLOW_RUN_AS_ROOT", "1") < 0
                     || pl_env_set(env, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
                                   "1") < 0)))
        goto nomem;
    rc = 0;
    goto out;
nomem:
    errno = ENOMEM;
    pl_errprintf(errp, "out of memory");
out:
    free(job_nodelist);
    return rc;
}

/* Write 'text' to 'path', a new file (0600) beside the task's output
 * (pl_output_open()). */
static int write_file(const char *path, const char *text,
                      struct pl_error *errp)
{
    int fd;

    if ((fd = pl_output_open(path, false, errp)) < 0)
        return -1;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    int saved = errno;
    if (close(fd) < 0 && n == (ssize_t)len) {
        saved = errno;
        n = -1;
    }
    if (n != (ssize_t)len) {
        errno = n < 0 ? saved : EIO;
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    }
    return 0;
}

int pl_mpi_launcher(struct pl_run *r, struct pl_env *env,
                    struct pl_error *errp)
{
    char self[PATH_MAX];
    char *hostfile = NULL, *rankfile = NULL;
    char *text = NULL;
    char **argv;
    ssize_t n;

    if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) < 0)
        return pl_errprintf(errp, "/proc/self/exe: %s", strerror(errno));
    self[n] = '\0';
    /* srun reads a hostfile (SLURM_HOSTFILE), mpirun a rankfile */
    bool srun = r->launcher != PL_LAUNCHER_MPIRUN;
    char **path = srun ? &hostfile : &rankfile;
    if (asprintf(path, "%s.%s", r->out, srun ? "hosts" : "ranks") < 0) {
        *path = NULL;
        goto nomem;
    }
    if (!(text = srun ? pl_mpi_hostfile(r) : pl_mpi_rankfile(r)))
        goto nomem;
    if (write_file(*path, text, errp) < 0)
        goto error;
    if (pl_mpi_env(r, hostfile, geteuid() == 0, env, errp) < 0)
        goto error;
    if (!(argv = pl_mpi_argv(r, self)))
        goto nomem;
    if (rankfile) {
        /* mpirun RANKFILE-less maps ranks in its own (sorted) node order */
        size_t na = pl_strv_len(argv);
        char **v = calloc(na + 3, sizeof(*v));
        if (!v) {
            pl_strv_free(argv);
            goto nomem;
        }
        v[0] = argv[0];
        v[1] = strdup("--rankfile");
        v[2] = rankfile;
        rankfile = NULL;
        memcpy(v + 3, argv + 1, (na - 1) * sizeof(*v));
        free(argv);
        argv = v;
        if (!v[1]) {
            pl_strv_free(argv);
            goto nomem;
        }
    }
    pl_strv_free(r->argv);
    r->argv = argv;
    free(text);
    free(hostfile);
    return 0;
nomem:
    errno = ENOMEM;
    pl_errprintf(errp, "out of memory");
error:
    free(text);
    free(hostfile);
    free(rankfile);
    return -1;
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

/* Entry 'n' of the 'sep'-separated list 'all', as a new string; NULL if
 * there is no such entry (errno 0) or on ENOMEM. */
static char *nth_entry(const char *all, char sep, unsigned long n)
{
    const char *p = all;
    char seps[2] = { sep, '\0' };

    errno = 0;
    for (unsigned long i = 0; i < n && p; i++)
        if ((p = strchr(p, sep)))
            p++;
    if (!p)
        return NULL;
    return strndup(p, strcspn(p, seps));
}

/* Position of 'name' in the comma-separated 'list', or -1. */
static long list_index(const char *list, const char *name)
{
    size_t len = strlen(name);
    long i = 0;

    for (const char *p = list; p && *p; i++) {
        size_t n = strcspn(p, ",");
        if (n == len && !strncmp(p, name, len))
            return i;
        p += n + (p[n] == ',');
    }
    return -1;
}

/* The ranks on this node: Open MPI's count, else entry SLURM_NODEID of
 * srun's SLURM_STEP_TASKS_PER_NODE ("2(x3),1"); 0 if neither says. */
static unsigned long local_size(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const char *per = getenv("SLURM_STEP_TASKS_PER_NODE");
    const char *id = getenv("SLURM_NODEID");
    char *end;
    unsigned long node, at = 0;

    if (v && *v)
        return strtoul(v, NULL, 10);
    if (!per || !id || !*id)
        return 0;
    node = strtoul(id, &end, 10);
    if (*end)
        return 0;
    for (const char *p = per; *p;) {
        unsigned long count = strtoul(p, &end, 10), times = 1;
        if (end == p)
            return 0;
        p = end;
        if (!strncmp(p, "(x", 2)) {
            times = strtoul(p + 2, &end, 10);
            if (end == p + 2 || *end != ')')
                return 0;
            p = end + 1;
        }
        if (node < at + times)
            return count;
        at += times;
        if (*p == ',')
            p++;
        else if (*p)
            return 0;
    }
    return 0;
}

/* Bind this rank to the GPUs of its entry of PILOT_RANK_GPUS (Slurm ids),
 * found in this node's own lists as the agent finds its GPUs
 * (agent/resources.h), and set the variables agent/bind_cuda.c sets for
 * a task.  No PILOT_RANK_GPUS: the rank sees no GPU.  Returns 0, or the
 * exit status after a line on stderr. */
static int bind_gpus(unsigned long rank, const char *node)
{
    static const char *const vars[] = { "CUDA_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL", "SLURM_STEP_GPUS", "PILOT_GPUS" };
    const char *all = getenv("PILOT_RANK_GPUS");
    struct pl_resources *r = NULL;
    struct pl_error err;
    struct buf visible = { 0 };
    char *ids = NULL;
    char *v = NULL;
    int rc = 127;

    if (!all) {
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
            if (setenv(vars[i], "", 1) < 0)
                return fail("out of memory");
        return 0;
    }
    if (!(ids = nth_entry(all, ';', rank))) {
        if (errno)
            return fail("out of memory");
        return fail("rank %lu: no entry in PILOT_RANK_GPUS", rank);
    }
    struct pl_resources_spec spec = {
        .node = node,
        .step_gpus = getenv("SLURM_STEP_GPUS"),
        .job_gpus = getenv("SLURM_JOB_GPUS"),
        .cuda_visible = getenv("CUDA_VISIBLE_DEVICES"),
    };
    if (!(r = pl_resources_new(&spec, &err))) {
        fail("rank %lu: %s", rank, err.text);
        goto out;
    }
    for (const char *p = ids; *p;) {
        size_t n = strcspn(p, ",");
        char *id = strndup(p, n);
        size_t pos = 0, ngpus = pl_resources_ngpus(r);
        if (!id) {
            fail("out of memory");
            goto out;
        }
        while (pos < ngpus && strcmp(pl_resources_gpu_id(r, pos), id))
            pos++;
        if (pos == ngpus) {
            fail("rank %lu: GPU %s is not among this node's GPUs (%s)", rank,
                 id, spec.step_gpus  ? spec.step_gpus
                     : spec.job_gpus ? spec.job_gpus
                                     : "none");
            free(id);
            goto out;
        }
        free(id);
        add(&visible, "%s%s", visible.len ? "," : "",
            pl_resources_gpu_visible(r, pos));
        p += n + (p[n] == ',');
    }
    if (!(v = take(&visible)) || setenv("CUDA_VISIBLE_DEVICES", v, 1) < 0
        || setenv("GPU_DEVICE_ORDINAL", v, 1) < 0
        || setenv("SLURM_STEP_GPUS", ids, 1) < 0
        || setenv("PILOT_GPUS", ids, 1) < 0) {
        fail("out of memory");
        goto out;
    }
    rc = 0;
out:
    if (!v)
        free(visible.s);
    free(v);
    free(ids);
    pl_resources_free(r);
    return rc;
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
    char *list = nth_entry(all, ';', rank);
    if (!list) {
        if (errno)
            return fail("out of memory");
        return fail("rank %lu: no entry in PILOT_RANK_CORES", rank);
    }
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
    int rc = bind_gpus(rank, node);
    if (rc)
        return rc;
    char num[32];
    snprintf(num, sizeof(num), "%lu", rank);
    char nthreads[16];
    snprintf(nthreads, sizeof(nthreads), "%u", ncores);
    /* the node's place in the task, and its rank count: rank 0's
     * values came with the launcher's environment */
    long node_rank = list_index(getenv("PILOT_NODELIST"), node);
    unsigned long lsize = local_size();
    char nr[32], ls[32];
    snprintf(nr, sizeof(nr), "%ld", node_rank);
    snprintf(ls, sizeof(ls), "%lu", lsize);
    if (setenv("PILOT_RANK", num, 1) < 0
        || copy_env("PILOT_SIZE", size_vars) < 0
        || copy_env("PILOT_LOCAL_RANK", local_vars) < 0
        || setenv("PILOT_NODE", node, 1) < 0
        || setenv("OMP_NUM_THREADS", nthreads, 1) < 0
        || (node_rank >= 0 ? setenv("PILOT_NODE_RANK", nr, 1)
                           : unsetenv("PILOT_NODE_RANK")) < 0
        || (lsize ? setenv("PILOT_LOCAL_SIZE", ls, 1)
                  : unsetenv("PILOT_LOCAL_SIZE")) < 0)
        return fail("out of memory");
    execvp(argv[0], argv);
    return fail("%s: %s", argv[0], strerror(errno));
}
