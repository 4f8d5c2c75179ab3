/* tests/unit/test_agent_corpus.c - the fuzzers' task inputs through what
 * the agent builds from a RUN entry before a spawn
 *
 * The fuzzers link libpl alone, so they run pl_run_decode() but not the
 * agent's consumers of the entries it accepts.  This test replays every
 * input of tests/fuzz/corpus/task/ and tests/fuzz/regress/task/ (from the
 * repository root, where prove runs) wrapped as tests/fuzz/fuzz_task.c
 * wraps it, decodes each entry of the RUN, and for each accepted entry
 * runs pl_comm_env() and, for comm mpi, pl_mpi_argv(), pl_mpi_hostfile(),
 * pl_mpi_rankfile() and pl_mpi_env() (with either launcher), checking
 * what their headers promise.  Each input is replayed in a child, so
 * that a crash or a hang fails that input's test point.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/comm.h"
#include "agent/env.h"
#include "agent/mpi.h"
#include "proto/msg.h"
#include "proto/poolmsg.h"
#include "proto/run.h"
#include "proto/spec.h"
#include "proto/strv.h"
#include "tests/unit/helpers.h"
#include "tests/unit/tap.h"

#define MAX_FILES 4096
#define SELF "/bin/pilot-agent"
#define HOSTFILE "/tmp/x.hosts"

static const char *const dirs[] = { "tests/fuzz/corpus/task",
                                    "tests/fuzz/regress/task" };

/* The replay of one input: its name, its bytes, what went wrong. */
struct input {
    const char *path;
    unsigned char *data;
    size_t size;
    int broken;     /* promises broken */
    int accepted[3]; /* accepted entries, by comm */
    int prefetched;  /* ... of them prefetched (no cores yet) */
};

/* A broken promise: a diag line naming the input and the entry. */
#define CHECK(in, i, cond)                                                     \
    do {                                                                       \
        if (!(cond)) {                                                         \
            diag("%s: entry %u: broken: %s", (in)->path, (unsigned)(i),       \
                 #cond);                                                       \
            (in)->broken++;                                                    \
        }                                                                      \
    } while (0)

/* [5, 202, 0, {"tasks": [ ... (tests/fuzz/fuzz_task.c) */
static const unsigned char head[] = {
    0x94, PL_PROTO_VERSION, 0xcc, 202, 0x00, 0x82,
    0xa5, 't', 'a', 's', 'k', 's', 0x91,
};
/* ... ], "events": [ ... ]} */
static const unsigned char mid[] = {
    0xa6, 'e', 'v', 'e', 'n', 't', 's', 0x91,
};

/* Whether 'env' has KEY set to the unsigned 'want'. */
static bool env_is_u(const struct pl_env *env, const char *key, uint64_t want)
{
    const char *v = pl_env_get(env, key);
    char buf[32];

    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)want);
    return v && !strcmp(v, buf);
}

static bool env_is(const struct pl_env *env, const char *key,
                   const char *want)
{
    const char *v = pl_env_get(env, key);

    return v && want && !strcmp(v, want);
}

/* Every entry of the vector of 'env' is KEY=VALUE with a KEY. */
static bool env_well_formed(struct pl_env *env)
{
    char **v = pl_env_vector(env);

    if (!v)
        return false;
    for (; *v; v++)
        if (!strchr(*v, '=') || **v == '=')
            return false;
    return true;
}

/* 'v' joined with commas, in 'buf' ("" when it does not fit). */
static const char *join(char *const *v, char *buf, size_t len)
{
    size_t at = 0;

    buf[0] = '\0';
    for (size_t i = 0; v[i]; i++) {
        int n = snprintf(buf + at, len - at, "%s%s", i ? "," : "", v[i]);
        if (n < 0 || (size_t)n >= len - at) {
            buf[0] = '\0';
            return buf;
        }
        at += (size_t)n;
    }
    return buf;
}

/* Entries of the ';'-separated list 's'. */
static size_t count_lists(const char *s)
{
    size_t n = 1;

    for (; *s; s++)
        n += *s == ';';
    return n;
}

