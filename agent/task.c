/* agent/task.c - one launched process: spawn, kill, exit, resource use */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/comm.h"
#include "agent/mpi.h"
#include "agent/resources.h"
#include "agent/task.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/state.h"

/* Limits on a RUN entry, as for a submitted task (docs/protocol.md). */
#define ARGV_MAX 4096
#define ARG_LEN (64 * 1024)
#define ENV_MAX 4096
#define ENV_LEN (128 * 1024)  /* MAX_ARG_STRLEN: execve() takes no more */
#define PATH_LEN 4096
#define CORES_MAX 4096
#define GPUS_MAX 1024
#define TIMEOUT_MAX 1e7       /* s (115 days): keeps the ms in a uint64 */
#define RANKS_MAX UINT32_MAX  /* ranks in a task, and on one node */
#define NODES_MAX 65536       /* entries in 'nodelist' */
#define NODE_LEN 255          /* a host name (HOST_NAME_MAX) */
#define COMM_LEN 16
#define PORT_MAX 65535
#define LAUNCHER_LEN 16
#define GPU_ID_LEN 64         /* a GPU id, as pilotd takes them */
#define MPI_RANKS_MAX (1u << 20) /* entries in 'hosts', 'rank_cores' */

/* SIGTERM to SIGKILL when a timeout fires. */
#define TIMEOUT_GRACE 5.0

struct pl_task {
    uv_timer_t timer;       /* the timeout, then SIGKILL after the grace */
    uv_loop_t *loop;
    struct pl_task_spec spec;
    pl_task_exit_f cb;
    void *arg;
    int state;              /* PL_ST_ASSIGNED, PL_ST_RUNNING, then final */
    int reason;             /* 0, or why we are killing it */
    int termed;             /* SIGTERM sent */
    int killed;             /* SIGKILL sent */
    int closing;            /* handles whose close callback is still due */
    int pid;
    int exit_code;
    int signal;
    long maxrss_kb;
    uint64_t t_start;       /* uv_hrtime() at spawn and at exit */
    uint64_t t_end;
    int has_error;
    struct pl_error error;
    char key[96];           /* PILOT_TASK_KEY=<agent pid>.<id>.<attempt>.<rank>:
                               every process of the task inherits it */
};

void pl_task_spec_release(struct pl_task_spec *spec)
{
    int saved = errno;

    pl_strv_free(spec->argv);
    pl_strv_free(spec->env);
    pl_strv_free(spec->nodelist);
    free(spec->master_addr);
    pl_strv_free(spec->hosts);
    free(spec->rank_cores);
    free(spec->rank_gpus);
    free(spec->cwd);
    free(spec->cores);
    free(spec->gpus);
    free(spec->out);
    free(spec->err);
    memset(spec, 0, sizeof(*spec));
    errno = saved;
}

static int bad(struct pl_error *errp, const char *what)
{
    errno = EPROTO;
    return pl_errprintf(errp, "%s", what);
}

/* 'rank_cores' as "0,1;2;..." in spec->rank_cores: 'size' non-empty
 * arrays of CPU ids. */
static int decode_rank_cores(const msgpack_object *o,
                             struct pl_task_spec *spec, struct pl_error *errp)
{
    const msgpack_object *arr = NULL;
    char *buf;
    char *p;

    if (pl_mp_array(o, "rank_cores", true, MPI_RANKS_MAX, &arr, errp) < 0)
        return -1;
    if (arr->via.array.size != spec->size)
        return bad(errp, "field 'rank_cores': want one entry per rank");
    size_t len = 1;
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size == 0
            || e->via.array.size > CORES_MAX)
            return bad(errp, "field 'rank_cores': want a non-empty array "
                             "of CPU ids for each rank");
        len += 1 + (size_t)e->via.array.size * 5; /* "4095," */
    }
    if (!(p = buf = malloc(len)))
        return pl_errprintf(errp, "out of memory");
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        if (i)
            *p++ = ';';
        for (uint32_t j = 0; j < e->via.array.size; j++) {
            const msgpack_object *c = &e->via.array.ptr[j];
            if (c->type != MSGPACK_OBJECT_POSITIVE_INTEGER
                || c->via.u64 >= PL_CPU_MAX) {
                free(buf);
                return bad(errp, "field 'rank_cores': bad CPU id");
            }
            p += sprintf(p, "%s%u", j ? "," : "", (unsigned)c->via.u64);
        }
    }
    *p = '\0';
    spec->rank_cores = buf;
    return 0;
}

