/* tests/unit/test_lib_pilot.c - libpilot without a running pilot: finding
 * one, the errors, a down pilot's state read through the library, the
 * arguments of every op, log paths, one connection from many threads */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "lib/pilot.h"
#include "proto/journal.h"
#include "proto/keys.h"
#include "proto/pilotdir.h"
#include "proto/schema.h"
#include "tests/unit/helpers.h"
#include "tests/unit/tap.h"

/* A local pilot 'id' that ran once: its info, keys and state DB. */
static void make_pilot(const char *home, const char *id)
{
    static const char rows[] =
        "INSERT INTO tasks(name, argv, cwd, state, node, cores, attempts, "
        "  exit_code, submit_time, start_time, end_time) VALUES "
        "  ('a', '[\"true\"]', '/', 'done', 'n1', '0', 1, 0, 10, 11, 12),"
        "  (NULL, '[\"false\"]', '/', 'failed', 'n1', '1', 1, 1, 10, 11, 13),"
        "  ('c', '[\"sleep\",\"9\"]', '/', 'queued', NULL, NULL, 0, NULL, "
        "   10, NULL, NULL);"
        "INSERT INTO events(task, time, state) VALUES (1, 10, 'queued'),"
        "  (1, 11, 'running'), (1, 12, 'done');"
        "INSERT INTO nodes (name, cores, gpus, state, joined, last_seen)"
        " VALUES ('n1', '0,1', '', 'up', 1, 2);";
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
    pl_path_db(dir, path, sizeof(path));
    if (sqlite3_open(path, &db) != SQLITE_OK
        || sqlite3_exec(db, PL_SCHEMA_SQL, NULL, NULL, NULL) != SQLITE_OK
        || sqlite3_exec(db, rows, NULL, NULL, NULL) != SQLITE_OK)
        diag("cannot fill %s: %s", path, sqlite3_errmsg(db));
    sqlite3_close(db);
}

/* pilot_call(); the reply parsed into *out (NULL on failure). */
static int call(struct pilot *p, const char *op, const char *args,
                json_t **out, struct pilot_error *err)
{
    char *reply = NULL;
    int rc;

    memset(err, 0, sizeof(*err));
    rc = pilot_call(p, op, args, &reply, err);
    *out = reply ? json_loads(reply, 0, NULL) : NULL;
    pilot_free(reply);
    return rc;
}

/* Whether the failure is errno 'e' in both errno and err, with a text
 * holding 'text'. */
static int failed(int rc, const struct pilot_error *err, int e,
                  const char *text)
{
    int saved = errno;

    if (rc == 0 || saved != e || err->errnum != e || !strstr(err->text, text)) {
        diag("rc %d errno %d err {%d, '%s'}; want errno %d, '%s'", rc, saved,
             err->errnum, err->text, e, text);
        return 0;
    }
    return 1;
}

static void test_find(const char *home)
{
    struct pilot_error err = { 0 };
    struct pilot *p;

    errno = 0;
    p = pilot_open(NULL, home, 0, &err);
    ok(!p && failed(-1, &err, ENOENT, "no pilot running (start one with "
                    "'pilot up')"),
       "no pilot running: NULL, ENOENT, the CLI's words: %s", err.text);
    p = pilot_open("p7", home, 0, &err);
    ok(!p && failed(-1, &err, ENOENT, "no pilot p7 under"),
       "an unknown id: ENOENT: %s", err.text);
    p = pilot_open("seven", home, 0, &err);
    ok(!p && failed(-1, &err, EINVAL, "is not a pilot id"),
       "a bad id: EINVAL: %s", err.text);
    p = pilot_open(NULL, home, 0, NULL);
    ok(!p && errno == ENOENT, "err may be NULL: errno still says ENOENT");
    setenv("PILOT_TIMEOUT", "soon", 1);
    p = pilot_open("p1", home, 0, &err);
    ok(!p && failed(-1, &err, EINVAL, "PILOT_TIMEOUT"),
       "a bad PILOT_TIMEOUT: EINVAL: %s", err.text);
    unsetenv("PILOT_TIMEOUT");
}

