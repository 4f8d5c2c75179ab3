/* worker/call.c - one call of a pool function on one rank: its
 * communicator, output files, directory and environment */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/log.h"
#include "proto/spec.h"
#include "proto/strv.h"
#include "worker/call.h"
#include "worker/link.h"

/* The values of a failed rank in the agreement: 2 * its rank + which */
enum { FAIL_LOAD = 0, FAIL_FILES = 1 };

struct saved_env {
    char *key;
    char *old;              /* NULL: was unset */
};

/* One call on this rank, from start to RETURN */
struct call {
    const struct pl_wcall *c;
    int *group;             /* c->group as ints */
    int rank, size;
    int dirfd, outfd, errfd;
    pilot_fn_t *cfn;
    void *pyfn;
    int fail;               /* 0, or the code of this rank's failure */
    int fail_kind;
    struct pl_error err;
    char *tb;               /* a Python import's traceback, or NULL */
    MPI_Group world_group, group_h;
    MPI_Comm comm;
    char outdir[PATH_MAX];
    /* what the redirection replaced */
    int saved_out, saved_err, saved_cwd;
    struct saved_env *env;
    size_t nenv;
};

/* Open the directory and the output files.  0, or -1 with k->err. */
static int open_files(struct call *k)
{
    const struct pl_wcall *c = k->c;
    int at = AT_FDCWD;

    if (c->cwd) {
        if ((k->dirfd = open(c->cwd, O_RDONLY | O_DIRECTORY | O_CLOEXEC))
            < 0)
            return pl_errprintf(&k->err, "directory %s: %s", c->cwd,
                                strerror(errno));
        at = k->dirfd;
    }
    if (!c->out)
        return 0;
    /* O_APPEND: the ranks of a task on one node may share the files */
    if ((k->outfd = openat(at, c->out,
                           O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600))
        < 0)
        return pl_errprintf(&k->err, "%s: %s", c->out, strerror(errno));
    if ((k->errfd = openat(at, c->err,
                           O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600))
        < 0)
        return pl_errprintf(&k->err, "%s: %s", c->err, strerror(errno));
    return 0;
}

/* ctx->outdir: the directory of the out file, absolute when the call
 * has a directory; "." with --once */
static void set_outdir(struct call *k)
{
    const struct pl_wcall *c = k->c;
    char path[PATH_MAX];

    if (!c->out) {
        snprintf(k->outdir, sizeof(k->outdir), ".");
        return;
    }
    if (c->out[0] != '/' && c->cwd)
        snprintf(path, sizeof(path), "%s/%s", c->cwd, c->out);
    else
        snprintf(path, sizeof(path), "%s", c->out);
    snprintf(k->outdir, sizeof(k->outdir), "%s", dirname(path));
}

static void prepare(struct pl_worker *w, struct call *k)
{
    const struct pl_wcall *c = k->c;

    if (open_files(k) < 0) {
        k->fail = 126;
        k->fail_kind = FAIL_FILES;
        return;
    }
    if (c->fn == PL_FN_PY)
        k->pyfn = pl_py_get(w->py, c->argv[0], c->cwd, &k->err, &k->tb);
    else
        k->cfn = pl_fns_get(w->fns, c->argv[0], c->cwd, &k->err);
    if (!k->pyfn && !k->cfn) {
        k->fail = 127;
        k->fail_kind = FAIL_LOAD;
    }
}

static void make_comm(struct pl_worker *w, struct call *k)
{
    if (w->fd < 0) {
        MPI_Comm_dup(MPI_COMM_WORLD, &k->comm);
        return;
    }
    /* MPI_Comm_create_group: collective over the task's ranks only,
     * so that other tasks go on meanwhile in the rest of the pool */
    MPI_Comm_group(MPI_COMM_WORLD, &k->world_group);
    MPI_Group_incl(k->world_group, k->size, k->group, &k->group_h);
    MPI_Comm_create_group(MPI_COMM_WORLD, k->group_h,
                          pl_wcall_tag(k->c->id, k->c->attempt), &k->comm);
}

/* The error line (and a Python traceback) in the rank's err file, or on
 * stderr with --once, where a person looking for the output will look */
static void report(struct call *k, const char *text)
{
    int fd = k->errfd >= 0 ? k->errfd : (k->c->out ? -1 : 2);

    if (fd < 0)
        return;
    dprintf(fd, "pilot-worker: %s: %s\n", k->c->argv[0], text);
    if (k->tb)
        dprintf(fd, "%s", k->tb);
}