/* 'rank_gpus', if there, as "0,1;2;..." in spec->rank_gpus: 'size'
 * arrays of GPU ids (Slurm's names), each of 1 to GPUS_MAX. */
static int decode_rank_gpus(const msgpack_object *o,
                            struct pl_task_spec *spec, struct pl_error *errp)
{
    const msgpack_object *arr = NULL;
    char *buf;
    char *p;

    if (pl_mp_array(o, "rank_gpus", false, MPI_RANKS_MAX, &arr, errp) < 0)
        return -1;
    if (!arr)
        return 0;
    if (arr->via.array.size != spec->size)
        return bad(errp, "field 'rank_gpus': want one entry per rank");
    size_t len = 1;
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size == 0
            || e->via.array.size > GPUS_MAX)
            return bad(errp, "field 'rank_gpus': want a non-empty array "
                             "of GPU ids for each rank");
        for (uint32_t j = 0; j < e->via.array.size; j++) {
            const msgpack_object *g = &e->via.array.ptr[j];
            if (g->type != MSGPACK_OBJECT_STR || g->via.str.size == 0
                || g->via.str.size > GPU_ID_LEN
                || memchr(g->via.str.ptr, ',', g->via.str.size)
                || memchr(g->via.str.ptr, ';', g->via.str.size)
                || memchr(g->via.str.ptr, '\0', g->via.str.size))
                return bad(errp, "field 'rank_gpus': want GPU ids: "
                                 "non-empty strings without ',' or ';'");
            len += g->via.str.size + 1;
        }
        len++;
    }
    if (len > ENV_LEN)
        return bad(errp, "field 'rank_gpus': too long for the environment");
    if (!(p = buf = malloc(len)))
        return pl_errprintf(errp, "out of memory");
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        if (i)
            *p++ = ';';
        for (uint32_t j = 0; j < e->via.array.size; j++) {
            const msgpack_object *g = &e->via.array.ptr[j];
            if (j)
                *p++ = ',';
            memcpy(p, g->via.str.ptr, g->via.str.size);
            p += g->via.str.size;
        }
    }
    *p = '\0';
    spec->rank_gpus = buf;
    return 0;
}

/* The fields of an MPI task's one entry: the launcher and where every
 * rank runs. */
static int decode_mpi(const msgpack_object *o, struct pl_task_spec *spec,
                      struct pl_error *errp)
{
    char *launcher = NULL;
    int l = PL_LAUNCHER_SRUN;

    if (!pl_mp_get(o, "hosts"))
        return bad(errp, "mpi task without placement");
    if (pl_mp_str(o, "launcher", false, LAUNCHER_LEN, &launcher, errp) < 0)
        return -1;
    if (launcher && (l = pl_launcher_parse(launcher)) < 0) {
        pl_errprintf(errp, "field 'launcher': unknown launcher '%s' "
                     "(srun or mpirun)", launcher);
        free(launcher);
        errno = EPROTO;
        return -1;
    }
    free(launcher);
    spec->launcher = l;
    if (pl_mp_strv(o, "hosts", true, 1, MPI_RANKS_MAX, NODE_LEN,
                   &spec->hosts, errp) < 0)
        return -1;
    if (pl_strv_len(spec->hosts) != spec->size)
        return bad(errp, "field 'hosts': want one host per rank");
    for (char **h = spec->hosts; *h; h++) {
        if (!**h || strpbrk(*h, ",: \t\n"))
            return bad(errp, "field 'hosts': empty name, or one holding a "
                             "comma, colon or space");
        bool found = !spec->nodelist;
        for (char **n = spec->nodelist; n && *n && !found; n++)
            found = !strcmp(*n, *h);
        if (!found) {
            pl_errprintf(errp, "field 'hosts': '%s' is not in 'nodelist'",
                         *h);
            errno = EPROTO;
            return -1;
        }
    }
    if (decode_rank_cores(o, spec, errp) < 0)
        return -1;
    return decode_rank_gpus(o, spec, errp);
}

