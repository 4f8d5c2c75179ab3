/* agent/leftover.c - the processes of a task, found by their key, and
 * those a dead agent of this pilot left on this node (agent/leftover.h)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/leftover.h"
#include "proto/keys.h"
#include "proto/log.h"

#define KEY "PILOT_TASK_KEY="
#define ENVIRON_MAX (4 << 20)

char *pl_proc_environ(const char *pid, size_t *len)
{
    char path[300], *buf = NULL; /* /proc/, a d_name of 256, /environ */
    size_t cap = 0;
    ssize_t n;
    int fd;

    *len = 0;
    snprintf(path, sizeof(path), "/proc/%s/environ", pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return NULL;
    do {
        if (*len == cap) {
            char *b = cap < ENVIRON_MAX ? realloc(buf, cap ? 2 * cap : 65536)
                                        : NULL;
            if (!b)
                break;
            buf = b;
            cap = cap ? 2 * cap : 65536;
        }
        n = read(fd, buf + *len, cap - *len);
        if (n > 0)
            *len += (size_t)n;
    } while (n > 0 || (n < 0 && errno == EINTR));
    close(fd);
    if (*len == 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The start time of process 'pid' (clock ticks after boot, field 22 of
 * /proc/PID/stat), or 0 if it is gone or a zombie. */
static unsigned long long start_time(long pid)
{
    char path[64], buf[1024];
    unsigned long long t = 0;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* after the command's ')' (it may hold spaces and parentheses): the
     * state, field 3, then fields 4 to 22 */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
        return 0;
    p += 2;
    for (int f = 3; f < 22 && p; f++)
        if ((p = strchr(p, ' ')))
            p++;
    if (p)
        t = strtoull(p, NULL, 10);
    return t;
}

int pl_owner_make(char *buf, size_t len, const char *server,
                  const char *node)
{
    unsigned char bin[PL_KEY_BIN];
    int n;

    if (pl_keys_decode(server, bin) < 0)
        return -1;
    long pid = (long)getpid();
    n = snprintf(buf, len, "%02x%02x%02x%02x%02x%02x/%s/%ld:%llu", bin[0],
                 bin[1], bin[2], bin[3], bin[4], bin[5], node, pid,
                 start_time(pid));
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The entry of 'env' ('len' bytes) that starts with 'prefix', or NULL. */
static const char *find_entry(const char *env, size_t len, const char *prefix)
{
    size_t plen = strlen(prefix);

    for (size_t off = 0; off < len;) {
        const char *e = env + off;
        const char *nul = memchr(e, '\0', len - off);
        size_t elen = nul ? (size_t)(nul - e) : len - off;
        if (elen >= plen && !memcmp(e, prefix, plen))
            return nul ? e : NULL; /* a cut entry is not read */
        off += elen + 1;
    }
    return NULL;
}

/* Whether the agent of owner part 'who' ("PID:START/...") lives. */
static bool owner_alive(const char *who)
{
    char *end;
    long pid = strtol(who, &end, 10);

    if (end == who || *end != ':' || pid <= 0)
        return false;
    unsigned long long st = strtoull(end + 1, &end, 10);
    return *end == '/' && st && start_time(pid) == st;
}

int pl_leftovers_kill(const char *owner, double wait, unsigned *killed,
                      unsigned *tasks)
{
    char prefix[PL_OWNER_MAX + 32], self[PL_OWNER_MAX + 32];
    const char *slash;
    char **seen = NULL;
    size_t nseen = 0;
    struct timespec t0, now;
    int left = 0;
    bool first = true;

    *killed = *tasks = 0;
    /* PILOT_TASK_KEY=PILOT/NODE/: the tasks of this pilot on this node */
    if (!(slash = strchr(owner, '/')) || !(slash = strchr(slash + 1, '/')))
        return 0;
    snprintf(prefix, sizeof(prefix), KEY "%.*s", (int)(slash - owner + 1),
             owner);
    snprintf(self, sizeof(self), KEY "%s/", owner);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        left = 0;
        if (!d)
            break;
        while ((de = readdir(d))) {
            char *end;
            long pid = strtol(de->d_name, &end, 10);
            size_t len;
            if (*end || pid <= 1 || pid == (long)getpid())
                continue;
            char *env = pl_proc_environ(de->d_name, &len);
            const char *e = env ? find_entry(env, len, prefix) : NULL;
            if (!e || !strncmp(e, self, strlen(self))
                || owner_alive(e + strlen(prefix))) {
                free(env);
                continue;
            }
            if (kill((pid_t)pid, SIGKILL) == 0) {
                left++;
                /* the task: what follows the owner */
                const char *task = strchr(e + strlen(prefix), '/');
                bool known = false;
                for (size_t i = 0; task && i < nseen && !known; i++)
                    known = !strcmp(seen[i], task);
                if (task && !known) {
                    char **s2 = realloc(seen, (nseen + 1) * sizeof(*seen));
                    if (s2) {
                        seen = s2;
                        if ((seen[nseen] = strdup(task)))
                            nseen++;
                    }
                }
            }
            free(env);
        }
        closedir(d);
        if (first)
            *killed = (unsigned)left; /* later rounds find the same */
        first = false;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double t = (double)(now.tv_sec - t0.tv_sec)
                   + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
        if (left == 0 || t >= wait)
            break;
        /* a process killed leaves /proc once reaped: look again soon */
        nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
    }
    *tasks = (unsigned)nseen;
    for (size_t i = 0; i < nseen; i++)
        free(seen[i]);
    free(seen);
    return left;
}