/* What pl_run_decode() promises of an entry it accepted. */
static void check_entry(struct input *in, uint32_t i, const struct pl_run *r)
{
    CHECK(in, i, r->argv && r->argv[0]);
    /* a pool task's rank holds no cores: it runs in a worker; a
     * prefetched entry has none yet: its agent starts it on the cores
     * an end frees (agent/prefetch.c), one rank of a plain command */
    if (r->prefetch)
        CHECK(in, i, r->ncores == 0 && r->ngpus == 0 && !r->pool
                         && r->size == 1 && r->comm == PL_COMM_NONE
                         && r->fn == PL_FN_NONE);
    else
        CHECK(in, i, r->pool ? r->ncores == 0 || r->cores
                             : r->cores && r->ncores >= 1);
    if (r->pool) {
        CHECK(in, i, pl_pool_name_ok(r->pool) && r->group
                         && r->group[r->rank] == r->world_rank
                         && (r->fn == PL_FN_C || r->fn == PL_FN_PY)
                         && r->comm == PL_COMM_NONE
                         && strchr(r->argv[0], ':'));
        for (uint64_t k = 0; k < r->size; k++)
            CHECK(in, i, r->group[k] < PL_POOL_MAX_WORKERS);
    }
    for (uint32_t k = 0; k < r->ncores; k++)
        CHECK(in, i, r->cores[k] < PL_RUN_MAX_CPU);
    CHECK(in, i, r->size >= 1 && r->rank < r->size);
    CHECK(in, i, r->local_size >= 1 && r->local_rank < r->local_size
                     && r->local_size <= r->size);
    CHECK(in, i, r->node_rank < (r->nodelist ? pl_strv_len(r->nodelist)
                                             : 1));
    CHECK(in, i, r->out && r->out[0] && r->err && r->err[0]);
    CHECK(in, i, isfinite(r->timeout) && r->timeout >= 0
                     && r->timeout <= PL_SPEC_MAX_TIMEOUT);
    for (char **e = r->env; e && *e; e++)
        CHECK(in, i, strchr(*e, '=') && **e != '=');
    CHECK(in, i, r->comm == PL_COMM_NONE || r->comm == PL_COMM_TORCH
                     || r->comm == PL_COMM_MPI);
    if (r->comm == PL_COMM_TORCH)
        CHECK(in, i, r->master_addr && r->master_addr[0]
                         && r->master_port >= 1 && r->master_port <= 65535);
    if (r->comm == PL_COMM_MPI) {
        CHECK(in, i, r->launcher == PL_LAUNCHER_SRUN
                         || r->launcher == PL_LAUNCHER_MPIRUN);
        CHECK(in, i, r->hosts && pl_strv_len(r->hosts) == r->size);
        CHECK(in, i, r->rank_cores
                         && count_lists(r->rank_cores) == r->size);
        CHECK(in, i, !r->rank_gpus || count_lists(r->rank_gpus) == r->size);
    }
}

/* pl_comm_env(): the rank's identity, KEY=VALUE entries. */
static void check_comm_env(struct input *in, uint32_t i, const struct pl_run *r)
{
    struct pl_env *env = pl_env_new(NULL);
    struct pl_error e;
    char nodes[8192];

    CHECK(in, i, env != NULL);
    if (!env)
        return;
    CHECK(in, i, pl_comm_env(r, "n1", env, &e) == 0);
    CHECK(in, i, env_well_formed(env));
    CHECK(in, i, env_is_u(env, "PILOT_RANK", r->rank));
    CHECK(in, i, env_is_u(env, "PILOT_SIZE", r->size));
    CHECK(in, i, env_is_u(env, "PILOT_LOCAL_RANK", r->local_rank));
    CHECK(in, i, env_is_u(env, "PILOT_LOCAL_SIZE", r->local_size));
    CHECK(in, i, env_is_u(env, "PILOT_NODE_RANK", r->node_rank));
    if (r->nodelist && join(r->nodelist, nodes, sizeof(nodes))[0])
        CHECK(in, i, env_is(env, "PILOT_NODELIST", nodes));
    if (!r->nodelist)
        CHECK(in, i, env_is(env, "PILOT_NODELIST", "n1"));
    CHECK(in, i, env_is(env, "PILOT_COMM", pl_comm_name(r->comm)));
    if (r->comm == PL_COMM_TORCH) {
        CHECK(in, i, env_is(env, "MASTER_ADDR", r->master_addr));
        CHECK(in, i, env_is_u(env, "MASTER_PORT", r->master_port));
        CHECK(in, i, env_is_u(env, "WORLD_SIZE", r->size));
        CHECK(in, i, env_is_u(env, "RANK", r->rank));
        CHECK(in, i, env_is_u(env, "LOCAL_RANK", r->local_rank));
        CHECK(in, i, env_is_u(env, "LOCAL_WORLD_SIZE", r->local_size));
        CHECK(in, i, env_is_u(env, "GROUP_RANK", r->node_rank));
    }
    else
        CHECK(in, i, !pl_env_get(env, "MASTER_ADDR")
                         && !pl_env_get(env, "WORLD_SIZE"));
    pl_env_free(env);
}

