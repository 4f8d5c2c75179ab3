/* agent/task.c - one launched process: spawn, kill, reap, output files */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/journal.h"
#include "agent/leftover.h"
#include "agent/spawn.h"
#include "agent/task.h"
#include "proto/pilotdir.h"
#include "proto/state.h"

/* SIGTERM to SIGKILL when a timeout fires. */
#define TIMEOUT_GRACE 5.0

struct pl_task {
    uv_timer_t timer;       /* the timeout, then SIGKILL after the grace */
    struct pl_run run;      /* the RUN entry, owned */
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
    double cpu_user, cpu_sys; /* s, from the reap; -1: not reaped */
    uint64_t t_start;       /* uv_hrtime() at spawn and at exit */
    uint64_t t_end;
    int has_error;
    struct pl_error error;
    char *out_path;         /* where its stdout and stderr go: the entry's
                               paths, or one rank's (pl_path_rank_log()) */
    char *err_path;
    uv_loop_t *loop;
    struct pl_tout *tout;   /* --output journal: its pipes, else NULL */
    char key[PL_OWNER_MAX + 96]; /* PILOT_TASK_KEY=OWNER/ID.ATTEMPT.RANK
                               (agent/leftover.h): every process of the
                               task inherits it */
};

struct pl_task *pl_task_new(uv_loop_t *loop, struct pl_run *run,
                            const char *owner, pl_task_exit_f cb, void *arg)
{
    struct pl_task *t;

    if (strlen(owner) >= PL_OWNER_MAX) {
        errno = EINVAL;
        return NULL;
    }
    if (!(t = calloc(1, sizeof(*t))))
        return NULL;
    t->run = *run;
    memset(run, 0, sizeof(*run));
    t->cb = cb;
    t->arg = arg;
    t->state = PL_ST_ASSIGNED;
    t->exit_code = -1;
    t->maxrss_kb = -1;
    t->cpu_user = t->cpu_sys = -1;
    snprintf(t->key, sizeof(t->key), "PILOT_TASK_KEY=%s/%llu.%llu.%llu",
             owner, (unsigned long long)t->run.id,
             (unsigned long long)t->run.attempt,
             (unsigned long long)t->run.rank);
    uv_timer_init(loop, &t->timer);
    t->timer.data = t;
    t->loop = loop;
    return t;
}

static void close_cb(uv_handle_t *h)
{
    struct pl_task *t = h->data;

    if (--t->closing == 0) {
        pl_run_clear(&t->run);
        free(t->out_path);
        free(t->err_path);
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
 * environment (as it was at its exec).  The whole of it is read (up to
 * 4 MiB, more than ARG_MAX allows): the agent puts the key first, but a
 * shell below the task builds its children's environment in its own
 * order, and a key after the first 64 KiB was once missed (issue 12). */
static bool has_key(const char *pid, const char *key)
{
    size_t klen = strlen(key) + 1; /* with its NUL: the whole entry */
    size_t len;
    char *buf = pl_proc_environ(pid, &len);
    bool found = false;

    /* entries are NUL-terminated: compare at each entry's start */
    for (size_t off = 0; buf && off + klen <= len && !found;) {
        if (!memcmp(buf + off, key, klen))
            found = true;
        const char *nul = memchr(buf + off, '\0', len - off);
        if (!nul)
            break;
        off = (size_t)(nul - buf) + 1;
    }
    free(buf);
    return found;
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

/* Signal our children that carry the task's key: the processes of the
 * task whose parent died came to us (PR_SET_CHILD_SUBREAPER). */
static void signal_orphans(struct pl_task *t, int sig)
{
    char path[64], buf[4096];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/self/task/%ld/children",
             (long)getpid());
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    /* "PID PID ..." (a list cut at 4 KiB misses the rest: a task leaves
     * few) */
    for (char *p = buf, *end; *p; p = end) {
        long pid = strtol(p, &end, 10);
        char name[24];
        if (end == p)
            break;
        snprintf(name, sizeof(name), "%ld", pid);
        if (pid > 1 && pid != t->pid && has_key(name, t->key))
            (void)kill((pid_t)pid, sig);
    }
}

/* Signal the task's process group: the task leads it (POSIX_SPAWN_SETSID
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

void pl_task_fail(struct pl_task *t, const char *why)
{
    if (t->state != PL_ST_RUNNING || t->reason)
        return;
    pl_errprintf(&t->error, "%s", why);
    t->has_error = 1;
    pl_task_kill(t, PL_ST_FAILED, 0);
}

void pl_task_output_sizes(const struct pl_task *t, uint64_t *out,
                          uint64_t *err)
{
    struct stat st;

    if (t->tout) {
        pl_tout_sizes(t->tout, out, err);
        return;
    }
    const char *o = t->out_path ? t->out_path : t->run.out;
    const char *e = t->err_path ? t->err_path : t->run.err;

    *out = stat(o, &st) == 0 ? (uint64_t)st.st_size : 0;
    *err = strcmp(e, o) && stat(e, &st) == 0
               ? (uint64_t)st.st_size
               : 0;
}

static void ended(struct pl_task *t, int status, int sig)
{
    t->t_end = uv_hrtime();
    /* its output is all in the pipes: into the journal before the end is
     * told, so that a reader finds it whole once the task is done */
    pl_tout_finish(t->tout);
    t->tout = NULL;
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
         * step's processes do (same N.B.), and so do those that left the
         * group and lost their parent: they are our children now (the
         * agent is their subreaper), found without a scan of /proc */
        (void)kill(-t->pid, SIGKILL);
        signal_orphans(t, SIGKILL);
    }
    t->cb(t, t->arg);
}

