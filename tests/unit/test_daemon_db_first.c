/* tests/unit/test_daemon_db_first.c - a task's first event and its row
 * (schema 13, daemon/db_insert.c): a task queued at its submission has
 * no events row, 'pilot show' (pl_query_task()) makes that event from its
 * submit_time; a waiting one's and a requeue's are rows; the rows of a
 * multi-row insert are each their own, with consecutive ids; all of it
 * the same after a restart; and a database of schema 12 (which has the
 * queued rows) opens as 13 with each event shown once */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

#include "daemon/db.h"
#include "proto/query.h"
#include "proto/schema.h"
#include "proto/state.h"
#include "tests/unit/db_fixture.h"
#include "tests/unit/helpers.h"

/* Task 'id''s events as 'pilot show' has them: "TIME STATE ATTEMPT"
 * joined by " / ". */
static void shown(sqlite3 *h, uint64_t id, char *buf, size_t len)
{
    struct pl_error e;
    json_t *t = pl_query_task(h, id, &e), *ev;
    size_t off = 0, i;

    buf[0] = '\0';
    if (!t) {
        snprintf(buf, len, "error: %s", e.text);
        return;
    }
    json_array_foreach(json_object_get(t, "events"), i, ev) {
        off += (size_t)snprintf(buf + off, len - off, "%s%g %s %lld",
                                i ? " / " : "",
                                json_real_value(json_object_get(ev, "time")),
                                json_string_value(json_object_get(ev,
                                                                  "state")),
                                (long long)json_integer_value(
                                    json_object_get(ev, "attempt")));
        if (off >= len)
            break;
    }
    json_decref(t);
}

static int change(struct pl_db *db, uint64_t id, int state, uint32_t attempt,
                  double time, const char *node, const char *reason)
{
    struct pl_db_change c = { .id = id, .state = state, .attempt = attempt,
                              .time = time, .node = node, .reason = reason,
                              .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1 };
    struct pl_error e;

    if (pl_db_task_change(db, &c, &e) < 0) {
        diag("change: %s", e.text);
        return -1;
    }
    return 0;
}

