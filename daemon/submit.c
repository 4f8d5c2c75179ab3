/* daemon/submit.c - a submit request: specs checked, stored and queued
 *
 * Every spec of a request is decoded and checked before anything is
 * stored, and the request's tasks are stored under one savepoint: a
 * request is queued whole or not at all, and acknowledged only once the
 * batch's transaction has committed (outq.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/daemon_private.h"
#include "daemon/pool.h"
#include "daemon/queue.h"
#include "proto/clientmsg.h"
#include "proto/log.h"
#include "proto/query.h"
#include "proto/strv.h"

/* A call's input file: under the pilot's inputs/ (what the client may
 * write there is what the pilot's owner may run), a regular file of at
 * most PL_SPEC_MAX_INPUT_FILE bytes. */
static int input_file_check(struct pl_daemon *d, const char *path,
                            struct pl_error *errp)
{
    char dir[PL_PATH_MAX + 16], real[PL_PATH_MAX], rdir[PL_PATH_MAX];
    struct stat st;

    snprintf(dir, sizeof(dir), "%s/inputs", d->dir);
    if (!realpath(dir, rdir) || !realpath(path, real)
        || strncmp(real, rdir, strlen(rdir)) || real[strlen(rdir)] != '/')
        return pl_errset(errp, EINVAL, "input_file %.200s: not a file under "
                         "the pilot's inputs/ (%s)", path, dir);
    if (stat(real, &st) < 0 || !S_ISREG(st.st_mode))
        return pl_errset(errp, EINVAL, "input_file %.200s: not a regular "
                         "file", path);
    if ((uint64_t)st.st_size > PL_SPEC_MAX_INPUT_FILE)
        return pl_errset(errp, EINVAL, "input_file %.200s: %lld bytes; at "
                         "most %llu (256 MiB)", path, (long long)st.st_size,
                         (unsigned long long)PL_SPEC_MAX_INPUT_FILE);
    return 0;
}

/* The text of file DIR/'name' into *out (NULL when there is none), at
 * most 'max' bytes.  0, or -1 with errp. */
static int read_default(const char *dir, const char *name, size_t max,
                        char **out, struct pl_error *errp)
{
    char path[PL_PATH_MAX + 32];
    FILE *fp;
    size_t n;

    *out = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (!(fp = fopen(path, "re")))
        return errno == ENOENT ? 0 : pl_errprintf(errp, "%s: %s", path,
                                                  strerror(errno));
    if (!(*out = calloc(1, max + 2))) {
        fclose(fp);
        return pl_errprintf(errp, "out of memory");
    }
    n = fread(*out, 1, max + 1, fp);
    fclose(fp);
    if (n > max || strlen(*out) != n || !pl_utf8_str(*out)) {
        free(*out);
        *out = NULL;
        return pl_errset(errp, EINVAL, "%s: more than %zu bytes, or not "
                         "UTF-8 text", path, max);
    }
    return 0;
}

int pl_submit_py_defaults(struct pl_daemon *d, struct pl_error *errp)
{
    if (read_default(d->dir, "py-prelude", PL_SPEC_MAX_PRELUDE,
                     &d->py_prelude, errp) < 0
        || read_default(d->dir, "py-python", PL_SPEC_MAX_PYTHON,
                        &d->py_python, errp) < 0)
        return -1;
    /* a name on one line: the file may end with a newline */
    if (d->py_python)
        d->py_python[strcspn(d->py_python, "\n")] = '\0';
    if (d->py_python && !d->py_python[0]) {
        free(d->py_python);
        d->py_python = NULL;
    }
    return 0;
}

