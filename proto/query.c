/* proto/query.c - read-only queries of a pilot's state, as JSON values */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/query.h"
#include "proto/state.h"
#include "proto/strv.h"

#define TASK_COLS                                                              \
    "id, name, argv, cwd, ranks, cores_per_rank, gpus_per_rank, timeout, "    \
    "retries, state, reason, node, cores, gpus, attempts, exit_code, "        \
    "signal, submit_time, start_time, end_time, maxrss_kb, nodes, "           \
    "ranks_per_node, exclusive, comm, launcher"

/* The columns schemas 4 to 6 added, and what a database of an older
 * schema (a pilot of an older pilotd, read while down) gives instead. */
#define COLS_V4 ", after, array_id, array_index"
#define COLS_V5 ", priority, tags"
#define COLS_V6 ", submitted_by"
#define NULL_V4 ", NULL AS after, NULL AS array_id, NULL AS array_index"
#define NULL_V5 ", 0 AS priority, NULL AS tags"
#define NULL_V6 ", NULL AS submitted_by"
#define COLS_V8 ", pool, fn"
#define NULL_V8 ", NULL AS pool, NULL AS fn"
#define COLS_V11 ", cpu_user, cpu_sys, gpu_util, gpu_mem_mb, gpu_power_w"
#define NULL_V11 ", NULL AS cpu_user, NULL AS cpu_sys, NULL AS gpu_util, " \
                 "NULL AS gpu_mem_mb, NULL AS gpu_power_w"

/* Whether the tasks table has schema 8's 'fn' (a pilot of an older
 * pilotd, read while down, has not). */
static bool has_fn(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    bool yes = sqlite3_prepare_v2(db, "SELECT fn FROM tasks LIMIT 0", -1,
                                  &st, NULL) == SQLITE_OK;

    sqlite3_finalize(st);
    return yes;
}

/* Prepare "SELECT <task columns> <rest>". */
static int prep_tasks(sqlite3 *db, const char *rest, sqlite3_stmt **st)
{
    static const char *const cols[] = {
        TASK_COLS COLS_V4 COLS_V5 COLS_V6 COLS_V8 COLS_V11,
        TASK_COLS COLS_V4 COLS_V5 COLS_V6 COLS_V8 NULL_V11,
        TASK_COLS COLS_V4 COLS_V5 COLS_V6 NULL_V8 NULL_V11,
        TASK_COLS COLS_V4 COLS_V5 NULL_V6 NULL_V8 NULL_V11,
        TASK_COLS COLS_V4 NULL_V5 NULL_V6 NULL_V8 NULL_V11,
        TASK_COLS NULL_V4 NULL_V5 NULL_V6 NULL_V8 NULL_V11,
    };
    char sql[2048];

    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
        snprintf(sql, sizeof(sql), "SELECT %s %s", cols[i], rest);
        if (sqlite3_prepare_v2(db, sql, -1, st, NULL) == SQLITE_OK)
            return 0;
    }
    return -1;
}

int pl_query_dberr(sqlite3 *db, struct pl_error *errp, const char *what)
{
    pl_errprintf(errp, "%s: %s", what, sqlite3_errmsg(db));
    errno = EIO;
    return -1;
}

sqlite3 *pl_query_open(const char *path, struct pl_error *errp)
{
    sqlite3 *db = NULL;

    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        pl_errprintf(errp, "cannot open %s: %s", path,
                     db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        errno = EIO;
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    return db;
}

json_t *pl_query_intlist(const char *s)
{
    json_t *a = json_array();

    while (a && s && *s) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s)
            break;
        json_array_append_new(a, json_integer(v));
        s = *end == ',' ? end + 1 : end;
    }
    return a;
}

json_t *pl_query_col(sqlite3_stmt *st, int i)
{
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER:
        return json_integer(sqlite3_column_int64(st, i));
    case SQLITE_FLOAT:
        return json_real(sqlite3_column_double(st, i));
    case SQLITE_TEXT:
        return json_string((const char *)sqlite3_column_text(st, i));
    default:
        return json_null();
    }
}

