/* daemon/db_task.c - SQLite state: the task rows, as pilotd finds and
 * reloads them (db_insert.c inserts them) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "daemon/db.h"
#include "daemon/db_private.h"
#include "proto/log.h"
#include "proto/state.h"
#include "proto/strv.h"

/* ------------------------------------------------------------ JSON text */

/* A JSON array of strings as a new vector, or NULL (ENOMEM, or EINVAL:
 * not an array of strings). */
static char **strv_json(const char *text)
{
    json_t *a = json_loads(text, 0, NULL), *e;
    char **v = NULL;
    size_t i;

    errno = EINVAL;
    if (!json_is_array(a))
        goto done;
    if (!(v = calloc(json_array_size(a) + 1, sizeof(*v)))) {
        errno = ENOMEM;
        goto done;
    }
    json_array_foreach(a, i, e) {
        if (!json_is_string(e)) {
            pl_strv_free(v);
            v = NULL;
            goto done;
        }
        if (!(v[i] = strdup(json_string_value(e)))) {
            pl_strv_free(v);
            v = NULL;
            errno = ENOMEM;
            goto done;
        }
    }
done:
    json_decref(a);
    return v;
}

/* The 'after' column back into *v (malloc'd, *n).  0, or -1 (errno). */
static int after_json(const char *text, struct pl_db_dep **v, uint32_t *n)
{
    json_t *a = json_loads(text, 0, NULL), *e;
    size_t i;

    *v = NULL;
    *n = 0;
    if (!json_is_array(a)) {
        json_decref(a);
        errno = EINVAL;
        return -1;
    }
    if (json_array_size(a)
        && !(*v = calloc(json_array_size(a), sizeof(**v)))) {
        json_decref(a);
        errno = ENOMEM;
        return -1;
    }
    json_array_foreach(a, i, e) {
        (*v)[i] = (struct pl_db_dep){
            .id = (uint64_t)json_integer_value(json_array_get(e, 0)),
            .any = json_integer_value(json_array_get(e, 1)) != 0,
            .one = json_integer_value(json_array_get(e, 2)) != 0,
        };
    }
    *n = (uint32_t)json_array_size(a);
    json_decref(a);
    return 0;
}

static void row_clear(struct pl_db_row *r)
{
    pl_spec_clear(&r->spec);
    free(r->after);
    r->after = NULL;
    r->nafter = 0;
}

/* ------------------------------------------------------------ task rows */

int pl_db_task_array(struct pl_db *db, uint64_t id, uint64_t index,
                     struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_ARRAY];

    if (db->failed)
        return db_refuse(db, errp);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)index);
    return db_step(db, ST_ARRAY, errp);
}

long pl_db_array_failed(struct pl_db *db, uint64_t id, uint64_t **index,
                        uint64_t *nindex, uint64_t *live,
                        struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    uint64_t *v = NULL, n = 0, cap = 0;
    long count = 0;
    int rc;

    db_flush(db, NULL); /* the batch's writes so far */

    *live = 0;
    if (sqlite3_prepare_v2(db->h, "SELECT array_index, state FROM tasks "
                                  "WHERE array_id = ?1 ORDER BY id", -1, &st,
                           NULL) != SQLITE_OK)
        return db_err(db, errp, "read an array");
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int state = pl_state_parse((const char *)sqlite3_column_text(st, 1));
        count++;
        if (!pl_state_final(state))
            (*live)++;
        if (state != PL_ST_FAILED && state != PL_ST_TIMEOUT)
            continue;
        if (n == cap) {
            uint64_t *nv;
            cap = cap ? cap * 2 : 256;
            if (!(nv = realloc(v, cap * sizeof(*nv)))) {
                free(v);
                sqlite3_finalize(st);
                errno = ENOMEM;
                return pl_errprintf(errp, "out of memory");
            }
            v = nv;
        }
        v[n++] = (uint64_t)sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        free(v);
        return db_err(db, errp, "read an array");
    }
    *index = v;
    *nindex = n;
    return count;
}

