/* tests/unit/test_daemon_db_batch.c - the changes and events of a batch,
 * written together (daemon/db_batch.c): a task's changes merged into
 * one UPDATE leave its row as the changes one commit at a time do, its
 * events keep their order, reads in the transaction see them, and a
 * savepoint rolled back takes its changes with it */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "daemon/db.h"
#include "proto/state.h"
#include "tests/unit/db_fixture.h"
#include "tests/unit/helpers.h"

static char tmp[64];

/* The statements run on the connection, by kind (sqlite3_trace_v2). */
struct stmts {
    int updates;     /* UPDATE tasks */
    int inserts;     /* INSERT INTO events */
};

static int trace_cb(unsigned type, void *arg, void *p, void *x)
{
    struct stmts *n = arg;
    const char *sql = sqlite3_sql(p);
    (void)type;
    (void)x;

    if (sql && !strncmp(sql, "UPDATE tasks", 12))
        n->updates++;
    if (sql && !strncmp(sql, "INSERT INTO events", 18))
        n->inserts++;
    return 0;
}

/* Task 'id''s row as text: every column a change may write. */
static void row_text(sqlite3 *h, uint64_t id, char *buf, size_t len)
{
    char sql[600];

    snprintf(sql, sizeof(sql), "SELECT state || '|' || attempts || '|' || "
             "quote(node) || '|' || quote(cores) || '|' || quote(gpus) || '|' "
             "|| quote(reason) || '|' || quote(exit_code) || '|' || "
             "quote(signal) || '|' || quote(maxrss_kb) || '|' || "
             "quote(start_time) || '|' || quote(end_time) || '|' || "
             "quote(end_seq) || '|' || quote(cpu_user) || '|' || "
             "quote(cpu_sys) || '|' || quote(gpu_util) || '|' || "
             "quote(gpu_mem_mb) || '|' || quote(gpu_power_w) FROM tasks "
             "WHERE id = %llu", (unsigned long long)id);
    t_db_scalar(h, sql, buf, len);
}

/* Task 'id''s events in order as text, all but its task column. */
static void events_text(sqlite3 *h, uint64_t id, char *buf, size_t len)
{
    char sql[400];

    snprintf(sql, sizeof(sql), "SELECT group_concat(e, ' / ') FROM (SELECT "
             "time || ',' || state || ',' || attempt || ',' || quote(node) "
             "|| ',' || quote(cores) || ',' || quote(gpus) || ',' || "
             "quote(detail) || ',' || quote(rank) AS e FROM events WHERE "
             "task = %llu ORDER BY id)", (unsigned long long)id);
    t_db_scalar(h, sql, buf, len);
}

/* The changes of one task's life, in order (each of them for 'id'). */
static struct pl_usage use = { .has = PL_USE_CPU | PL_USE_GPU_UTIL,
                               .cpu_user = 1.5, .cpu_sys = 0.25,
                               .gpu_util = 40 };
static const struct pl_db_change life[] = {
    { .state = PL_ST_ASSIGNED, .attempt = 1, .time = 20, .node = "n1",
      .cores = "0,1", .gpus = "3", .exit_code = -1, .signal = -1,
      .maxrss_kb = -1 },
    { .state = PL_ST_RUNNING, .attempt = 1, .time = 21, .node = "n1",
      .cores = "0,1", .exit_code = -1, .signal = -1, .maxrss_kb = -1 },
    /* lost: back to the queue, its start cleared */
    { .state = PL_ST_QUEUED, .attempt = 1, .time = 22, .reason = "node-lost",
      .exit_code = -1, .signal = -1, .maxrss_kb = -1 },
    { .state = PL_ST_ASSIGNED, .attempt = 2, .time = 23, .node = "n2",
      .cores = "4", .exit_code = -1, .signal = -1, .maxrss_kb = -1 },
    { .state = PL_ST_RUNNING, .attempt = 2, .time = 24, .node = "n2",
      .cores = "4", .exit_code = -1, .signal = -1, .maxrss_kb = -1 },
    { .state = PL_ST_DONE, .attempt = 2, .time = 25, .node = "n2",
      .cores = "4", .exit_code = 0, .signal = 0, .maxrss_kb = 2048,
      .use = &use, .end_seq = 9 },
};
#define NLIFE (sizeof(life) / sizeof(life[0]))

static int change(struct pl_db *db, uint64_t id, const struct pl_db_change *c)
{
    struct pl_db_change x = *c;
    struct pl_error e;

    x.id = id;
    if (pl_db_task_change(db, &x, &e) < 0) {
        diag("change: %s", e.text);
        return -1;
    }
    return 0;
}