/* The stored [[id, any]...] as [{id, any}...]; none: []. */
static json_t *after_json(const char *text)
{
    json_t *in = text ? json_loads(text, 0, NULL) : NULL, *out = json_array();
    size_t i;
    json_t *e;

    json_array_foreach(in, i, e) {
        json_array_append_new(out, json_pack("{s:I, s:b}", "id",
                                             json_integer_value(
                                                 json_array_get(e, 0)),
                                             "any",
                                             (int)json_integer_value(
                                                 json_array_get(e, 1))));
    }
    json_decref(in);
    return out;
}

/* derived: the CPU efficiency of the last attempt, as Slurm's seff
 * gives it: CPU seconds (user + system) over cores x wall, where cores
 * = ranks x cores_per_rank; null when a figure is missing */
static void cpu_eff(json_t *t)
{
    const json_t *u = json_object_get(t, "cpu_user");
    const json_t *s = json_object_get(t, "cpu_sys");
    double wall = json_number_value(json_object_get(t, "wall"));
    double cores = (double)json_integer_value(json_object_get(t, "ranks"))
                   * (double)json_integer_value(json_object_get(t,
                                                "cores_per_rank"));

    if (json_is_number(u) && json_is_number(s) && wall > 0 && cores > 0)
        json_object_set_new(t, "cpu_eff",
                            json_real((json_number_value(u)
                                       + json_number_value(s))
                                      / (cores * wall)));
    else
        json_object_set_new(t, "cpu_eff", json_null());
}

static json_t *task_row(sqlite3_stmt *st)
{
    json_t *t = json_object();
    int n = sqlite3_column_count(st);

    if (!t)
        return NULL;
    for (int i = 0; i < n; i++) {
        const char *name = sqlite3_column_name(st, i);
        json_t *v;
        if (!strcmp(name, "argv")) {
            const char *text = (const char *)sqlite3_column_text(st, i);
            v = text ? json_loads(text, 0, NULL) : NULL;
            if (!v)
                v = json_array();
        }
        else if (!strcmp(name, "after"))
            v = after_json((const char *)sqlite3_column_text(st, i));
        else if (!strcmp(name, "tags")) {
            const char *text = (const char *)sqlite3_column_text(st, i);
            v = text ? json_loads(text, 0, NULL) : NULL;
            if (!json_is_object(v)) {
                json_decref(v);
                v = json_object();
            }
        }
        else if (!strcmp(name, "exclusive"))
            v = json_boolean(sqlite3_column_int(st, i) != 0);
        else if (!strcmp(name, "cores") || !strcmp(name, "gpus"))
            v = pl_query_intlist((const char *)sqlite3_column_text(st, i));
        else
            v = pl_query_col(st, i);
        json_object_set_new(t, name, v);
    }
    /* derived: wall time of the last attempt */
    if (sqlite3_column_type(st, 18) != SQLITE_NULL) {
        double start = sqlite3_column_double(st, 18);
        double end = sqlite3_column_type(st, 19) != SQLITE_NULL
                         ? sqlite3_column_double(st, 19)
                         : -1;
        json_object_set_new(t, "wall", end >= 0 ? json_real(end - start)
                                                : json_null());
    }
    else
        json_object_set_new(t, "wall", json_null());
    cpu_eff(t);
    return t;
}

/* The JSON path of tag key 'k' in the tags column: $."k" (keys are
 * [A-Za-z0-9_.-], nothing to escape). */
static void tag_path(const char *tag, char *buf, size_t len)
{
    size_t klen = strcspn(tag, "=");

    snprintf(buf, len, "$.\"%.*s\"", (int)klen, tag);
}

json_t *pl_query_tasks(sqlite3 *db, const char *state,
                       const char *const *tags, const uint64_t *ids,
                       size_t nids, uint64_t limit, struct pl_error *errp)
{
    return pl_query_tasks_after(db, state, tags, ids, nids, 0, limit, errp);
}