/* Decode spec 'o' and check that some node of the pilot can hold it. */
static int spec_parse(struct pl_daemon *d, const msgpack_object *o,
                      struct pl_spec *s, struct pl_error *errp)
{
    if (pl_spec_decode(o, s, errp) < 0)
        return -1;
    if ((s->input_file && input_file_check(d, s->input_file, errp) < 0)
        || (s->nrefs && pl_db_refs_check(d->db, s->refs, s->nrefs, errp)
                            < 0)) {
        pl_spec_clear(s);
        return -1;
    }
    if (s->fn == PL_FN_POOL) {
        pl_spec_clear(s);
        errno = EINVAL;
        return pl_errprintf(errp, "fn 'pool' is a pool's own job: start a "
                            "pool with 'pilot pool start'");
    }
    if (s->pool) {
        struct pl_pool *p = pl_poolctl_find(d, s->pool);
        struct pl_dtask t = { 0 };
        char why[200];
        pl_dtask_shape(&t, s);
        if (!p)
            snprintf(why, sizeof(why), "no pool is named '%s' (pilot pool "
                     "ls)", s->pool);
        else if (p->state == PL_POOL_STOPPING || p->state == PL_POOL_FAILED)
            snprintf(why, sizeof(why), "pool %s is %s", s->pool,
                     pl_pool_state_name(p->state));
        if (!p || p->state == PL_POOL_STOPPING || p->state == PL_POOL_FAILED
            || !pl_pool_fits(p, &t, why, sizeof(why))) {
            pl_spec_clear(s);
            errno = EINVAL;
            return pl_errprintf(errp, "%s", why);
        }
    }
    else if (pl_sched_nnodes(d->sched) > 0) {
        struct pl_dtask t = { 0 };
        char why[200];
        pl_dtask_shape(&t, s);
        /* a pilot that grows itself (--grow) may fit it later, unless no
         * node like its own ever could */
        if (pl_alloc_may_grow(d)
                ? pl_alloc_never_fits(d, &t, why, sizeof(why))
                : !pl_sched_fits(d->sched, &t, why, sizeof(why))) {
            pl_spec_clear(s);
            errno = EINVAL;
            return pl_errprintf(errp, "%s", why);
        }
    }
    return 0;
}

/* Resolve the 'after' of 's': ids and names (the latest task of that
 * name, this request's earlier ones included) to the tasks still live,
 * and the first that failed; an array's id stands for all its tasks, an
 * element ID.N for that one.  0, or -1 with errp (EINVAL: no such
 * task). */
static int deps_resolve(struct pl_daemon *d, const struct pl_spec *s,
                        struct pl_deps *dp, struct pl_error *errp)
{
    memset(dp, 0, sizeof(*dp));
    for (uint32_t i = 0; i < s->nafter; i++) {
        const struct pl_dep *e = &s->after[i];
        uint64_t id = e->id;
        if (e->name) {
            if ((id = pl_db_task_by_name(d->db, e->name, errp)) == UINT64_MAX)
                goto error;
            if (id == 0) {
                errno = EINVAL;
                pl_errprintf(errp, "after: no task is named '%.64s'",
                             e->name);
                goto error;
            }
        }
        if (e->elem) {
            /* ID.N: that element alone (element 0's id is the array's) */
            uint64_t pair[2] = { id, e->index }, *one = NULL;
            size_t n1;
            if (pl_query_resolve(pl_db_handle(d->db), NULL, 0, pair, 1, true,
                                 &one, &n1, errp) < 0) {
                errno = EINVAL;
                goto error;
            }
            id = one[0];
            free(one);
        }
        if (pl_deps_add(d, dp, id, e->any, e->elem, true, errp) < 0)
            goto error;
    }
    return 0;
error:
    pl_deps_clear(dp);
    return -1;
}

/* Store the row of element 'k' of spec 's' (its only one if not an
 * array) in 'state', submitted with the key named 'by'; '*first' is the
 * array's id once element 0 is in.  0 with *id, or -1 with errp set. */
static int store_row(struct pl_daemon *d, struct pl_spec *s, uint64_t k,
                     const struct pl_deps *dp, int state, double t_now,
                     uint64_t *first, const char *by, uint64_t *id,
                     struct pl_error *errp)
{
    uint64_t idx = s->retry ? s->index[k] : s->astart + k * s->astep;
    char **argv = NULL, *name = NULL;
    int rc = -1;

