/* tests/unit/test_agent_mpi.c - MPI tasks: the checks on the run entry,
 * the launcher's argv, hostfile and environment, and --exec-rank */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/env.h"
#include "agent/mpi.h"
#include "proto/msg.h"
#include "proto/run.h"
#include "proto/spec.h"
#include "proto/strv.h"
#include "tests/mpw.h"
#include "tests/unit/helpers.h"
#include "tests/unit/tap.h"

/* One MPI run entry; a NULL field is left out. */
struct entry {
    uint64_t size;
    const char *nodelist; /* "n1,n2" */
    const char *hosts;    /* "n1,n1,n2"; "" packs one empty name */
    const char *cores;    /* "0;1;0,1"; an empty segment: an empty array */
    const char *launcher;
    const char *comm;
    const char *gpus;     /* "0,1;2": rank_gpus (Slurm ids) */
};

static const struct entry *cur;

/* 's' split at 'sep' into a new vector (pl_strv_free()). */
static char **split(const char *s, char sep)
{
    size_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == sep;
    char **v = calloc(n + 1, sizeof(*v));
    const char *p = s;
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(p, (char[]){ sep, '\0' });
        v[i] = strndup(p, len);
        p += len + (p[len] ? 1 : 0);
    }
    return v;
}

static void pack_strv(msgpack_packer *pk, const char *key, const char *s)
{
    char **v = split(s, ',');
    raw_kstrv(pk, key, v);
    pl_strv_free(v);
}

static void pack(msgpack_packer *pk)
{
    const struct entry *e = cur;
    char a[] = "true";
    char *argv[] = { a, NULL };
    uint64_t cores[] = { 0 };
    uint32_t n = 9 + !!e->nodelist + !!e->hosts + !!e->cores + !!e->launcher
                 + !!e->gpus;

    msgpack_pack_map(pk, n);
    raw_kuint(pk, "id", 5);
    raw_kuint(pk, "attempt", 1);
    raw_kstrv(pk, "argv", argv);
    raw_kuintv(pk, "cores", cores, 1);
    raw_kstr(pk, "stdout", "/tmp/o");
    raw_kstr(pk, "stderr", "/tmp/e");
    raw_kuint(pk, "rank", 0);
    raw_kuint(pk, "size", e->size);
    raw_kstr(pk, "comm", e->comm ? e->comm : "mpi");
    if (e->nodelist)
        pack_strv(pk, "nodelist", e->nodelist);
    if (e->hosts)
        pack_strv(pk, "hosts", e->hosts);
    if (e->launcher)
        raw_kstr(pk, "launcher", e->launcher);
    if (e->cores) {
        char **ranks = split(e->cores, ';');
        raw_key(pk, "rank_cores");
        msgpack_pack_array(pk, (uint32_t)pl_strv_len(ranks));
        for (char **r = ranks; *r; r++) {
            char **ids = **r ? split(*r, ',') : calloc(1, sizeof(char *));
            msgpack_pack_array(pk, (uint32_t)pl_strv_len(ids));
            for (char **id = ids; *id; id++)
                msgpack_pack_uint64(pk, strtoull(*id, NULL, 10));
            pl_strv_free(ids);
        }
        pl_strv_free(ranks);
    }
    if (e->gpus) {
        char **ranks = split(e->gpus, ';');
        raw_key(pk, "rank_gpus");
        msgpack_pack_array(pk, (uint32_t)pl_strv_len(ranks));
        for (char **r = ranks; *r; r++) {
            char **ids = **r ? split(*r, ',') : calloc(1, sizeof(char *));
            msgpack_pack_array(pk, (uint32_t)pl_strv_len(ids));
            for (char **id = ids; *id; id++)
                pl_w_str(pk, *id);
            pl_strv_free(ids);
        }
        pl_strv_free(ranks);
    }
}

static int decode(const struct entry *e, struct pl_run *s,
                  struct pl_error *err)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_unpacked up;
    bool have_id;
    int rc;

    cur = e;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack(&pk);
    msgpack_unpacked_init(&up);
    msgpack_unpack_next(&up, sb.data, sb.size, NULL);
    rc = pl_run_decode(&up.data, s, &have_id, err);
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* A bad entry fails with an error text containing 'want'. */
static void bad(const struct entry *e, const char *want, const char *what)
{
    struct pl_run s;
    struct pl_error err = { .text = "" };

    int rc = decode(e, &s, &err);
    ok(rc < 0 && errno == EPROTO && strstr(err.text, want), "bad: %s", what);
    if (rc == 0 || !strstr(err.text, want))
        diag("got '%s'", rc == 0 ? "success" : err.text);
    pl_run_clear(&s);
}

