/* daemon/db.c - SQLite state: tasks, events, nodes (pilotd is the only writer) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/db.h"
#include "proto/schema.h"
#include "proto/state.h"

enum {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_INSERT,
    ST_EVENT,
    ST_CHANGE,
    ST_NODE,
    ST_META,
    ST_STATE,
    ST_SAVE,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_COUNT
};

static const char *sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_INSERT] = "INSERT INTO tasks (name, argv, env, cwd, ranks, "
                  "cores_per_rank, gpus_per_rank, timeout, retries, state, "
                  "submit_time, nodes, ranks_per_node, exclusive, comm, "
                  "launcher) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,"
                  "?13,?14,?15,?16)",
    [ST_EVENT] = "INSERT INTO events (task, time, state, attempt, node, "
                 "cores, gpus, detail, rank) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,"
                 "?9)",
    /* running sets start_time; final states set end_time; assigned/queued
     * clear the result of an earlier attempt */
    [ST_CHANGE] =
        "UPDATE tasks SET state = ?2, attempts = max(attempts, ?3),"
        " node = coalesce(?4, node), cores = coalesce(?5, cores),"
        " gpus = coalesce(?6, gpus), reason = ?7,"
        " exit_code = coalesce(?8, exit_code), signal = coalesce(?9, signal),"
        " maxrss_kb = coalesce(?10, maxrss_kb),"
        " start_time = CASE WHEN ?2 = 'running' THEN ?11"
        "   WHEN ?2 IN ('queued', 'assigned') THEN NULL ELSE start_time END,"
        " end_time = CASE WHEN ?2 IN ('done','failed','canceled','timeout')"
        "   THEN ?11 ELSE NULL END"
        " WHERE id = ?1",
    [ST_NODE] = "INSERT INTO nodes (name, cores, gpus, state, joined, "
                "last_seen) VALUES (?1,?2,?3,?4,?5,?5) ON CONFLICT(name) DO "
                "UPDATE SET cores = coalesce(?2, cores), gpus = "
                "coalesce(?3, gpus), state = ?4, last_seen = ?5",
    [ST_META] = "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
    [ST_STATE] = "SELECT state FROM tasks WHERE id = ?1",
    [ST_SAVE] = "SAVEPOINT req",
    [ST_RELEASE] = "RELEASE req",
    [ST_ROLLBACK_TO] = "ROLLBACK TO req",
};

struct pl_db {
    sqlite3 *h;
    sqlite3_stmt *st[ST_COUNT];
    int in_txn;
};

static int dberr(struct pl_db *db, struct pl_error *errp, const char *what)
{
    int rc = sqlite3_extended_errcode(db->h);

    /* one map from SQLite codes to errno, so callers can tell a full disk
     * or a read-only directory from a bug */
    switch (rc & 0xff) {
    case SQLITE_FULL: errno = ENOSPC; break;
    case SQLITE_READONLY: errno = EROFS; break;
    case SQLITE_PERM:
    case SQLITE_AUTH: errno = EACCES; break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: errno = EBUSY; break;
    case SQLITE_NOMEM: errno = ENOMEM; break;
    case SQLITE_CONSTRAINT: errno = EINVAL; break;
    default: errno = EIO; break;
    }
    return pl_errprintf(errp, "database: %s: %s", what, sqlite3_errmsg(db->h));
}

static int exec(struct pl_db *db, const char *s, struct pl_error *errp)
{
    char *msg = NULL;

    if (sqlite3_exec(db->h, s, NULL, NULL, &msg) != SQLITE_OK) {
        pl_errprintf(errp, "database: %s", msg ? msg : "error");
        sqlite3_free(msg);
        errno = EIO;
        return -1;
    }
    return 0;
}

struct pl_db *pl_db_open(const char *path, struct pl_error *errp)
{
    struct pl_db *db;
    sqlite3_stmt *st = NULL;
    char buf[64];

