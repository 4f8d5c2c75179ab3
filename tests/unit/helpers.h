/* tests/unit/helpers.h - what the unit tests share: temporary directories,
 * running a check in a child that may crash or hang, message bodies
 * built by hand and read back */
#ifndef PL_TESTS_HELPERS_H
#define PL_TESTS_HELPERS_H

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/msg.h"
#include "tests/mpw.h"
#include "tests/unit/tap.h"

static inline int t_rm_cb(const char *p, const struct stat *st, int f,
                          struct FTW *w)
{
    (void)st;
    (void)f;
    (void)w;
    return remove(p);
}

/* Remove 'dir' and everything under it (symbolic links not followed). */
static inline void t_rmtree(const char *dir)
{
    nftw(dir, t_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A new directory /tmp/pl-test-NAME-XXXXXX (0700) in 'buf' ('len' >=
 * 64).  Returns buf, or NULL after a diag line. */
static inline char *t_tmpdir(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/pl-test-%s-XXXXXX", name);
    if (!mkdtemp(buf)) {
        diag("mkdtemp %s: %s", buf, strerror(errno));
        return NULL;
    }
    return buf;
}

/* Run fn(arg) in a child, which exits with its result (0: good), killed
 * by SIGALRM after 'secs' (0: no limit): for a check that may crash,
 * hang or exhaust memory.  Returns the child's wait status, or -1 (fork
 * failed, diag line). */
static inline int t_in_child(int (*fn)(void *arg), void *arg, unsigned secs)
{
    int status = 0;
    pid_t pid;

    fflush(stdout);
    if ((pid = fork()) < 0) {
        diag("fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        if (secs)
            alarm(secs);
        _exit(fn(arg) ? 1 : 0);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}

/* Whether a t_in_child() status is a clean exit 0; if not, a diag line
 * says how it ended ('what' names the check). */
static inline bool t_child_ok(int status, const char *what)
{
    if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return true;
    if (status < 0)
        return false;
    diag("%s: child %s %d%s", what,
         WIFEXITED(status) ? "exited" : "killed by signal",
         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
         WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? " (hung)" : "");
    return false;
}

/* A message built with the raw writers (tests/mpw.h), then decoded as a
 * receiver decodes it. */
struct t_body {
    struct pl_wbuf w;
    struct pl_msg m;
};

/* Start a message of 'type' whose body holds 'nfields' pairs. */
static inline void t_body_begin(struct t_body *b, int type, uint32_t nfields)
{
    memset(&b->m, 0, sizeof(b->m));
    raw_wbuf_init(&b->w, type, 1, nfields);
}

/* The body map, or NULL (a diag line) if the envelope did not decode. */
static inline const msgpack_object *t_body_end(struct t_body *b)
{
    struct pl_error e;

    if (pl_msg_decode(b->w.sb.data, b->w.sb.size, &b->m, &e) < 0) {
        diag("envelope refused: %s", e.text);
        return NULL;
    }
    return b->m.body;
}

static inline void t_body_free(struct t_body *b)
{
    pl_msg_release(&b->m);
    pl_wbuf_destroy(&b->w);
}

#endif /* !PL_TESTS_HELPERS_H */