int main(void)
{
    char tmp[64], path[128], buf[1024], sql[256];
    struct pl_error e = { "" };
    struct pl_db *db;
    sqlite3 *h;

    plan(25);
    if (!t_tmpdir("dbfirst", tmp, sizeof(tmp)))
        return 1;
    snprintf(path, sizeof(path), "%s/state.db", tmp);
    if (!(db = pl_db_open(path, &e))) {
        diag("%s", e.text);
        return 1;
    }
    h = pl_db_handle(db);

    /* one queued, one waiting */
    char *argv[] = { (char *)"echo", (char *)"a \"q\"\\\n\x01",
                     (char *)"\t\x7f/\xc3\xa9\xe2\x82\xac", NULL };
    char *env[] = { (char *)"A=1", NULL };
    struct pl_spec s = { .argv = argv, .env = env, .ranks = 1, .cpr = 1 };
    struct pl_db_task row = { .spec = &s };
    uint64_t q = 0, w = 0;
    ok(pl_db_task_insert(db, &row, PL_ST_QUEUED, 10, &q, &e) == 0
           && pl_db_task_insert(db, &row, PL_ST_WAITING, 11, &w, &e) == 0
           && pl_db_commit(db, &e) == 0,
       "a queued and a waiting task stored");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM events WHERE task = "
             "%llu", (unsigned long long)q);
    is(t_db_count(h, sql), 0, "the queued one has no events row");
    snprintf(sql, sizeof(sql), "SELECT group_concat(state || ' ' || time) "
             "FROM events WHERE task = %llu", (unsigned long long)w);
    t_db_scalar(h, sql, buf, sizeof(buf));
    is_str(buf, "waiting 11.0", "the waiting one has its row");
    shown(h, q, buf, sizeof(buf));
    is_str(buf, "10 queued 0", "show: the queued one's event from its "
           "submit_time");
    shown(h, w, buf, sizeof(buf));
    is_str(buf, "11 waiting 0", "show: the waiting one's, once");
    /* the JSON written directly, as jansson reads it back */
    snprintf(sql, sizeof(sql), "SELECT json_extract(argv, '$[1]') = "
             "char(97,32,34,113,34,92,10,1) AND json_valid(argv) AND env "
             "= '[\"A=1\"]' FROM tasks WHERE id = %llu",
             (unsigned long long)q);
    is(t_db_count(h, sql), 1, "argv with quotes, a backslash, a newline and a "
       "control character stored as valid JSON of the same strings");
    json_t *ja = json_pack("[sss]", argv[0], argv[1], argv[2]);
    char *jt = json_dumps(ja, JSON_COMPACT);
    snprintf(sql, sizeof(sql), "SELECT argv FROM tasks WHERE id = %llu",
             (unsigned long long)q);
    t_db_scalar(h, sql, buf, sizeof(buf));
    is_str(buf, jt ? jt : "", "... the text jansson's dump writes");
    free(jt);
    json_decref(ja);

    /* assigned, running, lost: requeued (a row), then run again */
    int rc = change(db, q, PL_ST_ASSIGNED, 1, 12, "n1", NULL)
             | change(db, q, PL_ST_RUNNING, 1, 13, "n1", NULL)
             | change(db, q, PL_ST_QUEUED, 1, 14, NULL, "node-lost")
             | change(db, q, PL_ST_ASSIGNED, 2, 15, "n2", NULL);
    ok(rc == 0 && pl_db_commit(db, &e) == 0, "assigned, running, requeued, "
       "assigned again");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM events WHERE task = "
             "%llu", (unsigned long long)q);
    is(t_db_count(h, sql), 4, "... 4 events rows, the requeue's among them");
    const char *want = "10 queued 0 / 12 assigned 1 / 13 running 1 / "
                       "14 queued 1 / 15 assigned 2";
    shown(h, q, buf, sizeof(buf));
    is_str(buf, want, "show: the submission's first, the requeue's kept");

    /* many in multi-row inserts: 64 a statement, and the rest */
    struct pl_db_task rows[150];
    char *av[150][3];
    char idx[150][8];
    for (int i = 0; i < 150; i++) {
        snprintf(idx[i], sizeof(idx[i]), "%d", i);
        av[i][0] = (char *)"true";
        av[i][1] = i % 3 ? idx[i] : (char *)"same"; /* some alike */
        av[i][2] = NULL;
        rows[i] = (struct pl_db_task){ .spec = &s, .argv = av[i],
                                       .array_id = 1000, .array_index =
                                       (uint64_t)i };
    }
    uint64_t ids[150];
    ok(pl_db_task_insert_n(db, rows, 150, PL_ST_QUEUED, 20, ids, &e) == 0
           && pl_db_commit(db, &e) == 0,
       "150 tasks in multi-row inserts");
    bool consec = true;
    for (int i = 1; i < 150; i++)
        consec = consec && ids[i] == ids[i - 1] + 1;
    ok(consec && ids[0] == w + 1, "... consecutive ids after the last");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM tasks WHERE id BETWEEN "
             "%llu AND %llu AND array_index = id - %llu AND json_extract("
             "argv, '$[1]') = CASE WHEN array_index %% 3 THEN CAST("
             "array_index AS TEXT) ELSE 'same' END AND state = 'queued' AND "
             "submit_time = 20 AND env = '[\"A=1\"]'",
             (unsigned long long)ids[0], (unsigned long long)ids[149],
             (unsigned long long)ids[0]);
    is(t_db_count(h, sql), 150, "... each row its own argv and index, as given");
    is(t_db_count(h, "SELECT count(*) FROM events WHERE time = 20"), 0,
       "... and no events rows");
    shown(h, ids[77], buf, sizeof(buf));
    is_str(buf, "20 queued 0", "... show makes element 77's queued");
    uint64_t wid[3];
    ok(pl_db_task_insert_n(db, rows, 3, PL_ST_WAITING, 21, wid, &e) == 0
           && pl_db_commit(db, &e) == 0
           && t_db_count(h, "SELECT count(*) FROM events WHERE time = 21 AND "
                       "state = 'waiting'") == 3,
       "3 waiting in one insert: a row each for their first event");

    /* a savepoint rolled back takes a multi-row insert with it (OR FAIL
     * leaves the undoing to it) */
    long long before = t_db_count(h, "SELECT count(*) FROM tasks");
    uint64_t sid[100];
    ok(pl_db_savepoint(db, &e) == 0
           && pl_db_task_insert_n(db, rows, 100, PL_ST_QUEUED, 22, sid, &e)
                  == 0
           && t_db_count(h, "SELECT count(*) FROM tasks") == before + 100
           && pl_db_savepoint_end(db, false, &e) == 0
           && pl_db_commit(db, &e) == 0
           && t_db_count(h, "SELECT count(*) FROM tasks") == before
           && t_db_count(h, "SELECT count(*) FROM tasks WHERE submit_time = 22")
                  == 0,
       "100 inserted in a savepoint rolled back: none stored");
    uint64_t again = 0;
    ok(pl_db_task_insert(db, &row, PL_ST_QUEUED, 23, &again, &e) == 0
           && pl_db_commit(db, &e) == 0 && again == sid[0],
       "... the next insert takes the first id they had (%llu)",
       (unsigned long long)again);

    /* a restart: the same rows, the same events */
    pl_db_close(db);
    if (!(db = pl_db_open(path, &e))) {
        diag("%s", e.text);
        return 1;
    }
    h = pl_db_handle(db);
    shown(h, q, buf, sizeof(buf));
    is_str(buf, want, "after a restart: the same events");
    shown(h, w, buf, sizeof(buf));
    is_str(buf, "11 waiting 0", "... the waiting one's too");

    /* schema 12: the queued rows are there (as a schema 12 pilotd wrote
     * them); it opens as 13 with each shown once */
    snprintf(sql, sizeof(sql), "INSERT INTO events (task, time, state, "
             "attempt) VALUES (%llu, 20.0, 'queued', 0)",
             (unsigned long long)ids[5]);
    ok(sqlite3_exec(h, "BEGIN; UPDATE meta SET value = '12' WHERE key = "
                       "'schema'", NULL, NULL, NULL) == SQLITE_OK
           && sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK
           && sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) == SQLITE_OK,
       "made a database of schema 12 (its queued event a row)");
    pl_db_close(db);
    if (!(db = pl_db_open(path, &e))) {
        diag("%s", e.text);
        return 1;
    }
    h = pl_db_handle(db);
    t_db_scalar(h, "SELECT value FROM meta WHERE key = 'schema'", buf,
           sizeof(buf));
    snprintf(sql, sizeof(sql), "%d", PL_SCHEMA_VERSION);
    ok(!strcmp(buf, sql) && PL_SCHEMA_VERSION == 13, "... it opens as "
       "schema 13 (%s)", buf);
    shown(h, ids[5], buf, sizeof(buf));
    is_str(buf, "20 queued 0", "... its queued event shown once");
    ok(change(db, ids[5], PL_ST_ASSIGNED, 1, 30, "n1", NULL) == 0
           && pl_db_commit(db, &e) == 0, "... it runs on");
    shown(h, ids[5], buf, sizeof(buf));
    is_str(buf, "20 queued 0 / 30 assigned 1", "... its events in order");

    pl_db_close(db);
    t_rmtree(tmp);
    return done_testing();
}