/* The launcher's argv: srun's or mpirun's options, then SELF --exec-rank
 * -- and the task's argv at its end, NULL-terminated. */
static void check_argv(struct input *in, uint32_t i, const struct pl_run *r)
{
    char **v = pl_mpi_argv(r, SELF);
    size_t n, na = pl_strv_len(r->argv);
    char want[64];

    CHECK(in, i, v != NULL);
    if (!v)
        return;
    n = pl_strv_len(v); /* up to its NULL */
    CHECK(in, i, n >= na + 4);
    if (n >= na + 4) {
        for (size_t k = 0; k < na; k++)
            CHECK(in, i, !strcmp(v[n - na + k], r->argv[k]));
        CHECK(in, i, !strcmp(v[n - na - 1], "--"));
        CHECK(in, i, !strcmp(v[n - na - 2], "--exec-rank"));
        CHECK(in, i, !strcmp(v[n - na - 3], SELF));
    }
    if (r->launcher == PL_LAUNCHER_MPIRUN) {
        snprintf(want, sizeof(want), "%llu", (unsigned long long)r->size);
        CHECK(in, i, !strcmp(v[0], "mpirun") && n > 2
                         && !strcmp(v[1], "--np") && !strcmp(v[2], want));
    }
    else {
        snprintf(want, sizeof(want), "--ntasks=%llu",
                 (unsigned long long)r->size);
        bool has = false;
        for (size_t k = 0; k < n; k++)
            has = has || !strcmp(v[k], want);
        CHECK(in, i, !strcmp(v[0], "srun") && has);
    }
    pl_strv_free(v);
}

/* The hostfile: one line per rank, its host; the rankfile: one line per
 * rank, "rank I=HOST slot=CORES". */
static void check_files(struct input *in, uint32_t i, const struct pl_run *r)
{
    char *hosts = pl_mpi_hostfile(r);
    char *ranks = pl_mpi_rankfile(r);
    const char *cores = r->rank_cores;

    CHECK(in, i, hosts != NULL && ranks != NULL);
    if (hosts) {
        const char *p = hosts;
        for (size_t k = 0; r->hosts[k]; k++) {
            size_t len = strlen(r->hosts[k]);
            CHECK(in, i, !strncmp(p, r->hosts[k], len) && p[len] == '\n');
            if (strncmp(p, r->hosts[k], len) || p[len] != '\n')
                break;
            p += len + 1;
        }
        CHECK(in, i, *p == '\0');
    }
    if (ranks) {
        const char *p = ranks;
        for (size_t k = 0; r->hosts[k]; k++) {
            size_t clen = strcspn(cores, ";");
            char *want;
            if (asprintf(&want, "rank %zu=%s slot=%.*s\n", k, r->hosts[k],
                         (int)clen, cores) < 0)
                abort();
            size_t wlen = strlen(want);
            bool same = !strncmp(p, want, wlen);
            free(want);
            CHECK(in, i, same);
            if (!same)
                break;
            p += wlen;
            cores += clen + (cores[clen] == ';');
        }
        CHECK(in, i, *p == '\0');
    }
    free(hosts);
    free(ranks);
}