    if (s->array && (!(argv = pl_queue_subst_strv(s->argv, idx))
                     || (s->name && !(name = pl_queue_subst(s->name, idx))))) {
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        goto done;
    }
    struct pl_db_task row = {
        .spec = s, .argv = argv, .name = name,
        .after = dp->stored, .nafter = (uint32_t)dp->nstored,
        .array_id = s->array && k > 0 ? *first : 0, .array_index = idx,
        .submitted_by = by,
    };
    if (s->append)
        row.array_id = s->append; /* element 0 is another request's */
    if (pl_db_task_insert(d->db, &row, state, t_now, id, errp) < 0
        || (s->fn == PL_FN_PYCALL
            && pl_db_pyinput_add(d->db, *id, s, d->py_prelude, d->py_python,
                                 errp) < 0)
        || (s->array && k == 0 && !s->append
            && pl_db_task_array(d->db, *id, idx, errp) < 0))
        goto done;
    if (s->array && k == 0 && !s->append)
        *first = *id;
    rc = 0;
done:
    pl_strv_free(argv);
    free(name);
    return rc;
}

/* Store and queue element 'k' of spec 's' (its only one if not an
 * array), submitted with the key named 'by'; '*first' is the array's id
 * once element 0 is in.  The task, or NULL with errp set. */
static struct pl_dtask *submit_one(struct pl_daemon *d, struct pl_spec *s,
                                   uint64_t k, const struct pl_deps *dp,
                                   double t_now, uint64_t *first,
                                   const char *by, struct pl_watch *w,
                                   struct pl_out *o, struct pl_error *errp)
{
    uint64_t idx = s->retry ? s->index[k] : s->astart + k * s->astep;
    bool last = k + 1 == pl_spec_count(s);
    char **argv = NULL, **env = NULL, *cwd = NULL;
    struct pl_dtask *t = NULL;
    uint64_t id;
    int state = dp->nlive || dp->why[0] ? PL_ST_WAITING : PL_ST_QUEUED;

    if (store_row(d, s, k, dp, state, t_now, first, by, &id, errp) < 0)
        return NULL;
    if (s->array && !(argv = pl_queue_subst_strv(s->argv, idx)))
        goto nomem;
    /* the last element takes the spec's strings, the others copies */
    if (!s->array) {
        argv = s->argv;
        s->argv = NULL;
    }
    if (last) {
        env = s->env;
        cwd = s->cwd;
        s->env = NULL;
        s->cwd = NULL;
    }
    else if ((s->env && !(env = pl_strv_dup(s->env)))
             || (s->cwd && !(cwd = strdup(s->cwd))))
        goto nomem;
    if (!(t = pl_sched_task_add(d->sched, id,
                                state == PL_ST_QUEUED && !s->pool,
                                (int32_t)s->priority, &argv, &env, &cwd)))
        goto nomem;
    if (s->fn == PL_FN_PYCALL) {
        t->fn = s->fn; /* its input is read at dispatch */
        t->nrefs = (uint8_t)s->nrefs; /* ... with its refs' results */
    }
    if (s->pool) {
        t->fn = s->fn;
        t->pool = pl_poolctl_find(d, s->pool); /* spec_parse() found it */
        if (state == PL_ST_QUEUED)
            pl_pool_enqueue(t->pool, t, false);
    }
    o->undo[o->nundo++] = id; /* from here the request's undo takes it */
    t->state = state;
    pl_dtask_shape(t, s);
    t->serial = ++d->serial;
    t->array_id = s->array ? *first : 0;
    t->array_index = s->array ? idx : 0;
    pl_dtask_counted(d, t);
    /* in its watch before anything can end it (a failed dependency) */
    if (w && pl_watch_add_task(d, w, t) < 0)
        goto nomem;
    goto done;
nomem:
    errno = ENOMEM;
    pl_errprintf(errp, "out of memory");
    t = NULL;
done:
    pl_strv_free(argv);
    pl_strv_free(env);
    free(cwd);
    return t;
}