int pl_db_array_range(struct pl_db *db, uint64_t id, uint64_t lo,
                      uint64_t hi, uint64_t *taken, struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    int rc, is = 0;

    db_flush(db, NULL); /* the batch's writes so far */

    *taken = 0;
    /* element 0 is the one whose array_id is its own id; the count uses
     * the index tasks_elem */
    if (sqlite3_prepare_v2(db->h, "SELECT (SELECT array_id = id FROM tasks "
                                  "WHERE id = ?1), (SELECT count(*) FROM "
                                  "tasks WHERE array_id = ?1 AND array_index "
                                  "BETWEEN ?2 AND ?3)", -1, &st, NULL)
        != SQLITE_OK)
        return db_err(db, errp, "read an array");
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)lo);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)hi);
    if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        is = sqlite3_column_int(st, 0) == 1;
        *taken = (uint64_t)sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW)
        return db_err(db, errp, "read an array");
    return is;
}

long pl_db_array_members(struct pl_db *db, uint64_t id,
                         int (*cb)(uint64_t id, int state, void *arg),
                         void *arg, struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_MEMBERS];
    long n = 0;
    int rc;

    db_flush(db, NULL); /* the batch's writes so far */

    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        n++;
        if (cb((uint64_t)sqlite3_column_int64(st, 0),
               pl_state_parse((const char *)sqlite3_column_text(st, 1)),
               arg) < 0) {
            pl_errprintf(errp, "out of memory");
            n = -1;
            break;
        }
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        db_err(db, errp, "list an array");
        n = -1;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return n;
}

int pl_db_placement(struct pl_db *db, uint64_t id, uint32_t attempt,
                    uint32_t ranks, pl_db_place_f cb, void *arg,
                    struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    int rc;
    /* one rank: the task's row; more: each rank's 'assigned' event */
    const char *q = ranks == 1
        ? "SELECT 0, node, cores, gpus FROM tasks WHERE id = ?1"
        : "SELECT rank, node, cores, gpus FROM events WHERE task = ?1 AND "
          "attempt = ?2 AND rank IS NOT NULL AND state = 'assigned' "
          "ORDER BY id";

    db_flush(db, NULL); /* the batch's writes so far */
    if (sqlite3_prepare_v2(db->h, q, -1, &st, NULL) != SQLITE_OK)
        return db_err(db, errp, "read placement");
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    if (ranks != 1)
        sqlite3_bind_int64(st, 2, (sqlite3_int64)attempt);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sqlite3_int64 r = sqlite3_column_int64(st, 0);
        const char *node = (const char *)sqlite3_column_text(st, 1);
        if (r < 0 || r >= ranks || !node)
            continue;
        cb((uint32_t)r, node, (const char *)sqlite3_column_text(st, 2),
           (const char *)sqlite3_column_text(st, 3), arg);
    }
    if (rc != SQLITE_DONE) {
        db_err(db, errp, "read placement");
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return 0;
}

/* A row of the live tasks' query as a struct pl_db_row.  0, or -1
 * (errno: ENOMEM, or EINVAL: its argv is not a JSON array of strings). */