/* pl_mpi_env(): the launcher's environment. */
static void check_mpi_env(struct input *in, uint32_t i, const struct pl_run *r)
{
    struct pl_env *env = pl_env_new(NULL);
    struct pl_error e;

    CHECK(in, i, env != NULL);
    if (!env)
        return;
    /* what an agent in a Slurm job has: mpirun's nodes are ordered by it */
    (void)pl_env_set(env, "SLURM_JOB_NODELIST", "n[1-4],gpu[01-02]");
    (void)pl_env_set(env, "SLURM_STEP_ID", "0");
    CHECK(in, i, pl_comm_env(r, "n1", env, &e) == 0);
    CHECK(in, i, pl_mpi_env(r, HOSTFILE, false, env, &e) == 0);
    CHECK(in, i, env_well_formed(env));
    CHECK(in, i, env_is(env, "PILOT_RANK_CORES", r->rank_cores));
    if (r->rank_gpus)
        CHECK(in, i, env_is(env, "PILOT_RANK_GPUS", r->rank_gpus));
    else
        CHECK(in, i, !pl_env_get(env, "PILOT_RANK_GPUS"));
    CHECK(in, i, !pl_env_get(env, "SLURM_STEP_ID")
                     && !pl_env_get(env, "OMPI_ALLOW_RUN_AS_ROOT"));
    if (r->launcher == PL_LAUNCHER_MPIRUN) {
        const char *nl = pl_env_get(env, "SLURM_NODELIST");
        const char *tpn = pl_env_get(env, "SLURM_TASKS_PER_NODE");
        uint64_t sum = 0;
        size_t nn = 1, nc = 1, distinct = 0;
        CHECK(in, i, nl && *nl && tpn && *tpn);
        for (const char *p = nl; nl && *p; p++)
            nn += *p == ',';
        /* "2,1": a rank count per node, in SLURM_NODELIST's order */
        for (const char *p = tpn; tpn && *p;) {
            char *end;
            sum += strtoull(p, &end, 10);
            if (end == p || (*end && *end != ','))
                break;
            p = end + (*end == ',');
            nc += *end == ',';
        }
        for (size_t k = 0; r->hosts[k]; k++) {
            size_t j = 0;
            while (j < k && strcmp(r->hosts[j], r->hosts[k]))
                j++;
            distinct += j == k;
        }
        CHECK(in, i, sum == r->size && nn == nc && nn == distinct);
        CHECK(in, i, env_is(env, "SLURM_OVERLAP", "1"));
        CHECK(in, i, !pl_env_get(env, "SLURM_HOSTFILE"));
    }
    else
        CHECK(in, i, env_is(env, "SLURM_HOSTFILE", HOSTFILE));
    pl_env_free(env);
}

/* What agent/ builds from accepted entry 'r' before a spawn; for comm
 * mpi with either launcher (an entry of the corpus names one). */
static void run_consumers(struct input *in, uint32_t i, struct pl_run *r)
{
    check_comm_env(in, i, r);
    if (r->comm != PL_COMM_MPI)
        return;
    int given = r->launcher;
    int other = given == PL_LAUNCHER_MPIRUN ? PL_LAUNCHER_SRUN
                                            : PL_LAUNCHER_MPIRUN;
    for (int k = 0; k < 2; k++) {
        r->launcher = k == 0 ? given : other;
        check_argv(in, i, r);
        check_files(in, i, r);
        check_mpi_env(in, i, r);
    }
    r->launcher = given;
}