    if (!(db = calloc(1, sizeof(*db)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    if (sqlite3_open_v2(path, &db->h,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL)
        != SQLITE_OK) {
        pl_errprintf(errp, "cannot open %s: %s", path,
                     db->h ? sqlite3_errmsg(db->h) : "out of memory");
        errno = EIO;
        goto error;
    }
    sqlite3_busy_timeout(db->h, 2000);
    if (exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                 "PRAGMA foreign_keys=OFF;", errp) < 0)
        goto error;
    if (sqlite3_prepare_v2(db->h, "PRAGMA quick_check", -1, &st, NULL)
            != SQLITE_OK
        || sqlite3_step(st) != SQLITE_ROW
        || strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0) {
        pl_errprintf(errp, "%s failed its integrity check: %s", path,
                     st && sqlite3_column_text(st, 0)
                         ? (const char *)sqlite3_column_text(st, 0)
                         : sqlite3_errmsg(db->h));
        errno = EIO;
        sqlite3_finalize(st);
        goto error;
    }
    sqlite3_finalize(st);
    if (exec(db, PL_SCHEMA_SQL, errp) < 0)
        goto error;
    for (int i = 0; i < ST_COUNT; i++) {
        if (sqlite3_prepare_v3(db->h, sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &db->st[i], NULL) != SQLITE_OK) {
            dberr(db, errp, "prepare");
            goto error;
        }
    }
    snprintf(buf, sizeof(buf), "%d", PL_SCHEMA_VERSION);
    if (pl_db_meta_set(db, "schema", buf, errp) < 0
        || pl_db_commit(db, errp) < 0)
        goto error;
    return db;
error:
    pl_db_close(db);
    return NULL;
}

void pl_db_close(struct pl_db *db)
{
    if (!db)
        return;
    int saved = errno;
    if (db->in_txn)
        pl_db_rollback(db);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(db->st[i]);
    sqlite3_close(db->h);
    free(db);
    errno = saved;
}

sqlite3 *pl_db_handle(struct pl_db *db)
{
    return db->h;
}

int pl_db_in_txn(const struct pl_db *db)
{
    return db->in_txn;
}

/* Run a prepared statement to completion and reset it. */
static int step(struct pl_db *db, int which, struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[which];
    int rc = sqlite3_step(st);

    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        dberr(db, errp, sql[which]);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return -1;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return 0;
}

static int begin(struct pl_db *db, struct pl_error *errp)
{
    if (db->in_txn)
        return 0;
    if (step(db, ST_BEGIN, errp) < 0)
        return -1;
    db->in_txn = 1;
    return 0;
}

int pl_db_commit(struct pl_db *db, struct pl_error *errp)
{
    if (!db->in_txn)
        return 0;
    if (step(db, ST_COMMIT, errp) < 0) {
        int saved = errno;
        pl_db_rollback(db);
        errno = saved;
        return -1;
    }
    db->in_txn = 0;
    return 0;
}

int pl_db_savepoint(struct pl_db *db, struct pl_error *errp)
{
    if (begin(db, errp) < 0)
        return -1;
    return step(db, ST_SAVE, errp);
}

int pl_db_savepoint_end(struct pl_db *db, bool keep, struct pl_error *errp)
{
    if (!keep && step(db, ST_ROLLBACK_TO, errp) < 0)
        return -1;
    return step(db, ST_RELEASE, errp);
}

void pl_db_rollback(struct pl_db *db)
{
    if (!db->in_txn)
        return;
    /* N.B. after some errors (SQLITE_FULL) SQLite has already rolled back */
    if (!sqlite3_get_autocommit(db->h))
        step(db, ST_ROLLBACK, NULL);
    db->in_txn = 0;
}

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

static int event(struct pl_db *db, uint64_t id, double now, int state,
                 uint32_t attempt, const char *node, const char *cores,
                 const char *gpus, const char *detail, int64_t rank,
                 struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_EVENT];

    if (rank >= 0)
        sqlite3_bind_int64(st, 9, rank);

    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    sqlite3_bind_double(st, 2, now);
    sqlite3_bind_text(st, 3, pl_state_name(state), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, attempt);
    bind_text(st, 5, node);
    bind_text(st, 6, cores);
    bind_text(st, 7, gpus);
    bind_text(st, 8, detail);
    return step(db, ST_EVENT, errp);
}

int pl_db_task_insert(struct pl_db *db, const struct pl_db_spec *s, int state,
                      double now, uint64_t *id, struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_INSERT];

    if (begin(db, errp) < 0)
        return -1;
    bind_text(st, 1, s->name);
    bind_text(st, 2, s->argv_json);
    bind_text(st, 3, s->env_json);
    bind_text(st, 4, s->cwd);
    sqlite3_bind_int64(st, 5, s->ranks);
    sqlite3_bind_int64(st, 6, s->cores_per_rank);
    sqlite3_bind_int64(st, 7, s->gpus_per_rank);
    if (s->timeout > 0)
        sqlite3_bind_double(st, 8, s->timeout);
    else
        sqlite3_bind_null(st, 8);
    sqlite3_bind_int64(st, 9, s->retries);
    sqlite3_bind_text(st, 10, pl_state_name(state), -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 11, now);
    sqlite3_bind_int64(st, 12, s->nodes);
    sqlite3_bind_int64(st, 13, s->ranks_per_node);
    sqlite3_bind_int(st, 14, s->exclusive);
    bind_text(st, 15, s->comm ? s->comm : "none");
    bind_text(st, 16, s->launcher);
    if (step(db, ST_INSERT, errp) < 0)
        return -1;
    *id = (uint64_t)sqlite3_last_insert_rowid(db->h);
    return event(db, *id, now, state, 0, NULL, NULL, NULL, NULL, -1, errp);
}