static void test_down(const char *home)
{
    struct pilot_error err;
    struct pilot *p;
    json_t *j;
    char *reply = (char *)"x";
    int rc;

    make_pilot(home, "p1");
    p = pilot_open("p1", home, 2000, &err);
    if (!ok(p != NULL, "a down pilot named by its id opens: %s",
            p ? "" : err.text))
        return;
    is_str(pilot_id(p), "p1", "pilot_id");
    ok(strstr(pilot_dir(p), "/pilots/p1") != NULL, "pilot_dir: %s",
       pilot_dir(p));
    is(pilot_is_live(p), 0, "it reads the state database: not live");

    rc = call(p, "list", NULL, &j, &err);
    ok(rc == 0 && json_array_size(j) == 3, "list: its 3 tasks");
    json_decref(j);
    rc = call(p, "list", "{\"state\": \"failed\"}", &j, &err);
    ok(rc == 0 && json_array_size(j) == 1
           && json_integer_value(json_object_get(json_array_get(j, 0),
                                                 "id")) == 2,
       "list {state: failed}: task 2");
    json_decref(j);
    rc = call(p, "list", "{\"ids\": [1, \"3\"], \"limit\": 1}", &j, &err);
    ok(rc == 0 && json_array_size(j) == 1, "list {ids, limit 1}: one task");
    json_decref(j);
    rc = call(p, "show", "{\"id\": 1}", &j, &err);
    ok(rc == 0 && !strcmp(json_string_value(json_object_get(j, "name")), "a")
           && json_array_size(json_object_get(j, "events")) == 3,
       "show {id: 1}: task a with its 3 events");
    json_decref(j);
    rc = call(p, "show", "{\"id\": 99}", &j, &err);
    ok(!j && failed(rc, &err, ENOENT, "no task 99"), "show 99: ENOENT: %s",
       err.text);
    rc = call(p, "counts", NULL, &j, &err);
    ok(rc == 0 && json_integer_value(json_object_get(j, "total")) == 3
           && json_integer_value(json_object_get(j, "done")) == 1,
       "counts: 3 in all, 1 done");
    json_decref(j);
    rc = call(p, "results", "{\"ids\": [2, \"1\", 99]}", &j, &err);
    ok(rc == 0 && json_array_size(j) == 3
           && json_integer_value(json_object_get(json_array_get(j, 1),
                                                 "id")) == 1
           && json_is_null(json_object_get(json_array_get(j, 0), "status"))
           && json_is_null(json_object_get(json_array_get(j, 2), "status")),
       "results {ids: [2, \"1\", 99]}: one entry each, none a call's: "
       "null");
    json_decref(j);
    rc = call(p, "status", "", &j, &err);
    ok(rc == 0 && !strcmp(json_string_value(json_object_get(j, "state")),
                          "down"),
       "status: state down");
    json_decref(j);
    rc = call(p, "cancel", "{\"ids\": [3]}", &j, &err);
    ok(!j && failed(rc, &err, ENOTCONN, "pilot p1 is down"),
       "cancel on a down pilot: ENOTCONN: %s", err.text);
    rc = pilot_submit(p, "[{\"argv\": [\"true\"]}]", &reply, &err);
    ok(!reply && failed(rc, &err, ENOTCONN, "pilot p1 is down"),
       "submit on a down pilot: ENOTCONN, no reply: %s", err.text);
    pilot_close(p);
    /* PILOT_ID names it as well */
    setenv("PILOT_ID", "p1", 1);
    p = pilot_open(NULL, home, 0, &err);
    ok(p && !strcmp(pilot_id(p), "p1"), "PILOT_ID=p1 chooses it");
    unsetenv("PILOT_ID");
    pilot_close(p);
}