/* Replay 'in' (the checks unless 'count_only'). */
static void replay(struct input *in, bool count_only)
{
    size_t len = sizeof(head) + in->size + sizeof(mid) + in->size;
    unsigned char *buf;
    struct pl_msg m;
    struct pl_error e;
    const msgpack_object *entries;

    /* what tests/fuzz/fuzz_task.c skips */
    if (in->size == 0 || in->size > PL_MSG_MAX / 4 || !(buf = malloc(len)))
        return;
    memcpy(buf, head, sizeof(head));
    memcpy(buf + sizeof(head), in->data, in->size);
    memcpy(buf + sizeof(head) + in->size, mid, sizeof(mid));
    memcpy(buf + sizeof(head) + in->size + sizeof(mid), in->data, in->size);
    if (pl_msg_decode(buf, len, &m, &e) < 0) {
        free(buf);
        return;
    }
    if (pl_run_msg_decode(m.body, &entries, &e) == 0) {
        for (uint32_t i = 0; i < entries->via.array.size; i++) {
            struct pl_run r;
            bool have_id;
            errno = 0;
            e.text[0] = '\0';
            int rc = pl_run_decode(&entries->via.array.ptr[i], &r, &have_id,
                                   &e);
            if (rc == 0 && r.comm >= 0 && r.comm < 3)
                in->accepted[r.comm]++;
            if (rc == 0 && r.prefetch)
                in->prefetched++;
            if (count_only) {
                pl_run_clear(&r);
                continue;
            }
            if (rc < 0)
                CHECK(in, i, errno != 0 && e.text[0] != '\0');
            else {
                CHECK(in, i, have_id);
                check_entry(in, i, &r);
                run_consumers(in, i, &r);
            }
            pl_run_clear(&r);
        }
    }
    pl_msg_release(&m);
    free(buf);
}

static int replay_child(void *arg)
{
    struct input *in = arg;

    replay(in, false);
    return in->broken;
}

/* Read the file 'path' into in->data.  0, or -1 after a diag line. */
static int load(const char *path, struct input *in)
{
    FILE *fp = fopen(path, "rb");
    struct stat st;

    memset(in, 0, sizeof(*in));
    in->path = path;
    if (!fp || fstat(fileno(fp), &st) < 0) {
        diag("%s: %s", path, strerror(errno));
        if (fp)
            fclose(fp);
        return -1;
    }
    in->size = (size_t)st.st_size;
    if (!(in->data = malloc(in->size ? in->size : 1))
        || fread(in->data, 1, in->size, fp) != in->size) {
        diag("%s: cannot read it", path);
        fclose(fp);
        free(in->data);
        in->data = NULL;
        return -1;
    }
    fclose(fp);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    char *paths[MAX_FILES];
    size_t n = 0;
    int accepted[3] = { 0, 0, 0 }, prefetched = 0;

    for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
        DIR *dp = opendir(dirs[d]);
        struct dirent *de;
        while (dp && (de = readdir(dp)) && n < MAX_FILES) {
            struct stat st;
            char *p;
            if (de->d_name[0] == '.')
                continue;
            if (asprintf(&p, "%s/%s", dirs[d], de->d_name) < 0)
                abort();
            if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
                paths[n++] = p;
            else
                free(p);
        }
        if (dp)
            closedir(dp);
    }
    qsort(paths, n, sizeof(paths[0]), by_name);

    plan((int)n + 3);
    ok(n > 0, "found %zu inputs in %s and %s (run from the repository "
       "root)", n, dirs[0], dirs[1]);
    for (size_t k = 0; k < n; k++) {
        struct input in;
        if (load(paths[k], &in) < 0) {
            ok(0, "%s: replayed", paths[k]);
            continue;
        }
        int status = t_in_child(replay_child, &in, 60);
        ok(t_child_ok(status, paths[k]), "%s: every accepted entry keeps "
           "the promises of the agent's consumers", paths[k]);
        replay(&in, true);
        for (int c = 0; c < 3; c++)
            accepted[c] += in.accepted[c];
        prefetched += in.prefetched;
        free(in.data);
    }
    ok(accepted[PL_COMM_NONE] > 0 && accepted[PL_COMM_TORCH] > 0
           && accepted[PL_COMM_MPI] > 0,
       "accepted entries of every comm: none %d, torch %d, mpi %d",
       accepted[PL_COMM_NONE], accepted[PL_COMM_TORCH],
       accepted[PL_COMM_MPI]);
    ok(prefetched > 0, "... %d of them prefetched (no cores yet)",
       prefetched);
    for (size_t k = 0; k < n; k++)
        free(paths[k]);
    return done_testing();
}