static void test_decode(void)
{
    struct pl_run s;
    struct pl_error err;
    struct entry good = { 4, "n1,n2", "n1,n1,n2,n2", "0;1;0,1;2", NULL,
                          NULL, NULL };

    ok(decode(&good, &s, &err) == 0, "decode: mpi entry");
    ok(s.comm == PL_COMM_MPI && s.launcher == PL_LAUNCHER_SRUN,
       "decode: comm mpi, launcher srun by default");
    ok(pl_strv_len(s.hosts) == 4 && !strcmp(s.hosts[2], "n2"),
       "decode: hosts");
    is_str(s.rank_cores, "0;1;0,1;2", "decode: rank_cores joined");
    pl_run_clear(&s);

    struct entry mr = { 2, "n1,n2", "n1,n2", "0;0", "mpirun", NULL, NULL };
    ok(decode(&mr, &s, &err) == 0 && s.launcher == PL_LAUNCHER_MPIRUN,
       "decode: launcher mpirun");
    pl_run_clear(&s);

    struct entry e;
    e = (struct entry){ 2, "n1,n2", NULL, NULL, NULL, NULL, NULL };
    bad(&e, "mpi task without placement", "no hosts");
    e = (struct entry){ 2, "n1,n2", "n1,n2", "0;0", "mpiexec", NULL, NULL };
    bad(&e, "unknown launcher 'mpiexec'", "unknown launcher");
    e = (struct entry){ 3, "n1,n2", "n1,n2", "0;0;0", NULL, NULL, NULL };
    bad(&e, "one host per rank", "hosts shorter than size");
    e = (struct entry){ 2, "n1,n2", "n1,n3", "0;0", NULL, NULL, NULL };
    bad(&e, "'n3' is not in 'nodelist'", "host not in nodelist");
    e = (struct entry){ 2, "n1,n2", "n1,", "0;0", NULL, NULL, NULL };
    bad(&e, "empty name", "empty host");
    e = (struct entry){ 2, "n1,n2", "n1,n2:1", "0;0", NULL, NULL, NULL };
    bad(&e, "colon", "host with a colon");
    e = (struct entry){ 2, "n1,n2 x", "n1,n2 x", "0;0", NULL, NULL, NULL };
    bad(&e, "space", "host with a space");
    e = (struct entry){ 2, "n1,n2", "n1,n2", "0", NULL, NULL, NULL };
    bad(&e, "one entry per rank", "rank_cores shorter than size");
    e = (struct entry){ 2, "n1,n2", "n1,n2", "0;", NULL, NULL, NULL };
    bad(&e, "non-empty array", "an empty rank_cores entry");
    e = (struct entry){ 2, "n1,n2", "n1,n2", NULL, NULL, NULL, NULL };
    bad(&e, "rank_cores", "no rank_cores");
    e = (struct entry){ 2, "n1,n2", "n1,n2", "0;99999", NULL, NULL, NULL };
    bad(&e, "bad CPU id", "CPU id out of range");

    /* GPUs, by Slurm id */
    e = (struct entry){ 2, "n1,n2", "n1,n2", "0;0", NULL, NULL, "0,1;3" };
    ok(decode(&e, &s, &err) == 0, "decode: rank_gpus");
    is_str(s.rank_gpus, "0,1;3", "decode: rank_gpus joined");
    pl_run_clear(&s);
    ok(decode(&good, &s, &err) == 0 && !s.rank_gpus,
       "decode: no rank_gpus, no GPUs");
    pl_run_clear(&s);
    e = (struct entry){ 2, "n1,n2", "n1,n2", "0;0", NULL, NULL, "0" };
    bad(&e, "'rank_gpus': want one entry per rank", "rank_gpus too short");
    e = (struct entry){ 2, "n1,n2", "n1,n2", "0;0", NULL, NULL, "0;" };
    bad(&e, "non-empty array of GPU ids", "an empty rank_gpus entry");
    e = (struct entry){ 1, "n1", "n1", "0", NULL, NULL, "a;b" };
    bad(&e, "want one entry per rank", "rank_gpus longer than size");

    /* the fields mean nothing without comm mpi */
    e = (struct entry){ 2, "n1,n2", NULL, NULL, NULL, "none", NULL };
    ok(decode(&e, &s, &err) == 0 && !s.hosts, "decode: comm none ignores "
       "the mpi fields");
    pl_run_clear(&s);
}