static double tv_seconds(const struct timeval *tv)
{
    return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

/* N.B. The raw waitid() system call fills a struct rusage (its 5th
 * argument, which glibc's wrapper does not expose): reaping the task
 * with it gives its peak RSS and CPU time, and those of the descendants
 * it reaped (those it left to die with the agent, or that escaped it,
 * are not counted: getrusage(2)'s RUSAGE_CHILDREN rule). */
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
    t->cpu_user = tv_seconds(&ru.ru_utime);
    t->cpu_sys = tv_seconds(&ru.ru_stime);
    if (info.si_code == CLD_EXITED)
        ended(t, info.si_status, 0);
    else
        ended(t, 0, info.si_status);
}

/* Open an output file (pl_output_open()): the launcher of an MPI task
 * may find it made (a rank's agent made it first), every other needs a
 * new one. */
static int open_output(const char *path, bool append, struct pl_error *errp)
{
    return pl_output_open(path, append, errp);
}

/* Whether each rank of the task writes its own files: a task of several
 * ranks that are each a process the agents start (comm mpi: one
 * launcher, whose output is the job's, in the entry's files). */
static bool per_rank(const struct pl_run *r)
{
    return pl_output_per_rank(r->size, pl_comm_name(r->comm),
                              pl_fn_name(r->fn), r->pool != NULL);
}

/* The paths the task's stdout and stderr go to: the entry's, or the
 * rank's own (two ranks on one node once wrote into one file, and
 * unbuffered prints interleaved inside lines: issue 16).  0, or -1 with
 * errno. */
static int output_paths(struct pl_task *t)
{
    char buf[PL_RUN_MAX_PATH + 32];

    if (!per_rank(&t->run))
        return 0;
    if (pl_path_rank_log(t->run.out, t->run.rank, buf, sizeof(buf)) < 0
        || !(t->out_path = strdup(buf)))
        return -1;
    if (!strcmp(t->run.err, t->run.out))
        t->err_path = strdup(buf);
    else if (pl_path_rank_log(t->run.err, t->run.rank, buf, sizeof(buf)) == 0)
        t->err_path = strdup(buf);
    return t->err_path ? 0 : -1;
}

/* Close our copies of the child's stdout and stderr: the files', or the
 * pipes' write ends (whose read ends are read from now on). */
static void close_ends(struct pl_task *t, int out, int err)
{
    if (t->tout) {
        pl_tout_spawned(t->tout);
        return;
    }
    close(out);
    if (err != out)
        close(err);
}

/* Record a start failure; returns -1 with errno 'errnum'. */
static int start_failed(struct pl_task *t, int errnum, struct pl_error *errp)
{
    pl_tout_finish(t->tout);
    t->tout = NULL;
    t->state = PL_ST_FAILED;
    t->has_error = 1;
    if (errp)
        *errp = t->error;
    errno = errnum;
    return -1;
}

/* Whether the child can make the task's files itself: each a new file
 * of one writer (not shared by ranks), both in one directory. */
static bool child_makes(const char *opath, const char *epath, bool shared)
{
    const char *os = strrchr(opath, '/');
    const char *es = strrchr(epath, '/');

    return !shared && os && es && os - opath == es - epath
           && !strncmp(opath, epath, (size_t)(os - opath));
}

/* What a failed spawn says, in the words a user needs: the command not
 * found in PATH, the working directory, or the exec. */
static void spawn_error(struct pl_task *t, bool found, int rc)
{
    t->exit_code = 127; /* what a shell says for a command it can't run */
    if (!found && !strchr(t->run.argv[0], '/'))
        pl_errprintf(&t->error, "command '%s' %s", t->run.argv[0],
                     rc == ENOENT ? "not found in PATH"
                                  : uv_strerror(uv_translate_sys_error(rc)));
    else if (t->run.cwd && (rc == ENOENT || rc == EACCES || rc == ENOTDIR)
             && access(t->run.cwd, X_OK) < 0)
        pl_errprintf(&t->error, "cwd %s: %s", t->run.cwd,
                     uv_strerror(uv_translate_sys_error(errno)));
    else
        pl_errprintf(&t->error, "spawn %s: %s", t->run.argv[0],
                     uv_strerror(uv_translate_sys_error(rc)));
}

/* The task's environment: 'env' with the key that finds the task's
 * processes first (has_key() finds it in the first bytes of
 * /proc/PID/environ however large the rest: issue 12, after an
 * environment of 64 KiB a key placed last was not read).  The strings
 * are borrowed; free() the vector. */