static int row_read(sqlite3_stmt *st, struct pl_db_row *r)
{
    const char *name = (const char *)sqlite3_column_text(st, 2);
    const char *argv = (const char *)sqlite3_column_text(st, 3);
    const char *env = (const char *)sqlite3_column_text(st, 4);
    const char *cwd = (const char *)sqlite3_column_text(st, 5);
    const char *comm = (const char *)sqlite3_column_text(st, 15);
    const char *launcher = (const char *)sqlite3_column_text(st, 16);
    const char *after = (const char *)sqlite3_column_text(st, 17);
    const char *pool = (const char *)sqlite3_column_text(st, 22);
    const char *fn = (const char *)sqlite3_column_text(st, 23);
    struct pl_spec *s = &r->spec;

    memset(r, 0, sizeof(*r));
    pl_spec_init(s);
    r->id = (uint64_t)sqlite3_column_int64(st, 0);
    r->state = pl_state_parse((const char *)sqlite3_column_text(st, 1));
    s->ranks = (uint64_t)sqlite3_column_int64(st, 6);
    s->cpr = (uint64_t)sqlite3_column_int64(st, 7);
    s->gpr = (uint64_t)sqlite3_column_int64(st, 8);
    s->retries = (uint64_t)sqlite3_column_int64(st, 9);
    s->has_ranks = s->has_retries = true;
    s->timeout = sqlite3_column_double(st, 10);
    r->attempts = (uint32_t)sqlite3_column_int64(st, 11);
    s->nodes = (uint64_t)sqlite3_column_int64(st, 12);
    s->rpn = (uint64_t)sqlite3_column_int64(st, 13);
    s->exclusive = sqlite3_column_int(st, 14) != 0;
    s->comm = comm && pl_comm_parse(comm) > 0 ? pl_comm_parse(comm)
                                              : PL_COMM_NONE;
    s->launcher = launcher && pl_launcher_parse(launcher) > 0
                      ? pl_launcher_parse(launcher)
                      : PL_LAUNCHER_UNSET;
    r->array_id = (uint64_t)sqlite3_column_int64(st, 18);
    r->array_index = (uint64_t)sqlite3_column_int64(st, 19);
    s->priority = sqlite3_column_int64(st, 20);
    s->output_limit = (uint64_t)sqlite3_column_int64(st, 21); /* NULL: 0 */
    s->fn = fn && pl_fn_parse(fn) > 0 ? pl_fn_parse(fn) : PL_FN_NONE;
    r->nrefs = (uint32_t)sqlite3_column_int64(st, 24); /* NULL: 0 */
    if (r->nrefs > PL_SPEC_MAX_REFS)
        r->nrefs = PL_SPEC_MAX_REFS;
    s->vetted = (uint64_t)sqlite3_column_int64(st, 25); /* NULL: 0 */
    if (s->vetted > PL_SPEC_MAX_VETTED)
        s->vetted = PL_SPEC_MAX_VETTED;
    errno = EINVAL;
    if (!argv || !(s->argv = strv_json(argv)) || !s->argv[0]
        || (env && !(s->env = strv_json(env)))
        || (cwd && !(s->cwd = strdup(cwd)))
        || (name && !(s->name = strdup(name)))
        || (pool && !(s->pool = strdup(pool)))
        || (after && after_json(after, &r->after, &r->nafter) < 0)) {
        int saved = errno;
        row_clear(r);
        errno = saved;
        return -1;
    }
    return 0;
}

/* The rows of 'where' (a WHERE clause, with an INDEXED BY before it
 * where SQLite would choose badly; ids 'lo' to 'hi' bound as ?1, ?2 when
 * it names them) in id order, each to 'cb'. */
static int load_rows(struct pl_db *db, const char *where, uint64_t lo,
                     uint64_t hi, pl_db_live_f cb, void *arg,
                     struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    struct pl_db_row row;
    char sql[1024];
    int rc;

    db_flush(db, NULL); /* the batch's writes so far */

    snprintf(sql, sizeof(sql),
             "SELECT id, state, name, argv, env, cwd, ranks, "
             "cores_per_rank, gpus_per_rank, retries, timeout, "
             "attempts, nodes, ranks_per_node, exclusive, comm, "
             "launcher, after, array_id, array_index, priority, "
             "output_limit, pool, fn, (SELECT "
             "json_array_length(refs) FROM pyinputs WHERE "
             "task = tasks.id), vetted FROM tasks %s ORDER BY id",
             where);
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK)
        return db_err(db, errp, "load tasks");
    if (sqlite3_bind_parameter_count(st) == 2) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)lo);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)hi);
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (row_read(st, &row) < 0) {
            if (errno == ENOMEM)
                goto nomem;
            pl_log(LOG_ERR, "task %lld: its stored command cannot be read: "
                   "left as it is", (long long)sqlite3_column_int64(st, 0));
            continue;
        }
        int cbrc = cb(&row, arg);
        row_clear(&row);
        if (cbrc < 0)
            goto nomem;
    }
    if (rc != SQLITE_DONE) {
        db_err(db, errp, "load tasks");
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return 0;
nomem:
    sqlite3_finalize(st);
    return pl_errprintf(errp, "cannot rebuild the queue: %s",
                        strerror(errno));
}