/* The optional fields that place one rank in its task; the rank itself is
 * already decoded.  Defaults: rank 0 of 1, alone on this node, comm none. */
static int decode_rank(const msgpack_object *o, struct pl_task_spec *spec,
                       struct pl_error *errp)
{
    char *comm = NULL;
    size_t nnodes = 1;
    int c = PL_COMM_NONE;

    spec->size = 1;
    spec->local_size = 1;
    if (pl_mp_uint(o, "size", false, RANKS_MAX, &spec->size, errp) < 0
        || pl_mp_uint(o, "local_rank", false, RANKS_MAX - 1,
                      &spec->local_rank, errp) < 0
        || pl_mp_uint(o, "local_size", false, RANKS_MAX, &spec->local_size,
                      errp) < 0
        || pl_mp_uint(o, "node_rank", false, NODES_MAX - 1,
                      &spec->node_rank, errp) < 0
        || pl_mp_strv(o, "nodelist", false, 1, NODES_MAX, NODE_LEN,
                      &spec->nodelist, errp) < 0
        || pl_mp_str(o, "comm", false, COMM_LEN, &comm, errp) < 0
        || pl_mp_str(o, "master_addr", false, NODE_LEN, &spec->master_addr,
                     errp) < 0
        || pl_mp_uint(o, "master_port", false, PORT_MAX, &spec->master_port,
                      errp) < 0)
        goto error;
    if (spec->size == 0 || spec->rank >= spec->size) {
        bad(errp, "field 'rank' or 'size': want rank < size");
        goto error;
    }
    if (spec->local_size == 0 || spec->local_rank >= spec->local_size
        || spec->local_size > spec->size) {
        bad(errp, "field 'local_rank' or 'local_size': want "
                  "local_rank < local_size <= size");
        goto error;
    }
    if (spec->nodelist) {
        nnodes = pl_strv_len(spec->nodelist);
        for (char **n = spec->nodelist; *n; n++) {
            if (!**n || strchr(*n, ',')) {
                bad(errp, "field 'nodelist': empty name or a comma");
                goto error;
            }
        }
    }
    if (spec->node_rank >= nnodes) {
        bad(errp, "field 'node_rank': not an index in 'nodelist'");
        goto error;
    }
    if (comm && (c = pl_comm_parse(comm)) < 0) {
        pl_errprintf(errp, "field 'comm': unknown comm '%s'", comm);
        errno = EPROTO;
        goto error;
    }
    spec->comm = c;
    if (spec->comm == PL_COMM_TORCH
        && (!spec->master_addr || !*spec->master_addr
            || spec->master_port == 0)) {
        bad(errp, "comm torch: want 'master_addr' and 'master_port' "
                  "(1..65535)");
        goto error;
    }
    if (spec->master_port == 0 && pl_mp_get(o, "master_port")) {
        bad(errp, "field 'master_port': out of range");
        goto error;
    }
    if (spec->comm == PL_COMM_MPI && decode_mpi(o, spec, errp) < 0)
        goto error;
    free(comm);
    return 0;
error:
    free(comm);
    return -1;
}