/* Whether the elements of 's' wait as compact runs (daemon/queue.h):
 * those of a plain array (its indexes a range), queued at once, and in
 * no watch; a call's, a pool's and a waiting task are tasks from the
 * start (what they need at dispatch, or before, is per task). */
static bool compact(const struct pl_spec *s, const struct pl_deps *dp,
                    const struct pl_watch *w)
{
    return s->array && !s->retry && !s->pool && s->fn != PL_FN_PYCALL
           && !w && !dp->nlive && !dp->why[0] && pl_spec_count(s) > 1;
}

/* Elements k0..k0+n-1 of 's', stored as ids id0.., queued as one run. */
static int run_make(struct pl_daemon *d, const struct pl_spec *s,
                    uint64_t k0, uint64_t n, uint64_t id0, uint64_t first)
{
    char **argv = pl_strv_dup(s->argv), **env = NULL, *cwd = NULL;
    struct pl_dtask *p = NULL;

    if (argv && (!s->env || (env = pl_strv_dup(s->env)))
        && (!s->cwd || (cwd = strdup(s->cwd))))
        p = pl_sched_run_add(d->sched, id0, n, s->astart + k0 * s->astep,
                             s->astep, (int32_t)s->priority, &argv, &env,
                             &cwd);
    pl_strv_free(argv);
    pl_strv_free(env);
    free(cwd);
    if (!p)
        return -1;
    pl_dtask_shape(p, s);
    p->array_id = first;
    p->serial = d->serial + 1;
    d->serial += n;
    for (uint64_t i = 0; i < n; i++)
        pl_dtask_counted(d, p);
    return 0;
}

/* Store every element of 's' and queue them as runs of consecutive ids
 * (one run: the ids of one request are consecutive).  0, or -1 with
 * errp. */
static int submit_runs(struct pl_daemon *d, struct pl_spec *s,
                       const struct pl_deps *dp, double t_now,
                       uint64_t *first, const char *by, struct pl_out *o,
                       struct pl_error *errp)
{
    uint64_t cnt = pl_spec_count(s), k0 = 0, id0 = 0, id = 0;

