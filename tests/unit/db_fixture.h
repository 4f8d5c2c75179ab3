/* tests/unit/db_fixture.h - a state database for the unit tests of
 * daemon/db*.c (test_daemon_db, _batch, _first): opened as pilotd
 * opens it, filled with tasks, read back with SQL */
#ifndef PL_TESTS_DB_FIXTURE_H
#define PL_TESTS_DB_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include <sqlite3.h>

#include "daemon/db.h"
#include "proto/state.h"
#include "tests/unit/tap.h"

/* The first column of the first row of 'sql' as text ("" if none). */
static inline void t_db_scalar(sqlite3 *h, const char *sql, char *buf,
                               size_t len)
{
    sqlite3_stmt *st;

    buf[0] = '\0';
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
        return;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

/* The same as a number (-1 if none). */
static inline long long t_db_count(sqlite3 *h, const char *sql)
{
    char buf[32];

    t_db_scalar(h, sql, buf, sizeof(buf));
    return buf[0] ? atoll(buf) : -1;
}

/* DIR/NAME opened by pl_db_open() (made if missing), or NULL after a
 * diag line. */
static inline struct pl_db *t_db_open(const char *dir, const char *name)
{
    char path[512];
    struct pl_error e = { "" };
    struct pl_db *db;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (!(db = pl_db_open(path, &e)))
        diag("pl_db_open %s: %s", path, e.text);
    return db;
}

/* A task of spec 's' inserted queued at 'now' (not committed); its id,
 * or 0 after a diag line. */
static inline uint64_t t_db_insert_spec(struct pl_db *db,
                                        const struct pl_spec *s, double now)
{
    struct pl_db_task t = { .spec = s };
    struct pl_error e;
    uint64_t id = 0;

    if (pl_db_task_insert(db, &t, PL_ST_QUEUED, now, &id, &e) < 0)
        diag("insert: %s", e.text);
    return id;
}

/* ... of 'argv' (1 rank, 1 core, the rest the defaults). */
static inline uint64_t t_db_insert(struct pl_db *db, char **argv, double now)
{
    struct pl_spec s = { .argv = argv, .ranks = 1, .cpr = 1 };

    return t_db_insert_spec(db, &s, now);
}

#endif /* !PL_TESTS_DB_FIXTURE_H */