int pl_task_spec_decode(const msgpack_object *o, struct pl_task_spec *spec,
                        bool *have_id, struct pl_error *errp)
{
    memset(spec, 0, sizeof(*spec));
    *have_id = false;
    if (o->type != MSGPACK_OBJECT_MAP)
        return bad(errp, "task entry is not a map");
    for (uint32_t i = 0; i < o->via.map.size; i++)
        if (o->via.map.ptr[i].key.type != MSGPACK_OBJECT_STR)
            return bad(errp, "task entry key is not a string");
    if (pl_mp_uint(o, "id", true, UINT64_MAX, &spec->id, errp) < 0
        || pl_mp_uint(o, "attempt", true, UINT32_MAX, &spec->attempt, errp)
               < 0)
        return -1;
    *have_id = true;
    /* the rank next, so that a bad entry is reported for its rank */
    if (pl_mp_uint(o, "rank", false, RANKS_MAX - 1, &spec->rank, errp) < 0)
        return -1;
    if (pl_mp_strv(o, "argv", true, 1, ARGV_MAX, ARG_LEN, &spec->argv, errp)
            < 0
        || pl_mp_strv(o, "env", false, 0, ENV_MAX, ENV_LEN, &spec->env, errp)
               < 0
        || pl_mp_str(o, "cwd", false, PATH_LEN, &spec->cwd, errp) < 0
        || pl_mp_uintv(o, "cores", true, CORES_MAX, PL_CPU_MAX - 1,
                       &spec->cores, &spec->ncores, errp) < 0
        || pl_mp_uintv(o, "gpus", false, GPUS_MAX, UINT32_MAX, &spec->gpus,
                       &spec->ngpus, errp) < 0
        || pl_mp_str(o, "stdout", true, PATH_LEN, &spec->out, errp) < 0
        || pl_mp_str(o, "stderr", true, PATH_LEN, &spec->err, errp) < 0
        || pl_mp_double(o, "timeout", false, &spec->timeout, errp) < 0)
        return -1;
    for (char **e = spec->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e)
            return bad(errp, "field 'env': want KEY=VALUE entries");
    }
    if (spec->cwd && !*spec->cwd)
        return bad(errp, "field 'cwd': empty");
    if (spec->ncores == 0)
        return bad(errp, "field 'cores': empty");
    if (!*spec->out || !*spec->err)
        return bad(errp, "field 'stdout' or 'stderr': empty path");
    if (!isfinite(spec->timeout) || spec->timeout < 0
        || spec->timeout > TIMEOUT_MAX)
        return bad(errp, "field 'timeout': out of range");
    return decode_rank(o, spec, errp);
}

struct pl_task *pl_task_new(uv_loop_t *loop, struct pl_task_spec *spec,
                            pl_task_exit_f cb, void *arg)
{
    struct pl_task *t;

    if (!(t = calloc(1, sizeof(*t))))
        return NULL;
    t->loop = loop;
    t->spec = *spec;
    memset(spec, 0, sizeof(*spec));
    t->cb = cb;
    t->arg = arg;
    t->state = PL_ST_ASSIGNED;
    t->exit_code = -1;
    t->maxrss_kb = -1;
    snprintf(t->key, sizeof(t->key), "PILOT_TASK_KEY=%ld.%llu.%llu.%llu",
             (long)getpid(), (unsigned long long)t->spec.id,
             (unsigned long long)t->spec.attempt,
             (unsigned long long)t->spec.rank);
    uv_timer_init(loop, &t->timer);
    t->timer.data = t;
    return t;
}

static void close_cb(uv_handle_t *h)
{
    struct pl_task *t = h->data;

    if (--t->closing == 0) {
        pl_task_spec_release(&t->spec);
        free(t);
    }
}

void pl_task_free(struct pl_task *t)
{
    if (!t || t->closing)
        return;
    int saved = errno;
    t->closing = 1;
    uv_close((uv_handle_t *)&t->timer, close_cb);
    errno = saved;
}

