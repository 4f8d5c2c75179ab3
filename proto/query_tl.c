/* proto/query_tl.c - a report's page of tasks and where their ranks ran */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/query.h"
#include "proto/tlmsg.h"

/* ?1 id (or the id to go on after), ?2 limit, ?3 name, ?4 since, then
 * each tag's path (and value).  Schema 11's CPU times are NULL in a
 * database of an older pilotd, read while it is down. */
#define TL_COLS                                                                \
    "SELECT id, name, tags, state, reason, submit_time, start_time, "         \
    "end_time, ranks, cores_per_rank, gpus_per_rank, exit_code, signal, "     \
    "maxrss_kb, attempts, "
#define TL_CPU "cpu_user, cpu_sys "
#define TL_NOCPU "NULL AS cpu_user, NULL AS cpu_sys "

/* One rank of one attempt, as the events tell it. */
struct place {
    int64_t attempt, rank;
    json_t *node, *cores, *gpus;   /* owned */
    double start, end;             /* < 0: not known */
};

static void place_clear(struct place *p)
{
    json_decref(p->node);
    json_decref(p->cores);
    json_decref(p->gpus);
}

/* The placement of the event row 'st' (attempt, rank, time, state, node,
 * cores, gpus) into its entry of 'v', a new one if it has none. */
static int place_row(sqlite3_stmt *st, struct place **v, size_t *n,
                     size_t *cap)
{
    int64_t att = sqlite3_column_int64(st, 0);
    int64_t rank = sqlite3_column_type(st, 1) == SQLITE_NULL
                       ? 0 : sqlite3_column_int64(st, 1);
    const char *state = (const char *)sqlite3_column_text(st, 3);
    struct place *p = NULL;
    size_t i;

    if (!state || !strcmp(state, "queued"))
        return 0;
    for (i = *n; i-- > 0;)
        if ((*v)[i].attempt == att && (*v)[i].rank == rank) {
            p = &(*v)[i];
            break;
        }
    if (!p) {
        if (*n == *cap) {
            size_t ncap = *cap ? *cap * 2 : 8;
            struct place *nv = realloc(*v, ncap * sizeof(*nv));
            if (!nv)
                return -1;
            *v = nv;
            *cap = ncap;
        }
        p = &(*v)[(*n)++];
        *p = (struct place){ att, rank, NULL, NULL, NULL, -1, -1 };
    }
    /* the end events of a single-rank task name no cores: keep the
     * running one's */
    if (sqlite3_column_type(st, 4) != SQLITE_NULL) {
        json_decref(p->node);
        p->node = pl_query_col(st, 4);
    }
    if (sqlite3_column_type(st, 5) != SQLITE_NULL) {
        json_decref(p->cores);
        p->cores = pl_query_intlist((const char *)sqlite3_column_text(st, 5));
    }
    if (sqlite3_column_type(st, 6) != SQLITE_NULL) {
        json_decref(p->gpus);
        p->gpus = pl_query_intlist((const char *)sqlite3_column_text(st, 6));
    }
    if (!strcmp(state, "running"))
        p->start = sqlite3_column_double(st, 2);
    else if (strcmp(state, "assigned") && p->start >= 0 && p->end < 0)
        p->end = sqlite3_column_double(st, 2);
    return 0;
}

/* A rank whose node was lost has no end event: the task's going back
 * to the queue, or any event of a later attempt, ends what still ran
 * of its earlier ones. */
static void close_older(sqlite3_stmt *ev, struct place *v, size_t n)
{
    const char *state = (const char *)sqlite3_column_text(ev, 3);
    int64_t att = sqlite3_column_int64(ev, 0);
    bool queued = state && !strcmp(state, "queued");

    for (size_t i = 0; i < n; i++)
        if (v[i].start >= 0 && v[i].end < 0
            && (queued || v[i].attempt < att))
            v[i].end = sqlite3_column_double(ev, 2);
}

/* [[attempt, rank, node, [cores], [gpus], start, end or null]...] of
 * task 'id': its ranks that ran (a rank never started is left out).
 * A multi-rank task's rows are its ranks' (events.rank set); a
 * single-rank task's are its own.  NULL on a failure. */
