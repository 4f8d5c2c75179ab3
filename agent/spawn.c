/* agent/spawn.c - start a child process as the agent starts its tasks */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/spawn.h"

/* The program execvp() would run for 'file', searching the PATH of the
 * task's environment 'env' (else the agent's), into 'buf'.  0, or an
 * errno value (ENOENT, EACCES, ENAMETOOLONG). */
int pl_spawn_find(const char *file, char *const *env, char *buf, size_t len)
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

/* Make output file 'name' in 'dfd' (pl_output_open()'s flags for a
 * file of one writer) as descriptor 'to' of the child. */
static int child_output(int dfd, const char *name, int to)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW
                                   | O_NOCTTY | O_CLOEXEC,
                    0600);

    if (fd < 0)
        return -1;
    /* N.B. dup2() of a descriptor onto itself keeps its close-on-exec
     * flag; the original closes at the exec */
    return fd == to ? fcntl(to, F_SETFD, 0) : dup2(fd, to);
}

/* The child's stdout and stderr: the caller's descriptors, or files it
 * makes; on failure *step says which. */
static int child_outputs(const struct pl_spawn_how *h, int *step)
{
    if (h->out_name) {
        *step = PL_SPAWN_STEP_OUT;
        if (child_output(h->dfd, h->out_name, 1) < 0)
            return -1;
        *step = PL_SPAWN_STEP_ERR;
        if (h->err_name ? child_output(h->dfd, h->err_name, 2) < 0
                        : dup2(1, 2) < 0)
            return -1;
        return 0;
    }
    *step = PL_SPAWN_STEP_SETUP;
    if (dup2(h->out, 1) < 0 || dup2(h->err, 2) < 0)
        return -1;
    return 0;
}

/* N.B. vfork(), as glibc's posix_spawn() does (clone(CLONE_VM |
 * CLONE_VFORK)), whose attributes cannot ask for a parent-death signal;
 * not fork(): it copies neither the agent's mappings nor its page
 * tables (a fork() of the agent, libuv's uv_spawn(), cost page faults
 * and TLB flushes to ZeroMQ's thread and held the no-op rate at half
 * the node's: docs/PERFORMANCE.md).  The child shares our memory until
 * its exec and only makes system calls; our signals are blocked
 * meanwhile, so that no handler of ours runs in it before it resets
 * them.  Its exit is found by the agent's SIGCHLD watcher
 * (pl_task_reap(), pl_pyw_reap()): an agent killed with SIGKILL leaves
 * no task leader running (issue 12: pilotd runs the task again).
 *
 * The child makes the task's output files itself, on its own CPU account
 * (an inode allocation each: the agent's largest cost a task on ext4,
 * issue 16).  Not its CPU mask: a child that moved itself to the task's
 * core (the loop thread would stay put: two sched_setaffinity() a task
 * less) waited there behind what ran, and the agent in vfork() with it:
 * 254-479 against 575-924 tasks/s, alternating, docs/PERFORMANCE.md. */
int pl_spawn_how(const char *prog, char **argv, char **env,
                 const struct pl_spawn_how *h, pid_t *pid, int *stepp)
{
    sigset_t all, old;
    volatile int child_err = 0;
    volatile int child_step = PL_SPAWN_STEP_SETUP;
    pid_t parent = getpid();
    pid_t p;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    p = vfork();
    if (p == 0) {
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        sigset_t none;
        int step = PL_SPAWN_STEP_SETUP;
        for (int sig = 1; sig < NSIG; sig++)
            (void)sigaction(sig, &dfl, NULL);
        if (setsid() < 0)
            goto fail;
        step = PL_SPAWN_STEP_SETUP;
        if (dup2(h->in, 0) < 0 || child_outputs(h, &step) < 0)
            goto fail;
        step = PL_SPAWN_STEP_SETUP;
        /* N.B. dup2() of a descriptor onto itself keeps its
         * close-on-exec flag */
        if (h->fd3 >= 0
            && (h->fd3 == 3 ? fcntl(3, F_SETFD, 0) : dup2(h->fd3, 3)) < 0)
            goto fail;
        step = PL_SPAWN_STEP_CWD;
        if (h->cwd && chdir(h->cwd) < 0)
            goto fail;
        step = PL_SPAWN_STEP_SETUP;
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
            goto fail;
        if (getppid() != parent)
            _exit(127); /* we died already: no task without its agent */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(prog, argv, env);
        step = PL_SPAWN_STEP_EXEC;
    fail:
        child_err = errno;
        child_step = step;
        _exit(127);
    }
    int e = p < 0 ? errno : child_err;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (stepp)
        *stepp = p < 0 ? PL_SPAWN_STEP_SETUP : child_step;
    if (p > 0 && e) {
        /* it failed before its exec: reap it here */
        while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
            ;
        return e;
    }
    if (p < 0)
        return e;
    *pid = p;
    return 0;
}

int pl_spawn(const char *prog, char **argv, char **env, int in, int out,
             int err, int fd3, const char *cwd, pid_t *pid)
{
    struct pl_spawn_how h = { .in = in, .out = out, .err = err, .fd3 = fd3,
                              .dfd = -1, .cwd = cwd };

    return pl_spawn_how(prog, argv, env, &h, pid, NULL);
}
