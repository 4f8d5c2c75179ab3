/* tests/unit/test_client_conn.c - finding the pilot, and its state DB when
 * it is down (local pilots only: no Slurm, no pilotd) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "client/cli.h"
#include "client/conn.h"
#include "proto/keys.h"
#include "proto/pilotdir.h"
#include "proto/schema.h"
#include "tests/unit/helpers.h"
#include "tests/unit/tap.h"

/* A local pilot 'id' with an info file; 'db' fills its state DB. */
static void make_pilot(const char *home, const char *id, const char *sql)
{
    char dir[PL_PATH_MAX], path[PL_PATH_MAX + 16];
    struct pl_info in = { .job = 0, .nodes = 1, .created = 1.7e9 };
    sqlite3 *db;

    snprintf(dir, sizeof(dir), "%s/pilots/%s", home, id);
    pl_mkdirs(dir, 0700);
    pl_keys_path(dir, path, sizeof(path));
    pl_keys_create(path, NULL);
    snprintf(in.id, sizeof(in.id), "%s", id);
    snprintf(in.mode, sizeof(in.mode), "local");
    pl_info_write(dir, &in, NULL);
    if (!sql)
        return;
    pl_path_db(dir, path, sizeof(path));
    if (sqlite3_open(path, &db) != SQLITE_OK
        || sqlite3_exec(db, PL_SCHEMA_SQL, NULL, NULL, NULL) != SQLITE_OK
        || sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        diag("cannot fill %s: %s", path, sqlite3_errmsg(db));
    sqlite3_close(db);
}

/* An endpoint for pilot 'id' saying pilotd is 'pid' on this host. */
static void make_endpoint(const char *home, const char *id, long pid)
{
    char dir[PL_PATH_MAX];
    struct pl_endpoint ep = { .pid = pid };

    snprintf(dir, sizeof(dir), "%s/pilots/%s", home, id);
    snprintf(ep.client, sizeof(ep.client), "tcp://127.0.0.1:9");
    snprintf(ep.agent, sizeof(ep.agent), "tcp://127.0.0.1:9");
    gethostname(ep.host, sizeof(ep.host));
    pl_endpoint_write(dir, &ep, NULL);
}

static void remove_endpoint(const char *home, const char *id)
{
    char dir[PL_PATH_MAX];

    snprintf(dir, sizeof(dir), "%s/pilots/%s", home, id);
    pl_endpoint_remove(dir);
}

static const char rows[] =
    "INSERT INTO tasks(name, argv, cwd, state, node, cores, attempts, "
    "  exit_code, submit_time, start_time, end_time) VALUES "
    "  ('a', '[\"true\"]', '/', 'done', 'n1', '0', 1, 0, 10, 11, 12),"
    "  (NULL, '[\"false\"]', '/', 'failed', 'n1', '1', 1, 1, 10, 11, 13),"
    "  (NULL, '[\"sleep\",\"9\"]', '/', 'running', 'n1', '2,3', 1, NULL, "
    "   10, 11, NULL),"
    "  (NULL, '[\"sleep\",\"9\"]', '/', 'queued', NULL, NULL, 0, NULL, "
    "   10, NULL, NULL);"
    "INSERT INTO events(task, time, state) VALUES (1, 10, 'queued'),"
    "  (1, 11, 'running'), (1, 12, 'done');"
    "INSERT INTO nodes (name, cores, gpus, state, joined, last_seen)"
    " VALUES ('n1', '0,1,2,3', '', 'up', 1, 2);";

static void test_down(struct pl_cli *cli, const char *home)
{
    struct pl_error err;
    struct pl_conn *c;
    json_t *j;
    uint64_t ids[] = { 2, 99 };

    make_pilot(home, "p1", rows);
    c = pl_conn_open(&cli->find, PL_CONN_READ, &err);
    ok(c && c->db && !c->rpc, "a down pilot is read from its DB");
    if (!c)
        return;
    is_str(c->pilot.id, "p1", "... and it is p1");
    is(c->pilot.state, PL_PILOT_DOWN, "... which is down");
    j = pl_conn_list(c, NULL, NULL, NULL, 0, &err);
    is(json_array_size(j), 4, "list: 4 tasks");
    json_decref(j);
    j = pl_conn_list(c, "failed", NULL, NULL, 0, &err);
    is(json_array_size(j), 1, "list --state failed: 1 task");
    json_decref(j);
    uint64_t one = 1, twelve = 12;
    j = pl_conn_show(c, &(struct pl_sel_req){ .ids = &one, .nids = 1 }, &err);
    is(json_array_size(json_object_get(j, "events")), 3, "show: 3 events");
    json_decref(j);
    j = pl_conn_show(c, &(struct pl_sel_req){ .ids = &twelve, .nids = 1 },
                     &err);
    ok(!j && errno == ENOENT && !strcmp(err.text, "no task 12"),
       "show of an unknown task: %s", err.text);
    j = pl_conn_counts(c, &(struct pl_sel_req){ .ids = ids, .nids = 2 }, &err);
    is(json_integer_value(json_object_get(j, "failed")), 1, "counts: 1 failed");
    is(json_array_size(json_object_get(j, "unknown")), 1, "counts: 1 unknown");
    json_decref(j);
    j = pl_conn_status(c, &err);
    is_str(json_string_value(json_object_get(j, "state")), "down",
           "status: state down");
    is(json_integer_value(json_object_get(json_object_get(j, "cores"),
                                          "total")), 4, "status: 4 cores");
    is(json_integer_value(json_object_get(json_object_get(j, "cores"),
                                          "busy")), 2,
       "status: 2 busy (the running task's)");
    is(json_integer_value(json_object_get(json_object_get(j, "tasks"),
                                          "queued")), 1, "status: 1 queued");
    json_decref(j);
    pl_conn_free(c);

    c = pl_conn_open(&cli->find, PL_CONN_WRITE, &err);
    ok(!c && strstr(err.text, "no pilot running"),
       "write, no --pilot: %s", err.text);
    cli->find.pilot = "p1";
    c = pl_conn_open(&cli->find, PL_CONN_WRITE, &err);
    ok(!c && strstr(err.text, "pilot p1 is down"),
       "write --pilot p1: %s", err.text);
    cli->find.pilot = "p7";
    c = pl_conn_open(&cli->find, PL_CONN_READ, &err);
    ok(!c && strstr(err.text, "no pilot p7 under"), "--pilot p7: %s",
       err.text);
    cli->find.pilot = NULL;
}

static void test_stale(struct pl_cli *cli, const char *home)
{
    struct pl_error err;
    struct pl_conn *c;
    pid_t pid = fork();

    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0); /* a pid that no longer runs */
    make_endpoint(home, "p1", pid);
    c = pl_conn_open(&cli->find, PL_CONN_WRITE, &err);
    ok(!c && strstr(err.text, "pilot p1 is stale: its pilotd")
           && strstr(err.text, "readable with --pilot p1"),
       "write to a stale pilot: %s", err.text);
    c = pl_conn_open(&cli->find, PL_CONN_READ, &err);
    ok(c && c->db && c->pilot.state == PL_PILOT_STALE,
       "read of a stale pilot: its DB");
    pl_conn_free(c);
    c = pl_conn_open(&cli->find, PL_CONN_STOP, &err);
    ok(c && !c->rpc && c->pilot.state == PL_PILOT_STALE,
       "stop finds the one stale pilot");
    pl_conn_free(c);
    remove_endpoint(home, "p1");
}