int pl_db_task_change(struct pl_db *db, const struct pl_db_change *c,
                      struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_CHANGE];

    if (begin(db, errp) < 0)
        return -1;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)c->id);
    sqlite3_bind_text(st, 2, pl_state_name(c->state), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, c->attempt);
    bind_text(st, 4, c->node);
    bind_text(st, 5, c->cores);
    bind_text(st, 6, c->gpus);
    bind_text(st, 7, c->reason);
    if (c->exit_code >= 0)
        sqlite3_bind_int(st, 8, c->exit_code);
    if (c->signal >= 0)
        sqlite3_bind_int(st, 9, c->signal);
    if (c->maxrss_kb >= 0)
        sqlite3_bind_int64(st, 10, c->maxrss_kb);
    sqlite3_bind_double(st, 11, c->time);
    if (step(db, ST_CHANGE, errp) < 0)
        return -1;
    if (sqlite3_changes(db->h) == 0) {
        errno = ENOENT;
        return pl_errprintf(errp, "no task %llu", (unsigned long long)c->id);
    }
    return event(db, c->id, c->time, c->state, c->attempt, c->node, c->cores,
                 c->gpus, c->reason, -1, errp);
}

int pl_db_rank_event(struct pl_db *db, const struct pl_db_change *c,
                     uint32_t rank, struct pl_error *errp)
{
    if (begin(db, errp) < 0)
        return -1;
    return event(db, c->id, c->time, c->state, c->attempt, c->node, c->cores,
                 c->gpus, c->reason, rank, errp);
}

int pl_db_node_set(struct pl_db *db, const char *name, const char *cores,
                   const char *gpus, const char *state, double now,
                   struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_NODE];

    if (begin(db, errp) < 0)
        return -1;
    bind_text(st, 1, name);
    bind_text(st, 2, cores);
    bind_text(st, 3, gpus);
    bind_text(st, 4, state);
    sqlite3_bind_double(st, 5, now);
    return step(db, ST_NODE, errp);
}

int pl_db_meta_set(struct pl_db *db, const char *key, const char *val,
                   struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_META];

    if (begin(db, errp) < 0)
        return -1;
    bind_text(st, 1, key);
    bind_text(st, 2, val);
    return step(db, ST_META, errp);
}

int pl_db_meta_get(struct pl_db *db, const char *key, char **val,
                   struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    int rc;

    *val = NULL;
    if (sqlite3_prepare_v2(db->h, "SELECT value FROM meta WHERE key = ?", -1,
                           &st, NULL) != SQLITE_OK)
        return dberr(db, errp, "read meta");
    bind_text(st, 1, key);
    if ((rc = sqlite3_step(st)) == SQLITE_ROW && sqlite3_column_text(st, 0)
        && !(*val = strdup((const char *)sqlite3_column_text(st, 0)))) {
        sqlite3_finalize(st);
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        dberr(db, errp, "read meta");
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return 0;
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

    if (sqlite3_prepare_v2(db->h, q, -1, &st, NULL) != SQLITE_OK)
        return dberr(db, errp, "read placement");
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
        dberr(db, errp, "read placement");
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return 0;
}

int pl_db_load_live(struct pl_db *db, pl_db_live_f cb, void *arg,
                    struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    int rc;

    if (sqlite3_prepare_v2(db->h,
                           "SELECT id, state, name, argv, env, cwd, ranks, "
                           "cores_per_rank, gpus_per_rank, retries, timeout, "
                           "attempts, nodes, ranks_per_node, exclusive, comm, "
                           "launcher FROM tasks WHERE state NOT IN ('done', "
                           "'failed', 'canceled', 'timeout') ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return dberr(db, errp, "load tasks");
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct pl_db_spec s = {
            .name = (const char *)sqlite3_column_text(st, 2),
            .argv_json = (const char *)sqlite3_column_text(st, 3),
            .env_json = (const char *)sqlite3_column_text(st, 4),
            .cwd = (const char *)sqlite3_column_text(st, 5),
            .ranks = (uint32_t)sqlite3_column_int64(st, 6),
            .cores_per_rank = (uint32_t)sqlite3_column_int64(st, 7),
            .gpus_per_rank = (uint32_t)sqlite3_column_int64(st, 8),
            .retries = (uint32_t)sqlite3_column_int64(st, 9),
            .timeout = sqlite3_column_double(st, 10),
            .nodes = (uint32_t)sqlite3_column_int64(st, 12),
            .ranks_per_node = (uint32_t)sqlite3_column_int64(st, 13),
            .exclusive = sqlite3_column_int(st, 14) != 0,
            .comm = (const char *)sqlite3_column_text(st, 15),
            .launcher = (const char *)sqlite3_column_text(st, 16),
        };
        int state = pl_state_parse((const char *)sqlite3_column_text(st, 1));
        if (cb((uint64_t)sqlite3_column_int64(st, 0), state, &s,
               (uint32_t)sqlite3_column_int64(st, 11), arg) < 0) {
            sqlite3_finalize(st);
            return pl_errprintf(errp, "cannot rebuild the queue: %s",
                                strerror(errno));
        }
    }
    if (rc != SQLITE_DONE) {
        dberr(db, errp, "load tasks");
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

    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    if ((rc = sqlite3_step(st)) == SQLITE_ROW)
        state = pl_state_parse((const char *)sqlite3_column_text(st, 0));
    else if (rc != SQLITE_DONE) {
        dberr(db, errp, "task state");
        state = -1;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return state;
}