static char *joinv(char **v)
{
    size_t len = 1;
    for (char **p = v; *p; p++)
        len += strlen(*p) + 1;
    char *s = calloc(1, len);
    for (char **p = v; *p; p++) {
        if (p != v)
            strcat(s, " ");
        strcat(s, *p);
    }
    return s;
}

static void test_launch(void)
{
    struct pl_run s;
    struct pl_error err;
    struct entry e = { 3, "n2,n1", "n2,n2,n1", "0;1;0,1", NULL, NULL, NULL };
    char **argv;
    char *str;

    ok(decode(&e, &s, &err) == 0, "launch: decode");
    s.id = 42;
    str = pl_mpi_hostfile(&s);
    is_str(str, "n2\nn2\nn1\n", "launch: hostfile, one host per rank");
    free(str);
    str = pl_mpi_rankfile(&s);
    is_str(str, "rank 0=n2 slot=0\nrank 1=n2 slot=1\nrank 2=n1 slot=0,1\n",
           "launch: rankfile, each rank's host and cores");
    free(str);
    argv = pl_mpi_argv(&s, "/opt/bin/pilot-agent");
    str = joinv(argv);
    is_str(str, "srun --overlap --mpi=pmix --nodes=2 --ntasks=3 "
                "--distribution=arbitrary --cpu-bind=none "
                "--kill-on-bad-exit=1 --job-name=pilot-42 "
                "/opt/bin/pilot-agent --exec-rank -- true",
           "launch: srun argv");
    free(str);
    pl_strv_free(argv);

    s.launcher = PL_LAUNCHER_MPIRUN;
    argv = pl_mpi_argv(&s, "/opt/bin/pilot-agent");
    str = joinv(argv);
    is_str(str, "mpirun --np 3 --bind-to none "
                "/opt/bin/pilot-agent --exec-rank -- true",
           "launch: mpirun argv");
    free(str);
    pl_strv_free(argv);

    /* the environment */
    const char *base[] = { "SLURM_JOB_ID=7", "SLURM_CONF=/etc/slurm.conf",
                     "SLURM_CPUS_PER_TASK=4", "SLURM_NTASKS_PER_NODE=1",
                     "SLURM_STEP_ID=0", "SLURM_MEM_PER_NODE=0",
                     "SLURM_NODELIST=n[1-3]", "SLURM_PROCID=0",
                     "SLURM_CPU_BIND_TYPE=none", "HOME=/root", NULL };
    struct pl_env *env = pl_env_new(NULL);
    for (const char **b = base; *b; b++)
        pl_env_put(env, *b);
    s.launcher = PL_LAUNCHER_SRUN;
    ok(pl_mpi_env(&s, "/d/o.hosts", true, env, &err) == 0, "env: built");
    is_str(pl_env_get(env, "SLURM_JOB_ID"), "7", "env: the job's kept");
    is_str(pl_env_get(env, "SLURM_CONF"), "/etc/slurm.conf",
           "env: SLURM_CONF kept");
    ok(!pl_env_get(env, "SLURM_CPUS_PER_TASK")
           && !pl_env_get(env, "SLURM_NTASKS_PER_NODE")
           && !pl_env_get(env, "SLURM_STEP_ID")
           && !pl_env_get(env, "SLURM_MEM_PER_NODE")
           && !pl_env_get(env, "SLURM_NODELIST")
           && !pl_env_get(env, "SLURM_PROCID")
           && !pl_env_get(env, "SLURM_CPU_BIND_TYPE"),
       "env: the agent step's own gone");
    is_str(pl_env_get(env, "HOME"), "/root", "env: the rest kept");
    is_str(pl_env_get(env, "SLURM_HOSTFILE"), "/d/o.hosts",
           "env: SLURM_HOSTFILE");
    is_str(pl_env_get(env, "PILOT_RANK_CORES"), "0;1;0,1",
           "env: PILOT_RANK_CORES");
    is_str(pl_env_get(env, "OMPI_ALLOW_RUN_AS_ROOT"), "1",
           "env: OMPI_ALLOW_RUN_AS_ROOT as root");
    ok(!pl_env_get(env, "PILOT_RANK_GPUS"), "env: no PILOT_RANK_GPUS "
       "without GPUs");
    pl_env_free(env);
    env = pl_env_new(NULL);
    s.launcher = PL_LAUNCHER_MPIRUN;
    ok(pl_mpi_env(&s, NULL, true, env, &err) == 0
           && !pl_env_get(env, "SLURM_HOSTFILE"), "env: mpirun: no hostfile");
    /* no job node list: by name */
    ok(!strcmp(pl_env_get(env, "SLURM_NODELIST"), "n1,n2")
           && !strcmp(pl_env_get(env, "SLURM_TASKS_PER_NODE"), "1,2"),
       "env: mpirun: SLURM_NODELIST and SLURM_TASKS_PER_NODE of the hosts");
    is_str(pl_env_get(env, "SLURM_OVERLAP"), "1",
           "env: mpirun: its orteds' srun overlaps the agents' step");
    pl_env_free(env);
    /* the job's node order, which srun numbers the orteds by */
    env = pl_env_new(NULL);
    pl_env_put(env, "SLURM_JOB_NODELIST=n[2-3],n1");
    ok(pl_mpi_env(&s, NULL, true, env, &err) == 0
           && !strcmp(pl_env_get(env, "SLURM_NODELIST"), "n2,n1")
           && !strcmp(pl_env_get(env, "SLURM_TASKS_PER_NODE"), "2,1"),
       "env: mpirun: nodes in the job's order");
    pl_env_free(env);
    env = pl_env_new(NULL);
    ok(pl_mpi_env(&s, "/d/o.hosts", false, env, &err) == 0
           && !pl_env_get(env, "OMPI_ALLOW_RUN_AS_ROOT"),
       "env: no OMPI_ALLOW_RUN_AS_ROOT when not root");
    pl_env_free(env);
    pl_run_clear(&s);
}

