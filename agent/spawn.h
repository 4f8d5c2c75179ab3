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

#endif /* !PL_AGENT_SPAWN_H */