#define LIVE "WHERE state NOT IN ('done', 'failed', 'canceled', 'timeout')"

int pl_db_load_live(struct pl_db *db, pl_db_live_f cb, void *arg,
                    struct pl_error *errp)
{
    return load_rows(db, LIVE, 0, 0, cb, arg, errp);
}

int pl_db_load_unqueued(struct pl_db *db, bool placed, pl_db_live_f cb,
                        void *arg, struct pl_error *errp)
{
    /* indexed (NOT IN would read every row), each part in id order: a
     * waiting task's dependencies are loaded before it (they have
     * smaller ids, or are queued) */
    if (placed)
        return load_rows(db, "WHERE state IN ('assigned', 'running')", 0, 0,
                         cb, arg, errp);
    return load_rows(db, "INDEXED BY tasks_fn WHERE fn IS NOT NULL AND "
                     "state = 'queued'", 0, 0, cb, arg, errp) < 0
               || load_rows(db, "WHERE state = 'waiting'", 0, 0, cb, arg,
                            errp) < 0
               ? -1 : 0;
}

int pl_db_load_range(struct pl_db *db, uint64_t lo, uint64_t hi,
                     pl_db_live_f cb, void *arg, struct pl_error *errp)
{
    return load_rows(db, "NOT INDEXED WHERE id BETWEEN ?1 AND ?2 AND state = "
                     "'queued'", lo, hi,
                     cb, arg, errp);
}

int pl_db_queue_scan(struct pl_db *db, pl_db_queued_f cb, void *arg,
                     struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    struct prio { uint64_t id; int64_t prio; } *p = NULL;
    size_t np = 0, cap = 0, at = 0;
    int rc;

    /* the few with a priority (index tasks_prio), then every queued id
     * (index tasks_state alone: no row is read) */
    if (sqlite3_prepare_v2(db->h, "SELECT id, priority FROM tasks INDEXED BY "
                           "tasks_prio WHERE priority != 0 AND state = "
                           "'queued' ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return db_err(db, errp, "scan the queue");
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (pl_grow(&p, &cap, np, 1, sizeof(*p)) < 0)
            goto nomem;
        p[np].id = (uint64_t)sqlite3_column_int64(st, 0);
        p[np++].prio = sqlite3_column_int64(st, 1);
    }
    if (rc != SQLITE_DONE)
        goto dberr;
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db->h, "SELECT id FROM tasks WHERE state = "
                           "'queued' ORDER BY id", -1, &st, NULL)
        != SQLITE_OK) {
        st = NULL;
        goto dberr;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        uint64_t id = (uint64_t)sqlite3_column_int64(st, 0);
        while (at < np && p[at].id < id)
            at++;
        if (cb(at < np && p[at].id == id ? p[at].prio : 0, id, arg) < 0)
            goto nomem;
    }
    if (rc != SQLITE_DONE)
        goto dberr;
    sqlite3_finalize(st);
    free(p);
    return 0;
dberr:
    db_err(db, errp, "scan the queue");
    sqlite3_finalize(st);
    free(p);
    return -1;
nomem:
    sqlite3_finalize(st);
    free(p);
    return pl_errprintf(errp, "cannot rebuild the queue: %s",
                        strerror(errno));
}

uint64_t pl_db_task_by_name(struct pl_db *db, const char *name,
                            struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_BY_NAME];
    uint64_t id = 0;
    int rc;

    db_flush(db, NULL); /* the batch's writes so far */

    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if ((rc = sqlite3_step(st)) == SQLITE_ROW)
        id = (uint64_t)sqlite3_column_int64(st, 0);
    else if (rc != SQLITE_DONE) {
        db_err(db, errp, "task by name");
        id = UINT64_MAX;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return id;
}