static int redirect(struct call *k)
{
    const struct pl_wcall *c = k->c;

    fflush(stdout);
    fflush(stderr);
    if (k->outfd >= 0) {
        /* fd 1 or 2 closed at start (EBADF) is put back closed */
        k->saved_out = fcntl(1, F_DUPFD_CLOEXEC, 3);
        k->saved_err = fcntl(2, F_DUPFD_CLOEXEC, 3);
        if (dup2(k->outfd, 1) < 0 || dup2(k->errfd, 2) < 0)
            return -1;
    }
    if (k->dirfd >= 0) {
        k->saved_cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fchdir(k->dirfd) < 0)
            return -1;
    }
    /* a Python function's environment is set in os.environ instead,
     * which putenv()s it too: os.environ is a copy made at start */
    if (c->fn == PL_FN_PY || !c->env)
        return 0;
    if (!(k->env = calloc(pl_strv_len(c->env), sizeof(*k->env))))
        return -1;
    for (char **e = c->env; *e; e++) {
        const char *eq = strchr(*e, '=');
        struct saved_env *s = &k->env[k->nenv];
        const char *old;

        if (!(s->key = strndup(*e, (size_t)(eq - *e))))
            return -1;
        k->nenv++;
        old = getenv(s->key);
        if ((old && !(s->old = strdup(old)))
            || setenv(s->key, eq + 1, 1) < 0)
            return -1;
    }
    return 0;
}

static void restore(struct call *k)
{
    fflush(stdout);
    fflush(stderr);
    /* last set, first put back: a key given twice gets its first old
     * value */
    while (k->nenv > 0) {
        struct saved_env *s = &k->env[--k->nenv];
        if (s->old)
            setenv(s->key, s->old, 1);
        else
            unsetenv(s->key);
        free(s->key);
        free(s->old);
    }
    free(k->env);
    k->env = NULL;
    if (k->outfd >= 0) {
        if (k->saved_out >= 0)
            dup2(k->saved_out, 1);
        else
            close(1);
        if (k->saved_err >= 0)
            dup2(k->saved_err, 2);
        else
            close(2);
    }
    if (k->saved_cwd >= 0) {
        if (fchdir(k->saved_cwd) < 0)
            pl_log_error("cannot go back to the worker's directory");
    } else if (k->dirfd >= 0 && chdir("/") < 0) {
        pl_log_error("chdir /");
    }
}

static int send_entered(struct pl_worker *w, const struct pl_wcall *c)
{
    struct pl_wentered e = { .id = c->id, .attempt = c->attempt,
                             .time = pl_now() };
    struct pl_wbuf b;
    int rc;

    if (w->fd < 0)
        return 0;
    pl_wentered_encode(&b, &e);
    rc = pl_link_send(w->fd, &b);
    pl_wbuf_destroy(&b);
    return rc;
}

static int send_return(struct pl_worker *w, const struct pl_wcall *c,
                       int code, const char *error)
{
    struct pl_wreturn r = { .id = c->id, .attempt = c->attempt,
                            .code = code, .error = (char *)error,
                            .time = pl_now() };
    struct pl_wbuf b;
    int rc;

    if (w->fd < 0)
        return 0;
    pl_wreturn_encode(&b, &r);
    rc = pl_link_send(w->fd, &b);
    pl_wbuf_destroy(&b);
    return rc;
}

/* Call the function with everything in place; its code */
static int invoke(struct pl_worker *w, struct call *k, void *nccl,
                  const char *nccl_error, bool *freed)
{
    const struct pl_wcall *c = k->c;
    struct pilot_fn_ctx ctx = {
        .version = PILOT_FN_VERSION,
        .rank = k->rank,
        .size = k->size,
        .comm = k->comm,
        .nccl = nccl,
        .nccl_error = nccl ? NULL : nccl_error,
        .cuda_device = pl_nccl_device(w->nccl),
        .task_id = c->id,
        .attempt = (unsigned int)c->attempt,
        .array_index = c->array_index,
        .outdir = k->outdir,
        .pool = w->pool,
        .world_rank = w->world_rank,
        .world_size = w->world_size,
    };
    int code;

    *freed = false;
    pl_crash_enter();
    if (k->cfn)
        code = k->cfn(&ctx, (int)pl_strv_len(c->argv), c->argv);
    else
        code = pl_py_call(w->py, k->pyfn, c->argv[0], &ctx, c->argv, c->env,
                          c->cwd, freed);
    pl_crash_leave();
    return code < 0 || code > 255 ? 255 : code;
}