    for (uint64_t k = 0; k <= cnt; k++) {
        if (k < cnt) {
            if (store_row(d, s, k, dp, PL_ST_QUEUED, t_now, first, by, &id,
                          errp) < 0)
                return -1;
            o->undo[o->nundo++] = id; /* the request's undo takes it */
        }
        if (k > k0 && (k == cnt || id != id0 + (k - k0))) {
            if (run_make(d, s, k0, k - k0, id0, *first) < 0) {
                errno = ENOMEM;
                return pl_errprintf(errp, "out of memory");
            }
            k0 = k;
        }
        if (k == k0)
            id0 = id;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* retry_failed: the indexes of array s->retry that failed (within the
 * spec's range, when it gives one) become the spec's, in order, at most
 * 'cap' of them; '*more' is then the first index left out (0: none).
 * The array must have ended.  0, or -1 with errp set. */
static int retry_resolve(struct pl_daemon *d, struct pl_spec *s,
                         uint64_t cap, uint64_t *more, struct pl_error *errp)
{
    uint64_t *idx = NULL, n = 0, live = 0, k = 0;
    long count = pl_db_array_failed(d->db, s->retry, &idx, &n, &live, errp);
    unsigned long long id = (unsigned long long)s->retry;
    char range[96] = "";

    if (count < 0)
        return -1;
    if (s->array)
        snprintf(range, sizeof(range), " in %llu-%llu:%llu",
                 (unsigned long long)s->astart, (unsigned long long)s->aend,
                 (unsigned long long)s->astep);
    for (uint64_t i = 0; i < n; i++)
        if (!s->array || (idx[i] >= s->astart && idx[i] <= s->aend
                          && (idx[i] - s->astart) % s->astep == 0))
            idx[k++] = idx[i];
    if (count == 0) {
        errno = ENOENT;
        pl_errprintf(errp, "retry_failed: %llu is not an array's id", id);
    }
    else if (live > 0) {
        errno = EBUSY;
        pl_errprintf(errp, "retry_failed: array %llu has %llu tasks that "
                     "have not ended; wait for them first", id,
                     (unsigned long long)live);
    }
    else if (k == 0) {
        errno = ENOENT;
        pl_errprintf(errp, "retry_failed: no task of array %llu failed%s",
                     id, range);
    }
    else {
        qsort(idx, k, sizeof(*idx), cmp_u64);
        *more = k > cap ? idx[cap] : 0;
        s->index = idx;
        s->nindex = k > cap ? cap : k;
        s->array = true;
        return 0;
    }
    free(idx);
    return -1;
}

/* A spec with 'append' adds elements to an array an earlier request
 * made: 'append' must be an array's id, and no element of it may have
 * an index of this spec's range (an index names one element).  0, or
 * -1 with errp set. */
static int append_check(struct pl_daemon *d, const struct pl_spec *s,
                        struct pl_error *errp)
{
    uint64_t lo = s->retry ? s->index[0] : s->astart;
    uint64_t hi = s->retry ? s->index[s->nindex - 1] : s->aend;
    uint64_t taken;
    int is = pl_db_array_range(d->db, s->append, lo, hi, &taken, errp);

    if (is < 0)
        return -1;
    if (!is) {
        errno = ENOENT;
        return pl_errprintf(errp, "append: %llu is not an array's id",
                            (unsigned long long)s->append);
    }
    if (taken) {
        errno = EEXIST;
        return pl_errprintf(errp, "append: array %llu already has %llu "
                            "elements with indexes in %llu-%llu",
                            (unsigned long long)s->append,
                            (unsigned long long)taken,
                            (unsigned long long)lo, (unsigned long long)hi);
    }
    return 0;
}

/* Say which spec of a request of 'n' an error is about (1-based, as the
 * CLI's --file maps it back to a line). */
static void name_spec(struct pl_error *err, uint32_t i, uint32_t n)
{
    int saved = errno;
    struct pl_error e2;

    if (n > 1) {
        pl_errprintf(&e2, "task %u: %s", i + 1, err->text);
        *err = e2;
    }
    errno = saved;
}

/* Store and queue the tasks of every spec, submitted with the key named
 * 'by', into watch 'w' (NULL: none); 'o' is the reply, which lists their
 * ids (o->undo).  0, or -1 with errp: nothing is kept. */
static int store_all(struct pl_daemon *d, struct pl_spec *specs, uint32_t n,
                     const char *by, struct pl_watch *w, struct pl_out *o,
                     struct pl_error *errp)
{
    double t_now = pl_now();

    if (pl_db_savepoint(d->db, errp) < 0) {
        pl_store_text(d, errp);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct pl_spec *s = &specs[i];
        struct pl_deps dp;
        uint64_t first = s->append, cnt = pl_spec_count(s);
        int rc = deps_resolve(d, s, &dp, errp);
        if (rc == 0 && compact(s, &dp, w)) {
            rc = submit_runs(d, s, &dp, t_now, &first, by, o, errp);
            cnt = 0;
        }
        for (uint64_t k = 0; rc == 0 && k < cnt; k++) {
            struct pl_dtask *t = submit_one(d, s, k, &dp, t_now, &first, by,
                                            w, o, errp);
            if (!t || pl_deps_apply(d, t, &dp) < 0) {
                if (t) {
                    errno = ENOMEM;
                    pl_errprintf(errp, "out of memory");
                }
                rc = -1;
            }
        }
        pl_deps_clear(&dp);
        if (rc < 0) {
            /* the whole submit fails: undo this request's tasks */
            name_spec(errp, i, n);
            pl_db_savepoint_end(d->db, false, NULL);
            pl_store_text(d, errp);
            return -1;
        }
    }
    if (pl_db_savepoint_end(d->db, true, errp) < 0) {
        pl_store_text(d, errp);
        return -1;
    }
    return 0;
}

void pl_submit(struct pl_daemon *d, const struct pl_req *r,
               const struct pl_msg *m)
{
    const msgpack_object *arr;
    struct pl_error err;
    struct pl_spec *specs = NULL;
    uint32_t n = 0, i;
    uint64_t total = 0, bytes = 0, more = 0;
    struct pl_out *o = NULL;
    struct pl_watch *w = NULL;
    char watch[PL_WATCH_TOKEN_MAX + 1];

    if (d->stopping) {
        pl_out_err(d, r, ESHUTDOWN, "the pilot is shutting down");
        return;
    }
    if (pl_store_refused(d, r))
        return;
    if (pl_submit_decode(m->body, &arr, &err) < 0
        || pl_submit_watch_decode(m->body, watch, &err) < 0)
        goto bad;
    n = arr->via.array.size;
    if (!(specs = calloc(n, sizeof(*specs))))
        goto nomem;
    /* check every spec before storing any: bad input changes nothing.
     * A retry alone in its request makes at most PL_SUBMIT_MAX_TASKS
     * tasks and says where the next request goes on ('more'). */
    for (i = 0; i < n; i++) {
        if (spec_parse(d, &arr->via.array.ptr[i], &specs[i], &err) < 0
            || (specs[i].retry
                && retry_resolve(d, &specs[i],
                                 n == 1 ? pl_spec_submit_cap(&specs[i])
                                        : UINT64_MAX,
                                 &more, &err) < 0)
            || (specs[i].append && append_check(d, &specs[i], &err) < 0)) {
            name_spec(&err, i, n);
            goto bad;
        }
        total += pl_spec_count(&specs[i]);
        bytes += pl_spec_count(&specs[i]) * pl_spec_store_bytes(&specs[i]);
    }
    /* the tasks of one request are stored in one turn of the loop */
    if (total > PL_SUBMIT_MAX_TASKS) {
        errno = E2BIG;
        pl_errprintf(&err, "%llu tasks in one request; at most %d (send the "
                     "rest in more requests, the elements of an array with "
                     "'append')", (unsigned long long)total,
                     PL_SUBMIT_MAX_TASKS);
        goto bad;
    }
    if (total > 1 && bytes > PL_SUBMIT_MAX_BYTES) {
        errno = E2BIG;
        pl_errprintf(&err, "%llu bytes of commands in one request; at most "
                     "%d unless it makes one task (send the rest in more "
                     "requests, the elements of an array with 'append')",
                     (unsigned long long)bytes, PL_SUBMIT_MAX_BYTES);
        goto bad;
    }
    /* the tasks join the watch as they are made: no end can come between
     * the submit and a watch of its ids */
    if (watch[0] && !(w = pl_watch_for_submit(d, r, watch, total, &err)))
        goto bad;
    if (!(o = pl_out_new(d->csock, r->rid, r->ridlen))
        || !(o->undo = calloc(total, sizeof(*o->undo))))
        goto nomem;
    o->seq = r->seq;
    if (store_all(d, specs, n, r->key ? r->key->name : NULL, w, o, &err)
        < 0) {
        /* what was made of it is forgotten; the reply says why */
        pl_out_undo(d, o, err.text, errno ? errno : EIO);
        pl_out_push(d, o);
        goto done;
    }
    struct pl_wmap data;
    pl_wbuf_reply(&o->w, r->seq, 0, NULL);
    pl_wmap_begin(&o->w, &data);
    pl_wm_uintv(&data, "ids", o->undo, (uint32_t)o->nundo);
    if (more)
        pl_wm_uint(&data, "more", more);
    o->needs_commit = true;
    pl_out_push(d, o);
    d->want_sched = true;
    pl_log(LOG_INFO, "submitted %zu tasks (%llu..%llu)", o->nundo,
           (unsigned long long)o->undo[0],
           (unsigned long long)o->undo[o->nundo - 1]);
    goto done;
nomem:
    errno = ENOMEM;
    pl_errprintf(&err, "out of memory");
bad:
    pl_out_err(d, r, errno ? errno : EINVAL, err.text);
    if (o)
        pl_out_free(o);
done:
    for (i = 0; specs && i < n; i++)
        pl_spec_clear(&specs[i]);
    free(specs);
}