json_t *pl_query_tasks_after(sqlite3 *db, const char *state,
                             const char *const *tags, const uint64_t *ids,
                             size_t nids, uint64_t after, uint64_t limit,
                             struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    json_t *arr = json_array();
    char where[1024], path[128];
    size_t ntags = 0, off, from = 0;
    int rc, par;

    if (!arr)
        goto nomem;
    while (tags && tags[ntags])
        ntags++;
    if (ntags > PL_QUERY_MAX_TAGS) {
        json_decref(arr);
        errno = EINVAL;
        pl_errprintf(errp, "more than %d tags to match", PL_QUERY_MAX_TAGS);
        return NULL;
    }
    if (nids && after) {
        /* the page goes on after the entry 'after' */
        while (from < nids && ids[from] != after)
            from++;
        if (++from >= nids)
            return arr;
    }
    /* ?1 state, ?2 limit, ?3 id (or the id to go on after), then each
     * tag's path (and value) */
    /* a pool's own job is listed by its id alone (docs/pool.md) */
    off = (size_t)snprintf(where, sizeof(where), "FROM tasks WHERE %s%s%s",
                           state ? "state = ?1" : "1",
                           nids ? " AND id = ?3" : " AND id > ?3",
                           nids || !has_fn(db) ? "" : " AND fn IS NOT 'pool'");
    par = 4;
    for (size_t i = 0; i < ntags; i++) {
        bool eq = strchr(tags[i], '=') != NULL;
        off += (size_t)snprintf(where + off, sizeof(where) - off,
                                eq ? " AND json_extract(tags, ?%d) = ?%d"
                                   : " AND json_extract(tags, ?%d) IS NOT "
                                     "NULL", par, par + 1);
        par += eq ? 2 : 1;
    }
    if (!nids)
        snprintf(where + off, sizeof(where) - off, " ORDER BY id LIMIT ?2");
    if (prep_tasks(db, where, &st) < 0)
        goto dberr;
    for (size_t i = from; i < (nids ? nids : 1); i++) {
        sqlite3_reset(st);
        if (state)
            sqlite3_bind_text(st, 1, state, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, limit ? (sqlite3_int64)limit : -1);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)(nids ? ids[i] : after));
        par = 4;
        for (size_t k = 0; k < ntags; k++) {
            const char *eq = strchr(tags[k], '=');
            tag_path(tags[k], path, sizeof(path));
            sqlite3_bind_text(st, par++, path, -1, SQLITE_TRANSIENT);
            if (eq)
                sqlite3_bind_text(st, par++, eq + 1, -1, SQLITE_STATIC);
        }
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            json_array_append_new(arr, task_row(st));
            if (limit && json_array_size(arr) >= limit)
                break;
        }
        if (rc != SQLITE_DONE && rc != SQLITE_ROW)
            goto dberr;
        if (limit && json_array_size(arr) >= limit)
            break;
    }
    sqlite3_finalize(st);
    return arr;
dberr:
    pl_query_dberr(db, errp, "list tasks");
    sqlite3_finalize(st);
    json_decref(arr);
    return NULL;
nomem:
    pl_errprintf(errp, "out of memory");
    errno = ENOMEM;
    return NULL;
}

struct resolved {
    uint64_t *v;
    size_t n, cap;
};

static int push(struct resolved *r, uint64_t id)
{
    if (r->n == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 64;
        uint64_t *nv = realloc(r->v, ncap * sizeof(*nv));
        if (!nv)
            return -1;
        r->v = nv;
        r->cap = ncap;
    }
    r->v[r->n++] = id;
    return 0;
}

struct idpos {
    uint64_t id;
    size_t pos;
};