/* What a file holds, or NULL; the caller frees it. */
static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "r");
    char *buf = calloc(1, 4096);

    if (fp && buf)
        buf[fread(buf, 1, 4095, fp)] = '\0';
    if (fp)
        fclose(fp);
    if (!fp) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* pl_mpi_launcher(): the files it writes, the argv and env it makes. */
static void test_launcher(void)
{
    struct entry e = { 3, "n2,n1", "n2,n2,n1", "0;1;0,1", NULL, NULL, NULL };
    struct pl_run s;
    struct pl_error err;
    struct pl_env *env;
    struct stat st;
    char dir[64], self[PATH_MAX], path[PATH_MAX], want[PATH_MAX * 2 + 256];
    char *str;
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    self[n > 0 ? n : 0] = '\0';
    if (!t_tmpdir("agent-mpi", dir, sizeof(dir)))
        abort();
    /* srun: a hostfile beside stdout, in a directory still to make */
    ok(decode(&e, &s, &err) == 0, "launcher: decode");
    s.id = 42;
    free(s.out);
    if (asprintf(&s.out, "%s/sub/t42.out", dir) < 0)
        abort();
    env = pl_env_new(NULL);
    ok(pl_mpi_launcher(&s, env, &err) == 0, "launcher: srun made");
    snprintf(path, sizeof(path), "%s/sub/t42.out.hosts", dir);
    str = slurp(path);
    is_str(str, "n2\nn2\nn1\n", "launcher: hostfile written beside stdout");
    free(str);
    ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600,
       "launcher: hostfile 0600");
    snprintf(path, sizeof(path), "%s/sub", dir);
    ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0700,
       "launcher: its directory made 0700");
    snprintf(path, sizeof(path), "%s/sub/t42.out.hosts", dir);
    is_str(pl_env_get(env, "SLURM_HOSTFILE"), path,
           "launcher: SLURM_HOSTFILE names it");
    str = joinv(s.argv);
    snprintf(want, sizeof(want), "srun --overlap --mpi=pmix --nodes=2 "
             "--ntasks=3 --distribution=arbitrary --cpu-bind=none "
             "--kill-on-bad-exit=1 --job-name=pilot-42 %s --exec-rank -- "
             "true", self);
    is_str(str, want, "launcher: argv is srun's, running this program");
    free(str);
    pl_env_free(env);
    pl_run_clear(&s);

    /* mpirun: a rankfile, given first */
    ok(decode(&e, &s, &err) == 0, "launcher: decode again");
    s.launcher = PL_LAUNCHER_MPIRUN;
    free(s.out);
    if (asprintf(&s.out, "%s/t43.out", dir) < 0)
        abort();
    env = pl_env_new(NULL);
    ok(pl_mpi_launcher(&s, env, &err) == 0
           && !pl_env_get(env, "SLURM_HOSTFILE"),
       "launcher: mpirun made, no SLURM_HOSTFILE");
    snprintf(path, sizeof(path), "%s/t43.out.ranks", dir);
    str = slurp(path);
    is_str(str, "rank 0=n2 slot=0\nrank 1=n2 slot=1\nrank 2=n1 slot=0,1\n",
           "launcher: rankfile written beside stdout");
    free(str);
    str = joinv(s.argv);
    snprintf(want, sizeof(want), "mpirun --rankfile %s --np 3 --bind-to "
             "none %s --exec-rank -- true", path, self);
    is_str(str, want, "launcher: argv is mpirun's, with --rankfile");
    free(str);
    pl_env_free(env);
    pl_run_clear(&s);

    /* a file it cannot write: nothing replaced */
    ok(decode(&e, &s, &err) == 0, "launcher: decode a third time");
    free(s.out);
    s.out = strdup("/proc/no/such/dir/t44.out");
    env = pl_env_new(NULL);
    ok(pl_mpi_launcher(&s, env, &err) < 0
           && strstr(err.text, "/proc/no/such/dir/t44.out.hosts")
           && pl_strv_len(s.argv) == 1 && !strcmp(s.argv[0], "true"),
       "launcher: unwritable hostfile fails (%s), argv kept", err.text);
    pl_env_free(env);
    pl_run_clear(&s);
    t_rmtree(dir);
}

