/* agent/spawn.h - start a child process as the agent starts its tasks
 *
 * Shared by the tasks (agent/task.c) and the warm Python workers
 * (agent/pyw.c): the program found as execvp() would find it, and a
 * vfork() and execve() in a new session, with a parent-death signal.
 */
#ifndef PL_AGENT_SPAWN_H
#define PL_AGENT_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

/* The program execvp() would run for 'file', searching the PATH of the
 * environment 'env' (else the agent's), into 'buf'.  0, or an errno
 * value (ENOENT, EACCES, ENAMETOOLONG). */
int pl_spawn_find(const char *file, char *const *env, char *buf, size_t len);

/* Start 'prog' (a path) with 'argv' and 'env' in a new session, stdin,
 * stdout and stderr from 'in', 'out' and 'err', 'fd3' as its fd 3 when
 * not -1, in 'cwd' if not NULL, every signal at its default and none
 * blocked; it gets SIGKILL when the agent dies (PR_SET_PDEATHSIG).  It
 * inherits the calling thread's CPU mask (pl_bind_cpu_enter()).  0 with
 * *pid, or the errno value of the step that failed (the child is then
 * reaped). */
int pl_spawn(const char *prog, char **argv, char **env, int in, int out,
             int err, int fd3, const char *cwd, pid_t *pid);

/* Which step of the child failed (pl_spawn_how()). */
enum pl_spawn_step {
    PL_SPAWN_STEP_SETUP = 1, /* a dup2(), setsid(), prctl(): ours */
    PL_SPAWN_STEP_OUT,       /* making the stdout file */
    PL_SPAWN_STEP_ERR,       /* making the stderr file */
    PL_SPAWN_STEP_CWD,       /* chdir() */
    PL_SPAWN_STEP_EXEC,      /* execve() */
};

/* What pl_spawn_how() gives the child. */
struct pl_spawn_how {
    int in;                  /* its stdin */
    int out, err;            /* its stdout and stderr, unless out_name */
    int fd3;                 /* its fd 3, or -1 */
    int dfd;                 /* with out_name: the directory (O_PATH is
                                enough) the child makes its files in */
    const char *out_name;    /* not NULL: the child makes this file in
                                'dfd' (O_CREAT | O_EXCL | O_NOFOLLOW,
                                0600: pl_output_open()) as its stdout */
    const char *err_name;    /* with out_name: its stderr's file, or NULL:
                                stderr goes with stdout */
    const char *cwd;         /* not NULL: it starts there */
};

/* pl_spawn() with the child doing more of the work, on its own CPU
 * account and not the agent's: its output files.
 * 0 with *pid, or the errno value of the step that failed, and that
 * step in *step if not NULL (the child is reaped; the files it made
 * before the failure stay). */
int pl_spawn_how(const char *prog, char **argv, char **env,
                 const struct pl_spawn_how *h, pid_t *pid, int *step);

#endif /* !PL_AGENT_SPAWN_H */