static int cmp_idpos(const void *a, const void *b)
{
    const struct idpos *x = a, *y = b;

    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Drop repeated ids, keeping the first of each. */
static int dedupe(struct resolved *r)
{
    struct idpos *ip;
    bool *drop;
    size_t k = 0;

    if (r->n < 2)
        return 0;
    ip = malloc(r->n * sizeof(*ip));
    drop = calloc(r->n, sizeof(*drop));
    if (!ip || !drop) {
        free(ip);
        free(drop);
        return -1;
    }
    for (size_t i = 0; i < r->n; i++)
        ip[i] = (struct idpos){ r->v[i], i };
    qsort(ip, r->n, sizeof(*ip), cmp_idpos);
    for (size_t i = 1; i < r->n; i++)
        if (ip[i].id == ip[i - 1].id)
            drop[ip[i].pos] = true;
    for (size_t i = 0; i < r->n; i++)
        if (!drop[i])
            r->v[k++] = r->v[i];
    r->n = k;
    free(ip);
    free(drop);
    return 0;
}

int pl_query_resolve(sqlite3 *db, const uint64_t *ids, size_t nids,
                     const uint64_t *elems, size_t nelems, bool expand,
                     uint64_t **out, size_t *nout, struct pl_error *errp)
{
    sqlite3_stmt *one = NULL, *all = NULL, *elem = NULL;
    struct resolved r = { 0 };
    int rc, ret = -1;

    if (sqlite3_prepare_v2(db, "SELECT array_id FROM tasks WHERE id = ?1",
                           -1, &one, NULL) != SQLITE_OK) {
        /* a schema 3 database: no arrays, every id is a task */
        if (nelems) {
            errno = ENOENT;
            pl_errprintf(errp, "no task %llu.%llu (this pilot has no "
                         "arrays)", (unsigned long long)elems[0],
                         (unsigned long long)elems[1]);
            goto done;
        }
        expand = false;
    }
    /* an array's elements in the order of their indexes: the order of
     * the index tasks_elem, no sort (ORDER BY id sorted a million ids:
     * 0.4 s); the ids of an array's elements grow with their indexes */
    else if (sqlite3_prepare_v2(db, "SELECT id FROM tasks WHERE array_id = "
                                    "?1 ORDER BY array_index", -1, &all, NULL)
                 != SQLITE_OK
             || sqlite3_prepare_v2(db, "SELECT id FROM tasks WHERE array_id "
                                       "= ?1 AND array_index = ?2", -1, &elem,
                                   NULL) != SQLITE_OK)
        goto dberr;
    for (size_t i = 0; i < nids; i++) {
        if (!expand) {
            if (push(&r, ids[i]) < 0)
                goto nomem;
            continue;
        }
        sqlite3_reset(one);
        sqlite3_bind_int64(one, 1, (sqlite3_int64)ids[i]);
        rc = sqlite3_step(one);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            goto dberr;
        if (rc == SQLITE_DONE
            || (uint64_t)sqlite3_column_int64(one, 0) != ids[i]) {
            if (push(&r, ids[i]) < 0) /* a task, or unknown */
                goto nomem;
            continue;
        }
        /* an array's id: all its elements */
        sqlite3_reset(all);
        sqlite3_bind_int64(all, 1, (sqlite3_int64)ids[i]);
        while ((rc = sqlite3_step(all)) == SQLITE_ROW)
            if (push(&r, (uint64_t)sqlite3_column_int64(all, 0)) < 0)
                goto nomem;
        if (rc != SQLITE_DONE)
            goto dberr;
    }
    for (size_t i = 0; i + 1 < nelems * 2; i += 2) {
        sqlite3_reset(elem);
        sqlite3_bind_int64(elem, 1, (sqlite3_int64)elems[i]);
        sqlite3_bind_int64(elem, 2, (sqlite3_int64)elems[i + 1]);
        rc = sqlite3_step(elem);
        if (rc == SQLITE_DONE) {
            errno = ENOENT;
            pl_errprintf(errp, "no task %llu.%llu (array %llu has no "
                         "element %llu)", (unsigned long long)elems[i],
                         (unsigned long long)elems[i + 1],
                         (unsigned long long)elems[i],
                         (unsigned long long)elems[i + 1]);
            goto done;
        }
        if (rc != SQLITE_ROW)
            goto dberr;
        if (push(&r, (uint64_t)sqlite3_column_int64(elem, 0)) < 0)
            goto nomem;
    }
    if (dedupe(&r) < 0)
        goto nomem;
    *out = r.v;
    *nout = r.n;
    r.v = NULL;
    ret = 0;
    goto done;
nomem:
    errno = ENOMEM;
    pl_errprintf(errp, "out of memory");
    goto done;
dberr:
    pl_query_dberr(db, errp, "resolve task ids");
done:
    sqlite3_finalize(one);
    sqlite3_finalize(all);
    sqlite3_finalize(elem);
    free(r.v);
    return ret;
}

/* A Python call's result (schema 9's results table: none in an older
 * pilot's): result_status, result_size, result_repr, and the pickle as
 * base64 in 'result' or its file in 'result_file'. */
static void add_result(sqlite3 *db, uint64_t id, json_t *t)
{
    sqlite3_stmt *st = NULL;

    if (sqlite3_prepare_v2(db, "SELECT status, size, data, file, repr "
                               "FROM results WHERE task = ?1", -1, &st,
                               NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return;
    }
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        json_object_set_new(t, "result_status", pl_query_col(st, 0));
        json_object_set_new(t, "result_size", pl_query_col(st, 1));
        json_object_set_new(t, "result_repr", pl_query_col(st, 4));
        if (sqlite3_column_type(st, 2) == SQLITE_BLOB) {
            char *b64 = pl_b64_encode(sqlite3_column_blob(st, 2),
                                      (size_t)sqlite3_column_bytes(st, 2));
            json_object_set_new(t, "result", b64 ? json_string(b64)
                                                 : json_null());
            free(b64);
        }
        else
            json_object_set_new(t, "result_file", pl_query_col(st, 3));
    }
    sqlite3_finalize(st);
}

json_t *pl_query_task(sqlite3 *db, uint64_t id, struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    json_t *t = NULL, *ev = NULL;
    int rc;

    if (prep_tasks(db, ", env FROM tasks WHERE id = ?1", &st) < 0)
        goto dberr;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    if ((rc = sqlite3_step(st)) == SQLITE_DONE) {
        sqlite3_finalize(st);
        errno = ENOENT;
        pl_errprintf(errp, "no task %llu", (unsigned long long)id);
        return NULL;
    }
    if (rc != SQLITE_ROW)
        goto dberr;
    t = task_row(st);
    json_t *env = json_object_get(t, "env");
    if (json_is_string(env)) {
        json_t *parsed = json_loads(json_string_value(env), 0, NULL);
        json_object_set_new(t, "env", parsed ? parsed : json_null());
    }
    sqlite3_finalize(st);
    st = NULL;
    /* schema 13: a task queued at its submission has no row for that
     * event; it is made from submit_time unless a row has it (a task
     * submitted waiting, or one of schema 12) */
    if (sqlite3_prepare_v2(db, "SELECT time, state, attempt, node, cores, "
                               "gpus, detail, rank FROM (SELECT 0 AS k, "
                               "submit_time AS time, 'queued' AS state, 0 "
                               "AS attempt, NULL AS node, NULL AS cores, "
                               "NULL AS gpus, NULL AS detail, NULL AS rank "
                               "FROM tasks t WHERE t.id = ?1 AND NOT EXISTS "
                               "(SELECT 1 FROM events e WHERE e.task = ?1 "
                               "AND e.rank IS NULL AND e.time = "
                               "t.submit_time AND e.state IN ('queued', "
                               "'waiting')) UNION ALL SELECT id, time, "
                               "state, attempt, node, cores, gpus, detail, "
                               "rank FROM events WHERE task = ?1) ORDER BY k",
                           -1, &st, NULL) != SQLITE_OK)
        goto dberr;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    ev = json_array();
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *e = json_object();
        json_object_set_new(e, "time", pl_query_col(st, 0));
        json_object_set_new(e, "state", pl_query_col(st, 1));
        json_object_set_new(e, "attempt", pl_query_col(st, 2));
        json_object_set_new(e, "node", pl_query_col(st, 3));
        json_object_set_new(e, "cores",
            pl_query_intlist((const char *)sqlite3_column_text(st, 4)));
        json_object_set_new(e, "gpus",
            pl_query_intlist((const char *)sqlite3_column_text(st, 5)));
        json_object_set_new(e, "detail", pl_query_col(st, 6));
        if (sqlite3_column_type(st, 7) != SQLITE_NULL)
            json_object_set_new(e, "rank", pl_query_col(st, 7));
        json_array_append_new(ev, e);
    }
    if (rc != SQLITE_DONE)
        goto dberr;
    json_object_set_new(t, "events", ev);
    sqlite3_finalize(st);
    st = NULL;
    add_result(db, id, t);
    /* where each rank is (or was, in the last attempt): "placement" */
    json_t *ranks = json_array();
    json_object_set_new(t, "placement", ranks);
    if (json_integer_value(json_object_get(t, "ranks")) <= 1) {
        if (!json_is_null(json_object_get(t, "node"))) {
            json_t *r = json_object();
            json_object_set_new(r, "rank", json_integer(0));
            json_object_set(r, "node", json_object_get(t, "node"));
            json_object_set(r, "cores", json_object_get(t, "cores"));
            json_object_set(r, "gpus", json_object_get(t, "gpus"));
            json_object_set(r, "state", json_object_get(t, "state"));
            json_array_append_new(ranks, r);
        }
        return t;
    }
    if (sqlite3_prepare_v2(db,
            "SELECT a.rank, a.node, a.cores, a.gpus, (SELECT e.state FROM "
            "events e WHERE e.task = a.task AND e.rank = a.rank AND "
            "e.attempt = a.attempt ORDER BY e.id DESC LIMIT 1) FROM events a "
            "WHERE a.task = ?1 AND a.rank IS NOT NULL AND a.state = "
            "'assigned' AND a.attempt = (SELECT max(attempt) FROM events "
            "WHERE task = ?1 AND rank IS NOT NULL) ORDER BY a.rank",
            -1, &st, NULL) != SQLITE_OK)
        goto dberr;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *r = json_object();
        json_object_set_new(r, "rank", pl_query_col(st, 0));
        json_object_set_new(r, "node", pl_query_col(st, 1));
        json_object_set_new(r, "cores",
            pl_query_intlist((const char *)sqlite3_column_text(st, 2)));
        json_object_set_new(r, "gpus",
            pl_query_intlist((const char *)sqlite3_column_text(st, 3)));
        json_object_set_new(r, "state", pl_query_col(st, 4));
        json_array_append_new(ranks, r);
    }
    if (rc != SQLITE_DONE)
        goto dberr;
    sqlite3_finalize(st);
    return t;