static char **key_env(struct pl_task *t, char **env)
{
    size_t nenv = 0;

    while (env && env[nenv])
        nenv++;
    char **kenv = calloc(nenv + 2, sizeof(*kenv));
    if (!kenv)
        return NULL;
    kenv[0] = t->key;
    for (size_t i = 0, k = 1; i < nenv; i++)
        if (strncmp(env[i], "PILOT_TASK_KEY=", 15))
            kenv[k++] = env[i];
    return kenv;
}

int pl_task_start(struct pl_task *t, char **env, int stdin_fd,
                  struct pl_outdir *outdir, struct pl_error *errp)
{
    char prog[PATH_MAX + 256];
    struct pl_error why;
    struct pl_outdir own;
    struct pl_spawn_how h = { .in = stdin_fd, .out = -1, .err = -1,
                              .fd3 = -1, .dfd = -1, .cwd = t->run.cwd };
    int rc, step = 0;
    pid_t pid;

    pl_outdir_init(&own);
    if (!outdir)
        outdir = &own;
    /* the journal: pipes, no files */
    if (pl_tout_wanted(env)) {
        if (!(t->tout = pl_tout_new(t->loop, &t->run, env, &h.out, &h.err,
                                    &why))) {
            pl_errprintf(&t->error, "output %s", why.text);
            return start_failed(t, EIO, errp);
        }
    }
    else if (output_paths(t) < 0) {
        rc = errno;
        pl_errprintf(&t->error, "output paths: %s", strerror(rc));
        return start_failed(t, rc, errp);
    }
    const char *opath = t->out_path ? t->out_path : t->run.out;
    const char *epath = t->err_path ? t->err_path : t->run.err;
    bool shared = t->run.size > 1 && !per_rank(&t->run);

    if (t->tout)
        ; /* the pipes' ends */
    else if (child_makes(opath, epath, shared)) {
        /* the child makes them: the directory is checked here, kept */
        if ((h.dfd = pl_outdir_get(outdir, opath, &h.out_name, &why)) < 0) {
            rc = errno;
            pl_errprintf(&t->error, "stdout %s", why.text);
            return start_failed(t, rc, errp);
        }
        if (strcmp(epath, opath))
            h.err_name = strrchr(epath, '/') + 1;
    }
    else if ((h.out = open_output(opath, shared, &why)) < 0) {
        rc = errno;
        pl_errprintf(&t->error, "stdout %s", why.text);
        return start_failed(t, rc, errp);
    }
    else if (!strcmp(epath, opath))
        h.err = h.out;
    else if ((h.err = open_output(epath, shared, &why)) < 0) {
        rc = errno;
        close(h.out);
        pl_errprintf(&t->error, "stderr %s", why.text);
        return start_failed(t, rc, errp);
    }
    char **kenv = key_env(t, env);
    if (!kenv) {
        close_ends(t, h.out, h.err);
        pl_outdir_close(&own);
        pl_errprintf(&t->error, "out of memory");
        return start_failed(t, ENOMEM, errp);
    }
    bool found = (rc = pl_spawn_find(t->run.argv[0], kenv, prog,
                                    sizeof(prog))) == 0;
    if (found)
        rc = pl_spawn_how(prog, t->run.argv, kenv, &h, &pid, &step);
    else if (h.out_name) {
        /* as a task whose command is missing always had: its files,
         * empty (what the spawn would have made) */
        int fd = pl_output_open(opath, false, &why);
        if (fd >= 0)
            close(fd);
        if (fd >= 0 && h.err_name && (fd = pl_output_open(epath, false,
                                                          &why)) >= 0)
            close(fd);
    }
    free(kenv);
    if (!h.out_name)
        close_ends(t, h.out, h.err);
    if (rc != 0 && (step == PL_SPAWN_STEP_OUT || step == PL_SPAWN_STEP_ERR)) {
        bool out = step == PL_SPAWN_STEP_OUT;
        pl_output_why(h.dfd, out ? opath : epath, out ? h.out_name
                                                      : h.err_name,
                      rc, &why);
        pl_errprintf(&t->error, "%s %s", out ? "stdout" : "stderr",
                     why.text);
    }
    else if (rc != 0)
        spawn_error(t, found, rc);
    pl_outdir_close(&own);
    if (rc != 0)
        return start_failed(t, rc, errp);
    t->pid = (int)pid;
    t->state = PL_ST_RUNNING;
    t->t_start = uv_hrtime();
    if (t->run.timeout > 0)
        uv_timer_start(&t->timer, timer_cb, seconds_to_ms(t->run.timeout),
                       0);
    return 0;
}

const struct pl_run *pl_task_entry(const struct pl_task *t)
{
    return &t->run;
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

bool pl_task_cpu(const struct pl_task *t, double *user, double *sys)
{
    if (t->cpu_user < 0)
        return false;
    *user = t->cpu_user;
    *sys = t->cpu_sys;
    return true;
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