static void call_free(struct pl_worker *w, struct call *k)
{
    if (k->comm != MPI_COMM_NULL)
        MPI_Comm_free(&k->comm);
    if (k->group_h != MPI_GROUP_NULL)
        MPI_Group_free(&k->group_h);
    if (k->world_group != MPI_GROUP_NULL)
        MPI_Group_free(&k->world_group);
    pl_py_put(w->py, k->pyfn);
    for (int *fd = &k->dirfd; fd <= &k->errfd; fd++)
        if (*fd >= 0)
            close(*fd);
    if (k->saved_out >= 0)
        close(k->saved_out);
    if (k->saved_err >= 0)
        close(k->saved_err);
    if (k->saved_cwd >= 0)
        close(k->saved_cwd);
    free(k->tb);
    free(k->group);
}

int pl_call_run(struct pl_worker *w, const struct pl_wcall *c, int *codep)
{
    struct call k = {
        .c = c, .rank = (int)c->rank, .size = (int)c->size,
        .dirfd = -1, .outfd = -1, .errfd = -1,
        .world_group = MPI_GROUP_NULL, .group_h = MPI_GROUP_NULL,
        .comm = MPI_COMM_NULL,
        .saved_out = -1, .saved_err = -1, .saved_cwd = -1,
    };
    const char *error = NULL, *nccl_error = "the pool has no GPUs";
    char others[160];
    void *nccl = NULL;
    int vote[2], agreed[2], code, rc = 0;
    bool freed = false;

    if (!(k.group = malloc((size_t)k.size * sizeof(int)))) {
        /* nothing made yet, but the other ranks wait in the
         * communicator's creation: the pool cannot go on */
        pl_log_error("call %llu: out of memory", (unsigned long long)c->id);
        exit(1);
    }
    for (int i = 0; i < k.size; i++)
        k.group[i] = (int)c->group[i];
    set_outdir(&k);
    prepare(w, &k);
    make_comm(w, &k);

    /* One MPI_Allreduce(MIN) settles two things: whether every rank can
     * call the function (a failed rank votes 2 * rank + what failed, the
     * others INT_MAX: the least is the first failed rank), and NCCL
     * (pl_nccl_vote(); Python functions get none, on every rank). */
    vote[0] = k.fail ? 2 * k.rank + k.fail_kind : INT_MAX;
    vote[1] = !k.fail && c->fn == PL_FN_C
                  ? pl_nccl_vote(w->nccl, k.group, k.size)
                  : 0;
    MPI_Allreduce(vote, agreed, 2, MPI_INT, MPI_MIN, k.comm);
    if (agreed[0] != INT_MAX) {
        if (k.fail) {
            code = k.fail;
            error = k.err.text;
        } else {
            code = 127;
            snprintf(others, sizeof(others),
                     "rank %d of the task could not %s", agreed[0] / 2,
                     agreed[0] % 2 == FAIL_FILES
                         ? "open its directory or output files"
                         : "load the function");
            error = others;
        }
        report(&k, error);
        goto done;
    }
    if (c->fn == PL_FN_PY)
        nccl_error = "NCCL communicators are for C functions";
    else if (w->nccl)
        nccl = pl_nccl_get(w->nccl, k.comm, k.group, k.size, agreed[1],
                           &nccl_error);
    if (redirect(&k) < 0) {
        /* the rest of the task is calling it: this rank runs it too,
         * with whatever it could set up */
        pl_log_error("call %llu: setting up the rank's files",
                     (unsigned long long)c->id);
    }
    if (send_entered(w, c) < 0) {
        restore(&k);
        rc = -1;
        code = 255;
        goto done;
    }
    code = invoke(w, &k, nccl, nccl_error, &freed);
    restore(&k);
    if (freed) {
        /* comm.Free() in Python: the handle is gone already */
        pl_log(LOG_WARNING, "call %llu: the function freed ctx.comm",
               (unsigned long long)c->id);
        k.comm = MPI_COMM_NULL;
    }
done:
    call_free(w, &k);
    *codep = code;
    if (rc == 0 && send_return(w, c, code, error) < 0)
        rc = -1;
    return rc;
}