/* Arguments refused before anything is sent. */
static void test_args(const char *home)
{
    static const struct {
        const char *op, *args, *text;
    } cases[] = {
        { "frobnicate", NULL, "unknown op 'frobnicate'" },
        { "list", "{\"colour\": 1}", "list: unknown field 'colour'" },
        { "list", "[1]", "must be a JSON object" },
        { "list", "{\"state\": \"sleepy\"}", "'state' must be a task state" },
        { "list", "{\"tags\": [\"a b\"]}", "is not KEY=VALUE or KEY" },
        { "list", "{\"limit\": -1}", "'limit' must be" },
        { "list", "{", "arguments not JSON" },
        { "show", NULL, "'id' must be one task id" },
        { "show", "{\"id\": \"1.x\"}", "is not a task id" },
        { "cancel", "{}", "no task named" },
        { "cancel", "{\"ids\": [0]}", "'ids' must be task ids" },
        { "pool_start", "{\"name\": \"-x\"}", "'name' must be a pool's name" },
        { "pool_start", "{\"name\": \"w\", \"launcher\": \"ssh\"}",
          "'launcher' must be srun or mpirun" },
        { "status", "{\"verbose\": true}", "unknown field 'verbose'" },
        { "results", "{}", "'ids' must be a list of 1 to 1000 task ids" },
        { "results", "{\"ids\": [\"3.1\"]}", "'ids' must be task ids" },
        { "results", "{\"ids\": [1], \"wait\": 1}",
          "results: unknown field 'wait'" },
    };
    static const struct {
        const char *specs, *text;
    } bad_specs[] = {
        { "{\"argv\": [\"x\"]}", "want a JSON array" },
        { "[]", "want a JSON array" },
        { "[{}]", "no command" },
        { "[{\"argv\": [\"x\"]}, {\"argv\": [\"y\"], \"colour\": 1}]",
          "specs[1]: unknown field 'colour'" },
        { "[{\"argv\": [\"x\"], \"ranks\": 0}]", "ranks" },
        { "[{\"argv\": [\"x\"], \"comm\": \"smoke\"}]", "unknown comm" },
        { "[{\"cmd\": \"x\", \"argv\": [\"x\"]}]", "give one of them" },
        { "[{\"argv\": [\"x\"], \"array\": \"5-1\"}]", "ends before" },
        { "[{\"input\": \"gAVLBS4=\", \"refs\": [1], \"after\": "
          "[\"1:any\"]}]", "refs: 1 is in after with :any" },
        { "[{\"input\": \"%%%\"}]", "field 'input': want the pickled call" },
    };
    struct pilot_error err;
    struct pilot *p = pilot_open("p1", home, 2000, &err);
    char *reply;
    json_t *j;

    if (!ok(p != NULL, "open p1 again"))
        return;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = call(p, cases[i].op, cases[i].args, &j, &err);
        ok(!j && failed(rc, &err, EINVAL, cases[i].text),
           "%s %s: EINVAL: %s", cases[i].op,
           cases[i].args ? cases[i].args : "(none)", err.text);
    }
    for (size_t i = 0; i < sizeof(bad_specs) / sizeof(bad_specs[0]); i++) {
        int rc = pilot_submit(p, bad_specs[i].specs, &reply, &err);
        ok(!reply && failed(rc, &err, EINVAL, bad_specs[i].text),
           "submit %s: EINVAL before anything is sent: %s",
           bad_specs[i].specs, err.text);
    }
    errno = 0;
    ok(pilot_call(p, NULL, NULL, &reply, &err) < 0 && errno == EINVAL,
       "a NULL op: EINVAL");
    pilot_close(p);
}

static void test_log_path(const char *home)
{
    struct pilot_error err;
    struct pilot *p = pilot_open("p1", home, 2000, &err);
    char buf[PL_PATH_MAX + 64], want[PL_PATH_MAX + 64];

    if (!ok(p != NULL, "open p1 for log paths"))
        return;
    snprintf(want, sizeof(want), "%s/tasks/1/1234.out", pilot_dir(p));
    ok(pilot_log_path(p, 1234, 0, PILOT_STDOUT, buf, sizeof(buf)) == 0
           && !strcmp(buf, want),
       "task 1234's stdout: %s", buf);
    snprintf(want, sizeof(want), "%s/tasks/0/12.2.err", pilot_dir(p));
    ok(pilot_log_path(p, 12, 2, PILOT_STDERR, buf, sizeof(buf)) == 0
           && !strcmp(buf, want),
       "task 12's stderr of attempt 2: %s", buf);
    ok(pilot_log_path(p, 12, 0, 3, buf, sizeof(buf)) < 0 && errno == EINVAL,
       "stream 3: EINVAL");
    ok(pilot_log_path(p, 12, 0, PILOT_STDOUT, buf, 8) < 0
           && errno == ENAMETOOLONG,
       "a buffer too small: ENAMETOOLONG");
    pilot_close(p);
}

/* All that a reader gives until its task is read to the end ('final'),
 * as one string (freed by the caller); *got: the last read's value. */
static char *read_all(struct pilot_logs *l, int final, int *got)
{
    struct pilot_error err;
    char *out = calloc(1, 1), *data;
    size_t n = 0, len;

    *got = pilot_logs_read(l, final, &data, &len, &err);
    if (*got < 0)
        diag("pilot_logs_read: %s", err.text);
    if (data) {
        out = realloc(out, n + len + 1);
        memcpy(out + n, data, len);
        n += len;
        out[n] = '\0';
    }
    pilot_free(data);
    return out;
}

/* One reader's whole output (final), compared with 'want'. */
static void logs_is(struct pilot *p, const char *task, int stream, long rank,
                    int flags, const char *want, const char *what)
{
    struct pilot_error err;
    struct pilot_logs *l = pilot_logs_open(p, task, 0, stream, rank, flags,
                                           &err);
    int got = -1;
    char *out = l ? read_all(l, 1, &got) : NULL;

    ok(out && got == 1 && !strcmp(out, want), "%s", what);
    if (out && strcmp(out, want))
        diag("got '%s', want '%s'", out, want);
    free(out);
    pilot_logs_close(l);
}

