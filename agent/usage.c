/* agent/usage.c - the CPU time of a live process, for the calls that run
 * in a worker that outlives them (warm Python workers, pool workers) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/usage.h"

void pl_cpu_mark(pid_t pid, struct pl_cpu_mark *m)
{
    char path[64], buf[1024];
    unsigned long long ut, st;
    long long cut, cst;
    long hz = sysconf(_SC_CLK_TCK);
    ssize_t n;
    int fd;

    m->ok = false;
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    if (pid <= 0 || hz <= 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    /* "PID (COMM) S ...": the name may hold spaces and ')', the fields
     * after the last ')' do not; utime is field 14, the 12th after it */
    char *p = strrchr(buf, ')');
    if (!p
        || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
                         "%llu %lld %lld", &ut, &st, &cut, &cst) != 4)
        return;
    m->user = (double)(ut + (unsigned long long)(cut > 0 ? cut : 0))
              / (double)hz;
    m->sys = (double)(st + (unsigned long long)(cst > 0 ? cst : 0))
             / (double)hz;
    m->ok = true;
}

void pl_cpu_since(pid_t pid, const struct pl_cpu_mark *m, struct pl_usage *u)
{
    struct pl_cpu_mark now;

    if (!m->ok)
        return;
    pl_cpu_mark(pid, &now);
    if (!now.ok)
        return;
    u->cpu_user = now.user > m->user ? now.user - m->user : 0;
    u->cpu_sys = now.sys > m->sys ? now.sys - m->sys : 0;
    u->has |= PL_USE_CPU;
}