static uint64_t seconds_to_ms(double s)
{
    return s <= 0 ? 0 : (uint64_t)ceil(s * 1000.0);
}

/* Whether process 'pid' carries 'key' ("PILOT_TASK_KEY=...") in its
 * environment (as it was at its exec). */
static bool has_key(const char *pid, const char *key)
{
    char path[64], buf[65536];
    size_t klen = strlen(key) + 1; /* with its NUL: the whole entry */
    size_t len = 0;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%s/environ", pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return false;
    /* entries are NUL-terminated: compare at each entry's start */
    while ((n = read(fd, buf + len, sizeof(buf) - len)) > 0)
        len += (size_t)n;
    close(fd);
    for (size_t off = 0; off + klen <= len;) {
        if (!memcmp(buf + off, key, klen))
            return true;
        const char *nul = memchr(buf + off, '\0', len - off);
        if (!nul)
            break;
        off = (size_t)(nul - buf) + 1;
    }
    return false;
}

/* Signal every process that carries the task's key but left its process
 * group (setsid, a double fork): the task's whole tree.  N.B. a process
 * that rewrites its environment escapes; so does one in another PID
 * namespace. */
static void signal_escaped(struct pl_task *t, int sig)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t self = getpid();

    if (!d)
        return;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 1 || pid == self)
            continue;
        if (getpgid((pid_t)pid) == t->pid)
            continue; /* the group signal reaches it */
        if (has_key(e->d_name, t->key))
            (void)kill((pid_t)pid, sig);
    }
    closedir(d);
}

/* Signal the task's process group: the task leads it (UV_PROCESS_DETACHED
 * makes the child call setsid()), and its children are in it unless they
 * moved away; those are found by their key. */
static void signal_group(struct pl_task *t, int sig)
{
    if (t->pid > 0) {
        (void)kill(-t->pid, sig);
        signal_escaped(t, sig);
    }
}

static void timer_cb(uv_timer_t *h)
{
    struct pl_task *t = h->data;

    if (!t->termed)
        pl_task_kill(t, PL_ST_TIMEOUT, TIMEOUT_GRACE);
    else if (!t->killed) {
        signal_group(t, SIGKILL);
        t->killed = 1;
    }
}

void pl_task_kill(struct pl_task *t, int reason, double grace)
{
    uint64_t ms = seconds_to_ms(grace);

    if (t->state != PL_ST_RUNNING)
        return;
    if (!t->reason)
        t->reason = reason;
    if (t->killed)
        return;
    if (ms == 0) {
        uv_timer_stop(&t->timer);
        signal_group(t, SIGKILL);
        t->killed = 1;
    }
    else if (!t->termed) {
        signal_group(t, SIGTERM);
        t->termed = 1;
        uv_timer_start(&t->timer, timer_cb, ms, 0);
    }
    else if (uv_timer_get_due_in(&t->timer) > ms)
        uv_timer_start(&t->timer, timer_cb, ms, 0);
}

static void ended(struct pl_task *t, int status, int sig)
{
    t->t_end = uv_hrtime();
    uv_timer_stop(&t->timer);
    t->signal = sig;
    t->exit_code = sig ? 128 + sig : status;
    if (t->reason) {
        t->state = t->reason;
        /* Leave nothing of a killed task behind.  N.B. the leader is
         * reaped, but its pid stays reserved as long as its group has
         * members, so this cannot hit a stranger's group unless the
         * group is already empty and the pid reused within this call. */
        signal_group(t, SIGKILL);
    }
    else {
        t->state = (status == 0 && sig == 0) ? PL_ST_DONE : PL_ST_FAILED;
        /* what it left running in its group ends with it, as a Slurm
         * step's processes do (same N.B.; not the escaped ones: looking
         * for them costs a scan of /proc per task) */
        (void)kill(-t->pid, SIGKILL);
    }
    t->cb(t, t->arg);
}