static json_t *places(sqlite3_stmt *ev, int64_t id, size_t *nrows)
{
    struct place *v = NULL;
    size_t n = 0, cap = 0;
    bool ranked = false;
    json_t *out = json_array();
    int rc;

    sqlite3_reset(ev);
    sqlite3_bind_int64(ev, 1, id);
    while (out && (rc = sqlite3_step(ev)) == SQLITE_ROW) {
        bool r = sqlite3_column_type(ev, 1) != SQLITE_NULL;
        if (r && !ranked) {
            /* the task's own rows were its ranks' summary */
            for (size_t i = 0; i < n; i++)
                place_clear(&v[i]);
            n = 0;
            ranked = true;
        }
        close_older(ev, v, n);
        if (r == ranked && place_row(ev, &v, &n, &cap) < 0)
            goto error;
    }
    if (!out || rc != SQLITE_DONE)
        goto error;
    for (size_t i = 0; i < n; i++) {
        struct place *p = &v[i];
        if (p->start < 0)
            continue;
        json_t *row = json_pack("[I,I,O?,O?,O?,f,o]", (json_int_t)p->attempt,
                                (json_int_t)p->rank, p->node, p->cores,
                                p->gpus, p->start,
                                p->end >= 0 ? json_real(p->end)
                                            : json_null());
        if (!row || json_array_append_new(out, row) < 0)
            goto error;
        (*nrows)++;
    }
    for (size_t i = 0; i < n; i++)
        place_clear(&v[i]);
    free(v);
    return out;
error:
    for (size_t i = 0; i < n; i++)
        place_clear(&v[i]);
    free(v);
    json_decref(out);
    return NULL;
}

static json_t *task_obj(sqlite3_stmt *st)
{
    static const char *const keys[] = {
        "id", "name", "tags", "state", "reason", "submit", "start", "end",
        "ranks", "cores_per_rank", "gpus_per_rank", "exit", "signal",
        "maxrss_kb", "attempts", "cpu_user", "cpu_sys",
    };
    json_t *t = json_object();

    for (int i = 0; t && i < (int)(sizeof(keys) / sizeof(keys[0])); i++) {
        json_t *v;
        if (i == 2) {
            const char *text = (const char *)sqlite3_column_text(st, i);
            v = text ? json_loads(text, 0, NULL) : NULL;
            if (!json_is_object(v)) {
                json_decref(v);
                v = json_object();
            }
        }
        else
            v = pl_query_col(st, i);
        if (json_object_set_new(t, keys[i], v) < 0) {
            json_decref(t);
            return NULL;
        }
    }
    return t;
}

/* Prepare the task statement of 'q' (nids: one id at a time). */
static int prep(sqlite3 *db, const struct pl_tl_req *q, size_t nids,
                sqlite3_stmt **st)
{
    char where[1024];
    size_t off;
    int par = 5;

    off = (size_t)snprintf(where, sizeof(where),
                           "FROM tasks WHERE %s%s%s%s",
                           nids ? "id = ?1" : "id > ?1",
                           q->name ? " AND name = ?3" : "",
                           q->since > 0 ? " AND (end_time IS NULL OR "
                                          "end_time >= ?4)" : "",
                           nids ? "" : " AND fn IS NOT 'pool'");
    for (size_t i = 0; q->tags && q->tags[i]; i++) {
        bool eq = strchr(q->tags[i], '=') != NULL;
        off += (size_t)snprintf(where + off, sizeof(where) - off,
                                eq ? " AND json_extract(tags, ?%d) = ?%d"
                                   : " AND json_extract(tags, ?%d) IS NOT "
                                     "NULL", par, par + 1);
        par += eq ? 2 : 1;
    }
    if (!nids)
        snprintf(where + off, sizeof(where) - off, " ORDER BY id LIMIT ?2");
    for (int k = 0; k < 2; k++) {
        char sql[1536];
        snprintf(sql, sizeof(sql), "%s%s%s", TL_COLS, k ? TL_NOCPU : TL_CPU,
                 where);
        if (sqlite3_prepare_v2(db, sql, -1, st, NULL) == SQLITE_OK)
            return 0;
    }
    return -1;
}