/* A task's output read from a journal written by the agent's writer
 * (pl_jw_*), and from its files: pilot logs' reader through libpilot. */
static void test_logs(const char *home)
{
    struct pilot_error err;
    struct pilot *p = pilot_open("p1", home, 2000, &err);
    struct pl_jstate r0 = { .id = 5, .attempt = 1, .rank = 0 };
    struct pl_jstate r1 = { .id = 5, .attempt = 1, .rank = 1 };
    struct pl_jstate other = { .id = 4, .attempt = 1, .rank = 0 };
    const char *t5 = "{\"id\": 5, \"ranks\": 2, \"attempts\": 1}";
    struct pl_error e;
    struct pl_jw *w;
    struct pilot_logs *l;
    char *out, *paths = NULL;
    int got;

    if (!ok(p != NULL, "open p1 for its output"))
        return;
    /* before anything is written: none yet, and its files are named */
    l = pilot_logs_open(p, t5, 0, PILOT_STDOUT, -1, 0, &err);
    out = l ? read_all(l, 0, &got) : NULL;
    ok(l && got == 0 && out && !*out, "no output yet: 0, nothing");
    got = l ? pilot_logs_paths(l, &paths, &err) : -1;
    ok(got == 0 && paths && strstr(paths, "5.r0.out")
           && strstr(paths, "5.r1.out"),
       "... its paths are its ranks' files");
    diag("%s", paths ? paths : "-");
    free(out);
    pilot_free(paths);
    paths = NULL;
    /* the ranks write pieces of lines in turn, another task between */
    if (!(w = pl_jw_open(pilot_dir(p), "n1", 0, &e))) {
        diag("pl_jw_open: %s", e.text);
        pilot_close(p);
        return;
    }
    pl_jw_write(w, &r0, PL_J_STDOUT, "rank ", 5, &e);
    pl_jw_write(w, &r1, PL_J_STDOUT, "rank ", 5, &e);
    pl_jw_write(w, &other, PL_J_STDOUT, "not ours\n", 9, &e);
    pl_jw_write(w, &r1, PL_J_STDOUT, "one\n", 4, &e);
    pl_jw_write(w, &r0, PL_J_STDOUT, "zero\nr0 ", 8, &e);
    pl_jw_write(w, &r1, PL_J_STDERR, "oops\n", 5, &e);
    /* a follower sees the whole lines so far, nothing cut */
    out = l ? read_all(l, 0, &got) : NULL;
    ok(out && got == 1 && !strcmp(out, "rank one\nrank zero\n"),
       "following: whole lines only, as they were completed");
    free(out);
    got = l ? pilot_logs_paths(l, &paths, &err) : -1;
    ok(got == 0 && paths && strstr(paths, "/journal/n1/000001.pj\"]")
           && !strstr(paths, ".out"),
       "... its paths are now the journal segment");
    diag("%s", paths ? paths : "-");
    pilot_free(paths);
    pl_jw_write(w, &r0, PL_J_STDOUT, "tail", 4, &e);
    pl_jw_end(w, &r0, &e);
    pl_jw_end(w, &r1, &e);
    out = l ? read_all(l, 1, &got) : NULL;
    ok(out && got == 1 && !strcmp(out, "r0 tail\n"),
       "... at the end, rank 0's last line made whole");
    free(out);
    pilot_logs_close(l);
    pl_jw_close(w);
    logs_is(p, t5, PILOT_STDOUT, -1, 0,
            "rank one\nrank zero\nr0 tail\n",
            "read at once: whole lines, as completed on the node");
    logs_is(p, t5, PILOT_STDOUT, -1, PILOT_LOGS_LABEL,
            "1: rank one\n0: rank zero\n0: r0 tail\n",
            "PILOT_LOGS_LABEL: each line after its rank");
    logs_is(p, t5, PILOT_STDOUT, 0, 0, "rank zero\nr0 tail",
            "rank 0 alone: its bytes as written");
    logs_is(p, t5, PILOT_STDERR, -1, 0, "oops\n", "stderr: rank 1's");
    errno = 0;
    ok(!pilot_logs_open(p, t5, 0, PILOT_STDOUT, 2, 0, &err)
           && err.errnum == EINVAL && strstr(err.text, "no rank 2"),
       "rank 2 of 2 ranks: EINVAL (%s)", err.text);
    ok(!pilot_logs_open(p, "[5]", 0, PILOT_STDOUT, -1, 0, &err)
           && err.errnum == EINVAL,
       "a task that is not an object: EINVAL");
    ok(!pilot_logs_open(p, t5, 0, 3, -1, 0, &err) && err.errnum == EINVAL,
       "stream 3: EINVAL");
    /* a task with files: they win, read as they are */
    char path[PL_PATH_MAX + 64];
    if (pilot_log_path(p, 7, 1, PILOT_STDOUT, path, sizeof(path)) == 0) {
        char dir[PL_PATH_MAX + 64];
        snprintf(dir, sizeof(dir), "%s", path);
        *strrchr(dir, '/') = '\0';
        pl_mkdirs(dir, 0700);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs("from a file\nno newline", f);
            fclose(f);
        }
    }
    logs_is(p, "{\"id\": 7}", PILOT_STDOUT, -1, 0,
            "from a file\nno newline", "one rank with a file: the file");
    pilot_close(p);
}