int main(void)
{
    char ra[1024], rb[1024], ea[2048], eb[2048], buf[256];
    struct pl_error e = { "" };
    struct stmts n = { 0 };
    struct pl_db *db;
    sqlite3 *h;

    plan(15);
    if (!t_tmpdir("dbbatch", tmp, sizeof(tmp)))
        return 1;
    if (!(db = t_db_open(tmp, "state.db")))
        return 1;
    h = pl_db_handle(db);
    char *argv[] = { (char *)"true", NULL };
    uint64_t a = t_db_insert(db, argv, 10), b = t_db_insert(db, argv, 10);
    is(pl_db_commit(db, &e), 0, "two tasks stored");

    /* b: each change in a commit of its own */
    for (size_t i = 0; i < NLIFE; i++) {
        change(db, b, &life[i]);
        pl_db_commit(db, &e);
    }
    /* a: all of them in one batch */
    sqlite3_trace_v2(h, SQLITE_TRACE_STMT, trace_cb, &n);
    for (size_t i = 0; i < NLIFE; i++)
        change(db, a, &life[i]);
    is(pl_db_commit(db, &e), 0, "one batch of %zu changes committed", NLIFE);
    sqlite3_trace_v2(h, 0, NULL, NULL);
    is(n.updates, 1, "... in one UPDATE");
    is(n.inserts, 1, "... and one INSERT of their events");
    row_text(h, a, ra, sizeof(ra));
    row_text(h, b, rb, sizeof(rb));
    is_str(ra, rb, "the row is the one the changes made one at a time");
    ok(strstr(ra, "done|2|'n2'|'4'|'3'|NULL|0|0|2048|24.0|25.0|9|1.5|0.25|"
                  "40.0|NULL|NULL") != NULL,
       "... done, attempt 2 on n2 (its GPU kept), started at 24, ended at "
       "25, its figures (%s)", ra);
    events_text(h, a, ea, sizeof(ea));
    events_text(h, b, eb, sizeof(eb));
    is_str(ea, eb, "the events are the same, in the same order");
    ok(!strncmp(ea, "10.0,queued,0,NULL", 18)
           && strstr(ea, "22.0,queued,1,NULL,NULL,NULL,'node-lost',NULL"),
       "... the first the submission's (%s)", ea);

    /* a read in the transaction sees the batch's changes */
    uint64_t c = t_db_insert(db, argv, 30);
    change(db, c, &life[0]);
    is(pl_db_task_state(db, c, &e), PL_ST_ASSIGNED,
       "a read in the batch sees its change (assigned)");
    is(pl_db_commit(db, &e), 0, "... committed");

    /* a savepoint rolled back takes only its own changes */
    change(db, c, &life[1]);
    is(pl_db_savepoint(db, &e), 0, "savepoint");
    change(db, c, &life[2]);
    pl_db_savepoint_end(db, false, &e);
    is(pl_db_commit(db, &e), 0, "... rolled back, committed");
    snprintf(buf, sizeof(buf), "SELECT group_concat(state, ' ') FROM events "
             "WHERE task = %llu ORDER BY id", (unsigned long long)c);
    t_db_scalar(h, buf, ea, sizeof(ea));
    is_str(ea, "queued assigned running",
           "... the change before it stored, the one in it not");
    snprintf(buf, sizeof(buf), "SELECT state FROM tasks WHERE id = %llu",
             (unsigned long long)c);
    t_db_scalar(h, buf, ea, sizeof(ea));
    is_str(ea, "running", "... the task running");

    /* the JSON of an argv is kept for the next task's same argv only */
    char *v1[] = { (char *)"x", (char *)"1", NULL };
    char *v2[] = { (char *)"x", (char *)"2", NULL };
    char *v3[] = { (char *)"x", NULL };
    char **argvs[] = { v1, v1, v2, v3, v1 };
    struct pl_spec sp = { .ranks = 1, .cpr = 1 };
    struct pl_db_task row = { .spec = &sp };
    uint64_t first = 0;
    for (int i = 0; i < 5; i++) {
        uint64_t id = 0;
        row.argv = argvs[i];
        sp.argv = argvs[i];
        pl_db_task_insert(db, &row, PL_ST_QUEUED, 40, &id, &e);
        if (!first)
            first = id;
    }
    pl_db_commit(db, &e);
    snprintf(buf, sizeof(buf), "SELECT group_concat(argv, ' ') FROM tasks "
             "WHERE id >= %llu ORDER BY id", (unsigned long long)first);
    t_db_scalar(h, buf, ea, sizeof(ea));
    is_str(ea, "[\"x\",\"1\"] [\"x\",\"1\"] [\"x\",\"2\"] [\"x\"] "
               "[\"x\",\"1\"]", "each task's argv stored as its own");

    pl_db_close(db);
    t_rmtree(tmp);
    return done_testing();
}