/* N.B. The raw waitid() system call fills a struct rusage (its 5th
 * argument, which glibc's wrapper does not expose): reaping the task
 * with it gives its peak RSS and that of the children it reaped. */
void pl_task_reap(struct pl_task *t)
{
    siginfo_t info;
    struct rusage ru;

    if (t->state != PL_ST_RUNNING || t->pid <= 0)
        return;
    memset(&info, 0, sizeof(info));
    memset(&ru, 0, sizeof(ru));
    if (syscall(SYS_waitid, P_PID, (id_t)t->pid, &info, WEXITED | WNOHANG,
                &ru) != 0
        || info.si_pid != t->pid)
        return; /* still running */
    t->maxrss_kb = ru.ru_maxrss; /* kB on Linux */
    if (info.si_code == CLD_EXITED)
        ended(t, info.si_status, 0);
    else
        ended(t, 0, info.si_status);
}

/* Open an output file, creating its directory (0700) if missing.  The
 * ranks of a task may share one: they append (O_APPEND makes each write
 * land at the end), where a single rank truncates what an earlier attempt
 * left. */
static int open_output(const char *path, bool append)
{
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
    int fd;

    if ((fd = open(path, flags, 0600)) >= 0 || errno != ENOENT)
        return fd;
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return -1;
    char *dir = strndup(path, (size_t)(slash - path));
    if (!dir)
        return -1;
    int rc = pl_mkdirs(dir, 0700);
    int saved = errno;
    free(dir);
    if (rc < 0) {
        errno = saved;
        return -1;
    }
    return open(path, flags, 0600);
}

/* Record a start failure; returns -1 with errno 'errnum'. */
static int start_failed(struct pl_task *t, int errnum, struct pl_error *errp)
{
    t->state = PL_ST_FAILED;
    t->has_error = 1;
    if (errp)
        *errp = t->error;
    errno = errnum;
    return -1;
}

/* The program execvp() would run for 'file', searching the PATH of the
 * task's environment 'env' (else the agent's), into 'buf'.  0, or an
 * errno value (ENOENT, EACCES, ENAMETOOLONG). */
static int find_program(const char *file, char *const *env, char *buf,
                        size_t len)
{
    const char *path = NULL;
    int err = ENOENT;

    if (strchr(file, '/')) {
        if (snprintf(buf, len, "%s", file) >= (int)len)
            return ENAMETOOLONG;
        return 0;
    }
    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], "PATH=", 5))
            path = env[i] + 5;
    if (!path && !(path = getenv("PATH")))
        path = "/bin:/usr/bin";
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        struct stat st;
        /* an empty entry is the current directory, as for execvp() */
        if (snprintf(buf, len, "%.*s%s%s", (int)n, p, n ? "/" : "", file)
            < (int)len) {
            if (access(buf, X_OK) == 0 && stat(buf, &st) == 0
                && S_ISREG(st.st_mode))
                return 0;
            if (errno == EACCES)
                err = EACCES;
        }
        if (!end)
            break;
        p = end;
    }
    return err;
}

/* N.B. posix_spawn(), not fork(): glibc's is clone(CLONE_VM |
 * CLONE_VFORK), which copies neither the agent's mappings nor its page
 * tables; a fork() of the agent (libuv's uv_spawn()) cost page faults
 * and TLB flushes to ZeroMQ's thread, and held the no-op rate at half
 * the node's (docs/PERFORMANCE.md).  The child inherits the calling
 * thread's CPU mask (pl_bind_cpu_enter()), leads a new session, gets the
 * default action for every signal and an empty mask; the exit is found
 * by the agent's SIGCHLD watcher (pl_task_reap()). */
