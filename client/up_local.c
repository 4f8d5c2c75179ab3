/* client/up_local.c - pilot up --local: pilotd started on this machine */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/up_private.h"

pid_t pl_up_spawn(const char *pilotd, const char *dir,
                  const struct pl_up_opts *o, struct pl_error *errp)
{
    char log[PL_PATH_MAX + 32];
    int ep[2], in, out, child_errno;
    ssize_t n;
    pid_t pid;

    snprintf(log, sizeof(log), "%s/logs/pilotd.out", dir);
    if ((in = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
        return pl_errprintf(errp, "cannot open /dev/null: %s",
                            strerror(errno));
    if ((out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600))
        < 0) {
        pl_errprintf(errp, "cannot open %s: %s", log, strerror(errno));
        close(in);
        return -1;
    }
    /* the child reports a failed exec on this close-on-exec pipe */
    if (pipe2(ep, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
        pl_errprintf(errp, "cannot start pilotd: %s", strerror(errno));
        close(in);
        close(out);
        return -1;
    }
    if (pid == 0) {
        char lost[32], start[32], mport[16], mint[32], pref[16];
        const char *argv[26 + 2 * 8];
        int k = 0;
        argv[k++] = "pilotd";
        argv[k++] = "--dir";
        argv[k++] = dir;
        argv[k++] = "--local";
        argv[k++] = "--agents";
        argv[k++] = o->no_agent ? "0" : "1";
        if (o->lost_after > 0) {
            snprintf(lost, sizeof(lost), "%g", o->lost_after);
            argv[k++] = "--lost-after";
            argv[k++] = lost;
        }
        if (o->start_timeout >= 0) {
            snprintf(start, sizeof(start), "%g", o->start_timeout);
            argv[k++] = "--start-timeout";
            argv[k++] = start;
        }
        if (o->prefetch >= 0) {
            snprintf(pref, sizeof(pref), "%d", o->prefetch);
            argv[k++] = "--prefetch";
            argv[k++] = pref;
        }
        if (o->bind) {
            argv[k++] = "--bind";
            argv[k++] = o->bind;
        }
        for (int i = 0; i < o->npools; i++) {
            argv[k++] = "--pool";
            argv[k++] = o->pools[i];
        }
        if (o->metrics_port >= 0) {
            snprintf(mport, sizeof(mport), "%d", o->metrics_port);
            argv[k++] = "--metrics-port";
            argv[k++] = mport;
        }
        if (o->metrics_file) {
            argv[k++] = "--metrics-file";
            argv[k++] = o->metrics_file;
        }
        if (o->metrics_interval > 0) {
            snprintf(mint, sizeof(mint), "%g", o->metrics_interval);
            argv[k++] = "--metrics-interval";
            argv[k++] = mint;
        }
        if (o->output) {
            argv[k++] = "--output";
            argv[k++] = o->output;
        }
        if (o->journal_size[0]) {
            argv[k++] = "--journal-size";
            argv[k++] = o->journal_size;
        }
        argv[k] = NULL;
        setsid(); /* no SIGINT or SIGHUP from this terminal */
        dup2(in, STDIN_FILENO);
        dup2(out, STDOUT_FILENO);
        dup2(out, STDERR_FILENO);
        execv(pilotd, (char *const *)argv);
        child_errno = errno;
        if (write(ep[1], &child_errno, sizeof(child_errno)) < 0)
            _exit(126);
        _exit(127);
    }
    close(ep[1]);
    close(in);
    close(out);
    while ((n = read(ep[0], &child_errno, sizeof(child_errno))) < 0
           && errno == EINTR)
        ;
    close(ep[0]);
    if (n > 0) {
        waitpid(pid, NULL, 0);
        errno = child_errno;
        return pl_errprintf(errp, "cannot run %s: %s", pilotd,
                            strerror(child_errno));
    }
    return pid;
}

bool pl_up_local_died(pid_t pid, char *why, size_t len)
{
    int status;

    if (waitpid(pid, &status, WNOHANG) != pid)
        return false;
    if (WIFEXITED(status))
        snprintf(why, len, "pilotd exited with status %d before its agent "
                 "came up", WEXITSTATUS(status));
    else
        snprintf(why, len, "pilotd was killed by signal %d before its agent "
                 "came up", WTERMSIG(status));
    return true;
}
