/* bench/limit.c - the fork/exec limit: N copies of a command, P at a time
 *
 * What a task launcher cannot beat on this node: posix_spawn() a command
 * N times keeping P of them running, reap each with waitpid(), and print
 * {"n", "p", "seconds", "tasks_per_s", "failed"} as one JSON line.  The
 * children's output goes to /dev/null (as a pilot task's goes to a file).
 * With -f, fork() and execvp() instead of posix_spawn() (which glibc does
 * with clone(CLONE_VM | CLONE_VFORK)): what a launcher that forks pays.
 *
 * It also prints the CPU it spent itself ("self_user_s", "self_sys_s":
 * getrusage(RUSAGE_SELF), the spawns and reaps, what a launcher cannot
 * avoid) and what its children spent ("children_user_s",
 * "children_sys_s": RUSAGE_CHILDREN, the tasks), so that a launcher's own
 * CPU per task can be set beside the limit's (make bench, scenario 1).
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char usage[] =
    "Usage: limit [-f] -n N -p P [--] CMD [ARGS]\n"
    "Run CMD N times, P at a time (posix_spawn, waitpid); print JSON.\n"
    "-f: fork and exec instead of posix_spawn.\n";

static double now_mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double tv_s(const struct timeval *tv)
{
    return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

static long parse_count(const char *s, const char *what)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > 100000000) {
        fprintf(stderr, "limit: %s: want a count, 1 to 1e8\n", what);
        exit(2);
    }
    return v;
}

/* One child of 'argv' with stdin, stdout and stderr on /dev/null.
 * Returns 0, or -1 with errno set. */
static int spawn_one(char **argv, const posix_spawn_file_actions_t *fa,
                     bool use_fork, pid_t *pid)
{
    int rc;

    if (use_fork) {
        if ((*pid = fork()) < 0)
            return -1;
        if (*pid == 0) {
            int fd = open("/dev/null", O_RDWR);
            if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0
                || dup2(fd, 2) < 0)
                _exit(126);
            execvp(argv[0], argv);
            _exit(127);
        }
        return 0;
    }

    if ((rc = posix_spawnp(pid, argv[0], fa, NULL, argv, environ)) != 0) {
        errno = rc;
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    posix_spawn_file_actions_t fa;
    long n = 0, p = 0, started = 0, reaped = 0, failed = 0;
    bool use_fork = false;
    int c;

    while ((c = getopt(argc, argv, "+fn:p:h")) != -1) {
        switch (c) {
        case 'f':
            use_fork = true;
            break;
        case 'n':
            n = parse_count(optarg, "-n");
            break;
        case 'p':
            p = parse_count(optarg, "-p");
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (!n || !p || optind >= argc) {
        fputs(usage, stderr);
        return 2;
    }
    argv += optind;
    if (posix_spawn_file_actions_init(&fa) != 0
        || posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)
        || posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0)
        || posix_spawn_file_actions_adddup2(&fa, 1, 2)) {
        fprintf(stderr, "limit: posix_spawn_file_actions: out of memory\n");
        return 1;
    }

    double t0 = now_mono();
    while (reaped < n) {
        pid_t pid;
        int status;

        while (started < n && started - reaped < p) {
            if (spawn_one(argv, &fa, use_fork, &pid) < 0) {
                fprintf(stderr, "limit: %s: %s\n", argv[0], strerror(errno));
                return 1;
            }
            started++;
        }
        if ((pid = waitpid(-1, &status, 0)) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "limit: waitpid: %s\n", strerror(errno));
            return 1;
        }
        reaped++;
        failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    double secs = now_mono() - t0;
    struct rusage self, kids;

    /* N.B. after the last reap: every child is in RUSAGE_CHILDREN */
    if (getrusage(RUSAGE_SELF, &self) < 0
        || getrusage(RUSAGE_CHILDREN, &kids) < 0) {
        fprintf(stderr, "limit: getrusage: %s\n", strerror(errno));
        return 1;
    }
    posix_spawn_file_actions_destroy(&fa);
    printf("{\"n\": %ld, \"p\": %ld, \"seconds\": %.6f, "
           "\"tasks_per_s\": %.1f, \"failed\": %ld, "
           "\"self_user_s\": %.6f, \"self_sys_s\": %.6f, "
           "\"children_user_s\": %.6f, \"children_sys_s\": %.6f}\n",
           n, p, secs, (double)n / secs, failed, tv_s(&self.ru_utime),
           tv_s(&self.ru_stime), tv_s(&kids.ru_utime), tv_s(&kids.ru_stime));
    return failed ? 1 : 0;
}