int pl_task_start(struct pl_task *t, char **env, int stdin_fd,
                  struct pl_error *errp)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    char prog[PATH_LEN + 256];
    sigset_t none, all;
    int out = -1;
    int err = -1;
    int rc;
    pid_t pid;

    if ((out = open_output(t->spec.out, t->spec.size > 1)) < 0) {
        rc = errno;
        pl_errprintf(&t->error, "stdout %s: %s", t->spec.out, strerror(rc));
        return start_failed(t, rc, errp);
    }
    if (!strcmp(t->spec.err, t->spec.out))
        err = out;
    else if ((err = open_output(t->spec.err, t->spec.size > 1)) < 0) {
        rc = errno;
        close(out);
        pl_errprintf(&t->error, "stderr %s: %s", t->spec.err, strerror(rc));
        return start_failed(t, rc, errp);
    }
    /* the environment, and the key that finds the task's processes */
    size_t nenv = 0;
    while (env && env[nenv])
        nenv++;
    char **kenv = calloc(nenv + 2, sizeof(*kenv));
    if (!kenv) {
        close(out);
        if (err != out)
            close(err);
        pl_errprintf(&t->error, "out of memory");
        return start_failed(t, ENOMEM, errp);
    }
    for (size_t i = 0, k = 0; i < nenv; i++)
        if (strncmp(env[i], "PILOT_TASK_KEY=", 15))
            kenv[k++] = env[i];
    for (nenv = 0; kenv[nenv]; nenv++)
        ;
    kenv[nenv] = t->key;
    if ((rc = find_program(t->spec.argv[0], kenv, prog, sizeof(prog))) == 0) {
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawn_file_actions_init(&fa);
        posix_spawnattr_init(&attr);
        if ((rc = posix_spawn_file_actions_adddup2(&fa, stdin_fd, 0)) == 0
            && (rc = posix_spawn_file_actions_adddup2(&fa, out, 1)) == 0
            && (rc = posix_spawn_file_actions_adddup2(&fa, err, 2)) == 0
            && (!t->spec.cwd
                || (rc = posix_spawn_file_actions_addchdir_np(
                        &fa, t->spec.cwd)) == 0)
            && (rc = posix_spawnattr_setflags(
                    &attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK
                               | POSIX_SPAWN_SETSIGDEF)) == 0
            && (rc = posix_spawnattr_setsigmask(&attr, &none)) == 0
            && (rc = posix_spawnattr_setsigdefault(&attr, &all)) == 0)
            rc = posix_spawn(&pid, prog, &fa, &attr, t->spec.argv, kenv);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
    }
    free(kenv);
    close(out);
    if (err != out)
        close(err);
    if (rc != 0) {
        t->exit_code = 127; /* what a shell says for a command it can't run */
        pl_errprintf(&t->error, "spawn: %s", uv_strerror(uv_translate_sys_error(rc)));
        return start_failed(t, rc, errp);
    }
    t->pid = (int)pid;
    t->state = PL_ST_RUNNING;
    t->t_start = uv_hrtime();
    if (t->spec.timeout > 0)
        uv_timer_start(&t->timer, timer_cb, seconds_to_ms(t->spec.timeout),
                       0);
    return 0;
}

const struct pl_task_spec *pl_task_spec(const struct pl_task *t)
{
    return &t->spec;
}

bool pl_task_running(const struct pl_task *t)
{
    return t->state == PL_ST_RUNNING;
}

int pl_task_state(const struct pl_task *t)
{
    return t->state;
}

int pl_task_pid(const struct pl_task *t)
{
    return t->pid;
}

int pl_task_exit_code(const struct pl_task *t)
{
    return t->exit_code;
}

int pl_task_signal(const struct pl_task *t)
{
    return t->signal;
}

long pl_task_maxrss_kb(const struct pl_task *t)
{
    return t->maxrss_kb;
}

const char *pl_task_error(const struct pl_task *t)
{
    return t->has_error ? t->error.text : NULL;
}

double pl_task_runtime(const struct pl_task *t)
{
    if (!t->t_start)
        return 0;
    return (double)((t->t_end ? t->t_end : uv_hrtime()) - t->t_start) / 1e9;
}
