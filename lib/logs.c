/* lib/logs.c - pilot_logs_*(): a task's output, from files or journals
 *
 * The reader is the CLI's (client/logsrc.c, pilot logs): the same files,
 * the same journal frames, the same merge of ranks by whole lines.  Its
 * sink here is a buffer that each pilot_logs_read() hands over.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client/logsrc.h"
#include "lib/pilot_private.h"
#include "proto/pilotdir.h"
#include "proto/strv.h"

struct pilot_logs {
    struct pl_logsrc *src;
    char *buf;          /* what the reader gave since the last read */
    size_t n, cap;
};

/* pl_logsrc's sink: append to l->buf */
static int collect(const void *p, size_t n, void *arg)
{
    struct pilot_logs *l = arg;

    if (pl_grow(&l->buf, &l->cap, l->n, n, 1) < 0)
        return -1;
    memcpy(l->buf + l->n, p, n);
    l->n += n;
    return 0;
}

/* A whole number of the task object, in [lo, hi], else 'dflt'. */
static long long jnum(const json_t *t, const char *key, long long lo,
                      long long hi, long long dflt)
{
    const json_t *v = json_object_get(t, key);
    long long x;

    if (!json_is_integer(v))
        return dflt;
    x = json_integer_value(v);
    return x >= lo && x <= hi ? x : dflt;
}

struct pilot_logs *pilot_logs_open(const struct pilot *p,
                                   const char *task_json, unsigned attempt,
                                   int stream, long rank, int flags,
                                   struct pilot_error *err)
{
    struct pilot_logs *l = NULL;
    struct pl_error e;
    json_t *t = NULL;

    errno = EINVAL;
    if (!p || !task_json
        || (stream != PILOT_STDOUT && stream != PILOT_STDERR)
        || (flags & ~PILOT_LOGS_LABEL)) {
        pl_errprintf(&e, "pilot_logs_open: a bad argument");
        goto error;
    }
    if (!(t = json_loads(task_json, 0, NULL)) || !json_is_object(t)) {
        errno = EINVAL;
        pl_errprintf(&e, "pilot_logs_open: the task is not a JSON object");
        goto error;
    }
    long long id = jnum(t, "id", 1, INT64_MAX, 0);
    unsigned ranks = (unsigned)jnum(t, "ranks", 1, UINT32_MAX, 1);
    const json_t *pool = json_object_get(t, "pool");
    bool per_rank = pl_output_per_rank(
        ranks, json_string_value(json_object_get(t, "comm")),
        json_string_value(json_object_get(t, "fn")),
        pool && !json_is_null(pool) && !json_is_false(pool));
    if (!id) {
        errno = EINVAL;
        pl_errprintf(&e, "pilot_logs_open: the task has no id");
        goto error;
    }
    if (rank >= (long)ranks || rank < -1) {
        errno = EINVAL;
        pl_errprintf(&e, "task %lld has %u rank%s: there is no rank %ld", id,
                     ranks, ranks == 1 ? "" : "s", rank);
        goto error;
    }
    if (!attempt)
        attempt = (unsigned)jnum(t, "attempts", 1, UINT32_MAX, 1);
    struct pl_logopt o = {
        .use_err = stream == PILOT_STDERR,
        .rank = rank,
        .label = flags & PILOT_LOGS_LABEL,
    };
    if (!(l = calloc(1, sizeof(*l)))
        || !(l->src = pl_logsrc_new(p->conn->pilot.dir, (uint64_t)id,
                                    attempt, ranks, per_rank, &o, collect,
                                    l))) {
        errno = ENOMEM;
        pl_errprintf(&e, "out of memory");
        goto error;
    }
    json_decref(t);
    return l;
error:
    pl_lib_fail(err, &e);
    json_decref(t);
    pilot_logs_close(l);
    return NULL;
}

int pilot_logs_read(struct pilot_logs *l, int final, char **data,
                    size_t *len, struct pilot_error *err)
{
    struct pl_error e;
    int got;

    if (!l || !data || !len) {
        errno = EINVAL;
        pl_errprintf(&e, "pilot_logs_read: a bad argument");
        return pl_lib_fail(err, &e);
    }
    *data = NULL;
    *len = 0;
    /* N.B. on failure what came before it stays for the next read */
    if ((got = pl_logsrc_drain(l->src, final != 0, &e)) < 0)
        return pl_lib_fail(err, &e);
    if (l->n) {
        /* the buffer is the caller's now; the next starts afresh */
        *data = l->buf;
        *len = l->n;
        l->buf = NULL;
        l->n = l->cap = 0;
    }
    return got;
}

int pilot_logs_paths(const struct pilot_logs *l, char **paths_json,
                     struct pilot_error *err)
{
    struct pl_error e;
    json_t *a = NULL;

    if (!l || !paths_json) {
        errno = EINVAL;
        pl_errprintf(&e, "pilot_logs_paths: a bad argument");
        goto error;
    }
    *paths_json = NULL;
    errno = ENOMEM;
    pl_errprintf(&e, "out of memory");
    if (!(a = json_array()))
        goto error;
    for (size_t i = 0; i < pl_logsrc_nsources(l->src); i++)
        if (json_array_append_new(a, json_string(pl_logsrc_source(l->src, i)))
            < 0)
            goto error;
    if (pl_lib_dump(a, paths_json, &e) < 0)
        goto error;
    json_decref(a);
    return 0;
error:
    json_decref(a);
    return pl_lib_fail(err, &e);
}

void pilot_logs_close(struct pilot_logs *l)
{
    int saved = errno;

    if (!l)
        return;
    pl_logsrc_free(l->src);
    free(l->buf);
    free(l);
    errno = saved;
}