struct reader {
    struct pilot *p;
    int fails;
};

static void *read_loop(void *arg)
{
    struct reader *r = arg;

    for (int i = 0; i < 50; i++) {
        struct pilot_error err;
        char *reply = NULL;
        if (pilot_call(r->p, i % 2 ? "list" : "counts", NULL, &reply, &err)
                < 0
            || !reply)
            r->fails++;
        pilot_free(reply);
    }
    return NULL;
}

/* One struct pilot read by 8 threads at once: each call whole. */
static void test_threads(const char *home)
{
    struct pilot_error err;
    struct pilot *p = pilot_open("p1", home, 2000, &err);
    struct reader r[8];
    pthread_t t[8];
    int fails = 0;

    if (!ok(p != NULL, "open p1 for threads"))
        return;
    for (int i = 0; i < 8; i++) {
        r[i] = (struct reader){ .p = p };
        pthread_create(&t[i], NULL, read_loop, &r[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        fails += r[i].fails;
    }
    is(fails, 0, "8 threads x 50 calls on one connection: none failed");
    pilot_close(p);
}

/* A watch needs a running pilotd; its arguments are checked first. */
static void test_watch(const char *home)
{
    struct pilot_error err;
    struct pilot *p = pilot_open("p1", home, 2000, &err);
    struct pilot_watch *w;
    char *out = (char *)"x";

    if (!ok(p != NULL, "open p1 (down) for a watch"))
        return;
    errno = 0;
    w = pilot_watch_open(p, "{\"ids\": [1]}", &err);
    ok(!w && errno == ENOTCONN && err.errnum == ENOTCONN
           && strstr(err.text, "not running"),
       "pilot_watch_open on a pilot that does not run: ENOTCONN (%s)",
       err.text);
    w = pilot_watch_open(p, "{\"all\": 1}", &err);
    ok(!w && err.errnum == EINVAL && strstr(err.text, "'all' must be"),
       "... a bad argument is refused first: EINVAL (%s)", err.text);
    ok(pilot_submit_opts(p, "[{\"argv\": [\"true\"]}]",
                         "{\"watch\": 3}", &out, &err) < 0
           && err.errnum == EINVAL && !out,
       "pilot_submit_opts with a bad 'watch': EINVAL (%s)", err.text);
    ok(pilot_submit_opts(p, "[{\"argv\": [\"true\"]}]", "{\"wach\": 3}",
                         &out, &err) < 0
           && err.errnum == EINVAL && strstr(err.text, "unknown field"),
       "... an unknown option: EINVAL (%s)", err.text);
    pilot_watch_close(NULL, 1);
    pilot_close(p);
}

int main(void)
{
    char tmp[128], home[256];

    plan(76);
    is(pilot_api_version(), PILOT_API_VERSION, "pilot_api_version() is %d",
       PILOT_API_VERSION);
    if (!t_tmpdir("lib-pilot", tmp, sizeof(tmp)))
        return 1;
    snprintf(home, sizeof(home), "%s/home", tmp);
    unsetenv("PILOT_ID");
    unsetenv("PILOT_KEYS");
    unsetenv("PILOT_TIMEOUT");
    setenv("PILOT_HOME", "/nonexistent/not-this-one", 1); /* home wins */
    test_find(home);
    test_down(home);
    test_args(home);
    test_log_path(home);
    test_logs(home);
    test_threads(home);
    test_watch(home);
    pilot_close(NULL);
    pilot_free(NULL);
    t_rmtree(tmp);
    return done_testing();
}