static char agent[PATH_MAX];

/* The output of "pilot-agent --exec-rank -- ..." run under 'envs'. */
static char *exec_rank(const char *envs, const char *cmd, int *status)
{
    char line[PATH_MAX * 2];
    static char out[4096];

    snprintf(line, sizeof(line),
             "env -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK -u PMIX_RANK %s "
             "%s --exec-rank -- %s 2>&1",
             envs, agent, cmd);
    FILE *p = popen(line, "r");
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    *status = pclose(p);
    return out;
}

static void test_exec_rank(void)
{
    int st;
    char *out;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    out = exec_rank("SLURM_PROCID=1 SLURM_NTASKS=2 PILOT_RANK_CORES='0;1'",
                    "sh -c 'grep Cpus_allowed_list /proc/self/status; "
                    "echo $PILOT_RANK $PILOT_SIZE $OMP_NUM_THREADS'", &st);
    if (ncpu >= 2)
        is_str(out, "Cpus_allowed_list:\t1\n1 2 1\n",
               "exec-rank: rank 1 bound to CPU 1");
    else
        ok(1, "# SKIP one CPU");
    out = exec_rank("OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=3 "
                    "OMPI_COMM_WORLD_LOCAL_RANK=0 PILOT_RANK_CORES='0;0;0'",
                    "sh -c 'grep Cpus_allowed_list /proc/self/status; "
                    "echo $PILOT_RANK $PILOT_SIZE $PILOT_LOCAL_RANK'", &st);
    is_str(out, "Cpus_allowed_list:\t0\n0 3 0\n",
           "exec-rank: rank from OMPI_COMM_WORLD_RANK");
    out = exec_rank("OMPI_COMM_WORLD_RANK=1 SLURM_PROCID=0 "
                    "PILOT_RANK_CORES='0;0'", "sh -c 'echo $PILOT_RANK'", &st);
    is_str(out, "1\n", "exec-rank: OMPI_COMM_WORLD_RANK before SLURM_PROCID "
                       "(mpirun's orted is an srun task)");
    out = exec_rank("PILOT_RANK_CORES='0'", "true", &st);
    ok(WEXITSTATUS(st) == 127 && strstr(out, "pilot-agent --exec-rank: no "
                                             "rank"),
       "exec-rank: no rank: 127");
    out = exec_rank("SLURM_PROCID=2 PILOT_RANK_CORES='0;0'", "true", &st);
    ok(WEXITSTATUS(st) == 127 && strstr(out, "rank 2: no entry"),
       "exec-rank: rank past PILOT_RANK_CORES: 127");

    /* GPUs: by Slurm id, addressed by position in this node's lists */
    out = exec_rank("SLURM_PROCID=1 PILOT_RANK_CORES='0;0' "
                    "PILOT_RANK_GPUS='0;3,1' SLURM_STEP_GPUS=0,1,2,3 "
                    "CUDA_VISIBLE_DEVICES=0,1,2,3",
                    "sh -c 'echo $CUDA_VISIBLE_DEVICES $SLURM_STEP_GPUS "
                    "$PILOT_GPUS $GPU_DEVICE_ORDINAL'", &st);
    is_str(out, "3,1 3,1 3,1 3,1\n", "exec-rank: rank 1's GPUs 3,1");
    out = exec_rank("SLURM_PROCID=0 PILOT_RANK_CORES='0' "
                    "PILOT_RANK_GPUS='7' SLURM_STEP_GPUS=5,7 "
                    "CUDA_VISIBLE_DEVICES=0,1",
                    "sh -c 'echo $CUDA_VISIBLE_DEVICES $SLURM_STEP_GPUS'",
                    &st);
    is_str(out, "1 7\n", "exec-rank: Slurm id 7 is device 1 of the step");
    out = exec_rank("SLURM_PROCID=0 PILOT_RANK_CORES='0' "
                    "PILOT_RANK_GPUS='4' SLURM_STEP_GPUS=0,1", "true", &st);
    ok(WEXITSTATUS(st) == 127 && strstr(out, "GPU 4 is not among this "
                                             "node's GPUs (0,1)"),
       "exec-rank: a GPU the node lacks: 127");
    out = exec_rank("SLURM_PROCID=1 PILOT_RANK_CORES='0;0' "
                    "PILOT_RANK_GPUS='0'", "true", &st);
    ok(WEXITSTATUS(st) == 127 && strstr(out, "rank 1: no entry in "
                                             "PILOT_RANK_GPUS"),
       "exec-rank: rank past PILOT_RANK_GPUS: 127");
    out = exec_rank("SLURM_PROCID=0 PILOT_RANK_CORES='0' "
                    "SLURM_STEP_GPUS=0,1 CUDA_VISIBLE_DEVICES=0,1",
                    "sh -c 'echo \"[$CUDA_VISIBLE_DEVICES]\" "
                    "\"[$SLURM_STEP_GPUS]\"'", &st);
    is_str(out, "[] []\n", "exec-rank: no PILOT_RANK_GPUS: no GPU seen");

    /* the node's place and its rank count */
    out = exec_rank("SLURM_PROCID=3 PILOT_RANK_CORES='0;0;0;0' "
                    "SLURMD_NODENAME=n7 PILOT_NODELIST=n2,n7 "
                    "SLURM_NODEID=1 SLURM_STEP_TASKS_PER_NODE='1,3' "
                    "PILOT_NODE_RANK=0 PILOT_LOCAL_SIZE=1",
                    "sh -c 'echo $PILOT_NODE $PILOT_NODE_RANK "
                    "$PILOT_LOCAL_SIZE'", &st);
    is_str(out, "n7 1 3\n", "exec-rank: node rank and local size (srun)");
    out = exec_rank("SLURM_PROCID=0 PILOT_RANK_CORES='0' "
                    "SLURMD_NODENAME=n3 PILOT_NODELIST=n1,n2,n3 "
                    "SLURM_NODEID=3 SLURM_STEP_TASKS_PER_NODE='2(x3),5,1'",
                    "sh -c 'echo $PILOT_NODE_RANK $PILOT_LOCAL_SIZE'", &st);
    is_str(out, "2 5\n", "exec-rank: local size from a (xN) run");
    out = exec_rank("OMPI_COMM_WORLD_RANK=0 PILOT_RANK_CORES='0' "
                    "OMPI_COMM_WORLD_LOCAL_SIZE=6 SLURMD_NODENAME=n9 "
                    "PILOT_NODELIST=n1 PILOT_NODE_RANK=0 "
                    "SLURM_STEP_TASKS_PER_NODE=1",
                    "sh -c 'echo \"[$PILOT_NODE_RANK]\" $PILOT_LOCAL_SIZE'",
                    &st);
    is_str(out, "[] 6\n", "exec-rank: Open MPI's local size; no node rank "
                          "for a node not in the list");

    out = exec_rank("SLURM_PROCID=0 PILOT_RANK_CORES='0'",
                    "/nonexistent/cmd", &st);
    ok(WEXITSTATUS(st) == 127 && !strncmp(out, "pilot-agent --exec-rank: "
                                               "/nonexistent/cmd: ", 42),
       "exec-rank: no such command: 127, one line");
}

int main(int argc, char **argv)
{
    (void)argc;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    /* $(BUILD)/tests/test_agent_mpi -> $(BUILD)/bin/pilot-agent */
    snprintf(agent, sizeof(agent), "%s/../bin/pilot-agent", dirname(self));
    (void)argv;

    plan(69);
    test_decode();
    test_launch();
    test_launcher();
    test_exec_rank();
    return done_testing();
}