static void bind_page(sqlite3_stmt *st, const struct pl_tl_req *q, uint64_t id,
                 uint64_t limit)
{
    int par = 5;

    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)limit);
    if (q->name)
        sqlite3_bind_text(st, 3, q->name, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 4, q->since);
    for (size_t k = 0; q->tags && q->tags[k]; k++) {
        const char *eq = strchr(q->tags[k], '=');
        size_t klen = eq ? (size_t)(eq - q->tags[k]) : strlen(q->tags[k]);
        char path[128];
        /* keys are [A-Za-z0-9_.-] (pl_tl_req_decode()): nothing to
         * escape in the path */
        snprintf(path, sizeof(path), "$.\"%.*s\"", (int)klen, q->tags[k]);
        sqlite3_bind_text(st, par++, path, -1, SQLITE_TRANSIENT);
        if (eq)
            sqlite3_bind_text(st, par++, eq + 1, -1, SQLITE_STATIC);
    }
}

json_t *pl_query_timeline(sqlite3 *db, const struct pl_tl_req *q,
                          const uint64_t *ids, size_t nids,
                          struct pl_error *errp)
{
    sqlite3_stmt *st = NULL, *ev = NULL;
    uint64_t limit = q->limit && q->limit < PL_TL_PAGE ? q->limit
                                                       : PL_TL_PAGE;
    json_t *tasks = json_array(), *out = NULL, *nodes = NULL;
    size_t from = 0, nrows = 0;
    bool more = false;
    int rc = SQLITE_DONE;

    if (!tasks)
        goto nomem;
    /* a selection that names no task (an empty array, a name nothing
     * has): no tasks, rather than all of them */
    if (pl_sel_req_given(&q->sel) && nids == 0) {
        if (!(out = json_pack("{s:O, s:b}", "tasks", tasks, "more", 0)))
            goto nomem;
        json_decref(tasks);
        return out;
    }
    if (nids && q->after) {
        while (from < nids && ids[from] != q->after)
            from++;
        from++;
    }
    if (prep(db, q, nids, &st) < 0
        || sqlite3_prepare_v2(db, "SELECT attempt, rank, time, state, node, "
                              "cores, gpus FROM events WHERE task = ?1 "
                              "ORDER BY id", -1, &ev, NULL) != SQLITE_OK)
        goto dberr;
    /* one more than the page: whether there is a next one */
    for (size_t i = from; i < (nids ? nids : from + 1) && !more; i++) {
        bind_page(st, q, nids ? ids[i] : q->after, limit + 1);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            json_t *t, *pl;
            if (json_array_size(tasks) >= limit || nrows >= PL_TL_PAGE_RANKS) {
                more = true;
                break;
            }
            if (!(t = task_obj(st)))
                goto nomem;
            json_array_append_new(tasks, t);
            if (!(pl = places(ev, sqlite3_column_int64(st, 0), &nrows))) {
                if (sqlite3_errcode(db) != SQLITE_OK
                    && sqlite3_errcode(db) != SQLITE_DONE
                    && sqlite3_errcode(db) != SQLITE_ROW)
                    goto dberr;
                goto nomem;
            }
            json_object_set_new(t, "place", pl);
        }
        if (rc != SQLITE_DONE && rc != SQLITE_ROW)
            goto dberr;
    }
    if (!q->after && !(nodes = pl_query_nodes(db, errp)))
        goto fail;
    if (!(out = json_pack("{s:o, s:b}", "tasks", tasks, "more", more)))
        goto nomem;
    tasks = NULL;
    if (nodes)
        json_object_set_new(out, "nodes", nodes);
    sqlite3_finalize(st);
    sqlite3_finalize(ev);
    return out;
dberr:
    pl_errprintf(errp, "timeline: %s", sqlite3_errmsg(db));
    errno = EIO;
    goto fail;
nomem:
    pl_errprintf(errp, "out of memory");
    errno = ENOMEM;
fail:
    sqlite3_finalize(st);
    sqlite3_finalize(ev);
    json_decref(tasks);
    json_decref(nodes);
    return NULL;
}
