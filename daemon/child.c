/* daemon/child.c - a child process of pilotd, its output into a log file
 *
 * pilotd's only children are the agents' processes (daemon/launch.c): one
 * srun step over the job's nodes, an srun of one agent on a node that
 * lost its own, or with --local one pilot-agent. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/child.h"
#include "proto/log.h"
#include "proto/strv.h"

struct pl_child {
    uv_process_t proc;
    uv_loop_t *loop;
    char **argv;
    char *logpath;
    int running;
    int has_handle;  /* proc was initialised by uv_spawn and not closed */
    int freeing;
    pl_child_exit_f cb;
    void *arg;
};

static void free_mem(struct pl_child *l)
{
    pl_strv_free(l->argv);
    free(l->logpath);
    free(l);
}

static void close_cb(uv_handle_t *h)
{
    struct pl_child *l = h->data;

    l->has_handle = 0;
    if (l->freeing)
        free_mem(l);
}

static void exit_cb(uv_process_t *p, int64_t status, int signum)
{
    struct pl_child *l = p->data;

    l->running = 0;
    uv_close((uv_handle_t *)p, close_cb);
    if (!l->freeing && l->cb)
        l->cb(l, status, signum, l->arg);
}

struct pl_child *pl_child_new(uv_loop_t *loop, char *const *argv,
                              const char *logpath, pl_child_exit_f cb,
                              void *arg, struct pl_error *errp)
{
    struct pl_child *l;

    if (!(l = calloc(1, sizeof(*l)))
        || !(l->argv = pl_strv_dup(argv))
        || (logpath && !(l->logpath = strdup(logpath)))) {
        pl_errprintf(errp, "out of memory");
        if (l)
            free_mem(l);
        return NULL;
    }
    l->loop = loop;
    l->cb = cb;
    l->arg = arg;
    return l;
}

int pl_child_start(struct pl_child *l, struct pl_error *errp)
{
    uv_process_options_t opts = { 0 };
    uv_stdio_container_t stdio[3];
    int fd = -1, rc;

    if (l->running || l->has_handle) {
        errno = EBUSY;
        return pl_errprintf(errp, "agents' process is still running");
    }
    if (l->logpath
        && (fd = open(l->logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                      0600)) < 0)
        return pl_errprintf(errp, "cannot open %s: %s", l->logpath,
                            strerror(errno));
    stdio[0].flags = UV_IGNORE;
    for (int i = 1; i < 3; i++) {
        stdio[i].flags = UV_INHERIT_FD;
        stdio[i].data.fd = fd >= 0 ? fd : i;
    }
    opts.file = l->argv[0];
    opts.args = l->argv;
    opts.stdio = stdio;
    opts.stdio_count = 3;
    opts.exit_cb = exit_cb;
    l->proc.data = l;
    rc = uv_spawn(l->loop, &l->proc, &opts);
    if (fd >= 0)
        close(fd);
    l->has_handle = 1; /* uv_spawn initialises the handle even on failure */
    if (rc < 0) {
        uv_close((uv_handle_t *)&l->proc, close_cb);
        errno = -rc;
        return pl_errprintf(errp, "cannot start %s: %s", l->argv[0],
                            uv_strerror(rc));
    }
    l->running = 1;
    pl_log(LOG_NOTICE, "started agents' process pid %d: %s ...", l->proc.pid,
           l->argv[0]);
    return 0;
}

int pl_child_running(const struct pl_child *l)
{
    return l->running;
}

void pl_child_free(struct pl_child *l)
{
    if (!l)
        return;
    int saved = errno;
    l->freeing = 1;
    if (l->running) {
        uv_process_kill(&l->proc, SIGKILL);
        l->running = 0;
        uv_close((uv_handle_t *)&l->proc, close_cb);
    }
    else if (!l->has_handle)
        free_mem(l);
    /* else: a close is pending; close_cb frees */
    errno = saved;
}