static void test_running(struct pl_cli *cli, const char *home)
{
    struct pl_error err;
    struct pl_conn *c;

    /* our own pid stands for a live pilotd; nothing listens on port 9 */
    make_pilot(home, "p2", NULL);
    make_pilot(home, "p3", rows);
    make_endpoint(home, "p2", getpid());
    c = pl_conn_open(&cli->find, PL_CONN_WRITE, &err);
    ok(c && c->rpc && !strcmp(c->pilot.id, "p2"),
       "the one running pilot is chosen for a write");
    pl_conn_free(c);
    c = pl_conn_open(&cli->find, PL_CONN_READ, &err);
    ok(c && c->rpc && !strcmp(c->pilot.id, "p2"),
       "... and for a read");
    pl_conn_free(c);

    /* the client's keys: private, or no connection */
    char key[PL_PATH_MAX + 64];
    snprintf(key, sizeof(key), "%s/pilots/p2/keys/client.key", home);
    chmod(key, 0644);
    c = pl_conn_open(&cli->find, PL_CONN_READ, &err);
    ok(!c && errno == EACCES && strstr(err.text, "client.key is open to "
                                       "group or others (mode 0644"),
       "a world-readable client.key: %s", err.text);
    chmod(key, 0600);
    snprintf(key, sizeof(key), "%s/elsewhere", home);
    cli->find.keys = key;
    c = pl_conn_open(&cli->find, PL_CONN_READ, &err);
    ok(!c && errno == ENOENT && strstr(err.text, "no keys: ")
           && strstr(err.text, "/elsewhere"),
       "PILOT_KEYS naming no directory: %s", err.text);
    cli->find.keys = NULL;
    make_endpoint(home, "p3", getpid());
    c = pl_conn_open(&cli->find, PL_CONN_READ, &err);
    ok(!c && strstr(err.text, "several pilots are running (p2, p3): "
                    "choose one with --pilot ID or PILOT_ID"),
       "two running: %s", err.text);
    cli->find.pilot = "p3";
    c = pl_conn_open(&cli->find, PL_CONN_READ, &err);
    ok(c && c->rpc && !strcmp(c->pilot.id, "p3"), "--pilot p3 chooses");
    pl_conn_free(c);
    cli->find.pilot = NULL;
    remove_endpoint(home, "p2");
    remove_endpoint(home, "p3");
    /* none runs: reads go to the newest pilot that has a DB */
    c = pl_conn_open(&cli->find, PL_CONN_READ, &err);
    ok(c && c->db && !strcmp(c->pilot.id, "p3"),
       "no pilot running: a read uses the newest with a state (p3)");
    pl_conn_free(c);
}

int main(void)
{
    struct pl_cli cli;
    struct pl_error err;
    char tmp[64], home[128];
    struct pl_conn *c;

    plan(28);
    if (!t_tmpdir("client-conn", tmp, sizeof(tmp)))
        return 1;
    snprintf(home, sizeof(home), "%s/home", tmp);
    setenv("PILOT_HOME", home, 1);
    unsetenv("PILOT_ID");
    unsetenv("PILOT_TIMEOUT");
    ok(pl_cli_init(&cli, &err) == 0, "cli init");
    c = pl_conn_open(&cli.find, PL_CONN_READ, &err);
    ok(!c && !strcmp(err.text, "no pilot running (start one with 'pilot "
                     "up')"), "no pilot at all: %s", err.text);
    test_down(&cli, home);
    test_stale(&cli, home);
    test_running(&cli, home);
    pl_cli_fini(&cli);
    t_rmtree(tmp);
    return done_testing();
}