dberr:
    pl_query_dberr(db, errp, "show task");
    sqlite3_finalize(st);
    json_decref(t);
    json_decref(ev);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

static bool has_u64(const uint64_t *v, size_t n, uint64_t x)
{
    return n && bsearch(&x, v, n, sizeof(*v), cmp_u64) != NULL;
}

/* Add the states of the tasks 'st' returns (state, count) to 'count'. */
static int add_states(sqlite3_stmt *st, long long *count, long long *total)
{
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int s = pl_state_parse((const char *)sqlite3_column_text(st, 0));
        if (s > 0)
            count[s] += sqlite3_column_int64(st, 1);
        *total += sqlite3_column_int64(st, 1);
    }
    return rc == SQLITE_DONE ? 0 : -1;
}

json_t *pl_query_counts(sqlite3 *db, const uint64_t *ids, size_t nids,
                        struct pl_error *errp)
{
    sqlite3_stmt *st = NULL, *arr = NULL;
    json_t *c = json_object(), *unknown = json_array(), *res = NULL;
    long long count[PL_ST_COUNT] = { 0 };
    long long total = 0;
    uint64_t *u = NULL, *heads = NULL;
    size_t nu = 0, nheads = 0;
    int rc;

    if (!c || !unknown)
        goto nomem;
    if (nids == 0) {
        if (sqlite3_prepare_v2(db, "SELECT state, count(*) FROM tasks "
                                   "GROUP BY state", -1, &st, NULL) != SQLITE_OK
            || add_states(st, count, &total) < 0)
            goto dberr;
        if (has_fn(db)) {
            /* less the pools' own jobs (a partial index: few rows) */
            long long pools[PL_ST_COUNT] = { 0 }, np = 0;
            sqlite3_finalize(st);
            st = NULL;
            if (sqlite3_prepare_v2(db, "SELECT state, count(*) FROM tasks "
                                       "WHERE fn = 'pool' GROUP BY state",
                                   -1, &st, NULL) != SQLITE_OK
                || add_states(st, pools, &np) < 0)
                goto dberr;
            for (int i = 0; i < PL_ST_COUNT; i++)
                count[i] -= pools[i];
            total -= np;
        }
        goto out;
    }
    /* each task once; an array's id counts its elements with one query
     * (a million of them in about 0.3 s, not one lookup each) */
    if (!(u = malloc(nids * sizeof(*u)))
        || !(heads = malloc(nids * sizeof(*heads))))
        goto nomem;
    memcpy(u, ids, nids * sizeof(*u));
    qsort(u, nids, sizeof(*u), cmp_u64);
    for (size_t i = 0; i < nids; i++)
        if (nu == 0 || u[nu - 1] != u[i])
            u[nu++] = u[i];
    if (sqlite3_prepare_v2(db, "SELECT state, array_id FROM tasks WHERE id "
                               "= ?1", -1, &st, NULL) != SQLITE_OK
        && sqlite3_prepare_v2(db, "SELECT state, NULL FROM tasks WHERE id = "
                                  "?1", -1, &st, NULL) != SQLITE_OK)
        goto dberr;
    for (size_t i = 0; i < nu; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, (sqlite3_int64)u[i]);
        if ((rc = sqlite3_step(st)) == SQLITE_DONE) {
            json_array_append_new(unknown, json_integer((json_int_t)u[i]));
            continue;
        }
        if (rc != SQLITE_ROW)
            goto dberr;
        uint64_t aid = (uint64_t)sqlite3_column_int64(st, 1);
        if (aid == u[i])
            heads[nheads++] = u[i]; /* sorted, as u is */
        else if (!aid || !has_u64(heads, nheads, aid)) {
            /* N.B. a head sorts before its elements: already known */
            int s = pl_state_parse((const char *)sqlite3_column_text(st, 0));
            if (s > 0)
                count[s]++;
            total++;
        }
    }
    if (nheads) {
        if (sqlite3_prepare_v2(db, "SELECT state, count(*) FROM tasks WHERE "
                                   "array_id = ?1 GROUP BY state", -1, &arr,
                               NULL) != SQLITE_OK)
            goto dberr;
        for (size_t i = 0; i < nheads; i++) {
            sqlite3_reset(arr);
            sqlite3_bind_int64(arr, 1, (sqlite3_int64)heads[i]);
            if (add_states(arr, count, &total) < 0)
                goto dberr;
        }
    }
out:
    for (int s = 1; s < PL_ST_COUNT; s++)
        json_object_set_new(c, pl_state_name(s), json_integer(count[s]));
    json_object_set_new(c, "total", json_integer(total));
    json_object_set_new(c, "unknown", unknown); /* c takes it */
    res = c;
    c = unknown = NULL;
    goto done;
nomem:
    errno = ENOMEM;
    pl_errprintf(errp, "out of memory");
    goto done;
dberr:
    pl_query_dberr(db, errp, "count tasks");
done:
    sqlite3_finalize(st);
    sqlite3_finalize(arr);
    free(u);
    free(heads);
    json_decref(c);
    json_decref(unknown);
    return res;
}
