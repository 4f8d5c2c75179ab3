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
 * no task leader running (issue 12: pilotd runs the task again). */
int pl_spawn(const char *prog, char **argv, char **env, int in, int out,
             int err, int fd3, const char *cwd, pid_t *pid)
{
    sigset_t all, old;
    volatile int child_err = 0;
    pid_t parent = getpid();
    pid_t p;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    p = vfork();
    if (p == 0) {
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        sigset_t none;
        for (int sig = 1; sig < NSIG; sig++)
            (void)sigaction(sig, &dfl, NULL);
        if (setsid() < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0
            || dup2(err, 2) < 0
            /* N.B. dup2() of a descriptor onto itself keeps its
             * close-on-exec flag */
            || (fd3 >= 0 && (fd3 == 3 ? fcntl(3, F_SETFD, 0)
                                      : dup2(fd3, 3)) < 0)
            || (cwd && chdir(cwd) < 0)
            || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
            child_err = errno;
            _exit(127);
        }
        if (getppid() != parent)
            _exit(127); /* we died already: no task without its agent */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(prog, argv, env);
        child_err = errno;
        _exit(127);
    }
    int e = p < 0 ? errno : child_err;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
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