int pl_db_task_not_by(struct pl_db *db, const uint64_t *ids, size_t n,
                      const char *name, uint64_t *other, char *by,
                      size_t bylen, struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_DONE;

    db_flush(db, NULL); /* the batch's writes so far */

    *other = 0;
    by[0] = '\0';
    /* once per cancel, not per task: no statement kept for it */
    if (sqlite3_prepare_v2(db->h, "SELECT submitted_by FROM tasks WHERE "
                                  "id = ?1", -1, &st, NULL) != SQLITE_OK)
        return db_err(db, errp, "read who submitted a task");
    for (size_t i = 0; i < n && !*other; i++) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)ids[i]);
        if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const char *s = (const char *)sqlite3_column_text(st, 0);
            if (!s || strcmp(s, name) != 0) {
                *other = ids[i];
                snprintf(by, bylen, "%s", s ? s : "");
            }
            rc = SQLITE_DONE;
        }
        else if (rc != SQLITE_DONE)
            break;
        sqlite3_reset(st);
    }
    if (rc != SQLITE_DONE) {
        db_err(db, errp, "read who submitted a task");
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return 0;
}

int pl_db_task_state(struct pl_db *db, uint64_t id, struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_STATE];
    int rc, state = 0;

    db_flush(db, NULL); /* the batch's writes so far */

    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    if ((rc = sqlite3_step(st)) == SQLITE_ROW)
        state = pl_state_parse((const char *)sqlite3_column_text(st, 0));
    else if (rc != SQLITE_DONE) {
        db_err(db, errp, "task state");
        state = -1;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return state;
}

/* ------------------------------------------------------------ ends */

int pl_db_max_end_seq(struct pl_db *db, uint64_t *seq, struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    int rc;

    db_flush(db, NULL); /* the batch's writes so far */

    *seq = 0;
    if (sqlite3_prepare_v2(db->h, "SELECT max(end_seq) FROM tasks WHERE "
                           "end_seq IS NOT NULL", -1, &st,
                           NULL) != SQLITE_OK)
        return db_err(db, errp, "read the last end seq");
    if ((rc = sqlite3_step(st)) == SQLITE_ROW)
        *seq = (uint64_t)sqlite3_column_int64(st, 0); /* NULL: 0 */
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW)
        return db_err(db, errp, "read the last end seq");
    return 0;
}

long pl_db_ends(struct pl_db *db, uint64_t after, uint64_t upto,
                uint32_t limit, pl_db_end_f cb, void *arg, uint64_t *last,
                struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_ENDS];
    long n = 0;
    int rc;

    db_flush(db, NULL); /* the batch's writes so far */

    sqlite3_bind_int64(st, 1, (sqlite3_int64)after);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)upto);
    sqlite3_bind_int64(st, 3, limit);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct pl_end e = {
            .id = (uint64_t)sqlite3_column_int64(st, 0),
            .state = pl_state_parse((const char *)sqlite3_column_text(st, 1)),
            .exit_code = sqlite3_column_type(st, 2) == SQLITE_NULL
                             ? -1 : sqlite3_column_int(st, 2),
            .signal = sqlite3_column_type(st, 3) == SQLITE_NULL
                          ? -1 : sqlite3_column_int(st, 3),
            .reason = (char *)sqlite3_column_text(st, 4),
            .end_time = sqlite3_column_double(st, 5),
            .seq = (uint64_t)sqlite3_column_int64(st, 6),
        };
        n++;
        *last = e.seq;
        int kind = sqlite3_column_int(st, 7);
        if (cb(&e, kind == 1 ? PL_FN_POOL : kind == 2 ? PL_FN_PYCALL
                                                      : PL_FN_NONE,
               arg) < 0) {
            int saved = errno;
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
            errno = saved;
            return pl_errprintf(errp, "read the ends: %s", strerror(errno));
        }
    }
    if (rc != SQLITE_DONE) {
        db_err(db, errp, "read the ends");
        n = -1;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return n;
}
